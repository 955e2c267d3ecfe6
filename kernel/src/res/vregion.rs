//! Vregions (`vregion`, a resource type): memory from the owning core's pool, read and
//! written by copying, and mapped into address spaces by a `vspace`'s `ATTACH` (shared
//! memory when attached to two, P3's ICA). Its owner counts the attachments, also those on
//! other cores (`attach`, `note_detached`): a vregion cannot be closed while attached.
//!
//! A vregion passed as an ICA on a request or reply (`ipc/ica.rs`) is *passed* from its
//! first pass until it is attached nowhere: meanwhile `ATTACH`, `READ` and `WRITE` are
//! `Busy` for everyone, so only the one address space that maps it can touch it
//! ([`pass`], [`note_detached`]).
//!
//! Vregions outlive their creator unless asked otherwise: one marked `CLOSE_WHEN_DETACHED`
//! is closed by the kernel the moment it is attached nowhere ([`note_detached`]: its last
//! mapping detached, the address space holding it gone, an ICA of it lost), so pages a
//! server hands around as ICAs go with the last process that maps them, whether that
//! server retires, is replaced or crashes.

use super::kind::{u64_arg, Resource, Step};
use super::local;
use super::ReadOut;
use crate::arch::x86_64::paging::{phys_to_virt, PAGE_SIZE};
use crate::mm::frames;
use abi::res::{Op, ResId};
use abi::syscall::control;
use abi::Error;
use alloc::vec::Vec;
use core::convert::Infallible;

/// Largest vregion.
pub const MAX_VREGION: u64 = 16 << 20;

/// A vregion: its frames (direct-mapped, of this core), its size, and how many address
/// spaces it is attached to.
pub struct VRegion {
    frames: Vec<u64>,
    size: u64,
    attached: u32,
    /// Passed as an ICA and still attached somewhere (`pass`): only its mapper touches it.
    passed: bool,
    /// The user its frames are charged to (its creator; `res/quota.rs`).
    charged: abi::res::UserId,
    /// `CLOSE_WHEN_DETACHED`: closed by the kernel once attached nowhere.
    close_when_detached: bool,
}

impl Resource for VRegion {
    type ReadLater = Infallible;
    type WriteLater = Infallible;
    type ControlLater = Infallible;
    type InfoLater = Infallible;

    /// Its size in bytes (1 B to 16 MiB): zeroed frames from the core's pool.
    fn open(args: &[u8]) -> Result<Self, Error> {
        let size = u64_arg(args)?;
        if size == 0 || size > MAX_VREGION {
            return Err(Error::InvalidArgument);
        }
        let pages = size.div_ceil(PAGE_SIZE);
        let charged = super::flow_user();
        super::quota::charge_frames(charged, pages)?;
        let mut frames = Vec::new();
        for _ in 0..pages {
            match frames::alloc_user() {
                Some(f) => {
                    crate::arch::x86_64::paging::zero_frame(f);
                    frames.push(f);
                }
                None => {
                    for f in frames {
                        let _ = frames::free(f);
                    }
                    super::quota::uncharge_frames(charged, pages);
                    return Err(Error::NoMemory);
                }
            }
        }
        Ok(VRegion {
            frames,
            size,
            attached: 0,
            passed: false,
            charged,
            close_when_detached: false,
        })
    }

    fn close(&mut self) -> Result<(), Error> {
        if self.attached > 0 {
            return Err(Error::Busy);
        }
        Ok(())
    }

    fn release(self, _: Option<ResId>) {
        super::quota::uncharge_frames(self.charged, self.frames.len() as u64);
        for f in self.frames {
            let _ = frames::free(f);
        }
    }

    /// Copy `len` bytes at offset `arg`.
    fn read(&mut self, len: u64, arg: u64) -> Result<Step<ReadOut, Infallible>, Error> {
        if self.passed {
            return Err(Error::Busy);
        }
        let end = arg
            .checked_add(len)
            .filter(|&end| end <= self.size)
            .ok_or(Error::InvalidArgument)?;
        Ok(Step::Done(ReadOut::Bytes(copy_from_region(
            &self.frames,
            arg,
            end,
        ))))
    }

    /// Copy `data` to offset `arg`.
    fn write(&mut self, data: &[u8], arg: u64) -> Result<Step<u64, Infallible>, Error> {
        if self.passed {
            return Err(Error::Busy);
        }
        let end = arg
            .checked_add(data.len() as u64)
            .filter(|&end| end <= self.size)
            .ok_or(Error::InvalidArgument)?;
        let mut at = arg;
        while at < end {
            let (page, off) = ((at / PAGE_SIZE) as usize, at % PAGE_SIZE);
            let n = (PAGE_SIZE - off).min(end - at);
            let from = (at - arg) as usize;
            // SAFETY: as in `copy_from_region`.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    data[from..].as_ptr(),
                    (phys_to_virt(self.frames[page]) + off) as *mut u8,
                    n as usize,
                );
            }
            at += n;
        }
        Ok(Step::Done(data.len() as u64))
    }

    /// Asking to be closed later is closing: `CLOSE_WHEN_DETACHED` needs the close right too.
    fn control_rights(cmd: u64) -> &'static [Op] {
        match cmd {
            control::CLOSE_WHEN_DETACHED => &[Op::Control, Op::Close],
            _ => &[Op::Control],
        }
    }

    /// `INFO`: the size; `CLOSE_WHEN_DETACHED`, refused while attached nowhere (close it
    /// instead).
    fn control(&mut self, cmd: u64, _: u64, _: u64) -> Result<Step<u64, Infallible>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(self.size)),
            control::CLOSE_WHEN_DETACHED if self.attached == 0 => Err(Error::InvalidArgument),
            control::CLOSE_WHEN_DETACHED => {
                self.close_when_detached = true;
                Ok(Step::Done(0))
            }
            _ => Err(Error::NotSupported),
        }
    }

    /// Size, and the number of attachments.
    fn info(&self) -> Step<(u64, u64), Infallible> {
        Step::Done((self.size, u64::from(self.attached)))
    }
}

fn copy_from_region(frames: &[u64], start: u64, end: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((end - start) as usize);
    let mut at = start;
    while at < end {
        let (page, off) = ((at / PAGE_SIZE) as usize, at % PAGE_SIZE);
        let n = (PAGE_SIZE - off).min(end - at);
        // SAFETY: the frame belongs to this vregion (on this core) and is direct-mapped;
        // `off + n` stays within the page.
        let src = unsafe {
            core::slice::from_raw_parts((phys_to_virt(frames[page]) + off) as *const u8, n as usize)
        };
        out.extend_from_slice(src);
        at += n;
    }
    out
}

/// Vregion `region` (of this core) is being attached to an address space: check the rights
/// (read, and write if `writable`), count the attachment, return its frames.
pub fn attach(region: ResId, writable: bool) -> Result<Vec<u64>, Error> {
    let need: &[Op] = if writable {
        &[Op::Read, Op::Write]
    } else {
        &[Op::Read]
    };
    local::with_state(region, need, |v: &mut VRegion| {
        if v.passed {
            return Err(Error::Busy);
        }
        v.attached += 1;
        Ok(v.frames.clone())
    })
}

/// Vregions of this core that are no longer attached somewhere (detach, or their process
/// ended or moved).
pub fn note_detached(regions: impl Iterator<Item = ResId>) {
    let regions: Vec<ResId> = regions.collect();
    if regions.is_empty() {
        return;
    }
    let mut closing = Vec::new();
    local::for_each_state(&regions, |id, v: &mut VRegion| {
        v.attached = v.attached.saturating_sub(1);
        // Attached nowhere: a pass ends here (the vregion is ordinary again), and one that
        // asked for it is closed (`CLOSE_WHEN_DETACHED`).
        if v.attached == 0 {
            v.passed = false;
            if v.close_when_detached {
                closing.push(id);
            }
        }
    });
    for id in closing {
        let _ = local::close_by_kernel::<VRegion>(id);
    }
}

/// Vregion `region` (of this core) is being passed as an ICA (`passed`: true), or a pass
/// that failed is undone (`passed`: what it was before). With `check`, it must be attached
/// exactly once (the sender's mapping, which the caller has just taken out): else `Busy`.
/// No right is needed: mapping it is the sender's title. Returns whether it was passed.
pub fn pass(region: ResId, passed: bool, check: bool) -> Result<bool, Error> {
    local::with_state(region, &[], |v: &mut VRegion| {
        if check && v.attached != 1 {
            return Err(Error::Busy);
        }
        Ok(core::mem::replace(&mut v.passed, passed))
    })
}

/// How many address spaces map vregion `region` (of this core): for the tests.
pub fn attached(region: ResId) -> Result<u32, Error> {
    local::with_state(region, &[], |v: &mut VRegion| Ok(v.attached))
}

/// The frames of vregion `region` (of this core): to map it again where it was when a pass
/// fails, and for tests that compare address spaces.
pub fn frames_of(region: ResId) -> Result<Vec<u64>, Error> {
    local::with_state(region, &[], |v: &mut VRegion| Ok(v.frames.clone()))
}
