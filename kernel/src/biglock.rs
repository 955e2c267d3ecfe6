//! Big-lock mode (`kernel=biglock`): P2's Limited Symmetry kernel, as a switch on the same
//! code as the per-core kernel.
//!
//! One global lock is taken at every kernel entry (system call, trap, interrupt: see
//! `entry::trap`) and released on the way back to user mode and around
//! every halt of an idle or waiting core. A core waiting for it spins, in `Lock` mode
//! (`modes`). Context switches happen inside the kernel, under the lock, like P2's `swtch`.
//!
//! Holding the lock, a core may work directly on another core's tables: where the per-core
//! kernel sends an RPCC request, [`on_core`] runs the same operation at once, with this core
//! *acting as* the owner (its per-core record, found through `GS`, is the owner's for the
//! duration). No other core runs kernel code meanwhile, so the owner's tables are not in
//! use; this is exactly the sharing the lock buys and the per-core kernel avoids.
//!
//! The lock is a test-and-test-and-set lock: whichever waiting core sees it free first
//! takes it. It is not a ticket lock on purpose. Our cores are virtual CPUs, each a host
//! thread that the host may stop at any moment. A ticket lock can pass only to the one core
//! holding the next ticket, so if that thread is stopped, the lock sits free while every
//! other core spins. Idle cores take the lock twice per timer tick, so on a busy host every
//! core stays queued and the kernel slows to a crawl. For example, `fuzz all 20000` on 4
//! cores spent 97% of its time in Lock mode with the lock free 93% of the time, and did not
//! finish in 300 s. With this lock it takes 15 s.

#![deny(unsafe_code)]

use crate::arch::x86_64::cpu;
use crate::modes::{self, Mode};
use crate::percore::{self, current_core};
use core::sync::atomic::{AtomicBool, Ordering};

static LOCKED: AtomicBool = AtomicBool::new(false);

/// Does this core hold the lock?
pub fn held() -> bool {
    percore::this().holds_biglock.load(Ordering::Relaxed)
}

/// Take the lock (spinning, in Lock mode) unless this core holds it already.
pub fn acquire() {
    if !crate::structure::biglock() || held() {
        return;
    }
    let left = modes::enter(Mode::Lock);
    crate::trace::event(crate::trace::Kind::LockWait, 0, 0);
    // Look (a plain load, which keeps the cache line shared), then try to take it.
    while LOCKED
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        while LOCKED.load(Ordering::Relaxed) {
            core::hint::spin_loop();
        }
    }
    percore::this().holds_biglock.store(true, Ordering::Relaxed);
    crate::trace::event(crate::trace::Kind::LockTaken, 0, 0);
    flush_if_stale();
    modes::enter(left);
}

/// Another core changed this core's kernel mappings (acting for it): flush the TLB.
pub fn flush_if_stale() {
    if percore::this().tlb_stale.swap(false, Ordering::Acquire) {
        cpu::flush_tlb_all();
    }
}

/// Give the lock up (going to user mode, or halting).
pub fn release() {
    if !crate::structure::biglock() || !held() {
        return;
    }
    percore::this()
        .holds_biglock
        .store(false, Ordering::Relaxed);
    LOCKED.store(false, Ordering::Release);
}

/// Halt until an interrupt, as an idle or waiting core: without the lock, in Idle mode.
pub fn halt() {
    let left = modes::enter(Mode::Idle);
    release();
    cpu::wait_for_interrupt();
    acquire();
    modes::enter(left);
}

/// Run `f` acting as core `core`: its per-core record is this core's meanwhile. Only in
/// big-lock mode, with the lock held (so `core` runs no kernel code).
pub fn on_core<R>(core: usize, f: impl FnOnce() -> R) -> R {
    if core == current_core() {
        return f();
    }
    let me = current_core();
    // Mappings are cached per CPU: this one may hold stale entries for the other core's
    // kernel stacks or its processes' pages, and the other one for what we change now.
    cpu::flush_tlb_all();
    percore::act_as(core);
    percore::this().acted_for.store(true, Ordering::Relaxed);
    let r = f();
    percore::this().acted_for.store(false, Ordering::Relaxed);
    percore::act_as(me);
    cpu::flush_tlb_all();
    // The owner flushes at its next kernel entry, which this IPI brings at once; threads
    // made ready there run then too.
    percore::of(core).tlb_stale.store(true, Ordering::Release);
    crate::smp::kick(core);
    r
}
