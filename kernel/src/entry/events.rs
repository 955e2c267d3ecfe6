//! Events the low layers raise, fanned out to the subsystems that care.
//!
//! The scheduler, the halting waits and process teardown sit below RPCC, resources and
//! IPC: those use the scheduler to block and wake threads. When something happens down
//! there that they must hear about (the idle context came back, the core is about to
//! halt, a thread or a process is gone), the low layer raises one of these events instead
//! of calling each of them by name; this file is the one list of who hears what.
//!
//! | event | raised by | heard by |
//! |---|---|---|
//! | [`halt`] | idle loop, `time::wait_until` | big lock (released around the halt), modes |
//! | [`idle_returned`] | idle loop, after running threads | resources (the kernel's flow), modes (Kernel) |
//! | [`idle_poll`] / [`idle_stop_polling`] | idle loop, nothing to run | RPCC (poll, hybrid spin) |
//! | [`idle_quiet`] | idle loop, woken from a halt | RPCC (nothing to look for: halt again) |
//! | [`thread_may_run_user`] | context switch to a thread | RPCC (senders announce again) |
//! | [`context_resumed`] | context switch, back on a context | resources (its flow) |
//! | [`thread_removed`] | process teardown | RPCC (answers nobody collects) |
//! | [`vregions_detached`] | process teardown | resources (attachment counts) |
//! | [`process_ended`] | process teardown | IPC (waiters get `Gone`), resources (endpoints), function ids (its functions are down), init (the shell ended: start a new one) |
//!
//! Several are on hot paths (every context switch): each is `#[inline]`, a direct call.

use crate::proc::sched::Sched;
use abi::res::{ResId, UserId};
use abi::{Pid, WaitStatus};

/// This core halts until an interrupt (idle, or a halting wait): without the big lock, in
/// Idle mode.
#[inline]
pub fn halt() {
    crate::biglock::halt();
}

/// Nothing to run: write the queued program output (`console`), a chunk at a time with
/// interrupts let in between, until it is all written or a thread is ready. In big-lock
/// mode the big lock is held while a chunk is written and given up only for the window
/// between chunks, as a halt gives it up: a core holding the console without the big lock
/// could meet another core acting as it (`biglock::on_core`), which the console's lock,
/// taken per core, would let in too (found by a review); and held across every chunk, it
/// would keep the other cores out of the kernel for the whole backlog (a second review).
pub fn write_console() {
    while crate::console::queued() {
        let more = crate::console::write_queued();
        crate::biglock::release();
        crate::arch::x86_64::cpu::interrupt_window();
        crate::biglock::acquire();
        if !more || crate::proc::sched::with(|s| s.has_ready()) {
            return;
        }
    }
}

/// The idle context is back from running threads: it acts as the kernel again (a thread
/// that exited never ended its flow), in Kernel mode (the switch back may have come from
/// an interrupt's preemption of a program, in Interrupt mode).
#[inline]
pub fn idle_returned() {
    crate::res::end_flow();
    crate::modes::enter(crate::modes::Mode::Kernel);
}

/// Nothing to run: look for messages from other cores (in poll or hybrid mode, keep
/// looking for a while instead of halting).
#[inline]
pub fn idle_poll() {
    crate::rpcc::idle_poll();
}

/// The idle context is about to halt: senders must announce messages again. True if a
/// message came meanwhile (look again instead of halting).
#[inline]
pub fn idle_stop_polling() -> bool {
    crate::rpcc::stop_polling()
}

/// The idle context woke from a halt with nothing to run: may it halt again at once,
/// without looking for messages (the fast RPCC design in ipi mode)?
#[inline]
pub fn idle_quiet() -> bool {
    crate::rpcc::fast::idle_quiet()
}

/// The core (`core`, this core's record) switches to a thread, which may run user code.
#[inline]
pub fn thread_may_run_user(core: &crate::percore::CoreLocal) {
    crate::rpcc::stop_polling_in(&core.rpcc);
}

/// Back on a context after a switch: its kernel activity acts for its own user again.
#[inline]
pub fn context_resumed(user: UserId) {
    crate::res::resume_flow(user);
}

/// Thread `thread` was removed (its process was killed): nobody will collect its answers.
#[inline]
pub fn thread_removed(thread: u32) {
    crate::rpcc::forget_waiter(thread);
}

/// An ending process's address space let go of these vregions.
#[inline]
pub fn vregions_detached(regions: impl Iterator<Item = ResId>) {
    crate::res::note_detached(regions);
}

/// Process `pid` ended with `status` (`ENDED_MIGRATED`: it lives on under a new pid on
/// another core), with the scheduler's state borrowed as `s`: whoever waits for an answer
/// from it gets `Gone`; unless it moved, its endpoints go; the functions it served are
/// down; if it is the program init keeps
/// running (the shell), init starts a new one.
#[inline]
pub fn process_ended(s: &mut Sched, pid: Pid, ipc: crate::ipc::ProcIpc, status: WaitStatus) {
    let mut ipc = ipc;
    // A crashed server of a function that restarts: its queued requests wait for the next.
    let restarting = crate::ipc::restart::crashed(s, pid, &mut ipc, status);
    crate::ipc::process_ended(s, ipc);
    if status.how != abi::ENDED_MIGRATED {
        crate::res::endpoint::forget_endpoints_of(pid);
    }
    // A function it served is down (a moved server's endpoints name the ended process).
    crate::fnid::server_ended(pid, restarting);
    crate::init::process_ended(s, pid, status);
}
