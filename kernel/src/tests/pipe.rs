//! Tests of the pipe resource (`res/pipe.rs`): bytes through pipes on another core, byte
//! for byte, with a full pipe blocking its writer; EOF once the writers have gone; a dead
//! reader or writer noticed; bad arguments and ids answered with clear errors; no frames
//! kept at the end; `PIPE_NOWAIT` (and a semaphore's `SEM_TRY`) answering `Again`; the buffer
//! taken at the first write, as charged.
//!
//! A kernel test has no pid, so a `spin` process stands in for the holder a shell would be
//! (it holds the ends the test uses), and killing it is how a holder dies.

use super::{end_and_reap, finish, frames_after, free_frames_per_core};
use crate::ktest::TestResult;
use crate::proc::{self, TEST_PARENT};
use crate::res::{self, ReadOut};
use crate::{kassert, ktest, smp};
use abi::res::{ResId, ResType, Rights};
use abi::syscall::control::{self, PIPE_DROP, PIPE_HOLD, PIPE_READ_END, PIPE_WRITE_END};
use abi::{Error, Pid, Priority};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// `what` failed with its error in the message.
fn e<T>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|err| format!("{what}: {err}"))
}

/// Open pipe `name` for everyone (the test acts as the kernel, its programs as a user).
fn open(name: &str, capacity: u64) -> Result<ResId, String> {
    e(
        res::open(name, &capacity.to_le_bytes(), Rights::EVERYONE_ALL),
        &format!("open {name}"),
    )
}

fn hold(pipe: ResId, end: u64, pid: Pid) -> Result<(), String> {
    e(res::control(pipe, PIPE_HOLD, end, pid.0), "hold").map(drop)
}

fn drop_end(pipe: ResId, end: u64, pid: Pid) -> Result<(), String> {
    e(res::control(pipe, PIPE_DROP, end, pid.0), "drop").map(drop)
}

fn read(pipe: ResId, len: u64) -> Result<Vec<u8>, String> {
    match e(res::read(pipe, len, 0), "read")? {
        ReadOut::Bytes(b) => Ok(b),
        ReadOut::Value(v) => Err(format!("read gave a value {v}")),
    }
}

/// The pipes and processes a test made, given back whatever happened.
struct Cleanup {
    pipes: Vec<ResId>,
    pids: Vec<Pid>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in &self.pids {
            end_and_reap(*pid);
        }
        for id in &self.pipes {
            let _ = res::close(*id);
        }
    }
}

ktest! {
    /// `upper` (on core 0) reads a pipe of core 1 and writes a small pipe of core 0: what
    /// comes out is the input upper-cased byte for byte (the pipes are smaller than the
    /// data, so both writers wait on full pipes and go on as they drain); once the input's
    /// writer lets go, `upper` reads EOF and ends, and its output reads EOF; no frames are
    /// kept.
    fn bytes_cross_cores_exactly_then_eof() -> TestResult {
        if smp::cores_planned() < 2 {
            crate::kskip!("needs 2 cores");
        }
        // Warm-up: RPCC agents (a kernel stack each) and heaps reach their working size.
        through_upper()?;
        let before = free_frames_per_core()?;
        through_upper()?;
        let after = frames_after(&before)?;
        kassert!(after == before, "frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// `upper` between a pipe of core 1 and one of core 0: the bytes, EOF, the end.
fn through_upper() -> TestResult {
    let mut c = Cleanup {
        pipes: Vec::new(),
        pids: Vec::new(),
    };
    let holder = e(
        proc::spawn("spin", &[], Priority::App, TEST_PARENT),
        "spawn spin",
    )?;
    c.pids.push(holder);
    let input = open("c1/pipe/pt-in", 48)?;
    c.pipes.push(input);
    let output = open("c0/pipe/pt-out", 16)?;
    c.pipes.push(output);
    for (p, end) in [
        (input, PIPE_READ_END),
        (input, PIPE_WRITE_END),
        (output, PIPE_READ_END),
        (output, PIPE_WRITE_END),
    ] {
        hold(p, end, holder)?;
    }
    let tag = format!("\u{1}stdio={:x},{:x}", input.0, output.0);
    let upper = e(
        proc::spawn("upper", &[tag.as_str()], Priority::App, TEST_PARENT),
        "spawn upper",
    )?;
    c.pids.push(upper);
    hold(input, PIPE_READ_END, upper)?;
    hold(output, PIPE_WRITE_END, upper)?;
    drop_end(input, PIPE_READ_END, holder)?;
    drop_end(output, PIPE_WRITE_END, holder)?;
    // Every byte value but the letters' changes: a pattern that shows misordering.
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + i / 256) as u8).collect();
    let mut got = Vec::new();
    for chunk in data.chunks(40) {
        let mut sent = 0;
        while sent < chunk.len() {
            let n = e(res::write(input, &chunk[sent..], 0), "write input")?;
            kassert!(n > 0 && n as usize <= chunk.len() - sent, "write took {n}");
            sent += n as usize;
        }
        // Read back what this chunk became (upper waits on the full output meanwhile).
        let want = got.len() + chunk.len();
        while got.len() < want {
            let b = read(output, 64)?;
            kassert!(
                !b.is_empty(),
                "EOF after {} of {} bytes",
                got.len(),
                data.len()
            );
            kassert!(b.len() <= 16, "read {} bytes from a 16-byte pipe", b.len());
            got.extend_from_slice(&b);
        }
    }
    kassert!(
        got.len() == data.len(),
        "got {} bytes, sent {}",
        got.len(),
        data.len()
    );
    let mut upper_cased = data.clone();
    upper_cased.make_ascii_uppercase();
    kassert!(
        got == upper_cased,
        "bytes differ from the first at {:?}",
        got.iter().zip(&upper_cased).position(|(a, b)| a != b)
    );
    // The input's last writer goes: upper reads EOF, drops its end and ends.
    drop_end(input, PIPE_WRITE_END, holder)?;
    let status = finish(upper, "upper", 60)?;
    c.pids.retain(|p| *p != upper);
    kassert!(
        status.how == abi::ENDED_EXIT && status.code == 0,
        "upper ended {status:?}"
    );
    kassert!(
        read(output, 64)?.is_empty(),
        "output not at EOF after upper ended"
    );
    let info = e(res::info(output), "info")?;
    kassert!(
        info.size == 0 && info.detail == 1 << 32,
        "output: {} buffered, ends {:#x}",
        info.size,
        info.detail
    );
    Ok(())
}

ktest! {
    /// A holder that ends without letting go is noticed: with its only reader dead, a
    /// writer waiting on a full pipe fails `Gone` (what was written stays readable); with
    /// its only writer dead, a reader waiting on the empty pipe reads EOF. The pipe is on
    /// another core when there is one.
    fn dead_reader_and_dead_writer() -> TestResult {
        let core = smp::cores_planned() - 1;
        let mut c = Cleanup { pipes: Vec::new(), pids: Vec::new() };
        let reader = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn reader")?;
        c.pids.push(reader);
        let writer = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn writer")?;
        c.pids.push(writer);
        let pipe = open(&format!("c{core}/pipe/pt-dead"), 8)?;
        c.pipes.push(pipe);
        kassert!(res::write(pipe, b"x", 0) == Err(Error::Gone), "write with no reader held");
        hold(pipe, PIPE_READ_END, reader)?;
        hold(pipe, PIPE_WRITE_END, writer)?;
        kassert!(e(res::write(pipe, b"0123456789", 0), "write")? == 8, "a write fills the pipe");
        kassert!(e(res::control(pipe, control::INFO, 0, 0), "info")? == 8, "8 bytes buffered");
        end_and_reap(reader);
        c.pids.retain(|p| *p != reader);
        kassert!(res::write(pipe, b"89", 0) == Err(Error::Gone), "write on a full pipe whose reader died");
        kassert!(read(pipe, 100)? == b"01234567", "what was written stays readable");
        end_and_reap(writer);
        c.pids.retain(|p| *p != writer);
        kassert!(read(pipe, 100)?.is_empty(), "EOF once the writer died");
        kassert!(e(res::info(pipe), "info")?.detail == 0, "no holder left");
        Ok(())
    }
}

ktest! {
    /// Bad arguments and ids get clear errors: a capacity of 0, too big or malformed; an
    /// unknown end or command; a holder that is no process (or the kernel, which has no
    /// pid); dropping an end not held; a pipe id of the wrong type or closed.
    fn bad_arguments_and_ids() -> TestResult {
        let core = smp::cores_planned() - 1;
        let name = format!("c{core}/pipe/pt-bad");
        for (args, what) in [
            (&0u64.to_le_bytes()[..], "capacity 0"),
            (&(1u64 << 20).to_le_bytes()[..], "capacity 1 MiB"),
            (&[1u8, 2, 3][..], "3 argument bytes"),
        ] {
            kassert!(res::open(&name, args, Rights::OWNER_ALL) == Err(Error::InvalidArgument), "{what}");
        }
        let mut c = Cleanup { pipes: Vec::new(), pids: Vec::new() };
        let pipe = e(res::open(&name, &[], Rights::OWNER_ALL), "open with the default capacity")?;
        c.pipes.push(pipe);
        let holder = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn")?;
        c.pids.push(holder);
        kassert!(res::control(pipe, PIPE_HOLD, 2, holder.0) == Err(Error::InvalidArgument), "end 2");
        kassert!(res::control(pipe, 99, 0, 0) == Err(Error::NotSupported), "command 99");
        let nobody = Pid::new(0, 60_000);
        kassert!(res::control(pipe, PIPE_HOLD, PIPE_READ_END, nobody.0) == Err(Error::NoSuchProcess), "no such pid");
        kassert!(res::control(pipe, PIPE_HOLD, PIPE_READ_END, 0) == Err(Error::NoSuchProcess), "the kernel holds");
        kassert!(res::control(pipe, PIPE_DROP, PIPE_READ_END, holder.0) == Err(Error::NoSuchProcess), "drop not held");
        hold(pipe, PIPE_READ_END, holder)?;
        hold(pipe, PIPE_READ_END, holder)?;
        kassert!(e(res::info(pipe), "info")?.detail == 1 << 32, "holding twice is once");
        kassert!(read(pipe, 10)?.is_empty(), "EOF with no writer");
        let forged = ResId::new(0, pipe.core(), ResType::Sem, pipe.generation(), pipe.slot());
        kassert!(res::control(forged, control::SEM_V, 0, 0) == Err(Error::WrongType), "a pipe named as a sem");
        e(res::close(pipe), "close")?;
        c.pipes.clear();
        kassert!(res::read(pipe, 1, 0).err() == Some(Error::StaleResource), "read closed");
        kassert!(res::write(pipe, b"x", 0) == Err(Error::StaleResource), "write closed");
        Ok(())
    }
}

ktest! {
    /// A reader of another core's empty pipe is told when bytes come: `upper` (core 0)
    /// waits for its input, a pipe of core 1; once it waits (answered `Busy`, in the pipe's
    /// stead on its own core), a write there sends its core a `PipeChanged` notice, and the
    /// bytes come out upper-cased.
    fn remote_reader_is_told_of_a_write() -> TestResult {
        if smp::cores_planned() < 2 {
            crate::kskip!("needs 2 cores");
        }
        let mut c = Cleanup { pipes: Vec::new(), pids: Vec::new() };
        let holder = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn spin")?;
        c.pids.push(holder);
        let input = open("c1/pipe/pt-told-in", 64)?;
        c.pipes.push(input);
        let output = open("c0/pipe/pt-told-out", 64)?;
        c.pipes.push(output);
        for (p, end) in [(input, PIPE_WRITE_END), (output, PIPE_READ_END)] {
            hold(p, end, holder)?;
        }
        let tag = format!("\u{1}stdio={:x},{:x}", input.0, output.0);
        let upper = e(proc::spawn("upper", &[tag.as_str()], Priority::App, TEST_PARENT), "spawn upper")?;
        c.pids.push(upper);
        hold(input, PIPE_READ_END, upper)?;
        hold(output, PIPE_WRITE_END, upper)?;
        let waits = crate::proc::sched::run_until(60_000_000_000, || waits_for_a_pipe(upper));
        kassert!(waits, "upper never waited for its input");
        let sent = || {
            let stats = &crate::percore::of(1).stats;
            stats.pipe_notices_sent.load(core::sync::atomic::Ordering::Relaxed)
        };
        let before = sent();
        kassert!(e(res::write(input, b"told", 0), "write input")? == 4, "a 4-byte write");
        let mut got = Vec::new();
        while got.len() < 4 {
            let b = read(output, 64)?;
            kassert!(!b.is_empty(), "EOF after {got:?}");
            got.extend_from_slice(&b);
        }
        kassert!(got == b"TOLD", "upper wrote {got:?}");
        kassert!(sent() > before, "core 1 sent no PipeChanged notice for the waiting reader");
        drop_end(input, PIPE_WRITE_END, holder)?;
        let status = finish(upper, "upper", 60)?;
        c.pids.retain(|p| *p != upper);
        kassert!(status.how == abi::ENDED_EXIT && status.code == 0, "upper ended {status:?}");
        Ok(())
    }
}

ktest! {
    /// `PIPE_NOWAIT` and `SEM_TRY` never wait: an empty pipe with a writer held and a full
    /// one answer `Again` (on another core's pipe too), and what can be done is done (the
    /// bytes, EOF); a holder that died without letting go is forgotten at the next look
    /// (EOF, `Gone`); any other `arg` is `InvalidArgument`; a semaphore at 0 answers
    /// `Again` to `SEM_TRY` and a unit once one is given.
    fn nowait_and_sem_try_answer_again() -> TestResult {
        use control::PIPE_NOWAIT;
        let core = smp::cores_planned() - 1;
        let mut c = Cleanup { pipes: Vec::new(), pids: Vec::new() };
        let holder = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn")?;
        c.pids.push(holder);
        let pipe = open(&format!("c{core}/pipe/pt-nowait"), 8)?;
        c.pipes.push(pipe);
        hold(pipe, PIPE_READ_END, holder)?;
        hold(pipe, PIPE_WRITE_END, holder)?;
        kassert!(res::read(pipe, 8, PIPE_NOWAIT).err() == Some(Error::Again), "read of an empty pipe");
        kassert!(e(res::write(pipe, b"0123456789", PIPE_NOWAIT), "write")? == 8, "what fits is taken");
        kassert!(res::write(pipe, b"x", PIPE_NOWAIT) == Err(Error::Again), "write to a full pipe");
        kassert!(res::read(pipe, 8, 2).err() == Some(Error::InvalidArgument), "read arg 2");
        kassert!(res::write(pipe, b"x", 3) == Err(Error::InvalidArgument), "write arg 3");
        match e(res::read(pipe, 100, PIPE_NOWAIT), "read")? {
            ReadOut::Bytes(b) => kassert!(b == b"01234567", "read {b:?}"),
            ReadOut::Value(v) => return Err(format!("read gave a value {v}")),
        }
        drop_end(pipe, PIPE_WRITE_END, holder)?;
        match e(res::read(pipe, 100, PIPE_NOWAIT), "read at EOF")? {
            ReadOut::Bytes(b) => kassert!(b.is_empty(), "EOF read {b:?}"),
            ReadOut::Value(v) => return Err(format!("read gave a value {v}")),
        }
        // A holder that died without letting go: the next look forgets it (as a waiter
        // would) instead of answering `Again` for ever (a program of another machine
        // reading through machd polled a dead writer's pipe without end).
        let writer = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn writer")?;
        c.pids.push(writer);
        hold(pipe, PIPE_WRITE_END, writer)?;
        kassert!(res::read(pipe, 8, PIPE_NOWAIT).err() == Some(Error::Again), "read of an empty pipe, writer alive");
        end_and_reap(writer);
        c.pids.retain(|p| *p != writer);
        match e(res::read(pipe, 100, PIPE_NOWAIT), "read after the writer died")? {
            ReadOut::Bytes(b) => kassert!(b.is_empty(), "EOF read {b:?}"),
            ReadOut::Value(v) => return Err(format!("read gave a value {v}")),
        }
        let reader = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn reader")?;
        c.pids.push(reader);
        drop_end(pipe, PIPE_READ_END, holder)?;
        hold(pipe, PIPE_READ_END, reader)?;
        kassert!(e(res::write(pipe, b"01234567", PIPE_NOWAIT), "fill")? == 8, "a write fills the pipe");
        kassert!(res::write(pipe, b"x", PIPE_NOWAIT) == Err(Error::Again), "write to a full pipe, reader alive");
        end_and_reap(reader);
        c.pids.retain(|p| *p != reader);
        kassert!(res::write(pipe, b"x", PIPE_NOWAIT) == Err(Error::Gone), "write to a full pipe whose reader died");
        let sem = e(res::open(&format!("c{core}/sem/pt-try"), &1u64.to_le_bytes(), Rights::EVERYONE_ALL), "open sem")?;
        let r = (|| {
            kassert!(res::control(sem, control::SEM_TRY, 0, 0) == Ok(0), "a unit taken");
            kassert!(res::control(sem, control::SEM_TRY, 0, 0) == Err(Error::Again), "none left");
            e(res::control(sem, control::SEM_V, 0, 0), "V")?;
            kassert!(res::control(sem, control::SEM_TRY, 0, 0) == Ok(0), "the unit given taken");
            Ok(())
        })();
        let _ = res::close(sem);
        r
    }
}

ktest! {
    /// A pipe takes its buffer at its first write, not at open: `open` runs before the
    /// table charges the capacity to its creator, so an open refused there (`Limit`) has
    /// taken nothing. Once written, it holds its whole capacity and no more, however full
    /// (a buffer grown by doubling would hold up to twice what was charged).
    fn a_pipe_takes_its_buffer_at_its_first_write() -> TestResult {
        use crate::mm::heap::used_bytes;
        const SLACK: u64 = 8 * 1024;
        let cap = crate::res::pipe::MAX_CAPACITY as u64;
        let mut c = Cleanup { pipes: Vec::new(), pids: Vec::new() };
        let holder = e(proc::spawn("spin", &[], Priority::App, TEST_PARENT), "spawn")?;
        c.pids.push(holder);
        let before = used_bytes();
        let pipe = open(&format!("c{}/pipe/pt-lazy", crate::percore::current_core()), cap)?;
        c.pipes.push(pipe);
        let opened = used_bytes();
        kassert!(opened < before + SLACK, "open took {} bytes of heap (capacity {cap})", opened - before);
        hold(pipe, PIPE_READ_END, holder)?;
        hold(pipe, PIPE_WRITE_END, holder)?;
        kassert!(e(res::write(pipe, b"x", control::PIPE_NOWAIT), "write")? == 1, "one byte");
        let written = used_bytes();
        kassert!(written >= opened + cap - SLACK, "the first write took {} bytes (capacity {cap})", written - opened);
        let chunk = alloc::vec![7u8; 4096];
        let mut total = 1;
        while let Ok(n) = res::write(pipe, &chunk, control::PIPE_NOWAIT) {
            total += n;
        }
        kassert!(total == cap, "a full pipe holds {total} bytes (capacity {cap})");
        let full = used_bytes();
        kassert!(full < written + SLACK, "filling it took {} bytes more", full - written);
        Ok(())
    }
}

/// Does a thread of `pid` (of this core) wait for a pipe?
fn waits_for_a_pipe(pid: Pid) -> bool {
    use crate::proc::sched::{self, Block, ThreadState};
    sched::with(|s| {
        let Some(p) = s.processes.get(&pid.serial()).filter(|p| p.pid == pid) else {
            return false;
        };
        p.threads
            .iter()
            .any(|&t| matches!(s.state_of(t), Some(ThreadState::Blocked(Block::Pipe(_)))))
    })
}
