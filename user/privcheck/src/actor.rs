//! One actor's rows of the privilege matrix: `privcheck actor ROLE CORE ALT SLEEPER FIRST`.
//!
//! The actor runs as its role's user (`owner` 1000, `other` 2000, `admin` 1, see
//! `main.rs`) and tries every operation on the keeper's targets on core CORE, on the
//! administrator's (`pv-adm`, the sleeper SLEEPER) and on processes it does not own; ALT is
//! a core to migrate to. Each cell states what each role must get ([`Want`], the rules of
//! docs/resources.md). A refused cell then checks that nothing changed ([`Actor::intact`]:
//! the keeper's own report through its probe, every target's `RES_INFO` record, the
//! processes, the actor's user); an allowed one checks its effect, and puts back what it
//! changed, so that later cells find the targets as they were. The owner's destructive
//! cells (kill, close) come last. With FIRST = `first` it also runs the rows that do not
//! depend on where the targets are (SETUSER, POWEROFF, killing its parent). Exit status:
//! the number of mismatches. This file is the machinery (setup, [`Actor::intact`],
//! [`Actor::cell`]); the cells themselves are in `actor/cells.rs`.

use crate::{alive, find, proc_of, row, show, ADMIN, OTHER, OWNER, PATIENCE_NS, PRIVATE, VERIFY};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, ResInfo, ResType, UserId};
use ulib::abi::{self, Error, Pid};
use ulib::{ipc, println, res, sys};

/// Who acts, as an index into a cell's expectations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Owner = 0,
    Other = 1,
    Admin = 2,
}

/// What a cell must give one role.
#[derive(Clone, Copy)]
enum Want {
    Ok,
    Err(Error),
    /// Not tried for this role (an administrator's POWEROFF would end the run).
    Untried,
}

const OK: Want = Want::Ok;
const DENIED: Want = Want::Err(Error::Denied);
const UNSUPPORTED: Want = Want::Err(Error::NotSupported);
/// Expectations for (owner, other, admin).
type Wants = [Want; 3];
/// Only the creator's user may: the default rights `rwcx/----`.
const OWNER_ONLY: Wants = [OK, DENIED, DENIED];
/// Only the administrator's user (the creator of `pv-adm` and the administrator's sleeper).
const ADMIN_ONLY: Wants = [DENIED, DENIED, OK];
const NOBODY: Wants = [DENIED, DENIED, DENIED];
const EVERYONE: Wants = [OK, OK, OK];

/// Where the owner attaches its own vregion in the keeper's address space, and where every
/// actor tries to attach the keeper's vregion in its own.
const INTO_KEEPER_AT: u64 = 0x5900_0000;
const OWN_AT: u64 = 0x5800_0000;

type Check = Result<(), String>;

mod cells;

struct Actor {
    role: Role,
    name: &'static str,
    user: UserId,
    loc: &'static str,
    k: usize,
    alt: usize,
    /// The keeper's targets on core `k`, and its `rwcx/rwcx` ones.
    region: ResId,
    vspace: ResId,
    open_vspace: ResId,
    open_compute: ResId,
    open_ep: ResId,
    shared: ResId,
    process: ResId,
    compute: ResId,
    ep: ResId,
    probe: ResId,
    sem: ResId,
    keeper: Pid,
    /// The keeper's child, and the stopped process of `pv-proc`.
    sleeper: Pid,
    stopped: Pid,
    /// The administrator's vregion and sleeper on core `k`, and this actor's parent (the
    /// administrator's driver, in the shell's place).
    adm: ResId,
    admin_sleeper: Pid,
    parent: Pid,
    /// This actor's own vregion on core `k` and a handle to its own address space.
    mine: ResId,
    own_vs: ResId,
    /// Requests the keeper's endpoint must have received.
    got: u64,
    /// The targets' records at the start (less those this actor closed, as allowed).
    snapshot: Vec<ResInfo>,
    /// Scratch: what a read brought, an id or pid a cell made.
    buf: [u8; 64],
    made: Option<u64>,
    bad: u32,
}

pub fn run(args: &[&str]) -> i32 {
    let arg = |i: usize| args.get(i).copied().unwrap_or("");
    let (role, name, user) = match arg(2) {
        "owner" => (Role::Owner, "owner", OWNER),
        "other" => (Role::Other, "other", OTHER),
        "admin" => (Role::Admin, "admin", ADMIN),
        r => {
            println!("privcheck: unknown role '{r}'");
            return 2;
        }
    };
    let (Ok(k), Ok(alt), Some(admin_sleeper)) = (
        arg(3).parse::<usize>(),
        arg(4).parse::<usize>(),
        Pid::parse(arg(5)),
    ) else {
        println!("privcheck: actor ROLE CORE ALT SLEEPER FIRST");
        return 2;
    };
    match Actor::new(role, name, user, k, alt, admin_sleeper) {
        Ok(mut a) => {
            a.matrix(arg(6) == "first");
            let _ = res::close(a.mine);
            let _ = res::close(a.own_vs);
            a.bad.min(100) as i32
        }
        Err(e) => {
            println!("privcheck: MISMATCH actor {name}: setup: {e}");
            1
        }
    }
}

/// Wait for `cond` (a hang guard of [`PATIENCE_NS`], never a verdict by itself).
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let until = sys::clock_ns().unwrap_or(0).saturating_add(PATIENCE_NS);
    loop {
        if cond() {
            return true;
        }
        if sys::clock_ns().unwrap_or(u64::MAX) > until {
            return false;
        }
        let _ = sys::sleep_ns(1_000_000);
    }
}

fn state(pid: Pid) -> Option<u32> {
    proc_of(pid).map(|p| p.state)
}

fn that(holds: bool, why: impl FnOnce() -> String) -> Check {
    if holds {
        Ok(())
    } else {
        Err(why())
    }
}

/// The collected result of a split-phase request.
fn submitted(sub: &api::Submission) -> Result<u64, Error> {
    let ticket = ipc::submit(sub)?;
    ipc::collect(ticket, PATIENCE_NS).and_then(|c| ipc::result(&c))
}

impl Actor {
    fn new(
        role: Role,
        name: &'static str,
        user: UserId,
        k: usize,
        alt: usize,
        admin_sleeper: Pid,
    ) -> Result<Actor, String> {
        let e = |what: &'static str| move |err: Error| format!("{what}: {err:?}");
        let here = sys::core().map_err(e("core"))?;
        if res::getuser() != Ok(user) {
            return Err(format!("runs as {:?}, not {user:?}", res::getuser()));
        }
        let ep = find(k, "endpoint", "pv-ep").map_err(e("find pv-ep"))?;
        let process = find(k, "process", "pv-proc").map_err(e("find pv-proc"))?;
        let keeper = Pid(res::info(ep).map_err(e("info pv-ep"))?.size);
        let stopped = Pid(res::info(process).map_err(e("info pv-proc"))?.size);
        let sleeper = crate::procs()
            .into_iter()
            .find(|p| {
                p.parent == keeper
                    && p.state != abi::STATE_ZOMBIE
                    && &p.name[..p.name_len as usize] == b"privcheck"
            })
            .map(|p| p.pid)
            .ok_or("the keeper's sleeper is not listed")?;
        let me = sys::getpid().map_err(e("getpid"))?;
        let mut a = Actor {
            role,
            name,
            user,
            loc: if k == here { "local" } else { "remote" },
            k,
            alt,
            region: find(k, "vregion", "pv-priv").map_err(e("find pv-priv"))?,
            vspace: find(k, "vspace", "pv-vs").map_err(e("find pv-vs"))?,
            open_vspace: find(k, "vspace", "pv-vs-open").map_err(e("find pv-vs-open"))?,
            open_compute: find(k, "compute", "pv-cpu-open").map_err(e("find pv-cpu-open"))?,
            open_ep: find(k, "endpoint", "pv-ep-open").map_err(e("find pv-ep-open"))?,
            shared: find(k, "vregion", "pv-shared").map_err(e("find pv-shared"))?,
            process,
            compute: find(k, "compute", "pv-cpu").map_err(e("find pv-cpu"))?,
            ep,
            probe: find(k, "endpoint", "pv-probe").map_err(e("find pv-probe"))?,
            sem: find(k, "sem", "pv-sem").map_err(e("find pv-sem"))?,
            keeper,
            sleeper,
            stopped,
            adm: find(k, "vregion", "pv-adm").map_err(e("find pv-adm"))?,
            admin_sleeper,
            parent: proc_of(me).map(|p| p.parent).ok_or("own record")?,
            mine: res::open_vregion(&format!("c{k}/vregion/pv-mine-{name}"), 4096, PRIVATE)
                .map_err(e("own vregion"))?,
            own_vs: res::open_vspace(&format!("here/vspace/pv-own-{name}"), None, PRIVATE)
                .map_err(e("own vspace"))?,
            got: 0,
            snapshot: Vec::new(),
            buf: [0; 64],
            made: None,
            bad: 0,
        };
        let (broken, got) = a.verify()?;
        if broken != 0 {
            return Err(format!(
                "the keeper's targets are not intact at the start ({broken:#x})"
            ));
        }
        a.got = got;
        for id in [
            a.region,
            a.vspace,
            a.process,
            a.compute,
            a.ep,
            a.probe,
            a.sem,
            a.adm,
            a.open_vspace,
            a.open_compute,
            a.open_ep,
            a.shared,
        ] {
            a.snapshot.push(res::info(id).map_err(e("info"))?);
        }
        Ok(a)
    }

    /// The keeper's report: (what changed, one bit per target; requests its endpoint got).
    fn verify(&self) -> Result<(u64, u64), String> {
        ipc::call(
            self.probe,
            &Msg {
                label: VERIFY,
                words: [0; 6],
            },
        )
        .map(|(broken, m)| (broken, m.words[0]))
        .map_err(|e| format!("the keeper's probe: {e:?}"))
    }

    /// Is everything as it was? (After a refusal.)
    fn intact(&mut self) -> Check {
        let (broken, got) = self.verify()?;
        that(broken == 0, || {
            format!("the keeper reports changes ({broken:#x})")
        })?;
        that(got == self.got, || {
            format!("pv-ep received {got} requests, {} expected", self.got)
        })?;
        for was in &self.snapshot {
            let name = was.name();
            let now = res::info(was.id).map_err(|e| format!("{name} is gone ({e:?})"))?;
            // A vspace's size is its process's memory, which the keeper's own work changes.
            let size_kept = was.kind == ResType::VSpace as u8 || now.size == was.size;
            that(
                size_kept
                    && now.detail == was.detail
                    && now.creator == was.creator
                    && now.rights == was.rights,
                || format!("{name} changed: {now:?}"),
            )?;
        }
        for (pid, whose) in [
            (self.sleeper, "the keeper's sleeper"),
            (self.admin_sleeper, "the administrator's sleeper"),
            (self.keeper, "the keeper"),
            (self.parent, "the driver"),
        ] {
            that(alive(pid), || format!("{whose} ({pid}) ended"))?;
        }
        that(state(self.stopped) == Some(abi::STATE_STOPPED), || {
            format!("pv-proc's process {} is not stopped", self.stopped)
        })?;
        let user = res::getuser();
        that(user == Ok(self.user), || {
            format!("the user is now {user:?}")
        })
    }

    /// One cell: do `act`; if it succeeded check `effect` (which puts back what it
    /// changed), else check that nothing changed; print the row.
    fn cell(
        &mut self,
        op: &str,
        loc: &str,
        wants: Wants,
        act: impl FnOnce(&mut Self) -> Result<u64, Error>,
        effect: impl FnOnce(&mut Self, u64) -> Check,
    ) {
        let want = match wants[self.role as usize] {
            Want::Untried => return,
            Want::Ok => String::from("Ok"),
            Want::Err(e) => format!("{e:?}"),
        };
        let got = act(self);
        let fault = match got {
            Ok(v) => effect(self, v),
            Err(_) => self.intact(),
        };
        let fault = fault.err().unwrap_or_default();
        if !row(self.name, loc, op, &want, &show(got.map(drop)), &fault) {
            self.bad += 1;
        }
    }

    /// A cell whose allowed case has no effect to check beyond its answer.
    fn plain(&mut self, op: &str, wants: Wants, act: impl FnOnce(&mut Self) -> Result<u64, Error>) {
        let loc = self.loc;
        self.cell(op, loc, wants, act, |_, _| Ok(()));
    }

    fn read_into(&mut self, id: ResId) -> Result<u64, Error> {
        let mut b = [0u8; 64];
        let n = res::read(id, &mut b, 0)?;
        self.buf = b;
        Ok(n as u64)
    }

    /// Write `bytes` to `id` (an allowed cell did), check they are there, put `back` back.
    fn written(id: ResId, bytes: &[u8; 64], back: &[u8; 64]) -> Check {
        let mut seen = [0u8; 64];
        let r = res::read(id, &mut seen, 0);
        let restored = res::write(id, back, 0);
        that(r.is_ok() && seen == *bytes, || {
            format!("read back {r:?}, not what was written")
        })?;
        that(restored.is_ok(), || format!("restoring: {restored:?}"))
    }
}
