//! Physical frame management for Musubi's per-core memory pools.
//!
//! Musubi follows the Tender/Barrelfish model: at boot the physical memory
//! map is carved into one pool per core, and afterwards each core allocates
//! frames only from its own pool, so the common allocation path never touches
//! shared state. This crate is the hardware-independent part of that scheme,
//! kept separate from the kernel so it can be tested exhaustively on the host:
//!
//! 1. [`usable_minus_holes`] turns the firmware's usable ranges minus the
//!    reserved ones (kernel image, boot modules, low memory, ...) into a
//!    sorted, coalesced list of whole frames.
//! 2. [`split_into_pools`] divides that list into `n` balanced,
//!    address-ordered pools.
//! 3. [`FramePool`] is one core's allocator: a bitmap over its pool's ranges.
//!
//! The crate is `no_std`, allocation-free and contains no `unsafe`; the caller
//! supplies the bitmap storage.
//!
//! # Example
//!
//! ```
//! use frames::{split_into_pools, usable_minus_holes, FramePool, PhysRange};
//!
//! const MIB: u64 = 1 << 20;
//! // Firmware map: 640 KiB of low memory, then RAM from 1 MiB to 128 MiB.
//! let usable = [PhysRange::new(0, 0xA_0000), PhysRange::new(MIB, 128 * MIB)];
//! // Kept back: the low 1 MiB and the kernel image.
//! let holes = [PhysRange::new(0, MIB), PhysRange::new(2 * MIB, 3 * MIB)];
//!
//! let mut memory = [PhysRange::new(0, 0); 16];
//! let n = usable_minus_holes(&usable, &holes, &mut memory);
//! let pools = split_into_pools(&memory[..n], 2).unwrap();
//! assert_eq!(pools[0][0], PhysRange::new(MIB, 2 * MIB));
//!
//! // Core 0's allocator. In the kernel the bitmap would live in frames of
//! // the pool itself, excluded afterwards with `FramePool::reserve`.
//! let mut bitmap = vec![0; FramePool::bitmap_words(&pools[0])];
//! let mut pool = FramePool::new(0, &pools[0], &mut bitmap);
//! // 1..2 MiB plus 3..128 MiB is 32256 frames, half of them per core.
//! assert_eq!(pool.total_frames(), 32_256 / 2);
//! let frame = pool.alloc().unwrap();
//! assert!(pool.contains(frame));
//! pool.free(frame).unwrap();
//! ```

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bitmap;
mod pool;
mod range;
mod split;

pub use pool::{FramePool, FreeError};
pub use range::{usable_minus_holes, PhysRange};
pub use split::{split_into_pools, PoolRanges, SplitError, MAX_CORES, MAX_POOL_RANGES};

/// Size in bytes of one physical frame (an x86_64 base page).
pub const FRAME_SIZE: u64 = 4096;

/// Frames of a pool of `total` frames that user memory may never take, so the kernel's own
/// allocations (heap growth, page tables, kernel stacks) find room even when a program
/// has taken all it could: an eighth of the pool, at least 1 MiB and at most 8 MiB. Sized
/// to the pool, so that a small machine (64 MiB on 8 cores: 8 MiB pools) still leaves
/// most of each pool to programs, which a fixed 8 MiB reserve did not.
pub const fn kernel_reserve(total: u64) -> u64 {
    const MIN: u64 = (1 << 20) / FRAME_SIZE;
    const MAX: u64 = (8 << 20) / FRAME_SIZE;
    let eighth = total / 8;
    if eighth < MIN {
        MIN
    } else if eighth > MAX {
        MAX
    } else {
        eighth
    }
}

#[cfg(test)]
mod reserve_tests {
    use super::kernel_reserve;

    #[test]
    fn reserve_follows_the_pool_within_bounds() {
        // 126 MiB pool (512 MiB on 4 cores): the full 8 MiB.
        assert_eq!(kernel_reserve(32_386), 2048);
        // 8 MiB pool (64 MiB on 8 cores): 1 MiB, not all of it.
        assert_eq!(kernel_reserve(2_000), 256);
        // 16 MiB pool: an eighth, 2 MiB.
        assert_eq!(kernel_reserve(4_096), 512);
        assert_eq!(kernel_reserve(0), 256);
    }
}
