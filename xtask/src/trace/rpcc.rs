//! RPCC messages in a kernel trace: each send matched to its receive, and requests to
//! their replies. Pure: no I/O.

use super::dump::{Dump, Event, Kind};
use std::collections::{BTreeMap, HashSet};

/// One RPCC message, matched: sent on core `from`, received on core `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub from: usize,
    pub to: usize,
    pub tag: u64,
    pub sent_ns: u64,
    pub received_ns: u64,
    /// A request (else a reply).
    pub request: bool,
}

/// A request and its reply: requester's send, owner's receive, owner's reply, requester's
/// receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundTrip {
    pub requester: usize,
    pub owner: usize,
    pub tag: u64,
    pub ns: [u64; 4],
}

/// Every RPCC message whose send and receive are both in the trace.
pub fn match_messages(dump: &Dump) -> Vec<Message> {
    // A request's send is followed on its core by the submit with the same destination and
    // tag (a few events later at most).
    let mut request_sends = HashSet::new();
    for core in 0..dump.cores() {
        let evs: Vec<(usize, &Event)> = dump.of_core(core).collect();
        for (j, (_, e)) in evs.iter().enumerate() {
            if e.kind != Kind::Submit {
                continue;
            }
            let found = evs[j.saturating_sub(8)..j].iter().rev().find(|(i, s)| {
                s.kind == Kind::RpccSend && (s.a, s.b) == (e.a, e.b) && !request_sends.contains(i)
            });
            if let Some(&(i, _)) = found {
                request_sends.insert(i);
            }
        }
    }
    // Each pair of cores has one ring each way, first in first out: match the receives on
    // `to` from `from` in order with the sends, by tag, a send never after its receive.
    let mut sends: BTreeMap<(usize, usize), Vec<(usize, &Event)>> = BTreeMap::new();
    let mut receives: BTreeMap<(usize, usize), Vec<&Event>> = BTreeMap::new();
    for (i, e) in dump.events.iter().enumerate() {
        match e.kind {
            Kind::RpccSend => sends
                .entry((e.core, e.a as usize))
                .or_default()
                .push((i, e)),
            Kind::RpccReceive => receives.entry((e.a as usize, e.core)).or_default().push(e),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (pair, recv) in &receives {
        let Some(sent) = sends.get(pair) else {
            continue;
        };
        let mut next = 0;
        for r in recv {
            let found = sent[next..]
                .iter()
                .take_while(|(_, s)| s.ns <= r.ns)
                .position(|(_, s)| s.b == r.b);
            let Some(k) = found else {
                continue;
            };
            let (i, s) = sent[next + k];
            next += k + 1;
            out.push(Message {
                from: pair.0,
                to: pair.1,
                tag: r.b,
                sent_ns: s.ns,
                received_ns: r.ns,
                request: request_sends.contains(&i),
            });
        }
    }
    out.sort_by_key(|m| (m.sent_ns, m.from, m.to));
    out
}

/// Requests whose reply is in the trace too.
pub fn round_trips(messages: &[Message]) -> Vec<RoundTrip> {
    messages
        .iter()
        .filter(|m| m.request)
        .filter_map(|q| {
            let r = messages.iter().find(|r| {
                !r.request
                    && (r.from, r.to, r.tag) == (q.to, q.from, q.tag)
                    && r.sent_ns >= q.received_ns
            })?;
            Some(RoundTrip {
                requester: q.from,
                owner: q.to,
                tag: q.tag,
                ns: [q.sent_ns, q.received_ns, r.sent_ns, r.received_ns],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::sample::sample;
    use super::*;

    #[test]
    fn messages_match_in_ring_order() {
        let m = match_messages(&sample());
        let got: Vec<(usize, usize, u64, bool)> =
            m.iter().map(|m| (m.from, m.to, m.tag, m.request)).collect();
        assert_eq!(
            got,
            [
                (0, 1, 1, true),
                (1, 0, 1, false),
                (0, 1, 2, true),
                (1, 0, 2, false),
                (1, 0, 1, true),
                (0, 1, 1, false),
            ]
        );
        assert_eq!((m[4].sent_ns, m[4].received_ns), (1400, 1500));
        let r = round_trips(&m);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].ns, [410, 450, 610, 700]);
        assert_eq!(
            (r[2].requester, r[2].owner, r[2].ns),
            (1, 0, [1400, 1500, 1530, 1600])
        );
    }
}
