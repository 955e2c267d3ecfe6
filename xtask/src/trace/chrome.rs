//! A kernel trace ([`Dump`]) as Chrome trace-event JSON, the format Perfetto
//! (ui.perfetto.dev) and chrome://tracing open: `{"traceEvents": [...], "displayTimeUnit":
//! "ns"}`, times in microseconds. Pure: no I/O.
//!
//! Tracks (Chrome's pid/tid, not Musubi's):
//!
//! - pid 1 "cores", per core a track (tid 1000 + core) covered by flat slices: `user P` (from
//!   a kernel exit to the next entry), the kernel work an entry from user mode started
//!   (`syscall NAME`, `timer`, `exception N`, ... up to the exit or a switch), `kernel
//!   (thread T)` after a switch to thread T, and `idle`. Interrupts taken in the kernel (for
//!   which no exit is recorded) are instants, as are RPCC sends and receives (args `from`,
//!   `to`, `tag`), submits, completes and big-lock events. Per core a second track (tid
//!   2000 + core) holds the agents' slices (agent_start to agent_end): agents are threads
//!   that can block, so theirs overlap the core's.
//! - pid 2 "processes", per Musubi process a track (tid 1 000 000 + core * 100 000 + serial)
//!   with its time in user mode, its kernel entries (to the exit, across blocking) and, within
//!   them, its RPCC waits (submit to complete).
//! - flows (`s`/`f`): every RPCC message from its send to its receive, `rpcc request` or
//!   `rpcc reply`. Messages are matched per pair of cores in ring (FIFO) order and by tag; a
//!   send a submit follows on the same core is a request.
//!
//! Slices on one track always nest: a slice that ends while slices opened after it are
//! still open ends those first (arg `cut`). Slices still open at the end end with the trace
//! (arg `open_at_end`), those of a process that ended (its last entry was the `exit` call or
//! an exception) at its last event.

use super::dump::{Dump, Event, Kind};
use super::rpcc::{match_messages, round_trips, Message, RoundTrip};
use abi::Pid;
use serde_json::{json, Map, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Chrome pid of the core tracks.
pub const CORES: u64 = 1;
/// Chrome pid of the process tracks.
pub const PROCESSES: u64 = 2;

pub fn core_tid(core: usize) -> u64 {
    1000 + core as u64
}

fn agent_tid(core: usize) -> u64 {
    2000 + core as u64
}

/// What [`convert`] made.
pub struct Chrome {
    pub json: Value,
    pub messages: Vec<Message>,
    pub round_trips: Vec<RoundTrip>,
}

type Track = (u64, u64);

/// What a slice is, to end the right one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    /// The one slice of a core track.
    Flat,
    Kernel,
    User,
    Agent(u64, u64),
    Rpcc(u64),
}

struct Open {
    key: Key,
    name: String,
    cat: &'static str,
    start: u64,
    args: Map<String, Value>,
}

/// One output event, with what orders it: time, then slices (longest first), instants and
/// flows, each kind in the order made.
struct Item {
    ns: u64,
    rank: u8,
    dur: u64,
    value: Value,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Builds tracks whose slices nest.
#[derive(Default)]
struct Builder {
    items: Vec<Item>,
    open: BTreeMap<Track, Vec<Open>>,
    /// The latest time a slice began or ended on each track.
    touched: BTreeMap<Track, u64>,
}

impl Builder {
    fn begin(&mut self, t: Track, key: Key, name: String, cat: &'static str, ns: u64, args: Value) {
        let args = match args {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        self.touch(t, ns);
        self.open.entry(t).or_default().push(Open {
            key,
            name,
            cat,
            start: ns,
            args,
        });
    }

    fn emit_slice(&mut self, t: Track, mut o: Open, end: u64, mark: Option<&str>) {
        if let Some(m) = mark {
            o.args.insert(m.into(), Value::Bool(true));
        }
        self.touch(t, end);
        let dur = end.saturating_sub(o.start);
        self.items.push(Item {
            ns: o.start,
            rank: 0,
            dur,
            value: json!({
                "ph": "X", "name": o.name, "cat": o.cat, "ts": us(o.start), "dur": us(dur),
                "pid": t.0, "tid": t.1, "args": o.args,
            }),
        });
    }

    fn touch(&mut self, t: Track, ns: u64) {
        let last = self.touched.entry(t).or_default();
        *last = (*last).max(ns);
    }

    /// End the slice `key` on `t` (and, first, any opened after it); false if none is open.
    fn end(&mut self, t: Track, key: Key, ns: u64) -> bool {
        let stack = self.open.entry(t).or_default();
        let Some(i) = stack.iter().rposition(|o| o.key == key) else {
            return false;
        };
        let mut ended: Vec<Open> = stack.drain(i..).collect();
        while let Some(o) = ended.pop() {
            let mark = (!ended.is_empty()).then_some("cut");
            self.emit_slice(t, o, ns, mark);
        }
        true
    }

    fn end_all(&mut self, t: Track, ns: u64, mark: Option<&str>) {
        let ended = self.open.remove(&t).unwrap_or_default();
        for o in ended.into_iter().rev() {
            self.emit_slice(t, o, ns, mark);
        }
    }

    fn instant(&mut self, t: Track, name: &str, cat: &str, ns: u64, args: Value) {
        self.items.push(Item {
            ns,
            rank: 1,
            dur: 0,
            value: json!({
                "ph": "i", "s": "t", "name": name, "cat": cat, "ts": us(ns), "pid": t.0,
                "tid": t.1, "args": args,
            }),
        });
    }

    fn flow(&mut self, ph: &str, id: usize, t: Track, name: &str, ns: u64) {
        let mut v = json!({
            "ph": ph, "id": id, "name": name, "cat": "rpcc", "ts": us(ns), "pid": t.0, "tid": t.1,
        });
        if ph == "f" {
            v["bp"] = "e".into();
        }
        self.items.push(Item {
            ns,
            rank: 2,
            dur: 0,
            value: v,
        });
    }

    fn finish(mut self) -> Vec<Value> {
        let mut items = std::mem::take(&mut self.items);
        items.sort_by_key(|i| (i.ns, i.rank, Reverse(i.dur)));
        items.into_iter().map(|i| i.value).collect()
    }
}

/// What a kernel entry was for.
pub fn vector_name(vector: u64, rax: u64) -> String {
    match vector {
        0x100 => format!("syscall {}", abi::syscall::name(rax)),
        0x40 => "timer".into(),
        0x41 => "ipi".into(),
        0x42 => "serial".into(),
        0xff => "spurious".into(),
        v if v < 32 => format!("exception {v}"),
        v => format!("interrupt {v}"),
    }
}

fn pid_arg(p: Option<Pid>) -> Value {
    p.map_or(Value::Null, |p| p.to_string().into())
}

/// Where the core is, as far as its events tell.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Unknown,
    User,
    Kernel,
}

/// Chrome tids of Musubi processes: readable when the serial is small, else numbered.
#[derive(Default)]
struct Tids(BTreeMap<Pid, u64>);

impl Tids {
    fn of(&mut self, p: Pid) -> Track {
        let n = self.0.len() as u64;
        let tid = *self.0.entry(p).or_insert_with(|| match p.serial() {
            s if s < 100_000 => 1_000_000 + p.core() as u64 * 100_000 + u64::from(s),
            _ => 100_000_000 + n,
        });
        (PROCESSES, tid)
    }
}

/// The trace as Chrome trace-event JSON (see the module comment).
pub fn convert(dump: &Dump) -> Chrome {
    let mut b = Builder::default();
    let mut tids = Tids::default();
    let end_ns = dump.events.iter().map(|e| e.ns).max().unwrap_or(0);
    let mut last_seen: HashMap<Pid, u64> = HashMap::new();
    let mut waiter: HashMap<(usize, u64), Pid> = HashMap::new();
    let mut with_agents = HashSet::new();
    for core in 0..dump.cores() {
        let ct = (CORES, core_tid(core));
        let at = (CORES, agent_tid(core));
        let mut mode = Mode::Unknown;
        let mut lock_wait = None;
        for (_, e) in dump.of_core(core) {
            let Event { ns, a, b: eb, .. } = *e;
            let pt = e.pid.map(|p| tids.of(p));
            if let Some(p) = e.pid {
                last_seen.insert(p, ns);
            }
            match e.kind {
                Kind::Entry => {
                    let name = vector_name(a, eb);
                    let mut args = json!({ "vector": a, "pid": pid_arg(e.pid) });
                    if a == 0x100 {
                        args["call"] = eb.into();
                    }
                    let from_user = match mode {
                        Mode::User => true,
                        Mode::Unknown => e.pid.is_some(),
                        Mode::Kernel => false,
                    };
                    if from_user {
                        b.end_all(ct, ns, None);
                        b.begin(ct, Key::Flat, name.clone(), "kernel", ns, args.clone());
                        mode = Mode::Kernel;
                        if let Some(pt) = pt {
                            b.end(pt, Key::User, ns);
                            b.begin(pt, Key::Kernel, name, "kernel", ns, args);
                        }
                    } else {
                        if mode == Mode::Unknown {
                            b.begin(ct, Key::Flat, "kernel".into(), "kernel", ns, json!({}));
                            mode = Mode::Kernel;
                        }
                        b.instant(ct, &name, "interrupt", ns, args);
                    }
                }
                Kind::Exit => {
                    b.end_all(ct, ns, None);
                    let name = e.pid.map_or("user".into(), |p| format!("user {p}"));
                    let args = json!({ "pid": pid_arg(e.pid) });
                    b.begin(ct, Key::Flat, name, "user", ns, args.clone());
                    mode = Mode::User;
                    if let Some(pt) = pt {
                        b.end(pt, Key::Kernel, ns);
                        b.begin(pt, Key::User, "user".into(), "user", ns, args);
                    }
                }
                Kind::Switch => {
                    b.end_all(ct, ns, None);
                    let args = json!({ "from_thread": a, "to_thread": eb });
                    let (name, cat) = match eb {
                        0 => ("idle".to_string(), "idle"),
                        t => (format!("kernel (thread {t})"), "kernel"),
                    };
                    b.begin(ct, Key::Flat, name, cat, ns, args);
                    mode = Mode::Kernel;
                }
                Kind::AgentStart => {
                    with_agents.insert(core);
                    let args = json!({ "from": a, "tag": eb });
                    let name = format!("agent: core {a} tag {eb}");
                    b.begin(at, Key::Agent(a, eb), name, "rpcc", ns, args);
                }
                Kind::AgentEnd => {
                    if !b.end(at, Key::Agent(a, eb), ns) {
                        b.instant(at, "agent_end", "rpcc", ns, json!({ "from": a, "tag": eb }));
                    }
                }
                Kind::RpccSend => {
                    let args = json!({ "from": core, "to": a, "tag": eb, "pid": pid_arg(e.pid) });
                    b.instant(ct, "rpcc_send", "rpcc", ns, args);
                }
                Kind::RpccReceive => {
                    let args = json!({ "from": a, "to": core, "tag": eb });
                    b.instant(ct, "rpcc_receive", "rpcc", ns, args);
                }
                Kind::Submit => {
                    let args = json!({ "to": a, "tag": eb, "pid": pid_arg(e.pid) });
                    b.instant(ct, "submit", "rpcc", ns, args.clone());
                    if let (Some(p), Some(pt)) = (e.pid, pt) {
                        waiter.insert((core, eb), p);
                        let name = format!("rpcc to core {a}");
                        b.begin(pt, Key::Rpcc(eb), name, "rpcc", ns, args);
                    }
                }
                Kind::Complete => {
                    let args = json!({ "tag": eb, "pid": pid_arg(e.pid) });
                    b.instant(ct, "complete", "rpcc", ns, args);
                    if let Some(p) = waiter.remove(&(core, eb)) {
                        b.end(tids.of(p), Key::Rpcc(eb), ns);
                    }
                }
                Kind::LockWait => {
                    lock_wait = Some(ns);
                    b.instant(
                        ct,
                        "lock_wait",
                        "lock",
                        ns,
                        json!({ "pid": pid_arg(e.pid) }),
                    );
                }
                Kind::LockTaken => {
                    let mut args = json!({ "pid": pid_arg(e.pid) });
                    if let Some(w) = lock_wait.take() {
                        args["waited_ns"] = ns.saturating_sub(w).into();
                    }
                    b.instant(ct, "lock_taken", "lock", ns, args);
                }
            }
        }
    }
    let messages = match_messages(dump);
    for (i, m) in messages.iter().enumerate() {
        let name = if m.request {
            "rpcc request"
        } else {
            "rpcc reply"
        };
        b.flow("s", i + 1, (CORES, core_tid(m.from)), name, m.sent_ns);
        b.flow("f", i + 1, (CORES, core_tid(m.to)), name, m.received_ns);
    }
    let round_trips = round_trips(&messages);

    // What is still open ends with the trace; a process that ended (its last entry was the
    // exit call or an exception) ends at its last event.
    let open: Vec<Track> = b.open.keys().copied().collect();
    for t in open {
        let ended = b.open[&t]
            .first()
            .is_some_and(|o| o.name == vector_name(0x100, 0) || o.name.starts_with("exception"));
        let at = match t.0 {
            PROCESSES if ended => tids
                .0
                .iter()
                .find(|(_, &tid)| tid == t.1)
                .and_then(|(p, _)| last_seen.get(p).copied())
                .unwrap_or(end_ns),
            _ => end_ns,
        };
        let at = at.max(b.touched.get(&t).copied().unwrap_or(0));
        b.end_all(t, at, Some("open_at_end"));
    }

    let mut events = metadata(dump, &tids, &with_agents);
    events.extend(b.finish());
    Chrome {
        json: json!({ "traceEvents": events, "displayTimeUnit": "ns" }),
        messages,
        round_trips,
    }
}

/// Names and order of the processes and tracks.
fn metadata(dump: &Dump, tids: &Tids, with_agents: &HashSet<usize>) -> Vec<Value> {
    let meta = |name: &str, pid: u64, tid: Option<u64>, args: Value| {
        let mut v = json!({ "ph": "M", "name": name, "pid": pid, "args": args });
        if let Some(t) = tid {
            v["tid"] = t.into();
        }
        v
    };
    let mut v = vec![
        meta("process_name", CORES, None, json!({ "name": "cores" })),
        meta(
            "process_sort_index",
            CORES,
            None,
            json!({ "sort_index": 1 }),
        ),
        meta(
            "process_name",
            PROCESSES,
            None,
            json!({ "name": "processes" }),
        ),
        meta(
            "process_sort_index",
            PROCESSES,
            None,
            json!({ "sort_index": 2 }),
        ),
    ];
    for core in 0..dump.cores() {
        let name = json!({ "name": format!("core {core}") });
        v.push(meta("thread_name", CORES, Some(core_tid(core)), name));
        let order = json!({ "sort_index": 2 * core });
        v.push(meta(
            "thread_sort_index",
            CORES,
            Some(core_tid(core)),
            order,
        ));
        if with_agents.contains(&core) {
            let name = json!({ "name": format!("core {core} agents") });
            v.push(meta("thread_name", CORES, Some(agent_tid(core)), name));
            let order = json!({ "sort_index": 2 * core + 1 });
            v.push(meta(
                "thread_sort_index",
                CORES,
                Some(agent_tid(core)),
                order,
            ));
        }
    }
    for (i, (p, &tid)) in tids.0.iter().enumerate() {
        let name = json!({ "name": format!("pid {p}") });
        v.push(meta("thread_name", PROCESSES, Some(tid), name));
        let order = json!({ "sort_index": i });
        v.push(meta("thread_sort_index", PROCESSES, Some(tid), order));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::check::check;
    use super::super::sample::sample;
    use super::*;

    /// Every track's slices nest (times back in whole nanoseconds, as Perfetto reads them).
    fn assert_nested(events: &[Value]) {
        let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
        let mut by_track: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
        for e in events.iter().filter(|e| e["ph"] == "X") {
            let t = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            let start = ns(&e["ts"]);
            let end = start + ns(&e["dur"]);
            by_track.entry(t).or_default().push((start, end));
        }
        for (t, mut slices) in by_track {
            slices.sort_by_key(|&(start, end)| (start, std::cmp::Reverse(end)));
            let mut stack: Vec<u64> = Vec::new();
            for (start, end) in slices {
                while stack.last().is_some_and(|&e| e <= start) {
                    stack.pop();
                }
                if let Some(&outer) = stack.last() {
                    assert!(end <= outer, "{t:?}: [{start}, {end}] crosses {outer}");
                }
                stack.push(end);
            }
        }
    }

    fn slices(events: &[Value], tid: u64) -> Vec<&str> {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["tid"] == tid)
            .map(|e| e["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn converts_to_tracks_and_flows() {
        let c = convert(&sample());
        let events = c.json["traceEvents"].as_array().unwrap();
        assert_nested(events);
        assert_eq!(
            slices(events, core_tid(0)),
            [
                "kernel",
                "kernel (thread 1)",
                "user 0.1",
                "syscall res_open",
                "idle",
                "kernel (thread 1)",
                "user 0.1",
            ]
            .map(|n| if n == "syscall res_open" {
                vector_name(256, 19)
            } else {
                n.into()
            })
        );
        assert_eq!(
            slices(events, agent_tid(1)),
            ["agent: core 0 tag 1", "agent: core 0 tag 2"]
        );
        let shell = 1_000_001;
        let p = slices(events, shell);
        assert!(
            p.contains(&"rpcc to core 1") && p.contains(&"user"),
            "{p:?}"
        );
        let interrupts = events.iter().filter(|e| e["cat"] == "interrupt").count();
        assert_eq!(interrupts, 2);
        let flows = events
            .iter()
            .filter(|e| e["ph"] == "s" || e["ph"] == "f")
            .count();
        assert_eq!(flows, 2 * c.messages.len());
        let names: Vec<&Value> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .collect();
        assert!(names
            .iter()
            .any(|e| e["args"]["name"] == "pid 0.1" && e["tid"] == shell));
        assert!(names.iter().any(|e| e["args"]["name"] == "core 1 agents"));
        let text = serde_json::to_string(&c.json).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        let said = check(&back).unwrap();
        assert!(said.starts_with("core 0 -> core 1 tag 1"), "{said}");
    }

    #[test]
    fn an_ended_process_ends_at_its_last_event() {
        let text = "TRACE begin tsc_hz 1\n\
            TRACE 0 100 exit 0.2 256 0\n\
            TRACE 0 200 entry 0.2 256 0\n\
            TRACE 0 210 rpcc_send 0.2 1 5\n\
            TRACE 0 220 submit 0.2 1 5\n\
            TRACE 0 230 switch 0.2 1 2\n\
            TRACE 0 240 exit 0.3 256 0\n\
            TRACE 0 400 rpcc_receive 0.3 1 5\n\
            TRACE 0 410 complete 0.3 0 5\n\
            TRACE 0 500 entry 0.3 64 0\n\
            TRACE end 9 lost 0\n";
        let d = super::super::dump::parse(&text.lines().collect::<Vec<_>>()).unwrap();
        let json = convert(&d).json;
        let events = json["traceEvents"].as_array().unwrap();
        assert_nested(events);
        let slice = |tid: u64, name: &str| {
            let e = events
                .iter()
                .find(|e| e["ph"] == "X" && e["tid"] == tid && e["name"] == name)
                .unwrap();
            let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
            (
                ns(&e["ts"]),
                ns(&e["dur"]),
                e["args"]["open_at_end"] == true,
            )
        };
        // Ended by its RPCC wait, which the complete ended.
        assert_eq!(slice(1_000_002, "syscall exit"), (200, 210, true));
        assert_eq!(slice(1_000_002, "rpcc to core 1"), (220, 190, false));
        // Still in the kernel when the trace ends.
        assert_eq!(slice(1_000_003, "timer"), (500, 0, true));
        assert_eq!(slice(core_tid(0), "timer"), (500, 0, true));
    }

    #[test]
    fn slices_nest_when_ends_cross() {
        let mut b = Builder::default();
        let t = (CORES, 7);
        b.begin(t, Key::Kernel, "outer".into(), "k", 0, json!({}));
        b.begin(t, Key::Rpcc(1), "inner".into(), "k", 10, json!({}));
        assert!(b.end(t, Key::Kernel, 20));
        assert!(!b.end(t, Key::Rpcc(1), 30));
        let ev = b.finish();
        assert_eq!(ev.len(), 2);
        assert_eq!(
            (ev[0]["name"].as_str(), ev[0]["dur"].as_f64()),
            (Some("outer"), Some(0.02))
        );
        assert_eq!(ev[1]["args"]["cut"], true);
        assert_nested(&ev);
    }

    #[test]
    fn names_vectors() {
        assert_eq!(vector_name(0x40, 9), "timer");
        assert_eq!(vector_name(14, 0), "exception 14");
        assert!(vector_name(0x100, 0).starts_with("syscall "));
    }
}
