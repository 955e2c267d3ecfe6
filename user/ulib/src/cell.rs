//! [`Local`]: program-wide state behind a lock that yields instead of spinning.
//!
//! A Musubi program may run several threads ([`crate::thread`]). They share the process's
//! core and the kernel preempts them at every tick, so a thread can lose the core in the
//! middle of, say, an allocation while another thread of the same program wants the same
//! state. A `static` shared by threads therefore needs a lock. A spinning lock would be
//! wrong here: the holder cannot run while a waiter spins on the same core, so the waiter
//! would burn its whole time slice. A waiter that finds the lock taken calls `YIELD`
//! instead, which lets the holder (or another thread) run, and tries again when it is
//! back.
//!
//! The lock costs one atomic exchange and one store when it is free, which is always the
//! case in a program with one thread. In such a program a taken lock can only mean
//! re-entry through the closure passed to [`Local::with`] (say, an allocation from inside
//! the allocator): waiting would wait forever, so [`Local::with`] panics instead. Once the
//! program has started a thread ([`crate::thread::spawn`] records it), a taken lock means
//! another thread holds it, and the caller yields until it is free. Re-entry in a program
//! with threads is not detected (it would wait forever); ulib's own uses never re-enter
//! (the allocator and the printing path do not allocate).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Set once the program has started a second thread; never cleared.
static THREADED: AtomicBool = AtomicBool::new(false);

/// Record that the program now has more than one thread (called by `thread::spawn` before
/// the new thread exists).
pub(crate) fn set_threaded() {
    THREADED.store(true, Ordering::SeqCst);
}

/// Whether the program has ever started a second thread.
pub fn threaded() -> bool {
    THREADED.load(Ordering::Relaxed)
}

/// Program-wide state shared by the program's threads.
pub struct Local<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through `with`/`try_with`, which hand out the one
// `&mut` while `held` is set; `held` is taken with an atomic swap (Acquire) and released
// with a Release store, so accesses from different threads never overlap and each sees the
// previous holder's writes. The value moves between threads with the lock, which needs no
// `T: Send` here: a Musubi program has no thread-local state (every thread shares the one
// address space and the process's resources), so nothing a value holds belongs to one
// thread.
unsafe impl<T> Sync for Local<T> {}

impl<T> Local<T> {
    pub const fn new(value: T) -> Self {
        Local {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Run `f` with exclusive access to the value, yielding the core while another thread
    /// holds it. Panics on re-entry in a program with one thread.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        loop {
            if let Some(r) = self.try_lock() {
                return r.run(f);
            }
            if !threaded() {
                panic!("ulib::cell::Local re-entered (e.g. allocation inside the allocator)");
            }
            // Let the holder run. An error (there is none for YIELD) changes nothing:
            // we simply try again.
            let _ = crate::sys::yield_now();
        }
    }

    /// Like [`Local::with`], but `None` at once instead of waiting (or panicking) if the
    /// value is in use.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        self.try_lock().map(|g| g.run(f))
    }

    fn try_lock(&self) -> Option<Guard<'_, T>> {
        if self.held.swap(true, Ordering::Acquire) {
            None
        } else {
            Some(Guard(self))
        }
    }
}

/// The lock, held; released when dropped (also if `f` panics, although a panic ends the
/// program).
struct Guard<'a, T>(&'a Local<T>);

impl<T> Guard<'_, T> {
    fn run<R>(self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: this guard holds the lock (`held` was clear and we set it), so no other
        // reference to the value exists until the guard is dropped below.
        f(unsafe { &mut *self.0.value.get() })
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}
