//! Several machines as one system (issue 17): what `xtask`, the machine server `machd` and
//! its clients (the shell) agree on.
//!
//! `cargo xtask run --machines N` boots N QEMUs on one virtual Ethernet on the host's
//! loopback. Machine `K` (0-based) has the address [`addr`]`(K)` on [`SUBNET`]`.0/24`, its
//! own MAC ([`mac`]), and `machd K N` serves [`FN_MACH`] on it, speaking `libs/mrpc` to the
//! other machines' `machd` in Ethernet frames of its own type ([`ETHERTYPE`], through
//! `net.drv`), or over UDP port [`PORT`] (through `net.udp`) when started `machd K N udp`.
//!
//! # The protocol on `mach` (local clients to `machd`)
//!
//! Every request is a `CALL` whose label is one of the `OP_*` values; the call's value is 0
//! or an `abi::Error` code.
//!
//! | op | request words | reply words |
//! |---|---|---|
//! | [`OP_SELF`] | - | this machine, machines, epoch, programs whose output it follows ([`OP_FOLLOW`]), remote waits in flight, requests held for room in a window |
//! | [`OP_MEMBER`] | machine | address, state ([`UP`]/[`DOWN`]/[`NEVER`]), epoch, ns since last heard (`u64::MAX`: never), requests sent, retransmissions |
//! | [`OP_PING`] | machine, deadline ns (0: [`DEFAULT_DEADLINE_NS`], at most [`DEADLINE_MAX_NS`]) | round-trip ns |
//! | [`OP_SPAWN`] | machine, core word (the core in its low 32 bits, [`ANY_CORE`]: the machine's choice; [`SPAWN_RELAY`]: the output goes to a pipe the caller reads with `OP_OUTPUT`), then up to 32 bytes of `PROG\0ARG\0...` in words 2..5 | pid, the machine's epoch |
//! | [`OP_WAIT`] | machine, epoch, pid, timeout ns (`u64::MAX`: none) | how (`ENDED_*`), code |
//! | [`OP_KILL`] | machine, epoch, pid | - |
//! | [`OP_PS`] | machine, index | pid, state, count, name (24 bytes in words 3..5) |
//! | [`OP_COUNT`] | machine | the counter's new value |
//! | [`OP_OUTPUT`] | machine, epoch, pid | bytes printed, 1 once the output has ended |
//! | [`OP_FOLLOW`] | machine, epoch, pid | - |
//! | [`OP_INPUT`] | machine, epoch, pid, length and [`INPUT_END`]; the bytes in the ICA | bytes written; the ICA back |
//! | [`OP_UNFOLLOW`] | machine, epoch, pid | - |
//! | [`OP_FS`] | machine, fs op and name length ([`fs_word`]), epoch, the fs request's `words[0]` and `words[1]`; the request's ICA (`abi::fs`) | the fs reply's `words[0..3]`; the ICA back |
//! | [`OP_RES`] | [`res_word`] (machine, operation, lengths), epoch (0 for an open), the resource id (an open: its rights), the read's or write's `arg` (a control: its command); in the ICA a control's two arguments, then an open's name and arguments or a write's bytes ([`RES_DATA_AT`]) | the operation's result (id, count, value), the machine's epoch, bytes in the ICA; in the ICA a read's bytes or an info's `ResInfo` |
//! | [`OP_CALL`] | machine, the remote request's label, [`call_word`] (name and data lengths, bytes wanted back, with an ICA), timeout ns (0: [`DEFAULT_DEADLINE_NS`]); in the ICA the remote request's six words, the function's name, the data ([`CALL_WORDS_AT`], [`CALL_NAME_AT`]) | bytes brought back, the server's reply value and label; in the ICA the server's six reply words and those bytes |
//!
//! Remote processes are named by (machine, epoch, pid): a machine that rebooted since has
//! another epoch, and a request naming the old one is refused with `StaleResource`.
//! `OP_SPAWN`, `OP_WAIT` and `OP_KILL` act as the *caller's* user (the kernel vouches for it
//! in `Received::sender_user`), which travels in the request to the other machine's `machd`;
//! that one spawns or kills acting as that user (`THREAD_SETUSER` around the call, that
//! thread alone; it is a boot program, so it may), so the other machine's kernel checks the rights (RCC) there. A
//! request that found the machine down ends `Gone`; one that got no answer in time,
//! `TimedOut`.

/// The function `machd` serves.
pub const FN_MACH: &str = "mach";
/// The UDP port every `machd` receives on.
pub const PORT: u16 = 7117;
/// The UDP port every `machd` sends from: a datagram to [`PORT`] from any other port is
/// not `machd`'s and is dropped, so another program of a machine (which cannot bind this
/// port while `machd` holds it) cannot speak for its machine (a heartbeat in a made-up
/// epoch would make the others take the machine for restarted).
pub const SEND_PORT: u16 = 7118;
/// The Ethernet type of `machd`'s own frames (the default link; `machd K N udp` speaks
/// over UDP instead): an mrpc message right after the 14-byte Ethernet header, from
/// machine K's [`mac`] to machine M's. 0x88B5 is IEEE 802's "local experimental" type 1.
/// `net.drv` hands received frames of this type to [`FN_LINK`] instead of `net.udp`, and
/// sends frames of this type only for the server of [`FN_LINK`].
pub const ETHERTYPE: u16 = 0x88b5;
/// The function on which `machd`'s network thread receives the frames of its
/// [`ETHERTYPE`] from `net.drv` (as `abi::net::UDP_FRAME_IN` requests with a frame ICA).
pub const FN_LINK: &str = "mach.link";
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

/// Ethernet header of a link frame: destination, source, [`ETHERTYPE`].
pub const ETH_HEADER: usize = 14;
/// Shortest Ethernet frame (without its checksum): shorter ones are padded with zeros.
pub const ETH_MIN: usize = 60;

/// The length of the link frame that carries `payload` bytes (header and padding).
pub const fn frame_len(payload: usize) -> usize {
    let n = ETH_HEADER + payload;
    if n < ETH_MIN {
        ETH_MIN
    } else {
        n
    }
}

/// Write the link frame carrying `payload` from machine `from` to machine `to` into
/// `frame`, which must be [`frame_len`]`(payload.len())` bytes long: header, payload, zero
/// padding. `false` (nothing written) if it is not.
pub fn write_frame(frame: &mut [u8], from: usize, to: usize, payload: &[u8]) -> bool {
    if frame.len() != frame_len(payload.len()) {
        return false;
    }
    frame[0..6].copy_from_slice(&mac(to));
    frame[6..12].copy_from_slice(&mac(from));
    frame[12..ETH_HEADER].copy_from_slice(&ETHERTYPE.to_be_bytes());
    frame[ETH_HEADER..ETH_HEADER + payload.len()].copy_from_slice(payload);
    frame[ETH_HEADER + payload.len()..].fill(0);
    true
}

/// This machine: `words[0]` its id, `words[1]` how many machines, `words[2]` its epoch,
/// `words[3]` how many remote programs' output it follows now ([`OP_FOLLOW`]), `words[4]`
/// how many of this machine's programs' [`OP_WAIT`]s are in flight, `words[5]` how many
/// requests wait for room in their machine's window (mrpc's `WINDOW` past the oldest
/// request not yet answered).
pub const OP_SELF: u64 = 1;
/// What this machine knows of machine `words[0]`.
pub const OP_MEMBER: u64 = 2;
/// A null round trip to machine `words[0]`, ending with `TimedOut` after `words[1]` ns (0:
/// [`DEFAULT_DEADLINE_NS`]; at most [`DEADLINE_MAX_NS`], `InvalidArgument` beyond).
pub const OP_PING: u64 = 3;

/// Spawn a program on another machine (as the caller's user).
pub const OP_SPAWN: u64 = 4;
/// Wait for a process spawned on another machine by `OP_SPAWN` to end.
pub const OP_WAIT: u64 = 5;
/// Kill a process on another machine (as the caller's user).
pub const OP_KILL: u64 = 6;
/// Process `index` of another machine's list (`NoSuchProcess` past the end).
pub const OP_PS: u64 = 7;

/// Add one to machine M's counter for this machine (kept by M's `machd`, from 0 at its
/// start) and answer its new value: a request whose effect shows whether it was performed
/// once (the tests of exactly-once execution on a lossy network: `mcount`).
pub const OP_COUNT: u64 = 8;

/// What process `words[2]` (spawned by `OP_SPAWN` with [`SPAWN_RELAY`] on machine
/// `words[0]`, life `words[1]`) has written since the last `OP_OUTPUT`, at most about 1 KiB:
/// `machd` prints it on this machine's console and answers how many bytes, and 1 in the
/// second word once the program's output has ended (it ended, and everything it wrote was
/// printed). Nothing new is 0 bytes; the caller asks again later. Only the user the process
/// was spawned for (or the administrator) may. With an ICA (`abi::ipc::MSG_ICA`, writable)
/// nothing is printed: the bytes are copied to the ICA's start and the reply gives it back
/// (a shell feeding a remote program's output into a local pipeline).
pub const OP_OUTPUT: u64 = 9;
/// A file request (`abi::fs`) to the file service of machine `words[0]` (see
/// [`fs_word`] for `words[0]`), carried by `machd` to that machine's `machd`, which makes
/// it there to its own `fs`. `words[1]` names the life of that machine (its epoch, as
/// `OP_SELF` or `OP_MEMBER` tell it) for a request on an open file, 0 for a request by
/// name; `words[2]` and `words[3]` are the fs request's `words[0]` and `words[1]`. The
/// request carries the caller's fs ICA, and the reply gives it back with the fs reply's
/// bytes (a read's data, a listing) at its start: at most [`FS_REMOTE_MAX`] bytes each
/// way. The reply's `words[0..3]` are the fs reply's, and `words[3]` the life of the
/// machine that answered. An open file belongs to the process that opened it: requests
/// on it from any other are `InvalidArgument`, as on its own machine, and its file is
/// closed when that process ends, when its machine goes down, or when that machine
/// restarts. A machine without a disk answers `NotSupported`. An ICA mapped read-only here
/// (`abi::ipc::MSG_ICA_READ_ONLY`: the answer is written into it) is `InvalidArgument`.
pub const OP_FS: u64 = 10;
/// Most bytes one `OP_FS` carries each way (a name, a write's or a read's data, a
/// listing): what fits one `libs/mrpc` message beside the request's words.
pub const FS_REMOTE_MAX: usize = 896;

/// A call to a function (`abi::fnid`) served on another machine, by its name: P4's
/// inter-machine RPCC for any server, not only the ones `machd` knows. The request's ICA
/// (writable, at least a page) holds the remote request's six words at
/// [`CALL_WORDS_AT`] and, from [`CALL_NAME_AT`], the function's name (1 to
/// [`CALL_NAME_MAX`] bytes) followed by the data (at most [`CALL_REMOTE_MAX`] bytes);
/// `words[0]` is the machine, `words[1]` the remote request's label, `words[2]` a
/// [`call_word`], `words[3]` how long the server may take (ns; 0: [`DEFAULT_DEADLINE_NS`],
/// at most [`DEADLINE_MAX_NS`]). With [`CALL_WITH_ICA`] the remote request carries an ICA of
/// one page there with the data at its start (and, as every ICA, its id in the request's
/// `words[5]`, so only `words[0..4]` travel as given); the reply brings back the first
/// `wanted` bytes of the ICA the server gives back. The other machine's `machd` makes the
/// call acting as the caller's user (`Received::sender_user` there), so a server that checks
/// users checks this one, as for a local caller; the sender it sees is that `machd`.
///
/// The reply's `words[0]` is how many bytes came back, `words[1]` the server's reply value
/// (0, or the `Error` code it answered), `words[2]` its reply's label (without the ICA
/// flags: some servers answer their status there); in the ICA the server's six reply words at
/// [`CALL_WORDS_AT`] and the bytes at [`CALL_NAME_AT`] (with an ICA, the reply's
/// `words[4]` and `words[5]` were its place and id there: 0 here). The call's own value is
/// an error of the way there: `NotSupported` for a name without [`CALLABLE_PREFIX`] (files
/// go by [`OP_FS`], which keeps each open file its opener's), `NoSuchResource` (nobody
/// serves the name there), `TooLong`, `InvalidArgument`, `Busy` (too many requests in
/// flight or queued), `TimedOut` (the server took longer, or the call waited in the queue
/// there longer than its timeout), `Gone`, `StaleResource`, `Denied` (user 0), or the
/// error the call ended with there (`Gone`: the server ended before answering).
pub const OP_CALL: u64 = 14;
/// The names [`OP_CALL`] reaches: a server registers its function under a name that starts
/// so (`pub.echo`) to say that it may be called from other machines. Every such call
/// reaches it from that machine's `machd`, so the server must tell its callers apart by the
/// user (`Received::sender_user`), never by the sending process: `net.udp` gives ports to
/// processes, `fs` open files, and `blk` checks nobody, so carried to them a call would act
/// with `machd`'s ports, handles or disk.
pub const CALLABLE_PREFIX: &str = "pub.";
/// A resource operation on another machine (P4: RCC requests reach resources on other
/// machines the way they reach other cores'; docs/resources.md has the operations): one of
/// [`RES_OPEN`], [`RES_CLOSE`], [`RES_INFO`], [`RES_READ`], [`RES_WRITE`], [`RES_CONTROL`],
/// or [`RES_FIND`] (an id by name: with the answer's life, what the other operations need),
/// made there by that machine's `machd` *acting as the caller's user*, so that machine's
/// kernel checks the rights as for a local program of that user. Every request carries a
/// writable ICA (see the table above); `words[0]` is a [`res_word`], `words[1]` the life of
/// the machine the id belongs to (what the open or find answered; 0 for an open or a
/// find), `words[2]` the id (an open: the rights; a find: unused), `words[3]` a read's or
/// write's `arg` or a control's command. The reply's `words[0]` is the result (the id
/// opened or found, bytes read or written, the control's value), `words[1]` the machine's life and `words[2]` how many bytes came back
/// at the ICA's start: a read's (at most [`RES_REMOTE_MAX`]) or an info's `ResInfo`.
/// Vregions, pipes, semaphores, computes and processes may be opened there (a process is
/// created stopped, that `machd`'s child noted as the caller's user's, as an
/// [`OP_SPAWN`]'s; a compute's read with a pid as `words[3]` binds it); an endpoint is
/// `NotSupported` (it would be that `machd`'s own).
///
/// Nothing there waits: a pipe is read and written with `PIPE_NOWAIT`, so an empty pipe
/// with a writer held, or a full one, answers `Again` (the caller asks again later), and a
/// semaphore's `SEM_P` is made as `SEM_TRY` (`Again` at 0). A pipe end held with
/// `PIPE_HOLD` for "the caller" (`arg1` 0) is held by that machine's `machd` for the
/// calling program, and let go (as the caller's user) when the program drops it, ends, or
/// its machine goes down or restarts (so a reader there sees EOF once a writer here is
/// gone); a `PIPE_DROP` of an end not held so is `NoSuchProcess`, and naming that
/// `machd`'s own pid is `Denied`. An id of an earlier life of the machine is
/// `StaleResource`.
pub const OP_RES: u64 = 15;
/// [`OP_RES`]: open a resource by name (`c1/pipe/p`; `here` is core 0 of that machine).
pub const RES_OPEN: u64 = 1;
/// [`OP_RES`]: close one.
pub const RES_CLOSE: u64 = 2;
/// [`OP_RES`]: its `ResInfo`.
pub const RES_INFO: u64 = 3;
/// [`OP_RES`]: read at most the length asked (at most [`RES_REMOTE_MAX`]).
pub const RES_READ: u64 = 4;
/// [`OP_RES`]: write the bytes given (at most [`RES_REMOTE_MAX`]).
pub const RES_WRITE: u64 = 5;
/// [`OP_RES`]: a control command with two arguments.
pub const RES_CONTROL: u64 = 6;
/// [`OP_RES`]: the id of the resource named so there (`c0/pipe/p`; the name as an open's).
pub const RES_FIND: u64 = 7;
/// [`OP_RES`]: list the resources of a core there (`words[3]`: the core; the control's
/// first argument: how many to skip): `words[0]` how many there are, then as many
/// `ResInfo` records as fit ([`RES_LIST_MAX`]), as that machine's `RES_LIST` gives them
/// (every resource of the core, whoever asks, as locally).
pub const RES_LIST: u64 = 8;
/// Most `ResInfo` records one [`RES_LIST`] brings.
pub const RES_LIST_MAX: usize = RES_REMOTE_MAX / core::mem::size_of::<crate::res::ResInfo>();
/// Most bytes one [`OP_RES`] carries each way.
pub const RES_REMOTE_MAX: usize = 896;
/// Where an [`OP_RES`] request's bytes (an open's name and arguments, a write's bytes)
/// start in its ICA: after a control's two arguments.
pub const RES_DATA_AT: usize = 16;

/// [`OP_RES`]'s `words[0]`: the machine in bits 0..8, the operation in 8..16, the length
/// (an open's or find's whole name, at most `res::MAX_RES_NAME`; a read's or write's
/// bytes) in 16..32, an open's argument bytes in 32..48.
pub const fn res_word(machine: u64, op: u64, len: u64, args_len: u64) -> u64 {
    (machine & 0xff) | (op & 0xff) << 8 | (len & 0xffff) << 16 | (args_len & 0xffff) << 32
}

/// [`res_word`]'s parts: machine, operation, length, argument bytes.
pub const fn res_parts(w: u64) -> (u64, u64, usize, usize) {
    (
        w & 0xff,
        (w >> 8) & 0xff,
        ((w >> 16) & 0xffff) as usize,
        ((w >> 32) & 0xffff) as usize,
    )
}

/// Move a process of this machine to another (`ulib::mach::migrate`; issue 17's
/// migration between machines): the image `MIGRATE_EXPORT` wrote travels in pieces and
/// that machine's `machd` starts it with `MIGRATE_IMPORT`. `words[0]` is
/// [`res_word`]`(machine, op, len, 0)` with `op` one of [`MOVE_PUT`], [`MOVE_START`],
/// [`MOVE_DROP`], [`MOVE_SPAWN`]; `words[1]` the move's token (the caller's choice, non-zero); for a put
/// `words[2]` the piece's offset and `words[3]` the image's whole length, its `len` bytes
/// at the ICA's start; for a start `words[2]` the core ([`ANY_CORE`]: that machine's
/// last). Answer as [`OP_RES`]'s: `words[0]` the value (a start's: the new pid),
/// `words[1]` the machine's life. The pieces come in order, at most [`MOVES_MAX`] images
/// arrive at once there (two per program: `Busy` beyond), each at most
/// `syscall::MAX_MOVE_IMAGE` bytes; one not started goes when its program ends or its
/// machine goes down (or [`MOVE_STALE_NS`] after its first piece, when room is needed).
/// A start asked again answers the same pid; a drop after a start kills the process it
/// made (a move given up must not leave two copies). The process runs at an
/// application's priority at most, as a remote spawn's.
pub const OP_MOVE: u64 = 16;
/// [`OP_MOVE`]: the next piece of the image.
pub const MOVE_PUT: u64 = 1;
/// [`OP_MOVE`]: start the process of the whole image, as the caller's user, as that
/// `machd`'s child (so `OP_WAIT` and `OP_KILL` reach it as a remote spawn's).
pub const MOVE_START: u64 = 2;
/// [`OP_MOVE`]: forget an image (the move was given up).
pub const MOVE_DROP: u64 = 3;
/// [`OP_MOVE`]: start the whole image as a *program* (an ELF executable, e.g. one read
/// from a disk: `run /BIN/PROG -m M`), not a moved process: `PROG\0ARG\0...` (the name it
/// is shown under first) are the piece's `len` bytes, `words[2]` the core word as
/// [`OP_SPAWN`]'s (a core or [`ANY_CORE`], with [`SPAWN_RELAY`], [`SPAWN_STDIN`]). As the
/// caller's user, at an application's priority, as that `machd`'s child; asked again it
/// answers the same pid, and a drop after it kills the program, as for [`MOVE_START`].
pub const MOVE_SPAWN: u64 = 4;
/// Most images arriving at one machine at once.
pub const MOVES_MAX: usize = 4;
/// Most pieces of an arriving image held because they came before one sent ahead of them
/// (a requester has several pieces out at once); a piece is held only within this many
/// pieces' bytes ([`RES_REMOTE_MAX`] each) of what came in order.
pub const MOVE_AHEAD_MAX: usize = 16;
/// An image not whole this long after its first piece may be forgotten to make room.
pub const MOVE_STALE_NS: u64 = 30_000_000_000;

/// Most bytes of a function's name in [`OP_CALL`].
pub const CALL_NAME_MAX: usize = 32;
/// Most bytes of data an [`OP_CALL`] carries each way: what fits one `libs/mrpc` message
/// beside the name and ten words.
pub const CALL_REMOTE_MAX: usize = 896;
/// Where the six words are in an [`OP_CALL`]'s ICA (the request's, then the reply's).
pub const CALL_WORDS_AT: usize = 0;
/// Where the name and data (the request's), then the bytes brought back (the reply's) start.
pub const CALL_NAME_AT: usize = 48;
/// [`call_word`]'s flag: the remote request carries an ICA.
pub const CALL_WITH_ICA: u64 = 1 << 48;

/// [`OP_CALL`]'s `words[2]`: the name's length in bits 0..8, the data's in 8..24, the
/// bytes wanted back in 24..40, and [`CALL_WITH_ICA`].
pub const fn call_word(name_len: u64, data_len: u64, wanted: u64, with_ica: bool) -> u64 {
    (name_len & 0xff)
        | (data_len & 0xffff) << 8
        | (wanted & 0xffff) << 24
        | if with_ica { CALL_WITH_ICA } else { 0 }
}

/// [`call_word`]'s parts: name length, data length, bytes wanted back, with an ICA.
pub const fn call_parts(w: u64) -> (usize, usize, usize, bool) {
    (
        (w & 0xff) as usize,
        ((w >> 8) & 0xffff) as usize,
        ((w >> 24) & 0xffff) as usize,
        w & CALL_WITH_ICA != 0,
    )
}

/// `OP_FS`'s `words[0]`: the machine in bits 0..8, the fs op in bits 8..16, the length of
/// the name at the ICA's start in bits 16..32.
pub const fn fs_word(machine: u64, op: u64, name_len: u64) -> u64 {
    (machine & 0xff) | (op & 0xff) << 8 | (name_len & 0xffff) << 16
}

/// How much of a directory listing (`abi::fs::FS_READDIR`'s lines `NAME SIZE\n`) one
/// `OP_FS` answer of at most `max` bytes carries: whole lines only. Returns the bytes kept,
/// the entries (lines) they hold, and whether lines were left out (the caller asks again
/// from the next entry).
pub fn fit_listing(listing: &[u8], max: usize) -> (usize, u64, bool) {
    let lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() as u64;
    if listing.len() <= max {
        return (listing.len(), lines(listing), false);
    }
    let cut = listing[..max]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    (cut, lines(&listing[..cut]), true)
}

/// Print the output of process `words[2]` of machine `words[0]` (life `words[1]`; spawned
/// with [`SPAWN_RELAY`]) on this machine's console as it comes, in the background, until it
/// ends: a remote background job's output (`run PROG -m M &`). At most [`FOLLOW_MAX`] at
/// once, a user other than the administrator and the kernel at most half of them, all
/// such users three quarters (`Limit`). The looks act as the caller's user, so only the user the process was
/// spawned for (or the administrator) sees its output; another's follow is accepted, and
/// its refusal comes later, as a console line saying the output is not shown.
pub const OP_FOLLOW: u64 = 11;
/// Stop [`OP_FOLLOW`]ing process `words[2]` of machine `words[0]` (life `words[1]`) for the
/// caller's user: answered once no look at its output is under way, so that what the
/// caller then asks itself (`OP_OUTPUT`) comes after everything printed for it.
/// `NoSuchProcess` if this user does not follow it.
pub const OP_UNFOLLOW: u64 = 12;
/// Most processes followed at once.
pub const FOLLOW_MAX: usize = 16;

/// Write into the standard input of process `words[2]` of machine `words[0]` (life
/// `words[1]`; spawned with [`SPAWN_STDIN`]) the bytes at the start of the request's ICA:
/// `words[3]`'s low 32 bits say how many (at most [`INPUT_MAX`]), and [`INPUT_END`] in it
/// ends the input after them (the program reads EOF). As many as fit its pipe now are
/// written: the reply's `words[0]` (0 when the pipe is full: the caller offers the rest
/// again later); the end is given only once all were written. `Gone` once the program no
/// longer reads (it ended). Only the user it was spawned for (or the administrator) may.
pub const OP_INPUT: u64 = 13;
/// Most bytes one [`OP_INPUT`] carries.
pub const INPUT_MAX: usize = 1000;
/// [`OP_INPUT`]'s `words[3]` flag: the input ends after these bytes.
pub const INPUT_END: u64 = 1 << 32;
/// `OP_SPAWN`'s core word: the program's standard input is a pipe on its machine that the
/// caller writes with [`OP_INPUT`] (without it: that machine's console).
pub const SPAWN_STDIN: u64 = 1 << 33;

/// `OP_SPAWN`'s core word: the low 32 bits name the core, or this value for the other
/// machine's choice.
pub const ANY_CORE: u64 = 0xffff_ffff;
/// `OP_SPAWN`'s core word: the program's output goes to a pipe on its machine, which the
/// caller reads with `OP_OUTPUT` (without it: that machine's console).
pub const SPAWN_RELAY: u64 = 1 << 32;
/// How long a request waits for its answer unless told: a hang guard, well above any
/// round trip on the machines' link.
pub const DEFAULT_DEADLINE_NS: u64 = 2_000_000_000;
/// The longest deadline or timeout a request may ask for ([`OP_PING`]'s, [`OP_CALL`]'s;
/// `InvalidArgument` beyond): a request holds a place in its machine's window, which all
/// users share, until it ends.
pub const DEADLINE_MAX_NS: u64 = 10 * DEFAULT_DEADLINE_NS;
/// Heartbeat period.
pub const HEARTBEAT_NS: u64 = 100_000_000;
/// A machine silent this long is down; requests waiting on it end `Gone` then. Thirty
/// heartbeat periods: under TCG on a loaded host a guest can go hundreds of milliseconds
/// without running (0.5 s made live machines flap down with three QEMUs on two host cores).
pub const DOWN_AFTER_NS: u64 = 3_000_000_000;

/// Heard from within the heartbeat bound.
pub const UP: u64 = 1;
/// Heard from once, silent since.
pub const DOWN: u64 = 2;
/// Never heard from.
pub const NEVER: u64 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_frames_carry_header_payload_and_padding() {
        let mut f = [0xaau8; ETH_MIN];
        assert_eq!(frame_len(3), ETH_MIN);
        assert!(write_frame(&mut f, 1, 2, b"abc"));
        assert_eq!(&f[0..6], &mac(2));
        assert_eq!(&f[6..12], &mac(1));
        assert_eq!(&f[12..14], &[0x88, 0xb5]);
        assert_eq!(&f[14..17], b"abc");
        assert!(f[17..].iter().all(|&b| b == 0));
        let long = [7u8; 100];
        let mut g = [0u8; ETH_HEADER + 100];
        assert_eq!(frame_len(100), g.len());
        assert!(write_frame(&mut g, 0, 3, &long));
        assert_eq!(&g[ETH_HEADER..], &long[..]);
        // A buffer of the wrong length is refused, untouched.
        let mut h = [1u8; 61];
        assert!(!write_frame(&mut h, 0, 1, b"abc"));
        assert!(h.iter().all(|&b| b == 1));
    }

    #[test]
    fn fs_word_packs_machine_op_and_name_length() {
        let w = fs_word(3, 8, 4000);
        assert_eq!(w & 0xff, 3);
        assert_eq!((w >> 8) & 0xff, 8);
        assert_eq!((w >> 16) & 0xffff, 4000);
        // Out-of-range parts are cut to their fields, never spill into the next.
        assert_eq!(fs_word(0x1ff, 0, 0), 0xff);
        assert_eq!(fs_word(0, 0x1ff, 0) >> 16, 0);
    }

    #[test]
    fn call_word_round_trips_and_keeps_its_fields_apart() {
        let w = call_word(32, 896, 100, true);
        assert_eq!(call_parts(w), (32, 896, 100, true));
        assert_eq!(call_parts(call_word(1, 0, 0, false)), (1, 0, 0, false));
        // Out-of-range parts are cut to their fields.
        assert_eq!(
            call_parts(call_word(0x1ff, 0, 0, false)),
            (0xff, 0, 0, false)
        );
        assert_eq!(
            call_parts(call_word(0, 0x1ffff, 0, false)),
            (0, 0xffff, 0, false)
        );
        const { assert!(CALL_NAME_AT + CALL_NAME_MAX + CALL_REMOTE_MAX <= 4096) };
    }

    #[test]
    fn res_word_round_trips() {
        assert_eq!(
            res_parts(res_word(3, RES_OPEN, 32, 8)),
            (3, RES_OPEN, 32, 8)
        );
        assert_eq!(
            res_parts(res_word(0x1ff, 0x1ff, 0x1ffff, 0)),
            (0xff, 0xff, 0xffff, 0)
        );
        const { assert!(RES_DATA_AT + RES_REMOTE_MAX <= 4096) };
    }

    #[test]
    fn a_listing_is_cut_at_whole_lines() {
        let l = b"A.TXT 1\nBB.TXT 22\nDIR/ 0\n";
        assert_eq!(fit_listing(l, 100), (l.len(), 3, false));
        // 17 bytes: the first two lines (8 + 10 = 18) do not fit; the first does.
        assert_eq!(fit_listing(l, 17), (8, 1, true));
        assert_eq!(fit_listing(l, 18), (18, 2, true));
        // A line longer than the answer: nothing fits (the caller stops: no entries).
        assert_eq!(fit_listing(l, 5), (0, 0, true));
        assert_eq!(fit_listing(b"", 10), (0, 0, false));
    }
}
