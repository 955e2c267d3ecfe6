//! One core's resource table (Tender's per-core resource management).
//!
//! A [`Table`] holds the resources of one type family on one core in numbered *slots*.
//! Every slot has a *generation* that grows each time the slot is emptied, and a handle
//! names a slot *and* a generation, so a handle to a closed resource never reaches the
//! resource that later reuses the slot: [`Table::get`] answers [`Lookup::Stale`]. Only the
//! owning core ever touches its table, so there is no locking here. Pure logic, tested on
//! the host.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod quota;

use alloc::vec::Vec;

/// Why a handle finds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The slot number is beyond anything this table ever handed out.
    Unknown,
    /// The slot was emptied since the handle was made (or the generation is from the future).
    Stale,
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Slots with generations; free slots are reused lowest-first after the most recent.
pub struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    max_slots: u32,
    generation_mask: u32,
    len: usize,
}

impl<T> Table<T> {
    /// A table of at most `max_slots` slots whose generations wrap at `generation_mask`.
    pub const fn new(max_slots: u32, generation_mask: u32) -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            max_slots,
            generation_mask,
            len: 0,
        }
    }

    /// Number of resources in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Put `value` in a slot; returns (slot, generation), or gives the value back if full.
    pub fn insert(&mut self, value: T) -> Result<(u32, u32), T> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if (self.slots.len() as u32) < self.max_slots => {
                self.slots.push(Slot {
                    generation: 1,
                    value: None,
                });
                self.slots.len() as u32 - 1
            }
            None => return Err(value),
        };
        let s = &mut self.slots[slot as usize];
        s.value = Some(value);
        self.len += 1;
        Ok((slot, s.generation))
    }

    fn slot(&self, slot: u32, generation: u32) -> Result<&Slot<T>, Lookup> {
        let s = self.slots.get(slot as usize).ok_or(Lookup::Unknown)?;
        if s.generation != generation || s.value.is_none() {
            return Err(Lookup::Stale);
        }
        Ok(s)
    }

    /// The resource a handle names.
    pub fn get(&self, slot: u32, generation: u32) -> Result<&T, Lookup> {
        self.slot(slot, generation)
            .map(|s| s.value.as_ref().expect("checked"))
    }

    /// The resource a handle names, to change it.
    pub fn get_mut(&mut self, slot: u32, generation: u32) -> Result<&mut T, Lookup> {
        self.slot(slot, generation)?;
        Ok(self.slots[slot as usize].value.as_mut().expect("checked"))
    }

    /// Take the resource out; the slot's generation moves on, so the handle goes stale.
    pub fn remove(&mut self, slot: u32, generation: u32) -> Result<T, Lookup> {
        self.slot(slot, generation)?;
        let s = &mut self.slots[slot as usize];
        let value = s.value.take().expect("checked");
        s.generation = (s.generation + 1) & self.generation_mask;
        if s.generation == 0 {
            s.generation = 1; // generation 0 is never handed out
        }
        self.free.push(slot);
        self.len -= 1;
        Ok(value)
    }

    /// Every resource with its (slot, generation).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (i as u32, s.generation, v)))
    }

    /// The first resource for which `f` holds.
    pub fn find(&self, mut f: impl FnMut(&T) -> bool) -> Option<(u32, u32, &T)> {
        self.iter().find(|(_, _, v)| f(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        let mut t = Table::new(4, 0xff);
        let (a, ga) = t.insert("a").unwrap();
        let (b, gb) = t.insert("b").unwrap();
        assert_eq!((t.get(a, ga), t.get(b, gb)), (Ok(&"a"), Ok(&"b")));
        assert_eq!(t.len(), 2);
        assert_eq!(t.remove(a, ga), Ok("a"));
        assert_eq!(t.get(a, ga), Err(Lookup::Stale));
        assert_eq!(t.remove(a, ga), Err(Lookup::Stale));
        assert_eq!(t.get(9, 1), Err(Lookup::Unknown));
        *t.get_mut(b, gb).unwrap() = "B";
        assert_eq!(t.get(b, gb), Ok(&"B"));
    }

    #[test]
    fn reused_slot_does_not_answer_old_handle() {
        let mut t = Table::new(1, 0xff);
        let (s, g1) = t.insert(1).unwrap();
        t.remove(s, g1).unwrap();
        let (s2, g2) = t.insert(2).unwrap();
        assert_eq!(s, s2);
        assert_ne!(g1, g2);
        assert_eq!(t.get(s, g1), Err(Lookup::Stale));
        assert_eq!(t.get(s2, g2), Ok(&2));
    }

    #[test]
    fn full_table_gives_value_back() {
        let mut t = Table::new(2, 0xff);
        t.insert(1).unwrap();
        t.insert(2).unwrap();
        assert_eq!(t.insert(3), Err(3));
    }

    #[test]
    fn generations_wrap_but_skip_zero() {
        let mut t = Table::new(1, 0x3);
        let mut seen = Vec::new();
        for i in 0..10 {
            let (s, g) = t.insert(i).unwrap();
            assert_ne!(g, 0);
            seen.push(g);
            t.remove(s, g).unwrap();
        }
        assert_eq!(&seen[..4], &[1, 2, 3, 1]);
    }

    #[test]
    fn iter_and_find() {
        let mut t = Table::new(8, 0xff);
        let ids: Vec<_> = (0..5).map(|i| t.insert(i * 10).unwrap()).collect();
        t.remove(ids[2].0, ids[2].1).unwrap();
        let values: Vec<i32> = t.iter().map(|(_, _, v)| *v).collect();
        assert_eq!(values, [0, 10, 30, 40]);
        assert_eq!(t.find(|v| *v == 30).map(|(s, g, _)| (s, g)), Some(ids[3]));
        assert!(t.find(|v| *v == 20).is_none());
    }

    #[test]
    fn many_cycles_keep_the_table_small() {
        let mut t = Table::new(1 << 20, (1 << 30) - 1);
        for i in 0..10_000 {
            let (s, g) = t.insert(i).unwrap();
            t.remove(s, g).unwrap();
        }
        assert!(t.is_empty());
        assert_eq!(t.slots.len(), 1);
    }
}
