//! `mfcheck moveforge M`: malformed and hostile `OP_MOVE` requests (`abi::mach`; a process
//! moving to machine M arrives as an image in pieces), each refused with its error while
//! both `machd`s go on serving: requests without their ICA or with bad words (refused
//! here), pieces out of order, an image too long, a start before the image is whole or of
//! one never sent, an image of garbage (refused by M's kernel), a program's start
//! (`MOVE_SPAWN`) without words, of no image, of garbage or with words not UTF-8, an empty piece, and more
//! images arriving at once from one program than M keeps (`Busy`), let go by `MOVE_DROP`.
//! Then a real move whose start is asked twice (as when its answer is lost: one process
//! there, the same pid) and then given up (`MOVE_DROP` after the start: the process there
//! is killed, and the one here runs on), so a move given up never leaves two copies.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use ulib::abi::mach::{
    self, res_word, FN_MACH, MOVE_AHEAD_MAX, MOVE_DROP, MOVE_PUT, MOVE_SPAWN, MOVE_START,
    RES_REMOTE_MAX,
};
use ulib::abi::syscall::MAX_MOVE_IMAGE;
use ulib::abi::{Error, Pid, Priority, ENDED_KILLED};
use ulib::mach::Remote;
use ulib::{println, sys};

/// Images M keeps at once for one program.
const PER_PROGRAM: u64 = 2;

/// One `OP_MOVE` to machine `m`: `op`, the move's `token`, `w2` (a piece's offset, a
/// start's core), `total` (the image's length), and `piece` in the ICA (none: no ICA).
fn req(
    m: u64,
    op: u64,
    token: u64,
    w2: u64,
    total: u64,
    piece: Option<&[u8]>,
) -> Result<(), Error> {
    let len = piece.map_or(0, |p| p.len() as u64);
    let words = [res_word(m, op, len, 0), token, w2, total, 0, 0];
    crate::raw_with(FN_MACH, mach::OP_MOVE, words, piece.map(|p| (p, 0, true)))
}

/// A request's name, what it got, and what it must get.
type Case<'a> = (&'a str, Result<(), Error>, Result<(), Error>);

pub fn forge(m: u8) -> Result<String, String> {
    let me = crate::machd_self()?[0];
    let m = u64::from(m);
    let token = 0x6d6f_7665;
    let x = [b'X'; 100];
    let some = Some(&x[..]);
    let big = vec![b'Y'; mach::RES_REMOTE_MAX + 1];
    let cases: [Case; 14] = [
        (
            "no ICA",
            req(m, MOVE_PUT, token, 0, 100, None),
            Err(Error::InvalidArgument),
        ),
        (
            "this machine",
            req(me, MOVE_PUT, token, 0, 100, some),
            Err(Error::InvalidArgument),
        ),
        (
            "no machine 9",
            req(9, MOVE_PUT, token, 0, 100, some),
            Err(Error::InvalidArgument),
        ),
        (
            "operation 0",
            req(m, 0, token, 0, 100, some),
            Err(Error::InvalidArgument),
        ),
        (
            "operation 9",
            req(m, 9, token, 0, 100, some),
            Err(Error::InvalidArgument),
        ),
        (
            "token 0",
            req(m, MOVE_PUT, 0, 0, 100, some),
            Err(Error::InvalidArgument),
        ),
        (
            "a start with bytes",
            req(m, MOVE_START, token, 0, 0, some),
            Err(Error::InvalidArgument),
        ),
        (
            "a piece of 897 bytes",
            req(m, MOVE_PUT, token, 0, 2000, Some(&big)),
            Err(Error::TooLong),
        ),
        (
            "an image of 0 bytes",
            req(m, MOVE_PUT, token, 0, 0, some),
            Err(Error::InvalidArgument),
        ),
        (
            "an image above MAX_MOVE_IMAGE",
            req(m, MOVE_PUT, token, 0, MAX_MOVE_IMAGE + 1, some),
            Err(Error::TooLong),
        ),
        (
            "a start of no image",
            req(m, MOVE_START, token, 0, 0, Some(&[])),
            Err(Error::NoSuchResource),
        ),
        (
            "a piece past its image",
            req(m, MOVE_PUT, token + 1, 0, 50, some),
            Err(Error::InvalidArgument),
        ),
        (
            "a first piece not at 0",
            req(m, MOVE_PUT, token + 2, 100, 300, some),
            Err(Error::NoSuchResource),
        ),
        (
            "a drop of no image",
            req(m, MOVE_DROP, token + 3, 0, 0, Some(&[])),
            // Answered: there is nothing to let go of.
            Ok(()),
        ),
    ];
    // Pieces out of order, a start before the image is whole (which forgets it).
    let t = token + 10;
    let steps = [
        ("the first piece", req(m, MOVE_PUT, t, 0, 300, some), Ok(())),
        // Ahead of a piece still to come: held (a requester has several out at once).
        (
            "a piece ahead of one to come",
            req(m, MOVE_PUT, t, 200, 300, some),
            Ok(()),
        ),
        (
            "the same piece ahead again",
            req(m, MOVE_PUT, t, 200, 300, some),
            Err(Error::InvalidArgument),
        ),
        (
            "the first piece again",
            req(m, MOVE_PUT, t, 0, 300, some),
            Err(Error::InvalidArgument),
        ),
        (
            "a start with a gap",
            req(m, MOVE_START, t, 0, 0, Some(&[])),
            Err(Error::InvalidArgument),
        ),
        (
            "a start once forgotten",
            req(m, MOVE_START, t, 0, 0, Some(&[])),
            Err(Error::NoSuchResource),
        ),
        // A whole image of garbage: M's kernel refuses it.
        (
            "an image of garbage",
            req(m, MOVE_PUT, t + 10, 0, 100, some)
                .and_then(|()| req(m, MOVE_START, t + 10, 0, 0, Some(&[]))),
            Err(Error::InvalidArgument),
        ),
        // A program's start (`run /BIN/PROG -m M`): without its words, of no image, of
        // an image of garbage (M's kernel checks it), with words that are not UTF-8.
        (
            "a program's start without words",
            req(m, MOVE_SPAWN, t + 30, 0, 0, Some(&[])),
            Err(Error::InvalidArgument),
        ),
        (
            "a program's start of no image",
            req(m, MOVE_SPAWN, t + 31, 0, 0, Some(b"prog")),
            Err(Error::NoSuchResource),
        ),
        (
            "a program of garbage",
            req(m, MOVE_PUT, t + 32, 0, 100, some)
                .and_then(|()| req(m, MOVE_SPAWN, t + 32, 0, 0, Some(b"garbage\0x"))),
            Err(Error::BadExecutable),
        ),
        (
            "a program's words not UTF-8",
            req(m, MOVE_PUT, t + 33, 0, 100, some)
                .and_then(|()| req(m, MOVE_SPAWN, t + 33, 0, 0, Some(&[0xff, 0xfe]))),
            Err(Error::InvalidArgument),
        ),
        // Too far ahead of the end to be held.
        (
            "a piece too far ahead",
            {
                let far = 100 + (MOVE_AHEAD_MAX * RES_REMOTE_MAX) as u64 + 1;
                let r = req(m, MOVE_PUT, t + 20, 0, 100_000, some)
                    .and_then(|()| req(m, MOVE_PUT, t + 20, far, 100_000, some));
                let _ = req(m, MOVE_DROP, t + 20, 0, 0, Some(&[]));
                r
            },
            Err(Error::InvalidArgument),
        ),
        // An empty piece (it would keep an image alive for nothing).
        (
            "an empty piece",
            req(m, MOVE_PUT, token + 25, 0, 300, Some(&[])),
            Err(Error::InvalidArgument),
        ),
    ];
    let mut wrong = String::new();
    for (what, got, want) in cases.into_iter().chain(steps) {
        if got != want {
            wrong += &format!("{what}: {got:?}, want {want:?}; ");
        }
    }
    // More images at once than M keeps for one program.
    let first = token + 30;
    for i in 0..PER_PROGRAM {
        if let Err(e) = req(m, MOVE_PUT, first + i, 0, 300, some) {
            wrong += &format!("image {i} of {PER_PROGRAM}: {e}; ");
        }
    }
    let over = req(m, MOVE_PUT, first + 99, 0, 300, some);
    if over != Err(Error::Busy) {
        wrong += &format!("one image too many: {over:?}, want Busy; ");
    }
    for i in 0..PER_PROGRAM {
        let _ = req(m, MOVE_DROP, first + i, 0, 0, Some(&[]));
    }
    let after = req(m, MOVE_PUT, first + 99, 0, 300, some);
    let _ = req(m, MOVE_DROP, first + 99, 0, 0, Some(&[]));
    if after.is_err() {
        wrong += &format!("an image after the drops: {after:?}; ");
    }
    if let Err(e) = start_twice(m) {
        wrong += &e;
    }
    crate::machd_self()?;
    if wrong.is_empty() {
        println!("mfcheck moveforge: 14 refusals, pieces out of order (one held ahead), garbage, Busy, a start asked twice and dropped: all as they should be");
        Ok(String::new())
    } else {
        Err(wrong)
    }
}

/// A real image (a `movecheck roam` of this machine, exported) started twice there and then
/// dropped: one process, killed by the drop; the original runs on here (then is killed).
fn start_twice(m: u64) -> Result<(), String> {
    let spelled = alloc::format!("{m}");
    let roamer = sys::spawn(
        "movecheck",
        &["roam", "1000", "machine", &spelled],
        Priority::App,
    )
    .map_err(|e| format!("spawn movecheck: {e}; "))?;
    let r = (|| {
        let mut image = vec![0u8; 1 << 20];
        let n = sys::migrate_export(roamer, &mut image).map_err(|e| format!("export: {e}; "))?;
        let t = 0x0074_7769_6365;
        for (i, piece) in image[..n].chunks(mach::RES_REMOTE_MAX).enumerate() {
            let at = (i * mach::RES_REMOTE_MAX) as u64;
            req(m, MOVE_PUT, t, at, n as u64, Some(piece)).map_err(|e| format!("piece: {e}; "))?;
        }
        let start = || -> Result<(u64, u32), String> {
            let words = [res_word(m, MOVE_START, 0, 0), t, mach::ANY_CORE, 0, 0, 0];
            crate::raw_answer(FN_MACH, mach::OP_MOVE, words, Some((&[], 0, true)))
                .map(|w| (w[0], w[1] as u32))
                .map_err(|e| format!("start: {e}; "))
        };
        let (a, epoch) = start()?;
        let (b, _) = start()?;
        if a != b {
            return Err(format!(
                "a start asked twice made two processes ({} and {}); ",
                Pid(a),
                Pid(b)
            ));
        }
        req(m, MOVE_DROP, t, 0, 0, Some(&[])).map_err(|e| format!("drop: {e}; "))?;
        let there = Remote {
            machine: m as u8,
            epoch,
            pid: Pid(a),
        };
        // Killed (and collected by that machd, which nobody else would do): gone.
        match ulib::mach::wait(&there) {
            Ok(st) if st.how == ENDED_KILLED => {}
            Err(Error::NoSuchProcess) => {}
            other => return Err(format!("the copy after the drop: {other:?}, want killed; ")),
        }
        if let Ok(()) | Err(Error::Denied) = ulib::mach::kill(&there) {
            return Err("the copy after the drop still lives; ".into());
        }
        sys::migrate_finish(roamer, None).map_err(|e| format!("finish: {e}; "))
    })();
    let _ = sys::kill(roamer);
    let _ = sys::wait(Some(roamer));
    r
}

/// `mfcheck spawnlimit M`: programs started on machine M for one user and never waited for
/// meet `Limit` there at `SPAWNED_PER_USER` (128), while another user's still start; once
/// they are waited for, the user starts programs again. (A regression: `machd` kept every
/// such program as its child until the kernel's limit of 1,024 children refused everyone's.)
pub fn spawn_limit(m: u8) -> Result<String, String> {
    const USER: u32 = 3100;
    const LIMIT: usize = 128;
    let me = ulib::res::getuser().map_err(|e| format!("getuser: {e}"))?;
    let as_user = |u: u32| {
        ulib::res::setuser(ulib::abi::res::UserId(u)).map_err(|e| format!("setuser {u}: {e}"))
    };
    let run = |what: &str| ulib::mach::spawn(m, mach::ANY_CORE, &["nop", what]);
    as_user(USER)?;
    let mut started: alloc::vec::Vec<Remote> = alloc::vec::Vec::new();
    let refused = loop {
        if started.len() > LIMIT {
            break None;
        }
        match run("held") {
            Ok(r) => started.push(r),
            Err(e) => break Some(e),
        }
    };
    let counted = (started.len(), refused);
    // machd there is nobody's to kill, not even its own (the kernel lets a process end
    // itself, and machd makes the kill): refused for this user and for the administrator.
    let machd = crate::own::machd_pid(m);
    let epoch = started.first().map_or(0, |r| r.epoch);
    let kill_machd = |pid| {
        ulib::mach::kill(&Remote {
            machine: m,
            epoch,
            pid,
        })
    };
    let by_user = machd.clone().map(kill_machd);
    // Another user meanwhile.
    as_user(me.0)?;
    let by_admin = machd.clone().map(kill_machd);
    let other = run("other").and_then(|r| ulib::mach::wait(&r).map(drop));
    as_user(USER)?;
    let mut waited = Ok(());
    for r in &started {
        if let Err(e) = ulib::mach::wait(r) {
            waited = Err(format!("wait {:?}: {e}", r.pid));
        }
    }
    let again = run("again").and_then(|r| ulib::mach::wait(&r).map(drop));
    as_user(me.0)?;
    if counted != (LIMIT, Some(Error::Limit)) {
        return Err(format!(
            "{} started, then {:?}; expected {LIMIT}, then Limit",
            counted.0, counted.1
        ));
    }
    match (machd, by_user, by_admin) {
        (Ok(_), Ok(Err(_)), Ok(Err(Error::Denied))) => {}
        (m, u, a) => {
            return Err(format!(
                "machd there ({m:?}) killed for a user: {u:?}, for the administrator: {a:?}; \
                 expected refusals"
            ))
        }
    }
    other.map_err(|e| format!("another user's program at the limit: {e}"))?;
    waited?;
    again.map_err(|e| format!("a program once the others were waited for: {e}"))?;
    Ok(format!(
        ", {LIMIT} unwaited programs, then Limit; another user unaffected"
    ))
}
