//! A process's address space: its own top-level page table whose lower half holds the
//! process's pages and whose upper half is the kernel's, shared.
//!
//! Every frame a process owns comes from the pool of the core the process lives on (what it
//! maps but does not own may come from another core's: a vregion's frames, and the shared
//! read-only segments of its program, `text`, loaded by whichever core ran it first). The
//! kernel never dereferences a user address: [`VSpace::copy_in`] and [`VSpace::copy_out`]
//! walk the process's page tables, check that each page is user-accessible (and writable,
//! for `copy_out`), and copy through the direct map. A bad pointer is therefore an
//! `Error::BadAddress`, never a kernel fault, whatever SMAP says.

use crate::arch::x86_64::paging::{self, is_user_half, phys_to_virt, Flags, PAGE_SIZE};
use crate::mm::frames;
use crate::mm::user::{IntoAbiError, UserFault, UserMemory, UserRange};
use crate::res::quota;
use abi::res::UserId;
use abi::Error;
use alloc::vec::Vec;
use core::cell::Cell;

/// Top of the user stack (exclusive) and its size; a guard page lies below it.
pub const STACK_TOP: u64 = 0x0000_7fff_ffff_0000;
pub const STACK_PAGES: u64 = 16;
/// Most pages one process may map (1 GiB); a request beyond it is `NoMemory`.
pub const MAX_USER_PAGES: u64 = 1 << 18;
/// Highest address the heap may reach.
pub const HEAP_LIMIT: u64 = 0x0000_7000_0000_0000;

/// An attachment taken out of an address space (an ICA being passed, a process moving),
/// to be mapped again as it was.
pub struct Attachment {
    pub at: u64,
    pub frames: Vec<u64>,
    /// Whether every page was mapped writable.
    pub writable: bool,
    /// It came as an ICA (its vregion is passed already).
    pub landed: bool,
    /// The process that lent it read-only, if one did (`abi::ipc::MSG_ICA_READ_ONLY`).
    pub lender: Option<abi::Pid>,
}

/// A frame for a page table of an address space's lower half, whose pages are charged to
/// `user` (`charged` counts them): user memory, not the kernel's reserve, and charged like
/// the pages it maps. The tables stay until the address space goes, and go back with it.
/// (An audit found them neither charged nor, for the heap and stack, kept out of the
/// reserve: a program that attached and detached a vregion at ever new addresses took its
/// core's whole pool in tables, past its own limit, and every other user's programs on the
/// core then got `NoMemory`; `limits::attach_tables_are_charged`.) `None` when the user's
/// share or the pool is used up; `refused` then says which (`Limit` or `NoMemory`), for the
/// mapping call to answer as a page refused so would.
fn table_frame(user: UserId, charged: &mut u64, refused: &mut Error) -> Option<u64> {
    if let Err(e) = quota::charge_frames(user, 1) {
        *refused = e;
        return None;
    }
    *refused = Error::NoMemory;
    let Some(frame) = frames::alloc_user() else {
        quota::uncharge_frames(user, 1);
        return None;
    };
    *charged += 1;
    Some(frame)
}

pub struct VSpace {
    root: u64,
    /// User pages mapped (for accounting and teardown).
    pages: u64,
    /// The user its own pages and its page tables are charged to (`res/quota.rs`), and how
    /// many are.
    user: UserId,
    charged: u64,
    /// Vregions attached (shared memory): address, pages, and the region's resource id.
    /// Their frames belong to the vregion, not to this address space.
    attached: Vec<(u64, u64, abi::res::ResId)>,
    /// The addresses of the attachments that came as ICAs (`attach_in_window`): their
    /// vregions are passed, so this address space is their one mapper (`take_attachment`).
    landed: Vec<u64>,
    /// Those of them lent read-only, with their lender (usually none: kept apart so that
    /// an ordinary pass does not look).
    lent: Vec<(u64, abi::Pid)>,
    /// Kernel-owned frames mapped for the program (a request ring): address, pages. Like
    /// attachments, unmapped without being freed: their owner frees them.
    pinned: Vec<(u64, u64)>,
    /// Shared read-only segments of its program (`text`): address, and the frames, which
    /// go back to their pool when the last address space mapping them drops them. Unlike
    /// attachments and pinned pages they are the program's own for a move to another
    /// core ([`VSpace::own_pages`]: the new core gets a private copy).
    text: Vec<(u64, alloc::sync::Arc<super::text::SharedText>)>,
    /// DMA memory (`DMA_ALLOC`): address, pages. Own pages (freed with the rest), kept
    /// here so `DMA_FREE` gives back exactly what was allocated.
    dma: Vec<(u64, u64)>,
    /// Pages of device memory (BARs, `map_device`) mapped: with `dma`, what pins this
    /// address space to its frames (a device reaches them by physical address).
    bar_pages: u64,
}

/// DMA pages kept out of the pool for good ([`VSpace::keep_dma`]), since boot.
pub static DMA_PAGES_KEPT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

impl VSpace {
    /// A new address space with an empty lower half and the kernel's upper half, whose
    /// pages are charged to `user`.
    pub fn new(user: UserId) -> Result<VSpace, Error> {
        let root = frames::alloc().ok_or(Error::NoMemory)?;
        paging::zero_frame(root);
        let kernel = paging::kernel_root();
        for slot in 256..512 {
            let e = paging::entry_of(kernel, slot).load(core::sync::atomic::Ordering::Acquire);
            paging::entry_of(root, slot).store(e, core::sync::atomic::Ordering::Release);
        }
        Ok(VSpace {
            root,
            pages: 0,
            user,
            charged: 0,
            attached: Vec::new(),
            landed: Vec::new(),
            lent: Vec::new(),
            pinned: Vec::new(),
            text: Vec::new(),
            dma: Vec::new(),
            bar_pages: 0,
        })
    }

    /// Physical address of the top-level table (for CR3).
    pub fn root(&self) -> u64 {
        self.root
    }

    /// Bytes of user memory mapped.
    pub fn bytes(&self) -> u64 {
        self.pages * PAGE_SIZE
    }

    /// Map `count` fresh zeroed pages at `vaddr` (page-aligned, in the user half).
    pub fn map_zeroed(
        &mut self,
        vaddr: u64,
        count: u64,
        writable: bool,
        executable: bool,
    ) -> Result<(), Error> {
        self.map_fresh(vaddr, count, writable, executable, |frame, _| {
            paging::zero_frame(frame)
        })
    }

    /// Map `count` fresh pages at `vaddr`, each filled by `fill(frame, index)` before it
    /// is mapped.
    fn map_fresh(
        &mut self,
        vaddr: u64,
        count: u64,
        writable: bool,
        executable: bool,
        mut fill: impl FnMut(u64, u64),
    ) -> Result<(), Error> {
        let end = count
            .checked_mul(PAGE_SIZE)
            .and_then(|bytes| vaddr.checked_add(bytes))
            .ok_or(Error::InvalidArgument)?;
        if count > 0 && self.pages + count > MAX_USER_PAGES {
            return Err(Error::NoMemory);
        }
        if !vaddr.is_multiple_of(PAGE_SIZE) || !is_user_half(vaddr) || !is_user_half(end - 1) {
            return Err(Error::InvalidArgument);
        }
        // The whole request is charged first: past the user's limit nothing is mapped. A
        // failure part-way gives back what `unmap_pages` did not.
        quota::charge_frames(self.user, count)?;
        self.charged += count;
        let give_back = |vs: &mut VSpace, mapped: u64| {
            vs.unmap_pages(vaddr, mapped);
            quota::uncharge_frames(vs.user, count - mapped);
            vs.charged -= count - mapped;
        };
        let mut flags = Flags::USER_ACCESSIBLE;
        if writable {
            flags |= Flags::WRITABLE;
        }
        if !executable {
            flags |= Flags::NO_EXECUTE;
        }
        for i in 0..count {
            let Some(frame) = frames::alloc_user() else {
                give_back(self, i);
                return Err(Error::NoMemory);
            };
            fill(frame, i);
            let (root, user) = (self.root, self.user);
            let mut refused = Error::NoMemory;
            // SAFETY: this address space is owned by the calling core's process table, the
            // address is in the user half, and the frame is fresh.
            let r = unsafe {
                paging::map_4k(root, vaddr + i * PAGE_SIZE, frame, flags, &mut || {
                    table_frame(user, &mut self.charged, &mut refused)
                })
            };
            if r.is_err() {
                let _ = frames::free(frame);
                give_back(self, i);
                return Err(if r == Err(paging::MapError::NoMemory) {
                    refused
                } else {
                    Error::InvalidArgument
                });
            }
            self.pages += 1;
        }
        Ok(())
    }

    /// Map the frames of vregion `region` at `vaddr` (page-aligned, user half, nothing
    /// there yet). The frames stay the vregion's.
    pub fn attach(
        &mut self,
        vaddr: u64,
        frames: &[u64],
        writable: bool,
        region: abi::res::ResId,
    ) -> Result<(), Error> {
        if self.attached.len() >= crate::res::vspace::MAX_ATTACHMENTS {
            return Err(Error::NoMemory);
        }
        let mut flags = Flags::USER_ACCESSIBLE | Flags::NO_EXECUTE;
        if writable {
            flags |= Flags::WRITABLE;
        }
        // SAFETY: the frames are owned by a live vregion on this core, which keeps them
        // while this address space maps them (until detach or drop).
        let pages = unsafe { self.map_frames(vaddr, frames, flags)? };
        self.attached.push((vaddr, pages, region));
        self.pages += pages;
        Ok(())
    }

    /// Map `frames` at `vaddr` (page-aligned, user half, nothing there yet) with `flags`,
    /// all or none; the number of pages mapped. The frames are not this address space's.
    ///
    /// # Safety
    /// The caller keeps every frame alive, and does not reuse it, while it is mapped here.
    unsafe fn map_frames(
        &mut self,
        vaddr: u64,
        frames: &[u64],
        flags: Flags,
    ) -> Result<u64, Error> {
        let pages = frames.len() as u64;
        let end = pages
            .checked_mul(PAGE_SIZE)
            .and_then(|b| vaddr.checked_add(b))
            .ok_or(Error::InvalidArgument)?;
        if pages == 0
            || !vaddr.is_multiple_of(PAGE_SIZE)
            || !is_user_half(vaddr)
            || !is_user_half(end - 1)
        {
            return Err(Error::InvalidArgument);
        }
        if (0..pages).any(|i| paging::translate(self.root, vaddr + i * PAGE_SIZE).is_some()) {
            return Err(Error::Busy);
        }
        if self.pages + pages > MAX_USER_PAGES {
            return Err(Error::NoMemory);
        }
        let (root, user) = (self.root, self.user);
        let mut refused = Error::NoMemory;
        for (i, &frame) in frames.iter().enumerate() {
            // SAFETY: an address space of this core's process table, a free user-half page
            // (checked above), and a frame the caller keeps while this maps it.
            let r = unsafe {
                paging::map_4k(
                    root,
                    vaddr + i as u64 * PAGE_SIZE,
                    frame,
                    flags,
                    &mut || table_frame(user, &mut self.charged, &mut refused),
                )
            };
            if r.is_err() {
                self.unmap_shared(vaddr, i as u64);
                return Err(refused);
            }
        }
        Ok(pages)
    }

    /// Map kernel-owned `frames` (a request ring's) writable at `vaddr` (page-aligned, user
    /// half, nothing there yet). The frames stay their owner's; this address space only
    /// unmaps them when it goes.
    pub fn map_pinned(&mut self, vaddr: u64, frames: &[u64]) -> Result<(), Error> {
        let flags = Flags::USER_ACCESSIBLE | Flags::NO_EXECUTE | Flags::WRITABLE;
        // SAFETY: the ring's owner keeps its frames until the process (and so this address
        // space) has gone.
        let pages = unsafe { self.map_frames(vaddr, frames, flags)? };
        self.pinned.push((vaddr, pages));
        self.pages += pages;
        Ok(())
    }

    /// Map the shared frames of a read-only segment (`text::load`) at `vaddr` (page-aligned,
    /// user half, nothing there yet), executable if `executable`, never writable. This
    /// address space holds them until it goes.
    pub fn map_text(
        &mut self,
        vaddr: u64,
        text: alloc::sync::Arc<super::text::SharedText>,
        executable: bool,
    ) -> Result<(), Error> {
        let mut flags = Flags::USER_ACCESSIBLE;
        if !executable {
            flags |= Flags::NO_EXECUTE;
        }
        // SAFETY: `text` is kept in `self.text` while mapped, so its frames are neither
        // freed nor reused meanwhile; read-only, so no process can change what the
        // others run.
        let pages = unsafe { self.map_frames(vaddr, text.frames(), flags)? };
        self.text.push((vaddr, text));
        self.pages += pages;
        Ok(())
    }

    /// Map `pages` pages of device memory at physical `phys` (a BAR the caller checked)
    /// uncached, writable, at `vaddr`. Not RAM: nothing is freed when it goes.
    pub fn map_device(&mut self, vaddr: u64, phys: u64, pages: u64) -> Result<(), Error> {
        if pages == 0 || pages > MAX_USER_PAGES || !phys.is_multiple_of(PAGE_SIZE) {
            return Err(Error::InvalidArgument);
        }
        let frames: Vec<u64> = (0..pages).map(|i| phys + i * PAGE_SIZE).collect();
        let flags = Flags::USER_ACCESSIBLE
            | Flags::NO_EXECUTE
            | Flags::WRITABLE
            | Flags::NO_CACHE
            | Flags::WRITE_THROUGH;
        // SAFETY: device memory (a BAR found at boot, which no driver may move), not a frame
        // of any pool: nothing reuses it while mapped.
        let pages = unsafe { self.map_frames(vaddr, &frames, flags)? };
        self.pinned.push((vaddr, pages));
        self.pages += pages;
        self.bar_pages += pages;
        Ok(())
    }

    /// Does a device reach this address space by physical address (DMA memory mapped) or
    /// does it map a device's registers (a BAR)? Then it must never be copied to other
    /// frames (a device would go on writing the old ones) nor rebuilt elsewhere (the BAR
    /// mappings would be lost): migration refuses it.
    pub fn holds_device_memory(&self) -> bool {
        !self.dma.is_empty() || self.bar_pages > 0
    }

    /// DMA memory: `pages` physically contiguous zeroed frames of this core, mapped
    /// writable at `vaddr` as this address space's own pages (charged, freed with it or by
    /// [`free_dma`](Self::free_dma)); the physical address of the first.
    pub fn map_dma(&mut self, vaddr: u64, pages: u64) -> Result<u64, Error> {
        if pages == 0 || pages > abi::dev::DMA_MAX_PAGES {
            return Err(Error::InvalidArgument);
        }
        if self.pages + pages > MAX_USER_PAGES {
            return Err(Error::NoMemory);
        }
        quota::charge_frames(self.user, pages)?;
        // Keep the kernel's reserve, as `alloc_user` does.
        let phys = if frames::above_reserve(pages) {
            frames::alloc_contiguous(pages, 1)
        } else {
            None
        };
        let Some(phys) = phys else {
            quota::uncharge_frames(self.user, pages);
            return Err(Error::NoMemory);
        };
        for i in 0..pages {
            paging::zero_frame(phys + i * PAGE_SIZE);
        }
        let frames_: Vec<u64> = (0..pages).map(|i| phys + i * PAGE_SIZE).collect();
        let flags = Flags::USER_ACCESSIBLE | Flags::NO_EXECUTE | Flags::WRITABLE;
        // SAFETY: fresh frames of this core, owned by this address space from now on
        // (freed by `free_dma` or its drop).
        if let Err(e) = unsafe { self.map_frames(vaddr, &frames_, flags) } {
            let _ = frames::free_contiguous(phys, pages);
            quota::uncharge_frames(self.user, pages);
            return Err(e);
        }
        self.charged += pages;
        self.pages += pages;
        self.dma.push((vaddr, pages));
        Ok(phys)
    }

    /// Keep this address space's DMA memory out of the pool for good: its drop unmaps the
    /// frames without freeing them, as pinned pages (a device that could not be reset may
    /// still write them; `device::holder_ended`). Its user is no longer charged for them.
    pub fn keep_dma(&mut self) {
        for (vaddr, pages) in core::mem::take(&mut self.dma) {
            self.pinned.push((vaddr, pages));
            DMA_PAGES_KEPT.fetch_add(pages, core::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Undo a [`map_dma`](Self::map_dma) of exactly `pages` at `vaddr`: unmap and free.
    pub fn free_dma(&mut self, vaddr: u64, pages: u64) -> Result<(), Error> {
        let i = self
            .dma
            .iter()
            .position(|&d| d == (vaddr, pages))
            .ok_or(Error::InvalidArgument)?;
        self.dma.swap_remove(i);
        self.unmap_pages(vaddr, pages);
        Ok(())
    }

    /// Undo an [`attach`](Self::attach) at `vaddr`; returns the region that was there.
    pub fn detach(&mut self, vaddr: u64) -> Option<abi::res::ResId> {
        let i = self.attached.iter().position(|a| a.0 == vaddr)?;
        let (at, pages, region) = self.attached.remove(i);
        self.landed.retain(|&a| a != at);
        if !self.lent.is_empty() {
            self.lent.retain(|&(a, _)| a != at);
        }
        self.unmap_shared(at, pages);
        self.pages -= pages;
        Some(region)
    }

    /// Take the attachment of vregion `region` out (an ICA being passed): unmapped, with
    /// its address, frames and writability, and whether it came as an ICA (then its vregion
    /// is still passed, and this was its one mapping) and from which lender; `None` if
    /// `region` is not attached here.
    pub fn take_attachment(&mut self, region: abi::res::ResId) -> Option<Attachment> {
        let &(at, pages, _) = self.attached.iter().find(|a| a.2 == region)?;
        let mut frames = Vec::with_capacity(pages as usize);
        let mut writable = true;
        for i in 0..pages {
            let t = paging::translate(self.root, at + i * PAGE_SIZE)?;
            writable &= t.writable;
            frames.push(t.paddr);
        }
        let landed = self.landed.contains(&at);
        let lender = self.lent.iter().find(|l| l.0 == at).map(|l| l.1);
        self.detach(at)?;
        Some(Attachment {
            at,
            frames,
            writable,
            landed,
            lender,
        })
    }

    /// Attach vregion `region`'s `frames` at the lowest slot of the ICA window
    /// (`abi::ipc::ICA_WINDOW`) with nothing mapped in its range, as an ICA lent read-only
    /// by `lender` if any; the address.
    pub fn attach_in_window(
        &mut self,
        frames: &[u64],
        writable: bool,
        region: abi::res::ResId,
        lender: Option<abi::Pid>,
    ) -> Result<u64, Error> {
        use abi::ipc::{ICA_SLOT, ICA_SLOTS, ICA_WINDOW};
        if frames.len() as u64 * PAGE_SIZE > ICA_SLOT {
            return Err(Error::InvalidArgument);
        }
        for slot in 0..ICA_SLOTS {
            let at = ICA_WINDOW + slot * ICA_SLOT;
            if self.attached.iter().any(|a| a.0 == at) {
                continue;
            }
            match self.attach(at, frames, writable, region) {
                Ok(()) => {
                    self.landed.push(at);
                    if let Some(lender) = lender {
                        self.lent.push((at, lender));
                    }
                    return Ok(at);
                }
                Err(Error::Busy) => continue, // something of the program's is there
                Err(e) => return Err(e),
            }
        }
        Err(Error::NoMemory)
    }

    /// Whether the attachment at `at` came as an ICA, and its lender if it was lent
    /// read-only (what a migration carries over).
    pub fn landing(&self, at: u64) -> (bool, Option<abi::Pid>) {
        let lender = self.lent.iter().find(|l| l.0 == at).map(|l| l.1);
        (self.landed.contains(&at), lender)
    }

    /// Map an attachment taken out by [`take_attachment`](Self::take_attachment) again
    /// where it was, as it was (an ICA whose pass was refused).
    pub fn put_back(&mut self, a: &Attachment, region: abi::res::ResId) -> Result<(), Error> {
        self.attach(a.at, &a.frames, a.writable, region)?;
        if a.landed {
            self.landed.push(a.at);
            if let Some(lender) = a.lender {
                self.lent.push((a.at, lender));
            }
        }
        Ok(())
    }

    /// The pages this address space owns (not attachments): (address, frame, writable,
    /// executable).
    pub fn own_pages(&self) -> Vec<(u64, u64, bool, bool)> {
        let shared = |va: u64| {
            self.attached
                .iter()
                .map(|&(at, pages, _)| (at, pages))
                .chain(self.pinned.iter().copied())
                .any(|(at, pages)| va >= at && va < at + pages * PAGE_SIZE)
        };
        paging::lower_half_pages(self.root)
            .into_iter()
            .filter(|p| !shared(p.0))
            .collect()
    }

    /// Map a fresh copy of the page in frame `from` (of any core, which must not change it
    /// meanwhile) at `vaddr`: how a migrating process's memory moves.
    pub fn map_copy(
        &mut self,
        vaddr: u64,
        from: u64,
        writable: bool,
        executable: bool,
    ) -> Result<(), Error> {
        self.map_fresh(vaddr, 1, writable, executable, |to, _| {
            // SAFETY: `to` is a fresh frame of ours, `from` a whole frame the caller
            // guarantees is not being written; both direct-mapped and distinct.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    phys_to_virt(from) as *const u8,
                    phys_to_virt(to) as *mut u8,
                    PAGE_SIZE as usize,
                );
            }
        })
    }

    /// Does it map kernel-owned frames (a request ring)?
    pub fn has_pinned(&self) -> bool {
        !self.pinned.is_empty()
    }

    /// The attachments: (address, pages, region).
    pub fn attachments(&self) -> &[(u64, u64, abi::res::ResId)] {
        &self.attached
    }

    /// Unmap `pages` shared pages at `vaddr` without freeing their frames.
    fn unmap_shared(&mut self, vaddr: u64, pages: u64) {
        for i in 0..pages {
            // SAFETY: the pages belong to an attachment of this address space; their
            // frames stay with the vregion.
            unsafe { paging::unmap_4k(self.root, vaddr + i * PAGE_SIZE) };
        }
    }

    /// Undo the first `count` pages of a `map_zeroed` at `vaddr` (it failed part-way).
    fn unmap_pages(&mut self, vaddr: u64, count: u64) {
        for i in 0..count {
            // SAFETY: these pages were mapped by this call and the process has not run
            // since; the (now empty) page tables stay until the address space goes.
            if let Some(frame) = unsafe { paging::unmap_4k(self.root, vaddr + i * PAGE_SIZE) } {
                let _ = frames::free(frame);
                self.pages -= 1;
                quota::uncharge_frames(self.user, 1);
                self.charged -= 1;
            }
        }
    }

    /// Walk the user range `at` page by page (see [`Tables::pieces`]).
    #[inline]
    fn pieces(
        &self,
        at: UserRange,
        write: bool,
        f: impl FnMut(u64, usize, usize),
    ) -> Result<(), UserFault> {
        Tables::new(self.root).pieces(at, write, f)
    }

    /// Write `data` at `uaddr` whatever the user may do there (the loader filling a
    /// read-only segment); the pages must be mapped.
    pub fn load(&self, uaddr: u64, data: &[u8]) -> Result<(), Error> {
        let at = UserRange::new(uaddr, data.len(), 1).map_err(UserFault::into_abi)?;
        self.pieces(at, false, |phys, off, n| {
            // SAFETY: a user page of this address space (checked), written through the
            // direct map before the process runs.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    data[off..].as_ptr(),
                    phys_to_virt(phys) as *mut u8,
                    n,
                )
            };
        })
        .map_err(UserFault::into_abi)
    }
}

/// The user half of an address space, as its page tables map it: a [`VSpace`]'s, or the
/// running process's (the tables this core has loaded, found without the process table:
/// the rendezvous fast path's copies).
///
/// A `Tables` remembers the last page it translated, so that several records on one page
/// (a call's message and the room for its reply, on the caller's stack) cost one walk. A
/// value lives for one visit to user memory that does not block (the kernel is not
/// preempted, and only this core changes its processes' tables), so what it remembers
/// cannot go stale: each visit starts from a fresh one.
pub struct Tables {
    root: u64,
    /// The last page translated: (its user address, or `NONE`; its frame; user-accessible;
    /// writable).
    last: Cell<(u64, u64, bool, bool)>,
}

impl Tables {
    /// No page remembered (never a page address: not page-aligned).
    const NONE: u64 = 1;

    fn new(root: u64) -> Tables {
        Tables {
            root,
            last: Cell::new((Self::NONE, 0, false, false)),
        }
    }

    /// The running process's: the page tables this core has loaded. Only for a system call
    /// of a user thread, whose process's tables the scheduler loaded when it switched to
    /// it (a kernel thread's tables have an empty lower half: every copy fails).
    pub fn loaded() -> Tables {
        Tables::new(paging::active_root())
    }

    /// The frame of the page at `vaddr` (page-aligned) if the user may read it (or, with
    /// `write`, write it): from the page remembered, else by a walk.
    #[inline(always)]
    fn page(&self, vaddr: u64, write: bool) -> Result<u64, UserFault> {
        let (page, mut frame, mut user, mut writable) = self.last.get();
        if page != vaddr {
            let t = paging::translate(self.root, vaddr).ok_or(UserFault::Unmapped)?;
            (frame, user, writable) = (t.paddr, t.user, t.writable);
            self.last.set((vaddr, frame, user, writable));
        }
        if !user {
            return Err(UserFault::NotUser);
        }
        if write && !writable {
            return Err(UserFault::ReadOnly);
        }
        Ok(frame)
    }

    /// Walk the user range `at` page by page, calling `f(phys, offset, n)` for each piece;
    /// fails without calling `f` for any piece if a page is missing or lacks the access.
    #[inline(always)]
    fn pieces(
        &self,
        at: UserRange,
        write: bool,
        mut f: impl FnMut(u64, usize, usize),
    ) -> Result<(), UserFault> {
        let (uaddr, len) = (at.start(), at.len());
        if len == 0 {
            return Ok(());
        }
        let offset = uaddr % PAGE_SIZE;
        // Within one page (every record the request path copies, unless it straddles):
        // one translation, and a failure comes before any copy.
        if offset + len as u64 <= PAGE_SIZE {
            f(self.page(uaddr - offset, write)? + offset, 0, len);
            return Ok(());
        }
        // Two walks (check every page, then copy) instead of a list of pieces: no
        // allocation on the path of every system call that copies (the range is checked,
        // so `uaddr + len` does not wrap).
        let walk = |f: &mut dyn FnMut(u64, usize, usize)| -> Result<(), UserFault> {
            let (mut at, mut done) = (uaddr, 0usize);
            while done < len {
                let off = at % PAGE_SIZE;
                let frame = self.page(at - off, write)?;
                let n = ((PAGE_SIZE - off) as usize).min(len - done);
                f(frame + off, done, n);
                at += n as u64;
                done += n;
            }
            Ok(())
        };
        walk(&mut |_, _, _| {})?;
        walk(&mut f)
    }
}

/// The kernel's only way into user memory (`mm::user`'s typed addresses copy through it):
/// a process's page tables, named by their root.
impl UserMemory for Tables {
    #[inline(always)]
    fn copy_in(&self, from: UserRange, out: &mut [u8]) -> Result<(), UserFault> {
        assert_eq!(out.len(), from.len());
        self.pieces(from, false, |phys, off, n| {
            // SAFETY: `phys..phys+n` is a user page of this address space (checked), mapped
            // in the direct map; `out[off..off+n]` is in bounds by construction.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    phys_to_virt(phys) as *const u8,
                    out[off..].as_mut_ptr(),
                    n,
                )
            };
        })
    }

    #[inline(always)]
    fn copy_out(&self, to: UserRange, data: &[u8]) -> Result<(), UserFault> {
        assert_eq!(data.len(), to.len());
        self.pieces(to, true, |phys, off, n| {
            // SAFETY: as in `copy_in`, and the page is writable by the user.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    data[off..].as_ptr(),
                    phys_to_virt(phys) as *mut u8,
                    n,
                )
            };
        })
    }

    #[inline(always)]
    fn check(&self, at: UserRange, write: bool) -> Result<(), UserFault> {
        self.pieces(at, write, |_, _, _| {})
    }
}

/// A [`VSpace`] copies through its own page tables.
impl UserMemory for VSpace {
    #[inline]
    fn copy_in(&self, from: UserRange, out: &mut [u8]) -> Result<(), UserFault> {
        Tables::new(self.root).copy_in(from, out)
    }

    #[inline]
    fn copy_out(&self, to: UserRange, data: &[u8]) -> Result<(), UserFault> {
        Tables::new(self.root).copy_out(to, data)
    }

    #[inline]
    fn check(&self, at: UserRange, write: bool) -> Result<(), UserFault> {
        Tables::new(self.root).check(at, write)
    }
}

/// Load the address space `root` on this core (nothing if it is loaded), counting the CR3
/// write in `stats`, this core's (`CoreStats::vspace_switches`).
///
/// # Safety
/// `root` must map the kernel half like the kernel's own tables.
pub(crate) unsafe fn load(root: u64, stats: &crate::percore::CoreStats) {
    // SAFETY: per the caller.
    if unsafe { paging::activate(root) } {
        stats
            .vspace_switches
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }
}

/// If `root` is the loaded address space, load the kernel's tables instead: it is about to
/// go (its process ends, or the idle context kept it: `sched::idle_root`).
pub(crate) fn leave(root: u64) {
    if paging::active_root() == root {
        // SAFETY: the kernel's tables map the kernel half, all the kernel uses from here.
        unsafe { load(paging::kernel_root(), &crate::percore::this().stats) };
    }
}

impl Drop for VSpace {
    /// Free every user frame and every page-table frame of the lower half, then the root.
    fn drop(&mut self) {
        leave(self.root);
        // Shared pages are not ours to free: an attachment's or a pinned region's frames
        // are the vregion's, shared text's go with its last reference (here, when `text`
        // is dropped, or in another address space still mapping them). The walk goes up
        // the addresses, so one cursor over the sorted ranges tells each page.
        let mut shared: Vec<(u64, u64)> = self
            .attached
            .iter()
            .map(|&(at, pages, _)| (at, at + pages * PAGE_SIZE))
            .chain(
                self.pinned
                    .iter()
                    .map(|&(at, pages)| (at, at + pages * PAGE_SIZE)),
            )
            .chain(
                self.text
                    .iter()
                    .map(|(at, t)| (*at, at + t.frames().len() as u64 * PAGE_SIZE)),
            )
            .collect();
        shared.sort_unstable();
        let mut next_shared = 0;
        // Frames are freed a run of consecutive ones at a time (a heap's pages mostly
        // came from the pool in a row), never across the end of a pool's range (`limit`).
        let (mut run, mut limit) = ((0u64, 0u64), 0u64);
        let free_run = |run: &mut (u64, u64)| {
            // A run the pool refuses (it changed nothing) goes frame by frame, so that one
            // bad frame does not keep the others.
            if run.1 > 0 && frames::free_contiguous(run.0, run.1).is_err() {
                for i in 0..run.1 {
                    let _ = frames::free(run.0 + i * PAGE_SIZE);
                }
            }
            *run = (0, 0);
        };
        // SAFETY: nobody runs on this address space any more (the owner switched away);
        // the lower-half tables were built by `map_4k` from this core's pool.
        unsafe {
            paging::free_lower_half(self.root, &mut |at, frame, leaf| {
                if leaf {
                    while shared.get(next_shared).is_some_and(|&(_, end)| end <= at) {
                        next_shared += 1;
                    }
                    if shared
                        .get(next_shared)
                        .is_some_and(|&(start, _)| start <= at)
                    {
                        return;
                    }
                }
                if run.1 > 0 && frame == run.0 + run.1 * PAGE_SIZE && frame < limit {
                    run.1 += 1;
                } else {
                    free_run(&mut run);
                    run = (frame, 1);
                    limit = frames::range_end(frame);
                }
            })
        };
        free_run(&mut run);
        let _ = frames::free(self.root);
        quota::uncharge_frames(self.user, self.charged);
    }
}
