//! A host-side UDP relay that is the guest's whole network, so real host programs reach
//! Musubi on loopback only (issue 15).
//!
//! Why it exists: QEMU's user network with `restrict=on` (the project's rule: no guest packet
//! may leave for another address) drops every UDP datagram from the guest except DHCP/TFTP
//! (libslirp `udp_input`: `if (slirp->restricted) goto bad;` before the socket lookup), so
//! answers to a `hostfwd` UDP port never reach the host. Instead QEMU's `-netdev dgram`
//! carries each Ethernet frame as one UDP datagram between QEMU (127.0.0.1:Q) and this relay
//! (127.0.0.1:R), and the relay plays the gateway 10.0.2.2:
//!
//! - it answers ARP for 10.0.2.2 and the guest's DHCP DISCOVER/REQUEST (10.0.2.15/24, router
//!   10.0.2.2), so `netd`'s DHCP client works as on the user network;
//! - a host program sending to 127.0.0.1:H (one host-facing socket per forwarded guest port
//!   G) reaches the guest's port G from 10.0.2.2:P, P a port the relay gives that host
//!   client; the guest's datagrams to 10.0.2.2:P go back to that client, from 127.0.0.1:H;
//! - every other frame (other addresses, ICMP, TCP, IPv6, fragments, unknown ports) is
//!   counted and dropped: nothing ever leaves for another address, and the relay itself
//!   binds only 127.0.0.1.
//!
//! It counts frames and datagrams both ways ([`RelayCount`]), so a test tells loss in the
//! relay or QEMU from loss inside Musubi. Parsing and emitting are hand-written (Ethernet,
//! ARP, IPv4, UDP, a DHCP reply) with checksums: small, and no new crate in xtask.

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The gateway's address and MAC (as QEMU's user network has them).
pub const GATEWAY: [u8; 4] = [10, 0, 2, 2];
const GATEWAY_MAC: [u8; 6] = [0x52, 0x55, 10, 0, 2, 2];
/// The address the relay's DHCP gives the guest.
pub const GUEST_ADDR: [u8; 4] = [10, 0, 2, 15];
const NETMASK: [u8; 4] = [255, 255, 255, 0];
const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// First port the relay gives a host client on 10.0.2.2.
const FIRST_CLIENT_PORT: u16 = 49152;
/// Largest UDP payload in one unfragmented frame (1,500-byte MTU).
const PAYLOAD_MAX: usize = 1472;
/// How often the relay's threads look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// What the relay counted (frames from and to QEMU, datagrams forwarded, drops).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RelayCount {
    /// Ethernet frames QEMU sent to the relay (the guest's).
    pub frames_from_guest: u64,
    /// Ethernet frames the relay sent to QEMU (for the guest).
    pub frames_to_guest: u64,
    /// Host datagrams forwarded to the guest.
    pub to_guest: u64,
    /// Guest datagrams forwarded to a host client.
    pub to_host: u64,
    /// ARP and DHCP answers given.
    pub answered: u64,
    /// Guest frames dropped (other addresses or protocols, unknown ports, bad frames).
    pub dropped_from_guest: u64,
    /// Host datagrams dropped (too big, or the guest's MAC not yet known).
    pub dropped_from_host: u64,
}

#[derive(Default)]
struct Counters {
    frames_from_guest: AtomicU64,
    frames_to_guest: AtomicU64,
    to_guest: AtomicU64,
    to_host: AtomicU64,
    answered: AtomicU64,
    dropped_from_guest: AtomicU64,
    dropped_from_host: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Host clients and their ports on 10.0.2.2.
#[derive(Default)]
struct Clients {
    guest_mac: Option<[u8; 6]>,
    by_addr: HashMap<SocketAddr, u16>,
    by_port: HashMap<u16, SocketAddr>,
    next: u16,
}

/// The MAC of every relay guest's device ([`crate::qemu::NetCfg::TEST_MAC`]).
fn guest_mac() -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (b, part) in mac.iter_mut().zip(crate::qemu::NetCfg::TEST_MAC.split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap_or(0);
    }
    mac
}

impl Clients {
    fn port_of(&mut self, client: SocketAddr) -> u16 {
        if let Some(p) = self.by_addr.get(&client) {
            return *p;
        }
        if self.next < FIRST_CLIENT_PORT {
            self.next = FIRST_CLIENT_PORT;
        }
        let p = self.next;
        self.next = self.next.checked_add(1).unwrap_or(FIRST_CLIENT_PORT);
        if let Some(old) = self.by_port.insert(p, client) {
            self.by_addr.remove(&old);
        }
        self.by_addr.insert(client, p);
        p
    }
}

struct Shared {
    /// The relay's socket at 127.0.0.1:R (QEMU's remote end).
    qemu: UdpSocket,
    /// QEMU's end, 127.0.0.1:Q.
    qemu_addr: SocketAddr,
    /// (guest port, host-facing socket).
    hosts: Vec<(u16, UdpSocket)>,
    clients: Mutex<Clients>,
    count: Counters,
    stop: AtomicBool,
}

/// A running relay; dropping it stops its threads.
pub struct Relay {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// (host port on 127.0.0.1, guest port).
    forwards: Vec<(u16, u16)>,
}

impl Relay {
    /// Start a relay forwarding each (host port, guest port) of `forwards` (host port 0: a
    /// free one, see [`Self::forwards`]). QEMU's end is a free port on 127.0.0.1.
    pub fn start(forwards: &[(u16, u16)]) -> Result<Relay> {
        let qemu = UdpSocket::bind("127.0.0.1:0").context("relay: binding its QEMU socket")?;
        qemu.set_read_timeout(Some(POLL))?;
        let qemu_addr: SocketAddr =
            ("127.0.0.1:".to_string() + &crate::net_test::free_udp_port()?.to_string()).parse()?;
        let mut hosts = Vec::new();
        let mut bound = Vec::new();
        for &(host, guest) in forwards {
            let s = UdpSocket::bind(("127.0.0.1", host))
                .with_context(|| format!("relay: binding 127.0.0.1:{host}"))?;
            s.set_read_timeout(Some(POLL))?;
            bound.push((s.local_addr()?.port(), guest));
            hosts.push((guest, s));
        }
        let shared = Arc::new(Shared {
            qemu,
            qemu_addr,
            hosts,
            // Every relay guest has the device MAC `NetCfg::relay` gives it; a guest with a
            // static address (the Linux peer) sends nothing before the first host datagram,
            // so the relay cannot wait to learn it (DHCP and the guest's frames still update it).
            clients: Mutex::new(Clients {
                guest_mac: Some(guest_mac()),
                ..Clients::default()
            }),
            count: Counters::default(),
            stop: AtomicBool::new(false),
        });
        let mut threads = Vec::new();
        let s = shared.clone();
        threads.push(std::thread::spawn(move || from_guest_loop(&s)));
        for i in 0..shared.hosts.len() {
            let s = shared.clone();
            threads.push(std::thread::spawn(move || from_host_loop(&s, i)));
        }
        Ok(Relay {
            shared,
            threads,
            forwards: bound,
        })
    }

    /// The forwarded ports: (host port on 127.0.0.1, guest port).
    pub fn forwards(&self) -> &[(u16, u16)] {
        &self.forwards
    }

    /// QEMU's `-netdev dgram` ports: (QEMU's local port Q, the relay's port R).
    pub fn ports(&self) -> (u16, u16) {
        let r = self.shared.qemu.local_addr().map(|a| a.port()).unwrap_or(0);
        (self.shared.qemu_addr.port(), r)
    }

    /// A snapshot of the counters.
    pub fn count(&self) -> RelayCount {
        let c = &self.shared.count;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RelayCount {
            frames_from_guest: l(&c.frames_from_guest),
            frames_to_guest: l(&c.frames_to_guest),
            to_guest: l(&c.to_guest),
            to_host: l(&c.to_host),
            answered: l(&c.answered),
            dropped_from_guest: l(&c.dropped_from_guest),
            dropped_from_host: l(&c.dropped_from_host),
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn send_frame(s: &Shared, frame: &[u8]) {
    // QEMU may not have bound its port yet (early frames): a lost frame, never an error.
    if s.qemu.send_to(frame, s.qemu_addr).is_ok() {
        bump(&s.count.frames_to_guest);
    }
}

fn from_guest_loop(s: &Shared) {
    let mut buf = vec![0u8; 65536];
    while !s.stop.load(Ordering::Relaxed) {
        let (n, from) = match s.qemu.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        if from != s.qemu_addr {
            // Only QEMU may speak on this port.
            continue;
        }
        bump(&s.count.frames_from_guest);
        match guest_frame(s, &buf[..n]) {
            Some(Reply::Frame(f)) => {
                bump(&s.count.answered);
                send_frame(s, &f);
            }
            Some(Reply::Forwarded) => bump(&s.count.to_host),
            None => bump(&s.count.dropped_from_guest),
        }
    }
}

fn from_host_loop(s: &Shared, i: usize) {
    let (guest_port, sock) = &s.hosts[i];
    let mut buf = vec![0u8; 65536];
    while !s.stop.load(Ordering::Relaxed) {
        let (n, client) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        let (mac, port) = {
            let mut c = s.clients.lock().unwrap_or_else(|p| p.into_inner());
            (c.guest_mac, c.port_of(client))
        };
        let Some(mac) = mac.filter(|_| n <= PAYLOAD_MAX) else {
            bump(&s.count.dropped_from_host);
            continue;
        };
        let f = udp_frame(mac, GUEST_ADDR, port, *guest_port, &buf[..n]);
        bump(&s.count.to_guest);
        send_frame(s, &f);
    }
}

enum Reply {
    /// An answer (ARP, DHCP) to send to the guest.
    Frame(Vec<u8>),
    /// A datagram passed to a host client.
    Forwarded,
}

/// Handle one frame from the guest; `None`: dropped.
fn guest_frame(s: &Shared, f: &[u8]) -> Option<Reply> {
    if f.len() < 14 {
        return None;
    }
    let src_mac: [u8; 6] = f[6..12].try_into().ok()?;
    let body = &f[14..];
    match u16::from_be_bytes([f[12], f[13]]) {
        0x0806 => arp(src_mac, body).map(Reply::Frame),
        0x0800 => {
            let Udp {
                src,
                dst,
                sport,
                dport,
                data,
            } = parse_udp(body)?;
            if dport == 67 && sport == 68 {
                return dhcp(s, src_mac, data).map(Reply::Frame);
            }
            if src != GUEST_ADDR || dst != GATEWAY {
                return None;
            }
            let client = {
                let mut c = s.clients.lock().unwrap_or_else(|p| p.into_inner());
                c.guest_mac = Some(src_mac);
                *c.by_port.get(&dport)?
            };
            let (_, sock) = s.hosts.iter().find(|(g, _)| *g == sport)?;
            sock.send_to(data, client).ok()?;
            Some(Reply::Forwarded)
        }
        _ => None,
    }
}

/// An ARP request for the gateway: the reply frame.
fn arp(src_mac: [u8; 6], a: &[u8]) -> Option<Vec<u8>> {
    if a.len() < 28 || a[0..8] != [0, 1, 8, 0, 6, 4, 0, 1] || a[24..28] != GATEWAY {
        return None;
    }
    let mut f = eth(src_mac, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&GATEWAY_MAC);
    f.extend_from_slice(&GATEWAY);
    f.extend_from_slice(&a[8..18]); // the asker's MAC and address
    Some(f)
}

/// A DHCP DISCOVER or REQUEST: the OFFER or ACK (10.0.2.15/24, router 10.0.2.2), broadcast.
fn dhcp(s: &Shared, src_mac: [u8; 6], d: &[u8]) -> Option<Vec<u8>> {
    if d.len() < 240 || d[0] != 1 || d[236..240] != [99, 130, 83, 99] {
        return None;
    }
    let mut kind = None;
    let mut o = &d[240..];
    while let [code, rest @ ..] = o {
        match *code {
            0 => o = rest,
            255 => break,
            _ => {
                let (len, rest) = rest.split_first()?;
                let val = rest.get(..usize::from(*len))?;
                if *code == 53 {
                    kind = val.first().copied();
                }
                o = &rest[usize::from(*len)..];
            }
        }
    }
    let answer = match kind? {
        1 => 2, // DISCOVER -> OFFER
        3 => 5, // REQUEST -> ACK
        _ => return None,
    };
    s.clients
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .guest_mac = Some(src_mac);
    let mut r = vec![0u8; 240];
    r[0] = 2;
    r[1] = 1;
    r[2] = 6;
    r[4..8].copy_from_slice(&d[4..8]); // xid
    r[10..12].copy_from_slice(&d[10..12]); // flags
    r[16..20].copy_from_slice(&GUEST_ADDR);
    r[20..24].copy_from_slice(&GATEWAY);
    r[28..44].copy_from_slice(&d[28..44]); // chaddr
    r[236..240].copy_from_slice(&[99, 130, 83, 99]);
    r.extend_from_slice(&[53, 1, answer]);
    r.extend_from_slice(&[54, 4]);
    r.extend_from_slice(&GATEWAY);
    r.extend_from_slice(&[51, 4, 0, 1, 0x51, 0x80]); // lease: one day
    r.extend_from_slice(&[1, 4]);
    r.extend_from_slice(&NETMASK);
    r.extend_from_slice(&[3, 4]);
    r.extend_from_slice(&GATEWAY);
    r.push(255);
    let mut f = udp_frame_from(BROADCAST_MAC, GATEWAY, [255; 4], 67, 68, &r);
    // Ethernet to the broadcast address; IPv4 to 255.255.255.255 (the guest has none yet).
    f[0..6].copy_from_slice(&BROADCAST_MAC);
    Some(f)
}

/// An IPv4 UDP datagram in a frame.
#[derive(Debug, PartialEq, Eq)]
struct Udp<'a> {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    data: &'a [u8],
}

/// IPv4 + UDP, checksums checked; `None` for anything else.
fn parse_udp(p: &[u8]) -> Option<Udp<'_>> {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(p[0] & 0xf) * 4;
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    // A fragment (more-fragments or an offset), not UDP, or a bad header: dropped.
    let frag = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
    if ihl < 20 || total < ihl + 8 || total > p.len() || frag != 0 || p[9] != 17 {
        return None;
    }
    if checksum(&[&p[..ihl]]) != 0 {
        return None;
    }
    let src: [u8; 4] = p[12..16].try_into().ok()?;
    let dst: [u8; 4] = p[16..20].try_into().ok()?;
    let u = &p[ihl..total];
    let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
    if ulen < 8 || ulen > u.len() {
        return None;
    }
    let u = &u[..ulen];
    if u16::from_be_bytes([u[6], u[7]]) != 0 && checksum(&[&pseudo(src, dst, ulen), u]) != 0 {
        return None;
    }
    let sport = u16::from_be_bytes([u[0], u[1]]);
    let dport = u16::from_be_bytes([u[2], u[3]]);
    Some(Udp {
        src,
        dst,
        sport,
        dport,
        data: &u[8..],
    })
}

fn eth(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 20 + 8 + PAYLOAD_MAX);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&GATEWAY_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// A UDP datagram from 10.0.2.2:`sport` to `dst`:`dport` in a frame to `mac`.
fn udp_frame(mac: [u8; 6], dst: [u8; 4], sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    udp_frame_from(mac, GATEWAY, dst, sport, dport, data)
}

fn udp_frame_from(
    mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    data: &[u8],
) -> Vec<u8> {
    let ulen = 8 + data.len();
    let total = 20 + ulen;
    let mut f = eth(mac, 0x0800);
    let ip = f.len();
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]); // id 0, DF, TTL 64, UDP
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let c = checksum(&[&f[ip..ip + 20]]);
    f[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    let u = f.len();
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(ulen as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(data);
    let mut c = checksum(&[&pseudo(src, dst, ulen), &f[u..]]);
    if c == 0 {
        c = 0xffff;
    }
    f[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    f
}

fn pseudo(src: [u8; 4], dst: [u8; 4], ulen: usize) -> [u8; 12] {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&src);
    p[4..8].copy_from_slice(&dst);
    p[9] = 17;
    p[10..12].copy_from_slice(&(ulen as u16).to_be_bytes());
    p
}

/// The Internet checksum over the concatenation of `parts` (each of even length but the
/// last).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for part in parts {
        let mut c = part.chunks_exact(2);
        for w in &mut c {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [b] = c.remainder() {
            sum += u32::from(*b) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_frames_round_trip_with_checksums() {
        let f = udp_frame([2; 6], GUEST_ADDR, 49152, 7, b"hello!!");
        assert_eq!(
            parse_udp(&f[14..]),
            Some(Udp {
                src: GATEWAY,
                dst: GUEST_ADDR,
                sport: 49152,
                dport: 7,
                data: b"hello!!",
            })
        );
        let mut bad = f.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(
            parse_udp(&bad[14..]).is_none(),
            "a bad UDP checksum is dropped"
        );
        // An odd length and a fragment.
        let odd = udp_frame([2; 6], GUEST_ADDR, 1, 2, b"abc");
        assert!(parse_udp(&odd[14..]).is_some());
        let mut frag = odd.clone();
        frag[14 + 6] |= 0x20;
        assert!(parse_udp(&frag[14..]).is_none());
        assert!(parse_udp(&f[14..30]).is_none(), "truncated");
    }

    #[test]
    fn arp_answers_only_for_the_gateway() {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
        a.extend_from_slice(&[2; 6]);
        a.extend_from_slice(&GUEST_ADDR);
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&GATEWAY);
        let r = arp([2; 6], &a).expect("answered");
        assert_eq!(&r[0..6], &[2; 6]);
        assert_eq!(&r[14 + 6..14 + 8], &[0, 2]);
        assert_eq!(&r[14 + 8..14 + 14], &GATEWAY_MAC);
        assert_eq!(&r[14 + 24..14 + 28], &GUEST_ADDR);
        a[24..28].copy_from_slice(&[10, 0, 2, 3]);
        assert!(arp([2; 6], &a).is_none(), "no answer for another address");
    }

    #[test]
    fn clients_get_stable_ports() {
        assert_eq!(guest_mac(), [0x52, 0x54, 0, 0x12, 0x34, 0x56]);
        let mut c = Clients::default();
        let a: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let pa = c.port_of(a);
        assert_eq!(c.port_of(b), pa + 1);
        assert_eq!(c.port_of(a), pa);
        assert_eq!(c.by_port[&pa], a);
    }
}
