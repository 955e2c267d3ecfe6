//! Live replacement (issue 14, `FN_TAKEOVER`; `ipc::takeover`, `fnid::takeover`) with the
//! real server, `kv`, and its client `kvcli`:
//!
//! - `kv` replaced on this core and then on another while `kvcli all` (a bench on every
//!   core, every reply checked against its model) calls it: the benches end clean (no
//!   request lost, none answered twice or wrongly), the data put before is still there, and
//!   (over a second run, the first warming up) every frame comes back once the function
//!   and its state go;
//! - replace-while-hammering: two `kvcli all` (a client process per core each: four on two
//!   cores) while kv is replaced 20 times, alternating cores (restart after a crash is not
//!   built yet: not in this test);
//! - rollback and refusals: `kv takeover fail` fails its start-up check before the switch
//!   and the old server serves on; `kv takeover probe` gets `FN_TAKEOVER`'s refusals
//!   (another user, forged and stale ids, an endpoint not the caller's) with nothing
//!   changed;
//! - the service gap one client sees across a replacement (`kvcli gap`), printed;
//! - the retire notice: kv replaced while it holds a `WAIT` (`kvcli await`) answers it
//!   `Again`, the client sends it again and the new server answers it;
//! - a takeover that times out (`fncheck late-taker kv`, at an application's priority)
//!   leaves its caller at the priority it had and kv served as before;
//! - restart after a crash (`kv restart=N`): at most N times, and in the hammer; and
//!   `FN_RESTART`'s shortest window (`fncheck restart-window`).

use super::kv::{drop_kv, end_kv, kvcli, served, start_kv_on, STATE_BYTES};
use super::{finish, frames_after, free_frames_per_core, run_program, run_to_end};
use crate::proc::{self, TEST_PARENT};
use crate::rpcc::{self, Op, Out};
use crate::{kassert, ktest, percore};
use abi::res::UserId;
use abi::{Pid, Priority};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// `kv`'s server generation and server, as this core's copy has them.
fn kv_now() -> (u64, Pid) {
    crate::fnid::list(false)
        .ok()
        .and_then(|l| l.into_iter().find(|f| f.name() == "kv"))
        .map_or((0, Pid(0)), |f| (f.generation, f.server))
}

fn ended_here(pid: u64) -> u64 {
    u64::from(proc::has_ended(Pid(pid)))
}

/// Has `pid` (of any core) ended?
fn ended(pid: Pid) -> bool {
    if pid.core() == percore::current_core() {
        return proc::has_ended(pid);
    }
    super::rpcc::on(pid.core(), ended_here, pid.0) == Ok(1)
}

/// Spawn `name ARGS` on `core` (a child of the tests there).
fn spawn_on(core: usize, name: &str, args: &[&str]) -> Result<Pid, String> {
    if core == percore::current_core() {
        return proc::spawn(name, args, Priority::Server, TEST_PARENT)
            .map_err(|e| format!("spawn {name}: {e}"));
    }
    let op = Op::Spawn {
        name: name.into(),
        args: args.iter().map(|a| String::from(*a)).collect(),
        priority: Priority::Server,
    };
    match rpcc::call(core, op) {
        Ok(Out::Pid(p)) => Ok(p),
        Ok(_) => Err(format!("spawn {name} on core {core}: unexpected reply")),
        Err(e) => Err(format!("spawn {name} on core {core}: {e:?}")),
    }
}

/// Replace `kv` (served by `old`) with `kv takeover` on `core`: waits (300 s: a hang guard
/// only) for the function's generation to change and `old` to end; the new server.
fn replace_on(core: usize, old: Pid) -> Result<Pid, String> {
    replace_with(core, old, &["takeover"])
}

/// [`replace_on`] with `kv ARGS` (`takeover` and its options).
fn replace_with(core: usize, old: Pid, args: &[&str]) -> Result<Pid, String> {
    let (g0, _) = kv_now();
    let new = spawn_on(core, "kv", args)?;
    crate::proc::sched::run_until(300_000_000_000, || {
        (kv_now().0 > g0 && ended(old)) || ended(new)
    });
    let (g, server) = kv_now();
    if g <= g0 || server != new || !ended(old) {
        end_kv(new);
        return Err(format!(
            "kv takeover on core {core} (pid {new}): generation {g0} -> {g}, server {server}, old {old} ended: {}",
            ended(old)
        ));
    }
    end_kv(old); // collects it (it ended)
    Ok(new)
}

/// A `kvcli all N` hammer, spawned here.
fn hammer(n: &str) -> Result<Pid, String> {
    proc::spawn("kvcli", &["all", n], Priority::App, TEST_PARENT)
        .map_err(|e| format!("spawn kvcli all: {e}"))
}

/// Wait for `hammer` to end and check that it passed (every reply as its model says).
/// The hammers' ends: each one's verdict ([`passed`]), or, when the run already `failed`,
/// each ended and reaped without one.
fn settle(
    hammers: impl IntoIterator<Item = Result<Pid, alloc::string::String>>,
    failed: bool,
) -> Vec<crate::ktest::TestResult> {
    let mut results = Vec::new();
    for h in hammers.into_iter().flatten() {
        if failed {
            super::end_and_reap(h);
        } else {
            results.push(passed(h));
        }
    }
    results
}

fn passed(hammer: Pid) -> crate::ktest::TestResult {
    let s = finish(hammer, "kvcli all", 900)?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "kvcli all across the replacements ended with {s:?} (its console lines say which reply)"
    );
    Ok(())
}

/// kv started here, `kvcli all` on every core, kv replaced on this core and then on
/// `other` while it runs; every reply right, the data still there; everything ended and
/// the function and its state dropped.
fn benched_replacements(here: usize, other: usize) -> crate::ktest::TestResult {
    let size = format!("{STATE_BYTES}");
    let first = start_kv_on(here, &[&size])?;
    kvcli(first, &["put", "alpha", "one"])?;
    let base = served();
    let h = hammer("300").inspect_err(|_| {
        end_kv(first);
    })?;
    crate::proc::sched::run_until(300_000_000_000, || {
        served() >= base + 100 || proc::has_ended(h)
    });
    let second = replace_on(here, first).inspect_err(|_| {
        super::end_and_reap(h);
        end_kv(first);
        let _ = drop_kv();
    })?;
    let third = replace_on(other, second).inspect_err(|_| {
        super::end_and_reap(h);
        end_kv(second);
        let _ = drop_kv();
    })?;
    let r = passed(h)
        .and_then(|()| kvcli(third, &["get", "alpha", "one"]))
        .and_then(|()| kvcli(third, &["all", "30"]));
    end_kv(third);
    drop_kv()?;
    r
}

ktest! {
    /// kv replaced on this core and on another while benches on every core call it: every
    /// reply right, the data still there; a second run (the first warms heaps, stacks and
    /// agents up) leaves every core's free frames where they were.
    fn replace_kv_while_benched_on_every_core() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        benched_replacements(here, other)?;
        let before = free_frames_per_core()?;
        benched_replacements(here, other)?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// Replace-while-hammering: four client processes (two `kvcli all`) on every core while
    /// kv is replaced 20 times, alternating cores; every reply checked.
    fn replace_kv_twenty_times_while_hammered() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        let size = format!("{STATE_BYTES}");
        let first = start_kv_on(here, &[&size])?;
        kvcli(first, &["put", "alpha", "one"])?;
        let hammers = [hammer("400"), hammer("400")];
        let mut server = first;
        let mut failed = None;
        for i in 0..20 {
            let core = if i % 2 == 0 { other } else { here };
            match replace_on(core, server) {
                Ok(next) => server = next,
                Err(e) => {
                    failed = Some(format!("replacement {}: {e}", i + 1));
                    break;
                }
            }
        }
        let results = settle(hammers, failed.is_some());
        let r = kvcli(server, &["get", "alpha", "one"]);
        end_kv(server);
        drop_kv()?;
        if let Some(e) = failed {
            return Err(e);
        }
        for r in results {
            r?;
        }
        r
    }
}

ktest! {
    /// Rollback and refusals: a takeover that fails its start-up check, and FN_TAKEOVER's
    /// refusals, leave the old server serving under the same generation.
    fn replace_kv_rollback_and_refusals() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        with_kv_holding_alpha(|first| {
            let before = kv_now();
            let s = run_to_end("kv", &["takeover", "fail"], Priority::Server, 300)?;
            kassert!(
                s.how == abi::ENDED_EXIT && s.code == 1,
                "kv takeover fail ended with {s:?}, not exit 1"
            );
            taker_changed_nothing(first, before, "kv", &["takeover", "probe"], Priority::Server)
        })
    }
}

ktest! {
    /// The service gap (issue 14's target: under 1 ms): `kvcli gap` times one client's
    /// calls, first with nothing happening, then across one replacement on another core;
    /// every reply must be right. The figures are printed (not decided on: the clock here
    /// is not deterministic).
    fn replace_kv_service_gap() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        let size = format!("{STATE_BYTES}");
        let first = start_kv_on(here, &[&size])?;
        let quiet = kvcli(first, &["gap", "2000"]);
        let base = served();
        let client = quiet.and_then(|()| {
            proc::spawn("kvcli", &["gap", "4000"], Priority::App, TEST_PARENT)
                .map_err(|e| format!("spawn kvcli gap: {e}"))
        });
        let mut server = first;
        let r = client.and_then(|client| {
            crate::proc::sched::run_until(300_000_000_000, || {
                served() >= base + 500 || proc::has_ended(client)
            });
            let during = !proc::has_ended(client);
            let replaced = replace_on(other, first);
            if let Ok(next) = &replaced {
                server = *next;
            }
            let s = finish(client, "kvcli gap", 600)?;
            replaced?;
            kassert!(during, "kvcli gap ended before the replacement began");
            kassert!(
                s.how == abi::ENDED_EXIT && s.code == 0,
                "kvcli gap across the replacement ended with {s:?}"
            );
            Ok(())
        });
        end_kv(server);
        drop_kv()?;
        r
    }
}

ktest! {
    /// The retire notice: kv holds a `WAIT` (`kvcli await`) when it is replaced on another
    /// core; it gets the notice, answers the wait `Again`, and is retired; the client sends
    /// it again (`ulib::fnid::call_fn`) to the new server, which holds it until a `put`
    /// answers it. Without the notice the takeover would time out (kv holds a request).
    fn replace_kv_holding_a_wait_gives_it_back() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        let size = format!("{STATE_BYTES}");
        let first = start_kv_on(here, &[&size])?;
        let base = served();
        let mut server = first;
        let r = proc::spawn("kvcli", &["await", "held"], Priority::App, TEST_PARENT)
            .map_err(|e| format!("spawn kvcli await: {e}"))
            .and_then(|client| {
                // HELLO and WAIT taken: kv holds the wait.
                crate::proc::sched::run_until(300_000_000_000, || {
                    served() >= base + 2 || proc::has_ended(client)
                });
                let held = !proc::has_ended(client);
                let replaced = replace_on(other, first);
                if let Ok(next) = &replaced {
                    server = *next;
                }
                let answered = replaced.as_ref().map_err(String::clone).and_then(|_| {
                    kassert!(held, "kvcli await ended before kv held its wait");
                    kassert!(!proc::has_ended(client), "kvcli await ended before the put");
                    kvcli(server, &["put", "held", "now"])
                });
                if let Err(e) = answered {
                    super::end_and_reap(client);
                    return Err(e);
                }
                let s = finish(client, "kvcli await", 300)?;
                kassert!(
                    s.how == abi::ENDED_EXIT && s.code == 0,
                    "kvcli await across the replacement ended with {s:?}"
                );
                Ok(())
            });
        end_kv(server);
        drop_kv()?;
        r
    }
}

ktest! {
    /// A takeover that times out lends no priority: `fncheck late-taker kv`, at an
    /// application's priority on kv's core, calls `FN_TAKEOVER(kv, its endpoint, 0)` while
    /// kv (a server's priority) waits for a request: `TimedOut` (kv cannot run before the
    /// call returns, so the ask is withdrawn), the taker still at an application's
    /// priority (a regression: it kept kv's, enough to claim devices), and kv serves on
    /// under the same generation with its data.
    fn replace_kv_timed_out_takeover_gives_the_priority_back() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        with_kv_holding_alpha(|first| {
            let before = kv_now();
            taker_changed_nothing(first, before, "fncheck", &["late-taker", "kv"], Priority::App)
        })
    }
}

ktest! {
    /// `FN_RESTART`'s window must outlast the backoffs of its restarts
    /// (`abi::fnid::restart_window_min_ms`): `fncheck restart-window` opts in with windows
    /// of 0 and 1 ms short of the minimum (`InvalidArgument`, the policy kept) and at the
    /// minimum (accepted). A regression: a window of 0 was accepted, and a server that
    /// crashed at once came back every 10 ms for ever.
    fn fn_restart_window_below_the_minimum_is_refused() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        run_program("fncheck", &["restart-window"], 300)
    }
}

/// Start kv here holding `alpha` = `one`, run `f` on it, then end and drop it.
fn with_kv_holding_alpha(
    f: impl FnOnce(Pid) -> crate::ktest::TestResult,
) -> crate::ktest::TestResult {
    let size = format!("{STATE_BYTES}");
    let first = start_kv_on(percore::current_core(), &[&size])?;
    let r = kvcli(first, &["put", "alpha", "one"]).and_then(|()| f(first));
    end_kv(first);
    drop_kv()?;
    r
}

/// `PROG ARGS` (a would-be taker of kv) ends with status 0 (its console lines say why
/// not), and kv (`first`) still serves `alpha` under the same generation and server
/// (`before`).
fn taker_changed_nothing(
    first: Pid,
    before: (u64, Pid),
    prog: &str,
    args: &[&str],
    priority: Priority,
) -> crate::ktest::TestResult {
    let s = run_to_end(prog, args, priority, 300)?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "{prog} {args:?} ended with {s:?} (its console lines say why)"
    );
    kassert!(
        kv_now() == before,
        "kv changed: {before:?} -> {:?}",
        kv_now()
    );
    kassert!(!proc::has_ended(first), "the old kv ended");
    kvcli(first, &["get", "alpha", "one"])
}

/// `kv`'s record in this core's copy of the registry.
fn kv_info() -> Option<abi::fnid::FnInfo> {
    crate::fnid::list(false)
        .ok()
        .and_then(|l| l.into_iter().find(|f| f.name() == "kv"))
}

/// Crash `kv`'s server (a kill, on its core) and wait (300 s: a hang guard) until it is
/// up again under a new server (restarted, `FN_RESTART`) or down; the record then.
fn crash_kv() -> Result<abi::fnid::FnInfo, String> {
    // The server opts in once it serves (`FN_RESTART`, after it opened its table).
    crate::proc::sched::run_until(300_000_000_000, || {
        kv_info().is_none_or(|f| f.restart_max > 0)
    });
    let before = kv_info().ok_or("kv not registered")?;
    let server = before.server;
    let killed = if server.core() == percore::current_core() {
        proc::end_by_kill(server)
    } else {
        rpcc::call(
            server.core(),
            Op::Kill {
                pid: server,
                descendants_only: false,
            },
        )
        .map(drop)
    };
    killed.map_err(|e| format!("kill kv ({server}): {e}"))?;
    crate::proc::sched::run_until(300_000_000_000, || {
        kv_info().is_some_and(|f| {
            (f.state == abi::fnid::FN_UP && f.server != server) || f.state == abi::fnid::FN_DOWN
        })
    });
    // Collect the killed one if it is the tests' child (a restarted one is the kernel's).
    end_kv(server);
    kv_info().ok_or_else(|| String::from("kv unregistered"))
}

/// Unregister a `kv` that restarts (so that ending its server does not restart it), end
/// its server (and `first`, if it still runs) and close the state ICA `first` opened.
fn drop_restartable(first: Pid) -> crate::ktest::TestResult {
    let server = kv_info()
        .filter(|f| f.state == abi::fnid::FN_UP)
        .map(|f| f.server);
    // Read while kv is registered: the registry forgets it with the function.
    let state = super::kv::state_ica();
    run_program("kvcli", &["drop"], 120)?;
    if let Some(s) = server {
        end_kv(s);
    }
    end_kv(first);
    if let Some(r) = state {
        // A server that ended on another core may still be telling the vregion's core
        // that it unmapped it (`Busy` until then; 60 s only catches a hang).
        let mut closed = crate::res::close(r.id);
        crate::proc::sched::run_until(60_000_000_000, || {
            if closed == Err(abi::Error::Busy) {
                closed = crate::res::close(r.id);
            }
            closed != Err(abi::Error::Busy)
        });
        closed.map_err(|e| format!("close state ICA {}: {e}", r.id))?;
    }
    Ok(())
}

ktest! {
    /// Restart after a crash: `kv restart=2` on another core than the registry's home,
    /// killed: the kernel starts it again (same core, same arguments), which finds its
    /// table; twice; the third crash leaves kv down (`Gone`), restarts counted in `FN_LIST`.
    fn replace_kv_restarts_after_a_crash_at_most_n_times() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        let size = format!("{STATE_BYTES}");
        let first = start_kv_on(other, &[&size, "restart=2"])?;
        let r = (|| {
            kvcli(first, &["put", "alpha", "one"])?;
            for n in 1..=2u64 {
                let g0 = kv_info().map_or(0, |f| f.generation);
                let f = crash_kv()?;
                kassert!(
                    f.state == abi::fnid::FN_UP && f.generation > g0 && f.restarts == n,
                    "crash {n}: kv not restarted: {f:?}"
                );
                kassert!(
                    f.server.core() == other,
                    "crash {n}: restarted on core {}, not {other}",
                    f.server.core()
                );
                run_program("kvcli", &["get", "alpha", "one"], 600)?;
            }
            let f = crash_kv()?;
            kassert!(
                f.state == abi::fnid::FN_DOWN && f.restarts == 2 && f.restart_max == 2,
                "the third crash did not leave kv down: {f:?}"
            );
            let s = run_to_end("kvcli", &["get", "alpha"], Priority::App, 300)?;
            kassert!(
                s.how == abi::ENDED_EXIT && s.code == 1,
                "kvcli get from a kv that is down ended with {s:?}, not the error exit 1"
            );
            Ok(())
        })();
        drop_restartable(first)?;
        r
    }
}

ktest! {
    /// The hammer (issue 14): four client processes (two `kvcli all`) on every core call kv
    /// while it is replaced 20 times, alternating cores, and crashed (killed) 5 times, after
    /// every 4th replacement: it restarts each time. Every reply is checked against the
    /// clients' models (a request answered `Gone` by a crash must leave the key as before or
    /// after it, `kvcli bench`); no frame is lost on any core once kv and its state go.
    fn replace_kv_twenty_times_and_crash_it_five_while_hammered() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        // The whole run once unmeasured: it makes what each core keeps once made (RPCC
        // agents for as many concurrent callers, heap, the restarter's stack) at the peak
        // this load reaches, which a smaller warm-up did not on four cores. Then counted.
        hammered_churn(here, other)?;
        let before = free_frames_per_core()?;
        hammered_churn(here, other)?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// kv (its state in a state ICA, restart after a crash on) started `here`, two `kvcli all
/// 600` on every core, kv replaced 20 times alternating `other` and `here` and crashed
/// after every 4th replacement (restarted each time); every reply right, then kv dropped.
fn hammered_churn(here: usize, other: usize) -> crate::ktest::TestResult {
    let size = format!("{STATE_BYTES}");
    let first = start_kv_on(here, &[&size, "restart=8"])?;
    kvcli(first, &["put", "alpha", "one"])?;
    let hammers = [hammer("600"), hammer("600")];
    let mut server = first;
    let mut failed = None;
    let mut crashes = 0;
    for i in 0..20 {
        let core = if i % 2 == 0 { other } else { here };
        match replace_with(core, server, &["takeover", "restart=8"]) {
            Ok(next) => server = next,
            Err(e) => {
                failed = Some(format!("replacement {}: {e}", i + 1));
                break;
            }
        }
        if i % 4 == 3 {
            crashes += 1;
            match crash_kv() {
                Ok(f) if f.state == abi::fnid::FN_UP => server = f.server,
                r => {
                    failed = Some(format!("crash {crashes}: kv not restarted: {r:?}"));
                    break;
                }
            }
        }
    }
    let results = settle(hammers, failed.is_some());
    let r = kvcli(server, &["get", "alpha", "one"]);
    let restarts = kv_info().map_or(0, |f| f.restarts);
    drop_restartable(first)?;
    if let Some(e) = failed {
        return Err(e);
    }
    for r in results {
        r?;
    }
    r?;
    kassert!(restarts == 5, "kv restarted {restarts} times, not 5");
    Ok(())
}

ktest! {
    /// A new server that dies during the handover (`kv takeover` killed at a different
    /// point each round) never leaves `kv` pointing at a dead endpoint: it is served by a
    /// live server that answers (the old one, rolled back, or none ever switched), or it
    /// is down (the new one died after the switch) and a fresh `kv` serves it again; the
    /// data is still there. The outcomes are printed.
    fn replace_kv_new_server_dies_mid_handover() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let here = percore::current_core();
        let other = super::rpcc::other_core().unwrap_or(here);
        let size = format!("{STATE_BYTES}");
        let first = start_kv_on(here, &[&size])?;
        let mut server = first;
        let (mut kept, mut down) = (0, 0);
        let r = (|| {
            kvcli(server, &["put", "alpha", "one"])?;
            for round in 0..8u32 {
                let core = if round % 2 == 0 { other } else { here };
                let new = spawn_on(core, "kv", &["takeover"])?;
                // Let it get a little further each round before it dies.
                let mut polls = 0;
                crate::proc::sched::run_until(300_000_000_000, || {
                    polls += 1;
                    polls > round * 3 || ended(new)
                });
                // The kill itself first (a regression: in big-lock mode a kill that found the
                // server entering RECV was lost until a request woke it, answered `Gone`).
                kassert!(end_kv(new), "round {round}: {new} not ended 60 s after its kill");
                crate::proc::sched::run_until(300_000_000_000, || {
                    kv_info().is_some_and(|f| {
                        f.state == abi::fnid::FN_DOWN
                            || (f.state == abi::fnid::FN_UP && !ended(f.server))
                    })
                });
                let f = kv_info().ok_or("kv unregistered")?;
                log::info!("replace: round {round}: new server {new} killed, kv then {f:?}");
                if f.state == abi::fnid::FN_UP {
                    kassert!(
                        !ended(f.server),
                        "round {round}: kv points at a dead server {} ({f:?})",
                        f.server
                    );
                    kept += 1;
                    server = f.server;
                } else {
                    kassert!(f.state == abi::fnid::FN_DOWN, "round {round}: kv is {f:?}");
                    down += 1;
                    end_kv(server);
                    server = start_kv_on(here, &[&size])?;
                }
                kvcli(server, &["get", "alpha", "one"])
                    .map_err(|e| format!("{e}; kv now {:?}", kv_info()))?;
            }
            Ok(())
        })();
        log::info!(
            "replace: new server killed mid-handover: {kept} kept serving, {down} down then started again"
        );
        end_kv(server);
        drop_kv()?;
        r
    }
}
