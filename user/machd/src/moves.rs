//! Processes moving between machines (`abi::mach::OP_MOVE`; issue 17's migration between
//! machines, P0's processes on either PC): both halves.
//!
//! The kernel writes a stopped process out as an image (`MIGRATE_EXPORT`, by the program
//! that moves it: `ulib::mach::migrate`) and reads one back in (`MIGRATE_IMPORT`); between
//! them the image travels here, in pieces of at most `RES_REMOTE_MAX` bytes, each an mrpc
//! request [`R_MOVE`] (performed once, sent again when lost).
//!
//! **Here, for a local program** ([`local`]): a piece, the start or a drop becomes an
//! `R_MOVE` request; answered as `OP_RES` is (`resops::answer`: the value, the machine's
//! life).
//!
//! **There, for the other machine** ([`perform`], on the network thread): pieces gather in
//! an [`Arriving`] image, in order: the requester has several pieces out at once
//! (`ulib::mach::migrate`), so one lost and sent again comes after later ones, which wait
//! (at most `MOVE_AHEAD_MAX` of them, within as many pieces' bytes of the end) until
//! the gap is filled; a piece at or below the end, or too far ahead, is refused. The
//! start makes
//! `MIGRATE_IMPORT` *acting as the requester's user* (the kernel gives the process that
//! user, never one in the image) on the core asked for, and the process is noted as
//! spawned for that user, so the requester's `wait` and `kill` reach it as a remote
//! spawn's, at an application's priority at most (a remote spawn's). A start asked again
//! (its answer lost) answers the same pid, and a drop after a start kills the process it
//! made, so a move given up never leaves two copies. At most `MOVES_MAX` images arrive at
//! once, two per program, each grown as its pieces come; one never started goes with its
//! program (`FS_CLOSE_ALL`), its machine (down or restarted), or, when room is needed,
//! `MOVE_STALE_NS` after its first piece.
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_MOVE`] | op, token, offset or core word, whole length, the requesting pid (u64 each), then a piece's bytes (a program's start: its `PROG\0ARG\0...`) | the value (u64: a start's new pid) |
//!
//! A program's start (`MOVE_SPAWN`, `run /BIN/PROG -m M`) takes the image as an ELF
//! executable and starts it as `R_SPAWN` starts a program of the boot archive
//! (`ops::start`: its output and input relayed as the core word asks).

use crate::files::{Kind, Waiting};
use crate::ops::{word, words};
use crate::State;
use alloc::vec::Vec;
use mrpc::Header;
use ulib::abi::ipc::Received;
use ulib::abi::mach::{
    self, res_parts, MOVES_MAX, MOVE_AHEAD_MAX, MOVE_DROP, MOVE_PUT, MOVE_SPAWN, MOVE_STALE_NS,
    MOVE_START, RES_REMOTE_MAX,
};
use ulib::abi::res::UserId;
use ulib::abi::syscall::MAX_MOVE_IMAGE;
use ulib::abi::{Error, Pid};
use ulib::sys;

pub const R_MOVE: u16 = 12;
/// The request's words before its bytes.
const HEAD: usize = 5 * 8;

/// How long a start or a drop is asked for before it ends `TimedOut`.
const OUTCOME_DEADLINE_NS: u64 = 10_000_000_000;
/// Most images arriving from one program at once.
const MOVES_PER_PROGRAM: usize = 2;
/// Moves started here remembered, so that a start asked again (its answer lost) gets the
/// same pid and a drop after a start ends the process it started.
const STARTED_KEPT: usize = 16;

/// An image arriving from a program of another machine.
pub struct Arriving {
    machine: u8,
    epoch: u32,
    pid: Pid,
    token: u64,
    len: usize,
    bytes: Vec<u8>,
    /// Pieces that came before the ones in front of them: (offset, bytes).
    ahead: Vec<(u64, Vec<u8>)>,
    /// When its first piece came: an image not whole `MOVE_STALE_NS` later may go.
    since: u64,
}

/// A move started here: who asked (machine, life, program, token), and its process.
pub struct Started {
    machine: u8,
    epoch: u32,
    pid: Pid,
    token: u64,
    new: Pid,
}

/// `OP_MOVE` from a local program (`r`, acting as `user`; its ICA writable): started, or
/// answered at once with an error (the ICA back either way).
pub fn local(s: &mut State, r: &Received, user: u32) {
    let Some((region, at)) = crate::files::request_ica(r) else {
        return;
    };
    let give_back = |e: Error| crate::files::give_back(r, region, e);
    let w = r.msg.words;
    let (m, op, len, _) = res_parts(w[0]);
    if m >= u64::from(s.n) || m == u64::from(s.me) || !(MOVE_PUT..=MOVE_SPAWN).contains(&op) {
        return give_back(Error::InvalidArgument);
    }
    // Bytes come with a piece (the image's) and a program's start (its name and words).
    let carries = matches!(op, MOVE_PUT | MOVE_SPAWN);
    if w[1] == 0 || (!carries && len != 0) || (op == MOVE_SPAWN && len == 0) {
        return give_back(Error::InvalidArgument);
    }
    if len > RES_REMOTE_MAX {
        return give_back(Error::TooLong);
    }
    // SAFETY: the request's ICA is attached at `at` (a vregion: at least a page), ours
    // until we answer; `len` is at most 896 bytes.
    let piece = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
    let mut payload = words(&[op, w[1], w[2], w[3], r.sender.0]);
    payload.extend_from_slice(piece);
    if op == MOVE_PUT && w[2] == 0 {
        // An image there is forgotten when this program ends (noted before the answer).
        crate::files::note_opener(s, r.sender, m as u8);
    }
    let waiting = Waiting {
        region,
        at,
        kind: Kind::Res,
    };
    // A start copies the image into a process there, and a drop may end one: their
    // outcome matters more than a piece's, so they are given longer.
    let deadline = match op {
        MOVE_PUT => mach::DEFAULT_DEADLINE_NS,
        _ => OUTCOME_DEADLINE_NS,
    };
    let call = ((m as u8, R_MOVE, payload), deadline, None);
    if let Err(e) = s.start(r.request, mach::OP_MOVE, call, user, Some(waiting)) {
        give_back(e);
    }
}

/// `R_MOVE` from machine `h.from`, performed here at once: the reply's payload.
pub fn perform(s: &mut State, h: &Header, p: &[u8]) -> Result<Vec<u8>, Error> {
    let [op, token, at, len, pid] = {
        let mut w = [0u64; 5];
        for (i, x) in w.iter_mut().enumerate() {
            *x = word(p, i)?;
        }
        w
    };
    let piece = p.get(HEAD..).ok_or(Error::InvalidArgument)?;
    let pid = Pid(pid);
    let now = crate::now();
    let program = |m: u8, e: u32, p: Pid| m == h.from && e == h.epoch && p == pid;
    let mine = |a: &Arriving| program(a.machine, a.epoch, a.pid) && a.token == token;
    let started = |x: &Started| program(x.machine, x.epoch, x.pid) && x.token == token;
    match op {
        MOVE_PUT => {
            if len == 0 {
                return Err(Error::InvalidArgument);
            }
            if len > MAX_MOVE_IMAGE {
                return Err(Error::TooLong);
            }
            let len = len as usize;
            if piece.is_empty() || at.saturating_add(piece.len() as u64) > len as u64 {
                return Err(Error::InvalidArgument);
            }
            if at == 0 && !s.arriving.iter().any(mine) {
                // When the places are taken, images not whole long after they began go;
                // one program holds at most MOVES_PER_PROGRAM of the places.
                if s.arriving.len() >= MOVES_MAX {
                    s.arriving
                        .retain(|a| now.saturating_sub(a.since) < MOVE_STALE_NS);
                }
                let its = s
                    .arriving
                    .iter()
                    .filter(|a| program(a.machine, a.epoch, a.pid))
                    .count();
                if s.arriving.len() >= MOVES_MAX || its >= MOVES_PER_PROGRAM {
                    return Err(Error::Busy);
                }
                s.arriving.push(Arriving {
                    machine: h.from,
                    epoch: h.epoch,
                    pid,
                    token,
                    len,
                    // Grown as pieces come: nothing is set aside for what never comes.
                    bytes: Vec::new(),
                    ahead: Vec::new(),
                    since: now,
                });
            }
            let a = s
                .arriving
                .iter_mut()
                .find(|a| mine(a))
                .ok_or(Error::NoSuchResource)?;
            let end = a.bytes.len() as u64;
            if a.len != len || at < end {
                return Err(Error::InvalidArgument);
            }
            if at > end {
                // Ahead of a piece still to come: held until it has.
                let reach = (MOVE_AHEAD_MAX * RES_REMOTE_MAX) as u64;
                if a.ahead.len() >= MOVE_AHEAD_MAX
                    || at - end > reach
                    || a.ahead.iter().any(|(o, _)| *o == at)
                {
                    return Err(Error::InvalidArgument);
                }
                let mut held = Vec::new();
                held.try_reserve(piece.len()).map_err(|_| Error::NoMemory)?;
                held.extend_from_slice(piece);
                a.ahead.push((at, held));
                return Ok(words(&[end]));
            }
            a.bytes
                .try_reserve(piece.len())
                .map_err(|_| Error::NoMemory)?;
            a.bytes.extend_from_slice(piece);
            // The pieces that waited for this one, in order (each was checked to lie within
            // the image when it came); one that now overlaps what came (pieces of two
            // sizes) can never fit: it goes.
            while let Some(i) = a.ahead.iter().position(|(o, _)| *o == a.bytes.len() as u64) {
                a.bytes
                    .try_reserve(a.ahead[i].1.len())
                    .map_err(|_| Error::NoMemory)?;
                let (_, next) = a.ahead.swap_remove(i);
                a.bytes.extend_from_slice(&next);
            }
            let end = a.bytes.len() as u64;
            a.ahead.retain(|(o, _)| *o > end);
            Ok(words(&[end]))
        }
        MOVE_START | MOVE_SPAWN => {
            if let Some(x) = s.started.iter().find(|x| started(x)) {
                // Asked again (its answer was lost, or came too late): the same process.
                return Ok(words(&[x.new.0]));
            }
            let i = s
                .arriving
                .iter()
                .position(mine)
                .ok_or(Error::NoSuchResource)?;
            let mut a = s.arriving.swap_remove(i);
            if a.bytes.len() != a.len {
                return Err(Error::InvalidArgument);
            }
            let new = if op == MOVE_SPAWN {
                // A program: started as a remote spawn is (its streams as the core word
                // says), from the image (the kernel checks it as any `SPAWN_IMAGE`'s).
                crate::ops::start(s, h.user, at, piece, Some(&a.bytes))?
            } else {
                let core = match at & mach::ANY_CORE {
                    mach::ANY_CORE => crate::ops::default_core(),
                    c => usize::try_from(c).map_err(|_| Error::NoSuchCore)?,
                };
                at_most_app(&mut a.bytes);
                crate::ops::room_for(s, h.user)?;
                let new = crate::ops::as_user(h.user, || sys::migrate_import(&a.bytes, core))?;
                s.spawned.push((new, UserId(h.user)));
                new
            };
            if s.started.len() >= STARTED_KEPT {
                s.started.remove(0);
            }
            s.started.push(Started {
                machine: h.from,
                epoch: h.epoch,
                pid,
                token,
                new,
            });
            Ok(words(&[new.0]))
        }
        MOVE_DROP => {
            s.arriving.retain(|a| !mine(a));
            // A move given up after its start (its answer lost): the copy goes.
            if let Some(i) = s.started.iter().position(started) {
                let new = s.started[i].new;
                match crate::ops::as_user(h.user, || sys::kill(new)) {
                    Ok(()) | Err(Error::NoSuchProcess) => {}
                    // Kept, so that the drop asked again finds it.
                    Err(e) => return Err(e),
                }
                s.started.swap_remove(i);
                // Nobody will wait for it: collected now if it has ended (a kill of another
                // core's process has, once it returns), and a program's relayed pipes go
                // with it (a review found them kept for good).
                if sys::wait_timeout(Some(new), 0).is_ok() {
                    s.spawned.retain(|(q, _)| *q != new);
                }
                crate::ops::drop_pipes_of(s, new);
            }
            Ok(words(&[0]))
        }
        _ => Err(Error::NoSuchCall),
    }
}

/// A process another machine moves here runs at most at an application's priority, as a
/// remote spawn's does: the image's own (a driver's, a server's) is not taken from the
/// network. (The kernel refuses only a priority above the importer's, and `machd` is a
/// server.)
fn at_most_app(image: &mut [u8]) {
    let Some(bytes) = image.get_mut(..procimage::pages_at()) else {
        return;
    };
    let mut h: procimage::Header = bytemuck::pod_read_unaligned(bytes);
    h.priority = h.priority.max(ulib::abi::Priority::App as u64);
    bytes.copy_from_slice(bytemuck::bytes_of(&h));
}

/// Forget the images arriving from the programs `gone` picks (ended, or of a machine gone
/// down or restarted), and the moves they started (their processes run on).
pub fn forget(s: &mut State, gone: impl Fn(u8, u32, Pid) -> bool) {
    s.arriving.retain(|a| !gone(a.machine, a.epoch, a.pid));
    s.started.retain(|x| !gone(x.machine, x.epoch, x.pid));
}
