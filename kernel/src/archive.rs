//! The boot archive: the user programs, packed by xtask into one cpio (newc) file that the
//! loader hands to the kernel as a boot module.
//!
//! The archive stays where the loader put it (its frames are kept out of every pool) and
//! is read-only, so every core may look programs up in it without coordination.

use crate::arch::x86_64::paging::phys_to_virt;

static ARCHIVE: spin::Once<&'static [u8]> = spin::Once::new();

/// Remember the archive module (bootstrap core, once).
pub fn set(start: u64, size: u64) {
    // SAFETY: the module lies in memory the loader described, which the direct map covers
    // and no pool hands out; nothing writes to it.
    let bytes =
        unsafe { core::slice::from_raw_parts(phys_to_virt(start) as *const u8, size as usize) };
    ARCHIVE.call_once(|| bytes);
}

/// The program called `name`, if the archive has it.
pub fn find(name: &str) -> Option<&'static [u8]> {
    let archive = ARCHIVE.get()?;
    cpio_reader::iter_files(archive)
        .find(|f| f.name() == name)
        .map(|f| f.file())
}

/// Names of all programs in the archive.
pub fn names() -> impl Iterator<Item = &'static str> {
    ARCHIVE
        .get()
        .into_iter()
        .flat_map(|a| cpio_reader::iter_files(a).map(|f| f.name()))
}

/// Is there an archive at all?
pub fn present() -> bool {
    ARCHIVE.get().is_some_and(|a| !a.is_empty())
}
