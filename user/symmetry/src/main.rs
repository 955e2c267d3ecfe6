//! `symmetry RUNS DHRY SYS JOBS WAVE WORK LIMIT BUDGET`: the driver of `cargo xtask bench
//! symmetry` (P2, Limited Symmetry, Figs. 3 and 4). It runs on core 0 of a machine booted
//! with `kernel=percore` or `kernel=biglock` and uses every online core.
//!
//! Three workloads, each a fixed total amount of work split evenly over the N cores, one
//! instance per core (`SPAWN_ON`; the one on core 0 beside this driver, which only waits),
//! so a speed-up is T1 / TN:
//!
//! - `dhry DHRY/N`: Dhrystone-like, CPU-bound, no system calls in its loop;
//! - `sysbound SYS/N report`: system-call-bound (4 KiB vregion create/write/read/delete);
//! - `pmake JOBS/N WAVE WORK`: a parallel make of JOBS/N short jobs in waves of WAVE.
//!
//! DHRY, SYS and JOBS must be multiples of N. Before the runs, one warm-up of each workload
//! with a tenth of its work (one job per core) is not reported. Then up to RUNS rounds,
//! each running the three in turn (interleaved, so a slow spell of the host does not fall
//! on one workload). For each it takes the clock (`CLOCK`, ns) and every core's time per
//! CPU mode (`MODES`) before the spawns and after the last `WAIT`, and prints
//!
//! `BENCH {"fig":"run","workload":"dhry","cores":2,"biglock":0,"run":0,"work":..,"wall_ns":..,"timed_out":0,"modes":[[user,kernel,lock,idle,interrupt],...]}`
//!
//! with one mode array (nanoseconds spent in the window) per core. Two bounds keep a
//! pathological configuration (the big lock on more vCPUs than host cores) from running
//! for an hour: a run still going after LIMIT seconds is ended (its instances killed) and
//! reported with `"timed_out":1` and the wall time so far, a lower bound; and no new round
//! starts once the rounds have taken BUDGET seconds (at least one round always runs), which
//! it says with `BENCH {"fig":"budget","rounds":R}`. First it prints
//! `symmetry: cores=N kernel=percore|biglock` and `BENCH {"fig":"config",...}`; last,
//! `BENCH done`. A failed call or a workload that did not exit 0 prints `BENCH error {...}`
//! and the driver exits 1.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::{
    CoreInfo, Error, ModeInfo, Pid, Priority, ENDED_EXIT, ENDED_KILLED, MAX_CORES, MODE_COUNT,
};
use ulib::{println, sys};

ulib::main!(main);

/// The workloads, in the order each round runs them.
const WORKLOADS: [&str; 3] = ["dhry", "sysbound", "pmake"];

/// What to run: totals over all cores.
#[derive(Clone, Copy)]
struct Plan {
    dhry: u64,
    sys: u64,
    jobs: u64,
    wave: u64,
    work: u64,
    /// Per run and for all rounds, ns.
    limit_ns: u64,
    budget_ns: u64,
}

/// One run: wall time, work done, whether it hit the limit, each core's mode times.
struct Run {
    wall_ns: u64,
    work: u64,
    timed_out: bool,
    modes: Vec<[u64; MODE_COUNT]>,
}

fn main(args: &[&str]) -> i32 {
    let nums: Option<Vec<u64>> = args[1..].iter().map(|a| a.parse().ok()).collect();
    let (runs, plan) = match nums.as_deref() {
        Some(&[runs, dhry, sys, jobs, wave, work, limit, budget]) if wave > 0 && limit > 0 => (
            runs,
            Plan {
                dhry,
                sys,
                jobs,
                wave,
                work,
                limit_ns: limit.saturating_mul(1_000_000_000),
                budget_ns: budget.saturating_mul(1_000_000_000),
            },
        ),
        _ => {
            println!("usage: symmetry RUNS DHRY SYS JOBS WAVE WORK LIMIT BUDGET");
            return 2;
        }
    };
    match drive(runs, plan) {
        Ok(()) => {
            ulib::bench::done();
            0
        }
        Err(e) => {
            println!("BENCH error {{\"case\":\"symmetry\",\"error\":\"{e}\"}}");
            1
        }
    }
}

fn drive(runs: u64, plan: Plan) -> Result<(), String> {
    let mut infos = [CoreInfo::default(); MAX_CORES];
    let n = sys::cores(&mut infos).map_err(|e| format!("cores: {e}"))?;
    let cores = infos[..n].iter().filter(|c| c.online != 0).count() as u64;
    let modes = sys::modes().map_err(|e| format!("modes: {e}"))?;
    let biglock = modes.first().map_or(0, |m| m.biglock);
    println!(
        "symmetry: cores={cores} kernel={}",
        if biglock != 0 { "biglock" } else { "percore" }
    );
    println!(
        "BENCH {{\"fig\":\"config\",\"cores\":{cores},\"biglock\":{biglock},\"runs\":{runs},\
         \"dhry\":{},\"sys\":{},\"jobs\":{},\"wave\":{},\"work\":{}}}",
        plan.dhry, plan.sys, plan.jobs, plan.wave, plan.work
    );
    for total in [plan.dhry, plan.sys, plan.jobs] {
        if total == 0 || total % cores != 0 {
            return Err(format!(
                "the work {total} is not a positive multiple of {cores} cores"
            ));
        }
    }
    let warm = Plan {
        dhry: (plan.dhry / 10).max(cores) / cores * cores,
        sys: (plan.sys / 10).max(cores) / cores * cores,
        jobs: cores,
        ..plan
    };
    for w in WORKLOADS {
        measure(w, &warm, cores)?;
    }
    let start = sys::clock_ns().map_err(|e| format!("clock: {e}"))?;
    for run in 0..runs {
        let now = sys::clock_ns().map_err(|e| format!("clock: {e}"))?;
        if run > 0 && now - start > plan.budget_ns {
            println!("BENCH {{\"fig\":\"budget\",\"rounds\":{run}}}");
            break;
        }
        for w in WORKLOADS {
            let r = measure(w, &plan, cores)?;
            let modes: Vec<String> = r
                .modes
                .iter()
                .map(|d| {
                    let v: Vec<String> = d.iter().map(|x| format!("{x}")).collect();
                    format!("[{}]", v.join(","))
                })
                .collect();
            println!(
                "BENCH {{\"fig\":\"run\",\"workload\":\"{w}\",\"cores\":{cores},\"biglock\":{biglock},\
                 \"run\":{run},\"work\":{},\"wall_ns\":{},\"timed_out\":{},\"modes\":[{}]}}",
                r.work,
                r.wall_ns,
                u8::from(r.timed_out),
                modes.join(",")
            );
        }
    }
    Ok(())
}

/// Run `workload` once on every core (ending it after the plan's limit); its wall time,
/// the work done (that asked for, if it timed out), and each core's time per mode.
fn measure(workload: &str, plan: &Plan, cores: u64) -> Result<Run, String> {
    let (share, args): (u64, Vec<String>) = match workload {
        "dhry" => (plan.dhry / cores, Vec::new()),
        "sysbound" => (plan.sys / cores, alloc::vec!["report".into()]),
        _ => (
            plan.jobs / cores,
            alloc::vec![format!("{}", plan.wave), format!("{}", plan.work)],
        ),
    };
    let share_arg = format!("{share}");
    let mut argv: Vec<&str> = alloc::vec![share_arg.as_str()];
    argv.extend(args.iter().map(String::as_str));
    let fail = |what: &str, e: Error| format!("{workload}: {what}: {e}");

    let before = sys::modes().map_err(|e| fail("modes", e))?;
    let t0 = sys::clock_ns().map_err(|e| fail("clock", e))?;
    // The remote instances first, so the one on this core starts last.
    let mut live: Vec<Pid> = Vec::new();
    for core in (0..cores as usize).rev() {
        let pid = sys::spawn_on(workload, &argv, Priority::App, core)
            .map_err(|e| fail(&format!("spawn on core {core}"), e))?;
        live.push(pid);
    }
    let mut timed_out = false;
    while !live.is_empty() {
        let now = sys::clock_ns().map_err(|e| fail("clock", e))?;
        let left = (t0 + plan.limit_ns).saturating_sub(now);
        if left == 0 && !timed_out {
            // Out of time: end the instances still running; their ends are reaped below.
            timed_out = true;
            for &p in &live {
                let _ = sys::kill(p);
            }
        }
        let wait = if timed_out { u64::MAX } else { left };
        let (pid, s) = match sys::wait_timeout(None, wait) {
            Ok(x) => x,
            Err(Error::TimedOut) => continue,
            Err(e) => return Err(fail("wait", e)),
        };
        live.retain(|&p| p != pid);
        let killed = timed_out && s.how == ENDED_KILLED;
        if !killed && (s.how != ENDED_EXIT || s.code != 0) {
            return Err(format!(
                "{workload} {pid} ended with how={} code={}",
                s.how, s.code
            ));
        }
    }
    let t1 = sys::clock_ns().map_err(|e| fail("clock", e))?;
    let after = sys::modes().map_err(|e| fail("modes", e))?;
    Ok(Run {
        wall_ns: t1 - t0,
        work: share * cores,
        timed_out,
        modes: deltas(&before, &after, cores as usize),
    })
}

fn deltas(before: &[ModeInfo], after: &[ModeInfo], cores: usize) -> Vec<[u64; MODE_COUNT]> {
    (0..cores)
        .map(|c| match (before.get(c), after.get(c)) {
            (Some(b), Some(a)) => core::array::from_fn(|i| a.ns[i].saturating_sub(b.ns[i])),
            _ => [0; MODE_COUNT],
        })
        .collect()
}
