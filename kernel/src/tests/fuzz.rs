//! The system-call fuzzer (`user/fuzz`) against the whole kernel, on every core at once.
//!
//! `fuzz all 100000` starts one fuzzer per core, each making 100,000 calls with random
//! numbers and hostile arguments (kernel-half, non-canonical, unaligned and huge pointers
//! and lengths, random and recently returned ids and pids), and closes what it opened. The
//! kernel must answer every call (the run ends), every fuzzer must exit 0 (it could close
//! everything it opened), and every core's free frames must come back to where they were.

use super::{frames_after, free_frames_per_core, run_program};
use crate::{kassert, ktest};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Run `fuzz all CALLS` from this core (the bound only catches a hang).
fn fuzz_all(calls: &str) -> crate::ktest::TestResult {
    run_program("fuzz", &["all", calls], 600)
}

ktest! {
    /// 100,000 random system calls on every core at once: the kernel answers them all, and
    /// afterwards every core has the free frames it had before.
    fn syscall_fuzzer_on_every_core() -> TestResult {
        // A short run first, so that per-core tables, heaps and RPCC agents reach the size
        // the long run needs (growth that stays is measured by the memory tests).
        fuzz_all("3000")?;
        let before = free_frames_per_core()?;
        fuzz_all("100000")?;
        let after = frames_after(&before)?;
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
