//! Submission and completion rings (io_uring's shape on Musubi's request kinds): the layout
//! of the memory a process shares with the kernel, and the calls that use it.
//!
//! `RING_SETUP` makes the ring: frames of the caller's core, pinned by the kernel while the
//! ring lives, mapped writable at an address the caller chooses. The memory holds a
//! [`RingHeader`] at offset 0, then `sq_entries` [`RingSqe`]s at `sq_offset` and
//! `cq_entries` [`RingCqe`]s at `cq_offset` (both page-aligned; an entry is 128 bytes, so
//! none crosses a page). Indices are free-running `u32`s: entry `i` is slot
//! `i & (entries - 1)`.
//!
//! Who writes what: the program writes submissions and `sq_tail`, and `cq_head` once it
//! has read completions; the kernel writes `sq_head` (entries it has taken) and completions
//! and `cq_tail`. The kernel keeps its own copy of its indices and never trusts the
//! program's copy of them; it reads `sq_tail` and `cq_head` once per step and refuses
//! nonsense (`tail - head` beyond the ring's size) with `InvalidArgument`. Each submission
//! is copied once out of the ring and only the copy is checked and used, so changing an
//! entry while the kernel takes it changes nothing but which request the program gets.
//!
//! | call | arguments | value |
//! |---|---|---|
//! | `RING_SETUP` | address (page-aligned, free), submission entries (a power of two, 1 to [`MAX_SQ_ENTRIES`]) | bytes mapped (`Busy` if the process already has a ring or something is mapped there) |
//! | `ENTER` | submissions to take, completions to wait for, timeout ns | submissions taken |
//!
//! `ENTER` takes at most as many submissions as the completion ring has room for, counting
//! the requests still in flight: a completion never lacks a slot (back-pressure; what is
//! not taken stays in the ring for the next `ENTER`). Each taken submission ends with one
//! completion carrying its `user_data`; a submission that cannot start (unknown kind, bad
//! target, bad buffer) ends at once with an error `status`, not with an `ENTER` error.
//! A completion whose bytes (a `SUBMIT_RES_READ`) must still be copied, or one that meets a
//! full ring because the program moved `cq_head` wrongly, waits in the kernel (at most the
//! in-flight limit, `RingHeader::overflow` says how many) and is written at the next
//! `ENTER`. The wait ends when `cq_tail - cq_head` reaches the number asked for, when
//! nothing more is in flight, or at the timeout (`TimedOut` if this call took nothing);
//! waiting for more than the completion ring holds is `InvalidArgument`. Only one thread
//! at a time takes submissions: an `ENTER` while another is taking them is `Busy`. A ring
//! request's ticket is not `COLLECT`ed (`NoSuchResource`). A no-op's completion writes
//! only `user_data`, `status` and `value`.
//! One ring per process; it goes with the process. A process with a ring does not move
//! (`MIGRATE` is `Busy`).

use crate::ipc::{Msg, Submission};
use bytemuck::{Pod, Zeroable};

/// Most submission entries; the completion ring has twice as many.
pub const MAX_SQ_ENTRIES: u32 = 256;
/// Bytes of one entry of either ring.
pub const ENTRY_BYTES: u32 = 128;
/// The memory's page size.
pub const PAGE: u32 = 4096;

/// The first bytes of the ring memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RingHeader {
    /// Written by the kernel: submissions taken.
    pub sq_head: u32,
    /// Written by the program: submissions written.
    pub sq_tail: u32,
    /// Written by the program: completions read.
    pub cq_head: u32,
    /// Written by the kernel: completions written.
    pub cq_tail: u32,
    pub sq_entries: u32,
    pub cq_entries: u32,
    /// Byte offsets of the two arrays from the ring's start.
    pub sq_offset: u32,
    pub cq_offset: u32,
    /// Written by the kernel: completions waiting in the kernel for the next `ENTER`.
    pub overflow: u32,
    pub _reserved: [u32; 7],
}

/// A submission: a request (`abi::ipc::Submission`, as `SUBMIT` takes it) and a word the
/// program gets back in its completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RingSqe {
    pub user_data: u64,
    pub sub: Submission,
    pub _pad: [u64; 2],
}

/// A completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RingCqe {
    /// The submission's `user_data`.
    pub user_data: u64,
    /// 0, or the `Error` code the request ended with.
    pub status: u64,
    /// The operation's value (an id, a count, the reply's value).
    pub value: u64,
    /// The reply of a `SUBMIT_CALL` (a no-op's completion leaves it as it was: only the
    /// three words above are written for it).
    pub msg: Msg,
    pub _pad: [u64; 6],
}

const _: () = assert!(core::mem::size_of::<RingSqe>() == ENTRY_BYTES as usize);
const _: () = assert!(core::mem::size_of::<RingCqe>() == ENTRY_BYTES as usize);
const _: () = assert!(core::mem::size_of::<RingHeader>() == 64);

/// Where things are in a ring of `sq_entries` submissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub sq_offset: u32,
    pub cq_offset: u32,
    /// Pages of the whole ring.
    pub pages: u32,
}

impl Layout {
    /// The layout for `sq_entries` (a power of two, 1 to [`MAX_SQ_ENTRIES`]), or `None`.
    pub fn new(sq_entries: u64) -> Option<Layout> {
        if sq_entries == 0
            || sq_entries > u64::from(MAX_SQ_ENTRIES)
            || !sq_entries.is_power_of_two()
        {
            return None;
        }
        let sq_entries = sq_entries as u32;
        let cq_entries = 2 * sq_entries;
        let pages_of = |n: u32| (n * ENTRY_BYTES).div_ceil(PAGE);
        let sq_offset = PAGE;
        let cq_offset = sq_offset + pages_of(sq_entries) * PAGE;
        Some(Layout {
            sq_entries,
            cq_entries,
            sq_offset,
            cq_offset,
            pages: 1 + pages_of(sq_entries) + pages_of(cq_entries),
        })
    }

    /// The header the kernel writes at set-up.
    pub fn header(&self) -> RingHeader {
        RingHeader {
            sq_entries: self.sq_entries,
            cq_entries: self.cq_entries,
            sq_offset: self.sq_offset,
            cq_offset: self.cq_offset,
            ..RingHeader::default()
        }
    }

    /// Byte offset of submission index `i` (free-running).
    pub fn sqe_offset(&self, i: u32) -> u32 {
        self.sq_offset + (i & (self.sq_entries - 1)) * ENTRY_BYTES
    }

    /// Byte offset of completion index `i` (free-running).
    pub fn cqe_offset(&self, i: u32) -> u32 {
        self.cq_offset + (i & (self.cq_entries - 1)) * ENTRY_BYTES
    }
}

/// Largest ring, in pages.
pub const MAX_PAGES: usize = 1 + 3 * MAX_SQ_ENTRIES as usize * ENTRY_BYTES as usize / PAGE as usize;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(Layout::new(0), None);
        assert_eq!(Layout::new(3), None);
        assert_eq!(Layout::new(512), None);
        let one = Layout::new(1).unwrap();
        assert_eq!((one.pages, one.sq_offset, one.cq_offset), (3, 4096, 8192));
        let max = Layout::new(256).unwrap();
        assert_eq!(max.pages, 1 + 8 + 16);
        assert_eq!(max.pages as usize, MAX_PAGES);
        // Wrapping indices land in the array, on entry boundaries, never across a page.
        for i in [0u32, 1, 255, 256, 511, u32::MAX] {
            let s = max.sqe_offset(i);
            assert!(s >= max.sq_offset && s + ENTRY_BYTES <= max.cq_offset);
            let c = max.cqe_offset(i);
            assert!(c >= max.cq_offset && c + ENTRY_BYTES <= max.pages * PAGE);
            assert_eq!(c / PAGE, (c + ENTRY_BYTES - 1) / PAGE);
        }
    }
}
