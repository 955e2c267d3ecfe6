//! The request path (endpoints, call/recv/reply, send, submit/collect, timed and resource
//! operations) and threads with semaphores, driven from user space by `ipccheck` and
//! `lwpcheck` on this core and with their children on another core; afterwards every core
//! has the memory it had.

use crate::proc::{self, sched, TEST_PARENT};
use crate::{kassert, ktest, percore, smp};
use abi::Priority;
use alloc::format;
use alloc::vec::Vec;

fn free_frames_here(_: u64) -> u64 {
    crate::mm::frames::drain_remote();
    crate::mm::frames::counts(percore::current_core()).0
}

fn frames() -> Result<Vec<u64>, alloc::string::String> {
    (0..smp::cores_planned())
        .map(|c| {
            smp::call_on(c, free_frames_here, 0, 5_000_000_000)
                .map_err(|e| format!("core {c}: {e:?}"))
        })
        .collect()
}

fn run_program(name: &str, args: &[&str]) -> crate::ktest::TestResult {
    let pid = proc::spawn(name, args, Priority::App, TEST_PARENT)
        .map_err(|e| format!("spawn {name}: {e}"))?;
    if !sched::run_until(60_000_000_000, || proc::has_ended(pid)) {
        let _ = proc::end_by_kill(pid);
        let _ = proc::take_status(pid);
        return Err(format!("{name} did not finish within 60 s"));
    }
    let s = proc::take_status(pid).ok_or("ended without a status")?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "{name} {args:?} ended with {s:?} (its console line says why)"
    );
    Ok(())
}

fn run_ipccheck(args: &[&str]) -> crate::ktest::TestResult {
    run_program("ipccheck", args)
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
        let before = frames()?;
        for args in runs {
            run_ipccheck(args)?;
        }
        sched::run_until(30_000_000, || false);
        let after = frames()?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// Threads (light-weight processes) with their own FPU state, semaphores (a P from
    /// another core waits in the semaphore), messages from threads to their process's
    /// endpoint, join; and nothing left behind.
    fn threads_and_semaphores() -> TestResult {
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        run_program("lwpcheck", &[other.as_str()])?; // warm-up
        let before = frames()?;
        run_program("lwpcheck", &[])?;
        run_program("lwpcheck", &[other.as_str()])?;
        sched::run_until(30_000_000, || false);
        let after = frames()?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}
