//! The network commands (issue 15): `net` shows `netd`'s address config and counters (by
//! asking `net.udp`, `ulib::net`); `net up [ARGS]` starts the driver `netdrv` (driver
//! priority) and then `netd ARGS` (server priority) as jobs (`-c DRVCORE,NETDCORE` puts them on
//! those cores) and waits until `netd` serves `net.udp` with an address. At its start the
//! shell does `net up` itself when the machine has a virtio-net device ([`auto_up`]).

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

/// Is function `name` served (registered and up)?
fn served(name: &str) -> bool {
    ulib::fnid::list().is_ok_and(|l| {
        l.iter()
            .any(|f| f.name() == name && f.state == ulib::abi::fnid::FN_UP)
    })
}

/// At the shell's start: if the machine has a virtio-net function that no driver holds and
/// nothing serves `net.drv`, `net up` with the driver on core 1 and `netd` on core 2 (of
/// those there are; `cargo xtask run --net` then has a network at the first prompt).
pub(crate) fn auto_up(jobs: &mut Vec<(Pid, &'static str)>) {
    let nic = ulib::dev::list().is_ok_and(|l| {
        l.iter()
            .any(|f| f.vendor == 0x1af4 && matches!(f.device, 0x1041 | 0x1000) && f.holder == 0)
    });
    if !nic || served(ulib::abi::net::FN_DRV) {
        return;
    }
    let mut buf = [ulib::abi::CoreInfo::default(); 64];
    let n = sys::cores(&mut buf).unwrap_or(1).max(1);
    let cores = format!("{},{}", 1 % n, 2 % n);
    println!("net: a virtio-net device: net up -c {cores}");
    if let Err(e) = up(&["-c", &cores], jobs) {
        // Not a command of the person at the console: no `error: ` line.
        println!("net: {e}");
    }
}

/// `net up [ARGS]`: start `netdrv` and `netd ARGS`, adding them to `jobs` (also when it
/// fails later: they are the shell's jobs then).
pub(crate) fn up(args: &[&str], jobs: &mut Vec<(Pid, &'static str)>) -> Result<(), String> {
    if served(net::FN_UDP) {
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
    if !served(ulib::abi::net::FN_DRV) {
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
