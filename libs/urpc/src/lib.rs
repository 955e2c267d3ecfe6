//! URPC message rings, after Barrelfish's user-level RPC (UMP): the channel Musubi's cores
//! will use to ask each other for work, one [`Ring`] per ordered pair of cores, one sender
//! and one receiver each.
//!
//! # Design: one cache line per message
//!
//! A ring is `N` slots of 64 bytes, each on its own cache line (`N` a power of two). A slot
//! carries 56 bytes of payload and, in its last 8 bytes, a *sequence word*:
//!
//! ```text
//!  slot i  (64 bytes, 64-aligned)         ack line (64 bytes)
//! +---------------------------+--------+  +-----------+--------------------+
//! | payload: 56 bytes         | seq u64|  | consumed  | (padding)          |
//! +---------------------------+--------+  +-----------+--------------------+
//!   written by the sender      written       written by the receiver every N/2
//!   first                      last,         messages, read by the sender only
//!                              Release       when its cached count says "full"
//! ```
//!
//! The sender numbers its messages 1, 2, 3, ... (plus a base, see below); message `s` goes
//! in slot `(s - 1) mod N`. It writes the payload, then stores `s` in the slot's sequence
//! word with `Release`. The receiver knows which number it expects next and where it will
//! be, so it polls exactly one word: when the slot's sequence word equals the expected
//! number (`Acquire`), the payload is there. A slot still holding the previous lap's
//! number (`s - N`) or the initial value is simply "not yet".
//!
//! **Why no shared head and tail.** A classic ring (Lamport's queue) keeps a head index
//! written by the consumer and a tail index written by the producer; each side reads the
//! other's index, so every message moves *three* cache lines between the cores: the slot,
//! the tail and the head. Caching the other side's index (as `rtrb` does) removes most of
//! that, but the receiver must still read the tail line to learn that a slot is full. Here
//! the slot says so itself, so a message costs one line transfer, the one that carries
//! its data: the floor set by the coherence protocol. With a 56-byte payload an RPC
//! request or reply fits in it.
//!
//! **Acknowledgements.** The sender must not overwrite a slot the receiver has not read.
//! Instead of reading the receiver's position per message, the sender keeps a count of the
//! messages it knows are consumed. The receiver publishes its consumed count (the highest
//! sequence number read) in the *ack line* every `max(N/2, 1)` messages
//! ([`Receiver::ACK_EVERY`]), or at once when asked ([`Receiver::ack`]). The sender looks
//! at the ack line only when its own count says the ring is full; if it still is,
//! [`Sender::try_send`] returns [`Full`] with the message: back-pressure, never an
//! overwrite. This cannot deadlock: when the sender sees `N` unacknowledged messages, at
//! most `N/2 - 1` of them are consumed and unpublished, so the receiver still has messages
//! to read and will publish when it has read them. (Barrelfish piggybacks the ack on the
//! reverse channel; a separate line keeps the two directions independent.)
//!
//! **Memory ordering.** Payload write → sequence store (`Release`) → receiver's sequence
//! load (`Acquire`) → payload read → ack store (`Release`) → sender's ack load (`Acquire`)
//! → the next payload write to that slot. Each arrow is program order or a
//! release/acquire pair, so a payload is never read while being written (`tests/loom.rs`
//! checks exactly this). On x86 every one of these is a plain `mov`.
//!
//! **Batching.** Every slot has its own sequence word, so a receiver that finds several
//! messages ready drains them in one pass, one line each, with no extra shared state; the
//! sender's free-space check is already amortised over `N/2` messages. [`Sender::send_batch`]
//! and [`Receiver::recv_batch`] add only one free-space check per batch and one ack per
//! batch; they exist for callers that have a batch anyway.
//!
//! **Sequence numbers** are `u64` and wrap (after 2^64 messages, in practice never); every
//! comparison is an equality or a wrapping difference, so the wrap is harmless, and
//! [`Ring::with_sequence_base`] starts a ring just before it so tests can watch it happen.
//!
//! **Calls.** A call over two rings moves two lines, the request's and the reply's. A
//! [`CallSlot`] (`src/call.rs`) is one line that carries the request and then, written over
//! it, the reply: one [`Client`], one [`Server`], one call at a time, the cache-line
//! ping-pong floor. Rings stay the channel for streams.
//!
//! # Use
//!
//! The caller provides the memory: a `static`, a field of a per-core record, a `Box`. The
//! [`Sender`] and [`Receiver`] handles hold each side's private state (next sequence
//! number, cached ack) and borrow the ring, so it cannot move or go away under them. Each
//! can be taken once ([`Ring::split`], or [`Ring::take_sender`] on one core and
//! [`Ring::take_receiver`] on another), so there is exactly one of each; dropping a handle
//! does not give it back, since part of the channel's state dies with it.
//!
//! ```
//! use urpc::{Ring, Full};
//! static RING: Ring<8> = Ring::new(); // 8 slots of 56-byte messages; 576 bytes
//!
//! let (mut tx, mut rx) = RING.split().expect("first split");
//! assert!(RING.split().is_none()); // only one sender and one receiver, ever
//! tx.try_send([7; 56]).unwrap();
//! assert_eq!(rx.try_recv(), Some([7; 56]));
//! // The message just read is not acknowledged yet (acks come every N/2 = 4), so 7 fit.
//! for i in 0..7 { tx.try_send([i; 56]).unwrap(); }
//! assert_eq!(tx.try_send([9; 56]), Err(Full([9; 56]))); // back-pressure
//! rx.ack(); // publish the consumed count now
//! tx.try_send([9; 56]).unwrap();
//! ```
//!
//! Any `Copy + Send` type of at most 56 bytes and alignment at most 8 can be the message
//! type (`Ring<N, MyMsg>`); anything larger does not compile:
//!
//! ```compile_fail
//! static RING: urpc::Ring<4, [u8; 57]> = urpc::Ring::new();
//! ```
//!
//! # Tests
//!
//! `cargo test -p urpc` runs the unit tests (`src/tests.rs`) and a two-thread stress test
//! (`tests/stress.rs`). The model check of the protocol with `loom`, which explores the
//! interleavings and weak-memory behaviours of small rings, is not part of plain
//! `cargo test`; run it with its own target directory, so the `--cfg loom` build does not
//! replace the ordinary one (about 30 s after a 40 s build; one test at a time, because two
//! at once took more than twice as long on a 2-core machine):
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p urpc --release --test loom --target-dir target/loom -- --test-threads 1
//! ```
#![cfg_attr(not(any(test, loom)), no_std)]

mod call;
mod sync;
#[cfg(all(test, not(loom)))]
mod tests;

pub use call::{Busy, CallSlot, Client, NoCall, Server};

use core::marker::PhantomData;
use core::mem::{align_of, size_of, MaybeUninit};
use sync::{AtomicU64, AtomicU8, Ordering, UnsafeCell};

/// Payload bytes per slot: a 64-byte cache line less the 8-byte sequence word.
pub const PAYLOAD_BYTES: usize = 56;

/// The default message type: 56 raw bytes.
pub type Payload = [u8; PAYLOAD_BYTES];

/// [`Sender::try_send`] found the ring full; the message is handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full<T>(pub T);

/// One message slot: one cache line, the sequence word in its last 8 bytes.
#[repr(C, align(64))]
struct Slot {
    /// The message, as 7 words so a message type may need 8-byte alignment.
    payload: UnsafeCell<MaybeUninit<[u64; 7]>>,
    /// The sequence number of the message in `payload`, stored after it with `Release`.
    seq: AtomicU64,
}

impl Slot {
    #[cfg(not(loom))]
    const fn new(seq: u64) -> Slot {
        Slot {
            payload: UnsafeCell::new(MaybeUninit::uninit()),
            seq: AtomicU64::new(seq),
        }
    }
    #[cfg(loom)]
    fn new(seq: u64) -> Slot {
        Slot {
            payload: UnsafeCell::new(MaybeUninit::uninit()),
            seq: AtomicU64::new(seq),
        }
    }
}

// The layout the design relies on (loom's atomics and cells are larger, so not there).
#[cfg(not(loom))]
const _: () = {
    assert!(size_of::<Slot>() == 64);
    assert!(align_of::<Slot>() == 64);
    assert!(core::mem::offset_of!(Slot, seq) == PAYLOAD_BYTES);
};

/// Bits of `Ring::taken`.
const SENDER: u8 = 1;
const RECEIVER: u8 = 2;

/// The ack line: written by the receiver, read by the sender, on a line of its own.
#[repr(C, align(64))]
struct AckLine {
    /// The highest sequence number the receiver has consumed and published.
    consumed: AtomicU64,
}

/// The shared memory of one channel: `N` slots and the ack line. See the crate docs.
///
/// `N` must be a power of two; `T` is the message type (at most 56 bytes, alignment at
/// most 8). `Ring::new` is a `const fn`, so a ring can live in a `static` or inside a
/// per-core record; `N * 64 + 128` bytes, 64-aligned.
#[repr(C)]
pub struct Ring<const N: usize, T = Payload> {
    slots: [Slot; N],
    ack: AckLine,
    /// The sequence number "before" the first message; `0` for [`Ring::new`].
    base: u64,
    /// Which handles were handed out: [`SENDER`] and [`RECEIVER`] bits.
    taken: AtomicU8,
    _message: PhantomData<T>,
}

// SAFETY: the shared state is atomics plus the payload cells. A payload cell is written
// only through the one `Sender` and read only through the one `Receiver` (each handed out
// once, see `take_sender`/`take_receiver`), and the sequence/ack protocol orders every
// write before the reads of that message and every read before the next write to the
// slot (see `Sender::write` and `Receiver::read`). Messages move between threads: `T: Send`.
unsafe impl<const N: usize, T: Send> Sync for Ring<N, T> {}

impl<const N: usize, T: Copy> Ring<N, T> {
    /// Checked when a ring type is instantiated: a compile error, not a run-time one.
    const LAYOUT_OK: () = assert!(
        N.is_power_of_two()
            && size_of::<T>() <= PAYLOAD_BYTES
            && align_of::<T>() <= align_of::<u64>(),
        "urpc::Ring<N, T>: N must be a power of two and T at most 56 bytes, aligned to at most 8"
    );

    /// The ring's capacity in messages.
    pub const CAPACITY: usize = N;

    /// An empty ring.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_sequence_base(0)
    }

    /// An empty ring whose first message will carry sequence number `base + 1` (wrapping).
    /// Only useful to test the wrap of the sequence numbers: `Ring::new()` is base 0.
    #[cfg(not(loom))]
    pub const fn with_sequence_base(base: u64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LAYOUT_OK;
        // Every slot starts as if it held message `base`, the one "before" the first: the
        // receiver expects `base + 1 + i` in slot i on the first lap, never `base`.
        let mut slots = [const { Slot::new(0) }; N];
        let mut i = 0;
        while i < N {
            slots[i] = Slot::new(base);
            i += 1;
        }
        Ring {
            slots,
            ack: AckLine {
                consumed: AtomicU64::new(base),
            },
            base,
            taken: AtomicU8::new(0),
            _message: PhantomData,
        }
    }

    /// An empty ring (loom build: loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_sequence_base(0)
    }

    /// See the non-loom `with_sequence_base`.
    #[cfg(loom)]
    pub fn with_sequence_base(base: u64) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::LAYOUT_OK;
        Ring {
            slots: core::array::from_fn(|_| Slot::new(base)),
            ack: AckLine {
                consumed: AtomicU64::new(base),
            },
            base,
            taken: AtomicU8::new(0),
            _message: PhantomData,
        }
    }

    fn sender(&self) -> Sender<'_, N, T> {
        Sender {
            ring: self,
            next: self.base.wrapping_add(1),
            pos: 0,
            acked: self.base,
        }
    }

    fn receiver(&self) -> Receiver<'_, N, T> {
        Receiver {
            ring: self,
            expect: self.base.wrapping_add(1),
            pos: 0,
            published: self.base,
        }
    }

    /// The sending side, the first time it is asked for; `None` ever after.
    pub fn take_sender(&self) -> Option<Sender<'_, N, T>> {
        let before = self.taken.fetch_or(SENDER, Ordering::AcqRel);
        (before & SENDER == 0).then(|| self.sender())
    }

    /// The receiving side, the first time it is asked for; `None` ever after.
    pub fn take_receiver(&self) -> Option<Receiver<'_, N, T>> {
        let before = self.taken.fetch_or(RECEIVER, Ordering::AcqRel);
        (before & RECEIVER == 0).then(|| self.receiver())
    }

    /// Both sides at once if neither was taken before (then it takes neither).
    pub fn split(&self) -> Option<(Sender<'_, N, T>, Receiver<'_, N, T>)> {
        self.taken
            .compare_exchange(0, SENDER | RECEIVER, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| (self.sender(), self.receiver()))
    }
}

impl<const N: usize, T: Copy> Default for Ring<N, T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The sending side of a [`Ring`]: the only writer of its slots.
pub struct Sender<'r, const N: usize, T = Payload> {
    ring: &'r Ring<N, T>,
    /// Sequence number of the next message.
    next: u64,
    /// Slot of the next message: `(next - base - 1) mod N`.
    pos: usize,
    /// Highest sequence number known to be consumed (last ack read).
    acked: u64,
}

impl<const N: usize, T: Copy> Sender<'_, N, T> {
    /// Messages sent and not yet known to be consumed.
    fn in_flight(&self) -> usize {
        self.next.wrapping_sub(1).wrapping_sub(self.acked) as usize
    }

    /// Free slots as far as the last ack says; reads the ack line if fewer than `want`.
    fn free(&mut self, want: usize) -> usize {
        let mut free = N - self.in_flight();
        if free < want {
            self.acked = self.ring.ack.consumed.load(Ordering::Acquire);
            free = N - self.in_flight();
        }
        free
    }

    /// Writes `msg` into the next slot. The caller has checked that it is free.
    #[inline(always)]
    fn write(&mut self, msg: T) {
        let slot = &self.ring.slots[self.pos];
        slot.payload.with_mut(|p| {
            // SAFETY: `p` is 64-aligned (the slot is) and 56 bytes long, and `T` is at most
            // 56 bytes with alignment at most 8 (`LAYOUT_OK`). No one else touches the cell
            // now: this is the only `Sender`; the receiver is done with the slot's previous
            // message (`free` counted it as consumed from an `Acquire` load of the ack the
            // receiver stored with `Release` after reading it), and it will not read the
            // slot again before it sees the `Release` store of `next` below.
            unsafe { p.cast::<T>().write(msg) }
        });
        slot.seq.store(self.next, Ordering::Release);
        self.next = self.next.wrapping_add(1);
        self.pos = (self.pos + 1) & (N - 1);
    }

    /// Sends `msg`, or hands it back in [`Full`] if all `N` slots hold messages the
    /// receiver has not acknowledged (it acknowledges every [`Receiver::ACK_EVERY`]).
    pub fn try_send(&mut self, msg: T) -> Result<(), Full<T>> {
        if self.free(1) == 0 {
            return Err(Full(msg));
        }
        self.write(msg);
        Ok(())
    }

    /// Sends as many of `msgs`, in order, as there is room for; returns how many. The
    /// ack line is read at most once.
    pub fn send_batch(&mut self, msgs: &[T]) -> usize {
        let n = self.free(msgs.len()).min(msgs.len());
        for &m in &msgs[..n] {
            self.write(m);
        }
        n
    }

    /// Free slots, reading the ack line if the cached count says the ring is full.
    pub fn free_slots(&mut self) -> usize {
        self.free(1)
    }
}

/// The receiving side of a [`Ring`]: the only reader of its slots.
pub struct Receiver<'r, const N: usize, T = Payload> {
    ring: &'r Ring<N, T>,
    /// Sequence number of the next message.
    expect: u64,
    /// Slot of the next message.
    pos: usize,
    /// The last value stored in the ack line.
    published: u64,
}

impl<const N: usize, T: Copy> Receiver<'_, N, T> {
    /// The receiver publishes its consumed count every this many messages.
    pub const ACK_EVERY: usize = if N >= 2 { N / 2 } else { 1 };

    /// Whether the next message is there (one load of one line).
    #[inline(always)]
    pub fn is_ready(&self) -> bool {
        self.ring.slots[self.pos].seq.load(Ordering::Acquire) == self.expect
    }

    /// Reads the next message; the caller has seen `is_ready`.
    #[inline(always)]
    fn read(&mut self) -> T {
        let slot = &self.ring.slots[self.pos];
        let msg = slot.payload.with(|p| {
            // SAFETY: the slot's sequence word equals `expect` (loaded with `Acquire` in
            // `is_ready`), so the sender's write of this message, which precedes its
            // `Release` store of `expect`, happened before this read, and the bytes are a
            // `T` it wrote (alignment and size as in `Sender::write`). The sender will not
            // write the slot again until the ack we store (`Release`) after this read says
            // this message was consumed.
            unsafe { p.cast::<T>().read() }
        });
        self.expect = self.expect.wrapping_add(1);
        self.pos = (self.pos + 1) & (N - 1);
        msg
    }

    /// Consumed messages not yet published in the ack line.
    fn unpublished(&self) -> usize {
        self.expect.wrapping_sub(1).wrapping_sub(self.published) as usize
    }

    fn ack_if_due(&mut self) {
        if self.unpublished() >= Self::ACK_EVERY {
            self.ack();
        }
    }

    /// The next message, if it has arrived.
    pub fn try_recv(&mut self) -> Option<T> {
        if !self.is_ready() {
            return None;
        }
        let msg = self.read();
        self.ack_if_due();
        Some(msg)
    }

    /// Receives the messages that are ready, up to `out.len()`, in order; returns how
    /// many. The ack line is written at most once.
    pub fn recv_batch(&mut self, out: &mut [T]) -> usize {
        let mut n = 0;
        while n < out.len() && self.is_ready() {
            out[n] = self.read();
            n += 1;
        }
        self.ack_if_due();
        n
    }

    /// Publishes the consumed count now (if it changed), instead of waiting for the next
    /// [`Self::ACK_EVERY`] boundary: for a receiver about to stop polling for a while.
    pub fn ack(&mut self) {
        let consumed = self.expect.wrapping_sub(1);
        if consumed != self.published {
            self.published = consumed;
            self.ring.ack.consumed.store(consumed, Ordering::Release);
        }
    }
}
