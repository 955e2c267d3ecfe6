//! `cargo xtask bench urpc`: URPC message rings and the call slot (`libs/urpc`) against
//! `crossbeam-channel` and `rtrb`, and against the cache-line ping-pong floor, between two threads pinned to
//! two host cores (host mode, docs/design.md "Measuring").
//!
//! xtask itself is a dev build, so it does not measure: it builds the measuring program,
//! `libs/urpc/examples/hostbench.rs`, with `cargo build --release` (the workspace's
//! release profile, optimised), runs it, and turns the `BENCH {json}` lines it prints (one
//! per sample) into docs/results/urpc.{json,md,png}.

use crate::build::workspace_root;
use crate::results::{Check, Report, Row};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Round trips per sample, and messages per throughput sample (each after a warm-up of a
/// tenth as many, see hostbench.rs).
const ROUND_TRIPS: u64 = 200_000;
const MESSAGES: u64 = 2_000_000;

const FLOOR: &str = "round trip: cache-line ping-pong (floor)";
const FLOOR_2: &str = "round trip: ping-pong, one line each way";
const RT_URPC: &str = "round trip: urpc";
const RT_CALL: &str = "round trip: urpc call slot";
const RT_RTRB: &str = "round trip: rtrb";
const RT_CROSSBEAM: &str = "round trip: crossbeam bounded";
const TP_URPC: &str = "throughput: urpc";
/// The target for the urpc round trip over the one-line floor.
const FLOOR_TARGET: f64 = 1.5;
/// The moonshot for the call slot's round trip over the one-line floor.
const FLOOR_MOONSHOT: f64 = 1.2;
const TP_URPC_BATCH: &str = "throughput: urpc, batches of 16";
const TP_RTRB: &str = "throughput: rtrb";
const TP_CROSSBEAM: &str = "throughput: crossbeam bounded";
const CASES: [&str; 10] = [
    FLOOR,
    FLOOR_2,
    RT_URPC,
    RT_CALL,
    RT_RTRB,
    RT_CROSSBEAM,
    TP_URPC,
    TP_URPC_BATCH,
    TP_RTRB,
    TP_CROSSBEAM,
];

/// Builds the measuring program with optimisations; returns its path.
fn build_hostbench() -> Result<PathBuf> {
    eprintln!("xtask: bench urpc: building libs/urpc/examples/hostbench.rs (release)");
    let out = Command::new(env!("CARGO"))
        .current_dir(workspace_root())
        .args(["build", "--release", "-p", "urpc", "--example", "hostbench"])
        .arg("--message-format=json-render-diagnostics")
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build")?;
    if !out.status.success() {
        bail!("building the urpc host benchmark failed (see above)");
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == "hostbench" {
            if let Some(exe) = v["executable"].as_str() {
                return Ok(PathBuf::from(exe));
            }
        }
    }
    bail!("cargo built no hostbench executable")
}

/// Samples per case, in CASES order, from `BENCH {"case": ..., "value": ...}` lines.
fn samples(stdout: &str) -> Result<Vec<(&'static str, Vec<f64>)>> {
    let mut out: Vec<(&'static str, Vec<f64>)> = CASES.iter().map(|&c| (c, Vec::new())).collect();
    for line in stdout.lines() {
        let Some(json) = line.strip_prefix("BENCH {").map(|j| format!("{{{j}")) else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(&json).with_context(|| format!("bad BENCH line '{line}'"))?;
        let (Some(case), Some(x)) = (v["case"].as_str(), v["value"].as_f64()) else {
            bail!("BENCH line without case/value: {line}");
        };
        match out.iter_mut().find(|(c, _)| *c == case) {
            Some((_, s)) => s.push(x),
            None => bail!("hostbench reported an unknown case '{case}'"),
        }
    }
    if let Some((c, _)) = out.iter().find(|(_, s)| s.is_empty()) {
        bail!("hostbench printed no samples for '{c}'");
    }
    Ok(out)
}

/// The machine, for the notes: (cores, CPU model, runs under a hypervisor).
fn machine() -> (usize, String, bool) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let virt = field("flags").is_some_and(|f| f.split_whitespace().any(|w| w == "hypervisor"));
    (cores, model, virt)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().next().unwrap_or("?").to_string())
        .unwrap_or_else(|_| "?".into())
}

pub fn urpc(runs: usize) -> Result<()> {
    let exe = build_hostbench()?;
    let (cores, model, virt) = machine();
    if cores < 2 {
        bail!("the urpc benchmark needs two cores to pin its threads to; this machine has {cores}");
    }
    let load = loadavg();
    eprintln!(
        "xtask: bench urpc: {} ({runs} runs; cores 0 and 1)",
        exe.display()
    );
    let out = Command::new(&exe)
        .args(["--runs", &runs.to_string()])
        .args(["--round-trips", &ROUND_TRIPS.to_string()])
        .args(["--messages", &MESSAGES.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.lines().any(|l| l == "BENCH done") {
        bail!(
            "the host benchmark failed ({}); its output:\n{stdout}",
            out.status
        );
    }
    // What hostbench says it ran: `INFO ... round_trips=K+WARM messages=M+WARM slots=N`.
    let info = |key: &str| -> String {
        stdout
            .lines()
            .filter(|l| l.starts_with("INFO "))
            .flat_map(|l| l.split_whitespace())
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
            .unwrap_or_else(|| "?".into())
    };
    let warm = |key: &str| {
        info(key)
            .split_once('+')
            .map_or("?".into(), |(_, w)| w.to_string())
    };
    let (slots, warm_rt, warm_tp) = (info("slots"), warm("round_trips"), warm("messages"));
    let rows: Vec<Row> = samples(&stdout)?
        .iter()
        .map(|(c, s)| Row::from_samples(c, s))
        .collect();
    let med = |case: &str| {
        rows.iter()
            .find(|r| r.case == case)
            .map_or(f64::NAN, |r| r.median)
    };
    let spread = |case: &str| {
        rows.iter()
            .find(|r| r.case == case)
            .map_or(f64::NAN, |r| (r.max - r.min) / r.median * 100.0)
    };
    let (floor, floor2, urpc, call, rtrb, xbeam) = (
        med(FLOOR),
        med(FLOOR_2),
        med(RT_URPC),
        med(RT_CALL),
        med(RT_RTRB),
        med(RT_CROSSBEAM),
    );
    let checks = vec![
        Check::computed(
            "urpc round trip / cache-line ping-pong floor (medians)",
            urpc / floor,
            &format!("<= {FLOOR_TARGET}"),
            urpc / floor <= FLOOR_TARGET,
        ),
        Check::computed(
            "crossbeam round trip / urpc round trip (medians)",
            xbeam / urpc,
            ">= 2",
            xbeam / urpc >= 2.0,
        ),
        Check::computed(
            "urpc round trip / ping-pong with one line each way (medians; not a target of the issue)",
            urpc / floor2,
            &format!("<= {FLOOR_TARGET}"),
            urpc / floor2 <= FLOOR_TARGET,
        ),
        Check::computed(
            "urpc call slot round trip / cache-line ping-pong floor (medians)",
            call / floor,
            &format!("<= {FLOOR_TARGET}"),
            call / floor <= FLOOR_TARGET,
        ),
        Check::computed(
            "urpc call slot round trip / cache-line ping-pong floor (medians; moonshot)",
            call / floor,
            &format!("<= {FLOOR_MOONSHOT}"),
            call / floor <= FLOOR_MOONSHOT,
        ),
        Check::computed(
            "crossbeam round trip / urpc call slot round trip (medians)",
            xbeam / call,
            ">= 2",
            xbeam / call >= 2.0,
        ),
    ];
    let (tp_urpc, tp_batch, tp_rtrb, tp_xbeam) = (
        med(TP_URPC),
        med(TP_URPC_BATCH),
        med(TP_RTRB),
        med(TP_CROSSBEAM),
    );
    let holds = |h: bool| {
        if h {
            "holds"
        } else {
            "does **not** hold in this run"
        }
    };
    let rt_order_holds = floor < urpc && urpc < rtrb && rtrb < xbeam;
    let tp_order_holds = tp_urpc > tp_rtrb && tp_rtrb > tp_xbeam;
    let notes = vec![
        format!(
            "Host mode: no QEMU. Two threads pinned to host cores 0 and 1 (`core_affinity`) exchange \
             56-byte messages through {slots}-slot rings or channels, or through one call slot \
             (request and reply in one line). Measured by \
             `libs/urpc/examples/hostbench.rs`, which xtask builds with `cargo build --release -p urpc \
             --example hostbench` (the workspace release profile: `opt-level = 2`) and runs; xtask only \
             parses its `BENCH` lines. A round-trip sample is the mean of {ROUND_TRIPS} round trips \
             (core 0 sends message i, core 1 sends it back, core 0 checks it) after {warm_rt} warm-up ones; a \
             throughput sample is {MESSAGES} messages streamed from core 0 to core 1, checked on \
             arrival, timed on the receiver after {warm_tp} warm-up messages. Each run measures every case \
             once, in the order of the table, so slow phases of the machine hit all cases alike. All \
             channels are polled the same way: `try_send`/`try_recv` in a loop with a `pause` between \
             failed attempts (crossbeam's blocking `recv` would park the thread; rtrb has no blocking \
             call)."
        ),
        format!(
            "Machine: {cores} cores, {model}{}. It is shared with other work (1-minute load average \
             {load} just before the run), so figures move between runs and between invocations: here \
             max - min is {:.0}% of the median for the urpc round trip, {:.0}% for the call slot's, \
             {:.0}% for crossbeam's round trip and {:.0}% for crossbeam's throughput.",
            if virt { ", a virtual machine (`hypervisor` CPU flag)" } else { "" },
            spread(RT_URPC),
            spread(RT_CALL),
            spread(RT_CROSSBEAM),
            spread(TP_CROSSBEAM)
        ),
        format!(
            "Where the round-trip time goes. The floor of the issue is one `AtomicU64` that both threads \
             write and poll in turn: {floor:.0} ns. A pair of one-way channels cannot share one line, so \
             the same exchange with one line per direction (each thread writes its own line and polls the \
             other's, no channel code at all) is also measured: {floor2:.0} ns, {:.2}x the one-line \
             figure. {} urpc's round trip ({urpc:.0} ns) is {:.2}x the one-line floor and {:.2}x \
             the two-line one; its per-slot sequence word makes each message cost the transfers \
             of the line that carries it, so the two-line exchange is its own floor. {}",
            floor2 / floor,
            if floor2 > floor {
                "With one line, the poll that brings the request over also brings the line the \
                 reply is written to; with two, each store must first take its line back from the \
                 core polling it, and that core's next poll must fetch it again."
            } else {
                "Here the two-line exchange was not slower than the one-line one, though each of \
                 its stores must first take its line back from the core polling it: the host's \
                 other work (its load, above) moves these figures."
            },
            urpc / floor,
            urpc / floor2,
            if urpc / floor <= FLOOR_TARGET {
                format!("So the `<= {FLOOR_TARGET}` target against the one-line floor holds in this run.")
            } else {
                format!(
                    "So the `<= {FLOOR_TARGET}` target against the one-line floor does not hold in \
                     this run. A pair of polled one-way rings cannot share one line between \
                     request and reply; the call slot (next paragraph) does."
                )
            }
        ),
        format!(
            "The call slot (`urpc::CallSlot`): one line holds a sequence word and the message; \
             core 0 writes the request and publishes it, core 1 polls, reads it, writes the reply \
             over it in the same line and publishes, core 0 polls: one line per call instead of one \
             per direction. Its round trip, {call:.0} ns, is {:.2}x the one-line floor (the issue's \
             target `<= {FLOOR_TARGET}` {}; moonshot `<= {FLOOR_MOONSHOT}` {}) and {:.2}x the round \
             trip over a pair of urpc rings; crossbeam's round trip is {:.2}x it (target `>= 2` {}). {}",
            call / floor,
            holds(call / floor <= FLOOR_TARGET),
            holds(call / floor <= FLOOR_MOONSHOT),
            call / urpc,
            xbeam / call,
            holds(xbeam / call >= 2.0),
            if call < urpc {
                "It is faster than the pair of rings because the server's poll that brings the \
                 request over also brings the line it writes the reply to."
            } else {
                "Here it was not faster than the pair of rings, though it moves one line per call \
                 instead of two: the host's other work (its load, above) moves these figures."
            }
        ),
        format!(
            "Shape. Round trips: urpc {urpc:.0} ns, rtrb {rtrb:.0} ns ({:.2}x urpc: its consumer reads the \
             producer's tail index, on a line of its own, before the slot, and its 56-byte slots are \
             packed, so many straddle two lines), \
             crossbeam {xbeam:.0} ns ({:.2}x urpc: a multi-producer, multi-consumer queue with shared \
             head and tail and compare-and-swap on both); the order floor < urpc < rtrb < crossbeam {}. \
             Throughput: urpc {tp_urpc:.1}, urpc with batches of 16 {tp_batch:.1}, rtrb {tp_rtrb:.1}, \
             crossbeam {tp_xbeam:.1} messages per µs; the order urpc > rtrb > crossbeam {}. Batching \
             changes urpc's throughput by {:+.0}% (one free-space check and one ack per batch).",
            rtrb / urpc,
            xbeam / urpc,
            if rt_order_holds { "holds" } else { "does **not** hold in this run" },
            if tp_order_holds { "holds" } else { "does **not** hold in this run" },
            (tp_batch / tp_urpc - 1.0) * 100.0
        ),
    ];
    let report = Report {
        bench: "urpc".into(),
        mode: "host".into(),
        qemu: "not used (host mode)".into(),
        musubi_commit: crate::results::commit(),
        runs,
        unit: "ns per round trip (round-trip rows); messages per µs (throughput rows)".into(),
        rows,
        checks,
        notes,
    };
    report.publish()
}
