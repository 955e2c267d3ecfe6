//! Devices for user-mode drivers (issue 15; DESIGN.md section 8). The kernel keeps no
//! drivers: it enumerates PCI at boot and gives a driver process, through its device's
//! resource, exactly what the driver needs and nothing else of the machine.
//!
//! Every PCI function found at boot is a `device` resource on core 0, created by the kernel,
//! named `c0/device/BB.DD.F` (bus, device, function in hexadecimal, e.g. `c0/device/00.03.0`).
//! `RES_INFO` / `RES_LIST` report `size` = `vendor << 16 | device id` and `detail` = the
//! class (`class << 16 | subclass << 8 | prog-if`). Nobody but the kernel opens one.
//!
//! | number | call | arguments | value |
//! |---|---|---|---|
//! | 48 | `DEV_LIST` | `*mut PciInfo`, capacity | records written (every function; no right needed) |
//! | 49 | `DEV_CLAIM` | device id | 0: the caller now holds the device |
//! | 50 | `DEV_CONFIG` | device id, offset, width (1, 2, 4) \| [`CONFIG_WRITE`], value | the value read (0 for a write) |
//! | 51 | `DEV_MAP_BAR` | device id, BAR (0..6), address | bytes mapped (the BAR rounded up to pages) |
//! | 52 | `DMA_ALLOC` | address, pages (1..=[`DMA_MAX_PAGES`]) | physical address of the first page |
//! | 53 | `DMA_FREE` | address, pages | 0 |
//! | 54 | `DEV_IRQ` | device id, endpoint (0: stop) | 1: by MSI-X, 0: by its line |
//! | 55 | `DEV_IRQ_ACK` | device id | 0 |
//!
//! **Who may hold a device.** `DEV_CLAIM` needs the device's control right (every device
//! grants it to everyone: the check is the next two), a caller running at `Priority::Driver`
//! and created as the administrator (user 1), and no other live holder (`Busy`); a holder
//! that ended is replaced. Devices and their holders live on core 0 for now: a claim from
//! another core is `NotSupported`. Every other call on a device is `Denied` unless the
//! caller holds it.
//!
//! **Configuration space** (`DEV_CONFIG`): offsets 0..256 of the held function only,
//! naturally aligned; writes to the BAR registers (0x10..0x28) and the expansion ROM
//! (0x30) are `Denied` (a driver could otherwise move a window over RAM), and so are
//! writes to the MSI-X and MSI capabilities (a message's address and data are the
//! kernel's; plain MSI is not used).
//!
//! **BARs** (`DEV_MAP_BAR`): a memory BAR is mapped uncached (PCD|PWT), writable, not
//! executable, at the page-aligned user address given; the mapping holds no RAM and goes
//! when the process does. An I/O BAR, an empty one or one of another device: `InvalidArgument`
//! / `Denied`; the BAR holding the function's MSI-X table or pending bits: `Denied`.
//!
//! **DMA memory** (`DMA_ALLOC`): physically contiguous frames of the caller's core, zeroed,
//! mapped writable at the given address, whose physical address is the answer. They are the
//! process's own pages (charged to its user like heap pages), so they stay pinned while
//! mapped and are freed by `DMA_FREE` or when the process ends. Holding a device is needed.
//!
//! **Interrupts** (`DEV_IRQ`): the device's interrupt arrives as a one-way message with label
//! [`IRQ_LABEL`] and `words[0]` = the device's packed bus/device/function on the endpoint
//! given (the caller's own); it is then masked until `DEV_IRQ_ACK`, and no second message
//! comes before it. A function with MSI-X interrupts by MSI-X (the answer is 1; for the
//! first 32 functions enumerated, whose table lies below 4 GiB): the kernel
//! points entry 0 of its table at a vector of core 0 of its own and masks that entry while
//! a message waits for its acknowledgement; the driver points its device's interrupt
//! sources at entry 0 (virtio: `queue_msix_vector` = 0, `drvlib::msix`). Otherwise (no
//! MSI-X, or the boot said `pci.irq=line`) it comes by its IOAPIC line (the answer is 0),
//! masked at the IOAPIC the same way. A line several functions share goes to each of
//! their live holders and is unmasked once all have acknowledged; a holder that ended is
//! unrouted (its interrupt stays masked unless a live holder shares the line).
//!
//! **No moving.** A process holding a device, DMA memory or a BAR mapping never migrates:
//! `MIGRATE` of it is `Denied` (its DMA pages copied to new frames would leave the device
//! writing the old ones; its BAR mappings and its device stay on core 0).

use bytemuck::{Pod, Zeroable};

/// `DEV_CONFIG`'s width flag: write `value` instead of reading.
pub const CONFIG_WRITE: u64 = 1 << 8;
/// Most pages one `DMA_ALLOC` maps (1 MiB).
pub const DMA_MAX_PAGES: u64 = 256;
/// The label of an interrupt message.
pub const IRQ_LABEL: u64 = 0xd1_0000;
/// Most functions `DEV_LIST` reports.
pub const MAX_FUNCTIONS: usize = 256;

/// One BAR as `DEV_LIST` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct BarInfo {
    /// Physical address or port; 0 when unused.
    pub base: u64,
    /// Bytes; 0 when unused.
    pub size: u64,
    /// Bit 0: I/O; bit 1: prefetchable; bit 2: 64-bit (the next slot is its upper half).
    pub flags: u64,
}

/// One PCI function as `DEV_LIST` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct PciInfo {
    /// Its device resource.
    pub id: crate::res::ResId,
    /// `bus << 8 | device << 3 | function`.
    pub bdf: u16,
    pub vendor: u16,
    pub device: u16,
    /// Interrupt line (legacy IRQ, 0xff none) and pin (1 = INTA, 0 none).
    pub irq_line: u8,
    pub irq_pin: u8,
    /// Class, subclass, prog-if (`class << 16 | sub << 8 | progif`).
    pub class: u32,
    /// Pid of the holding driver (0: none).
    pub holder: u32,
    pub bars: [BarInfo; 6],
    /// Entries of its MSI-X table (0: no MSI-X), and the BAR holding it (0xff: none; a
    /// driver may not map that BAR).
    pub msix_entries: u16,
    pub msix_bar: u8,
    /// 1 while its interrupt is set to come by MSI-X (from its holder's `DEV_IRQ` on, kept
    /// masked when the holder stops or ends), 0 by its line.
    pub irq_msix: u8,
    /// The BAR holding its MSI-X pending bits (0xff: none; not mapped for drivers either).
    pub msix_pba_bar: u8,
    pub reserved: [u8; 3],
}

impl PciInfo {
    pub fn bus(&self) -> u8 {
        (self.bdf >> 8) as u8
    }
    pub fn dev(&self) -> u8 {
        ((self.bdf >> 3) & 0x1f) as u8
    }
    pub fn func(&self) -> u8 {
        (self.bdf & 7) as u8
    }
}

/// The resource name's NAME part for a function: `BB.DD.F` (7 bytes, in `out`).
pub fn name_of(bdf: u16, out: &mut [u8; 7]) -> &str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let (bus, dev, func) = (bdf >> 8, (bdf >> 3) & 0x1f, bdf & 7);
    *out = [
        HEX[usize::from(bus >> 4)],
        HEX[usize::from(bus & 15)],
        b'.',
        HEX[usize::from(dev >> 4)],
        HEX[usize::from(dev & 15)],
        b'.',
        HEX[usize::from(func)],
    ];
    core::str::from_utf8(out).unwrap_or("?")
}

/// A short name for well-known classes (for `pci` and `res ls`).
pub fn class_name(class: u32) -> &'static str {
    match class >> 8 {
        0x0100 => "scsi",
        0x0101 => "ide",
        0x0106 => "sata",
        0x0200 => "ethernet",
        0x0300 => "vga",
        0x0600 => "host-bridge",
        0x0601 => "isa-bridge",
        0x0680 => "bridge",
        0x0c03 => "usb",
        _ => match class >> 16 {
            0x01 => "storage",
            0x02 => "network",
            0x03 => "display",
            0x06 => "bridge",
            _ => "other",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bus_device_function() {
        let mut buf = [0u8; 7];
        assert_eq!(name_of(3 << 3, &mut buf), "00.03.0");
        assert_eq!(name_of(0xff << 8 | 0x1f << 3 | 7, &mut buf), "ff.1f.7");
        assert!(crate::res::ResName::parse("c0/device/00.03.0").is_ok());
    }

    #[test]
    fn records_have_no_padding() {
        // Pod already refuses padding; the size is the ABI.
        assert_eq!(core::mem::size_of::<BarInfo>(), 24);
        assert_eq!(core::mem::size_of::<PciInfo>(), 176);
        assert_eq!(class_name(0x020000), "ethernet");
        assert_eq!(class_name(0x028000), "network");
    }
}
