//! Each core's frame pool: the kernel side of `libs/frames`.
//!
//! The bootstrap core decides the split ([`set_pool_layout`]); every core then builds the
//! allocator for its own pool, keeping the pool's bitmap in the pool's own first frames
//! ([`init_this_core`]). [`alloc`] takes only from the calling core's pool. [`free`] returns
//! a frame to the pool it came from: directly when that is the caller's, through the
//! owner's remote list otherwise.

use crate::arch::x86_64::paging::phys_to_virt;
use crate::percore::{self, current_core};
use ::frames::{FramePool, PhysRange, PoolRanges, FRAME_SIZE};
use abi::MAX_CORES;
use core::sync::atomic::Ordering;

static LAYOUT: spin::Once<heapless::Vec<PoolRanges, MAX_CORES>> = spin::Once::new();

/// Record the split of physical memory into per-core pools (bootstrap core, once).
pub fn set_pool_layout(pools: heapless::Vec<PoolRanges, MAX_CORES>) {
    LAYOUT.call_once(|| pools);
}

/// The ranges of `core`'s pool.
pub fn pool_ranges(core: usize) -> &'static [PhysRange] {
    LAYOUT
        .get()
        .and_then(|l| l.get(core))
        .map_or(&[], |r| r.as_slice())
}

/// Which core's pool holds `paddr`.
pub fn owner_of(paddr: u64) -> Option<usize> {
    LAYOUT
        .get()?
        .iter()
        .position(|ranges| ranges.iter().any(|r| r.contains(paddr)))
}

/// The end of the pool range that holds `paddr` (0 if none): a run of frames given to
/// [`free_contiguous`] must stay below it.
pub fn range_end(paddr: u64) -> u64 {
    LAYOUT
        .get()
        .and_then(|l| l.iter().flatten().find(|r| r.contains(paddr)))
        .map_or(0, |r| r.end)
}

/// Build this core's pool allocator, its bitmap stored in the pool's own frames.
pub fn init_this_core() {
    let me = current_core();
    let ranges = pool_ranges(me);
    assert!(!ranges.is_empty(), "core {me} has no frame pool");
    let words = FramePool::bitmap_words(ranges);
    let bytes = (words * 8) as u64;
    let home = ranges
        .iter()
        .find(|r| r.end - r.start >= bytes.next_multiple_of(FRAME_SIZE))
        .expect("no range of the pool can hold its own bitmap");
    let bitmap_at = home.start;
    // SAFETY: the pool's memory belongs to this core alone (the layout gives every frame to
    // exactly one core), it is direct-mapped, and the bitmap's frames are reserved below so
    // the allocator never hands them out.
    let bitmap =
        unsafe { core::slice::from_raw_parts_mut(phys_to_virt(bitmap_at) as *mut u64, words) };
    bitmap.fill(0);
    let mut pool = FramePool::new(me, ranges, bitmap);
    pool.reserve(PhysRange::new(
        bitmap_at,
        bitmap_at + bytes.next_multiple_of(FRAME_SIZE),
    ));
    let mem = &percore::this().mem;
    mem.frames_total
        .store(pool.total_frames(), Ordering::Relaxed);
    mem.frames_free.store(pool.free_frames(), Ordering::Relaxed);
    mem.frames_reserved.store(
        ::frames::kernel_reserve(pool.total_frames()),
        Ordering::Relaxed,
    );
    mem.pool.with(|p| *p = Some(pool));
}

fn with_pool<R>(f: impl FnOnce(&mut FramePool<'static>) -> R) -> R {
    let mem = &percore::this().mem;
    mem.pool.with(|p| {
        let pool = p.as_mut().expect("frame pool used before init_this_core");
        if !mem.remote_frames.is_empty() {
            mem.remote_frames.drain(|at, frames| {
                let paddr = at - phys_to_virt(0);
                if let Err(e) = pool.free_contiguous(paddr, frames) {
                    log::error!("frame {paddr:#x} handed back by another core: {e}");
                }
            });
        }
        let r = f(pool);
        mem.frames_free.store(pool.free_frames(), Ordering::Relaxed);
        r
    })
}

/// Frames of `core`'s pool that user memory may never take (`frames::kernel_reserve`,
/// sized to the pool): the kernel's own allocations (heap growth, page tables, kernel
/// stacks) always find room, so a program that asks for all the memory it can get fails
/// its own request instead of bringing the kernel down.
pub fn kernel_reserve(core: usize) -> u64 {
    percore::of(core)
        .mem
        .frames_reserved
        .load(Ordering::Relaxed)
}

/// Has this core `pages` free frames beyond the kernel's reserve (so user memory, or a
/// copy a program asked for, may take that many)?
pub fn above_reserve(pages: u64) -> bool {
    let core = current_core();
    counts(core).0 >= kernel_reserve(core) + pages
}

/// One frame for user memory from this core's pool, unless that would eat into the
/// kernel's reserve.
pub fn alloc_user() -> Option<u64> {
    let reserve = kernel_reserve(current_core());
    with_pool(|p| {
        if p.free_frames() <= reserve {
            None
        } else {
            p.alloc()
        }
    })
}

/// One frame from this core's pool.
pub fn alloc() -> Option<u64> {
    with_pool(|p| p.alloc())
}

/// `count` contiguous frames from this core's pool, aligned to `align_frames` frames.
pub fn alloc_contiguous(count: u64, align_frames: u64) -> Option<u64> {
    with_pool(|p| p.alloc_contiguous(count, align_frames))
}

/// Return `count` contiguous frames at `paddr` to the pool they came from.
pub fn free_contiguous(paddr: u64, count: u64) -> Result<(), ::frames::FreeError> {
    match owner_of(paddr) {
        Some(owner) if owner == current_core() => with_pool(|p| p.free_contiguous(paddr, count)),
        Some(owner) => {
            // SAFETY: the caller gives the frames up; they are direct-mapped, 4 KiB, and
            // become the owner's again when it drains its list.
            unsafe {
                percore::of(owner)
                    .mem
                    .remote_frames
                    .push(phys_to_virt(paddr), count)
            };
            Ok(())
        }
        None => Err(::frames::FreeError::NotOwned),
    }
}

/// Return one frame to the pool it came from.
pub fn free(paddr: u64) -> Result<(), ::frames::FreeError> {
    free_contiguous(paddr, 1)
}

/// This core's (free, total) frames.
pub fn counts(core: usize) -> (u64, u64) {
    let mem = &percore::of(core).mem;
    (
        mem.frames_free.load(Ordering::Relaxed),
        mem.frames_total.load(Ordering::Relaxed),
    )
}

/// Hand back frames other cores returned to this core (called from idle).
pub fn drain_remote() {
    if !percore::this().mem.remote_frames.is_empty() {
        with_pool(|_| ());
    }
}

const _: () = assert!(super::remote::MIN_BLOCK as u64 <= FRAME_SIZE);
const _: () = assert!(MAX_CORES <= 64);
