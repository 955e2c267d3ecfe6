//! `bufcheck oneway`: one-way messages (`SEND`, nothing to answer) each carrying a page,
//! more than a server's 64 ICA slots, sent to `fs` by another user (its endpoint lets
//! anyone send) and to `fs.buf0` and `blk` by the administrator. Each server must let go
//! of each page; after each flood a request with an ICA is still served. A regression:
//! `fsd`, `bufd` and `blkdrv` dropped such a message and kept its page mapped for good, so
//! 64 of them filled the window and every later request with an ICA was refused, for
//! every client: any user could take the file service down.

use alloc::format;
use alloc::string::String;
use ulib::abi::blk::{self, BLK_ICA_SIZE};
use ulib::abi::buf::{self, BUF_READ};
use ulib::abi::fs::FN_FS;
use ulib::abi::ipc::Msg;
use ulib::abi::res::{Rights, UserId};
use ulib::abi::Error;
use ulib::{fnid, fs, ipc, res, sys};

/// One-way messages with a page each, per server.
const ONE_WAY: usize = 70;
/// Where the pages are attached before they are sent.
const AT: u64 = 0x0000_5500_0000_0000;
/// A send refused for a full queue is tried again, 10 ms apart, this often at most (a
/// hang guard: 10 s).
const TRIES: u32 = 1000;

/// The user the file-service flood is sent as (not the administrator).
const OTHER: UserId = UserId(2000);

pub fn one_way() -> Result<String, String> {
    let me = res::getuser().map_err(|e| format!("getuser: {e}"))?;
    // fs, as another user: the file service then still answers (a listing of the root,
    // whose answer comes in an ICA).
    res::setuser(OTHER).map_err(|e| format!("setuser {}: {e}", OTHER.0))?;
    let flooded = flood(FN_FS);
    let after = fs::readdir("/").map(drop);
    res::setuser(me).map_err(|e| format!("setuser back: {e}"))?;
    flooded?;
    after.map_err(|e| format!("after {ONE_WAY} one-way pages to fs, a listing: {e}"))?;
    let mut done = alloc::vec![FN_FS];
    // The buffer manager and the disk driver, as the administrator: a read of sector 0
    // each.
    for name in [buf::FN_NAMES[0], blk::FN_BLK] {
        let Ok(to) = fnid::lookup(name) else {
            continue;
        };
        flood(name)?;
        let label = if name == blk::FN_BLK {
            blk::BLK_READ
        } else {
            BUF_READ
        };
        let v = super::ask(to, label, 0, 1, true);
        if v != 0 {
            return Err(format!(
                "after {ONE_WAY} one-way pages to {name}, a read: {}",
                Error::from_code(v)
            ));
        }
        done.push(name);
    }
    Ok(format!(
        "{ONE_WAY} one-way pages each to {} let go, served after",
        done.join(", ")
    ))
}

/// Send [`ONE_WAY`] one-way messages with a fresh page each to function `name`.
fn flood(name: &str) -> Result<(), String> {
    let to = fnid::lookup(name).map_err(|e| format!("lookup {name}: {e}"))?;
    for i in 0..ONE_WAY {
        let page = res::open_vregion(
            &format!("here/vregion/bcow-{i}"),
            BLK_ICA_SIZE,
            Rights::OWNER_ALL,
        )
        .map_err(|e| format!("open a page: {e}"))?;
        let at = AT + (i as u64) * BLK_ICA_SIZE;
        // Marked while attached here: the kernel closes it once the server lets go.
        if let Err(e) =
            res::attach_here(page, at, true).and_then(|()| res::close_when_detached(page))
        {
            let _ = res::detach_here(at);
            let _ = res::close(page);
            return Err(format!("attach a page: {e}"));
        }
        let msg = ipc::with_ica(
            Msg {
                label: 0x7777,
                words: [0; 6],
            },
            page,
        );
        let mut sent = Err(Error::Busy);
        for _ in 0..TRIES {
            sent = ipc::send(to.as_target(), &msg);
            if sent != Err(Error::Busy) {
                break;
            }
            let _ = sys::sleep_ns(10_000_000);
        }
        if let Err(e) = sent {
            let _ = res::detach_here(at);
            let _ = res::close(page);
            return Err(format!(
                "{name}: one-way page {i} of {ONE_WAY} refused ({e}): the pages of the earlier \
                 ones still held"
            ));
        }
    }
    Ok(())
}
