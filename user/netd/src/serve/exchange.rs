//! Batches (`abi::net::batch`): `OP_EXCHANGE` (`ulib::net::UdpSocket::exchange`), a batch
//! of datagrams sent from the caller's page, then as many as wait received into it, in
//! one request; and `UDP_FRAMES_IN`, the frames the driver received at one wake. Why: each request
//! costs the caller and `netd` a call, a reply, two context switches and two page moves;
//! a program that answers datagrams pays them once per batch instead of once per datagram.
//!
//! The page holds records (`abi::net::batch`); each sent record names its destination, each
//! received one its source. Sending stops at the first bad or refused record (its error
//! answers the request with `SEND_FAILED` and the number sent before it); the frames of
//! those sent go to the driver together, after the last. The receive is `OP_RECV`'s: held
//! until a datagram waits or the time is up, answered `Again` at a replacement.

use super::{Answer, Server};
use smoltcp::socket::udp;
use smoltcp::wire::{IpAddress, IpEndpoint};
use ulib::abi::ipc::Received;
use ulib::abi::net::batch::{self, Reader, Writer};
use ulib::abi::net::{FRAME_ICA_SIZE, FRAME_MAX};
use ulib::abi::res::ResId;
use ulib::abi::{Error, Pid};
use ulib::net::DATA_MAX;

/// The caller's page mapped at `at`, as bytes.
///
/// # Safety
/// The page of a request being served (one page, `FRAME_ICA_SIZE` bytes) must be mapped at
/// `at` in this process until its answer passes it back, and nothing else here may refer
/// to it meanwhile.
unsafe fn page_at<'a>(at: u64) -> &'a mut [u8] {
    // SAFETY: as the caller promises.
    unsafe { core::slice::from_raw_parts_mut(at as *mut u8, FRAME_ICA_SIZE as usize) }
}

impl Server {
    /// A batch of frames from the driver (`UDP_FRAMES_IN`): each into the receive queue
    /// ([`crate::dev::NetDev::frame_in`]); a bad record ends the batch (those before it
    /// were taken) and is answered `InvalidArgument`.
    pub(super) fn frames_in(&mut self, r: &Received, page: Option<(ResId, u64)>) -> Answer {
        if !self.sent_by_driver(r.sender) {
            return Err(Error::Denied);
        }
        let (_, at) = page.ok_or(Error::InvalidArgument)?;
        let [count, used, ..] = r.msg.words;
        // SAFETY: the driver's frame ICA is mapped at `at` until the answer passes it back.
        let page = unsafe { page_at(at) };
        let records = Reader::new(page, count as usize, used as usize, FRAME_MAX)
            .map_err(|_| Error::InvalidArgument)?;
        for record in records {
            let (_, frame) = record.map_err(|_| Error::InvalidArgument)?;
            // A page holds more small frames than the queue: smoltcp takes them first.
            if self.dev.rx_full() {
                self.ingest();
            }
            self.dev.frame_in(frame);
        }
        Ok([0; 4])
    }

    /// Send the `count` records in the first `used` bytes of the page at `at` from `port`:
    /// how many were taken, or the error of the first that could not be and how many were
    /// taken before it. A record to address or port 0 (an answer to a datagram from port
    /// 0, which smoltcp accepts) or one smoltcp cannot route is taken, dropped and counted
    /// an error: one such datagram does not cost the rest of the batch. A malformed record
    /// or a full queue stops it.
    pub(super) fn send_batch(
        &mut self,
        sender: Pid,
        at: u64,
        [port, count, used]: [u64; 3],
    ) -> Result<usize, (Error, usize)> {
        let port = self.owned_port(port, sender).map_err(|e| (e, 0))?;
        let h = self.handle_of(port).map_err(|e| (e, 0))?;
        // SAFETY: the request's page is mapped at `at` until the answer passes it back.
        let page = unsafe { page_at(at) };
        let records = Reader::new(page, count as usize, used as usize, DATA_MAX)
            .map_err(|_| (Error::InvalidArgument, 0))?;
        let before = self.sockets.get::<udp::Socket>(h).send_queue();
        let (mut taken, mut sent, mut bytes) = (0, 0, 0);
        let mut failed = None;
        for record in records {
            let Ok((hd, data)) = record else {
                failed = Some(Error::InvalidArgument);
                break;
            };
            if hd.addr == 0 || hd.port == 0 {
                self.net.count(|c| c.errors += 1);
                taken += 1;
                continue;
            }
            let to = IpEndpoint::new(IpAddress::Ipv4(super::ipv4(hd.addr)), hd.port);
            let mut r = self.sockets.get_mut::<udp::Socket>(h).send_slice(data, to);
            if r == Err(udp::SendError::BufferFull) {
                // smoltcp's queue holds fewer datagrams than a page: empty it and try again.
                self.egress(super::now());
                r = self.sockets.get_mut::<udp::Socket>(h).send_slice(data, to);
            }
            match r {
                Ok(()) => {
                    sent += 1;
                    bytes += data.len();
                }
                Err(udp::SendError::BufferFull) => {
                    self.net.count(|c| c.drops += 1);
                    failed = Some(Error::Busy);
                    break;
                }
                Err(udp::SendError::Unaddressable) => self.net.count(|c| c.errors += 1),
            }
            taken += 1;
        }
        if sent > 0 {
            // All of them, as frames of one batch to the driver.
            self.queued(port, h, sent, before, bytes);
        }
        match failed {
            Some(e) => Err((e, taken)),
            None => Ok(taken),
        }
    }

    /// Move the datagrams waiting on `port`, at most `max` and as many as fit, into the page
    /// at `at` as records: (records, bytes used).
    pub(super) fn take_batch(&mut self, port: u16, max: usize, at: u64) -> Answer {
        // SAFETY: the request's page is mapped at `at` until the answer passes it back.
        let page = unsafe { page_at(at) };
        let mut w = Writer::new(page);
        while w.count() < max {
            let Some(len) = self.net.next_len(port) else {
                break;
            };
            let Some(room) = w.room(len) else {
                break;
            };
            match self.net.pop(port, room) {
                Ok(Some(d)) => w.commit(d.len, d.port, d.addr),
                Ok(None) => break,
                Err(_) => return Err(Error::NoSuchResource),
            }
        }
        if w.count() == 0 {
            // Nothing waited (the caller looked first), or the page is too small for the
            // next datagram: cannot be, a page holds the longest record.
            return Err(Error::TimedOut);
        }
        Ok([w.count() as u64, w.used() as u64, 0, 0])
    }
}

/// A record of the longest datagram fits a page: a batch receive always takes one.
const _: () = assert!(batch::record_size(DATA_MAX) <= FRAME_ICA_SIZE as usize);
