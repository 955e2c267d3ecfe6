//! `mrun PROG [ARGS] -m M [-c C]`: PROG on machine M as one stage of a pipeline on this
//! machine (issue 17; P0's pipes across processors, here across machines). What comes into
//! this program's standard input goes into PROG's, through the two machines' `machd`s;
//! what PROG writes comes out of this program's standard output; this program ends as PROG
//! did (its exit code; `stdio::BROKEN_PIPE` if its reader here went first, and then PROG
//! is killed, as a Unix writer dies of a broken pipe). The shell runs it for a program on
//! another machine in the middle of a pipeline (`run seq 9 | upper -m 1 | wc`).
//!
//! Two threads, so that neither direction holds up the other: the main one copies PROG's
//! output here (`ulib::mach::output_into`), a feeder sends this program's input there
//! (`ulib::mach::input_from`) until EOF, which ends PROG's input. A standard input that is
//! the console gives PROG an empty input (the console is the shell's).
#![forbid(unsafe_code)]
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU64, Ordering};
use ulib::abi::mach::{SPAWN_RELAY, SPAWN_STDIN};
use ulib::abi::syscall::control::PIPE_READ_END;
use ulib::abi::{Error, Pid, ENDED_EXIT, ENDED_KILLED};
use ulib::mach::{self, Copied, Remote, RunError, RunWords};
use ulib::stdio::{self, Stream};
use ulib::{eprintln, thread};

ulib::main!(main);

const USAGE: &str = "usage: mrun PROG [ARGS] -m MACHINE [-c CORE]";

/// The remote program, for the feeder thread: machine << 32 | epoch, and pid.
static WHO: AtomicU64 = AtomicU64::new(0);
static PID: AtomicU64 = AtomicU64::new(0);

fn main(args: &[&str]) -> i32 {
    match run(args.get(1..).unwrap_or(&[])) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: mrun: {e}");
            1
        }
    }
}

fn run(words: &[&str]) -> Result<i32, String> {
    let RunWords {
        machine,
        core,
        words,
    } = mach::parse_run(words).map_err(|e| match e {
        RunError::Usage => String::from(USAGE),
        RunError::Machine(m) => format!("bad machine '{m}' (a number, e.g. 1)"),
        RunError::Core(c) => format!("bad core '{c}'"),
    })?;
    let machine = u8::try_from(machine).map_err(|_| format!("no machine {machine}"))?;
    let prog = words[0];
    let r = mach::spawn(machine, core | SPAWN_RELAY | SPAWN_STDIN, &words).map_err(|e| {
        let why = match e {
            Error::NotSupported => {
                String::from("no machd here (boot several with cargo xtask run --machines N)")
            }
            Error::TooLong => String::from("at most 32 bytes of program and arguments"),
            e => format!("{e}"),
        };
        format!("{prog} on machine {machine}: {why}")
    })?;
    WHO.store(
        (u64::from(r.machine) << 32) | u64::from(r.epoch),
        Ordering::Relaxed,
    );
    PID.store(r.pid.0, Ordering::Relaxed);
    // Without a feeder PROG would wait for input for ever: then it is ended instead.
    if let Err(e) = thread::spawn(feed, 0) {
        let _ = mach::kill(&r);
        return Err(format!("starting the feeder: {e}"));
    }
    let copied = mach::output_into(&r, stdio::stdout(), None);
    if !matches!(copied, Ok(Copied::All)) {
        let _ = mach::kill(&r);
    }
    // PROG has ended, or is ending: the feeder may still wait for input here, and goes
    // with this process.
    let status = mach::wait(&r).map_err(|e| format!("waiting for {prog}: {e}"))?;
    match copied {
        Err(e) => Err(format!("{prog}'s output: {e}")),
        Ok(Copied::ReaderGone | Copied::Stopped) => Ok(stdio::BROKEN_PIPE),
        Ok(Copied::All) if status.how == ENDED_EXIT => Ok(status.code as i32),
        Ok(Copied::All) if status.how == ENDED_KILLED => {
            Err(format!("{prog} on machine {machine} was killed"))
        }
        Ok(Copied::All) => Err(format!("{prog} on machine {machine} ended by a fault")),
    }
}

/// The feeder thread: this program's input into the remote program's, then its end.
fn feed(_: u64) -> u64 {
    let who = WHO.load(Ordering::Relaxed);
    let r = Remote {
        machine: (who >> 32) as u8,
        epoch: who as u32,
        pid: Pid(PID.load(Ordering::Relaxed)),
    };
    let fed = match stdio::stdin() {
        Stream::Pipe(pipe) => {
            let fed = mach::input_from(&r, pipe, None);
            // Read to its end, or PROG reads no more: either way nothing more is read here,
            // so a writer still writing sees a broken pipe.
            mach::drop_end(pipe, PIPE_READ_END);
            fed.map(drop)
        }
        Stream::Console => mach::input(r.machine, r.epoch, r.pid, &[], true).map(drop),
    };
    match fed {
        Ok(()) => 0,
        Err(e) => {
            eprintln!(
                "error: mrun: the input of machine {}'s {}: {e}",
                r.machine, r.pid
            );
            1
        }
    }
}
