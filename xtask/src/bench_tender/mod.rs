//! `cargo xtask bench tender`: Multicore Tender's experiments (P4, docs/results/tender.md).
//!
//! The guest side is `user/tender` (the measuring program, on core 0, as user 1000) and
//! `user/tkid` (the child of the process-placement cases, built with 4 to 32 KiB of text).
//! Every boot has two cores. In deterministic mode (`-icount`, `rpcc.notify=ipi`, so a
//! waiting core halts instead of spinning):
//!
//! - Figs. 4 and 5: 70 creations, then 70 deletions, of a 4 KiB vregion on core 0 (local)
//!   and on core 1 (remote), each operation timed alone, the middle 50 kept; one boot per
//!   agent reuse limit (`rpcc.agents=1..5|unlimited`).
//! - Table 5: the same with the rights checks off (`rcc=off`) and on, agents unlimited.
//! - Figs. 6 and 7, Table 6: a child creating and deleting a region n = 10..80 times, in the
//!   four placements L-L, R-R, L-R and L-R->R-R, timed from the spawn to the parent's
//!   `WAIT`, with the RPCC requests and messages each run cost.
//! - Fig. 8: the same four placements with the child's text 4..32 KiB (n fixed).
//! - The fast design (issue 13, not P4's): Figs. 4 and 5's operations once more with
//!   `rpcc.agents=inline rpcc.wait=halt` (the daemon performs short requests itself, the
//!   requester halts in place), and the fixed cost per remote operation.
//!
//! In parallel mode (`-accel tcg,thread=multi`): the wall-clock latency of a remote
//! create+delete pair with each of `rpcc.notify=ipi|poll|hybrid`, one boot per sample set.
//!
//! This module holds the plan (which boots, with which options) and what they yield
//! ([`Data`]); [`tender`] runs it. The parts:
//!
//! - [`runs`]: booting one configuration, checking it took, and parsing its `BENCH` lines.
//! - [`figures`]: each figure's rows, checks and table, computed from the samples.
//! - [`fast`]: the fast design's rows and checks beside P4's.
//! - [`report`]: [`build_report`], the figures put together with the notes (its tests
//!   exercise all of it with made-up samples).
//! - [`plot`]: the six-panel picture.

mod fast;
mod figures;
mod plot;
mod report;
mod runs;

use crate::qemu::{Guest, Mode};
use anyhow::{Context, Result};
use plot::plot;
use report::build_report;
use runs::{boot, parse_ops, parse_rtt, parse_spread, text_size};

/// Fig. 8's children, by text size in KiB (`user/tkid`; `user/tender` runs the same table).
use abi::bench::TENDER_CHILDREN as CHILDREN;

/// Agent reuse limits of Figs. 4 and 5 (`rpcc.agents=`), the last the unlimited one.
const LIMITS: [&str; 6] = ["1", "2", "3", "4", "5", "unlimited"];
/// The four placements of P4 Fig. 6, in the paper's order of cost.
const CASES: [&str; 4] = ["L-L", "R-R", "L-R->R-R", "L-R"];
/// Fig. 7's numbers of create+delete pairs.
const FIG7_N: [u64; 8] = [10, 20, 30, 40, 50, 60, 70, 80];
/// Fig. 8's number of create+delete pairs (the paper does not say which it used).
const FIG8_N: u64 = 40;
/// Notification modes of the parallel-mode latency, the kernel's default last.
const NOTIFY: [&str; 3] = ["ipi", "poll", "hybrid"];
const DEFAULT_NOTIFY: &str = "hybrid";
/// Parallel mode: samples per boot and create+delete pairs per sample.
const RTT_SAMPLES: usize = 5;
const RTT_OPS: u64 = 500;

/// P4 Table 5 (µs): open/close on core 0/1, RCC off and on.
const P4_OPEN_LOCAL: (f64, f64) = (2.285, 4.045);
const P4_OPEN_REMOTE: (f64, f64) = (57.693, 62.190);
const P4_CLOSE_LOCAL: (f64, f64) = (1.192, 1.306);
const P4_CLOSE_REMOTE: (f64, f64) = (56.885, 60.180);
/// P4 section 4.2.2 (ms): remote minus local with one-shot agents and with reuse.
const P4_OVERHEAD_ONE_SHOT: f64 = 0.17;
const P4_OVERHEAD_REUSE: f64 = 0.05;
/// The targets.
const RATIO_TARGET: f64 = 3.0;
/// Issue 13: the fast design's remote / local target's moonshot, and the most a remote
/// operation may add to the same local one (instructions).
const RATIO_MOONSHOT: f64 = 1.5;
const FIXED_COST_TARGET: f64 = 2000.0;
/// The fast design's boot options.
const FAST_OPTIONS: &str = "rpcc.agents=inline rpcc.wait=halt";
const RCC_TARGET: f64 = 0.05;
/// The default notification mode is "right" if its median is within this factor of the
/// fastest one's.
const NOTIFY_TARGET: f64 = 1.10;

/// One deterministic `tender ops` boot: the middle-50 samples of each operation.
#[derive(Clone, Debug, Default)]
pub struct OpsRun {
    pub create_local: Vec<f64>,
    pub create_remote: Vec<f64>,
    pub delete_local: Vec<f64>,
    pub delete_remote: Vec<f64>,
    /// Per repetition: agents created on core 1, and remote requests served there.
    pub agents_created: u64,
    pub served: u64,
    /// Per repetition: of those, requests core 1's daemon performed itself, and waits of
    /// core 0 that halted in place (the fast design).
    pub inline_served: u64,
    pub halted_waits: u64,
}

/// One run of a child (`tender spread`).
#[derive(Clone, Debug)]
pub struct ChildRun {
    pub case: String,
    pub child: String,
    pub n: u64,
    pub ticks: f64,
    pub messages: u64,
    pub requests: u64,
}

/// Everything measured, and how.
pub struct Data {
    pub runs: usize,
    /// One `OpsRun` per entry of [`LIMITS`] (RCC on).
    pub ops: Vec<OpsRun>,
    /// Agents unlimited, `rcc=off`.
    pub rcc_off: OpsRun,
    /// The fast design ([`FAST_OPTIONS`]), RCC on.
    pub fast: OpsRun,
    pub spread: Vec<ChildRun>,
    /// Text segment bytes of each child in [`CHILDREN`].
    pub text_bytes: Vec<u64>,
    /// Per entry of [`NOTIFY`]: remote and local create+delete pair, wall ns.
    pub rtt: Vec<(Vec<f64>, Vec<f64>)>,
    /// Per entry of [`NOTIFY`]: the wall time of each parallel-mode boot, seconds.
    pub rtt_boot_s: Vec<Vec<f64>>,
    /// QEMU command lines (deterministic, parallel), for the notes.
    pub qemu_det: String,
    pub qemu_par: String,
    pub wall_s: f64,
}

pub fn tender(runs: usize) -> Result<()> {
    let started = std::time::Instant::now();
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let text_bytes = CHILDREN
        .iter()
        .map(|(c, _)| {
            text_size(
                &crate::user::target_dir()
                    .join(crate::build::TARGET)
                    .join("release")
                    .join(c),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let det = |cmdline: &str| {
        let mut g = Guest::new(&kernel, 2, cmdline);
        g.initrd = Some(archive.clone());
        g.mode = Mode::Deterministic;
        g
    };
    let mut ops = Vec::new();
    let mut qemu_det = String::new();
    for limit in LIMITS {
        let g = det(&format!(
            "noshell poweroff rpcc.notify=ipi rpcc.agents={limit} start=0:tender,ops,{runs}"
        ));
        qemu_det = g.shown_command_line();
        let lines = boot(
            &g,
            &format!("ops, agents={limit}"),
            ("on", "ipi", limit, "switch"),
        )?;
        ops.push(parse_ops(&lines)?);
    }
    let g = det(&format!(
        "noshell poweroff rpcc.notify=ipi rpcc.agents=unlimited rcc=off start=0:tender,ops,{runs}"
    ));
    let rcc_off = parse_ops(&boot(
        &g,
        "ops, rcc=off",
        ("off", "ipi", "unlimited", "switch"),
    )?)?;
    let g = det(&format!(
        "noshell poweroff rpcc.notify=ipi {FAST_OPTIONS} start=0:tender,ops,{runs}"
    ));
    let fast = parse_ops(&boot(
        &g,
        "ops, fast design",
        ("on", "ipi", "inline", "halt"),
    )?)?;
    let g = det(&format!(
        "noshell poweroff rpcc.notify=ipi rpcc.agents=unlimited start=0:tender,spread,{runs},{FIG8_N}"
    ));
    let spread = parse_spread(&boot(&g, "spread", ("on", "ipi", "unlimited", "switch"))?)?;

    let mut rtt = vec![(Vec::new(), Vec::new()); NOTIFY.len()];
    let mut rtt_boot_s = vec![Vec::new(); NOTIFY.len()];
    let mut qemu_par = String::new();
    for run in 0..runs {
        // Modes interleaved, so a slow spell of the host does not fall on one mode.
        for (i, notify) in NOTIFY.iter().enumerate() {
            let mut g = Guest::new(
                &kernel,
                2,
                &format!(
                    "noshell poweroff rpcc.notify={notify} start=0:tender,rtt,{RTT_SAMPLES},{RTT_OPS}"
                ),
            );
            g.initrd = Some(archive.clone());
            qemu_par = g.shown_command_line();
            let t = std::time::Instant::now();
            let lines = boot(
                &g,
                &format!("parallel, notify={notify}, run {}", run + 1),
                ("on", notify, "unlimited", "switch"),
            )?;
            let (remote, local) = parse_rtt(&lines)?;
            rtt[i].0.extend(remote);
            rtt[i].1.extend(local);
            rtt_boot_s[i].push(t.elapsed().as_secs_f64());
        }
    }
    let data = Data {
        runs,
        ops,
        rcc_off,
        fast,
        spread,
        text_bytes,
        rtt,
        rtt_boot_s,
        qemu_det,
        qemu_par,
        wall_s: started.elapsed().as_secs_f64(),
    };
    let mut report = build_report(&data)?;
    report.musubi_commit = crate::results::commit();
    let md = report.write()?;
    let png = crate::results::results_dir()?.join("tender.png");
    plot(&data, &report, &png).with_context(|| format!("plotting {}", png.display()))?;
    println!("{}", report.markdown());
    println!("xtask: wrote {}", md.display());
    Ok(())
}
