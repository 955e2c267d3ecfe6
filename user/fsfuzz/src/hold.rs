//! `fsfuzz hold STOP`: open files kept across the file service's replacement.
//!
//! It writes HOLDR.TXT (6,000 bytes) and closes it, opens HOLDW.DAT to write and writes
//! 5,000 bytes, opens HOLDR.TXT to read and reads 1,000, then registers the function
//! `fsfuzz.hold` to say it is ready (the script waits for it with `fn wait`, then runs
//! `replace fs fsd`, then writes STOP). Once STOP exists it goes on with the same handles:
//! 3,000 bytes more to HOLDW.DAT, the rest of HOLDR.TXT from where it stopped, HOLDW.DAT
//! read back from 0 through the write handle, both closed, both read back whole; a handle
//! it never held is still `InvalidArgument`. It writes `fsfuzz hold: ok` (or the problems)
//! to HOLD.TXT and the console, with the server generations it saw at the start and end.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use ulib::abi::Error;
use ulib::fs::{self, Fd};
use ulib::{fnid, println, sys};

/// Polls for STOP before giving up (a hang guard: 60 s at 50 ms).
const POLLS: u32 = 1200;

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    fsmodel::data(seed, len as u64)
}

fn generation() -> u64 {
    let id = fnid::lookup(ulib::abi::fs::FN_FS).ok();
    id.and_then(|id| fnid::info(id).ok())
        .map_or(0, |f| f.generation)
}

/// Read up to `len` bytes from `fd`, in pieces.
fn read_n(fd: Fd, len: usize) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut buf = alloc::vec![0u8; 4096];
    while out.len() < len {
        let want = (len - out.len()).min(buf.len());
        match fs::read(fd, &mut buf[..want])? {
            0 => break,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
    Ok(out)
}

pub fn run(stop: &str) -> i32 {
    let mut report = String::new();
    let mut problems = 0;
    let mut check = |what: &str, ok: bool| {
        let _ = writeln!(
            report,
            "fsfuzz hold: {what}: {}",
            if ok { "ok" } else { "FAILED" }
        );
        if !ok {
            problems += 1;
        }
    };
    let (r_data, w1, w2) = (bytes(3, 6000), bytes(4, 5000), bytes(5, 3000));
    let _ = fs::unlink(stop);
    check(
        "HOLDR.TXT written",
        fs::write_all("HOLDR.TXT", &r_data).is_ok(),
    );
    let Ok(w) = fs::open("HOLDW.DAT", fs::MODE_WRITE) else {
        println!("fsfuzz hold: open HOLDW.DAT failed");
        return 1;
    };
    check(
        "HOLDW.DAT: 5,000 bytes written",
        fs::write(w, &w1[..3000]).is_ok() && fs::write(w, &w1[3000..]).is_ok(),
    );
    let Ok(r) = fs::open("HOLDR.TXT", fs::MODE_READ) else {
        println!("fsfuzz hold: open HOLDR.TXT failed");
        return 1;
    };
    check(
        "HOLDR.TXT: first 1,000 bytes",
        read_n(r, 1000).is_ok_and(|d| d == r_data[..1000]),
    );
    let before = generation();
    // Ready: the script's `fn wait fsfuzz.hold` returns, and it replaces fs.
    if let Err(e) = super::say_ready("fsfuzz.hold") {
        println!("fsfuzz hold: register fsfuzz.hold: {e}");
        return 1;
    }
    println!("fsfuzz hold: ready, files open (fs server generation {before})");
    let mut stopped = false;
    for _ in 0..POLLS {
        if fs::stat(stop).is_ok() {
            stopped = true;
            break;
        }
        let _ = sys::sleep_ns(50_000_000);
    }
    check(&format!("{stop} seen"), stopped);
    let after = generation();
    check(
        &format!("fs replaced meanwhile (server generation {before} -> {after})"),
        after > before,
    );
    check(
        "HOLDW.DAT: 3,000 bytes more through the same handle",
        fs::write(w, &w2).is_ok(),
    );
    check(
        "HOLDR.TXT: the other 5,000 bytes from where it stopped",
        read_n(r, 10_000).is_ok_and(|d| d == r_data[1000..]),
    );
    let mut whole = w1.clone();
    whole.extend_from_slice(&w2);
    check(
        "HOLDW.DAT read back through the write handle",
        fs::seek(w, 0).is_ok() && read_n(w, 10_000).is_ok_and(|d| d == whole),
    );
    check("both closed", fs::close(w).is_ok() && fs::close(r).is_ok());
    check(
        "HOLDW.DAT whole after the close",
        fs::read_all("HOLDW.DAT").is_ok_and(|d| d == whole),
    );
    check(
        "a handle never held: InvalidArgument",
        fs::read(Fd(0xbad0_0000), &mut [0u8; 8]) == Err(Error::InvalidArgument),
    );
    let verdict = if problems == 0 {
        String::from("fsfuzz hold: ok\n")
    } else {
        format!("fsfuzz hold: {problems} problems\n")
    };
    report.push_str(&verdict);
    let _ = fs::write_all("HOLD.TXT", report.as_bytes());
    for line in report.lines() {
        println!("{line}");
    }
    i32::from(problems != 0)
}
