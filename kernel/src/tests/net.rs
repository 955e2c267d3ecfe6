//! The UDP/IP server `netd` and the socket library `ulib::net` (issue 15), driven from user
//! space by `netcheck`, which plays the NIC driver (`net.drv`) itself: echo, ICMP echo, port
//! unreachable, garbage and truncated frames, a flood beyond a queue, programs' errors; with
//! `netd` and `udpecho` on this core, then on two other cores. Afterwards every core has the
//! memory it had (no frame leaks from the ICAs, the state ICA or the servers).

use super::{frames_after, free_frames_per_core, run_program};
use crate::ktest::TestResult;
use crate::{kassert, ktest, percore, smp};
use abi::res::ResType;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

fn args(r: &[String]) -> Vec<&str> {
    r.iter().map(|s| s.as_str()).collect()
}

/// `netcheck`, then close the vregions its `netd` and `udpecho` left, ended by a kill
/// (vregions outlive their creator): the state ICA (`netcheck` unregistered `net.udp`, the
/// registry forgot it; it stays until closed, as kv's), `netd`'s transmit pages, the socket
/// page of `udpecho`.
fn netcheck(r: &[String]) -> TestResult {
    run_program("netcheck", &args(r), 300)?;
    for core in 0..smp::cores_planned() {
        let Ok(list) = crate::res::list(core) else {
            continue;
        };
        for v in list.iter().filter(|v| {
            v.kind == ResType::VRegion as u8
                && ["netd-state-", "netd-tx-", "udp-"]
                    .iter()
                    .any(|p| v.name().starts_with(p))
        }) {
            crate::res::close(v.id).map_err(|e| format!("close {} ({}): {e}", v.name(), v.id))?;
        }
    }
    Ok(())
}

ktest! {
    /// `netcheck` with everything on this core, and (with 3 or more cores) with `netd` and
    /// `udpecho` on the two next cores; no memory left behind.
    fn netd_serves_over_a_driver_it_does_not_name() -> TestResult {
        let here = percore::current_core();
        let n = smp::cores_planned();
        let mut runs: Vec<Vec<String>> = alloc::vec![Vec::new()];
        if n >= 3 {
            runs.push(alloc::vec![format!("{}", (here + 1) % n), format!("{}", (here + 2) % n)]);
        }
        // Warm-up: heaps and RPCC agents reach their working size.
        for r in &runs {
            netcheck(r)?;
        }
        let before = free_frames_per_core()?;
        for r in &runs {
            netcheck(r)?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

ktest! {
    /// `netcheck badstate`: `netd` refuses an address no host may have, or a gateway no
    /// neighbour may be, on its command line (exit 2) and a state it cannot serve (4 bytes;
    /// a multicast address; a broadcast gateway) with exit 1. A regression: smoltcp
    /// panicked on the address (and, at the first datagram routed off the subnet, on the
    /// gateway: found by an audit), and a slice of the tiny state panicked, so every later
    /// `netd` found the same state and died the same way.
    fn netd_refuses_bad_addresses_and_states() -> TestResult {
        netcheck(&[String::from("badstate")])
    }
}

ktest! {
    /// A program cannot keep `netd` from starting by opening first the names it would
    /// open: with the names the next servers on this core once used taken (`netcheck
    /// squat`: `netd-SERIAL`, `netd-state-SERIAL`, `netd-tx-SERIAL-0..15`, and the socket
    /// pages `udp-SERIAL-0..3` of `ulib::net`, for the next 8 serials), `netcheck`'s
    /// `netd` still starts and serves and its `udpecho` binds (`ulib::res::open_fresh`, as
    /// for the drivers). Before, any program could take them (serials are handed out in
    /// order) and `netd` ended with "endpoint: a resource with that name exists" (and
    /// `udpecho`'s bind, later, the same). `fsd`, `bufd`, `kv` and `machd` open their
    /// endpoints (and `fsd` its state and data ICAs, `machd` its semaphores and pages) the
    /// same way.
    fn net_names_taken_first_do_not_stop_netd() -> TestResult {
        netcheck(&[String::from("squat")])
    }
}
