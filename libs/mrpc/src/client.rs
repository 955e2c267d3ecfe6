//! The client's half: requests in flight, sent again with a bounded backoff until their
//! reply or their deadline.
//!
//! The owner (machd) calls [`Client::start`] to make a request (it gets the bytes to send),
//! [`Client::on_reply`] for every reply that arrives, and [`Client::poll`] whenever time
//! passes (it gets the bytes to send again and the requests that ended with `TimedOut`).
//! [`Client::next_deadline`] says when `poll` has something to do. Nothing here blocks or
//! reads a clock.

use crate::{decode, encode, Error, Header, Kind, MAX_MACHINES, PAYLOAD_MAX, WINDOW};
use alloc::vec::Vec;

/// How requests are sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Wait before the first retransmission.
    pub first_ns: u64,
    /// The backoff doubles up to this.
    pub max_ns: u64,
}

impl Default for Retry {
    /// 20 ms doubling to 200 ms: a LAN round trip under TCG is well under a millisecond, so
    /// the first retransmission comes only after a real loss.
    fn default() -> Self {
        Retry {
            first_ns: 20_000_000,
            max_ns: 200_000_000,
        }
    }
}

/// A request, from this client's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub to: u8,
    pub seq: u64,
}

/// A request that ended: its reply's payload, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Done {
    pub ticket: Ticket,
    pub op: u16,
    pub result: Result<Vec<u8>, Error>,
}

struct Pending {
    ticket: Ticket,
    op: u16,
    /// The message as sent (sent again unchanged but for `floor`).
    header: Header,
    payload: Vec<u8>,
    next_at: u64,
    backoff: u64,
    deadline: u64,
    /// Names the server's life itself ([`Client::start_in`]).
    pinned: bool,
}

/// Per server: the next sequence and the server's epoch as known here.
#[derive(Clone, Copy, Default)]
struct Peer {
    next_seq: u64,
    epoch: u32,
}

/// One machine's requests to the others.
pub struct Client {
    me: u8,
    epoch: u32,
    retry: Retry,
    peers: [Peer; MAX_MACHINES],
    pending: Vec<Pending>,
    /// Transmissions after the first (for `machines` and the tests).
    pub retransmissions: u64,
    /// Requests sent (first transmissions).
    pub sent: u64,
}

impl Client {
    /// The client of machine `me` in `epoch`.
    pub fn new(me: u8, epoch: u32, retry: Retry) -> Client {
        Client {
            me,
            epoch,
            retry,
            peers: [Peer {
                next_seq: 1,
                epoch: 0,
            }; MAX_MACHINES],
            pending: Vec::new(),
            retransmissions: 0,
            sent: 0,
        }
    }

    /// Machine `to`'s epoch as this client knows it (0: not yet).
    pub fn known_epoch(&self, to: u8) -> u32 {
        self.peers.get(usize::from(to)).map_or(0, |p| p.epoch)
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The lowest sequence still waited for from `to`.
    fn floor(&self, to: u8) -> u64 {
        self.pending
            .iter()
            .filter(|p| p.ticket.to == to)
            .map(|p| p.ticket.seq)
            .min()
            .unwrap_or(self.peers[usize::from(to)].next_seq)
    }

    /// Start request `op` with `payload` to machine `to` for `user`, ending with `TimedOut`
    /// at `deadline` (absolute ns). Returns its ticket and the bytes to send now.
    ///
    /// `InvalidArgument`: `to` is this machine or no machine; `TooLong`: the payload is over
    /// [`PAYLOAD_MAX`]; `Busy`: [`WINDOW`] requests to `to` are in flight already (the
    /// oldest bounds the window, so that the server's reply cache stays bounded).
    pub fn start(
        &mut self,
        now: u64,
        to: u8,
        op: u16,
        user: u32,
        payload: &[u8],
        deadline: u64,
    ) -> Result<(Ticket, Vec<u8>), Error> {
        self.start_in(now, to, op, user, payload, deadline, None)
    }

    /// As [`Self::start`], naming the server's life: `Some(epoch)` for a request about
    /// something that life handed out (a remote pid), which a later life refuses with
    /// `StaleResource`; `None`: the life known now.
    #[allow(clippy::too_many_arguments)]
    pub fn start_in(
        &mut self,
        now: u64,
        to: u8,
        op: u16,
        user: u32,
        payload: &[u8],
        deadline: u64,
        epoch: Option<u32>,
    ) -> Result<(Ticket, Vec<u8>), Error> {
        if usize::from(to) >= MAX_MACHINES || to == self.me {
            return Err(Error::InvalidArgument);
        }
        if payload.len() > PAYLOAD_MAX {
            return Err(Error::TooLong);
        }
        let floor = self.floor(to);
        let peer = &mut self.peers[usize::from(to)];
        if peer.next_seq - floor >= WINDOW {
            return Err(Error::Busy);
        }
        let seq = peer.next_seq;
        peer.next_seq += 1;
        let header = Header {
            kind: Kind::Request as u8,
            from: self.me,
            to,
            op,
            epoch: self.epoch,
            peer_epoch: epoch.unwrap_or(peer.epoch),
            seq,
            floor,
            user,
            status: 0,
            len: payload.len() as u16,
        };
        let ticket = Ticket { to, seq };
        let bytes = encode(&header, payload);
        self.pending.push(Pending {
            ticket,
            op,
            header,
            payload: payload.to_vec(),
            next_at: now.saturating_add(self.retry.first_ns),
            backoff: self.retry.first_ns,
            deadline,
            pinned: epoch.is_some(),
        });
        self.sent += 1;
        Ok((ticket, bytes))
    }

    /// A datagram arrived: if it is the reply to a request in flight, that request ends.
    /// Anything else (a duplicate reply, a reply to an earlier life of this machine,
    /// garbage) gives `None`.
    pub fn on_reply(&mut self, bytes: &[u8]) -> Option<Done> {
        let (h, payload) = decode(bytes).ok()?;
        if h.kind() != Some(Kind::Reply) || h.to != self.me || h.peer_epoch != self.epoch {
            return None;
        }
        let i = self
            .pending
            .iter()
            .position(|p| p.ticket.to == h.from && p.ticket.seq == h.seq)?;
        let known = self.peers[usize::from(h.from)].epoch;
        let stale = h.result() == Err(Error::StaleResource);
        if known != 0 && known != h.epoch && !stale {
            // From another life of the server than the one asked: not this request's answer.
            // (A `StaleResource` refusal is exactly that life saying the request named an
            // earlier one: it ends the request.)
            return None;
        }
        if !stale {
            self.peers[usize::from(h.from)].epoch = h.epoch;
        }
        let p = self.pending.swap_remove(i);
        Some(Done {
            ticket: p.ticket,
            op: p.op,
            result: h.result().map(|()| payload.to_vec()),
        })
    }

    /// Machine `to` is known to be in `epoch` now (a heartbeat said so). If it was known in
    /// another epoch before, it rebooted: every request to it ends, with `StaleResource` if
    /// it named the earlier life itself ([`Self::start_in`]: its ids are stale now), else
    /// `Gone` (whether the earlier life performed it is unknown; it is not performed again).
    pub fn peer_epoch(&mut self, to: u8, epoch: u32) -> Vec<Done> {
        let Some(peer) = self.peers.get_mut(usize::from(to)) else {
            return Vec::new();
        };
        let old = peer.epoch;
        peer.epoch = epoch;
        if old == 0 || old == epoch {
            // First news, or no news. Requests sent before the epoch was known name none.
            for p in self
                .pending
                .iter_mut()
                .filter(|p| p.ticket.to == to && !p.pinned)
            {
                p.header.peer_epoch = epoch;
            }
            return Vec::new();
        }
        self.end_all(to, |p| {
            if p.pinned {
                Error::StaleResource
            } else {
                Error::Gone
            }
        })
    }

    /// End every request in flight to `to` with `error` (e.g. its machine is known down).
    pub fn fail_all(&mut self, to: u8, error: Error) -> Vec<Done> {
        self.end_all(to, |_| error)
    }

    /// End every request in flight to `to`, each with the error `why` gives it.
    fn end_all(&mut self, to: u8, why: impl Fn(&Pending) -> Error) -> Vec<Done> {
        let mut done = Vec::new();
        self.pending.retain(|p| {
            if p.ticket.to != to {
                return true;
            }
            done.push(Done {
                ticket: p.ticket,
                op: p.op,
                result: Err(why(p)),
            });
            false
        });
        done
    }

    /// Time is `now`: the messages to send again (`(to, bytes)`), and the requests whose
    /// deadline passed (ended with `TimedOut`).
    pub fn poll(&mut self, now: u64) -> (Vec<(u8, Vec<u8>)>, Vec<Done>) {
        let mut done = Vec::new();
        self.pending.retain(|p| {
            if now < p.deadline {
                return true;
            }
            done.push(Done {
                ticket: p.ticket,
                op: p.op,
                result: Err(Error::TimedOut),
            });
            false
        });
        let floors: Vec<(u8, u64)> = (0..MAX_MACHINES as u8)
            .map(|m| (m, self.floor(m)))
            .collect();
        let mut resend = Vec::new();
        let max = self.retry.max_ns;
        for p in self.pending.iter_mut().filter(|p| now >= p.next_at) {
            p.header.floor = floors[usize::from(p.ticket.to)].1;
            resend.push((p.ticket.to, encode(&p.header, &p.payload)));
            p.backoff = p.backoff.saturating_mul(2).min(max);
            p.next_at = now.saturating_add(p.backoff).min(p.deadline);
        }
        self.retransmissions += resend.len() as u64;
        (resend, done)
    }

    /// The earliest time [`Self::poll`] has something to do (`u64::MAX`: nothing in flight).
    pub fn next_deadline(&self) -> u64 {
        self.pending
            .iter()
            .map(|p| p.next_at.min(p.deadline))
            .min()
            .unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_to(req: &[u8], epoch: u32, status: u16, payload: &[u8]) -> Vec<u8> {
        let (h, _) = decode(req).unwrap();
        encode(
            &Header {
                kind: Kind::Reply as u8,
                from: h.to,
                to: h.from,
                op: h.op,
                epoch,
                peer_epoch: h.epoch,
                seq: h.seq,
                status,
                ..Header::default()
            },
            payload,
        )
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut c = Client::new(0, 5, Retry::default());
        assert_eq!(
            c.start(0, 0, 1, 1, b"", 10).unwrap_err(),
            Error::InvalidArgument
        );
        assert_eq!(
            c.start(0, 200, 1, 1, b"", 10).unwrap_err(),
            Error::InvalidArgument
        );
        assert_eq!(
            c.start(0, 1, 1, 1, &[0; PAYLOAD_MAX + 1], 10).unwrap_err(),
            Error::TooLong
        );
        for _ in 0..WINDOW {
            c.start(0, 1, 1, 1, b"", u64::MAX).unwrap();
        }
        assert_eq!(c.start(0, 1, 1, 1, b"", u64::MAX).unwrap_err(), Error::Busy);
        // Another server is not held up by this one's window.
        assert!(c.start(0, 2, 1, 1, b"", u64::MAX).is_ok());
    }

    #[test]
    fn backoff_doubles_to_its_bound_and_the_deadline_ends_it() {
        let r = Retry {
            first_ns: 10,
            max_ns: 40,
        };
        let mut c = Client::new(0, 5, r);
        let (t, _) = c.start(0, 1, 7, 1, b"x", 200).unwrap();
        let mut sent_at = Vec::new();
        for now in 0..=200 {
            let (re, done) = c.poll(now);
            if !re.is_empty() {
                sent_at.push(now);
            }
            if !done.is_empty() {
                assert_eq!(done[0].ticket, t);
                assert_eq!(done[0].result, Err(Error::TimedOut));
                assert_eq!(now, 200);
            }
        }
        assert_eq!(sent_at, vec![10, 30, 70, 110, 150, 190]);
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn replies_end_requests_once_and_strays_are_ignored() {
        let mut c = Client::new(0, 5, Retry::default());
        let (t, req) = c.start(0, 1, 7, 1, b"q", u64::MAX).unwrap();
        // A reply to an earlier life of this client.
        let mut stray = reply_to(&req, 9, 0, b"a");
        stray[12] ^= 1;
        assert!(c.on_reply(&stray).is_none());
        let d = c.on_reply(&reply_to(&req, 9, 0, b"a")).unwrap();
        assert_eq!((d.ticket, d.result), (t, Ok(b"a".to_vec())));
        assert!(c.on_reply(&reply_to(&req, 9, 0, b"a")).is_none());
        assert_eq!(c.known_epoch(1), 9);
        // A reply from another life of the server than the one known.
        let (_, req) = c.start(0, 1, 7, 1, b"q", u64::MAX).unwrap();
        assert!(c.on_reply(&reply_to(&req, 10, 0, b"a")).is_none());
        assert!(c.on_reply(b"garbage").is_none());
    }

    #[test]
    fn a_new_epoch_of_the_server_ends_its_requests_gone() {
        let mut c = Client::new(0, 5, Retry::default());
        assert!(c.peer_epoch(1, 9).is_empty());
        let (a, _) = c.start(0, 1, 7, 1, b"", u64::MAX).unwrap();
        let (b, _) = c.start(0, 2, 7, 1, b"", u64::MAX).unwrap();
        assert!(c.peer_epoch(1, 9).is_empty());
        // A request about something life 9 handed out ends stale when life 11 is heard of.
        let (p, _) = c.start_in(0, 1, 7, 1, b"", u64::MAX, Some(9)).unwrap();
        let gone = c.peer_epoch(1, 11);
        assert_eq!(gone.len(), 2);
        let end = |t: Ticket| {
            gone.iter()
                .find(|d| d.ticket == t)
                .map(|d| d.result.clone())
        };
        assert_eq!(end(a), Some(Err(Error::Gone)));
        assert_eq!(end(p), Some(Err(Error::StaleResource)));
        assert_eq!(c.in_flight(), 1);
        let down = c.fail_all(2, Error::Gone);
        assert_eq!(down[0].ticket, b);
    }
}
