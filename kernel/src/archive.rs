//! The boot archive: the user programs, packed by xtask into one cpio (newc) file that the
//! loader hands to the kernel as a boot module.
//!
//! The archive stays where the loader put it (its frames are kept out of every pool) and
//! is read-only. The bootstrap core reads its directory once at boot into a small table of
//! names and byte ranges, so a lookup is a scan of a few names rather than a walk over
//! cpio headers (which costs about 35,000 instructions per entry). Every core may then
//! look programs up without coordination.

use crate::arch::x86_64::paging::phys_to_virt;

/// Most programs the archive may hold; more are reported and ignored.
pub const MAX_PROGRAMS: usize = 128;

type Directory = heapless::Vec<(&'static str, &'static [u8]), MAX_PROGRAMS>;

static DIRECTORY: spin::Once<Directory> = spin::Once::new();

/// Read the archive module's directory (bootstrap core, once).
pub fn set(start: u64, size: u64) {
    // SAFETY: the module lies in memory the loader described, which the direct map covers
    // and no pool hands out; nothing writes to it.
    let bytes: &'static [u8] =
        unsafe { core::slice::from_raw_parts(phys_to_virt(start) as *const u8, size as usize) };
    DIRECTORY.call_once(|| {
        let mut dir = Directory::new();
        for entry in cpio_reader::iter_files(bytes) {
            if dir.push((entry.name(), entry.file())).is_err() {
                log::warn!(
                    "boot archive holds more than {MAX_PROGRAMS} programs; the rest are ignored"
                );
                break;
            }
        }
        dir
    });
}

/// The program called `name`, if the archive has it.
pub fn find(name: &str) -> Option<&'static [u8]> {
    DIRECTORY
        .get()?
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// Names of all programs in the archive.
pub fn names() -> impl Iterator<Item = &'static str> {
    DIRECTORY
        .get()
        .into_iter()
        .flat_map(|d| d.iter().map(|(n, _)| *n))
}
