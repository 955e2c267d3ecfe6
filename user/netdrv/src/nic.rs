//! [`Nic`]: the virtio-net device as `netdrv` drives it, over the crate's `VirtIONetRaw`.
//!
//! Why not the crate's `VirtIONet`: its `send` spins until the device has used the
//! transmit buffer. Under QEMU that is the time QEMU's own thread takes to run the
//! transmit, and on a busy host that thread waits for a host core, which the spinning vCPU
//! holds: `bench net` measured about 170 µs of spinning per frame sent (parallel mode, a
//! 2-core host). A driver that spins serves nothing else meanwhile, neither the next frame
//! to send nor the frames received.
//!
//! So here a frame is handed to the device (`transmit_begin`) and the driver goes on; the
//! transmit buffer is taken back once the device is done with it, looked for before every
//! transmit and at every wake ([`Nic::reclaim`]). The transmit queue still asks for no
//! interrupts (`drvlib::Quiet`): nothing waits for its completions. Only when all
//! [`QUEUE`] descriptors are out does a transmit wait for one, for at most
//! [`FULL_WAIT_NS`], then it is refused (`Busy`, counted as a drop by the caller).
//!
//! Receive buffers are this module's too: [`QUEUE`] of [`BUF`] bytes, posted at start and
//! posted again as soon as their frame has been handed on.

use alloc::vec;
use alloc::vec::Vec;
use drvlib::virtio_drivers::device::net::VirtIONetRaw;
use drvlib::virtio_drivers::transport::pci::PciTransport;
use drvlib::Quiet;

/// Descriptors of each queue (buffers posted to the device for receiving; frames in
/// flight for sending).
pub const QUEUE: usize = 16;
/// Receive buffer size (the crate wants 1,526..65,535: a header and a whole frame).
pub const BUF: usize = 2048;
/// How long a transmit waits for a descriptor when all are out.
const FULL_WAIT_NS: u64 = 5_000_000;

type Raw = VirtIONetRaw<drvlib::Hal, Quiet<PciTransport>, QUEUE>;

/// What went wrong, as the crate says it.
pub type DevError = drvlib::virtio_drivers::Error;

/// A received frame in its receive buffer (empty if the device reported a bad length).
pub struct Frame {
    buf: Vec<u8>,
    start: usize,
    len: usize,
}

impl Frame {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

/// The device with its receive buffers and the transmit buffers it still holds.
pub struct Nic {
    raw: Raw,
    /// Receive buffers by the token (first descriptor) they were posted under.
    rx: Vec<Option<Vec<u8>>>,
    /// Transmit buffers the device holds, by token.
    tx: Vec<Option<Vec<u8>>>,
    /// Transmit buffers the device gave back, for reuse.
    spare: Vec<Vec<u8>>,
}

impl Nic {
    /// Initialise the device (the crate resets it first) and post every receive buffer.
    pub fn new(transport: Quiet<PciTransport>) -> Result<Nic, DevError> {
        let raw = Raw::new(transport)?;
        let mut nic = Nic {
            raw,
            rx: (0..QUEUE).map(|_| None).collect(),
            tx: (0..QUEUE).map(|_| None).collect(),
            spare: Vec::new(),
        };
        for _ in 0..QUEUE {
            nic.post(vec![0; BUF])?;
        }
        Ok(nic)
    }

    pub fn mac_address(&self) -> [u8; 6] {
        self.raw.mac_address()
    }

    /// Acknowledge the device's interrupt (its ISR read).
    pub fn ack_interrupt(&mut self) {
        let _ = self.raw.ack_interrupt();
    }

    /// Post `buf` for the device to receive into.
    fn post(&mut self, mut buf: Vec<u8>) -> Result<(), DevError> {
        // SAFETY: `buf` is kept in `self.rx` under its token, untouched (moving the Vec does
        // not move its bytes), until `receive_complete` gives it back.
        let token = unsafe { self.raw.receive_begin(&mut buf)? };
        let slot = self
            .rx
            .get_mut(usize::from(token))
            .ok_or(DevError::WrongToken)?;
        *slot = Some(buf);
        Ok(())
    }

    /// The next received frame, if one is waiting (none either if the device named a
    /// buffer it was not given). Its buffer goes back with [`Nic::recycle`].
    pub fn receive(&mut self) -> Option<Frame> {
        let token = self.raw.poll_receive()?;
        let mut buf = self.rx.get_mut(usize::from(token)).and_then(Option::take)?;
        // SAFETY: `buf` is the buffer posted under `token`, given back unchanged.
        let (start, len) = match unsafe { self.raw.receive_complete(token, &mut buf) } {
            Ok((header, len)) if header + len <= buf.len() => (header, len),
            _ => (0, 0),
        };
        Some(Frame { buf, start, len })
    }

    /// Post a received frame's buffer again. A buffer that cannot be posted leaves one
    /// fewer for receiving; the queue had room for it a moment ago, so that does not happen.
    pub fn recycle(&mut self, frame: Frame) {
        let _ = self.post(frame.buf);
    }

    /// Take back the transmit buffers the device is done with.
    pub fn reclaim(&mut self) {
        while let Some(token) = self.raw.poll_transmit() {
            let Some(buf) = self.tx.get_mut(usize::from(token)).and_then(Option::take) else {
                return;
            };
            // SAFETY: `buf` is the buffer `transmit_begin` took under `token`.
            let _ = unsafe { self.raw.transmit_complete(token, &buf) };
            self.spare.push(buf);
        }
    }

    /// Hand `frame` to the device without waiting for it to be sent.
    pub fn transmit(&mut self, frame: &[u8]) -> Result<(), DevError> {
        self.reclaim();
        if !self.raw.can_send() {
            let start = ulib::sys::clock_ns().unwrap_or(0);
            while !self.raw.can_send() {
                core::hint::spin_loop();
                self.reclaim();
                if ulib::sys::clock_ns().unwrap_or(u64::MAX) - start > FULL_WAIT_NS {
                    return Err(DevError::QueueFull);
                }
            }
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.resize(BUF, 0);
        let header = self.raw.fill_buffer_header(&mut buf)?;
        let end = header + frame.len();
        let room = buf.get_mut(header..end).ok_or(DevError::InvalidParam)?;
        room.copy_from_slice(frame);
        buf.truncate(end);
        // SAFETY: `buf` is kept in `self.tx` under its token, untouched, until `reclaim`
        // hands it to `transmit_complete`.
        let token = unsafe { self.raw.transmit_begin(&buf)? };
        match self.tx.get_mut(usize::from(token)) {
            Some(slot) => *slot = Some(buf),
            None => return Err(DevError::WrongToken),
        }
        Ok(())
    }
}
