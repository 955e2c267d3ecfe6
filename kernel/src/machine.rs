//! Which machine this kernel is among several joined as one system (issue 17: `machine=K`
//! on the command line; 0 without it, as on a single machine).
//!
//! Every resource id and pid this kernel makes carries the machine (`ResId`'s and `Pid`'s
//! top 4 bits), so an id printed on machine 1 (`m1.c0:pipe:3.1`, `m1.c2.5`) names that
//! machine's resource or process wherever it is typed, and this kernel refuses it
//! (`NoSuchResource`, `NoSuchProcess`) instead of taking it for the one of its own that has
//! the same core, slot and generation. The requests that reach another machine go through
//! `machd` (user mode); the kernel itself never sends anything to another machine.

use abi::res::{ResId, ResType};
use abi::Pid;
use core::sync::atomic::{AtomicU8, Ordering};

static THIS: AtomicU8 = AtomicU8::new(0);

/// Set at boot, on the boot core, before any resource or process exists.
pub fn set(machine: u8) {
    THIS.store(machine, Ordering::Relaxed);
}

/// This machine's id.
pub fn this() -> u8 {
    THIS.load(Ordering::Relaxed)
}

/// The pid of process `serial` created on `core` of this machine.
pub fn pid(core: usize, serial: u32) -> Pid {
    Pid::on(this(), core, serial)
}

/// The id of slot `slot` in its `generation`-th use in `core`'s table on this machine.
pub fn res_id(core: usize, kind: ResType, generation: u32, slot: u32) -> ResId {
    ResId::new(this(), core, kind, generation, slot)
}

/// Is `pid` one of this machine's (not another machine's with the same core and serial)?
pub fn owns_pid(pid: Pid) -> bool {
    pid.machine() == this()
}

/// A pid a program passed (`0`, "none" or "the caller", kept as it is), refused
/// `NoSuchProcess` if it is another machine's or not as `Pid::on` writes one (other bits
/// set, which `core()` and `serial()` ignore: the kernel compares pids whole, so such a
/// value would name a process yet differ from its pid).
pub fn local_pid(raw: u64) -> Result<Pid, abi::Error> {
    let pid = Pid(raw);
    if raw != 0 && (!owns_pid(pid) || !pid.is_canonical()) {
        return Err(abi::Error::NoSuchProcess);
    }
    Ok(pid)
}
