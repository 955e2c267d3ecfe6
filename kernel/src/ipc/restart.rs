//! Restart after a crash, the request queues' side (issue 14, P3: "a server that crashes is
//! restarted from its image with its state ICA"; the contract is `abi::fnid`'s
//! `FN_RESTART`, the registry's side `fnid::home_restart`).
//!
//! # Who restarts, and why the kernel
//! The kernel does, on the core where the server ran, from the boot archive. It is the one
//! party that sees every end of a server as it happens (teardown, [`crashed`]), already
//! keeps the requests queued for it (P3: the queues live in the kernel) and already hands
//! the state ICA to the next server of the function (`FN_STATE`); a supervisor process
//! would have to be told of each end, be trusted with the function's rights, and could
//! itself crash. Restarting where the server ran keeps the parked requests on their core
//! (no copy through RPCC unless the restarted server registers elsewhere); only the policy
//! decision (restarts left in the window) is made at the registry's home.
//!
//! # What happens
//! 1. `FN_RESTART` ([`opt_in`]), by the function's server: the home keeps the policy in the
//!    function's record; the server's own process keeps its *image* (its program name and
//!    the arguments it gave) in its queues ([`ProcIpc`]), so it goes with that process.
//! 2. The server ends by a fault or a kill ([`crashed`], in teardown, the scheduler
//!    borrowed): the requests queued for its endpoint are *parked* (not answered `Gone`;
//!    one carrying an ICA is, its ICA gone with the address space); the request it was
//!    serving is answered `Gone` by the ordinary teardown (the documented answer); a kernel
//!    thread is made to do the rest, owning the parked requests. The function is not
//!    reported down (`fnid::server_ended` skips it).
//! 3. That thread ([`restarter`]) asks the home (`fnid::restart_begin`): restarts left in
//!    the window make the function *restarting* on every core (requests to it: `Again`);
//!    none left: down (`Gone`), and the parked requests are answered `Gone`. The window is
//!    never shorter than the backoffs of its restarts and 1 s more ([`opt_in`] refuses
//!    it: `abi::fnid::restart_window_min_ms`), so a server that crashes at once is left
//!    down after its `max` restarts instead of coming back for ever.
//! 4. It waits the backoff, spawns the image (a child of the kernel, as the function's
//!    user, at the priority it had when it opted in), waits until the new server has registered the name again (a new endpoint in
//!    this core's copy, at most [`REGISTER_WAIT_NS`]), and forwards the parked requests
//!    there, in order (as a takeover does). A program that cannot start, ends or does not
//!    register in time leaves the function down and the parked requests get `Gone`.
//!
//! Requests resolved to the crashed endpoint before a core heard find it gone: for a
//! function that restarts they are answered `Again` (`fnid::gone_if_via`), so they too
//! reach the restarted server when sent again.

use super::{fail, Incoming, ProcIpc};
use crate::proc::{self, sched};
use abi::res::{ResId, UserId};
use abi::{Error, Pid, Priority, WaitStatus};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;

/// How long a restarted server may take to register its name again.
pub const REGISTER_WAIT_NS: u64 = 10_000_000_000;
/// Between two looks for the registration.
const POLL_NS: u64 = 1_000_000;

/// What a restartable server's process keeps: how to start it again.
pub struct Image {
    fnid: u64,
    program: String,
    args: String,
    /// The priority it is started at again: the one it had when it opted in (a driver's
    /// stays a driver's: only a driver may claim a device).
    priority: Priority,
}

/// Restarts under way, per core, until their restarter thread takes them: (job number,
/// job). Only the core's own kernel touches its list (a crash and its restarter are on the
/// same core), so the lock is never contended.
static JOBS: [spin::Mutex<Vec<(u64, Job)>>; abi::MAX_CORES] =
    [const { spin::Mutex::new(Vec::new()) }; abi::MAX_CORES];
/// Numbers the jobs.
static NEXT_JOB: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// A restart under way: what the restarter thread owns.
struct Job {
    image: Image,
    /// The crashed server's endpoint and the function's user.
    old: ResId,
    user: UserId,
    parked: VecDeque<Incoming>,
}

/// FN_RESTART(fnid, max, window ms, args): the caller, `fnid`'s server, opts in (max 0:
/// out) with `args` as the arguments of its restarts.
pub fn opt_in(fnid: u64, max: u64, window_ms: u64, args: &[u8]) -> Result<(), Error> {
    // The window must outlast the backoffs of its `max` restarts (`abi::fnid`): a shorter
    // one never stops restarting (found by an audit: a window of 0 ms opened a new window
    // at every crash, and a server that crashed at once came back every 10 ms for ever).
    if max > abi::fnid::MAX_RESTARTS || window_ms < abi::fnid::restart_window_min_ms(max) {
        return Err(Error::InvalidArgument);
    }
    let args = core::str::from_utf8(args).map_err(|_| Error::InvalidArgument)?;
    let me = crate::res::flow_pid().ok_or(Error::NoSuchProcess)?;
    let program = proc::name_of(me).ok_or(Error::NoSuchProcess)?;
    // Restarted at the priority it has now (a driver's a driver's), never above: a program
    // at an application's priority that opted in came back as a server (found by a review:
    // a way past SPAWN's rule that no child outranks its parent).
    let priority = proc::priority_of(me).unwrap_or(Priority::App);
    let window_ns = window_ms.saturating_mul(1_000_000);
    crate::fnid::restartable(fnid, max as u32, window_ns, me)?;
    let image = (max > 0).then(|| {
        Box::new(Image {
            fnid,
            program: String::from(program.as_str()),
            args: String::from(args),
            priority,
        })
    });
    super::with_mine(|ipc, _| {
        ipc.restart = image;
        Ok(())
    })
}

/// Process `pid` ended with `status` (teardown, the scheduler borrowed as `s`; `ipc` its
/// queues, before they are failed): if it crashed serving a function that restarts, park
/// the requests for its endpoint and start the restarter. The function id handled.
pub fn crashed(
    s: &mut sched::Sched,
    pid: Pid,
    ipc: &mut ProcIpc,
    status: WaitStatus,
) -> Option<u64> {
    if status.how != abi::ENDED_FAULT && status.how != abi::ENDED_KILLED {
        return None;
    }
    let image = ipc.restart.take()?;
    let (old, server, user, up) = crate::fnid::entry_of(image.fnid).ok()?;
    if !up || server != pid {
        return None;
    }
    let (parked, keep): (VecDeque<Incoming>, VecDeque<Incoming>) = ipc
        .requests
        .drain(..)
        .partition(|i| i.endpoint == old && i.ica.is_none());
    ipc.requests = keep;
    let fnid = image.fnid;
    let number = NEXT_JOB.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    let jobs = &JOBS[crate::percore::current_core()];
    jobs.lock().push((
        number,
        Job {
            image: *image,
            old,
            user,
            parked,
        },
    ));
    if s.add_kernel_thread(restarter, number, Priority::Driver)
        .is_none()
    {
        let job = take_job(number)?;
        for caller in job.parked.into_iter().filter_map(|i| i.caller) {
            fail(Some(&mut *s), caller, Error::Gone);
        }
        return None;
    }
    Some(fnid)
}

/// Take job `number` from this core's list.
fn take_job(number: u64) -> Option<Job> {
    let mut jobs = JOBS[crate::percore::current_core()].lock();
    let i = jobs.iter().position(|(n, _)| *n == number)?;
    Some(jobs.swap_remove(i).1)
}

/// The restarter thread of job `number` ([`crashed`]).
extern "C" fn restarter(number: u64) -> ! {
    let Some(job) = take_job(number) else {
        sched::exit_current()
    };
    crate::res::begin_flow(job.user);
    let Job {
        image, old, parked, ..
    } = job;
    let left = match restart(&image, old) {
        Ok(new) => {
            for i in parked {
                super::takeover::forward(i, new);
            }
            VecDeque::new()
        }
        Err(e) => {
            log::info!("fnid {:#x}: not restarted: {e}", image.fnid);
            parked
        }
    };
    for caller in left.into_iter().filter_map(|i| i.caller) {
        fail(None, caller, Error::Gone);
    }
    crate::res::end_flow();
    sched::exit_current()
}

/// Restart `image`'s function (crashed at `old`): its new endpoint once registered.
fn restart(image: &Image, old: ResId) -> Result<ResId, Error> {
    let k = crate::fnid::restart_begin(image.fnid, old)?;
    sleep(abi::fnid::restart_backoff_ns(u64::from(k)));
    let args: Vec<&str> = image.args.split(' ').filter(|a| !a.is_empty()).collect();
    let new = match proc::spawn(&image.program, &args, image.priority, Pid(0)) {
        Ok(p) => p,
        Err(e) => {
            crate::fnid::restart_failed(image.fnid, old);
            return Err(e);
        }
    };
    let until = crate::time::now_ns().saturating_add(REGISTER_WAIT_NS);
    loop {
        match crate::fnid::entry_of(image.fnid) {
            // Registered (by the new server, or another took the function over meanwhile:
            // the parked requests go to whoever serves it).
            Ok((endpoint, _, _, true)) => return Ok(endpoint),
            // Unregistered: nobody to forward to.
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        if proc::has_ended(new) || crate::time::now_ns() >= until {
            let _ = proc::end_by_kill(new);
            crate::fnid::restart_failed(image.fnid, old);
            return Err(Error::TimedOut);
        }
        sleep(POLL_NS);
    }
}

/// Sleep `ns`; other contexts set their own flows meanwhile: ours is put back after.
fn sleep(ns: u64) {
    let flow = crate::res::save_flow();
    sched::sleep_ns(ns);
    crate::res::restore_flow(&flow);
}
