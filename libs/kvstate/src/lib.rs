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
//! 0            HEADER_AREA (128)                                          len
//! | header ... | slot 0 | slot 1 | ... | slot capacity-1 | (unused tail) |
//! ```
//!
//! - The header ([`HeaderV2`], plain data, little-endian, read and written by copying, so
//!   the area needs no alignment): magic, layout version, slot size, capacity, the number
//!   of entries, a generation (one more per change), counters of puts/gets/dels, and a
//!   checksum (FNV-1a 64) over the fields before it.
//! - A slot (1,064 bytes): `used` (0 or 1), key length (1..=32), value length (0..=1,024,
//!   two bytes), the key's FNV-1a 32 hash, the key (32 bytes), the value (1,024 bytes).
//!   Keys are up to [`KEY_MAX`] = 32 bytes, values up to [`VALUE_MAX`] = 1 KiB.
//! - An open-addressing hash table with linear probing: a key lives at the first slot from
//!   `hash % capacity` on that is free or holds it. Deleting shifts the entries after it
//!   back (no tombstones), and at most 7/8 of the slots are used ([`Table::limit`]), so a
//!   probe always ends at a free slot.
//!
//! Version 1 (kept to test the upgrade path, and for `kv --layout 1`) had a shorter header
//! ([`HeaderV1`]: no counters) and 1,060-byte slots without the stored hash. [`upgrade`]
//! turns a version-1 area into version 2 in place: the slots move from the last to the
//! first (each to a higher address, so nothing is overwritten before it is read), the hash
//! is computed, the counters start at 0. [`format_version`] sizes the table for the largest
//! slot this code knows (version 2's), so the upgrade of an area it formatted always has
//! room; an area without it answers [`Error::NoRoom`] and is left as it was.
//!
//! # Validation
//!
//! [`open`] trusts nothing in the area: a wrong magic, an unknown or older version, a slot
//! size or capacity that does not fit the area, a checksum mismatch, a slot with a bad
//! length or hash, an entry that a lookup would not find (a broken probe chain, a
//! duplicate), a count that is not the number of used slots: each is an [`Error`], never a
//! panic or an access out of bounds (`tests/fuzz.rs` feeds it random and mutated areas).
//! After `open` the table changes only through [`Table`], which keeps it valid.
//!
//! A server killed in the middle of a put or del may leave the area half-changed; the next
//! `open` then says [`Error::Corrupt`] rather than serve a broken table (there is no journal).
#![forbid(unsafe_code)]
#![no_std]

pub mod proto;

use bytemuck::{Pod, Zeroable};

/// `b"musubikv"` as a little-endian number: the first eight bytes of a formatted area.
pub const MAGIC: u64 = u64::from_le_bytes(*b"musubikv");
/// The layout this code formats and serves.
pub const VERSION: u32 = 2;
/// Longest key, in bytes.
pub const KEY_MAX: usize = 32;
/// Longest value, in bytes.
pub const VALUE_MAX: usize = 1024;
/// Bytes reserved for the header, whatever its version.
pub const HEADER_AREA: usize = 128;
/// The size of a version-2 slot.
pub const SLOT_SIZE: usize = V2.slot_size;

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
        }
    }
}

/// One layout version: where things are in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    version: u32,
    slot_size: usize,
    /// Offset of the key in a slot (the value follows it).
    key_at: usize,
    /// Does a slot store its key's hash (at offset 4)?
    hashed: bool,
}

const V1: Layout = Layout {
    version: 1,
    slot_size: 4 + KEY_MAX + VALUE_MAX,
    key_at: 4,
    hashed: false,
};
const V2: Layout = Layout {
    version: 2,
    slot_size: 8 + KEY_MAX + VALUE_MAX,
    key_at: 8,
    hashed: true,
};

fn layout(version: u32) -> Option<Layout> {
    match version {
        1 => Some(V1),
        2 => Some(V2),
        _ => None,
    }
}

/// The version-1 header.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct HeaderV1 {
    pub magic: u64,
    pub version: u32,
    pub slot_size: u32,
    pub capacity: u64,
    pub count: u64,
    pub generation: u64,
    /// FNV-1a 64 of the bytes before it.
    pub checksum: u64,
}

/// The version-2 header: version 1's fields, then the operation counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct HeaderV2 {
    pub magic: u64,
    pub version: u32,
    pub slot_size: u32,
    pub capacity: u64,
    pub count: u64,
    pub generation: u64,
    pub puts: u64,
    pub gets: u64,
    pub dels: u64,
    /// FNV-1a 64 of the bytes before it.
    pub checksum: u64,
}

const _: () = assert!(core::mem::size_of::<HeaderV2>() <= HEADER_AREA);

/// FNV-1a, 64 bits.
fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a, 32 bits: the hash of a key.
pub fn hash(key: &[u8]) -> u32 {
    key.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The header as version 2 sees it (a version-1 header has counters 0) and its layout,
/// checked against the area: magic, version, checksum, slot size, capacity.
fn read_header(area: &[u8]) -> Result<(Layout, HeaderV2), Error> {
    if area.len() < HEADER_AREA {
        return Err(Error::TooSmall);
    }
    let magic = u64::from_le_bytes(area[0..8].try_into().unwrap_or_default());
    if magic != MAGIC {
        return Err(Error::BadMagic);
    }
    let version = u32::from_le_bytes(area[8..12].try_into().unwrap_or_default());
    let lay = layout(version).ok_or(Error::BadVersion(version))?;
    let h = if lay.version == 1 {
        let n = core::mem::size_of::<HeaderV1>();
        let h1: HeaderV1 = bytemuck::pod_read_unaligned(&area[..n]);
        if h1.checksum != fnv64(&area[..n - 8]) {
            return Err(Error::Corrupt);
        }
        HeaderV2 {
            magic: h1.magic,
            version: h1.version,
            slot_size: h1.slot_size,
            capacity: h1.capacity,
            count: h1.count,
            generation: h1.generation,
            puts: 0,
            gets: 0,
            dels: 0,
            checksum: 0,
        }
    } else {
        let n = core::mem::size_of::<HeaderV2>();
        let h: HeaderV2 = bytemuck::pod_read_unaligned(&area[..n]);
        if h.checksum != fnv64(&area[..n - 8]) {
            return Err(Error::Corrupt);
        }
        h
    };
    let fits = usize::try_from(h.capacity)
        .ok()
        .and_then(|c| c.checked_mul(lay.slot_size))
        .and_then(|b| b.checked_add(HEADER_AREA))
        .is_some_and(|end| end <= area.len());
    if h.slot_size as usize != lay.slot_size || h.capacity == 0 || !fits {
        return Err(Error::BadCapacity);
    }
    Ok((lay, h))
}

/// Write `h` (its checksum computed here) as layout `lay`'s header.
fn write_header(area: &mut [u8], lay: Layout, h: &HeaderV2) {
    if lay.version == 1 {
        let mut h1 = HeaderV1 {
            magic: h.magic,
            version: h.version,
            slot_size: h.slot_size,
            capacity: h.capacity,
            count: h.count,
            generation: h.generation,
            checksum: 0,
        };
        let n = core::mem::size_of::<HeaderV1>();
        h1.checksum = fnv64(&bytemuck::bytes_of(&h1)[..n - 8]);
        area[..n].copy_from_slice(bytemuck::bytes_of(&h1));
    } else {
        let mut h2 = *h;
        let n = core::mem::size_of::<HeaderV2>();
        h2.checksum = fnv64(&bytemuck::bytes_of(&h2)[..n - 8]);
        area[..n].copy_from_slice(bytemuck::bytes_of(&h2));
    }
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

/// An open table over its area. Every change is written through to the area (the header
/// last), so the area alone is the state.
pub struct Table<'a> {
    area: &'a mut [u8],
    lay: Layout,
    h: HeaderV2,
    cap: usize,
}

/// Format `area` as an empty table of the current layout.
pub fn format(area: &mut [u8]) -> Result<Table<'_>, Error> {
    format_version(area, VERSION)
}

/// Format `area` as an empty table of layout `version` (1 or 2). The capacity is what
/// version-2 slots allow, whatever the version (see the module doc).
pub fn format_version(area: &mut [u8], version: u32) -> Result<Table<'_>, Error> {
    let lay = layout(version).ok_or(Error::BadVersion(version))?;
    let cap = area.len().saturating_sub(HEADER_AREA) / SLOT_SIZE;
    if cap == 0 {
        return Err(Error::TooSmall);
    }
    area[HEADER_AREA..HEADER_AREA + cap * lay.slot_size].fill(0);
    let h = HeaderV2 {
        magic: MAGIC,
        version,
        slot_size: lay.slot_size as u32,
        capacity: cap as u64,
        generation: 1,
        ..HeaderV2::default()
    };
    area[..HEADER_AREA].fill(0);
    write_header(area, lay, &h);
    Ok(Table { area, lay, h, cap })
}

/// Open the current layout's table in `area`, checking all of it (module doc).
pub fn open(area: &mut [u8]) -> Result<Table<'_>, Error> {
    open_version(area, VERSION)
}

/// Open a table of layout `version` exactly: an older one is [`Error::OldVersion`], a newer
/// or unknown one [`Error::BadVersion`].
pub fn open_version(area: &mut [u8], version: u32) -> Result<Table<'_>, Error> {
    let (lay, h) = read_header(area)?;
    if lay.version < version {
        return Err(Error::OldVersion(lay.version));
    }
    if lay.version > version {
        return Err(Error::BadVersion(lay.version));
    }
    let t = Table {
        cap: h.capacity as usize,
        area,
        lay,
        h,
    };
    t.validate()?;
    Ok(t)
}

/// Bring the table in `area` to the current layout in place; returns the version it had.
/// A current table is left alone; a version-1 table is checked whole first (as [`open`]
/// would), and an area without room for the new slots is [`Error::NoRoom`], unchanged.
pub fn upgrade(area: &mut [u8]) -> Result<u32, Error> {
    let (lay, h) = read_header(area)?;
    if lay.version == VERSION {
        return Ok(VERSION);
    }
    let cap = open_version(area, lay.version)?.cap;
    let need = cap
        .checked_mul(V2.slot_size)
        .and_then(|b| b.checked_add(HEADER_AREA));
    if need.is_none_or(|n| n > area.len()) {
        return Err(Error::NoRoom);
    }
    let mut buf = [0u8; V2.slot_size];
    for i in (0..cap).rev() {
        let from = HEADER_AREA + i * V1.slot_size;
        let s = &area[from..from + V1.slot_size];
        buf.fill(0);
        if s[0] == USED {
            let key_len = usize::from(s[1]).min(KEY_MAX);
            buf[..4].copy_from_slice(&s[..4]);
            buf[4..8].copy_from_slice(&hash(&s[V1.key_at..V1.key_at + key_len]).to_le_bytes());
            buf[V2.key_at..].copy_from_slice(&s[V1.key_at..]);
        }
        let to = HEADER_AREA + i * V2.slot_size;
        area[to..to + V2.slot_size].copy_from_slice(&buf);
    }
    let h2 = HeaderV2 {
        version: V2.version,
        slot_size: V2.slot_size as u32,
        generation: h.generation + 1,
        ..h
    };
    write_header(area, V2, &h2);
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

    fn slot_at(&self, i: usize) -> usize {
        HEADER_AREA + i * self.lay.slot_size
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

    fn commit(&mut self) {
        write_header(self.area, self.lay, &self.h);
    }

    /// The value of `key`, if any.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<&[u8]>, Error> {
        check_key(key)?;
        let (i, found) = self.find(key, hash(key))?;
        self.h.gets += u64::from(self.lay.version >= 2);
        self.commit();
        if !found {
            return Ok(None);
        }
        let s = self.slot(i);
        let value_len = usize::from(u16::from_le_bytes([s[2], s[3]])).min(VALUE_MAX);
        let v = self.lay.key_at + KEY_MAX;
        Ok(Some(&s[v..v + value_len]))
    }

    /// Set `key` to `value`; true if the key is new.
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
        let s = &mut self.area[at..at + lay.slot_size];
        let v = lay.key_at + KEY_MAX;
        s[v..v + value.len()].copy_from_slice(value);
        s[2..4].copy_from_slice(&(value.len() as u16).to_le_bytes());
        if !found {
            s[lay.key_at..v].fill(0);
            s[lay.key_at..lay.key_at + key.len()].copy_from_slice(key);
            if lay.hashed {
                s[4..8].copy_from_slice(&h.to_le_bytes());
            }
            s[1] = key.len() as u8;
            s[0] = USED;
            self.h.count += 1;
        }
        self.h.generation += 1;
        self.h.puts += u64::from(lay.version >= 2);
        self.commit();
        Ok(!found)
    }

    /// Remove `key`; true if it was there. The entries after it in its probe run move back
    /// into the hole when their home allows it (deletion without tombstones).
    pub fn del(&mut self, key: &[u8]) -> Result<bool, Error> {
        check_key(key)?;
        let (i, found) = self.find(key, hash(key))?;
        self.h.dels += u64::from(self.lay.version >= 2);
        if !found {
            self.commit();
            return Ok(false);
        }
        let (cap, size) = (self.cap, self.lay.slot_size);
        let mut hole = i;
        let mut j = i;
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
                self.area.copy_within(from..from + size, to);
                hole = j;
            }
        }
        let at = self.slot_at(hole);
        self.area[at] = 0;
        self.h.count -= 1;
        self.h.generation += 1;
        self.commit();
        Ok(true)
    }
}
