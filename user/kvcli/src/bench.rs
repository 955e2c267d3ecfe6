//! `kvcli bench` (every reply checked against a local model) and `kvcli bad` (malformed
//! requests get their error status, and the server keeps serving).

use crate::{Client, Fail, AREA_SIZE};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use kvstate::proto::{self, Request, Status};
use kvstate::VALUE_MAX;
use ulib::abi::ipc::Msg;
use ulib::abi::res::Rights;
use ulib::abi::Priority;
use ulib::{ipc, println, res, sys};
use xorshift::Rng;

/// Distinct keys a bench uses (few, so puts replace and gets and dels hit).
const KEYS: u64 = 32;
/// Mismatch lines printed at most.
const SHOWN: u64 = 20;

#[derive(Default)]
struct Counts {
    puts: u64,
    gets: u64,
    dels: u64,
    full: u64,
    /// Requests answered `Gone` (kv crashed while serving them; it restarts).
    gone: u64,
    mismatches: u64,
}

impl Counts {
    fn mismatch(&mut self, what: String) {
        self.mismatches += 1;
        if self.mismatches <= SHOWN {
            println!("kvcli: mismatch {what}");
        }
    }
}

/// The value of `k` as kv has it now (`None`: not found), asked again while kv answers
/// `Gone` (it crashed serving the request and restarts: `abi::fnid`'s `FN_RESTART`); not
/// asked again once kv is down for good.
fn settle(c: &Client, k: &[u8]) -> Result<Option<Vec<u8>>, Fail> {
    let mut tries = 0;
    loop {
        match c.get(k) {
            Ok(v) => return Ok(Some(v)),
            Err(Fail::Status(Status::NotFound)) => return Ok(None),
            Err(Fail::Call(ulib::abi::Error::Gone)) if tries < 20 && !c.down() => {
                tries += 1;
                let _ = sys::sleep_ns(10_000_000);
            }
            Err(f) => return Err(f),
        }
    }
}

/// A request to `k` was answered `Gone` (its server crashed while serving it: it may or
/// may not have been done): kv must now hold `k` as before (`was`) or as after (`now`);
/// the model takes what it holds.
fn after_gone(
    c: &Client,
    cnt: &mut Counts,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    k: &[u8],
    now: Option<&[u8]>,
    what: &str,
) {
    cnt.gone += 1;
    let was = model.get(k).cloned();
    match settle(c, k) {
        Ok(v) if v.as_deref() == now => match v {
            Some(v) => {
                model.insert(k.to_vec(), v);
            }
            None => {
                model.remove(k);
            }
        },
        Ok(v) if v == was => {}
        r => cnt.mismatch(format!(
            "{what} {} answered Gone, then {:?} (model: {:?} bytes)",
            String::from_utf8_lossy(k),
            r.map(|v| v.map(|v| v.len())),
            was.map(|v| v.len())
        )),
    }
}

/// `bench N SEED`: N put/get pairs and a del every 8th, on keys named after this process
/// (so benches on every core at once do not disturb each other's models).
pub fn run(c: &mut Client, n: &str, seed: &str) -> Result<i32, String> {
    let n: u64 = n.parse().map_err(|_| format!("bench: bad N {n:?}"))?;
    let seed: u64 = seed
        .parse()
        .map_err(|_| format!("bench: bad SEED {seed:?}"))?;
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let mut rng = Rng(seed ^ me.0.rotate_left(17) | 1);
    let key = |k: u64| format!("b{}.{}.{k}", me.core(), me.serial()).into_bytes();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut cnt = Counts::default();
    let mut down = false;
    for i in 0..n {
        // kv down for good (killed, no restart): every request would be `Gone`; stop.
        if cnt.gone > 0 && c.down() {
            println!(
                "kvcli: kv is down (no server, no restart): the bench stops after {i} of {n} pairs"
            );
            down = true;
            break;
        }
        let k = key(rng.below(KEYS));
        let len = rng.below(VALUE_MAX as u64 + 1) as usize;
        let v: Vec<u8> = (0..len)
            .map(|j| (i as u8) ^ (j as u8) ^ seed as u8)
            .collect();
        cnt.puts += 1;
        match c.put(&k, &v) {
            Ok(new) if new != model.contains_key(&k) => {
                model.insert(k, v);
            }
            Err(Fail::Status(Status::Full)) if !model.contains_key(&k) => cnt.full += 1,
            Err(Fail::Call(ulib::abi::Error::Gone)) => {
                after_gone(c, &mut cnt, &mut model, &k, Some(&v), "put");
            }
            r => cnt.mismatch(format!("put {} -> {r:?}", String::from_utf8_lossy(&k))),
        }
        let k = key(rng.below(KEYS));
        cnt.gets += 1;
        let got = match c.get(&k) {
            Err(Fail::Call(ulib::abi::Error::Gone)) => {
                cnt.gone += 1;
                settle(c, &k).and_then(|v| v.ok_or(Fail::Status(Status::NotFound)))
            }
            r => r,
        };
        match (got, model.get(&k)) {
            (Ok(got), Some(want)) if got == *want => {}
            (Err(Fail::Status(Status::NotFound)), None) => {}
            (r, want) => cnt.mismatch(format!(
                "get {} -> {:?} (model: {:?} bytes)",
                String::from_utf8_lossy(&k),
                r.map(|v| v.len()),
                want.map(|v| v.len())
            )),
        }
        if i % 8 == 7 {
            let k = key(rng.below(KEYS));
            cnt.dels += 1;
            match c.del(&k) {
                Ok(was) if was == model.contains_key(&k) => {
                    model.remove(&k);
                }
                Err(Fail::Call(ulib::abi::Error::Gone)) => {
                    after_gone(c, &mut cnt, &mut model, &k, None, "del");
                }
                r => cnt.mismatch(format!("del {} -> {r:?}", String::from_utf8_lossy(&k))),
            }
        }
    }
    for k in model.keys().filter(|_| !down) {
        let r = match c.del(k) {
            // Done or not: it must be gone now.
            Err(Fail::Call(ulib::abi::Error::Gone)) => {
                cnt.gone += 1;
                match settle(c, k) {
                    Ok(None) => Ok(true),
                    Ok(Some(_)) => c.del(k),
                    Err(f) => Err(f),
                }
            }
            r => r,
        };
        if r != Ok(true) {
            cnt.mismatch(format!("final del {} -> {r:?}", String::from_utf8_lossy(k)));
        }
    }
    println!(
        "kvcli: bench pairs={n} puts={} gets={} dels={} full={} gone={} mismatches={}",
        cnt.puts, cnt.gets, cnt.dels, cnt.full, cnt.gone, cnt.mismatches
    );
    Ok(i32::from(cnt.mismatches != 0))
}

/// `bad`: malformed requests each get their status; good ones still work after them.
/// Where `bad` attaches the page it sends with requests.
const PAGE_AT: u64 = 0x0000_5b00_0000_0000;

pub fn bad(c: &mut Client) -> Result<i32, String> {
    let mut fails = 0;
    let mut expect = |what: &str, got: Result<(Status, [u64; 6]), Fail>, want: Status| {
        if !matches!(got, Ok((s, _)) if s == want) {
            println!("kvcli: bad FAIL {what}: got {got:?}, want {want:?}");
            fails += 1;
        }
    };
    let good = |op, key: &[u8], len, arg| {
        Request::new(op, key, len, arg)
            .map(|r| r.encode())
            .unwrap_or_default()
    };
    let (_, words) = good(proto::GET, b"kvcli-bad", 0, 0);
    expect("unknown operation", c.send_raw(99, words), Status::BadOp);
    expect("operation 0", c.send_raw(0, words), Status::BadOp);
    let mut w = words;
    w[4] = 33;
    expect("33-byte key", c.send_raw(proto::GET, w), Status::BadKey);
    w[4] = 0;
    expect("empty key", c.send_raw(proto::DEL, w), Status::BadKey);
    w[4] = 1 | 2000 << 16;
    expect(
        "2000-byte value",
        c.send_raw(proto::PUT, w),
        Status::ValueTooLong,
    );
    w[4] = 1 | 1 << 48;
    expect("length word", c.send_raw(proto::PUT, w), Status::BadOp);
    // One-way garbage: no reply, nothing breaks.
    let _ = ipc::send(
        c.fnid.as_target(),
        &Msg {
            label: 12345,
            words: [u64::MAX; 6],
        },
    );
    // Offsets beyond our area.
    c.put(b"kvcli-bad", b"value")
        .map_err(|f| format!("put: {f}"))?;
    let (label, words) = good(proto::PUT, b"kvcli-bad", 10, AREA_SIZE - 5);
    expect(
        "value beyond the area",
        c.send_raw(label, words),
        Status::BadArea,
    );
    let (label, words) = good(proto::GET, b"kvcli-bad", 0, AREA_SIZE);
    expect(
        "get beyond the area",
        c.send_raw(label, words),
        Status::BadArea,
    );
    let (label, words) = good(proto::PUT, b"kvcli-bad", 1, u64::MAX);
    expect(
        "offset overflowing",
        c.send_raw(label, words),
        Status::BadArea,
    );
    // Areas that are not ours, or not areas.
    let (label, words) = good(proto::HELLO, b"", 0, 0x1234);
    expect(
        "hello with a forged id",
        c.send_raw(label, words),
        Status::BadArea,
    );
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let other = res::open_vregion(
        &format!("here/vregion/kvx-{}", me.serial()),
        4096,
        Rights(0x3f),
    )
    .map_err(|e| format!("open: {e}"))?;
    let (label, words) = good(proto::HELLO, b"", 0, other.0);
    expect(
        "hello with a misnamed area",
        c.send_raw(label, words),
        Status::BadArea,
    );
    let _ = res::close(other);
    // The area name of another process (the next one on this core, say) is that process's
    // alone: nobody can take it first and keep that client from starting (regression: the
    // names were `kvc-CORE-SERIAL`, open to anyone).
    // On another core too (RPCC: the kernel there checks the requester its flow names),
    // where this process may open a name reserved for itself.
    let other_core = online_cores()?.into_iter().find(|&c| c != me.core());
    let mut wheres = alloc::vec![String::from("here")];
    if let Some(c) = other_core {
        wheres.push(format!("c{c}"));
        let mine = format!("c{c}/vregion/p{}-kvc-there", me.in_machine());
        let id = res::open_vregion(&mine, 4096, Rights(0x3f))
            .map_err(|e| format!("opening {mine}, this process's own name: {e}"))?;
        res::close(id).map_err(|e| format!("close {mine}: {e}"))?;
    }
    for at in wheres {
        let next = proto::AreaName {
            core: me.core(),
            serial: me.serial() + 1,
        };
        let theirs = format!("{at}/vregion/{next}");
        match res::open_vregion(&theirs, 4096, Rights(0x3f)) {
            Err(ulib::abi::Error::Denied) => {}
            other => {
                if let Ok(id) = other {
                    let _ = res::close(id);
                }
                return Err(format!(
                    "opening {theirs}, another process's area name: got {other:?}, want Denied"
                ));
            }
        }
    }
    let (label, words) = good(proto::HELLO, b"", 0, c.fnid.0);
    expect(
        "hello with a function id",
        c.send_raw(label, words),
        Status::BadArea,
    );
    // Without HELLO.
    let (label, words) = good(proto::BYE, b"", 0, 0);
    expect("bye", c.send_raw(label, words), Status::Ok);
    expect("second bye", c.send_raw(label, words), Status::NoArea);
    let (label, words) = good(proto::PUT, b"kvcli-bad", 1, 0);
    expect(
        "put without hello",
        c.send_raw(label, words),
        Status::NoArea,
    );
    // Requests with a page (kv's protocol has none): refused, and let go of by kv, more
    // of them than it could keep mapped, so that the hello below still finds room for
    // this client's area (a review found kv kept each page for good).
    let (label, words) = good(proto::GET, b"kvcli-bad", 0, 0);
    for i in 0..70 {
        // A fresh page each time, closed by the kernel once kv lets go of it.
        let page = res::open_vregion(
            &format!("here/vregion/kvpg-{}-{i}", me.serial()),
            4096,
            Rights(0x3f),
        )
        .map_err(|e| format!("open: {e}"))?;
        let sent = res::attach_here(page, PAGE_AT, true)
            .and_then(|()| res::close_when_detached(page))
            .and_then(|()| ulib::fnid::call_fn(c.fnid, &ipc::with_ica(Msg { label, words }, page)));
        let got = sent.map_err(crate::Fail::Call).map(|(_, reply)| {
            let s = Status::from_code(ipc::label(&reply)).unwrap_or(Status::Ok);
            (s, reply.words)
        });
        if !matches!(got, Ok((Status::BadOp, _))) {
            let _ = res::detach_here(PAGE_AT);
            let _ = res::close(page);
            expect(&format!("request {i} with a page"), got, Status::BadOp);
            break;
        }
    }
    let (label, words) = good(proto::HELLO, b"", 0, c.region.0);
    expect("hello again", c.send_raw(label, words), Status::Ok);
    // The server still serves, and the failed requests changed nothing.
    match c.get(b"kvcli-bad") {
        Ok(v) if v == b"value" => {}
        r => {
            println!("kvcli: bad FAIL get after the bad requests: {r:?}");
            fails += 1;
        }
    }
    if c.del(b"kvcli-bad") != Ok(true) {
        println!("kvcli: bad FAIL del after the bad requests");
        fails += 1;
    }
    if let Err(e) = held_waits(c) {
        println!("kvcli: bad FAIL held waits: {e}");
        fails += 1;
    }
    if fails == 0 {
        println!("kvcli: bad ok");
    }
    Ok(i32::from(fails != 0))
}

/// `WAIT`s kv holds for one client: at most a quarter of its 64 (a review found one client
/// could fill the table for everyone). Submitted, not called (each is held until its key
/// has a value): the first [`HELD_PER_CLIENT`] are held, the next is `Busy` at once, and a
/// `PUT` of each key answers its held `WAIT`.
fn held_waits(c: &mut Client) -> Result<(), String> {
    use ulib::abi::ipc::{Submission, SUBMIT_CALL};
    /// Hang guard for an answer that is due.
    const ANSWER_LIMIT_NS: u64 = 30_000_000_000;
    let key = |i: usize| format!("kvcli-w{i}");
    // Keys a run cut short may have left would answer the WAITs at once.
    for i in 0..=HELD_PER_CLIENT {
        let _ = c.del(key(i).as_bytes());
    }
    let mut tickets = Vec::new();
    let mut r = Ok(());
    for i in 0..=HELD_PER_CLIENT {
        let sub = Request::new(proto::WAIT, key(i).as_bytes(), 0, 0).map(|req| {
            let (label, words) = req.encode();
            Submission {
                kind: SUBMIT_CALL,
                target: c.fnid.as_target().0,
                args: [0; 4],
                msg: Msg { label, words },
            }
        });
        match sub
            .map_err(|s| format!("request: {s:?}"))
            .and_then(|sub| ipc::submit(&sub).map_err(|e| format!("submit WAIT {i}: {e}")))
        {
            Ok(t) => tickets.push(t),
            Err(e) => {
                r = Err(e);
                break;
            }
        }
    }
    let status = |t: u64| {
        ipc::collect(t, ANSWER_LIMIT_NS)
            .map(|done| Status::from_code(ipc::label(&done.msg)))
            .map_err(|e| format!("collect: {e}"))
    };
    if r.is_ok() {
        r = match status(tickets[HELD_PER_CLIENT]) {
            Ok(Some(Status::Busy)) => Ok(()),
            other => Err(format!(
                "WAIT {HELD_PER_CLIENT} answered {other:?}, want Busy"
            )),
        };
    }
    // Every key put (answering what is held, whatever happened above) and deleted.
    for i in 0..=HELD_PER_CLIENT {
        let put = c
            .put(key(i).as_bytes(), b"w")
            .map_err(|f| format!("put {}: {f}", key(i)));
        if let (Some(t), true) = (tickets.get(i), i < HELD_PER_CLIENT) {
            let answered = put.and_then(|_| status(*t)).and_then(|s| match s {
                Some(Status::Ok) => Ok(()),
                other => Err(format!("held WAIT {i} answered {other:?} after its PUT")),
            });
            r = r.and(answered);
        }
        let _ = c.del(key(i).as_bytes());
    }
    r
}

/// `WAIT`s kv holds for one client (a quarter of its `MAX_WAITS`).
const HELD_PER_CLIENT: usize = 16;

/// `all N`: `bench N` on every core at once, each with its own seed.
pub fn all(n: &str) -> Result<i32, String> {
    n.parse::<u64>().map_err(|_| format!("all: bad N {n:?}"))?;
    let cores = online_cores()?;
    let mut kids = Vec::new();
    for &core in &cores {
        let seed = format!("{}", 1 + core);
        let pid = sys::spawn_on("kvcli", &["bench", n, &seed], Priority::App, core)
            .map_err(|e| format!("spawn on core {core}: {e}"))?;
        kids.push((core, pid));
    }
    let mut failed = 0;
    for (core, pid) in kids {
        match sys::wait(Some(pid)) {
            Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
            r => {
                println!("kvcli: all FAIL bench on core {core} ({pid}): {r:?}");
                failed += 1;
            }
        }
    }
    if failed == 0 {
        println!("kvcli: all {n} ok on {} cores", cores.len());
    }
    Ok(i32::from(failed != 0))
}

/// The cores online.
fn online_cores() -> Result<Vec<usize>, String> {
    let mut infos = alloc::vec![ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let cores = sys::cores(&mut infos).map_err(|e| format!("cores: {e}"))?;
    Ok(infos[..cores]
        .iter()
        .filter(|i| i.online != 0)
        .map(|i| i.core as usize)
        .collect())
}
