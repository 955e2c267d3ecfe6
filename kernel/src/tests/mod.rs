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
