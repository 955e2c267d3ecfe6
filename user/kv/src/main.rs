//! `kv [SIZE] [local] [v1]`: the key-value server of issue 14 ("State outside the server").
//!
//! It opens an endpoint and registers it under the function id `kv` (`ulib::fnid`), so
//! clients (`kvcli`) reach it by name, whatever process or core serves it. Its whole table
//! (`libs/kvstate`: keys up to 32 bytes, values up to 1 KiB) lives in the function's *state
//! ICA*, a vregion that outlives the server:
//!
//! - `FN_STATE(kv, 0)` names one (a server of `kv` ran before): it is attached at
//!   [`STATE_AT`] and opened, which undoes or finishes a request that a kill of the last
//!   server cut short and checks all of it; an older layout is upgraded in place first
//!   (`kvstate::upgrade`); one that holds no table yet (zeroes) is formatted; a corrupt one
//!   is refused (the server exits, the state is left for inspection).
//! - Else a vregion of SIZE bytes (default 1 MiB; `4096`, `512K`, `1M`) is opened, attached,
//!   formatted and made the state ICA with `FN_STATE(kv, vregion)`.
//!
//! `local` keeps the table in the heap instead (the same code over a heap buffer, lost when
//! the server ends): P3 Table 2's "state in the process", to measure what the state ICA
//! costs. `v1` formats (or serves) layout version 1, so that a later server shows the
//! upgrade.
//!
//! Requests (`kvstate::proto`): `HELLO`, `PUT`, `GET`, `DEL`, `STATS`, `BYE`, served one at a
//! time with `REPLY_RECV`; values travel through each client's data area ([`clients`]). A
//! malformed request gets an error status in its reply, and the server keeps serving.
//!
//! Prints `kv: serving fnN.G ...` once it serves; exits 1 with `kv: ERROR` if it cannot
//! start (the name is served already, the state ICA is corrupt or not a vregion it may map).
#![no_std]
#![no_main]

extern crate alloc;

mod clients;

use alloc::format;
use alloc::string::String;
use clients::Clients;
use kvstate::proto::{self, Request, StatsReply, Status};
use kvstate::Table;
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{Msg, SUBMIT_SEND};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, println, res, sys};

ulib::main!(main);

/// Where the state ICA is mapped: a fixed address, the same in every server of `kv`.
pub const STATE_AT: u64 = 0x0000_5f00_0000_0000;
/// Default size of a new state ICA.
const DEFAULT_SIZE: u64 = 1 << 20;
/// An endpoint others may send to (write) and only its owner receives on.
const ENDPOINT_RIGHTS: Rights = Rights(0x2f);

struct Options {
    size: u64,
    local: bool,
    version: u32,
}

fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn main(args: &[&str]) -> i32 {
    let mut o = Options {
        size: DEFAULT_SIZE,
        local: false,
        version: kvstate::VERSION,
    };
    for a in &args[1..] {
        match *a {
            "local" => o.local = true,
            "v1" => o.version = 1,
            s => match parse_size(s) {
                Some(n) => o.size = n,
                None => {
                    println!("kv: usage: kv [SIZE] [local] [v1]");
                    return 2;
                }
            },
        }
    }
    match run(&o) {
        Ok(()) => 0,
        Err(e) => {
            println!("kv: {e}");
            1
        }
    }
}

/// Run `f` on a handle to this process's own vspace (open only for the call).
fn with_own_vspace(f: impl FnOnce(ResId) -> Result<(), Error>) -> Result<(), Error> {
    let me = sys::getpid()?;
    let vs = res::open_vspace(
        &format!("here/vspace/kv-{}", me.serial()),
        None,
        Rights::OWNER_ALL,
    )?;
    let r = f(vs);
    let _ = res::close(vs);
    r
}

/// Map `region` writable at `at` in this process.
pub fn attach_here(region: ResId, at: u64) -> Result<(), Error> {
    with_own_vspace(|vs| res::attach(vs, region, at, true))
}

/// Unmap what is at `at` in this process.
pub fn detach_here(at: u64) -> Result<(), Error> {
    with_own_vspace(|vs| res::detach(vs, at))
}

fn run(o: &Options) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let ep = ipc::open_endpoint(
        &format!("here/endpoint/kv-{}", me.serial()),
        ENDPOINT_RIGHTS,
    )
    .map_err(|e| format!("endpoint: {e}"))?;
    let id = fnid::register("kv", ep).map_err(|e| format!("register kv: {e}"))?;
    let (table, where_) = if o.local {
        let area = alloc::vec![0u8; o.size as usize].leak();
        let t = kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
        (t, String::from("in the process (local)"))
    } else {
        state_table(id, o)?
    };
    let s = table.stats();
    println!(
        "kv: serving {id} as {me}, table {where_}: layout {}, {} slots, {} entries, generation {}",
        s.version, s.capacity, s.count, s.generation
    );
    serve(ep, table)
}

/// The table in the function's state ICA: found (and upgraded) or made.
fn state_table(id: FnId, o: &Options) -> Result<(Table<'static>, String), String> {
    let (region, len, found) = match fnid::state(id, None).map_err(|e| format!("FN_STATE: {e}"))? {
        Some(region) => {
            let info = res::info(region).map_err(|e| format!("state ICA {region}: {e}"))?;
            (region, info.size, true)
        }
        None => {
            let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
            let name = format!("here/vregion/kv-state-{}", me.serial());
            let region = res::open_vregion(&name, o.size, Rights::OWNER_ALL)
                .map_err(|e| format!("open state ICA of {} bytes: {e}", o.size))?;
            (region, o.size, false)
        }
    };
    if let Err(e) = attach_here(region, STATE_AT) {
        if !found {
            let _ = res::close(region);
        }
        return Err(format!("attach state ICA {region}: {e}"));
    }
    // SAFETY: `region` (`len` bytes) is mapped writable at STATE_AT for the rest of this
    // process's life (it is never detached), and nothing else in this process uses that
    // range: the slice is the only way to it.
    let area: &'static mut [u8] =
        unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, len as usize) };
    let what = if !found {
        // Format before handing it to the registry: it then always holds a table.
        kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
        fnid::state(id, Some(region)).map_err(|e| format!("FN_STATE set {region}: {e}"))?;
        "new"
    } else if area.get(..8).is_some_and(|m| m == [0; 8]) {
        // Zeroes: a state ICA set but never formatted (a server that ended before).
        kvstate::format_version(area, o.version).map_err(|e| format!("format: {e}"))?;
        "formatted"
    } else if o.version == kvstate::VERSION {
        match kvstate::upgrade(area).map_err(|e| format!("state ICA {region}: {e}"))? {
            v if v < o.version => {
                println!("kv: state ICA upgraded from layout {v} to {}", o.version);
                "upgraded"
            }
            _ => "found",
        }
    } else {
        "found"
    };
    let t = if o.version == kvstate::VERSION {
        kvstate::open(area)
    } else {
        kvstate::open_version(area, o.version)
    }
    .map_err(|e| format!("state ICA {region}: {e}"))?;
    if let Some(op) = t.recovered() {
        println!(
            "kv: the last server was killed during a {op}: set right (put undone, del finished)"
        );
    }
    Ok((t, format!("in state ICA {region} ({what})")))
}

/// Answer requests forever, one `REPLY_RECV` per request.
fn serve(ep: ResId, mut table: Table<'static>) -> Result<(), String> {
    let mut clients = Clients::new();
    let mut handle = 0;
    let mut out = Msg::default();
    loop {
        let r = match ipc::reply_recv(handle, 0, &out, ep, u64::MAX) {
            Ok(r) => r,
            Err(Error::TimedOut) => {
                handle = 0;
                continue;
            }
            // The handle is unknown (nothing was answered or received): just receive.
            Err(Error::NoSuchResource) if handle != 0 => {
                handle = 0;
                continue;
            }
            Err(e) => return Err(format!("receive: {e}")),
        };
        let (status, words) = match Request::decode(r.msg.label, &r.msg.words) {
            Ok(req) => match step(&mut table, &mut clients, r.sender, &req) {
                Ok(words) => (Status::Ok, words),
                Err(s) => (s, [0; 6]),
            },
            Err(s) => (s, [0; 6]),
        };
        out = Msg {
            label: status as u64,
            words,
        };
        // A one-way SEND takes no reply.
        handle = if r.kind == SUBMIT_SEND { 0 } else { r.request };
    }
}

/// One request: the reply's words, or its status.
fn step(
    table: &mut Table<'static>,
    clients: &mut Clients,
    sender: ulib::abi::Pid,
    req: &Request,
) -> Result<[u64; 6], Status> {
    let mut w = [0u64; 6];
    match req.op {
        proto::HELLO => clients.hello(sender, ResId(req.arg))?,
        proto::BYE => clients.bye(sender)?,
        proto::PUT => {
            let area = clients.area(sender)?;
            let mut buf = [0u8; kvstate::VALUE_MAX];
            let value = &mut buf[..req.value_len];
            area.read(req.arg, value)?;
            w[0] = u64::from(table.put(req.key(), value)?);
        }
        proto::GET => {
            let area = clients.area(sender)?;
            match table.get(req.key())? {
                Some(v) => {
                    area.write(req.arg, v)?;
                    w[0] = v.len() as u64;
                }
                None => return Err(Status::NotFound),
            }
        }
        proto::DEL => w[0] = u64::from(table.del(req.key())?),
        proto::STATS => w = StatsReply::from(table.stats()).encode(),
        _ => return Err(Status::BadOp),
    }
    Ok(w)
}
