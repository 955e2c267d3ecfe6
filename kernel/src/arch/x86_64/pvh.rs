//! The PVH boot protocol's `hvm_start_info`: memory map, command line, modules, RSDP.
//!
//! Layouts from Xen's `public/arch-x86/hvm/start_info.h` (version 1). The bootstrap core
//! copies what it needs into a [`BootInfo`] before anything can overwrite low memory, and
//! validates every field: a loader that hands us garbage gets a clear panic, not a wild read.

use super::paging::phys_to_virt;
use frames::PhysRange;

const MAGIC: u32 = 0x336e_c578;
/// Entries of the memory map kept; QEMU gives fewer than ten.
pub const MAX_MEMMAP: usize = 64;
/// Boot modules kept.
pub const MAX_MODULES: usize = 8;
/// Longest command line kept (longer ones are cut, with a warning).
pub const MAX_CMDLINE: usize = 1024;

#[repr(C)]
#[derive(Clone, Copy)]
struct StartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ModlistEntry {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct MemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

/// E820 type of usable RAM.
pub const MEM_RAM: u32 = 1;
/// E820 type of ACPI tables the OS may reclaim once read.
pub const MEM_ACPI_RECLAIMABLE: u32 = 3;
/// E820 type of ACPI non-volatile storage.
pub const MEM_ACPI_NVS: u32 = 4;

/// One memory-map entry.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemRegion {
    pub start: u64,
    pub end: u64,
    pub kind: u32,
}

/// A boot module (the boot archive, later).
#[derive(Clone, Copy, Debug, Default)]
pub struct Module {
    pub start: u64,
    pub size: u64,
}

/// What the loader told us, copied out of low memory.
pub struct BootInfo {
    pub memmap: heapless::Vec<MemRegion, MAX_MEMMAP>,
    pub modules: heapless::Vec<Module, MAX_MODULES>,
    pub cmdline: heapless::String<MAX_CMDLINE>,
    pub cmdline_truncated: bool,
    pub rsdp: Option<u64>,
}

impl BootInfo {
    /// RAM ranges from the memory map.
    pub fn ram(&self) -> impl Iterator<Item = PhysRange> + '_ {
        self.memmap
            .iter()
            .filter(|r| r.kind == MEM_RAM)
            .map(|r| PhysRange::new(r.start, r.end))
    }
}

/// Read a `T` from physical memory.
///
/// # Safety
/// `paddr..paddr+size_of::<T>()` must be mapped by the direct map and hold a valid `T`.
unsafe fn read_phys<T: Copy>(paddr: u64) -> T {
    // SAFETY: per the caller; unaligned reads are allowed because the loader decides layout.
    unsafe { core::ptr::read_unaligned(phys_to_virt(paddr) as *const T) }
}

/// Copy a NUL-terminated string of at most `max` bytes out of physical memory.
///
/// # Safety
/// The bytes up to the terminator (or `max`) must be mapped.
unsafe fn read_cstr<const N: usize>(paddr: u64, out: &mut heapless::String<N>) -> bool {
    for i in 0..N as u64 {
        // SAFETY: per the caller.
        let b: u8 = unsafe { read_phys(paddr + i) };
        if b == 0 {
            return false;
        }
        // Non-ASCII bytes become '?': the command line is ASCII by definition.
        let c = if b.is_ascii() { b as char } else { '?' };
        if out.push(c).is_err() {
            return true;
        }
    }
    true
}

/// Parse the start-info structure the loader left at `paddr`.
///
/// # Safety
/// `paddr` must be what the PVH loader passed in `%ebx`, and the boot direct map (first
/// GiB) must be active.
pub unsafe fn parse(paddr: u64) -> BootInfo {
    assert!(
        paddr != 0 && paddr < (1 << 30),
        "PVH start_info at {paddr:#x}: not where a loader puts it"
    );
    // SAFETY: the loader placed a StartInfo here; low memory is direct-mapped.
    let si: StartInfo = unsafe { read_phys(paddr) };
    assert!(
        si.magic == MAGIC,
        "PVH start_info magic {:#x}, expected {MAGIC:#x}",
        si.magic
    );
    let mut info = BootInfo {
        memmap: heapless::Vec::new(),
        modules: heapless::Vec::new(),
        cmdline: heapless::String::new(),
        cmdline_truncated: false,
        rsdp: (si.rsdp_paddr != 0).then_some(si.rsdp_paddr),
    };
    // Only the first GiB is mapped this early; a loader that points elsewhere is broken.
    let early_mapped = |at: u64, len: u64| at.checked_add(len).is_some_and(|end| end <= 1 << 30);
    assert!(
        si.cmdline_paddr == 0 || early_mapped(si.cmdline_paddr, MAX_CMDLINE as u64),
        "PVH command line at {:#x}: outside the first GiB",
        si.cmdline_paddr
    );
    assert!(
        early_mapped(si.memmap_paddr, u64::from(si.memmap_entries) * 24),
        "PVH memory map at {:#x}: outside the first GiB",
        si.memmap_paddr
    );
    assert!(
        si.nr_modules == 0 || early_mapped(si.modlist_paddr, u64::from(si.nr_modules) * 32),
        "PVH module list at {:#x}: outside the first GiB",
        si.modlist_paddr
    );
    if si.cmdline_paddr != 0 {
        // SAFETY: the loader's command line is a NUL-terminated string in low memory.
        info.cmdline_truncated = unsafe { read_cstr(si.cmdline_paddr, &mut info.cmdline) };
    }
    assert!(
        si.version >= 1 && si.memmap_entries > 0,
        "PVH loader gave no memory map (version {})",
        si.version
    );
    for i in 0..u64::from(si.memmap_entries).min(MAX_MEMMAP as u64) {
        // SAFETY: the loader's memory map holds `memmap_entries` entries.
        let e: MemmapEntry = unsafe { read_phys(si.memmap_paddr + i * 24) };
        if e.size == 0 {
            continue;
        }
        let region = MemRegion {
            start: e.addr,
            end: e.addr.saturating_add(e.size),
            kind: e.kind,
        };
        let _ = info.memmap.push(region);
    }
    for i in 0..u64::from(si.nr_modules).min(MAX_MODULES as u64) {
        // SAFETY: the loader's module list holds `nr_modules` entries.
        let m: ModlistEntry = unsafe { read_phys(si.modlist_paddr + i * 32) };
        let _ = info.modules.push(Module {
            start: m.paddr,
            size: m.size,
        });
    }
    info
}
