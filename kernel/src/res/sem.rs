//! Semaphores (`sem`, a resource type): P1's synchronisation between light-weight
//! processes, for any process of any core.
//!
//! A P on a semaphore with no unit waits: a thread of the semaphore's core blocks in the
//! kernel; a request from another core waits *in the semaphore* (the RPCC agent that took it
//! leaves it there and moves on, and the reply is sent when a V gives the unit to it). A V
//! hands its unit to the first waiter still alive, or adds it to the count. Closing the
//! semaphore answers every waiter `StaleResource`.
//!
//! OPEN takes the count; CONTROL `SEM_P`, `SEM_TRY` (P without waiting: `Again` at 0),
//! `SEM_V` and `INFO` (the count); no READ or WRITE.

#![deny(unsafe_code)]

use super::kind::{u64_arg, Later, Resource, Step};
use super::local;
use crate::proc::sched;
use abi::res::ResId;
use abi::syscall::control;
use abi::Error;
use alloc::collections::VecDeque;
use core::convert::Infallible;

/// Largest count.
pub const MAX_COUNT: u64 = 1 << 32;

/// A counting semaphore and who waits in its P.
pub struct Sem {
    count: u64,
    waiters: VecDeque<Waiter>,
}

/// A P that queued thread `0` of this core, after the table: it waits there.
pub struct Wait(u32);

impl Resource for Sem {
    type ReadLater = Infallible;
    type WriteLater = Infallible;
    type ControlLater = Wait;
    type InfoLater = Infallible;

    /// The initial count (at most `MAX_COUNT`).
    fn open(args: &[u8]) -> Result<Self, Error> {
        let count = u64_arg(args)?;
        if count > MAX_COUNT {
            return Err(Error::InvalidArgument);
        }
        Ok(Sem {
            count,
            waiters: VecDeque::new(),
        })
    }

    fn release(self, _: Option<ResId>) {
        closed(self.waiters);
    }

    /// `INFO`: the count; `SEM_V`; `SEM_P`; `SEM_TRY`.
    fn control(&mut self, cmd: u64, _: u64, _: u64) -> Result<Step<u64, Wait>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(self.count)),
            control::SEM_V => v(&mut self.count, &mut self.waiters).map(Step::Done),
            control::SEM_TRY if self.count == 0 => Err(Error::Again),
            control::SEM_TRY => {
                self.count -= 1;
                Ok(Step::Done(0))
            }
            control::SEM_P => match p(&mut self.count, &mut self.waiters)? {
                None => Ok(Step::Done(0)),
                Some(thread) => Ok(Step::Later(Wait(thread))),
            },
            _ => Err(Error::NotSupported),
        }
    }

    /// The count, and the number of waiters (those of this core still alive).
    fn info(&self) -> Step<(u64, u64), Infallible> {
        let waiting = sched::with(|s| {
            self.waiters
                .iter()
                .filter(|w| waits(s, w))
                .count()
        });
        Step::Done((self.count, waiting as u64))
    }
}

impl Later<u64> for Wait {
    /// Queued in the P: wait until a V hands this thread the unit (it is no longer queued)
    /// or the semaphore is closed (the lookup fails).
    fn run(self, id: ResId, _: &[u8]) -> Result<u64, Error> {
        loop {
            sched::block(sched::Block::Sem);
            let queued = local::with_state(id, &[], |s: &mut Sem| {
                Ok(s.waiters.contains(&Waiter::Thread(self.0)))
            })?;
            if !queued {
                return Ok(0);
            }
        }
    }
}

/// How many entries semaphore `id` (of this core) queues, live waiters or not: for the
/// tests.
pub fn queued(id: ResId) -> Result<usize, Error> {
    local::with_state(id, &[], |s: &mut Sem| Ok(s.waiters.len()))
}

/// Who waits in a P.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// A thread of this core.
    Thread(u32),
    /// An RPCC request from another core: answered when a unit comes.
    Remote(crate::rpcc::Deferred),
}

/// P: take a unit if there is one (`None`); else the caller waits: a thread of this core is
/// queued and its id returned (it then blocks in [`Wait`] until a V or a
/// close); a remote request is queued and answered later.
pub fn p(count: &mut u64, waiters: &mut VecDeque<Waiter>) -> Result<Option<u32>, Error> {
    if *count > 0 {
        *count -= 1;
        return Ok(None);
    }
    if let Some(d) = crate::rpcc::defer_current() {
        waiters.push_back(Waiter::Remote(d));
        return Ok(None);
    }
    // Big-lock mode working for another core, or the kernel itself: nobody here can block
    // on it; the caller retries (`res::control`).
    if !crate::structure::serves_running_thread() {
        return Err(Error::Busy);
    }
    match sched::with(|s| {
        // Threads that waited here and were removed (killed with their process) are
        // forgotten first: else each stayed queued until a V, and a semaphore that is
        // never V'd grew by one entry per killed waiter, in kernel memory charged to
        // nobody (found by a review).
        waiters.retain(|w| waits(s, w));
        s.current_thread().filter(|_| s.current_process().is_some())
    }) {
        Some(thread) => {
            waiters.push_back(Waiter::Thread(thread));
            Ok(Some(thread))
        }
        None => Err(Error::Busy),
    }
}

/// Is `w` still waiting: a thread of this core that exists, or a request of another core
/// (its requester's end is settled when a V answers it: `rpcc/orphan.rs`)?
fn waits(s: &sched::Sched, w: &Waiter) -> bool {
    match *w {
        Waiter::Thread(t) => s.thread(t).is_some(),
        Waiter::Remote(_) => true,
    }
}

/// V: give the unit to the first waiter still there, or keep it.
pub fn v(count: &mut u64, waiters: &mut VecDeque<Waiter>) -> Result<u64, Error> {
    while let Some(w) = waiters.pop_front() {
        match w {
            Waiter::Thread(t) => {
                if sched::with(|s| {
                    let alive = s.thread(t).is_some();
                    s.wake(t);
                    alive
                }) {
                    return Ok(0);
                }
            }
            Waiter::Remote(d) => {
                crate::rpcc::answer_deferred(d, Ok(crate::rpcc::Out::Value(0)));
                return Ok(0);
            }
        }
    }
    if *count >= MAX_COUNT {
        return Err(Error::InvalidArgument);
    }
    *count += 1;
    Ok(0)
}

/// The semaphore is gone: every waiter hears so.
pub fn closed(waiters: VecDeque<Waiter>) {
    for w in waiters {
        match w {
            Waiter::Thread(t) => sched::with(|s| s.wake(t)),
            Waiter::Remote(d) => crate::rpcc::answer_deferred(d, Err(Error::StaleResource)),
        }
    }
}
