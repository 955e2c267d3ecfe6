//! `rloop CORE [N]`: creates and deletes a 4 KiB vregion on core CORE, N times (forever if
//! N is missing), so the RPCC tests have a requester that is almost always waiting for
//! another core: killing it then kills a requester in the middle of a remote call. Exits 0
//! after N rounds, 1 at the first failed call (printing it).
//!
//! Two more modes exercise `WAIT` across migrations (`kernel/src/tests/family.rs`,
//! `user/shell/hop.script`):
//!
//! - `rloop hop HOPS CODE`: moves itself HOPS times (`MIGRATE(0, CORE)`), each time to the
//!   next online core, checking its new pid and core after each move, then exits CODE (1
//!   if a move went wrong, printing it).
//! - `rloop hops HOPS HOW`: the parent. HOW is `block` (a child on this core, collected
//!   with a blocking `WAIT(pid)`), `poll` (a child on the next core, collected with
//!   `WAIT(pid)` of timeout 0 in a loop), or `any` (one child here, one on the next core,
//!   collected with `WAIT(any)`). Each child is `rloop hop HOPS` with its own exit code;
//!   every `WAIT` must report the pid the child was created with and that code, and once
//!   all are collected `WAIT` must say there is no such child. Exits 0 if so, else 1
//!   (printing what was wrong).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::Rights;
use ulib::abi::{self, CoreInfo, Error, Pid, Priority, WaitStatus};
use ulib::{println, res, sys};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    match args.get(1).copied() {
        Some("hop") => return hop(args),
        Some("hops") => return hops(args),
        _ => {}
    }
    let Some(core) = args.get(1).and_then(|a| a.parse::<usize>().ok()) else {
        println!(
            "usage: rloop CORE [ROUNDS] | rloop hop HOPS CODE | rloop hops HOPS block|poll|any"
        );
        return 2;
    };
    let rounds = args.get(2).and_then(|a| a.parse::<u64>().ok());
    let name = alloc_name(core);
    let mut done = 0u64;
    while rounds.is_none_or(|n| done < n) {
        let id = match res::open_vregion(&name, 4096, Rights::OWNER_ALL) {
            Ok(id) => id,
            Err(e) => {
                println!("rloop: open {name}: {e}");
                return 1;
            }
        };
        if let Err(e) = res::close(id) {
            println!("rloop: close {name}: {e}");
            return 1;
        }
        done += 1;
    }
    0
}

fn alloc_name(core: usize) -> String {
    let me = sys::getpid().unwrap_or(Pid(0));
    alloc::format!("c{core}/vregion/rloop-{}.{}", me.core(), me.serial())
}

/// The online cores.
fn online_cores() -> Vec<usize> {
    let mut buf = alloc::vec![CoreInfo::default(); abi::MAX_CORES];
    let n = sys::cores(&mut buf).unwrap_or(0);
    buf.iter()
        .take(n)
        .filter(|c| c.online != 0)
        .map(|c| c.core as usize)
        .collect()
}

/// The online core after `core` (wrapping round).
fn next_core(cores: &[usize], core: usize) -> Option<usize> {
    let i = cores.iter().position(|&c| c == core)?;
    Some(cores[(i + 1) % cores.len()]).filter(|&c| c != core)
}

/// `rloop hop HOPS CODE`.
fn hop(args: &[&str]) -> i32 {
    let (Some(hops), Some(code)) = (
        args.get(2).and_then(|a| a.parse::<u32>().ok()),
        args.get(3).and_then(|a| a.parse::<i32>().ok()),
    ) else {
        println!("usage: rloop hop HOPS CODE");
        return 2;
    };
    let cores = online_cores();
    for i in 0..hops {
        let Ok(here) = sys::core() else {
            println!("rloop hop: CORE failed");
            return 1;
        };
        let Some(to) = next_core(&cores, here) else {
            println!("rloop hop: no other core to move to (cores {cores:?})");
            return 1;
        };
        let new = match sys::migrate(None, to) {
            Ok(new) => new,
            Err(e) => {
                println!("rloop hop: move {i} from core {here} to {to}: {e}");
                return 1;
            }
        };
        let (me, now) = (sys::getpid(), sys::core());
        if new.core() != to || me != Ok(new) || now != Ok(to) {
            println!("rloop hop: after move {i} to core {to}: MIGRATE said {new}, GETPID {me:?}, CORE {now:?}");
            return 1;
        }
    }
    code
}

/// `rloop hops HOPS HOW`.
fn hops(args: &[&str]) -> i32 {
    let (Some(hops), Some(how)) = (
        args.get(2).and_then(|a| a.parse::<u32>().ok()),
        args.get(3).copied(),
    ) else {
        println!("usage: rloop hops HOPS block|poll|any");
        return 2;
    };
    match check_hops(hops, how) {
        Ok(()) => 0,
        Err(why) => {
            println!("rloop hops {hops} {how}: {why}");
            1
        }
    }
}

fn check_hops(hops: u32, how: &str) -> Result<(), String> {
    let here = sys::core().map_err(|e| alloc::format!("CORE: {e}"))?;
    let next = next_core(&online_cores(), here).ok_or("needs two online cores")?;
    let start = |core: usize, code: u32| -> Result<(Pid, u32), String> {
        let (h, c) = (alloc::format!("{hops}"), alloc::format!("{code}"));
        let a = ["hop", h.as_str(), c.as_str()];
        let pid = if core == here {
            sys::spawn("rloop", &a, Priority::App)
        } else {
            sys::spawn_on("rloop", &a, Priority::App, core)
        };
        pid.map(|p| (p, code))
            .map_err(|e| alloc::format!("spawn on core {core}: {e}"))
    };
    let mut children = match how {
        "block" => alloc::vec![start(here, 42)?],
        "poll" => alloc::vec![start(next, 43)?],
        "any" => alloc::vec![start(here, 44)?, start(next, 45)?],
        _ => return Err("HOW is block, poll or any".into()),
    };
    while !children.is_empty() {
        let (pid, status) = match how {
            "block" => wait(Some(children[0].0), u64::MAX)?,
            "poll" => loop {
                match sys::wait_timeout(Some(children[0].0), 0) {
                    Err(Error::TimedOut) => {
                        let _ = sys::yield_now();
                    }
                    other => {
                        break other.map_err(|e| alloc::format!("WAIT({}): {e}", children[0].0))?
                    }
                }
            },
            _ => wait(None, u64::MAX)?,
        };
        let Some(i) = children.iter().position(|c| c.0 == pid) else {
            return Err(alloc::format!(
                "WAIT reported {pid} ({status:?}), not a child it was given"
            ));
        };
        let (child, code) = children.swap_remove(i);
        if status.how != abi::ENDED_EXIT || status.code != u64::from(code) {
            return Err(alloc::format!(
                "child {child} ended with {status:?}, not exit {code}"
            ));
        }
        // Collected once: WAIT for it again finds no such child.
        match sys::wait_timeout(Some(child), 0) {
            Err(Error::NoSuchProcess) => {}
            other => return Err(alloc::format!("second WAIT({child}): {other:?}")),
        }
    }
    match sys::wait_timeout(None, 0) {
        Err(Error::NoSuchProcess) => Ok(()),
        other => Err(alloc::format!("WAIT(any) with no child left: {other:?}")),
    }
}

fn wait(pid: Option<Pid>, ns: u64) -> Result<(Pid, WaitStatus), String> {
    sys::wait_timeout(pid, ns).map_err(|e| alloc::format!("WAIT({pid:?}): {e}"))
}
