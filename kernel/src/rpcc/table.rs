//! A core's table of outstanding requests: the records it sent and waits for, by tag.
//!
//! A plain vector searched from the front, not a map: a core rarely has more than a few
//! requests in flight (one per waiting thread, or a batch of `call_many`), and replies come
//! back mostly in the order the requests left, so the entry is found at once. Unlike a
//! `BTreeMap`, whose leaf node is allocated for the first entry and freed with the last, it
//! keeps its capacity, so a remote operation allocates nothing here.

use super::{Outstanding, Waiter};
use alloc::vec::Vec;

pub struct Table {
    entries: Vec<(u64, Outstanding)>,
}

impl Table {
    pub const fn new() -> Self {
        Table {
            entries: Vec::new(),
        }
    }

    pub fn insert(&mut self, tag: u64, o: Outstanding) {
        self.entries.push((tag, o));
    }

    pub fn get(&self, tag: u64) -> Option<&Outstanding> {
        self.entries.iter().find(|e| e.0 == tag).map(|e| &e.1)
    }

    pub fn get_mut(&mut self, tag: u64) -> Option<&mut Outstanding> {
        self.entries
            .iter_mut()
            .find(|e| e.0 == tag)
            .map(|e| &mut e.1)
    }

    /// Take request `tag` out (the others keep their order).
    pub fn remove(&mut self, tag: u64) -> Option<Outstanding> {
        let i = self.entries.iter().position(|e| e.0 == tag)?;
        Some(self.entries.remove(i).1)
    }

    /// Whether any outstanding request satisfies `f`.
    pub fn any(&self, f: impl Fn(&Outstanding) -> bool) -> bool {
        self.entries.iter().any(|e| f(&e.1))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Requests of `waiter` (a thread that was removed): those answered go (their number is
    /// returned; each is shown to `dropped` first), the others are left to nobody.
    pub fn forget(&mut self, waiter: Waiter, mut dropped: impl FnMut(&mut Outstanding)) -> u64 {
        let mut gone = 0;
        self.entries.retain_mut(|(_, o)| {
            if o.waiter != waiter {
                return true;
            }
            if o.done {
                dropped(o);
                gone += 1;
                return false;
            }
            o.waiter = Waiter::Nobody;
            true
        });
        gone
    }
}
