//! `spin`: loops forever without system calls, so the tests can check that a runaway
//! program cannot starve the shell (it is preempted by the timer) and can be killed.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

ulib::main!(main);

fn main(_args: &[&str]) -> i32 {
    loop {
        core::hint::spin_loop();
    }
}
