//! Each core's kernel heap: a `talc` allocator fed from the core's own frame pool, which
//! gives frames back to that pool when it has more free memory than it needs.
//!
//! The global allocator sends every allocation to the calling core's heap, which grows by
//! claiming an *arena* of contiguous frames from that core's pool when it runs out. A block
//! freed on another core goes back to its owner through the owner's remote list (see
//! [`super::remote`]), so a heap is only ever touched by its own core.
//!
//! Giving back ([`trim`], from the idle loop): each arena remembers its frames and talc's
//! end of it in a small header at its base. When the free tops of the arenas add up to more
//! than [`TRIM_ABOVE`], the heap truncates them (`Talc::truncate`, newest arena first; an
//! arena with nothing allocated in it goes whole) until [`SLACK_BYTES`] of free top remain,
//! and returns the whole frames above each new end to the pool. The first arena holds
//! talc's own metadata, so it never goes. `heap_bytes` counts the frames the heap holds.

use super::frames;
use crate::arch::x86_64::paging::{kernel_virt_to_phys, phys_to_virt};
use crate::percore::{self, current_core};
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;
use core::sync::atomic::Ordering;
use talc::base::binning::Binning;
use talc::base::Talc;
use talc::source::Source;
use talc::DefaultBinning;

/// Smallest amount the heap grows by.
const GROW_BYTES: u64 = 1 << 20;

/// Free heap (at the tops of arenas) a trim leaves in place, so that a burst of
/// allocations after an idle moment does not have to claim frames again.
pub const SLACK_BYTES: u64 = 256 << 10;

/// A trim happens only when more than this could go: a heap whose use swings by less
/// than one arena (plus the slack) neither gives back nor claims again, so it does not
/// thrash between the pool and the heap.
pub const TRIM_ABOVE: u64 = SLACK_BYTES + GROW_BYTES;

const FRAME: u64 = ::frames::FRAME_SIZE;

/// Bytes at an arena's base that hold its [`Arena`] record (talc's heap starts above).
const ARENA_HEADER: u64 = 32;

/// What the heap remembers of one arena, written at the arena's base.
#[repr(C)]
struct Arena {
    /// Base of the next older arena (0: none).
    next: u64,
    /// End of the frames the arena still holds (frame-aligned); they start at its base.
    frames_end: u64,
    /// Talc's end of the arena's heap (`heap_end` of `claim`/`truncate`), `<= frames_end`.
    heap_end: u64,
}

/// Grows a core's heap from that core's frame pool and remembers the arenas it claimed
/// (a list through their headers, newest first) so that [`trim`] can give them back.
#[derive(Debug)]
pub struct PoolSource {
    /// Base (kernel virtual address) of the newest arena; 0 before the first.
    newest: u64,
}

// SAFETY: `acquire` only claims memory it has just taken from this core's frame pool,
// which nobody else uses; it never touches another allocator.
unsafe impl Source for PoolSource {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        let want = (layout.size() as u64)
            .saturating_add(layout.align() as u64 + FRAME + ARENA_HEADER)
            .next_multiple_of(FRAME);
        // A megabyte at a time when the pool has one in a piece, else just what is needed.
        let (bytes, paddr) = [want.max(GROW_BYTES), want]
            .into_iter()
            .find_map(|b| frames::alloc_contiguous(b / FRAME, 1).map(|p| (b, p)))
            .ok_or(())?;
        let base = phys_to_virt(paddr);
        // SAFETY: the frames are ours, direct-mapped and unused; the header below the
        // claimed part is ours too.
        let claimed = unsafe {
            talc.claim(
                (base + ARENA_HEADER) as *mut u8,
                (bytes - ARENA_HEADER) as usize,
            )
        };
        let Some(heap_end) = claimed else {
            give_back(paddr, bytes / FRAME);
            return Err(());
        };
        // SAFETY: the header bytes are ours, direct-mapped, 8-aligned and outside the heap.
        unsafe {
            (base as *mut Arena).write(Arena {
                next: talc.source.newest,
                frames_end: base + bytes,
                heap_end: heap_end.as_ptr() as u64,
            })
        };
        talc.source.newest = base;
        percore::this()
            .mem
            .heap_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}

/// Return `count` frames at `paddr` to this core's pool (they were the heap's).
fn give_back(paddr: u64, count: u64) {
    // The heap claimed these frames from this very pool and gives each back once: a
    // refusal is a kernel bug, and the pool is left unchanged by it.
    let r = frames::free_contiguous(paddr, count);
    assert!(
        r.is_ok(),
        "heap gave back frames {paddr:#x}+{count} it did not hold"
    );
}

pub struct CoreHeap {
    talc: Talc<PoolSource, DefaultBinning>,
    /// Bytes of the heap allocated and not freed (padded sizes; talc's tags not counted).
    used: u64,
}

/// Create this core's heap (after its frame pool).
pub fn init_this_core() {
    let heap = CoreHeap {
        talc: Talc::new(PoolSource { newest: 0 }),
        used: 0,
    };
    percore::this().mem.heap.with(|h| *h = Some(heap));
}

/// Bytes an arena could give back: above the page that holds its highest allocation, or
/// the whole arena when nothing is allocated in it.
fn releasable(talc: &Talc<PoolSource, DefaultBinning>, base: u64, arena: &Arena) -> u64 {
    // SAFETY: `heap_end` is the arena's current end: `acquire` and `trim_heap` record every
    // change of it.
    let r = unsafe { talc.reserved(NonNull::new_unchecked(arena.heap_end as *mut u8)) };
    let keep_to = if r.any {
        (r.up_to.as_ptr() as u64).next_multiple_of(FRAME)
    } else {
        base
    };
    arena.frames_end.saturating_sub(keep_to)
}

/// Give the free tops of arenas back to the pool, keeping [`SLACK_BYTES`]; bytes given.
fn trim_heap(heap: &mut CoreHeap) -> u64 {
    // What arenas could give back is at most what the heap holds and does not use: the
    // idle loop asks every time, so say "nothing" without walking the arenas when so.
    let held = percore::this().mem.heap_bytes.load(Ordering::Relaxed);
    if held.saturating_sub(heap.used) <= TRIM_ABOVE {
        return 0;
    }
    let talc = &mut heap.talc;
    let mut total = 0;
    let mut at = talc.source.newest;
    while at != 0 {
        // SAFETY: every arena on the list starts with the header `acquire` wrote.
        let arena = unsafe { &*(at as *const Arena) };
        total += releasable(talc, at, arena);
        at = arena.next;
    }
    if total <= TRIM_ABOVE {
        return 0;
    }
    let mut excess = total - SLACK_BYTES;
    let mut given = 0;
    let (mut prev, mut at) = (0u64, talc.source.newest);
    while at != 0 && excess > 0 {
        let header = at as *mut Arena;
        // SAFETY: as above.
        let arena = unsafe { header.read() };
        let release = releasable(talc, at, &arena).min(excess);
        if release == 0 {
            (prev, at) = (at, arena.next);
            continue;
        }
        let target = arena.frames_end - release;
        // Down to the base: let talc delete the arena's heap (it keeps what is reserved).
        let new_end = if target <= at {
            core::ptr::null_mut()
        } else {
            target as *mut u8
        };
        // SAFETY: `heap_end` is the arena's current end (see `releasable`).
        let kept =
            unsafe { talc.truncate(NonNull::new_unchecked(arena.heap_end as *mut u8), new_end) };
        let frames_from = match kept {
            Some(end) => {
                let end = end.as_ptr() as u64;
                let frames_end = end.next_multiple_of(FRAME);
                // SAFETY: the header is still ours (the arena keeps its first frame).
                unsafe {
                    (*header).heap_end = end;
                    (*header).frames_end = frames_end;
                }
                prev = at;
                frames_end
            }
            None => {
                // The arena's heap is gone: unlink it and give back every frame.
                if prev == 0 {
                    talc.source.newest = arena.next;
                } else {
                    // SAFETY: `prev` is an arena still on the list.
                    unsafe { (*(prev as *mut Arena)).next = arena.next };
                }
                at
            }
        };
        let bytes = arena.frames_end - frames_from;
        if bytes > 0 {
            give_back(frames_from - phys_to_virt(0), bytes / FRAME);
        }
        given += bytes;
        excess = excess.saturating_sub(bytes);
        at = arena.next;
    }
    percore::this()
        .mem
        .heap_bytes
        .fetch_sub(given, Ordering::Relaxed);
    given
}

/// Give this core's spare heap memory back to its frame pool (called from idle): blocks
/// other cores freed come home first, then the free tops of arenas beyond
/// [`SLACK_BYTES`] go, if more than [`TRIM_ABOVE`] could. Bytes given back.
pub fn trim() -> u64 {
    percore::this().mem.heap.with(|h| {
        h.as_mut().map_or(0, |heap| {
            drain_remote_into(heap);
            trim_heap(heap)
        })
    })
}

/// Bytes of this core's heap in use (allocated and not freed, counting blocks other cores
/// freed once they are home): what a leak check compares, as the frames the heap holds
/// (`heap_bytes`) also follow its slack.
pub fn used_bytes() -> u64 {
    percore::this().mem.heap.with(|h| {
        h.as_mut().map_or(0, |heap| {
            drain_remote_into(heap);
            heap.used
        })
    })
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
        heap.used = heap.used.saturating_sub(size as u64);
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
            match unsafe { heap.talc.allocate(layout) } {
                Some(p) => {
                    heap.used += layout.size() as u64;
                    p.as_ptr()
                }
                None => core::ptr::null_mut(),
            }
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
                heap.used = heap.used.saturating_sub(layout.size() as u64);
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
