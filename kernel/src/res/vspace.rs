//! Address-space handles (`vspace`, a resource type): a handle to a process's address
//! space, on the process's core. `ATTACH` maps a vregion's frames into it (the vregion may
//! live on another core: its owner checks the rights and counts the attachment), `DETACH`
//! unmaps one, READ lists them. Reaching into a process needs its user (`may_touch`).

#![deny(unsafe_code)]

use super::kind::{u64_arg, Later, Resource, Step};
use super::local::may_touch;
use super::{flow_pid, ReadOut};
use crate::arch::x86_64::paging::PAGE_SIZE;
use crate::percore::current_core;
use crate::{proc, rpcc};
use abi::res::ResId;
use abi::syscall::control;
use abi::{Error, Pid};
use alloc::vec::Vec;
use core::convert::Infallible;

pub use abi::res::MAX_ATTACHMENTS;

/// A handle to the address space of process `pid` (of this core).
pub struct VSpace {
    pid: Pid,
}

/// READ, after the table: list the attachments, into `len` bytes.
pub struct List {
    pid: Pid,
    len: u64,
}

/// CONTROL, after the table.
pub enum Then {
    /// `INFO`: count the attachments.
    Count(Pid),
    /// `ATTACH` vregion `region` at `addr` in `pid`'s address space.
    Attach {
        pid: Pid,
        region: ResId,
        addr: u64,
        writable: bool,
    },
    /// `DETACH` what is at `addr`.
    Detach(Pid, u64),
}

/// RES_INFO, after the table: the process's memory.
pub struct Memory(Pid);

impl Resource for VSpace {
    type ReadLater = List;
    type WriteLater = Infallible;
    type ControlLater = Then;
    type InfoLater = Memory;

    /// The pid of a process on this core (0: the caller's).
    fn open(args: &[u8]) -> Result<Self, Error> {
        let pid = match u64_arg(args)? {
            0 => flow_pid().ok_or(Error::NoSuchProcess)?,
            p => crate::machine::local_pid(p)?,
        };
        // A vspace handle lives on its process's core.
        if pid.core() != current_core() {
            return Err(Error::InvalidArgument);
        }
        may_touch(pid)?;
        Ok(VSpace { pid })
    }

    fn read(&mut self, len: u64, _: u64) -> Result<Step<ReadOut, List>, Error> {
        Ok(Step::Later(List { pid: self.pid, len }))
    }

    fn control(&mut self, cmd: u64, a: u64, b: u64) -> Result<Step<u64, Then>, Error> {
        let pid = self.pid;
        match cmd {
            control::INFO => Ok(Step::Later(Then::Count(pid))),
            control::ATTACH if b & (PAGE_SIZE - 1) & !1 != 0 => Err(Error::InvalidArgument),
            control::ATTACH => Ok(Step::Later(Then::Attach {
                pid,
                region: ResId(a),
                addr: b & !(PAGE_SIZE - 1),
                writable: b & 1 != 0,
            })),
            control::DETACH => Ok(Step::Later(Then::Detach(pid, a))),
            _ => Err(Error::NotSupported),
        }
    }

    /// Pages of memory the process holds, and its pid.
    fn info(&self) -> Step<(u64, u64), Memory> {
        Step::Later(Memory(self.pid))
    }
}

impl Later<ReadOut> for List {
    /// (address, vregion id) pairs of 8-byte numbers, as many as fit.
    fn run(self, _: ResId, _: &[u8]) -> Result<ReadOut, Error> {
        let pairs = proc::attachments_of(self.pid)?;
        let max = (self.len / 16) as usize;
        let bytes: Vec<u8> = pairs
            .iter()
            .take(max)
            .flat_map(|(a, r)| a.to_le_bytes().into_iter().chain(r.0.to_le_bytes()))
            .collect();
        Ok(ReadOut::Bytes(bytes))
    }
}

impl Later<u64> for Then {
    fn run(self, _: ResId, _: &[u8]) -> Result<u64, Error> {
        match self {
            Then::Count(pid) => Ok(proc::attachments_of(pid).map_or(0, |a| a.len() as u64)),
            Then::Attach {
                pid,
                region,
                addr,
                writable,
            } => {
                // The handle's rights were checked; the process itself must be the caller's.
                may_touch(pid)?;
                // The region may live on another core: its owner checks and counts.
                let frames = if region.core() == current_core() {
                    super::vregion::attach(region, writable)?
                } else if region.machine() == crate::machine::this() && rpcc::reachable(region.core()) {
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
}

impl Later<(u64, u64)> for Memory {
    fn run(self, _: ResId, _: &[u8]) -> Result<(u64, u64), Error> {
        let pages = proc::info_of(self.0).map_or(0, |i| i.memory / PAGE_SIZE);
        Ok((pages, self.0 .0))
    }
}
