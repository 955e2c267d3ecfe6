//! Interrupt descriptor table and the entry stubs of all 256 vectors.
//!
//! Every vector gets a 16-byte stub that pushes a dummy error code (where the CPU pushes
//! none) and the vector number, then jumps to `trap_common`, which clears the direction
//! flag, saves all general registers into a [`TrapFrame`], switches to the kernel's GS base
//! if the interrupted code had another (decided from the GS.base MSR, which is right even
//! for an NMI that lands in the middle of an entry), saves the FPU/SSE state (`fxsave64`)
//! on the stack, gives the handler a clean MXCSR and x87 state, and calls
//! [`crate::entry::trap`] (the `syscall` instruction's entry builds the same frame and calls
//! [`crate::entry::syscall`]). Saving FPU state on every entry keeps interrupted code correct
//! whatever the handler does with SSE (the prebuilt `core` uses it freely).
//! The stubs are written in plain assembly because stable Rust has no interrupt ABI.
//!
//! Each core builds its own IDT; NMI, double fault, machine check and debug switch to
//! their IST stacks (see [`super::gdt`]).

use super::gdt::{IST_DEBUG, IST_DOUBLE_FAULT, IST_MACHINE_CHECK, IST_NMI, KERNEL_CS};
use alloc::boxed::Box;
use core::arch::global_asm;

/// Registers saved on every trap, in stack order (lowest address first).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TrapFrame {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub vector: u64,
    pub error_code: u64,
    // Pushed by the CPU.
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl TrapFrame {
    /// All registers zero (a base for building frames).
    pub const ZERO: TrapFrame = TrapFrame {
        rax: 0,
        rbx: 0,
        rcx: 0,
        rdx: 0,
        rsi: 0,
        rdi: 0,
        rbp: 0,
        r8: 0,
        r9: 0,
        r10: 0,
        r11: 0,
        r12: 0,
        r13: 0,
        r14: 0,
        r15: 0,
        vector: 0,
        error_code: 0,
        rip: 0,
        cs: 0,
        rflags: 0,
        rsp: 0,
        ss: 0,
    };

    /// Did the trap interrupt user mode?
    pub fn came_from_user(&self) -> bool {
        self.cs & 3 == 3
    }
}

/// Vectors for which the CPU pushes an error code.
const fn has_error_code(v: usize) -> bool {
    matches!(v, 8 | 10..=14 | 17 | 21 | 29 | 30)
}

/// Bytes an entry reserves below its [`TrapFrame`] for the FPU/SSE state (`save_fpu_clean`):
/// the 512-byte `fxsave` image, MXCSR scratch and room to align to 16. The image is at
/// `(frame - FPU_AREA) & !15`, where `trap_resume` expects the stack pointer.
pub(super) const FPU_AREA: u64 = 528;

global_asm!(
    r#"
    /* The FPU/SSE state of the interrupted code below the frame (16-aligned; trap_resume
       restores it), then a clean state for the handler. */
    .macro save_fpu_clean
    subq ${fpu_area}, %rsp
    andq $-16, %rsp
    fxsave64 (%rsp)
    movl $0x1f80, 512(%rsp)
    ldmxcsr 512(%rsp)
    fninit
    .endm

    /* The general registers in TrapFrame order (rax at the lowest address). */
    .macro push_gprs
    pushq %r15
    pushq %r14
    pushq %r13
    pushq %r12
    pushq %r11
    pushq %r10
    pushq %r9
    pushq %r8
    pushq %rbp
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %rcx
    pushq %rbx
    pushq %rax
    .endm
    .macro pop_gprs
    popq %rax
    popq %rbx
    popq %rcx
    popq %rdx
    popq %rsi
    popq %rdi
    popq %rbp
    popq %r8
    popq %r9
    popq %r10
    popq %r11
    popq %r12
    popq %r13
    popq %r14
    popq %r15
    .endm

    .section .text
    .balign 16
    .global trap_stubs
trap_stubs:
    .set vec, 0
    .rept 256
    .balign 16
    .if (vec == 8) || ((vec >= 10) && (vec <= 14)) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
    .else
    pushq $0
    .endif
    pushq $vec
    jmp trap_common
    .set vec, vec + 1
    .endr

trap_common:
    /* Known flags for the handler: DF and AC (so SMAP holds) clear; IF is already clear. */
    pushq $2
    popfq
    push_gprs
    movq %rsp, %rbx
    /* GS: the kernel's GS.base is a kernel (negative) address. Decide from the MSR, not
       from the saved CS, so an NMI that lands between a user entry and its swapgs still
       finds its own core. r12 remembers whether to swap back. */
    movl $0xc0000101, %ecx
    rdmsr
    xorl %r12d, %r12d
    testl %edx, %edx
    js 2f
    swapgs
    movl $1, %r12d
2:
    .global trap_after_gs
trap_after_gs:
    save_fpu_clean
    movq %rbx, %rdi
    call {dispatch}
    .global trap_resume
trap_resume:
    fxrstor64 (%rsp)
    movq %rbx, %rsp
    testl %r12d, %r12d
    jz 3f
    swapgs
3:
    pop_gprs
    addq $16, %rsp
    iretq

/* System calls. SFMASK cleared IF, DF, TF and AC; we are on the user stack with the user's
   GS. Build the same frame an interrupt from user mode would (vector VEC_SYSCALL, the user
   rip from rcx, rflags from r11) on this thread's kernel stack, save the FPU state as
   trap_after_gs does, call the system-call entry, and leave by the common path with "swap
   GS back on exit" set. */
    .global syscall_entry
syscall_entry:
    swapgs
    movq %rsp, %gs:{user_rsp}
    movq %gs:{kstack}, %rsp
    pushq ${user_ss}
    pushq %gs:{user_rsp}
    pushq %r11
    pushq ${user_cs}
    pushq %rcx
    pushq $0
    pushq ${vec_syscall}
    push_gprs
    movq %rsp, %rbx
    movl $1, %r12d
    /* As trap_after_gs, but straight to the system-call entry (no vector to look at). */
    save_fpu_clean
    movq %rbx, %rdi
    call {syscall}
    jmp trap_resume
    "#,
    dispatch = sym crate::entry::trap,
    syscall = sym crate::entry::syscall,
    user_rsp = const super::core_header::USER_RSP_OFFSET,
    kstack = const super::core_header::KSTACK_TOP_OFFSET,
    user_ss = const super::gdt::USER_DS as u64,
    user_cs = const super::gdt::USER_CS as u64,
    vec_syscall = const super::trap::VEC_SYSCALL,
    fpu_area = const FPU_AREA,
    options(att_syntax)
);

extern "C" {
    static trap_stubs: u8;
}

/// One 16-byte interrupt gate.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    type_attr: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    fn interrupt(handler: u64, ist: u8) -> Self {
        Gate {
            offset_low: handler as u16,
            selector: KERNEL_CS,
            ist,
            type_attr: 0x8e, // present, DPL 0, 64-bit interrupt gate (clears IF)
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Idt([Gate; 256]);

impl Idt {
    /// Gates for all 256 stubs; `with_ist` routes NMI, #DF, #MC and #DB to their IST stacks
    /// (only once the core has a TSS).
    fn new(with_ist: bool) -> Self {
        let stubs = core::ptr::addr_of!(trap_stubs) as u64;
        let mut idt = Idt([Gate::default(); 256]);
        for (v, gate) in idt.0.iter_mut().enumerate() {
            let ist = match v {
                _ if !with_ist => 0,
                1 => IST_DEBUG,
                2 => IST_NMI,
                8 => IST_DOUBLE_FAULT,
                18 => IST_MACHINE_CHECK,
                _ => 0,
            };
            *gate = Gate::interrupt(stubs + 16 * v as u64, ist);
        }
        idt
    }

    fn load(&'static self) {
        let ptr = x86_64::structures::DescriptorTablePointer {
            limit: (core::mem::size_of::<Idt>() - 1) as u16,
            base: x86_64::VirtAddr::new(self as *const Idt as u64),
        };
        // SAFETY: the table is 'static, holds valid gates for all 256 vectors, and each
        // points at entry code that saves state and returns with iretq.
        unsafe { x86_64::instructions::tables::lidt(&ptr) };
    }
}

/// Build this core's IDT in its own heap and load it.
pub fn init_this_core() {
    debug_assert!(has_error_code(14) && !has_error_code(32));
    let idt: &'static Idt = Box::leak(Box::new(Idt::new(true)));
    idt.load();
}

static EARLY_IDT: spin::Once<Idt> = spin::Once::new();

/// Load the shared boot-time IDT (no IST stacks, no heap needed), so that a fault before a
/// core has its own tables is reported instead of resetting the machine. The bootstrap
/// core builds it; application processors only load it.
pub fn load_early() {
    EARLY_IDT.call_once(|| Idt::new(false)).load();
}
