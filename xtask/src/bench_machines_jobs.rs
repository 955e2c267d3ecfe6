//! P0 Table 5's analogue for `cargo xtask bench machines` (issue 17): two compilations at
//! once, both on one machine against one on each of two machines. Agora-1 found the two
//! jobs 15-30% faster spread over its two PCs than on one.
//!
//! Two one-core machines (a core each, as Agora-1's PCs had one processor; parallel TCG,
//! so the two QEMUs run at once on the host's two cores) and machine 0's shell:
//!
//! ```text
//! uptime
//! run pmake job WORK &
//! run pmake job WORK &            (one machine)  or  run pmake job WORK -m 1 &  (spread)
//! wait
//! uptime
//! ```
//!
//! Each placement's time is the difference of the two `uptime`s (machine 0's clock, ms):
//! from just before the first job starts to just after `wait` saw both end, the remote
//! start and end travelling through `machd` when spread. `pmake job WORK` (`user/pmake`) is
//! a compiler run in miniature: a 16 KiB "source" written to and read back from a vregion,
//! WORK passes of tokenising it into a symbol table, a 4 KiB "object" written, both
//! deleted. Its files are vregions, not files on a disk: the machines have no disks. Each
//! run measures both placements, the first alternating.
//!
//! P0 Table 1's analogue ([`table1`]): Agora-1 ran cc, yacc and nroff on the PC with the
//! disk and on the diskless one (its files then on the other's disk), 4-10% slower there.
//! Here `pmake cc` (the same miniature compiler, its source and object files on machine 1's
//! disk) runs on machine 1 and on machine 0, which has no disk (`m1:` files through
//! `machd`).

use crate::machines::{Cluster, Link, Options};
use crate::switch::Faults;
use anyhow::{bail, Result};
use std::path::Path;

/// `pmake job`'s WORK: a job of about a second of one vCPU in parallel mode, so that the
/// few milliseconds a remote start and end cost are small beside it.
pub const WORK: u64 = 3200;

/// The script of one placement: both jobs here, or the second on machine 1.
fn placement(spread: bool) -> String {
    let second = if spread { " -m 1" } else { "" };
    format!("uptime\nrun pmake job {WORK} &\nrun pmake job {WORK}{second} &\nwait\nuptime\n")
}

/// The times (ms) of `up S.MMM s` lines, in order.
fn uptimes(lines: &[String]) -> Vec<f64> {
    lines
        .iter()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("up ")?.strip_suffix(" s")?;
            let (s, ms) = rest.split_once('.')?;
            Some(s.parse::<f64>().ok()? * 1000.0 + ms.parse::<f64>().ok()?)
        })
        .collect()
}

/// Two one-core machines (a core each, as Agora-1's PCs had one processor), with `disks`.
fn options(disks: Vec<Option<std::path::PathBuf>>) -> Options {
    Options {
        machines: 2,
        smp: 1,
        mem_mib: 256,
        cmdline: String::new(),
        faults: Faults::default(),
        disks,
        link: Link::default(),
    }
}

/// Boot the machines `o` describes (1.. logged) and run `script` in machine 0's shell: its
/// console lines.
fn drive(
    kernel: &Path,
    archive: &Path,
    o: &Options,
    name: &str,
    script: &str,
) -> Result<Vec<String>> {
    let steps = crate::script::parse(script)?;
    let cluster = Cluster::plan(kernel, archive, o)?;
    let others = cluster.start_logged(1)?;
    let lines =
        crate::script::run_steps_with(&cluster.guests[0], name, &steps, |_| false, &mut |_, _| {
            Ok(())
        });
    drop(others);
    lines
}

/// One run: (both jobs on one machine, spread over two), in ns of machine 0's clock.
pub fn run(kernel: &Path, archive: &Path, index: usize) -> Result<(f64, f64)> {
    let o = options(Vec::new());
    let spread_first = index % 2 == 1;
    let script = format!(
        "machines wait\n{}{}",
        placement(spread_first),
        placement(!spread_first)
    );
    let name = format!("bench machines, Table 5, run {}", index + 1);
    let lines = drive(kernel, archive, &o, &name, &script)?;
    // A local job that exited 0 is `[0.N] done`; the remote one `m1.c0.N (pmake) exited
    // with status 0`; anything else is an error line, which fails the script.
    let ended = lines
        .iter()
        .filter(|l| {
            let l = l.trim();
            (l.starts_with("[0.") && l.ends_with("] done"))
                || l.contains("(pmake) exited with status 0")
        })
        .count();
    if ended != 4 {
        bail!("{ended} of the 4 jobs reported a clean exit; see the console above");
    }
    let t = uptimes(&lines);
    if t.len() != 4 {
        bail!("{} uptime lines, not 4", t.len());
    }
    let (first, second) = ((t[1] - t[0]) * 1e6, (t[3] - t[2]) * 1e6);
    Ok(if spread_first {
        (second, first)
    } else {
        (first, second)
    })
}

/// P0 Table 1: the diskless machine's response time over the disk machine's, per program
/// (cc 1-3, yacc, nroff: 29.6/27.1, 45.8/42.7, 90.5/87.0, 21.9/21.1, 21.4/19.4 s): the
/// median of the five.
pub const TABLE1_PAPER: f64 = 1.073;

/// The time (us) a `pmake cc files=FILES: N us` line gives for `files`.
fn cc_time(lines: &[String], files: &str) -> Option<f64> {
    let tag = format!("pmake cc files={files}: ");
    lines.iter().find_map(|l| {
        let rest = l.trim().strip_prefix(&tag)?.strip_suffix(" us")?;
        rest.parse().ok()
    })
}

/// P0 Table 1's analogue, one run: `pmake cc` (the miniature compiler with its source and
/// object on machine 1's disk) run on machine 1, where the disk is, and on machine 0, which
/// has none (its files then `m1:`): (disk machine, diskless machine), us of the program's
/// own clock, the first placement alternating between runs.
pub fn table1(kernel: &Path, archive: &Path, index: usize) -> Result<(f64, f64)> {
    let image = crate::build::workspace_root().join("target/bench-mfiles.img");
    crate::disk::make(&image)?;
    let o = options(vec![None, Some(image)]);
    let there = format!("run pmake cc - {WORK} -m 1\n");
    let here = format!("run pmake cc m1: {WORK}\n");
    let (a, b) = if index % 2 == 1 {
        (&here, &there)
    } else {
        (&there, &here)
    };
    let script = format!("machines wait\nrun pmake src m1:\n{a}{b}");
    let name = format!("bench machines, Table 1, run {}", index + 1);
    let lines = drive(kernel, archive, &o, &name, &script)?;
    match (cc_time(&lines, "-"), cc_time(&lines, "m1:")) {
        (Some(disk), Some(diskless)) => Ok((disk, diskless)),
        _ => bail!("a `pmake cc` printed no time; see the console above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptimes_are_read_in_order() {
        let l: Vec<String> = [
            "musubi> uptime",
            "up 12.034 s",
            "junk up 1.0 s!",
            "up 13.500 s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(uptimes(&l), vec![12034.0, 13500.0]);
    }

    #[test]
    fn cc_times_are_read_by_their_files() {
        let l: Vec<String> = ["pmake cc files=-: 1200 us", " pmake cc files=m1:: 1300 us"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(cc_time(&l, "-"), Some(1200.0));
        assert_eq!(cc_time(&l, "m1:"), Some(1300.0));
        assert_eq!(cc_time(&l, "m2:"), None);
    }

    #[test]
    fn placements_differ_only_in_the_second_job() {
        assert!(placement(false).contains(&format!("pmake job {WORK} &\nwait")));
        assert!(placement(true).contains(&format!("pmake job {WORK} -m 1 &\nwait")));
    }
}
