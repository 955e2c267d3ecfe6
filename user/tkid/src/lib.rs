//! `tkid N LOC [AT CORE]`: the child process of `cargo xtask bench tender` (Multicore
//! Tender, P4 section 4.4: Figs. 6, 7 and 8, Table 6).
//!
//! It creates and deletes a 4 KiB vregion called `LOC/vregion/tkid` N times
//! (`RES_OPEN` + `RES_CLOSE`); LOC is `here`, `c0` or `c1`. With AT > 0 it moves itself to
//! core CORE (`MIGRATE(0, CORE)`) before the AT-th pair: the paper's L-R -> R-R case,
//! where a child on core 0 works on core 1's regions and half-way moves to them. It exits
//! 0, or `100 + error code` after printing which call failed.
//!
//! P4 Fig. 8 varies the child's text from 4 to 32 KiB with its data and bss fixed at
//! 4 KiB. So this child does not link `ulib` (whose formatting and heap alone are about
//! 10 KiB of text): it brings its own `_start`, system calls and panic handler, and its
//! code is well under 4 KiB. Each `[[bin]]` (`tkid`, `tkid8`, ..., `tkid32`) is this code
//! plus [`program!`]'s padding, a run of `int3` bytes in the text segment, so that the
//! text segment is 4, 8, ..., 32 KiB (xtask reads the sizes back from the ELF files and
//! reports them). The padding is kept by the linker because `_start` refers to it.
#![no_std]

// Links memcpy/memset/memcmp and the unwinder stubs the prebuilt `core` refers to.
extern crate bare;

use abi::res::Rights;
use abi::syscall as nr;
use core::arch::asm;

/// Size of each vregion.
const SIZE: u64 = 4096;

/// 4 KiB of initialised data and 4 KiB of bss, as in the paper's child.
static mut DATA: [u8; 4096] = [1; 4096];
static mut BSS: [u8; 4096] = [0; 4096];

/// Declare a tkid program whose text segment is `$kib` KiB (4, 8, ..., 32): `_start`
/// and `$kib - 4` KiB of padding in the text.
#[macro_export]
macro_rules! program {
    ($kib:literal) => {
        ::core::arch::global_asm!(
            ".pushsection .text.tkid_pad,\"ax\",@progbits",
            "tkid_pad:",
            ".skip {pad}, 0xcc",
            ".popsection",
            ".globl _start",
            ".type _start, @function",
            "_start:",
            "xor ebp, ebp",
            "lea rdx, [rip + tkid_pad]",
            "call {entry}",
            "ud2",
            ".size _start, . - _start",
            pad = const ($kib - 4) * 1024,
            entry = sym $crate::start,
        );
    };
}

/// The program: `argc` (ptr, len) pairs at `argv` (see `ulib::rt`); `_pad` is the address
/// of the padding (passed only so that `_start` refers to it).
///
/// # Safety
/// Called once, from `_start`, with what the kernel passed.
pub unsafe extern "C" fn start(argc: usize, argv: *const [u64; 2], _pad: usize) -> ! {
    let arg = |i: usize| -> &'static [u8] {
        if i >= argc || argv.is_null() {
            return b"";
        }
        // SAFETY: the kernel's table has `argc` pairs, each naming argument bytes that
        // live on the stack above `_start` for the whole program.
        unsafe {
            let [ptr, len] = *argv.add(i);
            if ptr == 0 {
                return b"";
            }
            core::slice::from_raw_parts(ptr as *const u8, len as usize)
        }
    };
    let (Some(n), loc, Some(at), Some(core)) = (
        number(arg(1)),
        arg(2),
        number(arg(3)).or(Some(0)),
        number(arg(4)).or(Some(1)),
    ) else {
        say(b"usage: tkid N LOC [AT CORE]\n");
        exit(2);
    };
    // Keep the data and bss (and so their sizes) in the program.
    // SAFETY: one thread; plain volatile accesses to our own statics.
    unsafe {
        let d = core::ptr::read_volatile(&raw const DATA[0]);
        core::ptr::write_volatile(&raw mut BSS[0], d);
    }
    let mut name = [0u8; 32];
    let suffix = b"/vregion/tkid";
    let len = loc.len() + suffix.len();
    if loc.is_empty() || len > name.len() {
        say(b"tkid: bad location\n");
        exit(2);
    }
    // (No slice indexing here or below: a bounds-check failure would link `core::fmt`.)
    for (d, s) in name.iter_mut().zip(loc.iter().chain(suffix)) {
        *d = *s;
    }
    let name = name.get(..len).unwrap_or(&[]);
    for i in 0..n {
        if at > 0 && i == at {
            // SAFETY: MIGRATE takes numbers only.
            if let Err(e) = decode(unsafe { syscall2(nr::MIGRATE, 0, core) }) {
                fail(b"migrate", e);
            }
        }
        let size = SIZE.to_le_bytes();
        // SAFETY: both buffers are valid for reading for the lengths given.
        let id = match decode(unsafe {
            syscall5(
                nr::RES_OPEN,
                name.as_ptr() as u64,
                name.len() as u64,
                size.as_ptr() as u64,
                size.len() as u64,
                u64::from(Rights::OWNER_ALL.0),
            )
        }) {
            Ok(id) => id,
            Err(e) => fail(b"res_open", e),
        };
        // SAFETY: RES_CLOSE takes a number.
        if let Err(e) = decode(unsafe { syscall2(nr::RES_CLOSE, id, 0) }) {
            fail(b"res_close", e);
        }
    }
    exit(0)
}

/// A decimal number, or `None`.
fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(c - b'0');
    }
    Some(v)
}

/// Print `tkid: CALL failed: error CODE` and exit with `100 + CODE`.
fn fail(call: &[u8], code: u64) -> ! {
    say(b"tkid: ");
    say(call);
    say(b" failed: error ");
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut v = code;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        at -= 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    say(digits.get(at..).unwrap_or(&[]));
    say(b"\n");
    exit(100 + code.min(27) as i32)
}

fn say(s: &[u8]) {
    // SAFETY: `s` is valid for reading for its length.
    let _ = unsafe { syscall2(nr::CONSOLE_WRITE, s.as_ptr() as u64, s.len() as u64) };
}

fn decode((rax, rdx): (u64, u64)) -> Result<u64, u64> {
    if rax == 0 {
        Ok(rdx)
    } else {
        Err(rax)
    }
}

fn exit(status: i32) -> ! {
    // SAFETY: EXIT takes a number and does not return.
    unsafe {
        asm!("syscall", in("rax") nr::EXIT, in("rdi") status as u32 as u64,
             options(noreturn, nostack));
    }
}

/// # Safety
/// Pointer arguments must be valid for what the call does with them.
unsafe fn syscall2(n: u64, a0: u64, a1: u64) -> (u64, u64) {
    let (rax, rdx);
    // SAFETY: the register contract of abi/src/syscall.rs; the caller vouches for the call.
    unsafe {
        asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
             lateout("rdx") rdx, out("rcx") _, out("r11") _, options(nostack));
    }
    (rax, rdx)
}

/// # Safety
/// Pointer arguments must be valid for what the call does with them.
unsafe fn syscall5(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64) -> (u64, u64) {
    let (rax, rdx);
    // SAFETY: as for `syscall2`.
    unsafe {
        asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
             inlateout("rdx") a2 => rdx, in("r10") a3, in("r8") a4,
             out("rcx") _, out("r11") _, options(nostack));
    }
    (rax, rdx)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    say(b"tkid: panic\n");
    exit(101)
}
