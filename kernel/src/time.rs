//! Time: the TSC as the clock, the LAPIC timer as each core's periodic tick, and waiting.
//!
//! The bootstrap core calibrates both against the PIT once (the cores share one clock
//! source in QEMU and on any machine with an invariant TSC); every core then runs its own
//! periodic tick. Times are reported since machine reset (the TSC starts at zero), which
//! under QEMU's `-icount shift=0` is exactly the number of instructions executed.

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
pub fn calibrate() -> pit::Calibration {
    let c = pit::calibrate(10);
    let hz = c.tsc_hz.max(1);
    NS_PER_TICK_FIXED.store(
        ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
        Ordering::Relaxed,
    );
    TSC_HZ.store(hz, Ordering::Release);
    LAPIC_HZ_DIV16.store(c.lapic_hz_div16.max(1), Ordering::Release);
    c
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

/// Start this core's periodic tick.
pub fn start_tick_this_core() {
    let count = LAPIC_HZ_DIV16.load(Ordering::Acquire) / HZ;
    apic::timer_periodic(
        trap::VEC_TIMER as u8,
        apic::TIMER_DIVIDE_16,
        count.min(u64::from(u32::MAX)) as u32,
    );
}

/// Timer interrupt.
pub fn on_tick() {
    percore::this().stats.ticks.fetch_add(1, Ordering::Relaxed);
}

/// Sleep (halting, interrupts open) until `done()` or `timeout_ns` passes; true if done.
///
/// Halting instead of spinning matters under QEMU's `-icount`, where a spinning vCPU keeps
/// the others from running (docs/design.md, "Measuring"). The periodic tick bounds each
/// sleep, so a condition set without an IPI is still seen within one tick.
pub fn wait_until(timeout_ns: u64, mut done: impl FnMut() -> bool) -> bool {
    percore::assert_no_borrows();
    let deadline = now_ns().saturating_add(timeout_ns);
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
