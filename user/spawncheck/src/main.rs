//! `spawncheck PROGRAM`: checks `SPAWN_IMAGE` (`abi::syscall`), the call that starts a
//! program from an ELF image in the caller's memory, with PROGRAM (a path on the disk, read
//! through `ulib::fs`) as the good image. Every bad case must be refused with its error and
//! start nothing; the good one must run and exit 0.
//!
//! | case | expected |
//! |---|---|
//! | an image pointer into no mapping | `BadAddress` |
//! | an image longer than `MAX_IMAGE` | `TooLong` |
//! | no name (empty argument buffer) | `InvalidArgument` |
//! | arguments that are not UTF-8 | `InvalidArgument` |
//! | a priority that does not exist (7) | `InvalidArgument` |
//! | driver priority, above this program's | `Denied` |
//! | an empty image, random bytes, the good image cut in half, its ELF magic broken | `BadExecutable` |
//! | a core that does not exist (64, 2^63) | `NoSuchCore` |
//! | for another core: an image pointer into no mapping, random bytes | `BadAddress`, `BadExecutable` (that core checks the copy) |
//! | the good image, on this core and on another | runs there, exit 0 |
//!
//! On one core the other core's cases are not run, and it says so.
//!
//! Prints one line per case and `spawncheck: ok`, or `spawncheck: N failed` (exit 1).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use ulib::abi::syscall::{self as nr, decode, MAX_IMAGE};
use ulib::abi::{Error, Pid, Priority};
use ulib::{fs, println, sys};

ulib::main!(main);

/// `SPAWN_IMAGE` with raw arguments, on this core.
fn raw(image: u64, len: u64, args: &[u8], priority: u64) -> Result<u64, Error> {
    raw_on(image, len, args, priority, nr::SPAWN_IMAGE_HERE)
}

/// `SPAWN_IMAGE` with raw arguments, on `core`.
fn raw_on(image: u64, len: u64, args: &[u8], priority: u64, core: u64) -> Result<u64, Error> {
    // SAFETY: the kernel only reads the buffers (and must refuse what is not ours).
    let (rax, rdx) = unsafe {
        sys::raw::syscall6(
            nr::SPAWN_IMAGE,
            image,
            len,
            args.as_ptr() as u64,
            args.len() as u64,
            priority,
            core,
        )
    };
    decode(rax, rdx)
}

fn main(args: &[&str]) -> i32 {
    let [_, program] = args else {
        println!("spawncheck: usage: spawncheck PROGRAM (an ELF file on the disk)");
        return 2;
    };
    let good = match fs::read_all(program) {
        Ok(d) => d,
        Err(e) => {
            println!("spawncheck: cannot read {program}: {e}");
            return 1;
        }
    };
    let name = b"image\0";
    let app = Priority::App as u64;
    let mut half = good.clone();
    half.truncate(good.len() / 2);
    let mut magic = good.clone();
    magic[1] = b'X';
    let mut random: Vec<u8> = Vec::with_capacity(4096);
    let mut x: u32 = 12345;
    for _ in 0..4096 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        random.push((x >> 16) as u8);
    }
    let image = |d: &[u8]| (d.as_ptr() as u64, d.len() as u64);
    let (gp, gl) = image(&good);
    // Another core online, if there is one (its cases are left out on one core).
    let here = sys::core().unwrap_or(0);
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).unwrap_or(0);
    let other = cores[..n]
        .iter()
        .find(|c| c.online != 0 && c.core as usize != here)
        .map(|c| u64::from(c.core));
    let mut cases: Vec<(&str, Result<u64, Error>, Error)> = alloc::vec![
        (
            "an image pointer into no mapping",
            raw(0x10, 4096, name, app),
            Error::BadAddress,
        ),
        (
            "an image above MAX_IMAGE",
            raw(gp, MAX_IMAGE + 1, name, app),
            Error::TooLong,
        ),
        ("no name", raw(gp, gl, b"", app), Error::InvalidArgument),
        (
            "arguments not UTF-8",
            raw(gp, gl, b"\xff\xfe\0", app),
            Error::InvalidArgument,
        ),
        ("priority 7", raw(gp, gl, name, 7), Error::InvalidArgument),
        (
            "driver priority",
            raw(gp, gl, name, Priority::Driver as u64),
            Error::Denied,
        ),
        (
            "an empty image",
            raw(gp, 0, name, app),
            Error::BadExecutable,
        ),
        (
            "random bytes",
            {
                let (p, l) = image(&random);
                raw(p, l, name, app)
            },
            Error::BadExecutable,
        ),
        (
            "the image cut in half",
            {
                let (p, l) = image(&half);
                raw(p, l, name, app)
            },
            Error::BadExecutable,
        ),
        (
            "its ELF magic broken",
            {
                let (p, l) = image(&magic);
                raw(p, l, name, app)
            },
            Error::BadExecutable,
        ),
        ("core 64", raw_on(gp, gl, name, app, 64), Error::NoSuchCore),
        (
            "core 2^63",
            raw_on(gp, gl, name, app, 1 << 63),
            Error::NoSuchCore
        ),
    ];
    if let Some(o) = other {
        cases.push((
            "an image pointer into no mapping, for another core",
            raw_on(0x10, 4096, name, app, o),
            Error::BadAddress,
        ));
        let (p, l) = image(&random);
        cases.push((
            "random bytes for another core (it checks the copy)",
            raw_on(p, l, name, app, o),
            Error::BadExecutable,
        ));
    }
    let mut failed = 0;
    for (what, got, want) in cases {
        match got {
            Err(e) if e == want => println!("spawncheck: {what}: {e} (as it should be)"),
            Err(e) => {
                failed += 1;
                println!("spawncheck: {what}: {e}, want {want}: FAILED");
            }
            Ok(pid) => {
                failed += 1;
                let _ = sys::kill(Pid(pid));
                println!(
                    "spawncheck: {what}: started {}, want {want}: FAILED",
                    Pid(pid)
                );
            }
        }
    }
    let targets = [None, other.map(|c| c as usize)];
    for core in targets
        .into_iter()
        .take(if other.is_some() { 2 } else { 1 })
    {
        let want = core.unwrap_or(here);
        let r = sys::spawn_image(&good, "image", &["from", "memory"], Priority::App, core);
        match r.and_then(|pid| Ok((pid, sys::wait(Some(pid))?.1))) {
            Ok((pid, status))
                if status.how == ulib::abi::ENDED_EXIT
                    && status.code == 0
                    && pid.core() == want =>
            {
                println!("spawncheck: the good image ran on core {want} and exited 0")
            }
            Ok((pid, status)) => {
                failed += 1;
                println!(
                    "spawncheck: the good image ({pid}, want core {want}) ended (how {}, code \
                     {}): FAILED",
                    status.how, status.code
                );
            }
            Err(e) => {
                failed += 1;
                println!("spawncheck: the good image on core {want}: {e}: FAILED");
            }
        }
    }
    if other.is_none() {
        println!("spawncheck: one core: the other core's cases were not run");
    }
    if failed == 0 {
        println!("spawncheck: ok");
        0
    } else {
        println!("spawncheck: {failed} failed");
        1
    }
}
