//! The file service's view of the disk: an `embedded-sdmmc` `BlockDevice` whose reads and
//! writes go to the buffer managers (`abi::buf`, `user/bufd`), K of them, each owning the
//! buffers of its stripes of the disk; they ask the disk driver `blk` on a miss. A request
//! is cut at stripe boundaries, so each piece goes to the one manager that owns it. The
//! sectors move in one data ICA that goes with each request and comes back with its reply.
//!
//! A manager may be replaced (its queued requests move to the new one) or crash (the kernel
//! restarts it; the request it held is answered `Gone`, and an ICA it held is lost to it).
//! Either way this side sends the request again, after recovering its data ICA if it did
//! not come back: a sector read or written twice is the same as once, and the managers
//! write through, so nothing written is lost with them.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;
use embedded_sdmmc::{Block, BlockCount, BlockDevice, BlockIdx};
use ulib::abi::blk::{BLK_ICA_SIZE, MAX_SECTORS, SECTOR};
use ulib::abi::buf::{self, BUF_FLUSH, BUF_INFO, BUF_READ, BUF_WRITE};
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::Msg;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, res};

/// Where the data ICA is mapped when (re)made here.
const DATA_AT: u64 = 0x0000_5400_0000_0000;
/// Times one piece is sent again after its manager went (`Gone`).
const RETRIES: u32 = 8;

/// A failed disk request (what the buffer manager, or the disk behind it, answered).
#[derive(Debug, Clone, Copy)]
pub struct DiskError(pub Error);

impl core::fmt::Display for DiskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "disk: {}", self.0)
    }
}

impl core::error::Error for DiskError {}

pub struct Disk {
    /// The buffer managers, by index.
    managers: Vec<FnId>,
    region: Cell<ResId>,
    /// Where the data ICA is mapped now (it moves with every request).
    at: Cell<u64>,
    sectors: u64,
}

/// Makes what was written durable: a `BUF_FLUSH` to a buffer manager, which sends
/// `BLK_FLUSH` to the disk. One manager suffices: they write through, so every write the
/// file service made has completed at the disk before the flush is sent.
#[derive(Clone, Copy)]
pub struct Flush(FnId);

impl Flush {
    pub fn now(&self) -> Result<(), Error> {
        let msg = Msg {
            label: BUF_FLUSH,
            ..Msg::default()
        };
        let mut tries = 0;
        loop {
            match fnid::call_fn(self.0, &msg) {
                Ok((0, _)) => return Ok(()),
                Ok((v, _)) if v != Error::Gone as u64 || tries == RETRIES => {
                    return Err(Error::from_code(v))
                }
                Err(e) if e != Error::Gone || tries == RETRIES => return Err(e),
                // The manager went (replaced, crashed): its successor takes it.
                _ => tries += 1,
            }
        }
    }
}

/// Open and attach a new data ICA.
fn new_region() -> Result<ResId, Error> {
    // Named so that nobody can take the name first (`res::open_fresh`).
    let region = res::open_fresh(
        "here/vregion/fsd-data",
        &BLK_ICA_SIZE.to_le_bytes(),
        Rights::OWNER_ALL,
    )?;
    if let Err(e) = res::attach_here(region, DATA_AT, true) {
        let _ = res::close(region);
        return Err(e);
    }
    Ok(region)
}

impl Disk {
    /// Find the `count` buffer managers (they may still be starting: each is waited for,
    /// with a hang guard) and make the data ICA.
    pub fn open(count: usize) -> Result<Disk, String> {
        let mut managers = Vec::new();
        let mut sectors = 0;
        for i in 0..count {
            let name = buf::fn_name(i).ok_or("too many buffer managers")?;
            let id = fnid::wait(name, 5_000_000_000)
                .map_err(|e| format!("no buffer manager {name} ({e}); is bufd running?"))?;
            let info = Msg {
                label: BUF_INFO,
                ..Msg::default()
            };
            let (v, reply) = fnid::call_fn(id, &info).map_err(|e| format!("{name}: {e}"))?;
            if v != 0 {
                return Err(format!("{name}: BUF_INFO: {}", Error::from_code(v)));
            }
            if reply.words[1] != i as u64 || reply.words[2] != count as u64 {
                return Err(format!(
                    "{name} serves part {}/{}, not {i}/{count} (bufd part=I/K and fsd bufs=K disagree)",
                    reply.words[1], reply.words[2]
                ));
            }
            sectors = reply.words[0];
            managers.push(id);
        }
        let region = new_region().map_err(|e| format!("data vregion: {e}"))?;
        Ok(Disk {
            managers,
            region: Cell::new(region),
            at: Cell::new(DATA_AT),
            sectors,
        })
    }

    /// What flushes this disk's writes to the device.
    pub fn flusher(&self) -> Flush {
        Flush(self.managers[0])
    }

    /// The data ICA did not come back (its holder ended): attach it again if it is free,
    /// else make a new one (closing the old one, if it can be closed yet).
    fn recover(&self) -> Result<(), DiskError> {
        let old = self.region.get();
        if res::attach_here(old, DATA_AT, true).is_ok() {
            self.at.set(DATA_AT);
            return Ok(());
        }
        let _ = res::close(old);
        let region = new_region().map_err(DiskError)?;
        self.region.set(region);
        self.at.set(DATA_AT);
        Ok(())
    }

    /// One request of `count` sectors from `first` (all of one manager's stripe), sent
    /// again when its manager went while holding it. `fill` writes the data ICA first.
    fn call(
        &self,
        label: u64,
        first: u64,
        count: u64,
        fill: &dyn Fn(&Self),
    ) -> Result<(), DiskError> {
        let manager = self.managers[buf::manager_of(first, self.managers.len() as u64) as usize];
        let mut tries = 0;
        loop {
            fill(self);
            let msg = ipc::with_ica(
                Msg {
                    label,
                    words: [first, count, 0, 0, 0, 0],
                },
                self.region.get(),
            );
            // Where the ICA is now: back with the reply, still here if the request was
            // never sent, or lost (`None`) with a manager that ended holding it.
            let (v, back) = match fnid::call_fn(manager, &msg) {
                Ok((v, reply)) => (v, ipc::ica_at(&reply).map(|(_, at)| at)),
                // Gone with a manager that ended holding it, or never sent (the manager
                // was down): looked at, else a live ICA was dropped and a new one made.
                Err(Error::Gone) => {
                    let at = self.at.get();
                    let here = res::attached_here(self.region.get(), at) != Ok(false);
                    (Error::Gone as u64, here.then_some(at))
                }
                Err(e) => (e as u64, Some(self.at.get())),
            };
            match back {
                Some(at) => self.at.set(at),
                None => self.recover()?,
            }
            if v == Error::Gone as u64 && tries < RETRIES {
                tries += 1;
                continue;
            }
            return match v {
                0 => Ok(()),
                v => Err(DiskError(Error::from_code(v))),
            };
        }
    }

    /// The data ICA's bytes (as the manager left them).
    fn data(&self) -> &[u8] {
        // SAFETY: the data ICA is attached at `self.at`, BLK_ICA_SIZE bytes, mapped by this
        // single-threaded program only while it holds it; nothing writes it meanwhile.
        unsafe { core::slice::from_raw_parts(self.at.get() as *const u8, BLK_ICA_SIZE as usize) }
    }

    /// Put one sector's bytes into the data ICA as sector `i` of the next request.
    fn fill(&self, i: usize, bytes: &[u8; SECTOR]) {
        assert!((i + 1) * SECTOR <= BLK_ICA_SIZE as usize);
        // SAFETY: in bounds (checked above) of the ICA attached writable at `self.at`; no
        // slice of it is alive while this copies (`data`'s borrows end before a request).
        unsafe {
            core::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (self.at.get() as *mut u8).add(i * SECTOR),
                SECTOR,
            )
        }
    }
}

/// `blocks` from sector `start` cut into pieces that end at stripe boundaries (each one
/// manager's, at most `MAX_SECTORS`): (first sector, index of its first block, count).
fn pieces(start: u64, blocks: usize) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut done = 0usize;
    core::iter::from_fn(move || {
        if done == blocks {
            return None;
        }
        let first = start + done as u64;
        let to_stripe_end = (buf::STRIPE - first % buf::STRIPE) as usize;
        let n = (blocks - done).min(to_stripe_end).min(MAX_SECTORS as usize);
        let piece = (first, done, n);
        done += n;
        Some(piece)
    })
}

impl BlockDevice for Disk {
    type Error = DiskError;

    fn read(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), DiskError> {
        for (first, from, n) in pieces(u64::from(start.0), blocks.len()) {
            self.call(BUF_READ, first, n as u64, &|_| {})?;
            let data = self.data();
            for (i, b) in blocks[from..from + n].iter_mut().enumerate() {
                b.contents
                    .copy_from_slice(&data[i * SECTOR..(i + 1) * SECTOR]);
            }
        }
        Ok(())
    }

    fn write(&self, blocks: &[Block], start: BlockIdx) -> Result<(), DiskError> {
        for (first, from, n) in pieces(u64::from(start.0), blocks.len()) {
            let chunk = &blocks[from..from + n];
            self.call(BUF_WRITE, first, n as u64, &|d| {
                for (i, b) in chunk.iter().enumerate() {
                    d.fill(i, &b.contents);
                }
            })?;
        }
        Ok(())
    }

    fn num_blocks(&self) -> Result<BlockCount, DiskError> {
        Ok(BlockCount(u32::try_from(self.sectors).unwrap_or(u32::MAX)))
    }
}
