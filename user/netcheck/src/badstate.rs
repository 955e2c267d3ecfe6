//! `netcheck badstate`: `netd` given an address or a state it cannot serve ends with a clear
//! error instead of a panic (smoltcp panics on an interface address that is not one host's,
//! and a slice of a state too small for a header panicked), so a corrupt state cannot take
//! `net.udp` down for every later `netd`:
//!
//! 1. `netd 224.0.0.1/24 ...` and `netd 255.255.255.255/24 ...`, and a gateway of
//!    255.255.255.255 or 224.0.0.1 (smoltcp asserts a unicast neighbour: such a gateway
//!    ended `netd` at the first datagram routed through it, found by an audit): refused on
//!    the command line (usage, exit 2);
//! 2. a state ICA of 4 bytes, and well-formed states whose address is 224.0.0.1 or whose
//!    gateway is 255.255.255.255, each set
//!    as `net.udp`'s state by this program (as any server of the function may), which then
//!    lets the function go down: the next `netd` registers, finds the state, refuses it
//!    and exits 1.
//!
//! This program plays `net.drv` meanwhile (`netd` looks for its driver first). Afterwards
//! `net.udp` is withdrawn (its state forgotten) and the vregions closed.

use crate::peer::Peer;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::fnid::FnId;
use ulib::abi::net::FN_UDP;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Pid, WaitStatus, ENDED_EXIT};
use ulib::{fnid, ipc, res, sys};

/// Where a state made here is mapped while it is written.
const STATE_AT: u64 = 0x0000_5709_0000_0000;
/// Hang guard for one `netd` to end.
const END_LIMIT_NS: u64 = 60_000_000_000;

/// The checks above; `p` serves `net.drv`. Failures go to `fails`; the vregions made are
/// left in `made` for the caller to close.
pub fn run(p: &mut Peer, fails: &mut Vec<String>, made: &mut Vec<ResId>) -> Result<(), String> {
    for (addr, gw) in [
        ("224.0.0.1/24", "10.0.2.2"),
        ("255.255.255.255/24", "10.0.2.2"),
        ("10.0.2.15/24", "255.255.255.255"),
        ("10.0.2.15/24", "224.0.0.1"),
    ] {
        let s = netd_ends(p, &[addr, gw])?;
        if s.how != ENDED_EXIT || s.code != 2 {
            fails.push(format!(
                "netd {addr} {gw}: ended {s:?}, not refused (exit 2)"
            ));
        }
    }
    let tiny = res::open_vregion("here/vregion/netcheck-st4", 4, Rights::OWNER_ALL)
        .map_err(|e| format!("4-byte vregion: {e}"))?;
    made.push(tiny);
    check_state(p, tiny, "a state ICA of 4 bytes", fails)?;
    for (name, addr, gw, what) in [
        (
            "netcheck-stm",
            0xe000_0001,
            0x0a00_0202,
            "a state whose address is 224.0.0.1",
        ),
        (
            "netcheck-stg",
            0x0a00_020f,
            0xffff_ffff,
            "a state whose gateway is 255.255.255.255",
        ),
    ] {
        let state = state_with(name, addr, gw, made)?;
        check_state(p, state, what, fails)?;
    }
    Ok(())
}

/// A new vregion `name` holding a well-formed state whose config is `addr`/24 with gateway
/// `gw` (kept in `made` for the caller to close).
fn state_with(name: &str, addr: u32, gw: u32, made: &mut Vec<ResId>) -> Result<ResId, String> {
    let size = netstate::area_size(netstate::SOCKETS, netstate::DEPTH);
    let state = res::open_vregion(
        &format!("here/vregion/{name}"),
        size as u64,
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("state vregion: {e}"))?;
    made.push(state);
    res::attach_here(state, STATE_AT, true).map_err(|e| format!("attach: {e}"))?;
    // SAFETY: the vregion (`size` bytes) is mapped writable at STATE_AT until the detach
    // below, and nothing else in this program uses that range.
    let area = unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, size) };
    let formatted = netstate::format(area, netstate::SOCKETS, netstate::DEPTH).map(|mut n| {
        n.set_config(addr, 24, gw, netstate::CONFIG_STATIC);
    });
    let _ = res::detach_here(STATE_AT);
    formatted.map_err(|e| format!("format: {e}"))?;
    Ok(state)
}

/// Make `state` the state ICA of `net.udp` (registered here, then let go down), start
/// `netd`: it must refuse the state and exit 1.
fn check_state(
    p: &mut Peer,
    state: ResId,
    what: &str,
    fails: &mut Vec<String>,
) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let ep = ipc::open_endpoint(
        &format!("here/endpoint/nc-st-{}", me.serial()),
        Rights(0x2f),
    )
    .map_err(|e| format!("endpoint: {e}"))?;
    let set = register(ep)
        .and_then(|id| fnid::state(id, Some(state)).map_err(|e| format!("FN_STATE {what}: {e}")));
    // Its endpoint closed, the function is down and keeps its state for the next server.
    let _ = res::close(ep);
    set?;
    let s = netd_ends(p, &["10.0.2.15/24", "10.0.2.2"])?;
    if s.how != ENDED_EXIT || s.code != 1 {
        fails.push(format!(
            "netd with {what}: ended {s:?}, not refused (exit 1)"
        ));
    }
    Ok(())
}

/// Register `net.udp` with `ep`: afresh, or again while it is down (a `netd` that ended).
fn register(ep: ResId) -> Result<FnId, String> {
    fnid::register(FN_UDP, ep).map_err(|e| format!("register {FN_UDP}: {e}"))
}

/// Start `netd ARGS` and serve the driver's side until it ends; its status.
fn netd_ends(p: &mut Peer, args: &[&str]) -> Result<WaitStatus, String> {
    let pid = sys::spawn("netd", args, ulib::abi::Priority::App)
        .map_err(|e| format!("start netd: {e}"))?;
    let start = sys::clock_ns().unwrap_or(0);
    loop {
        p.serve(2_000_000);
        match sys::wait_timeout(Some(pid), 0) {
            Ok((_, s)) => return Ok(s),
            Err(ulib::abi::Error::TimedOut) => {}
            Err(e) => return Err(format!("wait for netd {args:?}: {e}")),
        }
        if sys::clock_ns().unwrap_or(0).saturating_sub(start) > END_LIMIT_NS {
            end(pid);
            return Err(format!("netd {args:?} still running after 60 s"));
        }
    }
}

fn end(pid: Pid) {
    let _ = sys::kill(pid);
    let _ = sys::wait(Some(pid));
}
