//! Finding (or installing) QEMU and building its command line.
//!
//! Musubi needs QEMU 8.1 or newer: 7.2 (Debian bookworm's own) live-locks an SMP guest under
//! `-icount`. On Debian the fix is `qemu-system-x86` from bookworm-backports (QEMU 10);
//! [`ensure`] installs it when it can (root and apt-get), and otherwise prints the commands.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// How QEMU runs the guest (docs/design.md, "Measuring").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Multi-threaded TCG: vCPUs run in parallel on host threads. Fast; timing is wall time.
    Parallel,
    /// `-icount shift=0,sleep=off`: one instruction is one virtual nanosecond, vCPUs run
    /// round-robin, and every run is identical.
    Deterministic,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Parallel => "parallel",
            Mode::Deterministic => "deterministic",
        }
    }
}

/// One guest configuration.
#[derive(Clone, Debug)]
pub struct Guest {
    pub kernel: std::path::PathBuf,
    /// Boot module (QEMU `-initrd`): Musubi's boot archive, or a Linux initramfs.
    pub initrd: Option<std::path::PathBuf>,
    pub smp: usize,
    pub mem_mib: usize,
    pub cmdline: String,
    pub mode: Mode,
    /// Extra `-cpu` flags, e.g. `-x2apic` to force xAPIC mode.
    pub cpu_flags: String,
    pub gdb: bool,
    /// A person at a terminal: Ctrl-C goes to the guest (the shell interrupts its
    /// foreground program) and Ctrl-A X quits QEMU (its monitor shares the console).
    pub interactive: bool,
    /// A virtio-net device (modern PCI transport), if any.
    pub net: Option<NetCfg>,
    /// A raw disk image attached as a virtio-blk device (modern PCI transport), if any.
    pub disk: Option<std::path::PathBuf>,
}

/// A virtio-net device (modern PCI transport) and the network behind it.
#[derive(Clone, Debug)]
pub struct NetCfg {
    /// The device's MAC address, `52:54:00:..`.
    pub mac: String,
    pub backend: NetBackend,
}

/// What the guest's virtio-net device is plugged into.
#[derive(Clone, Debug)]
pub enum NetBackend {
    /// QEMU's user network closed to the outside (`restrict=on`): the guest reaches only
    /// QEMU's own gateway (10.0.2.2: ARP, DHCP). Its UDP `hostfwd` delivers host datagrams
    /// to the guest, but slirp drops every UDP answer under `restrict=on`, so host programs
    /// cannot talk to the guest this way; the kernel test boots use it.
    User {
        /// UDP ports forwarded from the host's 127.0.0.1: (host port, guest port).
        udp_forwards: Vec<(u16, u16)>,
    },
    /// `-netdev dgram` to a [`crate::net_relay::Relay`] on 127.0.0.1, which is the guest's
    /// whole network (gateway 10.0.2.2, DHCP, UDP forwarding to host programs on loopback;
    /// everything else dropped). The relay must outlive QEMU.
    Relay {
        /// QEMU's own port (Q) on 127.0.0.1.
        qemu_port: u16,
        /// The relay's port (R) on 127.0.0.1.
        relay_port: u16,
    },
    /// `-netdev dgram` to another QEMU or to a port of [`crate::switch::Switch`]: one
    /// machine's link of `cargo xtask run --machines N` (issue 17).
    Wire {
        /// QEMU's own port on 127.0.0.1.
        local_port: u16,
        /// The other end's port on 127.0.0.1.
        remote_port: u16,
    },
}

impl NetCfg {
    /// The MAC the tests give the device (`abi::dev` tests compare DRV_INFO with it).
    pub const TEST_MAC: &'static str = "52:54:00:12:34:56";

    /// The device the test boots get: the restricted user network, no forwarded port.
    pub fn test() -> NetCfg {
        NetCfg {
            mac: Self::TEST_MAC.into(),
            backend: NetBackend::User {
                udp_forwards: Vec::new(),
            },
        }
    }

    /// The device (MAC [`Self::TEST_MAC`]) on `relay`'s network: host programs reach the
    /// guest through the relay's forwarded ports ([`crate::net_relay::Relay::forwards`]).
    pub fn relay(relay: &crate::net_relay::Relay) -> NetCfg {
        let (qemu_port, relay_port) = relay.ports();
        NetCfg {
            mac: Self::TEST_MAC.into(),
            backend: NetBackend::Relay {
                qemu_port,
                relay_port,
            },
        }
    }

    fn args(&self) -> [String; 4] {
        let netdev = match &self.backend {
            NetBackend::User { udp_forwards } => {
                let mut n = String::from("user,id=n0,restrict=on");
                for (host, guest) in udp_forwards {
                    n.push_str(&format!(",hostfwd=udp:127.0.0.1:{host}-:{guest}"));
                }
                n
            }
            NetBackend::Relay {
                qemu_port: local,
                relay_port: remote,
            }
            | NetBackend::Wire {
                local_port: local,
                remote_port: remote,
            } => format!(
                "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port={local},\
                 remote.type=inet,remote.host=127.0.0.1,remote.port={remote}"
            ),
        };
        [
            "-netdev".into(),
            netdev,
            "-device".into(),
            format!(
                "virtio-net-pci,netdev=n0,mac={},disable-legacy=on",
                self.mac
            ),
        ]
    }
}

impl Guest {
    pub fn new(kernel: &Path, smp: usize, cmdline: &str) -> Self {
        Guest {
            kernel: kernel.to_path_buf(),
            initrd: None,
            smp,
            mem_mib: 512,
            cmdline: cmdline.to_string(),
            mode: Mode::Parallel,
            cpu_flags: String::new(),
            gdb: false,
            interactive: false,
            net: None,
            disk: None,
        }
    }

    /// QEMU's arguments (serial console on stdio, no display, debug-exit device).
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-append".into(),
            self.cmdline.clone(),
            "-smp".into(),
            self.smp.to_string(),
            "-m".into(),
            format!("{}M", self.mem_mib),
            "-cpu".into(),
            self.cpu_model(),
            "-serial".into(),
            if self.interactive {
                "chardev:console".into()
            } else {
                "stdio".into()
            },
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-device".into(),
            format!(
                "isa-debug-exit,iobase={:#x},iosize=0x04",
                abi::DEBUG_EXIT_PORT
            ),
        ];
        if self.interactive {
            a.extend([
                "-chardev".into(),
                "stdio,id=console,mux=on,signal=off".into(),
                "-mon".into(),
                "chardev=console".into(),
            ]);
        }
        if let Some(net) = &self.net {
            a.extend(net.args());
        }
        if let Some(disk) = &self.disk {
            a.extend([
                "-drive".into(),
                format!("file={},if=none,format=raw,id=d0", disk.display()),
                "-device".into(),
                "virtio-blk-pci,drive=d0,disable-legacy=on".into(),
            ]);
        }
        if let Some(initrd) = &self.initrd {
            a.extend(["-initrd".into(), initrd.display().to_string()]);
        }
        match self.mode {
            Mode::Parallel => a.extend(["-accel".into(), "tcg,thread=multi".into()]),
            Mode::Deterministic => a.extend([
                "-accel".into(),
                "tcg".into(),
                "-icount".into(),
                "shift=0,sleep=off".into(),
                "-rtc".into(),
                "base=2024-01-01T00:00:00,clock=vm".into(),
            ]),
        }
        if self.gdb {
            a.extend(["-s".into(), "-S".into()]);
        }
        a
    }

    /// `-cpu` value. In deterministic mode the x2APIC is hidden: QEMU 10's TCG aborts with
    /// "Bad icount read" when an x2APIC timer register is accessed through an MSR under
    /// `-icount` (the MMIO path of xAPIC mode is handled as I/O and works).
    fn cpu_model(&self) -> String {
        let mut flags: Vec<&str> = self
            .cpu_flags
            .split(',')
            .filter(|f| !f.is_empty())
            .collect();
        if self.mode == Mode::Deterministic && !flags.contains(&"-x2apic") {
            flags.push("-x2apic");
        }
        std::iter::once("max")
            .chain(flags)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The whole command, for printing.
    /// [`Self::command_line`] with paths relative to the workspace root, as reports show it.
    pub fn shown_command_line(&self) -> String {
        let root = format!("{}/", crate::build::workspace_root().display());
        self.command_line().replace(&root, "")
    }

    pub fn command_line(&self) -> String {
        let quoted: Vec<String> = self
            .args()
            .into_iter()
            .map(|a| {
                if a.contains(' ') || a.is_empty() {
                    format!("'{a}'")
                } else {
                    a
                }
            })
            .collect();
        format!("{QEMU} {}", quoted.join(" "))
    }
}

pub const QEMU: &str = "qemu-system-x86_64";
const MIN_VERSION: (u32, u32) = (8, 1);

fn version() -> Option<(u32, u32, String)> {
    let out = Command::new(QEMU).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let v = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)?;
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    Some((parts.next()?, parts.next().unwrap_or(0), v.to_string()))
}

const INSTALL_HELP: &str = "\
Musubi needs qemu-system-x86_64 8.1 or newer (QEMU 10 from Debian's bookworm-backports).
As root on Debian 12:
  . /etc/os-release
  printf 'Types: deb\\nURIs: http://deb.debian.org/debian\\nSuites: bookworm-backports\\nComponents: main\\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\\n' > /etc/apt/sources.list.d/backports.sources
  apt-get update && apt-get install -y -t bookworm-backports qemu-system-x86
(or run `bash .ci/install-qemu`, which does exactly that)";

/// Make sure a new-enough QEMU is installed; install it when running as root on Debian.
pub fn ensure() -> Result<()> {
    if let Some((maj, min, v)) = version() {
        if (maj, min) >= MIN_VERSION {
            return Ok(());
        }
        eprintln!("xtask: found QEMU {v}, but Musubi needs 8.1 or newer (7.2 live-locks SMP guests under -icount)");
    } else {
        eprintln!("xtask: {QEMU} is not installed");
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    let script = crate::build::workspace_root().join(".ci/install-qemu");
    if is_root && Path::new("/usr/bin/apt-get").exists() && script.exists() {
        eprintln!("xtask: installing QEMU from Debian bookworm-backports (bash .ci/install-qemu)");
        let ok = Command::new("bash")
            .arg(&script)
            .status()
            .context("running .ci/install-qemu")?
            .success();
        if ok && version().is_some_and(|(a, b, _)| (a, b) >= MIN_VERSION) {
            return Ok(());
        }
        bail!("installing QEMU failed.\n{INSTALL_HELP}");
    }
    bail!("{INSTALL_HELP}");
}
