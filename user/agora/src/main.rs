//! `agora`: the Musubi side of `cargo xtask bench agora`, the reproductions of P0
//! (Agora-1, Takano, Tago and Masuda, IPSJ 1989): an OS made of small system processes
//! joined by rendezvous, placed on processors by configuration.
//!
//! Here the system processes are the file service's servers (`fs`, `blk`, and whatever
//! structure is merged behind them); this program reaches them only through `ulib::fs`,
//! pipes and `SPAWN`, so it measures the structure as it is. Where it runs, and where the
//! servers run, is set by the boot words xtask gives (the boot configuration's
//! `files.core=C buffers.cores=C`, and `start=C:agora,...`).
//!
//! | command | what it prints |
//! |---|---|
//! | `agora calls SAMPLES` | Table 2: per call (read hit, read miss, write, open, close, exec) the instructions and the rendezvous messages it caused; Table 4: a compile's file calls with rendezvous only and with write, close and unlink reply-less (`table4.rs`); plus the rendezvous round trip with a 4 KiB ICA (what one fs request's IPC costs) on this core and across cores, and a 1-byte pipe round trip on this core and across cores (deterministic mode) |
//! | `agora table4 SAMPLES` | Table 4 in wall time (parallel mode): a compile's file calls with rendezvous only and with write, close and unlink reply-less, ns per compile (`table4.rs`) |
//! | `agora execs SAMPLES K...` | Figure 3: K threads each start `nop` at once, read through the file service and started from that image, or from the boot archive by the kernel; the time until all have ended (`execs.rs`) |
//! | `agora stream SAMPLES CORE THINK_US...` | Figure 4: 1-byte messages through a pipe from this program to a reader on `CORE`, each side computing THINK µs per message (parallel mode, wall time) |
//! | `agora rstream SAMPLES CORE THINK_US...` | the same with the pipe on the writer's core, so the reader waits across cores (`pipe.wait=notify` against `poll`) |
//! | `agora lsort SAMPLES LS_CORE SORT_CORE` | Table 3: `ls -l` piped to `sort` (a directory listed with a `stat` per entry, piped to a sort) with the two programs on the given cores (parallel mode) |
//!
//! Commands may be joined by `+` (`agora lsort 5 1 1 + stream 5 0 0 100`), and a last
//! word `off` powers the machine off after them: a benchmark boot's servers never end, so
//! the kernel's `poweroff` (after the boot programs end) would never come.
//!
//! Each sample is one line, `BENCH {"peer":"musubi","case":...,"unit":...,"per_op":...,
//! "busy":...,"messages":...,"cross":...,"cross_replies":...,"cross_bare":...}`: the cost
//! per operation (from the clock), the busy time of all cores per operation
//! ([`busy_now`]: without the time they waited halted, e.g. for the disk), and the
//! rendezvous messages per operation, counted by the kernel on every core
//! (`CoreInfo::ipc_messages`): all of them, those that crossed between cores, the
//! cross-core answers, and those of them that carried no reply data. The run ends with `BENCH done`, or a `BENCH error` line.
//!
//! Helpers it spawns of itself: `agora echo EP SAMPLES OPS CASE` (the round trip's
//! caller), `agora pong` (the pipe round trip's far end), `agora sink THINK_US` (Figure
//! 4's reader), `agora ls` and `agora sort` (Table 3).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;

mod calls;
mod execs;
mod pipes;
mod table4;

use ulib::abi::{CoreInfo, ENDED_EXIT, IPC_COUNTERS, MAX_CORES, MODE_IDLE};
use ulib::abi::{Pid, IPC_REQUESTS_CROSS};
use ulib::abi::{IPC_REPLIES, IPC_REPLIES_CROSS, IPC_REPLIES_CROSS_BARE, IPC_REQUESTS};
use ulib::bench::rdtsc;
use ulib::{bench, println, sys};

ulib::main!(main);

/// Errors are short texts, printed in the `BENCH error` line.
pub type Res<T> = Result<T, &'static str>;

fn main(args: &[&str]) -> i32 {
    // Helpers (spawned by the commands): their errors end them with status 1.
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    match args.get(1).copied() {
        Some("echo") => return status(calls::echo(&args[2..])),
        Some("pong") => return status(pipes::pong()),
        Some("sink") => return status(num(2).ok_or("think").and_then(pipes::sink)),
        Some("ls") => return status(pipes::ls()),
        Some("sort") => return status(pipes::sort()),
        _ => {}
    }
    // Commands, one or more joined by `+`; a last word `off` powers the machine off after
    // them (a benchmark boot, whose servers never end).
    let mut words = &args[1..];
    let off = words.last() == Some(&"off");
    if off {
        words = &words[..words.len() - 1];
    }
    let r = words.split(|w| *w == "+").try_for_each(command);
    let code = match r {
        Ok(()) => {
            bench::done();
            0
        }
        Err(e) => {
            println!("BENCH error {{\"case\":\"agora\",\"error\":\"{e}\"}}");
            1
        }
    };
    if off {
        println!("agora: powering off: {}", sys::poweroff());
    }
    code
}

/// One command and its arguments.
fn command(words: &[&str]) -> Res<()> {
    let num = |i: usize| words.get(i).and_then(|a| a.parse::<u64>().ok());
    match words.first().copied() {
        Some("calls") => num(1)
            .ok_or("usage: agora calls SAMPLES")
            .and_then(calls::run),
        Some("table4") => num(1).ok_or("usage: agora table4 SAMPLES").and_then(|s| {
            calls::wait_for_fs()?;
            table4::run(s, true)
        }),
        Some(cmd @ ("stream" | "rstream")) => {
            let thinks: Option<Vec<u64>> = words.get(3..).map_or(Some(Vec::new()), |w| {
                w.iter().map(|a| a.parse().ok()).collect()
            });
            let at_writer = cmd == "rstream";
            match (num(1), num(2), thinks) {
                (Some(s), Some(core), Some(t)) if !t.is_empty() => {
                    pipes::stream(s, core as usize, &t, at_writer)
                }
                _ => Err("usage: agora stream|rstream SAMPLES CORE THINK_US..."),
            }
        }
        Some("execs") => {
            let ks: Option<Vec<u64>> = words
                .get(2..)
                .and_then(|w| w.iter().map(|a| a.parse().ok()).collect());
            match (num(1), ks) {
                (Some(s), Some(ks)) if !ks.is_empty() => execs::run(s, &ks),
                _ => Err("usage: agora execs SAMPLES K..."),
            }
        }
        Some("lsort") => match (num(1), num(2), num(3)) {
            (Some(s), Some(a), Some(b)) => pipes::lsort(s, a as usize, b as usize),
            _ => Err("usage: agora lsort SAMPLES LS_CORE SORT_CORE"),
        },
        _ => Err("usage: agora calls|execs|stream|rstream|lsort ARGS [+ ...] [off]"),
    }
}

fn status(r: Res<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            println!("agora: {e}");
            1
        }
    }
}

/// Every core's rendezvous message counters, added up.
pub fn messages_now() -> Res<[u64; IPC_COUNTERS]> {
    let mut cores = [CoreInfo::default(); MAX_CORES];
    let n = sys::cores(&mut cores).map_err(|_| "CORES failed")?;
    let mut sum = [0; IPC_COUNTERS];
    for c in &cores[..n] {
        for (s, v) in sum.iter_mut().zip(c.ipc_messages) {
            *s += v;
        }
    }
    Ok(sum)
}

/// Every core's time in the busy modes (user, kernel, lock, interrupt: all but idle), added
/// up: under `-icount` the instructions the cores executed, without the time they spent
/// halted waiting (for the disk, for another core).
pub fn busy_now() -> Res<u64> {
    let modes = sys::modes().map_err(|_| "MODES failed")?;
    Ok(modes
        .iter()
        .map(|m| m.ns.iter().sum::<u64>() - m.ns[MODE_IDLE])
        .sum())
}

/// The busy time an empty `start`/`stop` interval counts (the tail of the first `MODES`
/// call and the head of the second), taken off every interval ([`calibrate`]).
static BUSY_FLOOR: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Measure [`BUSY_FLOOR`]: the least of 16 empty intervals.
pub fn calibrate() -> Res<()> {
    BUSY_FLOOR.store(0, core::sync::atomic::Ordering::Relaxed);
    let mut least = u64::MAX;
    for _ in 0..16 {
        let b0 = busy_now()?;
        least = least.min(busy_now()?.saturating_sub(b0));
    }
    BUSY_FLOOR.store(least, core::sync::atomic::Ordering::Relaxed);
    Ok(())
}

fn busy_since(b0: u64) -> Res<u64> {
    let floor = BUSY_FLOOR.load(core::sync::atomic::Ordering::Relaxed);
    Ok(busy_now()?.saturating_sub(b0).saturating_sub(floor))
}

/// Cores online.
pub fn cores_online() -> Res<usize> {
    let mut cores = [CoreInfo::default(); MAX_CORES];
    let n = sys::cores(&mut cores).map_err(|_| "CORES failed")?;
    Ok(cores[..n].iter().filter(|c| c.online != 0).count())
}

/// What one sample measured: time (TSC ticks: instructions under `-icount shift=0`, or
/// nanoseconds when a caller adds them itself) and the messages counted between `start`
/// and `stop`, over possibly many intervals. The counters are read outside the timed
/// interval (before `start`'s clock, after `stop`'s), so reading them costs nothing here.
#[derive(Default)]
pub struct Meter {
    pub ticks: u64,
    /// Busy time of all cores ([`busy_now`]).
    busy: u64,
    counts: [u64; IPC_COUNTERS],
    t0: u64,
    b0: u64,
    c0: [u64; IPC_COUNTERS],
}

impl Meter {
    pub fn start(&mut self) -> Res<()> {
        self.c0 = messages_now()?;
        self.b0 = busy_now()?;
        self.t0 = rdtsc();
        Ok(())
    }

    pub fn stop(&mut self) -> Res<()> {
        let t = rdtsc();
        self.busy += busy_since(self.b0)?;
        let c = messages_now()?;
        self.ticks += t - self.t0;
        for (i, n) in self.counts.iter_mut().enumerate() {
            *n += c[i] - self.c0[i];
        }
        Ok(())
    }

    /// Add an interval measured by the caller (in its own unit) with the messages counted
    /// since `start`.
    pub fn stop_with(&mut self, elapsed: u64) -> Res<()> {
        self.busy += busy_since(self.b0)?;
        let c = messages_now()?;
        self.ticks += elapsed;
        for (i, n) in self.counts.iter_mut().enumerate() {
            *n += c[i] - self.c0[i];
        }
        Ok(())
    }

    /// Print the sample: per operation over `ops`.
    pub fn print(&self, case: &str, unit: &str, ops: u64) {
        let per = |x: u64| x as f64 / ops as f64;
        let c = &self.counts;
        println!(
            "BENCH {{\"peer\":\"musubi\",\"case\":\"{case}\",\"unit\":\"{unit}\",\"per_op\":{:.1},\"busy\":{:.1},\"messages\":{:.2},\"cross\":{:.2},\"cross_replies\":{:.2},\"cross_bare\":{:.2}}}",
            per(self.ticks),
            per(self.busy),
            per(c[IPC_REQUESTS] + c[IPC_REPLIES]),
            per(c[IPC_REQUESTS_CROSS] + c[IPC_REPLIES_CROSS]),
            per(c[IPC_REPLIES_CROSS]),
            per(c[IPC_REPLIES_CROSS_BARE]),
        );
    }
}

/// Run `case` SAMPLES times after one warm-up: each sample is `run(ops, meter)`, which
/// starts and stops the meter around what it measures.
pub fn sampled(
    case: &str,
    unit: &str,
    samples: u64,
    ops: u64,
    mut run: impl FnMut(u64, u64, &mut Meter) -> Res<()>,
) -> Res<()> {
    for sample in 0..=samples {
        let mut m = Meter::default();
        run(sample, ops, &mut m).inspect_err(|e| {
            println!("BENCH error {{\"case\":\"{case}\",\"error\":\"{e}\"}}");
        })?;
        if sample > 0 {
            m.print(case, unit, ops);
        }
    }
    Ok(())
}

/// Wait for child `pid` and require a clean exit.
pub fn reap(pid: Pid, what: &'static str) -> Res<()> {
    match sys::wait(Some(pid)) {
        Ok((_, s)) if s.how == ENDED_EXIT && s.code == 0 => Ok(()),
        _ => Err(what),
    }
}

/// The byte at offset `o` of the files xtask puts on the disk (`HIT.DAT`, `MISS.DAT`).
pub fn pattern(o: u64) -> u8 {
    (o % 251) as u8
}
