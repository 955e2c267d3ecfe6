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
//! Roles (the child side): `ipccheck caller EP N`, `ipccheck flood EP`, `ipccheck server`,
//! `ipccheck leaver EP`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights};
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
    for _ in 0..200 {
        if let Ok(list) = res::list_all(core) {
            if let Some(r) = list.iter().find(|r| r.name() == name && r.kind == 5) {
                return Ok(r.id);
            }
        }
        let _ = sys::sleep_ns(5_000_000);
    }
    Err(format!("no endpoint '{name}' on core {core}"))
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
