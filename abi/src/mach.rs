//! Several machines as one system (issue 17): what `xtask`, the machine server `machd` and
//! its clients (the shell) agree on.
//!
//! `cargo xtask run --machines N` boots N QEMUs on one virtual Ethernet on the host's
//! loopback. Machine `K` (0-based) has the address [`addr`]`(K)` on [`SUBNET`]`.0/24`, its
//! own MAC ([`mac`]), and `machd K N` serves [`FN_MACH`] on it, speaking `libs/mrpc` to the
//! other machines' `machd` over UDP port [`PORT`] (through `net.udp`).
//!
//! # The protocol on `mach` (local clients to `machd`)
//!
//! Every request is a `CALL` whose label is one of the `OP_*` values; the call's value is 0
//! or an `abi::Error` code.
//!
//! | op | request words | reply words |
//! |---|---|---|
//! | [`OP_SELF`] | - | this machine, machines, epoch |
//! | [`OP_MEMBER`] | machine | address, state ([`UP`]/[`DOWN`]/[`NEVER`]), epoch, ns since last heard (`u64::MAX`: never), requests sent, retransmissions |
//! | [`OP_PING`] | machine, deadline ns | round-trip ns |

/// The function `machd` serves.
pub const FN_MACH: &str = "mach";
/// The UDP port every `machd` receives on.
pub const PORT: u16 = 7117;
/// Most machines in one system.
pub const MAX_MACHINES: usize = 4;
/// The first three bytes of every machine's address.
pub const SUBNET: [u8; 3] = [10, 9, 0];

/// Machine `k`'s address: `10.9.0.(k+1)`.
pub const fn addr(k: usize) -> [u8; 4] {
    [SUBNET[0], SUBNET[1], SUBNET[2], k as u8 + 1]
}

/// Machine `k`'s MAC address: `52:54:00:4d:53:0k` (`4d 53` is "MS").
pub const fn mac(k: usize) -> [u8; 6] {
    [0x52, 0x54, 0x00, 0x4d, 0x53, k as u8]
}

/// This machine: `words[0]` its id, `words[1]` how many machines, `words[2]` its epoch.
pub const OP_SELF: u64 = 1;
/// What this machine knows of machine `words[0]`.
pub const OP_MEMBER: u64 = 2;
/// A null round trip to machine `words[0]`, ending with `TimedOut` after `words[1]` ns.
pub const OP_PING: u64 = 3;

/// Heard from within the heartbeat bound.
pub const UP: u64 = 1;
/// Heard from once, silent since.
pub const DOWN: u64 = 2;
/// Never heard from.
pub const NEVER: u64 = 3;
