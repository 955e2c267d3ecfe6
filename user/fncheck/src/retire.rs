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
//! handed over used to leave with the killed thread, and its caller waited forever.

use super::{fail, msg, Check, HANG_NS};
use alloc::format;
use alloc::vec::Vec;
use ulib::abi::fnid::{FnId, RETIRE_NOTICE};
use ulib::abi::ipc as api;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Error, Priority};
use ulib::{fnid, ipc, println, sys};

/// Requests queued at the old server (its process may queue 64, one is the go message).
const AT_OLD: u64 = 63;
/// Requests that fill the new server's queue.
const AT_NEW: u64 = 64;

fn endpoint(name: &str, fn_name: &str) -> Result<(ResId, FnId), alloc::string::String> {
    let ep = ipc::open_endpoint(name, Rights(0x2f)).map_err(|e| format!("{name}: {e}"))?;
    let id = fnid::register(fn_name, ep).map_err(|e| format!("register {fn_name}: {e}"))?;
    Ok((ep, id))
}

fn submit_call(id: FnId, tag: u64) -> Result<u64, alloc::string::String> {
    let mut sub = ipc::op(api::SUBMIT_CALL, id.0, [0; 4]);
    sub.msg = msg(0, tag);
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

/// `fncheck retire-client`: see the module docs.
pub fn client() -> Check {
    let here = sys::core().map_err(|e| format!("core: {e}"))?;
    let old = sys::spawn_on("fncheck", &["retire-old"], Priority::App, here)
        .map_err(|e| format!("spawn old: {e}"))?;
    let r = drive(here);
    // The servers' ends (the old one killed by the test, the new one exits), then the names.
    let ended = [Some(old), r.as_ref().ok().copied()]
        .into_iter()
        .flatten()
        .map(|pid| sys::wait(Some(pid)).map(|_| ()))
        .collect::<Result<Vec<()>, Error>>();
    for name in ["fnchk.ro", "fnchk.rgo", "fnchk.rt"] {
        if let Ok(id) = fnid::lookup(name) {
            let _ = fnid::unregister(id);
        }
    }
    r?;
    ended.map_err(|e| format!("waiting for the servers: {e}"))?;
    println!("fncheck retire: every request answered");
    Ok(())
}

/// The client's part: the queues set up, the old server let go, every answer collected.
/// Returns the new server's pid.
fn drive(here: usize) -> Result<ulib::abi::Pid, alloc::string::String> {
    let ro = fnid::wait("fnchk.ro", HANG_NS).map_err(|e| format!("fnchk.ro: {e}"))?;
    let go = fnid::wait("fnchk.rgo", HANG_NS).map_err(|e| format!("fnchk.rgo: {e}"))?;
    let first = submit_call(ro, 9_999)?;
    super::until("the old server holds the first request", || {
        fnid::info(ro).is_ok_and(|i| i.served >= 1)
    })?;
    let mut tickets = Vec::new();
    for tag in 0..AT_OLD {
        tickets.push((tag, submit_call(ro, tag)?));
    }
    let new = sys::spawn_on("fncheck", &["retire-new"], Priority::App, here)
        .map_err(|e| format!("spawn new: {e}"))?;
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
    let gone = statuses
        .iter()
        .filter(|&&s| s == Error::Gone as u64)
        .count();
    println!(
        "fncheck retire: {} requests answered, {gone} of them Gone",
        statuses.len()
    );
    Ok(new)
}
