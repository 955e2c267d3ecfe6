//! The resource table of this core and the five operations on it (the local half of RIC
//! and RCC; `res/mod.rs` routes calls here or, for another core's resources, through RPCC).
//!
//! Every core keeps its own table of resources ([`Table`] from `libs/rescore`), in its own
//! `CoreCell`, touched only by that core: there is no lock. An operation names a resource by
//! its [`ResId`]; a forged or closed one gets `NoSuchResource` or `StaleResource`, never
//! another resource. Every operation checks the current flow's user against the resource's
//! rights, unless `rcc=off`. The flow is the local caller's, or, in an RPCC agent, the remote
//! requester's: so the checks are the same code for both. What each operation means for
//! each type: docs/resources.md.

use super::{flow_pid, flow_priority, flow_user, rcc_on, ReadOut};
use crate::arch::x86_64::paging::{phys_to_virt, PAGE_SIZE};
use crate::mm::frames;
use crate::percore::{self, current_core};
use crate::proc;
use crate::rpcc;
use abi::res::{Op, ResId, ResInfo, ResName, ResType, Rights, UserId, MAX_NAME};
use abi::syscall::control;
use abi::{Error, Pid, Priority};
use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use rescore::{Lookup, Table};

/// Largest vregion.
pub const MAX_VREGION: u64 = 16 << 20;
/// Largest mips degree of a compute.
pub const MAX_MIPS: u64 = 10_000;
/// Most resources one core holds (a bound on the kernel memory users can make it spend).
pub const MAX_RESOURCES: u32 = 16_384;
/// Most vregions attached to one address space.
pub const MAX_ATTACHMENTS: usize = 64;

/// What a resource is, with its type-specific state.
pub enum Body {
    VRegion {
        frames: Vec<u64>,
        size: u64,
        attached: u32,
    },
    VSpace {
        pid: Pid,
    },
    Process {
        pid: Pid,
    },
    Compute {
        mips: u32,
        bound: Option<Pid>,
    },
    /// Requests sent here go to `owner`'s request queue (`ipc`).
    Endpoint {
        owner: Pid,
    },
    /// A counting semaphore and who waits in its P.
    Sem {
        count: u64,
        waiters: alloc::collections::VecDeque<crate::res::sem::Waiter>,
    },
}

pub struct Entry {
    name: heapless::String<MAX_NAME>,
    kind: ResType,
    creator: UserId,
    rights: Rights,
    body: Body,
}

/// One core's resources, and an index of their names (a name is unique per type and core).
pub struct ResTable {
    table: Table<Entry>,
    names: BTreeSet<(u8, heapless::String<MAX_NAME>)>,
}

impl ResTable {
    pub const fn new() -> Self {
        ResTable {
            table: Table::new(MAX_RESOURCES, ResId::GENERATION_MASK),
            names: BTreeSet::new(),
        }
    }
}

/// May the current flow act on process `pid` itself (bind a compute to it, reach into its
/// address space)? Only as the process's own user, or as the kernel, or with `rcc=off`.
fn may_touch(pid: Pid) -> Result<(), Error> {
    let me = flow_user();
    match proc::user_of(pid) {
        None => Err(Error::NoSuchProcess),
        Some(owner) if !rcc_on() || me == UserId::KERNEL || me == owner => Ok(()),
        Some(_) => Err(Error::Denied),
    }
}

fn check(e: &Entry, op: Op) -> Result<(), Error> {
    if !rcc_on() || e.rights.allows(op, flow_user(), e.creator) {
        Ok(())
    } else {
        Err(Error::Denied)
    }
}

// ---- lookup ------------------------------------------------------------------------------

fn with_table<R>(f: impl FnOnce(&mut Table<Entry>) -> R) -> R {
    percore::this().res.with(|t| f(&mut t.table))
}

fn lookup_error(l: Lookup) -> Error {
    match l {
        Lookup::Unknown => Error::NoSuchResource,
        Lookup::Stale => Error::StaleResource,
    }
}

/// Check that `id` is this core's (the router sent it here) and well-formed; its type.
fn local(id: ResId) -> Result<ResType, Error> {
    if id.machine() != 0 || id.core() != current_core() {
        return Err(Error::NoSuchResource);
    }
    id.kind().ok_or(Error::NoSuchResource)
}

/// Run `f` on the entry `id` names, after checking `op` (if any) against its rights.
fn with_entry<R>(
    id: ResId,
    op: Option<Op>,
    f: impl FnOnce(&mut Entry) -> Result<R, Error>,
) -> Result<R, Error> {
    let kind = local(id)?;
    with_table(|t| {
        let e = t
            .get_mut(id.slot(), id.generation())
            .map_err(lookup_error)?;
        if e.kind != kind {
            return Err(Error::WrongType);
        }
        if let Some(op) = op {
            check(e, op)?;
        }
        f(e)
    })
}

fn u64_arg(args: &[u8]) -> Result<u64, Error> {
    let bytes: [u8; 8] = args
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or(Error::InvalidArgument)?;
    if args.len() != 8 {
        return Err(Error::InvalidArgument);
    }
    Ok(u64::from_le_bytes(bytes))
}

// ---- the five operations -----------------------------------------------------------------

/// OPEN: create the resource `name` names (on this core), with `args` (docs/resources.md)
/// and `rights`. Returns its id, and its pid if it is a process.
pub fn open(
    parsed: &ResName<'_>,
    args: &[u8],
    rights: Rights,
) -> Result<(ResId, Option<Pid>), Error> {
    if parsed.core(current_core()) != current_core() {
        return Err(Error::BadName);
    }
    let key = (
        parsed.kind as u8,
        heapless::String::try_from(parsed.name).map_err(|_| Error::BadName)?,
    );
    if percore::this().res.with(|t| t.names.contains(&key)) {
        return Err(Error::AlreadyExists);
    }
    let body = match parsed.kind {
        ResType::VRegion => {
            let size = u64_arg(args)?;
            if size == 0 || size > MAX_VREGION {
                return Err(Error::InvalidArgument);
            }
            let mut frames = Vec::new();
            for _ in 0..size.div_ceil(PAGE_SIZE) {
                match frames::alloc_user() {
                    Some(f) => {
                        crate::arch::x86_64::paging::zero_frame(f);
                        frames.push(f);
                    }
                    None => {
                        for f in frames {
                            let _ = frames::free(f);
                        }
                        return Err(Error::NoMemory);
                    }
                }
            }
            Body::VRegion {
                frames,
                size,
                attached: 0,
            }
        }
        ResType::VSpace => {
            let pid = match u64_arg(args)? {
                0 => flow_pid().ok_or(Error::NoSuchProcess)?,
                p => Pid(p),
            };
            // A vspace handle lives on its process's core.
            if pid.core() != current_core() {
                return Err(Error::InvalidArgument);
            }
            may_touch(pid)?;
            Body::VSpace { pid }
        }
        ResType::Process => {
            let text = core::str::from_utf8(args).map_err(|_| Error::InvalidArgument)?;
            let mut parts = text.split_terminator('\0');
            let program = parts
                .next()
                .filter(|p| !p.is_empty())
                .ok_or(Error::InvalidArgument)?;
            let argv: Vec<&str> = parts.collect();
            let parent = flow_pid().unwrap_or(proc::TEST_PARENT);
            let priority = flow_priority().max(Priority::App);
            Body::Process {
                pid: proc::create_stopped(program, &argv, priority, parent)?,
            }
        }
        ResType::Compute => {
            let mips = u64_arg(args)?;
            if mips == 0 || mips > MAX_MIPS {
                return Err(Error::InvalidArgument);
            }
            Body::Compute {
                mips: mips as u32,
                bound: None,
            }
        }
        ResType::Sem => {
            let count = u64_arg(args)?;
            if count > crate::res::sem::MAX_COUNT {
                return Err(Error::InvalidArgument);
            }
            Body::Sem {
                count,
                waiters: alloc::collections::VecDeque::new(),
            }
        }
        ResType::Endpoint => {
            // The opener receives; an endpoint lives on its owner's core.
            let owner = flow_pid().ok_or(Error::NoSuchProcess)?;
            if owner.core() != current_core() {
                return Err(Error::InvalidArgument);
            }
            Body::Endpoint { owner }
        }
    };
    let entry = Entry {
        name: key.1.clone(),
        kind: parsed.kind,
        creator: flow_user(),
        rights,
        body,
    };
    let pid = match entry.body {
        Body::Process { pid } => Some(pid),
        _ => None,
    };
    let (slot, generation) = percore::this()
        .res
        .with(|t| {
            let r = t.table.insert(entry);
            if r.is_ok() {
                t.names.insert(key);
            }
            r
        })
        .map_err(|e| {
            release(e.body);
            Error::NoMemory
        })?;
    Ok((
        ResId::new(0, current_core(), parsed.kind, generation, slot),
        pid,
    ))
}

/// Give back what a body holds (its resource is gone).
fn release(body: Body) {
    match body {
        Body::VRegion { frames, .. } => {
            for f in frames {
                let _ = frames::free(f);
            }
        }
        Body::Process { pid } => {
            let _ = proc::remove(pid);
        }
        Body::Compute {
            bound: Some(pid), ..
        } => {
            let _ = proc::stop(pid);
        }
        Body::Sem { waiters, .. } => crate::res::sem::closed(waiters),
        Body::Compute { bound: None, .. } | Body::VSpace { .. } | Body::Endpoint { .. } => {}
    }
}

/// CLOSE: delete the resource.
pub fn close(id: ResId) -> Result<(), Error> {
    with_entry(id, Some(Op::Close), |e| match e.body {
        Body::VRegion { attached, .. } if attached > 0 => Err(Error::Busy),
        _ => Ok(()),
    })?;
    let entry = percore::this()
        .res
        .with(|t| {
            let e = t.table.remove(id.slot(), id.generation())?;
            t.names.remove(&(e.kind as u8, e.name.clone()));
            Ok(e)
        })
        .map_err(lookup_error)?;
    if let Body::Endpoint { owner } = entry.body {
        crate::ipc::endpoint_closed(owner, id);
    }
    release(entry.body);
    Ok(())
}

/// READ (docs/resources.md): `len` is the caller's buffer size, `arg` type-specific.
pub fn read(id: ResId, len: u64, arg: u64) -> Result<ReadOut, Error> {
    enum Then {
        Out(ReadOut),
        Bind(Pid, u32),
        ProcInfo(Pid),
        VSpaceList(Pid),
    }
    let then = with_entry(id, Some(Op::Read), |e| match &mut e.body {
        Body::VRegion { frames, size, .. } => {
            let end = arg
                .checked_add(len)
                .filter(|&end| end <= *size)
                .ok_or(Error::InvalidArgument)?;
            Ok(Then::Out(ReadOut::Bytes(copy_from_region(
                frames, arg, end,
            ))))
        }
        Body::Process { pid } => Ok(Then::ProcInfo(*pid)),
        Body::VSpace { pid } => Ok(Then::VSpaceList(*pid)),
        Body::Endpoint { .. } | Body::Sem { .. } => Err(Error::NotSupported),
        Body::Compute { mips, bound } => {
            if bound.is_some() {
                return Err(Error::Busy);
            }
            let pid = Pid(arg);
            *bound = Some(pid);
            Ok(Then::Bind(pid, *mips))
        }
    })?;
    match then {
        Then::Out(o) => Ok(o),
        Then::Bind(pid, mips) => {
            // A compute gives its own core's time: it runs processes of its core.
            let local_pid = if pid.core() == current_core() {
                Ok(())
            } else {
                Err(Error::InvalidArgument)
            };
            match local_pid
                .and_then(|()| may_touch(pid))
                .and_then(|()| proc::start(pid, (mips / 100).max(1)))
            {
                Ok(()) => Ok(ReadOut::Value(0)),
                Err(err) => {
                    let _ = with_entry(id, None, |e| {
                        if let Body::Compute { bound, .. } = &mut e.body {
                            *bound = None;
                        }
                        Ok(())
                    });
                    Err(err)
                }
            }
        }
        Then::ProcInfo(pid) => {
            let info = proc::info_of(pid).ok_or(Error::NoSuchProcess)?;
            // SAFETY: ProcInfo is plain data (repr(C), no padding with meaning).
            let bytes = unsafe {
                core::slice::from_raw_parts(
                    &info as *const abi::ProcInfo as *const u8,
                    core::mem::size_of::<abi::ProcInfo>(),
                )
            };
            Ok(ReadOut::Bytes(
                bytes[..bytes.len().min(len as usize)].to_vec(),
            ))
        }
        Then::VSpaceList(pid) => {
            let pairs = proc::attachments_of(pid)?;
            let max = (len / 16) as usize;
            let bytes: Vec<u8> = pairs
                .iter()
                .take(max)
                .flat_map(|(a, r)| a.to_le_bytes().into_iter().chain(r.0.to_le_bytes()))
                .collect();
            Ok(ReadOut::Bytes(bytes))
        }
    }
}

fn copy_from_region(frames: &[u64], start: u64, end: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((end - start) as usize);
    let mut at = start;
    while at < end {
        let (page, off) = ((at / PAGE_SIZE) as usize, at % PAGE_SIZE);
        let n = (PAGE_SIZE - off).min(end - at);
        // SAFETY: the frame belongs to this vregion (on this core) and is direct-mapped;
        // `off + n` stays within the page.
        let src = unsafe {
            core::slice::from_raw_parts((phys_to_virt(frames[page]) + off) as *const u8, n as usize)
        };
        out.extend_from_slice(src);
        at += n;
    }
    out
}

/// WRITE (docs/resources.md).
pub fn write(id: ResId, data: &[u8], arg: u64) -> Result<u64, Error> {
    enum Then {
        Done(u64),
        Unbind(Pid),
        Args(Pid),
    }
    let then = with_entry(id, Some(Op::Write), |e| match &mut e.body {
        Body::VRegion { frames, size, .. } => {
            let end = arg
                .checked_add(data.len() as u64)
                .filter(|&end| end <= *size)
                .ok_or(Error::InvalidArgument)?;
            let mut at = arg;
            while at < end {
                let (page, off) = ((at / PAGE_SIZE) as usize, at % PAGE_SIZE);
                let n = (PAGE_SIZE - off).min(end - at);
                let from = (at - arg) as usize;
                // SAFETY: as in `copy_from_region`.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        data[from..].as_ptr(),
                        (phys_to_virt(frames[page]) + off) as *mut u8,
                        n as usize,
                    );
                }
                at += n;
            }
            Ok(Then::Done(data.len() as u64))
        }
        Body::Compute { bound, .. } => bound.take().map(Then::Unbind).ok_or(Error::InvalidArgument),
        Body::Process { pid } => Ok(Then::Args(*pid)),
        Body::VSpace { .. } | Body::Endpoint { .. } | Body::Sem { .. } => Err(Error::NotSupported),
    })?;
    match then {
        Then::Done(n) => Ok(n),
        // A process that has ended is stopped already.
        Then::Unbind(pid) => match proc::stop(pid) {
            Ok(()) | Err(Error::NoSuchProcess) => Ok(0),
            Err(e) => Err(e),
        },
        Then::Args(pid) => {
            let text = core::str::from_utf8(data).map_err(|_| Error::InvalidArgument)?;
            let argv: Vec<&str> = text.split_terminator('\0').collect();
            proc::set_args(pid, &argv).map(|()| 0)
        }
    }
}

/// CONTROL (docs/resources.md).
pub fn control(id: ResId, cmd: u64, a: u64, b: u64) -> Result<u64, Error> {
    enum Then {
        Value(u64),
        Kill(Pid),
        Attach(Pid, ResId, u64, bool),
        Detach(Pid, u64),
        SemWait(u32),
    }
    let then = with_entry(id, Some(Op::Control), |e| match (&mut e.body, cmd) {
        (Body::VRegion { size, .. }, control::INFO) => Ok(Then::Value(*size)),
        (Body::VSpace { pid }, control::INFO) => Ok(Then::Value(
            proc::attachments_of(*pid).map_or(0, |a| a.len() as u64),
        )),
        (Body::VSpace { .. }, control::ATTACH) if b & (PAGE_SIZE - 1) & !1 != 0 => {
            Err(Error::InvalidArgument)
        }
        (Body::VSpace { pid }, control::ATTACH) => Ok(Then::Attach(
            *pid,
            ResId(a),
            b & !(PAGE_SIZE - 1),
            b & 1 != 0,
        )),
        (Body::VSpace { pid }, control::DETACH) => Ok(Then::Detach(*pid, a)),
        (Body::Process { pid }, control::INFO) => Ok(Then::Value(pid.0)),
        (Body::Process { pid }, control::KILL) => Ok(Then::Kill(*pid)),
        (Body::Compute { mips, .. }, control::INFO) => Ok(Then::Value(u64::from(*mips))),
        (Body::Compute { mips, bound }, control::SET_MIPS) if (1..=MAX_MIPS).contains(&a) => {
            *mips = a as u32;
            if let Some(pid) = bound {
                proc::set_slice(*pid, (*mips / 100).max(1));
            }
            Ok(Then::Value(a))
        }
        (Body::Compute { .. }, control::SET_MIPS) => Err(Error::InvalidArgument),
        (Body::Endpoint { owner }, control::INFO) => Ok(Then::Value(owner.0)),
        (Body::Sem { count, .. }, control::INFO) => Ok(Then::Value(*count)),
        (Body::Sem { count, waiters }, control::SEM_V) => {
            crate::res::sem::v(count, waiters).map(Then::Value)
        }
        (Body::Sem { count, waiters }, control::SEM_P) => {
            match crate::res::sem::p(count, waiters)? {
                None => Ok(Then::Value(0)),
                Some(thread) => Ok(Then::SemWait(thread)),
            }
        }
        _ => Err(Error::NotSupported),
    })?;
    match then {
        Then::Value(v) => Ok(v),
        // The resource's control right was checked: that is the permission to end it.
        Then::Kill(pid) => proc::end_by_kill(pid).map(|()| 0),
        // Queued in the P: wait until a V hands this thread the unit (it is no longer
        // queued) or the semaphore is closed (the lookup fails).
        Then::SemWait(thread) => loop {
            crate::proc::sched::block(crate::proc::sched::Block::Sem);
            let queued = with_entry(id, None, |e| match &e.body {
                Body::Sem { waiters, .. } => {
                    Ok(waiters.contains(&crate::res::sem::Waiter::Thread(thread)))
                }
                _ => Err(Error::WrongType),
            })?;
            if !queued {
                break Ok(0);
            }
        },
        Then::Attach(pid, region, addr, writable) => {
            // The handle's rights were checked; the process itself must be the caller's.
            may_touch(pid)?;
            // The region may live on another core: its owner checks and counts.
            let frames = if region.core() == current_core() {
                region_attach(region, writable)?
            } else if region.machine() == 0 && rpcc::reachable(region.core()) {
                match rpcc::call(region.core(), rpcc::Op::RegionAttach { region, writable })? {
                    rpcc::Out::Frames(f) => f,
                    _ => return Err(Error::Unknown),
                }
            } else {
                return Err(Error::NoSuchResource);
            };
            proc::attach(pid, addr, &frames, writable, region)
                .inspect_err(|_| super::note_detached(core::iter::once(region)))?;
            Ok(0)
        }
        Then::Detach(pid, addr) => {
            may_touch(pid)?;
            let region = proc::detach(pid, addr)?;
            super::note_detached(core::iter::once(region));
            Ok(0)
        }
    }
}

/// The owner of endpoint `id` (of this core), after checking the flow's right to send to it
/// (`write`) or to receive from it (`read`).
pub fn endpoint_owner(id: ResId, send: bool) -> Result<Pid, Error> {
    let op = if send { Op::Write } else { Op::Read };
    with_entry(id, Some(op), |e| match e.body {
        Body::Endpoint { owner } => Ok(owner),
        _ => Err(Error::WrongType),
    })
}

/// Process `owner` (of this core) ended: its endpoints go with it (their queued requests
/// were answered `Gone` with the rest of its queue). Called with the scheduler borrowed.
pub fn forget_endpoints_of(owner: Pid) {
    percore::this().res.with(|t| {
        let gone: Vec<(u32, u32)> = t
            .table
            .iter()
            .filter(|(_, _, e)| matches!(e.body, Body::Endpoint { owner: o } if o == owner))
            .map(|(slot, generation, _)| (slot, generation))
            .collect();
        for (slot, generation) in gone {
            if let Ok(e) = t.table.remove(slot, generation) {
                t.names.remove(&(e.kind as u8, e.name.clone()));
            }
        }
    });
}

/// Vregion `region` (of this core) is being attached to an address space: check the rights
/// (read, and write if `writable`), count the attachment, return its frames.
pub fn region_attach(region: ResId, writable: bool) -> Result<Vec<u64>, Error> {
    with_entry(region, Some(Op::Read), |e| {
        if writable {
            check(e, Op::Write)?;
        }
        match &mut e.body {
            Body::VRegion {
                frames, attached, ..
            } => {
                *attached += 1;
                Ok(frames.clone())
            }
            _ => Err(Error::WrongType),
        }
    })
}

/// Vregions of this core that are no longer attached somewhere (detach, or their process
/// ended or moved).
pub fn note_detached(regions: impl Iterator<Item = ResId>) {
    let regions: Vec<ResId> = regions.collect();
    if regions.is_empty() {
        return;
    }
    with_table(|t| {
        for r in regions {
            if let Ok(e) = t.get_mut(r.slot(), r.generation()) {
                if let Body::VRegion { attached, .. } = &mut e.body {
                    *attached = attached.saturating_sub(1);
                }
            }
        }
    });
}

fn info_of(slot: u32, generation: u32, e: &Entry) -> ResInfo {
    let mut name = [0u8; MAX_NAME];
    name[..e.name.len()].copy_from_slice(e.name.as_bytes());
    let (size, detail) = match &e.body {
        Body::VRegion { size, attached, .. } => (*size, u64::from(*attached)),
        Body::VSpace { pid } => (
            proc::info_of(*pid).map_or(0, |i| i.memory / PAGE_SIZE),
            pid.0,
        ),
        Body::Process { pid } => (
            pid.0,
            u64::from(proc::info_of(*pid).map_or(abi::STATE_ZOMBIE, |i| i.state)),
        ),
        Body::Compute { mips, bound } => (u64::from(*mips), bound.map_or(0, |p| p.0)),
        Body::Endpoint { owner } => (owner.0, 0),
        Body::Sem { count, waiters } => (*count, waiters.len() as u64),
    };
    ResInfo {
        id: ResId::new(0, current_core(), e.kind, generation, slot),
        creator: e.creator,
        rights: e.rights.0,
        kind: e.kind as u8,
        name_len: e.name.len() as u8,
        _pad: 0,
        name,
        size,
        detail,
    }
}

/// RES_INFO: one resource's record (no right needed: knowing the id is enough to see it).
pub fn info(id: ResId) -> Result<ResInfo, Error> {
    let kind = local(id)?;
    with_table(|t| {
        let e = t.get(id.slot(), id.generation()).map_err(lookup_error)?;
        if e.kind != kind {
            return Err(Error::WrongType);
        }
        Ok(info_of(id.slot(), id.generation(), e))
    })
}

/// RES_LIST: this core's resources.
pub fn list() -> Vec<ResInfo> {
    with_table(|t| t.iter().map(|(s, g, e)| info_of(s, g, e)).collect())
}
