//! `timers check [WAITS]` and `timers bench SAMPLES`: whether the four kinds of timed wait
//! end by their own deadlines, and how late, against their deadlines.
//!
//! The kinds: `sleep` (`SLEEP`), `timer` (`SUBMIT(TIMER)` then `COLLECT` of its ticket),
//! `recv timeout` (`RECV` on an endpoint nobody sends to) and `collect timeout` (`COLLECT`
//! of a long timer that is not done). Each wait of D ns starts at `CLOCK` = t0 and its
//! error is `CLOCK` at return - (t0 + D): the kernel's deadline is a little later than
//! t0 + D (it reads the clock after the entry), so the error includes the system call's
//! way in and out and is never below the true lateness.
//!
//! `check`: for D = 1, 3 and 15 ms, WAITS (default 3) waits of each kind back to back.
//! Every one must end with the right result and not before its deadline, and none may be
//! ended by a later tick than its deadline (`CORES`' `late_wakes` of its core must not
//! grow: a wait ended by a timer interrupt programmed for after its deadline, which means
//! its own timer was not armed). That is an event, not wall time, so a busy host cannot
//! fail it; were deadlines ignored, the tick after each deadline would end the waits
//! shorter than it. (Counting the waits its timer ended instead, `deadline_wakes`, failed
//! on a busy host: a wait whose deadline passes before it blocks, its vCPU stalled by
//! the host, rightly ends with no timer at all.) The best lateness of each kind and
//! length is printed, as information. Prints `timers: ok` and exits 0, or the first
//! failure and exits 1.
//!
//! `bench`: SAMPLES waits of each kind for each D in 0.1, 1, 3 and 15 ms, printed as
//! `BENCH {"peer":"musubi","case":"sleep 1 ms","unit":"us","per_op":2.1}` (the error in
//! microseconds), then `BENCH done`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{ipc, println, sys};

ulib::main!(main);

const KINDS: [&str; 4] = ["sleep", "timer", "recv timeout", "collect timeout"];
/// A timer that is never done during the run (what `collect timeout` waits on).
const LONG_NS: u64 = 3_600_000_000_000;

fn main(args: &[&str]) -> i32 {
    let arg = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let r = match (args.get(1).copied(), arg(2)) {
        (Some("check"), waits) if args.len() <= 3 && (waits.is_some() || args.len() == 2) => {
            check(waits.unwrap_or(3).max(1))
        }
        (Some("bench"), Some(samples)) if samples > 0 => bench(samples),
        _ => {
            println!("usage: timers check [WAITS] | timers bench SAMPLES");
            return 2;
        }
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            println!("timers: FAIL {e}");
            if args.get(1) == Some(&"bench") {
                println!("BENCH error {{\"case\":\"timers\",\"error\":\"{e}\"}}");
            }
            1
        }
    }
}

/// What the waits need: an endpoint of our own and a timer that stays pending.
struct Setup {
    endpoint: ResId,
    long_timer: u64,
}

fn setup() -> Result<Setup, String> {
    // Under a name reserved for this process (`abi::res::reserved_for`): under a fixed
    // one, any program started first could keep the benchmark from running.
    let me = ulib::sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let name = format!("here/endpoint/p{}-timers", me.in_machine());
    let endpoint = ipc::open_endpoint(&name, Rights(0x2f)).map_err(|e| format!("endpoint: {e}"))?;
    let long_timer = ipc::submit(&ipc::timer(LONG_NS)).map_err(|e| format!("long timer: {e}"))?;
    Ok(Setup {
        endpoint,
        long_timer,
    })
}

/// The late wakes counted so far by the core this program runs on: timed waits a later
/// tick than their deadline ended, since their own timer was not armed.
fn late_wakes() -> Result<u64, String> {
    sys::late_wakes().map_err(|e| format!("late wakes (CORES): {e}"))
}

fn clock() -> Result<u64, String> {
    sys::clock_ns().map_err(|e| format!("CLOCK: {e}"))
}

/// One wait of `kind` for `ns`: how late it ended (ns; negative if early).
fn wait(s: &Setup, kind: &str, ns: u64) -> Result<i64, String> {
    let t0 = clock()?;
    let expect_timeout = |r: Result<(), Error>| match r {
        Err(Error::TimedOut) => Ok(()),
        other => Err(format!("{kind} {ns} ns: expected TimedOut, got {other:?}")),
    };
    match kind {
        "sleep" => sys::sleep_ns(ns).map_err(|e| format!("sleep: {e}"))?,
        "timer" => {
            let t = ipc::submit(&ipc::timer(ns)).map_err(|e| format!("timer: {e}"))?;
            let c = ipc::collect(t, u64::MAX).map_err(|e| format!("collect timer: {e}"))?;
            if c.ticket != t || c.status != 0 {
                return Err(format!("timer: completion {c:?} for ticket {t}"));
            }
        }
        "recv timeout" => expect_timeout(ipc::recv(s.endpoint, ns).map(drop))?,
        _ => expect_timeout(ipc::collect(s.long_timer, ns).map(drop))?,
    }
    let t1 = clock()?;
    Ok(t1 as i64 - (t0 + ns) as i64)
}

fn check(waits: u64) -> Result<(), String> {
    let s = setup()?;
    for ms in [1u64, 3, 15] {
        let ns = ms * 1_000_000;
        for kind in KINDS {
            let mut best = i64::MAX;
            for _ in 0..waits {
                let late_before = late_wakes()?;
                let late = wait(&s, kind, ns)?;
                if late < 0 {
                    return Err(format!(
                        "{kind} {ms} ms ended {} ns before its deadline",
                        -late
                    ));
                }
                // Judged by the event, not by how late it ended (a busy host stretches
                // that): no timed wait of this core was ended by a later tick. (A wait
                // whose deadline passed before it blocked, its vCPU stalled by the host,
                // ends with no timer at all, and that is right.)
                if late_wakes()? != late_before {
                    return Err(format!(
                        "{kind} {ms} ms ended {late} ns late, by a later tick than its deadline"
                    ));
                }
                best = best.min(late);
            }
            println!("timers: {kind} {ms} ms: best of {waits} {best} ns late");
        }
    }
    println!("timers: ok");
    Ok(())
}

fn bench(samples: u64) -> Result<(), String> {
    let s = setup()?;
    for us in [100u64, 1000, 3000, 15000] {
        let name = if us < 1000 {
            format!("{}.{} ms", us / 1000, us % 1000 / 100)
        } else {
            format!("{} ms", us / 1000)
        };
        for kind in KINDS {
            // One wait to warm up (first use of the paths), not printed.
            wait(&s, kind, us * 1000)?;
            for _ in 0..samples {
                let late = wait(&s, kind, us * 1000)?;
                let per_op = late as f64 / 1000.0;
                println!(
                    "BENCH {{\"peer\":\"musubi\",\"case\":\"{kind} {name}\",\"unit\":\"us\",\"per_op\":{per_op:.3}}}"
                );
            }
        }
    }
    println!("BENCH done");
    Ok(())
}
