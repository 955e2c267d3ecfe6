//! `resbench [N]`: the Musubi side of `cargo xtask bench resources` (what the resource
//! rights checks, RCC, cost; docs/resources.md).
//!
//! Two cases, each timed with `rdtsc`, which under QEMU's `-icount` advances by one per
//! instruction, so a figure is instructions per operation. Each case warms up with one
//! sample and is then followed by N samples (default 5), each the mean over 1000
//! operations. xtask boots once with the checks on and once with `rcc=off` and compares
//! the two.
//!
//! - [`NEVER_MAPPED`]: create and delete a 4 KiB vregion on this core,
//!   `RES_OPEN("here/vregion/b", size 4096, rwcx/----)` then `RES_CLOSE`. The vregion is
//!   never attached to an address space (P4 Table 5's open and close of a resource).
//! - [`MAPPED`]: the same work as Linux's `mmap` + one-byte write + `munmap` of an
//!   anonymous page: create the vregion, attach it writable to this program's own address
//!   space (`control ATTACH` on a vspace handle opened once, before timing), write one byte
//!   to it, detach it (`control DETACH`), delete it. The kernel zeroes the vregion's frame
//!   when it creates it and maps it when it is attached, so the write does not fault.
//!
//! The operations run as user 1000 (`SETUSER`), not as the kernel (user 0), whom the
//! checks let through at their first test: so a sample includes the check a program pays.
//! Before measuring, a probe (`ulib::res::rcc_probe`) finds out whether the checks are on:
//! it opens a vregion whose creator may not `control` it and tries `control INFO` (`Denied`:
//! on; allowed: off).
//!
//! Output: `resbench: user=1000 rcc=on` (or `off`, or `unknown` if the probe could not
//! tell), then one line per sample of each case,
//! `BENCH {"peer":"musubi","case":"vregion create+delete 4 KiB, never mapped","unit":"instructions","per_op":123.4}`,
//! then `BENCH done`; exit 0. A failed call prints `BENCH error {...}` and exits 1.
//!
//! `resbench ladder M N`: a resource operation on this core, another core and machine M
//! (`ladder`, for `cargo xtask bench machines`).
#![no_std]
#![no_main]

extern crate alloc;

mod ladder;

use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::Error;
use ulib::bench::{self, rdtsc};
use ulib::{println, res};

ulib::main!(main);

const DEFAULT_SAMPLES: usize = 5;
const OPS: u64 = 1000;
/// The case name of creating and deleting a vregion that is never mapped.
const NEVER_MAPPED: &str = "vregion create+delete 4 KiB, never mapped";
/// The case name of the create, attach, one-byte write, detach, delete cycle.
const MAPPED: &str = "vregion create+attach+write+detach+delete 4 KiB";
const NAME: &str = "here/vregion/b";
const SIZE: u64 = 4096;
/// Where [`MAPPED`] attaches the vregion: above the heap's limit and below the stack, so
/// nothing else of the program is ever there.
const AT: u64 = 0x0000_7100_0000_0000;
/// The user the operations run as (any but the kernel's 0).
const USER: UserId = UserId(1000);

fn main(args: &[&str]) -> i32 {
    if let [_, "ladder", m, n] = args {
        return match (m.trim_start_matches('m').parse(), n.parse()) {
            (Ok(m), Ok(n)) if n > 0 => ladder::ladder(m, n),
            _ => {
                println!("usage: resbench ladder MACHINE SAMPLES");
                2
            }
        };
    }
    let samples = match args.get(1).map(|a| a.parse::<usize>()) {
        None => DEFAULT_SAMPLES,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            println!("usage: resbench [SAMPLES]");
            return 2;
        }
    };
    let user = match res::setuser(USER) {
        Ok(()) => USER,
        Err(e) => {
            let now = res::getuser().unwrap_or(UserId::KERNEL);
            println!(
                "resbench: cannot become user {} ({e}); measuring as user {}",
                USER.0, now.0
            );
            now
        }
    };
    let rcc = match res::rcc_probe("here/vregion/rcc-probe") {
        // The kernel passes every check, so the probe tells nothing.
        _ if user == UserId::KERNEL => "unknown",
        Ok(true) => "on",
        Ok(false) => "off",
        Err(_) => "unknown",
    };
    println!("resbench: user={} rcc={rcc}", user.0);
    if bench::samples(NEVER_MAPPED, samples, OPS, |n| {
        create_delete(n).map_err(Error::message)
    })
    .is_err()
    {
        return 1;
    }
    // The handle to this program's own address space, as Linux's mm is there without one.
    let vspace = match res::open_vspace("here/vspace/resbench", None, Rights::OWNER_ALL) {
        Ok(v) => v,
        Err(e) => {
            println!("BENCH error {{\"case\":\"{MAPPED}\",\"error\":\"vspace: {e}\"}}");
            return 1;
        }
    };
    if bench::samples(MAPPED, samples, OPS, |n| {
        create_map_delete(vspace, n).map_err(Error::message)
    })
    .is_err()
    {
        return 1;
    }
    bench::done();
    0
}

/// Time `n` create+delete pairs; returns the time-stamp ticks they took.
fn create_delete(n: u64) -> Result<u64, Error> {
    let start = rdtsc();
    for _ in 0..n {
        let id = res::open_vregion(NAME, SIZE, Rights::OWNER_ALL)?;
        res::close(id)?;
    }
    Ok(rdtsc() - start)
}

/// Time `n` cycles of create, attach, one-byte write, detach, delete; returns the ticks.
fn create_map_delete(vspace: ResId, n: u64) -> Result<u64, Error> {
    let start = rdtsc();
    for _ in 0..n {
        let id = res::open_vregion(NAME, SIZE, Rights::OWNER_ALL)?;
        res::attach(vspace, id, AT, true)?;
        // SAFETY: the page at AT was just attached writable; nothing else of this program
        // refers to it.
        unsafe { core::ptr::write_volatile(AT as *mut u8, 1) };
        res::detach(vspace, AT)?;
        res::close(id)?;
    }
    Ok(rdtsc() - start)
}
