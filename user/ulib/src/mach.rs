//! Several machines (issue 17): what programs other than the shell ask of `machd` beyond
//! files (`fs` names `mK:PATH` itself).
//!
//! [`output`]: the output of a program spawned on another machine with its output relayed
//! (`abi::mach::SPAWN_RELAY`), read into this program rather than printed by `machd`, so
//! that it can go on into a pipe (the shell's `run PROG -m M | ...`).

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
