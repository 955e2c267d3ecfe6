//! The global allocator: a `talc` heap that grows through the `MEMORY` call.
//!
//! The heap starts right after the program's highest segment, and `MEMORY(n)` extends it
//! by `n` bytes (rounded to pages), returning the old end, like `sbrk`. When talc runs out
//! it asks [`BreakSource::acquire`] for more: that grows the heap by at least
//! [`GROW_BYTES`] and hands talc the new range, as an extension of the last range when it
//! follows on directly, or as a new range when someone else (a program calling
//! [`crate::sys::memory`] itself, like the `basics` benchmark) moved the end in between.
//! The heap never shrinks.
//!
//! The talc instance sits in a [`Local`] cell: a lock that a thread finding it taken waits
//! for by yielding the core (the holder may have been preempted in the middle of an
//! allocation), see [`crate::cell`]. In a program with one thread it is never contended.

use crate::cell::Local;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::{null_mut, NonNull};
use talc::base::binning::Binning;
use talc::base::Talc;
use talc::source::Source;
use talc::DefaultBinning;

/// Smallest amount the heap grows by at a time.
pub const GROW_BYTES: usize = 64 * 1024;
const PAGE: usize = 4096;

/// Grows talc's heap with `MEMORY`.
#[derive(Debug)]
pub struct BreakSource {
    /// End of talc's last range, as talc reported it.
    heap_end: Option<NonNull<u8>>,
    /// End of the program's heap after our last `MEMORY` call.
    brk: usize,
}

// SAFETY: `acquire` gives talc only memory that the kernel has just mapped for this
// program at its request and that nothing else uses; it never allocates itself.
unsafe impl Source for BreakSource {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        // Room for the block, its alignment, and talc's bookkeeping (the first range also
        // holds talc's bin table).
        let want = layout.size().checked_add(layout.align() + PAGE).ok_or(())?;
        let grow = want
            .max(GROW_BYTES)
            .checked_next_multiple_of(PAGE)
            .ok_or(())?;
        let start = crate::sys::memory(grow).map_err(drop)?;
        let end = start.checked_add(grow).ok_or(())?;
        let src = &talc.source;
        let new_end = match src.heap_end {
            // SAFETY: `start..end` was just mapped for us; it continues talc's last range,
            // whose end talc gave us.
            Some(heap_end) if src.brk == start => unsafe { talc.extend(heap_end, end as *mut u8) },
            // SAFETY: `start..end` was just mapped for us and nothing else uses it.
            _ => unsafe { talc.claim(start as *mut u8, grow) }.ok_or(())?,
        };
        talc.source.heap_end = Some(new_end);
        talc.source.brk = end;
        Ok(())
    }
}

/// The program's allocator.
pub struct Heap(Local<Talc<BreakSource, DefaultBinning>>);

// SAFETY: every method hands the request to talc with the caller's layout, under the
// exclusive access `Local` gives; talc upholds the GlobalAlloc contract.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: GlobalAlloc guarantees a non-zero size.
        self.0
            .with(|t| unsafe { t.allocate(layout) })
            .map_or(null_mut(), NonNull::as_ptr)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc contract).
        self.0.with(|t| unsafe { t.deallocate(ptr, layout) })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let in_place = self.0.with(|t| {
            // SAFETY: `ptr` came from this allocator with `layout`; `new_size` is non-zero
            // (GlobalAlloc contract).
            unsafe { t.try_realloc_in_place(ptr, layout, new_size) }
        });
        if in_place {
            return ptr;
        }
        let new_layout = Layout::from_size_align(new_size, layout.align());
        let Ok(new_layout) = new_layout else {
            return null_mut();
        };
        // SAFETY: non-zero size (GlobalAlloc contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct, and at least this long.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[global_allocator]
static HEAP: Heap = Heap(Local::new(Talc::new(BreakSource {
    heap_end: None,
    brk: 0,
})));
