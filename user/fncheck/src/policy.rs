//! Two rules found missing by an audit, each a regression test driven by a kernel test
//! (`kernel/src/tests/replace.rs`):
//!
//! - `fncheck restart-window`: `FN_RESTART`'s window must outlast the backoffs of its
//!   restarts (`abi::fnid::restart_window_min_ms`). This program serves `fnchk.rw` and opts
//!   in with a window of 0 and one 1 ms short of the minimum (`InvalidArgument`, the policy
//!   unchanged), then at the minimum (accepted), and opts out (`max` 0, any window). A
//!   window of 0 used to be accepted, and a server that crashed at once came back every
//!   10 ms for ever.
//! - `fncheck late-taker NAME`: run at an application's priority on the core of `NAME`'s
//!   server (idle, at a higher priority), it calls `FN_TAKEOVER(NAME, its endpoint, 0)`:
//!   `TimedOut` (the old server cannot run before the call returns), and it must still be
//!   at an application's priority, `NAME` served by the same server under the same
//!   generation. It used to keep the old server's priority.

use super::{expect, fail, info_of, Check};
use alloc::format;
use alloc::string::String;
use ulib::abi::fnid::{restart_window_min_ms, FnId, FN_UP, MAX_RESTARTS};
use ulib::abi::res::Rights;
use ulib::abi::{Error, Priority};
use ulib::{fnid, ipc, res, sys};

/// This program's priority, as the process list has it.
fn my_priority() -> Result<u32, String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    sys::live_processes()
        .map_err(|e| format!("process list: {e}"))?
        .iter()
        .find(|p| p.pid == me)
        .map(|p| p.priority)
        .ok_or_else(|| format!("{me} not in the process list"))
}

/// `fncheck restart-window`: see the module docs.
pub fn restart_window() -> Check {
    let ep = ipc::open_endpoint("here/endpoint/fnchk-rw", Rights(0x2f))
        .map_err(|e| format!("endpoint: {e}"))?;
    let r = fnid::register("fnchk.rw", ep)
        .map_err(|e| format!("register fnchk.rw: {e}"))
        .and_then(|id| {
            let r = restart_windows(id);
            // Opted out and withdrawn whatever happened: this program must not be
            // restarted by a crash after it.
            let _ = fnid::restart(id, 0, 0, "");
            let _ = fnid::unregister(id);
            r
        });
    let _ = res::close(ep);
    r
}

fn restart_windows(id: FnId) -> Check {
    // What a restart of this program would run: this check again (never the whole suite).
    let args = "restart-window";
    let max_of = |what: &str| -> Result<u64, String> {
        info_of(id)?
            .map(|i| i.restart_max)
            .ok_or_else(|| format!("{what}: fnchk.rw not listed"))
    };
    let refused = |max: u64, window: u64, keeps: u64| -> Check {
        let what = format!("max {max}, window {window} ms");
        expect(
            &what,
            fnid::restart(id, max, window, args),
            Error::InvalidArgument,
        )?;
        match max_of(&what)? {
            m if m == keeps => Ok(()),
            m => fail(&format!("{what}: refused, the policy kept"), m),
        }
    };
    let accepted = |max: u64, window: u64| -> Check {
        let what = format!("max {max}, window {window} ms");
        fnid::restart(id, max, window, args).map_err(|e| format!("{what}: {e}"))?;
        match max_of(&what)? {
            m if m == max => Ok(()),
            m => fail(&format!("{what}: accepted, the policy set"), m),
        }
    };
    let min3 = restart_window_min_ms(3);
    let min16 = restart_window_min_ms(MAX_RESTARTS);
    refused(1, 0, 0)?;
    refused(MAX_RESTARTS, 0, 0)?;
    refused(3, min3 - 1, 0)?;
    accepted(3, min3)?;
    refused(MAX_RESTARTS, min16 - 1, 3)?;
    accepted(MAX_RESTARTS, min16)?;
    accepted(0, 0)
}

/// `fncheck late-taker NAME`: see the module docs.
pub fn late_taker(name: &str) -> Check {
    let app = Priority::App as u32;
    let before = my_priority()?;
    if before != app {
        return fail(
            "late-taker: not started at an application's priority",
            before,
        );
    }
    let id = fnid::lookup(name).map_err(|e| format!("lookup {name}: {e}"))?;
    let old = info_of(id)?.ok_or_else(|| format!("{name} not listed"))?;
    if old.state != FN_UP {
        return fail(&format!("{name} before the takeover"), old);
    }
    let ep = ipc::open_endpoint("here/endpoint/fnchk-late", Rights(0x2f))
        .map_err(|e| format!("endpoint: {e}"))?;
    let taken = fnid::takeover(id, ep, 0);
    let after = my_priority();
    let now = info_of(id);
    let _ = res::close(ep);
    expect(
        &format!("FN_TAKEOVER({name}, ., 0)"),
        taken,
        Error::TimedOut,
    )?;
    match after? {
        p if p == app => {}
        p => return fail("priority after a takeover that timed out (want 2, App)", p),
    }
    match now? {
        Some(i) if i.state == FN_UP && i.server == old.server && i.generation == old.generation => {
            Ok(())
        }
        other => fail(&format!("{name} after a takeover that timed out"), other),
    }
}
