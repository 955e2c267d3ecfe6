//! ICAs on the request path (P3's "peel off and paste"; the contract is in `abi::ipc`): a
//! request or a reply may carry one vregion its sender has attached, which moves from the
//! sender's address space to the receiver's with the same frames, no copy.
//!
//! A pass has three steps, so that a failure leaves the sender as it was:
//! 1. [`take`], in the sender's system call: its mapping is taken out of its address space
//!    (`VSpace::take_attachment`), then the vregion's core marks it passed, which it refuses
//!    unless that mapping was its only attachment (`res::vregion::pass`). A mapping that
//!    came as an ICA needs no mark: its vregion is passed already, and while passed nobody
//!    can attach it, so that mapping is its only one. A holder passing it on or back does
//!    not ask the vregion's core (one RPCC call saved when that core is another).
//! 2. The request is queued, or the answer reaches the caller, on the receiver's core:
//!    [`land`] maps the frames in the receiver's ICA window. The vregion's attachment count
//!    is not touched on the way: the one attachment moves.
//! 3. If the request cannot be queued, [`give_back`] maps it again where it was (its frames
//!    asked again from the vregion's core: the rare path pays, not every pass) and undoes
//!    the mark. If an answer cannot land (the caller ended, no room), [`lost`] counts the
//!    attachment gone: the vregion is ordinary again, detached, for its creator to attach
//!    or close (nothing leaks).
//!
//! Besides, the ICA-carrying cases of the request path live here, out of its hot code: a
//! `REPLY` passing one ([`reply`]), an answer's landing ([`land_answer`]), and the requests
//! of a closed endpoint ([`unmap_untaken`]).
//!
//! The frames stay in the pool of the vregion's core, whichever cores sender and receiver
//! live on: only the mark (one RPCC call when the vregion lives on another core than the
//! sender) and the frame list (inside the request) travel.
//!
//! **Lending read-only** (`MSG_ICA_READ_ONLY` set by a sender whose mapping is writable):
//! the [`Ica`] carries the lender; [`land`] maps it read-only everywhere but in the lender,
//! where it lands writable again; the holders' address spaces remember the lender with the
//! attachment (`VSpace::lent`), so a pass on or back keeps it.

use super::{answer, deliver, note_reply, with_mine, Incoming};
use crate::proc::{sched, vspace::VSpace};
use abi::ipc::{Completion, Msg, ICA_AT_WORD, ICA_ID_WORD, MSG_ICA, MSG_ICA_READ_ONLY};
use abi::res::{ResId, ResType};
use abi::{Error, Pid};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// An ICA on its way: the vregion and its frames, whether the receiver may write, and the
/// process that lent it read-only (it had it writable), if one did: there it lands
/// writable again.
#[derive(Clone, Debug)]
pub struct Ica {
    pub region: ResId,
    frames: Vec<u64>,
    writable: bool,
    lender: Option<Pid>,
}

/// An ICA taken out of its sender: what is needed to give it back. (The [`Ica`] itself goes
/// in the request or answer, boxed: a message without one pays one word for it.)
#[derive(Clone, Copy)]
pub struct Taken {
    region: ResId,
    from: Pid,
    at: u64,
    writable: bool,
    /// Who lent it read-only, if it had come so.
    lender: Option<Pid>,
    /// Whether the pass marked the vregion (else it was passed already), and whether it was
    /// passed before.
    marked: bool,
    was_passed: bool,
}

/// Was the ICA `taken` took (if any) writable by its sender (an answering server could
/// have written reply data in it)?
pub fn writable(taken: Option<&Taken>) -> bool {
    taken.is_some_and(|t| t.writable)
}

/// Does `msg` carry an ICA?
#[inline(always)]
pub fn carries(msg: &Msg) -> bool {
    msg.label & MSG_ICA != 0
}

/// Take the ICA `msg` carries (if any) out of the running process's address space and mark
/// its vregion passed. Nothing changes on failure: `WrongType` (not a vregion id),
/// `NoSuchResource`/`StaleResource`, `Busy` (attached elsewhere too, or held by another
/// after a pass), `InvalidArgument` (not attached in the sender's address space).
#[inline(always)]
pub fn take(msg: &Msg) -> Result<Option<(Taken, Box<Ica>)>, Error> {
    if !carries(msg) {
        return Ok(None);
    }
    take_carried(msg).map(Some)
}

#[cold]
#[inline(never)]
fn take_carried(msg: &Msg) -> Result<(Taken, Box<Ica>), Error> {
    let region = ResId(msg.words[ICA_ID_WORD]);
    if region.kind() != Some(ResType::VRegion) {
        return Err(Error::WrongType);
    }
    let from = crate::proc::running_pid().ok_or(Error::NoSuchProcess)?;
    let a = match crate::proc::take_attachment(from, region) {
        Ok(taken) => taken,
        Err(Error::InvalidArgument) => return Err(why_not_attached(region)),
        Err(e) => return Err(e),
    };
    // Lent read-only: the receiver (and whoever it passes it on to) maps it read-only,
    // and it lands writable again here. A mapping that is read-only already has nothing
    // to lend; one lent to us keeps its lender.
    let lend = msg.label & MSG_ICA_READ_ONLY != 0 && a.writable;
    let ica = Box::new(Ica {
        region,
        frames: a.frames,
        writable: a.writable && !lend,
        lender: if lend { Some(from) } else { a.lender },
    });
    let taken = |marked, was_passed| Taken {
        region,
        from,
        at: a.at,
        writable: a.writable,
        lender: a.lender,
        marked,
        was_passed,
    };
    if a.landed {
        return Ok((taken(false, true), ica));
    }
    match crate::res::pass_region(region, true, true) {
        Ok(was_passed) => Ok((taken(true, was_passed), ica)),
        Err(e) => {
            let t = taken(true, false);
            put_back(&t, ica.frames);
            Err(e)
        }
    }
}

/// Why vregion `region` is not attached in the sender's address space, as an error: it does
/// not exist (any more), or is attached elsewhere (`Busy`: e.g. passed, and held by the
/// receiver), or is attached nowhere (`InvalidArgument`).
fn why_not_attached(region: ResId) -> Error {
    match crate::res::info(region) {
        Err(e) => e,
        Ok(info) if info.kind != ResType::VRegion as u8 => Error::WrongType,
        Ok(info) if info.detail > 0 => Error::Busy,
        Ok(_) => Error::InvalidArgument,
    }
}

/// Map what `taken` took out (its vregion's `frames`) again in its sender (on this core),
/// where and as it was; if that fails (the program mapped something there meanwhile), it
/// is attached nowhere.
fn put_back(taken: &Taken, frames: Vec<u64>) {
    let a = crate::proc::vspace::Attachment {
        at: taken.at,
        frames,
        writable: taken.writable,
        // A pass that did not mark the vregion carried one that had come as an ICA.
        landed: !taken.marked,
        lender: taken.lender,
    };
    if crate::proc::put_back(taken.from, &a, taken.region).is_err() {
        lost(taken.region);
    }
}

/// The request that carried `taken` was not queued: the sender keeps it, where it was.
#[cold]
#[inline(never)]
pub fn give_back(taken: Taken) {
    let region = taken.region;
    if taken.marked {
        let _ = crate::res::pass_region(region, taken.was_passed, false);
    }
    match crate::res::region_frames(region) {
        Ok(frames) => put_back(&taken, frames),
        Err(_) => lost(region),
    }
}

/// Map `ica` in `vs` (the address space of `receiver`, on this core) and tell the receiver
/// where (`msg`'s `ICA_AT_WORD`) and whether it may write there (`MSG_ICA_READ_ONLY`): as
/// the ICA came, but writable again back at the process that lent it read-only.
#[cold]
pub fn land(vs: Option<&mut VSpace>, receiver: Pid, ica: &Ica, msg: &mut Msg) -> Result<(), Error> {
    let vs = vs.ok_or(Error::Gone)?;
    let home = ica.lender == Some(receiver);
    let writable = ica.writable || home;
    let lender = if home { None } else { ica.lender };
    msg.words[ICA_AT_WORD] = vs.attach_in_window(&ica.frames, writable, ica.region, lender)?;
    if writable {
        msg.label &= !MSG_ICA_READ_ONLY;
    } else {
        msg.label |= MSG_ICA_READ_ONLY;
    }
    Ok(())
}

/// A passed vregion is attached nowhere now (its answer found no one to map it): its owner
/// counts the attachment gone, which ends the pass.
#[cold]
pub fn lost(region: ResId) {
    crate::res::note_detached(core::iter::once(region));
}

/// Map the ICA an answer passes in `pid` (its caller, on this core), or else drop it from
/// the answer: attached nowhere (the caller ended, the request is gone, or no room).
#[cold]
#[inline(never)]
pub(super) fn land_answer(
    s: &mut sched::Sched,
    pid: Pid,
    completion: &mut Completion,
    ica: Box<Ica>,
) {
    let p = s
        .processes
        .get_mut(&pid.serial())
        .filter(|p| p.ipc.pending.contains_key(&completion.ticket));
    let landed = match p {
        Some(p) => land(p.vspace.as_mut(), pid, &ica, &mut completion.msg).is_ok(),
        None => false,
    };
    if !landed {
        completion.msg.label &= !MSG_ICA;
        lost(ica.region);
    }
}

/// REPLY with the ICA `msg` carries: the handle is checked before the ICA moves.
#[cold]
#[inline(never)]
pub(super) fn reply(handle: u64, msg: Msg, value: u64) -> Result<(), Error> {
    with_mine(|ipc, _| {
        ipc.serving
            .contains_key(&handle)
            .then_some(())
            .ok_or(Error::NoSuchResource)
    })?;
    let (taken, ica) = take(&msg)?.unzip();
    let caller = match with_mine(|ipc, _| ipc.serving.remove(&handle).ok_or(Error::NoSuchResource))
    {
        Ok(caller) => caller,
        Err(e) => {
            if let Some(t) = taken {
                give_back(t);
            }
            return Err(e);
        }
    };
    note_reply(caller.pid, &msg, writable(taken.as_ref()));
    deliver(None, caller, answer(caller, msg, value), ica);
    Ok(())
}

/// Requests `gone` (of an endpoint just closed) were never taken: the ICAs they carried
/// come out of the owner's address space `vs` (if it still maps them where they landed).
/// Returns their vregions, for the caller to count as attached nowhere.
pub(super) fn unmap_untaken(vs: Option<&mut VSpace>, gone: &[Incoming]) -> Vec<ResId> {
    let mut unmapped = Vec::new();
    let Some(vs) = vs else { return unmapped };
    for r in gone {
        let Some(ica) = &r.ica else { continue };
        let at = r.msg.words[ICA_AT_WORD];
        if vs
            .attachments()
            .iter()
            .any(|a| a.0 == at && a.2 == ica.region)
        {
            unmapped.extend(vs.detach(at));
        }
    }
    unmapped
}
