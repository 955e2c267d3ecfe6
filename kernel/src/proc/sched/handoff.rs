//! Direct switches (seL4's fastpath idea): the core goes straight to a thread that was
//! just given what it waits for, with no run-queue round trip and no pick, and the thread
//! that gives it blocks. [`switch_to`] serves the request path's ordinary rendezvous;
//! [`Sched::handoff`] serves the register calls (`ipc::direct`), which do their own work
//! and the switch's in one borrow of the tables and one lookup of each thread and process.

use super::{
    arm_for, begin, finish_to_user, perform, with, Block, Process, Sched, SwitchPlan, Thread,
    ThreadState,
};
use super::{TrapFrame, KERNEL_THREAD};
use crate::percore;
use abi::Priority;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

/// Hand the core straight to thread `next`, which is blocked (in `RECV`, `COLLECT` or a
/// `CALL`) and has just been given what it waits for; the running thread blocks for `why`.
/// Called with no borrow held; returns once the running thread is switched back to.
///
/// Refused (`false`, nothing changed) when the direct switch would be unfair or wrong:
/// `next` is not a blocked thread of this core, there is no running thread, a thread of
/// higher priority than `next` is ready, or the running thread has a stop or kill pending
/// (it must reach its way back to user mode first). The caller then wakes `next` and
/// blocks the ordinary way.
pub fn switch_to(next: u32, why: Block) -> bool {
    let Some(direct) = with(|s| s.direct(next, why)) else {
        return false;
    };
    // The thread handing over the core may wait with a deadline (REPLY_RECV's timeout).
    arm_for(why);
    perform_direct(direct);
    true
}

/// A direct switch decided inside a borrow, performed after it ([`perform_direct`]).
#[must_use]
struct Direct(SwitchPlan);

/// A register call's handoff ([`Sched::handoff`]): decided and begun inside the borrow
/// (the next thread's stack, address space and identity on this core are in place), and
/// finished after it by [`perform_handoff`], which needs only these three words.
#[must_use]
pub struct Handoff {
    save: *mut u64,
    next_rsp: u64,
    frame: *mut TrapFrame,
}

impl Handoff {
    /// The system-call frame of the thread handed the core, where the caller writes its
    /// result (inside the borrow).
    pub fn frame(&self) -> *mut TrapFrame {
        self.frame
    }
}

/// What a thread handed the core needs of its process, read by the caller where it looks
/// the process up anyway ([`Sched::handoff`]).
#[derive(Clone, Copy)]
pub struct NextRuns {
    serial: u32,
    root: u64,
    user: u32,
    pid: u64,
    priority: Priority,
}

impl NextRuns {
    /// For a thread of process `p` (serial `serial`).
    #[inline]
    pub fn of(serial: u32, p: &Process) -> NextRuns {
        NextRuns {
            serial,
            root: p
                .vspace
                .as_ref()
                .map_or(crate::arch::x86_64::paging::kernel_root(), |v| v.root()),
            user: p.user.0,
            pid: p.pid.0,
            priority: p.priority,
        }
    }
}

impl Sched {
    /// [`switch_to`]'s decision: `next` becomes the running thread and the running thread
    /// blocks for `why`; `None`, with nothing changed, where `switch_to` refuses.
    fn direct(&mut self, next: u32, why: Block) -> Option<Direct> {
        let me = self.current?;
        let next_priority = match self.threads.get(&next) {
            Some(t) if matches!(t.state, ThreadState::Blocked(_)) && next != me => t.priority,
            _ => return None,
        };
        let save = self.block_running(me, next_priority, why)?;
        self.account();
        self.need_resched = false;
        self.slice_used = 0;
        Some(Direct(self.plan_to(save, Some(me), Some(next))))
    }

    /// The running thread `me` blocks for `why` to hand the core to a thread of priority
    /// `next_priority`; returns where its context is saved. `None`, with nothing changed, if
    /// that would be unfair or wrong: a ready thread above `next_priority` (it takes the
    /// core the ordinary way), or a stop or kill pending for `me` (it must reach its way
    /// back to user mode first).
    #[inline(always)]
    fn block_running(&mut self, me: u32, next_priority: Priority, why: Block) -> Option<*mut u64> {
        if self.ready_above(next_priority) {
            return None;
        }
        let t = self.running_thread_mut().filter(|t| t.id == me)?;
        if t.stop_requested || t.kill_requested {
            return None;
        }
        t.state = ThreadState::Blocked(why);
        t.user_boundary = false;
        Some(&mut t.rsp)
    }

    /// The register calls' direct switch: `next`, a thread of process `runs` blocked in IPC
    /// on this core whose system-call frame is marked `mark` (its `error_code`), becomes the
    /// running thread, and the running thread (charged already: [`charged_current`]) blocks
    /// for `why`. The switch begins here (`switch::begin`: nothing after this may refuse);
    /// returns the rest, to perform once the borrow ends, with `next`'s frame
    /// ([`Handoff::frame`]: the caller writes its result there). `None`, with nothing
    /// changed, where [`switch_to`] refuses, or if `next`'s frame is not so marked.
    ///
    /// [`charged_current`]: Self::charged_current
    #[inline(always)]
    pub fn handoff(&mut self, next: u32, why: Block, mark: u64, runs: NextRuns) -> Option<Handoff> {
        let me = self.current?;
        if next == me {
            return None;
        }
        let n = self.threads.get_mut(&next)?;
        if !matches!(
            n.state,
            ThreadState::Blocked(Block::Ipc(_) | Block::Recv(_))
        ) || n.process != runs.serial
        {
            return None;
        }
        // A thread in a system call has its user registers in the frame at the top of its
        // kernel stack (`syscall_entry` builds it there).
        let frame = (n.kstack.top - core::mem::size_of::<TrapFrame>() as u64) as *mut TrapFrame;
        #[allow(unsafe_code)]
        // SAFETY: `next` is blocked inside a system call on this core, so `frame` is its
        // system-call frame on its live kernel stack; nothing else touches it meanwhile (its
        // thread is not running, and this core's tables are borrowed).
        if unsafe { (*frame).error_code } != mark {
            return None;
        }
        let next_priority = n.priority;
        let n: *mut Thread = n;
        let save = self.block_running(me, next_priority, why)?;
        #[allow(unsafe_code)]
        // SAFETY: `n` points into `next`'s box in `self.threads`, which stays put: nothing
        // was inserted or removed since it was taken, and the running thread's box, just
        // borrowed, is another one (`next != me`).
        let n = unsafe { &mut *n };
        n.state = ThreadState::Running;
        n.fresh = false;
        // (A kill mark never reaches here: `next` is blocked, and a marked thread ends
        // where it would block, `sched::block`.)
        if n.stop_requested {
            // It stops on its way back to user mode.
            percore::this()
                .sched_attention
                .store(true, Ordering::Relaxed);
        }
        self.current = Some(next);
        self.running = Some(NonNull::from(&mut *n));
        self.current_process = Some(runs.serial).filter(|&p| p != KERNEL_THREAD);
        self.need_resched = false;
        self.slice_used = 0;
        let plan = SwitchPlan {
            save,
            next_rsp: n.rsp,
            root: runs.root,
            kstack_top: Some(n.kstack.top),
            user: n.acts_as(runs.user),
            pid: runs.pid,
            priority: runs.priority as u32,
            from: u64::from(me),
            to: u64::from(next),
        };
        begin(&plan);
        Some(Handoff {
            save,
            next_rsp: plan.next_rsp,
            frame,
        })
    }
}

/// Perform a direct switch decided inside a borrow (no borrow held); returns once the
/// running thread is switched back to.
#[inline]
fn perform_direct(direct: Direct) {
    percore::this()
        .stats
        .ipc_direct
        .fetch_add(1, Ordering::Relaxed);
    perform(direct.0);
}

/// Finish a handoff (no borrow held): the thread handed the core, its result in its frame,
/// returns to user mode from the switch (`switch::finish_to_user`, which counts it).
/// Returns once the running thread is switched back to.
#[inline]
pub fn perform_handoff(h: Handoff) {
    finish_to_user(h.save, h.next_rsp, h.frame);
}
