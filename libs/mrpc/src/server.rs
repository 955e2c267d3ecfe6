//! The server's half: each request performed at most once, its reply kept for duplicates.
//!
//! The owner (machd) gives every received request to [`Server::on_request`], which decides:
//! perform it ([`Decision::Perform`]), send the cached reply again, refuse it with a reply
//! of its own, or drop it. Once performed, [`Server::finish`] stores the reply in the cache
//! and gives the bytes to send. A request may be performed later than it arrived (a remote
//! `wait`): duplicates that come meanwhile are dropped, since the reply will come.
//!
//! Per client machine the server keeps each recent *life* of the client (its epoch: up to
//! four) and the epochs known to be over (a late request from an ended life is dropped; a
//! life ends when its machine is heard from in a new epoch, [`Server::retire`]). Per life:
//! the client's `floor` (every sequence below it was answered and is forgotten), the sequences
//! being performed, and the replies of those at or above the floor. The client keeps fewer
//! than [`WINDOW`] sequences between its floor and its newest request, so the cache holds
//! at most [`WINDOW`] replies per client; a client that breaks that rule gets
//! `InvalidArgument` instead of growing the cache.

use crate::{decode, encode, Error, Header, Kind, MAX_MACHINES, WINDOW};
use alloc::vec::Vec;

/// Earlier epochs remembered per client.
const RETIRED: usize = 4;

/// What to do with a received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision<'a> {
    /// Perform it, then call [`Server::finish`] with its header.
    Perform(Header, &'a [u8]),
    /// Send these bytes (a cached reply, or a refusal).
    Send(Vec<u8>),
    /// Nothing to do (why, for counters and tests).
    Drop(Dropped),
}

/// Why a message was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Not a request, not for this machine, or not a message at all.
    NotForMe,
    /// From an epoch of the client that a later one replaced.
    OldClientEpoch,
    /// A duplicate of a request being performed (its reply will come).
    InProgress,
    /// A duplicate of a request answered long ago (below the client's floor).
    BelowFloor,
}

/// What the server keeps for one life (epoch) of one client machine.
struct Life {
    epoch: u32,
    floor: u64,
    running: Vec<u64>,
    /// (sequence, reply bytes).
    cache: Vec<(u64, Vec<u8>)>,
}

impl Life {
    /// Every sequence below `floor` is over for the client: answered, or given up at its
    /// deadline while this server may still be performing it (a remote `wait` queued
    /// behind others). Neither its reply nor its place in `running` is kept: a reply the
    /// client no longer waits for is not sent ([`Server::finish`] gives `None`), and a
    /// request the client gave up on does not take a place in its window. Before, such
    /// requests stayed in `running` and counted against the window, so a client that
    /// gave up on a few slow ones found its next requests refused `InvalidArgument`.
    fn forget_below(&mut self, floor: u64) {
        if floor > self.floor {
            self.floor = floor;
            self.cache.retain(|(s, _)| *s >= floor);
            self.running.retain(|s| *s >= floor);
        }
    }
}

/// One client machine: its lives, newest last, and the epochs known to be over.
#[derive(Default)]
struct Peer {
    lives: Vec<Life>,
    retired: [u32; RETIRED],
}

impl Peer {
    fn retire(&mut self, epoch: u32) {
        self.lives.retain(|l| l.epoch != epoch);
        if !self.retired.contains(&epoch) {
            self.retired.rotate_right(1);
            self.retired[0] = epoch;
        }
    }
}

/// One machine's server side.
pub struct Server {
    me: u8,
    epoch: u32,
    peers: [Peer; MAX_MACHINES],
    /// Requests performed (for the tests and `machines`).
    pub performed: u64,
    /// Cached replies sent again.
    pub resent: u64,
}

impl Server {
    pub fn new(me: u8, epoch: u32) -> Server {
        Server {
            me,
            epoch,
            peers: Default::default(),
            performed: 0,
            resent: 0,
        }
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    fn reply(&self, h: &Header, status: u16, payload: &[u8]) -> Vec<u8> {
        encode(
            &Header {
                kind: Kind::Reply as u8,
                from: self.me,
                to: h.from,
                op: h.op,
                epoch: self.epoch,
                peer_epoch: h.epoch,
                seq: h.seq,
                floor: 0,
                user: h.user,
                status,
                len: 0,
            },
            payload,
        )
    }

    /// Client machine `from`'s life `epoch` is over (its machine was heard from in a new
    /// epoch: `members::Heard::Rebooted`): its requests are dropped from now on, and what
    /// it asked is forgotten.
    pub fn retire(&mut self, from: u8, epoch: u32) {
        if let Some(p) = self.peers.get_mut(usize::from(from)) {
            p.retire(epoch);
        }
    }

    /// The state of client `from`'s life `epoch`, made if new. Epochs are not ordered
    /// (they are random), so a new one does not retire the others: that takes the news of
    /// a reboot ([`Self::retire`]). At most [`RETIRED`] lives are kept; the least recently
    /// used is retired to make room.
    fn life(&mut self, from: u8, epoch: u32) -> Result<&mut Life, Dropped> {
        let p = self
            .peers
            .get_mut(usize::from(from))
            .ok_or(Dropped::NotForMe)?;
        if epoch == 0 || p.retired.contains(&epoch) {
            return Err(Dropped::OldClientEpoch);
        }
        match p.lives.iter().position(|l| l.epoch == epoch) {
            Some(i) => {
                // Most recently used last.
                let l = p.lives.remove(i);
                p.lives.push(l);
            }
            None => {
                if p.lives.len() >= RETIRED {
                    let oldest = p.lives[0].epoch;
                    p.retire(oldest);
                }
                p.lives.push(Life {
                    epoch,
                    floor: 0,
                    running: Vec::new(),
                    cache: Vec::new(),
                });
            }
        }
        p.lives.last_mut().ok_or(Dropped::NotForMe)
    }

    /// A datagram arrived: what to do with it.
    pub fn on_request<'a>(&mut self, bytes: &'a [u8]) -> Decision<'a> {
        let Ok((h, payload)) = decode(bytes) else {
            return Decision::Drop(Dropped::NotForMe);
        };
        if h.kind() != Some(Kind::Request) || h.to != self.me || h.from == self.me {
            return Decision::Drop(Dropped::NotForMe);
        }
        if h.peer_epoch != 0 && h.peer_epoch != self.epoch {
            // Sent to an earlier life of this machine: its ids mean nothing now.
            return Decision::Send(self.reply(&h, Error::StaleResource as u16, &[]));
        }
        if h.floor > h.seq {
            return Decision::Send(self.reply(&h, Error::InvalidArgument as u16, &[]));
        }
        let refuse = self.reply(&h, Error::InvalidArgument as u16, &[]);
        let p = match self.life(h.from, h.epoch) {
            Ok(p) => p,
            Err(d) => return Decision::Drop(d),
        };
        p.forget_below(h.floor);
        if h.seq < p.floor {
            return Decision::Drop(Dropped::BelowFloor);
        }
        if let Some((_, cached)) = p.cache.iter().find(|(s, _)| *s == h.seq) {
            let cached = cached.clone();
            self.resent += 1;
            return Decision::Send(cached);
        }
        if p.running.contains(&h.seq) {
            return Decision::Drop(Dropped::InProgress);
        }
        if h.seq - p.floor >= WINDOW || p.running.len() + p.cache.len() >= WINDOW as usize {
            // The client does not keep to its window.
            return Decision::Send(refuse);
        }
        p.running.push(h.seq);
        self.performed += 1;
        Decision::Perform(h, payload)
    }

    /// Request `h` (from [`Decision::Perform`]) was performed with `result`: the reply to
    /// send, kept for duplicates. `None` if the client has since moved to a new epoch (the
    /// reply would go to a life that is over) or has given the request up (its floor
    /// passed it).
    pub fn finish(&mut self, h: &Header, result: Result<&[u8], Error>) -> Option<Vec<u8>> {
        let bytes = match result {
            Ok(payload) => self.reply(h, 0, payload),
            Err(e) => self.reply(h, e as u16, &[]),
        };
        let p = self
            .peers
            .get_mut(usize::from(h.from))?
            .lives
            .iter_mut()
            .find(|l| l.epoch == h.epoch)?;
        let i = p.running.iter().position(|s| *s == h.seq)?;
        p.running.swap_remove(i);
        if h.seq >= p.floor {
            p.cache.push((h.seq, bytes.clone()));
        }
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Client, Retry};

    #[test]
    fn duplicates_get_the_cached_reply_and_are_performed_once() {
        let mut s = Server::new(1, 77);
        let mut c = Client::new(0, 5, Retry::default());
        let (_, req) = c.start(0, 1, 3, 9, b"hi", u64::MAX).unwrap();
        let Decision::Perform(h, p) = s.on_request(&req) else {
            panic!("not performed")
        };
        assert_eq!((h.op, h.user, p), (3, 9, &b"hi"[..]));
        assert_eq!(s.on_request(&req), Decision::Drop(Dropped::InProgress));
        let reply = s.finish(&h, Ok(b"ok")).unwrap();
        assert_eq!(s.on_request(&req), Decision::Send(reply.clone()));
        assert_eq!(s.performed, 1);
        assert!(c.on_reply(&reply).is_some());
        // The next request's floor lets the server forget the first; a late copy is dropped.
        let (_, req2) = c.start(0, 1, 3, 9, b"", u64::MAX).unwrap();
        assert!(matches!(s.on_request(&req2), Decision::Perform(..)));
        assert_eq!(s.on_request(&req), Decision::Drop(Dropped::BelowFloor));
    }

    #[test]
    fn epochs_refuse_old_lives_on_both_sides() {
        let mut s = Server::new(1, 77);
        let mut c = Client::new(0, 5, Retry::default());
        c.peer_epoch(1, 76); // Knows an earlier life of the server.
        let (_, req) = c.start(0, 1, 3, 9, b"", u64::MAX).unwrap();
        let Decision::Send(r) = s.on_request(&req) else {
            panic!("not refused")
        };
        assert_eq!(c.on_reply(&r).unwrap().result, Err(Error::StaleResource));
        // A client that rebooted (epoch 6): epoch 5's requests are dropped from then on.
        let mut c5 = Client::new(0, 5, Retry::default());
        let (_, old) = c5.start(0, 1, 3, 9, b"", u64::MAX).unwrap();
        let mut c6 = Client::new(0, 6, Retry::default());
        let (_, new) = c6.start(0, 1, 3, 9, b"", u64::MAX).unwrap();
        let Decision::Perform(h, _) = s.on_request(&new) else {
            panic!()
        };
        assert!(s.finish(&h, Ok(b"")).is_some());
        // Epochs are not ordered: a request of life 5 is still performed once, in its own
        // life, and life 6's cache is kept.
        let Decision::Perform(h5, _) = s.on_request(&old) else {
            panic!()
        };
        assert!(s.finish(&h5, Ok(b"")).is_some());
        assert!(matches!(s.on_request(&new), Decision::Send(_)));
        assert_eq!(s.performed, 2);
        // News of the reboot (heartbeats in epoch 6) retires 5: its requests are dropped.
        s.retire(0, 5);
        assert_eq!(s.on_request(&old), Decision::Drop(Dropped::OldClientEpoch));
    }

    #[test]
    fn a_client_beyond_its_window_is_refused_not_cached() {
        let mut s = Server::new(1, 77);
        let h = |seq: u64, floor: u64| {
            encode(
                &Header {
                    kind: Kind::Request as u8,
                    from: 0,
                    to: 1,
                    epoch: 5,
                    seq,
                    floor,
                    ..Header::default()
                },
                &[],
            )
        };
        assert!(matches!(s.on_request(&h(WINDOW, 0)), Decision::Send(_)));
        assert!(matches!(s.on_request(&h(3, 4)), Decision::Send(_)));
        for seq in 0..WINDOW {
            assert!(matches!(s.on_request(&h(seq, 0)), Decision::Perform(..)));
        }
        assert_eq!(s.performed, WINDOW);
        assert_eq!(s.on_request(b"junk"), Decision::Drop(Dropped::NotForMe));
    }

    /// Regression (a loaded `machines` run: `mfcheck waits 1 24 3000`'s last waits were
    /// refused `InvalidArgument`): requests the client gave up at their deadline while the
    /// server still performed them counted against its window for ever.
    #[test]
    fn requests_given_up_do_not_fill_the_window() {
        let mut s = Server::new(1, 77);
        let mut c = Client::new(0, 5, Retry::default());
        // Eight slow requests (remote waits) with an early deadline, still performed.
        let mut slow = Vec::new();
        for _ in 0..8 {
            let (_, req) = c.start(0, 1, 3, 9, b"", 10).unwrap();
            let Decision::Perform(h, _) = s.on_request(&req) else {
                panic!("not performed")
            };
            slow.push(h);
        }
        let (_, given_up) = c.poll(10);
        assert_eq!(given_up.len(), 8);
        // The client's window is whole again: WINDOW quick requests, each performed.
        for i in 0..WINDOW {
            let (_, req) = c.start(20, 1, 3, 9, b"", u64::MAX).unwrap();
            let Decision::Perform(h, _) = s.on_request(&req) else {
                panic!("request {i} not performed")
            };
            let reply = s.finish(&h, Ok(b"")).unwrap();
            assert!(c.on_reply(&reply).is_some());
        }
        // The slow ones end: nobody waits for their replies, none is sent or cached.
        for h in &slow {
            assert_eq!(s.finish(h, Ok(b"late")), None);
        }
        assert_eq!(s.performed, 8 + WINDOW);
    }
}
