//! `hello`: prints `hello from core C pid P args: A B ...` (the `args:` part only when
//! there are arguments) and exits 0.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use ulib::{println, sys};

ulib::main!(main);

fn main(args: &[&str]) -> i32 {
    let core = sys::core().map_or_else(|e| format!("? ({e})"), |c| format!("{c}"));
    let pid = sys::getpid().map_or_else(|e| format!("? ({e})"), |p| format!("{p}"));
    let mut line = format!("hello from core {core} pid {pid}");
    if args.len() > 1 {
        line += " args:";
        for a in &args[1..] {
            line += " ";
            line += a;
        }
    }
    // One write, so the line is not interleaved with other programs' output.
    println!("{line}");
    0
}
