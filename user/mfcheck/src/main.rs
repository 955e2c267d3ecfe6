//! `mfcheck`: checks of the files of another machine's disk (issue 17; `abi::mach::OP_FS`),
//! run by `cargo xtask test`'s several-machine file test.
//!
//! - `mfcheck hold M`: opens `mM:ORPHAN.TXT` to write, writes a line, says it is ready
//!   (registers `mfcheck.hold` and writes `mM:READY.TXT`), waits until `mM:STOP.TXT`
//!   exists, and then ends *without closing* the file: its `machd` must close it on
//!   machine M (`reopen` shows it did). Run on a machine that is then killed, machine M's
//!   `machd` must close it when that machine goes down.
//! - `mfcheck await NAME`: waits until the file NAME exists (at most [`POLLS`] looks).
//! - `mfcheck rofs`: a listing asked of this machine's `fs` with an ICA mapped read-only
//!   must be refused (`InvalidArgument`: `fsd` writes the listing into the ICA, and must
//!   not fault), the same with a writable one answered (`NoSuchResource` for the name
//!   `X`), and a stat with a read-only ICA answered too (`fsd` only reads it).
//! - `mfcheck quiet`: waits until this machine's `machd` follows no remote program's output
//!   (`OP_SELF`'s count; at most [`POLLS`] looks): everything it followed has been printed.
//! - `mfcheck forge M`: while `hold` holds its file: requests on handles this program never
//!   opened (every handle from 0 to [`HANDLES`]) and malformed requests to `machd` must all
//!   be refused with the right error, never served (a ping's deadline past
//!   `DEADLINE_MAX_NS` too, while one at it is answered). All of them are made while a remote
//!   wait (for `mfcheck await GO.TXT` on machine M, which `forge` ends by writing that
//!   file) is the oldest request in flight there: more than mrpc's window of requests
//!   overtake it, and none may be refused `Busy` for that.
//! - `mfcheck reopen M`: opens `mM:ORPHAN.TXT` to write again, waiting while it is still
//!   held (`Busy`; at most [`POLLS`] tries, a hang guard), and writes it.
//!
//! - `mfcheck waits M K MS`: K programs on machine M that each sleep MS ms (`mfcheck nap
//!   MS`), waited for at once by K threads: every wait must get exit status 0, also when
//!   more waits than machine M's `machd` has workers for make their slices late.
//!
//! - `mfcheck callee` and `mfcheck call M`: a function served on machine M called by name
//!   from another (`calls`).
//! - `mfcheck semcount M N`: a semaphore opened on machine M at 0, then N `SEM_V`s made
//!   on it from here (`OP_RES`), each a resource operation of another machine: its count
//!   there must be N exactly (one performed twice or lost shows).
//! - `mfcheck moveforge M`: malformed and hostile `OP_MOVE` requests to machine M, each
//!   refused with its error (`moves`); `mfcheck spawnlimit M`: one user's programs there
//!   that nobody waits for meet `Limit` at 128, another user's still start.
//! - `mfcheck pipe M` (with `pread` and `phold`): resources of machine M used from another,
//!   a pipe between the two machines among them (`pipes`); `mfcheck forgepeer M`: a
//!   program that speaks for its machine to M (a forged heartbeat) is not heard;
//!   `mfcheck machdres M`: M's `machd` refuses to close, write, read or V its own
//!   resources for a program here (`own`); `mfcheck machdfs M`: nor the ICAs of its
//!   requests to its own `fs` (`fs-PID-N`), while others named alike stay reachable;
//!   `mfcheck oneway M`: one-way messages with a page to `machd` are let go of;
//!   `mfcheck share M`: one user's requests to M take at most half of the window, all
//!   users but the administrator together three quarters, and the administrator's still
//!   go; `mfcheck fsshare M`: one user here holds at most 8 of machine M's open files;
//!   `mfcheck callshare M`: one user's calls hold at most half of M's call workers
//!   (`share`).
//!
//! Each prints `mfcheck MODE: ok` or what went wrong, and exits 0 or 1.
#![no_std]
#![no_main]

extern crate alloc;

mod calls;
mod moves;
mod own;
mod pipes;
mod share;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::fs::{FN_FS, FS_ICA_SIZE, FS_READ, FS_READDIR, FS_STAT, FS_WRITE, MODE_WRITE};
use ulib::abi::ipc::Msg;
use ulib::abi::mach::{self, FN_MACH};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::mach as mach_client;
use ulib::{fnid, fs, ipc, println, res, sys};

ulib::main!(main);

/// Handles tried by `forge`.
const HANDLES: u64 = 64;
/// Tries of `reopen` and of `hold`'s look for STOP, 50 ms apart (a hang guard: 60 s).
const POLLS: u32 = 1200;
const POLL_NS: u64 = 50_000_000;

fn main(args: &[&str]) -> i32 {
    if let [_, "rofs"] = args {
        // This machine's own file service and a read-only ICA: refused for a listing (its
        // answer is written into the ICA), taken for a stat (lent read-only, as
        // `ulib::fs` does; the name "X" is not there).
        let named = [0, 0, 0, 1, 0, 0];
        let list_ro = raw_to(FN_FS, FS_READDIR, named, true, false);
        let list_rw = raw_to(FN_FS, FS_READDIR, named, true, true);
        let stat_ro = raw_to(FN_FS, FS_STAT, named, true, false);
        return if list_ro == Err(Error::InvalidArgument)
            && list_rw == Err(Error::NoSuchResource)
            && stat_ro == Err(Error::NoSuchResource)
        {
            println!("mfcheck rofs: ok");
            0
        } else {
            println!(
                "mfcheck rofs: FAILED: listing with a read-only ICA {list_ro:?}, writable \
                 {list_rw:?}; stat with a read-only ICA {stat_ro:?}"
            );
            1
        };
    }
    if let [_, "quiet"] = args {
        return match quiet() {
            Ok(tries) => {
                println!("mfcheck quiet: ok after {tries} looks");
                0
            }
            Err(e) => {
                println!("mfcheck quiet: FAILED: {e}");
                1
            }
        };
    }
    if let [_, "holder"] = args {
        return share::holder();
    }
    if let [_, "callshare-user", m] = args {
        return m.parse().map_or_else(|_| usage(), share::calls_as_user);
    }
    if let [_, "fsshare-user", m] = args {
        return m.parse().map_or_else(|_| usage(), share::files_as_user);
    }
    if let [_, "nap", ms] = args {
        // A remote program for `waits`: sleeps MS ms and exits 0.
        let ms: u64 = ms.parse().unwrap_or(0);
        let _ = sys::sleep_ns(ms.saturating_mul(1_000_000));
        return 0;
    }
    if let [_, "waits", m, k, ms] = args {
        return match (m.parse::<u8>(), k.parse::<usize>()) {
            (Ok(m), Ok(k)) if (1..=WAITERS_MAX).contains(&k) => match waits(m, k, ms) {
                Ok(()) => {
                    println!("mfcheck waits: ok, {k} remote waits each got exit status 0");
                    0
                }
                Err(e) => {
                    println!("mfcheck waits: FAILED: {e}");
                    1
                }
            },
            _ => usage(),
        };
    }
    if let [_, "semcount", m, n] = args {
        return match (m.parse::<u8>(), n.parse::<u64>()) {
            (Ok(m), Ok(n)) if n <= SEMCOUNT_MAX => match pipes::sem_count(m, n) {
                Ok(()) => {
                    println!("mfcheck semcount: ok, {n} SEM_V on machine {m}, its count {n}");
                    0
                }
                Err(e) => {
                    println!("mfcheck semcount: FAILED: {e}");
                    1
                }
            },
            _ => usage(),
        };
    }
    if let [_, "pread", name] = args {
        return pipes::pread(name);
    }
    if let [_, "phold", rest @ ..] = args {
        return pipes::phold(rest);
    }
    if let [_, "callee"] = args {
        return match calls::callee() {
            Ok(what) => {
                println!("mfcheck callee: ok, {what}");
                0
            }
            Err(e) => {
                println!("mfcheck callee: FAILED: {e}");
                1
            }
        };
    }
    if let [_, "await", name] = args {
        return match await_file(name) {
            Ok(tries) => {
                println!("mfcheck await: ok, {name} after {tries} looks");
                0
            }
            Err(e) => {
                println!("mfcheck await: FAILED: {e}");
                1
            }
        };
    }
    let (mode, m) = match args {
        [_, mode, m] => match m.parse::<u8>() {
            Ok(m) => (*mode, m),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    let r = match mode {
        "hold" => hold(m),
        "forge" => forge(m),
        "reopen" => reopen(m),
        "call" => calls::caller(m).map(|what| format!(", {what}")),
        "pipe" => pipes::pipe(m),
        "forgepeer" => pipes::forge_peer(m),
        "machdres" => own::machd_res(m),
        "machdfs" => own::machd_fs(m),
        "oneway" => pipes::one_way(m),
        "moveforge" => moves::forge(m),
        "spawnlimit" => moves::spawn_limit(m),
        "share" => share::run(m),
        "fsshare" => share::files(m),
        "callshare" => share::calls(m),
        _ => return usage(),
    };
    match r {
        Ok(what) => {
            println!("mfcheck {mode}: ok{what}");
            0
        }
        Err(e) => {
            println!("mfcheck {mode}: FAILED: {e}");
            1
        }
    }
}

/// Most `SEM_V`s `semcount` makes.
const SEMCOUNT_MAX: u64 = 100_000;

fn usage() -> i32 {
    println!(
        "mfcheck: usage: mfcheck hold|forge|reopen|call|pipe|forgepeer|machdres|machdfs|oneway|moveforge|spawnlimit|share|fsshare|callshare MACHINE | mfcheck callee | mfcheck pread NAME | mfcheck phold M ID EPOCH | mfcheck await NAME | mfcheck quiet | mfcheck rofs | mfcheck waits MACHINE K MS | mfcheck nap MS | mfcheck semcount MACHINE N"
    );
    2
}

fn hold(m: u8) -> Result<String, String> {
    let name = format!("m{m}:ORPHAN.TXT");
    let fd = fs::open(&name, MODE_WRITE).map_err(|e| format!("open {name}: {e}"))?;
    fs::write(fd, b"held\n").map_err(|e| format!("write {name}: {e}"))?;
    let rights = Rights(0x0f | Rights::others(ulib::abi::res::Op::Write));
    let me = sys::getpid().map(|p| p.serial()).unwrap_or(0);
    let ep = ipc::open_endpoint(&format!("here/endpoint/mfcheck-{me}"), rights)
        .map_err(|e| format!("endpoint: {e}"))?;
    fnid::register("mfcheck.hold", ep).map_err(|e| format!("register: {e}"))?;
    let ready = format!("m{m}:READY.TXT");
    fs::write_all(&ready, b"ready\n").map_err(|e| format!("write {ready}: {e}"))?;
    println!("mfcheck hold: holding {name}");
    let stop = format!("m{m}:STOP.TXT");
    for _ in 0..POLLS {
        if fs::stat(&stop).is_ok() {
            // Ends with the file open: its machd closes it there.
            return Ok(format!(", ending with {name} open"));
        }
        let _ = sys::sleep_ns(POLL_NS);
    }
    Err(format!("{stop} never came"))
}

/// What this machine's `machd` says of it (`OP_SELF`'s words).
pub(crate) fn machd_self() -> Result<[u64; 6], String> {
    let server = ResId(
        fnid::lookup(FN_MACH)
            .map_err(|e| format!("{FN_MACH}: {e}"))?
            .0,
    );
    let ask = Msg {
        label: mach::OP_SELF,
        words: [0; 6],
    };
    let (_, me) = ipc::call(server, &ask).map_err(|e| format!("OP_SELF: {e}"))?;
    Ok(me.words)
}

fn quiet() -> Result<u32, String> {
    for tries in 1..=POLLS {
        if machd_self()?[3] == 0 {
            return Ok(tries);
        }
        let _ = sys::sleep_ns(POLL_NS);
    }
    Err(format!("machd still follows programs after {POLLS} looks"))
}

fn await_file(name: &str) -> Result<u32, String> {
    for tries in 1..=POLLS {
        if fs::stat(name).is_ok() {
            return Ok(tries);
        }
        let _ = sys::sleep_ns(POLL_NS);
    }
    Err(format!("{name} never came"))
}

fn reopen(m: u8) -> Result<String, String> {
    let name = format!("m{m}:ORPHAN.TXT");
    for tries in 1..=POLLS {
        match fs::open(&name, MODE_WRITE) {
            Ok(fd) => {
                fs::write(fd, b"reopened\n").map_err(|e| format!("write: {e}"))?;
                fs::close(fd).map_err(|e| format!("close: {e}"))?;
                return Ok(format!(" after {tries} tries"));
            }
            Err(Error::Busy) => {
                let _ = sys::sleep_ns(POLL_NS);
            }
            Err(e) => return Err(format!("open {name}: {e}")),
        }
    }
    Err(format!("{name} still held after {POLLS} tries"))
}

/// A raw `OP_FS` to `machd` with a writable ICA of our own (or none): the call's result.
fn raw(words: [u64; 6], with_ica: bool) -> Result<(), Error> {
    raw_as(words, with_ica, true)
}

/// [`raw`], the ICA attached `writable` or read-only.
fn raw_as(words: [u64; 6], with_ica: bool, writable: bool) -> Result<(), Error> {
    raw_to(FN_MACH, mach::OP_FS, words, with_ica, writable)
}

/// A request `label` with `words` to function `name`, with an ICA (`writable` or not) whose
/// first byte is `X`, or none: the call's result, the ICA let go afterwards.
fn raw_to(
    name: &str,
    label: u64,
    words: [u64; 6],
    with_ica: bool,
    writable: bool,
) -> Result<(), Error> {
    raw_with(
        name,
        label,
        words,
        with_ica.then_some((&b"X"[..], 0, writable)),
    )
}

/// A request `label` with `words` to function `name`, with an ICA holding `bytes` at
/// `offset` (attached `writable` or read-only), or none: the call's result (its value as
/// an error), the ICA let go afterwards.
pub(crate) fn raw_with(
    name: &str,
    label: u64,
    words: [u64; 6],
    ica: Option<(&[u8], u64, bool)>,
) -> Result<(), Error> {
    raw_answer(name, label, words, ica).map(drop)
}

/// [`raw_with`], the answer's words back.
pub(crate) fn raw_answer(
    name: &str,
    label: u64,
    words: [u64; 6],
    ica: Option<(&[u8], u64, bool)>,
) -> Result<[u64; 6], Error> {
    let server = ResId(fnid::lookup(name)?.0);
    let Some((bytes, offset, writable)) = ica else {
        return match ipc::call(server, &Msg { label, words })? {
            (0, reply) => Ok(reply.words),
            (v, _) => Err(Error::from_code(v)),
        };
    };
    let me = sys::getpid()?;
    let region = res::open_vregion(
        &format!("here/vregion/mfcheck-{}", me.0),
        FS_ICA_SIZE,
        Rights::OWNER_ALL,
    )?;
    let _ = res::write(region, bytes, offset);
    let at = 0x0000_5600_0000_0000;
    if let Err(e) = res::attach_here(region, at, writable) {
        let _ = res::close(region);
        return Err(e);
    }
    let msg = ipc::with_ica(Msg { label, words }, region);
    let r = ipc::call(server, &msg);
    let back = r.as_ref().ok().and_then(|(_, reply)| ipc::ica_at(reply));
    if let Some((_, at)) = back {
        let _ = res::detach_here(at);
    }
    let _ = res::close(region);
    match r {
        Ok((0, reply)) => Ok(reply.words),
        Ok((v, _)) => Err(Error::from_code(v)),
        Err(e) => Err(e),
    }
}

fn forge(m: u8) -> Result<String, String> {
    let server = ResId(
        fnid::lookup(FN_MACH)
            .map_err(|e| format!("{FN_MACH}: {e}"))?
            .0,
    );
    let (_, member) = ipc::call(
        server,
        &Msg {
            label: mach::OP_MEMBER,
            words: [u64::from(m), 0, 0, 0, 0, 0],
        },
    )
    .map_err(|e| format!("member {m}: {e}"))?;
    let epoch = member.words[2];
    // All of it while a remote wait is in flight to machine M: the oldest request there,
    // which the others may overtake by at most mrpc's window (32); `machd` holds the rest
    // until there is room, never answering them `Busy`.
    let lingering = linger(server, m)?;
    let mut wrong: Vec<String> = Vec::new();
    let mut expect = |what: String, got: Result<(), Error>, want: Error| {
        if got != Err(want) {
            wrong.push(format!("{what}: {got:?}, not {want:?}"));
        }
    };
    let read = |h: u64, epoch: u64| [mach::fs_word(u64::from(m), FS_READ, 0), epoch, h, 16, 0, 0];
    for h in 0..HANDLES {
        expect(
            format!("a read of handle {h}"),
            raw(read(h, epoch), true),
            Error::InvalidArgument,
        );
    }
    expect(
        "no ICA".into(),
        raw(read(1, epoch), false),
        Error::InvalidArgument,
    );
    expect(
        "a stale life".into(),
        raw(read(1, epoch ^ 0x5a5a), true),
        Error::StaleResource,
    );
    expect(
        "no life named".into(),
        raw(read(1, 0), true),
        Error::InvalidArgument,
    );
    let bad_machine = [mach::fs_word(7, FS_READ, 0), epoch, 1, 16, 0, 0];
    expect(
        "machine 7".into(),
        raw(bad_machine, true),
        Error::InvalidArgument,
    );
    let unknown = [mach::fs_word(u64::from(m), 99, 3), 0, 0, 0, 0, 0];
    expect(
        "fs op 99".into(),
        raw(unknown, true),
        Error::InvalidArgument,
    );
    let long_name = [mach::fs_word(u64::from(m), 1, 4000), 0, 0, 0, 0, 0];
    expect(
        "a 4,000-byte name".into(),
        raw(long_name, true),
        Error::TooLong,
    );
    let long_write = [
        mach::fs_word(u64::from(m), FS_WRITE, 0),
        epoch,
        1,
        2000,
        0,
        0,
    ];
    expect(
        "a 2,000-byte write".into(),
        raw(long_write, true),
        Error::TooLong,
    );
    // A stat of a missing name would be `NoSuchResource`: refused before, the ICA being
    // read-only (the answer is written into it).
    let stat = [mach::fs_word(u64::from(m), FS_STAT, 1), 0, 0, 0, 0, 0];
    expect(
        "a read-only ICA".into(),
        raw_as(stat, true, false),
        Error::InvalidArgument,
    );
    // The same request with a writable ICA reaches machine M's fs.
    expect(
        "a stat of 'X'".into(),
        raw(stat, true),
        Error::NoSuchResource,
    );
    // A ping may wait at most `DEADLINE_MAX_NS` (a regression: any deadline was taken, and
    // a ping without end to a machine that never answered held a place in its window).
    let ping = |deadline: u64| {
        let msg = Msg {
            label: mach::OP_PING,
            words: [u64::from(m), deadline, 0, 0, 0, 0],
        };
        match ipc::call(server, &msg) {
            Ok((0, _)) => Ok(()),
            Ok((v, _)) => Err(Error::from_code(v)),
            Err(e) => Err(e),
        }
    };
    expect(
        "a ping with a deadline of u64::MAX".into(),
        ping(u64::MAX),
        Error::InvalidArgument,
    );
    expect(
        "a ping 1 ns past the longest deadline".into(),
        ping(mach::DEADLINE_MAX_NS + 1),
        Error::InvalidArgument,
    );
    if let Err(e) = ping(mach::DEADLINE_MAX_NS) {
        wrong.push(format!("a ping with the longest deadline: {e:?}"));
    }
    let waited = end_linger(m, lingering);
    match waited {
        Err(e) => wrong.push(e),
        Ok(()) if wrong.is_empty() => {
            return Ok(format!(
                " ({} requests refused, a remote wait in flight)",
                HANDLES + 8
            ))
        }
        Ok(()) => {}
    }
    Err(wrong.join("; "))
}

/// Most remote waits `waits` makes at once (one thread each).
const WAITERS_MAX: usize = 32;

/// Remote programs waited for by threads, each thread's argument its index here.
static REMOTES: ulib::cell::Local<Vec<mach_client::Remote>> = ulib::cell::Local::new(Vec::new());

/// A thread that waits for remote program `r` (`ulib::mach::wait`): its value is 0 for
/// exit status 0, else a code [`describe`] reads.
fn wait_in_thread(r: mach_client::Remote) -> Result<ulib::thread::Thread, String> {
    let i = REMOTES.with(|v| {
        v.push(r);
        v.len() - 1
    });
    ulib::thread::spawn(wait_remote, i as u64).map_err(|e| format!("thread {i}: {e}"))
}

/// The thread of [`wait_in_thread`].
fn wait_remote(i: u64) -> u64 {
    let Some(r) = REMOTES.with(|v| v.get(i as usize).copied()) else {
        return 1 << 48;
    };
    match mach_client::wait(&r) {
        Ok(st) if st.how == ulib::abi::ENDED_EXIT => st.code,
        Ok(st) => (1 << 40) | st.how,
        Err(e) => (1 << 32) | e as u64,
    }
}

/// What [`wait_remote`]'s code says.
fn describe(code: u64) -> String {
    match code >> 32 {
        0 => format!("exit status {code}"),
        1 => format!("{}", Error::from_code(code & 0xffff_ffff)),
        256 => format!("ended (how {})", code & 0xff),
        _ => "no program".into(),
    }
}

/// `waits M K MS`: start K programs on machine M that each sleep MS ms (`mfcheck nap MS`)
/// and wait for all of them at once, a thread each: every wait must end with exit status
/// 0. With more waits than machine M's `machd` has workers for (4, each slice up to
/// 0.5 s), slices queue there past their requester's deadline and are asked again; a
/// status collected by one the requester gave up on must still reach the next.
fn waits(m: u8, k: usize, ms: &str) -> Result<(), String> {
    let mut naps = Vec::new();
    for i in 0..k {
        naps.push(
            mach_client::spawn(m, mach::ANY_CORE, &["mfcheck", "nap", ms])
                .map_err(|e| format!("spawn nap {i} on machine {m}: {e}"))?,
        );
    }
    let threads = naps
        .into_iter()
        .map(wait_in_thread)
        .collect::<Result<Vec<_>, String>>()?;
    let mut wrong = Vec::new();
    for (i, t) in threads.into_iter().enumerate() {
        match t.join_timeout(u64::from(POLLS) * POLL_NS) {
            Ok(0) => {}
            Ok(code) => wrong.push(format!("wait {i}: {}", describe(code))),
            Err((_, e)) => wrong.push(format!("wait {i} did not end: {e}")),
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// Start `mfcheck await GO.TXT` on machine `m` (it looks at its own disk until the file
/// exists) and a thread that waits for it, and return once this machine's `machd` (the
/// function's `server`) shows the wait in flight (`OP_SELF`'s `words[4]`).
fn linger(server: ResId, m: u8) -> Result<ulib::thread::Thread, String> {
    let r = mach_client::spawn(m, mach::ANY_CORE, &["mfcheck", "await", "GO.TXT"])
        .map_err(|e| format!("spawn mfcheck await on machine {m}: {e}"))?;
    let t = wait_in_thread(r)?;
    let ask = Msg {
        label: mach::OP_SELF,
        words: [0; 6],
    };
    for _ in 0..POLLS {
        let (_, me) = ipc::call(server, &ask).map_err(|e| format!("OP_SELF: {e}"))?;
        if me.words[4] > 0 {
            return Ok(t);
        }
        let _ = sys::sleep_ns(POLL_NS / 10);
    }
    Err(format!(
        "machd never showed the remote wait in flight after {POLLS} looks"
    ))
}

/// Let the lingering program on machine `m` end (write `GO.TXT` there) and collect the
/// thread that waits for it: it must have ended with 0.
fn end_linger(m: u8, t: ulib::thread::Thread) -> Result<(), String> {
    let go = format!("m{m}:GO.TXT");
    fs::write_all(&go, b"go\n").map_err(|e| format!("write {go}: {e}"))?;
    let code = t
        .join_timeout(u64::from(POLLS) * POLL_NS)
        .map_err(|(_, e)| format!("the waiting thread did not end: {e}"))?;
    let _ = fs::unlink(&go);
    match code {
        0 => Ok(()),
        c => Err(format!(
            "the remote wait for the lingering program: {}",
            describe(c)
        )),
    }
}
