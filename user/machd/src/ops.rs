//! What one machine asks of another, both halves: the local request turned into an mrpc
//! request ([`remote_request`]), the request performed on the other machine ([`perform`],
//! and [`worker`] for those that wait), and the reply turned into the local answer
//! ([`local_answer`]).
//!
//! | mrpc op | payload | reply |
//! |---|---|---|
//! | [`R_NULL`] | - | - |
//! | [`R_SPAWN`] | core word (`abi::mach::OP_SPAWN`'s: [`mach::ANY_CORE`] is the last core, [`default_core`]; [`mach::SPAWN_RELAY`]: output to a pipe), `PROG\0ARG\0...` | pid (u64) |
//! | [`R_WAIT`] | pid, timeout ns | how (`ENDED_*`), code |
//! | [`R_KILL`] | pid | - |
//! | [`R_PS`] | index | pid, state, count, name (24 bytes) |
//! | [`R_COUNT`] | - | the requesting machine's counter after adding one |
//! | [`R_OUTPUT`] | pid | 1 if the output ended (else 0), then what was buffered (at most [`OUTPUT_MAX`]) |
//! | [`R_INPUT`] | pid, flags (1: the input ends after these bytes), the bytes (at most `abi::mach::INPUT_MAX`) | bytes written into its input pipe (u64) |
//! | `R_FS` (8) | a file request: see `files` | |
//! | `R_CALL` (10) | a call to a function by name: see `calls` | |
//! | `R_RES` (11) | a resource operation: see `resops` | |
//! | `R_MOVE` (12) | a piece of a moving process's image, its start, its drop: see `moves` | |
//!
//! Output (`run -m M` in the foreground): a program spawned with `SPAWN_RELAY` writes to a
//! pipe this `machd` holds the reading end of ([`spawn`]); each `R_OUTPUT` answers what the
//! pipe holds without waiting (a read only once `RES_INFO` shows bytes, or no writer left),
//! and the requesting `machd` prints it on its own console. The output has ended once the
//! pipe is empty and no writer holds it, or its writer has ended (a killed program does not
//! drop its end: the pipe's own waiters would notice, but nothing waits here); the pipe is
//! closed then, or when an `R_WAIT` collects the program. A requester that stops asking
//! (its shell killed, its machine gone) leaves the program to block once the pipe (4 KiB)
//! is full, until it is killed or waited for.
//!
//! Rights: the request carries the user the local caller acted as (the kernel vouched for
//! it in `Received::sender_user`). `R_SPAWN` and `R_KILL` are made acting as that user
//! (`THREAD_SETUSER` to it and back, that thread alone: `machd` is a boot program, which
//! may), so this machine's
//! kernel checks them as for a local program of that user, and the spawned program runs as
//! that user. A process `machd` spawned is its child, which the kernel would let it kill
//! and wait for whatever user it acts as: for those, `R_KILL` and `R_WAIT` are allowed only
//! to the user it was spawned for (or the administrator), checked here.

use crate::{now, with, State};
use alloc::vec::Vec;
use mrpc::{Error, Header};
use ulib::abi::mach;
use ulib::abi::res::{ResId, UserId};
use ulib::abi::syscall::control;
use ulib::abi::{Pid, Priority, ProcInfo};
use ulib::stdio::{self, Stream};
use ulib::{res, sem, sys};

/// The administrator (the user boot programs and the shell start as).
const ADMIN: u32 = 1;

pub const R_NULL: u16 = 1;
pub const R_SPAWN: u16 = 2;
pub const R_WAIT: u16 = 3;
pub const R_KILL: u16 = 4;
pub const R_PS: u16 = 5;
pub const R_COUNT: u16 = 6;
pub const R_OUTPUT: u16 = 7;
pub const R_INPUT: u16 = 9;

/// Capacity of a remote program's input pipe ([`mach::SPAWN_STDIN`]).
const INPUT_PIPE: usize = 4096;

/// Most bytes of output one `R_OUTPUT` answers (within mrpc's 1,024-byte payload).
pub const OUTPUT_MAX: usize = 1000;

/// Exit statuses of collected programs kept for a wait asked again (the oldest goes first).
pub const REAPED_MAX: usize = 64;
/// Most programs this `machd` runs for one user (started and not yet waited for): one
/// user's programs that nobody waits for meet `Limit` here, well before this process's
/// children fill the kernel's limit for every user (a regression: 1,024 unwaited remote
/// spawns of one user made every later one, anyone's, fail).
pub const SPAWNED_PER_USER: usize = 128;

/// Is there room for one more program of `user` ([`SPAWNED_PER_USER`])?
pub(crate) fn room_for(s: &State, user: u32) -> Result<(), Error> {
    let held = s.spawned.iter().filter(|(_, u)| u.0 == user).count();
    if held >= SPAWNED_PER_USER {
        return Err(Error::Limit);
    }
    Ok(())
}

/// Most processes a remote `ps` lists.
const PS_MAX: usize = 256;

/// Process `pid`'s status if another worker collected it: two slices of one wait may be
/// waiting at once (one its requester gave up on, still queued here, and the next), and
/// the kernel gives the status to one of them. The other's `wait` fails at that moment,
/// perhaps before the first has noted the status: it looks until `pid` is no longer
/// among the spawned programs (a bounded look).
fn collected_by_another(pid: Pid) -> Option<Vec<u8>> {
    for _ in 0..1000 {
        let (spawned, st) = with(|s| {
            (
                s.spawned.iter().any(|(q, _)| *q == pid),
                s.reaped
                    .iter()
                    .find(|(q, _, _)| *q == pid)
                    .map(|e| e.2.clone()),
            )
        });
        if st.is_some() {
            return st;
        }
        if !spawned {
            return None;
        }
        let _ = sys::sleep_ns(1_000_000);
    }
    None
}

/// Work for a [`worker`]: a remote `wait`.
pub struct Job {
    header: Header,
    pid: Pid,
    timeout_ns: u64,
}

/// Word `i` (little-endian u64) of payload `p`.
pub(crate) fn word(p: &[u8], i: usize) -> Result<u64, Error> {
    p.get(i * 8..i * 8 + 8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or(Error::InvalidArgument)
}

/// `ws` as a payload.
pub(crate) fn words(ws: &[u64]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// An mrpc request to start: (machine, mrpc op, payload), its deadline (relative ns) and
/// the server life it names.
pub type RemoteCall = ((u8, u16, Vec<u8>), u64, Option<u32>);

/// The mrpc request for local request `op` with `w` to machine `m`.
pub fn remote_request(op: u64, m: u8, w: &[u64; 6]) -> Result<RemoteCall, Error> {
    let deadline = mach::DEFAULT_DEADLINE_NS;
    let epoch = || u32::try_from(w[1]).map_err(|_| Error::InvalidArgument);
    Ok(match op {
        mach::OP_PING => {
            // Capped: a ping without end to a machine that never answers would hold a
            // place in its window for as long (found by an audit).
            let d = match w[1] {
                0 => deadline,
                d if d > mach::DEADLINE_MAX_NS => return Err(Error::InvalidArgument),
                d => d,
            };
            ((m, R_NULL, Vec::new()), d, None)
        }
        mach::OP_SPAWN => {
            let mut p = words(&[w[1]]);
            let cmd: Vec<u8> = w[2..6].iter().flat_map(|x| x.to_le_bytes()).collect();
            let len = cmd.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            if len == 0 {
                return Err(Error::InvalidArgument);
            }
            p.extend_from_slice(&cmd[..len]);
            ((m, R_SPAWN, p), deadline, None)
        }
        mach::OP_KILL => ((m, R_KILL, words(&[w[2]])), deadline, Some(epoch()?)),
        mach::OP_PS => ((m, R_PS, words(&[w[1]])), deadline, None),
        mach::OP_COUNT => ((m, R_COUNT, Vec::new()), deadline, None),
        mach::OP_OUTPUT => ((m, R_OUTPUT, words(&[w[2]])), deadline, Some(epoch()?)),
        _ => return Err(Error::NoSuchCall),
    })
}

/// Longest slice of a remote wait: one `R_WAIT` waits at most this long, and the next
/// slice is asked for while the caller's own timeout lasts. A request in flight holds back
/// its client's window (the requests after it may run at most `mrpc::WINDOW` ahead), so a
/// wait of a minute in one request would hold every other request to that machine once
/// the window filled, the relayed output a waited-for program needs to go on included.
pub const WAIT_SLICE_NS: u64 = 500_000_000;

/// What is left of a local caller's remote wait (`OP_WAIT`), made in slices.
#[derive(Clone, Copy)]
pub struct WaitLeft {
    pid: u64,
    epoch: u32,
    /// The caller's timeout ends here (absolute ns; `u64::MAX`: never).
    until: u64,
    user: u32,
}

impl WaitLeft {
    /// `OP_WAIT`'s words (machine, epoch, pid, timeout ns) asked by `user` at `now`.
    pub fn new(w: &[u64; 6], user: u32, now: u64) -> Result<WaitLeft, Error> {
        Ok(WaitLeft {
            pid: w[2],
            epoch: u32::try_from(w[1]).map_err(|_| Error::InvalidArgument)?,
            until: now.saturating_add(w[3]),
            user,
        })
    }

    /// Has the caller's timeout passed at `now`?
    pub fn over(&self, now: u64) -> bool {
        now > self.until
    }

    /// The next slice's request to machine `m` at `now`, and the user it acts as: `None`
    /// once the caller's timeout has passed (the first slice of a wait of timeout 0, a
    /// look, is asked at its start).
    pub fn next(&self, m: u8, now: u64) -> Option<(RemoteCall, u32)> {
        if self.over(now) {
            return None;
        }
        let slice = (self.until - now).min(WAIT_SLICE_NS);
        // The request lasts as long as its slice, and a little more for the answer.
        let deadline = slice.saturating_add(mach::DEFAULT_DEADLINE_NS);
        let payload = words(&[self.pid, slice]);
        Some((
            ((m, R_WAIT, payload), deadline, Some(self.epoch)),
            self.user,
        ))
    }
}

/// The local caller's answer from the reply's payload.
/// `epoch` is the answering machine's (the life that spawned a process names it).
pub fn local_answer(op: u64, p: &[u8], started: u64, epoch: u32) -> Result<[u64; 6], Error> {
    Ok(match op {
        mach::OP_PING => [now().saturating_sub(started), 0, 0, 0, 0, 0],
        mach::OP_SPAWN => [word(p, 0)?, u64::from(epoch), 0, 0, 0, 0],
        mach::OP_WAIT => [word(p, 0)?, word(p, 1)?, 0, 0, 0, 0],
        mach::OP_KILL => [0; 6],
        mach::OP_COUNT => [word(p, 0)?, 0, 0, 0, 0, 0],
        mach::OP_OUTPUT => {
            let (&ended, bytes) = p.split_first().ok_or(Error::InvalidArgument)?;
            if !bytes.is_empty() {
                ulib::print!("{}", alloc::string::String::from_utf8_lossy(bytes));
            }
            [bytes.len() as u64, u64::from(ended != 0), 0, 0, 0, 0]
        }
        mach::OP_PS => [
            word(p, 0)?,
            word(p, 1)?,
            word(p, 2)?,
            word(p, 3)?,
            word(p, 4)?,
            word(p, 5)?,
        ],
        _ => return Err(Error::NoSuchCall),
    })
}

/// Run `f` with this thread acting as `user`, then as this process's own user again. The
/// thread alone (`THREAD_SETUSER`): the other threads, making requests of their own
/// meanwhile (a file worker's to `fs`), go on acting as `machd`.
pub(crate) fn as_user<R>(user: u32, f: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
    if user == 0 {
        // Nobody acts as the kernel.
        return Err(Error::Denied);
    }
    res::thread_setuser(Some(UserId(user)))?;
    let r = f();
    // Back to our own user; this cannot be refused (it is the process's own).
    let _ = res::thread_setuser(None);
    r
}

/// Perform request `h` from another machine: its reply payload, or `None` when a worker
/// will finish it (a `wait`).
pub fn perform(s: &mut State, h: &Header, p: &[u8]) -> Option<Result<Vec<u8>, Error>> {
    // No `machd` acts for the kernel's user: a request saying so is forged, and would
    // pass every share (the kernel is trusted with whole tables).
    if h.user == 0 {
        return Some(Err(Error::Denied));
    }
    Some(match h.op {
        R_NULL => Ok(Vec::new()),
        R_SPAWN => spawn(s, h.user, p),
        R_WAIT => {
            // At most one slice, whatever the requester asks: a worker waits that long,
            // and four waits without end from a hostile peer held every worker (found by a
            // review; an honest machd asks slices of `WAIT_SLICE_NS` and asks again).
            let (pid, timeout_ns) = match (word(p, 0), word(p, 1)) {
                (Ok(pid), Ok(t)) => (Pid(pid), t.min(WAIT_SLICE_NS)),
                _ => return Some(Err(Error::InvalidArgument)),
            };
            // Collected already (by a slice whose answer the requester gave up on, or
            // lost): the same status again.
            if let Some((_, _, st)) = s
                .reaped
                .iter()
                .find(|(q, u, _)| *q == pid && (u.0 == h.user || h.user == ADMIN))
            {
                return Some(Ok(st.clone()));
            }
            // Only the user it was spawned for (or the administrator) may wait for it.
            let mine = s
                .spawned
                .iter()
                .any(|(q, u)| *q == pid && (u.0 == h.user || h.user == ADMIN));
            if !mine {
                return Some(Err(Error::NoSuchProcess));
            }
            // Not shared out by user: a wait's slices that their requester gave up on
            // (late behind other waits) stay queued and would count in its user's share,
            // so a live wait's next slice could be refused (found by a review).
            if s.jobs.len() >= crate::WORKERS as usize * 8 {
                return Some(Err(Error::Busy));
            }
            s.jobs.push_back(Job {
                header: *h,
                pid,
                timeout_ns,
            });
            match crate::jobs_sem().map(sem::v) {
                Some(Ok(())) => return None,
                _ => {
                    s.jobs.pop_back();
                    Err(Error::Busy)
                }
            }
        }
        R_KILL => match word(p, 0) {
            Ok(pid) => kill(s, h.user, Pid(pid)),
            Err(e) => Err(e),
        },
        R_COUNT => {
            let c = &mut s.counters[usize::from(h.from)];
            *c += 1;
            Ok(words(&[*c]))
        }
        R_PS => match word(p, 0) {
            Ok(i) => ps(i),
            Err(e) => Err(e),
        },
        R_OUTPUT => match word(p, 0) {
            Ok(pid) => output(s, h.user, Pid(pid)),
            Err(e) => Err(e),
        },
        R_INPUT => input(s, h.user, p),
        crate::files::R_FS => return crate::files::perform(s, h, p),
        crate::calls::R_CALL => return crate::calls::perform(s, h, p),
        crate::resops::R_RES => crate::resops::perform(s, h, p),
        crate::moves::R_MOVE => crate::moves::perform(s, h, p),
        _ => Err(Error::NoSuchCall),
    })
}

/// Where a program another machine runs here goes when it names no core: the last core
/// online, away from core 0, where `netdrv`, `netd` and this `machd` serve every
/// cross-machine request (a remote job there would slow them; on one core, core 0).
pub(crate) fn default_core() -> usize {
    let mut cores = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut cores).unwrap_or(0);
    cores[..n].iter().rposition(|c| c.online != 0).unwrap_or(0)
}

fn spawn(s: &mut State, user: u32, p: &[u8]) -> Result<Vec<u8>, Error> {
    let core = word(p, 0)?;
    let pid = start(
        s,
        user,
        core,
        p.get(8..).ok_or(Error::InvalidArgument)?,
        None,
    )?;
    Ok(words(&[pid.0]))
}

/// Start a program for `user` as a remote spawn: `text` is `PROG\0ARG\0...`, `core` the
/// `OP_SPAWN` core word (the core, `SPAWN_RELAY`, `SPAWN_STDIN`); the program is PROG of
/// the boot archive or, given, the ELF `image` (shown as PROG: `OP_MOVE`'s `MOVE_SPAWN`).
pub(crate) fn start(
    s: &mut State,
    user: u32,
    core: u64,
    text: &[u8],
    image: Option<&[u8]>,
) -> Result<Pid, Error> {
    room_for(s, user)?;
    let text = core::str::from_utf8(text).map_err(|_| Error::InvalidArgument)?;
    let mut parts = text.split('\0');
    let prog = parts
        .next()
        .filter(|p| !p.is_empty())
        .ok_or(Error::InvalidArgument)?;
    let args: Vec<&str> = parts.collect();
    let relay = core & mach::SPAWN_RELAY != 0;
    let stdin = core & mach::SPAWN_STDIN != 0;
    let core = match core & mach::ANY_CORE {
        mach::ANY_CORE => default_core(),
        c => usize::try_from(c).map_err(|_| Error::NoSuchCore)?,
    };
    if !relay && !stdin {
        let pid = as_user(user, || match image {
            None => sys::spawn_on(prog, &args, Priority::App, core),
            Some(image) => sys::spawn_image(image, prog, &args, Priority::App, Some(core)),
        })?;
        s.spawned.push((pid, UserId(user)));
        return Ok(pid);
    }
    // The pipes are the user's (opened acting as it), so the program may use them and only
    // that user's `R_OUTPUT`s and `R_INPUT`s (made acting as it) may.
    let (pid, output, input) = as_user(user, || {
        let output = relay.then(|| stdio::pipe(None, None)).transpose()?;
        let input = match stdin
            .then(|| stdio::pipe(None, Some(INPUT_PIPE as u64)))
            .transpose()
        {
            Ok(p) => p,
            Err(e) => {
                output.map(res::close);
                return Err(e);
            }
        };
        let close = || {
            output.map(res::close);
            input.map(res::close);
        };
        let stream = |p: Option<ResId>| p.map_or(Stream::Console, Stream::Pipe);
        let (i, o) = (stream(input), stream(output));
        let started = match image {
            None => stdio::spawn(prog, &args, Priority::App, Some(core), i, o),
            Some(image) => stdio::spawn_image(image, prog, &args, Priority::App, Some(core), i, o),
        };
        let pid = match started {
            Ok(pid) => pid,
            Err(e) => {
                close();
                return Err(e);
            }
        };
        // The ends the program alone uses: only it writes its output (once it lets go,
        // the pipe reads EOF) and only it reads its input (then a write is `Gone`).
        let dropped = output
            .map_or(Ok(0), |p| {
                res::control(p, control::PIPE_DROP, control::PIPE_WRITE_END, 0)
            })
            .and(input.map_or(Ok(0), |p| {
                res::control(p, control::PIPE_DROP, control::PIPE_READ_END, 0)
            }));
        if let Err(e) = dropped {
            let _ = sys::kill(pid);
            close();
            return Err(e);
        }
        Ok((pid, output, input))
    })?;
    s.spawned.push((pid, UserId(user)));
    if let Some(pipe) = output {
        s.outputs.push((pid, pipe, UserId(user)));
    }
    if let Some(pipe) = input {
        s.inputs.push((pid, pipe, UserId(user)));
    }
    Ok(pid)
}

/// `R_INPUT` for `user` (payload: pid, flags, bytes): as many of the bytes as fit now into
/// process `pid`'s input pipe (never waiting: this is the network thread), and the end of
/// its input once all were written and the flags ask for it. `Gone` once no one reads it.
fn input(s: &mut State, user: u32, p: &[u8]) -> Result<Vec<u8>, Error> {
    let (pid, end) = (Pid(word(p, 0)?), word(p, 1)? & 1 != 0);
    let bytes = &p[16..];
    let i = s
        .inputs
        .iter()
        .position(|(q, _, u)| *q == pid && (u.0 == user || user == ADMIN))
        .ok_or(Error::NoSuchProcess)?;
    let (_, pipe, owner) = s.inputs[i];
    let r = as_user(owner.0, || {
        let info = res::info(pipe)?;
        if info.detail >> 32 == 0 {
            return Err(Error::Gone);
        }
        let room = INPUT_PIPE
            .saturating_sub(info.size as usize)
            .min(bytes.len());
        if room == 0 {
            return Ok(0);
        }
        // Never waiting, even if another program of the user (whose pipe it is) filled it
        // since the look (a regression: the network thread waited, holding the state).
        match res::write(pipe, &bytes[..room], control::PIPE_NOWAIT) {
            Err(Error::Again) => Ok(0),
            r => r,
        }
    });
    match &r {
        // The end of its input: this machd lets go of the writing end, so the program
        // reads EOF once it has read the rest (the pipe is closed when it is waited for).
        Ok(n) if end && *n == bytes.len() => {
            let _ = as_user(owner.0, || {
                res::control(pipe, control::PIPE_DROP, control::PIPE_WRITE_END, 0)
            });
        }
        Ok(_) => {}
        // It reads no more: the pipe goes now.
        Err(_) => {
            let _ = as_user(owner.0, || res::close(pipe));
            s.inputs.swap_remove(i);
        }
    }
    r.map(|n| words(&[n as u64]))
}

/// `R_OUTPUT` for `user`: what process `pid`'s output pipe holds now (see the module's
/// documentation).
fn output(s: &mut State, user: u32, pid: Pid) -> Result<Vec<u8>, Error> {
    let i = s
        .outputs
        .iter()
        .position(|(q, _, u)| *q == pid && (u.0 == user || user == ADMIN))
        .ok_or(Error::NoSuchProcess)?;
    let (_, pipe, owner) = s.outputs[i];
    let r = as_user(owner.0, || {
        let held = |size: u64| -> Result<Vec<u8>, Error> {
            let mut buf = alloc::vec![0u8; (size as usize).min(OUTPUT_MAX)];
            // Never waiting: another program of the user may have emptied it since the look.
            let n = match res::read(pipe, &mut buf, control::PIPE_NOWAIT) {
                Err(Error::Again) => 0,
                r => r?,
            };
            buf.truncate(n);
            let mut out = alloc::vec![0u8];
            out.extend_from_slice(&buf);
            Ok(out)
        };
        let info = res::info(pipe)?;
        let writers = info.detail & 0xffff_ffff;
        if info.size > 0 {
            return Ok((held(info.size)?, false));
        }
        // A list that cannot be had whole says nothing: the program may run on.
        let ended =
            writers == 0 || sys::live_processes().is_ok_and(|l| !l.iter().any(|p| p.pid == pid));
        if ended {
            // It may have written its last bytes between the first look and its end: once
            // it has ended nothing more comes, so this look is the last word.
            let last = res::info(pipe)?;
            if last.size > 0 {
                return Ok((held(last.size)?, false));
            }
            let _ = res::close(pipe);
        }
        Ok((alloc::vec![u8::from(ended)], ended))
    });
    match r {
        Ok((out, ended)) => {
            if ended {
                s.outputs.swap_remove(i);
            }
            Ok(out)
        }
        Err(e) => Err(e),
    }
}

/// `R_KILL`: a program this `machd` started for `user` (any user's for the
/// administrator), or, for the administrator, another of its descendants (the kernel
/// checks that). Never `machd` itself: the kernel lets a process end itself, and the kill
/// is made by this process (a regression: any remote user could end the machine's `machd`
/// so). Another user's program, or one not started here, is refused.
fn kill(s: &State, user: u32, pid: Pid) -> Result<Vec<u8>, Error> {
    if sys::getpid().is_ok_and(|me| me == pid) {
        return Err(Error::Denied);
    }
    match s.spawned.iter().find(|(q, _)| *q == pid) {
        Some((_, owner)) if owner.0 != user && user != ADMIN => Err(Error::Denied),
        None if user != ADMIN => Err(Error::NoSuchProcess),
        _ => as_user(user, || sys::kill(pid)).map(|()| Vec::new()),
    }
}

fn ps(index: u64) -> Result<Vec<u8>, Error> {
    let mut buf = alloc::vec![ProcInfo::EMPTY; PS_MAX];
    let n = sys::processes(&mut buf)?;
    let p = buf[..n]
        .get(usize::try_from(index).map_err(|_| Error::InvalidArgument)?)
        .ok_or(Error::NoSuchProcess)?;
    let mut name = [0u8; 24];
    let len = p.name().len().min(24);
    name[..len].copy_from_slice(&p.name().as_bytes()[..len]);
    let mut out = words(&[p.pid.0, u64::from(p.state), n as u64]);
    out.extend_from_slice(&name);
    Ok(out)
}

/// Close the relayed output and input pipes of program `pid` (ended, or given up) and
/// forget them.
pub(crate) fn drop_pipes_of(s: &mut State, pid: Pid) {
    if let Some(i) = s.outputs.iter().position(|(q, _, _)| *q == pid) {
        let (_, pipe, owner) = s.outputs.swap_remove(i);
        let _ = as_user(owner.0, || res::close(pipe));
    }
    if let Some(i) = s.inputs.iter().position(|(q, _, _)| *q == pid) {
        let (_, pipe, owner) = s.inputs.swap_remove(i);
        let _ = as_user(owner.0, || res::close(pipe));
    }
}

/// A worker thread: performs the requests that wait, one at a time.
pub fn worker(_: u64) -> u64 {
    let Some(jobs) = crate::jobs_sem() else {
        return 1;
    };
    loop {
        if sem::p(jobs).is_err() {
            let _ = sys::sleep_ns(10_000_000);
            continue;
        }
        let Some(job) = with(|s| s.jobs.pop_front()) else {
            continue;
        };
        let mut r = sys::wait_timeout(Some(job.pid), job.timeout_ns)
            .map(|(_, st)| words(&[st.how, st.code]));
        if r == Err(Error::NoSuchProcess) {
            r = collected_by_another(job.pid).ok_or(Error::NoSuchProcess);
        }
        with(|s| {
            if let Ok(st) = &r {
                // Kept for a wait asked again (a slice the requester gave up on while it was
                // queued here would otherwise take the status with it).
                if let Some(&(_, user)) = s.spawned.iter().find(|(q, _)| *q == job.pid) {
                    if s.reaped.len() >= REAPED_MAX {
                        s.reaped.pop_front();
                    }
                    s.reaped.push_back((job.pid, user, st.clone()));
                }
                s.spawned.retain(|(q, _)| *q != job.pid);
                // Its output pipe, if nobody read it to the end, goes with it, and its input
                // pipe if nobody ended it.
                drop_pipes_of(s, job.pid);
            }
            s.finish(&job.header, &r);
        });
    }
}
