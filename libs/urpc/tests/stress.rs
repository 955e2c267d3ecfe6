//! Two threads, millions of messages: every message arrives once, in order, intact (rings),
//! and every call is answered once, with its own reply (call slot).
//!
//! The sender spins on `Full`, the receiver on an empty ring, so both the "ring full" and
//! the "ring empty" edges are hit constantly; a 2-slot ring forces an ack on every message
//! and a 64-slot ring exercises the batched acks and `recv_batch`. The test harness runs
//! these tests in parallel on a machine that may have only two cores, so a waiting side
//! yields its core after a short spin instead of spinning through its time slice.

use std::thread;
use urpc::{CallSlot, Full, Payload, Ring, PAYLOAD_BYTES};

/// Spin a little, then give the core away: called once per failed poll.
struct Backoff(u32);

impl Backoff {
    fn wait(&mut self) {
        self.0 += 1;
        if self.0.is_multiple_of(64) {
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

fn msg(i: u64) -> Payload {
    let mut m = [0u8; PAYLOAD_BYTES];
    m[..8].copy_from_slice(&i.to_le_bytes());
    for (k, b) in m[8..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(k as u8);
    }
    m
}

fn check(m: &Payload, expect: u64) {
    assert_eq!(
        u64::from_le_bytes(m[..8].try_into().unwrap()),
        expect,
        "out of order"
    );
    assert_eq!(*m, msg(expect), "message {expect} is torn");
}

fn stream<const N: usize>(count: u64, batched: bool) {
    let ring: Box<Ring<N>> = Box::new(Ring::new());
    let (mut tx, mut rx) = ring.split().unwrap();
    thread::scope(|s| {
        s.spawn(move || {
            let (mut i, mut backoff) = (0, Backoff(0));
            while i < count {
                match tx.try_send(msg(i)) {
                    Ok(()) => i += 1,
                    Err(Full(m)) => {
                        assert_eq!(m, msg(i));
                        backoff.wait();
                    }
                }
            }
        });
        let (mut expect, mut backoff) = (0, Backoff(0));
        let mut buf = [[0u8; PAYLOAD_BYTES]; 16];
        while expect < count {
            if batched {
                let n = rx.recv_batch(&mut buf);
                for m in &buf[..n] {
                    check(m, expect);
                    expect += 1;
                }
                if n == 0 {
                    backoff.wait();
                }
            } else if let Some(m) = rx.try_recv() {
                check(&m, expect);
                expect += 1;
            } else {
                backoff.wait();
            }
        }
        assert_eq!(rx.try_recv(), None, "a message beyond the last one");
    });
}

#[test]
fn two_million_messages_through_64_slots() {
    stream::<64>(2_000_000, false);
}

#[test]
fn a_million_messages_through_64_slots_in_batches() {
    stream::<64>(1_000_000, true);
}

#[test]
fn half_a_million_messages_through_2_slots() {
    stream::<2>(500_000, false);
}

#[test]
fn ping_pong_over_two_rings() {
    let (ab, ba) = (Ring::<4, u64>::new(), Ring::<4, u64>::new());
    let (mut a_tx, mut b_rx) = ab.split().unwrap();
    let (mut b_tx, mut a_rx) = ba.split().unwrap();
    const ROUNDS: u64 = 200_000;
    thread::scope(|s| {
        s.spawn(move || {
            let mut backoff = Backoff(0);
            for _ in 0..ROUNDS {
                let x = loop {
                    if let Some(x) = b_rx.try_recv() {
                        break x;
                    }
                    backoff.wait();
                };
                b_tx.try_send(x * 2 + 1).unwrap();
            }
        });
        let mut backoff = Backoff(0);
        for i in 0..ROUNDS {
            a_tx.try_send(i).unwrap();
            let y = loop {
                if let Some(y) = a_rx.try_recv() {
                    break y;
                }
                backoff.wait();
            };
            assert_eq!(y, i * 2 + 1);
        }
    });
}

#[test]
fn two_hundred_thousand_calls_through_one_call_slot() {
    let slot: Box<CallSlot> = Box::new(CallSlot::new());
    let (mut client, mut server) = slot.split().unwrap();
    const CALLS: u64 = 200_000;
    thread::scope(|s| {
        s.spawn(move || {
            let (mut served, mut backoff) = (0, Backoff(0));
            while served < CALLS {
                // The reply is the next message, so a stale or torn request shows.
                let answered = server.try_serve(|m| {
                    check(&m, served);
                    msg(served + 1_000_000)
                });
                if answered {
                    served += 1;
                } else {
                    backoff.wait();
                }
            }
            assert!(!server.try_serve(|m| m), "a request beyond the last one");
        });
        let mut backoff = Backoff(0);
        for i in 0..CALLS {
            client.try_send(msg(i)).unwrap();
            let reply = loop {
                if let Some(r) = client.try_recv() {
                    break r;
                }
                backoff.wait();
            };
            check(&reply, i + 1_000_000);
        }
    });
}

#[test]
fn calls_with_the_spinning_client() {
    let slot = CallSlot::<u64>::new();
    let (mut client, mut server) = slot.split().unwrap();
    const CALLS: u64 = 20_000;
    thread::scope(|s| {
        s.spawn(move || {
            let (mut served, mut backoff) = (0, Backoff(0));
            while served < CALLS {
                if server.try_serve(|x| x * 2 + 1) {
                    served += 1;
                } else {
                    backoff.wait();
                }
            }
        });
        for i in 0..CALLS {
            assert_eq!(client.call(i), Ok(i * 2 + 1));
        }
    });
}
