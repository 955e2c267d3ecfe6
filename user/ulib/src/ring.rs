//! Submission and completion rings from user space (`abi::ring` has the contract): set the
//! ring up once, [`Ring::push`] requests, [`Ring::enter`] to hand them to the kernel (and
//! wait for completions), [`Ring::pop`] completions.
//!
//! The ring memory is shared with the kernel, so it is reached through raw pointers and
//! atomic index words, never through Rust references to the entries.

use crate::sys::{decode, raw};
use abi::ipc::Submission;
use abi::ring::{Layout, RingCqe, RingHeader, RingSqe};
use abi::syscall as nr;
use abi::Error;
use core::mem::offset_of;
use core::sync::atomic::{AtomicU32, Ordering};

/// Where [`Ring::setup`] maps a ring unless told otherwise: far above the heap and below
/// the stack.
pub const DEFAULT_ADDRESS: u64 = 0x0000_7100_0000_0000;

/// A process's ring (one per process).
pub struct Ring {
    base: u64,
    layout: Layout,
    /// The program's indices (the header holds copies for the kernel).
    sq_tail: u32,
    cq_head: u32,
}

impl Ring {
    /// RING_SETUP: a ring of `entries` submissions (a power of two, 1 to 256) at `address`.
    pub fn setup(address: u64, entries: u64) -> Result<Ring, Error> {
        let layout = Layout::new(entries).ok_or(Error::InvalidArgument)?;
        setup_raw(address, entries)?;
        Ok(Ring {
            base: address,
            layout,
            sq_tail: 0,
            cq_head: 0,
        })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Address of the ring memory.
    pub fn address(&self) -> u64 {
        self.base
    }

    #[inline]
    fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: the header is mapped for as long as the process lives, 4-byte aligned;
        // the kernel only writes it with whole-word stores.
        unsafe { &*((self.base + offset as u64) as *const AtomicU32) }
    }

    /// The header as the kernel left it.
    pub fn header(&self) -> RingHeader {
        // SAFETY: a mapped, aligned header; any bits are a valid `RingHeader` (Pod).
        unsafe { core::ptr::read_volatile(self.base as *const RingHeader) }
    }

    /// Submission slots free now.
    #[inline]
    pub fn sq_space(&self) -> u32 {
        let head = self
            .word(offset_of!(RingHeader, sq_head))
            .load(Ordering::Acquire);
        self.layout.sq_entries - self.sq_tail.wrapping_sub(head).min(self.layout.sq_entries)
    }

    /// Queue `sub` (not yet seen by the kernel: see [`enter`](Self::enter)); `false` if the
    /// submission ring is full.
    #[inline]
    pub fn push(&mut self, user_data: u64, sub: &Submission) -> bool {
        if self.sq_space() == 0 {
            return false;
        }
        let at = (self.base + u64::from(self.layout.sqe_offset(self.sq_tail))) as *mut RingSqe;
        // SAFETY: a slot of the mapped submission array the kernel does not read until
        // the release store of `sq_tail` below passes it; the fields are written in place
        // (no whole-entry copy).
        unsafe {
            (&raw mut (*at).user_data).write(user_data);
            (&raw mut (*at).sub).write(*sub);
        }
        self.sq_tail = self.sq_tail.wrapping_add(1);
        self.word(offset_of!(RingHeader, sq_tail))
            .store(self.sq_tail, Ordering::Release);
        true
    }

    /// ENTER: let the kernel take up to `to_submit` queued submissions and wait until
    /// `min_complete` completions are in the ring (or nothing more is in flight, or
    /// `timeout_ns`); returns how many it took.
    #[inline]
    pub fn enter(&self, to_submit: u64, min_complete: u64, timeout_ns: u64) -> Result<u64, Error> {
        enter(to_submit, min_complete, timeout_ns)
    }

    /// Completions in the ring, not yet popped.
    #[inline]
    pub fn ready(&self) -> u32 {
        let tail = self
            .word(offset_of!(RingHeader, cq_tail))
            .load(Ordering::Acquire);
        tail.wrapping_sub(self.cq_head)
    }

    /// The next completion, if there is one.
    #[inline]
    pub fn pop(&mut self) -> Option<RingCqe> {
        if self.ready() == 0 {
            return None;
        }
        let at = (self.base + u64::from(self.layout.cqe_offset(self.cq_head))) as *const RingCqe;
        // SAFETY: a slot of the mapped completion array the kernel filled before moving
        // `cq_tail` past it (read with acquire in `ready`), and will not touch until
        // `cq_head` passes it; the padding is not read.
        let cqe = unsafe {
            RingCqe {
                user_data: (&raw const (*at).user_data).read(),
                status: (&raw const (*at).status).read(),
                value: (&raw const (*at).value).read(),
                msg: (&raw const (*at).msg).read(),
                _pad: [0; 6],
            }
        };
        self.cq_head = self.cq_head.wrapping_add(1);
        self.word(offset_of!(RingHeader, cq_head))
            .store(self.cq_head, Ordering::Release);
        Some(cqe)
    }

    /// Write any value into the program's index words (to check that the kernel refuses
    /// nonsense): `sq_tail` and `cq_head` as the kernel will read them.
    pub fn force_indices(&mut self, sq_tail: u32, cq_head: u32) {
        self.word(offset_of!(RingHeader, sq_tail))
            .store(sq_tail, Ordering::Release);
        self.word(offset_of!(RingHeader, cq_head))
            .store(cq_head, Ordering::Release);
    }

    /// Put the program's own indices back after [`force_indices`](Self::force_indices).
    pub fn restore_indices(&mut self) {
        let (t, h) = (self.sq_tail, self.cq_head);
        self.force_indices(t, h);
    }

    /// Overwrite the submission at free-running index `i` (to change an entry the kernel
    /// may be reading).
    pub fn poke_sqe(&self, i: u32, sqe: &RingSqe) {
        let at = self.base + u64::from(self.layout.sqe_offset(i));
        // SAFETY: a slot of the mapped submission array; the kernel copies entries once and
        // copes with any contents.
        unsafe { core::ptr::write_volatile(at as *mut RingSqe, *sqe) };
    }

    /// Read the submission at free-running index `i`.
    pub fn peek_sqe(&self, i: u32) -> RingSqe {
        let at = self.base + u64::from(self.layout.sqe_offset(i));
        // SAFETY: a slot of the mapped submission array; any bits are a valid `RingSqe`.
        unsafe { core::ptr::read_volatile(at as *const RingSqe) }
    }

    /// A second view of the ring set up at `address` (for another thread of the process
    /// that only peeks and pokes entries; its indices are not to be used).
    pub fn view(address: u64) -> Option<Ring> {
        // SAFETY: the caller names the address a ring of this process was set up at; a
        // mapped, aligned header of any bits is a valid `RingHeader` (Pod).
        let h = unsafe { core::ptr::read_volatile(address as *const RingHeader) };
        Some(Ring {
            base: address,
            layout: Layout::new(u64::from(h.sq_entries))?,
            sq_tail: h.sq_tail,
            cq_head: h.cq_head,
        })
    }

    /// The program's next submission index.
    pub fn sq_tail(&self) -> u32 {
        self.sq_tail
    }
}

/// ENTER without a [`Ring`] value (also to check what the kernel says without a ring).
#[inline]
pub fn enter(to_submit: u64, min_complete: u64, timeout_ns: u64) -> Result<u64, Error> {
    // SAFETY: the kernel reads and writes only the ring memory it mapped itself.
    decode(unsafe { raw::syscall3(nr::ENTER, to_submit, min_complete, timeout_ns) })
}

/// RING_SETUP with any arguments (to check what the kernel refuses).
pub fn setup_raw(address: u64, entries: u64) -> Result<u64, Error> {
    // SAFETY: the kernel maps fresh memory only where nothing is mapped.
    decode(unsafe { raw::syscall2(nr::RING_SETUP, address, entries) })
}
