//! `udpecho PORT [N]`: binds UDP port PORT through `netd` (`ulib::net`) and answers every
//! datagram with the same bytes to where it came from; with N, ends after N datagrams.
//! Each answer goes with the receive of the next datagram in one request
//! (`UdpSocket::send_recv`, `OP_SEND_RECV`): one call to `netd` per datagram.
//! Prints `udpecho: listening on PORT` once bound, `udpecho: N received, N answered, N
//! errors` every 1,000 datagrams and at the end, and an `udpecho: ERROR` line for a send
//! that failed (the count goes on). This is what the host client of `cargo xtask test`
//! (and `socat` by hand) talks to. It waits (at most 30 s) for `net.udp` to be served: a
//! loaded `[smp4]` test run once started it on another core before the news of a `netd`
//! just registered had reached that core (`bind 7: no such resource`).
#![no_std]
#![no_main]

use ulib::abi::Error;
use ulib::net::{SendRecvError, UdpSocket, DATA_MAX};
use ulib::println;

ulib::main!(main);

/// How long `udpecho` waits for `net.udp` to be served (a hang guard).
const NET_WAIT_NS: u64 = 30_000_000_000;

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
    let mut buf = [0u8; DATA_MAX];
    let (mut received, mut answered, mut errors) = (0u64, 0u64, 0u64);
    let mut next = if limit > 0 {
        s.recv_from(&mut buf, u64::MAX)
    } else {
        Err(Error::TimedOut)
    };
    while received < limit {
        let (n, from, fport) = match next {
            Ok(d) => d,
            Err(e) => {
                println!("udpecho: ERROR: receive: {e}");
                return 1;
            }
        };
        received += 1;
        let answer_failed = |e: Error| println!("udpecho: ERROR: answer to {from}:{fport}: {e}");
        if received == limit {
            // The last: answered alone, no receive after it.
            match s.send_to(from, fport, &buf[..n]) {
                Ok(()) => answered += 1,
                Err(e) => {
                    errors += 1;
                    answer_failed(e);
                }
            }
            break;
        }
        next = match s.send_recv(from, fport, &mut buf, n, u64::MAX) {
            Ok(d) => {
                answered += 1;
                Ok(d)
            }
            Err(SendRecvError::Send(e)) => {
                errors += 1;
                answer_failed(e);
                s.recv_from(&mut buf, u64::MAX)
            }
            // `Gone`: the server ended holding it, perhaps before sending.
            Err(SendRecvError::Recv(e)) => {
                if e == Error::Gone {
                    errors += 1;
                } else {
                    answered += 1;
                }
                Err(e)
            }
        };
        if received % 1000 == 0 {
            println!("udpecho: {received} received, {answered} answered, {errors} errors");
        }
    }
    println!("udpecho: {received} received, {answered} answered, {errors} errors");
    0
}
