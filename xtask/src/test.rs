//! `cargo xtask test`: the whole suite, host and kernel, ending in one `N passed, N failed`.
//!
//! 1. Host tests: `cargo test` over the host-testable crates (libs/, abi, xtask).
//! 2. In-kernel tests: one boot per configuration (`-smp 1`, `2`, `4`, `2` with the x2APIC
//!    hidden so the xAPIC path runs too, and `2` and `4` in big-lock mode), each with
//!    `ktest=all` and a time limit (booted again after a test the kernel stopped in, with
//!    `ktest.after=`). The shell scripts run in both kernel structures too.
//! 3. Boot checks: `poweroff` boots for 1, 2 and 4 cores, `smp=N` limiting the cores, and
//!    a command line full of mistakes that must still boot.
//! 4. Expected-fault tests: each in its own `-smp 2` boot; the kernel must stop with the
//!    failure status and a report containing the expected text.

use crate::qemu::Guest;
use crate::runner::{run_captured, symbolize, Captured};
use abi::protocol;
use anyhow::Result;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Hang guards only (a test never decides on them): on a loaded 2-core host a 4-vCPU
/// big-lock boot runs ten times slower than alone, because a vCPU waiting for the lock
/// spins through host time slices while the vCPU holding it is not running.
const SUITE_LIMIT: Duration = Duration::from_secs(900);
const BOOT_LIMIT: Duration = Duration::from_secs(180);

/// The `--filter` that runs only the [files] group.
pub const FILES_GROUP: &str = "files";

#[derive(Default)]
pub(crate) struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
    failures: Vec<String>,
}

impl Tally {
    pub(crate) fn pass(&mut self, name: &str) {
        self.passed += 1;
        println!("  ok    {name}");
    }
    pub(crate) fn skip(&mut self, name: &str, why: &str) {
        self.skipped += 1;
        println!("  skip  {name}: {why}");
    }
    pub(crate) fn fail(&mut self, name: &str, why: &str) {
        self.failed += 1;
        println!("  FAIL  {name}: {why}");
        self.failures
            .push(format!("{name}: {}", why.lines().next().unwrap_or("")));
    }
}

pub struct Options {
    pub filter: String,
    pub verbose: bool,
    pub host: bool,
    pub kernel: bool,
}

pub fn run(opts: &Options) -> Result<bool> {
    let started = Instant::now();
    let mut t = Tally::default();
    if opts.host {
        host_tests(&mut t, opts.verbose)?;
        if opts.filter == "all" {
            loom_tests(&mut t, opts.verbose)?;
        }
    }
    if opts.kernel {
        crate::qemu::ensure()?;
        let kernel = crate::build::kernel()?;
        let archive = crate::user::build_archive()?;
        let guest = |smp: usize, cmdline: &str| {
            let mut g = Guest::new(&kernel, smp, cmdline);
            g.initrd = Some(archive.clone());
            g
        };
        // `--filter machines`: only the several-machine tests (no in-kernel test has the name).
        let machines_only = opts.filter.starts_with("machines");
        let mut fault_tests = Vec::new();
        // `--filter files`: only the [files] group (disk, file service, buffer managers).
        let only_files = opts.filter == FILES_GROUP;
        let configurations = if only_files { 0 } else { usize::MAX };
        for (label, smp, cpu_flags, structure, only) in [
            ("smp1", 1, "", "", None),
            ("smp2", 2, "", "", None),
            ("smp4", 4, "", "", None),
            ("smp2-xapic", 2, "-x2apic", "", None),
            // The same tests on P2's Limited Symmetry kernel: one lock, direct access.
            ("smp2-biglock", 2, "", " kernel=biglock", None),
            ("smp4-biglock", 4, "", " kernel=biglock", None),
            // Drivers' interrupts by the IOAPIC line instead of MSI-X: the device tests.
            ("smp2-line", 2, "", " pci.irq=line", Some("dev::")),
            // As machine 2 of three (issue 17): the ids it makes differ from machine 0's.
            (
                "smp2-machine2",
                2,
                "",
                " machine=2 machines=3",
                Some("ids::"),
            ),
        ]
        .into_iter()
        .take(configurations)
        .filter(|_| !machines_only)
        {
            let filter = match only {
                None => opts.filter.clone(),
                Some(prefix) if opts.filter == "all" => format!("{prefix}*"),
                Some(prefix) if opts.filter.starts_with(prefix) => opts.filter.clone(),
                Some(_) => continue,
            };
            let mut g = guest(smp, &format!("ktest={filter}{structure}"));
            g.cpu_flags = cpu_flags.to_string();
            // A virtio-net device for the `dev::*` tests (user-mode drivers).
            g.net = Some(crate::qemu::NetCfg::test());
            // A FAT disk of its own for the `dev::blk*` tests (never the user's disk.img).
            // Made again before every boot of the configuration (see `kernel_suite`).
            let disk = crate::build::workspace_root().join("target/test-disk.img");
            let fresh_disk = || {
                crate::disk::make(&disk)?;
                crate::disk::put(&disk, "HOST.TXT", b"put in by mtools\n")
            };
            g.disk = Some(disk.clone());
            let found = kernel_suite(
                &mut t,
                &g,
                &fresh_disk,
                &mut |g| run_captured(g, SUITE_LIMIT, opts.verbose),
                &filter,
                label,
                &kernel,
            )?;
            if fault_tests.is_empty() {
                fault_tests = found;
            }
        }
        if !only_files && !machines_only {
            boot_checks(&mut t, &guest, opts.verbose)?;
        }
        for (name, expect) in fault_tests
            .iter()
            .filter(|(n, _)| filter_selects(&opts.filter, n))
        {
            fault_test(
                &mut t,
                &guest(2, &format!("ktest={name}")),
                name,
                expect,
                opts.verbose,
            )?;
        }
        if opts.filter == "all" {
            shell_script(&mut t, &guest)?;
        }
        if opts.filter == "all" || only_files {
            crate::files_test::scripts(&mut t, &guest)?;
        }
        if opts.filter == "all" {
            trace_script(&mut t, &guest)?;
        }
        // The host stream through the relay (net_test.rs): in the full run and on request.
        if opts.filter == "all" || opts.filter.starts_with("net") {
            net_echo(&mut t, &guest);
        }
        if opts.filter == "all" || machines_only {
            machines(&mut t, &kernel, &archive, &opts.filter);
        }
    }
    println!();
    if !t.failures.is_empty() {
        println!("failures:");
        for f in &t.failures {
            println!("  {f}");
        }
    }
    if t.passed + t.failed == 0 {
        // A run that tested nothing proves nothing: a filter that matches no test, or a
        // suite whose boots all skipped, is a failure, not a success.
        t.fail(
            "suite",
            &format!("no test ran (filter '{}' matched none)", opts.filter),
        );
    }
    println!("xtask: suite took {:.1} s", started.elapsed().as_secs_f64());
    println!(
        "{} passed, {} failed, {} skipped",
        t.passed, t.failed, t.skipped
    );
    Ok(t.failed == 0)
}

/// `cargo test` over the default members; counts come from libtest's summary lines.
fn host_tests(t: &mut Tally, verbose: bool) -> Result<()> {
    println!("xtask: host tests (cargo test)");
    let root = crate::build::workspace_root();
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args(["test", "--color", "never"])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if verbose || !out.status.success() {
        print!("{stdout}");
        eprint!("{stderr}");
    }
    let (mut p, mut f, mut s) = (0, 0, 0);
    for line in stdout.lines().filter(|l| l.starts_with("test result:")) {
        p += count_before(line, " passed");
        f += count_before(line, " failed");
        s += count_before(line, " ignored");
    }
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("test ") && l.ends_with(" FAILED"))
    {
        t.failures.push(format!("host: {line}"));
    }
    t.passed += p;
    t.failed += f;
    t.skipped += s;
    println!("  host: {p} passed, {f} failed, {s} ignored (counted as skipped)");
    if !out.status.success() && f == 0 {
        t.fail(
            "host::cargo_test",
            "cargo test failed before running tests (see errors above)",
        );
    }
    Ok(())
}

/// The `loom` model check of `libs/urpc` (`tests/loom.rs`): every interleaving of the ring's
/// protocol within loom's bounds. It needs `--cfg loom` and so its own target directory.
fn loom_tests(t: &mut Tally, verbose: bool) -> Result<()> {
    println!("xtask: model check (libs/urpc under loom)");
    let root = crate::build::workspace_root();
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .env("RUSTFLAGS", "--cfg loom")
        .args(["test", "--color", "never", "-p", "urpc", "--release"])
        .args(["--test", "loom", "--target-dir"])
        .arg(root.join("target/loom"))
        .args(["--", "--test-threads", "1"])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if verbose || !out.status.success() {
        print!("{stdout}");
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut ran = 0;
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        if let Some(name) = rest.strip_suffix(" ... ok") {
            t.pass(&format!("loom::{name}"));
            ran += 1;
        } else if let Some(name) = rest.strip_suffix(" ... FAILED") {
            t.fail(
                &format!("loom::{name}"),
                "the model check found a bad interleaving",
            );
            ran += 1;
        }
    }
    if !out.status.success() && ran == 0 {
        t.fail(
            "loom",
            "the loom build failed before running (see errors above)",
        );
    } else if ran == 0 {
        t.fail("loom", "no loom test ran");
    }
    Ok(())
}

fn count_before(line: &str, word: &str) -> usize {
    line.find(word)
        .and_then(|i| line[..i].rsplit([' ', ';']).next()?.parse().ok())
        .unwrap_or(0)
}

fn explain(c: &Captured, limit: Duration) -> String {
    if c.timed_out {
        format!(
            "guest hung: no result within {} s; last console lines:\n{}",
            limit.as_secs(),
            c.tail(12)
        )
    } else {
        format!(
            "QEMU exited with status {:?}; last console lines:\n{}",
            c.status,
            c.tail(12)
        )
    }
}

/// Boots after the first for one configuration's suite, each after the kernel stopped in a
/// test (a kernel fault, or QEMU itself ending): the tests after it still run and report.
const SUITE_REBOOTS: usize = 3;

/// One configuration's `ktest=...` suite; returns the expected-fault tests the kernel
/// listed. If the kernel stops during a test, that test fails and the configuration boots
/// again with `ktest.after=` it (`prepare` first, e.g. a fresh test disk), at most
/// [`SUITE_REBOOTS`] times, so one stop never hides the tests behind it; a hang (the time
/// limit) or a boot that stops outside any test ends the configuration, and whatever was
/// not run is reported as a failure.
fn kernel_suite(
    t: &mut Tally,
    g: &Guest,
    prepare: &dyn Fn() -> Result<()>,
    boot_once: &mut dyn FnMut(&Guest) -> Result<Captured>,
    filter: &str,
    label: &str,
    kernel: &Path,
) -> Result<Vec<(String, String)>> {
    let mut faults: Vec<(String, String)> = Vec::new();
    let mut ran = 0;
    let mut after: Option<String> = None;
    for boot in 0..=SUITE_REBOOTS {
        let mut g = g.clone();
        if let Some(name) = &after {
            g.cmdline = format!("{} ktest.after={name}", g.cmdline);
        }
        prepare()?;
        println!("xtask: [{label}] in-kernel tests ({})", g.cmdline);
        let c = boot_once(&g)?;
        let stopped_in = suite_boot(t, &c, label, &mut faults, &mut ran);
        println!("  [{label}] {:.1} s", c.wall.as_secs_f64());
        let Some(name) = stopped_in else {
            if !c.lines.iter().any(|l| l.starts_with(protocol::KTEST_DONE)) {
                t.fail(
                    &format!("[{label}] suite"),
                    &format!("the test run did not finish: {}", explain(&c, SUITE_LIMIT)),
                );
            } else if ran == 0 && !faults.iter().any(|(n, _)| filter_selects(filter, n)) {
                t.fail(
                    &format!("[{label}] suite"),
                    &format!("the boot ran no test: ktest pattern '{filter}' matched none"),
                );
            } else if c.status != Some(0)
                && !c.lines.iter().any(|l| l.starts_with(protocol::KTEST_FAIL))
            {
                t.fail(
                    &format!("[{label}] power-off"),
                    &format!("all tests passed but {}", explain(&c, SUITE_LIMIT)),
                );
            }
            return Ok(faults);
        };
        let report = symbolize(&c.lines, kernel).join("\n");
        let fatal = report.find(protocol::FATAL).map_or("", |i| &report[i..]);
        t.fail(
            &format!("[{label}] {name}"),
            &format!(
                "the kernel stopped during this test\n{fatal}\n{}",
                explain(&c, SUITE_LIMIT)
            ),
        );
        if c.timed_out || boot == SUITE_REBOOTS {
            let why = if c.timed_out {
                "the guest hung"
            } else {
                "the kernel stopped too often"
            };
            t.fail(
                &format!("[{label}] tests after {name}"),
                &format!("not run: {why} (boots: {})", boot + 1),
            );
            return Ok(faults);
        }
        after = Some(name);
    }
    Ok(faults)
}

/// Tally one suite boot's results (adding to `faults` the expected-fault tests it lists,
/// and counting in `ran`); returns the test the kernel stopped in, if it did.
fn suite_boot(
    t: &mut Tally,
    c: &Captured,
    label: &str,
    faults: &mut Vec<(String, String)>,
    ran: &mut usize,
) -> Option<String> {
    let mut running: Option<String> = None;
    // What the test's programs and the kernel printed since it began: a failure shows
    // the last of it, since a program's own message says which check failed.
    let mut console: Vec<&str> = Vec::new();
    for line in &c.lines {
        if let Some(name) = line.strip_prefix(protocol::KTEST_RUN) {
            running = Some(name.to_string());
            console.clear();
        } else if let Some(rest) = line.strip_prefix(protocol::KTEST_OK) {
            // `rest` is `name (N us)`: the time shows which tests make the suite long.
            t.pass(&format!("[{label}] {rest}"));
            running = None;
            *ran += 1;
        } else if let Some(rest) = line.strip_prefix(protocol::KTEST_SKIP) {
            let (name, why) = rest.split_once(": ").unwrap_or((rest, ""));
            t.skip(&format!("[{label}] {name}"), why);
            running = None;
            *ran += 1;
        } else if let Some(rest) = line.strip_prefix(protocol::KTEST_FAIL) {
            let (name, why) = rest.split_once(": ").unwrap_or((rest, ""));
            t.fail(&format!("[{label}] {name}"), &with_console(why, &console));
            running = None;
            *ran += 1;
        } else if let Some(rest) = line.strip_prefix(protocol::KTEST_FAULT_TEST) {
            if let Some((name, expect)) = rest.split_once(" expects ") {
                let expect = expect.trim_matches('"').to_string();
                if !faults.iter().any(|(n, _)| n == name) {
                    faults.push((name.to_string(), expect));
                }
            }
        } else if running.is_some() {
            console.push(line);
        }
    }
    running
}

/// Lines of console output a failing in-kernel test shows, at most.
const FAIL_CONSOLE_LINES: usize = 20;

/// A failed test's reason followed by the last [`FAIL_CONSOLE_LINES`] console lines printed
/// while it ran (the first line stays the reason, for the summary).
fn with_console(why: &str, console: &[&str]) -> String {
    if console.is_empty() {
        return why.to_string();
    }
    let from = console.len().saturating_sub(FAIL_CONSOLE_LINES);
    let mut s = format!(
        "{why}\n        console while it ran (last {} of {} lines):",
        console.len() - from,
        console.len()
    );
    for l in &console[from..] {
        s.push_str("\n        | ");
        s.push_str(l);
    }
    s
}

fn summary_field(c: &Captured, key: &str) -> Option<u64> {
    let line = c
        .lines
        .iter()
        .find(|l| l.contains(protocol::BOOT_SUMMARY))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// Boots that must power off cleanly with the right number of cores.
fn boot_checks(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest, verbose: bool) -> Result<()> {
    println!("xtask: boot checks");
    let cases: [(&str, usize, &str, u64, u64); 9] = [
        ("boot::poweroff_1_core", 1, "poweroff", 1, 1),
        ("boot::poweroff_2_cores", 2, "poweroff", 2, 2),
        ("boot::poweroff_4_cores", 4, "poweroff", 4, 4),
        ("boot::smp_limits_cores", 4, "smp=2 poweroff", 2, 4),
        (
            "boot::start_programs_on_each_core",
            2,
            "poweroff start=1:hello,x start=0:hello,y",
            2,
            2,
        ),
        (
            "boot::bad_command_line_still_boots",
            2,
            "smp=0 smp=banana ktest= log=loud \u{e9}t\u{e9} poweroff",
            2,
            2,
        ),
        // Machines of other sizes (see `memory_of`): RAM beyond the boot tables' first GiB
        // (the boot archive lies at its top), and a small machine split eight ways.
        ("boot::ram_2_gib", 2, "poweroff start=1:hello,big", 2, 2),
        ("boot::ram_4_gib", 2, "poweroff start=1:hello,big", 2, 2),
        (
            "boot::ram_64_mib_on_8_cores",
            8,
            "poweroff start=7:hello,small",
            8,
            8,
        ),
    ];
    for (name, smp, cmdline, online, madt) in cases {
        let mut g = guest(smp, cmdline);
        g.mem_mib = memory_of(name);
        let c = run_captured(&g, BOOT_LIMIT, verbose)?;
        let got = (
            summary_field(&c, "cores_online"),
            summary_field(&c, "cores_in_madt"),
        );
        if !c.powered_off() {
            t.fail(name, &explain(&c, BOOT_LIMIT));
        } else if got != (Some(online), Some(madt)) {
            t.fail(
                name,
                &format!(
                    "expected {online} cores online of {madt}, summary says {got:?}\n{}",
                    c.tail(8)
                ),
            );
        } else if let Some(missing) = expected_output(name)
            .iter()
            .find(|w| !c.lines.iter().any(|l| l.contains(*w)))
        {
            t.fail(
                name,
                &format!("no console line contains '{missing}'\n{}", c.tail(12)),
            );
        } else if name.contains("bad_command_line")
            && c.lines.iter().filter(|l| l.contains("WARN")).count() < 4
        {
            t.fail(
                name,
                &format!("expected a warning per bad word\n{}", c.tail(12)),
            );
        } else {
            t.pass(name);
        }
    }
    // A CPU without a feature the kernel needs: a clear FATAL line naming it, not silence.
    let name = "boot::cpu_without_nx_is_named";
    let mut g = guest(1, "poweroff");
    g.cpu_flags = "-nx".into();
    let c = run_captured(&g, BOOT_LIMIT, verbose)?;
    let said = c
        .lines
        .iter()
        .any(|l| l.contains("FATAL") && l.contains("NX"));
    if c.status == Some(abi::QEMU_STATUS_FAILURE) && said {
        t.pass(name);
    } else {
        t.fail(
            name,
            &format!(
                "expected a FATAL line naming NX and status {}
{}",
                abi::QEMU_STATUS_FAILURE,
                c.tail(8)
            ),
        );
    }
    Ok(())
}

/// One expected-fault test in its own boot.
fn fault_test(t: &mut Tally, g: &Guest, name: &str, expect: &str, verbose: bool) -> Result<()> {
    let label = format!("[fault] {name}");
    let c = run_captured(g, BOOT_LIMIT, verbose)?;
    let text = c.lines.join("\n");
    let missing: Vec<&str> = expect
        .split('|')
        .filter(|part| !text.contains(part))
        .collect();
    if c.timed_out {
        t.fail(&label, &explain(&c, BOOT_LIMIT));
    } else if c.status != Some(abi::QEMU_STATUS_FAILURE) {
        t.fail(
            &label,
            &format!(
                "expected exit status {} (kernel stopped on a fault), got {:?}\n{}",
                abi::QEMU_STATUS_FAILURE,
                c.status,
                c.tail(12)
            ),
        );
    } else if !missing.is_empty() || !text.contains(protocol::FATAL) {
        t.fail(&label, &format!("report lacks {missing:?}\n{}", c.tail(16)));
    } else {
        t.pass(&label);
    }
    Ok(())
}

/// The shell, driven by the scripts in `user/shell/` like a person at the console, each on
/// its number of cores.
fn shell_script(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) -> Result<()> {
    for (script, smp, cmdline) in [
        ("smoke.script", 2, ""),
        ("kill.script", 2, ""),
        ("restart.script", 2, ""),
        ("res.script", 2, ""),
        ("rpcc.script", 4, ""),
        ("small.script", 8, ""),
        ("hop.script", 4, ""),
        ("pipe.script", 4, ""),
        ("smoke.script", 2, "kernel=biglock"),
        ("restart.script", 2, "kernel=biglock"),
        ("rpcc.script", 4, "kernel=biglock"),
        ("hop.script", 2, "kernel=biglock"),
        ("pipe.script", 4, "kernel=biglock"),
    ] {
        let mut g = guest(smp, cmdline);
        if script == "small.script" {
            g.mem_mib = 64;
        }
        let file = crate::build::workspace_root()
            .join("user/shell")
            .join(script);
        let mode = if cmdline.is_empty() {
            ""
        } else {
            " (kernel=biglock)"
        };
        let name = format!("[shell] user/shell/{script}{mode}");
        println!("xtask: shell script {} ({smp} cores){mode}", file.display());
        match crate::script::run(&g, &file) {
            Ok(()) => t.pass(&name),
            Err(e) => t.fail(&name, &format!("{e:#}")),
        }
    }
    Ok(())
}

/// `cargo xtask trace` on 2 cores: the shell opens and closes a resource of core 1; the dump
/// must convert to JSON that reads back and shows an RPCC request in order on both cores.
fn trace_script(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) -> Result<()> {
    const SCRIPT: &str = "res open c1/vregion/t 4096\nres close c1/vregion/t\n";
    let name = "[trace] RPCC request on 2 cores (trace=on, Chrome JSON)";
    println!("xtask: trace (2 cores, trace=on)");
    let out = crate::build::workspace_root().join("target/trace/test.json");
    let result = crate::script::parse(SCRIPT)
        .and_then(|steps| {
            crate::trace::capture(&guest(2, &crate::trace::cmdline("")), "trace test", steps)
        })
        .and_then(|traced| {
            println!("xtask: trace: {}", traced.summary());
            crate::trace::write(&out, &traced.chrome.json)?;
            let back: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
            crate::trace::check::check(&back)
        });
    match result {
        Ok(what) => {
            println!("xtask: trace: {what} ({})", out.display());
            t.pass(name);
        }
        Err(e) => t.fail(name, &format!("{e:#}")),
    }
    Ok(())
}

/// The host client of `xtask/src/net_test.rs` against `udpecho` in the guest: 10,000
/// datagrams of 1..1,472 bytes, on 2 cores (driver, netd and udpecho on core 0) and on 4
/// (driver, netd and udpecho on cores 0, 1 and 3: netd moved there by a live replacement).
fn net_echo(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) {
    net_streams(t, guest);
    let name = format!(
        "[net] {} datagrams host <-> udpecho while netd is replaced {} times and netdrv crashes {} times",
        crate::net_test::DATAGRAMS,
        crate::net_test::TAKEOVERS,
        crate::net_test::CRASHES
    );
    // Without crashes the driver's counts cover the run: no frame may go missing between it
    // and the replaced servers.
    let quiet = format!(
        "[net] {} datagrams host <-> udpecho while netd is replaced {} times: every frame netdrv kept reached a netd",
        crate::net_test::DATAGRAMS,
        crate::net_test::TAKEOVERS,
    );
    for (name, crashes) in [(quiet, 0), (name, crate::net_test::CRASHES)] {
        println!("xtask: {name}");
        match crate::net_test::run_churn(&guest(2, ""), crashes) {
            Ok(report) => {
                println!("xtask: net: {report}");
                t.pass(&name);
            }
            Err(e) => t.fail(&name, &format!("{e:#}")),
        }
    }
}

/// Several machines as one system (`xtask/src/machines_test.rs`); `--filter machines:NAME`
/// runs one of them (two, four, killed, rebooted, lossy, files).
fn machines(t: &mut Tally, kernel: &Path, archive: &Path, filter: &str) {
    type Test = fn(&Path, &Path) -> Result<String>;
    let tests: [(&str, &str, Test); 6] = [
        (
            "two",
            "[machines] 2 machines: user/shell/machines.script",
            crate::machines_test::two,
        ),
        (
            "four",
            "[machines] 4 machines on the switch (machd over UDP through netd)",
            crate::machines_test::four,
        ),
        (
            "killed",
            "[machines] a machine killed while another waits on it",
            crate::machines_test::killed,
        ),
        (
            "rebooted",
            "[machines] a machine rebooted: its earlier life's ids refused",
            crate::machines_test::rebooted,
        ),
        (
            "lossy",
            "[machines] 5% of frames dropped and 5% duplicated: each request performed once",
            crate::machines_test::lossy,
        ),
        (
            "files",
            "[machines] machine 0 without a disk uses machine 1's files (5% dropped, 5% duplicated)",
            crate::machines_test::files,
        ),
    ];
    let only = filter.strip_prefix("machines:");
    for (key, name, test) in tests {
        if only.is_some_and(|o| o != key) {
            continue;
        }
        println!("xtask: {name}");
        match test(kernel, archive) {
            Ok(report) => {
                println!("xtask: machines: {report}");
                t.pass(name);
            }
            Err(e) => t.fail(name, &format!("{e:#}")),
        }
    }
}

/// The plain streams: 2 cores, and 4 with driver, server and echo apart.
fn net_streams(t: &mut Tally, guest: &dyn Fn(usize, &str) -> Guest) {
    for (smp, spread) in [(2, false), (4, true)] {
        let name = format!(
            "[net] {} datagrams host <-> udpecho ({smp} cores{})",
            crate::net_test::DATAGRAMS,
            if spread {
                ", driver, netd, udpecho on 0, 1, 3"
            } else {
                ""
            }
        );
        println!("xtask: {name}");
        match crate::net_test::run(&guest(smp, ""), smp, spread) {
            Ok(report) => {
                println!("xtask: net: {report}");
                t.pass(&name);
            }
            Err(e) => t.fail(&name, &format!("{e:#}")),
        }
    }
}

/// Does `--filter` pick the expected-fault test `name` (each runs in a boot of its own)?
fn filter_selects(filter: &str, name: &str) -> bool {
    filter == "all" || name.contains(filter)
}

/// Guest RAM of a boot check, MiB.
fn memory_of(name: &str) -> usize {
    match name {
        "boot::ram_2_gib" => 2048,
        "boot::ram_4_gib" => 4096,
        "boot::ram_64_mib_on_8_cores" => 64,
        _ => 512,
    }
}

/// Lines a boot check must print besides the summary.
fn expected_output(name: &str) -> &'static [&'static str] {
    match name {
        "boot::ram_2_gib" | "boot::ram_4_gib" => &["hello from core 1 pid 1.1 args: big"],
        "boot::ram_64_mib_on_8_cores" => &["hello from core 7 pid 7.1 args: small"],
        "boot::start_programs_on_each_core" => &[
            "hello from core 1 pid 1.1 args: x",
            "hello from core 0 pid 0.1 args: y",
        ],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A boot's console as the kernel prints it for `ktest=`.
    fn boot(lines: &[String], status: Option<i32>, timed_out: bool) -> Captured {
        Captured {
            status,
            lines: lines.to_vec(),
            timed_out,
            wall: Duration::from_secs(1),
        }
    }

    fn ok(name: &str) -> [String; 2] {
        [
            format!("{}{name}", protocol::KTEST_RUN),
            format!("{}{name} (1 us)", protocol::KTEST_OK),
        ]
    }

    fn done() -> String {
        format!("{}0 passed, 0 failed, 0 skipped", protocol::KTEST_DONE)
    }

    /// A pretend kernel with tests `a`..`e` in name order that stops in each test of
    /// `stops`: every boot runs the tests after its `ktest.after=`, as `ktest::run` does.
    fn pretend(
        stops: &'static [&'static str],
        hang: bool,
    ) -> impl FnMut(&Guest) -> Result<Captured> {
        move |g: &Guest| {
            let after = g
                .cmdline
                .split_whitespace()
                .find_map(|w| w.strip_prefix("ktest.after="))
                .unwrap_or("");
            let mut lines = vec![format!(
                "{}f::fault expects \"boom\"",
                protocol::KTEST_FAULT_TEST
            )];
            for name in ["a", "b", "c", "d", "e"].into_iter().filter(|n| *n > after) {
                if stops.contains(&name) {
                    lines.push(format!("{}{name}", protocol::KTEST_RUN));
                    lines.push(format!("{}: page fault", protocol::FATAL));
                    return Ok(boot(&lines, if hang { None } else { Some(3) }, hang));
                }
                lines.extend(ok(name));
            }
            lines.push(done());
            Ok(boot(&lines, Some(0), false))
        }
    }

    fn suite(stops: &'static [&'static str], hang: bool) -> (Tally, Vec<String>, usize) {
        let mut t = Tally::default();
        let mut cmdlines = Vec::new();
        let mut run = pretend(stops, hang);
        let g = Guest::new(Path::new("/nonexistent"), 1, "ktest=all");
        let prepared = std::cell::Cell::new(0);
        let faults = kernel_suite(
            &mut t,
            &g,
            &|| {
                prepared.set(prepared.get() + 1);
                Ok(())
            },
            &mut |g| {
                cmdlines.push(g.cmdline.clone());
                run(g)
            },
            "all",
            "smp1",
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(faults.len(), 1, "the fault test is listed once: {faults:?}");
        assert_eq!(prepared.get(), cmdlines.len(), "prepared before every boot");
        (t, cmdlines, prepared.get())
    }

    #[test]
    fn a_clean_suite_boots_once() {
        let (t, cmdlines, _) = suite(&[], false);
        assert_eq!((t.passed, t.failed), (5, 0));
        assert_eq!(cmdlines, ["ktest=all"]);
    }

    #[test]
    fn a_stop_fails_its_test_and_the_rest_still_run() {
        let (t, cmdlines, _) = suite(&["b", "d"], false);
        assert_eq!((t.passed, t.failed), (3, 2), "{:?}", t.failures);
        assert!(t.failures[0].starts_with("[smp1] b: the kernel stopped"));
        assert_eq!(
            cmdlines,
            [
                "ktest=all",
                "ktest=all ktest.after=b",
                "ktest=all ktest.after=d"
            ]
        );
    }

    #[test]
    fn too_many_stops_report_the_rest_as_not_run() {
        let (t, cmdlines, _) = suite(&["a", "b", "c", "d"], false);
        assert_eq!(cmdlines.len(), SUITE_REBOOTS + 1);
        assert_eq!(t.passed, 0);
        assert!(
            t.failures
                .last()
                .unwrap()
                .starts_with("[smp1] tests after d: not run"),
            "{:?}",
            t.failures
        );
    }

    #[test]
    fn a_failed_test_shows_the_console_lines_printed_while_it_ran() {
        let mut lines: Vec<String> = ok("a").into();
        lines.push("before b".into());
        lines.push(format!("{}b", protocol::KTEST_RUN));
        lines.extend((0..30).map(|i| format!("prog: line {i}")));
        lines.push(format!("{}b: exit 1", protocol::KTEST_FAIL));
        let shown = with_console(
            "exit 1",
            &lines[4..34].iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        );
        assert!(shown.starts_with("exit 1\n"), "{shown}");
        assert!(shown.contains("last 20 of 30 lines"), "{shown}");
        assert!(shown.contains("| prog: line 29") && shown.contains("| prog: line 10"));
        assert!(!shown.contains("line 9\n"), "{shown}");
        let (mut t, mut faults, mut ran) = (Tally::default(), Vec::new(), 0);
        let c = boot(&lines, Some(1), false);
        assert_eq!(suite_boot(&mut t, &c, "smp1", &mut faults, &mut ran), None);
        assert_eq!((t.passed, t.failed, ran), (1, 1, 2));
        // The summary keeps only the reason; the lines of test a and before b are not shown.
        assert_eq!(t.failures, ["[smp1] b: exit 1"]);
        assert_eq!(with_console("why", &[]), "why");
    }

    #[test]
    fn a_hang_is_not_booted_again() {
        let (t, cmdlines, _) = suite(&["c"], true);
        assert_eq!(cmdlines.len(), 1);
        assert_eq!((t.passed, t.failed), (2, 2), "{:?}", t.failures);
        assert!(t.failures[1].contains("not run: the guest hung"));
    }
}
