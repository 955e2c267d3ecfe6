//! The buffer managers' messages (issue 16; P0's buffer processes). A buffer manager,
//! `bufd`, owns a set of cache buffers of one sector each and sits between the file service
//! (`abi::fs`) and the disk driver (`abi::blk`): the file service asks it for sectors, and
//! it asks `blk` only on a miss.
//!
//! There are K of them (K >= 1, [`MAX_MANAGERS`] at most), manager I serving the function
//! `fs.bufI` ([`fn_name`]). The disk's sectors are partitioned among them by *stripes* of
//! [`STRIPE`] sectors: stripe n belongs to manager n mod K ([`manager_of`]), so every
//! buffer has exactly one owner, as in P0 where each buffer is one process's resource.
//!
//! Write-through: a `BUF_WRITE` is answered only after `blk` completed the write, so the
//! buffers hold no data the disk lacks, and a manager replaced, killed or crashed loses
//! nothing but its copies (the next one starts with empty buffers).
//!
//! Data travels as with `blk`: one ICA of [`crate::blk::BLK_ICA_SIZE`] bytes, sectors from
//! offset 0; every reply to a request that carried an ICA carries it back, also on an error.
//!
//! A write's ICA may be read-only (lent so: `ipc::MSG_ICA_READ_ONLY`; it goes on to `blk`
//! as it came); a read's may not.
//!
//! Errors (the reply's value): `InvalidArgument` for a request without its ICA, a read
//! whose ICA is read-only, a count of 0 or above [`crate::blk::MAX_SECTORS`], or a sector
//! that belongs to another manager;
//! `TooLong` for sectors beyond the disk's end; whatever `blk` answered otherwise.

/// Most buffer managers.
pub const MAX_MANAGERS: usize = 8;
/// Sectors per stripe (one ICA's worth: a request within a stripe is one manager's).
pub const STRIPE: u64 = crate::blk::MAX_SECTORS;

/// To `fs.bufI`: the disk's size in sectors in `words[0]`; this manager's index and the
/// number of managers in `words[1]` and `words[2]`; its buffers in `words[3]`; hits and
/// misses (sectors) so far in `words[4]` and `words[5]`.
pub const BUF_INFO: u64 = 1;
/// To `fs.bufI`, with an ICA: read `words[1]` sectors from sector `words[0]` into it.
pub const BUF_READ: u64 = 2;
/// To `fs.bufI`, with an ICA: write `words[1]` sectors from it to sector `words[0]`,
/// through to the disk before the reply.
pub const BUF_WRITE: u64 = 3;
/// To `fs.bufI`: make every completed write durable (`BLK_FLUSH`).
pub const BUF_FLUSH: u64 = 4;

/// Which of `managers` managers owns `sector`.
pub fn manager_of(sector: u64, managers: u64) -> u64 {
    (sector / STRIPE) % managers.max(1)
}

/// The function names of the managers, by index.
pub const FN_NAMES: [&str; MAX_MANAGERS] = [
    "fs.buf0", "fs.buf1", "fs.buf2", "fs.buf3", "fs.buf4", "fs.buf5", "fs.buf6", "fs.buf7",
];

/// The function name of manager `index` (`None` past [`MAX_MANAGERS`]).
pub fn fn_name(index: usize) -> Option<&'static str> {
    FN_NAMES.get(index).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_stripes() {
        assert_eq!(fn_name(0), Some("fs.buf0"));
        assert_eq!(fn_name(7), Some("fs.buf7"));
        assert_eq!(fn_name(8), None);
        assert!(FN_NAMES
            .iter()
            .all(|n| crate::fnid::valid_name(n.as_bytes())));
        assert_eq!(manager_of(0, 1), 0);
        assert_eq!(manager_of(1000, 1), 0);
        assert_eq!(manager_of(7, 2), 0);
        assert_eq!(manager_of(8, 2), 1);
        assert_eq!(manager_of(16, 2), 0);
        assert_eq!(manager_of(5, 0), 0, "no managers counts as one");
    }
}
