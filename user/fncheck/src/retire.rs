//! `fncheck retire-client` and its two servers: a retiring server killed while it hands
//! its queue over (issue 14's replacement; a regression test, driven by the kernel test
//! `fnid::retiring_server_killed_while_forwarding_loses_nothing`, which does the kill).
//!
//! The old server (`retire-old`, function `fnchk.ro`) holds one request and waits on a
//! second endpoint (`fnchk.rgo`) while 63 more queue for it; the new server (`retire-new`,
//! its endpoint also registered as `fnchk.rt`) asks to take `fnchk.ro` over and has its own
//! queue filled (64 requests) before the old one may go on. Told to go, the old server gets
//! the retire notice, answers what it holds `Again`, and its thread hands the 63 over to a
//! full queue: it waits for room between tries (20 ms a request). The kernel test kills it
//! in such a wait. Every request must still be answered (any status): the request being
//! handed over used to leave with the killed thread, and its caller waited forever. The
//! last request to the old server passes a vregion (an ICA) marked `CLOSE_WHEN_DETACHED`:
//! once every request is answered it must be attached nowhere, and so closed (the queue
//! the killed server was handing over used to keep its pass open forever).
//!
//! `fncheck retire-client CORE` starts the new server on CORE, another core than the
//! client's and the old server's: the old server's thread then sends each request there
//! through RPCC and waits for the answer (`Busy`), and the kernel test
//! `fnid::retiring_server_killed_while_sending_to_another_core_loses_nothing` kills it in
//! that wait (a request on its way: the kill used to end the thread holding it, and its
//! caller waited forever).

use super::{fail, msg, Check, HANG_NS};
use alloc::format;
use alloc::vec::Vec;
use ulib::abi::fnid::{FnId, RETIRE_NOTICE};
use ulib::abi::ipc as api;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Error, Priority};
use ulib::{fnid, ipc, println, res, sys};

/// Requests queued at the old server (its process may queue 64, one is the go message).
const AT_OLD: u64 = 63;
/// Requests that fill the new server's queue.
const AT_NEW: u64 = 64;
/// Where the client maps the vregion it passes (outside the ICA window).
const AREA_AT: u64 = 0x0000_5200_0000_0000;

fn endpoint(name: &str, fn_name: &str) -> Result<(ResId, FnId), alloc::string::String> {
    let ep = ipc::open_endpoint(name, Rights(0x2f)).map_err(|e| format!("{name}: {e}"))?;
    let id = fnid::register(fn_name, ep).map_err(|e| format!("register {fn_name}: {e}"))?;
    Ok((ep, id))
}

fn submit_call(id: FnId, tag: u64) -> Result<u64, alloc::string::String> {
    submit_msg(id, tag, msg(0, tag))
}

fn submit_msg(id: FnId, tag: u64, m: api::Msg) -> Result<u64, alloc::string::String> {
    let mut sub = ipc::op(api::SUBMIT_CALL, id.0, [0; 4]);
    sub.msg = m;
    ipc::submit(&sub).map_err(|e| format!("submit {tag}: {e}"))
}

/// `fncheck retire-old`: see the module docs.
pub fn old() -> Check {
    let (ep, _) = endpoint("here/endpoint/fnchk-ro", "fnchk.ro")?;
    let (go, _) = endpoint("here/endpoint/fnchk-rgo", "fnchk.rgo")?;
    let first = ipc::recv(ep, u64::MAX).map_err(|e| format!("old: first receive: {e}"))?;
    ipc::recv(go, u64::MAX).map_err(|e| format!("old: go: {e}"))?;
    let mut held = Vec::from([first.request]);
    loop {
        let r = ipc::recv(ep, u64::MAX).map_err(|e| format!("old: receive: {e}"))?;
        if r.msg.label != RETIRE_NOTICE {
            // Not asked yet: held too, answered with the first.
            held.push(r.request);
            continue;
        }
        for h in held.drain(..) {
            ipc::reply_error(h, Error::Again).map_err(|e| format!("old: answer {h}: {e}"))?;
        }
        // Retired in this receive (holding none): it returns only if the new server died.
        let r = ipc::recv(ep, u64::MAX);
        return fail(
            "old: still serving after the retire notice",
            r.map(|r| r.msg),
        );
    }
}

/// `fncheck retire-new`: see the module docs. Ends whatever its takeover's outcome: the
/// requests queued for it are answered `Gone` by its end.
pub fn new() -> Check {
    let (ep, _) = endpoint("here/endpoint/fnchk-rt", "fnchk.rt")?;
    let old = fnid::lookup("fnchk.ro").map_err(|e| format!("new: lookup: {e}"))?;
    let r = fnid::takeover(old, ep, HANG_NS);
    println!("fncheck retire-new: takeover: {r:?}");
    Ok(())
}

/// `fncheck retire-client [CORE]`: see the module docs; the new server on CORE (default:
/// this core's), so that the old one hands its queue over through RPCC.
pub fn client(core: Option<&str>) -> Check {
    let here = sys::core().map_err(|e| format!("core: {e}"))?;
    let there = match core {
        None => here,
        Some(c) => c
            .parse()
            .map_err(|_| format!("retire-client: bad core {c}"))?,
    };
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let vs = res::open_vspace(&format!("here/vspace/rcl{}", me.0), None, Rights::OWNER_ALL)
        .map_err(|e| format!("vspace: {e}"))?;
    let mut new = None;
    let mut old = None;
    let r = vregion(vs, me).and_then(|v| {
        old = Some(
            sys::spawn_on("fncheck", &["retire-old"], Priority::App, here)
                .map_err(|e| format!("spawn old: {e}"))?,
        );
        drive(there, &mut new, v)
    });
    let servers = [old, new].into_iter().flatten();
    if r.is_err() {
        // A failure leaves nothing behind: the servers may wait for requests forever.
        for pid in servers.clone() {
            let _ = sys::kill(pid);
        }
    }
    // The servers' ends (the old one killed by the test, the new one exits), then the names.
    let ended = servers
        .map(|pid| sys::wait(Some(pid)).map(|_| ()))
        .collect::<Result<Vec<()>, Error>>();
    for name in ["fnchk.ro", "fnchk.rgo", "fnchk.rt"] {
        if let Ok(id) = fnid::lookup(name) {
            let _ = fnid::unregister(id);
        }
    }
    // Still here if it was never passed (a failure first): detached, it closes (marked).
    let _ = res::detach(vs, AREA_AT);
    let _ = res::close(vs);
    r?;
    ended.map_err(|e| format!("waiting for the servers: {e}"))?;
    println!("fncheck retire: every request answered");
    Ok(())
}

/// The vregion to pass: one page at [`AREA_AT`], closed by the kernel once attached
/// nowhere.
fn vregion(vs: ResId, me: ulib::abi::Pid) -> Result<ResId, alloc::string::String> {
    let name = format!("here/vregion/rcl{}", me.0);
    let v =
        res::open_vregion(&name, 4096, Rights::OWNER_ALL).map_err(|e| format!("vregion: {e}"))?;
    if let Err(e) = res::attach(vs, v, AREA_AT, true) {
        let _ = res::close(v);
        return Err(format!("attach: {e}"));
    }
    if let Err(e) = res::close_when_detached(v) {
        let _ = res::detach(vs, AREA_AT);
        let _ = res::close(v);
        return Err(format!("close when detached: {e}"));
    }
    Ok(v)
}

/// The client's part: the queues set up, the old server let go, every answer collected.
/// The new server (on core `there`) goes to `new` once it is started.
fn drive(there: usize, new: &mut Option<ulib::abi::Pid>, v: ResId) -> Check {
    let ro = fnid::wait("fnchk.ro", HANG_NS).map_err(|e| format!("fnchk.ro: {e}"))?;
    let go = fnid::wait("fnchk.rgo", HANG_NS).map_err(|e| format!("fnchk.rgo: {e}"))?;
    let first = submit_call(ro, 9_999)?;
    super::until("the old server holds the first request", || {
        fnid::info(ro).is_ok_and(|i| i.served >= 1)
    })?;
    let mut tickets = Vec::new();
    for tag in 0..AT_OLD - 1 {
        tickets.push((tag, submit_call(ro, tag)?));
    }
    let last = AT_OLD - 1;
    tickets.push((last, submit_msg(ro, last, ipc::with_ica(msg(0, last), v))?));
    *new = Some(
        sys::spawn_on("fncheck", &["retire-new"], Priority::App, there)
            .map_err(|e| format!("spawn new: {e}"))?,
    );
    let rt = fnid::wait("fnchk.rt", HANG_NS).map_err(|e| format!("fnchk.rt: {e}"))?;
    for tag in 100..100 + AT_NEW {
        tickets.push((tag, submit_call(rt, tag)?));
    }
    ipc::send(go.as_target(), &msg(0, 0)).map_err(|e| format!("go: {e}"))?;
    match ipc::collect(first, HANG_NS).map(|c| ipc::result(&c)) {
        Ok(Err(Error::Again)) => {}
        other => return fail("the held request", other),
    }
    // The kernel test kills the old server while it waits for room; every request is
    // answered (by the new server's end, or the old one's: `Gone`).
    let mut statuses = Vec::new();
    for (tag, ticket) in tickets {
        match ipc::collect(ticket, HANG_NS) {
            Ok(c) => statuses.push(c.status),
            Err(e) => return Err(format!("request {tag} never answered ({e})")),
        }
    }
    // Attached nowhere now, so closed (it was marked).
    if let Ok(info) = res::info(v) {
        return fail(
            "the vregion passed to the old server, still attached somewhere",
            info.detail,
        );
    }
    let gone = statuses
        .iter()
        .filter(|&&s| s == Error::Gone as u64)
        .count();
    println!(
        "fncheck retire: {} requests answered, {gone} of them Gone",
        statuses.len()
    );
    Ok(())
}
