//! Expected-fault tests: each must stop the machine with a report that contains every
//! `|`-separated part of its expectation. xtask runs each in a boot of its own (`-smp 2`)
//! and checks the exit status too.

use crate::ktest;
use core::arch::asm;

ktest! {
    /// W^X: writing to kernel text faults.
    #[expect_fault = "page fault (#PF) in kernel mode|kernel write to a read-only page|(kernel text)"]
    fn write_to_kernel_text() {
        let target = write_to_kernel_text as *const () as *mut u8;
        // SAFETY: deliberately wrong: the write must fault (text is read-only).
        unsafe { core::ptr::write_volatile(target, 0xc3) };
    }
}

static mut NOT_CODE: [u8; 16] = [0xc3; 16];

ktest! {
    /// W^X: executing kernel data faults.
    #[expect_fault = "page fault (#PF) in kernel mode|instruction fetch from a no-execute page|(kernel data/bss)"]
    fn execute_kernel_data() {
        // SAFETY: deliberately wrong: jumping into a data page must fault (data is NX). The
        // volatile write keeps the array in writable data (a never-written static could be
        // placed in rodata).
        unsafe {
            core::ptr::write_volatile(core::ptr::addr_of_mut!(NOT_CODE[0]), 0xc3);
            let f: extern "C" fn() = core::mem::transmute(core::ptr::addr_of_mut!(NOT_CODE) as usize);
            f();
        }
    }
}

ktest! {
    /// Reading the null page faults, and the report says so.
    #[expect_fault = "page fault (#PF) in kernel mode|kernel read from an unmapped page|(null page)"]
    fn read_null_page() {
        // SAFETY: deliberately wrong: the null page is unmapped.
        let _ = unsafe { core::ptr::read_volatile(0x10 as *const u64) };
    }
}

ktest! {
    #[expect_fault = "divide error (#DE) in kernel mode|vector 0"]
    fn divide_error() {
        // SAFETY: deliberately wrong: dividing by zero raises #DE.
        unsafe { asm!("xor edx, edx", "xor ecx, ecx", "mov eax, 1", "div ecx", out("eax") _, out("ecx") _, out("edx") _) };
    }
}

ktest! {
    #[expect_fault = "invalid opcode (#UD) in kernel mode|vector 6"]
    fn invalid_opcode() {
        // SAFETY: deliberately wrong: ud2 raises #UD.
        unsafe { asm!("ud2") };
    }
}

ktest! {
    #[expect_fault = "breakpoint (#BP) in kernel mode|vector 3"]
    fn breakpoint() {
        // SAFETY: deliberately a breakpoint with no debugger: a kernel-mode #BP is fatal.
        unsafe { asm!("int3") };
    }
}

ktest! {
    /// A non-canonical address raises #GP.
    #[expect_fault = "general protection fault (#GP) in kernel mode|vector 13"]
    fn general_protection() {
        // SAFETY: deliberately wrong: a non-canonical address raises #GP.
        let _ = unsafe { core::ptr::read_volatile(0x8000_0000_0000_0000u64 as *const u64) };
    }
}

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let buf = core::hint::black_box([depth; 64]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + buf[7]
}

ktest! {
    /// Running off the bottom of a kernel stack hits its guard page; the CPU cannot push
    /// the page-fault frame there, so it raises a double fault, which runs on its own IST
    /// stack and reports.
    #[expect_fault = "double fault (#DF) in kernel mode|guard page of a kernel stack"]
    fn stack_overflow_double_faults() {
        core::hint::black_box(recurse(0));
    }
}

ktest! {
    /// A panic prints its message, location and core.
    #[expect_fault = "panic on core 0: deliberate test panic|src/tests/faults.rs"]
    fn panic_reports_location() {
        panic!("deliberate test panic");
    }
}

fn ud2_here(_: u64) -> u64 {
    // SAFETY: deliberately wrong: ud2 raises #UD on the core running this.
    unsafe { asm!("ud2") };
    0
}

ktest! {
    /// A fault on another core stops every core and still exits with the report.
    #[expect_fault = "invalid opcode (#UD) in kernel mode on core 1|stopped 1 of 1 other cores"]
    fn fault_on_second_core_stops_all() {
        let _ = crate::smp::call_on(1, ud2_here, 0, 2_000_000_000);
    }
}
