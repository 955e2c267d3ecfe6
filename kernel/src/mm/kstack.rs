//! Kernel stacks with guard pages, in each core's own slot of the address space.
//!
//! Core *c* owns the 512 GiB at `0xffff_c000_0000_0000 + c * 512 GiB` (PML4 slot
//! `384 + c`). Stacks are laid out there in fixed strides; the first page of each stride is
//! never mapped, so running off the bottom of a stack faults on a *guard page* instead of
//! silently corrupting whatever lies below, and the fault report names it. Only the owning
//! core maps pages under its slot, so no lock is needed.

use super::frames;
use crate::arch::x86_64::paging::{self, Flags, KSTACK_PML4_SLOT, PAGE_SIZE, PML4_SLOT_SPAN};
use crate::percore::{self, current_core};
use abi::MAX_CORES;

/// Virtual space per stack: one guard page plus up to 15 pages of stack.
pub const STRIDE: u64 = 16 * PAGE_SIZE;
const SLOTS_BASE: u64 = 0xffff_0000_0000_0000 | ((KSTACK_PML4_SLOT as u64) << 39);

/// Which strides of this core's slot are in use (a bump index; stacks of the boot-time
/// kinds are never freed yet: processes bring their own life cycle later).
pub struct StackSlots {
    next: u64,
    /// Strides given back by [`free`], reused first.
    free: alloc::vec::Vec<u64>,
    /// Frames the slot's page tables hold. Tables stay when their stacks go (the strides
    /// are reused), so they are working size, like the heap's slack: a leak check counts
    /// them as held, not lost ([`table_frames`]).
    tables: u64,
}

impl StackSlots {
    pub const fn new() -> Self {
        StackSlots {
            next: 0,
            free: alloc::vec::Vec::new(),
            tables: 0,
        }
    }
}

/// A mapped kernel stack.
#[derive(Clone, Copy, Debug)]
pub struct KStack {
    /// Lowest mapped address.
    pub bottom: u64,
    /// One past the highest address: the initial stack pointer.
    pub top: u64,
}

fn slot_base(core: usize) -> u64 {
    SLOTS_BASE + core as u64 * PML4_SLOT_SPAN
}

/// Map a new stack of `pages` pages (at most 15) from this core's pool.
pub fn alloc(pages: u64) -> Option<KStack> {
    assert!(
        (1..STRIDE / PAGE_SIZE).contains(&pages),
        "kernel stack of {pages} pages"
    );
    let me = current_core();
    let index = percore::this().mem.stacks.with(|s| {
        s.free.pop().unwrap_or_else(|| {
            s.next += 1;
            s.next - 1
        })
    });
    let guard = slot_base(me) + index * STRIDE;
    let bottom = guard + STRIDE - pages * PAGE_SIZE;
    // The kernel's tables, whichever address space is active: this core's slot is shared
    // by all of them below its PML4 entry.
    let root = paging::kernel_root();
    let mut tables = 0;
    let mut table_frame = || {
        let frame = frames::alloc();
        tables += u64::from(frame.is_some());
        frame
    };
    let mut result = Some(KStack {
        bottom,
        top: guard + STRIDE,
    });
    for i in 0..pages {
        let mapped = frames::alloc().and_then(|frame| {
            paging::zero_frame(frame);
            let flags = Flags::WRITABLE | Flags::NO_EXECUTE | Flags::GLOBAL;
            // SAFETY: the page lies in this core's own stack slot, which only this core
            // changes, and the frame was just allocated for it.
            let r = unsafe {
                paging::map_4k(root, bottom + i * PAGE_SIZE, frame, flags, &mut table_frame)
            };
            if r.is_err() {
                let _ = frames::free(frame);
            }
            r.ok()
        });
        if mapped.is_none() {
            // Out of memory part-way: give back the pages mapped so far, and the stride.
            free(KStack {
                bottom,
                top: bottom + i * PAGE_SIZE,
            });
            result = None;
            break;
        }
    }
    percore::this().mem.stacks.with(|s| s.tables += tables);
    result
}

/// Frames this core's stack slot holds in page tables (kept for the strides' reuse).
pub fn table_frames() -> u64 {
    percore::this().mem.stacks.with(|s| s.tables)
}

/// Unmap a stack made by [`alloc`] on this core and give its frames and stride back.
pub fn free(stack: KStack) {
    let me = current_core();
    assert_eq!(
        owner_of(stack.bottom),
        Some(me),
        "kernel stack freed on the wrong core"
    );
    let root = paging::kernel_root();
    let mut v = stack.bottom;
    while v < stack.top {
        // SAFETY: the stack belongs to this core and its user (a dead thread) is gone.
        if let Some(frame) = unsafe { paging::unmap_4k(root, v) } {
            let _ = frames::free(frame);
        }
        v += PAGE_SIZE;
    }
    let index = (stack.bottom - slot_base(me)) / STRIDE;
    percore::this().mem.stacks.with(|s| s.free.push(index));
}

/// The core whose stack slot holds `vaddr`.
pub fn owner_of(vaddr: u64) -> Option<usize> {
    let core = vaddr.checked_sub(SLOTS_BASE)? / PML4_SLOT_SPAN;
    (core < MAX_CORES as u64).then_some(core as usize)
}

/// Is `vaddr` in an unmapped page below a stack (a guard page)?
pub fn is_guard_page(vaddr: u64) -> bool {
    owner_of(vaddr).is_some() && paging::translate(paging::active_root(), vaddr).is_none()
}
