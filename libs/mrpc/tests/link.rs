//! The protocol on a bad network: machines joined by a simulated link that drops,
//! duplicates and reorders datagrams (seeded, so a failure repeats), with virtual time.
//! Every request must be performed exactly once and answered exactly once; a machine that
//! dies must end every request to it with `TimedOut` by its deadline while the others go on;
//! a machine that reboots must never perform a request of its earlier life.

use mrpc::client::{Client, Done, Retry, Ticket};
use mrpc::server::{Decision, Server};
use mrpc::{decode, Error, Kind};
use std::collections::HashMap;

/// One simulated step of time.
const STEP: u64 = 100_000;

struct Link {
    rng: xorshift::Rng,
    drop_pct: u64,
    dup_pct: u64,
    /// Most extra delay, in steps (reordering comes from different delays).
    jitter: u64,
    queue: Vec<(u64, u8, Vec<u8>)>,
    dropped: u64,
    duplicated: u64,
}

impl Link {
    fn send(&mut self, now: u64, to: u8, bytes: Vec<u8>) {
        if self.rng.below(100) < self.drop_pct {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.below(100) < self.dup_pct {
            self.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + STEP * (1 + self.rng.below(self.jitter + 1));
            self.queue.push((at, to, bytes.clone()));
        }
    }

    fn due(&mut self, now: u64) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        self.queue.retain(|(at, to, b)| {
            if *at <= now {
                out.push((*to, b.clone()));
                false
            } else {
                true
            }
        });
        out
    }
}

struct Machine {
    client: Client,
    server: Server,
    alive: bool,
    /// (client machine, client epoch, seq) -> times performed.
    performed: HashMap<(u8, u32, u64), u32>,
}

fn machine(id: u8, epoch: u32) -> Machine {
    Machine {
        client: Client::new(
            id,
            epoch,
            Retry {
                first_ns: 2_000_000,
                max_ns: 20_000_000,
            },
        ),
        server: Server::new(id, epoch),
        alive: true,
        performed: HashMap::new(),
    }
}

/// Run the network until `until` (virtual ns); requests are performed at once, answering
/// the request's payload reversed. Ended requests are collected in `done`.
fn run(ms: &mut [Machine], link: &mut Link, from: u64, until: u64, done: &mut Vec<(u8, Done)>) {
    let mut now = from;
    while now < until {
        for (to, bytes) in link.due(now) {
            let m = &mut ms[usize::from(to)];
            if !m.alive {
                continue;
            }
            let Ok((h, _)) = decode(&bytes) else { continue };
            match h.kind() {
                Some(Kind::Request) => match m.server.on_request(&bytes) {
                    Decision::Perform(h, payload) => {
                        *m.performed.entry((h.from, h.epoch, h.seq)).or_default() += 1;
                        let answer: Vec<u8> = payload.iter().rev().copied().collect();
                        if let Some(r) = m.server.finish(&h, Ok(&answer)) {
                            link.send(now, h.from, r);
                        }
                    }
                    Decision::Send(r) => link.send(now, h.from, r),
                    Decision::Drop(_) => {}
                },
                Some(Kind::Reply) => {
                    if let Some(d) = m.client.on_reply(&bytes) {
                        done.push((to, d));
                    }
                }
                _ => {}
            }
        }
        for (i, m) in ms.iter_mut().enumerate().filter(|(_, m)| m.alive) {
            let (resend, ended) = m.client.poll(now);
            for (to, b) in resend {
                link.send(now, to, b);
            }
            done.extend(ended.into_iter().map(|d| (i as u8, d)));
        }
        now += STEP;
    }
}

fn link(seed: u64, drop_pct: u64, dup_pct: u64) -> Link {
    Link {
        rng: xorshift::Rng(seed),
        drop_pct,
        dup_pct,
        jitter: 20,
        queue: Vec::new(),
        dropped: 0,
        duplicated: 0,
    }
}

#[test]
fn every_request_is_performed_exactly_once_on_a_lossy_duplicating_reordering_link() {
    for seed in [1u64, 2, 3, 17, 1989] {
        let mut ms: Vec<Machine> = (0..4).map(|i| machine(i, 100 + u32::from(i))).collect();
        let mut l = link(seed, 5, 5);
        let mut asked: HashMap<(u8, Ticket), Vec<u8>> = HashMap::new();
        let mut done = Vec::new();
        let mut now = 0;
        // 10,000 requests in rounds, each machine to each other one, windows kept.
        let mut rng = xorshift::Rng(seed * 7 + 1);
        while asked.len() < 10_000 {
            for from in 0..4u8 {
                for to in (0..4u8).filter(|&t| t != from) {
                    let payload: Vec<u8> =
                        (0..rng.below(64)).map(|_| rng.next_u64() as u8).collect();
                    let deadline = now + 10_000_000_000;
                    match ms[usize::from(from)]
                        .client
                        .start(now, to, 1, 7, &payload, deadline)
                    {
                        Ok((t, bytes)) => {
                            asked.insert((from, t), payload);
                            l.send(now, to, bytes);
                        }
                        Err(Error::Busy) => {}
                        Err(e) => panic!("start: {e:?}"),
                    }
                }
            }
            run(&mut ms, &mut l, now, now + 10 * STEP, &mut done);
            now += 10 * STEP;
        }
        // Let everything in flight finish (bounded: far beyond every deadline's need).
        let end = now + 5_000_000_000;
        while ms.iter().any(|m| m.client.in_flight() > 0) && now < end {
            run(&mut ms, &mut l, now, now + 100 * STEP, &mut done);
            now += 100 * STEP;
        }
        assert!(
            l.dropped > 0 && l.duplicated > 0,
            "the link did not misbehave"
        );
        assert_eq!(
            done.len(),
            asked.len(),
            "seed {seed}: not every request ended"
        );
        let mut seen = HashMap::new();
        for (from, d) in &done {
            *seen.entry((*from, d.ticket)).or_insert(0) += 1;
            let want: Vec<u8> = asked[&(*from, d.ticket)].iter().rev().copied().collect();
            assert_eq!(d.result, Ok(want), "seed {seed}: a wrong answer");
        }
        assert!(
            seen.values().all(|&n| n == 1),
            "seed {seed}: a request ended twice"
        );
        let performed: u32 = ms.iter().flat_map(|m| m.performed.values()).sum();
        assert_eq!(
            performed as usize,
            asked.len(),
            "seed {seed}: performed count"
        );
        assert!(ms.iter().all(|m| m.performed.values().all(|&n| n == 1)));
        let retrans: u64 = ms.iter().map(|m| m.client.retransmissions).sum();
        assert!(retrans > 0);
    }
}

#[test]
fn a_dead_machine_times_out_every_request_by_its_deadline_and_the_others_go_on() {
    let mut ms: Vec<Machine> = (0..3).map(|i| machine(i, 10 + u32::from(i))).collect();
    let mut l = link(9, 0, 0);
    let mut done = Vec::new();
    ms[2].alive = false;
    let deadline = 1_000_000_000;
    let mut to_dead = Vec::new();
    for _ in 0..10 {
        let (t, b) = ms[0].client.start(0, 2, 1, 7, b"x", deadline).unwrap();
        to_dead.push(t);
        l.send(0, 2, b);
        let (_, b) = ms[0].client.start(0, 1, 1, 7, b"y", deadline).unwrap();
        l.send(0, 1, b);
    }
    run(&mut ms, &mut l, 0, deadline + STEP, &mut done);
    for t in &to_dead {
        let d = done
            .iter()
            .find(|(_, d)| d.ticket == *t)
            .expect("a request to the dead machine never ended");
        assert_eq!(d.1.result, Err(Error::TimedOut));
    }
    assert_eq!(done.iter().filter(|(_, d)| d.result.is_ok()).count(), 10);
    assert_eq!(ms[0].client.in_flight(), 0);
}

#[test]
fn a_rebooted_machine_never_performs_a_request_of_its_earlier_life() {
    let mut ms: Vec<Machine> = (0..2).map(|i| machine(i, 50 + u32::from(i))).collect();
    // Heartbeats told machine 0 of machine 1's epoch.
    ms[0].client.peer_epoch(1, 51);
    let mut l = link(4, 30, 30);
    let mut done = Vec::new();
    let mut tickets = Vec::new();
    for _ in 0..20 {
        let (t, b) = ms[0].client.start(0, 1, 1, 7, b"z", 5_000_000_000).unwrap();
        tickets.push(t);
        l.send(0, 1, b);
    }
    run(&mut ms, &mut l, 0, 3 * STEP, &mut done);
    // Machine 1 reboots: a new epoch, nothing remembered.
    let old = std::mem::take(&mut ms[1].performed);
    ms[1] = machine(1, 52);
    run(&mut ms, &mut l, 3 * STEP, 100_000_000, &mut done);
    // Its heartbeat arrives: what was still in flight ends Gone.
    let gone = ms[0].client.peer_epoch(1, 52);
    done.extend(gone.into_iter().map(|d| (0, d)));
    run(&mut ms, &mut l, 100_000_000, 200_000_000, &mut done);
    assert!(
        ms[1].performed.is_empty(),
        "the new life performed an old request"
    );
    assert_eq!(done.len(), tickets.len());
    for (_, d) in &done {
        match &d.result {
            Ok(_) => assert!(old.contains_key(&(0, 50, d.ticket.seq))),
            Err(Error::StaleResource | Error::Gone) => {}
            other => panic!("unexpected end {other:?}"),
        }
    }
}
