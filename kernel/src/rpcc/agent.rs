//! RPCC daemons and agents: who performs a request on the core that owns its target
//! (P4 Figure 2).
//!
//! Every core has one [`Daemon`] per source core. When a request from core `src` arrives,
//! `src`'s daemon queues it and makes sure an *agent* will take it: it wakes an agent kept
//! asleep for reuse, or creates one if none of its agents is awake. An agent is a kernel
//! thread (driver priority, so it runs before any program): it takes the flow of the
//! request (the requester's flow id and user, and so its rights: RCC through RPCC), performs
//! the operation with the same code a local call uses, writes the result into the request
//! record, sends the reply and drops the flow again, so the flow -> user association exists
//! on this core only while the agent works.
//!
//! Agent reuse (`rpcc.agents=N`, P4's first addition): an agent performs at most N requests
//! and is then destroyed (its kernel stack freed); the next request creates a new one.
//! With `unlimited` an agent sleeps between requests and is reused, as long as the core
//! keeps it: a core keeps at most [`SLEEPING_POOL`] agents asleep over all its daemons, and
//! an agent that goes idle beyond that ends (its kernel stack goes back to the pool).
//! Creating an agent costs a kernel stack and a thread: P4's Figures 4 and 5 measure what
//! reuse saves.

use super::{ops, Request};
use crate::percore;
use crate::proc::sched;
use abi::Priority;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Agents a core keeps asleep for reuse, over all its daemons. A daemon has at most one
/// agent (it makes one only when none is awake or asleep), so without a bound every core
/// would keep one agent, a kernel stack of 8 frames, for each core that ever sent it a
/// request, forever. Four let a core serve up to four requesting cores in turn without
/// making agents (one is P4 Figs. 4 and 5's steady state: a single requester reuses its
/// agent), while the memory kept stays 4 stacks per core whatever the number of cores.
pub const SLEEPING_POOL: usize = 4;

/// The bound in force ([`SLEEPING_POOL`] unless [`set_sleeping_pool`] changed it).
static POOL: AtomicUsize = AtomicUsize::new(SLEEPING_POOL);

/// Change how many agents every core keeps asleep; the bound before. Agents asleep now
/// stay until they next go idle. (The in-kernel tests use it to see the bound work on a
/// machine with fewer requesting cores than [`SLEEPING_POOL`].)
pub fn set_sleeping_pool(agents: usize) -> usize {
    POOL.swap(agents, Ordering::Relaxed)
}

/// One daemon: the requests from one source core, and the agents that serve them.
pub struct Daemon {
    src: usize,
    /// Requests accepted and not yet taken by an agent: (tag, request record address).
    queue: VecDeque<(u64, u64)>,
    /// Agents asleep, waiting for a request (reuse).
    sleeping: Vec<u32>,
    /// Agents that exist and are not asleep (running, ready, or about to take a request).
    awake: u32,
}

impl Daemon {
    pub fn new(src: usize) -> Self {
        Daemon {
            src,
            queue: VecDeque::new(),
            sleeping: Vec::new(),
            awake: 0,
        }
    }
}

impl Daemon {
    /// Requests waiting for an agent.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Agents not asleep.
    pub fn awake(&self) -> u64 {
        u64::from(self.awake)
    }
}

/// What the daemon decided for an arriving request.
enum Then {
    Nothing,
    Wake(u32),
    Create,
}

/// A request from core `src` arrived (tag, record address): in inline mode perform it here
/// if it is short (`fast::try_inline`); otherwise queue it and see that an agent takes it.
pub fn accept(src: usize, tag: u64, request: u64) {
    if super::fast::try_inline(src, tag, request) {
        return;
    }
    let then = super::with_state(|s| {
        let d = &mut s.daemons[src];
        d.queue.push_back((tag, request));
        if d.awake > 0 {
            Then::Nothing
        } else if let Some(agent) = d.sleeping.pop() {
            d.awake += 1;
            Then::Wake(agent)
        } else {
            d.awake += 1;
            Then::Create
        }
    });
    match then {
        Then::Nothing => {}
        Then::Wake(agent) => sched::with(|s| s.wake(agent)),
        Then::Create => create_agent(src),
    }
}

fn create_agent(src: usize) {
    let stats = &percore::this().rpcc.stats;
    match sched::with(|s| s.add_kernel_thread(agent_main, src as u64, Priority::Driver)) {
        Some(_) => {
            stats.agents_created.fetch_add(1, Ordering::Relaxed);
            stats.agents_live.fetch_add(1, Ordering::Relaxed);
        }
        None => {
            // No memory for a kernel stack: the request stays queued; the next arrival or
            // tick tries again (see `retry_stalled`).
            log::warn!("rpcc: no memory for an agent; request from core {src} waits");
            super::with_state(|s| s.daemons[src].awake -= 1);
        }
    }
}

/// Daemons with queued requests and no agent awake (agent creation failed for lack of
/// memory): try again. Called at every tick.
pub fn retry_stalled() {
    let stalled: Vec<usize> = super::with_state(|s| {
        s.daemons
            .iter_mut()
            .filter(|d| d.awake == 0 && !d.queue.is_empty())
            .map(|d| {
                d.awake += 1;
                d.src
            })
            .collect()
    });
    for src in stalled {
        create_agent(src);
    }
}

/// What an agent does next.
enum Next {
    Perform(u64, u64),
    Sleep,
    /// Idle with the core's pool of sleeping agents full: end.
    End,
}

/// An agent's life: take requests from its daemon's queue and perform them; sleep when
/// there are none (or end, if the core keeps enough agents asleep); end after
/// `rpcc.agents` requests.
extern "C" fn agent_main(src: u64) -> ! {
    let src = src as usize;
    let stats = &percore::this().rpcc.stats;
    let limit = super::agent_limit();
    let me = sched::with(|s| s.current_thread()).expect("an agent is a thread");
    let mut performed: u32 = 0;
    loop {
        let next = super::with_state(|s| {
            let asleep: usize = s.daemons.iter().map(|d| d.sleeping.len()).sum();
            let d = &mut s.daemons[src];
            match d.queue.pop_front() {
                Some((tag, request)) => Next::Perform(tag, request),
                None => {
                    d.awake -= 1;
                    if asleep < POOL.load(Ordering::Relaxed) {
                        d.sleeping.push(me);
                        Next::Sleep
                    } else {
                        Next::End
                    }
                }
            }
        });
        let (tag, request) = match next {
            Next::Perform(tag, request) => (tag, request),
            Next::Sleep => {
                sched::block(sched::Block::Agent);
                continue;
            }
            Next::End => end(None),
        };
        if performed > 0 {
            stats.reuse_hits.fetch_add(1, Ordering::Relaxed);
        }
        let record = request;
        // SAFETY: the requester keeps the record alive in its outstanding table until our
        // reply arrives, and touches it only after that (release/acquire via the rings).
        let request: &Request = unsafe { &*(request as *const Request) };
        crate::trace::event(crate::trace::Kind::AgentStart, src as u64, tag);
        begin_work(me, src, tag, record);
        let result = perform(request);
        let deferred = end_work(me);
        crate::trace::event(crate::trace::Kind::AgentEnd, src as u64, tag);
        // A request left waiting (a P on a semaphore) is answered later, by its V.
        if !deferred {
            request.set_reply(result);
            super::reply(src, tag, request);
        }
        performed += 1;
        stats.served.fetch_add(1, Ordering::Relaxed);
        if limit.is_some_and(|l| performed >= l) {
            break;
        }
    }
    // Used up: go, and leave a successor if requests are still queued.
    let successor = super::with_state(|s| {
        let d = &mut s.daemons[src];
        if d.queue.is_empty() {
            d.awake -= 1;
            None
        } else {
            // Our "awake" count passes to the successor.
            Some(src)
        }
    });
    end(successor)
}

/// The running agent ends (no longer counted awake by its daemon), after creating a
/// successor for daemon `successor`'s queued requests; its kernel stack is freed once the
/// core is off it.
fn end(successor: Option<usize>) -> ! {
    let stats = &percore::this().rpcc.stats;
    stats.agents_live.fetch_sub(1, Ordering::Relaxed);
    stats.agents_destroyed.fetch_add(1, Ordering::Relaxed);
    if let Some(src) = successor {
        create_agent(src);
    }
    sched::exit_current()
}

/// Perform one request under its requester's flow: its result.
fn perform(request: &Request) -> Result<super::Out, abi::Error> {
    let flow = &request.flow;
    log::trace!(
        "rpcc: agent on core {} performs flow {} of machine {} core {} (user {})",
        crate::percore::current_core(),
        flow.id,
        flow.machine,
        flow.core,
        flow.user.0
    );
    crate::res::adopt_flow(flow);
    let result = ops::perform(&request.op);
    crate::res::end_remote_flow();
    result
}

// ---- the request an agent performs now, and requests it leaves waiting ------------------
//
// Kept per agent, not per core: an agent may block in the middle of a request (an RPCC
// call of its own, e.g. asking another core whether a pipe's holder still lives), and
// meanwhile other agents and threads of the core run. A semaphore `P` that must wait asks
// [`defer_current`] whether it works for a request of another core; only the agent
// performing that request may say yes (regression: with one record per core, a program's
// `P` on the agent's core during that block took the agent's request as its own; the
// program's `P` returned without a unit, and the request was never answered, so its
// requester on the other core waited for ever: a remote `wc` of a pipeline hung).

/// A request an agent is performing: the agent's thread, the request's source core, tag and
/// record, and whether the agent left it waiting ([`defer_current`]).
pub struct Working {
    thread: u32,
    src: usize,
    tag: u64,
    request: u64,
    deferred: bool,
}

/// Agent `thread` starts performing request `tag` (record `request`) from core `src` (an
/// agent performs one request at a time and always ends it with [`end_work`]).
pub(crate) fn begin_work(thread: u32, src: usize, tag: u64, request: u64) {
    super::with_state(|s| {
        s.working.push(Working {
            thread,
            src,
            tag,
            request,
            deferred: false,
        });
    });
}

/// Agent `thread` is done with its request: whether it left it waiting (then it does not
/// answer it; whoever took the [`Deferred`] does).
pub(crate) fn end_work(thread: u32) -> bool {
    super::with_state(|s| {
        let i = s.working.iter().position(|w| w.thread == thread)?;
        Some(s.working.swap_remove(i).deferred)
    })
    .unwrap_or(false)
}

/// A request an agent left waiting (in a semaphore): its source core, tag and record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferred {
    src: usize,
    tag: u64,
    request: u64,
}

/// The running thread, if it is an agent performing a request of another core, leaves that
/// request waiting: it will not answer it; whoever holds the returned handle does, with
/// [`answer_deferred`]. `None` for any other thread or context (their own wait is theirs),
/// and for a request already left waiting.
pub fn defer_current() -> Option<Deferred> {
    let me = sched::with(|s| s.current_thread())?;
    super::with_state(|s| {
        let w = s
            .working
            .iter_mut()
            .find(|w| w.thread == me && !w.deferred)?;
        w.deferred = true;
        Some(Deferred {
            src: w.src,
            tag: w.tag,
            request: w.request,
        })
    })
}

/// Answer a request an agent left waiting.
pub fn answer_deferred(d: Deferred, r: Result<super::Out, abi::Error>) {
    // SAFETY: the requester keeps the record until our reply (see `agent_main`); nobody
    // else answers a deferred request.
    let request: &Request = unsafe { &*(d.request as *const Request) };
    request.set_reply(r);
    super::reply(d.src, d.tag, request);
}
