//! `cargo xtask bench diros`: P1 (DIROS) Figure 2, light-weight processes against
//! asynchronous (split-phase) system calls, in deterministic mode on one core.
//!
//! The guest side is `user/diros` (its module documentation has the program): ITEMS items,
//! each a task A (a CPU loop of T_A) followed by a task B (a timed wait of T_B) that uses
//! A's result; A runs in one thread, one after another, and up to n tasks B are under way
//! at once, n = 1..16. `async`: one thread, B as `SUBMIT(TIMER)`, results with `COLLECT`.
//! `threads`: the parent thread runs A and wakes a worker thread with a semaphore V; the
//! worker SLEEPs for B and SENDs "done" to the parent's endpoint, which the parent RECVs.
//! What is measured is P1's: the time from the start of the first A until every B has
//! ended; plotted, as in the paper, as speed relative to async at n = 1.
//!
//! The paper's findings, each a check computed from the rows (thresholds in [`shape`]):
//! n = 1: threads slower (the messages cost, a measured gap per item larger than the
//! samples' spread; B lasts exactly T_B, as timed waits end at their deadline); n = 2..8: time about 1/n of n = 1's, async
//! falling faster (a submitted B starts at once, a woken thread only when the running one
//! stops); past about 9 (T_A : T_B = 1 : 9): flat, A always running; async ahead.

use crate::bench::{bench_samples, finished_run};
use crate::qemu::Mode;
use crate::results::{Check, Report, Row};
use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use std::path::Path;
use std::time::Duration;

/// Items (A then B) per measurement: a multiple of most n, and enough that the start and
/// the end of the pipeline weigh little.
const ITEMS: u64 = 48;
/// Task A: a CPU loop of this many ms (one tick).
const TA_MS: u64 = 10;
/// Task B, a timed wait of exactly this (T_A : T_B = 1 : 9, P1). The kernel ends a timed
/// wait at its deadline, not at the next tick (`kernel/src/time.rs`), so B asks for T_B.
const TB_MS: u64 = 90;
/// The kernel's periodic tick (`kernel/src/time.rs`, `HZ` = 100), in ms, for the notes.
const TICK_MS: u64 = 10;
/// How far the delivered T_B (async, n = 1) may be from T_B: the timers' own bound.
const TB_SLACK_MS: f64 = 0.05;
/// Largest n (P1 Fig. 2: 1..16).
const NMAX: u64 = 16;
const WAYS: [&str; 2] = ["async", "threads"];

/// P1's reading of Fig. 2, as numbers: n = 2..8 "about 1/n" is speed / n within 20%; the
/// plateau begins "about n = 9" (the knee: the first n from which the time stays within
/// 1% of the time at n = 16) and, with T_A : T_B = 1 : 9, should lie within one of the
/// model's (T_A + T_B) / T_A = 10; "A always runs" is the time at n = 16 within 2% of
/// ITEMS x T_A + T_B; "async ahead" allows the two to tie (within 0.1%) on the plateau,
/// where both wait for A.
mod shape {
    pub const LINEAR_MIN: f64 = 0.8;
    pub const KNEE_PLATEAU: f64 = 1.01;
    pub const KNEE_PAPER: f64 = 9.0;
    pub const KNEE_SLACK: u64 = 1;
    pub const A_BOUND: f64 = 1.02;
    pub const TIE: f64 = 0.999;
}

fn case(way: &str, n: u64) -> String {
    format!("{way}, n={n}")
}

pub fn diros(runs: usize) -> Result<()> {
    let g = crate::bench::deterministic_program(&format!(
        "diros,{runs},{ITEMS},{TA_MS},{TB_MS},{NMAX}"
    ))?;
    eprintln!(
        "xtask: bench diros: Musubi, {runs} runs of n = 1..{NMAX}, both ways (about 25 s of \
         wall time per run)"
    );
    let limit = Duration::from_secs(300 + 180 * runs as u64);
    let c = finished_run(&g, "Musubi diros", limit)?;
    if !c.lines.iter().any(|l| l.contains("diros check: ok")) {
        bail!(
            "the threads self-test before the measurement failed:\n{}",
            c.tail(15)
        );
    }
    let samples = bench_samples(&c.lines, "musubi")?;
    let qemu = g.shown_command_line();
    let mut report = build_report(runs, &samples, &qemu)?;
    report.musubi_commit = crate::results::commit();
    let md = report.write()?;
    let png = crate::results::results_dir()?.join("diros.png");
    plot(&report, &png).with_context(|| format!("plotting {}", png.display()))?;
    println!("{}", report.markdown());
    println!("xtask: wrote {}", md.display());
    Ok(())
}

/// Medians by way and n, and what follows from them.
struct Figure {
    /// `time[w][n - 1]`: median ms of way `WAYS[w]` at n.
    time: [Vec<f64>; 2],
}

impl Figure {
    fn t(&self, way: usize, n: u64) -> f64 {
        self.time[way][(n - 1) as usize]
    }

    /// Speed relative to async at n = 1 (P1 Fig. 2's scale).
    fn speed(&self, way: usize, n: u64) -> f64 {
        self.t(0, 1) / self.t(way, n)
    }

    /// The first n from which the time stays within `KNEE_PLATEAU` of the time at NMAX.
    fn knee(&self, way: usize) -> u64 {
        let last = self.t(way, NMAX);
        (1..=NMAX)
            .rev()
            .take_while(|&n| self.t(way, n) <= last * shape::KNEE_PLATEAU)
            .last()
            .unwrap_or(NMAX)
    }

    /// T_B as the kernel delivered it: async at n = 1 is A then B, ITEMS times.
    fn tb_measured(&self) -> f64 {
        self.t(0, 1) / ITEMS as f64 - TA_MS as f64
    }
}

/// The processing time with no overhead at all: A one after another in one thread, each B
/// starting when its A ends, at most `n` B at once, the next A starting only when a B slot
/// is free (as both ways of `user/diros` do).
fn model_ms(n: u64, items: u64, ta: f64, tb: f64) -> f64 {
    let mut slots = vec![0.0f64; n as usize];
    let mut a_free = 0.0f64;
    for _ in 0..items {
        let (i, earliest) = slots
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        let a_end = a_free.max(earliest) + ta;
        slots[i] = a_end + tb;
        a_free = a_end;
    }
    slots.into_iter().fold(0.0, f64::max)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn build_report(runs: usize, samples: &[(String, Vec<f64>)], qemu: &str) -> Result<Report> {
    let mut rows = Vec::new();
    let mut time: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for n in 1..=NMAX {
        for (w, way) in WAYS.iter().enumerate() {
            let name = case(way, n);
            let Some((_, s)) = samples.iter().find(|(c, s)| *c == name && !s.is_empty()) else {
                bail!("Musubi printed no samples for '{name}'");
            };
            let row = Row::from_samples(&name, s);
            time[w].push(row.median);
            rows.push(row);
        }
    }
    let f = Figure { time };
    let (asy, thr) = (0, 1);
    let mut checks = Vec::new();

    // (0) B lasts what it asks for: the timed wait ends at its deadline.
    let tb = f.tb_measured();
    checks.push(Check {
        name: format!("T_B as delivered (async, n = 1: time / {ITEMS} - T_A, ms)"),
        value: round3(tb),
        target: format!("{TB_MS} +- {TB_SLACK_MS}"),
        paper: None,
        holds: (tb - TB_MS as f64).abs() <= TB_SLACK_MS,
    });
    // (1) n = 1: threads slower, by the cost of the messages: a measured gap per item,
    // larger than the spread of the async n = 1 samples (not a sign within the noise).
    let d1 = f.t(thr, 1) - f.t(asy, 1);
    let gap_us = d1 * 1000.0 / ITEMS as f64;
    let n1_spread = rows
        .iter()
        .filter(|r| r.case == case("async", 1) || r.case == case("threads", 1))
        .map(|r| r.max - r.min)
        .fold(0.0, f64::max);
    checks.push(Check {
        name: "n = 1: threads slower than async, per item (the IPC cost of light-weight \
               processes, us)"
            .into(),
        value: round3(gap_us),
        target: format!(
            "> 0 and the gap over {ITEMS} items above the n = 1 samples' spread ({:.3} ms)",
            n1_spread
        ),
        paper: None,
        holds: d1 > 0.0 && d1 > n1_spread,
    });
    // (2) n = 2..8: speed about n times that of n = 1.
    for (w, way) in WAYS.iter().enumerate() {
        let worst = (2..=8)
            .map(|n| f.t(w, 1) / f.t(w, n) / n as f64)
            .fold(f64::INFINITY, f64::min);
        checks.push(Check {
            name: format!("n = 2..8, {way}: time about 1/n of n = 1's (least speed-up / n)"),
            value: round3(worst),
            target: format!(">= {}", shape::LINEAR_MIN),
            paper: Some(1.0),
            holds: worst >= shape::LINEAR_MIN,
        });
    }
    // (3) n = 2..8: threads behind async at every n.
    let closest = (2..=8)
        .map(|n| f.speed(thr, n) / f.speed(asy, n))
        .fold(0.0, f64::max);
    checks.push(Check {
        name: "n = 2..8: async's time falls faster (largest speed threads / async)".into(),
        value: round3(closest),
        target: "< 1".into(),
        paper: None,
        holds: closest < 1.0,
    });
    // (4) the plateau: where it begins, and A always running on it.
    let model_knee = (TA_MS + TB_MS) / TA_MS;
    for (w, way) in WAYS.iter().enumerate() {
        let knee = f.knee(w);
        checks.push(Check {
            name: format!(
                "{way}: flat from n = (first n within {:.0}% of the time at n = {NMAX})",
                (shape::KNEE_PLATEAU - 1.0) * 100.0
            ),
            value: knee as f64,
            target: format!(
                "{}..={} (model: {model_knee})",
                model_knee - shape::KNEE_SLACK,
                model_knee + shape::KNEE_SLACK
            ),
            paper: Some(shape::KNEE_PAPER),
            holds: knee.abs_diff(model_knee) <= shape::KNEE_SLACK,
        });
    }
    let bound = ITEMS as f64 * TA_MS as f64 + f.tb_measured();
    for (w, way) in WAYS.iter().enumerate() {
        let r = f.t(w, NMAX) / bound;
        checks.push(Check {
            name: format!("{way}, n = {NMAX}: A always running (time / (ITEMS x T_A + T_B))"),
            value: round3(r),
            target: format!("<= {}", shape::A_BOUND),
            paper: None,
            holds: r <= shape::A_BOUND,
        });
    }
    // (5) async ahead: threads never faster (a tie allowed where both wait for A).
    let (worst_n, worst) = (1..=NMAX)
        .map(|n| (n, f.t(thr, n) / f.t(asy, n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((1, 1.0));
    checks.push(Check {
        name: format!(
            "async ahead of threads at every n (least time threads / async; at n = {worst_n})"
        ),
        value: (worst * 1e5).round() / 1e5,
        target: format!(">= {} (a tie on the plateau)", shape::TIE),
        paper: None,
        holds: worst >= shape::TIE,
    });

    let mut table = String::from(
        "| n | async ms | threads ms | async speed | threads speed | model speed | threads / async time |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let model1 = model_ms(1, ITEMS, TA_MS as f64, tb);
    for n in 1..=NMAX {
        table += &format!(
            "| {n} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.5} |\n",
            f.t(asy, n),
            f.t(thr, n),
            f.speed(asy, n),
            f.speed(thr, n),
            model1 / model_ms(n, ITEMS, TA_MS as f64, tb),
            f.t(thr, n) / f.t(asy, n)
        );
    }
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| !c.holds)
        .map(|c| c.name.as_str())
        .collect();
    let verdict = if failed.is_empty() {
        format!(
            "Every shape of P1's Fig. 2 that is checked holds, n = 1's difference as a \
             measured {gap_us:.1} us per item."
        )
    } else {
        format!(
            "Shapes that do not hold: {}. See the table: the checks are computed from it.",
            failed.join("; ")
        )
    };
    let notes = vec![
        format!(
            "P1 (DIROS, NTT Data, ~1991) Fig. 2 reproduced: {ITEMS} items, each a task A (a CPU \
             loop calibrated to T_A = {TA_MS} ms) then a task B (a timed wait of T_B = {TB_MS} \
             ms) that uses A's result; A runs in one thread, one after another, and at most n \
             B are under way at once. **async**: one thread; after each A, `SUBMIT(TIMER)`; \
             with n in flight, first one `COLLECT(ANY)`. **threads** (P1's light-weight \
             processes): n worker threads of the same process (`ulib::thread`, on its core); \
             after each A the parent gives a semaphore (`here/sem/...`) a V; a worker takes it \
             (P), `SLEEP`s T_B and `SEND`s \"done\" with its index to an endpoint the process \
             owns; with n busy the parent first `RECV`s one message. As in P1, parent to \
             worker needs only synchronisation (a semaphore), worker to parent must say who \
             finished (a message). Measured: from the start of the first A until every B has \
             ended, with `CLOCK`; speed is the async time at n = 1 divided by the time."
        ),
        format!(
            "T_B: a timed wait ends at its deadline (each core's LAPIC timer is programmed for \
             the earliest deadline, not only the {TICK_MS}-ms tick), so B asks for exactly T_B = \
             {TB_MS} ms; delivered (async, n = 1: time / {ITEMS} - T_A): {tb:.3} ms. The model column is the time with no overhead at all (A back to back, \
             each B starting when its A ends, at most n at once), with that T_B."
        ),
        format!(
            "Reading the checks. P1's findings, in its words: (1) n = 1: light-weight processes \
             take longer, by their communication overhead; (2) n = 2..8: the time is about 1/n \
             of n = 1's, and falls more slowly with light-weight processes, because a notified \
             process cannot start until the running one is switched away, while an \
             asynchronous call starts when it is issued; (3) past n of about 9 the time is \
             constant: with T_A : T_B = 1 : 9, A is always running and finished Bs wait for it. \
             Thresholds: \"about 1/n\" is speed / n >= {}; the plateau starts within {} of the \
             model's (T_A + T_B) / T_A = {model_knee} (the paper: about 9); \"A always \
             running\" is the time at n = {NMAX} within {:.0}% of {ITEMS} x T_A + T_B; async is \
             ahead if threads are never faster by more than {:.1}% (on the plateau both wait \
             for A and tie). At n = 1 threads take {d1:.3} ms longer over {ITEMS} items, \
             {gap_us:.1} us per item: the semaphore V and P, the switches to the worker and \
             back, its SEND and the parent's RECV, against one SUBMIT and one COLLECT. The n = \
             1 samples vary by {n1_spread:.3} ms; the check asks the gap to be larger, so it is \
             a measured figure, not a sign. (While timed waits ended at the tick, the tick \
             absorbed this cost and n = 1 held in sign only.)",
            shape::LINEAR_MIN,
            shape::KNEE_SLACK,
            (shape::A_BOUND - 1.0) * 100.0,
            (1.0 - shape::TIE) * 100.0,
        ),
        table,
        verdict,
        format!("QEMU: `{qemu}`"),
    ];
    Ok(Report {
        bench: "diros".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: crate::bench::qemu_from_smp(qemu),
        musubi_commit: String::new(),
        runs,
        unit: format!("virtual ms for {ITEMS} items"),
        rows,
        checks,
        notes,
    })
}

/// A line of the picture: label, points, colour, width.
type Series = (String, Vec<(f64, f64)>, RGBColor, u32);

/// P1 Fig. 2's picture: speed (async at n = 1 = 1) against n, both ways and the model.
/// Overwrites the generic chart `Report::write` drew.
fn plot(r: &Report, path: &Path) -> Result<()> {
    let median = |way: &str, n: u64| {
        r.rows
            .iter()
            .find(|x| x.case == case(way, n))
            .map_or(f64::NAN, |x| x.median)
    };
    let base = median("async", 1);
    let tb = base / ITEMS as f64 - TA_MS as f64;
    let model1 = model_ms(1, ITEMS, TA_MS as f64, tb);
    // The model first, wide and light, so that async (which follows it closely) shows on
    // top of it.
    let series: Vec<Series> = vec![
        (
            "model: no overhead".into(),
            (1..=NMAX)
                .map(|n| (n as f64, model1 / model_ms(n, ITEMS, TA_MS as f64, tb)))
                .collect(),
            RGBColor(190, 190, 190),
            8,
        ),
        (
            "async (SUBMIT TIMER / COLLECT)".into(),
            (1..=NMAX)
                .map(|n| (n as f64, base / median("async", n)))
                .collect(),
            BLUE,
            2,
        ),
        (
            "threads (sem V / SLEEP / SEND, RECV)".into(),
            (1..=NMAX)
                .map(|n| (n as f64, base / median("threads", n)))
                .collect(),
            RED,
            2,
        ),
    ];
    let top = series
        .iter()
        .flat_map(|(_, p, _, _)| p.iter().map(|&(_, y)| y))
        .filter(|y| y.is_finite())
        .fold(1.0, f64::max)
        * 1.1;
    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "P1 Fig. 2: speed vs parallel tasks n (T_A {TA_MS} ms : T_B {TB_MS} ms, {ITEMS} items; deterministic)"
            ),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..NMAX as f64 + 0.5, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("n (tasks B under way at once)")
        .y_desc("speed (async, n = 1: 1)")
        .x_labels(NMAX as usize)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 14))
        .draw()?;
    for (label, points, color, width) in series {
        let style = color.stroke_width(width);
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        if width <= 2 {
            chart.draw_series(
                points
                    .into_iter()
                    .map(move |p| Circle::new(p, 3, color.filled())),
            )?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made-up times: the model for async, the model plus a start delay for threads.
    fn samples(delay: f64) -> Vec<(String, Vec<f64>)> {
        let mut v = Vec::new();
        for n in 1..=NMAX {
            let a = model_ms(n, ITEMS, 10.0, 90.0);
            let t = model_ms(n, ITEMS, 10.0, 90.0 + if n > 1 { delay } else { 0.05 });
            v.push((case("async", n), vec![a, a]));
            v.push((case("threads", n), vec![t, t]));
        }
        v
    }

    #[test]
    fn the_model_has_the_papers_shape() {
        let t1 = model_ms(1, ITEMS, 10.0, 90.0);
        assert_eq!(t1, ITEMS as f64 * 100.0);
        // About 1/n: half and an eighth, plus the one A that cannot overlap a B.
        assert_eq!(model_ms(2, ITEMS, 10.0, 90.0), t1 / 2.0 + 10.0);
        assert_eq!(model_ms(8, ITEMS, 10.0, 90.0), t1 / 8.0 + 70.0);
        // From (T_A + T_B) / T_A = 10 on, A is always running.
        for n in 10..=NMAX {
            assert_eq!(model_ms(n, ITEMS, 10.0, 90.0), ITEMS as f64 * 10.0 + 90.0);
        }
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let r = build_report(2, &samples(5.0), "qemu -smp 1 x").unwrap();
        assert_eq!(r.rows.len(), 2 * NMAX as usize);
        assert_eq!(r.checks.len(), 10);
        for c in &r.checks {
            assert!(c.holds, "{c:?}");
        }
        assert_eq!(r.checks[0].value, 90.0); // T_B as delivered
        assert_eq!(r.checks[1].value, 50.0); // 0.05 ms per item, in us
        assert_eq!(r.checks[5].value, 10.0); // async's knee
        assert!(r
            .markdown()
            .contains("Every shape of P1's Fig. 2 that is checked holds, n = 1's difference as a measured 50.0 us"));
        assert_eq!(r.qemu, "-smp 1 x");
    }

    #[test]
    fn a_shape_that_fails_is_named() {
        // Threads that start their B 60 ms late: far from 1/n, and the plateau comes late.
        let r = build_report(1, &samples(60.0), "q").unwrap();
        let failed: Vec<&Check> = r.checks.iter().filter(|c| !c.holds).collect();
        assert!(failed
            .iter()
            .any(|c| c.name.contains("threads: time about 1/n")));
        assert!(failed
            .iter()
            .any(|c| c.name.starts_with("threads: flat from")));
        assert!(r.markdown().contains("Shapes that do not hold:"));
    }

    #[test]
    fn an_n1_gap_within_the_noise_is_not_a_figure() {
        // Threads 2.4 ms behind async's median at n = 1, but async's samples spread 3 ms.
        let mut s = samples(5.0);
        let a = model_ms(1, ITEMS, 10.0, 90.0);
        s[0].1 = vec![a - 1.5, a + 1.5];
        s[1].1 = vec![a + 2.4, a + 2.4];
        let r = build_report(2, &s, "q").unwrap();
        assert!(!r.checks[1].holds, "{:?}", r.checks[1]);
    }

    #[test]
    fn a_missing_case_is_an_error() {
        let mut s = samples(5.0);
        s.pop();
        assert!(build_report(1, &s, "q").is_err());
    }
}
