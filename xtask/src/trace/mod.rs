//! `cargo xtask trace --script FILE`: boot Musubi with `trace=on`, run a shell script, dump
//! the kernel's trace and write it as Chrome trace-event JSON for Perfetto.
//!
//! The boot and the script are `cargo xtask run --script`'s ([`crate::script`]); after the
//! script's commands the shell is told `trace dump` (whose event lines are not echoed), then
//! `poweroff`. [`dump`] reads the dump from the console, [`rpcc`] matches its messages,
//! [`chrome`] converts it and [`check`] checks the result read back (for `cargo xtask
//! test`); all four are pure and tested on the host. Open the result at <https://ui.perfetto.dev>.

pub mod check;
pub mod chrome;
pub mod dump;
pub mod rpcc;

use crate::qemu::Guest;
use crate::script::{self, Step};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// Shell commands to run before the dump (as for `cargo xtask run --script`).
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// Where to write the JSON [default: target/trace/run.json].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Number of cores.
    #[arg(long, default_value_t = 4)]
    smp: usize,
    /// More kernel command-line words (`trace=on` is added).
    #[arg(long, default_value = "")]
    cmdline: String,
}

/// The kernel command line: `extra` with tracing on.
pub fn cmdline(extra: &str) -> String {
    format!("trace=on {extra}").trim().to_string()
}

/// A traced run.
pub struct Traced {
    pub dump: dump::Dump,
    pub chrome: chrome::Chrome,
}

impl Traced {
    /// One line: events per core, lost, RPCC messages.
    pub fn summary(&self) -> String {
        let per_core: Vec<String> = self
            .dump
            .per_core()
            .iter()
            .enumerate()
            .map(|(c, n)| format!("c{c} {n}"))
            .collect();
        let mut s = format!(
            "{} events ({}), {} lost; {} RPCC messages matched, {} round trips",
            self.dump.events.len(),
            per_core.join(", "),
            self.dump.lost,
            self.chrome.messages.len(),
            self.chrome.round_trips.len()
        );
        if self.dump.malformed > 0 {
            s += &format!("; {} malformed lines skipped", self.dump.malformed);
        }
        s
    }
}

/// Boot `guest` (its command line must turn tracing on), run `steps`, dump the trace, power
/// off, and convert what was dumped.
pub fn capture(guest: &Guest, name: &str, mut steps: Vec<Step>) -> Result<Traced> {
    steps.push(Step {
        command: "trace dump".into(),
        expect: vec!["TRACE end".into()],
        ..Step::default()
    });
    let lines = script::run_steps(guest, name, &steps, dump::is_event_line)?;
    let dump = dump::parse(&lines)?;
    let chrome = chrome::convert(&dump);
    Ok(Traced { dump, chrome })
}

/// Write `json` to `path` (making its directory).
pub fn write(path: &Path, json: &Value) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let text = serde_json::to_string(json)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `cargo xtask trace`.
pub fn command(args: Args) -> Result<()> {
    if !(1..=abi::MAX_CORES).contains(&args.smp) {
        bail!("--smp must be between 1 and {}", abi::MAX_CORES);
    }
    let steps = script::load(&args.script)?;
    crate::qemu::ensure()?;
    let kernel = crate::build::kernel()?;
    let mut g = Guest::new(&kernel, args.smp, &cmdline(&args.cmdline));
    g.initrd = Some(crate::user::build_archive()?);
    eprintln!("xtask: {}", g.command_line());
    let traced = capture(&g, &args.script.display().to_string(), steps)?;
    let out = args.out.unwrap_or_else(|| {
        crate::build::workspace_root()
            .join("target/trace")
            .join("run.json")
    });
    write(&out, &traced.chrome.json)?;
    println!("xtask: trace: {}", traced.summary());
    println!(
        "xtask: wrote {} (open it at https://ui.perfetto.dev)",
        out.display()
    );
    Ok(())
}

/// A two-core dump for the tests.
#[cfg(test)]
pub(crate) mod sample {
    use super::dump::{parse, Dump};

    /// A shell on core 0 (thread 1, pid 0.1) asks core 1 twice; core 1's agent (thread 1)
    /// answers; then core 1 asks core 0 with the same tag number.
    pub(crate) const SAMPLE: &str = "\
TRACE begin tsc_hz 1000000000
TRACE 0 100 entry 0.0 64 0
TRACE 0 200 switch 0.0 0 1
TRACE 0 300 exit 0.1 256 0
TRACE 0 400 entry 0.1 256 19
TRACE 0 410 rpcc_send 0.1 1 1
TRACE 0 420 submit 0.1 1 1
TRACE 0 430 switch 0.1 1 0
TRACE 0 440 entry 0.0 65 0
TRACE 0 700 rpcc_receive 0.0 1 1
TRACE 0 710 switch 0.0 0 1
TRACE 0 720 complete 0.1 0 1
TRACE 0 800 rpcc_send 0.1 1 2
TRACE 0 810 submit 0.1 1 2
TRACE 0 1200 rpcc_receive 0.1 1 2
TRACE 0 1210 complete 0.1 0 2
TRACE 0 1300 exit 0.1 256 0
TRACE 0 1500 rpcc_receive 0.0 1 1
TRACE 0 1510 agent_start 0.0 1 1
TRACE 0 1520 agent_end 0.0 1 1
TRACE 0 1530 rpcc_send 0.0 1 1
TRACE 1 450 rpcc_receive 0.0 0 1
TRACE 1 460 switch 0.0 0 1
TRACE 1 470 agent_start 0.0 0 1
TRACE 1 600 agent_end 0.0 0 1
TRACE 1 610 rpcc_send 0.0 0 1
TRACE 1 620 switch 0.0 1 0
TRACE 1 900 rpcc_receive 0.0 0 2
TRACE 1 910 agent_start 0.0 0 2
TRACE 1 1100 agent_end 0.0 0 2
TRACE 1 1110 rpcc_send 0.0 0 2
TRACE 1 1400 rpcc_send 0.0 0 1
TRACE 1 1410 submit 0.0 0 1
TRACE 1 1600 rpcc_receive 0.0 0 1
TRACE 1 1610 complete 0.0 0 1
TRACE end 35 lost 0
";

    pub(crate) fn sample() -> Dump {
        parse(&SAMPLE.lines().collect::<Vec<_>>()).unwrap()
    }
}
