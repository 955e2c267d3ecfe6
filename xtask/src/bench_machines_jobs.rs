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
//! deleted. Its files are vregions, not files on a disk: the machines have no disks
//! (Agora-1's diskless PC read its files from the other's disk; P0 Table 1's analogue,
//! files on another machine, is not built). Each run measures both placements, the first
//! alternating.

use crate::machines::{Cluster, Options};
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

/// One run: (both jobs on one machine, spread over two), in ns of machine 0's clock.
pub fn run(kernel: &Path, archive: &Path, index: usize) -> Result<(f64, f64)> {
    let o = Options {
        machines: 2,
        smp: 1,
        mem_mib: 256,
        cmdline: String::new(),
        faults: Faults::default(),
        disks: Vec::new(),
    };
    let spread_first = index % 2 == 1;
    let script = format!(
        "machines wait\n{}{}",
        placement(spread_first),
        placement(!spread_first)
    );
    let steps = crate::script::parse(&script)?;
    let cluster = Cluster::plan(kernel, archive, &o)?;
    let others = cluster.start_logged(1)?;
    let lines = crate::script::run_steps_with(
        &cluster.guests[0],
        &format!("bench machines, Table 5, run {}", index + 1),
        &steps,
        |_| false,
        &mut |_, _| Ok(()),
    );
    drop(others);
    let lines = lines?;
    // A local job that exited 0 is `[0.N] done`; the remote one `m1:0.N (pmake) exited
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
    fn placements_differ_only_in_the_second_job() {
        assert!(placement(false).contains(&format!("pmake job {WORK} &\nwait")));
        assert!(placement(true).contains(&format!("pmake job {WORK} -m 1 &\nwait")));
    }
}
