//! Typed wrappers for the resource calls (`RES_OPEN`..`GETUSER`, abi/src/syscall.rs) and the
//! compositions of docs/resources.md built on them.
//!
//! Every resource is opened by name ([`open`] and the `open_*` helpers for each type) and
//! then reached by its [`ResId`] through [`close`], [`read`], [`write`] and [`control`].
//! What `read`, `write` and `control` mean depends on the type; the helpers name the
//! common cases ([`bind`], [`unbind`], [`attach`], [`kill`], [`size`], ...).
//!
//! [`procgetexec`] and [`procgetexec2`] are P4 Table 1's three steps for starting a process
//! that was opened stopped: read the process's information, open a compute on a core, and
//! read the compute with the process's pid (which binds it, and the process runs).
//! [`procstop`] is Table 2: write to the compute (unbind: the process stops) and close it.
//!
//! Numbers in `RES_OPEN`'s argument buffer are 8-byte little-endian; a process's program
//! and arguments are NUL-separated (no NUL after the last one, so the buffer reads the same
//! whether the kernel splits on NULs or treats them as terminators).

use crate::sys::{decode, raw};
use abi::res::{ResId, ResInfo, ResName, ResType, Rights, UserId};
use abi::syscall::{self as nr, control as cmd};
use abi::{Error, Pid, ProcInfo};
use alloc::string::String;
use alloc::vec::Vec;

/// Open (create) the resource `name` (`LOCATION/TYPE/NAME`) with the type-specific
/// arguments `args` (docs/resources.md) and the access `rights` (others than its creator:
/// see [`Rights`]); returns its identifier.
pub fn open(name: &str, args: &[u8], rights: Rights) -> Result<ResId, Error> {
    // SAFETY: both buffers are valid for reading for the lengths given.
    decode(unsafe {
        raw::syscall5(
            nr::RES_OPEN,
            name.as_ptr() as u64,
            name.len() as u64,
            args.as_ptr() as u64,
            args.len() as u64,
            u64::from(rights.0),
        )
    })
    .map(ResId)
}

/// Close (delete) a resource: what that does depends on its type (a vregion's frames are
/// freed, a process ends, a compute unbinds).
pub fn close(id: ResId) -> Result<(), Error> {
    // SAFETY: RES_CLOSE takes a number.
    decode(unsafe { raw::syscall1(nr::RES_CLOSE, id.0) }).map(drop)
}

/// `RES_READ` into `buf` with the type-specific `arg` (a vregion: the offset); returns the
/// kernel's value (a vregion: bytes read).
pub fn read(id: ResId, buf: &mut [u8], arg: u64) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing for its length.
    decode(unsafe {
        raw::syscall4(
            nr::RES_READ,
            id.0,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
            arg,
        )
    })
    .map(|n| n as usize)
}

/// `RES_WRITE` of `buf` with the type-specific `arg` (a vregion: the offset); returns the
/// kernel's value (a vregion: bytes written).
pub fn write(id: ResId, buf: &[u8], arg: u64) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for reading for its length.
    decode(unsafe {
        raw::syscall4(
            nr::RES_WRITE,
            id.0,
            buf.as_ptr() as u64,
            buf.len() as u64,
            arg,
        )
    })
    .map(|n| n as usize)
}

/// `RES_CONTROL` command `command` (`abi::syscall::control`) with two arguments.
pub fn control(id: ResId, command: u64, arg0: u64, arg1: u64) -> Result<u64, Error> {
    // SAFETY: RES_CONTROL takes numbers only.
    decode(unsafe { raw::syscall4(nr::RES_CONTROL, id.0, command, arg0, arg1) })
}

/// Fill `buf` with the resources of core `core`; returns how many were written.
pub fn list(core: usize, buf: &mut [ResInfo]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    decode(unsafe {
        raw::syscall3(
            nr::RES_LIST,
            core as u64,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
        )
    })
    .map(|n| n as usize)
}

/// Every resource of core `core`, however many there are.
pub fn list_all(core: usize) -> Result<Vec<ResInfo>, Error> {
    let mut cap = 64;
    loop {
        let mut buf = alloc::vec![ResInfo::EMPTY; cap];
        let n = list(core, &mut buf)?;
        if n < cap || cap >= 1 << 16 {
            buf.truncate(n);
            return Ok(buf);
        }
        cap *= 4;
    }
}

/// What the kernel records about a resource.
pub fn info(id: ResId) -> Result<ResInfo, Error> {
    let mut out = ResInfo::EMPTY;
    // SAFETY: the kernel writes one ResInfo to a local that lives across the call.
    decode(unsafe { raw::syscall2(nr::RES_INFO, id.0, &raw mut out as u64) })?;
    Ok(out)
}

/// Become `user` for the rights checks (no authentication: see docs/resources.md).
pub fn setuser(user: UserId) -> Result<(), Error> {
    // SAFETY: SETUSER takes a number.
    decode(unsafe { raw::syscall1(nr::SETUSER, u64::from(user.0)) }).map(drop)
}

/// The calling thread alone acts as `user` (`None`: as its process's user again); the
/// process's other threads keep acting as they did (`THREAD_SETUSER`).
pub fn thread_setuser(user: Option<UserId>) -> Result<(), Error> {
    let user = user.map_or(0, |u| u64::from(u.0));
    // SAFETY: THREAD_SETUSER takes a number.
    decode(unsafe { raw::syscall1(nr::THREAD_SETUSER, user) }).map(drop)
}

/// The user this thread acts as.
pub fn getuser() -> Result<UserId, Error> {
    // SAFETY: GETUSER takes no arguments.
    decode(unsafe { raw::syscall0(nr::GETUSER) }).map(|u| UserId(u as u32))
}

/// Find the resource called `name` (`LOCATION/TYPE/NAME`) in its core's list: names are
/// unique per core and type. [`Error::BadName`] if `name` is malformed,
/// [`Error::NoSuchResource`] if there is none.
pub fn find(name: &str) -> Result<ResInfo, Error> {
    let parsed = ResName::parse(name).map_err(|_| Error::BadName)?;
    let core = parsed.core(crate::sys::core()?);
    list_all(core)?
        .into_iter()
        .find(|r| r.kind == parsed.kind as u8 && r.name() == parsed.name)
        .ok_or(Error::NoSuchResource)
}

/// How many names [`open_fresh`] tries before it gives up.
pub const FRESH_TRIES: u32 = 8;

/// OPEN a new resource named `prefix`, a `-` and a number no other program can guess
/// (from the clock and the caller's pid), under another such number if that name is
/// taken. For what a server makes for itself, its endpoint and its memory: names are first
/// come, first served (`OPEN` of a taken name is `AlreadyExists`), so under a fixed name
/// any program started first could keep the server from starting by taking the name.
/// `AlreadyExists` only if [`FRESH_TRIES`] names in a row were taken; any other error is
/// `OPEN`'s. `prefix` is a whole path (`here/endpoint/netdrv`) short enough to leave 13
/// characters of the name for the number.
pub fn open_fresh(prefix: &str, args: &[u8], rights: Rights) -> Result<ResId, Error> {
    let pid = crate::sys::getpid().map_or(0, |p| p.0);
    let mut x = crate::sys::clock_ns().unwrap_or(0) ^ pid.rotate_left(32);
    for _ in 0..FRESH_TRIES {
        // splitmix64: one step of mixing, so that consecutive clocks give unrelated names.
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let name = alloc::format!("{prefix}-{:012x}", z & 0xffff_ffff_ffff);
        match open(&name, args, rights) {
            Err(Error::AlreadyExists) => continue,
            r => return r,
        }
    }
    Err(Error::AlreadyExists)
}

/// The type-specific size (`control INFO`): bytes, pages, pid or mips.
pub fn size(id: ResId) -> Result<u64, Error> {
    control(id, cmd::INFO, 0, 0)
}

// ---- vregion ----------------------------------------------------------------------------

/// Open a vregion of `size` bytes (1 B to 16 MiB, zeroed).
pub fn open_vregion(name: &str, size: u64, rights: Rights) -> Result<ResId, Error> {
    open(name, &size.to_le_bytes(), rights)
}

/// Are the rights checks (RCC) on? Opens a 4 KiB vregion `name` that its creator may not
/// control (rights `rwc-/----`), tries `control INFO` on it and closes it: [`Error::Denied`]
/// means the checks are on, success that they are off; `Err` if the probe itself failed.
/// For the kernel's user 0, whom every check lets through, the answer is always "off".
pub fn rcc_probe(name: &str) -> Result<bool, Error> {
    let id = open_vregion(name, 4096, Rights(0x07))?;
    let r = control(id, cmd::INFO, 0, 0);
    close(id)?;
    match r {
        Err(Error::Denied) => Ok(true),
        Ok(_) => Ok(false),
        Err(e) => Err(e),
    }
}

// ---- vspace -----------------------------------------------------------------------------

/// Open a handle to the address space of process `pid` (`None`: the caller's).
pub fn open_vspace(name: &str, pid: Option<Pid>, rights: Rights) -> Result<ResId, Error> {
    open(name, &pid.map_or(0, |p| p.0).to_le_bytes(), rights)
}

/// Attach vregion `vregion` to `vspace` at the page-aligned `address`.
pub fn attach(vspace: ResId, vregion: ResId, address: u64, writable: bool) -> Result<(), Error> {
    control(
        vspace,
        cmd::ATTACH,
        vregion.0,
        address | u64::from(writable),
    )
    .map(drop)
}

/// Detach whatever vregion is attached to `vspace` at `address`.
pub fn detach(vspace: ResId, address: u64) -> Result<(), Error> {
    control(vspace, cmd::DETACH, address, 0).map(drop)
}

/// Run `f` on a handle to the calling process's own vspace, open only for the call.
fn with_own_vspace(f: impl FnOnce(ResId) -> Result<(), Error>) -> Result<(), Error> {
    // A name nobody can guess: under one made of its serial, a program could take it
    // first and make every attach of this process fail (a server's start among them).
    let vs = open_fresh("here/vspace/own", &0u64.to_le_bytes(), Rights::OWNER_ALL)?;
    let r = f(vs);
    let _ = close(vs);
    r
}

/// DETACH the vregions attached at each of `addresses` in the calling process itself,
/// through one handle to its vspace (a server letting many go at once); every one is
/// tried, and the first error is returned.
pub fn detach_here_each(addresses: &[u64]) -> Result<(), Error> {
    with_own_vspace(|vs| {
        let mut first = Ok(());
        for &at in addresses {
            first = first.and(detach(vs, at));
        }
        first
    })
}

/// ATTACH `vregion` at `address` in the calling process itself.
pub fn attach_here(vregion: ResId, address: u64, writable: bool) -> Result<(), Error> {
    with_own_vspace(|vs| attach(vs, vregion, address, writable))
}

/// CLOSE_WHEN_DETACHED: the kernel closes vregion `region` (attached somewhere now) as
/// soon as it is attached nowhere, so it does not outlive the processes that map it.
pub fn close_when_detached(region: ResId) -> Result<(), Error> {
    control(region, nr::control::CLOSE_WHEN_DETACHED, 0, 0).map(drop)
}

/// DETACH what is at `address` in the calling process itself.
pub fn detach_here(address: u64) -> Result<(), Error> {
    with_own_vspace(|vs| detach(vs, address))
}

/// The attachments of `vspace` as (address, vregion) pairs in `buf`; returns how many.
pub fn attachments(vspace: ResId, buf: &mut [[u64; 2]]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing `size_of_val(buf)` bytes, and any bytes are valid
    // `u64`s.
    decode(unsafe {
        raw::syscall4(
            nr::RES_READ,
            vspace.0,
            buf.as_mut_ptr() as u64,
            core::mem::size_of_val(buf) as u64,
            0,
        )
    })
    .map(|bytes| (bytes as usize / 16).min(buf.len()))
}

/// Is vregion `region` attached at `at` in the calling process itself? For a caller whose
/// call with an ICA failed `Gone`: the ICA went with a server that ended holding it, or
/// never left (the target was down before the call reached it); only in the first case
/// is it gone. An error (the look itself failed: it opens a handle to the process's own
/// vspace) says nothing: a caller then keeps the ICA as if it were still here.
pub fn attached_here(region: ResId, at: u64) -> Result<bool, Error> {
    let mut found = false;
    with_own_vspace(|vs| {
        let mut pairs = [[0u64; 2]; abi::res::MAX_ATTACHMENTS];
        let n = attachments(vs, &mut pairs)?;
        found = pairs[..n].iter().any(|&[a, r]| a == at && r == region.0);
        Ok(())
    })?;
    Ok(found)
}

// ---- process ----------------------------------------------------------------------------

/// The `RES_OPEN` arguments of a process: `program`, then `args`, NUL-separated.
/// [`Error::InvalidArgument`] if any of them contains a NUL.
pub fn process_args(program: &str, args: &[&str]) -> Result<Vec<u8>, Error> {
    let mut buf =
        Vec::with_capacity(program.len() + args.iter().map(|a| a.len() + 1).sum::<usize>());
    for (i, part) in core::iter::once(&program).chain(args).enumerate() {
        if part.as_bytes().contains(&0) {
            return Err(Error::InvalidArgument);
        }
        if i > 0 {
            buf.push(0);
        }
        buf.extend_from_slice(part.as_bytes());
    }
    Ok(buf)
}

/// Open a process running `program` (from the boot archive) with `args` (its `argv[1..]`).
/// It is created stopped: a compute bound to it runs it ([`bind`], [`procgetexec`]).
pub fn open_process(
    name: &str,
    program: &str,
    args: &[&str],
    rights: Rights,
) -> Result<ResId, Error> {
    open(name, &process_args(program, args)?, rights)
}

/// Read a process resource: the process's record, as `PROCESSES` gives it.
pub fn process_info(process: ResId) -> Result<ProcInfo, Error> {
    let mut out = ProcInfo::EMPTY;
    // ProcInfo is `Pod`: any bytes the kernel writes are a valid record.
    read(process, bytemuck::bytes_of_mut(&mut out), 0)?;
    Ok(out)
}

/// The pid of a process resource.
pub fn pid_of(process: ResId) -> Result<Pid, Error> {
    size(process).map(Pid)
}

/// End the process of a process resource (the resource stays until it is closed).
pub fn kill(process: ResId) -> Result<(), Error> {
    control(process, cmd::KILL, 0, 0).map(drop)
}

// ---- compute ----------------------------------------------------------------------------

/// Open a compute (a CPU allotment) of `mips` (1 to 10,000) on the core `name` says.
pub fn open_compute(name: &str, mips: u64, rights: Rights) -> Result<ResId, Error> {
    open(name, &mips.to_le_bytes(), rights)
}

/// Bind `compute` to process `pid`: the process runs (a read of the compute).
pub fn bind(compute: ResId, pid: Pid) -> Result<(), Error> {
    let mut nothing = 0u64;
    // SAFETY: the buffer is a live local and its length is 0: the kernel copies nothing.
    decode(unsafe { raw::syscall4(nr::RES_READ, compute.0, &raw mut nothing as u64, 0, pid.0) })
        .map(drop)
}

/// Unbind `compute`: its process stops, keeping its state (a write to the compute).
pub fn unbind(compute: ResId) -> Result<(), Error> {
    let nothing = 0u64;
    // SAFETY: the buffer is a live local and its length is 0: the kernel copies nothing.
    decode(unsafe { raw::syscall4(nr::RES_WRITE, compute.0, &raw const nothing as u64, 0, 0) })
        .map(drop)
}

/// Set the mips degree of `compute`.
pub fn set_mips(compute: ResId, mips: u64) -> Result<(), Error> {
    control(compute, cmd::SET_MIPS, mips, 0).map(drop)
}

// ---- P4 Tables 1 and 2 ------------------------------------------------------------------

/// The information of process `pid` (step 1 of P4 Table 1): read from its process resource
/// when it has one (a process opened with `RES_OPEN`, found in the list of the core its pid
/// names), else from `PROCESSES`, which lists every core's processes. Either works for a
/// process on any core (the kernel carries a request for another core there by RPCC).
pub fn find_process(pid: Pid) -> Result<ProcInfo, Error> {
    let resources = list_all(pid.core())?;
    let resource = resources
        .iter()
        .find(|r| r.kind == ResType::Process as u8 && r.size == pid.0);
    if let Some(r) = resource {
        return process_info(r.id);
    }
    let mut cap = 64;
    loop {
        let mut buf = alloc::vec![ProcInfo::EMPTY; cap];
        let n = crate::sys::processes(&mut buf)?;
        if let Some(p) = buf[..n].iter().find(|p| p.pid == pid) {
            return Ok(*p);
        }
        if n < cap || cap >= 1 << 16 {
            return Err(Error::NoSuchProcess);
        }
        cap *= 4;
    }
}

/// Name of the compute [`procgetexec2`] opens for `pid` on `core`:
/// `cCORE/compute/exec-PCORE.SERIAL` (the pid's core too, so pids of different cores whose
/// serials match do not collide).
pub fn exec_name(pid: Pid, core: usize) -> String {
    alloc::format!("c{core}/compute/exec-{}.{}", pid.core(), pid.serial())
}

/// P4 Table 1 on the core where process `pid` lives: read its information, open a compute
/// of `mips` there, bind it. Returns the compute (see [`procstop`]).
pub fn procgetexec(pid: Pid, mips: u64) -> Result<ResId, Error> {
    let info = find_process(pid)?;
    exec(pid, mips, info.core as usize)
}

/// P4 Table 1 with the compute on `core`: read the information of process `pid`, open a
/// compute of `mips` on `core`, bind it. Returns the compute (see [`procstop`]).
pub fn procgetexec2(pid: Pid, mips: u64, core: usize) -> Result<ResId, Error> {
    find_process(pid)?;
    exec(pid, mips, core)
}

fn exec(pid: Pid, mips: u64, core: usize) -> Result<ResId, Error> {
    let compute = open_compute(&exec_name(pid, core), mips, Rights::OWNER_ALL)?;
    if let Err(e) = bind(compute, pid) {
        let _ = close(compute);
        return Err(e);
    }
    Ok(compute)
}

/// P4 Table 2: stop the process `compute` runs (unbind) and delete the compute.
pub fn procstop(compute: ResId) -> Result<(), Error> {
    unbind(compute)?;
    close(compute)
}

/// The resource of type `kind` named `name` on core `core`, looked for `tries` times 5 ms
/// apart while another process is still opening it (`TimedOut` if it never appears).
pub fn wait_for_named(core: usize, name: &str, kind: ResType, tries: u32) -> Result<ResId, Error> {
    for _ in 0..tries {
        if let Ok(list) = list_all(core) {
            if let Some(r) = list
                .iter()
                .find(|r| r.name() == name && r.kind == kind as u8)
            {
                return Ok(r.id);
            }
        }
        let _ = crate::sys::sleep_ns(5_000_000);
    }
    Err(Error::TimedOut)
}
