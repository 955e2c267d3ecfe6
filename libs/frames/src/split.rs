//! Division of usable memory into per-core pools.
//!
//! Each core owns one pool and allocates only from it, so the split decides
//! how much memory every core can ever use. It is done once at boot, with
//! frame counts as equal as possible and each pool a contiguous slice of the
//! address space, so that a core's memory is as physically compact as the
//! memory map allows (fewer pieces, fewer bitmap words, better locality).

use core::fmt;

use crate::{PhysRange, FRAME_SIZE};

/// Maximum number of ranges one pool may hold.
pub const MAX_POOL_RANGES: usize = 8;

/// Maximum number of pools (cores) [`split_into_pools`] can produce.
pub const MAX_CORES: usize = 64;

/// The set of ranges making up one core's pool.
pub type PoolRanges = heapless::Vec<PhysRange, MAX_POOL_RANGES>;

/// Why [`split_into_pools`] could not produce the requested pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitError {
    /// Zero pools were requested.
    NoCores,
    /// More than [`MAX_CORES`] pools were requested.
    TooManyCores,
    /// There are fewer frames than pools, so some pool would be empty.
    NotEnoughFrames,
    /// Some pool would need more than [`MAX_POOL_RANGES`] pieces.
    TooFragmented,
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoCores => "no cores to split memory between",
            Self::TooManyCores => "more cores than supported",
            Self::NotEnoughFrames => "fewer usable frames than cores",
            Self::TooFragmented => "a pool would need too many ranges",
        })
    }
}

impl core::error::Error for SplitError {}

/// Splits `usable` into `n` pools with frame counts as equal as possible.
///
/// `usable` must be frame-aligned, sorted by start and non-overlapping, as
/// produced by [`usable_minus_holes`]; empty ranges are ignored. Memory is
/// dealt out in address order: pool 0 gets the lowest frames, pool `n - 1`
/// the highest, and each pool is the contiguous stretch of memory between,
/// cut into pieces only where `usable` has gaps. Pieces of a pool that touch
/// (adjacent input ranges) are merged. With `T` frames in total, the first
/// `T % n` pools get `T / n + 1` frames and the rest `T / n`.
///
/// # Errors
///
/// [`SplitError::NoCores`] if `n == 0`, [`SplitError::TooManyCores`] if
/// `n > MAX_CORES`, [`SplitError::NotEnoughFrames`] if there are fewer frames
/// than pools, and [`SplitError::TooFragmented`] if some pool's share spans
/// more than [`MAX_POOL_RANGES`] pieces.
///
/// # Panics
///
/// If `usable` is not frame-aligned, sorted and non-overlapping: feeding
/// overlapping input would hand the same frame to two cores.
///
/// [`usable_minus_holes`]: crate::usable_minus_holes
pub fn split_into_pools(
    usable: &[PhysRange],
    n: usize,
) -> Result<heapless::Vec<PoolRanges, MAX_CORES>, SplitError> {
    if n == 0 {
        return Err(SplitError::NoCores);
    }
    if n > MAX_CORES {
        return Err(SplitError::TooManyCores);
    }
    check_normalised(usable);

    let total: u64 = usable.iter().map(PhysRange::frames).sum();
    let cores = n as u64;
    if total < cores {
        return Err(SplitError::NotEnoughFrames);
    }
    let (share, extra) = (total / cores, total % cores);

    let mut pieces = usable.iter().copied().filter(|r| !r.is_empty());
    // The not yet handed out remainder of the current input range.
    let mut rest = pieces.next();
    let mut pools = heapless::Vec::new();
    for core in 0..cores {
        let mut want = share + u64::from(core < extra);
        let mut pool = PoolRanges::new();
        while want > 0 {
            // Unreachable: the shares add up to `total`.
            let range = rest.ok_or(SplitError::NotEnoughFrames)?;
            let take = want.min(range.frames());
            let cut = range.start + take * FRAME_SIZE;
            push_merging(&mut pool, PhysRange::new(range.start, cut))?;
            want -= take;
            rest = if cut == range.end {
                pieces.next()
            } else {
                Some(PhysRange::new(cut, range.end))
            };
        }
        // Cannot fail: `n <= MAX_CORES` was checked above.
        pools.push(pool).map_err(|_| SplitError::TooManyCores)?;
    }
    Ok(pools)
}

/// Asserts the input contract of [`split_into_pools`].
fn check_normalised(usable: &[PhysRange]) {
    let mut prev_end = 0;
    for r in usable.iter().filter(|r| !r.is_empty()) {
        assert!(
            r.start.is_multiple_of(FRAME_SIZE) && r.end.is_multiple_of(FRAME_SIZE),
            "split_into_pools: range {r:x?} is not frame-aligned"
        );
        assert!(
            r.start >= prev_end,
            "split_into_pools: range {r:x?} is unsorted or overlapping"
        );
        prev_end = r.end;
    }
}

/// Appends `piece` to `pool`, extending the last range instead if they touch.
fn push_merging(pool: &mut PoolRanges, piece: PhysRange) -> Result<(), SplitError> {
    match pool.last_mut() {
        Some(last) if last.end == piece.start => {
            last.end = piece.end;
            Ok(())
        }
        _ => pool.push(piece).map_err(|_| SplitError::TooFragmented),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_merging_extends_touching_ranges_only() {
        let mut pool = PoolRanges::new();
        push_merging(&mut pool, PhysRange::new(0x1000, 0x2000)).unwrap();
        push_merging(&mut pool, PhysRange::new(0x2000, 0x4000)).unwrap();
        push_merging(&mut pool, PhysRange::new(0x5000, 0x6000)).unwrap();
        assert_eq!(
            pool,
            [
                PhysRange::new(0x1000, 0x4000),
                PhysRange::new(0x5000, 0x6000)
            ]
        );
    }

    #[test]
    fn push_merging_reports_overflow() {
        let mut pool = PoolRanges::new();
        for i in 0..MAX_POOL_RANGES as u64 {
            push_merging(&mut pool, PhysRange::new(i * 0x2000, i * 0x2000 + 0x1000)).unwrap();
        }
        let overflow = PhysRange::new(0x10_0000, 0x10_1000);
        assert_eq!(
            push_merging(&mut pool, overflow),
            Err(SplitError::TooFragmented)
        );
    }
}
