//! Function ids from user space (`abi::fnid` has the contract): a server registers its
//! endpoint under a name; a caller looks the name up and calls the function id with the
//! ordinary `ipc` calls (`FnId::as_target`), or with [`call_fn`], which sends a request
//! again when it is answered `Again` (its server is being replaced or restarted).

use crate::sys::{decode, raw};
use abi::fnid::{FnId, FnInfo, MAX_FNIDS};
use abi::ipc::Msg;
use abi::res::ResId;
use abi::syscall as nr;
use abi::Error;
use alloc::vec::Vec;

/// FN_REGISTER: offer `endpoint` (the caller's own) under `name`.
pub fn register(name: &str, endpoint: ResId) -> Result<FnId, Error> {
    // SAFETY: the kernel only reads `name.len()` bytes at `name`.
    decode(unsafe {
        raw::syscall3(
            nr::FN_REGISTER,
            name.as_ptr() as u64,
            name.len() as u64,
            endpoint.0,
        )
    })
    .map(FnId)
}

/// FN_LOOKUP: the function id registered under `name`.
pub fn lookup(name: &str) -> Result<FnId, Error> {
    // SAFETY: the kernel only reads `name.len()` bytes at `name`.
    decode(unsafe { raw::syscall2(nr::FN_LOOKUP, name.as_ptr() as u64, name.len() as u64) })
        .map(FnId)
}

/// The function id registered under `name`, looked up every 10 ms until a server
/// registers it (a server started at the same time may not have yet), at most `limit_ns`:
/// then `lookup`'s last error.
pub fn wait(name: &str, limit_ns: u64) -> Result<FnId, Error> {
    let start = crate::sys::clock_ns()?;
    loop {
        match lookup(name) {
            Ok(id) => return Ok(id),
            Err(e) if crate::sys::clock_ns()?.saturating_sub(start) >= limit_ns => return Err(e),
            Err(_) => {
                let _ = crate::sys::sleep_ns(10_000_000);
            }
        }
    }
}

/// FN_UNREGISTER: withdraw `fnid`.
pub fn unregister(fnid: FnId) -> Result<(), Error> {
    // SAFETY: no memory is passed.
    decode(unsafe { raw::syscall1(nr::FN_UNREGISTER, fnid.0) }).map(|_| ())
}

/// FN_LIST: every registered function, with the requests taken under it on every core
/// (the kernel asks each other core for its count).
pub fn list() -> Result<Vec<FnInfo>, Error> {
    list_with(0)
}

/// FN_LIST with [`abi::fnid::FN_LIST_LOCAL`]: every registered function as this core's copy
/// of the registry has it, `served` counting this core's requests only; no other core is
/// asked, so it is cheap enough to look often (a server's or a generation's change).
pub fn list_local() -> Result<Vec<FnInfo>, Error> {
    list_with(crate::abi::fnid::FN_LIST_LOCAL)
}

/// The process serving function `name` now, as this core's copy of the registry has it
/// ([`list_local`]); `None` if it is not registered or not up. A server checks with it
/// that a request came from the process serving another function (`netd` that frames
/// come from the driver, the driver that `machd`'s frames come from `machd`).
pub fn server_of(name: &str) -> Option<abi::Pid> {
    list_local().ok().and_then(|l| {
        l.iter()
            .find(|f| f.name() == name && f.state == abi::fnid::FN_UP)
            .map(|f| f.server)
    })
}

/// Function `fnid`'s record in this core's copy of the registry ([`list_local`]);
/// `NoSuchResource` if it is not registered.
pub fn info(fnid: FnId) -> Result<FnInfo, Error> {
    list_local()?
        .into_iter()
        .find(|i| i.fnid == fnid)
        .ok_or(Error::NoSuchResource)
}

fn list_with(flags: u64) -> Result<Vec<FnInfo>, Error> {
    let mut buf = alloc::vec![FnInfo::default(); MAX_FNIDS];
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    let n = decode(unsafe {
        raw::syscall3(
            nr::FN_LIST,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
            flags,
        )
    })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// FN_STATE: make `vregion` the function's state ICA (`Some`, by its server), or ask for
/// it (`None`); the state ICA after the call, if there is one.
pub fn state(fnid: FnId, vregion: Option<ResId>) -> Result<Option<ResId>, Error> {
    let set = vregion.map_or(0, |v| v.0);
    // SAFETY: no memory is passed.
    let v = decode(unsafe { raw::syscall2(nr::FN_STATE, fnid.0, set) })?;
    Ok((v != 0).then_some(ResId(v)))
}

/// FN_TAKEOVER: take function `fnid` over with `endpoint` (the caller's own), waiting at most
/// `timeout_ns` for the old server to finish its request step; the new server generation.
/// Attach the state ICA only after it returns (the old server runs no more user code then:
/// its only thread is handing over in the kernel, or its process has ended).
pub fn takeover(fnid: FnId, endpoint: ResId, timeout_ns: u64) -> Result<u64, Error> {
    // SAFETY: no memory is passed.
    decode(unsafe { raw::syscall3(nr::FN_TAKEOVER, fnid.0, endpoint.0, timeout_ns) })
}

/// Attach the function's state ICA `region` at `address` (writable) in a new server: right
/// after [`takeover`] returned, or in a server restarted after a crash. A crashed server
/// has ended, but its core may still be telling the vregion's core that it unmapped the
/// area, so `Busy` is tried again (up to 1,000 times, 100 us apart); any other error is
/// returned at once.
pub fn attach_state(region: ResId, address: u64) -> Result<(), Error> {
    let mut tries = 0;
    loop {
        match crate::res::attach_here(region, address, true) {
            Err(Error::Busy) if tries < 1000 => {
                tries += 1;
                let _ = crate::sys::sleep_ns(100_000);
            }
            r => return r,
        }
    }
}

/// Times [`call_fn`] sends a request again after `Again`, and the longest wait between two
/// tries: about 6 s in all, longer than a replacement or a restart's backoff takes.
pub const AGAIN_TRIES: u32 = 400;
const AGAIN_WAIT_MAX_NS: u64 = 20_000_000;

/// CALL function `fnid` with `msg`: the reply's value and message. A request answered
/// `Again` (its server was replaced while holding it, or the function is being restarted
/// after a crash: `abi::fnid`) is sent again, at once the first times and then after a wait
/// that doubles up to 20 ms, at most [`AGAIN_TRIES`] times; then `Again` is returned.
/// Every other answer is returned as it is.
pub fn call_fn(fnid: FnId, msg: &Msg) -> Result<(u64, Msg), Error> {
    let mut tries = 0;
    loop {
        match crate::ipc::call(fnid.as_target(), msg) {
            Err(Error::Again) if tries < AGAIN_TRIES => {
                if tries >= 4 {
                    let wait = (50_000u64 << (tries - 4).min(20)).min(AGAIN_WAIT_MAX_NS);
                    let _ = crate::sys::sleep_ns(wait);
                }
                tries += 1;
            }
            r => return r,
        }
    }
}

/// The arguments a server started with `args` (its name first) is restarted with after a
/// crash (`restart`'s `args`): the same, but `takeover` (a restart starts a first server)
/// and the words in `dropped` (takeover's own options).
pub fn restart_args(args: &[&str], dropped: &[&str]) -> alloc::string::String {
    let kept: Vec<&str> = args
        .iter()
        .skip(1)
        .copied()
        .filter(|a| *a != "takeover" && !dropped.contains(a))
        .collect();
    kept.join(" ")
}

/// FN_RESTART: the caller, `fnid`'s server, asks to be restarted after a crash (at most
/// `max` times in `window_ms`; 0: never) as its own program with `args` (space-separated).
pub fn restart(fnid: FnId, max: u64, window_ms: u64, args: &str) -> Result<(), Error> {
    // SAFETY: the kernel only reads `args.len()` bytes at `args`.
    decode(unsafe {
        raw::syscall5(
            nr::FN_RESTART,
            fnid.0,
            max,
            window_ms,
            args.as_ptr() as u64,
            args.len() as u64,
        )
    })
    .map(drop)
}
