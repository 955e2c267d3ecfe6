//! Pure text: the read-only segments of a program from the boot archive are loaded once and
//! mapped, read-only, into every process of that program, on any core (the shared text
//! segments of Unix since V7). A second `udpecho`, or the server a live replacement
//! starts beside its predecessor, maps the very frames the first one runs instead of
//! copying the program again.
//!
//! Why it matters beyond the copy: under QEMU's TCG, translated code is kept per physical
//! page, so a program loaded into fresh frames is translated again from scratch. A `netd`
//! replacement costs about 0.55 ms of guest instructions (deterministic mode) but 15-21 ms
//! of wall time in parallel mode, most of it spent translating the new copy of code the old
//! server had already run; with shared text the new server runs translated code at once.
//!
//! Only segments of the boot archive are shared: its bytes never change while the kernel
//! runs, so the archive's address names the contents (an image passed by a program,
//! `SPAWN_IMAGE`, is loaded privately as before). A segment's frames are freed when the
//! last process mapping them goes ([`SharedText`]'s `Drop`, on whichever core that is:
//! `frames::free` returns a frame to its own core's pool); the list of loaded segments keeps
//! only weak references. One list serves every core, so a server replaced onto another core
//! runs the frames (and, under TCG, the translations) of the one it replaces; the frames
//! come from the pool of the core that loaded them first, as a vregion's do. A process that
//! migrates takes a private copy of its text to the new core (`VSpace::own_pages` lists text
//! pages for the move).

use crate::arch::x86_64::paging::{self, phys_to_virt, PAGE_SIZE};
use crate::mm::frames;
use abi::Error;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use elfload::Segment;

/// The frames of one read-only segment of one archived program; they go back to their pool
/// when the last address space mapping them drops its reference.
pub struct SharedText {
    frames: Vec<u64>,
}

impl SharedText {
    /// The frames, in address order (one per page of the segment).
    pub fn frames(&self) -> &[u64] {
        &self.frames
    }
}

impl Drop for SharedText {
    fn drop(&mut self) {
        for &f in &self.frames {
            // Mapped nowhere any more: the last address space holding it has unmapped it.
            let _ = frames::free(f);
        }
    }
}

/// What names a segment's contents: where the program's image lies in the archive (which
/// never changes, so the rest of the segment follows from its address), and the segment's
/// address (segments of one image never share one: they would overlap).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    image: usize,
    vaddr: u64,
}

/// The loaded read-only segments, of every core. A lock, though the kernel is per core:
/// it is taken only to spawn a program from the archive (never on a request path), and
/// it is what lets a server's replacement on another core run its predecessor's frames.
static LOADED: spin::Mutex<Vec<(Key, Weak<SharedText>)>> = spin::Mutex::new(Vec::new());

/// The frames of read-only segment `seg` of `image`, an archived program: the ones already
/// loaded if a live process (of any core) maps them, else fresh ones of this core's pool
/// filled from the image. `NoMemory` if the pool (above the kernel's reserve) cannot hold
/// them.
pub fn load(image: &'static [u8], seg: &Segment) -> Result<Arc<SharedText>, Error> {
    debug_assert!(!seg.writable, "only read-only segments are shared");
    let key = Key {
        image: image.as_ptr() as usize,
        vaddr: seg.vaddr,
    };
    let find = |loaded: &mut Vec<(Key, Weak<SharedText>)>| {
        // Entries whose processes all ended go (the list stays as small as what runs).
        loaded.retain(|(_, w)| w.strong_count() > 0);
        loaded
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
    };
    if let Some(text) = find(&mut LOADED.lock()) {
        return Ok(text);
    }
    // Filled without the lock (copying a segment is long); if another core loaded the
    // same segment meanwhile, its frames are used and these go back.
    let fresh = Arc::new(fill(image, seg)?);
    let mut loaded = LOADED.lock();
    if let Some(text) = find(&mut loaded) {
        return Ok(text);
    }
    loaded.push((key, Arc::downgrade(&fresh)));
    Ok(fresh)
}

/// Fresh frames holding `seg`'s pages as the loader would map them: zero, then the
/// segment's bytes from the file at their offsets.
fn fill(image: &[u8], seg: &Segment) -> Result<SharedText, Error> {
    let (first, end) = seg.pages();
    let bytes = usize::try_from(seg.file_offset)
        .ok()
        .zip(usize::try_from(seg.file_offset + seg.file_size).ok())
        .and_then(|(from, to)| image.get(from..to))
        .ok_or(Error::BadExecutable)?;
    let mut text = SharedText { frames: Vec::new() };
    for page in (first..end).step_by(PAGE_SIZE as usize) {
        // (On failure `text` drops, freeing the frames taken so far.)
        let frame = frames::alloc_user().ok_or(Error::NoMemory)?;
        text.frames.push(frame);
        paging::zero_frame(frame);
        // The part of the segment's bytes that falls on this page.
        let lo = seg.vaddr.max(page);
        let hi = (seg.vaddr + seg.file_size).min(page + PAGE_SIZE);
        if lo < hi {
            let from = (lo - seg.vaddr) as usize;
            let n = (hi - lo) as usize;
            // SAFETY: a fresh frame of this core's pool, direct-mapped, mapped nowhere yet;
            // `lo - page + n <= PAGE_SIZE`, and `from + n <= bytes.len()` (`hi` is at most
            // the end of the file's bytes).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    bytes[from..from + n].as_ptr(),
                    (phys_to_virt(frame) + (lo - page)) as *mut u8,
                    n,
                );
            }
        }
    }
    Ok(text)
}
