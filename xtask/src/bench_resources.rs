//! `cargo xtask bench resources`: what Musubi's resource-capability checks (RCC) cost, and
//! what a vregion costs beside Linux's anonymous mapping doing the same work.
//!
//! Multicore Tender (P4, Table 5) measures the open and the close of a resource on core 0
//! with its checks off and on. Musubi's version creates and deletes a 4 KiB vregion on the
//! local core that is never mapped (`RES_OPEN` + `RES_CLOSE`, docs/resources.md), once
//! booted with `rcc=off` and once with the checks on (the default), in deterministic mode
//! on one core. Linux has no equal of that row: an `mmap` that is never touched gets no
//! page. The equal work is the second case: create the vregion, attach it to the program's
//! own address space, write one byte, detach, delete; with `--peer linux` it stands beside
//! Linux's `mmap` + one-byte write + `munmap` of 4 KiB, measured by `peer/linux/basics.c`
//! in the same QEMU configuration. The user program `resbench` prints one `BENCH {json}`
//! line per sample of each case, then `BENCH done`.

use crate::bench::{bench_samples, finished_run, Peer};
use crate::bench::{LINUX_PAGE_ZEROING as LINUX_ZEROING, MUSUBI_PAGE_ZEROING as MUSUBI_ZEROING};
use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Duration;

/// The case `resbench` reports for a vregion created and deleted, never mapped.
const NEVER_MAPPED: &str = "vregion create+delete 4 KiB, never mapped";
/// The case `resbench` reports for create, attach, one-byte write, detach, delete.
const MAPPED: &str = "vregion create+attach+write+detach+delete 4 KiB";
/// The case of the Linux peer compared with [`MAPPED`] (its `mmap_munmap` writes one byte
/// between the two calls).
const PEER_CASE: &str = "mmap+munmap 4 KiB";
/// How the report labels [`PEER_CASE`], saying the write it includes.
const PEER_LABEL: &str = "mmap+write+munmap 4 KiB";
/// P4 Table 5: open of a resource on core 0, RCC off and on (µs).
const P4_OPEN: (f64, f64) = (2.285, 4.045);
/// P4 Table 5: close of a resource on core 0, RCC off and on (µs).
const P4_CLOSE: (f64, f64) = (1.192, 1.306);
/// The target for the RCC overhead (rcc=on / rcc=off - 1).
const OVERHEAD_TARGET: f64 = 0.10;
/// The target for Musubi (rcc=on) / Linux on the equal work.
const LINUX_TARGET: f64 = 1.0;
/// One Musubi boot: its samples of both cases and its QEMU command line.
struct MusubiRun {
    never_mapped: Vec<f64>,
    mapped: Vec<f64>,
    guest: Guest,
}

/// `resources`: both cases with RCC on and off, each setting from its own boot, and
/// Linux's mmap+write+munmap with `--peer linux`; writes the report `resources`.
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
    report.publish()
}

/// `rcc=on / rcc=off - 1` of two rows' medians.
fn overhead(on: &Row, off: &Row) -> f64 {
    on.median / off.median - 1.0
}

/// The rows, checks and notes, all computed from the samples (the commit is left empty).
fn build_report(
    runs: usize,
    on: &MusubiRun,
    off: &MusubiRun,
    linux: Option<&[f64]>,
    peer_cmd: &str,
) -> Report {
    let row = |label: &str, case: &str, s: &[f64]| {
        Row::from_samples(&format!("musubi {label}: {case}"), s)
    };
    let never_on = row("rcc=on", NEVER_MAPPED, &on.never_mapped);
    let never_off = row("rcc=off", NEVER_MAPPED, &off.never_mapped);
    let mapped_on = row("rcc=on", MAPPED, &on.mapped);
    let mapped_off = row("rcc=off", MAPPED, &off.mapped);
    let linux_row = linux.map(|s| Row::from_samples(&format!("linux: {PEER_LABEL}"), s));

    let mut checks = Vec::new();
    let mut comparison = String::from(
        "| Musubi case | Musubi median | Linux case | Linux median | Musubi / Linux | target |\n\
         |---|---:|---|---:|---:|---|\n",
    );
    for (label, row, target) in [
        ("rcc=on", &mapped_on, Some(LINUX_TARGET)),
        ("rcc=off", &mapped_off, None),
    ] {
        let target_text = target.map_or("-".to_string(), |t| format!("<= {t}"));
        match &linux_row {
            Some(lr) => {
                let ratio = row.median / lr.median;
                comparison += &format!(
                    "| {MAPPED} ({label}) | {:.0} | {PEER_LABEL} | {:.0} | {ratio:.2} | \
                     {target_text} |\n",
                    row.median, lr.median
                );
                if let Some(t) = target {
                    checks.push(Check {
                        name: format!(
                            "equal work: create+attach+write+detach+delete ({label}) / Linux \
                             {PEER_LABEL} (median instructions)"
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
                    "| {MAPPED} ({label}) | {:.0} | (no peer run) | - | - | {target_text} |\n",
                    row.median
                )
            }
        }
    }
    for (label, row) in [("rcc=on", &never_on), ("rcc=off", &never_off)] {
        comparison += &format!(
            "| {NEVER_MAPPED} ({label}) | {:.0} | no equal: an untouched mmap gets no page | - | - | - |\n",
            row.median
        );
    }

    let never_overhead = overhead(&never_on, &never_off);
    let mapped_overhead = overhead(&mapped_on, &mapped_off);
    let paper_open = P4_OPEN.1 / P4_OPEN.0 - 1.0;
    let paper_both = (P4_OPEN.1 + P4_CLOSE.1) / (P4_OPEN.0 + P4_CLOSE.0) - 1.0;
    checks.push(Check {
        name: "RCC overhead, create+delete never mapped (rcc=on / rcc=off - 1, median \
               instructions)"
            .into(),
        value: round3(never_overhead),
        target: format!("< {OVERHEAD_TARGET}"),
        paper: Some((paper_open * 100.0).round() / 100.0),
        holds: never_overhead < OVERHEAD_TARGET,
    });
    checks.push(Check {
        name: "RCC overhead, create+attach+write+detach+delete (rcc=on / rcc=off - 1, median \
               instructions)"
            .into(),
        value: round3(mapped_overhead),
        target: format!("< {OVERHEAD_TARGET}"),
        paper: None,
        holds: mapped_overhead < OVERHEAD_TARGET,
    });

    let zeroing = match &linux_row {
        Some(lr) => {
            let extra = LINUX_ZEROING - MUSUBI_ZEROING;
            format!(
                " Of Linux's median of {:.0}, {extra:.0} are this difference alone; counted \
                 as Musubi counts its zeroing, Linux's figure would be {:.0} and the rcc=on \
                 ratio {:.2} instead of {:.2}.",
                lr.median,
                lr.median - extra,
                mapped_on.median / (lr.median - extra),
                mapped_on.median / lr.median
            )
        }
        None => String::new(),
    };
    let notes = vec![
        format!(
            "What is measured, by `user/resbench` on core 0 of a one-core machine, each sample \
             the mean over many operations timed with `rdtsc` inside the guest (under \
             `-icount shift=0` one TSC tick is one instruction, so the figures are instruction \
             counts and repeat exactly). `{NEVER_MAPPED}`: `RES_OPEN(\"here/vregion/...\", \
             size 4096)` then `RES_CLOSE(id)` (docs/resources.md); the vregion is never \
             attached to an address space. `{MAPPED}`: the same vregion created, attached \
             writable to the program's own address space (`control ATTACH` on a vspace handle \
             opened once before timing), one byte written to it, detached (`control DETACH`) \
             and deleted. Musubi boots twice: with the resource-capability checks on (the \
             default) and with the boot option `rcc=off`, which turns them off to measure what \
             they cost. Linux (`peer/linux/basics.c`, case `{PEER_CASE}`, labelled \
             `{PEER_LABEL}` here): `mmap` of one anonymous private read-write page, a one-byte \
             write to it (the page fault allocates, zeroes and maps the page), `munmap`."
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
             never-mapped check's paper figure, {:.2}, is P4's overhead for open alone; ours is \
             for open and close together (a create+delete pair), for which P4's figures give \
             {:.2}.",
            P4_OPEN.0,
            P4_OPEN.1,
            paper_open * 100.0,
            P4_CLOSE.0,
            P4_CLOSE.1,
            (P4_CLOSE.1 / P4_CLOSE.0 - 1.0) * 100.0,
            paper_open,
            paper_both
        ),
        format!(
            "Zeroing: both sides zero one page per operation of the equal-work rows. Musubi \
             zeroes the vregion's frame when `RES_OPEN` creates it (so the never-mapped row \
             includes it too) and maps it at attach, so the write does not fault; Linux \
             zeroes the page in the fault on the first write. Under `-icount` a \
             `rep`-prefixed string instruction counts once per iteration: Musubi's `memset` \
             (libs/bare) clears the page with `rep stosq` ({MUSUBI_ZEROING:.0} counted \
             iterations), Linux 6.1 on `-cpu max` with `rep stosb` ({LINUX_ZEROING:.0}).\
             {zeroing} The RCC overheads compare Musubi with itself and are not affected."
        ),
        if peer_cmd.is_empty() {
            "No peer in this run.".into()
        } else {
            format!("Linux peer QEMU: `{peer_cmd}`")
        },
    ];

    let mut rows = vec![never_on, never_off, mapped_on, mapped_off];
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
/// [`NEVER_MAPPED`] and [`MAPPED`]. A boot that does not finish, a kernel that ignored `rcc=off`, or a probe by
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
    let all = bench_samples(&c.lines, "musubi")?;
    let case = |name: &str| -> Result<Vec<f64>> {
        match all.iter().find(|(c, s)| c == name && !s.is_empty()) {
            Some((_, s)) => Ok(s.clone()),
            None => bail!(
                "the Musubi run with {label} printed no samples for '{name}'; last console \
                 lines:\n{}",
                c.tail(15)
            ),
        }
    };
    Ok(MusubiRun {
        never_mapped: case(NEVER_MAPPED)?,
        mapped: case(MAPPED)?,
        guest: g,
    })
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

    fn run(cmdline: &str, never_mapped: &[f64], mapped: &[f64]) -> MusubiRun {
        let mut guest = Guest::new(Path::new("kernel"), 1, cmdline);
        guest.mode = Mode::Deterministic;
        MusubiRun {
            never_mapped: never_mapped.to_vec(),
            mapped: mapped.to_vec(),
            guest,
        }
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let on = run(
            "start=0:resbench,3",
            &[1050.0, 1100.0, 1200.0],
            &[2000.0, 2200.0, 2300.0],
        );
        let off = run(
            "start=0:resbench,3 rcc=off",
            &[1000.0, 1000.0, 1000.0],
            &[2000.0, 2000.0, 2000.0],
        );
        let r = build_report(3, &on, &off, Some(&[4000.0, 4400.0, 4800.0]), "qemu linux");
        assert_eq!(r.rows.len(), 5);
        assert!(
            r.rows[0].case.ends_with("never mapped"),
            "{}",
            r.rows[0].case
        );
        assert_eq!(r.rows[4].case, "linux: mmap+write+munmap 4 KiB");
        assert_eq!(r.checks.len(), 3);
        assert_eq!(r.checks[0].value, 0.5); // 2200 / 4400
        assert!(r.checks[0].holds);
        assert_eq!(r.checks[1].value, 0.1); // 1100 / 1000 - 1
        assert!(!r.checks[1].holds); // the target is strictly below 0.10
        assert_eq!(r.checks[1].paper, Some(0.77));
        assert_eq!(r.checks[2].value, 0.1); // 2200 / 2000 - 1
        assert_eq!(r.checks[2].paper, None);
        let md = r.markdown();
        assert!(
            md.contains("| 2200 | mmap+write+munmap 4 KiB | 4400 | 0.50 | <= 1 |"),
            "{md}"
        );
        // The never-mapped row is not compared with Linux.
        assert!(
            md.contains("never mapped (rcc=on) | 1100 | no equal"),
            "{md}"
        );
        // The zeroing note is computed: 4400 - (4096 - 512) = 816; 2200 / 816 = 2.70.
        assert!(
            md.contains("would be 816 and the rcc=on ratio 2.70 instead of 0.50"),
            "{md}"
        );
        let off_cmd =
            "RCC off: `qemu-system-x86_64 -kernel kernel -append 'start=0:resbench,3 rcc=off'";
        assert!(md.contains(off_cmd), "{md}");
    }

    #[test]
    fn without_a_peer_only_the_overheads_are_checked() {
        let on = run("a", &[1000.0], &[3000.0]);
        let off = run("a rcc=off", &[1000.0], &[3000.0]);
        let r = build_report(1, &on, &off, None, "");
        assert_eq!(r.rows.len(), 4);
        assert_eq!(r.checks.len(), 2);
        assert!(r.checks.iter().all(|c| c.holds));
        let md = r.markdown();
        assert!(md.contains("No peer in this run."));
        assert!(!md.contains("would be"), "{md}");
    }
}
