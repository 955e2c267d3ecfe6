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
//! an [`Arriving`] image, in order (a piece not at the end is refused); the start makes
//! `MIGRATE_IMPORT` *acting as the requester's user* (the kernel gives the process that
//! user, never one in the image) on the core asked for, and the process is noted as
//! spawned for that user, so the requester's `wait` and `kill` reach it as a remote
//! spawn's. At most `MOVES_MAX` images arrive at once; one never started goes with its
//! program (`FS_CLOSE_ALL`), its machine (down or restarted), or, when room is needed,
//! after `MOVE_STALE_NS` without a piece.
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_MOVE`] | op, token, offset or core, whole length, the requesting pid (u64 each), then a piece's bytes | the value (u64: a start's new pid) |

use crate::files::{Kind, Waiting};
use crate::ops::{word, words};
use crate::State;
use alloc::vec::Vec;
use mrpc::Header;
use ulib::abi::ipc::Received;
use ulib::abi::mach::{
    self, res_parts, MOVES_MAX, MOVE_DROP, MOVE_PUT, MOVE_STALE_NS, MOVE_START, RES_REMOTE_MAX,
};
use ulib::abi::res::UserId;
use ulib::abi::syscall::MAX_MOVE_IMAGE;
use ulib::abi::{Error, Pid};
use ulib::sys;

pub const R_MOVE: u16 = 12;
/// The request's words before its bytes.
const HEAD: usize = 5 * 8;

/// An image arriving from a program of another machine.
pub struct Arriving {
    machine: u8,
    epoch: u32,
    pid: Pid,
    token: u64,
    len: usize,
    bytes: Vec<u8>,
    /// When its last piece came.
    last: u64,
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
    if m >= u64::from(s.n) || m == u64::from(s.me) || !(MOVE_PUT..=MOVE_DROP).contains(&op) {
        return give_back(Error::InvalidArgument);
    }
    if w[1] == 0 || (op != MOVE_PUT && len != 0) {
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
    let call = ((m as u8, R_MOVE, payload), mach::DEFAULT_DEADLINE_NS, None);
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
    let mine = |a: &Arriving| {
        a.machine == h.from && a.epoch == h.epoch && a.pid == pid && a.token == token
    };
    match op {
        MOVE_PUT => {
            if len == 0 {
                return Err(Error::InvalidArgument);
            }
            if len > MAX_MOVE_IMAGE {
                return Err(Error::TooLong);
            }
            let len = len as usize;
            if at.saturating_add(piece.len() as u64) > len as u64 {
                return Err(Error::InvalidArgument);
            }
            if at == 0 && !s.arriving.iter().any(mine) {
                if s.arriving.len() >= MOVES_MAX {
                    s.arriving
                        .retain(|a| now.saturating_sub(a.last) < MOVE_STALE_NS);
                }
                if s.arriving.len() >= MOVES_MAX {
                    return Err(Error::Busy);
                }
                let mut bytes = Vec::new();
                bytes.try_reserve_exact(len).map_err(|_| Error::NoMemory)?;
                s.arriving.push(Arriving {
                    machine: h.from,
                    epoch: h.epoch,
                    pid,
                    token,
                    len,
                    bytes,
                    last: now,
                });
            }
            let a = s
                .arriving
                .iter_mut()
                .find(|a| mine(a))
                .ok_or(Error::NoSuchResource)?;
            if a.len != len || at != a.bytes.len() as u64 {
                return Err(Error::InvalidArgument);
            }
            a.bytes.extend_from_slice(piece);
            a.last = now;
            Ok(words(&[a.bytes.len() as u64]))
        }
        MOVE_START => {
            let i = s
                .arriving
                .iter()
                .position(mine)
                .ok_or(Error::NoSuchResource)?;
            let a = s.arriving.swap_remove(i);
            if a.bytes.len() != a.len {
                return Err(Error::InvalidArgument);
            }
            let core = match at & mach::ANY_CORE {
                mach::ANY_CORE => crate::ops::default_core(),
                c => usize::try_from(c).map_err(|_| Error::NoSuchCore)?,
            };
            let new = crate::ops::as_user(s, h.user, || sys::migrate_import(&a.bytes, core))?;
            s.spawned.push((new, UserId(h.user)));
            Ok(words(&[new.0]))
        }
        MOVE_DROP => {
            s.arriving.retain(|a| !mine(a));
            Ok(words(&[0]))
        }
        _ => Err(Error::NoSuchCall),
    }
}

/// Forget the images arriving from the programs `gone` picks (ended, or of a machine gone
/// down or restarted).
pub fn forget(s: &mut State, gone: impl Fn(u8, u32, Pid) -> bool) {
    s.arriving.retain(|a| !gone(a.machine, a.epoch, a.pid));
}
