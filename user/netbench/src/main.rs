//! `netbench N SIZE HOST PORT [LABEL]`: the in-guest sender of `cargo xtask bench net`'s
//! deterministic part (issue 15; P3 Tables 2 and 3): it sends N UDP datagrams of SIZE bytes
//! to HOST:PORT through `netd` (`ulib::net`) and reports what each datagram cost the
//! sender, `netd` and the driver `netdrv`, in CPU time per datagram.
//!
//! It exists because the shell's `ps` shows CPU time in milliseconds, far too coarse for a
//! 1% comparison, and because the counts must be taken right around the sends. The CPU
//! time comes from the kernel's per-process accounting (`PROCESSES`: `cpu_ns`, and
//! `mode_ns` split into user and kernel); under `-icount shift=0` on one core a nanosecond
//! is one instruction executed while that process was on the core, kernel work on its
//! behalf and interrupts that arrived meanwhile included.
//!
//! First 10 datagrams are sent unmeasured (ARP, first-use costs), then it sleeps 20 ms so
//! that `netd` and the driver are idle; it reads the counts, sends N, sleeps 20 ms again
//! (so that the transmissions the sends started are done, and counted), and reads them
//! again. Prints `BENCH {"peer":"musubi","case":"LABEL netd","unit":"instructions",
//! "per_op":X}` lines (LABEL defaults to `send`) for the sender, `netd`, `netd user`,
//! `netd kernel`, `netdrv`, `netdrv user`, `netdrv kernel` and the elapsed clock, then
//! `BENCH done`.
//!
//! `netbench replace ...` (`replace.rs`) measures P3 Figure 8 for the network instead, and
//! `netbench steps ...` (`steps.rs`) P3 Table 3's request and result steps of `netd`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use ulib::abi::{Pid, ProcInfo, MODE_KERNEL, MODE_USER};
use ulib::net::{Ipv4, UdpSocket, DATA_MAX};
use ulib::{println, sys};

mod replace;
mod steps;

ulib::main!(main);

const WARM_UP: u32 = 10;
const SETTLE_NS: u64 = 20_000_000;

/// (cpu, user, kernel) ns of the process named `name`, or of `me`.
#[derive(Clone, Copy, Default)]
struct Cpu {
    total: u64,
    user: u64,
    kernel: u64,
}

fn snapshot(me: Pid) -> Result<[Cpu; 3], ulib::abi::Error> {
    let mut buf = alloc::vec![ProcInfo::EMPTY; 256];
    let n = sys::processes(&mut buf)?;
    let mut out = [Cpu::default(); 3];
    for p in &buf[..n] {
        let slot = if p.pid == me {
            0
        } else if p.name() == "netd" {
            1
        } else if p.name() == "netdrv" {
            2
        } else {
            continue;
        };
        out[slot].total += p.cpu_ns;
        out[slot].user += p.mode_ns[MODE_USER];
        out[slot].kernel += p.mode_ns[MODE_KERNEL];
    }
    Ok(out)
}

fn fill(buf: &mut [u8], seq: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(7).wrapping_add(seq) as u8;
    }
}

/// `N SIZE HOST PORT [LABEL]`: how many datagrams, of how many bytes, to where; `None` if
/// any is missing or out of range (N > 0, SIZE 1..=`DATA_MAX`).
fn sends(args: &[&str]) -> Option<(u32, usize, Ipv4, u16)> {
    let ([n, s, h, p] | [n, s, h, p, _]) = args else {
        return None;
    };
    Some((
        n.parse::<u32>().ok().filter(|n| *n > 0)?,
        s.parse::<usize>()
            .ok()
            .filter(|s| (1..=DATA_MAX).contains(s))?,
        Ipv4::parse(h)?,
        p.parse::<u16>().ok()?,
    ))
}

fn main(args: &[&str]) -> i32 {
    if args.get(1) == Some(&"replace") {
        return replace::run(&args[2..]);
    }
    if args.get(1) == Some(&"steps") {
        return steps::run(&args[2..]);
    }
    let Some((n, size, host, port)) = sends(&args[1..]) else {
        println!("netbench: usage: netbench N SIZE HOST PORT [LABEL] (N > 0, SIZE 1..={DATA_MAX})");
        return 2;
    };
    let label = args.get(5).copied().unwrap_or("send");
    match run(n, size, host, port) {
        Ok(rows) => {
            for (case, v) in rows {
                println!(
                    "BENCH {{\"peer\":\"musubi\",\"case\":\"{label} {case}\",\"unit\":\"instructions\",\"per_op\":{v:.1}}}"
                );
            }
            println!("BENCH done");
            0
        }
        Err(e) => {
            println!("BENCH error: netbench: {e}");
            1
        }
    }
}

fn run(
    n: u32,
    size: usize,
    host: Ipv4,
    port: u16,
) -> Result<Vec<(&'static str, f64)>, alloc::string::String> {
    use alloc::format;
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let mut s = UdpSocket::bind(0).map_err(|e| format!("bind: {e}"))?;
    let mut out = alloc::vec![0u8; size];
    for seq in 0..WARM_UP {
        fill(&mut out, seq);
        s.send_to(host, port, &out)
            .map_err(|e| format!("send: {e}"))?;
    }
    let _ = sys::sleep_ns(SETTLE_NS);
    let before = snapshot(me).map_err(|e| format!("PROCESSES: {e}"))?;
    let t0 = sys::clock_ns().unwrap_or(0);
    for seq in 0..n {
        fill(&mut out, seq);
        s.send_to(host, port, &out)
            .map_err(|e| format!("send {seq}: {e}"))?;
    }
    let t1 = sys::clock_ns().unwrap_or(0);
    let mine = snapshot(me).map_err(|e| format!("PROCESSES: {e}"))?[0];
    let _ = sys::sleep_ns(SETTLE_NS);
    let after = snapshot(me).map_err(|e| format!("PROCESSES: {e}"))?;
    if after[1].total == 0 || after[2].total == 0 {
        return Err("no netd or netdrv process found".into());
    }
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / f64::from(n);
    Ok(alloc::vec![
        ("elapsed", per(t1, t0)),
        ("sender", per(mine.total, before[0].total)),
        ("netd", per(after[1].total, before[1].total)),
        ("netd user", per(after[1].user, before[1].user)),
        ("netd kernel", per(after[1].kernel, before[1].kernel)),
        ("netdrv", per(after[2].total, before[2].total)),
        ("netdrv user", per(after[2].user, before[2].user)),
        ("netdrv kernel", per(after[2].kernel, before[2].kernel)),
    ])
}
