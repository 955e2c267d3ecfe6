//! The network test of issue 15: a host client (std `UdpSocket`, 127.0.0.1 only) streams
//! datagrams of 1..1,472 bytes through the host relay (`net_relay.rs`) and QEMU's `dgram`
//! netdev to `udpecho` in Musubi and checks every reply's bytes.
//!
//! The guest's virtio-net device is plugged into a relay that is its whole network (gateway
//! 10.0.2.2, DHCP, nothing else reachable) and forwards a free host UDP port on 127.0.0.1
//! to the guest's port 7. The shell starts `netd` (DHCP from the relay) and `udpecho 7`;
//! the client first sends probes until one is answered (`udpecho` is bound: a hang guard,
//! not a time guess), then [`DATAGRAMS`] datagrams, one at a time, each waited for at most
//! [`REPLY_WAIT`]. Nothing is sent again: a datagram without a reply is counted lost, and a
//! reply that comes after its wait is counted late. Every reply must equal what was sent.
//!
//! Three places count: the host its datagrams sent and answered, the relay the datagrams it
//! passed each way, the guest (shell `net`) `netd`'s datagrams in and out, drops and
//! errors. Loss on the wire (loopback sockets, QEMU's netdev) is reported per hop, not
//! failed. The test fails on corruption, or on loss inside Musubi: a datagram `netd` took
//! in and did not send back out, or any drop or error it counted.

use crate::net_relay::{Relay, RelayCount};
use crate::qemu::{Guest, NetCfg};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The guest port `udpecho` binds.
pub const GUEST_PORT: u16 = 7;
/// Datagrams in one stream.
pub const DATAGRAMS: u32 = 10_000;
/// Largest datagram (1,500-byte MTU less the IPv4 and UDP headers).
pub const DATA_MAX: usize = 1472;
/// How long one reply is waited for before the datagram counts as lost.
pub const REPLY_WAIT: Duration = Duration::from_secs(2);
/// How long the probes may go unanswered (the guest may be slow to bring the network up on
/// a loaded host): a hang guard.
pub const PROBE_LIMIT: Duration = Duration::from_secs(120);
/// More datagrams lost than this ends the stream (something is broken, not a lossy wire).
pub const LOSS_LIMIT: u32 = 200;

/// A free UDP port on 127.0.0.1 (the kernel's pick; released for QEMU to bind).
pub fn free_udp_port() -> Result<u16> {
    let s = UdpSocket::bind("127.0.0.1:0").context("binding a UDP port on 127.0.0.1")?;
    Ok(s.local_addr()?.port())
}

/// What the host saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostCount {
    pub probes: u32,
    /// Probe replies received (the last probe's and any earlier one's).
    pub probe_answers: u32,
    pub sent: u32,
    pub answered: u32,
    pub lost: u32,
    pub late: u32,
    pub corrupt: u32,
}

/// The bytes of datagram `seq`: 1..=1,472 bytes, its sequence number first.
fn datagram(seq: u32) -> Vec<u8> {
    // A fixed mix over the sizes (xorshift on the sequence number): every size from 1 to
    // DATA_MAX comes up, in no order.
    let mut x = u64::from(seq).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let len = 1 + (x % DATA_MAX as u64) as usize;
    let mut d: Vec<u8> = (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(seq.wrapping_mul(7)) as u8
        })
        .collect();
    let s = seq.to_le_bytes();
    let n = len.min(4);
    d[..n].copy_from_slice(&s[..n]);
    d
}

/// Probe until `udpecho` answers (at most [`PROBE_LIMIT`]); (probes sent, probe replies).
pub(crate) fn probe(sock: &UdpSocket) -> Result<(u32, u32)> {
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    let mut probes = 0;
    let mut answers = 0;
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    while start.elapsed() < PROBE_LIMIT {
        probes += 1;
        let p = format!("probe {probes}");
        sock.send(p.as_bytes()).context("sending a probe")?;
        loop {
            match sock.recv(&mut buf) {
                Ok(n) if &buf[..n] == p.as_bytes() => return Ok((probes, answers + 1)),
                // An earlier probe's answer: this one's may follow.
                Ok(_) => answers += 1,
                Err(_) => break,
            }
        }
    }
    bail!(
        "no answer from udpecho within {} s ({probes} probes)",
        PROBE_LIMIT.as_secs()
    )
}

/// Stream [`DATAGRAMS`] datagrams to the echo at 127.0.0.1:`port` and check the replies.
pub fn stream(port: u16) -> Result<HostCount> {
    stream_with(port, &AtomicU32::new(0))
}

/// [`stream`], storing in `done` how many datagrams have been answered or given up so far
/// (for a test that acts at points of the stream).
pub fn stream_with(port: u16, done: &AtomicU32) -> Result<HostCount> {
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(("127.0.0.1", port))?;
    let (probes, probe_answers) = probe(&sock)?;
    let mut c = HostCount {
        probes,
        probe_answers,
        ..HostCount::default()
    };
    let mut lost: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut buf = [0u8; 2048];
    let started = Instant::now();
    for seq in 0..DATAGRAMS {
        let d = datagram(seq);
        sock.send(&d)
            .with_context(|| format!("sending datagram {seq}"))?;
        c.sent += 1;
        let deadline = Instant::now() + REPLY_WAIT;
        let mut answered = false;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            sock.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(_) => break,
            };
            let r = &buf[..n];
            if r == d.as_slice() {
                answered = true;
                break;
            }
            if let Some(s) = lost.remove(r) {
                // A reply after its wait: it was not lost, only late.
                c.late += 1;
                c.lost -= 1;
                let _ = s;
            } else if r.starts_with(b"probe ") {
                c.probe_answers += 1;
            } else {
                c.corrupt += 1;
                eprintln!(
                    "xtask: net: datagram {seq} ({} bytes): a reply of {n} bytes that no datagram sent had",
                    d.len()
                );
            }
        }
        done.store(seq + 1, Ordering::Relaxed);
        if answered {
            c.answered += 1;
        } else {
            c.lost += 1;
            lost.insert(d, seq);
            if c.lost > LOSS_LIMIT {
                bail!("more than {LOSS_LIMIT} datagrams lost ({c:?}): giving up");
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "xtask: net: host: {} sent, {} answered, {} lost, {} late, {} corrupt in {secs:.1} s ({} probes first)",
        c.sent, c.answered, c.lost, c.late, c.corrupt, c.probes
    );
    Ok(c)
}

/// `netd`'s counters as shell `net` prints them: (datagrams in, out, drops, errors).
pub fn guest_counts(output: &str) -> Option<(u64, u64, u64, u64)> {
    let line = output.lines().find(|l| l.starts_with("frames in "))?;
    let w: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let after = |key: &str, nth: usize| -> Option<u64> {
        let i = w.iter().enumerate().filter(|(_, x)| **x == key).nth(nth)?.0;
        w.get(i + 1)?.parse().ok()
    };
    // frames in A out B datagrams in C out D drops E errors F
    Some((
        after("in", 1)?,
        after("out", 1)?,
        after("drops", 0)?,
        after("errors", 0)?,
    ))
}

/// Judge one run: `Err` for corruption or loss inside Musubi; the report line otherwise.
/// The relay's counts split the wire: host -> relay and relay -> host are loopback sockets;
/// relay -> guest and guest -> relay are QEMU's `dgram` netdev and the device.
pub fn judge(host: &HostCount, guest: (u64, u64, u64, u64), relay: &RelayCount) -> Result<String> {
    let (gin, gout, drops, errors) = guest;
    let host_total = u64::from(host.sent + host.probes);
    let back = u64::from(host.answered + host.late + host.probe_answers);
    let report = format!(
        "host sent {} (+{} probes), answered {} (+{} late); relay: {} to the guest, {} back, \
         {} frames in, {} out, {} guest frames dropped, {} host datagrams dropped; \
         guest: {gin} in, {gout} out, {drops} drops, {errors} errors; lost on the wire: \
         {} host->relay, {} relay->guest (QEMU), {} guest->relay (QEMU), {} relay->host",
        host.sent,
        host.probes,
        host.answered,
        host.late,
        relay.to_guest,
        relay.to_host,
        relay.frames_from_guest,
        relay.frames_to_guest,
        relay.dropped_from_guest,
        relay.dropped_from_host,
        host_total.saturating_sub(relay.to_guest + relay.dropped_from_host),
        relay.to_guest.saturating_sub(gin),
        gout.saturating_sub(relay.to_host),
        relay.to_host.saturating_sub(back),
    );
    if host.corrupt > 0 {
        bail!("{} replies corrupt; {report}", host.corrupt);
    }
    if gin != gout || drops > 0 || errors > 0 {
        bail!("lost inside Musubi: {report}");
    }
    if gin > relay.to_guest || relay.to_guest > host_total {
        bail!("more datagrams counted downstream than were sent: {report}");
    }
    Ok(report)
}

/// One boot: the shell commands and the host stream between them.
pub fn run(guest: &Guest, smp: usize, spread: bool) -> Result<String> {
    let relay = Relay::start(&[(0, GUEST_PORT)])?;
    let port = relay.forwards()[0].0;
    let mut g = guest.clone();
    g.net = Some(NetCfg::relay(&relay));
    // The driver at driver priority on core 0, where the device resources are (a boot
    // program: the shell may not start one).
    g.cmdline = format!("{} driver=0:netdrv", g.cmdline).trim().to_string();
    // The shell brought the network up before its first prompt (netdrv and netd on core
    // 0); `net` shows the address. Spread: netd moves to core 1 (a live replacement) and
    // udpecho runs on core 3, so driver, server and echo are on three different cores.
    let echo = if spread {
        "replace net.udp netd -c 1\n# expect: replaced\nrun udpecho 7 -c 3 &"
    } else {
        "run udpecho 7 &"
    };
    // Last, netd times its own steps for a few sends (`netbench steps`: `OP_STEPS`, the
    // kernel's `CPU_TIME`; the datagrams go to the relay, 10.0.2.2, which drops them).
    // Then the resources of core 0: no transmit page of a `netd` that is gone.
    let script = format!(
        "net\n# expect: address 10.0.2.15/24\n{echo}\nnet\nfn ls\n\
         run netbench steps 5 64 10.0.2.2 9\n# expect: steps netd result step\nres ls 0\n"
    );
    let steps = crate::script::parse(&script)?;
    let mut host = None;
    let mut guest_counts_seen = None;
    let name = format!(
        "net echo ({smp} cores{})",
        if spread { ", spread" } else { "" }
    );
    // The step after which the host streams (once udpecho runs), then the counters' `net`.
    let echo_step = if spread { 2 } else { 1 };
    let last = steps.len() - 1;
    let mut pages = None;
    crate::script::run_steps_with(&g, &name, &steps, |_| false, &mut |i, out| {
        if i == echo_step {
            host = Some(stream(port)?);
        } else if i == echo_step + 1 {
            guest_counts_seen =
                Some(guest_counts(out).context("shell `net` printed no counters line")?);
        } else if i == last {
            pages = Some(tx_pages(out));
        }
        Ok(())
    })?;
    // The live `netd`'s pages are on its core: 0 on core 1 (replaced there before the echo
    // ran, holding no request, so without the retire notice), else all of them.
    let want = if spread { 0 } else { TX_PAGES };
    match pages {
        Some(n) if n == want => {}
        n => bail!(
            "{n:?} netd transmit pages on core 0, not {want} (a replaced netd's pages \
             outlived it)"
        ),
    }
    let host = host.context("the stream did not run")?;
    let guest = guest_counts_seen.context("no guest counters")?;
    judge(&host, guest, &relay.count())
}

/// `netd` replacements during the churned stream ([`run_churn`]).
pub const TAKEOVERS: u32 = 10;
/// `netdrv` crashes (`net crash`; each restarted by the kernel) during the churned stream.
pub const CRASHES: u32 = 3;
/// How long the churn waits for the stream to reach its next point: a hang guard.
const POINT_LIMIT: Duration = Duration::from_secs(600);

/// The churn's shell commands: [`TAKEOVERS`] replacements of `netd` (on `netd_core`, where
/// `net up` put it), a crash of `netdrv` after every third, `crash_max` at most.
fn churn_steps(netd_core: usize, crash_max: u32) -> String {
    let mut s = String::new();
    let mut crashes = 0;
    for k in 1..=TAKEOVERS {
        s += &format!("replace net.udp netd -c {netd_core}\n# expect: replaced\n");
        if k % 3 == 0 && crashes < crash_max {
            crashes += 1;
            s += "net crash\n# expect: restarted as\n";
        }
    }
    s
}

/// Issue 15's replacement under traffic: while the host streams [`DATAGRAMS`] datagrams to
/// `udpecho`, the shell replaces `netd` [`TAKEOVERS`] times (`replace`, each taking over
/// the function and its state ICA) and crashes `netdrv` [`CRASHES`] times (`net crash`, a
/// page fault in the driver; the kernel restarts it, `netdrv restart=N`; the shell may not
/// kill a boot program). The commands are spread over the stream: each
/// waits until the host has had its share of the datagrams answered (an event, not a time).
/// Judged as [`run`] is: every datagram `netd` took in went back out, nothing dropped or
/// failed inside Musubi, every reply's bytes right. Datagrams the device took while no
/// driver ran are lost with the reset the next driver does: they show as "relay->guest"
/// loss, never reaching `netd`.
///
/// With `crashes` 0 the driver's counts cover the whole run, so one more check holds: every
/// frame the driver kept was taken in by a `netd` (regression: a frame `netd` had answered
/// but not yet put through smoltcp was lost when its next receive retired it; the judge
/// above counted it as QEMU's "relay->guest" loss).
pub fn run_churn(guest: &Guest, crashes: u32) -> Result<String> {
    let relay = Relay::start(&[(0, GUEST_PORT)])?;
    let port = relay.forwards()[0].0;
    let mut g = guest.clone();
    g.net = Some(NetCfg::relay(&relay));
    g.cmdline = format!(
        "{} driver=0:netdrv,restart={},crashable",
        g.cmdline,
        crashes + 2
    )
    .trim()
    .to_string();
    let churn = churn_steps(0, crashes);
    let churn_len = churn.lines().filter(|l| !l.starts_with('#')).count();
    let script = format!(
        "net\n# expect: address 10.0.2.15/24\nrun udpecho 7 &\n{churn}net\nfn ls\nres ls 0\n"
    );
    let steps = crate::script::parse(&script)?;
    let first_churn = 2;
    let last_churn = first_churn + churn_len - 1;
    let share = DATAGRAMS / (churn_len as u32 + 1);
    let done = Arc::new(AtomicU32::new(0));
    let mut streamer: Option<std::thread::JoinHandle<Result<HostCount>>> = None;
    let mut host = None;
    let mut guest_counts_seen = None;
    let mut handed = None;
    let mut pages = None;
    crate::script::run_steps_with(
        &g,
        "net churn (2 cores)",
        &steps,
        |_| false,
        &mut |i, out| {
            if i == 1 {
                let done = done.clone();
                streamer = Some(std::thread::spawn(move || stream_with(port, &done)));
            }
            if (1..last_churn).contains(&i) {
                // Before the next command: the stream's next share answered (or it ended).
                let point = share * (i as u32 + 2 - first_churn as u32);
                let start = Instant::now();
                while done.load(Ordering::Relaxed) < point
                    && !streamer.as_ref().is_some_and(|s| s.is_finished())
                {
                    if start.elapsed() > POINT_LIMIT {
                        bail!(
                            "the stream did not reach datagram {point} within {} s",
                            POINT_LIMIT.as_secs()
                        );
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            if i == last_churn {
                let s = streamer.take().context("the stream did not start")?;
                host = Some(
                    s.join()
                        .map_err(|_| anyhow::anyhow!("the stream panicked"))??,
                );
            }
            if i == last_churn + 1 {
                guest_counts_seen =
                    Some(guest_counts(out).context("shell `net` printed no counters line")?);
                handed = frames_handed(out);
            }
            if i == last_churn + 3 {
                pages = Some(tx_pages(out));
            }
            Ok(())
        },
    )?;
    // Ten servers replaced, drivers crashed under them: only the live one's pages are left.
    if pages != Some(TX_PAGES) {
        bail!(
            "{pages:?} netd transmit pages on core 0 after {TAKEOVERS} replacements, not \
             {TX_PAGES} (a replaced netd's pages outlived it)"
        );
    }
    let host = host.context("the stream did not run")?;
    let guest = guest_counts_seen.context("no guest counters")?;
    let report = judge(&host, guest, &relay.count())?;
    if crashes > 0 {
        return Ok(format!(
            "{report} (relay->guest includes frames the device took while no driver ran)"
        ));
    }
    let (kept, taken) = handed.context("shell `net` printed no driver or frames line")?;
    if kept != taken {
        bail!("lost inside Musubi: netdrv kept {kept} frames, netd took in {taken}; {report}");
    }
    Ok(format!(
        "{report}; netdrv kept {kept} frames, netd took in all"
    ))
}

/// `netd`'s transmit pages (`user/netd/src/dev.rs`: 16 one-page vregions, `netd-tx-...`).
const TX_PAGES: usize = 16;

/// How many `netd` transmit pages shell `res ls`'s output lists.
fn tx_pages(out: &str) -> usize {
    out.lines().filter(|l| l.contains(" netd-tx-")).count()
}

/// From shell `net`'s output: (frames the driver received less those it dropped, frames
/// `netd` took in). Every frame the driver keeps goes to `netd`, so the two are equal
/// unless a frame was lost between them (or a driver restarted: its counts start again).
pub fn frames_handed(output: &str) -> Option<(u64, u64)> {
    let after = |line: &str, key: &str| -> Option<u64> {
        let rest = &line[line.find(key)? + key.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let netd = output.lines().find(|l| l.starts_with("frames in "))?;
    let drv = output.lines().find(|l| l.starts_with("driver: "))?;
    let kept = after(drv, "received ")?.checked_sub(after(drv, "drops ")?)?;
    Some((kept, after(netd, "frames in ")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_cover_the_sizes_and_differ() {
        let mut sizes = std::collections::HashSet::new();
        for s in 0..DATAGRAMS {
            let d = datagram(s);
            assert!((1..=DATA_MAX).contains(&d.len()));
            sizes.insert(d.len());
        }
        assert!(sizes.len() > 1400, "{} sizes", sizes.len());
        assert_ne!(datagram(5), datagram(6));
    }

    #[test]
    fn churn_replaces_ten_times_and_crashes_three() {
        let s = churn_steps(0, CRASHES);
        assert_eq!(s.matches("replace net.udp netd -c 0\n").count(), 10);
        assert_eq!(s.matches("net crash\n").count(), 3);
        assert!(crate::script::parse(&s).is_ok());
    }

    #[test]
    fn counters_line_parses() {
        let out = "address 10.0.2.15/24 ...\nframes in 12 out 13, datagrams in 10 out 9, drops 1, errors 0\n";
        assert_eq!(guest_counts(out), Some((10, 9, 1, 0)));
    }

    #[test]
    fn judging() {
        let h = HostCount {
            probes: 2,
            probe_answers: 1,
            sent: 100,
            answered: 97,
            lost: 3,
            ..HostCount::default()
        };
        let r = RelayCount {
            to_guest: 102,
            to_host: 99,
            ..RelayCount::default()
        };
        // Two never reached the guest, one was lost on the way back: wire loss, a pass.
        let ok = judge(&h, (100, 100, 0, 0), &r).unwrap();
        assert!(
            ok.contains("2 relay->guest (QEMU), 1 guest->relay (QEMU)"),
            "{ok}"
        );
        assert!(judge(&h, (100, 99, 0, 0), &r).is_err());
        assert!(judge(&h, (100, 100, 1, 0), &r).is_err());
        let bad = HostCount { corrupt: 1, ..h };
        assert!(judge(&bad, (100, 100, 0, 0), &r).is_err());
        // The guest cannot have taken in more than the relay passed it.
        assert!(judge(&h, (103, 103, 0, 0), &r).is_err());
    }
}
