//! The Linux peer of `cargo xtask bench basics`, `bench resources` and `bench ipc`: Debian's
//! Linux kernel, booted in the QEMU configuration Musubi is measured in, running
//! `peer/linux/basics.c` as its `/init` (one boot on one vCPU measures every case of
//! `basics` and `resources`; each picks its cases by name), or `peer/linux/ipc.c` (its own
//! initramfs, on two vCPUs, for `ipc`).
//!
//! A figure for Musubi means little alone; beside Linux's figure for the same operation, on
//! the same emulated machine and in the same run, it says something (docs/design.md,
//! "Measuring"). This module prepares that peer and runs it:
//!
//! 1. the kernel: the `vmlinuz` of the versioned package Debian's `linux-image-amd64`
//!    depends on, fetched with `apt-get download` and unpacked with `dpkg-deb` into the
//!    cache (never installed into /boot);
//! 2. `/init`: `basics.c` compiled statically with `musl-gcc` (musl-tools is installed when
//!    missing and we are root), and `/exit`, the libc-free child of its spawn+wait case;
//!    or `ipc.c` alone;
//! 3. the initramfs: a newc cpio archive written here, holding those and `/dev/console`
//!    (`initramfs.cpio` for basics, `initramfs-ipc.cpio` for ipc);
//! 4. the run: deterministic mode (`-icount shift=0`, so the guest's TSC counts
//!    instructions) on one vCPU (basics) or two (ipc), with everything that made Linux runs
//!    bit-identical: `-rtc base=...,clock=vm` (set by [`Guest`]), `rdrand=off,rdseed=off`,
//!    `norandmaps nokaslr`.
//!
//! The guest prints one `BENCH {json}` line per sample, then `BENCH done`, and powers off.
//! Everything is cached under `target/peer-linux/`; a cached kernel is reused as it is, so
//! later security updates of Debian's kernel do not change the peer's figures silently.

use crate::qemu::{Guest, Mode};
use crate::runner::{run_captured, Captured};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One case of the peer: instructions per operation, one value per sample.
#[derive(Clone, Debug)]
#[allow(dead_code)] // read by `bench basics|resources --peer linux`
pub struct PeerCase {
    pub case: String,
    pub samples: Vec<f64>,
}

/// The cases `basics.c` measures, in the order it prints them: the four of `basics`, then
/// the one of `resources` and the one of `agora` (last, so that adding them did not move
/// the others' figures).
pub const CASES: [&str; 6] = [
    "null call",
    "yield ping-pong",
    "spawn+wait",
    "heap grow 4 KiB",
    "mmap+munmap 4 KiB",
    "read 512 B, cached file",
];

/// The cases `ipc.c` measures, in the order it prints them (on a two-vCPU machine).
pub const IPC_CASES: [&str; 7] = [
    "pipe ping-pong, 1 CPU",
    "pipe ping-pong, 2 CPUs",
    "futex ping-pong, 1 CPU",
    "futex ping-pong, 2 CPUs",
    "io_uring NOP, batch 1",
    "io_uring NOP, batch 8",
    "io_uring NOP, batch 64",
];

/// vCPUs of the ipc peer's machine (its "2 CPUs" cases need the second).
pub const IPC_SMP: usize = 2;

/// The console line prefix of everything the peer programs report.
const PREFIX: &str = "BENCH ";
/// Debian's meta-package; its dependency is the real, versioned kernel package.
const META_PACKAGE: &str = "linux-image-amd64";
/// A run takes about 10 s of wall time, nearly all of it booting, plus about 0.1 s per
/// sample; the limit allows for a loaded host.
fn time_limit(runs: usize) -> Duration {
    Duration::from_secs(120 + runs as u64)
}

/// Which program a peer boot runs as `/init`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Program {
    /// `basics.c` (and `/exit`) on one vCPU: [`CASES`].
    Basics,
    /// `ipc.c` on [`IPC_SMP`] vCPUs: [`IPC_CASES`].
    Ipc,
}

impl Program {
    fn cases(self) -> &'static [&'static str] {
        match self {
            Program::Basics => &CASES,
            Program::Ipc => &IPC_CASES,
        }
    }
}

/// Boot the Linux peer once and return `runs` samples of every case in [`CASES`].
#[allow(dead_code)] // called by `bench basics --peer linux`
pub fn run_basics(runs: usize) -> Result<Vec<PeerCase>> {
    run_cases(runs)
}

/// Boot the Linux peer once and return `runs` samples of every case in [`CASES`], in that
/// order; a benchmark looks up the cases it compares by name.
pub fn run_cases(runs: usize) -> Result<Vec<PeerCase>> {
    run_program(Program::Basics, runs)
}

/// Boot the ipc peer (`ipc.c` on [`IPC_SMP`] vCPUs) once and return `runs` samples of every
/// case in [`IPC_CASES`], in that order.
pub fn run_ipc(runs: usize) -> Result<Vec<PeerCase>> {
    run_program(Program::Ipc, runs)
}

fn run_program(program: Program, runs: usize) -> Result<Vec<PeerCase>> {
    let guest = prepare(program, runs)?;
    say(format_args!(
        "booting Linux for {runs} samples per case: {}",
        guest.command_line()
    ));
    let limit = time_limit(runs);
    let captured = run_captured(&guest, limit, false)?;
    let cases = parse_console(&captured, runs, limit, program.cases())?;
    say(format_args!(
        "done in {:.1} s of wall time",
        captured.wall.as_secs_f64()
    ));
    Ok(cases)
}

/// The QEMU command [`run_cases`] runs, with paths relative to the workspace root.
#[allow(dead_code)] // called by `bench basics|resources --peer linux`
pub fn qemu_command_line(runs: usize) -> Result<String> {
    Ok(prepare(Program::Basics, runs)?.shown_command_line())
}

/// The QEMU command [`run_ipc`] runs, with paths relative to the workspace root.
pub fn ipc_qemu_command_line(runs: usize) -> Result<String> {
    Ok(prepare(Program::Ipc, runs)?.shown_command_line())
}

pub(crate) fn say(msg: impl Display) {
    eprintln!("xtask: peer linux: {msg}");
}

/// Make sure QEMU, the kernel, `/init` and the initramfs exist; return the guest to boot.
fn prepare(program: Program, runs: usize) -> Result<Guest> {
    crate::qemu::ensure()?;
    let dir = crate::build::workspace_root().join("target/peer-linux");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kernel = kernel(&dir)?;
    let (initrd, smp) = match program {
        Program::Basics => {
            let init = build_static(&dir, "basics", &["-O2", "-Wall"])?;
            let exit = build_static(&dir, "exit", &["-O2", "-nostdlib"])?;
            let files = [("init", init.as_path()), ("exit", exit.as_path())];
            (write_initramfs(&dir.join("initramfs.cpio"), &files)?, 1)
        }
        Program::Ipc => {
            let init = build_static(&dir, "ipc", &["-O2", "-Wall"])?;
            let files = [("init", init.as_path())];
            (
                write_initramfs(&dir.join("initramfs-ipc.cpio"), &files)?,
                IPC_SMP,
            )
        }
    };
    let cmdline = format!("console=ttyS0 quiet norandmaps nokaslr panic=-1 bench_runs={runs}");
    let mut guest = Guest::new(&kernel, smp, &cmdline);
    guest.initrd = Some(initrd);
    guest.mode = Mode::Deterministic;
    guest.cpu_flags = "rdrand=off,rdseed=off".into();
    Ok(guest)
}

// ---- the kernel -------------------------------------------------------------------------

/// The cached `vmlinuz-*`, downloading and unpacking it first if there is none.
pub(crate) fn kernel(dir: &Path) -> Result<PathBuf> {
    if let Some(cached) = cached_vmlinuz(dir)? {
        return Ok(cached);
    }
    let deb = download_kernel_deb(dir)?;
    say(format_args!(
        "unpacking boot/vmlinuz-* from {}",
        file_name(&deb)
    ));
    extract_vmlinuz(&deb, dir)?;
    std::fs::remove_file(&deb).with_context(|| format!("removing {}", deb.display()))?;
    cached_vmlinuz(dir)?.with_context(|| format!("{} holds no boot/vmlinuz-*", file_name(&deb)))
}

fn cached_vmlinuz(dir: &Path) -> Result<Option<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| file_name(p).starts_with("vmlinuz-"))
        .collect();
    found.sort();
    Ok(found.pop())
}

/// `apt-get download` the versioned kernel package; on failure refresh the package lists
/// once (their versions may have left the mirror) and try again.
pub(crate) fn download_kernel_deb(dir: &Path) -> Result<PathBuf> {
    match try_download_kernel_deb(dir) {
        Ok(deb) => Ok(deb),
        Err(e) => {
            say(format_args!("{e:#}"));
            say("refreshing the package lists (apt-get update) and trying again");
            apt_get_update()?;
            try_download_kernel_deb(dir)
        }
    }
}

fn try_download_kernel_deb(dir: &Path) -> Result<PathBuf> {
    let package = kernel_package()?;
    say(format_args!(
        "downloading {package} (about 70 MB) with apt-get download into {}",
        dir.display()
    ));
    checked(
        Command::new("apt-get")
            .args(["download", &package])
            .current_dir(dir),
    )?;
    let prefix = format!("{package}_");
    std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| file_name(p).starts_with(&prefix) && file_name(p).ends_with(".deb"))
        .with_context(|| {
            format!(
                "apt-get download left no {prefix}*.deb in {}",
                dir.display()
            )
        })
}

/// The `linux-image-6.*-amd64` package that `linux-image-amd64` depends on.
fn kernel_package() -> Result<String> {
    let out = checked(Command::new("apt-cache").args(["depends", META_PACKAGE]))?;
    out.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && p.ends_with("-amd64"))
        .map(str::to_string)
        .with_context(|| {
            format!("`apt-cache depends {META_PACKAGE}` names no linux-image-*-amd64:\n{out}")
        })
}

/// `dpkg-deb --fsys-tarfile DEB | tar -x ./boot/vmlinuz-*`: only the kernel image is written
/// (the package's modules are hundreds of MB), into a scratch directory first so that an
/// interrupted extraction never leaves a truncated kernel in the cache.
fn extract_vmlinuz(deb: &Path, dir: &Path) -> Result<()> {
    let scratch = dir.join("extract.tmp");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting dpkg-deb")?;
    let tar_status = Command::new("tar")
        .args(["-x", "--wildcards", "--strip-components=2", "-C"])
        .arg(&scratch)
        .args(["-f", "-", "./boot/vmlinuz-*"])
        .stdin(dpkg.stdout.take().context("dpkg-deb stdout")?)
        .status()
        .context("starting tar")?;
    let dpkg_status = dpkg.wait().context("waiting for dpkg-deb")?;
    if !dpkg_status.success() || !tar_status.success() {
        bail!(
            "`dpkg-deb --fsys-tarfile {} | tar -x ./boot/vmlinuz-*` failed ({dpkg_status}, tar {tar_status})",
            deb.display()
        );
    }
    for entry in std::fs::read_dir(&scratch)? {
        let path = entry?.path();
        let to = dir.join(file_name(&path));
        std::fs::rename(&path, &to)
            .with_context(|| format!("moving the kernel to {}", to.display()))?;
    }
    Ok(std::fs::remove_dir_all(&scratch)?)
}

// ---- /init and the initramfs ------------------------------------------------------------

/// Compile `peer/linux/NAME.c` statically with musl into the cache, unless it is up to date.
pub(crate) fn build_static(dir: &Path, name: &str, flags: &[&str]) -> Result<PathBuf> {
    let source = crate::build::workspace_root().join(format!("peer/linux/{name}.c"));
    let binary = dir.join(name);
    if is_newer(&binary, &source)? {
        return Ok(binary);
    }
    ensure_musl()?;
    say(format_args!(
        "compiling peer/linux/{name}.c (musl-gcc -static {})",
        flags.join(" ")
    ));
    checked(
        Command::new("musl-gcc")
            .arg("-static")
            .args(flags)
            .arg("-o")
            .arg(&binary)
            .arg(&source),
    )?;
    Ok(binary)
}

fn is_newer(a: &Path, b: &Path) -> Result<bool> {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified());
    let source = modified(b).with_context(|| format!("reading {}", b.display()))?;
    Ok(modified(a).is_ok_and(|t| t >= source))
}

fn ensure_musl() -> Result<()> {
    if Command::new("musl-gcc").arg("--version").output().is_ok() {
        return Ok(());
    }
    if !is_root() {
        bail!("musl-gcc is missing; as root run: apt-get install -y musl-tools");
    }
    say("musl-gcc is missing; installing it (apt-get install -y musl-tools)");
    let install = || checked(Command::new("apt-get").args(["install", "-y", "musl-tools"]));
    if install().is_err() {
        apt_get_update()?;
        install()?;
    }
    Ok(())
}

/// Write the initramfs `path`: `/dev`, `/dev/console` (so that the kernel can open init's
/// standard streams before anything is mounted), then each of `files` (name in the
/// archive, program), e.g. `/init` and `/exit`.
pub(crate) fn write_initramfs(path: &Path, files: &[(&str, &Path)]) -> Result<PathBuf> {
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let mut cpio = Cpio::default();
    cpio.entry("dev", 0o040_755, (0, 0), &[]);
    cpio.entry("dev/console", 0o020_600, (5, 1), &[]);
    for (name, program) in files {
        cpio.entry(name, 0o100_755, (0, 0), &read(program)?);
    }
    std::fs::write(path, cpio.finish()).with_context(|| format!("writing {}", path.display()))?;
    Ok(path.to_path_buf())
}

/// A writer of "newc" cpio archives (the format Linux unpacks as an initramfs): per entry a
/// 110-byte ASCII header of thirteen 8-digit hex fields, the name, and the data, each padded
/// to 4 bytes. Owners are root and times zero, so the archive is reproducible.
#[derive(Default)]
struct Cpio {
    bytes: Vec<u8>,
    inodes: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, (rdev_major, rdev_minor): (u32, u32), data: &[u8]) {
        self.inodes += 1;
        let is_dir = mode & 0o170_000 == 0o040_000;
        let fields = [
            self.inodes,
            mode,
            0,                          // uid
            0,                          // gid
            if is_dir { 2 } else { 1 }, // nlink
            0,                          // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev_major,
            rdev_minor,
            name.len() as u32 + 1, // with its NUL
            0,                     // check
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }
}

// ---- the console ------------------------------------------------------------------------

/// One `BENCH {json}` line.
#[derive(Deserialize)]
struct Sample {
    case: String,
    unit: String,
    per_op: f64,
}

/// The samples of a finished run, grouped by case; an error names what went wrong.
fn parse_console(
    run: &Captured,
    runs: usize,
    limit: Duration,
    cases: &[&str],
) -> Result<Vec<PeerCase>> {
    if run.timed_out {
        bail!(
            "the Linux guest did not finish within {} s (hung?); last console lines:\n{}",
            limit.as_secs(),
            console_tail(run)
        );
    }
    let mut samples: Vec<Sample> = Vec::new();
    let mut done = false;
    for (n, line) in run.lines.iter().enumerate() {
        let Some(report) = line.find(PREFIX).map(|i| &line[i + PREFIX.len()..]) else {
            continue;
        };
        if report.starts_with('{') {
            let sample: Sample = serde_json::from_str(report)
                .with_context(|| format!("console line {}: {line:?}", n + 1))?;
            if sample.unit != "instructions" {
                bail!(
                    "console line {}: unit {:?}, not instructions",
                    n + 1,
                    sample.unit
                );
            }
            samples.push(sample);
        } else if report.starts_with("error") {
            bail!("the Linux peer failed: {report}");
        } else if report.starts_with("warning") {
            say(report);
        } else if report == "done" {
            done = true;
        }
    }
    if !done || !run.powered_off() {
        bail!(
            "the Linux guest stopped without finishing (BENCH done: {done}, QEMU status {:?}); \
             last console lines:\n{}",
            run.status,
            console_tail(run)
        );
    }
    group(samples, runs, cases)
}

fn group(samples: Vec<Sample>, runs: usize, cases: &[&str]) -> Result<Vec<PeerCase>> {
    if let Some(s) = samples.iter().find(|s| !cases.contains(&s.case.as_str())) {
        bail!("the Linux peer reported an unknown case {:?}", s.case);
    }
    cases
        .iter()
        .map(|&case| {
            let values: Vec<f64> = samples
                .iter()
                .filter(|s| s.case == case)
                .map(|s| s.per_op)
                .collect();
            if values.len() != runs {
                bail!(
                    "the Linux peer printed {} samples of {case:?}, not {runs}",
                    values.len()
                );
            }
            Ok(PeerCase {
                case: case.into(),
                samples: values,
            })
        })
        .collect()
}

/// The last console lines, for error messages.
fn console_tail(run: &Captured) -> String {
    if run.lines.is_empty() {
        "    (nothing: with `quiet`, Linux prints little before /init runs)\n".into()
    } else {
        run.tail(15)
    }
}

// ---- helpers ----------------------------------------------------------------------------

/// Run a command to completion; on failure the error names the command and shows its stderr.
pub(crate) fn checked(cmd: &mut Command) -> Result<String> {
    let shown = std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let out = cmd
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn apt_get_update() -> Result<()> {
    if !is_root() {
        bail!("the package lists need refreshing; as root run: apt-get update");
    }
    checked(Command::new("apt-get").arg("update")).map(drop)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

pub(crate) fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(lines: &[&str]) -> Captured {
        Captured {
            status: Some(0),
            lines: lines.iter().map(|l| l.to_string()).collect(),
            timed_out: false,
            wall: Duration::ZERO,
        }
    }

    #[test]
    fn parses_samples_among_kernel_messages() {
        let mut lines = vec!["[    0.5] random kernel message".to_string()];
        for case in CASES {
            let json =
                format!(r#"{{"peer":"linux","case":"{case}","unit":"instructions","per_op":1.5}}"#);
            lines.push(format!("BENCH {json}"));
        }
        lines.push("BENCH done".into());
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let cases = parse_console(&captured(&lines), 1, Duration::ZERO, &CASES).expect("parses");
        assert_eq!(cases.len(), CASES.len());
        assert!(cases.iter().all(|c| c.samples == [1.5]));
    }

    #[test]
    fn missing_done_or_samples_is_an_error() {
        assert!(parse_console(&captured(&["BENCH done"]), 1, Duration::ZERO, &CASES).is_err());
        assert!(parse_console(&captured(&["Kernel panic"]), 0, Duration::ZERO, &CASES).is_err());
    }

    #[test]
    fn each_program_knows_only_its_own_cases() {
        let mut lines: Vec<String> = IPC_CASES
            .iter()
            .map(|case| {
                format!(
                    r#"BENCH {{"peer":"linux","case":"{case}","unit":"instructions","per_op":2.0}}"#
                )
            })
            .collect();
        lines.push("BENCH done".into());
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let ipc = parse_console(&captured(&lines), 1, Duration::ZERO, &IPC_CASES).expect("parses");
        assert_eq!(ipc.len(), IPC_CASES.len());
        assert_eq!(Program::Ipc.cases(), IPC_CASES);
        // The basics program's parser refuses the ipc program's cases.
        assert!(parse_console(&captured(&lines), 1, Duration::ZERO, &CASES).is_err());
    }

    #[test]
    fn cpio_entries_are_aligned_newc() {
        let mut c = Cpio::default();
        c.entry("init", 0o100_755, (0, 0), b"abcde");
        let bytes = c.finish();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(&bytes[110..115], b"init\0");
        assert_eq!(&bytes[116..121], b"abcde"); // 110 + 5 name bytes padded to 116
        assert_eq!(bytes.len() % 4, 0);
        assert!(bytes.windows(10).any(|w| w == b"TRAILER!!!"));
    }

    /// `cargo test -p xtask -- --ignored --nocapture peer_linux`: boot the real peer.
    #[test]
    #[ignore = "downloads Debian's kernel (once) and boots it in QEMU (about 10 s)"]
    fn peer_linux_basics_end_to_end() {
        let cases = run_cases(3).expect("the Linux peer runs");
        for c in &cases {
            let mut s = c.samples.clone();
            s.sort_by(f64::total_cmp);
            let median = s[s.len() / 2];
            println!(
                "{:>17}: median {median:>10.1} instructions, samples {:?}",
                c.case, c.samples
            );
        }
        println!("{}", qemu_command_line(3).expect("command line"));
    }

    /// `cargo test -p xtask -- --ignored --nocapture peer_linux_ipc`: boot the ipc peer.
    #[test]
    #[ignore = "downloads Debian's kernel (once) and boots it in QEMU on two vCPUs"]
    fn peer_linux_ipc_end_to_end() {
        for c in run_ipc(3).expect("the ipc peer runs") {
            println!("{:>24}: samples {:?}", c.case, c.samples);
        }
        println!("{}", ipc_qemu_command_line(3).expect("command line"));
    }
}
