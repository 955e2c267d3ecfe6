//! `ipccheck [CORE]`: the request path end to end, with a child on core CORE (default: this
//! core). Prints `ipccheck: ok` and exits 0, or prints the first failure and exits 1.
//!
//! | part | what |
//! |---|---|
//! | (a) | bad tickets and handles are clean errors; kernel, non-canonical, unmapped and misaligned record pointers are `BadAddress`, and a no-op collected into a bad pointer is still there to collect |
//! | (b) | 64 no-op submissions, each collected at once; a 300 ms timed operation does not finish before 300 ms |
//! | (c) | 32 resource opens on CORE in flight at once, then 32 closes |
//! | (d) | a child calls its parent's endpoint: replies come back in order, the kernel vouches for the sender; replying twice is an error; one-way sends arrive |
//! | (e) | a full request queue refuses more (Busy) and loses nothing |
//! | (f) | receiving on a server's endpoint (on CORE) is `Denied`; a server killed with calls queued: every caller gets Gone |
//! | (g) | a child that exits with requests in flight: its replies go nowhere, nothing breaks |
//!
//! `ipccheck fast [CORE]`: `REPLY_RECV` and the rendezvous fast path, with the callers on
//! CORE (the kernel test `ipc::rendezvous_fast_path` counts the direct switches around it):
//!
//! | part | what |
//! |---|---|
//! | (h) | two callers, 50 calls each, served by one `REPLY_RECV` per request: every answer goes to the caller that asked, in each caller's order, and the one-way sends between arrive |
//! | (i) | an unknown handle is `NoSuchResource` and changes nothing: nothing is received (the queued message is still there) and a real handle stays answerable; bad record pointers are `BadAddress` |
//! | (j) | a caller killed while the server holds its request: the answer goes nowhere, the call still waits for the next request (here: times out), the handle is used up |
//! | (k) | a timeout after an answer: the caller has its answer (and keeps the core busy in user mode), the server `TimedOut`, not before its timeout; `ipccheck kfast [CORE]`, run above its caller's priority, also checks that none of five such waits was ended by a later tick than its deadline (the core's `late_wakes` did not grow: its timer was armed) |
//! | (l) | an endpoint closed after the fast path used it: `REPLY_RECV` on it fails as `RECV` does, and a caller answered before the close fails its next call (`StaleResource`), never waits in a queue nobody reads |
//!
//! `ipccheck regs [CORE]`: the register calls, parts (m) to (q) (see `regs.rs`).
//!
//! `ipccheck quiet`: part (r), a thread waiting in `RECV` is not woken by its process's
//! results (see `quiet.rs`).
//!
//! Roles (the child side): `ipccheck caller EP N`, `ipccheck flood EP`, `ipccheck server`,
//! `ipccheck leaver EP`, `ipccheck tagged EP N TAG [quiet|busy]`,
//! `ipccheck stale EP`.
#![no_std]
#![no_main]

extern crate alloc;

mod cross;
mod quiet;
mod regs;

use alloc::format;
use alloc::string::String;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, ResType, Rights};
use ulib::abi::{Error, Pid, Priority};
use ulib::{ipc, println, res, sys};

ulib::main!(main);

type Check = Result<(), String>;

fn fail<T>(what: &str, got: impl core::fmt::Debug) -> Result<T, String> {
    Err(format!("{what}: got {got:?}"))
}

fn main(args: &[&str]) -> i32 {
    let r = match args.get(1).copied() {
        Some("caller") => caller(args),
        Some("flood") => flood(args),
        Some("server") => server(),
        Some("leaver") => leaver(args),
        Some("tagged") => tagged(args),
        Some("stale") => stale(args),
        Some("rtagged") => regs::rtagged(args),
        Some("rholder") => regs::rholder(),
        Some("xs1") => cross::s1(),
        Some("xs2") => cross::s2(),
        Some("xclient") => cross::client(),
        Some("regs") => {
            let here = sys::core().unwrap_or(0);
            let core = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(here);
            regs::regs(core).map(|()| println!("ipccheck: ok"))
        }
        Some("quiet") => quiet::quiet().map(|()| println!("ipccheck: ok")),
        Some("kfast") => {
            let here = sys::core().unwrap_or(0);
            let core = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(here);
            kfast(core).map(|()| println!("ipccheck: ok"))
        }
        Some("fast") => {
            let here = sys::core().unwrap_or(0);
            let core = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(here);
            fast(core).map(|()| println!("ipccheck: ok"))
        }
        other => {
            let here = sys::core().unwrap_or(0);
            let core = other.and_then(|c| c.parse().ok()).unwrap_or(here);
            parent(core)
        }
    };
    match r {
        Ok(()) => {
            if args.len() < 2 || args[1].parse::<usize>().is_ok() {
                println!("ipccheck: ok");
            }
            0
        }
        Err(e) => {
            println!("ipccheck: FAIL {e}");
            1
        }
    }
}

fn endpoint_arg(args: &[&str]) -> Result<ResId, String> {
    args.get(2)
        .and_then(|a| ResId::parse(a))
        .ok_or_else(|| String::from("missing endpoint argument"))
}

fn msg(label: u64, w0: u64) -> Msg {
    Msg {
        label,
        words: [w0, 0, 0, 0, 0, 0],
    }
}

fn parent(core: usize) -> Check {
    // (a)
    let r = ipc::collect(12345, 0);
    if r != Err(Error::NoSuchResource) {
        return fail("(a) collect of an unknown ticket", r);
    }
    let r = ipc::collect(api::ANY, 0);
    if r != Err(Error::NoSuchResource) {
        return fail("(a) collect with nothing in flight", r);
    }
    let r = ipc::reply(999, 0, &Msg::default());
    if r != Err(Error::NoSuchResource) {
        return fail("(a) reply to an unknown request", r);
    }
    bad_record_pointers()?;
    // (b)
    let t0 = sys::clock_ns().unwrap_or(0);
    let timer = ipc::submit(&ipc::timer(300_000_000)).map_err(|e| format!("(b) timer: {e}"))?;
    for _ in 0..64 {
        ipc::submit(&ipc::op(api::SUBMIT_NOP, 0, [0; 4])).map_err(|e| format!("(b) nop: {e}"))?;
    }
    // The 64 no-ops are done at once: collecting them by ticket never waits for the timer.
    for i in 0..64 {
        let c =
            ipc::collect(timer + 1 + i, 0).map_err(|e| format!("(b) collect no-op {i}: {e}"))?;
        if c.status != 0 {
            return fail("(b) no-op status", c.status);
        }
    }
    let c = ipc::collect(timer, u64::MAX).map_err(|e| format!("(b) timer: {e}"))?;
    if c.status != 0 {
        return fail("(b) timer status", c.status);
    }
    let took = sys::clock_ns().unwrap_or(0) - t0;
    if took < 300_000_000 {
        return fail("(b) a 300 ms timed operation finished after (ns)", took);
    }
    // (c)
    let mut tickets = alloc::vec::Vec::new();
    let names: alloc::vec::Vec<String> =
        (0..32).map(|i| format!("c{core}/vregion/ipc{i}")).collect();
    let size = 4096u64.to_le_bytes();
    for name in &names {
        let mut sub = ipc::op(
            api::SUBMIT_RES_OPEN,
            0,
            [
                name.as_ptr() as u64,
                name.len() as u64,
                size.as_ptr() as u64,
                8,
            ],
        );
        sub.msg.label = u64::from(Rights::OWNER_ALL.0);
        tickets.push(ipc::submit(&sub).map_err(|e| format!("(c) submit open: {e}"))?);
    }
    let mut ids = alloc::vec::Vec::new();
    for t in &tickets {
        let c = ipc::collect(*t, u64::MAX).map_err(|e| format!("(c) collect: {e}"))?;
        let id = ResId(ipc::result(&c).map_err(|e| format!("(c) open: {e}"))?);
        if id.core() != core {
            return fail("(c) region on the wrong core", id);
        }
        ids.push(id);
    }
    let closes: alloc::vec::Vec<u64> = ids
        .iter()
        .map(|id| ipc::submit(&ipc::op(api::SUBMIT_RES_CLOSE, id.0, [0; 4])))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("(c) submit close: {e}"))?;
    for t in closes {
        let c = ipc::collect(t, u64::MAX).map_err(|e| format!("(c) collect close: {e}"))?;
        ipc::result(&c).map_err(|e| format!("(c) close: {e}"))?;
    }
    // (c) A process opened through SUBMIT is a child of the submitter on its own core
    // only: for another core it is refused (the completion carries no pid to note).
    let here = sys::core().map_err(|e| format!("core: {e}"))?;
    let name = format!("c{}/process/ipcchild", (here + 1) % ulib::abi::MAX_CORES);
    let prog = b"nop";
    let mut sub = ipc::op(
        api::SUBMIT_RES_OPEN,
        0,
        [
            name.as_ptr() as u64,
            name.len() as u64,
            prog.as_ptr() as u64,
            prog.len() as u64,
        ],
    );
    sub.msg.label = u64::from(Rights::OWNER_ALL.0);
    match ipc::submit(&sub) {
        Err(Error::NotSupported) => {}
        Ok(t) => {
            let c = ipc::collect(t, u64::MAX).map_err(|e| format!("(c) collect: {e}"))?;
            return fail("(c) a process opened on another core by SUBMIT", c.status);
        }
        Err(e) => return fail("(c) a process opened on another core by SUBMIT", e),
    }
    // (d)
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let ep = ipc::open_endpoint("here/endpoint/ipccheck", Rights(0x2f))
        .map_err(|e| format!("(d) endpoint: {e}"))?;
    let ep_arg = format!("{:#x}", ep.0);
    let child = sys::spawn_on("ipccheck", &["caller", &ep_arg, "5"], Priority::App, core)
        .map_err(|e| format!("(d) spawn: {e}"))?;
    for i in 0..6 {
        let r = ipc::recv(ep, 5_000_000_000).map_err(|e| format!("(d) recv {i}: {e}"))?;
        if r.sender != child {
            return fail("(d) sender", r.sender);
        }
        if r.kind == api::SUBMIT_SEND {
            if r.msg.label != 7 {
                return fail("(d) one-way message", r.msg);
            }
            continue;
        }
        ipc::reply(r.request, r.msg.words[0] * 2, &msg(1, me.0))
            .map_err(|e| format!("(d) reply: {e}"))?;
        let again = ipc::reply(r.request, 0, &Msg::default());
        if again != Err(Error::NoSuchResource) {
            return fail("(d) second reply", again);
        }
    }
    expect_exit(child, "(d) caller")?;
    // (e)
    let child = sys::spawn_on("ipccheck", &["flood", &ep_arg], Priority::App, core)
        .map_err(|e| format!("(e) spawn: {e}"))?;
    expect_exit(child, "(e) flood")?;
    let mut got = 0;
    while ipc::recv(ep, 0).is_ok() {
        got += 1;
    }
    if got != 64 {
        return fail("(e) queued requests received", got);
    }
    // (f)
    let server = sys::spawn_on("ipccheck", &["server"], Priority::App, core)
        .map_err(|e| format!("(f) spawn: {e}"))?;
    let sep = find_endpoint(core, "server")?;
    // Receiving on another process's endpoint is Denied, on this core and on another
    // (regression: from another core it was InvalidArgument).
    match ipc::recv(sep, 0) {
        Err(Error::Denied) => {}
        other => return fail("(f) recv on the server's endpoint", other.map(|_| ())),
    }
    let calls: alloc::vec::Vec<u64> = (0..3)
        .map(|i| {
            let mut s = ipc::op(api::SUBMIT_CALL, sep.0, [0; 4]);
            s.msg = msg(i, i);
            ipc::submit(&s)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("(f) submit: {e}"))?;
    sys::kill(server).map_err(|e| format!("(f) kill: {e}"))?;
    let _ = sys::wait(Some(server));
    for t in calls {
        let c = ipc::collect(t, 5_000_000_000).map_err(|e| format!("(f) collect: {e}"))?;
        if ipc::result(&c) != Err(Error::Gone) {
            return fail("(f) call to a killed server", ipc::result(&c));
        }
    }
    // (g)
    let child = sys::spawn_on("ipccheck", &["leaver", &ep_arg], Priority::App, core)
        .map_err(|e| format!("(g) spawn: {e}"))?;
    let r = ipc::recv(ep, 5_000_000_000).map_err(|e| format!("(g) recv: {e}"))?;
    expect_exit(child, "(g) leaver")?;
    ipc::reply(r.request, 1, &Msg::default())
        .map_err(|e| format!("(g) reply to a gone caller: {e}"))?;
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))?;
    Ok(())
}

/// (a): every record pointer of the request path is checked before anything happens.
fn bad_record_pointers() -> Check {
    use ulib::abi::syscall::{self as nr, decode};
    use ulib::sys::raw;
    // A live buffer, and a pointer 4 bytes into it: mapped and writable, but misaligned for
    // records of u64s.
    let mut room = [0u64; 32];
    let misaligned = room.as_mut_ptr() as u64 + 4;
    let bad = [
        ("kernel", 0xffff_ffff_8020_0000),
        ("non-canonical", 0x0000_8000_0000_0000),
        ("unmapped", 0x0000_0000_0000_1000),
        ("misaligned", misaligned),
    ];
    let nop =
        ipc::submit(&ipc::op(api::SUBMIT_NOP, 0, [0; 4])).map_err(|e| format!("(a) nop: {e}"))?;
    for (what, ptr) in bad {
        // SAFETY: the kernel must refuse each pointer before reading or writing through it;
        // `misaligned` points into `room`, a live local, if it did not.
        let r = unsafe {
            [
                ("SUBMIT", decode_pair(raw::syscall1(nr::SUBMIT, ptr))),
                (
                    "COLLECT",
                    decode_pair(raw::syscall3(nr::COLLECT, nop, ptr, 0)),
                ),
                ("CALL", decode_pair(raw::syscall3(nr::CALL, 1, ptr, ptr))),
                ("SEND", decode_pair(raw::syscall2(nr::SEND, 1, ptr))),
                ("RECV", decode_pair(raw::syscall3(nr::RECV, 1, ptr, 0))),
                ("REPLY", decode_pair(raw::syscall3(nr::REPLY, 1, ptr, 0))),
            ]
        };
        for (call, got) in r {
            if got != Err(Error::BadAddress) {
                return fail(&format!("(a) {call} with a {what} record pointer"), got);
            }
        }
    }
    if room != [0; 32] {
        return fail("(a) a refused record pointer wrote", room);
    }
    // The refused COLLECTs took nothing.
    let c = ipc::collect(nop, 0).map_err(|e| format!("(a) collect the no-op: {e}"))?;
    if c.ticket != nop || c.status != 0 {
        return fail("(a) the no-op after refused collects", c);
    }
    return Ok(());

    fn decode_pair((rax, rdx): (u64, u64)) -> Result<u64, Error> {
        decode(rax, rdx)
    }
}

fn find_endpoint(core: usize, name: &str) -> Result<ResId, String> {
    res::wait_for_named(core, name, ResType::Endpoint, 200)
        .map_err(|_| format!("no endpoint '{name}' on core {core}"))
}

fn expect_exit(pid: Pid, what: &str) -> Check {
    match sys::wait(Some(pid)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => Ok(()),
        other => fail(what, other),
    }
}

/// Child: N calls (replies double the word), then one one-way send.
fn caller(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    let n: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    for i in 1..=n {
        let (v, reply) = ipc::call(ep, &msg(0, i)).map_err(|e| format!("call {i}: {e}"))?;
        if v != 2 * i || reply.label != 1 {
            return fail("reply", (v, reply));
        }
    }
    ipc::send(ep, &msg(7, 0)).map_err(|e| format!("send: {e}"))
}

/// Child of (l): one call, answered after the endpoint was closed; then a call that must
/// fail as a call to a closed endpoint does (`StaleResource`, or `NoSuchResource` for a
/// slot not in use).
fn stale(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    ipc::call(ep, &msg(0, 1)).map_err(|e| format!("(l) first call: {e}"))?;
    match ipc::call(ep, &msg(0, 2)) {
        Err(Error::StaleResource | Error::NoSuchResource) => Ok(()),
        other => fail("(l) a call after the endpoint closed", other),
    }
}

/// Child: one-way sends until the queue is full; exactly 64 fit.
fn flood(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    for i in 0..1000 {
        match ipc::send(ep, &msg(7, i)) {
            Ok(()) => {}
            Err(Error::Busy) if i == 64 => return Ok(()),
            other => return fail("send into a full queue", (i, other)),
        }
    }
    Err("the queue never filled".into())
}

/// Child: an endpoint nobody answers.
fn server() -> Check {
    ipc::open_endpoint("here/endpoint/server", Rights(0x2f)).map_err(|e| format!("{e}"))?;
    loop {
        let _ = sys::sleep_ns(1_000_000_000);
    }
}

/// Child: calls and timers in flight, then exit without collecting.
fn leaver(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    let mut s = ipc::op(api::SUBMIT_CALL, ep.0, [0; 4]);
    s.msg = msg(3, 3);
    ipc::submit(&s).map_err(|e| format!("{e}"))?;
    ipc::submit(&ipc::timer(1_000_000_000)).map_err(|e| format!("{e}"))?;
    Ok(())
}

/// Calls each caller of (h) makes.
const FAST_CALLS: u64 = 50;

/// Runs of part (k).
const K_TRIES: usize = 5;

/// `ipccheck fast [CORE]`: parts (h) to (l).
fn fast(core: usize) -> Check {
    use ulib::abi::syscall::{self as nr, decode};
    use ulib::sys::raw;
    let ep = ipc::open_endpoint("here/endpoint/fast", Rights(0x2f))
        .map_err(|e| format!("(h) endpoint: {e}"))?;
    let ep_arg = format!("{:#x}", ep.0);
    let n_arg = format!("{FAST_CALLS}");
    // (h)
    let mut callers = [Pid(0); 2];
    for (i, c) in callers.iter_mut().enumerate() {
        let tag = format!("{}", i + 1);
        *c = sys::spawn_on(
            "ipccheck",
            &["tagged", &ep_arg, &n_arg, &tag],
            Priority::App,
            core,
        )
        .map_err(|e| format!("(h) spawn: {e}"))?;
    }
    let mut answer = (0u64, 0u64, Msg::default());
    let mut served = [0u64; 2];
    let mut done = 0;
    while done < 2 {
        let r = ipc::reply_recv(answer.0, answer.1, &answer.2, ep, 5_000_000_000)
            .map_err(|e| format!("(h) reply_recv after {served:?}: {e}"))?;
        answer = (0, 0, Msg::default());
        let tag = r.msg.words[1];
        if !(1..=2).contains(&tag) || r.sender != callers[tag as usize - 1] {
            return fail("(h) sender and tag", (r.sender, tag, callers));
        }
        let i = tag as usize - 1;
        if r.kind == api::SUBMIT_SEND {
            if r.msg.label != 7 || served[i] != FAST_CALLS {
                return fail("(h) one-way message", (r.msg, served));
            }
            done += 1;
            continue;
        }
        served[i] += 1;
        if r.request == 0 || r.msg.words[0] != served[i] {
            return fail("(h) request out of order", (r.request, r.msg, served));
        }
        let reply = Msg {
            label: tag,
            words: [tag, served[i], 0, 0, 0, 0],
        };
        answer = (r.request, served[i] * 2 + tag, reply);
    }
    for c in callers {
        expect_exit(c, "(h) tagged caller")?;
    }
    // (i): a one-way message of our own waits in the queue.
    let mut s = ipc::op(api::SUBMIT_SEND, ep.0, [0; 4]);
    s.msg = msg(9, 0);
    let t = ipc::submit(&s).map_err(|e| format!("(i) send to self: {e}"))?;
    ipc::collect(t, u64::MAX).map_err(|e| format!("(i) collect the send: {e}"))?;
    let r = ipc::reply_recv(999_999, 1, &Msg::default(), ep, 0);
    if r != Err(Error::NoSuchResource) {
        return fail("(i) reply_recv with an unknown handle", r);
    }
    let mut room = [0u64; 32];
    let misaligned = room.as_mut_ptr() as u64 + 4;
    let good_msg = Msg::default();
    for (what, ptr) in [
        ("kernel", 0xffff_ffff_8020_0000u64),
        ("unmapped", 0x1000),
        ("misaligned", misaligned),
    ] {
        // SAFETY: the kernel must refuse the bad pointer before using either record;
        // `misaligned` points into `room`, `good_msg` is a live record.
        let (bad_out, bad_msg) = unsafe {
            (
                decode_pair(raw::syscall6(
                    nr::REPLY_RECV,
                    0,
                    &good_msg as *const Msg as u64,
                    0,
                    ep.0,
                    ptr,
                    0,
                )),
                decode_pair(raw::syscall6(
                    nr::REPLY_RECV,
                    999_999,
                    ptr,
                    0,
                    ep.0,
                    room.as_mut_ptr() as u64,
                    0,
                )),
            )
        };
        if bad_out != Err(Error::BadAddress) || bad_msg != Err(Error::BadAddress) {
            return fail(
                &format!("(i) REPLY_RECV with a {what} record"),
                (bad_out, bad_msg),
            );
        }
    }
    if room != [0; 32] {
        return fail("(i) a refused REPLY_RECV wrote", room);
    }
    let r = ipc::reply_recv(0, 0, &Msg::default(), ep, 0)
        .map_err(|e| format!("(i) the queued message after refused calls: {e}"))?;
    if r.msg.label != 9 || r.request != 0 {
        return fail("(i) the queued message", r);
    }
    // (j)
    let victim = sys::spawn_on("ipccheck", &["caller", &ep_arg, "1"], Priority::App, core)
        .map_err(|e| format!("(j) spawn: {e}"))?;
    let r = ipc::reply_recv(0, 0, &Msg::default(), ep, 5_000_000_000)
        .map_err(|e| format!("(j) receive: {e}"))?;
    if r.sender != victim || r.request == 0 {
        return fail("(j) the victim's call", r);
    }
    sys::kill(victim).map_err(|e| format!("(j) kill: {e}"))?;
    let _ = sys::wait(Some(victim));
    let again = ipc::reply_recv(r.request, 2, &msg(1, 0), ep, 0);
    if again != Err(Error::TimedOut) {
        return fail("(j) answering a killed caller", again);
    }
    let twice = ipc::reply_recv(r.request, 2, &msg(1, 0), ep, 0);
    if twice != Err(Error::NoSuchResource) {
        return fail("(j) the handle after its answer", twice);
    }
    // (k)
    let seen = timeout_after_answer(ep, &ep_arg, core)?;
    println!(
        "ipccheck: (k) REPLY_RECV's timeout ended {} ns late at best",
        seen.best_late
    );
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))?;
    // (l): the endpoint checks the kernel remembers for the fast path go with the
    // endpoint. Receiving: REPLY_RECV on the closed endpoint fails as RECV (which looks
    // the endpoint up afresh) does.
    let (after, fresh) = (
        ipc::reply_recv(0, 0, &Msg::default(), ep, 0),
        ipc::recv(ep, 0),
    );
    if after.is_ok() || after.err() != fresh.err() || after == Err(Error::TimedOut) {
        return fail("(l) REPLY_RECV on a closed endpoint", (after, fresh));
    }
    // Sending: a caller whose first call was answered calls again after the close (it
    // must fail, not wait in a queue nobody reads).
    let ep2 = ipc::open_endpoint("here/endpoint/fast2", Rights(0x2f))
        .map_err(|e| format!("(l) endpoint: {e}"))?;
    let ep2_arg = format!("{:#x}", ep2.0);
    let child = sys::spawn_on("ipccheck", &["stale", &ep2_arg], Priority::App, core)
        .map_err(|e| format!("(l) spawn: {e}"))?;
    let r = ipc::reply_recv(0, 0, &Msg::default(), ep2, 5_000_000_000)
        .map_err(|e| format!("(l) receive: {e}"))?;
    res::close(ep2).map_err(|e| format!("(l) close: {e}"))?;
    ipc::reply(r.request, 1, &msg(1, 0)).map_err(|e| format!("(l) reply: {e}"))?;
    expect_exit(child, "(l) caller of a closed endpoint")?;
    return Ok(());

    fn decode_pair((rax, rdx): (u64, u64)) -> Result<ulib::abi::ipc::Received, Error> {
        decode(rax, rdx).map(|_| ulib::abi::ipc::Received::default())
    }
}

/// What part (k) saw over its [`K_TRIES`] waits.
struct TimedOutWaits {
    /// How late the best one ended (ns; reported, not judged: a busy host delays any).
    best_late: u64,
    /// How many the core's timer, programmed for their deadline, ended (the core's
    /// `deadline_wakes` grew during the wait; a later tick does not count). The others
    /// ended with no timer: their deadline passed before they blocked (the host stalled
    /// the vCPU), or a later tick ended them ([`Self::by_later_tick`]).
    by_deadline: usize,
    /// How many a later tick than their deadline ended (the core's `late_wakes` grew):
    /// their timer was not armed.
    by_later_tick: usize,
}

/// This core's count of timed waits ended by a timer programmed for their deadline.
fn deadline_wakes() -> Result<u64, String> {
    sys::deadline_wakes().map_err(|e| format!("deadline wakes (CORES): {e}"))
}

/// This core's count of timed waits a later tick than their deadline ended.
fn late_wakes() -> Result<u64, String> {
    sys::late_wakes().map_err(|e| format!("late wakes (CORES): {e}"))
}

/// Part (k), [`K_TRIES`] times: a caller on `core` has its answer by a direct switch and then
/// keeps the core busy in user mode for 50 ms, while this server's `REPLY_RECV` waits with a
/// 3 ms timeout. The server must get `TimedOut`, never before its deadline.
fn timeout_after_answer(ep: ResId, ep_arg: &str, core: usize) -> Result<TimedOutWaits, String> {
    // Shorter than the 10 ms tick: no tick comes between the hand-over and the deadline.
    let timeout = 3_000_000;
    let mut seen = TimedOutWaits {
        best_late: u64::MAX,
        by_deadline: 0,
        by_later_tick: 0,
    };
    for _ in 0..K_TRIES {
        let quiet = sys::spawn_on(
            "ipccheck",
            &["tagged", ep_arg, "1", "3", "busy"],
            Priority::App,
            core,
        )
        .map_err(|e| format!("(k) spawn: {e}"))?;
        let r = ipc::reply_recv(0, 0, &Msg::default(), ep, 5_000_000_000)
            .map_err(|e| format!("(k) receive: {e}"))?;
        let (wakes, late) = (deadline_wakes()?, late_wakes()?);
        let t0 = sys::clock_ns().unwrap_or(0);
        let got = ipc::reply_recv(
            r.request,
            5,
            &Msg {
                label: 3,
                words: [3, 1, 0, 0, 0, 0],
            },
            ep,
            timeout,
        );
        let took = sys::clock_ns().unwrap_or(0) - t0;
        if got != Err(Error::TimedOut) || took < timeout {
            return fail("(k) a timed-out REPLY_RECV (result, ns)", (got, took));
        }
        seen.best_late = seen.best_late.min(took - timeout);
        seen.by_deadline += usize::from(deadline_wakes()? > wakes);
        seen.by_later_tick += usize::from(late_wakes()? > late);
        expect_exit(quiet, "(k) the answered caller")?;
    }
    Ok(seen)
}

/// `ipccheck kfast [CORE]`, run at server priority above its App caller: part (k) alone,
/// and no timeout may be ended by a later tick than its deadline although the core is busy
/// with the caller (regression: the direct switch did not arm the core's timer, and the
/// tick woke the server up to 10 ms late). Judged by that event, counted by the kernel
/// (`late_wakes`), not by how late the wait ended, which a busy host stretches; nor by
/// how many the timer ended (`deadline_wakes`, reported): a wait whose deadline passed
/// before it blocked, its vCPU stalled by the host, rightly ends with no timer at all.
fn kfast(core: usize) -> Check {
    let ep = ipc::open_endpoint("here/endpoint/kfast", Rights(0x2f))
        .map_err(|e| format!("(k) endpoint: {e}"))?;
    let ep_arg = format!("{:#x}", ep.0);
    let r = timeout_after_answer(ep, &ep_arg, core);
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))?;
    let seen = r?;
    println!(
        "ipccheck: (k) REPLY_RECV's timeout ended {} ns late at best; {} of {K_TRIES} by \
         their deadline, {} by a later tick",
        seen.best_late, seen.by_deadline, seen.by_later_tick
    );
    if seen.by_later_tick > 0 {
        return fail(
            "(k) REPLY_RECV's timeouts after a direct switch ended by a later tick than \
             their deadline",
            (seen.by_later_tick, K_TRIES),
        );
    }
    Ok(())
}

/// Child: N calls tagged TAG (word 1), each answered with 2 * i + TAG and the tag and
/// sequence number; then a one-way send (label 7), unless `quiet`.
fn tagged(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    let n: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let tag: u64 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1);
    for i in 1..=n {
        let m = Msg {
            label: 0,
            words: [i, tag, 0, 0, 0, 0],
        };
        let (v, reply) = ipc::call(ep, &m).map_err(|e| format!("call {i}: {e}"))?;
        if v != 2 * i + tag || reply.label != tag || reply.words[..2] != [tag, i] {
            return fail("the answer went to the wrong caller", (tag, i, v, reply));
        }
    }
    if args.get(5) == Some(&"quiet") {
        return Ok(());
    }
    if args.get(5) == Some(&"busy") {
        // Keep the core in user mode (no blocking call) for 50 ms: a server's deadline in
        // that time is kept only by the core's timer, not by this program entering.
        let t0 = sys::clock_ns().map_err(|e| format!("clock: {e}"))?;
        while sys::clock_ns().map_err(|e| format!("clock: {e}"))? < t0 + 50_000_000 {}
        return Ok(());
    }
    let mut m = msg(7, 0);
    m.words[1] = tag;
    ipc::send(ep, &m).map_err(|e| format!("send: {e}"))
}
