//! `shell`: Musubi's command shell, started by the kernel on core 0 at boot.
//!
//! It prints the prompt `musubi> `, edits the line as it is typed (echo, backspace, Ctrl-U
//! clears the line, Ctrl-W erases a word, Ctrl-C abandons it; escape sequences such as the
//! arrow keys are ignored) and runs it on Enter (`\r` from a terminal, `\n` from a pipe).
//! Console input comes from `CONSOLE_READ`, which only core 0 serves.
//!
//! Every command that fails prints exactly one line starting with `error: ` (the prefix
//! `cargo xtask run --script` looks for), and a command that succeeds never prints one.
//! Background programs (`run PROG &`) are reaped before each prompt: the shell counts its
//! zombie children in `PROCESSES` and collects that many with a `WAIT` for any child that
//! does not block, and reports `[pid] done` or an error line; so is a process started by
//! `res bind`. A job is known by the pid it was started with, which is also the pid `WAIT`
//! for any child reports, however often the job moved to another core (by `migrate` or
//! by itself); `jobs` lists the jobs and `wait [PID]` waits for them. The resource commands (`res ...`, `su`, `whoami`) are in [`res`], the
//! commands about cores and RPCC (`cores`, `mem`, `migrate`, `rpcc`) in [`cores`], `fn ls`
//! and `replace` in [`fns`], pipelines (`run A | B`) and `remote` in [`pipes`].
//!
//! `exit` ends the shell (refused while jobs run: they would outlive it with nobody allowed
//! to kill them); the kernel then starts a new one (`kernel/src/init.rs`), as it does
//! whenever the shell ends.
//!
//! Every command works on any core: `run -c CORE` starts a program there (it is still the
//! shell's child, waited for and killed as a local one), `ps` lists every core's
//! processes, `kill` takes any pid, and a job moved by `migrate` stays a job (reported
//! under the pid it was started with; `kill` takes either pid).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

mod cores;
mod editor;
mod files;
mod fns;
mod machines;
mod mres;
mod net;
mod pipes;
mod res;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::UserId;
use ulib::abi::{self, Error, Pid, Priority, ProcInfo, WaitStatus};
use ulib::{print, println, sys};

ulib::main!(main);

const PROMPT: &str = "musubi> ";

const HELP: &str = "\
commands:
  help                            this list
  ps                              processes of every core, by core: pid, core, state,
                                  priority, cpu time, memory
  cores                           cores: load since boot, free frames, processes, IPIs,
                                  address-space switches (CR3 writes)
  pci                             PCI functions: bus:dev.fn, ids, class, BARs, IRQ, holder
  mem                             free and total memory per core
  run PROG [ARGS...] [-p PRIO] [-c CORE] [&]
                                  start PROG (PRIO: driver, server, app, background or
                                  0-3; default app) on CORE (default this one); wait for
                                  it, or with & run it in the background
  run A [ARGS] [-c CORE] | B [ARGS] [-c CORE] [| ...]
                                  a pipeline: A's output is B's input (a pipe on B's
                                  core), each on its core; waits for all of them
  run A ... < IN, run ... Z > OUT, run ... Z >> OUT
                                  a file on the disk as A's input or Z's output
                                  (fcat IN | A ..., ... Z | fsave [-a] OUT), or a pipe
                                  resource (c1/pipe/p; m1.c0/pipe/p of machine 1)
  remote CORE PROG [ARGS...]      run PROG on CORE with its output on this console and
                                  wait for it (P0's remote command)
  jobs                            the background programs that have not ended
  wait [PID]                      wait for background program PID (default: every one)
                                  to end and report it (Ctrl-C stops waiting)
  kill PID                        end process PID of any core (CORE.SERIAL, e.g. 1.3)
  migrate PID CORE                move process PID to CORE; it gets a new pid there
  migrate PID -m M [-c CORE]      move process PID to machine M (a job: mM.cC.S)
  rpcc                            inter-core RPCC per core: notify mode, agent limit,
                                  agents live/created/destroyed, reuses, requests
                                  served, ring-full waits, IPIs sent, requests waiting;
                                  then the messages each core sent to each core
  modes                           where each core's time went: user, kernel, lock (the
                                  big kernel lock, kernel=biglock), idle, interrupt
  trace [dump|clear|status]       the kernel's event trace (boot with trace=on); dump
                                  prints it (cargo xtask trace makes Perfetto JSON)
  sleep MS                        pause for MS milliseconds (Ctrl-C ends it)
  run /DIR/PROG [ARGS]            run a program from the disk (an ELF file; a name not in
                                  the boot archive is looked for on the disk too)
  source FILE                     run the shell commands of FILE (on the disk)
  ls [DIR]                        files on the disk (8.3 names; the file service starts
                                  at boot when a disk is attached: user/boot.cfg)
  cat FILE                        print FILE
  write FILE TEXT                 FILE holds TEXT and a newline
  cp FROM TO                      copy a file
  rm NAME                         delete a file or an empty directory
  mkdir DIR                       make a directory
  uptime                          time since boot
  res ls [CORE]                   resources of CORE (default this one): id, type, name,
                                  creator, rights, size, detail
  res open NAME [ARG...] [-r RIGHTS]
                                  create resource NAME (LOCATION/TYPE/NAME, e.g.
                                  here/vregion/buf0 or c1/vregion/buf1) and print its id;
                                  ARG by type: vregion SIZE (4096, 4K, 1M), vspace [PID]
                                  (default this shell), process PROGRAM [ARGS...]
                                  (created stopped), compute MIPS (1-10000), pipe
                                  [CAPACITY] (default 4096 bytes); RIGHTS e.g.
                                  rwcx/r--- (creator's read/write/close/control, then
                                  everyone else's; default rwcx/----)
  res close RES                   delete RES; RES is an id (c0:vregion:3.1 or 0x...) or
                                  a name (here/vregion/buf0), of any core
  res info RES                    what the kernel records about RES
  res read RES [LEN] [OFFSET]     vregion: dump LEN bytes (at most 256) at OFFSET;
                                  vspace: its attachments; process: its state
  res write VREGION OFFSET TEXT   write TEXT into VREGION at OFFSET
  res bind COMPUTE PID|PROCESS    run a process on COMPUTE (reaped like a job)
  res unbind COMPUTE              stop COMPUTE's process (it keeps its state)
  res kill PROCESS                end the process of a process resource
  res ls mK[.cC]                  the resources of core C (default 0) of machine K
  res open|close|info|read|write|bind|unbind|kill mK.RES ...
                                  the same on machine K's resource (a name there, e.g.
                                  m1.c0/pipe/p, or its id, m1.c0:pipe:3.1); vregions,
                                  pipes, semaphores, computes and processes are opened
                                  there; res bind mK.COMPUTE mK.PROCESS runs the
                                  process there as a job (its output on K's console)
  su [USER]                       act as USER (a number) for the resource rights, or
                                  without USER as the user the shell started as
  whoami                          the user this shell acts as
  fn ls                           registered functions (function ids): id, name,
                                  server pid, core, server generation, requests served,
                                  state ICA, up or down, user
  fn wait NAME                    wait until a server registers function NAME
  fn kill NAME                    kill NAME's server as a crash would; reports the
                                  restart (FN_RESTART) or that NAME is down
  replace NAME PROG [ARGS] [-c CORE]
                                  replace NAME's server while it serves: starts
                                  PROG takeover ARGS (a job) at background
                                  priority, so it prepares on what the old server
                                  and its clients leave; taking over gives it the
                                  old server's priority. Reports the switch and how
                                  long it took
  net                             netd's address, MAC and counters (frames, datagrams,
                                  drops, errors)
  net up [ADDR/PREFIX GATEWAY] [-c CORE]
                                  start netd (DHCP, or the address given) as a job (on
                                  CORE) and wait for an address; the driver netdrv is a
                                  boot program (driver=CORE:netdrv)
  machines                        the machines of this system (cargo xtask run
                                  --machines N): address, up/down, epoch, last heard;
                                  machines wait: until every one is up
  mping M [N]                     N null round trips to machine M through machd
  run PROG [ARGS] -m M [-c CORE] [&]
                                  run PROG on machine M as this shell's user (its
                                  output here; with & on M's console); wait mM.cC.S,
                                  kill mM.cC.S (process C.S of machine M)
  ps -a                           the processes of every machine
  mcount M N                      N requests to machine M that each add one to a
                                  counter there: checks each was performed once
  mcall M NAME LABEL [W..] [-d T] a request to function NAME on machine M, as this
                                  shell's user (T in an ICA there; what comes back)
  net crash                       make the driver crash (netdrv crashable) and report
                                  its restart (driver=0:netdrv,restart=N,crashable)
  exit                            end this shell (once no job runs); the kernel starts
                                  a new one
  poweroff                        switch the machine off";

/// A program started with `&`.
struct Job {
    /// The pid it was started with: `WAIT` names it so, wherever it moved.
    pid: Pid,
    /// Its pid since this shell last moved it (`migrate`), `pid` if it did not.
    now: Pid,
    name: String,
    /// Ended by this shell's `kill`, so its death is not an error.
    killed: bool,
}

impl Job {
    fn new(pid: Pid, name: &str) -> Self {
        Job {
            pid,
            now: pid,
            name: name.into(),
            killed: false,
        }
    }

    fn is(&self, pid: Pid) -> bool {
        self.pid == pid || self.now == pid
    }
}

struct Shell {
    me: Pid,
    /// The core the shell runs on (`here` in resource names).
    core: usize,
    /// The user the shell started as, which a bare `su` goes back to.
    first_user: Option<UserId>,
    jobs: Vec<Job>,
    /// Processes this shell ended that were not its jobs under that pid (e.g. a child that
    /// moved itself to another core): their end is not an error either.
    killed: Vec<Pid>,
    /// What was typed while a foreground program ran (other than Ctrl-C): the next
    /// prompt's input, as a terminal keeps it.
    typeahead: Vec<u8>,
    /// `exit` was typed: end after this command.
    exit: bool,
    /// How many `source` files are being read now (nested), bounded.
    sourcing: usize,
    /// Programs started on other machines with `&` (`run ... -m M &`).
    remote_jobs: Vec<machines::RemoteJob>,
    /// Resources of other machines this shell opened (`res open mK:...`), with the life of
    /// their machine.
    remote_ids: Vec<ulib::mach::RemoteRes>,
}

fn main(_args: &[&str]) -> i32 {
    let me = sys::getpid().unwrap_or(Pid(0));
    let core = sys::core().unwrap_or(0);
    println!("Musubi shell (pid {me} on core {core}); type 'help' for the commands");
    let mut shell = Shell {
        me,
        core,
        first_user: ulib::res::getuser().ok(),
        jobs: Vec::new(),
        killed: Vec::new(),
        typeahead: Vec::new(),
        exit: false,
        sourcing: 0,
        remote_jobs: Vec::new(),
        remote_ids: Vec::new(),
    };
    let mut started = Vec::new();
    net::auto_up(&mut started);
    for (pid, name) in started {
        shell.jobs.push(Job::new(pid, name));
    }
    let mut editor = editor::Editor::new();
    loop {
        shell.reap();
        print!("{PROMPT}");
        editor.type_ahead(&core::mem::take(&mut shell.typeahead));
        let line = match editor.read_line() {
            Ok(line) => line,
            Err(e) => {
                println!("error: shell: cannot read the console: {e}");
                return 1;
            }
        };
        // What was typed behind this line belongs to the next prompt, or to the program
        // this line runs (its Ctrl-C).
        shell.typeahead = editor.take_unread();
        if let Err(msg) = shell.execute(&line) {
            println!("error: {msg}");
        }
        if shell.exit {
            return 0;
        }
    }
}

impl Shell {
    /// Run one command line; `Err` is the text of the one error line.
    fn execute(&mut self, line: &str) -> Result<(), String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&cmd, args)) = words.split_first() else {
            return Ok(());
        };
        let no_args = |cmd: &str| match args.is_empty() {
            true => Ok(()),
            false => Err(format!("{cmd}: takes no arguments")),
        };
        match cmd {
            "help" => {
                no_args(cmd)?;
                println!("{HELP}");
                Ok(())
            }
            "ps" if args == ["-a"] => machines::ps_all(),
            "ps" => no_args(cmd).and_then(|_| ps()),
            "machines" if args == ["wait"] => machines::wait_up(),
            "machines" => no_args(cmd).and_then(|_| machines::list()),
            "mping" => machines::mping(args),
            "mcount" => machines::mcount(args),
            "mcall" => machines::mcall(args),
            "run" if args.contains(&"-m") && !args.contains(&"|") => {
                if let Some(job) = machines::run(args, &mut self.typeahead)? {
                    self.remote_jobs.push(job);
                }
                Ok(())
            }
            // Another machine's process (`m1.c2.5`; on machine 1, machine 0's `0.4` too): a
            // remote job's. This machine's, in either spelling, is waited for or killed here.
            "wait" | "kill"
                if args.len() == 1
                    && machines::parse_remote(args[0])
                        .is_some_and(|(m, _)| m != self.me.machine()) =>
            {
                machines::wait_or_kill(cmd, args[0], &mut self.remote_jobs, &mut self.typeahead)
            }
            "cores" => no_args(cmd).and_then(|_| cores::cores()),
            "mem" => no_args(cmd).and_then(|_| cores::mem()),
            "run" if words.iter().any(|w| pipes::is_redirection(w)) => {
                pipes::redirected(&words[1..], &mut self.typeahead)
            }
            "run" if words.contains(&"|") => pipes::pipeline(&words[1..], &mut self.typeahead),
            "run" => self.run(args),
            "remote" => pipes::remote(args, &mut self.typeahead),
            "source" => self.source(args),
            "kill" => self.kill(args),
            "jobs" => no_args(cmd).map(|_| self.list_jobs()),
            "wait" => self.wait(args),
            "migrate" => self.migrate(args),
            "rpcc" => no_args(cmd).and_then(|_| cores::rpcc()),
            "modes" => no_args(cmd).and_then(|_| cores::modes()),
            "trace" => cores::trace(args),
            "sleep" => sleep(args, &mut self.typeahead),
            "uptime" => {
                no_args(cmd)?;
                let ns = sys::clock_ns().map_err(|e| format!("uptime: {e}"))?;
                println!("up {}.{:03} s", ns / 1_000_000_000, ns / 1_000_000 % 1000);
                Ok(())
            }
            "res" => self.res(args),
            "su" => self.su(args),
            "whoami" => no_args(cmd).and_then(|_| res::whoami()),
            "fn" => match args {
                ["kill", name] => {
                    let pid = fns::kill(name)?;
                    self.mark_killed(pid);
                    Ok(())
                }
                _ => fns::command(args),
            },
            "net" => match args.first() {
                None => net::show(),
                Some(&"crash") if args.len() == 1 => net::crash(),
                Some(&"up") => {
                    let mut started = Vec::new();
                    let r = net::up(&args[1..], &mut started);
                    for (pid, name) in started {
                        self.jobs.push(Job::new(pid, name));
                    }
                    r
                }
                Some(_) => Err(String::from(
                    "net: usage: net [up [ADDR/PREFIX GATEWAY] [-c CORE]]",
                )),
            },
            "pci" => no_args(cmd).and_then(|_| cores::pci()),
            "ls" => files::ls(args),
            "cat" => files::cat(args),
            "write" => files::write(args),
            "cp" => files::cp(args),
            "rm" => files::rm(args),
            "mkdir" => files::mkdir(args),
            "replace" => {
                let pid = fns::replace(args)?;
                self.jobs
                    .push(Job::new(pid, args.get(1).copied().unwrap_or("?")));
                Ok(())
            }
            "exit" => {
                no_args(cmd)?;
                // Its jobs would become the kernel's, which no later shell may kill.
                self.reap();
                if !self.jobs.is_empty() {
                    let pids: Vec<String> =
                        self.jobs.iter().map(|j| format!("{}", j.pid)).collect();
                    return Err(format!(
                        "exit: jobs still run ({}); kill them first",
                        pids.join(", ")
                    ));
                }
                self.exit = true;
                Ok(())
            }
            "poweroff" => {
                no_args(cmd)?;
                Err(format!("poweroff: {}", sys::poweroff()))
            }
            other => Err(format!("unknown command '{other}' (try 'help')")),
        }
    }

    /// `run PROG [ARGS...] [-p PRIO] [-c CORE] [&]` (the options may also come right after
    /// `run`, in either order).
    fn run(&mut self, args: &[&str]) -> Result<(), String> {
        let (stage, background) = parse_run(args)?;
        let (prog, prog_args, priority, core) =
            (stage.prog, &stage.args[..], stage.priority, stage.core);
        // A path (`/BIN/PROG`) is read from the disk; a name is looked up in the boot
        // archive first, then on the disk.
        let from_archive = if prog.starts_with('/') {
            Err(ulib::abi::Error::NoSuchProgram)
        } else {
            match core {
                None => sys::spawn(prog, prog_args, priority),
                Some(core) => sys::spawn_on(prog, prog_args, priority, core),
            }
        };
        let pid = match from_archive {
            Ok(pid) => pid,
            Err(ulib::abi::Error::NoSuchProgram)
                if prog.starts_with('/') || files::on_disk(prog) =>
            {
                files::spawn(prog, prog_args, priority, core)?
            }
            Err(e) => {
                return Err(match core {
                    None => format!("run: {e}: {prog}"),
                    Some(core) => format!("run: {e}: {prog} on core {core}"),
                })
            }
        };
        if background {
            println!("[{pid}]");
            self.jobs.push(Job::new(pid, prog));
            return Ok(());
        }
        let status = wait_foreground(pid, &mut self.typeahead)?;
        match failure(&status) {
            None => Ok(()),
            Some(why) => Err(format!("{prog} ({pid}) {why}")),
        }
    }

    /// `source FILE`: run the commands of FILE, a text file on the disk (one a line; blank
    /// lines and `#` comments skipped), each echoed as `FILE> COMMAND`; the first that fails
    /// ends it with that error (as `sh -e` does). Files may source files, 4 deep at most.
    fn source(&mut self, args: &[&str]) -> Result<(), String> {
        const DEPTH: usize = 4;
        let [name] = args else {
            return Err("source: usage: source FILE".into());
        };
        if self.sourcing >= DEPTH {
            return Err(format!(
                "source {name}: files source each other more than {DEPTH} deep"
            ));
        }
        let text = files::read_text(name)?;
        self.sourcing += 1;
        let mut result = Ok(());
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            println!("{name}> {line}");
            if let Err(e) = self.execute(line) {
                result = Err(format!("source {name} line {}: {e}", n + 1));
                break;
            }
            if self.exit {
                break;
            }
        }
        self.sourcing -= 1;
        result
    }

    fn kill(&mut self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("kill: usage: kill PID (e.g. kill 0.3)".into());
        };
        // Any spelling (`0.3`, `m1.c0.3`, `m1:0.3`): one of this machine's comes here.
        let pid = machines::parse_remote(word)
            .map(|(_, pid)| pid)
            .ok_or_else(|| format!("kill: bad pid '{word}' (expected CORE.SERIAL, e.g. 0.3)"))?;
        if pid == self.me {
            return Err(format!(
                "kill: {pid} is this shell; use poweroff to stop the machine"
            ));
        }
        sys::kill(pid).map_err(|e| format!("kill {pid}: {e}"))?;
        self.mark_killed(pid);
        Ok(())
    }

    /// A process this shell ended on purpose: its end is not reported as an error.
    fn mark_killed(&mut self, pid: Pid) {
        match self.jobs.iter_mut().find(|j| j.is(pid)) {
            Some(job) => job.killed = true,
            None => self.killed.push(pid),
        }
    }

    /// Wait for the children that have ended (zombies in `PROCESSES`) and report the jobs.
    fn reap(&mut self) {
        if self.jobs.is_empty() && self.killed.is_empty() {
            return;
        }
        let Ok(procs) = processes() else {
            return;
        };
        // Zombies are listed under the pids they have now; WAIT for any child reports each
        // under the pid it was started with, the one a job is known by. It does not block:
        // a child is collected only once its parent has heard of all its moves (the next
        // prompt collects one still on its way).
        let zombies = procs
            .iter()
            .filter(|p| p.parent == self.me && p.state == abi::STATE_ZOMBIE)
            .count();
        for _ in 0..zombies {
            let Ok((pid, status)) = sys::wait_timeout(None, 0) else {
                break;
            };
            let name = procs.iter().find(|p| p.pid == pid).map_or("", |p| p.name());
            self.report(pid, &status, name);
        }
        // A job not listed under its pid moved (and runs on under another) or is gone.
        let unlisted: Vec<Pid> = self
            .jobs
            .iter()
            .map(|j| j.pid)
            .filter(|&pid| procs.iter().all(|p| p.pid != pid))
            .collect();
        for pid in unlisted {
            match sys::wait_timeout(Some(pid), 0) {
                Ok((_, status)) => self.report(pid, &status, ""),
                Err(Error::TimedOut) => {}
                Err(_) => self.jobs.retain(|j| j.pid != pid),
            }
        }
        // Killed processes the kernel no longer lists are gone; forget them.
        self.killed.retain(|k| procs.iter().any(|p| p.pid == *k));
    }

    /// Report the end of child `pid` (a job's pid, or `name` for another child).
    fn report(&mut self, pid: Pid, status: &WaitStatus, name: &str) {
        let job = self.jobs.iter().position(|j| j.pid == pid);
        let job = job.map(|i| self.jobs.swap_remove(i));
        let name = job.as_ref().map_or(name, |j| j.name.as_str());
        let stray = self.killed.iter().position(|k| *k == pid);
        let stray = stray.map(|i| self.killed.swap_remove(i)).is_some();
        let killed_by_us = stray || job.as_ref().is_some_and(|j| j.killed);
        match failure(status) {
            None => println!("[{pid}] done"),
            Some(_) if killed_by_us && status.how == abi::ENDED_KILLED => {
                println!("[{pid}] killed")
            }
            Some(why) => println!("error: [{pid}] {name} {why}"),
        }
    }

    /// `jobs`: the background programs that have not ended (after reaping those that did).
    fn list_jobs(&mut self) {
        self.reap();
        if self.jobs.is_empty() {
            println!("no jobs");
        }
        for j in &self.jobs {
            match j.now == j.pid {
                true => println!("[{}] {}", j.pid, j.name),
                false => println!("[{}] {} (now {})", j.pid, j.name, j.now),
            }
        }
    }

    /// `wait [PID]`: wait for job PID, or every job, to end, and report it. Ctrl-C stops
    /// waiting; the jobs run on.
    fn wait(&mut self, args: &[&str]) -> Result<(), String> {
        const CTRL_C: u8 = 0x03;
        if args.is_empty() {
            // Jobs on other machines first (their waits end by themselves: the machine
            // answers, or is found down).
            if !machines::wait_all(&mut self.remote_jobs, &mut self.typeahead)? {
                return Ok(());
            }
        }
        let pids: Vec<Pid> = match args {
            [] => self.jobs.iter().map(|j| j.pid).collect(),
            [word] => {
                let pid = machines::parse_remote(word)
                    .map(|(_, pid)| pid)
                    .ok_or_else(|| {
                        format!("wait: bad pid '{word}' (expected CORE.SERIAL, e.g. 0.3)")
                    })?;
                let job = self.jobs.iter().find(|j| j.is(pid));
                alloc::vec![job.ok_or_else(|| format!("wait: {pid} is not a job"))?.pid]
            }
            _ => return Err("wait: usage: wait [PID]".into()),
        };
        // A Ctrl-C typed behind the command line (read with it) stops the wait at once.
        if self.typeahead.contains(&CTRL_C) {
            self.typeahead.retain(|&b| b != CTRL_C);
            println!("^C");
            return Ok(());
        }
        for pid in pids {
            loop {
                match sys::wait_timeout(Some(pid), 100_000_000) {
                    Ok((_, status)) => {
                        self.report(pid, &status, "");
                        break;
                    }
                    Err(Error::TimedOut) => {}
                    Err(e) => {
                        self.jobs.retain(|j| j.pid != pid);
                        return Err(format!("wait: {pid}: {e}"));
                    }
                }
                let mut input = [0u8; 64];
                let n = sys::read_nonblocking(&mut input).unwrap_or(0);
                self.typeahead
                    .extend(input[..n].iter().filter(|&&b| b != CTRL_C));
                if input[..n].contains(&CTRL_C) {
                    println!("^C");
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// One program to start: `run`'s words parsed.
pub struct Stage<'a> {
    pub prog: &'a str,
    pub args: Vec<&'a str>,
    pub priority: Priority,
    pub core: Option<usize>,
}

/// `run`'s words (`PROG [ARGS...] [-p PRIO] [-c CORE] [&]`, the options also right after
/// `run`): the program to start, and whether in the background.
pub fn parse_run<'a>(args: &[&'a str]) -> Result<(Stage<'a>, bool), String> {
    const USAGE: &str = "run: usage: run PROG [ARGS...] [-p PRIO] [-c CORE] [&]";
    let mut args: Vec<&str> = args.to_vec();
    let mut background = false;
    if let Some(last) = args.pop() {
        match last.strip_suffix('&') {
            Some("") => background = true,
            Some(rest) => {
                background = true;
                args.push(rest);
            }
            None => args.push(last),
        }
    }
    if let Some(flag) = args.last().filter(|w| **w == "-p" || **w == "-c") {
        return Err(format!("run: {flag} needs a value ({USAGE})"));
    }
    let (mut priority, mut core) = (None, None);
    while let Some((flag, value, at)) = run_option(&args) {
        let duplicate = || format!("run: {flag} given twice");
        match flag {
            "-p" => {
                let p = Priority::parse(value).ok_or_else(|| {
                    format!("run: bad priority '{value}' (driver, server, app, background or 0-3)")
                })?;
                priority.replace(p).map_or(Ok(()), |_| Err(duplicate()))?;
            }
            _ => {
                let c = cores::parse_core(value)
                    .ok_or_else(|| format!("run: bad core '{value}' (a number, e.g. 1)"))?;
                core.replace(c).map_or(Ok(()), |_| Err(duplicate()))?;
            }
        }
        args.drain(at..at + 2);
    }
    let Some((&prog, prog_args)) = args.split_first() else {
        return Err(USAGE.into());
    };
    let stage = Stage {
        prog,
        args: prog_args.to_vec(),
        priority: priority.unwrap_or(Priority::App),
        core,
    };
    Ok((stage, background))
}

/// The next `-p VALUE` or `-c VALUE` of `run`'s words: right after `run` or at the end
/// (after the program's arguments). Returns the flag, its value and where the pair starts.
fn run_option<'a>(args: &[&'a str]) -> Option<(&'a str, &'a str, usize)> {
    let is_flag = |w: &str| w == "-p" || w == "-c";
    let n = args.len();
    if n >= 2 && is_flag(args[0]) {
        return Some((args[0], args[1], 0));
    }
    (n >= 2 && is_flag(args[n - 2])).then(|| (args[n - 2], args[n - 1], n - 2))
}

/// Why a child's end counts as a failure, or `None` for exit status 0.
pub fn failure(st: &WaitStatus) -> Option<String> {
    match st.how {
        abi::ENDED_EXIT if st.code == 0 => None,
        abi::ENDED_EXIT => Some(format!("exited with status {}", st.code as u32 as i32)),
        abi::ENDED_FAULT if st.code == 14 => Some(format!(
            "faulted: page fault at {:#x} (rip {:#x})",
            st.address, st.rip
        )),
        abi::ENDED_FAULT => Some(format!(
            "faulted: {} at rip {:#x}",
            vector_name(st.code),
            st.rip
        )),
        abi::ENDED_KILLED => Some("was killed".into()),
        abi::ENDED_MOVED_AWAY => Some(format!(
            "moved to machine {} as {}",
            st.address,
            Pid(st.code)
        )),
        other => Some(format!("ended in an unknown way ({other})")),
    }
}

fn vector_name(v: u64) -> &'static str {
    match v {
        0 => "divide error",
        1 => "debug exception",
        3 => "breakpoint",
        4 => "overflow",
        5 => "bound range exceeded",
        6 => "invalid opcode",
        7 => "device not available",
        8 => "double fault",
        10 => "invalid TSS",
        11 => "segment not present",
        12 => "stack-segment fault",
        13 => "general protection fault",
        14 => "page fault",
        16 => "x87 floating-point error",
        17 => "alignment check",
        18 => "machine check",
        19 => "SIMD floating-point error",
        20 => "virtualization exception",
        21 => "control protection fault",
        _ => "exception",
    }
}

/// Every process, however many there are.
pub(crate) fn processes() -> Result<Vec<ProcInfo>, Error> {
    let mut cap = 64;
    loop {
        let mut buf = alloc::vec![ProcInfo::EMPTY; cap];
        let n = sys::processes(&mut buf)?;
        if n < cap || cap >= 1 << 16 {
            buf.truncate(n);
            return Ok(buf);
        }
        cap *= 4;
    }
}

fn ps() -> Result<(), String> {
    let mut procs = processes().map_err(|e| format!("ps: {e}"))?;
    procs.sort_by_key(|p| (p.core, p.pid));
    println!(
        "{:<9} {:<5} {:<9} {:<7} {:>10}  {:>9}  PROGRAM",
        "PID", "CORE", "STATE", "PRIO", "CPU(s)", "MEM(KiB)"
    );
    for p in &procs {
        let prio = Priority::from_u64(p.priority as u64).map_or("?", Priority::name);
        let pid = format!("{}", p.pid);
        println!(
            "{pid:<9} {:<5} {:<9} {:<7} {:>6}.{:03}  {:>9}  {}",
            p.core,
            abi::state_name(p.state),
            prio,
            p.cpu_ns / 1_000_000_000,
            p.cpu_ns / 1_000_000 % 1000,
            p.memory / 1024,
            p.name()
        );
    }
    Ok(())
}

/// `sleep MS`: in slices of at most 100 ms, watching the console for Ctrl-C, which ends it
/// (a review found a long sleep took the console for good); other bytes typed meanwhile
/// are kept for the next prompt.
fn sleep(args: &[&str], typeahead: &mut Vec<u8>) -> Result<(), String> {
    const CTRL_C: u8 = 0x03;
    const SLICE_NS: u64 = 100_000_000;
    let ms = match args {
        [ms] => ms.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or("sleep: usage: sleep MS (milliseconds)")?;
    let start = sys::clock_ns().map_err(|e| format!("sleep: {e}"))?;
    let end = start.saturating_add(ms.saturating_mul(1_000_000));
    loop {
        if typeahead.contains(&CTRL_C) {
            typeahead.retain(|&b| b != CTRL_C);
            println!("^C");
            return Err(String::from("sleep: interrupted"));
        }
        let now = sys::clock_ns().map_err(|e| format!("sleep: {e}"))?;
        if now >= end {
            return Ok(());
        }
        sys::sleep_ns((end - now).min(SLICE_NS)).map_err(|e| format!("sleep: {e}"))?;
        let mut input = [0u8; 64];
        let n = sys::read_nonblocking(&mut input).unwrap_or(0);
        typeahead.extend_from_slice(&input[..n]);
    }
}

/// Wait for a foreground child, watching the console for Ctrl-C (which kills the child).
/// Programs that read the console themselves should be run with `&`: while a foreground
/// job runs, the shell takes the console's input to look for Ctrl-C, and keeps every other
/// byte in `typeahead` for the next prompt.
pub fn wait_foreground(pid: Pid, typeahead: &mut Vec<u8>) -> Result<WaitStatus, String> {
    const CTRL_C: u8 = 0x03;
    // A Ctrl-C typed behind the command line (read with it) counts as typed now.
    let mut interrupt = typeahead.contains(&CTRL_C);
    typeahead.retain(|&b| b != CTRL_C);
    loop {
        if core::mem::take(&mut interrupt) {
            println!("^C");
            // It may have ended meanwhile: the wait below collects it either way.
            let _ = sys::kill(pid);
        }
        match sys::wait_timeout(Some(pid), 100_000_000) {
            Ok((_, status)) => return Ok(status),
            Err(abi::Error::TimedOut) => {}
            Err(e) => return Err(format!("run: waiting for {pid}: {e}")),
        }
        let mut input = [0u8; 64];
        let n = sys::read_nonblocking(&mut input).unwrap_or(0);
        typeahead.extend(input[..n].iter().filter(|&&b| b != CTRL_C));
        interrupt = input[..n].contains(&CTRL_C);
    }
}
