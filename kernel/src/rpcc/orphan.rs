//! Answers nobody collects: a request whose requester is gone (its thread removed with its
//! process, killed or ended by another of its threads while it waited) or a notice nobody
//! waits for. The record still comes back and is freed, and what the answer leaves undone
//! is done here, as the requester would have done it on reading the answer:
//!
//! - an attach made for it (`Op::RegionAttach` answered with frames) is undone, else the
//!   region would stay counted as attached to a process that never mapped it and could
//!   never be closed;
//! - a request it sent on to an endpoint of the other core (`Op::Enqueue`: a submitted
//!   call, or a request a retiring server hands over to its successor) that was *not*
//!   queued there (an error: a full queue, the endpoint gone) has nobody left to put it
//!   back or answer it: its caller gets `Gone` and its ICA is attached nowhere
//!   (`ipc::not_queued`). A retiring server killed while it waited for that answer used to
//!   leave the request's caller waiting for ever
//!   (`fnid::retiring_server_killed_while_sending_to_another_core_loses_nothing`).
//!
//! A request that *was* queued there is that core's to answer, as always.

use super::{me, take_done, with_state, Op, Out, Waiter};
use abi::Error;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Thread `thread` was removed (its process ended): nobody will collect its answers.
/// Answers already in are dealt with now; the others when they arrive ([`drop_answer`]).
pub fn forget_waiter(thread: u32) {
    let mut left = Vec::new();
    let gone = with_state(|s| {
        s.outstanding.forget(Waiter::Thread(thread), |o| {
            if needs_care(&o.request.op) {
                // SAFETY: the reply arrived (`done`), so the owner core is done with the
                // record; only this core looks at it now.
                let answer = unsafe { (*o.request.reply.get()).take() };
                left.push((core::mem::replace(&mut o.request.op, Op::ResList), answer));
            }
        })
    });
    for (op, answer) in left {
        undone(op, answer);
    }
    me().stats.outstanding.fetch_sub(gone, Ordering::Relaxed);
}

/// Drop the answer to request `tag`, which nobody will collect (a notice, or a requester
/// that was removed while it waited), doing what it leaves undone.
pub(super) fn drop_answer(tag: u64) {
    let op = with_state(|s| {
        let o = s.outstanding.get_mut(tag).filter(|o| o.done)?;
        // The answer is in (`done`): the owner core is done with the record.
        needs_care(&o.request.op).then(|| core::mem::replace(&mut o.request.op, Op::ResList))
    });
    let answer = take_done(tag);
    if let Some(op) = op {
        undone(op, answer);
    }
}

/// Whether an answer to `op` may leave something undone.
fn needs_care(op: &Op) -> bool {
    matches!(op, Op::RegionAttach { .. } | Op::Enqueue(_))
}

/// Do what the answer `answer` to `op` leaves undone now that nobody reads it.
fn undone(op: Op, answer: Option<Result<Out, Error>>) {
    match (op, answer) {
        (Op::RegionAttach { region, .. }, Some(Ok(Out::Frames(_)))) => {
            crate::res::note_detached(core::iter::once(region));
        }
        (Op::Enqueue(incoming), Some(Err(_))) => crate::ipc::not_queued(incoming),
        _ => {}
    }
}

/// For tests: whether thread `thread` waits for the answer to a request of this core whose
/// operation `is` picks.
pub fn sends_for(thread: u32, is: impl Fn(&Op) -> bool) -> bool {
    with_state(|s| {
        s.outstanding
            .any(|o| o.waiter == Waiter::Thread(thread) && !o.done && is(&o.request.op))
    })
}
