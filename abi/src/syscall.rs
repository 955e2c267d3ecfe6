//! System-call numbers and the register convention.
//!
//! A user program enters the kernel with `syscall`: the call number in `rax`, up to six
//! arguments in `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9` (the Linux order, so tools read it
//! easily). The kernel answers in two registers: `rax` is 0 on success or an [`Error`] code,
//! and `rdx` is the value. [`decode`] turns the pair into a `Result`, so there is no -1
//! convention anywhere. `rcx` and `r11` are clobbered by the instruction itself; every other
//! register, and all FPU/SSE state, is preserved.
//!
//! | number | call | arguments | value |
//! |---|---|---|---|
//! | 0 | `EXIT` | status | (does not return) |
//! | 1 | `WAIT` | pid (0 = any child), `*mut WaitStatus`, timeout ns (`u64::MAX`: none) | pid of the child: the pid asked for, or for any child the pid it was created with, however often it migrated (`TimedOut` if none ended in time) |
//! | 2 | `SPAWN` | name ptr, name len, args ptr, args len, priority | pid of the child |
//! | 3 | `GETPID` | | own pid |
//! | 4 | `CORE` | | index of the core running the caller |
//! | 5 | `YIELD` | | 0 |
//! | 6 | `SLEEP` | nanoseconds | 0 |
//! | 7 | `CLOCK` | | nanoseconds since boot |
//! | 8 | `CONSOLE_WRITE` | ptr, len | bytes written |
//! | 9 | `CONSOLE_READ` | ptr, len, flags (`CONSOLE_NONBLOCK`) | bytes read (blocks for at least one unless NONBLOCK) |
//! | 10 | `MEMORY` | bytes to add to the heap | previous end of the heap (like `sbrk`) |
//! | 11 | `PROCESSES` | `*mut ProcInfo`, capacity | number of records written |
//! | 12 | `CORES` | `*mut CoreInfo`, capacity | number of records written |
//! | 13 | `KILL` | pid | 0 |
//! | 14 | `POWEROFF` | | (does not return; `Denied` unless the caller was created by the administrator, user 1, or the kernel) |
//! | 15 | `RES_OPEN` | name ptr, name len, args ptr, args len, rights | `ResId` |
//! | 16 | `RES_CLOSE` | id | 0 |
//! | 17 | `RES_READ` | id, buf ptr, buf len, arg | type-specific (docs/resources.md) |
//! | 18 | `RES_WRITE` | id, buf ptr, buf len, arg | type-specific |
//! | 19 | `RES_CONTROL` | id, command, arg0, arg1 | type-specific |
//! | 20 | `RES_LIST` | core, `*mut ResInfo`, capacity | number of records written |
//! | 21 | `RES_INFO` | id, `*mut ResInfo` | 0 |
//! | 22 | `SETUSER` | user id | 0 (the caller's user changes: the shell's `su`; `Denied` unless the caller was created by the administrator, user 1, or the kernel, or it names the caller's own user; never the kernel, 0) |
//! | 23 | `GETUSER` | | the caller's user id |
//! | 24 | `SPAWN_ON` | name ptr, name len, args ptr, args len, priority, core | pid of the child (it lives on `core`) |
//! | 25 | `MIGRATE` | pid (0 = the caller), core | the process's new pid on `core` (`Denied` for a process holding a device, DMA memory or a BAR mapping: see [`crate::dev`]) |
//! | 26 | `RPCC_STATS` | `*mut RpccInfo`, capacity | number of records written (one per core) |
//! | 27 | `MODES` | `*mut ModeInfo`, capacity | number of records written (one per core): where each core's time went |
//! | 29–34 | `SUBMIT`, `COLLECT`, `CALL`, `SEND`, `RECV`, `REPLY` | see [`crate::ipc`] | |
//! | 35 | `THREAD_CREATE` | entry, stack top, argument | thread id (the new thread starts at `entry(argument)` on that stack, in the caller's process) |
//! | 36 | `THREAD_EXIT` | value | (does not return; the last thread's exit ends the process with `value`) |
//! | 37 | `THREAD_JOIN` | thread id, timeout ns | the thread's exit value |
//! | 38 | `THREAD_SELF` | | the caller's thread id |
//! | 39 | `REPLY_RECV` | request handle (0: none), `*const Msg`, value, endpoint, `*mut Received`, timeout ns | the next request's handle (`REPLY` then `RECV` in one entry; see [`crate::ipc`]) |
//! | 40 | `ENTER` | submissions to take, completions to wait for, timeout ns | submissions taken (see [`crate::ring`]) |
//! | 41 | `RING_SETUP` | address, submission entries | bytes mapped (see [`crate::ring`]) |
//! | 42–47 | `FN_REGISTER`, `FN_LOOKUP`, `FN_UNREGISTER`, `FN_LIST`, `FN_STATE`, `FN_TAKEOVER` | see [`crate::fnid`] | |
//! | 60, 61 | `CALL_REGS`, `REPLY_RECV_REGS` | `CALL` and `REPLY_RECV` with the messages in registers (see [`crate::ipc`]) | |
//! | 62–64 | `MIGRATE_EXPORT`, `MIGRATE_IMPORT`, `MIGRATE_FINISH` | a process moved to another machine as an image (see the constants) | |
//! | 65 | `THREAD_SETUSER` | user id (0: the process's again) | 0 (`SETUSER` for the calling thread alone: its process's other threads keep theirs; a server acting for several clients at once) |
//! | 48–55 | `DEV_LIST`, `DEV_CLAIM`, `DEV_CONFIG`, `DEV_MAP_BAR`, `DMA_ALLOC`, `DMA_FREE`, `DEV_IRQ`, `DEV_IRQ_ACK` | see [`crate::dev`] | |
//! | 28 | `TRACE` | command (`TRACE_DUMP`, `TRACE_CLEAR`, `TRACE_STATUS`) | events dumped / cleared / held (`NotSupported` unless booted with `trace=on`) |
//!
//! `SPAWN_IMAGE` (58) starts a program that is not in the boot archive (one read from the
//! disk, `run /BIN/PROG` in the shell): the kernel copies the image in (`BadAddress` unless
//! the caller may read all of it; `TooLong` above [`MAX_IMAGE`]), checks it as it checks the
//! archive's programs (`BadExecutable` for anything but a well-formed static x86-64 ELF
//! executable whose segments lie in user space), and starts it on the caller's core or the
//! one named (`NoSuchCore` if it is not online; the copy travels there in the RPCC request,
//! as `SPAWN_ON`'s name does) as the caller's child, with the caller's user and rights,
//! under the same priority and child limits as `SPAWN`.
//!
//! `SPAWN`'s arguments are the program's name in the boot archive and its arguments as one
//! buffer of NUL-terminated strings; the child's `main` receives them as `argv[1..]`.
//!
//! A pointer is `BadAddress` unless every byte it covers is the caller's to read (or, for
//! the kernel's answers, to write). A pointer to a record or an array of records
//! (`*mut WaitStatus`, `*const Msg`, `*mut ProcInfo`, ...) must also be aligned for the
//! record, as a Rust reference is; a byte buffer may start anywhere.
//!
//! Every call works the same whatever core its target lives on: a pid, `ResId` or resource
//! name of another core is carried there by the inter-core RPCC and answered exactly as a
//! local call would be. `PROCESSES` lists every core's processes; `WAIT` waits for children
//! on any core and follows a child that migrated.

use crate::Error;

/// `CONSOLE_READ` flag: return 0 at once if no byte is waiting.
pub const CONSOLE_NONBLOCK: u64 = 1;

pub const EXIT: u64 = 0;
pub const WAIT: u64 = 1;
pub const SPAWN: u64 = 2;
pub const GETPID: u64 = 3;
pub const CORE: u64 = 4;
pub const YIELD: u64 = 5;
pub const SLEEP: u64 = 6;
pub const CLOCK: u64 = 7;
pub const CONSOLE_WRITE: u64 = 8;
pub const CONSOLE_READ: u64 = 9;
pub const MEMORY: u64 = 10;
pub const PROCESSES: u64 = 11;
pub const CORES: u64 = 12;
pub const KILL: u64 = 13;
pub const POWEROFF: u64 = 14;
pub const RES_OPEN: u64 = 15;
pub const RES_CLOSE: u64 = 16;
pub const RES_READ: u64 = 17;
pub const RES_WRITE: u64 = 18;
pub const RES_CONTROL: u64 = 19;
pub const RES_LIST: u64 = 20;
pub const RES_INFO: u64 = 21;
pub const SETUSER: u64 = 22;
pub const GETUSER: u64 = 23;
pub const SPAWN_ON: u64 = 24;
pub const MIGRATE: u64 = 25;
pub const RPCC_STATS: u64 = 26;
pub const MODES: u64 = 27;
pub const TRACE: u64 = 28;
pub const SUBMIT: u64 = 29;
pub const COLLECT: u64 = 30;
pub const CALL: u64 = 31;
pub const SEND: u64 = 32;
pub const RECV: u64 = 33;
pub const REPLY: u64 = 34;
pub const THREAD_CREATE: u64 = 35;
pub const THREAD_EXIT: u64 = 36;
pub const THREAD_JOIN: u64 = 37;
pub const THREAD_SELF: u64 = 38;
pub const REPLY_RECV: u64 = 39;
pub const ENTER: u64 = 40;
pub const RING_SETUP: u64 = 41;
pub const FN_REGISTER: u64 = 42;
pub const FN_LOOKUP: u64 = 43;
pub const FN_UNREGISTER: u64 = 44;
pub const FN_LIST: u64 = 45;
pub const FN_STATE: u64 = 46;
pub const FN_TAKEOVER: u64 = 47;
pub const DEV_LIST: u64 = 48;
pub const DEV_CLAIM: u64 = 49;
pub const DEV_CONFIG: u64 = 50;
pub const DEV_MAP_BAR: u64 = 51;
pub const DMA_ALLOC: u64 = 52;
pub const DMA_FREE: u64 = 53;
pub const DEV_IRQ: u64 = 54;
pub const DEV_IRQ_ACK: u64 = 55;
/// Answer a request with an error (`abi::ipc`): request handle, error code.
pub const REPLY_ERROR: u64 = 56;
/// Restart after a crash, opt-in (`abi::fnid`): function id, most restarts in the window,
/// window ms (at least [`crate::fnid::restart_window_min_ms`]`(max)` when max > 0, else
/// `InvalidArgument`), `*const u8` arguments, their length.
pub const FN_RESTART: u64 = 57;
/// Start a program from an ELF image in the caller's memory: image ptr, image len (at most
/// [`MAX_IMAGE`]), args ptr, args len (NUL-terminated strings, the first the name the
/// process is shown under), priority, core ([`SPAWN_IMAGE_HERE`]: the caller's; another
/// core gets a copy of the image through RPCC); pid of the child.
pub const SPAWN_IMAGE: u64 = 58;
/// `SPAWN_IMAGE`'s core for the caller's own core.
pub const SPAWN_IMAGE_HERE: u64 = u64::MAX;
/// The CPU time of the calling process so far, its running slice included (ns; under
/// `-icount shift=0` on one core, instructions): for a server that times its own steps
/// (`netd`'s request and result steps, P3 Table 3), which a core's TSC cannot do when a
/// higher-priority process (its driver) runs in the middle of a step.
pub const CPU_TIME: u64 = 59;
/// `CALL` with the message and the reply in registers (seL4's message registers; see
/// [`crate::ipc`], "Messages in registers"): endpoint in `rdi`, message in
/// [`crate::ipc::MSG_REGS`]; the reply's value in (`rax`, `rdx`), its message in the same
/// registers.
pub const CALL_REGS: u64 = 60;
/// `REPLY_RECV` with both messages in registers: request handle (0: none) in `rdi`, value
/// in `rdx`, endpoint in `r15`, reply message in [`crate::ipc::MSG_REGS`]; waits without a
/// time limit; the next request's handle in (`rax`, `rdx`), its message in the same
/// registers, its sender's pid in `rdi`, `sender_user << 32 | sender_thread` in `r15`.
pub const REPLY_RECV_REGS: u64 = 61;
/// Write process `pid` out as an image to move it to another machine (`procimage`):
/// pid, buffer ptr, buffer len; the image's length. The process stops and stays stopped
/// until [`MIGRATE_FINISH`]. `TooLong` if the buffer is too small or the image would be
/// above [`MAX_MOVE_IMAGE`] (its first 8 bytes then hold the length needed, and the
/// process runs on); `NotSupported` for a process with shared memory (a vregion or ICA
/// attached) or a request ring; else as `MIGRATE`'s refusals. A kill of the process is
/// `Busy` while the kernel reads it.
pub const MIGRATE_EXPORT: u64 = 62;
/// Start a process from an image another machine's kernel wrote: image ptr, image len
/// (at most [`MAX_MOVE_IMAGE`]), core; the new pid. It runs as the caller's child with the
/// caller's user and rights (never the image's), as `SPAWN_IMAGE`'s.
pub const MIGRATE_IMPORT: u64 = 63;
/// End an export: pid, its new pid elsewhere (0: the move failed; the process runs on),
/// the machine it went to. The process ends with [`crate::ENDED_MOVED_AWAY`]. Only the
/// process that exported it may (`Denied` else); `InvalidArgument` if it is not exported;
/// `Busy` while it is moving between cores (`MIGRATE`), or its image is still being
/// written.
pub const MIGRATE_FINISH: u64 = 64;

/// `THREAD_SETUSER user`: the calling thread alone acts as `user` (0: as its process's
/// user again); SETUSER's rule. A moved process's threads act as its user again, and a
/// thread the acting thread creates acts as its process's user.
pub const THREAD_SETUSER: u64 = 65;

/// Number of defined calls (numbers `0..COUNT`; some below it are not defined yet).
pub const COUNT: u64 = 66;

/// The largest image `MIGRATE_IMPORT` takes (`TooLong` beyond): 1,024 pages and their list.
pub const MAX_MOVE_IMAGE: u64 = 4 << 20 | 32 << 10;

/// The largest image `SPAWN_IMAGE` takes (`TooLong` beyond).
pub const MAX_IMAGE: u64 = 4 << 20;

/// `TRACE` commands.
pub const TRACE_DUMP: u64 = 0;
pub const TRACE_CLEAR: u64 = 1;
pub const TRACE_STATUS: u64 = 2;

/// `RES_CONTROL` commands (which apply to which type: docs/resources.md).
pub mod control {
    /// Any type: the type-specific size (bytes, pages, pid, mips).
    pub const INFO: u64 = 0;
    /// vspace: attach vregion `arg0` at address `arg1` (bit 0 of `arg1`: writable).
    pub const ATTACH: u64 = 1;
    /// vspace: detach whatever vregion is attached at address `arg0`.
    pub const DETACH: u64 = 2;
    /// process: end it (its parent sees `ENDED_KILLED`).
    pub const KILL: u64 = 3;
    /// compute: set the mips degree to `arg0`.
    pub const SET_MIPS: u64 = 4;
    /// sem: P (wait): take one unit, waiting until there is one.
    pub const SEM_P: u64 = 5;
    /// sem: V (signal): give one unit back, waking one waiter.
    pub const SEM_V: u64 = 6;
    /// pipe: process `arg1` (0: the caller) holds end `arg0` (`PIPE_READ_END` or
    /// `PIPE_WRITE_END`): the pipe reads EOF once no writer is held, a write fails `Gone`
    /// once no reader is.
    pub const PIPE_HOLD: u64 = 7;
    /// pipe: process `arg1` (0: the caller) no longer holds end `arg0`.
    pub const PIPE_DROP: u64 = 8;
    /// `PIPE_HOLD`/`PIPE_DROP`'s end: the reading one.
    pub const PIPE_READ_END: u64 = 0;
    /// `PIPE_HOLD`/`PIPE_DROP`'s end: the writing one.
    pub const PIPE_WRITE_END: u64 = 1;
    /// vregion (attached somewhere now, else `InvalidArgument`): the kernel closes it as
    /// soon as it is attached nowhere (its last mapping detached, the address space that
    /// held it gone, an ICA of it lost with its receiver), so it dies with the processes
    /// that map it instead of outliving its creator. Needs the close right.
    pub const CLOSE_WHEN_DETACHED: u64 = 9;
    /// sem: take one unit if there is one, else `Again` (never waits).
    pub const SEM_TRY: u64 = 10;
    /// pipe READ's and WRITE's `arg`: never wait; where the call would wait (nothing
    /// buffered with a writer held; no room), `Again`. A server that must not block on a
    /// pipe it serves for others uses it (`machd`'s pipes of another machine's programs).
    pub const PIPE_NOWAIT: u64 = 1;
}

/// Name of a call, for traces and error messages.
pub fn name(number: u64) -> &'static str {
    // Calls 0..=FN_TAKEOVER; the numbers given to later work are named below.
    const NAMES: [&str; DEV_IRQ_ACK as usize + 1] = [
        "exit",
        "wait",
        "spawn",
        "getpid",
        "core",
        "yield",
        "sleep",
        "clock",
        "console_write",
        "console_read",
        "memory",
        "processes",
        "cores",
        "kill",
        "poweroff",
        "res_open",
        "res_close",
        "res_read",
        "res_write",
        "res_control",
        "res_list",
        "res_info",
        "setuser",
        "getuser",
        "spawn_on",
        "migrate",
        "rpcc_stats",
        "modes",
        "trace",
        "submit",
        "collect",
        "call",
        "send",
        "recv",
        "reply",
        "thread_create",
        "thread_exit",
        "thread_join",
        "thread_self",
        "reply_recv",
        "enter",
        "ring_setup",
        "fn_register",
        "fn_lookup",
        "fn_unregister",
        "fn_list",
        "fn_state",
        "fn_takeover",
        "dev_list",
        "dev_claim",
        "dev_config",
        "dev_map_bar",
        "dma_alloc",
        "dma_free",
        "dev_irq",
        "dev_irq_ack",
    ];
    match number {
        REPLY_ERROR => "reply_error",
        FN_RESTART => "fn_restart",
        SPAWN_IMAGE => "spawn_image",
        MIGRATE_EXPORT => "migrate_export",
        MIGRATE_IMPORT => "migrate_import",
        MIGRATE_FINISH => "migrate_finish",
        n => NAMES.get(n as usize).copied().unwrap_or("unknown"),
    }
}

/// Encode a result into the (`rax`, `rdx`) pair the kernel returns.
pub fn encode(r: Result<u64, Error>) -> (u64, u64) {
    match r {
        Ok(v) => (0, v),
        Err(e) => (e as u64, 0),
    }
}

/// Decode the (`rax`, `rdx`) pair into a result. An unknown code is [`Error::Unknown`].
///
/// Inlined, with the error's lookup out of line: every system call's caller decodes, and
/// the success it nearly always gets costs a compare.
#[inline]
pub fn decode(rax: u64, rdx: u64) -> Result<u64, Error> {
    match rax {
        0 => Ok(rdx),
        code => Err(error_of(code)),
    }
}

#[cold]
#[inline(never)]
fn error_of(code: u64) -> Error {
    Error::from_code(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        assert_eq!(decode(encode(Ok(7)).0, encode(Ok(7)).1), Ok(7));
        for e in Error::ALL {
            let (a, d) = encode(Err(e));
            assert_ne!(a, 0);
            assert_eq!(decode(a, d), Err(e));
        }
        assert_eq!(decode(9999, 0), Err(Error::Unknown));
    }

    #[test]
    fn names() {
        assert_eq!(name(SPAWN), "spawn");
        assert_eq!(name(POWEROFF), "poweroff");
        assert_eq!(name(COUNT), "unknown");
    }
}
