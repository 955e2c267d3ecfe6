//! Parents and children across cores: `WAIT`, and what a parent learns when a child on
//! another core ends, moves, or is orphaned.
//!
//! A child lives where it was created, which need not be its parent's core. The child's
//! record (with its parent's pid) stays on the child's core. The parent's record follows
//! the children it cannot find among its own core's processes: those on other cores and
//! those that moved ([`Followed`]: one entry per child, the pid it was created with and
//! the pid it has now). When such a child ends, its core sends the parent's core a notice
//! (`ChildEnded`) that wakes a waiting parent, which then asks for the status
//! (`TakeStatus`, which also removes the zombie).
//!
//! A child that migrates leaves no zombie: its old core tells the parent its new pid
//! (`ChildMoved`) and the parent's entry for it names the new pid from then on, however
//! many times it moves (memory per child, not per move). `WAIT` names a child by the pid it
//! was created with or by the pid it has now; `WAIT` for any child reports the pid it was
//! created with.
//!
//! Two races are closed here (per-core kernel only: in big-lock mode a notice is performed
//! at once, so neither exists).
//! 1. Notices from different cores may overtake each other: a move heard of before the
//!    move that led to it makes a *tentative* entry, joined to the child's entry when the
//!    earlier move is heard of. `WAIT` for any child waits for the join rather than report
//!    a pid the parent never knew.
//! 2. A `TakeStatus` may reach the old core after the child left it but before the parent
//!    heard where it went. The old core keeps a [`Forward`] (old pid, new pid, parent) until
//!    the parent's core says it heard (`MoveHeard`), and meanwhile answers "moved" (a
//!    status `ENDED_MIGRATED`), never `NoSuchProcess`: so the parent never takes a live
//!    child for a stranger and forgets it.
//!
//! A parent that ends tells the cores of its children elsewhere (`Orphaned`), which treat
//! them as the kernel's, as for local children. A core holding forwards for that parent
//! passes the notice on to where those children went, and a move heard of for a parent
//! that has ended orphans the child where it arrived.

#![deny(unsafe_code)]

use super::{sched, Block, Process, ThreadState};
use crate::percore::{self, current_core};
use crate::rpcc::{self, Op, Out};
use crate::structure;
use abi::{Error, Pid, WaitStatus};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// A child its parent follows: one that lives on another core, or one that moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Followed {
    /// The pid it was created with (what its parent was told).
    pub first: Pid,
    /// The pid it has now, as far as this core has heard.
    pub now: Pid,
    /// Heard of through a move whose earlier moves have not been heard of yet (their
    /// notices were overtaken), or before its creation was noted: `first` may be a pid its
    /// parent never knew, until the entry is joined to the child's own.
    pub tentative: bool,
}

/// On the core a child left: where it went, kept until its parent's core has heard.
pub struct Forward {
    old: Pid,
    new: Pid,
    parent: Pid,
}

/// Moves of a child not followed (named by a pid we were not following) one look follows
/// through the forwards of its old cores.
const FORWARD_HOPS: u32 = 16;

/// Looks a `WAIT` takes at once, without sleeping, after it learnt of a move while
/// looking (so a child that keeps moving cannot hold a polling `WAIT` for ever).
const QUICK_LOOKS: u32 = 8;

/// Does `parent` name a process that may wait (not the kernel, not the tests)?
fn is_a_process(parent: Pid) -> bool {
    parent != Pid(0) && parent != super::TEST_PARENT
}

fn wake_waiting_parent(s: &mut sched::Sched, parent: Pid) {
    if let Some(pp) = s.processes.get_mut(&parent.serial()) {
        pp.child_event = true;
        for waiter in pp.threads.clone() {
            if s.thread(waiter)
                .is_some_and(|t| matches!(t.state, ThreadState::Blocked(Block::Wait(_))))
            {
                s.wake(waiter);
            }
        }
    }
}

/// A child of `parent` ended here: wake the parent, or tell its core.
pub(super) fn tell_parent(s: &mut sched::Sched, parent: Pid) {
    if parent.core() == current_core() {
        wake_waiting_parent(s, parent);
    } else if is_a_process(parent) {
        rpcc::notice(parent.core(), Op::ChildEnded(parent));
    }
}

/// Child `old` of `parent` left this core and now lives as `new` (migration). `arrived`:
/// it had itself moved here, so its parent may not have heard of `old` yet.
pub(super) fn child_moved(s: &mut sched::Sched, parent: Pid, old: Pid, new: Pid, arrived: bool) {
    if !is_a_process(parent) {
        return;
    }
    if parent.core() == current_core() {
        if !hear_move(s, parent, old, new, arrived) {
            // The parent ended while the child was moving: the child is the kernel's.
            rpcc::notice(new.core(), Op::Orphaned(parent));
        }
        return;
    }
    if structure::requests_travel() {
        s.forwards.push(Forward { old, new, parent });
    }
    rpcc::notice(parent.core(), Op::ChildMoved { parent, old, new });
}

/// `parent` (of this core) hears that its child `old` now lives as `new`; an entry made
/// now because none names `old` is `tentative` if so asked. False if the parent has ended
/// (or is not here): nobody will wait for the child.
fn hear_move(s: &mut sched::Sched, parent: Pid, old: Pid, new: Pid, tentative: bool) -> bool {
    let Some(pp) = s
        .processes
        .get_mut(&parent.serial())
        .filter(|p| p.ended.is_none())
    else {
        return false;
    };
    let f = &mut pp.followed;
    let mut i = match f.iter().position(|c| c.now == old) {
        Some(i) => {
            f[i].now = new;
            i
        }
        None => {
            f.push(Followed {
                first: old,
                now: new,
                tentative,
            });
            f.len() - 1
        }
    };
    // Later moves of the same child heard of before this one: join them.
    loop {
        let now = f[i].now;
        let Some(j) = (0..f.len()).find(|&j| j != i && f[j].tentative && f[j].first == now) else {
            break;
        };
        f[i].now = f[j].now;
        f.remove(j);
        if j < i {
            i -= 1;
        }
    }
    wake_waiting_parent(s, parent);
    true
}

/// Tell `core` (maybe this one) that `parent` has ended.
fn orphan_on(core: usize, parent: Pid) {
    if core == current_core() {
        note_orphaned(parent);
    } else {
        rpcc::notice(core, Op::Orphaned(parent));
    }
}

/// Make the children of `parent` that live here the kernel's (those already ended go:
/// nobody will wait for them). A child in the middle of a move keeps its parent, so the
/// move's end can orphan it where it arrives.
fn orphan_here(s: &mut sched::Sched, parent: Pid) {
    s.processes
        .retain(|_, c| c.parent != parent || c.ended.is_none());
    for child in s
        .processes
        .values_mut()
        .filter(|c| c.parent == parent && !c.moving)
    {
        child.parent = Pid(0);
    }
}

/// The parent `me` ended: its children on other cores become the kernel's.
pub(super) fn orphan_children(s: &mut sched::Sched, me: Pid, followed: Vec<Followed>) {
    orphan_here(s, me);
    let mut cores: Vec<usize> = followed
        .iter()
        .map(|c| c.now.core())
        .filter(|&c| c != current_core())
        .collect();
    cores.sort_unstable();
    cores.dedup();
    for core in cores {
        rpcc::notice(core, Op::Orphaned(me));
    }
}

/// `Orphaned` on a child's core: the children of `parent` here are the kernel's now, and
/// so are those that left for other cores before the parent heard.
pub fn note_orphaned(parent: Pid) {
    let mut gone_to: Vec<usize> = sched::with(|s| {
        orphan_here(s, parent);
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
        let cores = s
            .forwards
            .iter()
            .filter(|f| f.parent == parent)
            .map(|f| f.new.core())
            .collect();
        s.forwards.retain(|f| f.parent != parent);
        cores
    });
    gone_to.sort_unstable();
    gone_to.dedup();
    for core in gone_to {
        orphan_on(core, parent);
    }
}

/// `ChildEnded` on the parent's core.
pub fn note_child_ended(parent: Pid) {
    if parent.core() == current_core() {
        sched::with(|s| wake_waiting_parent(s, parent));
    }
}

/// `ChildMoved` on the parent's core: follow the child, and tell its old core it may
/// forget where the child went.
pub fn note_child_moved(parent: Pid, old: Pid, new: Pid) {
    if parent.core() != current_core() {
        return;
    }
    if !sched::with(|s| hear_move(s, parent, old, new, true)) {
        orphan_on(new.core(), parent);
    }
    if structure::requests_travel() && old.core() != current_core() {
        rpcc::notice(old.core(), Op::MoveHeard(old));
    }
}

/// `MoveHeard` on the core a child left: its parent follows it now.
pub fn note_move_heard(old: Pid) {
    sched::with(|s| s.forwards.retain(|f| f.old != old));
}

/// Forward records this core keeps (children that left, their parents not yet told).
pub fn forwards_here() -> usize {
    sched::with(|s| s.forwards.len())
}

/// Process `p` follows its child `child` of another core, just made (`ChildSlot::made`).
pub(super) fn follow(p: &mut super::Process, child: Pid) {
    if let Some(f) = p.followed.iter_mut().find(|f| f.first == child) {
        // It moved before we got here: its entry is ours, not tentative.
        f.tentative = false;
    } else if !p.followed.iter().any(|f| f.now == child) {
        p.followed.push(Followed {
            first: child,
            now: child,
            tentative: false,
        });
    }
}

/// A child `child` made on another core for `parent` (of this core), whose answer nobody
/// read (`rpcc::orphan`): followed if `parent` still runs, as if it had read it; else the
/// child's core hears that `parent` is gone, which its end never told that core, so the
/// child is reaped when it ends, not kept as a zombie for ever.
pub fn child_unheard(parent: Pid, child: Pid) {
    let alive = sched::with(|s| {
        let Some(p) = s
            .processes
            .get_mut(&parent.serial())
            .filter(|p| p.pid == parent && p.ended.is_none())
        else {
            return false;
        };
        follow(p, child);
        true
    });
    if !alive && child.core() != current_core() {
        rpcc::notice(child.core(), Op::Orphaned(parent));
    }
}

/// WAIT on another core's behalf: the status of child `pid` (of this core) of the flow's
/// process, if it ended (and then the record goes); `None` if it still runs; a status
/// `ENDED_MIGRATED` naming its new pid if it left this core and the parent may not have
/// heard yet.
pub fn take_child_status(pid: Pid) -> Result<Option<WaitStatus>, Error> {
    let parent = crate::res::flow_pid().ok_or(Error::NoSuchProcess)?;
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    sched::with(|s| {
        let Some(c) = s.processes.get(&pid.serial()) else {
            return s
                .forwards
                .iter()
                .find(|f| f.old == pid && f.parent == parent)
                .map(|f| Some(super::migrate::migrated(f.new)))
                .ok_or(Error::NoSuchProcess);
        };
        if c.parent != parent {
            return Err(Error::NoSuchProcess);
        }
        let Some(status) = c.ended else {
            return Ok(None);
        };
        s.processes.remove(&pid.serial());
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
        Ok(Some(status))
    })
}

/// The running process no longer follows the child that is `now`; the pid it was
/// created with, if it was followed.
fn forget_followed(now: Pid) -> Option<Pid> {
    sched::with(|s| {
        let p = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial))?;
        let i = p.followed.iter().position(|f| f.now == now)?;
        Some(p.followed.remove(i).first)
    })
}

/// What one look at the children found.
enum Look {
    Ended(Pid, WaitStatus),
    Running,
}

/// WAIT: collect an ended child (`pid` or any if `Pid(0)`), on any core, blocking until one
/// ends or `timeout_ns` passes (`TimedOut`). A child that migrated is followed to its new
/// pid, however many times it moved; the pid returned is `pid`, or for any child the pid
/// it was created with.
pub fn wait(pid: Pid, timeout_ns: u64) -> Result<(Pid, WaitStatus), Error> {
    let pid = crate::machine::local_pid(pid.0)?;
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    let mut quick = 0;
    loop {
        match look(pid)? {
            Look::Ended(child, status) => return Ok((child, status)),
            Look::Running => {
                // A child ended or moved while we were looking: look again, at once.
                let event = sched::with(|s| {
                    s.current_process()
                        .and_then(|serial| s.processes.get_mut(&serial))
                        .is_some_and(|p| core::mem::take(&mut p.child_event))
                });
                if event && quick < QUICK_LOOKS {
                    quick += 1;
                    continue;
                }
                if crate::time::now_ns() >= deadline {
                    return Err(Error::TimedOut);
                }
                if !event {
                    sched::block(Block::Wait(deadline));
                }
            }
        }
    }
}

/// What a child's core says of it.
enum Answer {
    Ended(WaitStatus),
    Running,
    Gone,
}

/// Ask the core of child `child` (a pid of another core) for its status. Where it left
/// that core: if we follow it under that pid, the notice of its move is on its way (and
/// wakes us), so it counts as running; otherwise (a pid we were not following: named by
/// the caller) follow it to where it went, a few moves at most per look (a child of ours
/// that went to this core counts as running; if none is here, it is gone). Returns the
/// pid the answer is about.
fn ask(child: Pid) -> Result<(Pid, Answer), Error> {
    let mut at = child;
    for _ in 0..FORWARD_HOPS {
        match rpcc::call(at.core(), Op::TakeStatus(at)) {
            Ok(Out::Status(Some(status))) if status.how == abi::ENDED_MIGRATED => {
                let new = Pid(status.code);
                let (follows, ours_here) = sched::with(|s| {
                    let me = s
                        .current_process()
                        .map(|serial| crate::machine::pid(current_core(), serial));
                    let follows = me
                        .and_then(|me| s.processes.get(&me.serial()))
                        .is_some_and(|p| p.followed.iter().any(|f| f.now == at));
                    let ours_here = new.core() == current_core()
                        && s.processes
                            .get(&new.serial())
                            .is_some_and(|c| Some(c.parent) == me);
                    (follows, ours_here)
                });
                if follows || ours_here {
                    return Ok((at, Answer::Running));
                }
                if new.core() == current_core() {
                    return Ok((at, Answer::Gone));
                }
                at = new;
            }
            Ok(Out::Status(Some(status))) => return Ok((at, Answer::Ended(status))),
            Ok(_) => return Ok((at, Answer::Running)),
            Err(Error::NoSuchProcess) => return Ok((at, Answer::Gone)),
            Err(e) => return Err(e),
        }
    }
    Ok((at, Answer::Running))
}

/// What the first, local part of a look found.
struct Found {
    /// A child of this core that ended (collected now): the pid to report, its status.
    ended: Option<(Pid, WaitStatus)>,
    /// A wanted child of this core still runs (or waits to be joined).
    local_running: bool,
    /// Wanted children on other cores, by the pids they have now.
    remote: Vec<Pid>,
    /// Any child: tentative entries wait to be joined.
    joining: bool,
}

fn look(pid: Pid) -> Result<Look, Error> {
    let found = sched::with(|s| look_here(s, pid))?;
    if let Some((child, status)) = found.ended {
        return Ok(Look::Ended(child, status));
    }
    let mut running = found.local_running || found.joining;
    for child in found.remote {
        match ask(child)? {
            (_, Answer::Running) => running = true,
            (at, Answer::Ended(status)) => {
                let first = forget_followed(at);
                let reported = if pid == Pid(0) {
                    first.unwrap_or(at)
                } else {
                    pid
                };
                return Ok(Look::Ended(reported, status));
            }
            // Not ours there (its process resource was closed, or it never was). A child
            // that moved meanwhile has a new pid in its entry by now (its old core answers
            // "moved" until we heard), so this forgets only a child that is gone.
            (at, Answer::Gone) => {
                forget_followed(at);
            }
        }
    }
    // Moves or children learnt of while we asked.
    let learnt = sched::with(|s| {
        s.current_process()
            .and_then(|serial| s.processes.get(&serial))
            .is_some_and(|p| p.child_event || (pid == Pid(0) && !p.followed.is_empty()))
    });
    if running || learnt {
        Ok(Look::Running)
    } else {
        Err(Error::NoSuchProcess)
    }
}

/// The local part of a look (scheduler borrowed): collect an ended wanted child of this
/// core, and list the wanted ones elsewhere.
fn look_here(s: &mut sched::Sched, pid: Pid) -> Result<Found, Error> {
    let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
    let here = current_core();
    let me = crate::machine::pid(here, serial);
    let p = s.processes.get(&serial).ok_or(Error::NoSuchProcess)?;
    // Entries naming a process of this core that is gone (collected under that pid before
    // the move that brought it here was heard of) follow nothing.
    let gone = |q: Pid| q.core() == here && !s.processes.contains_key(&q.serial());
    let mut followed: Vec<Followed> = p
        .followed
        .iter()
        .copied()
        .filter(|f| !gone(f.now))
        .collect();
    // The pid the wanted child has now.
    let want = match pid {
        Pid(0) => pid,
        _ => followed
            .iter()
            .find(|f| f.first == pid)
            .map_or(pid, |f| f.now),
    };
    // Any child: one that moved here before we heard of it, or whose entry waits to be
    // joined, would be reported under a pid we never knew: it waits for the notice.
    let held_back = |c: &Process| match followed.iter().find(|f| f.now == c.pid) {
        Some(f) => f.tentative,
        None => c.moved_from.is_some(),
    };
    let mut local_running = false;
    let mut ended = None;
    for c in s.processes.values().filter(|c| c.parent == me) {
        if pid == Pid(0) && held_back(c) {
            local_running = true;
        } else if pid == Pid(0) || c.pid == want {
            match c.ended {
                Some(status) if ended.is_none() => ended = Some((c.pid, status)),
                Some(_) => {}
                None => local_running = true,
            }
        }
    }
    let mut remote: Vec<Pid> = followed
        .iter()
        .filter(|f| f.now.core() != here)
        .filter(|f| match pid {
            Pid(0) => !f.tentative,
            _ => f.now == want,
        })
        .map(|f| f.now)
        .collect();
    // A named child on another core we have not heard of (a notice on its way): its core
    // knows whether it is ours.
    if pid != Pid(0) && want.core() != here && remote.is_empty() {
        remote.push(want);
    }
    let joining = pid == Pid(0) && followed.iter().any(|f| f.tentative);
    let ended = ended.map(|(child, status)| {
        s.processes.remove(&child.serial());
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
        let first = followed
            .iter()
            .position(|f| f.now == child)
            .map(|i| followed.remove(i).first);
        let reported = match pid {
            Pid(0) => first.unwrap_or(child),
            _ => pid,
        };
        (reported, status)
    });
    let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
    p.child_event = false;
    p.followed = followed;
    if ended.is_none() && !local_running && remote.is_empty() && !joining {
        return Err(Error::NoSuchProcess);
    }
    Ok(Found {
        ended,
        local_running,
        remote,
        joining,
    })
}
