//! Several machines (issue 17): what programs other than the shell ask of `machd` beyond
//! files (`fs` names `mK:PATH` itself).
//!
//! [`output`]: the output of a program spawned on another machine with its output relayed
//! (`abi::mach::SPAWN_RELAY`), read into this program rather than printed by `machd`, so
//! that it can go on into a pipe (the shell's `run PROG -m M | ...`). [`input`]: bytes for
//! the input of a program spawned there with `SPAWN_STDIN` (`run ... | PROG -m M`).

use crate::abi::ipc::Msg;
use crate::abi::mach::{self, FN_MACH};
use crate::abi::res::ResId;
use crate::abi::{Error, Pid};
use crate::fnid;
use alloc::vec::Vec;

/// What process `pid` of machine `machine` (life `epoch`) has written since the last look,
/// appended to `out` (at most about 1 KiB a look; nothing new is nothing appended), and
/// whether its output has ended. Only the user it was spawned for (or the administrator)
/// may (`NoSuchProcess` otherwise, or once its output has ended and was read).
pub fn output(machine: u8, epoch: u32, pid: Pid, out: &mut Vec<u8>) -> Result<bool, Error> {
    let server = ResId(fnid::lookup(FN_MACH)?.0);
    let words = [u64::from(machine), u64::from(epoch), pid.0, 0, 0, 0];
    crate::fs::call_with_ica(
        server,
        mach::OP_OUTPUT,
        words,
        |_| {},
        |data, reply: &Msg| {
            let n = (reply.words[0] as usize).min(data.len());
            out.extend_from_slice(&data[..n]);
            reply.words[1] != 0
        },
    )
}

/// Write `bytes` (at most `abi::mach::INPUT_MAX`) into the input of process `pid` of machine
/// `machine` (life `epoch`; spawned with `SPAWN_STDIN`), and end its input after them if
/// `end`: how many were written (0 while its pipe is full; the end is given only when all
/// were). `Gone` once it reads no more.
pub fn input(machine: u8, epoch: u32, pid: Pid, bytes: &[u8], end: bool) -> Result<usize, Error> {
    if bytes.len() > mach::INPUT_MAX {
        return Err(Error::TooLong);
    }
    let server = ResId(fnid::lookup(FN_MACH)?.0);
    let len = bytes.len() as u64 | if end { mach::INPUT_END } else { 0 };
    let words = [u64::from(machine), u64::from(epoch), pid.0, len, 0, 0];
    crate::fs::call_with_ica(
        server,
        mach::OP_INPUT,
        words,
        |ica| ica[..bytes.len()].copy_from_slice(bytes),
        |_, reply: &Msg| reply.words[0] as usize,
    )
}
