//! Submission and completion rings (issue 13; io_uring's shape on the request path): the
//! ring memory the kernel pins and shares with one process, and the completions of ring
//! requests, which go to the completion ring instead of the result queue of `COLLECT`.
//!
//! The memory is frames of the process's core, owned here ([`RingMem`]) and mapped into the
//! process (`VSpace::map_pinned`): the kernel reaches every entry through the direct map
//! without walking user page tables, and the program can neither free nor move them (if it
//! unmapped its view, the kernel would not notice and nothing would break). `ENTER` reaches
//! the [`RingMem`] through a [`MemRef`], not a counted reference: a thread blocked in a
//! system call of a process that ends is removed without running again (its stack is not
//! unwound), so anything it held would leak; a `MemRef` holds nothing and is never used
//! after its process has ended.
//!
//! The kernel's indices (`sq_head`, `cq_tail`) live here, in [`RingMem`], and are only
//! copied out to the shared header; the program's (`sq_tail`, `cq_head`) are read from the
//! header and checked by `libs/ring`. Only the owning core ever touches a ring, with
//! interrupts masked, so plain relaxed atomics are enough.
//!
//! The calls (`RING_SETUP`, `ENTER`) are in `ring_calls.rs`; `ipc.rs` hands the completions
//! of tickets marked [`RING_TICKET`] to [`complete`].

use crate::arch::x86_64::paging::phys_to_virt;
use crate::mm::frames;
use abi::ipc::Completion;
use abi::res::UserId;
use abi::ring::{Layout, RingCqe, RingHeader, RingSqe, MAX_PAGES, PAGE};
use abi::Error;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::mem::offset_of;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// The bit that marks a ticket as a ring request's (its completion goes to the ring).
pub const RING_TICKET: u64 = 1 << 63;

/// The ring memory: pinned frames and the kernel's indices.
pub struct RingMem {
    frames: [u64; MAX_PAGES],
    pub layout: Layout,
    /// The user the frames are charged to.
    user: UserId,
    /// The kernel's indices (the header holds copies for the program).
    sq_head: AtomicU32,
    cq_tail: AtomicU32,
    /// An `ENTER` is taking submissions (a second one, from another thread, is `Busy`).
    pub entering: AtomicBool,
}

impl RingMem {
    /// Fresh zeroed frames for `layout` from this core's pool, charged to `user`, with the
    /// header written.
    pub fn new(layout: Layout, user: UserId) -> Result<RingMem, Error> {
        let pages = layout.pages as usize;
        crate::res::quota::charge_frames(user, pages as u64)?;
        let mut mem = RingMem {
            frames: [0; MAX_PAGES],
            layout,
            user,
            sq_head: AtomicU32::new(0),
            cq_tail: AtomicU32::new(0),
            entering: AtomicBool::new(false),
        };
        for i in 0..pages {
            // `Drop` frees the frames taken so far and gives the charge back.
            mem.frames[i] = frames::alloc_user().ok_or(Error::NoMemory)?;
            crate::arch::x86_64::paging::zero_frame(mem.frames[i]);
        }
        mem.write(0, &layout.header());
        Ok(mem)
    }

    pub fn frames(&self) -> &[u64] {
        &self.frames[..self.layout.pages as usize]
    }

    /// Direct-map address of byte `offset` (within the ring; a record never crosses a page).
    fn at(&self, offset: u32) -> *mut u8 {
        let frame = self.frames[(offset / PAGE) as usize];
        (phys_to_virt(frame) + u64::from(offset % PAGE)) as *mut u8
    }

    fn read<T: bytemuck::Pod>(&self, offset: u32) -> T {
        debug_assert!(offset % PAGE + core::mem::size_of::<T>() as u32 <= PAGE);
        // SAFETY: the bytes are inside one of our pinned frames (the offset comes from the
        // layout), direct-mapped; any bit pattern is a valid `T` (Pod), and the program
        // writing them meanwhile only changes which value is read (a volatile read, once).
        unsafe { core::ptr::read_volatile(self.at(offset) as *const T) }
    }

    fn write<T: bytemuck::Pod>(&self, offset: u32, value: &T) {
        debug_assert!(offset % PAGE + core::mem::size_of::<T>() as u32 <= PAGE);
        // SAFETY: as in `read`; the frames are ours, so writing them harms nobody else.
        unsafe { core::ptr::write_volatile(self.at(offset) as *mut T, *value) }
    }

    /// The program's `sq_tail` and `cq_head`, as they are now.
    pub fn user_indices(&self) -> (u32, u32) {
        (
            self.read(offset_of!(RingHeader, sq_tail) as u32),
            self.read(offset_of!(RingHeader, cq_head) as u32),
        )
    }

    pub fn sq_head(&self) -> u32 {
        self.sq_head.load(Relaxed)
    }

    pub fn cq_tail(&self) -> u32 {
        self.cq_tail.load(Relaxed)
    }

    /// Copy submission `i` out of the ring (once; the caller checks only the copy).
    pub fn take_sqe(&self, i: u32) -> RingSqe {
        self.read(self.layout.sqe_offset(i))
    }

    /// If submission `i` is a no-op, answer it with a completion at `tail` (not published:
    /// [`publish_cq`](Self::publish_cq) does, once for a batch) and say so. Each word is
    /// read once (the kind, then the `user_data`), and only the completion's first three
    /// words are written: a no-op's `msg` means nothing.
    #[inline]
    pub fn answer_nop(&self, i: u32, tail: u32) -> bool {
        let sqe = self.at(self.layout.sqe_offset(i)) as *const RingSqe;
        // SAFETY: a whole entry inside one of our pinned frames (the layout never lets one
        // cross a page), direct-mapped and aligned; any bits are a valid `u64`.
        let kind = unsafe { core::ptr::read_volatile(&raw const (*sqe).sub.kind) };
        if kind != abi::ipc::SUBMIT_NOP {
            return false;
        }
        // SAFETY: as above.
        let user_data = unsafe { core::ptr::read_volatile(&raw const (*sqe).user_data) };
        let cqe = self.at(self.layout.cqe_offset(tail)) as *mut RingCqe;
        // SAFETY: as above, for a completion slot; the frames are ours.
        unsafe {
            core::ptr::write_volatile(&raw mut (*cqe).user_data, user_data);
            core::ptr::write_volatile(&raw mut (*cqe).status, 0);
            core::ptr::write_volatile(&raw mut (*cqe).value, 0);
        }
        true
    }

    /// Note that submissions up to `head` are taken (and tell the program).
    pub fn set_sq_head(&self, head: u32) {
        self.sq_head.store(head, Relaxed);
        self.write(offset_of!(RingHeader, sq_head) as u32, &head);
    }

    /// Write a completion at the tail, without checking for room (the caller did), and
    /// publish it.
    pub fn push_cqe(&self, cqe: &RingCqe) {
        let tail = self.cq_tail.load(Relaxed);
        self.write(self.layout.cqe_offset(tail), cqe);
        self.publish_cq(tail.wrapping_add(1));
    }

    /// Publish completions up to `tail`.
    pub fn publish_cq(&self, tail: u32) {
        self.cq_tail.store(tail, Relaxed);
        self.write(offset_of!(RingHeader, cq_tail) as u32, &tail);
    }

    /// Free completion slots now (`None`: the program's `cq_head` is nonsense).
    pub fn cq_room(&self) -> Option<u32> {
        let head: u32 = self.read(offset_of!(RingHeader, cq_head) as u32);
        ring::cq_room(head, self.cq_tail(), self.layout.cq_entries).ok()
    }

    fn set_overflow(&self, n: usize) {
        self.write(offset_of!(RingHeader, overflow) as u32, &(n as u32));
    }
}

impl Drop for RingMem {
    fn drop(&mut self) {
        for &f in self.frames.iter().filter(|&&f| f != 0) {
            let _ = frames::free(f);
        }
        crate::res::quota::uncharge_frames(self.user, u64::from(self.layout.pages));
    }
}

/// A completion that waits in the kernel: the ring was full, or bytes of a read must be
/// copied into the program's buffer first (at the next `ENTER`, in its address space).
pub struct Waiting {
    pub cqe: RingCqe,
    pub bytes: Option<(u64, Vec<u8>)>,
}

/// The calling thread's view of its process's ring memory during one system call.
///
/// It holds no count: the memory belongs to the process's [`Ring`], which lives as long as
/// the process (a ring is never taken down before), and a thread runs only while its
/// process lives: an ending process removes its other threads, blocked ones included,
/// and they never run again. So a `MemRef` made by a thread of the process stays valid
/// for every instruction that thread executes.
#[derive(Clone, Copy)]
pub struct MemRef(core::ptr::NonNull<RingMem>);

impl core::ops::Deref for MemRef {
    type Target = RingMem;
    fn deref(&self) -> &RingMem {
        // SAFETY: see the type's doc: the box it points into outlives every use, and it is
        // only ever read through shared references (its mutable state is atomics).
        unsafe { self.0.as_ref() }
    }
}

/// A process's ring, in its `ProcIpc`.
pub struct Ring {
    mem: Box<RingMem>,
    /// Ring requests in flight: (ticket, user_data). A short vector: found by a scan, and
    /// once warm it allocates nothing.
    pub tickets: Vec<(u64, u64)>,
    /// Completions waiting for the next `ENTER` (at most the in-flight limit: each was a
    /// ticket).
    pub waiting: VecDeque<Waiting>,
}

impl Ring {
    pub fn new(mem: RingMem) -> Ring {
        Ring {
            mem: Box::new(mem),
            tickets: Vec::new(),
            waiting: VecDeque::new(),
        }
    }

    /// The ring memory, for a thread of the ring's process (see [`MemRef`]).
    pub fn mem(&self) -> MemRef {
        MemRef(core::ptr::NonNull::from(&*self.mem))
    }

    /// Requests whose completion is not in the ring yet.
    pub fn outstanding(&self) -> usize {
        self.tickets.len() + self.waiting.len()
    }

    /// Take up to `room` waiting completions (for `ENTER` to write).
    pub fn take_waiting(&mut self, room: u32) -> Vec<Waiting> {
        let n = (room as usize).min(self.waiting.len());
        let out = self.waiting.drain(..n).collect();
        self.mem.set_overflow(self.waiting.len());
        out
    }
}

/// Ring request `completion.ticket` finished: write its completion to the ring (or keep it
/// for the next `ENTER` if it brings bytes or finds no room).
pub fn complete(ring: &mut Ring, completion: Completion, bytes: Option<(u64, Vec<u8>)>) {
    let Some(i) = ring
        .tickets
        .iter()
        .position(|&(t, _)| t == completion.ticket)
    else {
        return;
    };
    let (_, user_data) = ring.tickets.swap_remove(i);
    let cqe = RingCqe {
        user_data,
        status: completion.status,
        value: completion.value,
        msg: completion.msg,
        ..RingCqe::default()
    };
    let entering = ring.mem.entering.load(Relaxed);
    if bytes.is_none()
        && ring.waiting.is_empty()
        && !entering
        && ring.mem.cq_room().is_some_and(|r| r > 0)
    {
        ring.mem.push_cqe(&cqe);
    } else {
        ring.waiting.push_back(Waiting { cqe, bytes });
        ring.mem.set_overflow(ring.waiting.len());
    }
}
