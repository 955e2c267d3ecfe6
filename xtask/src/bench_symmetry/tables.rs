//! The tables and the reading of `cargo xtask bench symmetry`'s report, computed from its
//! rows: Figure 3 (speed-ups beside P2's statements), Figure 4 (mode shares), and the
//! system-call benchmark's speed-up taken apart into the factors P2's formula assumes away.

use super::report::{
    cores_label, median, share_row, speedup_row, wall_row, CHECKED_CORES, TOLERANCE,
};
use super::{Data, CORES, KERNELS, WORKLOADS};
use crate::results::Row;
use abi::{MODE_COUNT, MODE_INTERRUPT, MODE_KERNEL, MODE_LOCK, MODE_NAMES, MODE_USER};

/// The system-call benchmark's speed-up taken apart, from the rows. With `K` the time
/// spent holding the kernel (kernel + interrupt, summed over the cores) and `T` the wall
/// time, T1/TN = h / (g * s1) (an identity for one run; from medians, nearly), where
/// s1 = K1/T1 is the one-core system share (1/s1 is near P2's 1 + user/system), g = KN/K1
/// how much the kernel's time for the same work grew on N cores, and h = KN/TN the share of
/// the wall time the (big) lock was held. P2's formula is the case g = 1, h = 1.
pub fn decomposition(rows: &[Row], d: &Data) -> String {
    let n = CHECKED_CORES;
    let (one, cn) = (cores_label(1, d.host_cores), cores_label(n, d.host_cores));
    let get = |name: String| median(rows, &name).unwrap_or(f64::NAN);
    let held = |k: &str, c: &str| {
        get(share_row(MODE_KERNEL, k, "sysbound", c))
            + get(share_row(MODE_INTERRUPT, k, "sysbound", c))
    };
    let mut parts = Vec::new();
    let mut growth = Vec::new();
    let mut big_lock_factors = None;
    for k in KERNELS {
        let (t1, tn) = (
            get(wall_row(k, "sysbound", &one)),
            get(wall_row(k, "sysbound", &cn)),
        );
        let (k1, kn) = (held(k, &one) * t1, held(k, &cn) * n as f64 * tn);
        let (s1, g, h) = (k1 / t1, kn / k1, kn / tn);
        let user_growth = get(share_row(MODE_USER, k, "sysbound", &cn)) * n as f64 * tn
            / (get(share_row(MODE_USER, k, "sysbound", &one)) * t1);
        growth.push((k, g));
        if k == "biglock" {
            big_lock_factors = Some((g, h));
        }
        parts.push(if k == "biglock" {
            format!(
                "kernel={k}: speed-up {:.2} = h / (g x s1) = {h:.2} / ({g:.2} x {s1:.3}); 1/s1 = \
                 {:.2}, near P2's 1 + user/system; the kernel's time for the same work grew by \
                 {:.0}% (g) and its user time by {:.0}%, and the lock was held {:.0}% of the wall \
                 time (h) while the cores spent {:.0}% of theirs waiting for it",
                t1 / tn,
                1.0 / s1,
                (g - 1.0) * 100.0,
                (user_growth - 1.0) * 100.0,
                h * 100.0,
                get(share_row(MODE_LOCK, k, "sysbound", &cn)) * 100.0
            )
        } else {
            format!(
                "kernel={k}: speed-up {:.2}, the kernel's time for the same work grew by {:.0}% \
                 and its user time by {:.0}% (no lock: each core's kernel runs alone)",
                t1 / tn,
                (g - 1.0) * 100.0,
                (user_growth - 1.0) * 100.0
            )
        });
    }
    // Which of the formula's assumptions (g = 1, h = 1) the big-lock figures break, beyond
    // the checks' tolerance.
    let (g_big, h_big) = big_lock_factors.unwrap_or((f64::NAN, f64::NAN));
    let costlier = g_big > 1.0 + TOLERANCE;
    let not_busy = h_big < 1.0 - TOLERANCE;
    let mut reading = match (costlier, not_busy) {
        (true, true) => "So both of the formula's assumptions fail here".to_string(),
        (true, false) | (false, true) => "So one of the formula's assumptions fails here".into(),
        (false, false) => "So the formula's assumptions hold here".into(),
    };
    reading += &format!(
        " ({} +- {:.0}%).",
        if costlier || not_busy {
            "beyond"
        } else {
            "within"
        },
        TOLERANCE * 100.0
    );
    if costlier {
        reading += &format!(
            " The kernel's work costs more when {n} vCPUs run at once ({}): emulated CPUs \
             share the host (its caches and memory, and QEMU's own shared state), as P2's CPUs \
             shared a system bus, which is how P2 explains Dhrystone falling short of N \
             (\"システムバスのアクセス競合\").",
            growth
                .iter()
                .map(|(k, g)| format!("{k}: {:+.0}%", (g - 1.0) * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if not_busy {
        reading += " Under the big lock the lock is not always busy while a core waits: each \
             system call of a round hands it over. A likely reason, not measured separately: \
             QEMU's TCG runs the `pause` in the waiter's spin loop by leaving the vCPU's \
             translated code (target/i386/tcg/misc_helper.c, `do_pause`: \"let another CPU \
             run\"), and a multi-threaded TCG vCPU takes QEMU's global lock each time it leaves \
             (accel/tcg/tcg-accel-ops-mttcg.c), so a waiter notices a released lock later than \
             a real CPU would.";
    }
    format!(
        "Reading the system-call benchmark ({cn}, from the medians; with K the time spent in \
         kernel and interrupt mode summed over the cores and T the wall time, T1/TN = h / (g x \
         s1), nearly, with s1 = K1/T1, g = KN/K1 and h = KN/TN; P2's 1 + user/system is 1/s1, \
         the case g = 1 and h = 1): {}. {reading}",
        parts.join("; "),
    )
}

/// Figure 3 as a table: speed-ups beside the paper's statements.
pub fn fig3_table(rows: &[Row], d: &Data, formula: f64) -> String {
    let label = |c: usize| cores_label(c, d.host_cores);
    let mut s = String::from(
        "Figure 3 (speed-up T1/TN, median [q1 .. q3]):\n\n| workload | kernel | T1 (s) |",
    );
    for c in CORES.into_iter().filter(|&c| c > 1) {
        s += &format!(" {} |", label(c));
    }
    s += " P2 (text) |\n|---|---|---:|";
    for _ in CORES.iter().filter(|&&c| c > 1) {
        s += "---:|";
    }
    s += "---|\n";
    for w in WORKLOADS {
        for k in KERNELS {
            let t1 = median(rows, &wall_row(k, w, &label(1))).unwrap_or(f64::NAN);
            s += &format!("| {w} | {k} | {t1:.3} |");
            for c in CORES.into_iter().filter(|&c| c > 1) {
                match rows.iter().find(|r| r.case == speedup_row(k, w, &label(c))) {
                    Some(r) => s += &format!(" {:.2} [{:.2} .. {:.2}] |", r.median, r.q1, r.q3),
                    None => s += " - |",
                }
            }
            let paper = match (w, k) {
                ("sysbound", "biglock") => {
                    format!("1 + user/system, flat (ours at {CHECKED_CORES}: {formula:.2})")
                }
                ("sysbound", _) => "- (P2 has only the big lock)".into(),
                _ => "almost N (\"ほぼCPU台数分\")".into(),
            };
            s += &format!(" {paper} |\n");
        }
    }
    s
}

/// Figure 4 as a table: the median share of each mode.
pub fn fig4_table(rows: &[Row], d: &Data) -> String {
    let label = |c: usize| cores_label(c, d.host_cores);
    let mut s = String::from(
        "Figure 4 (share of all cores' time per mode, medians; P2: 3 CPUs):\n\n\
         | workload | kernel | cores |",
    );
    for m in MODE_NAMES {
        s += &format!(" {m} |");
    }
    s += " P2 lock |\n|---|---|---|";
    for _ in MODE_NAMES {
        s += "---:|";
    }
    s += "---|\n";
    for c in CORES {
        for w in WORKLOADS {
            for k in KERNELS {
                s += &format!("| {w} | {k} | {} |", label(c));
                for m in 0..MODE_COUNT {
                    let v = median(rows, &share_row(m, k, w, &label(c))).unwrap_or(f64::NAN);
                    s += &format!(" {:.1}% |", v * 100.0);
                }
                let paper = match (w, k) {
                    ("sysbound", "biglock") => "nearly half",
                    (_, "biglock") => "< 10%",
                    _ => "-",
                };
                s += &format!(" {paper} |\n");
            }
        }
    }
    s
}
