//! The network commands (issue 15): `net` shows `netd`'s address config and counters (by
//! asking `net.udp`, `ulib::net`) and the driver's; `net up [ARGS] [-c CORE]` starts `netd
//! ARGS` (server priority) as a job and waits until it serves `net.udp` with an address. The
//! driver `netdrv` needs driver priority, which only the kernel gives: it is a boot program
//! (`driver=CORE:netdrv`). At its start the shell does `net up` itself when the machine has
//! a virtio-net device ([`auto_up`]). `net crash` asks the driver to crash (`DRV_CRASH`;
//! only a `netdrv crashable` obeys) and reports whether the kernel restarted it.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::{Pid, Priority};
use ulib::net::{self, Ipv4};
use ulib::{println, sys};

/// How long `net up` waits for an address (DHCP on QEMU's user network takes well under a
/// second; this is a hang guard).
const UP_WAIT_NS: u64 = 20_000_000_000;

/// `net`: address and counters.
pub(crate) fn show() -> Result<(), String> {
    let i = net::info().map_err(|e| format!("net: no netd ({}): {e}", net::FN_UDP))?;
    let c = net::counters().map_err(|e| format!("net: counters: {e}"))?;
    let mac = i[5].to_le_bytes();
    let source = match i[3] {
        1 => "static",
        2 => "dhcp",
        _ => "none",
    };
    println!(
        "address {}/{} gateway {} ({source}), mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {} ports bound",
        Ipv4::from_word(i[0]),
        i[1],
        Ipv4::from_word(i[2]),
        mac[0],
        mac[1],
        mac[2],
        mac[3],
        mac[4],
        mac[5],
        i[4]
    );
    println!(
        "frames in {} out {}, datagrams in {} out {}, drops {}, errors {}",
        c[0], c[1], c[2], c[3], c[4], c[5]
    );
    // The driver's own counts (DRV_INFO), if it answers.
    if let Ok(drv) = ulib::fnid::lookup(ulib::abi::net::FN_DRV) {
        let ask = ulib::abi::ipc::Msg {
            label: ulib::abi::net::DRV_INFO,
            ..Default::default()
        };
        if let Ok((_, r)) = ulib::ipc::call(drv.as_target(), &ask) {
            println!(
                "driver: link {}, frames sent {} received {}, drops {}",
                if r.words[1] == 1 { "up" } else { "down" },
                r.words[2],
                r.words[3],
                r.words[4]
            );
        }
    }
    Ok(())
}

/// `net crash`: `DRV_CRASH` to `net.drv`, then wait for the kernel's restart of it (the
/// shell may not kill the driver, a boot program and no descendant of the shell).
pub(crate) fn crash() -> Result<(), String> {
    use ulib::abi::net::{DRV_CRASH, FN_DRV};
    let before = crate::fns::info_for("net crash", FN_DRV)?;
    if before.state != ulib::abi::fnid::FN_UP {
        return Err(format!(
            "net crash: {FN_DRV} has no server now (it is not up)"
        ));
    }
    let ask = ulib::abi::ipc::Msg {
        label: DRV_CRASH,
        ..Default::default()
    };
    match ulib::ipc::call(before.fnid.as_target(), &ask) {
        // Crashed while serving the request: answered `Gone`.
        Err(ulib::abi::Error::Gone) => {}
        Ok((value, _)) if value != 0 => {
            return Err(format!(
                "net crash: the driver refused: {} (start it with 'crashable')",
                ulib::abi::Error::from_code(value)
            ))
        }
        r => return Err(format!("net crash: unexpected answer {r:?}")),
    }
    crate::fns::await_restart("net crash", FN_DRV, before.server, "crashed")
}

/// Is function `name` served (registered and up)?
fn served(name: &str) -> bool {
    ulib::fnid::list_local().is_ok_and(|l| {
        l.iter()
            .any(|f| f.name() == name && f.state == ulib::abi::fnid::FN_UP)
    })
}

/// Is a `netd` running already (a boot program, as `cargo xtask run --machines N` starts
/// one with the machine's static address on core 0 before the shell), though it may not
/// serve yet (it waits for the driver first)?
fn netd_running() -> bool {
    let mut ps = alloc::vec![ulib::abi::ProcInfo::EMPTY; 1024];
    let n = sys::processes(&mut ps).unwrap_or(0);
    ps[..n]
        .iter()
        .any(|p| p.name() == "netd" && p.state != ulib::abi::STATE_ZOMBIE)
}

/// At the shell's start: if the machine has a virtio-net function and nothing serves
/// `net.udp`, `net up` with `netd` on core 0, beside the driver (as `user/boot.cfg`'s
/// `net.server.core` places it by default). The driver `netdrv` runs at driver priority,
/// which the shell may not give: it is a boot program (`driver=0:netdrv`, as `cargo xtask
/// run --net` boots); `netd` waits for it.
///
/// Why beside the driver: every frame passes between the two, and on multi-threaded TCG a
/// hop between cores wakes a halted vCPU, which on a busy host waits for a host core.
/// `bench net` measured the 64-byte echo's round trip at about 0.9 ms with `netd` on core
/// 1 and 0.5 ms with it on core 0 (`net up -c 1` still places it there).
pub(crate) fn auto_up(jobs: &mut Vec<(Pid, &'static str)>) {
    let nic = ulib::dev::list().is_ok_and(|l| {
        l.iter()
            .any(|f| f.vendor == 0x1af4 && matches!(f.device, 0x1041 | 0x1000))
    });
    if !nic || served(net::FN_UDP) || netd_running() {
        return;
    }
    println!("net: a virtio-net device: net up -c 0");
    if let Err(e) = up(&["-c", "0"], jobs) {
        // Not a command of the person at the console: no `error: ` line.
        println!("net: {e}");
    }
}

/// `net up [ADDR/PREFIX GATEWAY] [-c CORE]`: start `netd` (on CORE), adding it to `jobs`
/// (also when it fails later: it is the shell's job then), and wait for an address.
pub(crate) fn up(args: &[&str], jobs: &mut Vec<(Pid, &'static str)>) -> Result<(), String> {
    if served(net::FN_UDP) {
        return Err(String::from("net up: netd serves already"));
    }
    let mut args: Vec<&str> = args.to_vec();
    let mut core = None;
    if let Some(at) = args.iter().position(|a| *a == "-c") {
        let bad = || String::from("net up: -c takes a core (e.g. -c 2)");
        let v = args.get(at + 1).ok_or_else(bad)?;
        core = Some(v.parse::<usize>().map_err(|_| bad())?);
        args.drain(at..at + 2);
    }
    let netd = match core {
        Some(c) => sys::spawn_on("netd", &args, Priority::Server, c),
        None => sys::spawn("netd", &args, Priority::Server),
    }
    .map_err(|e| format!("net up: start netd: {e}"))?;
    jobs.push((netd, "netd"));
    let start = sys::clock_ns().unwrap_or(0);
    loop {
        if let Ok(i) = net::info() {
            if i[0] != 0 {
                println!("net up: address {}/{}", Ipv4::from_word(i[0]), i[1]);
                return Ok(());
            }
        }
        let mut ps = alloc::vec![ulib::abi::ProcInfo::EMPTY; 1024];
        let n = sys::processes(&mut ps).unwrap_or(0);
        let ended = !ps[..n]
            .iter()
            .any(|p| p.pid == netd && p.state != ulib::abi::STATE_ZOMBIE);
        if ended {
            return Err(String::from("net up: netd ended (its line above says why)"));
        }
        if sys::clock_ns().unwrap_or(0).saturating_sub(start) > UP_WAIT_NS {
            let drv = if served(ulib::abi::net::FN_DRV) {
                ""
            } else {
                " (no driver serves net.drv: boot with driver=CORE:netdrv)"
            };
            return Err(format!("net up: no address after 20 s{drv}"));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
}
