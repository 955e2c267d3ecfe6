//! `basics [N]`: the Musubi side of the `basics` benchmark (the Linux peer measures the
//! same four cases).
//!
//! Each case is timed with `rdtsc`, which under QEMU's `-icount` advances by one per
//! instruction, so a figure is instructions per operation. A case runs once to warm up
//! and is then sampled N times (default 5); a sample is the mean over a fixed number of
//! operations:
//!
//! | case | one operation | per sample |
//! |---|---|---|
//! | `null call` | `GETPID` | 1000 |
//! | `yield ping-pong` | one `YIELD` of this process while a second `basics yielder` also yields: a switch there and back | 1000 |
//! | `spawn+wait` | `SPAWN` of `nop` and `WAIT` for it | 20 |
//! | `heap grow 4 KiB` | `MEMORY(4096)` and a write into the new page | 256 |
//!
//! Output: one line per sample,
//! `BENCH {"peer":"musubi","case":"null call","unit":"instructions","per_op":123.4}`, then
//! `BENCH done`. `basics yielder COUNT` is the ping-pong partner: it yields COUNT times.
#![no_std]
#![no_main]

extern crate alloc;

use ulib::abi::Priority;
use ulib::bench::{self, rdtsc};
use ulib::{println, sys};

ulib::main!(main);

const DEFAULT_SAMPLES: usize = 5;
const NULL_CALLS: u64 = 1000;
const YIELDS: u64 = 1000;
/// Yields before a ping-pong sample is timed, so the partner is already in its loop.
const YIELD_WARMUP: u64 = 10;
const SPAWNS: u64 = 20;
const GROWS: u64 = 256;

fn main(args: &[&str]) -> i32 {
    if args.get(1) == Some(&"yielder") {
        return yielder(args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0));
    }
    let samples = match args.get(1).map(|a| a.parse::<usize>()) {
        None => DEFAULT_SAMPLES,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            println!("usage: basics [SAMPLES]");
            return 2;
        }
    };
    let cases: [(&str, u64, Case); 4] = [
        ("null call", NULL_CALLS, null_calls),
        ("yield ping-pong", YIELDS, ping_pong),
        ("spawn+wait", SPAWNS, spawn_wait),
        ("heap grow 4 KiB", GROWS, heap_grow),
    ];
    for (case, ops, run) in cases {
        if bench::samples(case, samples, ops, run).is_err() {
            return 1;
        }
    }
    bench::done();
    0
}

/// Runs `n` operations of one case and returns the time-stamp ticks they took.
type Case = fn(u64) -> Result<u64, &'static str>;

fn null_calls(n: u64) -> Result<u64, &'static str> {
    let start = rdtsc();
    for _ in 0..n {
        sys::getpid().map_err(|_| "getpid failed")?;
    }
    Ok(rdtsc() - start)
}

/// Time `n` yields while a partner yields too. The partner yields more often than we do,
/// so it is still there for every one of ours; we wait for it afterwards. Only the
/// yields are timed, not the spawn and wait around them.
fn ping_pong(n: u64) -> Result<u64, &'static str> {
    let count = alloc::format!("{}", 2 * n + 2 * YIELD_WARMUP);
    let partner = sys::spawn("basics", &["yielder", &count], Priority::App)
        .map_err(|_| "spawn of the yielder failed")?;
    for _ in 0..YIELD_WARMUP {
        sys::yield_now().map_err(|_| "yield failed")?;
    }
    let start = rdtsc();
    for _ in 0..n {
        sys::yield_now().map_err(|_| "yield failed")?;
    }
    let ticks = rdtsc() - start;
    match sys::wait(Some(partner)) {
        Ok((_, st)) if st.how == ulib::abi::ENDED_EXIT && st.code == 0 => Ok(ticks),
        _ => Err("the yielder failed"),
    }
}

fn yielder(count: u64) -> i32 {
    for _ in 0..count {
        if sys::yield_now().is_err() {
            return 1;
        }
    }
    0
}

fn spawn_wait(n: u64) -> Result<u64, &'static str> {
    let start = rdtsc();
    for _ in 0..n {
        let pid = sys::spawn("nop", &[], Priority::App).map_err(|_| "spawn of nop failed")?;
        match sys::wait(Some(pid)) {
            Ok((_, st)) if st.how == ulib::abi::ENDED_EXIT && st.code == 0 => {}
            _ => return Err("nop failed"),
        }
    }
    Ok(rdtsc() - start)
}

fn heap_grow(n: u64) -> Result<u64, &'static str> {
    let start = rdtsc();
    for _ in 0..n {
        let page = sys::memory(4096).map_err(|_| "memory failed")?;
        // SAFETY: the kernel has just mapped `page..page + 4096` for this program; the
        // allocator never hands out memory it did not obtain with its own MEMORY call.
        unsafe { core::ptr::write_volatile(page as *mut u8, 1) };
    }
    Ok(rdtsc() - start)
}
