//! Init keeps a program running (the shell, in a boot with one): started again when it is
//! killed, and given up after failed starts in a row. The tests keep `crash read-console`
//! (it waits for console input as the shell does at its prompt; nothing types in a test
//! boot) and `nop` (ends before it ever asks for input: every start fails).

use super::{frames_after, free_frames_per_core};
use crate::init::{self, MAX_FAILURES};
use crate::proc::{self, sched};
use crate::{kassert, kskip, ktest};
use abi::Priority;
use alloc::format;

/// Stop keeping what this core keeps, end the running instance and wait until the init
/// thread has gone (a failing test leaves nothing behind; 60 s only catches a hang).
fn stop_keeping() {
    if let Some(pid) = init::stop() {
        let _ = proc::end_by_kill(pid);
    }
    sched::run_until(60_000_000_000, || !init::status().keeping);
}

ktest! {
    /// The kept program is killed after it asked for console input: init starts a new
    /// one (a new pid, up again), counts a restart and no failure; once init lets go,
    /// every frame is back.
    fn a_killed_program_is_started_again() -> TestResult {
        if init::status().keeping {
            kskip!("this core keeps a program already (a shell)");
        }
        let before = free_frames_per_core()?;
        let outcome = (|| {
            let first = init::keep("crash", &["read-console"], Priority::App).map_err(|e| format!("keep: {e}"))?;
            let up = |pid| {
                let s = init::status();
                s.pid == Some(pid) && s.up
            };
            kassert!(sched::run_until(60_000_000_000, || up(first)), "crash read-console {first} never read the console: {:?}", init::status());
            proc::end_by_kill(first).map_err(|e| format!("kill {first}: {e}"))?;
            let restarted = || init::status().pid.is_some_and(|p| p != first && up(p));
            kassert!(sched::run_until(60_000_000_000, restarted), "no new instance came up after {first} was killed: {:?}", init::status());
            let s = init::status();
            kassert!(s.restarts == 1 && s.failures == 0 && !s.gave_up, "after one kill: {s:?}");
            kassert!(proc::has_ended(first), "the killed instance {first} is still there");
            Ok(())
        })();
        stop_keeping();
        outcome?;
        let after = frames_after(&before)?;
        kassert!(after == before, "free frames per core {before:?} before, {after:?} after");
        Ok(())
    }
}

ktest! {
    /// A program that ends before it ever asks for console input fails each start: init
    /// starts it again until MAX_FAILURES starts in a row failed, then gives up and ends.
    fn failed_starts_make_init_give_up() -> TestResult {
        if init::status().keeping {
            kskip!("this core keeps a program already (a shell)");
        }
        let before = free_frames_per_core()?;
        let first = match init::keep("nop", &[], Priority::App) {
            Ok(pid) => pid,
            Err(e) => return Err(format!("keep: {e}")),
        };
        let gave_up = sched::run_until(60_000_000_000, || {
            let s = init::status();
            s.gave_up && !s.keeping
        });
        let s = init::status();
        if !gave_up {
            stop_keeping();
        }
        kassert!(gave_up, "init did not give up on nop {first}: {s:?}");
        kassert!(s.restarts == u64::from(MAX_FAILURES) - 1, "{} restarts before giving up (expected {}): {s:?}", s.restarts, MAX_FAILURES - 1);
        kassert!(proc::has_ended(first) && s.pid.is_none(), "an instance is left: {s:?}");
        let after = frames_after(&before)?;
        kassert!(after == before, "free frames per core {before:?} before, {after:?} after");
        Ok(())
    }
}
