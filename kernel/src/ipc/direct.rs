//! The register calls (`CALL_REGS`, `REPLY_RECV_REGS`; `abi::ipc`, "Messages in
//! registers") and their direct handoff: seL4's fastpath on our request path.
//!
//! A thread in a system call keeps its user registers in the frame at the top of its
//! kernel stack. A register call that must wait marks its own frame (`error_code`, which
//! `syscall_entry` sets to 0 and no program can write) as waiting for a request
//! ([`WAITS_RECV`]) or for an answer ([`WAITS_ANSWER`]). A `CALL_REGS` that finds the
//! endpoint's receiver waiting so, on this core with nothing queued, writes the request
//! straight into the receiver's frame (message, handle, sender), marks it [`HANDED`] and
//! switches to it in the same borrow of the scheduler's tables: no request record is
//! queued, no user memory is touched, no run queue is visited. A `REPLY_RECV_REGS` whose
//! caller waits so does the same the other way. The woken thread finds its frame handed
//! and returns at once; in fact, unless its way out has more to do than a system call's
//! exit (a stop, a preemption), it returns to user mode straight from the switch, and its
//! kernel context is dropped (`sched::finish_to_user`; seL4's fastpath does the same). So
//! a wait marked must hold nothing that has to run or be dropped after it: every value on
//! its stack is plain, no borrow or lock is held, and it has no deadline. Anything else
//! (another core, a function id's server retiring, an ICA, a queued request, a
//! higher-priority thread ready, a stop pending) takes the
//! general path (`ipc::call`, `ipc::reply_recv`) with the same results, and a marked
//! thread woken by it (a request queued by another core, its server ended, a timer) finds
//! its frame not handed and looks in its queues as `COLLECT` and `RECV` do.
//!
//! The bookkeeping stays the general path's: the caller's ticket is pending and the
//! receiver's handle is in its serving list, so a reply by `REPLY`, an ended server
//! (`Gone`), a retirement or a kill finds everything where it always is.

#![deny(unsafe_code)]

use super::{fast, note_reply_here, note_request, Caller, MAX_IN_FLIGHT};
use crate::arch::x86_64::idt::TrapFrame;
use crate::percore::current_core;
use crate::proc::sched::{self, Block};
use abi::ipc::{self as api, Msg, Received};
use abi::res::{ResId, ResType, UserId};
use abi::Error;

/// A frame's `error_code` while its thread waits in `REPLY_RECV_REGS` for a request.
const WAITS_RECV: u64 = 0x5245_4356; // "RECV"
/// A frame's `error_code` (low half) while its thread waits in `CALL_REGS` for the
/// answer; the high half is the ticket's ([`waits_answer`]).
const WAITS_ANSWER: u64 = 0x414e_5357; // "ANSW"

/// The mark of a frame whose thread waits in `CALL_REGS` for the answer to `ticket`: a
/// reply hands its answer only to the call it answers. A thread may wait in `CALL_REGS`
/// while a call it submitted earlier is answered by `REPLY_RECV_REGS` (a review found that
/// answer written into the register call's frame: the call returned another call's
/// answer, and the earlier ticket was lost; `ipccheck regs`). The low half tells it from
/// the other marks whatever the ticket.
#[inline(always)]
fn waits_answer(ticket: u64) -> u64 {
    (ticket << 32) | WAITS_ANSWER
}

/// A frame's `error_code` once another thread wrote its result into it.
const HANDED: u64 = 0x4841_4e44; // "HAND"

/// The message in a register call's frame ([`api::MSG_REGS`]).
fn msg_of(f: &TrapFrame) -> Msg {
    Msg {
        label: f.rsi,
        words: [f.r10, f.r8, f.r9, f.r12, f.r13, f.r14],
    }
}

/// The message of a register call's frame `from` into frame `to`, as [`set_msg`] would
/// write it, without the copy between.
#[inline(always)]
fn copy_msg(to: &mut TrapFrame, from: &TrapFrame) {
    to.rsi = from.rsi;
    [to.r10, to.r8, to.r9, to.r12, to.r13, to.r14] =
        [from.r10, from.r8, from.r9, from.r12, from.r13, from.r14];
}

fn set_msg(f: &mut TrapFrame, m: &Msg) {
    f.rsi = m.label;
    [f.r10, f.r8, f.r9, f.r12, f.r13, f.r14] = m.words;
}

/// A request as `REPLY_RECV_REGS` returns it: message, sender; the handle is the call's
/// value.
fn set_received(f: &mut TrapFrame, r: &Received) {
    set_msg(f, &r.msg);
    f.rdi = r.sender.0;
    f.r15 = (r.sender_user << 32) | (r.sender_thread & 0xffff_ffff);
}

/// Write the result into `frame`, the marked system-call frame of a thread of this core
/// blocked in IPC, as `Sched::handoff` returned it inside the borrow that is still held.
#[inline(always)]
fn write_frame(frame: *mut TrapFrame, f: impl FnOnce(&mut TrapFrame)) {
    #[allow(unsafe_code)]
    // SAFETY: `frame` is the system-call frame at the top of the kernel stack of a thread
    // of this core blocked in IPC (`Sched::handoff` checked it); the thread is not running
    // and its stack lives while the thread exists, which the caller's borrow of the
    // scheduler's tables guarantees until it ends; the thread itself reads the frame again
    // only once resumed, after the address escaped (`escaped`).
    f(unsafe { &mut *frame });
}

/// CALL_REGS (`frame` holds endpoint and message; the answer goes back into it), made by
/// a thread acting as `user` (its flow's).
pub fn call(frame: &mut TrapFrame, user: UserId) -> Result<u64, Error> {
    let target = ResId(frame.rdi);
    if let Some(r) = call_direct(frame, target, user.0) {
        return r;
    }
    let msg = msg_of(frame);
    // The general path; on this core without an ICA this thread waits marked, so that the
    // answer may still come by a direct handoff.
    let (endpoint, via) = crate::fnid::target(target)?;
    if msg.label & api::MSG_ICA != 0 || super::route(endpoint)? != current_core() {
        let c = super::call(target, msg)?;
        return finish_call(frame, &c);
    }
    let (ticket, receiver) =
        fast::call_local(endpoint, msg, via, None).map_err(|e| crate::fnid::gone_if_via(e, via))?;
    frame.error_code = waits_answer(ticket);
    match receiver {
        Some(r) => super::hand_over(r, Block::Ipc(u64::MAX)),
        None => sched::block(Block::Ipc(u64::MAX)),
    }
    escaped(frame);
    answer(frame, ticket)
}

/// A `CALL_REGS` answered the general way: the reply's message into the frame.
fn finish_call(frame: &mut TrapFrame, c: &api::Completion) -> Result<u64, Error> {
    if c.status != 0 {
        return Err(Error::from_code(c.status));
    }
    set_msg(frame, &c.msg);
    Ok(c.value)
}

/// The direct handoff of `CALL_REGS`, if it applies (`None`: nothing was done).
fn call_direct(frame: &mut TrapFrame, target: ResId, user: u32) -> Option<Result<u64, Error>> {
    if frame.rsi & api::MSG_ICA != 0
        || target.core() != current_core()
        || target.kind() != Some(ResType::Endpoint)
    {
        return None;
    }
    let src: &TrapFrame = frame;
    let (ticket, direct) = sched::with(|s| {
        let thread = s.current_thread()?;
        let serial = s.current_process()?;
        // The caller's process: checks, and its ticket taken (given back if refused).
        let p = s.charged_current()?;
        if p.ipc.in_flight() >= MAX_IN_FLIGHT {
            return None;
        }
        let owner = fast::owner_checked(&mut p.ipc, target, true).ok()?;
        let me = p.pid;
        p.ipc.next_ticket += 1;
        let ticket = p.ipc.next_ticket;
        p.ipc.pending.insert(ticket, None);
        let caller = Caller {
            pid: me,
            ticket,
            thread,
        };
        // The server's: its receiver waiting on `target`, with nothing queued, gets the
        // request's handle.
        let taken = s
            .processes
            .get_mut(&owner.serial())
            .filter(|r| r.ended.is_none() && r.ipc.takeover.is_none())
            .filter(|r| r.ipc.requests.is_empty())
            .and_then(|r| match r.ipc.receiver {
                Some((rt, ep)) if ep == target => {
                    r.ipc.receiver = None;
                    r.ipc.next_handle += 1;
                    let handle = r.ipc.next_handle;
                    r.ipc.serving.insert(handle, caller);
                    Some((rt, handle, sched::NextRuns::of(owner.serial(), r)))
                }
                _ => None,
            });
        let handed = taken.and_then(|(rt, handle, runs)| {
            let direct = s.handoff(rt, Block::Ipc(u64::MAX), WAITS_RECV, runs)?;
            Some((handle, direct))
        });
        let Some((handle, direct)) = handed else {
            // Refused: give back what was taken (nothing else changed).
            if let Some((rt, handle, _)) = taken {
                if let Some(r) = s.processes.get_mut(&owner.serial()) {
                    r.ipc.serving.remove(&handle);
                    r.ipc.receiver = Some((rt, target));
                }
            }
            if let Some(p) = s.processes.get_mut(&serial) {
                p.ipc.pending.remove(&ticket);
            }
            return None;
        };
        note_request(me);
        // The request as `REPLY_RECV_REGS` returns it (`set_received`), straight from
        // frame to frame.
        write_frame(
            direct.frame(),
            #[inline(always)]
            |f| {
                f.rax = 0;
                f.rdx = handle;
                copy_msg(f, src);
                f.rdi = me.0;
                f.r15 = (u64::from(user) << 32) | u64::from(thread);
                f.error_code = HANDED;
            },
        );
        Some((ticket, direct))
    })?;
    frame.error_code = waits_answer(ticket);
    wait_marked(frame, direct);
    Some(answer(frame, ticket))
}

/// Switch (`direct`) with this thread's `frame` marked: until it runs again, another
/// thread may write the frame. The frame's address escapes before the switch, so the
/// compiler reads it again afterwards instead of trusting what it knew (`&mut` promises no
/// other writer while the reference lives; across this switch there is one, by design).
#[inline(always)]
fn wait_marked(frame: &mut TrapFrame, direct: sched::Handoff) {
    escaped(frame);
    sched::perform_handoff(direct);
    escaped(frame);
}

/// The frame's address escapes (see [`wait_marked`]): called around every wait marked.
#[inline(always)]
fn escaped(frame: &mut TrapFrame) {
    core::hint::black_box(frame as *mut TrapFrame);
}

/// The answer to `ticket` of a `CALL_REGS` that waited marked, once it runs again: in its
/// frame (a direct handoff), or, answered the general way (or its server gone), in its
/// result queue; else (woken for another result) it waits marked again.
fn answer(frame: &mut TrapFrame, ticket: u64) -> Result<u64, Error> {
    loop {
        if core::mem::replace(&mut frame.error_code, 0) == HANDED {
            return abi::syscall::decode(frame.rax, frame.rdx);
        }
        match super::collect(ticket, 0) {
            Ok((c, _)) => return finish_call(frame, &c),
            Err(Error::TimedOut) => {}
            Err(e) => return Err(e),
        }
        frame.error_code = waits_answer(ticket);
        sched::block(Block::Ipc(u64::MAX));
        escaped(frame);
    }
}

/// REPLY_RECV_REGS (`frame` holds handle, value, endpoint and message; the next request
/// goes back into it).
pub fn reply_recv(frame: &mut TrapFrame) -> Result<u64, Error> {
    let (handle, value, target) = (frame.rdi, frame.rdx, ResId(frame.r15));
    let (endpoint, _) = crate::fnid::target(target)?;
    if reply_direct(frame, handle, value, endpoint) {
        // Answered, then waited marked: handed a request, or woken to look.
        escaped(frame);
        return receive(frame, target, endpoint);
    }
    let msg = msg_of(frame);
    if endpoint.core() != current_core() {
        // Not this core's: the general path's answer (`Denied`, `WrongType`, ...).
        let r = super::reply_recv(handle, msg, value, target, u64::MAX)?;
        set_received(frame, &r);
        return Ok(r.request);
    }
    if handle != 0 {
        // Answer the general way (everything checked first), taking a request already
        // queued; with nothing queued it reports `TimedOut` at once, the answer given.
        match super::reply_recv(handle, msg, value, target, 0) {
            Ok(r) => {
                set_received(frame, &r);
                return Ok(r.request);
            }
            Err(Error::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
    receive(frame, target, endpoint)
}

/// The receiving half of `REPLY_RECV_REGS` on this core: take a queued request, else wait
/// marked as the endpoint's receiver (handed a request by a `CALL_REGS`, or woken to look
/// again). Whatever is not plain (a retirement, an error) is left to the general path.
fn receive(frame: &mut TrapFrame, target: ResId, endpoint: ResId) -> Result<u64, Error> {
    let mut owner = None;
    loop {
        if core::mem::replace(&mut frame.error_code, 0) == HANDED {
            return Ok(frame.rdx);
        }
        let owner = match owner {
            Some(o) => o,
            None => *owner.insert(crate::res::endpoint::owner(endpoint, false)?),
        };
        let r = match super::owner::take_request(owner, endpoint) {
            Ok(Some(r)) => r,
            Ok(None) => {
                // Noted as the receiver: wait marked.
                frame.error_code = WAITS_RECV;
                sched::block(Block::Recv(u64::MAX));
                escaped(frame);
                continue;
            }
            Err(_) => super::reply_recv(0, Msg::default(), 0, target, u64::MAX)?,
        };
        set_received(frame, &r);
        return Ok(r.request);
    }
}

/// The direct handoff of `REPLY_RECV_REGS`, if it applies: answer `handle` into its
/// caller's frame and switch to it, this thread waiting marked as the endpoint's receiver.
/// `false`: nothing was done (the general path checks and does it all).
fn reply_direct(frame: &mut TrapFrame, handle: u64, value: u64, endpoint: ResId) -> bool {
    if handle == 0
        || frame.rsi & api::MSG_ICA != 0
        || endpoint.core() != current_core()
        || endpoint.kind() != Some(ResType::Endpoint)
    {
        return false;
    }
    let src: &TrapFrame = frame;
    let direct = sched::with(|s| {
        let thread = s.current_thread()?;
        let serial = s.current_process()?;
        // The server's process: checks; the handle answered and this thread the receiver
        // (both put back if refused).
        let p = s.charged_current()?;
        if fast::owner_checked(&mut p.ipc, endpoint, false).ok()? != p.pid
            || p.ipc.takeover.is_some()
            || (!p.ipc.requests.is_empty() && p.ipc.requests.iter().any(|r| r.endpoint == endpoint))
        {
            return None;
        }
        let caller = p.ipc.serving.remove(&handle)?;
        if caller.pid.core() != current_core() {
            p.ipc.serving.insert(handle, caller);
            return None;
        }
        let before = p.ipc.receiver.replace((thread, endpoint));
        // The caller's: its ticket answered.
        let runs = s
            .processes
            .get_mut(&caller.pid.serial())
            .filter(|c| c.pid == caller.pid)
            .and_then(
                #[inline(always)]
                |c| {
                    c.ipc.pending.remove(&caller.ticket)?;
                    Some(sched::NextRuns::of(caller.pid.serial(), c))
                },
            );
        let handed = runs.and_then(|runs| {
            s.handoff(
                caller.thread,
                Block::Recv(u64::MAX),
                waits_answer(caller.ticket),
                runs,
            )
        });
        let Some(direct) = handed else {
            // Refused: put back what was taken.
            if runs.is_some() {
                if let Some(c) = s.processes.get_mut(&caller.pid.serial()) {
                    c.ipc.pending.insert(caller.ticket, None);
                }
            }
            if let Some(p) = s.processes.get_mut(&serial) {
                p.ipc.serving.insert(handle, caller);
                p.ipc.receiver = before;
            }
            return None;
        };
        // (The caller is of this core, checked above: no cross-core note.)
        note_reply_here();
        write_frame(
            direct.frame(),
            #[inline(always)]
            |f| {
                f.rax = 0;
                f.rdx = value;
                copy_msg(f, src);
                f.error_code = HANDED;
            },
        );
        Some(direct)
    });
    let Some(direct) = direct else {
        return false;
    };
    frame.error_code = WAITS_RECV;
    wait_marked(frame, direct);
    true
}
