//! `netbench steps N SIZE HOST PORT [LABEL]`: P3 Table 3's server steps for `netd`.
//!
//! AnT's communication server runs in *steps*: a request step when a client's request
//! comes (here: `OP_SEND`, the datagram built by smoltcp and handed to the driver in a
//! `DRV_TX_BATCH` request, a batch of one) and a result step when the answer to a request
//! it made comes back (here: the driver's reply, its transmit page taken back). The kernel's
//! per-process accounting cannot tell them apart, so `netd` times them itself while asked
//! to (`ulib::net::OP_STEPS`, with its own CPU time, `CPU_TIME`: the driver running in the
//! middle of a step on the same core is not counted). This sends `N` datagrams of `SIZE`
//! bytes after 10 unmeasured ones, with the timing on from just before the first to 20 ms
//! after the last (so that every driver answer has been taken), and prints per datagram:
//! `LABEL netd request step` and `LABEL netd result step` (CPU ns; instructions under
//! `-icount shift=0` on one core), then `BENCH done`. The timing costs `netd` two
//! `CPU_TIME` calls per step, counted in the figures.

use alloc::format;
use alloc::string::String;
use ulib::net::{self, Ipv4, UdpSocket, DATA_MAX};
use ulib::{println, sys};

pub fn run(args: &[&str]) -> i32 {
    let Some((n, size, host, port)) = super::sends(args) else {
        println!(
            "netbench: usage: netbench steps N SIZE HOST PORT [LABEL] (N > 0, SIZE 1..={DATA_MAX})"
        );
        return 2;
    };
    let label = args.get(4).copied().unwrap_or("steps");
    match measure(n, size, host, port) {
        Ok((request, result)) => {
            for (case, v) in [("netd request step", request), ("netd result step", result)] {
                println!(
                    "BENCH {{\"peer\":\"musubi\",\"case\":\"{label} {case}\",\"unit\":\"instructions\",\"per_op\":{v:.1}}}"
                );
            }
            println!("BENCH done");
            0
        }
        Err(e) => {
            println!("BENCH error: netbench steps: {e}");
            1
        }
    }
}

/// (request step, result step) CPU ns of `netd` per datagram.
fn measure(n: u32, size: usize, host: Ipv4, port: u16) -> Result<(f64, f64), String> {
    let mut s = UdpSocket::bind(0).map_err(|e| format!("bind: {e}"))?;
    let mut out = alloc::vec![0u8; size];
    for seq in 0..super::WARM_UP {
        super::fill(&mut out, seq);
        s.send_to(host, port, &out)
            .map_err(|e| format!("send: {e}"))?;
    }
    let _ = sys::sleep_ns(super::SETTLE_NS);
    net::steps(true).map_err(|e| format!("OP_STEPS start: {e}"))?;
    for seq in 0..n {
        super::fill(&mut out, seq);
        s.send_to(host, port, &out)
            .map_err(|e| format!("send {seq}: {e}"))?;
    }
    let _ = sys::sleep_ns(super::SETTLE_NS);
    let w = net::steps(false).map_err(|e| format!("OP_STEPS read: {e}"))?;
    if w[1] == 0 {
        return Err("netd timed no result step (no driver answer taken)".into());
    }
    Ok((w[0] as f64 / f64::from(n), w[1] as f64 / f64::from(n)))
}
