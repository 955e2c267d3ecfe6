//! `cargo xtask bench machines` (issue 17, parallel mode, wall time): P0's cost ladder on
//! our system: a rendezvous round trip on one core, across two cores (inter-core RPCC),
//! and across two machines (`machd` to `machd`, `libs/mrpc` over `net.udp` on a virtual
//! Ethernet between two QEMUs), beside P0's inter-processor IPC at about 17 times its
//! intra-processor IPC (Agora-1, Table 1's footnote: 158-219 us against 2.41-3.96 ms).
//!
//! Each run boots two machines (`xtask/src/machines.rs`, 2 cores each, parallel TCG) and
//! in machine 0's shell runs `ipcbench` (each sample the mean of 1,000 same-core and 200
//! two-core round trips, in TSC ticks, turned into ns with the TSC frequency the kernel
//! printed at boot), `mping 1 N bench` (each sample one cross-machine round trip, ns) and
//! `resbench ladder 1 N` (P4's resource operation, `RES_INFO`, on this core, the other
//! core and machine 1, in TSC ticks) and `movecheck bench 1 N` (a process moved to the
//! other core and to machine 1, in TSC ticks).
//!
//! With `--peer linux`, each run then boots the peer: two Debian Linux 6.1 guests
//! (2 vCPUs each, parallel TCG) joined the same way, one echoing UDP on port 7 and one
//! pinging it `PINGS` times with 40-byte datagrams (an mrpc header's size), one at a time
//! (`peer/linux/echo.c`, `bench_role=ping`; each sample one round trip, ns, measured by the
//! pinging program). The target: Musubi's cross-machine round trip at most 1.0x Linux's.
//!
//! P0 Table 5's analogue (`bench_machines_jobs.rs`): each run also boots two one-core
//! machines and times two miniature compilations (`pmake job`) both on machine 0, then one
//! on each machine (the first placement alternating between runs).
//!
//! P0 Table 1's analogue (`bench_machines_jobs::table1`): each run also boots two one-core
//! machines, machine 1 with a disk, and runs the miniature compiler with its files on that
//! disk on machine 1 and on machine 0 (no disk: the files are `m1:`).

use crate::bench::bench_samples;
use crate::bench_machines_jobs as jobs;
use crate::machines::{Cluster, Link, Options};
use crate::peer_linux_net::Echo;
use crate::qemu::{NetBackend, NetCfg};
use crate::results::{Check, Report, Row};
use crate::switch::Faults;
use anyhow::{bail, Context, Result};

/// Cross-machine round trips per run.
const PINGS: usize = 200;
/// `ipcbench`'s samples per run.
const IPC_SAMPLES: usize = 5;
/// P0: inter-processor IPC over intra-processor IPC (2.41-3.96 ms against 158-219 us).
const PAPER_RATIO: f64 = 17.0;

const SAME: &str = "rendezvous round trip, same core";
const CROSS: &str = "rendezvous round trip, two cores";
const MACHINE: &str = "cross-machine round trip";
const LINUX: &str = "UDP ping-pong, two guests";
/// `resbench ladder`'s cases (`user/resbench/src/ladder.rs`).
const RES_SAME: &str = "resource op (RES_INFO of a pipe), same core";
const RES_CROSS: &str = "resource op (RES_INFO of a pipe), other core";
const RES_MACHINE: &str = "resource op (RES_INFO of a pipe), other machine";
/// `movecheck bench`'s cases (`user/movecheck/src/bench.rs`).
const MOVE_CROSS: &str = "process moved, other core";
const MOVE_MACHINE: &str = "process moved, other machine";
/// The Linux pinger's datagram: the size of an mrpc header (`libs/mrpc`), what `mping`'s
/// request and answer carry.
const LINUX_SIZE: usize = 40;
/// Linux datagrams lost in one run beyond which the run fails (QEMU's dgram link does not
/// drop; a loss means something is wrong).
const LINUX_LOSS_LIMIT: u64 = 5;

/// The TSC frequency (MHz) from the kernel's boot line `... TSC 2460 MHz ...`.
fn tsc_mhz(lines: &[String]) -> Option<f64> {
    lines.iter().find_map(|l| {
        let rest = l.split_once("TSC ")?.1;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The Linux peer: two Linux guests on a dgram pair on 127.0.0.1, one echoing and one
/// pinging it [`PINGS`] times; the round trips (ns), the datagrams lost and the pinger's
/// QEMU command line.
fn linux_round_trips(smp: usize) -> Result<(Vec<f64>, u64, String)> {
    let pair = [
        crate::net_test::free_udp_port()?,
        crate::net_test::free_udp_port()?,
    ];
    let net = |k: usize| NetCfg {
        mac: format!("52:54:00:4c:00:{:02x}", k + 1),
        backend: NetBackend::Wire {
            local_port: pair[k],
            remote_port: pair[1 - k],
        },
    };
    let _echo = Echo::boot_with(smp, net(0), "bench_addr=10.9.0.1", "BENCH echo ready")?;
    let ping = Echo::boot_with(
        smp,
        net(1),
        &format!(
            "bench_role=ping bench_addr=10.9.0.2 bench_peer=10.9.0.1 bench_count={PINGS} \
             bench_size={LINUX_SIZE}"
        ),
        "BENCH done",
    )?;
    let lines = ping.lines();
    let lost = lines
        .iter()
        .find_map(|l| l.split_once("BENCH lost ")?.1.trim().parse::<u64>().ok())
        .context("the Linux pinger printed no 'BENCH lost' line")?;
    if lost > LINUX_LOSS_LIMIT {
        bail!(
            "the Linux pinger lost {lost} datagrams; last lines:\n{}",
            ping.tail()
        );
    }
    let samples = bench_samples(&lines, "linux")?
        .into_iter()
        .find(|(c, _)| c == LINUX)
        .map(|(_, s)| s)
        .filter(|s| !s.is_empty())
        .with_context(|| format!("no Linux round trips; last lines:\n{}", ping.tail()))?;
    Ok((samples, lost, ping.command_line.clone()))
}

/// Run `run`'s cross-machine round trips over the UDP link (`o`, `steps`): the samples, ns.
fn udp_round_trips(
    kernel: &std::path::Path,
    archive: &std::path::Path,
    o: &Options,
    steps: &[crate::script::Step],
    run: usize,
) -> Result<Vec<f64>> {
    let cluster = Cluster::plan(kernel, archive, o)?;
    let lines = bench_script(
        &cluster,
        &format!("bench machines, run {} (UDP link)", run + 1),
        steps,
        "mping over the UDP link",
    )?;
    let s = bench_samples(&lines, "musubi")?
        .into_iter()
        .find(|(c, s)| c == MACHINE && !s.is_empty())
        .map(|(_, s)| s)
        .context("no round trips over the UDP link")?;
    Ok(s)
}

/// Boot `cluster`'s machines 1.. (logged) and run `steps` in machine 0's shell: its
/// console lines, or an error if a `BENCH error` line says that `what` failed.
fn bench_script(
    cluster: &Cluster,
    title: &str,
    steps: &[crate::script::Step],
    what: &str,
) -> Result<Vec<String>> {
    let others = cluster.start_logged(1)?;
    let lines = crate::script::run_steps_with(
        &cluster.guests[0],
        title,
        steps,
        |l| l.contains("BENCH {"),
        &mut |_, _| Ok(()),
    );
    drop(others);
    let lines = lines?;
    if lines.iter().any(|l| l.contains("BENCH error")) {
        bail!("{what} failed; see the console above");
    }
    Ok(lines)
}

/// The check that the same operation costs more at a greater distance (`far` against
/// `near`, medians), with `why` after the target.
fn farther_costs_more(name: &str, near: &Row, far: &Row, why: &str) -> Check {
    Check::computed(
        name,
        far.median / near.median,
        &format!("> 1 ({why})"),
        far.median > near.median,
    )
}

pub fn machines(runs: usize, with_linux: bool) -> Result<()> {
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let archive = crate::user::build_archive()?;
    let o = Options {
        machines: 2,
        smp: 2,
        mem_mib: 256,
        cmdline: String::new(),
        faults: Faults::default(),
        disks: Vec::new(),
        link: Link::default(),
    };
    let script = format!(
        "machines wait\nrun ipcbench {IPC_SAMPLES}\nmping 1 {PINGS} bench\n\
         run resbench ladder 1 {IPC_SAMPLES}\nrun movecheck bench 1 {IPC_SAMPLES}\n"
    );
    let steps = crate::script::parse(&script)?;
    // The same round trips over the first design's link (UDP through netd), booted apart.
    let udp_options = Options {
        link: Link::Udp,
        ..o.clone()
    };
    let udp_steps = crate::script::parse(&format!("machines wait\nmping 1 {PINGS} bench\n"))?;
    let mut over_udp = Vec::new();
    let mut samples: Vec<(String, Vec<f64>)> = Vec::new();
    let mut qemu = String::new();
    let (mut linux, mut linux_lost, mut linux_qemu) = (Vec::new(), 0u64, String::new());
    let (mut one_machine, mut spread) = (Vec::new(), Vec::new());
    let (mut with_disk, mut without_disk) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let cluster = Cluster::plan(&kernel, &archive, &o)?;
        qemu = cluster.guests[0].shown_command_line();
        let lines = bench_script(
            &cluster,
            &format!("bench machines, run {}", run + 1),
            &steps,
            "ipcbench, resbench or movecheck",
        )?;
        let mhz = tsc_mhz(&lines).context("no TSC frequency on the console")?;
        for (case, s) in bench_samples(&lines, "musubi")? {
            let s: Vec<f64> = match case.as_str() {
                SAME | CROSS | RES_SAME | RES_CROSS | RES_MACHINE | MOVE_CROSS | MOVE_MACHINE => {
                    s.iter().map(|ticks| ticks * 1000.0 / mhz).collect()
                }
                MACHINE => s,
                _ => continue,
            };
            match samples.iter_mut().find(|(c, _)| *c == case) {
                Some((_, v)) => v.extend(s),
                None => samples.push((case, s)),
            }
        }
        over_udp.extend(udp_round_trips(
            &kernel,
            &archive,
            &udp_options,
            &udp_steps,
            run,
        )?);
        if with_linux {
            let (s, lost, cmd) = linux_round_trips(o.smp)?;
            linux.extend(s);
            linux_lost += lost;
            linux_qemu = cmd;
        }
        let (one, two) = jobs::run(&kernel, &archive, run)?;
        one_machine.push(one);
        spread.push(two);
        let (disk, diskless) = jobs::table1(&kernel, &archive, run)?;
        // us -> ns, the report's unit.
        with_disk.push(disk * 1000.0);
        without_disk.push(diskless * 1000.0);
    }
    let row = |case: &str, shown: &str| -> Result<Row> {
        let (_, s) = samples
            .iter()
            .find(|(c, s)| c == case && !s.is_empty())
            .with_context(|| format!("no samples for '{case}'"))?;
        Ok(Row::from_samples(shown, s))
    };
    let mut rows = vec![
        row(SAME, "same-core rendezvous round trip (CALL, REPLY_RECV)")?,
        row(CROSS, "cross-core rendezvous round trip (inter-core RPCC)")?,
        row(
            MACHINE,
            "cross-machine null round trip (machd, mrpc in frames of its own type through netdrv)",
        )?,
    ];
    if with_linux {
        rows.push(Row::from_samples(
            "linux: UDP ping-pong between two guests (40-byte datagrams)",
            &linux,
        ));
    }
    let mut checks = checks(&rows);
    let udp = Row::from_samples(
        "cross-machine null round trip over the first link (machd, mrpc over UDP through netd and netdrv)",
        &over_udp,
    );
    checks.push(Check::computed(
        "cross-machine null round trip: own Ethernet link / UDP link (medians)",
        rows[2].median / udp.median,
        "< 1 (netd's step left out on both machines)",
        rows[2].median < udp.median,
    ));
    rows.push(udp);
    let ladder = [
        row(RES_SAME, "resource op (RES_INFO of a pipe), same core")?,
        row(RES_CROSS, "resource op, other core (inter-core RPCC)")?,
        row(
            RES_MACHINE,
            "resource op, other machine (OP_RES: machd, mrpc through netdrv, made there as the user)",
        )?,
    ];
    checks.push(farther_costs_more(
        "resource op: other core / same core (medians)",
        &ladder[0],
        &ladder[1],
        "P4: a remote resource costs more",
    ));
    checks.push(farther_costs_more(
        "resource op: other machine / other core (medians)",
        &ladder[1],
        &ladder[2],
        "P4: inter-machine RCC costs more than inter-core",
    ));
    rows.extend(ladder);
    let moves = [
        row(MOVE_CROSS, "process moved, other core (MIGRATE: frames copied by the new core)")?,
        row(
            MOVE_MACHINE,
            "process moved, other machine (migrate -m: image out, machd in 896-byte pieces, image in)",
        )?,
    ];
    checks.push(farther_costs_more(
        "process moved: other machine / other core (medians)",
        &moves[0],
        &moves[1],
        "P4 names migration between machines an open problem; no paper figure",
    ));
    rows.extend(moves);
    let (one, two) = (
        Row::from_samples(
            &format!(
                "Table 5: two jobs (pmake job {}) on one one-core machine",
                jobs::WORK
            ),
            &one_machine,
        ),
        Row::from_samples(
            "Table 5: the same two jobs spread over two one-core machines (one by run -m 1)",
            &spread,
        ),
    );
    checks.push(Check::computed(
        "Table 5: two jobs spread over two machines / on one (medians)",
        two.median / one.median,
        "< 1 (P0: 15-30% faster spread, 0.70-0.85)",
        two.median < one.median,
    ));
    rows.push(one);
    rows.push(two);
    let (disk, diskless) = (
        Row::from_samples(
            &format!(
                "Table 1: pmake cc {} on machine 1, its files on its own disk",
                jobs::WORK
            ),
            &with_disk,
        ),
        Row::from_samples(
            "Table 1: the same on machine 0, which has no disk (files m1: through machd)",
            &without_disk,
        ),
    );
    checks.push(Check {
        name: "Table 1: diskless machine / disk machine, pmake cc (medians)".into(),
        value: ((diskless.median / disk.median) * 1000.0).round() / 1000.0,
        target: "> 1 (P0: 1.04-1.10 slower on the diskless PC)".into(),
        paper: Some(jobs::TABLE1_PAPER),
        holds: diskless.median > disk.median,
    });
    rows.push(disk);
    rows.push(diskless);
    let peer_note = if with_linux {
        format!(
            "Linux peer (the issue's target): two Debian Linux 6.1 guests (2 vCPUs and 512 MiB \
             each, parallel TCG) joined like the Musubi machines (a dgram pair on 127.0.0.1), \
             booted after the Musubi machines in every run; `peer/linux/echo.c` echoes UDP on \
             port 7 in one and, in the other, sends {PINGS} datagrams of {LINUX_SIZE} bytes \
             one at a time (each sample one round trip, ns, CLOCK_MONOTONIC in the pinging \
             program; datagrams lost: {linux_lost}). Equal work, or close: each side's \
             round trip is one request datagram and one answer of about the same size, \
             timed by the program that sends; Musubi's passes through two user processes \
             per machine (machd, netdrv) where Linux's passes through its kernel, and it \
             is no UDP but mrpc straight in Ethernet frames (as Linux's 40 bytes of UDP \
             payload, 40 bytes of mrpc header). \
             QEMU (Linux pinger): `{linux_qemu}`"
        )
    } else {
        "The issue's Linux peer (a UDP ping-pong between two Linux 6.1 guests on the same \
         network) runs with `--peer linux`; not in this run."
            .to_string()
    };
    let report = Report {
        bench: "machines".into(),
        mode: crate::qemu::Mode::Parallel.name().into(),
        qemu: crate::bench::qemu_from_smp(&qemu),
        musubi_commit: crate::results::commit(),
        runs,
        unit: "ns (wall time)".into(),
        rows,
        checks,
        notes: vec![
            format!(
                "The cost ladder of P0 on two machines (2 cores each, multi-threaded TCG, two \
                 QEMUs joined by a dgram pair on 127.0.0.1). Same-core and cross-core: \
                 `ipcbench {IPC_SAMPLES}` per run (each sample the mean of 1,000 and 200 round \
                 trips, TSC ticks / TSC MHz). Cross-machine: `mping 1 {PINGS} bench` per run \
                 (each sample one round trip as machd times it, from the shell's request to \
                 the answer: machd sends an mrpc request in an Ethernet frame of its own type \
                 to netdrv, machine 1's netdrv hands it to its machd, which answers the same \
                 way). The same over the first design's link, UDP through netd (`machd K N \
                 udp`: netd's smoltcp and one more IPC hop on each side of each crossing), in \
                 two machines booted apart in the same run."
            ),
            "P0 (Agora-1) measured inter-processor IPC at 2.41-3.96 ms against 158-219 us \
             within a processor (~17x)."
                .into(),
            format!(
                "P4's resource operation at three distances: `resbench ladder 1 {IPC_SAMPLES}` \
                 per run, `RES_INFO` of a pipe on the program's own core (each sample the mean \
                 of 200), on the other core (200, an inter-core RPCC request), and on machine \
                 1 (5: `ulib::mach::res_info`, `OP_RES` to machd, an mrpc request in a \
                 frame of its own type, machine 1's machd making it there as the program's user), TSC ticks \
                 / TSC MHz."
            ),
            format!(
                "A process moved (`movecheck bench 1 {IPC_SAMPLES}` per run, each sample one \
                 move of the same parked `movecheck` process, TSC ticks / TSC MHz): to the \
                 other core by `MIGRATE` (the new core copies its frames), and to machine 1 \
                 by `ulib::mach::migrate` (`MIGRATE_EXPORT` writes its image, about 150 KiB, \
                 machd carries it in 896-byte mrpc requests, four out at once, machine 1's machd \
                 makes `MIGRATE_IMPORT`, then `MIGRATE_FINISH`). No peer: Linux has no \
                 process migration between machines of its own (CRIU is another design)."
            ),
            format!(
                "P0 Table 1's analogue: two one-core machines, machine 1 with a fresh FAT disk \
                 and machine 0 without one. `pmake src m1:` writes a 16 KiB source to machine \
                 1's disk; then `pmake cc FILES {}` (read SRC.C, tokenise it {} times, write a \
                 4 KiB OBJ.O and delete it) runs once on machine 1 (`run ... -m 1`, FILES `-`: \
                 its own disk) and once on machine 0 (FILES `m1:`: each file request goes to \
                 machd, over mrpc to machine 1's machd and to its fs, at most 896 bytes a \
                 piece), the first alternating between runs. Each sample is the program's own \
                 time from its first file request to its last (its start and exit are not \
                 in it, and the program comes from the boot archive on both machines, where \
                 Agora-1's diskless PC also read the program from the other's disk). P0's \
                 figure is the median over its five programs of the diskless PC's time over \
                 the disk PC's.",
                jobs::WORK,
                jobs::WORK
            ),
            format!(
                "P0 Table 5's analogue: two one-core machines (parallel TCG, so both QEMUs \
                 run at once on the host's two cores); machine 0's shell starts two `pmake \
                 job {}` (a compiler run in miniature: a 16 KiB source written to a vregion \
                 and read back, tokenised into a symbol table, a 4 KiB object written; its \
                 files are vregions, the machines have no disks) either both on machine 0 or \
                 the second on machine 1 (`run -m 1`), and waits for both; each sample is \
                 the time between two `uptime`s around them (machine 0's clock, ms \
                 resolution, in ns here), the first placement alternating between runs. \
                 Agora-1 ran two compilations 15-30% faster spread over its two PCs than on \
                 one (its jobs shared one disk; ours share nothing but the starting shell).",
                jobs::WORK
            ),
            peer_note,
            format!("QEMU (machine 0): `{qemu}`"),
        ],
    };
    report.publish()
}

/// The checks, from the rows: P0's shape (crossing to another processor costs an order of
/// magnitude more) and our ratios.
fn checks(rows: &[Row]) -> Vec<Check> {
    let (same, cross, machine) = (rows[0].median, rows[1].median, rows[2].median);
    let r = machine / same;
    let linux = rows.get(3).map(|l| {
        Check::computed(
            "cross-machine null round trip / Linux UDP ping-pong between two guests (medians)",
            machine / l.median,
            "<= 1.0",
            machine <= l.median,
        )
    });
    let mut checks = vec![
        Check {
            name: "cross-machine / same-core round trip (P0: inter/intra-processor IPC)".into(),
            value: (r * 1000.0).round() / 1000.0,
            target: "> 1 (shape: leaving the processor costs more)".into(),
            paper: Some(PAPER_RATIO),
            holds: r > 1.0,
        },
        Check::computed(
            "cross-core / same-core round trip",
            cross / same,
            "> 1",
            cross > same,
        ),
        Check::computed(
            "cross-machine / cross-core round trip",
            machine / cross,
            "> 1",
            machine > cross,
        ),
    ];
    checks.extend(linux);
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_frequency_is_read_from_the_boot_line() {
        let l = vec!["[ 0.2 c0] x2APIC mode APIC, TSC 2460 MHz, LAPIC timer 62 MHz".to_string()];
        assert_eq!(tsc_mhz(&l), Some(2460.0));
        assert_eq!(tsc_mhz(&[]), None);
    }

    #[test]
    fn checks_are_computed_from_the_rows() {
        let rows = vec![
            Row::from_samples("a", &[1000.0]),
            Row::from_samples("b", &[5000.0]),
            Row::from_samples("c", &[17000.0]),
        ];
        let c = checks(&rows);
        assert_eq!(c[0].value, 17.0);
        assert!(c[0].holds && c[1].holds && c[2].holds);
        assert_eq!(c[2].value, 3.4);
        let rows = vec![
            Row::from_samples("a", &[1000.0]),
            Row::from_samples("b", &[500.0]),
            Row::from_samples("c", &[400.0]),
        ];
        let c = checks(&rows);
        assert!(!c[0].holds && !c[1].holds && !c[2].holds);
        assert_eq!(c.len(), 3, "no Linux row, no Linux check");
    }

    #[test]
    fn the_linux_check_compares_the_cross_machine_round_trip() {
        let mut rows = vec![
            Row::from_samples("a", &[1000.0]),
            Row::from_samples("b", &[5000.0]),
            Row::from_samples("c", &[3000.0]),
            Row::from_samples("linux", &[2000.0]),
        ];
        let c = checks(&rows);
        assert_eq!(c.len(), 4);
        assert_eq!(c[3].value, 1.5);
        assert!(!c[3].holds);
        rows[3] = Row::from_samples("linux", &[3000.0]);
        assert!(checks(&rows)[3].holds);
    }
}
