//! Physical address ranges and the carving of the boot memory map.
//!
//! Firmware memory maps arrive unsorted, at byte granularity, possibly with
//! overlapping or adjacent entries, and the kernel must carve its own
//! reservations out of them. Everything downstream (pool splitting, the
//! bitmaps) wants the opposite: sorted, disjoint runs of whole frames. This
//! module does that normalisation once, in [`usable_minus_holes`].

use crate::FRAME_SIZE;

/// Half-open physical byte range `[start, end)`.
///
/// A range with `start >= end` is empty; constructors do not reject it, so
/// that raw firmware data can be wrapped as-is and normalised afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysRange {
    /// First byte in the range.
    pub start: u64,
    /// First byte past the range.
    pub end: u64,
}

impl PhysRange {
    /// Creates the range `[start, end)`.
    pub const fn new(start: u64, end: u64) -> Self {
        Self { start, end }
    }

    /// Returns `true` if the range holds no bytes.
    pub const fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// Shrinks the range to whole frames (start rounded up, end rounded down).
    ///
    /// Returns `None` if no whole frame remains.
    pub fn frame_aligned(self) -> Option<PhysRange> {
        let start = self.start.checked_next_multiple_of(FRAME_SIZE)?;
        let end = self.end - self.end % FRAME_SIZE;
        (start < end).then_some(PhysRange { start, end })
    }

    /// Number of frames in the range: `(end - start) / FRAME_SIZE`.
    ///
    /// Exact for frame-aligned ranges; for others it is the byte length
    /// divided by [`FRAME_SIZE`], not the number of whole frames inside
    /// (use [`frame_aligned`](Self::frame_aligned) first for that). An empty
    /// range has zero frames.
    pub fn frames(&self) -> u64 {
        self.end.saturating_sub(self.start) / FRAME_SIZE
    }

    /// Returns `true` if `addr` lies in `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The bytes common to `self` and `other`, or `None` if there are none.
    pub fn intersection(&self, other: &PhysRange) -> Option<PhysRange> {
        let r = PhysRange::new(self.start.max(other.start), self.end.min(other.end));
        (!r.is_empty()).then_some(r)
    }
}

/// Subtracts `holes` from `usable`, frame-aligns the result, sorts it by
/// start and writes it into `out`; returns the number of ranges written.
///
/// `usable` is typically the firmware's list of usable memory and `holes`
/// the kernel's own reservations (kernel image, boot modules, the low 1 MiB,
/// ...). Neither list needs to be sorted, aligned or disjoint; empty ranges
/// are ignored. The subtraction is done on bytes and the alignment last, so a
/// frame is kept only if every byte of it is usable and none is reserved:
/// a hole that touches part of a frame removes the whole frame, while usable
/// entries that abut or overlap are merged before alignment.
///
/// The output is sorted, disjoint and coalesced: consecutive ranges are never
/// adjacent, which keeps the piece count low for [`split_into_pools`].
///
/// If `out` is too small, the ranges with the lowest addresses are kept and
/// the rest dropped; the return value tells how many were kept.
///
/// Needs no scratch memory; the cost is polynomial (roughly cubic) in the
/// number of entries, which is negligible for memory-map sized inputs.
///
/// [`split_into_pools`]: crate::split_into_pools
pub fn usable_minus_holes(
    usable: &[PhysRange],
    holes: &[PhysRange],
    out: &mut [PhysRange],
) -> usize {
    let mut written = 0;
    // Everything below `cursor` has been emitted or ruled out.
    let mut cursor = 0;
    while written < out.len() {
        let Some(run) = next_usable_run(usable, cursor) else {
            break;
        };
        // The run starts inside a hole: skip past that hole and look again.
        if let Some(hole) = holes.iter().find(|h| h.contains(run.start)) {
            cursor = hole.end;
            continue;
        }
        // Otherwise the piece ends at the run's end or at the next hole.
        let end = holes
            .iter()
            .filter(|h| !h.is_empty() && h.start > run.start)
            .fold(run.end, |end, h| end.min(h.start));
        if let Some(piece) = PhysRange::new(run.start, end).frame_aligned() {
            out[written] = piece;
            written += 1;
        }
        cursor = end;
    }
    written
}

/// The maximal run of the union of `usable` that starts at the lowest usable
/// address at or above `cursor`, or `None` if nothing usable lies there.
fn next_usable_run(usable: &[PhysRange], cursor: u64) -> Option<PhysRange> {
    let start = usable
        .iter()
        .filter(|r| !r.is_empty() && r.end > cursor)
        .map(|r| r.start.max(cursor))
        .min()?;
    // Grow the run through every entry that overlaps or abuts it. Each pass
    // either extends `end` or finishes, so there are at most `usable.len()`.
    let mut end = start;
    loop {
        let grown = usable
            .iter()
            .filter(|r| r.start <= end && r.end > end)
            .map(|r| r.end)
            .max();
        match grown {
            Some(e) => end = e,
            None => return Some(PhysRange::new(start, end)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_usable_run_merges_overlapping_and_adjacent_entries() {
        let usable = [
            PhysRange::new(0x5000, 0x6000),
            PhysRange::new(0x1000, 0x3000),
            PhysRange::new(0x2000, 0x4000),
            PhysRange::new(0x4000, 0x4800),
        ];
        assert_eq!(
            next_usable_run(&usable, 0),
            Some(PhysRange::new(0x1000, 0x4800))
        );
        assert_eq!(
            next_usable_run(&usable, 0x3000),
            Some(PhysRange::new(0x3000, 0x4800))
        );
        assert_eq!(
            next_usable_run(&usable, 0x4800),
            Some(PhysRange::new(0x5000, 0x6000))
        );
        assert_eq!(next_usable_run(&usable, 0x6000), None);
    }
}
