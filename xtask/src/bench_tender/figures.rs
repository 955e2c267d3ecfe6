//! The figures of `cargo xtask bench tender`, each computed from the samples alone: its
//! rows (medians and quartiles), its checks against the paper's shape and the issue's
//! targets, and its markdown table with the sentence that says whether the shape holds.
//! Each section adds its rows and checks to the report's lists and returns its note;
//! [`super::report::build_report`] calls them in the report's order. The plot reads medians
//! through [`child_median`] too.

use super::{
    ChildRun, Data, CASES, CHILDREN, DEFAULT_NOTIFY, FIG7_N, FIG8_N, LIMITS, NOTIFY, NOTIFY_TARGET,
    P4_CLOSE_LOCAL, P4_CLOSE_REMOTE, P4_OPEN_LOCAL, P4_OPEN_REMOTE, P4_OVERHEAD_ONE_SHOT,
    P4_OVERHEAD_REUSE, RATIO_TARGET, RCC_TARGET,
};
use crate::results::{Check, Row};

/// P4 section 4.2.2's rough figures: a local open and close (ms).
pub(super) const P4_ROUGH_LOCAL_MS: (f64, f64) = (0.002, 0.001);
/// P4 section 4.2.2: what a remote operation adds to a local one (ms).
pub(super) const P4_ROUGH_REMOTE_EXTRA_MS: f64 = 0.05;

/// Samples per repetition of one operation in an ops boot (`user/tender` prints the
/// middle ones of each repetition).
fn samples_per_rep(d: &Data, r: &super::OpsRun) -> usize {
    r.create_local.len() / d.runs.max(1)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Least-squares slope of y over x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let num: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let den: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

fn check(name: &str, value: f64, target: &str, paper: Option<f64>, holds: bool) -> Check {
    Check {
        name: name.into(),
        value: round3(value),
        target: target.into(),
        paper: paper.map(round3),
        holds,
    }
}

pub(super) fn yes(b: bool) -> &'static str {
    if b {
        "holds"
    } else {
        "does NOT hold"
    }
}

/// The samples of child runs of `case`, `child`, `n`.
fn child_runs<'a>(d: &'a Data, case: &str, child: &str, n: u64) -> Vec<&'a ChildRun> {
    d.spread
        .iter()
        .filter(|r| r.case == case && r.child == child && r.n == n)
        .collect()
}

/// Median time of the child runs of `case`, `child`, `n` (0 if none).
pub(super) fn child_median(d: &Data, case: &str, child: &str, n: u64) -> f64 {
    let t: Vec<f64> = child_runs(d, case, child, n)
        .iter()
        .map(|r| r.ticks)
        .collect();
    if t.is_empty() {
        0.0
    } else {
        Row::from_samples("", &t).median
    }
}

/// Median RPCC requests (and messages) of the child runs of `case`, `child`, `n`.
fn child_rpcc(d: &Data, case: &str, child: &str, n: u64) -> (f64, f64) {
    let runs = child_runs(d, case, child, n);
    if runs.is_empty() {
        return (0.0, 0.0);
    }
    let q: Vec<f64> = runs.iter().map(|r| r.requests as f64).collect();
    let m: Vec<f64> = runs.iter().map(|r| r.messages as f64).collect();
    (
        Row::from_samples("", &q).median,
        Row::from_samples("", &m).median,
    )
}

/// The paper's remote / local ratios with RCC on (Table 5): open, close.
pub(super) fn paper_ratios() -> (f64, f64) {
    (
        P4_OPEN_REMOTE.1 / P4_OPEN_LOCAL.1,
        P4_CLOSE_REMOTE.1 / P4_CLOSE_LOCAL.1,
    )
}

/// Figs. 4 and 5: create and delete, local and remote by agent limit; their rows and
/// checks, and the table.
pub(super) fn figs_4_5(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let unlimited = &d.ops[LIMITS.len() - 1];
    let per_rep = samples_per_rep(d, unlimited);
    let mut fig45 = format!(
        "**Figs. 4 and 5** (creation / deletion of a 4 KiB vregion, median instructions of the \
         middle {per_rep} operations of each repetition; overhead = remote - local; paper in \
         ms):\n\n\
         | agents | create remote | create overhead | delete remote | delete overhead | \
         overhead / reuse overhead (create, delete) | paper overhead |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    let local_c = Row::from_samples("Fig. 4 create, local (c0)", &unlimited.create_local);
    let local_d = Row::from_samples("Fig. 5 delete, local (c0)", &unlimited.delete_local);
    let remote_c: Vec<Row> = LIMITS
        .iter()
        .zip(&d.ops)
        .map(|(l, r)| {
            Row::from_samples(
                &format!("Fig. 4 create, remote (c1), agents={l}"),
                &r.create_remote,
            )
        })
        .collect();
    let remote_d: Vec<Row> = LIMITS
        .iter()
        .zip(&d.ops)
        .map(|(l, r)| {
            Row::from_samples(
                &format!("Fig. 5 delete, remote (c1), agents={l}"),
                &r.delete_remote,
            )
        })
        .collect();
    let over_c = |i: usize| remote_c[i].median - local_c.median;
    let over_d = |i: usize| remote_d[i].median - local_d.median;
    let last = LIMITS.len() - 1;
    for (i, l) in LIMITS.iter().enumerate() {
        let paper = match i {
            0 => format!("{P4_OVERHEAD_ONE_SHOT}"),
            _ if i == last => format!("{P4_OVERHEAD_REUSE}"),
            _ => "-".into(),
        };
        fig45 += &format!(
            "| {l} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}, {:.2} | {paper} |\n",
            remote_c[i].median,
            over_c(i),
            remote_d[i].median,
            over_d(i),
            over_c(i) / over_c(last),
            over_d(i) / over_d(last)
        );
    }
    fig45 += &format!(
        "| local | {:.0} (create) | - | {:.0} (delete) | - | - | {}, {} ms |\n\n\
         Agents created on core 1 per repetition (remote requests served there per \
         repetition): {}.\n",
        local_c.median,
        local_d.median,
        P4_ROUGH_LOCAL_MS.0,
        P4_ROUGH_LOCAL_MS.1,
        LIMITS
            .iter()
            .zip(&d.ops)
            .map(|(l, r)| format!(
                "{:.1} ({:.0}) with agents={l}",
                r.agents_created as f64 / d.runs.max(1) as f64,
                r.served as f64 / d.runs.max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Within one repetition the samples are in creation order: does a create cost more
    // the more regions the core already holds?
    let first: Vec<(f64, f64)> = unlimited
        .create_local
        .iter()
        .take(per_rep)
        .enumerate()
        .map(|(i, &t)| (i as f64, t))
        .collect();
    fig45 += &format!(
        "\nA local create costs {:.0} more instructions for each region the core already \
         holds (slope over the {per_rep} creations of the first repetition, agents \
         unlimited).\n",
        slope(&first)
    );
    let ratio_c = remote_c[last].median / local_c.median;
    let ratio_d = remote_d[last].median / local_d.median;
    let (paper_ratio_c, paper_ratio_d) = paper_ratios();
    checks.push(check(
        "Fig. 4: remote / local create (median, agents unlimited)",
        ratio_c,
        &format!("<= {RATIO_TARGET}"),
        Some(paper_ratio_c),
        ratio_c <= RATIO_TARGET,
    ));
    checks.push(check(
        "Fig. 5: remote / local delete (median, agents unlimited)",
        ratio_d,
        &format!("<= {RATIO_TARGET}"),
        Some(paper_ratio_d),
        ratio_d <= RATIO_TARGET,
    ));
    let paper_saving = P4_OVERHEAD_ONE_SHOT / P4_OVERHEAD_REUSE;
    let mut shape45 = true;
    for (fig, op, over, remote) in [
        (
            "Fig. 4",
            "create",
            &over_c as &dyn Fn(usize) -> f64,
            &remote_c,
        ),
        ("Fig. 5", "delete", &over_d, &remote_d),
    ] {
        let saving = over(0) / over(last);
        checks.push(check(
            &format!("{fig}: remote {op} overhead, one-shot agents / reused agents"),
            saving,
            "> 1",
            Some(paper_saving),
            saving > 1.0,
        ));
        let steps = remote
            .windows(2)
            .filter(|w| w[1].median <= w[0].median)
            .count();
        checks.push(check(
            &format!(
                "{fig}: remote {op} median does not rise as the agent limit rises (steps of {})",
                LIMITS.len() - 1
            ),
            steps as f64,
            &format!("= {}", LIMITS.len() - 1),
            None,
            steps == LIMITS.len() - 1,
        ));
        shape45 &= saving > 1.0 && steps == LIMITS.len() - 1;
    }
    rows.push(local_c);
    rows.extend(remote_c.iter().cloned());
    rows.push(local_d);
    rows.extend(remote_d.iter().cloned());
    fig45 += &format!(
        "\nShape of Figs. 4/5 (remote costs fall as agents are reused; remote / local ≈ {:.0} for \
         create and {:.0} for delete in the paper, {:.1} and {:.1} here): {}.",
        paper_ratio_c,
        paper_ratio_d,
        ratio_c,
        ratio_d,
        yes(shape45)
    );
    fig45
}

/// Table 5: what the rights checks cost, locally and remotely (agents unlimited).
pub(super) fn table_5(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let unlimited = &d.ops[LIMITS.len() - 1];
    let mut t5 = format!(
        "**Table 5** (RCC off / on, agents unlimited; mean of the middle {} of each \
         repetition; ours in instructions, the paper in µs):\n\n\
         | operation | off | on | overhead | share | paper off | paper on | paper share |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        samples_per_rep(d, unlimited)
    );
    for (label, off, on, paper) in [
        (
            "open core 0",
            &d.rcc_off.create_local,
            &unlimited.create_local,
            P4_OPEN_LOCAL,
        ),
        (
            "open core 1",
            &d.rcc_off.create_remote,
            &unlimited.create_remote,
            P4_OPEN_REMOTE,
        ),
        (
            "close core 0",
            &d.rcc_off.delete_local,
            &unlimited.delete_local,
            P4_CLOSE_LOCAL,
        ),
        (
            "close core 1",
            &d.rcc_off.delete_remote,
            &unlimited.delete_remote,
            P4_CLOSE_REMOTE,
        ),
    ] {
        let (off_m, on_m) = (mean(off), mean(on));
        let share = on_m / off_m - 1.0;
        let paper_share = paper.1 / paper.0 - 1.0;
        t5 += &format!(
            "| {label} | {off_m:.0} | {on_m:.0} | {:.0} | {:.1}% | {} | {} | {:.1}% |\n",
            on_m - off_m,
            share * 100.0,
            paper.0,
            paper.1,
            paper_share * 100.0
        );
        rows.push(Row::from_samples(&format!("Table 5 {label}, rcc=off"), off));
        if label.ends_with("core 1") {
            checks.push(check(
                &format!(
                    "Table 5: RCC share of the remote {} (on / off - 1, mean)",
                    label.split_whitespace().next().unwrap_or(label)
                ),
                share,
                &format!("< {RCC_TARGET}"),
                Some(paper_share),
                share < RCC_TARGET,
            ));
        }
    }
    let share = |off: &[f64], on: &[f64]| mean(on) / mean(off) - 1.0;
    let shape_of = |what: &str, local: f64, remote: f64| {
        format!(
            "{what}: {} ({:.1}% remotely against {:.1}% locally)",
            yes(remote < local),
            remote * 100.0,
            local * 100.0
        )
    };
    t5 += &format!(
        "\nShape of Table 5 (RCC's share is smaller remotely than locally): {}; {}. (The \
         rcc=on figures are the Fig. 4/5 rows with agents unlimited. Musubi's open checks no \
         rights, since the creator gets them, and records the rights whether the checks are on \
         or off; the paper's local open overhead is the cost of setting them.)",
        shape_of(
            "open",
            share(&d.rcc_off.create_local, &unlimited.create_local),
            share(&d.rcc_off.create_remote, &unlimited.create_remote)
        ),
        shape_of(
            "close",
            share(&d.rcc_off.delete_local, &unlimited.delete_local),
            share(&d.rcc_off.delete_remote, &unlimited.delete_remote)
        )
    );
    t5
}

/// Figs. 6 and 7, Table 6: the four placements of the child with n = 10..80 pairs, and the
/// RPCC requests each cost.
pub(super) fn fig_7_table_6(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let (base, base_kib) = CHILDREN[0];
    let (first_n, last_n) = (FIG7_N[0], FIG7_N[FIG7_N.len() - 1]);
    let mut f7 = format!(
        "**Fig. 7** (child `{base}`, {base_kib} KiB text; median instructions from spawn to the \
         parent's WAIT; RPCC requests performed and messages sent per run):\n\n| case |",
    );
    for n in FIG7_N {
        f7 += &format!(" n={n} |");
    }
    f7 += &format!(
        " requests (n={first_n}, {last_n}) | messages (n={first_n}, {last_n}) | paper RPCC calls \
         (Table 6) |\n|---|"
    );
    f7 += &"---:|".repeat(FIG7_N.len() + 3);
    f7 += "\n";
    for case in CASES {
        f7 += &format!("| {case} |");
        for n in FIG7_N {
            let t: Vec<f64> = child_runs(d, case, base, n)
                .iter()
                .map(|r| r.ticks)
                .collect();
            if t.is_empty() {
                f7 += " - |";
                continue;
            }
            let row = Row::from_samples(&format!("Fig. 7 {case}, n={n}"), &t);
            f7 += &format!(" {:.0} |", row.median);
            rows.push(row);
        }
        let (q10, m10) = child_rpcc(d, case, base, first_n);
        let (q80, m80) = child_rpcc(d, case, base, last_n);
        let paper = match case {
            "L-L" => "0",
            "R-R" => "5 (placing and starting)",
            "L-R" => "one per operation",
            _ => "5 + half the operations",
        };
        f7 += &format!(" {q10:.0}, {q80:.0} | {m10:.0}, {m80:.0} | {paper} |\n");
    }
    let order_at = |n: u64| {
        CASES
            .windows(2)
            .all(|w| child_median(d, w[0], base, n) < child_median(d, w[1], base, n))
    };
    let in_order = FIG7_N.iter().filter(|&&n| order_at(n)).count();
    checks.push(check(
        &format!(
            "Fig. 7: values of n at which L-L < R-R < L-R->R-R < L-R (of {})",
            FIG7_N.len()
        ),
        in_order as f64,
        &format!("= {}", FIG7_N.len()),
        None,
        in_order == FIG7_N.len(),
    ));
    let case_slope = |case: &str| {
        let pts: Vec<(f64, f64)> = FIG7_N
            .iter()
            .map(|&n| (n as f64, child_median(d, case, base, n)))
            .collect();
        slope(&pts)
    };
    let slope_ratio = case_slope("L-R->R-R") / case_slope("L-R");
    checks.push(check(
        "Fig. 7: growth with n, L-R->R-R / L-R (slopes)",
        slope_ratio,
        "< 1",
        None,
        slope_ratio < 1.0,
    ));
    let ll_requests = FIG7_N
        .iter()
        .map(|&n| child_rpcc(d, "L-L", base, n).0)
        .fold(0.0, f64::max);
    checks.push(check(
        "Table 6: RPCC requests of L-L (most over n)",
        ll_requests,
        "= 0",
        Some(0.0),
        ll_requests == 0.0,
    ));
    let (n0, n1) = (FIG7_N[0], FIG7_N[FIG7_N.len() - 1]);
    let per_op = (child_rpcc(d, "L-R", base, n1).0 - child_rpcc(d, "L-R", base, n0).0)
        / (2 * (n1 - n0)) as f64;
    checks.push(check(
        "Table 6: L-R RPCC requests per remote operation (growth with n)",
        per_op,
        "= 1",
        Some(1.0),
        (per_op - 1.0).abs() < 1e-9,
    ));
    let rr: Vec<f64> = FIG7_N
        .iter()
        .map(|&n| child_rpcc(d, "R-R", base, n).0)
        .collect();
    let rr_const = rr.iter().all(|&x| x == rr[0]);
    checks.push(check(
        "Table 6: R-R RPCC requests (placing and starting the child; the same for every n)",
        rr[0],
        "constant in n",
        Some(5.0),
        rr_const,
    ));
    let half = (child_rpcc(d, "L-R->R-R", base, n1).0 - child_rpcc(d, "L-R->R-R", base, n0).0)
        / (child_rpcc(d, "L-R", base, n1).0 - child_rpcc(d, "L-R", base, n0).0);
    checks.push(check(
        "Table 6: growth of L-R->R-R requests / growth of L-R requests",
        half,
        "= 0.5",
        Some(0.5),
        (half - 0.5).abs() < 0.02,
    ));
    // What migrating costs: L-R->R-R does half its pairs remotely and half locally, so
    // without the move it would cost the mean of L-R and L-L.
    let migration: Vec<f64> = FIG7_N
        .iter()
        .map(|&n| {
            child_median(d, "L-R->R-R", base, n)
                - (child_median(d, "L-R", base, n) + child_median(d, "L-L", base, n)) / 2.0
        })
        .collect();
    let migration = Row::from_samples("", &migration).median;
    let remote_pair = case_slope("L-R") - case_slope("L-L");
    let failing: Vec<String> = FIG7_N
        .iter()
        .filter(|&&n| !order_at(n))
        .map(|n| n.to_string())
        .collect();
    f7 += &format!(
        "\nShape of Fig. 7 (L-L < R-R < L-R->R-R < L-R at every n, and migrating half-way \
         grows more slowly than staying remote): {}. Order held at {in_order} of {} values of n{}; \
         slope ratio L-R->R-R / L-R = {slope_ratio:.2}. Migrating the child costs about {:.0} \
         instructions (L-R->R-R minus the mean of L-R and L-L, median over n), the price of \
         {:.1} remote create+delete pairs over local ones ({:.0} instructions each, the slope of \
         L-R minus that of L-L): moving half-way pays off when more than that many pairs remain, \
         i.e. from n = {:.0} on. The paper found the migration's cost small.\n\n\
         Table 6: fixed RPCC requests, ours against the paper's 5: placing and starting a child \
         on core 1 (R-R) {:.0}; migrating (L-R->R-R requests minus one per remote operation, \
         n = 80) {:.0}.",
        yes(in_order == FIG7_N.len() && slope_ratio < 1.0),
        FIG7_N.len(),
        if failing.is_empty() {
            String::new()
        } else {
            format!(" (not at n = {})", failing.join(", "))
        },
        migration,
        migration / remote_pair,
        remote_pair,
        2.0 * migration / remote_pair,
        rr[0],
        child_rpcc(d, "L-R->R-R", base, n1).0 - n1 as f64
    );
    f7
}

/// Fig. 8: the four placements with the child's text 4..32 KiB.
pub(super) fn fig_8(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let mut f8 = format!(
        "**Fig. 8** (n = {FIG8_N}; median instructions from spawn to WAIT, by the child's text \
         segment):\n\n| case |"
    );
    for (i, (_, kib)) in CHILDREN.iter().enumerate() {
        f8 += &format!(
            " {kib} KiB ({} B) |",
            d.text_bytes.get(i).copied().unwrap_or(0)
        );
    }
    f8 += " slope (instructions per KiB) |\n|---|";
    f8 += &"---:|".repeat(CHILDREN.len() + 1);
    f8 += "\n";
    let mut slopes = Vec::new();
    for case in CASES {
        f8 += &format!("| {case} |");
        let mut pts = Vec::new();
        for (child, kib) in CHILDREN {
            let t: Vec<f64> = child_runs(d, case, child, FIG8_N)
                .iter()
                .map(|r| r.ticks)
                .collect();
            if t.is_empty() {
                f8 += " - |";
                continue;
            }
            let row = Row::from_samples(&format!("Fig. 8 {case}, text {kib} KiB"), &t);
            f8 += &format!(" {:.0} |", row.median);
            pts.push((kib as f64, row.median));
            rows.push(row);
        }
        let s = slope(&pts);
        f8 += &format!(" {s:.0} |\n");
        slopes.push(s);
    }
    let migrating = slopes[2];
    let others = slopes[0].max(slopes[1]).max(slopes[3]);
    let fig8_ratio = migrating / others.max(f64::MIN_POSITIVE);
    checks.push(check(
        "Fig. 8: growth with text size, L-R->R-R / the fastest-growing other case (slopes)",
        fig8_ratio,
        "> 1",
        None,
        fig8_ratio > 1.0,
    ));
    f8 += &format!(
        "\nShape of Fig. 8 (the migrating case grows fastest with the text size; the other three \
         grow alike): {}.",
        yes(fig8_ratio > 1.0)
    );
    f8
}

/// Parallel mode: the wall-clock latency of each notification mode.
pub(super) fn parallel(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let mut par = String::from(
        "**Parallel mode** (wall-clock ns per create+delete pair of a 4 KiB vregion, each \
         sample the mean of 500 pairs):\n\n\
         | rpcc.notify | remote median | remote q1-q3 | local median | remote / local |\n\
         |---|---:|---:|---:|---:|\n",
    );
    let mut medians = Vec::new();
    for (notify, (remote, local)) in NOTIFY.iter().zip(&d.rtt) {
        let r = Row::from_samples(
            &format!("parallel: remote create+delete, notify={notify} [wall ns]"),
            remote,
        );
        let l = Row::from_samples(
            &format!("parallel: local create+delete, notify={notify} [wall ns]"),
            local,
        );
        par += &format!(
            "| {notify} | {:.0} | {:.0}-{:.0} | {:.0} | {:.1} |\n",
            r.median,
            r.q1,
            r.q3,
            l.median,
            r.median / l.median
        );
        medians.push(r.median);
        rows.push(r);
        rows.push(l);
    }
    let (fastest, best) = NOTIFY
        .iter()
        .zip(&medians)
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(n, m)| (*n, *m))
        .unwrap_or(("?", 1.0));
    let default = medians[NOTIFY
        .iter()
        .position(|n| *n == DEFAULT_NOTIFY)
        .unwrap_or(0)];
    let default_ratio = default / best;
    checks.push(check(
        "parallel: remote latency of the default notify (hybrid) / the fastest mode's (medians)",
        default_ratio,
        &format!("<= {NOTIFY_TARGET}"),
        None,
        default_ratio <= NOTIFY_TARGET,
    ));
    let rows_of = |i: usize| Row::from_samples("", &d.rtt[i].0);
    let best_i = NOTIFY.iter().position(|n| *n == fastest).unwrap_or(0);
    let overlap = (0..NOTIFY.len())
        .filter(|&i| i != best_i)
        .any(|i| rows_of(i).q1 <= rows_of(best_i).q3);
    par +=
        &format!(
        "\nFastest by median: **{fastest}**. The kernel's default, {DEFAULT_NOTIFY}, is {:.0}% \
         slower than the fastest, so the default {}. {}\n\n\
         Wall time of each parallel boot (s): {}.",
        (default_ratio - 1.0) * 100.0,
        if default_ratio <= NOTIFY_TARGET {
            format!(
                "is a right choice (within {:.0}% of the fastest)",
                (NOTIFY_TARGET - 1.0) * 100.0
            )
        } else {
            "is NOT the right choice on this evidence".to_string()
        },
        if overlap {
            "The quartile ranges overlap, so the ranking is not firm: parallel mode on a shared \
             host is noisy."
        } else {
            "The fastest mode's quartile range lies below the others'."
        },
        NOTIFY
            .iter()
            .zip(&d.rtt_boot_s)
            .map(|(n, t)| format!(
                "{n} {}",
                t.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    par
}
