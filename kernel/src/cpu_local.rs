//! The per-core *mechanism*: a record per core found through `GS`, and owner-only cells.
//!
//! Musubi's default structure is a kernel per core (Barrelfish; Tender's per-core resource
//! management, P4): every core owns its memory pool, its heap, its tables and its counters,
//! and no lock protects them because no other core touches them. This module gives that
//! rule a shape the compiler can help with, without knowing *which* subsystems keep state
//! per core — that composition is `crate::percore`'s (as Theseus splits `cpu_local` from
//! `per_cpu`):
//!
//! * [`PerCore`] is an array of one record per possible core. `GS.base` of core *i* points
//!   at record *i*, which starts with a [`CoreHead`] (the arch header the entry assembly
//!   reads, then this module's bookkeeping), so [`current_core`] is one load.
//! * Fields other cores may *read* (published counters) are atomics written only by the
//!   owner. Fields other cores *write* (the IPI mailbox, remote-free lists) are lock-free
//!   single-writer-per-slot structures defined by the modules that own them.
//! * Owner-only state sits in a [`CoreCell`], whose [`CoreCell::with`] checks at run time
//!   that the caller is the owning core and that the cell is not already borrowed (the
//!   kernel is non-preemptible, so the only re-entry is a fault handler).
//! * [`PerCore::act_as`] lets big-lock mode work on another core's record (see `biglock`).

use crate::arch::x86_64::core_header::{self, CoreHeader};
use abi::MAX_CORES;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// The one [`PerCore`] whose records GS points at (set by its first `init_this_core`): a
/// second one would make [`PerCore::this`] name the wrong record, so it is refused.
static INSTALLED: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

/// The start of every core's record: the arch header, then the mechanism's bookkeeping.
#[repr(C)]
pub struct CoreHead {
    pub arch: CoreHeader,
    /// Owner-only cells currently borrowed on this core (must be 0 when it waits).
    open_borrows: AtomicU32,
    /// Size of the whole record, for [`CoreCell::with`]'s owner check.
    size: AtomicUsize,
}

impl CoreHead {
    pub const fn new() -> Self {
        CoreHead {
            arch: CoreHeader::new(),
            open_borrows: AtomicU32::new(0),
            size: AtomicUsize::new(0),
        }
    }
}

/// A per-core record: a `#[repr(C)]` struct whose first field is its [`CoreHead`].
pub trait Record: Sync + 'static {
    fn head(&self) -> &CoreHead;
}

/// One record per possible core.
pub struct PerCore<R> {
    records: [R; MAX_CORES],
}

impl<R: Record> PerCore<R> {
    pub const fn new(records: [R; MAX_CORES]) -> Self {
        PerCore { records }
    }

    /// Point this core's GS base at record `core`. Called first thing on every core.
    pub fn init_this_core(&'static self, core: usize) {
        assert!(core < MAX_CORES, "core index {core} beyond MAX_CORES");
        let me = self as *const Self as *mut u8;
        let first = INSTALLED.compare_exchange(
            core::ptr::null_mut(),
            me,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        assert!(
            first.is_ok() || first == Err(me),
            "only one PerCore may be installed"
        );
        let r = &self.records[core];
        let head = r.head();
        assert!(
            core::ptr::eq(
                head as *const CoreHead as *const u8,
                r as *const R as *const u8
            ),
            "a per-core record must start with its CoreHead"
        );
        head.size
            .store(core::mem::size_of::<R>(), Ordering::Relaxed);
        core_header::install(&head.arch, core);
    }

    /// Act as core `core` from now on: `this()` and `current_core()` name its record. Only
    /// big-lock mode does this, holding the lock, around work on another core's tables
    /// (`biglock::on_core`), and switches back after.
    pub fn act_as(&'static self, core: usize) {
        core_header::switch_to(&self.records[core].head().arch);
    }

    /// This core's record: the one its GS header starts (one load, no index arithmetic;
    /// every kernel entry asks several times).
    #[inline]
    pub fn this(&'static self) -> &'static R {
        let head: *const CoreHead = head();
        debug_assert!(core::ptr::eq(
            head as *const u8,
            &self.records[current_core()] as *const R as *const u8
        ));
        // SAFETY: GS points at the header of one of `self.records` (`init_this_core`
        // installs only those, and only for the one installed PerCore; `act_as` switches
        // to another of them), and a record starts with its head (checked there).
        unsafe { &*(head as *const R) }
    }

    /// Another core's record, for reading its published counters or posting to its mailbox.
    #[inline]
    pub fn of(&'static self, core: usize) -> &'static R {
        &self.records[core]
    }
}

/// Index of the core running this code.
#[inline]
pub fn current_core() -> usize {
    core_header::core_index()
}

/// This core's head (whatever the record around it).
#[inline]
fn head() -> &'static CoreHead {
    let arch: *const CoreHeader = core_header::this();
    // SAFETY: headers are installed only by `PerCore::init_this_core`, from the `arch` field
    // of a `CoreHead`, its first field (`repr(C)`), in a static record.
    unsafe { &*(arch as *const CoreHead) }
}

/// Panic if this core holds a [`CoreCell`] borrow. Called before a core waits with
/// interrupts open: an interrupt handler could need the same cell.
pub fn assert_no_borrows() {
    let n = head().open_borrows.load(Ordering::Relaxed);
    assert!(
        n == 0,
        "core {} waits while holding {n} owner-only borrows",
        current_core()
    );
}

/// Owner-only state inside a per-core record.
pub struct CoreCell<T> {
    borrowed: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: `with` hands out the inner value only to the owning core and only once at a time,
// so the value is never accessed from two cores or twice on one core.
unsafe impl<T: Send> Sync for CoreCell<T> {}

impl<T> CoreCell<T> {
    pub const fn new(value: T) -> Self {
        CoreCell {
            borrowed: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Is the value borrowed now (by this core: nobody else may)?
    pub fn is_borrowed(&self) -> bool {
        self.borrowed.load(Ordering::Relaxed)
    }

    /// Run `f` on the value. Panics if called from a core other than the owner, or
    /// re-entered (for example by a fault handler while the owner holds it).
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let head = head();
        let me = head as *const CoreHead as usize;
        let at = self as *const Self as usize;
        assert!(
            at.wrapping_sub(me) < head.size.load(Ordering::Relaxed),
            "core {} touched another core's owner-only state",
            current_core()
        );
        assert!(
            !self.borrowed.swap(true, Ordering::Acquire),
            "owner-only state re-entered on core {}",
            current_core()
        );
        head.open_borrows.fetch_add(1, Ordering::Relaxed);
        // SAFETY: we are the owning core (checked above) and hold the only borrow.
        let r = f(unsafe { &mut *self.value.get() });
        head.open_borrows.fetch_sub(1, Ordering::Relaxed);
        self.borrowed.store(false, Ordering::Release);
        r
    }
}
