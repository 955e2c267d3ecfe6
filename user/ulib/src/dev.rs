//! Typed wrappers for the device calls of user-mode drivers (`DEV_LIST`..`DEV_IRQ_ACK`,
//! abi/src/dev.rs): list PCI functions, hold one, reach its configuration space, map its
//! BARs, get DMA memory and its interrupt.

use crate::sys::{decode, raw};
use abi::dev::PciInfo;
use abi::res::ResId;
use abi::syscall as nr;
use abi::Error;
use alloc::vec::Vec;
use bytemuck::Zeroable;

/// Every PCI function the kernel found.
pub fn list() -> Result<Vec<PciInfo>, Error> {
    let mut buf = alloc::vec![PciInfo::zeroed(); abi::dev::MAX_FUNCTIONS];
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    let n =
        decode(unsafe { raw::syscall2(nr::DEV_LIST, buf.as_mut_ptr() as u64, buf.len() as u64) })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// The first function with `vendor` and `device` ids.
pub fn find(vendor: u16, device: u16) -> Result<PciInfo, Error> {
    list()?
        .into_iter()
        .find(|f| f.vendor == vendor && f.device == device)
        .ok_or(Error::NoSuchResource)
}

/// Hold device `dev` (driver priority, created by the administrator).
pub fn claim(dev: ResId) -> Result<(), Error> {
    // SAFETY: numbers only.
    decode(unsafe { raw::syscall1(nr::DEV_CLAIM, dev.0) }).map(drop)
}

/// Read `width` (1, 2, 4) bytes of the held device's configuration space at `offset`.
pub fn config_read(dev: ResId, offset: u16, width: u8) -> Result<u32, Error> {
    // SAFETY: numbers only.
    decode(unsafe {
        raw::syscall4(
            nr::DEV_CONFIG,
            dev.0,
            u64::from(offset),
            u64::from(width),
            0,
        )
    })
    .map(|v| v as u32)
}

/// Write `width` bytes of the held device's configuration space at `offset`.
pub fn config_write(dev: ResId, offset: u16, width: u8, value: u32) -> Result<(), Error> {
    let w = u64::from(width) | abi::dev::CONFIG_WRITE;
    // SAFETY: numbers only.
    decode(unsafe {
        raw::syscall4(
            nr::DEV_CONFIG,
            dev.0,
            u64::from(offset),
            w,
            u64::from(value),
        )
    })
    .map(drop)
}

/// Map memory BAR `bar` of the held device uncached at `addr`; the bytes mapped.
pub fn map_bar(dev: ResId, bar: u8, addr: u64) -> Result<u64, Error> {
    // SAFETY: the kernel maps only where nothing is mapped yet; numbers only.
    decode(unsafe { raw::syscall3(nr::DEV_MAP_BAR, dev.0, u64::from(bar), addr) })
}

/// `pages` physically contiguous zeroed pages at `addr`; their physical address.
pub fn dma_alloc(addr: u64, pages: u64) -> Result<u64, Error> {
    // SAFETY: the kernel maps only where nothing is mapped yet; numbers only.
    decode(unsafe { raw::syscall2(nr::DMA_ALLOC, addr, pages) })
}

/// Give back a [`dma_alloc`] of `pages` at `addr`.
pub fn dma_free(addr: u64, pages: u64) -> Result<(), Error> {
    // SAFETY: the caller no longer uses the pages (they fault afterwards).
    decode(unsafe { raw::syscall2(nr::DMA_FREE, addr, pages) }).map(drop)
}

/// The held function's capabilities (PCI Local Bus 3.0, 6.7): (id, configuration offset)
/// in list order; at most 48 (a malformed list that loops ends there).
pub fn capabilities(dev: ResId) -> Result<Vec<(u8, u16)>, Error> {
    const HAS_CAPABILITIES: u32 = 1 << 4;
    let mut caps = Vec::new();
    if config_read(dev, 6, 2)? & HAS_CAPABILITIES == 0 {
        return Ok(caps);
    }
    let mut at = config_read(dev, 0x34, 1)? & 0xfc;
    while at >= 0x40 && caps.len() < 48 {
        let off = at as u16;
        caps.push((config_read(dev, off, 1)? as u8, off));
        at = config_read(dev, off + 1, 1)? & 0xfc;
    }
    Ok(caps)
}

/// Deliver the held device's interrupt to `endpoint` (the caller's; `None`: stop).
pub fn irq(dev: ResId, endpoint: Option<ResId>) -> Result<IrqBy, Error> {
    let ep = endpoint.map_or(0, |e| e.0);
    // SAFETY: numbers only.
    decode(unsafe { raw::syscall2(nr::DEV_IRQ, dev.0, ep) }).map(|v| {
        if v == 1 {
            IrqBy::Msix
        } else {
            IrqBy::Line
        }
    })
}

/// How a device's interrupt comes to its driver ([`irq`]'s answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqBy {
    /// Its IOAPIC line (also the answer when it was turned off).
    Line,
    /// MSI-X, entry 0 of its table: the driver points its device's interrupts there
    /// (virtio: `drvlib::msix`).
    Msix,
}

/// The interrupt was served: unmask the line (or the MSI-X entry).
pub fn irq_ack(dev: ResId) -> Result<(), Error> {
    // SAFETY: numbers only.
    decode(unsafe { raw::syscall1(nr::DEV_IRQ_ACK, dev.0) }).map(drop)
}
