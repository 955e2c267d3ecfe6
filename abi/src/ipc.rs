//! The request path (P0's rendezvous, P1's split-phase calls, P3's request and result
//! queues): one mechanism, three ways to use it.
//!
//! A *request* goes to a *target*: an endpoint (a resource a process opens to receive
//! requests), a resource operation, or a timed operation. It completes in one of three ways:
//! `CALL` waits for the reply (rendezvous), `SUBMIT` returns a ticket at once and `COLLECT`
//! takes the result later (many may be in flight from one thread), `SEND` is one-way. The
//! kernel keeps a request queue and a result queue per process; a target on another core is
//! reached through RPCC and behaves exactly as a local one.
//!
//! | call | arguments | value |
//! |---|---|---|
//! | `SUBMIT` | `*const Submission` | ticket |
//! | `COLLECT` | ticket (0: any), `*mut Completion`, timeout ns | the ticket collected (`TimedOut`, `NoSuchResource` for an unknown ticket) |
//! | `CALL` | endpoint, `*const Msg`, `*mut Msg` (the reply) | the reply's value |
//! | `SEND` | endpoint, `*const Msg` | 0 once queued (`Busy` if the queue is full) |
//! | `RECV` | endpoint, `*mut Received`, timeout ns | request handle |
//! | `REPLY` | request handle, `*const Msg`, value | 0 (`NoSuchResource` for a handle already answered) |
//! | `REPLY_RECV` | request handle (0: none), `*const Msg`, value, endpoint, `*mut Received`, timeout ns | the next request's handle, as `RECV` |
//!
//! `REPLY_RECV` is a server's loop in one kernel entry per request: it answers `handle` (as
//! `REPLY`), then receives on `endpoint` (as `RECV`). Everything is checked before anything
//! is done, so a failed call changes nothing: a bad record pointer is `BadAddress`, an
//! endpoint the caller may not receive on fails as `RECV` would, and an unknown handle is
//! `NoSuchResource` with nothing answered *and nothing received* (a server that lost track
//! calls again with handle 0, which only receives). A caller that ended while its request
//! was held is not an error: the answer goes nowhere, as with `REPLY`. A timeout (after the
//! answer went) is `TimedOut`.
//!
//! The fast path (seL4's idea): a `CALL` to an endpoint whose owner waits in `RECV` or
//! `REPLY_RECV` on the same core hands the message and the core straight to the receiver
//! (no run-queue round trip), and a `REPLY_RECV` whose caller waits on the same core, with
//! no other request queued, hands the core straight back. Every other case (a queued
//! receiver, another core, a higher-priority thread ready) takes the ordinary path with
//! the same results.

use crate::Pid;
use bytemuck::{Pod, Zeroable};

/// Words of inline payload in a message; larger data goes through a shared vregion.
pub const MSG_WORDS: usize = 6;

/// A message: a label (its meaning is the program's) and six words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Msg {
    pub label: u64,
    pub words: [u64; MSG_WORDS],
}

/// What `SUBMIT` asks for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Submission {
    /// One of the `SUBMIT_*` values.
    pub kind: u64,
    /// An endpoint or resource id (`ResId.0`), where the kind takes one.
    pub target: u64,
    pub args: [u64; 4],
    pub msg: Msg,
}

/// Request to endpoint `target` with `msg`; the result carries the reply.
pub const SUBMIT_CALL: u64 = 1;
/// One-way message to endpoint `target`; completes when it is queued there.
pub const SUBMIT_SEND: u64 = 2;
/// Completes after `args[0]` nanoseconds (P1's task B; the tick sets the resolution).
pub const SUBMIT_TIMER: u64 = 3;
/// Completes at once (to measure the path itself).
pub const SUBMIT_NOP: u64 = 4;
/// `RES_CLOSE(target)`.
pub const SUBMIT_RES_CLOSE: u64 = 5;
/// `RES_CONTROL(target, args[0], args[1], args[2])`.
pub const SUBMIT_RES_CONTROL: u64 = 6;
/// `RES_OPEN`: name at `args[0]` (length `args[1]`), arguments at `args[2]` (length
/// `args[3]`), rights in `msg.label`; both copied at submit. The value is the id.
pub const SUBMIT_RES_OPEN: u64 = 7;
/// `RES_READ(target, buffer args[0], length args[1], arg args[2])`: the bytes are copied
/// into the buffer when the result is collected.
pub const SUBMIT_RES_READ: u64 = 8;
/// `RES_WRITE(target, buffer args[0], length args[1], arg args[2])`: copied at submit.
pub const SUBMIT_RES_WRITE: u64 = 9;

/// A finished request, as `COLLECT` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Completion {
    pub ticket: u64,
    /// 0, or the `Error` code the operation ended with.
    pub status: u64,
    /// The operation's value (an id, a count, the reply's value).
    pub value: u64,
    /// The reply of a `SUBMIT_CALL`.
    pub msg: Msg,
}

/// A request taken from an endpoint, as `RECV` returns it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Received {
    /// Handle for `REPLY` (0 for a one-way `SEND`, which takes no reply).
    pub request: u64,
    /// Who sent it: the process and its thread (the kernel vouches for both).
    pub sender: Pid,
    pub sender_thread: u64,
    pub endpoint: u64,
    /// `SUBMIT_CALL` or `SUBMIT_SEND`.
    pub kind: u64,
    pub msg: Msg,
}

/// `COLLECT`'s ticket argument: any finished request.
pub const ANY: u64 = 0;
