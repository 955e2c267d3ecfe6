//! Function ids (`kernel/src/fnid.rs`): the calls end to end from user space (`fncheck`,
//! with its children on this core and on the next), and the registry's copies: every core
//! maps a function id to the same endpoint, hears that its server ended, and that it was
//! unregistered; forged ids are refused on every core. Nothing is left behind. And the
//! registry's rules on tables of the test's own: registration, down, another user, newer
//! records win, `Limit`.

use super::{end_and_reap, frames_after, free_frames_per_core, run_program};
use crate::ktest::TestResult;
use crate::proc::{self, sched, TEST_PARENT};
use crate::{fnid, kassert, ktest, percore, smp};
use abi::fnid::FnId;
use abi::res::ResId;
use abi::{Error, Priority};
use alloc::format;
use alloc::vec::Vec;

ktest! {
    /// A retiring server killed while its thread hands its queue over to a full queue
    /// (`fncheck retire-client`, see `user/fncheck/src/retire.rs`): every request is still
    /// answered. A regression: the request being handed over left with the killed thread,
    /// and its caller waited forever (the client then fails after 60 s).
    fn retiring_server_killed_while_forwarding_loses_nothing() -> TestResult {
        crate::res::begin_flow(abi::res::UserId::KERNEL);
        // The hand-over may run its course without this context getting the core in
        // between (a wait for room that ends at once): then nothing was tested, and the
        // scenario runs again (its client still had every request answered).
        attempts(retire_attempt, "handing over")
    }
}

ktest! {
    /// The same with the new server on another core: the old server's thread sends each
    /// request there through RPCC and is killed while it waits for the answer (`Busy`: the
    /// new server's queue is full). Every request is still answered. A regression: the
    /// kill ended the thread holding the request on its way, and its caller waited
    /// forever; the answer, finding nobody, now answers it `Gone` (`rpcc::orphan`).
    fn retiring_server_killed_while_sending_to_another_core_loses_nothing() -> TestResult {
        crate::res::begin_flow(abi::res::UserId::KERNEL);
        let Some(other) = super::rpcc::other_core() else { crate::kskip!("needs 2 cores") };
        if crate::structure::biglock() {
            // A core holding the lock queues the request on the other core's tables itself:
            // no wait for an answer, nothing to be killed in.
            crate::kskip!("big-lock mode sends to another core under the lock");
        }
        attempts(|| retire_across_attempt(other), "waiting for another core")
    }
}

/// Run `attempt` (true: the old server was seen `doing` what the test kills it in) until
/// it is seen, 5 times at most; a failure ends the servers it may have left.
fn attempts(
    mut attempt: impl FnMut() -> Result<bool, alloc::string::String>,
    doing: &str,
) -> TestResult {
    for n in 1..=5 {
        match attempt() {
            Ok(true) => return Ok(()),
            Ok(false) => log::info!("fnid: attempt {n}: the old server not seen {doing}"),
            Err(e) => {
                end_retire_servers();
                return Err(e);
            }
        }
    }
    Err(format!(
        "the old server was never seen {doing} in 5 attempts"
    ))
}

/// One run of `fncheck retire-client`, its old server killed if seen handing over (true).
fn retire_attempt() -> Result<bool, alloc::string::String> {
    let client = proc::spawn("fncheck", &["retire-client"], Priority::App, TEST_PARENT)
        .map_err(|e| format!("spawn fncheck retire-client: {e}"))?;
    let mut found = None;
    sched::run_until(120_000_000_000, || {
        found = crate::ipc::takeover::handing_over_here();
        found.is_some() || proc::has_ended(client)
    });
    if let Some((old, left)) = found {
        log::info!("fnid: killing {old} while it hands over, {left} requests left");
        let _ = proc::end_by_kill(old);
    }
    client_passed(client)?;
    Ok(found.is_some())
}

/// One run of `fncheck retire-client CORE`, its old server killed if seen waiting for
/// core `other`'s answer to a request it sends there (true).
fn retire_across_attempt(other: usize) -> Result<bool, alloc::string::String> {
    let core = format!("{other}");
    let client = proc::spawn(
        "fncheck",
        &["retire-client", core.as_str()],
        Priority::App,
        TEST_PARENT,
    )
    .map_err(|e| format!("spawn fncheck retire-client {core}: {e}"))?;
    let mut found = None;
    sched::run_until(120_000_000_000, || {
        found = crate::ipc::takeover::sending_across_here();
        found.is_some() || proc::has_ended(client)
    });
    if let Some(old) = found {
        log::info!("fnid: killing {old} while it waits for core {other} to take a request");
        // The process ends at once; the answer on its way finds nobody (`rpcc::orphan`).
        let killed = proc::end_by_kill(old);
        // The client ends either way (every request answered, or its hang guard): reaped
        // before the kill's outcome is judged, so a failure leaves nothing running here.
        client_passed(client)?;
        kassert!(killed.is_ok(), "the kill of {old} was refused: {killed:?}");
        kassert!(proc::has_ended(old), "{old} still alive after its kill");
        return Ok(true);
    }
    client_passed(client)?;
    Ok(false)
}

/// `fncheck retire-client` ended well: every request answered (its console lines say
/// which was not).
fn client_passed(client: abi::Pid) -> Result<(), alloc::string::String> {
    let s = super::finish(client, "fncheck retire-client", 300)?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "fncheck retire-client ended with {s:?} (its console lines say why)"
    );
    Ok(())
}

/// What an ended `fncheck retire-client` may leave: its servers and their names.
fn end_retire_servers() {
    for name in ["fnchk.ro", "fnchk.rgo", "fnchk.rt"] {
        let Ok(id) = fnid::lookup(name.as_bytes()) else {
            continue;
        };
        if let Ok((_, pid)) = fnid::serving(id.0) {
            // On any core (`retire-client CORE` starts the new server on another one).
            if pid.core() != percore::current_core() {
                let _ = proc::kill(pid);
            } else if proc::end_by_kill(pid).is_ok() {
                sched::run_until(60_000_000_000, || proc::has_ended(pid));
            }
        }
        let _ = fnid::unregister(id.0);
    }
}

ktest! {
    /// `fncheck` (see its table): bad input, a server on this core with callers here and on
    /// the next core, a server on the next core that ends and is replaced, another user's
    /// attempts, `FN_STATE`'s rules, `FN_LIST`'s contents, `Limit`. A second run leaves
    /// every core's free frames where they were.
    fn function_ids_from_user_space() -> TestResult {
        let other = format!("{}", (percore::current_core() + 1) % smp::cores_planned());
        // Warm-up: RPCC agents and heaps reach their working size.
        run_program("fncheck", &[other.as_str()], 300)?;
        let before = free_frames_per_core()?;
        run_program("fncheck", &[other.as_str()], 300)?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// What core `core`'s copy maps `raw` to: the endpoint, or the error with bit 63 set.
fn resolve_here(raw: u64) -> u64 {
    match fnid::resolve(raw) {
        Ok(endpoint) => endpoint.0,
        Err(e) => (1 << 63) | e as u64,
    }
}

/// Every core's answer for `raw`.
fn resolve_everywhere(raw: u64) -> Result<Vec<u64>, alloc::string::String> {
    (0..smp::cores_planned())
        .filter(|&c| smp::is_online(c))
        .map(|c| {
            smp::call_on(c, resolve_here, raw, 10_000_000_000)
                .map_err(|e| format!("core {c}: {e:?}"))
        })
        .collect()
}

fn error_code(e: Error) -> u64 {
    (1 << 63) | e as u64
}

/// Run this core's threads until every core answers `want` for `raw` (30 s: a hang
/// guard only).
fn until_everywhere(raw: u64, want: u64) -> Result<Vec<u64>, alloc::string::String> {
    sched::run_until(30_000_000_000, || {
        resolve_everywhere(raw).is_ok_and(|v| v.iter().all(|&x| x == want))
    });
    resolve_everywhere(raw)
}

ktest! {
    /// A server on this core registers a name: every core maps its function id to the
    /// server's endpoint (the pushes came before FN_REGISTER returned); forged ids are
    /// `NoSuchResource` everywhere. The server is killed: every core comes to answer `Gone`.
    /// The kernel unregisters it: every core answers `StaleResource`.
    fn every_core_maps_a_function_id() -> TestResult {
        for forged in [FnId::new(5, 0x3fff_0000).0, (FnId::TYPE_BITS << 50) | 100] {
            let got = resolve_everywhere(forged)?;
            kassert!(
                got.iter().all(|&x| x == error_code(Error::NoSuchResource)),
                "forged {forged:#x}: {got:x?}"
            );
        }
        let server = proc::spawn("fncheck", &["server", "fnchk.k"], Priority::App, TEST_PARENT)
            .map_err(|e| format!("spawn: {e}"))?;
        let r = with_server(server);
        end_and_reap(server);
        // Whatever happened, nothing stays registered.
        if let Ok(id) = fnid::lookup(b"fnchk.k") {
            if let Ok(ica) = fnid::state(id.0, 0) {
                let _ = crate::res::close(ResId(ica));
            }
            let _ = fnid::unregister(id.0);
        }
        r
    }
}

fn with_server(server: abi::Pid) -> crate::ktest::TestResult {
    // The server registers, then sets its state ICA: once this core (the registry's home
    // in these tests, or a copy) has the state, the registration's pushes are done.
    let ready =
        || fnid::lookup(b"fnchk.k").is_ok_and(|id| fnid::state(id.0, 0).is_ok_and(|ica| ica != 0));
    let registered = sched::run_until(60_000_000_000, ready);
    kassert!(
        registered,
        "the server did not register fnchk.k and set its state"
    );
    let id = fnid::lookup(b"fnchk.k").map_err(|e| format!("lookup: {e}"))?;
    let here = fnid::resolve(id.0).map_err(|e| format!("resolve here: {e}"))?;
    kassert!(
        here.core() == server.core(),
        "endpoint {here} not on the server's core"
    );
    let got = resolve_everywhere(id.0)?;
    kassert!(
        got.iter().all(|&x| x == here.0),
        "copies: {got:x?}, want {:#x}",
        here.0
    );
    let _ = proc::end_by_kill(server);
    let got = until_everywhere(id.0, error_code(Error::Gone))?;
    kassert!(
        got.iter().all(|&x| x == error_code(Error::Gone)),
        "after the server's end: {got:x?}"
    );
    let ica = fnid::state(id.0, 0).map_err(|e| format!("state: {e}"))?;
    kassert!(ica != 0, "the server set no state ICA");
    crate::res::close(ResId(ica)).map_err(|e| format!("close the state ICA: {e}"))?;
    fnid::unregister(id.0).map_err(|e| format!("unregister: {e}"))?;
    let got = resolve_everywhere(id.0)?;
    kassert!(
        got.iter().all(|&x| x == error_code(Error::StaleResource)),
        "after unregistering: {got:x?}"
    );
    Ok(())
}

ktest! {
    /// The registry's rules on tables of the test's own (not a core's): a registration, the
    /// same name again while served (the home must check the endpoint), down, another
    /// user's registration of the down name (`Denied`), the same user's (the same id);
    /// a copy takes only newer records, so pushes that overtake each other cannot put an
    /// old one back; `Limit` with every slot taken.
    fn registry_rules_and_newer_records_win() -> TestResult {
        use crate::fnid::{register_in, FnTable, Found, Name};
        use abi::res::{ResType, UserId};
        let name = |n: &[u8]| Name::new(n).map_err(|e| format!("name: {e}"));
        let mut home = alloc::boxed::Box::new(FnTable::new());
        let (ep1, ep2) = (
            ResId::new(0, 1, ResType::Endpoint, 1, 1),
            ResId::new(0, 1, ResType::Endpoint, 2, 2),
        );
        let (server, user) = (abi::Pid::new(1, 5), UserId(1000));
        let Ok(Found::Done(slot, id)) = register_in(&mut home, name(b"t.a")?, ep1, server, user)
        else {
            return Err("first registration not done".into());
        };
        kassert!(id.generation() == 1 && home.resolve(id.0) == Ok(ep1), "registered: {id}");
        let first = home.record(slot);
        let again = register_in(&mut home, name(b"t.a")?, ep2, server, user);
        kassert!(matches!(again, Ok(Found::Check { .. })), "registered twice: not checked");
        kassert!(home.mark_down(id.0, ep1) == Some(slot), "not marked down");
        kassert!(home.resolve(id.0) == Err(Error::Gone), "down: {:?}", home.resolve(id.0));
        let down = home.record(slot);
        let other = register_in(&mut home, name(b"t.a")?, ep2, server, UserId(2000));
        kassert!(matches!(other, Err(Error::Denied)), "another user registered a down name");
        let Ok(Found::Done(_, same)) = register_in(&mut home, name(b"t.a")?, ep2, server, user)
        else {
            return Err("registration again not done".into());
        };
        kassert!(same == id && home.resolve(id.0) == Ok(ep2), "again: {same}, want {id}");
        let up = home.record(slot);
        // A copy: pushes arrive out of order.
        let mut copy = alloc::boxed::Box::new(FnTable::new());
        kassert!(copy.take(slot as u32, up), "the newest record was not taken");
        kassert!(!copy.take(slot as u32, first) && !copy.take(slot as u32, down), "an older record was taken");
        kassert!(copy.resolve(id.0) == Ok(ep2), "copy: {:?}", copy.resolve(id.0));
        // One user's share taken (a regression: one user could take every slot), then
        // another user's, then every slot.
        let mut table = alloc::boxed::Box::new(FnTable::new());
        let other = UserId(user.0 + 1);
        for i in 0..abi::fnid::FNIDS_PER_USER {
            let n = format!("t.{i}");
            let r = register_in(&mut table, name(n.as_bytes())?, ep1, server, user);
            kassert!(matches!(r, Ok(Found::Done(..))), "registration {i} not done");
        }
        let over = register_in(&mut table, name(b"t.over")?, ep1, server, user);
        kassert!(matches!(over, Err(Error::Limit)), "past the user's share: not Limit");
        // The other users share all but the reserve (a regression: two users' shares were
        // the whole registry, and the system's services then found no room).
        let shared = abi::fnid::MAX_FNIDS - abi::fnid::FNIDS_RESERVED;
        for i in abi::fnid::FNIDS_PER_USER..shared {
            let n = format!("t.{i}");
            let r = register_in(&mut table, name(n.as_bytes())?, ep1, server, other);
            kassert!(matches!(r, Ok(Found::Done(..))), "another user's registration {i} not done");
        }
        for u in [other, UserId(other.0 + 1)] {
            let r = register_in(&mut table, name(b"t.res")?, ep1, server, u);
            kassert!(matches!(r, Err(Error::Limit)), "user {} took a reserved slot", u.0);
        }
        for i in shared..abi::fnid::MAX_FNIDS {
            let n = format!("t.{i}");
            let r = register_in(&mut table, name(n.as_bytes())?, ep1, server, crate::proc::ADMIN);
            kassert!(matches!(r, Ok(Found::Done(..))), "the administrator's registration {i} not done");
        }
        let full = register_in(&mut table, name(b"t.full")?, ep1, server, UserId::KERNEL);
        kassert!(matches!(full, Err(Error::Limit)), "one too many: not Limit");
        // A system service's name is the administrator's and the kernel's (a regression: any
        // user could register `fs` or `net.udp` before its server and take its requests).
        let mut table = alloc::boxed::Box::new(FnTable::new());
        for n in ["fs", "net.udp", "fs.buf1", "mach.link", "blk"] {
            let r = register_in(&mut table, name(n.as_bytes())?, ep1, server, UserId(2000));
            kassert!(matches!(r, Err(Error::Denied)), "user 2000 registered {n}");
        }
        let r = register_in(&mut table, name(b"fsx")?, ep1, server, UserId(2000));
        kassert!(matches!(r, Ok(Found::Done(..))), "user 2000 could not register fsx");
        for (n, u) in [("fs", crate::proc::ADMIN), ("net.udp", UserId::KERNEL)] {
            let r = register_in(&mut table, name(n.as_bytes())?, ep1, server, u);
            kassert!(matches!(r, Ok(Found::Done(..))), "user {} could not register {n}", u.0);
        }
        Ok(())
    }
}
