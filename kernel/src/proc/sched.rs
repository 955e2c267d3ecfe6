//! Each core's scheduler: its threads, its run queues, and switching between them.
//!
//! A core schedules only its own threads, from its own tables, with no lock (per-core
//! kernel). Three priority levels (driver > server > application, the order AnT's servers
//! need), round robin within a level, preemption by the timer tick when the interrupted
//! code is in user mode, and preemption at once when a higher-priority thread wakes.
//!
//! The kernel is non-preemptible: a thread gives up the core only inside the kernel, at
//! [`block`], [`yield_now`], [`exit_current`] or [`preempt_if_needed`] (on the way back to
//! user mode), or hands it straight to a thread it just gave what it waited for
//! ([`switch_to`], the rendezvous fast path). When no thread is ready the core runs its *idle context*: the stack it booted
//! on, looping in [`run_until`] with interrupts open.
//!
//! All scheduler state lives in the core's `CoreCell<Sched>`. A switch computes what to do
//! inside a borrow and performs the switch after the borrow ends, because the next thread
//! will borrow the same cell.

use super::Process;
use crate::arch::x86_64::{context, cpu, idt::TrapFrame};
use crate::mm::kstack::{self, KStack};
use crate::percore::{self, CoreCell};
use crate::time;
use abi::Priority;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;
use idtable::IdTable;

mod handoff;
mod priority;
mod switch;
pub use handoff::{perform_handoff, switch_to, Handoff, NextRuns};
use switch::{arm_for, begin, finish_to_user, free_dead_stacks, perform, switch_away, SwitchPlan};

/// Pages of each thread's kernel stack.
pub const THREAD_STACK_PAGES: u64 = 8;
/// Ticks a user thread may run before others of its level get a turn.
const SLICE_TICKS: u32 = 1;
/// The `process` of a kernel thread (an RPCC agent): process serials start at 1.
pub const KERNEL_THREAD: u32 = 0;

/// Why a thread is not running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// In WAIT for a child, until this time at the latest (ns since reset).
    Wait(u64),
    /// In SLEEP until this time (ns since reset).
    Sleep(u64),
    /// In CONSOLE_READ, for input.
    Console,
    /// Waiting for the answer to an inter-core RPCC request (its tag).
    Rpcc(u64),
    /// An RPCC agent kept asleep for its next request.
    Agent,
    /// Waiting for an answer (COLLECT, CALL, ENTER), until this time at the latest (ns since
    /// reset): woken by results, not by requests.
    Ipc(u64),
    /// Waiting for a request (RECV, the receiving half of REPLY_RECV), until this time at
    /// the latest: woken by requests (and a retirement's notice), not by results, so that
    /// a server's own asynchronous calls finishing do not switch to it for nothing.
    Recv(u64),
    /// In THREAD_JOIN, until this time at the latest.
    Join(u64),
    /// In a semaphore's P.
    Sem,
    /// Waiting in a pipe (for bytes, room or an end's holders), until this time at the
    /// latest (it then looks for holders that ended).
    Pipe(u64),
    /// A kernel thread waiting for an event whose raiser wakes it by id (the init thread,
    /// for the end of the program it keeps).
    Event,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    Ready,
    Running,
    Blocked(Block),
    /// Not bound to a compute: it keeps its state but does not run (Tender's stopped
    /// process).
    Stopped,
}

pub struct Thread {
    pub id: u32,
    /// Serial of the owning process (on this core); [`KERNEL_THREAD`] for a kernel thread.
    pub process: u32,
    pub priority: Priority,
    pub state: ThreadState,
    /// Ticks it may run before others of its level get a turn (from its compute's mips).
    pub slice_ticks: u32,
    /// Stop instead of becoming ready when what it waits for happens.
    stop_requested: bool,
    /// End its process on the way back to user mode, or where it would block or end
    /// alone first (killed while running elsewhere: big-lock mode).
    kill_requested: bool,
    /// It has never run (its arguments may still be replaced).
    pub fresh: bool,
    /// Its whole user state is in the frame at the top of its kernel stack: it has not run
    /// yet, or it was switched away on its way back to user mode (not in the middle of a
    /// system call). Only such a thread can be stopped at once or moved to another core.
    pub user_boundary: bool,
    /// The user this thread alone acts as (`THREAD_SETUSER`), or 0: its process's user.
    pub acting_user: u32,
    /// Saved kernel stack pointer while not running.
    rsp: u64,
    kstack: KStack,
}

impl Thread {
    /// The user this thread acts as, its process acting as `process_user`.
    #[inline]
    pub fn acts_as(&self, process_user: u32) -> u32 {
        if self.acting_user != 0 {
            self.acting_user
        } else {
            process_user
        }
    }
}

/// One core's scheduler state.
pub struct Sched {
    pub processes: IdTable<Process>,
    /// Children that left this core, kept until their parents' cores heard where to.
    pub(super) forwards: Vec<super::family::Forward>,
    threads: IdTable<Thread>,
    ready: [VecDeque<u32>; Priority::LEVELS],
    current: Option<u32>,
    /// The box of thread `current` in `threads` (`None` with it, or once it left the
    /// table): the running thread without a lookup. Set with `current` (`plan_to`,
    /// `handoff`); cleared before that thread's box leaves the table (`exit_current`,
    /// `remove_thread`).
    running: Option<NonNull<Thread>>,
    /// The running thread's process serial (`None` for idle and kernel threads), kept with
    /// `current` so that the many lookups of the running process need no thread lookup.
    current_process: Option<u32>,
    idle_rsp: u64,
    /// Where a dying thread's context is "saved" (never read).
    dead_rsp: u64,
    /// Kernel stacks of threads that ended, freed once off them.
    dead_stacks: Vec<KStack>,
    next_serial: u32,
    next_thread: u32,
    need_resched: bool,
    slice_used: u32,
    /// The idle context is waiting for a condition (`run_until` with a deadline): give it
    /// the core back at every tick so it can look, even if threads are always ready.
    idle_polls: bool,
    return_to_idle: bool,
    /// Ticks in a row that found a background thread ready and the core busy with others
    /// (see [`BACKGROUND_AGING_TICKS`]).
    background_starved: u32,
    /// The earliest time a stop asked for a migration may be given up (`u64::MAX`: none
    /// asked; `migrate::expire_stops`).
    pub(super) move_stops_due: u64,
}

// SAFETY: `running` points into `threads`, owned by the same `Sched`, so moving the Sched
// moves what it points at with it (the boxes stay put); it is never shared apart from it.
unsafe impl Send for Sched {}

/// Serials from this one up are never handed out ([`Sched::next_serial`]).
pub const LAST_SERIAL: u32 = u32::MAX - 1;

impl Sched {
    pub const fn new() -> Self {
        Sched {
            processes: IdTable::new(),
            forwards: Vec::new(),
            threads: IdTable::new(),
            ready: [const { VecDeque::new() }; Priority::LEVELS],
            current: None,
            running: None,
            current_process: None,
            idle_rsp: 0,
            dead_rsp: 0,
            dead_stacks: Vec::new(),
            next_serial: 1,
            next_thread: 1,
            need_resched: false,
            slice_used: 0,
            idle_polls: false,
            return_to_idle: false,
            background_starved: 0,
            move_stops_due: u64::MAX,
        }
    }

    /// A fresh process serial on this core; `None` once all are used. Serials and thread
    /// ids are never reused (an answer or an orphan names its process or thread by them,
    /// and a thread that exists is taken for the one that asked), so a core that has made
    /// some four billion processes or threads makes no more: a clear error rather than a
    /// counter that wrapped and replaced a live entry (found by a review; in a release
    /// build the addition wrapped silently). The two highest serials are never handed out
    /// (`TEST_PARENT` is the highest of core 0).
    pub fn next_serial(&mut self) -> Option<u32> {
        let serial = self.next_serial;
        (serial < LAST_SERIAL).then(|| {
            self.next_serial += 1;
            serial
        })
    }

    /// Whether a thread id is left ([`Sched::next_serial`]).
    fn thread_ids_left(&self) -> bool {
        self.next_thread < u32::MAX
    }

    /// For the test of the limits above: set the next serial and thread id, returning the
    /// previous ones (put back after the test).
    pub fn set_next_ids(&mut self, serial: u32, thread: u32) -> (u32, u32) {
        let old = (self.next_serial, self.next_thread);
        self.next_serial = serial;
        self.next_thread = thread;
        old
    }

    /// The running thread's process serial (`None` in the idle context and kernel threads).
    pub fn current_process(&self) -> Option<u32> {
        self.current_process
    }

    /// The running thread (`None` in the idle context).
    pub fn current_thread(&self) -> Option<u32> {
        self.current
    }

    /// The running thread, to change (`None` in the idle context).
    #[inline]
    pub fn running_thread_mut(&mut self) -> Option<&mut Thread> {
        // SAFETY: `running` is the box of a thread in `threads` (its field's doc), which
        // stays at its address while in the table; `&mut self` makes this the only
        // reference made through the table meanwhile.
        self.running.map(|t| unsafe { &mut *t.as_ptr() })
    }

    /// Create a kernel thread that runs `entry(arg)` at `priority`, ready to run.
    pub fn add_kernel_thread(
        &mut self,
        entry: extern "C" fn(u64) -> !,
        arg: u64,
        priority: Priority,
    ) -> Option<u32> {
        if !self.thread_ids_left() {
            return None;
        }
        let kstack = kstack::alloc(THREAD_STACK_PAGES)?;
        // SAFETY: a fresh, mapped kernel stack nobody else uses.
        let rsp = unsafe { context::prepare_kernel_entry(kstack.top, entry, arg) };
        Some(self.insert_thread(KERNEL_THREAD, priority, rsp, kstack, true))
    }

    fn insert_thread(
        &mut self,
        process: u32,
        priority: Priority,
        rsp: u64,
        kstack: KStack,
        start: bool,
    ) -> u32 {
        let id = self.next_thread;
        self.next_thread += 1;
        let t = Thread {
            id,
            process,
            priority,
            state: if start {
                ThreadState::Ready
            } else {
                ThreadState::Stopped
            },
            slice_ticks: SLICE_TICKS,
            stop_requested: false,
            kill_requested: false,
            fresh: true,
            user_boundary: true,
            acting_user: 0,
            rsp,
            kstack,
        };
        self.threads.insert(id, t);
        if start {
            self.ready[priority as usize].push_back(id);
            self.note_wakeup(priority);
        }
        id
    }

    /// The kernel-stack top of thread `id` (where its user frame lies).
    pub fn kstack_top(&self, id: u32) -> Option<u64> {
        self.threads.get(&id).map(|t| t.kstack.top)
    }

    pub fn thread(&self, id: u32) -> Option<&Thread> {
        self.threads.get(&id)
    }

    /// Create a thread of process `process` that enters user mode with `frame`: `Limit`
    /// with no thread id left, `NoMemory` with no kernel stack.
    pub fn add_thread(
        &mut self,
        process: u32,
        priority: Priority,
        frame: &TrapFrame,
        fx_image: Option<&[u8; 512]>,
        start: bool,
    ) -> Result<u32, abi::Error> {
        if !self.thread_ids_left() {
            return Err(abi::Error::Limit);
        }
        let kstack = kstack::alloc(THREAD_STACK_PAGES).ok_or(abi::Error::NoMemory)?;
        // SAFETY: a fresh, mapped kernel stack nobody else uses.
        let rsp = unsafe {
            match fx_image {
                Some(fx) => context::prepare_user_entry_with_fpu(kstack.top, frame, fx),
                None => context::prepare_user_entry(kstack.top, frame),
            }
        };
        Ok(self.insert_thread(process, priority, rsp, kstack, start))
    }

    /// Let a stopped thread run, with a slice of `slice_ticks`. `Busy` if it is not stopped.
    pub fn start_thread(&mut self, id: u32, slice_ticks: u32) -> Result<(), abi::Error> {
        let t = self.threads.get_mut(&id).ok_or(abi::Error::NoSuchProcess)?;
        // Only a stopped thread can be started: one that runs (or waits in the kernel)
        // already has the core, and starting it again must change nothing.
        if t.state != ThreadState::Stopped {
            return Err(abi::Error::Busy);
        }
        t.slice_ticks = slice_ticks.max(1);
        t.stop_requested = false;
        t.state = ThreadState::Ready;
        let p = t.priority;
        self.ready[p as usize].push_back(id);
        self.note_wakeup(p);
        Ok(())
    }

    /// Stop a thread: a ready one leaves the run queue at once; a running or blocked one
    /// stops on its way back to user mode.
    pub fn stop_thread(&mut self, id: u32) {
        let Some(t) = self.threads.get_mut(&id) else {
            return;
        };
        match t.state {
            // The running thread stops on its way back to user mode, after the system call
            // has finished and freed what it holds (see `preempt_if_needed`).
            ThreadState::Running => {
                t.stop_requested = true;
                percore::this()
                    .sched_attention
                    .store(true, Ordering::Relaxed);
            }
            ThreadState::Ready if t.user_boundary => {
                t.state = ThreadState::Stopped;
                for q in &mut self.ready {
                    q.retain(|&x| x != id);
                }
            }
            // Ready inside a system call (it was woken), or blocked in one: it stops once
            // the call is done, on its way back to user mode (the flag is raised when it
            // next runs).
            ThreadState::Ready | ThreadState::Blocked(_) => t.stop_requested = true,
            ThreadState::Stopped => {}
        }
    }

    /// The running thread's process was killed by another CPU acting for this core
    /// (big-lock mode): it ends itself on its way back to user mode, or where it would
    /// block first (`block`: it may be inside a system call, waiting for the lock).
    pub fn request_kill(&mut self, id: u32) {
        if let Some(t) = self.threads.get_mut(&id) {
            t.kill_requested = true;
            percore::this()
                .sched_attention
                .store(true, Ordering::Relaxed);
        }
    }

    /// Was the running thread's process killed while it ran (`request_kill`)?
    pub fn kill_requested(&self) -> bool {
        self.current
            .and_then(|c| self.threads.get(&c))
            .is_some_and(|t| t.kill_requested)
    }

    /// Forget a stop asked for a running or blocked thread (a migration gave up).
    pub fn cancel_stop(&mut self, id: u32) {
        if let Some(t) = self.threads.get_mut(&id) {
            t.stop_requested = false;
        }
    }

    /// Whether thread `id` is to stop on its way back to user mode.
    pub fn stop_pending(&self, id: u32) -> bool {
        self.threads.get(&id).is_some_and(|t| t.stop_requested)
    }

    /// A thread's state.
    pub fn state_of(&self, id: u32) -> Option<ThreadState> {
        self.threads.get(&id).map(|t| t.state)
    }

    /// Set a thread's time slice.
    pub fn set_slice(&mut self, id: u32, slice_ticks: u32) {
        if let Some(t) = self.threads.get_mut(&id) {
            t.slice_ticks = slice_ticks.max(1);
        }
    }

    /// The saved user frame of a thread that has never run (to replace its arguments).
    pub fn fresh_frame(&self, id: u32) -> Option<*mut TrapFrame> {
        let t = self.threads.get(&id).filter(|t| t.fresh)?;
        Some((t.kstack.top - core::mem::size_of::<TrapFrame>() as u64) as *mut TrapFrame)
    }

    /// Remove a thread that is not running (its process was killed). Its kernel stack is
    /// not in use (the thread is not running), so it goes back to the pool at once.
    pub fn remove_thread(&mut self, id: u32) {
        if self.current == Some(id) {
            // Never the running thread (its stack is in use); were it so, `running` must
            // not outlive its box.
            self.running = None;
        }
        if let Some(t) = self.threads.remove(&id) {
            debug_assert!(t.state != ThreadState::Running);
            for q in &mut self.ready {
                q.retain(|&x| x != id);
            }
            kstack::free(t.kstack);
        }
    }

    /// Make a blocked thread ready.
    pub fn wake(&mut self, id: u32) {
        let Some(t) = self.threads.get_mut(&id) else {
            return;
        };
        if let ThreadState::Blocked(_) = t.state {
            // A thread asked to stop while blocked still finishes its system call first
            // (it stops on the way back to user mode), so nothing it holds is stranded.
            t.state = ThreadState::Ready;
            let p = t.priority;
            self.ready[p as usize].push_back(id);
            self.note_wakeup(p);
        }
    }

    /// Wake every thread blocked for `what`.
    pub fn wake_all(&mut self, what: impl Fn(Block) -> bool) {
        let ids: Vec<u32> = self
            .threads
            .values()
            .filter(|t| matches!(t.state, ThreadState::Blocked(b) if what(b)))
            .map(|t| t.id)
            .collect();
        for id in ids {
            self.wake(id);
        }
    }

    /// A thread of priority `p` became ready: preempt the current one if it is lower.
    fn note_wakeup(&mut self, p: Priority) {
        let current = self
            .current
            .and_then(|c| self.threads.get(&c))
            .map(|t| t.priority);
        if current.is_none_or(|c| p < c) {
            self.need_resched = true;
            percore::this()
                .sched_attention
                .store(true, Ordering::Relaxed);
        }
    }

    /// Is any thread ready to run?
    pub fn has_ready(&self) -> bool {
        self.ready.iter().any(|q| !q.is_empty())
    }

    /// Does another context want the core: a thread is ready, or a switch was asked for (a
    /// higher-priority wake, the idle context's turn while it polls)? (A thread that halts
    /// in place while it waits gives the core up then.)
    pub fn core_wanted(&self) -> bool {
        self.need_resched || self.has_ready()
    }

    fn pick(&mut self) -> Option<u32> {
        self.ready.iter_mut().find_map(|q| q.pop_front())
    }

    /// Is a thread of a level above `p` ready? One look per level, no iterator (the direct
    /// switches ask on every handoff).
    #[inline(always)]
    fn ready_above(&self, p: Priority) -> bool {
        let levels = &self.ready[..(p as usize).min(Priority::LEVELS)];
        match levels {
            [] => false,
            [a] => !a.is_empty(),
            [a, b] => !a.is_empty() || !b.is_empty(),
            [a, b, c, ..] => !a.is_empty() || !b.is_empty() || !c.is_empty(),
        }
    }

    fn has_ready_at_or_above(&self, p: Priority) -> bool {
        self.ready[..=p as usize].iter().any(|q| !q.is_empty())
    }

    /// Account the running thread's CPU time up to now.
    fn account(&mut self) {
        self.charged_current();
    }

    /// The running process (if any), charged its time per mode (so its CPU time) up to
    /// now: a switch's accounting, and a handoff's lookup of the running process in the
    /// same step ([`handoff`](Self::handoff) then charges nothing). Charging early is
    /// harmless if the handoff is refused: the next switch charges from here.
    #[inline(always)]
    pub fn charged_current(&mut self) -> Option<&mut Process> {
        let now = cpu::rdtsc();
        let p = match self.current_process {
            Some(serial) => self.processes.get_mut(&serial),
            None => None,
        };
        match p {
            Some(p) => {
                crate::modes::move_process_share(now, Some(&mut p.mode_ticks));
                Some(p)
            }
            None => {
                crate::modes::move_process_share(now, None);
                None
            }
        }
    }
}

/// `CPU_TIME`: the running process's CPU time (ns), its slice so far included (accounted
/// now, as a switch would).
pub fn cpu_time_current() -> Option<u64> {
    with(|s| {
        s.account();
        let serial = s.current_process()?;
        s.processes.get(&serial).map(|p| p.cpu_ns())
    })
}

fn sched() -> &'static CoreCell<Sched> {
    &percore::this().sched
}

/// Run `f` on this core's scheduler state.
pub fn with<R>(f: impl FnOnce(&mut Sched) -> R) -> R {
    sched().with(f)
}

/// Sleep `ns` nanoseconds: the running thread blocks; the idle context (kernel tests) runs
/// other threads meanwhile.
pub fn sleep_ns(ns: u64) {
    let until = time::now_ns().saturating_add(ns);
    if with(|s| s.current.is_none()) {
        run_until(ns, || false);
        return;
    }
    while time::now_ns() < until {
        block(Block::Sleep(until));
    }
}

/// Block the running thread for `why` until something wakes it (at the latest when the
/// deadline `why` carries passes: it is armed on this core's timer).
pub fn block(why: Block) {
    // A kill asked while this thread was on its way into the kernel (big-lock mode: another
    // CPU acting for this core found it running and could only mark it, `request_kill`) is
    // carried out here. Blocked, the thread would not reach its way back to user mode, where
    // the mark is looked at, until something woke it: a killed `kv` server slept on in
    // `RECV`, still serving its name, and the next request to it was answered `Gone`.
    // Ending here is what a kill does to a thread found blocked (`end_process`). Only
    // big-lock mode marks threads so: the per-core kernel pays nothing.
    debug_assert!(crate::structure::serves_running_thread());
    if crate::structure::biglock() && with(|s| s.kill_requested()) {
        crate::proc::exit_current(abi::WaitStatus {
            how: abi::ENDED_KILLED,
            ..abi::WaitStatus::default()
        });
    }
    arm_for(why);
    switch_away(Some(ThreadState::Blocked(why)), false);
}

/// Let other ready threads of the same or higher priority run.
pub fn yield_now() {
    let others = with(|s| {
        let p = s
            .current
            .and_then(|c| s.threads.get(&c))
            .map(|t| t.priority);
        p.is_some_and(|p| s.has_ready_at_or_above(p))
    });
    if others {
        switch_away(Some(ThreadState::Ready), false);
    }
}

/// End the running thread for good (its process has ended). Never returns.
pub fn exit_current() -> ! {
    with(|s| {
        // Charge the last slice before the thread (and its process's link to it) goes.
        s.account();
        if let Some(id) = s.current {
            s.running = None;
            if let Some(t) = s.threads.remove(&id) {
                s.dead_stacks.push(t.kstack);
                percore::this()
                    .dead_stacks_waiting
                    .store(true, Ordering::Relaxed);
            }
        }
        s.current_process = None;
    });
    switch_away(None, false);
    unreachable!("a dead thread was resumed")
}

/// On the way back to user mode: switch if a higher-priority thread woke or the slice ran
/// out.
#[inline]
pub fn preempt_if_needed() {
    // The common case (nothing to do) without touching the scheduler's tables and without
    // a call: this runs on every return to user mode.
    if percore::this()
        .sched_attention
        .swap(false, Ordering::Relaxed)
    {
        preempt_now();
    }
}

#[inline(never)]
fn preempt_now() {
    enum Then {
        Stay,
        Preempt,
        Stop,
        Kill,
    }
    let then = with(|s| {
        let Some(t) = s.current.and_then(|c| s.threads.get_mut(&c)) else {
            return Then::Stay;
        };
        if t.kill_requested {
            Then::Kill
        } else if t.stop_requested {
            t.stop_requested = false;
            Then::Stop
        } else if s.need_resched {
            Then::Preempt
        } else {
            Then::Stay
        }
    });
    match then {
        Then::Stay => {}
        Then::Preempt => switch_away(Some(ThreadState::Ready), true),
        Then::Stop => switch_away(Some(ThreadState::Stopped), true),
        Then::Kill => crate::proc::exit_current(abi::WaitStatus {
            how: abi::ENDED_KILLED,
            ..abi::WaitStatus::default()
        }),
    }
}

/// Timer interrupt on this core at `now`: wake the threads whose deadline passed and finish
/// due IPC timers; on a periodic `tick` also count the slice and note idleness. Returns the
/// earliest deadline still pending on this core (`u64::MAX`: none), for `time::rearm`.
pub fn on_timer(now: u64, tick: bool, from_user: bool) -> u64 {
    let core = percore::this();
    with(|s| {
        let mut earliest = u64::MAX;
        let mut due = Vec::new();
        for t in s.threads.values() {
            if let ThreadState::Blocked(
                Block::Sleep(at)
                | Block::Wait(at)
                | Block::Ipc(at)
                | Block::Recv(at)
                | Block::Join(at)
                | Block::Pipe(at),
            ) = t.state
            {
                if at <= now {
                    time::note_due(at);
                    due.push(t.id);
                } else {
                    earliest = earliest.min(at);
                }
            }
        }
        for id in due {
            s.wake(id);
        }
        earliest = earliest.min(crate::ipc::on_timer(s, now));
        if now >= s.move_stops_due {
            super::migrate::expire_stops(s, now);
        }
        earliest = earliest.min(s.move_stops_due);
        if !tick {
            return earliest;
        }
        s.age_background();
        match s.current {
            None => {
                core.stats.idle_ticks.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) if s.idle_polls => {
                s.need_resched = true;
                core.sched_attention.store(true, Ordering::Relaxed);
                s.return_to_idle = true;
            }
            Some(c) if from_user => {
                s.slice_used += 1;
                let (p, slice) = s.threads.get(&c).map_or((Priority::App, SLICE_TICKS), |t| {
                    (t.priority, t.slice_ticks)
                });
                if s.slice_used >= slice && s.has_ready_at_or_above(p) {
                    s.need_resched = true;
                    core.sched_attention.store(true, Ordering::Relaxed);
                }
            }
            Some(_) => {}
        }
        earliest
    })
}

/// The idle context: run ready threads until `done()` (checked whenever the core comes
/// back here) or the timeout passes. The boot core runs the in-kernel tests this way, and
/// every core ends its boot in `run_until(u64::MAX, || false)`.
pub fn run_until(timeout_ns: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = time::now_ns().saturating_add(timeout_ns);
    let polls = timeout_ns != u64::MAX;
    if polls {
        time::arm_kernel_wait(deadline);
    }
    loop {
        if done() || time::now_ns() >= deadline {
            with(|s| s.idle_polls = false);
            return done();
        }
        with(|s| s.idle_polls = polls);
        let has_work = with(|s| {
            debug_assert!(s.current.is_none(), "run_until called from a thread");
            s.ready.iter().any(|q| !q.is_empty())
        });
        if has_work {
            switch_away(None, false);
            // Back in the idle context, which acts as the kernel (a thread that exited
            // never ended its flow).
            crate::entry::events::idle_returned();
            free_dead_stacks();
        } else {
            crate::mm::frames::drain_remote();
            free_dead_stacks();
            // Blocks other cores freed come home, and spare heap goes back to the pool.
            crate::mm::heap::trim();
            // Messages from other cores first (and, in poll or hybrid mode, keep looking
            // for a while instead of halting).
            crate::entry::events::idle_poll();
            // Programs' output waits for a core with nothing better to do (`console`).
            crate::entry::events::write_console();
            if with(|s| s.has_ready()) || done() || crate::entry::events::idle_stop_polling() {
                continue;
            }
            percore::assert_no_borrows();
            let ticks = percore::this().stats.ticks.load(Ordering::Relaxed);
            crate::entry::events::halt();
            // The core idles for good (no deadline): an interrupt that left nothing to run
            // and was not a tick (whose turn the chores above wait for) halts again at
            // once, if RPCC has nothing to look for (`events::idle_quiet`).
            if !polls {
                let core = percore::this();
                while !with(|s| s.has_ready())
                    && core.stats.ticks.load(Ordering::Relaxed) == ticks
                    && crate::entry::events::idle_quiet()
                {
                    crate::entry::events::halt();
                }
            }
        }
    }
}
