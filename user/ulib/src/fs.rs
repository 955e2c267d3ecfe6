//! Files on the disk (issue 16): [`open`], [`read`], [`write`], [`seek`], [`close`], [`unlink`],
//! [`readdir`], [`mkdir`], [`stat`] as requests to the file service `fs` (`abi::fs`; the
//! server is `user/fsd`), found by function id. Names are `/`-separated FAT 8.3 names
//! relative to the volume's root (`DIR/FILE.TXT`).
//!
//! Each request carries a fresh ICA (a vregion of `FS_ICA_SIZE` bytes, opened, attached,
//! sent, detached and closed again), so a program holds nothing between calls but its
//! handles; [`read_all`] and [`write_all`] loop over the ICA-sized pieces.

use crate::abi::fs::*;
use crate::abi::ipc::Msg;
use crate::abi::res::{ResId, Rights};
use crate::abi::Error;
use crate::{fnid, ipc, res};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

pub use crate::abi::fs::{MODE_APPEND, MODE_READ, MODE_WRITE};

/// An open file (the server's handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fd(pub u64);

/// Where the request ICA is attached while the caller fills it.
const AT: u64 = 0x0000_5500_0000_0000;

/// One request to `fs`: `fill` writes the ICA, `take` reads the reply's ICA.
fn request<T>(
    label: u64,
    words: [u64; 6],
    fill: impl FnOnce(&mut [u8]),
    take: impl FnOnce(&[u8], &Msg) -> T,
) -> Result<T, Error> {
    let server = ResId(fnid::lookup(FN_FS)?.0);
    let pid = crate::sys::getpid()?;
    let region = res::open_vregion(
        &format!("here/vregion/fs-{}", pid.0),
        FS_ICA_SIZE,
        Rights::OWNER_ALL,
    )?;
    let r = (|| {
        res::attach_here(region, AT, true)?;
        // SAFETY: just attached writable at AT, FS_ICA_SIZE bytes, only by us.
        fill(unsafe { core::slice::from_raw_parts_mut(AT as *mut u8, FS_ICA_SIZE as usize) });
        let (value, reply) = ipc::call(server, &ipc::with_ica(Msg { label, words }, region))?;
        let (_, at) = ipc::ica_at(&reply).ok_or(Error::Unknown)?;
        // SAFETY: the reply gave the ICA back, attached at `at`, FS_ICA_SIZE bytes.
        let data = unsafe { core::slice::from_raw_parts(at as *const u8, FS_ICA_SIZE as usize) };
        let out = if value == 0 {
            Ok(take(data, &reply))
        } else {
            Err(Error::from_code(value))
        };
        let _ = res::detach_here(at);
        out
    })();
    let _ = res::close(region);
    r
}

/// A request whose ICA carries only `name`.
fn named(label: u64, name: &str, w0: u64) -> Result<[u64; 6], Error> {
    if name.len() > FS_ICA_SIZE as usize {
        return Err(Error::TooLong);
    }
    request(
        label,
        [w0, 0, 0, name.len() as u64, 0, 0],
        |b| b[..name.len()].copy_from_slice(name.as_bytes()),
        |_, m| m.words,
    )
}

/// Open `name` with `mode` ([`MODE_READ`], [`MODE_WRITE`], [`MODE_APPEND`]).
pub fn open(name: &str, mode: u64) -> Result<Fd, Error> {
    open_len(name, mode).map(|(fd, _)| fd)
}

/// [`open`], also giving the file's length (0 for a file made or emptied by the open).
pub fn open_len(name: &str, mode: u64) -> Result<(Fd, u64), Error> {
    named(FS_OPEN, name, mode).map(|w| (Fd(w[0]), w[1]))
}

/// Read up to `buf.len()` bytes (at most `FS_ICA_SIZE` a call); 0 at the end.
pub fn read(fd: Fd, buf: &mut [u8]) -> Result<usize, Error> {
    let len = buf.len().min(FS_ICA_SIZE as usize);
    request(
        FS_READ,
        [fd.0, len as u64, 0, 0, 0, 0],
        |_| {},
        |data, m| {
            let n = (m.words[0] as usize).min(len);
            buf[..n].copy_from_slice(&data[..n]);
            n
        },
    )
}

/// Write `data` (at most `FS_ICA_SIZE` bytes a call); returns the bytes written.
pub fn write(fd: Fd, data: &[u8]) -> Result<usize, Error> {
    let len = data.len().min(FS_ICA_SIZE as usize);
    request(
        FS_WRITE,
        [fd.0, len as u64, 0, 0, 0, 0],
        |b| b[..len].copy_from_slice(&data[..len]),
        |_, _| len,
    )
}

/// Move `fd`'s position to byte `pos` (at most the file's length): the next read or
/// write starts there.
pub fn seek(fd: Fd, pos: u64) -> Result<(), Error> {
    request(FS_SEEK, [fd.0, pos, 0, 0, 0, 0], |_| {}, |_, _| ())
}

/// Close `fd`: what was written is on the disk when this returns.
pub fn close(fd: Fd) -> Result<(), Error> {
    request(FS_CLOSE, [fd.0, 0, 0, 0, 0, 0], |_| {}, |_, _| ())
}

/// Delete the file (or empty directory) `name`.
pub fn unlink(name: &str) -> Result<(), Error> {
    named(FS_UNLINK, name, 0).map(drop)
}

/// Make the directory `name`.
pub fn mkdir(name: &str) -> Result<(), Error> {
    named(FS_MKDIR, name, 0).map(drop)
}

/// About a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub size: u64,
    pub dir: bool,
}

/// Size and kind of `name`.
pub fn stat(name: &str) -> Result<Stat, Error> {
    named(FS_STAT, name, 0).map(|w| Stat {
        size: w[0],
        dir: w[1] == 1,
    })
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
    pub dir: bool,
}

/// The entries of directory `name` (`""` or `"/"`: the root).
pub fn readdir(name: &str) -> Result<Vec<Entry>, Error> {
    let mut out = Vec::new();
    loop {
        let mut text = String::new();
        let w = request(
            FS_READDIR,
            [out.len() as u64, 0, 0, name.len() as u64, 0, 0],
            |b| b[..name.len()].copy_from_slice(name.as_bytes()),
            |data, m| {
                let n = (m.words[0] as usize).min(data.len());
                text = String::from_utf8_lossy(&data[..n]).into_owned();
                m.words
            },
        )?;
        for line in text.lines() {
            let (n, size) = line.rsplit_once(' ').unwrap_or((line, "0"));
            out.push(Entry {
                name: n.trim_end_matches('/').into(),
                size: size.parse().unwrap_or(0),
                dir: n.ends_with('/'),
            });
        }
        if w[2] == 0 || w[1] == 0 {
            return Ok(out);
        }
    }
}

/// The whole file `name`.
pub fn read_all(name: &str) -> Result<Vec<u8>, Error> {
    let fd = open(name, MODE_READ)?;
    let mut out = Vec::new();
    let mut buf = alloc::vec![0u8; FS_ICA_SIZE as usize];
    let r = loop {
        match read(fd, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    let c = close(fd);
    r.and(c).map(|()| out)
}

/// Make `name` hold exactly `data` (made if missing).
pub fn write_all(name: &str, data: &[u8]) -> Result<(), Error> {
    let fd = open(name, MODE_WRITE)?;
    let mut r = Ok(());
    for chunk in data.chunks(FS_ICA_SIZE as usize) {
        if let Err(e) = write(fd, chunk) {
            r = Err(e);
            break;
        }
    }
    let c = close(fd);
    r.and(c)
}
