//! [`Local`]: a cell for program-wide state, without locks.
//!
//! A Musubi user program has one thread and the kernel never runs user code behind its
//! back (there are no signal handlers), so a `static` is only ever touched by that one
//! thread, one access at a time. The only way two accesses could overlap is re-entry
//! through the closure passed to [`Local::with`] (say, an allocation from inside the
//! allocator); a flag catches that and panics instead of handing out a second `&mut`.
//! A spin lock would add nothing but a way to deadlock on that same re-entry.

use core::cell::{Cell, UnsafeCell};

/// Program-wide state for a single-threaded program.
pub struct Local<T> {
    busy: Cell<bool>,
    value: UnsafeCell<T>,
}

// SAFETY: Musubi user programs are single-threaded and have no asynchronous handlers (see
// the module documentation), so no two threads ever reach the same `Local`; overlapping
// access from the one thread is refused by the `busy` flag.
unsafe impl<T> Sync for Local<T> {}

impl<T> Local<T> {
    pub const fn new(value: T) -> Self {
        Local {
            busy: Cell::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Run `f` with exclusive access to the value. Panics on re-entry.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.try_with(f)
            .expect("ulib::cell::Local re-entered (e.g. allocation inside the allocator)")
    }

    /// Like [`Local::with`], but `None` instead of a panic if the value is in use.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if self.busy.replace(true) {
            return None;
        }
        // SAFETY: one thread only (see above) and `busy` was clear, so no other reference
        // to the value exists until we clear it again below.
        let r = f(unsafe { &mut *self.value.get() });
        self.busy.set(false);
        Some(r)
    }
}
