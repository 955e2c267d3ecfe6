//! Timers finer than the tick: a timed wait ends by its own deadline, not at the next
//! periodic tick, on every core, for threads (`SLEEP`'s block), for the idle context's
//! halting waits, and for user programs' `SLEEP`, timers and `RECV` / `COLLECT` timeouts.
//!
//! The check is on events, not wall time, so a busy host cannot fail it: no wait may be
//! ended by a timer interrupt programmed for later than its deadline (a later tick: its
//! own timer was not armed; `CoreStats::late_wakes`). Were deadlines ignored, the next
//! tick after the deadline would end each wait shorter than the tick. A thread's sleep
//! whose deadline passed before it blocked (the host stalled the vCPU) rightly ends with
//! no timer at all, so for threads that is all that is asked. The idle context's halting
//! waits arm their deadline before they look, so each one shorter than the tick must also
//! be counted as a deadline wake (`CoreStats::deadline_wakes`, ended by a timer interrupt
//! programmed for no later than its deadline, however late it came); such a wait may be
//! woken by another interrupt just after its deadline, before the timer's own interrupt
//! arrives, so for it the wake may be counted right after the wait ([`FIRE_GUARD_NS`] only
//! catches one that never comes). Ending before the deadline fails at once. How late the
//! waits end is printed, as information (the benchmark `bench timers` measures it, in
//! deterministic mode).

use super::run_program;
use crate::proc::sched;
use crate::{kassert, ktest, percore, smp, time};
use abi::{Priority, MAX_CORES};
use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Back-to-back waits of each length.
const WAITS: usize = 5;
const LENGTHS_MS: [u64; 3] = [1, 3, 15];
/// How long a deadline wake may take to be counted after a halting wait ended (a hang
/// guard).
const FIRE_GUARD_NS: u64 = 2_000_000_000;

/// Per core and length: the least lateness of [`WAITS`] sleeps (ns, information only).
static BEST: [[AtomicI64; 3]; MAX_CORES] =
    [const { [const { AtomicI64::new(i64::MAX) }; 3] }; MAX_CORES];
/// Per core and length: the earliest a sleep ended relative to its deadline (ns).
static WORST_EARLY: [[AtomicI64; 3]; MAX_CORES] =
    [const { [const { AtomicI64::new(i64::MAX) }; 3] }; MAX_CORES];
/// Per core and length: sleeps a later tick than their deadline ended.
static LATE: [[AtomicU64; 3]; MAX_CORES] = [const { [const { AtomicU64::new(0) }; 3] }; MAX_CORES];
static SLEEPERS_DONE: AtomicU64 = AtomicU64::new(0);

/// What [`measure`] saw of [`WAITS`] waits of one length.
struct Measured {
    /// The least lateness (ns; information only).
    best: i64,
    /// The smallest lateness (ns; negative: a wait ended early).
    earliest: i64,
    /// Waits shorter than the tick that saw no deadline wake on this core.
    unfired: u64,
    /// Waits during which this core counted a late wake (a later tick than a deadline).
    late: u64,
}

fn deadline_wakes() -> u64 {
    percore::this().stats.deadline_wakes.load(Ordering::Relaxed)
}

fn late_wakes() -> u64 {
    percore::this().stats.late_wakes.load(Ordering::Relaxed)
}

/// [`WAITS`] back-to-back waits of `ns` by `wait` on this core. The deadline is taken
/// before the wait starts, so it is never later than the one the wait itself computes.
/// With `halting`, a wait that saw no deadline wake yet waits (halting, without arming a
/// deadline of its own) for its timer interrupt to come.
fn measure(ns: u64, halting: bool, wait: impl Fn(u64)) -> Measured {
    let mut m = Measured {
        best: i64::MAX,
        earliest: i64::MAX,
        unfired: 0,
        late: 0,
    };
    for _ in 0..WAITS {
        let (fires, late_before) = (deadline_wakes(), late_wakes());
        let deadline = time::now_ns() + ns;
        wait(ns);
        let late = time::now_ns() as i64 - deadline as i64;
        let end = time::now_ns().saturating_add(FIRE_GUARD_NS);
        while halting && deadline_wakes() == fires && time::now_ns() < end {
            percore::assert_no_borrows();
            crate::entry::events::halt();
        }
        let fired = deadline_wakes() > fires;
        if ns < time::TICK_NS && !fired {
            m.unfired += 1;
        }
        if late_wakes() > late_before {
            m.late += 1;
        }
        m.best = m.best.min(late);
        m.earliest = m.earliest.min(late);
    }
    m
}

/// A kernel thread that sleeps (blocks in `Block::Sleep`) and records how late it woke.
extern "C" fn sleeper_main(_: u64) -> ! {
    let core = percore::current_core();
    for (i, ms) in LENGTHS_MS.iter().enumerate() {
        let m = measure(ms * 1_000_000, false, sched::sleep_ns);
        BEST[core][i].store(m.best, Ordering::Relaxed);
        WORST_EARLY[core][i].store(m.earliest, Ordering::Relaxed);
        LATE[core][i].store(m.late, Ordering::Relaxed);
    }
    SLEEPERS_DONE.fetch_add(1, Ordering::Release);
    sched::exit_current()
}

fn start_sleeper(_: u64) -> u64 {
    let t = sched::with(|s| s.add_kernel_thread(sleeper_main, 0, Priority::App));
    u64::from(t.is_none())
}

ktest! {
    /// A thread's 1, 3 and 15 ms sleeps end after their deadlines, and none by a later tick
    /// than its deadline, on every core at once.
    fn sleeps_end_at_their_deadline_every_core() -> TestResult {
        let n = smp::cores_planned();
        SLEEPERS_DONE.store(0, Ordering::Relaxed);
        for c in 0..n {
            for i in 0..LENGTHS_MS.len() {
                BEST[c][i].store(i64::MAX, Ordering::Relaxed);
                WORST_EARLY[c][i].store(i64::MAX, Ordering::Relaxed);
                LATE[c][i].store(0, Ordering::Relaxed);
            }
            let r = smp::call_on(c, start_sleeper, 0, 10_000_000_000);
            kassert!(r == Ok(0), "core {c}: no sleeper thread ({r:?})");
        }
        // 60 s only catches a hang.
        let done = sched::run_until(60_000_000_000, || {
            SLEEPERS_DONE.load(Ordering::Acquire) == n as u64
        });
        kassert!(done, "only {} of {n} sleepers finished", SLEEPERS_DONE.load(Ordering::Acquire));
        let mut bad = Vec::new();
        for c in 0..n {
            for (i, ms) in LENGTHS_MS.iter().enumerate() {
                let best = BEST[c][i].load(Ordering::Relaxed);
                let early = WORST_EARLY[c][i].load(Ordering::Relaxed);
                let late = LATE[c][i].load(Ordering::Relaxed);
                log::info!("timers: core {c} sleep {ms} ms: best of {WAITS} {best} ns late");
                if early < 0 {
                    bad.push(format!("core {c}: a {ms} ms sleep ended {} ns early", -early));
                }
                if late > 0 {
                    bad.push(format!("core {c}: {late} of {WAITS} {ms} ms sleeps ended by a later tick"));
                }
            }
        }
        kassert!(bad.is_empty(), "{}", bad.join("; "));
        Ok(())
    }
}

ktest! {
    /// The idle context's waits (`run_until` with a deadline, `time::wait_until`) end
    /// after their deadlines, and those shorter than the tick each by a deadline wake.
    fn idle_waits_end_at_their_deadline() -> TestResult {
        for ms in LENGTHS_MS {
            let ns = ms * 1_000_000;
            let m = measure(ns, true, |ns| {
                sched::run_until(ns, || false);
            });
            log::info!("timers: run_until {ms} ms: best of {WAITS} {} ns late", m.best);
            kassert!(m.earliest >= 0, "run_until({ms} ms) ended {} ns early", -m.earliest);
            kassert!(m.unfired == 0, "run_until({ms} ms): {} of {WAITS} saw no deadline wake", m.unfired);
            kassert!(m.late == 0, "run_until({ms} ms): {} of {WAITS} ended by a later tick", m.late);
            let m = measure(ns, true, |ns| {
                time::wait_until(ns, || false);
            });
            log::info!("timers: wait_until {ms} ms: best of {WAITS} {} ns late", m.best);
            kassert!(m.earliest >= 0, "wait_until({ms} ms) ended {} ns early", -m.earliest);
            kassert!(m.unfired == 0, "wait_until({ms} ms): {} of {WAITS} saw no deadline wake", m.unfired);
            kassert!(m.late == 0, "wait_until({ms} ms): {} of {WAITS} ended by a later tick", m.late);
        }
        Ok(())
    }
}

ktest! {
    /// From user space: `SLEEP`, a `SUBMIT(TIMER)` collected, and the timeouts of `RECV`
    /// and `COLLECT` (each returning `TimedOut`) end after their deadlines, and none by a
    /// later tick than its deadline (`CoreInfo`'s `late_wakes` of its core does not grow;
    /// `user/timers check`).
    fn user_timed_waits_end_at_their_deadline() -> TestResult {
        let waits = format!("{WAITS}");
        run_program("timers", &["check", waits.as_str()], 120)
    }
}
