//! The request path from user space: endpoints, rendezvous (`call`, `recv`, `reply`,
//! `reply_recv`), one-way `send`, and split-phase `submit` / `collect` (`abi::ipc` has the
//! contract).

use crate::res;
use crate::sys::{decode, raw};
use abi::ipc::{self as api, Completion, Msg, Received, Submission};
use abi::res::{ResId, Rights};
use abi::syscall as nr;
use abi::Error;

/// Open an endpoint `name` (e.g. `here/endpoint/server`) to receive requests on; `rights`
/// say who may send (write) and receive (read).
pub fn open_endpoint(name: &str, rights: Rights) -> Result<ResId, Error> {
    res::open(name, &[], rights)
}

/// SUBMIT: start `sub`; returns its ticket.
pub fn submit(sub: &Submission) -> Result<u64, Error> {
    // SAFETY: `sub` is a live record; the kernel only reads it (and buffers it names, which
    // the caller provides).
    decode(unsafe { raw::syscall1(nr::SUBMIT, sub as *const Submission as u64) })
}

/// COLLECT: the result of `ticket` (or of any request with `api::ANY`), waiting at most
/// `timeout_ns` (`u64::MAX`: no limit).
pub fn collect(ticket: u64, timeout_ns: u64) -> Result<Completion, Error> {
    let mut c = Completion::default();
    // SAFETY: `c` lives across the call; the kernel writes one record to it.
    decode(unsafe { raw::syscall3(nr::COLLECT, ticket, &raw mut c as u64, timeout_ns) })?;
    Ok(c)
}

/// The status of a completion as a `Result` with its value.
pub fn result(c: &Completion) -> Result<u64, Error> {
    match c.status {
        0 => Ok(c.value),
        code => Err(Error::from_code(code)),
    }
}

/// CALL: send `msg` to `endpoint` and wait for the reply (rendezvous); returns the reply's
/// value and message.
pub fn call(endpoint: ResId, msg: &Msg) -> Result<(u64, Msg), Error> {
    let mut reply = Msg::default();
    // SAFETY: both records live across the call; the kernel reads one and writes the other.
    let v = decode(unsafe {
        raw::syscall3(
            nr::CALL,
            endpoint.0,
            msg as *const Msg as u64,
            &raw mut reply as u64,
        )
    })?;
    Ok((v, reply))
}

/// SEND: put `msg` in `endpoint`'s queue; no reply.
pub fn send(endpoint: ResId, msg: &Msg) -> Result<(), Error> {
    // SAFETY: the kernel reads `msg`, which lives across the call.
    decode(unsafe { raw::syscall2(nr::SEND, endpoint.0, msg as *const Msg as u64) }).map(drop)
}

/// RECV: the next request on `endpoint` (which the caller owns), waiting at most
/// `timeout_ns`.
pub fn recv(endpoint: ResId, timeout_ns: u64) -> Result<Received, Error> {
    let mut r = Received::default();
    // SAFETY: `r` lives across the call; the kernel writes one record to it.
    decode(unsafe { raw::syscall3(nr::RECV, endpoint.0, &raw mut r as u64, timeout_ns) })?;
    Ok(r)
}

/// REPLY: answer request `request` (from `recv`) with `value` and `msg`.
pub fn reply(request: u64, value: u64, msg: &Msg) -> Result<(), Error> {
    // SAFETY: the kernel reads `msg`, which lives across the call.
    decode(unsafe { raw::syscall3(nr::REPLY, request, msg as *const Msg as u64, value) }).map(drop)
}

/// REPLY_ERROR: answer request `request` with `error` (its caller's call fails with it),
/// e.g. `Again` for each request held when the retire notice comes
/// (`abi::fnid::RETIRE_NOTICE`).
pub fn reply_error(request: u64, error: Error) -> Result<(), Error> {
    // SAFETY: no memory is passed.
    decode(unsafe { raw::syscall2(nr::REPLY_ERROR, request, error as u64) }).map(drop)
}

/// REPLY_RECV: answer `request` (0: none) with `value` and `msg`, then wait at most
/// `timeout_ns` for the next request on `endpoint` (a server's loop in one system call).
/// An unknown `request` is `NoSuchResource`, and then nothing was answered or received.
pub fn reply_recv(
    request: u64,
    value: u64,
    msg: &Msg,
    endpoint: ResId,
    timeout_ns: u64,
) -> Result<Received, Error> {
    let mut r = Received::default();
    // SAFETY: the kernel reads `msg` and writes one record to `r`; both live across the
    // call.
    decode(unsafe {
        raw::syscall6(
            nr::REPLY_RECV,
            request,
            msg as *const Msg as u64,
            value,
            endpoint.0,
            &raw mut r as u64,
            timeout_ns,
        )
    })?;
    Ok(r)
}

/// CALL_REGS: [`call`] with the message and the reply in registers (`abi::ipc`, "Messages
/// in registers"): the kernel touches no user memory, and a direct switch copies the
/// message from this thread's saved registers to the receiver's.
#[inline(always)]
pub fn call_regs(endpoint: ResId, msg: &Msg) -> Result<(u64, Msg), Error> {
    let mut m = *msg;
    let (rax, rdx): (u64, u64);
    // SAFETY: no memory is passed; the kernel answers in `rax`/`rdx` and the message
    // registers (declared as outputs) and keeps every other register.
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") nr::CALL_REGS => rax, in("rdi") endpoint.0, lateout("rdx") rdx,
            inout("rsi") m.label, inout("r10") m.words[0], inout("r8") m.words[1],
            inout("r9") m.words[2], inout("r12") m.words[3], inout("r13") m.words[4],
            inout("r14") m.words[5], out("rcx") _, out("r11") _, options(nostack));
    }
    nr::decode(rax, rdx).map(|v| (v, m))
}

/// REPLY_RECV_REGS: [`reply_recv`] with both messages in registers and no time limit.
/// The request comes back as a [`Received`] whose `endpoint` is `endpoint` and whose `kind`
/// follows from its handle (`SUBMIT_SEND` for 0).
#[inline(always)]
pub fn reply_recv_regs(
    request: u64,
    value: u64,
    msg: &Msg,
    endpoint: ResId,
) -> Result<Received, Error> {
    let mut m = *msg;
    let (rax, rdx, sender, who): (u64, u64, u64, u64);
    // SAFETY: as for `call_regs`.
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") nr::REPLY_RECV_REGS => rax, inlateout("rdi") request => sender,
            inlateout("rdx") value => rdx, inlateout("r15") endpoint.0 => who,
            inout("rsi") m.label, inout("r10") m.words[0], inout("r8") m.words[1],
            inout("r9") m.words[2], inout("r12") m.words[3], inout("r13") m.words[4],
            inout("r14") m.words[5], out("rcx") _, out("r11") _, options(nostack));
    }
    let handle = nr::decode(rax, rdx)?;
    Ok(Received {
        request: handle,
        sender: abi::Pid(sender),
        sender_thread: who & 0xffff_ffff,
        sender_user: who >> 32,
        endpoint: endpoint.0,
        kind: if handle == 0 {
            api::SUBMIT_SEND
        } else {
            api::SUBMIT_CALL
        },
        msg: m,
    })
}

/// `msg` carrying vregion `region` as an ICA (`abi::ipc` has the contract): the kernel
/// moves it from the sender's address space to the receiver's, which reads where it went
/// with [`ica_at`].
pub fn with_ica(mut msg: Msg, region: ResId) -> Msg {
    msg.label |= api::MSG_ICA;
    msg.words[api::ICA_ID_WORD] = region.0;
    msg
}

/// `msg`'s label without the ICA flags (`MSG_ICA`, `MSG_ICA_READ_ONLY`): the operation or
/// status it names, however its ICA travelled.
pub fn label(msg: &Msg) -> u64 {
    msg.label & !(api::MSG_ICA | api::MSG_ICA_READ_ONLY)
}

/// Is the ICA a received request carries mapped read-only here (`MSG_ICA_READ_ONLY`)? A
/// server that writes into its requests' ICAs refuses such a request.
pub fn ica_read_only(msg: &Msg) -> bool {
    msg.label & api::MSG_ICA != 0 && msg.label & api::MSG_ICA_READ_ONLY != 0
}

/// The ICA a received message (or reply) carries: its vregion and where it is mapped.
pub fn ica_at(msg: &Msg) -> Option<(ResId, u64)> {
    (msg.label & api::MSG_ICA != 0).then(|| {
        (
            ResId(msg.words[api::ICA_ID_WORD]),
            msg.words[api::ICA_AT_WORD],
        )
    })
}

/// A one-way message (`r.request` 0: a `SEND`, nothing to answer) is done with: the ICA
/// it carried, if any, is detached here and goes back to its creator. A server that
/// dropped it instead kept it mapped for good, and 64 of them filled its ICA window, so
/// every later request with an ICA was refused, for every client (found by reviews in
/// `netd`, `netdrv`, `machd`, then `fsd`, `bufd` and `blkdrv`).
pub fn let_go(msg: &Msg) {
    if let Some((_, at)) = ica_at(msg) {
        let _ = crate::res::detach_here(at);
    }
}

/// A submission of kind `kind` on `target` with `args`.
pub fn op(kind: u64, target: u64, args: [u64; 4]) -> Submission {
    Submission {
        kind,
        target,
        args,
        msg: Msg::default(),
    }
}

/// A timed operation: finishes after `ns` nanoseconds.
pub fn timer(ns: u64) -> Submission {
    op(api::SUBMIT_TIMER, 0, [ns, 0, 0, 0])
}
