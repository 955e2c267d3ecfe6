//! `icacheck [CORE]`: ICAs passed on requests and replies (P3's "peel off and paste";
//! `abi::ipc` has the contract), with the servers on core CORE (default: this core).
//! Prints `icacheck: ok` and exits 0, or prints the first failure and exits 1.
//!
//! | part | what |
//! |---|---|
//! | (a) | bad input changes nothing and the sender keeps its mapping: not a vregion, unknown and closed ids, not attached, attached twice, a full queue, an unknown reply handle, a bad endpoint; a SEND to its own endpoint maps it in its own ICA window, and a DETACH there ends the pass |
//! | (b) | 20 round trips by CALL and REPLY_RECV: the server reads what the caller wrote, the caller what the server wrote, at a window address; the same by SUBMIT_CALL and COLLECT, by a ring's SUBMIT_CALL, and by SEND then a later reply |
//! | (c) | while the server holds it, its sender's ATTACH, READ, WRITE, CLOSE and a second pass are `Busy`; once back and detached, READ works again |
//! | (d) | a sender that touches the area after passing it ends at a page fault (child `toucher`), and its vregion comes back through the server's reply |
//! | (e) | a server that exits holding it, one killed before taking the request, one that closes its endpoint with the request queued: the vregion comes back detached, and its creator attaches it by id |
//! | (f) | `CLOSE_WHEN_DETACHED`: refused for a vregion attached nowhere; a marked one is closed by the kernel once detached, and once the server it was passed to exits holding it |
//! | (g) | lending read-only (`MSG_ICA_READ_ONLY` on the pass): the server maps it read-only, and so does a second server it passes it on to; it lands writable again at the lender; a read-only mapping lent comes back read-only (nothing gained); a server that writes into a lent ICA ends at a page fault and the vregion comes back; a holder that migrates to another core with a lent ICA and sends it back: it lands writable at its lender; across cores, answers that give back a lent ICA and no words count as carrying no reply data (`IPC_REPLIES_CROSS_BARE`), writable ones do not |
//!
//! `icacheck frames CORE`: the kernel test `ica::same_frames_on_both_sides` compares the
//! frames while a server on CORE holds the vregion `icaframes`, then wakes this program
//! with a one-way message on its endpoint `icaframes`; the vregion comes back and is read.
//!
//! Roles (the child side): `icacheck server NAME`, `icacheck toucher ENDPOINT`,
//! `icacheck sleeper NAME`, `icacheck closer NAME`, `icacheck mover NAME BACK CORE`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, ResType, Rights};
use ulib::abi::{Error, Pid, Priority};
use ulib::{ipc, println, res, sys};

ulib::main!(main);

type Check = Result<(), String>;

/// Where the checks attach their vregions (outside the ICA window).
const AREA_AT: u64 = 0x0000_5100_0000_0000;
const SECOND_AT: u64 = AREA_AT + api::ICA_SLOT;
const PAGES: u64 = 4;
const SIZE: u64 = PAGES * 4096;
/// A server with nothing to do for this long gives up (a hang guard only).
const IDLE_NS: u64 = 120_000_000_000;

/// Server commands (a request's label, beside `MSG_ICA`). A request's ICA is checked
/// against `words[0]` and filled with `words[1]` first, then kept.
const KEEP: u64 = 1;
/// Pass the ICA just received back in the reply.
const ECHO: u64 = 2;
/// Pass back the first ICA kept.
const GIVE: u64 = 3;
/// Answer, then exit holding what is kept.
const EXIT: u64 = 4;
/// Close endpoint `NAME-a` (the closer's command).
const CLOSE: u64 = 5;
/// Check the ICA against `words[0]` without writing in it, and pass it back: the answer's
/// value is [`SAW_READ_ONLY`] if it came read-only, 0 if writable, [`SAW_WRONG`] if it did
/// not hold `words[0]`.
const PEEK: u64 = 6;
/// Pass the ICA on to endpoint `words[2]` with `PEEK` and, once it is back, back to the
/// caller: the value is the other server's, plus [`CAME_BACK_READ_ONLY`] if it came back
/// here read-only.
const FORWARD: u64 = 7;
const SAW_READ_ONLY: u64 = 1;
const SAW_WRONG: u64 = 2;
const CAME_BACK_READ_ONLY: u64 = 4;

fn fail<T>(what: &str, got: impl core::fmt::Debug) -> Result<T, String> {
    Err(format!("{what}: got {got:?}"))
}

fn main(args: &[&str]) -> i32 {
    let here = sys::core().unwrap_or(0);
    let r = match args.get(1).copied() {
        Some("server") => server(args),
        Some("toucher") => toucher(args),
        Some("sleeper") => sleeper(args),
        Some("closer") => closer(args),
        Some("mover") => mover(args),
        Some("frames") => {
            let core = args.get(2).and_then(|c| c.parse().ok()).unwrap_or(here);
            frames(core)
        }
        other => {
            let core = other.and_then(|c| c.parse().ok()).unwrap_or(here);
            parent(core)
        }
    };
    match r {
        Ok(()) => {
            if args.len() < 2 || args[1].parse::<usize>().is_ok() || args[1] == "frames" {
                println!("icacheck: ok");
            }
            0
        }
        Err(e) => {
            println!("icacheck {}: FAIL {e}", args.get(1).unwrap_or(&""));
            1
        }
    }
}

// ---- the area ---------------------------------------------------------------------------

/// Write `value` (mixed with the page number) at the start and end of each page at `at`.
fn fill(at: u64, value: u64) {
    for page in 0..PAGES {
        let p = at + page * 4096;
        // SAFETY: the caller has a vregion of `PAGES` pages mapped writable at `at`.
        unsafe {
            core::ptr::write_volatile(p as *mut u64, value ^ (page << 32));
            core::ptr::write_volatile((p + 4088) as *mut u64, !value ^ page);
        }
    }
}

/// Does the area at `at` hold what `fill(at, value)` wrote?
fn holds(at: u64, value: u64) -> bool {
    (0..PAGES).all(|page| {
        let p = at + page * 4096;
        // SAFETY: the caller has a vregion of `PAGES` pages mapped at `at`.
        unsafe {
            core::ptr::read_volatile(p as *const u64) == value ^ (page << 32)
                && core::ptr::read_volatile((p + 4088) as *const u64) == !value ^ page
        }
    })
}

fn in_window(at: u64) -> bool {
    (api::ICA_WINDOW..api::ICA_WINDOW + api::ICA_SLOTS * api::ICA_SLOT).contains(&at)
        && at.is_multiple_of(api::ICA_SLOT)
}

fn cmd(label: u64, check: u64, write: u64) -> Msg {
    Msg {
        label,
        words: [check, write, 0, 0, 0, 0],
    }
}

/// The ICA a reply carries, in the window, holding `value`.
fn returned(what: &str, reply: &Msg, region: ResId, value: u64) -> Result<u64, String> {
    match ipc::ica_at(reply) {
        Some((id, at)) if id == region && in_window(at) => {
            if holds(at, value) {
                Ok(at)
            } else {
                fail(&format!("{what}: the area does not hold {value:#x}"), at)
            }
        }
        other => fail(&format!("{what}: the reply's ICA"), (reply, other)),
    }
}

fn find_endpoint(core: usize, name: &str) -> Result<ResId, String> {
    res::wait_for_named(core, name, ResType::Endpoint, 2000)
        .map_err(|_| format!("no endpoint '{name}' on core {core}"))
}

fn expect_exit(pid: Pid, what: &str) -> Check {
    match sys::wait(Some(pid)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => Ok(()),
        other => fail(what, other),
    }
}

fn e(what: &'static str) -> impl Fn(Error) -> String {
    move |err| format!("{what}: {err}")
}

/// A started server: its pid and endpoint.
fn start_server(core: usize, name: &str) -> Result<(Pid, ResId), String> {
    let pid = sys::spawn_on("icacheck", &["server", name], Priority::App, core)
        .map_err(e("spawn server"))?;
    Ok((pid, find_endpoint(core, name)?))
}

/// Tell a server to exit, and wait for it.
fn stop_server(pid: Pid, ep: ResId) -> Check {
    ipc::call(ep, &cmd(EXIT, 0, 0)).map_err(e("exit command"))?;
    expect_exit(pid, "server exit")
}

// ---- the parent ---------------------------------------------------------------------------

fn parent(core: usize) -> Check {
    let me = sys::getpid().map_err(e("getpid"))?;
    let vs = res::open_vspace(&format!("here/vspace/ica{}", me.0), None, Rights::OWNER_ALL)
        .map_err(e("vspace"))?;
    let v = res::open_vregion(
        &format!("here/vregion/ica{}", me.0),
        SIZE,
        Rights::OWNER_ALL,
    )
    .map_err(e("vregion"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("attach"))?;
    fill(AREA_AT, 0x11);
    bad_input(me, vs, v)?;
    let (server, sep) = start_server(core, &format!("icasrv{}", me.0))?;
    round_trips(vs, v, sep)?;
    toucher_faults(sep)?;
    stop_server(server, sep)?;
    comes_back(core, me, vs, v)?;
    closes_when_detached(core, me, vs)?;
    lends_read_only(core, me, vs, v)?;
    res::detach(vs, AREA_AT).map_err(e("detach at the end"))?;
    res::close(v).map_err(e("close the vregion"))?;
    res::close(vs).map_err(e("close the vspace"))?;
    Ok(())
}

/// (a): every refused pass leaves the area mapped where it was, holding what it held.
fn bad_input(me: Pid, vs: ResId, v: ResId) -> Check {
    let ep = ipc::open_endpoint(&format!("here/endpoint/ica{}", me.0), Rights(0x2f))
        .map_err(e("(a) endpoint"))?;
    let still = |what: &str| -> Check {
        if holds(AREA_AT, 0x11) {
            Ok(())
        } else {
            fail(what, "the area changed")
        }
    };
    let send = |region: u64| {
        let mut m = cmd(KEEP, 0, 0);
        m.label |= api::MSG_ICA;
        m.words[api::ICA_ID_WORD] = region;
        ipc::send(ep, &m)
    };
    // Not a vregion; unknown; closed; not attached.
    let r = send(ep.0);
    if r != Err(Error::WrongType) {
        return fail("(a) an endpoint id as the ICA", r);
    }
    let unknown = ResId::new(0, v.core(), ResType::VRegion, 1, 1_000_000);
    let r = send(unknown.0);
    if r != Err(Error::NoSuchResource) {
        return fail("(a) an unknown vregion id", r);
    }
    let closed = res::open_vregion(
        &format!("here/vregion/icaold{}", me.0),
        4096,
        Rights::OWNER_ALL,
    )
    .map_err(e("(a) vregion"))?;
    res::close(closed).map_err(e("(a) close"))?;
    let r = send(closed.0);
    if r != Err(Error::StaleResource) {
        return fail("(a) a closed vregion", r);
    }
    let loose = res::open_vregion(
        &format!("here/vregion/icaloose{}", me.0),
        4096,
        Rights::OWNER_ALL,
    )
    .map_err(e("(a) vregion"))?;
    let r = send(loose.0);
    if r != Err(Error::InvalidArgument) {
        return fail("(a) a vregion attached nowhere", r);
    }
    res::close(loose).map_err(e("(a) close"))?;
    still("(a) after bad ids")?;
    // Attached twice: not the sender's alone.
    res::attach(vs, v, SECOND_AT, false).map_err(e("(a) second attach"))?;
    let r = send(v.0);
    if r != Err(Error::Busy) {
        return fail("(a) a vregion attached twice", r);
    }
    if !holds(SECOND_AT, 0x11) {
        return fail("(a) the second mapping after a refused pass", "changed");
    }
    res::detach(vs, SECOND_AT).map_err(e("(a) detach the second"))?;
    still("(a) after attached twice")?;
    // A full queue (nobody receives on our own endpoint): Busy, and the sender keeps it.
    let mut queued = 0;
    while ipc::send(ep, &cmd(KEEP, 0, 0)).is_ok() {
        queued += 1;
    }
    let r = send(v.0);
    if r != Err(Error::Busy) {
        return fail("(a) an ICA into a full queue", (queued, r));
    }
    still("(a) after a full queue")?;
    while ipc::recv(ep, 0).is_ok() {}
    // Replies to unknown handles, a call to what is not an endpoint.
    let m = ipc::with_ica(cmd(0, 0, 0), v);
    let r = ipc::reply(999, 0, &m);
    if r != Err(Error::NoSuchResource) {
        return fail("(a) REPLY with an ICA to an unknown handle", r);
    }
    let r = ipc::reply_recv(999, 0, &m, ep, 0).map(|_| ());
    if r != Err(Error::NoSuchResource) {
        return fail("(a) REPLY_RECV with an ICA to an unknown handle", r);
    }
    let r = ipc::call(v, &m).map(|_| ());
    if r != Err(Error::WrongType) {
        return fail("(a) CALL with an ICA to a vregion", r);
    }
    still("(a) after refused replies and calls")?;
    // To ourselves: it lands in our own window; detaching it there ends the pass.
    ipc::send(ep, &m).map_err(e("(a) send to ourselves"))?;
    let got = ipc::recv(ep, 0).map_err(e("(a) recv from ourselves"))?;
    let at = returned("(a) sent to ourselves", &got.msg, v, 0x11)?;
    let mut byte = [0u8; 8];
    let r = res::read(v, &mut byte, 0);
    if r != Err(Error::Busy) {
        return fail("(a) READ of a passed vregion", r);
    }
    res::detach(vs, at).map_err(e("(a) detach from the window"))?;
    res::read(v, &mut byte, 0).map_err(e("(a) READ once detached"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("(a) attach again"))?;
    still("(a) attached again")?;
    res::close(ep).map_err(e("(a) close the endpoint"))
}

/// (b) and (c), with the server at `sep`. The vregion `v` is at `AREA_AT` before and after.
fn round_trips(vs: ResId, v: ResId, sep: ResId) -> Check {
    // (b) CALL, answered by REPLY_RECV passing it back.
    let mut at = AREA_AT;
    for i in 0..20u64 {
        fill(at, 0x100 + i);
        let (bad, reply) = ipc::call(sep, &ipc::with_ica(cmd(ECHO, 0x100 + i, 0x200 + i), v))
            .map_err(e("(b) call"))?;
        if bad != 0 {
            return fail(
                "(b) the server did not read what the caller wrote",
                (i, bad),
            );
        }
        at = returned("(b) echo", &reply, v, 0x200 + i)?;
    }
    // SUBMIT_CALL and COLLECT.
    fill(at, 0x300);
    let mut sub = ipc::op(api::SUBMIT_CALL, sep.0, [0; 4]);
    sub.msg = ipc::with_ica(cmd(ECHO, 0x300, 0x301), v);
    let t = ipc::submit(&sub).map_err(e("(b) submit"))?;
    let c = ipc::collect(t, IDLE_NS).map_err(e("(b) collect"))?;
    if ipc::result(&c) != Ok(0) {
        return fail("(b) submitted call", c);
    }
    at = returned("(b) submitted echo", &c.msg, v, 0x301)?;
    // A ring's SUBMIT_CALL: the completion carries the answer's ICA.
    fill(at, 0x500);
    let mut ring =
        ulib::ring::Ring::setup(ulib::ring::DEFAULT_ADDRESS, 8).map_err(e("(b) ring setup"))?;
    sub.msg = ipc::with_ica(cmd(ECHO, 0x500, 0x501), v);
    if !ring.push(7, &sub) {
        return fail("(b) ring push", "full");
    }
    let n = ring.enter(1, 1, IDLE_NS).map_err(e("(b) ring enter"))?;
    match ring.pop() {
        Some(cqe) if n == 1 && cqe.user_data == 7 && cqe.status == 0 && cqe.value == 0 => {
            at = returned("(b) ring echo", &cqe.msg, v, 0x501)?;
        }
        other => return fail("(b) ring completion", (n, other)),
    }
    // (c) SEND: the server keeps it; meanwhile the sender may not touch it by id.
    fill(at, 0x400);
    ipc::send(sep, &ipc::with_ica(cmd(KEEP, 0x400, 0x401), v)).map_err(e("(b) send"))?;
    let mut buf = [0u8; 8];
    let refused = [
        ("ATTACH", res::attach(vs, v, SECOND_AT, true)),
        ("READ", res::read(v, &mut buf, 0).map(drop)),
        ("WRITE", res::write(v, &buf, 0).map(drop)),
        ("CLOSE", res::close(v)),
        (
            "a second pass",
            ipc::send(sep, &ipc::with_ica(cmd(KEEP, 0, 0), v)),
        ),
    ];
    for (what, r) in refused {
        if r != Err(Error::Busy) {
            return fail(&format!("(c) {what} while the server holds it"), r);
        }
    }
    let (bad, reply) = ipc::call(sep, &cmd(GIVE, 0, 0)).map_err(e("(c) give"))?;
    if bad != 0 {
        return fail("(c) the server did not read what was sent", bad);
    }
    at = returned("(c) given back", &reply, v, 0x401)?;
    res::detach(vs, at).map_err(e("(c) detach"))?;
    res::read(v, &mut buf, 0).map_err(e("(c) READ once back and detached"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("(c) attach again"))?;
    fill(AREA_AT, 0x11);
    Ok(())
}

/// (d): the toucher passes its vregion to the server, then faults on its old address; the
/// server gives the vregion to us.
fn toucher_faults(sep: ResId) -> Check {
    let arg = format!("{:#x}", sep.0);
    let t = sys::spawn("icacheck", &["toucher", &arg], Priority::App).map_err(e("(d) spawn"))?;
    match sys::wait(Some(t)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_FAULT => {}
        other => return fail("(d) the toucher should end at a fault", other),
    }
    let (bad, reply) = ipc::call(sep, &cmd(GIVE, 0, 0)).map_err(e("(d) give"))?;
    if bad != 0 {
        return fail("(d) the server did not read what the toucher wrote", bad);
    }
    let Some((tv, _)) = ipc::ica_at(&reply) else {
        return fail("(d) no ICA given back", reply);
    };
    let at = returned("(d) the toucher's area", &reply, tv, 0x71)?;
    res::detach_here(at).map_err(e("(d) detach"))?;
    res::close(tv).map_err(e("(d) close the toucher's vregion"))
}

/// (e): servers that go away holding the vregion, or before taking the request, or closing
/// the endpoint it waits on: it comes back detached, and attaches by id.
fn comes_back(core: usize, me: Pid, vs: ResId, v: ResId) -> Check {
    let back = |what: &str, value: u64| -> Check {
        res::attach(vs, v, AREA_AT, true).map_err(|err| format!("{what}: attach by id: {err}"))?;
        if !holds(AREA_AT, value) {
            return fail(what, "the area lost what it held");
        }
        Ok(())
    };
    // Exits holding it.
    let (pid, ep) = start_server(core, &format!("icaexit{}", me.0))?;
    fill(AREA_AT, 0x30);
    let (bad, _) =
        ipc::call(ep, &ipc::with_ica(cmd(KEEP, 0x30, 0x31), v)).map_err(e("(e) keep"))?;
    if bad != 0 {
        return fail("(e) keep", bad);
    }
    stop_server(pid, ep)?;
    back("(e) after the holder exited", 0x31)?;
    // Killed before it took the request.
    let name = format!("icasleep{}", me.0);
    let pid = sys::spawn_on("icacheck", &["sleeper", &name], Priority::App, core)
        .map_err(e("(e) spawn sleeper"))?;
    let ep = find_endpoint(core, &name)?;
    ipc::send(ep, &ipc::with_ica(cmd(KEEP, 0, 0), v)).map_err(e("(e) send to the sleeper"))?;
    let r = res::attach(vs, v, SECOND_AT, true);
    if r != Err(Error::Busy) {
        return fail("(e) attach while the sleeper holds it", r);
    }
    sys::kill(pid).map_err(e("(e) kill"))?;
    let _ = sys::wait(Some(pid));
    back("(e) after the sleeper was killed", 0x31)?;
    // The endpoint closed with the request queued.
    let name = format!("icaclose{}", me.0);
    let pid = sys::spawn_on("icacheck", &["closer", &name], Priority::App, core)
        .map_err(e("(e) spawn closer"))?;
    let b = find_endpoint(core, &format!("{name}-b"))?;
    let a = find_endpoint(core, &format!("{name}-a"))?;
    ipc::send(a, &ipc::with_ica(cmd(KEEP, 0, 0), v)).map_err(e("(e) send to the closer"))?;
    ipc::send(b, &cmd(CLOSE, 0, 0)).map_err(e("(e) close command"))?;
    expect_exit(pid, "(e) closer")?;
    back("(e) after the endpoint closed", 0x31)
}

/// (g) A holder of a lent ICA (`mover`) migrates to another core, then sends it back to
/// its lender, where it must land writable: the migration keeps the attachment's lender.
/// `v` is attached writable at `AREA_AT`, and is again after. Needs two cores.
fn moved_holder(me: Pid, vs: ResId, v: ResId) -> Check {
    let here = sys::core().map_err(e("(g) core"))?;
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).map_err(e("(g) CORES"))?;
    let Some(other) = (0..n).find(|&c| c != here && cores[c].online != 0) else {
        return Ok(());
    };
    let back = ipc::open_endpoint(&format!("here/endpoint/icaback{}", me.0), Rights(0x2f))
        .map_err(e("(g) back endpoint"))?;
    let name = format!("icamove{}", me.0);
    let back_arg = format!("{:#x}", back.0);
    let other_arg = format!("{other}");
    let args = [
        "mover",
        name.as_str(),
        back_arg.as_str(),
        other_arg.as_str(),
    ];
    let pid =
        sys::spawn_on("icacheck", &args, Priority::App, here).map_err(e("(g) spawn mover"))?;
    let r = (|| {
        let ep = find_endpoint(here, &name)?;
        fill(AREA_AT, 0x700);
        ipc::send(ep, &lent(ipc::with_ica(cmd(KEEP, 0, 0), v))).map_err(e("(g) lend"))?;
        let r = ipc::recv(back, IDLE_NS).map_err(e("(g) recv the ICA back"))?;
        let at = match ipc::ica_at(&r.msg) {
            Some((id, at)) if id == v && holds(at, 0x700) => at,
            other => return fail("(g) the moved holder's ICA", (r.msg, other)),
        };
        if ipc::ica_read_only(&r.msg) {
            return fail(
                "(g) sent back after a migration, at its lender",
                "read-only",
            );
        }
        fill(at, 0x601);
        res::detach(vs, at).map_err(e("(g) detach"))?;
        Ok(())
    })();
    let ended = expect_exit(pid, "(g) mover");
    let _ = res::close(back);
    r?;
    ended?;
    res::attach(vs, v, AREA_AT, true).map_err(e("(g) attach after the move"))?;
    Ok(())
}

/// Child of (g): take one request on endpoint NAME (an ICA lent read-only), migrate to
/// core CORE, and send the ICA back to endpoint BACK.
fn mover(args: &[&str]) -> Check {
    let (Some(name), Some(back), Some(core)) = (
        args.get(2),
        args.get(3).and_then(|a| ResId::parse(a)),
        args.get(4).and_then(|c| c.parse::<usize>().ok()),
    ) else {
        return fail("mover: arguments", args.len());
    };
    let ep = ipc::open_endpoint(&format!("here/endpoint/{name}"), Rights(0x2f))
        .map_err(e("mover endpoint"))?;
    let r = ipc::recv(ep, IDLE_NS).map_err(e("mover recv"))?;
    let Some((id, _)) = ipc::ica_at(&r.msg) else {
        return fail("mover: no ICA", r.msg);
    };
    if !ipc::ica_read_only(&r.msg) {
        return fail("mover: a lent ICA came", "writable");
    }
    // Closed before the move: an endpoint stays on its core, owned by the ended process.
    res::close(ep).map_err(e("mover close endpoint"))?;
    sys::migrate(None, core).map_err(e("mover migrate"))?;
    ipc::send(back, &ipc::with_ica(cmd(KEEP, 0, 0), id)).map_err(e("mover send back"))
}

/// `msg` lending its ICA read-only.
fn lent(msg: Msg) -> Msg {
    Msg {
        label: msg.label | api::MSG_ICA_READ_ONLY,
        ..msg
    }
}

/// Answers of this machine's cores counted as carrying no reply data across cores.
fn bare_answers() -> Result<u64, String> {
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).map_err(e("(g) CORES"))?;
    Ok(cores[..n]
        .iter()
        .map(|c| c.ipc_messages[ulib::abi::IPC_REPLIES_CROSS_BARE])
        .sum())
}

/// (g): an ICA lent read-only. `v` is attached writable at `AREA_AT`, and is again after.
fn lends_read_only(core: usize, me: Pid, vs: ResId, v: ResId) -> Check {
    let (pa, a) = start_server(core, &format!("icalend{}", me.0))?;
    let (pb, b) = start_server(core, &format!("icalend{}b", me.0))?;
    // Lent: read-only at the server; back here writable (written into to show it).
    fill(AREA_AT, 0x600);
    let (value, reply) =
        ipc::call(a, &lent(ipc::with_ica(cmd(PEEK, 0x600, 0), v))).map_err(e("(g) lend"))?;
    if value != SAW_READ_ONLY {
        return fail("(g) the server's mapping of a lent ICA", value);
    }
    let mut at = returned("(g) lent", &reply, v, 0x600)?;
    if ipc::ica_read_only(&reply) {
        return fail("(g) a lent ICA back at its lender", "read-only");
    }
    fill(at, 0x601);
    // Passed on by the server to another: read-only there and back at the first server.
    let mut forward = cmd(FORWARD, 0x601, 0);
    forward.words[2] = b.0;
    let (value, reply) =
        ipc::call(a, &lent(ipc::with_ica(forward, v))).map_err(e("(g) forward"))?;
    if value != SAW_READ_ONLY + CAME_BACK_READ_ONLY {
        return fail("(g) passed on: read-only at both servers", value);
    }
    at = returned("(g) forwarded", &reply, v, 0x601)?;
    if ipc::ica_read_only(&reply) {
        return fail("(g) forwarded, back at its lender", "read-only");
    }
    fill(at, 0x601);
    // Not lent: writable at the server.
    let (value, reply) =
        ipc::call(a, &ipc::with_ica(cmd(PEEK, 0x601, 0), v)).map_err(e("(g) pass"))?;
    if value != 0 {
        return fail("(g) the server's mapping of an ICA not lent", value);
    }
    at = returned("(g) not lent", &reply, v, 0x601)?;
    // A read-only mapping lent gains nothing: read-only there and back here.
    res::detach(vs, at).map_err(e("(g) detach"))?;
    res::attach(vs, v, AREA_AT, false).map_err(e("(g) attach read-only"))?;
    let (value, reply) =
        ipc::call(a, &lent(ipc::with_ica(cmd(PEEK, 0x601, 0), v))).map_err(e("(g) lend ro"))?;
    if value != SAW_READ_ONLY {
        return fail("(g) a read-only mapping lent: the server's", value);
    }
    at = returned("(g) read-only lent", &reply, v, 0x601)?;
    if !ipc::ica_read_only(&reply) {
        return fail("(g) a read-only mapping lent, back here", "writable");
    }
    res::detach(vs, at).map_err(e("(g) detach"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("(g) attach again"))?;
    // Answers across cores: a lent ICA given back with no words is no reply data.
    if core != sys::core().unwrap_or(core) {
        const N: u64 = 20;
        for (lend, counted) in [(true, true), (false, false)] {
            let before = bare_answers()?;
            for _ in 0..N {
                let m = ipc::with_ica(cmd(PEEK, 0x601, 0), v);
                let m = if lend { lent(m) } else { m };
                let (_, reply) = ipc::call(a, &m).map_err(e("(g) count"))?;
                at = returned("(g) count", &reply, v, 0x601)?;
            }
            let bare = bare_answers()? - before;
            if counted != (bare >= N) {
                return fail(
                    &format!("(g) {N} answers (lent: {lend}) counted as no reply data"),
                    bare,
                );
            }
        }
        res::detach(vs, at).map_err(e("(g) detach"))?;
        res::attach(vs, v, AREA_AT, true).map_err(e("(g) attach"))?;
    }
    moved_holder(me, vs, v)?;
    // A server that writes into a lent ICA ends at a page fault; the vregion comes back.
    let r = ipc::call(b, &lent(ipc::with_ica(cmd(KEEP, 0x601, 0x602), v)));
    if r.is_ok() {
        return fail("(g) a server writing into a lent ICA", r);
    }
    match sys::wait(Some(pb)) {
        Ok((_, s)) if s.how != ulib::abi::ENDED_EXIT => {}
        other => return fail("(g) the server that wrote into a lent ICA", other),
    }
    res::attach(vs, v, AREA_AT, true).map_err(e("(g) attach after the fault"))?;
    if !holds(AREA_AT, 0x601) {
        return fail("(g) after the fault", "the area changed");
    }
    stop_server(pa, a)
}

/// (f): a vregion marked `CLOSE_WHEN_DETACHED` is closed by the kernel once attached
/// nowhere: detached here, or passed as an ICA to a server that exits holding it.
fn closes_when_detached(core: usize, me: Pid, vs: ResId) -> Check {
    let open = |n: u32| {
        res::open_vregion(
            &format!("here/vregion/icacwd{}-{n}", me.0),
            SIZE,
            Rights::OWNER_ALL,
        )
        .map_err(e("(f) vregion"))
    };
    let gone = |what: &str, id: ResId| -> Check {
        match res::info(id) {
            Err(Error::StaleResource | Error::NoSuchResource) => Ok(()),
            other => fail(what, other),
        }
    };
    // Attached nowhere: refused (close it instead), and nothing changes.
    let w = open(1)?;
    let r = res::close_when_detached(w);
    if r != Err(Error::InvalidArgument) {
        return fail("(f) marked while attached nowhere", r);
    }
    // Detached: closed.
    res::attach(vs, w, SECOND_AT, true).map_err(e("(f) attach"))?;
    res::close_when_detached(w).map_err(e("(f) mark"))?;
    res::info(w).map_err(e("(f) still there while attached"))?;
    res::detach(vs, SECOND_AT).map_err(e("(f) detach"))?;
    gone("(f) after its detach", w)?;
    // Passed to a server that exits holding it: closed (unmarked, it would come back).
    let w = open(2)?;
    res::attach(vs, w, SECOND_AT, true).map_err(e("(f) attach 2"))?;
    res::close_when_detached(w).map_err(e("(f) mark 2"))?;
    fill(SECOND_AT, 0x40);
    let (pid, ep) = start_server(core, &format!("icacwd{}", me.0))?;
    let (bad, _) =
        ipc::call(ep, &ipc::with_ica(cmd(KEEP, 0x40, 0x41), w)).map_err(e("(f) keep"))?;
    if bad != 0 {
        return fail("(f) keep", bad);
    }
    res::info(w).map_err(e("(f) still there while the server holds it"))?;
    stop_server(pid, ep)?;
    gone("(f) after its holder exited", w)
}

// ---- roles ----------------------------------------------------------------------------------

/// A server on endpoint `NAME`: checks and fills every ICA it gets, keeps them, and passes
/// them back on command. Its answers' value: how many checks failed so far.
fn server(args: &[&str]) -> Check {
    let name = args.get(2).ok_or("server: no name")?;
    let ep = ipc::open_endpoint(&format!("here/endpoint/{name}"), Rights(0x2f))
        .map_err(e("server endpoint"))?;
    let mut held: Vec<(ResId, u64)> = Vec::new();
    let mut bad = 0u64;
    let mut answer = (0u64, 0u64, Msg::default());
    loop {
        let r = ipc::reply_recv(answer.0, answer.1, &answer.2, ep, IDLE_NS)
            .map_err(e("server reply_recv"))?;
        answer = (r.request, 0, Msg::default());
        let op = ipc::label(&r.msg);
        if matches!(op, PEEK | FORWARD) {
            answer.1 = peek(&r, op)?;
            answer.2 = ipc::with_ica(Msg::default(), ipc::ica_at(&r.msg).ok_or("no ICA")?.0);
            continue;
        }
        if let Some((id, at)) = ipc::ica_at(&r.msg) {
            if !in_window(at) || !holds(at, r.msg.words[0]) {
                bad += 1;
            }
            if in_window(at) {
                fill(at, r.msg.words[1]);
            }
            held.push((id, at));
        }
        answer.1 = bad;
        match op {
            ECHO => {
                let (id, _) = held.pop().ok_or("server: echo without an ICA")?;
                answer.2 = ipc::with_ica(Msg::default(), id);
            }
            GIVE if held.is_empty() => answer.1 = u64::MAX,
            GIVE => answer.2 = ipc::with_ica(Msg::default(), held.remove(0).0),
            EXIT => {
                ipc::reply(r.request, bad, &Msg::default()).map_err(e("server exit reply"))?;
                return Ok(());
            }
            _ => {}
        }
    }
}

/// The server's `PEEK` or `FORWARD` of request `r`: its answer's value (the ICA goes back).
fn peek(r: &ulib::abi::ipc::Received, op: u64) -> Result<u64, String> {
    let (id, at) = ipc::ica_at(&r.msg).ok_or("server: peek without an ICA")?;
    if op == PEEK {
        return Ok(if !in_window(at) || !holds(at, r.msg.words[0]) {
            SAW_WRONG
        } else if ipc::ica_read_only(&r.msg) {
            SAW_READ_ONLY
        } else {
            0
        });
    }
    let to = ResId(r.msg.words[2]);
    let (value, reply) = ipc::call(to, &ipc::with_ica(cmd(PEEK, r.msg.words[0], 0), id))
        .map_err(e("server forward"))?;
    match ipc::ica_at(&reply) {
        Some((back, _)) if back == id && ipc::ica_read_only(&reply) => {
            Ok(value + CAME_BACK_READ_ONLY)
        }
        Some((back, _)) if back == id => Ok(value),
        other => fail("server forward: the reply's ICA", other),
    }
}

/// Child of (d): pass a vregion to the server at ENDPOINT, then touch where it was.
fn toucher(args: &[&str]) -> Check {
    let sep = args
        .get(2)
        .and_then(|a| ResId::parse(a))
        .ok_or("toucher: no endpoint")?;
    let me = sys::getpid().map_err(e("getpid"))?;
    let vs = res::open_vspace(
        &format!("here/vspace/icat{}", me.0),
        None,
        Rights::OWNER_ALL,
    )
    .map_err(e("toucher vspace"))?;
    let v = res::open_vregion(
        &format!("here/vregion/icat{}", me.0),
        SIZE,
        Rights::OWNER_ALL,
    )
    .map_err(e("toucher vregion"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("toucher attach"))?;
    res::close(vs).map_err(e("toucher close vspace"))?;
    fill(AREA_AT, 0x70);
    let (bad, _) =
        ipc::call(sep, &ipc::with_ica(cmd(KEEP, 0x70, 0x71), v)).map_err(e("toucher call"))?;
    if bad != 0 {
        return fail("toucher: the server did not read what it wrote", bad);
    }
    // SAFETY: the address held our mapping of the vregion, which the kernel took away with
    // the pass: the read must fault (and end us) without touching any memory; reading it
    // is the check.
    let x = unsafe { core::ptr::read_volatile(AREA_AT as *const u64) };
    fail("toucher: read the area after passing it", x)
}

/// Child of (e): an endpoint nobody receives on.
fn sleeper(args: &[&str]) -> Check {
    let name = args.get(2).ok_or("sleeper: no name")?;
    ipc::open_endpoint(&format!("here/endpoint/{name}"), Rights(0x2f)).map_err(e("sleeper"))?;
    loop {
        let _ = sys::sleep_ns(1_000_000_000);
    }
}

/// Child of (e): endpoints `NAME-a` and `NAME-b`; on a message on b, close a and exit.
fn closer(args: &[&str]) -> Check {
    let name = args.get(2).ok_or("closer: no name")?;
    let a = ipc::open_endpoint(&format!("here/endpoint/{name}-a"), Rights(0x2f))
        .map_err(e("closer a"))?;
    let b = ipc::open_endpoint(&format!("here/endpoint/{name}-b"), Rights(0x2f))
        .map_err(e("closer b"))?;
    let r = ipc::recv(b, IDLE_NS).map_err(e("closer recv"))?;
    if r.msg.label != CLOSE {
        return fail("closer: command", r.msg);
    }
    res::close(a).map_err(e("closer close a"))?;
    res::close(b).map_err(e("closer close b"))
}

/// `icacheck frames CORE` (see the module's doc).
fn frames(core: usize) -> Check {
    let ep = ipc::open_endpoint("here/endpoint/icaframes", Rights(0x2f))
        .map_err(e("frames endpoint"))?;
    let me = sys::getpid().map_err(e("getpid"))?;
    let (server, sep) = start_server(core, &format!("icafsrv{}", me.0))?;
    let vs = res::open_vspace(
        &format!("here/vspace/icaf{}", me.0),
        None,
        Rights::OWNER_ALL,
    )
    .map_err(e("frames vspace"))?;
    let v = res::open_vregion("here/vregion/icaframes", SIZE, Rights::OWNER_ALL)
        .map_err(e("frames vregion"))?;
    res::attach(vs, v, AREA_AT, true).map_err(e("frames attach"))?;
    fill(AREA_AT, 0x51);
    let (bad, _) =
        ipc::call(sep, &ipc::with_ica(cmd(KEEP, 0x51, 0x52), v)).map_err(e("frames keep"))?;
    if bad != 0 {
        return fail("frames: the server did not read what was written", bad);
    }
    // The kernel test compares the frames now, then wakes us.
    ipc::recv(ep, IDLE_NS).map_err(e("frames: waiting for the kernel test"))?;
    let (bad, reply) = ipc::call(sep, &cmd(GIVE, 0, 0)).map_err(e("frames give"))?;
    if bad != 0 {
        return fail("frames give", bad);
    }
    let at = returned("frames: given back", &reply, v, 0x52)?;
    res::detach(vs, at).map_err(e("frames detach"))?;
    res::close(v).map_err(e("frames close vregion"))?;
    res::close(vs).map_err(e("frames close vspace"))?;
    stop_server(server, sep)?;
    res::close(ep).map_err(e("frames close endpoint"))
}
