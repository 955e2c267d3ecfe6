//! Answers nobody collects: a request whose requester is gone (its thread removed with its
//! process, killed or ended by another of its threads while it waited; or the process that
//! submitted it asynchronously, `SUBMIT` or its ring, ended) or a notice nobody waits for.
//! The record still comes back and is freed, and what the answer leaves undone is done
//! here, as the requester would have done it on reading the answer:
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
//!   (`fnid::retiring_server_killed_while_sending_to_another_core_loses_nothing`);
//! - a P on a semaphore of the other core (`Op::ResControl` with `SEM_P`) that waited there
//!   and was then given a unit by a V: the unit goes back (a V there, made for the same
//!   user), else it was lost with the dead waiter and a semaphore used as a lock stayed
//!   taken for ever (`lwpcheck`'s killed waiter; found by a review);
//! - a step of a migration (`Op::MigrateOut`, `Op::MigrateIn`) whose mover was killed
//!   while it waited: the kernel ends the move as the mover would have
//!   (`proc::migrate::mover_gone`: the original runs on, or is committed once its copy
//!   runs), so a move is never left open with a copy running beside its original;
//! - a child made on the other core (`Op::Spawn`, `Op::SpawnImage`) for a parent that
//!   ended while it waited: the parent never followed it, so its end told that core
//!   nothing, and the child, once ended, stayed a zombie nobody would reap, counted
//!   against its user's processes for good (found by an audit;
//!   `process::a_parent_gone_during_a_remote_spawn_leaves_no_zombie`). Its core hears the
//!   parent is gone (`proc::child_unheard`).
//!
//! A request that *was* queued there is that core's to answer, as always. A thread removed
//! with its process is removed inside the scheduler's borrow, where no answer may be given:
//! what its answers already in leave undone is kept ([`Orphan`]) and settled at the next
//! look at the rings ([`settle`], from `poll`: the tick's at the latest).

use super::{me, take_done, with_state, FlowInfo, Op, Out, Waiter};
use abi::syscall::control::{SEM_P, SEM_V};
use abi::Error;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// An answer nobody collects that leaves something undone: the request's operation, who
/// asked (its flow), the answer.
pub(super) struct Orphan(Op, FlowInfo, Option<Result<Out, Error>>);

/// Thread `thread` was removed (its process ended): nobody will collect its answers.
/// Answers already in are dealt with now (an attach undone) or at the next [`settle`];
/// the others when they arrive ([`drop_answer`]). Called inside the scheduler's borrow.
pub fn forget_waiter(thread: u32) {
    let mut attached = Vec::new();
    let gone = with_state(|s| {
        let mut left = Vec::new();
        let gone = s.outstanding.forget(Waiter::Thread(thread), |o| {
            if !needs_care(&o.request.op) {
                return;
            }
            // SAFETY: the reply arrived (`done`), so the owner core is done with the
            // record; only this core looks at it now.
            let answer = unsafe { (*o.request.reply.get()).take() };
            let op = core::mem::replace(&mut o.request.op, Op::ResList);
            match (op, answer) {
                (Op::RegionAttach { region, .. }, Some(Ok(Out::Frames(_)))) => {
                    attached.push(region);
                }
                (op, answer) => left.push(Orphan(op, o.request.flow, answer)),
            }
        });
        s.orphans.append(&mut left);
        gone
    });
    // Attaches nobody will map are undone (no scheduler state is needed for it).
    if !attached.is_empty() {
        crate::res::note_detached(attached.into_iter());
    }
    me().stats.outstanding.fetch_sub(gone, Ordering::Relaxed);
}

/// Drop the answer to request `tag`, which nobody will collect (a notice, or a requester
/// that was removed while it waited), doing what it leaves undone. Called with no borrow
/// held (from `poll`).
pub(super) fn drop_answer(tag: u64) {
    let taken = with_state(|s| {
        let o = s.outstanding.get_mut(tag).filter(|o| o.done)?;
        // The answer is in (`done`): the owner core is done with the record.
        needs_care(&o.request.op).then(|| {
            (
                core::mem::replace(&mut o.request.op, Op::ResList),
                o.request.flow,
            )
        })
    });
    let answer = take_done(tag);
    if let Some((op, flow)) = taken {
        undone(Orphan(op, flow, answer));
    }
}

/// Settle what answers of removed threads left undone (from `poll`, no borrow held).
pub(super) fn settle(orphans: Vec<Orphan>) {
    for o in orphans {
        undone(o);
    }
}

/// Whether an answer to `op` may leave something undone.
pub(super) fn needs_care(op: &Op) -> bool {
    matches!(
        op,
        Op::RegionAttach { .. }
            | Op::Enqueue(_)
            | Op::ResControl { cmd: SEM_P, .. }
            | Op::MigrateOut(_)
            | Op::MigrateIn(_)
            | Op::Spawn { .. }
            | Op::SpawnImage { .. }
            | Op::ResOpen { .. }
    )
}

/// Do what an answer nobody reads leaves undone.
fn undone(Orphan(op, flow, answer): Orphan) {
    match (op, answer) {
        (Op::RegionAttach { region, .. }, Some(Ok(Out::Frames(_)))) => {
            crate::res::note_detached(core::iter::once(region));
        }
        (Op::Enqueue(incoming), Some(Err(_))) => crate::ipc::not_queued(incoming),
        (Op::ResControl { id, cmd: SEM_P, .. }, Some(Ok(_))) => {
            // The unit back, given as the user who took it (its rights are checked there).
            let saved = crate::res::snapshot_flow();
            crate::res::adopt_flow(&flow);
            super::notice(
                id.core(),
                Op::ResControl {
                    id,
                    cmd: SEM_V,
                    a: 0,
                    b: 0,
                },
            );
            crate::res::put_back_flow(&saved);
        }
        (op @ (Op::MigrateOut(_) | Op::MigrateIn(_)), answer) => {
            crate::proc::migrate::mover_gone(&op, &flow, answer.as_ref());
        }
        (Op::Spawn { .. } | Op::SpawnImage { .. }, Some(Ok(Out::Pid(child))))
        | (Op::ResOpen { .. }, Some(Ok(Out::Opened(_, Some(child))))) => {
            // A process made for the requester there (by SPAWN, or by OPEN of a process
            // resource, which makes the opener its parent as a spawn does).
            if let Some(parent) = flow.pid {
                crate::proc::child_unheard(parent, child);
            }
        }
        _ => {}
    }
}
