//! `cargo xtask bench NAME`: benchmarks that write docs/results/NAME.{json,md,png}.
//!
//! `boot`: time from machine reset, and from kernel entry, until every core is idle, for
//! 1, 2 and 4 cores, in deterministic mode (instructions = virtual nanoseconds). The kernel
//! prints both in its boot summary, taken from the TSC.

use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use crate::runner::{run_captured, Captured};
use anyhow::{bail, Result};
use std::time::Duration;

/// Boot `g` for a benchmark (`what` names the run in messages) and check that it finished:
/// `BENCH done` printed, clean power-off, within `limit`. Its console.
pub(crate) fn finished_run(g: &Guest, what: &str, limit: Duration) -> Result<Captured> {
    let c = run_captured(g, limit, false)?;
    let done = c.lines.iter().any(|l| l.contains("BENCH done"));
    if c.timed_out || !c.powered_off() || !done {
        bail!(
            "the run '{what}' did not finish cleanly (BENCH done and power-off expected; QEMU \
             status {:?}{}); last console lines:\n{}",
            c.status,
            if c.timed_out { ", timed out" } else { "" },
            c.tail(20)
        );
    }
    Ok(c)
}

/// Fail if the kernel ignored a word of the run's command line (it warns "... ignored"):
/// the run would not measure what it says.
pub(crate) fn options_taken(c: &Captured, what: &str) -> Result<()> {
    match c.lines.iter().find(|l| l.contains("ignored")) {
        Some(l) => bail!("the kernel ignored a boot option in the run '{what}': {l}"),
        None => Ok(()),
    }
}

pub fn boot(runs: usize) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let image = std::fs::metadata(&kernel)?.len();
    let mut rows = Vec::new();
    let mut qemu = String::new();
    for smp in [1usize, 2, 4] {
        let (mut since_reset, mut in_kernel) = (Vec::new(), Vec::new());
        for run in 0..runs {
            let mut g = Guest::new(&kernel, smp, "poweroff");
            g.mode = Mode::Deterministic;
            qemu = g.args()[4..].join(" ");
            let c = run_captured(&g, Duration::from_secs(120), false)?;
            let field = |key: &str| -> Option<f64> {
                let line = c
                    .lines
                    .iter()
                    .find(|l| l.contains(abi::protocol::BOOT_SUMMARY))?;
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
            };
            let (Some(entry), Some(idle), Some(online)) =
                (field("entry_ns"), field("idle_ns"), field("cores_online"))
            else {
                bail!(
                    "boot with {smp} cores (run {run}) printed no summary; last lines:\n{}",
                    c.tail(10)
                );
            };
            if online as usize != smp || !c.powered_off() {
                bail!(
                    "boot with {smp} cores: {online} online, status {:?}",
                    c.status
                );
            }
            since_reset.push(idle / 1e6);
            in_kernel.push((idle - entry) / 1e6);
            println!("xtask: bench boot: {smp} cores, run {}: all idle at {:.3} ms, {:.3} ms in the kernel", run + 1, idle / 1e6, (idle - entry) / 1e6);
        }
        rows.push(Row::from_samples(
            &format!("reset to all idle, {smp} cores"),
            &since_reset,
        ));
        rows.push(Row::from_samples(
            &format!("kernel entry to all idle, {smp} cores"),
            &in_kernel,
        ));
    }
    let identical = rows.iter().all(|r| r.min == r.max);
    let checks = vec![Check {
        name: "deterministic mode repeats exactly (max - min over all rows, ms)".into(),
        value: rows.iter().map(|r| r.max - r.min).fold(0.0, f64::max),
        target: "0".into(),
        paper: None,
        holds: identical,
    }];
    let report = Report {
        bench: "boot".into(),
        mode: Mode::Deterministic.name().into(),
        qemu,
        musubi_commit: crate::results::commit(),
        runs,
        unit: "virtual ms (1 ms = 1,000,000 instructions)".into(),
        rows,
        checks,
        notes: vec![
            "Boot time until every core has reached its idle loop, from the boot summary the kernel prints \
             (`poweroff` on the command line). \"Reset\" includes QEMU's firmware and PVH loader; \"kernel entry\" \
             starts at the kernel's first instruction. Under `-icount shift=0` the clock counts the instructions of \
             all vCPUs together, so more cores cost more, and repeated runs are identical."
                .into(),
            "For one core, 10 ms of the kernel's part is the fixed PIT countdown that \
             calibrates the TSC and the LAPIC timer. Each further core's own start-up, from its \
             first Rust instruction to online, is about 35,000 instructions (measured with a \
             probe); almost all of the rest is spent inside INIT-SIPI-SIPI, where the boot core \
             spins through the two 200 us waits the MP protocol asks for. Under -icount a \
             spinning vCPU keeps the others from running until its slice ends (docs/design.md), \
             so these waits cost far more here than on hardware; why the first core's start \
             costs most (2.7 M against 2.0 M and 1.5 M) has not been traced further."
                .into(),
            format!("Kernel image (ELF with debug info): {image} bytes."),
        ],
    };
    let md = report.write()?;
    println!("{}", report.markdown());
    println!("xtask: wrote {}", md.display());
    Ok(())
}

/// Which peer a benchmark compares with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Linux,
}

/// The cases of `basics`, with the target ratio (Musubi / Linux) the issue sets, if any.
const BASICS: [(&str, Option<f64>); 4] = [
    ("null call", Some(1.0)),
    ("yield ping-pong", Some(1.0)),
    ("spawn+wait", Some(0.5)),
    ("heap grow 4 KiB", None),
];

/// Samples per case from the `BENCH {...}` lines a guest printed for `peer`.
pub(crate) fn bench_samples(lines: &[String], peer: &str) -> Result<Vec<(String, Vec<f64>)>> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for line in lines {
        let Some(json) = line.split_once("BENCH ").map(|(_, j)| j.trim()) else {
            continue;
        };
        if !json.starts_with('{') {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| anyhow::anyhow!("bad BENCH line '{json}': {e}"))?;
        if v["peer"] != peer {
            continue;
        }
        let (Some(case), Some(x)) = (v["case"].as_str(), v["per_op"].as_f64()) else {
            bail!("BENCH line without case/per_op: {json}");
        };
        match out.iter_mut().find(|(c, _)| c == case) {
            Some((_, s)) => s.push(x),
            None => out.push((case.to_string(), vec![x])),
        }
    }
    Ok(out)
}

/// `basics`: null call, yield ping-pong, spawn+wait and 4 KiB heap growth on one core, in
/// deterministic mode, against Linux in the same QEMU configuration.
pub fn basics(runs: usize, peer: Option<Peer>) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let mut g = Guest::new(
        &kernel,
        1,
        &format!("noshell poweroff start=0:basics,{runs}"),
    );
    g.initrd = Some(archive);
    g.mode = Mode::Deterministic;
    eprintln!("xtask: bench basics: Musubi, {runs} samples per case");
    let c = finished_run(&g, "Musubi basics", Duration::from_secs(900))?;
    let ours = bench_samples(&c.lines, "musubi")?;
    let theirs = match peer {
        Some(Peer::Linux) => crate::peer_linux::run_basics(runs)?
            .into_iter()
            .map(|p| (p.case, p.samples))
            .collect(),
        None => Vec::new(),
    };
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let mut comparison = String::from("| case | Musubi median | Linux median | Musubi / Linux | target |\n|---|---:|---:|---:|---|\n");
    for (case, target) in BASICS {
        let mine = ours.iter().find(|(c, _)| c == case).map(|(_, s)| s.clone());
        let Some(mine) = mine.filter(|s| !s.is_empty()) else {
            bail!("Musubi printed no samples for '{case}'")
        };
        let row = Row::from_samples(&format!("musubi: {case}"), &mine);
        let median = row.median;
        rows.push(row);
        let peer_row = theirs
            .iter()
            .find(|(c, _)| c == case)
            .filter(|(_, s)| !s.is_empty())
            .map(|(_, s)| Row::from_samples(&format!("linux: {case}"), s));
        match peer_row {
            Some(pr) => {
                let ratio = median / pr.median;
                comparison += &format!(
                    "| {case} | {median:.0} | {:.0} | {ratio:.2} | {} |\n",
                    pr.median,
                    target.map_or("-".to_string(), |t| format!("<= {t}"))
                );
                if let Some(t) = target {
                    checks.push(Check {
                        name: format!("{case}: Musubi / Linux (median instructions)"),
                        value: (ratio * 1000.0).round() / 1000.0,
                        target: format!("<= {t}"),
                        paper: None,
                        holds: ratio <= t,
                    });
                }
                rows.push(pr);
            }
            None => comparison += &format!("| {case} | {median:.0} | - | - | - |\n"),
        }
    }
    let peer_cmd = match peer {
        Some(Peer::Linux) => crate::peer_linux::qemu_command_line(runs).unwrap_or_default(),
        None => String::new(),
    };
    let report = Report {
        bench: "basics".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: g.args()[4..].join(" "),
        musubi_commit: crate::results::commit(),
        runs,
        unit: "instructions per operation".into(),
        rows,
        checks,
        notes: vec![
            "Same-core basics, each sample the mean over many operations, timed with `rdtsc` inside the guest; \
             under `-icount shift=0` one TSC tick is one instruction, so the figures are instruction counts and \
             repeat exactly. Both systems run in the same QEMU configuration with one vCPU. Musubi: `user/basics` \
             (getpid, yield between two processes, spawn of `user/nop` + wait, MEMORY of 4 KiB + a write). \
             Linux: `peer/linux/basics.c` (getppid, sched_yield ping-pong pinned to CPU 0, posix_spawn of a \
             static binary + waitpid, sbrk of 4 KiB + a write)."
                .into(),
            "Reading the ratios: under `-icount` a `rep`-prefixed string instruction counts once per \
             iteration. Musubi zeroes and copies pages with quadword `rep stosq`/`movsq` (512 iterations \
             per 4 KiB page); Linux 6.1 on `-cpu max` clears pages with `rep stosb` (4,096). Page \
             zeroing is about 4,100 of Linux's ~10,500 instructions in `heap grow 4 KiB`, so that ratio \
             mostly measures this difference; the null call and yield figures are not affected."
                .into(),
            comparison,
            if peer_cmd.is_empty() { "No peer in this run.".into() } else { format!("Linux peer QEMU: `{peer_cmd}`") },
        ],
    };
    let md = report.write()?;
    println!("{}", report.markdown());
    println!("xtask: wrote {}", md.display());
    Ok(())
}
