//! `udpsend HOST PORT N SIZE [echo]`: sends N UDP datagrams of SIZE bytes (at most 1,472)
//! to HOST:PORT through `netd` (`ulib::net`), each starting with its sequence number (4
//! bytes, little-endian) followed by a byte pattern. With `echo`, it waits up to 1 s for
//! each datagram's answer and checks its bytes (an `udpecho` at the other end), counting
//! answers lost and wrong. Prints `udpsend: sent N of SIZE bytes to HOST:PORT in T us` and,
//! with `echo`, the answers; exits 1 on a send error or a wrong answer.
#![no_std]
#![no_main]

extern crate alloc;

use ulib::abi::Error;
use ulib::net::{Ipv4, UdpSocket, DATA_MAX};
use ulib::{println, sys};

ulib::main!(main);

const ECHO_TIMEOUT_NS: u64 = 1_000_000_000;

fn fill(buf: &mut [u8], seq: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(7).wrapping_add(seq) as u8;
    }
    let s = seq.to_le_bytes();
    let n = buf.len().min(4);
    buf[..n].copy_from_slice(&s[..n]);
}

fn main(args: &[&str]) -> i32 {
    let echo = args.last() == Some(&"echo");
    let a = if echo { &args[..args.len() - 1] } else { args };
    let parsed = match a {
        [_, h, p, n, s] => (
            Ipv4::parse(h),
            p.parse::<u16>().ok(),
            n.parse::<u32>().ok(),
            s.parse::<usize>().ok(),
        ),
        _ => (None, None, None, None),
    };
    let (Some(host), Some(port), Some(n), Some(size)) = parsed else {
        println!("udpsend: usage: udpsend HOST PORT N SIZE [echo]");
        return 2;
    };
    let mut s = match UdpSocket::bind(0) {
        Ok(s) => s,
        Err(e) => {
            println!("udpsend: ERROR: bind: {e}");
            return 1;
        }
    };
    if size > 65_536 {
        println!("udpsend: SIZE at most 65536 (more than 1472 is refused by ulib::net)");
        return 2;
    }
    let mut out = alloc::vec![0u8; size];
    let mut back = [0u8; DATA_MAX];
    let start = sys::clock_ns().unwrap_or(0);
    let (mut lost, mut wrong) = (0u32, 0u32);
    for seq in 0..n {
        fill(&mut out, seq);
        if let Err(e) = s.send_to(host, port, &out) {
            println!("udpsend: ERROR: send {seq} ({size} bytes): {e}");
            return 1;
        }
        if echo {
            match s.recv_from(&mut back, ECHO_TIMEOUT_NS) {
                Ok((m, _, _)) if back[..m] == out[..size] => {}
                Ok(_) => wrong += 1,
                Err(Error::TimedOut) => lost += 1,
                Err(e) => {
                    println!("udpsend: ERROR: receive {seq}: {e}");
                    return 1;
                }
            }
        }
    }
    let us = (sys::clock_ns().unwrap_or(0) - start) / 1000;
    println!("udpsend: sent {n} of {size} bytes to {host}:{port} in {us} us");
    if echo {
        println!(
            "udpsend: {} answered, {lost} lost, {wrong} wrong",
            n - lost - wrong
        );
        if wrong > 0 {
            println!("udpsend: ERROR: {wrong} answers wrong");
            return 1;
        }
    }
    0
}
