//! Processes: loading programs from the boot archive, their life cycle, and what the
//! process-related system calls do.
//!
//! A process lives on one core, in that core's scheduler tables; its address space,
//! threads and kernel stacks use that core's memory only. Work on a process of another core
//! (start it there, kill it, wait for it, list it) is a request to that core through RPCC;
//! a process can move to another core ([`migrate`]).

mod create;
pub mod export;
mod family;
pub mod migrate;
pub mod sched;
pub mod text;
pub mod threads;
pub mod vspace;

use crate::arch::x86_64::idt::TrapFrame;
use crate::arch::x86_64::paging::PAGE_SIZE;
use crate::mm::user::IntoAbiError;
use crate::percore::{self, current_core};
use crate::res::quota;
use abi::res::UserId;
use abi::{Error, Pid, Priority, WaitStatus};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use create::push_args;
pub use create::{create_stopped, install, may_add_child, spawn, spawn_image, ChildSlot, Newborn};
pub use family::{
    child_unheard, forwards_here, note_child_ended, note_child_moved, note_move_heard,
    note_orphaned, take_child_status, wait, Followed,
};
use sched::{Block, ThreadState};
use vspace::{VSpace, HEAP_LIMIT};

/// Longest program name and argument buffer a spawn accepts.
pub const MAX_NAME: usize = abi::NAME_LEN;
pub const MAX_ARGS: usize = 4096;

pub struct Process {
    pub pid: Pid,
    pub parent: Pid,
    pub name: heapless::String<MAX_NAME>,
    pub priority: Priority,
    /// `None` once the process has ended (its memory is freed at once).
    pub vspace: Option<VSpace>,
    pub heap_end: u64,
    /// Set when the process ends; the parent's WAIT collects it.
    pub ended: Option<WaitStatus>,
    /// Time per CPU mode while this process was the one on its core (TSC ticks); their
    /// sum is its CPU time ([`Process::cpu_ns`]).
    pub mode_ticks: [u64; abi::MODE_COUNT],
    /// All its threads, the oldest first (light-weight processes in P1's sense, sharing the
    /// address space and the core); empty once it has ended.
    pub threads: Vec<u32>,
    /// Exit values of threads that ended and were not joined yet.
    pub exited: alloc::collections::BTreeMap<u32, u64>,
    /// Started by the kernel at boot (`start=`, the shell): counted until it ends, so
    /// `poweroff` can wait for the boot programs.
    pub boot: bool,
    /// Who it runs as, for resource rights (inherited from its creator; `su` changes it).
    pub user: UserId,
    /// Created by the administrator ([`ADMIN`]) or the kernel: it may change its user
    /// (SETUSER, the shell's `su`) and power the machine off, whatever user it acts as
    /// now. Everyone else keeps the user it was created with.
    pub admin: bool,
    /// Its children that live on other cores or moved, one entry per child: the pid it
    /// was created with and the pid it has now (WAIT asks their cores; `family`).
    pub followed: Vec<Followed>,
    /// Children on their way on other cores: places under its limit that its threads'
    /// requests hold while they wait there ([`ChildSlot`]).
    pub children_coming: usize,
    /// A child on another core ended or moved since the last look (WAIT must not sleep).
    pub child_event: bool,
    /// The pid it had before it migrated here, if it did.
    pub moved_from: Option<Pid>,
    /// Its request and result queues (the request path).
    pub ipc: crate::ipc::ProcIpc,
    /// Migration asked this process to stop (it was running) ([`migrate`]).
    pub stop_for_move: bool,
    /// Its description was taken for a migration; it must not run until the move is
    /// committed or aborted.
    pub moving: bool,
    /// Who took it (`Pid(0)`: the kernel): only that process commits or aborts the move.
    /// Also who asked it to stop on its way to being taken out (`stop_for_move`).
    pub mover: Pid,
    /// Its frames are being read for the move, or a copy of it may run on another core
    /// (a `MIGRATE` until it commits or aborts, an export until it has written the image):
    /// a kill waits (`Busy`), so they are not freed under the reader nor its vregions
    /// counted as detached while the copy maps them. The move always ends: by its mover,
    /// or by the kernel if the mover is killed while it waits (`migrate::mover_gone`).
    pub copying: bool,
    /// Until when (ns since boot) its move is its mover's alone: after that, an export
    /// whose mover is gone is any ancestor's to end (`migrate::MOVER_PATIENCE_NS`).
    pub movers_until: u64,
}

impl Process {
    /// Its CPU time (ns): every mode's time while it was the one on its core. (One sum
    /// when asked, instead of a second clock kept at every switch.)
    pub fn cpu_ns(&self) -> u64 {
        crate::time::tsc_to_ns(self.mode_ticks.iter().sum())
    }

    /// Its oldest live thread (0, no thread, once it has ended): the one that carries its
    /// arguments and its state in `PROCESSES`.
    pub fn main_thread(&self) -> u32 {
        self.threads.first().copied().unwrap_or(0)
    }
}

/// The user boot programs (and so the shell) start as.
pub const FIRST_USER: UserId = UserId::ADMIN;

/// The machine's administrator: the user the shell starts as. Only processes it (or the
/// kernel) created may change their user or power off.
pub const ADMIN: UserId = FIRST_USER;

/// May the running process power the machine off? Only one the administrator or the
/// kernel created ([`Process::admin`]).
pub fn current_is_admin() -> bool {
    sched::with(|s| {
        s.current_process()
            .and_then(|serial| s.processes.get(&serial))
            .is_some_and(|p| p.admin)
    })
}

/// The user of the running process (`UserId::KERNEL` when no process runs: boot, tests).
///
/// Kept per core by the scheduler at every switch, so a kernel entry finds it in one load.
/// Inlined: every system call begins with it (a call costs the null call 11 instructions).
#[inline]
pub fn current_user() -> UserId {
    current_user_in(percore::this())
}

/// [`current_user`] from `core`, this core's record, which the caller holds already.
#[inline(always)]
pub fn current_user_in(core: &percore::CoreLocal) -> UserId {
    UserId(core.running_user.load(Ordering::Relaxed))
}

/// Pid of the running process (kept per core by the scheduler: no table lookup).
#[inline]
pub fn running_pid() -> Option<Pid> {
    Some(Pid(percore::this().running_pid.load(Ordering::Relaxed))).filter(|p| p.0 != 0)
}

/// Priority of the running process (`App` when none runs).
pub fn running_priority() -> Priority {
    Priority::from_u64(u64::from(
        percore::this().running_priority.load(Ordering::Relaxed),
    ))
    .unwrap_or(Priority::App)
}

/// The user a new process runs as: its creator's (the flow's, so a remote creator's too),
/// or [`FIRST_USER`] for the kernel's.
fn user_for_child() -> UserId {
    match crate::res::flow_user() {
        UserId::KERNEL => FIRST_USER,
        u => u,
    }
}

/// Is a process created now (by the flow's user) an administrator's ([`Process::admin`])?
fn admin_for_child() -> bool {
    matches!(crate::res::flow_user(), UserId::KERNEL | ADMIN)
}

/// SETUSER: the running process now acts as `user`. Only a process the administrator or
/// the kernel created may change its user (there is no authentication beyond that: a
/// research system); nobody may become the kernel. Setting the user it has is a no-op.
pub fn set_current_user(user: UserId) -> Result<(), Error> {
    if user == UserId::KERNEL {
        return Err(Error::Denied);
    }
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        if !p.admin && p.user != user {
            return Err(Error::Denied);
        }
        p.user = user;
        // A thread acting as another user (`THREAD_SETUSER`) goes on doing so.
        let acting = s.running_thread_mut().map_or(user.0, |t| t.acts_as(user.0));
        percore::this()
            .running_user
            .store(acting, Ordering::Relaxed);
        Ok(())
    })
}

/// THREAD_SETUSER: the running thread alone now acts as `user`, or, for `UserId::KERNEL`
/// (0), as its process's user again; the process's other threads are not changed, and a
/// thread it creates acts as the process's user. The
/// rule is SETUSER's: only a process the administrator or the kernel created may act as
/// another user. A server acting for its clients on several threads at once (`machd`)
/// needs this: with SETUSER, one thread acting for a client made every other thread act
/// as that client too (found by a review).
pub fn set_thread_user(user: UserId) -> Result<(), Error> {
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get(&serial).ok_or(Error::NoSuchProcess)?;
        if user != UserId::KERNEL && !p.admin && p.user != user {
            return Err(Error::Denied);
        }
        let process_user = p.user.0;
        let t = s.running_thread_mut().ok_or(Error::NoSuchProcess)?;
        t.acting_user = user.0;
        percore::this()
            .running_user
            .store(t.acts_as(process_user), Ordering::Relaxed);
        Ok(())
    })
}

/// Run `f` on the scheduler with the threads of live process `pid` (on this core).
fn with_live_threads<R>(
    pid: Pid,
    f: impl FnOnce(&mut sched::Sched, Vec<u32>) -> Result<R, Error>,
) -> Result<R, Error> {
    sched::with(|s| {
        let threads = live(s, pid)?.threads.clone();
        f(s, threads)
    })
}

/// Process `pid` of this core, if it has not ended.
pub(crate) fn live(s: &sched::Sched, pid: Pid) -> Result<&Process, Error> {
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    s.processes
        .get(&pid.serial())
        .filter(|p| p.ended.is_none())
        .ok_or(Error::NoSuchProcess)
}

/// Let stopped process `pid` run with a slice of `slice_ticks` (a compute bound to it).
pub fn start(pid: Pid, slice_ticks: u32) -> Result<(), Error> {
    with_live_threads(pid, |s, threads| {
        if s.processes.get(&pid.serial()).is_some_and(|p| p.moving) {
            return Err(Error::Busy);
        }
        // Every stopped thread runs again; if none was stopped, it already runs.
        let started = threads
            .into_iter()
            .filter(|&t| s.start_thread(t, slice_ticks).is_ok())
            .count();
        if started == 0 {
            return Err(Error::Busy);
        }
        Ok(())
    })
}

/// Stop process `pid` (its compute was unbound); it keeps its state. A process that is
/// running or waiting in the kernel stops on its way back to user mode.
pub fn stop(pid: Pid) -> Result<(), Error> {
    with_live_threads(pid, |s, threads| {
        for t in threads {
            s.stop_thread(t);
        }
        // The stop is the compute's now, not a move's (which would give it up).
        if let Some(p) = s.processes.get_mut(&pid.serial()) {
            p.stop_for_move = false;
        }
        Ok(())
    })
}

/// The user process `pid` runs as.
pub fn user_of(pid: Pid) -> Option<UserId> {
    if pid.core() != current_core() {
        return None;
    }
    sched::with(|s| s.processes.get(&pid.serial()).map(|p| p.user))
}

/// Set the time slice of process `pid` (its compute's mips changed).
pub fn set_slice(pid: Pid, slice_ticks: u32) {
    let _ = with_live_threads(pid, |s, threads| {
        for t in threads {
            s.set_slice(t, slice_ticks);
        }
        Ok(())
    });
}

/// Replace the arguments of a process that has not run yet.
pub fn set_args(pid: Pid, args: &[&str]) -> Result<(), Error> {
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    sched::with(|s| {
        let p = s.processes.get(&pid.serial()).ok_or(Error::NoSuchProcess)?;
        let frame = s.fresh_frame(p.main_thread()).ok_or(Error::Busy)?;
        let vs = p.vspace.as_ref().ok_or(Error::NoSuchProcess)?;
        let (rsp, argc, argv) = push_args(vs, p.name.as_str(), args)?;
        // SAFETY: the frame lies at the top of the thread's own kernel stack, which it has
        // never run on; nothing else refers to it.
        unsafe {
            (*frame).rsp = rsp;
            (*frame).rdi = argc;
            (*frame).rsi = argv;
        }
        Ok(())
    })
}

/// Run `f` on process `pid`'s address space (a process of this core).
pub fn with_vspace_of<R>(
    pid: Pid,
    f: impl FnOnce(&mut VSpace) -> Result<R, Error>,
) -> Result<R, Error> {
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    sched::with(|s| {
        let p = s
            .processes
            .get_mut(&pid.serial())
            .ok_or(Error::NoSuchProcess)?;
        f(p.vspace.as_mut().ok_or(Error::NoSuchProcess)?)
    })
}

/// Map a vregion's frames into process `pid`'s address space (shared memory).
pub fn attach(
    pid: Pid,
    addr: u64,
    frames: &[u64],
    writable: bool,
    region: abi::res::ResId,
) -> Result<(), Error> {
    with_vspace_of(pid, |vs| vs.attach(addr, frames, writable, region))
}

/// Remove the vregion attached at `addr` in `pid`'s address space; returns the region.
pub fn detach(pid: Pid, addr: u64) -> Result<abi::res::ResId, Error> {
    with_vspace_of(pid, |vs| vs.detach(addr).ok_or(Error::InvalidArgument))
}

/// Take vregion `region`'s attachment out of `pid`'s address space (an ICA being passed);
/// `InvalidArgument` if it is not attached there.
pub fn take_attachment(pid: Pid, region: abi::res::ResId) -> Result<vspace::Attachment, Error> {
    with_vspace_of(pid, |vs| {
        vs.take_attachment(region).ok_or(Error::InvalidArgument)
    })
}

/// Map attachment `a` of vregion `region`, taken out of `pid`'s address space, again where
/// it was.
pub fn put_back(pid: Pid, a: &vspace::Attachment, region: abi::res::ResId) -> Result<(), Error> {
    with_vspace_of(pid, |vs| vs.put_back(a, region))
}

/// `pid`'s attachments: (address, region).
pub fn attachments_of(pid: Pid) -> Result<Vec<(u64, abi::res::ResId)>, Error> {
    with_vspace_of(pid, |vs| {
        Ok(vs.attachments().iter().map(|a| (a.0, a.2)).collect())
    })
}

/// PROCESSES-style record of one process on this core.
pub fn info_of(pid: Pid) -> Option<abi::ProcInfo> {
    infos().into_iter().find(|p| p.pid == pid)
}

/// End process `pid` if alive and forget it (the `process` resource's close; the caller
/// has checked the right to do so, so the kill rule for programs does not apply).
pub fn remove(pid: Pid) -> Result<(), Error> {
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    if !has_ended(pid) {
        end_by_kill(pid)?;
    }
    take_status(pid);
    Ok(())
}

/// Priority of a process on this core.
pub fn priority_of(pid: Pid) -> Option<Priority> {
    if pid.core() != current_core() {
        return None;
    }
    sched::with(|s| s.processes.get(&pid.serial()).map(|p| p.priority))
}

/// Name of a process on this core.
pub fn name_of(pid: Pid) -> Option<heapless::String<MAX_NAME>> {
    if pid.core() != current_core() {
        return None;
    }
    sched::with(|s| s.processes.get(&pid.serial()).map(|p| p.name.clone()))
}

/// End process `serial` with `status`: free its memory, make it a zombie for its parent,
/// wake a waiting parent, remove its threads except the running one (which the caller
/// ends: `exit_current`). Returns whether it ended now.
pub(crate) fn end_process(s: &mut sched::Sched, serial: u32, status: WaitStatus) -> bool {
    // A process that moved keeps its attachments in its new address space.
    let moved = status.how == abi::ENDED_MIGRATED;
    let Some(p) = s.processes.get_mut(&serial) else {
        return false;
    };
    if p.ended.is_some() {
        return false;
    }
    p.ended = Some(status);
    let mut vspace = p.vspace.take();
    let followed = core::mem::take(&mut p.followed);
    let ipc = core::mem::take(&mut p.ipc);
    let parent = p.parent;
    let arrived = p.moved_from.is_some();
    let threads = core::mem::take(&mut p.threads);
    let running = s.current_thread();
    for t in threads.into_iter().filter(|&t| Some(t) != running) {
        s.remove_thread(t);
        crate::entry::events::thread_removed(t);
    }
    // If the process is ending itself its address space is the active one: leave it for
    // the kernel's tables first. (Another process's death must not touch the caller's.)
    if let Some(v) = vspace.as_ref() {
        vspace::leave(v.root());
    }
    if let Some(v) = vspace.as_mut().filter(|_| !moved) {
        crate::entry::events::vregions_detached(v.attachments().iter().map(|a| a.2));
        // A driver's devices let go of its DMA memory before the memory goes; memory a
        // device may still write never goes back to the pool.
        if v.holds_device_memory()
            && !crate::res::device::holder_ended(crate::machine::pid(current_core(), serial))
        {
            v.keep_dma();
        }
    }
    drop(vspace);
    let me = crate::machine::pid(current_core(), serial);
    // Whoever waits for an answer from it gets `Gone`; its endpoints go.
    crate::entry::events::process_ended(s, me, ipc, status);
    if moved {
        // It lives on under a new pid: no zombie here; its parent follows it.
        if s.processes.remove(&serial).is_some_and(|p| p.boot) {
            percore::this()
                .stats
                .boot_programs
                .fetch_sub(1, Ordering::Relaxed);
        }
        family::child_moved(s, parent, me, Pid(status.code), arrived);
    } else {
        family::orphan_children(s, me, followed);
        family::tell_parent(s, parent);
        // Nobody will wait for a child of the kernel: forget it now.
        if parent == Pid(0) && s.processes.remove(&serial).is_some_and(|p| p.boot) {
            percore::this()
                .stats
                .boot_programs
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
    percore::this()
        .stats
        .processes
        .store(s.processes.len() as u64, Ordering::Relaxed);
    true
}

/// Parent id of processes the in-kernel tests start: their zombies stay until
/// [`take_status`] collects them (children of the kernel itself, `Pid(0)`, are forgotten
/// when they end).
pub const TEST_PARENT: Pid = Pid::new(0, u32::MAX);

/// How process `pid` (on this core) ended, if it has; removes the record (like WAIT, for
/// kernel callers).
pub fn take_status(pid: Pid) -> Option<WaitStatus> {
    sched::with(|s| {
        let status = s.processes.get(&pid.serial())?.ended?;
        s.processes.remove(&pid.serial());
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
        Some(status)
    })
}

/// Has process `pid` (on this core) ended, or is it unknown?
pub fn has_ended(pid: Pid) -> bool {
    sched::with(|s| {
        s.processes
            .get(&pid.serial())
            .is_none_or(|p| p.ended.is_some())
    })
}

/// The running process ends with `status` (exit, fault, or kill of itself).
pub fn exit_current(status: WaitStatus) -> ! {
    sched::with(|s| {
        if let Some(serial) = s.current_process() {
            end_process(s, serial, status);
        }
    });
    sched::exit_current()
}

/// A user-mode fault: report it in one line and end the process.
pub fn fault_current(frame: &TrapFrame, cr2: u64) -> ! {
    let (pid, name) = sched::with(|s| {
        let serial = s.current_process().unwrap_or(0);
        let p = s.processes.get(&serial);
        (
            crate::machine::pid(current_core(), serial),
            p.map(|p| p.name.clone()).unwrap_or_default(),
        )
    });
    let what = crate::arch::x86_64::trap::exception_name(frame.vector);
    let address = if frame.vector == 14 { cr2 } else { 0 };
    crate::kprintln!(
        "fault: program {name} pid {pid} core {}: {what} at {address:#x} (rip {:#x}, error code {:#x}); killed",
        current_core(),
        frame.rip,
        frame.error_code
    );
    exit_current(WaitStatus {
        how: abi::ENDED_FAULT,
        code: frame.vector,
        address,
        rip: frame.rip,
    })
}

/// KILL: end process `pid`, on any core. A program may end itself and its descendants,
/// not its parent or strangers; the kernel (no current process) may end any.
pub fn kill(pid: Pid) -> Result<(), Error> {
    let pid = crate::machine::local_pid(pid.0)?;
    if pid.core() == current_core() {
        return end_local(pid, true);
    }
    if !crate::rpcc::reachable(pid.core()) {
        return Err(Error::NoSuchProcess);
    }
    let op = crate::rpcc::Op::Kill {
        pid,
        descendants_only: true,
    };
    crate::rpcc::call(pid.core(), op).map(drop)
}

/// End process `pid` without the descendants rule (the caller checked its rights).
pub fn end_by_kill(pid: Pid) -> Result<(), Error> {
    end_local(pid, false)
}

/// End process `pid` of this core for the flow's process (local or remote requester).
pub fn end_local(pid: Pid, descendants_only: bool) -> Result<(), Error> {
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    let killed = WaitStatus {
        how: abi::ENDED_KILLED,
        ..WaitStatus::default()
    };
    let requester = crate::res::flow_pid().filter(|_| descendants_only);
    let outcome = sched::with(|s| {
        let p = s.processes.get(&pid.serial()).ok_or(Error::NoSuchProcess)?;
        if p.ended.is_some() {
            return Err(Error::NoSuchProcess);
        }
        // The rule first, whoever runs where (regression: in big-lock mode a target running
        // on its own CPU was ended before the rule was checked, so any program could kill
        // any running process; the fuzzer found it). A process may end itself.
        if let Some(me) = requester.filter(|&me| me != pid) {
            // Walk up the parents on this core; the chain may end at the requester on
            // another core (a child it started there).
            let mut at = p.parent;
            let mut hops = 0;
            while at != me {
                let up = (at.core() == current_core())
                    .then(|| s.processes.get(&at.serial()))
                    .flatten();
                match up {
                    Some(q) if hops < 1024 => {
                        at = q.parent;
                        hops += 1;
                    }
                    _ => return Err(Error::Denied),
                }
            }
        }
        if migrate::copying_now(p) {
            // A move reads its frames now (for a moment): not under the reader.
            return Err(Error::Busy);
        }
        if s.current_process() == Some(pid.serial()) {
            if !crate::structure::serves_running_thread() {
                // Big-lock mode, working for its core: it runs on that CPU, in user mode or
                // in a system call waiting for the lock. It ends itself on its next way
                // back to user mode (an IPI follows), or where it would block first
                // (`sched::block`).
                if let Some(t) = s.current_thread() {
                    s.request_kill(t);
                }
                return Ok(false);
            }
            return Ok(true);
        }
        end_process(s, pid.serial(), killed);
        Ok(false)
    })?;
    if outcome {
        exit_current(killed);
    }
    Ok(())
}

/// MEMORY: grow the running process's heap by `bytes` (page-rounded); returns the old end.
pub fn grow_heap(bytes: u64) -> Result<u64, Error> {
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        let old = p.heap_end;
        let pages = bytes.div_ceil(PAGE_SIZE);
        let new_end = pages
            .checked_mul(PAGE_SIZE)
            .and_then(|b| old.checked_add(b))
            .filter(|&e| e <= HEAP_LIMIT)
            .ok_or(Error::NoMemory)?;
        let vs = p.vspace.as_mut().ok_or(Error::NoSuchProcess)?;
        vs.map_zeroed(old, pages, true, false)?;
        p.heap_end = new_end;
        Ok(old)
    })
}

/// Run `f` on the running process's address space (for copying to and from user memory
/// through `mm::user`'s typed addresses; their `UserFault`s become `BadAddress`).
#[inline]
pub fn with_current_vspace<R, E: IntoAbiError>(
    f: impl FnOnce(&VSpace) -> Result<R, E>,
) -> Result<R, Error> {
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let vs = s
            .processes
            .get(&serial)
            .and_then(|p| p.vspace.as_ref())
            .ok_or(Error::NoSuchProcess)?;
        f(vs).map_err(E::into_abi)
    })
}

/// Run `f` on the running process's user memory, reached through the page tables this core
/// has loaded instead of the process table (the rendezvous fast path's copies: no lookup).
/// `NoSuchProcess` outside a user thread.
pub fn with_running_memory<R, E: IntoAbiError>(
    f: impl FnOnce(&vspace::Tables) -> Result<R, E>,
) -> Result<R, Error> {
    if running_pid().is_none() {
        return Err(Error::NoSuchProcess);
    }
    f(&vspace::Tables::loaded()).map_err(E::into_abi)
}

/// The running process's pid.
pub fn current_pid() -> Option<Pid> {
    sched::with(|s| {
        s.current_process()
            .map(|serial| crate::machine::pid(current_core(), serial))
    })
}

/// Records for PROCESSES: this core's processes.
pub fn infos() -> Vec<abi::ProcInfo> {
    sched::with(|s| {
        s.processes
            .values()
            .map(|p| {
                let state = match (p.ended, s.thread(p.main_thread()).map(|t| t.state)) {
                    (Some(_), _) | (None, None) => abi::STATE_ZOMBIE,
                    (None, Some(ThreadState::Running)) => abi::STATE_RUNNING,
                    (None, Some(ThreadState::Ready)) => abi::STATE_READY,
                    (None, Some(ThreadState::Blocked(_))) => abi::STATE_BLOCKED,
                    (None, Some(ThreadState::Stopped)) => abi::STATE_STOPPED,
                };
                let mut name = [0u8; abi::NAME_LEN];
                name[..p.name.len()].copy_from_slice(p.name.as_bytes());
                abi::ProcInfo {
                    pid: p.pid,
                    parent: p.parent,
                    core: current_core() as u32,
                    state,
                    priority: p.priority as u32,
                    name_len: p.name.len() as u32,
                    name,
                    cpu_ns: p.cpu_ns(),
                    memory: p.vspace.as_ref().map_or(0, |v| v.bytes()),
                    mode_ns: p.mode_ticks.map(crate::time::tsc_to_ns),
                }
            })
            .collect()
    })
}
