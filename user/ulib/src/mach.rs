//! Several machines (issue 17): what programs ask of `machd` about programs on other
//! machines (files: `fs` names `mK:PATH` itself).
//!
//! [`spawn`], [`wait`], [`kill`]: a program on another machine, as this program's user.
//! [`output`]: the output of a program spawned there with its output relayed
//! (`abi::mach::SPAWN_RELAY`), read into this program rather than printed by `machd`, so
//! that it can go on into a pipe; [`output_into`] copies all of it into one. [`input`]:
//! bytes for the input of a program spawned there with `SPAWN_STDIN`; [`input_from`] sends
//! a pipe's bytes until its EOF. The shell's pipelines (`run PROG -m M | ...`, `run ... |
//! PROG -m M`) and `mrun` (a pipeline stage on another machine anywhere in a pipeline) are
//! built of these. [`call`]: a request to any function served on another machine, by name
//! (`abi::mach::OP_CALL`). [`res_open`] and the other `res_*`: resource operations on
//! another machine (`abi::mach::OP_RES`), a pipe there among them.

use crate::abi::fnid::FnId;
use crate::abi::ipc::Msg;
use crate::abi::mach::{self, FN_MACH};
use crate::abi::res::{ResId, ResInfo, Rights};
use crate::abi::syscall::control;
use crate::abi::{Error, Pid, WaitStatus};
use crate::stdio::Stream;
use crate::{fnid, sys};
use alloc::vec::Vec;

/// A program started on another machine by [`spawn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    pub machine: u8,
    /// The life of `machine` that spawned it: after a restart there, its pid is refused
    /// (`StaleResource`).
    pub epoch: u32,
    pub pid: Pid,
}

impl Remote {
    /// The request words that name it to `machd` (machine, epoch, pid), with `w3` after.
    pub fn words(&self, w3: u64) -> [u64; 6] {
        [
            u64::from(self.machine),
            u64::from(self.epoch),
            self.pid.0,
            w3,
            0,
            0,
        ]
    }
}

/// The machine this program runs on, as its `machd` says (`OP_SELF`); `None` while no
/// `machd` answers (one machine, or `machd` not started yet). Asked each time, never kept:
/// a program moved to another machine (`migrate`) takes its memory along, and a kept
/// answer would name the machine it left (its `mK:` file names then went astray).
pub fn this_machine() -> Option<u8> {
    ask(mach::OP_SELF, [0; 6]).ok().map(|w| w[0] as u8)
}

/// Process `pid` of machine `machine` as issue 17 spells it: `m1.c2.5` (machine 1, core 2,
/// serial 5), machine 0's too (`m0.c0.4`, which is `0.4`: `Pid`'s own spelling leaves
/// machine 0 out).
pub fn spell_pid(machine: u8, pid: Pid) -> alloc::string::String {
    alloc::format!("m{machine}.c{}.{}", pid.core(), pid.serial())
}

/// A process of a machine named with its machine: `m1.c2.5`, or as the shell spelled it
/// before, `m1:2.5`. The pid carries the machine (`Pid::machine`), as its kernel made it.
pub fn parse_pid(word: &str) -> Option<(u8, Pid)> {
    word.strip_prefix('m')?;
    let pid = match crate::abi::strip_machine(word, ":") {
        Some((m, pid)) => Pid::parse(pid)
            .filter(|p| p.machine() == 0)?
            .with_machine(m),
        None => Pid::parse(word)?,
    };
    Some((pid.machine(), pid))
}

/// A remote run's words, `PROG [ARGS] -m M [-c C]`, taken apart by [`parse_run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWords<'a> {
    /// `M` (`m1` or `1`).
    pub machine: u64,
    /// [`spawn`]'s core word: `C`, or `ANY_CORE` without `-c`.
    pub core: u64,
    /// `PROG [ARGS]`.
    pub words: Vec<&'a str>,
}

/// What is wrong with a remote run's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError<'a> {
    /// No program, no `-m`, or a flag without its value.
    Usage,
    /// `-m`'s value is not a machine number.
    Machine(&'a str),
    /// `-c`'s value is not a core number.
    Core(&'a str),
}

/// Take `PROG [ARGS] -m M [-c C]` apart (the flags anywhere among the words).
pub fn parse_run<'a>(args: &[&'a str]) -> Result<RunWords<'a>, RunError<'a>> {
    let mut words = args.to_vec();
    let mut take = |flag: &str| -> Result<Option<&'a str>, RunError<'a>> {
        let Some(i) = words.iter().position(|w| *w == flag) else {
            return Ok(None);
        };
        let v = *words.get(i + 1).ok_or(RunError::Usage)?;
        words.drain(i..i + 2);
        Ok(Some(v))
    };
    let m = take("-m")?.ok_or(RunError::Usage)?;
    let machine = m
        .trim_start_matches('m')
        .parse::<u64>()
        .map_err(|_| RunError::Machine(m))?;
    let core = match take("-c")? {
        Some(c) => c
            .parse::<u32>()
            .ok()
            .map(u64::from)
            .filter(|&c| c != mach::ANY_CORE)
            .ok_or(RunError::Core(c))?,
        None => mach::ANY_CORE,
    };
    if words.is_empty() {
        return Err(RunError::Usage);
    }
    Ok(RunWords {
        machine,
        core,
        words,
    })
}

/// This machine's `machd` (`NotSupported`: there is none, a machine booted alone).
fn server() -> Result<FnId, Error> {
    match fnid::lookup(FN_MACH) {
        Ok(id) => Ok(id),
        Err(Error::NoSuchResource) => Err(Error::NotSupported),
        Err(e) => Err(e),
    }
}

/// The present life (epoch) of machine `machine`, as this machine's `machd` last heard it
/// (`NoSuchResource` while it has never been heard from).
pub fn epoch_of(machine: u8) -> Result<u32, Error> {
    let w = ask(mach::OP_MEMBER, [u64::from(machine), 0, 0, 0, 0, 0])?;
    u32::try_from(w[2])
        .ok()
        .filter(|e| *e != 0)
        .ok_or(Error::NoSuchResource)
}

/// One request to `machd` without an ICA: its answer's words.
fn ask(op: u64, words: [u64; 6]) -> Result<[u64; 6], Error> {
    let (_, r) = fnid::call_fn(server()?, &Msg { label: op, words })?;
    Ok(r.words)
}

/// Start `words` (`PROG ARGS...`, at most 32 bytes joined by NULs: `TooLong` beyond) on
/// `machine`, on the core and with the streams `core` says (`abi::mach::OP_SPAWN`'s core
/// word: a core or `ANY_CORE`, with `SPAWN_RELAY`, `SPAWN_STDIN`).
pub fn spawn(machine: u8, core: u64, words: &[&str]) -> Result<Remote, Error> {
    let mut cmd = [0u8; 32];
    let mut len = 0;
    for (i, w) in words.iter().enumerate() {
        let sep = usize::from(i > 0);
        let end = len + sep + w.len();
        if w.is_empty() || end > cmd.len() {
            return Err(if w.is_empty() {
                Error::InvalidArgument
            } else {
                Error::TooLong
            });
        }
        cmd[len + sep..end].copy_from_slice(w.as_bytes());
        len = end;
    }
    if len == 0 {
        return Err(Error::InvalidArgument);
    }
    let mut w = [u64::from(machine), core, 0, 0, 0, 0];
    for (i, chunk) in cmd.chunks(8).enumerate() {
        w[2 + i] = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    }
    let r = ask(mach::OP_SPAWN, w)?;
    Ok(Remote {
        machine,
        epoch: r[1] as u32,
        pid: Pid(r[0]),
    })
}

/// Wait for `r` to end: its status.
pub fn wait(r: &Remote) -> Result<WaitStatus, Error> {
    wait_timeout(r, u64::MAX)
}

/// [`wait`] for at most `timeout_ns` (`TimedOut` if `r` has not ended by then).
pub fn wait_timeout(r: &Remote, timeout_ns: u64) -> Result<WaitStatus, Error> {
    let a = ask(mach::OP_WAIT, r.words(timeout_ns))?;
    Ok(WaitStatus {
        how: a[0],
        code: a[1],
        address: 0,
        rip: 0,
    })
}

/// End `r` (as `kill` does).
pub fn kill(r: &Remote) -> Result<(), Error> {
    ask(mach::OP_KILL, r.words(0)).map(drop)
}

/// Pause between two looks at a remote program's output (or offers of its input) that
/// found nothing new (or no room).
pub const POLL_NS: u64 = 20_000_000;
/// First pause of [`input_from`] at an empty pipe (and of [`output_into`] at a full one).
const PIPE_POLL_MIN_NS: u64 = 1_000_000;

/// Pause `pause`; the next pause, twice as long, at most [`POLL_NS`].
fn backoff(pause: u64) -> u64 {
    let _ = sys::sleep_ns(pause);
    (pause * 2).min(POLL_NS)
}
/// Looks at a remote program in a row that may end `TimedOut` (each after
/// `abi::mach::DEFAULT_DEADLINE_NS`) before giving up on it: a hang guard. A dead machine
/// is declared down well within that, and then a look ends `Gone`.
pub const LATE_MAX: u32 = 30;

/// How [`output_into`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copied {
    /// The remote program's output ended, all of it written into the pipe.
    All,
    /// The pipe's reader went first (the caller may kill the writer, as a Unix writer
    /// dies of a broken pipe).
    ReaderGone,
    /// The caller's `stop` said so (the shell's Ctrl-C: it killed the program).
    Stopped,
}

/// Whom [`output_into`] and [`input_from`] ask, between looks, whether to stop (the shell,
/// which looks for a Ctrl-C). With one, they never wait in the pipe: they read and write
/// it with `PIPE_NOWAIT` and pause, from 1 ms doubling to [`POLL_NS`], while it is empty or
/// full. Without one (`mrun`, which a kill ends), they wait in it.
pub type Stop<'a> = Option<&'a mut dyn FnMut() -> bool>;

/// Ask `stop`, if there is one.
fn asked(stop: &mut Stop) -> bool {
    stop.as_mut().is_some_and(|f| f())
}

/// Write `r`'s output (spawned with `SPAWN_RELAY`) to `to` (a pipe, or this console) as it
/// comes, until it ends or the pipe's reader goes (`Gone`; any other error of the write is
/// returned). `stop` is asked before each look and while a full pipe holds the writing up:
/// if it says so, [`Copied::Stopped`].
pub fn output_into(r: &Remote, to: Stream, mut stop: Stop) -> Result<Copied, Error> {
    let mut late = 0;
    let mut bytes = Vec::new();
    let wait_arg = if stop.is_some() {
        control::PIPE_NOWAIT
    } else {
        0
    };
    loop {
        if asked(&mut stop) {
            return Ok(Copied::Stopped);
        }
        bytes.clear();
        let ended = match output(r.machine, r.epoch, r.pid, &mut bytes) {
            Ok(ended) => ended,
            Err(Error::TimedOut) if late < LATE_MAX => {
                late += 1;
                continue;
            }
            Err(e) => return Err(e),
        };
        late = 0;
        let mut rest = &bytes[..];
        let mut pause = PIPE_POLL_MIN_NS;
        while !rest.is_empty() {
            let wrote = match to {
                Stream::Pipe(pipe) => crate::res::write(pipe, rest, wait_arg),
                Stream::Console => sys::write(rest),
            };
            match wrote {
                Ok(n) => {
                    rest = &rest[n.min(rest.len())..];
                    pause = PIPE_POLL_MIN_NS;
                }
                Err(Error::Again) => {
                    if asked(&mut stop) {
                        return Ok(Copied::Stopped);
                    }
                    pause = backoff(pause);
                }
                Err(Error::Gone) => return Ok(Copied::ReaderGone),
                Err(e) => return Err(e),
            }
        }
        if ended {
            return Ok(Copied::All);
        }
        if bytes.is_empty() {
            let _ = sys::sleep_ns(POLL_NS);
        }
    }
}

/// Send what `pipe` holds into `r`'s input (spawned with `SPAWN_STDIN`) until the pipe's
/// EOF, then end `r`'s input. Returns `false` if `r` stopped reading first (`Gone`), or if
/// `stop` said so (asked before each read, and while the pipe is empty, `r`'s input is
/// full or its machine slow to answer): the caller then lets go of the pipe, so its writer
/// sees a broken pipe.
pub fn input_from(r: &Remote, pipe: ResId, mut stop: Stop) -> Result<bool, Error> {
    let mut buf = alloc::vec![0u8; mach::INPUT_MAX];
    let mut late = 0;
    let mut pause = PIPE_POLL_MIN_NS;
    let wait_arg = if stop.is_some() {
        control::PIPE_NOWAIT
    } else {
        0
    };
    loop {
        if asked(&mut stop) {
            return Ok(false);
        }
        let n = match crate::res::read(pipe, &mut buf, wait_arg) {
            Err(Error::Again) => {
                pause = backoff(pause);
                continue;
            }
            n => n?,
        };
        pause = PIPE_POLL_MIN_NS;
        let mut rest = &buf[..n];
        // Offered until all is written (and, at EOF, the end given).
        loop {
            match input(r.machine, r.epoch, r.pid, rest, n == 0) {
                Ok(w) if w >= rest.len() && (n > 0 || w == 0) => {
                    late = 0;
                    break;
                }
                Ok(w) => {
                    rest = &rest[w.min(rest.len())..];
                    if w == 0 {
                        // Its input is full (it reads slowly, or not at all).
                        let _ = sys::sleep_ns(POLL_NS);
                    }
                    late = 0;
                }
                Err(Error::TimedOut) if late < LATE_MAX => late += 1,
                Err(Error::Gone) => return Ok(false),
                Err(e) => return Err(e),
            }
            if asked(&mut stop) {
                return Ok(false);
            }
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Let go of this program's reading end of `pipe` (its writer then sees a broken pipe
/// once nobody reads), or of its writing end (its reader then sees EOF).
pub fn drop_end(pipe: ResId, end: u64) {
    let _ = crate::res::control(pipe, control::PIPE_DROP, end, 0);
}

/// What process `pid` of machine `machine` (life `epoch`) has written since the last look,
/// appended to `out` (at most about 1 KiB a look; nothing new is nothing appended), and
/// whether its output has ended. Only the user it was spawned for (or the administrator)
/// may (`NoSuchProcess` otherwise, or once its output has ended and was read).
pub fn output(machine: u8, epoch: u32, pid: Pid, out: &mut Vec<u8>) -> Result<bool, Error> {
    let server = server()?.as_target();
    let words = [u64::from(machine), u64::from(epoch), pid.0, 0, 0, 0];
    crate::fs::call_with_ica(
        server,
        mach::OP_OUTPUT,
        words,
        |_| {},
        |data, reply: &Msg| {
            let n = (reply.words[0] as usize).min(data.len());
            out.extend_from_slice(&data[..n]);
            reply.words[1] != 0
        },
    )
}

/// Write `bytes` (at most `abi::mach::INPUT_MAX`) into the input of process `pid` of machine
/// `machine` (life `epoch`; spawned with `SPAWN_STDIN`), and end its input after them if
/// `end`: how many were written (0 while its pipe is full; the end is given only when all
/// were). `Gone` once it reads no more.
pub fn input(machine: u8, epoch: u32, pid: Pid, bytes: &[u8], end: bool) -> Result<usize, Error> {
    if bytes.len() > mach::INPUT_MAX {
        return Err(Error::TooLong);
    }
    let server = server()?.as_target();
    let len = bytes.len() as u64 | if end { mach::INPUT_END } else { 0 };
    let words = [u64::from(machine), u64::from(epoch), pid.0, len, 0, 0];
    crate::fs::call_with_ica(
        server,
        mach::OP_INPUT,
        words,
        |ica| ica[..bytes.len()].copy_from_slice(bytes),
        |_, reply: &Msg| reply.words[0] as usize,
    )
}

/// What a server on another machine answered an [`call`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The server's reply value: 0, or the `Error` code it answered.
    pub value: u64,
    /// The server's reply label (without the ICA flags).
    pub label: u64,
    /// The server's reply words (with an ICA, `words[4]` and `words[5]` were its place and
    /// id there: 0 here).
    pub words: [u64; 6],
    /// The first bytes of the ICA it gave back (as many as asked for, if it gave one back).
    pub bytes: Vec<u8>,
}

/// Call function `name` on machine `machine` with `label` and `words`, as this program's
/// user, waiting at most `timeout_ns` for the server (0: `abi::mach::DEFAULT_DEADLINE_NS`).
/// With `ica`, the request carries an ICA there holding `data` at its start (then only
/// `words[0..4]` travel: an ICA's id takes `words[5]`, and `words[4]` is where it is
/// mapped), and the first `wanted` bytes of the ICA the server gives back come back.
/// `Err` is an error of the way there (`abi::mach::OP_CALL` lists them); the server's own
/// error is the answer's `value`.
pub fn call(
    machine: u8,
    name: &str,
    label: u64,
    words: [u64; 6],
    ica: Option<(&[u8], usize)>,
    timeout_ns: u64,
) -> Result<Answer, Error> {
    let (data, wanted) = ica.unwrap_or((&[], 0));
    if name.is_empty() {
        return Err(Error::InvalidArgument);
    }
    if name.len() > mach::CALL_NAME_MAX
        || data.len() > mach::CALL_REMOTE_MAX
        || wanted > mach::CALL_REMOTE_MAX
    {
        return Err(Error::TooLong);
    }
    let server = server()?.as_target();
    let cw = mach::call_word(
        name.len() as u64,
        data.len() as u64,
        wanted as u64,
        ica.is_some(),
    );
    crate::fs::call_with_ica(
        server,
        mach::OP_CALL,
        [u64::from(machine), label, cw, timeout_ns, 0, 0],
        |page| {
            for (i, w) in words.iter().enumerate() {
                let at = mach::CALL_WORDS_AT + 8 * i;
                page[at..at + 8].copy_from_slice(&w.to_le_bytes());
            }
            let at = mach::CALL_NAME_AT;
            page[at..at + name.len()].copy_from_slice(name.as_bytes());
            let at = at + name.len();
            page[at..at + data.len()].copy_from_slice(data);
        },
        |page, reply: &Msg| {
            let mut a = Answer {
                value: reply.words[1],
                label: reply.words[2],
                ..Answer::default()
            };
            for (i, w) in a.words.iter_mut().enumerate() {
                let at = mach::CALL_WORDS_AT + 8 * i;
                let mut b = [0; 8];
                b.copy_from_slice(&page[at..at + 8]);
                *w = u64::from_le_bytes(b);
            }
            let n = (reply.words[0] as usize).min(mach::CALL_REMOTE_MAX);
            a.bytes = page[mach::CALL_NAME_AT..mach::CALL_NAME_AT + n].to_vec();
            a
        },
    )
}

/// A resource of another machine, as [`res_open`] gave it: usable until that machine
/// restarts (`StaleResource` after).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRes {
    pub machine: u8,
    /// The life of `machine` that opened it.
    pub epoch: u32,
    pub id: ResId,
}

/// One `OP_RES` request: `op` on `r`'s machine with `words[1..4]` as given, `len` and
/// `args_len` in its [`mach::res_word`], a control's two arguments and `data` in the ICA;
/// `take` reads the reply's bytes (as many as its `words[2]` says) and words.
#[allow(clippy::too_many_arguments)]
fn res_request<T>(
    machine: u8,
    op: u64,
    words123: [u64; 3],
    len: usize,
    args: (u64, u64),
    data: &[u8],
    args_len: usize,
    take: impl FnOnce(&[u8], &Msg) -> T,
) -> Result<T, Error> {
    if data.len() > mach::RES_REMOTE_MAX || len > mach::RES_REMOTE_MAX {
        return Err(Error::TooLong);
    }
    let server = server()?.as_target();
    let w0 = mach::res_word(u64::from(machine), op, len as u64, args_len as u64);
    crate::fs::call_with_ica(
        server,
        mach::OP_RES,
        [w0, words123[0], words123[1], words123[2], 0, 0],
        |ica| {
            ica[..8].copy_from_slice(&args.0.to_le_bytes());
            ica[8..16].copy_from_slice(&args.1.to_le_bytes());
            let at = mach::RES_DATA_AT;
            ica[at..at + data.len()].copy_from_slice(data);
        },
        |ica, reply: &Msg| {
            let n = (reply.words[2] as usize).min(mach::RES_REMOTE_MAX);
            take(&ica[..n], reply)
        },
    )
}

/// Open resource `name` (`c1/pipe/p`: core 1 of that machine; `here`: its core 0) on
/// machine `machine` with `args` and `rights`, as this program's user (the rights are
/// checked there).
pub fn res_open(machine: u8, name: &str, args: &[u8], rights: Rights) -> Result<RemoteRes, Error> {
    let mut data = Vec::with_capacity(name.len() + args.len());
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(args);
    res_request(
        machine,
        mach::RES_OPEN,
        [0, u64::from(rights.0), 0],
        name.len(),
        (0, 0),
        &data,
        args.len(),
        |_, reply| RemoteRes {
            machine,
            epoch: reply.words[1] as u32,
            id: ResId(reply.words[0]),
        },
    )
}

/// The resource named `name` (`c0/pipe/p`) on machine `machine`, as its kernel lists it.
pub fn res_find(machine: u8, name: &str) -> Result<RemoteRes, Error> {
    res_request(
        machine,
        mach::RES_FIND,
        [0, 0, 0],
        name.len(),
        (0, 0),
        name.as_bytes(),
        0,
        |_, reply| RemoteRes {
            machine,
            epoch: reply.words[1] as u32,
            id: ResId(reply.words[0]),
        },
    )
}

/// The resources of core `core` of machine `machine` (as its `RES_LIST` gives them), and
/// that machine's life. Read a page at a time (`RES_LIST_MAX` records): a resource made
/// or closed meanwhile may be missed; none is listed twice.
pub fn res_list(machine: u8, core: usize) -> Result<(Vec<ResInfo>, u32), Error> {
    let size = core::mem::size_of::<ResInfo>();
    let mut all: Vec<ResInfo> = Vec::new();
    let mut epoch = 0;
    let mut life = None;
    // Bounded: a core holds at most some thousands of resources.
    for _ in 0..1024 {
        let (total, got) = res_request(
            machine,
            mach::RES_LIST,
            [0, 0, core as u64],
            0,
            (all.len() as u64, 0),
            &[],
            0,
            |bytes, reply| {
                epoch = reply.words[1] as u32;
                let got: Vec<ResInfo> = bytes
                    .chunks_exact(size)
                    .map(bytemuck::pod_read_unaligned)
                    .collect();
                (reply.words[0] as usize, got)
            },
        )?;
        // Pages of one life of that machine only; a resource listed twice (the list moved
        // between two pages) once.
        if *life.get_or_insert(epoch) != epoch {
            return Err(Error::StaleResource);
        }
        let done = got.is_empty();
        for r in got {
            if !all.iter().any(|x| x.id == r.id) {
                all.push(r);
            }
        }
        if done || all.len() >= total {
            break;
        }
    }
    Ok((all, epoch))
}

/// Close `r`.
pub fn res_close(r: &RemoteRes) -> Result<(), Error> {
    res_on(r, mach::RES_CLOSE, 0, 0, (0, 0), &[], |_, _| ())
}

/// `r`'s record, as its machine's kernel has it.
pub fn res_info(r: &RemoteRes) -> Result<ResInfo, Error> {
    res_on(r, mach::RES_INFO, 0, 0, (0, 0), &[], |bytes, _| {
        (bytes.len() == core::mem::size_of::<ResInfo>())
            .then(|| bytemuck::pod_read_unaligned(bytes))
    })?
    .ok_or(Error::Unknown)
}

/// Read at most `buf.len()` (at most `abi::mach::RES_REMOTE_MAX`) bytes of `r` with
/// `arg`: the read's result, as on that machine (bytes read, or a value: a compute's
/// bind). A pipe is never waited for there: `Again` while it is empty with a writer held
/// (ask again later); 0 bytes is its EOF. A read that ends `TimedOut` may have taken its
/// bytes there (the answer, not the request, was lost): a pipe's stream then has a gap.
pub fn res_read(r: &RemoteRes, buf: &mut [u8], arg: u64) -> Result<usize, Error> {
    res_on(
        r,
        mach::RES_READ,
        arg,
        buf.len(),
        (0, 0),
        &[],
        |bytes, reply| {
            let n = bytes.len().min(buf.len());
            buf[..n].copy_from_slice(&bytes[..n]);
            reply.words[0] as usize
        },
    )
}

/// The record of process resource `r` of another machine (a read of it, as
/// `res::process_info` locally): its pid there, name, state.
pub fn res_process_info(r: &RemoteRes) -> Result<crate::abi::ProcInfo, Error> {
    let mut out = crate::abi::ProcInfo::EMPTY;
    res_read(r, bytemuck::bytes_of_mut(&mut out), 0)?;
    Ok(out)
}

/// Write `bytes` (at most `abi::mach::RES_REMOTE_MAX`) to `r` with `arg`: how many were
/// taken. A full pipe is `Again` (offer them again later). A write that ends `TimedOut`
/// may have been made there: offered again, a pipe would get its bytes twice.
pub fn res_write(r: &RemoteRes, bytes: &[u8], arg: u64) -> Result<usize, Error> {
    res_on(
        r,
        mach::RES_WRITE,
        arg,
        bytes.len(),
        (0, 0),
        bytes,
        |_, reply| reply.words[0] as usize,
    )
}

/// Control command `cmd` on `r` with `arg0` and `arg1`: its value. `PIPE_HOLD` with `arg1`
/// 0 holds the end for this program (that machine's `machd` holds it, and lets it go when
/// this program drops it or ends); `SEM_P` never waits (`Again` at 0).
pub fn res_control(r: &RemoteRes, cmd: u64, arg0: u64, arg1: u64) -> Result<u64, Error> {
    res_on(
        r,
        mach::RES_CONTROL,
        cmd,
        0,
        (arg0, arg1),
        &[],
        |_, reply| reply.words[0],
    )
}

/// An `OP_RES` on the id of `r`.
fn res_on<T>(
    r: &RemoteRes,
    op: u64,
    arg: u64,
    len: usize,
    args: (u64, u64),
    data: &[u8],
    take: impl FnOnce(&[u8], &Msg) -> T,
) -> Result<T, Error> {
    res_request(
        r.machine,
        op,
        [u64::from(r.epoch), r.id.0, arg],
        len,
        args,
        data,
        0,
        take,
    )
}

/// Move process `pid` of this machine (this program's child or other descendant, as for
/// `MIGRATE`) to `machine`, on `core` (`None`: its last), where it runs on from where it
/// stopped, as this program's user; its new name there and the image's length. The
/// kernel writes the stopped process out as an image (`sys::migrate_export`), which goes to `machine`'s `machd` in
/// pieces (`abi::mach::OP_MOVE`) and is started there (`MIGRATE_IMPORT`); then the
/// process here ends, its status `ENDED_MOVED_AWAY` naming its new pid and machine, or,
/// if any step failed, runs on here; if `machine` cannot be told to give the move up
/// (it does not answer, but is not known to be down), the process stays stopped here
/// (`TimedOut`): it might run there. `NotSupported` for a process with shared memory
/// attached; the process's resource ids (a pipe as its standard output) name this
/// machine's resources, which it cannot reach from there.
pub fn migrate(pid: Pid, machine: u8, core: Option<u32>) -> Result<(Remote, usize), Error> {
    let max = crate::abi::syscall::MAX_MOVE_IMAGE as usize;
    let mut image = alloc::vec![0u8; 256 << 10];
    let mut tries = 0;
    let len = loop {
        match sys::migrate_export(pid, &mut image) {
            Ok(n) => break n,
            // It grew since the last look: as long as it needs now, up to the bound.
            Err(Error::TooLong) if tries < 4 => {
                let need = u64::from_le_bytes(image[..8].try_into().unwrap_or([0; 8])) as usize;
                if need <= image.len() || need > max {
                    return Err(Error::TooLong);
                }
                image = alloc::vec![0u8; need];
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let image = &image[..len];
    // The move's name there: this program and the moment, so two moves never meet.
    let token = (sys::clock_ns().unwrap_or(1) ^ pid.0.rotate_left(32)) | 1;
    let core = core.map_or(mach::ANY_CORE, u64::from);
    let moved = send_image(machine, token, image).and_then(|()| {
        move_request(machine, mach::MOVE_START, [token, core, 0], &[]).map(|(pid, epoch)| Remote {
            machine,
            epoch,
            pid: Pid(pid),
        })
    });
    match moved {
        Ok(there) => match sys::migrate_finish(pid, Some((machine, there.pid))) {
            Ok(()) => Ok((there, len)),
            Err(e) => {
                // Ended here meanwhile (killed): it must not live on there alone.
                let _ = kill(&there);
                Err(e)
            }
        },
        Err(e) => {
            // Given up there first (a start whose answer was lost is undone), then here.
            match move_request(machine, mach::MOVE_DROP, [token, 0, 0], &[]) {
                Ok(_) | Err(Error::Gone) => {
                    let _ = sys::migrate_finish(pid, None);
                    Err(e)
                }
                // Whether it runs there is not known: it stays stopped here (kill it, or
                // look for it there), rather than perhaps run twice.
                Err(_) => Err(Error::TimedOut),
            }
        }
    }
}

/// Start the ELF executable `image` (e.g. read from a disk: `run /BIN/PROG -m M`) on
/// `machine`, shown as `words[0]`, with `words[1..]` as its arguments, on the core and with
/// the streams `core` says (as [`spawn`]'s core word). The image goes there in pieces as a
/// moving process's does ([`migrate`]), then `abi::mach::MOVE_SPAWN` starts it there as a
/// remote spawn (`SPAWN_IMAGE`, which checks it: [`Error::BadExecutable`]); if that fails
/// the image there is dropped. `TooLong` for words of more than `RES_REMOTE_MAX` bytes.
pub fn spawn_image(machine: u8, core: u64, image: &[u8], words: &[&str]) -> Result<Remote, Error> {
    let mut text = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w.is_empty() || w.as_bytes().contains(&0) {
            return Err(Error::InvalidArgument);
        }
        if i > 0 {
            text.push(0);
        }
        text.extend_from_slice(w.as_bytes());
    }
    if text.is_empty() {
        return Err(Error::InvalidArgument);
    }
    if text.len() > mach::RES_REMOTE_MAX {
        return Err(Error::TooLong);
    }
    let token = (sys::clock_ns().unwrap_or(1) ^ u64::from(machine).rotate_left(48)) | 1;
    let started = send_image(machine, token, image).and_then(|()| {
        move_request(machine, mach::MOVE_SPAWN, [token, core, 0], &text).map(|(pid, epoch)| {
            Remote {
                machine,
                epoch,
                pid: Pid(pid),
            }
        })
    });
    if started.is_err() {
        // Nothing is left there: the image (or, had the start's answer been lost, the
        // program) is dropped; a drop that fails leaves the image to go with this program.
        let _ = move_request(machine, mach::MOVE_DROP, [token, 0, 0], &[]);
    }
    started
}

/// The image, piece by piece, to `machine`. The first piece (which makes the image there)
/// is waited for; the others go several at once (as reply-less calls, `fs::nowait`, up to
/// its `MAX_PENDING`), each an mrpc request of its own, and the machine there puts a piece
/// that overtook one sent before it (lost and sent again) aside until that one comes
/// (`user/machd/src/moves.rs`). One at a time, each piece waited for a whole round trip.
/// Sending stops at the first piece refused or lost. A program that collects completions
/// of any ticket itself (`COLLECT` with `ANY`) must not move processes between machines
/// (as it must not make reply-less file calls).
fn send_image(machine: u8, token: u64, image: &[u8]) -> Result<(), Error> {
    let mut pieces = image.chunks(mach::RES_REMOTE_MAX);
    let first = pieces.next().ok_or(Error::InvalidArgument)?;
    move_request(
        machine,
        mach::MOVE_PUT,
        [token, 0, image.len() as u64],
        first,
    )?;
    let server = server()?;
    // Earlier reply-less file calls of this program are settled first, their error kept
    // for the program's own `settle`.
    let earlier = crate::fs::settle().err();
    let mut sent = Ok(());
    for (i, piece) in pieces.enumerate() {
        if crate::fs::nowait::failed() {
            break;
        }
        let at = ((i + 1) * mach::RES_REMOTE_MAX) as u64;
        let w0 = mach::res_word(u64::from(machine), mach::MOVE_PUT, piece.len() as u64, 0);
        sent = crate::fs::nowait::submit(
            server,
            mach::OP_MOVE,
            [w0, token, at, image.len() as u64, 0, 0],
            |ica| ica[..piece.len()].copy_from_slice(piece),
        );
        if sent.is_err() {
            break;
        }
    }
    // Every piece's answer, the first error among them.
    let answers = crate::fs::settle();
    if let Some(e) = earlier {
        crate::fs::nowait::note_failed(e);
    }
    sent.and(answers)
}

/// One `OP_MOVE` request: its value and the machine's life.
fn move_request(machine: u8, op: u64, w: [u64; 3], piece: &[u8]) -> Result<(u64, u32), Error> {
    let server = server()?.as_target();
    let w0 = mach::res_word(u64::from(machine), op, piece.len() as u64, 0);
    crate::fs::call_with_ica(
        server,
        mach::OP_MOVE,
        [w0, w[0], w[1], w[2], 0, 0],
        |ica| ica[..piece.len()].copy_from_slice(piece),
        |_, reply: &Msg| (reply.words[0], reply.words[1] as u32),
    )
}
