//! The request path's system calls (`SUBMIT`, `COLLECT`, `CALL`, `SEND`, `RECV`, `REPLY`,
//! `REPLY_RECV`):
//! checking and copying what a program passes, around the queues of `ipc`.

#![deny(unsafe_code)]

use crate::ipc;
use crate::mm::user::{UserFault, UserPtr, UserPtrMut, UserSliceMut};
use crate::proc;
use crate::syscall::{copy_in, MAX_IO};
use abi::ipc::{self as api, Completion, Msg, Submission};
use abi::res::ResId;
use abi::Error;

/// Copy in the record at `ptr`.
fn read<T: bytemuck::Pod>(ptr: u64) -> Result<T, Error> {
    proc::with_current_vspace(|vs| UserPtr::<T>::new(ptr).read(vs))
}

/// SUBMIT(`*const Submission`) -> ticket.
pub fn submit(ptr: u64) -> Result<u64, Error> {
    let sub: Submission = read(ptr)?;
    let bytes = bytes_in(&sub)?;
    ipc::submit(&sub, bytes)
}

/// The bytes a submission brings: a write's data, or an open's name and arguments.
pub type BytesIn = Option<(alloc::vec::Vec<u8>, alloc::vec::Vec<u8>)>;

/// Copy what a submission names in the caller's memory (a write's data, an open's name and
/// arguments) and check a read's buffer, as `SUBMIT` and `ENTER` do before starting it.
pub fn bytes_in(sub: &Submission) -> Result<BytesIn, Error> {
    Ok(match sub.kind {
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
            let buffer = UserSliceMut::<u8>::new(sub.args[0], sub.args[1] as usize);
            proc::with_current_vspace(|vs| buffer.check(vs))?;
            None
        }
        _ => None,
    })
}

/// COLLECT(ticket or ANY, `*mut Completion`, timeout) -> the ticket collected.
pub fn collect(ticket: u64, out: u64, timeout_ns: u64) -> Result<u64, Error> {
    let out = UserPtrMut::<Completion>::new(out);
    // A bad record pointer fails before anything is taken.
    proc::with_current_vspace(|vs| out.check(vs))?;
    let (mut c, bytes) = ipc::collect(ticket, timeout_ns)?;
    proc::with_current_vspace(|vs| {
        if let Some((at, bytes)) = bytes {
            if UserSliceMut::<u8>::new(at, bytes.len())
                .write(vs, &bytes)
                .is_err()
            {
                c.status = Error::BadAddress as u64;
            }
        }
        out.write(vs, &c)
    })?;
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
    let reply_out = UserPtrMut::<Msg>::new(reply_ptr);
    // The message and room for the reply, in one visit to the address space.
    let msg = proc::with_running_memory(|vs| {
        let msg = UserPtr::<Msg>::new(msg_ptr).read(vs)?;
        reply_out.check(vs)?;
        Ok::<_, UserFault>(msg)
    })?;
    let c = ipc::call(ResId(endpoint), msg)?;
    status(&c)?;
    proc::with_running_memory(|vs| reply_out.write(vs, &c.msg))?;
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
    let out = UserPtrMut::<api::Received>::new(out);
    proc::with_running_memory(|vs| out.check(vs))?;
    let r = ipc::recv(ResId(endpoint), timeout_ns)?;
    proc::with_running_memory(|vs| out.write(vs, &r))?;
    Ok(r.request)
}

/// REPLY(request, `*const Msg`, value) -> 0.
pub fn reply(request: u64, msg_ptr: u64, value: u64) -> Result<u64, Error> {
    let msg: Msg = read(msg_ptr)?;
    ipc::reply(request, msg, value).map(|()| 0)
}

/// REPLY_RECV(request or 0, `*const Msg`, value, endpoint, `*mut Received`, timeout) ->
/// the next request's handle. Both records are checked before anything is done.
pub fn reply_recv(
    request: u64,
    msg_ptr: u64,
    value: u64,
    endpoint: u64,
    out: u64,
    timeout_ns: u64,
) -> Result<u64, Error> {
    let out = UserPtrMut::<api::Received>::new(out);
    let msg = proc::with_running_memory(|vs| {
        out.check(vs)?;
        if request == 0 {
            Ok::<_, UserFault>(Msg::default())
        } else {
            UserPtr::<Msg>::new(msg_ptr).read(vs)
        }
    })?;
    let r = ipc::reply_recv(request, msg, value, ResId(endpoint), timeout_ns)?;
    proc::with_running_memory(|vs| out.write(vs, &r))?;
    Ok(r.request)
}
