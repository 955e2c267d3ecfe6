//! The owner's side of an endpoint (P0's rendezvous receiver, P3's request queue): a
//! request put in the owner's queue ([`enqueue`]), taken by `RECV` ([`recv`]), answered by
//! `REPLY` ([`reply`]) or both in one entry ([`reply_recv`], which hands the core straight
//! back to a caller waiting on this core), and what an endpoint's close or its owner's end
//! leaves ([`endpoint_closed`], [`process_ended`]). Split from `ipc.rs`, whose module
//! documentation tells the whole request path; the caller's side stays there.

#![deny(unsafe_code)]

use super::*;

/// Put `incoming` in the request queue of endpoint `endpoint`'s owner (on this core), and
/// map the ICA it carries in the owner.
pub fn enqueue(mut incoming: Incoming) -> Result<(), Error> {
    let owner = crate::res::endpoint::owner(incoming.endpoint, true)?;
    sched::with(|s| {
        let p = s
            .processes
            .get_mut(&owner.serial())
            .filter(|p| p.ended.is_none())
            .ok_or(Error::Gone)?;
        if p.ipc.takeover.is_some() {
            // Being retired: kept to be forwarded behind the requests moved.
            match takeover::accept(&mut p.ipc, incoming) {
                Some(i) => incoming = i,
                None => return Ok(()),
            }
        }
        if p.ipc.requests.len() >= MAX_QUEUED {
            return Err(Error::Busy);
        }
        if let Some(ica) = &incoming.ica {
            ica::land(p.vspace.as_mut(), p.pid, ica, &mut incoming.msg)?;
        }
        p.ipc.requests.push_back(incoming);
        wake_waiting_threads(s, owner.serial(), Waits::Request);
        Ok(())
    })
}

/// Hand the core to `thread`, just given what it waits for, blocking the running thread
/// for `why`; if the direct switch is refused, wake `thread` and block the ordinary way.
pub(super) fn hand_over(thread: u32, why: sched::Block) {
    if !sched::switch_to(thread, why) {
        sched::with(|s| s.wake(thread));
        sched::block(why);
    }
}

/// RECV: take the next request for `endpoint` (owned by the caller), waiting at most
/// `timeout_ns`.
pub fn recv(endpoint: ResId, timeout_ns: u64) -> Result<Received, Error> {
    // A function id: its server receives on its own endpoint (anyone else: as below).
    let (endpoint, _) = crate::fnid::target(endpoint)?;
    if endpoint.core() != current_core() {
        // Only an endpoint's opener receives on it, and the opener lives on the endpoint's
        // core: from here the caller is a stranger to it, and gets a stranger's answer
        // (`Denied`), once the id is known to name an endpoint (regression: this was
        // `InvalidArgument`, unlike the same call on the endpoint's own core).
        let info = crate::res::info(endpoint)?;
        return Err(if info.kind == abi::res::ResType::Endpoint as u8 {
            Error::Denied
        } else {
            Error::WrongType
        });
    }
    let owner = crate::res::endpoint::owner(endpoint, false)?;
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    receive(owner, endpoint, deadline, None, false)
}

/// Take the next request for `endpoint` (owned by `owner`, which must be the caller) from
/// the caller's queue: `None` if none is queued, and then this thread is noted as the
/// endpoint's receiver (a `CALL` on this core may switch straight to it).
pub(super) fn take_request(owner: Pid, endpoint: ResId) -> Result<Option<Received>, Error> {
    sched::with(|s| {
        let thread = s.current_thread();
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        if owner != p.pid {
            return Err(Error::Denied);
        }
        if p.ipc.takeover.is_some() {
            match takeover::begin(&mut p.ipc, p.vspace.as_mut(), endpoint) {
                takeover::Look::Serve => {}
                takeover::Look::Retired => return Err(Error::Gone),
                takeover::Look::Notice => {
                    p.ipc.forget_receiver(thread);
                    return Ok(Some(takeover::notice(endpoint)));
                }
            }
        }
        let ipc = &mut p.ipc;
        let Some(i) = ipc.requests.iter().position(|r| r.endpoint == endpoint) else {
            ipc.receiver = thread.map(|t| (t, endpoint));
            return Ok(None);
        };
        ipc.forget_receiver(thread);
        let r = ipc.requests.remove(i).ok_or(Error::Unknown)?;
        note_request(r.sender);
        if r.via.named() {
            crate::fnid::note_served(r.via);
        }
        let request = match r.caller {
            Some(caller) => {
                ipc.next_handle += 1;
                ipc.serving.insert(ipc.next_handle, caller);
                ipc.next_handle
            }
            None => 0,
        };
        Ok(Some(Received {
            request,
            sender: r.sender,
            sender_thread: u64::from(r.sender_thread),
            sender_user: u64::from(r.sender_user),
            endpoint: r.endpoint.0,
            kind: r.kind,
            msg: r.msg,
        }))
    })
}

/// The receiving loop of RECV and REPLY_RECV: wait until `deadline` for a request on
/// `endpoint`; `first`, a thread just answered, is handed the core if this one must wait.
/// `noted`: the caller found nothing queued and noted this thread as the receiver, in the
/// same borrow (the first look is done).
fn receive(
    owner: Pid,
    endpoint: ResId,
    deadline: u64,
    mut first: Option<u32>,
    mut noted: bool,
) -> Result<Received, Error> {
    let result = loop {
        let taken = if core::mem::take(&mut noted) {
            Ok(None)
        } else {
            take_request(owner, endpoint)
        };
        match taken {
            // (`take_request` forgot this thread as the receiver.)
            Ok(Some(r)) => break Ok(r),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        if crate::time::now_ns() >= deadline {
            break Err(Error::TimedOut);
        }
        match first.take() {
            Some(t) => hand_over(t, sched::Block::Recv(deadline)),
            None => sched::block(sched::Block::Recv(deadline)),
        }
    };
    // The answered thread was not handed the core (a request was waiting): wake it.
    if let Some(t) = first {
        sched::with(|s| s.wake(t));
    }
    if result.is_ok() {
        return result;
    }
    if matches!(result, Err(Error::Gone)) {
        // Retired by a live replacement: this thread hands over and the process ends;
        // unless the new server died first (rolled back): then receive again.
        if takeover::finish_if_handing() {
            return receive(owner, endpoint, deadline, None, false);
        }
    }
    // No longer waiting here (timed out, or the endpoint went).
    sched::with(|s| {
        let me = s.current_thread();
        if let Some(p) = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial))
        {
            p.ipc.forget_receiver(me);
        }
    });
    result
}

/// REPLY: answer request `handle` with `msg` and `value` (and the ICA `msg` may carry;
/// an unknown handle is checked first, so it changes nothing).
pub fn reply(handle: u64, msg: Msg, value: u64) -> Result<(), Error> {
    if ica::carries(&msg) {
        return ica::reply(handle, msg, value);
    }
    let caller = with_mine(|ipc, _| ipc.serving.remove(&handle).ok_or(Error::NoSuchResource))?;
    note_reply(caller.pid, &msg, false);
    deliver(None, caller, answer(caller, msg, value), None);
    Ok(())
}

/// REPLY_ERROR: answer request `handle` with the error `code` (its caller's `CALL` or
/// `COLLECT` fails with it): how a server answers `Again` to the requests it holds when it
/// gets the retire notice. 0 or a code that names no error is `InvalidArgument`, checked
/// first (nothing is answered); an unknown handle is `NoSuchResource`.
pub fn reply_error(handle: u64, code: u64) -> Result<(), Error> {
    let e = Error::from_code(code);
    if code == 0 || e as u64 != code {
        return Err(Error::InvalidArgument);
    }
    let caller = with_mine(|ipc, _| ipc.serving.remove(&handle).ok_or(Error::NoSuchResource))?;
    note_reply(caller.pid, &Msg::default(), false);
    fail(None, caller, e);
    Ok(())
}

pub(super) fn answer(caller: Caller, msg: Msg, value: u64) -> Completion {
    Completion {
        ticket: caller.ticket,
        status: 0,
        value,
        msg,
    }
}

/// REPLY_RECV: answer request `handle` (0: none) with `msg` and `value`, then take the next
/// request for `endpoint`, waiting at most `timeout_ns`. Everything is checked before
/// anything is done: an unknown handle is `NoSuchResource` and nothing is answered or
/// received; a bad endpoint fails as RECV does, and the handle stays unanswered. If the
/// caller is a thread of this core waiting for the answer and no request is queued, the
/// core goes straight to it (the rendezvous fast path's way back).
pub fn reply_recv(
    handle: u64,
    msg: Msg,
    value: u64,
    endpoint: ResId,
    timeout_ns: u64,
) -> Result<Received, Error> {
    // Two copies: the one without an ICA has none of its code (the fast path's way back).
    if handle != 0 && ica::carries(&msg) {
        reply_recv_as::<true>(handle, msg, value, endpoint, timeout_ns)
    } else {
        reply_recv_as::<false>(handle, msg, value, endpoint, timeout_ns)
    }
}

/// [`reply_recv`], passing the ICA `msg` carries if `PASS`.
#[inline(always)]
fn reply_recv_as<const PASS: bool>(
    handle: u64,
    msg: Msg,
    value: u64,
    endpoint: ResId,
    timeout_ns: u64,
) -> Result<Received, Error> {
    let here = current_core();
    let (endpoint, _) = crate::fnid::target(endpoint)?;
    if endpoint.core() != here {
        return recv(endpoint, timeout_ns); // the stranger's answer, as RECV gives it
    }
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    // An ICA moves only once the handle and the endpoint are known to be good.
    let taken = if PASS {
        sched::with(|s| {
            let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
            let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
            if fast::owner_checked(&mut p.ipc, endpoint, false)? != p.pid {
                return Err(Error::Denied);
            }
            p.ipc
                .serving
                .contains_key(&handle)
                .then_some(())
                .ok_or(Error::NoSuchResource)
        })?;
        ica::take(&msg)?
    } else {
        None
    };
    let (taken, mut ica) = taken.unzip();
    let answered = sched::with(|s| {
        let thread = s.current_thread();
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        let owner = fast::owner_checked(&mut p.ipc, endpoint, false)?;
        if owner != p.pid {
            return Err(Error::Denied);
        }
        if handle == 0 {
            return Ok((owner, None, None, false));
        }
        let caller = p.ipc.serving.remove(&handle).ok_or(Error::NoSuchResource)?;
        note_reply(caller.pid, &msg, ica::writable(taken.as_ref()));
        if caller.pid.core() != here {
            return Ok((owner, Some(caller), None, false));
        }
        // (A process being retired looks at its queue, where it is retired.)
        let queued =
            p.ipc.takeover.is_some() || p.ipc.requests.iter().any(|r| r.endpoint == endpoint);
        // Nothing queued: this thread is the receiver from now on (the receiving loop's
        // first look, done here).
        if !queued {
            p.ipc.receiver = thread.map(|t| (t, endpoint));
        }
        // On this core: queue the answer; the caller's thread is woken below or switched to.
        let direct =
            (!queued && waits_for(s, caller.thread, Waits::Answer)).then_some(caller.thread);
        let done = match if PASS { ica.take() } else { None } {
            None => complete_in_but(
                s,
                caller.pid,
                answer(caller, msg, value),
                None,
                direct.is_none(),
            ),
            passed => complete_passing(
                s,
                caller.pid,
                answer(caller, msg, value),
                direct.is_none(),
                passed,
            ),
        };
        Ok((owner, None, direct.filter(|_| done), !queued))
    });
    let (owner, remote, direct, noted) = match answered {
        Ok(answered) => answered,
        Err(e) => {
            if let Some(t) = taken {
                ica::give_back(t);
            }
            return Err(e);
        }
    };
    if let Some(caller) = remote {
        deliver(
            None,
            caller,
            answer(caller, msg, value),
            if PASS { ica.take() } else { None },
        );
    }
    receive(owner, endpoint, deadline, direct, noted)
}

/// Endpoint `endpoint` (of this core, owned by `owner`) was closed: its queued callers get
/// `Gone`.
pub fn endpoint_closed(owner: Pid, endpoint: ResId) {
    fast::endpoints_changed(endpoint.core());
    crate::fnid::endpoint_closed(endpoint);
    let (failed, unmapped): (Vec<Caller>, Vec<ResId>) = sched::with(|s| {
        let Some(p) = s.processes.get_mut(&owner.serial()) else {
            return (Vec::new(), Vec::new());
        };
        let (gone, keep): (Vec<Incoming>, Vec<Incoming>) = p
            .ipc
            .requests
            .drain(..)
            .partition(|r| r.endpoint == endpoint);
        p.ipc.requests = keep.into();
        let unmapped = ica::unmap_untaken(p.vspace.as_mut(), &gone);
        (
            gone.into_iter().filter_map(|r| r.caller).collect(),
            unmapped,
        )
    });
    crate::res::note_detached(unmapped.into_iter());
    for caller in failed {
        fail(None, caller, Error::Gone);
    }
}

/// A process ended: everything waiting for it gets `Gone`; what it held goes.
pub fn process_ended(s: &mut sched::Sched, mut ipc: ProcIpc) {
    // Its endpoints go (unless it moved): remembered checks may name them.
    fast::endpoints_changed(current_core());
    if let Some(t) = ipc.takeover.take() {
        takeover::ended(s, *t);
    }
    let callers = ipc
        .requests
        .into_iter()
        .filter_map(|r| r.caller)
        .chain(ipc.serving.into_values());
    for caller in callers {
        fail(Some(&mut *s), caller, Error::Gone);
    }
}
