//! `udpecho PORT [N]`: binds UDP port PORT through `netd` (`ulib::net`) and answers every
//! datagram with the same bytes to where it came from; with N, ends after N datagrams.
//! It takes every datagram waiting (at most [`BATCH`]) in one request and sends the
//! answers, in place, with the request that takes the next ones (`UdpSocket::exchange`,
//! `OP_EXCHANGE`): one call to `netd` per batch, not per datagram.
//! Prints `udpecho: listening on PORT` once bound, `udpecho: N received, N answered, N
//! errors` each time the count passes a thousand and at the end (answered: handed to
//! `netd`, which drops and counts an answer to port or address 0), an `udpecho: ERROR`
//! line for a batch of answers refused (the count goes on), and ends with an `ERROR` line
//! and status 1 when `netd` refuses the exchange itself. This is what the host client of `cargo xtask test`
//! (and `socat` by hand) talks to. It waits (at most 30 s) for `net.udp` to be served: a
//! loaded `[smp4]` test run once started it on another core before the news of a `netd`
//! just registered had reached that core (`bind 7: no such resource`).
#![no_std]
#![no_main]

use ulib::abi::Error;
use ulib::net::{SendRecvError, UdpSocket};
use ulib::println;

ulib::main!(main);

/// How long `udpecho` waits for `net.udp` to be served (a hang guard).
const NET_WAIT_NS: u64 = 30_000_000_000;
/// Most datagrams taken in one request.
const BATCH: u64 = 64;

fn main(args: &[&str]) -> i32 {
    let (port, limit) = match args {
        [_, p] => (p.parse::<u16>().ok(), Some(u64::MAX)),
        [_, p, n] => (p.parse::<u16>().ok(), n.parse::<u64>().ok()),
        _ => (None, None),
    };
    let (Some(port), Some(limit)) = (port, limit) else {
        println!("udpecho: usage: udpecho PORT [N]");
        return 2;
    };
    // A netd started just before may not be registered yet, or not yet seen from this
    // core (the function registry answers here once the news reached it): wait for it.
    if let Err(e) = ulib::fnid::wait(ulib::net::FN_UDP, NET_WAIT_NS) {
        println!(
            "udpecho: ERROR: no {} after {} s: {e}",
            ulib::net::FN_UDP,
            NET_WAIT_NS / 1_000_000_000
        );
        return 1;
    }
    let mut s = match UdpSocket::bind(port) {
        Ok(s) => s,
        Err(e) => {
            println!("udpecho: ERROR: bind {port}: {e}");
            return 1;
        }
    };
    println!("udpecho: listening on {}", s.port());
    let (mut received, mut answered, mut errors) = (0u64, 0u64, 0u64);
    // Answers in the page, sent with the next exchange.
    let mut queued = 0u64;
    loop {
        // The last exchange only sends: nothing is received past `limit`.
        let want = limit.saturating_sub(received).min(BATCH);
        let r = s.exchange(want as usize, u64::MAX);
        let sent = s.sent() as u64;
        answered += sent;
        let before = received;
        match r {
            Ok(n) => {
                received += n as u64;
                queued = n as u64;
                s.answer_all();
            }
            // An answer refused (a full queue, a malformed record: those after it are
            // dropped with it); the next exchange goes on receiving.
            Err(SendRecvError::Send(e @ (Error::Busy | Error::InvalidArgument)))
                if sent < queued =>
            {
                errors += queued - sent;
                queued = 0;
                println!("udpecho: ERROR: answer: {e}");
            }
            // Refused for no datagram of it (the port is not ours any more, no server):
            // the next exchange would be refused as well.
            Err(SendRecvError::Send(e) | SendRecvError::Recv(e)) => {
                errors += queued.saturating_sub(sent);
                println!("udpecho: ERROR: exchange: {e}");
                println!("udpecho: {received} received, {answered} answered, {errors} errors");
                return 1;
            }
        }
        if want == 0 {
            break;
        }
        if received / 1000 > before / 1000 {
            println!("udpecho: {received} received, {answered} answered, {errors} errors");
        }
    }
    println!("udpecho: {received} received, {answered} answered, {errors} errors");
    0
}
