//! The resource table of this core and the five operations on it (the local half of RIC
//! and RCC; `res/mod.rs` routes calls here or, for another core's resources, through RPCC).
//!
//! Every core keeps its own table of resources ([`Table`] from `libs/rescore`), in its own
//! `CoreCell`, touched only by that core: there is no lock. An operation names a resource by
//! its [`ResId`]; a forged or closed one gets `NoSuchResource` or `StaleResource`, never
//! another resource. Every operation checks the current flow's user against the resource's
//! rights, unless `rcc=off`. The flow is the local caller's, or, in an RPCC agent, the remote
//! requester's: so the checks are the same code for both.
//!
//! This file is the same for every type: it finds the entry, checks the type and the
//! rights, calls the type's [`Resource`] method inside the table's borrow, and runs what the
//! method left for later ([`Step::Later`]) after the borrow ends (`res/kind.rs` explains
//! the two phases). What each operation means for each type: the type's file under `res/`
//! and docs/resources.md.

#![deny(unsafe_code)]

use super::kind::{Later, Resource, Step, Stored};
use super::{flow_user, ops_of, rcc_on, ReadOut, State};
use crate::percore::{self, current_core};
use crate::proc;
use abi::res::{Op, ResId, ResInfo, ResName, ResType, Rights, UserId, MAX_NAME};
use abi::{Error, Pid};
use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use core::marker::PhantomData;
use rescore::{Lookup, Table};

/// Most resources one core holds (a bound on the kernel memory users can make it spend).
pub const MAX_RESOURCES: u32 = 16_384;

/// One resource in the table: what every type has, and its type's state.
pub struct Entry {
    name: heapless::String<MAX_NAME>,
    creator: UserId,
    rights: Rights,
    state: State,
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
pub fn may_touch(pid: Pid) -> Result<(), Error> {
    let me = flow_user();
    match proc::user_of(pid) {
        None => Err(Error::NoSuchProcess),
        Some(owner) if !rcc_on() || me == UserId::KERNEL || me == owner => Ok(()),
        Some(_) => Err(Error::Denied),
    }
}

/// The rights check (RCC): may the current flow do `op` on a resource with `rights`, made
/// by `creator`?
#[inline(always)]
fn check(rights: Rights, creator: UserId, op: Op) -> Result<(), Error> {
    if !rcc_on() || rights.allows(op, flow_user(), creator) {
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
    if id.machine() != crate::machine::this() || id.core() != current_core() {
        return Err(Error::NoSuchResource);
    }
    id.kind().ok_or(Error::NoSuchResource)
}

/// Run `f` on the state of the resource `id` names, a `T`, inside the table's borrow, after
/// checking each of `need` against its rights. The errors, in order: a bad id
/// (`NoSuchResource`, `StaleResource`), an entry of another type than the id says
/// (`WrongType`), a right missing (`Denied`), a resource that is not a `T` (`WrongType`).
pub fn with_state<T: Stored, R>(
    id: ResId,
    need: &[Op],
    f: impl FnOnce(&mut T) -> Result<R, Error>,
) -> Result<R, Error> {
    let kind = local(id)?;
    with_table(|t| {
        let e = t
            .get_mut(id.slot(), id.generation())
            .map_err(lookup_error)?;
        if e.state.kind() != kind {
            return Err(Error::WrongType);
        }
        for &op in need {
            check(e.rights, e.creator, op)?;
        }
        f(T::of_mut(&mut e.state).ok_or(Error::WrongType)?)
    })
}

/// Run `f` on the state of each of `ids` that is a `T` of this table (no rights: for the
/// kernel's own bookkeeping; ids that name nothing are skipped).
pub fn for_each_state<T: Stored>(ids: &[ResId], mut f: impl FnMut(ResId, &mut T)) {
    with_table(|t| {
        for &id in ids {
            if let Some(s) = t
                .get_mut(id.slot(), id.generation())
                .ok()
                .and_then(|e| T::of_mut(&mut e.state))
            {
                f(id, s);
            }
        }
    });
}

/// Close resource `id` (a `T` of this core) as its `CLOSE` would, without a rights check:
/// the kernel closing it for its creator (a vregion that asked to be closed once attached
/// nowhere, `vregion::note_detached`). Whatever the type refuses (`Busy`) stays.
pub fn close_by_kernel<T: Resource>(id: ResId) -> Result<(), Error> {
    close_entry::<T>(id, false)
}

/// Close resource `id`, a `T` of this core: its type's `close` (which may refuse), then out
/// of the table, its creator uncharged, its state released. `checked`: the caller's close
/// right is checked first (a program's `CLOSE`; not the kernel's own closing).
fn close_entry<T: Resource>(id: ResId, checked: bool) -> Result<(), Error> {
    let (state, creator) = percore::this().res.with(|t| {
        let e = t
            .table
            .get_mut(id.slot(), id.generation())
            .map_err(lookup_error)?;
        if T::of(&e.state).is_none() {
            return Err(Error::WrongType);
        }
        if checked {
            check(e.rights, e.creator, Op::Close)?;
        }
        T::of_mut(&mut e.state).ok_or(Error::WrongType)?.close()?;
        let e = t
            .table
            .remove(id.slot(), id.generation())
            .map_err(lookup_error)?;
        t.names.remove(&(e.state.kind() as u8, e.name));
        Ok::<_, Error>((e.state, e.creator))
    })?;
    super::quota::uncharge_resource(creator);
    super::quota::uncharge_heap(creator, state.heap_frames());
    if let Some(state) = T::take(state) {
        state.release(Some(id));
    }
    Ok(())
}

/// Drop from the table every `T` for which `gone` holds, without releasing anything (for
/// resources whose holder ended: the caller has taken care of what they held).
pub fn forget_where<T: Stored>(gone: impl Fn(&T) -> bool) {
    percore::this().res.with(|t| {
        let ids: Vec<(u32, u32)> = t
            .table
            .iter()
            .filter(|(_, _, e)| T::of(&e.state).is_some_and(&gone))
            .map(|(slot, generation, _)| (slot, generation))
            .collect();
        for (slot, generation) in ids {
            if let Ok(e) = t.table.remove(slot, generation) {
                t.names.remove(&(e.state.kind() as u8, e.name.clone()));
                super::quota::uncharge_resource(e.creator);
                super::quota::uncharge_heap(e.creator, e.state.heap_frames());
            }
        }
    });
}

/// Run what an operation left for later, or take its answer.
fn finish<T, L: Later<T>>(step: Step<T, L>, id: ResId, data: &[u8]) -> Result<T, Error> {
    match step {
        Step::Done(out) => Ok(out),
        Step::Later(later) => later.run(id, data),
    }
}

// ---- the operations of one type, generic over it -------------------------------------------

/// The operations as `res::local` calls them, for one type (`ops_of` picks the type).
pub trait Ops: Sync {
    /// OPEN's part of the type: the new state, and its pid if it is a process.
    fn open(&self, args: &[u8]) -> Result<(State, Option<Pid>), Error>;
    /// Give back what `state` holds (it never got into the table).
    fn release(&self, state: State);
    fn close(&self, id: ResId) -> Result<(), Error>;
    fn read(&self, id: ResId, len: u64, arg: u64) -> Result<ReadOut, Error>;
    fn write(&self, id: ResId, data: &[u8], arg: u64) -> Result<u64, Error>;
    fn control(&self, id: ResId, cmd: u64, a: u64, b: u64) -> Result<u64, Error>;
    fn info(&self, id: ResId) -> Result<ResInfo, Error>;
}

/// The [`Ops`] of type `T`: the same code for every type.
pub struct Kind<T>(PhantomData<fn() -> T>);

impl<T> Kind<T> {
    pub const OPS: Kind<T> = Kind(PhantomData);
}

impl<T: Resource> Ops for Kind<T> {
    fn open(&self, args: &[u8]) -> Result<(State, Option<Pid>), Error> {
        let state = T::open(args)?;
        let pid = state.process();
        Ok((state.stored(), pid))
    }

    fn release(&self, state: State) {
        if let Some(state) = T::take(state) {
            state.release(None);
        }
    }

    fn close(&self, id: ResId) -> Result<(), Error> {
        local(id)?;
        close_entry::<T>(id, true)
    }

    fn read(&self, id: ResId, len: u64, arg: u64) -> Result<ReadOut, Error> {
        let step = with_state(id, &[Op::Read], |s: &mut T| s.read(len, arg))?;
        finish(step, id, &[])
    }

    fn write(&self, id: ResId, data: &[u8], arg: u64) -> Result<u64, Error> {
        let step = with_state(id, &[Op::Write], |s: &mut T| s.write(data, arg))?;
        finish(step, id, data)
    }

    fn control(&self, id: ResId, cmd: u64, a: u64, b: u64) -> Result<u64, Error> {
        let step = with_state(id, T::control_rights(cmd), |s: &mut T| s.control(cmd, a, b))?;
        finish(step, id, &[])
    }

    fn info(&self, id: ResId) -> Result<ResInfo, Error> {
        let kind = local(id)?;
        let (mut info, step) = with_table(|t| {
            let e = t.get(id.slot(), id.generation()).map_err(lookup_error)?;
            if e.state.kind() != kind {
                return Err(Error::WrongType);
            }
            let state = T::of(&e.state).ok_or(Error::WrongType)?;
            Ok((record(id, e), state.info()))
        })?;
        (info.size, info.detail) = finish(step, id, &[])?;
        Ok(info)
    }
}

/// The record of entry `e`, slot and generation of `id`, without its type-specific `size`
/// and `detail`.
fn record(id: ResId, e: &Entry) -> ResInfo {
    let mut name = [0u8; MAX_NAME];
    name[..e.name.len()].copy_from_slice(e.name.as_bytes());
    ResInfo {
        id: crate::machine::res_id(current_core(), e.state.kind(), id.generation(), id.slot()),
        creator: e.creator,
        rights: e.rights.0,
        kind: e.state.kind() as u8,
        name_len: e.name.len() as u8,
        _pad: 0,
        name,
        size: 0,
        detail: 0,
    }
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
    if rights.useless() {
        return Err(Error::InvalidArgument);
    }
    let key = (
        parsed.kind as u8,
        heapless::String::try_from(parsed.name).map_err(|_| Error::BadName)?,
    );
    // A name reserved for a process (`pC.S-...`) is that process's alone to open (it
    // would not do to tell a squatter from the owner by `AlreadyExists`: checked first).
    let creator = flow_user();
    // Names are a machine's own, so `pC.S` is process C.S of this machine.
    if let Some(owner) = abi::res::reserved_for(parsed.name) {
        let owner = owner.with_machine(crate::machine::this());
        if creator != UserId::KERNEL && super::flow_pid() != Some(owner) {
            return Err(Error::Denied);
        }
    }
    if percore::this().res.with(|t| t.names.contains(&key)) {
        return Err(Error::AlreadyExists);
    }
    super::quota::charge_resource(creator)?;
    let ops = ops_of(parsed.kind);
    let (state, pid) = ops
        .open(args)
        .inspect_err(|_| super::quota::uncharge_resource(creator))?;
    // What it may hold of the kernel's heap, as its creator's memory (a pipe's buffer).
    let frames = state.heap_frames();
    if let Err(e) = super::quota::charge_heap(creator, frames) {
        ops.release(state);
        super::quota::uncharge_resource(creator);
        return Err(e);
    }
    let entry = Entry {
        name: key.1.clone(),
        creator,
        rights,
        state,
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
            ops.release(e.state);
            super::quota::uncharge_resource(creator);
            super::quota::uncharge_heap(creator, frames);
            Error::NoMemory
        })?;
    Ok((
        crate::machine::res_id(current_core(), parsed.kind, generation, slot),
        pid,
    ))
}

/// CLOSE: delete the resource.
pub fn close(id: ResId) -> Result<(), Error> {
    let r = ops_of(local(id)?).close(id);
    super::pipe::send_notices();
    r
}

/// READ (docs/resources.md): `len` is the caller's buffer size, `arg` type-specific.
pub fn read(id: ResId, len: u64, arg: u64) -> Result<ReadOut, Error> {
    let r = ops_of(local(id)?).read(id, len, arg);
    super::pipe::send_notices();
    r
}

/// WRITE (docs/resources.md).
pub fn write(id: ResId, data: &[u8], arg: u64) -> Result<u64, Error> {
    let r = ops_of(local(id)?).write(id, data, arg);
    super::pipe::send_notices();
    r
}

/// CONTROL (docs/resources.md).
pub fn control(id: ResId, cmd: u64, a: u64, b: u64) -> Result<u64, Error> {
    let r = ops_of(local(id)?).control(id, cmd, a, b);
    super::pipe::send_notices();
    r
}

/// RES_INFO: one resource's record (no right needed: knowing the id is enough to see it).
pub fn info(id: ResId) -> Result<ResInfo, Error> {
    ops_of(local(id)?).info(id)
}

/// RES_LIST: this core's resources.
pub fn list() -> Vec<ResInfo> {
    let ids: Vec<ResId> = with_table(|t| {
        t.iter()
            .map(|(slot, generation, e)| {
                crate::machine::res_id(current_core(), e.state.kind(), generation, slot)
            })
            .collect()
    });
    ids.into_iter().filter_map(|id| info(id).ok()).collect()
}
