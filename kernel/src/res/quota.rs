//! Limits per user and per process: what one user can pile up on a core, so that it meets
//! a clear `Error::Limit` at its limit while every other user's programs keep working.
//!
//! Without them one program could fill a core's resource table (16,384 entries) or its
//! memory, or leave 70,000 unreaped children, and the whole core suffered. The limits
//! (docs/resources.md, "Limits"):
//!
//! | what | limit | counted where |
//! | --- | --- | --- |
//! | children not yet waited for (running or ended), per process, on all cores | [`CHILDREN_PER_PROCESS`] | the parent's core, at SPAWN and process OPEN |
//! | processes (running or ended, not yet reaped), per user and core | [`PROCESSES_PER_USER`] | the core that gets the process (spawn, open, migration) |
//! | resources in a core's table, per creating user | [`RESOURCES_PER_USER`] | the core's table ([`Usage`], here) |
//! | frames of user memory (address spaces and vregions), per user and core | half of what the core gives programs ([`frames_limit`]) | here |
//! | kernel heap a resource may fill with users' data (pipe buffers) | an eighth of what the core gives programs per core, a quarter of that per user, and within the user's frames ([`charge_heap`]) | here |
//!
//! The kernel's own user is never limited. The administrator is limited like everyone
//! else: it is the user the shell and the benchmarks run as, and the same limits keep one
//! of its runaway programs from taking a core from the shell. Memory of an address space is
//! charged to the user the process was created as (a later `SETUSER` does not move it), and
//! a vregion's to its creator, on the core that holds the frames.
//!
//! The counts for processes and children are taken from the scheduler's own records when
//! needed (`proc::may_add_child`, `proc::install`), so they can never drift; resources and
//! frames are counted here, per core, in a [`Usage`] from `libs/rescore`.

#![deny(unsafe_code)]

use crate::percore;
use abi::res::UserId;
use abi::Error;
use core::sync::atomic::Ordering;
use rescore::quota::{Counted, Limits, Usage};

/// Most children a process may have that it has not waited for yet (running or ended).
pub const CHILDREN_PER_PROCESS: usize = 1024;
/// Most processes (running, or ended and not yet waited for) one user may have on a core.
pub const PROCESSES_PER_USER: usize = 2048;
/// Most resources one user may have in a core's table: a quarter of it, so at least three
/// users' worth is always left for others.
pub const RESOURCES_PER_USER: u64 = super::local::MAX_RESOURCES as u64 / 4;

/// Most frames of user memory one user may hold on a core: half of what the core's pool
/// gives programs (everything but the kernel's reserve).
pub fn frames_limit() -> u64 {
    let mem = &percore::this().mem;
    let total = mem.frames_total.load(Ordering::Relaxed);
    let reserved = mem.frames_reserved.load(Ordering::Relaxed);
    total.saturating_sub(reserved) / 2
}

/// The limits as this core applies them.
pub fn limits() -> Limits {
    Limits {
        resources: RESOURCES_PER_USER,
        frames: frames_limit(),
        // A quarter of the core's bound for such heap ([`heap_bound`]): at least three
        // users' worth is always left for others, as for the resource table.
        heap: heap_bound() / 4,
    }
}

/// This core's per-user counts (kept in `percore`).
pub struct CoreUsage(Usage);

impl CoreUsage {
    pub const fn new() -> Self {
        // The frame limit is only known once the core has its pool: set at first use.
        CoreUsage(Usage::new(Limits {
            resources: RESOURCES_PER_USER,
            frames: 0,
            heap: 0,
        }))
    }
}

fn with_usage<R>(f: impl FnOnce(&mut Usage) -> R) -> R {
    percore::this().quota.with(|u| {
        if u.0.limits().frames == 0 {
            u.0.set_limits(limits());
        }
        f(&mut u.0)
    })
}

fn charge(user: UserId, what: Counted, n: u64) -> Result<(), Error> {
    if user == UserId::KERNEL || n == 0 {
        return Ok(());
    }
    with_usage(|u| u.charge(user.0, what, n)).map_err(|e| {
        log::debug!(
            "limit: user {} holds {} of {:?} on this core, asked {} more (limit {})",
            user.0,
            e.held,
            e.what,
            e.asked,
            e.limit
        );
        Error::Limit
    })
}

fn uncharge(user: UserId, what: Counted, n: u64) {
    if user != UserId::KERNEL && n != 0 {
        with_usage(|u| u.uncharge(user.0, what, n));
    }
}

/// Charge `user` `n` frames of user memory on this core (`Error::Limit` past its limit).
pub fn charge_frames(user: UserId, n: u64) -> Result<(), Error> {
    charge(user, Counted::Frames, n)
}

/// Give back `n` frames charged to `user` on this core.
pub fn uncharge_frames(user: UserId, n: u64) {
    uncharge(user, Counted::Frames, n);
}

/// Kernel heap held for users' data on each core (frames: pipe buffers at their
/// capacity), all users together. The heap never gives its memory back to the core's pool,
/// so this is bounded apart from each user's share: at most a quarter of a user's share
/// (an eighth of what the core gives programs) ever becomes heap this way.
static HEAP_FRAMES: [core::sync::atomic::AtomicU64; abi::MAX_CORES] =
    [const { core::sync::atomic::AtomicU64::new(0) }; abi::MAX_CORES];

/// The most kernel heap users' resources may fill on this core, all users together
/// (frames): an eighth of what the core gives programs.
fn heap_bound() -> u64 {
    frames_limit() / 4
}

/// Charge `user` `n` frames of kernel heap it may fill on this core (a pipe's buffer): as
/// its memory, against its share of such heap (a quarter of the core's bound, so one user
/// cannot take it all: found by a review of the first version), and against the core's
/// bound ([`HEAP_FRAMES`]); `Limit` past any.
pub fn charge_heap(user: UserId, n: u64) -> Result<(), Error> {
    if user == UserId::KERNEL || n == 0 {
        return Ok(());
    }
    let held = &HEAP_FRAMES[percore::current_core()];
    let bound = heap_bound();
    if held.load(Ordering::Relaxed).saturating_add(n) > bound {
        log::debug!("limit: this core's heap for users' data is at its bound ({bound} frames)");
        return Err(Error::Limit);
    }
    charge(user, Counted::Heap, n)?;
    if let Err(e) = charge_frames(user, n) {
        uncharge(user, Counted::Heap, n);
        return Err(e);
    }
    held.fetch_add(n, Ordering::Relaxed);
    Ok(())
}

/// Give back `n` frames of heap charged to `user` on this core ([`charge_heap`]).
pub fn uncharge_heap(user: UserId, n: u64) {
    if user == UserId::KERNEL || n == 0 {
        return;
    }
    uncharge_frames(user, n);
    uncharge(user, Counted::Heap, n);
    let held = &HEAP_FRAMES[percore::current_core()];
    let _ = held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
        Some(h.saturating_sub(n))
    });
}

/// Charge `user` one entry of this core's resource table.
pub fn charge_resource(user: UserId) -> Result<(), Error> {
    charge(user, Counted::Resources, 1)
}

/// Give back a table entry charged to `user`.
pub fn uncharge_resource(user: UserId) {
    uncharge(user, Counted::Resources, 1);
}

/// What each user holds on this core: (user, resources, frames), lowest user first.
pub fn usage() -> alloc::vec::Vec<(u32, u64, u64)> {
    with_usage(|u| u.users().collect())
}
