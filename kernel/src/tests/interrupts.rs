//! IPIs between every pair of cores, broadcast IPIs, and interrupt-driven serial input.

use crate::ktest::TestResult;
use crate::{kassert, ktest, percore, smp, time};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

fn ipis_from_matrix(n: usize) -> Vec<Vec<u64>> {
    (0..n)
        .map(|to| {
            (0..n)
                .map(|from| percore::of(to).stats.ipis_from[from].load(Ordering::Relaxed))
                .collect()
        })
        .collect()
}

fn kick_each_other_core(_: u64) -> u64 {
    let me = percore::current_core();
    for c in (0..smp::cores_planned()).filter(|&c| c != me) {
        smp::kick(c);
    }
    0
}

fn broadcast(_: u64) -> u64 {
    smp::kick_all_others();
    0
}

/// Wait until every ordered pair (from, to), from != to, counted more IPIs than `before`.
fn wait_all_pairs(before: &[Vec<u64>]) -> TestResult {
    let n = before.len();
    let all_seen = || {
        let now = ipis_from_matrix(n);
        (0..n).all(|to| (0..n).all(|from| from == to || now[to][from] > before[to][from]))
    };
    if time::wait_until(2_000_000_000, all_seen) {
        return Ok(());
    }
    let now = ipis_from_matrix(n);
    let missing: Vec<_> = (0..n)
        .flat_map(|to| (0..n).map(move |from| (from, to)))
        .filter(|&(from, to)| from != to && now[to][from] <= before[to][from])
        .collect();
    Err(alloc::format!(
        "no IPI arrived for (from, to) pairs {missing:?}"
    ))
}

ktest! {
    /// Every core sends an IPI to every other core, and each one arrives, counted per sender.
    fn ipi_every_pair() -> TestResult {
        let n = smp::cores_planned();
        let before = ipis_from_matrix(n);
        for c in 0..n {
            let r = smp::call_on(c, kick_each_other_core, 0, 2_000_000_000);
            kassert!(r.is_ok(), "core {c} could not be asked to send: {r:?}");
        }
        wait_all_pairs(&before)
    }
}

ktest! {
    /// Every core broadcasts one IPI to all others, and each one arrives.
    fn ipi_broadcast_from_every_core() -> TestResult {
        let n = smp::cores_planned();
        let before = ipis_from_matrix(n);
        for c in 0..n {
            let r = smp::call_on(c, broadcast, 0, 2_000_000_000);
            kassert!(r.is_ok(), "core {c} could not be asked to broadcast: {r:?}");
        }
        wait_all_pairs(&before)
    }
}

fn square_plus_core(x: u64) -> u64 {
    x * x + percore::current_core() as u64
}

ktest! {
    /// A function posted to another core's mailbox runs there and its result comes back.
    fn call_on_runs_on_target() -> TestResult {
        for c in 0..smp::cores_planned() {
            let r = smp::call_on(c, square_plus_core, 7, 2_000_000_000);
            kassert!(r == Ok(49 + c as u64), "core {c} answered {r:?}");
        }
        let r = smp::call_on(abi::MAX_CORES - 1, square_plus_core, 1, 1_000_000);
        kassert!(r == Err(smp::CallError::NoSuchCore) || smp::cores_planned() == abi::MAX_CORES, "call to a core that is not online gave {r:?}");
        Ok(())
    }
}

ktest! {
    /// Bytes typed on the serial console arrive by interrupt (IOAPIC -> core 0). The test
    /// asks for input with a marker line; `cargo xtask test` answers with "ping".
    fn serial_input_by_interrupt() -> TestResult {
        let irqs = percore::of(0).stats.serial_irqs.load(Ordering::Relaxed);
        while crate::console::read_byte().is_some() {}
        crate::kprint!("{}\n", abi::protocol::KTEST_INPUT);
        let mut got = Vec::new();
        let ok = time::wait_until(10_000_000_000, || {
            while let Some(b) = crate::console::read_byte() {
                got.push(b);
            }
            got.windows(4).any(|w| w == b"ping")
        });
        kassert!(ok, "no 'ping' on the serial port within 10 s (got {:?})", core::str::from_utf8(&got));
        let now = percore::of(0).stats.serial_irqs.load(Ordering::Relaxed);
        kassert!(now > irqs, "bytes arrived but no serial interrupt was counted");
        Ok(())
    }
}
