//! Computes (`compute`, a resource type): a CPU allotment on the core (Tender's 演算).
//! READ binds it to a stopped process of the caller's user, which then runs; WRITE unbinds
//! it, and the process stops; CLOSE unbinds and deletes it. Its mips degree sets the bound
//! process's time slice: `mips / 100` ticks, at least one.

#![deny(unsafe_code)]

use super::kind::{u64_arg, Later, Resource, Step};
use super::local::{self, may_touch};
use super::ReadOut;
use crate::percore::current_core;
use crate::proc;
use abi::res::ResId;
use abi::syscall::control;
use abi::{Error, Pid};
use core::convert::Infallible;

/// Largest mips degree of a compute.
pub const MAX_MIPS: u64 = 10_000;

/// A compute: its mips degree, and the process it runs, if bound.
pub struct Compute {
    mips: u32,
    bound: Option<Pid>,
}

/// The time slice, in ticks, of a process run by a compute of `mips`.
fn slice(mips: u32) -> u32 {
    (mips / 100).max(1)
}

/// READ, after the table: start process `pid` (the compute is marked bound to it already).
pub struct Bind {
    pid: Pid,
    mips: u32,
}

/// WRITE, after the table: stop the process that was bound.
pub struct Unbind(Pid);

/// CONTROL `SET_MIPS` of a bound compute, after the table: the process's new slice.
pub struct SetSlice {
    pid: Pid,
    mips: u32,
}

impl Resource for Compute {
    type ReadLater = Bind;
    type WriteLater = Unbind;
    type ControlLater = SetSlice;
    type InfoLater = Infallible;

    /// The mips degree (1 to 10,000).
    fn open(args: &[u8]) -> Result<Self, Error> {
        let mips = u64_arg(args)?;
        if mips == 0 || mips > MAX_MIPS {
            return Err(Error::InvalidArgument);
        }
        Ok(Compute {
            mips: mips as u32,
            bound: None,
        })
    }

    fn release(self, _: Option<ResId>) {
        if let Some(pid) = self.bound {
            let _ = proc::stop(pid);
        }
    }

    /// Bind to process `arg` (`Busy` if bound already).
    fn read(&mut self, _: u64, arg: u64) -> Result<Step<ReadOut, Bind>, Error> {
        if self.bound.is_some() {
            return Err(Error::Busy);
        }
        let pid = crate::machine::local_pid(arg)?;
        self.bound = Some(pid);
        Ok(Step::Later(Bind {
            pid,
            mips: self.mips,
        }))
    }

    /// Unbind (`InvalidArgument` if not bound).
    fn write(&mut self, _: &[u8], _: u64) -> Result<Step<u64, Unbind>, Error> {
        self.bound
            .take()
            .map(|pid| Step::Later(Unbind(pid)))
            .ok_or(Error::InvalidArgument)
    }

    /// `INFO`: the mips degree; `SET_MIPS` to `a`.
    fn control(&mut self, cmd: u64, a: u64, _: u64) -> Result<Step<u64, SetSlice>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(u64::from(self.mips))),
            control::SET_MIPS if (1..=MAX_MIPS).contains(&a) => {
                self.mips = a as u32;
                Ok(match self.bound {
                    Some(pid) => Step::Later(SetSlice {
                        pid,
                        mips: self.mips,
                    }),
                    None => Step::Done(a),
                })
            }
            control::SET_MIPS => Err(Error::InvalidArgument),
            _ => Err(Error::NotSupported),
        }
    }

    /// The mips degree, and the bound process (0: none).
    fn info(&self) -> Step<(u64, u64), Infallible> {
        Step::Done((u64::from(self.mips), self.bound.map_or(0, |p| p.0)))
    }
}

impl Later<ReadOut> for Bind {
    fn run(self, id: ResId, _: &[u8]) -> Result<ReadOut, Error> {
        // A compute gives its own core's time: it runs processes of its core.
        let local_pid = if self.pid.core() == current_core() {
            Ok(())
        } else {
            Err(Error::InvalidArgument)
        };
        match local_pid
            .and_then(|()| may_touch(self.pid))
            .and_then(|()| proc::start(self.pid, slice(self.mips)))
        {
            Ok(()) => Ok(ReadOut::Value(0)),
            Err(err) => {
                let _ = local::with_state(id, &[], |c: &mut Compute| {
                    c.bound = None;
                    Ok(())
                });
                Err(err)
            }
        }
    }
}

impl Later<u64> for Unbind {
    fn run(self, _: ResId, _: &[u8]) -> Result<u64, Error> {
        // A process that has ended is stopped already.
        match proc::stop(self.0) {
            Ok(()) | Err(Error::NoSuchProcess) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

impl Later<u64> for SetSlice {
    fn run(self, _: ResId, _: &[u8]) -> Result<u64, Error> {
        proc::set_slice(self.pid, slice(self.mips));
        Ok(u64::from(self.mips))
    }
}
