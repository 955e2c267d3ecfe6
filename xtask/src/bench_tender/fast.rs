//! The fast design's section of `cargo xtask bench tender` (issue 13, "RPCC fixed cost"):
//! Figs. 4 and 5's create and delete once more, booted with [`FAST_OPTIONS`] (the daemon
//! performs short requests itself, the requesting thread halts in place), beside P4's
//! design with agents unlimited; the remote / local ratios and the fixed cost per remote
//! operation, all computed from the rows.

use super::figures::yes;
use super::{Data, FAST_OPTIONS, FIXED_COST_TARGET, LIMITS, RATIO_MOONSHOT, RATIO_TARGET};
use crate::results::{Check, Row};

/// The fast design's rows ("create remote, fast", ...) and checks, and its note.
///
/// The fixed cost of a remote operation is what RPCC adds to the same operation done
/// locally, measured on the delete of a 4 KiB vregion: remote median - local median, from
/// the same boot. A delete's request carries only the id, so the difference is RPCC's own
/// cost (sending, notifying, performing elsewhere, answering, waking); a create's also
/// carries the name and arguments (copied into the request, freed after the answer), a
/// per-operation cost shown beside it.
pub(super) fn fast_design(d: &Data, rows: &mut Vec<Row>, checks: &mut Vec<Check>) -> String {
    let f = &d.fast;
    let p4 = &d.ops[LIMITS.len() - 1];
    let local_c = Row::from_samples("create local, fast", &f.create_local);
    let remote_c = Row::from_samples("create remote, fast", &f.create_remote);
    let local_d = Row::from_samples("delete local, fast", &f.delete_local);
    let remote_d = Row::from_samples("delete remote, fast", &f.delete_remote);
    let med = |v: &[f64]| Row::from_samples("", v).median;
    let (p4_lc, p4_rc, p4_ld, p4_rd) = (
        med(&p4.create_local),
        med(&p4.create_remote),
        med(&p4.delete_local),
        med(&p4.delete_remote),
    );
    let ratio_c = remote_c.median / local_c.median;
    let ratio_d = remote_d.median / local_d.median;
    let fixed_c = remote_c.median - local_c.median;
    let fixed_d = remote_d.median - local_d.median;
    let fixed = fixed_d;
    let reps = d.runs.max(1) as f64;
    let mut note = format!(
        "**The fast design** (issue 13, not P4's; `{FAST_OPTIONS}`, `rpcc.notify=ipi`, one \
         more deterministic boot): core 1's RPCC daemon performs short requests itself where \
         they arrive (no agent is woken or switched to; short = never blocks: vregion \
         operations, lists, infos, the request path's enqueue and delivery), and the thread \
         on core 0 that waits for the answer halts in place instead of switching to the idle \
         context. The fixed cost of a remote operation is what RPCC adds to the same \
         operation done locally, measured on the delete (remote median - local median, from \
         the same boot): a delete's request carries only the id, so the difference is \
         RPCC's own cost; a create's difference also counts copying the name and arguments \
         into the request.\n\n\
         | operation | local | remote | remote / local | remote - local | P4 design (agents \
         unlimited): remote / local, remote - local |\n\
         |---|---:|---:|---:|---:|---:|\n\
         | create | {:.0} | {:.0} | {:.2} | {:.0} | {:.2}, {:.0} |\n\
         | delete | {:.0} | {:.0} | {:.2} | {:.0} | {:.2}, {:.0} |\n\n\
         Requests of a repetition performed by core 1's daemon itself: {:.0} of {:.0}; agents \
         created per repetition: {:.1}; waits on core 0 that halted in place: {:.0}.\n",
        local_c.median,
        remote_c.median,
        ratio_c,
        fixed_c,
        p4_rc / p4_lc,
        p4_rc - p4_lc,
        local_d.median,
        remote_d.median,
        ratio_d,
        fixed_d,
        p4_rd / p4_ld,
        p4_rd - p4_ld,
        f.inline_served as f64 / reps,
        f.served as f64 / reps,
        f.agents_created as f64 / reps,
        f.halted_waits as f64 / reps,
    );
    for (op, ratio) in [("create", ratio_c), ("delete", ratio_d)] {
        checks.push(Check::computed(
            &format!("fast design: remote / local {op} (median)"),
            ratio,
            &format!("<= {RATIO_TARGET} (moonshot {RATIO_MOONSHOT})"),
            ratio <= RATIO_TARGET,
        ));
    }
    checks.push(Check::computed(
        "fast design: fixed cost per remote operation (remote - local delete, median)",
        fixed,
        &format!("< {FIXED_COST_TARGET:.0}"),
        fixed < FIXED_COST_TARGET,
    ));
    let holds = ratio_c <= RATIO_TARGET && ratio_d <= RATIO_TARGET && fixed < FIXED_COST_TARGET;
    let moon = ratio_c <= RATIO_MOONSHOT && ratio_d <= RATIO_MOONSHOT;
    note += &format!(
        "\nTargets (remote / local <= {RATIO_TARGET} for create and delete, fixed cost < \
         {FIXED_COST_TARGET:.0} instructions): {}; moonshot (<= {RATIO_MOONSHOT}): {}.",
        yes(holds),
        yes(moon)
    );
    rows.extend([local_c, remote_c, local_d, remote_d]);
    note
}
