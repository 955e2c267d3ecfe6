//! `cargo xtask bench symmetry`: Limited Symmetry's Figures 3 and 4 (P2,
//! docs/results/symmetry.md): how three workloads scale with the number of cores, and
//! where the cores' time goes, in the per-core kernel (`kernel=percore`) and in the
//! big-lock kernel (`kernel=biglock`, P2's structure: one lock at every kernel entry,
//! waiting cores spin in Lock mode).
//!
//! Parallel mode (`-accel tcg,thread=multi`, wall time). One boot per kernel structure and
//! machine size: 1 and 2 cores, and 4 vCPUs on the host's cores (oversubscribed when the
//! host has fewer than 4: reported, never checked). In each boot the driver `user/symmetry`
//! runs on core 0 and, RUNS times, each workload with a fixed total of work split evenly
//! over every core, one instance per core (`SPAWN_ON`), so the speed-up is T1 / TN:
//!
//! - `user/dhry`: Dhrystone-like, CPU-bound, no system calls in its loop (P2's Dhrystone);
//! - `user/sysbound`: 4 KiB vregion create/write/read/delete, mostly kernel time (P2's
//!   system-call benchmark); it also reports its own time per mode (`PROCESSES`);
//! - `user/pmake`: a parallel make, waves of short jobs doing CPU work and resource
//!   operations (P2's parallel make).
//!
//! The driver prints the wall time (`CLOCK`) and every core's time per CPU mode (`MODES`)
//! over each run. The parts:
//!
//! - this file: the plan, the boots, and parsing their `BENCH` lines into [`Data`];
//! - [`report`]: rows, checks (computed from the rows) and notes, with tests on made-up
//!   samples;
//! - [`tables`]: the Figure 3 and 4 tables and the system-call speed-up taken apart;
//! - [`plot`]: Figure 3 (speed-up by cores) and Figure 4 (stacked mode shares).

mod plot;
mod report;
mod tables;

use crate::bench::{finished_run, options_taken};
use crate::qemu::Guest;
use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};

/// The kernel structures, as `kernel=` takes them.
pub const KERNELS: [&str; 2] = ["percore", "biglock"];
/// The machine sizes (vCPUs).
pub const CORES: [usize; 3] = [1, 2, 4];
/// The workloads, as the driver names them.
pub const WORKLOADS: [&str; 3] = ["dhry", "sysbound", "pmake"];

/// Total work of each workload (split over the cores; multiples of 4). Chosen so a
/// one-core run takes about 1.5 to 2 s of wall time here, and the whole benchmark a few
/// minutes with 5 runs.
pub const DHRY_RUNS: u64 = 6_400_000;
pub const SYS_ROUNDS: u64 = 128_000;
pub const PMAKE_JOBS: u64 = 128;
pub const PMAKE_WAVE: u64 = 4;
pub const PMAKE_WORK: u64 = 60;
/// The big-lock kernel on more vCPUs than host cores runs this fraction of the work (1/N):
/// a vCPU that holds or is next in line for the ticket lock is often descheduled by the
/// host while the others spin, so the system-call and make workloads run a hundred times
/// slower or more (measured once: 3,200 sysbound rounds took 21 s instead of 0.05 s), and
/// the full work would take most of an hour. Speed-ups are throughput ratios, so runs of
/// different work compare.
pub const OVERSUBSCRIBED_BIGLOCK_DIVISOR: u64 = 100;

/// A run still going after this many seconds is ended and reported as timed out (its wall
/// time a lower bound); no new round starts in a boot once its rounds took
/// [`ROUNDS_BUDGET_S`] (at least one runs). Normal runs take 2.5 s at most here: only the
/// big lock on an oversubscribed or busy host comes near.
pub const RUN_LIMIT_S: u64 = 15;
pub const ROUNDS_BUDGET_S: u64 = 45;

/// Total work of each workload (dhry runs, sysbound rounds, pmake jobs) in one boot.
pub fn work(kernel: &str, cores: usize, host_cores: usize) -> [u64; 3] {
    let div = if kernel == "biglock" && cores > host_cores {
        OVERSUBSCRIBED_BIGLOCK_DIVISOR
    } else {
        1
    };
    let c = cores as u64;
    [DHRY_RUNS, SYS_ROUNDS, PMAKE_JOBS].map(|t| (t / div).max(c) / c * c)
}

/// Other processes' CPU use (host cores) above which a boot's wall times are suspect.
pub const OTHER_LOAD_WARNING: f64 = 0.1;

/// One run of one workload.
#[derive(Clone, Debug)]
pub struct Sample {
    pub kernel: String,
    pub workload: String,
    pub cores: usize,
    /// Work asked for (dhry runs, sysbound rounds, pmake jobs) over all cores.
    pub work: f64,
    /// The run hit [`RUN_LIMIT_S`] and was ended: `wall_ns` is a lower bound.
    pub timed_out: bool,
    pub wall_ns: f64,
    /// Per core, ns in each mode over the run (`abi::MODE_*` order).
    pub modes: Vec<[f64; abi::MODE_COUNT]>,
}

/// `sysbound`'s own time per mode, from its `PROCESSES` record.
#[derive(Clone, Debug)]
pub struct SelfReport {
    pub kernel: String,
    pub cores: usize,
    pub mode_ns: [f64; abi::MODE_COUNT],
}

/// Everything measured, and how.
pub struct Data {
    pub runs: usize,
    pub samples: Vec<Sample>,
    pub selfs: Vec<SelfReport>,
    /// The host's cores (a machine of more vCPUs is oversubscribed).
    pub host_cores: usize,
    /// Per boot (kernel, cores): host cores' worth of CPU other processes used meanwhile
    /// (they compete with the vCPUs for the host's cores and skew wall times).
    pub other_load: Vec<(String, usize, f64)>,
    /// Boots (kernel, cores) whose driver stopped early (its time budget), with the rounds
    /// they ran.
    pub short: Vec<(String, usize, usize)>,
    /// The QEMU command line of one boot (2 cores, biglock), without the workspace path.
    pub qemu: String,
    /// Wall time of each boot, seconds, by (kernel, cores).
    pub boot_s: Vec<(String, usize, f64)>,
    pub wall_s: f64,
}

pub fn symmetry(runs: usize) -> Result<()> {
    let started = Instant::now();
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let host_cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut data = Data {
        runs,
        samples: Vec::new(),
        selfs: Vec::new(),
        host_cores,
        other_load: Vec::new(),
        short: Vec::new(),
        qemu: String::new(),
        boot_s: Vec::new(),
        wall_s: 0.0,
    };
    for cores in CORES {
        // Both structures at one size after the other, so a slow spell of the host falls on
        // both alike.
        for k in KERNELS {
            let mut g = Guest::new(
                &kernel,
                cores,
                &cmdline(k, runs, work(k, cores, host_cores)),
            );
            g.initrd = Some(archive.clone());
            if cores == 2 && k == "biglock" {
                data.qemu = g.shown_command_line();
            }
            let what = format!("kernel={k}, {cores} vCPUs");
            eprintln!("xtask: bench symmetry: {what}, {runs} runs of each workload");
            let before = HostTicks::now();
            let t = Instant::now();
            let lines = boot(&g, &what)?;
            let (samples, selfs, budget) = parse(&lines, k, cores)?;
            let rounds = budget.map_or(runs, |r| r as usize);
            if samples.len() != rounds * WORKLOADS.len() || rounds == 0 {
                bail!(
                    "{what}: {} runs reported, {} expected",
                    samples.len(),
                    rounds * WORKLOADS.len()
                );
            }
            if let Some(r) = budget {
                eprintln!(
                    "xtask: bench symmetry: {what}: stopped after {r} of {runs} rounds (the \
                     {ROUNDS_BUDGET_S} s budget)"
                );
                data.short.push((k.to_string(), cores, r as usize));
            }
            for s in &samples {
                eprintln!(
                    "xtask: bench symmetry: {what}: {} {:.3} s{}",
                    s.workload,
                    s.wall_ns / 1e9,
                    if s.timed_out { " (timed out)" } else { "" }
                );
            }
            if let (Some(b), Some(a)) = (before, HostTicks::now()) {
                let others = b.others_since(&a, host_cores);
                if others > OTHER_LOAD_WARNING {
                    eprintln!(
                        "xtask: bench symmetry: warning: other processes used {others:.2} of the \
                         {host_cores} host cores meanwhile; they skew the wall times"
                    );
                }
                data.other_load.push((k.to_string(), cores, others));
            }
            data.samples.extend(samples);
            data.selfs.extend(selfs);
            data.boot_s
                .push((k.to_string(), cores, t.elapsed().as_secs_f64()));
        }
    }
    data.wall_s = started.elapsed().as_secs_f64();
    let mut r = report::build_report(&data)?;
    r.musubi_commit = crate::results::commit();
    let md = r.write()?;
    let png = crate::results::results_dir()?.join("symmetry.png");
    plot::plot(&data, &r, &png).with_context(|| format!("plotting {}", png.display()))?;
    println!("{}", r.markdown());
    for line in report::shape_lines(&r) {
        println!("xtask: {line}");
    }
    println!("xtask: wrote {}", md.display());
    Ok(())
}

/// The kernel command line of one boot (`work` as [`work`] gives it).
pub fn cmdline(kernel: &str, runs: usize, work: [u64; 3]) -> String {
    let [dhry, sys, jobs] = work;
    format!(
        "noshell poweroff kernel={kernel} \
         start=0:symmetry,{runs},{dhry},{sys},{jobs},{PMAKE_WAVE},{PMAKE_WORK},{RUN_LIMIT_S},\
         {ROUNDS_BUDGET_S}"
    )
}

/// CPU time on the host, in clock ticks: every core's busy time, every core's total, and
/// this process's own (with its waited-for children: the QEMUs it ran).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTicks {
    pub busy: u64,
    pub total: u64,
    pub ours: u64,
}

impl HostTicks {
    /// Now, from `/proc/stat` and `/proc/self/stat` (None where they cannot be read).
    pub fn now() -> Option<HostTicks> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let me = std::fs::read_to_string("/proc/self/stat").ok()?;
        HostTicks::parse(&stat, &me)
    }

    fn parse(stat: &str, me: &str) -> Option<HostTicks> {
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let cpu: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        let total: u64 = cpu.iter().sum();
        let busy = total - cpu.get(3)? - cpu.get(4)?;
        // After the command name (which may hold spaces): state, ppid, ...; utime, stime,
        // cutime and cstime are fields 14 to 17.
        let fields: Vec<&str> = me.rsplit_once(')')?.1.split_whitespace().collect();
        let ours = (11..15)
            .map(|i| fields.get(i)?.parse::<u64>().ok())
            .sum::<Option<u64>>()?;
        Some(HostTicks { busy, total, ours })
    }

    /// Host cores' worth of CPU used by other processes between `self` and `later`.
    pub fn others_since(&self, later: &HostTicks, host_cores: usize) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        let busy = later.busy.saturating_sub(self.busy);
        let ours = later.ours.saturating_sub(self.ours);
        busy.saturating_sub(ours) as f64 / total as f64 * host_cores as f64
    }
}

/// Boot `g` and check that it finished; its console lines.
fn boot(g: &Guest, what: &str) -> Result<Vec<String>> {
    let c = finished_run(g, what, Duration::from_secs(900))?;
    options_taken(&c, what)?;
    eprintln!(
        "xtask: bench symmetry: {what}: {:.1} s",
        c.wall.as_secs_f64()
    );
    Ok(c.lines)
}

/// One boot's runs, `sysbound`'s own reports, and the rounds done if the driver stopped
/// early (its time budget).
pub type Parsed = (Vec<Sample>, Vec<SelfReport>, Option<u64>);

/// The runs and `sysbound`'s own reports of one boot (kernel `k`, `cores` vCPUs), checked
/// against what the driver says it saw (its core count and kernel structure).
pub fn parse(lines: &[String], k: &str, cores: usize) -> Result<Parsed> {
    let (mut samples, mut selfs) = (Vec::new(), Vec::new());
    let mut config = false;
    let mut budget = None;
    for v in crate::bench::bench_json(lines)? {
        let json = &v;
        let modes = |x: &serde_json::Value| -> Option<[f64; abi::MODE_COUNT]> {
            let a = x.as_array()?;
            if a.len() != abi::MODE_COUNT {
                return None;
            }
            let mut out = [0.0; abi::MODE_COUNT];
            for (o, y) in out.iter_mut().zip(a) {
                *o = y.as_f64()?;
            }
            Some(out)
        };
        match v["fig"].as_str() {
            Some("config") => {
                let seen = (v["cores"].as_u64(), v["biglock"].as_u64());
                let want = (Some(cores as u64), Some(u64::from(k == "biglock")));
                if seen != want {
                    bail!(
                        "booted kernel={k} on {cores} vCPUs, but the driver saw cores/biglock \
                         {seen:?}: {json}"
                    );
                }
                config = true;
            }
            Some("run") => {
                let per_core: Option<Vec<_>> = v["modes"]
                    .as_array()
                    .context("run line without modes")?
                    .iter()
                    .map(modes)
                    .collect();
                let per_core = per_core.with_context(|| format!("bad modes in {json}"))?;
                if per_core.len() != cores {
                    bail!(
                        "a run reported {} cores' modes, not {cores}: {json}",
                        per_core.len()
                    );
                }
                samples.push(Sample {
                    kernel: k.to_string(),
                    workload: v["workload"]
                        .as_str()
                        .context("run line without workload")?
                        .to_string(),
                    cores,
                    work: v["work"].as_f64().context("run line without work")?,
                    timed_out: v["timed_out"].as_u64() == Some(1),
                    wall_ns: v["wall_ns"].as_f64().context("run line without wall_ns")?,
                    modes: per_core,
                });
            }
            Some("budget") => budget = v["rounds"].as_u64(),
            Some("self") => selfs.push(SelfReport {
                kernel: k.to_string(),
                cores,
                mode_ns: modes(&v["mode_ns"]).with_context(|| format!("bad self line {json}"))?,
            }),
            _ => {}
        }
    }
    if !config {
        bail!("the driver printed no configuration line");
    }
    Ok((samples, selfs, budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_lines_are_parsed_and_checked() {
        let lines: Vec<String> = [
            "[   0.1 c0] boot: summary",
            "symmetry: cores=2 kernel=biglock",
            r#"BENCH {"fig":"config","cores":2,"biglock":1,"runs":1}"#,
            r#"BENCH {"fig":"self","prog":"sysbound","core":1,"rounds":5,"mode_ns":[1,2,3,4,5]}"#,
            r#"BENCH {"fig":"run","workload":"dhry","cores":2,"biglock":1,"run":0,"work":8,"wall_ns":1000,"modes":[[1,0,0,0,0],[2,0,0,0,0]]}"#,
            "BENCH done",
        ]
        .map(String::from)
        .to_vec();
        let (s, selfs, budget) = parse(&lines, "biglock", 2).unwrap();
        assert_eq!(budget, None);
        assert!(!s[0].timed_out);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].workload, "dhry");
        assert_eq!(s[0].wall_ns, 1000.0);
        assert_eq!(s[0].modes[1][0], 2.0);
        assert_eq!(selfs[0].mode_ns, [1.0, 2.0, 3.0, 4.0, 5.0]);
        // The driver must have seen the structure the boot asked for.
        assert!(parse(&lines, "percore", 2).is_err());
        assert!(parse(&lines, "biglock", 4).is_err());
    }

    #[test]
    fn host_cpu_time_is_read_from_proc() {
        let stat = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 1 2 3\n";
        let me = "42 (x task) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 0 0";
        let t = HostTicks::parse(stat, me).unwrap();
        assert_eq!(
            t,
            HostTicks {
                busy: 160,
                total: 980,
                ours: 50
            }
        );
        let later = HostTicks {
            busy: 160 + 150,
            total: 980 + 200,
            ours: 50 + 90,
        };
        // 60 of 200 ticks over 2 cores: 0.6 of a core.
        assert!((t.others_since(&later, 2) - 0.6).abs() < 1e-9);
        assert!(HostTicks::now().is_some());
    }

    #[test]
    fn the_work_splits_evenly_over_every_machine_size() {
        for k in KERNELS {
            for c in CORES {
                for host in [1, 2, 4] {
                    for total in work(k, c, host) {
                        assert!(total > 0 && total % c as u64 == 0, "{total} over {c} cores");
                    }
                }
            }
        }
        assert_eq!(work("percore", 4, 2), [DHRY_RUNS, SYS_ROUNDS, PMAKE_JOBS]);
        assert_eq!(work("biglock", 2, 2), [DHRY_RUNS, SYS_ROUNDS, PMAKE_JOBS]);
        let small = work("biglock", 4, 2);
        assert_eq!(small[0], DHRY_RUNS / OVERSUBSCRIBED_BIGLOCK_DIVISOR);
        assert_eq!(small[2], 4, "at least one job per core");
        let c = cmdline("biglock", 5, [8, 4, 4]);
        assert!(
            c.contains("kernel=biglock") && c.contains("start=0:symmetry,5,8,4,4,"),
            "{c}"
        );
        assert!(
            c.ends_with(&format!(",{RUN_LIMIT_S},{ROUNDS_BUDGET_S}")),
            "{c}"
        );
    }
}
