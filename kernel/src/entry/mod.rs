//! The kernel's one entry: every trap, system call, interrupt, tick and IPI arrives here
//! from arch and is fanned out to the subsystems (the role of xv6's `trap.c`, in the open).
//!
//! Why a module of its own: the code that decides what a kernel entry *means* — which mode
//! the time is charged to, when the big lock is taken, that a fault in user mode kills the
//! process while one in kernel mode stops the machine, what a tick wakes, when a thread is
//! preempted — is kernel policy. Kept inside `arch/x86_64`, it made the architecture layer
//! name a dozen subsystems and every subsystem a possible caller of arch's caller. Here
//! the flow reads top to bottom in one place, and arch stays a leaf: its assembly stubs
//! save the registers and call [`trap`] (or [`syscall`] for the `syscall` instruction,
//! [`first_user_entry`], or the boot entries in [`boot`]), and it calls nothing else above
//! itself.
//!
//! # One entry, in order
//!
//! 1. An NMI is the stop signal of [`crate::fatal`] (or a bug): no lock, no accounting.
//! 2. Mode accounting (`modes`): kernel work (exceptions, system calls) or interrupt.
//! 3. Big-lock mode (`kernel=biglock`): flush a TLB another core made stale, take the lock.
//! 4. The trace event, then the fan-out by vector:
//!    * exception from user mode: `proc::fault_current` ends the process;
//!    * exception in kernel mode: a bug — arch writes the report, `fatal` stops the machine;
//!    * system call: `syscall::dispatch`;
//!    * timer (a deadline or the periodic tick): `time` says whether the tick is due, the
//!      scheduler wakes what is due (and on a tick counts the slice), RPCC checks its
//!      time-outs on a tick, and `time` programs the timer for the next deadline or tick;
//!    * IPI: `smp` runs posted calls; the same doorbell announces RPCC messages;
//!    * serial: the console takes the bytes and the scheduler wakes console readers.
//! 5. The way out. To user mode: the only place a woken higher-priority thread or the end
//!    of a slice takes the core (the kernel itself is never preempted), then user-mode
//!    accounting and the lock is given up ([`leave_for_user`]). Back to kernel code (the
//!    idle loop, a halting wait): the lock and the mode as they were.
//!
//! # Events from below
//!
//! The low layers (the scheduler's idle loop and switches, halting waits, process
//! teardown) do not name the subsystems that care about what happens to them; they raise
//! an event in [`events`], which fans it out. See that module for the list.

#![deny(unsafe_code)]

pub mod boot;
pub mod events;

use crate::arch::x86_64::idt::TrapFrame;
use crate::arch::x86_64::trap::{
    self, VEC_IPI, VEC_PIC_BASE, VEC_SERIAL, VEC_SPURIOUS, VEC_SYSCALL, VEC_TIMER,
};
use crate::arch::x86_64::{apic, cpu, msix, pci_irq};
use crate::modes::{self, Mode};
use crate::{biglock, percore, proc, trace};

/// Entry from arch's `trap_common` with the saved registers: every exception, interrupt
/// and system call.
pub extern "C" fn trap(frame: &mut TrapFrame) {
    let from_user = frame.came_from_user();
    if frame.vector == 2 {
        // An NMI stops the machine (fatal): no lock, no accounting.
        crate::fatal::on_nmi(frame);
    }
    // Mode accounting and, in big-lock mode, the kernel lock (P2's entry to the kernel).
    let kernel_work = frame.vector < 32 || frame.vector == VEC_SYSCALL;
    let left = modes::enter(if kernel_work {
        Mode::Kernel
    } else {
        Mode::Interrupt
    });
    let big = crate::structure::biglock();
    let held = big && biglock::held();
    if big {
        biglock::flush_if_stale();
        biglock::acquire();
    }
    trace::event(trace::Kind::Entry, frame.vector, frame.rax);
    match frame.vector {
        0..=31 if from_user => proc::fault_current(frame, cpu::read_cr2()),
        0..=31 => kernel_exception(frame),
        VEC_SYSCALL => crate::syscall::dispatch(frame),
        VEC_TIMER => {
            let now = crate::time::now_ns();
            let tick = crate::time::on_timer(now);
            let earliest = proc::sched::on_timer(now, tick, from_user);
            if tick {
                crate::rpcc::on_tick();
                crate::console::write_if_stale(now);
            }
            crate::time::rearm(earliest);
            apic::eoi();
        }
        VEC_IPI => {
            apic::eoi();
            crate::smp::on_ipi();
            // The same doorbell announces RPCC messages.
            crate::rpcc::poll();
        }
        VEC_SERIAL => {
            percore::this()
                .stats
                .serial_irqs
                .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            crate::console::on_serial_interrupt();
            proc::sched::with(|s| s.wake_all(|b| b == proc::sched::Block::Console));
            apic::eoi();
        }
        v if (pci_irq::VEC_DEV_BASE..pci_irq::VEC_DEV_BASE + u64::from(pci_irq::LINES))
            .contains(&v) =>
        {
            // A device's line, for its user-mode driver: masked, then a message.
            crate::res::device::on_interrupt((v - pci_irq::VEC_DEV_BASE) as u32);
            apic::eoi();
        }
        v if (msix::VEC_MSI_BASE..msix::VEC_MSI_BASE + u64::from(msix::VECTORS)).contains(&v) => {
            // A device's MSI-X message, for its user-mode driver: masked, then a message.
            crate::res::device::on_msi((v - msix::VEC_MSI_BASE) as u32);
            apic::eoi();
        }
        VEC_SPURIOUS => {}
        v if (u64::from(VEC_PIC_BASE)..u64::from(VEC_PIC_BASE) + 16).contains(&v) => {}
        v => {
            log::warn!("unexpected interrupt vector {v:#x}");
            apic::eoi();
        }
    }
    if from_user {
        proc::sched::preempt_if_needed();
        leave_for_user(frame.vector);
    } else {
        // Back to the kernel code we interrupted (the idle loop, a halting wait): as it was.
        if big && !held {
            biglock::release();
        }
        modes::enter(left);
    }
}

/// Entry from arch's `syscall_entry`: a system call, always from user mode. The same steps
/// as [`trap`] takes for `VEC_SYSCALL` from user mode, without deciding what the entry is
/// (the null call's cost is mostly the entry's: `bench basics`).
pub extern "C" fn syscall(frame: &mut TrapFrame) {
    // This core's record, read once for the steps below (the thread stays on this core).
    let core = percore::this();
    // Entered from user mode, so the mode left is User.
    modes::switch_in(&core.modes, Mode::User, Mode::Kernel);
    if crate::structure::biglock() {
        biglock::flush_if_stale();
        biglock::acquire();
    }
    trace::event(trace::Kind::Entry, VEC_SYSCALL, frame.rax);
    if !crate::syscall::quick(frame, core) {
        crate::syscall::dispatch(frame);
    }
    proc::sched::preempt_if_needed();
    leave_for_user(VEC_SYSCALL);
}

/// The last step before user mode: account user time from here, give up the big lock.
#[inline(always)]
fn leave_for_user(vector: u64) {
    trace::event(trace::Kind::Exit, vector, 0);
    modes::enter(Mode::User);
    if crate::structure::biglock() {
        biglock::release();
    }
}

/// The way out of a system call for a thread whose result another thread wrote into its
/// frame, and which returns to user mode straight from that thread's switch
/// (`sched::finish_to_user`), its own kernel context dropped: what that context would
/// have done on its way out. Its flow resumes and ends at once (`syscall::quick`); it has
/// nothing to be preempted for (the switch looked); [`leave_for_user`]'s steps, on `core`,
/// this core's record, and without its release of the big lock: the switch never returns
/// a thread to user mode under the big lock.
#[inline(always)]
pub fn leave_handed(core: &percore::CoreLocal) {
    debug_assert!(!crate::structure::biglock());
    crate::res::resume_and_end_flow(&core.flow);
    trace::event(trace::Kind::Exit, VEC_SYSCALL, 0);
    modes::enter_in(&core.modes, Mode::User);
}

/// A new thread's first entry to user mode (from `context::prepare_user_entry`'s stack).
pub extern "C" fn first_user_entry() {
    leave_for_user(VEC_SYSCALL);
}

/// An exception with no handler: a kernel bug. Arch writes the report; stop the machine.
fn kernel_exception(frame: &TrapFrame) -> ! {
    let cr2 = cpu::read_cr2();
    crate::fatal::stop(|w| {
        trap::write_exception_report(w, frame, cr2, percore::current_core(), kernel_stack_part)
    })
}

/// What a kernel-stack address is, for the fault report (the stacks are `mm`'s).
fn kernel_stack_part(a: u64) -> Option<&'static str> {
    if crate::mm::kstack::is_guard_page(a) {
        Some("guard page of a kernel stack")
    } else if crate::mm::kstack::owner_of(a).is_some() {
        Some("kernel stack")
    } else {
        None
    }
}
