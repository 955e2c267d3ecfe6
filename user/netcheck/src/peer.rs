//! The far side of the wire for `netcheck`: this process serves `net.drv` (so `netd` sends
//! it its frames) and submits frames to `net.udp` as a driver does (`abi::net`), playing the
//! gateway 10.0.2.2 (it answers `netd`'s ARP requests). Frames are built and parsed with
//! smoltcp's `wire` module.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol,
    EthernetRepr, Icmpv4Packet, Icmpv4Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet,
    Ipv4Repr, UdpPacket, UdpRepr,
};
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{self as api, Msg, MSG_ICA};
use ulib::abi::net::{
    batch, DRV_INFO, DRV_TX, DRV_TX_BATCH, FRAME_ICA_SIZE, FRAME_MAX, UDP_FRAMES_IN, UDP_FRAME_IN,
};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{ipc, res, sys};

/// The MAC this "driver" reports, and the peer's (the gateway's) MAC and address.
pub const NETD_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
pub const PEER_MAC: [u8; 6] = [0x52, 0x55, 0x0a, 0x00, 0x02, 0x02];
pub const PEER: Ipv4Address = Ipv4Address::new(10, 0, 2, 2);
/// A second neighbour on the peer's link (the same MAC), whose ARP is answered too.
pub const PEER2: Ipv4Address = Ipv4Address::new(10, 0, 2, 3);
pub const NETD: Ipv4Address = Ipv4Address::new(10, 0, 2, 15);
/// Pages for frames on their way to `netd`.
const PAGES: usize = 8;
const PAGES_AT: u64 = 0x0000_5c00_0000_0000;

struct Page {
    region: ResId,
    home: u64,
    at: u64,
    ticket: Option<u64>,
}

pub struct Peer {
    pub ep: ResId,
    pub udp: Option<FnId>,
    pages: Vec<Page>,
    /// Frames `netd` sent, not yet looked at (ARP requests are answered, not kept).
    pub sent: VecDeque<Vec<u8>>,
    /// Status of the last injections that `netd` refused (an `Error` code).
    pub refused: Vec<u64>,
    pub frames_from_netd: u64,
    /// Answer the next transmit batch with a page of this program's instead of `netd`'s
    /// (a driver that does not keep the protocol), and let `netd`'s page go.
    pub foreign_once: bool,
}

impl Peer {
    pub fn new(ep: ResId) -> Result<Peer, String> {
        let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
        let mut pages = Vec::new();
        for i in 0..PAGES {
            let region = res::open_vregion(
                &format!("here/vregion/nc-{}-{i}", me.serial()),
                FRAME_ICA_SIZE,
                Rights::OWNER_ALL,
            )
            .map_err(|e| format!("page {i}: {e}"))?;
            let home = PAGES_AT + i as u64 * FRAME_ICA_SIZE;
            res::attach_here(region, home, true).map_err(|e| format!("attach page {i}: {e}"))?;
            pages.push(Page {
                region,
                home,
                at: home,
                ticket: None,
            });
        }
        Ok(Peer {
            ep,
            udp: None,
            pages,
            sent: VecDeque::new(),
            refused: Vec::new(),
            frames_from_netd: 0,
            foreign_once: false,
        })
    }

    /// Serve `net.drv` once, waiting at most `timeout_ns`; take finished injections.
    pub fn serve(&mut self, timeout_ns: u64) {
        self.reap(0);
        let Ok(r) = ipc::recv(self.ep, timeout_ns) else {
            return;
        };
        match r.msg.label & !MSG_ICA {
            DRV_INFO => {
                let mut mac = [0u8; 8];
                mac[..6].copy_from_slice(&NETD_MAC);
                let w = [u64::from_le_bytes(mac), 1, self.frames_from_netd, 0, 0, 0];
                let _ = ipc::reply(r.request, 0, &Msg { label: 0, words: w });
            }
            DRV_TX => {
                let Some((region, at)) = ipc::ica_at(&r.msg) else {
                    let _ = ipc::reply(r.request, 0, &err(Error::InvalidArgument));
                    return;
                };
                let len = (r.msg.words[0] as usize).min(FRAME_MAX);
                // SAFETY: `netd`'s page (FRAME_ICA_SIZE >= FRAME_MAX bytes) is mapped at
                // `at` here until the reply passes it back.
                let frame = unsafe { core::slice::from_raw_parts(at as *const u8, len) }.to_vec();
                let back = ipc::with_ica(Msg::default(), region);
                if ipc::reply(r.request, 0, &back).is_err() {
                    let _ = res::detach_here(at);
                }
                self.frames_from_netd += 1;
                self.look_at(frame);
            }
            DRV_TX_BATCH => {
                let Some((region, at)) = ipc::ica_at(&r.msg) else {
                    let _ = ipc::reply(r.request, 0, &err(Error::InvalidArgument));
                    return;
                };
                // SAFETY: `netd`'s page (FRAME_ICA_SIZE bytes) is mapped at `at` here until
                // the reply passes it back.
                let page = unsafe {
                    core::slice::from_raw_parts(at as *const u8, FRAME_ICA_SIZE as usize)
                };
                let [count, used, ..] = r.msg.words;
                let frames: Result<Vec<Vec<u8>>, _> =
                    batch::Reader::new(page, count as usize, used as usize, FRAME_MAX)
                        .map_err(|_| ())
                        .and_then(|rd| {
                            rd.map(|x| x.map(|(_, f)| f.to_vec()).map_err(|_| ()))
                                .collect()
                        });
                // netd's batches are well formed: a bad one is refused (netcheck would see
                // its frames missing).
                let (value, n) = match &frames {
                    Ok(f) => (0, f.len()),
                    Err(()) => (Error::InvalidArgument as u64, 0),
                };
                // A page of ours instead of netd's, once (`foreign_once`): netd's is let go
                // here, attached nowhere, for netd to map again.
                let foreign = self
                    .foreign_once
                    .then(|| {
                        self.pages
                            .iter()
                            .position(|p| p.ticket.is_none() && p.at != 0)
                    })
                    .flatten();
                if foreign.is_some() {
                    self.foreign_once = false;
                    let _ = res::detach_here(at);
                }
                let back = ipc::with_ica(
                    Msg {
                        label: 0,
                        words: [n as u64, 0, 0, 0, 0, 0],
                    },
                    foreign.map_or(region, |k| self.pages[k].region),
                );
                match (ipc::reply(r.request, value, &back), foreign) {
                    // Our page went with the answer.
                    (Ok(()), Some(k)) => self.pages[k].at = 0,
                    (Err(_), None) => {
                        let _ = res::detach_here(at);
                    }
                    _ => {}
                }
                for frame in frames.unwrap_or_default() {
                    self.frames_from_netd += 1;
                    self.look_at(frame);
                }
            }
            _ => {
                let _ = ipc::reply(r.request, 0, &err(Error::InvalidArgument));
            }
        }
    }

    /// An ARP request for the peer (or [`PEER2`]) is answered; every other frame is kept.
    fn look_at(&mut self, frame: Vec<u8>) {
        if let Some(ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = parse_arp(&frame)
        {
            if target_protocol_addr == PEER || target_protocol_addr == PEER2 {
                let reply = ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Reply,
                    source_hardware_addr: EthernetAddress(PEER_MAC),
                    source_protocol_addr: target_protocol_addr,
                    target_hardware_addr: source_hardware_addr,
                    target_protocol_addr: source_protocol_addr,
                };
                let mut buf = alloc::vec![0u8; 14 + reply.buffer_len()];
                let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
                EthernetRepr {
                    src_addr: EthernetAddress(PEER_MAC),
                    dst_addr: source_hardware_addr,
                    ethertype: EthernetProtocol::Arp,
                }
                .emit(&mut eth);
                reply.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
                self.inject(&buf, None);
            }
            return;
        }
        if self.sent.len() < 4096 {
            self.sent.push_back(frame);
        }
    }

    /// Take finished injections (waiting at most `timeout_ns` for the first).
    fn reap(&mut self, timeout_ns: u64) {
        let mut timeout = timeout_ns;
        while self.pages.iter().any(|p| p.ticket.is_some()) {
            let Ok(c) = ipc::collect(api::ANY, timeout) else {
                return;
            };
            timeout = 0;
            if let Some(p) = self.pages.iter_mut().find(|p| p.ticket == Some(c.ticket)) {
                p.ticket = None;
                p.at = ipc::ica_at(&c.msg).map_or(0, |(_, at)| at);
                let code = if c.status != 0 {
                    c.status
                } else {
                    c.msg.label & !MSG_ICA
                };
                if code != 0 {
                    self.refused.push(code);
                }
            }
        }
    }

    /// Submit `frame` to `net.udp` as a received frame; `len_word` overrides the length
    /// word (bad input). Waits (serving) for a free page.
    pub fn inject(&mut self, frame: &[u8], len_word: Option<u64>) {
        let n = frame.len().min(FRAME_ICA_SIZE as usize);
        let msg = Msg {
            label: UDP_FRAME_IN,
            words: [len_word.unwrap_or(n as u64), 0, 0, 0, 0, 0],
        };
        self.inject_page(frame, msg);
    }

    /// Submit `frames` to `net.udp` in one `UDP_FRAMES_IN` batch, as the driver does (as
    /// many as fit a page); `count_used` overrides the words saying how many records and
    /// bytes (bad input).
    pub fn inject_batch(&mut self, frames: &[&[u8]], count_used: Option<(u64, u64)>) {
        let mut page = alloc::vec![0u8; FRAME_ICA_SIZE as usize];
        let mut w = batch::Writer::new(&mut page);
        for f in frames {
            let _ = w.push(0, 0, f);
        }
        let (count, used) = count_used.unwrap_or((w.count() as u64, w.used() as u64));
        let msg = Msg {
            label: UDP_FRAMES_IN,
            words: [count, used, 0, 0, 0, 0],
        };
        self.inject_page(&page, msg);
    }

    /// Submit `msg` to `net.udp` with a page holding `bytes`. Waits (serving) for a free
    /// page.
    fn inject_page(&mut self, bytes: &[u8], msg: Msg) {
        let Some(udp) = self.udp else { return };
        let mut i = None;
        for _ in 0..10_000 {
            if let Some(k) = self.free_page() {
                i = Some(k);
                break;
            }
            self.reap(1_000_000);
        }
        let Some(i) = i else { return };
        let p = &mut self.pages[i];
        let n = bytes.len().min(FRAME_ICA_SIZE as usize);
        // SAFETY: the page (FRAME_ICA_SIZE bytes, writable) is mapped at `p.at` and not in
        // flight; `n` fits.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.at as *mut u8, n) };
        let mut sub = ipc::op(api::SUBMIT_CALL, udp.as_target().0, [0; 4]);
        sub.msg = ipc::with_ica(msg, p.region);
        if let Ok(t) = ipc::submit(&sub) {
            p.ticket = Some(t);
            p.at = 0;
        }
    }

    /// A page not in flight and mapped here (mapped again if it came back detached; one
    /// given to `netd` with a foreign answer is skipped until `netd` has let it go).
    fn free_page(&mut self) -> Option<usize> {
        for (k, p) in self.pages.iter_mut().enumerate() {
            if p.ticket.is_some() {
                continue;
            }
            if p.at == 0 {
                if res::attach_here(p.region, p.home, true).is_err() {
                    continue;
                }
                p.at = p.home;
            }
            return Some(k);
        }
        None
    }

    /// Serve until a kept frame satisfies `want` (it is taken), at most `limit_ns`.
    pub fn wait_for<T>(
        &mut self,
        limit_ns: u64,
        mut want: impl FnMut(&[u8]) -> Option<T>,
    ) -> Option<T> {
        let start = sys::clock_ns().unwrap_or(0);
        loop {
            if let Some(k) = self.sent.iter().position(|f| want(f).is_some()) {
                let f = self.sent.remove(k)?;
                return want(&f);
            }
            if sys::clock_ns().unwrap_or(0).saturating_sub(start) > limit_ns {
                return None;
            }
            self.serve(2_000_000);
        }
    }

    /// Serve until `done` says so, at most `limit_ns`: whether it did.
    pub fn serve_until(&mut self, limit_ns: u64, mut done: impl FnMut() -> bool) -> bool {
        let start = sys::clock_ns().unwrap_or(0);
        loop {
            if done() {
                return true;
            }
            if sys::clock_ns().unwrap_or(0).saturating_sub(start) > limit_ns {
                return false;
            }
            self.serve(2_000_000);
        }
    }

    /// Serve for `ns` nanoseconds.
    pub fn idle(&mut self, ns: u64) {
        let start = sys::clock_ns().unwrap_or(0);
        while sys::clock_ns().unwrap_or(0).saturating_sub(start) < ns {
            self.serve(1_000_000);
        }
    }
}

impl Drop for Peer {
    /// Its pages are closed (vregions outlive their creator); one still with `netd` (which
    /// ended by now) has come back detached.
    fn drop(&mut self) {
        self.reap(10_000_000);
        for p in &self.pages {
            if p.at != 0 {
                let _ = res::detach_here(p.at);
            }
            let _ = res::close(p.region);
        }
        let _ = res::close(self.ep);
    }
}

fn err(e: Error) -> Msg {
    Msg {
        label: e as u64,
        ..Msg::default()
    }
}

fn parse_arp(frame: &[u8]) -> Option<ArpRepr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Arp {
        return None;
    }
    ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()
}

/// An Ethernet frame from the peer to `netd` carrying an IPv4 packet of `proto` whose
/// payload `fill` writes (`len` bytes).
fn ip_frame(proto: IpProtocol, len: usize, fill: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let mut buf = alloc::vec![0u8; 14 + 20 + len];
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
    EthernetRepr {
        src_addr: EthernetAddress(PEER_MAC),
        dst_addr: EthernetAddress(NETD_MAC),
        ethertype: EthernetProtocol::Ipv4,
    }
    .emit(&mut eth);
    let ip = Ipv4Repr {
        src_addr: PEER,
        dst_addr: NETD,
        next_header: proto,
        payload_len: len,
        hop_limit: 64,
    };
    let mut p = Ipv4Packet::new_unchecked(eth.payload_mut());
    ip.emit(&mut p, &ChecksumCapabilities::default());
    fill(p.payload_mut());
    buf
}

/// A UDP datagram from the peer's `sport` to `netd`'s `dport`.
pub fn udp_frame(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    ip_frame(IpProtocol::Udp, 8 + data.len(), |b| {
        let mut u = UdpPacket::new_unchecked(b);
        UdpRepr {
            src_port: sport,
            dst_port: dport,
        }
        .emit(
            &mut u,
            &IpAddress::Ipv4(PEER),
            &IpAddress::Ipv4(NETD),
            data.len(),
            |p| p.copy_from_slice(data),
            &ChecksumCapabilities::default(),
        );
    })
}

/// An ICMP echo request to `netd`.
pub fn ping_frame(seq: u16, data: &[u8]) -> Vec<u8> {
    let r = Icmpv4Repr::EchoRequest {
        ident: 0x4d55,
        seq_no: seq,
        data,
    };
    ip_frame(IpProtocol::Icmp, r.buffer_len(), |b| {
        r.emit(
            &mut Icmpv4Packet::new_unchecked(b),
            &ChecksumCapabilities::default(),
        )
    })
}

/// The IPv4 packet in `frame` from `netd` to the peer: (protocol, payload).
fn ipv4_of(frame: &[u8]) -> Option<(IpProtocol, &[u8], Ipv4Address)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 || eth.dst_addr() != EthernetAddress(PEER_MAC) {
        return None;
    }
    let payload = &frame[14..];
    let ip = Ipv4Packet::new_checked(payload).ok()?;
    let r = Ipv4Repr::parse(&ip, &ChecksumCapabilities::default()).ok()?;
    if r.src_addr != NETD || (r.dst_addr != PEER && r.dst_addr != PEER2) {
        return None;
    }
    let hl = ip.header_len() as usize;
    Some((r.next_header, &payload[hl..hl + r.payload_len], r.dst_addr))
}

/// A UDP datagram from `netd` to the peer (or [`PEER2`]): (source port, destination port,
/// data).
pub fn udp_of(frame: &[u8]) -> Option<(u16, u16, Vec<u8>)> {
    let (proto, p, dst) = ipv4_of(frame)?;
    if proto != IpProtocol::Udp {
        return None;
    }
    let u = UdpPacket::new_checked(p).ok()?;
    let r = UdpRepr::parse(
        &u,
        &IpAddress::Ipv4(NETD),
        &IpAddress::Ipv4(dst),
        &ChecksumCapabilities::default(),
    )
    .ok()?;
    Some((r.src_port, r.dst_port, u.payload().to_vec()))
}

/// An ICMP message from `netd`: `Some(Ok(echo reply data))` or `Some(Err(unreachable
/// reason code))`.
pub fn icmp_of(frame: &[u8]) -> Option<Result<(u16, Vec<u8>), u8>> {
    let (proto, p, _) = ipv4_of(frame)?;
    if proto != IpProtocol::Icmp {
        return None;
    }
    let pk = Icmpv4Packet::new_checked(p).ok()?;
    match Icmpv4Repr::parse(&pk, &ChecksumCapabilities::default()).ok()? {
        Icmpv4Repr::EchoReply { seq_no, data, .. } => Some(Ok((seq_no, data.to_vec()))),
        Icmpv4Repr::DstUnreachable { reason, .. } => Some(Err(u8::from(reason))),
        _ => None,
    }
}
