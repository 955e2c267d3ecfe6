//! Where things are in the area, by layout version, and the header: its two copies in
//! version 2 (written in turn, so that a write cut short by a kill leaves the other one
//! whole), reading and checking them, writing one.

use crate::{Error, KEY_MAX, VALUE_MAX};
use bytemuck::{Pod, Zeroable};

/// `b"musubikv"` as a little-endian number: the first eight bytes of a formatted area.
pub const MAGIC: u64 = u64::from_le_bytes(*b"musubikv");
/// Bytes of one header copy.
pub const HEADER_AREA: usize = 128;
/// Version 2's undo copy of one slot (an overwrite in progress), after the two headers.
pub const JOURNAL_AT: usize = 2 * HEADER_AREA;

/// One layout version: where things are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub version: u32,
    pub slot_size: usize,
    /// Offset of the key in a slot (the value follows it).
    pub key_at: usize,
    /// Does a slot store its key's hash (at offset 4)?
    pub hashed: bool,
    /// Offset of slot 0.
    pub slots_at: usize,
    /// Two header copies, the journal, and recovery on open.
    pub crash_safe: bool,
}

pub const V1: Layout = Layout {
    version: 1,
    slot_size: 4 + KEY_MAX + VALUE_MAX,
    key_at: 4,
    hashed: false,
    slots_at: HEADER_AREA,
    crash_safe: false,
};
pub const V2: Layout = Layout {
    version: 2,
    slot_size: 8 + KEY_MAX + VALUE_MAX,
    key_at: 8,
    hashed: true,
    slots_at: JOURNAL_AT + 8 + KEY_MAX + VALUE_MAX,
    crash_safe: true,
};

pub fn layout(version: u32) -> Option<Layout> {
    match version {
        1 => Some(V1),
        2 => Some(V2),
        _ => None,
    }
}

/// The version-1 header (one copy, at 0).
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

/// The version-2 header: version 1's fields, the operation counters, and what makes it
/// crash-safe: `seq` (one more per write; copy `seq % 2` holds it) and `op` (the change in
/// progress, [`op`]). Two copies, at 0 and at [`HEADER_AREA`]; the valid one with the
/// higher `seq` is the header.
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
    pub seq: u64,
    pub op: u64,
    /// FNV-1a 64 of the bytes before it.
    pub checksum: u64,
}

const _: () = assert!(core::mem::size_of::<HeaderV2>() <= HEADER_AREA);

/// `HeaderV2::op`: the kind in the top byte, the slot below.
pub mod op {
    pub const NONE: u64 = 0;
    /// A new key is being written into a free slot: undone by freeing it.
    pub const PUT_NEW: u64 = 1;
    /// A value is being overwritten; the journal holds the slot as it was: undone by
    /// copying it back.
    pub const PUT_OVER: u64 = 2;
    /// A deletion is shifting entries back; the slot is the hole: finished on recovery.
    pub const DEL: u64 = 3;

    pub fn make(kind: u64, slot: usize) -> u64 {
        kind << 56 | slot as u64
    }
    pub fn kind(op: u64) -> u64 {
        op >> 56
    }
    pub fn slot(op: u64) -> u64 {
        op & ((1 << 56) - 1)
    }
}

/// FNV-1a, 64 bits.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn v2_copy(bytes: &[u8]) -> Option<HeaderV2> {
    let n = core::mem::size_of::<HeaderV2>();
    let bytes = bytes.get(..n)?;
    let h: HeaderV2 = bytemuck::pod_read_unaligned(bytes);
    (h.magic == MAGIC && h.version == 2 && h.checksum == fnv64(&bytes[..n - 8])).then_some(h)
}

/// The header as version 2 sees it (a version-1 header has counters 0) and its layout,
/// checked against the area: magic, version, checksum, slot size, capacity.
pub fn read_header(area: &[u8]) -> Result<(Layout, HeaderV2), Error> {
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
            ..HeaderV2::default()
        }
    } else {
        let a = v2_copy(area);
        let b = area.get(HEADER_AREA..).and_then(v2_copy);
        match (a, b) {
            (Some(a), Some(b)) => {
                if b.seq > a.seq {
                    b
                } else {
                    a
                }
            }
            (Some(h), None) | (None, Some(h)) => h,
            (None, None) => return Err(Error::Corrupt),
        }
    };
    let fits = usize::try_from(h.capacity)
        .ok()
        .and_then(|c| c.checked_mul(lay.slot_size))
        .and_then(|b| b.checked_add(lay.slots_at))
        .is_some_and(|end| end <= area.len());
    if h.slot_size as usize != lay.slot_size || h.capacity == 0 || !fits {
        return Err(Error::BadCapacity);
    }
    Ok((lay, h))
}

/// `h` as layout `lay` writes it (its checksum computed here), and where: version 1's one
/// copy at 0, version 2's copy `h.seq % 2`.
pub fn header_bytes(lay: Layout, h: &HeaderV2) -> (usize, [u8; HEADER_AREA]) {
    let mut out = [0u8; HEADER_AREA];
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
        out[..n].copy_from_slice(bytemuck::bytes_of(&h1));
        (0, out)
    } else {
        let mut h2 = *h;
        let n = core::mem::size_of::<HeaderV2>();
        h2.checksum = fnv64(&bytemuck::bytes_of(&h2)[..n - 8]);
        out[..n].copy_from_slice(bytemuck::bytes_of(&h2));
        ((h.seq % 2) as usize * HEADER_AREA, out)
    }
}
