//! `fsd`'s state ICA: the open-file table (`libs/fsopen`), so that open files survive the
//! server's replacement (`replace fs fsd`, which starts `fsd takeover`).
//!
//! The first server makes a one-page vregion, formats the table in it and hands it to the
//! kernel as `fs`'s state ICA (`FN_STATE`). Every open, move (read, write, seek) and close
//! is written to it. A server started with `takeover` checks that `fs` has such a state
//! ICA, takes `fs` over (the old server ends between two requests, requests queued meanwhile
//! wait in the kernel), attaches the table, and then [`Server::reopen`]s each file: under
//! the same handle, for the same owner, at the same position (a file opened to write is
//! opened again to write without emptying it). A file it cannot open again (deleted
//! meanwhile by the host, say) is dropped from the table with a console line; its client
//! then gets `InvalidArgument` for the handle, as for any handle it does not hold.
//!
//! A restart after a crash (`fsd restart=N`, the kernel's `FN_RESTART`) keeps them too: the
//! new server registers `fs` again, which keeps the function's state ICA, finds the table
//! there ([`first_or_inherited`]) and reopens each file as a takeover does. The request in
//! service at the crash got `Gone`; a write it was doing may have reached the disk or not,
//! and the position in the table is the one before it.

use crate::Server;
use alloc::format;
use alloc::string::String;
use embedded_sdmmc::Mode;
use fsopen::Table;
use ulib::abi::fnid::FnId;
use ulib::abi::fs::{FN_FS, MODE_READ};
use ulib::abi::res::{ResId, ResType, Rights};
use ulib::abi::Pid;
use ulib::{fnid, println, res};

/// Where the state ICA is mapped, the same in every server of `fs`.
const STATE_AT: u64 = 0x0000_5600_0000_0000;
/// Bytes of the state ICA.
const STATE_SIZE: u64 = 4096;
/// How long a takeover waits for the old server to finish its request.
const TAKEOVER_TIMEOUT_NS: u64 = 2_000_000_000;

/// The table's bytes, attached at [`STATE_AT`].
fn area() -> &'static mut [u8] {
    // SAFETY: the state ICA is attached writable at STATE_AT, STATE_SIZE bytes, for the rest
    // of this single-threaded server's life; this is called once, so the slice is the only
    // reference to it.
    unsafe { core::slice::from_raw_parts_mut(STATE_AT as *mut u8, STATE_SIZE as usize) }
}

/// The first server: a new table, made `fs`'s state ICA.
pub fn fresh(id: FnId) -> Result<Table<'static>, String> {
    // Named so that nobody can take the name first (`res::open_fresh`).
    let region = res::open_fresh(
        "here/vregion/fsd-state",
        &STATE_SIZE.to_le_bytes(),
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("open state ICA: {e}"))?;
    res::attach_here(region, STATE_AT, true).map_err(|e| format!("attach state ICA: {e}"))?;
    let table = Table::format(area(), 1).map_err(|e| format!("state ICA: {e:?}"))?;
    fnid::state(id, Some(region)).map_err(|e| format!("FN_STATE: {e}"))?;
    Ok(table)
}

/// A server that registered `fs` as `id`: the table a crashed server left in `fs`'s state
/// ICA (a restart; `true`), or a new one ([`fresh`]).
pub fn first_or_inherited(id: FnId) -> Result<(Table<'static>, bool), String> {
    let Some(region) = fnid::state(id, None).map_err(|e| format!("FN_STATE: {e}"))? else {
        return fresh(id).map(|t| (t, false));
    };
    // The crashed server's core may still be unmapping it: `attach_state` tries again.
    fnid::attach_state(region, STATE_AT)
        .map_err(|e| format!("attach state ICA {region} after a restart: {e}"))?;
    Ok((load_or_new()?, true))
}

/// The table in the attached state ICA; one that makes no sense is not trusted: a new one,
/// the old handles lost.
fn load_or_new() -> Result<Table<'static>, String> {
    match Table::load(area()) {
        Ok(t) => Ok(t),
        Err(e) => {
            println!("fsd: the open-file table in the state ICA is unusable ({e:?}): a new one");
            Table::format(area(), 1).map_err(|e| format!("state ICA: {e:?}"))
        }
    }
}

/// `fsd takeover`: check, take `fs` over, attach the table the old server kept.
pub fn take_over(ep: ResId) -> Result<(Table<'static>, FnId), String> {
    let id = fnid::lookup(FN_FS).map_err(|e| format!("takeover: no {FN_FS}: {e}"))?;
    // The start-up check, before the switch: a state ICA this server can use.
    let region = fnid::state(id, None)
        .map_err(|e| format!("takeover: FN_STATE: {e}"))?
        .ok_or("takeover: fs has no state ICA (its server keeps no open-file table)")?;
    let info = res::info(region).map_err(|e| format!("takeover: state ICA {region}: {e}"))?;
    if info.kind != ResType::VRegion as u8 || info.size < fsopen::SIZE as u64 {
        return Err(format!(
            "takeover: state ICA {region} is no open-file table"
        ));
    }
    let generation = fnid::takeover(id, ep, TAKEOVER_TIMEOUT_NS)
        .map_err(|e| format!("takeover of {FN_FS}: {e}"))?;
    fnid::attach_state(region, STATE_AT)
        .map_err(|e| format!("attach state ICA {region} after takeover: {e}"))?;
    println!("fsd: took {FN_FS} over (server generation {generation})");
    Ok((load_or_new()?, id))
}

impl Server {
    /// Open again every file of the table (after a takeover); how many.
    pub fn reopen(&mut self) -> usize {
        let opens: alloc::vec::Vec<fsopen::Open> = self.state.iter().collect();
        let mut done = 0;
        for o in opens {
            let mode = if u64::from(o.mode) == MODE_READ {
                Mode::ReadOnly
            } else {
                Mode::ReadWriteAppend
            };
            let path = o.path();
            let file = self
                .at_dir(path, |vm, dir, last| vm.open_file_in_dir(dir, last, mode))
                .and_then(|f| match self.vm.file_seek_from_start(f, o.position) {
                    Ok(()) => Ok(f),
                    Err(e) => {
                        let _ = self.vm.close_file(f);
                        Err(crate::code(&e))
                    }
                });
            match file {
                Ok(f) => {
                    let owner = Pid(o.owner);
                    self.files
                        .insert(o.handle, (f, owner, mode != Mode::ReadOnly));
                    done += 1;
                }
                Err(e) => {
                    println!(
                        "fsd: {path} (handle {} of {}) not opened again: {e}",
                        o.handle,
                        Pid(o.owner)
                    );
                    self.state.remove(o.handle);
                }
            }
        }
        done
    }
}
