//! Pipelines and `remote`: the shell's commands that run programs on other cores joined by
//! pipes, or with their output on this console (P0's user pipes across processors and its
//! `remote` command).
//!
//! `run A [ARGS] [-c CORE] | B [ARGS] [-c CORE] [| ...]`: one pipe between each two
//! neighbours, opened on the reading program's core (its reads wait there; the writer's
//! writes travel). The shell holds both ends of every pipe while it starts the programs,
//! has each program hold the ends it uses (`ulib::stdio::spawn`), then lets go of its own,
//! so no reader sees EOF and no writer `Gone` before its partner exists. It waits for every
//! program (Ctrl-C ends the one it is waiting for; the others then see EOF or `Gone`), then
//! closes the pipes. The first program reads the console, the last writes to it. A program
//! that ended because its reader had gone (`stdio::BROKEN_PIPE`, unless it is the last) is
//! not a failure.
//!
//! `run A ... < IN` and `run ... Z > OUT` (or `>> OUT`): a file as the first program's input
//! or the last one's output. The shell adds a stage: `fcat IN` before the first program,
//! `fsave OUT` (`fsave -a OUT`) after the last (`user/upper`: programs of the file service,
//! `ulib::fs`), joined by pipes like any pipeline; the file's bytes never pass through the
//! shell.
//!
//! `remote CORE PROG [ARGS...]`: start PROG on CORE, its output to this console, and wait
//! for it.
//!
//! `run A [ARGS] -m M | B ...`: the first program on machine M (issue 17); the shell reads
//! its output through `machd` and writes it into the pipe to B ([`from_machine`]). `run A
//! ... | Z [ARGS] -m M`: the last one there; the shell reads the pipe from the program
//! before it and sends the bytes into Z's input through `machd` ([`to_machine`]). Any
//! other program on another machine (`run seq 9 | upper -m 1 | wc`, or the last when the
//! first is remote too) is stood in for here by `mrun`, a local program that feeds its
//! input there and copies its output back ([`on_machine`]). While the shell pumps bytes
//! to or from a remote first or last program, or waits for it, a Ctrl-C kills it and the
//! local programs too (one of them may never read or write again), and those killed are no
//! failure. An `mrun` is not killed: it ends as its neighbours go, and ends its program
//! there (killed, it would leave that running).
//! With no remote first or last program, Ctrl-C ends the program waited for, as in a
//! pipeline of this machine's programs.

use crate::{cores, failure, parse_run, wait_foreground, Stage};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::{ResId, ResName, ResType};
use ulib::abi::syscall::control;
use ulib::abi::{self, Pid, Priority, WaitStatus};
use ulib::stdio::{self, Stream};
use ulib::sys;

/// `run A ... | B ... [| ...]` (`words` after `run`); any program may run on another
/// machine (`-m M`).
pub fn pipeline(words: &[&str], typeahead: &mut Vec<u8>) -> Result<(), String> {
    pipeline_between(words, (Stream::Console, Stream::Console), typeahead)
}

/// [`pipeline`] with `ends`: the first program's input and the last one's output (a pipe
/// resource given by `<` or `>`; only for programs of this machine).
fn pipeline_between(
    words: &[&str],
    ends: (Stream, Stream),
    typeahead: &mut Vec<u8>,
) -> Result<(), String> {
    let mut parts: Vec<&[&str]> = words.split(|w| *w == "|").map(strip_run).collect();
    let remote = |p: &&[&str]| p.contains(&"-m");
    let n = parts.len();
    let first = parts.first().is_some_and(remote);
    let last = n > 1 && !first && parts.last().is_some_and(remote);
    let (from, to) = match (first, last) {
        (true, _) => (Some(parts.remove(0)), None),
        (_, true) => (None, parts.pop()),
        _ => (None, None),
    };
    let mut stages: Vec<Stage> = Vec::new();
    for part in parts {
        if part.is_empty() {
            return Err("run: a pipeline needs a program on each side of '|'".into());
        }
        if remote(&part) {
            stages.push(on_machine(part)?);
            continue;
        }
        let (stage, background) = parse_run(part)?;
        if background {
            return Err("run: a pipeline cannot run in the background ('&')".into());
        }
        stages.push(stage);
    }
    let here = sys::core().map_err(|e| format!("run: {e}"))?;
    let console = (Stream::Console, Stream::Console);
    if ends != console && (from.is_some() || to.is_some() || stages.iter().any(|s| s.prog == MRUN))
    {
        return Err(
            "run: a pipe as input or output ('<', '>') only for programs of this machine".into(),
        );
    }
    let mut pipes: Vec<ResId> = Vec::new();
    let result = match (from, to) {
        (Some(first), _) => from_machine(first, &stages, here, &mut pipes, typeahead),
        (_, Some(last)) => to_machine(&stages, last, here, &mut pipes, typeahead),
        _ => start_and_wait(&stages, here, ends, &mut pipes, typeahead),
    };
    for id in pipes {
        // Dropping ends the shell still holds is harmless if already dropped.
        let _ = ulib::res::control(id, control::PIPE_DROP, control::PIPE_READ_END, 0);
        let _ = ulib::res::control(id, control::PIPE_DROP, control::PIPE_WRITE_END, 0);
        if let Err(e) = ulib::res::close(id) {
            ulib::eprintln!("run: closing pipe {id}: {e}");
        }
    }
    result
}

/// The stand-in for a remote program in the middle of a pipeline.
const MRUN: &str = "mrun";

/// A program of a pipeline on another machine, neither the first (the shell reads its
/// output) nor the last (the shell feeds its input): a local `mrun PROG [ARGS] -m M [-c
/// C]` stands in for it, with its input and output (`user/upper/src/bin/mrun.rs`).
fn on_machine<'a>(part: &[&'a str]) -> Result<Stage<'a>, String> {
    if part.last().is_some_and(|w| w.ends_with('&')) {
        return Err("run: a pipeline cannot run in the background ('&')".into());
    }
    Ok(Stage {
        prog: MRUN,
        args: part.to_vec(),
        priority: Priority::App,
        core: None,
    })
}

/// A pipeline part without a leading `run`.
fn strip_run<'a, 'b>(part: &'b [&'a str]) -> &'b [&'a str] {
    match part.first() {
        Some(&"run") => &part[1..],
        _ => part,
    }
}

/// Is `w` a redirection (`<`, `>`, `>>`)?
pub fn is_redirection(w: &str) -> bool {
    matches!(w, "<" | ">" | ">>")
}

/// `run ... < IN` / `> OUT` / `>> OUT` (`words` after `run`): the pipeline with `fcat IN`
/// before it and `fsave [-a] OUT` after it.
pub fn redirected(words: &[&str], typeahead: &mut Vec<u8>) -> Result<(), String> {
    let stages = words.iter().filter(|w| **w == "|").count() + 1;
    let mut rest: Vec<&str> = Vec::new();
    let (mut input, mut output) = (None, None);
    let (mut stage, mut i) = (0, 0);
    while i < words.len() {
        let w = words[i];
        if !is_redirection(w) {
            stage += usize::from(w == "|");
            rest.push(w);
            i += 1;
            continue;
        }
        let file = words
            .get(i + 1)
            .copied()
            .filter(|f| !is_redirection(f) && !matches!(*f, "|" | "&"))
            .ok_or_else(|| format!("run: '{w}' needs a file name"))?;
        if w == "<" {
            if stage != 0 {
                return Err("run: only the first program's input can be a file ('<')".into());
            }
            if input.replace(file).is_some() {
                return Err("run: '<' given twice".into());
            }
        } else {
            if stage + 1 != stages {
                return Err(format!(
                    "run: only the last program's output can be a file ('{w}')"
                ));
            }
            if output.replace((file, w == ">>")).is_some() {
                return Err("run: the output given twice ('>' or '>>')".into());
            }
        }
        i += 2;
    }
    // A pipe resource instead of a file: the program reads or writes it itself.
    let in_pipe = input.and_then(pipe_of).transpose()?;
    let out_pipe = output.and_then(|(w, _)| pipe_of(w)).transpose()?;
    let mut all: Vec<&str> = Vec::new();
    if let (Some(file), None) = (input, &in_pipe) {
        all.extend(["fcat", file, "|"]);
    }
    all.extend(rest);
    if let (Some((file, append)), None) = (output, &out_pipe) {
        all.extend(["|", "fsave"]);
        if append {
            all.push("-a");
        }
        all.push(file);
    }
    let ends = (
        in_pipe
            .as_ref()
            .map_or(Stream::Console, |p| Stream::Pipe(p.id)),
        out_pipe
            .as_ref()
            .map_or(Stream::Console, |p| Stream::Pipe(p.id)),
    );
    // The shell holds the end each program uses until the programs have ended (another
    // machine's programs hold their own there only once they start), so that the other
    // side sees no EOF or `Gone` first; and an output pipe's reading end too, so that what
    // is written before anyone reads it stays there (up to the pipe's capacity; then the
    // writer waits for room, as a Unix FIFO's writer waits for a reader) instead of the
    // write failing `Gone` for want of a reader.
    let held: Vec<(&PipeEnd, u64)> = [
        (in_pipe.as_ref(), control::PIPE_READ_END),
        (out_pipe.as_ref(), control::PIPE_WRITE_END),
        (out_pipe.as_ref(), control::PIPE_READ_END),
    ]
    .into_iter()
    .filter_map(|(p, end)| p.map(|p| (p, end)))
    .collect();
    let mut holding = 0;
    let mut result = Ok(());
    for &(p, end) in &held {
        if let Err(e) = p.control(control::PIPE_HOLD, end) {
            result = Err(format!("run: cannot hold pipe {}: {e}", p.id));
            break;
        }
        holding += 1;
    }
    if result.is_ok() {
        result = pipeline_between(&all, ends, typeahead);
    }
    for &(p, end) in &held[..holding] {
        let _ = p.control(control::PIPE_DROP, end);
    }
    result
}

/// A pipe resource named as a redirection's target: this machine's or another's.
struct PipeEnd {
    id: ResId,
    /// Another machine's (with its life): reached through `machd`.
    remote: Option<ulib::mach::RemoteRes>,
}

impl PipeEnd {
    /// Control command `cmd` (`PIPE_HOLD`, `PIPE_DROP`) of end `end` for this shell.
    fn control(&self, cmd: u64, end: u64) -> Result<u64, ulib::abi::Error> {
        match &self.remote {
            Some(r) => ulib::mach::res_control(r, cmd, end, 0),
            None => ulib::res::control(self.id, cmd, end, 0),
        }
    }
}

/// `word` as a pipe resource, if it names one rather than a file: `LOC/pipe/NAME` or a
/// pipe's id (`c0:pipe:3.1`), with `mK.` before either for machine K's (`m1.c0/pipe/p`,
/// `m1.c0:pipe:3.1`). A file is named `NAME`, `/DIR/NAME` or `mK:NAME`.
fn pipe_of(word: &str) -> Option<Result<PipeEnd, String>> {
    let here = sys::getpid().map_or(0, |p| p.machine());
    // (`mK:NAME` is a file of machine K.)
    let (prefix, rest) = match crate::mres::split_machine(word) {
        Some((m, rest)) if !word.starts_with(&format!("m{m}:")) => (Some(m), rest),
        _ => (None, word),
    };
    let named = ResName::parse(rest).is_ok_and(|n| n.kind == ResType::Pipe);
    let id = ResId::parse(rest).filter(|id| id.kind() == Some(ResType::Pipe));
    if !named && id.is_none() {
        return None;
    }
    // A name is this machine's unless `mK.` says otherwise; an id names its own machine
    // (`c0:pipe:3.1` is machine 0's wherever it is typed).
    let machine = prefix.or(id.map(|id| id.machine())).unwrap_or(here);
    let id = id.map(|id| id.with_machine(machine));
    Some(if machine == here {
        match id {
            Some(id) => Ok(PipeEnd { id, remote: None }),
            None => ulib::res::find(rest)
                .map(|r| PipeEnd {
                    id: r.id,
                    remote: None,
                })
                .map_err(|e| format!("run: {e}: {word}")),
        }
    } else {
        let remote = match id {
            Some(id) => ulib::mach::epoch_of(machine).map(|epoch| ulib::mach::RemoteRes {
                machine,
                epoch,
                id,
            }),
            None => ulib::mach::res_find(machine, rest),
        };
        remote
            .map(|r| PipeEnd {
                id: r.id.with_machine(machine),
                remote: Some(r),
            })
            .map_err(|e| format!("run: {e}: {word}"))
    })
}

/// Start one stage: a program of the boot archive, else (a path, or a name not in the
/// archive but on the disk) one read from the disk, as `run` does.
fn start_stage(stage: &Stage, input: Stream, output: Stream) -> Result<Pid, String> {
    let from_archive = if stage.prog.starts_with('/') {
        Err(ulib::abi::Error::NoSuchProgram)
    } else {
        stdio::spawn(
            stage.prog,
            &stage.args,
            stage.priority,
            stage.core,
            input,
            output,
        )
    };
    match from_archive {
        Ok(pid) => Ok(pid),
        Err(ulib::abi::Error::NoSuchProgram)
            if stage.prog.starts_with('/') || crate::files::on_disk(stage.prog) =>
        {
            crate::files::spawn_stage(
                stage.prog,
                &stage.args,
                stage.priority,
                stage.core,
                (input, output),
            )
        }
        Err(e) => Err(match stage.core {
            None => format!("run: {e}: {}", stage.prog),
            Some(c) => format!("run: {e}: {} on core {c}", stage.prog),
        }),
    }
}

/// Open the pipes (into `pipes`, for the caller to close), start every stage, let go of
/// the shell's ends, wait for every stage; the first failure is the error.
fn start_and_wait(
    stages: &[Stage],
    here: usize,
    (first_input, last_output): (Stream, Stream),
    pipes: &mut Vec<ResId>,
    typeahead: &mut Vec<u8>,
) -> Result<(), String> {
    for stage in &stages[1..] {
        pipes.push(open_pipe(stage.core.unwrap_or(here))?);
    }
    let mut pids: Vec<(Pid, &str)> = Vec::new();
    for (i, stage) in stages.iter().enumerate() {
        let input = match i {
            0 => first_input,
            i => Stream::Pipe(pipes[i - 1]),
        };
        let output = pipes.get(i).map_or(last_output, |p| Stream::Pipe(*p));
        match start_stage(stage, input, output) {
            Ok(pid) => pids.push((pid, stage.prog)),
            Err(e) => {
                for (pid, _) in &pids {
                    let _ = sys::kill(*pid);
                    let _ = sys::wait(Some(*pid));
                }
                return Err(e);
            }
        }
    }
    for id in pipes.iter() {
        for end in [control::PIPE_READ_END, control::PIPE_WRITE_END] {
            let _ = ulib::res::control(*id, control::PIPE_DROP, end, 0);
        }
    }
    let mut first_error = None;
    wait_stages(pids, true, false, typeahead, &mut first_error)?;
    first_error.map_or(Ok(()), Err)
}

/// Wait for a pipeline's local programs, noting the first failure. A program that ended
/// because its reader had gone (`stdio::BROKEN_PIPE`, Unix's SIGPIPE) is not a failure,
/// unless it is the last and `last_to_console` (it had no reader). With `interrupted` (a
/// Ctrl-C ended the pipeline: `machines::pipe_from`, `pipe_into`), a program killed is not
/// one either.
fn wait_stages(
    pids: Vec<(Pid, &str)>,
    last_to_console: bool,
    interrupted: bool,
    typeahead: &mut Vec<u8>,
    first_error: &mut Option<String>,
) -> Result<(), String> {
    let last = pids.len().saturating_sub(1);
    for (i, (pid, prog)) in pids.into_iter().enumerate() {
        let status = wait_foreground(pid, typeahead)?;
        let broken = status.how == abi::ENDED_EXIT && status.code as i32 == stdio::BROKEN_PIPE;
        let killed = interrupted && status.how == abi::ENDED_KILLED;
        if ((i == last && last_to_console) || !broken) && !killed {
            continue_or_note(&status, pid, prog, first_error);
        }
    }
    Ok(())
}

/// A pipe read on `core`.
fn open_pipe(core: usize) -> Result<ResId, String> {
    stdio::pipe(Some(core), None)
        .map_err(|e| format!("run: cannot open a pipe on core {core}: {e}"))
}

/// A pipeline whose first program (`first`: `PROG [ARGS] -m M [-c C]`) runs on another
/// machine (P0's pipes across processors, across machines): one more pipe before the
/// local `stages`, which the shell writes with the remote program's output
/// (`machines::pipe_from`) while they run; then every program is waited for.
fn from_machine(
    first: &[&str],
    stages: &[Stage],
    here: usize,
    pipes: &mut Vec<ResId>,
    typeahead: &mut Vec<u8>,
) -> Result<(), String> {
    for stage in stages {
        pipes.push(open_pipe(stage.core.unwrap_or(here))?);
    }
    let mut pids: Vec<(Pid, &str)> = Vec::new();
    let started = stages.iter().enumerate().try_for_each(|(i, stage)| {
        let output = pipes
            .get(i + 1)
            .map_or(Stream::Console, |p| Stream::Pipe(*p));
        let pid = stdio::spawn(
            stage.prog,
            &stage.args,
            stage.priority,
            stage.core,
            Stream::Pipe(pipes[i]),
            output,
        )
        .map_err(|e| format!("run: {e}: {}", stage.prog))?;
        pids.push((pid, stage.prog));
        Ok::<(), String>(())
    });
    // The shell keeps only the writing end of the first pipe (the remote program's output
    // goes in there).
    for (k, id) in pipes.iter().enumerate() {
        let _ = ulib::res::control(*id, control::PIPE_DROP, control::PIPE_READ_END, 0);
        if k > 0 {
            let _ = ulib::res::control(*id, control::PIPE_DROP, control::PIPE_WRITE_END, 0);
        }
    }
    let remote = started.and_then(|()| crate::machines::start_relayed(first, false));
    let mut typed = false;
    let locals = killed_at_ctrl_c(&pids);
    let mut first_error = match remote {
        Ok(job) => crate::machines::pipe_from(&job, pipes[0], &locals, typeahead, &mut typed).err(),
        Err(e) => {
            // The local programs see EOF and end.
            let _ = ulib::res::control(pipes[0], control::PIPE_DROP, control::PIPE_WRITE_END, 0);
            Some(e)
        }
    };
    wait_stages(pids, true, typed, typeahead, &mut first_error)?;
    first_error.map_or(Ok(()), Err)
}

/// A pipeline whose last program (`last`: `PROG [ARGS] -m M [-c C]`) runs on another
/// machine: the local `stages` joined by pipes as usual, the last of them writing into one
/// more pipe that the shell reads and sends into the remote program's input
/// (`machines::pipe_into`); then every program is waited for.
fn to_machine(
    stages: &[Stage],
    last: &[&str],
    here: usize,
    pipes: &mut Vec<ResId>,
    typeahead: &mut Vec<u8>,
) -> Result<(), String> {
    for _ in stages {
        // Each pipe on its reader's core; the last one's reader is the shell.
        let core = stages
            .get(pipes.len() + 1)
            .and_then(|s| s.core)
            .unwrap_or(here);
        pipes.push(open_pipe(core)?);
    }
    let mut pids: Vec<(Pid, &str)> = Vec::new();
    let started = stages.iter().enumerate().try_for_each(|(i, stage)| {
        let input = match i {
            0 => Stream::Console,
            i => Stream::Pipe(pipes[i - 1]),
        };
        let pid = stdio::spawn(
            stage.prog,
            &stage.args,
            stage.priority,
            stage.core,
            input,
            Stream::Pipe(pipes[i]),
        )
        .map_err(|e| format!("run: {e}: {}", stage.prog))?;
        pids.push((pid, stage.prog));
        Ok::<(), String>(())
    });
    // The shell keeps only the reading end of the last pipe (it sends what comes there).
    let feed = pipes.len() - 1;
    for (k, id) in pipes.iter().enumerate() {
        let _ = ulib::res::control(*id, control::PIPE_DROP, control::PIPE_WRITE_END, 0);
        if k != feed {
            let _ = ulib::res::control(*id, control::PIPE_DROP, control::PIPE_READ_END, 0);
        }
    }
    let mut typed = false;
    let locals = killed_at_ctrl_c(&pids);
    let mut first_error = match started {
        Ok(()) => {
            crate::machines::pipe_into(last, pipes[feed], &locals, typeahead, &mut typed).err()
        }
        Err(e) => {
            let _ = ulib::res::control(pipes[feed], control::PIPE_DROP, control::PIPE_READ_END, 0);
            Some(e)
        }
    };
    // The last local program writes into the shell's pipe: its reader may go first too.
    wait_stages(pids, false, typed, typeahead, &mut first_error)?;
    first_error.map_or(Ok(()), Err)
}

/// The programs here that a Ctrl-C kills with a pipeline's remote first or last program:
/// all but `mrun`s, which end by themselves as their neighbours go and end their program
/// on the other machine (killed, an `mrun` would leave it running there).
fn killed_at_ctrl_c(pids: &[(Pid, &str)]) -> Vec<Pid> {
    pids.iter()
        .filter(|(_, prog)| *prog != MRUN)
        .map(|(pid, _)| *pid)
        .collect()
}

/// Note a stage's failure if it is the first.
fn continue_or_note(status: &WaitStatus, pid: Pid, prog: &str, first: &mut Option<String>) {
    {
        if let Some(why) = failure(status) {
            first.get_or_insert(format!("{prog} ({pid}) {why}"));
        }
    }
}

/// `remote CORE PROG [ARGS...]`.
pub fn remote(args: &[&str], typeahead: &mut Vec<u8>) -> Result<(), String> {
    let [core, prog, prog_args @ ..] = args else {
        return Err("remote: usage: remote CORE PROG [ARGS...]".into());
    };
    let core = cores::parse_core(core)
        .ok_or_else(|| format!("remote: bad core '{core}' (a number, e.g. 1)"))?;
    let stage = Stage {
        prog,
        args: prog_args.to_vec(),
        priority: Priority::App,
        core: Some(core),
    };
    // From the boot archive, else from the disk, as `run`.
    let pid = start_stage(&stage, Stream::Console, Stream::Console)
        .map_err(|e| format!("remote: {}", e.strip_prefix("run: ").unwrap_or(&e)))?;
    let status = wait_foreground(pid, typeahead)?;
    match failure(&status) {
        None => Ok(()),
        Some(why) => Err(format!("{prog} ({pid}) {why}")),
    }
}
