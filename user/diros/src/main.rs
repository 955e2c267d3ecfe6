//! `diros RUNS ITEMS TA_MS TB_MS NMAX`: the Musubi side of `cargo xtask bench diros`, P1's
//! (DIROS) Figure 2: light-weight processes against asynchronous (split-phase) system
//! calls. `diros check`: a self-test of `ulib::thread` (threads, joins, a contended heap).
//!
//! The work is ITEMS items, each a task A (a CPU loop of TA_MS) whose result task B then
//! uses (a timed wait of TB_MS); A runs in one thread, one after another, and up to n
//! tasks B are under way at once, for n = 1..NMAX. Measured: the time from the start of the
//! first A until every B has ended ("processing time"), in two ways (P1 Fig. 1):
//!
//! - `async`: one thread. After each A it issues `SUBMIT(TIMER TB)`; when n are in flight it
//!   first takes one result with `COLLECT(ANY)` (the result queue tells it which ended).
//! - `threads`: the parent thread runs A; n worker threads (`ulib::thread`) each wait on a
//!   semaphore (`here/sem/p<pid>-...`: parent -> worker needs only synchronisation), run B as
//!   `SLEEP(TB)`, and `SEND` a message naming themselves to an endpoint the process owns
//!   (worker -> parent must say who finished); after each A the parent gives the semaphore
//!   a V, and when n are busy it first `RECV`s one message.
//!
//! Threads of a process share its core, like P1's light-weight processes: a worker given
//! its V starts only when the parent stops running (at the next tick or when it blocks),
//! while a submitted timer starts at once, which is the difference P1 explains Fig. 2 with.
//!
//! Task A is a fixed number of loop iterations, calibrated once at start so that it takes
//! TA_MS of CPU (under `-icount` the clock counts instructions, so this is exact and
//! repeatable). Output: per run, n and way, `BENCH {"peer":"musubi","case":"async, n=3",
//! "unit":"ms","per_op":1234.5}` (per_op: the processing time of all ITEMS items in
//! virtual ms), then `BENCH done`; first `diros check: ok` (the self-test runs before the
//! measurement) and a line `diros: calibrated ... iterations per ms`.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights};
use ulib::{ipc, println, res, sem, sys, thread};

ulib::main!(main);

/// Label of a worker's "my B ended" message (word 0: the worker's index).
const DONE: u64 = 1;

/// What the workers share with the parent (set before they start).
static SEM: AtomicU64 = AtomicU64::new(0);
static EP: AtomicU64 = AtomicU64::new(0);
static TB_NS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

fn main(args: &[&str]) -> i32 {
    if args.get(1) == Some(&"check") {
        return match check() {
            Ok(()) => {
                println!("diros check: ok");
                0
            }
            Err(e) => {
                println!("diros check: FAIL {e}");
                1
            }
        };
    }
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let (Some(runs), Some(items), Some(ta_ms), Some(tb_ms), Some(nmax)) =
        (num(1), num(2), num(3), num(4), num(5))
    else {
        println!("usage: diros RUNS ITEMS TA_MS TB_MS NMAX | diros check");
        return 2;
    };
    match bench(runs, items, ta_ms, tb_ms, nmax) {
        Ok(()) => {
            println!("BENCH done");
            0
        }
        Err(e) => {
            println!("BENCH error {{\"case\":\"diros\",\"error\":\"{e}\"}}");
            1
        }
    }
}

fn bench(runs: u64, items: u64, ta_ms: u64, tb_ms: u64, nmax: u64) -> Result<(), String> {
    // The threads library first: a failure there would make the figures meaningless.
    check().map_err(|e| format!("diros check: {e}"))?;
    println!("diros check: ok");
    let per_ms = calibrate();
    println!("diros: calibrated {per_ms} iterations per ms of task A");
    let a_iters = per_ms * ta_ms;
    TB_NS.store(tb_ms * 1_000_000, Ordering::SeqCst);
    // Under a name reserved for this process (`abi::res::reserved_for`): under a fixed
    // one, any program started first could keep the benchmark from running.
    let me = ulib::sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let name = alloc::format!("here/endpoint/p{}-diros", me.in_machine());
    let ep = ipc::open_endpoint(&name, Rights(0x2f)).map_err(|e| format!("endpoint: {e}"))?;
    EP.store(ep.0, Ordering::SeqCst);
    for _ in 0..runs {
        for n in 1..=nmax {
            let t = async_way(n, items, a_iters)?;
            report("async", n, t);
            let t = threads_way(n, items, a_iters, ep)?;
            report("threads", n, t);
        }
    }
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))
}

fn report(way: &str, n: u64, ns: u64) {
    let ms = ns as f64 / 1e6;
    println!(
        "BENCH {{\"peer\":\"musubi\",\"case\":\"{way}, n={n}\",\"unit\":\"ms\",\"per_op\":{ms:.3}}}"
    );
}

/// Task A: `iters` rounds of a loop the compiler cannot remove.
#[inline(never)]
fn task_a(iters: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..iters {
        x = core::hint::black_box(x.rotate_left(5) ^ i);
    }
    x
}

/// Iterations of [`task_a`] per ms: the fastest of a few timed runs (a tick that lands in
/// one only makes it slower).
fn calibrate() -> u64 {
    const ITERS: u64 = 2_000_000;
    let best = (0..5)
        .map(|_| {
            let t0 = sys::clock_ns().unwrap_or(0);
            task_a(ITERS);
            sys::clock_ns().unwrap_or(0).saturating_sub(t0).max(1)
        })
        .min()
        .unwrap_or(1);
    (ITERS * 1_000_000 / best).max(1)
}

fn now() -> Result<u64, String> {
    sys::clock_ns().map_err(|e| format!("clock: {e}"))
}

/// One thread, split-phase calls: A, then SUBMIT a timer of TB; at most `n` in flight.
fn async_way(n: u64, items: u64, a_iters: u64) -> Result<u64, String> {
    let tb = TB_NS.load(Ordering::SeqCst);
    let start = now()?;
    let mut in_flight = 0;
    for _ in 0..items {
        if in_flight == n {
            collect_one()?;
            in_flight -= 1;
        }
        core::hint::black_box(task_a(a_iters));
        ipc::submit(&ipc::timer(tb)).map_err(|e| format!("submit: {e}"))?;
        in_flight += 1;
    }
    for _ in 0..in_flight {
        collect_one()?;
    }
    Ok(now()? - start)
}

fn collect_one() -> Result<(), String> {
    let c = ipc::collect(api::ANY, u64::MAX).map_err(|e| format!("collect: {e}"))?;
    ipc::result(&c).map(drop).map_err(|e| format!("timer: {e}"))
}

/// Light-weight processes: the parent runs A and gives a semaphore a V; `n` workers take
/// it, SLEEP for TB and SEND "done" to the parent's endpoint.
fn threads_way(n: u64, items: u64, a_iters: u64, ep: ResId) -> Result<u64, String> {
    // Reserved for this process, as its endpoint is (`bench`).
    let me = ulib::sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let name = format!("here/sem/p{}-diros{n}", me.in_machine());
    let s = sem::open_sem(&name, 0, Rights(0x2f)).map_err(|e| format!("sem: {e}"))?;
    SEM.store(s.0, Ordering::SeqCst);
    STOP.store(false, Ordering::SeqCst);
    let workers: Vec<thread::Thread> = (0..n)
        .map(|i| thread::spawn(worker, i))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("spawn: {e}"))?;
    // Let every worker reach its P, so that no start-up is timed.
    for _ in 0..n {
        sys::yield_now().map_err(|e| format!("yield: {e}"))?;
    }
    let start = now()?;
    let mut busy = 0;
    for _ in 0..items {
        if busy == n {
            recv_done(ep)?;
            busy -= 1;
        }
        core::hint::black_box(task_a(a_iters));
        sem::v(s).map_err(|e| format!("V: {e}"))?;
        busy += 1;
    }
    for _ in 0..busy {
        recv_done(ep)?;
    }
    let took = now()? - start;
    STOP.store(true, Ordering::SeqCst);
    for _ in 0..n {
        sem::v(s).map_err(|e| format!("V (stop): {e}"))?;
    }
    for w in workers {
        let v = w.join().map_err(|e| format!("join: {e}"))?;
        if v != 0 {
            return Err(format!("a worker failed ({v})"));
        }
    }
    res::close(s).map_err(|e| format!("close sem: {e}"))?;
    Ok(took)
}

fn recv_done(ep: ResId) -> Result<(), String> {
    let r = ipc::recv(ep, u64::MAX).map_err(|e| format!("recv: {e}"))?;
    if r.msg.label != DONE {
        return Err(format!("unexpected message {:?}", r.msg));
    }
    Ok(())
}

/// A worker: P, then B (SLEEP), then "done" to the parent; ends with 0 when told to stop,
/// with 1 if a call failed.
fn worker(index: u64) -> u64 {
    let s = ResId(SEM.load(Ordering::SeqCst));
    let ep = ResId(EP.load(Ordering::SeqCst));
    let tb = TB_NS.load(Ordering::SeqCst);
    let done = Msg {
        label: DONE,
        words: [index, 0, 0, 0, 0, 0],
    };
    loop {
        if sem::p(s).is_err() {
            return 1;
        }
        if STOP.load(Ordering::SeqCst) {
            return 0;
        }
        if sys::sleep_ns(tb).is_err() || ipc::send(ep, &done).is_err() {
            return 1;
        }
    }
}

// ---- diros check ----------------------------------------------------------------------------

const CHECK_THREADS: u64 = 4;
const CHECK_ROUNDS: u64 = 20_000;

/// Threads that allocate, fill, check and free heap blocks of varying sizes for several
/// time slices each (so the kernel preempts them inside the allocator), while the main
/// thread does the same; each returns a checksum that `join` brings back.
fn check() -> Result<(), String> {
    let me = thread::self_id().map_err(|e| format!("self_id: {e}"))?;
    let workers: Vec<thread::Thread> = (1..=CHECK_THREADS)
        .map(|i| thread::spawn(churn, i))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("spawn: {e}"))?;
    if workers.iter().any(|w| w.id() == me) {
        return Err("a thread has the main thread's id".into());
    }
    let mine = churn(0);
    if mine != expected(0) {
        return Err(format!(
            "main thread: checksum {mine:#x}, expected {:#x}",
            expected(0)
        ));
    }
    for (i, w) in (1..=CHECK_THREADS).zip(workers) {
        let v = w.join().map_err(|e| format!("join {i}: {e}"))?;
        if v != expected(i) {
            return Err(format!(
                "thread {i}: checksum {v:#x}, expected {:#x}",
                expected(i)
            ));
        }
    }
    Ok(())
}

fn expected(seed: u64) -> u64 {
    (0..CHECK_ROUNDS).fold(0u64, |acc, r| acc.wrapping_add(block_sum(seed, r)))
}

fn block_len(seed: u64, round: u64) -> usize {
    (16 + (seed * 131 + round * 17) % 3000) as usize
}

fn block_sum(seed: u64, round: u64) -> u64 {
    let len = block_len(seed, round);
    (0..len as u64).fold(0u64, |acc, i| acc.wrapping_add((seed ^ round ^ i) & 0xff))
}

/// Allocate, fill and check a block per round (a few kept alive across rounds); the sum of
/// what was read back.
fn churn(seed: u64) -> u64 {
    let mut keep: Vec<Vec<u8>> = Vec::new();
    let mut sum = 0u64;
    for round in 0..CHECK_ROUNDS {
        let len = block_len(seed, round);
        let block: Vec<u8> = (0..len as u64)
            .map(|i| ((seed ^ round ^ i) & 0xff) as u8)
            .collect();
        keep.push(block);
        if keep.len() > 8 {
            let old = keep.remove(0);
            core::hint::black_box(&old);
        }
        let last = keep.last().map_or(0, |b| {
            b.iter()
                .fold(0u64, |acc, &x| acc.wrapping_add(u64::from(x)))
        });
        sum = sum.wrapping_add(last);
    }
    sum
}
