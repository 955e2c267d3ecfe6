//! Tests of `split_into_pools`: balance, coverage, address order and the
//! error cases.

mod common;

use common::{coalesce, frame_numbers, frames, XorShift};
use frames::{
    split_into_pools, usable_minus_holes, PhysRange, PoolRanges, SplitError, MAX_CORES,
    MAX_POOL_RANGES,
};

/// Checks every promise `split_into_pools` makes about a successful split.
fn check_split(input: &[PhysRange], n: usize, pools: &[PoolRanges]) {
    assert_eq!(pools.len(), n);
    let total: u64 = input.iter().map(PhysRange::frames).sum();
    let counts: Vec<u64> = pools
        .iter()
        .map(|p| p.iter().map(PhysRange::frames).sum())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), total, "counts {counts:?}");
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "unbalanced: {counts:?}");
    assert!(*min >= 1, "empty pool: {counts:?}");
    // The larger shares go to the first pools.
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "counts {counts:?}");

    for pool in pools {
        assert!(pool.len() <= MAX_POOL_RANGES);
        for r in pool {
            assert!(
                !r.is_empty() && r.frame_aligned() == Some(*r),
                "bad piece {r:x?}"
            );
        }
        // Pieces inside a pool are sorted, disjoint and not touching.
        assert!(
            pool.windows(2).all(|w| w[0].end < w[1].start),
            "pool {pool:x?}"
        );
    }

    // Concatenating the pools in order gives back exactly the input: same
    // frames, in address order, so pools are disjoint and ordered too.
    let all: Vec<PhysRange> = pools.iter().flat_map(|p| p.iter().copied()).collect();
    assert_eq!(frame_numbers(&all), frame_numbers(input));
    assert_eq!(coalesce(&all), coalesce(input));
}

fn split_ok(input: &[PhysRange], n: usize) -> Vec<PoolRanges> {
    let pools = split_into_pools(input, n).unwrap_or_else(|e| panic!("split into {n}: {e}"));
    check_split(input, n, &pools);
    pools.to_vec()
}

#[test]
fn argument_errors() {
    let input = [frames(0, 100)];
    assert_eq!(split_into_pools(&input, 0), Err(SplitError::NoCores));
    assert_eq!(
        split_into_pools(&input, MAX_CORES + 1),
        Err(SplitError::TooManyCores)
    );
    assert_eq!(
        split_into_pools(&[frames(0, 3)], 4),
        Err(SplitError::NotEnoughFrames)
    );
    assert_eq!(split_into_pools(&[], 1), Err(SplitError::NotEnoughFrames));
    // Display is implemented and says something.
    assert!(!SplitError::TooFragmented.to_string().is_empty());
}

#[test]
fn single_range_1_2_4_64_cores() {
    let input = [frames(256, 256 + 1000)];
    assert_eq!(
        split_ok(&input, 1),
        [PoolRanges::from_slice(&input).unwrap()]
    );
    let two = split_ok(&input, 2);
    assert_eq!(two[0], [frames(256, 756)]);
    assert_eq!(two[1], [frames(756, 1256)]);
    let four = split_ok(&input, 4);
    assert_eq!(four[3], [frames(1006, 1256)]);
    let many = split_ok(&input, 64);
    // 1000 = 64 * 15 + 40: the first 40 pools get 16 frames, the rest 15.
    assert_eq!(many[0], [frames(256, 272)]);
    assert_eq!(many[39], [frames(256 + 39 * 16, 256 + 40 * 16)]);
    assert_eq!(many[40], [frames(896, 911)]);
}

#[test]
fn exactly_one_frame_per_core() {
    let input = [frames(0, 3), frames(10, 11)];
    let pools = split_ok(&input, 4);
    let expected = [frames(0, 1), frames(1, 2), frames(2, 3), frames(10, 11)];
    for (pool, want) in pools.iter().zip(expected) {
        assert_eq!(pool, &[want]);
    }
}

#[test]
fn pools_span_holes_in_address_order() {
    let input = [frames(0, 10), frames(20, 25), frames(30, 45)];
    let pools = split_ok(&input, 3);
    assert_eq!(pools[0], [frames(0, 10)]);
    assert_eq!(pools[1], [frames(20, 25), frames(30, 35)]);
    assert_eq!(pools[2], [frames(35, 45)]);
}

#[test]
fn adjacent_input_ranges_merge_within_a_pool() {
    let input = [frames(0, 4), frames(4, 8), frames(8, 12)];
    let pools = split_ok(&input, 2);
    assert_eq!(pools[0], [frames(0, 6)]);
    assert_eq!(pools[1], [frames(6, 12)]);
}

#[test]
fn empty_input_ranges_are_ignored() {
    let input = [frames(0, 0), frames(2, 6), frames(6, 6), frames(9, 11)];
    let pools = split_ok(&input, 2);
    assert_eq!(pools[0], [frames(2, 5)]);
    assert_eq!(pools[1], [frames(5, 6), frames(9, 11)]);
}

#[test]
fn realistic_map_with_holes() {
    let mib = 1 << 20;
    let usable = [
        PhysRange::new(0, 0x9FC00),
        PhysRange::new(mib, 0xBFF0_0000),
        PhysRange::new(0x1_0000_0000, 0x4_4000_0000),
    ];
    let holes = [
        PhysRange::new(0, mib),
        PhysRange::new(2 * mib, 0x35_1000),
        PhysRange::new(0x80_0000, 0x92_3456),
    ];
    let mut carved = [PhysRange::new(0, 0); 16];
    let n = usable_minus_holes(&usable, &holes, &mut carved);
    for cores in [1, 2, 3, 4, 7, 16, 64] {
        split_ok(&carved[..n], cores);
    }
}

#[test]
fn fragmentation_limit() {
    // Eight separate one-frame ranges fit one pool; nine do not.
    let eight: Vec<_> = (0..8).map(|i| frames(2 * i, 2 * i + 1)).collect();
    split_ok(&eight, 1);
    let nine: Vec<_> = (0..9).map(|i| frames(2 * i, 2 * i + 1)).collect();
    assert_eq!(split_into_pools(&nine, 1), Err(SplitError::TooFragmented));
    // Spreading the same nine ranges over more pools makes it fit.
    split_ok(&nine, 2);
    // 40 scattered frames over 2 pools need 20 pieces each.
    let scattered: Vec<_> = (0..40).map(|i| frames(2 * i, 2 * i + 1)).collect();
    assert_eq!(
        split_into_pools(&scattered, 2),
        Err(SplitError::TooFragmented)
    );
    split_ok(&scattered, 5);
}

#[test]
#[should_panic(expected = "not frame-aligned")]
fn unaligned_input_panics() {
    let _ = split_into_pools(&[PhysRange::new(0x1000, 0x2800)], 1);
}

#[test]
#[should_panic(expected = "unsorted or overlapping")]
fn overlapping_input_panics() {
    let _ = split_into_pools(&[frames(0, 10), frames(5, 15)], 2);
}

#[test]
#[should_panic(expected = "unsorted or overlapping")]
fn unsorted_input_panics() {
    let _ = split_into_pools(&[frames(20, 30), frames(0, 10)], 2);
}

/// Random layouts against an independent frame-by-frame model: frame `g`
/// (in address order) belongs to the pool whose cumulative share covers `g`,
/// and a pool needs one piece per run of consecutive frame numbers.
#[test]
fn randomized_against_frame_model() {
    let mut rng = XorShift::new(0x5EED_1234);
    // How often each outcome occurred, so the test proves it covered them.
    let (mut ok, mut fragmented, mut other_errors) = (0, 0, 0);
    for _ in 0..3000 {
        let mut input = Vec::new();
        let mut next = rng.range(0, 4);
        for _ in 0..rng.range(0, 20) {
            let len = if rng.chance(1, 3) {
                rng.range(1, 4)
            } else {
                rng.range(1, 200)
            };
            // Sometimes adjacent to the previous range.
            let gap = if rng.chance(1, 4) {
                0
            } else {
                rng.range(1, 50)
            };
            input.push(frames(next, next + len));
            next += len + gap;
        }
        let n = if rng.chance(1, 10) {
            rng.range(0, MAX_CORES as u64 + 3)
        } else {
            rng.range(1, 9)
        } as usize;

        let all = frame_numbers(&input);
        let total = all.len();
        let expected_error = if n == 0 {
            Some(SplitError::NoCores)
        } else if n > MAX_CORES {
            Some(SplitError::TooManyCores)
        } else if total < n {
            Some(SplitError::NotEnoughFrames)
        } else {
            let mut start = 0;
            let too_fragmented = (0..n).any(|i| {
                let share = total / n + usize::from(i < total % n);
                let mine = &all[start..start + share];
                start += share;
                let pieces = 1 + mine.windows(2).filter(|w| w[1] != w[0] + 1).count();
                pieces > MAX_POOL_RANGES
            });
            too_fragmented.then_some(SplitError::TooFragmented)
        };

        match (split_into_pools(&input, n), expected_error) {
            (Ok(pools), None) => {
                check_split(&input, n, &pools);
                ok += 1;
            }
            (Err(got), Some(want)) => {
                assert_eq!(got, want, "input {input:?} n {n}");
                if got == SplitError::TooFragmented {
                    fragmented += 1;
                } else {
                    other_errors += 1;
                }
            }
            (got, want) => panic!("input {input:?} n {n}: got {got:?}, expected error {want:?}"),
        }
    }
    assert!(
        ok > 1000 && fragmented > 100 && other_errors > 50,
        "{ok} {fragmented} {other_errors}"
    );
}
