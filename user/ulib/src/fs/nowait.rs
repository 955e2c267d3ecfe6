//! Reply-less file calls (P0 Table 4): a call whose caller need not wait for its end
//! (`write`, `close`, `unlink`) is sent and the caller goes on; the file service performs
//! it meanwhile, on its own core if it runs on another one.
//!
//! P0 added an asynchronous protocol to Agora-1 beside its rendezvous: a message whose
//! answer carries no reply data resumes its sender at once. Here the same request the
//! rendezvous call would make goes out with `SUBMIT` (`SUBMIT_CALL`) instead of `CALL`: the
//! kernel queues it at `fs` in order with this program's other requests (a later read
//! finds the write done, a later open finds the file closed), and the answer, with the
//! request's ICA, comes back into this program's completions, where [`settle`] (or the
//! next reply-less call, once [`MAX_PENDING`] are out) collects it. `fsd` is unchanged:
//! to it these are ordinary requests.
//!
//! What the caller gives up is the answer: a write's count is the one it asked for, and an
//! error (a full disk, a bad handle) is only known at [`settle`], which returns the first
//! error any of them met since the last `settle`. A `close` made this way returns before
//! the file is on the disk. A program that ends with calls out does not wait for them:
//! they are performed all the same, and each ICA, marked `CLOSE_WHEN_DETACHED`, is closed
//! when its answer finds nobody to map it. Only this machine's files: a file of another
//! machine (`mK:`) is written, closed or deleted as by the waiting calls.
//!
//! The same machinery carries other requests that need no answer each (`submit`: a
//! process moving to another machine, its pieces several at once, `ulib::mach::migrate`).
//!
//! A program that collects completions of any ticket itself (`COLLECT` with `ANY`) must
//! not mix that with these calls: it could take their answers, and [`settle`], which waits
//! for each call's own ticket, would then wait for ever.

use super::{give_back, let_go, locate, route_of, take_ica, Fd, Route, REMOTE_FD};
use crate::abi::fs::{FN_FS, FS_CLOSE, FS_ICA_SIZE, FS_UNLINK, FS_WRITE};
use crate::abi::ipc::{Msg, Submission, SUBMIT_CALL};
use crate::abi::res::ResId;
use crate::abi::Error;
use crate::cell::Local;
use crate::{fnid, ipc};
use alloc::collections::VecDeque;

/// Most reply-less calls out at once (each holds its own ICA): one more waits for the
/// oldest's answer first.
pub const MAX_PENDING: usize = 4;

/// A reply-less call out: its ticket, and its ICA (the vregion, the core that owns it).
struct Out {
    ticket: u64,
    region: ResId,
    core: usize,
}

/// The calls out, oldest first.
static OUT: Local<VecDeque<Out>> = Local::new(VecDeque::new());
/// The first error a collected call met since the last [`settle`].
static FAILED: Local<Option<Error>> = Local::new(None);

/// Write `data` (at most `FS_ICA_SIZE` bytes) to `fd` without waiting: the bytes asked,
/// which [`settle`] confirms. Another machine's file is written as [`super::write`] does.
pub fn write_nowait(fd: Fd, data: &[u8]) -> Result<usize, Error> {
    let (route, handle) = route_of(fd)?;
    if route != Route::Here {
        return super::write(fd, data);
    }
    let len = data.len().min(FS_ICA_SIZE as usize);
    send(FS_WRITE, [handle, len as u64, 0, 0, 0, 0], |b| {
        b[..len].copy_from_slice(&data[..len])
    })?;
    Ok(len)
}

/// Close `fd` without waiting (the file is on the disk once [`settle`] returns). Another
/// machine's file is closed as [`super::close`] does.
pub fn close_nowait(fd: Fd) -> Result<(), Error> {
    if fd.0 & REMOTE_FD != 0 {
        return super::close(fd);
    }
    send(FS_CLOSE, [fd.0, 0, 0, 0, 0, 0], |_| {})
}

/// Delete `name` without waiting. A name on another machine is deleted as
/// [`super::unlink`] does.
pub fn unlink_nowait(name: &str) -> Result<(), Error> {
    let (route, path) = locate(name)?;
    if route != Route::Here {
        return super::unlink(name);
    }
    if path.len() > FS_ICA_SIZE as usize {
        return Err(Error::TooLong);
    }
    send(FS_UNLINK, [0, 0, 0, path.len() as u64, 0, 0], |b| {
        b[..path.len()].copy_from_slice(path.as_bytes())
    })
}

/// Wait for every reply-less call out: `Ok` if all that were collected since the last
/// `settle` succeeded, else the first error one met.
pub fn settle() -> Result<(), Error> {
    while collect_oldest() {}
    match FAILED.with(Option::take) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Has a call collected since the last [`settle`] failed? (Its error stays for `settle`.)
pub(crate) fn failed() -> bool {
    FAILED.with(|f| f.is_some())
}

/// Note `e` as if a collected call had met it (the first error is kept).
pub(crate) fn note_failed(e: Error) {
    FAILED.with(|f| {
        f.get_or_insert(e);
    });
}

/// How many reply-less calls are out.
pub fn out() -> usize {
    OUT.with(|o| o.len())
}

/// Send request `label` with `words` to this machine's `fs`, its ICA filled by `fill`,
/// without waiting for the answer.
fn send(label: u64, words: [u64; 6], fill: impl FnOnce(&mut [u8])) -> Result<(), Error> {
    submit(fnid::lookup(FN_FS)?, super::lend(label), words, fill)
}

/// Send request `label` with `words` and a writable ICA of `FS_ICA_SIZE` bytes filled by
/// `fill` to function `server`, without waiting for the answer: the answer is collected as
/// a reply-less file call's ([`settle`]). `ulib::mach::migrate` sends a moving process's
/// pieces so, [`MAX_PENDING`] at once.
pub(crate) fn submit(
    server: crate::abi::fnid::FnId,
    label: u64,
    words: [u64; 6],
    fill: impl FnOnce(&mut [u8]),
) -> Result<(), Error> {
    while out() >= MAX_PENDING {
        collect_oldest();
    }
    let pid = crate::sys::getpid()?;
    let (region, at) = take_ica(pid)?;
    // SAFETY: attached writable at `at`, FS_ICA_SIZE bytes, by us alone until it is sent.
    fill(unsafe { core::slice::from_raw_parts_mut(at as *mut u8, FS_ICA_SIZE as usize) });
    let sub = Submission {
        kind: SUBMIT_CALL,
        target: server.0,
        msg: ipc::with_ica(Msg { label, words }, region),
        ..Submission::default()
    };
    match ipc::submit(&sub) {
        Ok(ticket) => {
            OUT.with(|o| {
                o.push_back(Out {
                    ticket,
                    region,
                    core: pid.core(),
                })
            });
            Ok(())
        }
        Err(e) => {
            // Not queued: the kernel left the ICA where it was.
            let_go(region, at);
            Err(e)
        }
    }
}

/// Collect the oldest call out (waiting for its answer): its ICA back among the spares,
/// its error noted. `false` if none was out.
fn collect_oldest() -> bool {
    let Some(o) = OUT.with(VecDeque::pop_front) else {
        return false;
    };
    let r = ipc::collect(o.ticket, u64::MAX);
    let failed = match &r {
        Ok(c) => {
            if let Some((back, at)) = ipc::ica_at(&c.msg).filter(|(r, _)| *r == o.region) {
                give_back(back, at, o.core, !ipc::ica_read_only(&c.msg));
            } else {
                // (An ICA that did not come back was closed by the kernel.)
                super::forget(o.region);
            }
            match ipc::result(c) {
                Ok(0) => None,
                Ok(code) => Some(Error::from_code(code)),
                Err(e) => Some(e),
            }
        }
        Err(e) => Some(*e),
    };
    if let Some(e) = failed {
        note_failed(e);
    }
    true
}
