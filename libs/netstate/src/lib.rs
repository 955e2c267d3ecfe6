//! The `netd` server's state, laid out in a byte area: the *state ICA* of issue 15 (P3's
//! server state kept outside the server), so that a new `netd` (a live replacement, `netd
//! takeover`) finds the address, the bound ports and the datagrams not yet received where
//! the old one left them.
//!
//! It exists apart from `user/netd` so that the layout and its validation are tested on the
//! host (`tests/`), like `libs/kvstate`.
//!
//! # Layout (version 1, [`VERSION`])
//!
//! ```text
//! 0          256 (HEADER_AREA)                              queues_at()                     len
//! | header | socket 0 | ... | socket S-1 | queue of socket 0: D slots | ... | socket S-1's |
//! ```
//!
//! - The header ([`Header`], plain data, little-endian, read and written by copying, so the
//!   area needs no alignment): magic, layout version, the geometry (S sockets, D slots per
//!   queue, the slot size), the address config (IPv4 address, prefix, gateway, where it came
//!   from), the counters (frames, datagrams, drops, errors) and the number of servers that
//!   opened it.
//! - A socket record ([`Socket`], 64 bytes): whether it is used, its UDP port, its owner
//!   (a pid, as the kernel vouches for it), the queue's head and length, and its own counts.
//! - A queue slot ([`SLOT_SIZE`] bytes): source address (4 bytes, network order), source
//!   port (2, little-endian), length (2), data (up to [`DATA_MAX`] = 1,472 bytes: a
//!   1,500-byte MTU less the IPv4 and UDP headers).
//!
//! Every queue is bounded (D datagrams): a datagram for a full queue is dropped and counted
//! (in the socket and in the header's `drops`), never waited for.
//!
//! # Validation
//!
//! [`open`] trusts nothing in the area: a wrong magic, another version, a geometry that does
//! not fit the area, a socket record with a bad port, a queue index or length out of range,
//! two sockets on one port, a slot whose length is too large: each is an [`Error`], never a
//! panic or an access out of bounds. After `open`, the state changes only through [`Net`],
//! which keeps it valid.
#![forbid(unsafe_code)]
#![no_std]

pub mod txwatch;

use bytemuck::{Pod, Zeroable};

/// `b"MUSUBINT"` little-endian: the first 8 bytes of a formatted area.
pub const MAGIC: u64 = u64::from_le_bytes(*b"MUSUBINT");
/// The layout this code formats and opens.
pub const VERSION: u32 = 1;
/// Bytes reserved for the header.
pub const HEADER_AREA: usize = 256;
/// Size of a socket record.
pub const SOCKET_SIZE: usize = 64;
/// Largest UDP payload carried (1,500-byte MTU - 20-byte IPv4 header - 8-byte UDP header).
pub const DATA_MAX: usize = 1472;
/// Size of one queue slot: source address, port, length, data.
pub const SLOT_SIZE: usize = 8 + DATA_MAX;
/// Default number of sockets.
pub const SOCKETS: u32 = 16;
/// Default depth of each socket's queue.
pub const DEPTH: u32 = 32;
/// The first port handed out for `bind(0)` (the IANA dynamic range).
pub const EPHEMERAL_FIRST: u16 = 49152;

/// Where the address config came from.
pub const CONFIG_NONE: u32 = 0;
pub const CONFIG_STATIC: u32 = 1;
pub const CONFIG_DHCP: u32 = 2;

/// Why an area cannot be opened, or a change cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The area is smaller than the geometry asks for (or than a header).
    TooSmall,
    /// The first 8 bytes are not [`MAGIC`].
    BadMagic,
    /// A layout version this code does not serve.
    BadVersion(u32),
    /// Sockets, depth or slot size out of range.
    BadGeometry,
    /// Socket record `n` is inconsistent.
    BadSocket(usize),
    /// Slot `slot` of socket `n`'s queue holds a length above [`DATA_MAX`].
    BadSlot(usize, usize),
    /// Two sockets on one port.
    DuplicatePort(u16),
    /// The port is bound already.
    PortInUse,
    /// No socket is bound to the port.
    NoPort,
    /// The socket belongs to another process.
    NotOwner,
    /// Every socket record is used.
    NoSocket,
    /// The socket's queue is full: the datagram was dropped (and counted).
    QueueFull,
    /// More than [`DATA_MAX`] bytes.
    TooLong,
    /// The address config holds an address no interface may have, or a gateway no
    /// neighbour may be (broadcast, multicast): smoltcp would refuse either with a panic.
    BadAddress,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::TooSmall => write!(f, "area too small for its layout"),
            Error::BadMagic => write!(f, "not a netd state (bad magic)"),
            Error::BadVersion(v) => write!(f, "layout version {v}, this netd serves {VERSION}"),
            Error::BadGeometry => write!(f, "bad geometry (sockets, depth or slot size)"),
            Error::BadSocket(n) => write!(f, "socket record {n} is corrupt"),
            Error::BadSlot(n, s) => write!(f, "slot {s} of socket {n}'s queue is corrupt"),
            Error::DuplicatePort(p) => write!(f, "two sockets on port {p}"),
            Error::PortInUse => write!(f, "port in use"),
            Error::NoPort => write!(f, "no socket on that port"),
            Error::NotOwner => write!(f, "the socket is another process's"),
            Error::NoSocket => write!(f, "no free socket"),
            Error::QueueFull => write!(f, "queue full: dropped"),
            Error::TooLong => write!(f, "datagram longer than {DATA_MAX} bytes"),
            Error::BadAddress => {
                write!(
                    f,
                    "the address or gateway is not one host's (broadcast or multicast)"
                )
            }
        }
    }
}

/// The counters `netd` keeps (shell `net` shows them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Counters {
    /// Frames received from the driver and frames handed to it.
    pub frames_in: u64,
    pub frames_out: u64,
    /// UDP datagrams queued for a socket, and sent for a program.
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    /// Datagrams or frames dropped because a bounded queue was full.
    pub drops: u64,
    /// Bad input: malformed requests, frames the driver could not send, bad frames.
    pub errors: u64,
}

/// The header, at offset 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    pub magic: u64,
    pub version: u32,
    pub sockets: u32,
    pub depth: u32,
    pub slot_size: u32,
    /// IPv4 address and gateway, network order in the low 4 bytes (`a.b.c.d` is
    /// `u32::from_be_bytes([a, b, c, d])`); 0 when not configured.
    pub addr: u32,
    pub gateway: u32,
    pub prefix: u32,
    /// `CONFIG_*`.
    pub config: u32,
    /// The next port `bind(0)` tries.
    pub ephemeral: u32,
    /// Servers that opened (or formatted) this area.
    pub servers: u32,
    pub counters: Counters,
}

/// One socket's record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Socket {
    /// 1 if bound.
    pub used: u32,
    pub port: u32,
    /// The owning process (a `Pid`'s raw value).
    pub owner: u64,
    /// Index of the oldest queued datagram, and how many are queued.
    pub head: u32,
    pub len: u32,
    pub received: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub reserved: [u64; 2],
}

const _: () = assert!(core::mem::size_of::<Header>() <= HEADER_AREA);
const _: () = assert!(core::mem::size_of::<Socket>() == SOCKET_SIZE);

/// Bytes an area of `sockets` sockets with queues of `depth` needs.
pub fn area_size(sockets: u32, depth: u32) -> usize {
    HEADER_AREA + sockets as usize * SOCKET_SIZE + sockets as usize * depth as usize * SLOT_SIZE
}

/// Where the queues begin.
fn queues_at(sockets: u32) -> usize {
    HEADER_AREA + sockets as usize * SOCKET_SIZE
}

fn read<T: Pod>(area: &[u8], at: usize) -> T {
    bytemuck::pod_read_unaligned(&area[at..at + core::mem::size_of::<T>()])
}

fn write<T: Pod>(area: &mut [u8], at: usize, v: &T) {
    area[at..at + core::mem::size_of::<T>()].copy_from_slice(bytemuck::bytes_of(v));
}

/// A datagram taken from a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Source address (network order, as [`Header::addr`]) and port.
    pub addr: u32,
    pub port: u16,
    /// Bytes copied into the caller's buffer (the datagram's length, cut to the buffer).
    pub len: usize,
    /// The datagram's whole length.
    pub full_len: usize,
}

/// The state in an area, opened (valid) for changes.
pub struct Net<'a> {
    area: &'a mut [u8],
    h: Header,
}

/// Lay a new, empty state of `sockets` sockets with queues of `depth` into `area` (which
/// is zeroed first).
pub fn format(area: &mut [u8], sockets: u32, depth: u32) -> Result<Net<'_>, Error> {
    if !(1..=1024).contains(&sockets) || !(1..=4096).contains(&depth) {
        return Err(Error::BadGeometry);
    }
    if area.len() < area_size(sockets, depth) {
        return Err(Error::TooSmall);
    }
    area.fill(0);
    let h = Header {
        magic: MAGIC,
        version: VERSION,
        sockets,
        depth,
        slot_size: SLOT_SIZE as u32,
        ephemeral: u32::from(EPHEMERAL_FIRST),
        servers: 1,
        ..Header::default()
    };
    write(area, 0, &h);
    Ok(Net { area, h })
}

/// Whether `addr` (network order, as [`Header::addr`]) may be one host's address: not 0,
/// not the broadcast address, not multicast (224.0.0.0/4), as smoltcp's `is_unicast`.
pub fn is_unicast(addr: u32) -> bool {
    addr != 0 && addr != u32::MAX && addr >> 28 != 0xe
}

/// Open the state in `area`, checking all of it; counts one more server.
pub fn open(area: &mut [u8]) -> Result<Net<'_>, Error> {
    if area.len() < HEADER_AREA {
        return Err(Error::TooSmall);
    }
    let h: Header = read(area, 0);
    if h.magic != MAGIC {
        return Err(Error::BadMagic);
    }
    if h.version != VERSION {
        return Err(Error::BadVersion(h.version));
    }
    if !(1..=1024).contains(&h.sockets)
        || !(1..=4096).contains(&h.depth)
        || h.slot_size as usize != SLOT_SIZE
        || h.prefix > 32
        || h.config > CONFIG_DHCP
        || !(u32::from(EPHEMERAL_FIRST)..=0xffff).contains(&h.ephemeral)
    {
        return Err(Error::BadGeometry);
    }
    // A gateway is none (0) or a unicast address: smoltcp asserts a unicast neighbour, and
    // a broadcast or multicast gateway kept here ended every `netd` that loaded it (found
    // by an audit).
    if (h.addr != 0 && !is_unicast(h.addr)) || (h.gateway != 0 && !is_unicast(h.gateway)) {
        return Err(Error::BadAddress);
    }
    if area.len() < area_size(h.sockets, h.depth) {
        return Err(Error::TooSmall);
    }
    let mut net = Net { area, h };
    for n in 0..h.sockets as usize {
        let s = net.socket(n);
        if s.used > 1 || (s.used == 0 && s != Socket::default()) {
            return Err(Error::BadSocket(n));
        }
        if s.used == 0 {
            continue;
        }
        if s.port == 0 || s.port > 0xffff || s.head >= h.depth || s.len > h.depth {
            return Err(Error::BadSocket(n));
        }
        if (0..n).any(|m| {
            let o = net.socket(m);
            o.used == 1 && o.port == s.port
        }) {
            return Err(Error::DuplicatePort(s.port as u16));
        }
        for i in 0..s.len {
            let slot = ((s.head + i) % h.depth) as usize;
            let at = net.slot_at(n, slot);
            let len = u16::from_le_bytes([net.area[at + 6], net.area[at + 7]]);
            if len as usize > DATA_MAX {
                return Err(Error::BadSlot(n, slot));
            }
        }
    }
    net.h.servers = net.h.servers.wrapping_add(1);
    net.put_header();
    Ok(net)
}

impl Net<'_> {
    fn socket_at(n: usize) -> usize {
        HEADER_AREA + n * SOCKET_SIZE
    }

    fn socket(&self, n: usize) -> Socket {
        read(self.area, Self::socket_at(n))
    }

    fn put_socket(&mut self, n: usize, s: &Socket) {
        write(self.area, Self::socket_at(n), s);
    }

    fn put_header(&mut self) {
        write(self.area, 0, &self.h);
    }

    fn slot_at(&self, n: usize, slot: usize) -> usize {
        queues_at(self.h.sockets) + (n * self.h.depth as usize + slot) * SLOT_SIZE
    }

    /// The header (geometry, config, counters).
    pub fn header(&self) -> Header {
        self.h
    }

    pub fn counters(&self) -> Counters {
        self.h.counters
    }

    /// Change the counters with `f` (netd counts frames and errors itself).
    pub fn count(&mut self, f: impl FnOnce(&mut Counters)) {
        f(&mut self.h.counters);
        self.put_header();
    }

    /// Record the address config (`CONFIG_*` says where it came from).
    pub fn set_config(&mut self, addr: u32, prefix: u32, gateway: u32, source: u32) {
        self.h.addr = addr;
        self.h.prefix = prefix.min(32);
        self.h.gateway = gateway;
        self.h.config = source.min(CONFIG_DHCP);
        self.put_header();
    }

    /// How many sockets `owner` has bound.
    pub fn owned_by(&self, owner: u64) -> usize {
        (0..self.h.sockets as usize)
            .filter(|&n| {
                let s = self.socket(n);
                s.used == 1 && s.owner == owner
            })
            .count()
    }

    /// The socket index bound to `port`.
    pub fn find(&self, port: u16) -> Option<usize> {
        (0..self.h.sockets as usize).find(|&n| {
            let s = self.socket(n);
            s.used == 1 && s.port == u32::from(port)
        })
    }

    /// The bound sockets: (port, owner), in record order.
    pub fn bound(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        (0..self.h.sockets as usize).filter_map(|n| {
            let s = self.socket(n);
            (s.used == 1).then_some((s.port as u16, s.owner))
        })
    }

    /// The record of the socket on `port`.
    pub fn socket_of(&self, port: u16) -> Option<Socket> {
        self.find(port).map(|n| self.socket(n))
    }

    /// Bind `port` (0: a free one from [`EPHEMERAL_FIRST`] on) for `owner`; the port bound.
    pub fn bind(&mut self, port: u16, owner: u64) -> Result<u16, Error> {
        if port != 0 && self.find(port).is_some() {
            return Err(Error::PortInUse);
        }
        let free = (0..self.h.sockets as usize)
            .find(|&n| self.socket(n).used == 0)
            .ok_or(Error::NoSocket)?;
        let port = if port != 0 {
            port
        } else {
            let span = 0x1_0000 - u32::from(EPHEMERAL_FIRST);
            let mut found = None;
            for i in 0..span {
                let p = u32::from(EPHEMERAL_FIRST)
                    + (self.h.ephemeral - u32::from(EPHEMERAL_FIRST) + i) % span;
                if self.find(p as u16).is_none() {
                    found = Some(p as u16);
                    break;
                }
            }
            let p = found.ok_or(Error::PortInUse)?;
            self.h.ephemeral = if p == 0xffff {
                u32::from(EPHEMERAL_FIRST)
            } else {
                u32::from(p) + 1
            };
            self.put_header();
            p
        };
        let s = Socket {
            used: 1,
            port: u32::from(port),
            owner,
            ..Socket::default()
        };
        self.put_socket(free, &s);
        Ok(port)
    }

    /// Close `port` for `owner` (its queued datagrams are dropped, not counted as drops).
    pub fn unbind(&mut self, port: u16, owner: u64) -> Result<(), Error> {
        let n = self.find(port).ok_or(Error::NoPort)?;
        if self.socket(n).owner != owner {
            return Err(Error::NotOwner);
        }
        self.put_socket(n, &Socket::default());
        Ok(())
    }

    /// Close every socket whose owner `alive` says has ended; how many were closed.
    pub fn unbind_ended(&mut self, alive: impl Fn(u64) -> bool) -> usize {
        let mut closed = 0;
        for n in 0..self.h.sockets as usize {
            let s = self.socket(n);
            if s.used == 1 && !alive(s.owner) {
                self.put_socket(n, &Socket::default());
                closed += 1;
            }
        }
        closed
    }

    /// Queue a datagram from `addr:port` for the socket on `dst_port`. A full queue drops it
    /// (`QueueFull`, counted in the socket and in `drops`); no socket is `NoPort`.
    pub fn push(&mut self, dst_port: u16, addr: u32, port: u16, data: &[u8]) -> Result<(), Error> {
        if data.len() > DATA_MAX {
            self.count(|c| c.errors += 1);
            return Err(Error::TooLong);
        }
        let n = self.find(dst_port).ok_or(Error::NoPort)?;
        let mut s = self.socket(n);
        if s.len >= self.h.depth {
            s.dropped += 1;
            self.put_socket(n, &s);
            self.count(|c| c.drops += 1);
            return Err(Error::QueueFull);
        }
        let slot = ((s.head + s.len) % self.h.depth) as usize;
        let at = self.slot_at(n, slot);
        self.area[at..at + 4].copy_from_slice(&addr.to_be_bytes());
        self.area[at + 4..at + 6].copy_from_slice(&port.to_le_bytes());
        self.area[at + 6..at + 8].copy_from_slice(&(data.len() as u16).to_le_bytes());
        self.area[at + 8..at + 8 + data.len()].copy_from_slice(data);
        s.len += 1;
        s.received += 1;
        self.put_socket(n, &s);
        self.count(|c| c.datagrams_in += 1);
        Ok(())
    }

    /// Is a datagram queued for `port`?
    pub fn pending(&self, port: u16) -> usize {
        self.socket_of(port).map_or(0, |s| s.len as usize)
    }

    /// The whole length of the oldest datagram for `port` (what [`Net::pop`] takes next);
    /// `None` if none waits or the port is not bound. A batch takes datagrams while they
    /// fit.
    pub fn next_len(&self, port: u16) -> Option<usize> {
        let n = self.find(port)?;
        let s = self.socket(n);
        if s.len == 0 {
            return None;
        }
        let at = self.slot_at(n, s.head as usize);
        let a = &self.area[at..at + SLOT_SIZE];
        Some((u16::from_le_bytes([a[6], a[7]]) as usize).min(DATA_MAX))
    }

    /// Take the oldest datagram for `port` into `out` (cut to its length); `None` if none.
    pub fn pop(&mut self, port: u16, out: &mut [u8]) -> Result<Option<Datagram>, Error> {
        let n = self.find(port).ok_or(Error::NoPort)?;
        let mut s = self.socket(n);
        if s.len == 0 {
            return Ok(None);
        }
        let at = self.slot_at(n, s.head as usize);
        let a = &self.area[at..at + SLOT_SIZE];
        let addr = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
        let sport = u16::from_le_bytes([a[4], a[5]]);
        let full_len = (u16::from_le_bytes([a[6], a[7]]) as usize).min(DATA_MAX);
        let len = full_len.min(out.len());
        out[..len].copy_from_slice(&a[8..8 + len]);
        s.head = (s.head + 1) % self.h.depth;
        s.len -= 1;
        s.delivered += 1;
        self.put_socket(n, &s);
        Ok(Some(Datagram {
            addr,
            port: sport,
            len,
            full_len,
        }))
    }
}
