//! The vectors, and the words of a fault report.
//!
//! Every interrupt and exception lands in `crate::entry::trap` (through `idt`'s stubs),
//! which decides what it means. The kernel runs with interrupts masked except in the idle
//! loop, so device interrupts and IPIs arrive from idle or from user mode. Exceptions in
//! kernel mode are bugs: the entry module stops the machine with the report written here
//! ([`write_exception_report`]: vector, error code, RIP, CR2, core, what the faulting
//! address is, registers and a frame-pointer backtrace). This file only formats; it calls
//! nothing above arch.

use super::idt::TrapFrame;
use super::paging;
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

/// Write the report of an exception with no handler (a kernel bug): vector, error code,
/// RIP, CR2, core, what the addresses are, registers and a frame-pointer backtrace.
/// `kernel_stack` says what an address inside the kernel-stack area is (the stacks belong
/// to the kernel's memory manager, not to arch).
pub fn write_exception_report(
    w: &mut dyn Write,
    frame: &TrapFrame,
    cr2: u64,
    core: usize,
    kernel_stack: fn(u64) -> Option<&'static str>,
) {
    let mode = if frame.came_from_user() {
        "user"
    } else {
        "kernel"
    };
    let _ = writeln!(
        w,
        "{} {} in {mode} mode on core {core}: vector {}, error code {:#x}",
        abi::protocol::FATAL,
        exception_name(frame.vector),
        frame.vector,
        frame.error_code
    );
    let _ = writeln!(
        w,
        "  rip {:#018x}  ({})",
        frame.rip,
        describe_address(frame.rip, kernel_stack)
    );
    if frame.vector == 14 {
        let _ = writeln!(
            w,
            "  cr2 {cr2:#018x}  ({})",
            describe_address(cr2, kernel_stack)
        );
        let _ = writeln!(w, "  access: {}", describe_page_fault(frame.error_code));
    } else if frame.vector == 8 {
        // A double fault usually follows a page fault it could not deliver: say where.
        let _ = writeln!(
            w,
            "  cr2 {cr2:#018x}  ({}, the last page-fault address)",
            describe_address(cr2, kernel_stack)
        );
    }
    write_registers(w, frame);
    write_backtrace(w, frame.rip, frame.rbp);
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
pub fn describe_address(a: u64, kernel_stack: fn(u64) -> Option<&'static str>) -> &'static str {
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
    } else if let Some(what) = kernel_stack(a) {
        what
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
