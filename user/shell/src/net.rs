//! The network commands (issue 15): `net` shows `netd`'s address config and counters (by
//! asking `net.udp`, `ulib::net`); `net up [ARGS]` starts the driver `netdrv` (driver
//! priority) and then `netd ARGS` (server priority) as jobs (`-c DRVCORE,NETDCORE` puts them on
//! those cores) and waits until `netd` serves `net.udp` with an address.

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

/// `net up [ARGS]`: start `netdrv` and `netd ARGS`, adding them to `jobs` (also when it
/// fails later: they are the shell's jobs then).
pub(crate) fn up(args: &[&str], jobs: &mut Vec<(Pid, &'static str)>) -> Result<(), String> {
    if net::server().is_ok() {
        return Err(String::from("net up: netd serves already"));
    }
    // `-c DRVCORE,NETDCORE`: where the two run (default: this core).
    let mut args: Vec<&str> = args.to_vec();
    let mut cores = (None, None);
    if let Some(at) = args.iter().position(|a| *a == "-c") {
        let bad = || String::from("net up: -c takes DRVCORE,NETDCORE (e.g. -c 1,2)");
        let v = args.get(at + 1).ok_or_else(bad)?;
        let (a, b) = v.split_once(',').ok_or_else(bad)?;
        cores = (
            Some(a.parse::<usize>().map_err(|_| bad())?),
            Some(b.parse::<usize>().map_err(|_| bad())?),
        );
        args.drain(at..at + 2);
    }
    let start_on = |prog: &str, a: &[&str], p: Priority, core: Option<usize>| match core {
        Some(c) => sys::spawn_on(prog, a, p, c),
        None => sys::spawn(prog, a, p),
    };
    if ulib::fnid::lookup(ulib::abi::net::FN_DRV).is_err() {
        let drv = start_on("netdrv", &[], Priority::Driver, cores.0)
            .map_err(|e| format!("net up: start netdrv: {e}"))?;
        jobs.push((drv, "netdrv"));
    }
    let netd = start_on("netd", &args, Priority::Server, cores.1)
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
        if sys::clock_ns().unwrap_or(0).saturating_sub(start) > UP_WAIT_NS {
            return Err(String::from("net up: no address after 20 s (the jobs run on)"));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
}
