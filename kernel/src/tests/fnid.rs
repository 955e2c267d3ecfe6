//! Function ids (`kernel/src/fnid.rs`): the calls end to end from user space (`fncheck`,
//! with its children on this core and on the next), and the registry's copies: every core
//! maps a function id to the same endpoint, hears that its server ended, and that it was
//! unregistered; forged ids are refused on every core. Nothing is left behind.

use super::{end_and_reap, frames_after, free_frames_per_core, run_program};
use crate::proc::{self, sched, TEST_PARENT};
use crate::{fnid, kassert, ktest, percore, smp};
use abi::fnid::FnId;
use abi::res::ResId;
use abi::{Error, Priority};
use alloc::format;
use alloc::vec::Vec;

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
