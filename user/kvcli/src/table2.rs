//! `kvcli table2 SAMPLES OPS`: P3 Table 2's comparison on our platform, the guest side of
//! `cargo xtask bench ant`. AnT measured what moving a server's state into its state ICA
//! costs (4.1%, indirect access through a pointer); here the same `kv` server runs twice on
//! this core, first with its table in the function's state ICA (`kv SIZE`), then in its own
//! heap (`kv SIZE local`), and the same client work is timed against each: OPS pairs of a
//! 1 KiB `PUT` and the `GET` that reads it back (P3 sent 1,024-byte datagrams), over
//! [`KEYS`] keys filled beforehand, each `GET` checked. One `BENCH` sample per OPS pairs
//! (`ulib::bench`), the instructions per pair under `-icount shift=0`.
//!
//! Each `kv` is started by this program (at its own priority, application: a program may
//! not start one that outranks it; both variants alike), killed after its samples, and its function id
//! unregistered (and the state ICA closed), so the second starts as the first did.

use crate::{wait, with_client};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::Priority;
use ulib::{bench, fnid, res, sys};

/// Keys the pairs cycle through (filled before the samples, so every PUT replaces).
const KEYS: usize = 32;
/// The value each PUT stores: P3's datagram size.
const VALUE: usize = 1024;
/// The state ICA (and the table) of either variant.
const STATE: &str = "256K";

/// Both variants, state ICA first.
pub fn run(samples: &str, ops: &str) -> Result<i32, String> {
    let samples: usize = samples.parse().map_err(|_| "table2 SAMPLES OPS")?;
    let ops: u64 = ops.parse().map_err(|_| "table2 SAMPLES OPS")?;
    for (case, args) in [
        ("kv PUT+GET 1 KiB, state in the state ICA", &[STATE][..]),
        (
            "kv PUT+GET 1 KiB, state in the process",
            &[STATE, "local"][..],
        ),
    ] {
        variant(case, args, samples, ops.max(1))?;
    }
    bench::done();
    Ok(0)
}

/// Start `kv ARGS`, time `samples` x `ops` pairs against it, then end it and unregister.
fn variant(case: &str, args: &[&str], samples: usize, ops: u64) -> Result<(), String> {
    // At the client's own priority: a program may not start one that outranks it.
    let pid = sys::spawn("kv", args, Priority::App).map_err(|e| format!("spawn kv: {e}"))?;
    let measured = wait(120).and_then(|_| with_client(|c| pairs(c, case, samples, ops)));
    // Whatever happened: the state ICA (if any) goes, the server ends, the id is withdrawn.
    let id = fnid::lookup("kv");
    let state = id.ok().and_then(|id| fnid::state(id, None).ok().flatten());
    let _ = sys::kill(pid);
    let _ = sys::wait(Some(pid));
    if let Ok(id) = id {
        fnid::unregister(id).map_err(|e| format!("unregister kv: {e}"))?;
    }
    if let Some(s) = state {
        res::close(s).map_err(|e| format!("close the state ICA: {e}"))?;
    }
    measured.map(drop)
}

/// Fill the keys, then the samples.
fn pairs(c: &mut crate::Client, case: &str, samples: usize, ops: u64) -> Result<i32, String> {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("table2-{i}")).collect();
    let value = [b'v'; VALUE];
    for k in &keys {
        c.put(k.as_bytes(), &value)
            .map_err(|e| format!("fill {k}: {e}"))?;
    }
    let mut at = 0;
    bench::samples(case, samples, ops, |n| {
        let t0 = bench::rdtsc();
        for _ in 0..n {
            let k = keys[at % KEYS].as_bytes();
            at += 1;
            c.put(k, &value).map_err(|_| "PUT failed")?;
            let got = c.get(k).map_err(|_| "GET failed")?;
            if got.len() != VALUE || got.iter().any(|&b| b != b'v') {
                return Err("GET returned another value");
            }
        }
        Ok(bench::rdtsc() - t0)
    })?;
    for k in &keys {
        let _ = c.del(k.as_bytes());
    }
    Ok(0)
}
