//! The clients' data areas: how values (up to 1 KiB, more than a message's six words) travel
//! between `kvcli` and `kv` without a copy through the kernel.
//!
//! A client opens a small vregion on its own core named `pCORE.SERIAL-kvc` after its own
//! pid (`kvcli` opens 4 KiB), with read and write for others, attaches it, and sends its id
//! in a `HELLO`. The server checks that it is a vregion of at most [`AREA_MAX`] bytes named
//! after the sender's pid on the sender's core: the kernel vouches for the sender, a name
//! is unique per core, and one of the form `pC.S-...` only process C.S may open
//! (`abi::res::reserved_for`), so the area is the sender's own, a client cannot point the
//! server at an area another process made, and no program can take the name of a client's
//! area before the client opens it. The server attaches it in its own window ([`CLIENTS_AT`] +
//! slot x [`WINDOW`]). A `PUT` then names an offset in the area where the value is, a `GET`
//! where the value should go. `BYE` detaches it (the client then detaches and closes it).
//!
//! At most [`MAX_CLIENTS`] clients at once; when all slots are taken, a `HELLO` first drops
//! the areas of clients that have ended without `BYE` (their vregion stays theirs to close:
//! the server can only unmap it), and answers `Busy` if none has.
//!
//! The client may change its area while the server reads it (another thread): every value
//! is copied once, byte by byte with volatile accesses, and only the copy is used.

use alloc::format;
use kvstate::proto::{AreaName, Status};
use ulib::abi::res::{ResId, ResType};
use ulib::abi::{Error, Pid, ProcInfo, STATE_ZOMBIE};
use ulib::{res, sys};

/// The first client's window.
pub const CLIENTS_AT: u64 = 0x0000_6100_0000_0000;
/// Spacing of the windows.
pub const WINDOW: u64 = 1 << 20;
/// Largest data area.
pub const AREA_MAX: u64 = 64 << 10;
/// Most clients with an area at once.
pub const MAX_CLIENTS: usize = 64;

#[derive(Clone, Copy)]
struct Client {
    pid: Pid,
    len: u64,
}

/// The clients that said `HELLO`, by window.
pub struct Clients {
    slots: [Option<Client>; MAX_CLIENTS],
    /// The slot found last (a client usually sends several requests in a row).
    last: usize,
    /// This server took over from another (live replacement): clients may have said
    /// `HELLO` to that one.
    inherited: bool,
}

/// One client's data area, as the server maps it.
pub struct Area {
    at: u64,
    len: u64,
}

impl Area {
    fn range(&self, offset: u64, n: usize) -> Result<u64, Status> {
        match offset.checked_add(n as u64) {
            Some(end) if end <= self.len => Ok(self.at + offset),
            _ => Err(Status::BadArea),
        }
    }

    /// Copy `out.len()` bytes from `offset`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), Status> {
        let base = self.range(offset, out.len())? as *const u8;
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: `base + i` is inside the area (checked above), which is mapped at
            // `at` for `len` bytes while the client is in the table; volatile because the
            // client may write it at the same time (any byte is a valid `u8`).
            *b = unsafe { core::ptr::read_volatile(base.add(i)) };
        }
        Ok(())
    }

    /// Copy `data` to `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), Status> {
        let base = self.range(offset, data.len())? as *mut u8;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`; the area is attached writable.
            unsafe { core::ptr::write_volatile(base.add(i), *b) };
        }
        Ok(())
    }
}

fn window(slot: usize) -> u64 {
    CLIENTS_AT + slot as u64 * WINDOW
}

impl Clients {
    /// `inherited`: the server took over from another, whose clients keep calling.
    pub fn new(inherited: bool) -> Clients {
        Clients {
            slots: [None; MAX_CLIENTS],
            last: 0,
            inherited,
        }
    }

    fn find(&mut self, pid: Pid) -> Option<usize> {
        if self.slots[self.last].is_some_and(|c| c.pid == pid) {
            return Some(self.last);
        }
        let i = self
            .slots
            .iter()
            .position(|c| c.is_some_and(|c| c.pid == pid))?;
        self.last = i;
        Some(i)
    }

    /// The data area of `pid`: a client not in the table may have said `HELLO` to the
    /// server this one took over from (live replacement): its area, found by its name, is
    /// taken as if it said it again.
    pub fn area(&mut self, pid: Pid) -> Result<Area, Status> {
        let i = match self.find(pid) {
            Some(i) => i,
            None if self.inherited => self.rediscover(pid)?,
            None => return Err(Status::NoArea),
        };
        let len = self.slots[i].map_or(0, |c| c.len);
        Ok(Area { at: window(i), len })
    }

    /// `pid` names its data area `region`.
    pub fn hello(&mut self, pid: Pid, region: ResId) -> Result<(), Status> {
        let size = area_size(pid, region)?;
        self.attach(pid, region, size)?.map_err(|_| Status::BadArea)
    }

    /// [`hello`](Self::hello) once `region` passed [`area_size`]: `Ok(Err(e))` if it cannot
    /// be attached here (`Busy` may pass: the area is in flight as an ICA, or the window is
    /// still mapped), `Err(Busy)` if no slot is free.
    fn attach(&mut self, pid: Pid, region: ResId, size: u64) -> Result<Result<(), Error>, Status> {
        // A second HELLO replaces the first area.
        if let Some(i) = self.find(pid) {
            self.drop_slot(i);
        }
        let i = match self.free() {
            Some(i) => i,
            None => {
                self.drop_ended();
                self.free().ok_or(Status::Busy)?
            }
        };
        if let Err(e) = res::attach_here(region, window(i), true) {
            return Ok(Err(e));
        }
        self.slots[i] = Some(Client { pid, len: size });
        self.last = i;
        Ok(Ok(()))
    }

    /// The slot of `pid`'s area, found by its name ([`area_name`] on its core).
    fn rediscover(&mut self, pid: Pid) -> Result<usize, Status> {
        let name = format!("c{}/vregion/{}", pid.core(), area_name(pid));
        let info = res::find(&name).map_err(|_| Status::NoArea)?;
        // Checked once: an area that is not right never will be (it was tried 100 times,
        // 10 ms with everyone waiting: found by a review).
        let size = area_size(pid, info.id)?;
        // The old server may still be letting go of it: a few tries while the attach is
        // `Busy`; any other refusal is final.
        let mut tries = 0;
        loop {
            match self.attach(pid, info.id, size)? {
                Err(Error::Busy) if tries < 100 => {
                    tries += 1;
                    let _ = sys::sleep_ns(100_000);
                }
                r => break r.map_err(|_| Status::BadArea)?,
            }
        }
        self.find(pid).ok_or(Status::NoArea)
    }

    /// `pid` is done with its area.
    pub fn bye(&mut self, pid: Pid) -> Result<(), Status> {
        let i = match self.find(pid) {
            Some(i) => i,
            None if self.inherited => self.rediscover(pid)?,
            None => return Err(Status::NoArea),
        };
        self.drop_slot(i);
        Ok(())
    }

    fn free(&self) -> Option<usize> {
        self.slots.iter().position(|c| c.is_none())
    }

    fn drop_slot(&mut self, i: usize) {
        if self.slots[i].take().is_some() {
            let _ = res::detach_here(window(i));
        }
    }

    /// Drop the areas of clients that have ended (or are no longer listed).
    fn drop_ended(&mut self) {
        let mut buf = alloc::vec![ProcInfo::EMPTY; 1024];
        let Ok(n) = sys::processes(&mut buf) else {
            return;
        };
        let alive = |pid: Pid| {
            buf[..n]
                .iter()
                .any(|p| p.pid == pid && p.state != STATE_ZOMBIE)
        };
        for i in 0..MAX_CLIENTS {
            if self.slots[i].is_some_and(|c| !alive(c.pid)) {
                self.drop_slot(i);
            }
        }
    }
}

/// The name of `pid`'s data area, one only `pid` may open (`proto::AreaName`).
fn area_name(pid: Pid) -> AreaName {
    AreaName {
        core: pid.core(),
        serial: pid.serial(),
    }
}

/// The size of `region`, if it can be `pid`'s data area: a vregion of `pid`'s core named
/// [`area_name`], of 1 to `AREA_MAX` bytes; else `BadArea`.
fn area_size(pid: Pid, region: ResId) -> Result<u64, Status> {
    let info = res::info(region).map_err(|_| Status::BadArea)?;
    let name = format!("{}", area_name(pid));
    if info.kind != ResType::VRegion as u8
        || region.core() != pid.core()
        || info.name() != name
        || info.size == 0
        || info.size > AREA_MAX
    {
        return Err(Status::BadArea);
    }
    Ok(info.size)
}
