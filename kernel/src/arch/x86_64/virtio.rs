//! Stopping a virtio function the kernel does not drive: a device reset (virtio 1.x,
//! 2.4), written to its common configuration's `device_status`.
//!
//! Why the kernel touches a user-mode driver's device at all: a driver that ends without
//! resetting its device (killed, faulted) leaves the device pointed at rings and buffers
//! in the driver's DMA memory, and those frames go back to the pool with the rest of the
//! process. A device still using them would write into their next owner's memory (a
//! received frame, a completion). A reset makes the device forget its queues: once
//! `device_status` reads 0 again it no longer reads or writes them (2.4.1), and the next
//! driver sets it up from scratch, as drivers do. Turning bus mastering off instead was
//! tried: each change of the bit changes QEMU's memory map, and under a loaded host QEMU
//! once stopped on its own assertion while a killed driver's device was in use.
//!
//! Why here: the common configuration is device memory in one of the function's BARs,
//! which the kernel reaches through its direct map (uncached below 4 GiB), as the MSI-X
//! table (`msix.rs`); where it was is read at boot from the function's capability, which
//! a driver cannot move (its BARs cannot be written).

use super::paging::{phys_to_virt, LOW_DIRECT_MAP};
use super::pci::{self, Function};

/// Offset of `device_status` (one byte) in `struct virtio_pci_common_cfg` (4.1.4.3).
const DEVICE_STATUS: u64 = 20;
/// PCI command register: memory space decoding on.
const MEMORY_SPACE: u32 = 1 << 1;

/// How a reset went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// `device_status` reads 0: the device has let go of its queues.
    Done,
    /// Not a virtio function with a common configuration the kernel can reach (in a
    /// memory BAR below 4 GiB, where the direct map has device memory uncached).
    NotVirtio,
    /// Its memory decoding is off (a driver turned it off): nothing can be written.
    Unreachable,
    /// Written, but `device_status` did not read 0 (after `READS` reads).
    NotAcknowledged,
}

/// Reads of `device_status` a reset waits for 0 (QEMU resets at the write; a slower device
/// gets this many, then counts as not reset).
const READS: u32 = 10_000;

/// Where `f`'s `device_status` is in the direct map, if the kernel can reach it now.
fn status_at(f: &Function) -> Result<u64, Reset> {
    let (bar, offset) = f.virtio_common.ok_or(Reset::NotVirtio)?;
    let b = f.bars.get(usize::from(bar)).ok_or(Reset::NotVirtio)?;
    let phys = b
        .base
        .checked_add(u64::from(offset) + DEVICE_STATUS)
        .ok_or(Reset::NotVirtio)?;
    let fits = !b.io && b.base != 0 && phys < b.base + b.size;
    if !fits || phys >= LOW_DIRECT_MAP {
        return Err(Reset::NotVirtio);
    }
    if pci::read(f.bdf, 4, 2) & MEMORY_SPACE == 0 {
        return Err(Reset::Unreachable);
    }
    Ok(phys_to_virt(phys))
}

/// Read `device_status` at `at` (from [`status_at`]).
fn read_status(at: u64) -> u8 {
    // SAFETY: `at` is the `device_status` byte of a function's common configuration,
    // device memory inside one of its memory BARs, mapped uncached in the direct map
    // (`status_at`); a one-byte read is the register's width.
    unsafe { core::ptr::read_volatile(at as *const u8) }
}

/// Reset virtio function `f` (its driver is gone): write 0 to `device_status` and wait
/// until it reads 0. Anything but [`Reset::Done`] leaves the device as it was, and the
/// caller keeps the driver's DMA memory out of the pool (`device::holder_ended`).
pub fn reset(f: &Function) -> Reset {
    let at = match status_at(f) {
        Ok(at) => at,
        Err(r) => return r,
    };
    // SAFETY: as in `read_status`, a one-byte write of the register.
    unsafe { core::ptr::write_volatile(at as *mut u8, 0) };
    for _ in 0..READS {
        if read_status(at) == 0 {
            return Reset::Done;
        }
        core::hint::spin_loop();
    }
    Reset::NotAcknowledged
}

/// `f`'s `device_status` now (`None`: not a virtio function the kernel can reach).
pub fn status(f: &Function) -> Option<u8> {
    status_at(f).ok().map(read_status)
}
