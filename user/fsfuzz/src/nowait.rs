//! `fsfuzz nowait`: the reply-less file calls (`ulib::fs::nowait`, P0 Table 4) against
//! the file service. Each check fails if the calls are not queued in order with the
//! waiting ones, if their errors are lost, or if their ICAs leak:
//!
//! 1. a file written by reply-less writes (more of them than may be out at once) and
//!    closed by a reply-less close reads back whole, by waiting calls made at once after;
//! 2. a reply-less write on a handle the service never gave returns at once, and the next
//!    `settle` says `InvalidArgument` (the one after, nothing);
//! 3. a reply-less delete is seen by the next `stat`;
//! 4. a child that ends with its reply-less calls out (`fsfuzz nowait-child`, which first
//!    checks that it has request ICAs): its writes and close are performed (the file reads
//!    back whole), and none of its ICAs is left once the service has answered them (no
//!    `fs-PID-N` vregion of the child).
//!
//! Prints `fsfuzz nowait: ok` or what went wrong; exits 0 or 1.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::{Error, Priority, ENDED_EXIT};
use ulib::fs::{self, Fd};
use ulib::{println, res, sys};

/// Pieces written by reply-less writes (more than `MAX_PENDING`) and their size.
const PIECES: usize = 9;
const PIECE: usize = 700;
/// The child's file.
const CHILD_FILE: &str = "NWCHILD.TXT";
/// Looks for the child's ICAs to be gone (after the service answered, closing them may
/// take a notice to another core), 10 ms apart: a hang guard.
const LOOKS: u32 = 500;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i % 251) as u8))
        .collect()
}

/// Write `PIECES` pieces to `name` reply-less and close it reply-less: the bytes written.
fn write_nowait_file(name: &str, seed: u8) -> Result<Vec<u8>, String> {
    let fd = fs::open(name, fs::MODE_WRITE).map_err(|e| format!("open {name}: {e}"))?;
    let data = pattern(seed, PIECES * PIECE);
    for piece in data.chunks(PIECE) {
        let n = fs::write_nowait(fd, piece).map_err(|e| format!("write_nowait: {e}"))?;
        if n != piece.len() {
            return Err(format!("write_nowait took {n} of {} bytes", piece.len()));
        }
        if fs::nowait::out() > fs::nowait::MAX_PENDING {
            return Err(format!("{} calls out", fs::nowait::out()));
        }
    }
    fs::close_nowait(fd).map_err(|e| format!("close_nowait: {e}"))?;
    Ok(data)
}

pub fn child() -> i32 {
    // Ends with its calls out: no settle. First it makes sure it has request ICAs (so the
    // parent's look for them afterwards tests something).
    let r = write_nowait_file(CHILD_FILE, 7).and_then(|_| {
        let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
        let mine = icas_of(me)?;
        if mine == 0 {
            return Err(format!(
                "no fs-{}-N request ICA to leave behind",
                me.in_machine()
            ));
        }
        Ok(())
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            println!("fsfuzz nowait-child: {e}");
            1
        }
    }
}

/// How many request ICAs of `ulib::fs` (`fs-PID-N` vregions) process `pid` has on its core.
fn icas_of(pid: ulib::abi::Pid) -> Result<usize, String> {
    let prefix = format!("fs-{}-", pid.in_machine());
    Ok(res::list_all(pid.core())
        .map_err(|e| format!("list: {e}"))?
        .iter()
        .filter(|r| r.name().starts_with(&prefix))
        .count())
}

pub fn run() -> i32 {
    match checks() {
        Ok(()) => {
            println!("fsfuzz nowait: ok");
            0
        }
        Err(e) => {
            println!("fsfuzz nowait: FAILED: {e}");
            1
        }
    }
}

fn checks() -> Result<(), String> {
    // 1. In order with the waiting calls.
    let data = write_nowait_file("NW.TXT", 3)?;
    let back = fs::read_all("NW.TXT").map_err(|e| format!("read NW.TXT: {e}"))?;
    if back != data {
        return Err(format!(
            "NW.TXT read back {} bytes, not the {} written (or other bytes)",
            back.len(),
            data.len()
        ));
    }
    fs::settle().map_err(|e| format!("settle after the writes: {e}"))?;
    // 2. An error comes at settle.
    match fs::write_nowait(Fd(0xbad0_0000), b"x") {
        Ok(1) => {}
        r => {
            return Err(format!(
                "a reply-less write on a bad handle: {r:?}, not Ok(1)"
            ))
        }
    }
    match (fs::settle(), fs::settle()) {
        (Err(Error::InvalidArgument), Ok(())) => {}
        r => {
            return Err(format!(
                "settles after a bad write: {r:?}, not (InvalidArgument, Ok)"
            ))
        }
    }
    // 3. A reply-less delete, seen by the next call.
    fs::unlink_nowait("NW.TXT").map_err(|e| format!("unlink_nowait: {e}"))?;
    match fs::stat("NW.TXT") {
        Err(Error::NoSuchResource) => {}
        r => return Err(format!("stat after unlink_nowait: {r:?}")),
    }
    fs::settle().map_err(|e| format!("settle after the delete: {e}"))?;
    // 4. A child that ends with calls out.
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let pid = sys::spawn("fsfuzz", &["nowait-child"], Priority::App)
        .map_err(|e| format!("spawn the child: {e}"))?;
    let (_, st) = sys::wait_timeout(Some(pid), 60_000_000_000)
        .map_err(|e| format!("wait for the child: {e}"))?;
    if st.how != ENDED_EXIT || st.code != 0 {
        return Err(format!("the child ended {st:?}"));
    }
    let want = pattern(7, PIECES * PIECE);
    let back = fs::read_all(CHILD_FILE).map_err(|e| format!("read {CHILD_FILE}: {e}"))?;
    if back != want {
        return Err(format!(
            "{CHILD_FILE} read back {} bytes, not the {} the child wrote",
            back.len(),
            want.len()
        ));
    }
    let _ = fs::unlink(CHILD_FILE);
    if pid.core() != me.core() {
        return Err(format!(
            "the child {pid} is not on this core ({})",
            me.core()
        ));
    }
    for _ in 0..LOOKS {
        if icas_of(pid)? == 0 {
            return Ok(());
        }
        let _ = sys::sleep_ns(10_000_000);
    }
    Err(format!(
        "the child's request ICAs (fs-{}-N) are still there after {LOOKS} looks",
        pid.in_machine()
    ))
}
