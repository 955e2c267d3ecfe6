//! Program start-up: `_start`, the [`main!`](crate::main) macro, and the program's name.
//!
//! The kernel enters `_start` with a 16-byte aligned `rsp`, `rdi` = argc and `rsi` =
//! pointer to argc `(ptr, len)` pairs of `u64`, each a UTF-8 argument (not NUL-terminated);
//! argument 0 is the program's name. `_start` is emitted by [`main!`](crate::main) in the
//! program's own crate (so the linker can never drop it from an archive member): it clears
//! `rbp` to end frame-pointer chains and calls [`start`], which builds the `&[&str]` the
//! program's `main` takes and exits with what `main` returns. A last argument that gives the
//! standard input and output (`stdio::TAG`) is taken off first; when `main` returns, the
//! program lets go of those (`stdio::finish`).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Arguments turned into `&str`s on the stack; more than this go to the heap.
const STACK_ARGS: usize = 32;

/// The program's name (`argv[0]`): address and length, set once by [`start`] before `main`
/// (and so before any second thread exists), read by any thread, the panic handler too.
static PROGRAM_PTR: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static PROGRAM_LEN: AtomicUsize = AtomicUsize::new(0);

/// This program's name (its `argv[0]`), for messages; `"?"` before it is known.
pub fn program_name() -> &'static str {
    let ptr = PROGRAM_PTR.load(Ordering::Acquire);
    if ptr.is_null() {
        return "?";
    }
    let len = PROGRAM_LEN.load(Ordering::Relaxed);
    // SAFETY: `start` stored the length first and then (Release) the address of a `&'static
    // str`'s bytes, which we loaded (Acquire), so the pair describes that valid UTF-8 string.
    unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(ptr, len)) }
}

/// One argument from the kernel's table; invalid UTF-8 (which the kernel never passes)
/// becomes `"?"`.
///
/// # Safety
/// `pair` must describe bytes that stay valid and unchanged for the whole program.
unsafe fn arg(pair: &[u64; 2]) -> &'static str {
    let [ptr, len] = *pair;
    if ptr == 0 || len == 0 {
        return "";
    }
    // SAFETY: the caller guarantees `ptr..ptr+len` is the kernel's argument bytes, which
    // live on the stack above `_start`'s frame for the program's lifetime.
    let bytes = unsafe { core::slice::from_raw_parts(ptr as *const u8, len as usize) };
    core::str::from_utf8(bytes).unwrap_or("?")
}

/// Run `main` with the kernel's arguments and exit with its result. Called from `_start`.
///
/// # Safety
/// `argc` and `argv` must be exactly what the kernel passed to `_start`.
pub unsafe fn start(argc: usize, argv: *const [u64; 2], main: fn(&[&str]) -> i32) -> ! {
    let pairs: &[[u64; 2]] = if argv.is_null() {
        &[]
    } else {
        // SAFETY: the kernel's table of `argc` pairs lives on the user stack above us for
        // the whole program.
        unsafe { core::slice::from_raw_parts(argv, argc) }
    };
    let mut on_stack = [""; STACK_ARGS];
    let on_heap: Vec<&str>;
    let args: &[&str] = if pairs.len() <= STACK_ARGS {
        for (slot, pair) in on_stack.iter_mut().zip(pairs) {
            // SAFETY: see above.
            *slot = unsafe { arg(pair) };
        }
        &on_stack[..pairs.len()]
    } else {
        // SAFETY: see above.
        on_heap = pairs.iter().map(|p| unsafe { arg(p) }).collect();
        &on_heap
    };
    if let Some(name) = args.first() {
        PROGRAM_LEN.store(name.len(), Ordering::Relaxed);
        PROGRAM_PTR.store(name.as_ptr().cast_mut(), Ordering::Release);
    }
    // The standard input and output a parent gave (`stdio::spawn`): not one of `main`'s.
    let args = match args.split_last() {
        Some((last, rest)) if !rest.is_empty() && crate::stdio::take_tag(last) => rest,
        _ => args,
    };
    let status = main(args);
    crate::stdio::finish();
    crate::sys::exit(status)
}

/// Declare the program's entry point: `ulib::main!(my_main)` with
/// `fn my_main(args: &[&str]) -> i32`, where `args[0]` is the program's name and the result
/// is the exit status.
#[macro_export]
macro_rules! main {
    ($main:path) => {
        extern "C" fn __ulib_start(argc: usize, argv: *const [u64; 2]) -> ! {
            let main: fn(&[&str]) -> i32 = $main;
            // SAFETY: `_start` below passes the kernel's argc and argv through unchanged.
            unsafe { $crate::rt::start(argc, argv, main) }
        }

        ::core::arch::global_asm!(
            ".globl _start",
            ".type _start, @function",
            "_start:",
            "xor ebp, ebp",
            "call {entry}",
            "ud2",
            ".size _start, . - _start",
            entry = sym __ulib_start,
        );
    };
}
