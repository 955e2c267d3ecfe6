//! Everything that knows it runs on x86_64: boot, descriptor tables, traps, APICs, paging,
//! the application-processor trampoline and the platform's ACPI tables.
//!
//! Most of the kernel's `unsafe` lives here. The rest of the kernel sees safe functions.

pub mod acpi;
pub mod apic;
pub mod boot;
pub mod context;
pub mod core_header;
pub mod cpu;
pub mod early;
pub mod gdt;
pub mod idt;
pub mod ioapic;
pub mod msix;
pub mod paging;
pub mod pci;
pub mod pci_irq;
pub mod pit;
pub mod pvh;
pub mod serial;
pub mod trampoline;
pub mod trap;
pub mod virtio;
