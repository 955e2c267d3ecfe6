//! `fsfuzz full`: a full disk is a clear error, and the file service serves on (issue 16).
//!
//! On a small fresh volume: KEEP.TXT is written and closed; then FILL.DAT is written 4 KiB
//! at a time until a write fails, which must be `NoMemory` (the file service's "disk
//! full"), and so must one more; FILL.DAT closes, and holds at least every byte whose
//! write succeeded (a write that failed may have placed part of its bytes); KEEP.TXT reads
//! back whole; a new file's first write fails the same way. After FILL.DAT is deleted
//! (which frees its clusters but the first) AFTER.TXT is written and read back. Every step
//! prints one line; the last is `fsfuzz full: ok` or `fsfuzz full: N problems`, and the
//! exit status 1 on any problem.

use alloc::vec::Vec;
use ulib::abi::Error;
use ulib::fs;
use ulib::println;

/// Bytes of one write.
const CHUNK: usize = 4096;
/// Writes before the test calls the disk endless (a hang guard: 64 MiB).
const MOST: usize = 16 * 1024;

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    fsmodel::data(seed, len as u64)
}

pub fn run() -> i32 {
    let mut problems = 0;
    let mut check = |what: &str, ok: bool| {
        println!("fsfuzz full: {what}: {}", if ok { "ok" } else { "FAILED" });
        if !ok {
            problems += 1;
        }
    };
    let keep = bytes(1, 10_000);
    check("KEEP.TXT written", fs::write_all("KEEP.TXT", &keep).is_ok());
    let fd = match fs::open("FILL.DAT", fs::MODE_WRITE) {
        Ok(fd) => fd,
        Err(e) => {
            println!("fsfuzz full: open FILL.DAT: {e}");
            return 1;
        }
    };
    let mut written = 0usize;
    let mut failed = None;
    for i in 0..MOST {
        match fs::write(fd, &bytes(100 + i as u64, CHUNK)) {
            Ok(n) if n == CHUNK => written += n,
            Ok(n) => {
                println!("fsfuzz full: a short write of {n} bytes");
                failed = Some(Error::Unknown);
                break;
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    println!(
        "fsfuzz full: {written} bytes written to FILL.DAT, then {}",
        failed.map_or("no error".into(), |e| alloc::format!("{e}"))
    );
    check(
        "the disk filled up: NoMemory",
        failed == Some(Error::NoMemory),
    );
    // A failed write may have placed part of its bytes (up to the last cluster's end);
    // another chunk needs a cluster more, which there is not.
    let again = fs::write(fd, &bytes(7, CHUNK));
    println!("fsfuzz full: another {CHUNK}-byte write: {again:?}");
    check(
        "another write on the full disk: NoMemory",
        again == Err(Error::NoMemory),
    );
    check("FILL.DAT closed", fs::close(fd).is_ok());
    let size = fs::stat("FILL.DAT").map(|s| s.size as usize);
    check(
        "FILL.DAT holds every byte written",
        size.is_ok_and(|s| s >= written && s < written + 2 * CHUNK),
    );
    let fill = fs::read_all("FILL.DAT").unwrap_or_default();
    let whole = (0..written / CHUNK)
        .all(|i| fill.get(i * CHUNK..(i + 1) * CHUNK) == Some(&bytes(100 + i as u64, CHUNK)[..]));
    check("FILL.DAT reads back as written", whole);
    check(
        "KEEP.TXT intact",
        fs::read_all("KEEP.TXT").is_ok_and(|d| d == keep),
    );
    let new = fs::open("NEW.DAT", fs::MODE_WRITE);
    check("a new file opens on the full disk", new.is_ok());
    if let Ok(fd) = new {
        let first = fs::write(fd, b"y");
        check(
            "a new file's first write: NoMemory",
            first == Err(Error::NoMemory),
        );
        check("it closes", fs::close(fd).is_ok());
        check("it is deleted", fs::unlink("NEW.DAT").is_ok());
    }
    check("FILL.DAT deleted", fs::unlink("FILL.DAT").is_ok());
    let after = bytes(2, 20_000);
    check(
        "AFTER.TXT written after the delete",
        fs::write_all("AFTER.TXT", &after).is_ok(),
    );
    check(
        "AFTER.TXT reads back",
        fs::read_all("AFTER.TXT").is_ok_and(|d| d == after),
    );
    check(
        "KEEP.TXT still intact",
        fs::read_all("KEEP.TXT").is_ok_and(|d| d == keep),
    );
    if problems == 0 {
        println!("fsfuzz full: ok");
        0
    } else {
        println!("fsfuzz full: {problems} problems");
        1
    }
}
