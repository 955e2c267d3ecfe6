//! Tests of `FramePool`: single and contiguous allocation, freeing with its
//! error cases, and reservation. The randomized run is in `pool_model.rs`.

mod common;

use std::collections::BTreeSet;

use common::{bitmap_for, drain, frames};
use frames::{FramePool, FreeError, PhysRange, FRAME_SIZE, MAX_POOL_RANGES};

/// Ranges of awkward sizes around word boundaries, deliberately unsorted.
fn odd_ranges() -> [PhysRange; 5] {
    [
        frames(1000, 1130),
        frames(3, 4),
        frames(10, 73),
        frames(100, 164),
        frames(200, 265),
    ]
}

#[test]
fn bitmap_words_counts_whole_words_per_range() {
    assert_eq!(FramePool::bitmap_words(&[]), 0);
    assert_eq!(FramePool::bitmap_words(&[frames(0, 1)]), 1);
    assert_eq!(FramePool::bitmap_words(&[frames(0, 64)]), 1);
    assert_eq!(FramePool::bitmap_words(&[frames(0, 65)]), 2);
    // Each range starts on a word boundary, so two single frames take two words.
    assert_eq!(FramePool::bitmap_words(&[frames(0, 1), frames(5, 6)]), 2);
    // Only whole frames count; sub-frame ranges need nothing.
    assert_eq!(
        FramePool::bitmap_words(&[PhysRange::new(0x800, 0x41800)]),
        1
    );
    assert_eq!(FramePool::bitmap_words(&[PhysRange::new(0x800, 0x1800)]), 0);
    assert_eq!(FramePool::bitmap_words(&odd_ranges()), 3 + 1 + 1 + 1 + 2);
}

#[test]
fn new_normalises_ranges_and_reports_sizes() {
    let mut bitmap = bitmap_for(&odd_ranges());
    let pool = FramePool::new(7, &odd_ranges(), &mut bitmap);
    assert_eq!(pool.owner(), 7);
    assert_eq!(pool.total_frames(), 130 + 1 + 63 + 64 + 65);
    assert_eq!(pool.free_frames(), pool.total_frames());
    let starts: Vec<u64> = pool.ranges().iter().map(|r| r.start / FRAME_SIZE).collect();
    assert_eq!(starts, [3, 10, 100, 200, 1000]);
    assert!(pool.contains(3 * FRAME_SIZE) && pool.contains(1130 * FRAME_SIZE - 1));
    assert!(
        !pool.contains(4 * FRAME_SIZE) && !pool.contains(1130 * FRAME_SIZE) && !pool.contains(0)
    );
    assert!(format!("{pool:?}").contains("owner: 7"));

    // Unaligned ranges shrink; empty ones vanish.
    let ranges = [
        PhysRange::new(0x1800, 0x5000),
        PhysRange::new(0x9000, 0x9000),
    ];
    let mut bitmap = [0; 1];
    let pool = FramePool::new(0, &ranges, &mut bitmap);
    assert_eq!(pool.ranges(), [PhysRange::new(0x2000, 0x5000)]);
    assert_eq!(pool.total_frames(), 3);
}

#[test]
fn new_ignores_stale_bitmap_contents_and_extra_words() {
    let ranges = [frames(0, 70)];
    let mut bitmap = [0xDEAD_BEEF_DEAD_BEEF; 5];
    {
        let mut pool = FramePool::new(0, &ranges, &mut bitmap);
        assert_eq!(drain(&mut pool).len(), 70);
    }
    assert_eq!(
        bitmap[2..],
        [0xDEAD_BEEF_DEAD_BEEF; 3],
        "words past bitmap_words must be untouched"
    );
}

#[test]
#[should_panic(expected = "bitmap has 2 words, 3 needed")]
fn new_panics_on_short_bitmap() {
    let ranges = [frames(0, 129)];
    let mut bitmap = [0; 2];
    let _ = FramePool::new(0, &ranges, &mut bitmap);
}

#[test]
#[should_panic(expected = "overlap")]
fn new_panics_on_overlapping_ranges() {
    let ranges = [frames(0, 10), frames(9, 12)];
    let mut bitmap = bitmap_for(&ranges);
    let _ = FramePool::new(0, &ranges, &mut bitmap);
}

#[test]
#[should_panic(expected = "more than")]
fn new_panics_on_too_many_ranges() {
    let ranges: Vec<_> = (0..=MAX_POOL_RANGES as u64)
        .map(|i| frames(2 * i, 2 * i + 1))
        .collect();
    let mut bitmap = bitmap_for(&ranges);
    let _ = FramePool::new(0, &ranges, &mut bitmap);
}

#[test]
fn alloc_until_exhausted_returns_every_frame_once() {
    let ranges = odd_ranges();
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let got = drain(&mut pool);
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    let expected: BTreeSet<u64> = common::frame_numbers(&ranges)
        .iter()
        .map(|f| f * FRAME_SIZE)
        .collect();
    assert_eq!(got.len(), unique.len(), "a frame was handed out twice");
    assert_eq!(unique, expected);
    assert!(got
        .iter()
        .all(|&a| a.is_multiple_of(FRAME_SIZE) && pool.contains(a)));
    assert_eq!(pool.free_frames(), 0);
    assert_eq!(pool.alloc(), None);
    assert_eq!(pool.alloc_contiguous(1, 1), None);
}

#[test]
fn alloc_is_next_fit_and_wraps_around() {
    let ranges = [frames(0, 200)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let first: Vec<u64> = (0..150).map(|_| pool.alloc().unwrap()).collect();
    assert_eq!(first, (0..150).map(|f| f * FRAME_SIZE).collect::<Vec<_>>());
    // Freed low frames are not reused until the search wraps around.
    pool.free(5 * FRAME_SIZE).unwrap();
    pool.free(20 * FRAME_SIZE).unwrap();
    let rest: Vec<u64> = drain(&mut pool);
    assert_eq!(rest.len(), 52);
    assert_eq!(
        rest[..50],
        (150..200).map(|f| f * FRAME_SIZE).collect::<Vec<_>>()[..]
    );
    let mut tail = rest[50..].to_vec();
    tail.sort_unstable();
    assert_eq!(tail, [5 * FRAME_SIZE, 20 * FRAME_SIZE]);
}

#[test]
fn free_then_realloc() {
    let ranges = odd_ranges();
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let all = drain(&mut pool);
    let returned: BTreeSet<u64> = all.iter().copied().step_by(7).collect();
    for &a in &returned {
        pool.free(a).unwrap();
    }
    assert_eq!(pool.free_frames(), returned.len() as u64);
    let again: BTreeSet<u64> = drain(&mut pool).into_iter().collect();
    assert_eq!(again, returned);
    assert_eq!(pool.free_frames(), 0);
}

#[test]
fn free_errors_leave_the_pool_unchanged() {
    let ranges = [frames(10, 20), frames(30, 40)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let a = pool.alloc().unwrap();
    let free_before = pool.free_frames();

    assert_eq!(pool.free(a + 1), Err(FreeError::Misaligned));
    assert_eq!(pool.free(a + FRAME_SIZE - 1), Err(FreeError::Misaligned));
    for foreign in [
        0,
        9 * FRAME_SIZE,
        20 * FRAME_SIZE,
        25 * FRAME_SIZE,
        40 * FRAME_SIZE,
        u64::MAX,
    ] {
        assert_eq!(pool.free(foreign), Err(FreeError::NotOwned), "{foreign:#x}");
    }
    // Foreign and misaligned: ownership is checked first.
    assert_eq!(pool.free(25 * FRAME_SIZE + 3), Err(FreeError::NotOwned));
    // Never allocated, in both ranges.
    assert_eq!(pool.free(a + FRAME_SIZE), Err(FreeError::DoubleFree));
    assert_eq!(pool.free(35 * FRAME_SIZE), Err(FreeError::DoubleFree));
    assert_eq!(pool.free_frames(), free_before);

    pool.free(a).unwrap();
    assert_eq!(pool.free(a), Err(FreeError::DoubleFree));
    assert_eq!(pool.free_frames(), free_before + 1);
    assert!(!FreeError::DoubleFree.to_string().is_empty());
}

#[test]
fn reserve_marks_overlapped_frames_once() {
    let ranges = [frames(0, 100), frames(200, 300)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    // Unaligned at both ends: frames 10..=12 are touched.
    assert_eq!(
        pool.reserve(PhysRange::new(10 * FRAME_SIZE + 5, 12 * FRAME_SIZE + 1)),
        3
    );
    assert_eq!(pool.reserve(frames(11, 14)), 1);
    // Spanning the gap between the ranges and beyond the pool.
    assert_eq!(pool.reserve(frames(95, 205)), 10);
    assert_eq!(pool.reserve(frames(290, 1000)), 10);
    assert_eq!(pool.reserve(frames(100, 200)), 0);
    assert_eq!(pool.reserve(PhysRange::new(0x5000, 0x5000)), 0);
    assert_eq!(pool.free_frames(), 200 - 4 - 10 - 10);
    assert_eq!(pool.total_frames(), 200);

    let got: BTreeSet<u64> = drain(&mut pool).iter().map(|a| a / FRAME_SIZE).collect();
    let reserved = [10..14, 95..100, 200..205, 290..300];
    let expected: BTreeSet<u64> = (0..100)
        .chain(200..300)
        .filter(|f| !reserved.iter().any(|r| r.contains(f)))
        .collect();
    assert_eq!(got, expected);
    // A reserved frame counts as used, so it can be released explicitly.
    pool.free(12 * FRAME_SIZE).unwrap();
    assert_eq!(pool.alloc(), Some(12 * FRAME_SIZE));
}

#[test]
fn reserve_up_to_the_top_of_the_address_space() {
    let top = u64::MAX - (FRAME_SIZE - 1);
    let ranges = [PhysRange::new(top - 4 * FRAME_SIZE, top)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    assert_eq!(
        pool.reserve(PhysRange::new(top - FRAME_SIZE - 1, u64::MAX)),
        2
    );
    assert_eq!(pool.free_frames(), 2);
}

#[test]
fn contiguous_alignment() {
    // The range starts at frame 3, so alignment is about physical addresses,
    // not offsets within the range.
    let ranges = [frames(3, 3 + 2048)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    // (count, align, expected first frame): lowest fitting aligned address.
    let cases = [
        (1, 1, 3),
        (3, 1, 4),
        (2, 2, 8),
        (5, 8, 16),
        (512, 512, 512),
        (1, 64, 64),
        (7, 4, 24),
        (3, 1, 10),
    ];
    for (count, align, first) in cases {
        let a = pool.alloc_contiguous(count, align).unwrap();
        assert_eq!(a, first * FRAME_SIZE, "count {count} align {align}");
        assert!(a.is_multiple_of(align * FRAME_SIZE));
    }
    // 2 MiB-aligned runs of 2 MiB: 512..1024 went above, two more fit, and
    // the partial one at the end (2048..2051) is too short.
    assert_eq!(pool.alloc_contiguous(512, 512), Some(1024 * FRAME_SIZE));
    assert_eq!(pool.alloc_contiguous(512, 512), Some(1536 * FRAME_SIZE));
    assert_eq!(pool.alloc_contiguous(512, 512), None);
    assert_eq!(
        pool.free_frames(),
        2048 - (1 + 3 + 2 + 5 + 512 + 1 + 7 + 3 + 1024)
    );
    // Invalid arguments.
    assert_eq!(pool.alloc_contiguous(0, 1), None);
    assert_eq!(pool.alloc_contiguous(1, 0), None);
    assert_eq!(pool.alloc_contiguous(1, 3), None);
    assert_eq!(pool.alloc_contiguous(u64::MAX, 1), None);
    assert_eq!(pool.alloc_contiguous(1, 1 << 63), None);
}

#[test]
fn contiguous_runs_never_cross_range_boundaries() {
    // Physically adjacent, but separate ranges of the pool.
    let ranges = [frames(0, 4), frames(4, 8)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    assert_eq!(pool.alloc_contiguous(5, 1), None);
    assert_eq!(pool.alloc_contiguous(4, 4), Some(0));
    assert_eq!(pool.alloc_contiguous(3, 1), Some(4 * FRAME_SIZE));
    assert_eq!(pool.alloc_contiguous(2, 1), None);
    assert_eq!(pool.alloc(), Some(7 * FRAME_SIZE));
    // Freeing across the boundary is refused too.
    assert_eq!(
        pool.free_contiguous(2 * FRAME_SIZE, 4),
        Err(FreeError::NotOwned)
    );
    assert_eq!(pool.free_frames(), 0);
}

#[test]
fn contiguous_skips_fragmented_memory() {
    let ranges = [frames(0, 300)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let all = drain(&mut pool);
    // Free every other frame below 200, then frames 250..254.
    for &a in all.iter().take(200).step_by(2) {
        pool.free(a).unwrap();
    }
    assert_eq!(pool.alloc_contiguous(2, 1), None);
    pool.free_contiguous(250 * FRAME_SIZE, 4).unwrap();
    assert_eq!(pool.alloc_contiguous(2, 4), Some(252 * FRAME_SIZE));
    assert_eq!(pool.alloc_contiguous(2, 1), Some(250 * FRAME_SIZE));
    assert_eq!(pool.alloc_contiguous(1, 2), Some(0));
    assert_eq!(pool.alloc_contiguous(1, 4), Some(4 * FRAME_SIZE));
}

#[test]
fn contiguous_frames_are_not_handed_out_again() {
    let ranges = [frames(0, 130)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let run = pool.alloc_contiguous(70, 2).unwrap();
    assert_eq!(pool.free_frames(), 60);
    let singles = drain(&mut pool);
    assert_eq!(singles.len(), 60);
    assert!(singles
        .iter()
        .all(|&a| a < run || a >= run + 70 * FRAME_SIZE));
}

#[test]
fn free_contiguous_is_all_or_nothing() {
    let ranges = [frames(0, 64), frames(100, 164)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let run = pool.alloc_contiguous(8, 1).unwrap();
    pool.free(run + 5 * FRAME_SIZE).unwrap();
    let free_before = pool.free_frames();

    assert_eq!(pool.free_contiguous(run, 8), Err(FreeError::DoubleFree));
    assert_eq!(pool.free_contiguous(run + 1, 2), Err(FreeError::Misaligned));
    assert_eq!(
        pool.free_contiguous(run + 60 * FRAME_SIZE, 8),
        Err(FreeError::NotOwned)
    );
    assert_eq!(
        pool.free_contiguous(run, u64::MAX),
        Err(FreeError::NotOwned)
    );
    assert_eq!(
        pool.free_contiguous(80 * FRAME_SIZE, 1),
        Err(FreeError::NotOwned)
    );
    assert_eq!(pool.free_frames(), free_before);
    // Nothing was freed: every other frame of the run is still in use.
    for f in [0, 1, 2, 3, 4, 6, 7] {
        pool.free(run + f * FRAME_SIZE).unwrap();
    }
    assert_eq!(pool.free_frames(), free_before + 7);
}

#[test]
fn contiguous_run_can_be_given_back_in_pieces() {
    // The kernel heap claims a run and gives back its top first, the rest later.
    let ranges = [frames(0, 130)];
    let mut bitmap = bitmap_for(&ranges);
    let mut pool = FramePool::new(0, &ranges, &mut bitmap);
    let run = pool.alloc_contiguous(64, 1).unwrap();
    let free_before = pool.free_frames();
    pool.free_contiguous(run + 40 * FRAME_SIZE, 24).unwrap();
    assert_eq!(pool.free_frames(), free_before + 24);
    // The top is free again, the bottom still in use.
    assert_eq!(
        pool.free_contiguous(run + 39 * FRAME_SIZE, 2),
        Err(FreeError::DoubleFree)
    );
    assert_eq!(pool.alloc_contiguous(24, 1), Some(run + 40 * FRAME_SIZE));
    pool.free_contiguous(run + 40 * FRAME_SIZE, 24).unwrap();
    pool.free_contiguous(run + 8 * FRAME_SIZE, 32).unwrap();
    pool.free_contiguous(run, 8).unwrap();
    assert_eq!(pool.free_frames(), free_before + 64);
    assert_eq!(pool.alloc_contiguous(64, 1), Some(run));
}
