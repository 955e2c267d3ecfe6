//! Calibration of the TSC and the LAPIC timer against the 8254 PIT, the one clock whose
//! rate (1.193182 MHz) every PC defines.
//!
//! Channel 2 counts down once in mode 0 while we read the TSC and the LAPIC countdown at
//! both ends. Under QEMU's `-icount` the PIT follows virtual time, so the result is exact
//! and repeatable; under plain TCG it is as good as the host's timing.

use super::apic;
use super::cpu::{inb, outb, rdtsc};

const PIT_HZ: u64 = 1_193_182;

/// Measured rates.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    pub tsc_hz: u64,
    /// LAPIC timer ticks per second with the divide-by-16 setting.
    pub lapic_hz_div16: u64,
}

/// Measure over `ms` milliseconds (at most 50).
pub fn calibrate(ms: u64) -> Calibration {
    let count = (PIT_HZ * ms.min(50) / 1000) as u16;
    apic::timer_start_countdown(apic::TIMER_DIVIDE_16);
    // SAFETY: port 0x61 gates PIT channel 2 (speaker output off); 0x43/0x42 program channel
    // 2 in mode 0 with a 16-bit binary count. The PIT is not used by anything else.
    let (t0, a0, t1, a1) = unsafe {
        let gate = inb(0x61);
        outb(0x61, (gate & !0x02) | 0x01);
        outb(0x43, 0xb0);
        outb(0x42, count as u8);
        outb(0x42, (count >> 8) as u8);
        let (t0, a0) = (rdtsc(), apic::timer_current());
        // Bounded: a machine without a working PIT must not hang here (10 G cycles is
        // seconds on any CPU and in any emulator mode).
        while inb(0x61) & 0x20 == 0 {
            assert!(
                rdtsc() - t0 < 10_000_000_000,
                "the PIT does not count: cannot calibrate clocks"
            );
            core::hint::spin_loop();
        }
        let (t1, a1) = (rdtsc(), apic::timer_current());
        outb(0x61, gate);
        (t0, a0, t1, a1)
    };
    let elapsed_ns = u64::from(count) * 1_000_000_000 / PIT_HZ;
    Calibration {
        tsc_hz: (t1 - t0) * 1_000_000_000 / elapsed_ns,
        lapic_hz_div16: u64::from(a0 - a1) * 1_000_000_000 / elapsed_ns,
    }
}
