//! PCI configuration space through the legacy ports (`0xCF8` address, `0xCFC` data): the
//! one way the default QEMU `pc` machine offers, and all the kernel needs, because it keeps
//! no drivers (DESIGN.md section 8). It only enumerates functions once at boot (ids,
//! class, BARs sized, interrupt line) and, for a user-mode driver holding a device
//! (`res/device.rs`), reads and writes that function's configuration space.
//!
//! Port access is serialised by a lock: the address/data pair is one shared device.

use super::cpu::outl;
use alloc::vec::Vec;
use core::arch::asm;
use spin::{Mutex, Once};

const ADDRESS: u16 = 0xcf8;
const DATA: u16 = 0xcfc;

/// A function's address: bus, device (0..32), function (0..8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bdf {
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl Bdf {
    /// Packed as `bus << 8 | dev << 3 | func` (the usual routing id).
    pub fn packed(self) -> u16 {
        u16::from(self.bus) << 8 | u16::from(self.dev) << 3 | u16::from(self.func)
    }
}

/// One base address register as found at boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bar {
    /// Physical address (memory) or port (I/O); 0 if unused.
    pub base: u64,
    /// Size in bytes; 0 if unused.
    pub size: u64,
    /// A port-I/O BAR.
    pub io: bool,
    /// Prefetchable memory.
    pub prefetch: bool,
}

/// One PCI function.
#[derive(Clone, Copy, Debug)]
pub struct Function {
    pub bdf: Bdf,
    pub vendor: u16,
    pub device: u16,
    /// Class, subclass and programming interface (`class << 16 | sub << 8 | progif`).
    pub class: u32,
    /// Six BARs (a 64-bit BAR fills its slot; the next slot is left empty).
    pub bars: [Bar; 6],
    /// Interrupt line (the legacy IRQ the firmware routed, 0xff none) and pin (0 none).
    pub irq_line: u8,
    pub irq_pin: u8,
    /// Its MSI-X capability, if it has one (`arch::x86_64::msix`).
    pub msix: Option<Msix>,
    /// The configuration offset of its MSI capability, if it has one (not used: kept so
    /// that a driver may not write it).
    pub msi_cap: Option<u16>,
    /// Where a virtio function's common configuration is (virtio 1.x, 4.1.4.3): the BAR
    /// and the offset in it, as its capability said at boot (`arch::x86_64::virtio`).
    pub virtio_common: Option<(u8, u32)>,
}

/// A function's MSI-X capability (PCI Local Bus 3.0, 6.8.2), as found at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msix {
    /// Configuration-space offset of the capability (its 12 bytes: id, next, message
    /// control, table offset and BAR, pending-bit array offset and BAR).
    pub cap: u16,
    /// Entries in its table.
    pub entries: u16,
    /// The BAR holding the table, and the table's offset in it.
    pub table_bar: u8,
    pub table_offset: u32,
    /// The BAR holding the pending-bit array, and its offset.
    pub pba_bar: u8,
    pub pba_offset: u32,
}

/// Capability id of MSI-X.
const CAP_MSIX: u32 = 0x11;

/// Capability id of MSI.
const CAP_MSI: u32 = 0x05;

/// The configuration offset of `bdf`'s capability `id`, if its list has one (at most 48
/// hops: a malformed list that loops ends there).
fn find_cap(bdf: Bdf, id: u32) -> Option<u16> {
    find_cap_where(bdf, id, |_| true)
}

/// [`find_cap`] for the first capability `id` whose offset `pick` accepts.
fn find_cap_where(bdf: Bdf, id: u32, pick: impl Fn(u16) -> bool) -> Option<u16> {
    const HAS_CAPABILITIES: u32 = 1 << 4;
    if read(bdf, 6, 2) & HAS_CAPABILITIES == 0 {
        return None;
    }
    let mut at = read(bdf, 0x34, 1) & 0xfc;
    for _ in 0..48 {
        if at < 0x40 {
            return None;
        }
        let off = at as u16;
        if read(bdf, off, 1) == id && pick(off) {
            return Some(off);
        }
        at = read(bdf, off + 1, 1) & 0xfc;
    }
    None
}

/// Capability id of a vendor's own (virtio's structures, virtio 1.x 4.1.4).
const CAP_VENDOR: u32 = 0x09;
/// PCI vendor id of virtio functions.
pub const VENDOR_VIRTIO: u16 = 0x1af4;

/// Where a virtio function's common configuration is: the BAR and offset of its first
/// vendor capability of type 1 (`VIRTIO_PCI_CAP_COMMON_CFG`), if it has one.
fn virtio_common_of(bdf: Bdf) -> Option<(u8, u32)> {
    const COMMON_CFG: u32 = 1;
    let at = find_cap_where(bdf, CAP_VENDOR, |at| read(bdf, at + 3, 1) == COMMON_CFG)?;
    Some((read(bdf, at + 4, 1) as u8, read32(bdf, at + 8)))
}

/// The MSI-X capability of `bdf`, if it has one.
fn msix_of(bdf: Bdf) -> Option<Msix> {
    let off = find_cap(bdf, CAP_MSIX)?;
    let control = read(bdf, off + 2, 2);
    let table = read32(bdf, off + 4);
    let pba = read32(bdf, off + 8);
    Some(Msix {
        cap: off,
        entries: (control & 0x7ff) as u16 + 1,
        table_bar: (table & 7) as u8,
        table_offset: table & !7,
        pba_bar: (pba & 7) as u8,
        pba_offset: pba & !7,
    })
}

static LOCK: Mutex<()> = Mutex::new(());
static FUNCTIONS: Once<Vec<Function>> = Once::new();

fn inl(port: u16) -> u32 {
    let v: u32;
    // SAFETY: reading the PCI data port after the address was selected under `LOCK`; a
    // configuration read has no side effect on memory.
    unsafe { asm!("in eax, dx", in("dx") port, out("eax") v, options(nomem, nostack)) };
    v
}

fn select(bdf: Bdf, offset: u16) {
    let addr = 0x8000_0000u32
        | u32::from(bdf.bus) << 16
        | u32::from(bdf.dev) << 11
        | u32::from(bdf.func) << 8
        | u32::from(offset & 0xfc);
    // SAFETY: the configuration address port; only this module uses it, under `LOCK`.
    unsafe { outl(ADDRESS, addr) };
}

/// Read the aligned dword at `offset` (0..256) of `bdf`'s configuration space.
pub fn read32(bdf: Bdf, offset: u16) -> u32 {
    let _g = LOCK.lock();
    select(bdf, offset);
    inl(DATA)
}

/// Write the aligned dword at `offset` of `bdf`'s configuration space.
pub fn write32(bdf: Bdf, offset: u16, value: u32) {
    let _g = LOCK.lock();
    select(bdf, offset);
    // SAFETY: the configuration data port, address selected above under `LOCK`; which
    // function and register may be written is the caller's check (`res/device.rs`).
    unsafe { outl(DATA, value) };
}

/// Read `width` (1, 2 or 4) bytes at `offset`, naturally aligned, below 256.
pub fn read(bdf: Bdf, offset: u16, width: u8) -> u32 {
    let v = read32(bdf, offset & !3) >> ((offset & 3) * 8);
    match width {
        1 => v & 0xff,
        2 => v & 0xffff,
        _ => v,
    }
}

/// Write `width` bytes at `offset` (read-modify-write of the dword).
pub fn write(bdf: Bdf, offset: u16, width: u8, value: u32) {
    let shift = (offset & 3) * 8;
    let mask: u32 = match width {
        1 => 0xff,
        2 => 0xffff,
        _ => u32::MAX,
    };
    let old = if width == 4 {
        0
    } else {
        read32(bdf, offset & !3)
    };
    let new = (old & !(mask << shift)) | ((value & mask) << shift);
    write32(bdf, offset & !3, new);
}

/// Size one BAR slot by the all-ones probe (memory and I/O decoding are off meanwhile);
/// returns the BAR and whether it took two slots.
fn probe_bar(bdf: Bdf, i: u16) -> (Bar, bool) {
    let off = 0x10 + 4 * i;
    let orig = read32(bdf, off);
    write32(bdf, off, u32::MAX);
    let probe = read32(bdf, off);
    write32(bdf, off, orig);
    if orig & 1 == 1 {
        let size = (!(probe & !3) & 0xffff).wrapping_add(1);
        let base = u64::from(orig & !3);
        let bar = Bar {
            base,
            size: if probe == 0 { 0 } else { u64::from(size) },
            io: true,
            prefetch: false,
        };
        return (bar, false);
    }
    let wide = (orig >> 1) & 3 == 2 && i < 5;
    let mut base = u64::from(orig & !0xf);
    let mut mask = u64::from(probe & !0xf);
    if wide {
        let hi = read32(bdf, off + 4);
        write32(bdf, off + 4, u32::MAX);
        let probe_hi = read32(bdf, off + 4);
        write32(bdf, off + 4, hi);
        base |= u64::from(hi) << 32;
        mask |= u64::from(probe_hi) << 32;
    } else {
        mask |= 0xffff_ffff_0000_0000;
    }
    let size = if probe & !0xf == 0 {
        0
    } else {
        (!mask).wrapping_add(1)
    };
    let bar = Bar {
        base,
        size,
        io: false,
        prefetch: orig & 8 != 0,
    };
    (bar, wide)
}

fn function_at(bdf: Bdf) -> Option<Function> {
    let id = read32(bdf, 0);
    if id & 0xffff == 0xffff {
        return None;
    }
    let class = read32(bdf, 8) >> 8;
    let header = (read32(bdf, 0x0c) >> 16) as u8 & 0x7f;
    let mut bars = [Bar::default(); 6];
    if header == 0 {
        // Decoding off while probing, so no half-sized window answers meanwhile.
        let command = read(bdf, 4, 2);
        write(bdf, 4, 2, command & !3);
        let mut i = 0;
        while i < 6 {
            let (bar, wide) = probe_bar(bdf, i as u16);
            bars[i] = bar;
            i += if wide { 2 } else { 1 };
        }
        write(bdf, 4, 2, command);
    }
    let irq = read32(bdf, 0x3c);
    Some(Function {
        bdf,
        vendor: id as u16,
        device: (id >> 16) as u16,
        class,
        bars,
        irq_line: irq as u8,
        irq_pin: (irq >> 8) as u8,
        msix: if header == 0 { msix_of(bdf) } else { None },
        msi_cap: if header == 0 {
            find_cap(bdf, CAP_MSI)
        } else {
            None
        },
        virtio_common: if header == 0 && id as u16 == VENDOR_VIRTIO {
            virtio_common_of(bdf)
        } else {
            None
        },
    })
}

/// Enumerate every bus, device and function once (the bootstrap core, at boot).
pub fn enumerate() -> &'static [Function] {
    FUNCTIONS.call_once(|| {
        let mut out = Vec::new();
        for bus in 0..=255u8 {
            for dev in 0..32u8 {
                let first = Bdf { bus, dev, func: 0 };
                let Some(f0) = function_at(first) else {
                    continue;
                };
                let multi = (read32(first, 0x0c) >> 16) & 0x80 != 0;
                out.push(f0);
                if multi {
                    for func in 1..8u8 {
                        if let Some(f) = function_at(Bdf { bus, dev, func }) {
                            out.push(f);
                        }
                    }
                }
            }
        }
        out
    })
}

/// The functions found at boot (empty before [`enumerate`]).
pub fn functions() -> &'static [Function] {
    FUNCTIONS.get().map(|v| v.as_slice()).unwrap_or(&[])
}
