//! The buffers one buffer manager owns (P0: each buffer is a resource of one system
//! process; `user/bufd` is that process, this is its bookkeeping). A fixed set of
//! sector-sized buffers, each holding one sector of the disk or nothing; a lookup finds a
//! sector's buffer through an index, and a sector that needs a buffer when all are full
//! takes the one used least recently.
//!
//! Pure logic, tested on the host: the manager decides *when* to fill or forget a buffer
//! (write-through: after the disk has the data), this only keeps them.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Bytes per buffer (one disk sector).
pub const SECTOR: usize = 512;

struct Buffer {
    sector: u64,
    /// When it was last used (a counter, not a time).
    used: u64,
    data: [u8; SECTOR],
}

/// A set of buffers with counts of what they answered.
pub struct Cache {
    buffers: Vec<Buffer>,
    capacity: usize,
    /// sector -> index in `buffers`.
    index: BTreeMap<u64, usize>,
    clock: u64,
    pub hits: u64,
    pub misses: u64,
}

impl Cache {
    /// A cache of `capacity` buffers (at least one).
    pub fn new(capacity: usize) -> Cache {
        Cache {
            buffers: Vec::new(),
            capacity: capacity.max(1),
            index: BTreeMap::new(),
            clock: 0,
            hits: 0,
            misses: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Buffers holding a sector now.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The buffer of `sector`, if one holds it (counted as a hit, else a miss).
    pub fn get(&mut self, sector: u64) -> Option<&[u8; SECTOR]> {
        let now = self.tick();
        match self.index.get(&sector) {
            Some(&i) => {
                self.hits += 1;
                let b = &mut self.buffers[i];
                b.used = now;
                Some(&b.data)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Does a buffer hold `sector`? (Not counted, not a use.)
    pub fn holds(&self, sector: u64) -> bool {
        self.index.contains_key(&sector)
    }

    /// Keep `data` as `sector`'s contents, in its buffer or, when all are taken, in the
    /// least recently used one.
    pub fn put(&mut self, sector: u64, data: &[u8; SECTOR]) {
        let now = self.tick();
        if let Some(&i) = self.index.get(&sector) {
            let b = &mut self.buffers[i];
            b.data = *data;
            b.used = now;
            return;
        }
        let fresh = Buffer {
            sector,
            used: now,
            data: *data,
        };
        let i = if self.buffers.len() < self.capacity {
            self.buffers.push(fresh);
            self.buffers.len() - 1
        } else {
            let (i, _) = self
                .buffers
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.used)
                .expect("capacity is at least one");
            self.index.remove(&self.buffers[i].sector);
            self.buffers[i] = fresh;
            i
        };
        self.index.insert(sector, i);
    }

    /// No buffer holds `sector` any more (its buffer is free for any sector).
    pub fn forget(&mut self, sector: u64) {
        if let Some(i) = self.index.remove(&sector) {
            // A free buffer is the first to be taken: the oldest use there is.
            self.buffers[i].used = 0;
            self.buffers[i].sector = u64::MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(b: u8) -> [u8; SECTOR] {
        [b; SECTOR]
    }

    #[test]
    fn hit_miss_and_update() {
        let mut c = Cache::new(4);
        assert!(c.get(7).is_none());
        c.put(7, &block(1));
        assert_eq!(c.get(7), Some(&block(1)));
        c.put(7, &block(2));
        assert_eq!(c.get(7), Some(&block(2)));
        assert_eq!((c.hits, c.misses, c.len()), (2, 1, 1));
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut c = Cache::new(3);
        for s in 0..3 {
            c.put(s, &block(s as u8));
        }
        // 0 used again: 1 is now the oldest.
        assert!(c.get(0).is_some());
        c.put(3, &block(3));
        assert!(!c.holds(1));
        assert!(c.holds(0) && c.holds(2) && c.holds(3));
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(3), Some(&block(3)));
    }

    #[test]
    fn forget_frees_a_buffer_first() {
        let mut c = Cache::new(2);
        c.put(10, &block(10));
        c.put(11, &block(11));
        c.forget(11);
        c.forget(99);
        assert!(!c.holds(11));
        c.put(12, &block(12));
        assert!(
            c.holds(10),
            "the forgotten buffer is reused, not the oldest held one"
        );
        assert_eq!(c.get(12), Some(&block(12)));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn never_more_than_capacity_and_zero_means_one() {
        let mut c = Cache::new(0);
        assert_eq!(c.capacity(), 1);
        for s in 0..100 {
            c.put(s, &block(s as u8));
            assert_eq!(c.len(), 1);
            assert_eq!(c.get(s), Some(&block(s as u8)));
        }
    }
}
