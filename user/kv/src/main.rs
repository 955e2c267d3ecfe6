//! `kv [SIZE] [local] [v1] [cpu=NS] [wait=NS] [restart=N] [takeover [fail|probe]]`: the key-value server of issue 14 ("State
//! outside the server", "Live replacement").
//!
//! It opens an endpoint and registers it under the function id `kv` (`ulib::fnid`), so
//! clients (`kvcli`) reach it by name, whatever process or core serves it. Its whole table
//! (`libs/kvstate`: keys up to 32 bytes, values up to 1 KiB) lives in the function's *state
//! ICA*, a vregion that outlives the server:
//!
//! - `FN_STATE(kv, 0)` names one (a server of `kv` ran before): it is attached at
//!   [`STATE_AT`] and opened, which undoes or finishes a request that a kill of the last
//!   server cut short and checks all of it; an older layout is upgraded in place first
//!   (`kvstate::upgrade`); one that holds no table yet (zeroes) is formatted; a corrupt one
//!   is refused (the server exits, the state is left for inspection).
//! - Else a vregion of SIZE bytes (default 1 MiB; `4096`, `512K`, `1M`) is opened, attached,
//!   formatted and made the state ICA with `FN_STATE(kv, vregion)`.
//!
//! `local` keeps the table in the heap instead (the same code over a heap buffer, lost when
//! the server ends): P3 Table 2's "state in the process", to measure what the state ICA
//! costs. `v1` formats (or serves) layout version 1, so that a later server shows the
//! upgrade.
//!
//! Requests (`kvstate::proto`): `HELLO`, `PUT`, `GET`, `DEL`, `STATS`, `BYE`, served one at a
//! time with `REPLY_RECV`; values travel through each client's data area ([`clients`]). A
//! malformed request gets an error status in its reply, and the server keeps serving.
//! `WAIT KEY` is held until a `PUT` of the key answers it (up to 64 held): the requests a
//! server holds across others. When kv is replaced while holding some, the kernel's retire
//! notice (`abi::fnid::RETIRE_NOTICE`) comes instead of a request: kv answers each held
//! `WAIT` `Again` (`REPLY_ERROR`), the clients send them again (`ulib::fnid::call_fn`) and
//! the new server holds them; its next receive retires it.
//!
//! `restart=N` (restart after a crash, `FN_RESTART`): if kv ends by a fault or a kill, the
//! kernel starts `kv` again with the same arguments (without `takeover`), at most N times
//! a minute; the new server registers again, finds the table in the state ICA, and serves
//! the requests that were queued. A `kv takeover restart=N` opts in once it serves.
//!
//! `takeover` (live replacement, `FN_TAKEOVER`): instead of registering, it opens its
//! endpoint, checks what it can before the switch (the function and its state ICA exist,
//! the state is a vregion of a size it can serve), and takes `kv` over from the server
//! serving it, which finishes its request step and ends; the requests queued for it come
//! to this one. Only then does it attach the state ICA (the old server mapped it until it
//! ended) and serve; a client that said `HELLO` to an earlier server is known by its data
//! area's name (`clients`). `takeover fail` fails its start-up check on purpose, before the switch:
//! it exits 1 and the old server serves on (rollback).
//!
//! `cpu=NS` and `wait=NS` make every request step longer, for `cargo xtask bench ant` (P3
//! Figures 3-5: replacement time against the server's CPU time and wait time per request):
//! before answering, the step spins on the time-stamp counter for NS ns (CPU time; under
//! `-icount shift=0` NS instructions) and then sleeps NS ns (`SLEEP`, a wait inside the step,
//! as AnT's driver waited for its device). A takeover server is given the same knobs.
//!
//! Prints `kv: serving fnN.G ...` once it serves; exits 1 with `kv: ERROR` if it cannot
//! start (the name is served already, the state ICA is corrupt or not a vregion it may map).
#![no_std]
#![no_main]

extern crate alloc;

mod clients;

use alloc::format;
use alloc::string::String;
use clients::Clients;
use kvstate::proto::{self, Request, StatsReply, Status};
use kvstate::Table;
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{Msg, SUBMIT_SEND};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, println, res, sys};

ulib::main!(main);

/// Where the state ICA is mapped: a fixed address, the same in every server of `kv`.
pub const STATE_AT: u64 = 0x0000_5f00_0000_0000;
/// Default size of a new state ICA.
const DEFAULT_SIZE: u64 = 1 << 20;
/// An endpoint others may send to (write) and only its owner receives on.
const ENDPOINT_RIGHTS: Rights = Rights(0x2f);

struct Options {
    size: u64,
    local: bool,
    version: u32,
    /// Take `kv` over from its server (`takeover`), or fail the check first (`fail`), or
    /// only try `FN_TAKEOVER`'s refusals (`probe`).
    takeover: bool,
    fail: bool,
    probe: bool,
    /// Extra work in every request step (`cpu=NS`, `wait=NS`).
    load: Load,
    /// Restart after a crash, at most this many times a minute (`restart=N`; 0: off).
    restart: u64,
}

/// Extra work in every request step: `cpu` ns spinning, then `wait` ns asleep.
#[derive(Clone, Copy, Default)]
struct Load {
    cpu: u64,
    wait: u64,
}

impl Load {
    fn apply(&self) {
        if self.cpu > 0 {
            let t0 = ulib::bench::rdtsc();
            while ulib::bench::rdtsc().wrapping_sub(t0) < self.cpu {
                core::hint::spin_loop();
            }
        }
        if self.wait > 0 {
            let _ = sys::sleep_ns(self.wait);
        }
    }
}

/// How long a takeover waits for the old server to finish its request step.
const TAKEOVER_TIMEOUT_NS: u64 = 2_000_000_000;

fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn main(args: &[&str]) -> i32 {
    let mut o = Options {
        size: DEFAULT_SIZE,
        local: false,
        version: kvstate::VERSION,
        takeover: false,
        fail: false,
        probe: false,
        load: Load::default(),
        restart: 0,
    };
    for a in &args[1..] {
        match *a {
            "local" => o.local = true,
            "v1" => o.version = 1,
            "takeover" => o.takeover = true,
            "fail" => o.fail = true,
            "probe" => o.probe = true,
            s if s.starts_with("cpu=") || s.starts_with("wait=") => {
                let (knob, v) = s.split_once('=').unwrap_or_default();
                let Ok(ns) = v.parse::<u64>() else {
                    println!("kv: {knob}=NS takes a number of ns, not {v:?}");
                    return 2;
                };
                if knob == "cpu" {
                    o.load.cpu = ns;
                } else {
                    o.load.wait = ns;
                }
            }
            s if s.starts_with("restart=") => match s["restart=".len()..].parse() {
                Ok(n) if n <= ulib::abi::fnid::MAX_RESTARTS => o.restart = n,
                _ => {
                    println!(
                        "kv: restart=N: N from 0 to {}",
                        ulib::abi::fnid::MAX_RESTARTS
                    );
                    return 2;
                }
            },
            s => match parse_size(s) {
                Some(n) => o.size = n,
                None => {
                    println!(
                        "kv: usage: kv [SIZE] [local] [v1] [cpu=NS] [wait=NS] [restart=N] [takeover [fail|probe]]"
                    );
                    return 2;
                }
            },
        }
    }
    // A restart after a crash starts kv as a first server, with the same options.
    match run(&o, &fnid::restart_args(args, &["fail", "probe"])) {
        Ok(()) => 0,
        Err(e) => {
            println!("kv: {e}");
            1
        }
    }
}

/// Opt in to restart after a crash (`restart=N`): N times in a minute, as `kv ARGS`.
fn opt_in(id: FnId, o: &Options, args: &str) -> Result<(), String> {
    if o.restart == 0 {
        return Ok(());
    }
    fnid::restart(id, o.restart, ulib::abi::fnid::RESTART_WINDOW_MS, args)
        .map_err(|e| format!("FN_RESTART {id}: {e}"))
}

fn run(o: &Options, restart_args: &str) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    // A name nobody can guess (`res::open_fresh`): under this server's serial, a program
    // could take the name the next `kv` would use and keep it from starting.
    let ep = res::open_fresh("here/endpoint/kv", &[], ENDPOINT_RIGHTS)
        .map_err(|e| format!("endpoint: {e}"))?;
    if o.takeover {
        return take_over(ep, o, restart_args);
    }
    let id = fnid::register("kv", ep).map_err(|e| format!("register kv: {e}"))?;
    let (table, where_) = if o.local {
        // SIZE is the user's: too much for the heap is an error, not a panic.
        let mut area = alloc::vec::Vec::new();
        area.try_reserve_exact(o.size as usize)
            .map_err(|_| format!("{} bytes for a local table: no memory", o.size))?;
        area.resize(o.size as usize, 0u8);
        let area = area.leak();
        let t = kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
        (t, String::from("in the process (local)"))
    } else {
        state_table(id, o)?
    };
    opt_in(id, o, restart_args)?;
    let s = table.stats();
    println!(
        "kv: serving {id} as {me}, table {where_}: layout {}, {} slots, {} entries, generation {}",
        s.version, s.capacity, s.count, s.generation
    );
    // A state ICA found: an earlier server (one that crashed, restarted now) may have
    // clients that said HELLO to it; they are found by their areas' names.
    let inherited = where_.starts_with("in state ICA") && !where_.ends_with("(new)");
    serve(ep, table, inherited, o.load)
}

/// `kv takeover`: check, take `kv` over, then attach its state and serve.
fn take_over(ep: ResId, o: &Options, restart_args: &str) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let id = fnid::lookup("kv").map_err(|e| format!("takeover: no kv to take over: {e}"))?;
    // The start-up check, before the switch: a state ICA this server can open.
    let region = fnid::state(id, None)
        .map_err(|e| format!("takeover: FN_STATE: {e}"))?
        .ok_or_else(|| String::from("takeover: kv has no state ICA"))?;
    let info = res::info(region).map_err(|e| format!("takeover: state ICA {region}: {e}"))?;
    if info.kind != ulib::abi::res::ResType::VRegion as u8 || info.size < 4096 {
        return Err(format!(
            "takeover: state ICA {region} is not a table's vregion"
        ));
    }
    if o.probe {
        return probe(id, ep);
    }
    if o.fail || o.local {
        return Err(format!(
            "takeover: start-up check failed{}: not taking over, the old server serves on",
            if o.fail {
                " (on purpose)"
            } else {
                " (local keeps no shared state)"
            }
        ));
    }
    let generation = fnid::takeover(id, ep, TAKEOVER_TIMEOUT_NS)
        .map_err(|e| format!("takeover of {id}: {e}"))?;
    fnid::attach_state(region, STATE_AT)
        .map_err(|e| format!("attach state ICA {region} after takeover: {e}"))?;
    let (table, what) = open_state(region, info.size, o)?;
    opt_in(id, o, restart_args)?;
    let s = table.stats();
    println!(
        "kv: took over {id} (server generation {generation}) as {me}, table in state ICA {region} ({what}): layout {}, {} slots, {} entries",
        s.version, s.capacity, s.count
    );
    serve(ep, table, true, o.load)
}

/// `kv takeover probe`: `FN_TAKEOVER`'s refusals, none of which changes anything (the
/// caller checks that the old server serves on). Never takes over.
fn probe(id: FnId, ep: ResId) -> Result<(), String> {
    let old_ep = fnid::list()
        .map_err(|e| format!("FN_LIST: {e}"))?
        .into_iter()
        .find(|f| f.fnid == id)
        .map(|f| ResId(f.endpoint))
        .ok_or_else(|| String::from("probe: kv not listed"))?;
    let stale = FnId::new(id.slot(), id.generation().wrapping_sub(1));
    let cases: [(&str, FnId, ResId, Error); 5] = [
        (
            "a forged id",
            FnId::new(id.slot(), id.generation() + 1),
            ep,
            Error::NoSuchResource,
        ),
        ("not a function id", FnId(ep.0), ep, Error::NoSuchResource),
        (
            "the function id as endpoint",
            id,
            id.as_target(),
            Error::WrongType,
        ),
        ("the old server's endpoint", id, old_ep, Error::Denied),
        (
            "a stale id",
            stale,
            ep,
            if stale.generation() == 0 {
                Error::NoSuchResource
            } else {
                Error::StaleResource
            },
        ),
    ];
    let mut bad = 0;
    for (what, f, e, want) in cases {
        let got = fnid::takeover(f, e, 1_000_000);
        if got != Err(want) {
            println!("kv: probe: FN_TAKEOVER with {what}: {got:?}, want Err({want:?})");
            bad += 1;
        }
    }
    // A server that never looks for a request (this process, serving `kv-probe` on an
    // endpoint it never receives on): `TimedOut`, nothing changed; once its endpoint is
    // closed (down), taken over at once.
    let ep2 = res::open_fresh("here/endpoint/kvp", &[], ENDPOINT_RIGHTS)
        .map_err(|e| format!("endpoint: {e}"))?;
    let pid = fnid::register("kv-probe", ep2).map_err(|e| format!("register kv-probe: {e}"))?;
    let got = fnid::takeover(pid, ep, 1_000_000);
    let now = fnid::list()
        .map_err(|e| format!("FN_LIST: {e}"))?
        .into_iter()
        .find(|f| f.fnid == pid);
    if got != Err(Error::TimedOut) || now.map(|f| (f.endpoint, f.generation)) != Some((ep2.0, 1)) {
        println!("kv: probe: FN_TAKEOVER from a server that never receives: {got:?}, then {now:?}");
        bad += 1;
    }
    let _ = res::close(ep2);
    let got = fnid::takeover(pid, ep, 1_000_000);
    if got != Ok(2) {
        println!("kv: probe: FN_TAKEOVER of a function that is down: {got:?}, want Ok(2)");
        bad += 1;
    }
    fnid::unregister(pid).map_err(|e| format!("unregister kv-probe: {e}"))?;
    // Another user may not take it over.
    res::setuser(ulib::abi::res::UserId(4242)).map_err(|e| format!("setuser: {e}"))?;
    let got = fnid::takeover(id, ep, 1_000_000);
    if got != Err(Error::Denied) {
        println!("kv: probe: FN_TAKEOVER by another user: {got:?}, want Err(Denied)");
        bad += 1;
    }
    if bad > 0 {
        return Err(format!("probe: {bad} answers wrong"));
    }
    println!("kv: probe: FN_TAKEOVER's refusals as documented");
    Ok(())
}

/// The table in the function's state ICA: found (and upgraded) or made.
fn state_table(id: FnId, o: &Options) -> Result<(Table<'static>, String), String> {
    let (region, len, found) = match fnid::state(id, None).map_err(|e| format!("FN_STATE: {e}"))? {
        Some(region) => {
            let info = res::info(region).map_err(|e| format!("state ICA {region}: {e}"))?;
            (region, info.size, true)
        }
        None => {
            // A name nobody can guess (`res::open_fresh`): under `kv-state-SERIAL`, a
            // program could take the name of the next server first and keep it from
            // starting (serials come in order).
            let region = res::open_fresh(
                "here/vregion/kv-state",
                &o.size.to_le_bytes(),
                Rights::OWNER_ALL,
            )
            .map_err(|e| format!("open state ICA of {} bytes: {e}", o.size))?;
            (region, o.size, false)
        }
    };
    // A state ICA found (a restart after a crash) may still be unmapped by the crashed
    // server's core: `attach_state` tries again while `Busy`.
    let attached = if found {
        fnid::attach_state(region, STATE_AT)
    } else {
        res::attach_here(region, STATE_AT, true)
    };
    if let Err(e) = attached {
        if !found {
            let _ = res::close(region);
        }
        return Err(format!("attach state ICA {region}: {e}"));
    }
    if found {
        let (t, what) = open_state(region, len, o)?;
        return Ok((t, format!("in state ICA {region} ({what})")));
    }
    // SAFETY: `region` (`len` bytes) is mapped writable at STATE_AT for the rest of this
    // process's life (it is never detached), and nothing else in this process uses that
    // range: the slice is the only way to it.
    let area: &'static mut [u8] =
        unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, len as usize) };
    // Format before handing it to the registry: it then always holds a table.
    kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
    fnid::state(id, Some(region)).map_err(|e| format!("FN_STATE set {region}: {e}"))?;
    let t = open_area(area, o.version).map_err(|e| format!("state ICA {region}: {e}"))?;
    Ok((t, format!("in state ICA {region} (new)")))
}

/// The table in the state ICA `region` (`len` bytes) found mapped at [`STATE_AT`]: opened,
/// formatted if it holds zeroes, upgraded if older; what was done.
fn open_state(
    region: ResId,
    len: u64,
    o: &Options,
) -> Result<(Table<'static>, &'static str), String> {
    // SAFETY: `region` (`len` bytes) is mapped writable at STATE_AT for the rest of this
    // process's life (it is never detached), and nothing else in this process uses that
    // range: the slice is the only way to it.
    let area: &'static mut [u8] =
        unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, len as usize) };
    // Only an area of zeroes throughout is new: one whose start alone was zeroed is
    // corrupt, and is refused (its magic is gone), never wiped (a review found 8 zero bytes
    // at its start made kv format it and lose every key; `kv_state_survives_its_server`).
    let what = if area.iter().all(|&b| b == 0) {
        // Zeroes: a state ICA set but never formatted (a server that ended before).
        kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
        "formatted"
    } else if o.version == kvstate::VERSION {
        match kvstate::upgrade(area).map_err(|e| format!("state ICA {region}: {e}"))? {
            v if v < o.version => {
                println!("kv: state ICA upgraded from layout {v} to {}", o.version);
                "upgraded"
            }
            _ => "found",
        }
    } else {
        "found"
    };
    let t = open_area(area, o.version).map_err(|e| format!("state ICA {region}: {e}"))?;
    if let Some(op) = t.recovered() {
        println!(
            "kv: the last server was killed during a {op}: set right (put undone, del finished)"
        );
    }
    Ok((t, what))
}

/// Open the table in `area` as layout `version`.
fn open_area(area: &'static mut [u8], version: u32) -> Result<Table<'static>, kvstate::Error> {
    if version == kvstate::VERSION {
        kvstate::open(area)
    } else {
        kvstate::open_version(area, version)
    }
}

/// Most `WAIT` requests held at once (more: `Busy`).
const MAX_WAITS: usize = 64;

/// A `WAIT` request held until its key has a value.
struct Held {
    handle: u64,
    sender: ulib::abi::Pid,
    key: alloc::vec::Vec<u8>,
    offset: u64,
}

/// Answer requests forever, one `REPLY_RECV` per request; `WAIT`s are held (answered by
/// the `PUT` of their key) and, on the retire notice, answered `Again`.
fn serve(ep: ResId, mut table: Table<'static>, inherited: bool, load: Load) -> Result<(), String> {
    let mut clients = Clients::new(inherited);
    let mut held: alloc::vec::Vec<Held> = alloc::vec::Vec::new();
    let mut handle = 0;
    let mut out = Msg::default();
    loop {
        let r = match ipc::reply_recv(handle, 0, &out, ep, u64::MAX) {
            Ok(r) => r,
            Err(Error::TimedOut) => {
                handle = 0;
                continue;
            }
            // The handle is unknown (nothing was answered or received): just receive.
            Err(Error::NoSuchResource) if handle != 0 => {
                handle = 0;
                continue;
            }
            Err(e) => return Err(format!("receive: {e}")),
        };
        handle = 0;
        if r.msg.label == ulib::abi::fnid::RETIRE_NOTICE && r.sender.0 == 0 {
            // Being replaced: what we hold goes back to its callers, who send it again
            // (to the new server); the next receive, holding none, retires us.
            for h in held.drain(..) {
                let _ = ipc::reply_error(h.handle, Error::Again);
            }
            continue;
        }
        load.apply();
        if let Some((_, at)) = ipc::ica_at(&r.msg) {
            // kv's requests carry no page (a client's data area is its own, found by name):
            // one sent anyway is let go of and the request refused (a review found each
            // kept mapped here for good, until no client's area found room).
            let _ = res::detach_here(at);
            out = Msg {
                label: Status::BadOp as u64,
                words: [0; 6],
            };
            handle = if r.kind == SUBMIT_SEND { 0 } else { r.request };
            continue;
        }
        let (status, words) = match Request::decode(r.msg.label, &r.msg.words) {
            Ok(req) if req.op == proto::WAIT && r.kind != SUBMIT_SEND => {
                match wait(
                    &mut table,
                    &mut clients,
                    &mut held,
                    r.request,
                    r.sender,
                    &req,
                ) {
                    Ok(Some(words)) => (Status::Ok, words),
                    Ok(None) => continue, // held
                    Err(s) => (s, [0; 6]),
                }
            }
            Ok(req) => match step(&mut table, &mut clients, r.sender, &req) {
                Ok(words) => {
                    if req.op == proto::PUT {
                        wake(&mut table, &mut clients, &mut held, req.key());
                    }
                    (Status::Ok, words)
                }
                Err(s) => (s, [0; 6]),
            },
            Err(s) => (s, [0; 6]),
        };
        out = Msg {
            label: status as u64,
            words,
        };
        // A one-way SEND takes no reply.
        handle = if r.kind == SUBMIT_SEND { 0 } else { r.request };
    }
}

/// A `WAIT`: answered now (as `GET`) if the key has a value, else held (`None`).
fn wait(
    table: &mut Table<'static>,
    clients: &mut Clients,
    held: &mut alloc::vec::Vec<Held>,
    handle: u64,
    sender: ulib::abi::Pid,
    req: &Request,
) -> Result<Option<[u64; 6]>, Status> {
    let area = clients.area(sender)?;
    if let Some(v) = table.get(req.key())? {
        area.write(req.arg, v)?;
        return Ok(Some([v.len() as u64, 0, 0, 0, 0, 0]));
    }
    // One client holds at most a quarter of the table; when it is full, the waits of
    // clients that have ended go first (a review found one client could fill it for
    // everyone, for good: its waits stayed after it ended).
    if held.iter().filter(|h| h.sender == sender).count() >= MAX_WAITS / 4 {
        return Err(Status::Busy);
    }
    if held.len() >= MAX_WAITS {
        // Only a whole list of the live programs is trusted (`sys::live_pids`).
        let alive =
            ulib::sys::live_pids().unwrap_or_else(|| held.iter().map(|h| h.sender).collect());
        held.retain(|h| {
            let lives = alive.contains(&h.sender);
            if !lives {
                // Answered, so the kernel forgets the request (nobody takes the answer).
                let _ = ipc::reply_error(h.handle, Error::Gone);
            }
            lives
        });
    }
    if held.len() >= MAX_WAITS {
        return Err(Status::Busy);
    }
    held.push(Held {
        handle,
        sender,
        key: req.key().to_vec(),
        offset: req.arg,
    });
    Ok(None)
}

/// `key` was just put: answer the `WAIT`s held for it.
fn wake(
    table: &mut Table<'static>,
    clients: &mut Clients,
    held: &mut alloc::vec::Vec<Held>,
    key: &[u8],
) {
    let Ok(Some(v)) = table.get(key) else {
        return;
    };
    let mut i = 0;
    while i < held.len() {
        if held[i].key != key {
            i += 1;
            continue;
        }
        let h = held.swap_remove(i);
        let answer = clients
            .area(h.sender)
            .and_then(|a| a.write(h.offset, v))
            .map_or_else(
                |s| Msg {
                    label: s as u64,
                    words: [0; 6],
                },
                |()| Msg {
                    label: Status::Ok as u64,
                    words: [v.len() as u64, 0, 0, 0, 0, 0],
                },
            );
        let _ = ipc::reply(h.handle, 0, &answer);
    }
}

/// One request: the reply's words, or its status.
fn step(
    table: &mut Table<'static>,
    clients: &mut Clients,
    sender: ulib::abi::Pid,
    req: &Request,
) -> Result<[u64; 6], Status> {
    let mut w = [0u64; 6];
    match req.op {
        proto::HELLO => clients.hello(sender, ResId(req.arg))?,
        proto::BYE => clients.bye(sender)?,
        proto::PUT => {
            let area = clients.area(sender)?;
            let mut buf = [0u8; kvstate::VALUE_MAX];
            let value = &mut buf[..req.value_len];
            area.read(req.arg, value)?;
            w[0] = u64::from(table.put(req.key(), value)?);
        }
        proto::GET => {
            let area = clients.area(sender)?;
            match table.get(req.key())? {
                Some(v) => {
                    area.write(req.arg, v)?;
                    w[0] = v.len() as u64;
                }
                None => return Err(Status::NotFound),
            }
        }
        proto::DEL => w[0] = u64::from(table.del(req.key())?),
        proto::STATS => w = StatsReply::from(table.stats()).encode(),
        _ => return Err(Status::BadOp),
    }
    Ok(w)
}
