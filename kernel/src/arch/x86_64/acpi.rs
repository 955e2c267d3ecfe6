//! What the firmware's ACPI tables say about the machine: the cores (MADT), the IOAPICs and
//! ISA interrupt overrides (MADT), and how to power off (FADT's PM1 control ports and the
//! `\_S5` sleep type from the DSDT).
//!
//! The `acpi` crate parses the static tables; the one bit of AML we need, the `_S5_`
//! package, is read by [`s5_sleep_type`] without an AML interpreter.

use super::cpu::outw;
use super::ioapic::IoApic;
use super::paging::phys_to_virt;
use acpi::fadt::Fadt;
use acpi::madt::{Madt, MadtEntry};
use acpi::{AcpiHandler, AcpiTables, PhysicalMapping};
use core::ptr::NonNull;

/// Maps ACPI tables through the direct map (all physical memory the firmware described is
/// in it), so nothing is ever mapped or unmapped.
#[derive(Clone, Copy)]
struct DirectMap;

impl AcpiHandler for DirectMap {
    unsafe fn map_physical_region<T>(&self, paddr: usize, size: usize) -> PhysicalMapping<Self, T> {
        let virt = phys_to_virt(paddr as u64) as *mut T;
        // SAFETY: the direct map covers every firmware-described region; the address is
        // non-null because PHYS_OFFSET is.
        unsafe { PhysicalMapping::new(paddr, NonNull::new_unchecked(virt), size, size, *self) }
    }
    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
}

/// An ISA interrupt remapped by the firmware.
#[derive(Clone, Copy, Debug)]
pub struct IrqOverride {
    pub irq: u8,
    pub gsi: u32,
    pub active_low: bool,
    pub level: bool,
}

/// The platform as the ACPI tables describe it.
pub struct Platform {
    /// APIC ids of usable cores, bootstrap core's first.
    pub apic_ids: heapless::Vec<u32, { abi::MAX_CORES }>,
    /// Cores the MADT lists as usable (may exceed `MAX_CORES`).
    pub cores_in_madt: usize,
    pub ioapics: heapless::Vec<IoApic, 8>,
    pub overrides: heapless::Vec<IrqOverride, 16>,
    /// PM1a/PM1b control ports and SLP_TYP values for S5 (power off).
    pub pm1_control: Option<(u16, Option<u16>)>,
    pub s5: Option<(u8, u8)>,
    bsp_seen: bool,
}

impl Platform {
    /// Global system interrupt and polarity/trigger of ISA `irq`.
    pub fn isa_irq(&self, irq: u8) -> IrqOverride {
        self.overrides
            .iter()
            .copied()
            .find(|o| o.irq == irq)
            .unwrap_or(IrqOverride {
                irq,
                gsi: u32::from(irq),
                active_low: false,
                level: false,
            })
    }
}

/// Read the tables. `rsdp` is the loader's hint; without it the BIOS area is searched.
pub fn discover(rsdp: Option<u64>, bsp_apic_id: u32) -> Result<Platform, &'static str> {
    // SAFETY: the RSDP address comes from the boot loader or the BIOS search, and the
    // handler maps through the direct map, which covers the tables.
    let tables = unsafe {
        match rsdp {
            Some(p) => AcpiTables::from_rsdp(DirectMap, p as usize),
            None => AcpiTables::search_for_rsdp_bios(DirectMap),
        }
    }
    .map_err(|_| "no valid ACPI RSDP/RSDT")?;

    let mut p = Platform {
        apic_ids: heapless::Vec::new(),
        cores_in_madt: 0,
        ioapics: heapless::Vec::new(),
        overrides: heapless::Vec::new(),
        pm1_control: None,
        s5: None,
        bsp_seen: false,
    };
    let madt = tables
        .find_table::<Madt>()
        .map_err(|_| "no MADT in the ACPI tables")?;
    let _ = p.apic_ids.push(bsp_apic_id);
    let add_core = |id: u32, flags: u32, p: &mut Platform| {
        // Bit 0: enabled; bit 1: can be enabled later (hot-plug), which we do not use.
        // 0xff (xAPIC) / 0xffffffff (x2APIC) mark unused entries; firmware may list a core
        // both as a local APIC and as a local x2APIC, so ids are de-duplicated.
        if flags & 1 != 0 && id != 0xff && id != u32::MAX {
            let known = id == bsp_apic_id || p.apic_ids.contains(&id);
            if !known || (id == bsp_apic_id && !p.bsp_seen) {
                p.cores_in_madt += 1;
            }
            if id == bsp_apic_id {
                p.bsp_seen = true;
            } else if !known {
                let _ = p.apic_ids.push(id);
            }
        }
    };
    for entry in madt.get().entries() {
        match entry {
            MadtEntry::LocalApic(e) => add_core(u32::from(e.apic_id), e.flags, &mut p),
            MadtEntry::LocalX2Apic(e) => add_core(e.x2apic_id, e.flags, &mut p),
            MadtEntry::IoApic(e) => {
                let _ = p.ioapics.push(IoApic {
                    phys: u64::from(e.io_apic_address),
                    gsi_base: e.global_system_interrupt_base,
                });
            }
            MadtEntry::InterruptSourceOverride(e) if e.bus == 0 => {
                let flags = e.flags;
                // MPS INTI flags: polarity bits 0-1 (3 = active low), trigger bits 2-3 (3 = level).
                let _ = p.overrides.push(IrqOverride {
                    irq: e.irq,
                    gsi: e.global_system_interrupt,
                    active_low: flags & 0x3 == 0x3,
                    level: (flags >> 2) & 0x3 == 0x3,
                });
            }
            _ => {}
        }
    }

    if let Ok(fadt) = tables.find_table::<Fadt>() {
        let port = |a: acpi::address::GenericAddress| match a.address_space {
            acpi::address::AddressSpace::SystemIo => u16::try_from(a.address).ok(),
            _ => None,
        };
        if let Ok(a) = fadt.pm1a_control_block() {
            if let Some(pa) = port(a) {
                let pb = fadt.pm1b_control_block().ok().flatten().and_then(port);
                p.pm1_control = Some((pa, pb));
            }
        }
    }
    if let Ok(dsdt) = tables.dsdt() {
        // SAFETY: the DSDT's AML stream lies in firmware memory covered by the direct map.
        let aml = unsafe {
            core::slice::from_raw_parts(
                phys_to_virt(dsdt.address as u64) as *const u8,
                dsdt.length as usize,
            )
        };
        p.s5 = s5_sleep_type(aml);
    }
    Ok(p)
}

/// Find `Name(_S5_, Package(){a, b, ...})` in AML and return (SLP_TYPa, SLP_TYPb).
///
/// Accepts the encodings firmware uses for small integers: ZeroOp, OneOp, BytePrefix.
pub fn s5_sleep_type(aml: &[u8]) -> Option<(u8, u8)> {
    // NameOp (0x08), optionally a root prefix '\\', then the name: other hits of the four
    // bytes (inside a method, say) are not the object.
    let at = aml.windows(4).enumerate().position(|(i, w)| {
        w == b"_S5_"
            && (i >= 1 && aml[i - 1] == 0x08 || i >= 2 && aml[i - 1] == b'\\' && aml[i - 2] == 0x08)
    })?;
    let mut i = at + 4;
    if *aml.get(i)? != 0x12 {
        return None; // not a PackageOp
    }
    i += 1;
    let pkg_len_bytes = usize::from(aml.get(i)? >> 6) + 1;
    i += pkg_len_bytes + 1; // PkgLength, then NumElements
    let int = |i: &mut usize| -> Option<u8> {
        match *aml.get(*i)? {
            0x00 => {
                *i += 1;
                Some(0)
            }
            0x01 => {
                *i += 1;
                Some(1)
            }
            0x0a => {
                *i += 2;
                aml.get(*i - 1).copied()
            }
            _ => None,
        }
    };
    let a = int(&mut i)?;
    let b = int(&mut i).unwrap_or(0);
    Some((a, b))
}

/// Enter S5 (soft off). Returns only if the machine did not power off.
pub fn poweroff(p: &Platform) {
    let Some((pm1a, pm1b)) = p.pm1_control else {
        return;
    };
    let (typ_a, typ_b) = p.s5.unwrap_or((0, 0));
    const SLP_EN: u16 = 1 << 13;
    // SAFETY: the FADT names these ports as the PM1 control registers; writing SLP_TYP with
    // SLP_EN requests the S5 state, which ends execution.
    unsafe {
        outw(pm1a, (u16::from(typ_a) << 10) | SLP_EN);
        if let Some(b) = pm1b {
            outw(b, (u16::from(typ_b) << 10) | SLP_EN);
        }
    }
}
