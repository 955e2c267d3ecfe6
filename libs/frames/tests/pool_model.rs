//! Randomized test of `FramePool`: long random sequences of allocations,
//! frees, bogus frees and reservations, each checked against a simple model.
//! Kept apart from `pool.rs`, whose tests pin down individual behaviours.

mod common;

use std::collections::BTreeSet;

use common::{bitmap_for, drain, frames, XorShift};
use frames::{FramePool, FreeError, PhysRange, FRAME_SIZE, MAX_POOL_RANGES};

/// Reference model for the randomized test: the set of used frame numbers.
struct Model {
    ranges: Vec<PhysRange>,
    used: BTreeSet<u64>,
}

impl Model {
    fn owns(&self, frame: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(frame * FRAME_SIZE))
    }

    /// Lowest aligned run of `count` free frames inside one range.
    fn lowest_run(&self, count: u64, align: u64) -> Option<u64> {
        let mut ranges = self.ranges.clone();
        ranges.sort_by_key(|r| r.start);
        ranges.iter().find_map(|r| {
            let (lo, hi) = (r.start / FRAME_SIZE, r.end / FRAME_SIZE);
            (lo.next_multiple_of(align)..hi.saturating_sub(count - 1))
                .step_by(align as usize)
                .find(|&f| (f..f + count).all(|g| !self.used.contains(&g)))
        })
    }

    fn expected_free_error(&self, addr: u64, count: u64) -> Option<FreeError> {
        let Some(range) = self.ranges.iter().find(|r| r.contains(addr)) else {
            return Some(FreeError::NotOwned);
        };
        if !addr.is_multiple_of(FRAME_SIZE) {
            return Some(FreeError::Misaligned);
        }
        if addr + count * FRAME_SIZE > range.end {
            return Some(FreeError::NotOwned);
        }
        let first = addr / FRAME_SIZE;
        (first..first + count)
            .any(|f| !self.used.contains(&f))
            .then_some(FreeError::DoubleFree)
    }
}

/// Random operations checked step by step against `Model`, including the
/// exact placement of contiguous runs and the exact error of bad frees.
#[test]
fn randomized_against_model() {
    let mut rng = XorShift::new(0xF4A3E5);
    for round in 0..60 {
        let mut ranges = Vec::new();
        let mut next = rng.range(0, 70);
        for _ in 0..rng.range(1, MAX_POOL_RANGES as u64 + 1) {
            let len = rng.range(1, 300);
            ranges.push(frames(next, next + len));
            next += len
                + if rng.chance(1, 5) {
                    0
                } else {
                    rng.range(1, 40)
                };
        }
        // Present the ranges in a scrambled order.
        let shift = rng.range(0, ranges.len() as u64) as usize;
        ranges.rotate_left(shift);
        let mut bitmap = bitmap_for(&ranges);
        let mut pool = FramePool::new(round, &ranges, &mut bitmap);
        let total = pool.total_frames();
        let mut model = Model {
            ranges: ranges.clone(),
            used: BTreeSet::new(),
        };
        let mut live: Vec<(u64, u64)> = Vec::new(); // (address, frame count)

        for _ in 0..3000 {
            match rng.range(0, 100) {
                0..=39 => match pool.alloc() {
                    Some(a) => {
                        let f = a / FRAME_SIZE;
                        assert!(
                            a.is_multiple_of(FRAME_SIZE) && model.owns(f) && model.used.insert(f),
                            "bad frame {a:#x}"
                        );
                        live.push((a, 1));
                    }
                    None => assert_eq!(model.used.len() as u64, total),
                },
                40..=59 => {
                    let count = if rng.chance(1, 4) {
                        rng.range(1, 100)
                    } else {
                        rng.range(1, 9)
                    };
                    let align = 1 << rng.range(0, 6);
                    let got = pool.alloc_contiguous(count, align);
                    let want = model.lowest_run(count, align);
                    assert_eq!(
                        got,
                        want.map(|f| f * FRAME_SIZE),
                        "count {count} align {align}"
                    );
                    if let Some(f) = want {
                        model.used.extend(f..f + count);
                        live.push((f * FRAME_SIZE, count));
                    }
                }
                60..=89 if !live.is_empty() => {
                    let (a, count) = live.swap_remove(rng.range(0, live.len() as u64) as usize);
                    if count == 1 && rng.chance(1, 2) {
                        pool.free(a).unwrap();
                    } else {
                        pool.free_contiguous(a, count).unwrap();
                    }
                    for f in a / FRAME_SIZE..a / FRAME_SIZE + count {
                        model.used.remove(&f);
                    }
                }
                90..=97 => {
                    // A bogus free: anywhere near the pool, half of them misaligned.
                    let mut addr = rng.range(0, (next + 10) * FRAME_SIZE);
                    if rng.chance(1, 2) {
                        addr -= addr % FRAME_SIZE;
                    }
                    let count = rng.range(1, 4);
                    let want = model.expected_free_error(addr, count);
                    if let Some(err) = want {
                        let free_before = pool.free_frames();
                        assert_eq!(
                            pool.free_contiguous(addr, count),
                            Err(err),
                            "{addr:#x} x{count}"
                        );
                        assert_eq!(pool.free_frames(), free_before);
                    }
                }
                _ => {
                    let start = rng.range(0, next * FRAME_SIZE);
                    let range = PhysRange::new(start, start + rng.range(1, 8 * FRAME_SIZE));
                    let touched = (range.start / FRAME_SIZE..range.end.div_ceil(FRAME_SIZE))
                        .filter(|&f| model.owns(f) && model.used.insert(f))
                        .count();
                    assert_eq!(pool.reserve(range), touched as u64, "reserve {range:x?}");
                }
            }
            assert_eq!(pool.free_frames(), total - model.used.len() as u64);
        }

        // Release everything still allocated; only reservations stay used.
        for (a, count) in live.drain(..) {
            pool.free_contiguous(a, count).unwrap();
            for f in a / FRAME_SIZE..a / FRAME_SIZE + count {
                model.used.remove(&f);
            }
        }
        let rest: BTreeSet<u64> = drain(&mut pool).iter().map(|a| a / FRAME_SIZE).collect();
        let unreserved: BTreeSet<u64> = common::frame_numbers(&ranges)
            .into_iter()
            .filter(|f| !model.used.contains(f))
            .collect();
        assert_eq!(rest, unreserved);
    }
}
