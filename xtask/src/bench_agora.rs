//! `cargo xtask bench agora`: P0's (Agora-1's) measurements of a process-network OS, on
//! Musubi's file service, pipes and cores. Two reports, because the experiments need two
//! measuring modes (docs/design.md, "Measuring"):
//!
//! - `agora` (deterministic, instructions): Table 2, per file call (read hit, read miss,
//!   write, open, close, exec) its cost and the rendezvous messages it causes, with the
//!   caller and the file service on one core and with the caller on the other core; the
//!   share of the cost spent in IPC, estimated from the messages and the measured round
//!   trip of a rendezvous carrying a 4 KiB ICA (what every `fs` and `blk` request carries);
//!   Table 4's count, the share of cross-core rendezvous whose answer carries no reply data;
//!   and the targets against Linux in the same QEMU (`--peer linux`): a file read that
//!   hits the cache against Linux's `read` of a cached file, a cross-core pipe round trip
//!   against Linux's pipe ping-pong on 2 CPUs.
//! - `agora-parallel` (parallel, wall time; `bench_agora_par.rs`): Figure 4 and Table 3,
//!   which are about overlap across cores and so cannot be seen under `-icount`.
//!
//! The Musubi side is `user/agora`, started at boot beside the file service (`blkdrv`,
//! `bufd`, `fsd`, placed by the boot configuration's words) on a disk image made here (`HIT.DAT`, `MISS.DAT` of a known pattern, a directory of
//! small files for `ls`). It reaches the file service only through `ulib::fs`, so it
//! measures whatever process network is merged behind `fs`. Messages are counted by the
//! kernel per core (`CoreInfo::ipc_messages`: requests taken by `RECV`, answers given).

use crate::bench::{finished_run, options_taken, Peer};
use crate::qemu::{Guest, Mode};
use crate::results::{Check, Report, Row};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file calls of Table 2, as `agora calls` names them.
pub const CALLS: [&str; 6] = ["read hit", "read miss", "write", "open", "close", "exec"];
const ICA_SETUP: &str = "a request's ICA set up and taken down (ulib::fs)";
const RTT_SAME: &str = "rendezvous round trip with a 4 KiB ICA, same core";
const RTT_CROSS: &str = "rendezvous round trip with a 4 KiB ICA, two cores";
const PIPE_SAME: &str = "pipe round trip, same core";
const PIPE_CROSS: &str = "pipe round trip, two cores";
/// The same start as Table 2's exec, from the boot archive by the kernel alone (to read the
/// process network's exec by).
const EXEC_ARCHIVE: &str = "exec from the boot archive (SPAWN, no file service)";
/// The placements of Table 2: where `agora` runs (`blkdrv` and `fsd` are on core 0).
pub const ONE_CORE: &str = "one core";
pub const TWO_CORES: &str = "two cores";

/// P0 Table 2 (msec; PC-9801, 1989), in the order of [`CALLS`]: response time on one
/// processor (5), its intra-processor IPC load (7) and count; on two processors the
/// response time (1), the inter-processor IPC load (2) and count. `d` (the disk's time) is
/// left out of the read miss and exec figures, as the paper writes them ("+ d").
pub const PAPER_ONE: [f64; 6] = [4.2, 3.9, 4.3, 10.6, 4.2, 34.7];
pub const PAPER_ONE_IPC: [f64; 6] = [1.8, 1.7, 1.8, 5.9, 2.0, 14.2];
pub const PAPER_ONE_COUNT: [f64; 6] = [10.0, 8.0, 10.0, 33.0, 12.0, 90.0];
pub const PAPER_TWO: [f64; 6] = [10.1, 8.2, 6.3, 25.4, 5.8, 53.1];
pub const PAPER_TWO_IPC: [f64; 6] = [6.4, 5.4, 4.0, 20.9, 4.8, 32.9];
pub const PAPER_TWO_COUNT: [f64; 6] = [2.0, 2.0, 1.0, 10.0, 2.0, 13.0];
/// P0 Table 4: share of inter-processor IPCs that carried no reply data.
const PAPER_NO_REPLY_DATA: f64 = 0.91;

/// Targets (issue 16).
const READ_HIT_LINUX: f64 = 1.0;
const PIPE_LINUX: f64 = 1.0;
/// The Linux peer's cases compared.
pub const LINUX_READ: &str = "read 512 B, cached file";
const LINUX_PIPE: &str = "pipe ping-pong, 2 CPUs";

/// The disk files (`user/agora` checks every byte it reads against this pattern).
const HIT_BYTES: usize = 16 * 1024;
const MISS_BYTES: usize = 512 * 1024;
/// Files in the root directory for `ls | sort` (Table 3).
pub const LS_FILES: usize = 48;

/// One `BENCH` sample of `user/agora`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub case: String,
    pub per_op: f64,
    /// Busy time of all cores per operation (without halted waits).
    pub busy: f64,
    pub messages: f64,
    pub cross: f64,
    pub cross_replies: f64,
    pub cross_bare: f64,
}

/// The samples in `lines` (Musubi's `BENCH {...}` lines).
pub fn parse(lines: &[String]) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    for v in crate::bench::bench_json(lines)? {
        let json = &v;
        if v["peer"] != "musubi" {
            continue;
        }
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        let Some(case) = v["case"].as_str() else {
            bail!("BENCH line without a case: {json}");
        };
        out.push(Sample {
            case: case.to_string(),
            per_op: v["per_op"]
                .as_f64()
                .with_context(|| format!("BENCH line without per_op: {json}"))?,
            busy: f("busy"),
            messages: f("messages"),
            cross: f("cross"),
            cross_replies: f("cross_replies"),
            cross_bare: f("cross_bare"),
        });
    }
    Ok(out)
}

/// A fresh disk image for the benchmark at `path`: the two data files and the files `ls`
/// lists.
pub fn make_image(path: &Path) -> Result<()> {
    crate::disk::make(path)?;
    let pattern = |n: usize| (0..n).map(|o| (o % 251) as u8).collect::<Vec<u8>>();
    crate::disk::put(path, "HIT.DAT", &pattern(HIT_BYTES))?;
    crate::disk::put(path, "MISS.DAT", &pattern(MISS_BYTES))?;
    // Figure 3's program (`agora execs`), as the boot archive packs it.
    let nop = std::fs::read(crate::user::target_dir().join("stripped/nop"))?;
    crate::disk::mkdir(path, "BIN")?;
    for i in 0..8 {
        crate::disk::put(path, &format!("BIN/NOP{i}"), &nop)?;
    }
    for i in 0..LS_FILES {
        crate::disk::put(
            path,
            &format!("L{i:02}.TXT"),
            format!("file {i}\n").as_bytes(),
        )?;
    }
    Ok(())
}

/// Sectors the buffer manager owns in these boots (the default, 64, is 32 KiB): enough
/// for Figure 3's eight copies of `nop` (75 sectors each) to stay in the buffers, as the
/// paper's exec'd program did; Table 2's files are read hit (32 sectors, read just before)
/// or miss (sectors read for the first time) whatever the size.
const BUFFERS: usize = 1024;

pub fn image_path() -> PathBuf {
    crate::build::workspace_root().join("target/bench-agora.img")
}

/// A two-core guest with `blkdrv` on core 0, the buffer manager `bufd` and `fsd` on
/// `fs_core` (boot configuration words) and `agora ARGS off` on `core`.
pub fn guest(
    kernel: &Path,
    archive: &Path,
    mode: Mode,
    (fs_core, core): (usize, usize),
    args: &str,
) -> Guest {
    let mut g = Guest::new(
        kernel,
        2,
        &format!(
            "noshell rpcc.notify=ipi services=files disk.core=0 buffers.cores={fs_core} \
             buffers.size={BUFFERS} files.core={fs_core} start={core}:agora,{args},off"
        ),
    );
    g.initrd = Some(archive.to_path_buf());
    g.mode = mode;
    g.disk = Some(image_path());
    g
}

/// Boot `g` on a fresh image and return its samples.
pub fn boot(g: &Guest, what: &str, limit: Duration) -> Result<Vec<Sample>> {
    make_image(&image_path())?;
    eprintln!("xtask: bench agora: {what}");
    let c = finished_run(g, what, limit)?;
    options_taken(&c, what)?;
    if let Some(l) = c.lines.iter().find(|l| l.contains("BENCH error")) {
        bail!("agora failed ({what}): {l}");
    }
    parse(&c.lines)
}

pub fn agora(runs: usize, peer: Option<Peer>) -> Result<()> {
    deterministic(runs, peer)?;
    crate::bench_agora_par::parallel(runs)
}

pub fn deterministic(runs: usize, peer: Option<Peer>) -> Result<()> {
    if runs > 31 {
        bail!("bench agora takes at most 31 runs (MISS.DAT holds 32 samples of fresh sectors)");
    }
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let limit = Duration::from_secs(900 + 120 * runs as u64);
    let mut placements = Vec::new();
    let mut qemu = String::new();
    for (name, core) in [(ONE_CORE, 0), (TWO_CORES, 1)] {
        let g = guest(
            &kernel,
            &archive,
            Mode::Deterministic,
            (0, core),
            &if core == 0 {
                format!("calls,{runs},+,{}", crate::bench_agora_fig3::args(runs))
            } else {
                format!("calls,{runs}")
            },
        );
        qemu = g.shown_command_line();
        let what = format!("Table 2, agora on core {core}, file service on core 0 ({name})");
        placements.push((name, boot(&g, &what, limit)?));
    }
    let (linux, peer_cmd) = match peer {
        Some(Peer::Linux) => {
            let mut all: Vec<(String, Vec<f64>)> = crate::peer_linux::run_cases(runs)?
                .into_iter()
                .map(|p| (p.case, p.samples))
                .collect();
            all.extend(
                crate::peer_linux::run_ipc(runs)?
                    .into_iter()
                    .map(|p| (p.case, p.samples)),
            );
            (
                all,
                crate::peer_linux::qemu_command_line(runs).unwrap_or_default(),
            )
        }
        None => (Vec::new(), String::new()),
    };
    let mut report = build_report(runs, &placements, &linux, &qemu, &peer_cmd)?;
    crate::bench_agora_fig3::add(&mut report, &placements[0].1)?;
    crate::bench_agora_t4::add_deterministic(&mut report, &placements)?;
    report.musubi_commit = crate::results::commit();
    report.publish()
}

/// The samples of `case`, one field of each.
fn field(samples: &[Sample], case: &str, f: impl Fn(&Sample) -> f64) -> Vec<f64> {
    samples.iter().filter(|s| s.case == case).map(f).collect()
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    Row::from_samples("", v).median
}

/// Per call and placement: response, busy cost, messages, cross-core messages, estimated
/// instructions in IPC.
struct Call {
    cost: f64,
    busy: f64,
    messages: f64,
    cross: f64,
    ipc: f64,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub fn build_report(
    runs: usize,
    placements: &[(&str, Vec<Sample>)],
    linux: &[(String, Vec<f64>)],
    qemu: &str,
    peer_cmd: &str,
) -> Result<Report> {
    let mut rows = Vec::new();
    let one = &placements
        .iter()
        .find(|(p, _)| *p == ONE_CORE)
        .context("no one-core run")?
        .1;
    // The round trips, from the one-core run (agora on core 0 with the servers).
    for case in [RTT_SAME, RTT_CROSS, PIPE_SAME, PIPE_CROSS, ICA_SETUP] {
        let v = field(one, case, |s| s.per_op);
        if v.is_empty() {
            bail!("agora printed no samples for '{case}'");
        }
        rows.push(Row::from_samples(&format!("musubi: {case}"), &v));
    }
    let rtt_same = rows[0].median;
    let rtt_cross = rows[1].median;
    let ica_setup = rows[4].median;
    let mut table = [Vec::new(), Vec::new()];
    let (mut bare, mut replies) = (0.0, 0.0);
    for (pi, (place, samples)) in placements.iter().enumerate() {
        for case in CALLS {
            let cost = field(samples, case, |s| s.per_op);
            if cost.is_empty() {
                bail!("agora printed no samples for '{case}' ({place})");
            }
            let busy = field(samples, case, |s| s.busy);
            let msgs = field(samples, case, |s| s.messages);
            let cross = field(samples, case, |s| s.cross);
            rows.push(Row::from_samples(&format!("{place}: {case}"), &cost));
            rows.push(Row::from_samples(
                &format!("{place}: {case}, busy (all cores, without waits)"),
                &busy,
            ));
            rows.push(Row::from_samples(
                &format!("{place}: {case}, rendezvous messages per call"),
                &msgs,
            ));
            rows.push(Row::from_samples(
                &format!("{place}: {case}, cross-core messages per call"),
                &cross,
            ));
            let (m, x) = (median(&msgs), median(&cross));
            // Each message is half a round trip with its ICA.
            let ipc = (m - x) / 2.0 * rtt_same + x / 2.0 * rtt_cross;
            table[pi].push(Call {
                cost: median(&cost),
                busy: median(&busy),
                messages: m,
                cross: x,
                ipc,
            });
            if *place == TWO_CORES {
                bare += field(samples, case, |s| s.cross_bare).iter().sum::<f64>();
                replies += field(samples, case, |s| s.cross_replies)
                    .iter()
                    .sum::<f64>();
            }
        }
    }
    for (place, samples) in placements {
        let v = field(samples, EXEC_ARCHIVE, |s| s.per_op);
        if v.is_empty() {
            bail!("agora printed no samples for '{EXEC_ARCHIVE}' ({place})");
        }
        rows.push(Row::from_samples(&format!("{place}: {EXEC_ARCHIVE}"), &v));
    }
    let exec_archive = median(&field(one, EXEC_ARCHIVE, |s| s.busy));
    let lin = |case: &str| -> Option<Row> {
        linux
            .iter()
            .find(|(c, s)| c == case && !s.is_empty())
            .map(|(_, s)| Row::from_samples(&format!("linux: {case}"), s))
    };
    let linux_read = lin(LINUX_READ);
    let linux_pipe = lin(LINUX_PIPE);
    let linux_spawn = lin("spawn+wait");
    rows.extend(
        [&linux_read, &linux_pipe, &linux_spawn]
            .into_iter()
            .flatten()
            .cloned(),
    );

    // Checks: the paper's shapes, then the targets.
    let file_calls = 0..CALLS.len();
    let share_one: Vec<f64> = file_calls
        .clone()
        .map(|i| table[0][i].ipc / table[0][i].busy)
        .collect();
    let paper_share: Vec<f64> = file_calls
        .clone()
        .map(|i| PAPER_ONE_IPC[i] / PAPER_ONE[i])
        .collect();
    let share_two: Vec<f64> = file_calls
        .clone()
        .map(|i| table[1][i].ipc / table[1][i].busy)
        .collect();
    let paper_share_two: Vec<f64> = file_calls
        .clone()
        .map(|i| PAPER_TWO_IPC[i] / PAPER_TWO[i])
        .collect();
    let slower: Vec<f64> = file_calls
        .clone()
        .map(|i| table[1][i].busy / table[0][i].busy)
        .collect();
    let paper_slower: Vec<f64> = file_calls.map(|i| PAPER_TWO[i] / PAPER_ONE[i]).collect();
    let mut checks = vec![
        Check {
            name: "share of a file call's cost in IPC, one core (median of read hit, read miss, \
                   write, open, close, exec)"
                .into(),
            value: round3(median(&share_one)),
            target: ">= 0.3 (IPC a main cost, as the paper's about 50%)".into(),
            paper: Some(round3(median(&paper_share))),
            holds: median(&share_one) >= 0.3,
        },
        Check {
            name: format!(
                "share of a file call's cost in IPC, two cores (median; one core: {:.3})",
                median(&share_one)
            ),
            value: round3(median(&share_two)),
            target: "> one core's (cross-core IPC weighs more, as in the paper)".into(),
            paper: Some(round3(median(&paper_share_two))),
            holds: median(&share_two) > median(&share_one),
        },
        Check {
            name: "two cores / one core, file call busy cost (median over the six file calls)"
                .into(),
            value: round3(median(&slower)),
            target: "> 1 (a call answered across cores costs more, as in the paper)".into(),
            paper: Some(round3(median(&paper_slower))),
            holds: median(&slower) > 1.0,
        },
        Check::computed(
            "read miss / read hit, rendezvous messages (a miss reaches the disk manager)",
            table[0][1].messages / table[0][0].messages,
            "> 1",
            table[0][1].messages > table[0][0].messages,
        ),
    ];
    let no_data = if replies > 0.0 { bare / replies } else { 0.0 };
    checks.push(Check {
        name: "Table 4: share of cross-core rendezvous whose answer carries no reply data \
               (two cores, all calls)"
            .into(),
        value: round3(no_data),
        target: ">= 0.5 (most, so reply-less messages would serve)".into(),
        paper: Some(PAPER_NO_REPLY_DATA),
        holds: no_data >= 0.5,
    });
    let musubi_hit = table[0][0].cost;
    let pipe_cross = rows[3].median;
    if let Some(l) = &linux_read {
        let r = musubi_hit / l.median;
        checks.push(Check::computed(
            "read hit, one core / Linux read of a cached file (median instructions)",
            r,
            &format!("<= {READ_HIT_LINUX}"),
            r <= READ_HIT_LINUX,
        ));
    }
    if let Some(l) = &linux_pipe {
        let r = pipe_cross / l.median;
        checks.push(Check::computed(
            "pipe round trip, two cores / Linux pipe ping-pong, 2 CPUs (median instructions)",
            r,
            &format!("<= {PIPE_LINUX}"),
            r <= PIPE_LINUX,
        ));
    }

    let mut t2 = String::from(
        "Table 2 beside the paper. Ours: median per call, response (clock) / busy (all cores' \
         instructions, without halted waits: the disk's time d is left out, as the paper leaves \
         it out of its figures) and rendezvous messages; IPC share: estimated instructions in \
         IPC (messages x half the round trip with a 4 KiB ICA, same-core or cross-core as \
         counted) over busy. Paper: msec on PC-9801s, response, IPC load and count (read miss \
         and exec without d).\n\n\
         | call | ours 1 core | msgs | IPC share | ours 2 cores | msgs (cross) | IPC share | \
         paper 1 proc | IPC (count) | paper 2 proc | inter-proc IPC (count) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (i, call) in CALLS.iter().enumerate() {
        let (a, b) = (&table[0][i], &table[1][i]);
        t2 += &format!(
            "| {call} | {:.0} / {:.0} | {:.1} | {:.0}% | {:.0} / {:.0} | {:.1} ({:.1}) | {:.0}% | {} | {} ({}) | {} | {} ({}) |\n",
            a.cost,
            a.busy,
            a.messages,
            100.0 * a.ipc / a.busy,
            b.cost,
            b.busy,
            b.messages,
            b.cross,
            100.0 * b.ipc / b.busy,
            PAPER_ONE[i],
            PAPER_ONE_IPC[i],
            PAPER_ONE_COUNT[i],
            PAPER_TWO[i],
            PAPER_TWO_IPC[i],
            PAPER_TWO_COUNT[i],
        );
    }
    let holds = |c: &Check| if c.holds { "holds" } else { "does not hold" };
    let shape = format!(
        "Shape. IPC as the main cost of a call ({}: median share {:.0}% on one core, paper about \
         50%); a larger \
         share across cores ({}: {:.0}% on two cores, paper {:.0}%); calls answered across cores cost more than on one core ({}: {:.2}x, paper {:.2}x); \
         a cross-core rendezvous whose answer carries no data (Table 4) is {:.0}% of them here \
         against the paper's 91% ({}): the cross-core messages here are the program's with \
         `fs` (on core 0), and `ulib::fs` lends its request ICA read-only to all but reads and \
         listings, so the kernel counts a write's, a close's or a delete's answer as the return \
         value alone, and a read's (the bytes) or an open's (handle and length) as data; the \
         share is the mix of Table 2's calls, where the paper's came from a compile's traffic \
         among all its system processes. Exec reads the program through the process network, \
         as P0's did: {:.1} messages on one core against the paper's 90. Not the same program: \
         the paper's had at most 512 bytes of text and of data and was not in the buffers \
         (its figure is + d), and its memory was set up by system processes; ours reads \
         `nop`'s 38 KB image from the buffer manager's buffers in 4 KiB requests and the \
         kernel sets up its memory. Started from the boot archive by the kernel alone, with \
         no file read, the same program costs {:.0} busy instructions against {:.0} \
         ({:.2}x).",
        holds(&checks[0]),
        100.0 * median(&share_one),
        holds(&checks[1]),
        100.0 * median(&share_two),
        100.0 * median(&paper_share_two),
        holds(&checks[2]),
        median(&slower),
        median(&paper_slower),
        100.0 * no_data,
        holds(&checks[4]),
        table[0][5].messages,
        exec_archive,
        table[0][5].busy,
        table[0][5].busy / exec_archive,
    );
    let notes = vec![
        format!(
            "What is measured (`user/agora calls`, deterministic mode, two vCPUs): `blkdrv`, \
             `bufd` and `fsd` on core 0; `agora` on core 0 (\"{ONE_CORE}\") or core 1 (\"{TWO_CORES}\"). \
             Read hit: 512 B reads of a 16 KiB file just read through; read miss: 512 B reads \
             of a 512 KiB file, each sector read for the first time; write: 512 B writes to a \
             new file; open and close of an existing file in the root directory; exec: `nop`'s \
             image read through the file service (`BIN/NOP0`, in the buffer manager's buffers \
             after the first, unprinted, sample), started from it (`SPAWN_IMAGE`) and waited \
             for (`WAIT`). Every byte read is checked. Messages are counted by the kernel \
             on every core (requests taken by `RECV`, answers given), read outside the timed \
             interval. The response of a read miss and a write includes the waits for the \
             disk: with every core halted, `-icount ...,sleep=off` jumps the clock to the next \
             timer deadline, so that figure says nothing about the disk and varies; their busy \
             figure (all cores' instructions in the user, kernel, lock and interrupt modes, \
             without the `MODES` calls' own) is their cost. Round trips with a 4 KiB ICA both ways: {rtt_same:.0} instructions on one \
             core, {rtt_cross:.0} across cores ({:.1}x; P0: about 17x).",
            rtt_cross / rtt_same
        ),
        t2,
        shape,
        format!(
            "Where a read hit's {:.0} busy instructions (one core) go: about {rtt_same:.0} in \
             the program's rendezvous with `fsd` (one round trip with a 4 KiB ICA), and the \
             other {:.0} in the file server's own work: finding the file (`embedded-sdmmc`'s \
             lookups), its round trip to the buffer manager `bufd` for the sector, and copying \
             512 bytes twice. `ulib::fs` keeps one request ICA between calls; opening, \
             attaching, detaching and closing a fresh one for every call, as it did at first, \
             costs {ica_setup:.0} more (the ICA set-up row).",
            table[0][0].busy,
            table[0][0].busy - rtt_same,
        ),
        format!(
            "Targets: read hit {musubi_hit:.0} instructions{}; cross-core pipe round trip \
             {pipe_cross:.0}{}.",
            linux_read
                .as_ref()
                .map_or(" (no Linux peer in this run)".into(), |l| format!(
                    " against Linux's {:.0} ({:.2}x, target <= {READ_HIT_LINUX})",
                    l.median,
                    musubi_hit / l.median
                )),
            linux_pipe
                .as_ref()
                .map_or(" (no Linux peer in this run)".into(), |l| format!(
                    " against Linux's {:.0} ({:.2}x, target <= {PIPE_LINUX})",
                    l.median,
                    pipe_cross / l.median
                )),
        ),
        format!("Musubi QEMU: `{qemu}`"),
        if peer_cmd.is_empty() {
            "No peer in this run.".into()
        } else {
            format!("Linux peer QEMU: `{peer_cmd}` (and the same with two vCPUs for the pipe)")
        },
    ];
    Ok(Report {
        bench: "agora".into(),
        mode: Mode::Deterministic.name().into(),
        qemu: crate::bench::qemu_from_smp(qemu),
        musubi_commit: String::new(),
        runs,
        unit: "instructions per call (rows named \"messages\": rendezvous messages per call)"
            .into(),
        rows,
        checks,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(case: &str, per_op: f64, busy: f64, messages: f64, cross: f64) -> Sample {
        Sample {
            case: case.into(),
            per_op,
            busy,
            messages,
            cross,
            cross_replies: cross / 2.0,
            cross_bare: 0.0,
        }
    }

    /// Samples of one placement: every call costs `cost` (busy the same), with `messages`
    /// of which `cross` cross.
    fn placement(cost: f64, cross: f64) -> Vec<Sample> {
        let mut v = vec![
            s(RTT_SAME, 1000.0, 1000.0, 2.0, 0.0),
            s(RTT_CROSS, 4000.0, 4000.0, 2.0, 2.0),
            s(PIPE_SAME, 2000.0, 2000.0, 0.0, 0.0),
            s(PIPE_CROSS, 5000.0, 5000.0, 0.0, 0.0),
            s(ICA_SETUP, 500.0, 500.0, 0.0, 0.0),
            s(EXEC_ARCHIVE, 800.0, 800.0, 0.0, 0.0),
        ];
        for (i, c) in CALLS.iter().enumerate() {
            let m = if *c == "read miss" { 4.0 } else { 2.0 };
            v.push(s(c, cost * (i + 1) as f64, cost, m, cross.min(m)));
        }
        v
    }

    #[test]
    fn parses_bench_lines() {
        let lines = vec![
            "noise".to_string(),
            r#"BENCH {"peer":"musubi","case":"read hit","unit":"instructions","per_op":10.5,"busy":9.0,"messages":2.00,"cross":2.00,"cross_replies":1.00,"cross_bare":0.50}"#.to_string(),
            r#"BENCH {"peer":"linux","case":"x","per_op":1}"#.to_string(),
            "BENCH done".to_string(),
        ];
        let v = parse(&lines).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].case, "read hit");
        assert_eq!((v[0].per_op, v[0].busy, v[0].cross_bare), (10.5, 9.0, 0.5));
        assert!(parse(&["BENCH {\"peer\":\"musubi\"}".to_string()]).is_err());
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let p = [
            (ONE_CORE, placement(4000.0, 0.0)),
            (TWO_CORES, placement(6000.0, 2.0)),
        ];
        let linux = vec![
            (LINUX_READ.to_string(), vec![8000.0; 3]),
            (LINUX_PIPE.to_string(), vec![10000.0; 3]),
        ];
        let r = build_report(1, &p, &linux, "qemu -smp 2 x", "linux").unwrap();
        let c = |name: &str| r.checks.iter().find(|c| c.name.contains(name)).unwrap();
        // One core: 2 same-core messages = one round trip of 1000 over a busy 4000.
        assert_eq!(c("share of a file call's cost in IPC").value, 0.25);
        assert!(!c("share of a file call's cost in IPC").holds);
        assert_eq!(c("two cores / one core").value, 1.5);
        // Two cores: 2 cross-core messages = one round trip of 4000 over a busy 6000.
        assert_eq!(c("in IPC, two cores").value, 0.667);
        assert!(c("in IPC, two cores").holds);
        assert!(c("two cores / one core").holds);
        assert_eq!(c("read miss / read hit").value, 2.0);
        assert_eq!(c("Table 4").value, 0.0);
        assert!(!c("Table 4").holds);
        // Read hit, one core: 4000 against Linux's 8000; pipe across cores 5000 / 10000.
        assert_eq!(c("Linux read of a cached file").value, 0.5);
        assert!(c("Linux read of a cached file").holds);
        assert_eq!(c("Linux pipe ping-pong").value, 0.5);
        let md = r.markdown();
        assert!(md.contains("| open | 16000 / 4000 | 2.0 | 25% |"), "{md}");
        assert!(md.contains("(4.0x; P0: about 17x)"), "{md}");
        assert!(md.contains("the other 3000 in the file server"), "{md}");
        // Exec goes through the file service, read beside the start from the boot archive.
        assert!(md.contains("one core: exec from the boot archive"), "{md}");
        assert!(
            md.contains("2.0 messages on one core against the paper's 90"),
            "{md}"
        );
    }

    #[test]
    fn without_a_peer_there_is_no_target_check_and_a_missing_case_fails() {
        let p = [
            (ONE_CORE, placement(4000.0, 0.0)),
            (TWO_CORES, placement(6000.0, 2.0)),
        ];
        let r = build_report(1, &p, &[], "q", "").unwrap();
        assert_eq!(r.checks.len(), 5);
        let mut broken = placement(4000.0, 0.0);
        broken.retain(|s| s.case != "close");
        assert!(build_report(1, &[(ONE_CORE, broken), p[1].clone()], &[], "q", "").is_err());
    }
}
