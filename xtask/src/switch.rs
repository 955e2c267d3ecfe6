//! A small Ethernet switch in xtask on 127.0.0.1, joining three or four QEMUs (issue 17).
//!
//! Why it exists: QEMU's unicast `-netdev dgram` joins exactly two guests (each names the
//! other's port), and its multicast form sends to a 230.x address that is not loopback,
//! which the project's rule forbids (docs/design.md, "Devices"). So each machine's QEMU
//! sends its frames as UDP datagrams to its own *switch port* (a socket on 127.0.0.1), and
//! the switch forwards each frame as a learning bridge does: to the port where its
//! destination MAC was last seen as a source, or, for a broadcast or a MAC not seen yet, to
//! every other port. Nothing is sent anywhere but the QEMUs' own ports on 127.0.0.1.
//!
//! Bounded: one thread per port; each blocks at most [`POLL`] in `recv_from` before it looks
//! at the stop flag, and one received frame makes at most `ports - 1` sends (two with a
//! duplicate). Frames are not queued in the switch.
//!
//! Faults on purpose ([`Faults`]): a seeded share of frames dropped and a seeded share sent
//! twice, per port, so a test can prove that `libs/mrpc` performs each request exactly once
//! on a lossy, duplicating network. The counts are kept ([`SwitchCount`]).

use anyhow::{Context, Result};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a port's thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// Largest frame QEMU sends over `dgram` (a 1,500-byte MTU frame is 1,514 bytes).
const FRAME_MAX: usize = 65536;

/// Frames dropped and duplicated on purpose, in percent of forwarded frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub drop_pct: u64,
    pub dup_pct: u64,
    pub seed: u64,
}

/// What the switch counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCount {
    /// Frames received from the QEMUs.
    pub frames_in: u64,
    /// Frames sent to the QEMUs (duplicates included).
    pub frames_out: u64,
    /// Frames dropped on purpose.
    pub dropped: u64,
    /// Frames sent twice on purpose.
    pub duplicated: u64,
}

struct Port {
    /// The switch's socket for this machine (QEMU's `remote`).
    sock: UdpSocket,
    /// QEMU's own socket (its `local`).
    qemu: SocketAddr,
}

struct Shared {
    ports: Vec<Port>,
    /// MAC -> port, learnt from source addresses.
    table: Mutex<Vec<([u8; 6], usize)>>,
    faults: Faults,
    stop: AtomicBool,
    frames_in: AtomicU64,
    frames_out: AtomicU64,
    dropped: AtomicU64,
    duplicated: AtomicU64,
}

/// A running switch; stopped (threads joined) when dropped.
pub struct Switch {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Switch {
    /// A switch with `n` ports on 127.0.0.1.
    pub fn start(n: usize, faults: Faults) -> Result<Switch> {
        let mut ports = Vec::new();
        for _ in 0..n {
            let sock = UdpSocket::bind("127.0.0.1:0").context("switch: binding a port")?;
            sock.set_read_timeout(Some(POLL))?;
            let qemu: SocketAddr = format!("127.0.0.1:{}", crate::net_test::free_udp_port()?)
                .parse()
                .context("switch: QEMU's address")?;
            ports.push(Port { sock, qemu });
        }
        let shared = Arc::new(Shared {
            ports,
            table: Mutex::new(Vec::new()),
            faults,
            stop: AtomicBool::new(false),
            frames_in: AtomicU64::new(0),
            frames_out: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            duplicated: AtomicU64::new(0),
        });
        let threads = (0..n)
            .map(|i| {
                let s = shared.clone();
                std::thread::spawn(move || port_loop(&s, i))
            })
            .collect();
        Ok(Switch { shared, threads })
    }

    /// Port `i`'s two ends: (QEMU's local port, the switch's port).
    pub fn ports(&self, i: usize) -> (u16, u16) {
        let p = &self.shared.ports[i];
        (
            p.qemu.port(),
            p.sock.local_addr().map(|a| a.port()).unwrap_or(0),
        )
    }

    pub fn count(&self) -> SwitchCount {
        let s = &self.shared;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SwitchCount {
            frames_in: l(&s.frames_in),
            frames_out: l(&s.frames_out),
            dropped: l(&s.dropped),
            duplicated: l(&s.duplicated),
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Where a frame from port `from` with destination `dst` goes.
fn destinations(table: &[([u8; 6], usize)], n: usize, from: usize, dst: [u8; 6]) -> Vec<usize> {
    let broadcast = dst[0] & 1 == 1;
    match table.iter().find(|(m, _)| *m == dst) {
        Some(&(_, p)) if !broadcast => {
            if p == from {
                Vec::new()
            } else {
                vec![p]
            }
        }
        _ => (0..n).filter(|&p| p != from).collect(),
    }
}

fn learn(table: &mut Vec<([u8; 6], usize)>, src: [u8; 6], port: usize) {
    if src[0] & 1 == 1 {
        return;
    }
    if let Some(e) = table.iter_mut().find(|(m, _)| *m == src) {
        e.1 = port;
    } else if table.len() < 64 {
        // A handful of machines: the table stays tiny; bounded all the same.
        table.push((src, port));
    }
}

fn port_loop(s: &Shared, i: usize) {
    let mut rng = xorshift::Rng(s.faults.seed.wrapping_mul(31).wrapping_add(i as u64 + 1) | 1);
    let mut buf = vec![0u8; FRAME_MAX];
    let me = &s.ports[i];
    while !s.stop.load(Ordering::Relaxed) {
        let Ok((n, from)) = me.sock.recv_from(&mut buf) else {
            continue;
        };
        // Only this port's QEMU may speak here; frames shorter than a header are dropped.
        if from != me.qemu || n < 14 {
            continue;
        }
        s.frames_in.fetch_add(1, Ordering::Relaxed);
        let frame = &buf[..n];
        let dst: [u8; 6] = frame[0..6].try_into().unwrap_or([0xff; 6]);
        let src: [u8; 6] = frame[6..12].try_into().unwrap_or([0xff; 6]);
        let to = {
            let mut t = s.table.lock().unwrap_or_else(|p| p.into_inner());
            learn(&mut t, src, i);
            destinations(&t, s.ports.len(), i, dst)
        };
        for p in to {
            if s.faults.drop_pct > 0 && rng.below(100) < s.faults.drop_pct {
                s.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let copies = if s.faults.dup_pct > 0 && rng.below(100) < s.faults.dup_pct {
                s.duplicated.fetch_add(1, Ordering::Relaxed);
                2
            } else {
                1
            };
            let out = &s.ports[p];
            for _ in 0..copies {
                // QEMU may not have bound its port yet: a lost frame, never an error.
                if me.sock.send_to(frame, out.qemu).is_ok() {
                    s.frames_out.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x35, 1];
    const B: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x35, 2];

    #[test]
    fn floods_unknown_and_broadcast_then_forwards_learnt() {
        let mut t = Vec::new();
        assert_eq!(destinations(&t, 4, 0, B), vec![1, 2, 3]);
        learn(&mut t, A, 0);
        learn(&mut t, B, 2);
        assert_eq!(destinations(&t, 4, 0, B), vec![2]);
        assert_eq!(destinations(&t, 4, 2, A), vec![0]);
        assert_eq!(destinations(&t, 4, 1, [0xff; 6]), vec![0, 2, 3]);
        // A frame for a MAC on its own port goes nowhere.
        assert_eq!(destinations(&t, 4, 2, B), Vec::<usize>::new());
        // A moved MAC is learnt again; multicast sources are not learnt.
        learn(&mut t, B, 3);
        assert_eq!(destinations(&t, 4, 0, B), vec![3]);
        learn(&mut t, [0x01, 0, 0x5e, 0, 0, 1], 1);
        assert_eq!(t.len(), 2);
    }

    /// The switch's counts once `done` holds of them, or as they are after 5 s.
    fn settled(sw: &Switch, done: impl Fn(&SwitchCount) -> bool) -> SwitchCount {
        let start = std::time::Instant::now();
        loop {
            let c = sw.count();
            if done(&c) || start.elapsed() > Duration::from_secs(5) {
                return c;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn forwards_real_datagrams_between_ports_and_drops_on_purpose() {
        let sw = Switch::start(3, Faults::default()).unwrap();
        let socks: Vec<UdpSocket> = (0..3)
            .map(|i| {
                let (q, _) = sw.ports(i);
                let s = UdpSocket::bind(("127.0.0.1", q)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s
            })
            .collect();
        let to_switch = |i: usize| format!("127.0.0.1:{}", sw.ports(i).1);
        // From A (port 0) to B, unknown: flooded to 1 and 2.
        let mut f = B.to_vec();
        f.extend_from_slice(&A);
        f.extend_from_slice(&[8, 0, 1, 2, 3]);
        socks[0].send_to(&f, to_switch(0)).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(socks[1].recv(&mut buf).unwrap(), f.len());
        assert_eq!(socks[2].recv(&mut buf).unwrap(), f.len());
        // B answers from port 2: A is known, so only port 0 gets it.
        let mut g = A.to_vec();
        g.extend_from_slice(&B);
        g.extend_from_slice(&[8, 0, 9]);
        socks[2].send_to(&g, to_switch(2)).unwrap();
        assert_eq!(socks[0].recv(&mut buf).unwrap(), g.len());
        assert_eq!(&buf[..g.len()], &g[..]);
        // The switch counts a frame out after its send returns, which may be after the
        // receiver above woke: wait for the count (bounded), then check it exactly.
        let c = settled(&sw, |c| c.frames_out >= 3);
        assert_eq!((c.frames_in, c.frames_out), (2, 3));
        drop(sw);

        let sw = Switch::start(
            2,
            Faults {
                drop_pct: 100,
                dup_pct: 0,
                seed: 1,
            },
        )
        .unwrap();
        let (q0, s0) = sw.ports(0);
        let s = UdpSocket::bind(("127.0.0.1", q0)).unwrap();
        for _ in 0..10 {
            s.send_to(&f, ("127.0.0.1", s0)).unwrap();
        }
        // Wait for the event (all ten counted), bounded only against a hang.
        let c = settled(&sw, |c| c.dropped >= 10);
        assert_eq!(c.dropped, 10);
        assert_eq!(c.frames_out, 0);
    }
}
