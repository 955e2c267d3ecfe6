//! Starting an application processor: the real-mode trampoline and INIT-SIPI-SIPI.
//!
//! A started core begins in 16-bit real mode at `TRAMPOLINE_PHYS`. The trampoline code is
//! assembled into the kernel image and copied there before each start; it uses only
//! addresses relative to `TRAMPOLINE_PHYS`. It loads its own GDT, enters protected mode,
//! then long mode with the boot page tables (which identity-map the first GiB and also map
//! the kernel image), and jumps to `ap_start64` in the kernel's higher half. That code
//! switches to the kernel's real page tables and the shared AP boot stack, enables SSE and
//! calls [`crate::entry::boot::ap_entry`] with the core index.
//!
//! Cores are started one at a time (the next only after the previous is online and off the
//! boot stack), so one boot stack and one parameter block suffice.

use super::{apic, cpu, paging};
use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, Ordering};

/// Physical page the trampoline runs from (SIPI vector 0x08).
pub const TRAMPOLINE_PHYS: u64 = 0x8000;
const PARAM_CR3: u64 = 8;
const PARAM_ENTRY: u64 = 16;
const PARAM_ARG: u64 = 24;

/// Bytes of the stack every AP starts on (one at a time).
const AP_BOOT_STACK_SIZE: usize = 32 * 1024;

#[repr(C, align(16))]
struct ApBootStack([u8; AP_BOOT_STACK_SIZE]);

#[no_mangle]
static mut AP_BOOT_STACK: ApBootStack = ApBootStack([0; AP_BOOT_STACK_SIZE]);

/// What `ap_start64` needs, in the kernel image so both page tables map it.
#[repr(C)]
struct ApLaunch {
    kernel_cr3: AtomicU64,
    core: AtomicU64,
}

#[no_mangle]
static AP_LAUNCH: ApLaunch = ApLaunch {
    kernel_cr3: AtomicU64::new(0),
    core: AtomicU64::new(0),
};

global_asm!(
    r#"
    .section .rodata.trampoline, "a"
    .balign 16
    .global ap_trampoline_start
    .global ap_trampoline_end
ap_trampoline_start:
    .code16
    jmp 1f
    .balign 8
    .quad 0                       /* +8:  CR3 (boot page tables, below 4 GiB) */
    .quad 0                       /* +16: 64-bit entry */
    .quad 0                       /* +24: argument */
tramp_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff      /* 0x08: 32-bit code */
    .quad 0x00cf92000000ffff      /* 0x10: data */
    .quad 0x00af9a000000ffff      /* 0x18: 64-bit code */
tramp_gdt_ptr:
    .word 31
    .long tramp_gdt - ap_trampoline_start + 0x8000
1:
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl (tramp_gdt_ptr - ap_trampoline_start + 0x8000)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $(tramp32 - ap_trampoline_start + 0x8000)

    .code32
tramp32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $0xa0, %eax
    movl %eax, %cr4
    movl (0x8000 + 8), %eax
    movl %eax, %cr3
    movl $0xc0000080, %ecx
    rdmsr
    orl $0x900, %eax
    wrmsr
    movl %cr0, %eax
    orl $0x80010001, %eax
    movl %eax, %cr0
    ljmpl $0x18, $(tramp64 - ap_trampoline_start + 0x8000)

    .code64
tramp64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movq (0x8000 + 24), %rdi
    movq (0x8000 + 16), %rax
    jmpq *%rax
ap_trampoline_end:

    .section .text.entry, "ax"
    .global ap_start64
ap_start64:
    movabsq $AP_LAUNCH, %rax
    movq 0(%rax), %rcx
    movq %rcx, %cr3
    movabsq $AP_BOOT_STACK + {stack_size}, %rsp
    call enable_sse
    xorl %ebp, %ebp
    movabsq $AP_LAUNCH, %rax
    movq 8(%rax), %rdi
    call {ap_entry}
    ud2
    "#,
    stack_size = const AP_BOOT_STACK_SIZE,
    ap_entry = sym crate::entry::boot::ap_entry,
    options(att_syntax)
);

extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
    static ap_start64: u8;
}

/// Copy the trampoline to low memory and fill its parameters.
fn install(kernel_cr3: u64, core: usize) {
    let (start, end, entry) = (
        core::ptr::addr_of!(ap_trampoline_start) as usize,
        core::ptr::addr_of!(ap_trampoline_end) as usize,
        core::ptr::addr_of!(ap_start64) as u64,
    );
    let dst = paging::phys_to_virt(TRAMPOLINE_PHYS) as *mut u8;
    assert!(end - start <= 4096, "AP trampoline larger than a page");
    // SAFETY: the page at TRAMPOLINE_PHYS is reserved for the trampoline (low memory is
    // kept out of every frame pool) and no core runs it while we write (cores start one at
    // a time); the parameter slots are inside the copied page.
    unsafe {
        core::ptr::copy_nonoverlapping(start as *const u8, dst, end - start);
        core::ptr::write_volatile(dst.add(PARAM_CR3 as usize) as *mut u64, paging::boot_root());
        core::ptr::write_volatile(dst.add(PARAM_ENTRY as usize) as *mut u64, entry);
        core::ptr::write_volatile(dst.add(PARAM_ARG as usize) as *mut u64, 0);
    }
    AP_LAUNCH.kernel_cr3.store(kernel_cr3, Ordering::Release);
    AP_LAUNCH.core.store(core as u64, Ordering::Release);
}

fn delay_us(us: u64, tsc_hz: u64) {
    let end = cpu::rdtsc() + us * tsc_hz / 1_000_000;
    while cpu::rdtsc() < end {
        core::hint::spin_loop();
    }
}

/// Send INIT-SIPI-SIPI to the core with `apic_id`, which will run as core index `core`.
/// `started` tells whether it has reached Rust; the second SIPI is skipped if so.
pub fn start_core(apic_id: u32, core: usize, tsc_hz: u64, started: impl Fn() -> bool) {
    install(paging::active_root(), core);
    apic::send_init(apic_id);
    // The MP specification asks for 10 ms after INIT; processors of family 6 and later do
    // not need it (Linux skips it for them too), and it would dominate boot time.
    if cpu::Features::read().family < 6 {
        delay_us(10_000, tsc_hz);
    }
    for _ in 0..2 {
        apic::send_startup(apic_id, (TRAMPOLINE_PHYS >> 12) as u8);
        delay_us(200, tsc_hz);
        if started() {
            break;
        }
    }
}
