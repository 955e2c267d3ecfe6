//! Control registers, model-specific registers, CPUID and the per-core CPU set-up.
//!
//! The prebuilt `core` library may use SSE anywhere, so SSE is switched on by
//! `enable_sse` before the first Rust instruction runs on each core (from the boot and
//! trampoline assembly), not from Rust.

use core::arch::{asm, global_asm};

global_asm!(
    r#"
    .section .text.entry, "ax"
    .global enable_sse
/* CR0: clear EM (bit 2), set MP (bit 1). CR4: OSFXSR (bit 9), OSXMMEXCPT (bit 10). */
enable_sse:
    mov rax, cr0
    and rax, ~0x4
    or rax, 0x2
    mov cr0, rax
    mov rax, cr4
    or rax, 0x600
    mov cr4, rax
    ret
    "#
);

pub const MSR_APIC_BASE: u32 = 0x1b;
pub const MSR_GS_BASE: u32 = 0xc000_0101;

/// Read a model-specific register.
pub fn rdmsr(msr: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: reading an MSR has no memory effects; every MSR this kernel reads exists on
    // the CPUs it supports (x86_64 with APIC), and the kernel runs in ring 0.
    unsafe { asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi, options(nomem, nostack)) };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Write a model-specific register.
///
/// # Safety
/// The caller must know what the write does to the machine state (paging, segments,
/// interrupts); a wrong value can break memory safety.
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: the caller vouches for the effect of the write.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") value as u32, in("edx") (value >> 32) as u32,
             options(nostack));
    }
}

/// `cpuid` for a leaf and sub-leaf: (eax, ebx, ecx, edx).
pub fn cpuid(leaf: u32, sub: u32) -> (u32, u32, u32, u32) {
    let r = core::arch::x86_64::__cpuid_count(leaf, sub);
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// Time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no side effects; CR4.TSD is clear so it works at any level.
    unsafe { core::arch::x86_64::_rdtsc() }
}

pub fn read_cr0() -> u64 {
    let v;
    // SAFETY: reading CR0 has no side effects.
    unsafe { asm!("mov {}, cr0", out(reg) v, options(nomem, nostack)) };
    v
}

pub fn read_cr2() -> u64 {
    let v;
    // SAFETY: reading CR2 has no side effects.
    unsafe { asm!("mov {}, cr2", out(reg) v, options(nomem, nostack)) };
    v
}

pub fn read_cr3() -> u64 {
    let v;
    // SAFETY: reading CR3 has no side effects.
    unsafe { asm!("mov {}, cr3", out(reg) v, options(nomem, nostack)) };
    v
}

pub fn read_cr4() -> u64 {
    let v;
    // SAFETY: reading CR4 has no side effects.
    unsafe { asm!("mov {}, cr4", out(reg) v, options(nomem, nostack)) };
    v
}

/// Load a new top-level page table.
///
/// # Safety
/// `pml4_phys` must be a valid PML4 that maps the running code, its stack and every kernel
/// object still in use.
pub unsafe fn write_cr3(pml4_phys: u64) {
    // SAFETY: the caller guarantees the new tables map everything the kernel touches.
    unsafe { asm!("mov cr3, {}", in(reg) pml4_phys, options(nostack)) };
}

/// Write CR4.
///
/// # Safety
/// Changing CR4 changes paging and protection behaviour; the caller must know the bits.
pub unsafe fn write_cr4(v: u64) {
    // SAFETY: the caller vouches for the bits.
    unsafe { asm!("mov cr4, {}", in(reg) v, options(nostack)) };
}

/// CPU features Musubi looks at, read once per core.
#[derive(Clone, Copy, Debug, Default)]
pub struct Features {
    /// No-execute pages (EFER.NXE): W^X depends on it.
    pub nx: bool,
    /// A local APIC, a TSC and FXSAVE/FXRSTOR (the user FPU/SSE state).
    pub apic: bool,
    pub tsc: bool,
    pub fxsr: bool,
    pub x2apic: bool,
    pub pdpe1gb: bool,
    pub smep: bool,
    pub smap: bool,
    pub invariant_tsc: bool,
    /// Display family (base family, plus the extended family when the base is 0xf).
    pub family: u32,
}

impl Features {
    pub fn read() -> Self {
        let (eax1, _, ecx1, edx1) = cpuid(1, 0);
        let base_family = (eax1 >> 8) & 0xf;
        let family = if base_family == 0xf {
            base_family + ((eax1 >> 20) & 0xff)
        } else {
            base_family
        };
        let (max_ext, _, _, _) = cpuid(0x8000_0000, 0);
        let edx_ext1 = if max_ext >= 0x8000_0001 {
            cpuid(0x8000_0001, 0).3
        } else {
            0
        };
        let edx_ext7 = if max_ext >= 0x8000_0007 {
            cpuid(0x8000_0007, 0).3
        } else {
            0
        };
        let (max_basic, _, _, _) = cpuid(0, 0);
        let ebx7 = if max_basic >= 7 { cpuid(7, 0).1 } else { 0 };
        Features {
            nx: edx_ext1 & (1 << 20) != 0,
            apic: edx1 & (1 << 9) != 0,
            tsc: edx1 & (1 << 4) != 0,
            fxsr: edx1 & (1 << 24) != 0,
            x2apic: ecx1 & (1 << 21) != 0,
            pdpe1gb: edx_ext1 & (1 << 26) != 0,
            smep: ebx7 & (1 << 7) != 0,
            smap: ebx7 & (1 << 20) != 0,
            invariant_tsc: edx_ext7 & (1 << 8) != 0,
            family,
        }
    }
}

impl Features {
    /// The features Musubi cannot run without that this CPU lacks, by name.
    pub fn missing(&self) -> heapless::Vec<&'static str, 4> {
        let mut v = heapless::Vec::new();
        for (have, name) in [
            (self.nx, "NX (no-execute pages, for W^X)"),
            (self.apic, "a local APIC"),
            (self.tsc, "a TSC"),
            (self.fxsr, "FXSAVE/FXRSTOR"),
        ] {
            if !have {
                let _ = v.push(name);
            }
        }
        v
    }
}

/// Stop this core for good: interrupts off, halt forever (NMIs return to the loop).
pub fn halt_forever() -> ! {
    loop {
        // SAFETY: cli; hlt only stops this core.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) };
    }
}

/// Sleep until the next interrupt, then return with interrupts masked again.
///
/// `sti` delays interrupt recognition by one instruction, so an interrupt that became
/// pending before this call wakes the `hlt` instead of being lost.
#[inline]
pub fn wait_for_interrupt() {
    // SAFETY: the idle path is the one place the kernel opens interrupts; it runs Musubi
    // code only (compiled without a red zone), and handlers save every register.
    // Not `nomem`: handlers write memory, and the compiler must reload it afterwards.
    unsafe { asm!("sti; hlt; cli", options(nostack)) };
}

/// Flush this core's whole TLB, global (kernel) entries included, by toggling CR4.PGE.
pub fn flush_tlb_all() {
    const PGE: u64 = 1 << 7;
    let cr4 = read_cr4();
    if cr4 & PGE != 0 {
        // SAFETY: clearing and setting PGE only flushes translations; paging stays on.
        unsafe {
            write_cr4(cr4 & !PGE);
            write_cr4(cr4);
        }
    } else {
        // SAFETY: reloading CR3 with its own value only flushes (non-global) translations.
        unsafe { write_cr3(read_cr3()) };
    }
}

/// Open interrupts for a moment (a core spinning in its idle loop lets pending interrupts
/// in).
pub fn interrupt_window() {
    // SAFETY: as for `wait_for_interrupt`: only the idle path calls it.
    unsafe { asm!("sti; pause; cli", options(nostack)) };
}

/// Read a byte from an I/O port.
///
/// # Safety
/// Port I/O can program devices (including ones that do DMA); the caller must own the
/// device at `port` and know the effect.
pub unsafe fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: the caller owns the device at `port`.
    unsafe { asm!("in al, dx", in("dx") port, out("al") v, options(nomem, nostack)) };
    v
}

/// Write a byte to an I/O port.
///
/// # Safety
/// As for [`inb`].
pub unsafe fn outb(port: u16, v: u8) {
    // SAFETY: the caller owns the device at `port`.
    unsafe { asm!("out dx, al", in("dx") port, in("al") v, options(nomem, nostack)) };
}

/// Write a 16-bit word to an I/O port.
///
/// # Safety
/// As for [`inb`].
pub unsafe fn outw(port: u16, v: u16) {
    // SAFETY: the caller owns the device at `port`.
    unsafe { asm!("out dx, ax", in("dx") port, in("ax") v, options(nomem, nostack)) };
}

/// Write a 32-bit word to an I/O port.
///
/// # Safety
/// As for [`inb`].
pub unsafe fn outl(port: u16, v: u32) {
    // SAFETY: the caller owns the device at `port`.
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") v, options(nomem, nostack)) };
}

/// Continue on a new stack: set `rsp` to `top` and call `f`, which never returns.
pub fn switch_stack(top: u64, f: extern "C" fn() -> !) -> ! {
    assert!(
        top.is_multiple_of(16),
        "stack top {top:#x} not 16-byte aligned"
    );
    // SAFETY: `top` is the top of a mapped, unused stack; nothing on the old stack is used
    // again because `f` never returns.
    unsafe {
        asm!("mov rsp, {top}", "xor ebp, ebp", "call {f}", "ud2",
             top = in(reg) top, f = in(reg) f, options(noreturn));
    }
}
