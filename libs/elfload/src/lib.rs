//! Checking an executable before the kernel maps it.
//!
//! [`plan`] takes the bytes of a program from the boot archive and either returns a
//! [`LoadPlan`] (entry point and the segments to map, each with its permissions and where
//! its bytes come from) or says precisely what is wrong with it. The kernel maps only what
//! a plan describes, so everything a malformed or hostile file could do wrong is caught
//! here, in pure code tested on the host: truncated headers, segments outside the file,
//! segments outside the user half or overlapping each other, writable-and-executable
//! segments, an entry point outside executable code, dynamic executables.
//!
//! The ELF structures are read with `goblin`; the rules are Musubi's.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::{EM_X86_64, ET_EXEC};
use goblin::elf::program_header::{ProgramHeader, PF_R, PF_W, PF_X, PT_INTERP, PT_LOAD};
use goblin::elf::Elf;

/// Lowest address a segment may start at (the first 64 KiB stay unmapped to catch null
/// pointers with offsets).
pub const USER_MIN: u64 = 0x1_0000;
/// Highest address (exclusive) a segment may reach. The stack and the rest of the lower
/// half above this belong to the kernel's layout of the process.
pub const USER_MAX: u64 = 0x0000_7f00_0000_0000;
/// Most loadable segments a program may have.
pub const MAX_SEGMENTS: usize = 16;
/// Most program headers an image may have (of any type; a static executable has about a
/// dozen). More is `BadProgramHeaders` before any is read: the table is read into the
/// heap of the kernel that loads it, and `e_phnum` may say 65,535 (3.6 MiB, found by an
/// audit).
pub const MAX_PROGRAM_HEADERS: usize = 64;
const PAGE: u64 = 4096;

/// One range to map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address of the first byte (need not be page-aligned).
    pub vaddr: u64,
    /// Bytes in memory; those past `file_size` are zero.
    pub mem_size: u64,
    /// Where the initialised bytes are in the file.
    pub file_offset: u64,
    pub file_size: u64,
    pub writable: bool,
    pub executable: bool,
}

impl Segment {
    /// First page and one past the last page the segment touches.
    pub fn pages(&self) -> (u64, u64) {
        (
            self.vaddr & !(PAGE - 1),
            (self.vaddr + self.mem_size).next_multiple_of(PAGE),
        )
    }
}

/// What to map and where to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadPlan {
    pub entry: u64,
    pub segments: heapless::Vec<Segment, MAX_SEGMENTS>,
    /// One past the highest page any segment touches (the heap can start here).
    pub end: u64,
}

/// Why a file is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Not an ELF file, or its header cannot be read.
    NotElf,
    /// ELF, but not 64-bit little-endian x86_64.
    WrongMachine,
    /// Not a statically linked executable (`ET_EXEC` without an interpreter).
    NotStaticExecutable,
    /// The program headers lie outside the file, cannot be read, or are more than
    /// [`MAX_PROGRAM_HEADERS`].
    BadProgramHeaders,
    /// No loadable segment, or more than [`MAX_SEGMENTS`].
    SegmentCount,
    /// A segment's bytes lie outside the file, or its file size exceeds its memory size.
    SegmentOutsideFile,
    /// A segment reaches outside `USER_MIN..USER_MAX` (for example into the kernel half).
    SegmentOutsideUserRange,
    /// Two segments share a page.
    SegmentsOverlap,
    /// A segment is both writable and executable.
    WritableAndExecutable,
    /// A segment's alignment is not a power of two, or its address and file offset
    /// disagree modulo the page size.
    BadAlignment,
    /// The entry point is not inside an executable segment.
    BadEntry,
}

impl LoadError {
    pub fn message(self) -> &'static str {
        match self {
            LoadError::NotElf => "not an ELF file",
            LoadError::WrongMachine => "not a 64-bit little-endian x86_64 ELF",
            LoadError::NotStaticExecutable => "not a statically linked executable",
            LoadError::BadProgramHeaders => "program headers outside the file",
            LoadError::SegmentCount => "no loadable segment, or too many",
            LoadError::SegmentOutsideFile => "a segment's bytes lie outside the file",
            LoadError::SegmentOutsideUserRange => "a segment lies outside the user address range",
            LoadError::SegmentsOverlap => "two segments overlap",
            LoadError::WritableAndExecutable => "a segment is both writable and executable",
            LoadError::BadAlignment => "a segment is misaligned",
            LoadError::BadEntry => "the entry point is not in executable code",
        }
    }
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// Check `file` and plan its loading.
pub fn plan(file: &[u8]) -> Result<LoadPlan, LoadError> {
    let header = Elf::parse_header(file).map_err(|_| LoadError::NotElf)?;
    let ident = header.e_ident;
    if ident[goblin::elf::header::EI_CLASS] != goblin::elf::header::ELFCLASS64
        || ident[goblin::elf::header::EI_DATA] != goblin::elf::header::ELFDATA2LSB
        || header.e_machine != EM_X86_64
    {
        return Err(LoadError::WrongMachine);
    }
    if header.e_type != ET_EXEC {
        return Err(LoadError::NotStaticExecutable);
    }
    let count = usize::from(header.e_phnum);
    let table_end = (usize::from(header.e_phentsize))
        .checked_mul(count)
        .and_then(|n| n.checked_add(header.e_phoff as usize))
        .ok_or(LoadError::BadProgramHeaders)?;
    if count == 0
        || count > MAX_PROGRAM_HEADERS
        || usize::from(header.e_phentsize)
            != ProgramHeader::size(Ctx::new(Container::Big, Endian::Little))
        || table_end > file.len()
    {
        return Err(if count == 0 {
            LoadError::SegmentCount
        } else {
            LoadError::BadProgramHeaders
        });
    }
    let ctx = Ctx::new(Container::Big, Endian::Little);
    let headers = ProgramHeader::parse(file, header.e_phoff as usize, count, ctx)
        .map_err(|_| LoadError::BadProgramHeaders)?;

    let mut segments: heapless::Vec<Segment, MAX_SEGMENTS> = heapless::Vec::new();
    for ph in &headers {
        match ph.p_type {
            PT_INTERP => return Err(LoadError::NotStaticExecutable),
            PT_LOAD if ph.p_memsz > 0 => segments
                .push(segment(ph, file.len() as u64)?)
                .map_err(|_| LoadError::SegmentCount)?,
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err(LoadError::SegmentCount);
    }
    for (i, a) in segments.iter().enumerate() {
        let (a0, a1) = a.pages();
        for b in &segments[i + 1..] {
            let (b0, b1) = b.pages();
            if a0 < b1 && b0 < a1 {
                return Err(LoadError::SegmentsOverlap);
            }
        }
    }
    let entry = header.e_entry;
    if !segments
        .iter()
        .any(|s| s.executable && (s.vaddr..s.vaddr + s.mem_size).contains(&entry))
    {
        return Err(LoadError::BadEntry);
    }
    let end = segments
        .iter()
        .map(|s| s.pages().1)
        .max()
        .unwrap_or(USER_MIN);
    Ok(LoadPlan {
        entry,
        segments,
        end,
    })
}

fn segment(ph: &ProgramHeader, file_len: u64) -> Result<Segment, LoadError> {
    let file_end = ph
        .p_offset
        .checked_add(ph.p_filesz)
        .ok_or(LoadError::SegmentOutsideFile)?;
    if file_end > file_len || ph.p_filesz > ph.p_memsz {
        return Err(LoadError::SegmentOutsideFile);
    }
    let mem_end = ph
        .p_vaddr
        .checked_add(ph.p_memsz)
        .ok_or(LoadError::SegmentOutsideUserRange)?;
    if ph.p_vaddr < USER_MIN || mem_end > USER_MAX {
        return Err(LoadError::SegmentOutsideUserRange);
    }
    if ph.p_align > 1 && !ph.p_align.is_power_of_two() || ph.p_vaddr % PAGE != ph.p_offset % PAGE {
        return Err(LoadError::BadAlignment);
    }
    let (writable, executable) = (ph.p_flags & PF_W != 0, ph.p_flags & PF_X != 0);
    if writable && executable {
        return Err(LoadError::WritableAndExecutable);
    }
    let _readable = ph.p_flags & PF_R != 0; // x86 pages are always readable
    Ok(Segment {
        vaddr: ph.p_vaddr,
        mem_size: ph.p_memsz,
        file_offset: ph.p_offset,
        file_size: ph.p_filesz,
        writable,
        executable,
    })
}

#[cfg(test)]
mod tests;
