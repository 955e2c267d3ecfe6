//! The request path's system calls (`SUBMIT`, `COLLECT`, `CALL`, `SEND`, `RECV`, `REPLY`):
//! checking and copying what a program passes, around the queues of `ipc`.

use crate::ipc;
use crate::proc;
use crate::syscall::{copy_in, MAX_IO};
use abi::ipc::{self as api, Completion, Msg, Submission};
use abi::res::ResId;
use abi::Error;

fn read<T: Copy + Default>(ptr: u64) -> Result<T, Error> {
    proc::with_current_vspace(|vs| vs.read_value::<T>(ptr))
}

fn write<T: Copy>(ptr: u64, value: &T) -> Result<(), Error> {
    proc::with_current_vspace(|vs| vs.write_value(ptr, value))
}

/// Is there room for a `T` at `ptr` that the caller may write? (Checked before anything is
/// taken, so a bad pointer loses nothing.)
fn writable<T>(ptr: u64) -> Result<(), Error> {
    proc::with_current_vspace(|vs| vs.check_writable(ptr, core::mem::size_of::<T>()))
}

/// SUBMIT(`*const Submission`) -> ticket.
pub fn submit(ptr: u64) -> Result<u64, Error> {
    let sub: Submission = read(ptr)?;
    let bytes = match sub.kind {
        api::SUBMIT_RES_WRITE => Some((
            copy_in(sub.args[0], sub.args[1], MAX_IO)?,
            alloc::vec::Vec::new(),
        )),
        api::SUBMIT_RES_OPEN => Some((
            copy_in(sub.args[0], sub.args[1], abi::res::MAX_RES_NAME as u64)?,
            copy_in(sub.args[2], sub.args[3], proc::MAX_ARGS as u64)?,
        )),
        api::SUBMIT_RES_READ => {
            // The buffer must be there now (the bytes go into it at collect).
            if sub.args[1] > MAX_IO {
                return Err(Error::TooLong);
            }
            proc::with_current_vspace(|vs| {
                vs.copy_out(sub.args[0], &alloc::vec![0u8; sub.args[1] as usize])
            })?;
            None
        }
        _ => None,
    };
    ipc::submit(&sub, bytes)
}

/// COLLECT(ticket or ANY, `*mut Completion`, timeout) -> the ticket collected.
pub fn collect(ticket: u64, out: u64, timeout_ns: u64) -> Result<u64, Error> {
    // A bad record pointer fails before anything is taken.
    writable::<Completion>(out)?;
    let (mut c, bytes) = ipc::collect(ticket, timeout_ns)?;
    if let Some((at, bytes)) = bytes {
        if proc::with_current_vspace(|vs| vs.copy_out(at, &bytes)).is_err() {
            c.status = Error::BadAddress as u64;
        }
    }
    write(out, &c)?;
    Ok(c.ticket)
}

fn status(c: &Completion) -> Result<(), Error> {
    match c.status {
        0 => Ok(()),
        code => Err(Error::from_code(code)),
    }
}

/// CALL(endpoint, `*const Msg`, `*mut Msg`) -> the reply's value (rendezvous).
pub fn call(endpoint: u64, msg_ptr: u64, reply_ptr: u64) -> Result<u64, Error> {
    let msg: Msg = read(msg_ptr)?;
    writable::<Msg>(reply_ptr)?;
    let sub = Submission {
        kind: api::SUBMIT_CALL,
        target: endpoint,
        msg,
        ..Submission::default()
    };
    let ticket = ipc::submit(&sub, None)?;
    let (c, _) = ipc::collect(ticket, u64::MAX)?;
    status(&c)?;
    write(reply_ptr, &c.msg)?;
    Ok(c.value)
}

/// SEND(endpoint, `*const Msg`) -> 0 once queued.
pub fn send(endpoint: u64, msg_ptr: u64) -> Result<u64, Error> {
    let msg: Msg = read(msg_ptr)?;
    let sub = Submission {
        kind: api::SUBMIT_SEND,
        target: endpoint,
        msg,
        ..Submission::default()
    };
    let ticket = ipc::submit(&sub, None)?;
    let (c, _) = ipc::collect(ticket, u64::MAX)?;
    status(&c).map(|()| 0)
}

/// RECV(endpoint, `*mut Received`, timeout) -> request handle.
pub fn recv(endpoint: u64, out: u64, timeout_ns: u64) -> Result<u64, Error> {
    writable::<api::Received>(out)?;
    let r = ipc::recv(ResId(endpoint), timeout_ns)?;
    write(out, &r)?;
    Ok(r.request)
}

/// REPLY(request, `*const Msg`, value) -> 0.
pub fn reply(request: u64, msg_ptr: u64, value: u64) -> Result<u64, Error> {
    let msg: Msg = read(msg_ptr)?;
    ipc::reply(request, msg, value).map(|()| 0)
}
