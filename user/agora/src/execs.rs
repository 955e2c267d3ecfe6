//! `agora execs SAMPLES K...`: P0 Figure 3, "throughput of operating systems": K user
//! threads on one core each start a program at about the same moment and wait for its end;
//! the figure is the time until all K have ended, for K = 1..8.
//!
//! In the paper, 1..8 user processes on one processor each `exec` the same ~10 KB program
//! (so the disk is not touched: it is in the buffers), which exits at once; the process
//! network's response time grew more slowly than the monolithic PC-UX's, and from some K on
//! it was the shorter. Here the two paths are:
//! - **process network**: the program (`BIN/NOPi`, a copy per thread) is read through the file service
//!   (`ulib::fs::read_all`: `fsd`, then the buffer manager `bufd`, whose buffers hold it
//!   after the first time) and started from that image (`SPAWN_IMAGE`);
//! - **in the kernel**: `SPAWN` of `nop` from the boot archive, which the kernel holds in
//!   memory: no file system at all. Not equal work: the process network also reads the
//!   image; the report says so.
//!
//! The threads share this process (its core); each starts, waits and reports through its
//! return value. One `BENCH` line per sample and K and path, the unit instructions under
//! deterministic mode (`per_op` = the time until all K ended, not per exec).

use crate::{Meter, Res};
use alloc::format;
use alloc::vec::Vec;
use ulib::abi::{Priority, ENDED_EXIT};
use ulib::{fs, sys, thread};

/// The program every exec starts: `nop`, in the archive, and on the disk as `BIN/NOPi`
/// (i = 0..[`MAX_K`]), one copy per thread, since the file service opens a file once at a
/// time (`embedded-sdmmc`: a second open of an open file is `Busy`).
const IMAGE: &str = "BIN/NOP";
const MAX_K: u64 = 8;
/// The thread's argument: which path (low byte) and which copy (above).
const NETWORK: u64 = 0;
const KERNEL: u64 = 1;
/// A thread's result: 0 when its program ran and exited 0, else which step failed.
const OK: u64 = 0;

fn one_exec(arg: u64) -> u64 {
    let (path, copy) = (arg & 0xff, arg >> 8);
    let pid = if path == NETWORK {
        match fs::read_all(&format!("{IMAGE}{copy}")) {
            Ok(image) => sys::spawn_image(&image, "nop", &[], Priority::App, None),
            Err(e) => {
                ulib::println!("agora execs: reading {IMAGE}{copy}: {e}");
                return 1;
            }
        }
    } else {
        sys::spawn("nop", &[], Priority::App)
    };
    let Ok(pid) = pid else {
        return 2;
    };
    match sys::wait(Some(pid)) {
        Ok((_, s)) if s.how == ENDED_EXIT && s.code == 0 => OK,
        _ => 3,
    }
}

/// K execs at once on `path`, the meter around them.
fn round(k: u64, path: u64, m: &mut Meter) -> Res<()> {
    m.start()?;
    let mut threads = Vec::new();
    for i in 0..k {
        threads.push(thread::spawn(one_exec, path | i << 8).map_err(|_| "thread spawn failed")?);
    }
    let mut failed = OK;
    for t in threads {
        match t.join() {
            Ok(OK) => {}
            Ok(step) => failed = step,
            Err(_) => failed = u64::MAX,
        }
    }
    m.stop()?;
    match failed {
        OK => Ok(()),
        1 => Err("an exec failed: reading the image through the file service"),
        2 => Err("an exec failed: starting the program"),
        3 => Err("an exec failed: the program did not exit 0"),
        _ => Err("an exec failed: a thread could not be joined"),
    }
}

pub fn run(samples: u64, ks: &[u64]) -> Res<()> {
    if ks.iter().any(|k| !(1..=MAX_K).contains(k)) {
        return Err("execs: K from 1 to 8");
    }
    // Once through each path first: every copy into the buffer managers, the heap grown.
    for path in [NETWORK, KERNEL] {
        round(MAX_K, path, &mut Meter::default())?;
    }
    for &k in ks {
        for (path, name) in [(NETWORK, "process network"), (KERNEL, "in the kernel")] {
            let case = format!("exec x{k} at once, {name}");
            crate::sampled(&case, "instructions", samples, 1, |_, _, m| {
                round(k, path, m)
            })?;
        }
    }
    Ok(())
}
