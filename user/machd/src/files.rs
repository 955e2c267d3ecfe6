//! Files of another machine's disk (`abi::mach::OP_FS`; P0's one file system over two
//! PCs): both halves.
//!
//! **Here, for a local program** ([`local`], [`answer`]): the program's fs request comes
//! with its fs ICA; the request's words and at most `FS_REMOTE_MAX` bytes of the ICA (a
//! name, or a write's data) become an [`R_FS`] request to the other machine, and the ICA
//! waits here until the answer, which is copied into it (a read's data, a listing) before
//! it goes back with the fs reply's words.
//!
//! **There, for the other machine** ([`perform`], [`job`]): a worker makes the request to
//! this machine's own `fs` (`ulib::fs::proxy`) and answers its words and bytes.
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_FS`] | fs op, fs `words[0]`, fs `words[1]`, name length, the requesting pid (u64 each), then the name or the data | fs reply `words[0..3]` (u64 each), then the read data or the listing |
//!
//! **Open files** are this machine's `fs` handles held by `machd`, so `fs`'s own rule (a
//! handle belongs to the process that opened it) is kept here instead: [`Served`] notes
//! which machine, life and process opened each one, and a request on it from any other is
//! `InvalidArgument`. The files are closed when their opener cannot close them any more:
//! its machine goes down or restarts ([`machine_gone`]), or the program ends on its own
//! machine. That machine's `machd` notes every program that opened (or tried to open) a
//! file elsewhere ([`Opener`], at the start of the open, so an open whose answer was lost
//! counts too) and, once the program has ended, asks each such machine to close all of its
//! files ([`FS_CLOSE_ALL`], [`close_orphans`], every heartbeat, again until the request
//! is sent). The requests of other machines run on their own workers ([`worker`]), so
//! that remote `wait`s, which hold the other workers, never hold up a file request.

use crate::ops::{word, words};
use crate::{now, with, State};
use alloc::vec::Vec;
use mrpc::Header;
use ulib::abi::fs::{
    FS_CLOSE, FS_ICA_SIZE, FS_MKDIR, FS_OPEN, FS_READ, FS_READDIR, FS_SEEK, FS_STAT, FS_UNLINK,
    FS_WRITE,
};
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::mach::{self, FS_REMOTE_MAX};
use ulib::abi::res::ResId;
use ulib::abi::{Error, Pid};
use ulib::{fnid, fs, ipc, sem};

pub const R_FS: u16 = 8;
/// `R_FS`'s op (not an `abi::fs` one): close every file the requesting process (the pid in
/// the payload) of the requesting machine's life holds here, and let go of the pipe ends
/// held here for it (`resops`). Sent when that program ended.
pub const FS_CLOSE_ALL: u64 = 0x80;
/// Threads making other machines' file requests.
pub const FS_WORKERS: u64 = 2;

/// How long a file request waits for its answer: a close flushes the disk, which under TCG
/// on a loaded host can take a while; a machine that goes down ends it sooner (`Gone`).
const FS_DEADLINE_NS: u64 = 10_000_000_000;
/// How long a file worker waits for this machine's file service while it starts (less than
/// the requester's deadline, [`FS_DEADLINE_NS`]).
const FS_START_WAIT_NS: u64 = 5_000_000_000;

/// A file of this machine opened by a program of another (the serving half).
pub struct Served {
    handle: u64,
    machine: u8,
    epoch: u32,
    pid: Pid,
}

impl Served {
    /// Opened by process `pid` of machine `h.from` in its life `h.epoch`?
    fn by(&self, h: &Header, pid: Pid) -> bool {
        self.machine == h.from && self.epoch == h.epoch && self.pid == pid
    }
}

/// Take out of `s.served` the files `gone` picks: their handles.
fn take_served(s: &mut State, gone: impl Fn(&Served) -> bool) -> Vec<u64> {
    let (out, kept): (Vec<Served>, Vec<Served>) =
        core::mem::take(&mut s.served).into_iter().partition(gone);
    s.served = kept;
    out.into_iter().map(|f| f.handle).collect()
}

/// A program of this one that opened (or tried to open) a file of machine `machine` in
/// its life `epoch` (the requesting half).
pub struct Opener {
    pid: Pid,
    machine: u8,
    epoch: u32,
}

/// What a local caller's request keeps while it waits: its ICA, and what the request is
/// (the requests of `streams` keep theirs the same way).
#[derive(Clone, Copy)]
pub struct Waiting {
    pub region: ResId,
    pub at: u64,
    pub kind: Kind,
}

/// The requests whose ICA `machd` keeps while they wait for another machine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `OP_FS`: the fs answer's bytes go into the ICA.
    Fs,
    /// `OP_OUTPUT` with an ICA (`streams::output_local`): the output goes into it.
    Output,
    /// `OP_INPUT` (`streams::input_local`): its bytes came from it.
    Input,
    /// `OP_CALL` (`calls`): the server's words and bytes go into it.
    Call,
    /// `OP_RES` (`resops`): a read's bytes or an info's record go into it.
    Res,
}

/// Does fs op `op` name a file by the name at the ICA's start?
fn named(op: u64) -> bool {
    matches!(op, FS_OPEN | FS_UNLINK | FS_MKDIR | FS_STAT | FS_READDIR)
}

/// Does fs op `op` act on an open file's handle (`words[0]`)?
fn on_handle(op: u64) -> bool {
    matches!(op, FS_READ | FS_WRITE | FS_SEEK | FS_CLOSE)
}

/// The ICA of local request `r` (region, where it is mapped), or `None` after answering
/// `r` `InvalidArgument` (a request of `OP_FS`, `OP_CALL`, `OP_RES`, `OP_OUTPUT` with an
/// ICA or `OP_INPUT` needs one).
pub fn request_ica(r: &Received) -> Option<(ResId, u64)> {
    let ica = ipc::ica_at(&r.msg);
    if ica.is_none() {
        let _ = ipc::reply_error(r.request, Error::InvalidArgument);
    }
    ica
}

/// Answer local `request` with `words`, or with its error, its ICA `region` back.
pub fn answer_words(request: u64, region: ResId, words: Result<[u64; 6], Error>) {
    let (value, words) = match words {
        Ok(words) => (0, words),
        Err(e) => (e as u64, [0; 6]),
    };
    let _ = ipc::reply(
        request,
        value,
        &ipc::with_ica(Msg { label: 0, words }, region),
    );
}

/// Answer local request `r` with error `e`, its ICA `region` back.
pub fn give_back(r: &Received, region: ResId, e: Error) {
    let _ = ipc::reply(r.request, e as u64, &ipc::with_ica(Msg::default(), region));
}

/// `OP_FS` from a local program (`r`, acting as `user`): started, or answered at once
/// with an error (the ICA back either way).
pub fn local(s: &mut State, r: &Received, user: u32) {
    let Some((region, at)) = request_ica(r) else {
        return;
    };
    let give_back = |e: Error| give_back(r, region, e);
    let w = r.msg.words;
    let (m, op, name_len) = (w[0] as u8, (w[0] >> 8) & 0xff, (w[0] >> 16) & 0xffff);
    if m >= s.n || m == s.me || !(named(op) || on_handle(op)) {
        return give_back(Error::InvalidArgument);
    }
    let len = match op {
        _ if named(op) => name_len,
        FS_WRITE => w[3],
        _ => 0,
    };
    // (`FS_REMOTE_MAX` is under `FS_ICA_SIZE`.) A read's length travels as asked: the
    // other machine answers at most `FS_REMOTE_MAX` bytes.
    if len > FS_REMOTE_MAX as u64 {
        return give_back(Error::TooLong);
    }
    let mut payload = words(&[op, w[2], w[3], name_len, r.sender.0]);
    // SAFETY: the request's ICA is attached at `at`, FS_ICA_SIZE bytes, ours until we
    // answer; `len` is at most FS_REMOTE_MAX, less than that.
    payload
        .extend_from_slice(unsafe { core::slice::from_raw_parts(at as *const u8, len as usize) });
    let epoch = u32::try_from(w[1]).ok().filter(|&e| e != 0);
    if on_handle(op) && epoch.is_none() {
        return give_back(Error::InvalidArgument);
    }
    let waiting = Waiting {
        region,
        at,
        kind: Kind::Fs,
    };
    let call = ((m, R_FS, payload), FS_DEADLINE_NS, epoch);
    if op == FS_OPEN {
        // Noted before the answer: an open performed there whose answer is lost still
        // holds a file, which the program's end must close.
        note_opener(s, r.sender, m);
    }
    if let Err(e) = s.start(r.request, mach::OP_FS, call, user, Some(waiting)) {
        give_back(e);
    }
}

/// Note that program `pid` of this machine holds something on machine `m` (a file, or a
/// pipe end `machd` holds there for it: `resops`) that its end must let go.
pub fn note_opener(s: &mut State, pid: Pid, m: u8) {
    let life = s.client.known_epoch(m);
    if !s
        .opened
        .iter()
        .any(|o| o.pid == pid && o.machine == m && o.epoch == life)
    {
        s.opened.push(Opener {
            pid,
            machine: m,
            epoch: life,
        });
    }
}

/// The answer to a local caller's `OP_FS` (`result`: the reply's payload) from machine
/// `m` in its life `epoch`: into the ICA, and back.
pub fn answer(request: u64, epoch: u32, w: Waiting, result: Result<Vec<u8>, Error>) {
    let parsed = result.and_then(|p| match w.kind {
        Kind::Output => {
            // `R_OUTPUT`'s answer: whether the output ended, then the bytes.
            let (&ended, bytes) = p.split_first().ok_or(Error::InvalidArgument)?;
            let n = bytes.len() as u64;
            Ok(([n, u64::from(ended != 0), 0], bytes.to_vec()))
        }
        // `R_INPUT`'s: how many bytes were written.
        Kind::Input => Ok(([word(&p, 0)?, 0, 0], Vec::new())),
        // Answered by `calls::answer` and `resops::answer` (`State::answer` sends them there).
        Kind::Call | Kind::Res => Err(Error::InvalidArgument),
        Kind::Fs => {
            let fw = [word(&p, 0)?, word(&p, 1)?, word(&p, 2)?];
            Ok((fw, p[24..].to_vec()))
        }
    });
    let (value, words) = match parsed {
        Ok((fw, bytes)) => {
            let n = bytes.len().min(FS_ICA_SIZE as usize);
            // SAFETY: the caller's ICA, attached at `at`, FS_ICA_SIZE bytes, ours until
            // the reply below.
            unsafe { core::slice::from_raw_parts_mut(w.at as *mut u8, n) }
                .copy_from_slice(&bytes[..n]);
            (0, [fw[0], fw[1], fw[2], u64::from(epoch), 0, 0])
        }
        Err(e) => (e as u64, [0; 6]),
    };
    let _ = ipc::reply(
        request,
        value,
        &ipc::with_ica(Msg { label: 0, words }, w.region),
    );
}

/// A job for the file workers: a file request from another machine, or a file to close
/// whose opener is gone.
pub enum Job {
    Request(Header, Vec<u8>),
    Close(u64),
}

/// `R_FS` from machine `h.from`: queued for a file worker (`None`), or refused at once.
pub fn perform(s: &mut State, h: &Header, p: &[u8]) -> Option<Result<Vec<u8>, Error>> {
    if p.len() < 40 {
        return Some(Err(Error::InvalidArgument));
    }
    queue(s, Job::Request(*h, p.to_vec())).err().map(Err)
}

/// Most file requests queued here: as many as the other machines may have in flight to
/// this one (`mrpc::WINDOW` each), so a requester that keeps to its window is never
/// refused for want of room.
const FS_QUEUE_MAX: usize = mrpc::WINDOW as usize * (mach::MAX_MACHINES - 1);

/// Queue `job` for the file workers. Requests beyond [`FS_QUEUE_MAX`] are `Busy` (the
/// program that asked is told so); closes are always taken (there are at most as many as
/// files open here).
fn queue(s: &mut State, job: Job) -> Result<(), Error> {
    if matches!(job, Job::Request(..)) && s.fs_jobs.len() >= FS_QUEUE_MAX {
        return Err(Error::Busy);
    }
    s.fs_jobs.push_back(job);
    match crate::fs_jobs_sem().map(sem::v) {
        Some(Ok(())) => Ok(()),
        _ => {
            s.fs_jobs.pop_back();
            Err(Error::Busy)
        }
    }
}

/// A file worker thread: performs the file jobs, one at a time.
pub fn worker(_: u64) -> u64 {
    let Some(jobs) = crate::fs_jobs_sem() else {
        return 1;
    };
    loop {
        if sem::p(jobs).is_err() {
            let _ = ulib::sys::sleep_ns(10_000_000);
            continue;
        }
        if let Some(j) = with(|s| s.fs_jobs.pop_front()) {
            job(j);
        }
    }
}

/// One file job.
fn job(job: Job) {
    match job {
        Job::Close(handle) => {
            let _ = fs::proxy(FS_CLOSE, [handle, 0, 0, 0, 0, 0], &[], 0);
        }
        Job::Request(h, p) => {
            let r = request(&h, &p);
            with(|s| s.finish(&h, &r));
        }
    }
}

/// Make request `p` of machine `h.from` to this machine's `fs`: the reply's payload.
fn request(h: &Header, p: &[u8]) -> Result<Vec<u8>, Error> {
    let (op, w0, w1, name_len, pid) = (
        word(p, 0)?,
        word(p, 1)?,
        word(p, 2)?,
        word(p, 3)?,
        word(p, 4)?,
    );
    let data = &p[40..];
    let pid = Pid(pid);
    if op == FS_CLOSE_ALL {
        // The program ended: its files here go, and the pipe ends held for it.
        with(|s| {
            let gone = |m, e, p| m == h.from && e == h.epoch && p == pid;
            crate::resops::drop_holds(s, gone);
            crate::moves::forget(s, gone);
        });
        for handle in with(|s| take_served(s, |f| f.by(h, pid))) {
            let _ = fs::proxy(FS_CLOSE, [handle, 0, 0, 0, 0, 0], &[], 0);
        }
        return Ok(words(&[0, 0, 0]));
    }
    if fnid::lookup(ulib::abi::fs::FN_FS).is_err() {
        // This machine's file service may still be reading its volume (a request can come
        // as soon as the machines hear each other): this file worker waits for it a little.
        fs::await_service(FS_START_WAIT_NS);
        if fnid::lookup(ulib::abi::fs::FN_FS).is_err() {
            return Err(Error::NotSupported);
        }
    }
    let mine = |f: &Served| f.handle == w0 && f.by(h, pid);
    if on_handle(op) && !with(|s| s.served.iter().any(mine)) {
        return Err(Error::InvalidArgument);
    }
    let (name_len, len) = match op {
        _ if named(op) => (name_len, name_len),
        FS_WRITE => (0, w1),
        FS_READ | FS_SEEK | FS_CLOSE => (0, 0),
        _ => return Err(Error::InvalidArgument),
    };
    if len as usize > data.len() || len > FS_REMOTE_MAX as u64 {
        return Err(Error::InvalidArgument);
    }
    let out = match op {
        FS_READ | FS_READDIR => FS_ICA_SIZE as usize,
        _ => 0,
    };
    let w1 = if op == FS_READ {
        w1.min(FS_REMOTE_MAX as u64)
    } else {
        w1
    };
    // An open counts in its program's user's share of this machine's open files, not in
    // this server's (`abi::fs::FS_OPEN`'s `words[1]`): else one user of another machine
    // could take every slot (found by a review).
    let w1 = if op == FS_OPEN { u64::from(h.user) } else { w1 };
    let r = fs::proxy(op, [w0, w1, 0, name_len, 0, 0], &data[..len as usize], out);
    if op == FS_CLOSE {
        with(|s| take_served(s, mine));
    }
    let (mut fw, mut bytes) = r?;
    match op {
        FS_OPEN => with(|s| {
            // Opened for a life of that machine that may have ended meanwhile (it went
            // down or restarted while the open was made): then closed at once.
            let live = s.members.get(h.from).is_some_and(|m| m.epoch == h.epoch)
                && s.members.state(h.from, now()) != Some(mrpc::members::State::Down);
            if live {
                s.served.push(Served {
                    handle: fw[0],
                    machine: h.from,
                    epoch: h.epoch,
                    pid,
                });
            } else {
                let _ = queue(s, Job::Close(fw[0]));
            }
        }),
        FS_READ => bytes.truncate((fw[0] as usize).min(FS_REMOTE_MAX)),
        FS_READDIR => {
            // Whole lines that fit one answer; the caller asks again from the next entry.
            bytes.truncate((fw[0] as usize).min(bytes.len()));
            let (kept, entries, cut) = mach::fit_listing(&bytes, FS_REMOTE_MAX);
            if cut {
                bytes.truncate(kept);
                fw[1] = entries;
                fw[2] = 1;
            }
            fw[0] = bytes.len() as u64;
        }
        _ => bytes.clear(),
    }
    let mut out = words(&fw[..3]);
    out.extend_from_slice(&bytes);
    Ok(out)
}

/// Machine `m` went down (`restarted` false) or restarted: the files its programs held
/// here are closed. After a restart, what this machine's programs opened there is gone
/// with that life; a machine only seen as down may still hold them (one-way loss), so
/// their closing stays noted.
pub fn machine_gone(s: &mut State, m: u8, restarted: bool) {
    for handle in take_served(s, |f| f.machine == m) {
        let _ = queue(s, Job::Close(handle));
    }
    crate::resops::drop_holds(s, |held_for, _, _| held_for == m);
    crate::moves::forget(s, |from, _, _| from == m);
    if restarted {
        s.opened.retain(|o| o.machine != m);
    }
}

/// Programs of this machine that opened files elsewhere and ended: each such machine is
/// asked to close all of their files there (a request nobody waits for; noted again if it
/// could not be sent now).
pub fn close_orphans(s: &mut State) {
    if s.opened.is_empty() {
        return;
    }
    let Ok(live) = ulib::sys::live_processes() else {
        return;
    };
    let (ended, kept): (Vec<Opener>, Vec<Opener>) = core::mem::take(&mut s.opened)
        .into_iter()
        .partition(|o| !live.iter().any(|p| p.pid == o.pid));
    s.opened = kept;
    let now = now();
    for o in ended {
        let payload = words(&[FS_CLOSE_ALL, 0, 0, 0, o.pid.0]);
        let deadline = now.saturating_add(FS_DEADLINE_NS);
        match s.client.start_in(
            now,
            o.machine,
            R_FS,
            s.my_user.0,
            &payload,
            deadline,
            Some(o.epoch),
        ) {
            Ok((_, bytes)) => s.send(o.machine, &bytes),
            // Too many requests in flight there: the next heartbeat tries again.
            Err(Error::Busy) => s.opened.push(o),
            // That life is gone (its files with it), or the machine is not one.
            Err(_) => {}
        }
    }
}
