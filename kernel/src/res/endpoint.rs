//! Endpoints (`endpoint`, a resource type): where a process receives requests (`RECV`);
//! others `CALL`, `SEND` or `SUBMIT` to it (`ipc`). Requests sent to one go to its owner's
//! request queue; the rights say who may send (write) and receive (read). It lives on its
//! owner's core and goes when the owner ends.

#![deny(unsafe_code)]

use super::flow_pid;
use super::kind::{Resource, Step};
use super::local;
use crate::percore::current_core;
use abi::res::{Op, ResId};
use abi::syscall::control;
use abi::{Error, Pid};
use core::convert::Infallible;

/// An endpoint: requests sent here go to `owner`'s request queue.
pub struct Endpoint {
    owner: Pid,
}

impl Resource for Endpoint {
    type ReadLater = Infallible;
    type WriteLater = Infallible;
    type ControlLater = Infallible;
    type InfoLater = Infallible;

    /// No arguments: the opener receives.
    fn open(_: &[u8]) -> Result<Self, Error> {
        // An endpoint lives on its owner's core.
        let owner = flow_pid().ok_or(Error::NoSuchProcess)?;
        if owner.core() != current_core() {
            return Err(Error::InvalidArgument);
        }
        Ok(Endpoint { owner })
    }

    /// Requests still queued for it are answered.
    fn release(self, id: Option<ResId>) {
        if let Some(id) = id {
            crate::ipc::endpoint_closed(self.owner, id);
        }
    }

    /// `INFO`: the owner's pid.
    fn control(&mut self, cmd: u64, _: u64, _: u64) -> Result<Step<u64, Infallible>, Error> {
        match cmd {
            control::INFO => Ok(Step::Done(self.owner.0)),
            _ => Err(Error::NotSupported),
        }
    }

    /// The owner's pid.
    fn info(&self) -> Step<(u64, u64), Infallible> {
        Step::Done((self.owner.0, 0))
    }
}

/// The owner of endpoint `id` (of this core), after checking the flow's right to send to it
/// (`write`) or to receive from it (`read`).
pub fn owner(id: ResId, send: bool) -> Result<Pid, Error> {
    let op = if send { Op::Write } else { Op::Read };
    local::with_state(id, &[op], |e: &mut Endpoint| Ok(e.owner))
}

/// Process `owner` (of this core) ended: its endpoints go with it (their queued requests
/// were answered `Gone` with the rest of its queue). Called with the scheduler borrowed.
pub fn forget_endpoints_of(owner: Pid) {
    local::forget_where(|e: &Endpoint| e.owner == owner);
}
