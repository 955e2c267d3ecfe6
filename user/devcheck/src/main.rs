//! `devcheck`: checks from user space what a driver process may reach through the device
//! calls (abi/src/dev.rs), against the virtio-net function QEMU gives the test boots.
//!
//! | mode | what must hold |
//! |---|---|
//! | (none) | run at driver priority: before holding, every call on the device is `Denied`; the claim works; config space of its own function reads its ids, of another is `Denied`; BAR and ROM registers cannot be written; bad offsets and widths are `InvalidArgument`; its memory BAR maps (uncached) and reads, an empty BAR, another device's BAR, a kernel address and an occupied address are refused; the BAR of its MSI-X table and its MSI-X capability are the kernel's (`Denied`), and its interrupt comes by MSI-X; DMA memory comes with a page-aligned physical address, bad sizes are refused, it is freed exactly as allocated (the last allocation is left for the exit to free); the interrupt goes to its own endpoint, not to a non-endpoint |
//! | `line` | the same on a boot with `pci.irq=line`: the interrupt comes by the line |
//! | `app` | at application priority the claim is `Denied` |
//! | `hold` | claims, then waits on its endpoint until killed |
//! | `busy` | the claim is `Busy` (another live process holds the device) |
//! | `squat` | takes the names the drivers once used for their endpoints (`netdrv`, `blkdrv`) and `netdrv`'s frame pool (`netdrv-0` to `netdrv-31`, attached, so that no one closes them), then waits on the first until killed: a driver started meanwhile must still start (`res::open_fresh`) |
//!
//! Prints `devcheck: FAIL ...` per failed check, `devcheck: skip` (exit 2) without a
//! virtio-net function, else `devcheck: ok` and exit 0.
#![no_std]
#![no_main]

extern crate alloc;

use core::fmt::Debug;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{dev, ipc, println, res};

ulib::main!(main);

const VIRTIO: u16 = 0x1af4;
const VIRTIO_NET: u16 = 0x1041;
const BAR_AT: u64 = 0x0000_5000_0000_0000;
const DMA_AT: u64 = 0x0000_5100_0000_0000;
/// The frame vregions `netdrv` opened under fixed names (`netdrv-0` ...), as many as its pool.
const SQUAT_POOL: usize = 32;
/// Where `squat` attaches those vregions.
const SQUAT_AT: u64 = 0x0000_5200_0000_0000;

struct Checks(u32);

impl Checks {
    fn eq<T: PartialEq + Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            println!("devcheck: FAIL {what}: expected {want:?}, got {got:?}");
            self.0 += 1;
        }
    }
    fn ok(&mut self, what: &str, cond: bool) {
        if !cond {
            println!("devcheck: FAIL {what}");
            self.0 += 1;
        }
    }
}

fn main(args: &[&str]) -> i32 {
    let Ok(net) = dev::find(VIRTIO, VIRTIO_NET) else {
        println!("devcheck: skip (no virtio-net function)");
        return 2;
    };
    let net = net.id;
    let mut c = Checks(0);
    match args.get(1).copied() {
        Some("app") => c.eq("claim at app priority", dev::claim(net), Err(Error::Denied)),
        Some("busy") => c.eq("claim of a held device", dev::claim(net), Err(Error::Busy)),
        Some("hold") => {
            c.eq("claim", dev::claim(net), Ok(()));
            let ep = ipc::open_endpoint("here/endpoint/devhold", Rights::OWNER_ALL);
            if let Ok(ep) = ep {
                let _ = ipc::recv(ep, u64::MAX);
            }
        }
        Some("squat") => {
            let eps = ["here/endpoint/netdrv", "here/endpoint/blkdrv"]
                .map(|name| ipc::open_endpoint(name, Rights::OWNER_ALL));
            for i in 0..SQUAT_POOL {
                // Attached, so that nobody closes them meanwhile: a driver sweeps away the
                // unattached vregions of a crashed predecessor, but an attached one is `Busy`.
                let name = alloc::format!("here/vregion/netdrv-{i}");
                let at = SQUAT_AT + i as u64 * 4096;
                let held = res::open_vregion(&name, 4096, Rights::OWNER_ALL)
                    .and_then(|r| res::attach_here(r, at, true));
                c.ok(&name, held.is_ok());
            }
            c.ok("the drivers' endpoint names", eps.iter().all(|e| e.is_ok()));
            if let Ok(ep) = eps[0] {
                let _ = ipc::recv(ep, u64::MAX);
            }
        }
        Some("hold-dark") => {
            // A driver that ends with DMA memory and its device's memory decoding off: the
            // kernel cannot reset the device, so it must keep that memory out of the pool.
            c.eq("claim", dev::claim(net), Ok(()));
            c.ok("DMA memory", dev::dma_alloc(DMA_AT, 4).is_ok());
            let command = dev::config_read(net, 4, 2).unwrap_or(0);
            c.eq(
                "memory decoding off",
                dev::config_write(net, 4, 2, command & !2),
                Ok(()),
            );
            let ep = ipc::open_endpoint("here/endpoint/devhold", Rights::OWNER_ALL);
            if let Ok(ep) = ep {
                let _ = ipc::recv(ep, u64::MAX);
            }
        }
        None => driver(&mut c, net, false),
        Some("line") => driver(&mut c, net, true),
        Some(other) => {
            println!("devcheck: unknown mode {other}");
            return 1;
        }
    }
    if c.0 == 0 {
        println!("devcheck: ok");
        0
    } else {
        println!("devcheck: {} checks failed", c.0);
        1
    }
}

/// The driver's checks; `line`: the boot said `pci.irq=line`.
fn driver(c: &mut Checks, net: ResId, line: bool) {
    let all = dev::list().unwrap_or_default();
    let other = all
        .iter()
        .find(|f| f.id != net && f.bars.iter().any(|b| b.size != 0 && b.flags & 1 == 0))
        .map(|f| f.id);
    // Nothing before the claim.
    c.eq(
        "config before claim",
        dev::config_read(net, 0, 2),
        Err(Error::Denied),
    );
    c.eq(
        "BAR before claim",
        dev::map_bar(net, 4, BAR_AT),
        Err(Error::Denied),
    );
    c.eq(
        "DMA before claim",
        dev::dma_alloc(DMA_AT, 1),
        Err(Error::Denied),
    );
    c.eq("claim", dev::claim(net), Ok(()));
    c.eq("claim again", dev::claim(net), Ok(()));
    c.eq(
        "claim of a non-device",
        dev::claim(ResId(0)),
        Err(Error::WrongType),
    );
    // Configuration space: its own only.
    c.eq("vendor", dev::config_read(net, 0, 2), Ok(u32::from(VIRTIO)));
    c.eq(
        "device",
        dev::config_read(net, 2, 2),
        Ok(u32::from(VIRTIO_NET)),
    );
    c.eq(
        "ids as a dword",
        dev::config_read(net, 0, 4),
        Ok(u32::from(VIRTIO_NET) << 16 | u32::from(VIRTIO)),
    );
    c.eq(
        "unaligned",
        dev::config_read(net, 3, 2),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "past 256",
        dev::config_read(net, 256, 1),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "width 3",
        dev::config_read(net, 0, 3),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "write BAR4",
        dev::config_write(net, 0x20, 4, 0),
        Err(Error::Denied),
    );
    c.eq(
        "write a BAR byte",
        dev::config_write(net, 0x13, 1, 0),
        Err(Error::Denied),
    );
    c.eq(
        "write the ROM base",
        dev::config_write(net, 0x30, 4, 0),
        Err(Error::Denied),
    );
    let command = dev::config_read(net, 4, 2).unwrap_or(0);
    c.eq(
        "write command (bus master)",
        dev::config_write(net, 4, 2, command | 0x6),
        Ok(()),
    );
    c.eq(
        "command read back",
        dev::config_read(net, 4, 2).map(|v| v & 0x6),
        Ok(0x6),
    );
    // BARs: its own memory BAR.
    let bar4 = all
        .iter()
        .find(|f| f.id == net)
        .map_or(0, |f| f.bars[4].size);
    c.eq(
        "map BAR4",
        dev::map_bar(net, 4, BAR_AT),
        Ok(bar4.div_ceil(4096) * 4096),
    );
    // SAFETY: BAR4 was just mapped at BAR_AT (virtio's common configuration is there in
    // QEMU: `device_feature_select` reads back what was written).
    let back = unsafe {
        core::ptr::write_volatile(BAR_AT as *mut u32, 1);
        core::ptr::read_volatile(BAR_AT as *const u32)
    };
    c.eq("virtio common config through the mapping", back, 1);
    c.eq(
        "map BAR4 over itself",
        dev::map_bar(net, 4, BAR_AT),
        Err(Error::Busy),
    );
    // MSI-X (QEMU's virtio functions have it): the table's BAR and the capability in
    // configuration space are the kernel's.
    let msix = all
        .iter()
        .find(|f| f.id == net)
        .filter(|f| f.msix_entries > 0);
    c.ok("virtio-net has MSI-X", msix.is_some());
    if let Some(f) = msix {
        c.eq(
            "map the MSI-X table's BAR",
            dev::map_bar(net, f.msix_bar, BAR_AT + (3 << 30)),
            Err(Error::Denied),
        );
        match msix_capability(net) {
            Some(cap) => {
                c.eq(
                    "write the MSI-X message control",
                    dev::config_write(net, cap + 2, 2, 0),
                    Err(Error::Denied),
                );
                c.eq(
                    "write the MSI-X table offset",
                    dev::config_write(net, cap + 4, 4, 0),
                    Err(Error::Denied),
                );
                c.ok(
                    "read the MSI-X capability",
                    dev::config_read(net, cap, 1) == Ok(0x11),
                );
            }
            None => c.ok("an MSI-X capability in the list", false),
        }
    }
    c.eq(
        "map an empty BAR",
        dev::map_bar(net, 0, BAR_AT + (1 << 30)),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "map BAR 6",
        dev::map_bar(net, 6, BAR_AT + (1 << 30)),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "map at a kernel address",
        dev::map_bar(net, 4, 0xffff_8000_0000_0000),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "map at an unaligned address",
        dev::map_bar(net, 4, BAR_AT + (1 << 30) + 8),
        Err(Error::InvalidArgument),
    );
    match other {
        Some(o) => {
            c.eq(
                "another device's config",
                dev::config_read(o, 0, 2),
                Err(Error::Denied),
            );
            c.eq(
                "another device's BAR",
                dev::map_bar(o, 0, BAR_AT + (2 << 30)),
                Err(Error::Denied),
            );
            c.eq(
                "another device's interrupt",
                dev::irq_ack(o),
                Err(Error::Denied),
            );
        }
        None => c.ok("another device with a memory BAR (QEMU's VGA)", false),
    }
    // DMA memory.
    match dev::dma_alloc(DMA_AT, 4) {
        Ok(phys) => {
            c.ok(
                "DMA physical address page-aligned",
                phys != 0 && phys % 4096 == 0,
            );
            // SAFETY: 4 pages were just mapped writable at DMA_AT.
            unsafe { core::ptr::write_bytes(DMA_AT as *mut u8, 0x5a, 4 * 4096) };
            c.eq(
                "DMA free of another size",
                dev::dma_free(DMA_AT, 3),
                Err(Error::InvalidArgument),
            );
            c.eq(
                "DMA over DMA",
                dev::dma_alloc(DMA_AT, 1).map(drop),
                Err(Error::Busy),
            );
            c.eq("DMA free", dev::dma_free(DMA_AT, 4), Ok(()));
            c.eq(
                "DMA free twice",
                dev::dma_free(DMA_AT, 4),
                Err(Error::InvalidArgument),
            );
        }
        Err(e) => c.ok(&alloc::format!("DMA alloc: {e}"), false),
    }
    c.eq(
        "DMA of 0 pages",
        dev::dma_alloc(DMA_AT, 0),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "DMA of 257 pages",
        dev::dma_alloc(DMA_AT, 257),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "DMA at a kernel address",
        dev::dma_alloc(0xffff_8000_0000_0000, 1),
        Err(Error::InvalidArgument),
    );
    // Left for the exit to free (the kernel test counts the frames).
    c.ok("DMA left mapped", dev::dma_alloc(DMA_AT, 2).is_ok());
    // A device holder with DMA memory and a BAR never moves (abi::dev "No moving").
    let mut cores = [ulib::abi::CoreInfo::default(); 2];
    let core1 = ulib::sys::cores(&mut cores).is_ok_and(|n| n > 1 && cores[1].online != 0);
    c.eq(
        "migrate itself",
        ulib::sys::migrate(None, 1).map(drop),
        Err(if core1 {
            Error::Denied
        } else {
            Error::NoSuchCore
        }),
    );
    // The interrupt: to its own endpoint only.
    c.eq(
        "irq ack before routing",
        dev::irq_ack(net),
        Err(Error::InvalidArgument),
    );
    c.eq(
        "irq to a device id",
        dev::irq(net, Some(net)),
        Err(Error::WrongType),
    );
    match ipc::open_endpoint("here/endpoint/devcheck", Rights::OWNER_ALL) {
        Ok(ep) => {
            let by = if msix.is_some() && !line {
                dev::IrqBy::Msix
            } else {
                dev::IrqBy::Line
            };
            c.eq("irq to its endpoint", dev::irq(net, Some(ep)), Ok(by));
            c.eq("irq ack", dev::irq_ack(net), Ok(()));
            c.eq("irq off", dev::irq(net, None), Ok(dev::IrqBy::Line));
            let _ = ulib::res::close(ep);
        }
        Err(e) => c.ok(&alloc::format!("endpoint: {e}"), false),
    }
}

/// The configuration offset of `dev`'s MSI-X capability (id 0x11), from its list.
fn msix_capability(dev: ResId) -> Option<u16> {
    let caps = dev::capabilities(dev).ok()?;
    caps.into_iter()
        .find(|&(id, _)| id == 0x11)
        .map(|(_, off)| off)
}
