//! `cargo xtask run --machines N`: N Musubi machines (2..4 QEMUs) on one virtual Ethernet
//! on the host's loopback (issue 17).
//!
//! The network: two machines are joined directly, each QEMU's `-netdev dgram` naming the
//! other's port on 127.0.0.1; three or four (or two with faults on purpose) are joined by a
//! [`Switch`] in xtask, one 127.0.0.1 port per machine. Nothing else is on that network:
//! no user network, no gateway, no route off this host.
//!
//! Each machine `K` boots with its own MAC (`abi::mach::mac`) and these words:
//!
//! ```text
//! machine=K machines=N driver=0:netdrv server=0:netd,10.9.0.(K+1)/24,10.9.0.254 server=C:machd,K,N[,udp]
//! ```
//!
//! `machine=`/`machines=` say which machine this is (the kernel prints them at boot);
//! `netd` gets the machine's static address on the machines' link (10.9.0.254 is a gateway
//! nobody answers for: every peer is on the link); `machd` (on core `C` = 0) is the machine
//! server, whose messages travel in Ethernet frames of its own type through the driver, or
//! with `udp` ([`Link::Udp`], `--link udp`) through `netd` (`user/machd/src/link.rs`).
//! `netd` is started on core 0 so that it exists before the shell, which then does
//! not start a DHCP `netd` of its own (`user/shell/src/net.rs`).
//!
//! All three (`netdrv`, `netd`, `machd`) share core 0 on purpose: every cross-machine
//! request passes through the three on both machines, and on multi-threaded TCG each hop
//! between cores wakes a halted vCPU, which on a busy host waits for a host core.
//! `bench machines` measured the cross-machine null round trip at 2.08 ms with `machd` on
//! core 1 and 0.97 ms with it on core 0 (one run each, the same Linux peer at 0.57 and
//! 0.55 ms).
//!
//! The first machine's console is the terminal (or its `--script`); the others' go to
//! `target/machines/mK.log` (or run `--machine-script K=FILE`, console to the same file).
//! Every QEMU is a [`Reaper`]: killed when xtask is done with it, and killed by
//! [`crate::runner::kill_guests_on_panic`] if xtask panics.

use crate::qemu::{Guest, NetBackend, NetCfg};
use crate::runner::Reaper;
use crate::switch::{Faults, Switch};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// How a set of machines is booted.
#[derive(Clone, Debug)]
pub struct Options {
    pub machines: usize,
    pub smp: usize,
    pub mem_mib: usize,
    /// More kernel command-line words for every machine.
    pub cmdline: String,
    /// Frames dropped and duplicated on purpose (a switch is used when any is set).
    pub faults: Faults,
    /// Machine K's disk image (`disks[K]`; none past the end): its files, served by its
    /// own file service and, through `machd`, to the other machines (`mK:NAME`).
    pub disks: Vec<Option<PathBuf>>,
    /// How the machines' `machd` speak to each other.
    pub link: Link,
}

/// How the machines' `machd` speak to each other (`machd K N [udp]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Link {
    /// Ethernet frames of `machd`'s own type, through the driver (`net.drv`).
    #[default]
    Ethernet,
    /// UDP datagrams through the UDP/IP server (`net.udp`), the first design.
    Udp,
}

/// The machines' QEMU configurations and the network joining them.
pub struct Cluster {
    pub guests: Vec<Guest>,
    /// The switch, when there is one; it must outlive the QEMUs.
    pub switch: Option<Switch>,
    /// How their `machd` speak to each other.
    pub link: Link,
}

/// Machine `k`'s address as text.
pub fn addr(k: usize) -> String {
    let [a, b, c, d] = abi::mach::addr(k);
    format!("{a}.{b}.{c}.{d}")
}

fn mac(k: usize) -> String {
    abi::mach::mac(k)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Machine `k`'s kernel command line (see the module's documentation).
pub fn cmdline(k: usize, n: usize, extra: &str, link: Link) -> String {
    let [a, b, c, _] = abi::mach::addr(k);
    let udp = if link == Link::Udp { ",udp" } else { "" };
    format!(
        "{extra} machine={k} machines={n} driver=0:netdrv server=0:netd,{}/24,{a}.{b}.{c}.254 \
         server=0:machd,{k},{n}{udp}",
        addr(k)
    )
    .trim()
    .to_string()
}

/// Machine `k`'s disk for `cargo xtask run --machines N`: `target/machines/mK.img`, made
/// if missing or if `fresh`, else kept between boots (as `target/disk.img` is for one).
pub fn disk_image(k: usize, fresh: bool) -> Result<PathBuf> {
    let path = log_path(k).with_extension("img");
    std::fs::create_dir_all(path.parent().context("machines directory")?)?;
    if fresh || !path.exists() {
        crate::disk::make(&path)?;
        eprintln!("xtask: made a new FAT disk image {}", path.display());
    }
    Ok(path)
}

/// Where machine `k`'s console goes when it is not the terminal's.
pub fn log_path(k: usize) -> PathBuf {
    crate::build::workspace_root()
        .join("target/machines")
        .join(format!("m{k}.log"))
}

impl Cluster {
    /// Plan `o.machines` machines booting `kernel` with the boot archive `initrd`.
    pub fn plan(kernel: &Path, initrd: &Path, o: &Options) -> Result<Cluster> {
        let n = o.machines;
        if !(2..=abi::mach::MAX_MACHINES).contains(&n) {
            bail!(
                "--machines must be between 2 and {}",
                abi::mach::MAX_MACHINES
            );
        }
        let faulty = o.faults.drop_pct > 0 || o.faults.dup_pct > 0;
        let switch = if n > 2 || faulty {
            Some(Switch::start(n, o.faults)?)
        } else {
            None
        };
        // Two machines without a switch: each QEMU's remote is the other's local port.
        let pair = [
            crate::net_test::free_udp_port()?,
            crate::net_test::free_udp_port()?,
        ];
        let guests = (0..n)
            .map(|k| {
                let (local_port, remote_port) = match &switch {
                    Some(s) => s.ports(k),
                    None => (pair[k], pair[1 - k]),
                };
                let mut g = Guest::new(kernel, o.smp, &cmdline(k, n, &o.cmdline, o.link));
                g.initrd = Some(initrd.to_path_buf());
                g.mem_mib = o.mem_mib;
                g.disk = o.disks.get(k).cloned().flatten();
                g.net = Some(NetCfg {
                    mac: mac(k),
                    backend: NetBackend::Wire {
                        local_port,
                        remote_port,
                    },
                });
                g
            })
            .collect();
        Ok(Cluster {
            guests,
            switch,
            link: o.link,
        })
    }

    /// Boot machines `from..` with their consoles in `target/machines/mK.log`.
    pub fn start_logged(&self, from: usize) -> Result<Vec<Reaper>> {
        std::fs::create_dir_all(log_path(0).parent().context("log directory")?)?;
        (from..self.guests.len())
            .map(|k| crate::runner::spawn_logged(&self.guests[k], &log_path(k)))
            .collect()
    }

    fn describe(&self) {
        let how = match &self.switch {
            Some(_) => "a switch in xtask on 127.0.0.1 UDP ports",
            None => "a QEMU-to-QEMU dgram pair on 127.0.0.1",
        };
        eprintln!(
            "xtask: {} machines joined by {how}; machine K is 10.9.0.(K+1), machd {}",
            self.guests.len(),
            match self.link {
                Link::Ethernet => format!(
                    "in Ethernet frames of type {:#06x} through netdrv",
                    abi::mach::ETHERTYPE
                ),
                Link::Udp => format!("on UDP port {} through netd", abi::mach::PORT),
            }
        );
        for (k, g) in self.guests.iter().enumerate() {
            let console = if k == 0 {
                "this terminal".to_string()
            } else {
                log_path(k).display().to_string()
            };
            let disk = g
                .disk
                .as_ref()
                .map_or("no disk".to_string(), |d| format!("disk {}", d.display()));
            eprintln!(
                "xtask: machine {k}: {}, console: {console}, {disk} (its files are mK:NAME on the others)",
                addr(k)
            );
            eprintln!("xtask:   {}", g.shown_command_line());
        }
    }
}

/// `cargo xtask run --machines N`: machine 0 on this terminal (or its script), the others
/// logged (or their scripts); every QEMU killed at the end.
pub fn run(
    cluster: &Cluster,
    script: Option<&Path>,
    machine_scripts: &[(usize, PathBuf)],
) -> Result<()> {
    cluster.describe();
    let n = cluster.guests.len();
    for (k, _) in machine_scripts {
        if *k == 0 || *k >= n {
            bail!(
                "--machine-script {k}=FILE: K must be 1..{} (machine 0's is --script)",
                n - 1
            );
        }
    }
    // The machines without a script of their own, logged; they live as long as `_others`.
    let scripted: Vec<usize> = machine_scripts.iter().map(|(k, _)| *k).collect();
    std::fs::create_dir_all(log_path(0).parent().context("log directory")?)?;
    let mut _others = Vec::new();
    for k in 1..n {
        if !scripted.contains(&k) {
            _others.push(crate::runner::spawn_logged(
                &cluster.guests[k],
                &log_path(k),
            )?);
        }
    }
    let result = std::thread::scope(|scope| {
        let threads: Vec<_> = machine_scripts
            .iter()
            .map(|(k, file)| {
                let g = &cluster.guests[*k];
                let k = *k;
                scope.spawn(move || {
                    crate::script::run_logged(g, file, &log_path(k)).with_context(|| {
                        format!("machine {k} (console in {})", log_path(k).display())
                    })
                })
            })
            .collect();
        let first = match script {
            Some(file) => crate::script::run(&cluster.guests[0], file),
            None => {
                let mut g = cluster.guests[0].clone();
                g.interactive = true;
                eprintln!(
                    "xtask: machine 0's serial console follows; Ctrl-A X quits it and then every machine"
                );
                match crate::runner::run_interactive(&g)? {
                    0 => Ok(()),
                    s => Err(anyhow::anyhow!("machine 0's QEMU exited with status {s}")),
                }
            }
        };
        let mut all = vec![first.context("machine 0")];
        for t in threads {
            all.push(
                t.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a script thread panicked"))),
            );
        }
        all.into_iter().collect::<Result<Vec<()>>>()
    });
    if let Some(s) = &cluster.switch {
        let c = s.count();
        eprintln!(
            "xtask: switch: {} frames in, {} out, {} dropped and {} duplicated on purpose",
            c.frames_in, c.frames_out, c.dropped, c.duplicated
        );
    }
    drop(_others);
    result.map(drop)
}

/// `K=FILE` of `--machine-script`.
pub fn parse_machine_script(s: &str) -> Result<(usize, PathBuf), String> {
    let (k, f) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected K=FILE"))?;
    let k = k
        .parse()
        .map_err(|_| format!("'{k}' is not a machine number"))?;
    Ok((k, PathBuf::from(f)))
}
