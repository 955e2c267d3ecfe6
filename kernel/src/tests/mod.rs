//! The in-kernel tests of the platform layer (see [`crate::ktest`] for the framework).
//!
//! Each file groups the tests of one subsystem; `faults` holds the expected-fault tests,
//! which xtask runs one per boot.

mod faults;
mod fuzz;
mod interrupts;
mod ipc;
mod memory;
mod modes;
mod platform;
mod process;
mod resources;
mod rpcc;
mod usermem;

use crate::smp;

/// Run `f` on every online core and collect failures as one message.
pub(crate) fn on_every_core(f: fn(u64) -> u64, what: &str) -> crate::ktest::TestResult {
    let mut failed = alloc::vec::Vec::new();
    for core in 0..smp::cores_planned() {
        match smp::call_on(core, f, core as u64, 5_000_000_000) {
            Ok(0) => {}
            Ok(code) => failed.push(alloc::format!(
                "core {core}: {what} failed with code {code:#x}"
            )),
            Err(e) => failed.push(alloc::format!("core {core}: {e:?}")),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// This core's free frames, after taking back those other cores freed (for `call_on`).
pub(crate) fn free_frames_here(_: u64) -> u64 {
    crate::mm::frames::drain_remote();
    crate::mm::frames::counts(crate::percore::current_core()).0
}

/// Free frames of every core, each counted on its own core.
pub(crate) fn free_frames_per_core() -> Result<alloc::vec::Vec<u64>, alloc::string::String> {
    (0..smp::cores_planned())
        .map(|c| {
            smp::call_on(c, free_frames_here, 0, 10_000_000_000)
                .map_err(|e| alloc::format!("counting frames on core {c}: {e:?}"))
        })
        .collect()
}

/// Wait until every core has the free frames of `before` again (frames freed elsewhere
/// come home when their core next idles; 30 s only catches a hang), and return the
/// counts then, for the caller to compare.
pub(crate) fn frames_after(before: &[u64]) -> Result<alloc::vec::Vec<u64>, alloc::string::String> {
    crate::proc::sched::run_until(30_000_000_000, || {
        free_frames_per_core().is_ok_and(|now| now == before)
    });
    free_frames_per_core()
}

/// Run program `name` with `args` on this core to its end and check it exited 0. The
/// bound (`limit_s`) only catches a hang; a program still running then is killed and
/// reaped, so a failure leaves nothing behind.
pub(crate) fn run_program(name: &str, args: &[&str], limit_s: u64) -> crate::ktest::TestResult {
    use crate::proc::{self, sched, TEST_PARENT};
    let pid = proc::spawn(name, args, abi::Priority::App, TEST_PARENT)
        .map_err(|e| alloc::format!("spawn {name}: {e}"))?;
    if !sched::run_until(limit_s * 1_000_000_000, || proc::has_ended(pid)) {
        let _ = proc::end_by_kill(pid);
        sched::run_until(60_000_000_000, || proc::has_ended(pid));
        let _ = proc::take_status(pid);
        return Err(alloc::format!(
            "{name} {args:?} did not finish within {limit_s} s"
        ));
    }
    let s = proc::take_status(pid).ok_or("ended without a status")?;
    crate::kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "{name} {args:?} ended with {s:?} (its console lines say why)"
    );
    Ok(())
}
