//! `fsfuzz share`: the users' shares of the file service's open-file table
//! (`fsopen::Table::room_for`). Before them, one program could hold every slot, and every
//! other program's open then failed until it ended.
//!
//! Run as the administrator on a file service with no file open. It starts holders, each a
//! child acting as another user (`fsfuzz share-hold USER TAG MAX`) that opens files to
//! write (`STAG-K.TXT`) until an open fails or it has MAX, writes `OPENED N ERROR` (0: none)
//! to its standard output (a pipe this program reads) and keeps them open until it is
//! killed (at most 120 s):
//!
//! 1. user 7 opens 5 files in one program and `PER_USER - 5` more in another, then
//!    `Limit` (the share is the user's, not a program's);
//! 2. user 8 opens `USERS_SHARE - PER_USER` (the rest of the users' share), then `Limit`;
//! 3. this program, the administrator's, opens the rest of the table (`SLOTS -
//!    USERS_SHARE`) and is refused the next (`Limit`: the table is full);
//! 4. the holders killed, user 9 opens `PER_USER` at once: the files of programs that
//!    ended are closed to make room (before `fsd`'s own look after 0.5 s idle, if the host
//!    is quick enough).
//!
//! Every file is then closed and deleted, user 9's at once after its holder is killed
//! (a delete that finds its file open closes the files of ended programs first). Prints
//! `fsfuzz share: ok` or what went wrong; exits 0 or 1.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use fsopen::{PER_USER, SLOTS, USERS_SHARE};
use ulib::abi::res::{Op, Rights, UserId};
use ulib::abi::syscall::control;
use ulib::abi::{Error, Pid, Priority};
use ulib::fs::{self, Fd};
use ulib::stdio::{self, Stream};
use ulib::{println, res, sys};

/// How long a holder keeps its files (a hang guard: the parent kills it long before).
const HOLD_NS: u64 = 120_000_000_000;

/// The holders' tags (file names), this program's included.
const TAGS: [&str; 5] = ["7A", "7B", "8", "1", "9"];

fn name(tag: &str, k: usize) -> String {
    format!("S{tag}-{k}.TXT")
}

/// Open files named for `tag` until an open fails or `max` are open: the handles and the
/// error (`None`: `max` reached).
fn open_until_refused(tag: &str, max: usize) -> (Vec<Fd>, Option<Error>) {
    let mut held = Vec::new();
    // At most one more than the table holds: the last open must fail.
    for k in 0..=SLOTS.min(max) {
        if k == max {
            return (held, None);
        }
        match fs::open(&name(tag, k), fs::MODE_WRITE) {
            Ok(fd) => held.push(fd),
            Err(e) => return (held, Some(e)),
        }
    }
    (held, Some(Error::Unknown))
}

/// `fsfuzz share-hold USER TAG MAX`.
pub fn hold(user: &str, tag: &str, max: &str) -> i32 {
    let (Ok(user), Ok(max)) = (user.parse::<u32>(), max.parse::<usize>()) else {
        println!("fsfuzz share-hold: bad user {user} or count {max}");
        return 2;
    };
    if !TAGS.contains(&tag) {
        println!("fsfuzz share-hold: tag {tag} is none of {TAGS:?}");
        return 2;
    }
    if let Err(e) = res::setuser(UserId(user)) {
        println!("fsfuzz share-hold: setuser {user}: {e}");
        return 1;
    }
    let (held, e) = open_until_refused(tag, max);
    println!("OPENED {} {}", held.len(), e.map_or(0, |e| e as u64));
    stdio::finish();
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HOLD_NS);
    while sys::clock_ns().unwrap_or(u64::MAX) < end {
        let _ = sys::sleep_ns(100_000_000);
    }
    0
}

/// A holder for `user` opening at most `max` files named for `tag`, and what it opened.
fn holder(user: u32, tag: &str, max: usize) -> Result<(Pid, usize, Option<Error>), String> {
    // Others may write into it: a holder writes its line after it has become another user.
    let rights = Rights(Rights::OWNER_ALL.0 | Rights::others(Op::Write));
    let pipe = stdio::pipe_with_rights(None, None, rights).map_err(|e| format!("pipe: {e}"))?;
    let (arg, most) = (format!("{user}"), format!("{max}"));
    let r = stdio::spawn(
        "fsfuzz",
        &["share-hold", &arg, tag, &most],
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
    let said = match words[..] {
        ["OPENED", n, e] => n.parse().ok().zip(e.parse::<u64>().ok()),
        _ => None,
    };
    match said {
        Some((n, 0)) => Ok((child, n, None)),
        Some((n, e)) => Ok((child, n, Some(Error::from_code(e)))),
        None => {
            let _ = sys::kill(child);
            let _ = sys::wait(Some(child));
            Err(format!("user {user}'s holder said {text:?}"))
        }
    }
}

fn expect(
    who: &str,
    got: (usize, Option<Error>),
    want: (usize, Option<Error>),
) -> Result<(), String> {
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
    let limit = Some(Error::Limit);
    let mut start = |user, tag, max| {
        let (pid, n, e) = holder(user, tag, max)?;
        children.push(pid);
        Ok::<_, String>((n, e))
    };
    expect("user 7, first program", start(7, "7A", 5)?, (5, None))?;
    let rest = PER_USER - 5;
    expect(
        "user 7, second program",
        start(7, "7B", SLOTS)?,
        (rest, limit),
    )?;
    let rest = USERS_SHARE - PER_USER;
    expect("user 8", start(8, "8", SLOTS)?, (rest, limit))?;
    let (held, e) = open_until_refused("1", SLOTS);
    let n = held.len();
    mine.extend(held);
    expect("the administrator", (n, e), (SLOTS - USERS_SHARE, limit))?;
    for c in children.drain(..) {
        let _ = sys::kill(c);
        let _ = sys::wait(Some(c));
    }
    // The table is full until the ended holders' files are closed; user 9 then has its
    // whole share (the administrator's files count in no user's share).
    let (c, n, e) = holder(9, "9", SLOTS)?;
    children.push(c);
    expect("user 9 after the holders ended", (n, e), (PER_USER, limit))
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
    for tag in TAGS.iter().rev() {
        for k in 0..=SLOTS {
            match fs::unlink(&name(tag, k)) {
                Ok(()) | Err(Error::NoSuchResource) => {}
                Err(e) => left.push(format!("{}: {e}", name(tag, k))),
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
