//! [`build_report`]: the rows, checks and notes of `cargo xtask bench symmetry`. Every
//! check is computed from the rows (medians), which are computed from the samples; the
//! tests run it all on made-up samples.

use super::tables::{decomposition, fig3_table, fig4_table};
use super::{Data, Sample, CORES, KERNELS, WORKLOADS};
use crate::results::{Check, Report, Row};
use abi::{MODE_COUNT, MODE_INTERRUPT, MODE_KERNEL, MODE_LOCK, MODE_NAMES, MODE_USER};
use anyhow::{bail, Result};

/// A speed-up is "near the core count" within this fraction of it, and the big-lock
/// system-call speed-up "near" P2's formula within this fraction of the formula's value.
pub const TOLERANCE: f64 = 0.15;
/// P2 section 3.2: lock spinning under ordinary use is at most this share.
pub const LOCK_ORDINARY: f64 = 0.10;
/// "About half" for the system-call benchmark, read as this range.
pub const LOCK_SYSCALL: (f64, f64) = (0.30, 0.70);
/// P2's text: the system-call benchmark's lock share, "nearly half" (半分近く).
pub const PAPER_LOCK_SYSCALL: f64 = 0.5;
/// The machine size the checks are made at (the largest that is not oversubscribed here).
pub const CHECKED_CORES: usize = 2;

/// "1 core", "2 cores", "4 vCPUs (oversubscribed)".
pub fn cores_label(cores: usize, host_cores: usize) -> String {
    match cores {
        1 => "1 core".into(),
        c if c > host_cores => format!("{c} vCPUs (oversubscribed)"),
        c => format!("{c} cores"),
    }
}

/// Row names.
pub fn wall_row(k: &str, w: &str, c: &str) -> String {
    format!("wall s: {k} {w}, {c}")
}
pub fn speedup_row(k: &str, w: &str, c: &str) -> String {
    format!("speed-up T1/TN: {k} {w}, {c}")
}
pub fn share_row(mode: usize, k: &str, w: &str, c: &str) -> String {
    format!("share {}: {k} {w}, {c}", MODE_NAMES[mode])
}
pub fn own_row(k: &str, c: &str) -> String {
    format!("sysbound's own kernel / (user + kernel): {k}, {c}")
}

/// A row's median by name.
pub fn median(rows: &[Row], name: &str) -> Option<f64> {
    rows.iter().find(|r| r.case == name).map(|r| r.median)
}

/// The share of each mode in one run: summed over the cores, over all their time.
pub fn shares(s: &Sample) -> [f64; MODE_COUNT] {
    let mut sum = [0.0; MODE_COUNT];
    for c in &s.modes {
        for (a, x) in sum.iter_mut().zip(c) {
            *a += x;
        }
    }
    let total: f64 = sum.iter().sum();
    sum.map(|x| if total > 0.0 { x / total } else { 0.0 })
}

fn of<'a>(d: &'a Data, k: &str, w: &str, cores: usize) -> Vec<&'a Sample> {
    d.samples
        .iter()
        .filter(|s| s.kernel == k && s.workload == w && s.cores == cores)
        .collect()
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn check(name: String, value: f64, target: String, paper: Option<f64>, holds: bool) -> Check {
    Check {
        name,
        value: round3(value),
        target,
        paper,
        holds,
    }
}

/// P2's relative performance of the system-call benchmark under the big lock, from one
/// core's mode shares: 1 + user / system (system = kernel + interrupt + lock), at most the
/// number of cores.
pub fn p2_formula(user: f64, system: f64, cores: usize) -> f64 {
    (1.0 + user / system).min(cores as f64)
}

/// Rows, checks and notes, all computed from `d` (the commit is left empty).
pub fn build_report(d: &Data) -> Result<Report> {
    let label = |c: usize| cores_label(c, d.host_cores);
    let mut rows = Vec::new();
    for k in KERNELS {
        for w in WORKLOADS {
            for c in CORES {
                let s = of(d, k, w, c);
                if s.is_empty() {
                    bail!("no runs of {w} with kernel={k} on {c} vCPUs");
                }
                let walls: Vec<f64> = s.iter().map(|x| x.wall_ns / 1e9).collect();
                rows.push(Row::from_samples(&wall_row(k, w, &label(c)), &walls));
            }
            // Speed-up: throughput (work per second) over the one-core run's median
            // throughput; with the same work, T1 / TN.
            let rate = |x: &Sample| x.work / x.wall_ns;
            let r1 = Row::from_samples(
                "r1",
                &of(d, k, w, 1).iter().map(|x| rate(x)).collect::<Vec<_>>(),
            )
            .median;
            for c in CORES.into_iter().filter(|&c| c > 1) {
                let ups: Vec<f64> = of(d, k, w, c).iter().map(|x| rate(x) / r1).collect();
                rows.push(Row::from_samples(&speedup_row(k, w, &label(c)), &ups));
            }
            for c in CORES {
                let sh: Vec<[f64; MODE_COUNT]> = of(d, k, w, c).iter().map(|s| shares(s)).collect();
                for m in 0..MODE_COUNT {
                    let v: Vec<f64> = sh.iter().map(|x| x[m]).collect();
                    rows.push(Row::from_samples(&share_row(m, k, w, &label(c)), &v));
                }
            }
        }
        for c in CORES {
            let own: Vec<f64> = d
                .selfs
                .iter()
                .filter(|s| s.kernel == k && s.cores == c)
                .map(|s| {
                    let (u, kn) = (s.mode_ns[MODE_USER], s.mode_ns[MODE_KERNEL]);
                    if u + kn > 0.0 {
                        kn / (u + kn)
                    } else {
                        0.0
                    }
                })
                .collect();
            if !own.is_empty() {
                rows.push(Row::from_samples(&own_row(k, &label(c)), &own));
            }
        }
    }

    let get = |name: &str| median(&rows, name).unwrap_or(f64::NAN);
    let n = CHECKED_CORES;
    let cn = label(n);
    let one = label(1);
    let mut checks = Vec::new();
    // Fig. 3: CPU-bound and make scale with the cores in both structures.
    for w in ["dhry", "pmake"] {
        for k in KERNELS {
            let v = get(&speedup_row(k, w, &cn));
            let (lo, hi) = (n as f64 * (1.0 - TOLERANCE), n as f64 * (1.0 + TOLERANCE));
            checks.push(check(
                format!("Fig. 3: {w} speed-up, kernel={k}, {cn}"),
                v,
                format!("{lo:.2} .. {hi:.2} ({n} +- {:.0}%)", TOLERANCE * 100.0),
                Some(n as f64),
                (lo..=hi).contains(&v),
            ));
        }
    }
    // Fig. 3: the system-call benchmark under the big lock follows 1 + user/system.
    let sys_share = |k: &str, m: usize| get(&share_row(m, k, "sysbound", &one));
    let (u1, s1) = (
        sys_share("biglock", MODE_USER),
        sys_share("biglock", MODE_KERNEL)
            + sys_share("biglock", MODE_INTERRUPT)
            + sys_share("biglock", MODE_LOCK),
    );
    let formula = p2_formula(u1, s1, n);
    let big = get(&speedup_row("biglock", "sysbound", &cn));
    let (lo, hi) = (formula * (1.0 - TOLERANCE), formula * (1.0 + TOLERANCE));
    checks.push(check(
        format!("Fig. 3: sysbound speed-up, kernel=biglock, {cn}"),
        big,
        format!(
            "{lo:.2} .. {hi:.2} (1 + user/system = 1 + {u1:.3}/{s1:.3} = {formula:.2}, +- {:.0}%)",
            TOLERANCE * 100.0
        ),
        None,
        (lo..=hi).contains(&big),
    ));
    let per = get(&speedup_row("percore", "sysbound", &cn));
    checks.push(check(
        format!("Fig. 3: sysbound speed-up, kernel=percore, {cn} (scales past the big lock)"),
        per,
        format!("> {big:.2} (kernel=biglock)"),
        None,
        per > big,
    ));
    // Fig. 4: lock spinning is small for ordinary work, about half for system calls.
    for w in WORKLOADS {
        let v = get(&share_row(MODE_LOCK, "biglock", w, &cn));
        let (target, paper, holds) = if w == "sysbound" {
            (
                format!("{:.2} .. {:.2}", LOCK_SYSCALL.0, LOCK_SYSCALL.1),
                PAPER_LOCK_SYSCALL,
                (LOCK_SYSCALL.0..=LOCK_SYSCALL.1).contains(&v),
            )
        } else {
            (
                format!("< {LOCK_ORDINARY:.2}"),
                LOCK_ORDINARY,
                v < LOCK_ORDINARY,
            )
        };
        checks.push(check(
            format!("Fig. 4: lock share, kernel=biglock, {w}, {cn}"),
            v,
            target,
            Some(paper),
            holds,
        ));
    }
    // The system-call benchmark is one: more than half of its own time is kernel time.
    for k in KERNELS {
        let v = get(&own_row(k, &one));
        checks.push(check(
            format!("sysbound's own kernel / (user + kernel), kernel={k}, {one}"),
            v,
            "> 0.50".into(),
            None,
            v > 0.5,
        ));
    }

    let mut notes = vec![
        "Limited Symmetry (P2) measured 4.3BSD on four MC68030s (Figure 3) and the share of \
         CPU time per mode on three of them (Figure 4). Musubi runs in QEMU's parallel mode \
         (`-accel tcg,thread=multi`, one host thread per vCPU), once with a kernel per core \
         (`kernel=percore`, the default) and once with P2's structure (`kernel=biglock`: one \
         lock taken at every kernel entry, released for user mode and halts; a waiting core \
         spins in Lock mode). Times are wall-clock nanoseconds from the CLOCK system call; the \
         modes are each core's MODES counters before and after a run, summed over the cores."
            .into(),
        format!(
            "Workloads (fixed total work, split evenly over the cores, one instance per core \
             started with SPAWN_ON by `user/symmetry` on core 0): `dhry` {} Dhrystone \
             iterations (no system calls in its loop), `sysbound` {} rounds of a 4 KiB vregion \
             created, written (512 B), read back and deleted plus a GETPID, `pmake` {} jobs in \
             waves of {} per core, each job a spawned process that writes a 16 KiB \"source\" \
             into a vregion, reads it back, tokenises and hashes it {} times into a symbol \
             table and writes a 4 KiB \"object\". One warm-up of each (a tenth of the work) is \
             not reported; then {} runs, the three workloads interleaved. Speed-up = each \
             run's throughput (work per second) over the median one-core throughput of the \
             same kernel structure: with the same work, T1 / TN.",
            super::DHRY_RUNS,
            super::SYS_ROUNDS,
            super::PMAKE_JOBS,
            super::PMAKE_WAVE,
            super::PMAKE_WORK,
            d.runs
        ),
        format!(
            "QEMU (2 vCPUs, big lock; the other boots differ in `-smp` and `kernel=`): `{}`\n\n\
             Host: {} cores, so {} vCPUs are {}. Whole benchmark: {:.0} s of wall time ({}).",
            d.qemu,
            d.host_cores,
            CORES[CORES.len() - 1],
            if CORES[CORES.len() - 1] > d.host_cores {
                "oversubscribed: their rows are reported, not checked"
            } else {
                "not oversubscribed"
            },
            d.wall_s,
            d.boot_s
                .iter()
                .map(|(k, c, s)| format!("{k}/{c}: {s:.0} s"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    let max_c = CORES[CORES.len() - 1];
    let small = super::work("biglock", max_c, d.host_cores);
    if small != super::work("percore", max_c, d.host_cores) {
        notes.push(format!(
            "The big-lock kernel on {max_c} vCPUs ({} host cores) runs 1/{} of the work \
             ({} dhry runs, {} sysbound rounds, {} pmake jobs), so its `wall s` rows do not \
             compare with the others; its speed-ups are throughput ratios (work per second over \
             the one-core run's). Why: with more vCPUs than host cores, the host deschedules vCPU \
             threads at will, and when the ticket lock's holder or the next ticket's owner is \
             descheduled every other vCPU spins its host time slice away (lock-holder and \
             lock-waiter preemption, the known trouble of spin locks in virtual machines), and \
             the system-call and make workloads, which take the lock most, slow down the most \
             (their throughput rows show by how much). P2's processors were always there; this \
             row shows what a big spin lock costs when they are not.",
            d.host_cores,
            super::OVERSUBSCRIBED_BIGLOCK_DIVISOR,
            small[0],
            small[1],
            small[2]
        ));
    }
    let load = d
        .other_load
        .iter()
        .map(|(k, c, x)| format!("{k}/{c}: {x:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    let worst = d.other_load.iter().map(|x| x.2).fold(0.0, f64::max);
    notes.push(if worst > super::OTHER_LOAD_WARNING {
        format!(
            "**Warning**: other processes on the host used up to {worst:.2} of its {} cores \
             while boots ran (per boot, from /proc/stat less this process and its QEMUs: \
             {load}); they competed with the vCPUs, so the wall times, and the speed-ups most, \
             are skewed.",
            d.host_cores
        )
    } else {
        format!(
            "Other processes on the host used at most {worst:.2} of its {} cores while boots \
             ran (per boot: {load}).",
            d.host_cores
        )
    });
    let mut limited = Vec::new();
    for k in KERNELS {
        for w in WORKLOADS {
            for c in CORES {
                let s = of(d, k, w, c);
                let t = s.iter().filter(|x| x.timed_out).count();
                if t > 0 {
                    limited.push(format!("{k} {w}, {}: {t} of {}", label(c), s.len()));
                }
            }
        }
    }
    notes.push(if limited.is_empty() {
        format!("No run hit the {} s limit.", super::RUN_LIMIT_S)
    } else {
        format!(
            "Runs ended at the {} s limit (their instances killed, though a killed make's \
             running jobs finish on their own; the wall time is a lower bound and the speed-up \
             an upper bound): {}.",
            super::RUN_LIMIT_S,
            limited.join("; ")
        )
    });
    if !d.short.is_empty() {
        notes.push(format!(
            "Boots that stopped starting rounds after {} s (so their rows have fewer samples): \
             {}.",
            super::ROUNDS_BUDGET_S,
            d.short
                .iter()
                .map(|(k, c, r)| format!("{k}/{c}: {r} of {} rounds", d.runs))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    notes.push(fig3_table(&rows, d, formula));
    notes.push(fig4_table(&rows, d));
    notes.push(format!(
        "How the checks read P2. Figure 3: \"almost the number of CPUs\" for Dhrystone, \
         Whetstone and parallel make (paper column: the core count); for the system-call \
         benchmark \"relative performance = 1 + user time / system time\", flat as CPUs are \
         added; ours is computed from the big-lock one-core run's shares (user {u1:.3}, \
         system = kernel + interrupt + lock {s1:.3}) and capped at the core count. Figure 4: \
         Lock \"10% or less of the whole\" under ordinary use (paper column 0.10, an upper \
         bound) and \"nearly half\" for the system-call benchmark (0.5, read as {:.2} .. {:.2}). \
         P2 prints no other values (its figures are not in the text). Caveat: MODES \
         includes a core's current stretch only when asked on that core, so a busy remote core's \
         last up-to-10 ms (one tick) may fall in the next window.",
        LOCK_SYSCALL.0, LOCK_SYSCALL.1
    ));
    let mut r = Report {
        bench: "symmetry".into(),
        mode: "parallel".into(),
        qemu: d.qemu.clone(),
        musubi_commit: String::new(),
        runs: d.runs,
        unit: "wall s (rows `wall s`), ratio T1/TN (rows `speed-up`), fraction of all cores' \
               time (rows `share`, `own`)"
            .into(),
        rows,
        checks,
        notes,
    };
    let shape = shape_lines(&r).join("\n\n");
    r.notes.push(shape);
    let why = decomposition(&r.rows, d);
    r.notes.push(why);
    Ok(r)
}

/// One line per figure: does its shape hold (all its checks), and if not, which fail.
pub fn shape_lines(r: &Report) -> Vec<String> {
    ["Fig. 3", "Fig. 4"]
        .iter()
        .map(|fig| {
            let mine: Vec<&Check> = r
                .checks
                .iter()
                .filter(|c| c.name.starts_with(fig))
                .collect();
            let failed: Vec<String> = mine
                .iter()
                .filter(|c| !c.holds)
                .map(|c| format!("{} = {} (target {})", c.name, c.value, c.target))
                .collect();
            let what = if *fig == "Fig. 3" {
                "Figure 3 (CPU-bound and make scale with the cores; system calls under the big \
                 lock stay near 1 + user/system while the per-core kernel scales)"
            } else {
                "Figure 4 (under the big lock, Lock < 10% for ordinary work, about half for \
                 system calls)"
            };
            if failed.is_empty() {
                format!("**{what}: the shape holds** ({} checks).", mine.len())
            } else {
                format!(
                    "**{what}: the shape does not hold**: {}.",
                    failed.join("; ")
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::SelfReport;
    use super::*;

    /// A run whose two-core wall time and modes follow a simple model: `user` and `kernel`
    /// seconds of work per core-run on one core; under the big lock, the kernel part is
    /// serialised and the other core spins meanwhile.
    fn run(k: &str, w: &str, cores: usize, user: f64, kernel: f64) -> Sample {
        let n = cores as f64;
        let (wall, lock) = if k == "biglock" && n > 1.0 {
            let wall = (user / n + kernel / n).max(kernel);
            (wall, (wall * n - user - kernel).max(0.0))
        } else {
            ((user + kernel) / n, 0.0)
        };
        let per = [user / n, kernel / n, lock / n, 0.0, 0.0];
        Sample {
            kernel: k.into(),
            workload: w.into(),
            cores,
            work: 100.0,
            timed_out: false,
            wall_ns: wall * 1e9,
            modes: vec![per; cores],
        }
    }

    fn data() -> Data {
        let mut samples = Vec::new();
        for k in KERNELS {
            for c in CORES {
                for _ in 0..3 {
                    samples.push(run(k, "dhry", c, 2.0, 0.0));
                    samples.push(run(k, "sysbound", c, 0.5, 1.5));
                    samples.push(run(k, "pmake", c, 1.9, 0.1));
                }
            }
        }
        let selfs = KERNELS
            .iter()
            .map(|k| SelfReport {
                kernel: k.to_string(),
                cores: 1,
                mode_ns: [1.0, 3.0, 0.0, 0.0, 0.0],
            })
            .collect();
        Data {
            runs: 3,
            samples,
            selfs,
            host_cores: 2,
            other_load: vec![("percore".into(), 1, 0.0)],
            short: Vec::new(),
            qemu: "qemu-system-x86_64 -smp 2".into(),
            boot_s: vec![("percore".into(), 1, 10.0)],
            wall_s: 60.0,
        }
    }

    #[test]
    fn checks_follow_the_model() {
        let r = build_report(&data()).unwrap();
        let by = |prefix: &str| {
            r.checks
                .iter()
                .find(|c| c.name.starts_with(prefix))
                .unwrap_or_else(|| panic!("no check {prefix}"))
        };
        assert_eq!(by("Fig. 3: dhry speed-up, kernel=percore").value, 2.0);
        assert_eq!(by("Fig. 3: dhry speed-up, kernel=biglock").value, 2.0);
        // Under the big lock the kernel's 1.5 s is serial: 2 / 1.5 = 1.333 = 1 + 0.5/1.5.
        let sys = by("Fig. 3: sysbound speed-up, kernel=biglock");
        assert_eq!(sys.value, 1.333);
        assert!(sys.holds, "{sys:?}");
        assert!(sys.target.contains("= 1.33"), "{}", sys.target);
        assert!(by("Fig. 3: sysbound speed-up, kernel=percore").holds);
        // Lock: 2 cores x 1.5 s wall - 2 s of work = 1 s of 3 s.
        let lock = by("Fig. 4: lock share, kernel=biglock, sysbound");
        assert_eq!(lock.value, 0.333);
        assert!(lock.holds);
        assert_eq!(lock.paper, Some(0.5));
        assert!(by("Fig. 4: lock share, kernel=biglock, dhry").holds);
        assert_eq!(
            by("sysbound's own kernel / (user + kernel), kernel=percore").value,
            0.75
        );
        assert!(r.checks.iter().all(|c| c.holds), "{:?}", r.checks);
        let lines = shape_lines(&r);
        assert_eq!(lines.len(), 2);
        assert!(
            lines.iter().all(|l| l.contains("the shape holds")),
            "{lines:?}"
        );
        let md = r.markdown();
        assert!(
            md.contains("| dhry | percore | 2.000 | 2.00 [2.00 .. 2.00] |"),
            "{md}"
        );
        assert!(md.contains("4 vCPUs (oversubscribed)"), "{md}");
        // Every share row of a run adds up to one.
        let total: f64 = (0..MODE_COUNT)
            .map(|m| median(&r.rows, &share_row(m, "biglock", "sysbound", "2 cores")).unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_shape_that_does_not_hold_is_named() {
        let mut d = data();
        // The big lock made the CPU-bound benchmark slow on two cores.
        for s in d.samples.iter_mut() {
            if s.kernel == "biglock" && s.workload == "dhry" && s.cores == 2 {
                s.wall_ns *= 1.5;
            }
        }
        let r = build_report(&d).unwrap();
        let lines = shape_lines(&r);
        assert!(
            lines[0].contains("does not hold") && lines[0].contains("dhry"),
            "{lines:?}"
        );
        assert!(lines[1].contains("the shape holds"), "{lines:?}");
    }

    #[test]
    fn the_system_call_speed_up_is_taken_apart() {
        let r = build_report(&data()).unwrap();
        let why = decomposition(&r.rows, &data());
        // The model: no growth, the lock held all the time (1.5 s of 1.5 s).
        assert!(
            why.contains("speed-up 1.33 = h / (g x s1) = 1.00 / (1.00 x 0.750)"),
            "{why}"
        );
        assert!(why.contains("kernel=percore: speed-up 2.00"), "{why}");
    }

    #[test]
    fn timed_out_runs_and_short_boots_are_said() {
        let mut d = data();
        assert!(build_report(&d)
            .unwrap()
            .notes
            .iter()
            .any(|n| n.starts_with("No run hit")));
        d.samples
            .iter_mut()
            .find(|s| s.kernel == "biglock" && s.workload == "sysbound" && s.cores == 4)
            .unwrap()
            .timed_out = true;
        d.short.push(("biglock".into(), 4, 2));
        let md = build_report(&d).unwrap().markdown();
        assert!(
            md.contains("biglock sysbound, 4 vCPUs (oversubscribed): 1 of 3"),
            "{md}"
        );
        assert!(md.contains("biglock/4: 2 of 3 rounds"), "{md}");
    }

    #[test]
    fn the_formula_is_capped_at_the_cores() {
        assert_eq!(p2_formula(0.5, 1.0, 2), 1.5);
        assert_eq!(p2_formula(3.0, 1.0, 2), 2.0);
    }
}
