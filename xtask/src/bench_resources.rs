//! `cargo xtask bench resources`: what Musubi's resource-capability checks (RCC) cost.
//!
//! Multicore Tender (P4, Table 5) measures the open and the close of a resource on core 0
//! with its checks off and on. Musubi's version creates and deletes a 4 KiB vregion on the
//! local core (`RES_OPEN` + `RES_CLOSE`, docs/resources.md), once booted with `rcc=off` and
//! once with the checks on (the default), in deterministic mode on one core. The user
//! program `resbench` prints one `BENCH {json}` line per sample, then `BENCH done`. With
//! `--peer linux`, Linux's mmap + one-byte write + munmap of 4 KiB, measured by
//! `peer/linux/basics.c` in the same QEMU configuration, stands beside it.

use crate::bench::{bench_samples, finished_run, Peer};
use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Duration;

/// The case `resbench` reports.
const CASE: &str = "vregion create+delete 4 KiB";
/// The case of the Linux peer it is compared with.
const PEER_CASE: &str = "mmap+munmap 4 KiB";
/// P4 Table 5: open of a resource on core 0, RCC off and on (µs).
const P4_OPEN: (f64, f64) = (2.285, 4.045);
/// P4 Table 5: close of a resource on core 0, RCC off and on (µs).
const P4_CLOSE: (f64, f64) = (1.192, 1.306);
/// The target for the RCC overhead (rcc=on / rcc=off - 1).
const OVERHEAD_TARGET: f64 = 0.10;
/// The target for Musubi (rcc=on) / Linux.
const LINUX_TARGET: f64 = 1.0;

/// One Musubi boot: its samples of [`CASE`] and its QEMU command line.
struct MusubiRun {
    samples: Vec<f64>,
    guest: Guest,
}

/// `resources`: vregion create+delete with RCC on and off, each from its own boot, and
/// Linux's mmap+munmap with `--peer linux`; writes docs/results/resources.{json,md,png}.
pub fn resources(runs: usize, peer: Option<Peer>) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let base = format!("noshell poweroff start=0:resbench,{runs}");
    let on = musubi_run(&kernel, &archive, &base, "rcc=on", runs)?;
    let off = musubi_run(
        &kernel,
        &archive,
        &format!("{base} rcc=off"),
        "rcc=off",
        runs,
    )?;
    let (linux, peer_cmd) = match peer {
        Some(Peer::Linux) => (
            Some(linux_samples(runs)?),
            crate::peer_linux::qemu_command_line(runs).unwrap_or_default(),
        ),
        None => (None, String::new()),
    };
    let mut report = build_report(runs, &on, &off, linux.as_deref(), &peer_cmd);
    report.musubi_commit = crate::results::commit();
    let md = report.write()?;
    println!("{}", report.markdown());
    println!("xtask: wrote {}", md.display());
    Ok(())
}

/// The rows, checks and notes, all computed from the samples (the commit is left empty).
fn build_report(
    runs: usize,
    on: &MusubiRun,
    off: &MusubiRun,
    linux: Option<&[f64]>,
    peer_cmd: &str,
) -> Report {
    let on_row = Row::from_samples(&format!("musubi rcc=on: {CASE}"), &on.samples);
    let off_row = Row::from_samples(&format!("musubi rcc=off: {CASE}"), &off.samples);
    let linux_row = linux.map(|s| Row::from_samples(&format!("linux: {PEER_CASE}"), s));

    let mut checks = Vec::new();
    let mut comparison = String::from(
        "| case | Musubi median | Linux median | Musubi / Linux | target |\n\
         |---|---:|---:|---:|---|\n",
    );
    for (label, row, target) in [
        ("rcc=on", &on_row, Some(LINUX_TARGET)),
        ("rcc=off", &off_row, None),
    ] {
        let target_text = target.map_or("-".to_string(), |t| format!("<= {t}"));
        match &linux_row {
            Some(lr) => {
                let ratio = row.median / lr.median;
                comparison += &format!(
                    "| {CASE} ({label}) vs {PEER_CASE} | {:.0} | {:.0} | {ratio:.2} | \
                     {target_text} |\n",
                    row.median, lr.median
                );
                if let Some(t) = target {
                    checks.push(Check {
                        name: format!(
                            "create+delete ({label}) / Linux mmap+munmap (median instructions)"
                        ),
                        value: round3(ratio),
                        target: format!("<= {t}"),
                        paper: None,
                        holds: ratio <= t,
                    });
                }
            }
            None => {
                comparison += &format!(
                    "| {CASE} ({label}) | {:.0} | - | - | {target_text} |\n",
                    row.median
                )
            }
        }
    }
    let overhead = on_row.median / off_row.median - 1.0;
    let paper_open = P4_OPEN.1 / P4_OPEN.0 - 1.0;
    let paper_both = (P4_OPEN.1 + P4_CLOSE.1) / (P4_OPEN.0 + P4_CLOSE.0) - 1.0;
    checks.push(Check {
        name: "RCC overhead (rcc=on / rcc=off - 1, median instructions)".into(),
        value: round3(overhead),
        target: format!("< {OVERHEAD_TARGET}"),
        paper: Some((paper_open * 100.0).round() / 100.0),
        holds: overhead < OVERHEAD_TARGET,
    });

    let notes = vec![
        format!(
            "What is measured: creating and deleting a 4 KiB vregion on the local core, \
             `RES_OPEN(\"here/vregion/...\", size 4096)` then `RES_CLOSE(id)` (docs/resources.md), \
             by `user/resbench` on core 0 of a one-core machine; each sample is the mean over many \
             create+delete pairs, timed with `rdtsc` inside the guest. Under `-icount shift=0` one \
             TSC tick is one instruction, so the figures are instruction counts and repeat exactly. \
             Musubi boots twice: with the resource-capability checks on (the default) and with the \
             boot option `rcc=off`, which turns them off to measure what they cost. Linux \
             (`peer/linux/basics.c`, case `{PEER_CASE}`): `mmap` of one anonymous private \
             read-write page, a one-byte write to it, `munmap`."
        ),
        format!(
            "Musubi QEMU, RCC on: `{}`\n\nMusubi QEMU, RCC off: `{}`",
            on.guest.shown_command_line(),
            off.guest.shown_command_line()
        ),
        comparison,
        format!(
            "The paper: P4 Table 5 gives open of a resource on core 0 as {:.3} µs with RCC off \
             and {:.3} µs with RCC on (+{:.0}%), and close as {:.3} / {:.3} µs (+{:.1}%). The \
             check's paper figure, {:.2}, is P4's overhead for open alone; ours is for open and \
             close together (a create+delete pair), for which P4's figures give {:.2}.",
            P4_OPEN.0,
            P4_OPEN.1,
            paper_open * 100.0,
            P4_CLOSE.0,
            P4_CLOSE.1,
            (P4_CLOSE.1 / P4_CLOSE.0 - 1.0) * 100.0,
            paper_open,
            paper_both
        ),
        "Reading the Linux ratio: under `-icount` a `rep`-prefixed string instruction counts \
         once per iteration. Musubi zeroes the vregion's 4 KiB frame with `rep stosq` (512 \
         counted iterations); Linux 6.1 on `-cpu max` clears the page with `rep stosb` (4,096). \
         Linux's figure also includes the page fault on the first touch (the write), which \
         allocates and maps the page; Musubi's vregion gets its zeroed frame when it is created \
         and is not attached to an address space in this case. The RCC overhead compares \
         Musubi with itself and is not affected by either."
            .into(),
        if peer_cmd.is_empty() {
            "No peer in this run.".into()
        } else {
            format!("Linux peer QEMU: `{peer_cmd}`")
        },
    ];

    let mut rows = vec![on_row, off_row];
    rows.extend(linux_row);
    Report {
        bench: "resources".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: on.guest.args()[4..].join(" "),
        musubi_commit: String::new(), // set by the caller (it asks git)
        runs,
        unit: "instructions per operation".into(),
        rows,
        checks,
        notes,
    }
}

/// Boot Musubi on one core in deterministic mode with `cmdline`; return its samples of
/// [`CASE`]. A boot that does not finish, a kernel that ignored `rcc=off`, or a probe by
/// `resbench` that found the checks in another state than `label` says, is an error.
fn musubi_run(
    kernel: &Path,
    archive: &Path,
    cmdline: &str,
    label: &str,
    runs: usize,
) -> Result<MusubiRun> {
    let mut g = Guest::new(kernel, 1, cmdline);
    g.initrd = Some(archive.to_path_buf());
    g.mode = Mode::Deterministic;
    eprintln!("xtask: bench resources: Musubi with {label}, {runs} samples");
    let c = finished_run(
        &g,
        &format!("Musubi with {label}"),
        Duration::from_secs(900),
    )?;
    if let Some(l) = c
        .lines
        .iter()
        .find(|l| l.contains("'rcc=") && l.contains("ignored"))
    {
        bail!("the kernel ignored the RCC boot option, so this run measured nothing new: {l}");
    }
    // resbench probes whether the checks are on and says so; it must agree with the boot.
    if let Some(l) = c.lines.iter().find(|l| l.contains("resbench: user=")) {
        let seen = l.split_whitespace().find_map(|w| w.strip_prefix("rcc="));
        if seen != label.strip_prefix("rcc=") {
            bail!(
                "booted with {label}, but resbench found the checks {}: {l}",
                seen.unwrap_or("(not said)")
            );
        }
    }
    let samples = bench_samples(&c.lines, "musubi")?
        .into_iter()
        .find(|(case, _)| case == CASE)
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty());
    let Some(samples) = samples else {
        bail!(
            "the Musubi run with {label} printed no samples for '{CASE}'; last console lines:\n{}",
            c.tail(15)
        );
    };
    Ok(MusubiRun { samples, guest: g })
}

/// Boot the Linux peer once; its samples of [`PEER_CASE`].
fn linux_samples(runs: usize) -> Result<Vec<f64>> {
    crate::peer_linux::run_cases(runs)?
        .into_iter()
        .find(|p| p.case == PEER_CASE)
        .map(|p| p.samples)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the Linux peer printed no samples for '{PEER_CASE}'"))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmdline: &str, samples: &[f64]) -> MusubiRun {
        let mut guest = Guest::new(Path::new("kernel"), 1, cmdline);
        guest.mode = Mode::Deterministic;
        MusubiRun {
            samples: samples.to_vec(),
            guest,
        }
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let on = run("start=0:resbench,3", &[1050.0, 1100.0, 1200.0]);
        let off = run("start=0:resbench,3 rcc=off", &[1000.0, 1000.0, 1000.0]);
        let r = build_report(3, &on, &off, Some(&[2000.0, 2200.0, 2400.0]), "qemu linux");
        assert_eq!(r.rows.len(), 3);
        assert_eq!(r.checks.len(), 2);
        assert_eq!(r.checks[0].value, 0.5); // 1100 / 2200
        assert!(r.checks[0].holds);
        assert_eq!(r.checks[1].value, 0.1); // 1100 / 1000 - 1
        assert!(!r.checks[1].holds); // the target is strictly below 0.10
        assert_eq!(r.checks[1].paper, Some(0.77));
        let md = r.markdown();
        assert!(md.contains("| 1100 | 2200 | 0.50 | <= 1 |"), "{md}");
        let off_cmd =
            "RCC off: `qemu-system-x86_64 -kernel kernel -append 'start=0:resbench,3 rcc=off'";
        assert!(md.contains(off_cmd), "{md}");
    }

    #[test]
    fn without_a_peer_only_the_overhead_is_checked() {
        let on = run("a", &[1000.0]);
        let off = run("a rcc=off", &[1000.0]);
        let r = build_report(1, &on, &off, None, "");
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.checks.len(), 1);
        assert!(r.checks[0].holds);
        assert!(r.markdown().contains("No peer in this run."));
    }
}
