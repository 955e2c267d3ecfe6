//! The socket requests of `net.udp` (`ulib::net`'s protocol): bind, close, send, and the
//! receive that is answered at once or held until a datagram comes; and who owns a port.
//! Apart from [`super`]'s loop so that each file reads as one thing.

use super::{alive_pids, answer, ipv4, now, Answer, Held, Server, MAX_HELD, SOCKETS_PER_PROGRAM};
use alloc::vec::Vec;
use netstate::DATA_MAX;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::udp;
use smoltcp::wire::{IpAddress, IpEndpoint};
use ulib::abi::ipc::Received;
use ulib::abi::res::ResId;
use ulib::abi::{Error, Pid};
use ulib::{ipc, sys};

impl Server {
    /// Pop the oldest datagram of `port` into the page at `at` (at most `cap` bytes), or a
    /// batch of at most `max` if `max` is not 0.
    pub(super) fn take(&mut self, port: u16, cap: usize, max: usize, at: u64) -> Answer {
        if max > 0 {
            return self.take_batch(port, max, at);
        }
        // SAFETY: the caller's page (one page, writable) is mapped at `at` in this process
        // while its request is held; nothing else here refers to it; `cap <= DATA_MAX`.
        let out = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, cap) };
        match self.net.pop(port, out) {
            Ok(Some(d)) => Ok([
                d.len as u64,
                u64::from(d.addr),
                u64::from(d.port),
                d.full_len as u64,
            ]),
            Ok(None) => Err(Error::TimedOut),
            Err(_) => Err(Error::NoSuchResource),
        }
    }

    /// The pid's raw value as the state records owners.
    pub(super) fn owner(pid: Pid) -> u64 {
        pid.0
    }

    pub(super) fn bind(&mut self, r: &Received) -> Answer {
        let port = u16::try_from(r.msg.words[0]).map_err(|_| Error::InvalidArgument)?;
        let owner = Self::owner(r.sender);
        // One program binds at most a quarter of the sockets (an audit found one could
        // bind them all, and every other program's bind was refused for as long as it
        // lived), as it holds at most a third of the receives.
        if self.net.owned_by(owner) >= SOCKETS_PER_PROGRAM {
            return Err(Error::Limit);
        }
        let bound = match self.net.bind(port, owner) {
            // No socket left, or the port taken (perhaps by a program that ended without
            // closing it: killed, or aborted): the ports of programs that ended are freed
            // first, with their receives still held (a review found a freed port's new owner
            // lost its first datagram to a dead program's receive, and a killed program's
            // port taken until every socket was).
            Err(e @ (netstate::Error::NoSocket | netstate::Error::PortInUse)) => {
                let Some(alive) = alive_pids() else {
                    return Err(match e {
                        netstate::Error::PortInUse => Error::AlreadyExists,
                        _ => Error::Limit,
                    });
                };
                self.net.unbind_ended(|o| alive.contains(&o));
                let keep: Vec<(u16, SocketHandle)> = self.udp.clone();
                for (p, _) in keep {
                    if self.net.find(p).is_none() {
                        self.close_udp(p);
                    }
                }
                self.drop_held_of_ended(&alive);
                self.net.bind(port, owner)
            }
            other => other,
        };
        let port = bound.map_err(|e| match e {
            netstate::Error::PortInUse => Error::AlreadyExists,
            netstate::Error::NoSocket => Error::Limit,
            _ => Error::InvalidArgument,
        })?;
        self.open_udp(port);
        Ok([u64::from(port), 0, 0, 0])
    }

    /// The port a request of `sender` names (`word`), if `sender` owns it.
    pub(super) fn owned_port(&self, word: u64, sender: Pid) -> Result<u16, Error> {
        let port = u16::try_from(word).map_err(|_| Error::InvalidArgument)?;
        match self.net.socket_of(port) {
            None => Err(Error::NoSuchResource),
            Some(s) if s.owner != Self::owner(sender) => Err(Error::Denied),
            Some(_) => Ok(port),
        }
    }

    pub(super) fn close(&mut self, r: &Received) -> Answer {
        let port = self.owned_port(r.msg.words[0], r.sender)?;
        let _ = self.net.unbind(port, Self::owner(r.sender));
        self.close_udp(port);
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].port == port {
                let h = self.held.remove(i);
                answer(h.request, Err(Error::StaleResource), Some(h.page));
            } else {
                i += 1;
            }
        }
        Ok([0; 4])
    }

    /// Send the datagram of `len` bytes in `page` from port `port` (words as the request
    /// had them) to `addr:dport`.
    pub(super) fn send(
        &mut self,
        sender: Pid,
        page: Option<(ResId, u64)>,
        [port, addr, dport, len]: [u64; 4],
    ) -> Answer {
        let port = self.owned_port(port, sender)?;
        let (_, at) = page.ok_or(Error::InvalidArgument)?;
        let len = len as usize;
        if len > DATA_MAX {
            return Err(Error::TooLong);
        }
        let (Ok(addr), Ok(dport)) = (u32::try_from(addr), u16::try_from(dport)) else {
            return Err(Error::InvalidArgument);
        };
        if addr == 0 || dport == 0 {
            return Err(Error::InvalidArgument);
        }
        let h = self.handle_of(port)?;
        // SAFETY: the caller's page is mapped at `at` until the answer passes it back;
        // `len <= DATA_MAX` fits in its one page.
        let data = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
        let to = IpEndpoint::new(IpAddress::Ipv4(ipv4(addr)), dport);
        let before = self.sockets.get::<udp::Socket>(h).send_queue();
        let sent = self.sockets.get_mut::<udp::Socket>(h).send_slice(data, to);
        match sent {
            Ok(()) => {
                self.queued(port, h, 1, before, len);
                Ok([0; 4])
            }
            Err(udp::SendError::BufferFull) => {
                self.net.count(|c| c.drops += 1);
                Err(Error::Busy)
            }
            Err(udp::SendError::Unaddressable) => Err(Error::InvalidArgument),
        }
    }

    /// The smoltcp socket of bound port `port`.
    pub(super) fn handle_of(&self, port: u16) -> Result<SocketHandle, Error> {
        self.udp
            .iter()
            .find(|(p, _)| *p == port)
            .map(|&(_, h)| h)
            .ok_or(Error::NoSuchResource)
    }

    /// `n` datagrams of `bytes` bytes in all were queued on `port`'s socket `h`, whose
    /// queue held `before` bytes: counted, sent at once (not at the next poll), and the
    /// queue's progress noted (`TxWatch`).
    pub(super) fn queued(
        &mut self,
        port: u16,
        h: SocketHandle,
        n: usize,
        before: usize,
        bytes: usize,
    ) {
        self.net.count(|c| c.datagrams_out += n as u64);
        self.egress(now());
        let after = self.sockets.get::<udp::Socket>(h).send_queue();
        let moved = after < before + bytes;
        self.tx
            .look(port, after, moved, sys::clock_ns().unwrap_or(0));
    }

    /// A receive on port `port` (the request's word) of at most `cap` bytes waiting at most
    /// `timeout` ns (`OP_RECV`, or the second half of `OP_SEND_RECV`), or of a batch of at
    /// most `max` datagrams if `max` is not 0 (`OP_EXCHANGE`). `None`: held.
    pub(super) fn recv(
        &mut self,
        r: &Received,
        page: Option<(ResId, u64)>,
        [port, timeout, cap]: [u64; 3],
        max: usize,
    ) -> Option<Answer> {
        let port = match self.owned_port(port, r.sender) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let Some(page) = page.filter(|_| !ipc::ica_read_only(&r.msg)) else {
            return Some(Err(Error::InvalidArgument));
        };
        let cap = (cap as usize).min(DATA_MAX);
        if self.net.pending(port) > 0 {
            return Some(self.take(port, cap, max, page.1));
        }
        if timeout == 0 {
            return Some(Err(Error::TimedOut));
        }
        // One program holds at most a third of the receives (a review found one could
        // hold them all, and every other program's receive was refused for as long as it
        // lived).
        if self.held.iter().filter(|h| h.sender == r.sender).count() >= MAX_HELD / 3 {
            return Some(Err(Error::Limit));
        }
        if self.held.len() >= MAX_HELD {
            // Receives of programs that ended are dropped first.
            if let Some(alive) = alive_pids() {
                self.drop_held_of_ended(&alive);
            }
            if self.held.len() >= MAX_HELD {
                return Some(Err(Error::Limit));
            }
        }
        let deadline = match timeout {
            u64::MAX => u64::MAX,
            t => sys::clock_ns().unwrap_or(0).saturating_add(t),
        };
        self.held.push(Held {
            request: r.request,
            sender: r.sender,
            port,
            deadline,
            cap,
            max,
            page,
        });
        None
    }
}
