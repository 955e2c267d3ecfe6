//! Plain data shared by kernel and user space: errors, process ids, priorities, and the
//! records that `WAIT`, `PROCESSES` and `CORES` fill in.
//!
//! Every record that crosses user memory derives `bytemuck::Pod`: integers only, `repr(C)`,
//! no padding (the derive refuses to compile otherwise), so any bytes are a valid value and
//! the kernel can read one from untrusted memory without `unsafe`. A field that means a
//! flag or a choice is an integer with named values (`ENDED_*`, `STATE_*`), never a `bool`
//! or an enum.

use bytemuck::{Pod, Zeroable};

/// Why a system call failed. The numbers are the ABI; 0 is success and never an error.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The call number is not defined.
    NoSuchCall = 1,
    /// An argument is out of range or malformed.
    InvalidArgument = 2,
    /// A pointer argument is not mapped in the caller's address space with the access the
    /// call needs.
    BadAddress = 3,
    /// No process with that id (or no child to wait for).
    NoSuchProcess = 4,
    /// No program with that name in the boot archive.
    NoSuchProgram = 5,
    /// The program is not a valid executable for Musubi.
    BadExecutable = 6,
    /// Out of memory (the core's pool is exhausted or a limit was reached).
    NoMemory = 7,
    // 8 was `NotLocal` (a resource on another core) until inter-core RPCC made every
    // operation work on any core; the number stays unused.
    /// The caller may not do this.
    Denied = 9,
    /// A name or buffer is too long.
    TooLong = 10,
    /// An error code this build does not know.
    Unknown = 11,
    /// A resource name is malformed (see `res::ResName`).
    BadName = 12,
    /// No resource with that identifier (never was, or a forged id).
    NoSuchResource = 13,
    /// The identifier names a resource that was closed.
    StaleResource = 14,
    /// The resource is not of the type the operation needs.
    WrongType = 15,
    /// The operation has no meaning for this type of resource.
    NotSupported = 16,
    /// The resource is in use (e.g. a vregion still attached).
    Busy = 17,
    /// A resource with that name already exists on that core.
    AlreadyExists = 18,
    /// A wait ended before what it waited for happened.
    TimedOut = 19,
    /// No such core, or it is not online.
    NoSuchCore = 20,
    /// The target of a request went away (its process ended, its endpoint was closed)
    /// before answering.
    Gone = 21,
    /// A limit of this user or process was reached (children not yet waited for,
    /// processes, resources or memory on a core; see docs/resources.md "Limits").
    Limit = 22,
    /// The server is being replaced and gave the request back unanswered: send it again
    /// (it reaches the new server). Client libraries re-issue it themselves.
    Again = 23,
}

impl Error {
    pub const ALL: [Error; 22] = [
        Error::NoSuchCall,
        Error::InvalidArgument,
        Error::BadAddress,
        Error::NoSuchProcess,
        Error::NoSuchProgram,
        Error::BadExecutable,
        Error::NoMemory,
        Error::Denied,
        Error::TooLong,
        Error::Unknown,
        Error::BadName,
        Error::NoSuchResource,
        Error::StaleResource,
        Error::WrongType,
        Error::NotSupported,
        Error::Busy,
        Error::AlreadyExists,
        Error::TimedOut,
        Error::NoSuchCore,
        Error::Gone,
        Error::Limit,
        Error::Again,
    ];

    pub fn from_code(code: u64) -> Error {
        Error::ALL
            .iter()
            .copied()
            .find(|e| *e as u64 == code)
            .unwrap_or(Error::Unknown)
    }

    pub fn message(self) -> &'static str {
        match self {
            Error::NoSuchCall => "no such system call",
            Error::InvalidArgument => "invalid argument",
            Error::BadAddress => "bad address",
            Error::NoSuchProcess => "no such process",
            Error::NoSuchProgram => "no such program",
            Error::BadExecutable => "not a valid executable",
            Error::NoMemory => "out of memory",
            Error::Denied => "permission denied",
            Error::TooLong => "too long",
            Error::Unknown => "unknown error",
            Error::BadName => "malformed resource name",
            Error::NoSuchResource => "no such resource",
            Error::StaleResource => "stale resource id (it was closed)",
            Error::WrongType => "wrong type of resource",
            Error::NotSupported => "operation not supported by this type",
            Error::Busy => "resource busy",
            Error::AlreadyExists => "a resource with that name exists",
            Error::TimedOut => "timed out",
            Error::NoSuchCore => "no such core (or it is not online)",
            Error::Gone => "the target went away before answering",
            Error::Limit => "a limit of this user or process was reached",
            Error::Again => "the server is being replaced: send the request again",
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.message())
    }
}

/// A process id: the machine and core that created the process and a serial number on
/// that core, so ids are unique system-wide without any shared counter. Written
/// `core.serial` on machine 0 (e.g. `0.7`, the spelling of a single machine) and
/// `mMACHINE.cCORE.SERIAL` on the others (e.g. `m1.c2.5`, issue 17): a pid names one
/// process of the whole system, and a kernel refuses another machine's (`NoSuchProcess`)
/// rather than take it for one of its own that has the same core and serial.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable)]
#[repr(transparent)]
pub struct Pid(pub u64);

impl Pid {
    const CORE_SHIFT: u32 = 32;
    const CORE_MASK: u64 = 0xff;
    /// The machine's 4 bits, where a `ResId` keeps its machine too.
    const MACHINE_SHIFT: u32 = 60;

    /// Process `serial` of `core` of machine 0.
    pub const fn new(core: usize, serial: u32) -> Pid {
        Pid::on(0, core, serial)
    }
    /// Process `serial` of `core` of machine `machine` (below 16).
    pub const fn on(machine: u8, core: usize, serial: u32) -> Pid {
        Pid((((machine & 0xf) as u64) << Self::MACHINE_SHIFT)
            | (((core as u64) & Self::CORE_MASK) << Self::CORE_SHIFT)
            | serial as u64)
    }
    pub const fn machine(self) -> u8 {
        (self.0 >> Self::MACHINE_SHIFT) as u8
    }
    pub const fn core(self) -> usize {
        ((self.0 >> Self::CORE_SHIFT) & Self::CORE_MASK) as usize
    }
    pub const fn serial(self) -> u32 {
        self.0 as u32
    }
    /// The same process id on machine `machine`.
    pub const fn with_machine(self, machine: u8) -> Pid {
        Pid::on(machine, self.core(), self.serial())
    }

    /// Is this the one value `Pid::on` gives for its machine, core and serial (no other
    /// bits set, a core below `MAX_CORES`)?
    pub const fn is_canonical(self) -> bool {
        self.0 == Pid::on(self.machine(), self.core(), self.serial()).0
            && self.core() < crate::MAX_CORES
    }

    /// `core.serial` without the machine, as resource names spell a process of the
    /// machine that opens them (`here/vregion/p0.7-kvc`; names are a machine's own).
    pub const fn in_machine(self) -> InMachine {
        InMachine(self)
    }

    /// Parse `core.serial` (machine 0) or `mMACHINE.cCORE.SERIAL`, as `Display` writes
    /// them.
    pub fn parse(s: &str) -> Option<Pid> {
        // Without a well-formed `mM.c`, a leading `m` fails as a core number below.
        let (machine, s) = strip_machine(s, ".c").unwrap_or((0, s));
        let (c, n) = s.split_once('.')?;
        let core: usize = c.parse().ok()?;
        let serial: u32 = n.parse().ok()?;
        (core < crate::MAX_CORES && serial > 0).then_some(Pid::on(machine, core, serial))
    }
}

/// `s` without a leading `mMACHINE` and `sep` (`m1.c2.5`, `m1:2.5`): the machine (digits
/// only, below 16) and the rest; `None` if `s` does not start so.
pub fn strip_machine<'a>(s: &'a str, sep: &str) -> Option<(u8, &'a str)> {
    let (m, rest) = s.strip_prefix('m')?.split_once(sep)?;
    if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((m.parse().ok().filter(|m| *m < 16)?, rest))
}

/// A pid written without its machine ([`Pid::in_machine`]).
#[derive(Clone, Copy, Debug)]
pub struct InMachine(Pid);

impl core::fmt::Display for InMachine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.0.core(), self.0.serial())
    }
}

impl core::fmt::Display for Pid {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.machine() {
            0 => write!(f, "{}.{}", self.core(), self.serial()),
            m => write!(f, "m{m}.c{}.{}", self.core(), self.serial()),
        }
    }
}

/// Scheduling priority: a lower number runs first (AnT's order: driver processes, then OS
/// servers, then applications), and below them work that may use only what is left: a
/// replacement server preparing itself while the old one serves (`FN_TAKEOVER` gives it the
/// old server's priority; a background thread passed over for 10 ticks is raised to
/// application priority).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Priority {
    Driver = 0,
    Server = 1,
    App = 2,
    Background = 3,
}

impl Priority {
    pub const LEVELS: usize = 4;

    pub fn from_u64(v: u64) -> Option<Priority> {
        match v {
            0 => Some(Priority::Driver),
            1 => Some(Priority::Server),
            2 => Some(Priority::App),
            3 => Some(Priority::Background),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Priority::Driver => "driver",
            Priority::Server => "server",
            Priority::App => "app",
            Priority::Background => "background",
        }
    }

    /// Parse a name (`driver`, `server`, `app`, `background`) or a number (0 to 3).
    pub fn parse(s: &str) -> Option<Priority> {
        match s {
            "driver" => Some(Priority::Driver),
            "server" => Some(Priority::Server),
            "app" => Some(Priority::App),
            "background" => Some(Priority::Background),
            _ => s.parse().ok().and_then(Priority::from_u64),
        }
    }
}

/// How a child ended, as `WAIT` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct WaitStatus {
    /// One of the `ENDED_*` values.
    pub how: u64,
    /// Exit status (`ENDED_EXIT`), exception vector (`ENDED_FAULT`), or 0.
    pub code: u64,
    /// Faulting address for page faults, else 0.
    pub address: u64,
    /// Instruction pointer of a fault, else 0.
    pub rip: u64,
}

pub const ENDED_EXIT: u64 = 0;
pub const ENDED_FAULT: u64 = 1;
pub const ENDED_KILLED: u64 = 2;
/// The process moved to another core (`MIGRATE`); `code` is its new pid. `WAIT` never
/// reports it (the kernel follows the process to its new pid); a process resource's record
/// may, and so does the old core's answer to a parent's core that asks for the status
/// before it heard of the move.
pub const ENDED_MIGRATED: u64 = 3;
/// The process moved to another machine (`MIGRATE_FINISH`): `code` is its pid there,
/// `address` the machine. `WAIT` reports it: the kernel cannot follow it there.
pub const ENDED_MOVED_AWAY: u64 = 4;

/// Process states as `PROCESSES` reports them.
pub const STATE_RUNNING: u32 = 0;
pub const STATE_READY: u32 = 1;
pub const STATE_BLOCKED: u32 = 2;
pub const STATE_ZOMBIE: u32 = 3;
pub const STATE_STOPPED: u32 = 4;

pub fn state_name(state: u32) -> &'static str {
    match state {
        STATE_RUNNING => "running",
        STATE_READY => "ready",
        STATE_BLOCKED => "blocked",
        STATE_ZOMBIE => "zombie",
        STATE_STOPPED => "stopped",
        _ => "?",
    }
}

/// Length of the program-name field in [`ProcInfo`].
pub const NAME_LEN: usize = 24;

/// One process, as `PROCESSES` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct ProcInfo {
    pub pid: Pid,
    pub parent: Pid,
    pub core: u32,
    pub state: u32,
    pub priority: u32,
    pub name_len: u32,
    pub name: [u8; NAME_LEN],
    /// CPU time consumed, in nanoseconds.
    pub cpu_ns: u64,
    /// Bytes of user memory mapped.
    pub memory: u64,
    /// Time spent in each CPU mode while this process was the one on its core, ns
    /// (indexed by the `MODE_*` values; Lock and Interrupt time is charged to the process
    /// that was running).
    pub mode_ns: [u64; MODE_COUNT],
}

impl ProcInfo {
    pub const EMPTY: ProcInfo = ProcInfo {
        pid: Pid(0),
        parent: Pid(0),
        core: 0,
        state: 0,
        priority: 0,
        name_len: 0,
        name: [0; NAME_LEN],
        cpu_ns: 0,
        memory: 0,
        mode_ns: [0; MODE_COUNT],
    };

    pub fn name(&self) -> &str {
        let n = (self.name_len as usize).min(NAME_LEN);
        core::str::from_utf8(&self.name[..n]).unwrap_or("?")
    }
}

/// One core, as `CORES` reports it (from counters that core publishes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct CoreInfo {
    pub core: u32,
    pub online: u32,
    pub frames_total: u64,
    pub frames_free: u64,
    pub heap_bytes: u64,
    /// Timer ticks taken, and how many of them found the core idle.
    pub ticks: u64,
    pub idle_ticks: u64,
    /// Processes that live on the core.
    pub processes: u64,
    pub ipis: u64,
    /// Frames of the pool that programs may not take (the kernel's reserve): programs can
    /// have at most `frames_free - frames_reserved` more.
    pub frames_reserved: u64,
    /// Timed waits ended by a timer interrupt programmed for no later than their deadline
    /// (by their own deadline, not by a later tick), however late the interrupt came.
    pub deadline_wakes: u64,
    /// Rendezvous messages between processes served on this core (P0's IPC count: a
    /// request taken by `RECV`, an answer given by `REPLY`), indexed by the `IPC_*` values.
    pub ipc_messages: [u64; IPC_COUNTERS],
    /// Address-space switches (CR3 writes; each flushes the core's TLB).
    pub vspace_switches: u64,
    /// Threads woken in the request path (`COLLECT`, `CALL`, `RECV` and their kin) by a
    /// result, a request or a retirement's notice: each is a switch to the thread.
    pub ipc_wakes: u64,
    /// Timed waits ended by a timer interrupt programmed for later than their deadline (a
    /// later tick: their own timer was not armed).
    pub late_wakes: u64,
}

/// `CoreInfo::ipc_messages`: requests taken by a server of the core (one-way sends too).
pub const IPC_REQUESTS: usize = 0;
/// ... of them sent from another core.
pub const IPC_REQUESTS_CROSS: usize = 1;
/// Answers given by a server of the core (`REPLY`, `REPLY_RECV`, `REPLY_ERROR`).
pub const IPC_REPLIES: usize = 2;
/// ... of them to a caller on another core.
pub const IPC_REPLIES_CROSS: usize = 3;
/// ... of those cross-core answers, the ones that carry no reply data (the return value
/// alone: no message word other than 0, and no ICA the server could write in; one lent
/// read-only, `ipc::MSG_ICA_READ_ONLY`, only comes back), which P0's Table 4 could send
/// without a rendezvous.
pub const IPC_REPLIES_CROSS_BARE: usize = 4;
pub const IPC_COUNTERS: usize = 5;

/// CPU modes (P2, Limited Symmetry section 2.1): where a core's time goes.
pub const MODE_USER: usize = 0;
pub const MODE_KERNEL: usize = 1;
/// Waiting for the big kernel lock (`kernel=biglock`).
pub const MODE_LOCK: usize = 2;
pub const MODE_IDLE: usize = 3;
/// Handling a device interrupt, the tick or an IPI.
pub const MODE_INTERRUPT: usize = 4;
pub const MODE_COUNT: usize = 5;
pub const MODE_NAMES: [&str; MODE_COUNT] = ["user", "kernel", "lock", "idle", "interrupt"];

/// One core's time per CPU mode, as `MODES` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ModeInfo {
    pub core: u32,
    /// 1 if the kernel runs in big-lock mode (`kernel=biglock`), else 0.
    pub biglock: u32,
    /// Nanoseconds in each mode since boot, indexed by the `MODE_*` values.
    pub ns: [u64; MODE_COUNT],
}

/// How RPCC tells a core that a message waits in its ring (boot option `rpcc.notify=`).
pub const RPCC_NOTIFY_IPI: u32 = 0;
pub const RPCC_NOTIFY_POLL: u32 = 1;
pub const RPCC_NOTIFY_HYBRID: u32 = 2;

/// `rpcc.wait=switch`: a thread waiting for a remote answer blocks (the core switches).
pub const RPCC_WAIT_SWITCH: u32 = 0;
/// `rpcc.wait=halt`: it halts in place while nothing else is ready on its core.
pub const RPCC_WAIT_HALT: u32 = 1;

pub fn rpcc_wait_name(mode: u32) -> &'static str {
    match mode {
        RPCC_WAIT_SWITCH => "switch",
        RPCC_WAIT_HALT => "halt",
        _ => "?",
    }
}

pub fn rpcc_notify_name(mode: u32) -> &'static str {
    match mode {
        RPCC_NOTIFY_IPI => "ipi",
        RPCC_NOTIFY_POLL => "poll",
        RPCC_NOTIFY_HYBRID => "hybrid",
        _ => "?",
    }
}

/// One core's inter-core RPCC counters, as `RPCC_STATS` reports them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RpccInfo {
    pub core: u32,
    /// One of the `RPCC_NOTIFY_*` values (the same on every core).
    pub notify: u32,
    /// Requests an agent performs before it is destroyed (`rpcc.agents=`); 0: unlimited.
    pub agent_limit: u32,
    /// Agents that exist now on this core (working or kept asleep for reuse).
    pub agents_live: u32,
    /// 1 with `rpcc.agents=inline` (the daemon performs short requests itself), else 0.
    pub agents_inline: u32,
    /// One of the `RPCC_WAIT_*` values (the same on every core).
    pub wait: u32,
    pub agents_created: u64,
    pub agents_destroyed: u64,
    /// Requests performed by an agent that had performed one before (a reused agent).
    pub reuse_hits: u64,
    /// Requests this core's agents performed (in big-lock mode: operations on this core's
    /// tables that other cores performed directly, holding the lock).
    pub served: u64,
    /// Messages that found their ring full and waited (back-pressure; none is dropped).
    pub ring_full: u64,
    /// Notification IPIs this core sent.
    pub ipis_sent: u64,
    /// Requests this core is waiting for now.
    pub outstanding: u64,
    /// Messages (requests, replies and notices) this core sent to each core (in big-lock
    /// mode: the operations it performed directly on each core's tables).
    pub sent_to: [u64; crate::MAX_CORES],
    /// Requests the daemon performed itself (`rpcc.agents=inline`; counted in `served`).
    pub inline_served: u64,
    /// Waits for a remote answer that halted in place (`rpcc.wait=halt`).
    pub halted_waits: u64,
}

impl RpccInfo {
    pub const EMPTY: RpccInfo = RpccInfo {
        core: 0,
        notify: 0,
        agent_limit: 0,
        agents_live: 0,
        agents_inline: 0,
        wait: 0,
        agents_created: 0,
        agents_destroyed: 0,
        reuse_hits: 0,
        served: 0,
        ring_full: 0,
        ipis_sent: 0,
        outstanding: 0,
        sent_to: [0; crate::MAX_CORES],
        inline_served: 0,
        halted_waits: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids() {
        let p = Pid::new(3, 17);
        assert_eq!((p.core(), p.serial()), (3, 17));
        assert_eq!(p.to_string(), "3.17");
        assert_eq!(Pid::parse("3.17"), Some(p));
        for bad in ["", "3", "3.", ".1", "x.1", "3.0", "64.1", "1.2.3", "-1.2"] {
            assert_eq!(Pid::parse(bad), None, "{bad}");
        }
        // Another machine's: its own spelling, the same core and serial, a different id.
        let q = Pid::on(2, 3, 17);
        assert_eq!((q.machine(), q.core(), q.serial()), (2, 3, 17));
        assert_eq!(q.to_string(), "m2.c3.17");
        assert_eq!(Pid::parse("m2.c3.17"), Some(q));
        assert_ne!(q, p);
        assert_eq!(q.with_machine(0), p);
        assert_eq!(q.in_machine().to_string(), "3.17");
        assert!(p.is_canonical() && q.is_canonical());
        assert!(
            !Pid(p.0 | 1 << 40).is_canonical(),
            "junk between core and machine"
        );
        assert!(!Pid::new(64, 1).is_canonical(), "core 64");
        assert_eq!(p.machine(), 0);
        assert_eq!(Pid::on(15, 63, u32::MAX).to_string(), "m15.c63.4294967295");
        for bad in [
            "m2.3.17",
            "m.c3.17",
            "m16.c3.17",
            "m2.c3",
            "m2.c64.1",
            "m-1.c3.1",
            "mx.c3.1",
            "m2c3.17",
        ] {
            assert_eq!(Pid::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn priorities() {
        assert_eq!(Priority::parse("server"), Some(Priority::Server));
        assert_eq!(Priority::parse("0"), Some(Priority::Driver));
        assert_eq!(Priority::parse("3"), Some(Priority::Background));
        assert_eq!(Priority::parse("background"), Some(Priority::Background));
        assert_eq!(Priority::parse("4"), None);
        assert!(Priority::Driver < Priority::App);
        assert!(Priority::App < Priority::Background);
        for l in 0..Priority::LEVELS as u64 {
            assert_eq!(Priority::from_u64(l).map(|p| p as u64), Some(l));
        }
        assert_eq!(Priority::from_u64(Priority::LEVELS as u64), None);
    }

    #[test]
    fn errors_have_distinct_codes() {
        for (i, a) in Error::ALL.iter().enumerate() {
            for b in &Error::ALL[i + 1..] {
                assert_ne!(*a as u64, *b as u64);
            }
            assert_eq!(Error::from_code(*a as u64), *a);
        }
    }
}
