//! `fsfuzz share`: the users' shares of the file service's open-file table
//! (`fsopen::Table::room_for`). Before them, one program could hold every slot, and every
//! other program's open then failed until it ended.
//!
//! Run as the administrator on a file service with no file open. It starts holders, each a
//! child acting as another user (`fsfuzz share-hold USER`) that opens files to write
//! (`SHU-USER-K.TXT`) until an open fails, writes `OPENED N ERROR` to its standard output
//! (a pipe this program reads) and keeps them open until it is killed (at most 120 s):
//!
//! 1. user 7 opens `PER_USER` files, then `Limit`;
//! 2. user 8 opens `USERS_SHARE - PER_USER` (the rest of the users' share), then `Limit`;
//! 3. this program, the administrator's, opens the rest of the table (`SLOTS -
//!    USERS_SHARE`) and is refused the next (`Limit`: the table is full);
//! 4. both holders killed, user 9 opens `PER_USER` again: the files of programs that
//!    ended are closed to make room.
//!
//! Every file is then closed and deleted. Prints `fsfuzz share: ok` or what went wrong;
//! exits 0 or 1.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use fsopen::{PER_USER, SLOTS, USERS_SHARE};
use ulib::abi::res::{Op, ResId, Rights, UserId};
use ulib::abi::syscall::control;
use ulib::abi::{Error, Pid, Priority};
use ulib::fs::{self, Fd};
use ulib::stdio::{self, Stream};
use ulib::{println, res, sys};

/// How long a holder keeps its files (a hang guard: the parent kills it long before).
const HOLD_NS: u64 = 120_000_000_000;

fn name(user: u32, k: usize) -> String {
    format!("SHU-{user}-{k}.TXT")
}

/// Open files as `user` until an open fails: the handles and the error.
fn open_until_refused(user: u32) -> (Vec<Fd>, Error) {
    let mut held = Vec::new();
    // One more than the table holds: the last open must fail.
    for k in 0..=SLOTS {
        match fs::open(&name(user, k), fs::MODE_WRITE) {
            Ok(fd) => held.push(fd),
            Err(e) => return (held, e),
        }
    }
    (held, Error::Unknown)
}

/// `fsfuzz share-hold USER`.
pub fn hold(user: &str) -> i32 {
    let Ok(user) = user.parse::<u32>() else {
        println!("fsfuzz share-hold: bad user {user}");
        return 2;
    };
    if let Err(e) = res::setuser(UserId(user)) {
        println!("fsfuzz share-hold: setuser {user}: {e}");
        return 1;
    }
    let (held, e) = open_until_refused(user);
    println!("OPENED {} {}", held.len(), e as u64);
    stdio::finish();
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HOLD_NS);
    while sys::clock_ns().unwrap_or(u64::MAX) < end {
        let _ = sys::sleep_ns(100_000_000);
    }
    0
}

/// A pipe held at both ends by this program that other users may write into: a holder
/// writes its line after it has become another user (`stdio::pipe`'s are the owner's
/// alone).
fn report_pipe() -> Result<ResId, Error> {
    let rights = Rights(Rights::OWNER_ALL.0 | Rights::others(Op::Write));
    let id = res::open_fresh("here/pipe/share", &[], rights)?;
    for end in [control::PIPE_READ_END, control::PIPE_WRITE_END] {
        if let Err(e) = res::control(id, control::PIPE_HOLD, end, 0) {
            let _ = res::close(id);
            return Err(e);
        }
    }
    Ok(id)
}

/// A holder for `user`, and what it opened.
fn holder(user: u32) -> Result<(Pid, usize, Error), String> {
    let pipe = report_pipe().map_err(|e| format!("pipe: {e}"))?;
    let arg = format!("{user}");
    let r = stdio::spawn(
        "fsfuzz",
        &["share-hold", &arg],
        Priority::App,
        None,
        Stream::Console,
        Stream::Pipe(pipe),
    );
    let child = match r {
        Ok(c) => c,
        Err(e) => {
            let _ = res::close(pipe);
            return Err(format!("spawn share-hold {user}: {e}"));
        }
    };
    // The child holds the write end: the read returns its line, or 0 once it ended.
    let _ = res::control(pipe, control::PIPE_DROP, control::PIPE_WRITE_END, 0);
    let mut line = Vec::new();
    let mut buf = [0u8; 64];
    while !line.contains(&b'\n') {
        match res::read(pipe, &mut buf, 0) {
            Ok(0) | Err(_) => break,
            Ok(n) => line.extend_from_slice(&buf[..n]),
        }
    }
    let _ = res::close(pipe);
    let text = String::from_utf8_lossy(&line);
    let words: Vec<&str> = text.split_whitespace().collect();
    match words[..] {
        ["OPENED", n, e] => match (n.parse(), e.parse()) {
            (Ok(n), Ok(e)) => Ok((child, n, Error::from_code(e))),
            _ => Err(format!("user {user}'s holder said {text:?}")),
        },
        _ => {
            let _ = sys::kill(child);
            let _ = sys::wait(Some(child));
            Err(format!("user {user}'s holder said {text:?}"))
        }
    }
}

fn expect(who: &str, got: (usize, Error), want: (usize, Error)) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{who}: opened {}, then {:?}; expected {}, then {:?}",
            got.0, got.1, want.0, want.1
        ))
    }
}

fn steps(children: &mut Vec<Pid>, mine: &mut Vec<Fd>) -> Result<(), String> {
    let (a, n, e) = holder(7)?;
    children.push(a);
    expect("user 7", (n, e), (PER_USER, Error::Limit))?;
    let (b, n, e) = holder(8)?;
    children.push(b);
    expect("user 8", (n, e), (USERS_SHARE - PER_USER, Error::Limit))?;
    let (held, e) = open_until_refused(1);
    let n = held.len();
    mine.extend(held);
    expect(
        "the administrator",
        (n, e),
        (SLOTS - USERS_SHARE, Error::Limit),
    )?;
    for c in children.drain(..) {
        let _ = sys::kill(c);
        let _ = sys::wait(Some(c));
    }
    let (c, n, e) = holder(9)?;
    children.push(c);
    // The table is full until the ended holders' files are closed; user 9 then has its
    // whole share (the administrator's files count in no user's share).
    expect(
        "user 9 after the holders ended",
        (n, e),
        (PER_USER, Error::Limit),
    )
}

/// `fsfuzz share`.
pub fn run() -> i32 {
    let mut children = Vec::new();
    let mut mine = Vec::new();
    let r = steps(&mut children, &mut mine);
    for c in children {
        let _ = sys::kill(c);
        let _ = sys::wait(Some(c));
    }
    for fd in mine {
        let _ = fs::close(fd);
    }
    // The holders' files are closed as orphans at the next open that needs room; delete
    // them all (a file still open would refuse: say so).
    let mut left = Vec::new();
    for user in [1, 7, 8, 9] {
        for k in 0..=SLOTS {
            match fs::unlink(&name(user, k)) {
                Ok(()) | Err(Error::NoSuchResource) => {}
                Err(e) => left.push(format!("{}: {e}", name(user, k))),
            }
        }
    }
    match (r, left.is_empty()) {
        (Ok(()), true) => {
            println!("fsfuzz share: ok");
            0
        }
        (Ok(()), false) => {
            println!("fsfuzz share: files not deleted: {}", left.join(", "));
            1
        }
        (Err(e), _) => {
            println!("fsfuzz share: {e}");
            1
        }
    }
}
