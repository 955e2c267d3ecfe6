//! Process migration: moving a process, with its memory and registers, to another core
//! (P4: Tender's migrate; going beyond the paper, the migration may be asked for from a
//! third core, which P4 names as an open problem).
//!
//! Three steps, each on the core that owns what it touches; from another core each is an
//! RPCC request:
//!
//! 1. [`take_out`] on the process's core (A): stop the process at a point where its whole
//!    user state is in the frame at the top of its kernel stack (it is ready or stopped;
//!    one running or inside a system call is asked to stop and the caller tries again),
//!    and describe it: registers, FPU/SSE image, every page it owns (text, data, bss,
//!    heap, stack) by frame, its attachments, who it is.
//! 2. [`bring_in`] on the destination (B): a new address space with a copy of every page
//!    (read from A's frames, which nothing changes meanwhile), the same vregions attached
//!    (shared memory stays shared: their frames stay the vregions'), and a thread that
//!    resumes exactly where the process stopped. It gets a pid of B.
//! 3. [`commit`] on A: the old process ends with status "migrated to NEWPID" (`WAIT`
//!    follows it to the new pid) and its memory is freed; or [`abort`]: it runs on.
//!
//! A process migrating itself (`MIGRATE(0, core)`) is described from its own system-call
//! frame, with the call's result (the new pid) already in it, and ends on A once B has it.
//!
//! Never moved: a process with DMA memory or a device's BAR mapped (`Denied`, for good: a
//! copy of its DMA pages would leave the device writing the old frames, and its BARs and
//! its device live on core 0), and a process holding a device at all.
//!
//! Left out: a process with children does not move (`Busy`): their parent links name the old
//! pid. Resource handles that name the process (its process, vspace or compute resource)
//! stay on A and then name an ended process, and so do the endpoints it opened (they stay
//! in A's table, charged to its user, until closed: a process closes them before it moves,
//! as `icacheck`'s `mover` does).

use super::{sched, Newborn, Process, MAX_NAME};
use crate::arch::x86_64::{context, idt::TrapFrame};
use crate::percore::current_core;
use crate::rpcc::{self, FlowInfo, Op, Out};
use abi::res::{ResId, UserId};
use abi::{Error, Pid, Priority, WaitStatus};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Everything needed to rebuild a process on another core.
pub struct Snapshot {
    /// Its pid before (`Pid(0)`: it came from another machine, `proc::export`).
    pub(super) old: Pid,
    pub(super) name: heapless::String<MAX_NAME>,
    pub(super) priority: Priority,
    pub(super) parent: Pid,
    pub(super) user: UserId,
    pub(super) admin: bool,
    pub(super) heap_end: u64,
    pub(super) frame: TrapFrame,
    pub(super) fx: [u8; 512],
    /// Owned pages: (address, frame on the old core, writable, executable).
    pub(super) pages: Vec<(u64, u64, bool, bool)>,
    /// Attached vregions, as they were (an ICA stays one), and their regions.
    pub(super) attachments: Vec<(super::vspace::Attachment, ResId)>,
    /// Let it run on the new core (it was running, not stopped by a compute).
    pub(super) run: bool,
    /// It asked to move itself: its frame is its MIGRATE call, whose result is the new pid.
    pub(super) itself: bool,
    /// It maps kernel-owned frames (a request ring), which a copy leaves out.
    pub(super) pinned: bool,
}

/// How long [`migrate`] keeps asking a process that is inside a system call to stop.
const STOP_PATIENCE_NS: u64 = 1_000_000_000;
/// How long an exported process (its image written, its mover perhaps gone with it) stays
/// its mover's alone: after this, any ancestor may end the move (a kill may end it at
/// once). A move between cores never waits for this: while its frames are read, and while
/// a copy may run on the other core, it is its mover's or, once the mover is gone, the
/// kernel's ([`mover_gone`]).
pub const MOVER_PATIENCE_NS: u64 = 10_000_000_000;

/// MIGRATE: move process `pid` (`Pid(0)`: the caller) to core `core`; returns its new pid.
/// Any core may ask, for a process of any core.
pub fn migrate(pid: Pid, core: usize) -> Result<Pid, Error> {
    let pid = crate::machine::local_pid(pid.0)?;
    if !rpcc::reachable(core) {
        return Err(Error::NoSuchCore);
    }
    let me = super::running_pid();
    let (pid, itself) = match pid {
        Pid(0) => (me.ok_or(Error::NoSuchProcess)?, true),
        p => (p, Some(p) == me),
    };
    if pid.core() == core {
        return Err(Error::InvalidArgument);
    }
    if itself {
        let snapshot = describe_self()?;
        let new = match bring_in_on(core, snapshot) {
            Ok(new) => new,
            Err(e) => {
                // It stays: its frames may be freed again.
                set_copying(me.ok_or(Error::NoSuchProcess)?, false);
                return Err(e);
            }
        };
        super::exit_current(migrated(new));
    }
    let snapshot = take_out_patiently(pid)?;
    // Step 2, then 3.
    match bring_in_on(core, snapshot) {
        Ok(new) => {
            let status = migrated(new);
            let committed = on(pid.core(), Op::MigrateCommit { pid, status }, |_| {
                commit(pid, status).map(|()| Out::Unit)
            });
            if let Err(e) = committed {
                // It must not live on twice: the copy ends (whoever asked: the kill rule is
                // not the point here), and the original runs on if it still can.
                let kill = Op::Kill {
                    pid: new,
                    descendants_only: false,
                };
                let _ = on(new.core(), kill, |_| {
                    super::end_by_kill(new).map(|()| Out::Unit)
                });
                let _ = abort_on(pid);
                return Err(e);
            }
            Ok(new)
        }
        Err(e) => {
            let _ = abort_on(pid);
            Err(e)
        }
    }
}

/// Step 1, patiently: a process inside a system call stops on its way out (`Busy` until
/// then, asked again for at most [`STOP_PATIENCE_NS`]). On an error the process runs on.
pub(crate) fn take_out_patiently(pid: Pid) -> Result<Box<Snapshot>, Error> {
    let deadline = crate::time::now_ns() + STOP_PATIENCE_NS;
    loop {
        match on(pid.core(), Op::MigrateOut(pid), |op| match op {
            Op::MigrateOut(p) => take_out(*p).map(Out::Snapshot),
            _ => Err(Error::Unknown),
        }) {
            Ok(Out::Snapshot(s)) => return Ok(s),
            Ok(_) => return Err(Error::Unknown),
            Err(Error::Busy) if crate::time::now_ns() < deadline => {
                sched::sleep_ns(1_000_000_000 / crate::time::HZ);
            }
            // Moving already: not ours to undo (an abort would restart it under the other
            // move, which would then leave two copies).
            Err(Error::Again) => return Err(Error::Busy),
            Err(e) => {
                let _ = abort_on(pid);
                return Err(e);
            }
        }
    }
}

/// Step 2 on `core`: the process of `snapshot` rebuilt there; its new pid.
pub(crate) fn bring_in_on(core: usize, snapshot: Box<Snapshot>) -> Result<Pid, Error> {
    match on(core, Op::MigrateIn(snapshot), |op| match op {
        Op::MigrateIn(s) => bring_in(s).map(Out::Pid),
        _ => Err(Error::Unknown),
    })? {
        Out::Pid(new) => Ok(new),
        _ => Err(Error::Unknown),
    }
}

/// Step 3 failed or was given up, on the process's core: it runs on.
pub(super) fn abort_on(pid: Pid) -> Result<(), Error> {
    on(pid.core(), Op::MigrateAbort(pid), |_| {
        abort(pid).map(|()| Out::Unit)
    })
    .map(drop)
}

/// Do `op` on `core`: here with `local`, elsewhere through RPCC.
pub(super) fn on(
    core: usize,
    op: Op,
    local: impl FnOnce(&Op) -> Result<Out, Error>,
) -> Result<Out, Error> {
    if core == current_core() {
        local(&op)
    } else {
        rpcc::call(core, op)
    }
}

/// The status of a process that moved: `code` is its new pid.
pub(crate) fn migrated(new: Pid) -> WaitStatus {
    WaitStatus {
        how: abi::ENDED_MIGRATED,
        code: new.0,
        ..WaitStatus::default()
    }
}

/// May the flow's process move `p`? Itself, its descendants; the kernel any.
fn may_move(s: &sched::Sched, p: &Process) -> Result<(), Error> {
    let Some(me) = crate::res::flow_pid() else {
        return Ok(());
    };
    let mut at = p.pid;
    for _ in 0..1024 {
        if at == me {
            return Ok(());
        }
        match (at.core() == current_core())
            .then(|| s.processes.get(&at.serial()))
            .flatten()
        {
            Some(q) => at = q.parent,
            None => return Err(Error::Denied),
        }
    }
    Err(Error::Denied)
}

/// Children, requests in flight (their answers name the old pid), or more than one thread:
/// it does not move.
fn has_children(s: &sched::Sched, p: &Process) -> bool {
    p.ipc.held() > 0
        || p.threads.len() > 1
        || !p.followed.is_empty()
        || s.processes
            .values()
            .any(|c| c.parent == p.pid && c.ended.is_none())
}

/// Describe `p` whose user state is in the frame at the top of thread `t`'s stack.
fn describe(
    s: &sched::Sched,
    p: &Process,
    run: bool,
    itself: bool,
) -> Result<Box<Snapshot>, Error> {
    let vs = p.vspace.as_ref().ok_or(Error::NoSuchProcess)?;
    let top = s.kstack_top(p.main_thread()).ok_or(Error::NoSuchProcess)?;
    // SAFETY: the thread is not running in user mode: it is stopped or ready (its frame and
    // FPU image were saved on entry), or it is the caller, inside its MIGRATE call.
    let (frame, fx) = unsafe { context::saved_user_state(top) };
    let attachments = vs
        .attachments()
        .iter()
        .map(|&(at, pages, region)| {
            let frames: Vec<u64> = (0..pages)
                .filter_map(|i| {
                    crate::arch::x86_64::paging::translate(vs.root(), at + i * 4096)
                        .map(|t| t.paddr)
                })
                .collect();
            let writable =
                crate::arch::x86_64::paging::translate(vs.root(), at).is_some_and(|t| t.writable);
            // An ICA stays one: passed on or back without asking its vregion's core, and
            // a lent one keeps its lender.
            let (landed, lender) = vs.landing(at);
            let a = super::vspace::Attachment {
                at,
                frames,
                writable,
                landed,
                lender,
            };
            (a, region)
        })
        .collect();
    Ok(Box::new(Snapshot {
        old: p.pid,
        name: p.name.clone(),
        priority: p.priority,
        parent: p.parent,
        user: p.user,
        admin: p.admin,
        heap_end: p.heap_end,
        frame,
        fx,
        pages: vs.own_pages(),
        attachments,
        run,
        itself,
        pinned: vs.has_pinned(),
    }))
}

/// Does `pid` (of this core) hold a device or device memory? Such a process never moves:
/// its DMA pages would be copied to new frames while the device still writes the old ones,
/// its BAR mappings would be dropped, and devices live on core 0 (`res/device.rs`).
fn pinned_by_device(pid: Pid) -> Result<bool, Error> {
    let memory = sched::with(|s| {
        let p = super::live(s, pid)?;
        Ok::<_, Error>(p.vspace.as_ref().is_some_and(|v| v.holds_device_memory()))
    })?;
    Ok(memory || crate::res::device::holds_any(pid))
}

fn describe_self() -> Result<Box<Snapshot>, Error> {
    let me = super::running_pid().ok_or(Error::NoSuchProcess)?;
    if pinned_by_device(me)? {
        return Err(Error::Denied);
    }
    let snapshot = sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get(&serial).ok_or(Error::NoSuchProcess)?;
        if has_children(s, p) {
            return Err(Error::Busy);
        }
        describe(s, p, true, true)
    })?;
    // Its frames are read on the destination while it waits: a kill waits too (its parent
    // could otherwise free them under the reader).
    set_copying(me, true);
    Ok(snapshot)
}

/// Mark process `pid` of this core as having its frames read for a move (or no longer).
pub(crate) fn set_copying(pid: Pid, on: bool) {
    sched::with(|s| {
        if let Some(p) = s.processes.get_mut(&pid.serial()) {
            p.copying = on;
            p.movers_until = crate::time::now_ns() + MOVER_PATIENCE_NS;
        }
    });
}

/// Step 1 (on the process's core): stop process `pid` and describe it. `Busy` while it is
/// still on its way to stopping.
pub fn take_out(pid: Pid) -> Result<Box<Snapshot>, Error> {
    if pinned_by_device(pid)? {
        return Err(Error::Denied);
    }
    sched::with(|s| {
        let p = super::live(s, pid)?;
        may_move(s, p)?;
        if p.moving {
            // Another move of it is under way: its undoing is that move's, not ours.
            return Err(Error::Again);
        }
        if has_children(s, p) {
            return Err(Error::Busy);
        }
        let t = p.main_thread();
        let run = match s.state_of(t) {
            Some(sched::ThreadState::Stopped) => p.stop_for_move,
            Some(_) => {
                // Ready at the user boundary: stopped at once. Inside a system call
                // (blocked, or woken and not yet out): it stops on its way back to user
                // mode, and the caller asks again. A stop already pending is not the
                // move's (a compute's): the move's alone is given up ([`expire_stops`]).
                let others = s.stop_pending(t);
                s.stop_thread(t);
                if s.state_of(t) != Some(sched::ThreadState::Stopped) {
                    if let Some(p) = s.processes.get_mut(&pid.serial()).filter(|_| !others) {
                        p.stop_for_move = true;
                        // Whose stop it is: theirs to undo ([`abort`]), also once gone;
                        // given up if they do not ask again in time ([`expire_stops`]).
                        p.mover = crate::res::flow_pid().unwrap_or(Pid(0));
                        p.movers_until = crate::time::now_ns() + STOP_PATIENCE_NS;
                        s.move_stops_due = s.move_stops_due.min(p.movers_until);
                    }
                    return Err(Error::Busy);
                }
                true
            }
            None => return Err(Error::NoSuchProcess),
        };
        let p = s.processes.get(&pid.serial()).ok_or(Error::NoSuchProcess)?;
        let snapshot = describe(s, p, run, false)?;
        let mover = crate::res::flow_pid().unwrap_or(Pid(0));
        if let Some(p) = s.processes.get_mut(&pid.serial()) {
            p.moving = true;
            p.mover = mover;
            p.copying = true;
            p.movers_until = crate::time::now_ns() + MOVER_PATIENCE_NS;
            p.stop_for_move = run;
        }
        Ok(snapshot)
    })
}

/// At a timer interrupt once a stop asked for a migration may be given up
/// (`Sched::move_stops_due`): every process asked to stop on its way to being taken out
/// whose asker has not asked again for [`STOP_PATIENCE_NS`] runs on, as [`abort`] would
/// have it. Its mover gave up (and aborts itself) or was killed while it slept between
/// two asks, with no answer outstanding that would tell the kernel (`mover_gone`): the
/// process stopped on its way out and stayed stopped for ever. (A slow mover that asks
/// again later only asks again.)
pub(super) fn expire_stops(s: &mut sched::Sched, now: u64) {
    let mut due = u64::MAX;
    let mut expired = Vec::new();
    for p in s.processes.values_mut() {
        if !p.stop_for_move || p.moving || p.ended.is_some() {
            continue;
        }
        if p.movers_until <= now {
            p.stop_for_move = false;
            expired.push(p.main_thread());
        } else {
            due = due.min(p.movers_until);
        }
    }
    s.move_stops_due = due;
    for t in expired {
        s.cancel_stop(t);
        if s.state_of(t) == Some(sched::ThreadState::Stopped) {
            let _ = s.start_thread(t, 1);
        }
    }
}

/// Step 2 (on the destination): rebuild the process; returns its new pid.
pub fn bring_in(snapshot: &Snapshot) -> Result<Pid, Error> {
    let mut vs = super::vspace::VSpace::new(snapshot.user)?;
    for &(at, frame, writable, executable) in &snapshot.pages {
        vs.map_copy(at, frame, writable, executable)?;
    }
    for (a, region) in &snapshot.attachments {
        vs.put_back(a, *region)?;
    }
    let mut frame = snapshot.frame;
    let who = Newborn {
        name: snapshot.name.clone(),
        priority: snapshot.priority,
        parent: snapshot.parent,
        user: snapshot.user,
        admin: snapshot.admin,
        heap_end: snapshot.heap_end,
        moved_from: (snapshot.old != Pid(0)).then_some(snapshot.old),
    };
    // The new pid is known only once installed: install stopped, patch, then start.
    let pid = super::install(who, vs, &frame, Some(&snapshot.fx), false)?;
    if snapshot.itself {
        frame.rax = 0;
        frame.rdx = pid.0;
        sched::with(|s| {
            let t = s.processes.get(&pid.serial()).map(|p| p.main_thread());
            if let Some(f) = t.and_then(|t| s.fresh_frame(t)) {
                // SAFETY: the frame of a thread that has never run, on its own stack.
                unsafe { *f = frame };
            }
        });
    }
    if snapshot.parent == Pid(0) {
        // A boot program is counted on the core it lives on.
        crate::percore::this()
            .stats
            .boot_programs
            .fetch_add(1, Ordering::Relaxed);
    }
    if snapshot.run {
        super::start(pid, 1)?;
    }
    log::debug!("migrated {} to {pid}", snapshot.old);
    Ok(pid)
}

/// Step 3 (on the old core): the old process ends, its status naming the new pid
/// (`ENDED_MIGRATED`; `ENDED_MOVED_AWAY` for another machine's).
pub fn commit(pid: Pid, status: WaitStatus) -> Result<(), Error> {
    sched::with(|s| {
        let p = super::live(s, pid)?;
        if !p.moving {
            return Err(Error::InvalidArgument);
        }
        // Gone to another machine (`MIGRATE_FINISH`) only from an export whose image is
        // written: not while a move between cores is open (see `abort_export`).
        if status.how == abi::ENDED_MOVED_AWAY && p.copying {
            return Err(Error::Busy);
        }
        its_mover(s, p)?;
        super::end_process(s, pid.serial(), status);
        Ok(())
    })
}

/// Is the flow's process the one that took `p` out (or the kernel)? A move is its
/// mover's to end: another ancestor's commit or abort would leave two copies, and the
/// ancestry may have changed since (a middle parent ended).
fn its_mover(s: &sched::Sched, p: &Process) -> Result<(), Error> {
    match crate::res::flow_pid() {
        Some(me) if me != p.mover => {
            // An export whose mover did not end it in time (killed while the image
            // travelled): the move is any ancestor's to end. Never a move between cores
            // (`copying` until its end): a copy may run there, sharing `p`'s vregions,
            // and the kernel ends the move if its mover is gone ([`mover_gone`]).
            let late = crate::time::now_ns() > p.movers_until;
            if late && !p.copying {
                may_move(s, p)
            } else {
                Err(Error::Denied)
            }
        }
        _ => Ok(()),
    }
}

/// Must a kill of `p` wait (`Busy`)? While a move reads its frames, and while a copy of
/// it may run on another core: until the move is committed or aborted, by its mover or by
/// the kernel ([`mover_gone`]). A kill then would free frames under the reader, or end
/// the original with its vregions' attachments, which the copy holds now (each is counted
/// once for the two: the copy would map frames a close could free).
pub(super) fn copying_now(p: &Process) -> bool {
    p.copying
}

/// End the patience of process `pid`'s move (of this core) now: for the tests of the
/// patience rules, which would otherwise wait for it.
pub(crate) fn end_patience(pid: Pid) {
    sched::with(|s| {
        if let Some(p) = s.processes.get_mut(&pid.serial()) {
            p.movers_until = 0;
        }
    });
}

/// The answer to a step of a move that nobody will read: its mover was killed while it
/// waited (`rpcc::orphan`). The kernel ends the move as the mover would have, judged as
/// the mover (its flow, `mover`: a move that was not its own, or that another mover has
/// taken since, is left alone): a process taken out runs on (one only asked to stop runs
/// on when the stop expires, [`expire_stops`]); one rebuilt on the other core is
/// committed, so the original ends as moved and its vregions stay counted once, for the
/// copy; a copy nobody can finish (an import, or a process that moved itself and has
/// ended) is killed, as the kernel. Before this, such a move
/// stayed open; once its patience passed, an ancestor could kill or abort the original
/// while the copy ran, and a vregion both mapped was counted one attachment too few (a
/// close could then free frames the copy still mapped).
pub(crate) fn mover_gone(op: &Op, mover: &FlowInfo, answer: Option<&Result<Out, Error>>) {
    // An answer that never came (no agent wrote it) is a step that was not made.
    let lost = Err(Error::Unknown);
    let answer = answer.unwrap_or(&lost);
    // An import's pages are frames of this core that held the image for the copy to read
    // (`export::import`), the importer's to free once answered; it never will (its thread
    // went, and what it held with it). The other core is done with them: this is its answer.
    if let Op::MigrateIn(s) = op {
        if s.old == Pid(0) {
            for &(_, frame, _, _) in &s.pages {
                let _ = crate::mm::frames::free(frame);
            }
        }
    }
    let saved = crate::res::snapshot_flow();
    crate::res::adopt_flow(mover);
    match (op, answer) {
        // Taken out: it runs on. A stop asked for on its way (`Busy`) is given up when
        // nobody asks again ([`expire_stops`]: whose stop it is is known there). Anything
        // else was refused, or is another move's (`Again`).
        (Op::MigrateOut(pid), Ok(_)) => tell_abort(*pid),
        (Op::MigrateIn(s), Ok(Out::Pid(new))) if s.old != Pid(0) && !s.itself => {
            let (pid, status) = (s.old, migrated(*new));
            tell(pid.core(), Op::MigrateCommit { pid, status }, || {
                commit(pid, status)
            });
        }
        (Op::MigrateIn(s), Ok(Out::Pid(new))) => {
            let new = *new;
            crate::res::adopt_flow(&FlowInfo {
                user: UserId::KERNEL,
                pid: None,
                ..*mover
            });
            let kill = Op::Kill {
                pid: new,
                descendants_only: false,
            };
            tell(new.core(), kill, || super::end_by_kill(new));
            // An import's copy is its importer's child, and the importer is the mover that
            // is gone: it never followed the child, so its end told the copy's core
            // nothing, and the ended copy would stay a zombie for good (as a spawn's child:
            // `rpcc::orphan`). That core hears it now.
            if s.old == Pid(0) {
                super::child_unheard(s.parent, new);
            }
        }
        (Op::MigrateIn(s), Err(_)) if s.old != Pid(0) && !s.itself => tell_abort(s.old),
        _ => {}
    }
    crate::res::put_back_flow(&saved);
}

/// Abort the move of `pid` as the flow (a gone mover's, for [`mover_gone`]), without
/// waiting.
fn tell_abort(pid: Pid) {
    tell(pid.core(), Op::MigrateAbort(pid), || abort(pid));
}

/// Do `op` on `core` without waiting for its answer: here with `local`, elsewhere as an
/// RPCC notice. What fails is only logged (nobody is left to tell).
fn tell(core: usize, op: Op, local: impl FnOnce() -> Result<(), Error>) {
    if core == current_core() {
        if let Err(e) = local() {
            log::warn!("migrate: ending a move whose mover is gone: {e}");
        }
    } else {
        rpcc::notice(core, op);
    }
}

/// Step 1 is over for an export (the image is written): the process may be killed again
/// (it stays stopped until its move is committed or aborted).
pub fn copied(pid: Pid) -> Result<(), Error> {
    sched::with(|s| {
        let p = super::live(s, pid)?;
        if !p.moving {
            return Err(Error::InvalidArgument);
        }
        its_mover(s, p)?;
        if let Some(p) = s.processes.get_mut(&pid.serial()) {
            p.copying = false;
        }
        Ok(())
    })
}

/// The move failed or was given up: the process runs on (if it ran before).
pub fn abort(pid: Pid) -> Result<(), Error> {
    abort_as(pid, false)
}

/// `MIGRATE_FINISH`'s abort (`proc::export::finish`): [`abort`] of an export whose image
/// is written, `Busy` for any other move that is open (a move between cores, whose copy
/// may run on the other core; an export whose frames are still read; a process moving
/// itself). Before, a second thread of a mover could abort a move between cores under its
/// first thread: the original ran on beside its copy, both mapping vregions counted once
/// (found by an audit; `migrate::an_open_move_stays_its_movers`).
pub fn abort_export(pid: Pid) -> Result<(), Error> {
    abort_as(pid, true)
}

fn abort_as(pid: Pid, export_only: bool) -> Result<(), Error> {
    let restart = sched::with(|s| {
        let p = super::live(s, pid)?;
        // Frames read for a move (between cores, or an export's image) are not for an
        // abort by `MIGRATE_FINISH`, nor, for a process moving itself (`copying` without
        // `moving`), by anyone: the copy is being made from them.
        if p.copying && (export_only || !p.moving) {
            return Err(Error::Busy);
        }
        if p.moving {
            its_mover(s, p)?;
        } else if crate::res::flow_pid() != Some(p.mover) {
            // Only a stop asked for on its way (`take_out`'s `Busy`) to undo: its asker's
            // (gone or not), or an ancestor's.
            may_move(s, p)?;
        }
        let p = s
            .processes
            .get_mut(&pid.serial())
            .ok_or(Error::NoSuchProcess)?;
        let (run, t) = (p.stop_for_move, p.main_thread());
        p.moving = false;
        p.copying = false;
        p.stop_for_move = false;
        if run {
            s.cancel_stop(t);
        }
        Ok(run && s.state_of(t) == Some(sched::ThreadState::Stopped))
    })?;
    if restart {
        super::start(pid, 1)?;
    }
    Ok(())
}
