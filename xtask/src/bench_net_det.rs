//! The deterministic part of `cargo xtask bench net` (issue 15; P3 Tables 2 and 3
//! analogues), written as its own report, `net-deterministic`: an in-guest sender,
//! `user/netbench`, sends [`DATAGRAMS`] datagrams of [`SIZE`] bytes through `netd` and the
//! driver, and reports what each cost the sender, `netd` (user and kernel) and `netdrv`, in
//! instructions (`-icount shift=0` on one core; the kernel's per-process CPU accounting).
//!
//! Each run boots once and measures twice: after `replace net.udp netd` (the state in the
//! state ICA, as always) and after `replace net.udp netd local` (the same state copied into
//! netd's heap: the "inside the process" side of Table 2). Both are measured after a
//! replacement, so the two servers are equally fresh, in an order that alternates from run
//! to run. The datagrams go to QEMU's gateway
//! (10.0.2.2) port 9, which the restricted user network drops: only the sending side is
//! measured.

use crate::bench::bench_samples;
use crate::qemu::{Guest, Mode, NetCfg};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};

/// Datagrams per sample (P3 Table 2).
pub const DATAGRAMS: usize = 100;
/// Bytes per datagram (P3 Table 2).
pub const SIZE: usize = 1024;
/// P3's overhead of the state in the ICA (AnT, Table 2), percent.
const PAPER_OVERHEAD: f64 = 4.1;
/// Figure 8: the send before which `netd` is replaced.
const REPLACE_AT: usize = DATAGRAMS / 2;
/// Figure 8: the rows `netbench replace` prints (after "fig8 "), in instructions.
const FIG8: [&str; 7] = [
    "baseline median",
    "baseline longest",
    "replaced longest",
    "added",
    "replacement",
    "failed",
    "sent",
];
/// P3 Figure 8: AnT's replacement added its whole time, about 33 ms, to the sends.
const PAPER_FIG8_MS: f64 = 33.0;
/// P3 Table 3: AnT's communication server per datagram, request step and result step (ms).
const PAPER_REQUEST_MS: f64 = 0.0075;
const PAPER_RESULT_MS: f64 = 0.0022;
const PARTS: [&str; 10] = [
    "elapsed",
    "sender",
    "netd",
    "netd user",
    "netd kernel",
    "netd other",
    "netdrv",
    "netdrv user",
    "netdrv kernel",
    "netdrv other",
];

pub fn deterministic(runs: usize) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let mut g = Guest::new(&kernel, 1, "driver=0:netdrv");
    g.initrd = Some(archive);
    g.mode = Mode::Deterministic;
    g.net = Some(NetCfg::test());
    let send = |label: &str| format!("run netbench {DATAGRAMS} {SIZE} 10.0.2.2 9 {label}");
    let ica = format!("replace net.udp netd\n{}\n", send("ica"));
    let local = format!("replace net.udp netd local\n{}\n", send("local"));
    // The second measurement of a boot costs the driver more (whichever mode it is): the
    // order alternates from run to run, so that it weighs on both alike.
    // P3 Figure 8, measured in the guest (`user/netbench/src/replace.rs`): from a server
    // with its state in the state ICA, as every replacement is.
    let fig8 = format!(
        "replace net.udp netd\nrun netbench replace {DATAGRAMS} {SIZE} 10.0.2.2 9 {REPLACE_AT} -p server\n"
    );
    // P3 Table 3's steps, timed by netd itself (`user/netbench/src/steps.rs`).
    let steps = format!("run netbench steps {DATAGRAMS} {SIZE} 10.0.2.2 9\n");
    let orders = [
        crate::script::parse(&format!("{ica}{local}{fig8}{steps}"))?,
        crate::script::parse(&format!("{local}{ica}{fig8}{steps}"))?,
    ];
    let mut samples: Vec<(String, Vec<f64>)> = Vec::new();
    for run in 0..runs {
        let lines = crate::script::run_steps_with(
            &g,
            &format!("bench net deterministic, run {}", run + 1),
            &orders[run % 2],
            |_| false,
            &mut |_, _| Ok(()),
        )?;
        if lines.iter().any(|l| l.contains("BENCH error")) {
            bail!("netbench failed; see the console above");
        }
        for (case, s) in bench_samples(&lines, "musubi")? {
            match samples.iter_mut().find(|(c, _)| *c == case) {
                Some((_, v)) => v.extend(s),
                None => samples.push((case, s)),
            }
        }
    }
    // "other": CPU time neither user nor kernel (interrupt and lock time charged to it).
    for label in ["ica", "local"] {
        for who in ["netd", "netdrv"] {
            let get = |part: &str| {
                let case = format!("{label} {who}{part}");
                samples
                    .iter()
                    .find(|(c, _)| *c == case)
                    .map(|(_, s)| s.clone())
            };
            if let (Some(t), Some(u), Some(k)) = (get(""), get(" user"), get(" kernel")) {
                let other = t
                    .iter()
                    .zip(&u)
                    .zip(&k)
                    .map(|((t, u), k)| t - u - k)
                    .collect();
                samples.push((format!("{label} {who} other"), other));
            }
        }
    }
    let mut rows = Vec::new();
    for label in ["ica", "local"] {
        for part in PARTS {
            let case = format!("{label} {part}");
            let Some((_, s)) = samples.iter().find(|(c, s)| *c == case && !s.is_empty()) else {
                bail!("netbench printed no samples for '{case}'");
            };
            let shown = match label {
                "ica" => format!("{part}, state in the state ICA"),
                _ => format!("{part}, state inside netd (local)"),
            };
            rows.push(Row::from_samples(&shown, s));
        }
    }
    let median = |label: &str, part: &str| -> f64 {
        let i = PARTS.iter().position(|p| *p == part).unwrap();
        rows[if label == "ica" { 0 } else { PARTS.len() } + i].median
    };
    let overhead = |part: &str| (median("ica", part) / median("local", part) - 1.0) * 100.0;
    let mut fig8 = Vec::new();
    for part in FIG8 {
        let case = format!("fig8 {part}");
        let Some((_, s)) = samples.iter().find(|(c, s)| *c == case && !s.is_empty()) else {
            bail!("netbench replace printed no samples for '{case}'");
        };
        fig8.push(Row::from_samples(
            &format!(
                "Fig. 8: {part} ({})",
                match part {
                    "failed" | "sent" => "sends",
                    _ => "instructions",
                }
            ),
            s,
        ));
    }
    let us = |v: f64| (v / 10.0).round() / 100.0;
    let added = &fig8[3];
    let replacement = &fig8[4];
    let failed = &fig8[5];
    let mut checks = vec![
        Check {
            name: "Fig. 8: added send time, longest over the runs (us)".into(),
            value: us(added.max),
            target: "< 1000".into(),
            paper: Some(PAPER_FIG8_MS * 1000.0),
            holds: added.max < 1_000_000.0,
        },
        Check {
            name: "Fig. 8: added send time / replacement time (medians)".into(),
            value: (added.median / replacement.median * 1000.0).round() / 1000.0,
            target: "< 1 (AnT: 1, the whole replacement)".into(),
            paper: Some(1.0),
            holds: added.median < replacement.median,
        },
        Check {
            name: "Fig. 8: sends that failed during the replacement (most in one run)".into(),
            value: failed.max,
            target: "= 0".into(),
            paper: None,
            holds: failed.max == 0.0,
        },
    ];
    for part in ["elapsed", "netd"] {
        let o = overhead(part);
        checks.push(Check {
            name: format!(
                "state ICA against inside the process: {part} per datagram, overhead (%)"
            ),
            value: (o * 1000.0).round() / 1000.0,
            target: "< 1".into(),
            paper: Some(PAPER_OVERHEAD),
            holds: o < 1.0,
        });
    }
    rows.extend(fig8);
    // Table 3: the server's request and result steps, and the driver (its CPU per datagram
    // from the state-ICA measurement).
    let mut table3 = Vec::new();
    for step in ["request", "result"] {
        let case = format!("steps netd {step} step");
        let Some((_, s)) = samples.iter().find(|(c, s)| *c == case && !s.is_empty()) else {
            bail!("netbench steps printed no samples for '{case}'");
        };
        table3.push(Row::from_samples(
            &format!("Table 3: netd {step} step (instructions per datagram)"),
            s,
        ));
    }
    let (request, result) = (table3[0].median, table3[1].median);
    checks.push(Check {
        name: "Table 3: netd's request step / its result step (medians)".into(),
        value: (request / result * 1000.0).round() / 1000.0,
        target: "> 1 (AnT: 0.0075 / 0.0022 ms)".into(),
        paper: Some((PAPER_REQUEST_MS / PAPER_RESULT_MS * 1000.0).round() / 1000.0),
        holds: request > result,
    });
    rows.extend(table3);
    let qemu = g.shown_command_line();
    let report = Report {
        bench: "net-deterministic".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: crate::bench::qemu_from_smp(&qemu),
        musubi_commit: crate::results::commit(),
        runs,
        unit: "instructions per datagram".into(),
        rows,
        checks,
        notes: vec![
            format!(
                "P3 Table 2 and 3 analogues. `user/netbench` sends {DATAGRAMS} datagrams of \
                 {SIZE} bytes to 10.0.2.2:9 through `netd` and the driver `netdrv` (one core, \
                 `-icount shift=0`: 1 ns = 1 instruction) after 10 unmeasured ones, and \
                 reads each process's CPU time from the kernel (`PROCESSES`: `cpu_ns`, and \
                 `mode_ns` for user and kernel) before and 20 ms after; a row is that \
                 difference / {DATAGRAMS}. \"elapsed\" is the sender's clock across the sends \
                 (the whole path while the sends run); \"sender\" its own CPU. Each run boots \
                 once and measures after `replace net.udp netd` (state in the state ICA) and \
                 after `replace net.udp netd local` (the state copied into netd's heap and \
                 served from there), so both servers are equally fresh; the order alternates \
                 from run to run, so that the second measurement of a boot weighs on both \
                 alike."
            ),
            format!(
                "P3 Table 3 (AnT, per datagram: server request step {PAPER_REQUEST_MS} ms, \
                 result step {PAPER_RESULT_MS} ms, NIC driver 0.0104 ms CPU): `netbench \
                 steps` sends {DATAGRAMS} more datagrams of {SIZE} bytes with netd timing its \
                 own steps (`ulib::net::OP_STEPS`, with its own CPU time, `CPU_TIME`, so the \
                 driver running in the middle of a step is not counted): the request step is \
                 a client's `OP_SEND` (the datagram built by smoltcp and handed to the driver \
                 as a `DRV_TX` request, with the loop's polling around it), the result step \
                 the driver's `DRV_TX` reply taken back (`Tx::reap`). Each step pays two \
                 `CPU_TIME` calls for the timing, included. The driver's row is `netdrv, state \
                 in the state ICA` above (its CPU per datagram); its split into user, kernel \
                 and other (interrupt and lock time, charged to the process that was running) \
                 is the per-process accounting's. The driver's figures move from run to run: \
                 when QEMU completes a transmission relative to the guest's instructions is \
                 not fixed by `-icount` (the user network runs in QEMU's main loop), so its \
                 interrupts and polls land differently; \"elapsed\" moves with them."
            ),
            "Reading Table 2 here: an instruction count cannot see where memory is (a state \
             ICA page and a heap page cost the same under TCG's icount), so the ICA's cost \
             shows only as instructions netd executes in addition, and there are none: the \
             same code runs over another slice. The netd row is the check that matters; a \
             wall-time comparison (TLB and cache effects) needs parallel mode on a quiet \
             machine and is not made here."
                .into(),
            format!(
                "P3 Figure 8, in the guest (`user/netbench/src/replace.rs`): after \
                 `replace net.udp netd`, `netbench replace` sends {DATAGRAMS} datagrams of \
                 {SIZE} bytes one at a time, each timed on its own (`send_to` returns once \
                 netd has handed the frame to the driver), first without a replacement (the \
                 baseline), then again with `netd takeover` started on the same core before \
                 send {REPLACE_AT}, at server priority (not in the background as the shell's \
                 `replace` starts it: the sender keeps the core busy at server priority, so \
                 a background server would not run before the sends end; `bench \
                 net-replace` measures the shell's replacement). Added time = the longest \
                 send from then on minus the baseline's median; replacement time = from \
                 just before the spawn until the first send that ended after the switch \
                 was seen (the new server's start included: loading, its driver check, its \
                 transmit pages). Instructions = \
                 virtual ns. AnT added its whole replacement time, {PAPER_FIG8_MS} ms. The \
                 host-stream side of Figure 8 is `cargo xtask bench net-replace` (parallel \
                 mode, wall time)."
            ),
            format!("QEMU: `{qemu}`"),
        ],
    };
    report.publish()
}
