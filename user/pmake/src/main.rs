//! `pmake JOBS WAVE WORK` / `pmake job WORK`: a "parallel make", the mixed workload of
//! `cargo xtask bench symmetry` (P2, Limited Symmetry, Fig. 3: "parallel make").
//!
//! `pmake JOBS WAVE WORK` is the make: on its own core it starts JOBS jobs in waves of WAVE
//! (`SPAWN` of `pmake job WORK`, all of a wave, then `WAIT` for all of them, like `make -j
//! WAVE` over independent targets), and exits 0 when every job exited 0 (1 otherwise,
//! printing the first failure).
//!
//! `pmake job WORK` is one job, a compiler run in miniature. It writes a generated 16 KiB
//! "source file" into a vregion of its core (`RES_OPEN` + four 4 KiB `RES_WRITE`s), reads
//! it back (`RES_READ`), "compiles" it: WORK passes of tokenising it into words and
//! entering each in a symbol table (hashing, probing, comparing: integer and memory work
//! in user mode), then writes a 4 KiB "object file" (the symbol table's digest) into a
//! second vregion and deletes both. So a job is a short process whose life is a spawn, a
//! few resource operations and an exit around user-mode work, as a compiler's is. Exits 0,
//! or 1 after printing the failed call.
//!
//! `pmake cc FILES WORK` is the same compiler run with its files on a disk (P0 Table 1's
//! analogue, `cargo xtask bench machines`): it reads the source `FILES` + `SRC.C` (`-` for
//! no prefix: this machine's disk; `m1:` for machine 1's), compiles it WORK times, writes
//! the object `FILES` + `OBJ.O` and deletes it, and prints `pmake cc files=FILES: N us`,
//! its time from the first file request to the last. `pmake src FILES` writes that source
//! (the one `pmake job` generates) first.
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use core::hint::black_box;
use ulib::abi::res::Rights;
use ulib::abi::{Error, Pid, Priority, ENDED_EXIT};
use ulib::{fs, println, res, sys};

ulib::main!(main);

const SOURCE: usize = 16 * 1024;
const CHUNK: usize = 4096;
const OBJECT: usize = 4096;
/// Symbol-table slots (a power of two).
const SLOTS: usize = 512;

fn main(args: &[&str]) -> i32 {
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    match (args.get(1).copied(), num(2), num(3)) {
        (Some("src"), _, _) if args.len() == 3 => match write_source(args[2]) {
            Ok(()) => 0,
            Err((what, e)) => {
                println!("pmake src: {what}: {e}");
                1
            }
        },
        (Some("cc"), _, Some(work)) => match cc(args[2], work) {
            Ok(us) => {
                println!("pmake cc files={}: {us} us", args[2]);
                0
            }
            Err((what, e)) => {
                println!("pmake cc: {what}: {e}");
                1
            }
        },
        (Some("job"), Some(work), _) => match job(work) {
            Ok(()) => 0,
            Err((what, e)) => {
                println!("pmake job: {what}: {e}");
                1
            }
        },
        (Some(jobs), Some(wave), Some(work)) if wave > 0 => match jobs.parse::<u64>() {
            Ok(jobs) => make(jobs, wave, work),
            Err(_) => usage(),
        },
        _ => usage(),
    }
}

fn usage() -> i32 {
    println!(
        "usage: pmake JOBS WAVE WORK | pmake job WORK | pmake src FILES | pmake cc FILES WORK"
    );
    2
}

/// Run `jobs` jobs in waves of `wave`.
fn make(jobs: u64, wave: u64, work: u64) -> i32 {
    let work_arg = format!("{work}");
    let mut started = 0;
    while started < jobs {
        let n = wave.min(jobs - started);
        let mut pids: Vec<Pid> = Vec::new();
        for _ in 0..n {
            match sys::spawn("pmake", &["job", &work_arg], Priority::App) {
                Ok(p) => pids.push(p),
                Err(e) => {
                    println!("pmake: spawn: {e}");
                    return 1;
                }
            }
        }
        for p in pids {
            match sys::wait(Some(p)) {
                Ok((_, s)) if s.how == ENDED_EXIT && s.code == 0 => {}
                Ok((_, s)) => {
                    println!("pmake: job {p} ended with how={} code={}", s.how, s.code);
                    return 1;
                }
                Err(e) => {
                    println!("pmake: wait for {p}: {e}");
                    return 1;
                }
            }
        }
        started += n;
    }
    0
}

type Failed = (&'static str, Error);

/// One job: source in, WORK passes of "compiling", object out.
fn job(work: u64) -> Result<(), Failed> {
    let me = sys::getpid().map_err(|e| ("getpid", e))?;
    let tag = format!("{}.{}", me.core(), me.serial());
    let source = generate(me.serial());
    let src = res::open_vregion(
        &format!("here/vregion/src-{tag}"),
        SOURCE as u64,
        Rights::OWNER_ALL,
    )
    .map_err(|e| ("open source", e))?;
    for (i, chunk) in source.chunks(CHUNK).enumerate() {
        res::write(src, chunk, (i * CHUNK) as u64).map_err(|e| ("write source", e))?;
    }
    let mut text = vec![0u8; SOURCE];
    res::read(src, &mut text, 0).map_err(|e| ("read source", e))?;
    let mut table = [(0u64, 0u32); SLOTS];
    for _ in 0..work {
        // A generated source has VOCABULARY symbols: the table never fills.
        let _ = compile(black_box(&text), &mut table);
    }
    let mut object = vec![0u8; OBJECT];
    for (i, (h, n)) in table.iter().enumerate() {
        object[i * 8..i * 8 + 8].copy_from_slice(&(h ^ u64::from(*n)).to_le_bytes());
    }
    let obj = res::open_vregion(
        &format!("here/vregion/obj-{tag}"),
        OBJECT as u64,
        Rights::OWNER_ALL,
    )
    .map_err(|e| ("open object", e))?;
    res::write(obj, &object, 0).map_err(|e| ("write object", e))?;
    res::close(obj).map_err(|e| ("close object", e))?;
    res::close(src).map_err(|e| ("close source", e))?;
    Ok(())
}

/// The disk names with `files` before them (`-`: none).
fn named(files: &str, name: &str) -> alloc::string::String {
    format!("{}{name}", files.strip_prefix('-').unwrap_or(files))
}

/// `pmake src FILES`: the source `cc` compiles, made on the disk.
fn write_source(files: &str) -> Result<(), Failed> {
    fs::write_all(&named(files, "SRC.C"), &generate(1)).map_err(|e| ("write SRC.C", e))
}

/// `pmake cc FILES WORK`: the compiler run with its files on a disk; its time in us.
fn cc(files: &str, work: u64) -> Result<u64, Failed> {
    let start = sys::clock_ns().map_err(|e| ("clock", e))?;
    let text = fs::read_all(&named(files, "SRC.C")).map_err(|e| ("read SRC.C", e))?;
    let mut table = [(0u64, 0u32); SLOTS];
    for _ in 0..work {
        if !compile(black_box(&text), &mut table) {
            return Err((
                "compile SRC.C: more symbols than the table holds",
                Error::Limit,
            ));
        }
    }
    let mut object = vec![0u8; OBJECT];
    for (i, (h, n)) in table.iter().enumerate() {
        object[i * 8..i * 8 + 8].copy_from_slice(&(h ^ u64::from(*n)).to_le_bytes());
    }
    let obj = named(files, "OBJ.O");
    fs::write_all(&obj, &object).map_err(|e| ("write OBJ.O", e))?;
    fs::unlink(&obj).map_err(|e| ("delete OBJ.O", e))?;
    let end = sys::clock_ns().map_err(|e| ("clock", e))?;
    Ok(end.saturating_sub(start) / 1000)
}

/// Distinct words in a source file (fewer than the symbol table's slots).
const VOCABULARY: u64 = 200;

/// A deterministic "source file": words of 2 to 9 letters from a vocabulary of
/// [`VOCABULARY`], separated by spaces and newlines, as identifiers repeat in a program.
fn generate(seed: u32) -> Vec<u8> {
    let mut x = u64::from(seed) | 1;
    let mut next = || {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(SOURCE);
    while out.len() < SOURCE {
        let r = next();
        let word = r % VOCABULARY;
        let len = 2 + (word % 8) as usize;
        for i in 0..len {
            out.push(b'a' + ((word >> i) % 26) as u8);
        }
        out.push(if r % 11 == 0 { b'\n' } else { b' ' });
    }
    out.truncate(SOURCE);
    out
}

/// One pass: split `text` into words and count each in `table` (FNV-1a hash, linear
/// probing; a slot holds the hash and the count). False if a word found the table full (a
/// source read from a disk may have any number of symbols).
fn compile(text: &[u8], table: &mut [(u64, u32); SLOTS]) -> bool {
    for word in text.split(|&b| b == b' ' || b == b'\n') {
        if word.is_empty() {
            continue;
        }
        let h = word.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut i = h as usize & (SLOTS - 1);
        let mut probes = 0;
        loop {
            let slot = &mut table[i];
            if slot.1 == 0 || slot.0 == h {
                slot.0 = h;
                slot.1 += 1;
                break;
            }
            probes += 1;
            if probes == SLOTS {
                return false;
            }
            i = (i + 1) & (SLOTS - 1);
        }
    }
    true
}
