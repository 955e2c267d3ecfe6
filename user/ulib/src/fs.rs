//! Files on the disk (issue 16): [`open`], [`read`], [`write`], [`seek`], [`close`], [`unlink`],
//! [`readdir`], [`mkdir`], [`stat`] as requests to the file service `fs` (`abi::fs`; the
//! server is `user/fsd`), found by function id. Names are `/`-separated FAT 8.3 names
//! relative to the volume's root (`DIR/FILE.TXT`).
//!
//! Each request carries an ICA of `FS_ICA_SIZE` bytes, which the reply gives back. The
//! program keeps such ICAs between calls (`SPARES`) and sends one with the next request:
//! opening, attaching, detaching and closing a fresh vregion for every call cost about
//! 21,000 of a cached read's 31,000 instructions (`cargo xtask bench agora`). A thread that
//! asks while every spare is out gets a fresh one (kept if there is room when it comes
//! back); a spare made on another core (the program migrated) is let go and replaced.
//! Each ICA is marked `CLOSE_WHEN_DETACHED`, so one that does not come back (the server
//! ended holding it, or the program ended first) is closed by the kernel. [`read_all`] and
//! [`write_all`] loop over the ICA-sized pieces.
//!
//! **Reply-less calls** ([`nowait`]; P0 Table 4): [`write_nowait`], [`close_nowait`] and
//! [`unlink_nowait`] send their request and return without waiting for the answer;
//! [`settle`] waits for them and says whether any failed.
//!
//! **Another machine's files** (issue 17; P0's one system over two PCs): a name that
//! starts with `mK:` (`m1:DIR/FILE.TXT`) is a file of machine K's disk. Its requests go to
//! this machine's `machd` (`abi::mach::OP_FS`), which carries them to machine K's `machd`,
//! which makes them to K's `fs`; the same ICA goes to `machd` and comes back with the
//! answer, which carries at most `FS_REMOTE_MAX` bytes (so reads and writes of another
//! machine's file are cut into pieces of that size). An open file of another machine is an
//! [`Fd`] of this program's table of such files ([`REMOTE`]), which remembers the machine,
//! the life (epoch) of that machine that opened it, and its handle there: after that
//! machine restarts, requests on it are refused (`StaleResource`). `mK:` naming this
//! machine is the local file service.

use crate::abi::fs::*;
use crate::abi::ipc::Msg;
use crate::abi::mach;
use crate::abi::res::{ResId, Rights};
use crate::abi::Error;
use crate::cell::Local;
use crate::{fnid, ipc, res};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

pub mod nowait;
pub use nowait::{close_nowait, settle, unlink_nowait, write_nowait};

pub use crate::abi::fs::{MODE_APPEND, MODE_READ, MODE_WRITE};

/// An open file: the server's handle, or (with [`REMOTE_FD`]) an entry of [`REMOTE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fd(pub u64);

/// An [`Fd`]'s flag: a file of another machine, its index in [`REMOTE`] in the low bits.
pub const REMOTE_FD: u64 = 1 << 63;

/// This program's open files of other machines: machine, its life (epoch) that opened the
/// file, and the handle there. A closed one's slot is `None` (reused).
static REMOTE: Local<Vec<Option<(u8, u32, u64)>>> = Local::new(Vec::new());

/// Where a request goes: this machine's file service, or machine `m`'s (in its life
/// `epoch`; 0 for a request by name, which any life may answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Here,
    Machine(u8, u32),
}

impl Route {
    /// Most bytes a request on this route carries each way.
    fn max(self) -> usize {
        match self {
            Route::Here => FS_ICA_SIZE as usize,
            Route::Machine(..) => mach::FS_REMOTE_MAX,
        }
    }
}

/// `mK:PATH`: K and PATH (K as written, not checked).
fn split_machine(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix('m')
        .and_then(|rest| rest.split_once(':'))
        .filter(|(m, _)| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// The machine a name names (`mK:PATH`) other than this one, if any.
pub fn machine_named(name: &str) -> Option<u8> {
    let m = split_machine(name)?.0.parse().ok()?;
    (crate::mach::this_machine() != Some(m)).then_some(m)
}

/// Split `name` into where it is and its path there: `mK:PATH` is machine K's `PATH`.
fn locate(name: &str) -> Result<(Route, &str), Error> {
    let Some((m, path)) = split_machine(name) else {
        return Ok((Route::Here, name));
    };
    let m: u8 = m.parse().map_err(|_| Error::BadName)?;
    if usize::from(m) >= mach::MAX_MACHINES {
        return Err(Error::BadName);
    }
    match crate::mach::this_machine() {
        Some(me) if me == m => Ok((Route::Here, path)),
        Some(_) => Ok((Route::Machine(m, 0), path)),
        None => Err(Error::NoSuchResource),
    }
}

/// Where `fd`'s file is, and its handle there.
fn route_of(fd: Fd) -> Result<(Route, u64), Error> {
    if fd.0 & REMOTE_FD == 0 {
        return Ok((Route::Here, fd.0));
    }
    let i = (fd.0 & !REMOTE_FD) as usize;
    REMOTE
        .with(|t| t.get(i).copied().flatten())
        .map(|(m, epoch, handle)| (Route::Machine(m, epoch), handle))
        .ok_or(Error::InvalidArgument)
}

/// Remember machine `m`'s open file `handle` (opened by its life `epoch`): its [`Fd`].
fn remember(m: u8, epoch: u32, handle: u64) -> Fd {
    REMOTE.with(|t| {
        let entry = Some((m, epoch, handle));
        let i = match t.iter().position(Option::is_none) {
            Some(i) => {
                t[i] = entry;
                i
            }
            None => {
                t.push(entry);
                t.len() - 1
            }
        };
        Fd(REMOTE_FD | i as u64)
    })
}

/// Where fresh request ICAs are attached while the caller fills them: slot `n % SLOTS` of
/// a window of [`SLOTS`] ICAs, so that threads asking at once never share an address.
const AT: u64 = 0x0000_5500_0000_0000;
const SLOTS: u64 = 256;

/// The ICAs kept for the next requests: the vregion, where it is attached now, and the
/// core that owns it. One serves a program that waits for each answer; the reply-less
/// calls ([`nowait`]) have up to [`nowait::MAX_PENDING`] out at once.
static SPARES: Local<Vec<(ResId, u64, usize)>> = Local::new(Vec::new());
/// Most ICAs kept.
const SPARES_MAX: usize = nowait::MAX_PENDING + 1;
/// Fresh ICAs made so far (their attach slots).
static MADE: AtomicU64 = AtomicU64::new(0);
/// The ICAs made here and not let go ([`is_own_request`]).
static OWN_ICAS: Local<Vec<ResId>> = Local::new(Vec::new());

/// An ICA to send: a spare, or a fresh one. Returns it and where it is attached.
///
/// A fresh one is marked `CLOSE_WHEN_DETACHED`: the kernel closes it once it is attached
/// nowhere, so letting one go is a detach, the spares go with the program's address space
/// when it ends (however it ends), and one out with a request then (a reply-less call's
/// answer still to come) is closed when its answer finds nobody to map it.
fn take_ica(pid: crate::abi::Pid) -> Result<(ResId, u64), Error> {
    while let Some((region, at, core)) = SPARES.with(Vec::pop) {
        if core == pid.core() {
            return Ok((region, at));
        }
        // Made on the core this program ran on before it migrated: sent from here, it
        // would cross cores with every request.
        let_go(region, at);
    }
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    // `fs-PID-X` (PID as `CORE.SERIAL`: names are the machine's own, and a pid with its
    // machine in it would not fit), X 48 bits nobody can guess (`res::open_fresh`): under
    // a name made of a count, a program could take the next ones first and keep this one
    // from every file.
    let region = res::open_fresh(
        &format!("here/vregion/fs-{}", pid.in_machine()),
        &FS_ICA_SIZE.to_le_bytes(),
        Rights::OWNER_ALL,
    )?;
    let at = AT + (n % SLOTS) * FS_ICA_SIZE;
    if let Err(e) = res::attach_here(region, at, true) {
        let _ = res::close(region);
        return Err(e);
    }
    OWN_ICAS.with(|o| o.push(region));
    if let Err(e) = res::close_when_detached(region) {
        // (Not refused while attached here; if it were, it is let go by hand.)
        let_go(region, at);
        return Err(e);
    }
    Ok((region, at))
}

/// Is `region` one of this process's own request ICAs ([`take_ica`] made it, and it was
/// not let go)? A server that makes others' resource operations (`machd`) keeps these, its
/// own bookkeeping, from them; another process's, or one merely named alike, is not this
/// process's. (One the kernel closed, its answer lost, stays listed: its id, with its
/// generation, names no other vregion.)
pub fn is_own_request(region: ResId) -> bool {
    OWN_ICAS.with(|o| o.contains(&region))
}

/// Let an ICA attached here at `at` go: detached, the kernel closes it (marked at
/// [`take_ica`]); the close is for one the kernel did not (it then fails, harmlessly).
fn let_go(region: ResId, at: u64) {
    let _ = res::detach_here(at);
    let _ = res::close(region);
    forget(region);
}

/// `region` is no request ICA of this process's any more ([`is_own_request`]).
fn forget(region: ResId) {
    OWN_ICAS.with(|o| o.retain(|&r| r != region));
}

/// An ICA that came back attached at `at`: kept as a spare, or let go if there are
/// enough.
fn give_back(region: ResId, at: u64, core: usize, writable: bool) {
    let kept = SPARES.with(|s| {
        // One that came back read-only (lent on by a server that could not pass it
        // back as it came) cannot be filled: let go.
        if writable && s.len() < SPARES_MAX {
            s.push((region, at, core));
            true
        } else {
            false
        }
    });
    if !kept {
        let_go(region, at);
    }
}

/// One request to `fs` on `route`: `fill` writes the ICA, `take` reads the reply's ICA.
/// To another machine it goes to `machd` as `OP_FS` (`words[0]`, `words[1]` and the name's
/// length, `words[3]`, travel; the answer's `words[3]` is the answering machine's life).
fn request<T>(
    route: Route,
    label: u64,
    words: [u64; 6],
    fill: impl FnOnce(&mut [u8]),
    take: impl FnOnce(&[u8], &Msg) -> T,
) -> Result<T, Error> {
    let (server, label, words) = match route {
        Route::Here => (ResId(fnid::lookup(FN_FS)?.0), lend(label), words),
        Route::Machine(m, epoch) => (
            ResId(fnid::lookup(mach::FN_MACH)?.0),
            mach::OP_FS,
            [
                mach::fs_word(u64::from(m), label, words[3]),
                u64::from(epoch),
                words[0],
                words[1],
                0,
                0,
            ],
        ),
    };
    call_with_ica(server, label, words, fill, take)
}

/// `label` with the ICA lent read-only (`MSG_ICA_READ_ONLY`) unless `fs` writes its answer
/// in it (a read, a listing): the server cannot change what it only reads, and the kernel
/// counts its answer as carrying no reply data when no word does either (P0 Table 4).
pub(crate) fn lend(label: u64) -> u64 {
    match label {
        FS_READ | FS_READDIR => label,
        _ => label | crate::abi::ipc::MSG_ICA_READ_ONLY,
    }
}

/// A call to `server` (`label`, `words`) carrying a request ICA of `FS_ICA_SIZE` bytes
/// (this program's spare, or a fresh one): `fill` writes it, `take` reads it as the reply
/// gives it back (with the reply's words) when the call's value is 0.
pub(crate) fn call_with_ica<T>(
    server: ResId,
    label: u64,
    words: [u64; 6],
    fill: impl FnOnce(&mut [u8]),
    take: impl FnOnce(&[u8], &Msg) -> T,
) -> Result<T, Error> {
    let pid = crate::sys::getpid()?;
    let (region, at) = take_ica(pid)?;
    // SAFETY: attached writable at `at`, FS_ICA_SIZE bytes, by us alone (the spare is
    // handed to one request at a time).
    fill(unsafe { core::slice::from_raw_parts_mut(at as *mut u8, FS_ICA_SIZE as usize) });
    let (value, reply) = match ipc::call(server, &ipc::with_ica(Msg { label, words }, region)) {
        Ok(r) => r,
        Err(e) => {
            // Whether the ICA left is not known here: let it go either way (one that left
            // is closed when it comes back to nobody).
            let_go(region, at);
            return Err(e);
        }
    };
    let Some((back, at)) = ipc::ica_at(&reply).filter(|(r, _)| *r == region) else {
        // The server ended holding it: detached, the kernel closed it (or, unmarked,
        // it is ours to close).
        let _ = res::close(region);
        forget(region);
        return Err(if value == 0 {
            Error::Unknown
        } else {
            Error::from_code(value)
        });
    };
    // SAFETY: the reply gave the ICA back, attached at `at`, FS_ICA_SIZE bytes.
    let data = unsafe { core::slice::from_raw_parts(at as *const u8, FS_ICA_SIZE as usize) };
    let out = if value == 0 {
        Ok(take(data, &reply))
    } else {
        Err(Error::from_code(value))
    };
    give_back(back, at, pid.core(), !ipc::ica_read_only(&reply));
    out
}

/// A request whose ICA carries only `name` (on the machine it names).
fn named(label: u64, name: &str, w0: u64) -> Result<(Route, [u64; 6]), Error> {
    let (route, name) = locate(name)?;
    if name.len() > route.max() {
        return Err(Error::TooLong);
    }
    request(
        route,
        label,
        [w0, 0, 0, name.len() as u64, 0, 0],
        |b| b[..name.len()].copy_from_slice(name.as_bytes()),
        |_, m| m.words,
    )
    .map(|w| (route, w))
}

/// Open `name` with `mode` ([`MODE_READ`], [`MODE_WRITE`], [`MODE_APPEND`]).
pub fn open(name: &str, mode: u64) -> Result<Fd, Error> {
    open_len(name, mode).map(|(fd, _)| fd)
}

/// [`open`], also giving the file's length (0 for a file made or emptied by the open).
pub fn open_len(name: &str, mode: u64) -> Result<(Fd, u64), Error> {
    named(FS_OPEN, name, mode).map(|(route, w)| match route {
        Route::Here => (Fd(w[0]), w[1]),
        Route::Machine(m, _) => (remember(m, w[3] as u32, w[0]), w[1]),
    })
}

/// Read up to `buf.len()` bytes (at most `FS_ICA_SIZE` a call, `FS_REMOTE_MAX` from
/// another machine); 0 at the end.
pub fn read(fd: Fd, buf: &mut [u8]) -> Result<usize, Error> {
    let (route, handle) = route_of(fd)?;
    let len = buf.len().min(route.max());
    request(
        route,
        FS_READ,
        [handle, len as u64, 0, 0, 0, 0],
        |_| {},
        |data, m| {
            let n = (m.words[0] as usize).min(len);
            buf[..n].copy_from_slice(&data[..n]);
            n
        },
    )
}

/// Write `data` (at most `FS_ICA_SIZE` bytes a call, `FS_REMOTE_MAX` to another
/// machine); returns the bytes written.
pub fn write(fd: Fd, data: &[u8]) -> Result<usize, Error> {
    let (route, handle) = route_of(fd)?;
    let len = data.len().min(route.max());
    request(
        route,
        FS_WRITE,
        [handle, len as u64, 0, 0, 0, 0],
        |b| b[..len].copy_from_slice(&data[..len]),
        |_, _| len,
    )
}

/// Move `fd`'s position to byte `pos` (at most the file's length): the next read or
/// write starts there.
pub fn seek(fd: Fd, pos: u64) -> Result<(), Error> {
    let (route, handle) = route_of(fd)?;
    request(route, FS_SEEK, [handle, pos, 0, 0, 0, 0], |_| {}, |_, _| ())
}

/// Close `fd`: what was written is on the disk when this returns. A file of another
/// machine leaves this program's table whatever the answer (if that machine did not
/// close it, its `machd` does when this program ends).
pub fn close(fd: Fd) -> Result<(), Error> {
    let (route, handle) = route_of(fd)?;
    if route != Route::Here {
        let i = (fd.0 & !REMOTE_FD) as usize;
        REMOTE.with(|t| t[i] = None);
    }
    request(route, FS_CLOSE, [handle, 0, 0, 0, 0, 0], |_| {}, |_, _| ())
}

/// Delete the file (or empty directory) `name`.
pub fn unlink(name: &str) -> Result<(), Error> {
    named(FS_UNLINK, name, 0).map(drop)
}

/// Make the directory `name`.
pub fn mkdir(name: &str) -> Result<(), Error> {
    named(FS_MKDIR, name, 0).map(drop)
}

/// About a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub dir: bool,
}

/// Size and kind of `name`.
pub fn stat(name: &str) -> Result<Stat, Error> {
    named(FS_STAT, name, 0).map(|(_, w)| Stat {
        size: w[0],
        dir: w[1] == 1,
    })
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub dir: bool,
}

/// The entries of directory `name` (`""` or `"/"`: the root).
pub fn readdir(name: &str) -> Result<Vec<Entry>, Error> {
    let (route, name) = locate(name)?;
    if name.len() > route.max() {
        return Err(Error::TooLong);
    }
    let mut out = Vec::new();
    loop {
        let mut text = String::new();
        let w = request(
            route,
            FS_READDIR,
            [out.len() as u64, 0, 0, name.len() as u64, 0, 0],
            |b| b[..name.len()].copy_from_slice(name.as_bytes()),
            |data, m| {
                let n = (m.words[0] as usize).min(data.len());
                text = String::from_utf8_lossy(&data[..n]).into_owned();
                m.words
            },
        )?;
        for line in text.lines() {
            let (n, size) = line.rsplit_once(' ').unwrap_or((line, "0"));
            out.push(Entry {
                name: n.trim_end_matches('/').into(),
                size: size.parse().unwrap_or(0),
                dir: n.ends_with('/'),
            });
        }
        if w[2] == 0 || w[1] == 0 {
            return Ok(out);
        }
    }
}

/// The whole file `name`.
pub fn read_all(name: &str) -> Result<Vec<u8>, Error> {
    read_at_most(name, usize::MAX)
}

/// The whole of file `name` if it holds at most `max` bytes, else `TooLong` (having read
/// at most `max` and one request more): for a caller whose memory must not follow a file's
/// size (the shell's `cat`, `source`, `run`).
pub fn read_at_most(name: &str, max: usize) -> Result<Vec<u8>, Error> {
    let fd = open(name, MODE_READ)?;
    let mut out = Vec::new();
    let mut buf = alloc::vec![0u8; FS_ICA_SIZE as usize];
    let r = loop {
        match read(fd, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(_) if out.len() >= max => break Err(Error::TooLong),
            Ok(n) if out.len() + n > max => break Err(Error::TooLong),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    let c = close(fd);
    r.and(c).map(|()| out)
}

/// Make `name` hold exactly `data` (made if missing).
pub fn write_all(name: &str, data: &[u8]) -> Result<(), Error> {
    let fd = open(name, MODE_WRITE)?;
    let mut r = Ok(());
    let mut rest = data;
    while !rest.is_empty() {
        // A piece at a time: as much as one request carries on the file's route.
        match write(fd, rest) {
            Ok(0) => {
                r = Err(Error::Unknown);
                break;
            }
            Ok(n) => rest = &rest[n.min(rest.len())..],
            Err(e) => {
                r = Err(e);
                break;
            }
        }
    }
    let c = close(fd);
    r.and(c)
}

/// One request to this machine's file service made for a program on another machine
/// (`machd`, `abi::mach::OP_FS`): `data` at the ICA's start; the reply's words and the
/// first `out` bytes of the reply's ICA.
pub fn proxy(
    label: u64,
    words: [u64; 6],
    data: &[u8],
    out: usize,
) -> Result<([u64; 6], Vec<u8>), Error> {
    if data.len() > FS_ICA_SIZE as usize {
        return Err(Error::TooLong);
    }
    let out = out.min(FS_ICA_SIZE as usize);
    request(
        Route::Here,
        label,
        words,
        |b| b[..data.len()].copy_from_slice(data),
        |d, m| (m.words, d[..out].to_vec()),
    )
}

/// Wait at most `limit_ns` while the file service is starting: `fs` is not registered yet,
/// but an `fsd` runs (the boot configuration starts it with the disk driver, and it
/// registers once it has read the volume, so a script's first file command, or another
/// machine's first file request to this one, can come before that). Returns at once when
/// `fs` is up or no `fsd` runs (no disk: the request then says so).
pub fn await_service(limit_ns: u64) {
    let start = crate::sys::clock_ns().unwrap_or(0);
    // A list that cannot be had whole may hold an `fsd`: waited for (`limit_ns` bounds it).
    let fsd_running =
        || crate::sys::live_processes().map_or(true, |l| l.iter().any(|p| p.name() == "fsd"));
    while crate::fnid::lookup(FN_FS).is_err() && fsd_running() {
        if crate::sys::clock_ns()
            .unwrap_or(u64::MAX)
            .saturating_sub(start)
            > limit_ns
        {
            return;
        }
        let _ = crate::sys::sleep_ns(10_000_000);
    }
}
