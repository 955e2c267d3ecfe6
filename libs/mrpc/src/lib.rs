//! The inter-machine request protocol of Musubi (issue 17; P0's inter-processor IPC, P4's
//! "inter-machine RPCC is the same flow over a network").
//!
//! Machines exchange *messages* carried in UDP datagrams. This crate is the whole protocol
//! and none of the I/O: it turns requests into bytes and bytes into decisions, and takes the
//! time as an argument, so every rule is tested on the host against a link that loses,
//! duplicates and reorders (`tests/link.rs`). `user/machd` runs it over `net.udp`.
//!
//! # Messages
//!
//! A message is a 40-byte [`Header`] and at most [`PAYLOAD_MAX`] bytes of payload, all
//! little-endian: the sending machine and its *epoch*, the receiving machine and its epoch
//! as the sender knows it, a sequence number, the requesting *user*, an operation (`op`)
//! and, in a reply, a status (0 or an `abi::Error` code). See [`Header`] for the layout.
//!
//! # The guarantees
//!
//! - **At most once** ([`server::Server`]): a request is identified by (client machine,
//!   client epoch, sequence). The server performs it once and keeps its reply in a reply
//!   cache; a duplicate (a retransmission, or a datagram the network doubled) gets the
//!   cached reply again, or nothing while the first copy is still being performed. The
//!   client says with every request the lowest sequence it still waits for (`floor`), so the
//!   server forgets what lies below and drops late duplicates of it.
//! - **Exactly once, or a clear error** ([`client::Client`]): a request is sent again with
//!   a backoff that doubles up to a bound until its reply comes or its deadline passes;
//!   then it ends with `TimedOut`. A client has at most [`WINDOW`] requests in flight to one
//!   machine (`Busy` beyond), which is what keeps the server's reply cache bounded.
//! - **Epochs**: every machine picks a new non-zero epoch when it starts. A request that
//!   names an earlier epoch of its server (the server rebooted since the client heard of
//!   it) is refused with `StaleResource`; a request from an epoch of a client that the
//!   server has seen replaced is dropped; a client that learns of a server's new epoch ends
//!   every request to the old one with `Gone` ([`client::Client::peer_epoch`]). Ids handed
//!   out by a machine (remote pids) carry its epoch, so an old one is refused the same way.
//! - **Membership** ([`members::Members`]): heartbeats say who is up; a machine not heard
//!   from within a bound is down.
//!
//! What a request *does* is not this crate's business: its `op` and payload are the user's.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod client;
pub mod members;
pub mod server;

pub use abi::Error;

/// The first two bytes of every message ("MR").
pub const MAGIC: u16 = 0x524d;
/// The protocol's version.
pub const VERSION: u8 = 1;
/// Bytes of a header.
pub const HEADER_LEN: usize = 40;
/// Largest payload: a message fits one unfragmented UDP datagram (1,472 bytes).
pub const PAYLOAD_MAX: usize = 1024;
/// Most requests one client has in flight to one server.
pub const WINDOW: u64 = 32;
/// Most machines (machine ids are below this).
pub const MAX_MACHINES: usize = 8;

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Request = 1,
    Reply = 2,
    /// "I am up, in this epoch": no answer expected.
    Heartbeat = 3,
}

/// A message's header.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 2 | [`MAGIC`] |
/// | 2 | 1 | [`VERSION`] |
/// | 3 | 1 | [`Kind`] |
/// | 4 | 1 | `from`: the sending machine |
/// | 5 | 1 | `to`: the receiving machine |
/// | 6 | 2 | `op` (requests; echoed in replies) |
/// | 8 | 4 | `epoch`: the sender's |
/// | 12 | 4 | `peer_epoch`: the receiver's, as the sender knows it (0: not known yet) |
/// | 16 | 8 | `seq`: the request's sequence number (per client and server); heartbeats count |
/// | 24 | 8 | `floor`: the lowest sequence the client still waits for (requests) |
/// | 32 | 4 | `user`: the requesting user |
/// | 36 | 2 | `status`: 0 or an `abi::Error` code (replies) |
/// | 38 | 2 | `len`: payload bytes |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub from: u8,
    pub to: u8,
    pub op: u16,
    pub epoch: u32,
    pub peer_epoch: u32,
    pub seq: u64,
    pub floor: u64,
    pub user: u32,
    pub status: u16,
    pub len: u16,
}

impl Header {
    pub fn kind(&self) -> Option<Kind> {
        match self.kind {
            1 => Some(Kind::Request),
            2 => Some(Kind::Reply),
            3 => Some(Kind::Heartbeat),
            _ => None,
        }
    }

    /// The status as a result (a reply's).
    pub fn result(&self) -> Result<(), Error> {
        match self.status {
            0 => Ok(()),
            c => Err(Error::from_code(u64::from(c))),
        }
    }
}

/// Why bytes are not a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    Short,
    Magic,
    Version,
    Kind,
    Machine,
    /// `len` says more than the datagram holds, or more than [`PAYLOAD_MAX`].
    Length,
}

/// `header` and `payload` as one message (the payload is cut at [`PAYLOAD_MAX`]; callers
/// check first, see [`client::Client::start`]).
pub fn encode(header: &Header, payload: &[u8]) -> alloc::vec::Vec<u8> {
    let payload = &payload[..payload.len().min(PAYLOAD_MAX)];
    let mut b = alloc::vec::Vec::with_capacity(HEADER_LEN + payload.len());
    b.extend_from_slice(&MAGIC.to_le_bytes());
    b.push(VERSION);
    b.push(header.kind);
    b.push(header.from);
    b.push(header.to);
    b.extend_from_slice(&header.op.to_le_bytes());
    b.extend_from_slice(&header.epoch.to_le_bytes());
    b.extend_from_slice(&header.peer_epoch.to_le_bytes());
    b.extend_from_slice(&header.seq.to_le_bytes());
    b.extend_from_slice(&header.floor.to_le_bytes());
    b.extend_from_slice(&header.user.to_le_bytes());
    b.extend_from_slice(&header.status.to_le_bytes());
    b.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

fn le<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

/// The message in `bytes`: its header and payload, or why it is not one. Any bytes are
/// safe to give (a datagram from anyone).
pub fn decode(bytes: &[u8]) -> Result<(Header, &[u8]), Malformed> {
    if bytes.len() < HEADER_LEN {
        return Err(Malformed::Short);
    }
    if u16::from_le_bytes(le(bytes, 0)) != MAGIC {
        return Err(Malformed::Magic);
    }
    if bytes[2] != VERSION {
        return Err(Malformed::Version);
    }
    let h = Header {
        kind: bytes[3],
        from: bytes[4],
        to: bytes[5],
        op: u16::from_le_bytes(le(bytes, 6)),
        epoch: u32::from_le_bytes(le(bytes, 8)),
        peer_epoch: u32::from_le_bytes(le(bytes, 12)),
        seq: u64::from_le_bytes(le(bytes, 16)),
        floor: u64::from_le_bytes(le(bytes, 24)),
        user: u32::from_le_bytes(le(bytes, 32)),
        status: u16::from_le_bytes(le(bytes, 36)),
        len: u16::from_le_bytes(le(bytes, 38)),
    };
    if h.kind().is_none() {
        return Err(Malformed::Kind);
    }
    if usize::from(h.from) >= MAX_MACHINES || usize::from(h.to) >= MAX_MACHINES {
        return Err(Malformed::Machine);
    }
    let len = usize::from(h.len);
    if len > PAYLOAD_MAX || HEADER_LEN + len > bytes.len() {
        return Err(Malformed::Length);
    }
    Ok((h, &bytes[HEADER_LEN..HEADER_LEN + len]))
}

/// A heartbeat from machine `from` in `epoch` to machine `to` (number `count`).
pub fn heartbeat(from: u8, epoch: u32, to: u8, peer_epoch: u32, count: u64) -> alloc::vec::Vec<u8> {
    encode(
        &Header {
            kind: Kind::Heartbeat as u8,
            from,
            to,
            epoch,
            peer_epoch,
            seq: count,
            ..Header::default()
        },
        &[],
    )
}

/// A new epoch from some entropy (e.g. the clock at start): never 0.
pub fn epoch_from(entropy: u64) -> u32 {
    // splitmix64's finaliser spreads close values (two boots a few ns apart) far apart.
    let mut z = entropy.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_field_placed() {
        let h = Header {
            kind: Kind::Reply as u8,
            from: 3,
            to: 1,
            op: 0x0102,
            epoch: 0xdead_beef,
            peer_epoch: 7,
            seq: 0x1122_3344_5566_7788,
            floor: 9,
            user: 42,
            status: Error::TimedOut as u16,
            len: 3,
        };
        let b = encode(&h, b"abc");
        assert_eq!(b.len(), HEADER_LEN + 3);
        let (g, p) = decode(&b).unwrap();
        assert_eq!(g, h);
        assert_eq!(p, b"abc");
        assert_eq!(g.result(), Err(Error::TimedOut));
    }

    #[test]
    fn garbage_is_refused_never_a_panic() {
        let good = encode(
            &Header {
                kind: 1,
                ..Header::default()
            },
            b"xyz",
        );
        assert_eq!(decode(&good[..10]), Err(Malformed::Short));
        let mut b = good.clone();
        b[0] ^= 1;
        assert_eq!(decode(&b), Err(Malformed::Magic));
        let mut b = good.clone();
        b[2] = 9;
        assert_eq!(decode(&b), Err(Malformed::Version));
        let mut b = good.clone();
        b[3] = 0;
        assert_eq!(decode(&b), Err(Malformed::Kind));
        let mut b = good.clone();
        b[4] = MAX_MACHINES as u8;
        assert_eq!(decode(&b), Err(Malformed::Machine));
        // A length beyond the datagram.
        assert_eq!(decode(&good[..good.len() - 1]), Err(Malformed::Length));
        // Every prefix and every single-byte corruption: decoded or refused, no panic.
        let mut rng = xorshift::Rng(5);
        for _ in 0..10_000 {
            let mut b = good.clone();
            let i = rng.below(b.len() as u64) as usize;
            b[i] = rng.next_u64() as u8;
            let cut = rng.below(b.len() as u64 + 1) as usize;
            let _ = decode(&b[..cut]);
        }
    }

    #[test]
    fn epochs_differ_and_are_never_zero() {
        let e: Vec<u32> = (0..1000u64).map(epoch_from).collect();
        assert!(e.iter().all(|&x| x != 0));
        let mut d = e.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), e.len());
    }
}
