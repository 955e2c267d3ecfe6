//! Live replacement, the request queues' side (issue 14, P3's replacement; the contract is
//! `abi::fnid`'s `FN_TAKEOVER`, entered at [`takeover`]; the registry's side is
//! `fnid::takeover_check` and `fnid::switch`, made at the registry's home).
//!
//! The rights are checked at the home first (as for registering again); a function that is
//! down is taken over there at once. P3 replaces a server between two of its steps, with its request queue kept in the
//! kernel. Here the steps are the old server's `RECV`/`REPLY_RECV`s: the new server's core
//! asks the old server's core to retire it ([`ask`]); the old process is marked, and the
//! next time it looks for a request holding none ([`begin`], from `take_request`) it is not
//! given one. Instead its own thread, in the kernel ([`finish_if_handing`]):
//!
//! 1. takes the requests queued for the old endpoint out of its queue (their ICAs unmapped
//!    from it) and sends them, in order, to the new endpoint (its core's queue, through RPCC
//!    if another core);
//! 2. has the home switch the function to the new endpoint (server generation + 1), which
//!    returns once every core's copy maps the new endpoint;
//! 3. answers the waiting `FN_TAKEOVER` at once if its thread is the process's only one
//!    (`State::Handing::answered`): nothing of the old server runs in user mode again (it
//!    can no longer be rolled back: below), so the new one may map the state ICA beside the
//!    old one's frozen mapping and serve while this process ends; a process with other
//!    threads, which could still write the state, has its successor answered by its end
//!    instead ([`ended`]), as before;
//! 4. yields the core once (its successor, woken by the answer, and others ready at its
//!    priority run first), then ends the process in the same visit to the scheduler's
//!    tables that finds nothing more to forward.
//!
//! Requests that reach the old endpoint while this goes on (resolved before a core took
//! the switch) are not queued for the old server but appended behind the moved ones
//! ([`accept`]) and sent the same way, so none is answered twice, and each request is
//! answered by exactly one server (or `Gone`, if the new server dies first: below). Before
//! the early answer (3), the successor
//! waited for step 4 as well: about 0.4 ms of ending the process in `bench
//! net-replace`'s traces, on the path of the datagrams waiting for the new `netd`.
//!
//! The retire notice (`abi::fnid::RETIRE_NOTICE`): an old server that holds requests when
//! it looks for the next one (a `WAIT` it keeps until data comes) would never be retired.
//! So [`begin`], finding it asked and holding some, gives it once the notice instead of a
//! request ([`Look::Notice`], [`notice`]); it answers what it holds `Again` (`REPLY_ERROR`,
//! `ipc::reply_error`), whose callers send it again (to the old endpoint, where it is
//! queued and moved, or to the new one), and its next look, holding none, retires it.
//!
//! If the new server dies before the switch (its endpoint is gone when the old server's
//! thread forwards a request, or when the home would switch to it: `fnid::home_switch`
//! refuses with `Gone`), the handing over is rolled back ([`roll_back`]): the requests not
//! yet forwarded go back to the old server's queue in order and it serves on (requests
//! already forwarded to the dead server were answered `Gone` by its end). The function
//! never points at a dead endpoint, and `replace` sees its new server end without taking
//! over. If the new server dies after the switch, its end reports the function down as
//! for any server, and the requests the old server's thread still had to forward are
//! answered `Gone` (there is no rolling back then: the successor may have been answered
//! and have run). If the switch fails otherwise (the function was unregistered or
//! changed meanwhile), the old server still ends and `FN_TAKEOVER` fails with the
//! switch's error.
//!
//! A request leaves the handing queue only while it is being sent: when the new endpoint's
//! queue is full (`Busy`), it goes back to the queue's front for the wait before the next
//! try, so a kill of the old server in that wait answers it `Gone` with the rest
//! (`fnid::retiring_server_killed_while_forwarding_loses_nothing`).
//!
//! A request on its way to another core is the handing thread's alone for an RPCC round
//! trip (it is not queued twice, so it cannot be put back before the answer is known). If
//! the process ends meanwhile (a kill), the answer finds nobody: when it says the request
//! was not queued there, RPCC answers its caller `Gone` (`rpcc::orphan`;
//! `fnid::retiring_server_killed_while_sending_to_another_core_loses_nothing`: before, that
//! caller waited for ever). A request resolved from a copy before the switch and still in transit to
//! the old core after the old process ended is answered `Gone` (every core has taken the
//! switch by then, so only a request already in an RPCC ring can be late). A server with
//! several threads receiving at once is retired by the first that looks; the others get
//! `Gone` from their `RECV`. A timeout (the old server still holds a request after the
//! notice, or does not look
//! for the next, within it) withdraws the ask at the old core if nothing started
//! ([`cancel`]): `TimedOut`, nothing changed; once started, the answer is waited for.
//!
//! Once the old server's core accepts the ask, the new server waits at the old server's
//! priority if that is higher (so that it serves as soon as the old one ends); a takeover
//! that then does not happen (withdrawn at the timeout, failed, rolled back) gives it back
//! the priority it had ([`wait`]).

use super::{fail, wake_waiting_threads, Caller, Incoming, ProcIpc};
use crate::proc::sched;
use crate::rpcc::{self, Op};
use abi::ipc::Completion;
use abi::res::ResId;
use abi::{Error, Pid};
use alloc::boxed::Box;
use alloc::collections::VecDeque;

/// What the new server asks of the old one's core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retire {
    /// The function, and where its requests go now and will go.
    pub fnid: u64,
    pub old: ResId,
    pub new: ResId,
    /// The old server, and the new one.
    pub server: Pid,
    pub successor: Pid,
    /// The new server's `FN_TAKEOVER`: answered right after the switch if the old server's
    /// process has only the retiring thread, else when it ends.
    pub waiter: Caller,
}

/// A process being retired (`ProcIpc::takeover`).
pub enum State {
    /// Asked: it is retired when it next looks for a request holding none; `noticed` once
    /// it was given the retire notice (it held requests when it looked).
    Asked { retire: Retire, noticed: bool },
    /// Handing over: `queue` (the old endpoint's requests, in order) goes to the new
    /// endpoint; `started` once its thread does it; `switched` the new generation once the
    /// function is switched (or the error that stopped it); `answered` once the new
    /// server's `FN_TAKEOVER` was answered (right after the switch, see [`hand_over`]).
    Handing {
        retire: Retire,
        queue: VecDeque<Incoming>,
        started: bool,
        switched: Option<Result<u64, Error>>,
        answered: bool,
    },
}

/// On the old server's core: mark it to be retired and wake it if it waits for a request;
/// its priority (the new server takes it).
pub fn ask(r: Retire) -> Result<abi::Priority, Error> {
    sched::with(|s| {
        let serial = r.server.serial();
        let p = s
            .processes
            .get_mut(&serial)
            .filter(|p| p.ended.is_none() && p.pid == r.server)
            .ok_or(Error::Gone)?;
        if p.ipc.takeover.is_some() {
            return Err(Error::Busy);
        }
        let priority = p.priority;
        p.ipc.takeover = Some(Box::new(State::Asked {
            retire: r,
            noticed: false,
        }));
        wake_waiting_threads(s, serial, super::Waits::Any);
        Ok(priority)
    })
}

/// What [`cancel`] found.
pub enum Cancelled {
    /// Not started: nothing changed.
    Yes,
    /// Under way (or the old server ended): the answer comes.
    UnderWay,
}

/// On the old server's core: the new server stops waiting for `waiter`'s takeover.
pub fn cancel(server: Pid, waiter: Caller) -> Cancelled {
    sched::with(|s| {
        let Some(p) = s
            .processes
            .get_mut(&server.serial())
            .filter(|p| p.pid == server && p.ended.is_none())
        else {
            return Cancelled::UnderWay;
        };
        match p.ipc.takeover.as_deref() {
            Some(State::Asked { retire, .. }) if retire.waiter == waiter => {
                p.ipc.takeover = None;
                Cancelled::Yes
            }
            _ => Cancelled::UnderWay,
        }
    })
}

/// What [`begin`] tells `take_request`.
pub(super) enum Look {
    /// Not being retired (or not on this endpoint): take a request as usual.
    Serve,
    /// Being retired: no request (the receiving loop hands over).
    Retired,
    /// Give the retire notice (`abi::fnid::RETIRE_NOTICE`): the process holds requests.
    Notice,
}

/// From `take_request` (the owner looks for a request on `endpoint`, `ipc` is its queues,
/// `vs` its address space): if it is asked to retire and holds no request, start handing
/// over ([`Look::Retired`]); if it holds some and was not told yet, tell it once
/// ([`Look::Notice`]): it answers them `Again` and is retired when it looks again holding
/// none.
#[cold]
#[inline(never)]
pub(super) fn begin(
    ipc: &mut ProcIpc,
    vs: Option<&mut crate::proc::vspace::VSpace>,
    endpoint: ResId,
) -> Look {
    let held = ipc.serving.len();
    let r = match ipc.takeover.as_deref_mut() {
        Some(State::Asked { retire, .. }) if retire.old == endpoint && held == 0 => *retire,
        Some(State::Asked { retire, noticed }) if retire.old == endpoint && !*noticed => {
            *noticed = true;
            return Look::Notice;
        }
        Some(State::Handing { .. }) => return Look::Retired,
        _ => return Look::Serve,
    };
    let (queue, keep): (VecDeque<Incoming>, VecDeque<Incoming>) =
        ipc.requests.drain(..).partition(|i| i.endpoint == r.old);
    ipc.requests = keep;
    // The ICAs they carry are mapped again where they go: out of this address space.
    let slice: alloc::vec::Vec<Incoming> = queue.iter().cloned().collect();
    let _ = super::ica::unmap_untaken(vs, &slice);
    ipc.takeover = Some(Box::new(State::Handing {
        retire: r,
        queue,
        started: false,
        switched: None,
        answered: false,
    }));
    Look::Retired
}

/// The retire notice as `RECV` returns it: a one-way message (handle 0, nothing to answer)
/// from the kernel (sender 0) with label `abi::fnid::RETIRE_NOTICE`.
pub(super) fn notice(endpoint: ResId) -> abi::ipc::Received {
    abi::ipc::Received {
        request: 0,
        sender: Pid(0),
        sender_thread: 0,
        sender_user: 0,
        endpoint: endpoint.0,
        kind: abi::ipc::SUBMIT_SEND,
        msg: abi::ipc::Msg {
            label: abi::fnid::RETIRE_NOTICE,
            words: [0; 6],
        },
    }
}

/// A request for `incoming.endpoint` reaches a process being retired (`ipc`): returned to be
/// queued as usual, or `None` if it is to be forwarded (kept behind the moved ones).
#[cold]
#[inline(never)]
pub(super) fn accept(ipc: &mut ProcIpc, incoming: Incoming) -> Option<Incoming> {
    match ipc.takeover.as_deref_mut() {
        Some(State::Handing { retire, queue, .. }) if incoming.endpoint == retire.old => {
            queue.push_back(incoming);
            None
        }
        _ => Some(incoming),
    }
}

/// A same-core `CALL`'s request (`fast::call_local`) reaches a process being retired
/// (`target`): kept to be forwarded, or else queued as `enqueue` queues it (the receiver is
/// woken by the caller, not switched to).
#[cold]
#[inline(never)]
pub(super) fn accept_or_queue(
    target: &mut crate::proc::Process,
    incoming: Incoming,
) -> Result<(), Error> {
    let Some(mut incoming) = accept(&mut target.ipc, incoming) else {
        return Ok(());
    };
    if target.ipc.requests.len() >= super::MAX_QUEUED {
        return Err(Error::Busy);
    }
    if let Some(ica) = &incoming.ica {
        super::ica::land(target.vspace.as_mut(), target.pid, ica, &mut incoming.msg)?;
    }
    target.ipc.requests.push_back(incoming);
    Ok(())
}

/// The receiving loop found the running process being retired: if its handing over has
/// not started, this thread does it and the process ends (no return), unless the new
/// server died first: then the handing over is rolled back and this returns true (the
/// process serves on: receive again). Else false.
#[cold]
#[inline(never)]
pub(super) fn finish_if_handing() -> bool {
    let r = sched::with(|s| {
        let p = s.processes.get_mut(&s.current_process()?)?;
        match p.ipc.takeover.as_deref_mut() {
            Some(State::Handing {
                retire, started, ..
            }) if !*started => {
                *started = true;
                Some(*retire)
            }
            _ => None,
        }
    });
    match r {
        Some(r) => hand_over(r),
        None => false,
    }
}

/// Is the new server's endpoint `new` still there (its server alive)?
fn alive(new: ResId) -> bool {
    crate::res::info(new).is_ok()
}

/// The new server died before the switch: the requests not yet sent go back to the front
/// of the running process's request queue, in order
/// (their ICAs mapped in it again; one that cannot be is answered `Gone`), and it is no
/// longer being retired. The new server's `FN_TAKEOVER` has nobody to answer.
fn roll_back() {
    let failed: alloc::vec::Vec<Caller> = sched::with(|s| {
        let Some(p) = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial))
        else {
            return alloc::vec::Vec::new();
        };
        let Some(State::Handing { queue, .. }) = p.ipc.takeover.take().map(|b| *b) else {
            return alloc::vec::Vec::new();
        };
        let mut failed = alloc::vec::Vec::new();
        for mut i in queue.into_iter().rev() {
            if let Some(ica) = &i.ica {
                if super::ica::land(p.vspace.as_mut(), p.pid, ica, &mut i.msg).is_err() {
                    super::ica::lost(ica.region);
                    failed.extend(i.caller);
                    continue;
                }
            }
            p.ipc.requests.push_front(i);
        }
        failed
    });
    for caller in failed {
        fail(None, caller, Error::Gone);
    }
}

/// What the handing thread does next.
enum Next {
    /// Send the request at the front of the queue (the function is `switched` already).
    Forward {
        switched: bool,
    },
    Switch,
    /// The successor was answered: give the core up once before ending.
    StepAside,
    Ended,
}

/// The new server's `FN_TAKEOVER` answer: the function is its, at `generation`.
fn taken(r: Retire, generation: u64) -> Completion {
    Completion {
        ticket: r.waiter.ticket,
        value: generation,
        ..Completion::default()
    }
}

/// Send the queue on, switch the function, end the process (module docs); or, if the new
/// server died before the switch, roll back (true: the process serves on).
///
/// A request is off the queue only while it is being sent: the new server's liveness is
/// asked (an RPCC call if it is on another core) before the request is taken, and when
/// the new endpoint's queue is full (`Busy`) the request goes back to the front of the
/// queue for the wait before the next try, so a kill of this process in either wait
/// answers it `Gone` with the rest ([`ended`]) instead of taking it away on this thread's
/// stack (a regression: its caller waited forever).
fn hand_over(r: Retire) -> bool {
    let mut busy_tries = 0;
    let mut stepped_aside = false;
    loop {
        let next = sched::with(|s| {
            let Some(serial) = s.current_process() else {
                return Next::Ended;
            };
            let Some(p) = s.processes.get_mut(&serial) else {
                return Next::Ended;
            };
            if let Some(State::Handing {
                queue,
                switched,
                answered,
                ..
            }) = p.ipc.takeover.as_deref_mut()
            {
                if !queue.is_empty() {
                    return Next::Forward {
                        switched: switched.is_some(),
                    };
                }
                if switched.is_none() {
                    return Next::Switch;
                }
                if *answered && !stepped_aside {
                    return Next::StepAside;
                }
            }
            // Nothing more to send: the process ends in this same visit, so nothing more
            // can be queued for it.
            crate::proc::end_process(s, serial, abi::WaitStatus::default());
            Next::Ended
        });
        match next {
            // Before the switch only: after it the function is the new server's (and its
            // successor may have been answered), so a new server gone since gets what is
            // left answered `Gone` (`send_on` fails) and this process ends all the same.
            Next::Forward { switched: false } if !alive(r.new) => {
                roll_back();
                return true;
            }
            Next::Forward { switched } => {
                let Some(i) = take_front() else {
                    continue;
                };
                match send_on(&i, r.new) {
                    Ok(()) => busy_tries = 0,
                    Err(Error::Busy) if busy_tries < BUSY_TRIES => {
                        busy_tries += 1;
                        put_back(i);
                        wait_for_room();
                    }
                    Err(e) => {
                        // Each request gets its own tries. After the switch the new server
                        // is the function's: gone, it is `Gone` to its callers, as for any
                        // server (its endpoint's lookup says `StaleResource`).
                        busy_tries = 0;
                        give_up(i, if switched { Error::Gone } else { e });
                    }
                }
            }
            Next::Switch => {
                let result = crate::fnid::switch(r.fnid, r.old, r.new, r.successor);
                if result == Err(Error::Gone) {
                    // The new server died: the home refused to switch to its endpoint.
                    roll_back();
                    return true;
                }
                // Switched on every core: the new server is answered now, before this
                // process ends, if this thread is the process's only one: then nothing of
                // the old server runs in user mode again, so the new one may map the state
                // ICA beside this process's frozen mapping, and nothing is left to roll
                // back. (Another thread could still write the state: such a server's
                // successor is answered when it has ended.)
                let early = sched::with(|s| {
                    let p = s
                        .current_process()
                        .and_then(|serial| s.processes.get_mut(&serial))?;
                    let alone = p.threads.len() == 1;
                    match p.ipc.takeover.as_deref_mut() {
                        Some(State::Handing {
                            switched, answered, ..
                        }) => {
                            *switched = Some(result);
                            *answered = alone && result.is_ok();
                            Some(*answered)
                        }
                        _ => None,
                    }
                })
                .unwrap_or(false);
                if let (true, Ok(generation)) = (early, result) {
                    super::deliver(None, r.waiter, taken(r, generation), None);
                }
            }
            Next::StepAside => {
                // The successor was answered: let it (and whatever else is ready at this
                // priority) run before this process ends, so that its end (its address
                // space freed) does not hold up the requests the successor answers. Only
                // once, at its own priority: requests still on their way here are sent on
                // when this thread next runs, within the core's round robin.
                stepped_aside = true;
                sched::yield_now();
            }
            Next::Ended => sched::exit_current(),
        }
    }
}

/// The request at the front of the running process's handing queue, taken to be sent.
fn take_front() -> Option<Incoming> {
    sched::with(|s| {
        let p = s.processes.get_mut(&s.current_process()?)?;
        match p.ipc.takeover.as_deref_mut() {
            Some(State::Handing { queue, .. }) => queue.pop_front(),
            _ => None,
        }
    })
}

/// `i`, taken from the running process's handing queue, goes back to its front (the process
/// is still handing over: only its own thread changes that).
fn put_back(i: Incoming) {
    let left = sched::with(|s| {
        let p = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial));
        match p.and_then(|p| p.ipc.takeover.as_deref_mut()) {
            Some(State::Handing { queue, .. }) => {
                queue.push_front(i);
                None
            }
            _ => Some(i),
        }
    });
    if let Some(i) = left {
        give_up(i, Error::Gone);
    }
}

/// Times a full queue at the new endpoint is tried again, and the wait between tries.
const BUSY_TRIES: u32 = 1000;
const BUSY_WAIT_NS: u64 = 20_000;

/// Wait [`BUSY_WAIT_NS`] for room at a full endpoint.
fn wait_for_room() {
    let at = crate::time::now_ns().saturating_add(BUSY_WAIT_NS);
    sched::block(sched::Block::Ipc(at));
}

/// Queue a copy of `incoming` (for the old endpoint) at endpoint `new`, once.
fn send_on(incoming: &Incoming, new: ResId) -> Result<(), Error> {
    let mut i = incoming.clone();
    i.endpoint = new;
    if new.core() == crate::percore::current_core() {
        super::enqueue(i)
    } else {
        rpcc::call(new.core(), Op::Enqueue(i)).map(drop)
    }
}

/// `incoming` could not be sent on: its caller gets `e` (never silence).
fn give_up(incoming: Incoming, e: Error) {
    if let Some(ica) = incoming.ica {
        super::ica::lost(ica.region);
    }
    if let Some(caller) = incoming.caller {
        fail(None, caller, e);
    }
}

/// Queue `incoming` (for the old endpoint) at endpoint `new`, waiting out a full queue
/// there; if it cannot be, its caller gets the error (never silence). For the restarter,
/// a kernel thread nothing kills (a retiring server's own thread uses [`hand_over`]'s
/// loop, which keeps the request in its queue while it waits).
pub(super) fn forward(incoming: Incoming, new: ResId) {
    let mut tries = 0;
    let e = loop {
        match send_on(&incoming, new) {
            Ok(()) => return,
            Err(Error::Busy) if tries < BUSY_TRIES => {
                tries += 1;
                wait_for_room();
            }
            Err(e) => break e,
        }
    };
    give_up(incoming, e);
}

/// For tests: a process of this core whose own thread hands its queue over, with requests
/// left to send, and how many are left. Asked from the idle context (no thread of this core
/// runs), it finds that thread between two tries at a full endpoint: waiting for room, or
/// woken and not yet running.
pub fn handing_over_here() -> Option<(Pid, usize)> {
    sched::with(|s| {
        s.processes
            .values()
            .find_map(|p| match p.ipc.takeover.as_deref() {
                Some(State::Handing {
                    queue,
                    started: true,
                    ..
                }) if !queue.is_empty() && p.ended.is_none() => Some((p.pid, queue.len())),
                _ => None,
            })
    })
}

/// For tests: a process of this core whose own thread hands its queue over to another
/// core and waits for that core's answer to a request it sent there (`Op::Enqueue`).
pub fn sending_across_here() -> Option<Pid> {
    let candidates: alloc::vec::Vec<(Pid, u32)> = sched::with(|s| {
        s.processes
            .values()
            .filter(|p| {
                p.ended.is_none()
                    && matches!(
                        p.ipc.takeover.as_deref(),
                        Some(State::Handing { started: true, .. })
                    )
            })
            .flat_map(|p| p.threads.iter().map(move |&t| (p.pid, t)))
            .filter(|&(_, t)| {
                matches!(
                    s.state_of(t),
                    Some(sched::ThreadState::Blocked(sched::Block::Rpcc(_)))
                )
            })
            .collect()
    });
    candidates
        .into_iter()
        .find(|&(_, t)| rpcc::sends_for(t, |op| matches!(op, Op::Enqueue(_))))
        .map(|(pid, _)| pid)
}

/// A process being retired ended (`ipc::process_ended`): the new server's `FN_TAKEOVER`
/// gets its answer; what was left to forward gets `Gone`.
pub(super) fn ended(s: &mut sched::Sched, state: State) {
    let (r, answer, left) = match state {
        State::Asked { retire, .. } => (retire, Some(Err(Error::Gone)), VecDeque::new()),
        State::Handing {
            retire,
            queue,
            switched,
            answered,
            ..
        } => (
            retire,
            (!answered).then(|| switched.unwrap_or(Err(Error::Gone))),
            queue,
        ),
    };
    for i in left {
        // Its ICA was unmapped from the old server when the handing over began (`begin`):
        // attached nowhere now.
        if let Some(ica) = &i.ica {
            super::ica::lost(ica.region);
        }
        if let Some(caller) = i.caller {
            fail(Some(&mut *s), caller, Error::Gone);
        }
    }
    let completion = match answer {
        // Answered already, right after the switch.
        None => return,
        Some(Ok(generation)) => taken(r, generation),
        Some(Err(e)) => Completion {
            ticket: r.waiter.ticket,
            status: e as u64,
            ..Completion::default()
        },
    };
    super::deliver(Some(s), r.waiter, completion, None);
}

/// FN_TAKEOVER: the caller, with `endpoint` (its own), takes `fnid` over from its server
/// (`abi::fnid`). Returns the new server generation.
pub fn takeover(fnid: u64, endpoint: ResId, timeout_ns: u64) -> Result<u64, Error> {
    let server = crate::fnid::own_endpoint(endpoint)?;
    // A few rounds at most: another is needed only if the old server ended meanwhile (then
    // the function is down and is taken over at once) or this core's copy was behind.
    for _ in 0..4 {
        let (old, old_server) = crate::fnid::serving(fnid)?;
        let g = crate::fnid::takeover_check(fnid, old, endpoint, server)?;
        if g != 0 {
            // It was down: no old server to take the priority of. A new server prepared in
            // the background serves at an application's priority at most: raising it to a
            // server's let any program outrank its parent by taking over a name of its own
            // that it had let go down (found by a review). Whoever may start servers at
            // server priority starts one so (the shell's `replace` of a function down).
            take_priority(server, abi::Priority::App);
            return Ok(g);
        }
        let r = Retire {
            fnid,
            old,
            new: endpoint,
            server: old_server,
            successor: server,
            waiter: Caller {
                pid: server,
                ticket: 0,
                thread: 0,
            },
        };
        match wait(r, timeout_ns) {
            // The old server ended first: the home finds its endpoint gone (next round).
            Err(Error::Gone) => {}
            r => return r,
        }
    }
    Err(Error::Busy)
}

/// The new server takes `priority` if it is higher than its own (which, if higher, stays);
/// the priority it had.
fn take_priority(server: Pid, priority: abi::Priority) -> Option<abi::Priority> {
    sched::with(|s| {
        let had = s.processes.get(&server.serial()).map(|p| p.priority);
        s.raise_process(server.serial(), priority);
        had
    })
}

/// A takeover that did not happen: the new server gets back the priority it `had` before
/// [`take_priority`] (no lower: a priority it had not then, none can take away here).
fn give_back_priority(server: Pid, had: Option<abi::Priority>) {
    if let Some(had) = had {
        sched::with(|s| s.lower_process(server.serial(), had));
    }
}

/// On the new server's core: ask for `r` (its `waiter` filled in here) and wait at most
/// `timeout_ns` for the old server to end; the new generation.
fn wait(mut r: Retire, timeout_ns: u64) -> Result<u64, Error> {
    let thread = sched::with(|s| s.current_thread()).unwrap_or(0);
    let (ticket, me) = super::with_mine(|ipc, me| {
        ipc.next_ticket += 1;
        let ticket = ipc.next_ticket;
        ipc.pending.insert(ticket, None);
        Ok((ticket, me))
    })?;
    r.waiter = Caller {
        pid: me,
        ticket,
        thread,
    };
    let forget = || {
        let _ = super::with_mine(|ipc, _| {
            ipc.pending.remove(&ticket);
            Ok(())
        });
    };
    let asked = if r.server.core() == crate::percore::current_core() {
        ask(r)
    } else {
        rpcc::call(r.server.core(), Op::Retire(r)).and_then(|o| {
            let p = o.value()?;
            abi::Priority::from_u64(p).ok_or(Error::Unknown)
        })
    };
    let had = match asked {
        // Prepared, it waits for the old server's end at the old server's priority, so
        // that it serves as soon as that comes (not behind the clients of a priority
        // between; `replace` starts it in the background).
        Ok(priority) => take_priority(r.successor, priority),
        Err(e) => {
            forget();
            return Err(e);
        }
    };
    let taken = answer(r, ticket, timeout_ns, forget);
    if taken.is_err() {
        // Nothing taken over (the ask withdrawn at the timeout, or the handing over failed
        // or was rolled back): the priority was lent for serving at the old server's end,
        // which did not come. Before, the caller kept it: an application that called
        // `FN_TAKEOVER(fnid, its endpoint, 0)` on a function of its user got `TimedOut`
        // and ran on as a driver or server, enough to claim devices (found by an audit).
        // (Two takeovers at once by one process's threads: one failing lowers what the
        // other's success raised; none of Musubi's servers does so.)
        give_back_priority(r.successor, had);
    }
    taken
}

/// The answer to the ask `r` ([`wait`]): at most `timeout_ns`, then the ask is withdrawn
/// (and `forget` forgets `ticket`) unless the handing over started.
fn answer(r: Retire, ticket: u64, timeout_ns: u64, forget: impl Fn()) -> Result<u64, Error> {
    let got = match super::collect(ticket, timeout_ns) {
        Err(Error::TimedOut) => {
            let c = if r.server.core() == crate::percore::current_core() {
                matches!(cancel(r.server, r.waiter), Cancelled::Yes)
            } else {
                let op = Op::RetireCancel {
                    server: r.server,
                    waiter: r.waiter,
                };
                rpcc::call(r.server.core(), op).and_then(|o| o.value()) == Ok(0)
            };
            if c {
                forget();
                return Err(Error::TimedOut);
            }
            // Under way: the old server's end answers soon.
            super::collect(ticket, u64::MAX)
        }
        got => got,
    };
    let (c, _) = got?;
    match c.status {
        0 => Ok(c.value),
        s => Err(Error::from_code(s)),
    }
}
