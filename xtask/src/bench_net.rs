//! `cargo xtask bench net [--peer linux]`: UDP echo round-trip time and throughput from a
//! host client through a relay on 127.0.0.1 to `udpecho` in Musubi, and (with the peer) to
//! Linux 6.1 in the same QEMU machine with the same device (`peer_linux_net.rs`), as
//! ratios (issue 15, "Measurements"). Parallel mode: the figures are host wall time.
//!
//! Both guests run at once, each with its own relay (`net_relay.rs`: the guest's whole
//! network, on 127.0.0.1) forwarding a free 127.0.0.1 port to its port 7, on [`SMP`] vCPUs. Each of `runs` rounds measures, for each datagram
//! size in [`SIZES`], on each system in turn (the first alternating from round to round, so
//! that a change of the host's load weighs on both alike):
//! - RTT: [`PINGS`] datagrams one at a time; each ping's send-to-reply time is a sample;
//! - throughput: [`STREAM`] datagrams with at most [`WINDOW`] unanswered; one sample is the
//!   payload echoed per second over the stream.
//!
//! The client is std's `UdpSocket` on 127.0.0.1; every loop is bounded (a reply is waited
//! for at most [`REPLY_WAIT`], then counted lost) and every reply's bytes are checked.

use crate::net_relay::Relay;
use crate::net_test::probe;
use crate::qemu::NetCfg;
use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Context, Result};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

/// Datagram sizes measured (UDP payload bytes).
pub const SIZES: [usize; 2] = [64, 1024];
/// Pings per size, system and round.
pub const PINGS: usize = 300;
/// Datagrams per throughput sample.
pub const STREAM: usize = 3000;
/// Unanswered datagrams allowed in a throughput stream.
pub const WINDOW: usize = 16;
/// How long one reply is waited for before it counts as lost.
pub const REPLY_WAIT: Duration = Duration::from_millis(500);
/// vCPUs of both guests (the host has 2 cores).
pub const SMP: usize = 2;
/// More lost than this in one sample: something is broken, not a lossy wire.
const LOSS_LIMIT: u64 = 100;

/// A client of one echo.
struct Client {
    name: &'static str,
    sock: UdpSocket,
    /// The tag of the next datagram (its first 8 bytes): replies are matched by it.
    next: u64,
    lost: u64,
    rtt: Vec<Vec<f64>>,
    tput: Vec<Vec<f64>>,
}

impl Client {
    fn new(name: &'static str, port: u16) -> Result<Client> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        sock.connect(("127.0.0.1", port))?;
        let (probes, _) = probe(&sock).with_context(|| format!("{name} echo"))?;
        eprintln!("xtask: bench net: {name} answers (after {probes} probes)");
        Ok(Client {
            name,
            sock,
            next: 1,
            lost: 0,
            rtt: vec![Vec::new(); SIZES.len()],
            tput: vec![Vec::new(); SIZES.len()],
        })
    }

    fn datagram(&mut self, size: usize) -> (u64, Vec<u8>) {
        let tag = self.next;
        self.next += 1;
        let mut d: Vec<u8> = (0..size).map(|i| (i as u64 * 7 + tag) as u8).collect();
        d[..8].copy_from_slice(&tag.to_le_bytes());
        (tag, d)
    }

    /// Wait for a reply until `deadline`: its tag, or `None` at the deadline. A reply whose
    /// bytes differ from what its tag's datagram had is an error.
    fn reply(&self, size: usize, deadline: Instant) -> Result<Option<u64>> {
        let mut buf = [0u8; 2048];
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(None);
        };
        self.sock
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let n = match self.sock.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => return Ok(None),
        };
        if n < 8 || buf.starts_with(b"probe ") {
            return Ok(Some(0));
        }
        let tag = u64::from_le_bytes(buf[..8].try_into().unwrap());
        let ok = n == size
            && buf[8..n]
                .iter()
                .enumerate()
                .all(|(i, b)| *b == ((i + 8) as u64 * 7 + tag) as u8);
        if !ok {
            bail!("{}: a corrupt reply of {n} bytes (tag {tag})", self.name);
        }
        Ok(Some(tag))
    }

    /// [`PINGS`] pings of `size` bytes, one at a time: their RTTs in us.
    fn pings(&mut self, s: usize) -> Result<()> {
        let size = SIZES[s];
        let mut lost = 0;
        for _ in 0..PINGS {
            let (tag, d) = self.datagram(size);
            let sent = Instant::now();
            self.sock.send(&d)?;
            let deadline = sent + REPLY_WAIT;
            loop {
                match self.reply(size, deadline)? {
                    Some(t) if t == tag => {
                        self.rtt[s].push(sent.elapsed().as_secs_f64() * 1e6);
                        break;
                    }
                    Some(_) => continue, // a late reply to an earlier datagram
                    None => {
                        lost += 1;
                        break;
                    }
                }
            }
        }
        self.count_lost(lost)
    }

    /// One throughput sample: [`STREAM`] datagrams of `size` bytes, at most [`WINDOW`]
    /// unanswered; payload bytes echoed per second, in MB/s.
    fn stream(&mut self, s: usize) -> Result<()> {
        let size = SIZES[s];
        let first = self.next;
        let (mut sent, mut answered, mut outstanding, mut lost) = (0usize, 0usize, 0usize, 0);
        let start = Instant::now();
        while sent < STREAM || outstanding > 0 {
            while sent < STREAM && outstanding < WINDOW {
                let (_, d) = self.datagram(size);
                self.sock.send(&d)?;
                sent += 1;
                outstanding += 1;
            }
            match self.reply(size, Instant::now() + REPLY_WAIT)? {
                Some(t) if t >= first => {
                    answered += 1;
                    outstanding = outstanding.saturating_sub(1);
                }
                Some(_) => {}
                None => {
                    // Nothing for a whole wait: what is unanswered is lost.
                    lost += outstanding as u64;
                    outstanding = 0;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        self.tput[s].push((answered * size) as f64 / secs / 1e6);
        self.count_lost(lost)
    }

    fn count_lost(&mut self, lost: u64) -> Result<()> {
        self.lost += lost;
        if lost > LOSS_LIMIT {
            bail!("{}: {lost} datagrams lost in one sample", self.name);
        }
        Ok(())
    }

    fn round(&mut self) -> Result<()> {
        for s in 0..SIZES.len() {
            self.pings(s)?;
            self.stream(s)?;
        }
        Ok(())
    }
}

/// A guest's whole network: a relay on 127.0.0.1 (`net_relay`) forwarding a free host port
/// to the guest's port 7; (the relay, which must outlive the guest, and that host port).
fn relay() -> Result<(Relay, u16)> {
    let relay = Relay::start(&[(0, crate::net_test::GUEST_PORT)])?;
    let port = relay.forwards()[0].0;
    Ok((relay, port))
}

pub fn net(runs: usize, with_linux: bool) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    // Each guest has its own relay (declared before the guests, so dropped after them).
    let (linux_relay, linux_port) = relay()?;
    let (musubi_relay, port) = relay()?;
    let linux = if with_linux {
        Some(crate::peer_linux_net::Echo::boot(
            SMP,
            NetCfg::relay(&linux_relay),
        )?)
    } else {
        None
    };
    // The driver is a boot program at driver priority on core 0 (the shell may not start
    // one); the shell starts netd beside it on core 0.
    let mut g = Guest::new(&kernel, SMP, "driver=0:netdrv");
    g.initrd = Some(archive);
    g.mode = Mode::Parallel;
    g.net = Some(NetCfg::relay(&musubi_relay));
    let steps = crate::script::parse("run udpecho 7 &\n")?;
    let mut clients: Vec<Client> = Vec::new();
    crate::script::run_steps_with(&g, "bench net", &steps, |_| false, &mut |i, _| {
        if i != 0 {
            return Ok(());
        }
        let mut c = vec![Client::new("Musubi", port)?];
        if let Some(l) = &linux {
            c.push(
                Client::new("Linux", linux_port)
                    .with_context(|| format!("console:\n{}", l.tail()))?,
            );
        }
        for run in 0..runs {
            for k in 0..c.len() {
                let k = (k + run) % c.len();
                c[k].round()?;
            }
            eprintln!("xtask: bench net: round {} of {runs} done", run + 1);
        }
        clients = c;
        Ok(())
    })?;
    report(
        runs,
        &g,
        linux.as_ref().map(|l| l.command_line.clone()),
        &clients,
    )
}

fn report(runs: usize, g: &Guest, linux_qemu: Option<String>, clients: &[Client]) -> Result<()> {
    if clients.is_empty() {
        bail!("the clients did not run");
    }
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for (s, size) in SIZES.iter().enumerate() {
        let rtt: Vec<Row> = clients
            .iter()
            .map(|c| Row::from_samples(&format!("RTT {size} B, {} (us)", c.name), &c.rtt[s]))
            .collect();
        let tput: Vec<Row> = clients
            .iter()
            .map(|c| {
                Row::from_samples(
                    &format!("throughput {size} B, {} (MB/s)", c.name),
                    &c.tput[s],
                )
            })
            .collect();
        if rtt.len() == 2 {
            let r = rtt[0].median / rtt[1].median;
            checks.push(Check::computed(
                &format!("RTT {size} B, Musubi / Linux (medians)"),
                r,
                "<= 1.0",
                r <= 1.0,
            ));
            let t = tput[0].median / tput[1].median;
            checks.push(Check::computed(
                &format!("throughput {size} B, Musubi / Linux (medians)"),
                t,
                ">= 1.0",
                t >= 1.0,
            ));
        }
        rows.extend(rtt);
        rows.extend(tput);
    }
    let lost: Vec<String> = clients
        .iter()
        .map(|c| format!("{} {}", c.name, c.lost))
        .collect();
    let qemu = g.shown_command_line();
    let mut notes = vec![
        format!(
            "Parallel mode (multi-threaded TCG), host wall time, taken on a shared 2-core \
             machine where other builds may run: compare the rows of one run, not runs. A \
             host client (std `UdpSocket` on 127.0.0.1) talks through a relay in xtask on \
             127.0.0.1 that is each guest's whole network (QEMU's `dgram` netdev; \
             `xtask/src/net_relay.rs`; QEMU's user network with `restrict=on` drops every \
             UDP answer of a guest) to `udpecho 7` in Musubi (`netdrv` a boot program on core 0, `netd` started by \
             the shell on core 0 beside it, `udpecho` on core 0; {SMP} cores){}. \
             Each of {runs} rounds measures each system in turn (the first alternating): per \
             size, {PINGS} pings one at a time (every ping's RTT is a sample of the RTT row) \
             and one stream of {STREAM} datagrams with at most {WINDOW} unanswered (its \
             payload echoed per second is one sample of the throughput row). A reply is \
             waited for {} ms at most; datagrams lost: {}.",
            if linux_qemu.is_some() {
                ", and to `peer/linux/echo.c` (a recvfrom/sendto loop as `/init`) in Debian's \
                 Linux 6.1 on the same machine and device (virtio-net-pci, modern transport; \
                 its virtio modules loaded by `/init`), both guests up at once"
            } else {
                ""
            },
            REPLY_WAIT.as_millis(),
            lost.join(", ")
        ),
        format!("QEMU (Musubi): `{qemu}`"),
    ];
    if let Some(l) = linux_qemu {
        notes.push(format!("QEMU (Linux): `{l}`"));
    }
    let report = Report {
        bench: "net".into(),
        mode: Mode::Parallel.name().into(),
        qemu,
        musubi_commit: crate::results::commit(),
        runs,
        unit: "us (RTT rows); MB/s of payload echoed (throughput rows)".into(),
        rows,
        checks,
        notes,
    };
    report.publish()
}
