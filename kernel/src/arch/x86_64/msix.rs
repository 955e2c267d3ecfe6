//! MSI-X for user-mode drivers (PCI Local Bus 3.0, 6.8.2): a function that has the
//! capability signals its interrupt by a memory write to core 0's local APIC instead of a
//! shared, level-triggered IOAPIC line. The kernel uses entry 0 of the function's table
//! only, one vector per function ([`VEC_MSI_BASE`] + the function's device index), and
//! masks that entry while the driver has not acknowledged its last message, as it masks a
//! line (`res/device.rs`). The driver points its device's queues at entry 0 (virtio:
//! `queue_msix_vector`, `drvlib::msix`).
//!
//! Why here: the table is device memory in one of the function's BARs, which the kernel
//! reaches through its direct map (uncached below 4 GiB, where the firmware puts 32-bit
//! BARs); a table elsewhere is not used (the function stays on its line). The BAR that
//! holds the table is never mapped for the driver (`DEV_MAP_BAR` is `Denied`), nor may it
//! write the capability in configuration space: the address and data of the message stay
//! the kernel's.

use super::paging::{phys_to_virt, LOW_DIRECT_MAP};
use super::pci::{self, Function};

/// First vector of MSI-X messages; the function with device index `i` arrives at
/// `VEC_MSI_BASE + i`.
pub const VEC_MSI_BASE: u64 = 0x70;
/// Functions that can have a vector (device indices `0..VECTORS`); the others use their
/// line.
pub const VECTORS: u32 = 32;

/// Message control: MSI-X enable, and function mask.
const ENABLE: u32 = 1 << 15;
const FUNCTION_MASK: u32 = 1 << 14;
/// An entry's vector-control word: masked.
const ENTRY_MASKED: u32 = 1;
/// The local APICs' message address (Intel SDM vol. 3, 11.11.1), destination in bits 12..20.
const APIC_MESSAGE: u32 = 0xfee0_0000;

/// Bytes of one table entry: message address (low, high), data, vector control.
const ENTRY: u64 = 16;

/// Where `f`'s table entry `i` is in the direct map: `None` without MSI-X, beyond its
/// entries, or if the entry is not inside a memory BAR below 4 GiB.
fn entry(f: &Function, i: u16) -> Option<u64> {
    let m = f.msix.filter(|m| i < m.entries)?;
    let bar = f.bars.get(usize::from(m.table_bar))?;
    let phys = bar
        .base
        .checked_add(u64::from(m.table_offset) + u64::from(i) * ENTRY)?;
    let fits = !bar.io && bar.base != 0 && phys + ENTRY <= bar.base + bar.size;
    (fits && phys + ENTRY <= LOW_DIRECT_MAP).then(|| phys_to_virt(phys))
}

/// Can `f`'s interrupt come by MSI-X?
pub fn usable(f: &Function) -> bool {
    entry(f, 0).is_some()
}

/// Does BAR `bar` of `f` hold its MSI-X table or pending-bit array (so a driver may not
/// map it: it could rewrite where the messages go)?
pub fn holds_table(f: &Function, bar: u8) -> bool {
    f.msix
        .is_some_and(|m| m.table_bar == bar || m.pba_bar == bar)
}

/// Is configuration offset `offset` (for `width` bytes) inside `f`'s MSI-X capability?
pub fn in_capability(f: &Function, offset: u16, width: u16) -> bool {
    f.msix
        .is_some_and(|m| offset < m.cap + 12 && m.cap < offset + width)
}

fn write_entry(e: u64, word: u64, value: u32) {
    // SAFETY: `e` is an entry of the function's MSI-X table, device memory mapped
    // uncached in the direct map (`entry`); its four 32-bit words are written whole.
    unsafe { core::ptr::write_volatile((e + 4 * word) as *mut u32, value) };
}

fn read_entry(e: u64, word: u64) -> u32 {
    // SAFETY: as in `write_entry`, a whole 32-bit word read.
    unsafe { core::ptr::read_volatile((e + 4 * word) as *const u32) }
}

/// Mask or unmask entry `e`, keeping the vector-control word's other bits (reserved, or a
/// steering tag).
fn mask_entry(e: u64, masked: bool) {
    let control = read_entry(e, 3) & !ENTRY_MASKED;
    write_entry(e, 3, control | if masked { ENTRY_MASKED } else { 0 });
}

/// Point `f`'s entry 0 at `vector` of the local APIC `apic_id`, masked, mask every other
/// entry (a driver may point its device at any, and none but entry 0 is the kernel's),
/// and turn MSI-X on for the function (its line is then silent). `false` if `f` cannot.
pub fn enable(f: &Function, vector: u8, apic_id: u32) -> bool {
    let (Some(e), Some(m)) = (entry(f, 0), f.msix) else {
        return false;
    };
    for i in 0..m.entries {
        if let Some(other) = entry(f, i) {
            mask_entry(other, true);
        }
    }
    write_entry(e, 0, APIC_MESSAGE | (apic_id & 0xff) << 12);
    write_entry(e, 1, 0);
    write_entry(e, 2, u32::from(vector));
    let control = pci::read(f.bdf, m.cap + 2, 2);
    pci::write(f.bdf, m.cap + 2, 2, (control | ENABLE) & !FUNCTION_MASK);
    true
}

/// Mask or unmask `f`'s entry 0 (a message the device raises while masked is kept pending
/// and sent at the unmask).
pub fn set_masked(f: &Function, masked: bool) {
    if let Some(e) = entry(f, 0) {
        mask_entry(e, masked);
    }
}

/// Is `f`'s entry 0 masked now (the device's own word; `None` without a usable table)?
pub fn is_masked(f: &Function) -> Option<bool> {
    let e = entry(f, 0)?;
    Some(read_entry(e, 3) & ENTRY_MASKED != 0)
}

/// Mask entry 0 and turn MSI-X off for `f` (its line is its interrupt again).
pub fn disable(f: &Function) {
    if let Some(m) = f.msix.filter(|_| usable(f)) {
        set_masked(f, true);
        let control = pci::read(f.bdf, m.cap + 2, 2);
        pci::write(f.bdf, m.cap + 2, 2, control & !ENABLE);
    }
}
