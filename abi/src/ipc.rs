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
//! | `REPLY_ERROR` (56) | request handle, error code | 0: the caller's `CALL`/`COLLECT` fails with that error (`InvalidArgument` for 0 or a code naming no error, checked first; `NoSuchResource` for an unknown handle) |
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
//! **ICAs** (P3's "peel off and paste"): a request (`CALL`, `SEND`, `SUBMIT_CALL`,
//! `SUBMIT_SEND`, a ring's submissions of those kinds) or a reply (`REPLY`, `REPLY_RECV`)
//! may carry one vregion the sender has attached in its own address space, with no copy:
//!
//! | word | the sender writes | the receiver reads |
//! |---|---|---|
//! | `label` | its label with [`MSG_ICA`] set, and [`MSG_ICA_READ_ONLY`] to lend it read-only (below) | the same (`MSG_ICA` cleared if the ICA could not be mapped, see below), with [`MSG_ICA_READ_ONLY`] set if the ICA is mapped read-only here, else cleared |
//! | `words[ICA_ID_WORD]` (5) | the vregion's id | the same |
//! | `words[ICA_AT_WORD]` (4) | anything (overwritten) | where the vregion is mapped in the receiver |
//!
//! Passing it unmaps it from the sender and maps the same frames in the receiver, at a
//! kernel-chosen address in the receiver's ICA window ([`ICA_WINDOW`]: the lowest free
//! [`ICA_SLOT`]-sized slot), writable if the sender's mapping was. A request's ICA is mapped
//! when the request is queued for the endpoint's owner (before its `RECV`); a reply's when
//! the answer reaches the caller. The sender must be its only mapper (a vregion attached
//! twice, or also elsewhere, is `Busy`); the frames stay in the pool of the vregion's core.
//! Checked before anything moves, and on any failure the sender keeps it where it was:
//! `WrongType` (not a vregion id), `NoSuchResource` / `StaleResource` (unknown or closed),
//! `Busy` (attached elsewhere, e.g. passed already and held by another), `InvalidArgument`
//! (not attached in the sender's address space), and the request's own errors (a full
//! queue is `Busy`, an ended owner `Gone`, no room in the receiver's window `NoMemory`).
//!
//! From its first pass until it is attached nowhere, the vregion is *passed*: `ATTACH`,
//! `READ` and `WRITE` on it are `Busy` for everyone, so only the process that maps it can
//! touch it (the sender's old address faults). The holder passes it on or back the same way.
//! It comes back when it is attached nowhere: the holder `DETACH`es it, ends (with it
//! mapped, or before taking the request that carried it), the endpoint is closed with the
//! request queued, or a reply carrying it finds its caller gone or with no room (then the
//! reply arrives with `MSG_ICA` cleared). It is then an ordinary vregion again, detached,
//! and its creator attaches it by id or closes it: nothing is freed or leaked by the pass.
//!
//! The fast path (seL4's idea): a `CALL` to an endpoint whose owner waits in `RECV` or
//! `REPLY_RECV` on the same core hands the message and the core straight to the receiver
//! (no run-queue round trip), and a `REPLY_RECV` whose caller waits on the same core, with
//! no other request queued, hands the core straight back. Every other case (a queued
//! receiver, another core, a higher-priority thread ready) takes the ordinary path with
//! the same results.
//!
//! **Messages in registers** (seL4's message registers): `CALL_REGS` and
//! `REPLY_RECV_REGS` (`crate::syscall`) are `CALL` and `REPLY_RECV` with every message in
//! the registers [`MSG_REGS`] (the label, then the six words), so the kernel touches no
//! user memory: a direct switch copies the message from one thread's saved registers to
//! the other's. A request's sender comes back in `rdi` (its pid) and `r15`
//! (`sender_user << 32 | sender_thread`); its kind is `SUBMIT_SEND` if its handle is 0,
//! else `SUBMIT_CALL`; the endpoint is the one named. `REPLY_RECV_REGS` has no time limit.
//! On an error only (`rax`, `rdx`) change. Everything else (ICAs, function ids, other
//! cores, the errors) is as for `CALL` and `REPLY_RECV`; a register call may be answered
//! by `REPLY` and a `CALL` by `REPLY_RECV_REGS`.

use crate::Pid;

/// The registers of a message in `CALL_REGS` and `REPLY_RECV_REGS`, in order: the label,
/// then `words[0..6]`.
pub const MSG_REGS: [&str; 1 + MSG_WORDS] = ["rsi", "r10", "r8", "r9", "r12", "r13", "r14"];
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

/// A message's label flag: it carries an ICA (the vregion id in `words[ICA_ID_WORD]`).
pub const MSG_ICA: u64 = 1 << 63;
/// A label flag beside [`MSG_ICA`], meaningless without it.
///
/// In a received request or answer, set by the kernel: the ICA is mapped read-only here
/// (its sender's mapping was, or it was lent so), so a server that would write into it
/// must refuse the request instead (a write would end the server at a page fault).
/// Cleared by the kernel when the ICA is writable.
///
/// Set by a sender whose mapping is writable, it *lends* the ICA read-only: the receiver
/// maps it read-only, and so does any process it is passed on to, until it is passed back
/// to the lender, where it lands writable again. A client lends what the server only
/// reads (a name, a write's data), so the server cannot change it, and its answer carries
/// no reply data (the kernel counts such answers, P0 Table 4: `IPC_REPLIES_CROSS_BARE`).
pub const MSG_ICA_READ_ONLY: u64 = 1 << 62;
/// The word of an ICA-carrying message that names the vregion.
pub const ICA_ID_WORD: usize = 5;
/// The word the kernel sets, in the message the receiver gets, to where the ICA is mapped.
pub const ICA_AT_WORD: usize = 4;
/// The receiver's ICA window: passed vregions are mapped at the lowest free slot in it.
pub const ICA_WINDOW: u64 = 0x0000_6000_0000_0000;
/// One slot of the ICA window: the largest vregion (16 MiB).
pub const ICA_SLOT: u64 = 16 << 20;
/// Slots in the ICA window (as many as attachments one address space may have).
pub const ICA_SLOTS: u64 = 64;

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
/// `args[3]`), rights in `msg.label`; both copied at submit. The value is the id. A
/// `process` is opened so on the caller's core only (`NotSupported` for another: its pid
/// would not reach the caller's record of its children), and counts as a child.
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
    /// The user the sender acted as when it sent (the kernel vouches; 0 for the kernel's
    /// own messages). A server that acts for its callers (`machd` spawning on another
    /// machine, issue 17) carries this user, never one a caller claims.
    pub sender_user: u64,
}

/// `COLLECT`'s ticket argument: any finished request.
pub const ANY: u64 = 0;
