//! `bufcheck warm` and `bufcheck blkdown`: a buffer manager with its disk driver gone.
//! `warm` reads sector 0 through `fs.buf0` (so it is held); then `blkdown` takes `blk` down:
//! a child (`bufcheck takeblk`) takes the function over from the driver (which ends) and
//! exits, and nothing restarts it. It then asks `fs.buf0` for [`MISSES`] sectors of its
//! stripe: each
//! is served from its buffers or refused `Gone`, and every time the ICA comes back with the
//! answer; then sector 0 is still served. A regression: `bufd` took every `Gone` from `blk`
//! for an ICA lost with it, though a call to a function that is down never takes the ICA;
//! it kept the client's ICA mapped for good, and after 64 of them it had no room left to
//! serve anyone (found by a review).

use alloc::format;
use alloc::string::String;
use ulib::abi::buf::{self, BUF_INFO, BUF_READ};
use ulib::abi::ipc::Msg;
use ulib::abi::Error;
use ulib::abi::Priority;
use ulib::{fnid, ipc, res, sys};

/// Sectors asked for with `blk` down: more than a server's 64 ICA slots.
const MISSES: usize = 70;

pub fn warm() -> Result<String, String> {
    let m0 = fnid::lookup(buf::FN_NAMES[0]).map_err(|e| format!("fs.buf0: {e}"))?;
    match super::ask(m0, BUF_READ, 0, 1, true) {
        0 => Ok(String::from("sector 0 read")),
        v => Err(format!("a read of sector 0: {}", Error::from_code(v))),
    }
}

pub fn blk_down() -> Result<String, String> {
    let m0 = fnid::lookup(buf::FN_NAMES[0]).map_err(|e| format!("fs.buf0: {e}"))?;
    let taker = sys::spawn("bufcheck", &["takeblk"], Priority::App)
        .map_err(|e| format!("spawn bufcheck takeblk: {e}"))?;
    match sys::wait(Some(taker)) {
        Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
        other => return Err(format!("bufcheck takeblk ended {other:?}")),
    }
    let (v, info) = fnid::call_fn(
        m0,
        &Msg {
            label: BUF_INFO,
            ..Msg::default()
        },
    )
    .map_err(|e| format!("BUF_INFO: {e}"))?;
    if v != 0 {
        return Err(format!("BUF_INFO: {}", Error::from_code(v)));
    }
    let (sectors, parts) = (info.words[0], info.words[2]);
    let mut asked = 0;
    let mut gone = 0;
    for s in (1..sectors).filter(|&s| buf::manager_of(s, parts) == 0) {
        if asked == MISSES {
            break;
        }
        asked += 1;
        match super::ask(m0, BUF_READ, s, 1, true) {
            0 => {}
            v if v == Error::Gone as u64 => gone += 1,
            v => {
                return Err(format!(
                    "a read of sector {s} with blk down: {} (want Gone or a hit, the ICA back)",
                    Error::from_code(v)
                ))
            }
        }
    }
    if gone == 0 {
        return Err(format!("{asked} reads, none refused Gone: is blk down?"));
    }
    match super::ask(m0, BUF_READ, 0, 1, true) {
        0 => Ok(format!(
            "{asked} reads with blk down ({gone} Gone, each ICA back), sector 0 still served"
        )),
        v => Err(format!(
            "after {asked} reads with blk down, sector 0: {}",
            Error::from_code(v)
        )),
    }
}

/// `takeblk`: take `blk` over from its driver (which ends) and end, so that the function is
/// down (the driver asked for no restart).
pub fn take_blk() -> Result<String, String> {
    let blk = fnid::lookup(ulib::abi::blk::FN_BLK).map_err(|e| format!("blk: {e}"))?;
    let ep = ipc::open_endpoint(
        "here/endpoint/bufcheck-blk",
        ulib::abi::res::Rights::OWNER_ALL,
    )
    .map_err(|e| format!("endpoint: {e}"))?;
    let r = fnid::takeover(blk, ep, 30_000_000_000).map_err(|e| format!("take blk over: {e}"));
    let _ = res::close(ep);
    r.map(|_| String::from("blk taken over, now down"))
}
