//! Resources: the resource interface controller (RIC) and capability control (RCC) of
//! Multicore Tender (P4), location-transparent.
//!
//! The five operations (`open`, `close`, `read`, `write`, `control`) and `info`/`list` take
//! a name or id of a resource of *any* core. One of this core's goes to [`local`], which
//! owns this core's table; one of another core's is carried there by the inter-core RPCC
//! (`rpcc::call`), where an agent runs the same `local` function under the caller's flow.
//! The caller cannot tell the difference except by the time it takes.
//!
//! Flows (RCC): every kernel entry starts a new *flow* ([`begin_flow`]): a flow id and the
//! user it acts for, taken from the calling process. Every operation checks the flow's user
//! against the resource's rights (unless `rcc=off`). A request to another core carries the
//! flow id, the requester's core, user, pid and priority ([`flow_info`]); the agent that
//! performs it adopts that flow for the duration of its work ([`adopt_flow`]) and drops it
//! after ([`end_remote_flow`]).

pub mod kind;
pub mod local;
pub mod quota;

// The resource types: one file each under `res/`, behind `kind::Resource`. Adding a type
// is its file and one line here (and its `ResType` and name in the ABI).
kind::resource_types! {
    VRegion => vregion::VRegion,
    VSpace => vspace::VSpace,
    Process => process::Process,
    Compute => compute::Compute,
    Endpoint => endpoint::Endpoint,
    Sem => sem::Sem,
    Device => device::Device,
    Pipe => pipe::Pipe,
}

use crate::percore::{self, current_core};
use crate::rpcc::{self, FlowInfo, Op, Out};
use abi::res::{ResId, ResInfo, ResName, Rights, UserId};
use abi::{Error, Pid, Priority};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
pub use local::ResTable;

/// What READ produced: bytes for the caller's buffer, or just a value.
#[derive(Debug)]
pub enum ReadOut {
    Bytes(Vec<u8>),
    Value(u64),
}

// ---- flows and the RCC switch ------------------------------------------------------------

static RCC_ON: AtomicBool = AtomicBool::new(true);

/// Turn the rights checks on or off (boot option `rcc=off`).
pub fn set_rcc(on: bool) {
    RCC_ON.store(on, Ordering::Relaxed);
}

/// Are rights being checked?
pub fn rcc_on() -> bool {
    RCC_ON.load(Ordering::Relaxed)
}

/// The current flow on each core: id and user (Tender's flowid -> user association), and,
/// while an RPCC agent works, the remote requester it acts for.
pub struct Flow {
    id: AtomicU64,
    user: AtomicU32,
    remote: AtomicBool,
    remote_id: AtomicU64,
    remote_pid: AtomicU64,
    remote_priority: AtomicU32,
}

impl Flow {
    pub const fn new() -> Self {
        Flow {
            id: AtomicU64::new(0),
            user: AtomicU32::new(0),
            remote: AtomicBool::new(false),
            remote_id: AtomicU64::new(0),
            remote_pid: AtomicU64::new(0),
            remote_priority: AtomicU32::new(Priority::App as u32),
        }
    }
}

/// A kernel entry begins: a new flow, acting for `user` for the whole kernel activity.
#[inline]
pub fn begin_flow(user: UserId) -> u64 {
    begin_flow_in(&percore::this().flow, user)
}

/// [`begin_flow`] on `f`, this core's flow, which the caller already holds.
#[inline(always)]
pub fn begin_flow_in(f: &Flow, user: UserId) -> u64 {
    // A flow of this core's own, even if an agent that adopted a remote flow sleeps
    // meanwhile (it puts its flow back itself when it wakes: `rpcc::call`); else this
    // flow would act for the agent's remote requester (`flow_pid`).
    f.remote.store(false, Ordering::Relaxed);
    f.user.store(user.0, Ordering::Relaxed);
    f.id.fetch_add(1, Ordering::Relaxed) + 1
}

/// The user of the current flow (the kernel's own flows act as the kernel).
#[inline]
pub fn flow_user() -> UserId {
    UserId(percore::this().flow.user.load(Ordering::Relaxed))
}

/// The process the current flow acts for: the caller, or the remote requester.
pub fn flow_pid() -> Option<Pid> {
    let f = &percore::this().flow;
    if f.remote.load(Ordering::Relaxed) {
        Some(Pid(f.remote_pid.load(Ordering::Relaxed))).filter(|p| p.0 != 0)
    } else {
        crate::proc::running_pid()
    }
}

/// Is the current flow a remote requester's (an RPCC agent at work)?
pub fn flow_is_remote() -> bool {
    percore::this().flow.remote.load(Ordering::Relaxed)
}

/// The priority of the process the current flow acts for (applications for the kernel).
pub fn flow_priority() -> Priority {
    let f = &percore::this().flow;
    if f.remote.load(Ordering::Relaxed) {
        Priority::from_u64(u64::from(f.remote_priority.load(Ordering::Relaxed)))
            .unwrap_or(Priority::App)
    } else {
        crate::proc::running_priority()
    }
}

/// A context resumed inside its kernel activity: the flow acts for its user again (an
/// agent that slept puts its requester's flow back itself: `rpcc::call`).
#[inline]
pub fn resume_flow(user: UserId) {
    let f = &percore::this().flow;
    f.remote.store(false, Ordering::Relaxed);
    f.user.store(user.0, Ordering::Relaxed);
}

/// A context resumed only to leave its kernel activity: [`resume_flow`] then [`end_flow`]
/// in one step (the user it resumed for is overwritten at once), on `f`, this core's flow.
#[inline(always)]
pub fn resume_and_end_flow(f: &Flow) {
    f.remote.store(false, Ordering::Relaxed);
    f.user.store(UserId::KERNEL.0, Ordering::Relaxed);
}

/// End the flow: what the kernel does next on its own acts as the kernel.
#[inline]
pub fn end_flow() {
    percore::this()
        .flow
        .user
        .store(UserId::KERNEL.0, Ordering::Relaxed);
}

/// What a request to another core carries about the current flow.
pub fn flow_info() -> FlowInfo {
    let f = &percore::this().flow;
    let id = if f.remote.load(Ordering::Relaxed) {
        f.remote_id.load(Ordering::Relaxed)
    } else {
        f.id.load(Ordering::Relaxed)
    };
    FlowInfo {
        id,
        machine: u16::from(crate::machine::this()),
        core: current_core() as u16,
        user: flow_user(),
        pid: flow_pid(),
        priority: flow_priority(),
    }
}

/// An RPCC agent starts work on a request: act for its requester (P4: the flow id -> user
/// association is registered on the owner core for the duration of the agent's work).
pub fn adopt_flow(info: &FlowInfo) {
    let f = &percore::this().flow;
    f.user.store(info.user.0, Ordering::Relaxed);
    f.remote_id.store(info.id, Ordering::Relaxed);
    f.remote_pid
        .store(info.pid.map_or(0, |p| p.0), Ordering::Relaxed);
    f.remote_priority
        .store(info.priority as u32, Ordering::Relaxed);
    f.remote.store(true, Ordering::Relaxed);
}

/// The agent is done: the association is dropped.
pub fn end_remote_flow() {
    percore::this().flow.remote.store(false, Ordering::Relaxed);
    end_flow();
}

/// The flow of the running context, to put back after it slept (an RPCC wait).
pub struct SavedFlow {
    info: FlowInfo,
    remote: bool,
}

pub fn save_flow() -> SavedFlow {
    SavedFlow {
        info: flow_info(),
        remote: percore::this().flow.remote.load(Ordering::Relaxed),
    }
}

pub fn restore_flow(saved: &SavedFlow) {
    if saved.remote {
        adopt_flow(&saved.info);
    } else {
        resume_flow(saved.info.user);
    }
}

/// The core's flow exactly as it is, to put back with [`put_back_flow`] after work done in
/// passing (a request the RPCC daemon performs inside an interrupt): six loads, no look at
/// the running process, unlike [`save_flow`].
pub struct FlowSnapshot {
    id: u64,
    user: u32,
    remote: bool,
    remote_id: u64,
    remote_pid: u64,
    remote_priority: u32,
}

pub fn snapshot_flow() -> FlowSnapshot {
    let f = &percore::this().flow;
    FlowSnapshot {
        id: f.id.load(Ordering::Relaxed),
        user: f.user.load(Ordering::Relaxed),
        remote: f.remote.load(Ordering::Relaxed),
        remote_id: f.remote_id.load(Ordering::Relaxed),
        remote_pid: f.remote_pid.load(Ordering::Relaxed),
        remote_priority: f.remote_priority.load(Ordering::Relaxed),
    }
}

pub fn put_back_flow(s: &FlowSnapshot) {
    let f = &percore::this().flow;
    f.id.store(s.id, Ordering::Relaxed);
    f.user.store(s.user, Ordering::Relaxed);
    f.remote.store(s.remote, Ordering::Relaxed);
    f.remote_id.store(s.remote_id, Ordering::Relaxed);
    f.remote_pid.store(s.remote_pid, Ordering::Relaxed);
    f.remote_priority
        .store(s.remote_priority, Ordering::Relaxed);
}

// ---- routing: this core's table or RPCC --------------------------------------------------

/// The core that owns `id`: `None` for this one.
fn route(id: ResId) -> Result<Option<usize>, Error> {
    // Another machine's id is refused, never taken for this machine's with the same core,
    // slot and generation: `machd` carries requests to other machines (issue 17).
    if id.machine() != crate::machine::this() || id.core() >= crate::smp::cores_planned() {
        return Err(Error::NoSuchResource);
    }
    Ok((id.core() != current_core()).then_some(id.core()))
}

/// OPEN: create the resource `name` names, on the core it names, with `args`
/// (docs/resources.md) and `rights`.
pub fn open(name: &str, args: &[u8], rights: Rights) -> Result<ResId, Error> {
    let parsed = ResName::parse(name).map_err(|_| Error::BadName)?;
    let core = parsed.core(current_core());
    if core >= crate::smp::cores_planned() {
        return Err(Error::BadName);
    }
    // A process made by OPEN is the opener's child: it counts against its limit (its place
    // held while the request waits on another core).
    let slot = match parsed.kind {
        abi::res::ResType::Process => Some(crate::proc::may_add_child()?),
        _ => None,
    };
    if core == current_core() {
        return local::open(&parsed, args, rights).map(|(id, _)| id);
    }
    let op = Op::ResOpen {
        name: String::from(name),
        args: args.to_vec(),
        rights,
    };
    match rpcc::call(core, op)? {
        Out::Opened(id, pid) => {
            // A process made for us on another core is our child there.
            if let (Some(pid), Some(slot)) = (pid, slot) {
                slot.made(pid);
            }
            Ok(id)
        }
        _ => Err(Error::Unknown),
    }
}

/// CLOSE: delete the resource.
pub fn close(id: ResId) -> Result<(), Error> {
    match route(id)? {
        None => local::close(id),
        Some(core) => rpcc::call(core, Op::ResClose(id)).map(drop),
    }
}

/// READ (docs/resources.md): `len` is the caller's buffer size, `arg` type-specific.
pub fn read(id: ResId, len: u64, arg: u64) -> Result<ReadOut, Error> {
    let mut pause = RETRY_FIRST_NS;
    loop {
        let seen = pipe::notices_taken();
        let r = match route(id)? {
            None => local::read(id, len, arg),
            Some(core) => match rpcc::call(core, Op::ResRead { id, len, arg }) {
                Ok(Out::Value(v)) => Ok(ReadOut::Value(v)),
                Ok(Out::Bytes(b)) => Ok(ReadOut::Bytes(b)),
                Ok(_) => Err(Error::Unknown),
                Err(e) => Err(e),
            },
        };
        if matches!(r, Err(Error::Busy)) && id.kind() == Some(abi::res::ResType::Pipe) {
            retry_after(&mut pause, seen);
            continue;
        }
        return r;
    }
}

/// A wait that cannot be done where the operation ran (big-lock mode on another core's
/// pipe or semaphore, or the kernel's own idle context): look again at the next tick.
fn retry_later() {
    crate::proc::sched::sleep_ns(1_000_000_000 / crate::time::HZ);
}

/// The first pause before a pipe operation that must wait on another core is tried again.
const RETRY_FIRST_NS: u64 = 50_000;

/// A pipe operation must wait where it cannot (on another core's pipe: its agent does not
/// wait there; or in the kernel's own context): wait for the pipe's `PipeChanged` notice
/// (at once if one came since this core's count was `seen`), for `pause` at most; the pause
/// doubles up to a tick.
fn retry_after(pause: &mut u64, seen: u64) {
    pipe::wait_for_change(seen, *pause);
    *pause = (*pause * 2).min(1_000_000_000 / crate::time::HZ);
}

/// WRITE (docs/resources.md).
pub fn write(id: ResId, data: &[u8], arg: u64) -> Result<u64, Error> {
    let mut pause = RETRY_FIRST_NS;
    loop {
        let seen = pipe::notices_taken();
        let r = match route(id)? {
            None => local::write(id, data, arg),
            Some(core) => {
                let op = Op::ResWrite {
                    id,
                    data: data.to_vec(),
                    arg,
                };
                rpcc::call(core, op).and_then(Out::value)
            }
        };
        if r == Err(Error::Busy) && id.kind() == Some(abi::res::ResType::Pipe) {
            retry_after(&mut pause, seen);
            continue;
        }
        return r;
    }
}

/// CONTROL (docs/resources.md).
pub fn control(id: ResId, cmd: u64, a: u64, b: u64) -> Result<u64, Error> {
    loop {
        let r = match route(id)? {
            None => local::control(id, cmd, a, b),
            Some(core) => rpcc::call(core, Op::ResControl { id, cmd, a, b }).and_then(Out::value),
        };
        // A P that cannot wait where it is done (big-lock mode on another core's
        // semaphore, or the kernel's own idle context) looks again at the next tick.
        if r == Err(Error::Busy) && cmd == abi::syscall::control::SEM_P {
            retry_later();
            continue;
        }
        return r;
    }
}

/// RES_INFO: one resource's record (no right needed: knowing the id is enough to see it).
pub fn info(id: ResId) -> Result<ResInfo, Error> {
    match route(id)? {
        None => local::info(id),
        Some(core) => match rpcc::call(core, Op::ResInfo(id))? {
            Out::Infos(mut v) if v.len() == 1 => Ok(v.remove(0)),
            _ => Err(Error::Unknown),
        },
    }
}

/// RES_LIST: the resources of core `core`.
pub fn list(core: usize) -> Result<Vec<ResInfo>, Error> {
    if core >= crate::smp::cores_planned() {
        return Err(Error::InvalidArgument);
    }
    if core == current_core() {
        return Ok(local::list());
    }
    match rpcc::call(core, Op::ResList)? {
        Out::Infos(v) => Ok(v),
        _ => Err(Error::Unknown),
    }
}

/// Vregions (of any core) no longer attached where they were: tell their owners.
pub fn note_detached(regions: impl Iterator<Item = ResId>) {
    let me = current_core();
    let (mine, theirs): (Vec<ResId>, Vec<ResId>) = regions.partition(|r| r.core() == me);
    vregion::note_detached(mine.into_iter());
    for r in theirs {
        if r.machine() == crate::machine::this() && rpcc::reachable(r.core()) {
            rpcc::notice(r.core(), Op::RegionDetached(r));
        }
    }
}

/// The frames of vregion `region` (of any core), for mapping it again where it was when its
/// pass failed (no right needed, as for the pass itself).
pub fn region_frames(region: ResId) -> Result<Vec<u64>, Error> {
    match route(region)? {
        None => vregion::frames_of(region),
        Some(core) => match rpcc::call(core, Op::RegionFrames(region))? {
            Out::Frames(f) => Ok(f),
            _ => Err(Error::Unknown),
        },
    }
}

/// Vregion `region` (of any core) is being passed as an ICA, or a failed pass is undone
/// (`vregion::pass`, on the vregion's core).
pub fn pass_region(region: ResId, passed: bool, check: bool) -> Result<bool, Error> {
    match route(region)? {
        None => vregion::pass(region, passed, check),
        Some(core) => {
            let op = Op::RegionPass {
                region,
                passed,
                check,
            };
            rpcc::call(core, op)?.value().map(|v| v != 0)
        }
    }
}
