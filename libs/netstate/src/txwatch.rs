//! Transmit queues that stopped moving: a UDP socket's queue whose first datagram cannot go
//! out (its next hop never answers ARP, or there is no route) is given up after
//! [`STALL_NS`].
//!
//! Why: smoltcp keeps such a datagram at the head of the socket's queue for ever, asking
//! for the neighbour once a second, so every later datagram of that socket, to any
//! destination, waits behind it until the queue is full and every send is refused; and
//! smoltcp's one ARP rate limit per interface lets that socket's requests starve other
//! sockets' (a newly needed neighbour of another program's socket was never asked for;
//! found by an audit; smoltcp issue 594). `netd` watches each queue: the time it last
//! moved, from the bytes queued after each poll and after each datagram it queues; one
//! that holds datagrams and has not moved for [`STALL_NS`] is emptied (`netd` rebuilds the
//! socket; its counters count one drop for the queue), as Linux drops a neighbour's queue when
//! its resolution fails (after about 3 s); one at a time, the others' waits starting
//! again ([`TxWatch::restart`]). Not mended: a program that keeps sending to ever new
//! silent neighbours can still delay other sockets' new neighbours, three seconds each
//! (smoltcp has one ARP rate limit per interface and keeps its neighbour cache to itself).
//!
//! Bytes are what smoltcp tells, so a queue of empty datagrams only is not watched: such a
//! datagram to a silent neighbour still holds its socket, and the rate limit, as before.
//!
//! Pure logic, apart from `netd` for the host tests (`tests/txwatch.rs`).

/// How long a queue holding datagrams may stand still (ns): three of smoltcp's ARP
/// requests, a second apart.
pub const STALL_NS: u64 = 3_000_000_000;

/// One queue's watch: when it last moved (or began to hold datagrams), and its bytes then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Watch {
    port: u16,
    since: u64,
    queued: usize,
}

/// The watches of up to [`crate::SOCKETS`] sockets, by port.
#[derive(Debug, Default)]
pub struct TxWatch {
    watches: [Option<Watch>; crate::SOCKETS as usize],
}

impl TxWatch {
    pub const fn new() -> TxWatch {
        TxWatch {
            watches: [None; crate::SOCKETS as usize],
        }
    }

    fn slot(&mut self, port: u16) -> Option<&mut Option<Watch>> {
        if let Some(i) = self
            .watches
            .iter()
            .position(|w| w.is_some_and(|w| w.port == port))
        {
            return self.watches.get_mut(i);
        }
        self.watches.iter_mut().find(|w| w.is_none())
    }

    /// Port `port`'s queue holds `queued` bytes at `now` (ns); `moved`: a datagram left it
    /// since the last look (its bytes fell, or fell short of what was just added).
    pub fn look(&mut self, port: u16, queued: usize, moved: bool, now: u64) {
        let Some(slot) = self.slot(port) else {
            return;
        };
        *slot = match *slot {
            _ if queued == 0 => None,
            Some(w) if !moved => Some(Watch { queued, ..w }),
            _ => Some(Watch {
                port,
                since: now,
                queued,
            }),
        };
    }

    /// Port `port`'s queue now holds `queued` bytes, with nothing added since the last look
    /// ([`look`](Self::look), moved if the bytes fell).
    pub fn polled(&mut self, port: u16, queued: usize, now: u64) {
        let moved = self
            .watches
            .iter()
            .flatten()
            .find(|w| w.port == port)
            .is_some_and(|w| queued < w.queued);
        self.look(port, queued, moved, now);
    }

    /// The port is gone (closed, or its socket rebuilt): its watch too.
    pub fn forget(&mut self, port: u16) {
        for w in &mut self.watches {
            if w.is_some_and(|w| w.port == port) {
                *w = None;
            }
        }
    }

    /// Another queue was given up at `now`: every watched queue starts its wait again. One
    /// may have stood still only because the queue given up took smoltcp's one ARP rate
    /// limit each time (its neighbour was never asked for): it gets its [`STALL_NS`] anew,
    /// so queues are given up one at a time, the longest stalled first.
    pub fn restart(&mut self, now: u64) {
        for w in self.watches.iter_mut().flatten() {
            w.since = now;
        }
    }

    /// A port whose queue holds datagrams and has stood still for [`STALL_NS`] at `now`.
    pub fn stalled(&self, now: u64) -> Option<u16> {
        self.watches
            .iter()
            .flatten()
            .filter(|w| now.saturating_sub(w.since) >= STALL_NS)
            .min_by_key(|w| w.since)
            .map(|w| w.port)
    }

    /// When the next queue stalls, if one is watched (ns, clock time).
    pub fn next_deadline(&self) -> Option<u64> {
        self.watches
            .iter()
            .flatten()
            .map(|w| w.since.saturating_add(STALL_NS))
            .min()
    }
}
