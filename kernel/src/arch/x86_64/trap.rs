//! Where every interrupt and exception lands: [`dispatch`] and the fault report.
//!
//! The kernel runs with interrupts masked except in the idle loop, so device interrupts and
//! IPIs arrive from idle (or, from the processes layer on, from user mode). Exceptions in
//! kernel mode are bugs: they print a report (vector, error code, RIP, CR2, core, what the
//! faulting address is, registers and a frame-pointer backtrace) and stop the machine
//! through [`crate::fatal`].

use super::idt::TrapFrame;
use super::{apic, cpu, paging};
use crate::fatal;
use core::fmt::Write;

/// Periodic LAPIC timer.
pub const VEC_TIMER: u64 = 0x40;
/// Cross-core mailbox doorbell (see [`crate::smp`]).
pub const VEC_IPI: u64 = 0x41;
/// COM1 receive, routed through the IOAPIC.
pub const VEC_SERIAL: u64 = 0x42;
/// Base of the (masked) legacy PIC's vectors, so its spurious interrupts are recognisable.
pub const VEC_PIC_BASE: u8 = 0xe0;
/// Not a hardware vector: marks a frame built by the `syscall` entry.
pub const VEC_SYSCALL: u64 = 0x100;
/// LAPIC spurious-interrupt vector.
pub const VEC_SPURIOUS: u64 = 0xff;

const EXCEPTION_NAMES: [&str; 32] = [
    "divide error (#DE)",
    "debug (#DB)",
    "non-maskable interrupt (NMI)",
    "breakpoint (#BP)",
    "overflow (#OF)",
    "bound range exceeded (#BR)",
    "invalid opcode (#UD)",
    "device not available (#NM)",
    "double fault (#DF)",
    "coprocessor segment overrun",
    "invalid TSS (#TS)",
    "segment not present (#NP)",
    "stack-segment fault (#SS)",
    "general protection fault (#GP)",
    "page fault (#PF)",
    "reserved vector 15",
    "x87 floating-point error (#MF)",
    "alignment check (#AC)",
    "machine check (#MC)",
    "SIMD floating-point error (#XM)",
    "virtualization exception (#VE)",
    "control protection (#CP)",
    "reserved vector 22",
    "reserved vector 23",
    "reserved vector 24",
    "reserved vector 25",
    "reserved vector 26",
    "reserved vector 27",
    "hypervisor injection (#HV)",
    "VMM communication (#VC)",
    "security exception (#SX)",
    "reserved vector 31",
];

/// Name of an exception vector.
pub fn exception_name(vector: u64) -> &'static str {
    EXCEPTION_NAMES
        .get(vector as usize)
        .copied()
        .unwrap_or("interrupt")
}

/// Entry from `trap_common` with the saved registers.
pub extern "C" fn dispatch(frame: &mut TrapFrame) {
    let from_user = frame.came_from_user();
    if frame.vector == 2 {
        // An NMI stops the machine (fatal): no lock, no accounting.
        fatal::on_nmi(frame);
    }
    // Mode accounting and, in big-lock mode, the kernel lock (P2's entry to the kernel).
    let kernel_work = frame.vector < 32 || frame.vector == VEC_SYSCALL;
    let left = crate::modes::enter(if kernel_work {
        crate::modes::Mode::Kernel
    } else {
        crate::modes::Mode::Interrupt
    });
    let big = crate::biglock::enabled();
    let held = big && crate::biglock::held();
    if big {
        crate::biglock::flush_if_stale();
        crate::biglock::acquire();
    }
    crate::trace::event(crate::trace::Kind::Entry, frame.vector, frame.rax);
    match frame.vector {
        0..=31 if from_user => crate::proc::fault_current(frame, cpu::read_cr2()),
        0..=31 => kernel_exception(frame),
        VEC_SYSCALL => crate::syscall::dispatch(frame),
        VEC_TIMER => {
            crate::time::on_tick();
            crate::proc::sched::on_tick(from_user);
            crate::rpcc::on_tick();
            apic::eoi();
        }
        VEC_IPI => {
            apic::eoi();
            crate::smp::on_ipi();
        }
        VEC_SERIAL => {
            crate::percore::this()
                .stats
                .serial_irqs
                .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            crate::console::on_serial_interrupt();
            crate::proc::sched::with(|s| s.wake_all(|b| b == crate::proc::sched::Block::Console));
            apic::eoi();
        }
        VEC_SPURIOUS => {}
        v if (u64::from(VEC_PIC_BASE)..u64::from(VEC_PIC_BASE) + 16).contains(&v) => {}
        v => {
            log::warn!("unexpected interrupt vector {v:#x}");
            apic::eoi();
        }
    }
    // Back to user mode: the place where a woken higher-priority thread or the end of a
    // time slice takes the core (the kernel itself is never preempted).
    if from_user {
        crate::proc::sched::preempt_if_needed();
        leave_for_user(frame.vector);
    } else {
        // Back to the kernel code we interrupted (the idle loop, a halting wait): as it was.
        if big && !held {
            crate::biglock::release();
        }
        crate::modes::enter(left);
    }
}

/// The last step before user mode: account user time from here, give up the big lock.
#[inline(always)]
fn leave_for_user(vector: u64) {
    crate::trace::event(crate::trace::Kind::Exit, vector, 0);
    crate::modes::enter(crate::modes::Mode::User);
    if crate::biglock::enabled() {
        crate::biglock::release();
    }
}

/// A new thread's first entry to user mode (from `context::prepare_user_entry`'s stack).
pub extern "C" fn first_user_entry() {
    leave_for_user(VEC_SYSCALL);
}

/// An exception with no handler: a kernel bug. Report and stop the machine.
fn kernel_exception(frame: &TrapFrame) -> ! {
    let cr2 = cpu::read_cr2();
    fatal::stop(|w| {
        let mode = if frame.came_from_user() {
            "user"
        } else {
            "kernel"
        };
        let _ = writeln!(
            w,
            "{} {} in {mode} mode on core {}: vector {}, error code {:#x}",
            abi::protocol::FATAL,
            exception_name(frame.vector),
            crate::percore::current_core(),
            frame.vector,
            frame.error_code
        );
        let _ = writeln!(
            w,
            "  rip {:#018x}  ({})",
            frame.rip,
            describe_address(frame.rip)
        );
        if frame.vector == 14 {
            let _ = writeln!(w, "  cr2 {cr2:#018x}  ({})", describe_address(cr2));
            let _ = writeln!(w, "  access: {}", describe_page_fault(frame.error_code));
        } else if frame.vector == 8 {
            // A double fault usually follows a page fault it could not deliver: say where.
            let _ = writeln!(
                w,
                "  cr2 {cr2:#018x}  ({}, the last page-fault address)",
                describe_address(cr2)
            );
        }
        write_registers(w, frame);
        write_backtrace(w, frame.rip, frame.rbp);
    })
}

fn describe_page_fault(code: u64) -> &'static str {
    let present = code & 1 != 0;
    let write = code & 2 != 0;
    let user = code & 4 != 0;
    let fetch = code & 16 != 0;
    match (present, write, fetch, user) {
        (true, true, _, false) => "kernel write to a read-only page",
        (true, _, true, false) => "kernel instruction fetch from a no-execute page",
        (true, false, false, false) => "kernel read violated page protection",
        (false, true, _, false) => "kernel write to an unmapped page",
        (false, _, true, false) => "kernel instruction fetch from an unmapped page",
        (false, false, false, false) => "kernel read from an unmapped page",
        (_, _, _, true) => "user-mode access",
    }
}

/// Say what a kernel address is, so a report reads "write to kernel text" at a glance.
pub fn describe_address(a: u64) -> &'static str {
    let l = paging::image_layout();
    let is_canonical = !(0x0000_8000_0000_0000..0xffff_8000_0000_0000).contains(&a);
    if !is_canonical {
        "non-canonical address"
    } else if a < 0x1000 {
        "null page"
    } else if (l.text.0..l.text.1).contains(&a) {
        "kernel text"
    } else if (l.rodata.0..l.rodata.1).contains(&a) {
        "kernel rodata"
    } else if (l.data.0..l.data.1).contains(&a) {
        "kernel data/bss"
    } else if a < 0x0000_8000_0000_0000 {
        "user half"
    } else if a < paging::PHYS_OFFSET
        + (paging::KSTACK_PML4_SLOT as u64 - 256) * paging::PML4_SLOT_SPAN
    {
        "direct map"
    } else if crate::mm::kstack::is_guard_page(a) {
        "guard page of a kernel stack"
    } else if crate::mm::kstack::owner_of(a).is_some() {
        "kernel stack"
    } else {
        "unmapped kernel address"
    }
}

fn write_registers(w: &mut dyn Write, f: &TrapFrame) {
    let _ = writeln!(
        w,
        "  rsp {:#018x} rflags {:#x} cs {:#x} ss {:#x}",
        f.rsp, f.rflags, f.cs, f.ss
    );
    let _ = writeln!(
        w,
        "  rax {:#018x} rbx {:#018x} rcx {:#018x} rdx {:#018x}",
        f.rax, f.rbx, f.rcx, f.rdx
    );
    let _ = writeln!(
        w,
        "  rsi {:#018x} rdi {:#018x} rbp {:#018x} r8  {:#018x}",
        f.rsi, f.rdi, f.rbp, f.r8
    );
    let _ = writeln!(
        w,
        "  r9  {:#018x} r10 {:#018x} r11 {:#018x} r12 {:#018x}",
        f.r9, f.r10, f.r11, f.r12
    );
    let _ = writeln!(
        w,
        "  r13 {:#018x} r14 {:#018x} r15 {:#018x}",
        f.r13, f.r14, f.r15
    );
}

/// Follow the frame-pointer chain (Musubi is built with frame pointers), reading only
/// words that are mapped, at most 16 frames.
pub fn write_backtrace(w: &mut dyn Write, rip: u64, mut rbp: u64) {
    let _ = write!(w, "  backtrace: {rip:#x}");
    let root = paging::active_root();
    for _ in 0..16 {
        let readable = |a: u64| {
            a >= paging::PHYS_OFFSET && a.is_multiple_of(8) && paging::translate(root, a).is_some()
        };
        if !readable(rbp) || !readable(rbp + 8) {
            break;
        }
        // SAFETY: both words were just found mapped in the active page tables, and kernel
        // stacks are never unmapped while their core runs.
        let (next, ret) = unsafe { (*(rbp as *const u64), *((rbp + 8) as *const u64)) };
        if ret == 0 {
            break;
        }
        let _ = write!(w, " {ret:#x}");
        if next <= rbp {
            break;
        }
        rbp = next;
    }
    let _ = writeln!(w);
    let _ = writeln!(w, "  (symbolise with: addr2line -f -C -e target/kernel/x86_64-unknown-linux-gnu/release/musubi ADDR)");
}
