//! Calibration of the TSC and the LAPIC timer against the 8254 PIT, the one clock whose
//! rate (1.193182 MHz) every PC defines.
//!
//! In each round channel 2 counts down once in mode 0 while we read the TSC and the LAPIC
//! countdown at both ends (the TSC alone in [`tsc_round`], for tests). Under QEMU's
//! `-icount` the PIT follows virtual time, so the result is exact and repeatable; under
//! plain TCG it is as good as the host's timing, which is why rounds bound their own error
//! and the calibration is the median of several.

use super::apic;
use super::cpu::{inb, outb, rdtsc};

const PIT_HZ: u64 = 1_193_182;

/// Measured rates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Calibration {
    pub tsc_hz: u64,
    /// LAPIC timer ticks per second with the divide-by-16 setting.
    pub lapic_hz_div16: u64,
}

/// What [`calibrate`] found: the rates, and how many rounds it measured and found
/// undisturbed.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    pub rates: Calibration,
    pub undisturbed: usize,
    pub measured: usize,
    /// The least uncertain round's uncertainty, in millionths of its span.
    pub best_ppm: u64,
}

/// A round known to this (millionths of its span) is undisturbed.
pub const UNDISTURBED_PPM: u64 = 5_000;

/// Undisturbed rounds wanted; the calibration is their median.
const ROUNDS: usize = 5;

/// Rounds measured at most: a disturbed round is measured again.
const TRIES: usize = 3 * ROUNDS;

/// Measure over `ms` milliseconds (at most 50) per round: the median (the upper middle of
/// an even count) of the undisturbed rounds, up to [`ROUNDS`] of them from at most
/// [`TRIES`] rounds, or, if every round was disturbed, the least uncertain one.
///
/// A round is disturbed when the host paused the vCPU at one of its ends (seen on loaded
/// hosts: both rates 1.3-2.6x too high, the countdown's end noticed milliseconds late; or
/// the LAPIC rate alone 45% off, a pause between the two clocks' reads). Each round knows
/// how uncertain its ends are (a bound on its error, as far as the PIT counts exactly, as
/// QEMU's does: a real 8254 adds up to a tick, 0.04% of 2 ms), so such rounds are told
/// apart.
pub fn calibrate(ms: u64) -> Outcome {
    let count = (PIT_HZ * ms.min(50) / 1000) as u16;
    let mut good = [Calibration::default(); ROUNDS];
    let mut n_good = 0;
    let (mut best, mut best_ppm) = (Calibration::default(), u64::MAX);
    let mut measured = 0;
    while measured < TRIES && n_good < ROUNDS {
        let (c, span, uncertain) = measure(count, true);
        measured += 1;
        let ppm = ppm(uncertain, span);
        if ppm < best_ppm {
            (best, best_ppm) = (c, ppm);
        }
        // Undisturbed: the ends known to 0.5% of the span (10 us of 2 ms; the look at the
        // countdown takes a few microseconds emulated, a pause that matters milliseconds).
        if ppm <= UNDISTURBED_PPM {
            good[n_good] = c;
            n_good += 1;
        }
    }
    let rates = if n_good > 0 {
        median(&mut good[..n_good])
    } else {
        best
    };
    Outcome {
        rates,
        undisturbed: n_good,
        measured,
        best_ppm,
    }
}

/// A round's uncertainty `uncertain` in millionths of its `span` (both TSC ticks).
pub fn ppm(uncertain: u64, span: u64) -> u64 {
    (u128::from(uncertain) * 1_000_000 / u128::from(span.max(1))).min(u128::from(u64::MAX)) as u64
}

/// The median of each rate over `rounds` (not empty), measured apart.
pub fn median(rounds: &mut [Calibration]) -> Calibration {
    let mid = rounds.len() / 2;
    rounds.sort_unstable_by_key(|c| c.tsc_hz);
    let tsc_hz = rounds[mid].tsc_hz;
    rounds.sort_unstable_by_key(|c| c.lapic_hz_div16);
    Calibration {
        tsc_hz,
        lapic_hz_div16: rounds[mid].lapic_hz_div16,
    }
}

/// One round of `ms` milliseconds (at most 50) against the PIT, the TSC alone (the LAPIC
/// timer, each core's tick by then, is left alone): the TSC's rate, the span in TSC
/// ticks and how uncertain its ends are (as [`calibrate`] judges a round). For tests, on
/// one core at a time.
pub fn tsc_round(ms: u64) -> (u64, u64, u64) {
    let (c, span, uncertain) = measure((PIT_HZ * ms.min(50) / 1000) as u16, false);
    (c.tsc_hz, span, uncertain)
}

/// One round over `count` PIT ticks: the rates (the LAPIC's only `with_lapic`, whose
/// timer it restarts as a plain countdown), the span in TSC ticks, and how uncertain its
/// ends are (TSC ticks): the countdown starts between the last two TSC reads around its
/// start, and ends between the last look that found it running and the first that found
/// it done; each end's TSC and LAPIC reads may be apart too.
fn measure(count: u16, with_lapic: bool) -> (Calibration, u64, u64) {
    if with_lapic {
        apic::timer_start_countdown(apic::TIMER_DIVIDE_16);
    }
    // Both clocks read together, bracketed by a second TSC read: how far apart they were.
    let pair = || {
        let t = rdtsc();
        let a = if with_lapic { apic::timer_current() } else { 0 };
        let u = rdtsc();
        (t, a, u - t)
    };
    // SAFETY: port 0x61 gates PIT channel 2 (speaker output off); 0x43/0x42 program channel
    // 2 in mode 0 with a 16-bit binary count, which starts at the second byte. Nothing else
    // uses the PIT: the boot core's calibration, and later `tsc_round` from the tests, one
    // core at a time (two rounds at once would restart each other's countdown).
    let (before, t0, a0, s0, running, t1, a1, s1) = unsafe {
        let gate = inb(0x61);
        outb(0x61, (gate & !0x02) | 0x01);
        outb(0x43, 0xb0);
        outb(0x42, count as u8);
        let before = rdtsc();
        outb(0x42, (count >> 8) as u8);
        let (t0, a0, s0) = pair();
        // Bounded: a machine without a working PIT must not hang here (10 G cycles is
        // seconds on any CPU and in any emulator mode).
        let mut running = t0;
        loop {
            let at = rdtsc();
            if inb(0x61) & 0x20 != 0 {
                break;
            }
            running = at;
            assert!(
                at - t0 < 10_000_000_000,
                "the PIT does not count: cannot calibrate clocks"
            );
            core::hint::spin_loop();
        }
        let (t1, a1, s1) = pair();
        outb(0x61, gate);
        (before, t0, a0, s0, running, t1, a1, s1)
    };
    let elapsed_ns = u64::from(count) * 1_000_000_000 / PIT_HZ;
    // In u128: a vCPU stalled for seconds must give a wrong rate (judged by `uncertain`),
    // not an overflow.
    let rate = |ticks: u64| {
        (u128::from(ticks) * 1_000_000_000 / u128::from(elapsed_ns)).min(u128::from(u64::MAX))
            as u64
    };
    let c = Calibration {
        tsc_hz: rate(t1.wrapping_sub(t0)),
        lapic_hz_div16: rate(u64::from(a0.wrapping_sub(a1))),
    };
    let uncertain = t0
        .wrapping_sub(before)
        .saturating_add(s0)
        .saturating_add(t1.wrapping_sub(running))
        .saturating_add(s1);
    (c, t1 - t0, uncertain)
}
