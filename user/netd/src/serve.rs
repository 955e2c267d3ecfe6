//! `netd`'s loop: requests on `net.udp` (frames from the driver, the socket operations of
//! `ulib::net`), smoltcp polled between them, and the receives it holds.
//!
//! Every datagram smoltcp receives for a bound port is moved at once into that socket's
//! queue in the state ICA (`libs/netstate`), so smoltcp's own buffers hold at most the
//! datagram of the frame being processed, and a replacement finds everything received and
//! not yet taken. A frame the driver handed in is put through smoltcp before the next
//! receive, because any receive may be the one that retires this server (P3: a step ends
//! with its work in the state). An `OP_RECV` for an empty queue is *held* (at most
//! [`MAX_HELD`]): answered when a datagram arrives or its timeout passes, or `Again` on the
//! retire notice ([`Server::give_back_held`]).

use crate::dev::NetDev;
use alloc::vec::Vec;
use netstate::txwatch::TxWatch;
use netstate::{Net, CONFIG_DHCP, DATA_MAX};
use smoltcp::iface::{Interface, PollIngressSingleResult, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::{dhcpv4, udp};
use smoltcp::time::Instant;
use smoltcp::wire::{IpAddress, IpCidr, Ipv4Address};
use ulib::abi::fnid::RETIRE_NOTICE;
use ulib::abi::ipc::{Msg, Received, SUBMIT_SEND};
use ulib::abi::net::{FN_DRV, FRAME_MAX, UDP_FRAMES_IN, UDP_FRAME_IN};
use ulib::abi::res::ResId;
use ulib::abi::{Error, Pid};
use ulib::net::{
    OP_BIND, OP_CLOSE, OP_COUNTERS, OP_EXCHANGE, OP_INFO, OP_RECV, OP_SEND, OP_SEND_RECV, OP_STEPS,
    SEND_FAILED,
};
use ulib::{fnid, ipc, println, res, sys};

mod exchange;
mod sockets;

/// Most receives held at once (each holds its caller's page mapped: the ICA window has 64
/// slots, shared with the transmit pages).
pub const MAX_HELD: usize = 24;
/// Datagrams smoltcp may hold for one socket between two drains, and queued to send.
const UDP_RX_PACKETS: usize = 4;
const UDP_TX_PACKETS: usize = 16;
/// Most egress passes at once: the datagrams a socket's transmit queue holds, and one for
/// the passes that find nothing new.
const EGRESS_PASSES: usize = UDP_TX_PACKETS + 1;
/// Requests taken without waiting before smoltcp is polled again.
const BATCH: usize = 32;
/// Rounds of requests (of at most [`BATCH`]) served before the serving line is printed
/// even if more wait.
const ANNOUNCE_ROUNDS: u32 = 4;
/// How often frames a restarting driver refused are offered again.
const RESEND_POLL_NS: u64 = 2_000_000;

/// A receive waiting for a datagram.
struct Held {
    request: u64,
    sender: Pid,
    port: u16,
    /// Clock time (ns) it ends at; `u64::MAX`: never.
    deadline: u64,
    cap: usize,
    /// 0: one datagram of at most `cap` bytes (`OP_RECV`, `OP_SEND_RECV`); else a batch of
    /// at most `max` (`OP_EXCHANGE`).
    max: usize,
    page: (ResId, u64),
}

/// A request's answer: its status, up to four words.
type Answer = Result<[u64; 4], Error>;

/// A UDP socket's smoltcp buffers (receive, transmit).
type UdpBuffers = (udp::PacketBuffer<'static>, udp::PacketBuffer<'static>);

/// Sockets' buffers made before a takeover (for the ports the old server bound), so that
/// nothing is allocated between the old server's end and this one's first request.
const SPARE_SOCKETS: usize = 4;
/// Most sockets one program may have bound at once (`Limit` beyond).
const SOCKETS_PER_PROGRAM: usize = netstate::SOCKETS as usize / 4;

/// Everything of a server that does not need its state: made before `FN_TAKEOVER`, while
/// the old server still serves, so that the service stops only for attaching the state
/// and opening the ports it lists ([`Server::new`]).
pub struct Prepared {
    iface: Interface,
    dev: NetDev,
    mac: [u8; 6],
    buf: Vec<u8>,
    spare: Vec<UdpBuffers>,
    /// The driver's process, looked up now (its first frame is not kept waiting for it).
    drv_pid: Option<Pid>,
}

impl Prepared {
    pub fn new(iface: Interface, dev: NetDev, mac: [u8; 6]) -> Prepared {
        Prepared {
            iface,
            dev,
            mac,
            buf: alloc::vec![0; DATA_MAX],
            spare: (0..SPARE_SOCKETS).map(|_| udp_buffers()).collect(),
            drv_pid: fnid::server_of(FN_DRV),
        }
    }
}

/// A socket's smoltcp buffers, allocated.
fn udp_buffers() -> UdpBuffers {
    (
        udp::PacketBuffer::new(
            alloc::vec![udp::PacketMetadata::EMPTY; UDP_RX_PACKETS],
            alloc::vec![0u8; UDP_RX_PACKETS * DATA_MAX],
        ),
        udp::PacketBuffer::new(
            alloc::vec![udp::PacketMetadata::EMPTY; UDP_TX_PACKETS],
            alloc::vec![0u8; UDP_TX_PACKETS * DATA_MAX],
        ),
    )
}

pub struct Server {
    pub ep: ResId,
    pub net: Net<'static>,
    pub iface: Interface,
    pub sockets: SocketSet<'static>,
    pub dev: NetDev,
    pub mac: [u8; 6],
    udp: Vec<(u16, SocketHandle)>,
    dhcp: Option<SocketHandle>,
    held: Vec<Held>,
    drv_pid: Option<Pid>,
    buf: Vec<u8>,
    /// Buffers made before the state was known ([`Prepared`]), taken by the first ports.
    spare: Vec<UdpBuffers>,
    /// P3 Table 3 (`OP_STEPS`): while timing, this process's CPU time from each return of
    /// its receive to the next receive (its steps: the request's, and the result steps
    /// inside it, which `dev.tx.result_ns` times apart).
    steps_on: bool,
    busy_ns: u64,
    /// When each socket's transmit queue last moved (a stuck one is given up).
    tx: TxWatch,
}

pub fn now() -> Instant {
    Instant::from_micros((sys::clock_ns().unwrap_or(0) / 1000) as i64)
}

fn ipv4(w: u32) -> Ipv4Address {
    Ipv4Address::from(w)
}

impl Server {
    pub fn new(ep: ResId, net: Net<'static>, prepared: Prepared, dhcp: bool) -> Server {
        let Prepared {
            iface,
            dev,
            mac,
            buf,
            spare,
            drv_pid,
        } = prepared;
        let mut s = Server {
            ep,
            net,
            iface,
            sockets: SocketSet::new(Vec::new()),
            dev,
            mac,
            udp: Vec::new(),
            dhcp: None,
            held: Vec::new(),
            drv_pid,
            buf,
            spare,
            steps_on: false,
            busy_ns: 0,
            tx: TxWatch::new(),
        };
        let h = s.net.header();
        if h.addr != 0 {
            s.configure(h.addr, h.prefix, h.gateway);
        }
        if dhcp {
            s.dhcp = Some(s.sockets.add(dhcpv4::Socket::new()));
        }
        // The ports bound under an earlier server get their smoltcp sockets again.
        let ports: Vec<u16> = s.net.bound().map(|(p, _)| p).collect();
        for p in ports {
            s.open_udp(p);
        }
        s
    }

    /// Give smoltcp the address config.
    pub fn configure(&mut self, addr: u32, prefix: u32, gateway: u32) {
        self.iface.update_ip_addrs(|a| {
            a.clear();
            if addr != 0 {
                let _ = a.push(IpCidr::new(IpAddress::Ipv4(ipv4(addr)), prefix as u8));
            }
        });
        // Only a unicast gateway (whatever DHCP or the state says): smoltcp asserts a
        // unicast neighbour, and a broadcast or multicast router in a DHCP answer from the
        // network ended `netd` at the next datagram routed through it (found by an audit).
        if netstate::is_unicast(gateway) {
            let _ = self
                .iface
                .routes_mut()
                .add_default_ipv4_route(ipv4(gateway));
        } else {
            self.iface.routes_mut().remove_default_ipv4_route();
        }
    }

    fn open_udp(&mut self, port: u16) {
        let (rx, tx) = self.spare.pop().unwrap_or_else(udp_buffers);
        let mut sock = udp::Socket::new(rx, tx);
        let _ = sock.bind(port);
        let h = self.sockets.add(sock);
        self.udp.push((port, h));
    }

    fn close_udp(&mut self, port: u16) {
        self.tx.forget(port);
        if let Some(i) = self.udp.iter().position(|(p, _)| *p == port) {
            let (_, h) = self.udp.swap_remove(i);
            self.sockets.remove(h);
        }
    }

    /// Serve forever. `announce`, the line saying it serves, is printed when the first
    /// receive would wait (or after [`ANNOUNCE_ROUNDS`] rounds), so that the requests queued
    /// while it took over are answered before the console is written.
    pub fn run(&mut self, announce: alloc::string::String) -> Result<(), alloc::string::String> {
        let mut announce = Some(announce);
        // While timing steps: this process's CPU time when its receive returned.
        let mut woke: Option<u64> = None;
        let mut announce_in = ANNOUNCE_ROUNDS;
        loop {
            self.pump();
            // The frames of what was served go to the driver before anything waits.
            self.dev.tx.flush();
            let timeout = self.timeout();
            if announce.is_some() {
                // Only once nothing waits (a takeover's moved requests are answered first:
                // the console is slow), or after a few rounds.
                announce_in = announce_in.saturating_sub(1);
                let queued = match announce_in {
                    0 => Err(Error::TimedOut),
                    _ => ipc::recv(self.ep, 0),
                };
                match queued {
                    Ok(r) => {
                        self.handle(&r);
                        continue;
                    }
                    Err(Error::TimedOut) => {
                        if let Some(line) = announce.take() {
                            println!("{line}");
                        }
                    }
                    Err(e) => return Err(alloc::format!("receive: {e}")),
                }
            }
            if let Some(t0) = woke.take() {
                if self.steps_on {
                    self.busy_ns += sys::cpu_time_ns().unwrap_or(t0).saturating_sub(t0);
                }
            }
            let r = ipc::recv(self.ep, timeout);
            if self.steps_on {
                woke = sys::cpu_time_ns().ok();
            }
            match r {
                Ok(r) => self.handle(&r),
                Err(Error::TimedOut) => continue,
                Err(e) => return Err(alloc::format!("receive: {e}")),
            }
            for _ in 1..BATCH {
                // A frame taken in is this process's alone until smoltcp has put its
                // datagram into the state, and the next receive may retire this server
                // (regression: a frame answered and not yet polled was lost with it).
                if self.dev.rx_pending() {
                    self.ingest();
                }
                // One batch to the driver per request served.
                self.dev.tx.flush();
                match ipc::recv(self.ep, 0) {
                    Ok(r) => self.handle(&r),
                    Err(_) => break,
                }
            }
        }
    }

    /// How long the next receive may wait: until smoltcp wants polling or a held receive
    /// times out.
    fn timeout(&mut self) -> u64 {
        if self.dev.rx_pending() {
            return 0;
        }
        let now_ns = sys::clock_ns().unwrap_or(0);
        let mut t = match self.iface.poll_delay(now(), &self.sockets) {
            Some(d) => d.total_micros().saturating_mul(1000),
            None => u64::MAX,
        };
        for h in &self.held {
            t = t.min(h.deadline.saturating_sub(now_ns));
        }
        // The driver's replies give the transmit pages back; look at them now and then.
        if self.dev.tx.in_flight() > 0 {
            t = t.min(1_000_000);
        }
        // A transmit queue standing still is given up then.
        if let Some(at) = self.tx.next_deadline() {
            t = t.min(at.saturating_sub(now_ns));
        }
        // Frames a restarting driver refused: try the next one soon.
        if self.dev.tx.refused() > 0 {
            t = t.min(RESEND_POLL_NS);
        }
        t
    }

    /// Poll smoltcp, move received datagrams into the state, answer the held receives.
    fn pump(&mut self) {
        let t = now();
        self.iface.poll_maintenance(t);
        self.ingest_at(t);
        self.egress(t);
        self.watch_queues();
        self.dev.tx.reap(0);
        self.dev.tx.resend();
        self.poll_dhcp();
        self.drain();
        self.answer_held();
        self.count_frames();
    }

    /// Everything smoltcp has to send, out as frames (into the open batch, [`dev::Tx`]):
    /// one egress pass sends at most one datagram of each socket, so passes are made until
    /// one sends nothing (at most [`EGRESS_PASSES`]).
    fn egress(&mut self, t: Instant) {
        for _ in 0..EGRESS_PASSES {
            if self.iface.poll_egress(t, &mut self.dev, &mut self.sockets) == PollResult::None {
                break;
            }
        }
    }

    /// Look at every socket's transmit queue; one that held datagrams and stood still for
    /// `txwatch::STALL_NS` (its next hop never answered ARP) is given up: its datagrams are
    /// dropped (one drop counted), its socket made anew on the same port; one at a time
    /// (`netstate::txwatch`).
    fn watch_queues(&mut self) {
        let now_ns = sys::clock_ns().unwrap_or(0);
        for &(port, h) in &self.udp {
            let queued = self.sockets.get::<udp::Socket>(h).send_queue();
            self.tx.polled(port, queued, now_ns);
        }
        if let Some(port) = self.tx.stalled(now_ns) {
            // What it received goes into the state first.
            self.drain();
            self.close_udp(port);
            self.open_udp(port);
            self.net.count(|c| c.drops += 1);
            self.tx.restart(now_ns);
        }
    }

    /// The frames taken in go through smoltcp, their datagrams into the state (with the
    /// counters): afterwards nothing received is in this process alone.
    fn ingest(&mut self) {
        self.ingest_at(now());
        self.count_frames();
    }

    fn ingest_at(&mut self, t: Instant) {
        loop {
            match self
                .iface
                .poll_ingress_single(t, &mut self.dev, &mut self.sockets)
            {
                PollIngressSingleResult::None => break,
                _ => self.drain(),
            }
        }
    }

    /// The device's counts since the last call, added to the state's counters.
    fn count_frames(&mut self) {
        let c = core::mem::take(&mut self.dev.tx.counts);
        if c.frames_in | c.frames_out | c.drops | c.errors != 0 {
            self.net.count(|n| {
                n.frames_in += c.frames_in;
                n.frames_out += c.frames_out;
                n.drops += c.drops;
                n.errors += c.errors;
            });
        }
    }

    fn poll_dhcp(&mut self) {
        let Some(h) = self.dhcp else { return };
        let ev = match self.sockets.get_mut::<dhcpv4::Socket>(h).poll() {
            // A router that is not unicast (any host on the network may answer DHCP) is
            // no gateway: neither routed through nor kept in the state, which every later
            // `netd` would refuse (a review found the state kept it).
            Some(dhcpv4::Event::Configured(c)) => Some((
                u32::from(c.address.address()),
                u32::from(c.address.prefix_len()),
                c.router
                    .map(u32::from)
                    .filter(|&g| netstate::is_unicast(g))
                    .unwrap_or(0),
            )),
            Some(dhcpv4::Event::Deconfigured) => Some((0, 0, 0)),
            None => None,
        };
        if let Some((addr, prefix, gw)) = ev {
            self.configure(addr, prefix, gw);
            self.net.set_config(addr, prefix, gw, CONFIG_DHCP);
            let [a, b, c, d] = addr.to_be_bytes();
            println!(
                "netd: address {a}.{b}.{c}.{d}/{prefix} gateway {} (DHCP)",
                ipv4(gw)
            );
        }
    }

    /// Move every datagram smoltcp holds into the sockets' queues in the state.
    fn drain(&mut self) {
        for &(port, h) in &self.udp {
            let sock = self.sockets.get_mut::<udp::Socket>(h);
            while let Ok((n, meta)) = sock.recv_slice(&mut self.buf) {
                let IpAddress::Ipv4(a) = meta.endpoint.addr;
                // A full queue drops it and counts it (netstate does both).
                let _ = self
                    .net
                    .push(port, u32::from(a), meta.endpoint.port, &self.buf[..n]);
            }
        }
    }

    /// Answer the held receives that have a datagram or whose time is up.
    fn answer_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let now_ns = sys::clock_ns().unwrap_or(0);
        let mut i = 0;
        while i < self.held.len() {
            let h = &self.held[i];
            if self.net.pending(h.port) > 0 {
                let h = self.held.remove(i);
                let a = self.take(h.port, h.cap, h.max, h.page.1);
                answer(h.request, a, Some(h.page));
            } else if h.deadline <= now_ns {
                let h = self.held.remove(i);
                answer(h.request, Err(Error::TimedOut), Some(h.page));
            } else {
                i += 1;
            }
        }
    }

    /// Answer `Gone` (and so give back the page of) every held receive whose program is
    /// not among `alive`.
    fn drop_held_of_ended(&mut self, alive: &[u64]) {
        self.held.retain(|h| {
            let keep = alive.contains(&h.sender.0);
            if !keep {
                answer(h.request, Err(Error::Gone), Some(h.page));
            }
            keep
        });
    }

    /// The retire notice: every held receive is answered `Again` (its caller's library
    /// sends it again, to the new server), after everything smoltcp holds is in the state.
    pub fn give_back_held(&mut self) {
        self.pump();
        for h in core::mem::take(&mut self.held) {
            answer(h.request, Err(Error::Again), Some(h.page));
        }
        // The next receive retires this server: frames a restarting driver refused are
        // handed to the next one first (its transmit pages go with it, closed by the
        // kernel). Frames smoltcp still has to send are lost with it (the new server has
        // the datagrams received; a datagram accepted for sending was answered already).
        self.dev.tx.retire();
    }

    /// Is `pid` the process serving `net.drv`?
    fn sent_by_driver(&mut self, pid: Pid) -> bool {
        if self.drv_pid == Some(pid) {
            return true;
        }
        self.drv_pid = fnid::server_of(FN_DRV);
        self.drv_pid == Some(pid)
    }

    fn handle(&mut self, r: &Received) {
        // A page mapped read-only (its sender's mapping was, or it lent it so) serves what
        // only reads it (a send, a frame in); a receive writes the datagram into it.
        let label = ipc::label(&r.msg);
        let page = ipc::ica_at(&r.msg);
        // Only the kernel (sender 0) gives the notice: a program's forged one would make
        // this server answer every held receive `Again` (found by a review).
        if r.msg.label == RETIRE_NOTICE && r.request == 0 && r.sender.0 == 0 {
            self.give_back_held();
            return;
        }
        if r.kind == SUBMIT_SEND || r.request == 0 {
            // One-way: nothing to answer; an ICA goes back to its creator.
            ipc::let_go(&r.msg);
            self.net.count(|c| c.errors += 1);
            return;
        }
        // The answers of six words carry no page: a page sent with such a request goes
        // back with a refusal (else it stayed mapped here for good, and 64 of them left no
        // room for any frame or datagram: found by a review).
        if page.is_some() && matches!(label, OP_INFO | OP_STEPS | OP_COUNTERS) {
            self.net.count(|c| c.errors += 1);
            answer(r.request, Err(Error::InvalidArgument), page);
            return;
        }
        let a = match label {
            UDP_FRAME_IN => self.frame_in(r, page),
            UDP_FRAMES_IN => self.frames_in(r, page),
            OP_BIND => self.bind(r),
            OP_CLOSE => self.close(r),
            OP_SEND => {
                let [port, addr, dport, len, ..] = r.msg.words;
                self.send(r.sender, page, [port, addr, dport, len])
            }
            OP_RECV => {
                let [port, timeout, cap, ..] = r.msg.words;
                match self.recv(r, page, [port, timeout, cap], 0) {
                    Some(a) => a,
                    None => return, // held
                }
            }
            OP_EXCHANGE => {
                let (port, count, used, max) = ulib::net::unpack_send_recv(r.msg.words[0]);
                let timeout = r.msg.words[1];
                // The page takes the datagrams received: one lent read-only is refused
                // before anything is sent.
                let sent = match page {
                    Some((_, at)) if !ipc::ica_read_only(&r.msg) => {
                        self.send_batch(r.sender, at, [port, count, used])
                    }
                    _ => Err((Error::InvalidArgument, 0)),
                };
                if let Err((e, n)) = sent {
                    self.net.count(|c| c.errors += 1);
                    answer_send_failed(r.request, e, n as u64, page);
                    return;
                }
                if max == 0 {
                    // Only a send.
                    answer(r.request, Ok([0; 4]), page);
                    return;
                }
                match self.recv(r, page, [port, timeout, DATA_MAX as u64], max as usize) {
                    Some(a) => a,
                    None => return, // held
                }
            }
            OP_SEND_RECV => {
                let (port, dport, len, cap) = ulib::net::unpack_send_recv(r.msg.words[0]);
                let [_, addr, timeout, ..] = r.msg.words;
                // The page takes the answer's datagram: one lent read-only is refused before
                // anything is sent.
                let sent = match page {
                    Some(_) if !ipc::ica_read_only(&r.msg) => {
                        self.send(r.sender, page, [port, addr, dport, len])
                    }
                    _ => Err(Error::InvalidArgument),
                };
                if let Err(e) = sent {
                    self.net.count(|c| c.errors += 1);
                    answer_send_failed(r.request, e, 0, page);
                    return;
                }
                match self.recv(r, page, [port, timeout, cap], 0) {
                    Some(a) => a,
                    None => return, // held
                }
            }
            OP_INFO => {
                let h = self.net.header();
                let mut mac = [0u8; 8];
                mac[..6].copy_from_slice(&self.mac);
                let w = [
                    u64::from(h.addr),
                    u64::from(h.prefix),
                    u64::from(h.gateway),
                    u64::from(h.config),
                    self.net.bound().count() as u64,
                    u64::from_le_bytes(mac),
                ];
                return answer6(r.request, w);
            }
            OP_STEPS => {
                // 1: start timing (from zero); else: what was timed, and stop.
                let start = r.msg.words[0] == 1;
                let w = [
                    self.busy_ns.saturating_sub(self.dev.tx.result_ns),
                    self.dev.tx.result_ns,
                    self.busy_ns,
                    0,
                    0,
                    0,
                ];
                self.steps_on = start;
                self.dev.tx.timing = start;
                if start {
                    self.busy_ns = 0;
                    self.dev.tx.result_ns = 0;
                }
                return answer6(r.request, w);
            }
            OP_COUNTERS => {
                let c = self.net.counters();
                let w = [
                    c.frames_in,
                    c.frames_out,
                    c.datagrams_in,
                    c.datagrams_out,
                    c.drops,
                    c.errors,
                ];
                return answer6(r.request, w);
            }
            _ => Err(Error::InvalidArgument),
        };
        if a.is_err() {
            self.net.count(|c| c.errors += 1);
        }
        answer(r.request, a, page);
    }

    fn frame_in(&mut self, r: &Received, page: Option<(ResId, u64)>) -> Answer {
        if !self.sent_by_driver(r.sender) {
            return Err(Error::Denied);
        }
        let (_, at) = page.ok_or(Error::InvalidArgument)?;
        let len = r.msg.words[0] as usize;
        if len > FRAME_MAX {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: the driver's frame ICA (FRAME_ICA_SIZE >= FRAME_MAX bytes) is mapped at
        // `at` in this process until the answer passes it back.
        let frame = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
        self.dev.frame_in(frame);
        Ok([0; 4])
    }
}

/// The pids (raw) of processes that have not ended, or `None` when the kernel's list
/// cannot be trusted to hold them all (`sys::live_pids`).
pub fn alive_pids() -> Option<Vec<u64>> {
    sys::live_pids().map(|l| l.iter().map(|p| p.0).collect())
}

/// Answer `request` with `a`, passing `page` back if it came with one. If the answer cannot
/// be given with the page, the page is let go (it goes back to its creator).
fn answer(request: u64, a: Answer, page: Option<(ResId, u64)>) {
    let msg = match a {
        Ok(w) => Msg {
            label: 0,
            words: [w[0], w[1], w[2], w[3], 0, 0],
        },
        Err(e) => Msg {
            label: e as u64,
            ..Msg::default()
        },
    };
    reply_with(request, msg, page);
}

/// Answer an `OP_SEND_RECV` or `OP_EXCHANGE` whose send failed with `e` (word 0
/// [`SEND_FAILED`]: nothing was received; word 1: the records of the batch taken before
/// the one that failed), passing its page back.
fn answer_send_failed(request: u64, e: Error, sent: u64, page: Option<(ResId, u64)>) {
    let msg = Msg {
        label: e as u64,
        words: [SEND_FAILED, sent, 0, 0, 0, 0],
    };
    reply_with(request, msg, page);
}

/// Reply `msg` to `request`, with `page` if it came with one; a page the reply cannot take
/// back is let go (it goes back to its creator).
fn reply_with(request: u64, mut msg: Msg, page: Option<(ResId, u64)>) {
    if let Some((region, at)) = page {
        msg = ipc::with_ica(msg, region);
        if ipc::reply(request, 0, &msg).is_err() {
            let _ = res::detach_here(at);
        }
    } else {
        let _ = ipc::reply(request, 0, &msg);
    }
}

fn answer6(request: u64, words: [u64; 6]) {
    let _ = ipc::reply(request, 0, &Msg { label: 0, words });
}
