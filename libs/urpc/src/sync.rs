//! The primitives the ring and the call slot are built from, swappable for `loom`'s
//! model-checked ones (and the busy-wait pause, which loom must see as a yield).
//!
//! Ordinary builds use `core`'s atomics and a thin wrapper around `core::cell::UnsafeCell`
//! with loom's closure-style API (`with`, `with_mut`), so the ring's code is the same in both
//! builds. Under `--cfg loom` the atomics record every ordering and the cell checks that no
//! read of a payload can race with a write to it.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
/// A busy-wait's pause; under loom a yield, so a model with a spinning side terminates.
#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicU8, Ordering};

#[cfg(not(loom))]
pub(crate) use core::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// `core::cell::UnsafeCell` with loom's access API.
#[cfg(not(loom))]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(value))
    }

    /// Runs `f` with a pointer for reading.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
