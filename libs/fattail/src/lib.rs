//! The FAT's tail: the entries past a volume's last cluster.
//!
//! Why this exists: a FAT's last sector usually holds more entries than the volume has
//! clusters, and `mkfs.fat` leaves those extra entries 0 ("free"). `embedded-sdmmc` 0.10
//! looks for a free cluster a whole FAT sector at a time without stopping at the last
//! cluster, so on a nearly full volume it hands out a cluster past the volume's end: a
//! write there goes beyond the partition (`fsd` saw `TooLong` from the disk where "disk
//! full" was due; on a larger disk it would overwrite whatever follows the partition).
//! `fsd` therefore marks those entries bad (`0xFFF7` / `0x0FFFFFF7`) in every FAT copy
//! when it mounts a volume; the FAT specification gives them no meaning and `fsck.fat`
//! accepts them, and the library then reports a full volume as full (`NotEnoughSpace`).
//!
//! Pure: [`Layout::from_boot_sector`] reads the boot sector's BPB, [`Layout::tail_sectors`]
//! says which FAT sectors hold such entries, [`seal`] marks them in one sector.
//!
//! The same library also leaves a deleted file's (or directory's) clusters allocated: its
//! delete removes the directory entry and frees nothing, and `fsd` truncates a file
//! before deleting it, which frees every cluster of its chain but the first. So after a
//! delete `fsd` frees what is left itself (a file's first cluster, a directory's whole
//! chain, which may be several clusters), in every FAT copy: [`Layout::entry_sectors`]
//! says where a cluster's entry lies, [`free_entry`] frees it in one sector and says what
//! it held, and [`Layout::link`] where the chain goes on.
//!
//! And the library follows a chain until an entry marks its end, without a bound, so a
//! corrupt FAT whose chain loops would hang `fsd`: [`check_chains`] finds such chains (and
//! links that leave the volume) when it mounts a volume.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

#[cfg(test)]
extern crate std;

/// What the boot sector says about the FATs (FAT16 or FAT32; FAT12 is not read by
/// `embedded-sdmmc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// First FAT's first sector, from the volume's start.
    pub fat_start: u32,
    /// Sectors per FAT.
    pub fat_sectors: u32,
    /// FAT copies.
    pub fats: u32,
    /// Clusters of the volume (valid cluster numbers are 2..clusters + 2).
    pub clusters: u32,
    /// Bytes per FAT entry: 2 (FAT16) or 4 (FAT32).
    pub width: u32,
}

/// Bytes per sector this reads (the only size `embedded-sdmmc` takes).
pub const SECTOR: usize = 512;

fn u16_at(b: &[u8], at: usize) -> u32 {
    u32::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Layout {
    /// The layout of the volume whose boot sector is `b`, in `room` sectors (its
    /// partition's length, itself cut at the disk's end); `None` for anything but a
    /// FAT16 or FAT32 volume of 512-byte sectors whose parts fit in it: a boot sector
    /// that does not add up (its FATs past the volume's end, in arithmetic that would
    /// wrap; FATs too small for its clusters; no reserved sector) or that claims more
    /// sectors than `room` is `None` too, so that nothing is ever read or written where it
    /// says the FATs are, and never past the partition (a boot sector that claimed a
    /// volume of 2^32 sectors had `fsd` seal "FAT" sectors over the rest of the disk).
    pub fn from_boot_sector(b: &[u8; SECTOR], room: u32) -> Option<Layout> {
        if b[510] != 0x55 || b[511] != 0xaa || u16_at(b, 11) != SECTOR as u32 {
            return None;
        }
        let per_cluster = u32::from(b[13]);
        let reserved = u16_at(b, 14);
        let fats = u32::from(b[16]);
        let root_sectors = (u16_at(b, 17) * 32).div_ceil(SECTOR as u32);
        let total = match u16_at(b, 19) {
            0 => u32_at(b, 32),
            n => n,
        };
        let fat_sectors = match u16_at(b, 22) {
            0 => u32_at(b, 36),
            n => n,
        };
        if total > room {
            return None;
        }
        if per_cluster == 0 || !per_cluster.is_power_of_two() || reserved == 0 {
            return None;
        }
        if fats == 0 || fat_sectors == 0 {
            return None;
        }
        let meta = fats
            .checked_mul(fat_sectors)?
            .checked_add(reserved)?
            .checked_add(root_sectors)?;
        let clusters = total.checked_sub(meta)? / per_cluster;
        let width = match clusters {
            0..4085 => return None,
            4085..65525 => 2,
            _ => 4,
        };
        // Every cluster (and the two reserved entries) needs an entry in each FAT.
        let entries = u64::from(fat_sectors) * SECTOR as u64 / u64::from(width);
        if entries < u64::from(clusters) + 2 {
            return None;
        }
        Some(Layout {
            fat_start: reserved,
            fat_sectors,
            fats,
            clusters,
            width,
        })
    }

    /// The first entry past the last cluster.
    pub fn limit(&self) -> u32 {
        self.clusters + 2
    }

    /// The sectors (from the volume's start) of every FAT copy that hold entries past the
    /// last cluster, with the number of the first entry each holds.
    pub fn tail_sectors(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let per_sector = SECTOR as u32 / self.width;
        let first = self.limit() / per_sector;
        (0..self.fats).flat_map(move |copy| {
            (first..self.fat_sectors)
                .map(move |s| (self.fat_start + copy * self.fat_sectors + s, s * per_sector))
        })
    }
}

impl Layout {
    /// Where cluster `cluster`'s entry lies in every FAT copy: (sector from the volume's
    /// start, byte offset in it); nothing for a cluster number outside the volume.
    pub fn entry_sectors(&self, cluster: u32) -> impl Iterator<Item = (u32, usize)> + '_ {
        let valid = (2..self.limit()).contains(&cluster);
        let at = cluster as u64 * u64::from(self.width);
        let (sector, offset) = ((at / SECTOR as u64) as u32, (at % SECTOR as u64) as usize);
        (0..if valid { self.fats } else { 0 })
            .map(move |copy| (self.fat_start + copy * self.fat_sectors + sector, offset))
    }
}

/// Free the entry at `offset` of FAT `sector` if it is in use (a link or a chain's end;
/// a free or bad entry is left as it is), for a chain nothing refers to any more (a
/// deleted directory's, which may be several clusters long); returns what it held (`None`:
/// nothing changed), so that the caller can follow the chain ([`Layout::link`]).
pub fn free_entry(layout: &Layout, sector: &mut [u8; SECTOR], offset: usize) -> Option<u32> {
    let w = layout.width as usize;
    let e = sector.get_mut(offset..offset + w)?;
    let raw = if w == 2 { u16_at(e, 0) } else { u32_at(e, 0) };
    let (v, bad) = if w == 2 {
        (raw, 0xfff7)
    } else {
        (raw & 0x0fff_ffff, 0x0fff_fff7)
    };
    if v == 0 || v == bad {
        return None;
    }
    if w == 2 {
        e.fill(0);
    } else {
        e[..3].fill(0);
        e[3] &= 0xf0;
    }
    Some(raw)
}

/// The largest `n` for which `at_most(n)` holds, for a predicate that holds from 0 up to
/// some `n` and not after it: how `fsd` reads a cluster's number, which `embedded-sdmmc`
/// keeps private but lets one compare (`ClusterId::EMPTY + n <= id`).
pub fn bisect(at_most: impl Fn(u32) -> bool) -> u32 {
    let (mut lo, mut hi) = (0u64, 1u64 << 32);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if at_most(mid as u32) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo as u32
}

/// Mark bad every free entry of `sector` (whose first entry is number `first`) at or past
/// `layout.limit()`; how many it marked.
pub fn seal(layout: &Layout, sector: &mut [u8; SECTOR], first: u32) -> u32 {
    let w = layout.width as usize;
    let mut changed = 0;
    for (i, e) in sector.chunks_exact_mut(w).enumerate() {
        if first + i as u32 >= layout.limit() && e.iter().all(|&b| b == 0) {
            let bad: &[u8] = if w == 2 {
                &[0xf7, 0xff]
            } else {
                &[0xf7, 0xff, 0xff, 0x0f]
            };
            e.copy_from_slice(bad);
            changed += 1;
        }
    }
    changed
}

/// What is wrong with a FAT's chains ([`check_chains`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainFault {
    /// Cluster `0`'s entry links to `1`, which is no cluster of the volume (0, 1, or past
    /// its end): following it would read whatever lies past the FAT.
    Outside(u32, u32),
    /// The chain through cluster `0` comes back to itself: it has no end.
    Loop(u32),
    /// Cluster `0` follows two clusters: two chains share it (cross-linked), so freeing
    /// one file's chain would free the other's clusters too.
    Joined(u32),
}

impl Layout {
    /// What entry `raw` (as read from a FAT of this layout) says follows its cluster: a
    /// next cluster (`Some(Ok(n))`), nothing (`None`: free, the end of a chain, bad), or
    /// `Some(Err(()))` for a value that names no cluster of the volume.
    pub fn link(&self, raw: u32) -> Option<Result<u32, ()>> {
        let (v, bad) = match self.width {
            2 => (raw & 0xffff, 0xfff7),
            _ => (raw & 0x0fff_ffff, 0x0fff_fff7),
        };
        match v {
            0 => None,
            v if v >= bad => None,
            v if (2..self.limit()).contains(&v) => Some(Ok(v)),
            _ => Some(Err(())),
        }
    }
}

/// Check every chain of a FAT whose entry for cluster `c` is `entry(c)`: each link stays
/// within the volume, no cluster follows two, and no chain comes back to itself. Why: `embedded-sdmmc` follows a
/// directory's chain until an entry marks its end, with no bound, so a corrupt FAT whose
/// chain loops (or wanders past the FAT, where any value may follow) would hang the file
/// server for good. Linear in the clusters, one byte of state each.
pub fn check_chains(layout: &Layout, entry: impl Fn(u32) -> u32) -> Result<(), ChainFault> {
    const NEW: u8 = 0;
    const WALKING: u8 = 1;
    const DONE: u8 = 2;
    let limit = layout.limit();
    let mut state = alloc::vec![NEW; limit as usize];
    // First, no cluster follows two (a cross-link; `fsd` frees a deleted file's whole
    // chain, which must be its alone): `state` marks the clusters that follow one.
    for c in 2..limit {
        if let Some(Ok(n)) = layout.link(entry(c)) {
            if state[n as usize] != NEW {
                return Err(ChainFault::Joined(n));
            }
            state[n as usize] = DONE;
        }
    }
    state.fill(NEW);
    for start in 2..limit {
        if state[start as usize] != NEW {
            continue;
        }
        // Follow the chain from `start` until an end, a cluster already known to end, or
        // one of this walk (a loop); then mark the walk's clusters as ending.
        let mut c = start;
        loop {
            state[c as usize] = WALKING;
            match layout.link(entry(c)) {
                None => break,
                Some(Err(())) => return Err(ChainFault::Outside(c, entry(c))),
                Some(Ok(n)) => match state[n as usize] {
                    DONE => break,
                    WALKING => return Err(ChainFault::Loop(n)),
                    _ => c = n,
                },
            }
        }
        let mut c = start;
        while state[c as usize] == WALKING {
            state[c as usize] = DONE;
            match layout.link(entry(c)) {
                Some(Ok(n)) => c = n,
                _ => break,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_a_clusters_entry_lies() {
        let l = Layout::from_boot_sector(&fat16_4mib(), ROOM).unwrap();
        // Cluster 300: FAT16 entry at byte 600, sector 1 of each FAT (+ 4 reserved).
        let at: std::vec::Vec<_> = l.entry_sectors(300).collect();
        assert_eq!(at, [(5, 88), (5 + 32, 88)]);
        assert_eq!(
            l.entry_sectors(1).count(),
            0,
            "clusters 0 and 1 are not clusters"
        );
        assert_eq!(l.entry_sectors(l.limit()).count(), 0, "past the volume");
    }

    #[test]
    fn chains_that_loop_or_leave_the_volume_are_found() {
        let l = Layout::from_boot_sector(&fat16_4mib(), ROOM).unwrap();
        let fat = |links: &[(u32, u32)]| {
            let mut f = std::vec![0u32; l.limit() as usize];
            for &(c, n) in links {
                f[c as usize] = n;
            }
            f
        };
        // Two files (2 -> 3 -> 4 -> end, 10 -> end), a bad cluster, free ones: fine.
        let good = fat(&[(2, 3), (3, 4), (4, 0xffff), (10, 0xfff8), (11, 0xfff7)]);
        assert_eq!(check_chains(&l, |c| good[c as usize]), Ok(()));
        // A chain that comes back to its start, or to a cluster in its middle.
        let round = fat(&[(2, 3), (3, 4), (4, 2)]);
        assert_eq!(
            check_chains(&l, |c| round[c as usize]),
            Err(ChainFault::Loop(2))
        );
        // A lasso: cluster 6 follows both 5 and 7 (found as a cross-link first).
        let lasso = fat(&[(5, 6), (6, 7), (7, 6)]);
        assert_eq!(
            check_chains(&l, |c| lasso[c as usize]),
            Err(ChainFault::Joined(6))
        );
        let itself = fat(&[(9, 9)]);
        assert_eq!(
            check_chains(&l, |c| itself[c as usize]),
            Err(ChainFault::Loop(9))
        );
        // Links to no cluster: 1, past the volume's end.
        let one = fat(&[(2, 1)]);
        assert_eq!(
            check_chains(&l, |c| one[c as usize]),
            Err(ChainFault::Outside(2, 1))
        );
        let past = fat(&[(2, 3), (3, l.limit())]);
        assert_eq!(
            check_chains(&l, |c| past[c as usize]),
            Err(ChainFault::Outside(3, l.limit()))
        );
        // Two chains joining one tail: cross-linked, refused too.
        let join = fat(&[(2, 4), (3, 4), (4, 0xffff)]);
        assert_eq!(
            check_chains(&l, |c| join[c as usize]),
            Err(ChainFault::Joined(4))
        );
    }

    #[test]
    fn an_entry_in_use_is_freed_and_says_what_it_held() {
        let l = Layout::from_boot_sector(&fat16_4mib(), ROOM).unwrap();
        let mut s = [0u8; SECTOR];
        s[0..2].copy_from_slice(&0x0123u16.to_le_bytes()); // a link
        s[2..4].copy_from_slice(&0xffffu16.to_le_bytes()); // an end
        s[4..6].copy_from_slice(&0xfff7u16.to_le_bytes()); // bad
        assert_eq!(free_entry(&l, &mut s, 0), Some(0x0123));
        assert_eq!(l.link(0x0123), Some(Ok(0x0123)));
        assert_eq!(free_entry(&l, &mut s, 2), Some(0xffff));
        assert_eq!(l.link(0xffff), None);
        assert_eq!(free_entry(&l, &mut s, 4), None, "a bad cluster is kept");
        assert_eq!(free_entry(&l, &mut s, 0), None, "free already");
        assert_eq!(
            free_entry(&l, &mut s, 511),
            None,
            "an entry that does not fit"
        );
        assert_eq!(&s[0..6], &[0, 0, 0, 0, 0xf7, 0xff]);
    }

    #[test]
    fn bisect_finds_the_number() {
        for n in [0u32, 1, 2, 300, 65_524, 0x0fff_ffff, u32::MAX] {
            assert_eq!(bisect(|m| m <= n), n);
        }
    }

    #[test]
    fn a_fat32_entry_keeps_its_top_bits() {
        let l = Layout {
            fat_start: 32,
            fat_sectors: 100,
            fats: 2,
            clusters: 100_000,
            width: 4,
        };
        let mut s = [0u8; SECTOR];
        s[8..12].copy_from_slice(&0xfffffff8u32.to_le_bytes());
        assert_eq!(free_entry(&l, &mut s, 8), Some(0xfffffff8));
        assert_eq!(u32_at(&s, 8), 0xf000_0000);
    }

    /// The sectors of [`fat16_4mib`]'s partition.
    const ROOM: u32 = 8192;

    /// The boot sector `mkfs.fat -F 16 -s 1` writes for 4 MiB (8,192 sectors): 4
    /// reserved, 2 FATs of 32 sectors, 512 root entries.
    fn fat16_4mib() -> [u8; SECTOR] {
        let mut b = [0u8; SECTOR];
        b[11..13].copy_from_slice(&512u16.to_le_bytes());
        b[13] = 1;
        b[14..16].copy_from_slice(&4u16.to_le_bytes());
        b[16] = 2;
        b[17..19].copy_from_slice(&512u16.to_le_bytes());
        b[19..21].copy_from_slice(&8192u16.to_le_bytes());
        b[22..24].copy_from_slice(&32u16.to_le_bytes());
        b[510] = 0x55;
        b[511] = 0xaa;
        b
    }

    #[test]
    fn fat16_layout_and_tail() {
        let l = Layout::from_boot_sector(&fat16_4mib(), ROOM).unwrap();
        // 8,192 - 4 - 64 - 32 = 8,092 clusters; entries 8,094.. are past the end.
        assert_eq!(l.clusters, 8092);
        assert_eq!((l.width, l.limit()), (2, 8094));
        // Entry 8,094 is in FAT sector 31 (256 entries a sector): one sector per copy.
        let tails: std::vec::Vec<_> = l.tail_sectors().collect();
        assert_eq!(tails, [(4 + 31, 31 * 256), (4 + 32 + 31, 31 * 256)]);
        let mut s = [0u8; SECTOR];
        s[0] = 0xff; // entry 7,936: in use, kept
                     // Entries 8,094..8,191 of this sector: 98.
        assert_eq!(seal(&l, &mut s, 31 * 256), 98);
        assert_eq!(s[0], 0xff);
        let entry = |s: &[u8; SECTOR], n: u32| {
            let at = ((n - 31 * 256) * 2) as usize;
            u16::from_le_bytes([s[at], s[at + 1]])
        };
        assert_eq!(entry(&s, 8093), 0, "the last cluster stays free");
        assert_eq!(entry(&s, 8094), 0xfff7);
        assert_eq!(entry(&s, 8191), 0xfff7);
        assert_eq!(
            seal(&l, &mut s, 31 * 256),
            0,
            "sealing twice changes nothing"
        );
    }

    #[test]
    fn not_fat16_or_fat32() {
        assert_eq!(Layout::from_boot_sector(&[0u8; SECTOR], ROOM), None);
        let mut small = fat16_4mib();
        small[19..21].copy_from_slice(&2048u16.to_le_bytes()); // FAT12-sized
        assert_eq!(Layout::from_boot_sector(&small, ROOM), None);
        let mut bad = fat16_4mib();
        bad[22..24].copy_from_slice(&9000u16.to_le_bytes()); // FATs larger than the volume
        assert_eq!(Layout::from_boot_sector(&bad, ROOM), None);
    }

    /// Boot sectors that do not add up are refused, never read as a volume whose FATs
    /// lie elsewhere (a regression: the sum of the parts wrapped, and `fsd` then marked
    /// "tail" entries over the whole disk).
    #[test]
    fn a_boot_sector_that_does_not_add_up_is_refused() {
        let mut wraps = fat16_4mib();
        wraps[22..24].copy_from_slice(&0u16.to_le_bytes());
        wraps[36..40].copy_from_slice(&0x8000_0010u32.to_le_bytes()); // 2 FATs: wraps to 32
        assert_eq!(Layout::from_boot_sector(&wraps, ROOM), None);
        let mut huge = fat16_4mib();
        huge[16] = 255;
        huge[22..24].copy_from_slice(&0u16.to_le_bytes());
        huge[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Layout::from_boot_sector(&huge, ROOM), None);
        let mut no_cluster = fat16_4mib();
        no_cluster[13] = 0;
        assert_eq!(Layout::from_boot_sector(&no_cluster, ROOM), None);
        let mut odd_cluster = fat16_4mib();
        odd_cluster[13] = 3;
        assert_eq!(Layout::from_boot_sector(&odd_cluster, ROOM), None);
        let mut no_reserved = fat16_4mib();
        no_reserved[14..16].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(Layout::from_boot_sector(&no_reserved, ROOM), None);
        let mut small_fat = fat16_4mib();
        small_fat[22..24].copy_from_slice(&8u16.to_le_bytes()); // 2,048 entries, 8,000 clusters
        assert_eq!(Layout::from_boot_sector(&small_fat, ROOM), None);
        assert!(Layout::from_boot_sector(&fat16_4mib(), ROOM).is_some());
    }

    /// A boot sector claiming more sectors than its partition holds is refused, however
    /// well its parts add up (a regression: total 2^32 - 1 and FATs of 0xffff0000 sectors
    /// passed, and `fsd` sealed "tail" entries over every sector after the volume's).
    #[test]
    fn a_volume_larger_than_its_partition_is_refused() {
        let mut lies = fat16_4mib();
        lies[19..21].copy_from_slice(&0u16.to_le_bytes());
        lies[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        lies[16] = 1;
        lies[22..24].copy_from_slice(&0u16.to_le_bytes());
        lies[36..40].copy_from_slice(&0xffff_0000u32.to_le_bytes());
        assert!(
            Layout::from_boot_sector(&lies, u32::MAX).is_some(),
            "adds up"
        );
        assert_eq!(Layout::from_boot_sector(&lies, ROOM), None);
        assert_eq!(Layout::from_boot_sector(&fat16_4mib(), ROOM - 1), None);
    }
}
