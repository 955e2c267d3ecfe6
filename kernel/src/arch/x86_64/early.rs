//! Descriptor tables for the first moments of each core, before it has its own.
//!
//! The boot GDT lives in the identity-mapped `.boot` section, which the kernel's page tables
//! do not map, and there is no IDT at all at entry: a fault then would reset the machine
//! without a word. So each core first loads this small GDT (in the kernel image, with the
//! accessed bits preset so the CPU never writes to it) and a shared IDT whose gates lead to
//! the normal trap path and its fault report.

use super::gdt::{KERNEL_CS, KERNEL_DS};
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::structures::gdt::SegmentSelector;

#[repr(C, align(16))]
struct EarlyGdt([u64; 3]);

/// Null, 64-bit kernel code, kernel data: the selectors of [`super::gdt`].
static EARLY_GDT: EarlyGdt = EarlyGdt([0, 0x00af_9b00_0000_ffff, 0x00cf_9300_0000_ffff]);

/// Load the early GDT and IDT on this core.
pub fn load_this_core() {
    let ptr = x86_64::structures::DescriptorTablePointer {
        limit: (core::mem::size_of::<EarlyGdt>() - 1) as u16,
        base: x86_64::VirtAddr::new(&EARLY_GDT as *const EarlyGdt as u64),
    };
    // SAFETY: the table is static, mapped in every page table the kernel uses, and holds a
    // 64-bit code segment at KERNEL_CS and a data segment at KERNEL_DS, like the boot GDT.
    unsafe {
        x86_64::instructions::tables::lgdt(&ptr);
        CS::set_reg(SegmentSelector(KERNEL_CS));
        SS::set_reg(SegmentSelector(KERNEL_DS));
        DS::set_reg(SegmentSelector(KERNEL_DS));
        ES::set_reg(SegmentSelector(KERNEL_DS));
    }
    super::idt::load_early();
}
