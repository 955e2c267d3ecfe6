//! Devices for user-mode drivers (issue 15): PCI enumeration made every function a device
//! resource, and a driver process (`user/devcheck`) reaches its own device's configuration
//! space, BARs, DMA memory and interrupt, and nothing else; what it held is given back.

use super::{end_and_reap, frames_after, free_frames_per_core, run_to_end, until_asleep};
use crate::arch::x86_64::pci;
use crate::percore::current_core;
use crate::{kassert, ktest};
use abi::res::{ResType, Rights};
use abi::{Error, Priority};
use alloc::format;

/// Is QEMU's virtio-net function there (the test boots add one)?
fn has_virtio_net() -> bool {
    virtio_function(0x1041).is_some()
}

/// The virtio function with device id `device` (0x1041 net, 0x1042 block), if any.
fn virtio_function(device: u16) -> Option<&'static pci::Function> {
    pci::functions()
        .iter()
        .find(|f| f.vendor == pci::VENDOR_VIRTIO && f.device == device)
}

/// `devcheck ARGS`; its driver checks (no ARGS) as `devcheck line` on a `pci.irq=line` boot.
fn run_devcheck(args: &[&str], priority: Priority) -> crate::ktest::TestResult {
    let line: &[&str] = &["line"];
    let args = if args.is_empty() && crate::res::device::line_only() {
        line
    } else {
        args
    };
    let s = run_to_end("devcheck", args, priority, 120)?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "devcheck {args:?} ended with {s:?} (its console lines say which check failed)"
    );
    Ok(())
}

ktest! {
    /// A memory BAR is mapped in whole pages, so one smaller than a page is refused where
    /// its page holds another function's BAR or its own MSI-X table (an audit found the
    /// page mapped whole: another function's registers were the driver's too). None of
    /// QEMU's functions here has such a BAR, so the rule is checked on made-up functions,
    /// and every real BAR on what the boot found.
    fn sub_page_bars_share_no_page() -> TestResult {
        use crate::arch::x86_64::pci::{Bar, Bdf, Function, Msix};
        let bar = |base, size| Bar { base, size, io: false, prefetch: false };
        let function = |dev, bars: &[Bar], msix: Option<Msix>| {
            let mut f = Function {
                bdf: Bdf { bus: 0, dev, func: 0 },
                vendor: 0x1234,
                device: 0x11,
                class: 0,
                bars: [Bar::default(); 6],
                irq_line: 0xff,
                irq_pin: 0,
                msix,
                msi_cap: None,
                virtio_common: None,
            };
            f.bars[..bars.len()].copy_from_slice(bars);
            f
        };
        let msix = Msix { cap: 0x40, entries: 1, table_bar: 1, table_offset: 0, pba_bar: 1, pba_offset: 0x80 };
        let a = function(3, &[bar(0xfeb0_0000, 0x100)], None);
        let b = function(4, &[bar(0xfeb0_0800, 0x100)], None);
        let c = function(5, &[bar(0xfeb1_0000, 0x100), bar(0xfeb1_0400, 0x400)], Some(msix));
        let d = function(6, &[bar(0xfeb2_0000, 0x100), bar(0xfeb2_0100, 0x100)], None);
        let all = [a, b, c, d];
        let shared = crate::res::device::page_shared;
        kassert!(shared(&a, 0, &all) && shared(&b, 0, &all), "a page shared by two functions was not seen");
        kassert!(shared(&c, 0, &all), "a page shared with the function's MSI-X table was not seen");
        kassert!(!shared(&d, 0, &all), "a page shared by two BARs of one function (no MSI-X) was refused");
        kassert!(!shared(&a, 0, &[a, d]), "a page of its own was refused");
        // What the boot found: no real memory BAR is refused (the drivers map theirs).
        let fs = pci::functions();
        for f in fs {
            for (i, b) in f.bars.iter().enumerate() {
                if !b.io && b.size != 0 && b.base != 0 && !crate::arch::x86_64::msix::holds_table(f, i as u8) {
                    kassert!(!shared(f, i, fs), "{:?} BAR {i} ({:#x}, {:#x}) shares a page", f.bdf, b.base, b.size);
                }
            }
        }
        Ok(())
    }
}

ktest! {
    /// Every PCI function found at boot is a `device` resource on core 0 named BB.DD.F,
    /// reporting its ids and class; nobody opens or closes one, not even the kernel again.
    fn functions_are_resources() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        let fs = pci::functions();
        kassert!(
            fs.iter().any(|f| f.bdf.packed() == 0 && f.vendor == 0x8086),
            "no host bridge at 00:00.0 among {} functions", fs.len()
        );
        for f in fs {
            let id = crate::res::device::id_of(f.bdf.packed())
                .ok_or_else(|| format!("no resource for {:?}", f.bdf))?;
            let info = crate::res::info(id).map_err(|e| format!("info: {e}"))?;
            kassert!(
                info.size == u64::from(f.vendor) << 16 | u64::from(f.device)
                    && info.detail == u64::from(f.class),
                "{:?}: info size {:#x} detail {:#x}", f.bdf, info.size, info.detail
            );
            kassert!(crate::res::close(id) == Err(Error::Busy), "a device closed");
        }
        let again = crate::res::open("c0/device/00.00.0", &0u64.to_le_bytes(), Rights::OWNER_ALL);
        kassert!(again == Err(Error::AlreadyExists), "opened again: {again:?}");
        let made_up = crate::res::open("c0/device/ff.1f.7", &0xffffu64.to_le_bytes(), Rights::OWNER_ALL);
        kassert!(made_up == Err(Error::InvalidArgument), "a device nobody found: {made_up:?}");
        kassert!(
            crate::res::local::list().iter().filter(|r| r.kind == ResType::Device as u8).count()
                == fs.len(),
            "resources and functions differ"
        );
        Ok(())
    }
}

ktest! {
    /// A driver (`devcheck`) reaches its own device only: config space, memory BAR mapped,
    /// DMA memory, interrupt to its endpoint; an application may not claim; and the
    /// frames it held (DMA memory left mapped, page tables) all come back at its end.
    fn driver_reaches_only_its_device() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        run_devcheck(&[], Priority::Driver)?; // warm-up
        let before = free_frames_per_core()?;
        run_devcheck(&[], Priority::Driver)?;
        run_devcheck(&["app"], Priority::App)?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// One holder at a time: while a driver holds the device another's claim is `Busy`;
    /// once it is killed, a new driver claims it (a restarted driver gets its device back).
    fn one_holder_and_restart() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let holder = crate::proc::spawn("devcheck", &["hold"], Priority::Driver, crate::proc::TEST_PARENT)
            .map_err(|e| format!("spawn: {e}"))?;
        let r = (|| {
            until_asleep(holder, "devcheck hold", 60)?;
            run_devcheck(&["busy"], Priority::Driver)
        })();
        end_and_reap(holder);
        r?;
        run_devcheck(&[], Priority::Driver)
    }
}

ktest! {
    /// A driver that ends where its device cannot be reset (here it turned its memory
    /// decoding off) has its DMA memory kept out of the pool, not freed for the device to
    /// write into the next owner's data (a review found it freed); the device works again
    /// for the next driver once decoding is back on.
    fn unreset_device_keeps_its_dma_memory() -> TestResult {
        use core::sync::atomic::Ordering;
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let f = virtio_function(0x1041).ok_or("no virtio-net function")?;
        let command = pci::read(f.bdf, 4, 2);
        let kept = crate::proc::vspace::DMA_PAGES_KEPT.load(Ordering::Relaxed);
        let holder = crate::proc::spawn("devcheck", &["hold-dark"], Priority::Driver, crate::proc::TEST_PARENT)
            .map_err(|e| format!("spawn: {e}"))?;
        let r = until_asleep(holder, "devcheck hold-dark", 60);
        end_and_reap(holder);
        let dark = pci::read(f.bdf, 4, 2) & 2 == 0;
        pci::write(f.bdf, 4, 2, command);
        r?;
        kassert!(dark, "the driver did not turn memory decoding off");
        let more = crate::proc::vspace::DMA_PAGES_KEPT.load(Ordering::Relaxed) - kept;
        kassert!(more == 4, "{more} DMA pages kept out of the pool, not the driver's 4");
        run_devcheck(&[], Priority::Driver)
    }
}

/// The MAC xtask gives QEMU's virtio-net device (`NetCfg::TEST_MAC`).
const TEST_MAC: &str = "52:54:00:12:34:56";

/// Close the frame vregions `netdrv` left (resources outlive their opener).
fn close_netdrv_leftovers() {
    for r in crate::res::local::list() {
        if r.kind == ResType::VRegion as u8 && r.name().starts_with("netdrv-") {
            let _ = crate::res::close(r.id);
        }
    }
}

/// The device resource of the virtio function with device id `device`.
fn virtio_resource(device: u16) -> Option<abi::res::ResId> {
    virtio_function(device).and_then(|f| crate::res::device::id_of(f.bdf.packed()))
}

/// Start `netdrv` at driver priority, run `netprobe` against it, end the driver. Whether
/// its interrupt came by MSI-X.
fn driver_round() -> Result<bool, alloc::string::String> {
    let nic = virtio_resource(0x1041).ok_or("no virtio-net resource")?;
    let irqs = crate::res::device::irqs_of(nic);
    let drv = crate::proc::spawn("netdrv", &[], Priority::Driver, crate::proc::TEST_PARENT)
        .map_err(|e| format!("spawn netdrv: {e}"))?;
    let r = (|| {
        let s = run_to_end("netprobe", &[TEST_MAC], Priority::App, 120)?;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code == 0,
            "netprobe ended with {s:?} (its console lines say why)"
        );
        kassert!(
            !crate::proc::has_ended(drv),
            "netdrv ended (its console lines say why)"
        );
        // The reply came in by the device's interrupt, delivered as a message.
        let more = crate::res::device::irqs_of(nic) - irqs;
        kassert!(more > 0, "no interrupt message was delivered to netdrv");
        let status = crate::res::device::virtio_status(nic);
        kassert!(
            status.is_some_and(|s| s != 0),
            "netdrv serves, but its device's status is {status:?}"
        );
        Ok(crate::res::device::hardware_masked(nic).is_some_and(|(_, msix)| msix))
    })();
    end_and_reap(drv);
    // Killed with its device set up, the driver's device was reset before its DMA memory
    // went back to the pool (an audit found the device left pointed at those frames,
    // writing received frames into their next owner's memory).
    let status = crate::res::device::virtio_status(nic);
    kassert!(
        r.is_err() || status == Some(0),
        "the device of a killed netdrv was not reset: status {status:?}"
    );
    r
}

ktest! {
    /// `netdrv` is a real driver: an ARP request for 10.0.2.2 sent through `net.drv` gets
    /// QEMU's reply back as a `UDP_FRAME_IN` frame, and `DRV_INFO`'s MAC is QEMU's. Killed
    /// and started again (twice), it claims and resets the device and works again; at the
    /// end every frame it held (DMA memory, BAR mappings' tables, frame vregions) is back.
    fn netdrv_moves_frames_and_restarts() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        driver_round()?; // warm-up (heaps, RPCC agents)
        close_netdrv_leftovers();
        let before = free_frames_per_core()?;
        driver_round()?;
        driver_round()?;
        close_netdrv_leftovers();
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// A driver's own resources cannot be kept from it by taking their names first: with
    /// `devcheck squat` (an application) holding the names the drivers once opened for
    /// their endpoints (`netdrv`, `blkdrv`) and `netdrv`'s frame pool (`netdrv-0` to
    /// `netdrv-31`), `netdrv` and `blkdrv` still start and serve (`ulib::res::open_fresh`:
    /// names nobody can guess). Before, each ended with "endpoint: already exists".
    fn driver_names_taken_first_do_not_stop_the_driver() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let squatter =
            crate::proc::spawn("devcheck", &["squat"], Priority::App, crate::proc::TEST_PARENT)
                .map_err(|e| format!("spawn devcheck squat: {e}"))?;
        let r = (|| {
            until_asleep(squatter, "devcheck squat", 60)?;
            let taken = crate::res::local::list();
            let named = |kind: ResType, name: &str| {
                taken
                    .iter()
                    .any(|r| r.kind == kind as u8 && r.name() == name)
            };
            kassert!(
                named(ResType::Endpoint, "netdrv")
                    && named(ResType::Endpoint, "blkdrv")
                    && named(ResType::VRegion, "netdrv-0")
                    && named(ResType::VRegion, "netdrv-31"),
                "devcheck squat did not take the names (its console lines say why)"
            );
            driver_round()?;
            if has_virtio_blk() {
                blk_round()?;
            }
            Ok(())
        })();
        end_and_reap(squatter);
        close_netdrv_leftovers();
        r
    }
}

/// The virtio-net function's device resource and its legacy line.
fn nic() -> Result<(abi::res::ResId, u8), alloc::string::String> {
    let f = pci::functions()
        .iter()
        .find(|f| f.vendor == 0x1af4 && f.device == 0x1041)
        .ok_or("no virtio-net function")?;
    let id = crate::res::device::id_of(f.bdf.packed()).ok_or("no virtio-net resource")?;
    Ok((id, f.irq_line))
}

ktest! {
    /// A driver holding DMA memory and BAR mappings never migrates: `MIGRATE` of it, asked
    /// by the kernel (who may move anything) to another core, is `Denied` and leaves it
    /// running, and the driver still works afterwards (`netprobe`'s ARP round trip).
    fn driver_never_migrates() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        if !crate::rpcc::reachable(1) {
            crate::kskip!("one core: nowhere to migrate to");
        }
        let drv = crate::proc::spawn("netdrv", &[], Priority::Driver, crate::proc::TEST_PARENT)
            .map_err(|e| format!("spawn netdrv: {e}"))?;
        let r = (|| {
            until_asleep(drv, "netdrv", 60)?;
            for core in 1..crate::smp::cores_planned() {
                if !crate::rpcc::reachable(core) {
                    continue;
                }
                let m = crate::proc::migrate::migrate(drv, core);
                kassert!(m == Err(Error::Denied), "migrating netdrv to core {core}: {m:?}");
                kassert!(!crate::proc::has_ended(drv), "netdrv ended after a refused migration");
            }
            let s = run_to_end("netprobe", &[TEST_MAC], Priority::App, 120)?;
            kassert!(
                s.how == abi::ENDED_EXIT && s.code == 0,
                "netprobe after the refused migration ended with {s:?}"
            );
            kassert!(!crate::proc::has_ended(drv), "netdrv ended (its console lines say why)");
            Ok(())
        })();
        end_and_reap(drv);
        close_netdrv_leftovers();
        r
    }
}

ktest! {
    /// The interrupt stays masked until the driver acknowledges: `netdrv lateack` serves
    /// each interrupt message at once but acknowledges it only at the next `DRV_INFO`, so
    /// across `netprobe`'s ARP round trip (the reception raises the device's interrupt;
    /// the transmission asks for none) it gets one message, masked in the hardware (the
    /// function's MSI-X entry, by which QEMU's virtio-net interrupts; the IOAPIC line under
    /// `pci.irq=line`);
    /// the next `DRV_INFO` acknowledges and the next interrupt is delivered. Always:
    /// messages = acknowledgements + 1. When the driver ends, its line is unrouted and stays
    /// masked (no message to its dead endpoint, no storm), and the next driver works.
    fn irq_masked_until_ack() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let (id, _) = nic()?;
        let state = || crate::res::device::irq_state(id).ok_or("no device state");
        let masked = || crate::res::device::hardware_masked(id).ok_or("no interrupt state");
        let msix = !crate::res::device::line_only()
            && pci::functions().iter().any(|f| {
                f.vendor == 0x1af4 && f.device == 0x1041 && crate::arch::x86_64::msix::usable(f)
            });
        let (irqs0, acks0, _, _) = state()?;
        let drv = crate::proc::spawn("netdrv", &["lateack"], Priority::Driver, crate::proc::TEST_PARENT)
            .map_err(|e| format!("spawn netdrv: {e}"))?;
        let probe = |round: u32| -> crate::ktest::TestResult {
            let s = run_to_end("netprobe", &[TEST_MAC], Priority::App, 120)?;
            kassert!(
                s.how == abi::ENDED_EXIT && s.code == 0,
                "netprobe round {round} ended with {s:?}"
            );
            let (irqs, acks, waiting, routed) = state()?;
            let (irqs, acks) = (irqs - irqs0, acks - acks0);
            kassert!(routed && waiting, "round {round}: routed {routed}, waiting for ack {waiting}");
            kassert!(
                irqs == acks + 1,
                "round {round}: {irqs} interrupt messages for {acks} acknowledgements"
            );
            let (masked, by_msix) = masked()?;
            kassert!(by_msix == msix, "round {round}: by MSI-X {by_msix}, the function has it: {msix}");
            kassert!(masked, "round {round}: not masked in the hardware while unacknowledged (MSI-X {by_msix})");
            Ok(())
        };
        let r = (|| {
            until_asleep(drv, "netdrv lateack", 60)?;
            probe(1)?;
            let (after1, acks1, _, _) = state()?;
            // Round 2's DRV_INFO acknowledges: the pending interrupt (round 1's reception)
            // is delivered at once, and round 2's traffic no more than once.
            probe(2)?;
            let (after2, acks2, _, _) = state()?;
            kassert!(
                acks2 > acks1 && after2 > after1,
                "after the acknowledgement: messages {after1} -> {after2}, acks {acks1} -> {acks2}"
            );
            Ok(())
        })();
        end_and_reap(drv);
        close_netdrv_leftovers();
        r?;
        let (irqs, _, _, routed) = state()?;
        kassert!(!routed, "the dead driver's line is still routed");
        kassert!(masked()?.0, "unmasked after its driver ended");
        // A new driver is not held up by the dead one's unacknowledged message.
        driver_round()?;
        close_netdrv_leftovers();
        let (later, _, _, _) = state()?;
        kassert!(later > irqs, "no interrupt for the next driver");
        Ok(())
    }
}

ktest! {
    /// `pci.irq=line` (set here for one driver): the same driver works by the function's
    /// IOAPIC line instead of MSI-X, and a driver after it (`pci.irq=msix`) is back on
    /// MSI-X: each switch turns the other way off. The boot's own mode is put back.
    fn line_instead_of_msix() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let msix = pci::functions().iter().any(|f| {
            f.vendor == 0x1af4 && f.device == 0x1041 && crate::arch::x86_64::msix::usable(f)
        });
        let booted_line = crate::res::device::line_only();
        crate::res::device::set_line_only(true);
        let line = driver_round();
        crate::res::device::set_line_only(false);
        close_netdrv_leftovers();
        kassert!(!line?, "under pci.irq=line the interrupt came by MSI-X");
        let after = driver_round();
        crate::res::device::set_line_only(booted_line);
        close_netdrv_leftovers();
        let after = after?;
        kassert!(after == msix, "the next driver: by MSI-X {after}, the function has it: {msix}");
        Ok(())
    }
}

ktest! {
    /// Functions sharing an IOAPIC line with the virtio-net function (QEMU's `pc` machine
    /// routes several functions to few lines): each holder on a shared line hears its
    /// interrupt and the line is unmasked once all have acknowledged; here the only driver
    /// is `netdrv`, so the test checks a shared partner with no routed holder neither gets
    /// a message nor holds the line masked (`netprobe` works by interrupt).
    fn shared_line_holders() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_net() {
            crate::kskip!("no virtio-net function (xtask's test boots add one)");
        }
        let (id, line) = nic()?;
        let partners: alloc::vec::Vec<_> = pci::functions()
            .iter()
            .filter(|f| f.irq_pin != 0 && f.irq_line == line)
            .filter_map(|f| crate::res::device::id_of(f.bdf.packed()))
            .filter(|&p| p != id)
            .collect();
        if partners.is_empty() {
            crate::kskip!("virtio-net's line shares with no other function on this boot");
        }
        let before: alloc::vec::Vec<u64> = partners.iter().map(|&p| crate::res::device::irqs_of(p)).collect();
        driver_round()?;
        close_netdrv_leftovers();
        let after: alloc::vec::Vec<u64> = partners.iter().map(|&p| crate::res::device::irqs_of(p)).collect();
        kassert!(before == after, "a partner without a driver got messages: {before:?} -> {after:?}");
        Ok(())
    }
}

/// Is QEMU's virtio-blk function there (the test boots add one, with a FAT image)?
fn has_virtio_blk() -> bool {
    virtio_function(0x1042).is_some()
}

/// Start `blkdrv` at driver priority, run `blkprobe` against it, end the driver.
fn blk_round() -> crate::ktest::TestResult {
    let drv = crate::proc::spawn("blkdrv", &[], Priority::Driver, crate::proc::TEST_PARENT)
        .map_err(|e| format!("spawn blkdrv: {e}"))?;
    let r = (|| {
        let s = run_to_end("blkprobe", &[], Priority::App, 120)?;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code == 0,
            "blkprobe ended with {s:?} (its console lines say why)"
        );
        kassert!(
            !crate::proc::has_ended(drv),
            "blkdrv ended (its console lines say why)"
        );
        Ok(())
    })();
    end_and_reap(drv);
    r?;
    // Killed with its device set up, the driver's device was reset (as for netdrv).
    let disk = virtio_resource(0x1042).ok_or("no virtio-blk resource")?;
    let status = crate::res::device::virtio_status(disk);
    kassert!(
        status == Some(0),
        "the device of a killed blkdrv was not reset: status {status:?}"
    );
    Ok(())
}

ktest! {
    /// `blkdrv` is a real disk driver: through `blk` it reads the FAT image's boot sector,
    /// writes sectors and reads them back, takes the device's interrupts as messages, and
    /// answers bad requests (no ICA, 0 or too many sectors, beyond the end) with errors.
    /// Killed and started again, it resets the device and serves again; at the end every
    /// frame it held is back.
    fn blkdrv_moves_sectors_and_restarts() -> TestResult {
        if current_core() != 0 {
            crate::kskip!("devices live on core 0");
        }
        if !has_virtio_blk() {
            crate::kskip!("no virtio-blk function (xtask's test boots add one)");
        }
        blk_round()?; // warm-up (heaps, RPCC agents)
        let before = free_frames_per_core()?;
        blk_round()?;
        blk_round()?;
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}
