//! Function ids from user space (`abi::fnid` has the contract): a server registers its
//! endpoint under a name; a caller looks the name up and calls the function id with the
//! ordinary `ipc` calls (`FnId::as_target`).

use crate::sys::{decode, raw};
use abi::fnid::{FnId, FnInfo, MAX_FNIDS};
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

/// FN_UNREGISTER: withdraw `fnid`.
pub fn unregister(fnid: FnId) -> Result<(), Error> {
    // SAFETY: no memory is passed.
    decode(unsafe { raw::syscall1(nr::FN_UNREGISTER, fnid.0) }).map(|_| ())
}

/// FN_LIST: every registered function.
pub fn list() -> Result<Vec<FnInfo>, Error> {
    let mut buf = alloc::vec![FnInfo::default(); MAX_FNIDS];
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    let n =
        decode(unsafe { raw::syscall2(nr::FN_LIST, buf.as_mut_ptr() as u64, buf.len() as u64) })?;
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
/// Attach the state ICA only after it returns (the old server has ended then).
pub fn takeover(fnid: FnId, endpoint: ResId, timeout_ns: u64) -> Result<u64, Error> {
    // SAFETY: no memory is passed.
    decode(unsafe { raw::syscall3(nr::FN_TAKEOVER, fnid.0, endpoint.0, timeout_ns) })
}
