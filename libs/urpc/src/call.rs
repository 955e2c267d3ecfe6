//! The two-way call slot: one cache line that carries a request and, overwriting it, the
//! reply, for one [`Client`] and one [`Server`]. The [`Ring`](crate::Ring)s stay the channel
//! for streams; this is the channel for calls, where the caller waits for each answer.
//!
//! # Why it exists
//!
//! A call over two one-way rings moves two lines: the request's slot in one ring, the
//! reply's slot in the other. Each store must first take its line back from the core
//! polling it, and that core's next poll must fetch it again. When request and reply
//! share one line, the server's poll that brings the request over also brings the line it
//! writes the reply to, and the client's poll brings it back: the cache-line ping-pong
//! floor, one line per call instead of one per direction. (docs/results/urpc.md measures
//! both; this is the "two-way call slot" that report proposes.)
//!
//! # Name
//!
//! In this crate's words a *slot* is one 64-byte line holding a message and the sequence
//! word that says which message it holds; a *call* is a request and its reply (the
//! RPC of URPC, the rendezvous of docs/design.md principle 3). A `CallSlot` is a slot that
//! carries a call; its two sides are the URPC paper's client and server.
//!
//! # Protocol
//!
//! ```text
//!  call line (64 bytes, 64-aligned)         second line: base, taken (split only)
//! +---------------------------+--------+
//! | message: 56 bytes         | seq u64|
//! +---------------------------+--------+
//!   request, then the reply    base + 2k - 1: request k is there (client stores)
//!                              base + 2k:     reply k is there   (server stores)
//! ```
//!
//! Call `k` (1, 2, 3, ...): the client writes the request and stores `base + 2k - 1` in the
//! sequence word (`Release`). The server polls that one word; when it reads `base + 2k - 1`
//! (`Acquire`) it reads the request, writes the reply over it and stores `base + 2k`
//! (`Release`). The client polls for `base + 2k` (`Acquire`) and reads the reply. Each
//! side knows the one value it waits for, so an old value is simply "not yet" and
//! neither side can take a message twice. Sequence numbers wrap like the ring's
//! ([`CallSlot::with_sequence_base`] starts just before the wrap for tests).
//!
//! **Memory ordering.** Request write → odd store (`Release`) → server's load (`Acquire`)
//! → request read → reply write → even store (`Release`) → client's load (`Acquire`) →
//! reply read → the next request write. Every arrow is program order or a release/acquire
//! pair, so the one message cell is never written while the other side reads or writes it
//! (`tests/loom.rs` checks this, and that a reply is never seen before its request was
//! taken). On x86 these are plain `mov`s.
//!
//! One call at a time: the client may not send a new request before it has collected the
//! reply ([`Busy`]), and the server may not take a new one before it has replied. Both are
//! errors handed back with the message, never a panic.
//!
//! ```
//! use urpc::{Busy, CallSlot};
//! static SLOT: CallSlot<u64> = CallSlot::new();
//!
//! let (mut client, mut server) = SLOT.split().expect("first split");
//! client.try_send(20).unwrap();
//! assert_eq!(client.try_send(21), Err(Busy(21))); // one call at a time
//! assert_eq!(client.try_recv(), None); // no reply yet
//! assert!(server.try_serve(|x| x + 1)); // takes 20, replies 21 in the same line
//! assert_eq!(client.try_recv(), Some(21));
//! assert!(!server.try_serve(|x| x)); // nothing new
//! ```
//!
//! A message of more than 56 bytes, or aligned to more than 8, does not compile:
//!
//! ```compile_fail
//! static SLOT: urpc::CallSlot<[u8; 57]> = urpc::CallSlot::new();
//! ```

#[cfg(all(test, not(loom)))]
mod tests;

use crate::sync::{spin_loop, AtomicU64, AtomicU8, Ordering, UnsafeCell};
use crate::{Payload, PAYLOAD_BYTES};
use core::marker::PhantomData;
use core::mem::{align_of, size_of, MaybeUninit};

/// [`Client::try_send`] was asked for a new call while the last one's reply is not
/// collected; the request is handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy<T>(pub T);

/// [`Server::reply`] was called with no request taken and unanswered; the reply is
/// handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoCall<T>(pub T);

/// The call line: the message, then the sequence word in the last 8 bytes.
#[repr(C, align(64))]
struct CallLine {
    /// The request, then the reply, as 7 words so a message type may need 8-byte alignment.
    msg: UnsafeCell<MaybeUninit<[u64; 7]>>,
    /// Odd steps from the base: a request is there; even: a reply (or nothing yet).
    seq: AtomicU64,
}

// The layout the design relies on (loom's atomics and cells are larger, so not there).
#[cfg(not(loom))]
const _: () = {
    assert!(size_of::<CallLine>() == 64);
    assert!(align_of::<CallLine>() == 64);
    assert!(core::mem::offset_of!(CallLine, seq) == PAYLOAD_BYTES);
};

/// Bits of `CallSlot::taken`.
const CLIENT: u8 = 1;
const SERVER: u8 = 2;

/// The shared memory of one call channel: the call line, and on a second line the
/// bookkeeping read only when the handles are handed out. See the module docs.
///
/// `T` is the message type of both request and reply (at most 56 bytes, alignment at most
/// 8; use an enum or union for different shapes). `CallSlot::new` is a `const fn`: 128
/// bytes, 64-aligned.
#[repr(C)]
pub struct CallSlot<T = Payload> {
    line: CallLine,
    /// The sequence word's value before the first call; `0` for [`CallSlot::new`].
    base: u64,
    /// Which handles were handed out: [`CLIENT`] and [`SERVER`] bits.
    taken: AtomicU8,
    _message: PhantomData<T>,
}

// SAFETY: the shared state is the sequence word and the message cell. The cell is touched
// only through the one `Client` and the one `Server` (each handed out once), and the
// sequence word hands it from one to the other with release/acquire pairs, so the two
// never access it at the same time (see `Client::try_send`, `Server::try_recv`). Messages
// move between threads: `T: Send`.
unsafe impl<T: Send> Sync for CallSlot<T> {}

impl<T: Copy> CallSlot<T> {
    /// Checked when a call slot type is instantiated: a compile error, not a run-time one.
    const LAYOUT_OK: () = assert!(
        size_of::<T>() <= PAYLOAD_BYTES && align_of::<T>() <= align_of::<u64>(),
        "urpc::CallSlot<T>: T must be at most 56 bytes, aligned to at most 8"
    );

    /// An idle call slot.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_sequence_base(0)
    }

    /// An idle call slot whose sequence word starts at `base` (wrapping): only useful to
    /// test the wrap of the sequence numbers.
    #[cfg(not(loom))]
    pub const fn with_sequence_base(base: u64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LAYOUT_OK;
        CallSlot {
            line: CallLine {
                msg: UnsafeCell::new(MaybeUninit::uninit()),
                seq: AtomicU64::new(base),
            },
            base,
            taken: AtomicU8::new(0),
            _message: PhantomData,
        }
    }

    /// An idle call slot (loom build: loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_sequence_base(0)
    }

    /// See the non-loom `with_sequence_base`.
    #[cfg(loom)]
    pub fn with_sequence_base(base: u64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LAYOUT_OK;
        CallSlot {
            line: CallLine {
                msg: UnsafeCell::new(MaybeUninit::uninit()),
                seq: AtomicU64::new(base),
            },
            base,
            taken: AtomicU8::new(0),
            _message: PhantomData,
        }
    }

    fn client(&self) -> Client<'_, T> {
        Client {
            slot: self,
            next: self.base.wrapping_add(1),
            waiting: false,
        }
    }

    fn server(&self) -> Server<'_, T> {
        Server {
            slot: self,
            expect: self.base.wrapping_add(1),
            owed: false,
        }
    }

    /// The client side, the first time it is asked for; `None` ever after.
    pub fn take_client(&self) -> Option<Client<'_, T>> {
        let before = self.taken.fetch_or(CLIENT, Ordering::AcqRel);
        (before & CLIENT == 0).then(|| self.client())
    }

    /// The server side, the first time it is asked for; `None` ever after.
    pub fn take_server(&self) -> Option<Server<'_, T>> {
        let before = self.taken.fetch_or(SERVER, Ordering::AcqRel);
        (before & SERVER == 0).then(|| self.server())
    }

    /// Both sides at once if neither was taken before (then it takes neither).
    pub fn split(&self) -> Option<(Client<'_, T>, Server<'_, T>)> {
        self.taken
            .compare_exchange(0, CLIENT | SERVER, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| (self.client(), self.server()))
    }
}

impl<T: Copy> Default for CallSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The calling side of a [`CallSlot`]: writes requests, reads replies.
pub struct Client<'s, T = Payload> {
    slot: &'s CallSlot<T>,
    /// The sequence value of the next request (`base + 2k - 1` for call `k`).
    next: u64,
    /// A request was sent and its reply not yet collected.
    waiting: bool,
}

impl<T: Copy> Client<'_, T> {
    /// Whether a call is outstanding (sent, reply not yet collected).
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// Sends a request, or hands it back in [`Busy`] if the last call's reply has not been
    /// collected with [`Self::try_recv`].
    pub fn try_send(&mut self, req: T) -> Result<(), Busy<T>> {
        if self.waiting {
            return Err(Busy(req));
        }
        self.slot.line.msg.with_mut(|p| {
            // SAFETY: `p` is 64-aligned and 56 bytes long, and `T` is at most 56 bytes with
            // alignment at most 8 (`LAYOUT_OK`). The server is not touching the cell: this
            // is the only client; it is not waiting, so the sequence word says "reply"
            // (we loaded it with `Acquire` in `try_recv` after the server wrote the reply
            // and stored it with `Release`), or nothing was ever sent; and the server will
            // not touch the cell again before it sees the `Release` store below.
            unsafe { p.cast::<T>().write(req) }
        });
        self.slot.line.seq.store(self.next, Ordering::Release);
        self.waiting = true;
        Ok(())
    }

    /// Whether the reply to the outstanding call is there (one load of the call line).
    #[inline(always)]
    pub fn is_ready(&self) -> bool {
        self.waiting && self.slot.line.seq.load(Ordering::Acquire) == self.next.wrapping_add(1)
    }

    /// The reply to the outstanding call, if it has arrived; `None` if it has not, or if
    /// no call is outstanding.
    pub fn try_recv(&mut self) -> Option<T> {
        if !self.is_ready() {
            return None;
        }
        let reply = self.slot.line.msg.with(|p| {
            // SAFETY: the sequence word holds this call's reply value (loaded with `Acquire`
            // in `is_ready`), which the server stored with `Release` after writing the reply,
            // so that write happened before this read and the bytes are a `T`. The server
            // will not touch the cell again until our next `Release` store of a request.
            unsafe { p.cast::<T>().read() }
        });
        self.next = self.next.wrapping_add(2);
        self.waiting = false;
        Some(reply)
    }

    /// Sends `req` and polls (with `spin_loop`) until its reply arrives. For a client on
    /// its own core with nothing else to do; [`Busy`] as for [`Self::try_send`].
    pub fn call(&mut self, req: T) -> Result<T, Busy<T>> {
        self.try_send(req)?;
        loop {
            if let Some(reply) = self.try_recv() {
                return Ok(reply);
            }
            spin_loop();
        }
    }
}

/// The answering side of a [`CallSlot`]: reads requests, writes replies over them.
pub struct Server<'s, T = Payload> {
    slot: &'s CallSlot<T>,
    /// The sequence value of the next request.
    expect: u64,
    /// A request was taken and not yet answered.
    owed: bool,
}

impl<T: Copy> Server<'_, T> {
    /// Whether a request is there that has not been taken (one load of the call line).
    #[inline(always)]
    pub fn is_ready(&self) -> bool {
        !self.owed && self.slot.line.seq.load(Ordering::Acquire) == self.expect
    }

    /// Whether a request was taken and not yet answered.
    pub fn owes_reply(&self) -> bool {
        self.owed
    }

    /// The next request, if it has arrived and the last one was answered. The server then
    /// owes a reply ([`Self::reply`]): the client waits for it.
    pub fn try_recv(&mut self) -> Option<T> {
        if !self.is_ready() {
            return None;
        }
        let req = self.slot.line.msg.with(|p| {
            // SAFETY: the sequence word equals `expect` (loaded with `Acquire` in
            // `is_ready`), which the client stored with `Release` after writing the request,
            // so the write happened before this read and the bytes are a `T` (size and
            // alignment as in `Client::try_send`). The client will not touch the cell
            // again until it sees our reply's `Release` store.
            unsafe { p.cast::<T>().read() }
        });
        self.owed = true;
        Some(req)
    }

    /// Answers the request taken by [`Self::try_recv`], in the same line; [`NoCall`] with
    /// the reply if there is none to answer.
    pub fn reply(&mut self, rep: T) -> Result<(), NoCall<T>> {
        if !self.owed {
            return Err(NoCall(rep));
        }
        self.slot.line.msg.with_mut(|p| {
            // SAFETY: we took request `expect` and have not answered it, so the client is
            // waiting and does not touch the cell (it reads it only after our `Release`
            // store below, and writes it only after reading the reply); our own read of the
            // request is finished. Size and alignment as in `Client::try_send`.
            unsafe { p.cast::<T>().write(rep) }
        });
        self.slot
            .line
            .seq
            .store(self.expect.wrapping_add(1), Ordering::Release);
        self.expect = self.expect.wrapping_add(2);
        self.owed = false;
        Ok(())
    }

    /// Takes the next request if it has arrived and answers it with `f(request)` at once;
    /// whether there was one. (`false` too while a reply taken by `try_recv` is owed.)
    #[inline]
    pub fn try_serve(&mut self, f: impl FnOnce(T) -> T) -> bool {
        match self.try_recv() {
            Some(req) => {
                let answered = self.reply(f(req));
                debug_assert!(answered.is_ok());
                true
            }
            None => false,
        }
    }
}
