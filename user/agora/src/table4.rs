//! P0 Table 4: reply-less messages against rendezvous for the calls whose caller need not
//! wait. The paper ran its C compiler on one PC of two with an asynchronous protocol added
//! for the messages whose answer carries no reply data, and found the response about 1%
//! shorter than with rendezvous only.
//!
//! Here a "compile" is a compiler's file traffic in miniature: read a 16 KiB source
//! (`HIT.DAT`, in the cache) in 512-byte reads, then [`OBJ_BLOCKS`] times compute
//! ([`THINK`] rounds of a xorshift: the compiler's own work) and write a 512-byte block of
//! the object, close the object, and delete a temporary file. Once with every call waiting
//! for its answer, once with the write, the close and the delete reply-less
//! (`ulib::fs::write_nowait`, `close_nowait`, `unlink_nowait`); the reads wait either way
//! (their answer is the data). The response is the time until the compile's last call
//! returns; the reply-less run then waits for the answers (`fs::settle`), outside the
//! response but inside the busy time and the message counts, and checks the object.

use crate::{calls, sampled, Res};
use ulib::bench::rdtsc;
use ulib::fs::{self, MODE_READ, MODE_WRITE};
use ulib::sys;

/// Blocks of the object, each after one round of the compiler's work.
const OBJ_BLOCKS: u64 = 8;
/// Xorshift rounds of work before each block (about 100,000 instructions).
const THINK: u64 = 20_000;
const BLOCK: usize = 512;
const SOURCE_BLOCKS: u64 = 32;
const OBJ: &str = "T4OBJ.O";
const TMP: &str = "T4TMP.DAT";

pub const RENDEZVOUS: &str = "Table 4: a compile's file calls, rendezvous";
pub const REPLY_LESS: &str = "Table 4: a compile's file calls, write, close and unlink reply-less";

/// Both runs, `samples` times each. `wall`: the response in ns of the clock (parallel
/// mode), else in ticks of the time-stamp counter (instructions under `-icount`).
pub fn run(samples: u64, wall: bool) -> Res<()> {
    let now = || -> Res<u64> {
        if wall {
            sys::clock_ns().map_err(|_| "clock")
        } else {
            Ok(rdtsc())
        }
    };
    let unit = if wall { "ns" } else { "instructions" };
    for (case, nowait) in [(RENDEZVOUS, false), (REPLY_LESS, true)] {
        sampled(case, unit, samples, 1, |_, _, m| {
            fs::write_all(TMP, b"temporary\n").map_err(|_| "writing the temporary failed")?;
            m.start()?;
            let t0 = now()?;
            let r = compile(nowait);
            let response = now()? - t0;
            let settled = fs::settle().map_err(|_| "a reply-less call failed");
            m.stop_with(response)?;
            r.and(settled)?;
            let obj = fs::stat(OBJ).map_err(|_| "no object file")?;
            if obj.size != OBJ_BLOCKS * BLOCK as u64 {
                return Err("the object file has the wrong size");
            }
            if fs::stat(TMP).is_ok() {
                return Err("the temporary file is still there");
            }
            Ok(())
        })?;
    }
    fs::unlink(OBJ).map_err(|_| "deleting the object failed")
}

fn compile(nowait: bool) -> Res<()> {
    let mut buf = [0u8; BLOCK];
    let src = fs::open(calls::HIT_FILE, MODE_READ).map_err(|_| "open the source failed")?;
    for b in 0..SOURCE_BLOCKS {
        calls::read_block(src, b * BLOCK as u64, &mut buf)?;
    }
    fs::close(src).map_err(|_| "close the source failed")?;
    let obj = fs::open(OBJ, MODE_WRITE).map_err(|_| "open the object failed")?;
    for b in 0..OBJ_BLOCKS {
        let x = think(THINK + b);
        buf.iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (x >> (i % 8 * 8)) as u8);
        let n = if nowait {
            fs::write_nowait(obj, &buf)
        } else {
            fs::write(obj, &buf)
        };
        if n.map_err(|_| "write the object failed")? != BLOCK {
            return Err("short write");
        }
    }
    if nowait {
        fs::close_nowait(obj).map_err(|_| "close the object failed")?;
        fs::unlink_nowait(TMP).map_err(|_| "delete the temporary failed")
    } else {
        fs::close(obj).map_err(|_| "close the object failed")?;
        fs::unlink(TMP).map_err(|_| "delete the temporary failed")
    }
}

/// The compiler's own work: `n` xorshift rounds.
fn think(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = core::hint::black_box(x);
    }
    x
}
