//! The in-kernel tests of the platform layer (see [`crate::ktest`] for the framework).
//!
//! Each file groups the tests of one subsystem; `faults` holds the expected-fault tests,
//! which xtask runs one per boot.

mod dev;
mod family;
mod faults;
mod fnid;
mod fuzz;
mod heap;
mod ica;
mod ids;
mod init;
mod interrupts;
mod ipc;
mod kv;
mod limits;
mod memory;
mod migrate;
mod modes;
mod net;
mod pipe;
mod platform;
mod privilege;
mod process;
mod replace;
mod resources;
mod ring;
mod rpcc;
mod rpcc_fast;
mod timers;
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

/// This core's frames that nothing outside its kernel heap uses: free in the pool or held
/// by the heap, after taking back those other cores freed (for `call_on`). The heap claims
/// frames as it grows and gives spare ones back when the core idles, so leak checks count
/// both and compare the heap's own use apart ([`heap_used_here`]).
pub(crate) fn free_frames_here(_: u64) -> u64 {
    crate::mm::frames::drain_remote();
    let held = crate::percore::this()
        .mem
        .heap_bytes
        .load(core::sync::atomic::Ordering::Relaxed);
    // Frames the heap and the stack slot's page tables hold are working size, kept for
    // reuse: counted as free, so that a program that needs one more stack than any before
    // it (a new page table) is not taken for a leak.
    crate::mm::frames::counts(crate::percore::current_core()).0
        + held / ::frames::FRAME_SIZE
        + crate::mm::kstack::table_frames()
}

/// Bytes of this core's heap in use (blocks other cores freed taken back first).
pub(crate) fn heap_used_here(_: u64) -> u64 {
    crate::mm::heap::used_bytes()
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

/// Is process `pid` (of this core) asleep (blocked in a system call)?
pub(crate) fn is_asleep(pid: abi::Pid) -> bool {
    crate::proc::infos()
        .iter()
        .any(|p| p.pid == pid && p.state == abi::STATE_BLOCKED)
}

/// Run this core's threads until process `pid` (`name` in messages) sleeps, e.g. holding
/// what it took: the event itself, not an amount of time (on a busy host that can take
/// many seconds; `limit_s` only catches a hang). Fails if it ends instead.
pub(crate) fn until_asleep(pid: abi::Pid, name: &str, limit_s: u64) -> crate::ktest::TestResult {
    use crate::proc::{self, sched};
    let hung = !sched::run_until(limit_s * 1_000_000_000, || {
        is_asleep(pid) || proc::has_ended(pid)
    });
    crate::kassert!(
        !hung,
        "{name} {pid} neither went to sleep nor ended within {limit_s} s"
    );
    crate::kassert!(
        !proc::has_ended(pid),
        "{name} {pid} ended instead of going to sleep"
    );
    Ok(())
}

/// A per-core count of `CoreStats`, all cores together.
pub(crate) fn all_cores(
    count: fn(&crate::percore::CoreStats) -> &core::sync::atomic::AtomicU64,
) -> u64 {
    (0..crate::smp::cores_planned())
        .map(|c| count(&crate::percore::of(c).stats).load(core::sync::atomic::Ordering::Relaxed))
        .sum()
}

/// End process `pid` (of this core) if it still runs and collect it, so that a test that
/// fails leaves nothing behind (60 s only catches a hang).
pub(crate) fn end_and_reap(pid: abi::Pid) {
    use crate::proc::{self, sched};
    let _ = proc::end_by_kill(pid);
    sched::run_until(60_000_000_000, || proc::has_ended(pid));
    let _ = proc::take_status(pid);
}

/// Start program `name` with `args` on this core and run its threads until it ends; its
/// status. The bound (`limit_s`) only catches a hang (on a busy host a program that takes
/// 50 ms alone can take seconds); a program still running then is ended and reaped.
pub(crate) fn run_to_end(
    name: &str,
    args: &[&str],
    priority: abi::Priority,
    limit_s: u64,
) -> Result<abi::WaitStatus, alloc::string::String> {
    use crate::proc::{self, TEST_PARENT};
    let pid = proc::spawn(name, args, priority, TEST_PARENT)
        .map_err(|e| alloc::format!("spawn {name}: {e}"))?;
    finish(pid, name, limit_s)
}

/// Run this core's threads until process `pid` (a child of the tests, called `name` in
/// messages) ends; its status. As in [`run_to_end`], `limit_s` only catches a hang.
pub(crate) fn finish(
    pid: abi::Pid,
    name: &str,
    limit_s: u64,
) -> Result<abi::WaitStatus, alloc::string::String> {
    use crate::proc::{self, sched};
    if !sched::run_until(limit_s * 1_000_000_000, || proc::has_ended(pid)) {
        end_and_reap(pid);
        return Err(alloc::format!(
            "{name} ({pid}) did not end within {limit_s} s"
        ));
    }
    proc::take_status(pid).ok_or_else(|| alloc::format!("{name} ({pid}) ended without a status"))
}

/// [`run_to_end`] at application priority, and check that the program exited 0.
pub(crate) fn run_program(name: &str, args: &[&str], limit_s: u64) -> crate::ktest::TestResult {
    let s = run_to_end(name, args, abi::Priority::App, limit_s)?;
    crate::kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "{name} {args:?} ended with {s:?} (its console lines say why)"
    );
    Ok(())
}
