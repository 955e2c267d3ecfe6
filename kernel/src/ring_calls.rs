//! The ring calls (`RING_SETUP`, `ENTER`; issue 13): setting up a process's submission and
//! completion rings, and taking a batch of submissions in one system call, optionally
//! waiting for completions. The contract is in `abi::ring`; the ring memory and the
//! completions are `ring.rs`; the index rules (and their host tests) `libs/ring`.
//!
//! `ENTER` does the work of many `SUBMIT`s with one entry: the process's record is looked
//! up once, a no-op is answered in place (one entry copied in, one written out: no ticket,
//! no allocation, no lookup), and any other request goes through the same `ipc::start` as
//! `SUBMIT`, with a ticket whose completion `ipc` hands to the ring.

#![deny(unsafe_code)]

use crate::ipc;
use crate::proc::{self, sched};
use crate::ring::{Ring, RingMem, Waiting};
use abi::ring::{Layout, RingCqe};
use abi::Error;
use alloc::vec::Vec;
use core::sync::atomic::Ordering::Relaxed;

/// Run `f` on the calling process's ring (`NoSuchResource` if it has none).
fn with_ring<R>(f: impl FnOnce(&mut Ring) -> Result<R, Error>) -> Result<R, Error> {
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        f(p.ipc.ring.as_mut().ok_or(Error::NoSuchResource)?)
    })
}

/// RING_SETUP(address, submission entries) -> bytes mapped.
pub fn setup(addr: u64, entries: u64) -> Result<u64, Error> {
    let layout = Layout::new(entries).ok_or(Error::InvalidArgument)?;
    let mem = RingMem::new(layout, proc::current_user())?;
    sched::with(|s| {
        let serial = s.current_process().ok_or(Error::NoSuchProcess)?;
        let p = s.processes.get_mut(&serial).ok_or(Error::NoSuchProcess)?;
        if p.ipc.ring.is_some() {
            return Err(Error::Busy);
        }
        let vs = p.vspace.as_mut().ok_or(Error::NoSuchProcess)?;
        vs.map_pinned(addr, mem.frames())?;
        p.ipc.ring = Some(Ring::new(mem));
        Ok(u64::from(layout.pages) * u64::from(abi::ring::PAGE))
    })
}

/// Marks the ring as being written by this `ENTER` (completions arriving meanwhile wait in
/// the kernel); a second `ENTER` is `Busy` until it ends.
struct Entering<'a>(&'a RingMem);

impl<'a> Entering<'a> {
    fn new(mem: &'a RingMem) -> Result<Self, Error> {
        if mem.entering.swap(true, Relaxed) {
            return Err(Error::Busy);
        }
        Ok(Entering(mem))
    }
}

impl Drop for Entering<'_> {
    fn drop(&mut self) {
        self.0.entering.store(false, Relaxed);
    }
}

/// ENTER(submissions to take, completions to wait for, timeout) -> submissions taken.
pub fn enter(to_submit: u64, min_complete: u64, timeout_ns: u64) -> Result<u64, Error> {
    let (mem, outstanding, waiting) =
        with_ring(|r| Ok((r.mem(), r.outstanding(), r.waiting.len())))?;
    if min_complete > u64::from(mem.layout.cq_entries) {
        return Err(Error::InvalidArgument);
    }
    let taken = {
        let guard = Entering::new(&mem)?;
        let mut outstanding = outstanding;
        if waiting > 0 {
            flush(guard.0)?;
            outstanding = with_ring(|r| Ok(r.outstanding()))?;
        }
        take(guard.0, to_submit, outstanding as u32)?
    };
    if min_complete == 0 {
        return Ok(u64::from(taken));
    }
    let mut deadline = None;
    loop {
        let (_, head) = mem.user_indices();
        let ready = ring::span(head, mem.cq_tail(), mem.layout.cq_entries)
            .map_err(|_| Error::InvalidArgument)?;
        if u64::from(ready) >= min_complete {
            return Ok(u64::from(taken));
        }
        // The clock is read only once there is something to wait for.
        let deadline =
            *deadline.get_or_insert_with(|| crate::time::now_ns().saturating_add(timeout_ns));
        let (outstanding, waiting) = with_ring(|r| Ok((r.outstanding(), r.waiting.len())))?;
        if waiting > 0 {
            if let Ok(guard) = Entering::new(&mem) {
                flush(guard.0)?;
                continue;
            }
        }
        if outstanding == 0 {
            // Nothing more can arrive.
            return Ok(u64::from(taken));
        }
        if crate::time::now_ns() >= deadline {
            return if taken == 0 {
                Err(Error::TimedOut)
            } else {
                Ok(u64::from(taken))
            };
        }
        sched::block(sched::Block::Ipc(deadline));
    }
}

/// Take up to `wanted` submissions (within what `libs/ring` admits) and start them.
fn take(mem: &RingMem, wanted: u64, outstanding: u32) -> Result<u32, Error> {
    let (sq_tail, cq_head) = mem.user_indices();
    let l = mem.layout;
    let at = ring::Entering {
        sq_head: mem.sq_head(),
        sq_tail,
        sq_entries: l.sq_entries,
        cq_head,
        cq_tail: mem.cq_tail(),
        cq_entries: l.cq_entries,
        outstanding,
    };
    let n = ring::admit(&at, wanted).map_err(|_| Error::InvalidArgument)?;
    let (mut head, mut tail) = (at.sq_head, at.cq_tail);
    let mut slow = false;
    for _ in 0..n {
        // Each word is read once and only that copy is used: a no-op needs its kind and
        // its user_data; anything else is copied whole, and the copy decides (even if the
        // program changed the kind meanwhile).
        let i = head;
        head = head.wrapping_add(1);
        if mem.answer_nop(i, tail) {
            tail = tail.wrapping_add(1);
            continue;
        }
        let sqe = mem.take_sqe(i);
        // Anything else may block (RPCC) or complete at once: the ring's indices are
        // published first, and completions meanwhile wait in the kernel.
        slow = true;
        mem.set_sq_head(head);
        mem.publish_cq(tail);
        let started = crate::ipc_calls::bytes_in(&sqe.sub)
            .and_then(|bytes| ipc::submit_ring(&sqe.sub, bytes, sqe.user_data));
        if let Err(e) = started {
            mem.push_cqe(&RingCqe {
                user_data: sqe.user_data,
                status: e as u64,
                ..RingCqe::default()
            });
        }
        tail = mem.cq_tail();
    }
    mem.set_sq_head(head);
    mem.publish_cq(tail);
    if slow {
        flush(mem)?;
    }
    Ok(n)
}

/// Write the completions waiting in the kernel into the ring, as far as there is room,
/// copying a read's bytes into the program's buffer first (the caller holds `Entering`).
fn flush(mem: &RingMem) -> Result<(), Error> {
    let room = mem.cq_room().unwrap_or(0);
    let items: Vec<Waiting> = with_ring(|r| Ok(r.take_waiting(room)))?;
    let written = !items.is_empty();
    for w in items {
        let mut cqe = w.cqe;
        if let Some((at, bytes)) = w.bytes {
            let out = crate::mm::user::UserSliceMut::<u8>::new(at, bytes.len());
            if proc::with_current_vspace(|vs| out.write(vs, &bytes)).is_err() {
                cqe.status = Error::BadAddress as u64;
            }
        }
        mem.push_cqe(&cqe);
    }
    if written {
        // Another thread of the process may wait in ENTER for these.
        sched::with(|s| {
            if let Some(serial) = s.current_process() {
                ipc::wake_waiting_threads(s, serial, ipc::Waits::Answer);
            }
        });
    }
    Ok(())
}
