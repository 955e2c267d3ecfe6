//! Benchmark programs' common part: the clock and the `BENCH` line protocol.
//!
//! A benchmark program measures each case in samples, each the mean over `ops`
//! operations timed with the time-stamp counter (under QEMU's `-icount shift=0` one tick is
//! one instruction), and prints one line per sample, which `cargo xtask bench` parses:
//! `BENCH {"peer":"musubi","case":"...","unit":"instructions","per_op":123.4}`. Sample 0
//! is a warm-up and is not printed. The program ends with `BENCH done`.

use crate::println;

/// The time-stamp counter.
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Measure `case`: `samples` printed samples (after one warm-up), each `run(ops)` returning
/// the ticks `ops` operations took. On an error prints a `BENCH error` line and returns it.
pub fn samples(
    case: &str,
    samples: usize,
    ops: u64,
    mut run: impl FnMut(u64) -> Result<u64, &'static str>,
) -> Result<(), &'static str> {
    for sample in 0..=samples {
        let ticks = run(ops).inspect_err(|e| {
            println!("BENCH error {{\"case\":\"{case}\",\"error\":\"{e}\"}}");
        })?;
        if sample > 0 {
            let per_op = ticks as f64 / ops as f64;
            println!(
                "BENCH {{\"peer\":\"musubi\",\"case\":\"{case}\",\"unit\":\"instructions\",\"per_op\":{per_op:.1}}}"
            );
        }
    }
    Ok(())
}

/// The last line of a benchmark run.
pub fn done() {
    println!("BENCH done");
}
