//! The kernel command line: what a user can switch at boot.
//!
//! The command line is a list of words separated by spaces. A word is a flag (`poweroff`)
//! or `key=value` (`smp=2`, `ktest=frames::*`). Parsing never fails as a whole: a word it
//! does not understand, or a value that is out of range, becomes a [`Warning`] that the
//! kernel prints, and the rest of the line still takes effect. Pure logic, tested on the
//! host.
//!
//! | word | meaning |
//! |------|---------|
//! | `smp=N` | use at most N cores (1..=64) |
//! | `poweroff` | print the boot summary and power off once boot is complete |
//! | `ktest=PATTERNS` | run the in-kernel tests whose names match, then power off |
//! | `ktest.after=NAME` | with `ktest=`: run only the tests named after NAME (they run in name order; the test harness boots again with it when the kernel stopped in NAME) |
//! | `log=LEVEL` | `error`, `warn`, `info` (default), `debug` or `trace` |
//! | `start=CORE:PROG[,ARG...]` | start a program on that core at boot (may repeat) |
//! | `driver=CORE:PROG[,ARG...]` | the same at driver priority (a user-mode driver, e.g. `netdrv`; counts as a `start=`) |
//! | `services=`, `disk.core=`, `buffers.cores=`, ... | the boot configuration's keys ([`config`]): they override `boot.cfg` |
//! | `server=CORE:PROG[,ARG...]` | the same at server priority (an OS server, e.g. `netd`, `machd`; counts as a `start=`) |
//! | `noshell` | do not start the shell on core 0 |
//! | `rcc=off` | do not check resource rights (to measure what the checks cost) |
//! | `kernel=percore` or `kernel=biglock` | a kernel per core (default), or one big kernel lock taken at every kernel entry (P2's Limited Symmetry) |
//! | `trace=on` | record kernel events in a per-core ring (the `TRACE` call dumps them) |
//! | `rpcc.notify=MODE` | how RPCC tells a core a message waits: `ipi`, `poll` or `hybrid` (default) |
//! | `rpcc.agents=N` | an RPCC agent performs at most N requests (1..=1000000), then a new one is made; `unlimited` (default) keeps reusing it; `inline`: the daemon performs short requests itself, agents (reused) only those that may block |
//! | `machine=K`, `machines=N` | this is machine K (0-based) of N joined by a network (issue 17; `cargo xtask run --machines N` gives them; the kernel prints them, `machd` gets them as its arguments) |
//! | `rpcc.wait=MODE` | how a thread waits for a remote answer: `switch` (default: it blocks and the core runs something else or its idle context) or `halt` (it halts in place when nothing else is ready) |
//! | `pci.irq=MODE` | how a user-mode driver's device interrupts: `msix` (default: by MSI-X where the function has it, else its IOAPIC line) or `line` (always the IOAPIC line, the earlier design, kept to compare) |
//! | `pipe.wait=MODE` | how a READ or WRITE waits for another core's pipe: `notify` (default: the pipe tells its core of the next change) or `poll` (it tries again after a pause growing from 50 us to a tick, the earlier design, kept to compare) |
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]

pub mod config;

/// Most cores the kernel can use; `smp=` beyond it is a warning.
pub const MAX_SMP: usize = 64;
/// Most machines joined as one system (`machines=`).
pub const MAX_MACHINES: usize = 4;
/// Most `start=` words kept.
pub const MAX_STARTS: usize = 16;

/// A program to start at boot: on `core`, `program` with `args` (comma-separated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start<'a> {
    pub core: usize,
    pub program: &'a str,
    args: &'a str,
    /// Started at driver priority (`driver=`), else as an application.
    pub driver: bool,
    /// Started at server priority (`server=`).
    pub server: bool,
}

impl<'a> Start<'a> {
    /// The arguments, in order.
    pub fn args(&self) -> impl Iterator<Item = &'a str> {
        self.args.split(',').filter(|a| !a.is_empty())
    }
}

/// Log verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// What the command line asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootArgs<'a> {
    pub smp: Option<usize>,
    pub poweroff: bool,
    pub ktest: Option<&'a str>,
    /// `ktest.after=NAME`: skip the tests up to and including NAME in name order.
    pub ktest_after: Option<&'a str>,
    pub log: LogLevel,
    pub starts: heapless::Vec<Start<'a>, MAX_STARTS>,
    pub shell: bool,
    /// Check resource rights (RCC); `rcc=off` turns the checks off.
    pub rcc: bool,
    pub rpcc_notify: Notify,
    /// One big kernel lock (`kernel=biglock`) instead of a kernel per core.
    pub biglock: bool,
    /// Record kernel events (`trace=on`).
    pub trace: bool,
    /// Requests one RPCC agent performs before it is destroyed; `None`: unlimited.
    pub rpcc_agents: Option<u32>,
    /// `rpcc.agents=inline`: the daemon performs short requests itself (agents unlimited
    /// for the others).
    pub rpcc_inline: bool,
    /// `rpcc.wait=halt`: a thread waiting for a remote answer halts in place.
    pub rpcc_halt: bool,
    /// `pipe.wait=poll`: a wait for another core's pipe only tries again after pauses
    /// (no notice of the pipe's next change).
    pub pipe_poll: bool,
    /// `pci.irq=line`: drivers' devices interrupt by their IOAPIC line even where they
    /// have MSI-X.
    pub pci_line_only: bool,
    /// `machine=K`: this machine's id among several (issue 17).
    pub machine: Option<u8>,
    /// `machines=N`: how many machines the system has.
    pub machines: Option<u8>,
}

/// How RPCC notifies the receiving core (P4 sends an IPI per message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notify {
    /// An IPI for every message (P4's design).
    Ipi,
    /// No IPI: receivers look at their rings when idle (spinning) and at every tick.
    Poll,
    /// An IPI only when the receiver is not already looking at its rings.
    Hybrid,
}

impl Default for BootArgs<'_> {
    fn default() -> Self {
        BootArgs {
            smp: None,
            poweroff: false,
            ktest: None,
            ktest_after: None,
            log: LogLevel::Info,
            starts: heapless::Vec::new(),
            shell: true,
            rcc: true,
            rpcc_notify: Notify::Hybrid,
            biglock: false,
            trace: false,
            rpcc_agents: None,
            rpcc_inline: false,
            rpcc_halt: false,
            pipe_poll: false,
            pci_line_only: false,
            machine: None,
            machines: None,
        }
    }
}

fn parse_start<'a>(v: &'a str, key: &str) -> Option<Start<'a>> {
    let (core, rest) = v.split_once(':')?;
    let core: usize = core.parse().ok().filter(|&c| c < MAX_SMP)?;
    let (program, args) = rest.split_once(',').unwrap_or((rest, ""));
    let valid = !program.is_empty()
        && program
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then_some(Start {
        core,
        program,
        args,
        driver: key == "driver",
        server: key == "server",
    })
}

/// Something on the command line that was ignored, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warning<'a> {
    UnknownWord(&'a str),
    BadValue {
        key: &'a str,
        value: &'a str,
        expected: &'static str,
    },
}

impl core::fmt::Display for Warning<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Warning::UnknownWord(w) => write!(f, "unknown command-line word '{w}' ignored"),
            Warning::BadValue {
                key,
                value,
                expected,
            } => {
                write!(f, "'{key}={value}' ignored: expected {expected}")
            }
        }
    }
}

/// Parse `line`; `warn` is called for every ignored word.
pub fn parse<'a>(line: &'a str, mut warn: impl FnMut(Warning<'a>)) -> BootArgs<'a> {
    let mut args = BootArgs::default();
    for word in line.split_ascii_whitespace() {
        let (key, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (word, None),
        };
        match (key, value) {
            ("poweroff", None) => args.poweroff = true,
            ("noshell", None) => args.shell = false,
            ("rcc", Some("on")) => args.rcc = true,
            ("rcc", Some("off")) => args.rcc = false,
            ("rcc", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "on or off",
            }),
            ("kernel", Some("percore")) => args.biglock = false,
            ("kernel", Some("biglock")) => args.biglock = true,
            ("kernel", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "percore or biglock",
            }),
            ("trace", Some("on")) => args.trace = true,
            ("trace", Some("off")) => args.trace = false,
            ("trace", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "on or off",
            }),
            ("rpcc.notify", Some(v)) => match v {
                "ipi" => args.rpcc_notify = Notify::Ipi,
                "poll" => args.rpcc_notify = Notify::Poll,
                "hybrid" => args.rpcc_notify = Notify::Hybrid,
                _ => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "ipi, poll or hybrid",
                }),
            },
            ("rpcc.agents", Some("unlimited")) => {
                args.rpcc_agents = None;
                args.rpcc_inline = false;
            }
            ("rpcc.agents", Some("inline")) => {
                args.rpcc_agents = None;
                args.rpcc_inline = true;
            }
            ("rpcc.agents", Some(v)) => match v.parse::<u32>() {
                Ok(n) if (1..=1_000_000).contains(&n) => {
                    args.rpcc_agents = Some(n);
                    args.rpcc_inline = false;
                }
                _ => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "a count from 1 to 1000000, unlimited or inline",
                }),
            },
            ("rpcc.wait", Some("switch")) => args.rpcc_halt = false,
            ("rpcc.wait", Some("halt")) => args.rpcc_halt = true,
            ("rpcc.wait", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "switch or halt",
            }),
            ("pipe.wait", Some("notify")) => args.pipe_poll = false,
            ("pipe.wait", Some("poll")) => args.pipe_poll = true,
            ("pipe.wait", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "notify or poll",
            }),
            ("pci.irq", Some("msix")) => args.pci_line_only = false,
            ("pci.irq", Some("line")) => args.pci_line_only = true,
            ("pci.irq", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "msix or line",
            }),
            ("start" | "driver" | "server", Some(v)) => match parse_start(v, key) {
                Some(s) if args.starts.push(s).is_ok() => {}
                Some(_) => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "at most 16 start= words",
                }),
                None => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "CORE:PROGRAM[,ARG...]",
                }),
            },
            ("smp", Some(v)) => match v.parse::<usize>() {
                Ok(n) if (1..=MAX_SMP).contains(&n) => args.smp = Some(n),
                _ => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "a core count from 1 to 64",
                }),
            },
            ("machine" | "machines", Some(v)) => match v.parse::<u8>() {
                Ok(n) if usize::from(n) < MAX_MACHINES && key == "machine" => {
                    args.machine = Some(n)
                }
                Ok(n) if (1..=MAX_MACHINES).contains(&usize::from(n)) && key == "machines" => {
                    args.machines = Some(n)
                }
                _ => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "a machine id below 4 (machine=) or a count 1..4 (machines=)",
                }),
            },
            ("ktest", Some(v)) if !v.is_empty() => args.ktest = Some(v),
            ("ktest", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "a test-name pattern",
            }),
            ("ktest.after", Some(v)) if !v.is_empty() => args.ktest_after = Some(v),
            ("ktest.after", Some(v)) => warn(Warning::BadValue {
                key,
                value: v,
                expected: "a test name",
            }),
            ("log", Some(v)) => match v {
                "error" => args.log = LogLevel::Error,
                "warn" => args.log = LogLevel::Warn,
                "info" => args.log = LogLevel::Info,
                "debug" => args.log = LogLevel::Debug,
                "trace" => args.log = LogLevel::Trace,
                _ => warn(Warning::BadValue {
                    key,
                    value: v,
                    expected: "error, warn, info, debug or trace",
                }),
            },
            // A key of the boot configuration (`config`): it reads these words itself.
            (k, Some(_)) if config::is_key(k) => {}
            _ => warn(Warning::UnknownWord(word)),
        }
    }
    args
}

/// Does test `name` match `patterns`: a comma-separated list where each pattern is `all`,
/// an exact name, or a glob with `*` matching any run of characters?
pub fn matches_any(patterns: &str, name: &str) -> bool {
    patterns
        .split(',')
        .filter(|p| !p.is_empty())
        .any(|p| p == "all" || glob(p.as_bytes(), name.as_bytes()))
}

/// Is `pattern` a single exact name (no wildcard, not `all`, no list)?
pub fn is_exact(patterns: &str) -> bool {
    !patterns.contains(['*', ',']) && patterns != "all"
}

/// `*`-only glob match, iterative with one backtrack point (linear in practice).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_collect(line: &str) -> (BootArgs<'_>, Vec<Warning<'_>>) {
        let mut w = Vec::new();
        let a = parse(line, |x| w.push(x));
        (a, w)
    }

    #[test]
    fn empty_line_gives_defaults() {
        let (a, w) = parse_collect("");
        assert_eq!(a, BootArgs::default());
        assert!(w.is_empty());
    }

    #[test]
    fn all_words() {
        let (a, w) = parse_collect("  smp=2 poweroff  ktest=frames::*,ipi::all_pairs log=debug ");
        assert_eq!(a.smp, Some(2));
        assert!(a.poweroff);
        assert_eq!(a.ktest, Some("frames::*,ipi::all_pairs"));
        assert_eq!(a.log, LogLevel::Debug);
        assert!(w.is_empty());
    }

    #[test]
    fn ktest_after_names_the_last_test_run() {
        let (a, w) = parse_collect("ktest=* ktest.after=process::spawn");
        assert_eq!(a.ktest_after, Some("process::spawn"));
        assert!(w.is_empty());
        let (a, w) = parse_collect("ktest=* ktest.after=");
        assert_eq!(a.ktest_after, None);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn bad_values_warn_and_keep_the_rest() {
        let (a, w) = parse_collect("smp=0 smp=65 smp=x poweroff=1 bogus log=loud ktest= smp=3");
        assert_eq!(a.smp, Some(3));
        assert!(!a.poweroff);
        assert_eq!(a.ktest, None);
        assert_eq!(a.log, LogLevel::Info);
        assert_eq!(w.len(), 7);
        assert_eq!(w[3], Warning::UnknownWord("poweroff=1"));
        assert_eq!(w[4], Warning::UnknownWord("bogus"));
        assert!(w[0].to_string().contains("smp=0"));
    }

    #[test]
    fn starts() {
        let (a, w) =
            parse_collect("start=1:hello start=0:spin,x,y start=2:hello,a noshell rcc=off");
        assert!(w.is_empty());
        assert!(!a.shell);
        assert!(!a.rcc);
        assert_eq!(a.starts.len(), 3);
        assert_eq!((a.starts[0].core, a.starts[0].program), (1, "hello"));
        assert_eq!(a.starts[0].args().count(), 0);
        assert_eq!(a.starts[1].args().collect::<Vec<_>>(), ["x", "y"]);
        let (a, w) = parse_collect(
            "start=x:hello start=1: start=1 start=99:hello start=1:../etc start=1:ok",
        );
        assert_eq!(w.len(), 5);
        assert_eq!(a.starts.len(), 1);
        let (a, w) = parse_collect("driver=0:netdrv start=1:netd,10.0.2.15 driver=x:bad");
        assert_eq!(w.len(), 1);
        assert_eq!(a.starts.len(), 2);
        assert!(a.starts[0].driver && a.starts[0].program == "netdrv");
        assert!(!a.starts[1].driver);
        let (a, w) = parse_collect("server=1:machd,0,2");
        assert!(w.is_empty());
        assert!(a.starts[0].server && !a.starts[0].driver);
        assert_eq!(a.starts[0].args().collect::<Vec<_>>(), ["0", "2"]);
    }

    #[test]
    fn later_words_win() {
        let (a, _) = parse_collect("smp=4 smp=1 log=warn log=error");
        assert_eq!((a.smp, a.log), (Some(1), LogLevel::Error));
    }

    #[test]
    fn machine_words() {
        let (a, w) = parse_collect("machine=2 machines=4");
        assert_eq!((a.machine, a.machines), (Some(2), Some(4)));
        assert!(w.is_empty());
        let (a, w) = parse_collect("machine=4 machines=5 machine=x machines=0");
        assert_eq!((a.machine, a.machines), (None, None));
        assert_eq!(w.len(), 4);
    }

    #[test]
    fn globs() {
        assert!(matches_any("all", "anything::here"));
        assert!(matches_any("frames::*", "frames::own_pool"));
        assert!(!matches_any("frames::*", "heap::frames::x"));
        assert!(matches_any("*pool*", "frames::own_pool_returns"));
        assert!(matches_any("a*b*c", "aXXbYYc"));
        assert!(!matches_any("a*b*c", "aXXbYY"));
        assert!(matches_any("x,frames::own_pool", "frames::own_pool"));
        assert!(!matches_any("frames::own", "frames::own_pool"));
        assert!(!matches_any("", "x"));
        assert!(matches_any("*", ""));
        assert!(matches_any("**", "ab"));
    }

    #[test]
    fn exactness() {
        assert!(is_exact("fault::page_fault"));
        assert!(!is_exact("fault::*"));
        assert!(!is_exact("a,b"));
        assert!(!is_exact("all"));
    }

    #[test]
    fn rpcc_options() {
        let (a, w) = parse_collect("");
        assert_eq!((a.rpcc_notify, a.rpcc_agents), (Notify::Hybrid, None));
        assert!(w.is_empty());
        let (a, w) = parse_collect("rpcc.notify=ipi rpcc.agents=3");
        assert_eq!((a.rpcc_notify, a.rpcc_agents), (Notify::Ipi, Some(3)));
        assert!(w.is_empty());
        let (a, _) = parse_collect("rpcc.agents=2 rpcc.agents=unlimited rpcc.notify=poll");
        assert_eq!((a.rpcc_notify, a.rpcc_agents), (Notify::Poll, None));
        let (a, w) = parse_collect("rpcc.agents=0 rpcc.agents=x rpcc.notify=irq");
        assert_eq!((a.rpcc_notify, a.rpcc_agents), (Notify::Hybrid, None));
        assert_eq!(w.len(), 3);
    }

    #[test]
    fn rpcc_inline_and_halt() {
        let (a, w) = parse_collect("");
        assert!(!a.rpcc_inline && !a.rpcc_halt && w.is_empty());
        let (a, w) = parse_collect("rpcc.agents=inline rpcc.wait=halt");
        assert!(a.rpcc_inline && a.rpcc_halt && a.rpcc_agents.is_none() && w.is_empty());
        // The last word wins; a count or `unlimited` ends inline mode.
        let (a, _) =
            parse_collect("rpcc.agents=inline rpcc.agents=4 rpcc.wait=halt rpcc.wait=switch");
        assert!(!a.rpcc_inline && !a.rpcc_halt && a.rpcc_agents == Some(4));
        let (a, _) = parse_collect("rpcc.agents=inline rpcc.agents=unlimited");
        assert!(!a.rpcc_inline && a.rpcc_agents.is_none());
        let (a, w) = parse_collect("rpcc.agents=inline rpcc.agents=Inline rpcc.wait=spin");
        assert!(a.rpcc_inline && !a.rpcc_halt);
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn pci_irq() {
        let (a, w) = parse_collect("");
        assert!(!a.pci_line_only && w.is_empty());
        let (a, w) = parse_collect("pci.irq=line");
        assert!(a.pci_line_only && w.is_empty());
        let (a, w) = parse_collect("pci.irq=line pci.irq=msix pci.irq=msi");
        assert!(!a.pci_line_only);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn pipe_wait() {
        let (a, w) = parse_collect("");
        assert!(!a.pipe_poll && w.is_empty());
        let (a, w) = parse_collect("pipe.wait=poll");
        assert!(a.pipe_poll && w.is_empty());
        let (a, w) = parse_collect("pipe.wait=poll pipe.wait=notify pipe.wait=spin");
        assert!(!a.pipe_poll);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn structure_and_trace() {
        let (a, w) = parse_collect("");
        assert!(!a.biglock && !a.trace && w.is_empty());
        let (a, w) = parse_collect("kernel=biglock trace=on");
        assert!(a.biglock && a.trace && w.is_empty());
        let (a, w) = parse_collect("kernel=biglock kernel=percore trace=maybe kernel=big");
        assert!(!a.biglock && !a.trace);
        assert_eq!(w.len(), 2);
    }
}
