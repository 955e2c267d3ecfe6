//! `nop`: exits 0 at once (the spawn+wait benchmark's child).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

ulib::main!(main);

fn main(_args: &[&str]) -> i32 {
    0
}
