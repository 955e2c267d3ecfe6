//! `fncheck [CORE]`: function ids end to end (`abi::fnid`), with children on core CORE
//! (default: this core). Prints `fncheck: ok` and exits 0, or prints the first failure and
//! exits 1. Run by the kernel test `fnid::function_ids_from_user_space` (as the
//! administrator, which the kernel's processes are).
//!
//! | part | what |
//! |---|---|
//! | (a) | bad names (`BadName`, `TooLong`), bad pointers (`BadAddress`), an unknown `FN_LIST` flag (`InvalidArgument`), an unknown name, forged function ids (never issued, a slot past the table, core bits set: `NoSuchResource` for every call), an endpoint argument that is a vregion or a function id (`WrongType`) |
//! | (b) | this program serves `fnchk.a`: a second registration is `AlreadyExists`, lookup finds it, `FN_LIST` describes it (this core's copy alone, `FN_LIST_LOCAL`, too); callers on this core and on CORE call, send, submit and submit through a ring by function id and may not receive on it (`Denied`); the server receives by function id; `served` counts every request; `FN_STATE` of a non-vregion is `WrongType`; unregistered: calls `StaleResource`, lookup `NoSuchResource`, a new registration a new id |
//! | (c) | a server on CORE (user 1000) serves `fnchk.b` and sets a state ICA: calls from here; another user (2000) gets `AlreadyExists` (up) and `Denied` (down) registering it, `Denied` unregistering it and `Denied` registering a system service's name (`fs`, `net.udp`, ...); this program may not set the state (`Denied`); the server ends: calls `Gone`, `FN_LIST` says down (this core's copy alone counts only the requests served here); a new server registers the name again: same id, generation 2, the state ICA kept, calls work; the administrator unregisters it: `StaleResource` |
//! | (f) | a name of its own let go down and taken over: served again, at no higher priority than before (at most an application's) |
//! | (d) | `Limit` at this user's share (`FNIDS_PER_USER`) or `MAX_FNIDS` registered names, another user still registering; then all withdrawn |
//! | (e) | a server that closes its endpoint (and lives on): calls `Gone`, the function down; registered again with a new endpoint: same id, generation 2 |
//!
//! Roles (the children): `fncheck caller NAME`, `fncheck server NAME`,
//! `fncheck other NAME FNID up|down`. And `fncheck retire-client [CORE]` with its servers
//! `retire-old` and `retire-new` (module `retire`), driven by a kernel test of its own;
//! `fncheck restart-window` (`FN_RESTART`'s shortest window) and `fncheck late-taker NAME`
//! (a `FN_TAKEOVER` that times out lends no priority) (module `policy`), each driven by a
//! kernel test of its own.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::fnid::{FnId, FnInfo, FNIDS_PER_USER, FN_DOWN, FN_UP, MAX_FNIDS};
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::{syscall as nr, Error, Pid, Priority};
use ulib::ring::Ring;
use ulib::sys::raw;
use ulib::{fnid, ipc, println, res, sys};

mod policy;
mod retire;

ulib::main!(main);

type Check = Result<(), String>;

/// Calls each caller makes (and one send, one submitted call and one ring call more).
const CALLS: u64 = 5;
const REQUESTS_PER_CALLER: u64 = CALLS + 3;
/// A request to the server of part (c) asking it to answer and exit.
const EXIT_LABEL: u64 = 99;
const SERVER_USER: u32 = 1000;
const OTHER_USER: u32 = 2000;
/// Bound of the waits for another process's doing (only a hang guard).
const HANG_NS: u64 = 60_000_000_000;

fn fail<T>(what: &str, got: impl core::fmt::Debug) -> Result<T, String> {
    Err(format!("{what}: got {got:?}"))
}

fn expect<T: core::fmt::Debug>(what: &str, got: Result<T, Error>, want: Error) -> Check {
    match got {
        Err(e) if e == want => Ok(()),
        other => Err(format!("{what}: got {other:?}, want {want:?}")),
    }
}

fn msg(label: u64, w0: u64) -> Msg {
    Msg {
        label,
        words: [w0, 0, 0, 0, 0, 0],
    }
}

fn main(args: &[&str]) -> i32 {
    let r = match args.get(1).copied() {
        Some("caller") => caller(args),
        Some("server") => server(args),
        Some("other") => other(args),
        Some("retire-client") => retire::client(args.get(2).copied()),
        Some("retire-old") => retire::old(),
        Some("retire-new") => retire::new(),
        Some("restart-window") => policy::restart_window(),
        Some("late-taker") => arg(args, 2).and_then(policy::late_taker),
        other => {
            let here = sys::core().unwrap_or(0);
            let core = other.and_then(|c| c.parse().ok()).unwrap_or(here);
            parent(core).map(|()| println!("fncheck: ok"))
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            println!("fncheck: FAIL {e}");
            1
        }
    }
}

fn arg<'a>(args: &[&'a str], i: usize) -> Result<&'a str, String> {
    args.get(i)
        .copied()
        .ok_or_else(|| format!("missing argument {i}"))
}

/// Wait (a hang guard only) until `done` holds.
fn until(what: &str, mut done: impl FnMut() -> bool) -> Check {
    let start = sys::clock_ns().unwrap_or(0);
    while !done() {
        if sys::clock_ns().unwrap_or(0).saturating_sub(start) > HANG_NS {
            return Err(format!("{what}: not within {} s", HANG_NS / 1_000_000_000));
        }
        let _ = sys::sleep_ns(1_000_000);
    }
    Ok(())
}

fn expect_exit(pid: Pid, what: &str) -> Check {
    match sys::wait(Some(pid)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => Ok(()),
        other => fail(what, other),
    }
}

fn info_of(id: FnId) -> Result<Option<FnInfo>, String> {
    let all = fnid::list().map_err(|e| format!("list: {e}"))?;
    Ok(all.into_iter().find(|i| i.fnid == id))
}

fn parent(core: usize) -> Check {
    let ep = ipc::open_endpoint("here/endpoint/fnchk", Rights(0x2f))
        .map_err(|e| format!("endpoint: {e}"))?;
    let ep2 = ipc::open_endpoint("here/endpoint/fnchk2", Rights(0x2f))
        .map_err(|e| format!("endpoint 2: {e}"))?;
    let r = bad_input(ep)
        .and_then(|()| local_server(ep, ep2, core))
        .and_then(|()| remote_server(core))
        .and_then(|()| limit(ep))
        .and_then(|()| closed_endpoint())
        .and_then(|()| down_takeover_keeps_priority());
    let _ = res::close(ep);
    let _ = res::close(ep2);
    r
}

/// (f) A name of this program's own, let go down (its endpoint closed), taken over with a
/// new endpoint: this program serves it again, at no higher priority than it had (a
/// regression: the kernel raised it to a server's, a way past SPAWN's rule that no child
/// outranks its parent).
fn down_takeover_keeps_priority() -> Check {
    let me = sys::getpid().map_err(|e| format!("(f) getpid: {e}"))?;
    let prio = || {
        sys::live_processes()
            .ok()
            .and_then(|l| l.iter().find(|p| p.pid == me).map(|p| p.priority))
    };
    let before = prio();
    let first = ipc::open_endpoint("here/endpoint/fnchk-down", Rights(0x2f))
        .map_err(|e| format!("(f) endpoint: {e}"))?;
    let id = fnid::register("fnchk.down", first).map_err(|e| format!("(f) register: {e}"))?;
    let _ = res::close(first);
    let second = ipc::open_endpoint("here/endpoint/fnchk-again", Rights(0x2f))
        .map_err(|e| format!("(f) endpoint again: {e}"))?;
    let taken = fnid::takeover(id, second, 1_000_000_000);
    let after = prio();
    let _ = fnid::unregister(id);
    let _ = res::close(second);
    taken.map_err(|e| format!("(f) takeover of a name down: {e}"))?;
    match (before, after) {
        (Some(b), Some(a)) if a >= b || a >= Priority::App as u32 => Ok(()),
        other => fail(
            "(f) priority before and after taking over a name down",
            other,
        ),
    }
}

/// (a)
fn bad_input(ep: ResId) -> Check {
    expect("(a) upper case", fnid::register("KV", ep), Error::BadName)?;
    expect("(a) empty name", fnid::register("", ep), Error::BadName)?;
    expect("(a) a space", fnid::register("a b", ep), Error::BadName)?;
    expect(
        "(a) 17 bytes",
        fnid::register("seventeen-bytes-x", ep),
        Error::TooLong,
    )?;
    // SAFETY: the kernel must refuse the kernel-half and unmapped pointers without
    // touching this program's memory.
    let (kernel, unmapped) = unsafe {
        (
            raw::syscall3(nr::FN_REGISTER, 0xffff_8000_0000_0000, 2, ep.0),
            raw::syscall2(nr::FN_LOOKUP, 0x10, 2),
        )
    };
    expect(
        "(a) register, kernel pointer",
        nr::decode(kernel.0, kernel.1),
        Error::BadAddress,
    )?;
    expect(
        "(a) lookup, unmapped pointer",
        nr::decode(unmapped.0, unmapped.1),
        Error::BadAddress,
    )?;
    // SAFETY: as above.
    let (list_kernel, list_unmapped) = unsafe {
        (
            raw::syscall3(nr::FN_LIST, 0xffff_8000_0000_0000, 4, 0),
            raw::syscall3(nr::FN_LIST, 0x10, 1, 0),
        )
    };
    let mut room = [FnInfo::default(); 4];
    // SAFETY: `room` is valid for writing 4 records.
    let bad_flag = unsafe { raw::syscall3(nr::FN_LIST, room.as_mut_ptr() as u64, 4, 2) };
    expect(
        "(a) list, unknown flag",
        nr::decode(bad_flag.0, bad_flag.1),
        Error::InvalidArgument,
    )?;
    expect(
        "(a) list, kernel pointer",
        nr::decode(list_kernel.0, list_kernel.1),
        Error::BadAddress,
    )?;
    expect(
        "(a) list, unmapped pointer",
        nr::decode(list_unmapped.0, list_unmapped.1),
        Error::BadAddress,
    )?;
    expect(
        "(a) unknown name",
        fnid::lookup("fnchk.none"),
        Error::NoSuchResource,
    )?;
    // Forged: a generation never issued, a slot past the table, core bits set.
    let forged = [
        FnId::new(63, 0x3fff_fff0).0,
        (FnId::TYPE_BITS << 50) | 70,
        FnId::new(1, 1).0 | (1 << 54),
    ];
    for raw_id in forged {
        let id = FnId(raw_id);
        let what = format!("(a) forged {raw_id:#x}");
        expect(
            &what,
            ipc::call(id.as_target(), &msg(0, 1)),
            Error::NoSuchResource,
        )?;
        expect(
            &what,
            ipc::send(id.as_target(), &msg(0, 1)),
            Error::NoSuchResource,
        )?;
        let sub = ipc::op(api::SUBMIT_CALL, raw_id, [0; 4]);
        expect(&what, ipc::submit(&sub), Error::NoSuchResource)?;
        expect(&what, ipc::recv(id.as_target(), 0), Error::NoSuchResource)?;
        expect(&what, fnid::unregister(id), Error::NoSuchResource)?;
        expect(&what, fnid::state(id, None), Error::NoSuchResource)?;
    }
    let region = res::open_vregion("here/vregion/fnchk-x", 4096, Rights::OWNER_ALL)
        .map_err(|e| format!("(a) vregion: {e}"))?;
    let r = expect(
        "(a) a vregion as the endpoint",
        fnid::register("fnchk.x", region),
        Error::WrongType,
    );
    let _ = res::close(region);
    r?;
    expect(
        "(a) a function id as the endpoint",
        fnid::register("fnchk.x", FnId::new(0, 1).as_target()),
        Error::WrongType,
    )
}

/// Serve `n` requests on function `id` (received by function id): a call's answer is
/// twice its word; a one-way send must carry label 7.
fn serve(id: FnId, n: u64) -> Check {
    for i in 0..n {
        let r = ipc::recv(id.as_target(), HANG_NS).map_err(|e| format!("recv {i}: {e}"))?;
        if r.kind == api::SUBMIT_SEND {
            if r.msg.label != 7 {
                return fail("one-way message", r.msg);
            }
            continue;
        }
        ipc::reply(r.request, r.msg.words[0] * 2, &msg(1, 0))
            .map_err(|e| format!("reply {i}: {e}"))?;
    }
    Ok(())
}

/// (b)
fn local_server(ep: ResId, ep2: ResId, core: usize) -> Check {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let user = res::getuser().map_err(|e| format!("getuser: {e}"))?;
    let fa = fnid::register("fnchk.a", ep).map_err(|e| format!("(b) register: {e}"))?;
    let r = local_server_on(fa, me, user, ep, ep2, core);
    if r.is_err() {
        let _ = fnid::unregister(fa);
    }
    r
}

fn local_server_on(fa: FnId, me: Pid, user: UserId, ep: ResId, ep2: ResId, core: usize) -> Check {
    expect(
        "(b) registered twice",
        fnid::register("fnchk.a", ep2),
        Error::AlreadyExists,
    )?;
    match fnid::lookup("fnchk.a") {
        Ok(id) if id == fa => {}
        other => return fail("(b) lookup", other),
    }
    let want = |served: u64| FnInfo {
        fnid: fa,
        name: *b"fnchk.a\0\0\0\0\0\0\0\0\0",
        name_len: 7,
        server: me,
        endpoint: ep.0,
        generation: 1,
        served,
        state_ica: 0,
        user: u64::from(user.0),
        state: FN_UP,
        restarts: 0,
        restart_max: 0,
        since_ns: 0,
    };
    // Registered a moment ago, by the clock programs read.
    let now = sys::clock_ns().map_err(|e| format!("(b) clock: {e}"))?;
    let since = match info_of(fa)? {
        Some(i)
            if i == FnInfo {
                since_ns: i.since_ns,
                ..want(0)
            } && i.since_ns > 0
                && i.since_ns <= now =>
        {
            i.since_ns
        }
        other => return fail("(b) list", other),
    };
    // The same server serves on: the same time below.
    let want = |served: u64| FnInfo {
        since_ns: since,
        ..want(served)
    };
    match fnid::state(fa, None) {
        Ok(None) => {}
        other => return fail("(b) no state yet", other),
    }
    expect(
        "(b) an endpoint as the state",
        fnid::state(fa, Some(ep)),
        Error::WrongType,
    )?;
    let here = sys::core().map_err(|e| format!("core: {e}"))?;
    let mut cores = alloc::vec![here];
    if core != here {
        cores.push(core);
    }
    for &c in &cores {
        let child = sys::spawn_on("fncheck", &["caller", "fnchk.a"], Priority::App, c)
            .map_err(|e| format!("(b) spawn caller on {c}: {e}"))?;
        let served = serve(fa, REQUESTS_PER_CALLER);
        if served.is_err() {
            let _ = sys::kill(child);
            let _ = sys::wait(Some(child));
        }
        served.map_err(|e| format!("(b) serving the caller on core {c}: {e}"))?;
        expect_exit(child, "(b) caller")?;
    }
    let served = REQUESTS_PER_CALLER * cores.len() as u64;
    match info_of(fa)? {
        Some(i) if i == want(served) => {}
        other => return fail("(b) list after serving", other),
    }
    // This core's copy alone: the same, as this program took every request here.
    match fnid::info(fa) {
        Ok(i) if i == want(served) => {}
        other => return fail("(b) this core's list after serving", other),
    }
    fnid::unregister(fa).map_err(|e| format!("(b) unregister: {e}"))?;
    expect(
        "(b) call, unregistered",
        ipc::call(fa.as_target(), &msg(0, 1)),
        Error::StaleResource,
    )?;
    expect(
        "(b) lookup, unregistered",
        fnid::lookup("fnchk.a"),
        Error::NoSuchResource,
    )?;
    expect(
        "(b) unregistered twice",
        fnid::unregister(fa),
        Error::StaleResource,
    )?;
    expect(
        "(b) state, unregistered",
        fnid::state(fa, None),
        Error::StaleResource,
    )?;
    let again = fnid::register("fnchk.a", ep).map_err(|e| format!("(b) register again: {e}"))?;
    let r = if again == fa || info_of(fa)?.is_some() {
        fail("(b) registered again: a new id", (again, fa))
    } else {
        Ok(())
    };
    fnid::unregister(again).map_err(|e| format!("(b) unregister again: {e}"))?;
    r
}

/// A child on this core or CORE: call, send, submit and submit through a ring to the
/// function `NAME`, each by function id; receiving on it is the server's alone.
fn caller(args: &[&str]) -> Check {
    let id = fnid::lookup(arg(args, 2)?).map_err(|e| format!("lookup: {e}"))?;
    for i in 1..=CALLS {
        match ipc::call(id.as_target(), &msg(0, i)) {
            Ok((v, reply)) if v == 2 * i && reply.label == 1 => {}
            other => return fail("call", other),
        }
    }
    ipc::send(id.as_target(), &msg(7, 0)).map_err(|e| format!("send: {e}"))?;
    let mut sub = ipc::op(api::SUBMIT_CALL, id.0, [0; 4]);
    sub.msg = msg(0, 100);
    let ticket = ipc::submit(&sub).map_err(|e| format!("submit: {e}"))?;
    match ipc::collect(ticket, u64::MAX).map(|c| ipc::result(&c)) {
        Ok(Ok(200)) => {}
        other => return fail("submitted call", other),
    }
    let mut ring =
        Ring::setup(ulib::ring::DEFAULT_ADDRESS, 8).map_err(|e| format!("ring setup: {e}"))?;
    sub.msg = msg(0, 300);
    if !ring.push(77, &sub) {
        return fail("ring push", ());
    }
    ring.enter(1, 1, HANG_NS)
        .map_err(|e| format!("ring enter: {e}"))?;
    match ring.pop() {
        Some(c) if c.user_data == 77 && c.status == 0 && c.value == 600 => {}
        other => return fail("ring call", other.map(|c| (c.user_data, c.status, c.value))),
    }
    expect(
        "receive on another's function",
        ipc::recv(id.as_target(), 0),
        Error::Denied,
    )
}

/// A server on CORE as user 1000: registers `NAME`, takes the state ICA the function has
/// or makes one, and answers calls with their word plus one until asked to exit.
fn server(args: &[&str]) -> Check {
    let name = arg(args, 2)?;
    res::setuser(UserId(SERVER_USER)).map_err(|e| format!("server setuser: {e}"))?;
    let ep = ipc::open_endpoint("here/endpoint/fnchk-srv", Rights(0x2f))
        .map_err(|e| format!("server endpoint: {e}"))?;
    let id = fnid::register(name, ep).map_err(|e| format!("server register: {e}"))?;
    expect(
        "server: an endpoint as the state",
        fnid::state(id, Some(ep)),
        Error::WrongType,
    )?;
    if fnid::state(id, None)
        .map_err(|e| format!("server state: {e}"))?
        .is_none()
    {
        let region = res::open_vregion("here/vregion/fnchk-state", 4096, Rights(0xff))
            .map_err(|e| format!("server state vregion: {e}"))?;
        match fnid::state(id, Some(region)) {
            Ok(Some(r)) if r == region => {}
            other => return fail("server sets the state", other),
        }
    }
    loop {
        let r = ipc::recv(id.as_target(), u64::MAX).map_err(|e| format!("server recv: {e}"))?;
        if r.kind == api::SUBMIT_SEND {
            continue;
        }
        let last = r.msg.label == EXIT_LABEL;
        ipc::reply(r.request, r.msg.words[0] + 1, &Msg::default())
            .map_err(|e| format!("server reply: {e}"))?;
        if last {
            return Ok(());
        }
    }
}

/// Another user (2000): registering `NAME` is `AlreadyExists` while it is up and `Denied`
/// while it is down; unregistering it is `Denied`.
fn other(args: &[&str]) -> Check {
    let name = arg(args, 2)?;
    let id = ResId::parse(arg(args, 3)?).ok_or("bad function id argument")?;
    let want = if arg(args, 4)? == "up" {
        Error::AlreadyExists
    } else {
        Error::Denied
    };
    res::setuser(UserId(OTHER_USER)).map_err(|e| format!("other setuser: {e}"))?;
    let ep = ipc::open_endpoint("here/endpoint/fnchk-oth", Rights::OWNER_ALL)
        .map_err(|e| format!("other endpoint: {e}"))?;
    let r = expect("other user registers", fnid::register(name, ep), want)
        .and_then(|()| {
            expect(
                "other user unregisters",
                fnid::unregister(FnId(id.0)),
                Error::Denied,
            )
        })
        .and_then(|()| {
            // A system service's name, served or not (`abi::fnid::SYSTEM_NAMES`).
            ["fs", "net.udp", "net.drv", "fs.buf0", "mach", "blk"]
                .iter()
                .try_for_each(|n| {
                    let r = fnid::register(n, ep);
                    if let Ok(id) = r {
                        // Taken after all: given back, so no other test meets it.
                        let _ = fnid::unregister(id);
                    }
                    expect(&format!("other user registers {n}"), r, Error::Denied)
                })
        });
    let _ = res::close(ep);
    r
}

/// (c)
fn remote_server(core: usize) -> Check {
    let server = sys::spawn_on("fncheck", &["server", "fnchk.b"], Priority::App, core)
        .map_err(|e| format!("(c) spawn server: {e}"))?;
    let mut servers = alloc::vec![server];
    let r = remote_server_with(core, &mut servers);
    for &pid in &servers {
        let _ = sys::kill(pid);
        let _ = sys::wait(Some(pid));
    }
    if r.is_err() {
        if let Ok(id) = fnid::lookup("fnchk.b") {
            if let Ok(Some(ica)) = fnid::state(id, None) {
                let _ = res::close(ica);
            }
            let _ = fnid::unregister(id);
        }
    }
    r
}

fn other_user(name: &str, id: FnId, up: bool, core: usize) -> Check {
    let id_arg = format!("{:#x}", id.0);
    let state = if up { "up" } else { "down" };
    let child = sys::spawn_on(
        "fncheck",
        &["other", name, &id_arg, state],
        Priority::App,
        core,
    )
    .map_err(|e| format!("(c) spawn other: {e}"))?;
    expect_exit(child, "(c) another user")
}

fn remote_server_with(core: usize, servers: &mut Vec<Pid>) -> Check {
    let first = servers[0];
    // Registered (and the state set) before the server takes its first request.
    until("(c) the server registers", || {
        fnid::lookup("fnchk.b").is_ok()
    })?;
    let fb = fnid::lookup("fnchk.b").map_err(|e| format!("(c) lookup: {e}"))?;
    match ipc::call(fb.as_target(), &msg(0, 5)) {
        Ok((6, _)) => {}
        other => return fail("(c) call", other),
    }
    let ica = match fnid::state(fb, None) {
        Ok(Some(ica)) => ica,
        other => return fail("(c) the state ICA", other),
    };
    expect(
        "(c) state set by a process that is not the server",
        fnid::state(fb, Some(ica)),
        Error::Denied,
    )?;
    ipc::send(fb.as_target(), &msg(7, 0)).map_err(|e| format!("(c) send: {e}"))?;
    other_user("fnchk.b", fb, true, core)?;
    let want = |server: Pid, generation: u64, served: u64, state: u64| FnInfo {
        fnid: fb,
        name: *b"fnchk.b\0\0\0\0\0\0\0\0\0",
        name_len: 7,
        server,
        endpoint: 0,
        generation,
        served,
        state_ica: ica.0,
        user: u64::from(SERVER_USER),
        state,
        restarts: 0,
        restart_max: 0,
        since_ns: 0,
    };
    // (The one-way send may still wait in the server's queue: `served` is checked below,
    // once the server has ended.)
    let first_since = match info_of(fb)? {
        Some(i)
            if i == FnInfo {
                endpoint: i.endpoint,
                served: i.served,
                since_ns: i.since_ns,
                ..want(first, 1, 0, FN_UP)
            } =>
        {
            i.since_ns
        }
        other => return fail("(c) list", other),
    };
    // Down, the function keeps the time its last server began.
    let want = |server: Pid, generation: u64, served: u64, state: u64| FnInfo {
        since_ns: first_since,
        ..want(server, generation, served, state)
    };
    // The server ends.
    match ipc::call(fb.as_target(), &msg(EXIT_LABEL, 0)) {
        Ok((1, _)) => {}
        other => return fail("(c) exit request", other),
    }
    expect_exit(first, "(c) server")?;
    servers.clear();
    expect(
        "(c) call, server ended",
        ipc::call(fb.as_target(), &msg(0, 1)),
        Error::Gone,
    )?;
    expect(
        "(c) send, server ended",
        ipc::send(fb.as_target(), &msg(7, 1)),
        Error::Gone,
    )?;
    until("(c) the function is down", || {
        info_of(fb).is_ok_and(|i| i.is_some_and(|i| i.state == FN_DOWN))
    })?;
    match info_of(fb)? {
        Some(i) if i == want(Pid(0), 1, 3, FN_DOWN) => {}
        other => return fail("(c) list, down", other),
    }
    // This core's copy alone (`FN_LIST_LOCAL`): the same record, but only the requests taken
    // on this core, so none when the server ran on CORE (no other core was asked).
    let here_only = if sys::core().map_err(|e| format!("core: {e}"))? == core {
        3
    } else {
        0
    };
    match fnid::info(fb) {
        Ok(i) if i == want(Pid(0), 1, here_only, FN_DOWN) => {}
        other => return fail("(c) this core's list, down", other),
    }
    match fnid::lookup("fnchk.b") {
        Ok(id) if id == fb => {}
        other => return fail("(c) lookup, down", other),
    }
    other_user("fnchk.b", fb, false, core)?;
    // A new server takes over under the same id.
    let second = sys::spawn_on("fncheck", &["server", "fnchk.b"], Priority::App, core)
        .map_err(|e| format!("(c) spawn server again: {e}"))?;
    servers.push(second);
    until("(c) the function is up again", || {
        info_of(fb).is_ok_and(|i| i.is_some_and(|i| i.state == FN_UP))
    })?;
    match ipc::call(fb.as_target(), &msg(0, 41)) {
        Ok((42, _)) => {}
        other => return fail("(c) call, second server", other),
    }
    match fnid::state(fb, None) {
        Ok(Some(id)) if id == ica => {}
        other => return fail("(c) the state ICA kept", other),
    }
    // The second server's time is its own, after the first's.
    match info_of(fb)? {
        Some(i)
            if i == FnInfo {
                endpoint: i.endpoint,
                since_ns: i.since_ns,
                ..want(second, 2, 4, FN_UP)
            } && i.since_ns > first_since => {}
        other => return fail("(c) list, second server", other),
    }
    // The administrator withdraws another user's function.
    fnid::unregister(fb).map_err(|e| format!("(c) unregister: {e}"))?;
    expect(
        "(c) call, unregistered",
        ipc::call(fb.as_target(), &msg(0, 1)),
        Error::StaleResource,
    )?;
    res::close(ica).map_err(|e| format!("(c) close the state ICA: {e}"))
}

/// (e)
fn closed_endpoint() -> Check {
    let first = ipc::open_endpoint("here/endpoint/fnchk3", Rights(0x2f))
        .map_err(|e| format!("(e) endpoint: {e}"))?;
    let id = fnid::register("fnchk.c", first).map_err(|e| format!("(e) register: {e}"))?;
    let r = closed_endpoint_of(id, first);
    let _ = fnid::unregister(id);
    r
}

fn closed_endpoint_of(id: FnId, first: ResId) -> Check {
    res::close(first).map_err(|e| format!("(e) close: {e}"))?;
    expect(
        "(e) call, endpoint closed",
        ipc::call(id.as_target(), &msg(0, 1)),
        Error::Gone,
    )?;
    until("(e) the function is down", || {
        info_of(id).is_ok_and(|i| i.is_some_and(|i| i.state == FN_DOWN))
    })?;
    let second = ipc::open_endpoint("here/endpoint/fnchk4", Rights(0x2f))
        .map_err(|e| format!("(e) second endpoint: {e}"))?;
    let r = match fnid::register("fnchk.c", second) {
        Ok(again) if again == id => match info_of(id)? {
            Some(i) if i.generation == 2 && i.state == FN_UP && i.endpoint == second.0 => Ok(()),
            other => fail("(e) list, registered again", other),
        },
        other => fail("(e) registered again", other),
    };
    let _ = res::close(second);
    r
}

/// (d)
fn limit(ep: ResId) -> Check {
    let me = res::getuser().map_err(|e| format!("(d) getuser: {e}"))?;
    let listed = fnid::list().map_err(|e| format!("(d) list: {e}"))?;
    let before = listed.len();
    let mine = listed.iter().filter(|f| f.user == u64::from(me.0)).count();
    // This user's room: its share, or what is left of the registry if that is less.
    let room = FNIDS_PER_USER.saturating_sub(mine).min(MAX_FNIDS - before);
    let mut ids = Vec::new();
    let mut r = Ok(());
    for i in 0..room {
        match fnid::register(&format!("fnchk.l{i}"), ep) {
            Ok(id) => ids.push(id),
            Err(e) => {
                r = fail("(d) register", (i, e));
                break;
            }
        }
    }
    if r.is_ok() {
        r = expect(
            "(d) one too many",
            fnid::register("fnchk.full", ep),
            Error::Limit,
        );
    }
    // Past this user's share with the registry not full: another user still registers.
    if r.is_ok() && before + room < MAX_FNIDS {
        let other = res::setuser(UserId(2000)).and_then(|()| {
            let got =
                ipc::open_endpoint("here/endpoint/fnchk-other", Rights(0x2f)).and_then(|own| {
                    let id = fnid::register("fnchk.other", own);
                    if let Ok(id) = id {
                        let _ = fnid::unregister(id);
                    }
                    let _ = res::close(own);
                    id
                });
            let _ = res::setuser(me);
            got
        });
        if let Err(e) = other {
            r = fail("(d) another user at this one's share", e);
        }
    }
    for id in ids {
        if let Err(e) = fnid::unregister(id) {
            r = r.and(fail("(d) unregister", (id, e)));
        }
    }
    r?;
    match fnid::list().map(|l| l.len()) {
        Ok(n) if n == before => Ok(()),
        other => fail("(d) left registered", other),
    }
}
