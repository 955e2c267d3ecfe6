//! The rendezvous fast path's shortcuts on the request path (issue 13): a same-core `CALL`
//! queued in one visit to the scheduler's tables, its answer taken from the front of its
//! results after the direct switch back, and endpoint checks remembered per process so
//! that `CALL` and `REPLY_RECV` skip the resource lookup. Kept apart from `ipc`'s general
//! path, which they must agree with (same errors, in the same order).

use super::{
    waits_for, wake_waiting_threads, Caller, Incoming, ProcIpc, Waits, MAX_IN_FLIGHT, MAX_QUEUED,
};
use crate::proc::sched;
use abi::ipc::{self as api, Completion, Msg};
use abi::res::ResId;
use abi::{Error, Pid, MAX_CORES};
use core::sync::atomic::{AtomicU64, Ordering};

/// An endpoint check that passed: `res::endpoint::owner(id, send)` answered `owner` for a
/// flow of `user` (with RCC's rights `rcc`). Its answer depends on nothing else while the
/// endpoint exists (its rights, creator and owner never change), so it holds while no
/// endpoint of its core was closed and no process there ended since (`epoch`,
/// [`ENDPOINTS_EPOCH`]).
#[derive(Clone, Copy)]
pub(super) struct EndpointCheck {
    id: ResId,
    user: u32,
    rcc: bool,
    epoch: u64,
    owner: Pid,
}

/// Per core: counts the closes of its endpoints and the ends of its processes (whose
/// endpoints go). A change makes every remembered [`EndpointCheck`] for an endpoint of that
/// core stale. One cache line each, written by its own core only in percore mode, so the
/// fast path shares nothing between cores (principle 1); in biglock mode, where any core
/// may close another core's endpoint, a change counts on every core.
static ENDPOINTS_EPOCH: [Epoch; MAX_CORES] = [const { Epoch(AtomicU64::new(0)) }; MAX_CORES];

/// One core's count, alone in its cache line.
#[repr(align(64))]
struct Epoch(AtomicU64);

/// An endpoint of `core` was closed, or a process of `core` ended (its endpoints go): every
/// remembered check naming an endpoint of `core` is stale.
pub(super) fn endpoints_changed(core: usize) {
    if crate::structure::biglock() {
        for e in &ENDPOINTS_EPOCH {
            e.0.fetch_add(1, Ordering::Relaxed);
        }
    } else if let Some(e) = ENDPOINTS_EPOCH.get(core) {
        e.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The owner of endpoint `id`, checked as `res::endpoint::owner(id, send)` does (the flow's
/// right to send, or to receive), for the running process (`ipc`): from the check it
/// remembers while that holds, else by the resource lookup (then remembered).
#[inline(always)]
pub(super) fn owner_checked(ipc: &mut ProcIpc, id: ResId, send: bool) -> Result<Pid, Error> {
    let user = crate::res::flow_user().0;
    let rcc = crate::res::rcc_on();
    let epoch = ENDPOINTS_EPOCH
        .get(id.core())
        .map_or(u64::MAX, |e| e.0.load(Ordering::Relaxed));
    let slot = &mut ipc.checks[usize::from(send)];
    if let Some(c) = slot {
        if c.id == id && c.user == user && c.rcc == rcc && c.epoch == epoch {
            return Ok(c.owner);
        }
    }
    let owner = crate::res::endpoint::owner(id, send)?;
    *slot = Some(EndpointCheck {
        id,
        user,
        rcc,
        epoch,
        owner,
    });
    Ok(owner)
}

/// The answer to request `ticket` if it is the first result queued (where the direct
/// switch's way back leaves it): one look, without COLLECT's search; `None` sends the caller
/// to `collect`.
pub(super) fn first_answer(ticket: u64) -> Option<Completion> {
    sched::with(|s| {
        let p = s.processes.get_mut(&s.current_process()?)?;
        if p.ipc.results.front()?.completion.ticket != ticket {
            return None;
        }
        p.ipc.results.pop_front().map(|d| d.completion)
    })
}

/// A same-core `CALL`'s request: take a ticket and queue the request for the endpoint's
/// owner in one visit to the scheduler's tables (as `submit` then `enqueue` would,
/// with the same errors in the same order), mapping the `ica` it carries in the owner.
/// Returns the ticket and the receiver waiting on
/// the endpoint, not woken (the caller hands it the core).
pub(super) fn call_local(
    endpoint: ResId,
    mut msg: Msg,
    via: crate::fnid::Via,
    ica: Option<alloc::boxed::Box<super::Ica>>,
) -> Result<(u64, Option<u32>), Error> {
    sched::with(|s| {
        let thread = s.current_thread().unwrap_or(0);
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        let me = p.pid;
        // A full in-flight table is the first error, as `submit`'s order has it.
        if p.ipc.in_flight() >= MAX_IN_FLIGHT {
            return Err(Error::Busy);
        }
        let owner = owner_checked(&mut p.ipc, endpoint, true)?;
        p.ipc.next_ticket += 1;
        let ticket = p.ipc.next_ticket;
        p.ipc.pending.insert(ticket, None);
        let queued = s
            .processes
            .get_mut(&owner.serial())
            .filter(|p| p.ended.is_none())
            .ok_or(Error::Gone)
            .and_then(|target| {
                let caller = Some(Caller {
                    pid: me,
                    ticket,
                    thread,
                });
                if target.ipc.takeover.is_some() {
                    // Being retired (rare): the general path's rule, `enqueue`'s.
                    let incoming = Incoming {
                        endpoint,
                        kind: api::SUBMIT_CALL,
                        sender: me,
                        sender_thread: thread,
                        sender_user: crate::proc::current_user().0,
                        caller,
                        msg,
                        via,
                        ica,
                    };
                    return super::takeover::accept_or_queue(target, incoming).map(|()| None);
                }
                if target.ipc.requests.len() >= MAX_QUEUED {
                    return Err(Error::Busy);
                }
                if let Some(ica) = &ica {
                    super::ica::land(target.vspace.as_mut(), target.pid, ica, &mut msg)?;
                }
                let receiver = match target.ipc.receiver {
                    Some((t, ep)) if ep == endpoint && target.ipc.requests.is_empty() => {
                        target.ipc.receiver = None;
                        Some(t)
                    }
                    _ => None,
                };
                target.ipc.requests.push_back(Incoming {
                    endpoint,
                    kind: api::SUBMIT_CALL,
                    sender: me,
                    sender_thread: thread,
                    sender_user: crate::proc::current_user().0,
                    caller,
                    msg,
                    via,
                    ica,
                });
                Ok(receiver)
            });
        let receiver = match queued {
            Ok(receiver) => receiver,
            Err(e) => {
                // Not queued: the ticket goes (the rare path pays the second lookup).
                if let Some(p) = s.processes.get_mut(&serial) {
                    p.ipc.pending.remove(&ticket);
                }
                return Err(e);
            }
        };
        let receiver = receiver.filter(|&t| waits_for(s, t, Waits::Request));
        // The receiver handed the core takes the request: the others need not look.
        if receiver.is_none() {
            wake_waiting_threads(s, owner.serial(), Waits::Request);
        }
        Ok((ticket, receiver))
    })
}
