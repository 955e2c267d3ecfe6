//! Parents and children across cores: `WAIT`, and what a parent learns when a child on
//! another core ends, moves, or is orphaned.
//!
//! A child lives where it was created, which need not be its parent's core. The child's
//! record (with its parent's pid) stays on the child's core; the parent's record lists its
//! children on other cores (`remote_children`). When such a child ends, its core sends the
//! parent's core a notice (`ChildEnded`) that wakes a waiting parent, which then asks for
//! the status (`TakeStatus`, which also removes the zombie). A child that migrates leaves
//! no zombie: its old core tells the parent its new pid (`ChildMoved`), and a `WAIT` for the
//! old pid waits for the new one. A parent that ends tells the cores of its remote children
//! (`Orphaned`), which treat them as the kernel's, as for local children.

#![deny(unsafe_code)]

use super::{sched, Block, ThreadState};
use crate::percore::{self, current_core};
use crate::rpcc::{self, Op, Out};
use abi::{Error, Pid, WaitStatus};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Most (old, new) pid pairs a parent remembers for children that migrated.
const MOVED_MEMORY: usize = 16;

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
    } else if parent != Pid(0) && parent != super::TEST_PARENT {
        rpcc::notice(parent.core(), Op::ChildEnded(parent));
    }
}

/// Child `old` of `parent` now lives as `new` (migration).
pub(super) fn child_moved(s: &mut sched::Sched, parent: Pid, old: Pid, new: Pid) {
    if parent.core() == current_core() {
        moved_here(s, parent, old, new);
    } else if parent != Pid(0) && parent != super::TEST_PARENT {
        rpcc::notice(parent.core(), Op::ChildMoved { parent, old, new });
    }
}

fn moved_here(s: &mut sched::Sched, parent: Pid, old: Pid, new: Pid) {
    if let Some(pp) = s.processes.get_mut(&parent.serial()) {
        pp.remote_children.retain(|&c| c != old);
        if new.core() != current_core() && !pp.remote_children.contains(&new) {
            pp.remote_children.push(new);
        }
        if pp.moved.len() >= MOVED_MEMORY {
            pp.moved.remove(0);
        }
        pp.moved.push((old, new));
    }
    wake_waiting_parent(s, parent);
}

/// The parent `me` ended: its children on other cores become the kernel's.
pub(super) fn orphan_children(s: &mut sched::Sched, me: Pid, remote: Vec<Pid>) {
    // Local children: those already ended will never be waited for, so they go now; the
    // others become the kernel's and go when they end.
    s.processes
        .retain(|_, c| c.parent != me || c.ended.is_none());
    for child in s.processes.values_mut().filter(|c| c.parent == me) {
        child.parent = Pid(0);
    }
    let mut cores: Vec<usize> = remote.iter().map(|c| c.core()).collect();
    cores.sort_unstable();
    cores.dedup();
    for core in cores {
        rpcc::notice(core, Op::Orphaned(me));
    }
}

/// `Orphaned` on a child's core: the children of `parent` here are the kernel's now.
pub fn note_orphaned(parent: Pid) {
    sched::with(|s| {
        s.processes
            .retain(|_, c| c.parent != parent || c.ended.is_none());
        for child in s.processes.values_mut().filter(|c| c.parent == parent) {
            child.parent = Pid(0);
        }
        percore::this()
            .stats
            .processes
            .store(s.processes.len() as u64, Ordering::Relaxed);
    });
}

/// `ChildEnded` on the parent's core.
pub fn note_child_ended(parent: Pid) {
    if parent.core() == current_core() {
        sched::with(|s| wake_waiting_parent(s, parent));
    }
}

/// `ChildMoved` on the parent's core.
pub fn note_child_moved(parent: Pid, old: Pid, new: Pid) {
    if parent.core() == current_core() {
        sched::with(|s| moved_here(s, parent, old, new));
    }
}

/// The running process has a new child on another core (created there for it).
pub fn note_remote_child(child: Pid) {
    sched::with(|s| {
        if let Some(p) = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial))
        {
            if child.core() != current_core() && !p.remote_children.contains(&child) {
                p.remote_children.push(child);
            }
        }
    });
}

/// WAIT on another core's behalf: the status of child `pid` (of this core) of the flow's
/// process, if it ended (and then the record goes); `None` if it still runs.
pub fn take_child_status(pid: Pid) -> Result<Option<WaitStatus>, Error> {
    let parent = crate::res::flow_pid().ok_or(Error::NoSuchProcess)?;
    if pid.core() != current_core() {
        return Err(Error::NoSuchProcess);
    }
    sched::with(|s| {
        let c = s.processes.get(&pid.serial()).ok_or(Error::NoSuchProcess)?;
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

fn forget_remote_child(child: Pid) {
    sched::with(|s| {
        if let Some(p) = s
            .current_process()
            .and_then(|serial| s.processes.get_mut(&serial))
        {
            p.remote_children.retain(|&c| c != child);
        }
    });
}

/// What one look at the children found.
enum Look {
    Ended(Pid, WaitStatus),
    Running,
}

/// WAIT: collect an ended child (`pid` or any if `Pid(0)`), on any core, blocking until one
/// ends or `timeout_ns` passes (`TimedOut`). A child that migrated is waited for under its
/// new pid.
pub fn wait(pid: Pid, timeout_ns: u64) -> Result<(Pid, WaitStatus), Error> {
    let deadline = crate::time::now_ns().saturating_add(timeout_ns);
    loop {
        match look(pid)? {
            Look::Ended(child, status) => return Ok((child, status)),
            Look::Running if crate::time::now_ns() >= deadline => return Err(Error::TimedOut),
            Look::Running => {
                // Sleep, unless a child elsewhere ended or moved while we were looking.
                let event = sched::with(|s| {
                    s.current_process()
                        .and_then(|serial| s.processes.get_mut(&serial))
                        .is_some_and(|p| core::mem::take(&mut p.child_event))
                });
                if !event {
                    sched::block(Block::Wait(deadline));
                }
            }
        }
    }
}

fn look(pid: Pid) -> Result<Look, Error> {
    let (ended, local_running, remote) = sched::with(|s| -> Result<_, Error> {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let me = Pid::new(current_core(), serial);
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        p.child_event = false;
        // A child that moved is waited for under its new pid.
        let mut want = pid;
        while let Some(&(_, new)) = p.moved.iter().find(|m| m.0 == want) {
            want = new;
        }
        let wanted = |c: Pid| want == Pid(0) || c == want;
        let mut remote: Vec<Pid> = p
            .remote_children
            .iter()
            .copied()
            .filter(|&c| wanted(c))
            .collect();
        // A named child on another core we have not heard of yet (a notice on its way):
        // its core knows whether it is ours.
        if want != Pid(0) && want.core() != current_core() && remote.is_empty() {
            remote.push(want);
        }
        let local: Vec<u32> = s
            .processes
            .values()
            .filter(|c| c.parent == me && wanted(c.pid))
            .map(|c| c.pid.serial())
            .collect();
        for &serial in &local {
            if let Some(status) = s.processes.get(&serial).and_then(|c| c.ended) {
                let child = s.processes.remove(&serial).map_or(Pid(0), |c| c.pid);
                percore::this()
                    .stats
                    .processes
                    .store(s.processes.len() as u64, Ordering::Relaxed);
                return Ok((Some((child, status)), true, remote));
            }
        }
        if local.is_empty() && remote.is_empty() {
            return Err(Error::NoSuchProcess);
        }
        Ok((None, !local.is_empty(), remote))
    })?;
    if let Some((child, status)) = ended {
        return Ok(Look::Ended(child, status));
    }
    let mut any = false;
    for child in remote {
        match rpcc::call(child.core(), Op::TakeStatus(child)) {
            Ok(Out::Status(Some(status))) => {
                forget_remote_child(child);
                return Ok(Look::Ended(child, status));
            }
            Ok(_) => any = true,
            // Not (or no longer) ours there: it moved (a notice says where), or its
            // process resource was closed.
            Err(Error::NoSuchProcess) => forget_remote_child(child),
            Err(e) => return Err(e),
        }
    }
    // Any child: others may have been learnt of meanwhile (a move).
    let learnt = pid == Pid(0)
        && sched::with(|s| {
            s.current_process()
                .and_then(|serial| s.processes.get(&serial))
                .is_some_and(|p| !p.remote_children.is_empty() || p.child_event)
        });
    if any || local_running || learnt {
        Ok(Look::Running)
    } else {
        Err(Error::NoSuchProcess)
    }
}
