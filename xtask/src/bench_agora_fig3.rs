//! P0 Figure 3 for `cargo xtask bench agora` (deterministic part): "throughput of
//! operating systems". `agora execs` (`user/agora/src/execs.rs`) starts K programs at once
//! from K threads on one core, K = [`KS`], each either read through the file service and
//! started from that image (the process network) or started by the kernel from the boot
//! archive (no file system at all); a sample is the time until all K have ended.
//!
//! The paper's shape: the process network's response time grew more slowly with K than
//! the monolithic PC-UX's and, from some K on, was the shorter. Our in-kernel path does
//! less work (no file read), so the second half is not expected; the report says so.

use crate::bench_agora::Sample;
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};

/// Execs at once.
pub const KS: [u64; 4] = [1, 2, 4, 8];

/// `agora` arguments that run the figure (joined to another command with `+`).
pub fn args(runs: usize) -> String {
    let ks: Vec<String> = KS.iter().map(u64::to_string).collect();
    format!("execs,{runs},{}", ks.join(","))
}

fn case(k: u64, network: bool) -> String {
    format!(
        "exec x{k} at once, {}",
        if network {
            "process network"
        } else {
            "in the kernel"
        }
    )
}

/// Add the figure's rows, checks and note to `report` from the one-core boot's samples.
pub fn add(report: &mut Report, samples: &[Sample]) -> Result<()> {
    let mut medians = [[0.0; 2]; KS.len()];
    for (i, &k) in KS.iter().enumerate() {
        for (j, network) in [true, false].into_iter().enumerate() {
            let c = case(k, network);
            let v: Vec<f64> = samples
                .iter()
                .filter(|s| s.case == c)
                .map(|s| s.per_op)
                .collect();
            if v.is_empty() {
                bail!("agora printed no samples for '{c}'");
            }
            let row = Row::from_samples(&format!("Fig. 3: {c} (instructions until all ended)"), &v);
            medians[i][j] = row.median;
            report.rows.push(row);
        }
    }
    let last = KS.len() - 1;
    let growth = |j: usize| medians[last][j] / medians[0][j];
    let (net, kernel) = (growth(0), growth(1));
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    report.checks.push(Check {
        name: format!(
            "Fig. 3: growth from 1 to {} execs at once, process network / in the kernel",
            KS[last]
        ),
        value: round(net / kernel),
        target: "< 1 (the process network's time grows more slowly, as in the paper)".into(),
        paper: None,
        holds: net < kernel,
    });
    report.checks.push(Check {
        name: format!(
            "Fig. 3: {} execs at once, process network / in the kernel (response time)",
            KS[last]
        ),
        value: round(medians[last][0] / medians[last][1]),
        target: "< 1 (in the paper the process network was the faster at 8)".into(),
        paper: None,
        holds: medians[last][0] < medians[last][1],
    });
    report.notes.push(format!(
        "P0 Figure 3 (`agora execs`, one core, `agora` and the file service on core 0): K \
         threads each start `nop` at once and wait for it; a sample is the time until all K \
         ended. Process network: the image (`BIN/NOPi`, one copy per thread: `fsd` opens a \
         file once at a time) read through `fsd` and the buffer \
         manager (in its 1,024 buffers after the first time, as the paper's ~10 KB program was; \
         ours is 38 KB) and \
         started with `SPAWN_IMAGE`; in the kernel: `SPAWN` from the boot archive, which the \
         kernel holds in memory. Not equal work: the in-kernel path reads no file, where \
         PC-UX's exec read the program through its buffer cache, so the paper's crossing (the \
         process network faster from some K on) is not expected here. Growth from 1 to {}: \
         process network x{:.2}, in the kernel x{:.2}.",
        KS[last], net, kernel
    ));
    Ok(())
}
