//! Standard input and output: the console, or a pipe (`res::pipe` in the kernel).
//!
//! A program's standard output is where [`print!`](crate::print) goes, its standard input
//! what [`read`] reads. Both are the console unless the parent says otherwise: it spawns
//! the child with [`spawn`], which appends one argument, [`TAG`] followed by the two
//! pipes' ids in hexadecimal (`0` for the console), e.g. `"\u{1}stdio=0,1c0000000001"`.
//! `rt::start` takes that argument off before `main` sees the others ([`take_tag`]), so a
//! program never sees it. The parent wires the pipes' ends before the child runs (it
//! holds them itself, `PIPE_HOLD`s them for the child, then drops its own), and
//! `rt::start` drops the child's ends when `main` returns ([`finish`]); a child that ends
//! otherwise is noticed by the pipe itself.
//!
//! Writing to a pipe whose readers have all gone ends the program with [`BROKEN_PIPE`]
//! (Unix's writer, killed by SIGPIPE, ends the same way).
//!
//! **A pipe of another machine** (issue 17; its id names that machine, `m1.c0:pipe:3.1`)
//! may be a stream too (`run PROG > m1.c0/pipe/p` in the shell): its bytes travel through
//! this machine's `machd` (`mach::res_read`, `res_write`: that machine's `machd` makes
//! them there as this program's user). Nothing waits there, so an empty or full pipe
//! answers `Again` and the program asks again after a pause (1 ms, doubling to 20 ms).
//! The parent cannot hold an end there for the child (a hold there is made for the
//! program that asks), so the child holds its own ends when it starts ([`take_tag`]) and
//! lets go of them at its end ([`finish`]; that `machd` lets go of them too if it ends
//! otherwise); the parent holds the end itself until the child has ended if the reader
//! must not see EOF before.

use crate::abi::res::ResId;
use crate::abi::syscall::control;
use crate::abi::{Error, Pid, Priority};
use crate::mach::{self, RemoteRes};
use alloc::format;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// The argument that carries the standard input and output starts with this.
pub const TAG: &str = "\u{1}stdio=";

/// Exit status of a program whose standard output lost its last reader.
pub const BROKEN_PIPE: i32 = 141;

/// The standard input's pipe id (0: the console).
static STDIN: AtomicU64 = AtomicU64::new(0);
/// The standard output's pipe id (0: the console).
static STDOUT: AtomicU64 = AtomicU64::new(0);
/// The life of the machine of each stream's pipe, if it is another machine's (0: not
/// looked up yet).
static STDIN_EPOCH: AtomicU64 = AtomicU64::new(0);
static STDOUT_EPOCH: AtomicU64 = AtomicU64::new(0);
/// This program's machine plus one (0: not looked up yet).
static HERE: AtomicU64 = AtomicU64::new(0);

/// This program's machine (its pid says).
fn here() -> u8 {
    match HERE.load(Ordering::Relaxed) {
        0 => {
            let m = crate::sys::getpid().map_or(0, |p| p.machine());
            HERE.store(u64::from(m) + 1, Ordering::Relaxed);
            m
        }
        m => (m - 1) as u8,
    }
}

/// Is `id` a resource of another machine?
pub fn elsewhere(id: ResId) -> bool {
    id.machine() != here()
}

/// Pipe `id` of another machine, with that machine's life (looked up once per stream).
fn remote(id: ResId, epoch: &AtomicU64) -> Result<RemoteRes, Error> {
    let e = match epoch.load(Ordering::Relaxed) {
        0 => {
            let e = mach::epoch_of(id.machine())?;
            epoch.store(u64::from(e), Ordering::Relaxed);
            e
        }
        e => e as u32,
    };
    Ok(RemoteRes {
        machine: id.machine(),
        epoch: e,
        id,
    })
}

/// The pause before asking a pipe of another machine again.
const PAUSE_MIN_NS: u64 = 1_000_000;
const PAUSE_MAX_NS: u64 = 20_000_000;

/// `op` on a pipe of another machine until it answers other than `Again` (the pipe empty
/// or full; the other side's holders that died are forgotten at each look, so this ends)
/// or `Busy` (no room in `machd` for one more request with data now). Any other error
/// ends it: `TimedOut` (the request may have been made there: asked again, a write could
/// be made twice), `Gone` (the machine is down, or no reader is left).
fn patiently<T>(mut op: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut pause = PAUSE_MIN_NS;
    loop {
        match op() {
            Err(Error::Again | Error::Busy) => {
                let _ = crate::sys::sleep_ns(pause);
                pause = (pause * 2).min(PAUSE_MAX_NS);
            }
            r => return r,
        }
    }
}

/// Where a standard stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Console,
    Pipe(ResId),
}

impl Stream {
    fn raw(self) -> u64 {
        match self {
            Stream::Console => 0,
            Stream::Pipe(id) => id.0,
        }
    }

    /// The stream, or the console in its place if it is a pipe of another machine.
    fn filter_local(self) -> Stream {
        match self {
            Stream::Pipe(id) if elsewhere(id) => Stream::Console,
            s => s,
        }
    }

    fn of(raw: u64) -> Stream {
        match raw {
            0 => Stream::Console,
            id => Stream::Pipe(ResId(id)),
        }
    }
}

/// This program's standard input.
pub fn stdin() -> Stream {
    Stream::of(STDIN.load(Ordering::Relaxed))
}

/// This program's standard output.
pub fn stdout() -> Stream {
    Stream::of(STDOUT.load(Ordering::Relaxed))
}

/// The argument that gives a child `input` and `output`.
pub fn tag(input: Stream, output: Stream) -> alloc::string::String {
    format!("{TAG}{:x},{:x}", input.raw(), output.raw())
}

/// `arg` is the standard input and output argument: take it (called once by `rt::start`,
/// before `main`). Returns whether it was.
pub fn take_tag(arg: &str) -> bool {
    let Some((input, output)) = arg.strip_prefix(TAG).and_then(|r| r.split_once(',')) else {
        return false;
    };
    let (Ok(input), Ok(output)) = (
        u64::from_str_radix(input, 16),
        u64::from_str_radix(output, 16),
    ) else {
        return false;
    };
    STDIN.store(input, Ordering::Relaxed);
    STDOUT.store(output, Ordering::Relaxed);
    // A pipe of another machine: this program holds its end there itself (the parent
    // could not hold it for this program).
    for (raw, end, epoch) in [
        (input, control::PIPE_READ_END, &STDIN_EPOCH),
        (output, control::PIPE_WRITE_END, &STDOUT_EPOCH),
    ] {
        if let Stream::Pipe(id) = Stream::of(raw) {
            if elsewhere(id) {
                if let Err(e) = remote(id, epoch)
                    .and_then(|r| mach::res_control(&r, control::PIPE_HOLD, end, 0))
                {
                    crate::eprintln!("stdio: cannot hold pipe {id}: {e}");
                }
            }
        }
    }
    true
}

/// Write some of `bytes` to the standard output; the count written.
pub fn write(bytes: &[u8]) -> Result<usize, Error> {
    match stdout() {
        Stream::Console => crate::sys::write(bytes),
        Stream::Pipe(id) => {
            let r = if elsewhere(id) {
                let pipe = remote(id, &STDOUT_EPOCH)?;
                let some = &bytes[..bytes.len().min(crate::abi::mach::RES_REMOTE_MAX)];
                patiently(|| mach::res_write(&pipe, some, control::PIPE_NOWAIT))
            } else {
                crate::res::write(id, bytes, 0)
            };
            match r {
                Err(Error::Gone) => crate::sys::exit(BROKEN_PIPE),
                r => r,
            }
        }
    }
}

/// Read from the standard input into `buf`: at least one byte, or 0 at its end (a pipe's
/// EOF; the console has none). The console is served on core 0 only.
pub fn read(buf: &mut [u8]) -> Result<usize, Error> {
    match stdin() {
        Stream::Console => crate::sys::read(buf),
        Stream::Pipe(id) if elsewhere(id) => {
            let pipe = remote(id, &STDIN_EPOCH)?;
            let n = buf.len().min(crate::abi::mach::RES_REMOTE_MAX);
            patiently(|| mach::res_read(&pipe, &mut buf[..n], control::PIPE_NOWAIT))
        }
        Stream::Pipe(id) => crate::res::read(id, buf, 0),
    }
}

/// Read the whole standard input (until EOF).
pub fn read_to_end() -> Result<Vec<u8>, Error> {
    let mut all = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match read(&mut buf)? {
            0 => return Ok(all),
            n => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// The program is done with its streams: it lets go of its pipes' ends, so the reader of
/// its output sees EOF now (called by `rt::start` when `main` returns).
pub fn finish() {
    for (stream, end, epoch) in [
        (stdout(), control::PIPE_WRITE_END, &STDOUT_EPOCH),
        (stdin(), control::PIPE_READ_END, &STDIN_EPOCH),
    ] {
        let Stream::Pipe(id) = stream else {
            continue;
        };
        if elsewhere(id) {
            let _ =
                remote(id, epoch).and_then(|r| mach::res_control(&r, control::PIPE_DROP, end, 0));
        } else {
            let _ = crate::res::control(id, control::PIPE_DROP, end, 0);
        }
    }
}

/// Open a pipe on core `core` (`None`: this one) of `capacity` bytes (`None`: the kernel's
/// default), held at both ends by this process. Its name is `p-X`, X 48 bits nobody can
/// guess (`res::open_fresh`): under one made of the opener's pid and a count (as before),
/// a program could open the next names first and make every pipeline, or every relayed
/// remote run of a `machd`, fail `AlreadyExists`.
pub fn pipe(core: Option<usize>, capacity: Option<u64>) -> Result<ResId, Error> {
    pipe_with_rights(core, capacity, crate::abi::res::Rights::OWNER_ALL)
}

/// [`pipe`] with `rights` (e.g. a write right for other users, whose programs write into
/// it after changing user).
pub fn pipe_with_rights(
    core: Option<usize>,
    capacity: Option<u64>,
    rights: crate::abi::res::Rights,
) -> Result<ResId, Error> {
    let location = match core {
        Some(c) => format!("c{c}"),
        None => "here".into(),
    };
    let args = capacity.map(u64::to_le_bytes);
    let id = crate::res::open_fresh(
        &format!("{location}/pipe/p"),
        args.as_ref().map_or(&[][..], |a| &a[..]),
        rights,
    )?;
    for end in [control::PIPE_READ_END, control::PIPE_WRITE_END] {
        if let Err(e) = crate::res::control(id, control::PIPE_HOLD, end, 0) {
            let _ = crate::res::close(id);
            return Err(e);
        }
    }
    Ok(id)
}

/// Spawn `name` with `args` on `core` (`None`: this one) with standard input `input` and
/// output `output`; for each pipe among them the child holds the end it uses (reading
/// `input`, writing `output`) before it runs any further than its start-up.
pub fn spawn(
    name: &str,
    args: &[&str],
    priority: Priority,
    core: Option<usize>,
    input: Stream,
    output: Stream,
) -> Result<Pid, Error> {
    with_streams(args, input, output, |all| match core {
        None => crate::sys::spawn(name, all, priority),
        Some(c) => crate::sys::spawn_on(name, all, priority, c),
    })
}

/// [`spawn`] for a program not in the boot archive: the ELF `image` (read from the disk),
/// shown as `name` (`sys::spawn_image`).
pub fn spawn_image(
    image: &[u8],
    name: &str,
    args: &[&str],
    priority: Priority,
    core: Option<usize>,
    input: Stream,
    output: Stream,
) -> Result<Pid, Error> {
    with_streams(args, input, output, |all| {
        crate::sys::spawn_image(image, name, all, priority, core)
    })
}

/// Start a child with `start(args and the streams' tag)`, then hold for it the pipe ends
/// it uses of `input` and `output` (it is killed if they cannot be held).
fn with_streams(
    args: &[&str],
    input: Stream,
    output: Stream,
    start: impl FnOnce(&[&str]) -> Result<Pid, Error>,
) -> Result<Pid, Error> {
    let tag = tag(input, output);
    let mut all: Vec<&str> = args.to_vec();
    all.push(&tag);
    let pid = start(&all)?;
    let held = [
        (input, control::PIPE_READ_END),
        (output, control::PIPE_WRITE_END),
    ];
    for (stream, end) in held {
        // A pipe of another machine: the child holds its end there itself.
        if let Stream::Pipe(id) = stream.filter_local() {
            // A child that already ended (it could not have used the pipe yet: it has not
            // got the end) is `NoSuchProcess`: nothing to hold.
            match crate::res::control(id, control::PIPE_HOLD, end, pid.0) {
                Ok(_) | Err(Error::NoSuchProcess) => {}
                Err(e) => {
                    let _ = crate::sys::kill(pid);
                    return Err(e);
                }
            }
        }
    }
    Ok(pid)
}
