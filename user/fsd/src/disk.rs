//! The file service's view of the disk: an `embedded-sdmmc` `BlockDevice` whose reads and
//! writes are `BLK_READ`/`BLK_WRITE` requests to `blk` (`abi::blk`), the sectors moving in
//! one data ICA that goes to the driver and comes back with each reply, plus a small cache
//! of recently used sectors (write-through), so the FAT and directory sectors the library
//! reads again and again do not go to the disk each time.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use core::cell::{Cell, RefCell};
use embedded_sdmmc::{Block, BlockCount, BlockDevice, BlockIdx};
use ulib::abi::blk::{self, BLK_INFO, BLK_READ, BLK_WRITE, MAX_SECTORS, SECTOR};
use ulib::abi::ipc::Msg;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, res};

/// Sectors kept in the cache.
const CACHE: usize = 64;
const DATA_AT: u64 = 0x0000_5400_0000_0000;

/// A failed disk request (what `blk` answered).
#[derive(Debug, Clone, Copy)]
pub struct DiskError(pub Error);

impl core::fmt::Display for DiskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "disk: {}", self.0)
    }
}

impl core::error::Error for DiskError {}

pub struct Disk {
    drv: ResId,
    region: ResId,
    /// Where the data ICA is mapped now (it moves with every request).
    at: Cell<u64>,
    sectors: u64,
    cache: RefCell<VecDeque<(u32, [u8; SECTOR])>>,
}

impl Disk {
    /// Find `blk` and make the data ICA.
    pub fn open() -> Result<Disk, String> {
        let drv = ResId(
            fnid::lookup(blk::FN_BLK)
                .map_err(|e| format!("no disk (blk: {e})"))?
                .0,
        );
        let info = Msg {
            label: BLK_INFO,
            ..Msg::default()
        };
        let (v, reply) = ipc::call(drv, &info).map_err(|e| format!("BLK_INFO: {e}"))?;
        if v != 0 {
            return Err(format!("BLK_INFO: {}", Error::from_code(v)));
        }
        let region = res::open_vregion(
            "here/vregion/fsd-data",
            blk::BLK_ICA_SIZE,
            Rights::OWNER_ALL,
        )
        .map_err(|e| format!("vregion: {e}"))?;
        res::attach_here(region, DATA_AT, true).map_err(|e| format!("attach: {e}"))?;
        Ok(Disk {
            drv,
            region,
            at: Cell::new(DATA_AT),
            sectors: reply.words[0],
            cache: RefCell::new(VecDeque::new()),
        })
    }

    /// One request of `count` sectors from `first`; the ICA comes back.
    fn call(&self, label: u64, first: u64, count: u64) -> Result<(), DiskError> {
        let msg = ipc::with_ica(
            Msg {
                label,
                words: [first, count, 0, 0, 0, 0],
            },
            self.region,
        );
        let (v, reply) = ipc::call(self.drv, &msg).map_err(DiskError)?;
        let (_, at) = ipc::ica_at(&reply).ok_or(DiskError(Error::Unknown))?;
        self.at.set(at);
        if v != 0 {
            return Err(DiskError(Error::from_code(v)));
        }
        Ok(())
    }

    /// The data ICA's bytes (as the driver left them).
    fn data(&self) -> &[u8] {
        // SAFETY: the data ICA is attached at `self.at`, BLK_ICA_SIZE bytes, mapped by this
        // single-threaded program only while it holds it; nothing writes it meanwhile.
        unsafe {
            core::slice::from_raw_parts(self.at.get() as *const u8, blk::BLK_ICA_SIZE as usize)
        }
    }

    /// Put one sector's bytes into the data ICA as sector `i` of the next request.
    fn fill(&self, i: usize, bytes: &[u8; SECTOR]) {
        assert!((i + 1) * SECTOR <= blk::BLK_ICA_SIZE as usize);
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

    fn cached(&self, idx: u32) -> Option<[u8; SECTOR]> {
        self.cache
            .borrow()
            .iter()
            .find(|(i, _)| *i == idx)
            .map(|(_, b)| *b)
    }

    fn remember(&self, idx: u32, data: &[u8]) {
        let mut c = self.cache.borrow_mut();
        c.retain(|(i, _)| *i != idx);
        if c.len() == CACHE {
            c.pop_front();
        }
        let mut b = [0u8; SECTOR];
        b.copy_from_slice(data);
        c.push_back((idx, b));
    }
}

impl BlockDevice for Disk {
    type Error = DiskError;

    fn read(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), DiskError> {
        for (chunk_no, chunk) in blocks.chunks_mut(MAX_SECTORS as usize).enumerate() {
            let first = start.0 + (chunk_no * MAX_SECTORS as usize) as u32;
            if chunk.len() == 1 {
                if let Some(b) = self.cached(first) {
                    chunk[0].contents.copy_from_slice(&b);
                    continue;
                }
            }
            self.call(BLK_READ, u64::from(first), chunk.len() as u64)?;
            let data = self.data();
            for (i, b) in chunk.iter_mut().enumerate() {
                b.contents
                    .copy_from_slice(&data[i * SECTOR..(i + 1) * SECTOR]);
                self.remember(first + i as u32, &b.contents);
            }
        }
        Ok(())
    }

    fn write(&self, blocks: &[Block], start: BlockIdx) -> Result<(), DiskError> {
        for (chunk_no, chunk) in blocks.chunks(MAX_SECTORS as usize).enumerate() {
            let first = start.0 + (chunk_no * MAX_SECTORS as usize) as u32;
            for (i, b) in chunk.iter().enumerate() {
                self.fill(i, &b.contents);
            }
            // Forget first: a failed write leaves the cache no newer than the disk.
            for i in 0..chunk.len() as u32 {
                self.cache.borrow_mut().retain(|(j, _)| *j != first + i);
            }
            self.call(BLK_WRITE, u64::from(first), chunk.len() as u64)?;
            for (i, b) in chunk.iter().enumerate() {
                self.remember(first + i as u32, &b.contents);
            }
        }
        Ok(())
    }

    fn num_blocks(&self) -> Result<BlockCount, DiskError> {
        Ok(BlockCount(u32::try_from(self.sectors).unwrap_or(u32::MAX)))
    }
}
