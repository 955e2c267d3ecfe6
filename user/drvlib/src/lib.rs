//! `drvlib`: what every Musubi user-mode driver needs between the kernel's device calls
//! (`ulib::dev`, abi/src/dev.rs) and the `virtio-drivers` crate (0.13, pinned):
//!
//! - [`Held`]: claim a PCI function by ids and map its memory BARs (uncached, by the kernel)
//!   at fixed addresses of the driver's own address space;
//! - [`KernelCam`]: a `ConfigurationAccess` that reaches the held function's configuration
//!   space through `DEV_CONFIG`. The kernel refuses writes to the BAR registers (a driver
//!   may not move a window), so the crate's BAR sizing (write all ones, read, restore) is
//!   answered here from the BARs the kernel found at boot, without touching the device;
//! - [`Hal`]: `virtio_drivers::Hal` over `DMA_ALLOC`/`DMA_FREE`. The crate allocates its
//!   own packet buffers on the heap and `share`s them; heap pages have no physical address
//!   a program may know, so `share` copies through a bounce page of DMA memory (reused from
//!   a free list) and `unshare` copies back what the device wrote;
//! - [`Quiet`]: a transport wrapper under which chosen queues ask for no interrupts
//!   (`quiet.rs`: virtio-net's transmit queue, whose completions its driver waits for);
//! - [`msix`]: point a virtio device's queues at MSI-X entry 0, when the kernel delivers
//!   its interrupt by MSI-X (the crate leaves every vector unset).
//!
//! A driver is single-threaded; the state here is program-wide (`ulib::cell::Local`),
//! because the crate's `Hal` has only associated functions.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use core::ptr::NonNull;
use ulib::abi::dev::PciInfo;
use ulib::abi::res::ResId;
use ulib::abi::Error;
use ulib::cell::Local;
use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction, PciRoot};
use virtio_drivers::{BufferDirection, PhysAddr};

pub use virtio_drivers;

mod msix;
mod quiet;
pub use msix::msix;
pub use quiet::{Quiet, EVENT_IDX};

/// Where BAR `i` of the held device is mapped: `BAR_WINDOW + i * BAR_STRIDE`.
pub const BAR_WINDOW: u64 = 0x0000_5000_0000_0000;
const BAR_STRIDE: u64 = 1 << 32;
/// Where DMA memory is mapped (addresses are never reused: the window is 1 TiB).
pub const DMA_WINDOW: u64 = 0x0000_5100_0000_0000;
const PAGE: u64 = 4096;

/// A mapped memory BAR: physical base, size, where it is mapped.
#[derive(Clone, Copy)]
struct Mapped {
    phys: u64,
    size: u64,
    at: u64,
}

/// The driver's device state the `Hal` functions reach.
struct State {
    bars: [Option<Mapped>; 6],
    next_dma: u64,
    /// DMA allocations: physical address, where mapped, pages.
    dma: Vec<(u64, u64, u64)>,
    /// Bounce pages free for reuse: (physical address, where mapped).
    bounce_free: Vec<(u64, u64)>,
    /// Bounce pages in use: physical address, where mapped, pages.
    bounce_used: Vec<(u64, u64, u64)>,
}

static STATE: Local<State> = Local::new(State {
    bars: [None; 6],
    next_dma: DMA_WINDOW,
    dma: Vec::new(),
    bounce_free: Vec::new(),
    bounce_used: Vec::new(),
});

/// A PCI function this process holds, its memory BARs mapped.
pub struct Held {
    pub info: PciInfo,
}

impl Held {
    /// Claim the first function with `vendor:device` and map its memory BARs.
    pub fn claim(vendor: u16, device: u16) -> Result<Held, Error> {
        let info = ulib::dev::find(vendor, device)?;
        ulib::dev::claim(info.id)?;
        for (i, b) in info.bars.iter().enumerate() {
            // The BARs of the MSI-X table and pending bits are the kernel's (`DEV_MAP_BAR`
            // is `Denied`).
            let msix = [info.msix_bar, info.msix_pba_bar].contains(&(i as u8));
            if b.size == 0 || b.flags & 1 != 0 || msix {
                continue;
            }
            let at = BAR_WINDOW + i as u64 * BAR_STRIDE;
            // Mapped already by an earlier claim of this process (a reset): keep it.
            match ulib::dev::map_bar(info.id, i as u8, at) {
                Ok(_) | Err(Error::Busy) => {}
                Err(e) => return Err(e),
            }
            STATE.with(|s| {
                s.bars[i] = Some(Mapped {
                    phys: b.base,
                    size: b.size,
                    at,
                })
            });
        }
        Ok(Held { info })
    }

    /// Its resource id.
    pub fn id(&self) -> ResId {
        self.info.id
    }

    /// Its address for `virtio_drivers`.
    pub fn function(&self) -> DeviceFunction {
        DeviceFunction {
            bus: self.info.bus(),
            device: self.info.dev(),
            function: self.info.func(),
        }
    }

    /// A PCI root over the kernel-mediated configuration space of this function.
    pub fn root(&self) -> PciRoot<KernelCam> {
        PciRoot::new(KernelCam {
            id: self.info.id,
            function: self.function(),
            bars: self.info.bars,
            sizing: [false; 6],
        })
    }
}

/// `ConfigurationAccess` through `DEV_CONFIG`, for the held function only (another
/// function reads as absent, all ones). BAR registers are answered from the kernel's
/// enumeration (see the module documentation).
pub struct KernelCam {
    id: ResId,
    function: DeviceFunction,
    bars: [ulib::abi::dev::BarInfo; 6],
    /// BAR slots written all ones (a sizing probe) and not yet restored.
    sizing: [bool; 6],
}

impl KernelCam {
    fn bar_slot(offset: u8) -> Option<usize> {
        (0x10..0x28)
            .contains(&offset)
            .then(|| usize::from(offset - 0x10) / 4)
    }

    /// What a sizing probe of slot `i` reads: the size mask with the type bits of `real`.
    fn probe(&self, i: usize, real: u32) -> u32 {
        let b = &self.bars[i];
        if b.size != 0 {
            let mask = !(b.size - 1);
            return if b.flags & 1 != 0 {
                (mask as u32 & !3) | (real & 3)
            } else {
                (mask as u32 & !0xf) | (real & 0xf)
            };
        }
        // The upper half of a 64-bit BAR in the slot before.
        if i > 0 {
            let low = &self.bars[i - 1];
            if low.size != 0 && low.flags & 1 == 0 {
                let low_real = self.raw(0x10 + 4 * (i as u8 - 1));
                if low_real & 0b110 == 0b100 {
                    return (!(low.size - 1) >> 32) as u32;
                }
            }
        }
        0
    }

    fn raw(&self, offset: u8) -> u32 {
        ulib::dev::config_read(self.id, u16::from(offset), 4).unwrap_or(u32::MAX)
    }
}

impl ConfigurationAccess for KernelCam {
    fn read_word(&self, f: DeviceFunction, offset: u8) -> u32 {
        if f != self.function {
            return u32::MAX;
        }
        let real = self.raw(offset & !3);
        match Self::bar_slot(offset) {
            Some(i) if self.sizing[i] => self.probe(i, real),
            _ => real,
        }
    }

    fn write_word(&mut self, f: DeviceFunction, offset: u8, data: u32) {
        if f != self.function {
            return;
        }
        match Self::bar_slot(offset) {
            // Never written: a probe is remembered, anything else ends it.
            Some(i) => self.sizing[i] = data == u32::MAX,
            None => {
                let _ = ulib::dev::config_write(self.id, u16::from(offset & !3), 4, data);
            }
        }
    }

    unsafe fn unsafe_clone(&self) -> Self {
        KernelCam {
            id: self.id,
            function: self.function,
            bars: self.bars,
            sizing: self.sizing,
        }
    }
}

/// DMA memory of `pages` pages: (physical, where mapped).
fn dma_pages(pages: u64) -> Result<(u64, u64), Error> {
    let at = STATE.with(|s| {
        let at = s.next_dma;
        // A guard page between allocations.
        s.next_dma += (pages + 1) * PAGE;
        at
    });
    let phys = ulib::dev::dma_alloc(at, pages)?;
    Ok((phys, at))
}

/// Where the `len` bytes of DMA memory at physical `paddr` are mapped, if inside one
/// allocation of [`Hal::dma_alloc`] still held.
pub fn dma_virt(paddr: u64, len: u64) -> Option<u64> {
    STATE.with(|s| {
        s.dma.iter().find_map(|&(phys, at, pages)| {
            let end = paddr.checked_add(len)?;
            (paddr >= phys && end <= phys + pages * PAGE).then(|| at + (paddr - phys))
        })
    })
}

/// The `virtio_drivers::Hal` of Musubi's user-mode drivers.
pub struct Hal;

// SAFETY: `dma_alloc` returns zeroed, page-aligned memory mapped only here (the kernel maps
// fresh frames at an address of the DMA window used once); `mmio_phys_to_virt` answers
// only inside a BAR the kernel mapped for this process; `share` returns the physical
// address of a bounce page holding the buffer's bytes, which stays allocated until
// `unshare`.
unsafe impl virtio_drivers::Hal for Hal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let pages = pages as u64;
        let (phys, at) = dma_pages(pages).expect("drvlib: DMA memory");
        STATE.with(|s| s.dma.push((phys, at, pages)));
        (
            phys,
            NonNull::new(at as *mut u8).expect("DMA window is not null"),
        )
    }

    unsafe fn dma_dealloc(paddr: PhysAddr, _vaddr: NonNull<u8>, pages: usize) -> i32 {
        let found = STATE.with(|s| {
            let i = s.dma.iter().position(|d| d.0 == paddr)?;
            Some(s.dma.swap_remove(i))
        });
        match found {
            Some((_, at, n)) if n == pages as u64 => match ulib::dev::dma_free(at, n) {
                Ok(()) => 0,
                Err(_) => -1,
            },
            _ => -1,
        }
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, size: usize) -> NonNull<u8> {
        let at = STATE.with(|s| {
            s.bars.iter().flatten().find_map(|m| {
                let end = paddr.checked_add(size as u64)?;
                (paddr >= m.phys && end <= m.phys + m.size).then(|| m.at + (paddr - m.phys))
            })
        });
        NonNull::new(at.expect("drvlib: MMIO outside the held device's BARs") as *mut u8)
            .expect("BAR window is not null")
    }

    unsafe fn share(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
        let len = buffer.len() as u64;
        let pages = len.div_ceil(PAGE).max(1);
        let reuse = if pages == 1 {
            STATE.with(|s| s.bounce_free.pop())
        } else {
            None
        };
        let (phys, at) = match reuse {
            Some(p) => p,
            None => dma_pages(pages).expect("drvlib: bounce memory"),
        };
        if direction != BufferDirection::DeviceToDriver {
            // SAFETY: the caller's buffer is valid for `len` bytes; the bounce page(s) at
            // `at` are ours, mapped, and at least `len` bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    buffer.as_ptr() as *const u8,
                    at as *mut u8,
                    len as usize,
                )
            };
        }
        STATE.with(|s| s.bounce_used.push((phys, at, pages)));
        phys
    }

    unsafe fn unshare(paddr: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
        let Some((phys, at, pages)) = STATE.with(|s| {
            let i = s.bounce_used.iter().position(|b| b.0 == paddr)?;
            Some(s.bounce_used.swap_remove(i))
        }) else {
            return;
        };
        if direction != BufferDirection::DriverToDevice {
            // SAFETY: as in `share`, the other way round.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    at as *const u8,
                    buffer.as_ptr() as *mut u8,
                    buffer.len(),
                )
            };
        }
        if pages == 1 {
            STATE.with(|s| s.bounce_free.push((phys, at)));
        } else {
            let _ = ulib::dev::dma_free(at, pages);
        }
    }
}
