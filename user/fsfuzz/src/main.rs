//! `fsfuzz SEED [N]`: issue 16's target "no data lost or corrupted across 1,000
//! random file operations checked against a model". It runs the seeded workload of
//! `libs/fsmodel` (N operations, default 1,000, then a close of every handle still held)
//! against the file service through `ulib::fs`, and compares every answer (data read,
//! lengths at open, `stat`, `readdir`, and the error of every mistake: missing files, bad
//! handles, names FAT's 8.3 form cannot hold, a file open twice) with the model's.
//!
//! `fsfuzz full` fills the disk instead (`full.rs`); `fsfuzz hold STOP` keeps files open
//! while the file service is replaced (`hold.rs`); `fsfuzz drop FILE N` ends with a file
//! open for writing (`drop.rs`); `fsfuzz nowait` checks the reply-less calls
//! (`nowait.rs`); `fsfuzz share` the users' shares of the open-file table (`share.rs`).
//!
//! It also checks durability: the disk driver's count of flushes (`BLK_INFO`) must grow by
//! one per close of a file opened to write and per directory change, as the model counts.
//!
//! It prints each mismatch (`fsfuzz: op 17 Read { .. }: got .., want ..`, at most 20) and
//! a verdict `fsfuzz: seed S: N operations, M mismatches, E failures expected and seen`;
//! it exits 1 on any mismatch. After power-off xtask replays the same seed on the host and
//! compares the image's files (read with mtools) with the model's final state.
#![no_std]
#![no_main]

extern crate alloc;

mod drop;
mod full;
mod hold;
mod nowait;
mod share;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use fsmodel::{Entry, Expect, Fail, Mode, Op, SLOTS};
use ulib::abi::Error;
use ulib::fs::{self, Fd};
use ulib::println;

ulib::main!(main);

const USAGE: &str =
    "usage: fsfuzz SEED [N] | fsfuzz full | fsfuzz hold STOP | fsfuzz drop FILE N | fsfuzz nowait | fsfuzz share";
/// Say "ready" to a script waiting with `fn wait NAME`: register the function `NAME` (an
/// endpoint others may send to, which nobody does).
fn say_ready(name: &str) -> Result<(), ulib::abi::Error> {
    use ulib::abi::res::{Op, Rights};
    let rights = Rights(0x0f | Rights::others(Op::Write));
    let me = ulib::sys::getpid().map(|p| p.serial()).unwrap_or(0);
    let ep = ulib::ipc::open_endpoint(&format!("here/endpoint/{name}-{me}"), rights)?;
    ulib::fnid::register(name, ep).map(drop)
}

/// A handle the service never gave (it counts handles from 1).
const NEVER: Fd = Fd(0xbad0_0000);

fn main(args: &[&str]) -> i32 {
    match args.get(1..) {
        Some(["full"]) => return full::run(),
        Some(["hold", stop]) => return hold::run(stop),
        Some(["drop", name, len]) => return drop::run(name, len),
        Some(["nowait"]) => return nowait::run(),
        Some(["nowait-child"]) => return nowait::child(),
        Some(["share"]) => return share::run(),
        Some(["share-hold", user, tag, max]) => return share::hold(user, tag, max),
        _ => {}
    }
    let num = |i: usize, default: u64| -> Option<u64> {
        args.get(i).map_or(Some(default), |a| a.parse().ok())
    };
    let (Some(seed), Some(n)) = (num(1, 0), num(2, 1000)) else {
        println!("fsfuzz: {USAGE}");
        return 2;
    };
    if args.len() < 2 || seed == 0 || n > 100_000 {
        println!("fsfuzz: {USAGE} (SEED not 0, N at most 100000)");
        return 2;
    }
    let (ops, model) = fsmodel::run(seed, n as usize);
    let flushes_before = flushes();
    // The program's handles by slot; a slot closed keeps its old handle, now a bad one.
    let mut held: [Option<Fd>; SLOTS] = [None; SLOTS];
    let mut stale: [Fd; SLOTS] = [NEVER; SLOTS];
    let (mut mismatches, mut failures) = (0u64, 0u64);
    for (i, (op, want)) in ops.iter().enumerate() {
        let got = perform(op, &mut held, &mut stale);
        if matches!(want, Expect::Fail(_)) && got == *want {
            failures += 1;
        }
        if got != *want {
            mismatches += 1;
            if mismatches <= 20 {
                println!(
                    "fsfuzz: op {i} {}: got {}, want {}",
                    brief_op(op),
                    brief(&got),
                    brief(want)
                );
            }
        }
    }
    // The file service flushes the disk at every close of a file opened to write and every
    // directory change: as many flushes as the model counts such operations.
    match (flushes_before, flushes()) {
        (Ok(a), Ok(b)) if b - a == model.syncs() => {
            println!("fsfuzz: disk flushes: {}, one per durable operation", b - a)
        }
        (Ok(a), Ok(b)) => {
            mismatches += 1;
            println!(
                "fsfuzz: disk flushes: {}, but {} operations had to be made durable",
                b - a,
                model.syncs()
            );
        }
        (Err(e), _) | (_, Err(e)) => {
            mismatches += 1;
            println!("fsfuzz: blk's BLK_INFO: {e}");
        }
    }
    println!(
        "fsfuzz: seed {seed}: {} operations, {mismatches} mismatches, {failures} failures expected and seen",
        ops.len()
    );
    println!(
        "fsfuzz: final state: {} files, {} directories, {} bytes",
        model.files().count(),
        model.dirs().count(),
        model.files().map(|(_, d)| d.len()).sum::<usize>(),
    );
    i32::from(mismatches != 0)
}

/// Flushes the disk driver has done (`BLK_INFO`'s `words[5]`).
fn flushes() -> Result<u64, Error> {
    let blk = ulib::fnid::lookup(ulib::abi::blk::FN_BLK)?;
    let msg = ulib::abi::ipc::Msg {
        label: ulib::abi::blk::BLK_INFO,
        ..Default::default()
    };
    match ulib::fnid::call_fn(blk, &msg)? {
        (0, reply) => Ok(reply.words[5]),
        (v, _) => Err(Error::from_code(v)),
    }
}

/// What the service says an error is, in the model's terms.
fn fail(e: Error) -> Expect {
    Expect::Fail(match e {
        Error::NoSuchResource => Fail::NotFound,
        Error::AlreadyExists => Fail::Exists,
        Error::BadName => Fail::BadName,
        Error::Busy => Fail::Busy,
        Error::InvalidArgument => Fail::Invalid,
        Error::WrongType => Fail::WrongType,
        Error::Denied => Fail::ReadOnly,
        // Anything else is no answer the model can give: a mismatch, shown as such.
        other => {
            println!("fsfuzz: the service answered {other}");
            return Expect::Data(format!("error {other}").into_bytes());
        }
    })
}

fn done<T>(r: Result<T, Error>) -> Expect {
    r.map_or_else(fail, |_| Expect::Done)
}

/// Apply `op` to the real service.
fn perform(op: &Op, held: &mut [Option<Fd>; SLOTS], stale: &mut [Fd; SLOTS]) -> Expect {
    // The handle of a slot, or a bad one: closed already, or never given.
    let fd = |slot: usize| held[slot].unwrap_or(stale[slot]);
    match op {
        Op::Open { path, mode, slot } => {
            let m = match mode {
                Mode::Read => fs::MODE_READ,
                Mode::Write => fs::MODE_WRITE,
                Mode::Append => fs::MODE_APPEND,
            };
            match fs::open_len(path, m) {
                Ok((f, len)) => {
                    held[*slot] = Some(f);
                    Expect::Opened { len }
                }
                Err(e) => fail(e),
            }
        }
        Op::Read { slot, len } => {
            let mut buf = alloc::vec![0u8; *len as usize];
            match fs::read(fd(*slot), &mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    Expect::Data(buf)
                }
                Err(e) => fail(e),
            }
        }
        Op::Write { slot, len, fill } => {
            let data = fsmodel::data(*fill, *len);
            match fs::write(fd(*slot), &data) {
                Ok(n) if n == data.len() => Expect::Done,
                Ok(n) => Expect::Data(format!("short write {n}").into_bytes()),
                Err(e) => fail(e),
            }
        }
        Op::Seek { slot, pos } => done(fs::seek(fd(*slot), *pos)),
        Op::Close { slot } => {
            let r = fs::close(fd(*slot));
            if let Some(f) = held[*slot].take() {
                stale[*slot] = f;
            }
            done(r)
        }
        Op::Unlink { path } => done(fs::unlink(path)),
        Op::Mkdir { path } => done(fs::mkdir(path)),
        Op::Stat { path } => fs::stat(path).map_or_else(fail, |s| Expect::Stat {
            size: s.size,
            dir: s.dir,
        }),
        Op::Readdir { path } => match fs::readdir(path) {
            Ok(list) => {
                let mut v: Vec<Entry> = list
                    .into_iter()
                    .map(|e| Entry {
                        name: e.name,
                        size: e.size,
                        dir: e.dir,
                    })
                    .collect();
                v.sort();
                Expect::Entries(v)
            }
            Err(e) => fail(e),
        },
    }
}

fn brief_op(op: &Op) -> String {
    match op {
        Op::Write { slot, len, .. } => format!("Write {{ slot: {slot}, len: {len} }}"),
        other => format!("{other:?}"),
    }
}

/// An answer, short enough for the console (data by length and first bytes).
fn brief(e: &Expect) -> String {
    match e {
        Expect::Data(d) => format!("{} bytes {:02x?}", d.len(), &d[..d.len().min(8)]),
        other => format!("{other:?}"),
    }
}
