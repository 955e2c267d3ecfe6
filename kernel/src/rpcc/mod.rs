//! Inter-core RPCC: how one core asks another to do work on its resources (P4, Multicore
//! Tender's RPCC between per-core kernels).
//!
//! Musubi's cores share no kernel tables. When a system call on core A names a resource,
//! process or core that belongs to core B, A's kernel does not reach into B's tables: it
//! sends B a *request* and the calling thread sleeps until the *reply* arrives. On B, the
//! RPCC *daemon* for source core A ([`agent::Daemon`], one per source core on every core,
//! P4 Figure 2) takes the request from its ring and hands it to an *agent*, a kernel thread
//! of B that performs the operation exactly as a local call on B would, with the
//! requester's flow id and user (RCC through RPCC, P4 section 3.2), then sends the reply.
//!
//! # Transport
//! One `urpc` ring per ordered pair of cores (`libs/urpc`: 64-byte slots, the receiver polls
//! one cache line, no shared head or tail). A message is small ([`Msg`]): its kind, a tag,
//! and for a request the address of the [`Request`] record, which stays in the requester's
//! kernel heap and is shared through the direct map (P4: "copy into shared kernel data").
//! The requester keeps the record in its table of outstanding requests until the reply
//! comes, so a requester killed while waiting leaves nothing dangling: the reply finds the
//! record, sees that nobody waits, and frees it.
//!
//! A full ring never drops or overwrites a message: the message waits in the sender's
//! per-destination *outbox* (its requester keeps sleeping: back-pressure) and is sent, in
//! order, when the receiver has made room.
//!
//! # Notification (`rpcc.notify=`)
//! - `ipi`: an IPI for every message, as in P4.
//! - `poll`: no IPI; an idle core spins looking at its rings, a busy one looks at every
//!   timer tick.
//! - `hybrid` (default): an idle core spins looking at its rings for [`HYBRID_SPIN_NS`]
//!   before it halts; a sender sends an IPI only if the receiver is not spinning.
//!
//! Every core also looks at its rings at every tick, so no message waits forever. In the
//! fast design the reply to a notice (a request nobody waits for: its reply only gives the
//! record back) goes without an IPI in every mode: it waits for the requester's next look.
//!
//! # The fast design (`rpcc.agents=inline`, `rpcc.wait=halt`)
//! The daemon performs short requests itself and a waiting thread halts in place instead
//! of switching away ([`fast`]); P4's agents stay the default.

pub mod agent;
pub mod fast;
pub mod ops;
mod orphan;
mod table;

use crate::percore::{self, current_core, CoreCell};
use crate::proc::sched;
use crate::{smp, structure, time};
use abi::{Error, MAX_CORES};
pub use agent::{answer_deferred, defer_current, Deferred};
pub(crate) use agent::{begin_work, end_work};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
pub use ops::{Op, Out};
use orphan::drop_answer;
pub use orphan::forget_waiter;

/// Slots in each ring (a power of two).
pub const RING_SLOTS: usize = 16;
/// Request records a core keeps for reuse.
const SPARE_RECORDS: usize = 4;
/// How long an idle core keeps looking at its rings before halting (hybrid mode).
pub const HYBRID_SPIN_NS: u64 = 200_000;

type Ring = urpc::Ring<RING_SLOTS, Msg>;
type Sender = urpc::Sender<'static, RING_SLOTS, Msg>;
type Receiver = urpc::Receiver<'static, RING_SLOTS, Msg>;

/// What travels in a ring slot.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Msg {
    kind: u64,
    /// The requester's number for the request (unique per requester core).
    tag: u64,
    /// For a request: the address of its [`Request`] record.
    request: u64,
}

const KIND_REQUEST: u64 = 1;
const KIND_REPLY: u64 = 2;

/// Who is asking: what travels with a request so the owner can check rights (P4 3.2).
#[derive(Clone, Copy, Debug)]
pub struct FlowInfo {
    /// The requester's flow id.
    pub id: u64,
    pub machine: u16,
    pub core: u16,
    pub user: abi::res::UserId,
    /// The requesting process, if a process asked.
    pub pid: Option<abi::Pid>,
    pub priority: abi::Priority,
}

/// A request record: written by the requester, performed by an agent on the owner core,
/// which writes the reply into it.
pub struct Request {
    pub op: Op,
    pub flow: FlowInfo,
    /// A notice in the fast design: nobody waits for the answer, which only gives the
    /// record back, so the owner sends its reply without an IPI (the requester takes it at
    /// its next look at the rings: another message's IPI, or the tick at the latest).
    quiet: bool,
    reply: UnsafeCell<Option<Result<Out, Error>>>,
}

// SAFETY: a request is touched by one core at a time: the requester until it sends the
// message, the agent until it sends the reply, the requester again after the reply; each
// hand-over is a release/acquire pair in the ring.
unsafe impl Sync for Request {}
// SAFETY: as for `Sync`: one core at a time owns the record, each hand-over is a
// release/acquire pair, and memory freed on the wrong core goes home (`mm/remote.rs`).
unsafe impl Send for Request {}

impl Request {
    /// The agent's answer (on the owner core, before the reply message is sent).
    pub fn set_reply(&self, r: Result<Out, Error>) {
        // SAFETY: only the agent performing this request touches it now (see above).
        unsafe { *self.reply.get() = Some(r) };
    }
}

/// Who waits for an outstanding request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Waiter {
    /// A thread, sleeping in `Block::Rpcc(tag)`.
    Thread(u32),
    /// The idle context (kernel tests), polling.
    Idle,
    /// Nobody: a notice whose answer is not needed.
    Nobody,
    /// A process of this core that submitted it (serial) and its ticket: the answer goes
    /// to its result queue (`ipc`).
    Ticket(u32, u64),
}

struct Outstanding {
    request: Box<Request>,
    waiter: Waiter,
    done: bool,
}

/// One core's RPCC state: touched by that core only.
pub struct State {
    senders: Vec<Option<Sender>>,
    receivers: Vec<Option<Receiver>>,
    /// Messages waiting for room in their ring, per destination.
    outbox: Vec<VecDeque<Msg>>,
    /// Messages in all outboxes (so a look at them costs nothing when there are none).
    outboxed: usize,
    outstanding: table::Table,
    next_tag: u64,
    pub daemons: Vec<agent::Daemon>,
    /// Request records whose answers were taken, kept for the next requests (at most
    /// [`SPARE_RECORDS`]): a remote operation allocates no record of its own.
    // Boxed: a record's address travels in the rings, so it must not move with the vector.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Request>>,
    /// When this core last handled a message (hybrid spinning).
    last_activity: u64,
    /// The requests this core's agents are performing, one per agent (`agent::Working`):
    /// an agent may block in the middle of one (a nested RPCC call), and other agents and
    /// threads of the core run meanwhile.
    pub working: Vec<agent::Working>,
    /// Answers of removed threads to settle outside the scheduler's borrow ([`orphan`]).
    orphans: Vec<orphan::Orphan>,
}

impl State {
    pub const fn new() -> Self {
        State {
            senders: Vec::new(),
            receivers: Vec::new(),
            outbox: Vec::new(),
            outboxed: 0,
            outstanding: table::Table::new(),
            next_tag: 1,
            daemons: Vec::new(),
            spare: Vec::new(),
            last_activity: 0,
            working: Vec::new(),
            orphans: Vec::new(),
        }
    }
}

/// What other cores may see of a core's RPCC: its inbox rings and its counters.
pub struct CoreRpcc {
    /// Ring from each source core to this one (allocated by this core at start-up).
    inbox: [AtomicPtr<Ring>; MAX_CORES],
    /// This core is spinning on its rings (hybrid mode: no IPI needed).
    polling: AtomicBool,
    pub state: CoreCell<State>,
    pub stats: Stats,
}

/// Counters (published with relaxed atomics; read by `RPCC_STATS` on any core).
pub struct Stats {
    pub agents_live: AtomicU32,
    pub agents_created: AtomicU64,
    pub agents_destroyed: AtomicU64,
    pub reuse_hits: AtomicU64,
    pub served: AtomicU64,
    pub ring_full: AtomicU64,
    pub ipis_sent: AtomicU64,
    pub outstanding: AtomicU64,
    pub sent_to: [AtomicU64; MAX_CORES],
    pub inline_served: AtomicU64,
    pub halted_waits: AtomicU64,
}

impl CoreRpcc {
    pub const fn new() -> Self {
        CoreRpcc {
            inbox: [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_CORES],
            polling: AtomicBool::new(false),
            state: CoreCell::new(State::new()),
            stats: Stats {
                agents_live: AtomicU32::new(0),
                agents_created: AtomicU64::new(0),
                agents_destroyed: AtomicU64::new(0),
                reuse_hits: AtomicU64::new(0),
                served: AtomicU64::new(0),
                ring_full: AtomicU64::new(0),
                ipis_sent: AtomicU64::new(0),
                outstanding: AtomicU64::new(0),
                sent_to: [const { AtomicU64::new(0) }; MAX_CORES],
                inline_served: AtomicU64::new(0),
                halted_waits: AtomicU64::new(0),
            },
        }
    }
}

// ---- configuration -------------------------------------------------------------------------

static NOTIFY: AtomicU32 = AtomicU32::new(abi::RPCC_NOTIFY_HYBRID);
/// Requests per agent before it is destroyed; 0: unlimited.
static AGENT_LIMIT: AtomicU32 = AtomicU32::new(0);

/// Apply the boot options (bootstrap core, before other cores start): the notify mode, the
/// agent limit (`None`: unlimited), inline mode and halting in place.
pub fn configure(notify: bootargs::Notify, agents: Option<u32>, inline: bool, halt: bool) {
    fast::configure(inline, halt);
    let mode = match notify {
        bootargs::Notify::Ipi => abi::RPCC_NOTIFY_IPI,
        bootargs::Notify::Poll => abi::RPCC_NOTIFY_POLL,
        bootargs::Notify::Hybrid => abi::RPCC_NOTIFY_HYBRID,
    };
    NOTIFY.store(mode, Ordering::Relaxed);
    AGENT_LIMIT.store(agents.unwrap_or(0), Ordering::Relaxed);
}

pub fn notify_mode() -> u32 {
    NOTIFY.load(Ordering::Relaxed)
}

/// Requests per agent (`None`: unlimited).
pub fn agent_limit() -> Option<u32> {
    match AGENT_LIMIT.load(Ordering::Relaxed) {
        0 => None,
        n => Some(n),
    }
}

fn me() -> &'static CoreRpcc {
    &percore::this().rpcc
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    me().state.with(f)
}

// ---- start-up ------------------------------------------------------------------------------

/// This core's inbox: one ring from every other planned core (before it goes online).
pub fn init_this_core() {
    let n = smp::cores_planned();
    let this = current_core();
    with_state(|s| {
        s.senders = (0..n).map(|_| None).collect();
        s.receivers = (0..n).map(|_| None).collect();
        s.outbox = (0..n).map(|_| VecDeque::new()).collect();
        s.daemons = (0..n).map(agent::Daemon::new).collect();
        for src in (0..n).filter(|&c| c != this) {
            let ring: &'static Ring = Box::leak(Box::new(Ring::new()));
            s.receivers[src] = ring.take_receiver();
            me().inbox[src].store(ring as *const Ring as *mut Ring, Ordering::Release);
        }
    });
}

// ---- sending -------------------------------------------------------------------------------

/// Put `msg` in the ring to `dst` (or behind the messages already waiting for room), then
/// notify `dst`.
/// A message sent without `announce` waits for `dst`'s next look at its rings.
fn send(s: &mut State, dst: usize, msg: Msg, announce: bool) {
    if s.senders[dst].is_none() {
        let ring = percore::of(dst).rpcc.inbox[current_core()].load(Ordering::Acquire);
        // SAFETY: a published ring is leaked (lives forever) and never moves.
        s.senders[dst] = unsafe { ring.as_ref() }.and_then(|r| r.take_sender());
    }
    me().stats.sent_to[dst].fetch_add(1, Ordering::Relaxed);
    crate::trace::event(crate::trace::Kind::RpccSend, dst as u64, msg.tag);
    let sent = match &mut s.senders[dst] {
        Some(tx) if s.outbox[dst].is_empty() => tx.try_send(msg).is_ok(),
        _ => false,
    };
    if !sent {
        me().stats.ring_full.fetch_add(1, Ordering::Relaxed);
        s.outbox[dst].push_back(msg);
        s.outboxed += 1;
    }
    if announce {
        notify(dst);
    }
}

/// Tell `dst` that a message waits, as the notify mode says.
fn notify(dst: usize) {
    let ipi = match notify_mode() {
        abi::RPCC_NOTIFY_IPI => true,
        abi::RPCC_NOTIFY_POLL => false,
        _ => {
            // Pairs with the receiver's fence between clearing `polling` and its last look.
            fence(Ordering::SeqCst);
            !percore::of(dst).rpcc.polling.load(Ordering::Relaxed)
        }
    };
    if ipi {
        me().stats.ipis_sent.fetch_add(1, Ordering::Relaxed);
        smp::kick(dst);
    }
}

/// Send what waits in the outboxes, as far as the rings have room.
fn flush_outboxes(s: &mut State) {
    if s.outboxed == 0 {
        return;
    }
    for dst in 0..s.outbox.len() {
        let mut moved = false;
        while let (Some(&msg), Some(tx)) = (s.outbox[dst].front(), s.senders[dst].as_mut()) {
            if tx.try_send(msg).is_err() {
                break;
            }
            s.outbox[dst].pop_front();
            s.outboxed -= 1;
            moved = true;
        }
        if moved {
            notify(dst);
        }
    }
}

fn has_outbox(s: &State) -> bool {
    s.outboxed > 0
}

/// Is `core` a core RPCC can reach?
pub fn reachable(core: usize) -> bool {
    core < smp::cores_planned() && smp::is_online(core)
}

/// Send request `op` to `dst`; returns its tag.
fn submit(dst: usize, op: Op, waiter: Waiter) -> Result<u64, Error> {
    if !reachable(dst) || dst == current_core() {
        return Err(Error::NoSuchCore);
    }
    let flow = crate::res::flow_info();
    let quiet = waiter == Waiter::Nobody && fast::inline();
    let tag = with_state(|s| {
        let request = match s.spare.pop() {
            // A spare's reply was taken and its operation emptied (`take_done`).
            Some(mut spare) => {
                spare.op = op;
                spare.flow = flow;
                spare.quiet = quiet;
                spare
            }
            None => Box::new(Request {
                op,
                flow,
                quiet,
                reply: UnsafeCell::new(None),
            }),
        };
        let addr = &*request as *const Request as u64;
        let tag = s.next_tag;
        s.next_tag += 1;
        s.outstanding.insert(
            tag,
            Outstanding {
                request,
                waiter,
                done: false,
            },
        );
        send(
            s,
            dst,
            Msg {
                kind: KIND_REQUEST,
                tag,
                request: addr,
            },
            true,
        );
        tag
    });
    me().stats.outstanding.fetch_add(1, Ordering::Relaxed);
    crate::trace::event(crate::trace::Kind::Submit, dst as u64, tag);
    Ok(tag)
}

/// Perform `op` on core `dst` and return its result, sleeping until it comes. The caller
/// sees exactly what the call would have returned on `dst`.
pub fn call(dst: usize, op: Op) -> Result<Out, Error> {
    if let Some(r) = structure::directly(|| call_direct(dst, &op)) {
        return r;
    }
    let thread = sched::with(|s| s.current_thread());
    let waiter = thread.map_or(Waiter::Idle, Waiter::Thread);
    start_polling();
    let tag = submit(dst, op, waiter).inspect_err(|_| {
        stop_polling();
    })?;
    let r = wait_answer(tag, thread, true);
    stop_polling();
    r
}

/// Sleep until the answer to request `tag` is in (as `thread`, or as the idle context).
/// `just_sent`: the request left in this kernel activity (no interrupt came since, so in
/// ipi mode its answer cannot be in yet).
fn wait_answer(tag: u64, thread: Option<u32>, just_sent: bool) -> Result<Out, Error> {
    // Halting in place first: nothing else runs here meanwhile.
    if thread.is_some() {
        if let Some(r) = fast::halt_in_place(tag, just_sent) {
            return r;
        }
    }
    loop {
        if let Some(r) = take_done(tag) {
            return r;
        }
        // Other contexts run while we sleep and set their own flows; ours comes back after.
        let flow = crate::res::save_flow();
        match thread {
            // No interrupt can come between the look above and the block (the kernel runs
            // with interrupts masked), so the reply cannot be missed.
            Some(_) => sched::block(sched::Block::Rpcc(tag)),
            None => {
                sched::run_until(u64::MAX / 2, || is_done(tag));
            }
        }
        crate::res::restore_flow(&flow);
    }
}

/// Big-lock mode: no message; holding the lock, perform `op` at once acting as core `dst`,
/// under the caller's flow (what an agent on `dst` would do).
fn call_direct(dst: usize, op: &Op) -> Result<Out, Error> {
    if !reachable(dst) || dst == current_core() {
        return Err(Error::NoSuchCore);
    }
    // Counted as a request to `dst` and one `dst` served, though nothing travels.
    me().stats.sent_to[dst].fetch_add(1, Ordering::Relaxed);
    percore::of(dst)
        .rpcc
        .stats
        .served
        .fetch_add(1, Ordering::Relaxed);
    let flow = crate::res::flow_info();
    let saved = crate::res::save_flow();
    let r = crate::biglock::on_core(dst, || {
        crate::res::adopt_flow(&flow);
        let r = ops::perform(op);
        crate::res::end_remote_flow();
        r
    });
    crate::res::restore_flow(&saved);
    r
}

/// Send every operation of `ops` to `dst` at once, then collect the results in order (many
/// requests in flight from one thread; the rings apply back-pressure).
pub fn call_many(dst: usize, ops: Vec<Op>) -> Vec<Result<Out, Error>> {
    if let Some(r) = structure::directly(|| ops.iter().map(|op| call_direct(dst, op)).collect()) {
        return r;
    }
    let thread = sched::with(|s| s.current_thread());
    let waiter = thread.map_or(Waiter::Idle, Waiter::Thread);
    start_polling();
    let tags: Vec<Result<u64, Error>> = ops.into_iter().map(|op| submit(dst, op, waiter)).collect();
    let results = tags
        .into_iter()
        .map(|tag| wait_answer(tag?, thread, false))
        .collect();
    stop_polling();
    results
}

/// Work this core still holds: requests it waits for, messages waiting for ring room,
/// requests queued for its agents, and answers of ended requesters still to settle (all 0
/// when RPCC is quiet).
pub fn backlog() -> u64 {
    with_state(|s| {
        let queued: usize = s.daemons.iter().map(agent::Daemon::queued).sum();
        (s.outstanding.len() + queued + s.outboxed + s.orphans.len()) as u64
    })
}

/// Agents that exist on this core and are not asleep.
pub fn agents_awake() -> u64 {
    with_state(|s| s.daemons.iter().map(agent::Daemon::awake).sum())
}

/// Send `op` to `dst` for process `serial` of this core, whose result queue gets the answer
/// under `ticket` (the request path's asynchronous resource operations).
pub fn submit_for(dst: usize, op: Op, serial: u32, ticket: u64) -> Result<(), Error> {
    let answered = structure::directly(|| {
        let r = call_direct(dst, &op);
        crate::ipc::rpcc_answer(serial, ticket, r);
    });
    if answered.is_some() {
        return Ok(());
    }
    submit(dst, op, Waiter::Ticket(serial, ticket)).map(drop)
}

/// Send `op` to `dst` without waiting for (or wanting) its result.
pub fn notice(dst: usize, op: Op) {
    let done = structure::directly(|| {
        if let Err(e) = call_direct(dst, &op) {
            log::debug!("rpcc: notice to core {dst}: {e}");
        }
    });
    if done.is_some() {
        return;
    }
    if let Err(e) = submit(dst, op, Waiter::Nobody) {
        log::warn!("rpcc: notice to core {dst} not sent: {e}");
    }
}

/// For tests: whether thread `thread` waits for the answer to a request of this core whose
/// operation `is` picks.
pub fn sends_for(thread: u32, is: impl Fn(&Op) -> bool) -> bool {
    with_state(|s| {
        s.outstanding
            .any(|o| o.waiter == Waiter::Thread(thread) && !o.done && is(&o.request.op))
    })
}

fn is_done(tag: u64) -> bool {
    with_state(|s| s.outstanding.get(tag).is_none_or(|o| o.done))
}

fn take_done(tag: u64) -> Option<Result<Out, Error>> {
    let reply = with_state(|s| {
        if !s.outstanding.get(tag)?.done {
            return None;
        }
        let mut request = s.outstanding.remove(tag)?.request;
        // SAFETY: the reply arrived (acquire in the ring), so the owner core is done with
        // the record.
        let reply = unsafe { (*request.reply.get()).take() };
        // The record goes back to the spares, its operation's data freed.
        if s.spare.len() < SPARE_RECORDS {
            request.op = Op::ResList;
            s.spare.push(request);
        }
        Some(reply)
    })?;
    me().stats.outstanding.fetch_sub(1, Ordering::Relaxed);
    crate::trace::event(crate::trace::Kind::Complete, 0, tag);
    Some(reply.unwrap_or(Err(Error::Unknown)))
}

// ---- receiving -----------------------------------------------------------------------------

/// Look at every ring of this core: take replies (waking their waiters) and hand requests
/// to their daemons. Called from the doorbell IPI, the timer tick and the idle loop.
/// Returns whether anything arrived.
pub fn poll() -> bool {
    let mut arrived = false;
    // In batches of at most `BATCH` messages (no allocation); until the rings are empty.
    while let Some(n) = poll_batch() {
        arrived |= n > 0;
        if n < BATCH {
            break;
        }
    }
    arrived
}

/// Messages handled by one pass of [`poll`].
const BATCH: usize = 32;

fn poll_batch() -> Option<usize> {
    // Called from places where no borrow is open; a nested call (cannot happen today)
    // would find the state borrowed, so look first.
    if me().state.is_borrowed() {
        return None;
    }
    // Each reply's tag, its waiter, and whether it may leave something undone if nobody
    // takes it (`orphan::needs_care`: looked at here, where the record is at hand).
    let mut replies: heapless::Vec<(u64, Waiter, bool), BATCH> = heapless::Vec::new();
    let mut requests: heapless::Vec<(usize, u64, u64), BATCH> = heapless::Vec::new();
    let orphans = with_state(|s| {
        flush_outboxes(s);
        'rings: for src in 0..s.receivers.len() {
            let Some(rx) = s.receivers[src].as_mut() else {
                continue;
            };
            while replies.len() + requests.len() < BATCH {
                let Some(msg) = rx.try_recv() else {
                    continue 'rings;
                };
                crate::trace::event(crate::trace::Kind::RpccReceive, src as u64, msg.tag);
                match msg.kind {
                    KIND_REPLY => {
                        if let Some(o) = s.outstanding.get_mut(msg.tag) {
                            o.done = true;
                            let care = orphan::needs_care(&o.request.op);
                            let _ = replies.push((msg.tag, o.waiter, care));
                        }
                    }
                    KIND_REQUEST => {
                        let _ = requests.push((src, msg.tag, msg.request));
                    }
                    k => log::error!("rpcc: message of unknown kind {k} from core {src}"),
                }
            }
            break;
        }
        if (!replies.is_empty() || !requests.is_empty()) && notify_mode() == abi::RPCC_NOTIFY_HYBRID
        {
            s.last_activity = time::now_ns();
        }
        // Almost always empty: no allocation, no call.
        (!s.orphans.is_empty()).then(|| core::mem::take(&mut s.orphans))
    });
    if let Some(orphans) = orphans {
        orphan::settle(orphans);
    }
    let n = replies.len() + requests.len();
    let thread_here = if replies.is_empty() {
        None
    } else {
        sched::with(|s| s.current_thread())
    };
    // By reference: moving a heapless vector copies all its slots.
    for &(tag, waiter, care) in replies.iter() {
        match waiter {
            // The requester halts in place (`fast`): it is running, nothing to wake.
            Waiter::Thread(t) if thread_here == Some(t) => {}
            Waiter::Thread(t) => {
                // Thread ids are never reused: a thread that exists is the requester.
                let alive = sched::with(|s| {
                    let alive = s.thread(t).is_some();
                    if alive {
                        s.wake(t);
                    }
                    alive
                });
                if !alive {
                    // The requester was killed while waiting: nobody will collect.
                    drop_answer(tag);
                }
            }
            Waiter::Idle => {}
            Waiter::Nobody => drop_answer(tag),
            // A submitter that ended no longer waits for it: an orphan like the others
            // (asked only of the few operations whose answer may leave work undone).
            Waiter::Ticket(serial, ticket) if care && !crate::ipc::awaits(serial, ticket) => {
                drop_answer(tag);
            }
            Waiter::Ticket(serial, ticket) => {
                if let Some(r) = take_done(tag) {
                    crate::ipc::rpcc_answer(serial, ticket, r);
                }
            }
        }
    }
    for &(src, tag, request) in requests.iter() {
        agent::accept(src, tag, request);
    }
    Some(n)
}

/// Send the reply to request `tag` (record `request`) from core `src` (an agent, after
/// `set_reply`); a quiet request's reply goes without an IPI.
pub(crate) fn reply(src: usize, tag: u64, request: &Request) {
    // Read before the reply leaves: the record is the requester's again after that.
    let announce = !request.quiet;
    with_state(|s| {
        send(
            s,
            src,
            Msg {
                kind: KIND_REPLY,
                tag,
                request: 0,
            },
            announce,
        )
    });
}

/// The idle loop's turn: look at the rings; in poll and hybrid mode keep looking (with
/// interrupts open now and then) instead of halting, for as long as the mode says.
/// Returns when the core should look for threads again; before it halts, the idle loop
/// calls [`stop_polling`].
pub fn idle_poll() {
    // In big-lock mode requests do not travel (and spinning here would hold the lock).
    if !structure::requests_travel() {
        return;
    }
    let mode = notify_mode();
    // The fast design in ipi mode: every message came with an IPI, whose handler took it.
    if fast::idle_quiet() {
        return;
    }
    if poll() {
        return;
    }
    let spin_until = match mode {
        abi::RPCC_NOTIFY_POLL => u64::MAX,
        abi::RPCC_NOTIFY_HYBRID => with_state(|s| s.last_activity).saturating_add(HYBRID_SPIN_NS),
        _ => 0,
    };
    let outbox = with_state(|s| has_outbox(s));
    if time::now_ns() >= spin_until && !outbox {
        return;
    }
    me().polling.store(true, Ordering::Relaxed);
    loop {
        if poll() || sched::with(|s| s.has_ready()) {
            break;
        }
        let outbox = with_state(|s| has_outbox(s));
        if time::now_ns() >= spin_until && !outbox {
            break;
        }
        crate::arch::x86_64::cpu::interrupt_window();
    }
}

/// Hybrid mode: this core will look at its rings before it halts or runs a thread, so
/// senders need not send it an IPI. A requester says so before it sends, so an answer
/// that comes back at once is not announced by an IPI.
pub fn start_polling() {
    if notify_mode() == abi::RPCC_NOTIFY_HYBRID {
        me().polling.store(true, Ordering::Relaxed);
    }
}

/// The core is about to halt or run a thread: senders must send IPIs again. Takes a last
/// look; returns whether anything arrived.
#[inline]
pub fn stop_polling() -> bool {
    stop_polling_in(me())
}

/// [`stop_polling`] with this core's RPCC state, which the caller holds already (a switch).
#[inline]
pub fn stop_polling_in(me: &CoreRpcc) -> bool {
    // Every switch asks; few find the core polling.
    if !me.polling.load(Ordering::Relaxed) {
        return false;
    }
    stop_polling_now()
}

#[cold]
#[inline(never)]
fn stop_polling_now() -> bool {
    let rpcc = me();
    rpcc.polling.store(false, Ordering::Relaxed);
    // Pairs with the sender's fence: a message sent before it saw `polling` false is seen
    // by this last look.
    fence(Ordering::SeqCst);
    poll()
}

/// The timer tick: look at the rings (poll mode's only look while user code runs; a safety
/// net in the others) and retry agents that could not be made.
pub fn on_tick() {
    poll();
    agent::retry_stalled();
}

/// `RPCC_STATS` record of `core`.
pub fn info_of(core: usize) -> abi::RpccInfo {
    let st = &percore::of(core).rpcc.stats;
    let mut sent_to = [0u64; MAX_CORES];
    for (i, v) in sent_to.iter_mut().enumerate() {
        *v = st.sent_to[i].load(Ordering::Relaxed);
    }
    abi::RpccInfo {
        core: core as u32,
        notify: notify_mode(),
        agent_limit: AGENT_LIMIT.load(Ordering::Relaxed),
        agents_live: st.agents_live.load(Ordering::Relaxed),
        agents_inline: u32::from(fast::inline()),
        wait: if fast::halts() {
            abi::RPCC_WAIT_HALT
        } else {
            abi::RPCC_WAIT_SWITCH
        },
        agents_created: st.agents_created.load(Ordering::Relaxed),
        agents_destroyed: st.agents_destroyed.load(Ordering::Relaxed),
        reuse_hits: st.reuse_hits.load(Ordering::Relaxed),
        served: st.served.load(Ordering::Relaxed),
        ring_full: st.ring_full.load(Ordering::Relaxed),
        ipis_sent: st.ipis_sent.load(Ordering::Relaxed),
        outstanding: st.outstanding.load(Ordering::Relaxed),
        sent_to,
        inline_served: st.inline_served.load(Ordering::Relaxed),
        halted_waits: st.halted_waits.load(Ordering::Relaxed),
    }
}
