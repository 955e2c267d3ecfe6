//! Running a guest: interactively (`cargo xtask run`), or captured with a time limit for
//! tests and benchmarks.
//!
//! A captured run reads the serial console line by line, answers the kernel's requests for
//! input (`ktest: input please`), and kills QEMU when the time limit passes, saying so. A
//! QEMU is never left behind: the child is killed on every exit path of [`run_captured`],
//! and every QEMU still running is killed if xtask panics ([`kill_guests_on_panic`]: the
//! profile aborts on panic, so no destructor would run).

use crate::qemu::{Guest, QEMU};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What a captured run produced.
pub struct Captured {
    /// QEMU's exit status (None if it was killed).
    pub status: Option<i32>,
    pub lines: Vec<String>,
    pub timed_out: bool,
    pub wall: Duration,
}

impl Captured {
    /// Did the kernel power off cleanly?
    pub fn powered_off(&self) -> bool {
        self.status == Some(0)
    }

    /// The last `n` lines, for error messages.
    pub fn tail(&self, n: usize) -> String {
        let start = self.lines.len().saturating_sub(n);
        self.lines[start..]
            .iter()
            .map(|l| format!("    | {l}\n"))
            .collect()
    }
}

/// Kills the child when dropped, so no QEMU outlives xtask's interest in it.
pub struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != self.0.id());
    }
}

/// The QEMUs started and not yet reaped (their pids).
static LIVE: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// On a panic (which aborts: `panic = "abort"`), kill every QEMU still running first, so a
/// failing test leaves no guest behind.
pub fn kill_guests_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let pids: Vec<u32> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
        for pid in pids {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
        }
        previous(info);
    }));
}

/// Start QEMU for `guest` with all three standard streams piped.
pub fn spawn_piped(guest: &Guest) -> Result<Reaper> {
    let child = Command::new(QEMU)
        .args(guest.args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {QEMU}"))?;
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(child.id());
    Ok(Reaper(child))
}

/// Start QEMU for `guest` with its console (stdout and stderr) written to the file `log`
/// and nothing on its standard input (a machine of `--machines` other than the first).
pub fn spawn_logged(guest: &Guest, log: &std::path::Path) -> Result<Reaper> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let child = Command::new(QEMU)
        .args(guest.args())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {QEMU}"))?;
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(child.id());
    Ok(Reaper(child))
}

/// Boot `guest`, collect its console, and stop it after `limit`.
pub fn run_captured(guest: &Guest, limit: Duration, echo: bool) -> Result<Captured> {
    let start = Instant::now();
    let mut reaper = spawn_piped(guest)?;
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = reaper.0.stdout.take().context("QEMU stdout")?;
    let stderr = reaper.0.stderr.take().context("QEMU stderr")?;
    let tx2 = tx.clone();
    std::thread::spawn(move || forward_lines(stdout, tx, ""));
    std::thread::spawn(move || forward_lines(stderr, tx2, "qemu: "));
    let mut stdin = reaper.0.stdin.take();

    let mut lines = Vec::new();
    let mut timed_out = false;
    loop {
        let left = limit.checked_sub(start.elapsed());
        let Some(left) = left else {
            timed_out = true;
            break;
        };
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(line) => {
                if echo {
                    println!("{line}");
                }
                if line.contains(abi::protocol::KTEST_INPUT) {
                    if let Some(s) = stdin.as_mut() {
                        let _ = s.write_all(b"ping\n");
                        let _ = s.flush();
                    }
                }
                lines.push(line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(_)) = reaper.0.try_wait() {
                    // Exited; collect what is still in the pipes.
                    while let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                        if echo {
                            println!("{line}");
                        }
                        lines.push(line);
                    }
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(stdin);
    let status = if timed_out {
        None
    } else {
        reaper.0.wait().ok().and_then(|s| s.code())
    };
    Ok(Captured {
        status,
        lines,
        timed_out,
        wall: start.elapsed(),
    })
}

fn forward_lines(r: impl std::io::Read, tx: mpsc::Sender<String>, prefix: &str) {
    for line in BufReader::new(r).split(b'\n').map_while(|l| l.ok()) {
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_string();
        if tx.send(format!("{prefix}{text}")).is_err() {
            return;
        }
    }
}

/// Boot `guest` with the console on this terminal; returns QEMU's exit status.
pub fn run_interactive(guest: &Guest) -> Result<i32> {
    let status = Command::new(QEMU)
        .args(guest.args())
        .status()
        .with_context(|| format!("starting {QEMU}"))?;
    Ok(status.code().unwrap_or(130))
}

/// Replace backtrace addresses in `lines` with `function (file:line)`, using addr2line.
pub fn symbolize(lines: &[String], kernel: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        out.push(l.clone());
        let Some(rest) = l.trim_start().strip_prefix("backtrace:") else {
            continue;
        };
        let addrs: Vec<&str> = rest.split_whitespace().collect();
        if addrs.is_empty() {
            continue;
        }
        let Ok(o) = Command::new("addr2line")
            .args(["-f", "-C", "-s", "-e"])
            .arg(kernel)
            .args(&addrs)
            .output()
        else {
            continue;
        };
        let text = String::from_utf8_lossy(&o.stdout);
        let mut it = text.lines();
        let mut last = String::new();
        for a in &addrs {
            let (Some(func), Some(loc)) = (it.next(), it.next()) else {
                break;
            };
            let entry = format!("      {a} {func} ({loc})");
            if entry != last {
                out.push(entry.clone());
            }
            last = entry;
        }
    }
    out
}
