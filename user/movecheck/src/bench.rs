//! `movecheck bench M N`: a process moved to another core (`MIGRATE`: the new core copies
//! the old one's frames) and to machine M (`ulib::mach::migrate`: the image written out,
//! carried by `machd` in pieces, read back in there), N samples each after a warm-up, in
//! time-stamp ticks (`BENCH` lines; `cargo xtask bench machines` turns them into ns). The
//! process moved is the same both ways: `movecheck park`, asleep until killed.

use ulib::abi::{Pid, Priority};
use ulib::bench::{self, rdtsc};
use ulib::{println, sys};

pub const CROSS: &str = "process moved, other core";
pub const MACHINE: &str = "process moved, other machine";

/// A parked process of this core (not timed).
fn park() -> Result<Pid, &'static str> {
    sys::spawn("movecheck", &["park"], Priority::App).map_err(|_| "spawn park")
}

/// `bench M N`: exit code 0, or 1 after a `BENCH error` line.
pub fn bench(m: u8, samples: usize) -> i32 {
    let here = sys::core().unwrap_or(0);
    let other = crate::other_core();
    if other == here {
        println!("BENCH error {{\"case\":\"{CROSS}\",\"error\":\"one core\"}}");
        return 1;
    }
    let cross = bench::samples(CROSS, samples, 1, |_| {
        let p = park()?;
        let start = rdtsc();
        let moved = sys::migrate(Some(p), other);
        let ticks = rdtsc() - start;
        let _ = sys::kill(moved.unwrap_or(p));
        let _ = sys::wait(Some(p));
        moved.map(|_| ticks).map_err(|_| "migrate")
    });
    let far = cross.and_then(|()| {
        bench::samples(MACHINE, samples, 1, |_| {
            let p = park()?;
            let start = rdtsc();
            let moved = ulib::mach::migrate(p, m, None);
            let ticks = rdtsc() - start;
            match moved {
                Ok((there, _)) => {
                    let _ = ulib::mach::kill(&there);
                    let _ = ulib::mach::wait(&there);
                    let _ = sys::wait(Some(p));
                    Ok(ticks)
                }
                Err(_) => {
                    let _ = sys::kill(p);
                    let _ = sys::wait(Some(p));
                    Err("migrate to the other machine")
                }
            }
        })
    });
    match far {
        Ok(()) => {
            bench::done();
            0
        }
        Err(_) => 1,
    }
}
