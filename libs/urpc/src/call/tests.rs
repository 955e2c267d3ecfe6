//! Unit tests of the call slot on one thread: request and reply in one line, one call at a
//! time on both sides, errors instead of overwrites, sequence wrap, handles, layout. The
//! two-thread test is in `tests/stress.rs`; the model check in `tests/loom.rs`.

use super::*;

fn msg(i: u64) -> Payload {
    let mut m = [(i as u8) ^ 0xa5; PAYLOAD_BYTES];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m
}

fn index(m: &Payload) -> u64 {
    let i = u64::from_le_bytes(m[..8].try_into().unwrap());
    assert!(
        m[8..].iter().all(|&b| b == (i as u8) ^ 0xa5),
        "torn message {i}"
    );
    i
}

fn seq<T>(slot: &CallSlot<T>) -> u64 {
    slot.line.seq.load(Ordering::Relaxed)
}

/// The bytes of the call line's message cell, as the other side would read them.
fn line_msg(slot: &CallSlot<Payload>) -> Payload {
    // SAFETY: single-threaded test; the cell holds a message written by a handle.
    slot.line
        .msg
        .with(|p| unsafe { p.cast::<Payload>().read() })
}

#[test]
fn layout_is_one_call_line_plus_a_line_of_bookkeeping() {
    assert_eq!(size_of::<CallLine>(), 64);
    assert_eq!(core::mem::offset_of!(CallLine, seq), 56);
    assert_eq!(core::mem::offset_of!(CallSlot<Payload>, line), 0);
    assert_eq!(align_of::<CallSlot<u8>>(), 64);
    assert_eq!(size_of::<CallSlot<Payload>>(), 128);
}

#[test]
fn the_reply_overwrites_the_request_in_the_same_line() {
    let slot = CallSlot::<Payload>::new();
    let (mut client, mut server) = slot.split().unwrap();
    assert_eq!(seq(&slot), 0);
    client.try_send(msg(7)).unwrap();
    assert_eq!(seq(&slot), 1, "odd: a request is there");
    assert_eq!(index(&line_msg(&slot)), 7);
    assert_eq!(index(&server.try_recv().unwrap()), 7);
    assert_eq!(seq(&slot), 1, "taking a request publishes nothing");
    server.reply(msg(1007)).unwrap();
    assert_eq!(seq(&slot), 2, "even: the reply is there");
    assert_eq!(index(&line_msg(&slot)), 1007, "written over the request");
    assert_eq!(index(&client.try_recv().unwrap()), 1007);
    assert_eq!(seq(&slot), 2);
}

#[test]
fn calls_answer_in_order_with_their_content() {
    let slot = CallSlot::<Payload>::new();
    let (mut client, mut server) = slot.split().unwrap();
    for i in 0..1000 {
        assert!(!client.is_waiting() && !server.is_ready());
        client.try_send(msg(i)).unwrap();
        assert!(client.is_waiting() && !client.is_ready());
        assert!(server.is_ready());
        assert!(server.try_serve(|m| msg(index(&m) * 3 + 1)));
        assert!(client.is_ready());
        assert_eq!(index(&client.try_recv().unwrap()), i * 3 + 1);
    }
    assert_eq!(seq(&slot), 2000);
}

#[test]
fn the_client_has_one_call_at_a_time() {
    let slot = CallSlot::<u64>::new();
    let (mut client, mut server) = slot.split().unwrap();
    assert_eq!(client.try_recv(), None, "no call, no reply");
    client.try_send(1).unwrap();
    assert_eq!(client.try_send(2), Err(Busy(2)));
    assert_eq!(client.try_recv(), None, "not answered yet");
    // The refused request did not reach the line: the server sees the first one.
    assert_eq!(server.try_recv(), Some(1));
    assert_eq!(client.try_send(3), Err(Busy(3)));
    assert_eq!(client.try_recv(), None, "taken but not answered");
    server.reply(10).unwrap();
    assert_eq!(client.try_send(4), Err(Busy(4)), "reply not collected yet");
    assert_eq!(client.try_recv(), Some(10));
    assert_eq!(client.try_recv(), None, "a reply is collected once");
    client.try_send(5).unwrap();
    assert!(server.try_serve(|x| x * 2));
    assert_eq!(client.try_recv(), Some(10));
}

#[test]
fn the_server_takes_each_request_once_and_answers_only_what_it_took() {
    let slot = CallSlot::<u64>::new();
    let (mut client, mut server) = slot.split().unwrap();
    assert_eq!(server.try_recv(), None);
    assert_eq!(server.reply(9), Err(NoCall(9)), "nothing was asked");
    assert!(!server.try_serve(|x| x));
    client.try_send(1).unwrap();
    assert_eq!(server.try_recv(), Some(1));
    assert!(server.owes_reply() && !server.is_ready());
    assert_eq!(server.try_recv(), None, "the same request again");
    assert!(!server.try_serve(|x| x), "try_serve while a reply is owed");
    server.reply(2).unwrap();
    assert!(!server.owes_reply());
    assert_eq!(server.reply(3), Err(NoCall(3)), "answered twice");
    assert_eq!(server.try_recv(), None, "its own reply is not a request");
    assert_eq!(client.try_recv(), Some(2), "the second reply did not land");
}

#[test]
fn sequence_numbers_wrap_past_u64_max() {
    // The sequence word starts at u64::MAX - 4: it wraps during the third call.
    let slot = CallSlot::<u64>::with_sequence_base(u64::MAX - 4);
    let (mut client, mut server) = slot.split().unwrap();
    for i in 0..10u64 {
        client.try_send(i).unwrap();
        assert!(server.try_serve(|x| !x));
        assert_eq!(client.try_recv(), Some(!i));
        assert_eq!(client.try_recv(), None);
        assert!(!server.try_serve(|x| x));
    }
    assert_eq!(seq(&slot), 15, "the sequence did not wrap");
}

#[test]
fn each_side_is_handed_out_once() {
    static SLOT: CallSlot<u64> = CallSlot::new();
    assert!(SLOT.take_server().is_some());
    assert!(SLOT.take_server().is_none());
    assert!(
        SLOT.split().is_none(),
        "split must not hand out a second server"
    );
    assert!(SLOT.take_client().is_some());
    assert!(SLOT.take_client().is_none());

    let other = CallSlot::<u64>::new();
    assert!(other.split().is_some());
    assert!(other.split().is_none());
    assert!(other.take_client().is_none() && other.take_server().is_none());
}

#[test]
fn typed_messages_keep_their_fields() {
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Msg {
        Ask { op: u32, args: [u64; 5] },
        Answer(Result<u64, u16>),
    }
    assert!(size_of::<Msg>() <= PAYLOAD_BYTES);
    let slot = CallSlot::<Msg>::new();
    let (mut client, mut server) = slot.split().unwrap();
    for i in 0..100u64 {
        let ask = Msg::Ask {
            op: i as u32,
            args: [i, !i, i * 3, u64::MAX, 0],
        };
        client.try_send(ask).unwrap();
        assert!(server.try_serve(|m| match m {
            Msg::Ask { op, args } if op % 2 == 0 => {
                Msg::Answer(Ok(args.iter().fold(0u64, |a, b| a.wrapping_add(*b))))
            }
            Msg::Ask { op, .. } => Msg::Answer(Err(op as u16)),
            Msg::Answer(_) => panic!("a reply arrived as a request"),
        }));
        let want = if i % 2 == 0 {
            Ok([i, !i, i * 3, u64::MAX, 0]
                .iter()
                .fold(0u64, |a, b| a.wrapping_add(*b)))
        } else {
            Err(i as u16)
        };
        assert_eq!(client.try_recv(), Some(Msg::Answer(want)));
    }
}
