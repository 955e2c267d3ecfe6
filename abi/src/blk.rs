//! The disk's messages (issue 16; P0's disk process). The virtio-blk driver, `blkdrv`,
//! serves the function [`FN_BLK`]; the file service (and tests) reach it by function id, so
//! the driver can be replaced while its clients run.
//!
//! Data travels in ICAs: a vregion of [`BLK_ICA_SIZE`] bytes holding up to [`MAX_SECTORS`]
//! sectors of [`SECTOR`] bytes from offset 0. Every reply to a request that carried an ICA
//! carries it back, also on an error.
//!
//! A write's ICA may be read-only (lent so: `ipc::MSG_ICA_READ_ONLY`); a read's may not.
//!
//! Errors (the reply's value): `InvalidArgument` for a request without its ICA, a read
//! whose ICA is read-only, or a sector count of 0 or above [`MAX_SECTORS`]; `TooLong` for sectors beyond the disk's end;
//! `Denied` for a write to a read-only disk; `Unknown` when the device reported an I/O
//! error.

/// The disk driver's function name.
pub const FN_BLK: &str = "blk";
/// Bytes per sector.
pub const SECTOR: usize = 512;
/// Size of one data ICA (one page).
pub const BLK_ICA_SIZE: u64 = 4096;
/// Most sectors one request moves.
pub const MAX_SECTORS: u64 = BLK_ICA_SIZE / SECTOR as u64;

/// To `blk`: the disk's size in sectors in `words[0]`, [`SECTOR`] in `words[1]`, 1 in
/// `words[2]` if it is read-only; requests served, interrupts taken and `BLK_FLUSH`
/// requests completed in `words[3]`, `words[4]` and `words[5]`.
pub const BLK_INFO: u64 = 1;
/// To `blk`, with an ICA: read `words[1]` sectors from sector `words[0]` into it.
pub const BLK_READ: u64 = 2;
/// To `blk`, with an ICA: write `words[1]` sectors from it to sector `words[0]`.
pub const BLK_WRITE: u64 = 3;
/// To `blk`: make every completed write durable (the device's cache flushed: virtio-blk's
/// FLUSH when the device offers it; the file service sends it through a buffer manager,
/// `abi::buf::BUF_FLUSH`, at every close of a file open for writing and every directory change).
pub const BLK_FLUSH: u64 = 4;
