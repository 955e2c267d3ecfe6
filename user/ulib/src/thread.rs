//! Threads: P1's light-weight processes (`THREAD_CREATE`, `THREAD_EXIT`, `THREAD_JOIN`,
//! `THREAD_SELF`; abi/src/syscall.rs).
//!
//! A thread runs in its process's address space, with the process's resources, on the
//! process's core (the kernel is per core: threads of one process take turns, they do not
//! run in parallel), with its own registers, FPU state and stack. [`spawn`] takes the stack
//! from the heap ([`STACK_BYTES`]) and starts the thread in [`entry`], which calls the
//! function and ends the thread with `THREAD_EXIT(value)`; [`Thread::join`] waits for that
//! value and gives the stack back to the heap.
//!
//! Program-wide state in ulib (the heap) is behind [`crate::cell::Local`] locks that yield
//! while another thread holds them; printing keeps its buffer on the caller's stack, so
//! each `print!` is one `CONSOLE_WRITE` whatever thread makes it.
//!
//! A panic in any thread ends the whole program (the panic handler calls `EXIT`), and so
//! does `sys::exit`; the program also ends when its last thread ends. A [`Thread`] dropped
//! without `join` is detached: it runs on, and its stack is never freed.

use crate::sys::{decode, raw};
use abi::syscall as nr;
use abi::Error;
use alloc::alloc::{alloc, dealloc, Layout};

/// Stack of a thread started by [`spawn`].
pub const STACK_BYTES: usize = 64 * 1024;
const STACK_ALIGN: usize = 16;

/// What the new thread needs to start: kept at the top of its own stack, above the stack
/// pointer it starts with.
#[repr(C, align(16))]
struct Start {
    f: fn(u64) -> u64,
    arg: u64,
}

/// A running (or ended, not yet joined) thread of this program.
#[derive(Debug)]
pub struct Thread {
    tid: u64,
    stack: *mut u8,
}

impl Thread {
    /// The thread's id (as `THREAD_SELF` returns it in the thread).
    pub fn id(&self) -> u64 {
        self.tid
    }

    /// Wait for the thread to end; its value (what its function returned). The stack goes
    /// back to the heap.
    pub fn join(self) -> Result<u64, Error> {
        let value = join_id(self.tid, u64::MAX)?;
        // SAFETY: the thread has ended (THREAD_JOIN returned its value), so nothing runs on
        // the stack any more; it came from `alloc` with `stack_layout()` in `spawn`.
        unsafe { dealloc(self.stack, stack_layout()) };
        Ok(value)
    }

    /// Wait at most `timeout_ns` for the thread to end: `Ok(value)` (and the stack is freed),
    /// or `Err((self, error))` with the thread still there (`TimedOut`).
    pub fn join_timeout(self, timeout_ns: u64) -> Result<u64, (Thread, Error)> {
        match join_id(self.tid, timeout_ns) {
            Ok(v) => {
                // SAFETY: as in `join`: the thread has ended.
                unsafe { dealloc(self.stack, stack_layout()) };
                Ok(v)
            }
            Err(e) => Err((self, e)),
        }
    }
}

fn stack_layout() -> Layout {
    // 64 KiB with 16-byte alignment is always a valid layout.
    Layout::from_size_align(STACK_BYTES, STACK_ALIGN).expect("thread stack layout")
}

/// Wait (at most `timeout_ns`) for thread `tid` of this process to end; its exit value
/// (`NoSuchProcess` for a thread that is not there or was joined already, `InvalidArgument`
/// for the caller itself). [`Thread::join`] is the usual way; this one takes a bare id.
pub fn join_id(tid: u64, timeout_ns: u64) -> Result<u64, Error> {
    // SAFETY: THREAD_JOIN takes numbers only.
    decode(unsafe { raw::syscall2(nr::THREAD_JOIN, tid, timeout_ns) })
}

/// Start a thread running `f(arg)` on a new [`STACK_BYTES`] stack from the heap; when `f`
/// returns, the thread ends with its value (see [`Thread::join`]).
pub fn spawn(f: fn(u64) -> u64, arg: u64) -> Result<Thread, Error> {
    let layout = stack_layout();
    // SAFETY: the layout has a non-zero size.
    let stack = unsafe { alloc(layout) };
    if stack.is_null() {
        return Err(Error::NoMemory);
    }
    // The start record at the top; the thread's stack pointer starts just below it,
    // 16-byte aligned (the record's size is a multiple of 16 and the allocation is aligned).
    let record = (stack as usize + STACK_BYTES - core::mem::size_of::<Start>()) as *mut Start;
    // SAFETY: `record` lies inside the fresh allocation, aligned for `Start` (16).
    unsafe { record.write(Start { f, arg }) };
    let stack_top = record as u64;
    // From now on the heap's lock may be contended: record it before the thread exists.
    crate::cell::set_threaded();
    let entry_fn: extern "C" fn(*const Start) -> ! = entry;
    // SAFETY: `entry` never returns (it ends with THREAD_EXIT); the stack below `stack_top`
    // is ours until `join` frees it, and `record` above it lives as long.
    let tid = decode(unsafe {
        raw::syscall3(
            nr::THREAD_CREATE,
            entry_fn as usize as u64,
            stack_top,
            record as u64,
        )
    });
    match tid {
        Ok(tid) => Ok(Thread { tid, stack }),
        Err(e) => {
            // SAFETY: no thread was made, so nothing uses the stack.
            unsafe { dealloc(stack, layout) };
            Err(e)
        }
    }
}

/// The first code of every thread [`spawn`] starts: `rdi` is its start record, `rsp` sits
/// just below it as after a call (so the System V alignment rules hold).
extern "C" fn entry(record: *const Start) -> ! {
    // SAFETY: `spawn` wrote the record at the top of this thread's stack before creating
    // the thread, and it stays there until the thread has ended and been joined.
    let Start { f, arg } = unsafe { record.read() };
    exit(f(arg))
}

/// End the calling thread with `value` (the last thread's end ends the program with it).
pub fn exit(value: u64) -> ! {
    // SAFETY: THREAD_EXIT takes a number and does not return.
    unsafe {
        raw::syscall1(nr::THREAD_EXIT, value);
    }
    // THREAD_EXIT returns only if the kernel refused; end the whole program then.
    crate::sys::exit(crate::PANIC_STATUS)
}

/// The calling thread's id.
pub fn self_id() -> Result<u64, Error> {
    // SAFETY: THREAD_SELF takes no arguments.
    decode(unsafe { raw::syscall0(nr::THREAD_SELF) })
}
