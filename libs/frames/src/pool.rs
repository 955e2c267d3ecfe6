//! One core's frame allocator: a bitmap over the ranges of its pool.
//!
//! Every core gets a [`FramePool`] built from its share of
//! [`split_into_pools`](crate::split_into_pools) and allocates only from it.
//! The pool is a plain single-owner structure (`&mut self` throughout, no
//! internal locking); [`FramePool::owner`] and [`FramePool::contains`] let the
//! kernel route a frame released on another core back to the core that owns
//! it. A bitmap (one bit per frame) was chosen over a free list because it
//! lives outside the frames it manages (freed memory is never written to),
//! detects double frees at no extra cost, and supports aligned contiguous
//! allocation for DMA buffers and huge pages.

use core::fmt;

use crate::bitmap::{self, clear_run, find_clear, find_set, set_run, WORD_BITS};
use crate::{PhysRange, PoolRanges, FRAME_SIZE, MAX_POOL_RANGES};

/// Why [`FramePool::free`] or [`FramePool::free_contiguous`] refused a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeError {
    /// The frames do not (all) lie in one range of this pool.
    NotOwned,
    /// The address is not the start of a frame.
    Misaligned,
    /// A frame is already free.
    DoubleFree,
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotOwned => "frame does not belong to this pool",
            Self::Misaligned => "address is not frame-aligned",
            Self::DoubleFree => "frame is already free",
        })
    }
}

impl core::error::Error for FreeError {}

/// One core's pool of physical frames, tracked by a bitmap with one bit per
/// frame (1 = in use).
///
/// The bitmap storage is borrowed from the caller; each range's bits start on
/// a word boundary, and the unused tail bits of a range's last word are kept
/// set so that word-level scans never see them as free.
pub struct FramePool<'a> {
    owner: usize,
    /// Frame-aligned, sorted, disjoint.
    ranges: PoolRanges,
    /// Range `i` owns `bitmap[word_start[i]..word_start[i + 1]]`.
    word_start: [usize; MAX_POOL_RANGES + 1],
    bitmap: &'a mut [u64],
    total: u64,
    free: u64,
    /// Word where the next single-frame search starts (next fit).
    hint: usize,
}

impl<'a> FramePool<'a> {
    /// Number of `u64` words of bitmap storage `ranges` need.
    ///
    /// Ranges are counted in whole frames (as [`new`](Self::new) shrinks
    /// them), and each range's bitmap starts on a word boundary.
    pub fn bitmap_words(ranges: &[PhysRange]) -> usize {
        ranges
            .iter()
            .filter_map(|r| r.frame_aligned())
            .map(|r| bitmap::words_for(r.frames()))
            .sum()
    }

    /// Builds the pool owned by core `owner` over `ranges`, with every frame
    /// free.
    ///
    /// Ranges are shrunk to whole frames, empty ones are dropped, and the rest
    /// are sorted by address. Only the first [`bitmap_words`](Self::bitmap_words)
    /// words of `bitmap` are used; their previous contents do not matter.
    /// Frames the pool must never hand out (such as those holding `bitmap`
    /// itself) are then excluded with [`reserve`](Self::reserve).
    ///
    /// # Panics
    ///
    /// If `bitmap` is shorter than `bitmap_words(ranges)`. Also, as violations
    /// of the pool's invariants, if more than [`MAX_POOL_RANGES`] non-empty
    /// ranges are given or if two of them overlap.
    pub fn new(owner: usize, ranges: &[PhysRange], bitmap: &'a mut [u64]) -> Self {
        let mut sorted = PoolRanges::new();
        for r in ranges.iter().filter_map(|r| r.frame_aligned()) {
            assert!(
                sorted.push(r).is_ok(),
                "FramePool: more than {MAX_POOL_RANGES} ranges"
            );
        }
        sorted.sort_unstable_by_key(|r| r.start);
        for pair in sorted.windows(2) {
            assert!(
                pair[0].end <= pair[1].start,
                "FramePool: ranges {pair:x?} overlap"
            );
        }

        let need = Self::bitmap_words(&sorted);
        assert!(
            bitmap.len() >= need,
            "FramePool: bitmap has {} words, {need} needed",
            bitmap.len()
        );
        let bitmap = &mut bitmap[..need];
        bitmap.fill(0);

        let mut word_start = [0; MAX_POOL_RANGES + 1];
        for (i, r) in sorted.iter().enumerate() {
            let frames = r.frames();
            let words = bitmap::words_for(frames);
            word_start[i + 1] = word_start[i] + words;
            // Mark the padding after the range's last frame as permanently used.
            let padded = words as u64 * WORD_BITS;
            set_run(
                &mut bitmap[word_start[i]..word_start[i + 1]],
                frames,
                padded,
            );
        }
        let total = sorted.iter().map(PhysRange::frames).sum();
        Self {
            owner,
            ranges: sorted,
            word_start,
            bitmap,
            total,
            free: total,
            hint: 0,
        }
    }

    /// Marks every frame that overlaps `range` and lies in this pool as used;
    /// returns how many frames were newly marked.
    ///
    /// `range` need not be aligned: a frame touched by even one byte of it is
    /// reserved. Reserved frames still count in [`total_frames`](Self::total_frames).
    pub fn reserve(&mut self, range: PhysRange) -> u64 {
        if range.is_empty() {
            return 0;
        }
        let last_frame = u64::MAX - (FRAME_SIZE - 1);
        let outward = PhysRange::new(
            range.start - range.start % FRAME_SIZE,
            range
                .end
                .checked_next_multiple_of(FRAME_SIZE)
                .unwrap_or(last_frame),
        );
        let mut marked = 0;
        for i in 0..self.ranges.len() {
            if let Some(part) = self.ranges[i].intersection(&outward) {
                let (from, to) = self.frame_span(i, part);
                marked += set_run(self.words_mut(i), from, to);
            }
        }
        self.free -= marked;
        marked
    }

    /// Core that owns this pool.
    pub fn owner(&self) -> usize {
        self.owner
    }

    /// The pool's ranges: frame-aligned, sorted and disjoint.
    pub fn ranges(&self) -> &[PhysRange] {
        &self.ranges
    }

    /// Returns `true` if `addr` lies in one of the pool's ranges.
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(addr))
    }

    /// Number of frames in the pool, used or not.
    pub fn total_frames(&self) -> u64 {
        self.total
    }

    /// Number of frames currently free.
    pub fn free_frames(&self) -> u64 {
        self.free
    }

    /// Allocates one frame and returns its physical address.
    ///
    /// Next fit: the search resumes at the word where the previous one
    /// succeeded and skips full words with one comparison each, so allocating
    /// frame after frame is O(1) amortised. Returns `None` when the pool is
    /// exhausted.
    pub fn alloc(&mut self) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        let len = self.bitmap.len();
        let word = (self.hint..len)
            .chain(0..self.hint)
            .find(|&w| self.bitmap[w] != u64::MAX)?;
        let bit = self.bitmap[word].trailing_ones();
        self.bitmap[word] |= 1 << bit;
        self.free -= 1;
        self.hint = word;

        let range = self.range_of_word(word);
        let index = (word - self.word_start[range]) as u64 * WORD_BITS + u64::from(bit);
        Some(self.ranges[range].start + index * FRAME_SIZE)
    }

    /// Allocates `count` physically contiguous frames whose first frame's
    /// address is a multiple of `align_frames * FRAME_SIZE`; returns that
    /// address.
    ///
    /// The run never crosses a range boundary, even where two ranges of the
    /// pool happen to be adjacent. Lowest address first. Returns `None` if no
    /// such run is free, if `count` is zero, or if `align_frames` is not a
    /// power of two.
    pub fn alloc_contiguous(&mut self, count: u64, align_frames: u64) -> Option<u64> {
        if count == 0 || count > self.free || !align_frames.is_power_of_two() {
            return None;
        }
        let (range, first) = (0..self.ranges.len()).find_map(|i| {
            self.find_run(i, count, align_frames)
                .map(|first| (i, first))
        })?;
        set_run(self.words_mut(range), first, first + count);
        self.free -= count;
        Some(self.ranges[range].start + first * FRAME_SIZE)
    }

    /// Returns one frame to the pool.
    ///
    /// # Errors
    ///
    /// [`FreeError::NotOwned`] if `addr` is outside this pool (checked
    /// first), [`FreeError::Misaligned`] if it is not the start of a frame,
    /// [`FreeError::DoubleFree`] if the frame is already free. On error the
    /// pool is unchanged.
    pub fn free(&mut self, addr: u64) -> Result<(), FreeError> {
        self.free_contiguous(addr, 1)
    }

    /// Returns the `count` frames starting at `addr` to the pool.
    ///
    /// All frames are checked before any is freed, so on error the pool is
    /// unchanged. `count == 0` only validates `addr`.
    ///
    /// # Errors
    ///
    /// As for [`free`](Self::free); [`FreeError::NotOwned`] also if the run
    /// extends past the end of the range containing `addr`.
    pub fn free_contiguous(&mut self, addr: u64, count: u64) -> Result<(), FreeError> {
        let range = self
            .ranges
            .iter()
            .position(|r| r.contains(addr))
            .ok_or(FreeError::NotOwned)?;
        if !addr.is_multiple_of(FRAME_SIZE) {
            return Err(FreeError::Misaligned);
        }
        let first = (addr - self.ranges[range].start) / FRAME_SIZE;
        let end = first
            .checked_add(count)
            .filter(|&end| end <= self.ranges[range].frames())
            .ok_or(FreeError::NotOwned)?;
        let words = self.words_mut(range);
        if find_clear(words, first, end).is_some() {
            return Err(FreeError::DoubleFree);
        }
        clear_run(words, first, end);
        self.free += count;
        Ok(())
    }

    /// Lowest index of a free run of `count` frames in range `i` whose first
    /// frame number is a multiple of `align`.
    ///
    /// Each step either skips a stretch of used frames or tests a candidate
    /// window up to its first used frame and restarts past it, so every bit
    /// is examined at most once and full words are skipped whole.
    fn find_run(&self, i: usize, count: u64, align: u64) -> Option<u64> {
        let frames = self.ranges[i].frames();
        let base = self.ranges[i].start / FRAME_SIZE;
        let align_up = |index: u64| {
            (base + index)
                .checked_next_multiple_of(align)
                .map(|pfn| pfn - base)
        };
        let words = self.words(i);

        let mut first = align_up(0)?;
        loop {
            if frames.checked_sub(first)? < count {
                return None;
            }
            let free_from = find_clear(words, first, frames)?;
            if free_from != first {
                first = align_up(free_from)?;
                continue;
            }
            match find_set(words, first, first + count) {
                None => return Some(first),
                Some(used) => first = align_up(used + 1)?,
            }
        }
    }

    /// Bitmap words of range `i`.
    fn words(&self, i: usize) -> &[u64] {
        &self.bitmap[self.word_start[i]..self.word_start[i + 1]]
    }

    /// Bitmap words of range `i`, mutably.
    fn words_mut(&mut self, i: usize) -> &mut [u64] {
        &mut self.bitmap[self.word_start[i]..self.word_start[i + 1]]
    }

    /// Index of the range whose bitmap contains word `word`.
    fn range_of_word(&self, word: usize) -> usize {
        // `word_start[1..]` holds each range's end word, in increasing order.
        self.word_start[1..=self.ranges.len()].partition_point(|&end| end <= word)
    }

    /// Frame indices `[from, to)` within range `i` of `part`, a frame-aligned
    /// subrange of it.
    fn frame_span(&self, i: usize, part: PhysRange) -> (u64, u64) {
        let start = self.ranges[i].start;
        (
            (part.start - start) / FRAME_SIZE,
            (part.end - start) / FRAME_SIZE,
        )
    }
}

impl fmt::Debug for FramePool<'_> {
    /// Summarises the pool; the bitmap itself is omitted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramePool")
            .field("owner", &self.owner)
            .field("ranges", &self.ranges)
            .field("total", &self.total)
            .field("free", &self.free)
            .finish_non_exhaustive()
    }
}
