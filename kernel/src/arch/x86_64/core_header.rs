//! The first words of every core's record: what the hardware side reads through `GS`.
//!
//! Each core's `GS.base` points at its record (see `crate::cpu_local`). The record starts
//! with a [`CoreHeader`] whose layout the entry assembly relies on: the core index at
//! `gs:[0]`, the running thread's kernel-stack top and the saved user stack pointer at the
//! offsets [`KSTACK_TOP_OFFSET`] and [`USER_RSP_OFFSET`], the record's own address (so
//! [`this`] is one load) and this core's TSS. Arch owns these words; which subsystems keep
//! state after them is the kernel's business (`crate::percore`).

use super::cpu;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use x86_64::structures::tss::TaskStateSegment;

/// The words at `gs:[0..]` of every core.
#[repr(C)]
pub struct CoreHeader {
    core: AtomicUsize,
    /// Top of the running thread's kernel stack (read by the syscall entry).
    kstack_top: AtomicU64,
    /// The user stack pointer while the syscall entry switches stacks.
    user_rsp: AtomicU64,
    /// The address of this header (and of the record it starts).
    base: AtomicUsize,
    /// This core's TSS (written only through `gdt::set_rsp0`).
    tss: AtomicPtr<TaskStateSegment>,
}

/// Offsets the assembly entry paths use.
pub const KSTACK_TOP_OFFSET: usize = core::mem::offset_of!(CoreHeader, kstack_top);
pub const USER_RSP_OFFSET: usize = core::mem::offset_of!(CoreHeader, user_rsp);
const BASE_OFFSET: usize = core::mem::offset_of!(CoreHeader, base);
const _: () = assert!(core::mem::offset_of!(CoreHeader, core) == 0);
const _: () = assert!(BASE_OFFSET == 24);

impl CoreHeader {
    pub const fn new() -> Self {
        CoreHeader {
            core: AtomicUsize::new(0),
            kstack_top: AtomicU64::new(0),
            user_rsp: AtomicU64::new(0),
            base: AtomicUsize::new(0),
            tss: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Record this core's TSS (once, from `gdt::init_this_core`).
    pub fn set_tss(&self, tss: *mut TaskStateSegment) {
        self.tss.store(tss, Ordering::Release);
    }

    pub fn tss(&self) -> *mut TaskStateSegment {
        self.tss.load(Ordering::Acquire)
    }

    /// Set the kernel stack the syscall entry switches to.
    #[inline]
    pub fn set_kstack_top(&self, top: u64) {
        self.kstack_top.store(top, Ordering::Relaxed);
    }
}

/// Make `header` core `core`'s and point this core's GS base at it. Called first thing on
/// every core, by `cpu_local`, which places the header at the start of the core's record.
pub fn install(header: &'static CoreHeader, core: usize) {
    header.core.store(core, Ordering::Relaxed);
    header
        .base
        .store(header as *const CoreHeader as usize, Ordering::Relaxed);
    switch_to(header);
}

/// Point GS at another (installed) header: from now on this core reads that core's record.
pub fn switch_to(header: &'static CoreHeader) {
    // SAFETY: GS.base is only read through this module's functions and the entry assembly;
    // `header` is a static that lives for the whole run, and the kernel runs with
    // interrupts masked, so nothing observes the switch half-done.
    unsafe { cpu::wrmsr(cpu::MSR_GS_BASE, header as *const CoreHeader as u64) };
}

/// Index of the core running this code (of the record GS points at).
#[inline]
pub fn core_index() -> usize {
    let core: usize;
    // SAFETY: GS.base points at an installed `CoreHeader` (before any other kernel code
    // runs), whose first field is the core index.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) core, options(pure, nostack, readonly, preserves_flags))
    };
    core
}

/// The header GS points at.
///
/// Both reads are `pure` and `readonly`: the compiler may merge repeated reads with no
/// memory write between them (a system call asks many times), but not across one; GS.base
/// changes only by `switch_to`'s `wrmsr`, which it treats as a write to memory.
#[inline]
pub fn this() -> &'static CoreHeader {
    let base: usize;
    // SAFETY: as in `core_index`; the `base` field holds the header's own address.
    unsafe {
        core::arch::asm!("mov {}, gs:[24]", out(reg) base, options(pure, nostack, readonly, preserves_flags))
    };
    // SAFETY: `base` was stored by `install` from a `&'static CoreHeader`.
    unsafe { &*(base as *const CoreHeader) }
}
