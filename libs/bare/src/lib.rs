//! The few symbols a freestanding binary must bring itself, shared by the kernel and by
//! user programs (through `ulib`).
//!
//! The prebuilt `core`/`alloc` for `x86_64-unknown-linux-gnu` expect libc's `memcpy`,
//! `memmove`, `memset`, `memcmp` and `bcmp`, and name the unwinder's personality routine even
//! though Musubi aborts on panic. The mem functions use the `rep` string instructions: short,
//! fast on modern cores, and each `rep` iteration counts as one instruction under QEMU's
//! icount, which the benchmarks must keep in mind (docs/design.md, "Measuring").
//!
//! They are written in assembly on purpose: a Rust loop here could be recognised by the
//! optimiser as a memcpy idiom and compiled into a call to itself. The exported symbols are
//! left out of host test builds (the host's libc and unwinder provide them there); the tests
//! call the same code through the Rust-named functions.
#![no_std]

use core::arch::asm;

/// `memcpy`: copy `n` bytes forward, eight at a time, then the rest.
///
/// Quadwords matter under QEMU's `-icount`, which counts each `rep` iteration as an
/// instruction: a 4 KiB copy is 512 instructions with `movsq` and 4,096 with `movsb`.
///
/// # Safety
/// `dst` and `src` valid for `n` bytes and not overlapping.
#[inline]
pub unsafe fn copy_forward(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller passes valid ranges of `n` bytes; the quadword pass copies the
    // first n & !7 bytes and the byte pass the rest, in increasing address order.
    unsafe {
        asm!("rep movsq", "mov rcx, {rest}", "rep movsb",
             rest = in(reg) n % 8,
             inout("rdi") dst => _, inout("rsi") src => _, inout("rcx") n / 8 => _,
             options(nostack, preserves_flags));
    }
}

/// `memmove`: copy `n` bytes between ranges that may overlap.
///
/// # Safety
/// `dst` and `src` valid for `n` bytes.
#[inline]
pub unsafe fn copy_overlapping(dst: *mut u8, src: *const u8, n: usize) {
    if (dst as usize).wrapping_sub(src as usize) >= n {
        // Forward copy is safe: dst is below src or the ranges do not overlap.
        // SAFETY: valid ranges per the caller; forward order never reads a byte it wrote.
        unsafe { copy_forward(dst, src, n) };
    } else {
        // SAFETY: dst overlaps the tail of src; copy backwards from the last byte, then
        // restore the direction flag the ABI requires to be clear.
        unsafe {
            asm!("std", "rep movsb", "cld",
                 inout("rdi") dst.add(n - 1) => _, inout("rsi") src.add(n - 1) => _,
                 inout("rcx") n => _, options(nostack));
        }
    }
}

/// `memset`: fill `n` bytes with `c`, eight at a time, then the rest.
///
/// # Safety
/// `dst` valid for `n` bytes.
#[inline]
pub unsafe fn fill(dst: *mut u8, c: u8, n: usize) {
    let pattern = u64::from(c) * 0x0101_0101_0101_0101;
    // SAFETY: the caller passes a valid range of `n` bytes; `stosq` writes the first
    // n & !7 bytes, `stosb` (with al = c, the low byte of the pattern) the rest.
    unsafe {
        asm!("rep stosq", "mov rcx, {rest}", "rep stosb",
             rest = in(reg) n % 8,
             inout("rdi") dst => _, inout("rcx") n / 8 => _, in("rax") pattern,
             options(nostack, preserves_flags));
    }
}

/// `memcmp`: compare `n` bytes; negative, zero or positive like C.
///
/// # Safety
/// `a` and `b` valid for `n` bytes.
#[inline]
pub unsafe fn compare(a: *const u8, b: *const u8, n: usize) -> i32 {
    if n == 0 {
        return 0;
    }
    let (x, y): (u32, u32);
    // SAFETY: the caller passes valid ranges of `n` bytes. `repe cmpsb` stops after the
    // first differing byte, so the bytes before rsi/rdi are the first difference (or the
    // last pair, equal, if there is none).
    unsafe {
        asm!("repe cmpsb", "movzx {x:e}, byte ptr [rsi - 1]", "movzx {y:e}, byte ptr [rdi - 1]",
             inout("rsi") a => _, inout("rdi") b => _, inout("rcx") n => _,
             x = out(reg) x, y = out(reg) y, options(nostack, readonly));
    }
    x as i32 - y as i32
}

#[cfg(not(test))]
mod exports {
    /// # Safety
    /// C semantics.
    #[no_mangle]
    pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
        // SAFETY: C contract, passed on.
        unsafe { super::copy_forward(dst, src, n) };
        dst
    }

    /// # Safety
    /// C semantics.
    #[no_mangle]
    pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
        // SAFETY: C contract, passed on.
        unsafe { super::copy_overlapping(dst, src, n) };
        dst
    }

    /// # Safety
    /// C semantics.
    #[no_mangle]
    pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
        // SAFETY: C contract, passed on.
        unsafe { super::fill(dst, c as u8, n) };
        dst
    }

    /// # Safety
    /// C semantics.
    #[no_mangle]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: C contract, passed on.
        unsafe { super::compare(a, b, n) }
    }

    /// # Safety
    /// C semantics.
    #[no_mangle]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: C contract, passed on.
        unsafe { super::compare(a, b, n) }
    }

    /// Named by the prebuilt `core`; never called because Musubi aborts on panic.
    #[no_mangle]
    pub extern "C" fn rust_eh_personality() {}

    /// Named by the prebuilt `core`; never called because Musubi aborts on panic.
    #[no_mangle]
    pub extern "C" fn _Unwind_Resume() -> ! {
        panic!("_Unwind_Resume called in a binary that aborts on panic")
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn copy_and_fill() {
        for n in [0, 1, 7, 8, 9, 15, 16, 64, 4095, 4096, 4097] {
            let src = pattern(n);
            let mut dst = std::vec![0u8; n];
            // SAFETY: both buffers hold n bytes.
            unsafe { copy_forward(dst.as_mut_ptr(), src.as_ptr(), n) };
            assert_eq!(dst, src);
            // SAFETY: dst holds n bytes.
            unsafe { fill(dst.as_mut_ptr(), 0xab, n) };
            assert!(dst.iter().all(|&b| b == 0xab));
        }
    }

    #[test]
    fn overlapping_both_directions() {
        for (from, to, n) in [(0, 5, 20), (5, 0, 20), (3, 4, 1), (0, 0, 10), (10, 2, 30)] {
            let mut buf = pattern(64);
            let mut expect = buf.clone();
            expect.copy_within(from..from + n, to);
            // SAFETY: both ranges lie inside buf.
            unsafe { copy_overlapping(buf.as_mut_ptr().add(to), buf.as_ptr().add(from), n) };
            assert_eq!(buf, expect, "from {from} to {to} n {n}");
        }
    }

    #[test]
    fn compare_orders_like_c() {
        let a = *b"hello world";
        let mut b = a;
        // SAFETY: both arrays hold 11 bytes (and 0 for the empty case).
        unsafe {
            assert_eq!(compare(a.as_ptr(), b.as_ptr(), 11), 0);
            assert_eq!(compare(a.as_ptr(), b.as_ptr(), 0), 0);
            b[10] = b'e'; // "hello worle": a < b at the last byte
            assert!(compare(a.as_ptr(), b.as_ptr(), 11) < 0);
            b[10] = b'a'; // "hello worla": a > b at the last byte
            assert!(compare(a.as_ptr(), b.as_ptr(), 11) > 0);
            b[0] = b'z'; // the first difference decides
            assert!(compare(a.as_ptr(), b.as_ptr(), 11) < 0);
            assert_eq!(compare(a.as_ptr(), b.as_ptr(), 0), 0);
        }
    }
}
