//! Resources (Tender's 資源): identifiers, names, types and rights.
//!
//! Everything the kernel controls is a *resource* of some *type*, managed by the core it
//! lives on, and reached through five operations: open (create, by name), close, read,
//! write, control (by identifier). See docs/resources.md for what each operation means for
//! each type.
//!
//! **Names** are `LOCATION/TYPE/NAME`:
//!
//! | name | means |
//! |---|---|
//! | `here/vregion/buf0` | a virtual region called `buf0` on the caller's core |
//! | `c1/vregion/buf0` | the same on core 1 |
//! | `here/process/hello` | a process running program `hello`, on the caller's core |
//! | `c0/compute/cpu` | a CPU allotment on core 0 |
//!
//! LOCATION is `here` or `cN` (core N, 0..=63); TYPE is one of [`ResType`]'s names; NAME is
//! 1 to [`MAX_NAME`] characters from `A-Z a-z 0-9 _ . -`. Anything else is refused by
//! [`ResName::parse`] with a [`NameError`] that says which part is wrong.
//!
//! **Identifiers** ([`ResId`]) pack machine, core, type, a table slot and the slot's
//! *generation* into 64 bits. Closing a resource bumps its slot's generation, so an id that
//! was closed never names a later resource in the same slot: using it is a clear
//! `StaleResource` error.
//!
//! **Rights** (Tender's RCC): for the creating user and for everyone else, each of read,
//! write, close and control is allowed or not ([`Rights`]). [`Rights::allows`] is the one
//! check every operation goes through.

use bytemuck::{Pod, Zeroable};

/// Longest NAME part of a resource name.
pub const MAX_NAME: usize = 32;
/// Longest whole resource name.
pub const MAX_RES_NAME: usize = 64;

/// Most vregions attached to one address space (its ICA window included).
pub const MAX_ATTACHMENTS: usize = 64;

/// Kinds of resource.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResType {
    /// Memory from the owning core's pool.
    VRegion = 1,
    /// An address space; vregions are attached to it.
    VSpace = 2,
    /// A process (created stopped; a compute runs it).
    Process = 3,
    /// A CPU allotment (Tender's 演算): binding it to a process runs the process.
    Compute = 4,
    /// Where a process receives requests (`RECV`); others `CALL`, `SEND` or `SUBMIT` to it.
    Endpoint = 5,
    /// A counting semaphore (open with its count; control `SEM_P` and `SEM_V`).
    Sem = 6,
    /// A PCI function, made by the kernel at boot (`crate::dev`): what a driver holds.
    Device = 7,
    /// A bounded byte pipe between processes of any cores (write `bytes`, read them in
    /// order; control `PIPE_HOLD`/`PIPE_DROP` say who holds each end).
    Pipe = 8,
}

impl ResType {
    pub const ALL: [ResType; 8] = [
        ResType::VRegion,
        ResType::VSpace,
        ResType::Process,
        ResType::Compute,
        ResType::Endpoint,
        ResType::Sem,
        ResType::Device,
        ResType::Pipe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ResType::VRegion => "vregion",
            ResType::VSpace => "vspace",
            ResType::Process => "process",
            ResType::Compute => "compute",
            ResType::Endpoint => "endpoint",
            ResType::Sem => "sem",
            ResType::Device => "device",
            ResType::Pipe => "pipe",
        }
    }

    pub fn from_name(s: &str) -> Option<ResType> {
        ResType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The type numbered `v` (a match, not a search of [`ResType::ALL`]: the rendezvous fast
    /// path asks this on every call).
    #[inline]
    pub fn from_u8(v: u8) -> Option<ResType> {
        Some(match v {
            1 => ResType::VRegion,
            2 => ResType::VSpace,
            3 => ResType::Process,
            4 => ResType::Compute,
            5 => ResType::Endpoint,
            6 => ResType::Sem,
            7 => ResType::Device,
            8 => ResType::Pipe,
            _ => return None,
        })
    }
}

/// The process a resource name is reserved for, if any: a NAME that is `pC.S` or begins
/// `pC.S-` (`p0.57-kvc`) is process C.S's own. Only that process (and the kernel) may
/// open a resource under it (`Denied` for anyone else), so a name alone tells a server
/// that a resource is its sender's own (`kv`'s client data areas), and no program can take
/// a name another process has yet to open (a name is first come, first served). Names
/// are a machine's own (`c1/pipe/p` is core 1 of the machine that opens it), so `pC.S` is
/// process C.S *of that machine*, spelled without its machine on every machine; the pid
/// returned is machine 0's, and a kernel puts its own machine in it.
pub fn reserved_for(name: &str) -> Option<crate::Pid> {
    let rest = name.strip_prefix('p')?;
    let pid = rest.split_once('-').map_or(rest, |(pid, _)| pid);
    // One spelling per pid, as `Pid`'s `Display` writes it: digits only (`Pid::parse`
    // takes `+1` too) and no leading zero (`p0.057` is not `p0.57`), as `ResName::parse`
    // refuses `c01`.
    let canonical = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_digit())
            && (part == "0" || !part.starts_with('0'))
    };
    let (core, serial) = pid.split_once('.')?;
    if !canonical(core) || !canonical(serial) {
        return None;
    }
    crate::Pid::parse(pid)
}

/// Where a name says a resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// The caller's core.
    Here,
    /// Core N of this machine.
    Core(usize),
}

/// A parsed resource name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResName<'a> {
    pub location: Location,
    pub kind: ResType,
    pub name: &'a str,
}

/// What is wrong with a resource name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameError {
    /// Not three `/`-separated parts, or a part is empty.
    Shape,
    /// LOCATION is not `here` or `c0`..`c63`.
    Location,
    /// TYPE is not a known type.
    Type,
    /// NAME is longer than [`MAX_NAME`] or the whole name longer than [`MAX_RES_NAME`].
    TooLong,
    /// NAME has a character outside `A-Z a-z 0-9 _ . -`.
    Character,
}

impl core::fmt::Display for NameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            NameError::Shape => "a resource name is LOCATION/TYPE/NAME with no empty part",
            NameError::Location => "LOCATION must be 'here' or cN with N from 0 to 63",
            NameError::Type => "TYPE must be vregion, vspace, process or compute",
            NameError::TooLong => "the name is too long",
            NameError::Character => "NAME may use only A-Z a-z 0-9 _ . -",
        })
    }
}

impl<'a> ResName<'a> {
    /// Parse `LOCATION/TYPE/NAME` strictly.
    pub fn parse(s: &'a str) -> Result<ResName<'a>, NameError> {
        if s.len() > MAX_RES_NAME {
            return Err(NameError::TooLong);
        }
        let mut parts = s.split('/');
        let (Some(loc), Some(kind), Some(name), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(NameError::Shape);
        };
        if loc.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(NameError::Shape);
        }
        let location = match loc {
            "here" => Location::Here,
            _ => {
                let digits = loc.strip_prefix('c').ok_or(NameError::Location)?;
                let ok = !digits.is_empty()
                    && digits.len() <= 2
                    && digits.bytes().all(|b| b.is_ascii_digit());
                let n: usize = digits
                    .parse()
                    .ok()
                    .filter(|_| ok)
                    .ok_or(NameError::Location)?;
                if n >= crate::MAX_CORES || (digits.len() > 1 && digits.starts_with('0')) {
                    return Err(NameError::Location);
                }
                Location::Core(n)
            }
        };
        let kind = ResType::from_name(kind).ok_or(NameError::Type)?;
        if name.len() > MAX_NAME {
            return Err(NameError::TooLong);
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        {
            return Err(NameError::Character);
        }
        Ok(ResName {
            location,
            kind,
            name,
        })
    }

    /// The core this name designates, for a caller on `here`.
    pub fn core(&self, here: usize) -> usize {
        match self.location {
            Location::Here => here,
            Location::Core(c) => c,
        }
    }
}

/// A resource identifier: machine (4 bits), core (6), type (4), generation (30), slot (20).
/// Each machine's kernel puts its own machine in the ids it makes and refuses another's
/// (`NoSuchResource`), so an id names one resource of the whole system (issue 17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable)]
#[repr(transparent)]
pub struct ResId(pub u64);

impl ResId {
    pub const SLOT_BITS: u32 = 20;
    pub const GENERATION_BITS: u32 = 30;
    pub const MAX_SLOTS: u32 = 1 << Self::SLOT_BITS;
    pub const GENERATION_MASK: u32 = (1 << Self::GENERATION_BITS) - 1;

    pub fn new(machine: u8, core: usize, kind: ResType, generation: u32, slot: u32) -> ResId {
        debug_assert!(machine < 16 && core < 64 && slot < Self::MAX_SLOTS);
        ResId(
            (u64::from(machine & 0xf) << 60)
                | ((core as u64 & 0x3f) << 54)
                | (u64::from(kind as u8 & 0xf) << 50)
                | (u64::from(generation & Self::GENERATION_MASK) << 20)
                | u64::from(slot & (Self::MAX_SLOTS - 1)),
        )
    }
    pub fn machine(self) -> u8 {
        (self.0 >> 60) as u8
    }
    pub fn core(self) -> usize {
        ((self.0 >> 54) & 0x3f) as usize
    }
    /// The type, if the bits name one (a forged id may not).
    pub fn kind(self) -> Option<ResType> {
        ResType::from_u8(((self.0 >> 50) & 0xf) as u8)
    }
    pub fn generation(self) -> u32 {
        ((self.0 >> 20) as u32) & Self::GENERATION_MASK
    }
    pub fn slot(self) -> u32 {
        (self.0 as u32) & (Self::MAX_SLOTS - 1)
    }

    /// The same id on machine `machine` (below 16).
    pub fn with_machine(self, machine: u8) -> ResId {
        ResId((self.0 & !(0xf << 60)) | (u64::from(machine & 0xf) << 60))
    }

    /// Parse the form [`Display`](core::fmt::Display) writes: `cCORE:TYPE:SLOT.GEN` (a
    /// resource of machine 0, the spelling of a single machine), `mMACHINE.cCORE:...` (of
    /// another machine, issue 17) or plain hexadecimal (`0x...`, machine bits and all).
    pub fn parse(s: &str) -> Option<ResId> {
        if let Some(hex) = s.strip_prefix("0x") {
            return u64::from_str_radix(hex, 16).ok().map(ResId);
        }
        // Without a well-formed `mM.`, a leading `m` fails the `c` below.
        let (machine, s) = crate::strip_machine(s, ".").unwrap_or((0, s));
        let rest = s.strip_prefix('c')?;
        let (core, rest) = rest.split_once(':')?;
        let (kind, rest) = rest.split_once(':')?;
        let (slot, generation) = rest.split_once('.')?;
        let core: usize = core.parse().ok().filter(|c| *c < 64)?;
        let kind = ResType::from_name(kind)?;
        let slot: u32 = slot.parse().ok().filter(|s| *s < Self::MAX_SLOTS)?;
        let generation: u32 = generation
            .parse()
            .ok()
            .filter(|g| *g <= Self::GENERATION_MASK)?;
        Some(ResId::new(machine, core, kind, generation, slot))
    }
}

impl core::fmt::Display for ResId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let Some(k) = self.kind() else {
            return write!(f, "{:#x}", self.0);
        };
        if self.machine() != 0 {
            write!(f, "m{}.", self.machine())?;
        }
        write!(
            f,
            "c{}:{}:{}.{}",
            self.core(),
            k.name(),
            self.slot(),
            self.generation()
        )
    }
}

/// A user, as RCC knows it. User 0 is the kernel and may do anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Pod, Zeroable)]
#[repr(transparent)]
pub struct UserId(pub u32);

impl UserId {
    pub const KERNEL: UserId = UserId(0);
    /// The machine's administrator: the user the boot programs, the shell and the system
    /// services start as.
    pub const ADMIN: UserId = UserId(1);
}

/// The four operations rights control (open is governed by the creator).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read = 0,
    Write = 1,
    Close = 2,
    Control = 3,
}

impl Op {
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Close, Op::Control];
}

/// Rights: bits 0-3 the creator's read/write/close/control, bits 4-7 everyone else's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Rights(pub u8);

impl Rights {
    /// Rights that grant nothing to anyone (only the creator's close, which is never
    /// refused): a resource nobody could use, refused at open.
    pub const fn useless(self) -> bool {
        self.0 == 0
    }

    /// The default: the creator may do everything, nobody else anything.
    pub const OWNER_ALL: Rights = Rights(0x0f);
    pub const EVERYONE_ALL: Rights = Rights(0xff);

    pub const fn owner(op: Op) -> u8 {
        1 << op as u8
    }
    pub const fn others(op: Op) -> u8 {
        1 << (op as u8 + 4)
    }

    /// May `user` do `op` on a resource created by `creator` with these rights? The kernel
    /// may do anything, and the creator may always close what it created, whatever the
    /// rights say: a resource nobody could ever close would hold its memory until reboot.
    pub fn allows(self, op: Op, user: UserId, creator: UserId) -> bool {
        if user == UserId::KERNEL || (user == creator && op == Op::Close) {
            return true;
        }
        let bit = if user == creator {
            Self::owner(op)
        } else {
            Self::others(op)
        };
        self.0 & bit != 0
    }

    /// `rwcx/rwcx` style text: owner's then others' rights, `-` where denied.
    pub fn describe(self) -> [u8; 9] {
        let mut out = *b"----/----";
        for (i, c) in [b'r', b'w', b'c', b'x'].into_iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                out[i] = c;
            }
            if self.0 & (1 << (i + 4)) != 0 {
                out[5 + i] = c;
            }
        }
        out
    }

    /// Parse the [`describe`](Rights::describe) form, e.g. `rwcx/r---`.
    pub fn parse(s: &str) -> Option<Rights> {
        let b = s.as_bytes();
        if b.len() != 9 || b[4] != b'/' {
            return None;
        }
        let mut v = 0u8;
        for (i, c) in [b'r', b'w', b'c', b'x'].into_iter().enumerate() {
            for (half, at) in [(0, i), (4, 5 + i)] {
                match b[at] {
                    x if x == c => v |= 1 << (i + half),
                    b'-' => {}
                    _ => return None,
                }
            }
        }
        Some(Rights(v))
    }
}

/// One resource, as `RES_INFO` and `RES_LIST` report it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct ResInfo {
    pub id: ResId,
    pub creator: UserId,
    pub rights: u8,
    pub kind: u8,
    pub name_len: u8,
    pub _pad: u8,
    pub name: [u8; MAX_NAME],
    /// Type-specific: bytes (vregion), pages mapped (vspace), pid (process), mips (compute).
    pub size: u64,
    /// Type-specific: attachments (vregion), pid of the owner (vspace), state (process),
    /// bound pid or 0 (compute).
    pub detail: u64,
}

impl ResInfo {
    pub const EMPTY: ResInfo = ResInfo {
        id: ResId(0),
        creator: UserId(0),
        rights: 0,
        kind: 0,
        name_len: 0,
        _pad: 0,
        name: [0; MAX_NAME],
        size: 0,
        detail: 0,
    };

    pub fn name(&self) -> &str {
        let n = usize::from(self.name_len).min(MAX_NAME);
        core::str::from_utf8(&self.name[..n]).unwrap_or("?")
    }
}

#[cfg(test)]
mod tests;
