//! RPCC's fast design (`rpcc.agents=inline`, `rpcc.wait=halt`, `kernel/src/rpcc/fast.rs`):
//! inline daemons answer every kind of remote operation as agents do, a request that may
//! block still goes to an agent, and a thread halting in place for an answer wakes on the
//! reply and gives the core up to other work. The switches are flipped at run time (and
//! put back by [`FastDesign`]'s drop), so both designs run in the same boot.

use super::rpcc::{e, on, other_core, settle, size_arg, LOAD_DONE};
use crate::proc::sched;
use crate::res;
use crate::rpcc::{self, Op, Out};
use crate::{kassert, ktest, percore};
use abi::res::{ResId, Rights, UserId};
use abi::syscall::control;
use abi::{Error, Priority};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// Restores both fast-design switches when a test ends, whichever way it ends.
struct FastDesign {
    inline: bool,
    halt: bool,
}

impl FastDesign {
    fn set(inline: bool, halt: bool) -> Self {
        FastDesign {
            inline: rpcc::fast::set_inline(inline),
            halt: rpcc::fast::set_halt(halt),
        }
    }
}

impl Drop for FastDesign {
    fn drop(&mut self) {
        rpcc::fast::set_inline(self.inline);
        rpcc::fast::set_halt(self.halt);
    }
}

fn served_on(core: usize) -> (u64, u64) {
    let st = &percore::of(core).rpcc.stats;
    (
        st.served.load(Ordering::Relaxed),
        st.inline_served.load(Ordering::Relaxed),
    )
}

/// One answer, without what differs between two runs (ids, pids).
fn shown(r: &Result<Out, Error>) -> String {
    match r {
        Ok(Out::Unit) => "unit".into(),
        Ok(Out::Value(v)) => format!("value {v}"),
        Ok(Out::Opened(_, pid)) => format!("opened, process {}", pid.is_some()),
        Ok(Out::Bytes(b)) => format!("bytes {b:?}"),
        Ok(Out::Infos(i)) => {
            let mut v: Vec<String> = i
                .iter()
                .filter(|i| i.name().starts_with("inl"))
                .map(|i| format!("{} {} {} {}", i.name(), i.creator.0, i.size, i.detail))
                .collect();
            v.sort();
            format!("infos {v:?}")
        }
        Ok(Out::Procs(_)) => "processes".into(),
        Ok(_) => "other".into(),
        Err(err) => format!("error {err:?}"),
    }
}

/// Every kind of remote operation (and its refusals) on `other`; the answers, and how many
/// of the requests were short.
fn remote_script(other: usize) -> (Vec<String>, u64) {
    let mut out = Vec::new();
    let mut short = 0;
    let mut ask = |out: &mut Vec<String>, op: Op| {
        short += u64::from(rpcc::fast::is_short(&op));
        let r = rpcc::call(other, op);
        out.push(shown(&r));
        // What was opened, if anything.
        match r {
            Ok(Out::Opened(id, _)) => Some(id),
            _ => None,
        }
    };
    let open = |name: &str, size: u64| Op::ResOpen {
        name: format!("c{other}/{name}"),
        args: size_arg(size).to_vec(),
        rights: Rights::OWNER_ALL,
    };
    res::begin_flow(UserId(1000));
    let id = ask(&mut out, open("vregion/inl", 4096));
    ask(&mut out, open("vregion/inl", 4096));
    ask(&mut out, open("vregion/inl0", 0));
    ask(
        &mut out,
        Op::ResOpen {
            name: "c9/nonsense".into(),
            args: Vec::new(),
            rights: Rights::OWNER_ALL,
        },
    );
    let id = id.unwrap_or(ResId(0));
    ask(
        &mut out,
        Op::ResWrite {
            id,
            data: b"inline".to_vec(),
            arg: 100,
        },
    );
    ask(
        &mut out,
        Op::ResRead {
            id,
            len: 6,
            arg: 100,
        },
    );
    ask(
        &mut out,
        Op::ResRead {
            id,
            len: 8,
            arg: 4090,
        },
    );
    ask(
        &mut out,
        Op::ResControl {
            id,
            cmd: control::INFO,
            a: 0,
            b: 0,
        },
    );
    ask(
        &mut out,
        Op::ResControl {
            id,
            cmd: 99,
            a: 0,
            b: 0,
        },
    );
    ask(&mut out, Op::ResInfo(id));
    ask(&mut out, Op::ResList);
    ask(
        &mut out,
        Op::RegionAttach {
            region: id,
            writable: true,
        },
    );
    ask(&mut out, Op::RegionDetached(id));
    ask(&mut out, Op::Processes);
    res::begin_flow(UserId(2000));
    ask(&mut out, Op::ResRead { id, len: 1, arg: 0 });
    ask(&mut out, Op::ResClose(id));
    res::begin_flow(UserId(1000));
    // Not short: an agent performs them, in either design.
    ask(
        &mut out,
        Op::Spawn {
            name: "no-such-program".into(),
            args: Vec::new(),
            priority: Priority::App,
        },
    );
    if let Some(sem) = ask(&mut out, open("sem/inl", 1)) {
        ask(
            &mut out,
            Op::ResControl {
                id: sem,
                cmd: control::SEM_P,
                a: 0,
                b: 0,
            },
        );
        ask(&mut out, Op::ResClose(sem));
    }
    ask(&mut out, Op::ResClose(id));
    ask(&mut out, Op::ResClose(id));
    ask(&mut out, Op::ResInfo(id));
    res::begin_flow(UserId::KERNEL);
    (out, short)
}

ktest! {
    /// `rpcc.agents=inline`: every kind of remote operation, with its errors and refusals,
    /// answers exactly as with agents; the short ones are performed by the daemon itself,
    /// the others (spawn, semaphores) still by an agent.
    fn inline_answers_as_agents_do() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        let _restore = FastDesign::set(false, false);
        // (Counters read once RPCC is quiet: an agent counts a request after its reply.)
        settle()?;
        let before = served_on(other);
        let (agents, short) = remote_script(other);
        settle()?;
        let mid = served_on(other);
        rpcc::fast::set_inline(true);
        let (inline, short_again) = remote_script(other);
        settle()?;
        let after = served_on(other);
        kassert!(agents.len() == 23 && short == short_again, "{} answers, {short} / {short_again} short", agents.len());
        for (i, (a, b)) in agents.iter().zip(&inline).enumerate() {
            kassert!(a == b, "answer {i}: agents gave '{a}', inline '{b}'");
        }
        kassert!(agents[0].starts_with("opened") && agents[1] == "error AlreadyExists" && agents[14] == "error Denied", "unexpected answers {agents:?}");
        if crate::structure::requests_travel() {
            let total = agents.len() as u64;
            kassert!(mid.0 - before.0 == total && mid.1 == before.1, "agents: {} served, {} inline", mid.0 - before.0, mid.1 - before.1);
            kassert!(after.0 - mid.0 == total && after.1 - mid.1 == short, "inline: {} served, {} inline, {short} short", after.0 - mid.0, after.1 - mid.1);
            kassert!(short >= 15 && short < total, "{short} of {total} requests short");
        }
        Ok(())
    }
}

static FAST_SEM: AtomicU64 = AtomicU64::new(0);
static FAST_TARGET: AtomicU64 = AtomicU64::new(0);
/// Thread A's P: 0 while it waits, then 1 + the error code (1: done).
static FAST_P: AtomicU64 = AtomicU64::new(0);
/// When thread B ran: thread A's `FAST_P` then, plus 1 (0: not yet).
static FAST_B: AtomicU64 = AtomicU64::new(0);
static FAST_OPS: AtomicU64 = AtomicU64::new(0);
static FAST_OPS_FAILED: AtomicU64 = AtomicU64::new(0);
static FAST_A: AtomicU64 = AtomicU64::new(0);

/// Open and close `FAST_OPS` vregions on core `FAST_TARGET`, then count itself done.
extern "C" fn fast_ops_main(_: u64) -> ! {
    res::begin_flow(UserId::KERNEL);
    let target = FAST_TARGET.load(Ordering::Relaxed);
    for _ in 0..FAST_OPS.load(Ordering::Relaxed) {
        let r = res::open(
            &format!("c{target}/vregion/fast"),
            &size_arg(4096),
            Rights::OWNER_ALL,
        )
        .and_then(res::close);
        if r.is_err() {
            FAST_OPS_FAILED.fetch_add(1, Ordering::Relaxed);
        }
    }
    LOAD_DONE.fetch_add(1, Ordering::Release);
    sched::exit_current()
}

/// Thread A: a P on the semaphore of another core, which waits there.
extern "C" fn fast_p_main(_: u64) -> ! {
    res::begin_flow(UserId::KERNEL);
    let r = res::control(
        ResId(FAST_SEM.load(Ordering::Relaxed)),
        control::SEM_P,
        0,
        0,
    );
    FAST_P.store(1 + r.err().map_or(0, |e| e as u64), Ordering::Release);
    sched::exit_current()
}

/// Thread B: made while A halts in place; the V that answers A's P.
extern "C" fn fast_v_main(_: u64) -> ! {
    res::begin_flow(UserId::KERNEL);
    FAST_B.store(1 + FAST_P.load(Ordering::Acquire), Ordering::Release);
    let _ = res::control(
        ResId(FAST_SEM.load(Ordering::Relaxed)),
        control::SEM_V,
        0,
        0,
    );
    sched::exit_current()
}

fn start_here(entry: u64) -> u64 {
    let entry = match entry {
        0 => fast_ops_main,
        1 => fast_p_main,
        _ => fast_v_main,
    };
    sched::with(|s| s.add_kernel_thread(entry, 0, Priority::App)).map_or(u64::MAX, u64::from)
}

/// Thread A's state, as `1 + outstanding requests` if it runs (halting), 0 otherwise.
fn halting_here(thread: u64) -> u64 {
    let running = sched::with(|s| s.state_of(thread as u32)) == Some(sched::ThreadState::Running);
    if running {
        1 + rpcc::backlog()
    } else {
        0
    }
}

fn halted_waits_on(core: usize) -> u64 {
    percore::of(core)
        .rpcc
        .stats
        .halted_waits
        .load(Ordering::Relaxed)
}

ktest! {
    /// `rpcc.wait=halt`: a thread of another core waiting for this core's answers halts in
    /// place (it keeps the core: still running) and wakes on each reply; and while it
    /// halts for an answer that needs work on its own core (a V by another thread there),
    /// that work becomes ready, runs, and the answer comes.
    fn halt_in_place_wakes_on_the_reply_and_on_other_work() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        if !crate::structure::requests_travel() {
            crate::kskip!("big-lock mode: requests do not travel");
        }
        let _restore = FastDesign::set(true, true);
        let me = percore::current_core();
        // The reply: 20 open/close pairs from a thread of the other core, each wait halted.
        let halted = halted_waits_on(other);
        FAST_TARGET.store(me as u64, Ordering::Relaxed);
        FAST_OPS.store(20, Ordering::Relaxed);
        FAST_OPS_FAILED.store(0, Ordering::Relaxed);
        LOAD_DONE.store(0, Ordering::Relaxed);
        kassert!(on(other, start_here, 0)? != u64::MAX, "no thread on core {other}");
        let done = sched::run_until(60_000_000_000, || LOAD_DONE.load(Ordering::Acquire) == 1);
        kassert!(done, "the thread on core {other} did not finish its 40 operations");
        kassert!(FAST_OPS_FAILED.load(Ordering::Relaxed) == 0, "operations failed");
        let halted = halted_waits_on(other) - halted;
        kassert!(halted >= 20, "only {halted} of 40 waits halted in place");
        // Other work: A waits (halting) for a P on this core's semaphore; B, made on A's
        // core meanwhile, must run and give the unit.
        res::begin_flow(UserId::KERNEL);
        let sem = e(res::open(&format!("c{me}/sem/fast"), &size_arg(0), Rights::OWNER_ALL), "open sem")?;
        FAST_SEM.store(sem.0, Ordering::Relaxed);
        FAST_P.store(0, Ordering::Relaxed);
        FAST_B.store(0, Ordering::Relaxed);
        let a = on(other, start_here, 1)?;
        kassert!(a != u64::MAX, "no thread A on core {other}");
        FAST_A.store(a, Ordering::Relaxed);
        // A waits once its P sits in the semaphore and it still runs (halting in place).
        let mut state = 0;
        let waiting = sched::run_until(60_000_000_000, || {
            state = on(other, halting_here, a).unwrap_or(0);
            res::info(sem).is_ok_and(|i| i.detail == 1) && state == 2
        });
        let b = if waiting { on(other, start_here, 2)? } else { u64::MAX };
        let answered = sched::run_until(60_000_000_000, || FAST_P.load(Ordering::Acquire) != 0);
        let _ = res::close(sem);
        kassert!(waiting, "thread A never halted in place waiting for its P (state {state})");
        kassert!(b != u64::MAX, "no thread B on core {other}");
        kassert!(answered, "thread A's P was never answered");
        kassert!(FAST_P.load(Ordering::Relaxed) == 1, "A's P failed: {}", FAST_P.load(Ordering::Relaxed));
        kassert!(FAST_B.load(Ordering::Relaxed) == 1, "B did not run while A waited ({})", FAST_B.load(Ordering::Relaxed));
        settle()
    }
}

ktest! {
    /// `rpcc.agents=inline`: a request that may block (a P that must wait) still works: an
    /// agent takes it and waits in the semaphore, and the V answers it.
    fn blocking_request_in_inline_mode_goes_to_an_agent() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        if !crate::structure::requests_travel() {
            crate::kskip!("big-lock mode: requests do not travel");
        }
        let _restore = FastDesign::set(true, false);
        let me = percore::current_core();
        res::begin_flow(UserId::KERNEL);
        let sem = e(res::open(&format!("c{other}/sem/inl-block"), &size_arg(0), Rights::OWNER_ALL), "open sem")?;
        let before = served_on(other);
        FAST_SEM.store(sem.0, Ordering::Relaxed);
        FAST_P.store(0, Ordering::Relaxed);
        let a = start_here(1);
        kassert!(a != u64::MAX, "no thread on core {me}");
        // The P waits in the semaphore: its thread here sleeps for the answer.
        let waiting = sched::run_until(60_000_000_000, || {
            res::info(sem).is_ok_and(|i| i.detail == 1)
                && matches!(
                    sched::with(|s| s.state_of(a as u32)),
                    Some(sched::ThreadState::Blocked(sched::Block::Rpcc(_)))
                )
        });
        let v = res::control(sem, control::SEM_V, 0, 0);
        let answered = sched::run_until(60_000_000_000, || FAST_P.load(Ordering::Acquire) != 0);
        let _ = res::close(sem);
        settle()?;
        let after = served_on(other);
        kassert!(waiting, "the P never waited in the semaphore");
        kassert!(v.is_ok(), "V: {v:?}");
        kassert!(answered && FAST_P.load(Ordering::Relaxed) == 1, "the P was not answered well ({})", FAST_P.load(Ordering::Relaxed));
        kassert!(after.0 - before.0 >= 4 && after.1 == before.1, "{} served, {} inline (P, info, V, close: agents)", after.0 - before.0, after.1 - before.1);
        Ok(())
    }
}
