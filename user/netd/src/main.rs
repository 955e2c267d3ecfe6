//! `netd [ADDR/PREFIX GATEWAY] [takeover] [local]`: the UDP/IP server of issue 15 (P3's
//! communication control server), on smoltcp (IPv4, ARP, ICMP echo, UDP, DHCPv4 client).
//!
//! It serves the function `net.udp` (`abi::net`, `ulib::net` has the socket protocol):
//! programs bind ports, send and receive datagrams by calling it; the driver `net.drv`
//! submits received frames to it, and it submits frames to send to the driver ([`dev`]).
//! Neither names the other's process or core.
//!
//! Its state lives in the function's *state ICA* (`libs/netstate`: the address, the bound
//! ports and their owners, each port's bounded queue of received datagrams, the counters),
//! mapped at [`STATE_AT`]: a new server of `net.udp` (a restart, or `netd takeover`) finds
//! it there. A corrupt state is refused with a clear error (the server exits 1, the state is
//! left for inspection), as is one too small for a header or whose address no host may have
//! (broadcast, multicast: smoltcp would panic on it; such an address on the command line is
//! a usage error).
//!
//! The address comes from the state (a later server keeps it), else from the command line
//! (`netd 10.0.2.15/24 10.0.2.2`), else from DHCP (QEMU's user network answers with
//! 10.0.2.15/24, gateway 10.0.2.2). Datagrams to a port nobody bound are answered with ICMP
//! port unreachable (smoltcp does it when no socket takes a datagram).
//!
//! `takeover` (live replacement, `FN_TAKEOVER`, as `kv takeover`): it checks the state ICA
//! and the driver and makes everything that does not need the state (smoltcp's interface,
//! socket buffers: `serve::Prepared`) first, then takes `net.udp` over; the old server
//! answers the receives it holds with `Again` when the kernel gives it the retire notice
//! (`ulib::net` sends them again, to this server), and ends. This one then attaches the
//! state, opens the ports it lists and serves, printing its `serving` line once the
//! requests queued meanwhile are answered.
//!
//! `local` (a measuring knob, as `kv local`): the state is set up (or found) in the state
//! ICA as always, then copied into the heap and served from there, so that `cargo xtask
//! bench net` can compare the two (P3 Table 2); a later server finds the ICA as it was when
//! this one started, not what this one did since.
//!
//! Prints `netd: serving fnN.G ...` once it serves.
#![no_std]
#![no_main]

extern crate alloc;

mod dev;
mod serve;

use alloc::format;
use alloc::string::String;
use dev::NetDev;
use netstate::{CONFIG_STATIC, DEPTH, SOCKETS};
use smoltcp::iface::{Config, Interface};
use smoltcp::wire::{EthernetAddress, HardwareAddress};
use ulib::abi::fnid::FnId;
use ulib::abi::res::{ResId, ResType, Rights};
use ulib::abi::Error;
use ulib::net::{Ipv4, FN_UDP};
use ulib::{fnid, println, res, sys};

ulib::main!(main);

/// Where the state ICA is mapped: the same in every server of `net.udp`.
pub const STATE_AT: u64 = 0x0000_5f80_0000_0000;
/// An endpoint others may send to (write) and only its owner receives on.
const ENDPOINT_RIGHTS: Rights = Rights(0x2f);
/// How long a takeover waits for the old server to finish its request step.
const TAKEOVER_TIMEOUT_NS: u64 = 2_000_000_000;
/// How long `netd` waits for `net.drv` at start (x 10 ms).
const DRIVER_TRIES: u32 = 1000;

struct Options {
    /// Address, prefix, gateway (network order words).
    fixed: Option<(u32, u32, u32)>,
    takeover: bool,
    local: bool,
}

/// `a.b.c.d/p`: an address one host may have (not broadcast or multicast: smoltcp would
/// panic on it) and a prefix.
fn parse_cidr(s: &str) -> Option<(u32, u32)> {
    let (a, p) = s.split_once('/')?;
    let p: u32 = p.parse().ok().filter(|p| *p <= 32)?;
    let a = Ipv4::parse(a)?.to_word() as u32;
    netstate::is_unicast(a).then_some((a, p))
}

/// A gateway: a unicast address, or `0.0.0.0` for none (a broadcast or multicast one would
/// end `netd` at the first datagram routed through it: smoltcp asserts a unicast
/// neighbour).
fn parse_gateway(s: &str) -> Option<u32> {
    let g = Ipv4::parse(s)?.to_word() as u32;
    (g == 0 || netstate::is_unicast(g)).then_some(g)
}

fn main(args: &[&str]) -> i32 {
    let mut o = Options {
        fixed: None,
        takeover: false,
        local: false,
    };
    // `replace net.udp netd ...` starts `netd takeover ...`: `takeover` may stand anywhere.
    o.takeover = args[1..].contains(&"takeover");
    o.local = args[1..].contains(&"local");
    let rest: alloc::vec::Vec<&str> = args[1..]
        .iter()
        .copied()
        .filter(|a| *a != "takeover" && *a != "local")
        .collect();
    match rest.as_slice() {
        [] => {}
        [cidr, gw] => match (parse_cidr(cidr), parse_gateway(gw)) {
            (Some((a, p)), Some(g)) => o.fixed = Some((a, p, g)),
            _ => return usage(),
        },
        _ => return usage(),
    }
    match run(&o) {
        Ok(()) => 0,
        Err(e) => {
            println!("netd: {e}");
            1
        }
    }
}

fn usage() -> i32 {
    println!("netd: usage: netd [ADDR/PREFIX GATEWAY] [takeover] [local]");
    2
}

/// The state ICA's size.
fn state_size() -> u64 {
    (netstate::area_size(SOCKETS, DEPTH) as u64).next_multiple_of(4096)
}

fn run(o: &Options) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    // Names nobody can guess (`res::open_fresh`), here and for the state and the transmit
    // pages: under this server's serial, a program could take the names the next `netd`
    // would use (`net up`, `replace`) and keep it from starting.
    let ep = res::open_fresh("here/endpoint/netd", &[], ENDPOINT_RIGHTS)
        .map_err(|e| format!("endpoint: {e}"))?;
    let mut dev = NetDev::new()?;
    // The driver first: a server that cannot reach it does not take the name.
    let mac =
        dev::driver_mac(DRIVER_TRIES).map_err(|e| format!("no driver ({FN_DRV_NAME}): {e}"))?;
    let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
    cfg.random_seed = sys::clock_ns().unwrap_or(1) ^ me.0;
    let iface = Interface::new(cfg, &mut dev, serve::now());
    // Everything that does not need the state is made before a takeover: the old server
    // serves meanwhile, and stops only while this one attaches the state and opens its ports.
    let prepared = serve::Prepared::new(iface, dev, mac);
    let (id, net, how, len) = if o.takeover {
        take_over(ep)?
    } else {
        let id = fnid::register(FN_UDP, ep).map_err(|e| match e {
            Error::AlreadyExists => {
                String::from("net.udp is served already (netd takeover replaces it)")
            }
            e => format!("register {FN_UDP}: {e}"),
        })?;
        let (net, how, len) = state(id)?;
        (id, net, how, len)
    };
    let (net, how) = if o.local {
        // Ends the only borrow of the mapping before it is read again (no destructor runs).
        #[allow(clippy::drop_non_drop)]
        drop(net);
        // The heap copy lives as long as the process, like the mapping it replaces.
        let copy: &'static mut [u8] = area(len).to_vec().leak();
        let n = netstate::open(copy).map_err(|e| format!("local copy of the state: {e}"))?;
        (
            n,
            format!("in the process (local; copied from the state {how})"),
        )
    } else {
        (net, how)
    };
    let mut net = net;
    let configured = net.header().addr != 0;
    if !configured {
        if let Some((a, p, g)) = o.fixed {
            net.set_config(a, p, g, CONFIG_STATIC);
        }
    }
    let dhcp = !configured && o.fixed.is_none();
    let mut server = serve::Server::new(ep, net, prepared, dhcp);
    let h = server.net.header();
    let line = format!(
        "netd: serving {id} as {me}, state {how}, mac {}, address {}/{} gateway {}{}",
        EthernetAddress(mac),
        Ipv4::from_word(u64::from(h.addr)),
        h.prefix,
        Ipv4::from_word(u64::from(h.gateway)),
        if dhcp { " (asking DHCP)" } else { "" }
    );
    server.run(line)
}

const FN_DRV_NAME: &str = ulib::abi::net::FN_DRV;

/// The state area mapped at [`STATE_AT`], `len` bytes.
fn area(len: u64) -> &'static mut [u8] {
    // SAFETY: the state ICA (`len` bytes) is mapped writable at STATE_AT for the rest of
    // this process's life (it is never detached), and nothing else in this process uses that
    // range: the slice is the only way to it.
    unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, len as usize) }
}

/// Open the state found in `region` (`len` bytes, mapped): formatted if it holds zeroes.
fn open_found(region: ResId, len: u64) -> Result<(netstate::Net<'static>, String), String> {
    // Any vregion may have been made the state (`FN_STATE`): one too small for a header is
    // refused here, before its first 8 bytes are looked at.
    if len < netstate::area_size(1, 1) as u64 {
        return Err(format!(
            "state ICA {region} of {len} bytes is too small for a netd state"
        ));
    }
    let a = area(len);
    if a[..8] == [0; 8] {
        let n = netstate::format(a, SOCKETS, DEPTH).map_err(|e| format!("format: {e}"))?;
        return Ok((n, format!("in state ICA {region} (formatted)")));
    }
    let n = netstate::open(a).map_err(|e| format!("state ICA {region} refused: {e}"))?;
    let bound = n.bound().count();
    Ok((
        n,
        format!("in state ICA {region} (found, {bound} ports bound)"),
    ))
}

/// The state of a fresh registration: the one an earlier server left, or a new one.
fn state(id: FnId) -> Result<(netstate::Net<'static>, String, u64), String> {
    if let Some(region) = fnid::state(id, None).map_err(|e| format!("FN_STATE: {e}"))? {
        let info = res::info(region).map_err(|e| format!("state ICA {region}: {e}"))?;
        res::attach_here(region, STATE_AT, true)
            .map_err(|e| format!("attach state ICA {region}: {e}"))?;
        let (mut n, how) = open_found(region, info.size)?;
        // The last server ended (a crash, a kill): the ports of programs that ended since
        // are free again.
        let freed = match serve::alive_pids() {
            Some(alive) => n.unbind_ended(|o| alive.contains(&o)),
            None => 0,
        };
        return Ok((
            n,
            format!("{how}, {freed} ports of ended programs closed"),
            info.size,
        ));
    }
    let size = state_size();
    let region = res::open_fresh(
        "here/vregion/netd-state",
        &size.to_le_bytes(),
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("open state ICA of {size} bytes: {e}"))?;
    if let Err(e) = res::attach_here(region, STATE_AT, true) {
        let _ = res::close(region);
        return Err(format!("attach state ICA {region}: {e}"));
    }
    // Formatted before it is handed to the registry: it then always holds a state.
    let n = netstate::format(area(size), SOCKETS, DEPTH).map_err(|e| format!("format: {e}"))?;
    fnid::state(id, Some(region)).map_err(|e| format!("FN_STATE set {region}: {e}"))?;
    Ok((n, format!("in state ICA {region} (new)"), size))
}

/// `netd takeover`: check, take `net.udp` over, then attach its state.
fn take_over(ep: ResId) -> Result<(FnId, netstate::Net<'static>, String, u64), String> {
    let id =
        fnid::lookup(FN_UDP).map_err(|e| format!("takeover: no {FN_UDP} to take over: {e}"))?;
    let region = fnid::state(id, None)
        .map_err(|e| format!("takeover: FN_STATE: {e}"))?
        .ok_or_else(|| format!("takeover: {FN_UDP} has no state ICA"))?;
    let info = res::info(region).map_err(|e| format!("takeover: state ICA {region}: {e}"))?;
    if info.kind != ResType::VRegion as u8 || info.size < netstate::area_size(1, 1) as u64 {
        return Err(format!("takeover: state ICA {region} is not a netd state"));
    }
    let generation = fnid::takeover(id, ep, TAKEOVER_TIMEOUT_NS)
        .map_err(|e| format!("takeover of {id}: {e}"))?;
    fnid::attach_state(region, STATE_AT)
        .map_err(|e| format!("attach state ICA {region} after takeover: {e}"))?;
    let (n, how) = open_found(region, info.size)?;
    Ok((
        id,
        n,
        format!("{how}, took over (server generation {generation})"),
        info.size,
    ))
}
