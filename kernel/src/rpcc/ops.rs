//! What a request asks for, what a reply carries, and how an agent performs it.
//!
//! Every operation here is one a system call can need on another core. An agent performs it
//! by calling the same function a local system call would use (`res::local`, `proc`), on
//! the core that owns the target, under the requester's flow: so a remote call checks the
//! same rights and returns the same errors as a local one.

#![deny(unsafe_code)]

use crate::proc::{self, migrate::Snapshot};
use crate::res::{self, ReadOut};
use abi::res::{ResId, ResInfo, Rights};
use abi::{Error, Pid, Priority, ProcInfo, WaitStatus};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

/// A request's operation.
pub enum Op {
    // The resource interface (RIC), on the resource's core.
    ResOpen {
        name: String,
        args: Vec<u8>,
        rights: Rights,
    },
    ResClose(ResId),
    ResRead {
        id: ResId,
        len: u64,
        arg: u64,
    },
    ResWrite {
        id: ResId,
        data: Vec<u8>,
        arg: u64,
    },
    ResControl {
        id: ResId,
        cmd: u64,
        a: u64,
        b: u64,
    },
    ResInfo(ResId),
    ResList,
    /// A vregion is being attached to an address space on the requester's core: check the
    /// rights, count the attachment, return its frames.
    RegionAttach {
        region: ResId,
        writable: bool,
    },
    /// A vregion of this core was detached somewhere (a notice).
    RegionDetached(ResId),
    /// A vregion of this core is being passed as an ICA, or a failed pass is undone
    /// (`res::vregion::pass`); the answer is whether it was passed.
    RegionPass {
        region: ResId,
        passed: bool,
        check: bool,
    },
    /// A pass of a vregion of this core failed: its frames, to map it back in its sender.
    RegionFrames(ResId),
    // Processes, on the process's core.
    Spawn {
        name: String,
        args: Vec<String>,
        priority: Priority,
    },
    /// `SPAWN_IMAGE` on this core: the image copied in by the requester's core.
    SpawnImage {
        image: Vec<u8>,
        name: String,
        args: Vec<String>,
        priority: Priority,
    },
    Kill {
        pid: Pid,
        descendants_only: bool,
    },
    Processes,
    /// WAIT for a child on this core: its status if it ended (and forget it), or where it
    /// went if it left and its parent may not have heard yet.
    TakeStatus(Pid),
    /// A child of `parent` (on this core) ended on another core (a notice).
    ChildEnded(Pid),
    /// Child `old` of `parent` (on this core) now lives as `new` (a notice).
    ChildMoved {
        parent: Pid,
        old: Pid,
        new: Pid,
    },
    /// The parent's core heard that process `0` (of this core) moved: this core may forget
    /// where it went (a notice).
    MoveHeard(Pid),
    /// Process `0` (of another core) ended: its children here are the kernel's (a notice).
    Orphaned(Pid),
    /// A pipe that process `0` (of this core) waits for changed: it tries again (a notice).
    PipeChanged(Pid),
    /// Migration, step 1 on the process's core: stop it and describe it.
    MigrateOut(Pid),
    /// Step 2 on the destination: rebuild it; returns the new pid.
    MigrateIn(Box<Snapshot>),
    /// Step 3 on the old core: the old process ends (status: migrated to the new pid, on
    /// this machine or another).
    MigrateCommit {
        pid: Pid,
        status: abi::WaitStatus,
    },
    /// Step 2 failed: the old process runs on as before.
    MigrateAbort(Pid),
    /// `MIGRATE_FINISH`'s abort: as `MigrateAbort`, of an export whose image is written
    /// only (`proc::migrate::abort_export`).
    ExportAbort(Pid),
    /// An export wrote its image: the process may be killed again (`proc::export`).
    MigrateCopied(Pid),
    /// The request path: put a request in an endpoint's owner's queue (this core).
    Enqueue(crate::ipc::Incoming),
    /// The request path: a finished request for process `pid` (this core), and the ICA
    /// its reply passes (mapped into `pid` here).
    Deliver {
        pid: Pid,
        completion: abi::ipc::Completion,
        ica: Option<Box<crate::ipc::Ica>>,
    },
    /// Function ids: a change at the registry's home, or a push to a core's copy.
    Fn(crate::fnid::FnOp),
    /// Live replacement, at the old server's core: retire it (`ipc::takeover::ask`).
    Retire(crate::ipc::takeover::Retire),
    /// Live replacement, at the old server's core: the takeover `waiter` gave up; the
    /// answer is 0 if nothing had started (cancelled), 1 if it is under way.
    RetireCancel {
        server: Pid,
        waiter: crate::ipc::Caller,
    },
}

/// What a reply carries.
pub enum Out {
    Unit,
    Value(u64),
    /// A resource opened; and the pid if it is a process.
    Opened(ResId, Option<Pid>),
    Bytes(Vec<u8>),
    Infos(Vec<ResInfo>),
    Procs(Vec<ProcInfo>),
    Frames(Vec<u64>),
    Status(Option<WaitStatus>),
    Pid(Pid),
    Snapshot(Box<Snapshot>),
    /// Function ids: a core's served counts, (function id, requests) per slot.
    Served(Vec<(u64, u64)>),
}

impl Out {
    /// The value of an operation whose reply is a number.
    pub fn value(self) -> Result<u64, Error> {
        match self {
            Out::Value(v) => Ok(v),
            Out::Unit => Ok(0),
            _ => Err(Error::Unknown),
        }
    }
}

/// Perform `op` on this core (an agent, under the requester's flow).
pub fn perform(op: &Op) -> Result<Out, Error> {
    match op {
        Op::ResOpen { name, args, rights } => {
            let parsed = abi::res::ResName::parse(name).map_err(|_| Error::BadName)?;
            res::local::open(&parsed, args, *rights).map(|(id, pid)| Out::Opened(id, pid))
        }
        Op::ResClose(id) => res::local::close(*id).map(|()| Out::Unit),
        Op::ResRead { id, len, arg } => res::local::read(*id, *len, *arg).map(|r| match r {
            ReadOut::Value(v) => Out::Value(v),
            ReadOut::Bytes(b) => Out::Bytes(b),
        }),
        Op::ResWrite { id, data, arg } => res::local::write(*id, data, *arg).map(Out::Value),
        Op::ResControl { id, cmd, a, b } => res::local::control(*id, *cmd, *a, *b).map(Out::Value),
        Op::ResInfo(id) => res::local::info(*id).map(|i| Out::Infos(alloc::vec![i])),
        Op::ResList => Ok(Out::Infos(res::local::list())),
        Op::RegionAttach { region, writable } => {
            res::vregion::attach(*region, *writable).map(Out::Frames)
        }
        Op::RegionDetached(region) => {
            res::vregion::note_detached(core::iter::once(*region));
            Ok(Out::Unit)
        }
        Op::RegionPass {
            region,
            passed,
            check,
        } => res::vregion::pass(*region, *passed, *check).map(|was| Out::Value(u64::from(was))),
        Op::RegionFrames(region) => res::vregion::frames_of(*region).map(Out::Frames),
        Op::Spawn {
            name,
            args,
            priority,
        } => spawned(args, |args, parent| {
            proc::spawn(name, args, *priority, parent)
        }),
        Op::SpawnImage {
            image,
            name,
            args,
            priority,
        } => spawned(args, |args, parent| {
            proc::spawn_image(name, image, args, *priority, parent)
        }),
        Op::Kill {
            pid,
            descendants_only,
        } => proc::end_local(*pid, *descendants_only).map(|()| Out::Unit),
        Op::Processes => Ok(Out::Procs(proc::infos())),
        Op::TakeStatus(pid) => proc::take_child_status(*pid).map(Out::Status),
        Op::ChildEnded(parent) => {
            proc::note_child_ended(*parent);
            Ok(Out::Unit)
        }
        Op::ChildMoved { parent, old, new } => {
            proc::note_child_moved(*parent, *old, *new);
            Ok(Out::Unit)
        }
        Op::MoveHeard(old) => {
            proc::note_move_heard(*old);
            Ok(Out::Unit)
        }
        Op::Orphaned(parent) => {
            proc::note_orphaned(*parent);
            Ok(Out::Unit)
        }
        Op::PipeChanged(pid) => {
            res::pipe::changed_for(*pid);
            Ok(Out::Unit)
        }
        Op::MigrateOut(pid) => proc::migrate::take_out(*pid).map(Out::Snapshot),
        Op::MigrateIn(snapshot) => proc::migrate::bring_in(snapshot).map(Out::Pid),
        Op::MigrateCommit { pid, status } => {
            proc::migrate::commit(*pid, *status).map(|()| Out::Unit)
        }
        Op::MigrateAbort(pid) => proc::migrate::abort(*pid).map(|()| Out::Unit),
        Op::ExportAbort(pid) => proc::migrate::abort_export(*pid).map(|()| Out::Unit),
        Op::MigrateCopied(pid) => proc::migrate::copied(*pid).map(|()| Out::Unit),
        Op::Enqueue(incoming) => crate::ipc::enqueue(incoming.clone()).map(|()| Out::Unit),
        Op::Deliver {
            pid,
            completion,
            ica,
        } => {
            crate::ipc::delivered(*pid, *completion, ica.clone());
            Ok(Out::Unit)
        }
        Op::Fn(op) => crate::fnid::perform(op),
        Op::Retire(r) => crate::ipc::takeover::ask(*r).map(|p| Out::Value(p as u64)),
        Op::RetireCancel { server, waiter } => Ok(Out::Value(
            match crate::ipc::takeover::cancel(*server, *waiter) {
                crate::ipc::takeover::Cancelled::Yes => 0,
                crate::ipc::takeover::Cancelled::UnderWay => 1,
            },
        )),
    }
}

/// A spawn for the requester: `start(args, parent)`, the parent the requester's flow.
fn spawned(
    args: &[String],
    start: impl FnOnce(&[&str], Pid) -> Result<Pid, Error>,
) -> Result<Out, Error> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let parent = res::flow_pid().unwrap_or(proc::TEST_PARENT);
    start(&args, parent).map(Out::Pid)
}
