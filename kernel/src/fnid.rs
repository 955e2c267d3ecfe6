//! Function ids (P3's function identifiers, issue 14): the kernel's registry of the names
//! under which user-mode servers offer a service, and the mapping of a function id to the
//! server's endpoint on every request. The contract (calls 42-47, errors) is
//! `abi::fnid`'s; this module keeps it (`FN_TAKEOVER`'s request queues: `ipc::takeover`).
//!
//! # Where the registry lives
//! Musubi's per-core kernels share no tables (docs/design.md, principle 1), yet every core
//! must map a function id on every `CALL`, `SEND` and `SUBMIT` without a message. So the
//! registry has a *home*, core 0 ([`HOME`]), and every core keeps a *copy* of it in its
//! per-core record (`percore::CoreLocal::fnid`, a [`FnTable`]); the home's copy is the
//! registry itself.
//!
//! - Every change is made at home, one borrow of the home table at a time, so changes are
//!   serialised: `FN_REGISTER`, `FN_UNREGISTER` and `FN_STATE` (set) from another core
//!   travel there as RPCC requests (`Op::Fn`), performed by the home's agents under the
//!   requester's flow (its user).
//! - A change bumps its slot's *version* and the home pushes the whole slot record to every
//!   other core (`FnOp::Apply`); a copy takes a record only if it is newer than the one it
//!   has, so pushes that overtake each other (two agents of the home pushing at once)
//!   cannot put an old record back. `FN_REGISTER`, `FN_UNREGISTER` and `FN_STATE` wait for
//!   every core's answer before they return: once a server has its function id, every
//!   core maps it.
//! - A server's end (its process ends, or it closes the endpoint) is heard on the server's
//!   core, which tells the home (`FnOp::Down`, a notice: teardown cannot wait); the home
//!   marks the function down and pushes that without waiting. Until a core has heard, a
//!   request there finds the endpoint gone, which is answered `Gone` as for a down function
//!   ([`gone_if_via`]). A registration that finds its name served checks the endpoint
//!   still exists before answering `AlreadyExists`, so a restart never waits for the news.
//! - `FN_LOOKUP`, `FN_STATE` (ask) and `FN_LIST` read the caller's own copy; `FN_LIST`
//!   gathers the `served` counts from every core (each counts the requests its servers
//!   take, where they take them: [`note_served`]), unless asked for this core's only
//!   (`FN_LIST_LOCAL`: no inter-core request, for programs that look often).
//!
//! In big-lock mode the same code runs: RPCC requests and notices are performed at once by
//! the calling core acting as the target (`structure::directly`), so a push updates every
//! core's copy before the call goes on.
//!
//! Pushes go to the cores online at the time; every core is online before the first
//! program runs, except a boot program (`start=`) of a core that comes up while a later
//! core is still starting: a registration made then reaches the late core with the slot's
//! next change. (Not needed today; a late core could ask the home for the whole table.)
//!
//! # Rules the contract leaves to the kernel
//! - Resolution of an endpoint argument that has a function id's shape
//!   ([`FnId::is_fnid`]): not a function id's shape, never issued: `NoSuchResource`;
//!   unregistered: `StaleResource`; down: `Gone`; otherwise the endpoint, whose rights then
//!   apply as if the caller had named it (a server opens its endpoint with a write right for
//!   the users it serves). `RECV` and `REPLY_RECV` take a function id as well: the server
//!   receives on its own endpoint (anyone else is `Denied`, as on the endpoint).
//! - A name longer than [`FN_NAME_MAX`] is `TooLong` (refused before it is copied); any
//!   other name outside the rules is `BadName`.
//! - `FN_REGISTER`'s endpoint must be the caller's own (it receives on it): a function id
//!   or another type is `WrongType`, somebody else's endpoint `Denied`.
//! - The state ICA is a vregion id the registry only remembers: it is kept across server
//!   ends and forgotten (not closed) by `FN_UNREGISTER`; the vregion stays its creator's,
//!   whose rights say who may attach or close it.
//! - The administrator (user 1) and the kernel may register again or unregister any
//!   user's function, and only they may register a system service's name
//!   (`abi::fnid::system_name`: the first part of the name, up to the first `.`, is `blk`,
//!   `fs`, `mach` or `net`).

#![deny(unsafe_code)]

use crate::percore::{self, current_core};
use crate::rpcc::{self, Op, Out};
use abi::fnid::{
    FnId, FnInfo, FNIDS_PER_USER, FNIDS_RESERVED, FN_DOWN, FN_NAME_MAX, FN_RESTARTING, FN_UP,
    MAX_FNIDS,
};
use abi::res::{ResId, ResType, UserId};
use abi::{Error, Pid};
use alloc::vec::Vec;

mod restart;
mod table;

pub use restart::{entry_of, restart_begin, restart_failed, restartable};
use restart::{home_restart, home_restartable, restarts};

pub use table::{Entry, FnTable, Name, Restart, Slot};

/// The core whose table is the registry: every change is made there.
pub const HOME: usize = 0;

/// What travels to the home, or from it to a copy (`Op::Fn`).
pub enum FnOp {
    /// At home: register `name` for `endpoint`, received by `server`.
    Register {
        name: Name,
        endpoint: ResId,
        server: Pid,
    },
    /// At home: unregister function id `0`.
    Unregister(u64),
    /// At home: `server` makes `vregion` the state ICA of `fnid`.
    SetState {
        fnid: u64,
        vregion: u64,
        server: Pid,
    },
    /// At home (a notice): `endpoint`, where `fnid`'s requests went, is gone.
    Down { fnid: u64, endpoint: ResId },
    /// At a copy: slot `slot` is now `record` (if newer than what the copy has).
    Apply { slot: u32, record: Slot },
    /// At a copy: the requests taken there per function (for `FN_LIST`).
    Served,
    /// At home (`FN_TAKEOVER`): may `server` take `fnid` over from `old` with `new`? 0: yes,
    /// retire the old server; else it was down and is taken over (the new generation).
    Takeover {
        fnid: u64,
        old: ResId,
        new: ResId,
        server: Pid,
    },
    /// At home: the old server of `fnid` handed over: switch it from `old` to `new`.
    Switch {
        fnid: u64,
        old: ResId,
        new: ResId,
        server: Pid,
    },
    /// At home (`FN_RESTART`): `server` sets `fnid`'s restart policy.
    Restartable {
        fnid: u64,
        max: u32,
        window_ns: u64,
        server: Pid,
    },
    /// At home: the server at `old` crashed: restart it? The restarts in the window
    /// (the function is restarting), or `Gone` (it is down).
    Restart { fnid: u64, old: ResId },
}

/// Run `f` on this core's table.
fn table<R>(f: impl FnOnce(&mut FnTable) -> R) -> R {
    percore::this().fnid.with(f)
}

/// Perform `op` on this core (an RPCC agent under the requester's flow, or the caller on
/// the home core itself).
pub fn perform(op: &FnOp) -> Result<Out, Error> {
    match *op {
        FnOp::Register {
            name,
            endpoint,
            server,
        } => home_register(name, endpoint, server).map(|id| Out::Value(id.0)),
        FnOp::Unregister(fnid) => home_unregister(fnid).map(|()| Out::Unit),
        FnOp::SetState {
            fnid,
            vregion,
            server,
        } => home_set_state(fnid, vregion, server).map(Out::Value),
        FnOp::Down { fnid, endpoint } => {
            home_down(fnid, endpoint);
            Ok(Out::Unit)
        }
        FnOp::Apply { slot, record } => {
            apply(slot, record);
            Ok(Out::Unit)
        }
        FnOp::Served => Ok(Out::Served(table(|t| t.served.to_vec()))),
        FnOp::Takeover {
            fnid,
            old,
            new,
            server,
        } => home_takeover(fnid, old, new, server).map(Out::Value),
        FnOp::Switch {
            fnid,
            old,
            new,
            server,
        } => home_switch(fnid, old, new, server).map(Out::Value),
        FnOp::Restartable {
            fnid,
            max,
            window_ns,
            server,
        } => home_restartable(fnid, max, window_ns, server).map(|()| Out::Unit),
        FnOp::Restart { fnid, old } => home_restart(fnid, old).map(|k| Out::Value(k.into())),
    }
}

/// Perform `op` at home: here if this is the home core, else through RPCC.
fn at_home(op: FnOp) -> Result<Out, Error> {
    if current_core() == HOME {
        perform(&op)
    } else {
        rpcc::call(HOME, Op::Fn(op))
    }
}

// ---- the home ------------------------------------------------------------------------------

/// May `user` change a function `owner` registered?
fn may_change(user: UserId, owner: UserId) -> bool {
    user == owner || user == crate::proc::ADMIN || user == UserId::KERNEL
}

/// What a registration found under the home table's borrow.
pub(crate) enum Found {
    /// Registered (slot, id): push it.
    Done(usize, FnId),
    /// The name is served by `endpoint` as far as the home knows (at `version`): check
    /// that it still exists.
    Check {
        slot: usize,
        version: u64,
        endpoint: ResId,
    },
}

/// FN_REGISTER at home, for the flow's user.
fn home_register(name: Name, endpoint: ResId, server: Pid) -> Result<FnId, Error> {
    let user = crate::res::flow_user();
    // A name found served is checked outside the borrow (its endpoint may be on another
    // core); then the decision is made again. A few rounds at most: each either answers,
    // or finds the endpoint gone and marks the function down.
    for _ in 0..4 {
        match table(|t| register_in(t, name, endpoint, server, user))? {
            Found::Done(slot, id) => {
                push(slot, true);
                return Ok(id);
            }
            Found::Check {
                slot,
                version,
                endpoint: old,
            } => {
                let alive = crate::res::info(old).is_ok();
                let changed = table(|t| {
                    let s = &mut t.slots[slot];
                    if s.version != version {
                        return true;
                    }
                    if !alive {
                        if let Some(e) = s.entry.as_mut() {
                            e.up = false;
                            s.version += 1;
                        }
                    }
                    false
                });
                if alive && !changed {
                    return Err(Error::AlreadyExists);
                }
                if !alive && !changed {
                    push(slot, false);
                }
            }
        }
    }
    Err(Error::Busy)
}

/// FN_REGISTER's decision on the home table `t`, for `user`.
pub(crate) fn register_in(
    t: &mut FnTable,
    name: Name,
    endpoint: ResId,
    server: Pid,
    user: UserId,
) -> Result<Found, Error> {
    let system = |u: UserId| u == UserId::KERNEL || u == crate::proc::ADMIN;
    // The system services' names are theirs (`abi::fnid::SYSTEM_NAMES`), served or not.
    if !system(user) && abi::fnid::system_name(name.as_bytes()) {
        return Err(Error::Denied);
    }
    let existing = t
        .slots
        .iter()
        .position(|s| s.entry.is_some_and(|e| e.name == name));
    if let Some(i) = existing {
        let slot = &mut t.slots[i];
        let Some(e) = slot.entry.as_mut() else {
            return Err(Error::Unknown);
        };
        if e.up {
            return Ok(Found::Check {
                slot: i,
                version: slot.version,
                endpoint: e.endpoint,
            });
        }
        if !may_change(user, e.user) {
            return Err(Error::Denied);
        }
        // Down: the next server takes over under the same id.
        slot.serve(endpoint, server)?;
        slot.version += 1;
        return Ok(Found::Done(i, t.id_of(i)));
    }
    // A new name: within the user's share of the registry (names of a server that ended
    // stay until unregistered, so one user could otherwise take every slot for good).
    let held = t
        .slots
        .iter()
        .filter(|s| s.entry.is_some_and(|e| e.user == user))
        .count();
    if user != UserId::KERNEL && held >= FNIDS_PER_USER {
        return Err(Error::Limit);
    }
    // And within what the users other than the administrator and the kernel share: room
    // stays for the system's services (two users' shares were the whole registry).
    let by_users = t
        .slots
        .iter()
        .filter(|s| s.entry.is_some_and(|e| !system(e.user)))
        .count();
    if !system(user) && by_users >= MAX_FNIDS - FNIDS_RESERVED {
        return Err(Error::Limit);
    }
    let i = t
        .slots
        .iter()
        .position(|s| s.entry.is_none())
        .ok_or(Error::Limit)?;
    let slot = &mut t.slots[i];
    // A new id: the next generation of the slot (an old id of it is stale from now on).
    slot.generation = match (slot.generation + 1) & ResId::GENERATION_MASK {
        0 => 1,
        g => g,
    };
    slot.version += 1;
    slot.entry = Some(Entry {
        name,
        user,
        endpoint,
        server,
        server_generation: 1,
        state_ica: 0,
        up: true,
        restart: Restart::default(),
        since_ns: crate::time::now_ns(),
    });
    Ok(Found::Done(i, t.id_of(i)))
}

/// FN_UNREGISTER at home, for the flow's user.
fn home_unregister(fnid: u64) -> Result<(), Error> {
    let user = crate::res::flow_user();
    change(fnid, |slot| {
        let owner = slot.entry.map_or(UserId::KERNEL, |e| e.user);
        if !may_change(user, owner) {
            return Err(Error::Denied);
        }
        slot.entry = None;
        Ok(())
    })
}

/// FN_STATE (set) at home: `server` must be the function's server now.
fn home_set_state(fnid: u64, vregion: u64, server: Pid) -> Result<u64, Error> {
    change(fnid, |slot| {
        let e = slot.entry.as_mut().ok_or(Error::StaleResource)?;
        if !e.up || e.server != server {
            return Err(Error::Denied);
        }
        e.state_ica = vregion;
        Ok(vregion)
    })
}

/// FN_TAKEOVER at home, for the flow's user: the rights (as for registering again), then
/// 0 if `old` serves `fnid` (the caller retires it), or the new generation if the function
/// was down or its endpoint gone (taken over at once, pushed).
fn home_takeover(fnid: u64, old: ResId, new: ResId, server: Pid) -> Result<u64, Error> {
    let user = crate::res::flow_user();
    let (up, endpoint, version) = table(|t| {
        let (_, slot) = t.find_mut(fnid)?;
        let e = slot.entry.ok_or(Error::StaleResource)?;
        if !may_change(user, e.user) {
            return Err(Error::Denied);
        }
        Ok((e.up, e.endpoint, slot.version))
    })?;
    if up && endpoint == new {
        return Err(Error::AlreadyExists);
    }
    if up && endpoint != old {
        return Err(Error::Busy); // the caller's copy was behind: it tries again
    }
    if up && crate::res::info(old).is_ok() {
        return Ok(0);
    }
    // Down, or its endpoint gone before the news came: as registering again.
    change(fnid, |slot| {
        if slot.version != version {
            return Err(Error::Busy);
        }
        slot.serve(new, server)
    })
}

/// At home: the old server of `fnid` handed its requests over from `old` to `new`
/// (`server`'s): the function is switched, on every core before this returns. Returns the
/// new server generation; `Busy` if the function changed meanwhile (served elsewhere),
/// `Gone` if `new` no longer exists (its server died).
pub(crate) fn home_switch(fnid: u64, old: ResId, new: ResId, server: Pid) -> Result<u64, Error> {
    // A new server that died meanwhile is not switched to (`Gone`: the old one serves on).
    if crate::res::info(new).is_err() {
        return Err(Error::Gone);
    }
    change(fnid, |slot| {
        let e = slot.entry.as_ref().ok_or(Error::StaleResource)?;
        if e.up && e.endpoint != old {
            return Err(Error::Busy);
        }
        slot.serve(new, server)
    })
}

/// At home: `endpoint`, where `fnid`'s requests went, is gone: the function is down (if
/// that endpoint still serves it). Pushed without waiting (teardown may be the caller).
fn home_down(fnid: u64, endpoint: ResId) {
    let slot = table(|t| t.mark_down(fnid, endpoint));
    if let Some(slot) = slot {
        push(slot, false);
    }
}

/// At home: change `fnid`'s slot with `f`; if `f` succeeds, the slot gets a new version and
/// is pushed to every core before this returns `f`'s value.
fn change<R>(fnid: u64, f: impl FnOnce(&mut Slot) -> Result<R, Error>) -> Result<R, Error> {
    let (slot, r) = table(|t| {
        let (i, slot) = t.find_mut(fnid)?;
        let r = f(slot)?;
        slot.version += 1;
        Ok((i, r))
    })?;
    push(slot, true);
    Ok(r)
}

/// Send slot `slot` of the home table to every other core; with `wait`, return once every
/// core has it.
fn push(slot: usize, wait: bool) {
    let record = table(|t| t.record(slot));
    let here = current_core();
    for core in (0..crate::smp::cores_planned()).filter(|&c| c != here && rpcc::reachable(c)) {
        let op = Op::Fn(FnOp::Apply {
            slot: slot as u32,
            record,
        });
        if wait {
            if let Err(e) = rpcc::call(core, op) {
                log::warn!("fnid: slot {slot} not pushed to core {core}: {e}");
            }
        } else {
            rpcc::notice(core, op);
        }
    }
}

// ---- the copies ----------------------------------------------------------------------------

/// A record pushed by the home: take it if it is newer than this core's.
fn apply(slot: u32, record: Slot) {
    let taken = table(|t| t.take(slot, record));
    // A server of this core that ended before this core heard of its registration (it was
    // killed while registering) has nobody to report it: do it now. (In big-lock mode a
    // registration is never interrupted.)
    if !taken || !crate::structure::requests_travel() {
        return;
    }
    if let Some(e) = record
        .entry
        .filter(|e| e.up && e.endpoint.core() == current_core())
    {
        if crate::res::local::info(e.endpoint).is_err() {
            let id = FnId::new(slot, record.generation);
            report_down(id.0, e.endpoint);
        }
    }
}

/// Tell the home that `endpoint`, where `fnid`'s requests went, is gone.
fn report_down(fnid: u64, endpoint: ResId) {
    if current_core() == HOME {
        home_down(fnid, endpoint);
    } else {
        rpcc::notice(HOME, Op::Fn(FnOp::Down { fnid, endpoint }));
    }
}

/// The functions this core's copy knows served by an endpoint `gone` picks.
fn report_where(gone: impl Fn(u64, &Entry) -> bool) {
    let down: Vec<(u64, ResId)> = table(|t| {
        (0..MAX_FNIDS)
            .filter_map(|i| {
                let id = t.id_of(i).0;
                let e = t.slots[i].entry.filter(|e| e.up && gone(id, e))?;
                Some((t.id_of(i).0, e.endpoint))
            })
            .collect()
    });
    for (fnid, endpoint) in down {
        report_down(fnid, endpoint);
    }
}

/// Process `pid` of this core ended (teardown, the scheduler borrowed): the functions it
/// served are down, except `restarting` (a crashed server's function that `ipc::restart`
/// reports itself).
pub fn server_ended(pid: Pid, restarting: Option<u64>) {
    report_where(|id, e| e.server == pid && Some(id) != restarting);
}

/// Endpoint `endpoint` of this core was closed: the functions it served are down.
pub fn endpoint_closed(endpoint: ResId) {
    report_where(|_, e| e.endpoint == endpoint);
}

// ---- resolution (every request) -------------------------------------------------------------

/// What a request names its target by: its endpoint ([`Via::NONE`]), or a function id,
/// kept as its slot and the low bits of its generation in 32 bits, which fit in
/// `ipc::Incoming`'s padding (the request record keeps its size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Via(u32);

impl Via {
    pub const NONE: Via = Via(0);
    const NAMED: u32 = 1 << 31;
    const SLOT_BITS: u32 = MAX_FNIDS.trailing_zeros();
    const GENERATION_MASK: u32 = (1 << (31 - Self::SLOT_BITS)) - 1;

    fn of(id: FnId) -> Via {
        Via(Self::NAMED
            | ((id.generation() & Self::GENERATION_MASK) << Self::SLOT_BITS)
            | id.slot())
    }

    /// Does this request name a function id?
    #[inline]
    pub fn named(self) -> bool {
        self.0 != 0
    }

    fn slot(self) -> usize {
        (self.0 & (MAX_FNIDS as u32 - 1)) as usize
    }

    /// Is `id` the function id this was made of (as far as the bits kept tell)?
    fn is(self, id: FnId) -> bool {
        self.named() && self == Via::of(id)
    }
}

const _: () = assert!(MAX_FNIDS.is_power_of_two());

/// The endpoint a request's target stands for, and what it was named by: an endpoint
/// stands for itself; a function id is mapped through this core's copy (module docs:
/// `NoSuchResource`, `StaleResource`, `Gone`). The endpoint case is one test on the
/// request path; the mapping is out of line.
#[inline(always)]
pub fn target(id: ResId) -> Result<(ResId, Via), Error> {
    if !FnId::is_fnid(id.0) {
        return Ok((id, Via::NONE));
    }
    resolve(id.0).map(|endpoint| (endpoint, Via::of(FnId(id.0))))
}

/// The endpoint function id `raw` maps to now, on this core.
#[inline(never)]
pub fn resolve(raw: u64) -> Result<ResId, Error> {
    table(|t| t.resolve(raw))
}

/// A request named by a function id (`via`) failed with `e`: an endpoint that no longer
/// exists is a server that ended before this core heard (`Gone`, as for a down function).
///
/// A function that restarts after a crash (`FN_RESTART`) and is not down in this core's
/// copy answers `Again` instead: its server may have crashed before this core heard, and
/// the request, sent again, reaches the restarted server (or gets `Gone` once the copy
/// says the function is down).
pub fn gone_if_via(e: Error, via: Via) -> Error {
    match e {
        Error::StaleResource | Error::NoSuchResource | Error::Gone if via.named() => {
            if restarts(via) {
                Error::Again
            } else {
                Error::Gone
            }
        }
        e => e,
    }
}

/// A server of this core took a request sent by function id (`RECV`): count it under the
/// function's id in this core's copy (if that is still the id the request named).
#[inline(never)]
pub fn note_served(via: Via) {
    table(|t| {
        let i = via.slot();
        let id = t.id_of(i);
        if !via.is(id) {
            return;
        }
        let s = &mut t.served[i];
        if s.0 != id.0 {
            *s = (id.0, 0);
        }
        s.1 += 1;
    });
}

// ---- the calls, on the caller's core ---------------------------------------------------------

/// FN_REGISTER: offer `endpoint` (the caller's own) under `name`.
pub fn register(name: &[u8], endpoint: ResId) -> Result<FnId, Error> {
    let name = Name::new(name)?;
    let server = own_endpoint(endpoint)?;
    match at_home(FnOp::Register {
        name,
        endpoint,
        server,
    })? {
        Out::Value(v) => Ok(FnId(v)),
        _ => Err(Error::Unknown),
    }
}

/// FN_TAKEOVER's first step (`ipc::takeover::takeover` has the rest): where `fnid`'s
/// requests go now and the server receiving there, in this core's copy.
pub fn serving(fnid: u64) -> Result<(ResId, Pid), Error> {
    table(|t| t.find(fnid).map(|(_, e)| (e.endpoint, e.server)))
}

/// FN_TAKEOVER at home: may the flow's user (as `server`, with `new`) take `fnid` over from
/// `old`? 0: yes, the old server is to be retired; else the function was down (or its
/// endpoint gone) and is taken over already: the new server generation.
pub fn takeover_check(fnid: u64, old: ResId, new: ResId, server: Pid) -> Result<u64, Error> {
    at_home(FnOp::Takeover {
        fnid,
        old,
        new,
        server,
    })?
    .value()
}

/// At the old server's end of a takeover: switch `fnid` from `old` to `new` at home.
pub(crate) fn switch(fnid: u64, old: ResId, new: ResId, server: Pid) -> Result<u64, Error> {
    at_home(FnOp::Switch {
        fnid,
        old,
        new,
        server,
    })?
    .value()
}

/// `endpoint` must be the caller's own (it receives there): the caller.
pub fn own_endpoint(endpoint: ResId) -> Result<Pid, Error> {
    if FnId::is_fnid(endpoint.0) {
        return Err(Error::WrongType);
    }
    let server = crate::res::flow_pid().ok_or(Error::NoSuchProcess)?;
    // The caller receives on its own endpoints, which live on its core.
    if endpoint.machine() != crate::machine::this() || endpoint.core() != current_core() {
        let info = crate::res::info(endpoint)?;
        return Err(if info.kind == ResType::Endpoint as u8 {
            Error::Denied
        } else {
            Error::WrongType
        });
    }
    if crate::res::endpoint::owner(endpoint, false)? != server {
        return Err(Error::Denied);
    }
    Ok(server)
}

/// FN_LOOKUP: the function id registered under `name` (up or down), from this core's copy.
pub fn lookup(name: &[u8]) -> Result<FnId, Error> {
    let name = Name::new(name)?;
    table(|t| {
        (0..MAX_FNIDS)
            .find(|&i| t.slots[i].entry.is_some_and(|e| e.name == name))
            .map(|i| t.id_of(i))
            .ok_or(Error::NoSuchResource)
    })
}

/// FN_UNREGISTER: withdraw `fnid` (its registering user or the administrator).
pub fn unregister(fnid: u64) -> Result<(), Error> {
    at_home(FnOp::Unregister(fnid)).map(drop)
}

/// FN_STATE: with `vregion` 0, the state ICA of `fnid` (0: none); otherwise the function's
/// server makes `vregion` its state ICA.
pub fn state(fnid: u64, vregion: u64) -> Result<u64, Error> {
    let (server, ica) = table(|t| {
        t.find(fnid)
            .map(|(_, e)| (e.up.then_some(e.server), e.state_ica))
    })?;
    if vregion == 0 {
        return Ok(ica);
    }
    let me = crate::res::flow_pid().ok_or(Error::NoSuchProcess)?;
    if server != Some(me) {
        return Err(Error::Denied);
    }
    if ResId(vregion).kind() != Some(ResType::VRegion) {
        return Err(Error::WrongType);
    }
    // It must exist (any error a lookup of it gives).
    crate::res::info(ResId(vregion))?;
    at_home(FnOp::SetState {
        fnid,
        vregion,
        server: me,
    })?
    .value()
}

/// FN_LIST: every registered function as this core's copy has it, with the requests taken
/// under it on every core (`local`: on this core only, asking no other core).
pub fn list(local: bool) -> Result<Vec<FnInfo>, Error> {
    let (mut infos, mut served) = table(|t| {
        let infos: Vec<FnInfo> = (0..MAX_FNIDS)
            .filter_map(|i| {
                let e = t.slots[i].entry?;
                let mut name = [0; FN_NAME_MAX];
                name[..e.name.as_bytes().len()].copy_from_slice(e.name.as_bytes());
                Some(FnInfo {
                    fnid: t.id_of(i),
                    name,
                    name_len: u64::from(e.name.len),
                    server: if e.up { e.server } else { Pid(0) },
                    endpoint: if e.up { e.endpoint.0 } else { 0 },
                    generation: e.server_generation,
                    served: 0,
                    state_ica: e.state_ica,
                    user: u64::from(e.user.0),
                    state: match (e.up, e.restart.restarting) {
                        (true, _) => FN_UP,
                        (false, true) => FN_RESTARTING,
                        (false, false) => FN_DOWN,
                    },
                    restarts: u64::from(e.restart.count),
                    restart_max: u64::from(e.restart.max),
                    since_ns: e.since_ns,
                })
            })
            .collect();
        (infos, t.served.to_vec())
    });
    let here = current_core();
    let others = (0..crate::smp::cores_planned()).filter(|&c| c != here && rpcc::reachable(c));
    if !local {
        for core in others {
            if let Out::Served(v) = rpcc::call(core, Op::Fn(FnOp::Served))? {
                served.extend(v);
            }
        }
    }
    for info in &mut infos {
        info.served = served
            .iter()
            .filter(|&&(id, _)| id == info.fnid.0)
            .map(|&(_, n)| n)
            .sum();
    }
    Ok(infos)
}
