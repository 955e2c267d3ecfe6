//! Model check of the ring protocol with `loom`: every interleaving of a sender thread and
//! a receiver thread on small rings, under the C++11 memory
//! model (as loom models it). loom's `UnsafeCell` fails the run if a payload read could overlap or miss a
//! payload write, i.e. if the sequence-word or ack orderings were too weak; the asserts
//! check order and content. The call slot's tests check the same of its one line, and
//! that no reply is seen before its request was taken, no call is lost or answered
//! twice. Built only with `--cfg loom`:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p urpc --release --test loom --target-dir target/loom -- --test-threads 1
//! ```
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use urpc::{Busy, CallSlot, Full, NoCall, Ring};

/// Runs `body` with rings that its (necessarily `'static`) threads can borrow, and frees
/// them afterwards; `body` must join every thread it spawns.
fn with_rings<const N: usize>(
    base: u64,
    body: impl FnOnce(&'static Ring<N, u64>, &'static Ring<N, u64>),
) {
    let a = Box::into_raw(Box::new(Ring::with_sequence_base(base)));
    let b = Box::into_raw(Box::new(Ring::with_sequence_base(base)));
    // SAFETY: both pointers come from `Box::into_raw` and stay valid until the end.
    body(unsafe { &*a }, unsafe { &*b });
    // SAFETY: `body` joined its threads, and the handles that borrowed the rings ended
    // with it, so nothing refers to them any more. (If `body` panics, they leak.)
    unsafe {
        drop(Box::from_raw(a));
        drop(Box::from_raw(b));
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    // No preemption bound: loom explores every interleaving of these small runs (about
    // 1.3 million executions, half a minute). LOOM_MAX_PREEMPTIONS=N bounds the search.
    loom::model::Builder::new().check(f);
}

/// Messages `0..count`, sent one by one (or in batches of up to 3), received in order.
fn stream<const N: usize>(base: u64, count: u64, batched: bool) {
    model(move || {
        with_rings::<N>(base, |ring, _| {
            let (mut tx, mut rx) = ring.split().unwrap();
            let sender = thread::spawn(move || {
                let mut i = 0;
                while i < count {
                    if batched {
                        let batch = [i, i + 1, i + 2];
                        let len = (count - i).min(3) as usize;
                        i += tx.send_batch(&batch[..len]) as u64;
                    } else {
                        match tx.try_send(i) {
                            Ok(()) => i += 1,
                            Err(Full(m)) => assert_eq!(m, i),
                        }
                    }
                    thread::yield_now();
                }
            });
            let mut expect = 0;
            let mut buf = [0u64; 3];
            while expect < count {
                if batched {
                    let n = rx.recv_batch(&mut buf);
                    for &m in &buf[..n] {
                        assert_eq!(m, expect);
                        expect += 1;
                    }
                } else if let Some(m) = rx.try_recv() {
                    assert_eq!(m, expect);
                    expect += 1;
                }
                thread::yield_now();
            }
            sender.join().unwrap();
            assert_eq!(rx.try_recv(), None);
        })
    });
}

#[test]
fn two_slots_ack_every_message() {
    // N = 2: ACK_EVERY = 1; four messages go twice around the ring.
    stream::<2>(0, 4, false);
}

#[test]
fn four_slots_ack_every_second_message() {
    // N = 4: acks every 2; seven messages force the sender through a full ring and acks.
    stream::<4>(0, 7, false);
}

#[test]
fn sequence_numbers_wrap() {
    // The sequence numbers run u64::MAX - 1, u64::MAX, 0, 1, 2.
    stream::<2>(u64::MAX - 2, 5, false);
}

#[test]
fn batches() {
    stream::<4>(0, 7, true);
}

#[test]
fn ping_pong_over_two_rings() {
    model(|| {
        with_rings::<1>(0, |ab, ba| {
            let (mut a_tx, mut b_rx) = ab.split().unwrap();
            let (mut b_tx, mut a_rx) = ba.split().unwrap();
            let echo = thread::spawn(move || {
                for _ in 0..3 {
                    let x = loop {
                        match b_rx.try_recv() {
                            Some(x) => break x,
                            None => thread::yield_now(),
                        }
                    };
                    b_tx.try_send(x + 100).unwrap();
                }
            });
            for i in 0..3 {
                a_tx.try_send(i).unwrap();
                let y = loop {
                    match a_rx.try_recv() {
                        Some(y) => break y,
                        None => thread::yield_now(),
                    }
                };
                assert_eq!(y, i + 100);
            }
            echo.join().unwrap();
        })
    });
}

/// Runs `body` with a call slot its threads can borrow (as `with_rings`).
fn with_call_slot(base: u64, body: impl FnOnce(&'static CallSlot<u64>)) {
    let slot = Box::into_raw(Box::new(CallSlot::with_sequence_base(base)));
    // SAFETY: the pointer comes from `Box::into_raw` and stays valid until the end.
    body(unsafe { &*slot });
    // SAFETY: `body` joined its threads and the handles ended with it. (Leaks on panic.)
    unsafe { drop(Box::from_raw(slot)) };
}

/// `calls` calls from the main thread (the client) to a server thread. The server counts
/// the requests it has taken in `taken` before it replies (a `Relaxed` store: only the
/// call slot's own ordering can make the client see it), and the client checks on each
/// reply that its request was taken, exactly once, and that the reply is the answer to
/// its request, not the request itself or an older reply. loom's cell checks that no
/// access to the line's message races another. `split_reply`: the server takes the
/// request and replies in two steps, yielding between them, instead of `try_serve`.
/// `use_call`: the client waits in `Client::call` instead of its own polling loop.
fn calls(base: u64, calls: u64, split_reply: bool, use_call: bool) {
    model(move || {
        with_call_slot(base, |slot| {
            let (mut client, mut server) = slot.split().unwrap();
            let taken = Arc::new(AtomicU64::new(0));
            let server_taken = taken.clone();
            let server = thread::spawn(move || {
                let mut served = 0;
                while served < calls {
                    if split_reply {
                        if let Some(req) = server.try_recv() {
                            assert_eq!(req, served, "a request lost, repeated or torn");
                            served += 1;
                            server_taken.store(served, Ordering::Relaxed);
                            assert_eq!(server.try_recv(), None, "taken twice");
                            thread::yield_now();
                            server.reply(req + 100).unwrap();
                            assert_eq!(server.reply(0), Err(NoCall(0)));
                        }
                    } else if server.try_serve(|req| {
                        assert_eq!(req, served, "a request lost, repeated or torn");
                        server_taken.store(served + 1, Ordering::Relaxed);
                        req + 100
                    }) {
                        served += 1;
                    }
                    thread::yield_now();
                }
                server
            });
            for i in 0..calls {
                let reply = if use_call {
                    client.call(i).unwrap()
                } else {
                    client.try_send(i).unwrap();
                    loop {
                        if let Some(r) = client.try_recv() {
                            break r;
                        }
                        assert_eq!(client.try_send(99), Err(Busy(99)));
                        thread::yield_now();
                    }
                };
                assert_eq!(
                    taken.load(Ordering::Relaxed),
                    i + 1,
                    "a reply before its request was taken"
                );
                assert_eq!(reply, i + 100, "not the answer to this call");
                assert_eq!(client.try_recv(), None, "a reply collected twice");
            }
            let mut server = server.join().unwrap();
            assert_eq!(server.try_recv(), None, "a request beyond the last one");
            assert!(!server.is_ready());
        })
    });
}

#[test]
fn call_slot_calls_answered_in_turn() {
    calls(0, 3, false, false);
}

#[test]
fn call_slot_reply_after_a_pause() {
    calls(0, 3, true, false);
}

#[test]
fn call_slot_sequence_numbers_wrap() {
    // The sequence word runs u64::MAX - 1 (idle), u64::MAX (first request), 0 (its
    // reply), 1, 2, 3, 4: it wraps between a request and its reply. The client waits in
    // `call`.
    calls(u64::MAX - 1, 3, false, true);
}
