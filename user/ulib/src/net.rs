//! UDP sockets for programs (issue 15): requests to the function `net.udp`, served by
//! `netd` (`user/netd`), whatever process or core serves it and however often it is
//! replaced.
//!
//! ```ignore
//! let mut s = ulib::net::UdpSocket::bind(7)?;
//! let mut buf = [0u8; ulib::net::DATA_MAX];
//! let (n, from, port) = s.recv_from(&mut buf, u64::MAX)?;
//! s.send_to(from, port, &buf[..n])?;
//! ```
//!
//! # The protocol on `net.udp`
//!
//! Every request is a `CALL` whose label is one of the `OP_*` values; the reply's label is
//! its status (0, or an `abi::Error` code, with `MSG_ICA` set when it carries the ICA back).
//!
//! | op | request words | ICA | reply words |
//! |---|---|---|---|
//! | [`OP_BIND`] | port (0: any free one) | - | the port bound |
//! | [`OP_CLOSE`] | port | - | - |
//! | [`OP_SEND`] | source port, destination address, destination port, length | the data | - |
//! | [`OP_RECV`] | port, timeout ns (`u64::MAX`: none), capacity | room for the data | length, source address, source port, whole length |
//! | [`OP_SEND_RECV`] | source port, destination port, length and capacity in one ([`pack_send_recv`]), destination address, timeout ns | the data, then room for the next | as `OP_RECV`; a failed send: its error, word 0 [`SEND_FAILED`] |
//! | [`OP_EXCHANGE`] | source port, records to send, bytes they use, most to receive ([`pack_exchange`]); timeout ns | a batch of datagrams (`abi::net::batch`), then room for the next | records and bytes received; a failed send: its error, word 0 [`SEND_FAILED`], word 1 the datagrams sent before it |
//! | [`OP_INFO`] | - | - | address, prefix, gateway, where from (`netstate::CONFIG_*`), bound sockets, MAC |
//! | [`OP_COUNTERS`] | - | - | frames in, frames out, datagrams in, datagrams out, drops, errors |
//! | [`OP_STEPS`] | 1: start timing from zero; 0: stop | - | CPU ns since the start in request steps, in result steps, in all steps (P3 Table 3) |
//!
//! A request with an ICA has four words: the kernel carries the ICA in words 4 and 5
//! (`abi::ipc::ICA_ID_WORD`).
//!
//! Data (up to [`DATA_MAX`] = 1,472 bytes) travels in an ICA: each socket owns one
//! one-page vregion that goes to `netd` with each `OP_SEND` and `OP_RECV` and comes back
//! with the reply, so no byte is copied through the kernel; an `OP_SEND` lends it read-only
//! (`MSG_ICA_READ_ONLY`: `netd` only reads the data), and `netd` refuses an `OP_RECV`
//! whose page is read-only (`InvalidArgument`). `OP_SEND_RECV` (`UdpSocket::send_recv`) is
//! a send and the next receive in one request, the datagram's "reply and wait": a program
//! that answers datagrams calls `netd` once per datagram instead of twice. `OP_EXCHANGE`
//! (`UdpSocket::exchange`) is the same for a batch: the page holds several datagrams each
//! way (`abi::net::batch`: each with its peer's address and port), so a program that
//! answers datagrams (`udpecho`) calls `netd` once for as many as are waiting, and sends
//! its answers back in place.
//! (The six inline words would
//! carry only 32 bytes next to an ICA's id and address; one path for every size is
//! simpler.) The socket keeps track of where its page is mapped now (a passed ICA comes back
//! at a kernel-chosen address in the ICA window), and attaches it again if it came back
//! detached (its holder ended).
//!
//! Only the process that bound a port may send from it, receive on it or close it (`netd`
//! knows callers by the pid the kernel vouches for: `Denied` otherwise); `netd` closes the
//! ports of processes that have ended.
//!
//! # Errors
//!
//! A request answered `Again` (the server is being replaced, see `abi::fnid::RETIRE_NOTICE`)
//! is sent again here, so programs never see it; an `OP_RECV` goes again with the time
//! left, and so does the receive of an `OP_SEND_RECV` or `OP_EXCHANGE` answered `Again`
//! (`netd` holds only a receive whose send is done, so only the receive goes again).
//! Sending more than [`DATA_MAX`] bytes is `TooLong` (checked before anything is sent;
//! a batch record that long is malformed: `InvalidArgument`); binding a bound port is
//! `AlreadyExists`; no `netd` is `NoSuchResource` (never registered) or `Gone` (its server
//! ended); no datagram within the timeout is `TimedOut`. A batch stops at a malformed
//! record or a full queue (`SEND_FAILED`, with the count sent before it); a datagram in it
//! to address or port 0 (say, an answer to a datagram that came from port 0) is dropped
//! and counted by `netd`, and the rest go on.

use crate::{fnid, ipc, res, sys};
use abi::fnid::FnId;
use abi::ipc::{Msg, MSG_ICA_READ_ONLY};
use abi::net::batch;
use abi::res::{ResId, Rights};
use abi::Error;
use core::sync::atomic::{AtomicU64, Ordering};

/// The function `netd` serves.
pub const FN_UDP: &str = abi::net::FN_UDP;
/// Largest datagram payload (1,500-byte MTU - IPv4 and UDP headers).
pub const DATA_MAX: usize = 1472;

/// Bind a port.
pub const OP_BIND: u64 = 1;
/// Close a port.
pub const OP_CLOSE: u64 = 2;
/// Send a datagram (data in the ICA).
pub const OP_SEND: u64 = 3;
/// Receive a datagram (into the ICA), waiting at most the timeout.
pub const OP_RECV: u64 = 4;
/// Address config.
pub const OP_INFO: u64 = 5;
/// Counters.
pub const OP_COUNTERS: u64 = 6;
/// Send a datagram (data in the ICA, lent writable), then receive the next one into the
/// same ICA as `OP_RECV` does (`UdpSocket::send_recv`).
pub const OP_SEND_RECV: u64 = 8;
/// `OP_SEND_RECV`'s word 0: the source port, the destination port, the length and the
/// capacity, 16 bits each (a request with an ICA has four words; the lengths are at most
/// [`DATA_MAX`]).
pub fn pack_send_recv(port: u16, dport: u16, len: u16, cap: u16) -> u64 {
    u64::from(port) | u64::from(dport) << 16 | u64::from(len) << 32 | u64::from(cap) << 48
}

/// [`pack_send_recv`] undone: (source port, destination port, length, capacity) as words.
pub fn unpack_send_recv(w: u64) -> (u64, u64, u64, u64) {
    (w & 0xffff, (w >> 16) & 0xffff, (w >> 32) & 0xffff, w >> 48)
}

/// Word 0 of an `OP_SEND_RECV` or `OP_EXCHANGE` answered with an error before anything was
/// received: a send failed (the error is the send's).
pub const SEND_FAILED: u64 = 1;
/// Send the datagrams in the ICA (a batch, `abi::net::batch`), then receive as many as
/// wait, up to a number, into it, waiting at most the timeout for the first
/// (`UdpSocket::exchange`).
pub const OP_EXCHANGE: u64 = 9;
/// `OP_EXCHANGE`'s word 0: the source port, the records to send, the bytes they use and the
/// most datagrams to receive, 16 bits each.
pub fn pack_exchange(port: u16, count: u16, used: u16, max: u16) -> u64 {
    pack_send_recv(port, count, used, max)
}
/// Time `netd`'s steps (P3 Table 3): its CPU time from each return of its receive to the
/// next (its *steps*), and apart the part spent taking the driver's answers (its *result
/// steps*); the rest are its *request steps*. Costs two `CPU_TIME` calls a step while on.
pub const OP_STEPS: u64 = 7;

/// How many times a request answered `Again` is sent again before giving up (`Busy`): a
/// replacement takes milliseconds; this is only a bound against a server that says `Again`
/// forever.
const AGAIN_TRIES: u32 = 100_000;

/// An IPv4 address, `a.b.c.d` as `[a, b, c, d]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4(pub [u8; 4]);

impl Ipv4 {
    /// `a.b.c.d`.
    pub fn parse(s: &str) -> Option<Ipv4> {
        let mut out = [0u8; 4];
        let mut parts = s.split('.');
        for b in &mut out {
            *b = parts.next()?.parse().ok()?;
        }
        parts.next().is_none().then_some(Ipv4(out))
    }

    /// As one word (network order in the low 32 bits), as the protocol carries it.
    pub fn to_word(self) -> u64 {
        u64::from(u32::from_be_bytes(self.0))
    }

    pub fn from_word(w: u64) -> Ipv4 {
        Ipv4((w as u32).to_be_bytes())
    }
}

impl core::fmt::Display for Ipv4 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// A lent page's size.
const PAGE: usize = abi::net::FRAME_ICA_SIZE as usize;
/// Where a socket's page is attached first: one page per socket from here (after it went to
/// `netd` once, it lives in the ICA window).
const PAGES_AT: u64 = 0x0000_5d00_0000_0000;
static NEXT_PAGE: AtomicU64 = AtomicU64::new(0);
/// The pages [`LentPage::open`] made and their drops have not closed ([`LentPage::is_own`]).
static OWN_PAGES: crate::cell::Local<alloc::vec::Vec<ResId>> =
    crate::cell::Local::new(alloc::vec::Vec::new());

/// The function id of `net.udp`.
pub fn server() -> Result<FnId, Error> {
    fnid::lookup(FN_UDP)
}

/// A reply's status as a `Result`.
fn status(reply: &Msg) -> Result<(), Error> {
    match ipc::label(reply) {
        0 => Ok(()),
        code => Err(Error::from_code(code)),
    }
}

/// `CALL` `msg` to `server`, sent again while it is answered `Again`.
fn call_again(server: FnId, msg: &Msg) -> Result<Msg, Error> {
    for _ in 0..AGAIN_TRIES {
        match ipc::call(server.as_target(), msg) {
            Err(Error::Again) => {}
            Err(e) => return Err(e),
            Ok((_, reply)) if ipc::label(&reply) == Error::Again as u64 => {}
            Ok((_, reply)) => return Ok(reply),
        }
        let _ = sys::yield_now();
    }
    Err(Error::Busy)
}

fn request(op: u64, words: [u64; 4]) -> Msg {
    Msg {
        label: op,
        words: [words[0], words[1], words[2], words[3], 0, 0],
    }
}

/// Address config: (address, prefix, gateway, source `netstate::CONFIG_*`, bound sockets,
/// MAC address).
pub fn info() -> Result<[u64; 6], Error> {
    let r = call_again(server()?, &request(OP_INFO, [0; 4]))?;
    status(&r)?;
    Ok(r.words)
}

/// `OP_STEPS`: start timing `netd`'s steps (`true`), or stop and read (request step ns,
/// result step ns, all steps ns) since the start.
pub fn steps(start: bool) -> Result<[u64; 6], Error> {
    let r = call_again(server()?, &request(OP_STEPS, [u64::from(start), 0, 0, 0]))?;
    status(&r)?;
    Ok(r.words)
}

/// Counters: frames in, frames out, datagrams in, datagrams out, drops, errors.
pub fn counters() -> Result<[u64; 6], Error> {
    let r = call_again(server()?, &request(OP_COUNTERS, [0; 4]))?;
    status(&r)?;
    Ok(r.words)
}

/// A bound UDP port and its data page.
pub struct UdpSocket {
    server: FnId,
    port: u16,
    page: LentPage,
    /// The batch in the page (`exchange`): records and bytes received by the last
    /// exchange, and those the next one sends.
    received: (usize, usize),
    to_send: (usize, usize),
    /// Datagrams the last exchange sent.
    sent: usize,
}

/// A one-page vregion of this process that goes with requests as their ICA and comes back
/// with the replies: a socket's data page, or `machd`'s frame page to `net.drv`
/// (`abi::net`'s frame ICA). It keeps track of where the page is mapped now (a passed ICA
/// comes back at a kernel-chosen address in the ICA window) and attaches it again at its
/// first address if it came back detached (its holder ended). Closed when dropped.
pub struct LentPage {
    page: ResId,
    /// Where the page is mapped now; 0 while it is not (it went with a request that failed
    /// after it moved; it is attached again before the next use).
    at: u64,
    home: u64,
}

impl LentPage {
    /// Open this process's page `here/vregion/NAME-X` (X is 48 bits nobody can guess,
    /// `res::open_fresh`: under a name a program could foresee, such as one made of its
    /// serial, one started first could take it and keep this one from its sockets) and
    /// attach it writable.
    pub fn open(name: &str) -> Result<LentPage, Error> {
        let k = NEXT_PAGE.fetch_add(1, Ordering::Relaxed);
        let page = res::open_fresh(
            &alloc::format!("here/vregion/{name}"),
            &abi::net::FRAME_ICA_SIZE.to_le_bytes(),
            Rights::OWNER_ALL,
        )?;
        let home = PAGES_AT + k * abi::net::FRAME_ICA_SIZE;
        if let Err(e) = res::attach_here(page, home, true) {
            let _ = res::close(page);
            return Err(e);
        }
        OWN_PAGES.with(|p| p.push(page));
        Ok(LentPage {
            page,
            at: home,
            home,
        })
    }

    /// Is `region` one of this process's pages (made by [`LentPage::open`] and not closed
    /// by its drop)? A server that makes others' resource operations (`machd`) keeps these
    /// from them.
    pub fn is_own(region: ResId) -> bool {
        OWN_PAGES.with(|p| p.contains(&region))
    }

    /// Where the page is mapped, attached again at its first address if it came back
    /// detached.
    pub fn map(&mut self) -> Result<u64, Error> {
        if self.at != 0 {
            return Ok(self.at);
        }
        // Its holder may still be letting go of it: a few tries.
        for _ in 0..1000 {
            match res::attach_here(self.page, self.home, true) {
                Ok(()) => {
                    self.at = self.home;
                    return Ok(self.at);
                }
                Err(Error::Busy) => {
                    let _ = sys::sleep_ns(100_000);
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Busy)
    }

    /// Where the page is mapped now (0: nowhere).
    pub fn at(&self) -> u64 {
        self.at
    }

    /// The page's bytes, mapped (attached again first if it came back detached).
    pub fn bytes_mut(&mut self) -> Result<&mut [u8], Error> {
        let at = self.map()?;
        // SAFETY: the page (FRAME_ICA_SIZE bytes) is mapped writable at `at` in this
        // process (one that came back read-only was let go by `call`), and the borrow of
        // `self` keeps it from being lent or moved while the slice lives.
        Ok(unsafe { core::slice::from_raw_parts_mut(at as *mut u8, PAGE) })
    }

    /// The page's bytes as they are now (none while it is not mapped).
    pub fn bytes(&self) -> &[u8] {
        match self.at {
            0 => &[],
            // SAFETY: as in `bytes_mut`: mapped at `at`, not lent while `self` is borrowed.
            at => unsafe { core::slice::from_raw_parts(at as *const u8, PAGE) },
        }
    }

    /// `CALL` `target` with `msg` and the page as its ICA; notes where the page came back.
    /// `Again` from the kernel means it was refused before the page moved.
    pub fn call(&mut self, target: ResId, msg: Msg) -> Result<(u64, Msg), Error> {
        self.map()?;
        let (value, reply) = match ipc::call(target, &ipc::with_ica(msg, self.page)) {
            Ok(r) => r,
            Err(e) => {
                // `Again`: refused before the page moved, it is where it was. Another
                // failure may come after it moved (its server ended holding it): then it
                // came back detached, and is attached again before the next use.
                if e != Error::Again && res::info(self.page).is_ok_and(|i| i.detail == 0) {
                    self.at = 0;
                }
                return Err(e);
            }
        };
        self.at = ipc::ica_at(&reply).map_or(0, |(_, at)| at);
        if self.at != 0 && ipc::ica_read_only(&reply) {
            // A lent page that came back read-only (this program moved meanwhile): let it
            // go, to be attached again writable at home.
            let _ = res::detach_here(self.at);
            self.at = 0;
        }
        Ok((value, reply))
    }
}

impl Drop for LentPage {
    fn drop(&mut self) {
        if self.at != 0 {
            let _ = res::detach_here(self.at);
        }
        let _ = res::close(self.page);
        OWN_PAGES.with(|p| p.retain(|&r| r != self.page));
    }
}

/// What [`UdpSocket::send_recv`] or [`UdpSocket::exchange`] could not do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendRecvError {
    /// The datagram (of a batch: one datagram, and those after it; [`UdpSocket::sent`]
    /// says how many before it went) was not sent, and nothing was received.
    Send(Error),
    /// The datagram or batch was sent (or its fate is unknown: `Gone`, the server ended
    /// holding the request; [`UdpSocket::sent`] then says 0); the receive failed.
    Recv(Error),
}

impl UdpSocket {
    /// Bind `port` (0: a free port from 49152 on; [`UdpSocket::port`] tells which).
    pub fn bind(port: u16) -> Result<UdpSocket, Error> {
        let server = server()?;
        let page = LentPage::open("udp")?;
        let r = call_again(server, &request(OP_BIND, [u64::from(port), 0, 0, 0]))
            .and_then(|r| status(&r).map(|()| r.words[0] as u16));
        // A failed bind drops (closes) the page.
        Ok(UdpSocket {
            server,
            port: r?,
            page,
            received: (0, 0),
            to_send: (0, 0),
            sent: 0,
        })
    }

    /// The port bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Send the page with `msg` (sent again on `Again`); notes where the page came back.
    fn call_with_page(&mut self, msg: Msg) -> Result<Msg, Error> {
        for _ in 0..AGAIN_TRIES {
            let reply = match self.page.call(self.server.as_target(), msg) {
                // Refused before the page moved: it is where it was.
                Err(Error::Again) => {
                    let _ = sys::yield_now();
                    continue;
                }
                Err(e) => return Err(e),
                Ok((_, reply)) => reply,
            };
            if ipc::label(&reply) == Error::Again as u64 {
                let _ = sys::yield_now();
                continue;
            }
            return Ok(reply);
        }
        Err(Error::Busy)
    }

    /// Send `data` (at most [`DATA_MAX`] bytes) to `addr:port`. A batch queued for
    /// [`UdpSocket::exchange`] is dropped (the data goes where it was), as by
    /// [`UdpSocket::recv_from`] and [`UdpSocket::send_recv`].
    pub fn send_to(&mut self, addr: Ipv4, port: u16, data: &[u8]) -> Result<(), Error> {
        if data.len() > DATA_MAX {
            return Err(Error::TooLong);
        }
        self.forget_batch();
        self.page.bytes_mut()?[..data.len()].copy_from_slice(data);
        let mut msg = request(
            OP_SEND,
            [
                u64::from(self.port),
                addr.to_word(),
                u64::from(port),
                data.len() as u64,
            ],
        );
        // Lent read-only: `netd` only reads the data (it comes back writable).
        msg.label |= MSG_ICA_READ_ONLY;
        status(&self.call_with_page(msg)?)
    }

    /// Receive one datagram into `buf` (cut to its size), waiting at most `timeout_ns`
    /// (`u64::MAX`: no limit); its length, source address and source port.
    pub fn recv_from(
        &mut self,
        buf: &mut [u8],
        timeout_ns: u64,
    ) -> Result<(usize, Ipv4, u16), Error> {
        let cap = buf.len().min(DATA_MAX);
        self.forget_batch();
        let start = sys::clock_ns()?;
        let reply = loop {
            let left = time_left(timeout_ns, start);
            let msg = request(OP_RECV, [u64::from(self.port), left, cap as u64, 0]);
            let r = self.call_with_page(msg)?;
            // A reply that lost the page (cannot happen with a well-behaved netd) carries
            // nothing to read: ask again.
            if self.page.at() == 0 && status(&r).is_ok() {
                continue;
            }
            break r;
        };
        status(&reply)?;
        Ok(self.datagram(&reply, buf, cap))
    }

    /// The datagram a receive's reply says is in the page, copied into `buf` (at most
    /// `cap <= buf.len()` bytes): its length, source address and source port.
    fn datagram(&self, reply: &Msg, buf: &mut [u8], cap: usize) -> (usize, Ipv4, u16) {
        let page = self.page.bytes();
        let n = (reply.words[0] as usize).min(cap).min(page.len());
        buf[..n].copy_from_slice(&page[..n]);
        (n, Ipv4::from_word(reply.words[1]), reply.words[2] as u16)
    }

    /// Send `buf[..len]` to `addr:port`, then receive the next datagram into `buf` (cut to
    /// its size), waiting at most `timeout_ns`, as [`UdpSocket::send_to`] and then
    /// [`UdpSocket::recv_from`] would, in one request to `netd` (`OP_SEND_RECV`): what a
    /// program answering datagrams calls once per datagram. A receive `netd` gave back
    /// while it was replaced (`Again`: the datagram was sent) goes on as `recv_from` with
    /// the time left.
    pub fn send_recv(
        &mut self,
        addr: Ipv4,
        port: u16,
        buf: &mut [u8],
        len: usize,
        timeout_ns: u64,
    ) -> Result<(usize, Ipv4, u16), SendRecvError> {
        use SendRecvError::{Recv, Send};
        if len > DATA_MAX {
            return Err(Send(Error::TooLong));
        }
        if len > buf.len() {
            return Err(Send(Error::InvalidArgument));
        }
        let cap = buf.len().min(DATA_MAX);
        self.forget_batch();
        let start = sys::clock_ns().map_err(Send)?;
        // `len <= DATA_MAX` fits the page.
        self.page.bytes_mut().map_err(Send)?[..len].copy_from_slice(&buf[..len]);
        let msg = request(
            OP_SEND_RECV,
            [
                pack_send_recv(self.port, port, len as u16, cap as u16),
                addr.to_word(),
                timeout_ns,
                0,
            ],
        );
        let mut tries = 0;
        let reply = loop {
            // Lent writable: the answer's datagram is written into it.
            match self.page.call(self.server.as_target(), msg) {
                // Refused before it reached a server (it is restarting): nothing was sent.
                Err(Error::Again) if tries < AGAIN_TRIES => {
                    tries += 1;
                    let _ = sys::yield_now();
                }
                // Refused that often: as `call_with_page` says it.
                Err(Error::Again) => return Err(Send(Error::Busy)),
                // The server ended holding it: perhaps sent.
                Err(Error::Gone) => return Err(Recv(Error::Gone)),
                // Refused before it reached a server: not sent.
                Err(e) => return Err(Send(e)),
                Ok((_, reply)) => break reply,
            }
        };
        match ipc::label(&reply) {
            0 if self.page.at() != 0 => {}
            // Sent, and the receive given back (`Again`: the server was replaced while it
            // held it), or a reply that lost the page: the receive goes on alone.
            e if e == 0 || e == Error::Again as u64 => {
                return self
                    .recv_from(buf, time_left(timeout_ns, start))
                    .map_err(Recv)
            }
            e if reply.words[0] == SEND_FAILED => return Err(Send(Error::from_code(e))),
            e => return Err(Recv(Error::from_code(e))),
        }
        Ok(self.datagram(&reply, buf, cap))
    }
}

impl UdpSocket {
    /// Send the batch queued in the page ([`UdpSocket::answer_all`], [`UdpSocket::push`]),
    /// then receive the datagrams waiting, at most `max` (and as many as fit the page),
    /// waiting at most `timeout_ns` for the first (`OP_EXCHANGE`): how many were received
    /// (`max` 0: none, the batch is only sent); [`UdpSocket::received`] reads them and
    /// [`UdpSocket::sent`] tells how many were sent. The batch is gone from the page after,
    /// sent or not. A receive `netd` gave back while it was replaced (`Again`: the batch
    /// was sent) goes on with nothing to send and the time left. `SendRecvError::Send`: a
    /// datagram was refused (a bad address, a full queue, a torn batch); those before it
    /// were sent, nothing was received.
    pub fn exchange(&mut self, max: usize, timeout_ns: u64) -> Result<usize, SendRecvError> {
        use SendRecvError::{Recv, Send};
        self.sent = 0;
        self.received = (0, 0);
        let (mut count, mut used) = core::mem::take(&mut self.to_send);
        let start = sys::clock_ns().map_err(Send)?;
        let max = max.min(usize::from(u16::MAX));
        let mut tries = 0;
        // Once a reply said the batch went, what fails after is the receive's.
        let mut gone = false;
        let fail = |gone: bool, e: Error| if gone { Recv(e) } else { Send(e) };
        loop {
            self.page.map().map_err(|e| fail(gone, e))?;
            let msg = request(
                OP_EXCHANGE,
                [
                    pack_exchange(self.port, count as u16, used as u16, max as u16),
                    time_left(timeout_ns, start),
                    0,
                    0,
                ],
            );
            let reply = match self.page.call(self.server.as_target(), msg) {
                // Refused before it reached a server (it is restarting): nothing was sent.
                Err(Error::Again) if tries < AGAIN_TRIES => {
                    tries += 1;
                    let _ = sys::yield_now();
                    continue;
                }
                Err(Error::Again) => return Err(fail(gone, Error::Busy)),
                // The server ended holding it: perhaps sent.
                Err(Error::Gone) => return Err(Recv(Error::Gone)),
                Err(e) => return Err(fail(gone, e)),
                Ok((_, reply)) => reply,
            };
            let label = ipc::label(&reply);
            let failed = label != 0 && reply.words[0] == SEND_FAILED;
            // A server that does not know the request: nothing was sent.
            if label == Error::InvalidArgument as u64 && !failed {
                return Err(Send(Error::InvalidArgument));
            }
            // Answered past the send: the whole batch went (a failed send is answered at
            // once, with how many went before it; the server's word is not trusted beyond
            // the batch).
            self.sent += match failed {
                true => (reply.words[1] as usize).min(count),
                false => count,
            };
            match label {
                0 => {
                    // A reply that lost the page (it came back read-only): the datagrams
                    // are in it still; attached again.
                    self.page.map().map_err(Recv)?;
                    let n = (reply.words[0] as usize).min(max);
                    let used = (reply.words[1] as usize).min(abi::net::FRAME_ICA_SIZE as usize);
                    self.received = (n, used);
                    return Ok(n);
                }
                // Sent, and the receive given back (`Again`: the server was replaced while
                // it held it): receive again, sending nothing.
                e if e == Error::Again as u64 => {
                    (count, used) = (0, 0);
                    gone = true;
                    if tries >= AGAIN_TRIES {
                        return Err(Recv(Error::Busy));
                    }
                    tries += 1;
                }
                e if failed => return Err(Send(Error::from_code(e))),
                e => return Err(Recv(Error::from_code(e))),
            }
        }
    }

    /// The datagrams the last [`UdpSocket::exchange`] received, in order: (source
    /// address, source port, data).
    pub fn received(&self) -> impl Iterator<Item = (Ipv4, u16, &[u8])> {
        let (count, used) = self.received;
        batch::Reader::new(self.page.bytes(), count, used, DATA_MAX)
            .into_iter()
            .flatten()
            .map_while(Result::ok)
            .map(|(h, d)| (Ipv4::from_word(u64::from(h.addr)), h.port, d))
    }

    /// The page is about to hold one datagram: no batch is in it any more.
    fn forget_batch(&mut self) {
        self.received = (0, 0);
        self.to_send = (0, 0);
    }

    /// Datagrams the last [`UdpSocket::exchange`] sent (or handed to `netd`: a datagram to
    /// address or port 0 is dropped there and counted an error, not refused).
    pub fn sent(&self) -> usize {
        self.sent
    }

    /// Send every datagram received back where it came from, as it is, with the next
    /// [`UdpSocket::exchange`] (what an echo does, without a copy).
    pub fn answer_all(&mut self) {
        self.to_send = self.received;
    }

    /// Queue `data` for `addr:port` in the page, sent by the next
    /// [`UdpSocket::exchange`]. The first push after an exchange starts a new batch, over
    /// what it received. `TooLong`: more than [`DATA_MAX`] bytes; `Busy`: the page is full
    /// (exchange first).
    pub fn push(&mut self, addr: Ipv4, port: u16, data: &[u8]) -> Result<(), Error> {
        if data.len() > DATA_MAX {
            return Err(Error::TooLong);
        }
        let page = self.page.bytes_mut()?;
        self.received = (0, 0);
        let (count, used) = self.to_send;
        let mut w = batch::Writer::new(&mut page[used..]);
        w.push(port, addr.to_word() as u32, data)
            .map_err(|_| Error::Busy)?;
        self.to_send = (count + 1, used + w.used());
        Ok(())
    }
}

/// What is left of `timeout_ns` (`u64::MAX`: no limit) begun at clock time `start`.
fn time_left(timeout_ns: u64, start: u64) -> u64 {
    match timeout_ns {
        u64::MAX => u64::MAX,
        t => t.saturating_sub(sys::clock_ns().unwrap_or(u64::MAX).saturating_sub(start)),
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let _ = call_again(
            self.server,
            &request(OP_CLOSE, [u64::from(self.port), 0, 0, 0]),
        );
        // The page closes when `self.page` drops.
    }
}
