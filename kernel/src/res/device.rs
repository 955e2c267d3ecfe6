//! Devices (`device`, a resource type): one per PCI function the kernel found at boot
//! (`arch::x86_64::pci`), made by the kernel on core 0, so that a user-mode driver can hold
//! one and reach exactly that function: its configuration space, its memory BARs and its
//! interrupt (abi/src/dev.rs; DESIGN.md section 8: the kernel keeps no drivers).
//!
//! The resource records who holds the device ([`claim`]); every driver call checks the
//! caller is that holder. A function with MSI-X interrupts its holder by MSI-X
//! (`arch::x86_64::msix`, entry 0 of its table, masked until acknowledged as a line is),
//! unless the boot says `pci.irq=line`; the others by their IOAPIC line. A holder that ended is replaced by the next claim, so a driver
//! killed and started again gets its device back. The ids of the device resources are kept
//! from boot ([`DEVICES`]), so the interrupt path looks only at them.

#![deny(unsafe_code)]

use super::kind::{u64_arg, Resource, Step};
use super::local;
use crate::arch::x86_64::pci::{self, Bdf, Function};
use crate::arch::x86_64::{msix, pci_irq, virtio};
use crate::percore::current_core;
use abi::res::{Op, ResId, UserId};
use abi::syscall::control;
use abi::{Error, Pid, Priority};
use core::convert::Infallible;
use core::sync::atomic::{AtomicBool, Ordering};

/// `pci.irq=line`: every device interrupts by its line, MSI-X or not.
static LINE_ONLY: AtomicBool = AtomicBool::new(false);

/// Use IOAPIC lines only (`pci.irq=line`, at boot), or MSI-X where a function has it.
pub fn set_line_only(line_only: bool) {
    LINE_ONLY.store(line_only, Ordering::Relaxed);
}

/// Is `pci.irq=line` in force?
pub fn line_only() -> bool {
    LINE_ONLY.load(Ordering::Relaxed)
}

/// The device resources [`create_all`] made on core 0, once at boot; they never close.
static DEVICES: spin::Once<alloc::vec::Vec<ResId>> = spin::Once::new();

/// Configuration registers a driver may not write: the BARs and the expansion ROM base
/// (moving a window could lay it over RAM).
const PROTECTED: [core::ops::Range<u16>; 2] = [0x10..0x28, 0x30..0x34];
/// The longest MSI capability (64-bit addresses, per-vector masking): none of it may be
/// written, so a driver cannot send its device's messages where it likes.
const MSI_CAP_LEN: u16 = 24;

/// A PCI function and its holder.
pub struct Device {
    /// The function as enumerated at boot (that list lives as long as the kernel).
    func: &'static Function,
    holder: Option<Pid>,
    /// Where its interrupt goes (an endpoint of the holder), and whether the line is masked
    /// waiting for the holder's acknowledgement.
    irq_to: Option<ResId>,
    irq_masked: bool,
    /// Its interrupt comes by MSI-X (entry 0 of its table), not by its line.
    msix_on: bool,
    /// Interrupt messages delivered, and acknowledgements that unmasked (for tests).
    irqs: u64,
    acks: u64,
}

impl Resource for Device {
    type ReadLater = Infallible;
    type WriteLater = Infallible;
    type ControlLater = Infallible;
    type InfoLater = Infallible;

    /// The packed bus/device/function of a function found at boot; only the kernel opens.
    fn open(args: &[u8]) -> Result<Self, Error> {
        if super::flow_user() != UserId::KERNEL {
            return Err(Error::Denied);
        }
        let packed = u16::try_from(u64_arg(args)?).map_err(|_| Error::InvalidArgument)?;
        let func = pci::functions()
            .iter()
            .find(|f| f.bdf.packed() == packed)
            .ok_or(Error::InvalidArgument)?;
        Ok(Device {
            func,
            holder: None,
            irq_to: None,
            irq_masked: false,
            msix_on: false,
            irqs: 0,
            acks: 0,
        })
    }

    /// Devices stay as long as the machine does.
    fn close(&mut self) -> Result<(), Error> {
        Err(Error::Busy)
    }

    /// `INFO`: vendor << 16 | device id.
    fn control(&mut self, cmd: u64, _: u64, _: u64) -> Result<Step<u64, Infallible>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(ids(self.func))),
            _ => Err(Error::NotSupported),
        }
    }

    /// Vendor << 16 | device id, and the class.
    fn info(&self) -> Step<(u64, u64), Infallible> {
        Step::Done((ids(self.func), u64::from(self.func.class)))
    }
}

fn ids(f: &Function) -> u64 {
    u64::from(f.vendor) << 16 | u64::from(f.device)
}

/// Make the device resources (core 0, at boot, as the kernel's flow): one per function.
pub fn create_all() {
    let mut ids = alloc::vec::Vec::new();
    for f in pci::enumerate() {
        let mut buf = [0u8; 7];
        let name = alloc::format!("c0/device/{}", abi::dev::name_of(f.bdf.packed(), &mut buf));
        // Everyone may try control (claim); the claim's own rules decide.
        let rights = abi::res::Rights(0x0f | abi::res::Rights::others(Op::Control));
        let args = u64::from(f.bdf.packed()).to_le_bytes();
        match super::open(&name, &args, rights) {
            Ok(id) => ids.push(id),
            Err(e) => log::warn!("pci {name}: no resource: {e}"),
        }
    }
    DEVICES.call_once(|| ids);
    log::info!("pci: {} functions", pci::functions().len());
}

/// The device resource of function `bdf` (packed), if any: a lookup in core 0's table.
pub fn id_of(packed: u16) -> Option<ResId> {
    local::list()
        .into_iter()
        .find(|r| {
            r.kind == abi::res::ResType::Device as u8 && {
                let mut buf = [0u8; 7];
                r.name() == abi::dev::name_of(packed, &mut buf)
            }
        })
        .map(|r| r.id)
}

/// Where devices live: core 0. Anything else is `NotSupported` (for now).
fn on_device_core(id: ResId) -> Result<(), Error> {
    if current_core() != 0 || id.core() != 0 {
        return Err(Error::NotSupported);
    }
    if id.kind() != Some(abi::res::ResType::Device) {
        return Err(Error::WrongType);
    }
    Ok(())
}

/// DEV_CLAIM: the caller (driver priority, created by the administrator) holds device
/// `id`, unless a live process does.
pub fn claim(id: ResId) -> Result<(), Error> {
    on_device_core(id)?;
    let me = crate::proc::running_pid().ok_or(Error::NoSuchProcess)?;
    let holder = local::with_state(id, &[Op::Control], |d: &mut Device| Ok(d.holder))?;
    if crate::proc::running_priority() != Priority::Driver || !crate::proc::current_is_admin() {
        return Err(Error::Denied);
    }
    if let Some(h) = holder.filter(|&h| h != me) {
        if !crate::proc::has_ended(h) {
            return Err(Error::Busy);
        }
    }
    local::with_state(id, &[], |d: &mut Device| {
        d.holder = Some(me);
        d.irq_to = None;
        d.irq_masked = false;
        if d.msix_on {
            // Masked until the new holder asks; MSI-X stays on, its line quiet.
            msix::set_masked(d.func, true);
        }
        Ok(())
    })?;
    // A new holder starts with its interrupt off until it asks (DEV_IRQ).
    let line = local::with_state(id, &[], |d: &mut Device| Ok(d.func.irq_line))?;
    if line_in_use(line, None) {
        return Ok(());
    }
    let _ = pci_irq::set(line, true);
    Ok(())
}

/// Run `f` on device `id` if the caller holds it (`Denied` otherwise).
pub fn with_held<R>(id: ResId, f: impl FnOnce(&mut Device) -> Result<R, Error>) -> Result<R, Error> {
    on_device_core(id)?;
    let me = crate::proc::running_pid().ok_or(Error::NoSuchProcess)?;
    local::with_state(id, &[], |d: &mut Device| {
        if d.holder != Some(me) {
            return Err(Error::Denied);
        }
        f(d)
    })
}

impl Device {
    pub fn bdf(&self) -> Bdf {
        self.func.bdf
    }
}

/// Process `pid` of this core is ending: every device it holds is reset
/// (`arch::x86_64::virtio`), before the ending process's DMA memory goes back to the pool,
/// where a device still pointed at it would write the next owner's data (found by an
/// audit). `false` if one could not be reset (not virtio, its registers out of the
/// kernel's reach, memory decoding turned off by the driver, no acknowledgement): the
/// caller then keeps that memory out of the pool for good. Called inside the scheduler's
/// borrow, before the address space drops.
pub fn holder_ended(pid: Pid) -> bool {
    if current_core() != 0 {
        return true;
    }
    let mut all = true;
    for &id in devices() {
        let held = local::with_state(id, &[], |d: &mut Device| {
            Ok((d.holder == Some(pid)).then_some(d.func))
        });
        if let Ok(Some(f)) = held {
            let r = virtio::reset(f);
            if r != virtio::Reset::Done {
                log::warn!(
                    "device {:?} of ended driver {pid:?} not reset ({r:?}): its DMA memory is kept out of the pool",
                    f.bdf
                );
                all = false;
            }
        }
    }
    all
}

/// Device `id`'s virtio `device_status` now (0: reset), for the tests.
pub fn virtio_status(id: ResId) -> Option<u8> {
    let f = local::with_state(id, &[], |d: &mut Device| Ok(d.func)).ok()?;
    virtio::status(f)
}

/// DEV_CONFIG: read or write `width` bytes at `offset` of the held device's configuration.
pub fn config(id: ResId, offset: u64, width: u64, value: u64) -> Result<u64, Error> {
    let write = width & abi::dev::CONFIG_WRITE != 0;
    let width = width & !abi::dev::CONFIG_WRITE;
    if !matches!(width, 1 | 2 | 4) || offset >= 256 || !offset.is_multiple_of(width) {
        return Err(Error::InvalidArgument);
    }
    let offset = offset as u16;
    let (bdf, func) = with_held(id, |d| Ok((d.bdf(), d.func)))?;
    if write {
        let end = offset + width as u16;
        if PROTECTED.iter().any(|r| offset < r.end && end > r.start)
            || msix::in_capability(func, offset, width as u16)
            || func.msi_cap.is_some_and(|c| offset < c + MSI_CAP_LEN && c < end)
        {
            return Err(Error::Denied);
        }
        let value = u32::try_from(value).map_err(|_| Error::InvalidArgument)?;
        pci::write(bdf, offset, width as u8, value);
        Ok(0)
    } else {
        Ok(u64::from(pci::read(bdf, offset, width as u8)))
    }
}

/// DEV_MAP_BAR's check: the physical base and size of memory BAR `bar` of the held device.
/// The BAR holding its MSI-X table is the kernel's (`Denied`).
pub fn memory_bar(id: ResId, bar: u64) -> Result<(u64, u64), Error> {
    let func = with_held(id, |d| Ok(d.func))?;
    let index = usize::try_from(bar).map_err(|_| Error::InvalidArgument)?;
    let b = func.bars.get(index).ok_or(Error::InvalidArgument)?;
    if b.io || b.size == 0 || b.base == 0 {
        return Err(Error::InvalidArgument);
    }
    if msix::holds_table(func, index as u8) || page_shared(func, index, pci::functions()) {
        return Err(Error::Denied);
    }
    Ok((b.base, b.size))
}

/// Does the mapping of memory BAR `index` of `func`, whole pages, reach another memory
/// window: a memory BAR of another function, or one of `func`'s holding its MSI-X table or
/// pending bits? A BAR smaller than a page is mapped as its whole page, and another
/// function's registers there (its MSI-X table: where its messages write) are not the
/// driver's (found by an audit). `all`: every function (`pci::functions`).
pub fn page_shared(func: &Function, index: usize, all: &[Function]) -> bool {
    let Some(b) = func.bars.get(index) else {
        return false;
    };
    let page = crate::arch::x86_64::paging::PAGE_SIZE;
    let lo = b.base & !(page - 1);
    let hi = b.base.saturating_add(b.size).saturating_add(page - 1) & !(page - 1);
    all.iter().any(|g| {
        g.bars.iter().enumerate().any(|(i, c)| {
            let mine = g.bdf == func.bdf;
            let other = !mine || (i != index && msix::holds_table(g, i as u8));
            other
                && !c.io
                && c.size != 0
                && c.base != 0
                && c.base < hi
                && lo < c.base.saturating_add(c.size)
        })
    })
}

/// `DEV_LIST`'s records.
pub fn list() -> alloc::vec::Vec<abi::dev::PciInfo> {
    pci::functions()
        .iter()
        .map(|f| {
            let id = id_of(f.bdf.packed()).unwrap_or(ResId(0));
            let holder = local::with_state(id, &[], |d: &mut Device| Ok(d.holder))
                .ok()
                .flatten()
                .filter(|&p| !crate::proc::has_ended(p))
                .map_or(0, |p| p.serial());
            let mut bars = [abi::dev::BarInfo::default(); 6];
            for (o, b) in bars.iter_mut().zip(f.bars.iter()) {
                o.base = b.base;
                o.size = b.size;
                o.flags = u64::from(b.io) | u64::from(b.prefetch) << 1;
            }
            let msix_on = local::with_state(id, &[], |d: &mut Device| Ok(d.msix_on)).unwrap_or(false);
            abi::dev::PciInfo {
                id,
                bdf: f.bdf.packed(),
                vendor: f.vendor,
                device: f.device,
                irq_line: f.irq_line,
                irq_pin: f.irq_pin,
                class: f.class,
                holder,
                bars,
                msix_entries: f.msix.map_or(0, |m| m.entries),
                msix_bar: f.msix.map_or(0xff, |m| m.table_bar),
                irq_msix: u8::from(msix_on),
                msix_pba_bar: f.msix.map_or(0xff, |m| m.pba_bar),
                reserved: [0; 3],
            }
        })
        .collect()
}

impl Device {
    /// Is its interrupt routed to a holder that is still alive?
    fn routed(&self) -> bool {
        self.irq_to.is_some() && self.holder.is_some_and(|h| !crate::proc::has_ended(h))
    }

    /// Is it routed, by its line (not by MSI-X)?
    fn on_line(&self) -> bool {
        self.routed() && !self.msix_on
    }

    /// Its interrupt came (its line or MSI-X entry is masked now): the message to send,
    /// if its holder is alive and has acknowledged the last one (it is then waited for);
    /// a holder that ended is unrouted, with no message.
    fn interrupted(&mut self) -> Option<(ResId, u16)> {
        if !self.routed() {
            self.irq_to = None;
            self.irq_masked = false;
            return None;
        }
        let ep = self.irq_to.filter(|_| !self.irq_masked)?;
        self.irq_masked = true;
        self.irqs += 1;
        Some((ep, self.func.bdf.packed()))
    }
}

/// The MSI-X vector device `id` (function `f`) would interrupt at, with core 0's APIC id;
/// `None` if it interrupts by its line (no usable MSI-X, `pci.irq=line`, or beyond the
/// vectors kept for devices).
fn msi_vector(id: ResId, f: &Function) -> Option<(u8, u32)> {
    if LINE_ONLY.load(Ordering::Relaxed) || !msix::usable(f) {
        return None;
    }
    let index = devices().iter().position(|&d| d == id)? as u32;
    let apic = pci_irq::core0_apic_id()?;
    (index < msix::VECTORS).then(|| ((msix::VEC_MSI_BASE + u64::from(index)) as u8, apic))
}

/// Is legacy line `line` wanted by a device other than `except` (an interrupt routed to a
/// live holder)? Lines may be shared (QEMU's `pc` machine puts several functions on one).
fn line_in_use(line: u8, except: Option<ResId>) -> bool {
    devices().iter().any(|&id| {
        Some(id) != except
            && local::with_state(id, &[], |d: &mut Device| {
                Ok(d.func.irq_line == line && d.on_line())
            })
            .unwrap_or(false)
    })
}

/// The device resources of this core: those [`create_all`] made (core 0's; none elsewhere).
/// Kept in [`DEVICES`] rather than found by listing the core's resources, because the
/// interrupt and its acknowledgement ask on every device interrupt, and a listing builds a
/// record of every resource of the core (hundreds: tens of thousands of instructions).
fn devices() -> &'static [ResId] {
    match DEVICES.get() {
        Some(ids) if current_core() == 0 => ids,
        _ => &[],
    }
}

/// DEV_IRQ: deliver the held device's interrupt to `endpoint` (the caller's own: it must
/// be able to receive there), or stop (`endpoint` 0). Returns 1 if it comes by MSI-X
/// (entry 0 of the function's table: the driver points its device there), 0 if by its
/// line.
pub fn irq(id: ResId, endpoint: u64) -> Result<u64, Error> {
    let (line, pin, func) = with_held(id, |d| Ok((d.func.irq_line, d.func.irq_pin, d.func)))?;
    if endpoint == 0 {
        let msix_on = with_held(id, |d| {
            d.irq_to = None;
            d.irq_masked = false;
            Ok(d.msix_on)
        })?;
        if msix_on {
            // MSI-X stays on with its entry masked: the function's line stays quiet, so a
            // device nobody serves cannot hold a shared line.
            msix::set_masked(func, true);
        } else if line_in_use(line, Some(id)) {
            // Shared: the others may have been waiting for this one's acknowledgement.
            unmask_unless_pending(line, id);
        } else {
            let _ = pci_irq::set(line, true);
        }
        return Ok(0);
    }
    let ep = ResId(endpoint);
    if ep.kind() != Some(abi::res::ResType::Endpoint) {
        return Err(Error::WrongType);
    }
    let me = crate::proc::running_pid().ok_or(Error::NoSuchProcess)?;
    if super::endpoint::owner(ep, false)? != me {
        return Err(Error::Denied);
    }
    if let Some((vector, apic)) = msi_vector(id, func) {
        let on = with_held(id, |d| {
            d.irq_to = Some(ep);
            d.irq_masked = false;
            d.msix_on = msix::enable(d.func, vector, apic);
            Ok(d.msix_on)
        })?;
        if on {
            // Its line is quiet from now on; a partner on it may have been waiting for
            // this one's acknowledgement (it was on the line before).
            if line_in_use(line, Some(id)) {
                unmask_unless_pending(line, id);
            } else {
                let _ = pci_irq::set(line, true);
            }
            msix::set_masked(func, false);
            return Ok(1);
        }
    }
    // By its line: MSI-X off, if an earlier holder (or mode) had it on.
    if with_held(id, |d| Ok(core::mem::take(&mut d.msix_on)))? {
        msix::disable(func);
    }
    if pin == 0 || pci_irq::gsi_of(line).is_none() {
        with_held(id, |d| {
            d.irq_to = None;
            Ok(())
        })?;
        return Err(Error::NotSupported);
    }
    with_held(id, |d| {
        d.irq_to = Some(ep);
        d.irq_masked = false;
        Ok(())
    })?;
    unmask_unless_pending(line, id);
    Ok(0)
}

/// DEV_IRQ_ACK: the holder has served its device; unmask its MSI-X entry, or its line
/// unless another live holder on the same (shared) line has not acknowledged its message
/// yet.
pub fn irq_ack(id: ResId) -> Result<u64, Error> {
    let (line, msix_on, func) = with_held(id, |d| {
        if d.irq_to.is_none() {
            return Err(Error::InvalidArgument);
        }
        if d.irq_masked {
            d.acks += 1;
        }
        d.irq_masked = false;
        Ok((d.func.irq_line, d.msix_on, d.func))
    })?;
    if msix_on {
        msix::set_masked(func, false);
    } else {
        unmask_unless_pending(line, id);
    }
    Ok(0)
}

/// Unmask line `line` unless a live holder of a device on it other than `id` has not
/// acknowledged its last message (a shared line: unmasked once all have acknowledged).
fn unmask_unless_pending(line: u8, id: ResId) {
    // A holder that ended has nothing to acknowledge.
    let others_pending = devices().iter().any(|&o| {
        o != id
            && local::with_state(o, &[], |d: &mut Device| {
                Ok(d.func.irq_line == line && d.on_line() && d.irq_masked)
            })
            .unwrap_or(false)
    });
    if !others_pending {
        let _ = pci_irq::set(line, false);
    }
}

/// An interrupt on GSI `gsi` (core 0, from the entry; the line is masked first and stays
/// so until acknowledged): a one-way message, as the kernel, to every live holder on that
/// line that has acknowledged its last one (a line may be shared: each of its holders
/// hears it, and it is unmasked once all have acknowledged). A holder that ended is
/// unrouted here: no message to its dead endpoint, and the line stays masked unless a live
/// holder shares it.
pub fn on_interrupt(gsi: u32) {
    let mut to = alloc::vec::Vec::new();
    let mut line = None;
    for &id in devices() {
        let _ = local::with_state(id, &[], |d: &mut Device| {
            if !d.msix_on && pci_irq::gsi_of(d.func.irq_line) == Some(gsi) {
                line = Some(d.func.irq_line);
                to.extend(d.interrupted());
            }
            Ok(())
        });
    }
    if let Some(line) = line {
        let _ = pci_irq::set(line, true);
    }
    tell(&to);
}

/// An MSI-X message at vector `VEC_MSI_BASE + index` (core 0, from the entry): device
/// `index`'s entry is masked until acknowledged, and its live holder gets a one-way
/// message as for a line. One whose holder ended stays masked and unrouted.
pub fn on_msi(index: u32) {
    let Some(&id) = devices().get(index as usize) else {
        return;
    };
    let to = local::with_state(id, &[], |d: &mut Device| {
        if !d.msix_on {
            return Ok(None);
        }
        msix::set_masked(d.func, true);
        Ok(d.interrupted())
    });
    if let Ok(Some(to)) = to {
        tell(&[to]);
    }
}

/// The interrupt messages `to` (endpoint, the device's packed bus/device/function), sent
/// as the kernel.
fn tell(to: &[(ResId, u16)]) {
    if to.is_empty() {
        return;
    }
    let saved = super::snapshot_flow();
    super::begin_flow(UserId::KERNEL);
    for &(ep, bdf) in to {
        let msg = abi::ipc::Msg {
            label: abi::dev::IRQ_LABEL,
            words: [u64::from(bdf), 0, 0, 0, 0, 0],
        };
        let _ = crate::ipc::kernel_send(ep, msg);
    }
    super::put_back_flow(&saved);
}

/// Is device `id`'s interrupt masked in the hardware now: its MSI-X entry if it comes by
/// MSI-X, else its line at the IOAPIC (for tests)? With whether it comes by MSI-X.
pub fn hardware_masked(id: ResId) -> Option<(bool, bool)> {
    let (func, msix_on) = local::with_state(id, &[], |d: &mut Device| Ok((d.func, d.msix_on))).ok()?;
    if msix_on {
        msix::is_masked(func).map(|m| (m, true))
    } else {
        pci_irq::is_masked(func.irq_line).map(|m| (m, false))
    }
}

/// Does `pid` hold a device (on this core)?
pub fn holds_any(pid: Pid) -> bool {
    current_core() == 0
        && devices().iter().any(|&id| {
            local::with_state(id, &[], |d: &mut Device| Ok(d.holder == Some(pid))).unwrap_or(false)
        })
}

/// Interrupt messages delivered for device `id` so far (0 for anything else).
pub fn irqs_of(id: ResId) -> u64 {
    local::with_state(id, &[], |d: &mut Device| Ok(d.irqs)).unwrap_or(0)
}

/// For tests: device `id`'s interrupt messages delivered, acknowledgements that unmasked,
/// whether a message waits for its acknowledgement, and whether it is routed to a live
/// holder.
pub fn irq_state(id: ResId) -> Option<(u64, u64, bool, bool)> {
    local::with_state(id, &[], |d: &mut Device| {
        Ok((d.irqs, d.acks, d.irq_masked, d.routed()))
    })
    .ok()
}

