//! Restart after a crash, the registry's side (`abi::fnid`'s `FN_RESTART`; the restart
//! itself, on the crashed server's core, is `ipc::restart`'s): the policy a server sets,
//! the home's decision for each crash (restarts left in the window: the function is
//! *restarting*, requests get `Again`; none: down), and what a copy answers for a request
//! that found a restarting function's endpoint gone.
#![deny(unsafe_code)]

use super::*;

/// FN_RESTART at home: `server` (the function's server now) sets its restart policy; the
/// counts stay.
pub(super) fn home_restartable(
    fnid: u64,
    max: u32,
    window_ns: u64,
    server: Pid,
) -> Result<(), Error> {
    change(fnid, |slot| {
        let e = slot.entry.as_mut().ok_or(Error::StaleResource)?;
        if !e.up || e.server != server {
            return Err(Error::Denied);
        }
        e.restart.max = max;
        e.restart.window_ns = window_ns;
        Ok(())
    })
}

/// At home: the server at `old` crashed (`ipc::restart`): if the function opted in, is
/// still served from `old` as far as the home knows (or was marked down for it) and has
/// restarts left in its window, it is restarting (requests get `Again`): the restarts in
/// the window so far (1 for the first), pushed to every core before this returns. Else it
/// is down (`Gone`; `Busy` if another server serves it now).
pub(super) fn home_restart(fnid: u64, old: ResId) -> Result<u32, Error> {
    let now = crate::time::now_ns();
    let k = change(fnid, |slot| {
        let e = slot.entry.as_mut().ok_or(Error::StaleResource)?;
        if e.endpoint != old || e.restart.restarting {
            return Err(Error::Busy);
        }
        let r = &mut e.restart;
        if now.saturating_sub(r.window_start) > r.window_ns || r.in_window == 0 {
            r.window_start = now;
            r.in_window = 0;
        }
        e.up = false;
        if r.max == 0 || r.in_window >= r.max {
            return Ok(None);
        }
        r.in_window += 1;
        r.count += 1;
        r.restarting = true;
        Ok(Some(r.in_window))
    })?;
    k.ok_or(Error::Gone)
}

/// Does the function `via` names restart after a crash, and is it not down (this core's
/// copy)?
#[cold]
#[inline(never)]
pub(super) fn restarts(via: Via) -> bool {
    table(|t| {
        let i = via.slot();
        via.is(t.id_of(i))
            && t.slots[i]
                .entry
                .is_some_and(|e| e.restart.max > 0 && (e.up || e.restart.restarting))
    })
}

/// FN_RESTART's registry side: the caller (`server`, the function's server now, as this
/// core's copy says) sets `fnid`'s restart policy at home.
pub fn restartable(fnid: u64, max: u32, window_ns: u64, server: Pid) -> Result<(), Error> {
    let serving = table(|t| t.find(fnid).map(|(_, e)| e.up && e.server == server))?;
    if !serving {
        return Err(Error::Denied);
    }
    at_home(FnOp::Restartable {
        fnid,
        max,
        window_ns,
        server,
    })
    .map(drop)
}

/// A crashed server's restart (`ipc::restart`) asks the home: the restarts in the window
/// (the function is restarting now), or why not (`Gone`: down).
pub fn restart_begin(fnid: u64, old: ResId) -> Result<u32, Error> {
    at_home(FnOp::Restart { fnid, old })?
        .value()
        .map(|k| k as u32)
}

/// A restart failed (the program did not start or register): `fnid` is down, if it is
/// still restarting from `old`.
pub fn restart_failed(fnid: u64, old: ResId) {
    if current_core() == HOME {
        home_down(fnid, old);
    } else {
        let _ = rpcc::call(
            HOME,
            Op::Fn(FnOp::Down {
                fnid,
                endpoint: old,
            }),
        );
    }
}

/// Where `fnid`'s requests go, its server and its user, and whether it is up, as this
/// core's copy has it.
pub fn entry_of(fnid: u64) -> Result<(ResId, Pid, UserId, bool), Error> {
    table(|t| {
        t.find(fnid)
            .map(|(_, e)| (e.endpoint, e.server, e.user, e.up))
    })
}
