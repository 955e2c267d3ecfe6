//! `privcheck CORE...`: the privilege matrix (issue 12). Every operation a program can aim at
//! something it does not own, tried by three *actors* against targets on the actor's own
//! core (`local`) and on another core (`remote`); each refusal must change nothing, each
//! allowed operation must take effect. One table row per operation x actor x placement:
//!
//! ```text
//! privcheck: | actor  | target | operation                          | expected      | got           | verdict
//! ```
//!
//! and one `privcheck: MISMATCH ...` line per cell that did not hold; at the end
//! `privcheck: ok` and exit 0, or `privcheck: N mismatches` and exit 1. The rules it checks
//! are those of docs/resources.md ("Who may do what").
//!
//! Run by the kernel (so as an administrator's process, user 1), it is the *driver*: for
//! each CORE it starts, on that core,
//!
//! * the *keeper* (`privcheck keeper EP`), created as user 1000, not an administrator's: it
//!   opens one resource of each type with the default rights (`rwcx/----`: its user may do
//!   everything, nobody else anything), a vspace, a compute and an endpoint that grant
//!   everyone everything (`rwcx/rwcx`, the `pv-*-open` ones: the rules beyond the rights
//!   must still hold), a probe endpoint anyone may call, a vregion attached to its own
//!   address space, and a child that sleeps; it answers calls on its endpoint, and through
//!   the probe reports whether all of that is still as it made it (`VERIFY`);
//! * the administrator's own targets: a sleeping child of user 1 and a vregion
//!   (`pv-adm`);
//!
//! then runs, on its own core, one *actor* (`privcheck actor ROLE CORE ALT SLEEPER FIRST`,
//! `actor.rs`) per role, each a process of its own created as that role's user: `other`
//! (user 2000), `admin` (user 1, created by the administrator) and `owner` (user 1000, the
//! keeper's user, but another process). The owner runs last: its allowed operations end with
//! closing everything. Afterwards the driver checks that the administrator's targets are as
//! they were and cleans up.
//!
//! Roles: `keeper EP`, `sleeper` (sleeps until killed), `actor ...`.
#![no_std]
#![no_main]

extern crate alloc;

mod actor;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::Msg;
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::{self, CoreInfo, Error, Pid, Priority, ProcInfo};
use ulib::{ipc, println, res, sys};

ulib::main!(main);

/// The keeper's user: the creator ("owner") of the targets.
pub const OWNER: UserId = UserId(1000);
/// Another user, with no rights on them.
pub const OTHER: UserId = UserId(2000);
/// The administrator (the shell's user, and the kernel's processes').
pub const ADMIN: UserId = UserId(1);
/// A user nobody runs as (SETUSER "down" to a fresh user).
pub const STRANGER: UserId = UserId(5000);

/// `pv-ep`'s rights: the default, its user everything, others nothing.
pub const PRIVATE: Rights = Rights::OWNER_ALL;
/// The keeper's `pv-*-open` targets: everyone may do everything the rights govern, so only
/// the rules beyond the rights (a process is reached only as its user; only the opener
/// receives) stand between other users and the keeper.
pub const OPEN: Rights = Rights::EVERYONE_ALL;
/// Where the keeper attaches `pv-shared` in its own address space.
pub const KEEPER_AT: u64 = 0x5a00_0000;
/// `pv-probe`: its owner receives and sends, everyone else may only send (`rw--/-w--`).
pub const PROBE_RIGHTS: Rights = Rights(0x23);
/// The driver's endpoint: anyone may send to it (`rwcx/-w--`).
const DRIVER_RIGHTS: Rights = Rights(0x2f);

/// Keeper to driver: ready (`label`), or could not make its targets.
const READY: u64 = 1;
const FAILED: u64 = 2;
/// Actor to keeper's probe: is everything as you made it?
pub const VERIFY: u64 = 1;
/// The keeper's answer to every call on `pv-ep`.
pub const ANSWER: u64 = 42;

/// The bytes at the start of `pv-priv` and of the administrator's `pv-adm`.
pub fn pattern(seed: u8) -> [u8; 64] {
    let mut p = [0u8; 64];
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(seed).wrapping_add(3);
    }
    p
}
pub const KEEPER_SEED: u8 = 7;
pub const ADMIN_SEED: u8 = 13;

/// How long a cell may wait for an answer that must come (a hang guard, never a verdict).
pub const PATIENCE_NS: u64 = 60_000_000_000;

fn main(args: &[&str]) -> i32 {
    match args.get(1).copied() {
        Some("keeper") => keeper(args),
        Some("sleeper") => loop {
            let _ = sys::sleep_ns(1_000_000_000);
        },
        Some("actor") => actor::run(args),
        _ => driver(args),
    }
}

// ---- shared helpers ---------------------------------------------------------------------

/// Every process of every core.
pub fn procs() -> Vec<ProcInfo> {
    let mut buf = alloc::vec![ProcInfo::EMPTY; 512];
    let n = sys::processes(&mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// The record of `pid`, if it exists.
pub fn proc_of(pid: Pid) -> Option<ProcInfo> {
    procs().into_iter().find(|p| p.pid == pid)
}

/// Is `pid` alive (listed and not a zombie)?
pub fn alive(pid: Pid) -> bool {
    proc_of(pid).is_some_and(|p| p.state != abi::STATE_ZOMBIE)
}

/// The resource `cCORE/TYPE/NAME`'s id.
pub fn find(core: usize, kind: &str, name: &str) -> Result<ResId, Error> {
    res::find(&format!("c{core}/{kind}/{name}")).map(|r| r.id)
}

/// The cores that are online.
fn online_cores() -> Vec<usize> {
    let mut cores = [CoreInfo::default(); abi::MAX_CORES];
    let n = sys::cores(&mut cores).unwrap_or(0);
    cores[..n]
        .iter()
        .filter(|c| c.online != 0)
        .map(|c| c.core as usize)
        .collect()
}

/// A message with `label`.
fn label(label: u64) -> Msg {
    Msg {
        label,
        words: [0; 6],
    }
}

/// Print one row of the table; returns whether it holds.
pub fn row(actor: &str, target: &str, op: &str, want: &str, got: &str, fault: &str) -> bool {
    let ok = fault.is_empty() && want == got;
    let verdict = if ok {
        String::from("ok")
    } else if fault.is_empty() {
        String::from("MISMATCH")
    } else {
        format!("MISMATCH: {fault}")
    };
    println!(
        "privcheck: | {actor:<6} | {target:<6} | {op:<36} | {want:<13} | {got:<13} | {verdict}"
    );
    if !ok {
        println!("privcheck: MISMATCH {actor} {target} {op}: expected {want}, got {got} {fault}");
    }
    ok
}

/// `Ok` or the error's name, for the table.
pub fn show(r: Result<(), Error>) -> String {
    match r {
        Ok(()) => String::from("Ok"),
        Err(e) => format!("{e:?}"),
    }
}

// ---- the driver -------------------------------------------------------------------------

/// The keeper's and the administrator's names on the target core: (type, name).
const NAMES: [(&str, &str); 9] = [
    ("vregion", "pv-priv"),
    ("vspace", "pv-vs"),
    ("process", "pv-proc"),
    ("compute", "pv-cpu"),
    ("sem", "pv-sem"),
    ("vregion", "pv-adm"),
    ("vspace", "pv-vs-open"),
    ("compute", "pv-cpu-open"),
    ("vregion", "pv-shared"),
];

/// What each actor opens on the target core (suffixed `-ROLE`), and on its own (`pv-own`).
pub const ACTOR_NAMES: [(&str, &str); 5] = [
    ("vregion", "pv-mine"),
    ("vregion", "pv-esc"),
    ("compute", "pv-cpu"),
    ("vspace", "pv-vsk"),
    ("vspace", "pv-vsa"),
];

/// The driver's rows: counted as they are printed.
struct Rows {
    loc: &'static str,
    bad: u32,
}

impl Rows {
    fn check(&mut self, op: &str, want: &str, got: &str, fault: &str) {
        if !row("driver", self.loc, op, want, got, fault) {
            self.bad += 1;
        }
    }
}

fn driver(args: &[&str]) -> i32 {
    let here = sys::core().unwrap_or(0);
    let online = online_cores();
    let mut targets: Vec<usize> = args[1..].iter().filter_map(|a| a.parse().ok()).collect();
    if targets.is_empty() {
        targets.push(here);
    }
    if let Some(k) = targets.iter().find(|k| !online.contains(k)) {
        println!("privcheck: core {k} is not online ({online:?})");
        return 2;
    }
    if online.len() < 2 {
        println!("privcheck: needs 2 cores (MIGRATE rows)");
        return 2;
    }
    // The driver must be an administrator's process: it becomes each actor's user to
    // create it, and comes back.
    if res::getuser() != Ok(ADMIN) || res::setuser(OWNER).and(res::setuser(ADMIN)).is_err() {
        println!("privcheck: run it as a process the administrator or the kernel created");
        return 2;
    }
    let drv = match ipc::open_endpoint("here/endpoint/pv-drv", DRIVER_RIGHTS) {
        Ok(id) => id,
        Err(e) => {
            println!("privcheck: driver endpoint: {e:?}");
            return 1;
        }
    };
    println!(
        "privcheck: | {:<6} | {:<6} | {:<36} | {:<13} | {:<13} | verdict",
        "actor", "target", "operation", "expected", "got"
    );
    let mut bad = 0;
    for (i, &k) in targets.iter().enumerate() {
        let alt = if k == here {
            online.iter().copied().find(|&c| c != k).unwrap_or(k)
        } else {
            here
        };
        bad += placement(drv, here, k, alt, i == 0);
    }
    let _ = res::close(drv);
    if bad == 0 {
        println!("privcheck: ok");
        0
    } else {
        println!("privcheck: {bad} mismatches");
        1
    }
}

/// Close what a run left on core `k` (and this core's vspace handles), as whichever user
/// may.
fn clean_up(here: usize, k: usize) {
    let mut names: Vec<(usize, &str, String)> = NAMES
        .iter()
        .map(|&(t, n)| (k, t, String::from(n)))
        .collect();
    for role in ["owner", "other", "admin"] {
        for &(t, n) in &ACTOR_NAMES {
            names.push((k, t, format!("{n}-{role}")));
        }
        names.push((here, "vspace", format!("pv-own-{role}")));
    }
    for (core, kind, name) in names {
        let Ok(id) = find(core, kind, &name) else {
            continue;
        };
        for user in [OWNER, OTHER, ADMIN, STRANGER] {
            if res::setuser(user).is_ok() && res::close(id).is_ok() {
                break;
            }
        }
    }
    let _ = res::setuser(ADMIN);
}

/// One placement: targets on core `k`, actors on this core; returns the mismatches.
fn placement(drv: ResId, here: usize, k: usize, alt: usize, first: bool) -> u32 {
    let loc = if k == here { "local" } else { "remote" };
    clean_up(here, k);
    let mut rows = Rows { loc, bad: 0 };
    // The keeper, as user 1000 (not an administrator's process).
    let ep = format!("{:#x}", drv.0);
    let _ = res::setuser(OWNER);
    let keeper = sys::spawn_on("privcheck", &["keeper", &ep], Priority::App, k);
    let _ = res::setuser(ADMIN);
    let ready = keeper.and_then(|kp| {
        let r = ipc::recv(drv, PATIENCE_NS)?;
        match (r.sender == kp, r.msg.label) {
            (true, READY) => Ok(kp),
            _ => Err(Error::Unknown),
        }
    });
    rows.check("keeper makes its targets", "Ok", &show(ready.map(drop)), "");
    let Ok(keeper) = ready else {
        if let Ok(kp) = keeper {
            let _ = sys::kill(kp);
            let _ = sys::wait(Some(kp));
        }
        return rows.bad;
    };
    let admin_sleeper = sys::spawn_on("privcheck", &["sleeper"], Priority::App, k);
    rows.check(
        "administrator's sleeper starts",
        "Ok",
        &show(admin_sleeper.map(drop)),
        "",
    );
    let mut bad = 0;
    if let Ok(sleeper) = admin_sleeper {
        for role in ["other", "admin", "owner"] {
            bad += actor_turn(role, here, k, alt, sleeper, first, &mut rows);
        }
        let _ = sys::kill(sleeper);
        let _ = sys::wait(Some(sleeper));
    }
    // The keeper's child is its descendant, and so the driver's.
    for p in procs()
        .iter()
        .filter(|p| p.parent == keeper && p.state != abi::STATE_ZOMBIE)
    {
        let _ = sys::kill(p.pid);
    }
    let _ = sys::kill(keeper);
    let _ = sys::wait(Some(keeper));
    clean_up(here, k);
    bad + rows.bad
}

/// Run the actor of `role` against core `k` and check the administrator's targets after;
/// returns the actor's mismatches (the driver's own go to `rows`).
fn actor_turn(
    role: &str,
    here: usize,
    k: usize,
    alt: usize,
    sleeper: Pid,
    first: bool,
    rows: &mut Rows,
) -> u32 {
    let mark = pattern(ADMIN_SEED);
    let adm = res::open_vregion(&format!("c{k}/vregion/pv-adm"), 4096, PRIVATE)
        .and_then(|id| res::write(id, &mark, 0).map(|_| id));
    rows.check(
        &format!("open pv-adm for {role}"),
        "Ok",
        &show(adm.map(drop)),
        "",
    );
    let user = match role {
        "owner" => OWNER,
        "other" => OTHER,
        _ => ADMIN,
    };
    let _ = res::setuser(user);
    let args = [
        "actor",
        role,
        &format!("{k}"),
        &format!("{alt}"),
        &format!("{sleeper}"),
        if first { "first" } else { "again" },
    ];
    let child = sys::spawn_on("privcheck", &args, Priority::App, here);
    let _ = res::setuser(ADMIN);
    let mut bad = 0;
    match child.map(|c| (c, sys::wait_timeout(Some(c), 10 * PATIENCE_NS))) {
        Ok((_, Ok((_, s)))) if s.how == abi::ENDED_EXIT => bad += s.code as u32,
        Ok((c, other)) => {
            let _ = sys::kill(c);
            let _ = sys::wait(Some(c));
            rows.check(
                &format!("actor {role} ends"),
                "exit",
                &format!("{other:?}"),
                "",
            );
        }
        Err(e) => rows.check(&format!("actor {role} starts"), "Ok", &format!("{e:?}"), ""),
    }
    // The administrator's targets: untouched, unless the administrator's own actor used
    // them (it restores what it wrote, and closes pv-adm last).
    if let Ok(adm) = adm {
        let mut back = [0u8; 64];
        let r = res::read(adm, &mut back, 0);
        match (role, r) {
            ("admin", Err(Error::StaleResource)) => {}
            (_, r) => {
                let fault = if r.is_ok() && back != mark {
                    "contents changed"
                } else {
                    ""
                };
                rows.check(
                    &format!("pv-adm intact after {role}"),
                    "Ok",
                    &show(r.map(drop)),
                    fault,
                );
                let _ = res::close(adm);
            }
        }
    }
    let fault = if alive(sleeper) {
        ""
    } else {
        "the administrator's sleeper ended"
    };
    rows.check(&format!("sleeper alive after {role}"), "Ok", "Ok", fault);
    bad
}

// ---- the keeper -------------------------------------------------------------------------

/// The keeper's targets, one of each type (`rwcx/----`), the `pv-*-open` ones (`rwcx/rwcx`),
/// and its probe.
struct Keeper {
    region: ResId,
    vspace: ResId,
    open_vspace: ResId,
    open_compute: ResId,
    process: ResId,
    compute: ResId,
    ep: ResId,
    probe: ResId,
    sem: ResId,
    sleeper: Pid,
    me: Pid,
    /// Requests that arrived on `ep` (calls answered, sends taken).
    got: u64,
}

fn keeper(args: &[&str]) -> i32 {
    let Some(drv) = args.get(2).and_then(|a| ResId::parse(a)) else {
        println!("privcheck: keeper needs the driver's endpoint");
        return 2;
    };
    match make_keeper() {
        Ok(mut k) => {
            if ipc::send(drv, &label(READY)).is_err() {
                return 1;
            }
            k.serve()
        }
        Err(e) => {
            println!("privcheck: keeper: {e}");
            let _ = ipc::send(drv, &label(FAILED));
            1
        }
    }
}

fn make_keeper() -> Result<Keeper, String> {
    let e = |what: &'static str| move |err: Error| format!("{what}: {err:?}");
    let region = res::open_vregion("here/vregion/pv-priv", 4096, PRIVATE).map_err(e("vregion"))?;
    res::write(region, &pattern(KEEPER_SEED), 0).map_err(e("write"))?;
    let vspace = res::open_vspace("here/vspace/pv-vs", None, PRIVATE).map_err(e("vspace"))?;
    // One attachment, for others to try to detach.
    let shared = res::open_vregion("here/vregion/pv-shared", 4096, PRIVATE).map_err(e("shared"))?;
    res::attach(vspace, shared, KEEPER_AT, true).map_err(e("attach"))?;
    let _ = ipc::open_endpoint("here/endpoint/pv-ep-open", OPEN).map_err(e("open endpoint"))?;
    Ok(Keeper {
        region,
        vspace,
        open_vspace: res::open_vspace("here/vspace/pv-vs-open", None, OPEN)
            .map_err(e("open vspace"))?,
        open_compute: res::open_compute("here/compute/pv-cpu-open", 100, OPEN)
            .map_err(e("open compute"))?,
        process: res::open_process("here/process/pv-proc", "spin", &[], PRIVATE)
            .map_err(e("process"))?,
        compute: res::open_compute("here/compute/pv-cpu", 100, PRIVATE).map_err(e("compute"))?,
        ep: ipc::open_endpoint("here/endpoint/pv-ep", PRIVATE).map_err(e("endpoint"))?,
        probe: ipc::open_endpoint("here/endpoint/pv-probe", PROBE_RIGHTS).map_err(e("probe"))?,
        sem: res::open("here/sem/pv-sem", &1u64.to_le_bytes(), PRIVATE).map_err(e("sem"))?,
        sleeper: sys::spawn("privcheck", &["sleeper"], Priority::App).map_err(e("sleeper"))?,
        me: sys::getpid().map_err(e("getpid"))?,
        got: 0,
    })
}

impl Keeper {
    /// Answer the probe and `pv-ep` in turn, until killed.
    fn serve(&mut self) -> i32 {
        loop {
            match ipc::recv(self.probe, 10_000_000) {
                Ok(r) => {
                    self.drain(0);
                    let broken = self.verify();
                    let mut m = label(0);
                    m.words[0] = self.got;
                    let _ = ipc::reply(r.request, broken, &m);
                }
                Err(Error::TimedOut) => {}
                Err(_) => {
                    let _ = sys::sleep_ns(10_000_000);
                }
            }
            self.drain(10_000_000);
        }
    }

    /// Take what waits on `pv-ep` (the first wait up to `timeout_ns`), answering calls.
    fn drain(&mut self, timeout_ns: u64) {
        let mut wait = timeout_ns;
        loop {
            match ipc::recv(self.ep, wait) {
                Ok(r) => {
                    self.got += 1;
                    if r.request != 0 {
                        let _ = ipc::reply(r.request, ANSWER, &label(0));
                    }
                    wait = 0;
                }
                Err(Error::TimedOut) => return,
                // Closed by the owner's actor: nothing more comes.
                Err(_) => {
                    let _ = sys::sleep_ns(wait);
                    return;
                }
            }
        }
    }

    /// What is no longer as the keeper made it, one bit per target (0: all intact).
    fn verify(&self) -> u64 {
        let mut back = [0u8; 64];
        let info = |id| res::info(id).map(|i| (i.size, i.detail));
        let checks = [
            res::read(self.region, &mut back, 0).is_ok() && back == pattern(KEEPER_SEED),
            res::size(self.region) == Ok(4096),
            res::process_info(self.process).is_ok_and(|p| p.state == abi::STATE_STOPPED),
            info(self.compute) == Ok((100, 0)) && res::size(self.compute) == Ok(100),
            info(self.open_compute) == Ok((100, 0)),
            info(self.sem) == Ok((1, 0)) && res::size(self.sem) == Ok(1),
            res::size(self.vspace) == Ok(1) && res::size(self.open_vspace) == Ok(1),
            res::size(self.ep) == Ok(self.me.0),
            alive(self.sleeper),
            res::getuser() == Ok(OWNER),
        ];
        checks
            .iter()
            .enumerate()
            .filter(|(_, ok)| !**ok)
            .fold(0, |bits, (i, _)| bits | 1 << i)
    }
}
