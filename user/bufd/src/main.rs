//! `bufd [part=I/K] [buffers=N] [restart=N] [takeover]`: a buffer manager (issue 16; P0's
//! buffer processes), serving `fs.bufI` per `abi::buf`. It owns N sector buffers
//! (`libs/bufcache`, default 64) for the sectors of its partition (stripe n of the disk is
//! manager n mod K's) and stands between the file service and the disk driver: `fsd` asks
//! it for sectors, and it asks `blk` only for those no buffer holds.
//!
//! The data ICA of a request is passed on to `blk` as it came (no copy on a miss) and comes
//! back with `blk`'s reply; then the buffers take a copy and the ICA goes back to `fsd`.
//!
//! Write-through, so that nothing is lost when a manager goes: a `BUF_WRITE` first forgets
//! the sectors' buffers, then writes to the disk, and only after the disk completed it are
//! the buffers filled and the client answered. The buffers are thus only ever copies of the
//! disk, and a manager replaced (`replace fs.buf0 bufd`), killed or crashed takes nothing
//! with it that the disk lacks; its successor starts with empty buffers. (Write-back would
//! keep dirty sectors that a crash loses, or need them in a state ICA that a crash may
//! leave half-written.) The request a crash cuts short is answered `Gone` by the kernel;
//! `fsd` sends it again (a sector read or write done twice is the same as once).
//!
//! `restart=N` (default 8; 0: off): the kernel starts a crashed manager again, at most N
//! times a minute (`FN_RESTART`). `takeover`: take `fs.bufI` over from its server (live
//! replacement, `FN_TAKEOVER`), which finishes its request first.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use bufcache::Cache;
use ulib::abi::blk::{self, BLK_FLUSH, BLK_INFO, BLK_READ, BLK_WRITE, MAX_SECTORS, SECTOR};
use ulib::abi::buf::{self, BUF_FLUSH, BUF_INFO, BUF_READ, BUF_WRITE};
use ulib::abi::fnid::{FnId, MAX_RESTARTS};
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, println, res, sys};

ulib::main!(main);

/// How long a takeover waits for the old manager to finish its request.
const TAKEOVER_TIMEOUT_NS: u64 = 2_000_000_000;

struct Options {
    part: u64,
    parts: u64,
    buffers: usize,
    restart: u64,
    takeover: bool,
}

fn parse(args: &[&str]) -> Result<Options, String> {
    let mut o = Options {
        part: 0,
        parts: 1,
        buffers: 64,
        restart: 8,
        takeover: false,
    };
    for a in args {
        let (key, value) = a.split_once('=').unwrap_or((a, ""));
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("{key}= takes a number, not {value:?}"))
        };
        match key {
            "takeover" if value.is_empty() => o.takeover = true,
            "part" => {
                let (i, k) = value.split_once('/').ok_or("part=I/K, e.g. part=0/2")?;
                let (i, k) = (i.parse::<u64>(), k.parse::<u64>());
                match (i, k) {
                    (Ok(i), Ok(k)) if k >= 1 && k <= buf::MAX_MANAGERS as u64 && i < k => {
                        (o.part, o.parts) = (i, k)
                    }
                    _ => {
                        return Err(format!(
                            "part=I/K: I below K, K from 1 to {}, not {value:?}",
                            buf::MAX_MANAGERS
                        ))
                    }
                }
            }
            "buffers" => match number()? {
                n @ 1..=4096 => o.buffers = n as usize,
                _ => return Err("buffers=N: N from 1 to 4096".into()),
            },
            "restart" => match number()? {
                n if n <= MAX_RESTARTS => o.restart = n,
                _ => return Err(format!("restart=N: N from 0 to {MAX_RESTARTS}")),
            },
            _ => {
                return Err(String::from(
                    "usage: bufd [part=I/K] [buffers=N] [restart=N] [takeover]",
                ))
            }
        }
    }
    Ok(o)
}

fn main(args: &[&str]) -> i32 {
    let o = match parse(&args[1..]) {
        Ok(o) => o,
        Err(e) => {
            println!("bufd: {e}");
            return 2;
        }
    };
    // A restart after a crash starts bufd as a first server, with the same options.
    match run(&o, &fnid::restart_args(args, &[])) {
        Ok(()) => 0,
        Err(e) => {
            println!("bufd: {e}");
            1
        }
    }
}

struct Manager {
    blk: FnId,
    sectors: u64,
    part: u64,
    parts: u64,
    cache: Cache,
}

fn run(o: &Options, restart_args: &str) -> Result<(), String> {
    let name = buf::fn_name(o.part as usize).ok_or("no such manager")?;
    // The disk driver may still be starting: wait for `blk` (a hang guard bounds it).
    let blk = fnid::wait(blk::FN_BLK, 5_000_000_000).map_err(|e| format!("no disk (blk: {e})"))?;
    let info = Msg {
        label: BLK_INFO,
        ..Msg::default()
    };
    let (v, reply) = fnid::call_fn(blk, &info).map_err(|e| format!("BLK_INFO: {e}"))?;
    if v != 0 {
        return Err(format!("BLK_INFO: {}", Error::from_code(v)));
    }
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    // Only this user (the administrator's: the file service and its tools) may send:
    // sectors are below every file's owner check, so no other user reaches them.
    let rights = Rights(0x0f);
    // A name nobody can guess (`res::open_fresh`): under this server's serial, a program
    // could take the name the next `bufd` would use and keep it from starting.
    let ep =
        res::open_fresh("here/endpoint/bufd", &[], rights).map_err(|e| format!("endpoint: {e}"))?;
    let id = if o.takeover {
        let id = fnid::lookup(name).map_err(|e| format!("takeover: no {name}: {e}"))?;
        fnid::takeover(id, ep, TAKEOVER_TIMEOUT_NS)
            .map_err(|e| format!("takeover of {name}: {e}"))?;
        id
    } else {
        fnid::register(name, ep).map_err(|e| format!("register {name}: {e}"))?
    };
    if o.restart > 0 {
        fnid::restart(
            id,
            o.restart,
            ulib::abi::fnid::RESTART_WINDOW_MS,
            restart_args,
        )
        .map_err(|e| format!("FN_RESTART {name}: {e}"))?;
    }
    println!(
        "bufd: serving {name} as {me}: sectors {}/{} of {} ({} buffers)",
        o.part, o.parts, reply.words[0], o.buffers
    );
    let mut m = Manager {
        blk,
        sectors: reply.words[0],
        part: o.part,
        parts: o.parts,
        cache: Cache::new(o.buffers),
    };
    loop {
        match ipc::recv(ep, u64::MAX) {
            Ok(r) => m.request(r),
            Err(Error::TimedOut) => {}
            Err(e) => return Err(format!("recv: {e}")),
        }
    }
}

impl Manager {
    fn request(&mut self, r: Received) {
        if r.request == 0 {
            // One-way: nothing to answer, an ICA it carried goes back.
            ipc::let_go(&r.msg);
            return;
        }
        // A read-only ICA (the client's mapping was, or it lent it so) serves a write
        // only: a read's sectors are written into it. A write's goes on to `blk` as it
        // came, read-only too.
        let label = ipc::label(&r.msg);
        let mut ica = ipc::ica_at(&r.msg);
        let read_only = ipc::ica_read_only(&r.msg);
        let (value, words) = match label {
            BUF_INFO => (
                0,
                [
                    self.sectors,
                    self.part,
                    self.parts,
                    self.cache.capacity() as u64,
                    self.cache.hits,
                    self.cache.misses,
                ],
            ),
            BUF_READ if read_only => (Error::InvalidArgument as u64, [0; 6]),
            BUF_READ | BUF_WRITE => (self.transfer(label, &r.msg, &mut ica), [0; 6]),
            BUF_FLUSH => (self.flush(), [0; 6]),
            _ => (Error::NotSupported as u64, [0; 6]),
        };
        let plain = Msg { label, words };
        let Some((region, _)) = ica else {
            let _ = ipc::reply(r.request, value, &plain);
            return;
        };
        // An ICA kept because where it is could not be looked at (`transfer`) may not be
        // here after all: the answer then goes without it (nothing moved).
        if ipc::reply(r.request, value, &ipc::with_ica(plain, region)).is_err() {
            let _ = ipc::reply(r.request, value, &plain);
        }
    }

    /// Check a read or write of the ICA `ica` (which moves when it goes to `blk` and back;
    /// `None` after `blk` lost it) and serve it.
    fn transfer(&mut self, label: u64, msg: &Msg, ica: &mut Option<(ResId, u64)>) -> u64 {
        let (first, count) = (msg.words[0], msg.words[1]);
        let Some((region, at)) = *ica else {
            return Error::InvalidArgument as u64;
        };
        if count == 0 || count > MAX_SECTORS {
            return Error::InvalidArgument as u64;
        }
        if first >= self.sectors || count > self.sectors - first {
            return Error::TooLong as u64;
        }
        if (first..first + count).any(|s| buf::manager_of(s, self.parts) != self.part) {
            return Error::InvalidArgument as u64;
        }
        let len = count as usize * SECTOR;
        if label == BUF_READ {
            if (first..first + count).all(|s| self.cache.holds(s)) {
                // SAFETY: the ICA is mapped writable at `at`, BLK_ICA_SIZE >= len bytes,
                // ours until the reply.
                let data = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) };
                for (i, s) in (first..first + count).enumerate() {
                    if let Some(b) = self.cache.get(s) {
                        data[i * SECTOR..(i + 1) * SECTOR].copy_from_slice(b);
                    }
                }
                return 0;
            }
            // Counted as misses (the sectors not held).
            for s in first..first + count {
                let _ = self.cache.get(s);
            }
        } else {
            // Forget first: a write that fails leaves no buffer newer than the disk.
            for s in first..first + count {
                self.cache.forget(s);
            }
        }
        let blk_label = if label == BUF_READ {
            BLK_READ
        } else {
            BLK_WRITE
        };
        let out = ipc::with_ica(
            Msg {
                label: blk_label,
                words: [first, count, 0, 0, 0, 0],
            },
            region,
        );
        let (v, reply) = match fnid::call_fn(self.blk, &out) {
            Ok(r) => r,
            Err(e) => {
                // The request did not reach blk (the ICA is still here: given back with
                // the error), or blk ended holding it (lost: the client recovers its
                // vregion). Both are `Gone` when blk is down: looked at, not assumed (a
                // regression: with blk down, every miss kept its client's ICA here for
                // good, and 64 of them left this manager no room to serve anyone).
                if e == Error::Gone && res::attached_here(region, at) == Ok(false) {
                    *ica = None;
                }
                return e as u64;
            }
        };
        *ica = ipc::ica_at(&reply);
        let Some((_, at)) = *ica else {
            return Error::Unknown as u64;
        };
        if v != 0 {
            return v;
        }
        // SAFETY: as above, at the ICA's new place.
        let data = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
        for (i, s) in (first..first + count).enumerate() {
            let mut b = [0u8; SECTOR];
            b.copy_from_slice(&data[i * SECTOR..(i + 1) * SECTOR]);
            self.cache.put(s, &b);
        }
        0
    }

    fn flush(&mut self) -> u64 {
        let msg = Msg {
            label: BLK_FLUSH,
            ..Msg::default()
        };
        match fnid::call_fn(self.blk, &msg) {
            Ok((v, _)) => v,
            Err(e) => e as u64,
        }
    }
}
