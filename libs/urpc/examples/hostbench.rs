//! The measuring half of `cargo xtask bench urpc` (host mode): urpc against
//! `crossbeam-channel` (bounded) and `rtrb`, and against the hardware floor, between two
//! threads pinned to host cores 0 and 1. xtask builds this with `cargo build --release`
//! (optimised) and reads the `BENCH {json}` lines it prints, one per sample.
//!
//! Cases, all with 56-byte messages and 64-slot rings/channels:
//!
//! - **round trip**: core 0 sends message `i`, core 1 sends it back, core 0 checks it; the
//!   sample is the mean over `--round-trips` round trips after a warm-up, in ns. One
//!   channel each way; or one `urpc::CallSlot` for both ways (the reply overwrites the
//!   request in its line: core 0 calls, core 1 answers with the message it got).
//! - **floor**: the same round trip with no channel: both threads alternately write and
//!   poll one `AtomicU64` on a line of its own, the least any shared-memory exchange pays.
//!   And the same with one line per direction (each thread writes its own line and polls
//!   the other's), which is the least a pair of one-way channels pays.
//! - **throughput**: core 0 streams `--messages` messages, core 1 receives and checks them;
//!   messages per µs, timed on the receiver from the end of the warm-up to the last one.
//!
//! Every side polls: `try_send`/`try_recv` in a loop with `spin_loop()` (a `pause`)
//! between failed attempts, for every channel, so the comparison is between data
//! structures, not between spinning and sleeping (crossbeam's blocking `recv` would park
//! the thread); the call slot's `call` and `try_serve` poll the same way.
//!
//! Usage: `hostbench [--runs R] [--round-trips K] [--messages M]`.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

type Msg = urpc::Payload;
const SLOTS: usize = 64;
const BATCH: usize = 16;
const FLOOR: &str = "round trip: cache-line ping-pong (floor)";
const FLOOR_2: &str = "round trip: ping-pong, one line each way";
const RT_CALL: &str = "round trip: urpc call slot";

fn msg(i: u64) -> Msg {
    let mut m = [i as u8; urpc::PAYLOAD_BYTES];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m
}

fn check(m: &Msg, i: u64) {
    let got = u64::from_le_bytes(m[..8].try_into().unwrap());
    assert!(got == i && m[55] == i as u8, "message {i} arrived as {got}");
}

fn pin(core: usize) {
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        panic!("cannot pin a thread to core {core}");
    }
}

/// One direction of a channel, as each peer library spells it.
trait Tx: Send {
    fn try_send(&mut self, m: Msg) -> bool;
    /// Sends a prefix of `ms`; returns its length.
    fn send_some(&mut self, ms: &[Msg]) -> usize {
        ms.iter().take_while(|m| self.try_send(**m)).count()
    }
}

trait Rx: Send {
    fn try_recv(&mut self) -> Option<Msg>;
    /// Receives what is ready, up to `out.len()`.
    fn recv_some(&mut self, out: &mut [Msg]) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.try_recv() {
                Some(m) => out[n] = m,
                None => break,
            }
            n += 1;
        }
        n
    }
}

fn send(tx: &mut impl Tx, m: Msg) {
    while !tx.try_send(m) {
        spin_loop();
    }
}

fn recv(rx: &mut impl Rx) -> Msg {
    loop {
        if let Some(m) = rx.try_recv() {
            return m;
        }
        spin_loop();
    }
}

impl<const N: usize> Tx for urpc::Sender<'_, N> {
    fn try_send(&mut self, m: Msg) -> bool {
        urpc::Sender::try_send(self, m).is_ok()
    }
    fn send_some(&mut self, ms: &[Msg]) -> usize {
        self.send_batch(ms)
    }
}
impl<const N: usize> Rx for urpc::Receiver<'_, N> {
    fn try_recv(&mut self) -> Option<Msg> {
        urpc::Receiver::try_recv(self)
    }
    fn recv_some(&mut self, out: &mut [Msg]) -> usize {
        self.recv_batch(out)
    }
}
impl Tx for rtrb::Producer<Msg> {
    fn try_send(&mut self, m: Msg) -> bool {
        self.push(m).is_ok()
    }
}
impl Rx for rtrb::Consumer<Msg> {
    fn try_recv(&mut self) -> Option<Msg> {
        self.pop().ok()
    }
}
impl Tx for crossbeam_channel::Sender<Msg> {
    fn try_send(&mut self, m: Msg) -> bool {
        crossbeam_channel::Sender::try_send(self, m).is_ok()
    }
}
impl Rx for crossbeam_channel::Receiver<Msg> {
    fn try_recv(&mut self) -> Option<Msg> {
        crossbeam_channel::Receiver::try_recv(self).ok()
    }
}

/// Mean ns per round trip: core 0 sends on `a_tx`, core 1 echoes from `b_rx` to `b_tx`.
fn round_trip(
    (mut a_tx, mut b_rx): (impl Tx, impl Rx),
    (mut b_tx, mut a_rx): (impl Tx, impl Rx),
    warm: u64,
    rounds: u64,
) -> f64 {
    thread::scope(|s| {
        s.spawn(move || {
            pin(1);
            for _ in 0..warm + rounds {
                let m = recv(&mut b_rx);
                send(&mut b_tx, m);
            }
        });
        let a = s.spawn(move || {
            pin(0);
            let mut go = |i: u64| {
                send(&mut a_tx, msg(i));
                check(&recv(&mut a_rx), i);
            };
            (0..warm).for_each(&mut go);
            let t = Instant::now();
            (warm..warm + rounds).for_each(&mut go);
            t.elapsed().as_nanos() as f64 / rounds as f64
        });
        a.join().unwrap()
    })
}

/// Mean ns per round trip through one call slot: core 0 calls, core 1 answers each
/// request with itself (as the echo of `round_trip`), core 0 checks the reply.
fn call_round_trip(warm: u64, rounds: u64) -> f64 {
    // 128-aligned like the floor's line, so the adjacent-line prefetcher's pair holds the
    // call line and the slot's own bookkeeping line (untouched during calls), nothing else.
    #[repr(align(128))]
    struct Aligned(urpc::CallSlot);
    let slot = Box::new(Aligned(urpc::CallSlot::new()));
    let (mut client, mut server) = slot.0.split().expect("a fresh call slot");
    thread::scope(|s| {
        s.spawn(move || {
            pin(1);
            let mut served = 0;
            while served < warm + rounds {
                if server.try_serve(|m| m) {
                    served += 1;
                } else {
                    spin_loop();
                }
            }
        });
        let a = s.spawn(move || {
            pin(0);
            let mut go = |i: u64| {
                let reply = client.call(msg(i)).expect("no call outstanding");
                check(&reply, i);
            };
            (0..warm).for_each(&mut go);
            let t = Instant::now();
            (warm..warm + rounds).for_each(&mut go);
            t.elapsed().as_nanos() as f64 / rounds as f64
        });
        a.join().unwrap()
    })
}

/// A 128-byte-aligned line, so the adjacent-line prefetcher's pair holds nothing else.
#[repr(align(128))]
struct Line(AtomicU64);

/// The hardware floor: ns per round trip of the plain cache-line ping-pong. With
/// `lines == 1` both threads write and poll one `AtomicU64`; with `lines == 2` each thread
/// writes its own line and polls the other's, the way two one-way channels must.
fn ping_pong(lines: usize, warm: u64, rounds: u64) -> f64 {
    let (x, y) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    // One line: core 0 writes odd values and waits for the even ones; two: core 0 writes
    // `i + 1` on its line and waits for `i + 1` on core 1's.
    let (to_b, to_a) = if lines == 1 {
        (&x.0, &x.0)
    } else {
        (&x.0, &y.0)
    };
    let step = if lines == 1 { 2 } else { 1 };
    let ping = move |i: u64| step * i + 1;
    let pong = move |i: u64| step * i + step;
    let wait = |line: &AtomicU64, v: u64| {
        while line.load(Ordering::Acquire) != v {
            spin_loop();
        }
    };
    thread::scope(|s| {
        s.spawn(move || {
            pin(1);
            for i in 0..warm + rounds {
                wait(to_b, ping(i));
                to_a.store(pong(i), Ordering::Release);
            }
        });
        let a = s.spawn(move || {
            pin(0);
            let go = |i: u64| {
                to_b.store(ping(i), Ordering::Release);
                wait(to_a, pong(i));
            };
            (0..warm).for_each(go);
            let t = Instant::now();
            (warm..warm + rounds).for_each(go);
            t.elapsed().as_nanos() as f64 / rounds as f64
        });
        a.join().unwrap()
    })
}

/// Messages per µs from core 0 to core 1, `batched` with `send_some`/`recv_some`.
fn throughput((mut tx, mut rx): (impl Tx, impl Rx), warm: u64, count: u64, batched: bool) -> f64 {
    let total = warm + count;
    thread::scope(|s| {
        s.spawn(move || {
            pin(0);
            let mut i = 0;
            let mut batch = [[0u8; urpc::PAYLOAD_BYTES]; BATCH];
            while i < total {
                if batched {
                    let n = (total - i).min(BATCH as u64) as usize;
                    for (k, m) in batch[..n].iter_mut().enumerate() {
                        *m = msg(i + k as u64);
                    }
                    let mut sent = 0;
                    while sent < n {
                        let k = tx.send_some(&batch[sent..n]);
                        if k == 0 {
                            spin_loop();
                        }
                        sent += k;
                    }
                    i += n as u64;
                } else {
                    send(&mut tx, msg(i));
                    i += 1;
                }
            }
        });
        let r = s.spawn(move || {
            pin(1);
            let mut start = Instant::now();
            let mut buf = [[0u8; urpc::PAYLOAD_BYTES]; BATCH];
            let mut i = 0;
            while i < total {
                let n = if batched {
                    rx.recv_some(&mut buf)
                } else {
                    rx.try_recv().map(|m| buf[0] = m).is_some() as usize
                };
                if n == 0 {
                    spin_loop();
                }
                for m in &buf[..n] {
                    check(m, i);
                    i += 1;
                    if i == warm {
                        start = Instant::now();
                    }
                }
            }
            count as f64 / (start.elapsed().as_nanos() as f64 / 1000.0)
        });
        r.join().unwrap()
    })
}

fn urpc_pair(ring: &urpc::Ring<SLOTS>) -> (urpc::Sender<'_, SLOTS>, urpc::Receiver<'_, SLOTS>) {
    ring.split().expect("a fresh ring")
}

fn emit(case: &str, value: f64) {
    println!("BENCH {{\"case\":\"{case}\",\"value\":{value:.3}}}");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut runs, mut rounds, mut messages) = (5u64, 200_000u64, 2_000_000u64);
    while let Some(a) = args.next() {
        let v: u64 = args
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{a} needs a number"));
        match a.as_str() {
            "--runs" => runs = v,
            "--round-trips" => rounds = v,
            "--messages" => messages = v,
            _ => panic!("unknown argument {a}"),
        }
    }
    let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
    assert!(cores >= 2, "need two cores to pin to, have {cores}");
    let (warm_rt, warm_tp) = (rounds / 10, messages / 10);
    println!("INFO cores={cores} runs={runs} round_trips={rounds}+{warm_rt} messages={messages}+{warm_tp} slots={SLOTS}");
    for run in 0..runs {
        emit(FLOOR, ping_pong(1, warm_rt, rounds));
        emit(FLOOR_2, ping_pong(2, warm_rt, rounds));
        let (ab, ba) = (Box::new(urpc::Ring::new()), Box::new(urpc::Ring::new()));
        let rt = round_trip(urpc_pair(&ab), urpc_pair(&ba), warm_rt, rounds);
        emit("round trip: urpc", rt);
        emit(RT_CALL, call_round_trip(warm_rt, rounds));
        let rt = round_trip(
            rtrb::RingBuffer::new(SLOTS),
            rtrb::RingBuffer::new(SLOTS),
            warm_rt,
            rounds,
        );
        emit("round trip: rtrb", rt);
        let (ab, ba) = (
            crossbeam_channel::bounded(SLOTS),
            crossbeam_channel::bounded(SLOTS),
        );
        emit(
            "round trip: crossbeam bounded",
            round_trip(ab, ba, warm_rt, rounds),
        );

        let ring = Box::new(urpc::Ring::new());
        let tp = throughput(urpc_pair(&ring), warm_tp, messages, false);
        emit("throughput: urpc", tp);
        let ring = Box::new(urpc::Ring::new());
        let tp = throughput(urpc_pair(&ring), warm_tp, messages, true);
        emit(&format!("throughput: urpc, batches of {BATCH}"), tp);
        let tp = throughput(rtrb::RingBuffer::new(SLOTS), warm_tp, messages, false);
        emit("throughput: rtrb", tp);
        let tp = throughput(crossbeam_channel::bounded(SLOTS), warm_tp, messages, false);
        emit("throughput: crossbeam bounded", tp);
        eprintln!("hostbench: run {} of {runs} done", run + 1);
    }
    println!("BENCH done");
}
