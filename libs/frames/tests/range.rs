//! Tests of `PhysRange` and `usable_minus_holes`: the carving of a raw
//! memory map into sorted, disjoint runs of whole frames.

mod common;

use common::{frames, XorShift};
use frames::{usable_minus_holes, PhysRange, FRAME_SIZE};

const MIB: u64 = 1 << 20;

fn carve(usable: &[PhysRange], holes: &[PhysRange]) -> Vec<PhysRange> {
    let mut out = [PhysRange::new(0, 0); 64];
    let n = usable_minus_holes(usable, holes, &mut out);
    out[..n].to_vec()
}

#[test]
fn frame_aligned_shrinks_to_whole_frames() {
    assert_eq!(frames(1, 5).frame_aligned(), Some(frames(1, 5)));
    assert_eq!(
        PhysRange::new(1, 0x3001).frame_aligned(),
        Some(PhysRange::new(0x1000, 0x3000))
    );
    assert_eq!(
        PhysRange::new(0xFFF, 0x2000).frame_aligned(),
        Some(PhysRange::new(0x1000, 0x2000))
    );
    // Less than one whole frame, spanning a frame boundary or not.
    assert_eq!(PhysRange::new(0x800, 0x1800).frame_aligned(), None);
    assert_eq!(PhysRange::new(0x1000, 0x1FFF).frame_aligned(), None);
    // Empty and inverted.
    assert_eq!(PhysRange::new(0x1000, 0x1000).frame_aligned(), None);
    assert_eq!(PhysRange::new(0x3000, 0x1000).frame_aligned(), None);
    // Rounding the start up must not overflow at the top of the address space.
    assert_eq!(
        PhysRange::new(u64::MAX - 10, u64::MAX).frame_aligned(),
        None
    );
    let top = u64::MAX - (FRAME_SIZE - 1);
    assert_eq!(
        PhysRange::new(top - FRAME_SIZE, u64::MAX).frame_aligned(),
        Some(PhysRange::new(top - FRAME_SIZE, top))
    );
}

#[test]
fn frames_contains_and_intersection() {
    let r = frames(2, 5);
    assert_eq!(r.frames(), 3);
    assert_eq!(PhysRange::new(0, 0).frames(), 0);
    assert_eq!(PhysRange::new(0x5000, 0x1000).frames(), 0);
    assert!(!r.contains(2 * FRAME_SIZE - 1));
    assert!(r.contains(2 * FRAME_SIZE));
    assert!(r.contains(5 * FRAME_SIZE - 1));
    assert!(!r.contains(5 * FRAME_SIZE));
    assert!(!PhysRange::new(7, 7).contains(7));
    assert!(PhysRange::new(7, 7).is_empty());

    assert_eq!(r.intersection(&frames(4, 9)), Some(frames(4, 5)));
    assert_eq!(r.intersection(&frames(0, 9)), Some(r));
    assert_eq!(r.intersection(&frames(5, 9)), None);
    assert_eq!(r.intersection(&frames(0, 2)), None);
}

#[test]
fn no_holes_only_aligns_and_sorts() {
    let usable = [
        frames(10, 20),
        PhysRange::new(0x800, 0x4800),
        frames(30, 31),
    ];
    assert_eq!(
        carve(&usable, &[]),
        [frames(1, 4), frames(10, 20), frames(30, 31)]
    );
}

#[test]
fn hole_at_start_end_middle_and_whole() {
    let usable = [
        frames(0, 10),
        frames(20, 30),
        frames(40, 50),
        frames(60, 70),
    ];
    let holes = [
        frames(0, 2),   // start of the first range
        frames(28, 35), // end of the second, reaching into the gap
        frames(44, 46), // middle of the third
        frames(55, 75), // all of the fourth
    ];
    assert_eq!(
        carve(&usable, &holes),
        [
            frames(2, 10),
            frames(20, 28),
            frames(40, 44),
            frames(46, 50)
        ]
    );
}

#[test]
fn holes_spanning_ranges_and_overlapping_each_other() {
    let usable = [frames(0, 10), frames(12, 20), frames(22, 30)];
    let holes = [
        frames(8, 14),
        frames(13, 16),
        frames(15, 17),
        frames(25, 26),
        frames(25, 26),
    ];
    assert_eq!(
        carve(&usable, &holes),
        [frames(0, 8), frames(17, 20), frames(22, 25), frames(26, 30)]
    );
}

#[test]
fn unaligned_holes_remove_every_frame_they_touch() {
    let usable = [frames(0, 10)];
    // One byte of frame 3, and a range straddling frames 6 and 7.
    let holes = [
        PhysRange::new(0x3FFF, 0x4000),
        PhysRange::new(0x6800, 0x7001),
    ];
    assert_eq!(
        carve(&usable, &holes),
        [frames(0, 3), frames(4, 6), frames(8, 10)]
    );
}

#[test]
fn unaligned_usable_ranges_keep_only_whole_frames() {
    let usable = [
        PhysRange::new(0x0100, 0x2F00),
        PhysRange::new(0x5001, 0x5FFF),
        PhysRange::new(0x7000, 0x9800),
    ];
    assert_eq!(carve(&usable, &[]), [frames(1, 2), frames(7, 9)]);
}

#[test]
fn overlapping_and_adjacent_usable_entries_merge_before_alignment() {
    // Two half frames that together make frame 1 whole.
    let halves = [
        PhysRange::new(0x1800, 0x2000),
        PhysRange::new(0x1000, 0x1800),
    ];
    assert_eq!(carve(&halves, &[]), [frames(1, 2)]);
    // Duplicates and overlaps as seen in buggy firmware maps.
    let messy = [
        frames(4, 8),
        frames(0, 5),
        frames(4, 8),
        frames(8, 9),
        frames(11, 12),
    ];
    assert_eq!(carve(&messy, &[]), [frames(0, 9), frames(11, 12)]);
}

#[test]
fn empty_and_inverted_entries_are_ignored() {
    let usable = [
        PhysRange::new(0x9000, 0x2000),
        frames(0, 4),
        PhysRange::new(0x5000, 0x5000),
    ];
    let holes = [
        PhysRange::new(0x3000, 0x1000),
        PhysRange::new(0x2000, 0x2000),
    ];
    assert_eq!(carve(&usable, &holes), [frames(0, 4)]);
    assert_eq!(carve(&[], &holes), []);
    assert_eq!(carve(&usable, &[frames(0, 100)]), []);
}

#[test]
fn range_reaching_the_top_of_the_address_space() {
    let top = u64::MAX - (FRAME_SIZE - 1);
    let usable = [PhysRange::new(top - 8 * FRAME_SIZE, u64::MAX)];
    let holes = [PhysRange::new(top - 2 * FRAME_SIZE, u64::MAX)];
    assert_eq!(
        carve(&usable, &holes),
        [PhysRange::new(top - 8 * FRAME_SIZE, top - 2 * FRAME_SIZE)]
    );
    assert_eq!(
        carve(&usable, &[]),
        [PhysRange::new(top - 8 * FRAME_SIZE, top)]
    );
}

#[test]
fn output_overflow_keeps_the_lowest_ranges() {
    let usable = [frames(0, 100)];
    let holes: Vec<_> = (1..10).map(|i| frames(i * 10, i * 10 + 1)).collect();
    let mut out = [PhysRange::new(0, 0); 3];
    assert_eq!(usable_minus_holes(&usable, &holes, &mut out), 3);
    assert_eq!(out, [frames(0, 10), frames(11, 20), frames(21, 30)]);
    assert_eq!(usable_minus_holes(&usable, &holes, &mut []), 0);
}

#[test]
fn typical_pc_layout() {
    // Legacy BIOS map: low memory, the ISA hole, then extended memory.
    let usable = [
        PhysRange::new(0, 0x9FC00),
        PhysRange::new(MIB, 0x7FE0000),
        PhysRange::new(0x1_0000_0000, 0x2_0000_0000),
    ];
    let kernel = PhysRange::new(2 * MIB, 0x2F_1234);
    let module = PhysRange::new(0x40_0800, 0x41_0000);
    let holes = [PhysRange::new(0, MIB), module, kernel];
    assert_eq!(
        carve(&usable, &holes),
        [
            PhysRange::new(MIB, 2 * MIB),
            PhysRange::new(0x2F_2000, 0x40_0000),
            PhysRange::new(0x41_0000, 0x7FE_0000),
            PhysRange::new(0x1_0000_0000, 0x2_0000_0000),
        ]
    );
}

/// Against a brute-force model on a small address space: a frame must be in
/// the output exactly if all its bytes are usable and none is in a hole, and
/// the output must be the maximal runs of such frames, in order.
#[test]
fn randomized_against_brute_force_model() {
    const UNIT: u64 = 64; // endpoints are multiples of this, mostly unaligned
    const SPACE_FRAMES: u64 = 24;
    const UNITS: u64 = SPACE_FRAMES * FRAME_SIZE / UNIT;
    let mut rng = XorShift::new(0xC0FFEE);
    let random_range = |rng: &mut XorShift| {
        let start = rng.range(0, UNITS) * UNIT;
        let len = if rng.chance(1, 2) {
            rng.range(0, 2 * FRAME_SIZE / UNIT)
        } else {
            rng.range(0, UNITS / 2)
        };
        let r = PhysRange::new(start, start + len * UNIT);
        // Occasionally inverted, which must count as empty.
        if rng.chance(1, 20) {
            PhysRange::new(r.end, r.start)
        } else {
            r
        }
    };

    for _ in 0..1500 {
        let usable: Vec<_> = (0..rng.range(0, 7))
            .map(|_| random_range(&mut rng))
            .collect();
        let holes: Vec<_> = (0..rng.range(0, 6))
            .map(|_| random_range(&mut rng))
            .collect();

        let good_unit = |u: u64| {
            let addr = u * UNIT;
            usable.iter().any(|r| r.contains(addr)) && !holes.iter().any(|h| h.contains(addr))
        };
        let units_per_frame = FRAME_SIZE / UNIT;
        // Ranges start below SPACE_FRAMES and are shorter than that, so this
        // covers every frame they can reach.
        let good: Vec<bool> = (0..2 * SPACE_FRAMES + 2)
            .map(|f| (f * units_per_frame..(f + 1) * units_per_frame).all(good_unit))
            .collect();
        let mut expected = Vec::new();
        let mut f = 0;
        while f < good.len() as u64 {
            if good[f as usize] {
                let start = f;
                while f < good.len() as u64 && good[f as usize] {
                    f += 1;
                }
                expected.push(frames(start, f));
            } else {
                f += 1;
            }
        }
        assert_eq!(
            carve(&usable, &holes),
            expected,
            "usable {usable:x?} holes {holes:x?}"
        );
    }
}
