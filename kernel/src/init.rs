//! The kernel's init: the console's shell is started at boot and started again whenever it
//! ends, however it ends.
//!
//! Why it exists: the shell is the machine's only reader of the console and the usual way
//! to power off. When it ended (issue 12: `kill 0.1`, but an exit, a fault or a move to
//! another core ends it as well) the console went dead without a word and nothing could
//! switch the machine off. Unix gives that job to `init`; here the kernel does it.
//!
//! How: [`start_shell`] starts the shell (as the administrator, a child of the kernel) and
//! a kernel thread on its core, the *init thread*, which sleeps. The shell's end reaches
//! this module as an event (`entry::events::process_ended`, raised by process teardown;
//! the scheduler does not name this module): [`process_ended`] notes how it ended and wakes
//! the init thread. The thread prints one console line (`shell 0.1 ended (killed);
//! starting a new shell`) and starts a new shell the same way as the first. The new shell
//! prints its own banner and prompt.
//!
//! Bounded: a start *fails* if the kernel refuses the spawn or if the program ends before
//! it ever asked for console input (`CONSOLE_READ`, which the shell calls for its first
//! prompt; [`note_console_read`]). After [`MAX_FAILURES`] failed starts in a row the init
//! thread says so and stops trying: the machine stays up (programs started with `start=`
//! run on) but nothing reads the console, so only the host can stop it. A shell that
//! reached its prompt and ended later (`exit`, killed) resets the count: each such end
//! starts a new one.
//!
//! A moved shell (`MIGRATE`) has left core 0, whose console input it needs: it counts as
//! ended here and a new shell starts on this core; the moved copy runs on as an ordinary
//! program (its next console read fails and it exits).
//!
//! The in-kernel tests keep another program the same way ([`keep`], [`stop`], [`status`]).

#![deny(unsafe_code)]

use crate::percore;
use crate::proc::{self, sched};
use abi::{Error, Pid, Priority, WaitStatus};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Failed starts in a row after which the init thread gives up.
pub const MAX_FAILURES: u32 = 3;

/// One core's init state (a field of the core's record; only the owner touches it).
pub struct CoreInit {
    kept: Option<Kept>,
    /// The last program kept here gave up after [`MAX_FAILURES`] failed starts.
    gave_up: bool,
    /// Starts after the first (successful or not), for [`status`].
    restarts: u64,
}

impl CoreInit {
    pub const fn new() -> Self {
        CoreInit {
            kept: None,
            gave_up: false,
            restarts: 0,
        }
    }
}

/// The program this core keeps running.
struct Kept {
    program: heapless::String<{ proc::MAX_NAME }>,
    args: Vec<String>,
    priority: Priority,
    /// The init thread.
    thread: u32,
    /// The running instance (`None` between an end and the next start).
    pid: Option<Pid>,
    /// The running instance asked for console input.
    up: bool,
    /// An instance ended and the init thread has not handled it yet: its pid, how it
    /// ended, whether it had been up.
    ended: Option<(Pid, WaitStatus, bool)>,
    /// Failed starts in a row.
    failures: u32,
    /// [`stop`] asked the init thread to go.
    stop: bool,
}

/// What [`status`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// Something is kept on this core (until the init thread has gone after [`stop`]).
    pub keeping: bool,
    /// Its running instance.
    pub pid: Option<Pid>,
    /// That instance asked for console input.
    pub up: bool,
    /// Failed starts in a row.
    pub failures: u32,
    pub restarts: u64,
    pub gave_up: bool,
}

fn with<R>(f: impl FnOnce(&mut CoreInit) -> R) -> R {
    percore::this().init.with(f)
}

/// Start the shell on this core (core 0: the console's input arrives there) and keep it
/// running. A shell that cannot start at all is reported, not fatal, and not retried.
pub fn start_shell() {
    match keep("shell", &[], Priority::Server) {
        Ok(_) => {}
        Err(e @ Error::NoSuchProgram) => {
            log::warn!("cannot start the shell: {e} (is the boot archive attached?)")
        }
        Err(Error::Busy) => log::warn!("cannot start the shell: this core keeps one already"),
        Err(e) => log::warn!(
            "cannot start the shell: {e} ({} frames free on core {}, {} kept for the kernel)",
            crate::mm::frames::counts(percore::current_core()).0,
            percore::current_core(),
            crate::mm::frames::kernel_reserve(percore::current_core())
        ),
    }
}

/// Start `program` with `args` at `priority` on this core as a child of the kernel (a boot
/// program), and start it again whenever it ends, as [the module](self) describes. `Busy`
/// if this core keeps a program already; the spawn's error if the first start fails (then nothing
/// is kept); `NoMemory` if there is no memory for the init thread (the program is ended).
pub fn keep(program: &str, args: &[&str], priority: Priority) -> Result<Pid, Error> {
    if with(|i| i.kept.is_some()) {
        return Err(Error::Busy);
    }
    let name = heapless::String::try_from(program).map_err(|_| Error::TooLong)?;
    let args: Vec<String> = args.iter().map(|a| String::from(*a)).collect();
    let pid = spawn_kept(program, &args, priority)?;
    let Some(thread) = sched::with(|s| s.add_kernel_thread(init_main, 0, Priority::Driver)) else {
        log::warn!("no memory for the init thread: {program} {pid} will not be restarted");
        let _ = proc::end_by_kill(pid);
        return Err(Error::NoMemory);
    };
    with(|i| {
        i.gave_up = false;
        i.restarts = 0;
        i.kept = Some(Kept {
            program: name,
            args,
            priority,
            thread,
            pid: Some(pid),
            up: false,
            ended: None,
            failures: 0,
            stop: false,
        });
    });
    Ok(pid)
}

/// Stop keeping the program of this core (the in-kernel tests): the init thread ends; the
/// running instance, returned, runs on for the caller to end.
pub fn stop() -> Option<Pid> {
    with(|i| {
        let k = i.kept.as_mut()?;
        k.stop = true;
        Some((k.thread, k.pid.take()))
    })
    .and_then(|(thread, pid)| {
        sched::with(|s| s.wake(thread));
        pid
    })
}

/// What this core keeps and how it went.
pub fn status() -> Status {
    with(|i| Status {
        keeping: i.kept.is_some(),
        pid: i.kept.as_ref().and_then(|k| k.pid),
        up: i.kept.as_ref().is_some_and(|k| k.up),
        failures: i.kept.as_ref().map_or(0, |k| k.failures),
        restarts: i.restarts,
        gave_up: i.gave_up,
    })
}

/// The running process reads the console (`CONSOLE_READ`): if it is the kept program, it
/// is up (it reached its prompt), so its end will not count as a failed start.
pub fn note_console_read() {
    let Some(me) = proc::running_pid() else {
        return;
    };
    with(|i| {
        if let Some(k) = i.kept.as_mut().filter(|k| k.pid == Some(me)) {
            k.up = true;
        }
    });
}

/// Event (process teardown, with the scheduler borrowed as `s`): process `pid` of this
/// core ended with `status`. If it is the kept program, wake the init thread.
pub fn process_ended(s: &mut sched::Sched, pid: Pid, status: WaitStatus) {
    let thread = with(|i| {
        let k = i.kept.as_mut().filter(|k| k.pid == Some(pid))?;
        k.ended = Some((pid, status, k.up));
        k.pid = None;
        k.up = false;
        Some(k.thread)
    });
    if let Some(t) = thread {
        s.wake(t);
    }
}

/// Start one instance, counted as a boot program while it lives (the kernel's children
/// are forgotten, and uncounted, when they end).
fn spawn_kept(program: &str, args: &[String], priority: Priority) -> Result<Pid, Error> {
    let boot_programs = &percore::this().stats.boot_programs;
    boot_programs.fetch_add(1, Ordering::Relaxed);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    proc::spawn(program, &args, priority, Pid(0)).inspect_err(|_| {
        boot_programs.fetch_sub(1, Ordering::Relaxed);
    })
}

/// How a process ended, for the console line.
struct How(WaitStatus);

impl core::fmt::Display for How {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.0;
        match s.how {
            abi::ENDED_EXIT => write!(f, "exit {}", s.code as u32 as i32),
            abi::ENDED_KILLED => write!(f, "killed"),
            abi::ENDED_FAULT => write!(f, "fault, vector {} at rip {:#x}", s.code, s.rip),
            abi::ENDED_MIGRATED => {
                write!(f, "moved away from the console's core as {}", Pid(s.code))
            }
            abi::ENDED_MOVED_AWAY => {
                write!(f, "moved to machine {} as {}", s.address, Pid(s.code))
            }
            other => write!(f, "ended in an unknown way ({other})"),
        }
    }
}

/// What the init thread does next.
enum Work {
    /// Start a new instance of `program`.
    Start {
        program: heapless::String<{ proc::MAX_NAME }>,
        args: Vec<String>,
        priority: Priority,
    },
    /// Nothing to do until woken.
    Sleep,
    /// Go ([`stop`], or given up).
    End,
}

/// Count one failed start of `k`; true if that was the last one allowed (then nothing is
/// kept any more and the console has said why).
fn failed(i: &mut CoreInit, why: core::fmt::Arguments) -> bool {
    let Some(k) = i.kept.as_mut() else {
        return true;
    };
    k.failures += 1;
    if k.failures < MAX_FAILURES {
        return false;
    }
    crate::kprintln!(
        "{why}: {} starts of {} in a row failed; not starting it again. Nothing reads the \
         console now (the machine stays up; stop it from the host)",
        k.failures,
        k.program
    );
    i.kept = None;
    i.gave_up = true;
    true
}

/// The init thread: sleep until the kept program ends, report it, start it again.
extern "C" fn init_main(_: u64) -> ! {
    loop {
        let work = with(|i| {
            let Some(k) = i.kept.as_mut() else {
                return Work::End;
            };
            if k.stop {
                i.kept = None;
                return Work::End;
            }
            let Some((pid, status, was_up)) = k.ended.take() else {
                return Work::Sleep;
            };
            let (program, args, priority) = (k.program.clone(), k.args.clone(), k.priority);
            if was_up {
                k.failures = 0;
                crate::kprintln!(
                    "{program} {pid} ended ({}); starting a new {program}",
                    How(status)
                );
            } else if failed(
                i,
                format_args!(
                    "{program} {pid} ended ({}) before it asked for console input",
                    How(status)
                ),
            ) {
                return Work::End;
            } else {
                crate::kprintln!(
                    "{program} {pid} ended ({}) before it asked for console input (failed start \
                     {} of {MAX_FAILURES}); starting a new {program}",
                    How(status),
                    i.kept.as_ref().map_or(0, |k| k.failures)
                );
            }
            Work::Start {
                program,
                args,
                priority,
            }
        });
        let (program, args, priority) = match work {
            Work::Sleep => {
                sched::block(sched::Block::Event);
                continue;
            }
            Work::End => sched::exit_current(),
            Work::Start {
                program,
                args,
                priority,
            } => (program, args, priority),
        };
        // Start it; a refused spawn is retried at once until too many fail.
        loop {
            let started = spawn_kept(&program, &args, priority);
            let again = with(|i| {
                i.restarts += 1;
                match started {
                    Ok(pid) => {
                        if let Some(k) = i.kept.as_mut() {
                            k.pid = Some(pid);
                            k.up = false;
                        }
                        false
                    }
                    Err(e) => !failed(i, format_args!("cannot start a new {program}: {e}")),
                }
            });
            if !again {
                break;
            }
        }
    }
}
