//! P0 Table 4 for `cargo xtask bench agora`: reply-less messages against rendezvous.
//! `user/agora/src/table4.rs` runs a compile's file traffic in miniature (a 16 KiB source
//! read, eight rounds of work each followed by a 512-byte write of the object, a close, a
//! delete) once with every call waiting for its answer and once with the write, the close
//! and the delete reply-less (`ulib::fs::nowait`).
//!
//! The deterministic report ([`add_deterministic`], both of Table 2's placements) shows
//! the work either way: the same requests, and what all cores spend. The parallel report
//! ([`add_parallel`], the program on core 1 and the file service on core 0, as the paper's
//! compiler ran on one PC with part of the OS on the other) compares the response in wall
//! time with the paper's: 98.1 s against 99.6 s, 479.1 against 484.7, 831.7 against 841.1
//! for three sources, about 1% shorter with the asynchronous protocol. The shape checked:
//! the reply-less run is the faster; by how much is reported beside the paper's.

use crate::bench_agora::Sample;
use crate::results::{Check, Report, Row};
use anyhow::{bail, Result};

pub const RENDEZVOUS: &str = "Table 4: a compile's file calls, rendezvous";
pub const REPLY_LESS: &str = "Table 4: a compile's file calls, write, close and unlink reply-less";

/// P0 Table 4 (s): asynchronous, rendezvous, for cc(1), cc(2), cc(3).
const PAPER: [(f64, f64); 3] = [(98.1, 99.6), (479.1, 484.7), (831.7, 841.1)];

/// The medians of `case` in `samples`: response, busy, messages; and their rows, labelled
/// with `place`.
fn medians(samples: &[Sample], place: &str, case: &str) -> Result<([f64; 3], [Row; 3])> {
    let pick = |f: fn(&Sample) -> f64| -> Vec<f64> {
        samples.iter().filter(|s| s.case == case).map(f).collect()
    };
    let response = pick(|s| s.per_op);
    if response.is_empty() {
        bail!("agora printed no samples for '{case}' ({place})");
    }
    let rows = [
        Row::from_samples(&format!("{place}: {case}"), &response),
        Row::from_samples(
            &format!("{place}: {case}, busy (all cores, without waits)"),
            &pick(|s| s.busy),
        ),
        Row::from_samples(
            &format!("{place}: {case}, rendezvous messages"),
            &pick(|s| s.messages),
        ),
    ];
    Ok(([rows[0].median, rows[1].median, rows[2].median], rows))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

const WHAT: &str = "a compile's file traffic in miniature (a 16 KiB source read in 512 B \
    reads, eight rounds of about 100,000 instructions of work each followed by a 512 B write \
    of the object, its close, the delete of a temporary file; `user/agora/src/table4.rs`), \
    with every call waiting for its answer against write, close and delete reply-less \
    (`ulib::fs::write_nowait`, `close_nowait`, `unlink_nowait`: sent with `SUBMIT`, their \
    answers collected afterwards by `fs::settle`)";

/// The deterministic report (both of Table 2's placements): the work either way, in
/// instructions. The response is shown but not compared: it includes the waits for the
/// disk, whose length `-icount`'s clock jumps set (the parallel report compares it).
pub fn add_deterministic(report: &mut Report, placements: &[(&str, Vec<Sample>)]) -> Result<()> {
    let mut text = format!(
        "Table 4, the work (deterministic): {WHAT}. Busy: all cores' instructions, the \
         reply-less calls' answers included; the response (instructions of the clock until the \
         last call returned) includes the waits for the disk, which under `-icount` last until \
         the next timer deadline, so it is compared in wall time in `agora-parallel.md`.\n\n\
         | placement | rendezvous: busy / messages | reply-less: busy / messages | busy, reply-less / rendezvous |\n\
         |---|---:|---:|---:|\n"
    );
    for (place, samples) in placements {
        let (r, rows_r) = medians(samples, place, RENDEZVOUS)?;
        let (n, rows_n) = medians(samples, place, REPLY_LESS)?;
        report.rows.extend(rows_r);
        report.rows.extend(rows_n);
        text += &format!(
            "| {place} | {:.0} / {:.0} | {:.0} / {:.0} | {:.3} |\n",
            r[1],
            r[2],
            n[1],
            n[2],
            n[1] / r[1]
        );
        report.checks.push(Check {
            name: format!(
                "Table 4: the same requests either way ({place}): rendezvous messages per \
                 compile, reply-less / rendezvous"
            ),
            value: round3(n[2] / r[2]),
            target: "= 1 (equal work: only when the caller waits differs)".into(),
            paper: None,
            holds: n[2] == r[2],
        });
    }
    report.notes.push(text);
    Ok(())
}

/// The parallel report (the program on core 1, the file service on core 0): the response
/// in wall time, beside the paper's.
pub fn add_parallel(report: &mut Report, samples: &[Sample], place: &str) -> Result<()> {
    let (r, rows_r) = medians(samples, place, RENDEZVOUS)?;
    let (n, rows_n) = medians(samples, place, REPLY_LESS)?;
    report.rows.extend(rows_r.into_iter().take(1));
    report.rows.extend(rows_n.into_iter().take(1));
    let paper: f64 = PAPER.iter().map(|(a, r)| a / r).sum::<f64>() / PAPER.len() as f64;
    let ratio = n[0] / r[0];
    report.checks.push(Check {
        name: "Table 4: a compile's response, reply-less / rendezvous (the program on core 1, \
               the file service on core 0)"
            .into(),
        value: round3(ratio),
        target: "< 1 (the reply-less calls let the program go on sooner, as in the paper)".into(),
        paper: Some(round3(paper)),
        holds: ratio < 1.0,
    });
    report.notes.push(format!(
        "Table 4 (wall time, {place}): {WHAT}. Response until the compile's last call \
         returned: {:.0} ns with rendezvous, {:.0} ns reply-less ({:.3}x, {:.1}% shorter). \
         The paper (its C compiler on pc98b, three sources): {}, about {:.1}% shorter with \
         the asynchronous protocol.",
        r[0],
        n[0],
        ratio,
        100.0 * (1.0 - ratio),
        PAPER
            .iter()
            .map(|(a, r)| format!("{a} s against {r} s"))
            .collect::<Vec<_>>()
            .join(", "),
        100.0 * (1.0 - paper),
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_agora::{ONE_CORE, TWO_CORES};

    fn s(case: &str, per_op: f64, busy: f64) -> Sample {
        Sample {
            case: case.into(),
            per_op,
            busy,
            messages: 20.0,
            cross: 0.0,
            cross_replies: 0.0,
            cross_bare: 0.0,
        }
    }

    fn report() -> Report {
        Report {
            bench: "agora".into(),
            mode: "deterministic".into(),
            qemu: String::new(),
            musubi_commit: String::new(),
            runs: 2,
            unit: String::new(),
            rows: Vec::new(),
            checks: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn deterministic_compares_the_work() {
        let one = vec![s(RENDEZVOUS, 1000.0, 900.0), s(REPLY_LESS, 700.0, 950.0)];
        let mut two = one.clone();
        two[1].messages = 19.0;
        let mut r = report();
        add_deterministic(&mut r, &[(ONE_CORE, one), (TWO_CORES, two)]).unwrap();
        assert_eq!(r.rows.len(), 12);
        assert!(r.checks[0].holds);
        assert!(!r.checks[1].holds);
        assert!(r.notes[0].contains("| 1.056 |"));
    }

    #[test]
    fn parallel_compares_the_response() {
        let v = vec![
            s(RENDEZVOUS, 1000.0, 0.0),
            s(RENDEZVOUS, 1002.0, 0.0),
            s(REPLY_LESS, 700.0, 0.0),
            s(REPLY_LESS, 702.0, 0.0),
        ];
        let mut r = report();
        add_parallel(&mut r, &v, TWO_CORES).unwrap();
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.checks[0].value, 0.7);
        assert!(r.checks[0].holds);
        assert!(r.notes[0].contains("30.0% shorter"));
        let slower = vec![s(RENDEZVOUS, 1000.0, 0.0), s(REPLY_LESS, 1100.0, 0.0)];
        let mut r = report();
        add_parallel(&mut r, &slower, TWO_CORES).unwrap();
        assert!(!r.checks[0].holds);
    }

    #[test]
    fn a_missing_case_is_an_error() {
        let one = vec![s(RENDEZVOUS, 1000.0, 900.0)];
        assert!(add_deterministic(&mut report(), &[(ONE_CORE, one)]).is_err());
        assert!(add_parallel(&mut report(), &[], TWO_CORES).is_err());
    }
}
