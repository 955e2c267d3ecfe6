//! The `kv` server's table, laid out in a byte area: the *state ICA* of issue 14 (P3's
//! server state kept outside the server), so that the table outlives the process that
//! serves it and the next server of the function id finds it where it was.
//!
//! It exists apart from `user/kv` so that the layout, its validation and its upgrade are
//! tested on the host (`tests/`), and so that the server with its state in the process (the
//! heap; P3 Table 2's comparison) runs exactly the same code over a heap buffer.
//!
//! # Layout (version 2, [`VERSION`])
//!
//! ```text
//! 0         128       256               1320 (FIRST_SLOT)                          len
//! | header | header | journal (a slot) | slot 0 | slot 1 | ... | slot capacity-1 | tail |
//! ```
//!
//! - The header ([`HeaderV2`], plain data, little-endian, read and written by copying, so
//!   the area needs no alignment): magic, layout version, slot size, capacity, the number
//!   of entries, a generation (one more per change), counters of puts/gets/dels, a write
//!   sequence number, the change in progress, and a checksum (FNV-1a 64) over the fields
//!   before it. It is written to its two copies in turn; the valid copy with the higher
//!   sequence number is the header.
//! - A slot (1,064 bytes): `used` (0 or 1), key length (1..=32), value length (0..=1,024,
//!   two bytes), the key's FNV-1a 32 hash, the key (32 bytes), the value (1,024 bytes).
//!   Keys are up to [`KEY_MAX`] = 32 bytes, values up to [`VALUE_MAX`] = 1 KiB.
//! - An open-addressing hash table with linear probing: a key lives at the first slot from
//!   `hash % capacity` on that is free or holds it. Deleting shifts the entries after it
//!   back (no tombstones), and at most 7/8 of the slots are used ([`Table::limit`]), so a
//!   probe always ends at a free slot.
//!
//! # A kill at any point
//!
//! The server can be killed (or crash) between any two of its writes, and the next server
//! opens the same area. So each change first records itself in the header (`op`): a new
//! key is written into its slot while the slot is still marked free, then marked used; an
//! overwrite first copies the slot to the journal; a deletion records its hole before each
//! entry it moves back. [`open`] then undoes a put the header records (frees the slot, or
//! copies the journal back) and finishes a deletion (moving an entry again is harmless), so
//! a request cut short leaves the state before it or after it, never a mix, and a kill
//! during that recovery is recovered the same way. The header's two copies make its own
//! writes safe. `tests/crash.rs` kills every operation at every byte (`Table::crash_after`).
//!
//! # Version 1 and the upgrade
//!
//! Version 1 (kept to test the upgrade path, and for `kv v1`) had one shorter header
//! ([`HeaderV1`]: no counters, no crash record) at 0, no journal, and 1,060-byte slots
//! without the stored hash from offset 128; it is not crash-safe. [`upgrade`] turns a
//! version-1 area into version 2 in place: the slots move from the last to the first (each
//! to a higher address, so nothing is overwritten before it is read), the hash is computed,
//! the counters start at 0 (the upgrade itself is not crash-safe). [`format_version`] sizes
//! the table for version 2 whatever the version, so the upgrade of an area it formatted
//! always has room; an area without it answers [`Error::NoRoom`] and is left as it was.
//!
//! # Validation
//!
//! [`open`] trusts nothing in the area: a wrong magic, an unknown or older version, a slot
//! size or capacity that does not fit the area, no header copy with a right checksum, a
//! slot with a bad length or hash, an entry that a lookup would not find (a broken probe
//! chain, a duplicate), a count that is not the number of used slots: each is an [`Error`],
//! never a panic or an access out of bounds (`tests/fuzz.rs` feeds it random and mutated
//! areas). After `open` the table changes only through [`Table`], which keeps it valid.
#![forbid(unsafe_code)]
#![no_std]

pub mod proto;

pub mod layout;

use core::sync::atomic::{compiler_fence, Ordering};
use layout::{header_bytes, op, read_header, Layout, JOURNAL_AT, V1, V2};
pub use layout::{HeaderV1, HeaderV2, HEADER_AREA, MAGIC};

/// The layout this code formats and serves.
pub const VERSION: u32 = 2;
/// Longest key, in bytes.
pub const KEY_MAX: usize = 32;
/// Longest value, in bytes.
pub const VALUE_MAX: usize = 1024;
/// The size of a version-2 slot.
pub const SLOT_SIZE: usize = V2.slot_size;
/// Where version 2's slot 0 begins (after two header copies and the journal).
pub const FIRST_SLOT: usize = V2.slots_at;

/// The smallest area that [`format`] makes a table of `slots` slots.
pub const fn area_for(slots: usize) -> usize {
    FIRST_SLOT + slots * SLOT_SIZE
}

/// Why an area cannot be opened or an operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The area cannot hold a header and one slot.
    TooSmall,
    /// The area does not begin with [`MAGIC`]: not a kv table (or never formatted).
    BadMagic,
    /// A layout version this code does not know (or newer than asked for).
    BadVersion(u32),
    /// An older layout: [`upgrade`] it first.
    OldVersion(u32),
    /// The header's slot size or capacity does not fit the area.
    BadCapacity,
    /// The header's checksum, a slot or the count is wrong.
    Corrupt,
    /// Keys are 1 to [`KEY_MAX`] bytes.
    EmptyKey,
    KeyTooLong,
    /// Values are at most [`VALUE_MAX`] bytes.
    ValueTooLong,
    /// The table holds [`Table::limit`] entries: no room for a new key.
    Full,
    /// The area has no room for the new layout's slots.
    NoRoom,
    /// Only with [`Table::crash_after`] (tests): the operation stopped as a kill would stop
    /// it, part-way through its writes.
    Crashed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::TooSmall => write!(f, "area too small for a kv table"),
            Error::BadMagic => write!(f, "not a kv table (bad magic)"),
            Error::BadVersion(v) => write!(f, "unknown kv layout version {v}"),
            Error::OldVersion(v) => write!(f, "kv layout version {v} needs an upgrade"),
            Error::BadCapacity => write!(f, "kv header's slot size or capacity does not fit"),
            Error::Corrupt => write!(f, "kv table corrupt"),
            Error::EmptyKey => write!(f, "empty key"),
            Error::KeyTooLong => write!(f, "key longer than {KEY_MAX} bytes"),
            Error::ValueTooLong => write!(f, "value longer than {VALUE_MAX} bytes"),
            Error::Full => write!(f, "kv table full"),
            Error::NoRoom => write!(f, "no room for the new layout"),
            Error::Crashed => write!(f, "stopped part-way (a simulated kill)"),
        }
    }
}

/// FNV-1a, 32 bits: the hash of a key.
pub fn hash(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Keep the compiler from moving the area's writes across this point: a kill can stop the
/// server anywhere, and the next server must find the writes before it done.
fn order() {
    compiler_fence(Ordering::SeqCst);
}

fn check_key(key: &[u8]) -> Result<(), Error> {
    match key.len() {
        0 => Err(Error::EmptyKey),
        n if n > KEY_MAX => Err(Error::KeyTooLong),
        _ => Ok(()),
    }
}

/// What [`Table::stats`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub version: u32,
    pub capacity: u64,
    pub count: u64,
    /// One more per change (put, del, format, upgrade).
    pub generation: u64,
    pub puts: u64,
    pub gets: u64,
    pub dels: u64,
}

/// An open table over its area. Every change is written through to the area, in an order
/// that a kill at any point leaves recoverable (version 2: the module doc), so the area
/// alone is the state.
pub struct Table<'a> {
    area: &'a mut [u8],
    lay: Layout,
    h: HeaderV2,
    cap: usize,
    /// Bytes that may still be written before a simulated kill ([`Table::crash_after`]).
    budget: Option<usize>,
    /// What `open` found in progress and undid or finished (`layout::op`'s kind; 0: none).
    recovered: u64,
}

/// Format `area` as an empty table of the current layout.
pub fn format(area: &mut [u8]) -> Result<Table<'_>, Error> {
    format_version(area, VERSION)
}

/// Format `area` as an empty table of layout `version` (1 or 2). The capacity is what
/// version 2 allows, whatever the version (see the module doc).
pub fn format_version(area: &mut [u8], version: u32) -> Result<Table<'_>, Error> {
    let lay = layout::layout(version).ok_or(Error::BadVersion(version))?;
    let cap = area.len().saturating_sub(FIRST_SLOT) / SLOT_SIZE;
    if cap == 0 {
        return Err(Error::TooSmall);
    }
    area[..lay.slots_at + cap * lay.slot_size].fill(0);
    let h = HeaderV2 {
        magic: MAGIC,
        version,
        slot_size: lay.slot_size as u32,
        capacity: cap as u64,
        generation: 1,
        ..HeaderV2::default()
    };
    let mut t = Table {
        area,
        lay,
        h,
        cap,
        budget: None,
        recovered: 0,
    };
    // Both copies (version 2), so copy 0 holds the magic from the start.
    t.commit()?;
    t.commit()?;
    Ok(t)
}

/// Open the current layout's table in `area`: finish or undo a change a kill cut short,
/// then check all of it (module doc).
pub fn open(area: &mut [u8]) -> Result<Table<'_>, Error> {
    open_version(area, VERSION)
}

/// Open a table of layout `version` exactly: an older one is [`Error::OldVersion`], a newer
/// or unknown one [`Error::BadVersion`].
pub fn open_version(area: &mut [u8], version: u32) -> Result<Table<'_>, Error> {
    open_inner(area, version, None)
}

/// Tests: [`open`] whose recovery may write only `bytes` bytes (a kill during recovery).
#[doc(hidden)]
pub fn open_crashing(area: &mut [u8], bytes: usize) -> Result<Table<'_>, Error> {
    open_inner(area, VERSION, Some(bytes))
}

fn open_inner(area: &mut [u8], version: u32, budget: Option<usize>) -> Result<Table<'_>, Error> {
    let (lay, h) = read_header(area)?;
    if lay.version < version {
        return Err(Error::OldVersion(lay.version));
    }
    if lay.version > version {
        return Err(Error::BadVersion(lay.version));
    }
    let mut t = Table {
        cap: h.capacity as usize,
        area,
        lay,
        h,
        budget,
        recovered: op::kind(h.op),
    };
    if t.h.op != op::NONE {
        t.recover()?;
    }
    t.validate()?;
    t.budget = None;
    Ok(t)
}

/// Bring the table in `area` to the current layout in place; returns the version it had.
/// A current table is left alone; a version-1 table is checked whole first (as [`open`]
/// would), and an area without room for the new slots is [`Error::NoRoom`], unchanged.
/// (Not crash-safe: a kill during the upgrade leaves an area `open` refuses.)
pub fn upgrade(area: &mut [u8]) -> Result<u32, Error> {
    let (lay, h) = read_header(area)?;
    if lay.version == VERSION {
        return Ok(VERSION);
    }
    let cap = open_version(area, lay.version)?.cap;
    let need = cap
        .checked_mul(V2.slot_size)
        .and_then(|b| b.checked_add(V2.slots_at));
    if need.is_none_or(|n| n > area.len()) {
        return Err(Error::NoRoom);
    }
    // Every slot moves to a higher address: from the last to the first, nothing is
    // overwritten before it is read.
    let mut buf = [0u8; V2.slot_size];
    for i in (0..cap).rev() {
        let from = V1.slots_at + i * V1.slot_size;
        let s = &area[from..from + V1.slot_size];
        buf.fill(0);
        if s[0] == USED {
            let key_len = usize::from(s[1]).min(KEY_MAX);
            buf[..4].copy_from_slice(&s[..4]);
            buf[4..8].copy_from_slice(&hash(&s[V1.key_at..V1.key_at + key_len]).to_le_bytes());
            buf[V2.key_at..].copy_from_slice(&s[V1.key_at..]);
        }
        let to = V2.slots_at + i * V2.slot_size;
        area[to..to + V2.slot_size].copy_from_slice(&buf);
    }
    area[..V2.slots_at].fill(0);
    let h2 = HeaderV2 {
        version: V2.version,
        slot_size: V2.slot_size as u32,
        generation: h.generation + 1,
        ..h
    };
    let mut t = Table {
        area,
        lay: V2,
        h: h2,
        cap,
        budget: None,
        recovered: 0,
    };
    t.commit()?;
    t.commit()?;
    Ok(lay.version)
}

const USED: u8 = 1;

impl<'a> Table<'a> {
    /// Most entries the table takes (7/8 of the slots; a probe always ends at a free one).
    pub fn limit(&self) -> u64 {
        (self.cap as u64) * 7 / 8
    }

    pub fn stats(&self) -> Stats {
        Stats {
            version: self.lay.version,
            capacity: self.cap as u64,
            count: self.h.count,
            generation: self.h.generation,
            puts: self.h.puts,
            gets: self.h.gets,
            dels: self.h.dels,
        }
    }

    /// What `open` found cut short by a kill and set right: `"put"` (undone), `"del"`
    /// (finished), or `None`.
    pub fn recovered(&self) -> Option<&'static str> {
        match self.recovered {
            op::PUT_NEW | op::PUT_OVER => Some("put"),
            op::DEL => Some("del"),
            _ => None,
        }
    }

    /// Tests: let the table write only `bytes` more bytes, then stop every operation with
    /// [`Error::Crashed`] (the area as a kill at that point would leave it).
    #[doc(hidden)]
    pub fn crash_after(&mut self, bytes: usize) {
        self.budget = Some(bytes);
    }

    // ---- writes: every byte the table writes goes through these -------------------------

    /// Write `src` at `at` (as much as the budget allows).
    fn store(&mut self, at: usize, src: &[u8]) -> Result<(), Error> {
        let n = match self.budget {
            None => src.len(),
            Some(b) => b.min(src.len()),
        };
        self.area[at..at + n].copy_from_slice(&src[..n]);
        self.spend(n, src.len())
    }

    /// Copy `len` bytes from `from` to `to` (not overlapping).
    fn copy(&mut self, from: usize, len: usize, to: usize) -> Result<(), Error> {
        let n = match self.budget {
            None => len,
            Some(b) => b.min(len),
        };
        self.area.copy_within(from..from + n, to);
        self.spend(n, len)
    }

    fn spend(&mut self, n: usize, wanted: usize) -> Result<(), Error> {
        if let Some(b) = &mut self.budget {
            *b -= n;
            if n < wanted {
                return Err(Error::Crashed);
            }
        }
        Ok(())
    }

    /// Write the header (version 2: the next copy), after everything before it.
    fn commit(&mut self) -> Result<(), Error> {
        order();
        self.h.seq += 1;
        let (at, bytes) = header_bytes(self.lay, &self.h);
        self.store(at, &bytes)?;
        order();
        Ok(())
    }

    // ---- reading ------------------------------------------------------------------------

    fn slot_at(&self, i: usize) -> usize {
        self.lay.slots_at + i * self.lay.slot_size
    }

    fn slot(&self, i: usize) -> &[u8] {
        let at = self.slot_at(i);
        &self.area[at..at + self.lay.slot_size]
    }

    fn key_of(&self, s: &[u8]) -> (usize, u32) {
        let key_len = usize::from(s[1]).min(KEY_MAX);
        let key = &s[self.lay.key_at..self.lay.key_at + key_len];
        let h = if self.lay.hashed {
            u32::from_le_bytes(s[4..8].try_into().unwrap_or_default())
        } else {
            hash(key)
        };
        (key_len, h)
    }

    /// Where `key` (of hash `h`) is, or the free slot where it would go.
    fn find(&self, key: &[u8], h: u32) -> Result<(usize, bool), Error> {
        let mut i = h as usize % self.cap;
        for _ in 0..self.cap {
            let s = self.slot(i);
            if s[0] != USED {
                return Ok((i, false));
            }
            let (key_len, sh) = self.key_of(s);
            if sh == h && &s[self.lay.key_at..self.lay.key_at + key_len] == key {
                return Ok((i, true));
            }
            i = (i + 1) % self.cap;
        }
        Err(Error::Corrupt)
    }

    /// Every slot well-formed, every entry found where it is, the count right.
    fn validate(&self) -> Result<(), Error> {
        let mut used = 0u64;
        for i in 0..self.cap {
            let s = self.slot(i);
            match s[0] {
                0 => continue,
                USED => {}
                _ => return Err(Error::Corrupt),
            }
            let key_len = usize::from(s[1]);
            let value_len = usize::from(u16::from_le_bytes([s[2], s[3]]));
            if key_len == 0 || key_len > KEY_MAX || value_len > VALUE_MAX {
                return Err(Error::Corrupt);
            }
            let key = &s[self.lay.key_at..self.lay.key_at + key_len];
            let h = hash(key);
            if self.key_of(s).1 != h || self.find(key, h)? != (i, true) {
                return Err(Error::Corrupt);
            }
            used += 1;
        }
        if used != self.h.count || used > self.limit() {
            return Err(Error::Corrupt);
        }
        Ok(())
    }

    // ---- the operations -----------------------------------------------------------------

    /// The value of `key`, if any.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<&[u8]>, Error> {
        check_key(key)?;
        let (i, found) = self.find(key, hash(key))?;
        self.h.gets += u64::from(self.lay.version >= 2);
        self.commit()?;
        if !found {
            return Ok(None);
        }
        let s = self.slot(i);
        let value_len = usize::from(u16::from_le_bytes([s[2], s[3]])).min(VALUE_MAX);
        let v = self.lay.key_at + KEY_MAX;
        Ok(Some(&s[v..v + value_len]))
    }

    /// Set `key` to `value`; true if the key is new.
    ///
    /// A new key: the header records the slot (`PUT_NEW`), the slot is written while it is
    /// still marked free, then marked used, then the header counts it. An overwrite: the
    /// slot is copied to the journal, the header records it (`PUT_OVER`), the value is
    /// written, then the header clears the record. A kill anywhere leaves the old value
    /// or the new one, never a mix (recovery undoes what the header records).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool, Error> {
        check_key(key)?;
        if value.len() > VALUE_MAX {
            return Err(Error::ValueTooLong);
        }
        let h = hash(key);
        let (i, found) = self.find(key, h)?;
        if !found && self.h.count >= self.limit() {
            return Err(Error::Full);
        }
        let (at, lay) = (self.slot_at(i), self.lay);
        let v = at + lay.key_at + KEY_MAX;
        let len = (value.len() as u16).to_le_bytes();
        if found {
            if lay.crash_safe {
                self.copy(at, lay.slot_size, JOURNAL_AT)?;
                self.h.op = op::make(op::PUT_OVER, i);
                self.commit()?;
            }
            self.store(v, value)?;
            self.store(at + 2, &len)?;
        } else {
            self.h.op = op::make(op::PUT_NEW, i);
            self.commit()?;
            let mut head = [0u8; 8 + KEY_MAX];
            head[1] = key.len() as u8;
            head[2..4].copy_from_slice(&len);
            head[4..8].copy_from_slice(&h.to_le_bytes());
            let k = lay.key_at;
            head[k..k + key.len()].copy_from_slice(key);
            self.store(v, value)?;
            // All but the `used` byte (version 1 has no hash: its key starts at 4).
            self.store(at + 1, &head[1..k + KEY_MAX])?;
            order();
            self.store(at, &[USED])?;
            self.h.count += 1;
        }
        self.h.op = op::NONE;
        self.h.generation += 1;
        self.h.puts += u64::from(lay.version >= 2);
        self.commit()?;
        Ok(!found)
    }

    /// Remove `key`; true if it was there. The entries after it in its probe run move back
    /// into the hole when their home allows it (deletion without tombstones). The header
    /// records the hole (`DEL`) before each move, so recovery finishes a deletion that a
    /// kill cut short: moving an entry again is harmless.
    pub fn del(&mut self, key: &[u8]) -> Result<bool, Error> {
        check_key(key)?;
        let (i, found) = self.find(key, hash(key))?;
        if !found {
            self.h.dels += u64::from(self.lay.version >= 2);
            self.commit()?;
            return Ok(false);
        }
        self.h.op = op::make(op::DEL, i);
        self.commit()?;
        self.finish_del(i)?;
        Ok(true)
    }

    /// Shift entries back into the hole at `hole`, free the last hole, count the deletion.
    fn finish_del(&mut self, mut hole: usize) -> Result<(), Error> {
        let (cap, size) = (self.cap, self.lay.slot_size);
        let mut j = hole;
        for _ in 0..cap {
            j = (j + 1) % cap;
            let s = self.slot(j);
            if s[0] != USED {
                break;
            }
            let home = self.key_of(s).1 as usize % cap;
            // The entry at j may move to the hole if the hole lies on its way from home.
            if (j + cap - home) % cap >= (j + cap - hole) % cap {
                let (from, to) = (self.slot_at(j), self.slot_at(hole));
                self.copy(from, size, to)?;
                hole = j;
                self.h.op = op::make(op::DEL, hole);
                self.commit()?;
            }
        }
        let at = self.slot_at(hole);
        self.store(at, &[0])?;
        self.h.count = self.h.count.saturating_sub(1);
        self.h.generation += 1;
        self.h.dels += u64::from(self.lay.version >= 2);
        self.h.op = op::NONE;
        self.commit()
    }

    /// Undo or finish the change the header records (a kill cut it short).
    fn recover(&mut self) -> Result<(), Error> {
        let slot = op::slot(self.h.op);
        if slot >= self.cap as u64 {
            return Err(Error::Corrupt);
        }
        let (i, at) = (slot as usize, self.slot_at(slot as usize));
        match op::kind(self.h.op) {
            op::PUT_NEW => self.store(at, &[0])?,
            op::PUT_OVER => self.copy(JOURNAL_AT, self.lay.slot_size, at)?,
            op::DEL => return self.finish_del(i),
            _ => return Err(Error::Corrupt),
        }
        self.h.op = op::NONE;
        self.commit()
    }
}
