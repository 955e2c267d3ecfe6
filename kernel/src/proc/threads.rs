//! Threads: P1's light-weight processes. A process may run several threads; they share its
//! address space, its resources and its core (a process lives on one core in the per-core
//! kernel, as P1's light-weight processes share one processor), and each has its own
//! kernel stack, registers and FPU/SSE state. Parallelism across cores comes from processes
//! sharing vregions.

#![deny(unsafe_code)]

use super::{sched, Block};
use crate::arch::x86_64::{gdt, idt::TrapFrame, paging};
use abi::{Error, WaitStatus};
use alloc::vec::Vec;

/// Most threads in one process.
pub const MAX_THREADS: usize = 64;
/// Most ended threads of one process whose value waits for a `THREAD_JOIN`: past it the
/// oldest value goes (its join is then `NoSuchProcess`), so a program that never joins
/// cannot grow the kernel's heap without bound (a regression found by a review).
pub const MAX_EXITED: usize = 256;

/// THREAD_CREATE: a new thread of the running process entering `entry(arg)` with its stack
/// pointer at `stack_top`; returns its id.
pub fn create(entry: u64, stack_top: u64, arg: u64) -> Result<u64, Error> {
    if !paging::is_user_half(entry)
        || !paging::is_user_half(stack_top.wrapping_sub(16))
        || !stack_top.is_multiple_of(16)
    {
        return Err(Error::InvalidArgument);
    }
    // As if called: the return address slot lies below the aligned top (never used: the
    // runtime's entry ends with THREAD_EXIT).
    let frame = TrapFrame {
        rdi: arg,
        rip: entry,
        cs: u64::from(gdt::USER_CS),
        rflags: 0x202,
        rsp: stack_top - 8,
        ss: u64::from(gdt::USER_DS),
        ..TrapFrame::ZERO
    };
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get(&serial).ok_or(Error::NoSuchProcess)?;
        if p.threads.len() >= MAX_THREADS {
            return Err(Error::NoMemory);
        }
        let priority = p.priority;
        let tid = s.add_thread(serial, priority, &frame, None, true)?;
        if let Some(p) = s.processes.get_mut(&serial) {
            p.threads.push(tid);
        }
        Ok(u64::from(tid))
    })
}

/// What a THREAD_EXIT ends.
enum Ends {
    /// The thread; others of its process run on.
    Thread,
    /// Its process: it was the last thread.
    Process,
    /// Its process, killed while the thread ran (`Sched::request_kill`).
    Killed,
}

/// THREAD_EXIT: the running thread ends with `value`; the last one ends its process.
pub fn exit(value: u64) -> ! {
    let ends = sched::with(|s| {
        if s.kill_requested() {
            // Its process was killed while it ran (big-lock mode marks the running thread
            // only): ending this thread alone would take the mark with it, and the process
            // would run on.
            return Some(Ends::Killed);
        }
        let me = s.current_thread()?;
        let serial = s.current_process()?;
        let p = s.processes.get_mut(&serial)?;
        if p.threads.len() <= 1 {
            return Some(Ends::Process);
        }
        p.threads.retain(|&t| t != me);
        if p.exited.len() >= MAX_EXITED {
            p.exited.pop_first();
        }
        p.exited.insert(me, value);
        let waiters: Vec<u32> = p.threads.clone();
        for t in waiters {
            if matches!(
                s.state_of(t),
                Some(sched::ThreadState::Blocked(Block::Join(_)))
            ) {
                s.wake(t);
            }
        }
        Some(Ends::Thread)
    });
    match ends {
        Some(Ends::Thread) => {}
        Some(Ends::Killed) => super::exit_current(WaitStatus {
            how: abi::ENDED_KILLED,
            ..WaitStatus::default()
        }),
        Some(Ends::Process) | None => super::exit_current(WaitStatus {
            how: abi::ENDED_EXIT,
            code: value,
            ..WaitStatus::default()
        }),
    }
    sched::exit_current()
}

/// THREAD_JOIN: wait (at most `timeout_ns`) for thread `tid` of the running process to end;
/// its exit value.
pub fn join(tid: u64, timeout_ns: u64) -> Result<u64, Error> {
    let tid = u32::try_from(tid).map_err(|_| Error::NoSuchProcess)?;
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    loop {
        let r = sched::with(|s| {
            let me = s.current_thread().ok_or(Error::NoSuchProcess)?;
            if me == tid {
                return Err(Error::InvalidArgument);
            }
            let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
            let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
            if let Some(v) = p.exited.remove(&tid) {
                return Ok(Some(v));
            }
            if p.threads.contains(&tid) {
                Ok(None)
            } else {
                Err(Error::NoSuchProcess)
            }
        })?;
        if let Some(v) = r {
            return Ok(v);
        }
        if crate::time::now_ns() >= deadline {
            return Err(Error::TimedOut);
        }
        sched::block(Block::Join(deadline));
    }
}

/// THREAD_SELF.
pub fn current() -> Result<u64, Error> {
    sched::with(|s| s.current_thread())
        .map(u64::from)
        .ok_or(Error::NoSuchProcess)
}
