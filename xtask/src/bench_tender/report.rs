//! [`build_report`]: the report of `cargo xtask bench tender` (rows, checks and notes) put
//! together from the figures ([`super::figures`]), with the notes on how it was measured.
//! Its tests run it on made-up samples, which exercises every figure and check.

use super::figures::{self, P4_ROUGH_LOCAL_MS, P4_ROUGH_REMOTE_EXTRA_MS};
use super::{Data, LIMITS, NOTIFY, P4_CLOSE_LOCAL, P4_CLOSE_REMOTE, P4_OPEN_LOCAL, P4_OPEN_REMOTE};
use crate::results::Report;
use anyhow::{bail, Result};

/// Rows, checks and notes, all computed from `d` (the commit is left empty).
pub fn build_report(d: &Data) -> Result<Report> {
    if d.ops.len() != LIMITS.len() || d.rtt.len() != NOTIFY.len() {
        bail!("internal: a run is missing");
    }
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let fig45 = figures::figs_4_5(d, &mut rows, &mut checks);
    let t5 = figures::table_5(d, &mut rows, &mut checks);
    let f7 = figures::fig_7_table_6(d, &mut rows, &mut checks);
    let f8 = figures::fig_8(d, &mut rows, &mut checks);
    let par = figures::parallel(d, &mut rows, &mut checks);
    let fast = super::fast::fast_design(d, &mut rows, &mut checks);
    let (paper_ratio_c, paper_ratio_d) = figures::paper_ratios();
    let mut notes = Vec::new();
    notes.push(
        "Multicore Tender (P4) measured on a Core i7-2600 with RDTSC; Musubi runs under QEMU on \
         two vCPUs. Deterministic rows (Figs. 4, 5, 7, 8, Table 5) are instruction counts \
         (`-icount shift=0`: one TSC tick per instruction of both cores together; a core waiting \
         for the other halts, so a remote operation costs the instructions of both sides); they \
         are compared with the paper through ratios, never in absolute terms. Rows marked \
         [wall ns] come from parallel mode (`-accel tcg,thread=multi`) and are wall-clock \
         nanoseconds read with the CLOCK system call. Programs: `user/tender` (on core 0, as \
         user 1000, so every operation pays the rights checks) and its child `user/tkid`."
            .into(),
    );
    notes.push(format!(
        "Deterministic QEMU (one boot per agent limit, one with rcc=off, one for Figs. 7/8, \
         one for the fast design; `rpcc.notify=ipi`): `{}`\n\nParallel QEMU (one boot per mode and run): `{}`\n\n\
         Whole benchmark: {:.0} s of wall time.",
        d.qemu_det, d.qemu_par, d.wall_s
    ));
    notes.push(fig45);
    notes.push(format!(
        "The paper's ratios in the checks are from Table 5 with RCC on (remote / local: open \
         {:.1}, close {:.1}); with RCC off they are {:.1} and {:.1}, and the rough figures of \
         section 4.2.2 (local {} / {} ms, remote + {} ms) give about {:.0} and {:.0}.",
        paper_ratio_c,
        paper_ratio_d,
        P4_OPEN_REMOTE.0 / P4_OPEN_LOCAL.0,
        P4_CLOSE_REMOTE.0 / P4_CLOSE_LOCAL.0,
        P4_ROUGH_LOCAL_MS.0,
        P4_ROUGH_LOCAL_MS.1,
        P4_ROUGH_REMOTE_EXTRA_MS,
        (P4_ROUGH_LOCAL_MS.0 + P4_ROUGH_REMOTE_EXTRA_MS) / P4_ROUGH_LOCAL_MS.0,
        (P4_ROUGH_LOCAL_MS.1 + P4_ROUGH_REMOTE_EXTRA_MS) / P4_ROUGH_LOCAL_MS.1
    ));
    notes.push(t5);
    notes.push(f7);
    notes.push(f8);
    notes.push(par);
    notes.push(fast);
    Ok(Report {
        bench: "tender".into(),
        mode: "deterministic (Figs. 4, 5, 7, 8, Table 5) + parallel (notify modes)".into(),
        qemu: d.qemu_det.clone(),
        musubi_commit: String::new(),
        runs: d.runs,
        unit: "instructions (deterministic rows); wall ns (rows marked [wall ns])".into(),
        rows,
        checks,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_tender::{ChildRun, OpsRun, CASES, CHILDREN, FIG7_N, FIG8_N};

    fn ops(local: f64, remote: f64) -> OpsRun {
        OpsRun {
            create_local: vec![local; 3],
            create_remote: vec![remote; 3],
            delete_local: vec![local / 2.0; 3],
            delete_remote: vec![remote / 2.0; 3],
            agents_created: 1,
            served: 140,
            inline_served: 0,
            halted_waits: 0,
        }
    }

    fn data() -> Data {
        let mut spread = Vec::new();
        let cost = |case: &str, n: u64, kib: u64| -> (f64, u64) {
            let n_f = n as f64;
            match case {
                "L-L" => (100_000.0 + 1_000.0 * n_f + 10.0 * kib as f64, 0),
                "R-R" => (105_000.0 + 1_000.0 * n_f + 10.0 * kib as f64, 4),
                "L-R" => (100_000.0 + 5_000.0 * n_f + 10.0 * kib as f64, 2 * n),
                _ => (110_000.0 + 3_000.0 * n_f + 900.0 * kib as f64, 6 + n),
            }
        };
        for case in CASES {
            for n in FIG7_N {
                let (t, q) = cost(case, n, 4);
                spread.push(ChildRun {
                    case: case.into(),
                    child: "tkid".into(),
                    n,
                    ticks: t,
                    messages: 2 * q,
                    requests: q,
                });
            }
            for (child, kib) in CHILDREN {
                let (t, q) = cost(case, FIG8_N, u64::from(kib));
                spread.push(ChildRun {
                    case: case.into(),
                    child: child.into(),
                    n: FIG8_N,
                    ticks: t,
                    messages: 2 * q,
                    requests: q,
                });
            }
        }
        Data {
            runs: 1,
            ops: vec![
                ops(1000.0, 9000.0),
                ops(1000.0, 8000.0),
                ops(1000.0, 7000.0),
                ops(1000.0, 6000.0),
                ops(1000.0, 5000.0),
                ops(1000.0, 2500.0),
            ],
            rcc_off: ops(900.0, 2450.0),
            fast: OpsRun {
                inline_served: 140,
                halted_waits: 140,
                agents_created: 0,
                ..ops(1000.0, 2800.0)
            },
            spread,
            text_bytes: CHILDREN
                .iter()
                .map(|c| u64::from(c.1) * 1024 - 3000)
                .collect(),
            rtt: vec![
                (vec![30_000.0, 31_000.0], vec![1_000.0]),
                (vec![10_000.0, 11_000.0], vec![1_000.0]),
                (vec![10_500.0], vec![1_000.0]),
            ],
            rtt_boot_s: vec![vec![0.5], vec![0.5], vec![0.5]],
            qemu_det: "qemu det".into(),
            qemu_par: "qemu par".into(),
            wall_s: 1.0,
        }
    }

    #[test]
    fn checks_are_computed_from_the_samples() {
        let r = build_report(&data()).unwrap();
        let get = |name: &str| {
            r.checks
                .iter()
                .find(|c| c.name.starts_with(name))
                .unwrap_or_else(|| panic!("{name}"))
        };
        assert_eq!(get("Fig. 4: remote / local create").value, 2.5);
        assert!(get("Fig. 4: remote / local create").holds);
        assert_eq!(get("Fig. 4: remote / local create").paper, Some(15.375));
        // (9000 - 1000) / (2500 - 1000)
        assert_eq!(get("Fig. 4: remote create overhead").value, 5.333);
        assert!(get("Fig. 4: remote create median does not rise").holds);
        // 2500 / 2450 - 1 = 0.0204
        assert_eq!(get("Table 5: RCC share of the remote open").value, 0.02);
        assert!(get("Table 5: RCC share of the remote open").holds);
        assert!(get("Fig. 7: values of n").holds);
        assert!(get("Fig. 7: growth").holds);
        assert!(get("Table 6: RPCC requests of L-L").holds);
        assert_eq!(get("Table 6: L-R RPCC requests per remote").value, 1.0);
        assert!(get("Table 6: R-R").holds);
        assert!(get("Table 6: growth of L-R->R-R").holds);
        assert!(get("Fig. 8").holds);
        // hybrid 10500 against poll's 10500 (median of 10000, 11000)
        assert_eq!(get("parallel").value, 1.0);
        // The fast design: create 2800 / 1000, delete 1400 / 500; the fixed cost is the
        // delete's 900.
        assert_eq!(get("fast design: remote / local create").value, 2.8);
        assert!(get("fast design: remote / local delete").holds);
        assert_eq!(get("fast design: fixed cost").value, 900.0);
        assert!(get("fast design: fixed cost").holds);
        assert!(r.rows.iter().any(|x| x.case == "delete remote, fast"));
        let md = r.markdown();
        assert!(
            md.contains("performed by core 1's daemon itself: 140 of 140"),
            "{md}"
        );
        assert!(md.contains("Fastest by median: **poll**"), "{md}");
        assert!(md.contains("Shape of Fig. 7"), "{md}");
        assert_eq!(
            r.rows
                .iter()
                .filter(|x| x.case.starts_with("Fig. 7"))
                .count(),
            32
        );
    }

    #[test]
    fn a_broken_shape_is_reported() {
        let mut d = data();
        // L-R cheaper than L-R->R-R at every n.
        for c in d.spread.iter_mut().filter(|c| c.case == "L-R") {
            c.ticks = 1.0;
        }
        let r = build_report(&d).unwrap();
        let c = r
            .checks
            .iter()
            .find(|c| c.name.starts_with("Fig. 7: values"))
            .unwrap();
        assert_eq!(c.value, 0.0);
        assert!(!c.holds);
        assert!(r.markdown().contains("Shape of Fig. 7 (L-L < R-R < L-R->R-R < L-R at every n, and migrating half-way grows more slowly than staying remote): does NOT hold"));
    }
}
