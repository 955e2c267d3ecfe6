//! `netbench replace N SIZE HOST PORT AT [CORE]`: P3 Figure 8 for the network, measured in
//! the guest (issue 15): what replacing `netd` once adds to a sender's sends.
//!
//! Why in the guest: from the host, one datagram's round trip in parallel mode is about a
//! millisecond and moves by milliseconds with the host's load, so a target of "under 1 ms
//! added" cannot be told from the noise there (`cargo xtask bench net-replace` measures that
//! way too, and says so). Here, under `-icount shift=0`, every send's time is the
//! instructions the guest executed meanwhile: repeatable to a few hundred.
//!
//! It sends N datagrams one at a time, each timed on its own (`CLOCK` around `send_to`,
//! which returns once `netd` has handed the frame to the driver), twice:
//! 1. the baseline: no replacement;
//! 2. the replaced run: before send AT it starts `netd takeover` on CORE at server priority
//!    and sends on. (Not in the background, as the shell's `replace` starts it: this program
//!    sends back to back at server priority, so the core has nothing left for background
//!    work, and a new server there would not run before the sends end; `cargo xtask bench
//!    net-replace` measures the shell's replacement, with the host's datagrams paced by
//!    their round trips.) Between two timed sends it looks whether
//!    the function's server generation moved; if the N sends end first, it sends on (at
//!    most [`EXTRA`] more) until it has.
//!
//! It prints `BENCH` lines: the baseline's median and longest send, the replaced run's
//! longest send, the *added time* (that longest send minus the baseline's median, P3's
//! "added send time"), the *replacement time* (from just before the spawn until the first
//! send that ended after the switch was seen), the sends that failed (must be 0: nothing
//! lost) and the sends made, then `BENCH done`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::Priority;
use ulib::net::{Ipv4, UdpSocket};
use ulib::{fnid, println, sys};

/// Sends at most made after the N while waiting for the switch.
const EXTRA: u32 = 100_000;
const SETTLE_NS: u64 = 20_000_000;

/// What one run of the replaced sends found.
struct Replaced {
    longest: u64,
    replacement: u64,
    failed: u32,
    sent: u32,
}

fn generation() -> Result<u64, String> {
    let id = fnid::lookup(ulib::net::FN_UDP).map_err(|e| format!("lookup net.udp: {e}"))?;
    // This core's copy (looked at between two timed sends): no other core is asked.
    fnid::info(id)
        .map(|i| i.generation)
        .map_err(|e| format!("FN_LIST: {e}"))
}

/// One timed send; errors are counted, not returned (a lost datagram is a finding).
fn timed(s: &mut UdpSocket, host: Ipv4, port: u16, out: &[u8], failed: &mut u32) -> u64 {
    let t0 = sys::clock_ns().unwrap_or(0);
    let r = s.send_to(host, port, out);
    let t1 = sys::clock_ns().unwrap_or(0);
    if r.is_err() {
        *failed += 1;
    }
    t1.saturating_sub(t0)
}

pub fn run(args: &[&str]) -> i32 {
    let parsed = match args {
        [n, size, host, port, at] | [n, size, host, port, at, _] => (
            n.parse::<u32>().ok().filter(|n| *n > 1),
            size.parse::<usize>()
                .ok()
                .filter(|s| (1..=ulib::net::DATA_MAX).contains(s)),
            Ipv4::parse(host),
            port.parse::<u16>().ok(),
            at.parse::<u32>().ok(),
        ),
        _ => (None, None, None, None, None),
    };
    let core = match args.get(5).map(|c| c.parse::<usize>()) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(_)) => {
            println!("netbench replace: bad core '{}'", args[5]);
            return 2;
        }
    };
    let (Some(n), Some(size), Some(host), Some(port), Some(at)) = parsed else {
        println!("netbench: usage: netbench replace N SIZE HOST PORT AT [CORE] (N > 1, AT < N)");
        return 2;
    };
    if at >= n {
        println!("netbench replace: AT ({at}) must be below N ({n})");
        return 2;
    }
    match measure(n, size, host, port, at, core) {
        Ok(rows) => {
            for (case, v) in rows {
                println!(
                    "BENCH {{\"peer\":\"musubi\",\"case\":\"fig8 {case}\",\"unit\":\"instructions\",\"per_op\":{v}}}"
                );
            }
            println!("BENCH done");
            0
        }
        Err(e) => {
            println!("BENCH error: netbench replace: {e}");
            1
        }
    }
}

fn measure(
    n: u32,
    size: usize,
    host: Ipv4,
    port: u16,
    at: u32,
    core: Option<usize>,
) -> Result<Vec<(&'static str, u64)>, String> {
    let mut s = UdpSocket::bind(0).map_err(|e| format!("bind: {e}"))?;
    let out = alloc::vec![0x5au8; size];
    let mut failed = 0;
    for _ in 0..10 {
        timed(&mut s, host, port, &out, &mut failed);
    }
    let _ = sys::sleep_ns(SETTLE_NS);
    let mut base: Vec<u64> = (0..n)
        .map(|_| timed(&mut s, host, port, &out, &mut failed))
        .collect();
    if failed != 0 {
        return Err(format!("{failed} sends failed without a replacement"));
    }
    base.sort_unstable();
    let _ = sys::sleep_ns(SETTLE_NS);
    let r = replaced(&mut s, host, port, &out, n, at, core)?;
    Ok(alloc::vec![
        ("baseline median", base[base.len() / 2]),
        ("baseline longest", base[base.len() - 1]),
        ("replaced longest", r.longest),
        ("added", r.longest.saturating_sub(base[base.len() / 2])),
        ("replacement", r.replacement),
        ("failed", u64::from(r.failed)),
        ("sent", u64::from(r.sent)),
    ])
}

fn replaced(
    s: &mut UdpSocket,
    host: Ipv4,
    port: u16,
    out: &[u8],
    n: u32,
    at: u32,
    core: Option<usize>,
) -> Result<Replaced, String> {
    let before = generation()?;
    let mut r = Replaced {
        longest: 0,
        replacement: 0,
        failed: 0,
        sent: 0,
    };
    let mut started = None;
    let mut new = None;
    while r.sent < n || (r.replacement == 0 && r.sent < n + EXTRA) {
        if r.sent == at {
            started = Some(sys::clock_ns().unwrap_or(0));
            let args = ["takeover"];
            let pid = match core {
                Some(c) => sys::spawn_on("netd", &args, Priority::Server, c),
                None => sys::spawn("netd", &args, Priority::Server),
            }
            .map_err(|e| format!("spawn netd takeover: {e}"))?;
            new = Some(pid);
        }
        let took = timed(s, host, port, out, &mut r.failed);
        r.sent += 1;
        if let Some(t0) = started.filter(|_| r.replacement == 0) {
            r.longest = r.longest.max(took);
            if generation()? != before {
                r.replacement = sys::clock_ns().unwrap_or(t0).saturating_sub(t0);
            } else if let Some(pid) = new {
                if let Ok((_, st)) = sys::wait_timeout(Some(pid), 0) {
                    return Err(format!(
                        "netd takeover ({pid}) ended (how {}, code {}) without taking over",
                        st.how, st.code
                    ));
                }
            }
        } else if started.is_some() {
            r.longest = r.longest.max(took);
        }
    }
    if r.replacement == 0 {
        return Err(format!("no switch seen after {} sends", r.sent));
    }
    Ok(r)
}
