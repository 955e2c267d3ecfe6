//! Reading the kernel's trace dump (`kernel/src/trace.rs`) from console lines.
//!
//! `TRACE(TRACE_DUMP)` (the shell's `trace dump`) prints, with no time/core prefix:
//!
//! ```text
//! TRACE begin tsc_hz N
//! TRACE <core> <ns since reset> <kind> <pid core.serial, 0.0 = none> <a> <b>
//! TRACE end <count> lost <lost>
//! ```
//!
//! each core's events oldest first, one core after the other. [`parse`] takes the last
//! complete dump among the console lines and ignores every other line (kernel log lines may
//! come in between). Pure: no I/O.

use abi::Pid;
use anyhow::{bail, Result};

/// What an event records; `a` and `b` say more, per kind (see `kernel/src/trace.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Kernel entry: a = vector (0x100: system call; then b = call number).
    Entry,
    /// Back to user mode: a = vector.
    Exit,
    /// Context switch: a = thread left, b = thread entered (0: idle).
    Switch,
    /// RPCC message sent: a = destination core, b = tag.
    RpccSend,
    /// RPCC message received: a = source core, b = tag.
    RpccReceive,
    /// An agent starts a request: a = source core, b = tag.
    AgentStart,
    /// The agent is done: a = source core, b = tag.
    AgentEnd,
    /// Waiting for the big lock starts.
    LockWait,
    /// The big lock is taken.
    LockTaken,
    /// An RPCC request is submitted: a = destination core, b = tag.
    Submit,
    /// Its result is collected: b = tag.
    Complete,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Entry,
        Kind::Exit,
        Kind::Switch,
        Kind::RpccSend,
        Kind::RpccReceive,
        Kind::AgentStart,
        Kind::AgentEnd,
        Kind::LockWait,
        Kind::LockTaken,
        Kind::Submit,
        Kind::Complete,
    ];

    /// The word the kernel prints.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Entry => "entry",
            Kind::Exit => "exit",
            Kind::Switch => "switch",
            Kind::RpccSend => "rpcc_send",
            Kind::RpccReceive => "rpcc_receive",
            Kind::AgentStart => "agent_start",
            Kind::AgentEnd => "agent_end",
            Kind::LockWait => "lock_wait",
            Kind::LockTaken => "lock_taken",
            Kind::Submit => "submit",
            Kind::Complete => "complete",
        }
    }

    pub fn from_name(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == word)
    }
}

/// One kernel event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub core: usize,
    /// Nanoseconds since machine reset (the TSC, the same clock on every core).
    pub ns: u64,
    pub kind: Kind,
    /// The process running on that core then (None: the kernel's own context).
    pub pid: Option<Pid>,
    pub a: u64,
    pub b: u64,
}

/// One dump: every core's events, each core's oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dump {
    pub tsc_hz: u64,
    pub events: Vec<Event>,
    /// Events the kernel said it printed (`TRACE end N`).
    pub declared: u64,
    /// Events overwritten before the dump (the rings were full).
    pub lost: u64,
    /// `TRACE` lines inside the dump that did not parse (cut by other console output).
    pub malformed: usize,
}

impl Dump {
    /// The highest core number with an event, plus one.
    pub fn cores(&self) -> usize {
        self.events.iter().map(|e| e.core + 1).max().unwrap_or(0)
    }

    /// Events per core, index = core.
    pub fn per_core(&self) -> Vec<usize> {
        let mut n = vec![0; self.cores()];
        for e in &self.events {
            n[e.core] += 1;
        }
        n
    }

    /// One core's events, in the order the core recorded them.
    pub fn of_core(&self, core: usize) -> impl Iterator<Item = (usize, &Event)> {
        self.events
            .iter()
            .enumerate()
            .filter(move |(_, e)| e.core == core)
    }
}

const PREFIX: &str = "TRACE ";

/// Is `line` one event line of a dump (not its begin/end)? For hiding them from the console.
pub fn is_event_line(line: &str) -> bool {
    line.strip_prefix(PREFIX)
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

/// `core.serial`; `0.0` is none.
fn parse_pid(word: &str) -> Option<Option<Pid>> {
    let (c, s) = word.split_once('.')?;
    let (core, serial): (usize, u32) = (c.parse().ok()?, s.parse().ok()?);
    Some(((core, serial) != (0, 0)).then(|| Pid::new(core, serial)))
}

/// One `TRACE <core> <ns> <kind> <pid> <a> <b>` line.
pub fn parse_event(line: &str) -> Option<Event> {
    let w: Vec<&str> = line.strip_prefix(PREFIX)?.split_whitespace().collect();
    let [core, ns, kind, pid, a, b] = w[..] else {
        return None;
    };
    Some(Event {
        core: core.parse().ok()?,
        ns: ns.parse().ok()?,
        kind: Kind::from_name(kind)?,
        pid: parse_pid(pid)?,
        a: a.parse().ok()?,
        b: b.parse().ok()?,
    })
}

/// The last complete dump among `lines` (console lines, `\r` already removed or not).
pub fn parse<S: AsRef<str>>(lines: &[S]) -> Result<Dump> {
    let lines: Vec<&str> = lines
        .iter()
        .map(|l| l.as_ref().trim_end_matches('\r'))
        .collect();
    let Some(begin) = lines.iter().rposition(|l| l.starts_with("TRACE begin")) else {
        bail!(
            "no 'TRACE begin' line on the console: was Musubi booted with trace=on, and did \
             'trace dump' run?"
        );
    };
    let mut dump = Dump::default();
    let words: Vec<&str> = lines[begin].split_whitespace().collect();
    if let ["TRACE", "begin", "tsc_hz", hz] = words[..] {
        dump.tsc_hz = hz.parse().unwrap_or(0);
    }
    for line in &lines[begin + 1..] {
        if let Some(rest) = line.strip_prefix("TRACE end") {
            let w: Vec<&str> = rest.split_whitespace().collect();
            let (Some(n), Some(lost)) = (match w[..] {
                [n, "lost", lost] => (n.parse().ok(), lost.parse().ok()),
                _ => (None, None),
            }) else {
                bail!("malformed dump end: '{line}'");
            };
            dump.declared = n;
            dump.lost = lost;
            return Ok(dump);
        }
        if !line.starts_with(PREFIX) {
            continue;
        }
        match parse_event(line) {
            Some(e) => dump.events.push(e),
            None => dump.malformed += 1,
        }
    }
    bail!(
        "the trace dump has no 'TRACE end' line (cut short after {} events)",
        dump.events.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
musubi> trace dump\r
TRACE begin tsc_hz 2600000000\r
TRACE 0 1000 entry 0.1 256 8\r
[   0.100000 c1] some kernel log line\r
TRACE 0 2000 exit 0.1 256 0\r
TRACE 1 1500 rpcc_receive 0.0 0 7\r
TRACE 1 1600 what 0.0 0 7\r
TRACE end 4 lost 3\r
trace: 4 events dumped\r
";

    #[test]
    fn parses_a_dump() {
        let lines: Vec<&str> = SAMPLE.lines().collect();
        let d = parse(&lines).unwrap();
        assert_eq!(d.tsc_hz, 2_600_000_000);
        assert_eq!((d.declared, d.lost, d.malformed), (4, 3, 1));
        assert_eq!(d.events.len(), 3);
        assert_eq!(
            d.events[0],
            Event {
                core: 0,
                ns: 1000,
                kind: Kind::Entry,
                pid: Some(Pid::new(0, 1)),
                a: 256,
                b: 8
            }
        );
        assert_eq!(d.events[2].pid, None);
        assert_eq!(d.events[2].kind, Kind::RpccReceive);
        assert_eq!(d.per_core(), [2, 1]);
        assert_eq!(d.of_core(1).count(), 1);
    }

    #[test]
    fn takes_the_last_dump() {
        let text = "TRACE begin tsc_hz 1\nTRACE 0 1 exit 0.1 256 0\nTRACE end 1 lost 0\n\
                    TRACE begin tsc_hz 2\nTRACE end 0 lost 0\n";
        let lines: Vec<&str> = text.lines().collect();
        let d = parse(&lines).unwrap();
        assert_eq!((d.tsc_hz, d.events.len()), (2, 0));
    }

    #[test]
    fn errors_name_the_cause() {
        let none = parse(&["musubi> ps"]).unwrap_err().to_string();
        assert!(none.contains("trace=on"), "{none}");
        let cut = parse(&["TRACE begin tsc_hz 1", "TRACE 0 1 exit 0.1 256 0"])
            .unwrap_err()
            .to_string();
        assert!(cut.contains("cut short after 1"), "{cut}");
        assert!(parse(&["TRACE begin tsc_hz 1", "TRACE end x"]).is_err());
    }

    #[test]
    fn event_lines() {
        assert!(is_event_line("TRACE 3 10 switch 3.1 1 0"));
        assert!(!is_event_line("TRACE begin tsc_hz 1"));
        assert!(!is_event_line("TRACE end 1 lost 0"));
        assert!(!is_event_line("trace: 1 events dumped"));
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
        }
        assert_eq!(parse_event("TRACE 0 1 exit 0.1 256"), None);
        assert_eq!(parse_event("TRACE 0 1 exit 1 256 0"), None);
    }
}
