//! One request path (DESIGN principle 3; P0's rendezvous, P1's split-phase calls, P3's
//! request and result queues).
//!
//! Every process has, in the kernel, a *request queue* (requests sent to the endpoints it
//! owns, waiting for `RECV`) and a *result queue* (its finished requests, waiting for
//! `COLLECT`), both in [`ProcIpc`]. A request is submitted with a ticket; what it does
//! depends on its target:
//!
//! - an endpoint (`SUBMIT_CALL`, `SUBMIT_SEND`), named by its id or by a function id the
//!   caller's core maps to it (`fnid::target`): the request is put in the owner's request
//!   queue, on the owner's core (through RPCC if that is another core; a full queue is
//!   `Busy`: back-pressure, never a dropped request). The owner takes it with `RECV` and
//!   answers with `REPLY`, which puts the result in the caller's result queue, again
//!   through RPCC if the caller lives elsewhere.
//! - a resource operation: done at once on this core; on another core it is an RPCC request
//!   whose answer lands in the result queue when it comes, so many can be in flight.
//! - a timed operation: finishes after a given time (P1's task B).
//!
//! `CALL` is submit-then-collect; `SEND` completes once queued; `REPLY_RECV` is `REPLY`
//! then `RECV` in one entry.
//!
//! The rendezvous fast path (seL4's direct switch): a thread waiting in `RECV` with nothing
//! queued is noted as its endpoint's receiver (`ProcIpc::receiver`). A `CALL` from the same
//! core to that endpoint queues its request and hands the core straight to the receiver
//! ([`hand_over`], `sched::switch_to`) instead of waking it through the run queue; a
//! `REPLY_RECV` whose caller waits on this core, with no request queued, hands the core
//! straight back. Whatever the path, the woken thread looks at its queue again, so a
//! refused direct switch (a higher-priority thread ready, a stop pending) falls back to an
//! ordinary wake with the same result.
//!
//! A request or reply may carry an ICA, a vregion passed without a copy ([`ica`]): it is
//! mapped in the receiver when the request is queued ([`enqueue`], `fast::call_local`) or
//! the answer reaches the caller (`complete_passing`).
//!
//! If a target goes away
//! (the owner ends, the endpoint is closed) its callers get `Error::Gone`. What a process
//! leaves when it ends (queued and unanswered requests, results, timers) goes with it.

#![deny(unsafe_code)]

pub mod direct;
mod fast;
mod ica;
mod owner;
pub mod restart;
pub mod takeover;

use owner::{answer, hand_over};
pub use owner::{endpoint_closed, enqueue, process_ended, recv, reply, reply_error, reply_recv};

use crate::percore::current_core;
use crate::proc::sched;
use crate::rpcc::{self, Op, Out};
use abi::ipc::{self as api, Completion, Msg, Received, Submission};
use abi::res::ResId;
use abi::{Error, Pid};
use alloc::boxed::Box;
use alloc::collections::{BTreeSet, VecDeque};
use alloc::vec::Vec;
pub use ica::Ica;

/// A one-way message from the kernel itself (sender pid 0) to `endpoint` of this core: a
/// device's interrupt for its user-mode driver (`res/device.rs`). `Busy` if the owner's
/// queue is full, `Gone` if it ended.
pub fn kernel_send(endpoint: ResId, msg: Msg) -> Result<(), Error> {
    enqueue(Incoming {
        endpoint,
        kind: api::SUBMIT_SEND,
        sender: Pid(0),
        sender_thread: 0,
        sender_user: 0,
        caller: None,
        msg,
        via: crate::fnid::Via::NONE,
        ica: None,
    })
}

/// Most requests one process may have in flight (submitted and not collected).
pub const MAX_IN_FLIGHT: usize = 256;
/// Most requests waiting in one process's request queue.
pub const MAX_QUEUED: usize = 64;

/// Who waits for the answer to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub pid: Pid,
    pub ticket: u64,
    /// The thread that made the request (the one a same-core reply may switch straight to;
    /// thread ids of a core are never reused).
    pub thread: u32,
}

/// A request in an owner's request queue.
#[derive(Clone, Debug)]
pub struct Incoming {
    pub endpoint: ResId,
    pub kind: u64,
    pub sender: Pid,
    pub sender_thread: u32,
    /// The user the sender acted as (`Received::sender_user`).
    pub sender_user: u32,
    /// Whom to answer (`None` for a one-way send).
    pub caller: Option<Caller>,
    pub msg: Msg,
    /// What the sender named: the endpoint, or a function id (counted when taken). Kept in
    /// 32 bits, beside `sender_thread`: the record does not grow.
    pub via: crate::fnid::Via,
    /// The ICA it carries (mapped in the owner once queued, at `msg`'s `ICA_AT_WORD`).
    pub ica: Option<Box<Ica>>,
}

/// A finished request, and for a read its bytes (copied out at collect).
struct Done {
    completion: Completion,
    bytes: Option<(u64, Vec<u8>)>,
}

/// A small map kept as a vector: the few entries in flight are found by a short scan, and
/// once warm it allocates nothing (a `BTreeMap` allocates a node each time it goes from empty
/// to one entry, which is every request on a quiet process).
struct Slots<V>(Vec<(u64, V)>);

impl<V> Default for Slots<V> {
    fn default() -> Self {
        Slots(Vec::new())
    }
}

impl<V> Slots<V> {
    #[inline(always)]
    fn insert(&mut self, key: u64, value: V) {
        self.0.push((key, value));
    }
    #[inline(always)]
    fn remove(&mut self, key: &u64) -> Option<V> {
        // The newest first: a rendezvous answers the request it was just given.
        if self.0.last().is_some_and(|(k, _)| k == key) {
            return self.0.pop().map(|(_, v)| v);
        }
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.swap_remove(i).1)
    }
    fn contains_key(&self, key: &u64) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn into_values(self) -> impl Iterator<Item = V> {
        self.0.into_iter().map(|(_, v)| v)
    }
}

/// One process's queues.
#[derive(Default)]
pub struct ProcIpc {
    next_ticket: u64,
    /// Submitted, not finished; for a read, where its bytes go.
    pending: Slots<Option<u64>>,
    results: VecDeque<Done>,
    requests: VecDeque<Incoming>,
    /// Requests taken with RECV and not answered yet: handle -> caller.
    serving: Slots<Caller>,
    next_handle: u64,
    /// Timed operations: (deadline ns, ticket).
    timers: BTreeSet<(u64, u64)>,
    /// A thread blocked in `RECV` (or `REPLY_RECV`) on an endpoint with nothing queued: a
    /// `CALL` from this core may hand it the core directly (the rendezvous fast path).
    receiver: Option<(u32, ResId)>,
    /// The submission and completion rings, once set up (`ring.rs`).
    pub ring: Option<crate::ring::Ring>,
    /// The last endpoint check passed to receive (`[0]`) and to send (`[1]`): the fast
    /// path's calls skip the resource lookup while it holds (`fast::owner_checked`).
    checks: [Option<fast::EndpointCheck>; 2],
    /// Set while the process is being retired by a live replacement (`takeover`).
    takeover: Option<Box<takeover::State>>,
    /// Set while the process serves a function that restarts after a crash (`restart`).
    restart: Option<Box<restart::Image>>,
}

impl ProcIpc {
    /// `thread` no longer waits to receive: if it was noted as the receiver, it is not.
    fn forget_receiver(&mut self, thread: Option<u32>) {
        if self.receiver.is_some_and(|(t, _)| Some(t) == thread) {
            self.receiver = None;
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.results.len() + self.ring.as_ref().map_or(0, |r| r.waiting.len())
    }

    /// Requests and results held (0 once everything is collected and answered; a ring
    /// counts as one).
    pub fn held(&self) -> usize {
        self.in_flight()
            + self.requests.len()
            + self.serving.len()
            + self.timers.len()
            + usize::from(self.ring.is_some())
    }
}

/// Count a request taken by a server of this core, sent by `sender` (P0's IPC count;
/// `CoreStats::ipc_messages`, reported by `CORES`).
#[inline]
fn note_request(sender: Pid) {
    use core::sync::atomic::Ordering::Relaxed;
    let counts = &crate::percore::this().stats.ipc_messages;
    counts[abi::IPC_REQUESTS].fetch_add(1, Relaxed);
    if sender.core() != current_core() {
        counts[abi::IPC_REQUESTS_CROSS].fetch_add(1, Relaxed);
    }
}

/// Count an answer `msg` given on this core to `caller`; across cores, note whether it
/// carries reply data or the return value alone (P0 Table 4). Reply data is a message word
/// other than 0 (beside an ICA's own two), or an ICA the answering server could write in
/// (`writable_ica`): one it held read-only, lent so by its caller (`MSG_ICA_READ_ONLY`),
/// comes back as it went.
#[inline]
fn note_reply(caller: Pid, msg: &Msg, writable_ica: bool) {
    note_reply_here();
    if caller.core() != current_core() {
        note_reply_cross(msg, writable_ica);
    }
}

/// Count an answer given on this core: all [`note_reply`] counts for a caller known to be
/// of this core (P0 Table 4 looks at the data of answers across cores only).
#[inline]
fn note_reply_here() {
    crate::percore::this().stats.ipc_messages[abi::IPC_REPLIES]
        .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
}

/// [`note_reply`] across cores: whether the answer carries reply data (P0 Table 4).
#[cold]
#[inline(never)]
fn note_reply_cross(msg: &Msg, writable_ica: bool) {
    use core::sync::atomic::Ordering::Relaxed;
    let counts = &crate::percore::this().stats.ipc_messages;
    counts[abi::IPC_REPLIES_CROSS].fetch_add(1, Relaxed);
    let ica = ica::carries(msg);
    let ica_word = |i| ica && (i == abi::ipc::ICA_AT_WORD || i == abi::ipc::ICA_ID_WORD);
    let no_words = msg
        .words
        .iter()
        .enumerate()
        .all(|(i, &w)| w == 0 || ica_word(i));
    if !writable_ica && no_words {
        counts[abi::IPC_REPLIES_CROSS_BARE].fetch_add(1, Relaxed);
    }
}

/// Run `f` on the running process's queues.
fn with_mine<R>(f: impl FnOnce(&mut ProcIpc, Pid) -> Result<R, Error>) -> Result<R, Error> {
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        let pid = p.pid;
        f(&mut p.ipc, pid)
    })
}

/// Put a finished request in process `pid`'s result queue (this core) and wake it.
pub fn complete(pid: Pid, completion: Completion, bytes: Option<Vec<u8>>) {
    if pid.core() == current_core() {
        sched::with(|s| complete_in(s, pid, completion, bytes));
    }
}

fn complete_in(s: &mut sched::Sched, pid: Pid, completion: Completion, bytes: Option<Vec<u8>>) {
    complete_in_but(s, pid, completion, bytes, true);
}

/// [`complete_in_but`] for an answer that passes `ica` (if any): first mapped in `pid` (if it
/// cannot be, the answer comes without it and the vregion is attached nowhere).
#[inline]
fn complete_passing(
    s: &mut sched::Sched,
    pid: Pid,
    mut completion: Completion,
    wake: bool,
    ica: Option<Box<Ica>>,
) -> bool {
    if let Some(ica) = ica {
        ica::land_answer(s, pid, &mut completion, ica);
    }
    complete_in_but(s, pid, completion, None, wake)
}

/// Put a finished request in process `pid`'s result queue and, if `wake`, wake its threads
/// waiting for it (not when the caller switches to the one that takes it). Returns whether
/// the result was queued (`false`: the process or the request is gone).
fn complete_in_but(
    s: &mut sched::Sched,
    pid: Pid,
    completion: Completion,
    bytes: Option<Vec<u8>>,
    wake: bool,
) -> bool {
    let Some(p) = s.processes.get_mut(&pid.serial()) else {
        return false; // it ended: its answers go with it
    };
    let Some(dest) = p.ipc.pending.remove(&completion.ticket) else {
        return false;
    };
    let bytes = bytes.and_then(|b| dest.map(|at| (at, b)));
    if completion.ticket & crate::ring::RING_TICKET != 0 {
        if let Some(ring) = p.ipc.ring.as_mut() {
            crate::ring::complete(ring, completion, bytes);
        }
    } else {
        p.ipc.results.push_back(Done { completion, bytes });
    }
    // A thread the caller switches to takes the result itself: the others need not look.
    if wake {
        wake_waiting_threads(s, pid.serial(), Waits::Answer);
    }
    true
}

/// What a thread blocked in the request path waits for, so that an event wakes only the
/// threads it concerns (a result does not wake a server waiting in `RECV`: that would cost
/// two context switches for nothing).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waits {
    /// A result: COLLECT, CALL, ENTER (`Block::Ipc`).
    Answer,
    /// A request: RECV, REPLY_RECV (`Block::Recv`).
    Request,
    /// Either (a retirement's notice: a receiver takes it, a collector must look too).
    Any,
}

/// Is thread `t` blocked in the request path waiting for `what`?
fn waits_for(s: &sched::Sched, t: u32, what: Waits) -> bool {
    use sched::{Block, ThreadState::Blocked};
    match s.state_of(t) {
        Some(Blocked(Block::Ipc(_))) => what != Waits::Request,
        Some(Blocked(Block::Recv(_))) => what != Waits::Answer,
        _ => false,
    }
}

/// Wake the threads of process `serial` waiting for `what` (without copying its thread
/// list).
pub(crate) fn wake_waiting_threads(s: &mut sched::Sched, serial: u32, what: Waits) {
    let mut i = 0;
    while let Some(t) = s
        .processes
        .get(&serial)
        .and_then(|p| p.threads.get(i).copied())
    {
        if waits_for(s, t, what) {
            note_wake();
            s.wake(t);
        }
        i += 1;
    }
}

fn note_wake() {
    let stats = &crate::percore::this().stats;
    stats
        .ipc_wakes
        .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
}

/// Wake the threads (of one process) waiting for an answer: each looks again.
fn wake_if_waiting(s: &mut sched::Sched, threads: &[u32]) {
    for &thread in threads {
        if waits_for(s, thread, Waits::Answer) {
            note_wake();
            s.wake(thread);
        }
    }
}

fn completion_of(ticket: u64, r: Result<Out, Error>) -> (Completion, Option<Vec<u8>>) {
    let mut c = Completion {
        ticket,
        ..Completion::default()
    };
    let mut bytes = None;
    match r {
        Ok(Out::Value(v)) => c.value = v,
        Ok(Out::Opened(id, _)) => c.value = id.0,
        Ok(Out::Bytes(b)) => {
            c.value = b.len() as u64;
            bytes = Some(b);
        }
        Ok(Out::Unit) => {}
        Ok(_) => c.status = Error::Unknown as u64,
        Err(e) => c.status = e as u64,
    }
    (c, bytes)
}

/// Does process `serial` of this core still wait for the answer to `ticket`? (It ended:
/// its answers go nowhere, and `rpcc::orphan` does what they leave undone.)
pub fn awaits(serial: u32, ticket: u64) -> bool {
    sched::with(|s| {
        s.processes
            .get(&serial)
            .is_some_and(|p| p.ended.is_none() && p.ipc.pending.contains_key(&ticket))
    })
}

/// An RPCC answer to a request process `serial` submitted (ticket) arrived.
pub fn rpcc_answer(serial: u32, ticket: u64, r: Result<Out, Error>) {
    let (c, bytes) = completion_of(ticket, r);
    complete(crate::machine::pid(current_core(), serial), c, bytes);
}

/// Deliver a completion to `caller`, wherever it lives (`s`: this core's scheduler, if the
/// caller holds it), with the ICA its reply passes.
fn deliver(
    s: Option<&mut sched::Sched>,
    caller: Caller,
    completion: Completion,
    ica: Option<Box<Ica>>,
) {
    if caller.pid.core() == current_core() {
        match (s, ica) {
            (Some(s), None) => complete_in(s, caller.pid, completion, None),
            (None, None) => complete(caller.pid, completion, None),
            (Some(s), ica) => {
                complete_passing(s, caller.pid, completion, true, ica);
            }
            (None, ica) => delivered(caller.pid, completion, ica),
        }
    } else if rpcc::reachable(caller.pid.core()) {
        rpcc::notice(
            caller.pid.core(),
            Op::Deliver {
                pid: caller.pid,
                completion,
                ica,
            },
        );
    } else if let Some(ica) = ica {
        ica::lost(ica.region);
    }
}

/// Tell a caller its target went away.
fn fail(s: Option<&mut sched::Sched>, caller: Caller, error: Error) {
    deliver(
        s,
        caller,
        Completion {
            ticket: caller.ticket,
            status: error as u64,
            ..Completion::default()
        },
        None,
    );
}

/// A request sent to another core (`rpcc::Op::Enqueue`) that was not queued there, whose
/// sender's thread is gone (`rpcc::orphan`): its caller gets `Gone` and its ICA, taken
/// from the sender, is attached nowhere.
pub(crate) fn not_queued(incoming: Incoming) {
    if let Some(ica) = incoming.ica {
        ica::lost(ica.region);
    }
    if let Some(caller) = incoming.caller {
        fail(None, caller, Error::Gone);
    }
}

// ---- the caller's side ------------------------------------------------------------------------

/// CALL: send `msg` to `target` (an endpoint, or a function id standing for its server's
/// endpoint: `fnid::target`) and wait for the answer (rendezvous). If the endpoint's
/// owner waits in RECV on this core, the request is queued for it and the core goes
/// straight to it (the fast path: no run-queue round trip); otherwise the request takes
/// the ordinary way (queued, or through RPCC) and the caller waits in COLLECT.
pub fn call(target: ResId, msg: Msg) -> Result<Completion, Error> {
    // A function id stands for its server's endpoint now.
    let (endpoint, via) = crate::fnid::target(target)?;
    // Two copies: the one without an ICA has none of its code (the fast path).
    if ica::carries(&msg) {
        call_as::<true>(target, endpoint, via, msg)
    } else {
        call_as::<false>(target, endpoint, via, msg)
    }
}

/// [`call`], passing the ICA `msg` carries if `PASS`.
#[inline(always)]
fn call_as<const PASS: bool>(
    target: ResId,
    endpoint: ResId,
    via: crate::fnid::Via,
    msg: Msg,
) -> Result<Completion, Error> {
    let core = route(endpoint)?;
    if core != current_core() {
        let sub = Submission {
            kind: api::SUBMIT_CALL,
            target: target.0,
            msg,
            ..Submission::default()
        };
        let ticket = submit(&sub, None)?;
        return collect(ticket, u64::MAX).map(|(c, _)| c);
    }
    let taken = if PASS { ica::take(&msg)? } else { None };
    let (taken, ica) = taken.unzip();
    let (ticket, receiver) = match fast::call_local(endpoint, msg, via, ica) {
        Ok(called) => called,
        Err(e) => {
            if let Some(t) = taken {
                ica::give_back(t);
            }
            return Err(crate::fnid::gone_if_via(e, via));
        }
    };
    if let Some(receiver) = receiver {
        hand_over(receiver, sched::Block::Ipc(u64::MAX));
        // Switched back, most often by the receiver's REPLY_RECV with the answer.
        if let Some(c) = fast::first_answer(ticket) {
            return Ok(c);
        }
    }
    collect(ticket, u64::MAX).map(|(c, _)| c)
}

/// SUBMIT: start `sub`; returns its ticket. The `bytes_in` of a write or open were copied by
/// the caller.
pub fn submit(sub: &Submission, bytes_in: Option<(Vec<u8>, Vec<u8>)>) -> Result<u64, Error> {
    submit_for(sub, bytes_in, None)
}

/// Start `sub` for the caller's ring: its completion, carrying `user_data`, goes to the
/// completion ring (`ring::complete`), not to the result queue.
pub fn submit_ring(
    sub: &Submission,
    bytes_in: Option<(Vec<u8>, Vec<u8>)>,
    user_data: u64,
) -> Result<(), Error> {
    submit_for(sub, bytes_in, Some(user_data)).map(drop)
}

fn submit_for(
    sub: &Submission,
    bytes_in: Option<(Vec<u8>, Vec<u8>)>,
    ring: Option<u64>,
) -> Result<u64, Error> {
    let read_dest = (sub.kind == api::SUBMIT_RES_READ).then_some(sub.args[0]);
    let (ticket, me) = with_mine(|ipc, me| {
        if ipc.in_flight() >= MAX_IN_FLIGHT {
            return Err(Error::Busy);
        }
        ipc.next_ticket += 1;
        let mut ticket = ipc.next_ticket;
        if let Some(user_data) = ring {
            ticket |= crate::ring::RING_TICKET;
            let r = ipc.ring.as_mut().ok_or(Error::NoSuchResource)?;
            r.tickets.push((ticket, user_data));
        }
        ipc.pending.insert(ticket, read_dest);
        Ok((ticket, me))
    })?;
    let started = start(sub, ticket, me, bytes_in);
    if let Err(e) = started {
        let _ = with_mine(|ipc, _| {
            ipc.pending.remove(&ticket);
            if let Some(r) = ipc.ring.as_mut() {
                r.tickets.retain(|&(t, _)| t != ticket);
            }
            Ok(())
        });
        return Err(e);
    }
    Ok(ticket)
}

fn start(
    sub: &Submission,
    ticket: u64,
    me: Pid,
    bytes_in: Option<(Vec<u8>, Vec<u8>)>,
) -> Result<(), Error> {
    let done = |r: Result<Out, Error>| {
        let (c, bytes) = completion_of(ticket, r);
        complete(me, c, bytes);
        Ok(())
    };
    let target = ResId(sub.target);
    match sub.kind {
        api::SUBMIT_NOP => done(Ok(Out::Unit)),
        api::SUBMIT_TIMER => with_mine(|ipc, _| {
            let at = crate::time::now_ns().saturating_add(sub.args[0]);
            ipc.timers.insert((at, ticket));
            crate::time::arm(at);
            Ok(())
        }),
        api::SUBMIT_CALL | api::SUBMIT_SEND => {
            let call = sub.kind == api::SUBMIT_CALL;
            // A function id stands for its server's endpoint now.
            let (target, via) = crate::fnid::target(target)?;
            let core = route(target)?;
            let (taken, ica) = ica::take(&sub.msg)?.unzip();
            let thread = sched::with(|s| s.current_thread()).unwrap_or(0);
            let incoming = Incoming {
                endpoint: target,
                kind: sub.kind,
                sender: me,
                sender_thread: thread,
                sender_user: crate::proc::current_user().0,
                caller: call.then_some(Caller {
                    pid: me,
                    ticket,
                    thread,
                }),
                msg: sub.msg,
                via,
                ica,
            };
            let queued = if core == current_core() {
                enqueue(incoming)
            } else {
                rpcc::call(core, Op::Enqueue(incoming)).map(drop)
            };
            if let Err(e) = queued {
                if let Some(t) = taken {
                    ica::give_back(t);
                }
                return Err(crate::fnid::gone_if_via(e, via));
            }
            if !call {
                done(Ok(Out::Unit))?;
            }
            Ok(())
        }
        kind => {
            let op = resource_op(kind, sub, bytes_in)?;
            let core = match &op {
                Op::ResOpen { name, .. } => {
                    let parsed = abi::res::ResName::parse(name).map_err(|_| Error::BadName)?;
                    let core = parsed.core(current_core());
                    // A process made by OPEN is the opener's child, counted against its
                    // limit as `RES_OPEN`'s is (a regression: this path skipped the
                    // count). One on another core would be a child whose pid the
                    // completion does not carry back to be noted: refused.
                    if parsed.kind == abi::res::ResType::Process {
                        if core != current_core() {
                            return Err(Error::NotSupported);
                        }
                        // (Made here at once: nothing runs between the check and it.)
                        crate::proc::may_add_child().map(drop)?;
                    }
                    core
                }
                _ => route(target)?,
            };
            if core == current_core() {
                done(rpcc::ops::perform(&op))
            } else if core < crate::smp::cores_planned() {
                rpcc::submit_for(core, op, me.serial(), ticket)
            } else {
                Err(Error::BadName)
            }
        }
    }
}

fn route(id: ResId) -> Result<usize, Error> {
    if id.machine() != crate::machine::this() || id.core() >= crate::smp::cores_planned() {
        return Err(Error::NoSuchResource);
    }
    Ok(id.core())
}

/// The RPCC operation a resource submission stands for.
fn resource_op(
    kind: u64,
    sub: &Submission,
    bytes_in: Option<(Vec<u8>, Vec<u8>)>,
) -> Result<Op, Error> {
    let id = ResId(sub.target);
    Ok(match kind {
        api::SUBMIT_RES_CLOSE => Op::ResClose(id),
        api::SUBMIT_RES_CONTROL => Op::ResControl {
            id,
            cmd: sub.args[0],
            a: sub.args[1],
            b: sub.args[2],
        },
        api::SUBMIT_RES_READ => Op::ResRead {
            id,
            len: sub.args[1],
            arg: sub.args[2],
        },
        api::SUBMIT_RES_WRITE => Op::ResWrite {
            id,
            data: bytes_in.map(|b| b.0).unwrap_or_default(),
            arg: sub.args[2],
        },
        api::SUBMIT_RES_OPEN => {
            let (name, args) = bytes_in.ok_or(Error::InvalidArgument)?;
            Op::ResOpen {
                name: alloc::string::String::from_utf8(name).map_err(|_| Error::BadName)?,
                args,
                rights: abi::res::Rights(
                    u8::try_from(sub.msg.label).map_err(|_| Error::InvalidArgument)?,
                ),
            }
        }
        _ => return Err(Error::InvalidArgument),
    })
}

/// Bytes a finished read brings, and the user address they go to.
pub type ReadBytes = Option<(u64, Vec<u8>)>;

/// COLLECT: a finished request (`ticket`, or any if `api::ANY`), waiting at most
/// `timeout_ns`. Returns it and, for a read, where its bytes go.
pub fn collect(ticket: u64, timeout_ns: u64) -> Result<(Completion, ReadBytes), Error> {
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    loop {
        let got = with_mine(|ipc, _| {
            let at = ipc
                .results
                .iter()
                .position(|d| ticket == api::ANY || d.completion.ticket == ticket);
            if let Some(i) = at {
                let d = ipc.results.remove(i).ok_or(Error::Unknown)?;
                return Ok(Some((d.completion, d.bytes)));
            }
            let known = if ticket == api::ANY {
                // Ring requests complete into the ring, never here.
                ipc.pending
                    .0
                    .iter()
                    .any(|(t, _)| t & crate::ring::RING_TICKET == 0)
            } else {
                // A ring request's ticket is never collected (its completion goes to the
                // ring): unknown here.
                ticket & crate::ring::RING_TICKET == 0 && ipc.pending.contains_key(&ticket)
            };
            if known {
                Ok(None)
            } else {
                Err(Error::NoSuchResource)
            }
        })?;
        if let Some(done) = got {
            return Ok(done);
        }
        if crate::time::now_ns() >= deadline {
            return Err(Error::TimedOut);
        }
        sched::block(sched::Block::Ipc(deadline));
    }
}

/// The timer: finish due timed operations and wake whoever waits for them. Returns the
/// earliest timed operation still pending (`u64::MAX`: none).
pub fn on_timer(s: &mut sched::Sched, now: u64) -> u64 {
    let mut woken = Vec::new();
    let mut earliest = u64::MAX;
    for p in s.processes.values_mut() {
        while let Some(&(at, ticket)) = p.ipc.timers.first() {
            if at > now {
                earliest = earliest.min(at);
                break;
            }
            p.ipc.timers.pop_first();
            if p.ipc.pending.remove(&ticket).is_none() {
                continue;
            }
            crate::time::note_due(at);
            if let Some(ring) = p
                .ipc
                .ring
                .as_mut()
                .filter(|_| ticket & crate::ring::RING_TICKET != 0)
            {
                let c = Completion {
                    ticket,
                    ..Completion::default()
                };
                crate::ring::complete(ring, c, None);
                woken.extend(p.threads.iter().copied());
            } else {
                p.ipc.results.push_back(Done {
                    completion: Completion {
                        ticket,
                        ..Completion::default()
                    },
                    bytes: None,
                });
                woken.extend(p.threads.iter().copied());
            }
        }
    }
    wake_if_waiting(s, &woken);
    earliest
}

/// Send a completion that belongs to a process of this core (`Op::Deliver`), with the ICA
/// its reply passes.
pub fn delivered(pid: Pid, completion: Completion, ica: Option<Box<Ica>>) {
    if pid.core() == current_core() {
        sched::with(|s| complete_passing(s, pid, completion, true, ica));
    } else if let Some(ica) = ica {
        ica::lost(ica.region);
    }
}
