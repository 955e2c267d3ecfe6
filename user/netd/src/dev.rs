//! The smoltcp `Device` over frames from `net.drv` (`abi::net`): why `netd` needs no driver
//! of its own. Received frames arrive as `UDP_FRAMES_IN` batches (or one per
//! `UDP_FRAME_IN`) in the driver's ICAs; the server copies each frame into the bounded
//! [`RX_QUEUE`] and gives the ICA straight back, and smoltcp takes them from there. Frames to send are written, as a batch
//! (`abi::net::batch`), into one of [`TX_PAGES`] one-page vregions this server owns (the
//! *open* page), and the batch is submitted to `net.drv` as one `DRV_TX_BATCH` request
//! with the page as ICA when the page is full or the server is done with a request
//! ([`Tx::flush`]): the frames of one request, however many, cost one request to the
//! driver. The driver's reply brings the page back (collected without waiting). A full
//! receive queue, or no free page after a short wait for the driver's replies, drops the
//! frame and counts it.
//!
//! Every page is marked `CLOSE_WHEN_DETACHED`: the kernel closes it once it is attached
//! nowhere, so none outlives this server, however it ends (retired by a takeover with or
//! without the retire notice, killed, crashed), and one in flight when it ends is closed
//! when the driver's answer finds nobody.
//!
//! A driver that is restarting (`Again`) has not sent the batch; one that ended holding it
//! (`Gone`) may have sent some of its frames, which then go out twice (the wire may
//! duplicate a datagram anyway). A page that came back in the reply still holds the batch; one the driver died holding was closed on
//! its way back, so each batch in flight is also kept here ([`Page::copy`]) and put into a
//! fresh page for that slot. Either way it is sent again to the next driver
//! ([`Tx::resend`], at most [`RESEND_LIMIT_NS`] after the first refusal; past that its
//! frames count as errors).

use alloc::collections::VecDeque;
use alloc::format;
use alloc::vec::Vec;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use ulib::abi::fnid::FnId;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::net::batch::{self, Writer};
use ulib::abi::net::{DRV_TX_BATCH, FN_DRV, FRAME_ICA_SIZE, FRAME_MAX};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, res, sys};

/// Received frames waiting for smoltcp.
pub const RX_QUEUE: usize = 64;
/// Pages for frames in flight to the driver.
pub const TX_PAGES: usize = 16;
/// Where the transmit pages are attached first (one page each).
const TX_AT: u64 = 0x0000_5e00_0000_0000;
/// How long a send waits for the driver to give a page back when all are out.
const TX_WAIT_NS: u64 = 20_000_000;
/// How long a frame the driver could not take (restarting, or gone) is kept for the next one.
pub const RESEND_LIMIT_NS: u64 = 10_000_000_000;

/// What the device counts (added to the state's counters by the server).
#[derive(Default, Clone, Copy)]
pub struct DevCounts {
    pub frames_in: u64,
    pub frames_out: u64,
    pub drops: u64,
    pub errors: u64,
}

struct Page {
    region: ResId,
    home: u64,
    /// Where it is mapped now (0: not mapped: attach it at `home` again, or a fresh page
    /// there if the kernel closed it).
    at: u64,
    /// The ticket of the `DRV_TX_BATCH` request it went with.
    ticket: Option<u64>,
    /// The batch's bytes while it is open, in flight or refused (sent again by
    /// [`Tx::resend`]): what a fresh page gets if this one is lost with a driver that died
    /// holding it.
    copy: Vec<u8>,
    /// Frames in the batch.
    count: usize,
    /// When the batch was first submitted (a count): refused batches are offered to the
    /// next driver in this order, not in the pages' order.
    seq: u64,
    /// A batch the driver did not take: since when (0: none).
    refused_at: u64,
}

/// The transmit side: pages and the driver's function id.
pub struct Tx {
    pages: Vec<Page>,
    /// The page frames are written into now, submitted by [`Tx::flush`].
    open: Option<usize>,
    /// The next batch's [`Page::seq`].
    next_seq: u64,
    drv: Option<FnId>,
    scratch: Vec<u8>,
    pub counts: DevCounts,
    /// Time the result steps ([`Tx::reap`]) into `result_ns` (`ulib::net::OP_STEPS`).
    pub timing: bool,
    pub result_ns: u64,
}

/// The device smoltcp polls.
pub struct NetDev {
    rx: VecDeque<Vec<u8>>,
    pub tx: Tx,
}

impl NetDev {
    /// Open the transmit pages.
    pub fn new() -> Result<NetDev, alloc::string::String> {
        let mut pages = Vec::with_capacity(TX_PAGES);
        for i in 0..TX_PAGES {
            let home = TX_AT + i as u64 * FRAME_ICA_SIZE;
            let region = open_page(home).map_err(|e| format!("transmit page {i}: {e}"))?;
            pages.push(Page {
                region,
                home,
                at: home,
                ticket: None,
                copy: Vec::with_capacity(FRAME_ICA_SIZE as usize),
                count: 0,
                seq: 0,
                refused_at: 0,
            });
        }
        Ok(NetDev {
            rx: VecDeque::with_capacity(RX_QUEUE),
            tx: Tx {
                pages,
                open: None,
                next_seq: 0,
                drv: None,
                scratch: alloc::vec![0; FRAME_MAX],
                counts: DevCounts::default(),
                timing: false,
                result_ns: 0,
            },
        })
    }

    /// A frame from the driver (copied from its ICA); dropped and counted if the queue is
    /// full or the length is bad.
    pub fn frame_in(&mut self, frame: &[u8]) {
        if frame.len() < 14 || frame.len() > FRAME_MAX {
            self.tx.counts.errors += 1;
            return;
        }
        if self.rx.len() >= RX_QUEUE {
            self.tx.counts.drops += 1;
            return;
        }
        self.tx.counts.frames_in += 1;
        self.rx.push_back(frame.to_vec());
    }

    /// Is the receive queue full (the next frame would be dropped)?
    pub fn rx_full(&self) -> bool {
        self.rx.len() >= RX_QUEUE
    }

    pub fn rx_pending(&self) -> bool {
        !self.rx.is_empty()
    }
}

impl Tx {
    /// The driver's function id (looked up again until it is found).
    pub fn driver(&mut self) -> Option<FnId> {
        if self.drv.is_none() {
            self.drv = fnid::lookup(FN_DRV).ok();
        }
        self.drv
    }

    /// Take the driver's replies that are there (waiting at most `timeout_ns` for the
    /// first), putting their pages back: the server's *result step* (P3 Table 3), timed
    /// into [`Tx::result_ns`] while [`Tx::timing`] (this process's CPU time, so a wait or
    /// the driver running meanwhile does not count).
    pub fn reap(&mut self, timeout_ns: u64) {
        if !self.pages.iter().any(|p| p.ticket.is_some()) {
            return;
        }
        let start = self.timing.then(|| sys::cpu_time_ns().unwrap_or(0));
        self.take_replies(timeout_ns);
        if let Some(t0) = start {
            self.result_ns += sys::cpu_time_ns().unwrap_or(t0).saturating_sub(t0);
        }
    }

    fn take_replies(&mut self, timeout_ns: u64) {
        let mut timeout = timeout_ns;
        while self.pages.iter().any(|p| p.ticket.is_some()) {
            let c = match ipc::collect(api::ANY, timeout) {
                Ok(c) => c,
                Err(_) => return,
            };
            timeout = 0;
            let Some(p) = self.pages.iter_mut().find(|p| p.ticket == Some(c.ticket)) else {
                continue;
            };
            p.ticket = None;
            p.at = match ipc::ica_at(&c.msg) {
                Some((region, at)) if region == p.region => at,
                // Another page than the one sent (a driver that does not keep the
                // protocol): not this one's; let it go. This page, attached nowhere or
                // kept by that driver, is mapped again (or made anew) before its next use.
                Some((_, at)) => {
                    let _ = res::detach_here(at);
                    0
                }
                None => 0,
            };
            // The driver answers with the error code as the reply's value (0: sent).
            let code = if c.status != 0 { c.status } else { c.value };
            if refused(Error::from_code(code)) {
                // Not sent: the page holds the frame still; keep it for the next driver.
                if p.refused_at == 0 {
                    p.refused_at = sys::clock_ns().unwrap_or(0).max(1);
                }
                self.drv = None;
                continue;
            }
            p.refused_at = 0;
            // The frames the driver handed to the device: all, or those before the first
            // it could not (`words[0]`).
            let sent = if code == 0 {
                p.count
            } else {
                (c.msg.words[0] as usize).min(p.count)
            };
            self.counts.frames_out += sent as u64;
            let lost = (p.count - sent) as u64;
            if code != 0 {
                if Error::from_code(code) == Error::Busy {
                    self.counts.drops += lost;
                } else {
                    self.counts.errors += lost;
                }
                if code == Error::Gone as u64 {
                    self.drv = None;
                }
            }
        }
    }

    /// A free page, mapped (one that came back detached is attached again).
    fn free_page(&mut self) -> Option<usize> {
        for i in 0..self.pages.len() {
            let p = &self.pages[i];
            if p.ticket.is_some() || p.refused_at != 0 || self.open == Some(i) || !self.map(i) {
                continue;
            }
            return Some(i);
        }
        None
    }

    /// Page `i` mapped: attached at its home again if it came back detached, or a fresh
    /// page there (holding the frame kept for it) if the kernel closed it; false if
    /// neither can be.
    fn map(&mut self, i: usize) -> bool {
        let p = &mut self.pages[i];
        if p.at != 0 {
            return true;
        }
        if res::attach_here(p.region, p.home, true).is_ok() {
            p.at = p.home;
            return true;
        }
        let Ok(region) = open_page(p.home) else {
            return false;
        };
        p.region = region;
        p.at = p.home;
        // SAFETY: the fresh page (FRAME_ICA_SIZE bytes, writable) was just attached at
        // `p.home` in this process; nothing else refers to it; a batch is at most
        // FRAME_ICA_SIZE bytes.
        unsafe { core::slice::from_raw_parts_mut(p.home as *mut u8, p.copy.len()) }
            .copy_from_slice(&p.copy);
        true
    }

    /// Batches the driver did not take, waiting for the next one.
    pub fn refused(&self) -> usize {
        self.pages.iter().filter(|p| p.refused_at != 0).count()
    }

    /// Send again the frames a restarting or ended driver did not take, to the driver
    /// there is now; a frame refused for longer than [`RESEND_LIMIT_NS`] counts as an error
    /// and its page is free again.
    pub fn resend(&mut self) {
        if self.refused() == 0 {
            return;
        }
        let now = sys::clock_ns().unwrap_or(0);
        // Oldest batch first: a batch refused while in flight may be older than one
        // refused at its submission.
        let mut order: Vec<usize> = (0..self.pages.len())
            .filter(|&i| self.pages[i].refused_at != 0)
            .collect();
        order.sort_by_key(|&i| self.pages[i].seq);
        for i in order {
            let p = &self.pages[i];
            if now.saturating_sub(p.refused_at) > RESEND_LIMIT_NS || !self.map(i) {
                self.pages[i].refused_at = 0;
                self.counts.errors += self.pages[i].count as u64;
                continue;
            }
            let Some(drv) = self.driver() else {
                return;
            };
            if self.submit(i, drv).is_err() {
                // Still restarting: the rest wait as well.
                return;
            }
        }
    }

    /// Add one frame of `len` bytes that `f` writes to the open batch (submitted first if
    /// the frame does not fit; a page is opened if none is).
    fn send<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        if let Some(i) = self.open {
            if self.pages[i].copy.len() + batch::record_size(len) > FRAME_ICA_SIZE as usize {
                self.flush();
            }
        }
        if self.open.is_none() {
            self.reap(0);
            // Frames an earlier driver refused go first.
            self.resend();
            let page = match self.free_page() {
                Some(i) => Some(i),
                None => {
                    self.reap(TX_WAIT_NS);
                    self.free_page()
                }
            };
            if let Some(i) = page {
                self.pages[i].copy.clear();
                self.pages[i].count = 0;
                self.open = Some(i);
            }
        }
        let (Some(i), true) = (self.open, len <= FRAME_MAX) else {
            self.counts.drops += 1;
            let n = len.min(self.scratch.len());
            return f(&mut self.scratch[..n]);
        };
        let (at, used) = (self.pages[i].at, self.pages[i].copy.len());
        // SAFETY: the open page (FRAME_ICA_SIZE bytes, writable) is mapped at `at` in this
        // process and no other reference to it exists while it is not in flight.
        let page =
            unsafe { core::slice::from_raw_parts_mut(at as *mut u8, FRAME_ICA_SIZE as usize) };
        let mut w = Writer::new(&mut page[used..]);
        // Room was made above (a record of FRAME_MAX fits an empty page).
        let Some(room) = w.room(len) else {
            self.counts.drops += 1;
            return f(&mut self.scratch[..len]);
        };
        let r = f(room);
        w.commit(len, 0, 0);
        let added = w.used();
        let p = &mut self.pages[i];
        p.copy.extend_from_slice(&page[used..used + added]);
        p.count += 1;
        r
    }

    /// Submit the open batch to the driver (`DRV_TX_BATCH`): after each request the server
    /// serves, and when the page is full. Behind batches a restarting driver refused, or
    /// with no driver (yet), it is kept, sent by [`Tx::resend`].
    pub fn flush(&mut self) {
        let Some(i) = self.open.take() else {
            return;
        };
        if self.pages[i].count == 0 {
            return;
        }
        self.pages[i].seq = self.next_seq;
        self.next_seq += 1;
        let outcome = match self.driver() {
            Some(drv) if self.refused() == 0 => self.submit(i, drv),
            _ => Err(Error::Again),
        };
        let n = self.pages[i].count as u64;
        match outcome {
            Ok(()) => {}
            Err(e) if refused(e) => {
                self.pages[i].refused_at = sys::clock_ns().unwrap_or(0).max(1);
            }
            Err(Error::Busy) => self.counts.drops += n,
            Err(_) => self.counts.errors += n,
        }
    }

    /// Submit page `i`'s batch to `drv` as `DRV_TX_BATCH`, the page as its ICA. A refusal
    /// leaves the page where it was, holding the batch.
    fn submit(&mut self, i: usize, drv: FnId) -> Result<(), Error> {
        let p = &mut self.pages[i];
        let msg = Msg {
            label: DRV_TX_BATCH,
            words: [p.count as u64, p.copy.len() as u64, 0, 0, 0, 0],
        };
        let mut sub = ipc::op(api::SUBMIT_CALL, drv.as_target().0, [0; 4]);
        sub.msg = ipc::with_ica(msg, p.region);
        match ipc::submit(&sub) {
            Ok(t) => {
                p.ticket = Some(t);
                p.at = 0;
                p.refused_at = 0;
                Ok(())
            }
            Err(e) => {
                if matches!(
                    e,
                    Error::Gone | Error::NoSuchResource | Error::StaleResource | Error::Again
                ) {
                    self.drv = None;
                }
                Err(e)
            }
        }
    }

    /// A retiring server: frames a restarting driver refused are sent to the next one
    /// first (a bounded wait). The pages need nothing: marked, the kernel closes them as
    /// it ends this process, and those in flight once the driver answers.
    pub fn retire(&mut self) {
        self.flush();
        for _ in 0..50 {
            self.resend();
            if self.refused() == 0 {
                break;
            }
            self.reap(TX_WAIT_NS);
            if self.in_flight() == 0 && self.refused() > 0 {
                // A restarting driver: wait for it as a sender would.
                let _ = sys::sleep_ns(TX_WAIT_NS);
            }
        }
        self.counts.errors += self
            .pages
            .iter()
            .filter(|p| p.refused_at != 0)
            .map(|p| p.count as u64)
            .sum::<u64>();
    }

    /// Batches still with the driver.
    pub fn in_flight(&self) -> usize {
        self.pages.iter().filter(|p| p.ticket.is_some()).count()
    }
}

/// Open a transmit page (`netd-tx-` and a number nobody can guess, `res::open_fresh`: under
/// a name with this server's serial, any program could open the names of the next servers
/// first and keep them from starting), attach it at `home` and mark it
/// `CLOSE_WHEN_DETACHED`.
fn open_page(home: u64) -> Result<ResId, Error> {
    let region = res::open_fresh(
        "here/vregion/netd-tx",
        &FRAME_ICA_SIZE.to_le_bytes(),
        Rights::OWNER_ALL,
    )?;
    let marked = res::attach_here(region, home, true).and_then(|()| {
        res::close_when_detached(region).inspect_err(|_| {
            let _ = res::detach_here(home);
        })
    });
    if let Err(e) = marked {
        let _ = res::close(region);
        return Err(e);
    }
    Ok(region)
}

/// A refusal that means "not sent, send again to the next driver": the function is
/// restarting (`Again`), or its server ended or is not there (yet).
fn refused(e: Error) -> bool {
    matches!(
        e,
        Error::Again | Error::Gone | Error::NoSuchResource | Error::StaleResource
    )
}

pub struct RxTok(Vec<u8>);
pub struct TxTok<'a>(&'a mut Tx);

impl phy::RxToken for RxTok {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.0.send(len, f)
    }
}

impl phy::Device for NetDev {
    type RxToken<'a> = RxTok;
    type TxToken<'a> = TxTok<'a>;

    fn receive(&mut self, _: Instant) -> Option<(RxTok, TxTok<'_>)> {
        let f = self.rx.pop_front()?;
        Some((RxTok(f), TxTok(&mut self.tx)))
    }

    fn transmit(&mut self, _: Instant) -> Option<TxTok<'_>> {
        Some(TxTok(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ethernet;
        c.max_transmission_unit = FRAME_MAX;
        c
    }
}

/// The driver's MAC address (`DRV_INFO`), waiting up to `tries` x 10 ms for `net.drv`.
pub fn driver_mac(tries: u32) -> Result<[u8; 6], Error> {
    let mut last = Error::NoSuchResource;
    for _ in 0..tries {
        match fnid::lookup(FN_DRV) {
            Ok(drv) => {
                let msg = Msg {
                    label: ulib::abi::net::DRV_INFO,
                    ..Msg::default()
                };
                match ipc::call(drv.as_target(), &msg) {
                    // The MAC in words[0] (an error reply carries none).
                    Ok((_, r)) if r.words[0] != 0 => {
                        let b = r.words[0].to_le_bytes();
                        return Ok([b[0], b[1], b[2], b[3], b[4], b[5]]);
                    }
                    Ok((_, r)) => last = Error::from_code(r.label),
                    Err(e) => last = e,
                }
            }
            Err(e) => last = e,
        }
        let _ = sys::sleep_ns(10_000_000);
    }
    Err(last)
}
