//! Resource operations on another machine (`abi::mach::OP_RES`; P4: a request reaches a
//! resource on another machine the way RPCC reaches another core's, with the rights checked
//! by the resource's own kernel): both halves.
//!
//! **Here, for a local program** ([`local`], [`answer`]): the operation, its words and at
//! most `RES_REMOTE_MAX` bytes from the program's ICA (an open's name and arguments, a
//! write's bytes) become an [`R_RES`] request naming the life of the machine the id came
//! from (a restarted machine refuses it `StaleResource`); a read's bytes or an info's
//! record come back into the ICA.
//!
//! **There, for the other machine** ([`perform`], on the network thread): the operation is
//! made *acting as the requester's user* (`THREAD_SETUSER` around the one system call, as a remote
//! spawn), so this machine's kernel checks the rights. Nothing may wait here (the network
//! thread serves everyone): pipes are read and written with `PIPE_NOWAIT` (`Again` where a
//! local caller would wait) and `SEM_P` is made as `SEM_TRY`.
//!
//! **Pipe ends held for a program of another machine** ([`Hold`]): `PIPE_HOLD` for "the
//! caller" makes this `machd` hold the end, noted for that program (machine, life, pid).
//! The end is let go (as the user it was held for) when the last program holding it through
//! `machd` drops it (`PIPE_DROP`), ends (its machine's `machd` sends `FS_CLOSE_ALL` for it,
//! as for its files: [`drop_holds`]), or its machine goes down or restarts; so a reader
//! here reads EOF once the writers of other machines are gone, as Unix pipes do. A hold or
//! drop naming this `machd`'s own pid is `Denied` (its own holds are its bookkeeping's);
//! at most [`HOLDS_PER_PROGRAM`] ends per program, [`HOLDS_MAX`] in all.
//!
//! Vregions, pipes, semaphores, computes and processes may be opened here ([`OPENABLE`]);
//! a process opened so is noted as its requester's, as a remote spawn's child is. Not an
//! endpoint: it would be `machd`'s own.
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_RES`] | op, id (an open: rights), arg (a control: command; a list: the core), length, argument bytes, control arg0, arg1, the requesting pid (u64 each), then the bytes | the result (u64), then a read's bytes or an info's `ResInfo` |

use crate::files::{Kind, Waiting};
use crate::ops::{word, words};
use crate::State;
use alloc::vec;
use alloc::vec::Vec;
use mrpc::Header;
use ulib::abi::ipc::Received;
use ulib::abi::mach::{
    self, res_parts, RES_CLOSE, RES_CONTROL, RES_DATA_AT, RES_FIND, RES_INFO, RES_LIST,
    RES_LIST_MAX, RES_OPEN, RES_READ, RES_REMOTE_MAX, RES_WRITE,
};
use ulib::abi::res::{ResId, ResType, Rights, UserId, MAX_RES_NAME};
use ulib::abi::syscall::control::{PIPE_DROP, PIPE_HOLD, PIPE_NOWAIT, SEM_P, SEM_TRY};
use ulib::abi::{Error, Pid};
use ulib::res;

pub const R_RES: u16 = 11;
/// The request's words before its bytes.
const HEAD: usize = 8 * 8;
/// Most pipe ends held here for programs of other machines, and for one program.
const HOLDS_MAX: usize = 256;
const HOLDS_PER_PROGRAM: usize = 32;
/// The types a program of another machine may open here. Not an endpoint: it would be
/// `machd`'s own, which the kernel lets it receive on whatever user it acts as. A process
/// (created stopped, a compute's to run: P4's process and compute resources) is
/// `machd`'s child, which the kernel lets it kill and wait for whatever user it acts as,
/// so it is noted as the requester's as a remote spawn's child is
/// (`crate::ops::room_for`, `OP_KILL` and `OP_WAIT` only for that user), and it runs at
/// an application's priority at most (the kernel's rule for a created process). A
/// compute binds only a process of the user it is bound as (the kernel's rule).
const OPENABLE: [ResType; 5] = [
    ResType::VRegion,
    ResType::Pipe,
    ResType::Sem,
    ResType::Compute,
    ResType::Process,
];

/// A pipe end this `machd` holds for a program of another machine.
pub struct Hold {
    pipe: ResId,
    end: u64,
    machine: u8,
    epoch: u32,
    pid: Pid,
    /// The user it was held for: it is let go as that user (the pipe's rights are theirs).
    user: u32,
}

/// `OP_RES` from a local program (`r`, acting as `user`; its ICA writable): started, or
/// answered at once with an error (the ICA back either way).
pub fn local(s: &mut State, r: &Received, user: u32) {
    let Some((region, at)) = crate::files::request_ica(r) else {
        return;
    };
    let give_back = |e: Error| crate::files::give_back(r, region, e);
    let w = r.msg.words;
    let (m, op, len, args_len) = res_parts(w[0]);
    if m >= u64::from(s.n) || m == u64::from(s.me) || !(RES_OPEN..=RES_LIST).contains(&op) {
        return give_back(Error::InvalidArgument);
    }
    let named = op == RES_OPEN || op == RES_FIND;
    let data_len = match op {
        _ if named && len == 0 => return give_back(Error::InvalidArgument),
        // The whole name (`c0/pipe/p`), as the kernel bounds it.
        _ if named && len > MAX_RES_NAME => return give_back(Error::TooLong),
        RES_OPEN => len + args_len,
        RES_FIND => len,
        RES_WRITE => len,
        _ => 0,
    };
    if data_len > RES_REMOTE_MAX || len > RES_REMOTE_MAX {
        return give_back(Error::TooLong);
    }
    // An id names the life of its machine that handed it out.
    let epoch = match (op, u32::try_from(w[1])) {
        (RES_OPEN | RES_FIND | RES_LIST, _) => None,
        (_, Ok(e)) if e != 0 => Some(e),
        _ => return give_back(Error::InvalidArgument),
    };
    // SAFETY: the request's ICA is attached at `at` (a vregion: at least a page), ours
    // until we answer; RES_DATA_AT + data_len is at most 912 bytes.
    let page = unsafe { core::slice::from_raw_parts(at as *const u8, RES_DATA_AT + data_len) };
    let (a0, a1) = (word(page, 0).unwrap_or(0), word(page, 1).unwrap_or(0));
    let mut payload = words(&[
        op,
        w[2],
        w[3],
        len as u64,
        args_len as u64,
        a0,
        a1,
        r.sender.0,
    ]);
    payload.extend_from_slice(&page[RES_DATA_AT..]);
    if op == RES_CONTROL && w[3] == PIPE_HOLD && a1 == 0 {
        // Held there for this program: let go when it ends (noted before the answer, so a
        // hold made there whose answer is lost is let go too).
        crate::files::note_opener(s, r.sender, m as u8);
    }
    let waiting = Waiting {
        region,
        at,
        kind: Kind::Res,
    };
    let call = ((m as u8, R_RES, payload), mach::DEFAULT_DEADLINE_NS, epoch);
    if let Err(e) = s.start(r.request, mach::OP_RES, call, user, Some(waiting)) {
        give_back(e);
    }
}

/// The answer to a local caller's `OP_RES` from a machine in its life `epoch` (`result`:
/// the reply's payload): the bytes into the ICA, and back.
pub fn answer(request: u64, epoch: u32, w: Waiting, result: Result<Vec<u8>, Error>) {
    let parsed = result.and_then(|p| {
        let value = word(&p, 0)?;
        let bytes = &p[8..];
        if bytes.len() > RES_REMOTE_MAX {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: the caller's ICA, attached at `at`, at least a page, ours until the reply
        // below; at most 896 bytes.
        unsafe { core::slice::from_raw_parts_mut(w.at as *mut u8, bytes.len()) }
            .copy_from_slice(bytes);
        Ok([value, u64::from(epoch), bytes.len() as u64, 0, 0, 0])
    });
    crate::files::answer_words(request, w.region, parsed);
}

/// `R_RES` from machine `h.from`, made here at once (nothing in it waits): the reply's
/// payload.
pub fn perform(s: &mut State, h: &Header, p: &[u8]) -> Result<Vec<u8>, Error> {
    let [op, id, arg, len, args_len, a0, a1, pid] = {
        let mut w = [0u64; 8];
        for (i, x) in w.iter_mut().enumerate() {
            *x = word(p, i)?;
        }
        w
    };
    let data = p.get(HEAD..).ok_or(Error::InvalidArgument)?;
    if len > RES_REMOTE_MAX as u64 || args_len > RES_REMOTE_MAX as u64 {
        return Err(Error::InvalidArgument);
    }
    let (len, args_len) = (len as usize, args_len as usize);
    let expected = match op {
        RES_OPEN => len + args_len,
        RES_WRITE | RES_FIND => len,
        _ => 0,
    };
    if data.len() != expected {
        return Err(Error::InvalidArgument);
    }
    let user = h.user;
    let id = ResId(id);
    if matches!(op, RES_CLOSE | RES_READ | RES_WRITE | RES_CONTROL) && machd_own(id) {
        // machd's own endpoints, semaphores and pages (`machd-*` on its core, its file
        // requests' ICAs, its socket pages, its own vspace) are its bookkeeping: a program
        // of another machine acting as the administrator, which created them, could
        // otherwise close the link's endpoint (the machine goes deaf), a job semaphore
        // (every remote wait then fails), found by a review, or an ICA of its requests to
        // `fs` (every remote file request then fails).
        return Err(Error::Denied);
    }
    // A pipe is never waited for here.
    let nowait = |arg: u64| match id.kind() {
        Some(ResType::Pipe) if arg == 0 || arg == PIPE_NOWAIT => Ok(PIPE_NOWAIT),
        Some(ResType::Pipe) => Err(Error::InvalidArgument),
        _ => Ok(arg),
    };
    let value = match op {
        RES_OPEN => {
            let name = core::str::from_utf8(&data[..len]).map_err(|_| Error::BadName)?;
            let parsed = ulib::abi::res::ResName::parse(name).map_err(|_| Error::BadName)?;
            let kind = parsed.kind;
            if !OPENABLE.contains(&kind) {
                return Err(Error::NotSupported);
            }
            // A name reserved for a process (`pC.S-...`) is no remote program's to open:
            // the kernel would see this `machd` open it, so any program of another machine
            // could take the names reserved for this one (found by a review).
            if ulib::abi::res::reserved_for(parsed.name).is_some() {
                return Err(Error::Denied);
            }
            let rights = Rights(u8::try_from(id.0).map_err(|_| Error::InvalidArgument)?);
            if kind == ResType::Process {
                crate::ops::room_for(s, user)?;
            }
            let opened = crate::ops::as_user(user, || res::open(name, &data[len..], rights))?;
            if kind == ResType::Process {
                // Its pid (the process type's size, in its record: no right needed); a
                // process made so is the user's.
                match crate::ops::as_user(user, || res::info(opened)) {
                    Ok(i) => s.spawned.push((Pid(i.size), UserId(user))),
                    Err(e) => {
                        let _ = crate::ops::as_user(user, || res::close(opened));
                        return Err(e);
                    }
                }
            }
            opened.0
        }
        RES_FIND => {
            let name = core::str::from_utf8(data).map_err(|_| Error::BadName)?;
            crate::ops::as_user(user, || res::find(name))?.id.0
        }
        RES_CLOSE => {
            // A process resource's close ends the process and takes its status: no wait
            // will collect it, so it is no longer the user's program here.
            let process = (id.kind() == Some(ResType::Process))
                .then(|| crate::ops::as_user(user, || res::info(id)).ok())
                .flatten()
                .map(|i| Pid(i.size));
            crate::ops::as_user(user, || res::close(id))?;
            if let Some(pid) = process {
                s.spawned.retain(|(q, _)| *q != pid);
            }
            // Its ends held here go with it.
            s.holds.retain(|x| x.pipe != id);
            0
        }
        RES_INFO => {
            let got = crate::ops::as_user(user, || res::info(id))?;
            let mut out = words(&[0]);
            out.extend_from_slice(bytemuck::bytes_of(&got));
            return Ok(out);
        }
        RES_READ => {
            let arg = nowait(arg)?;
            let mut buf = vec![0u8; len];
            let n = crate::ops::as_user(user, || res::read(id, &mut buf, arg))?;
            let mut out = words(&[n as u64]);
            out.extend_from_slice(&buf[..n.min(len)]);
            return Ok(out);
        }
        RES_WRITE => {
            let arg = nowait(arg)?;
            crate::ops::as_user(user, || res::write(id, data, arg))? as u64
        }
        RES_CONTROL => control(s, h, Pid(pid), id, arg, a0, a1)?,
        RES_LIST => {
            let core = usize::try_from(arg).map_err(|_| Error::NoSuchCore)?;
            let all = crate::ops::as_user(user, || res::list_all(core))?;
            let skip = usize::try_from(a0).unwrap_or(usize::MAX).min(all.len());
            let mut out = words(&[all.len() as u64]);
            for r in all[skip..].iter().take(RES_LIST_MAX) {
                out.extend_from_slice(bytemuck::bytes_of(r));
            }
            return Ok(out);
        }
        _ => return Err(Error::NoSuchCall),
    };
    Ok(words(&[value]))
}

/// Is `id` one of this `machd`'s own resources, on its core: named `machd-...` (its
/// endpoints, job semaphores, call pages), a vregion `ulib::fs` made for its requests to
/// its own `fs` (`ulib::fs::is_own_request`: a remote file request's ICA), a page
/// `ulib::net` made for it (`LentPage::is_own`: the UDP link's socket pages), or a handle
/// to its own address space (`ulib::res` opens one around each attach and detach)?
fn machd_own(id: ResId) -> bool {
    // This machine's ids carry it (another machine's this kernel refuses anyway).
    let here = ulib::sys::core().ok();
    let machine = ulib::sys::getpid().ok().map(|p| p.machine());
    if Some(id.core()) != here || Some(id.machine()) != machine {
        return false;
    }
    let Ok(i) = res::info(id) else {
        return false;
    };
    let name = i.name();
    let vregion = i.kind == ResType::VRegion as u8;
    name.starts_with(OWN_PREFIX)
        || (vregion && (ulib::fs::is_own_request(id) || ulib::net::LentPage::is_own(id)))
        || (i.kind == ResType::VSpace as u8 && ulib::sys::getpid().is_ok_and(|me| i.detail == me.0))
}

/// What every resource `machd` opens for itself is named with.
const OWN_PREFIX: &str = "machd-";

/// A control command of machine `h.from`'s program `pid`.
fn control(
    s: &mut State,
    h: &Header,
    pid: Pid,
    id: ResId,
    cmd: u64,
    a0: u64,
    a1: u64,
) -> Result<u64, Error> {
    let user = h.user;
    let cmd = if cmd == SEM_P { SEM_TRY } else { cmd };
    let mine = |x: &Hold| {
        x.pipe == id && x.end == a0 && x.machine == h.from && x.epoch == h.epoch && x.pid == pid
    };
    if matches!(cmd, PIPE_HOLD | PIPE_DROP) && a1 != 0 && Ok(Pid(a1)) == ulib::sys::getpid() {
        // This machd's own holds are its bookkeeping's: "the caller" (0) reaches them.
        return Err(Error::Denied);
    }
    match cmd {
        PIPE_HOLD if a1 == 0 => {
            if !s.holds.iter().any(mine) {
                let program = |x: &Hold| x.machine == h.from && x.epoch == h.epoch && x.pid == pid;
                if s.holds.len() >= HOLDS_MAX {
                    // Ends of pipes closed since are forgotten first.
                    s.holds.retain(|x| res::info(x.pipe).is_ok());
                }
                if s.holds.len() >= HOLDS_MAX
                    || s.holds.iter().filter(|x| program(x)).count() >= HOLDS_PER_PROGRAM
                {
                    return Err(Error::Limit);
                }
            }
            crate::ops::as_user(user, || res::control(id, PIPE_HOLD, a0, 0))?;
            if !s.holds.iter().any(mine) {
                s.holds.push(Hold {
                    pipe: id,
                    end: a0,
                    machine: h.from,
                    epoch: h.epoch,
                    pid,
                    user,
                });
            }
            Ok(0)
        }
        PIPE_DROP if a1 == 0 => {
            let i = s.holds.iter().position(mine).ok_or(Error::NoSuchProcess)?;
            s.holds.swap_remove(i);
            if s.holds.iter().any(|x| x.pipe == id && x.end == a0) {
                // Another program of another machine still holds it through us.
                return Ok(0);
            }
            crate::ops::as_user(user, || res::control(id, PIPE_DROP, a0, 0))
        }
        _ => crate::ops::as_user(user, || res::control(id, cmd, a0, a1)),
    }
}

/// Let go of the pipe ends held for the programs `gone` picks (ended, or of a machine gone
/// down or restarted): each end no other program still holds through us is dropped.
pub fn drop_holds(s: &mut State, gone: impl Fn(u8, u32, Pid) -> bool) {
    let (out, kept): (Vec<Hold>, Vec<Hold>) = core::mem::take(&mut s.holds)
        .into_iter()
        .partition(|x| gone(x.machine, x.epoch, x.pid));
    s.holds = kept;
    let mut dropped: Vec<(ResId, u64)> = Vec::new();
    for x in out {
        let held = |k: &Hold| k.pipe == x.pipe && k.end == x.end;
        if s.holds.iter().any(held) || dropped.contains(&(x.pipe, x.end)) {
            continue;
        }
        dropped.push((x.pipe, x.end));
        // As the user it was held for: the pipe's rights are theirs, not machd's.
        let _ = crate::ops::as_user(x.user, || res::control(x.pipe, PIPE_DROP, x.end, 0));
    }
}
