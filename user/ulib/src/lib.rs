//! `ulib`: what every Musubi user program links against.
//!
//! A program is a freestanding static executable (`#![no_std]`, `#![no_main]`, see
//! docs/design.md section 3) that names its entry point with [`main!`]:
//!
//! ```ignore
//! #![no_std]
//! #![no_main]
//! ulib::main!(main);
//! fn main(args: &[&str]) -> i32 {
//!     ulib::println!("hello from {}", args[0]);
//!     0
//! }
//! ```
//!
//! ulib brings the start-up code ([`rt`]), typed system calls ([`sys`], and [`res`] for the
//! resource calls with the compositions built on them), [`print!`] and
//! [`println!`] ([`io`]), a global allocator that grows the heap with `MEMORY` ([`heap`]), and
//! a panic handler that prints `panic in PROGRAM: MESSAGE at FILE:LINE` and exits with
//! status [`PANIC_STATUS`]. The mem functions come from `libs/bare`.
//!
//! A program may start threads ([`thread`]; semaphores in [`sem`]). Program-wide state
//! lives in [`cell::Local`] cells, locks that wait by yielding the core (see there);
//! there are no signal handlers.
#![no_std]

extern crate alloc;
// Links memcpy/memset/memcmp and the unwinder stubs the prebuilt `core` refers to.
extern crate bare;

pub mod bench;
pub mod cell;
pub mod dev;
pub mod fnid;
pub mod fs;
pub mod heap;
pub mod io;
pub mod ipc;
pub mod mach;
pub mod net;
pub mod res;
pub mod ring;
pub mod rt;
pub mod sem;
pub mod stdio;
pub mod sys;
pub mod thread;

pub use abi;

/// Exit status of a program that panicked.
pub const PANIC_STATUS: i32 = 101;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    // Printing does not allocate, so this works even when the allocator failed.
    let program = rt::program_name();
    match info.location() {
        Some(l) => eprintln!(
            "panic in {program}: {} at {}:{}",
            info.message(),
            l.file(),
            l.line()
        ),
        None => eprintln!("panic in {program}: {}", info.message()),
    }
    sys::exit(PANIC_STATUS)
}
