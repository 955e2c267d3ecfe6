//! Switching between threads, starting a new thread in user mode, and the `syscall` MSRs.
//!
//! Each thread has its own kernel stack. A thread that stops running (it blocks, yields or
//! is preempted) is always inside the kernel, in a call to [`switch`], which saves the
//! callee-saved registers on its stack and its stack pointer in its `Context`, then loads
//! another thread's. User registers and FPU/SSE state need no saving here: the trap and
//! syscall entries already saved them in the frame at the top of the thread's kernel stack.
//!
//! A new thread's kernel stack is built to look like one that was switched away from in
//! the middle of returning to user mode: [`switch`] "returns" into `trap_resume`, which
//! restores the prepared FPU image and the prepared [`TrapFrame`] and `iretq`s to the
//! program's entry point.

use super::cpu;
use super::idt::TrapFrame;
use core::arch::global_asm;

global_asm!(
    r#"
    /* Save the running context: its callee-saved registers on its stack, its stack
       pointer at rdi. */
    .macro save_context
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    .endm

    .section .text
    .global context_switch
/* context_switch(save: *mut u64 [rdi], next_rsp: u64 [rsi]) */
context_switch:
    save_context
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret

/* context_switch_to_user(save: *mut u64 [rdi], frame: *mut TrapFrame [rsi]): save as
   context_switch does, then leave for user mode on the system-call frame at rsi of the
   thread switched to, as its own way out would (trap_resume: rbx the frame, r12 "swap GS
   back", the stack at the frame's FPU image). Its kernel stack below the frame is dropped. */
    .global context_switch_to_user
context_switch_to_user:
    save_context
    movq %rsi, %rbx
    leaq -{fpu_area}(%rsi), %rsp
    andq $-16, %rsp
    movl $1, %r12d
    jmp trap_resume

/* First code of a user thread: account the entry to user mode (and leave the big lock),
   then return to user mode like any trap. rbx and r12 (callee-saved) carry the frame and
   the swapgs flag to trap_resume. */
    .global user_thread_start
user_thread_start:
    call {first_user_entry}
    jmp trap_resume

/* First code of a kernel thread: its entry function is in r13, its argument in r12
   (placed there by prepare_kernel_entry). The entry never returns. */
    .global kernel_thread_start
kernel_thread_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    "#,
    first_user_entry = sym crate::entry::first_user_entry,
    fpu_area = const super::idt::FPU_AREA,
    options(att_syntax)
);

extern "C" {
    fn context_switch(save: *mut u64, next_rsp: u64);
    fn context_switch_to_user(save: *mut u64, frame: *mut TrapFrame);
    static syscall_entry: u8;
    static kernel_thread_start: u8;
    static user_thread_start: u8;
}

/// Save the running context's stack pointer in `*save` and continue on the context whose
/// stack pointer is `next_rsp`. Returns when something switches back to `*save`.
///
/// # Safety
/// `save` must stay valid until the switch has written it (it is written before the new
/// context runs), and `next_rsp` must be a stack saved by `switch` or built by
/// [`prepare_user_entry`], whose memory stays mapped.
pub unsafe fn switch(save: *mut u64, next_rsp: u64) {
    // SAFETY: per the caller; the function preserves the ABI's callee-saved registers.
    unsafe { context_switch(save, next_rsp) };
}

/// [`switch`] to a thread blocked in a system call whose result is complete in `frame`, its
/// system-call frame at the top of its kernel stack: it returns to user mode at once, by
/// the exit every system call takes (`trap_resume`), without resuming its kernel context,
/// which is dropped (seL4's fastpath returns the other thread to user mode the same way).
/// Returns when something switches back to `*save`.
///
/// # Safety
/// As [`switch`]'s `save`; `frame` must be the system-call frame of the thread switched
/// to (built by `syscall_entry` on its kernel stack, now the core's), and that thread's
/// kernel context below the frame must hold nothing that anything will need: no borrow,
/// lock or value with a destructor, and nothing will resume it.
pub unsafe fn switch_to_user(save: *mut u64, frame: *mut TrapFrame) {
    // SAFETY: per the caller; the callee-saved registers are saved as `switch` saves them
    // and restored by whatever switch resumes `*save`.
    unsafe { context_switch_to_user(save, frame) };
}

/// Default FPU image for a new thread: x87 control word 0x37f, MXCSR 0x1f80.
fn clean_fxsave_image() -> [u8; 512] {
    let mut image = [0u8; 512];
    image[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
    image[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
    image[28..32].copy_from_slice(&0xffffu32.to_le_bytes()); // MXCSR_MASK
    image
}

/// Lay out a new thread's kernel stack so that switching to it enters user mode at `frame`'s
/// `rip` with `frame`'s registers. Returns the stack pointer to switch to.
///
/// # Safety
/// `kstack_top` must be the 16-byte-aligned top of a mapped, unused kernel stack of at least
/// one page.
pub unsafe fn prepare_user_entry(kstack_top: u64, frame: &TrapFrame) -> u64 {
    // SAFETY: per the caller.
    unsafe { prepare_user_entry_with_fpu(kstack_top, frame, &clean_fxsave_image()) }
}

/// The FPU/SSE image saved for the thread whose user frame sits at `kstack_top` (where the
/// trap and syscall entries put it; see `prepare_user_entry`). Used to move a stopped
/// thread to another core.
///
/// # Safety
/// `kstack_top` must be the top of a thread's kernel stack whose thread is not running and
/// was last stopped on its way between user mode and the kernel (its user frame is at the
/// top).
pub unsafe fn saved_user_state(kstack_top: u64) -> (TrapFrame, [u8; 512]) {
    let frame_at = kstack_top - core::mem::size_of::<TrapFrame>() as u64;
    let fx_at = (frame_at - super::idt::FPU_AREA) & !15;
    // SAFETY: per the caller, both lie in the mapped stack and hold the saved state.
    unsafe {
        (
            core::ptr::read(frame_at as *const TrapFrame),
            core::ptr::read(fx_at as *const [u8; 512]),
        )
    }
}

/// Lay out a new kernel thread's stack so that switching to it calls `entry(arg)` on it.
///
/// # Safety
/// `kstack_top` must be the 16-byte-aligned top of a mapped, unused kernel stack of at least
/// one page.
pub unsafe fn prepare_kernel_entry(
    kstack_top: u64,
    entry: extern "C" fn(u64) -> !,
    arg: u64,
) -> u64 {
    // context_switch pops r15, r14, r13, r12, rbx, rbp, then returns to kernel_thread_start
    // with rsp = kstack_top - 16, so `entry` starts with the stack aligned as the ABI wants.
    let regs = [
        0u64,
        0,
        entry as usize as u64,
        arg,
        0,
        0,
        core::ptr::addr_of!(kernel_thread_start) as u64,
    ];
    let rsp = kstack_top - 16 - (regs.len() * 8) as u64;
    // SAFETY: the write lands inside the caller's unused stack.
    unsafe { core::ptr::write(rsp as *mut [u64; 7], regs) };
    rsp
}

/// [`prepare_user_entry`] with a given FPU/SSE image (a thread moved from another core).
///
/// # Safety
/// As for [`prepare_user_entry`].
pub unsafe fn prepare_user_entry_with_fpu(
    kstack_top: u64,
    frame: &TrapFrame,
    fx_image: &[u8; 512],
) -> u64 {
    let frame_at = kstack_top - core::mem::size_of::<TrapFrame>() as u64;
    // The area trap_common would have made below the frame (`FPU_AREA`), 16-aligned.
    let fx_at = (frame_at - super::idt::FPU_AREA) & !15;
    // Below it: the return address (user_thread_start, which ends in trap_resume) and six
    // callee-saved registers, popped by
    // context_switch in the order r15, r14, r13, r12, rbx, rbp.
    let regs = [
        0u64,
        0,
        0,
        1,
        frame_at,
        0,
        core::ptr::addr_of!(user_thread_start) as u64,
    ];
    let rsp = fx_at - (regs.len() * 8) as u64;
    // SAFETY: all writes land inside the caller's unused stack, above `rsp`.
    unsafe {
        core::ptr::write(frame_at as *mut TrapFrame, *frame);
        core::ptr::write(fx_at as *mut [u8; 512], *fx_image);
        core::ptr::write(rsp as *mut [u64; 7], regs);
    }
    rsp
}

/// Enable `syscall`: entry point, segments, and the flags cleared on entry.
pub fn init_syscall_this_core() {
    const MSR_STAR: u32 = 0xc000_0081;
    const MSR_LSTAR: u32 = 0xc000_0082;
    const MSR_FMASK: u32 = 0xc000_0084;
    const MSR_EFER: u32 = 0xc000_0080;
    // IF, DF, TF, AC, NT: interrupts off, direction up, no single-step, no SMAP override.
    const FMASK: u64 = (1 << 9) | (1 << 10) | (1 << 8) | (1 << 18) | (1 << 14);
    let star = (u64::from(super::gdt::KERNEL_DS) << 48) | (u64::from(super::gdt::KERNEL_CS) << 32);
    // SAFETY: STAR names the kernel code segment of this core's GDT (and a sysret base whose
    // user segments match it); LSTAR is the syscall entry point; EFER.SCE enables the instruction.
    unsafe {
        cpu::wrmsr(MSR_STAR, star);
        cpu::wrmsr(MSR_LSTAR, core::ptr::addr_of!(syscall_entry) as u64);
        cpu::wrmsr(MSR_FMASK, FMASK);
        cpu::wrmsr(MSR_EFER, cpu::rdmsr(MSR_EFER) | 1);
    }
}

/// Turn on SMEP and SMAP where the CPU has them: the kernel can then neither execute nor
/// (by accident) read or write user pages. Musubi reaches user memory only through the
/// direct map, so SMAP costs nothing.
pub fn protect_from_user_this_core(features: &cpu::Features) {
    let mut cr4 = cpu::read_cr4();
    if features.smep {
        cr4 |= 1 << 20;
    }
    if features.smap {
        cr4 |= 1 << 21;
    }
    // SAFETY: SMEP/SMAP only restrict supervisor access to user pages, which the kernel
    // never makes directly.
    unsafe { cpu::write_cr4(cr4) };
}
