//! User pipes across cores (P0 section 5.2 and Figure 4) and `ls | sort` under two
//! placements (Table 3), through `ulib::stdio`'s pipes as the shell makes them: each pipe
//! opened on its reader's core, each program holding only the ends it uses.
//!
//! Figure 4's program pair: the paper's two programs pass one byte through a pipe 2,000
//! times with a think time set by an argument between one transfer and the next; on one
//! processor the two programs' think times add up, on two they overlap, so two processors
//! help once the think time exceeds what a pipe transfer across processors costs more than
//! one inside a processor (the paper: 11.6 ms against 8.2 ms, about 3 ms). Here the writer
//! computes THINK, writes one byte, and again; the reader reads one byte and computes
//! THINK, until EOF. The think time is computation (a loop reading the clock), not a
//! sleep, as a program's work would be.

use crate::{reap, sampled, Meter, Res};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::res::ResId;
use ulib::abi::syscall::control;
use ulib::abi::Priority;
use ulib::stdio::{self, Stream};
use ulib::{fs, res, sys};

const RTT_OPS: u64 = 200;
pub const PIPE_SAME: &str = "pipe round trip, same core";
pub const PIPE_CROSS: &str = "pipe round trip, two cores";
/// Figure 4: messages per run (the paper's 2,000), fewer for long think times so that a
/// run stays near [`STREAM_BUDGET_US`] of think time per side.
const STREAM_MESSAGES: u64 = 2000;
const STREAM_BUDGET_US: u64 = 400_000;
const STREAM_MIN_MESSAGES: u64 = 40;

fn drop_end(id: ResId, end: u64) {
    let _ = res::control(id, control::PIPE_DROP, end, 0);
}

/// Let go of both of our ends of `id` and close it.
fn close_pipe(id: ResId) {
    drop_end(id, control::PIPE_READ_END);
    drop_end(id, control::PIPE_WRITE_END);
    let _ = res::close(id);
}

/// Spawn `agora ARGS` on `core` with its standard input and output; then let go of the
/// ends the child uses (its reading end of `input`, its writing end of `output`).
fn child(
    args: &[&str],
    core: usize,
    input: Option<ResId>,
    output: Option<ResId>,
) -> Res<ulib::abi::Pid> {
    let s = |p: Option<ResId>| p.map_or(Stream::Console, Stream::Pipe);
    let pid = stdio::spawn(
        "agora",
        args,
        Priority::App,
        Some(core),
        s(input),
        s(output),
    )
    .map_err(|_| "spawning a helper failed")?;
    if let Some(p) = input {
        drop_end(p, control::PIPE_READ_END);
    }
    if let Some(p) = output {
        drop_end(p, control::PIPE_WRITE_END);
    }
    Ok(pid)
}

/// Pipe round trips (deterministic mode): one byte to `agora pong` and one byte back,
/// through two pipes, with the partner on this core and on the other (the Linux peer's
/// "pipe ping-pong" shape).
pub fn round_trips(samples: u64) -> Res<()> {
    let here = sys::core().map_err(|_| "core")?;
    let online = crate::cores_online()?;
    round_trip(PIPE_SAME, here, here, samples)?;
    if online >= 2 {
        round_trip(PIPE_CROSS, here, (here + 1) % online, samples)?;
    }
    Ok(())
}

fn round_trip(case: &str, here: usize, there: usize, samples: u64) -> Res<()> {
    let to = stdio::pipe(Some(there), None).map_err(|_| "pipe failed")?;
    let from = stdio::pipe(Some(here), None).map_err(|_| "pipe failed")?;
    let r = (|| {
        let pid = child(&["pong"], there, Some(to), Some(from))?;
        let mut byte = [0u8; 1];
        let r = sampled(case, "instructions", samples, RTT_OPS, |_, ops, m| {
            m.start()?;
            for i in 0..ops {
                byte[0] = i as u8;
                if res::write(to, &byte, 0).map_err(|_| "pipe write failed")? != 1 {
                    return Err("short pipe write");
                }
                let mut back = [0u8; 1];
                if res::read(from, &mut back, 0).map_err(|_| "pipe read failed")? != 1
                    || back[0] != byte[0]
                {
                    return Err("the pong came back wrong");
                }
            }
            m.stop()
        });
        // EOF for pong: it ends.
        drop_end(to, control::PIPE_WRITE_END);
        let ended = reap(pid, "pong failed");
        r.and(ended)
    })();
    close_pipe(to);
    close_pipe(from);
    r
}

/// `agora pong`: send back every byte read, until EOF.
pub fn pong() -> Res<()> {
    let mut b = [0u8; 64];
    loop {
        match stdio::read(&mut b).map_err(|_| "read failed")? {
            0 => return Ok(()),
            n => {
                stdio::write(&b[..n]).map_err(|_| "write failed")?;
            }
        }
    }
}

/// Compute for `us` microseconds (reading the clock), the paper's think time.
fn think(us: u64) -> Res<()> {
    if us == 0 {
        return Ok(());
    }
    let end = sys::clock_ns().map_err(|_| "clock")? + us * 1000;
    while sys::clock_ns().map_err(|_| "clock")? < end {}
    Ok(())
}

/// Figure 4 (parallel mode): for each think time, `samples` runs of a writer (here) and
/// `agora sink` on `core`, per message in nanoseconds of wall time. The pipe is on the
/// reader's core, as the shell places it, or with `at_writer` on this one (the reader on
/// another core then waits across cores: `pipe.wait=`).
pub fn stream(samples: u64, core: usize, thinks: &[u64], at_writer: bool) -> Res<()> {
    let here = sys::core().map_err(|_| "core")?;
    let place = match (core == here, at_writer) {
        (true, _) => "same core",
        (false, false) => "two cores",
        (false, true) => "two cores, pipe on the writer's core",
    };
    let pipe_core = if at_writer { here } else { core };
    for &t in thinks {
        let n = (STREAM_BUDGET_US / t.max(1)).clamp(STREAM_MIN_MESSAGES, STREAM_MESSAGES);
        let case = format!("pipe stream, think {t} us, {place}");
        sampled(&case, "ns", samples, n, |_, n, m| {
            stream_once(t, n, core, pipe_core, m)
        })?;
    }
    Ok(())
}

fn stream_once(think_us: u64, n: u64, core: usize, pipe_core: usize, m: &mut Meter) -> Res<()> {
    let p = stdio::pipe(Some(pipe_core), None).map_err(|_| "pipe failed")?;
    let r = (|| {
        let t = format!("{think_us}");
        let pid = child(&["sink", &t], core, Some(p), None)?;
        m.start()?;
        let t0 = sys::clock_ns().map_err(|_| "clock")?;
        for i in 0..n {
            think(think_us)?;
            if res::write(p, &[i as u8], 0).map_err(|_| "pipe write failed")? != 1 {
                return Err("short pipe write");
            }
        }
        drop_end(p, control::PIPE_WRITE_END);
        reap(pid, "sink failed")?;
        m.stop_with(sys::clock_ns().map_err(|_| "clock")? - t0)
    })();
    close_pipe(p);
    r
}

/// `agora sink THINK_US`: read one byte at a time, computing THINK after each, until EOF;
/// the bytes must come in order.
pub fn sink(think_us: u64) -> Res<()> {
    let mut next = 0u8;
    loop {
        let mut b = [0u8; 1];
        match stdio::read(&mut b).map_err(|_| "read failed")? {
            0 => return Ok(()),
            _ if b[0] != next => return Err("a byte came out of order"),
            _ => next = next.wrapping_add(1),
        }
        think(think_us)?;
    }
}

/// Table 3 (parallel mode): `agora ls | agora sort` with `ls` on `ls_core` and `sort` on
/// `sort_core`, the time from the first spawn to both ends, in nanoseconds.
pub fn lsort(samples: u64, ls_core: usize, sort_core: usize) -> Res<()> {
    crate::calls::wait_for_fs()?;
    let case = format!("ls piped to sort, ls on core {ls_core}, sort on core {sort_core}");
    sampled(&case, "ns", samples, 1, |_, _, m| {
        let p = stdio::pipe(Some(sort_core), None).map_err(|_| "pipe failed")?;
        let r = (|| {
            m.start()?;
            let t0 = sys::clock_ns().map_err(|_| "clock")?;
            let a = child(&["ls"], ls_core, None, Some(p))?;
            let b = child(&["sort"], sort_core, Some(p), None)?;
            let ra = reap(a, "ls failed");
            let rb = reap(b, "sort failed");
            ra.and(rb)?;
            m.stop_with(sys::clock_ns().map_err(|_| "clock")? - t0)
        })();
        close_pipe(p);
        r
    })
}

/// `agora ls`: `ls -l` of the root directory: every entry's name and its size from a
/// `stat` of its own, one line each, to the standard output.
pub fn ls() -> Res<()> {
    let entries = fs::readdir("").map_err(|_| "readdir failed")?;
    for e in entries {
        let st = fs::stat(&e.name).map_err(|_| "stat failed")?;
        let line = format!("{} {}\n", e.name, st.size);
        write_all(line.as_bytes())?;
    }
    Ok(())
}

fn write_all(mut b: &[u8]) -> Res<()> {
    while !b.is_empty() {
        let n = stdio::write(b).map_err(|_| "write failed")?;
        b = &b[n..];
    }
    Ok(())
}

/// `agora sort`: read lines until EOF and sort them; check the listing is whole (every
/// line a name and a size) and print nothing (the console would dominate the time).
pub fn sort() -> Res<()> {
    let all = stdio::read_to_end().map_err(|_| "read failed")?;
    let text = String::from_utf8(all).map_err(|_| "not text")?;
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    if lines.is_empty() || lines.iter().any(|l| l.split(' ').count() != 2) {
        return Err("the listing is empty or broken");
    }
    Ok(())
}
