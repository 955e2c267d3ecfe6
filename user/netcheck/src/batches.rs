//! `netcheck`'s checks of batches (`abi::net::batch`): frames from the driver several to a
//! request (`UDP_FRAMES_IN`), and datagrams between a program and `netd` several to a
//! request (`OP_EXCHANGE`, `UdpSocket::exchange`), the good and the bad.

use crate::peer::{icmp_of, ping_frame, udp_frame, udp_of, Peer};
use crate::{datagram, REPLY_LIMIT_NS};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{Msg, MSG_ICA_READ_ONLY};
use ulib::abi::net::{batch, FRAME_ICA_SIZE, FRAME_MAX};
use ulib::abi::res::Rights;
use ulib::abi::Error;
use ulib::net::{
    pack_exchange, Ipv4, SendRecvError, UdpSocket, DATA_MAX, OP_EXCHANGE, SEND_FAILED,
};
use ulib::{ipc, sys};

/// Pings in one batch of frames.
const PINGS: u16 = 70;
/// The peer's address (the gateway `peer` plays).
const PEER: Ipv4 = Ipv4([10, 0, 2, 2]);

/// Three datagrams to `udpecho` in one `UDP_FRAMES_IN` batch are all echoed; bad batches
/// are refused `InvalidArgument` and counted, and `netd` echoes after them.
pub fn frame_batches(p: &mut Peer, fails: &mut Vec<String>) {
    p.sent.clear();
    let ds: Vec<Vec<u8>> = (0..3).map(|i| datagram(9000 + i)).collect();
    let frames: Vec<Vec<u8>> = ds.iter().map(|d| udp_frame(5555, 7, d)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    p.inject_batch(&refs, None);
    for (i, d) in ds.iter().enumerate() {
        if p.wait_for(REPLY_LIMIT_NS, |f| udp_of(f).filter(|u| u.2 == *d))
            .is_none()
        {
            fails.push(format!("a batch of 3 frames: datagram {i} not echoed"));
        }
    }
    // More small frames in one page (70; 73 fit) than netd's receive queue holds (64):
    // smoltcp takes them as the queue fills, none is dropped (a review found the rest
    // were). Pings: smoltcp answers each itself, no socket queue in between.
    p.sent.clear();
    let pings: Vec<Vec<u8>> = (0..PINGS).map(|i| ping_frame(2000 + i, b"many")).collect();
    let refs: Vec<&[u8]> = pings.iter().map(|f| &f[..]).collect();
    p.inject_batch(&refs, None);
    let mut answered = 0;
    for i in 0..PINGS {
        let seq = 2000 + i;
        let answer = p.wait_for(REPLY_LIMIT_NS, |f| {
            icmp_of(f).and_then(|r| r.ok()).filter(|r| r.0 == seq)
        });
        answered += u16::from(answer.is_some());
    }
    if answered != PINGS {
        fails.push(format!(
            "a batch of {PINGS} pings: {answered} answered (netd's counters {:?})",
            ulib::net::counters()
        ));
    }
    let before = ulib::net::counters().map_or(0, |c| c[5]);
    let junk = [0xeeu8; 60];
    let long = [0u8; FRAME_MAX + 1];
    // A real datagram first: taken (echoed) before the bad record.
    let first = udp_frame(5555, 7, b"before the bad record");
    let one = batch::record_size(first.len()) as u64;
    // (case, its one frame, the words saying records and bytes if not the true ones)
    let cases: [BadBatch; 4] = [
        (
            "more bytes than the page",
            &junk,
            Some((1, FRAME_ICA_SIZE + 8)),
        ),
        ("a torn record", &junk, Some((1, 40))),
        ("more records than there are", &first, Some((3, one))),
        ("a frame beyond FRAME_MAX", &long, None),
    ];
    p.sent.clear();
    for (case, frame, words) in cases {
        p.refused.clear();
        p.inject_batch(&[frame], words);
        match refusal(p) {
            Some(c) if c == Error::InvalidArgument as u64 => {}
            other => fails.push(format!(
                "a batch of frames with {case}: refused {:?}, want InvalidArgument",
                other.map(Error::from_code)
            )),
        }
    }
    let taken = p.wait_for(REPLY_LIMIT_NS, |f| {
        udp_of(f).filter(|u| u.2 == b"before the bad record")
    });
    if taken.is_none() {
        fails.push(String::from("the frame before a bad record was not taken"));
    }
    let after = ulib::net::counters().map_or(0, |c| c[5]);
    if after.saturating_sub(before) < 4 {
        fails.push(format!(
            "4 bad batches of frames counted {} errors",
            after.saturating_sub(before)
        ));
    }
    if !crate::still_echoes(p, 9100) {
        fails.push(String::from("no echo after the bad batches of frames"));
    }
}

/// A bad batch of frames: what is wrong, its one frame, the words saying how many records
/// and bytes (if not the true ones).
type BadBatch<'a> = (&'a str, &'a [u8], Option<(u64, u64)>);

/// The first refusal of an injection, serving meanwhile (bounded: a hang guard).
fn refusal(p: &mut Peer) -> Option<u64> {
    let start = sys::clock_ns().unwrap_or(0);
    while sys::clock_ns().unwrap_or(0).saturating_sub(start) < REPLY_LIMIT_NS {
        p.serve(1_000_000);
        if let Some(&c) = p.refused.first() {
            return Some(c);
        }
    }
    None
}

/// `UdpSocket::exchange` on `mine` (bound, nothing waiting): a batch sent, then a receive
/// that times out; datagrams received at most `max` at a time, in order, with their
/// source; answered in place; bad batches refused with what was sent before the bad
/// record; `push` past `DATA_MAX` or a full page refused.
pub fn exchanges(p: &mut Peer, mine: &mut UdpSocket, udp: FnId, fails: &mut Vec<String>) {
    let port = mine.port();
    // A batch sent, then nothing to receive.
    p.sent.clear();
    for i in 0..3u8 {
        if let Err(e) = mine.push(PEER, 6000, &[b'b', i]) {
            fails.push(format!("push {i}: {e}"));
        }
    }
    match mine.exchange(4, 20_000_000) {
        Err(SendRecvError::Recv(Error::TimedOut)) if mine.sent() == 3 => {}
        other => fails.push(format!(
            "exchange of 3 with nothing to receive: {other:?}, {} sent",
            mine.sent()
        )),
    }
    for i in 0..3u8 {
        match p.wait_for(REPLY_LIMIT_NS, |f| udp_of(f).filter(|u| u.2 == [b'b', i])) {
            Some((from, 6000, _)) if from == port => {}
            other => fails.push(format!(
                "exchange's datagram {i} on the wire: {:?}",
                other.map(|u| (u.0, u.1))
            )),
        }
    }
    // Three waiting (netd counted them in): 2 with an exchange of at most 2, then 1, in
    // order, from the peer's port 6001.
    let before = ulib::net::counters().map_or(0, |c| c[2]);
    for i in 0..3u8 {
        p.inject(&udp_frame(6001, port, &[b'r', i]), None);
    }
    let start = sys::clock_ns().unwrap_or(0);
    while ulib::net::counters().map_or(0, |c| c[2]) < before + 3
        && sys::clock_ns().unwrap_or(0).saturating_sub(start) < REPLY_LIMIT_NS
    {
        p.serve(1_000_000);
    }
    let mut got = Vec::new();
    for want in [2, 1] {
        match mine.exchange(2, REPLY_LIMIT_NS) {
            Ok(n) if n == want => {
                got.extend(mine.received().map(|(a, sp, d)| (a, sp, d.to_vec())));
            }
            other => fails.push(format!("exchange of at most 2: {other:?}, want Ok({want})")),
        }
    }
    let want: Vec<_> = (0..3u8)
        .map(|i| (PEER, 6001, alloc::vec![b'r', i]))
        .collect();
    if got != want {
        fails.push(format!("exchanges received {got:?}, want {want:?}"));
    }
    // The last answered in place: back to where it came from.
    p.sent.clear();
    mine.answer_all();
    match mine.exchange(0, 0) {
        Ok(0) if mine.sent() == 1 => {}
        other => fails.push(format!("an answer only: {other:?}, {} sent", mine.sent())),
    }
    match p.wait_for(REPLY_LIMIT_NS, |f| udp_of(f).filter(|u| u.2 == [b'r', 2])) {
        Some((from, 6001, _)) if from == port => {}
        other => fails.push(format!(
            "the answer on the wire: {:?}",
            other.map(|u| (u.0, u.1))
        )),
    }
    bad_exchanges(p, udp, port, fails);
    p.sent.clear();
    match mine.push(PEER, 6000, &[0; DATA_MAX + 1]) {
        Err(Error::TooLong) => {}
        other => fails.push(format!("push of {} bytes: {other:?}", DATA_MAX + 1)),
    }
    let full = [
        mine.push(PEER, 6000, &[1; DATA_MAX]),
        mine.push(PEER, 6000, &[2; DATA_MAX]),
        mine.push(PEER, 6000, &[3; DATA_MAX]),
    ];
    if full != [Ok(()), Ok(()), Err(Error::Busy)] {
        fails.push(format!(
            "three pushes of {DATA_MAX} bytes: {full:?}, want the third Busy"
        ));
    }
    match mine.exchange(0, 0) {
        Ok(0) if mine.sent() == 2 => {}
        other => fails.push(format!("a full page sent: {other:?}, {} sent", mine.sent())),
    }
}

/// Raw `OP_EXCHANGE` requests with bad batches, each answered with its error, word 0
/// `SEND_FAILED` and word 1 the records taken before the bad one; one to address 0 is
/// dropped alone.
fn bad_exchanges(p: &mut Peer, udp: FnId, port: u16, fails: &mut Vec<String>) {
    let peer = PEER.to_word() as u32;
    let record = |len: usize, addr: u32| {
        let mut page = alloc::vec![0u8; FRAME_ICA_SIZE as usize];
        let mut w = batch::Writer::new(&mut page);
        let _ = w.push(6000, addr, &alloc::vec![7u8; len]);
        page
    };
    let one = batch::record_size(4) as u16;
    let cases = [
        (
            "bytes beyond the page",
            record(4, peer),
            0,
            (port, 1, 4104),
            Error::InvalidArgument,
            0,
        ),
        (
            "a record beyond DATA_MAX",
            record(DATA_MAX + 1, peer),
            0,
            (port, 1, 1488),
            Error::InvalidArgument,
            0,
        ),
        (
            "2 records said, 1 there",
            record(4, peer),
            0,
            (port, 2, one),
            Error::InvalidArgument,
            1,
        ),
        (
            "a page lent read-only",
            record(4, peer),
            MSG_ICA_READ_ONLY,
            (port, 1, one),
            Error::InvalidArgument,
            0,
        ),
        (
            "another program's port",
            record(4, peer),
            0,
            (7, 1, one),
            Error::Denied,
            0,
        ),
    ];
    // A record to address 0 between two good ones: dropped and counted, the others sent
    // (a send only: nothing else is counted an error).
    let errors = ulib::net::counters().map_or(0, |c| c[5]);
    let mut page = alloc::vec![0u8; FRAME_ICA_SIZE as usize];
    let mut w = batch::Writer::new(&mut page);
    let _ = w.push(6000, peer, b"good 1");
    let _ = w.push(6000, 0, b"to nobody");
    let _ = w.push(6000, peer, b"good 2");
    let used = w.used() as u16;
    let msg = Msg {
        label: OP_EXCHANGE,
        words: [pack_exchange(port, 3, used, 0), 0, 0, 0, 0, 0],
    };
    match call_with(udp, msg, &page) {
        Ok(r) if ipc::label(&r) == 0 => {}
        other => fails.push(format!("OP_EXCHANGE with a record to address 0: {other:?}")),
    }
    if ulib::net::counters().map_or(0, |c| c[5]) <= errors {
        fails.push(String::from(
            "a record to address 0 was not counted an error",
        ));
    }
    for d in [&b"good 1"[..], b"good 2"] {
        if p.wait_for(REPLY_LIMIT_NS, |f| udp_of(f).filter(|u| u.2 == d))
            .is_none()
        {
            fails.push(format!(
                "{:?} beside a record to address 0 not sent",
                core::str::from_utf8(d)
            ));
        }
    }
    for (case, page, flag, (from, count, used), want, sent) in cases {
        let words = [pack_exchange(from, count, used, 4), 0, 0, 0, 0, 0];
        let msg = Msg {
            label: OP_EXCHANGE | flag,
            words,
        };
        match call_with(udp, msg, &page) {
            Ok(r) if ipc::label(&r) == want as u64 && r.words[..2] == [SEND_FAILED, sent] => {}
            other => fails.push(format!(
                "OP_EXCHANGE with {case}: {other:?}, want {want:?} with {sent} sent"
            )),
        }
    }
}

/// `msg` to `udp` with a page of this program's holding `bytes` (zeroes after them); the
/// reply (the page back and closed).
pub(crate) fn call_with(udp: FnId, msg: Msg, bytes: &[u8]) -> Result<Msg, String> {
    const AT: u64 = 0x0000_5780_0000_0000;
    let page = ulib::res::open_vregion("here/vregion/netcheck-xb", 4096, Rights::OWNER_ALL)
        .map_err(|e| format!("page: {e}"))?;
    if let Err(e) = ulib::res::attach_here(page, AT, true) {
        let _ = ulib::res::close(page);
        return Err(format!("page: attach: {e}"));
    }
    // SAFETY: the page is attached writable at AT, 4096 bytes, and only used here.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), AT as *mut u8, bytes.len().min(4096)) };
    let r = ipc::call(udp.as_target(), &ipc::with_ica(msg, page));
    let at = match &r {
        Ok((_, reply)) => ipc::ica_at(reply).map_or(AT, |(_, at)| at),
        Err(_) => AT,
    };
    let _ = ulib::res::detach_here(at);
    let _ = ulib::res::close(page);
    r.map(|(_, reply)| reply).map_err(|e| format!("call: {e}"))
}
