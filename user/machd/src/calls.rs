//! Calls to any function on another machine (`abi::mach::OP_CALL`; P4's inter-machine
//! RPCC, "the same flow over a network", for every server rather than only the ones
//! `machd` knows): both halves.
//!
//! **Here, for a local program** ([`local`], [`answer`]): the function's name, the request's
//! label and words and at most `CALL_REMOTE_MAX` bytes of data, all taken from the
//! program's ICA, become an [`R_CALL`] request to the other machine; the ICA waits here and
//! gets the server's reply words and bytes before it goes back.
//!
//! **There, for the other machine** ([`perform`], [`worker`]): a call worker looks the name
//! up, puts the data in an ICA of its own (zeroed first: the page served another caller
//! before), and submits the call *acting as the requester's user* (`THREAD_SETUSER` around the
//! `SUBMIT`, under the state's lock, as `R_SPAWN` does), so the server sees that user in
//! `Received::sender_user`; then it collects the answer for at most the request's timeout.
//! A call that times out is given up (the server may still answer: its completion is
//! collected and let go later, [`collect_given_up`]).
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_CALL`] | label, `call_word`, timeout ns, the six request words (u64 each), then the name and the data | the server's reply value, its reply label (without the ICA flags), its six reply words (u64 each), then the bytes of the ICA it gave back |
//!
//! Only functions named `pub.*` (`abi::mach::CALLABLE_PREFIX`) are reached; others are
//! `NotSupported`. Every call reaches its server from this `machd`, so a server that tells
//! its callers apart by process (`net.udp` its ports, `fs` its open files) or checks nobody
//! (`blk`) would act for any remote caller with `machd`'s ports, files or disk: a server
//! says by its name that it tells callers apart by user only. (A review found the first
//! version, which refused only `fs` and `mach`, let any machine close `machd`'s own UDP
//! port through `net.udp`.)
//!
//! Pages: each worker keeps one for its calls' ICAs, marked `CLOSE_WHEN_DETACHED`, so one
//! a server keeps, or one that comes back after its call was given up on, is closed once
//! let go. Answers given up on are collected at every heartbeat and before every call; a
//! call that waited in the queue longer than its timeout is not made (its caller has
//! given up), and while [`GIVEN_UP_MAX`] answers are still out new calls are `Busy`.
//!
//! Workers: a free one takes the oldest waiting call whose user may have one more under
//! way (`shares::pick`: a user other than the administrator at most half of the
//! [`CALL_WORKERS`], all such users three quarters). Before, the two workers took the
//! calls in order, so one user's calls to a slow server held both and every other call
//! waited behind them, until its timeout.

use crate::files::{Kind, Waiting};
use crate::ops::{word, words};
use crate::{with, State};
use alloc::format;
use alloc::vec::Vec;
use mrpc::Header;
use ulib::abi::ipc::{Msg, Received, Submission, ICA_AT_WORD, ICA_ID_WORD, SUBMIT_CALL};
use ulib::abi::mach::{
    self, call_parts, CALL_NAME_AT, CALL_NAME_MAX, CALL_REMOTE_MAX, CALL_WORDS_AT,
    DEFAULT_DEADLINE_NS,
};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, res, sem, sys};

pub const R_CALL: u16 = 10;
/// Threads making other machines' calls. A user other than the administrator has at most
/// half of them making its calls at once, all such users three quarters
/// (`shares::pick`): one user's calls to a slow server hold no more, and the
/// administrator's calls always find a worker not held by other users.
pub const CALL_WORKERS: u64 = 4;
/// How long a free worker waits before it looks again when every waiting call's user has
/// its share of the workers making its calls.
const SHARE_WAIT_NS: u64 = 5_000_000;
/// Most calls queued here: as many as the other machines may have in flight to this one.
const QUEUE_MAX: usize = mrpc::WINDOW as usize * (mach::MAX_MACHINES - 1);
/// Most calls given up on whose answer has not come yet; beyond, new calls are `Busy`
/// (each may hold a page of this process until its server answers).
const GIVEN_UP_MAX: usize = 32;
/// The page of a call's ICA.
const PAGE: usize = 4096;
/// The request's words before the name: label, call word, timeout, six words.
const HEAD: usize = 9 * 8;

/// `OP_CALL` from a local program (`r`, acting as `user`): started, or answered at once
/// with an error (the ICA back either way).
pub fn local(s: &mut State, r: &Received, user: u32) {
    let Some((region, at)) = crate::files::request_ica(r) else {
        return;
    };
    let give_back = |e: Error| crate::files::give_back(r, region, e);
    let w = r.msg.words;
    let (name_len, data_len, wanted, with_ica) = call_parts(w[2]);
    let timeout = if w[3] == 0 { DEFAULT_DEADLINE_NS } else { w[3] };
    let m = w[0];
    if m >= u64::from(s.n)
        || m == u64::from(s.me)
        || name_len == 0
        || timeout > mach::DEADLINE_MAX_NS
    {
        return give_back(Error::InvalidArgument);
    }
    if name_len > CALL_NAME_MAX || data_len > CALL_REMOTE_MAX || wanted > CALL_REMOTE_MAX {
        return give_back(Error::TooLong);
    }
    if !with_ica && (data_len > 0 || wanted > 0) {
        return give_back(Error::InvalidArgument);
    }
    // SAFETY: the request's ICA is attached at `at` (a vregion: at least a page), ours
    // until we answer; CALL_NAME_AT + name + data is at most 976 bytes.
    let page = unsafe { core::slice::from_raw_parts(at as *const u8, PAGE) };
    let mut payload = words(&[w[1], w[2], timeout]);
    payload.extend_from_slice(&page[CALL_WORDS_AT..CALL_WORDS_AT + 48]);
    let rest = &page[CALL_NAME_AT..CALL_NAME_AT + name_len + data_len];
    if core::str::from_utf8(&rest[..name_len]).is_err() {
        return give_back(Error::InvalidArgument);
    }
    payload.extend_from_slice(rest);
    let waiting = Waiting {
        region,
        at,
        kind: Kind::Call,
    };
    // The requester waits for the server's timeout and a round trip's margin more, so
    // that a call timing out there is answered `TimedOut` from there.
    let call = (
        (m as u8, R_CALL, payload),
        timeout + DEFAULT_DEADLINE_NS,
        None,
    );
    if let Err(e) = s.start(r.request, mach::OP_CALL, call, user, Some(waiting)) {
        give_back(e);
    }
}

/// The answer to a local caller's `OP_CALL` (`result`: the reply's payload): the server's
/// words and bytes into the ICA, and back.
pub fn answer(request: u64, w: Waiting, result: Result<Vec<u8>, Error>) {
    let parsed = result.and_then(|p| {
        let (value, label) = (word(&p, 0)?, word(&p, 1)?);
        let bytes = p.get(64..).ok_or(Error::InvalidArgument)?;
        if bytes.len() > CALL_REMOTE_MAX {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: the caller's ICA, attached at `at`, at least a page, ours until the
        // reply below; 48 + 896 bytes fit.
        let page = unsafe { core::slice::from_raw_parts_mut(w.at as *mut u8, PAGE) };
        page[CALL_WORDS_AT..CALL_WORDS_AT + 48].copy_from_slice(&p[16..64]);
        page[CALL_NAME_AT..CALL_NAME_AT + bytes.len()].copy_from_slice(bytes);
        Ok([bytes.len() as u64, value, label, 0, 0, 0])
    });
    crate::files::answer_words(request, w.region, parsed);
}

/// `R_CALL` from machine `h.from`: queued for a call worker (`None`), or refused at once.
pub fn perform(s: &mut State, h: &Header, p: &[u8]) -> Option<Result<Vec<u8>, Error>> {
    if p.len() < HEAD {
        return Some(Err(Error::InvalidArgument));
    }
    // (Not shared out by user: the requesting machines' window shares bound each user's
    // calls in flight to this one below any share of this queue, 3 x 16 of its 96.)
    if s.call_jobs.len() >= QUEUE_MAX || s.given_up.len() >= GIVEN_UP_MAX {
        return Some(Err(Error::Busy));
    }
    s.call_jobs.push_back((*h, p.to_vec(), crate::now()));
    match crate::call_jobs_sem().map(sem::v) {
        Some(Ok(())) => None,
        _ => {
            s.call_jobs.pop_back();
            Some(Err(Error::Busy))
        }
    }
}

/// A call worker thread (`index` of [`CALL_WORKERS`]): makes the calls, one at a time,
/// keeping one page for their ICAs while servers give it back.
pub fn worker(index: u64) -> u64 {
    let Some(jobs) = crate::call_jobs_sem() else {
        return 1;
    };
    let mut page = None;
    let mut made = 0;
    loop {
        if sem::p(jobs).is_err() {
            let _ = sys::sleep_ns(10_000_000);
            continue;
        }
        let picked = with(|s| {
            collect_given_up(s);
            if s.call_jobs.is_empty() {
                return None;
            }
            let users = s.call_jobs.iter().map(|(h, _, _)| h.user);
            let i = shares::pick(
                CALL_WORKERS as usize,
                users,
                s.calls_under_way.iter().copied(),
            );
            let job = i.and_then(|i| s.call_jobs.remove(i));
            if let Some((h, _, _)) = &job {
                s.calls_under_way.push(h.user);
            }
            Some(job)
        });
        let (h, p, asked) = match picked {
            None => continue,
            Some(Some(job)) => job,
            Some(None) => {
                // Every waiting call's user has its share under way: this worker's turn is
                // given back, and it looks again once one may have ended.
                let _ = sem::v(jobs);
                let _ = sys::sleep_ns(SHARE_WAIT_NS);
                continue;
            }
        };
        let r = match word(&p, 2) {
            // Its caller has given up by now (it waits the timeout and a margin): not made.
            Ok(timeout) if crate::now().saturating_sub(asked) >= timeout => Err(Error::TimedOut),
            // Too many answers given up on are still out (each may hold a page here).
            _ if with(|s| s.given_up.len()) >= GIVEN_UP_MAX => Err(Error::Busy),
            _ => call(&h, &p, &mut page, (index, &mut made)),
        };
        with(|s| {
            if let Some(i) = s.calls_under_way.iter().position(|&u| u == h.user) {
                s.calls_under_way.swap_remove(i);
            }
            s.finish(&h, &r);
        });
    }
}

/// A page for a call's ICA: the worker's own (zeroed: it carried another caller's bytes),
/// or a new one (`(worker, pages made so far)` names it).
fn take_page(
    page: &mut Option<(ResId, u64)>,
    (worker, made): (u64, &mut u64),
) -> Result<(ResId, u64), Error> {
    if let Some((region, at)) = page.take() {
        // SAFETY: the worker's page, attached writable at `at`, PAGE bytes, not lent out.
        unsafe { core::ptr::write_bytes(at as *mut u8, 0, PAGE) };
        return Ok((region, at));
    }
    *made += 1;
    let region = res::open_fresh(
        &format!("here/vregion/machd-call-{worker}"),
        &(PAGE as u64).to_le_bytes(),
        Rights::OWNER_ALL,
    )?;
    // Where this worker's pages go: apart from every other worker's and from `files`'.
    let at = 0x0000_5c00_0000_0000 + (worker << 32) + (*made % 1024) * PAGE as u64;
    if let Err(e) = res::attach_here(region, at, true) {
        let _ = res::close(region);
        return Err(e);
    }
    // Closed by the kernel once attached nowhere: a page a server keeps, or that comes
    // back in an answer given up on, goes when it is let go, not with `machd`.
    if let Err(e) = res::close_when_detached(region) {
        let _ = res::detach_here(at);
        let _ = res::close(region);
        return Err(e);
    }
    Ok((region, at))
}

/// Let go of an ICA a server handed this process (attached at `at`), not the worker's page.
fn let_go(region: ResId, at: u64) {
    let _ = res::detach_here(at);
    let _ = res::close(region);
}

/// Make call `p` of machine `h.from`: the reply's payload.
fn call(
    h: &Header,
    p: &[u8],
    page: &mut Option<(ResId, u64)>,
    worker: (u64, &mut u64),
) -> Result<Vec<u8>, Error> {
    let (label, cw, timeout) = (word(p, 0)?, word(p, 1)?, word(p, 2)?);
    let mut w = [0u64; 6];
    for (i, x) in w.iter_mut().enumerate() {
        *x = word(p, 3 + i)?;
    }
    let (name_len, data_len, wanted, with_ica) = call_parts(cw);
    let rest = &p[HEAD..];
    let ok = (1..=CALL_NAME_MAX).contains(&name_len)
        && data_len <= CALL_REMOTE_MAX
        && wanted <= CALL_REMOTE_MAX
        && rest.len() == name_len + data_len
        && (1..=mach::DEADLINE_MAX_NS).contains(&timeout)
        && (with_ica || data_len + wanted == 0);
    if !ok {
        return Err(Error::InvalidArgument);
    }
    let name = core::str::from_utf8(&rest[..name_len]).map_err(|_| Error::InvalidArgument)?;
    if !name.starts_with(mach::CALLABLE_PREFIX) {
        return Err(Error::NotSupported);
    }
    let target = fnid::lookup(name)?;
    // The label's ICA flags are this worker's to set.
    let mut msg = Msg {
        label: label & !(ulib::abi::ipc::MSG_ICA | ulib::abi::ipc::MSG_ICA_READ_ONLY),
        words: w,
    };
    let lent = if with_ica {
        let (region, at) = take_page(page, worker)?;
        // SAFETY: the page is attached writable at `at`, PAGE bytes; data_len <= 896.
        unsafe { core::slice::from_raw_parts_mut(at as *mut u8, data_len) }
            .copy_from_slice(&rest[name_len..]);
        msg = ipc::with_ica(msg, region);
        Some((region, at))
    } else {
        None
    };
    let sub = Submission {
        kind: SUBMIT_CALL,
        target: target.0,
        args: [0; 4],
        msg,
    };
    let ticket = match with(|_| crate::ops::as_user(h.user, || ipc::submit(&sub))) {
        Ok(t) => t,
        Err(e) => {
            // Refused before anything moved: the page is still ours, where it was.
            *page = lent;
            return Err(e);
        }
    };
    let c = match ipc::collect(ticket, timeout) {
        Ok(c) => c,
        Err(e) => {
            if e == Error::TimedOut {
                with(|s| s.given_up.push(ticket));
            }
            return Err(e);
        }
    };
    let mut bytes = Vec::new();
    let mut reply = c.msg.words;
    if let Some((back, at)) = ipc::ica_at(&c.msg) {
        // SAFETY: the ICA the server gave back is attached at `at`, a vregion of at least
        // a page; `wanted` <= 896.
        bytes.extend_from_slice(unsafe { core::slice::from_raw_parts(at as *const u8, wanted) });
        match lent {
            Some((region, _)) if region == back && !ipc::ica_read_only(&c.msg) => {
                *page = Some((back, at));
            }
            _ => let_go(back, at),
        }
        reply[ICA_ID_WORD] = 0;
        reply[ICA_AT_WORD] = 0;
    } else if let Some((region, _)) = lent {
        // The server kept it, or ended holding it (then it is detached, and ours to close).
        let _ = res::close(region);
    }
    if c.status != 0 {
        return Err(Error::from_code(c.status));
    }
    let mut out = words(&[c.value, ipc::label(&c.msg)]);
    out.extend_from_slice(&words(&reply));
    out.extend_from_slice(&bytes);
    Ok(out)
}

/// Collect the answers of calls given up on that have come since (at every heartbeat and
/// before every call): each ICA in them is let go (a page of ours closes then). Those
/// still out stay noted.
pub fn collect_given_up(s: &mut State) {
    s.given_up.retain(|&t| match ipc::collect(t, 0) {
        Ok(c) => {
            if let Some((region, at)) = ipc::ica_at(&c.msg) {
                let_go(region, at);
            }
            false
        }
        Err(Error::TimedOut) => true,
        Err(_) => false,
    });
}
