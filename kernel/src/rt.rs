//! The few symbols a freestanding binary must bring itself.
//!
//! The prebuilt `core`/`alloc` for `x86_64-unknown-linux-gnu` expect libc's `memcpy`,
//! `memmove`, `memset`, `memcmp` and `bcmp`, and name the unwinder's personality routine even
//! though Musubi aborts on panic. The mem functions use the `rep` string instructions: short,
//! fast on modern cores, and each `rep` iteration counts as one instruction under QEMU's
//! icount, which the benchmarks must keep in mind (docs/design.md, "Measuring").
//!
//! These are written in assembly on purpose: a Rust loop here could be recognised by the
//! optimiser as a memcpy idiom and compiled into a call to itself.

use core::arch::asm;

/// # Safety
/// Standard C semantics: `dst` and `src` valid for `n` bytes and not overlapping.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the caller passes valid, non-overlapping ranges of `n` bytes.
    unsafe {
        asm!("rep movsb", inout("rdi") dst => _, inout("rsi") src => _, inout("rcx") n => _,
             options(nostack, preserves_flags));
    }
    dst
}

/// # Safety
/// Standard C semantics: `dst` and `src` valid for `n` bytes; they may overlap.
#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize).wrapping_sub(src as usize) >= n {
        // Forward copy is safe: dst is below src or the ranges do not overlap.
        // SAFETY: valid ranges per the caller; forward order never reads a byte it wrote.
        unsafe {
            asm!("rep movsb", inout("rdi") dst => _, inout("rsi") src => _, inout("rcx") n => _,
                 options(nostack, preserves_flags));
        }
    } else {
        // SAFETY: dst overlaps the tail of src; copy backwards from the last byte, then
        // restore the direction flag the ABI requires to be clear.
        unsafe {
            asm!("std", "rep movsb", "cld",
                 inout("rdi") dst.add(n - 1) => _, inout("rsi") src.add(n - 1) => _,
                 inout("rcx") n => _, options(nostack));
        }
    }
    dst
}

/// # Safety
/// Standard C semantics: `dst` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    // SAFETY: the caller passes a valid range of `n` bytes.
    unsafe {
        asm!("rep stosb", inout("rdi") dst => _, inout("rcx") n => _, in("al") c as u8,
             options(nostack, preserves_flags));
    }
    dst
}

/// # Safety
/// Standard C semantics: `a` and `b` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    let (x, y): (u32, u32);
    // SAFETY: the caller passes valid ranges of `n` bytes. `repe cmpsb` stops after the
    // first differing byte, so the bytes before rsi/rdi are the first difference.
    unsafe {
        asm!("repe cmpsb", "movzx {x:e}, byte ptr [rsi - 1]", "movzx {y:e}, byte ptr [rdi - 1]",
             inout("rsi") a => _, inout("rdi") b => _, inout("rcx") n => _,
             x = out(reg) x, y = out(reg) y, options(nostack, readonly));
    }
    x as i32 - y as i32
}

/// # Safety
/// Standard C semantics: `a` and `b` valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract as memcmp.
    unsafe { memcmp(a, b, n) }
}

/// Named by the prebuilt `core`; never called because Musubi aborts on panic.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

/// Named by the prebuilt `core`; never called because Musubi aborts on panic.
#[no_mangle]
pub extern "C" fn _Unwind_Resume() -> ! {
    panic!("_Unwind_Resume called in a kernel that aborts on panic")
}
