//! Inter-core RPCC: every resource operation on another core with its rights checked there,
//! stale ids, back-pressure, a requester killed while waiting, migration (also asked from a
//! third core), and 100,000 remote operations over every pair of cores with nothing leaked.
//! Tests that need more cores than the boot has pass after saying so.

use super::{free_frames_here, heap_used_here};
use crate::proc::{self, sched, TEST_PARENT};
use crate::res::{self, ReadOut};
use crate::rpcc::{self, Op, Out};
use crate::{kassert, ktest, percore, smp};
use abi::res::{ResId, ResType, Rights, UserId};
use abi::syscall::control;
use abi::{Error, Pid, Priority};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

pub(super) fn e<T: core::fmt::Debug>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|err| format!("{what}: {err:?}"))
}

pub(super) fn size_arg(n: u64) -> [u8; 8] {
    n.to_le_bytes()
}

pub(super) fn other_core() -> Option<usize> {
    let n = smp::cores_planned();
    (n >= 2).then(|| (percore::current_core() + 1) % n)
}

/// Run `f` on `core` (from its doorbell IPI) and return its value.
pub(super) fn on(core: usize, f: fn(u64) -> u64, arg: u64) -> Result<u64, String> {
    smp::call_on(core, f, arg, 5_000_000_000).map_err(|err| format!("call_on {core}: {err:?}"))
}

fn backlog_here(_: u64) -> u64 {
    rpcc::backlog()
}

fn awake_here(_: u64) -> u64 {
    rpcc::agents_awake()
}

/// RPCC work every core holds (requests waiting plus agents awake), and a description.
fn rpcc_work() -> Result<(u64, String), String> {
    let mut state = String::new();
    let mut busy = 0;
    for c in 0..smp::cores_planned() {
        let (backlog, awake) = (on(c, backlog_here, 0)?, on(c, awake_here, 0)?);
        busy += backlog + awake;
        state += &format!(" core {c}: backlog {backlog}, agents awake {awake};");
    }
    Ok((busy, state))
}

/// Wait (running threads) until no core holds RPCC work (60 s only catches a hang).
pub(super) fn settle() -> Result<(), String> {
    let mut last = rpcc_work();
    sched::run_until(60_000_000_000, || {
        last = rpcc_work();
        !matches!(last, Ok((1.., _)))
    });
    match last? {
        (0, _) => Ok(()),
        (_, state) => Err(format!("RPCC did not become quiet within 60 s:{state}")),
    }
}

/// Is process `pid` (of this core) waiting for an answer from another core?
fn waits_for_rpcc(pid: Pid) -> bool {
    sched::with(|s| {
        let t = s.processes.get(&pid.serial()).map(|p| p.main_thread());
        matches!(
            t.and_then(|t| s.state_of(t)),
            Some(sched::ThreadState::Blocked(sched::Block::Rpcc(_)))
        )
    })
}

ktest! {
    /// RCC through RPCC: each operation, on this core and on another, allowed for the
    /// creator and denied to another user, with the same answers in both places.
    fn rights_checked_on_the_owner_core() -> TestResult {
        let me = percore::current_core();
        let cores: Vec<usize> = core::iter::once(me).chain(other_core()).collect();
        for core in cores {
            let name = format!("c{core}/vregion/rcc");
            res::begin_flow(UserId(1000));
            let id = e(res::open(&name, &size_arg(4096), Rights::OWNER_ALL), "open as 1000")?;
            let info = e(res::info(id), "info")?;
            kassert!(info.creator == UserId(1000), "core {core}: creator {:?}", info.creator);
            kassert!(res::open(&name, &size_arg(4096), Rights::OWNER_ALL) == Err(Error::AlreadyExists), "core {core}: duplicate");
            res::begin_flow(UserId(2000));
            kassert!(res::read(id, 4, 0).err() == Some(Error::Denied), "core {core}: read denied");
            kassert!(res::write(id, b"x", 0) == Err(Error::Denied), "core {core}: write denied");
            kassert!(res::control(id, control::INFO, 0, 0) == Err(Error::Denied), "core {core}: control denied");
            kassert!(res::close(id) == Err(Error::Denied), "core {core}: close denied");
            res::begin_flow(UserId(1000));
            kassert!(e(res::write(id, b"remote", 10), "write")? == 6, "core {core}: write count");
            let ReadOut::Bytes(b) = e(res::read(id, 6, 10), "read")? else {
                return Err("read gave a value".into());
            };
            kassert!(b == b"remote", "core {core}: read back {b:?}");
            kassert!(e(res::control(id, control::INFO, 0, 0), "control")? == 4096, "core {core}: size");
            // Others may read a region opened rwcx/r---.
            let shared = e(res::open(&format!("c{core}/vregion/rcc2"), &size_arg(4096), Rights(0x1f)), "open r for others")?;
            res::begin_flow(UserId(2000));
            kassert!(res::read(shared, 1, 0).is_ok(), "core {core}: read allowed to others");
            kassert!(res::write(shared, b"x", 0) == Err(Error::Denied), "core {core}: write still denied");
            res::begin_flow(UserId(1000));
            e(res::close(shared), "close shared")?;
            e(res::close(id), "close")?;
        }
        res::begin_flow(UserId::KERNEL);
        Ok(())
    }
}

ktest! {
    /// A request naming a resource another core just closed gets the stale-id error; a
    /// core that is not there is no such core.
    fn stale_ids_across_cores() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        res::begin_flow(UserId::KERNEL);
        let id = e(res::open(&format!("c{other}/vregion/stale"), &size_arg(4096), Rights::OWNER_ALL), "open")?;
        e(res::close(id), "close")?;
        kassert!(res::read(id, 1, 0).err() == Some(Error::StaleResource), "read after close");
        kassert!(res::control(id, control::INFO, 0, 0) == Err(Error::StaleResource), "control after close");
        kassert!(res::info(id).err() == Some(Error::StaleResource), "info after close");
        let forged = ResId::new(0, other, ResType::Compute, id.generation(), id.slot());
        kassert!(res::close(forged) == Err(Error::StaleResource) || res::close(forged) == Err(Error::WrongType), "forged type");
        kassert!(rpcc::call(abi::MAX_CORES - 1, Op::ResList).err() == Some(Error::NoSuchCore), "no such core");
        kassert!(res::open(&format!("c{}/vregion/x", abi::MAX_CORES - 1), &size_arg(4096), Rights::OWNER_ALL) == Err(Error::BadName), "name of a missing core");
        Ok(())
    }
}

ktest! {
    /// 200 requests in flight to one core through a 16-slot ring: the ring fills, the rest
    /// wait in the outbox, and every request is performed exactly once.
    fn full_ring_applies_back_pressure() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        res::begin_flow(UserId::KERNEL);
        let full_before = percore::this().rpcc.stats.ring_full.load(Ordering::Relaxed);
        let ops = (0..200).map(|i| Op::ResOpen {
            name: format!("c{other}/vregion/bp{i}"),
            args: size_arg(4096).to_vec(),
            rights: Rights::OWNER_ALL,
        }).collect();
        let mut ids = Vec::new();
        for (i, r) in rpcc::call_many(other, ops).into_iter().enumerate() {
            match r {
                Ok(Out::Opened(id, None)) => ids.push(id),
                Ok(_) => return Err(format!("request {i}: unexpected reply")),
                Err(err) => return Err(format!("request {i}: {err:?}")),
            }
        }
        let full = percore::this().rpcc.stats.ring_full.load(Ordering::Relaxed) - full_before;
        // (In big-lock mode nothing travels: each request is done at once, under the lock.)
        kassert!(full > 0 || crate::structure::biglock(), "the ring never filled (no back-pressure seen)");
        let listed = e(res::list(other), "list")?;
        kassert!(listed.iter().filter(|i| i.name().starts_with("bp")).count() == 200, "not exactly 200 regions");
        let closes = ids.iter().map(|&id| Op::ResClose(id)).collect();
        for r in rpcc::call_many(other, closes) {
            e(r.map(drop), "close")?;
        }
        settle()
    }
}

ktest! {
    /// A program killed while it waits for another core leaves no agent stuck and no
    /// request outstanding.
    fn killed_requester_leaves_no_stuck_agent() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        settle()?;
        let arg = format!("{other}");
        for round in 0..3 {
            let pid = e(proc::spawn("rloop", &[arg.as_str()], Priority::App, TEST_PARENT), "spawn rloop")?;
            // Kill it while it waits for the other core, in round r at the (r+1)th request
            // seen waiting (it ran in between). Big-lock mode does remote work at once
            // under the lock: there it is killed once it has run. (60 s catches a hang.)
            let (mut seen, mut cpu_then) = (0, None);
            let caught = sched::run_until(60_000_000_000, || {
                let cpu = proc::info_of(pid).map_or(0, |i| i.cpu_ns);
                if crate::structure::biglock() {
                    return cpu > 0;
                }
                if waits_for_rpcc(pid) && cpu_then != Some(cpu) {
                    cpu_then = Some(cpu);
                    seen += 1;
                }
                seen > round
            });
            e(proc::end_by_kill(pid), "kill")?;
            kassert!(proc::take_status(pid).is_some_and(|s| s.how == abi::ENDED_KILLED), "status");
            kassert!(caught, "round {round}: rloop {pid} was not seen waiting for core {other} within 60 s");
        }
        settle()?;
        // What a killed round left between its open and its close is an ordinary resource.
        let left: Vec<ResId> = e(res::list(other), "list")?
            .iter()
            .filter(|i| i.name().starts_with("rloop-"))
            .map(|i| i.id)
            .collect();
        kassert!(left.len() <= 3, "{} regions left", left.len());
        for id in left {
            e(res::close(id), "close leftover")?;
        }
        Ok(())
    }
}

/// Start `rloop TARGET ROUNDS` on core `from` (a child of the tests).
fn spawn_rloop(from: usize, target: usize, rounds: u32) -> Result<Pid, String> {
    let args = [format!("{target}"), format!("{rounds}")];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if from == percore::current_core() {
        return e(
            proc::spawn("rloop", &args, Priority::App, TEST_PARENT),
            "spawn",
        );
    }
    let op = Op::Spawn {
        name: "rloop".into(),
        args: args.iter().map(|a| String::from(*a)).collect(),
        priority: Priority::App,
    };
    match rpcc::call(from, op) {
        Ok(Out::Pid(p)) => Ok(p),
        Ok(_) => Err("remote spawn: unexpected reply".into()),
        Err(err) => Err(format!("remote spawn: {err:?}")),
    }
}

/// A process moved from `from` to `to`, asked from this core, continues and ends well.
fn migrate_and_finish(from: usize, to: usize, target: usize) -> Result<(), String> {
    // What is tested is a move in the middle of the work. If rloop already finished when
    // the move is asked (a fast host, or a slow one that ran it before the test looked),
    // that proves nothing: collect it and try again with ten times the rounds.
    let mut rounds = 1000;
    let (pid, new) = loop {
        let pid = spawn_rloop(from, target, rounds)?;
        // Until it has started its work (or ended); 60 s only catches a hang.
        sched::run_until(60_000_000_000, || has_started(pid));
        match proc::migrate::migrate(pid, to) {
            Ok(new) => break (pid, new),
            Err(Error::NoSuchProcess) if rounds < 100_000 => {
                let _ = on(from, take_status_here, pid.0)?;
                rounds *= 10;
            }
            Err(err) => {
                let status = on(from, take_status_here, pid.0).ok();
                return Err(format!(
                    "migrate {pid} ({rounds} rounds) from core {from} to {to}: {err:?} (status {status:?})"
                ));
            }
        }
    };
    kassert!(new.core() == to, "new pid {new} not on core {to}");
    kassert!(migrate_probe(pid) == 0, "old pid {pid} still listed");
    // It finishes its rounds on the new core and exits 0 (120 s is only a hang guard).
    // (Taking the status removes the zombie: ask only until it is there; `run_until` asks
    // the predicate once more on its way out.)
    let mut status = Ok(u64::MAX);
    sched::run_until(120_000_000_000, || {
        if status == Ok(u64::MAX) {
            status = on(to, take_status_here, new.0);
        }
        status != Ok(u64::MAX)
    });
    let status = status?;
    kassert!(
        status == 0,
        "migrated process ended with {status:#x} (u64::MAX: still running after 120 s)"
    );
    Ok(())
}

/// Has `pid` run (it is not ready-and-never-run any more: running, blocked, ended, or ready
/// again with CPU time)? Also true if its core does not answer (the caller then learns why).
fn has_started(pid: Pid) -> bool {
    let listed = if pid.core() == percore::current_core() {
        proc::infos()
    } else {
        match rpcc::call(pid.core(), Op::Processes) {
            Ok(Out::Procs(v)) => v,
            _ => return true,
        }
    };
    listed
        .into_iter()
        .find(|p| p.pid == pid)
        .is_none_or(|p| p.state != abi::STATE_READY || p.cpu_ns > 0)
}

/// Is `pid` listed by its core?
pub(super) fn migrate_probe(pid: Pid) -> u64 {
    let listed = if pid.core() == percore::current_core() {
        proc::infos()
    } else {
        match rpcc::call(pid.core(), Op::Processes) {
            Ok(Out::Procs(v)) => v,
            _ => return 2,
        }
    };
    u64::from(listed.iter().any(|p| p.pid == pid))
}

/// On the process's core: its exit status (how << 32 | code), or u64::MAX if it runs.
pub(super) fn take_status_here(pid: u64) -> u64 {
    match proc::take_status(Pid(pid)) {
        Some(s) => (s.how << 32) | s.code,
        None => u64::MAX,
    }
}

ktest! {
    /// Migration moves text, data, bss, heap and stack; the process continues where it was
    /// (it finishes its loop and exits 0), under a new pid on the new core.
    fn migration_continues_on_the_new_core() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        let me = percore::current_core();
        migrate_and_finish(me, other, other)?;
        migrate_and_finish(other, me, me)?;
        settle()
    }
}

ktest! {
    /// Beyond P4: migrating a process that lives on a third core (the requester is neither
    /// its old nor its new core).
    fn migration_asked_from_a_third_core() -> TestResult {
        if smp::cores_planned() < 3 {
            crate::kskip!("needs 3 cores");
        }
        let me = percore::current_core();
        let a = (me + 1) % smp::cores_planned();
        let b = (me + 2) % smp::cores_planned();
        migrate_and_finish(a, b, me)?;
        settle()
    }
}

pub(super) static LOAD_DONE: AtomicU64 = AtomicU64::new(0);
static LOAD_FAILED: AtomicU64 = AtomicU64::new(0);
static LOAD_OPS: AtomicU64 = AtomicU64::new(0);

/// A load thread: `LOAD_OPS` operations (open and close pairs) on the other cores in turn.
extern "C" fn load_main(_: u64) -> ! {
    let me = percore::current_core();
    let n = smp::cores_planned();
    let pairs = LOAD_OPS.load(Ordering::Relaxed) / 2;
    for i in 0..pairs {
        let dst = (me + 1 + (i as usize % (n - 1))) % n;
        let name = format!("c{dst}/vregion/load{me}");
        let ok = res::open(&name, &size_arg(4096), Rights::OWNER_ALL).and_then(res::close);
        if ok.is_err() {
            LOAD_FAILED.fetch_add(1, Ordering::Relaxed);
        }
    }
    LOAD_DONE.fetch_add(1, Ordering::Release);
    sched::exit_current()
}

fn start_load_here(_: u64) -> u64 {
    let t = sched::with(|s| s.add_kernel_thread(load_main, 0, Priority::App));
    u64::from(t.is_none())
}

ktest! {
    /// 100,000 remote operations spread over every ordered pair of cores at once; after
    /// them every core has the frames, heap and awake agents it had before.
    fn hundred_thousand_remote_operations() -> TestResult {
        let n = smp::cores_planned();
        if n < 2 {
            crate::kskip!("needs 2 cores");
        }
        // Warm-up: one round on every pair makes the agents that will be reused.
        LOAD_OPS.store(2 * (n as u64 - 1), Ordering::Relaxed);
        run_load(n)?;
        settle()?;
        let frames: Vec<u64> = (0..n).map(|c| on(c, free_frames_here, 0)).collect::<Result<_, _>>()?;
        let heap: Vec<u64> = (0..n).map(|c| on(c, heap_used_here, 0)).collect::<Result<_, _>>()?;
        let agents: Vec<u32> = (0..n).map(|c| percore::of(c).rpcc.stats.agents_live.load(Ordering::Relaxed)).collect();
        let per_core = 100_000u64.div_ceil(n as u64).next_multiple_of(2);
        LOAD_OPS.store(per_core, Ordering::Relaxed);
        let served_before: u64 = (0..n).map(|c| percore::of(c).rpcc.stats.served.load(Ordering::Relaxed)).sum();
        run_load(n)?;
        settle()?;
        let served: u64 = (0..n).map(|c| percore::of(c).rpcc.stats.served.load(Ordering::Relaxed)).sum::<u64>() - served_before;
        // Agents serve them in the per-core kernel; big-lock mode does them directly.
        kassert!(served >= 100_000 || crate::structure::biglock(), "only {served} remote operations served");
        for c in 0..n {
            let f = on(c, free_frames_here, 0)?;
            kassert!(f == frames[c], "core {c}: {} frames before, {f} after", frames[c]);
            let h = on(c, heap_used_here, 0)?;
            // Heap in use (the frames it holds are counted with the free ones). Queues keep
            // their capacity; a leak of even 8 bytes per operation would be 200 KiB per core.
            kassert!(h <= heap[c] + 16 * 1024, "core {c}: heap use grew from {} to {h} bytes", heap[c]);
            let a = percore::of(c).rpcc.stats.agents_live.load(Ordering::Relaxed);
            kassert!(a == agents[c], "core {c}: {} agents before, {a} after", agents[c]);
        }
        Ok(())
    }
}

fn run_load(n: usize) -> Result<(), String> {
    LOAD_DONE.store(0, Ordering::Relaxed);
    LOAD_FAILED.store(0, Ordering::Relaxed);
    for c in 0..n {
        kassert!(on(c, start_load_here, 0)? == 0, "core {c}: no load thread");
    }
    let done = sched::run_until(120_000_000_000, || {
        LOAD_DONE.load(Ordering::Acquire) == n as u64
    });
    kassert!(
        done,
        "load threads did not finish: {} of {n}",
        LOAD_DONE.load(Ordering::Relaxed)
    );
    let failed = LOAD_FAILED.load(Ordering::Relaxed);
    kassert!(failed == 0, "{failed} remote operations failed");
    Ok(())
}

fn running_here(pid: u64) -> u64 {
    u64::from(
        proc::infos()
            .iter()
            .any(|p| p.pid == Pid(pid) && p.state == abi::STATE_RUNNING),
    )
}

ktest! {
    /// Only a process's ancestors may kill it, also while it runs on its own CPU: in
    /// big-lock mode such a target used to be ended before the rule was checked
    /// (regression; the fuzzer found it).
    fn kill_rule_holds_for_a_running_process() -> TestResult {
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        let spin = match rpcc::call(other, Op::Spawn { name: "spin".into(), args: Vec::new(), priority: Priority::App }) {
            Ok(Out::Pid(p)) => p,
            Ok(_) => return Err("spawn spin: unexpected reply".into()),
            Err(err) => return Err(format!("spawn spin on core {other}: {err:?}")),
        };
        // Wait until it runs (120 s only catches a hang): the case that was wrong.
        sched::run_until(120_000_000_000, || on(other, running_here, spin.0) != Ok(0));
        let running = on(other, running_here, spin.0)? == 1;
        let victim = format!("{spin}");
        let s = super::run_to_end("crash", &["kill-pid", &victim], Priority::App, 120);
        let alive = migrate_probe(spin) == 1;
        // Clean up whatever the checks say.
        let _ = rpcc::call(other, Op::Kill { pid: spin, descendants_only: false });
        let mut taken = false;
        sched::run_until(60_000_000_000, || {
            taken = taken || on(other, take_status_here, spin.0) != Ok(u64::MAX);
            taken
        });
        kassert!(running, "spin never ran on core {other}");
        let s = s?;
        kassert!(s.how == abi::ENDED_EXIT && s.code == 0, "crash kill-pid {spin} ended with {s:?} (0: refused with Denied)");
        kassert!(alive, "a stranger's kill ended the running process {spin}");
        Ok(())
    }
}

ktest! {
    /// Only the agent performing a request of another core may leave that request waiting
    /// in a semaphore (`rpcc::defer_current`); every other context's `P` is its own
    /// (regression: the request an agent performed was one record per core, and while the
    /// agent was blocked in the middle of it, in an RPCC call of its own, a program's `P`
    /// on that core took the request as its own: the `P` returned without a unit and the
    /// request was never answered, so a remote `wc` of a pipeline waited for ever).
    fn only_the_performing_agent_defers_its_request() -> TestResult {
        // An agent, by a thread id no thread has, in the middle of request 42 of core 1;
        // here the test's own context runs, as another thread would.
        let agent = u32::MAX - 7;
        rpcc::begin_work(agent, 1, 42, 0x1000);
        let taken = rpcc::defer_current();
        let deferred = rpcc::end_work(agent);
        kassert!(taken.is_none(), "another context took the agent's request: {taken:?}");
        kassert!(!deferred, "the agent's request was left waiting by another context");
        kassert!(!rpcc::end_work(agent), "the agent's record outlived its request");
        Ok(())
    }
}
