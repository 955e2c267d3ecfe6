//! Typed wrappers for every Musubi system call (abi/src/syscall.rs); the resource calls
//! (`RES_OPEN`..`GETUSER`) are in [`crate::res`].
//!
//! Each wrapper returns `Result<_, abi::Error>`, decoded from the kernel's (`rax`, `rdx`)
//! pair with [`abi::syscall::decode`]. The raw entry points live in [`raw`], for programs
//! that test the kernel with arguments no safe wrapper would pass.

use abi::syscall as nr;
use abi::{CoreInfo, Error, Pid, Priority, ProcInfo, RpccInfo, WaitStatus};
use alloc::vec::Vec;

/// The `syscall` instruction with 0 to 6 arguments.
///
/// `rcx` and `r11` are clobbered by the instruction, `rax` and `rdx` carry the answer;
/// the kernel preserves everything else, including FPU/SSE state, and never touches the
/// user stack.
pub mod raw {
    use core::arch::asm;

    /// # Safety
    /// The call must not break memory safety (e.g. `EXIT` never returns).
    #[inline(always)]
    pub unsafe fn syscall0(n: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: the caller vouches for the call; the register contract is above.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, lateout("rdx") rdx,
                 out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall1(n: u64, a0: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the argument.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, lateout("rdx") rdx,
                 out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall2(n: u64, a0: u64, a1: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the arguments.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
                 lateout("rdx") rdx, out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall3(n: u64, a0: u64, a1: u64, a2: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the arguments.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
                 inlateout("rdx") a2 => rdx, out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall4(n: u64, a0: u64, a1: u64, a2: u64, a3: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the arguments.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
                 inlateout("rdx") a2 => rdx, in("r10") a3,
                 out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall5(n: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the arguments.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
                 inlateout("rdx") a2 => rdx, in("r10") a3, in("r8") a4,
                 out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }

    /// # Safety
    /// Any pointer argument must be valid for what the call does with it.
    #[inline(always)]
    pub unsafe fn syscall6(
        n: u64,
        a0: u64,
        a1: u64,
        a2: u64,
        a3: u64,
        a4: u64,
        a5: u64,
    ) -> (u64, u64) {
        let (rax, rdx);
        // SAFETY: as for `syscall0`; the caller vouches for the arguments.
        unsafe {
            asm!("syscall", inlateout("rax") n => rax, in("rdi") a0, in("rsi") a1,
                 inlateout("rdx") a2 => rdx, in("r10") a3, in("r8") a4, in("r9") a5,
                 out("rcx") _, out("r11") _, options(nostack));
        }
        (rax, rdx)
    }
}

pub(crate) fn decode((rax, rdx): (u64, u64)) -> Result<u64, Error> {
    nr::decode(rax, rdx)
}

/// End this program with `status` (seen by the parent's [`wait`]).
pub fn exit(status: i32) -> ! {
    // SAFETY: EXIT takes a number and does not return, which `noreturn` tells the compiler.
    unsafe {
        core::arch::asm!("syscall", in("rax") nr::EXIT, in("rdi") status as u32 as u64,
                         options(noreturn, nostack));
    }
}

/// Wait for a child to end: `Some(pid)` for that child, `None` for any child. Returns the
/// child's pid and how it ended.
pub fn wait(pid: Option<Pid>) -> Result<(Pid, WaitStatus), Error> {
    wait_timeout(pid, u64::MAX)
}

/// Like [`wait`], but give up after `ns` nanoseconds with [`Error::TimedOut`].
pub fn wait_timeout(pid: Option<Pid>, ns: u64) -> Result<(Pid, WaitStatus), Error> {
    let mut status = WaitStatus::default();
    let target = pid.map_or(0, |p| p.0);
    // SAFETY: the kernel writes one WaitStatus to a local that lives across the call.
    let child = decode(unsafe { raw::syscall3(nr::WAIT, target, &raw mut status as u64, ns) })?;
    Ok((Pid(child), status))
}

/// Start program `name` from the boot archive with arguments `args` (its `argv[1..]`) at
/// `priority`, on this core. An argument that contains a NUL byte is an
/// [`Error::InvalidArgument`].
pub fn spawn(name: &str, args: &[&str], priority: Priority) -> Result<Pid, Error> {
    spawn_call(name, args, priority, None)
}

/// Like [`spawn`], but the child starts and lives on core `core` (`SPAWN_ON`); it is still
/// this process's child ([`wait`], [`kill`] work as for a local one).
/// [`Error::NoSuchCore`] if that core does not exist or is not online.
pub fn spawn_on(name: &str, args: &[&str], priority: Priority, core: usize) -> Result<Pid, Error> {
    spawn_call(name, args, priority, Some(core))
}

/// Start the ELF executable `image` (e.g. a program read from the disk) as a child on this
/// core or on `core`, shown as `name`, with `args` (`SPAWN_IMAGE`; the image travels to
/// another core as a copy). [`Error::BadExecutable`] for an image that is not a valid
/// program, [`Error::TooLong`] above `abi::syscall::MAX_IMAGE` bytes,
/// [`Error::NoSuchCore`] for a core that does not exist or is not online.
pub fn spawn_image(
    image: &[u8],
    name: &str,
    args: &[&str],
    priority: Priority,
    core: Option<usize>,
) -> Result<Pid, Error> {
    let mut buf = Vec::new();
    for a in core::iter::once(&name).chain(args) {
        if a.as_bytes().contains(&0) {
            return Err(Error::InvalidArgument);
        }
        buf.extend_from_slice(a.as_bytes());
        buf.push(0);
    }
    // SAFETY: both buffers are valid for reading for the lengths given.
    decode(unsafe {
        raw::syscall6(
            nr::SPAWN_IMAGE,
            image.as_ptr() as u64,
            image.len() as u64,
            buf.as_ptr() as u64,
            buf.len() as u64,
            priority as u64,
            core.map_or(nr::SPAWN_IMAGE_HERE, |c| c as u64),
        )
    })
    .map(Pid)
}

/// `SPAWN` (`core` is `None`) or `SPAWN_ON`.
fn spawn_call(
    name: &str,
    args: &[&str],
    priority: Priority,
    core: Option<usize>,
) -> Result<Pid, Error> {
    // Arguments travel as one buffer of NUL-terminated strings. Short lists (the usual
    // case, and the spawn benchmark's) are packed on the stack, longer ones on the heap.
    let mut small = [0u8; 256];
    let mut large = Vec::new();
    let need: usize = args.iter().map(|a| a.len() + 1).sum();
    let buf: &mut [u8] = if need <= small.len() {
        &mut small[..need]
    } else {
        large.resize(need, 0);
        &mut large
    };
    let mut at = 0;
    for a in args {
        if a.as_bytes().contains(&0) {
            return Err(Error::InvalidArgument);
        }
        buf[at..at + a.len()].copy_from_slice(a.as_bytes());
        at += a.len() + 1;
    }
    let (name_ptr, name_len) = (name.as_ptr() as u64, name.len() as u64);
    let (args_ptr, args_len) = (buf.as_ptr() as u64, buf.len() as u64);
    let priority = priority as u64;
    // SAFETY: both buffers are valid for reading for the lengths given.
    let pid = decode(unsafe {
        match core {
            None => raw::syscall5(nr::SPAWN, name_ptr, name_len, args_ptr, args_len, priority),
            Some(core) => raw::syscall6(
                nr::SPAWN_ON,
                name_ptr,
                name_len,
                args_ptr,
                args_len,
                priority,
                core as u64,
            ),
        }
    })?;
    Ok(Pid(pid))
}

/// Move process `pid` (`None`: the caller) to core `core` (`MIGRATE`); returns its new pid,
/// which names `core`. Its parent's [`wait`] follows it to the new pid.
/// [`Error::NoSuchCore`] if that core does not exist or is not online.
pub fn migrate(pid: Option<Pid>, core: usize) -> Result<Pid, Error> {
    // SAFETY: MIGRATE takes numbers only.
    decode(unsafe { raw::syscall2(nr::MIGRATE, pid.map_or(0, |p| p.0), core as u64) }).map(Pid)
}

/// Stop process `pid` and write it out as an image into `buf` (`MIGRATE_EXPORT`, to move it
/// to another machine: `mach::migrate`); the image's length. It stays stopped until
/// [`migrate_finish`]. `TooLong` if `buf` is too small: its first 8 bytes then say how
/// long the image is (and the process runs on).
pub fn migrate_export(pid: Pid, buf: &mut [u8]) -> Result<usize, Error> {
    // SAFETY: the buffer is valid for writing for its length.
    decode(unsafe {
        raw::syscall3(
            nr::MIGRATE_EXPORT,
            pid.0,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
        )
    })
    .map(|n| n as usize)
}

/// Start the process of an image another machine wrote (`MIGRATE_IMPORT`) on `core`, as
/// this process's child; its pid.
pub fn migrate_import(image: &[u8], core: usize) -> Result<Pid, Error> {
    // SAFETY: the image is valid for reading for its length.
    decode(unsafe {
        raw::syscall3(
            nr::MIGRATE_IMPORT,
            image.as_ptr() as u64,
            image.len() as u64,
            core as u64,
        )
    })
    .map(Pid)
}

/// End the export of `pid` (`MIGRATE_FINISH`): it went to `machine` as `new` (it ends,
/// its status `ENDED_MOVED_AWAY`), or with `None` it did not (it runs on).
pub fn migrate_finish(pid: Pid, new: Option<(u8, Pid)>) -> Result<(), Error> {
    let (machine, new) = new.map_or((0, 0), |(m, p)| (u64::from(m), p.0));
    // SAFETY: MIGRATE_FINISH takes numbers only.
    decode(unsafe { raw::syscall3(nr::MIGRATE_FINISH, pid.0, new, machine) }).map(drop)
}

/// This process's id.
pub fn getpid() -> Result<Pid, Error> {
    // SAFETY: GETPID takes no arguments.
    decode(unsafe { raw::syscall0(nr::GETPID) }).map(Pid)
}

/// This process's CPU time so far (ns; `CPU_TIME`).
pub fn cpu_time_ns() -> Result<u64, Error> {
    // SAFETY: CPU_TIME takes no arguments.
    decode(unsafe { raw::syscall0(nr::CPU_TIME) })
}

/// Index of the core running this process.
pub fn core() -> Result<usize, Error> {
    // SAFETY: CORE takes no arguments.
    decode(unsafe { raw::syscall0(nr::CORE) }).map(|c| c as usize)
}

/// Let other ready processes on this core run.
pub fn yield_now() -> Result<(), Error> {
    // SAFETY: YIELD takes no arguments.
    decode(unsafe { raw::syscall0(nr::YIELD) }).map(drop)
}

/// Sleep for at least `ns` nanoseconds.
pub fn sleep_ns(ns: u64) -> Result<(), Error> {
    // SAFETY: SLEEP takes a number.
    decode(unsafe { raw::syscall1(nr::SLEEP, ns) }).map(drop)
}

/// Nanoseconds since boot.
pub fn clock_ns() -> Result<u64, Error> {
    // SAFETY: CLOCK takes no arguments.
    decode(unsafe { raw::syscall0(nr::CLOCK) })
}

/// Write bytes to the console; returns how many were written.
pub fn write(bytes: &[u8]) -> Result<usize, Error> {
    // SAFETY: `bytes` is valid for reading for its length.
    decode(unsafe { raw::syscall2(nr::CONSOLE_WRITE, bytes.as_ptr() as u64, bytes.len() as u64) })
        .map(|n| n as usize)
}

/// Read console input into `buf`; blocks until at least one byte arrived and returns how
/// many were read. The console's input belongs to core 0: a process on another core gets
/// [`Error::NotSupported`].
pub fn read(buf: &mut [u8]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing for its length.
    decode(unsafe {
        raw::syscall3(
            nr::CONSOLE_READ,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
            0,
        )
    })
    .map(|n| n as usize)
}

/// Console input waiting now, without blocking (0 if none).
pub fn read_nonblocking(buf: &mut [u8]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing for its length.
    decode(unsafe {
        raw::syscall3(
            nr::CONSOLE_READ,
            buf.as_mut_ptr() as u64,
            buf.len() as u64,
            nr::CONSOLE_NONBLOCK,
        )
    })
    .map(|n| n as usize)
}

/// Grow the heap by `bytes` (rounded up to pages by the kernel); returns the previous end
/// of the heap, which is where the new memory starts.
pub fn memory(bytes: usize) -> Result<usize, Error> {
    // SAFETY: MEMORY takes a number; it only adds mappings.
    decode(unsafe { raw::syscall1(nr::MEMORY, bytes as u64) }).map(|a| a as usize)
}

/// Fill `buf` with one record per process of every core; returns how many were written.
pub fn processes(buf: &mut [ProcInfo]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    decode(unsafe { raw::syscall2(nr::PROCESSES, buf.as_mut_ptr() as u64, buf.len() as u64) })
        .map(|n| n as usize)
}

/// Every core's process records, the whole list: asked for with room for 2,048 and, while
/// the kernel fills all the room there is (the list may be cut short), again with twice the
/// room, up to [`PROCESSES_ROOM_MAX`]; past that `Limit`. (A fixed 2,048 could be filled by
/// one user's zombies, 2,048 per core, and then no server could tell who had ended.)
fn all_processes() -> Result<Vec<ProcInfo>, Error> {
    let mut room = 2048;
    while room <= PROCESSES_ROOM_MAX {
        let mut buf = alloc::vec![ProcInfo::EMPTY; room];
        let n = processes(&mut buf)?;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        room *= 2;
    }
    Err(Error::Limit)
}

/// Most records [`all_processes`] makes room for (16,384, about 2 MiB of records).
const PROCESSES_ROOM_MAX: usize = 16_384;

/// The pids of every core's processes that have not ended, or `None` when the kernel's
/// list cannot be had whole (an error, or more than [`PROCESSES_ROOM_MAX`] records): for a
/// server that frees what ended programs held, which must never take a live one for ended
/// (reviews found an empty list on an error freed everyone's ports in `netd`, and dropped
/// every held wait in `kv`).
pub fn live_pids() -> Option<Vec<Pid>> {
    let all = all_processes().ok()?;
    Some(
        all.iter()
            .filter(|p| p.state != abi::STATE_ZOMBIE)
            .map(|p| p.pid)
            .collect(),
    )
}

/// The processes of every core that have not ended (zombies left out), or an error when
/// the list cannot be had whole (`Limit`: more than [`PROCESSES_ROOM_MAX`] records): a
/// live process missing from a cut list would be taken for ended (a review found `machd`
/// closing a live program's remote files and output when one user's 1,024 zombies filled
/// the list of 1,024 this asked for).
pub fn live_processes() -> Result<Vec<ProcInfo>, Error> {
    let mut all = all_processes()?;
    all.retain(|p| p.state != abi::STATE_ZOMBIE);
    Ok(all)
}

/// The timed waits of the core this program runs on that a timer programmed for their
/// deadline ended (`CoreInfo::deadline_wakes`): the event tests judge a deadline by, not
/// how late it ended (a busy host stretches that). `NoSuchCore` if CORES has no record
/// of this core.
pub fn deadline_wakes() -> Result<u64, Error> {
    this_core().map(|c| c.deadline_wakes)
}

/// The timed waits of this core ended by a later tick than their deadline
/// (`CoreInfo::late_wakes`): their timer was not armed for them.
pub fn late_wakes() -> Result<u64, Error> {
    this_core().map(|c| c.late_wakes)
}

/// This core's count of threads woken in the request path (`CoreInfo::ipc_wakes`).
pub fn ipc_wakes() -> Result<u64, Error> {
    this_core().map(|c| c.ipc_wakes)
}

/// The record `CORES` gives of the core this thread runs on.
pub fn this_core() -> Result<CoreInfo, Error> {
    let here = core()?;
    let mut buf = [CoreInfo::default(); abi::MAX_CORES];
    let n = cores(&mut buf)?;
    buf[..n]
        .iter()
        .find(|c| c.core as usize == here)
        .copied()
        .ok_or(Error::NoSuchCore)
}

/// Fill `buf` with one record per core; returns how many were written.
pub fn cores(buf: &mut [CoreInfo]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    decode(unsafe { raw::syscall2(nr::CORES, buf.as_mut_ptr() as u64, buf.len() as u64) })
        .map(|n| n as usize)
}

/// End process `pid` (on any core).
pub fn kill(pid: Pid) -> Result<(), Error> {
    // SAFETY: KILL takes a number.
    decode(unsafe { raw::syscall1(nr::KILL, pid.0) }).map(drop)
}

/// Power the machine off. Returns only if the kernel refused, with the reason.
pub fn poweroff() -> Error {
    // SAFETY: POWEROFF takes no arguments.
    match decode(unsafe { raw::syscall0(nr::POWEROFF) }) {
        Ok(_) => Error::Unknown,
        Err(e) => e,
    }
}

/// Fill `buf` with one record of inter-core RPCC counters per core; returns how many were
/// written.
pub fn rpcc_stats_into(buf: &mut [RpccInfo]) -> Result<usize, Error> {
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    decode(unsafe { raw::syscall2(nr::RPCC_STATS, buf.as_mut_ptr() as u64, buf.len() as u64) })
        .map(|n| n as usize)
}

/// Every core's inter-core RPCC counters (`RPCC_STATS`), one record per core.
pub fn rpcc_stats() -> Result<Vec<RpccInfo>, Error> {
    let mut buf = alloc::vec![RpccInfo::EMPTY; abi::MAX_CORES];
    let n = rpcc_stats_into(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Every core's time per CPU mode (`MODES`), one record per core.
pub fn modes() -> Result<Vec<abi::ModeInfo>, Error> {
    let mut buf = alloc::vec![abi::ModeInfo::default(); abi::MAX_CORES];
    // SAFETY: `buf` is valid for writing `buf.len()` records.
    let n = decode(unsafe { raw::syscall2(nr::MODES, buf.as_mut_ptr() as u64, buf.len() as u64) })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// `TRACE(command)`: dump, clear or count the kernel's trace events (`NotSupported` unless
/// booted with `trace=on`).
pub fn trace(command: u64) -> Result<u64, Error> {
    // SAFETY: no pointer arguments.
    decode(unsafe { raw::syscall1(nr::TRACE, command) })
}
