//! The local APIC of each core: identity, end-of-interrupt, timer and inter-processor
//! interrupts, in x2APIC mode when the CPU has it (registers are MSRs) and xAPIC mode
//! otherwise (registers are memory-mapped at the APIC base).
//!
//! The mode is chosen once, from CPUID on the bootstrap core, and used on every core.

use super::cpu::{self, rdmsr, wrmsr};
use super::paging::phys_to_virt;
use super::trap::VEC_SPURIOUS;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const REG_ID: u32 = 0x20;
const REG_TPR: u32 = 0x80;
const REG_EOI: u32 = 0xb0;
const REG_SVR: u32 = 0xf0;
const REG_ESR: u32 = 0x280;
const REG_ICR_LOW: u32 = 0x300;
const REG_ICR_HIGH: u32 = 0x310;
const REG_LVT_TIMER: u32 = 0x320;
const REG_LVT_LINT0: u32 = 0x350;
const REG_LVT_ERROR: u32 = 0x370;
const REG_TIMER_INITIAL: u32 = 0x380;
const REG_TIMER_CURRENT: u32 = 0x390;
const REG_TIMER_DIVIDE: u32 = 0x3e0;

const LVT_MASKED: u32 = 1 << 16;
const ICR_DELIVERY_PENDING: u32 = 1 << 12;
const ICR_ASSERT: u32 = 1 << 14;
const ICR_LEVEL: u32 = 1 << 15;
const ICR_NMI: u32 = 4 << 8;
const ICR_INIT: u32 = 5 << 8;
const ICR_STARTUP: u32 = 6 << 8;
const ICR_ALL_BUT_SELF: u32 = 3 << 18;
/// Timer divide-configuration value for "divide by 16".
pub const TIMER_DIVIDE_16: u32 = 0x3;

const MODE_NONE: u8 = 0;
const MODE_XAPIC: u8 = 1;
const MODE_X2APIC: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(MODE_NONE);
static XAPIC_BASE: AtomicU64 = AtomicU64::new(0);

/// Whether the local APICs are usable (for the fatal-stop path).
pub fn is_ready() -> bool {
    MODE.load(Ordering::Acquire) != MODE_NONE
}

/// True when running in x2APIC mode.
pub fn is_x2apic() -> bool {
    MODE.load(Ordering::Relaxed) == MODE_X2APIC
}

fn read(reg: u32) -> u32 {
    if is_x2apic() {
        rdmsr(0x800 + (reg >> 4)) as u32
    } else {
        let at = XAPIC_BASE.load(Ordering::Relaxed) + u64::from(reg);
        // SAFETY: the xAPIC register page is mapped uncached in the direct map and `reg`
        // is one of its 32-bit registers.
        unsafe { core::ptr::read_volatile(at as *const u32) }
    }
}

fn write(reg: u32, value: u32) {
    if is_x2apic() {
        // SAFETY: x2APIC register MSRs; the values written are the documented encodings.
        unsafe { wrmsr(0x800 + (reg >> 4), u64::from(value)) };
    } else {
        let at = XAPIC_BASE.load(Ordering::Relaxed) + u64::from(reg);
        // SAFETY: as in `read`.
        unsafe { core::ptr::write_volatile(at as *mut u32, value) };
    }
}

/// Choose the APIC mode for the whole machine (bootstrap core, once).
pub fn choose_mode(x2apic: bool) {
    let base = rdmsr(cpu::MSR_APIC_BASE) & 0x000f_ffff_ffff_f000;
    XAPIC_BASE.store(phys_to_virt(base), Ordering::Relaxed);
    MODE.store(
        if x2apic { MODE_X2APIC } else { MODE_XAPIC },
        Ordering::Release,
    );
}

/// Enable this core's local APIC: mask LINT0 (the legacy PIC is not used) and the error
/// interrupt, software-enable, accept all priorities.
pub fn init_this_core() {
    let mut base = rdmsr(cpu::MSR_APIC_BASE) | (1 << 11);
    if is_x2apic() {
        base |= 1 << 10;
    }
    // SAFETY: setting the global-enable (and x2APIC-enable) bits of IA32_APIC_BASE keeps
    // the base address; the CPU supports the mode chosen by `choose_mode`.
    unsafe { wrmsr(cpu::MSR_APIC_BASE, base) };
    // Mask LINT0 before anything else: firmware leaves it in ExtINT mode, and a PIC
    // interrupt taken that way stays pending in the CPU with no vector behind it (QEMU then
    // delivers "vector -1" as a #GP at the first `sti`). Writing TPR afterwards makes the
    // APIC re-evaluate what is pending, which clears such a stale request.
    write(REG_LVT_LINT0, LVT_MASKED);
    write(REG_LVT_ERROR, LVT_MASKED);
    write(REG_SVR, 0x100 | VEC_SPURIOUS as u32);
    write(REG_TPR, 0);
    write(REG_ESR, 0);
    write(REG_ESR, 0);
    eoi();
}

/// This core's APIC id.
pub fn id() -> u32 {
    let v = read(REG_ID);
    if is_x2apic() {
        v
    } else {
        v >> 24
    }
}

/// Signal end of interrupt.
pub fn eoi() {
    write(REG_EOI, 0);
}

fn send_icr(dest: u32, low: u32) {
    if is_x2apic() {
        // The x2APIC ICR write is not serialising: make earlier stores (the message the
        // IPI announces) visible first, as Linux does.
        // SAFETY: fences have no effect beyond ordering.
        unsafe { core::arch::asm!("mfence", "lfence", options(nostack, preserves_flags)) };
        // SAFETY: the x2APIC ICR is one 64-bit MSR: destination in the high half.
        unsafe { wrmsr(0x830, (u64::from(dest) << 32) | u64::from(low)) };
    } else {
        write(REG_ICR_HIGH, dest << 24);
        write(REG_ICR_LOW, low);
        while read(REG_ICR_LOW) & ICR_DELIVERY_PENDING != 0 {
            core::hint::spin_loop();
        }
    }
}

/// Fixed-delivery interrupt `vector` to the core with APIC id `dest`.
pub fn send_ipi(dest: u32, vector: u8) {
    send_icr(dest, u32::from(vector) | ICR_ASSERT);
}

/// Fixed-delivery interrupt `vector` to every core but this one.
pub fn send_ipi_all_others(vector: u8) {
    send_icr(0, u32::from(vector) | ICR_ASSERT | ICR_ALL_BUT_SELF);
}

/// NMI to the core with APIC id `dest` (the fatal-stop signal).
pub fn send_nmi(dest: u32) {
    send_icr(dest, ICR_NMI | ICR_ASSERT);
}

/// INIT to the core with APIC id `dest` (first step of starting it).
pub fn send_init(dest: u32) {
    send_icr(dest, ICR_INIT | ICR_ASSERT | ICR_LEVEL);
}

/// STARTUP to `dest`: it begins in real mode at `page * 4096`.
pub fn send_startup(dest: u32, page: u8) {
    send_icr(dest, ICR_STARTUP | ICR_ASSERT | u32::from(page));
}

/// Run the timer as a free-running one-shot countdown from `u32::MAX`, masked, for
/// calibration.
pub fn timer_start_countdown(divide: u32) {
    write(REG_TIMER_DIVIDE, divide);
    write(REG_LVT_TIMER, LVT_MASKED);
    write(REG_TIMER_INITIAL, u32::MAX);
}

/// The timer's current count.
pub fn timer_current() -> u32 {
    read(REG_TIMER_CURRENT)
}

/// One-shot mode: interrupt `vector` once when a count set by [`timer_set_count`] runs out.
/// The timer stays stopped until the first count is set.
pub fn timer_oneshot(vector: u8, divide: u32) {
    write(REG_TIMER_DIVIDE, divide);
    write(REG_TIMER_INITIAL, 0);
    write(REG_LVT_TIMER, u32::from(vector));
}

/// Start a one-shot countdown of `count` (>= 1) ticks of the divided bus clock, replacing
/// the one running.
pub fn timer_set_count(count: u32) {
    write(REG_TIMER_INITIAL, count.max(1));
}
