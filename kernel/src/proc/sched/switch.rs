//! Switching contexts: what a switch needs, decided inside the scheduler's borrow
//! ([`SwitchPlan`]), and the switch itself performed after it ([`perform`]), because the
//! next thread borrows the same cell. [`switch_away`] is the ordinary way (the running
//! thread blocks, yields or is preempted, and the next ready thread or the idle context
//! runs); `handoff.rs` has the direct way.

use super::{with, Block, Sched, ThreadState, TrapFrame, KERNEL_THREAD};
use crate::arch::x86_64::{context, paging};
use crate::mm::kstack::{self, KStack};
use crate::percore;
use crate::time;
use abi::Priority;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;

/// What a switch needs, computed inside the borrow.
pub(super) struct SwitchPlan {
    pub(super) save: *mut u64,
    pub(super) next_rsp: u64,
    pub(super) root: u64,
    pub(super) kstack_top: Option<u64>,
    /// The user the next context acts for (its process's; the kernel for idle).
    pub(super) user: u32,
    /// Its process's pid (0 for none) and priority.
    pub(super) pid: u64,
    pub(super) priority: u32,
    /// Thread left and thread entered (0: the idle context), for the trace.
    pub(super) from: u64,
    pub(super) to: u64,
}

/// Give the core to `next` (a ready thread) or to the idle context; `current_goes` says
/// what becomes of the running thread. Called with no borrow held.
///
/// `at_boundary`: the running thread is on its way back to user mode (its user state is
/// complete in its frame), not inside a system call.
pub(super) fn switch_away(current_goes: Option<ThreadState>, at_boundary: bool) {
    let plan = with(|s| {
        s.account();
        let me = s.current;
        // Where to save our context.
        let save: *mut u64 = match (me, current_goes) {
            (Some(id), Some(state)) => {
                let t = s.threads.get_mut(&id).expect("current thread exists");
                t.state = state;
                t.user_boundary = at_boundary;
                if state == ThreadState::Ready {
                    s.ready[t.priority as usize].push_back(id);
                }
                &mut t.rsp
            }
            // The thread is gone (it exited or was killed): its context is never resumed.
            (Some(_), None) => &mut s.dead_rsp,
            (None, _) => &mut s.idle_rsp,
        };
        let next = if s.return_to_idle && me.is_some() {
            None
        } else {
            s.pick()
        };
        s.return_to_idle = false;
        if next.is_some() && next == me {
            // Picked ourselves (only possible if we were re-queued as Ready): keep running.
            if let Some(t) = next.and_then(|id| s.threads.get_mut(&id)) {
                t.state = ThreadState::Running;
            }
            s.need_resched = false;
            s.slice_used = 0;
            return None;
        }
        s.need_resched = false;
        s.slice_used = 0;
        Some(s.plan_to(save, me, next))
    });
    let Some(plan) = plan else { return };
    perform(plan);
}

impl Sched {
    /// Make `next` (or the idle context) the running context, and say how to switch to it;
    /// the context that leaves is saved at `save`.
    pub(super) fn plan_to(
        &mut self,
        save: *mut u64,
        me: Option<u32>,
        next: Option<u32>,
    ) -> SwitchPlan {
        self.current = next;
        self.current_process = None;
        self.running = None;
        match next.and_then(|id| self.threads.get_mut(&id)) {
            Some(t) => {
                self.running = Some(NonNull::from(&mut *t));
                self.current_process = Some(t.process).filter(|&p| p != KERNEL_THREAD);
                t.state = ThreadState::Running;
                t.fresh = false;
                if t.stop_requested || t.kill_requested {
                    // It stops (or ends) on its way back to user mode.
                    percore::this()
                        .sched_attention
                        .store(true, Ordering::Relaxed);
                }
                let p = self.processes.get(&t.process);
                let root = p
                    .and_then(|p| p.vspace.as_ref())
                    .map_or(paging::kernel_root(), |v| v.root());
                SwitchPlan {
                    save,
                    next_rsp: t.rsp,
                    root,
                    kstack_top: Some(t.kstack.top),
                    user: t.acts_as(p.map_or(0, |p| p.user.0)),
                    pid: p.map_or(0, |p| p.pid.0),
                    priority: p.map_or(Priority::App, |p| p.priority) as u32,
                    from: u64::from(me.unwrap_or(0)),
                    to: u64::from(t.id),
                }
            }
            None => SwitchPlan {
                save,
                next_rsp: self.idle_rsp,
                root: idle_root(),
                kstack_top: None,
                user: 0,
                pid: 0,
                priority: Priority::App as u32,
                from: u64::from(me.unwrap_or(0)),
                to: 0,
            },
        }
    }
}

/// The address space the idle context runs on. It touches only the kernel half, which every
/// address space maps alike, so in per-core mode it keeps the one that is active (Linux's
/// lazy TLB): a thread of the same process woken from idle then resumes without a CR3
/// write, which flushes the TLB (under QEMU's TCG about half of a same-core rendezvous's
/// time). The address space is never freed under it: only its own core frees a process's
/// address space, leaving it first if active (`VSpace::drop`). In big-lock mode another
/// core may free it (acting for this one), so the idle context takes the kernel's tables.
fn idle_root() -> u64 {
    if crate::structure::biglock() {
        paging::kernel_root()
    } else {
        paging::active_root()
    }
}

/// A thread about to block for `why`: program this core's timer for its deadline, if any.
pub(super) fn arm_for(why: Block) {
    if let Block::Sleep(at)
    | Block::Wait(at)
    | Block::Ipc(at)
    | Block::Recv(at)
    | Block::Join(at)
    | Block::Pipe(at) = why
    {
        time::arm(at);
    }
}

/// Switch to the context `plan` describes (no borrow held).
pub(super) fn perform(plan: SwitchPlan) {
    crate::trace::event(crate::trace::Kind::Switch, plan.from, plan.to);
    let core = percore::this();
    if let Some(top) = plan.kstack_top {
        core.set_kernel_stack(top);
        // A thread may run user code: senders must announce messages again.
        crate::entry::events::thread_may_run_user(core);
    }
    enter_space(core, &plan);
    // SAFETY: `save` points into this core's scheduler state (a boxed thread, or the Sched
    // itself), which stays put until the switch writes it; `next_rsp` was saved by a switch
    // or built by `prepare_user_entry` on a stack that is still mapped.
    unsafe { context::switch(plan.save, plan.next_rsp) };
    resumed();
}

/// The next context's identity on this core (`core`, this core's record) and its address
/// space.
#[inline(always)]
fn enter_space(core: &percore::CoreLocal, plan: &SwitchPlan) {
    core.running_user.store(plan.user, Ordering::Relaxed);
    core.running_pid.store(plan.pid, Ordering::Relaxed);
    core.running_priority
        .store(plan.priority, Ordering::Relaxed);
    // SAFETY: `root` maps the kernel half like the kernel's tables (every address space
    // copies it).
    unsafe { crate::proc::vspace::load(plan.root, &core.stats) };
}

/// A handoff's switch (`Sched::handoff`), begun inside the scheduler's borrow once nothing
/// can refuse it: [`perform`]'s steps but the one that may need the borrow (announcing
/// messages: `thread_may_run_user`, done by [`finish_to_user`]), so that only three words
/// leave the borrow instead of the plan.
#[inline(always)]
pub(super) fn begin(plan: &SwitchPlan) {
    crate::trace::event(crate::trace::Kind::Switch, plan.from, plan.to);
    let core = percore::this();
    if let Some(top) = plan.kstack_top {
        core.set_kernel_stack(top);
    }
    enter_space(core, plan);
}

/// Finish a handoff begun by [`begin`] (no borrow held): the thread switched to is blocked
/// in a system call whose result is complete in `frame`, its system-call frame
/// (`ipc::direct`'s register calls). It returns to user mode from here, its own kernel
/// context dropped, unless its way out has more to do than a system call's exit (a stop, a
/// preemption, a dead stack to free: `sched_attention`, `dead_stacks_waiting`), or the
/// kernel runs under the big lock; then it resumes as after [`perform`], and clears its
/// frame's mark itself. (Under the big lock the way out releases the lock, which here
/// would come before this thread's context is saved: another core could then end this
/// thread and free its stack under the save. Found by a review.)
///
/// What the dropped context would have done on its way out is done here in its stead: its
/// flow resumed and ended, its trace exit and its return to user mode's accounting
/// (`entry::leave_handed`). What its wait would have done after the switch is nothing for a
/// marked wait: it has no deadline, and every value on its stack is plain.
pub(super) fn finish_to_user(save: *mut u64, next_rsp: u64, frame: *mut TrapFrame) {
    let core = percore::this();
    // A thread may run user code: senders must announce messages again (this may wake
    // threads, and then raise `sched_attention`).
    crate::entry::events::thread_may_run_user(core);
    if core.sched_attention.load(Ordering::Relaxed)
        || core.dead_stacks_waiting.load(Ordering::Relaxed)
        || crate::structure::biglock()
    {
        core.stats
            .ipc_handoffs_switched
            .fetch_add(1, Ordering::Relaxed);
        // SAFETY: as in `perform`.
        unsafe { context::switch(save, next_rsp) };
    } else {
        // SAFETY: `frame` is the system-call frame of the thread switched to (`handoff`
        // checked it), on its kernel stack, which lives while the thread does; the thread
        // does not run until the switch below.
        unsafe { (*frame).error_code = 0 };
        core.stats.ipc_to_user.fetch_add(1, Ordering::Relaxed);
        crate::entry::leave_handed(core);
        // SAFETY: `save` as in `perform`; `frame` as above, and the thread's kernel context
        // below it is a marked wait's (this function's contract), which nothing resumes:
        // the thread runs from here on, and its next switch saves a new context.
        unsafe { context::switch_to_user(save, frame) };
    }
    resumed();
}

/// Back on a context after a switch.
#[inline(always)]
fn resumed() {
    // This context's kernel activity acts for its own user again.
    crate::entry::events::context_resumed(crate::proc::current_user());
    // Free stacks of threads that ended (we are not on them).
    free_dead_stacks();
}

#[inline(always)]
pub(super) fn free_dead_stacks() {
    // Most switches find none: no borrow (and no call) for them.
    if percore::this().dead_stacks_waiting.load(Ordering::Relaxed) {
        free_dead_stacks_now();
    }
}

#[cold]
#[inline(never)]
fn free_dead_stacks_now() {
    let stacks = with(|s| {
        if s.dead_stacks.is_empty() {
            return Vec::new();
        }
        let keep_current = s
            .current
            .and_then(|c| s.threads.get(&c))
            .map(|t| t.kstack.bottom);
        let (dead, keep): (Vec<KStack>, Vec<KStack>) = s
            .dead_stacks
            .drain(..)
            .partition(|k| Some(k.bottom) != keep_current);
        s.dead_stacks = keep;
        percore::this()
            .dead_stacks_waiting
            .store(!s.dead_stacks.is_empty(), Ordering::Relaxed);
        dead
    });
    for k in stacks {
        kstack::free(k);
    }
}
