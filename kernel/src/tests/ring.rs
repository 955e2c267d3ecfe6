//! Submission and completion rings (`RING_SETUP`, `ENTER`), driven from user space by
//! `ringcheck` (good and misbehaving use, resources on this core and on another), and a ring
//! whose process is killed while it waits with requests in flight; afterwards every core
//! has the memory it had (the ring's pinned frames went home).

use super::{end_and_reap, frames_after, free_frames_per_core, run_program, until_asleep};
use crate::{kassert, ktest, percore, smp};
use alloc::format;

ktest! {
    /// `ringcheck` on this core and with its resources on another core; no memory is left
    /// behind by the rings, their requests or their completions.
    fn rings_end_to_end() -> TestResult {
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        let runs: &[&[&str]] = if smp::cores_planned() >= 2 { &[&[], &[other.as_str()]] } else { &[&[]] };
        // Warm-up: RPCC agents (a kernel stack each) and heaps reach their working size.
        for args in runs {
            run_program("ringcheck", args, 300)?;
        }
        let before = free_frames_per_core()?;
        for args in runs {
            run_program("ringcheck", args, 300)?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// A process killed while it waits in `ENTER` with timers in flight: its ring's frames
    /// and its requests go with it.
    fn ring_goes_with_its_process() -> TestResult {
        use crate::proc::{self, TEST_PARENT};
        run_program("nop", &[], 60)?; // warm-up: the program cache and heaps
        let before = free_frames_per_core()?;
        let pid = proc::spawn("ringcheck", &["hold"], abi::Priority::App, TEST_PARENT)
            .map_err(|e| format!("spawn: {e}"))?;
        let asleep = until_asleep(pid, "ringcheck hold", 120);
        end_and_reap(pid);
        asleep?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}
