//! Time: the TSC as the clock, the LAPIC timer as each core's tick and deadline timer, and
//! waiting.
//!
//! The bootstrap core calibrates both against the PIT once, the median of up to five
//! undisturbed short rounds (`pit::calibrate`; the cores share one clock
//! source in QEMU and on any machine with an invariant TSC). Times are reported since
//! machine reset (the TSC starts at zero), which under QEMU's `-icount shift=0` is exactly
//! the number of instructions executed.
//!
//! # The tick and the deadlines
//!
//! Each core's LAPIC timer runs in one-shot mode, programmed for the earlier of two times:
//! the next periodic tick (every 1/[`HZ`] s: preemption, RPCC's safety look, idle polls)
//! and the earliest deadline on the core (a `SLEEP`, a `SUBMIT_TIMER`, the timeout of a
//! `RECV`, `COLLECT`, `WAIT` or `THREAD_JOIN`, a halting kernel wait). A timed wait thus
//! ends when its deadline passes, not at the next tick. Whoever starts a timed wait calls
//! [`arm`] with its deadline (one comparison when the deadline is not the earliest); at
//! each timer interrupt [`on_timer`] says whether a tick is due, the scheduler wakes what
//! is due and names the earliest deadline still pending, and [`rearm`] programs the timer
//! again. A deadline that stops mattering (the wait ended early) costs at most one
//! interrupt that finds nothing to do.

#![deny(unsafe_code)]

use crate::arch::x86_64::{apic, cpu, pit, trap};
use crate::percore;
use core::sync::atomic::{AtomicU64, Ordering};

/// Timer interrupts per second on every core.
pub const HZ: u64 = 100;

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC tick in 32.32 fixed point, so a conversion is one multiplication
/// (a 128-bit division is a hundred-odd instructions, and the idle loop and every RPCC
/// message read the clock).
static NS_PER_TICK_FIXED: AtomicU64 = AtomicU64::new(0);
static LAPIC_HZ_DIV16: AtomicU64 = AtomicU64::new(0);

/// How far the calibrated rates may be off, in millionths (their rounds' uncertainty).
static CALIBRATION_PPM: AtomicU64 = AtomicU64::new(0);

/// How far the calibrated rates may be off, in millionths: 5,000 (0.5%) when undisturbed
/// rounds were found, else the least uncertain round's bound.
pub fn calibration_ppm() -> u64 {
    CALIBRATION_PPM.load(Ordering::Relaxed)
}
static KERNEL_ENTRY_TSC: AtomicU64 = AtomicU64::new(0);

/// Note the TSC at the first kernel instruction that can (bootstrap core).
pub fn record_kernel_entry() {
    KERNEL_ENTRY_TSC.store(cpu::rdtsc(), Ordering::Relaxed);
}

/// TSC value at kernel entry.
pub fn kernel_entry_tsc() -> u64 {
    KERNEL_ENTRY_TSC.load(Ordering::Relaxed)
}

/// Calibrate the TSC and LAPIC timer (bootstrap core, once, LAPIC enabled).
pub fn calibrate() -> pit::Outcome {
    // Rounds of 2 ms, the median of five undisturbed ones (one round a busy host disturbs
    // cannot decide it): as long in all as the single 10 ms round they replace, unless
    // rounds are measured again (at most 15, 30 ms).
    let outcome = pit::calibrate(2);
    let c = outcome.rates;
    let ppm = if outcome.undisturbed > 0 {
        pit::UNDISTURBED_PPM
    } else {
        outcome.best_ppm
    };
    CALIBRATION_PPM.store(ppm, Ordering::Relaxed);
    let hz = c.tsc_hz.max(1);
    NS_PER_TICK_FIXED.store(
        ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
        Ordering::Relaxed,
    );
    TSC_HZ.store(hz, Ordering::Release);
    LAPIC_HZ_DIV16.store(c.lapic_hz_div16.max(1), Ordering::Release);
    outcome
}

/// TSC ticks per second (0 before calibration).
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// Convert TSC ticks to nanoseconds (0 before calibration).
pub fn tsc_to_ns(tsc: u64) -> u64 {
    let fixed = NS_PER_TICK_FIXED.load(Ordering::Relaxed);
    ((u128::from(tsc) * u128::from(fixed)) >> 32) as u64
}

/// Nanoseconds since machine reset.
pub fn now_ns() -> u64 {
    tsc_to_ns(cpu::rdtsc())
}

/// Nanoseconds between two periodic ticks.
pub const TICK_NS: u64 = 1_000_000_000 / HZ;

/// One core's timer: when its next tick is due and what the LAPIC is programmed for.
/// Written by its own core only, with interrupts masked.
pub struct CoreTimer {
    next_tick: AtomicU64,
    /// The time the one-shot count ends at (ns); `u64::MAX` before the core starts it.
    armed: AtomicU64,
    /// The earliest deadline of the kernel's own halting waits on this core (the idle
    /// context's `run_until`, [`wait_until`]), which no thread or process records.
    kernel_wait: AtomicU64,
    /// What `armed` was when the last timer interrupt came (ns).
    fired_for: AtomicU64,
}

impl CoreTimer {
    pub const fn new() -> Self {
        CoreTimer {
            next_tick: AtomicU64::new(u64::MAX),
            armed: AtomicU64::new(u64::MAX),
            kernel_wait: AtomicU64::new(u64::MAX),
            fired_for: AtomicU64::new(u64::MAX),
        }
    }
}

/// Start this core's timer: one-shot mode, first tick one period from now.
pub fn start_tick_this_core() {
    let t = &percore::this().timer;
    apic::timer_oneshot(trap::VEC_TIMER as u8, apic::TIMER_DIVIDE_16);
    let now = now_ns();
    t.next_tick.store(now + TICK_NS, Ordering::Relaxed);
    program(t, now + TICK_NS, now);
}

/// LAPIC counts (at divide-by-16) for `ns` nanoseconds, rounded up, at least 1 (a count
/// of 0 stops the timer).
fn lapic_count(ns: u64) -> u32 {
    let hz = LAPIC_HZ_DIV16.load(Ordering::Relaxed);
    // At most one tick's worth is ever programmed, so the product fits in 64 bits; the
    // division by a constant compiles to a multiplication.
    let counts = ns.min(TICK_NS).saturating_mul(hz).div_ceil(1_000_000_000);
    counts.clamp(1, u64::from(u32::MAX)) as u32
}

/// Program the one-shot count to end at `at` (ns).
fn program(t: &CoreTimer, at: u64, now: u64) {
    t.armed.store(at, Ordering::Relaxed);
    apic::timer_set_count(lapic_count(at.saturating_sub(now)));
}

/// A timed wait on this core ends at `deadline_ns`: make the timer fire by then. Cheap
/// when an earlier time is already programmed (the next tick is never further than one
/// period). Interrupts masked (kernel code).
pub fn arm(deadline_ns: u64) {
    let core = percore::this();
    let t = &core.timer;
    // In big-lock mode a core acting for another must not program its own LAPIC for the
    // other's deadline: that core's next tick looks at it.
    if deadline_ns >= t.armed.load(Ordering::Relaxed) || core.acted_for.load(Ordering::Relaxed) {
        return;
    }
    program(t, deadline_ns, now_ns());
}

/// A halting wait of the kernel itself (not a thread's block) ends at `deadline_ns`: keep
/// it in mind past the next tick, and [`arm`] it.
pub fn arm_kernel_wait(deadline_ns: u64) {
    let t = &percore::this().timer;
    let old = t.kernel_wait.load(Ordering::Relaxed);
    // A deadline that has passed is stale (its wait is over); otherwise keep the earlier.
    let keep = if old > now_ns() {
        old.min(deadline_ns)
    } else {
        deadline_ns
    };
    t.kernel_wait.store(keep, Ordering::Relaxed);
    arm(deadline_ns);
}

/// Timer interrupt at `now`: true if the periodic tick is due (then it is counted and the
/// next one scheduled a period later). Notes the time the interrupt was programmed for,
/// for [`note_due`].
pub fn on_timer(now: u64) -> bool {
    let core = percore::this();
    let t = &core.timer;
    t.fired_for
        .store(t.armed.load(Ordering::Relaxed), Ordering::Relaxed);
    let next = t.next_tick.load(Ordering::Relaxed);
    if now < next {
        return false;
    }
    // Keep the cadence; after a long stretch with interrupts masked, restart it from now.
    let after = if now - next < TICK_NS {
        next + TICK_NS
    } else {
        now + TICK_NS
    };
    t.next_tick.store(after, Ordering::Relaxed);
    core.stats.ticks.fetch_add(1, Ordering::Relaxed);
    true
}

/// A timer interrupt ends a timed wait whose deadline was `deadline_ns`: count a deadline
/// wake (`CoreStats::deadline_wakes`) if the interrupt was programmed for no later than
/// the deadline, that is the wait was ended by its own deadline (or an earlier one), else
/// a late wake (`CoreStats::late_wakes`): a later tick ended it, its timer was not armed.
/// Counting the event, not the lateness, is what lets tests check this whatever the
/// host's load (an interrupt may come late; its programmed time does not). A wait whose
/// deadline passed before it blocked (its vCPU stalled by the host) ends without any
/// timer, and counts as neither.
pub fn note_due(deadline_ns: u64) {
    let core = percore::this();
    if core.timer.fired_for.load(Ordering::Relaxed) <= deadline_ns {
        core.stats.deadline_wakes.fetch_add(1, Ordering::Relaxed);
    } else {
        core.stats.late_wakes.fetch_add(1, Ordering::Relaxed);
    }
}

/// After a timer interrupt: program the timer for the next tick or `earliest_deadline`,
/// whichever comes first.
pub fn rearm(earliest_deadline: u64) {
    let t = &percore::this().timer;
    let now = now_ns();
    let mut kernel_wait = t.kernel_wait.load(Ordering::Relaxed);
    if kernel_wait <= now {
        note_due(kernel_wait);
        kernel_wait = u64::MAX;
        t.kernel_wait.store(kernel_wait, Ordering::Relaxed);
    }
    let at = earliest_deadline
        .min(kernel_wait)
        .min(t.next_tick.load(Ordering::Relaxed));
    program(t, at, now);
}

/// Sleep (halting, interrupts open) until `done()` or `timeout_ns` passes; true if done.
///
/// Halting instead of spinning matters under QEMU's `-icount`, where a spinning vCPU keeps
/// the others from running (docs/design.md, "Measuring"). The periodic tick bounds each
/// sleep, so a condition set without an IPI is still seen within one tick; the deadline is
/// armed, so the timeout itself is kept to the timer's precision.
pub fn wait_until(timeout_ns: u64, mut done: impl FnMut() -> bool) -> bool {
    percore::assert_no_borrows();
    let deadline = now_ns().saturating_add(timeout_ns);
    arm_kernel_wait(deadline);
    loop {
        if done() {
            return true;
        }
        if now_ns() >= deadline {
            return false;
        }
        crate::entry::events::halt();
    }
}

/// The calibrated LAPIC timer frequency at divide-by-16, in Hz (0 before calibration).
pub fn lapic_hz_div16() -> u64 {
    LAPIC_HZ_DIV16.load(Ordering::Relaxed)
}
