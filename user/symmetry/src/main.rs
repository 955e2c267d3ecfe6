//! `symmetry RUNS DHRY SYS JOBS WAVE WORK`: the driver of `cargo xtask bench symmetry`
//! (P2, Limited Symmetry, Figs. 3 and 4). It runs on core 0 of a machine booted with
//! `kernel=percore` or `kernel=biglock` and uses every online core.
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
//! with a tenth of its work (at least one job per core) is not reported. Then RUNS rounds,
//! each running the three in turn (interleaved, so a slow spell of the host does not fall
//! on one workload). For each it takes the clock (`CLOCK`, ns) and every core's time per
//! CPU mode (`MODES`) before the spawns and after the last `WAIT`, and prints
//!
//! `BENCH {"fig":"run","workload":"dhry","cores":2,"biglock":0,"run":0,"work":..,"wall_ns":..,"modes":[[user,kernel,lock,idle,interrupt],...]}`
//!
//! with one mode array (nanoseconds spent in the window) per core. First it prints
//! `symmetry: cores=N kernel=percore|biglock` and `BENCH {"fig":"config",...}`; last,
//! `BENCH done`. A failed call or a workload that did not exit 0 prints `BENCH error {...}`
//! and the driver exits 1.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::{CoreInfo, Error, ModeInfo, Priority, ENDED_EXIT, MAX_CORES, MODE_COUNT};
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
}

fn main(args: &[&str]) -> i32 {
    let nums: Option<Vec<u64>> = args[1..].iter().map(|a| a.parse().ok()).collect();
    let (runs, plan) = match nums.as_deref() {
        Some(&[runs, dhry, sys, jobs, wave, work]) if wave > 0 => (
            runs,
            Plan {
                dhry,
                sys,
                jobs,
                wave,
                work,
            },
        ),
        _ => {
            println!("usage: symmetry RUNS DHRY SYS JOBS WAVE WORK");
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
    for run in 0..runs {
        for w in WORKLOADS {
            let (wall_ns, work, deltas) = measure(w, &plan, cores)?;
            let modes: Vec<String> = deltas
                .iter()
                .map(|d| {
                    let v: Vec<String> = d.iter().map(|x| format!("{x}")).collect();
                    format!("[{}]", v.join(","))
                })
                .collect();
            println!(
                "BENCH {{\"fig\":\"run\",\"workload\":\"{w}\",\"cores\":{cores},\"biglock\":{biglock},\
                 \"run\":{run},\"work\":{work},\"wall_ns\":{wall_ns},\"modes\":[{}]}}",
                modes.join(",")
            );
        }
    }
    Ok(())
}

/// Run `workload` once on every core; its wall time, the work done, and each core's time
/// per mode over the run.
fn measure(
    workload: &str,
    plan: &Plan,
    cores: u64,
) -> Result<(u64, u64, Vec<[u64; MODE_COUNT]>), String> {
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
    for core in (0..cores as usize).rev() {
        sys::spawn_on(workload, &argv, Priority::App, core)
            .map_err(|e| fail(&format!("spawn on core {core}"), e))?;
    }
    for _ in 0..cores {
        let (pid, s) = sys::wait(None).map_err(|e| fail("wait", e))?;
        if s.how != ENDED_EXIT || s.code != 0 {
            return Err(format!(
                "{workload} {pid} ended with how={} code={}",
                s.how, s.code
            ));
        }
    }
    let t1 = sys::clock_ns().map_err(|e| fail("clock", e))?;
    let after = sys::modes().map_err(|e| fail("modes", e))?;
    Ok((
        t1 - t0,
        share * cores,
        deltas(&before, &after, cores as usize),
    ))
}

fn deltas(before: &[ModeInfo], after: &[ModeInfo], cores: usize) -> Vec<[u64; MODE_COUNT]> {
    (0..cores)
        .map(|c| match (before.get(c), after.get(c)) {
            (Some(b), Some(a)) => core::array::from_fn(|i| a.ns[i].saturating_sub(b.ns[i])),
            _ => [0; MODE_COUNT],
        })
        .collect()
}
