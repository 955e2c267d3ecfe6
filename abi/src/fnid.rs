//! Function ids (P3's function identifiers): the names under which user-mode servers offer
//! a service, so that callers never name the server's process or core.
//!
//! A server opens an endpoint and registers it under a short name (`kv`, `net.udp`, `fs`);
//! the kernel answers with a [`FnId`]. A caller looks the name up once and then `CALL`s,
//! `SEND`s or `SUBMIT`s to the function id exactly as to an endpoint, from any core: the
//! kernel maps the function id to the server's endpoint on every request, so the server can
//! change underneath (a new generation) without the caller noticing.
//!
//! | number | call | arguments | value |
//! |---|---|---|---|
//! | 42 | `FN_REGISTER` | name ptr, name len, endpoint (the caller's own) | the function id |
//! | 43 | `FN_LOOKUP` | name ptr, name len | the function id (`NoSuchResource` if none) |
//! | 44 | `FN_UNREGISTER` | function id | 0 |
//! | 45 | `FN_LIST` | `*mut FnInfo`, capacity, flags (0 or [`FN_LIST_LOCAL`]) | number of records written |
//! | 46 | `FN_STATE` | function id, vregion (0: only ask) | the function's state ICA (0: none) |
//! | 47 | `FN_TAKEOVER` | function id, endpoint (the caller's own), timeout ns | the function's new server generation |
//! | 57 | `FN_RESTART` | function id, most restarts in the window (0: off; at most [`MAX_RESTARTS`]), window ms (at least [`restart_window_min_ms`]`(max)`), `*const u8` arguments, their length | 0 |
//!
//! Rules. A name is 1 to [`FN_NAME_MAX`] bytes of `a-z 0-9 . _ -` (else `BadName`; longer
//! than [`FN_NAME_MAX`] is `TooLong`). The endpoint registered must be the caller's own (a
//! function id or another type: `WrongType`; another process's endpoint: `Denied`), and its
//! rights decide who may send to the function. `RECV` and `REPLY_RECV` take the function id
//! too: its server receives on its own endpoint (anyone else gets `Denied`). A function id
//! never issued is `NoSuchResource` for every call.
//! Registering a name that is registered and served is `AlreadyExists`. A function id
//! whose server ended is *down*: requests to it fail with `Gone` until the same user (or
//! the administrator) registers the name again, which binds it to the new endpoint under
//! the same function id with the next generation; another user gets `Denied`. The system
//! services' names (those whose first part, up to the first `.`, is one of
//! [`SYSTEM_NAMES`]: `blk`, `fs`, `mach`, `net`) are the administrator's and the kernel's:
//! any other user registering one gets `Denied`.
//! Unregistering is for the registering user or the administrator (`Denied` otherwise); it
//! makes the id stale (`StaleResource`), and a later registration of the name gets a new
//! id. At most [`MAX_FNIDS`] names are registered at once, [`FNIDS_PER_USER`] of them by
//! one user, and [`FNIDS_RESERVED`] of them are kept for the administrator and the kernel
//! (`Limit`).
//!
//! State ICA (P3's state kept outside the server): `FN_STATE` with a vregion, called by the
//! function's current server, makes that vregion the function's state ICA; every later
//! server of the function (a restart, a replacement) gets its id from `FN_STATE(fnid, 0)`
//! and attaches it. The vregion outlives the servers: the registry keeps its id until the
//! function is unregistered, which forgets the id without closing the vregion (it stays its
//! creator's). Setting it from a process that is not the function's server
//! is `Denied`; a resource that is not a vregion is `WrongType`.
//!
//! Live replacement (P3): `FN_TAKEOVER`, by a new server already holding its own open
//! endpoint, takes the function over from the server serving it (rights as for registering
//! again: the same user or the administrator, else `Denied`; the endpoint's rules as for
//! `FN_REGISTER`). The old server finishes the request it holds; when it next looks for one
//! (`RECV`, `REPLY_RECV`) it is not given one: the requests still queued for it move to the
//! new endpoint in order (with their ICAs), the function is switched to the new endpoint
//! (server generation + 1) on every core, requests that still reach the old endpoint are
//! forwarded, and the old server ends. The call returns once the old server has ended, so
//! the new one may then attach the state ICA. If the old server holds a request or does not
//! look for the next one within the timeout: `TimedOut`, nothing changed (it serves on). A
//! function that is down is taken over at once (as registering again). The function id
//! must be the current one (`NoSuchResource`, `StaleResource` as for every call); the
//! endpoint already serving it is `AlreadyExists`; a function changed meanwhile (or a
//! second takeover of the same server at once) is `Busy`.

//! Restart after a crash (P3; opt-in with `FN_RESTART`, by the function's current server,
//! else `Denied`): a server that ends by a fault or a kill (not by exit, unregister or a
//! takeover) is started again by the kernel, on the core it ran on, from the boot archive:
//! the same program (the caller's own) with the arguments given to `FN_RESTART` (up to
//! [`RESTART_ARGS_MAX`] bytes, separated by spaces; longer: `TooLong`), as the function's
//! registering user. The new server registers the name again (`FN_REGISTER`, which binds
//! a restarting function at once, next generation) and finds the state ICA as any later
//! server does. Each server opts in for itself (a restarted one calls `FN_RESTART` again).
//! - The request the server was serving when it crashed is answered `Gone` (it may or may
//!   not have been done: the server's state tells; kv's table undoes or finishes a change
//!   cut short). Requests queued for it wait in the kernel and go to the restarted server
//!   (in order; one carrying an ICA is answered `Gone`, its ICA lost with the server).
//! - While the function restarts (`FnInfo::state` [`FN_RESTARTING`]) a request to it is
//!   answered [`crate::Error::Again`] (`ulib::fnid::call_fn` sends it again).
//! - At most `max` restarts in a window of `window` ms, counted from the first restart in
//!   it; the k-th restart in a window waits [`restart_backoff_ns`]`(k)` =
//!   [`RESTART_BACKOFF_NS`] x 2^(k-1) (at most 1 s) first. A crash past that, or a restart
//!   that cannot start (no such program, it ends or does not register within 10 s) leaves
//!   the function down (`Gone`). `FnInfo::restarts` counts the restarts under this id.
//! - The window must be at least [`restart_window_min_ms`]`(max)`: 1 s
//!   ([`RESTART_WINDOW_SLACK_MS`]) beyond the backoffs of `max` restarts (1,010 ms for 1,
//!   1,070 ms for 3, 11,270 ms for 16), else `InvalidArgument` (with `max` 0, opting out,
//!   any window). So the window outlasts its own backoffs: a server that crashes at once
//!   uses its `max` restarts inside one window and is left down. A shorter one never
//!   stopped: a window of 0 ms opened a new window at every crash, and a server that
//!   crashed at once (or was killed: a kill counts as a crash) came back every 10 ms for
//!   ever, a child of the kernel (found by an audit).

use crate::res::ResId;
use crate::Pid;
use bytemuck::{Pod, Zeroable};

/// Longest function name.
pub const FN_NAME_MAX: usize = 16;
/// `FN_LIST` flag: this core's copy of the registry only, whose records are as current as
/// every other field's, but `served` counts only the requests taken on this core: no other
/// core is asked. For a program that looks for one function's server or generation, often
/// (the shell's `replace` waits so), without an inter-core request each time. Any other
/// flag bit is `InvalidArgument`.
pub const FN_LIST_LOCAL: u64 = 1;
/// Most function ids registered at once.
pub const MAX_FNIDS: usize = 64;
/// Most names one user may have registered at once (`Limit` beyond): half the registry,
/// so another user always finds room (the kernel's own user is not limited).
pub const FNIDS_PER_USER: usize = MAX_FNIDS / 2;
/// Slots only the administrator (the user the system services run as) and the kernel may
/// take: every other user together holds at most `MAX_FNIDS - FNIDS_RESERVED` names
/// (`Limit` beyond), so two users filling their shares cannot leave a system service that
/// registers later (a network server started from the shell, a replacement under a new
/// name) without room.
pub const FNIDS_RESERVED: usize = MAX_FNIDS / 4;

/// A function id. It has the shape of a [`ResId`] whose type field holds
/// [`FnId::TYPE_BITS`], which names no resource type, so every call that takes an endpoint
/// takes a function id in its place and nothing else mistakes one for a resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Pod, Zeroable)]
#[repr(transparent)]
pub struct FnId(pub u64);

impl FnId {
    /// The value of a `ResId`'s type field (bits 50..54) in a function id.
    pub const TYPE_BITS: u64 = 0xf;
    const TYPE_SHIFT: u32 = 50;
    const SLOT_MASK: u64 = (1 << ResId::SLOT_BITS) - 1;
    const GENERATION_MASK: u64 = ResId::GENERATION_MASK as u64;

    /// The id of registry slot `slot` (`< MAX_FNIDS`) in its `generation`-th use.
    pub fn new(slot: u32, generation: u32) -> FnId {
        FnId(
            (Self::TYPE_BITS << Self::TYPE_SHIFT)
                | ((u64::from(generation) & Self::GENERATION_MASK) << ResId::SLOT_BITS)
                | (u64::from(slot) & Self::SLOT_MASK),
        )
    }

    /// `raw` as a function id, if it has a function id's shape (machine and core bits 0,
    /// the function-id type, a slot below [`MAX_FNIDS`]).
    pub fn from_raw(raw: u64) -> Option<FnId> {
        let id = FnId(raw);
        let shape = raw >> Self::TYPE_SHIFT == Self::TYPE_BITS;
        (shape && (id.slot() as usize) < MAX_FNIDS).then_some(id)
    }

    /// Is `raw` (an endpoint argument) a function id rather than a resource id?
    pub fn is_fnid(raw: u64) -> bool {
        (raw >> Self::TYPE_SHIFT) & 0xf == Self::TYPE_BITS
    }

    pub fn slot(self) -> u32 {
        (self.0 & Self::SLOT_MASK) as u32
    }

    pub fn generation(self) -> u32 {
        ((self.0 >> ResId::SLOT_BITS) & Self::GENERATION_MASK) as u32
    }

    /// What `CALL`, `SEND`, `SUBMIT` and the ulib wrappers take as their endpoint.
    pub fn as_target(self) -> ResId {
        ResId(self.0)
    }
}

impl core::fmt::Display for FnId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "fn{}.{}", self.slot(), self.generation())
    }
}

/// The first parts of the system services' names (`blk`; `fs`, `fs.bufI`; `mach`,
/// `mach.link`; `net.drv`, `net.udp`): only the administrator and the kernel may register a
/// name whose first part (up to the first `.`) is one of these (`Denied`). Without them, a
/// program of any user that registered `fs` or `net.udp` before its server did would
/// receive every program's file or network requests, and be handed their data.
pub const SYSTEM_NAMES: [&[u8]; 4] = [b"blk", b"fs", b"mach", b"net"];

/// Is `name` one only the administrator and the kernel may register ([`SYSTEM_NAMES`])?
pub fn system_name(name: &[u8]) -> bool {
    name.split(|&b| b == b'.')
        .next()
        .is_some_and(|first| SYSTEM_NAMES.contains(&first))
}

/// Is `name` a valid function name?
pub fn valid_name(name: &[u8]) -> bool {
    (1..=FN_NAME_MAX).contains(&name.len())
        && name
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// `FnInfo::state`: a server is registered and its endpoint is open.
pub const FN_UP: u64 = 1;
/// `FnInfo::state`: the server ended; requests fail with `Gone` until it registers again.
pub const FN_DOWN: u64 = 2;
/// `FnInfo::state`: the server crashed and the kernel restarts it; requests fail with
/// `Again` meanwhile (`FN_RESTART`).
pub const FN_RESTARTING: u64 = 3;

/// Most restarts `FN_RESTART` may allow in its window.
pub const MAX_RESTARTS: u64 = 16;
/// The window Musubi's servers count their restarts in: `restart=N` is N a minute (`kv`,
/// `bufd`, `fsd`, `netdrv`).
pub const RESTART_WINDOW_MS: u64 = 60_000;
/// Longest argument text `FN_RESTART` keeps.
pub const RESTART_ARGS_MAX: usize = 256;
/// The wait before the first restart in a window (doubling for each further one).
pub const RESTART_BACKOFF_NS: u64 = 10_000_000;
/// The longest wait before a restart.
pub const RESTART_BACKOFF_MAX_NS: u64 = 1_000_000_000;
/// What `FN_RESTART`'s window must last beyond the backoffs of its restarts
/// ([`restart_window_min_ms`]): time for the restarted servers to start and crash.
pub const RESTART_WINDOW_SLACK_MS: u64 = 1_000;

/// The wait before the `k`-th restart in a window (`k` from 1): [`RESTART_BACKOFF_NS`] x
/// 2^(k-1), at most [`RESTART_BACKOFF_MAX_NS`].
pub const fn restart_backoff_ns(k: u64) -> u64 {
    let shift = if k > 17 { 16 } else { k.saturating_sub(1) };
    let ns = RESTART_BACKOFF_NS << shift;
    if ns < RESTART_BACKOFF_MAX_NS {
        ns
    } else {
        RESTART_BACKOFF_MAX_NS
    }
}

/// The shortest window `FN_RESTART` accepts for `max` restarts: [`RESTART_WINDOW_SLACK_MS`]
/// beyond the backoffs of `max` restarts (0 for `max` 0, opting out; `max` above
/// [`MAX_RESTARTS`] counts as [`MAX_RESTARTS`], which `FN_RESTART` refuses anyway).
pub const fn restart_window_min_ms(max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let n = if max < MAX_RESTARTS {
        max
    } else {
        MAX_RESTARTS
    };
    let mut ns = 0;
    let mut k = 1;
    while k <= n {
        ns += restart_backoff_ns(k);
        k += 1;
    }
    RESTART_WINDOW_SLACK_MS + ns.div_ceil(1_000_000)
}

/// One registered function, as `FN_LIST` writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct FnInfo {
    pub fnid: FnId,
    pub name: [u8; FN_NAME_MAX],
    pub name_len: u64,
    /// The serving process (its pid names its core), or 0 when down.
    pub server: Pid,
    /// The endpoint requests go to (a `ResId`), or 0 when down.
    pub endpoint: u64,
    /// 1 for the first server, one more for each that took over.
    pub generation: u64,
    /// Requests the function's servers have taken (`RECV`) under this id (on this core
    /// only with [`FN_LIST_LOCAL`]).
    pub served: u64,
    /// The state ICA handed from server to server (a `ResId`), or 0 if none.
    pub state_ica: u64,
    /// The user that registered it.
    pub user: u64,
    /// `FN_UP`, `FN_DOWN` or `FN_RESTARTING`.
    pub state: u64,
    /// Restarts after a crash under this id (`FN_RESTART`), and the most allowed in a
    /// window (0: restart is off).
    pub restarts: u64,
    pub restart_max: u64,
    /// When the server now serving it started to (its registration, a takeover or a
    /// restart; kept while the function is down), in ns since reset by the registry home's
    /// clock (`CLOCK`'s): so a replacement's moment is known without looking for it often.
    pub since_ns: u64,
}

impl FnInfo {
    /// The name as text (`?` if a forged record holds bytes that are not).
    pub fn name(&self) -> &str {
        let len = (self.name_len as usize).min(FN_NAME_MAX);
        core::str::from_utf8(&self.name[..len]).unwrap_or("?")
    }
}

/// The label of the *retire notice*: when a server that holds requests (answers it has not
/// given yet, e.g. a receive waiting for data) is asked to retire (`FN_TAKEOVER`), its next
/// `RECV`/`REPLY_RECV` on the function's endpoint returns this message instead of a
/// request, once, as a one-way message from the kernel (request handle 0: nothing to
/// answer; sender pid 0; kind `SUBMIT_SEND`; words 0). The server answers each request it
/// holds with [`crate::Error::Again`] (`REPLY_ERROR`, `abi::ipc`; client libraries send it
/// again — `ulib::fnid::call_fn` — and it reaches the new server), then receives again
/// holding none, and is retired there (that `RECV` does not return: the process ends as in
/// any takeover). A server that holds nothing is never sent the notice. After the notice a
/// server that still holds requests is given requests as usual (the notice is not sent
/// again); it is retired at the first receive holding none, or `FN_TAKEOVER` times out
/// (`TimedOut`, nothing changed) and the server serves on.
pub const RETIRE_NOTICE: u64 = 0x7e7e_0000_0000_0001;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::res::ResType;

    #[test]
    fn fnid_round_trips_and_is_no_resource() {
        let id = FnId::new(63, 7);
        assert_eq!((id.slot(), id.generation()), (63, 7));
        assert_eq!(FnId::from_raw(id.0), Some(id));
        assert!(FnId::is_fnid(id.0));
        assert_eq!(ResId(id.0).kind(), None);
        assert_eq!(FnId::from_raw(FnId::new(64, 0).0), None);
        let endpoint = ResId::new(0, 3, ResType::Endpoint, 5, 9);
        assert!(!FnId::is_fnid(endpoint.0));
        assert_eq!(FnId::from_raw(endpoint.0), None);
        assert_eq!(FnId::from_raw(id.0 | (1 << 54)), None, "core bits set");
    }

    #[test]
    fn restart_window_outlasts_its_backoffs() {
        assert_eq!(restart_backoff_ns(0), 10_000_000);
        assert_eq!(restart_backoff_ns(1), 10_000_000);
        assert_eq!(restart_backoff_ns(3), 40_000_000);
        assert_eq!(restart_backoff_ns(7), 640_000_000);
        assert_eq!(restart_backoff_ns(8), 1_000_000_000);
        assert_eq!(restart_backoff_ns(u64::MAX), 1_000_000_000);
        assert_eq!(restart_window_min_ms(0), 0);
        assert_eq!(restart_window_min_ms(1), 1_010);
        assert_eq!(restart_window_min_ms(3), 1_070);
        assert_eq!(restart_window_min_ms(MAX_RESTARTS), 11_270);
        assert_eq!(restart_window_min_ms(u64::MAX), 11_270);
        // Musubi's servers' window (`restart=N` is N a minute) is long enough for any N.
        assert!(RESTART_WINDOW_MS >= restart_window_min_ms(MAX_RESTARTS));
    }

    #[test]
    fn names() {
        for good in ["kv", "net.udp", "fs", "a-b_c.9", "sixteen-bytes-xx"] {
            assert!(valid_name(good.as_bytes()), "{good}");
        }
        for bad in ["", "KV", "a b", "seventeen-bytes-x", "é", "a/b"] {
            assert!(!valid_name(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn system_names_by_their_first_part() {
        for sys in [
            "blk",
            "fs.buf0",
            "fs",
            "mach",
            "mach.link",
            "net.drv",
            "net.udp",
            "net.",
        ] {
            assert!(system_name(sys.as_bytes()), "{sys}");
        }
        for user in [
            "kv", "fsfuzz", "fs-x", "netx.udp", "pub.net", "a.fs", "buf.0", "blk2",
        ] {
            assert!(!system_name(user.as_bytes()), "{user}");
        }
    }
}
