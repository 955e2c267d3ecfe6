//! The system-call fuzzer (`user/fuzz`) against the whole kernel, on every core at once.
//!
//! `fuzz all 100000` starts one fuzzer per core, each making 100,000 calls with random
//! numbers and hostile arguments (kernel-half, non-canonical, unaligned and huge pointers
//! and lengths, random and recently returned ids and pids), and closes what it opened. The
//! kernel must answer every call (the run ends), every fuzzer must exit 0 (it could close
//! everything it opened), and every core's free frames must come back to where they were.

use crate::mm::frames;
use crate::proc::{self, sched, TEST_PARENT};
use crate::{kassert, ktest, percore, smp};
use abi::Priority;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

fn drain_and_count(_: u64) -> u64 {
    frames::drain_remote();
    frames::counts(percore::current_core()).0
}

/// Free frames of every core, each counted on its own core.
fn free_frames() -> Result<Vec<u64>, String> {
    (0..smp::cores_planned())
        .map(|c| {
            smp::call_on(c, drain_and_count, 0, 10_000_000_000)
                .map_err(|e| format!("counting frames on core {c}: {e:?}"))
        })
        .collect()
}

/// Run `fuzz all CALLS` from this core and wait for it (the bound only catches a hang).
fn fuzz_all(calls: &str) -> Result<(), String> {
    let pid = proc::spawn("fuzz", &["all", calls], Priority::App, TEST_PARENT)
        .map_err(|e| format!("spawn fuzz: {e}"))?;
    if !sched::run_until(170_000_000_000, || proc::has_ended(pid)) {
        let _ = proc::kill(pid);
        sched::run_until(60_000_000_000, || proc::has_ended(pid));
        let _ = proc::take_status(pid);
        return Err(format!("fuzz all {calls} did not end within 170 s"));
    }
    let s = proc::take_status(pid).ok_or("fuzz ended without a status")?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "fuzz all {calls} ended with {s:?} (its console lines say why)"
    );
    Ok(())
}

ktest! {
    /// 100,000 random system calls on every core at once: the kernel answers them all, and
    /// afterwards every core has the free frames it had before.
    fn syscall_fuzzer_on_every_core() -> TestResult {
        // A short run first, so that per-core tables, heaps and RPCC agents reach the size
        // the long run needs (growth that stays is measured by the memory tests).
        fuzz_all("3000")?;
        let before = free_frames()?;
        fuzz_all("100000")?;
        sched::run_until(30_000_000_000, || free_frames().is_ok_and(|now| now == before));
        let after = free_frames()?;
        let lost: Vec<String> = before
            .iter()
            .zip(&after)
            .enumerate()
            .filter(|(_, (b, a))| b != a)
            .map(|(c, (b, a))| format!("core {c}: {b} -> {a}"))
            .collect();
        kassert!(lost.is_empty(), "free frames changed: {}", lost.join(", "));
        Ok(())
    }
}
