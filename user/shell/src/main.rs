//! `shell`: Musubi's command shell, started by the kernel on core 0 at boot.
//!
//! It prints the prompt `musubi> `, edits the line as it is typed (echo, backspace, Ctrl-U
//! clears the line, Ctrl-W erases a word, Ctrl-C abandons it; escape sequences such as the
//! arrow keys are ignored) and runs it on Enter (`\r` from a terminal, `\n` from a pipe).
//! Console input comes from `CONSOLE_READ`, which only core 0 may use.
//!
//! Every command that fails prints exactly one line starting with `error: ` (the prefix
//! `cargo xtask run --script` looks for), and a command that succeeds never prints one.
//! Background programs (`run PROG &`) are reaped before each prompt: the shell looks for
//! its zombie children in `PROCESSES` (`WAIT` blocks, so it waits only for children it
//! knows have ended) and reports `[pid] done` or an error line; so is a process started
//! by `res bind`. The resource commands (`res ...`, `su`, `whoami`) are in [`res`].
#![no_std]
#![no_main]

extern crate alloc;

mod editor;
mod res;

use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::UserId;
use ulib::abi::{self, CoreInfo, Error, Pid, Priority, ProcInfo, WaitStatus};
use ulib::{print, println, sys};

ulib::main!(main);

const PROMPT: &str = "musubi> ";

const HELP: &str = "\
commands:
  help                            this list
  ps                              processes: pid, core, state, priority, cpu time, memory
  cores                           cores: load since boot, free frames, processes, IPIs
  mem                             free and total memory per core
  run PROG [ARGS...] [-p PRIO] [&]
                                  start PROG (PRIO: driver, server, app or 0-2; default
                                  app); wait for it, or with & run it in the background
  kill PID                        end process PID (written CORE.SERIAL, e.g. 0.3)
  sleep MS                        pause for MS milliseconds
  uptime                          time since boot
  res ls [CORE]                   resources of CORE (default this one): id, type, name,
                                  creator, rights, size, detail
  res open NAME [ARG...] [-r RIGHTS]
                                  create resource NAME (LOCATION/TYPE/NAME, e.g.
                                  here/vregion/buf0) and print its id; ARG by type:
                                  vregion SIZE (4096, 4K, 1M), vspace [PID] (default
                                  this shell), process PROGRAM [ARGS...] (created
                                  stopped), compute MIPS (1-10000); RIGHTS e.g. rwcx/r---
                                  (creator's read/write/close/control, then everyone
                                  else's; default rwcx/----)
  res close RES                   delete RES; RES is an id (c0:vregion:3.1 or 0x...) or
                                  a name (here/vregion/buf0)
  res info RES                    what the kernel records about RES
  res read RES [LEN] [OFFSET]     vregion: dump LEN bytes (at most 256) at OFFSET;
                                  vspace: its attachments; process: its state
  res write VREGION OFFSET TEXT   write TEXT into VREGION at OFFSET
  res bind COMPUTE PID|PROCESS    run a process on COMPUTE (reaped like a job)
  res unbind COMPUTE              stop COMPUTE's process (it keeps its state)
  res kill PROCESS                end the process of a process resource
  su [USER]                       act as USER (a number) for the resource rights, or
                                  without USER as the user the shell started as
  whoami                          the user this shell acts as
  poweroff                        switch the machine off";

/// A program started with `&`.
struct Job {
    pid: Pid,
    name: String,
    /// Ended by this shell's `kill`, so its death is not an error.
    killed: bool,
}

struct Shell {
    me: Pid,
    /// The core the shell runs on (`here` in resource names).
    core: usize,
    /// The user the shell started as, which a bare `su` goes back to.
    first_user: Option<UserId>,
    jobs: Vec<Job>,
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
    };
    let mut editor = editor::Editor::new();
    loop {
        shell.reap();
        print!("{PROMPT}");
        let line = match editor.read_line() {
            Ok(line) => line,
            Err(e) => {
                println!("error: shell: cannot read the console: {e}");
                return 1;
            }
        };
        if let Err(msg) = shell.execute(&line) {
            println!("error: {msg}");
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
            false => Err(alloc::format!("{cmd}: takes no arguments")),
        };
        match cmd {
            "help" => {
                no_args(cmd)?;
                println!("{HELP}");
                Ok(())
            }
            "ps" => no_args(cmd).and_then(|_| ps()),
            "cores" => no_args(cmd).and_then(|_| cores()),
            "mem" => no_args(cmd).and_then(|_| mem()),
            "run" => self.run(args),
            "kill" => self.kill(args),
            "sleep" => sleep(args),
            "uptime" => {
                no_args(cmd)?;
                let ns = sys::clock_ns().map_err(|e| alloc::format!("uptime: {e}"))?;
                println!("up {}.{:03} s", ns / 1_000_000_000, ns / 1_000_000 % 1000);
                Ok(())
            }
            "res" => self.res(args),
            "su" => self.su(args),
            "whoami" => no_args(cmd).and_then(|_| res::whoami()),
            "poweroff" => {
                no_args(cmd)?;
                Err(alloc::format!("poweroff: {}", sys::poweroff()))
            }
            other => Err(alloc::format!("unknown command '{other}' (try 'help')")),
        }
    }

    /// `run PROG [ARGS...] [-p PRIO] [&]` (`-p PRIO` may also come right after `run`).
    fn run(&mut self, args: &[&str]) -> Result<(), String> {
        const USAGE: &str = "run: usage: run PROG [ARGS...] [-p PRIO] [&]";
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
        let mut priority = Priority::App;
        let n = args.len();
        let at = if n >= 2 && args[n - 2] == "-p" {
            Some(n - 2)
        } else if n >= 2 && args[0] == "-p" {
            Some(0)
        } else {
            None
        };
        if let Some(at) = at {
            let word = args[at + 1];
            priority = Priority::parse(word).ok_or_else(|| {
                alloc::format!("run: bad priority '{word}' (driver, server, app or 0-2)")
            })?;
            args.drain(at..at + 2);
        }
        let Some((&prog, prog_args)) = args.split_first() else {
            return Err(USAGE.into());
        };
        let pid = sys::spawn(prog, prog_args, priority)
            .map_err(|e| alloc::format!("run: {e}: {prog}"))?;
        if background {
            println!("[{pid}]");
            self.jobs.push(Job {
                pid,
                name: prog.into(),
                killed: false,
            });
            return Ok(());
        }
        let status = wait_foreground(pid)?;
        match failure(&status) {
            None => Ok(()),
            Some(why) => Err(alloc::format!("{prog} ({pid}) {why}")),
        }
    }

    fn kill(&mut self, args: &[&str]) -> Result<(), String> {
        let [word] = args else {
            return Err("kill: usage: kill PID (e.g. kill 0.3)".into());
        };
        let pid = Pid::parse(word).ok_or_else(|| {
            alloc::format!("kill: bad pid '{word}' (expected CORE.SERIAL, e.g. 0.3)")
        })?;
        sys::kill(pid).map_err(|e| alloc::format!("kill {pid}: {e}"))?;
        if let Some(job) = self.jobs.iter_mut().find(|j| j.pid == pid) {
            job.killed = true;
        }
        Ok(())
    }

    /// Wait for the children that have ended (zombies in `PROCESSES`) and report the jobs.
    fn reap(&mut self) {
        if self.jobs.is_empty() {
            return;
        }
        let Ok(procs) = processes() else {
            return;
        };
        for p in procs.iter().filter(|p| p.parent == self.me) {
            if p.state != abi::STATE_ZOMBIE {
                continue;
            }
            let Ok((pid, status)) = sys::wait(Some(p.pid)) else {
                continue;
            };
            let job = self.jobs.iter().position(|j| j.pid == pid);
            let job = job.map(|i| self.jobs.swap_remove(i));
            let name = job.as_ref().map_or(p.name(), |j| j.name.as_str());
            let killed_by_us = job.as_ref().is_some_and(|j| j.killed);
            match failure(&status) {
                None => println!("[{pid}] done"),
                Some(_) if killed_by_us && status.how == abi::ENDED_KILLED => {
                    println!("[{pid}] killed")
                }
                Some(why) => println!("error: [{pid}] {name} {why}"),
            }
        }
        // Jobs the kernel no longer lists are gone; forget them.
        self.jobs.retain(|j| procs.iter().any(|p| p.pid == j.pid));
    }
}

/// Why a child's end counts as a failure, or `None` for exit status 0.
fn failure(st: &WaitStatus) -> Option<String> {
    match st.how {
        abi::ENDED_EXIT if st.code == 0 => None,
        abi::ENDED_EXIT => Some(alloc::format!(
            "exited with status {}",
            st.code as u32 as i32
        )),
        abi::ENDED_FAULT if st.code == 14 => Some(alloc::format!(
            "faulted: page fault at {:#x} (rip {:#x})",
            st.address,
            st.rip
        )),
        abi::ENDED_FAULT => Some(alloc::format!(
            "faulted: {} at rip {:#x}",
            vector_name(st.code),
            st.rip
        )),
        abi::ENDED_KILLED => Some("was killed".into()),
        other => Some(alloc::format!("ended in an unknown way ({other})")),
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
fn processes() -> Result<Vec<ProcInfo>, Error> {
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

fn core_infos() -> Result<Vec<CoreInfo>, Error> {
    let mut buf = alloc::vec![CoreInfo::default(); abi::MAX_CORES];
    let n = sys::cores(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

fn ps() -> Result<(), String> {
    let procs = processes().map_err(|e| alloc::format!("ps: {e}"))?;
    println!(
        "{:<9} {:<5} {:<9} {:<7} {:>10}  {:>9}  PROGRAM",
        "PID", "CORE", "STATE", "PRIO", "CPU(s)", "MEM(KiB)"
    );
    for p in &procs {
        let prio = Priority::from_u64(p.priority as u64).map_or("?", Priority::name);
        let pid = alloc::format!("{}", p.pid);
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

fn cores() -> Result<(), String> {
    let infos = core_infos().map_err(|e| alloc::format!("cores: {e}"))?;
    println!("CORE  ONLINE  LOAD  FRAMES FREE/TOTAL  PROCS  IPIS");
    for c in &infos {
        let busy = c.ticks.saturating_sub(c.idle_ticks);
        let load = (busy * 100).checked_div(c.ticks).unwrap_or(0);
        let frames = alloc::format!("{}/{}", c.frames_free, c.frames_total);
        println!(
            "{:<5} {:<7} {:>3}%  {:<18} {:<6} {}",
            c.core,
            if c.online != 0 { "yes" } else { "no" },
            load,
            frames,
            c.processes,
            c.ipis
        );
    }
    Ok(())
}

/// Frames (4 KiB) as MiB with one decimal.
fn mib(frames: u64) -> String {
    let tenths = frames * 10 / 256;
    alloc::format!("{}.{}", tenths / 10, tenths % 10)
}

fn mem() -> Result<(), String> {
    let infos = core_infos().map_err(|e| alloc::format!("mem: {e}"))?;
    println!("CORE   FREE MiB  TOTAL MiB");
    let (mut free, mut total) = (0, 0);
    for c in &infos {
        free += c.frames_free;
        total += c.frames_total;
        println!(
            "{:<5} {:>9}  {:>9}",
            c.core,
            mib(c.frames_free),
            mib(c.frames_total)
        );
    }
    println!("total {:>9}  {:>9}", mib(free), mib(total));
    Ok(())
}

fn sleep(args: &[&str]) -> Result<(), String> {
    let ms = match args {
        [ms] => ms.parse::<u64>().ok(),
        _ => None,
    }
    .ok_or("sleep: usage: sleep MS (milliseconds)")?;
    sys::sleep_ns(ms.saturating_mul(1_000_000)).map_err(|e| alloc::format!("sleep: {e}"))
}

/// Wait for a foreground child, watching the console for Ctrl-C (which kills the child).
/// Programs that read the console themselves should be run with `&`: while a foreground
/// job runs, the shell takes the console's input to look for Ctrl-C.
fn wait_foreground(pid: Pid) -> Result<WaitStatus, String> {
    const CTRL_C: u8 = 0x03;
    loop {
        match sys::wait_timeout(Some(pid), 100_000_000) {
            Ok((_, status)) => return Ok(status),
            Err(abi::Error::TimedOut) => {}
            Err(e) => return Err(alloc::format!("run: waiting for {pid}: {e}")),
        }
        let mut input = [0u8; 64];
        let n = sys::read_nonblocking(&mut input).unwrap_or(0);
        if input[..n].contains(&CTRL_C) {
            println!("^C");
            sys::kill(pid).map_err(|e| alloc::format!("run: ^C: kill {pid}: {e}"))?;
        }
    }
}
