//! The kernel-structure switch, decided in one place: a kernel per core (the default) or
//! P2's Limited Symmetry kernel, one big lock (`kernel=biglock`).
//!
//! The two structures run the same code. They differ in three answers, and only this
//! module gives them, so that no subsystem tests the mode itself:
//!
//! * is there one kernel lock? ([`biglock`]: `entry`, `biglock` and `modes` ask);
//! * how does an operation reach another core's tables? In the per-core kernel it travels
//!   as an RPCC request; in big-lock mode it runs at once, this core acting as the owner
//!   under the lock ([`directly`], [`requests_travel`]: RPCC asks);
//! * is the kernel activity on this core working for the thread that runs here? Not while
//!   big-lock mode works on this core's tables for another core: then this core's
//!   "running" thread is in user mode on its own CPU, and can neither block nor end itself
//!   here ([`serves_running_thread`]: processes and semaphores ask).

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

static BIGLOCK: AtomicBool = AtomicBool::new(false);

/// Choose big-lock mode (boot option, on the bootstrap core before the others start).
pub fn choose_biglock() {
    BIGLOCK.store(true, Ordering::Relaxed);
}

/// Is the kernel one big-lock kernel (P2's Limited Symmetry)?
#[inline]
pub fn biglock() -> bool {
    BIGLOCK.load(Ordering::Relaxed)
}

/// Do operations on another core's tables travel as RPCC requests (the per-core kernel)?
#[inline]
pub fn requests_travel() -> bool {
    !biglock()
}

/// Where operations on another core run at once (big-lock mode), run `f` and return its
/// result; in the per-core kernel return `None`: the caller sends a request instead.
#[inline]
pub fn directly<R>(f: impl FnOnce() -> R) -> Option<R> {
    biglock().then(f)
}

/// Is the kernel activity on this core working for this core's running thread? False only
/// in big-lock mode, while another core works on this core's tables (`biglock::on_core`).
#[inline]
pub fn serves_running_thread() -> bool {
    !crate::percore::this().acted_for.load(Ordering::Relaxed)
}
