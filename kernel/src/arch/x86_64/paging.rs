//! The kernel's address space: direct map, kernel image with W^X, per-core stack slots.
//!
//! Virtual layout (the lower half, below `0x0000_8000_0000_0000`, is left empty for
//! per-process address spaces):
//!
//! | range                          | PML4 slots | what                                       |
//! |--------------------------------|------------|--------------------------------------------|
//! | `0xffff_8000_0000_0000` + phys | 256..      | direct map of physical memory, RW, NX      |
//! | `0xffff_c000_0000_0000` + core·512 GiB | 384 + core | core's kernel stacks, with guard pages |
//! | `0xffff_ffff_8000_0000` + phys | 511        | kernel image: text RX, rodata R, data RW NX |
//!
//! The page-table walker works on physical addresses through the direct map and treats each
//! entry as an `AtomicU64`: cores add entries under their own PML4 slot concurrently, and
//! no Rust reference to a whole table ever exists, so there is no aliasing to reason about.

use super::pvh::{MemRegion, MEM_ACPI_NVS, MEM_ACPI_RECLAIMABLE, MEM_RAM};
use core::sync::atomic::{AtomicU64, Ordering};
pub use x86_64::structures::paging::PageTableFlags as Flags;

/// Where physical memory is mapped in every address space.
pub const PHYS_OFFSET: u64 = 0xffff_8000_0000_0000;
/// Where the kernel image is linked (physical address + this).
pub const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;
/// First PML4 slot of the per-core stack area.
pub const KSTACK_PML4_SLOT: usize = 384;
/// Bytes of virtual space per PML4 slot.
pub const PML4_SLOT_SPAN: u64 = 1 << 39;

pub const PAGE_SIZE: u64 = 4096;
pub const HUGE_PAGE_SIZE: u64 = 2 << 20;
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;

/// Virtual address of a physical address in the direct map.
#[inline]
pub const fn phys_to_virt(paddr: u64) -> u64 {
    PHYS_OFFSET + paddr
}

/// Physical address behind a kernel-half virtual address that is in the direct map or the
/// kernel image; `None` otherwise.
pub fn kernel_virt_to_phys(vaddr: u64) -> Option<u64> {
    if vaddr >= KERNEL_VMA {
        Some(vaddr - KERNEL_VMA)
    } else if (PHYS_OFFSET..PHYS_OFFSET + (1 << 46)).contains(&vaddr) {
        Some(vaddr - PHYS_OFFSET)
    } else {
        None
    }
}

/// Why a mapping could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// No frame for an intermediate table.
    NoMemory,
    /// Something is already mapped there.
    AlreadyMapped,
    /// A 2 MiB page covers the address, so a 4 KiB one cannot be placed.
    HugePageInTheWay,
}

/// The entry `index` of the table at physical `table`.
pub fn entry_of(table: u64, index: usize) -> &'static AtomicU64 {
    entry(table, index)
}

fn entry(table: u64, index: usize) -> &'static AtomicU64 {
    debug_assert!(index < 512 && table & 0xfff == 0);
    // SAFETY: `table` is a page-table frame reachable through the direct map; entries are
    // 8-byte aligned u64s, and AtomicU64 has the same layout. Page-table frames are never
    // freed while the kernel runs, so the reference stays valid.
    unsafe { &*((phys_to_virt(table) + index as u64 * 8) as *const AtomicU64) }
}

/// Is `vaddr` in the lower half, which belongs to processes?
pub const fn is_user_half(vaddr: u64) -> bool {
    vaddr < 0x0000_8000_0000_0000
}

fn indices(vaddr: u64) -> [usize; 4] {
    [
        ((vaddr >> 39) & 511) as usize,
        ((vaddr >> 30) & 511) as usize,
        ((vaddr >> 21) & 511) as usize,
        ((vaddr >> 12) & 511) as usize,
    ]
}

/// Zero a freshly allocated frame through the direct map.
pub fn zero_frame(paddr: u64) {
    // SAFETY: the caller just allocated this frame; nobody else refers to it.
    unsafe { core::ptr::write_bytes(phys_to_virt(paddr) as *mut u8, 0, PAGE_SIZE as usize) };
}

/// The next-level table under `e`, creating it with `alloc` if absent.
fn next_table(
    e: &AtomicU64,
    user_half: bool,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<u64, MapError> {
    let v = e.load(Ordering::Acquire);
    if v & Flags::PRESENT.bits() != 0 {
        if v & Flags::HUGE_PAGE.bits() != 0 {
            return Err(MapError::HugePageInTheWay);
        }
        return Ok(v & ADDR_MASK);
    }
    let frame = alloc().ok_or(MapError::NoMemory)?;
    zero_frame(frame);
    // Intermediate entries allow everything (user access only in the lower half); the
    // leaf decides.
    let mut link = frame | (Flags::PRESENT | Flags::WRITABLE).bits();
    if user_half {
        link |= Flags::USER_ACCESSIBLE.bits();
    }
    e.store(link, Ordering::Release);
    Ok(frame)
}

/// Map one 4 KiB page `vaddr -> paddr` under `root`.
///
/// # Safety
/// `root` must be a page table whose affected part only the calling core changes, and the
/// new mapping must not make memory that Rust code owns reachable in a conflicting way.
pub unsafe fn map_4k(
    root: u64,
    vaddr: u64,
    paddr: u64,
    flags: Flags,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<(), MapError> {
    let [i4, i3, i2, i1] = indices(vaddr);
    let user = is_user_half(vaddr);
    let pdpt = next_table(entry(root, i4), user, alloc)?;
    let pd = next_table(entry(pdpt, i3), user, alloc)?;
    let pt = next_table(entry(pd, i2), user, alloc)?;
    let e = entry(pt, i1);
    if e.load(Ordering::Relaxed) & Flags::PRESENT.bits() != 0 {
        return Err(MapError::AlreadyMapped);
    }
    e.store(
        (paddr & ADDR_MASK) | (flags | Flags::PRESENT).bits(),
        Ordering::Release,
    );
    Ok(())
}

/// Map one 2 MiB page `vaddr -> paddr` under `root`.
///
/// # Safety
/// As for [`map_4k`].
pub unsafe fn map_2m(
    root: u64,
    vaddr: u64,
    paddr: u64,
    flags: Flags,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<(), MapError> {
    let [i4, i3, i2, _] = indices(vaddr);
    let user = is_user_half(vaddr);
    let pdpt = next_table(entry(root, i4), user, alloc)?;
    let pd = next_table(entry(pdpt, i3), user, alloc)?;
    let e = entry(pd, i2);
    if e.load(Ordering::Relaxed) & Flags::PRESENT.bits() != 0 {
        return Err(MapError::AlreadyMapped);
    }
    let bits = (paddr & ADDR_MASK) | (flags | Flags::PRESENT | Flags::HUGE_PAGE).bits();
    e.store(bits, Ordering::Release);
    Ok(())
}

/// Remove the 4 KiB mapping of `vaddr` and flush it from this core's TLB; returns the
/// physical address it mapped.
///
/// # Safety
/// Nothing may use the page any more, on any core.
pub unsafe fn unmap_4k(root: u64, vaddr: u64) -> Option<u64> {
    let [i4, i3, i2, i1] = indices(vaddr);
    let mut table = root;
    for i in [i4, i3, i2] {
        let v = entry(table, i).load(Ordering::Acquire);
        if v & Flags::PRESENT.bits() == 0 || v & Flags::HUGE_PAGE.bits() != 0 {
            return None;
        }
        table = v & ADDR_MASK;
    }
    let old = entry(table, i1).swap(0, Ordering::AcqRel);
    x86_64::instructions::tlb::flush(x86_64::VirtAddr::new(vaddr));
    (old & Flags::PRESENT.bits() != 0).then_some(old & ADDR_MASK)
}

/// What a virtual address maps to: physical address and the effective permissions (a
/// page is writable only if every level allows it, executable only if no level forbids it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    pub paddr: u64,
    pub writable: bool,
    pub executable: bool,
    pub user: bool,
}

/// Walk `root` for `vaddr`.
pub fn translate(root: u64, vaddr: u64) -> Option<Translation> {
    let idx = indices(vaddr);
    let mut table = root;
    let (mut writable, mut executable, mut user) = (true, true, true);
    for (level, &i) in idx.iter().enumerate() {
        let v = entry(table, i).load(Ordering::Acquire);
        let f = Flags::from_bits_truncate(v);
        if !f.contains(Flags::PRESENT) {
            return None;
        }
        writable &= f.contains(Flags::WRITABLE);
        executable &= !f.contains(Flags::NO_EXECUTE);
        user &= f.contains(Flags::USER_ACCESSIBLE);
        let leaf_huge = f.contains(Flags::HUGE_PAGE) && (level == 1 || level == 2);
        if level == 3 || leaf_huge {
            let page_mask = match level {
                1 => (1u64 << 30) - 1,
                2 => HUGE_PAGE_SIZE - 1,
                _ => PAGE_SIZE - 1,
            };
            let paddr = (v & ADDR_MASK & !page_mask) | (vaddr & page_mask);
            return Some(Translation {
                paddr,
                writable,
                executable,
                user,
            });
        }
        table = v & ADDR_MASK;
    }
    None
}

static KERNEL_ROOT: AtomicU64 = AtomicU64::new(0);

/// The kernel's own top-level table (its upper half is shared by every address space).
pub fn kernel_root() -> u64 {
    KERNEL_ROOT.load(Ordering::Acquire)
}

/// Entries of a page table scanned at once by [`present_entries`]: 512 bytes.
const SCAN_GROUP: usize = 64;

/// The present entries of page-table frame `table` (index, entry), in index order, read
/// without atomics, a group of [`SCAN_GROUP`] at a time: a group with no present entry
/// costs one OR over it (which the compiler does 16 bytes at a time), not a test per
/// entry. A process's tables are mostly empty (each region of its address space has its
/// own path of tables from the root), so skipping empty groups is most of a walk.
///
/// # Safety
/// Nobody may change `table` while the iterator lives.
unsafe fn present_entries(table: u64, slots: usize) -> impl Iterator<Item = (usize, u64)> {
    // SAFETY: a page-table frame reachable through the direct map, 512 aligned u64s, not
    // changed meanwhile (the caller's promise).
    let all: &[u64; 512] = unsafe { &*(phys_to_virt(table) as *const [u64; 512]) };
    all[..slots]
        .chunks(SCAN_GROUP)
        .enumerate()
        .filter(|(_, g)| g.iter().fold(0, |a, &e| a | e) & Flags::PRESENT.bits() != 0)
        .flat_map(|(n, g)| {
            g.iter()
                .enumerate()
                .filter(|(_, &e)| e & Flags::PRESENT.bits() != 0)
                .map(move |(i, &e)| (n * SCAN_GROUP + i, e))
        })
}

/// Free every frame of the lower half of `root`: the page tables themselves (not `root`)
/// and each leaf (4 KiB page; user mappings never use huge pages) that `free` is given
/// with its address, `(vaddr, frame, leaf)`, and may keep (an attachment's frame belongs
/// to its vregion). The entries are left as they are: the frames are freed, and a page
/// table is zeroed again when it is next allocated (`next_table`).
///
/// # Safety
/// No core may use or change the lower half of `root` any more.
pub unsafe fn free_lower_half(root: u64, free: &mut dyn FnMut(u64, u64, bool)) {
    fn walk(table: u64, level: u32, base: u64, free: &mut dyn FnMut(u64, u64, bool)) {
        // SAFETY: the caller's promise: nobody changes these tables any more.
        for (i, v) in unsafe { present_entries(table, 512) } {
            let at = base + ((i as u64) << (12 + 9 * (level - 1)));
            let next = v & ADDR_MASK;
            let leaf = level == 1 || v & Flags::HUGE_PAGE.bits() != 0;
            if !leaf {
                walk(next, level - 1, at, free);
            }
            free(at, next, leaf);
        }
    }
    // SAFETY: as above; the lower half is the root's first 256 entries.
    for (slot, v) in unsafe { present_entries(root, 256) } {
        walk(v & ADDR_MASK, 3, (slot as u64) << 39, free);
        free((slot as u64) << 39, v & ADDR_MASK, false);
    }
}

/// Every 4 KiB page mapped in the lower half of `root`: (address, frame, writable,
/// executable), in address order.
pub fn lower_half_pages(root: u64) -> alloc::vec::Vec<(u64, u64, bool, bool)> {
    fn walk(table: u64, level: u32, base: u64, out: &mut alloc::vec::Vec<(u64, u64, bool, bool)>) {
        // SAFETY: the caller's address space, which nothing changes while it is copied.
        for (i, v) in unsafe { present_entries(table, 512) } {
            let at = base + ((i as u64) << (12 + 9 * (level - 1)));
            if level == 1 {
                out.push((
                    at,
                    v & ADDR_MASK,
                    v & Flags::WRITABLE.bits() != 0,
                    v & Flags::NO_EXECUTE.bits() == 0,
                ));
            } else if v & Flags::HUGE_PAGE.bits() == 0 {
                walk(v & ADDR_MASK, level - 1, at, out);
            }
        }
    }
    let mut out = alloc::vec::Vec::new();
    // SAFETY: as above; the lower half is the root's first 256 entries.
    for (slot, v) in unsafe { present_entries(root, 256) } {
        walk(v & ADDR_MASK, 3, (slot as u64) << 39, &mut out);
    }
    out
}

/// Switch this core to the address space `root` (no-op if already active); whether it
/// switched (a CR3 write, which flushes the core's non-global translations).
///
/// # Safety
/// `root` must map the kernel half like the kernel's own tables.
pub unsafe fn activate(root: u64) -> bool {
    if active_root() == root {
        return false;
    }
    // SAFETY: per the caller, the kernel stays mapped.
    unsafe { super::cpu::write_cr3(root) };
    true
}

/// Physical address of the active top-level table.
pub fn active_root() -> u64 {
    super::cpu::read_cr3() & ADDR_MASK
}

/// The direct map always covers physical memory below this (RAM, firmware tables, devices).
pub const LOW_DIRECT_MAP: u64 = 4 << 30;
/// The direct map never reaches past this (64 TiB), where the per-core stack slots begin.
const DIRECT_MAP_LIMIT: u64 = (KSTACK_PML4_SLOT as u64 - 256) * PML4_SLOT_SPAN;

/// Is this firmware region memory (RAM or ACPI tables), as opposed to reserved or a device?
fn is_memory(r: &MemRegion) -> bool {
    matches!(r.kind, MEM_RAM | MEM_ACPI_RECLAIMABLE | MEM_ACPI_NVS)
}

/// End of the direct map: 4 GiB or the end of memory, whichever is higher (at most 64 TiB).
pub fn direct_map_top(regions: &[MemRegion]) -> u64 {
    let top = regions
        .iter()
        .filter(|r| is_memory(r))
        .map(|r| r.end)
        .max()
        .unwrap_or(0);
    top.max(LOW_DIRECT_MAP)
        .next_multiple_of(HUGE_PAGE_SIZE)
        .min(DIRECT_MAP_LIMIT)
}

/// Page-table frames [`build_kernel_space`] may need for `regions` (an upper bound).
pub fn kernel_space_frames(regions: &[MemRegion]) -> u64 {
    let gib = direct_map_top(regions).div_ceil(1 << 30);
    // A PD per GiB, a PDPT per 512 GiB, plus the kernel image's tables (PDPT, PD and one PT
    // per 2 MiB of image) and the root.
    gib + gib.div_ceil(512) + 16
}

extern "C" {
    static __text_start: u8;
    static __text_end: u8;
    static __rodata_start: u8;
    static __rodata_end: u8;
    static __data_start: u8;
    static __kernel_end: u8;
    static __kernel_phys_start: u8;
    static boot_pml4: u8;
}

/// Address of a linker symbol.
macro_rules! sym_addr {
    ($s:ident) => {
        // Only the address of the linker symbol is taken, never its contents.
        core::ptr::addr_of!($s) as u64
    };
}

/// The kernel image's parts, as virtual address ranges.
#[derive(Debug, Clone, Copy)]
pub struct ImageLayout {
    pub text: (u64, u64),
    pub rodata: (u64, u64),
    pub data: (u64, u64),
    /// Physical range of the whole image, boot section included.
    pub phys: (u64, u64),
}

pub fn image_layout() -> ImageLayout {
    ImageLayout {
        text: (sym_addr!(__text_start), sym_addr!(__text_end)),
        rodata: (sym_addr!(__rodata_start), sym_addr!(__rodata_end)),
        data: (sym_addr!(__data_start), sym_addr!(__kernel_end)),
        phys: (
            sym_addr!(__kernel_phys_start),
            sym_addr!(__kernel_end) - KERNEL_VMA,
        ),
    }
}

/// Physical address of the boot page tables (identity + direct map + kernel, first GiB).
/// Application processors use them to climb into the higher half.
pub fn boot_root() -> u64 {
    sym_addr!(boot_pml4)
}

/// Build the kernel's own page tables and switch this core to them.
///
/// `regions` is the firmware's memory map. The direct map uses 2 MiB pages. Below 4 GiB it
/// covers everything: write-back where the firmware describes memory (RAM, ACPI tables),
/// uncached elsewhere, where devices such as the local APIC and IOAPIC live. Above 4 GiB it
/// covers only memory: firmware reservations there (QEMU lists a 12 GiB HyperTransport
/// hole near 1 TiB) would cost thousands of page-table frames for nothing. Returns the new
/// root.
///
/// # Safety
/// Must run once, on the bootstrap core, while the boot page tables are active; `alloc`
/// must hand out zeroable frames nobody else uses.
pub unsafe fn build_kernel_space(
    regions: &[MemRegion],
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Result<u64, MapError> {
    let root = alloc().ok_or(MapError::NoMemory)?;
    zero_frame(root);

    let direct = Flags::WRITABLE | Flags::NO_EXECUTE | Flags::GLOBAL;
    let uncached = direct | Flags::NO_CACHE | Flags::WRITE_THROUGH;
    let memory = |p: u64| {
        regions
            .iter()
            .any(|r| is_memory(r) && r.start < p + HUGE_PAGE_SIZE && p < r.end)
    };
    let top = direct_map_top(regions);
    let mut p = 0;
    while p < top {
        let is_memory = memory(p);
        if p < LOW_DIRECT_MAP || is_memory {
            let flags = if is_memory { direct } else { uncached };
            // SAFETY: a fresh root nobody else sees yet.
            unsafe { map_2m(root, phys_to_virt(p), p, flags, alloc)? };
        }
        p += HUGE_PAGE_SIZE;
    }

    // Kernel image, 4 KiB pages, W^X.
    let l = image_layout();
    let parts = [
        (l.text, Flags::GLOBAL),
        (l.rodata, Flags::GLOBAL | Flags::NO_EXECUTE),
        (l.data, Flags::GLOBAL | Flags::NO_EXECUTE | Flags::WRITABLE),
    ];
    for ((start, end), flags) in parts {
        let mut v = start & !(PAGE_SIZE - 1);
        while v < end {
            // SAFETY: a fresh root nobody else sees yet.
            unsafe { map_4k(root, v, v - KERNEL_VMA, flags, alloc)? };
            v += PAGE_SIZE;
        }
    }

    // SAFETY: the new tables map the kernel image (code, stack in .bss, data) at the same
    // virtual addresses as the boot tables, and the direct map covers all memory in use.
    unsafe { super::cpu::write_cr3(root) };
    KERNEL_ROOT.store(root, Ordering::Release);
    Ok(root)
}
