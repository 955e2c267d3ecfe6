//! Per-core data: each core's own state, found through its GS base.
//!
//! Musubi's default structure is a kernel per core (Barrelfish; Tender's per-core resource
//! management, P4): every core owns its memory pool, its heap, its tables and its counters,
//! and no lock protects them because no other core touches them. This module gives that
//! rule a shape the compiler can help with:
//!
//! * [`CoreLocal`] is one core's record. The kernel keeps one per possible core in a static
//!   array; `GS.base` of core *i* points at element *i*, so [`current_core`] is one load.
//! * Fields other cores may *read* (published counters) are atomics written only by the
//!   owner. Fields other cores *write* (the IPI mailbox, remote-free lists) are lock-free
//!   single-writer-per-slot structures defined by the modules that own them.
//! * Owner-only state sits in a [`CoreCell`], whose [`CoreCell::with`] checks at run time
//!   that the caller is the owning core and that the cell is not already borrowed (the
//!   kernel is non-preemptible, so the only re-entry is a fault handler).

use crate::arch::x86_64::cpu;
use abi::MAX_CORES;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One core's record. `core` must stay the first field: [`current_core`] reads it at
/// `gs:[0]`.
#[repr(C, align(64))]
pub struct CoreLocal {
    core: AtomicUsize,
    /// Top of the running thread's kernel stack (`gs:[8]`, read by the syscall entry).
    kstack_top: AtomicU64,
    /// The user stack pointer while the syscall entry switches stacks (`gs:[16]`).
    user_rsp: AtomicU64,
    /// This core's TSS (written only through `gdt::set_rsp0`).
    tss: AtomicPtr<x86_64::structures::tss::TaskStateSegment>,
    /// Owner-only cells currently borrowed on this core (must be 0 when it waits).
    open_borrows: AtomicU32,
    /// Published state, written by the owner only.
    pub stats: CoreStats,
    /// Messages from other cores (one slot per sender).
    pub mailbox: crate::smp::Mailbox,
    /// This core's memory: frame pool and heap.
    pub mem: crate::mm::CoreMem,
    /// This core's processes, threads and run queues.
    pub sched: CoreCell<crate::proc::sched::Sched>,
    /// This core's resources.
    pub res: CoreCell<crate::res::ResTable>,
    /// The current kernel activity's flow id and user.
    pub flow: crate::res::Flow,
    /// The user of the running thread's process (0, the kernel, when idle).
    pub running_user: AtomicU32,
    /// Pid and priority of the running process (0 and App when none), kept by the
    /// scheduler like `running_user`.
    pub running_pid: AtomicU64,
    pub running_priority: AtomicU32,
    /// Set when the scheduler may want to switch on the way back to user mode (a
    /// higher-priority wake-up, the end of a slice, a stop request): the fast check of
    /// `sched::preempt_if_needed`.
    pub sched_attention: AtomicBool,
    pub rpcc: crate::rpcc::CoreRpcc,
    pub modes: crate::modes::CoreModes,
    /// This core holds the big kernel lock (`kernel=biglock`).
    pub holds_biglock: AtomicBool,
    /// Big-lock mode: another core is working on this core's tables (`biglock::on_core`).
    pub acted_for: AtomicBool,
    /// Big-lock mode: another core changed mappings this core may cache; flush on entry.
    pub tlb_stale: AtomicBool,
    pub trace: crate::trace::CoreTrace,
}

/// Counters a core publishes about itself. Only the owner writes them (relaxed atomics
/// make the reads by other cores well defined, not synchronised).
pub struct CoreStats {
    pub online: AtomicBool,
    pub apic_id: AtomicU32,
    /// Timer interrupts taken.
    pub ticks: AtomicU64,
    /// IPIs taken, all senders together.
    pub ipis: AtomicU64,
    /// IPIs taken from each sender core.
    pub ipis_from: [AtomicU64; MAX_CORES],
    /// Serial-port interrupts taken.
    pub serial_irqs: AtomicU64,
    /// Timer ticks that found the core idle (no thread running).
    pub idle_ticks: AtomicU64,
    /// Processes living on this core.
    pub processes: AtomicU64,
    /// Processes the kernel started at boot on this core that have not ended.
    pub boot_programs: AtomicU64,
    /// TSC value when this core entered its idle loop for the first time.
    pub idle_at_tsc: AtomicU64,
}

impl CoreStats {
    const fn new() -> Self {
        CoreStats {
            online: AtomicBool::new(false),
            apic_id: AtomicU32::new(0),
            ticks: AtomicU64::new(0),
            ipis: AtomicU64::new(0),
            ipis_from: [const { AtomicU64::new(0) }; MAX_CORES],
            serial_irqs: AtomicU64::new(0),
            idle_ticks: AtomicU64::new(0),
            processes: AtomicU64::new(0),
            boot_programs: AtomicU64::new(0),
            idle_at_tsc: AtomicU64::new(0),
        }
    }
}

/// Offsets the assembly entry paths use.
pub const KSTACK_TOP_OFFSET: usize = core::mem::offset_of!(CoreLocal, kstack_top);
pub const USER_RSP_OFFSET: usize = core::mem::offset_of!(CoreLocal, user_rsp);
const _: () = assert!(core::mem::offset_of!(CoreLocal, core) == 0);

impl CoreLocal {
    /// Record this core's TSS (once, from `gdt::init_this_core`).
    pub fn set_tss(&self, tss: *mut x86_64::structures::tss::TaskStateSegment) {
        self.tss.store(tss, Ordering::Release);
    }

    pub fn tss(&self) -> *mut x86_64::structures::tss::TaskStateSegment {
        self.tss.load(Ordering::Acquire)
    }

    /// Set the kernel stack the syscall entry switches to.
    pub fn set_kstack_top(&self, top: u64) {
        self.kstack_top.store(top, Ordering::Relaxed);
    }

    const fn new() -> Self {
        CoreLocal {
            core: AtomicUsize::new(0),
            kstack_top: AtomicU64::new(0),
            user_rsp: AtomicU64::new(0),
            tss: AtomicPtr::new(core::ptr::null_mut()),
            open_borrows: AtomicU32::new(0),
            stats: CoreStats::new(),
            mailbox: crate::smp::Mailbox::new(),
            mem: crate::mm::CoreMem::new(),
            sched: CoreCell::new(crate::proc::sched::Sched::new()),
            res: CoreCell::new(crate::res::ResTable::new()),
            flow: crate::res::Flow::new(),
            running_user: AtomicU32::new(0),
            running_pid: AtomicU64::new(0),
            running_priority: AtomicU32::new(abi::Priority::App as u32),
            sched_attention: AtomicBool::new(false),
            rpcc: crate::rpcc::CoreRpcc::new(),
            modes: crate::modes::CoreModes::new(),
            holds_biglock: AtomicBool::new(false),
            acted_for: AtomicBool::new(false),
            tlb_stale: AtomicBool::new(false),
            trace: crate::trace::CoreTrace::new(),
        }
    }
}

static CORES: [CoreLocal; MAX_CORES] = [const { CoreLocal::new() }; MAX_CORES];

/// Point this core's GS base at its record. Called first thing on every core.
pub fn init_this_core(core: usize) {
    assert!(core < MAX_CORES, "core index {core} beyond MAX_CORES");
    CORES[core].core.store(core, Ordering::Relaxed);
    let record = &CORES[core] as *const CoreLocal as u64;
    // SAFETY: GS.base is only used by `current_core`; the record is a static that lives
    // for the whole run, and `core` indexes it.
    unsafe { cpu::wrmsr(cpu::MSR_GS_BASE, record) };
}

/// Panic if this core holds a [`CoreCell`] borrow. Called before a core waits with
/// interrupts open: an interrupt handler could need the same cell.
/// Act as core `core` from now on: `this()` and `current_core()` name its record. Only big-lock
/// mode does this, holding the lock, around work on another core's tables
/// (`biglock::on_core`), and switches back after.
pub fn act_as(core: usize) {
    let record = &CORES[core] as *const CoreLocal as u64;
    // SAFETY: GS.base points at a core record, as at start-up; the kernel runs with
    // interrupts masked, so nothing observes the switch half-done.
    unsafe { cpu::wrmsr(cpu::MSR_GS_BASE, record) };
}

pub fn assert_no_borrows() {
    let n = this().open_borrows.load(Ordering::Relaxed);
    assert!(
        n == 0,
        "core {} waits while holding {n} owner-only borrows",
        current_core()
    );
}

/// Index of the core running this code.
#[inline]
pub fn current_core() -> usize {
    let core: usize;
    // SAFETY: GS.base points at this core's `CoreLocal` (set by `init_this_core` before any
    // other kernel code runs), whose first field is the core index.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) core, options(nostack, readonly, preserves_flags))
    };
    core
}

/// This core's record.
#[inline]
pub fn this() -> &'static CoreLocal {
    &CORES[current_core()]
}

/// Another core's record, for reading its published counters or posting to its mailbox.
pub fn of(core: usize) -> &'static CoreLocal {
    &CORES[core]
}

/// Owner-only state inside a [`CoreLocal`].
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

    /// Run `f` on the value. Panics if called from a core other than the owner, or
    /// re-entered (for example by a fault handler while the owner holds it).
    /// Is the value borrowed now (by this core: nobody else may)?
    pub fn is_borrowed(&self) -> bool {
        self.borrowed.load(Ordering::Relaxed)
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let me = this() as *const CoreLocal as usize;
        let at = self as *const Self as usize;
        assert!(
            at.wrapping_sub(me) < core::mem::size_of::<CoreLocal>(),
            "core {} touched another core's owner-only state",
            current_core()
        );
        assert!(
            !self.borrowed.swap(true, Ordering::Acquire),
            "owner-only state re-entered on core {}",
            current_core()
        );
        let core = this();
        core.open_borrows.fetch_add(1, Ordering::Relaxed);
        // SAFETY: we are the owning core (checked above) and hold the only borrow.
        let r = f(unsafe { &mut *self.value.get() });
        core.open_borrows.fetch_sub(1, Ordering::Relaxed);
        self.borrowed.store(false, Ordering::Release);
        r
    }
}
