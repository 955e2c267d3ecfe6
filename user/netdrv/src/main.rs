//! `netdrv`: the virtio-net driver (issue 15; P3's NIC driver process), a user process at
//! driver priority. It holds QEMU's virtio-net function (modern PCI transport) through the
//! kernel's device calls, drives it with the `virtio-drivers` crate over `drvlib`, and
//! serves `net.drv` per `abi::net`:
//!
//! - `DRV_INFO`: MAC, link, frames sent and received, drops;
//! - `DRV_TX` with a frame ICA, `DRV_TX_BATCH` with a batch of frames (`abi::net::batch`,
//!   what `netd` sends: one request for the frames of one of its steps): each frame is
//!   copied to the device's transmit queue and the ICA goes back at once; the driver does not wait for the device to send it (`nic.rs`
//!   says why). The transmit queue asks for no interrupts (`drvlib::Quiet`): only received
//!   frames interrupt;
//! - the frames received at one wake go to `net.udp` as one `UDP_FRAMES_IN` request
//!   carrying them as a batch in a frame ICA (from a pool of [`POOL`] vregions; a new one
//!   when one is full; the ICA comes back in the reply, collected with timeout 0 while some
//!   are out), except frames of `machd`'s own Ethernet type (`abi::mach::ETHERTYPE`), which
//!   go one per `UDP_FRAME_IN` request to `mach.link` (`abi::mach::FN_LINK`).
//!   Without a server for them, or with the pool empty, the frame is dropped and counted.
//!   A frame of that type is sent only for the server of `mach.link` (`Denied` for anyone
//!   else): no other program of this machine can speak for its `machd`.
//!
//! The device's interrupt arrives as a message on the driver's endpoint (`abi::dev`); the
//! driver acknowledges it to the device (ISR read), drains the receive queue and unmasks the
//! line. Started again after a crash, it claims the device (the dead holder is replaced),
//! resets it (the transport's initialisation does) and closes the frame vregions its
//! predecessor left (`netdrv-*` on this core).
//!
//! `netdrv restart=N`: the kernel starts it again after a crash (a fault or a kill), at most
//! N times a minute (`FN_RESTART`, as a driver: the restarted one claims the device again);
//! `net.drv` answers `Again` meanwhile, so `netd` keeps its frames for the next driver.
//!
//! `netdrv crashable`: `DRV_CRASH` makes it fault (shell `net crash`, for tests of the
//! restart); without it, `DRV_CRASH` is answered `NotSupported`.
//!
//! `netdrv lateack` (for the kernel's tests, `dev::irq_masked_until_ack`): it serves the
//! interrupt's message at once but acknowledges it to the kernel only at the next
//! `DRV_INFO` request, so a test can see that no second interrupt comes before the
//! acknowledgement (frames still arrive: the receive queue is polled every 100 ms).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use drvlib::virtio_drivers::transport::pci::PciTransport;
use drvlib::Quiet;
use nic::Nic;
use ulib::abi::ipc::{Msg, Received, Submission, SUBMIT_CALL};
use ulib::abi::net::{
    self, batch, DRV_CRASH, DRV_INFO, DRV_TX, DRV_TX_BATCH, FRAME_ICA_SIZE, FRAME_MAX,
    UDP_FRAMES_IN, UDP_FRAME_IN,
};
use ulib::abi::res::{Op, ResId, ResType, Rights};
use ulib::abi::{dev as abidev, mach, Error, Pid};
use ulib::{fnid, ipc, println, res};

mod nic;

ulib::main!(main);

/// Frame vregions for received frames (in flight to `net.udp` or `mach.link`, or free).
const POOL: usize = 32;
/// Most of them in flight to `mach.link` at once: a slow `machd` (or a flood of its frame
/// type) leaves the rest for `net.udp`.
const LINK_MAX: usize = POOL / 2;
/// How often a frame its server did not take (`Again`, `Gone`) is sent.
const RESENDS: u32 = 3;
/// virtio-net's transmit queue (virtio 1.1, 5.1.2: receiveq1 is 0, transmitq1 is 1).
const TRANSMIT_QUEUE: u16 = 1;
/// Where the pool's vregions are first attached.
const POOL_AT: u64 = 0x0000_5200_0000_0000;

struct Driver {
    net: Nic,
    id: ResId,
    mac: u64,
    tx: u64,
    rx: u64,
    drops: u64,
    /// Free frame vregions: (region, where mapped).
    free: Vec<(ResId, u64)>,
    /// Frames submitted to `net.udp` or `mach.link`: ticket -> (region, what it holds,
    /// sends so far, to whom).
    in_flight: BTreeMap<u64, (ResId, Load, u32, To)>,
    /// The batch of received frames for `net.udp` being filled: (region, where mapped,
    /// what it holds); submitted once the receive queue is empty or the page full.
    open: Option<(ResId, u64, Load)>,
    udp: Option<u64>,
    /// `mach.link`'s function id and server, looked up when needed.
    link: Option<u64>,
    link_pid: Option<Pid>,
    /// The server of `net.udp` as last looked up (who may send frames but `machd`'s).
    udp_pid: Option<Pid>,
    next_at: u64,
    /// `lateack`: acknowledge interrupts at the next `DRV_INFO`; and whether one is due.
    late_ack: bool,
    /// The interrupt comes by MSI-X: no ISR to read (virtio 1.1, 4.1.4.5.2).
    msix: bool,
    ack_due: bool,
    /// `crashable`: `DRV_CRASH` is obeyed.
    crashable: bool,
}

fn main(args: &[&str]) -> i32 {
    let mut late_ack = false;
    let mut crashable = false;
    let mut restart = 0;
    for a in args.iter().skip(1) {
        match *a {
            "lateack" => late_ack = true,
            "crashable" => crashable = true,
            s if s.starts_with("restart=") => match s["restart=".len()..].parse() {
                Ok(n) if n <= ulib::abi::fnid::MAX_RESTARTS => restart = n,
                _ => {
                    println!(
                        "netdrv: restart=N: N from 0 to {}",
                        ulib::abi::fnid::MAX_RESTARTS
                    );
                    return 2;
                }
            },
            other => {
                println!(
                    "netdrv: unknown argument '{other}' (usage: netdrv [restart=N] [lateack])"
                );
                return 2;
            }
        }
    }
    match run(late_ack, crashable, restart) {
        Ok(()) => 0,
        Err(e) => {
            println!("netdrv: {e}");
            1
        }
    }
}

fn run(late_ack: bool, crashable: bool, restart: u64) -> Result<(), alloc::string::String> {
    use alloc::format;
    close_leftovers();
    let held = drvlib::Held::claim(0x1af4, 0x1041).map_err(|e| format!("claim: {e}"))?;
    // Memory space and bus mastering on (the device reads and writes DMA memory).
    let command = ulib::dev::config_read(held.id(), 4, 2).map_err(|e| format!("config: {e}"))?;
    ulib::dev::config_write(held.id(), 4, 2, command | 0x6).map_err(|e| format!("config: {e}"))?;
    let mut root = held.root();
    let transport = PciTransport::new::<drvlib::Hal, _>(&mut root, held.function())
        .map_err(|e| format!("virtio transport: {e:?}"))?;
    // Initialisation resets the device first (status 0), then posts the receive buffers.
    // The transmit queue (1) never interrupts: the driver looks for its completions itself.
    let transport: Quiet<PciTransport> = Quiet::new(transport, 1 << TRANSMIT_QUEUE);
    let net = Nic::new(transport).map_err(|e| format!("virtio-net: {e:?}"))?;
    let m = net.mac_address();
    let mac = u64::from_le_bytes([m[0], m[1], m[2], m[3], m[4], m[5], 0, 0]);
    let rights = Rights(0x0f | Rights::others(Op::Write));
    // Names no other program can take first (`res::open_fresh`): fixed ones could be.
    let ep = res::open_fresh("here/endpoint/netdrv", &[], rights)
        .map_err(|e| format!("endpoint: {e}"))?;
    let by = ulib::dev::irq(held.id(), Some(ep)).map_err(|e| format!("irq: {e}"))?;
    drvlib::msix(held.id(), by, 1 << TRANSMIT_QUEUE).map_err(|e| format!("msix: {e}"))?;
    let mut d = Driver {
        net,
        id: held.id(),
        mac,
        tx: 0,
        rx: 0,
        drops: 0,
        free: Vec::new(),
        in_flight: BTreeMap::new(),
        open: None,
        udp: None,
        link: None,
        link_pid: None,
        udp_pid: None,
        next_at: POOL_AT,
        late_ack,
        msix: by == ulib::dev::IrqBy::Msix,
        ack_due: false,
        crashable,
    };
    for i in 0..POOL {
        let name = format!("here/vregion/netdrv-{i}");
        let r = res::open_fresh(&name, &FRAME_ICA_SIZE.to_le_bytes(), Rights::OWNER_ALL)
            .map_err(|e| format!("{name}-*: {e}"))?;
        let at = d.place(r).map_err(|e| format!("attach {name}: {e}"))?;
        d.free.push((r, at));
    }
    let id =
        fnid::register(net::FN_DRV, ep).map_err(|e| format!("register {}: {e}", net::FN_DRV))?;
    if restart > 0 {
        let mut args = format!("restart={restart}");
        for (on, word) in [(late_ack, " lateack"), (crashable, " crashable")] {
            if on {
                args += word;
            }
        }
        fnid::restart(id, restart, ulib::abi::fnid::RESTART_WINDOW_MS, &args)
            .map_err(|e| format!("FN_RESTART {id}: {e}"))?;
    }
    println!(
        "netdrv: {} serving {} (mac {:012x})",
        held.info.id,
        net::FN_DRV,
        mac
    );
    loop {
        // The interrupt or a request wakes us; the timeout only polls in case of neither.
        match ipc::recv(ep, 100_000_000) {
            Ok(r) => d.request(r),
            Err(Error::TimedOut) => {}
            Err(e) => return Err(format!("recv: {e}")),
        }
        d.receive();
        d.net.reclaim();
        if !d.in_flight.is_empty() {
            d.collect();
        }
    }
}

impl Driver {
    /// Attach region `r` at a fresh address of our own.
    fn place(&mut self, r: ResId) -> Result<u64, Error> {
        let at = self.next_at;
        self.next_at += FRAME_ICA_SIZE;
        res::attach_here(r, at, true)?;
        Ok(at)
    }

    fn request(&mut self, r: Received) {
        // A frame page mapped read-only (lent so) serves `DRV_TX`, which only reads it.
        let label = ipc::label(&r.msg);
        if r.sender.0 == 0 && label == abidev::IRQ_LABEL {
            // From the kernel: the interrupt is masked until we acknowledge. A line is
            // shared and level-triggered: reading the ISR lowers it.
            if !self.msix {
                self.net.ack_interrupt();
            }
            self.receive();
            if self.late_ack {
                self.ack_due = true;
            } else {
                let _ = ulib::dev::irq_ack(self.id);
            }
            return;
        }
        if r.request == 0 {
            // One-way (a program's, never the kernel's but for interrupts): nothing to
            // answer; a page it carried goes back, else it stayed mapped here for good and
            // a few dozen of them left no room for the frame pool (found by a review).
            ipc::let_go(&r.msg);
            return;
        }
        if label == DRV_INFO && ipc::ica_at(&r.msg).is_some() {
            // Its answer's words leave no room for a page: refused, the page back.
            let back = ipc::ica_at(&r.msg).map(|(region, _)| region);
            let msg = back.map_or(Msg::default(), |region| {
                ipc::with_ica(Msg::default(), region)
            });
            let _ = ipc::reply(r.request, Error::InvalidArgument as u64, &msg);
            return;
        }
        match label {
            DRV_INFO => {
                if core::mem::take(&mut self.ack_due) {
                    let _ = ulib::dev::irq_ack(self.id);
                }
                let msg = Msg {
                    label: DRV_INFO,
                    words: [self.mac, 1, self.tx, self.rx, self.drops, 0],
                };
                let _ = ipc::reply(r.request, 0, &msg);
            }
            DRV_CRASH if self.crashable => {
                println!("netdrv: crashing as asked (DRV_CRASH)");
                // SAFETY: the store faults (nothing is mapped at page 0) and the kernel
                // ends this process; no memory Rust code uses is touched.
                unsafe {
                    core::arch::asm!("mov byte ptr [{a}], 1", a = in(reg) 8u64, options(nostack))
                };
            }
            DRV_TX => {
                let Some((region, at)) = ipc::ica_at(&r.msg) else {
                    let _ = ipc::reply(r.request, Error::InvalidArgument as u64, &Msg::default());
                    return;
                };
                let len = r.msg.words[0] as usize;
                // SAFETY: the ICA is mapped at `at` in our address space, FRAME_ICA_SIZE
                // bytes, and `len` is cut to FRAME_MAX < FRAME_ICA_SIZE.
                let frame =
                    unsafe { core::slice::from_raw_parts(at as *const u8, len.min(FRAME_MAX)) };
                let value = if len == 0 || len > FRAME_MAX {
                    Error::InvalidArgument as u64
                } else if !self.may_send(To::of(frame), r.sender) {
                    // machd's frames come from machd only, every other frame from `net.udp`'s
                    // server (a program could else forge any frame, past netd's ports).
                    Error::Denied as u64
                } else {
                    match self.net.transmit(frame) {
                        Ok(()) => {
                            self.tx += 1;
                            0
                        }
                        Err(_) => {
                            self.drops += 1;
                            Error::Busy as u64
                        }
                    }
                };
                let msg = ipc::with_ica(
                    Msg {
                        label: DRV_TX,
                        ..Msg::default()
                    },
                    region,
                );
                let _ = ipc::reply(r.request, value, &msg);
            }
            DRV_TX_BATCH => {
                let Some((region, at)) = ipc::ica_at(&r.msg) else {
                    let _ = ipc::reply(r.request, Error::InvalidArgument as u64, &Msg::default());
                    return;
                };
                // SAFETY: the ICA is mapped at `at` in our address space, FRAME_ICA_SIZE
                // bytes, until the reply passes it back; nothing else here refers to it.
                let page = unsafe {
                    core::slice::from_raw_parts(at as *const u8, FRAME_ICA_SIZE as usize)
                };
                let [count, used, ..] = r.msg.words;
                let (sent, value) =
                    self.transmit_batch(page, count as usize, used as usize, r.sender);
                let msg = ipc::with_ica(
                    Msg {
                        label: DRV_TX_BATCH,
                        words: [sent as u64, 0, 0, 0, 0, 0],
                    },
                    region,
                );
                let _ = ipc::reply(r.request, value, &msg);
            }
            _ if r.request != 0 => {
                // Anything else: answered, with its ICA back if it carried one.
                let msg = match ipc::ica_at(&r.msg) {
                    Some((region, _)) => ipc::with_ica(Msg::default(), region),
                    None => Msg::default(),
                };
                let _ = ipc::reply(r.request, Error::NotSupported as u64, &msg);
            }
            _ => {}
        }
    }

    /// Hand the frames of a `DRV_TX_BATCH` (`count` records in the first `used` bytes of
    /// `page`) from `sender` to the device, in order, up to the first that cannot be: (how
    /// many were, 0 or that one's error code).
    fn transmit_batch(
        &mut self,
        page: &[u8],
        count: usize,
        used: usize,
        sender: Pid,
    ) -> (usize, u64) {
        let Ok(records) = batch::Reader::new(page, count, used, FRAME_MAX) else {
            return (0, Error::InvalidArgument as u64);
        };
        let mut sent = 0;
        for record in records {
            let frame = match record {
                Ok((_, f)) if !f.is_empty() => f,
                _ => return (sent, Error::InvalidArgument as u64),
            };
            // As for `DRV_TX`: each frame's type decides who may send it.
            if !self.may_send(To::of(frame), sender) {
                return (sent, Error::Denied as u64);
            }
            if self.net.transmit(frame).is_err() {
                self.drops += 1;
                return (sent, Error::Busy as u64);
            }
            self.tx += 1;
            sent += 1;
        }
        (sent, 0)
    }

    /// May `pid` send a frame for `to`'s kind: the server of `net.udp` (every frame but
    /// `machd`'s type), or that of `mach.link` (frames of that type)?
    fn may_send(&mut self, to: To, pid: Pid) -> bool {
        match to {
            To::Link => self.is_link_server(pid),
            To::Udp => {
                if self.udp_pid != Some(pid) {
                    self.udp_pid = fnid::server_of(net::FN_UDP);
                }
                self.udp_pid == Some(pid)
            }
        }
    }

    /// Does `pid` serve `mach.link` now?
    fn is_link_server(&mut self, pid: Pid) -> bool {
        if self.link_pid == Some(pid) {
            return true;
        }
        self.link_pid = fnid::server_of(mach::FN_LINK);
        self.link_pid == Some(pid)
    }

    /// The function id frames for `to` go to (looked up again after a failure).
    fn target(&mut self, to: To) -> Option<u64> {
        let (cached, name) = match to {
            To::Udp => (&mut self.udp, net::FN_UDP),
            To::Link => (&mut self.link, mach::FN_LINK),
        };
        if cached.is_none() {
            *cached = fnid::lookup(name).ok().map(|f| f.0);
        }
        *cached
    }

    /// Forget `to`'s function id: its server may have gone.
    fn forget(&mut self, to: To) {
        match to {
            To::Udp => self.udp = None,
            To::Link => self.link = None,
        }
    }

    /// Take every received frame off the device: to `net.udp` or `mach.link`, or dropped
    /// and counted.
    fn receive(&mut self) {
        while let Some(frame) = self.net.receive() {
            self.rx += 1;
            self.forward(frame.bytes());
            self.net.recycle(frame);
        }
        self.submit_open();
    }

    /// Submit the open batch of frames for `net.udp`, if it holds any.
    fn submit_open(&mut self) {
        match self.open.take() {
            Some((region, at, load @ Load::Batch(n, _))) if n > 0 => {
                self.submit_frame(region, at, load, 1, To::Udp)
            }
            Some((region, at, _)) => self.free.push((region, at)),
            None => {}
        }
    }

    /// Add `frame` to the open batch for `net.udp` (submitted first if it does not fit;
    /// one opened if none is): false if no page is free.
    fn batch(&mut self, frame: &[u8]) -> bool {
        if let Some((_, _, Load::Batch(_, used))) = self.open {
            if used + batch::record_size(frame.len()) > FRAME_ICA_SIZE as usize {
                self.submit_open();
            }
        }
        if self.open.is_none() {
            let Some((region, at)) = self.free.pop() else {
                return false;
            };
            self.open = Some((region, at, Load::Batch(0, 0)));
        }
        let Some((_, at, Load::Batch(n, used))) = &mut self.open else {
            return false;
        };
        // SAFETY: the open page is attached writable at `at`, FRAME_ICA_SIZE bytes, and
        // nothing else refers to it until it is submitted.
        let page =
            unsafe { core::slice::from_raw_parts_mut(*at as *mut u8, FRAME_ICA_SIZE as usize) };
        let mut w = batch::Writer::new(&mut page[*used..]);
        // A frame of FRAME_MAX fits an empty page; one that does not fit was submitted
        // above.
        if w.push(0, 0, frame).is_err() {
            return false;
        }
        *n += 1;
        *used += w.used();
        true
    }

    fn forward(&mut self, frame: &[u8]) {
        if frame.is_empty() || frame.len() > FRAME_MAX {
            self.drops += 1;
            return;
        }
        let to = To::of(frame);
        // Looked up before a page is taken: a page taken for a frame nobody serves would
        // be lost to the pool (32 frames before `net.udp` or `mach.link` registered, and
        // the driver would drop every frame after).
        let full = to == To::Link
            && self.in_flight.values().filter(|f| f.3 == To::Link).count() >= LINK_MAX;
        if full || self.target(to).is_none() {
            self.drops += 1;
            return;
        }
        if to == To::Udp {
            if !self.batch(frame) {
                self.drops += 1;
            }
            return;
        }
        let Some((region, at)) = self.free.pop() else {
            self.drops += 1;
            return;
        };
        // SAFETY: the region is attached writable at `at`, FRAME_ICA_SIZE bytes.
        unsafe { core::ptr::copy_nonoverlapping(frame.as_ptr(), at as *mut u8, frame.len()) };
        self.submit_frame(region, at, Load::Frame(frame.len()), 1, to);
    }

    /// Submit the frames `load` in `region` (mapped at `at`) to `net.udp` or `mach.link`
    /// (`to`), the `sends`-th time; a refusal drops and counts them.
    fn submit_frame(&mut self, region: ResId, at: u64, load: Load, sends: u32, to: To) {
        let Some(target) = self.target(to) else {
            self.drops += load.frames();
            self.free.push((region, at));
            return;
        };
        let msg = load.msg();
        let sub = Submission {
            kind: SUBMIT_CALL,
            target,
            args: [0; 4],
            msg: ipc::with_ica(msg, region),
        };
        match ipc::submit(&sub) {
            Ok(ticket) => {
                self.in_flight.insert(ticket, (region, load, sends, to));
            }
            Err(_) => {
                // Refused before anything moved: the region is still ours, where it was.
                self.drops += load.frames();
                self.free.push((region, at));
                // Its server may have gone: look it up again next time.
                self.forget(to);
            }
        }
    }

    /// Take finished `UDP_FRAMES_IN` and `UDP_FRAME_IN` requests: their frame vregions come
    /// back.
    fn collect(&mut self) {
        while let Ok(c) = ipc::collect(ulib::abi::ipc::ANY, 0) {
            let Some((region, load, sends, to)) = self.in_flight.remove(&c.ticket) else {
                continue;
            };
            let at = match ipc::ica_at(&c.msg) {
                Some((r, at)) if r == region => at,
                // The server ended holding it: it is an ordinary vregion again, detached.
                _ => match self.place(region) {
                    Ok(at) => at,
                    Err(_) => {
                        let _ = res::close(region);
                        if c.status != 0 {
                            self.drops += load.frames();
                        }
                        continue;
                    }
                },
            };
            if c.status == 0 {
                self.free.push((region, at));
                continue;
            }
            // Not taken: its server was being replaced or restarted (`Again`), or the
            // request reached a server that had just ended (`Gone`). The frames are still in
            // the region: send it again to whoever serves its function now (a few times at
            // most).
            self.forget(to);
            let again = matches!(Error::from_code(c.status), Error::Again | Error::Gone);
            if again && sends < RESENDS {
                self.submit_frame(region, at, load, sends + 1, to);
            } else {
                self.drops += load.frames();
                self.free.push((region, at));
            }
        }
    }
}

/// What a frame vregion in flight holds.
#[derive(Clone, Copy)]
enum Load {
    /// One frame of this many bytes (`UDP_FRAME_IN`, to `mach.link`).
    Frame(usize),
    /// A batch (`UDP_FRAMES_IN`, to `net.udp`): records, bytes.
    Batch(usize, usize),
}

impl Load {
    fn frames(self) -> u64 {
        match self {
            Load::Frame(_) => 1,
            Load::Batch(n, _) => n as u64,
        }
    }

    /// The request that carries it.
    fn msg(self) -> Msg {
        let (label, words) = match self {
            Load::Frame(len) => (UDP_FRAME_IN, [len as u64, 0, 0, 0, 0, 0]),
            Load::Batch(n, used) => (UDP_FRAMES_IN, [n as u64, used as u64, 0, 0, 0, 0]),
        };
        Msg { label, words }
    }
}

/// Who a received frame goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    /// `net.udp` (`netd`): every frame but `machd`'s.
    Udp,
    /// `mach.link` (`machd`): frames of its own Ethernet type.
    Link,
}

impl To {
    fn of(frame: &[u8]) -> To {
        match frame.get(12..14) {
            Some(t) if t == mach::ETHERTYPE.to_be_bytes() => To::Link,
            _ => To::Udp,
        }
    }
}

/// Close the frame vregions a previous `netdrv` left on this core (it was killed): they
/// are detached once their holder let go, so they close.
fn close_leftovers() {
    let core = ulib::sys::core().unwrap_or(0);
    for r in res::list_all(core).unwrap_or_default() {
        if r.kind == ResType::VRegion as u8 && r.name().starts_with("netdrv-") {
            let _ = res::close(r.id);
        }
    }
}
