//! The `kv` request encoding, shared by `user/kv` (the server) and `user/kvcli`, kept here
//! so that decoding what a client sends is tested on the host: a malformed request is a
//! [`Status`], never a panic.
//!
//! A request is an `abi::ipc::Msg`: `label` = the operation, `words[0..4]` = the key
//! (inline, up to 32 bytes, little-endian), `words[4]` = key length | value length << 16
//! (each 16 bits, the upper 32 bits 0), `words[5]` = the operation's argument: for
//! [`HELLO`] the id of the client's data area (a vregion), for [`PUT`] and [`GET`] the offset
//! of the value in it. Values (up to 1 KiB) travel through that area, which the client
//! opens, attaches, and names to the server once with `HELLO`; the server attaches it too
//! and detaches it at [`BYE`].
//!
//! The reply: `label` = a [`Status`], `words` by operation: `GET` and `WAIT` the value's length,
//! `PUT` 1 if the key was new, `DEL` 1 if it was there, `STATS` a [`StatsReply`].

use crate::{KEY_MAX, VALUE_MAX};

/// The NAME of a client's data area, `pCORE.SERIAL-kvc` after the client's pid (core,
/// serial): a name only that process may open (`abi::res::reserved_for`), so the server
/// knows from the name whose area it is. The client opens it under `here/vregion/`; the
/// server checks it and finds it again under `cCORE/vregion/`.
pub struct AreaName {
    pub core: usize,
    pub serial: u32,
}

impl core::fmt::Display for AreaName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "p{}.{}-kvc", self.core, self.serial)
    }
}

/// Name the client's data area (`arg` = its vregion id).
pub const HELLO: u64 = 1;
/// Store the `value_len` bytes at offset `arg` of the data area under the key.
pub const PUT: u64 = 2;
/// Copy the key's value to offset `arg` of the data area.
pub const GET: u64 = 3;
pub const DEL: u64 = 4;
pub const STATS: u64 = 5;
/// The client is done: the server detaches its data area.
pub const BYE: u64 = 6;
/// Wait until the key has a value, then answer as `GET` (the server holds the request
/// meanwhile: the one request a server holds across others, answered `Again` when the
/// server is replaced; `abi::fnid::RETIRE_NOTICE`).
pub const WAIT: u64 = 7;

/// A reply's label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Status {
    Ok = 0,
    NotFound = 1,
    /// An unknown operation or malformed length word.
    BadOp = 2,
    /// A key of 0 (where one is needed) or more than 32 bytes.
    BadKey = 3,
    ValueTooLong = 4,
    /// The client has not said `HELLO` (or the server forgot it).
    NoArea = 5,
    /// A data area the server cannot use (not the client's, wrong size, an offset or
    /// length beyond it, cannot attach).
    BadArea = 6,
    /// No room for a new key.
    Full = 7,
    /// The table itself failed (corrupt).
    Store = 8,
    /// Too many clients.
    Busy = 9,
}

impl Status {
    pub fn from_code(code: u64) -> Option<Status> {
        use Status::*;
        [
            Ok,
            NotFound,
            BadOp,
            BadKey,
            ValueTooLong,
            NoArea,
            BadArea,
            Full,
            Store,
            Busy,
        ]
        .into_iter()
        .find(|s| *s as u64 == code)
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            Status::Ok => "ok",
            Status::NotFound => "not found",
            Status::BadOp => "bad operation",
            Status::BadKey => "bad key (1 to 32 bytes)",
            Status::ValueTooLong => "value longer than 1024 bytes",
            Status::NoArea => "no data area (no hello)",
            Status::BadArea => "bad data area",
            Status::Full => "table full",
            Status::Store => "table corrupt",
            Status::Busy => "too many clients",
        };
        f.write_str(s)
    }
}

/// A decoded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub op: u64,
    key: [u8; KEY_MAX],
    key_len: usize,
    pub value_len: usize,
    pub arg: u64,
}

fn needs_key(op: u64) -> bool {
    matches!(op, PUT | GET | DEL | WAIT)
}

impl Request {
    /// A request of `op` for `key` (checked as the server will).
    pub fn new(op: u64, key: &[u8], value_len: usize, arg: u64) -> Result<Request, Status> {
        if !(HELLO..=WAIT).contains(&op) {
            return Err(Status::BadOp);
        }
        if key.len() > KEY_MAX || (needs_key(op) && key.is_empty()) {
            return Err(Status::BadKey);
        }
        if value_len > VALUE_MAX {
            return Err(Status::ValueTooLong);
        }
        let mut k = [0; KEY_MAX];
        k[..key.len()].copy_from_slice(key);
        Ok(Request {
            op,
            key: k,
            key_len: key.len(),
            value_len,
            arg,
        })
    }

    pub fn key(&self) -> &[u8] {
        &self.key[..self.key_len]
    }

    /// The message's label and words.
    pub fn encode(&self) -> (u64, [u64; 6]) {
        let mut w = [0u64; 6];
        for (i, chunk) in self.key.chunks(8).enumerate() {
            let mut b = [0; 8];
            b.copy_from_slice(chunk);
            w[i] = u64::from_le_bytes(b);
        }
        w[4] = self.key_len as u64 | (self.value_len as u64) << 16;
        w[5] = self.arg;
        (self.op, w)
    }

    /// A message's request, or why it is malformed.
    pub fn decode(label: u64, words: &[u64; 6]) -> Result<Request, Status> {
        if words[4] >> 32 != 0 {
            return Err(Status::BadOp);
        }
        let key_len = (words[4] & 0xffff) as usize;
        let value_len = ((words[4] >> 16) & 0xffff) as usize;
        if key_len > KEY_MAX {
            return Err(Status::BadKey);
        }
        let mut key = [0u8; KEY_MAX];
        for (i, w) in words[..4].iter().enumerate() {
            key[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        Request::new(label, &key[..key_len], value_len, words[5])
    }
}

/// The words of a `STATS` reply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsReply {
    pub count: u64,
    pub capacity: u32,
    pub version: u32,
    pub generation: u64,
    pub puts: u64,
    pub gets: u64,
    pub dels: u64,
}

impl StatsReply {
    pub fn encode(&self) -> [u64; 6] {
        [
            self.count,
            u64::from(self.capacity) | u64::from(self.version) << 32,
            self.generation,
            self.puts,
            self.gets,
            self.dels,
        ]
    }

    pub fn decode(w: &[u64; 6]) -> StatsReply {
        StatsReply {
            count: w[0],
            capacity: w[1] as u32,
            version: (w[1] >> 32) as u32,
            generation: w[2],
            puts: w[3],
            gets: w[4],
            dels: w[5],
        }
    }
}

impl From<crate::Stats> for StatsReply {
    fn from(s: crate::Stats) -> StatsReply {
        StatsReply {
            count: s.count,
            capacity: s.capacity.min(u64::from(u32::MAX)) as u32,
            version: s.version,
            generation: s.generation,
            puts: s.puts,
            gets: s.gets,
            dels: s.dels,
        }
    }
}

/// The reply status for a table error.
impl From<crate::Error> for Status {
    fn from(e: crate::Error) -> Status {
        match e {
            crate::Error::EmptyKey | crate::Error::KeyTooLong => Status::BadKey,
            crate::Error::ValueTooLong => Status::ValueTooLong,
            crate::Error::Full => Status::Full,
            _ => Status::Store,
        }
    }
}
