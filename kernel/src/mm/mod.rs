//! Memory: per-core frame pools, per-core kernel heaps and per-core kernel stacks, and the
//! typed addresses through which the kernel copies user memory ([`user`]).
//!
//! At boot the bootstrap core splits physical memory into one pool per core
//! ([`frames::set_pool_layout`]); each core then builds its own pool's allocator inside its
//! own memory and allocates frames, heap and stacks only from it (Tender's per-core resource
//! management, P4; Barrelfish's per-core memory). Memory that ends up freed on another core
//! is handed back to its owner through a lock-free list the owner drains, so pools never
//! mix and no lock is shared.

pub mod frames;
pub mod heap;
pub mod kstack;
mod remote;
pub mod user;

use crate::percore::CoreCell;
use core::sync::atomic::AtomicU64;

/// A core's memory state, inside its [`crate::percore::CoreLocal`].
pub struct CoreMem {
    pub(crate) pool: CoreCell<Option<::frames::FramePool<'static>>>,
    pub(crate) heap: CoreCell<Option<heap::CoreHeap>>,
    pub(crate) stacks: CoreCell<kstack::StackSlots>,
    /// Frames of this core's pool freed by other cores.
    pub(crate) remote_frames: remote::RemoteList,
    /// Heap blocks of this core's heap freed by other cores.
    pub(crate) remote_blocks: remote::RemoteList,
    /// Published: frames in the pool and frames free (owner writes, anyone reads).
    pub frames_total: AtomicU64,
    pub frames_free: AtomicU64,
    /// Published: frames of the pool user memory may not take (`frames::kernel_reserve`).
    pub frames_reserved: AtomicU64,
    /// Published: bytes of the pool the heap holds now (claimed, minus given back).
    pub heap_bytes: AtomicU64,
}

impl CoreMem {
    pub const fn new() -> Self {
        CoreMem {
            pool: CoreCell::new(None),
            heap: CoreCell::new(None),
            stacks: CoreCell::new(kstack::StackSlots::new()),
            remote_frames: remote::RemoteList::new(),
            remote_blocks: remote::RemoteList::new(),
            frames_total: AtomicU64::new(0),
            frames_free: AtomicU64::new(0),
            frames_reserved: AtomicU64::new(0),
            heap_bytes: AtomicU64::new(0),
        }
    }
}
