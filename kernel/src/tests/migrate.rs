//! A move between cores is never left half done: while a copy of a process may run on the
//! other core, its original cannot be killed or aborted by anyone but its mover (however
//! long the move has been open), and a move whose mover is gone is ended by the kernel
//! (`proc::migrate::mover_gone`). Both with a process that maps a vregion, whose
//! attachment the copy takes over: it must stay counted exactly once (a regression: an
//! ancestor could kill the original after the copy patience, and the vregion was counted
//! as mapped by nobody while the copy still mapped its frames).

use super::rpcc::{e, migrate_probe, on, other_core, take_status_here};
use crate::proc::{self, migrate, sched, TEST_PARENT};
use crate::res::vregion::{self, VRegion};
use crate::rpcc::{self, FlowInfo, Op, Out};
use crate::{kassert, ktest, percore};
use abi::res::{ResId, ResType, UserId};
use abi::{Error, Pid, Priority};
use alloc::format;
use alloc::string::String;

/// The vregion `movecheck shared` opens, on its core.
const HELD: &str = "movecheck";

ktest! {
    /// Taken out and rebuilt on another core (the copy runs there), a process cannot be
    /// killed, nor its move aborted by its parent, even once the move is older than the
    /// patience that lets an ancestor end an export whose mover is gone; its mover (here
    /// the kernel) commits, and the vregion it maps stays counted once, then none once the
    /// copy ends.
    fn an_open_move_stays_its_movers() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        let (pid, region) = holder()?;
        let r = open_move_attempt(pid, region, other);
        clean_up(pid, region);
        r
    }
}

ktest! {
    /// A process whose frames are read for a move of its own (`MIGRATE` of itself: its
    /// copy is being made on another core) can be neither aborted nor finished nor killed
    /// by its parent (`Busy`): the abort cleared the mark and a kill then freed the frames
    /// under the reader (a review found it).
    fn a_process_moving_itself_is_left_alone() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let (pid, region) = holder()?;
        // As `describe_self` leaves it while its copy is made.
        migrate::set_copying(pid, true);
        let r = (|| {
            let aborted = acting_as(TEST_PARENT, || migrate::abort(pid));
            kassert!(aborted == Err(Error::Busy), "its parent's abort: {aborted:?}, want Busy");
            let finished = acting_as(TEST_PARENT, || crate::proc::export::finish(pid, 0, 0));
            kassert!(finished == Err(Error::Busy), "its parent's MIGRATE_FINISH: {finished:?}, want Busy");
            let killed = proc::end_by_kill(pid);
            kassert!(killed == Err(Error::Busy), "a kill: {killed:?}, want Busy");
            Ok(())
        })();
        migrate::set_copying(pid, false);
        clean_up(pid, region);
        r
    }
}

ktest! {
    /// A move whose mover was killed while it waited for a step (the answer nobody
    /// reads: sent here as a notice) is ended by the kernel: a process rebuilt on the
    /// other core is committed (the original ends as moved, its vregion counted once, for
    /// the copy), and one only taken out runs on.
    fn a_move_whose_mover_is_gone_is_ended_by_the_kernel() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let Some(other) = other_core() else { crate::kskip!("needs 2 cores") };
        if crate::structure::biglock() {
            // The lock's holder performs each step itself: no answer is waited for.
            crate::kskip!("big-lock mode performs a move's steps under the lock");
        }
        let (pid, region) = holder()?;
        let r = orphaned_bring_in(pid, region, other);
        clean_up(pid, region);
        r?;
        orphaned_take_out(other)
    }
}

ktest! {
    /// A process asked to stop on its way to being taken out (it was inside a system
    /// call: `take_out` answered `Busy`) whose mover never asks again (killed while it
    /// slept between two asks) runs on once the stop patience has passed. A regression
    /// found by a review: it stopped on its way out and stayed stopped for ever.
    fn a_stop_asked_and_never_followed_is_given_up() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let (pid, region) = holder()?;
        let r = stop_given_up(pid);
        clean_up(pid, region);
        r
    }
}

fn stop_given_up(pid: Pid) -> Result<(), String> {
    // Asked while it sleeps (inside a system call), so that the answer is `Busy`; one
    // that was at its user boundary is taken out at once: put back, and asked again.
    let mut asked = false;
    for _ in 0..100 {
        sched::run_until(60_000_000_000, || {
            sched::with(|s| {
                let t = s.processes.get(&pid.serial()).map(|p| p.main_thread());
                matches!(
                    t.and_then(|t| s.state_of(t)),
                    Some(sched::ThreadState::Blocked(_)) | None
                )
            })
        });
        match migrate::take_out(pid) {
            Err(Error::Busy) => {
                asked = true;
                break;
            }
            Ok(_) => e(migrate::abort(pid), "abort")?,
            Err(err) => return Err(format!("take out: {err:?}")),
        }
    }
    kassert!(
        asked,
        "the holder was never asked to stop inside a system call"
    );
    // The event: the stop given up and the holder running on (60 s only catches a hang).
    let mut left = move_state_here(pid.0);
    sched::run_until(60_000_000_000, || {
        left = move_state_here(pid.0);
        left == 0
    });
    kassert!(
        left == 0,
        "a stop nobody followed: {left:#b} (1 moving, 2 stop asked, 4 stopped, 8 gone)"
    );
    Ok(())
}

/// `movecheck shared` started here, once it maps its vregion: its pid and the vregion.
fn holder() -> Result<(Pid, ResId), String> {
    let pid = e(
        proc::spawn("movecheck", &["shared"], Priority::App, TEST_PARENT),
        "spawn movecheck shared",
    )?;
    let mut held = None;
    // The event: its vregion attached (60 s only catches a hang).
    sched::run_until(60_000_000_000, || {
        held = named_region().filter(|&v| vregion::attached(v) == Ok(1));
        held.is_some() || proc::has_ended(pid)
    });
    match held {
        Some(v) => Ok((pid, v)),
        None => {
            clean_up(pid, ResId(0));
            Err("movecheck shared never mapped its vregion".into())
        }
    }
}

/// The holder's vregion on this core, if it is there.
fn named_region() -> Option<ResId> {
    super::ica::named(ResType::VRegion, HELD)
}

/// Take `pid` out, asking again while it is on its way to stopping (a loaded host may
/// not run it within one stop patience; 60 tries only catch a hang).
fn taken_out(pid: Pid) -> Result<alloc::boxed::Box<migrate::Snapshot>, String> {
    for _ in 0..60 {
        match migrate::take_out_patiently(pid) {
            Err(Error::Busy) => continue,
            r => return r.map_err(|err| format!("take out: {err:?}")),
        }
    }
    Err(format!("{pid} never stopped to be taken out"))
}

fn open_move_attempt(pid: Pid, region: ResId, other: usize) -> Result<(), String> {
    let snapshot = taken_out(pid)?;
    let new = match migrate::bring_in_on(other, snapshot) {
        Ok(new) => new,
        Err(err) => {
            let _ = migrate::abort(pid);
            return Err(format!("bring in: {err:?}"));
        }
    };
    let checks = (|| {
        // Older than any patience.
        migrate::end_patience(pid);
        let killed = proc::end_by_kill(pid);
        kassert!(
            killed == Err(Error::Busy),
            "a kill of the original while its copy runs: {killed:?}, want Busy"
        );
        let aborted = acting_as(TEST_PARENT, || migrate::abort(pid));
        kassert!(
            aborted == Err(Error::Denied),
            "its parent's abort while its copy runs: {aborted:?}, want Denied"
        );
        // Nor by `MIGRATE_FINISH`, not even its mover's (a second thread of the mover):
        // that is for exports only (a review found it aborted the move, the original
        // running on beside its copy).
        let finished = crate::proc::export::finish(pid, 0, 0);
        kassert!(
            finished == Err(Error::Busy),
            "MIGRATE_FINISH's abort of a move between cores: {finished:?}, want Busy"
        );
        // (A new pid of machine 1, as machine 1's kernel would make it.)
        let finished = crate::proc::export::finish(pid, abi::Pid::on(1, 0, 5).0, 1);
        kassert!(
            finished == Err(Error::Busy),
            "MIGRATE_FINISH's commit of a move between cores: {finished:?}, want Busy"
        );
        let count = vregion::attached(region);
        kassert!(
            count == Ok(1),
            "attachments while the move is open: {count:?}"
        );
        Ok(())
    })();
    let committed = migrate::commit(pid, migrate::migrated(new));
    if checks.is_err() || committed.is_err() {
        let _ = end_there(new);
    }
    checks?;
    e(committed, "commit")?;
    moved_and_counted(pid, new, region)
}

/// The original `pid` ended as moved to `new` (it is gone: a moved process leaves no
/// zombie), whose copy runs on and is the vregion's one mapper; the copy killed, none.
fn moved_and_counted(pid: Pid, new: Pid, region: ResId) -> Result<(), String> {
    let copy = on(new.core(), copy_of_here, pid.0);
    let moved = !proc::has_ended(pid) || migrate_probe(pid) != 0 || copy != Ok(new.0);
    if moved {
        let _ = end_there(new);
    }
    kassert!(
        !moved,
        "the original {pid} is {} listed, its copy {copy:?}, want {new}",
        if migrate_probe(pid) == 0 {
            "not"
        } else {
            "still"
        }
    );
    let count = vregion::attached(region);
    let ended = end_there(new);
    kassert!(count == Ok(1), "attachments once moved: {count:?}");
    ended?;
    // The copy's detach comes as a notice from its core: until every one is in.
    super::rpcc::settle()?;
    let count = vregion::attached(region);
    kassert!(count == Ok(0), "attachments once the copy ended: {count:?}");
    Ok(())
}

fn orphaned_bring_in(pid: Pid, region: ResId, other: usize) -> Result<(), String> {
    let snapshot = taken_out(pid)?;
    // As a mover killed while it waits for the other core: nobody reads the answer.
    rpcc::notice(other, Op::MigrateIn(snapshot));
    // The event: the original ends (60 s only catches a hang; before the kernel ended
    // such moves it stayed stopped and moving for ever).
    sched::run_until(60_000_000_000, || proc::has_ended(pid));
    kassert!(proc::has_ended(pid), "the move was never ended");
    let new = match on(other, copy_of_here, pid.0)? {
        0 => return Err(format!("no copy of {pid} on core {other}")),
        new => Pid(new),
    };
    moved_and_counted(pid, new, region)
}

/// On the destination: the pid of the process that moved there from `old` (0: none).
fn copy_of_here(old: u64) -> u64 {
    sched::with(|s| {
        s.processes
            .values()
            .find(|p| p.moved_from == Some(Pid(old)) && p.ended.is_none())
            .map_or(0, |p| p.pid.0)
    })
}

/// A holder on `other`: a take-out by a process that may not move it, whose answer
/// nobody reads, leaves the move another opened alone; one by a mover killed while it
/// waits lets it run on.
fn orphaned_take_out(other: usize) -> Result<(), String> {
    let spawn = Op::Spawn {
        name: "movecheck".into(),
        args: alloc::vec!["shared".into()],
        priority: Priority::App,
    };
    let pid = match rpcc::call(other, spawn) {
        Ok(Out::Pid(p)) => p,
        Ok(_) => return Err("remote spawn: unexpected reply".into()),
        Err(err) => return Err(format!("remote spawn: {err:?}")),
    };
    let r = (|| {
        // Its move opened from here (the kernel its mover), then a stranger's take-out
        // (`Denied`) that nobody reads. A regression: the kernel aborted whatever move
        // such an answer named, here one that was not the stranger's.
        drop(taken_out(pid)?);
        acting_as(STRANGER, || rpcc::notice(other, Op::MigrateOut(pid)));
        super::rpcc::settle()?;
        let left = on(other, move_state_here, pid.0)?;
        kassert!(
            left & 1 == 1,
            "a refused take-out nobody read ended another's move: {left:#b} (1 moving)"
        );
        let aborted = rpcc::call(other, Op::MigrateAbort(pid)).map(drop);
        kassert!(aborted.is_ok(), "the mover's abort: {aborted:?}");
        // As a mover killed while it waits for the answer: nobody reads it (its
        // description: the kernel aborts the move; or `Busy` if the holder sleeps, a stop
        // asked for on its way out, which expires).
        rpcc::notice(other, Op::MigrateOut(pid));
        // The event: every request answered and every orphan settled, on every core, and
        // the holder running on (60 s only catches a hang).
        super::rpcc::settle()?;
        let mut left = on(other, move_state_here, pid.0)?;
        sched::run_until(60_000_000_000, || {
            left = on(other, move_state_here, pid.0).unwrap_or(8);
            left == 0
        });
        kassert!(
            left == 0,
            "after a take-out nobody read: {left:#b} (1 moving, 2 stop asked, 4 stopped, 8 gone)"
        );
        Ok(())
    })();
    let _ = rpcc::call(other, Op::MigrateAbort(pid));
    let _ = end_there(pid);
    let _ = super::rpcc::settle();
    let _ = on(other, close_held_here, 0);
    r
}

/// A pid that is no process's ancestor.
const STRANGER: Pid = Pid::new(0, u32::MAX - 1);

/// On its core: close the vregion `movecheck shared` opened there, if it is there.
fn close_held_here(_: u64) -> u64 {
    named_region().map_or(0, |v| {
        u64::from(crate::res::local::close_by_kernel::<VRegion>(v).is_ok())
    })
}

/// On the process's core: what a move left on process `pid` (bits: 1 moving, 2 a stop
/// asked for, 4 stopped, 8 not there).
fn move_state_here(pid: u64) -> u64 {
    sched::with(|s| {
        let Some(p) = s.processes.get(&Pid(pid).serial()) else {
            return 8;
        };
        let stopped = s.state_of(p.main_thread()) == Some(sched::ThreadState::Stopped);
        u64::from(p.moving) | (u64::from(p.stop_for_move) << 1) | (u64::from(stopped) << 2)
    })
}

/// Kill process `pid` of another core (a child of the tests) and collect its status.
fn end_there(pid: Pid) -> Result<(), String> {
    let kill = Op::Kill {
        pid,
        descendants_only: false,
    };
    rpcc::call(pid.core(), kill).map_err(|err| format!("kill {pid}: {err:?}"))?;
    let mut status = Ok(u64::MAX);
    // Taking the status removes the zombie: ask only until it is there (`run_until` asks
    // once more on its way out).
    sched::run_until(60_000_000_000, || {
        if status == Ok(u64::MAX) {
            status = on(pid.core(), take_status_here, pid.0);
        }
        status != Ok(u64::MAX)
    });
    kassert!(status != Ok(u64::MAX), "{pid} never ended");
    Ok(())
}

/// Run `f` acting for process `pid` (as the kernel's user).
fn acting_as<T>(pid: Pid, f: impl FnOnce() -> T) -> T {
    let saved = crate::res::snapshot_flow();
    crate::res::adopt_flow(&FlowInfo {
        id: 0,
        machine: 0,
        core: percore::current_core() as u16,
        user: UserId::KERNEL,
        pid: Some(pid),
        priority: Priority::App,
    });
    let r = f();
    crate::res::put_back_flow(&saved);
    r
}

/// End the holder here (it may have ended or moved), and close its vregion.
fn clean_up(pid: Pid, region: ResId) {
    if let Some(pid) = Some(pid).filter(|p| !proc::has_ended(*p)) {
        let _ = migrate::abort(pid);
        let _ = proc::end_by_kill(pid);
        sched::run_until(60_000_000_000, || proc::has_ended(pid));
    }
    let _ = proc::take_status(pid);
    // A copy left on the other core (a failure in the middle) is ours too.
    if let Some(other) = other_core() {
        if let Ok(Out::Procs(v)) = rpcc::call(other, Op::Processes) {
            for p in v
                .iter()
                .filter(|p| p.parent == TEST_PARENT && p.name() == "movecheck")
            {
                let _ = end_there(p.pid);
            }
        }
    }
    // Detaches from other cores come as notices: closed once they are in.
    let _ = super::rpcc::settle();
    if region != ResId(0) {
        let _ = crate::res::local::close_by_kernel::<VRegion>(region);
    }
    // One opened and never attached (the holder failed on its way) too.
    close_held_here(0);
}
