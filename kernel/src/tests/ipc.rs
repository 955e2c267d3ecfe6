//! The request path (endpoints, call/recv/reply, send, submit/collect, timed and resource
//! operations) and threads with semaphores, driven from user space by `ipccheck` and
//! `lwpcheck` on this core and with their children on another core; afterwards every core
//! has the memory it had.

use super::{all_cores, frames_after, free_frames_per_core, run_program, run_to_end};
use crate::{kassert, ktest, percore, smp};
use alloc::format;

fn run_ipccheck(args: &[&str]) -> crate::ktest::TestResult {
    run_program("ipccheck", args, 120)
}

ktest! {
    /// The request path on one core, and with the other side on another core (RPCC); no
    /// memory is left behind by requests, results, queues or the children.
    fn request_path_end_to_end() -> TestResult {
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        let runs: &[&[&str]] = if smp::cores_planned() >= 2 { &[&[], &[other.as_str()]] } else { &[&[]] };
        // Warm-up: RPCC agents (a kernel stack each) and heaps reach their working size.
        for args in runs {
            run_ipccheck(args)?;
        }
        let before = free_frames_per_core()?;
        for args in runs {
            run_ipccheck(args)?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// Threads (light-weight processes) with their own FPU state, semaphores (a P from
    /// another core waits in the semaphore; one killed there takes no unit with it),
    /// messages from threads to their process's
    /// endpoint, join; and nothing left behind.
    fn threads_and_semaphores() -> TestResult {
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        // A waiter there killed while its P waits (only the per-core kernel queues a P
        // from another core in the semaphore).
        let mut across = alloc::vec![other.as_str()];
        if !crate::structure::biglock() {
            across.push("killed");
        }
        run_program("lwpcheck", &across, 120)?; // warm-up
        let before = free_frames_per_core()?;
        run_program("lwpcheck", &[], 120)?;
        run_program("lwpcheck", &across, 120)?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// Direct switches of the rendezvous fast path, all cores together: the general path's and
/// the register calls' handoffs.
fn direct_switches() -> u64 {
    all_cores(|s| &s.ipc_direct) + handoffs()
}

/// Of those, the register calls' handoffs, all cores together (counted apart by the way
/// their thread went on).
fn handoffs() -> u64 {
    all_cores(|s| &s.ipc_handoffs_switched) + handoffs_to_user()
}

/// Of those, the handoffs whose thread returned to user mode from the switch.
fn handoffs_to_user() -> u64 {
    all_cores(|s| &s.ipc_to_user)
}

ktest! {
    /// REPLY_RECV and the rendezvous fast path (`ipccheck fast`): answers go to the right
    /// caller, an unknown handle or a bad record changes nothing, a caller killed while its
    /// request is held, a timeout after an answer, an endpoint closed after the fast path's
    /// remembered checks named it. With the callers on this core the direct
    /// switch is taken (the `ipc_direct` counter rises by at least one per call); with them
    /// on another core it never is (the calls travel by RPCC). No memory is left behind.
    fn rendezvous_fast_path() -> TestResult {
        let here = format!("{}", percore::current_core());
        let before = direct_switches();
        run_ipccheck(&["fast", here.as_str()])?;
        let same_core = direct_switches() - before;
        // Two callers of 50 calls each; each call can be handed over both ways.
        kassert!(same_core >= 100, "direct switches with the callers on this core: {same_core}");
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        let cross = smp::cores_planned() >= 2;
        if cross {
            let before = direct_switches();
            run_ipccheck(&["fast", other.as_str()])?;
            let across = direct_switches() - before;
            kassert!(across == 0, "direct switches with the callers on another core: {across}");
        }
        // REPLY_RECV's timeout, the answer handed over by a direct switch to a caller that
        // then keeps the core busy: the server (above the caller) must not be woken by a
        // later tick than its deadline (regression: the direct switch did not arm the
        // core's timer).
        let s = run_to_end("ipccheck", &["kfast", here.as_str()], abi::Priority::Server, 120)?;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code == 0,
            "ipccheck kfast ended with {s:?} (its console lines say why)"
        );
        let before = free_frames_per_core()?;
        run_ipccheck(&["fast", here.as_str()])?;
        if cross {
            run_ipccheck(&["fast", other.as_str()])?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// The register calls (`ipccheck regs`: `CALL_REGS` and `REPLY_RECV_REGS`, mixed with
    /// `CALL`, `REPLY_RECV` and `REPLY`; errors; a server that ends holding a call; a caller
    /// killed while held). With the callers on this core the direct handoff is taken
    /// both ways for nearly every register round trip of part (m) (two callers, 50 calls
    /// each; a call may find the server busy with the memory caller): at least 150
    /// handoffs. With them on another core none is. No memory is left behind.
    fn register_calls() -> TestResult {
        let here = format!("{}", percore::current_core());
        let (before, before_to_user) = (handoffs(), handoffs_to_user());
        run_ipccheck(&["regs", here.as_str()])?;
        let same_core = handoffs() - before;
        kassert!(same_core >= 150, "register handoffs with the callers on this core: {same_core}");
        // Nearly all of them return the other thread to user mode from the switch (it has
        // nothing else to do on its way out); none under the big lock, whose release would
        // come before the switch saved this thread (a review found it did).
        let to_user = handoffs_to_user() - before_to_user;
        let expected = if crate::structure::biglock() { 0..=0 } else { 100..=same_core };
        kassert!(
            expected.contains(&to_user),
            "of {same_core} handoffs, {to_user} returned to user mode from the switch"
        );
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        let cross = smp::cores_planned() >= 2;
        if cross {
            let before = handoffs();
            run_ipccheck(&["regs", other.as_str()])?;
            let across = handoffs() - before;
            kassert!(across == 0, "register handoffs with the callers on another core: {across}");
            let to_user = handoffs_to_user() - before_to_user - to_user;
            kassert!(to_user == 0, "handoffs to user mode with the callers on another core: {to_user}");
        }
        let before = free_frames_per_core()?;
        run_ipccheck(&["regs", here.as_str()])?;
        if cross {
            run_ipccheck(&["regs", other.as_str()])?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// P0's IPC count: every core's rendezvous message counters, added up.
fn messages() -> [u64; abi::IPC_COUNTERS] {
    let mut sum = [0; abi::IPC_COUNTERS];
    for c in 0..smp::cores_planned() {
        for (s, n) in sum.iter_mut().zip(&percore::of(c).stats.ipc_messages) {
            *s += n.load(core::sync::atomic::Ordering::Relaxed);
        }
    }
    sum
}

ktest! {
    /// The rendezvous message counters (`CoreStats::ipc_messages`, what `bench agora`
    /// reads through `CORES`): `ipccheck fast`'s 100 calls count at least 100 requests and
    /// 100 answers; with the callers on this core none crosses, with them on another core
    /// at least 100 of each do.
    fn rendezvous_messages_are_counted() -> TestResult {
        use abi::{IPC_REPLIES, IPC_REPLIES_CROSS, IPC_REQUESTS, IPC_REQUESTS_CROSS};
        let here = format!("{}", percore::current_core());
        let before = messages();
        run_ipccheck(&["fast", here.as_str()])?;
        let after = messages();
        let d = |i: usize| after[i] - before[i];
        kassert!(
            d(IPC_REQUESTS) >= 100 && d(IPC_REPLIES) >= 100,
            "requests {} and answers {} for 100 calls on one core",
            d(IPC_REQUESTS),
            d(IPC_REPLIES)
        );
        kassert!(
            d(IPC_REQUESTS_CROSS) == 0 && d(IPC_REPLIES_CROSS) == 0,
            "cross-core messages counted on one core: {after:?} after {before:?}"
        );
        if smp::cores_planned() >= 2 {
            let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
            let before = messages();
            run_ipccheck(&["fast", other.as_str()])?;
            let after = messages();
            let d = |i: usize| after[i] - before[i];
            kassert!(
                d(IPC_REQUESTS_CROSS) >= 100 && d(IPC_REPLIES_CROSS) >= 100,
                "cross-core requests {} and answers {} for 100 calls from another core",
                d(IPC_REQUESTS_CROSS),
                d(IPC_REPLIES_CROSS)
            );
        }
        Ok(())
    }
}

ktest! {
    /// A thread waiting in `RECV` is not woken by its process's results (`ipccheck quiet`
    /// checks it: the core's request-path wakes while it collects are at most one per
    /// collect that waited; regression: each result woke the receiver too, which looked,
    /// found no request and blocked again, two context switches for nothing). Here: the
    /// wakes around the whole run are counted by the kernel itself as a check on the
    /// program's reading, at most one per result and one for the request that ends the
    /// receiver's wait.
    fn recv_not_woken_by_results() -> TestResult {
        let wakes = || percore::this().stats.ipc_wakes.load(core::sync::atomic::Ordering::Relaxed);
        let before = wakes();
        run_ipccheck(&["quiet"])?;
        let woken = wakes() - before;
        // 20 results and one request: 21 at most; with the receiver woken per result, the
        // program itself fails.
        kassert!(woken <= 21, "request-path wakes during ipccheck quiet: {woken} (at most 21)");
        Ok(())
    }
}
