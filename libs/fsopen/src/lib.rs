//! The file service's open-file table in a byte area: `fsd`'s state ICA.
//!
//! Why: `fsd`'s open files are the library's (`embedded-sdmmc`) in the server's memory, so
//! a new server that takes `fs` over (`replace fs fsd`) would know none of the handles its
//! clients hold. The server therefore writes each open file here (its handle, owner, mode,
//! position and path) whenever one is opened, moved or closed; a server that takes over
//! reads the table and opens each file again at its position, under the same handle.
//!
//! Layout (little-endian): a header of 32 bytes (`MAGIC`, `VERSION`, the next handle to
//! give, then zeroes) and [`SLOTS`] records of [`RECORD`] bytes: handle (0: free), owner
//! (a pid's raw value), mode, path length, position, path bytes, the owner's user (0 in a
//! table an earlier layout wrote: counted as the kernel's). [`Table::load`] refuses an
//! area whose header or records make no sense (a corrupt or foreign state), so a server
//! never opens files on its word.
//!
//! Shares ([`Table::room_for`], `libs/shares`): the table's slots are few (the library's
//! limit), so one user other than the administrator and the kernel holds at most
//! [`PER_USER`] of them and all such users together at most [`USERS_SHARE`]: one user's
//! programs holding files open can neither shut another user out nor the administrator's
//! (the shell's). The administrator and the kernel are trusted with the whole table, as in
//! the function registry.
#![no_std]
#![forbid(unsafe_code)]

/// First word of a table.
pub const MAGIC: u64 = 0x4e45_504f_5346_554d; // "MUSFOPEN"
/// Layout version.
pub const VERSION: u64 = 1;
/// Open files the table holds (the library's limit).
pub const SLOTS: usize = 16;
/// Longest path kept.
pub const PATH_MAX: usize = 100;
/// Bytes of one record.
pub const RECORD: usize = 8 + 8 + 1 + 1 + 4 + PATH_MAX + 6;
/// How the slots are shared out among users (`libs/shares`).
pub const SHARES: shares::Shares = shares::Shares::of(SLOTS);
/// Open files one user other than the administrator and the kernel may hold at once.
pub const PER_USER: usize = SHARES.per_user;
/// Open files all users other than the administrator and the kernel may hold together: the
/// rest are kept for the administrator's programs.
pub const USERS_SHARE: usize = SHARES.users;
/// Where a record keeps its owner's user (4 bytes, after the path).
const USER_AT: usize = 22 + PATH_MAX;
/// Bytes of the header.
pub const HEADER: usize = 32;
/// Bytes the table needs.
pub const SIZE: usize = HEADER + SLOTS * RECORD;

/// One open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    pub handle: u64,
    pub owner: u64,
    /// `abi::fs::MODE_*`.
    pub mode: u8,
    pub position: u32,
    /// The user the owner acted as when it opened the file.
    pub user: u32,
    path: [u8; PATH_MAX],
    path_len: u8,
}

impl Open {
    /// A record, or `None` for a path longer than [`PATH_MAX`] or a handle of 0.
    pub fn new(
        handle: u64,
        owner: u64,
        user: u32,
        mode: u8,
        position: u32,
        path: &str,
    ) -> Option<Open> {
        if handle == 0 || path.len() > PATH_MAX {
            return None;
        }
        let mut p = [0u8; PATH_MAX];
        p[..path.len()].copy_from_slice(path.as_bytes());
        Some(Open {
            handle,
            owner,
            mode,
            position,
            user,
            path: p,
            path_len: path.len() as u8,
        })
    }

    pub fn path(&self) -> &str {
        core::str::from_utf8(&self.path[..self.path_len as usize]).unwrap_or("")
    }
}

/// Why an area is no table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    TooSmall,
    Magic,
    Version,
    Record(usize),
    /// The next handle is 0 or at least [`HANDLES_END`]: counting on would wrap and give a
    /// handle that is open already.
    Next,
}

/// Handles stay below this: a table whose next handle is not is refused ([`Bad::Next`]), so
/// that counting on can never wrap (2^62 opens would be needed to reach it).
pub const HANDLES_END: u64 = 1 << 62;

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The user of record `r`.
fn user_of(r: &[u8]) -> u32 {
    u32::from_le_bytes([r[USER_AT], r[USER_AT + 1], r[USER_AT + 2], r[USER_AT + 3]])
}

/// The table in `area`.
pub struct Table<'a> {
    area: &'a mut [u8],
}

impl<'a> Table<'a> {
    /// A new empty table over `area` (which it overwrites); handles start at `next` (1 to
    /// [`HANDLES_END`] - 1).
    pub fn format(area: &'a mut [u8], next: u64) -> Result<Table<'a>, Bad> {
        if area.len() < SIZE {
            return Err(Bad::TooSmall);
        }
        if next == 0 || next >= HANDLES_END {
            return Err(Bad::Next);
        }
        area[..SIZE].fill(0);
        area[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        area[8..16].copy_from_slice(&VERSION.to_le_bytes());
        area[16..24].copy_from_slice(&next.to_le_bytes());
        Ok(Table { area })
    }

    /// The table a server left in `area`, checked.
    pub fn load(area: &'a mut [u8]) -> Result<Table<'a>, Bad> {
        if area.len() < SIZE {
            return Err(Bad::TooSmall);
        }
        if word(area, 0) != MAGIC {
            return Err(Bad::Magic);
        }
        if word(area, 8) != VERSION {
            return Err(Bad::Version);
        }
        let t = Table { area };
        if t.next() == 0 || t.next() >= HANDLES_END {
            return Err(Bad::Next);
        }
        for i in 0..SLOTS {
            let r = t.record(i);
            let len = r[17] as usize;
            let handle = word(r, 0);
            let sane = handle == 0
                || (len > 0
                    && len <= PATH_MAX
                    && r[16] <= 2
                    && handle < t.next()
                    && core::str::from_utf8(&r[22..22 + len]).is_ok());
            // A handle in two records would open one file twice (the first left open for
            // ever, the second's close forgetting only one record).
            let twice = handle != 0 && (0..i).any(|j| word(t.record(j), 0) == handle);
            if !sane || twice {
                return Err(Bad::Record(i));
            }
        }
        Ok(t)
    }

    fn record(&self, i: usize) -> &[u8] {
        &self.area[HEADER + i * RECORD..HEADER + (i + 1) * RECORD]
    }

    fn record_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.area[HEADER + i * RECORD..HEADER + (i + 1) * RECORD]
    }

    /// The next handle to give.
    pub fn next(&self) -> u64 {
        word(self.area, 16)
    }

    /// Give a handle: the next one, counted on.
    pub fn take_handle(&mut self) -> u64 {
        let h = self.next();
        self.area[16..24].copy_from_slice(&(h + 1).to_le_bytes());
        h
    }

    /// Every open file.
    pub fn iter(&self) -> impl Iterator<Item = Open> + '_ {
        (0..SLOTS).filter_map(|i| {
            let r = self.record(i);
            let handle = word(r, 0);
            (handle != 0).then(|| {
                let mut path = [0u8; PATH_MAX];
                path.copy_from_slice(&r[22..22 + PATH_MAX]);
                Open {
                    handle,
                    owner: word(r, 8),
                    mode: r[16],
                    path_len: r[17],
                    position: u32::from_le_bytes([r[18], r[19], r[20], r[21]]),
                    user: user_of(r),
                    path,
                }
            })
        })
    }

    fn slot_of(&self, handle: u64) -> Option<usize> {
        (0..SLOTS).find(|&i| word(self.record(i), 0) == handle)
    }

    /// Write `o` (over the record of its handle, or into a free one); false when full.
    pub fn put(&mut self, o: &Open) -> bool {
        let Some(i) = self.slot_of(o.handle).or_else(|| self.slot_of(0)) else {
            return false;
        };
        let r = self.record_mut(i);
        r[0..8].copy_from_slice(&o.handle.to_le_bytes());
        r[8..16].copy_from_slice(&o.owner.to_le_bytes());
        r[16] = o.mode;
        r[17] = o.path_len;
        r[18..22].copy_from_slice(&o.position.to_le_bytes());
        r[22..22 + PATH_MAX].copy_from_slice(&o.path);
        r[USER_AT..USER_AT + 4].copy_from_slice(&o.user.to_le_bytes());
        true
    }

    /// May a program of `user` open one more file? The administrator and the kernel may
    /// take any free slot; any other user only within [`PER_USER`] and, with the other
    /// users, [`USERS_SHARE`] ([`SHARES`]). Users are counted as the records say: a record
    /// with user 0 (an earlier layout's) counts as the kernel's.
    pub fn room_for(&self, user: u32) -> bool {
        let users = (0..SLOTS)
            .map(|i| self.record(i))
            .filter(|r| word(r, 0) != 0)
            .map(user_of);
        self.slot_of(0).is_some() && SHARES.allows(user, users)
    }

    /// Move handle `h`'s position.
    pub fn set_position(&mut self, h: u64, position: u32) {
        if let Some(i) = self.slot_of(h) {
            self.record_mut(i)[18..22].copy_from_slice(&position.to_le_bytes());
        }
    }

    /// Forget handle `h`.
    pub fn remove(&mut self, h: u64) {
        if let Some(i) = self.slot_of(h) {
            self.record_mut(i).fill(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_across_a_load() {
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        let (a, b) = (t.take_handle(), t.take_handle());
        assert_eq!((a, b, t.next()), (1, 2, 3));
        assert!(t.put(&Open::new(a, 7, 1, 1, 0, "D0/F1.DAT").unwrap()));
        assert!(t.put(&Open::new(b, 8, 1, 0, 5, "F2.DAT").unwrap()));
        t.set_position(a, 4096);
        t.remove(b);
        let t = Table::load(&mut area).unwrap();
        let all: [Open; 1] = [t.iter().next().unwrap()];
        assert_eq!(all[0].path(), "D0/F1.DAT");
        assert_eq!((all[0].owner, all[0].mode, all[0].position), (7, 1, 4096));
        assert_eq!(all[0].user, 1);
        assert_eq!(t.iter().count(), 1);
        assert_eq!(t.next(), 3);
    }

    #[test]
    fn full_and_bad() {
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        for _ in 0..SLOTS {
            let h = t.take_handle();
            assert!(t.put(&Open::new(h, 1, 1, 0, 0, "F.DAT").unwrap()));
        }
        let h = t.take_handle();
        assert!(!t.put(&Open::new(h, 1, 1, 0, 0, "G.DAT").unwrap()));
        assert!(Open::new(0, 1, 1, 0, 0, "F").is_none());
        assert!(Open::new(1, 1, 1, 0, 0, core::str::from_utf8(&[b'a'; 101]).unwrap()).is_none());
        // Zeroes (a new vregion), a foreign area, a record out of range: refused.
        assert_eq!(Table::load(&mut [0u8; SIZE]).err(), Some(Bad::Magic));
        assert_eq!(Table::load(&mut [0u8; 8]).err(), Some(Bad::TooSmall));
        area[HEADER + 16] = 9; // record 0's mode
        assert_eq!(Table::load(&mut area).err(), Some(Bad::Record(0)));
        area[HEADER + 16] = 0;
        area[HEADER] = 0xff; // record 0's handle above `next`
        assert_eq!(Table::load(&mut area).err(), Some(Bad::Record(0)));
    }

    /// One user other than the administrator and the kernel holds at most `PER_USER` slots,
    /// all of them together `USERS_SHARE` (a regression: one program could hold all 16,
    /// and every other program's open failed until it ended).
    #[test]
    fn users_keep_to_their_shares() {
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        let open = |t: &mut Table, user: u32| {
            let h = t.take_handle();
            assert!(t.put(&Open::new(h, 9, user, 0, 0, "F.DAT").unwrap()));
        };
        for _ in 0..PER_USER {
            assert!(t.room_for(7));
            open(&mut t, 7);
        }
        assert!(!t.room_for(7), "user 7 past its share");
        assert!(t.room_for(8), "user 8 shut out by user 7");
        for _ in PER_USER..USERS_SHARE {
            assert!(t.room_for(8));
            open(&mut t, 8);
        }
        assert!(!t.room_for(8) && !t.room_for(9), "past the users' share");
        for _ in USERS_SHARE..SLOTS {
            assert!(t.room_for(1), "the administrator shut out");
            open(&mut t, 1);
        }
        assert!(!t.room_for(1) && !t.room_for(0), "a full table has room");
        // A record of the earlier layout (user 0) is the kernel's: not in the users' share.
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        for _ in 0..USERS_SHARE {
            open(&mut t, 0);
        }
        assert!(t.room_for(7));
    }

    /// A corrupt table with one handle in two records is refused (a regression: it was
    /// loaded, and the new server opened the file twice, one of them never closed).
    #[test]
    fn a_handle_twice_is_refused() {
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        let h = t.take_handle();
        assert!(t.put(&Open::new(h, 7, 1, 0, 0, "A.DAT").unwrap()));
        let _ = t.take_handle();
        assert!(t.put(&Open::new(h + 1, 7, 1, 0, 0, "B.DAT").unwrap()));
        assert!(Table::load(&mut area).is_ok());
        // Record 1's handle made the same as record 0's.
        area[HEADER + RECORD..HEADER + RECORD + 8].copy_from_slice(&h.to_le_bytes());
        assert_eq!(Table::load(&mut area).err(), Some(Bad::Record(1)));
    }

    /// A corrupt table whose next handle is near the end of the handles is refused (a
    /// regression: `next` = 2^64 - 1 was loaded, counting on wrapped, and the third open
    /// was given handle 1, still another client's open file).
    #[test]
    fn a_next_handle_that_would_wrap_is_refused() {
        let mut area = [0u8; SIZE];
        let mut t = Table::format(&mut area, 1).unwrap();
        let h = t.take_handle();
        assert!(t.put(&Open::new(h, 7, 1, 0, 0, "A.DAT").unwrap()));
        for next in [u64::MAX, HANDLES_END, 0] {
            area[16..24].copy_from_slice(&next.to_le_bytes());
            assert_eq!(Table::load(&mut area).err(), Some(Bad::Next), "{next:#x}");
        }
        area[16..24].copy_from_slice(&(HANDLES_END - 1).to_le_bytes());
        assert!(Table::load(&mut area).is_ok());
        assert_eq!(Table::format(&mut [0u8; SIZE], 0).err(), Some(Bad::Next));
    }
}
