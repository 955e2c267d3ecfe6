//! `bufcheck load STOP [FILES]`, `bufcheck bad` and `bufcheck oneway`: checks of the buffer managers (`bufd`,
//! `abi::buf`) for `user/shell/bufd.script`.
//!
//! `load STOP [FILES]` writes FILES files (default 4) of 3,000 bytes each (six sectors and
//! more, so a file spans stripes and managers), each round with other bytes, and reads
//! every one back and compares, round after round until a file named STOP exists. The shell
//! meanwhile replaces and kills buffer managers. At the end it writes its verdict to
//! `BUFLOAD.TXT` (and prints it): `rounds R, files F, mismatches M, errors E`; anything but
//! `mismatches 0, errors 0` means a replacement or a crash lost or broke data. It also
//! writes the managers' server generations at its start and at its end, which show that
//! they were replaced while it ran.
//!
//! `bad` sends `fs.buf0` (and `fs.buf1` if there is one) requests that must be refused:
//! no ICA, 0 or 9 sectors, sectors beyond the disk, sectors of another manager, an unknown
//! label, a read into a read-only ICA, a write by another user (and that user's request
//! to the disk driver `blk`). It prints one line per case and `bad requests
//! refused: N of N`; then sector 0 is written back as it was with the ICA lent read-only.
//!
//! `oneway` floods `fs`, `fs.buf0` and `blk` with one-way messages carrying pages, each of
//! which must be let go of (`oneway.rs`). `warm` and `blkdown` check a buffer manager
//! whose disk driver is gone (`blkdown.rs`).
#![no_std]
#![no_main]

extern crate alloc;

mod blkdown;
mod oneway;

use alloc::format;
use alloc::string::String;
use ulib::abi::blk::{BLK_ICA_SIZE, MAX_SECTORS};
use ulib::abi::buf::{self, BUF_INFO, BUF_READ, BUF_WRITE};
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{Msg, MSG_ICA_READ_ONLY};
use ulib::abi::res::Rights;
use ulib::abi::Error;
use ulib::{fnid, fs, ipc, println, res};

ulib::main!(main);

const USAGE: &str =
    "usage: bufcheck load STOP [FILES] | bufcheck bad | bufcheck oneway | bufcheck warm | bufcheck blkdown";
const FILE_BYTES: usize = 3000;

fn main(args: &[&str]) -> i32 {
    match args.get(1..).unwrap_or_default() {
        ["load", stop] => load(stop, 4),
        ["load", stop, n] => match n.parse() {
            Ok(n @ 1..=16) => load(stop, n),
            _ => {
                println!("bufcheck: FILES from 1 to 16");
                2
            }
        },
        ["bad"] => bad(),
        ["oneway"] => report("oneway", oneway::one_way()),
        ["warm"] => report("warm", blkdown::warm()),
        ["blkdown"] => report("blkdown", blkdown::blk_down()),
        ["takeblk"] => report("takeblk", blkdown::take_blk()),
        _ => {
            println!("bufcheck: {USAGE}");
            2
        }
    }
}

/// Print how check `what` went: `bufcheck WHAT: ok: ...` (0) or `FAILED` (1).
fn report(what: &str, r: Result<String, String>) -> i32 {
    match r {
        Ok(how) => {
            println!("bufcheck {what}: ok: {how}");
            0
        }
        Err(e) => {
            println!("bufcheck {what}: FAILED: {e}");
            1
        }
    }
}

/// The bytes of file `i` in round `r`.
fn pattern(r: u32, i: usize) -> alloc::vec::Vec<u8> {
    (0..FILE_BYTES)
        .map(|k| {
            (k as u32)
                .wrapping_mul(31)
                .wrapping_add(r * 7 + i as u32 * 13) as u8
        })
        .collect()
}

/// The server generation of every buffer manager, as `fs.buf0 G, fs.buf1 G`.
fn generations() -> String {
    let list = fnid::list_local().unwrap_or_default();
    let mut out = String::new();
    for name in buf::FN_NAMES {
        if let Some(f) = list.iter().find(|f| f.name() == name) {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(&format!("{name} {}", f.generation));
        }
    }
    out
}

fn load(stop: &str, files: usize) -> i32 {
    let before = generations();
    let (mut rounds, mut written, mut mismatches, mut errors) = (0u32, 0u32, 0u32, 0u32);
    let mut first_error = String::new();
    let mut note = |what: String, errors: &mut u32| {
        *errors += 1;
        if first_error.is_empty() {
            first_error = what;
        }
    };
    // A hang guard only: the shell writes STOP long before.
    while fs::stat(stop).is_err() && rounds < 100_000 {
        for i in 0..files {
            let name = format!("LOAD{i}.DAT");
            match fs::write_all(&name, &pattern(rounds, i)) {
                Ok(()) => written += 1,
                Err(e) => note(format!("write {name}: {e}"), &mut errors),
            }
        }
        for i in 0..files {
            let name = format!("LOAD{i}.DAT");
            match fs::read_all(&name) {
                Ok(d) if d == pattern(rounds, i) => {}
                Ok(_) => mismatches += 1,
                Err(e) => note(format!("read {name}: {e}"), &mut errors),
            }
        }
        rounds += 1;
    }
    let verdict = format!(
        "bufcheck: rounds {rounds}, files {written}, mismatches {mismatches}, errors {errors}{}{}\n\
         bufcheck: managers at the start: {before}\nbufcheck: managers at the end: {}\n",
        if first_error.is_empty() { "" } else { "; first: " },
        first_error,
        generations()
    );
    ulib::print!("{verdict}");
    if let Err(e) = fs::write_all("BUFLOAD.TXT", verdict.as_bytes()) {
        println!("bufcheck: cannot write BUFLOAD.TXT: {e}");
        return 1;
    }
    i32::from(mismatches + errors > 0)
}

/// Where the probe's ICA is attached.
const AT: u64 = 0x0000_5600_0000_0000;

/// One request to `to` (with a fresh ICA if `ica`): the reply's value, or the call's error.
pub(crate) fn ask(to: FnId, label: u64, first: u64, count: u64, ica: bool) -> u64 {
    ask_mapped(to, label, first, count, ica, true)
}

/// [`ask`] with the fresh ICA attached `writable` or read-only.
fn ask_mapped(to: FnId, label: u64, first: u64, count: u64, ica: bool, writable: bool) -> u64 {
    let msg = Msg {
        label,
        words: [first, count, 0, 0, 0, 0],
    };
    if !ica {
        return match fnid::call_fn(to, &msg) {
            Ok((v, _)) => v,
            Err(e) => e as u64,
        };
    }
    let region = match res::open_vregion("here/vregion/bufcheck", BLK_ICA_SIZE, Rights::OWNER_ALL)
        .and_then(|r| res::attach_here(r, AT, writable).map(|()| r))
    {
        Ok(r) => r,
        Err(e) => return e as u64,
    };
    let (v, at) = match fnid::call_fn(to, &ipc::with_ica(msg, region)) {
        Ok((v, reply)) => match ipc::ica_at(&reply) {
            Some((_, at)) => (v, at),
            None => {
                println!("bufcheck: the reply did not carry the ICA back");
                return Error::Unknown as u64;
            }
        },
        Err(e) => (e as u64, AT),
    };
    let _ = res::detach_here(at);
    let _ = res::close(region);
    v
}

/// Read sector 0 into an ICA, then write it back with the ICA lent read-only: answered 0,
/// the ICA back writable.
fn lent_write_back(m0: FnId) -> Result<(), String> {
    let region = res::open_vregion("here/vregion/bufcheck", BLK_ICA_SIZE, Rights::OWNER_ALL)
        .map_err(|e| format!("vregion: {e}"))?;
    if let Err(e) = res::attach_here(region, AT, true) {
        let _ = res::close(region);
        return Err(format!("attach: {e}"));
    }
    let mut at = AT;
    let mut r = Ok(());
    for label in [BUF_READ, BUF_WRITE | MSG_ICA_READ_ONLY] {
        let msg = Msg {
            label,
            words: [0, 1, 0, 0, 0, 0],
        };
        match fnid::call_fn(m0, &ipc::with_ica(msg, region)) {
            Ok((v, reply)) => {
                if let Some((_, back)) = ipc::ica_at(&reply) {
                    at = back;
                }
                if v != 0 || ipc::ica_read_only(&reply) {
                    r = Err(format!(
                        "request {label:#x}: {} (back read-only: {})",
                        Error::from_code(v),
                        ipc::ica_read_only(&reply)
                    ));
                    break;
                }
            }
            Err(e) => {
                r = Err(format!("request {label:#x}: {e}"));
                break;
            }
        }
    }
    let _ = res::detach_here(at);
    let _ = res::close(region);
    r
}

fn bad() -> i32 {
    let Ok(m0) = fnid::lookup(buf::FN_NAMES[0]) else {
        println!("bufcheck: no buffer manager fs.buf0 (is bufd running?)");
        return 1;
    };
    let (v, info) = match fnid::call_fn(
        m0,
        &Msg {
            label: BUF_INFO,
            ..Msg::default()
        },
    ) {
        Ok(r) => r,
        Err(e) => {
            println!("bufcheck: BUF_INFO: {e}");
            return 1;
        }
    };
    if v != 0 {
        println!("bufcheck: BUF_INFO: {}", Error::from_code(v));
        return 1;
    }
    let (sectors, parts) = (info.words[0], info.words[2]);
    let mut cases: alloc::vec::Vec<(&str, u64, Error)> = alloc::vec![
        (
            "read without an ICA",
            ask(m0, BUF_READ, 0, 1, false),
            Error::InvalidArgument
        ),
        (
            "write without an ICA",
            ask(m0, BUF_WRITE, 0, 1, false),
            Error::InvalidArgument
        ),
        (
            "read of 0 sectors",
            ask(m0, BUF_READ, 0, 0, true),
            Error::InvalidArgument
        ),
        (
            "read of 9 sectors",
            ask(m0, BUF_READ, 0, MAX_SECTORS + 1, true),
            Error::InvalidArgument
        ),
        (
            "read beyond the disk",
            ask(m0, BUF_READ, sectors, 1, true),
            Error::TooLong
        ),
        (
            "write across the disk's end",
            ask(m0, BUF_WRITE, sectors - 1, 2, true),
            Error::TooLong
        ),
        (
            "read of sector 2^63",
            ask(m0, BUF_READ, 1 << 63, 1, true),
            Error::TooLong
        ),
        (
            "an unknown request",
            ask(m0, 99, 0, 1, true),
            Error::NotSupported
        ),
        (
            "a read into a read-only ICA",
            ask_mapped(m0, BUF_READ, 0, 1, true, false),
            Error::InvalidArgument
        ),
    ];
    // Sectors are the administrator's: another user reaches neither a buffer manager nor
    // the disk driver (their endpoints let others send nothing), only files through `fs`
    // (a regression: any user could read and write any sector, past every file's owner).
    let other_user = |label: u64, to: FnId| {
        let me = res::getuser().map_or(1, |u| u.0);
        match res::setuser(ulib::abi::res::UserId(2000)) {
            Ok(()) => {
                let v = ask(to, label, 0, 1, true);
                let _ = res::setuser(ulib::abi::res::UserId(me));
                v
            }
            Err(e) => e as u64,
        }
    };
    cases.push((
        "a sector written by another user",
        other_user(BUF_WRITE, m0),
        Error::Denied,
    ));
    if let Ok(blk) = fnid::lookup(ulib::abi::blk::FN_BLK) {
        cases.push((
            "the disk driver asked by another user",
            other_user(ulib::abi::blk::BLK_READ, blk),
            Error::Denied,
        ));
    }
    if parts > 1 {
        // Sector STRIPE is the next manager's.
        cases.push((
            "a sector of another manager",
            ask(m0, BUF_READ, buf::STRIPE, 1, true),
            Error::InvalidArgument,
        ));
    }
    let mut refused = 0;
    for (what, got, want) in &cases {
        let ok = *got == *want as u64;
        refused += usize::from(ok);
        println!(
            "bufcheck: {what}: {} ({})",
            Error::from_code(*got),
            if ok {
                "refused as it should be"
            } else {
                "WRONG"
            }
        );
    }
    // The manager still serves: a good read, and sector 0 written back as it was with the
    // ICA lent read-only (`MSG_ICA_READ_ONLY`: bufd and blk only read it; it comes back
    // writable).
    let good = ask(m0, BUF_READ, 0, 1, true);
    match lent_write_back(m0) {
        Ok(()) => println!("bufcheck: a write with a lent ICA: ok"),
        Err(e) => {
            println!("bufcheck: a write with a lent ICA: {e}");
            return 1;
        }
    }
    if good == 0 {
        println!("bufcheck: a good read after them: ok");
    } else {
        println!(
            "bufcheck: a good read after them: {}",
            Error::from_code(good)
        );
    }
    println!(
        "bufcheck: bad requests refused: {refused} of {}",
        cases.len()
    );
    i32::from(refused != cases.len() || good != 0)
}
