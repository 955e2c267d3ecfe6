//! `netstate::txwatch`: a transmit queue is given up only when it holds datagrams and has
//! not moved for `STALL_NS`.

use netstate::txwatch::{TxWatch, STALL_NS};

const S: u64 = 1_000_000_000;

#[test]
fn a_queue_that_moves_is_never_stalled() {
    let mut w = TxWatch::new();
    // Two datagrams queued at 0 s, one left by 2 s, another queued at 4 s: moving.
    w.look(7, 200, false, 0);
    w.polled(7, 100, 2 * S);
    assert_eq!(w.stalled(4 * S), None);
    w.look(7, 300, false, 4 * S);
    assert_eq!(
        w.stalled(2 * S + STALL_NS - 1),
        None,
        "it last moved at 2 s"
    );
    assert_eq!(w.stalled(2 * S + STALL_NS), Some(7));
    // Emptied: nothing to watch.
    w.polled(7, 0, 6 * S);
    assert_eq!(w.stalled(100 * S), None);
    assert_eq!(w.next_deadline(), None);
}

#[test]
fn a_queue_standing_still_stalls_after_stall_ns() {
    let mut w = TxWatch::new();
    w.look(9, 64, false, S);
    assert_eq!(w.next_deadline(), Some(S + STALL_NS));
    // More datagrams queued behind the stuck one do not count as moving.
    w.look(9, 128, false, 2 * S);
    w.polled(9, 128, 3 * S);
    assert_eq!(w.stalled(S + STALL_NS - 1), None);
    assert_eq!(w.stalled(S + STALL_NS), Some(9));
    // A datagram that went out while another was queued (fewer bytes than added) moved it.
    w.look(9, 100, true, 5 * S);
    assert_eq!(w.stalled(5 * S + STALL_NS - 1), None);
    w.forget(9);
    assert_eq!(w.stalled(u64::MAX), None);
}

#[test]
fn ports_are_watched_apart_and_a_full_table_watches_no_more() {
    let mut w = TxWatch::new();
    for port in 0..netstate::SOCKETS as u16 {
        w.look(port, 10, false, u64::from(port) * S);
    }
    // One more port than sockets: not watched, nothing else changed.
    w.look(999, 10, false, 0);
    assert_eq!(w.stalled(STALL_NS), Some(0));
    w.forget(0);
    assert_eq!(w.stalled(STALL_NS), None);
    assert_eq!(w.stalled(S + STALL_NS), Some(1));
    // The freed watch takes a new port.
    w.look(999, 10, false, 50 * S);
    assert_eq!(w.next_deadline(), Some(S + STALL_NS));
}

#[test]
fn one_queue_is_given_up_at_a_time_and_the_others_wait_anew() {
    let mut w = TxWatch::new();
    // 4200 stalled first (its neighbour silent); 4201 behind it (never asked for its own).
    w.look(4200, 6, false, 0);
    w.look(4201, 13, false, S / 2);
    assert_eq!(w.stalled(4 * S), Some(4200), "the longest stalled first");
    w.forget(4200);
    w.restart(4 * S);
    assert_eq!(w.stalled(4 * S + STALL_NS - 1), None, "4201 waits anew");
    assert_eq!(w.stalled(4 * S + STALL_NS), Some(4201));
}
