//! `cargo xtask`: build, boot, test and benchmark Musubi.
//!
//! Every command says what it is doing, fails with a message that names the fix, and never
//! leaves a QEMU process behind.

#![forbid(unsafe_code)]
mod bench;
mod bench_agora;
mod bench_agora_fig3;
mod bench_agora_par;
mod bench_agora_t4;
mod bench_ant;
mod bench_ant_figs;
mod bench_diros;
mod bench_ipc;
mod bench_machines;
mod bench_machines_jobs;
mod bench_net;
mod bench_net_det;
mod bench_net_replace;
mod bench_resources;
mod bench_symmetry;
mod bench_tender;
mod bench_timers;
mod bench_urpc;
mod build;
mod disk;
mod files_test;
mod layers;
mod machines;
mod machines_test;
mod net_relay;
mod net_test;
mod peer_linux;
mod peer_linux_net;
mod qemu;
mod results;
mod runner;
mod script;
mod switch;
mod test;
mod trace;
mod user;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use qemu::{Guest, Mode};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, boot, test and benchmark Musubi")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the kernel and print the path of its ELF image.
    Build,
    /// Run clippy over the host crates and the kernel (with the kernel's build flags).
    Clippy {
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Build and boot Musubi (with the user programs' boot archive) in QEMU with the serial
    /// console on this terminal (Ctrl-C quits), or drive its shell with a script.
    Run {
        /// Number of cores.
        #[arg(long, default_value_t = 4)]
        smp: usize,
        /// Kernel command line, e.g. "poweroff", "smp=2", "ktest=all", "log=debug".
        #[arg(long, default_value = "")]
        cmdline: String,
        /// Guest memory in MiB.
        #[arg(long, default_value_t = 512)]
        mem: usize,
        /// Deterministic mode (-icount): reproducible, instruction-counted time.
        #[arg(long)]
        deterministic: bool,
        /// Kernel structure: `percore` (a kernel per core, the default) or `biglock` (P2's
        /// Limited Symmetry: one kernel lock); the same as `--cmdline kernel=MODE`.
        #[arg(long, value_name = "MODE", value_parser = ["percore", "biglock"])]
        mode: Option<String>,
        /// Wait for GDB on localhost:1234 before the first instruction.
        #[arg(long)]
        gdb: bool,
        /// Type the shell commands in FILE (one per line; blank lines and # comments are
        /// skipped), then `poweroff`. Fails if a command printed an `error: ` line, the
        /// kernel stopped with FATAL, or QEMU did not exit cleanly.
        #[arg(long, value_name = "FILE", conflicts_with = "gdb")]
        script: Option<std::path::PathBuf>,
        /// Boot with a virtio-net device (MAC 52:54:00:12:34:56) whose whole network is a
        /// relay in xtask on 127.0.0.1 (QEMU's dgram netdev): the shell starts netdrv and
        /// netd, and a free UDP port on the host's 127.0.0.1 reaches the guest's port 7
        /// (printed).
        #[arg(long)]
        net: bool,
        /// Make `target/disk.img` (the FAT disk every run attaches as a virtio-blk device)
        /// anew, empty; without it the image is kept between boots.
        #[arg(long)]
        fresh_disk: bool,
        /// Boot N machines (2..4) joined by a virtual Ethernet on the host's loopback, each
        /// with `machine=K`, its own MAC and address 10.9.0.(K+1), and `machd` (issue 17).
        /// Machine 0's console is this terminal (or `--script`); the others' go to
        /// target/machines/mK.log. Each machine gets --smp cores.
        #[arg(long, value_name = "N", conflicts_with_all = ["net", "gdb", "deterministic"])]
        machines: Option<usize>,
        /// With --machines: run FILE in machine K's shell (K=FILE, K >= 1; may repeat), its
        /// console in target/machines/mK.log; like every script it powers its machine off
        /// at its end (end it with `sleep MS` if the others still need the machine).
        #[arg(long, value_name = "K=FILE", value_parser = machines::parse_machine_script, requires = "machines")]
        machine_script: Vec<(usize, std::path::PathBuf)>,
        /// With --machines: the switch drops this percentage of frames (seeded).
        #[arg(long, value_name = "PCT", default_value_t = 0, requires = "machines")]
        drop: u64,
        /// With --machines: the switch sends this percentage of frames twice (seeded).
        #[arg(long, value_name = "PCT", default_value_t = 0, requires = "machines")]
        dup: u64,
        /// With --machines: how `machd` speaks to the other machines: `ethernet` (frames of
        /// its own type through the driver) or `udp` (datagrams through netd).
        #[arg(long, value_enum, default_value_t = machines::Link::Ethernet, requires = "machines")]
        link: machines::Link,
    },
    /// Run every test: host crates, in-kernel tests on 1, 2 and 4 cores, boot checks and
    /// expected-fault tests. Ends with one line "N passed, N failed".
    Test {
        /// Only in-kernel tests whose names match (glob with *, comma-separated); `files`:
        /// only the [files] group (disk, buffer managers, file service; no in-kernel boots);
        /// `net`: the host network streams too; `machines` (or
        /// `machines:two|four|killed|rebooted|lossy|files`): only the several-machine tests.
        #[arg(long, default_value = "all")]
        filter: String,
        /// Print every console line.
        #[arg(long, short)]
        verbose: bool,
        /// Host tests only.
        #[arg(long, conflicts_with = "kernel_only")]
        host_only: bool,
        /// Kernel tests only.
        #[arg(long)]
        kernel_only: bool,
    },
    /// Print the kernel's module graph and check it against the layers in docs/design.md.
    Layers {
        /// Another copy of kernel/src to read (for a before/after comparison).
        #[arg(long)]
        src: Option<std::path::PathBuf>,
    },
    /// Boot with trace=on, run a shell script, dump the trace as Chrome JSON for Perfetto.
    Trace(trace::Args),
    /// Run a benchmark and write docs/results/NAME.{json,md,png}.
    Bench {
        /// Which benchmark: boot, basics, resources, urpc, tender, symmetry, ipc, diros, timers,
        /// ant, net (parallel, then net-deterministic), net-deterministic, net-replace (P3
        /// Figure 8 for the network, parallel), agora (P0: agora-deterministic, then
        /// agora-parallel), machines (P0's cost ladder across two machines, parallel).
        name: String,
        /// Repetitions (samples) per case.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Also measure the peer in the same QEMU configuration: linux.
        #[arg(long)]
        peer: Option<String>,
        /// Write the report here instead of docs/results (which only a clean, committed
        /// tree may write to, so that a report names the commit it measured).
        #[arg(long, value_name = "DIR")]
        out: Option<std::path::PathBuf>,
    },
}

fn main() {
    runner::kill_guests_on_panic();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Build => {
            let elf = build::kernel()?;
            println!("{}", elf.display());
        }
        Cmd::Clippy { deny_warnings } => build::clippy(deny_warnings)?,
        Cmd::Layers { src } => layers::run(src)?,
        Cmd::Run {
            smp,
            cmdline,
            mem,
            deterministic,
            mode,
            gdb,
            script,
            net,
            fresh_disk,
            machines,
            machine_script,
            drop,
            dup,
            link,
        } => {
            if !(1..=abi::MAX_CORES).contains(&smp) {
                bail!("--smp must be between 1 and {}", abi::MAX_CORES);
            }
            if drop > 100 || dup > 100 {
                bail!("--drop and --dup are percentages (0..=100)");
            }
            qemu::ensure()?;
            let kernel = build::kernel()?;
            let cmdline = match mode {
                Some(m) => format!("{cmdline} kernel={m}").trim().to_string(),
                None => cmdline,
            };
            if let Some(n) = machines {
                let o = machines::Options {
                    machines: n,
                    smp,
                    mem_mib: mem,
                    cmdline,
                    faults: switch::Faults {
                        drop_pct: drop,
                        dup_pct: dup,
                        seed: 17,
                    },
                    disks: (0..n)
                        .map(|k| machines::disk_image(k, fresh_disk).map(Some))
                        .collect::<Result<_>>()?,
                    link,
                };
                let cluster = machines::Cluster::plan(&kernel, &user::build_archive()?, &o)?;
                return machines::run(&cluster, script.as_deref(), &machine_script);
            }
            // With --net, the driver is a boot program at driver priority (the shell may not
            // start one), on core 0 where the device resources are.
            // (Not when the boot configuration starts the network itself: `services=...net`.)
            let net_configured = cmdline
                .split_whitespace()
                .any(|w| w.starts_with("services=") && w.contains("net"));
            let cmdline = if net && !cmdline.contains("driver=") && !net_configured {
                format!("{cmdline} driver=0:netdrv").trim().to_string()
            } else {
                cmdline
            };
            let mut g = Guest::new(&kernel, smp, &cmdline);
            g.initrd = Some(user::build_archive()?);
            g.mem_mib = mem;
            g.gdb = gdb;
            // The relay is the guest's whole network; it lives until QEMU has exited.
            let _relay = if net {
                let relay = net_relay::Relay::start(&[(0, net_test::GUEST_PORT)])?;
                let port = relay.forwards()[0].0;
                g.net = Some(qemu::NetCfg::relay(&relay));
                eprintln!(
                    "xtask: network: a relay on 127.0.0.1 is the guest's whole network (gateway \
                     10.0.2.2, DHCP 10.0.2.15; nothing leaves for another address). netdrv starts \
                     at boot, the shell starts netd; then `run udpecho 7 &` in Musubi and \
                     `socat - UDP:127.0.0.1:{port}` on this machine talk to each other \
                     (host UDP 127.0.0.1:{port} -> guest port 7)"
                );
                Some(relay)
            } else {
                None
            };
            g.disk = Some(disk::user_image(fresh_disk)?);
            if deterministic {
                g.mode = Mode::Deterministic;
            }
            eprintln!("xtask: {}", g.command_line());
            if let Some(file) = script {
                return script::run(&g, &file);
            }
            g.interactive = true;
            if gdb {
                eprintln!("xtask: QEMU waits for GDB; in another terminal run:");
                eprintln!(
                    "  gdb {} -ex 'target remote localhost:1234'",
                    kernel.display()
                );
            }
            eprintln!(
                "xtask: serial console follows; Ctrl-C interrupts the shell's foreground program, \
                 Ctrl-A X quits QEMU"
            );
            let status = runner::run_interactive(&g)?;
            match status {
                0 => eprintln!("xtask: QEMU exited normally (power-off or Ctrl-A X)"),
                s if s == abi::QEMU_STATUS_FAILURE => {
                    bail!("Musubi stopped on a failure (report above; status {s})")
                }
                s => bail!("QEMU exited with status {s}"),
            }
        }
        Cmd::Test {
            filter,
            verbose,
            host_only,
            kernel_only,
        } => {
            let opts = test::Options {
                filter,
                verbose,
                host: !kernel_only,
                kernel: !host_only,
            };
            if !test::run(&opts)? {
                std::process::exit(1);
            }
        }
        Cmd::Trace(args) => trace::command(args)?,
        Cmd::Bench {
            name,
            runs,
            peer,
            out,
        } => {
            results::set_results_dir(out)?;
            let peer = match peer.as_deref() {
                None => None,
                Some("linux") => Some(bench::Peer::Linux),
                Some(other) => bail!("unknown peer '{other}'; available: linux"),
            };
            match (name.as_str(), peer) {
                ("boot", None) => bench::boot(runs.max(1))?,
                ("boot", Some(_)) => bail!("the boot benchmark has no peer"),
                ("basics", peer) => bench::basics(runs.max(1), peer)?,
                ("resources", peer) => bench_resources::resources(runs.max(1), peer)?,
                ("urpc", None) => bench_urpc::urpc(runs.max(1))?,
                ("tender", None) => bench_tender::tender(runs.max(1))?,
                ("symmetry", None) => bench_symmetry::symmetry(runs.max(1))?,
                ("ipc", peer) => bench_ipc::ipc(runs.max(1), peer)?,
                ("agora", peer) => bench_agora::agora(runs.max(1), peer)?,
                ("agora-deterministic", peer) => bench_agora::deterministic(runs.max(1), peer)?,
                ("agora-parallel", None) => bench_agora_par::parallel(runs.max(1))?,
                ("diros", None) => bench_diros::diros(runs.max(1))?,
                ("timers", None) => bench_timers::timers(runs.max(1))?,
                ("ant", None) => bench_ant::ant(runs.max(1))?,
                ("net", peer) => {
                    bench_net::net(runs.max(1), peer.is_some())?;
                    bench_net_det::deterministic(runs.max(1))?
                }
                ("net-deterministic", None) => bench_net_det::deterministic(runs.max(1))?,
                ("net-replace", None) => bench_net_replace::net_replace(runs.max(1))?,
                ("machines", peer) => bench_machines::machines(runs.max(1), peer.is_some())?,
                (other, _) => {
                    bail!(
                        "unknown benchmark '{other}' (or it has no peer); available: boot, basics, \
                         resources, urpc, tender, symmetry, ipc, diros, timers, ant, net, net-deterministic, \
                         net-replace, agora, agora-deterministic, agora-parallel, machines"
                    )
                }
            }
        }
    }
    Ok(())
}
