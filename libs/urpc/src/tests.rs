//! Unit tests of the ring on one thread: order, wraparound, back-pressure, ack pacing,
//! sequence-number wrap, handles, layout. The two-thread stress test is `tests/stress.rs`;
//! the model check `tests/loom.rs`.

use super::*;

/// A 56-byte message that says which message it is in every byte we can check.
fn msg(i: u64) -> Payload {
    let mut m = [(i as u8) ^ 0x5a; PAYLOAD_BYTES];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m
}

fn index(m: &Payload) -> u64 {
    let i = u64::from_le_bytes(m[..8].try_into().unwrap());
    assert!(
        m[8..].iter().all(|&b| b == (i as u8) ^ 0x5a),
        "torn message {i}"
    );
    i
}

fn ack_word<const N: usize, T>(ring: &Ring<N, T>) -> u64 {
    ring.ack.consumed.load(Ordering::Relaxed)
}

#[test]
fn layout_is_one_line_per_slot_plus_the_ack_line() {
    assert_eq!(size_of::<Slot>(), 64);
    assert_eq!(core::mem::offset_of!(Slot, seq), 56);
    assert_eq!(align_of::<Ring<8>>(), 64);
    assert_eq!(core::mem::offset_of!(Ring<8>, ack), 8 * 64);
    assert_eq!(size_of::<Ring<8>>(), 8 * 64 + 64 + 64);
}

#[test]
fn messages_arrive_in_order_with_their_content() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    assert_eq!(rx.try_recv(), None);
    for i in 0..5 {
        tx.try_send(msg(i)).unwrap();
    }
    for i in 0..5 {
        assert!(rx.is_ready());
        assert_eq!(index(&rx.try_recv().unwrap()), i);
    }
    assert!(!rx.is_ready());
    assert_eq!(rx.try_recv(), None);
}

#[test]
fn wraps_around_the_ring_many_times() {
    let ring = Ring::<4>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    let (mut sent, mut got) = (0u64, 0u64);
    // Uneven bursts so the producer and consumer positions drift through every offset.
    for round in 0..10_000u64 {
        let burst = 1 + round % 4;
        for _ in 0..burst {
            match tx.try_send(msg(sent)) {
                Ok(()) => sent += 1,
                Err(Full(m)) => assert_eq!(index(&m), sent),
            }
        }
        for _ in 0..(1 + (round * 7) % 4) {
            if let Some(m) = rx.try_recv() {
                assert_eq!(index(&m), got);
                got += 1;
            }
        }
    }
    while let Some(m) = rx.try_recv() {
        assert_eq!(index(&m), got);
        got += 1;
    }
    assert_eq!(got, sent);
    assert!(sent > 4 * 5_000, "only {sent} messages went through");
}

#[test]
fn a_full_ring_refuses_and_never_overwrites() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    for i in 0..8 {
        tx.try_send(msg(i)).unwrap();
    }
    assert_eq!(tx.free_slots(), 0);
    assert_eq!(tx.try_send(msg(100)), Err(Full(msg(100))));
    assert_eq!(tx.try_send(msg(101)), Err(Full(msg(101))));
    for i in 0..8 {
        assert_eq!(
            index(&rx.try_recv().unwrap()),
            i,
            "message {i} was overwritten"
        );
    }
    assert_eq!(rx.try_recv(), None);
}

#[test]
fn the_receiver_acknowledges_every_half_ring() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    assert_eq!(Receiver::<8>::ACK_EVERY, 4);
    for i in 0..8 {
        tx.try_send(msg(i)).unwrap();
    }
    // Three consumed: nothing published yet, so the sender still sees a full ring.
    for i in 0..3 {
        assert_eq!(index(&rx.try_recv().unwrap()), i);
        assert_eq!(ack_word(&ring), 0);
    }
    assert_eq!(tx.try_send(msg(8)), Err(Full(msg(8))));
    // The fourth publishes 4: exactly four slots come free.
    rx.try_recv().unwrap();
    assert_eq!(ack_word(&ring), 4);
    for i in 8..12 {
        tx.try_send(msg(i)).unwrap();
    }
    assert_eq!(tx.try_send(msg(12)), Err(Full(msg(12))));
    // Draining the rest publishes at 8 and at 12, never in between.
    let mut acks = Vec::new();
    while let Some(m) = rx.try_recv() {
        acks.push((index(&m), ack_word(&ring)));
    }
    let expected: Vec<(u64, u64)> = (4..12)
        .map(|i| {
            (
                i,
                if i + 1 >= 12 {
                    12
                } else if i + 1 >= 8 {
                    8
                } else {
                    4
                },
            )
        })
        .collect();
    assert_eq!(acks, expected);
}

#[test]
fn the_sender_reads_the_ack_line_only_when_it_thinks_the_ring_is_full() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    for i in 0..4 {
        tx.try_send(msg(i)).unwrap();
    }
    for _ in 0..4 {
        rx.try_recv().unwrap();
    }
    assert_eq!(ack_word(&ring), 4);
    // The sender has not looked: its cached count still says 4 in flight.
    assert_eq!(tx.acked, 0);
    for i in 4..8 {
        tx.try_send(msg(i)).unwrap();
        assert_eq!(tx.acked, 0);
    }
    // Its own count says full: now it reads the ack line and finds 4 free slots.
    tx.try_send(msg(8)).unwrap();
    assert_eq!(tx.acked, 4);
}

#[test]
fn an_explicit_ack_frees_slots_early() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    for i in 0..8 {
        tx.try_send(msg(i)).unwrap();
    }
    rx.try_recv().unwrap();
    assert!(tx.try_send(msg(8)).is_err());
    rx.ack();
    assert_eq!(ack_word(&ring), 1);
    tx.try_send(msg(8)).unwrap();
    assert!(tx.try_send(msg(9)).is_err());
    rx.ack();
    rx.ack(); // nothing new: no store
    assert_eq!(ack_word(&ring), 1);
}

#[test]
fn sequence_numbers_wrap_past_u64_max() {
    // The first message carries u64::MAX - 9; the sequence numbers and the ack count wrap
    // after 10 messages, in the middle of the third lap of this 4-slot ring.
    let ring = Ring::<4>::with_sequence_base(u64::MAX - 10);
    let (mut tx, mut rx) = ring.split().unwrap();
    let (mut sent, mut got) = (0u64, 0u64);
    let mut saw_wrapped_ack = false;
    while got < 200 {
        while tx.try_send(msg(sent)).is_ok() {
            sent += 1;
        }
        assert_eq!(sent - got, 4, "a full ring holds exactly N messages");
        // Drain half, so the ack is published and the sender must use it.
        for _ in 0..2 {
            assert_eq!(index(&rx.try_recv().unwrap()), got);
            got += 1;
        }
        saw_wrapped_ack |= ack_word(&ring) < 100;
    }
    assert!(saw_wrapped_ack);
    assert!(
        tx.next < 1000 && rx.expect < 1000,
        "the sequence did not wrap"
    );
}

#[test]
fn batches_send_what_fits_and_receive_what_is_ready() {
    let ring = Ring::<8>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    let batch: Vec<Payload> = (0..12).map(msg).collect();
    assert_eq!(tx.send_batch(&batch), 8);
    let mut out = [[0u8; 56]; 5];
    assert_eq!(rx.recv_batch(&mut out), 5);
    assert_eq!(out.iter().map(index).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(ack_word(&ring), 5, "one ack for the batch, at its end");
    assert_eq!(tx.send_batch(&batch[8..]), 4);
    assert_eq!(tx.send_batch(&batch[..1]), 1);
    assert_eq!(tx.send_batch(&batch[..1]), 0);
    let mut rest = [[0u8; 56]; 16];
    assert_eq!(rx.recv_batch(&mut rest), 8);
    assert_eq!(
        rest[..8].iter().map(index).collect::<Vec<_>>(),
        [5, 6, 7, 8, 9, 10, 11, 0]
    );
    assert_eq!(rx.recv_batch(&mut rest), 0);
}

#[test]
fn each_side_is_handed_out_once() {
    static RING: Ring<2> = Ring::new();
    let tx = RING.take_sender();
    assert!(tx.is_some());
    assert!(RING.take_sender().is_none());
    assert!(
        RING.split().is_none(),
        "split must not hand out a second sender"
    );
    assert!(RING.take_receiver().is_some());
    assert!(RING.take_receiver().is_none());

    let other = Ring::<2>::new();
    assert!(other.split().is_some());
    assert!(other.split().is_none());
    assert!(other.take_sender().is_none() && other.take_receiver().is_none());
}

#[test]
fn typed_messages_keep_their_fields() {
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Request {
        op: u32,
        core: u16,
        arg: [u64; 5],
        flag: bool,
    }
    assert!(size_of::<Request>() <= PAYLOAD_BYTES);
    let ring = Ring::<2, Request>::new();
    let (mut tx, mut rx) = ring.split().unwrap();
    for i in 0..100u64 {
        let r = Request {
            op: i as u32,
            core: 3,
            arg: [i, !i, i * 3, u64::MAX, 0],
            flag: i % 2 == 0,
        };
        tx.try_send(r).unwrap();
        assert_eq!(rx.try_recv(), Some(r));
    }
    // A one-slot ring works too (acknowledged after every message).
    let tiny = Ring::<1, u8>::new();
    let (mut tx, mut rx) = tiny.split().unwrap();
    for i in 0..10u8 {
        tx.try_send(i).unwrap();
        assert_eq!(tx.try_send(99), Err(Full(99)));
        assert_eq!(rx.try_recv(), Some(i));
    }
}
