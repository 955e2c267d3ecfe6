//! `lwpcheck [CORE [killed]]`: threads (P1's light-weight processes, through
//! `ulib::thread`) and semaphores (`ulib::sem`). Prints `lwpcheck: ok` and exits 0, or the
//! first failure and exits 1.
//!
//! Four threads wait on a semaphore, are released one V each, compute with floating point
//! (each thread's FPU state is its own), send their results to an endpoint of the process
//! (the kernel vouches the sender is this process), and exit with a value that `join`
//! returns. Then a child on core CORE waits on a semaphore of this core (a P through RPCC
//! that waits in the semaphore) until this process gives it a V; closing a semaphore wakes
//! its waiters with an error; with `killed`, a waiter there killed does not take the next
//! V's unit with it (not in big-lock mode, where a P on another core's semaphore looks
//! again every tick instead of waiting in it); bad thread ids are errors. Last, four
//! threads attach and detach vregions in the process itself at once (`attach_at_once`), and
//! one thread acts as another user while the others go on acting as the process
//! (`acting_users`). Waiters killed while they wait leave nothing in the semaphore
//! (`dead_waiters_forgotten`).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use ulib::abi::ipc::Msg;
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::{Error, Priority};
use ulib::{ipc, println, res, sem, sys, thread};

ulib::main!(main);

const THREADS: usize = 4;

static GO: AtomicU64 = AtomicU64::new(0);
static EP: AtomicU64 = AtomicU64::new(0);

/// A thread: wait for its V, compute, report, exit with 100 + its number.
fn worker(n: u64) -> u64 {
    let ok = sem::p(ResId(GO.load(Ordering::Relaxed))).is_ok();
    // Floating point in every thread at once: each has its own registers.
    let mut x = n as f64 + 0.5;
    for _ in 0..1000 {
        x = x * 1.000001 + 0.25;
        let _ = sys::yield_now();
    }
    let expect = {
        let mut y = n as f64 + 0.5;
        for _ in 0..1000 {
            y = y * 1.000001 + 0.25;
        }
        y
    };
    let msg = Msg {
        label: n,
        words: [u64::from(ok), u64::from(x == expect), 0, 0, 0, 0],
    };
    let _ = ipc::send(ResId(EP.load(Ordering::Relaxed)), &msg);
    100 + n
}

fn main(args: &[&str]) -> i32 {
    let r = match args.get(1).copied() {
        Some("waiter") => waiter(args),
        other => {
            let here = sys::core().unwrap_or(0);
            let killed = args.get(2) == Some(&"killed");
            check(other.and_then(|c| c.parse().ok()).unwrap_or(here), killed)
        }
    };
    match r {
        Ok(()) => {
            if args.get(1) != Some(&"waiter") {
                println!("lwpcheck: ok");
            }
            0
        }
        Err(e) => {
            println!("lwpcheck: FAIL {e}");
            1
        }
    }
}

fn check(core: usize, killed: bool) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let go = open_sem("here/sem/lwp-go", 0)?;
    GO.store(go.0, Ordering::Relaxed);
    let ep = ipc::open_endpoint("here/endpoint/lwp", Rights::OWNER_ALL)
        .map_err(|e| format!("endpoint: {e}"))?;
    EP.store(ep.0, Ordering::Relaxed);
    let threads: Vec<thread::Thread> = (0..THREADS as u64)
        .map(|i| thread::spawn(worker, i))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("thread spawn: {e}"))?;
    let tids: Vec<u64> = threads.iter().map(thread::Thread::id).collect();
    for _ in 0..THREADS {
        sem::v(go).map_err(|e| format!("V: {e}"))?;
    }
    let mut seen = 0u64;
    for _ in 0..THREADS {
        let r = ipc::recv(ep, 10_000_000_000).map_err(|e| format!("recv: {e}"))?;
        if r.sender != me || r.sender_thread != tids[r.msg.label as usize] {
            return Err(format!(
                "message from {} thread {} (not this process {me}, thread {})",
                r.sender, r.sender_thread, tids[r.msg.label as usize]
            ));
        }
        if r.msg.words != [1, 1, 0, 0, 0, 0] {
            return Err(format!(
                "thread {} reports {:?} (P ok, FPU ok)",
                r.msg.label, r.msg.words
            ));
        }
        seen |= 1 << r.msg.label;
    }
    if seen != (1 << THREADS) - 1 {
        return Err(format!("threads heard from: {seen:#b}"));
    }
    for (i, t) in threads.into_iter().enumerate() {
        let v = t.join().map_err(|e| format!("join: {e}"))?;
        if v != 100 + i as u64 {
            return Err(format!("thread {i} exit value {v}"));
        }
    }
    let again = thread::join_id(tids[0], 0);
    if again != Err(Error::NoSuchProcess) {
        return Err(format!("second join gave {again:?}"));
    }
    let own = thread::self_id().map_err(|e| format!("self: {e}"))?;
    let selfjoin = thread::join_id(own, 0);
    if selfjoin != Err(Error::InvalidArgument) {
        return Err(format!("joining itself gave {selfjoin:?}"));
    }
    // A P from another core waits in the semaphore until our V.
    let gate = open_sem("here/sem/lwp-gate", 0)?;
    let arg = format!("{:#x}", gate.0);
    let child = sys::spawn_on("lwpcheck", &["waiter", &arg], Priority::App, core)
        .map_err(|e| format!("spawn: {e}"))?;
    let _ = sys::sleep_ns(50_000_000);
    if let Ok(Some(_)) = sys::wait_timeout(Some(child), 0).map(Some) {
        return Err("the waiter did not wait".into());
    }
    sem::v(gate).map_err(|e| format!("V gate: {e}"))?;
    match sys::wait(Some(child)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
        other => return Err(format!("waiter ended {other:?}")),
    }
    // Closing a semaphore answers its waiters (StaleResource: see the waiter's second P).
    let child = sys::spawn_on("lwpcheck", &["waiter", &arg, "close"], Priority::App, core)
        .map_err(|e| format!("spawn: {e}"))?;
    let _ = sys::sleep_ns(50_000_000);
    res::close(gate).map_err(|e| format!("close gate: {e}"))?;
    match sys::wait(Some(child)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
        other => return Err(format!("waiter on a closed semaphore ended {other:?}")),
    }
    if killed && core != sys::core().unwrap_or(core) {
        killed_waiter(core)?;
    }
    dead_waiters_forgotten()?;
    res::close(go).map_err(|e| format!("close: {e}"))?;
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))?;
    attach_at_once()?;
    acting_users()
}

/// A waiter on another core killed while its P waits in a semaphore of this core: the
/// next V's unit is not lost with it (a regression found by a review: the V handed the
/// unit to the dead waiter's request, whose answer nobody took, and a semaphore used as a
/// lock stayed taken for ever; the kernel now gives it back, `rpcc/orphan.rs`).
fn killed_waiter(core: usize) -> Result<(), String> {
    // Its P made by the system call (a thread waits for the answer), then submitted (the
    // process's ticket waits for it).
    for how in ["call", "submit"] {
        killed_waiter_with(core, how).map_err(|e| format!("a P by {how}: {e}"))?;
    }
    Ok(())
}

fn killed_waiter_with(core: usize, how: &str) -> Result<(), String> {
    let gate = open_sem("here/sem/lwp-killed", 0)?;
    let r = (|| {
        let arg = format!("{:#x}", gate.0);
        let mut child_args = alloc::vec!["waiter", arg.as_str()];
        if how == "submit" {
            child_args.push("submit");
        }
        let child = sys::spawn_on("lwpcheck", &child_args, Priority::App, core)
            .map_err(|e| format!("spawn: {e}"))?;
        // Until its P waits here (the semaphore counts its waiters).
        let waits = one_waits(gate);
        let _ = sys::kill(child);
        let _ = sys::wait(Some(child));
        if !waits {
            return Err("the waiter on another core never waited in the semaphore".into());
        }
        sem::v(gate).map_err(|e| format!("V after the kill: {e}"))?;
        // The unit comes back through the other core (at its next look at its rings: a
        // tick at most); a hang guard only.
        for _ in 0..10_000 {
            if res::control(gate, ulib::abi::syscall::control::SEM_TRY, 0, 0).is_ok() {
                return Ok(());
            }
            let _ = sys::sleep_ns(1_000_000);
        }
        Err("the unit of a V after its waiter was killed was lost".into())
    })();
    let _ = res::close(gate);
    r
}

/// Whether the semaphore `gate` comes to count one waiter (looked at every ms; 10 s is a
/// hang guard only).
fn one_waits(gate: ResId) -> bool {
    for _ in 0..10_000 {
        if res::info(gate).is_ok_and(|i| i.detail == 1) {
            return true;
        }
        let _ = sys::sleep_ns(1_000_000);
    }
    false
}

/// Waiters killed in [`dead_waiters_forgotten`].
const DEAD_WAITERS: usize = 8;

/// Waiters on this core killed while their P waits, one after another: `INFO` counts only
/// live waiters (it counted the dead ones, which stayed queued until a V: a review; that
/// they are not kept is `limits::killed_semaphore_waiters_are_not_kept`, in the kernel).
fn dead_waiters_forgotten() -> Result<(), String> {
    let gate = open_sem("here/sem/lwp-dead", 0)?;
    let here = sys::core().unwrap_or(0);
    let r = (|| {
        let arg = format!("{:#x}", gate.0);
        for round in 0..DEAD_WAITERS {
            let child = sys::spawn_on("lwpcheck", &["waiter", arg.as_str()], Priority::App, here)
                .map_err(|e| format!("spawn: {e}"))?;
            let waits = one_waits(gate);
            let _ = sys::kill(child);
            let _ = sys::wait(Some(child));
            if !waits {
                return Err(format!("waiter {round} never waited in the semaphore"));
            }
        }
        match res::info(gate) {
            Ok(i) if i.detail == 0 => Ok(()),
            Ok(i) => Err(format!(
                "{DEAD_WAITERS} waiters killed, the semaphore counts {} waiting",
                i.detail
            )),
            Err(e) => Err(format!("info: {e}")),
        }
    })();
    let _ = res::close(gate);
    r
}

/// Attaches and detaches per thread in [`attach_at_once`].
const ATTACHES: u64 = 2_000;
/// Where thread `n` attaches its vregion.
const ATTACH_AT: u64 = 0x0000_5600_0000_0000;

/// One thread of [`attach_at_once`]: its own vregion attached and detached in the process
/// itself [`ATTACHES`] times; 0, or 1 + the loop round that failed.
fn attacher(n: u64) -> u64 {
    let me = sys::getpid().map(|p| p.serial()).unwrap_or(0);
    let Ok(r) = res::open_vregion(
        &format!("here/vregion/lwpa-{me}-{n}"),
        4096,
        Rights::OWNER_ALL,
    ) else {
        return 1;
    };
    let at = ATTACH_AT + n * 0x10_0000;
    let mut failed = 0;
    for i in 0..ATTACHES {
        if res::attach_here(r, at, true).is_err() || res::detach_here(at).is_err() {
            failed = 2 + i;
            break;
        }
    }
    let _ = res::close(r);
    failed
}

/// Threads attaching in the process itself at once (`ulib::res::attach_here`, which opens a
/// handle to the process's own vspace for each call): each call's handle must be its own.
/// They once shared one name, and a thread preempted between its open and close made the
/// next thread's attach fail `AlreadyExists` (found by `bench agora`'s Figure 3, whose
/// threads read files at once).
fn attach_at_once() -> Result<(), String> {
    let threads: Vec<thread::Thread> = (0..THREADS as u64)
        .map(|n| thread::spawn(attacher, n).map_err(|e| format!("thread spawn: {e}")))
        .collect::<Result<_, _>>()?;
    for (n, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(0) => {}
            Ok(1) => return Err(format!("attacher {n}: open vregion failed")),
            Ok(round) => {
                return Err(format!(
                    "attacher {n}: attach or detach in the process itself failed at round {} of {ATTACHES}",
                    round - 2
                ))
            }
            Err(e) => return Err(format!("join attacher {n}: {e}")),
        }
    }
    Ok(())
}

/// Where [`actor`] and the main thread of [`acting_users`] meet: 1 once the actor acts as
/// [`ACTOR_USER`], 2 once the main thread has looked at its own user.
static ACTING: AtomicU64 = AtomicU64::new(0);
/// The user [`actor`] acts as.
const ACTOR_USER: u32 = 4242;
/// Pauses of 100 us in a wait for the other thread (10 s at least: it only catches a hang).
const ACTING_PAUSES: u32 = 100_000;

/// Wait (bounded) until [`ACTING`] is `step`.
fn acting_reaches(step: u64) -> bool {
    for _ in 0..ACTING_PAUSES {
        if ACTING.load(Ordering::SeqCst) == step {
            return true;
        }
        let _ = sys::sleep_ns(100_000);
    }
    ACTING.load(Ordering::SeqCst) == step
}

/// The thread of [`acting_users`]: it alone acts as [`ACTOR_USER`] while the main thread
/// looks, still after being switched away and back, then as the process again; 0, or the
/// step that failed.
fn actor(_: u64) -> u64 {
    let Ok(own) = res::getuser() else {
        return 1;
    };
    if res::thread_setuser(Some(UserId(ACTOR_USER))).is_err() {
        return 2;
    }
    if res::getuser() != Ok(UserId(ACTOR_USER)) {
        return 3;
    }
    ACTING.store(1, Ordering::SeqCst);
    if !acting_reaches(2) {
        return 4;
    }
    if res::getuser() != Ok(UserId(ACTOR_USER)) {
        return 5;
    }
    if res::thread_setuser(None).is_err() || res::getuser() != Ok(own) {
        return 6;
    }
    0
}

/// `THREAD_SETUSER`: one thread acting as another user leaves the process's other threads
/// acting as the process (with `SETUSER`, machd's thread acting for a remote client made
/// its file workers act as that client too: found by a review).
fn acting_users() -> Result<(), String> {
    let own = res::getuser().map_err(|e| format!("getuser: {e}"))?;
    ACTING.store(0, Ordering::SeqCst);
    let t = thread::spawn(actor, 0).map_err(|e| format!("thread spawn: {e}"))?;
    let acting = acting_reaches(1);
    let seen = res::getuser();
    ACTING.store(2, Ordering::SeqCst);
    let step = t.join().map_err(|e| format!("join actor: {e}"))?;
    if step != 0 {
        return Err(format!(
            "actor acting as user {ACTOR_USER}: step {step} failed"
        ));
    }
    if !acting {
        return Err(String::from("actor never acted as another user"));
    }
    if seen != Ok(own) {
        return Err(format!(
            "while a thread acts as user {ACTOR_USER}, the main thread acts as {seen:?}, not {own:?}"
        ));
    }
    Ok(())
}

fn open_sem(name: &str, count: u64) -> Result<ResId, String> {
    sem::open_sem(name, count, Rights(0xff)).map_err(|e| format!("open {name}: {e}"))
}

/// Child: P on the semaphore given (of another core); with "close", expect it to be closed.
fn waiter(args: &[&str]) -> Result<(), String> {
    let gate = args
        .get(2)
        .and_then(|a| ResId::parse(a))
        .ok_or("no semaphore")?;
    let r = if args.get(3) == Some(&"submit") {
        // The same P submitted (answered to the process's ticket, not to a waiting thread).
        let sub = ipc::op(
            ulib::abi::ipc::SUBMIT_RES_CONTROL,
            gate.0,
            [ulib::abi::syscall::control::SEM_P, 0, 0, 0],
        );
        ipc::submit(&sub)
            .and_then(|t| ipc::collect(t, u64::MAX))
            .and_then(|c| ipc::result(&c).map(drop))
    } else {
        sem::p(gate)
    };
    match (args.get(3).filter(|a| **a != "submit"), r) {
        (None, Ok(_)) => Ok(()),
        (Some(&"close"), Err(Error::StaleResource)) => Ok(()),
        (_, r) => Err(format!("P gave {r:?}")),
    }
}
