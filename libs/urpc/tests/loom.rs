//! Model check of the ring protocol with `loom`: every interleaving of a sender thread and
//! a receiver thread on small rings, under the C++11 memory
//! model (as loom models it). loom's `UnsafeCell` fails the run if a payload read could overlap or miss a
//! payload write, i.e. if the sequence-word or ack orderings were too weak; the asserts
//! check order and content. Built only with `--cfg loom`:
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p urpc --release --test loom --target-dir target/loom -- --test-threads 1
//! ```
#![cfg(loom)]

use loom::thread;
use urpc::{Full, Ring};

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
