//! CPU mode accounting (P2, Limited Symmetry section 2.1): every core knows how much of its
//! time went to user code, the kernel, waiting for the big kernel lock, idling, and
//! interrupts.
//!
//! A core is always in exactly one [`Mode`]. At every transition ([`enter`]) it reads the
//! TSC once, adds the time since the last transition to its total for the mode it leaves,
//! and to an accumulator for the process that is running; the scheduler moves that
//! accumulator into the process's record at each context switch ([`move_process_share`]).
//! The transitions are: trap and system-call entry and exit (`arch::x86_64::trap`), the
//! first entry of a thread to user mode, halting in the idle loop, and the spin for the big
//! lock (`biglock`). Totals are in TSC ticks, converted to nanoseconds when reported.

#![deny(unsafe_code)]

use crate::arch::x86_64::cpu;
use crate::percore;
use abi::{MODE_COUNT, MODE_IDLE, MODE_INTERRUPT, MODE_KERNEL, MODE_LOCK, MODE_USER};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The five modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Mode {
    User = MODE_USER,
    Kernel = MODE_KERNEL,
    Lock = MODE_LOCK,
    Idle = MODE_IDLE,
    Interrupt = MODE_INTERRUPT,
}

impl Mode {
    fn from_index(i: usize) -> Mode {
        match i {
            MODE_USER => Mode::User,
            MODE_LOCK => Mode::Lock,
            MODE_IDLE => Mode::Idle,
            MODE_INTERRUPT => Mode::Interrupt,
            _ => Mode::Kernel,
        }
    }
}

/// Slots per mode table: a power of two, so that indexing by a mode masked with
/// `SLOTS - 1` needs neither a division nor a bounds check (this runs twice per system
/// call). Slots past `MODE_COUNT` are never written.
const SLOTS: usize = MODE_COUNT.next_power_of_two();

/// One core's mode clock. Written by its core only; totals are read by any core.
pub struct CoreModes {
    current: AtomicUsize,
    since: AtomicU64,
    total: [AtomicU64; SLOTS],
    /// Since the last context switch, for the running process.
    process: [AtomicU64; SLOTS],
}

impl CoreModes {
    pub const fn new() -> Self {
        CoreModes {
            current: AtomicUsize::new(MODE_KERNEL),
            since: AtomicU64::new(0),
            total: [const { AtomicU64::new(0) }; SLOTS],
            process: [const { AtomicU64::new(0) }; SLOTS],
        }
    }
}

/// Start this core's clock (in kernel mode), at its first instruction of Rust code.
pub fn start_this_core() {
    let m = &percore::this().modes;
    m.since.store(cpu::rdtsc(), Ordering::Relaxed);
    m.current.store(MODE_KERNEL, Ordering::Relaxed);
}

/// This core enters `mode`; returns the mode it left.
#[inline(always)]
pub fn enter(mode: Mode) -> Mode {
    enter_in(&percore::this().modes, mode)
}

/// [`enter`] on `m`, this core's clock, which the caller already holds (a hot path that
/// reads its core's record once instead of at every step).
#[inline(always)]
pub fn enter_in(m: &CoreModes, mode: Mode) -> Mode {
    // `current` only ever holds a `Mode`, so the mask changes nothing but the code.
    let left = m.current.load(Ordering::Relaxed) & (SLOTS - 1);
    charge(m, left, mode);
    Mode::from_index(left)
}

/// Charge the time since the last transition to mode slot `left`, and be in `to` from now.
#[inline(always)]
fn charge(m: &CoreModes, left: usize, to: Mode) {
    // Only this core writes its clock: plain loads and stores, no locked instructions.
    m.current.store(to as usize, Ordering::Relaxed);
    charge_at(m, left, cpu::rdtsc());
}

/// The time since the last transition, up to `now` (a TSC read of the caller's), to mode
/// slot `left`; the mode itself is the caller's to change.
#[inline(always)]
fn charge_at(m: &CoreModes, left: usize, now: u64) {
    let elapsed = now.wrapping_sub(m.since.load(Ordering::Relaxed));
    m.since.store(now, Ordering::Relaxed);
    let t = &m.total[left];
    t.store(t.load(Ordering::Relaxed) + elapsed, Ordering::Relaxed);
    let p = &m.process[left];
    p.store(p.load(Ordering::Relaxed) + elapsed, Ordering::Relaxed);
}

/// This core leaves `from`, which the caller knows it is in (the system-call entry: user
/// mode), for `to`: [`enter`] without reading the current mode.
/// `m` is this core's clock (as in [`enter_in`]).
#[inline(always)]
pub fn switch_in(m: &CoreModes, from: Mode, to: Mode) {
    debug_assert_eq!(m.current.load(Ordering::Relaxed), from as usize);
    charge(m, from as usize, to);
}

/// The mode this core is in.
pub fn current() -> Mode {
    Mode::from_index(percore::this().modes.current.load(Ordering::Relaxed))
}

/// Move the time per mode (ticks) since the last call, brought up to `now` (a TSC read of
/// the caller's), into `into`, the record of the process that ran meanwhile (`None`: no
/// process ran, and the share is dropped). One pass, no copy: a context switch pays this.
#[inline(always)]
pub fn move_process_share(now: u64, into: Option<&mut [u64; MODE_COUNT]>) {
    let m = &percore::this().modes;
    // Bring the current mode's time up to `now`; the core stays in that mode.
    let left = m.current.load(Ordering::Relaxed) & (SLOTS - 1);
    charge_at(m, left, now);
    match into {
        Some(into) => {
            for (total, share) in into.iter_mut().zip(&m.process) {
                *total += share.load(Ordering::Relaxed);
                share.store(0, Ordering::Relaxed);
            }
        }
        None => {
            for share in &m.process[..MODE_COUNT] {
                share.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// `MODES` record of `core` (nanoseconds; the current mode's running time included when
/// asked on that core).
pub fn info_of(core: usize) -> abi::ModeInfo {
    if core == percore::current_core() {
        enter(current());
    }
    let m = &percore::of(core).modes;
    abi::ModeInfo {
        core: core as u32,
        biglock: u32::from(crate::structure::biglock()),
        ns: core::array::from_fn(|i| crate::time::tsc_to_ns(m.total[i].load(Ordering::Relaxed))),
    }
}
