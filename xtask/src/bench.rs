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
    let start_up = start_up_note(&rows);
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
            start_up,
            format!("Kernel image (ELF with debug info): {image} bytes."),
        ],
    };
    report.publish()
}

/// The PIT countdowns that calibrate the TSC and the LAPIC timer at boot (five rounds of
/// 2 ms: under `-icount` none is disturbed, so none is measured again;
/// `kernel/src/time.rs`, `calibrate`), in ms.
const PIT_CALIBRATION_MS: f64 = 10.0;

/// What the boot rows say about starting cores, computed from the kernel-entry medians.
fn start_up_note(rows: &[Row]) -> String {
    let entry = |smp: usize| {
        rows.iter()
            .find(|r| r.case == format!("kernel entry to all idle, {smp} cores"))
            .map_or(f64::NAN, |r| r.median)
    };
    let (one, two, four) = (entry(1), entry(2), entry(4));
    format!(
        "From kernel entry, one core takes {one:.3} ms, of which {PIT_CALIBRATION_MS:.0} ms are \
         the fixed PIT countdowns that calibrate the TSC and the LAPIC timer \
         (`kernel/src/time.rs`). Starting the second core adds {:.3} ms ({:.0} instructions); \
         the third and fourth add {:.3} ms together ({:.0} instructions each on average). The \
         boot core starts each core with INIT-SIPI-SIPI and spins in `delay_us` after each SIPI \
         (`kernel/src/arch/x86_64/trampoline.rs`); under -icount a spinning vCPU keeps the \
         others from running until its slice ends (docs/design.md, \"Measuring\"), so such \
         waits cost far more here than on hardware. This benchmark does not break a core's \
         start-up down further.",
        two - one,
        (two - one) * 1e6,
        four - two,
        (four - two) / 2.0 * 1e6
    )
}

/// Bytes of a page.
pub(crate) const PAGE_BYTES: f64 = 4096.0;
/// Counted iterations of zeroing a page under `-icount`, where a `rep`-prefixed string
/// instruction counts once per iteration: Musubi's `memset` (libs/bare) clears with
/// `rep stosq`, one count per 8 bytes.
pub(crate) const MUSUBI_PAGE_ZEROING: f64 = PAGE_BYTES / 8.0;
/// The same for Linux 6.1 on `-cpu max`, which clears pages with `rep stosb`: one per byte.
pub(crate) const LINUX_PAGE_ZEROING: f64 = PAGE_BYTES;

/// How page zeroing weighs in `heap grow 4 KiB`, from its (Musubi, Linux) medians.
fn zeroing_note(heap_grow: &(Option<f64>, Option<f64>)) -> String {
    let mut s = format!(
        "Reading the ratios: under `-icount` a `rep`-prefixed string instruction counts once per \
         iteration. Musubi zeroes and copies pages with quadword `rep stosq`/`movsq` \
         ({MUSUBI_PAGE_ZEROING:.0} counted iterations per 4 KiB page); Linux 6.1 on `-cpu max` \
         clears pages with `rep stosb` ({LINUX_PAGE_ZEROING:.0}). Both sides zero one page per \
         `heap grow 4 KiB`; the null call and yield figures are not affected."
    );
    if let (Some(ours), Some(linux)) = *heap_grow {
        let extra = LINUX_PAGE_ZEROING - MUSUBI_PAGE_ZEROING;
        s += &format!(
            " Zeroing is {LINUX_PAGE_ZEROING:.0} of Linux's median of {linux:.0} in that case \
             ({:.0}%); counted as Musubi's is, Linux's figure would be {:.0} and the ratio \
             {:.2} instead of {:.2}.",
            LINUX_PAGE_ZEROING / linux * 100.0,
            linux - extra,
            ours / (linux - extra),
            ours / linux
        );
    }
    s
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

/// The JSON objects of the `BENCH {...}` lines a guest printed (other lines and `BENCH`
/// words not followed by an object are skipped; a malformed object is an error).
pub(crate) fn bench_json(lines: &[String]) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    for line in lines {
        let Some(json) = line.split_once("BENCH ").map(|(_, j)| j.trim()) else {
            continue;
        };
        if json.starts_with('{') {
            out.push(
                serde_json::from_str(json)
                    .map_err(|e| anyhow::anyhow!("bad BENCH line '{json}': {e}"))?,
            );
        }
    }
    Ok(out)
}

/// Samples per case from the `BENCH {...}` lines a guest printed for `peer`.
pub(crate) fn bench_samples(lines: &[String], peer: &str) -> Result<Vec<(String, Vec<f64>)>> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for v in bench_json(lines)? {
        if v["peer"] != peer {
            continue;
        }
        let (Some(case), Some(x)) = (v["case"].as_str(), v["per_op"].as_f64()) else {
            bail!("BENCH line without case/per_op: {v}");
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
/// A one-core guest in deterministic mode that runs `start` (`PROG,ARG,...`) at boot and
/// powers off: the kernel and boot archive built, QEMU checked.
pub fn deterministic_program(start: &str) -> Result<Guest> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let mut g = Guest::new(&kernel, 1, &format!("noshell poweroff start=0:{start}"));
    g.initrd = Some(archive);
    g.mode = Mode::Deterministic;
    Ok(g)
}

/// A report's QEMU line: `qemu`'s command line from `-smp` on (the kernel and its
/// arguments are said elsewhere).
pub fn qemu_from_smp(qemu: &str) -> String {
    qemu.split_once(" -smp ")
        .map_or(qemu.to_string(), |(_, rest)| format!("-smp {rest}"))
}

pub fn basics(runs: usize, peer: Option<Peer>) -> Result<()> {
    let g = deterministic_program(&format!("basics,{runs}"))?;
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
    let median_of = |case: &str| rows.iter().find(|r| r.case == case).map(|r| r.median);
    let heap_grow_medians = (
        median_of("musubi: heap grow 4 KiB"),
        median_of("linux: heap grow 4 KiB"),
    );
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
             static binary + waitpid, `brk` up 4 KiB + a write)."
                .into(),
            zeroing_note(&heap_grow_medians),
            comparison,
            if peer_cmd.is_empty() { "No peer in this run.".into() } else { format!("Linux peer QEMU: `{peer_cmd}`") },
        ],
    };
    report.publish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_up_note_is_computed_from_the_rows() {
        let rows: Vec<Row> = [(1, 12.0), (2, 14.5), (4, 18.5)]
            .iter()
            .map(|&(smp, ms)| {
                Row::from_samples(&format!("kernel entry to all idle, {smp} cores"), &[ms])
            })
            .collect();
        let note = start_up_note(&rows);
        assert!(
            note.contains("one core takes 12.000 ms, of which 10 ms"),
            "{note}"
        );
        assert!(
            note.contains("adds 2.500 ms (2500000 instructions)"),
            "{note}"
        );
        assert!(
            note.contains("add 4.000 ms together (2000000 instructions each"),
            "{note}"
        );
    }

    #[test]
    fn the_zeroing_note_is_computed_from_the_medians() {
        let note = zeroing_note(&(Some(5000.0), Some(10000.0)));
        // 4096 / 10000; 10000 - (4096 - 512) = 6416; 5000 / 6416 = 0.78.
        assert!(
            note.contains("Linux's median of 10000 in that case (41%)"),
            "{note}"
        );
        assert!(
            note.contains("would be 6416 and the ratio 0.78 instead of 0.50"),
            "{note}"
        );
        assert!(!zeroing_note(&(Some(5000.0), None)).contains("would be"));
    }
}
