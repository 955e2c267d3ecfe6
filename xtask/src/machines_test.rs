//! The tests of several machines as one system (issue 17), in `cargo xtask test` (all, or
//! `--filter machines`): each boots 2 to 4 QEMUs with [`crate::machines::Cluster`] and
//! drives machine 0's shell; the other machines' consoles go to `target/machines/mK.log`.
//!
//! - [`two`]: `user/shell/machines.script`: the machines see each other, null round trips,
//!   a remote run with its exit status (0 and 2), every machine's processes, a counter
//!   incremented 200 times, each exactly once, a background remote program's output here.
//! - [`files`]: machine 0 without a disk uses machine 1's files, on a lossy switch.
//! - [`four`]: four machines on the xtask switch: all up, a round trip to each, a remote
//!   run on the last one.
//! - [`killed`]: three machines; machine 0's shell waits for a program on machine 1 when
//!   machine 1's QEMU is killed: the wait must end `Gone` within [`DEATH_BOUND`], machine 1
//!   must show as down, machine 2 must go on working, a new request to machine 1 must
//!   be refused at once, and a process moved to it must stay here, running.
//! - [`rebooted`]: two machines; machine 1's QEMU is killed and booted again (a new
//!   epoch): `kill` and `wait` of the program its earlier life ran are refused
//!   (`StaleResource`), and the new life answers.
//! - [`lossy`]: two machines on the switch dropping 5% and duplicating 5% of the frames
//!   (seeded): [`LOSSY_COUNT`] counter increments each performed exactly once (`mcount`
//!   checks every answer), as many `SEM_V`s on a semaphore of machine 1 (`OP_RES`: its
//!   count must be exact), pipelines both ways, a process moved to machine 1 (its image in
//!   some 230 pieces, each performed once: its sums add up there), and remote runs each
//!   with its right exit status.
//!
//! Every QEMU is a [`Reaper`], killed when the test ends however it ends.

use crate::machines::{Cluster, Link, Options};
use crate::runner::Reaper;
use crate::script::{run_steps_with, Step};
use crate::switch::Faults;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The longest a request to a machine that died may wait for its end: the design says a
/// machine silent for `abi::mach::DOWN_AFTER_NS` (3 s) is down and its requests end then
/// (checked at least every heartbeat period, 0.1 s); this bound leaves 7 s more for a
/// loaded host running three emulated machines.
pub const DEATH_BOUND: Duration = Duration::from_secs(10);
/// Counter increments in the lossy test (the 10,000 resource operations).
pub const LOSSY_COUNT: u64 = 10_000;

fn options(machines: usize, smp: usize, faults: Faults) -> Options {
    Options {
        machines,
        smp,
        mem_mib: 256,
        cmdline: String::new(),
        faults,
        disks: Vec::new(),
        link: Link::default(),
    }
}

fn steps(lines: &[(&str, &[&str], &[&str])]) -> Vec<Step> {
    lines
        .iter()
        .map(|(c, expect, expect_error)| Step {
            command: c.to_string(),
            expect: expect.iter().map(|s| s.to_string()).collect(),
            expect_error: expect_error.iter().map(|s| s.to_string()).collect(),
            ..Step::default()
        })
        .collect()
}

/// The other machines' QEMUs while a test drives machine 0 (`None`: killed by the test).
type Others = Vec<Option<Reaper>>;

/// Boot `cluster`'s machines 1.. (logged), then run `steps` in machine 0's shell; `after`
/// runs on the host after each step (step index, its output, the other machines).
fn drive(
    cluster: &Cluster,
    name: &str,
    steps: &[Step],
    after: &mut dyn FnMut(usize, &str, &mut Others) -> Result<()>,
) -> Result<Vec<String>> {
    let mut others: Others = cluster.start_logged(1)?.into_iter().map(Some).collect();
    let r = run_steps_with(&cluster.guests[0], name, steps, |_| false, &mut |i, out| {
        after(i, out, &mut others)
    });
    drop(others);
    // A failure says what the other machines printed last (their consoles go to logs,
    // which the next test overwrites).
    r.map_err(|e| {
        let tails: String = (1..cluster.guests.len())
            .map(|k| {
                let log = std::fs::read_to_string(crate::machines::log_path(k)).unwrap_or_default();
                let last: Vec<&str> = log.lines().rev().take(10).collect();
                let lines: String = last.iter().rev().map(|l| format!("\n    | {l}")).collect();
                format!("\nmachine {k}'s last console lines:{lines}")
            })
            .collect();
        anyhow::anyhow!("{e:#}{tails}")
    })
}

/// Two machines and `user/shell/machines.script`.
pub fn two(kernel: &Path, initrd: &Path) -> Result<String> {
    let cluster = Cluster::plan(kernel, initrd, &options(2, 2, Faults::default()))?;
    let file = crate::build::workspace_root().join("user/shell/machines.script");
    let steps = crate::script::load(&file)?;
    let lines = drive(
        &cluster,
        "user/shell/machines.script",
        &steps,
        &mut |_, _, _| Ok(()),
    )?;
    // The background program's output came here, printed by machd while it followed it
    // (before `mfcheck quiet` saw it follow nothing: `wait` would read the rest itself),
    // and not on machine 1's console.
    let background = "args: in-the-background";
    let printed = lines.iter().position(|l| l.contains(background));
    let quiet = lines.iter().position(|l| l.contains("mfcheck quiet: ok"));
    match (printed, quiet) {
        (Some(p), Some(q)) if p < q => {}
        _ => bail!(
            "the output of `run hello in-the-background -m 1 &` did not reach machine 0 \
             while machd followed it (line {printed:?}, mfcheck quiet at {quiet:?})"
        ),
    }
    let m1 = std::fs::read_to_string(crate::machines::log_path(1)).unwrap_or_default();
    if m1.contains(background) {
        bail!("the background program's output went to machine 1's console");
    }
    Ok("machines.script passed on 2 machines; a background job's output came here".into())
}

/// Four machines on the switch, their `machd` speaking UDP through `netd` (`machd K N udp`).
pub fn four(kernel: &Path, initrd: &Path) -> Result<String> {
    // The first design's link (UDP through netd), so that it stays tested.
    let o = Options {
        link: Link::Udp,
        ..options(4, 1, Faults::default())
    };
    let cluster = Cluster::plan(kernel, initrd, &o)?;
    let steps = steps(&[
        ("machines wait", &["all 4 up"], &[]),
        ("machines", &["m3 10.9.0.4 up"], &[]),
        ("mping 1", &["mping m1: 1 round trips"], &[]),
        ("mping 2", &["mping m2: 1 round trips"], &[]),
        ("mping 3", &["mping m3: 1 round trips"], &[]),
        (
            "run hello four -m 3",
            &["(hello) exited with status 0"],
            &[],
        ),
        ("ps -a", &["m3.c0.1", "m2.c0.1", "m1.c0.1"], &[]),
        // Over UDP the forged datagrams reach machine 1's machd (which must ignore them).
        ("run mfcheck forgepeer 1", &["mfcheck forgepeer: ok"], &[]),
    ]);
    drive(&cluster, "four machines", &steps, &mut |_, _, _| Ok(()))?;
    Ok("4 machines up over the UDP link, each reached, a remote run on m3".into())
}

/// Three machines; machine 1 killed while machine 0 waits for a program on it. Machine 0
/// has a disk, and a program on machine 1 holds a file of it open when machine 1 dies:
/// machine 0's `machd` must close it (`mfcheck reopen` then opens it).
pub fn killed(kernel: &Path, initrd: &Path) -> Result<String> {
    let image = crate::build::workspace_root().join("target/test-mkilled.img");
    crate::disk::make(&image)?;
    let mut o = options(3, 1, Faults::default());
    o.disks = vec![Some(image)];
    let cluster = Cluster::plan(kernel, initrd, &o)?;
    let steps = steps(&[
        ("machines wait", &["all 3 up"], &[]),
        ("run mfcheck hold 0 -m 1 &", &["[m1."], &[]),
        ("run mfcheck await READY.TXT", &["mfcheck await: ok"], &[]),
        ("write ORPHAN.TXT taken", &[], &["in use"]),
        ("run spin -m 1 &", &["[m1."], &[]),
        ("mping 1", &["mping m1: 1 round trips"], &[]),
        // The wait in progress when machine 1 dies.
        ("wait", &[], &["the machine is down (Gone)"]),
        ("machines", &["m1 10.9.0.2 down", "m2 10.9.0.3 up"], &[]),
        ("mping 1", &[], &["the machine is down (Gone)"]),
        ("mping 2 5", &["mping m2: 5 round trips"], &[]),
        (
            "run hello still -m 2",
            &["(hello) exited with status 0"],
            &[],
        ),
        ("mcount 2 100", &["each performed exactly once"], &[]),
        // A process moved to the dead machine: the move is Gone, and it runs on here.
        (
            "run movecheck move-down 1",
            &["movecheck move-down: ok"],
            &[],
        ),
        // The file machine 1's program held is closed now that machine 1 is down.
        ("run mfcheck reopen 0", &["mfcheck reopen: ok"], &[]),
    ]);
    // After the `mping 1` step: kill machine 1's QEMU a little later, while `wait` runs.
    let killed_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mut wait_took = None;
    let k = killed_at.clone();
    let mut victim: Option<std::thread::JoinHandle<()>> = None;
    let r = drive(&cluster, "a machine killed", &steps, &mut |i, _, others| {
        if i == 5 {
            let mut m1 = others[0].take().context("machine 1 is not running")?;
            let k = k.clone();
            victim = Some(std::thread::spawn(move || {
                // Not a decision: only to let `wait` start before the machine dies.
                std::thread::sleep(Duration::from_secs(2));
                *k.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                let _ = m1.0.kill();
                let _ = m1.0.wait();
                drop(m1);
            }));
        }
        if i == 6 {
            let at = *k.lock().unwrap_or_else(|p| p.into_inner());
            let at = at.context("wait ended before machine 1 was killed")?;
            wait_took = Some(at.elapsed());
        }
        Ok(())
    });
    if let Some(v) = victim {
        let _ = v.join();
    }
    r?;
    let took = wait_took.context("the wait step did not run")?;
    if took > DEATH_BOUND {
        bail!(
            "the wait on the dead machine ended {:.1} s after its death (bound {} s)",
            took.as_secs_f64(),
            DEATH_BOUND.as_secs()
        );
    }
    Ok(format!(
        "the wait on the killed machine ended Gone {:.2} s after its death (bound {} s); m2 went on",
        took.as_secs_f64(),
        DEATH_BOUND.as_secs()
    ))
}

/// How long machine 1 may take to boot again (a hang guard; the test waits for its
/// `machd` line).
const REBOOT_LIMIT: Duration = Duration::from_secs(180);

/// Two machines; machine 1 rebooted while machine 0 holds the id of a program there.
pub fn rebooted(kernel: &Path, initrd: &Path) -> Result<String> {
    let cluster = Cluster::plan(kernel, initrd, &options(2, 1, Faults::default()))?;
    let steps = steps(&[
        ("machines wait", &["all 2 up"], &[]),
        ("run spin -m 1 &", &["[m1."], &[]),
        // Machine 1 boots again here (the host kills its QEMU and starts a new one).
        ("kill m1.c0.5", &[], &["the machine restarted since"]),
        ("wait m1:0.5", &[], &["the machine restarted since"]),
        ("machines wait", &["all 2 up"], &[]),
        (
            "run hello again -m 1",
            &["(hello) exited with status 0"],
            &[],
        ),
    ]);
    let log = crate::machines::log_path(1);
    drive(
        &cluster,
        "a machine rebooted",
        &steps,
        &mut |i, out, others| {
            if i != 1 {
                return Ok(());
            }
            if !out.contains("[m1.c0.5]") {
                bail!("the remote spin did not get pid m1.c0.5 (the steps name it): {out}");
            }
            drop(others[0].take());
            others[0] = Some(crate::runner::spawn_logged(&cluster.guests[1], &log)?);
            let start = Instant::now();
            loop {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                if text.contains("machd: machine 1 of 2") {
                    return Ok(());
                }
                if start.elapsed() > REBOOT_LIMIT {
                    bail!(
                        "machine 1's machd did not start again within {} s",
                        REBOOT_LIMIT.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        },
    )?;
    Ok(
        "the ids of machine 1's earlier life were refused after its reboot; the new life answered"
            .into(),
    )
}

/// Two machines on a switch that drops 5% and duplicates 5% of the frames.
pub fn lossy(kernel: &Path, initrd: &Path) -> Result<String> {
    let faults = Faults {
        drop_pct: 5,
        dup_pct: 5,
        seed: 17,
    };
    let cluster = Cluster::plan(kernel, initrd, &options(2, 2, faults))?;
    let count = format!("mcount 1 {LOSSY_COUNT}");
    let semcount = format!("run mfcheck semcount 1 {}", LOSSY_COUNT / 2);
    let mut lines: Vec<(&str, &[&str], &[&str])> = vec![
        ("machines wait", &["all 2 up"], &[]),
        (&count, &["each performed exactly once"], &[]),
        // And as many resource operations of machine 1 (a semaphore's SEM_V through
        // OP_RES), in two runs (each step has its own hang guard): each count exact.
        (&semcount, &["mfcheck semcount: ok"], &[]),
        (&semcount, &["mfcheck semcount: ok"], &[]),
    ];
    // Pipelines both ways: every piece of input and output performed exactly once, or
    // the counts differ.
    lines.push(("run seq 2000 | wc -m 1", &["2000 2000 8893"], &[]));
    lines.push(("run seq 2000 -m 1 | wc", &["2000 2000 8893"], &[]));
    // A process moved to machine 1 in some 230 pieces, each performed once: its sums right.
    lines.push(("run movecheck move 1", &["movecheck move: ok"], &[]));
    for _ in 0..10 {
        lines.push((
            "run hello lossy -m 1",
            &["args: lossy", "(hello) exited with status 0"],
            &[],
        ));
        // Its one line printed just before it ends: each must come (a race lost it once).
        lines.push((
            "run crash nope -m 1",
            &["crash: unknown case"],
            &["exited with status 2"],
        ));
    }
    let mut out = String::new();
    drive(&cluster, "lossy", &steps(&lines), &mut |i, o, _| {
        if i == 1 {
            out = o
                .lines()
                .find(|l| l.starts_with("mcount m1:"))
                .unwrap_or("")
                .to_string();
        }
        Ok(())
    })?;
    let c = cluster
        .switch
        .as_ref()
        .map(|s| s.count())
        .unwrap_or_default();
    if c.dropped == 0 || c.duplicated == 0 {
        bail!(
            "the switch dropped {} and duplicated {} frames: no faults were tested",
            c.dropped,
            c.duplicated
        );
    }
    Ok(format!(
        "{}; switch: {} frames, {} dropped, {} duplicated; pipelines both ways; 20 remote runs \
         with their exit status",
        out.trim(),
        c.frames_in,
        c.dropped,
        c.duplicated
    ))
}

/// Bytes of the file the `files` test copies from machine 1's disk to itself through
/// machine 0: more than one fs ICA (4 KiB) and many `OP_FS` pieces (896 bytes).
const FILES_BIG: usize = 10_000;

/// Files of another machine's disk (`abi::mach::OP_FS`, P0's one file system over two
/// PCs): machine 0 has no disk, machine 1 has one the host filled; on a switch that drops
/// 5% and duplicates 5% of the frames, so every file request is also retransmitted and
/// suppressed as a duplicate. Machine 0's shell reads, copies, writes, lists and removes
/// files there and runs a program from there; `mfcheck` shows that forged and malformed
/// requests are refused, that machine 1's `machd` keeps the ICAs of its own requests to
/// `fs` from other machines' resource operations (`machdfs`), and that a file left open by
/// a program that ended is closed. After
/// power-off the host reads machine 1's image: the copy is byte for byte, the writes are
/// there once each, and `fsck.fat` finds the volume clean.
pub fn files(kernel: &Path, initrd: &Path) -> Result<String> {
    let image = crate::build::workspace_root().join("target/test-mfiles.img");
    crate::disk::make(&image)?;
    crate::disk::put(&image, "GREET.TXT", b"greetings from the host\n")?;
    let big: Vec<u8> = (0..FILES_BIG)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
        .collect();
    crate::disk::put(&image, "BIG.BIN", &big)?;
    let hello = std::fs::read(crate::user::target_dir().join("stripped/hello"))?;
    crate::disk::put(&image, "HELLO", &hello)?;
    // A directory whose listing (80 lines, about 1,100 bytes) takes two answers.
    crate::disk::mkdir(&image, "MANY")?;
    for i in 0..80 {
        crate::disk::put(&image, &format!("MANY/FILE{i:02}.TXT"), b"many\n")?;
    }
    let faults = Faults {
        drop_pct: 5,
        dup_pct: 5,
        seed: 23,
    };
    let mut o = options(2, 2, faults);
    o.disks = vec![None, Some(image.clone())];
    let cluster = Cluster::plan(kernel, initrd, &o)?;
    let lines: Vec<(&str, &[&str], &[&str])> = vec![
        ("machines wait", &["all 2 up"], &[]),
        ("cat m1:GREET.TXT", &["greetings from the host"], &[]),
        ("cp m1:BIG.BIN m1:BIG2.BIN", &[], &[]),
        ("write m1:OUT.TXT written by machine zero", &[], &[]),
        ("cat m1:OUT.TXT", &["written by machine zero"], &[]),
        ("mkdir m1:SUB", &[], &[]),
        ("write m1:SUB/A.TXT a", &[], &[]),
        ("ls m1:SUB", &["A.TXT", "1 entries"], &[]),
        ("rm m1:SUB/A.TXT", &[], &[]),
        ("rm m1:SUB", &[], &[]),
        ("ls m1:", &["BIG2.BIN", "OUT.TXT", "GREET.TXT"], &[]),
        (
            "ls m1:MANY",
            &["FILE00.TXT", "FILE79.TXT", "80 entries"],
            &[],
        ),
        // Machine 1's machd keeps the ICAs of its requests to its own fs to itself.
        ("run mfcheck machdfs 1", &["mfcheck machdfs: ok"], &[]),
        ("cat GREET.TXT", &[], &["not running"]),
        ("cat m1:NOPE.TXT", &[], &["no such file"]),
        ("cat m3:X.TXT", &[], &["no machine 3"]),
        ("cat m9:X.TXT", &[], &["not a FAT 8.3 name"]),
        (
            "run m1:HELLO from-the-other-disk",
            &["args: from-the-other-disk"],
            &[],
        ),
        // A program from a disk started on another machine: its image read here (from
        // machine 1's disk, through machd) and sent there (OP_MOVE's MOVE_SPAWN), its
        // output relayed here; a file that is no program is refused there.
        (
            "run m1:HELLO sent-back -m 1",
            &["hello from core 1", "args: sent-back"],
            &[],
        ),
        ("run m1:HELLO piped -m 1 | wc", &["1 8 "], &[]),
        (
            "run m1:GREET.TXT -m 1",
            &[],
            &["(from the disk): not a valid executable"],
        ),
        // Machine 1's open files are shared out by user also for programs of machine 0.
        ("run mfcheck fsshare 1", &["mfcheck fsshare: ok"], &[]),
        ("run mfcheck hold 1 &", &[], &[]),
        ("fn wait mfcheck.hold", &[], &[]),
        ("run mfcheck forge 1", &["mfcheck forge: ok"], &[]),
        ("write m1:ORPHAN.TXT taken", &[], &["in use"]),
        ("write m1:STOP.TXT stop", &[], &[]),
        ("run mfcheck reopen 1", &["mfcheck reopen: ok"], &[]),
    ];
    drive(&cluster, "files", &steps(&lines), &mut |_, _, _| Ok(()))?;
    let c = cluster
        .switch
        .as_ref()
        .map(|s| s.count())
        .unwrap_or_default();
    let copy = crate::disk::get(&image, "BIG2.BIN")?;
    if copy != big {
        bail!(
            "BIG2.BIN on machine 1's disk differs from BIG.BIN ({} bytes, {} expected)",
            copy.len(),
            big.len()
        );
    }
    let out = crate::disk::get(&image, "OUT.TXT")?;
    if out != b"written by machine zero\n" {
        bail!("OUT.TXT holds {:?}", String::from_utf8_lossy(&out));
    }
    let orphan = crate::disk::get(&image, "ORPHAN.TXT")?;
    if orphan != b"reopened\n" {
        bail!("ORPHAN.TXT holds {:?}", String::from_utf8_lossy(&orphan));
    }
    let lost = crate::disk::check(&image)?;
    if lost != 0 {
        bail!("fsck.fat reclaimed {lost} bytes on machine 1's disk");
    }
    if c.dropped == 0 || c.duplicated == 0 {
        bail!("the switch dropped or duplicated nothing: no faults were tested");
    }
    Ok(format!(
        "machine 0 (no disk) used machine 1's files: a {FILES_BIG}-byte copy identical, a program \
         run from there and one sent back to run there, forged requests refused, an orphan closed; switch: {} frames, {} \
         dropped, {} duplicated; fsck clean",
        c.frames_in, c.dropped, c.duplicated
    ))
}
