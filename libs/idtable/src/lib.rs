//! A table of values keyed by `u32` ids, each value in a box of its own (its address never
//! moves while it is in the table), with a small direct-mapped cache of recent lookups in
//! front of the ordered map.
//!
//! Why it exists: a core's scheduler looks its threads and processes up by id on every
//! switch, and the rendezvous fast path (seL4's, on our request path) looks up four of them
//! per direction. A `BTreeMap` search costs 25 to 35 instructions even for a handful of
//! entries; a cache hit here costs a mask, a compare and a load. The ordered map stays the
//! owner and the order of iteration (lists come out sorted by id, as before), so only the
//! cost of a lookup changes.
//!
//! The cache maps `id & (CACHE - 1)` to the last value looked up or inserted there; ids
//! are handed out in sequence, so the threads and processes alive together rarely share a
//! slot. Removing a value clears its slot, so the cache never points at a freed box.
#![no_std]

extern crate alloc;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::cell::Cell;
use core::ptr::{null_mut, NonNull};

/// Slots of the lookup cache (a power of two).
const CACHE: usize = 32;

/// A table of `V`s keyed by `u32`, at stable addresses. See the crate's documentation.
pub struct IdTable<V> {
    /// The owner of every value: each pointer came from `Box::into_raw` and is freed only
    /// by [`IdTable::remove`] or the table's drop.
    map: BTreeMap<u32, NonNull<V>>,
    /// `keys[i]`, `ptrs[i]`: the value of id `keys[i]` (whose low bits are `i`), if
    /// `ptrs[i]` is not null.
    keys: [Cell<u32>; CACHE],
    ptrs: [Cell<*mut V>; CACHE],
}

// SAFETY: the table owns its values as a `BTreeMap<u32, Box<V>>` would, and the cache's
// cells are only reached through the table itself, so moving it to another thread moves
// every value with it.
unsafe impl<V: Send> Send for IdTable<V> {}

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> IdTable<V> {
    pub const fn new() -> Self {
        IdTable {
            map: BTreeMap::new(),
            keys: [const { Cell::new(0) }; CACHE],
            ptrs: [const { Cell::new(null_mut()) }; CACHE],
        }
    }

    #[inline(always)]
    fn slot(id: u32) -> usize {
        id as usize & (CACHE - 1)
    }

    /// The value of `id`: from the cache, or from the map (then cached).
    #[inline(always)]
    fn find(&self, id: u32) -> Option<NonNull<V>> {
        let i = Self::slot(id);
        if self.keys[i].get() == id {
            if let Some(p) = NonNull::new(self.ptrs[i].get()) {
                return Some(p);
            }
        }
        self.find_slow(id, i)
    }

    #[inline(never)]
    fn find_slow(&self, id: u32, i: usize) -> Option<NonNull<V>> {
        let p = *self.map.get(&id)?;
        self.keys[i].set(id);
        self.ptrs[i].set(p.as_ptr());
        Some(p)
    }

    #[inline]
    pub fn get(&self, id: &u32) -> Option<&V> {
        // SAFETY: the pointer is a live box of this table (the cache is cleared when a value
        // leaves); the shared borrow of the table keeps every value alive and unchanged
        // except through `&self` methods, which hand out shared references only.
        self.find(*id).map(|p| unsafe { &*p.as_ptr() })
    }

    #[inline]
    pub fn get_mut(&mut self, id: &u32) -> Option<&mut V> {
        // SAFETY: as in `get`; the exclusive borrow of the table makes this the only
        // reference to the value while it lives.
        self.find(*id).map(|p| unsafe { &mut *p.as_ptr() })
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.find(*id).is_some()
    }

    /// Put `value` in as `id`'s (at a new address); returns the value it replaces.
    pub fn insert(&mut self, id: u32, value: V) -> Option<V> {
        let old = self.remove(&id);
        let p = NonNull::from(Box::leak(Box::new(value)));
        self.map.insert(id, p);
        let i = Self::slot(id);
        self.keys[i].set(id);
        self.ptrs[i].set(p.as_ptr());
        old
    }

    pub fn remove(&mut self, id: &u32) -> Option<V> {
        let p = self.map.remove(id)?;
        let i = Self::slot(*id);
        if self.keys[i].get() == *id {
            self.ptrs[i].set(null_mut());
        }
        // SAFETY: `p` came from `Box::leak` in `insert` and has just left the map and the
        // cache, so this is its only owner.
        Some(*unsafe { Box::from_raw(p.as_ptr()) })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The values in the order of their ids.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        // SAFETY: as in `get`.
        self.map.values().map(|p| unsafe { &*p.as_ptr() })
    }

    /// The values in the order of their ids, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        // SAFETY: as in `get_mut`; each value has a box of its own, so the references the
        // iterator hands out never overlap.
        self.map.values().map(|p| unsafe { &mut *p.as_ptr() })
    }

    /// Ids and values in the order of the ids.
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &V)> + '_ {
        // SAFETY: as in `get`.
        self.map.iter().map(|(k, p)| (k, unsafe { &*p.as_ptr() }))
    }

    /// Keep only the values `keep` says yes to (asked in the order of their ids).
    pub fn retain(&mut self, mut keep: impl FnMut(&u32, &mut V) -> bool) {
        let gone: alloc::vec::Vec<u32> = self
            .map
            .iter()
            // SAFETY: as in `get_mut`; one value at a time.
            .filter(|(k, p)| !keep(k, unsafe { &mut *p.as_ptr() }))
            .map(|(k, _)| *k)
            .collect();
        for id in gone {
            self.remove(&id);
        }
    }

    /// The ids, in order.
    pub fn keys(&self) -> impl Iterator<Item = &u32> + '_ {
        self.map.keys()
    }
}

impl<V> Drop for IdTable<V> {
    fn drop(&mut self) {
        for (_, p) in core::mem::take(&mut self.map) {
            // SAFETY: every pointer in the map came from `Box::leak` in `insert` and is
            // owned by the map alone.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use alloc::vec::Vec;
    use std::rc::Rc;

    #[test]
    fn lookups_agree_with_a_btreemap_through_inserts_and_removes() {
        let mut t = IdTable::new();
        let mut m = BTreeMap::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Ids that collide in the cache often (a range of 3 x CACHE).
            let id = (x % (3 * CACHE as u64)) as u32;
            match x % 4 {
                0 | 1 => assert_eq!(t.insert(id, step), m.insert(id, step)),
                2 => assert_eq!(t.remove(&id), m.remove(&id)),
                _ => {
                    if let Some(v) = t.get_mut(&id) {
                        *v += 1;
                    }
                    if let Some(v) = m.get_mut(&id) {
                        *v += 1;
                    }
                }
            }
            assert_eq!(t.get(&id), m.get(&id));
            assert_eq!(t.contains_key(&(id + 1)), m.contains_key(&(id + 1)));
            assert_eq!(t.len(), m.len());
        }
        t.retain(|k, v| (k + *v) % 3 != 0);
        m.retain(|k, v| (k + *v) % 3 != 0);
        let ours: Vec<(u32, u32)> = t.iter().map(|(k, v)| (*k, *v)).collect();
        let theirs: Vec<(u32, u32)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn a_value_stays_at_its_address_while_others_come_and_go() {
        let mut t = IdTable::new();
        t.insert(7, 70u64);
        let at = t.get(&7).unwrap() as *const u64;
        for id in 100..1_100 {
            t.insert(id, u64::from(id));
        }
        for id in 100..1_000 {
            t.remove(&id);
        }
        assert_eq!(t.get(&7).unwrap() as *const u64, at);
    }

    #[test]
    fn a_removed_id_is_not_found_through_its_cache_slot() {
        let mut t = IdTable::new();
        t.insert(3, 'a');
        assert_eq!(t.get(&3), Some(&'a'));
        assert_eq!(t.remove(&3), Some('a'));
        assert_eq!(t.get(&3), None);
        // Another id of the same slot, and id 0 (the cache's initial key).
        t.insert(3 + CACHE as u32, 'b');
        assert_eq!(t.get(&3), None);
        assert_eq!(t.get(&0), None);
        assert_eq!(t.get(&(3 + CACHE as u32)), Some(&'b'));
    }

    #[test]
    fn every_value_is_dropped_once() {
        let v = Rc::new(());
        {
            let mut t = IdTable::new();
            for id in 0..100 {
                t.insert(id, v.clone());
            }
            t.insert(5, v.clone()); // replaces: the old one is returned and dropped
            t.remove(&6);
            assert_eq!(Rc::strong_count(&v), 100);
        }
        assert_eq!(Rc::strong_count(&v), 1);
    }
}
