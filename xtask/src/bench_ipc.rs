//! `cargo xtask bench ipc`: what Musubi's request path costs (DESIGN principle 3), beside
//! Linux's nearest mechanisms.
//!
//! Musubi (`user/ipcbench`, deterministic mode, two cores, `rpcc.notify=ipi` so a waiting
//! core halts instead of spinning): a rendezvous round trip (`CALL` by a child, answered by
//! the endpoint's owner with one `REPLY_RECV`, the fast path) with both processes on one
//! core and with the caller on the other core (the request and the reply travel by RPCC),
//! the same round trips with the messages in registers (`CALL_REGS` answered by
//! `REPLY_RECV_REGS`), the same-core round trip served the old way (`RECV`, then `REPLY`)
//! beside it, and
//! split-phase no-ops: K `SUBMIT(NOP)`s then K `COLLECT`s, K = 1, 8, 64, per request, and
//! the same no-ops through the submission and completion rings: K entries, one
//! `ENTER(K, K)`, K completions read (io_uring's shape), per request. A second boot with
//! RPCC's fast design (`rpcc.agents=inline rpcc.wait=halt`: the owner's core performs the
//! enqueue and the delivery in its IPI handler, a waiting thread halts in place) gives the
//! row "rendezvous round trip, two cores, fast RPCC"; the first boot keeps P4's agents.
//!
//! Linux (`--peer linux`, `peer/linux/ipc.c`, the same QEMU configuration with two vCPUs):
//! pipe and futex ping-pong between two processes pinned to one CPU and to two, and io_uring
//! NOP submissions in batches of 1, 8 and 64 (one `io_uring_enter` per batch), per request.
//!
//! The targets: a same-core round trip under 1,000 instructions (checked on the register
//! calls, the fastest) and, through memory (`CALL`, `REPLY_RECV`), under half of Linux's
//! one-CPU futex ping-pong; a two-core round trip at most half of Linux's two-CPU futex
//! ping-pong, checked on the fast-design row (the default design's row is shown beside it
//! without a target); batched requests through the rings no dearer per request than io_uring's at
//! the same batch size (submit+collect is shown beside them, without a target: it is a
//! system call per request by design). Every check is computed from the rows.

use crate::bench::{bench_samples, finished_run, Peer};
use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};
use std::time::Duration;

/// Musubi's cases, in the order `ipcbench` prints them.
const NULL_CALL: &str = "null call";
const SAME_CORE: &str = "rendezvous round trip, same core";
const SAME_CORE_OLD: &str = "rendezvous round trip, same core, RECV+REPLY";
/// The round trips with the messages in registers (`CALL_REGS`, `REPLY_RECV_REGS`: on one
/// core the direct handoff writes each message into the other thread's saved registers).
const REGS_SAME_CORE: &str = "rendezvous round trip, same core, registers";
const REGS_TWO_CORES: &str = "rendezvous round trip, two cores, registers";
const TWO_CORES: &str = "rendezvous round trip, two cores";
/// The two-core case from the second boot, with RPCC's fast design.
const TWO_CORES_FAST: &str = "rendezvous round trip, two cores, fast RPCC";
/// The round trips whose call passes a one-page ICA and whose answer passes it back (P3).
const ICA_SAME_CORE: &str = "rendezvous round trip with a 4 KiB ICA both ways, same core";
const ICA_TWO_CORES: &str = "rendezvous round trip with a 4 KiB ICA both ways, two cores";
/// The second boot's options: RPCC's fast design (issue 13), IPIs as in the first boot.
const FAST_RPCC: &str = "rpcc.agents=inline rpcc.wait=halt";
const BATCHES: [u64; 3] = [1, 8, 64];

/// Targets.
const RTT_LIMIT: f64 = 1000.0;
const RTT_FUTEX_RATIO: f64 = 0.5;
const REMOTE_RTT_FUTEX_RATIO: f64 = 0.5;
const BATCH_RATIO: f64 = 1.0;
/// Issue 13's moonshot for the rings at K = 64 (reported, not checked).
const RING_MOONSHOT: f64 = 0.5;

/// P0 (Agora-1) Table 1: inter-processor IPC costs about 17 times intra-processor IPC.
const P0_REMOTE_RATIO: f64 = 17.0;

fn batch_case(k: u64) -> String {
    format!("submit+collect NOP, batch {k}")
}

fn ring_case(k: u64) -> String {
    format!("ring NOP, batch {k}")
}

fn uring_case(k: u64) -> String {
    format!("io_uring NOP, batch {k}")
}

/// Every Musubi case, in order.
fn musubi_cases() -> Vec<String> {
    let mut v = vec![
        NULL_CALL.to_string(),
        SAME_CORE.to_string(),
        REGS_SAME_CORE.to_string(),
        REGS_TWO_CORES.to_string(),
        SAME_CORE_OLD.to_string(),
        TWO_CORES.to_string(),
        TWO_CORES_FAST.to_string(),
        ICA_SAME_CORE.to_string(),
        ICA_TWO_CORES.to_string(),
    ];
    v.extend(BATCHES.iter().map(|&k| batch_case(k)));
    v.extend(BATCHES.iter().map(|&k| ring_case(k)));
    v
}

pub fn ipc(runs: usize, peer: Option<Peer>) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let boot = |extra: &str| {
        let mut g = Guest::new(
            &kernel,
            2,
            &format!("noshell poweroff rpcc.notify=ipi {extra}start=0:ipcbench,{runs}"),
        );
        g.initrd = Some(archive.clone());
        g.mode = Mode::Deterministic;
        g
    };
    let run = |g: &Guest, what: &str| -> Result<Vec<(String, Vec<f64>)>> {
        eprintln!("xtask: bench ipc: {what}, {runs} samples per case");
        let c = finished_run(g, what, Duration::from_secs(600 + 60 * runs as u64))?;
        if let Some(l) = c.lines.iter().find(|l| l.contains("BENCH error")) {
            bail!("ipcbench failed ({what}): {l}");
        }
        bench_samples(&c.lines, "musubi")
    };
    let g = boot("");
    let mut ours = run(&g, "Musubi ipc")?;
    // The second boot counts only for the cross-core case, under its own name.
    let fast = run(&boot(&format!("{FAST_RPCC} ")), "Musubi ipc, fast RPCC")?;
    ours.extend(
        fast.into_iter()
            .filter(|(c, _)| c == TWO_CORES)
            .map(|(_, s)| (TWO_CORES_FAST.to_string(), s)),
    );
    let (theirs, peer_cmd) = match peer {
        Some(Peer::Linux) => (
            crate::peer_linux::run_ipc(runs)?
                .into_iter()
                .map(|p| (p.case, p.samples))
                .collect(),
            crate::peer_linux::ipc_qemu_command_line(runs).unwrap_or_default(),
        ),
        None => (Vec::new(), String::new()),
    };
    let qemu = g.shown_command_line();
    let mut report = build_report(runs, &ours, &theirs, &qemu, &peer_cmd)?;
    report.musubi_commit = crate::results::commit();
    report.publish()
}

type Samples = [(String, Vec<f64>)];

fn row_of(samples: &Samples, case: &str, label: &str) -> Option<Row> {
    samples
        .iter()
        .find(|(c, s)| c == case && !s.is_empty())
        .map(|(_, s)| Row::from_samples(&format!("{label}: {case}"), s))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Rows, checks and notes from the samples (the commit is left empty).
fn build_report(
    runs: usize,
    ours: &Samples,
    theirs: &Samples,
    qemu: &str,
    peer_cmd: &str,
) -> Result<Report> {
    let mut rows = Vec::new();
    let mut mine = Vec::new();
    for case in musubi_cases() {
        let Some(r) = row_of(ours, &case, "musubi") else {
            bail!("Musubi printed no samples for '{case}'");
        };
        mine.push(r.clone());
        rows.push(r);
    }
    let linux: Vec<Row> = crate::peer_linux::IPC_CASES
        .iter()
        .filter_map(|case| row_of(theirs, case, "linux"))
        .collect();
    rows.extend(linux.iter().cloned());
    let med = |rs: &[Row], case: &str| {
        rs.iter()
            .find(|r| r.case.ends_with(&format!(": {case}")))
            .map(|r| r.median)
    };
    let same = med(&mine, SAME_CORE).unwrap_or(f64::NAN);
    let regs = med(&mine, REGS_SAME_CORE).unwrap_or(f64::NAN);
    let regs_two = med(&mine, REGS_TWO_CORES).unwrap_or(f64::NAN);
    let same_old = med(&mine, SAME_CORE_OLD).unwrap_or(f64::NAN);
    let two = med(&mine, TWO_CORES).unwrap_or(f64::NAN);
    let two_fast = med(&mine, TWO_CORES_FAST).unwrap_or(f64::NAN);
    let ica_same = med(&mine, ICA_SAME_CORE).unwrap_or(f64::NAN);
    let ica_two = med(&mine, ICA_TWO_CORES).unwrap_or(f64::NAN);

    // The instruction target is checked on the fastest same-core round trip, the register
    // calls' (seL4's shape); the round trip through memory is shown beside it.
    let mut checks = vec![Check {
        name: format!("{REGS_SAME_CORE} (median instructions)"),
        value: regs.round(),
        target: format!("< {RTT_LIMIT}"),
        paper: None,
        holds: regs < RTT_LIMIT,
    }];
    let mut comparison = String::from(
        "| Musubi case | Musubi median | Linux case | Linux median | Musubi / Linux | target |\n\
         |---|---:|---|---:|---:|---|\n",
    );
    // A target is a comparison and a bound: ("<", 0.5) or ("<=", 1.0).
    let mut compare =
        |ours: &str, theirs: &str, target: Option<(&str, f64)>, checks: &mut Vec<Check>| {
            let (Some(m), Some(l)) = (med(&mine, ours), med(&linux, theirs)) else {
                return;
            };
            let ratio = m / l;
            let target_text = target.map_or("-".to_string(), |(op, t)| format!("{op} {t}"));
            comparison +=
                &format!("| {ours} | {m:.0} | {theirs} | {l:.0} | {ratio:.2} | {target_text} |\n");
            if let Some((op, t)) = target {
                checks.push(Check {
                    name: format!("{ours} / Linux {theirs} (median instructions)"),
                    value: round3(ratio),
                    target: target_text,
                    paper: None,
                    holds: if op == "<" { ratio < t } else { ratio <= t },
                });
            }
        };
    compare(
        SAME_CORE,
        "futex ping-pong, 1 CPU",
        Some(("<", RTT_FUTEX_RATIO)),
        &mut checks,
    );
    compare(SAME_CORE, "pipe ping-pong, 1 CPU", None, &mut checks);
    compare(REGS_SAME_CORE, "futex ping-pong, 1 CPU", None, &mut checks);
    compare(SAME_CORE_OLD, "futex ping-pong, 1 CPU", None, &mut checks);
    // The cross-core target is checked on the fast design's row; P4's agent design (the
    // default) is shown beside it without a target.
    compare(
        TWO_CORES_FAST,
        "futex ping-pong, 2 CPUs",
        Some(("<=", REMOTE_RTT_FUTEX_RATIO)),
        &mut checks,
    );
    compare(TWO_CORES, "futex ping-pong, 2 CPUs", None, &mut checks);
    compare(TWO_CORES_FAST, "pipe ping-pong, 2 CPUs", None, &mut checks);
    for k in BATCHES {
        compare(&batch_case(k), &uring_case(k), None, &mut checks);
    }
    for k in BATCHES {
        compare(
            &ring_case(k),
            &uring_case(k),
            Some(("<=", BATCH_RATIO)),
            &mut checks,
        );
    }
    let batch = |k: u64| med(&mine, &batch_case(k)).unwrap_or(f64::NAN);
    let ring = |k: u64| med(&mine, &ring_case(k)).unwrap_or(f64::NAN);
    let moonshot = match med(&linux, &uring_case(64)) {
        Some(l) => format!(
            "Moonshot (issue 13): ring NOP at K = 64 at most {RING_MOONSHOT}x io_uring's; \
             measured {:.2}x ({}).",
            ring(64) / l,
            if ring(64) / l <= RING_MOONSHOT {
                "reached"
            } else {
                "not reached"
            }
        ),
        None => "Moonshot (issue 13): needs the Linux peer.".to_string(),
    };
    let remote_ratio = two_fast / same;
    let null = med(&mine, NULL_CALL).unwrap_or(f64::NAN);
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| !c.holds)
        .map(|c| c.name.as_str())
        .collect();
    let verdict = if failed.is_empty() {
        "Every target holds.".to_string()
    } else {
        format!(
            "Targets that do not hold: {}. Reading them: a round trip is two system calls \
             (CALL_REGS, REPLY_RECV_REGS) and two switches; a ring request at K = 64 shares \
             one `ENTER` with 63 others. At {null:.0} instructions for a null call (`GETPID`, \
             the entry and exit every call pays), the system-call path accounts for {:.0} of \
             the {regs:.0} of a register round trip and {:.0} of the {:.0} of a ring request \
             at K = 64: the rest is the kernel's work (finding the two processes and threads in \
             the core's tables, the endpoint check, the ticket and the handle, charging the \
             CPU time, the switch itself; for the ring, one entry copied in and one \
             completion written per request) and the programs' own loops, which this \
             benchmark measures but does not break down.",
            failed.join("; "),
            2.0 * null,
            null / 64.0,
            ring(64)
        )
    };

    let msg_bytes = core::mem::size_of::<abi::ipc::Msg>();
    let notes = vec![
        format!("What is measured. Musubi (`user/ipcbench`): a null call (`GETPID`, the floor every \
         system call pays, to read the others by); a rendezvous round trip is one `CALL` by \
         a child process to an endpoint its parent owns, answered by the parent's `REPLY_RECV` \
         (answer the last request and wait for the next in one entry; a {msg_bytes}-byte message \
         each way: a label and {} words), timed by the caller over 1,000 calls (200 across \
         cores); on one core both switches are direct (the fast path: the core goes straight \
         to the waiting thread, no run queue). \"RECV+REPLY\" is the same served the old way \
         (three system calls per round trip, the switches through the run queue). \"two \
         cores\" puts the caller on core 1, so the request and the reply each cross by RPCC: \
         with P4's agent design (the default: an agent thread of the owner's core performs \
         the enqueue and the delivery, the waiting thread switches to its core's idle context) \
         in the first boot, and, \"fast RPCC\", in a second boot with `{FAST_RPCC}` (the \
         owner's core performs them in its IPI handler, the waiting thread halts in place); \
         the cross-core target is checked on the fast design's row. Submit+collect: per round K `SUBMIT(NOP)`s, then K \
         `COLLECT(ANY)`s, 1,024 requests per sample, per request. Each sample is the mean over \
         its operations, timed with `rdtsc`; under `-icount shift=0` one TSC tick is one \
         instruction of either core, so across cores the figure is the instructions both cores \
         spent (a cost, not a latency; docs/design.md, \"Measuring\"), and runs repeat exactly.",
            abi::ipc::MSG_WORDS),
        "Linux (`peer/linux/ipc.c`, Debian's 6.1 kernel on two vCPUs, same QEMU settings): pipe \
         ping-pong (one byte through two pipes) and futex ping-pong (a word in a `MAP_SHARED` \
         page, `FUTEX_WAIT`/`FUTEX_WAKE`) between two processes, both pinned to CPU 0 (\"1 CPU\") \
         or to CPUs 0 and 1 (\"2 CPUs\"), 200 round trips per sample; io_uring NOPs with raw \
         system calls: K `IORING_OP_NOP` entries queued, one `io_uring_enter(K, K, GETEVENTS)`, \
         the K completions reaped from the ring, per request. The futex and pipe figures are \
         the nearest Linux has to a rendezvous: a wake-up and a wait by each side."
            .to_string(),
        format!("Musubi QEMU: `{qemu}`"),
        comparison,
        format!(
            "Fast path: the same-core round trip costs {regs:.0} instructions with the messages \
             in registers (`CALL_REGS`, `REPLY_RECV_REGS`: each direct switch writes the \
             message into the other thread's saved registers; {:.2}x the round trip through \
             memory), {same:.0} with `CALL`, `REPLY_RECV` and the direct switches (the records \
             copied through the page tables, requests and answers through the queues), \
             {same_old:.0} served with `RECV` then `REPLY` ({:.2}x). Across two cores the \
             register calls take the general path (RPCC), {regs_two:.0} instructions. \
             The two-core round trip costs {two_fast:.0} instructions with the fast RPCC design, \
             {two:.0} with P4's agents ({:.2}x). \
             Ratios: two cores (fast RPCC) / same core = {:.1} for Musubi's rendezvous (P0, Agora-1 Table 1: \
             inter-processor IPC about {P0_REMOTE_RATIO:.0} times intra-processor; under \
             `-icount` ours counts the instructions of both cores, not the latency). Musubi's \
             submit+collect costs {:.0}, {:.0} and {:.0} instructions per request at K = 1, 8, \
             64: every request is two system calls (`SUBMIT` takes one submission), so a batch \
             of 64 costs {:+.1}% per request against a batch of 1. Through the rings, where one \
             `ENTER` takes and answers a whole batch as one `io_uring_enter` does, a request \
             costs {:.0}, {:.0} and {:.0} instructions at K = 1, 8, 64.",
            regs / same,
            same / same_old,
            two_fast / two,
            remote_ratio,
            batch(1),
            batch(8),
            batch(64),
            (batch(64) / batch(1) - 1.0) * 100.0,
            ring(1),
            ring(8),
            ring(64)
        ),
        format!(
            "ICAs (P3's \"peel off and paste\"): a round trip whose call passes a one-page \
             vregion and whose answer passes it back (unmapped from one address space, mapped \
             in the other's ICA window, both ways, no copy) costs {ica_same:.0} instructions on \
             one core ({:+.0} against the plain round trip: {:.0} per pass) and {ica_two:.0} \
             across two cores with P4's agents ({:+.0} against the plain two-core round trip); \
             the vregion's frames stay in its own core's pool (here the caller's). The first \
             pass of a vregion asks its core to mark it passed (an RPCC call if that core is \
             another); a holder passing on a mapping that came as an ICA does not ask, so \
             across cores only the frame list travels, inside the request and the answer.",
            ica_same - same,
            (ica_same - same) / 2.0,
            ica_two - two
        ),
        moonshot,
        verdict,
        if peer_cmd.is_empty() {
            "No peer in this run.".into()
        } else {
            format!("Linux peer QEMU: `{peer_cmd}`")
        },
    ];
    Ok(Report {
        bench: "ipc".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: crate::bench::qemu_from_smp(qemu),
        musubi_commit: String::new(),
        runs,
        unit: "instructions per operation".into(),
        rows,
        checks,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(cases: &[(&str, f64)]) -> Vec<(String, Vec<f64>)> {
        cases
            .iter()
            .map(|(c, v)| (c.to_string(), vec![v * 0.99, *v, v * 1.01]))
            .collect()
    }

    fn musubi() -> Vec<(String, Vec<f64>)> {
        samples(&[
            (NULL_CALL, 200.0),
            (SAME_CORE, 1100.0),
            (REGS_SAME_CORE, 900.0),
            (REGS_TWO_CORES, 11000.0),
            (SAME_CORE_OLD, 1800.0),
            (TWO_CORES, 12000.0),
            (TWO_CORES_FAST, 8000.0),
            (ICA_SAME_CORE, 2000.0),
            (ICA_TWO_CORES, 20000.0),
            ("submit+collect NOP, batch 1", 500.0),
            ("submit+collect NOP, batch 8", 300.0),
            ("submit+collect NOP, batch 64", 300.0),
            ("ring NOP, batch 1", 500.0),
            ("ring NOP, batch 8", 300.0),
            ("ring NOP, batch 64", 300.0),
        ])
    }

    fn linux() -> Vec<(String, Vec<f64>)> {
        samples(&[
            ("pipe ping-pong, 1 CPU", 10000.0),
            ("pipe ping-pong, 2 CPUs", 17000.0),
            ("futex ping-pong, 1 CPU", 2000.0),
            ("futex ping-pong, 2 CPUs", 17000.0),
            ("io_uring NOP, batch 1", 1000.0),
            ("io_uring NOP, batch 8", 350.0),
            ("io_uring NOP, batch 64", 250.0),
        ])
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let r = build_report(3, &musubi(), &linux(), "qemu -smp 2 x", "qemu linux").unwrap();
        assert_eq!(r.rows.len(), 22);
        let names: Vec<(&str, f64, bool)> = r
            .checks
            .iter()
            .map(|c| (c.name.as_str(), c.value, c.holds))
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        assert_eq!(names[0].1, 900.0);
        assert!(names[0].2); // registers: 900 < 1000
        assert!(names[0].0.starts_with(REGS_SAME_CORE), "{names:?}");
        assert_eq!(names[1].1, 0.55); // memory: 1100 / 2000
        assert!(!names[1].2);
        assert_eq!(names[2].1, 0.471); // two cores, fast RPCC: 8000 / 17000
        assert!(names[2].2);
        assert!(names[2].0.starts_with(TWO_CORES_FAST), "{names:?}");
        assert_eq!(names[3].1, 0.5); // batch 1: 500 / 1000
        assert!(names[3].2);
        assert!(names[4].2); // 300 / 350
        assert!(!names[5].2); // 300 / 250
        let md = r.markdown();
        assert!(
            md.contains("two cores (fast RPCC) / same core = 7.3"),
            "{md}"
        );
        // The default design's row is compared without a target.
        assert!(
            md.contains(
                "| rendezvous round trip, two cores | 12000 | futex ping-pong, 2 CPUs | 17000 | 0.71 | - |"
            ),
            "{md}"
        );
        assert!(md.contains("12000 with P4's agents (0.67x)"), "{md}");
        assert!(
            md.contains("served with `RECV` then `REPLY` (0.61x)"),
            "{md}"
        );
        assert!(md.contains("| 0.55 | < 0.5 |"), "{md}");
        assert!(md.contains("registers (`CALL_REGS`"), "{md}");
        assert!(md.contains("memory), 1100 with `CALL`"), "{md}");
        assert_eq!(r.qemu, "-smp 2 x");
        assert!(
            md.contains("Targets that do not hold: rendezvous round trip, same core / Linux"),
            "{md}"
        );
        assert!(md.contains("accounts for 400 of the 900"), "{md}");
        assert!(
            md.contains("costs 2000 instructions on one core (+900"),
            "{md}"
        );
        assert!(md.contains("450 per pass"), "{md}");
        // submit+collect is compared without a target; the moonshot is reported.
        assert!(
            md.contains(
                "| submit+collect NOP, batch 64 | 300 | io_uring NOP, batch 64 | 250 | 1.20 | - |"
            ),
            "{md}"
        );
        assert!(md.contains("measured 1.20x (not reached)"), "{md}");
    }

    #[test]
    fn without_a_peer_only_the_instruction_target_is_checked() {
        let r = build_report(1, &musubi(), &[], "q", "").unwrap();
        assert_eq!(r.rows.len(), 15);
        assert_eq!(r.checks.len(), 1);
        assert!(r.markdown().contains("Every target holds."));
        assert!(r.markdown().contains("No peer in this run."));
    }

    #[test]
    fn a_missing_case_is_an_error() {
        let mut m = musubi();
        m.remove(1);
        assert!(build_report(1, &m, &[], "q", "").is_err());
    }
}
