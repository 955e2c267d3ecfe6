//! How `machd`'s mrpc messages travel between machines: in Ethernet frames of its own type
//! (`abi::mach::ETHERTYPE`) straight through the driver `net.drv` (the default), or as UDP
//! datagrams through `net.udp` (`machd K N udp`, the first design, kept to compare).
//!
//! # Why a protocol of its own on the driver
//!
//! Every cross-machine request crosses the network twice, and over UDP each crossing
//! passes `netd` on both machines: the sender's `machd` calls `netd`, whose smoltcp builds
//! the frame and submits it to the driver; the receiver's driver submits the frame to
//! `netd`, whose smoltcp finds the socket and answers `machd`'s waiting receive. On its
//! own link `machd` calls the driver with the frame (`DRV_TX`) and the driver submits
//! received frames of its type straight to `machd`'s network thread (function
//! [`FN_LINK`], `UDP_FRAME_IN` as to `netd`): four IPC hops and four passes through a
//! network stack fewer per round trip. What it gives up is little on this network: no ARP
//! (machine K's MAC is `abi::mach::mac(K)`, a static convention like its address), no IP
//! or checksums (the virtual Ethernet does not corrupt frames; mrpc checks its own
//! messages), no routing (every machine is on one link). `machd` no longer needs `netd`
//! at all, so the machines stay one system while `netd` is replaced. `cargo xtask bench
//! machines` measures both links in the same run (docs/design.md section 17).
//!
//! Who may speak for a machine: a received frame is taken only from the process serving
//! `net.drv`, and `net.drv` sends a frame of this type only for the process serving
//! [`FN_LINK`] (`Denied` for any other): no other program of a machine can send a frame
//! in its `machd`'s name. Over UDP the same is done with the sending port
//! (`abi::mach::SEND_PORT`).

use alloc::format;
use alloc::string::String;
use ulib::abi::ipc::{Msg, MSG_ICA_READ_ONLY};
use ulib::abi::mach::{self, ETHERTYPE, ETH_HEADER, FN_LINK};
use ulib::abi::net::{DRV_TX, FN_DRV, FRAME_MAX, UDP_FRAME_IN};
use ulib::abi::res::ResId;
use ulib::abi::{Error, Pid};
use ulib::fnid;
use ulib::ipc;
use ulib::net::{Ipv4, LentPage, UdpSocket};

/// Which link the machines use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// Frames of `machd`'s own Ethernet type through `net.drv`.
    Ethernet,
    /// UDP datagrams through `net.udp` (port `abi::mach::PORT`, sent from `SEND_PORT`).
    Udp,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ethernet => "its own Ethernet type through net.drv",
            Kind::Udp => "UDP through net.udp",
        }
    }
}

/// Where a message came from, as the link tells.
#[derive(Clone, Copy)]
pub enum Source {
    /// A frame from this MAC address.
    Frame([u8; 6]),
    /// A datagram from this address and port.
    Datagram(Ipv4, u16),
}

impl Source {
    /// Did machine `m`'s `machd` send it? (Only it can send from its MAC address with
    /// `machd`'s type, or from its address and `machd`'s sending port.)
    pub fn is_machd_of(&self, m: u8) -> bool {
        match *self {
            Source::Frame(from) => from == mach::mac(usize::from(m)),
            Source::Datagram(from, port) => {
                port == mach::SEND_PORT && from == Ipv4(mach::addr(usize::from(m)))
            }
        }
    }
}

/// The sending half (in `State`, used by every thread under its lock).
pub enum Out {
    Ethernet {
        me: u8,
        drv: ulib::abi::fnid::FnId,
        page: LentPage,
    },
    Udp(UdpSocket),
}

/// The receiving half (the network thread's).
pub enum In {
    Ethernet {
        me: u8,
        ep: ResId,
        /// The driver's process, as last looked up.
        drv: Option<Pid>,
    },
    Udp(UdpSocket),
}

/// Open machine `me`'s link of kind `kind`: its sending and receiving halves.
pub fn open(kind: Kind, me: u8) -> Result<(Out, In), String> {
    match kind {
        Kind::Udp => {
            let rx =
                UdpSocket::bind(mach::PORT).map_err(|e| format!("bind {}: {e}", mach::PORT))?;
            let tx = UdpSocket::bind(mach::SEND_PORT)
                .map_err(|e| format!("bind the sending port {}: {e}", mach::SEND_PORT))?;
            Ok((Out::Udp(tx), In::Udp(rx)))
        }
        Kind::Ethernet => {
            // Registered first: the driver sends frames of machd's type only for the server
            // of `mach.link`, so the sooner machd is that server, the better.
            let ep = ulib::res::open_fresh("here/endpoint/machd-link", &[], crate::ENDPOINT_RIGHTS)
                .map_err(|e| format!("link endpoint: {e}"))?;
            fnid::register(FN_LINK, ep).map_err(|e| format!("register {FN_LINK}: {e}"))?;
            let drv = fnid::wait(FN_DRV, DRIVER_WAIT_NS).map_err(|e| format!("{FN_DRV}: {e}"))?;
            let page = LentPage::open("machd-frame").map_err(|e| format!("frame page: {e}"))?;
            Ok((
                Out::Ethernet { me, drv, page },
                In::Ethernet { me, ep, drv: None },
            ))
        }
    }
}

/// How long `machd` waits for the driver at start.
const DRIVER_WAIT_NS: u64 = 30_000_000_000;

impl Out {
    /// Send `bytes` (an mrpc message) to machine `to`'s `machd`.
    pub fn send(&mut self, to: u8, bytes: &[u8]) -> Result<(), Error> {
        match self {
            Out::Udp(tx) => tx.send_to(Ipv4(mach::addr(usize::from(to))), mach::PORT, bytes),
            Out::Ethernet { me, drv, page } => {
                let len = mach::frame_len(bytes.len());
                if len > FRAME_MAX {
                    return Err(Error::TooLong);
                }
                let at = page.map()?;
                // SAFETY: the page (one page, writable, FRAME_ICA_SIZE > FRAME_MAX bytes) is
                // mapped at `at` in this process and only this link uses it (under the
                // state's lock); `len` <= FRAME_MAX.
                let frame = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) };
                mach::write_frame(frame, usize::from(*me), usize::from(to), bytes);
                let msg = Msg {
                    // Lent read-only: the driver only reads the frame.
                    label: DRV_TX | MSG_ICA_READ_ONLY,
                    words: [len as u64, 0, 0, 0, 0, 0],
                };
                match page.call(drv.as_target(), msg) {
                    Ok((0, _)) => Ok(()),
                    Ok((e, _)) => Err(Error::from_code(e)),
                    Err(e) => {
                        if matches!(e, Error::StaleResource | Error::NoSuchResource) {
                            // `net.drv` registered anew: its new id next time.
                            if let Ok(id) = fnid::lookup(FN_DRV) {
                                *drv = id;
                            }
                        }
                        Err(e)
                    }
                }
            }
        }
    }
}

impl In {
    /// Receive one message into `buf`, waiting at most `timeout_ns`: its length and
    /// source, or `None` for a request that carried none (not from the driver, not a
    /// frame of `machd`'s type: answered, and counted by the caller as malformed).
    pub fn recv(
        &mut self,
        buf: &mut [u8],
        timeout_ns: u64,
    ) -> Result<Option<(usize, Source)>, Error> {
        match self {
            In::Udp(rx) => {
                let (n, from, port) = rx.recv_from(buf, timeout_ns)?;
                Ok(Some((n, Source::Datagram(from, port))))
            }
            In::Ethernet { me, ep, drv } => {
                let r = ipc::recv(*ep, timeout_ns)?;
                if r.request == 0 {
                    // One-way (no driver sends so): an ICA it carried goes back to its
                    // creator, else it would stay mapped here.
                    ipc::let_go(&r.msg);
                    return Ok(None);
                }
                let got = frame_in(&r, *me, drv, buf);
                // The frame page goes back with the answer, whatever it held (the driver
                // sends a refused frame again).
                let status = match got {
                    Err(e) => e as u64,
                    Ok(_) => 0,
                };
                let reply = match ipc::ica_at(&r.msg) {
                    Some((region, _)) => ipc::with_ica(Msg::default(), region),
                    None => Msg::default(),
                };
                let _ = ipc::reply(r.request, status, &reply);
                Ok(got.ok().flatten())
            }
        }
    }
}

/// The message in frame request `r` copied into `buf`: `Err` for a request the driver did
/// not send (refused), `Ok(None)` for a frame that is not `machd`'s or not for machine `me`
/// (a switch floods frames for a MAC it has not learnt yet).
fn frame_in(
    r: &ulib::abi::ipc::Received,
    me: u8,
    drv: &mut Option<Pid>,
    buf: &mut [u8],
) -> Result<Option<(usize, Source)>, Error> {
    if *drv != Some(r.sender) {
        *drv = fnid::server_of(FN_DRV);
    }
    if *drv != Some(r.sender) {
        return Err(Error::Denied);
    }
    let Some((_, at)) = ipc::ica_at(&r.msg) else {
        return Err(Error::InvalidArgument);
    };
    if ipc::label(&r.msg) != UDP_FRAME_IN {
        return Err(Error::NoSuchCall);
    }
    let len = (r.msg.words[0] as usize).min(FRAME_MAX);
    // SAFETY: the frame ICA is mapped at `at` in this process, FRAME_ICA_SIZE bytes, and
    // `len` <= FRAME_MAX < FRAME_ICA_SIZE; the driver does not touch it until our answer.
    let frame = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
    if len < ETH_HEADER
        || frame[12..14] != ETHERTYPE.to_be_bytes()
        || frame[0..6] != mach::mac(usize::from(me))
    {
        return Ok(None);
    }
    let mut from = [0u8; 6];
    from.copy_from_slice(&frame[6..12]);
    let n = (len - ETH_HEADER).min(buf.len());
    buf[..n].copy_from_slice(&frame[ETH_HEADER..ETH_HEADER + n]);
    Ok(Some((n, Source::Frame(from))))
}
