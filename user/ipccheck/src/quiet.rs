//! `ipccheck quiet`, part (r): a thread waiting in `RECV` is not woken by the results of
//! its process's own requests. The main thread collects [`QUIET_TIMERS`] timed operations
//! one at a time while another thread of the process waits in `RECV`; a one-way send then
//! ends its wait. Around the collecting, the core's request-path wakes
//! (`CoreInfo::ipc_wakes`) may be at most one per collect that really waited (a look
//! without waiting found no result first): a result wakes its collector, not the
//! receiver (regression: every result woke the receiver too, which looked, found no
//! request and blocked again, two context switches for nothing, ten times per datagram
//! echoed by `netd`). Judged against the waits counted, not against the number of
//! timers: on a busy host a timer may end before its collect begins, and then nobody
//! waits and nobody is woken.

use crate::{fail, msg, Check};
use alloc::format;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{ipc, println, res, sys, thread};

/// Timed operations collected while the receiver waits (the kernel test's bound is
/// derived from it).
pub const QUIET_TIMERS: u64 = 20;
/// The label of the send that ends the receiver's wait.
const DONE: u64 = 77;

pub fn quiet() -> Check {
    let ep = ipc::open_endpoint("here/endpoint/quiet", Rights(0x2f))
        .map_err(|e| format!("(r) endpoint: {e}"))?;
    let r = collect_beside_receiver(ep);
    res::close(ep).map_err(|e| format!("(r) close endpoint: {e}"))?;
    r
}

fn collect_beside_receiver(ep: ResId) -> Check {
    let receiver = thread::spawn(receive_once, ep.0).map_err(|e| format!("(r) thread: {e}"))?;
    // This thread sleeps, so the core runs the receiver into its RECV.
    sys::sleep_ns(20_000_000).map_err(|e| format!("(r) sleep: {e}"))?;
    let wakes = || sys::ipc_wakes().map_err(|e| format!("(r) ipc wakes (CORES): {e}"));
    let before = wakes()?;
    let mut waited = 0;
    for i in 0..QUIET_TIMERS {
        let ticket =
            ipc::submit(&ipc::timer(1_000_000)).map_err(|e| format!("(r) timer {i}: {e}"))?;
        let c = match ipc::collect(ticket, 0) {
            Ok(c) => c,
            Err(Error::TimedOut) => {
                waited += 1;
                ipc::collect(ticket, u64::MAX).map_err(|e| format!("(r) collect {i}: {e}"))?
            }
            Err(e) => return fail("(r) a look at timer's result", (i, e)),
        };
        ipc::result(&c).map_err(|e| format!("(r) timer {i} ended: {e}"))?;
    }
    let woken = wakes()? - before;
    println!("ipccheck: (r) {woken} request-path wakes for {waited} collects that waited");
    if woken > waited {
        return fail(
            "(r) request-path wakes while collecting beside a receiver (at most one per \
             collect that waited)",
            (woken, waited),
        );
    }
    ipc::send(ep, &msg(DONE, 0)).map_err(|e| format!("(r) send: {e}"))?;
    match receiver.join() {
        Ok(DONE) => Ok(()),
        other => fail("(r) the receiver's RECV", other),
    }
}

/// The receiving thread: the label of the first request on `ep` (or 1000 + an error).
fn receive_once(ep: u64) -> u64 {
    match ipc::recv(ResId(ep), 60_000_000_000) {
        Ok(r) => r.msg.label,
        Err(e) => 1000 + e as u64,
    }
}
