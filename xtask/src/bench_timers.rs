//! `cargo xtask bench timers`: how late timed waits end against their deadlines, in
//! deterministic mode on one core.
//!
//! The guest side is `user/timers bench` (its module documentation has the program): for
//! each kind of timed wait (`SLEEP`; `SUBMIT(TIMER)` collected; the timeouts of `RECV` and
//! `COLLECT`) and each length (0.1, 1, 3 and 15 ms), SAMPLES waits back to back, each
//! reported as the clock at return minus (the clock before the call + the length), in
//! microseconds. The kernel programs each core's LAPIC timer for the earliest deadline
//! (`kernel/src/time.rs`), so a wait should end within the timer's precision and the
//! system call's way in and out, not at the next 10 ms tick. Checks (issue 13): the median
//! and the largest error over every row under 50 us, and no wait ending early.

use crate::bench::{bench_samples, finished_run};
use crate::qemu::Mode;
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};
use std::time::Duration;

/// The bound on how late a timed wait may end (issue 13), in us.
const LIMIT_US: f64 = 50.0;
const KINDS: [&str; 4] = ["sleep", "timer", "recv timeout", "collect timeout"];
const LENGTHS: [&str; 4] = ["0.1 ms", "1 ms", "3 ms", "15 ms"];
/// Waits per kind and length for each run asked for.
const SAMPLES_PER_RUN: usize = 4;

pub fn timers(runs: usize) -> Result<()> {
    let samples = runs * SAMPLES_PER_RUN;
    let g = crate::bench::deterministic_program(&format!("timers,bench,{samples}"))?;
    eprintln!("xtask: bench timers: Musubi, {samples} waits per kind and length");
    let c = finished_run(&g, "Musubi timers", Duration::from_secs(600))?;
    let ours = bench_samples(&c.lines, "musubi")?;
    let mut rows = Vec::new();
    let mut all = Vec::new();
    for length in LENGTHS {
        for kind in KINDS {
            let case = format!("{kind} {length}");
            let Some((_, s)) = ours.iter().find(|(c, s)| *c == case && !s.is_empty()) else {
                bail!("Musubi printed no samples for '{case}'");
            };
            all.extend_from_slice(s);
            rows.push(Row::from_samples(&case, s));
        }
    }
    let overall = Row::from_samples("all waits", &all);
    let limit = format!("< {LIMIT_US}");
    let checks = vec![
        Check::computed(
            "median error over all waits (us)",
            overall.median,
            &limit,
            overall.median < LIMIT_US,
        ),
        Check::computed(
            "largest error over all waits (us)",
            overall.max,
            &limit,
            overall.max < LIMIT_US,
        ),
        Check::computed(
            "smallest error: no wait ends before its deadline (us)",
            overall.min,
            ">= 0",
            overall.min >= 0.0,
        ),
    ];
    rows.push(overall);
    let qemu = g.shown_command_line();
    let report = Report {
        bench: "timers".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: crate::bench::qemu_from_smp(&qemu),
        musubi_commit: crate::results::commit(),
        runs,
        unit: "us late (wake - deadline)".into(),
        rows,
        checks,
        notes: vec![
            format!(
                "How late a timed wait ends: `user/timers bench {samples}` on one core, for each \
                 kind (`SLEEP`; `SUBMIT(TIMER)` then `COLLECT` of its ticket; `RECV` on an \
                 endpoint nobody sends to; `COLLECT` of a timer that is not done) and length, \
                 {samples} waits back to back after one to warm up. A sample is `CLOCK` at \
                 return - (`CLOCK` before the call + the length): it includes the system call's \
                 way in and out and the `CLOCK` call, so it is never below the true lateness. \
                 Under `-icount shift=0` one virtual ns is one instruction: the figures repeat \
                 exactly, and 1 us is 1,000 instructions."
            ),
            "How: each core's LAPIC timer runs one-shot, programmed for the earlier of the next \
             10 ms tick (kept for preemption) and the earliest deadline on the core; a wait \
             arms its deadline when it blocks, and the timer interrupt wakes what is due and \
             programs the next (`kernel/src/time.rs`). Before, every timed wait ended at the \
             first tick at or after its deadline: up to 10 ms late."
                .into(),
            format!("QEMU: `{qemu}`"),
        ],
    };
    report.publish()
}
