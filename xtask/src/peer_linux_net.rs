//! The Linux peer of `cargo xtask bench net --peer linux`: Debian's kernel (the one the other
//! peers boot, `peer_linux.rs`) in the same QEMU machine as Musubi's network runs — the same
//! virtio-net-pci device on a relay's network (`net_relay.rs`: a host UDP port on 127.0.0.1
//! forwarded to the guest's port 7) — running `peer/linux/echo.c` as `/init`, a UDP echo on
//! port 7, the peer of Musubi's `udpecho 7`.
//!
//! Debian builds virtio-net as modules, so the initramfs also holds the eight `.ko` files it
//! needs (virtio_ring, virtio, virtio_pci_modern_dev, virtio_pci_legacy_dev, virtio_pci,
//! failover, net_failover, virtio_net), unpacked from the same Debian package the kernel
//! came from into `target/peer-linux/modules-VERSION/` (once; the package is downloaded
//! again only for that, and removed after). `echo.c` loads them with `finit_module`.
//!
//! Unlike the other peers the echo guest does not end by itself: [`Echo::boot`] starts it
//! in parallel mode and returns once it prints `BENCH echo ready`; dropping the [`Echo`]
//! ends QEMU.
//!
//! The same initramfs is the peer of `cargo xtask bench machines --peer linux`: two Linux
//! guests joined like two Musubi machines (a QEMU-to-QEMU dgram pair on 127.0.0.1), one an
//! echo and one pinging it ([`Echo::boot_with`] with `echo.c`'s `bench_role=ping` words,
//! waiting for `BENCH done`).

use crate::peer_linux::{build_static, checked, file_name, say, write_initramfs};
use crate::qemu::{Guest, Mode, NetCfg};
use crate::runner::{spawn_piped, Reaper};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The modules `echo.c` loads, in dependency order, and where they lie in the package.
const MODULES: [&str; 8] = [
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// Booting Linux under TCG on a loaded host: a hang guard, not a time guess.
const READY_LIMIT: Duration = Duration::from_secs(240);

/// A running Linux echo guest; QEMU ends when this is dropped.
pub struct Echo {
    _qemu: Reaper,
    lines: Arc<Mutex<Vec<String>>>,
    pub command_line: String,
}

impl Echo {
    /// Boot Linux with `echo.c` as `/init` on `smp` vCPUs in parallel mode, with `net`;
    /// return once it is listening.
    pub fn boot(smp: usize, net: NetCfg) -> Result<Echo> {
        Echo::boot_with(smp, net, "", "BENCH echo ready")
    }

    /// Boot Linux with `echo.c` as `/init` on `smp` vCPUs in parallel mode, with `net` and
    /// more kernel command-line `words` (`echo.c`'s `bench_...` settings); return once it
    /// prints `ready` (a `BENCH error` line, or nothing within the boot limit, fails).
    pub fn boot_with(smp: usize, net: NetCfg, words: &str, ready: &str) -> Result<Echo> {
        let mut guest = prepare(smp, words)?;
        guest.net = Some(net);
        let command_line = guest.shown_command_line();
        say(format_args!("booting Linux ({ready}): {command_line}"));
        let mut qemu = spawn_piped(&guest)?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = qemu.0.stdout.take().context("QEMU stdout")?;
        let stderr = qemu.0.stderr.take().context("QEMU stderr")?;
        for (stream, lines) in [
            (
                Box::new(stdout) as Box<dyn std::io::Read + Send>,
                lines.clone(),
            ),
            (Box::new(stderr), lines.clone()),
        ] {
            std::thread::spawn(move || {
                for l in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(l);
                }
            });
        }
        let echo = Echo {
            _qemu: qemu,
            lines,
            command_line,
        };
        let start = Instant::now();
        while start.elapsed() < READY_LIMIT {
            let ready = {
                let l = echo.lines.lock().unwrap();
                if let Some(e) = l.iter().find(|l| l.contains("BENCH error")) {
                    bail!("the Linux echo failed: {e}; last lines:\n{}", tail(&l));
                }
                l.iter().any(|l| l.contains(ready))
            };
            if ready {
                return Ok(echo);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!(
            "the Linux guest did not print '{ready}' within {} s; last lines:\n{}",
            READY_LIMIT.as_secs(),
            echo.tail()
        )
    }

    /// Every console line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The last console lines, for error messages.
    pub fn tail(&self) -> String {
        tail(&self.lines.lock().unwrap())
    }
}

fn tail(lines: &[String]) -> String {
    let start = lines.len().saturating_sub(15);
    lines[start..]
        .iter()
        .map(|l| format!("    | {l}\n"))
        .collect()
}

/// The kernel, `/init` (`echo.c`) and the modules in `initramfs-echo.cpio`; the guest,
/// with more command-line `words`.
fn prepare(smp: usize, words: &str) -> Result<Guest> {
    crate::qemu::ensure()?;
    let dir = crate::build::workspace_root().join("target/peer-linux");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let kernel = crate::peer_linux::kernel(&dir)?;
    let version = file_name(&kernel)
        .strip_prefix("vmlinuz-")
        .context("kernel name")?
        .to_string();
    let modules = modules(&dir, &version)?;
    let init = build_static(&dir, "echo", &["-O2", "-Wall"])?;
    let mut files: Vec<(String, PathBuf)> = vec![("init".into(), init)];
    for m in MODULES {
        let name = file_name(Path::new(m));
        files.push((name.clone(), modules.join(&name)));
    }
    let refs: Vec<(&str, &Path)> = files
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_path()))
        .collect();
    let initrd = write_initramfs(&dir.join("initramfs-echo.cpio"), &refs)?;
    let cmdline = format!("console=ttyS0 quiet panic=-1 {words}");
    let mut guest = Guest::new(&kernel, smp, cmdline.trim());
    guest.initrd = Some(initrd);
    guest.mode = Mode::Parallel;
    Ok(guest)
}

/// `target/peer-linux/modules-VERSION/`, holding [`MODULES`] (unpacked from the kernel's
/// package when missing; the package must be the cached kernel's version).
fn modules(dir: &Path, version: &str) -> Result<PathBuf> {
    let out = dir.join(format!("modules-{version}"));
    let have = |d: &Path| {
        MODULES
            .iter()
            .all(|m| d.join(file_name(Path::new(m))).exists())
    };
    if have(&out) {
        return Ok(out);
    }
    let deb = crate::peer_linux::download_kernel_deb(dir)?;
    let wanted = format!("linux-image-{version}_");
    if !file_name(&deb).starts_with(&wanted) {
        let _ = std::fs::remove_file(&deb);
        bail!(
            "the cached kernel is {version}, but Debian now ships {}: its modules would not \
             load; delete target/peer-linux/vmlinuz-* to move every peer to the new kernel",
            file_name(&deb)
        );
    }
    say(format_args!(
        "unpacking the virtio-net modules from {}",
        file_name(&deb)
    ));
    let scratch = dir.join("modules.tmp");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let members: Vec<String> = MODULES
        .iter()
        .map(|m| format!("./lib/modules/{version}/kernel/{m}"))
        .collect();
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting dpkg-deb")?;
    let tar = Command::new("tar")
        .args(["-x", "--strip-components=5", "-C"])
        .arg(&scratch)
        .args(["-f", "-"])
        .args(&members)
        .stdin(dpkg.stdout.take().context("dpkg-deb stdout")?)
        .status()
        .context("starting tar")?;
    let dpkg = dpkg.wait()?;
    std::fs::remove_file(&deb).with_context(|| format!("removing {}", deb.display()))?;
    if !dpkg.success() || !tar.success() {
        bail!("unpacking the modules from {} failed", file_name(&deb));
    }
    // `--strip-components` leaves each module under its directory below kernel/: flatten.
    let found = checked(Command::new("find").arg(&scratch).args(["-name", "*.ko"]))?;
    std::fs::create_dir_all(&out)?;
    for p in found.lines() {
        let p = Path::new(p);
        std::fs::rename(p, out.join(file_name(p)))?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if !have(&out) {
        bail!("{} lacks some of the virtio-net modules", out.display());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boots the Linux echo and has one datagram answered (about 10 s; needs QEMU, apt and
    /// musl-gcc): `cargo test -p xtask -- --ignored --nocapture linux_echo`.
    #[test]
    #[ignore]
    fn linux_echo_answers() {
        let relay = crate::net_relay::Relay::start(&[(0, crate::net_test::GUEST_PORT)]).unwrap();
        let port = relay.forwards()[0].0;
        let echo = Echo::boot(1, crate::qemu::NetCfg::relay(&relay)).unwrap();
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(("127.0.0.1", port)).unwrap();
        let (probes, _) = crate::net_test::probe(&sock).unwrap_or_else(|e| {
            panic!("{e:#}; console:\n{}", echo.tail());
        });
        eprintln!("answered after {probes} probes");
    }
}
