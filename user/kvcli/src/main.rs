//! `kvcli put KEY VALUE | get KEY [EXPECT] | del KEY | stats | bench N [SEED] | all N | bad | gap N | drop | table2 SAMPLES OPS | antfig figs|gap REPS | load pu|wait NS | gapc N PACE LABEL | wait [SECONDS] | await KEY`:
//! the client of the `kv` server (`user/kv`), which it finds by function id
//! (`FN_LOOKUP("kv")`), never by pid.
//!
//! It opens a 4 KiB data area (`here/vregion/pCORE.SERIAL-kvc`, a name reserved for this
//! process, `abi::res::reserved_for`; read and write for others),
//! attaches it at [`AREA_AT`] and names it to the server with `HELLO`; values go through it
//! (`kvstate::proto`). Before it exits it says `BYE`, detaches and closes the area, so a
//! finished `kvcli` leaves nothing behind. A server that answers `NoArea` (a new server that
//! never saw our `HELLO`) is told again, once.
//!
//! | command | prints | exit |
//! |---|---|---|
//! | `put KEY VALUE` | `kvcli: put KEY (new\|replaced)` | 0 |
//! | `get KEY [EXPECT]` | `kvcli: KEY = VALUE` / `kvcli: KEY not found` | 0 / 2 (3: the value is not EXPECT) |
//! | `del KEY` | `kvcli: del KEY (deleted\|not found)` | 0 |
//! | `stats` | `kvcli: stats entries=.. capacity=.. layout=.. generation=.. puts=.. gets=.. dels=..` | 0 |
//! | `bench N [SEED]` | N put/get pairs (and a del every 8th) on keys of its own, each reply checked against a local model; one line per mismatch, then `kvcli: bench pairs=N puts=.. gets=.. dels=.. full=.. mismatches=M`; it deletes its keys at the end | 0 if M = 0 |
//! | `bad` | malformed requests (unknown operation, key too long, empty key, value too long, no `HELLO`, a data area that is not ours, an offset beyond ours), each must get its error status, and a good request after them must work: `kvcli: bad ok` or one `kvcli: bad FAIL ...` line per failure | 0 / 1 |
//! | `all N` | `kvcli bench N SEED` on every core at once (`SPAWN_ON`, SEED = 1 + core), waits for them: `kvcli: all N ok on C cores` or one `kvcli: all FAIL ...` line per bench that did not exit 0 | 0 / 1 |
//! | `gap N` | N `GET`s of a key of its own, one after another, each timed (`CLOCK`): `kvcli: gap calls=N median=.. ns max=.. ns gap=.. ns` (gap: the longest beyond the median, e.g. across a live replacement) | 0 if every value is right |
//! | `drop` | unregisters `kv` (`FN_UNREGISTER`; the registering user or the administrator): `kvcli: kv unregistered` | 0 |
//! | `table2 SAMPLES OPS` | P3 Table 2 on our platform (`cargo xtask bench ant`): starts `kv` with its state in the state ICA, then in the process, and prints `BENCH` samples of OPS 1 KiB PUT+GET pairs against each (`table2.rs`) | 0 |
//! | `antfig figs\|gap REPS` | P3 Figures 3-5 (replacement time against the server's CPU and wait time per request, the clients' work and their number) or the Figure 8 analogue (the service gap of one replacement), as `BENCH` samples for `cargo xtask bench ant` (`antfig.rs`) | 0 |
//! | `load pu\|wait NS` | `antfig`'s load: `GET`s with NS ns of spinning or sleeping between them, until `antfig` puts its stop key | 0 |
//! | `gapc N PACE LABEL` | `antfig`'s Figure 8 client: N timed `PUT`s, N more across a replacement; `BENCH` samples of the gap, lost, twice, wrong | 0 |
//! | `prio` | prints the priority kv's server runs at: `kvcli: kv (PID) serves at P priority` | 0 |
//! | `await KEY` | waits (`WAIT`: kv holds the request) until KEY has a value: `kvcli: KEY = VALUE`; across a replacement the request is answered `Again` and sent again | 0 |
//! | `wait [SECONDS]` | waits (default 30 s, a hang guard) until `kv` is registered and answers `STATS`: `kvcli: kv is up` | 0 / 1 |
//!
//! Errors print `kvcli: ERROR` and exit 1.
#![no_std]
#![no_main]

extern crate alloc;

mod antfig;
mod bench;
mod table2;

use alloc::format;
use alloc::string::{String, ToString};
use kvstate::proto::{self, Request, StatsReply, Status};
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::Msg;
use ulib::abi::res::{ResId, Rights};
use ulib::{fnid, ipc, println, res, sys};

ulib::main!(main);

/// Where the data area is mapped.
pub const AREA_AT: u64 = 0x0000_6200_0000_0000;
/// Size of the data area.
pub const AREA_SIZE: u64 = 4096;
/// Creator everything, others read and write (the server attaches it writable).
const AREA_RIGHTS: Rights = Rights(0x3f);

fn main(args: &[&str]) -> i32 {
    let r = match args.get(1..).unwrap_or(&[]) {
        ["wait"] => wait(30),
        ["wait", s] => match s.parse() {
            Ok(secs) => wait(secs),
            Err(_) => Err(String::from("wait SECONDS")),
        },
        ["all", n] => bench::all(n),
        ["table2", samples, ops] => table2::run(samples, ops),
        ["antfig", what, reps] => antfig::run(what, reps),
        ["drop"] => fnid::lookup("kv")
            .and_then(fnid::unregister)
            .map(|()| {
                println!("kvcli: kv unregistered");
                0
            })
            .map_err(|e| format!("unregister kv: {e}")),
        rest => with_client(|c| command(c, rest)),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            println!("kvcli: {e}");
            1
        }
    }
}

fn command(c: &mut Client, args: &[&str]) -> Result<i32, String> {
    match args {
        ["put", key, value] => {
            let new = c.put(key.as_bytes(), value.as_bytes()).map_err(|f| f.to_string())?;
            println!("kvcli: put {key} ({})", if new { "new" } else { "replaced" });
            Ok(0)
        }
        ["get", key] | ["get", key, _] => match c.get(key.as_bytes()) {
            Ok(v) => {
                println!("kvcli: {key} = {}", String::from_utf8_lossy(&v));
                match args.get(2) {
                    Some(want) if want.as_bytes() != v => {
                        println!("kvcli: {key}: expected {want}");
                        Ok(3)
                    }
                    _ => Ok(0),
                }
            }
            Err(Fail::Status(Status::NotFound)) => {
                println!("kvcli: {key} not found");
                Ok(2)
            }
            Err(f) => Err(f.to_string()),
        },
        ["del", key] => {
            let was = c.del(key.as_bytes()).map_err(|f| f.to_string())?;
            println!(
                "kvcli: del {key} ({})",
                if was { "deleted" } else { "not found" }
            );
            Ok(0)
        }
        ["stats"] => {
            let s = c.stats().map_err(|f| f.to_string())?;
            println!(
                "kvcli: stats entries={} capacity={} layout={} generation={} puts={} gets={} dels={}",
                s.count, s.capacity, s.version, s.generation, s.puts, s.gets, s.dels
            );
            Ok(0)
        }
        ["bench", n] => bench::run(c, n, "1"),
        ["bench", n, seed] => bench::run(c, n, seed),
        ["bad"] => bench::bad(c),
        ["await", key] => {
            let v = c.wait(key.as_bytes()).map_err(|f| f.to_string())?;
            println!("kvcli: {key} = {}", String::from_utf8_lossy(&v));
            Ok(0)
        }
        ["prio"] => {
            // The priority kv's server runs at (a restarted one keeps the first's).
            let pid = ulib::fnid::server_of("kv").ok_or("kv has no server")?;
            let procs = sys::live_processes().map_err(|e| format!("processes: {e}"))?;
            let p = procs
                .iter()
                .find(|p| p.pid == pid)
                .ok_or("kv's server is not running")?;
            let name = ulib::abi::Priority::from_u64(u64::from(p.priority)).map_or("?", |p| p.name());
            println!("kvcli: kv ({pid}) serves at {name} priority");
            Ok(0)
        }
        ["gap", n] => gap(c, n),
        ["load", kind, ns] => antfig::load(c, kind, ns),
        ["gapc", n, pace, label] => antfig::gapc(c, n, pace, label),
        _ => Err(String::from(
            "usage: kvcli put KEY VALUE | get KEY [EXPECT] | del KEY | stats | bench N [SEED] | all N | bad | gap N | drop | table2 SAMPLES OPS | antfig figs|gap REPS | load pu|wait NS | gapc N PACE LABEL | wait [SECONDS] | await KEY",
        )),
    }
}

/// `gap N`: the service gap seen by one client (module docs).
fn gap(c: &mut Client, n: &str) -> Result<i32, String> {
    let n: usize = n.parse().map_err(|_| String::from("gap N"))?;
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let key = format!("gap-{}-{}", me.core(), me.serial());
    c.put(key.as_bytes(), b"v").map_err(|f| f.to_string())?;
    let mut times = alloc::vec::Vec::with_capacity(n);
    let mut wrong = 0;
    for _ in 0..n {
        let t0 = sys::clock_ns().unwrap_or(0);
        let v = c.get(key.as_bytes()).map_err(|f| f.to_string())?;
        times.push(sys::clock_ns().unwrap_or(0).saturating_sub(t0));
        wrong += usize::from(v != b"v");
    }
    let _ = c.del(key.as_bytes());
    times.sort_unstable();
    let median = times.get(n / 2).copied().unwrap_or(0);
    let max = times.last().copied().unwrap_or(0);
    println!(
        "kvcli: gap calls={n} median={median} ns max={max} ns gap={} ns wrong={wrong}",
        max - median
    );
    Ok(i32::from(wrong != 0))
}

/// `kv` registered and answering, within `seconds`.
fn wait(seconds: u64) -> Result<i32, String> {
    let t0 = sys::clock_ns().unwrap_or(0);
    loop {
        if let Ok(id) = fnid::lookup("kv") {
            let (label, words) = Request::new(proto::STATS, b"", 0, 0)
                .map_err(|f| f.to_string())?
                .encode();
            if let Ok((_, reply)) = ipc::call(id.as_target(), &Msg { label, words }) {
                if reply.label == Status::Ok as u64 {
                    println!("kvcli: kv is up");
                    return Ok(0);
                }
            }
        }
        if sys::clock_ns().unwrap_or(0).saturating_sub(t0) > seconds * 1_000_000_000 {
            return Err(format!("kv did not answer within {seconds} s"));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
}

/// A connection to `kv`: its function id and our data area.
pub struct Client {
    pub fnid: FnId,
    pub region: ResId,
}

/// How often `HELLO` is said again while it meets `Gone` (10 ms apart: 30 s).
const HELLO_TRIES: u32 = 3000;

/// Open the data area, say `HELLO`, run `f`, and always clean up after it.
fn with_client(f: impl FnOnce(&mut Client) -> Result<i32, String>) -> Result<i32, String> {
    let fnid = fnid::lookup("kv").map_err(|e| format!("lookup kv: {e}"))?;
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let area = proto::AreaName {
        core: me.core(),
        serial: me.serial(),
    };
    let name = format!("here/vregion/{area}");
    let region = res::open_vregion(&name, AREA_SIZE, AREA_RIGHTS)
        .map_err(|e| format!("open data area: {e}"))?;
    if let Err(e) = res::attach_here(region, AREA_AT, true) {
        let _ = res::close(region);
        return Err(format!("attach data area: {e}"));
    }
    let mut c = Client { fnid, region };
    // `Gone`: kv crashed serving our HELLO, or a new server died taking over (it restarts,
    // `FN_RESTART`): say it again, for as long as `wait` waits for kv (a hang guard: 200 ms
    // was too short for a restart on a loaded host, `[smp4-biglock]` once).
    let mut hello = c.hello();
    for _ in 0..HELLO_TRIES {
        if hello != Err(Fail::Call(ulib::abi::Error::Gone)) {
            break;
        }
        let _ = sys::sleep_ns(10_000_000);
        hello = c.hello();
    }
    let r = match hello {
        Ok(()) => f(&mut c),
        Err(e) => Err(format!("hello: {e}")),
    };
    let _ = c.raw(proto::BYE, b"", 0, 0);
    let detached = res::detach_here(AREA_AT);
    // A server that ended (replaced, or crashed) may still be telling the area's core that
    // it unmapped it (`Busy` meanwhile): a few tries.
    let mut tries = 0;
    let closed = loop {
        match res::close(region) {
            Err(ulib::abi::Error::Busy) if tries < 1000 => {
                tries += 1;
                let _ = sys::sleep_ns(1_000_000);
            }
            r => break r,
        }
    };
    match (r, detached, closed) {
        (Err(e), _, _) => Err(e),
        (Ok(_), Err(e), _) => Err(format!("detach data area: {e}")),
        (Ok(_), _, Err(e)) => Err(format!("close data area: {e}")),
        (Ok(code), Ok(()), Ok(())) => Ok(code),
    }
}

/// Why a call failed: the kernel's error, or the server's status.
#[derive(Debug, PartialEq, Eq)]
pub enum Fail {
    Call(ulib::abi::Error),
    Status(Status),
}

impl core::fmt::Display for Fail {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Fail::Call(e) => write!(f, "call kv: {e}"),
            Fail::Status(s) => write!(f, "kv: {s}"),
        }
    }
}

impl Client {
    /// Is kv down for good: no server, and none restarting (`fn ls` says "down")? A request
    /// answered `Gone` then stays unanswered, however often it is sent again.
    pub fn down(&self) -> bool {
        use ulib::abi::fnid::{FN_RESTARTING, FN_UP};
        match fnid::list_local() {
            Ok(list) => !list
                .iter()
                .any(|i| i.fnid == self.fnid && (i.state == FN_UP || i.state == FN_RESTARTING)),
            Err(_) => false,
        }
    }

    fn area(&self) -> *mut u8 {
        AREA_AT as *mut u8
    }

    /// Send a message as is; the reply's status and words.
    pub fn send_raw(&self, label: u64, words: [u64; 6]) -> Result<(Status, [u64; 6]), Fail> {
        // `Again` (kv replaced while it held the request, or restarting) is sent again.
        let (_, reply) = fnid::call_fn(self.fnid, &Msg { label, words }).map_err(Fail::Call)?;
        let s = Status::from_code(reply.label).ok_or(Fail::Status(Status::BadOp))?;
        Ok((s, reply.words))
    }

    /// One request; a `NoArea` answer (a server that has not seen our `HELLO`) is mended by
    /// one more `HELLO` and the request again.
    fn raw(&self, op: u64, key: &[u8], value_len: usize, arg: u64) -> Result<[u64; 6], Fail> {
        let req = Request::new(op, key, value_len, arg).map_err(Fail::Status)?;
        let (label, words) = req.encode();
        let mut r = self.send_raw(label, words)?;
        if r.0 == Status::NoArea && op != proto::HELLO && op != proto::BYE {
            self.hello()?;
            r = self.send_raw(label, words)?;
        }
        match r {
            (Status::Ok, w) => Ok(w),
            (s, _) => Err(Fail::Status(s)),
        }
    }

    fn hello(&self) -> Result<(), Fail> {
        let req = Request::new(proto::HELLO, b"", 0, self.region.0).map_err(Fail::Status)?;
        let (label, words) = req.encode();
        match self.send_raw(label, words)? {
            (Status::Ok, _) => Ok(()),
            (s, _) => Err(Fail::Status(s)),
        }
    }

    /// Store `value` under `key`; true if the key was new.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<bool, Fail> {
        if value.len() > kvstate::VALUE_MAX {
            return Err(Fail::Status(Status::ValueTooLong));
        }
        for (i, b) in value.iter().enumerate() {
            // SAFETY: the area is mapped writable at AREA_AT for AREA_SIZE (> VALUE_MAX)
            // bytes while the client lives; volatile because the server reads it.
            unsafe { core::ptr::write_volatile(self.area().add(i), *b) };
        }
        self.raw(proto::PUT, key, value.len(), 0).map(|w| w[0] == 1)
    }

    pub fn get(&self, key: &[u8]) -> Result<alloc::vec::Vec<u8>, Fail> {
        self.read(proto::GET, key)
    }

    /// `key`'s value once it has one (`WAIT`: the server holds the request until then).
    pub fn wait(&self, key: &[u8]) -> Result<alloc::vec::Vec<u8>, Fail> {
        self.read(proto::WAIT, key)
    }

    /// `GET` or `WAIT`: the value the server wrote to our area.
    fn read(&self, op: u64, key: &[u8]) -> Result<alloc::vec::Vec<u8>, Fail> {
        let w = self.raw(op, key, 0, 0)?;
        let len = (w[0] as usize).min(kvstate::VALUE_MAX);
        Ok((0..len)
            // SAFETY: as in `put`; `len` is at most VALUE_MAX.
            .map(|i| unsafe { core::ptr::read_volatile(self.area().add(i)) })
            .collect())
    }

    /// Remove `key`; true if it was there.
    pub fn del(&self, key: &[u8]) -> Result<bool, Fail> {
        self.raw(proto::DEL, key, 0, 0).map(|w| w[0] == 1)
    }

    pub fn stats(&self) -> Result<StatsReply, Fail> {
        self.raw(proto::STATS, b"", 0, 0)
            .map(|w| StatsReply::decode(&w))
    }
}
