//! A process as bytes: what a process becomes to move to another machine (P0: Agora-1's
//! processes ran on either PC; issue 17's "migration between machines"), and the checks
//! the kernel makes on an image it did not write.
//!
//! On one machine, `MIGRATE` moves a process between cores by handing the new core the old
//! one's frames (`kernel/src/proc/migrate.rs`). Another machine shares no memory, so the
//! process is written out as an *image* (`MIGRATE_EXPORT`), carried as bytes (`machd`,
//! `OP_MOVE`), and read back there (`MIGRATE_IMPORT`). The image is:
//!
//! | part | bytes |
//! |---|---|
//! | [`Header`] | registers, FPU/SSE state (`FXSAVE`), name, priority, heap end, page count |
//! | [`Page`] × pages | each page's address and whether it is writable, executable |
//! | the pages' contents | 4,096 bytes each, in the same order |
//!
//! Nothing in an image is trusted: it came over a network from another machine, and any
//! program may hand `MIGRATE_IMPORT` any bytes. [`check`] refuses a wrong magic or
//! version, a length that does not match, too many pages, a `rip` or `rsp` outside the
//! user half, a page outside the user half or
//! not page-aligned, pages out of order or twice, unknown flags, a name that is not UTF-8;
//! [`user_rflags`] and [`sanitize_fx`] keep only what user mode may set (a reserved bit in
//! `MXCSR` would make the kernel's `FXRSTOR` fault). Who the process is (its user, its
//! rights, its parent) is never in the image: the importing kernel takes them from the
//! importer, as `SPAWN_IMAGE` does.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

use bytemuck::{Pod, Zeroable};

/// The first bytes of every image.
pub const MAGIC: [u8; 8] = *b"MUSUBIMV";
/// The format's version.
pub const VERSION: u32 = 1;
/// The size of a page.
pub const PAGE: usize = 4096;
/// Most pages an image holds (4 MiB of memory).
pub const MAX_PAGES: usize = 1024;
/// A page the process may write.
pub const WRITABLE: u64 = 1;
/// A page the process may execute.
pub const EXECUTABLE: u64 = 2;
/// Most bytes of a process's name.
pub const NAME_MAX: usize = abi::NAME_LEN;
/// Addresses at or above this are not user addresses (the lower canonical half ends here).
pub const USER_END: u64 = 0x0000_8000_0000_0000;

/// Index of `rip`, `rsp` and `rflags` in [`Header::regs`].
pub const RIP: usize = 15;
pub const RSP: usize = 16;
pub const RFLAGS: usize = 17;

/// An image's first part.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct Header {
    pub magic: [u8; 8],
    pub version: u32,
    /// How many pages follow.
    pub pages: u32,
    pub name: [u8; NAME_MAX],
    pub name_len: u64,
    /// `abi::Priority` as a number.
    pub priority: u64,
    /// The end of its heap (`MEMORY` grows it from there).
    pub heap_end: u64,
    /// The user registers: rax, rbx, rcx, rdx, rsi, rdi, rbp, r8 to r15, then rip, rsp and
    /// rflags ([`RIP`], [`RSP`], [`RFLAGS`]).
    pub regs: [u64; 18],
    /// The `FXSAVE` image (512 bytes).
    pub fx: [u64; 64],
}

/// One page of the image: where it is and what the process may do with it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct Page {
    pub addr: u64,
    pub flags: u64,
}

/// Why an image is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    Magic,
    Version,
    TooManyPages,
    /// The length is not the header's, the pages' list's and their contents' together.
    Length,
    Name,
    Priority,
    HeapEnd,
    /// `rip` or `rsp` outside the user half (returning to user mode with a non-canonical
    /// `rip` would fault in the kernel).
    Registers,
    /// A page not aligned, outside the user half, out of order or twice.
    PageAddress,
    /// A page with a flag not known, or both writable and executable.
    PageFlags,
}

impl Bad {
    /// The system call's error for it: `TooLong` for too many pages, else
    /// `InvalidArgument`.
    pub fn error(self) -> abi::Error {
        match self {
            Bad::TooManyPages => abi::Error::TooLong,
            _ => abi::Error::InvalidArgument,
        }
    }
}

/// Where the page list starts.
pub const fn pages_at() -> usize {
    core::mem::size_of::<Header>()
}

/// Where the contents of the pages start, for an image of `pages` pages.
pub const fn data_at(pages: usize) -> usize {
    pages_at() + pages * core::mem::size_of::<Page>()
}

/// The whole length of an image of `pages` pages.
pub const fn len_of(pages: usize) -> usize {
    data_at(pages) + pages * PAGE
}

/// A header for a process named `name`, its other fields as given.
pub fn header(
    name: &str,
    priority: u64,
    heap_end: u64,
    regs: [u64; 18],
    fx: [u64; 64],
    pages: usize,
) -> Header {
    let mut h = Header {
        magic: MAGIC,
        version: VERSION,
        pages: pages as u32,
        name: [0; NAME_MAX],
        name_len: 0,
        priority,
        heap_end,
        regs,
        fx,
    };
    let n = name.len().min(NAME_MAX);
    h.name[..n].copy_from_slice(&name.as_bytes()[..n]);
    h.name_len = n as u64;
    h
}

/// Check a header that came with an image of `len` bytes; the number of pages.
pub fn check(h: &Header, len: usize) -> Result<usize, Bad> {
    if h.magic != MAGIC {
        return Err(Bad::Magic);
    }
    if h.version != VERSION {
        return Err(Bad::Version);
    }
    let pages = h.pages as usize;
    if pages > MAX_PAGES {
        return Err(Bad::TooManyPages);
    }
    if len != len_of(pages) {
        return Err(Bad::Length);
    }
    name(h)?;
    if h.priority >= abi::Priority::LEVELS as u64 {
        return Err(Bad::Priority);
    }
    if !h.heap_end.is_multiple_of(PAGE as u64) || h.heap_end >= USER_END {
        return Err(Bad::HeapEnd);
    }
    if h.regs[RIP] >= USER_END || h.regs[RSP] >= USER_END {
        return Err(Bad::Registers);
    }
    Ok(pages)
}

/// The process's name in a header.
pub fn name(h: &Header) -> Result<&str, Bad> {
    let n = usize::try_from(h.name_len).map_err(|_| Bad::Name)?;
    let bytes = h.name.get(..n).ok_or(Bad::Name)?;
    core::str::from_utf8(bytes)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or(Bad::Name)
}

/// Check an image's page list: every page aligned, in the user half but not page 0, in
/// increasing order (so none twice), with known flags, never writable and executable.
pub fn check_pages(pages: &[Page]) -> Result<(), Bad> {
    let mut last = 0u64;
    for p in pages {
        if !p.addr.is_multiple_of(PAGE as u64)
            || p.addr == 0
            || p.addr >= USER_END
            || p.addr <= last
        {
            return Err(Bad::PageAddress);
        }
        // Never writable and executable at once: the ELF loader refuses such a segment,
        // so no process has such a page to move, and an image made by hand must not get
        // one past it (found by an audit).
        if p.flags & !(WRITABLE | EXECUTABLE) != 0 || p.flags == WRITABLE | EXECUTABLE {
            return Err(Bad::PageFlags);
        }
        last = p.addr;
    }
    Ok(())
}

/// The flags user mode may have in `RFLAGS`: the arithmetic ones and the direction flag;
/// interrupts always on, bit 1 always set, nothing else (no I/O privilege, no trap flag,
/// no nested task, no alignment check, no virtual-8086).
pub fn user_rflags(rflags: u64) -> u64 {
    const ARITHMETIC: u64 = 1 | 1 << 2 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 11;
    const DIRECTION: u64 = 1 << 10;
    const INTERRUPTS: u64 = 1 << 9;
    (rflags & (ARITHMETIC | DIRECTION)) | INTERRUPTS | 1 << 1
}

/// Where `MXCSR` is in an `FXSAVE` image (byte 24, the low half of word 3).
const MXCSR_WORD: usize = 3;
/// The `MXCSR` bits every x86-64 processor has (`DAZ`, bit 6, is left out: not all do);
/// a reserved one set makes `FXRSTOR` fault.
const MXCSR_KNOWN: u64 = 0xffbf;

/// Clear what `FXRSTOR` would refuse in an `FXSAVE` image: `MXCSR`'s reserved bits, and
/// the `MXCSR_MASK` word beside it (which `FXRSTOR` ignores; kept clean).
pub fn sanitize_fx(fx: &mut [u64; 64]) {
    let w = fx[MXCSR_WORD];
    let mxcsr = w & 0xffff_ffff & MXCSR_KNOWN;
    fx[MXCSR_WORD] = mxcsr;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good(pages: usize) -> Header {
        header("roam", 2, 0x40_0000, [0; 18], [0; 64], pages)
    }

    #[test]
    fn a_written_header_passes() {
        let h = good(3);
        assert_eq!(check(&h, len_of(3)), Ok(3));
        assert_eq!(name(&h), Ok("roam"));
        assert_eq!(core::mem::size_of::<Header>() % 8, 0);
    }

    #[test]
    fn a_long_name_is_cut() {
        let h = header(&"x".repeat(40), 2, 0, [0; 18], [0; 64], 0);
        assert_eq!(name(&h).map(str::len), Ok(NAME_MAX));
    }

    #[test]
    fn bad_headers_are_refused() {
        let mut h = good(1);
        h.magic[0] = b'X';
        assert_eq!(check(&h, len_of(1)), Err(Bad::Magic));
        let mut h = good(1);
        h.version = 2;
        assert_eq!(check(&h, len_of(1)), Err(Bad::Version));
        let h = good(MAX_PAGES + 1);
        assert_eq!(check(&h, len_of(MAX_PAGES + 1)), Err(Bad::TooManyPages));
        let mut h = good(1);
        h.pages = u32::MAX;
        assert_eq!(check(&h, 0), Err(Bad::TooManyPages));
        let h = good(1);
        assert_eq!(check(&h, len_of(1) - 1), Err(Bad::Length));
        assert_eq!(check(&h, len_of(2)), Err(Bad::Length));
        let mut h = good(0);
        h.name_len = 99;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Name));
        h.name_len = u64::MAX;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Name));
        h.name_len = 0;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Name));
        let mut h = good(0);
        h.name[0] = 0xff;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Name));
        let mut h = good(0);
        h.priority = 99;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Priority));
        let mut h = good(0);
        h.heap_end = 0x1001;
        assert_eq!(check(&h, len_of(0)), Err(Bad::HeapEnd));
        h.heap_end = USER_END;
        assert_eq!(check(&h, len_of(0)), Err(Bad::HeapEnd));
        let mut h = good(0);
        h.regs[RIP] = USER_END;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Registers));
        let mut h = good(0);
        h.regs[RSP] = u64::MAX;
        assert_eq!(check(&h, len_of(0)), Err(Bad::Registers));
    }

    #[test]
    fn bad_page_lists_are_refused() {
        let p = |addr, flags| Page { addr, flags };
        assert_eq!(check_pages(&[p(0x1000, 1), p(0x2000, 2)]), Ok(()));
        assert_eq!(check_pages(&[p(0x1001, 0)]), Err(Bad::PageAddress));
        assert_eq!(check_pages(&[p(0, 0)]), Err(Bad::PageAddress));
        assert_eq!(check_pages(&[p(USER_END, 0)]), Err(Bad::PageAddress));
        assert_eq!(
            check_pages(&[p(0xffff_8000_0000_0000, 0)]),
            Err(Bad::PageAddress)
        );
        assert_eq!(
            check_pages(&[p(0x2000, 0), p(0x1000, 0)]),
            Err(Bad::PageAddress)
        );
        assert_eq!(
            check_pages(&[p(0x2000, 0), p(0x2000, 0)]),
            Err(Bad::PageAddress)
        );
        assert_eq!(check_pages(&[p(0x1000, 4)]), Err(Bad::PageFlags));
        assert_eq!(
            check_pages(&[p(0x1000, 0), p(0x2000, WRITABLE | EXECUTABLE)]),
            Err(Bad::PageFlags)
        );
    }

    #[test]
    fn rflags_keep_only_what_user_mode_may_set() {
        // Everything set: IOPL 3, TF, NT, AC, VM, ID ... become IF, bit 1 and arithmetic.
        let f = user_rflags(u64::MAX);
        assert_eq!(f, 0b1110_1101_0111);
        assert_eq!(f & (3 << 12), 0, "no I/O privilege");
        assert_eq!(f & (1 << 8), 0, "no trap flag");
        assert_eq!(user_rflags(0), 0x202);
    }

    #[test]
    fn mxcsr_loses_its_reserved_bits() {
        let mut fx = [0u64; 64];
        fx[3] = u64::MAX;
        sanitize_fx(&mut fx);
        assert_eq!(fx[3], 0xffbf);
        fx[3] = 0x1f80;
        sanitize_fx(&mut fx);
        assert_eq!(fx[3], 0x1f80, "the default is kept");
    }
}
