//! A multi-producer, single-consumer list of freed memory, threaded through the memory
//! itself: how a core gives memory back to the core that owns it without a lock.
//!
//! Any core pushes (a compare-and-swap on the head); only the owner takes, and it takes the
//! whole list at once with a swap, so the ABA problem of lock-free stacks cannot arise.

use core::sync::atomic::{AtomicU64, Ordering};

/// A node lives in the freed memory: the next node's address and the block's size.
#[repr(C)]
struct Node {
    next: u64,
    size: u64,
}

/// Bytes a freed block must have to carry a node.
pub const MIN_BLOCK: usize = core::mem::size_of::<Node>();

pub struct RemoteList {
    head: AtomicU64,
}

impl RemoteList {
    pub const fn new() -> Self {
        RemoteList {
            head: AtomicU64::new(0),
        }
    }

    /// Give the block at kernel virtual address `at` (at least [`MIN_BLOCK`] bytes,
    /// 8-aligned, no longer used by anyone) back to the list's owner.
    ///
    /// # Safety
    /// The caller must own the block and never touch it again.
    pub unsafe fn push(&self, at: u64, size: u64) {
        let node = at as *mut Node;
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: the caller gave us the block; it is large and aligned enough.
            unsafe { node.write(Node { next: head, size }) };
            match self
                .head
                .compare_exchange_weak(head, at, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Is anything waiting?
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed) == 0
    }

    /// Take every block (owner only) and hand each `(address, size)` to `f`.
    pub fn drain(&self, mut f: impl FnMut(u64, u64)) {
        let mut at = self.head.swap(0, Ordering::Acquire);
        while at != 0 {
            // SAFETY: every node on the list was written by `push` and is ours now.
            let node = unsafe { (at as *const Node).read() };
            f(at, node.size);
            at = node.next;
        }
    }
}
