//! `cargo xtask run --script FILE`: drive the shell with a file of commands.
//!
//! The guest boots with its console captured. When the first `musubi> ` prompt appears,
//! each command of FILE (one per line; empty lines and lines starting with `#` are
//! skipped) is sent on QEMU's standard input followed by `\n`, and the next prompt is
//! awaited, at most [`STEP_LIMIT`]; after the last one the script sends `poweroff`. The
//! console is printed as it arrives. The run passes only if no console line starts with
//! `error: ` (the shell's prefix for a failed command), the kernel printed no `FATAL` line,
//! every expectation held, and QEMU exited with status 0 (a clean power-off).
//!
//! Expectations are comment lines right after a command, about that command's output (the
//! console between the command's echo and the next prompt):
//!
//! - `# expect: TEXT`: some line of the output contains TEXT;
//! - `# expect-not: TEXT`: no line of the output contains TEXT;
//! - `# expect-error: TEXT`: the command fails with an `error: ` line containing TEXT (that
//!   error line then does not fail the run; a refusal is what is being tested).
//!
//! Runs of spaces in TEXT and in the output compare equal whatever their length, so a table
//! row is matched by its cells (`# expect: 1.2 1 running`).
//!
//! Two directives type while a command runs, as a person at a terminal would:
//!
//! - `# typed-ahead` after a command: it is sent right after the command before it (and
//!   before that command's `# send:` bytes), without waiting for a prompt; its output is
//!   the console between the prompt it was typed behind and the next one;
//! - `# send: TEXT`: TEXT and a newline are sent after the command (and the commands typed
//!   ahead behind it); `# send: ^C` sends Ctrl-C alone.
//!
//! The prompt ends without a newline, so the console is read as bytes rather than lines.
//! It is printed a whole line at a time, which lets the command echo (on stderr) come out
//! on its own line just before the shell's echo of the same command.

use crate::qemu::Guest;
use crate::runner::Reaper;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::ChildStdin;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The shell's prompt (user/shell).
pub const PROMPT: &str = "musubi> ";
/// The shell's prefix for the one line a failed command prints.
pub const ERROR_PREFIX: &str = "error: ";
/// Longest command line sent (the shell's line editor takes at most 256 bytes).
pub const MAX_COMMAND: usize = 200;
/// Time allowed from QEMU's start to the first prompt.
pub const BOOT_LIMIT: Duration = Duration::from_secs(300);
/// Time allowed for one command (a hang guard: generous, because a loaded host can slow a
/// big-lock guest tenfold), from sending it to the next prompt (or, for `poweroff`,
/// to QEMU's exit).
pub const STEP_LIMIT: Duration = Duration::from_secs(180);

/// A script line that says what the previous command must (not) print.
pub const EXPECT: &str = "# expect:";
pub const EXPECT_NOT: &str = "# expect-not:";
pub const EXPECT_ERROR: &str = "# expect-error:";
pub const TYPED_AHEAD: &str = "# typed-ahead";
pub const SEND: &str = "# send:";

/// One command of a script and what its output must and must not contain.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub command: String,
    pub expect: Vec<String>,
    pub expect_not: Vec<String>,
    pub expect_error: Vec<String>,
    /// Sent behind the command before it, while that one runs (`# typed-ahead`).
    pub typed_ahead: bool,
    /// Bytes sent after the command (`# send:`).
    pub sends: Vec<Vec<u8>>,
}

/// The commands of a script file, with their expectations.
pub fn parse(text: &str) -> Result<Vec<Step>> {
    let mut steps: Vec<Step> = Vec::new();
    for (n, line) in text.lines().map(str::trim).enumerate() {
        let directive = [
            (EXPECT, Some(true)),
            (EXPECT_NOT, Some(false)),
            (EXPECT_ERROR, None),
        ]
        .into_iter()
        .find_map(|(prefix, want)| Some((line.strip_prefix(prefix)?, want)));
        if let Some((what, want)) = directive {
            let what = squeeze(what);
            let Some(step) = steps.last_mut() else {
                bail!("line {}: an expectation before any command", n + 1);
            };
            if what.is_empty() {
                bail!("line {}: an expectation without text", n + 1);
            }
            match want {
                Some(true) => step.expect.push(what),
                Some(false) => step.expect_not.push(what),
                None => step.expect_error.push(what),
            }
        } else if line == TYPED_AHEAD || line.starts_with(SEND) {
            let first = steps.len() < 2;
            let Some(step) = steps.last_mut() else {
                bail!("line {}: '{line}' before any command", n + 1);
            };
            match line.strip_prefix(SEND).map(str::trim) {
                Some("^C") => step.sends.push(vec![0x03]),
                Some("") => bail!("line {}: '{SEND}' without text", n + 1),
                Some(text) => step.sends.push(format!("{text}\n").into_bytes()),
                None if first => {
                    bail!("line {}: the first command cannot be typed ahead", n + 1)
                }
                None => step.typed_ahead = true,
            }
        } else if !line.is_empty() && !line.starts_with('#') {
            steps.push(Step {
                command: line.to_string(),
                ..Step::default()
            });
        }
    }
    Ok(steps)
}

/// `text` with every run of whitespace made one space, and none at either end.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What is wrong with `output` (a command's console output, its echo line first) for
/// `step`: one text per expectation that failed.
fn check(step: &Step, output: &str) -> Vec<String> {
    let lines: Vec<String> = output.lines().skip(1).map(squeeze).collect();
    let mut wrong = Vec::new();
    for want in &step.expect {
        if !lines.iter().any(|l| l.contains(&squeeze(want))) {
            wrong.push(format!(
                "'{}' printed no line containing '{want}'",
                step.command
            ));
        }
    }
    for want in &step.expect_error {
        let want = squeeze(want);
        if !lines.iter().any(|l| is_error_line(l) && l.contains(&want)) {
            wrong.push(format!(
                "'{}' printed no error line containing '{want}'",
                step.command
            ));
        }
    }
    for unwanted in &step.expect_not {
        if let Some(l) = lines.iter().find(|l| l.contains(&squeeze(unwanted))) {
            wrong.push(format!(
                "'{}' printed a line containing '{unwanted}': {l}",
                step.command
            ));
        }
    }
    wrong
}

/// The error lines of `output` that `step` expected, squeezed as [`check`] compares them.
fn excused_errors(step: &Step, output: &str) -> Vec<String> {
    output
        .lines()
        .skip(1)
        .map(squeeze)
        .filter(|l| is_error_line(l))
        .filter(|l| step.expect_error.iter().any(|w| l.contains(&squeeze(w))))
        .collect()
}

enum Event {
    Out(Vec<u8>),
    Err(String),
}

/// What a wait ended with.
#[derive(Debug, PartialEq, Eq)]
enum Waited {
    Prompt,
    Exited,
    TimedOut,
}

struct Session {
    qemu: Reaper,
    /// Console lines not to print (they are still kept).
    hide: fn(&str) -> bool,
    stdin: Option<ChildStdin>,
    events: Receiver<Event>,
    /// Every console byte so far.
    console: Vec<u8>,
    /// Console bytes already printed (whole lines only, until the end).
    printed: usize,
    /// Where to look for the next prompt.
    search_from: usize,
    /// No prompt starts before this (searched already; long outputs stay linear).
    scanned: usize,
    /// Where the console goes instead of this terminal (a machine of `--machines` other
    /// than the first: `target/machines/mK.log`).
    log: Option<std::fs::File>,
}

impl Session {
    fn start(guest: &Guest, hide: fn(&str) -> bool) -> Result<Session> {
        let mut qemu = crate::runner::spawn_piped(guest)?;
        let child = &mut qemu.0;
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().context("QEMU stdout")?;
        let stderr = child.stderr.take().context("QEMU stderr")?;
        let (tx, events) = mpsc::channel();
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buf) {
                if tx.send(Event::Out(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if tx2.send(Event::Err(line)).is_err() {
                    return;
                }
            }
        });
        Ok(Session {
            qemu,
            hide,
            stdin,
            events,
            console: Vec::new(),
            printed: 0,
            search_from: 0,
            scanned: 0,
            log: None,
        })
    }

    fn take(&mut self, e: Event) {
        match e {
            Event::Out(bytes) => {
                self.console.extend_from_slice(&bytes);
                if let Some(i) = self.console[self.printed..]
                    .iter()
                    .rposition(|&b| b == b'\n')
                {
                    self.print_to(self.printed + i + 1);
                }
            }
            Event::Err(line) => eprintln!("qemu: {line}"),
        }
    }

    fn print_to(&mut self, end: usize) {
        let mut stdout = std::io::stdout().lock();
        let out: &mut dyn Write = match self.log.as_mut() {
            Some(f) => f,
            None => &mut stdout,
        };
        for line in self.console[self.printed..end].split_inclusive(|&b| b == b'\n') {
            if !(self.hide)(&String::from_utf8_lossy(line)) {
                let _ = out.write_all(line);
            }
        }
        let _ = out.flush();
        self.printed = end;
    }

    /// Print what is left of the console, even a partial line.
    fn print_all(&mut self) {
        self.print_to(self.console.len());
    }

    /// Wait until the next prompt, QEMU's exit, or `limit`.
    fn wait(&mut self, limit: Duration) -> Waited {
        let start = Instant::now();
        loop {
            let needle = PROMPT.as_bytes();
            let from = self.search_from.max(self.scanned);
            if let Some(i) = self.console[from..]
                .windows(needle.len())
                .position(|w| w == needle)
            {
                self.search_from = from + i + needle.len();
                return Waited::Prompt;
            }
            self.scanned = (self.console.len() + 1)
                .saturating_sub(needle.len())
                .max(from);
            let Some(left) = limit.checked_sub(start.elapsed()) else {
                return Waited::TimedOut;
            };
            match self
                .events
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(e) => self.take(e),
                Err(RecvTimeoutError::Timeout) => {
                    if let Ok(Some(_)) = self.qemu.0.try_wait() {
                        self.drain();
                        return Waited::Exited;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.qemu.0.wait();
                    return Waited::Exited;
                }
            }
        }
    }

    /// Collect what is still in the pipes after QEMU exited.
    fn drain(&mut self) {
        while let Ok(e) = self.events.recv_timeout(Duration::from_millis(200)) {
            self.take(e);
        }
    }

    fn send(&mut self, command: &str) -> Result<()> {
        self.send_bytes(format!("{command}\n").as_bytes())
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let stdin = self.stdin.as_mut().context("QEMU's stdin is closed")?;
        stdin
            .write_all(bytes)
            .and_then(|_| stdin.flush())
            .context("writing to QEMU's stdin (did QEMU exit?)")
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.console)
            .lines()
            .map(|l| l.trim_end_matches('\r').to_string())
            .collect()
    }

    fn tail(&self, n: usize) -> String {
        let lines = self.lines();
        let start = lines.len().saturating_sub(n);
        lines[start..]
            .iter()
            .map(|l| format!("    | {l}\n"))
            .collect()
    }
}

/// A console line with the kernel's `[   1.234567 c0] ` prefix removed, if it has one.
fn without_prefix(line: &str) -> &str {
    match line.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((stamp, rest)) if stamp.contains(" c") => rest,
        _ => line,
    }
}

fn is_error_line(line: &str) -> bool {
    line.starts_with(ERROR_PREFIX) || without_prefix(line).starts_with(ERROR_PREFIX)
}

fn is_fatal_line(line: &str) -> bool {
    let l = without_prefix(line.trim_start());
    l.starts_with(abi::protocol::FATAL)
}

/// The commands of the script `file`, checked.
pub fn load(file: &Path) -> Result<Vec<Step>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the script {}", file.display()))?;
    let steps = parse(&text).with_context(|| format!("in the script {}", file.display()))?;
    if let Some(long) = steps
        .iter()
        .map(|st| &st.command)
        .find(|c| c.len() > MAX_COMMAND)
    {
        bail!(
            "script line '{long}' is longer than {MAX_COMMAND} bytes (the shell's line editor \
             takes 256)"
        );
    }
    Ok(steps)
}

/// Boot `guest`, run the commands in `file`, power off, and judge the run.
pub fn run(guest: &Guest, file: &Path) -> Result<()> {
    let steps = load(file)?;
    run_steps(guest, &file.display().to_string(), &steps, |_| false).map(drop)
}

/// Boot `guest`, run `steps` (of the script `name`), power off, and judge the run; console
/// lines for which `hide` holds are not printed. Returns every console line.
pub fn run_steps(
    guest: &Guest,
    name: &str,
    steps: &[Step],
    hide: fn(&str) -> bool,
) -> Result<Vec<String>> {
    run_steps_with(guest, name, steps, hide, &mut |_, _| Ok(()))
}

/// As [`run`], with the console written to the file `log` instead of this terminal.
pub fn run_logged(guest: &Guest, file: &Path, log: &Path) -> Result<()> {
    let steps = load(file)?;
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    run_steps_inner(
        guest,
        &file.display().to_string(),
        &steps,
        |_| false,
        &mut |_, _| Ok(()),
        Some(log),
    )
    .map(drop)
}

/// As [`run_steps`], and `after(i, output)` runs on the host once step `i` has printed its
/// output and the next prompt (a host program talking to the guest between two commands);
/// its error fails the run and skips the steps left.
pub fn run_steps_with(
    guest: &Guest,
    name: &str,
    steps: &[Step],
    hide: fn(&str) -> bool,
    after: &mut dyn FnMut(usize, &str) -> Result<()>,
) -> Result<Vec<String>> {
    run_steps_inner(guest, name, steps, hide, after, None)
}

fn run_steps_inner(
    guest: &Guest,
    name: &str,
    steps: &[Step],
    hide: fn(&str) -> bool,
    after: &mut dyn FnMut(usize, &str) -> Result<()>,
    log: Option<std::fs::File>,
) -> Result<Vec<String>> {
    eprintln!(
        "xtask: script {name}: {} commands, then poweroff",
        steps.len()
    );
    let mut s = Session::start(guest, hide)?;
    s.log = log;
    let mut problems = Vec::new();
    // Error lines a step expected (`# expect-error:`), which do not fail the run.
    let mut excused: Vec<String> = Vec::new();
    match s.wait(BOOT_LIMIT) {
        Waited::Prompt => {}
        how => {
            s.print_all();
            bail!(
                "no shell prompt ('{PROMPT}') {} after boot; last console lines:\n{}",
                if how == Waited::Exited {
                    "before QEMU exited".to_string()
                } else {
                    format!("within {} s", BOOT_LIMIT.as_secs())
                },
                s.tail(15)
            );
        }
    }
    let total = steps.len() + 1;
    let poweroff = Step {
        command: "poweroff".to_string(),
        ..Step::default()
    };
    for (i, step) in steps.iter().chain([&poweroff]).enumerate() {
        let cmd = &step.command;
        let last = i + 1 == total;
        eprintln!("xtask: script [{}/{total}]: {cmd}", i + 1);
        let start = s.search_from;
        if !step.typed_ahead {
            s.send(cmd)?;
            for ahead in steps[(i + 1).min(steps.len())..]
                .iter()
                .take_while(|a| a.typed_ahead)
            {
                s.send(&ahead.command)?;
            }
            for bytes in &step.sends {
                s.send_bytes(bytes)?;
            }
        }
        match (s.wait(STEP_LIMIT), last) {
            (Waited::Prompt, false) => {
                let end = s.search_from - PROMPT.len();
                let output = String::from_utf8_lossy(&s.console[start..end]).into_owned();
                let wrong = check(step, &output);
                excused.extend(excused_errors(step, &output));
                for w in &wrong {
                    eprintln!("xtask: expectation failed: {w}");
                }
                problems.extend(wrong);
                if let Err(e) = after(i, &output) {
                    problems.push(format!("after '{cmd}': {e:#}"));
                    break;
                }
            }
            (Waited::Exited, true) => {}
            (Waited::Prompt, true) => {
                problems.push("the shell did not power off (prompt after 'poweroff')".into());
                break;
            }
            (Waited::Exited, false) => {
                problems.push(format!("QEMU exited during '{cmd}'"));
                break;
            }
            (Waited::TimedOut, _) => {
                problems.push(format!(
                    "'{cmd}' hung: no {} within {} s",
                    if last { "power-off" } else { "prompt" },
                    STEP_LIMIT.as_secs()
                ));
                break;
            }
        }
    }
    s.print_all();
    drop(s.stdin.take());
    let status = match s.qemu.0.try_wait() {
        Ok(Some(st)) => st.code(),
        _ => None,
    };
    let lines = s.lines();
    let errors: Vec<&String> = lines
        .iter()
        .filter(|l| is_error_line(l))
        .filter(|l| match excused.iter().position(|e| *e == squeeze(l)) {
            Some(i) => {
                excused.swap_remove(i);
                false
            }
            None => true,
        })
        .collect();
    if !errors.is_empty() {
        let list: String = errors.iter().map(|l| format!("\n    | {l}")).collect();
        problems.push(format!("{} error lines:{list}", errors.len()));
    }
    if lines.iter().any(|l| is_fatal_line(l)) {
        problems.push("the kernel stopped with a FATAL report".into());
    }
    match status {
        Some(0) => {}
        Some(code) => problems.push(format!("QEMU exited with status {code}")),
        None => problems.push("QEMU was still running and was killed".into()),
    }
    if problems.is_empty() {
        eprintln!(
            "xtask: script passed: {} commands, no error lines, expectations held, clean \
             power-off",
            steps.len()
        );
        return Ok(lines);
    }
    if !problems.iter().any(|p| p.contains("error lines")) {
        eprintln!("xtask: last console lines:\n{}", s.tail(15));
    }
    bail!("script failed: {}", problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_skips_blanks_and_comments() {
        let steps = parse("# setup\n\nps\n  run hello a b  \n#x\ncores\n").unwrap();
        let cmds: Vec<&str> = steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(cmds, ["ps", "run hello a b", "cores"]);
        assert!(steps
            .iter()
            .all(|s| s.expect.is_empty() && s.expect_not.is_empty()));
    }

    #[test]
    fn parse_expectations() {
        let text = "ps\n# expect:  0.1   0 running\n# expect-not: zombie\n# note\ncores\n";
        let steps = parse(text).unwrap();
        assert_eq!(steps[0].expect, ["0.1 0 running"]);
        assert_eq!(steps[0].expect_not, ["zombie"]);
        assert!(steps[1].expect.is_empty());
        assert!(parse("# expect: x\nps\n").is_err());
        assert!(parse("ps\n# expect:   \n").is_err());
    }

    #[test]
    fn typed_ahead_commands_and_sent_bytes() {
        let steps = parse("run spin\n# send: ^C\n# send: ls\nrun hello\n# typed-ahead\n").unwrap();
        assert_eq!(steps[0].sends, [vec![0x03], b"ls\n".to_vec()]);
        assert!(!steps[0].typed_ahead && steps[1].typed_ahead);
        assert!(parse("run hello\n# typed-ahead\n").is_err());
        assert!(parse("# send: x\nps\n").is_err());
        assert!(parse("ps\n# send:\n").is_err());
    }

    #[test]
    fn expectations_skip_the_echo() {
        let step = Step {
            command: "run hello -c 1".into(),
            expect: vec!["hello from core 1".into(), "a  b".into()],
            expect_not: vec!["-c 1".into()],
            ..Step::default()
        };
        let good = "run hello -c 1\r\nhello from core 1 pid 1.1 args: a     b\r\n";
        assert!(check(&step, good).is_empty());
        let bad = "run hello -c 1\r\nhello from core 0 pid 0.2\r\nrun -c 1\r\n";
        assert_eq!(check(&step, bad).len(), 3);
    }

    #[test]
    fn expected_errors_are_checked_and_excused() {
        let steps = parse("kill 0.1\n# expect-error: is this shell\n").unwrap();
        assert_eq!(steps[0].expect_error, ["is this shell"]);
        let refused = "kill 0.1\r\nerror: kill: 0.1 is this shell\r\n";
        assert!(check(&steps[0], refused).is_empty());
        assert_eq!(
            excused_errors(&steps[0], refused),
            ["error: kill: 0.1 is this shell"]
        );
        // A command that did not fail, or failed for another reason, fails the step.
        assert_eq!(check(&steps[0], "kill 0.1\r\n").len(), 1);
        let other = "kill 0.1\r\nerror: kill 0.1: Denied\r\n";
        assert_eq!(check(&steps[0], other).len(), 1);
        assert!(excused_errors(&steps[0], other).is_empty());
    }

    #[test]
    fn error_and_fatal_lines() {
        assert!(is_error_line("error: unknown command 'x' (try 'help')"));
        assert!(is_error_line(
            "[   1.000000 c0] error: run: no such program: x"
        ));
        assert!(!is_error_line("musubi> error"));
        assert!(!is_error_line("no error: here"));
        assert!(is_fatal_line("FATAL page fault on core 1"));
        assert!(is_fatal_line("[   2.000000 c1] FATAL panic"));
        assert!(!is_fatal_line("ktest: ok faults::not_fatal"));
    }
}
