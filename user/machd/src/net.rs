//! The network thread: every message the link brings ([`crate::link`]), heartbeats,
//! retransmissions, and the end of requests (answered, timed out, or `Gone` with their
//! machine).
//!
//! It blocks in the link's receive at most until the next thing it must do (a
//! retransmission, a deadline or a heartbeat: [`next_wake`]), then does what is due
//! ([`tick`]). A message counts as hearing from its sender only if it is a well-formed mrpc
//! message for this machine that the link says the machine it names sent
//! (`link::Source::is_machd_of`: that machine's MAC in a frame of `machd`'s type from this
//! machine's driver, or its address and `machd`'s sending port over UDP).

use crate::link::Source;
use crate::{now, ops, with, State};
use alloc::vec::Vec;
use mrpc::members::{Heard, State as Member};
use mrpc::server::Decision;
use mrpc::{Error, Kind};
use ulib::abi::mach;
use ulib::net::DATA_MAX;
use ulib::{println, sys};

/// Shortest wait in `recv_from` (a zero timeout would spin).
const MIN_WAIT_NS: u64 = 1_000_000;

/// The thread's body (its argument is unused).
pub fn main(_: u64) -> u64 {
    let Some(mut rx) = crate::take_rx() else {
        println!("machd: the network thread found no socket");
        return 1;
    };
    let mut buf = [0u8; DATA_MAX];
    loop {
        let now = now();
        let wait = with(next_wake).saturating_sub(now).max(MIN_WAIT_NS);
        match rx.recv(&mut buf, wait) {
            Ok(Some((n, from))) => with(|s| datagram(s, &buf[..n], from)),
            Ok(None) => with(|s| s.malformed += 1),
            Err(Error::TimedOut) => {}
            Err(e) => {
                println!("machd: receive: {e}");
                let _ = sys::sleep_ns(10_000_000);
            }
        }
        with(tick);
    }
}

/// When the next retransmission, deadline or heartbeat is due.
fn next_wake(s: &mut State) -> u64 {
    s.client
        .next_deadline()
        .min(crate::follow::next_wake(s))
        .min(s.next_heartbeat)
        .min(now().saturating_add(mach::HEARTBEAT_NS))
}

/// One message from `from`.
fn datagram(s: &mut State, bytes: &[u8], from: Source) {
    let Ok((h, _)) = mrpc::decode(bytes) else {
        s.malformed += 1;
        return;
    };
    // Only the machine's machd may speak for it (not another program of that machine).
    if h.to != s.me || h.from >= s.n || h.from == s.me || !from.is_machd_of(h.from) {
        s.malformed += 1;
        return;
    }
    match s.members.heard(h.from, h.epoch, now()) {
        Heard::First => {
            let done = s.client.peer_epoch(h.from, h.epoch);
            s.complete(done);
        }
        Heard::Rebooted(old) => {
            // Its earlier life is over: what it asked is forgotten, what we asked it ends.
            println!(
                "machd: machine {} restarted (epoch {old:08x} -> {:08x})",
                h.from, h.epoch
            );
            s.server.retire(h.from, old);
            crate::files::machine_gone(s, h.from, true);
            let done = s.client.peer_epoch(h.from, h.epoch);
            s.complete(done);
        }
        Heard::Same => {}
        // Of a life it has left (late, or sent again from before its reboot): dropped.
        Heard::Stale => {
            s.malformed += 1;
            return;
        }
    }
    match h.kind() {
        Some(Kind::Request) => match s.server.on_request(bytes) {
            Decision::Perform(h, payload) => {
                let payload: Vec<u8> = payload.to_vec();
                if let Some(result) = ops::perform(s, &h, &payload) {
                    s.finish(&h, &result);
                }
            }
            Decision::Send(r) => s.send(h.from, &r),
            Decision::Drop(_) => {}
        },
        Some(Kind::Reply) => {
            if let Some(d) = s.client.on_reply(bytes) {
                s.complete(alloc::vec![d]);
            }
        }
        _ => {}
    }
}

/// What is due now: retransmissions, deadlines, heartbeats, machines gone down.
fn tick(s: &mut State) {
    let now = now();
    let (resend, done) = s.client.poll(now);
    for (to, bytes) in resend {
        s.send(to, &bytes);
    }
    s.complete(done);
    crate::follow::tick(s, now);
    if now >= s.next_heartbeat {
        s.heartbeats += 1;
        let me = s.me;
        for m in (0..s.n).filter(|&m| m != me) {
            let hb = mrpc::heartbeat(s.me, s.epoch, m, s.client.known_epoch(m), s.heartbeats);
            s.send(m, &hb);
        }
        s.next_heartbeat = now + mach::HEARTBEAT_NS;
        crate::files::close_orphans(s);
        crate::calls::collect_given_up(s);
    }
    let me = s.me;
    for m in (0..s.n).filter(|&m| m != me) {
        let up = s.members.state(m, now) == Some(Member::Up);
        if s.was_up[usize::from(m)] && !up {
            println!(
                "machd: machine {m} is down (silent for {} ms)",
                mach::DOWN_AFTER_NS / 1_000_000
            );
            let done = s.client.fail_all(m, Error::Gone);
            s.complete(done);
            crate::files::machine_gone(s, m, false);
        }
        s.was_up[usize::from(m)] = up;
    }
    // Held requests whose deadline passed or whose machine went down end here.
    s.start_held();
}
