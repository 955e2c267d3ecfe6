//! Pipes (`pipe`, a resource type): a bounded byte buffer between processes of any cores,
//! with Unix semantics (P0's user pipes, which join processes on different processors).
//!
//! A pipe lives on the core it was opened on; a reader or writer on another core reaches
//! it through the RPCC like any resource (`res::read`/`res::write`). Who holds each end is
//! a list of pids (`PIPE_HOLD`/`PIPE_DROP`, usually set by the parent that wires a
//! pipeline, before its children run): READ answers what is buffered (at most its length),
//! or 0 bytes (EOF) once the buffer is empty and no writer is held; it waits while the
//! buffer is empty and a writer is held. WRITE takes as much as fits (at least one byte)
//! and answers the count, fails `Gone` once no reader is held, and waits while the buffer
//! is full.
//!
//! Waiting is done outside the table (`Later`) by the caller's own thread when it is of
//! this core: it sleeps in the pipe, and every read or write that changes the buffer, and
//! every `PIPE_DROP`, wakes it to try again. An RPCC agent working for a caller of another
//! core does not wait here (a core has few agents, and the write that would end the wait may
//! need one): it answers `Busy` and notes the caller's process; the next change of the
//! pipe tells that process's core (`PipeChanged`, a notice sent once the table's borrow is
//! over), and the caller, waiting there in the pipe's stead, tries again at once. Nothing
//! polls while the pipe is still: a caller that was not noted (the list is full) or whose
//! notice was lost tries again after a pause that grows from 50 us to a tick, as the
//! kernel's own context does (`res::read`/`res::write`), and as every caller did before
//! the notice (`pipe.wait=poll` keeps that design, to compare; `bench agora-parallel`). A
//! holder that ended without dropping its end (killed, faulted) is noticed by the waiters
//! themselves: a sleeping waiter wakes at least once a tick and then asks the holders'
//! cores which holders still live and forgets the others, and every retry from another
//! core does the same, so EOF and `Gone` come at most a tick or so late and nothing waits
//! for ever.
//! A pid that moved to another core (`migrate`) is a new pid: its old one counts as ended.
//!
//! READ and WRITE with `arg` [`control::PIPE_NOWAIT`] never wait: where they would, they
//! first forget the holders that ended (as a waiter does) and try once more, then answer
//! `Again` (a server serving a pipe for others must not block in it: `machd`).
//!
//! OPEN takes the capacity (8 bytes, 1..=[`MAX_CAPACITY`]; no arguments: [`CAPACITY`]).
//! CLOSE answers every waiter `StaleResource`. RES_INFO: size = bytes buffered, detail =
//! readers held << 32 | writers held.

#![deny(unsafe_code)]

use super::flow_pid;
use super::kind::{u64_arg, Later, Resource, Step};
use super::local;
use super::ReadOut;
use crate::percore::current_core;
use crate::proc::sched;
use crate::rpcc::{self, Op, Out};
use abi::res::ResId;
use abi::syscall::control;
use abi::{Error, Pid};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::convert::Infallible;
use core::sync::atomic::{AtomicBool, Ordering};
use crate::cpu_local::CoreCell;

/// The capacity of a pipe opened without arguments (bytes).
pub const CAPACITY: usize = 4096;
/// Largest capacity.
pub const MAX_CAPACITY: usize = 64 * 1024;
/// Most holders of one end.
pub const MAX_HOLDERS: usize = 16;
/// Most processes of other cores noted as waiting for one pipe (past that they poll).
pub const MAX_REMOTE_WAITERS: usize = 32;

/// Waiters of other cores are noted and told of the next change (`pipe.wait=notify`, the
/// default); with `pipe.wait=poll` they only try again after their pauses (the earlier
/// design, kept so that the two can be compared).
static NOTIFY: AtomicBool = AtomicBool::new(true);

/// Choose how waiters of other cores learn of a change (boot option `pipe.wait=`).
pub fn set_notify(on: bool) {
    NOTIFY.store(on, Ordering::Relaxed);
}

/// A pipe (boxed: a table slot stays small).
pub struct Pipe(Box<Inner>);

impl core::ops::Deref for Pipe {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl core::ops::DerefMut for Pipe {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.0
    }
}

/// A pipe's buffer, who holds its ends, and the threads of this core waiting in it.
pub struct Inner {
    buf: VecDeque<u8>,
    capacity: usize,
    readers: Vec<Pid>,
    writers: Vec<Pid>,
    sleepers: Vec<u32>,
    /// Processes of other cores whose READ or WRITE was answered `Busy`: told of the next
    /// change.
    remote: Vec<Pid>,
}

/// A READ that found the pipe empty with a writer held: wait for bytes or EOF.
pub struct ReadWait {
    len: u64,
    /// `PIPE_NOWAIT`: look once more, then `Again` ([`once`]).
    nowait: bool,
}

/// A WRITE that found the pipe full: wait for room, or for the last reader to go
/// (`PIPE_NOWAIT`: look once more, then `Again`).
pub struct WriteWait {
    nowait: bool,
}

/// `PIPE_HOLD` of a process: it is checked alive outside the table.
pub struct Hold {
    end: u64,
    pid: Pid,
}

impl Resource for Pipe {
    type ReadLater = ReadWait;
    type WriteLater = WriteWait;
    type ControlLater = Hold;
    type InfoLater = Infallible;

    /// The capacity (8 bytes), or none for [`CAPACITY`].
    fn open(args: &[u8]) -> Result<Self, Error> {
        let capacity = if args.is_empty() {
            CAPACITY
        } else {
            usize::try_from(u64_arg(args)?).map_err(|_| Error::InvalidArgument)?
        };
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(Error::InvalidArgument);
        }
        Ok(Pipe(Box::new(Inner {
            // Nothing yet: `open` runs before the table charges the capacity
            // (`heap_frames`), so an open refused there must not have taken it. The first
            // write takes the whole capacity at once ([`Inner::try_write`]).
            buf: VecDeque::new(),
            capacity,
            readers: Vec::new(),
            writers: Vec::new(),
            sleepers: Vec::new(),
            remote: Vec::new(),
        })))
    }

    /// Its buffer, at most the capacity: counted as its creator's memory.
    fn heap_frames(&self) -> u64 {
        (self.0.capacity as u64).div_ceil(crate::arch::x86_64::paging::PAGE_SIZE)
    }

    /// The waiters wake and find the pipe gone.
    fn release(mut self, _: Option<ResId>) {
        self.wake();
    }

    /// `arg`: 0, or [`control::PIPE_NOWAIT`] (`Again` rather than a wait).
    fn read(&mut self, len: u64, arg: u64) -> Result<Step<ReadOut, ReadWait>, Error> {
        let nowait = nowait(arg)?;
        Ok(match self.try_read(len) {
            Some(bytes) => Step::Done(ReadOut::Bytes(bytes)),
            None => Step::Later(ReadWait { len, nowait }),
        })
    }

    /// `arg`: as READ's.
    fn write(&mut self, data: &[u8], arg: u64) -> Result<Step<u64, WriteWait>, Error> {
        let nowait = nowait(arg)?;
        Ok(match self.try_write(data)? {
            Some(n) => Step::Done(n),
            None => Step::Later(WriteWait { nowait }),
        })
    }

    /// `INFO`: bytes buffered; `PIPE_HOLD`, `PIPE_DROP`.
    fn control(&mut self, cmd: u64, a: u64, b: u64) -> Result<Step<u64, Hold>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(self.buf.len() as u64)),
            control::PIPE_HOLD => {
                self.end_mut(a)?;
                Ok(Step::Later(Hold {
                    end: a,
                    pid: holder(b)?,
                }))
            }
            control::PIPE_DROP => {
                let pid = holder(b)?;
                let end = self.end_mut(a)?;
                let at = end
                    .iter()
                    .position(|p| *p == pid)
                    .ok_or(Error::NoSuchProcess)?;
                end.swap_remove(at);
                self.wake();
                Ok(Step::Done(0))
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Bytes buffered; readers held << 32 | writers held.
    fn info(&self) -> Step<(u64, u64), Infallible> {
        let ends = ((self.readers.len() as u64) << 32) | self.writers.len() as u64;
        Step::Done((self.buf.len() as u64, ends))
    }
}

/// READ's or WRITE's `arg`: whether it says [`control::PIPE_NOWAIT`] (anything else in
/// it is `InvalidArgument`).
fn nowait(arg: u64) -> Result<bool, Error> {
    match arg {
        0 => Ok(false),
        control::PIPE_NOWAIT => Ok(true),
        _ => Err(Error::InvalidArgument),
    }
}

/// The pid `PIPE_HOLD`/`PIPE_DROP` name: `arg`, or the caller's for 0.
fn holder(arg: u64) -> Result<Pid, Error> {
    match arg {
        0 => flow_pid().ok_or(Error::NoSuchProcess),
        p => crate::machine::local_pid(p),
    }
}

impl Inner {
    fn end_mut(&mut self, end: u64) -> Result<&mut Vec<Pid>, Error> {
        match end {
            control::PIPE_READ_END => Ok(&mut self.readers),
            control::PIPE_WRITE_END => Ok(&mut self.writers),
            _ => Err(Error::InvalidArgument),
        }
    }

    /// READ now: the bytes (none: EOF), or `None` if the caller must wait.
    fn try_read(&mut self, len: u64) -> Option<Vec<u8>> {
        if !self.buf.is_empty() {
            let n = self.buf.len().min(usize::try_from(len).unwrap_or(usize::MAX));
            let bytes: Vec<u8> = self.buf.drain(..n).collect();
            if n > 0 {
                self.wake();
            }
            return Some(bytes);
        }
        if self.writers.is_empty() || len == 0 {
            return Some(Vec::new());
        }
        None
    }

    /// WRITE now: the count taken, or `None` if the caller must wait.
    fn try_write(&mut self, data: &[u8]) -> Result<Option<u64>, Error> {
        if self.readers.is_empty() {
            return Err(Error::Gone);
        }
        if data.is_empty() {
            return Ok(Some(0));
        }
        let n = (self.capacity - self.buf.len()).min(data.len());
        if n == 0 {
            return Ok(None);
        }
        if self.buf.capacity() == 0 {
            // The whole capacity, as charged: a buffer grown by doubling could come to hold
            // twice its charge (found by a review). The charge keeps the core's heap within
            // bounds; a heap that cannot give it anyway is an error, not a kernel fault.
            self.buf
                .try_reserve_exact(self.capacity)
                .map_err(|_| Error::NoMemory)?;
        }
        self.buf.extend(&data[..n]);
        self.wake();
        Ok(Some(n as u64))
    }

    /// Wake every thread waiting in the pipe: each tries again. The processes of other
    /// cores that wait are told once the table's borrow is over ([`send_notices`]).
    fn wake(&mut self) {
        if !self.remote.is_empty() {
            let remote = core::mem::take(&mut self.remote);
            let outbox = &crate::percore::this().pipe_notices;
            outbox.pids.with(|pids| pids.extend(remote));
            outbox.waiting.store(true, Ordering::Relaxed);
        }
        if self.sleepers.is_empty() {
            return;
        }
        let sleepers = core::mem::take(&mut self.sleepers);
        sched::with(|s| {
            for t in sleepers {
                s.wake(t);
            }
        });
    }

    /// Forget the holders in `gone`.
    fn forget(&mut self, gone: &[Pid]) {
        if gone.is_empty() {
            return;
        }
        self.readers.retain(|p| !gone.contains(p));
        self.writers.retain(|p| !gone.contains(p));
        self.wake();
    }
}

impl Later<ReadOut> for ReadWait {
    fn run(self, id: ResId, _: &[u8]) -> Result<ReadOut, Error> {
        let attempt = |p: &mut Pipe| Ok(p.try_read(self.len));
        match self.nowait {
            true => once(id, attempt),
            false => wait(id, attempt),
        }
        .map(ReadOut::Bytes)
    }
}

impl Later<u64> for WriteWait {
    /// `data` is what WRITE was given.
    fn run(self, id: ResId, data: &[u8]) -> Result<u64, Error> {
        let attempt = |p: &mut Pipe| p.try_write(data);
        match self.nowait {
            true => once(id, attempt),
            false => wait(id, attempt),
        }
    }
}

/// A `PIPE_NOWAIT` read or write that would wait: forget the holders that ended, as a
/// waiter does after a tick, and try once more; `Again` if it still would wait. So a
/// caller that asks again and again instead of waiting (`machd`, for a program of another
/// machine) reads EOF, or fails `Gone`, once the other side's holders have died without
/// letting go, as a waiter would; before, it was answered `Again` for ever.
fn once<T>(
    id: ResId,
    mut attempt: impl FnMut(&mut Pipe) -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let gone = ended_holders(id)?;
    local::with_state(id, &[], |p: &mut Pipe| {
        p.forget(&gone);
        attempt(p)
    })?
    .ok_or(Error::Again)
}

impl Later<u64> for Hold {
    /// Hold the end for a live process (at most [`MAX_HOLDERS`] per end; holding twice is
    /// holding once).
    fn run(self, id: ResId, _: &[u8]) -> Result<u64, Error> {
        if !alive(self.pid) {
            return Err(Error::NoSuchProcess);
        }
        local::with_state(id, &[], |p: &mut Pipe| {
            let end = p.end_mut(self.end)?;
            if !end.contains(&self.pid) {
                if end.len() >= MAX_HOLDERS {
                    return Err(Error::Limit);
                }
                end.push(self.pid);
            }
            Ok(0)
        })
    }
}

/// Wait in pipe `id` until `attempt` answers: the running thread sleeps in the pipe until a
/// change wakes it or a tick passes; after a tick it forgets the holders that ended (and
/// gives up if its requester ended). Where nobody here can wait (an RPCC agent working for
/// another core's caller, big-lock mode working for another core, or the kernel's own
/// context) it forgets the ended holders, tries once more, notes a requester of another
/// core for the next change's notice ([`send_notices`]) and answers `Busy`: the caller
/// waits for that notice, or a pause that grows from 50 us to a tick
/// (`res::read`/`res::write`).
/// (An agent must not wait here: the agents a core may have are few, and the write that
/// would end the wait may need one.)
fn wait<T>(
    id: ResId,
    mut attempt: impl FnMut(&mut Pipe) -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let me = if crate::structure::serves_running_thread() && !super::flow_is_remote() {
        sched::with(|s| s.current_thread())
    } else {
        None
    };
    // Who waits elsewhere when nobody can wait here: the requester of another core.
    let remote = match me {
        None if NOTIFY.load(Ordering::Relaxed) => {
            flow_pid().filter(|p| p.core() != current_core())
        }
        _ => None,
    };
    let tick = 1_000_000_000 / crate::time::HZ;
    let mut look = me.is_none();
    loop {
        let mut gone = Vec::new();
        if look {
            gone = ended_holders(id)?;
            if flow_pid().is_some_and(|p| p.core() != current_core() && !alive(p)) {
                return Err(Error::Gone);
            }
        }
        let done = local::with_state(id, &[], |p: &mut Pipe| {
            p.forget(&gone);
            let r = attempt(p)?;
            if let (None, Some(me)) = (&r, me) {
                if !p.sleepers.contains(&me) {
                    p.sleepers.push(me);
                }
            }
            if let (None, Some(pid)) = (&r, remote) {
                if !p.remote.contains(&pid) && p.remote.len() < MAX_REMOTE_WAITERS {
                    p.remote.push(pid);
                }
            }
            Ok(r)
        })?;
        if let Some(v) = done {
            return Ok(v);
        }
        if me.is_none() {
            return Err(Error::Busy);
        }
        let deadline = crate::time::now_ns().saturating_add(tick);
        sched::block(sched::Block::Pipe(deadline));
        look = crate::time::now_ns() >= deadline;
    }
}

/// One core's processes of other cores to tell that a pipe of this core changed
/// (`percore`'s `pipe_notices`): filled by `wake` inside the table's borrow, emptied by
/// [`send_notices`] after it. `waiting` spares every resource operation a borrow.
pub struct Outbox {
    waiting: AtomicBool,
    pids: CoreCell<Vec<Pid>>,
}

impl Outbox {
    pub const fn new() -> Self {
        Outbox {
            waiting: AtomicBool::new(false),
            pids: CoreCell::new(Vec::new()),
        }
    }
}

/// Tell the processes that pipes of this core woke (`wake`) that their pipe changed: one
/// `PipeChanged` notice each, to its core. Called after every resource operation of this
/// core (`res::local`), outside the table's borrow.
#[inline]
pub fn send_notices() {
    let core = crate::percore::this();
    // Only this core (or, in big-lock mode, the lock holder acting as it) writes the flag:
    // a load and a store, no locked exchange on every resource operation.
    if core.pipe_notices.waiting.load(Ordering::Relaxed) {
        core.pipe_notices.waiting.store(false, Ordering::Relaxed);
        let pids = core.pipe_notices.pids.with(core::mem::take);
        for pid in pids {
            core.stats.pipe_notices_sent.fetch_add(1, Ordering::Relaxed);
            rpcc::notice(pid.core(), Op::PipeChanged(pid));
        }
    }
}

/// The `PipeChanged` notice, on the core of `pid`: count it, and wake the threads of `pid`
/// that wait for a pipe (each tries again; [`wait_for_change`]).
pub fn changed_for(pid: Pid) {
    crate::percore::this()
        .stats
        .pipe_notices_taken
        .fetch_add(1, Ordering::Relaxed);
    sched::with(|s| {
        let Some(p) = s.processes.get(&pid.serial()).filter(|p| p.pid == pid) else {
            return;
        };
        let threads = p.threads.clone();
        for t in threads {
            if matches!(
                s.state_of(t),
                Some(sched::ThreadState::Blocked(sched::Block::Pipe(_)))
            ) {
                s.wake(t);
            }
        }
    });
}

/// This core's count of `PipeChanged` notices taken, read before a pipe operation on
/// another core: a notice taken since (for this process or another) ends the wait that
/// may follow at once.
#[inline]
pub fn notices_taken() -> u64 {
    crate::percore::this()
        .stats
        .pipe_notices_taken
        .load(Ordering::Relaxed)
}

/// A pipe operation on another core answered `Busy`: wait until a `PipeChanged` notice
/// comes (at once if one came since the count was `seen`), or for `ns` at most (a notice
/// that was not sent or got lost; the holders' deaths are noticed by trying again). The
/// kernel's own context only sleeps.
pub fn wait_for_change(seen: u64, ns: u64) {
    if sched::with(|s| s.current_thread().is_none()) {
        sched::sleep_ns(ns);
        return;
    }
    let deadline = crate::time::now_ns().saturating_add(ns);
    loop {
        // Checked and blocked in one stretch of kernel code: the notice, taken on this
        // core, comes before the check or finds the thread blocked.
        if notices_taken() != seen || crate::time::now_ns() >= deadline {
            return;
        }
        sched::block(sched::Block::Pipe(deadline));
    }
}

/// The holders of pipe `id` that have ended: asked of their cores, outside the table.
fn ended_holders(id: ResId) -> Result<Vec<Pid>, Error> {
    let (readers, writers) =
        local::with_state(id, &[], |p: &mut Pipe| Ok((p.readers.clone(), p.writers.clone())))?;
    Ok(readers
        .into_iter()
        .chain(writers)
        .filter(|p| !alive(*p))
        .collect())
}

/// Does process `pid` (of any core) live? (A core that cannot be asked: yes, as far as we
/// know.)
pub fn alive(pid: Pid) -> bool {
    let live = |infos: &[abi::ProcInfo]| {
        infos
            .iter()
            .any(|i| i.pid == pid && i.state != abi::STATE_ZOMBIE)
    };
    if pid.core() == current_core() {
        return live(&crate::proc::infos());
    }
    if pid.core() >= crate::smp::cores_planned() {
        return false;
    }
    match rpcc::call(pid.core(), Op::Processes) {
        Ok(Out::Procs(v)) => live(&v),
        _ => true,
    }
}
