//! `tender MODE ...`: the Musubi side of `cargo xtask bench tender`, the reproduction of
//! Multicore Tender's experiments (P4, docs/results/tender.md). It runs on core 0 as user
//! 1000 (`SETUSER`, so every operation pays the rights checks a program pays) and prints
//! `BENCH {json}` lines that xtask turns into the report, then `BENCH done`.
//!
//! - `tender ops REPS` (P4 Figs. 4 and 5, Table 5): 70 creations of a 4 KiB vregion, then
//!   70 deletions of the same regions in creation order, on core 0 (`c0/vregion/tN`, local)
//!   and then on core 1 (`c1/vregion/tN`, remote, through the inter-core RPCC). Each
//!   operation is timed alone with `rdtsc`; the middle 50 of each 70 (the first and last
//!   10 left out, as in the paper) are printed:
//!   `BENCH {"fig":"ops","rep":R,"op":"create","loc":"remote","samples":[...]}`. For the
//!   remote half it also prints what core 1's RPCC agents did:
//!   `BENCH {"fig":"agents","rep":R,"created":..,"destroyed":..,"reused":..,"served":..,"inline":..,"halted":..,"messages":..}`
//!   (inline: requests core 1's daemon performed itself; halted: waits of core 0 that
//!   halted in place).
//! - `tender spread REPS N` (P4 Figs. 6, 7 and 8, Table 6): a child (`tkid`) creates and
//!   deletes a 4 KiB vregion n times; the time from before the spawn to after the parent's
//!   `WAIT` returns, in four placements: `L-L` (child on core 0, regions on core 0), `R-R`
//!   (child started on core 1 with `SPAWN_ON`, regions on core 1), `L-R` (child on core 0,
//!   regions on core 1) and `L-R->R-R` (as L-R, but the child moves itself to core 1 after
//!   n/2 pairs). Fig. 7: child `tkid` (4 KiB of text), n = 10, 20, ..., 80. Fig. 8: children
//!   `tkid`, `tkid8`, ..., `tkid32` (4 to 32 KiB of text), n = N. The RPCC messages each run
//!   cost come from `RPCC_STATS` before and after (the messages of the two `RPCC_STATS`
//!   calls themselves, measured once with nothing between them, are subtracted):
//!   `BENCH {"fig":"spread","rep":R,"case":"L-R","child":"tkid","n":40,"ticks":..,"messages":..,"requests":..}`.
//! - `tender rtt SAMPLES OPS` (parallel mode): SAMPLES samples, each the mean wall time
//!   (`CLOCK`, ns) of OPS create+delete pairs of a 4 KiB vregion on core 1, and as many on
//!   core 0, alternating: `BENCH {"fig":"rtt","loc":"remote","per_op_ns":..}`.
//!
//! Under QEMU's `-icount shift=0` `rdtsc` advances by one per instruction of all cores
//! together, so the `ops` and `spread` figures are instruction counts: for a remote
//! operation, those of both cores (the waiting core halts). A failed call prints
//! `BENCH error {...}` and exits 1.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::bench::TENDER_CHILDREN;
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::syscall as nr;
use ulib::abi::{Error, Pid, Priority, RpccInfo, ENDED_EXIT, MAX_CORES};
use ulib::bench::rdtsc;
use ulib::sys::raw;
use ulib::{println, res, sys};

ulib::main!(main);

/// The user the measurements run as (any but the kernel's 0).
const USER: UserId = UserId(1000);
/// Size of every vregion.
const SIZE: u64 = 4096;
/// P4 section 4.2: 70 creations and 70 deletions, of which the middle 50 count.
const OPS: usize = 70;
const SKIP: usize = 10;
/// The core the remote regions (and remote children) live on.
const REMOTE: u64 = 1;

fn main(args: &[&str]) -> i32 {
    let num = |i: usize, default: usize| -> Option<usize> {
        match args.get(i) {
            None => Some(default),
            Some(a) => a.parse().ok().filter(|&n| n > 0),
        }
    };
    let (mode, a, b) = (args.get(1).copied().unwrap_or(""), num(2, 1), num(3, 40));
    let (Some(a), Some(b)) = (a, b) else {
        return usage();
    };
    if let Err(e) = setup() {
        println!(
            "BENCH error {{\"case\":\"setup\",\"error\":\"{}\"}}",
            e.message()
        );
        return 1;
    }
    let r = match mode {
        "ops" => ops(a),
        "spread" => spread(a, b as u64),
        "rtt" => rtt(a, b as u64),
        _ => return usage(),
    };
    match r {
        Ok(()) => {
            ulib::bench::done();
            0
        }
        Err((what, e)) => {
            println!(
                "BENCH error {{\"case\":\"{what}\",\"error\":\"{}\"}}",
                e.message()
            );
            1
        }
    }
}

fn usage() -> i32 {
    println!("usage: tender ops REPS | tender spread REPS N | tender rtt SAMPLES OPS");
    2
}

type Failed = (&'static str, Error);

/// Become user 1000 and say how the kernel is configured:
/// `tender: user=1000 rcc=on notify=ipi agents=unlimited wait=switch cores=2`.
fn setup() -> Result<(), Error> {
    res::setuser(USER)?;
    let rcc = match res::rcc_probe("c0/vregion/rcc-probe") {
        Ok(true) => "on",
        Ok(false) => "off",
        Err(_) => "unknown",
    };
    let stats = rpcc_stats()?;
    let (notify, agents, wait) =
        stats
            .get(REMOTE as usize)
            .map_or(("?", String::from("?"), "?"), |s| {
                let agents = match (s.agents_inline, s.agent_limit) {
                    (1, _) => String::from("inline"),
                    (_, 0) => String::from("unlimited"),
                    (_, n) => format!("{n}"),
                };
                (
                    ulib::abi::rpcc_notify_name(s.notify),
                    agents,
                    ulib::abi::rpcc_wait_name(s.wait),
                )
            });
    println!(
        "tender: user={} rcc={rcc} notify={notify} agents={agents} wait={wait} cores={}",
        USER.0,
        stats.len()
    );
    if stats.len() <= REMOTE as usize {
        println!("tender: needs at least 2 cores");
        return Err(Error::InvalidArgument);
    }
    Ok(())
}

// ---- Figs. 4 and 5, Table 5 -------------------------------------------------------------

fn ops(reps: usize) -> Result<(), Failed> {
    for rep in 0..reps {
        for (loc, core) in [("local", 0), ("remote", REMOTE)] {
            let names: Vec<String> = (0..OPS).map(|i| format!("c{core}/vregion/t{i}")).collect();
            let before = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
            let mut ids: Vec<ResId> = Vec::with_capacity(OPS);
            let mut create = Vec::with_capacity(OPS);
            for name in &names {
                let t0 = rdtsc();
                let id = res::open_vregion(name, SIZE, Rights::OWNER_ALL);
                let t1 = rdtsc();
                ids.push(id.map_err(|e| ("create", e))?);
                create.push(t1 - t0);
            }
            let mut delete = Vec::with_capacity(OPS);
            for id in ids {
                let t0 = rdtsc();
                let r = res::close(id);
                let t1 = rdtsc();
                r.map_err(|e| ("delete", e))?;
                delete.push(t1 - t0);
            }
            let after = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
            for (op, t) in [("create", &create), ("delete", &delete)] {
                emit(&format!(
                    "{{\"fig\":\"ops\",\"rep\":{rep},\"op\":\"{op}\",\"loc\":\"{loc}\",\"samples\":{}}}",
                    list(&t[SKIP..OPS - SKIP])
                ));
            }
            if core == REMOTE {
                let (b, a) = (&before[REMOTE as usize], &after[REMOTE as usize]);
                emit(&format!(
                    "{{\"fig\":\"agents\",\"rep\":{rep},\"created\":{},\"destroyed\":{},\"reused\":{},\"served\":{},\"inline\":{},\"halted\":{},\"messages\":{}}}",
                    a.agents_created - b.agents_created,
                    a.agents_destroyed - b.agents_destroyed,
                    a.reuse_hits - b.reuse_hits,
                    a.served - b.served,
                    a.inline_served - b.inline_served,
                    after[0].halted_waits - before[0].halted_waits,
                    messages(&before, &after)
                ));
            }
        }
    }
    Ok(())
}

// ---- Figs. 6, 7 and 8, Table 6 ----------------------------------------------------------

/// The four placements of P4 Fig. 6.
#[derive(Clone, Copy)]
enum Case {
    LocalLocal,
    RemoteRemote,
    LocalRemote,
    Migrating,
}

impl Case {
    const ALL: [Case; 4] = [
        Case::LocalLocal,
        Case::RemoteRemote,
        Case::LocalRemote,
        Case::Migrating,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::LocalLocal => "L-L",
            Case::RemoteRemote => "R-R",
            Case::LocalRemote => "L-R",
            Case::Migrating => "L-R->R-R",
        }
    }
}

fn spread(reps: usize, fig8_n: u64) -> Result<(), Failed> {
    // What two RPCC_STATS calls in a row cost in messages (subtracted from every run).
    let a = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
    let b = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
    let stats_cost = messages(&a, &b);
    emit(&format!(
        "{{\"fig\":\"stats_cost\",\"messages\":{stats_cost}}}"
    ));
    for rep in 0..reps {
        for n in (10..=80).step_by(10) {
            for case in Case::ALL {
                child_run(rep, case, TENDER_CHILDREN[0].0, n, stats_cost)?;
            }
        }
        for (child, _) in TENDER_CHILDREN {
            for case in Case::ALL {
                child_run(rep, case, child, fig8_n, stats_cost)?;
            }
        }
    }
    Ok(())
}

/// One run of `child` in placement `case` with `n` create+delete pairs.
fn child_run(rep: usize, case: Case, child: &str, n: u64, stats_cost: u64) -> Result<(), Failed> {
    let count = format!("{n}");
    let half = format!("{}", n / 2);
    let remote = format!("{REMOTE}");
    let args: [&str; 4] = match case {
        Case::LocalLocal => [&count, "c0", "0", "0"],
        Case::RemoteRemote => [&count, "c1", "0", "0"],
        Case::LocalRemote => [&count, "c1", "0", "0"],
        Case::Migrating => [&count, "c1", &half, &remote],
    };
    let before = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
    let t0 = rdtsc();
    let pid = match case {
        Case::RemoteRemote => spawn_on(child, &args, Priority::App, REMOTE),
        _ => sys::spawn(child, &args, Priority::App),
    }
    .map_err(|e| ("spawn", e))?;
    let (_, status) = sys::wait(Some(pid)).map_err(|e| ("wait", e))?;
    let t1 = rdtsc();
    let after = rpcc_stats().map_err(|e| ("rpcc_stats", e))?;
    if status.how != ENDED_EXIT || status.code != 0 {
        println!(
            "tender: child {child} ({}, n={n}) ended badly: how {} code {}",
            case.name(),
            status.how,
            status.code
        );
        return Err(("child", Error::Unknown));
    }
    let served: u64 =
        after.iter().map(|s| s.served).sum::<u64>() - before.iter().map(|s| s.served).sum::<u64>();
    emit(&format!(
        "{{\"fig\":\"spread\",\"rep\":{rep},\"case\":\"{}\",\"child\":\"{child}\",\"n\":{n},\"ticks\":{},\"messages\":{},\"requests\":{served}}}",
        case.name(),
        t1 - t0,
        messages(&before, &after).saturating_sub(stats_cost)
    ));
    Ok(())
}

// ---- parallel mode ----------------------------------------------------------------------

fn rtt(samples: usize, ops: u64) -> Result<(), Failed> {
    let pair = |core: u64| -> Result<(), Failed> {
        let name = format!("c{core}/vregion/rtt");
        let id = res::open_vregion(&name, SIZE, Rights::OWNER_ALL).map_err(|e| ("create", e))?;
        res::close(id).map_err(|e| ("delete", e))
    };
    for core in [0, REMOTE] {
        for _ in 0..ops / 4 + 1 {
            pair(core)?; // warm-up
        }
    }
    for _ in 0..samples {
        for (loc, core) in [("local", 0), ("remote", REMOTE)] {
            let t0 = sys::clock_ns().map_err(|e| ("clock", e))?;
            for _ in 0..ops {
                pair(core)?;
            }
            let t1 = sys::clock_ns().map_err(|e| ("clock", e))?;
            emit(&format!(
                "{{\"fig\":\"rtt\",\"loc\":\"{loc}\",\"per_op_ns\":{:.1}}}",
                (t1 - t0) as f64 / ops as f64
            ));
        }
    }
    Ok(())
}

// ---- helpers ----------------------------------------------------------------------------

/// Print `BENCH {json}` in one console write, so no other output splits the line.
fn emit(json: &str) {
    ulib::io::write_all(format!("BENCH {json}\n").as_bytes());
}

fn list(v: &[u64]) -> String {
    let mut s = String::from("[");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s += &format!("{x}");
    }
    s.push(']');
    s
}

/// Messages every core sent between two `RPCC_STATS` snapshots.
fn messages(before: &[RpccInfo], after: &[RpccInfo]) -> u64 {
    let sum = |v: &[RpccInfo]| -> u64 { v.iter().flat_map(|s| s.sent_to.iter()).sum() };
    sum(after) - sum(before)
}

/// Every core's RPCC counters (`RPCC_STATS`).
fn rpcc_stats() -> Result<Vec<RpccInfo>, Error> {
    let mut buf = alloc::vec![RpccInfo::EMPTY; MAX_CORES];
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    let (rax, rdx) =
        unsafe { raw::syscall2(nr::RPCC_STATS, buf.as_mut_ptr() as u64, buf.len() as u64) };
    let n = ulib::abi::syscall::decode(rax, rdx)? as usize;
    buf.truncate(n);
    Ok(buf)
}

/// `SPAWN_ON`: start `name` with `args` at `priority` on `core`. (Its six arguments need
/// `r9`, which `ulib::sys::raw` has no wrapper for.)
fn spawn_on(name: &str, args: &[&str], priority: Priority, core: u64) -> Result<Pid, Error> {
    let mut buf = Vec::new();
    for a in args {
        buf.extend_from_slice(a.as_bytes());
        buf.push(0);
    }
    let (rax, rdx): (u64, u64);
    // SAFETY: both buffers are valid for reading for the lengths given; the register
    // contract is abi/src/syscall.rs's (rcx and r11 clobbered, rax and rdx the answer).
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") nr::SPAWN_ON => rax,
            in("rdi") name.as_ptr() as u64, in("rsi") name.len() as u64,
            inlateout("rdx") buf.as_ptr() as u64 => rdx, in("r10") buf.len() as u64,
            in("r8") priority as u64, in("r9") core,
            out("rcx") _, out("r11") _, options(nostack));
    }
    ulib::abi::syscall::decode(rax, rdx).map(Pid)
}
