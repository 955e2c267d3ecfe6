//! Processes as resources (`process`, a resource type): OPEN creates a process *stopped*
//! (a `compute` bound to it runs it), READ describes it, WRITE replaces its arguments before
//! it has run, `KILL` ends it, CLOSE ends it if alive and removes it (P4 Tables 1 and 2).

#![deny(unsafe_code)]

use super::kind::{Later, Resource, Step};
use super::{flow_pid, flow_priority, ReadOut};
use crate::proc;
use abi::res::ResId;
use abi::syscall::control;
use abi::{Error, Pid, Priority};
use alloc::vec::Vec;

/// The process `pid` (of this core).
pub struct Process {
    pid: Pid,
}

/// READ, after the table: its `ProcInfo`, cut to `len` bytes.
pub struct Describe {
    pid: Pid,
    len: u64,
}

/// WRITE, after the table: replace its arguments with the bytes written.
pub struct SetArgs(Pid);

/// CONTROL `KILL`, after the table.
pub struct Kill(Pid);

/// RES_INFO, after the table: its state.
pub struct Status(Pid);

impl Resource for Process {
    type ReadLater = Describe;
    type WriteLater = SetArgs;
    type ControlLater = Kill;
    type InfoLater = Status;

    /// The program's name then its arguments, NUL-separated; a child of the opener.
    fn open(args: &[u8]) -> Result<Self, Error> {
        let text = core::str::from_utf8(args).map_err(|_| Error::InvalidArgument)?;
        let mut parts = text.split_terminator('\0');
        let program = parts
            .next()
            .filter(|p| !p.is_empty())
            .ok_or(Error::InvalidArgument)?;
        let argv: Vec<&str> = parts.collect();
        let parent = flow_pid().unwrap_or(proc::TEST_PARENT);
        let priority = flow_priority().max(Priority::App);
        Ok(Process {
            pid: proc::create_stopped(program, &argv, priority, parent)?,
        })
    }

    fn process(&self) -> Option<Pid> {
        Some(self.pid)
    }

    fn release(self, _: Option<ResId>) {
        let _ = proc::remove(self.pid);
    }

    fn read(&mut self, len: u64, _: u64) -> Result<Step<ReadOut, Describe>, Error> {
        Ok(Step::Later(Describe { pid: self.pid, len }))
    }

    fn write(&mut self, _: &[u8], _: u64) -> Result<Step<u64, SetArgs>, Error> {
        Ok(Step::Later(SetArgs(self.pid)))
    }

    /// `INFO`: its pid; `KILL`.
    fn control(&mut self, cmd: u64, _: u64, _: u64) -> Result<Step<u64, Kill>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(self.pid.0)),
            control::KILL => Ok(Step::Later(Kill(self.pid))),
            _ => Err(Error::NotSupported),
        }
    }

    /// Its pid, and its state.
    fn info(&self) -> Step<(u64, u64), Status> {
        Step::Later(Status(self.pid))
    }
}

impl Later<ReadOut> for Describe {
    fn run(self, _: ResId, _: &[u8]) -> Result<ReadOut, Error> {
        let info = proc::info_of(self.pid).ok_or(Error::NoSuchProcess)?;
        // A plain-data record (`bytemuck::Pod`): its bytes, without unsafe.
        let bytes = bytemuck::bytes_of(&info);
        Ok(ReadOut::Bytes(
            bytes[..bytes.len().min(self.len as usize)].to_vec(),
        ))
    }
}

impl Later<u64> for SetArgs {
    fn run(self, _: ResId, data: &[u8]) -> Result<u64, Error> {
        let text = core::str::from_utf8(data).map_err(|_| Error::InvalidArgument)?;
        let argv: Vec<&str> = text.split_terminator('\0').collect();
        proc::set_args(self.0, &argv).map(|()| 0)
    }
}

impl Later<u64> for Kill {
    /// The resource's control right was checked: that is the permission to end it.
    fn run(self, _: ResId, _: &[u8]) -> Result<u64, Error> {
        proc::end_by_kill(self.0).map(|()| 0)
    }
}

impl Later<(u64, u64)> for Status {
    fn run(self, _: ResId, _: &[u8]) -> Result<(u64, u64), Error> {
        let state = proc::info_of(self.0).map_or(abi::STATE_ZOMBIE, |i| i.state);
        Ok((self.0 .0, u64::from(state)))
    }
}
