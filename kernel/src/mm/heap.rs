//! Each core's kernel heap: a `talc` allocator fed from the core's own frame pool.
//!
//! The global allocator sends every allocation to the calling core's heap, which grows by
//! claiming contiguous frames from that core's pool when it runs out. A block freed on
//! another core goes back to its owner through the owner's remote list (see
//! [`super::remote`]), so a heap is only ever touched by its own core.

use super::frames;
use crate::arch::x86_64::paging::{kernel_virt_to_phys, phys_to_virt};
use crate::percore::{self, current_core};
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::Ordering;
use talc::base::binning::Binning;
use talc::base::Talc;
use talc::source::Source;
use talc::DefaultBinning;

/// Smallest amount the heap grows by.
const GROW_BYTES: u64 = 1 << 20;

/// Grows a core's heap from that core's frame pool.
#[derive(Debug)]
pub struct PoolSource;

// SAFETY: `acquire` only claims memory it has just taken from this core's frame pool,
// which nobody else uses; it never touches another allocator.
unsafe impl Source for PoolSource {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        let want = (layout.size() as u64)
            .saturating_add(layout.align() as u64 + 4096)
            .next_multiple_of(4096);
        // A megabyte at a time when the pool has one in a piece, else just what is needed.
        let (bytes, paddr) = [want.max(GROW_BYTES), want]
            .into_iter()
            .find_map(|b| frames::alloc_contiguous(b / 4096, 1).map(|p| (b, p)))
            .ok_or(())?;
        // SAFETY: the frames are ours, direct-mapped and unused.
        unsafe { talc.claim(phys_to_virt(paddr) as *mut u8, bytes as usize) }.ok_or(())?;
        percore::this()
            .mem
            .heap_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}

pub struct CoreHeap {
    talc: Talc<PoolSource, DefaultBinning>,
}

/// Create this core's heap (after its frame pool).
pub fn init_this_core() {
    let heap = CoreHeap {
        talc: Talc::new(PoolSource),
    };
    percore::this().mem.heap.with(|h| *h = Some(heap));
}

/// Blocks are at least a remote-list node and 8-aligned, so any block can travel home.
fn padded(layout: Layout) -> Layout {
    let size = layout.size().max(super::remote::MIN_BLOCK);
    let align = layout.align().max(8);
    Layout::from_size_align(size, align).unwrap_or(layout)
}

fn drain_remote_into(heap: &mut CoreHeap) {
    let mem = &percore::this().mem;
    if mem.remote_blocks.is_empty() {
        return;
    }
    mem.remote_blocks.drain(|at, packed| {
        let (size, align) = ((packed & 0xffff_ffff) as usize, (packed >> 32) as usize);
        // SAFETY: the block was allocated from this heap with exactly this layout and its
        // freeing core gave it up.
        unsafe {
            heap.talc.deallocate(
                at as *mut u8,
                Layout::from_size_align_unchecked(size, align),
            )
        };
    });
}

/// Hand back blocks other cores freed (called from idle).
pub fn drain_remote() {
    if !percore::this().mem.remote_blocks.is_empty() {
        percore::this().mem.heap.with(|h| {
            if let Some(h) = h {
                drain_remote_into(h);
            }
        });
    }
}

/// The kernel's global allocator: per-core heaps.
pub struct PerCoreHeaps;

// SAFETY: every allocation comes from the calling core's talc heap, which is only used by
// that core (CoreCell enforces it); deallocation happens on the owner or is forwarded to it.
unsafe impl GlobalAlloc for PerCoreHeaps {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let layout = padded(layout);
        percore::this().mem.heap.with(|h| {
            let Some(heap) = h else {
                return core::ptr::null_mut();
            };
            drain_remote_into(heap);
            // SAFETY: layout is non-zero-sized (GlobalAlloc contract, then padded).
            unsafe { heap.talc.allocate(layout) }.map_or(core::ptr::null_mut(), |p| p.as_ptr())
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let layout = padded(layout);
        let owner = kernel_virt_to_phys(ptr as u64).and_then(frames::owner_of);
        match owner {
            Some(o) if o == current_core() => percore::this().mem.heap.with(|h| {
                let heap = h
                    .as_mut()
                    .expect("heap memory freed before the heap exists");
                // SAFETY: `ptr` came from this heap with this (padded) layout.
                unsafe { heap.talc.deallocate(ptr, layout) };
            }),
            Some(o) => {
                let packed = layout.size() as u64 | ((layout.align() as u64) << 32);
                // SAFETY: the block is at least MIN_BLOCK bytes and 8-aligned (padded), and
                // the caller gives it up.
                unsafe { percore::of(o).mem.remote_blocks.push(ptr as u64, packed) };
            }
            None => panic!("dealloc of {ptr:p}, which is in no core's pool"),
        }
    }
}

#[global_allocator]
static ALLOCATOR: PerCoreHeaps = PerCoreHeaps;

/// Which core's heap a pointer belongs to.
pub fn owner_of_ptr(ptr: *const u8) -> Option<usize> {
    kernel_virt_to_phys(ptr as u64).and_then(frames::owner_of)
}
