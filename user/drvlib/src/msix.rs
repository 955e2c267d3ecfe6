//! [`msix`]: a virtio device's interrupts by MSI-X.
//!
//! When the kernel delivers a held function's interrupt by MSI-X (`ulib::dev::irq` answers
//! `IrqBy::Msix`; the kernel programs entry 0 of the table and masks it until
//! `DEV_IRQ_ACK`), the device must be told which entry each queue signals: virtio 1.1,
//! 4.1.4.3, `queue_msix_vector` in the common configuration, which `virtio-drivers` 0.13
//! never writes (its queues stay at `NO_VECTOR`, so with MSI-X on they would never
//! interrupt). This finds the common configuration through the function's virtio
//! capabilities (4.1.4) and writes entry 0 for every queue that should interrupt, and
//! `NO_VECTOR` for the quiet ones and for configuration changes (nothing here waits for
//! those).
//!
//! The vectors are written once the crate has set the device up and it runs (virtio asks
//! for them before each queue is enabled; QEMU takes them any time): what the device
//! signalled between `DEV_IRQ` and here raised no message: `netdrv` looks at its receive
//! queue on a timeout as well, and `blkdrv` has nothing in flight before it serves.

use super::STATE;
use ulib::abi::res::ResId;
use ulib::abi::Error;
use ulib::dev::{capabilities, config_read, IrqBy};

/// A vendor-specific capability (virtio's), and its type for the common configuration.
const CAP_VENDOR: u8 = 0x09;
const COMMON_CFG: u32 = 1;
/// Offsets in the common configuration (virtio 1.1, 4.1.4.3).
const MSIX_CONFIG: u64 = 16;
const NUM_QUEUES: u64 = 18;
const QUEUE_SELECT: u64 = 22;
const QUEUE_MSIX_VECTOR: u64 = 26;
/// "No vector".
const NO_VECTOR: u16 = 0xffff;

/// Where the held function `id`'s virtio common configuration is mapped, from its
/// capability list.
fn common_cfg(id: ResId) -> Result<u64, Error> {
    for (cap, off) in capabilities(id)? {
        if cap == CAP_VENDOR && config_read(id, off + 3, 1)? == COMMON_CFG {
            let bar = config_read(id, off + 4, 1)? as usize;
            let offset = u64::from(config_read(id, off + 8, 4)?);
            let mapped = STATE.with(|s| s.bars.get(bar).copied().flatten());
            let m = mapped.ok_or(Error::NotSupported)?;
            if offset + 32 > m.size {
                return Err(Error::InvalidArgument);
            }
            return Ok(m.at + offset);
        }
    }
    Err(Error::NotSupported)
}

/// With `by` (what `DEV_IRQ` answered) MSI-X: point every queue of the held virtio
/// function `id` at MSI-X entry 0, but the queues in `quiet` (bit `i`: queue `i`), which
/// get no vector (they never interrupt). Nothing to do for a line. `NoMemory` if the
/// device refused the vector (it answers `NO_VECTOR`).
pub fn msix(id: ResId, by: IrqBy, quiet: u32) -> Result<(), Error> {
    if by != IrqBy::Msix {
        return Ok(());
    }
    let cfg = common_cfg(id)?;
    let reg = |off: u64| (cfg + off) as *mut u16;
    // SAFETY: `cfg` is the device's common configuration inside its BAR, mapped uncached by
    // the kernel for this driver (`Held::claim`), at least 32 bytes (checked); 16-bit
    // registers, written and read whole. The driver is single-threaded, and the crate
    // uses `queue_select` only while setting queues up, which is over.
    unsafe {
        core::ptr::write_volatile(reg(MSIX_CONFIG), NO_VECTOR);
        let queues = core::ptr::read_volatile(reg(NUM_QUEUES)).min(32);
        for q in 0..queues {
            core::ptr::write_volatile(reg(QUEUE_SELECT), q);
            let vector = if quiet & (1 << q) != 0 { NO_VECTOR } else { 0 };
            core::ptr::write_volatile(reg(QUEUE_MSIX_VECTOR), vector);
            if core::ptr::read_volatile(reg(QUEUE_MSIX_VECTOR)) != vector {
                return Err(Error::NoMemory);
            }
        }
    }
    Ok(())
}
