//! A remote program's standard streams for a local pipeline (`abi::mach::OP_OUTPUT` with
//! an ICA, `OP_INPUT`; the shell's `run PROG -m M | ...` and `run ... | PROG -m M`): the
//! local halves, which keep the caller's ICA while the request travels, as file requests
//! do (`files::Waiting`, `files::answer`). The other machine's halves are `ops::output`
//! and `ops::input`.

use crate::files::{Kind, Waiting};
use crate::ops::words;
use crate::State;
use alloc::vec::Vec;
use ulib::abi::ipc::Received;
use ulib::abi::mach;
use ulib::abi::Error;

/// `OP_OUTPUT` with an ICA from a local program acting as `user`: the output of process
/// `words[2]` of machine `words[0]` (life `words[1]`) copied into the ICA instead of
/// printed (a pipeline's remote first program: the shell writes it into the next one's
/// pipe). Started, or answered at once with an error (the ICA back either way).
pub fn output_local(s: &mut State, r: &Received, user: u32) {
    start(s, r, user, Kind::Output, |w, _| {
        Ok((crate::ops::R_OUTPUT, w[2].to_le_bytes().to_vec()))
    });
}

/// `OP_INPUT` from a local program acting as `user`: the bytes at the start of its ICA
/// into the input of process `words[2]` of machine `words[0]` (life `words[1]`). Started,
/// or answered at once with an error (the ICA back either way).
pub fn input_local(s: &mut State, r: &Received, user: u32) {
    start(s, r, user, Kind::Input, |w, at| {
        let len = w[3] & 0xffff_ffff;
        if len > mach::INPUT_MAX as u64 {
            return Err(Error::TooLong);
        }
        let mut payload = words(&[w[2], u64::from(w[3] & mach::INPUT_END != 0)]);
        // SAFETY: the request's ICA is attached at `at`, at least a page, ours until we
        // answer; `len` is at most INPUT_MAX, under a page.
        payload.extend_from_slice(unsafe {
            core::slice::from_raw_parts(at as *const u8, len as usize)
        });
        Ok((crate::ops::R_INPUT, payload))
    });
}

/// Start request `r` (machine `words[0]`, life `words[1]`, with its ICA) to that machine:
/// `request` makes the mrpc op and payload from the words and the ICA's address. On any
/// error the caller is answered at once, its ICA back.
fn start(
    s: &mut State,
    r: &Received,
    user: u32,
    kind: Kind,
    request: impl FnOnce(&[u64; 6], u64) -> Result<(u16, Vec<u8>), Error>,
) {
    let Some((region, at)) = crate::files::request_ica(r) else {
        return;
    };
    let w = r.msg.words;
    let started = u8::try_from(w[0])
        .ok()
        .filter(|&m| m < s.n && m != s.me)
        .zip(u32::try_from(w[1]).ok())
        .ok_or(Error::InvalidArgument)
        .and_then(|(m, epoch)| {
            let (op, payload) = request(&w, at)?;
            let call = ((m, op, payload), mach::DEFAULT_DEADLINE_NS, Some(epoch));
            let waiting = Waiting { region, at, kind };
            s.start(r.request, op_of(kind), call, user, Some(waiting))
        });
    if let Err(e) = started {
        crate::files::give_back(r, region, e);
    }
}

/// The local op a kind of waiting request is.
fn op_of(kind: Kind) -> u64 {
    match kind {
        Kind::Output => mach::OP_OUTPUT,
        Kind::Input => mach::OP_INPUT,
        Kind::Fs => mach::OP_FS,
        Kind::Call => mach::OP_CALL,
        Kind::Res => mach::OP_RES,
    }
}
