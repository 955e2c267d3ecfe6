//! `blkdrv`: the virtio-blk driver (issue 16; P0's disk process), a user process at driver
//! priority. It holds QEMU's virtio-blk function (modern PCI transport) through the kernel's
//! device calls, drives it with the `virtio-drivers` crate over `drvlib`, and serves `blk`
//! per `abi::blk`: `BLK_INFO`, `BLK_READ`/`BLK_WRITE` of up to `MAX_SECTORS` sectors in a
//! data ICA, `BLK_FLUSH`. Bad requests (no ICA, a count of 0 or too many sectors, sectors
//! beyond the disk) are answered with an error, the ICA back, and never reach the device.
//!
//! One request is at the device at a time. The driver submits it without waiting, then
//! sleeps in `RECV` until the device's interrupt arrives as a message from the kernel
//! (requests that arrive meanwhile wait their turn in a queue here); it acknowledges the
//! interrupt to the device (ISR read) and to the kernel (the line is unmasked), completes
//! the request and replies. The receive timeout only guards against a lost interrupt.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::collections::VecDeque;
use alloc::string::String;
use drvlib::virtio_drivers::device::blk::{BlkReq, BlkResp, VirtIOBlk};
use drvlib::virtio_drivers::transport::pci::PciTransport;
use ulib::abi::blk::{self, BLK_FLUSH, BLK_INFO, BLK_READ, BLK_WRITE, MAX_SECTORS, SECTOR};
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{dev as abidev, Error};
use ulib::{fnid, ipc, println, res};

ulib::main!(main);

type Blk = VirtIOBlk<drvlib::Hal, PciTransport>;

/// How long one wait for the device's interrupt lasts before the queue is looked at anyway.
const IRQ_WAIT_NS: u64 = 100_000_000;

struct Driver {
    blk: Blk,
    id: ResId,
    ep: ResId,
    sectors: u64,
    readonly: bool,
    served: u64,
    irqs: u64,
    /// The interrupt comes by MSI-X: no ISR to read (virtio 1.1, 4.1.4.5.2).
    msix: bool,
    /// `BLK_FLUSH` requests completed.
    flushes: u64,
    /// Requests that arrived while one was at the device.
    queue: VecDeque<Received>,
    /// The bounce of one request's data (the crate shares it with the device).
    buf: [u8; blk::BLK_ICA_SIZE as usize],
}

fn main(_args: &[&str]) -> i32 {
    match run() {
        Ok(()) => 0,
        Err(e) => {
            println!("blkdrv: {e}");
            1
        }
    }
}

fn run() -> Result<(), String> {
    use alloc::format;
    let held = drvlib::Held::claim(0x1af4, 0x1042).map_err(|e| format!("claim: {e}"))?;
    // Memory space and bus mastering on (the device reads and writes DMA memory).
    let command = ulib::dev::config_read(held.id(), 4, 2).map_err(|e| format!("config: {e}"))?;
    ulib::dev::config_write(held.id(), 4, 2, command | 0x6).map_err(|e| format!("config: {e}"))?;
    let mut root = held.root();
    let transport = PciTransport::new::<drvlib::Hal, _>(&mut root, held.function())
        .map_err(|e| format!("virtio transport: {e:?}"))?;
    // Initialisation resets the device first (status 0): a restarted driver starts clean.
    let blk = Blk::new(transport).map_err(|e| format!("virtio-blk: {e:?}"))?;
    // Only this user (the administrator's: the file service and its tools) may send:
    // sectors are below every file's owner check, so no other user reaches them.
    let rights = Rights(0x0f);
    // A name no other program can take first (`res::open_fresh`): a fixed one could be.
    let ep = res::open_fresh("here/endpoint/blkdrv", &[], rights)
        .map_err(|e| format!("endpoint: {e}"))?;
    let by = ulib::dev::irq(held.id(), Some(ep)).map_err(|e| format!("irq: {e}"))?;
    drvlib::msix(held.id(), by, 0).map_err(|e| format!("msix: {e}"))?;
    let mut d = Driver {
        sectors: blk.capacity(),
        readonly: blk.readonly(),
        blk,
        id: held.id(),
        ep,
        served: 0,
        irqs: 0,
        msix: by == ulib::dev::IrqBy::Msix,
        flushes: 0,
        queue: VecDeque::new(),
        buf: [0; blk::BLK_ICA_SIZE as usize],
    };
    d.blk.enable_interrupts();
    fnid::register(blk::FN_BLK, ep).map_err(|e| format!("register {}: {e}", blk::FN_BLK))?;
    println!(
        "blkdrv: {} serving {} ({} sectors{})",
        held.info.id,
        blk::FN_BLK,
        d.sectors,
        if d.readonly { ", read-only" } else { "" }
    );
    loop {
        let r = match d.queue.pop_front() {
            Some(r) => r,
            None => match ipc::recv(ep, u64::MAX) {
                Ok(r) => r,
                Err(Error::TimedOut) => continue,
                Err(e) => return Err(format!("recv: {e}")),
            },
        };
        d.request(r);
    }
}

impl Driver {
    fn is_irq(r: &Received) -> bool {
        r.sender.0 == 0 && ipc::label(&r.msg) == abidev::IRQ_LABEL
    }

    /// The device interrupted: acknowledge it to the device, then to the kernel.
    fn take_irq(&mut self) {
        self.irqs += 1;
        if !self.msix {
            // A shared, level-triggered line: reading the ISR lowers it.
            let _ = self.blk.ack_interrupt();
        }
        let _ = ulib::dev::irq_ack(self.id);
    }

    fn request(&mut self, r: Received) {
        if Self::is_irq(&r) {
            // Nothing was at the device (a late or shared interrupt).
            self.take_irq();
            return;
        }
        if r.request == 0 {
            // One-way: nothing to answer, an ICA it carried goes back.
            ipc::let_go(&r.msg);
            return;
        }
        // A read-only ICA (the client's mapping was, or it lent it so) serves a write
        // only: a read's sectors are written into it.
        let label = ipc::label(&r.msg);
        let ica = ipc::ica_at(&r.msg);
        let read_only = ipc::ica_read_only(&r.msg);
        let (value, words) = match label {
            BLK_INFO => (
                0,
                [
                    self.sectors,
                    SECTOR as u64,
                    u64::from(self.readonly),
                    self.served,
                    self.irqs,
                    self.flushes,
                ],
            ),
            BLK_READ if read_only => (Error::InvalidArgument as u64, [0; 6]),
            BLK_READ | BLK_WRITE => (self.transfer(label, &r.msg, ica.map(|i| i.1)), [0; 6]),
            BLK_FLUSH => (self.flush(), [0; 6]),
            _ => (Error::NotSupported as u64, [0; 6]),
        };
        self.served += 1;
        let mut msg = Msg { label, words };
        if let Some((region, _)) = ica {
            msg = ipc::with_ica(msg, region);
        }
        let _ = ipc::reply(r.request, value, &msg);
    }

    /// Check a read or write and move its sectors between the ICA at `at` and the device.
    fn transfer(&mut self, label: u64, msg: &Msg, at: Option<u64>) -> u64 {
        let (first, count) = (msg.words[0], msg.words[1]);
        let Some(at) = at else {
            return Error::InvalidArgument as u64;
        };
        if count == 0 || count > MAX_SECTORS {
            return Error::InvalidArgument as u64;
        }
        if first >= self.sectors || count > self.sectors - first {
            return Error::TooLong as u64;
        }
        if label == BLK_WRITE && self.readonly {
            return Error::Denied as u64;
        }
        let len = count as usize * SECTOR;
        let mut req = BlkReq::default();
        let mut resp = BlkResp::default();
        let buf = &mut self.buf[..len];
        let token = if label == BLK_READ {
            // SAFETY: `req`, `buf` and `resp` live until the completion below, untouched.
            unsafe {
                self.blk
                    .read_blocks_nb(first as usize, &mut req, buf, &mut resp)
            }
        } else {
            // SAFETY: the ICA is mapped at `at` in our address space (perhaps read-only),
            // BLK_ICA_SIZE >= `len` bytes; nobody else maps it while we hold it.
            buf.copy_from_slice(unsafe { core::slice::from_raw_parts(at as *const u8, len) });
            // SAFETY: `req`, `buf` and `resp` live until the completion below, untouched.
            unsafe {
                self.blk
                    .write_blocks_nb(first as usize, &mut req, buf, &mut resp)
            }
        };
        let Ok(token) = token else {
            return Error::Unknown as u64;
        };
        self.wait_for(token);
        let buf = &mut self.buf[..len];
        let done = if label == BLK_READ {
            // SAFETY: the same request, buffers and token as submitted; the device is done.
            unsafe { self.blk.complete_read_blocks(token, &req, buf, &mut resp) }
        } else {
            // SAFETY: as above.
            unsafe { self.blk.complete_write_blocks(token, &req, buf, &mut resp) }
        };
        match done {
            Ok(()) => {
                if label == BLK_READ {
                    // SAFETY: as above, and writable: a read with a read-only ICA was
                    // refused before it came here.
                    let data = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len) };
                    data.copy_from_slice(buf);
                }
                0
            }
            Err(_) => Error::Unknown as u64,
        }
    }

    /// Sleep until the device has used `token`: its interrupt wakes us; other requests
    /// that arrive meanwhile are queued.
    fn wait_for(&mut self, token: u16) {
        while self.blk.peek_used() != Some(token) {
            match ipc::recv(self.ep, IRQ_WAIT_NS) {
                Ok(r) if Self::is_irq(&r) => self.take_irq(),
                Ok(r) => self.queue.push_back(r),
                Err(_) => {}
            }
        }
    }

    fn flush(&mut self) -> u64 {
        // The crate sends VIRTIO_BLK_T_FLUSH when the device offered VIRTIO_BLK_F_FLUSH (QEMU
        // does, for its default write-back cache) and waits for it; without the feature the
        // device has no volatile cache and every completed write is durable already.
        match self.blk.flush() {
            Ok(()) => {
                self.flushes += 1;
                0
            }
            Err(_) => Error::Unknown as u64,
        }
    }
}
