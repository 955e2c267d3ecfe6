//! [`Quiet`]: a `virtio_drivers` transport wrapper under which some virtqueues never ask the
//! device for used-buffer interrupts.
//!
//! Why: a driver that waits for its own requests needs no interrupt for them. virtio-net's
//! `send` (the crate's) spins until the device used the transmit buffer; its interrupt then
//! arrives anyway and costs a kernel entry, a message to the driver, the driver's wake, its
//! ISR read and `DEV_IRQ_ACK`, per frame sent. The crate has no per-queue switch: its
//! `disable_interrupts` turns off every queue (a frame received meanwhile would raise no
//! interrupt), and it negotiates `VIRTIO_F_EVENT_IDX`, under which suppression needs the
//! `used_event` index the crate rewrites at each completion.
//!
//! So [`Quiet`] hides [`EVENT_IDX`] from the crate (never offered, never accepted), and when
//! the crate sets up a quiet queue ([`Transport::queue_set`], before the device is live) it
//! sets `VIRTQ_AVAIL_F_NO_INTERRUPT` in that queue's available ring (virtio 1.1, 2.6.7: the
//! ring's first 16-bit word; the driver area is the available ring). The crate writes that
//! word only from `set_dev_notify` (its `disable_interrupts`/`enable_interrupts`, which a
//! driver over [`Quiet`] does not call), so the flag stays. The flag is a hint the device
//! may ignore: an interrupt that comes anyway is served as any other. The ring's memory is
//! DMA memory `Hal::dma_alloc` gave ([`crate::dma_virt`] finds where it is mapped).

use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{PhysAddr, Result};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// `VIRTIO_F_EVENT_IDX` (virtio 1.1, 6: Reserved Feature Bits).
pub const EVENT_IDX: u64 = 1 << 29;

/// `VIRTQ_AVAIL_F_NO_INTERRUPT` (virtio 1.1, 2.7.10).
const NO_INTERRUPT: u16 = 1;

/// Transport `T` whose queues in `quiet` (bit `i`: queue `i`) ask for no interrupts, with
/// [`EVENT_IDX`] hidden. Only the feature read is masked: the trait's own `begin_init`
/// negotiates from it, so the bit is never accepted (the write is masked too, for
/// certainty).
pub struct Quiet<T: Transport> {
    inner: T,
    quiet: u32,
}

impl<T: Transport> Quiet<T> {
    /// `inner` with queues `quiet` (a bit per queue index) never interrupting.
    pub fn new(inner: T, quiet: u32) -> Self {
        Quiet { inner, quiet }
    }
}

impl<T: Transport> Transport for Quiet<T> {
    fn device_type(&self) -> DeviceType {
        self.inner.device_type()
    }

    fn read_device_features(&mut self) -> u64 {
        self.inner.read_device_features() & !EVENT_IDX
    }

    fn write_driver_features(&mut self, driver_features: u64) {
        self.inner
            .write_driver_features(driver_features & !EVENT_IDX)
    }

    fn max_queue_size(&mut self, queue: u16) -> u32 {
        self.inner.max_queue_size(queue)
    }

    fn notify(&mut self, queue: u16) {
        self.inner.notify(queue)
    }

    fn get_status(&self) -> DeviceStatus {
        self.inner.get_status()
    }

    fn set_status(&mut self, status: DeviceStatus) {
        self.inner.set_status(status)
    }

    fn set_guest_page_size(&mut self, guest_page_size: u32) {
        self.inner.set_guest_page_size(guest_page_size)
    }

    fn requires_legacy_layout(&self) -> bool {
        self.inner.requires_legacy_layout()
    }

    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        self.inner
            .queue_set(queue, size, descriptors, driver_area, device_area);
        if self.quiet & 1u32.checked_shl(u32::from(queue)).unwrap_or(0) == 0 {
            return;
        }
        // The available ring is DMA memory of ours; a queue whose ring is not (never so
        // with drvlib's Hal) just keeps interrupting.
        if let Some(at) = crate::dma_virt(driver_area, 2) {
            // SAFETY: `at` is the mapped address of the ring's first word, inside a DMA
            // allocation of this process, aligned (the ring is); the device does not use
            // the queue before the driver sets DRIVER_OK, after this.
            unsafe { core::ptr::write_volatile(at as *mut u16, NO_INTERRUPT) };
        }
    }

    fn queue_unset(&mut self, queue: u16) {
        self.inner.queue_unset(queue)
    }

    fn queue_used(&mut self, queue: u16) -> bool {
        self.inner.queue_used(queue)
    }

    fn ack_interrupt(&mut self) -> InterruptStatus {
        self.inner.ack_interrupt()
    }

    fn read_config_generation(&self) -> u32 {
        self.inner.read_config_generation()
    }

    fn read_config_space<V: FromBytes + IntoBytes>(&self, offset: usize) -> Result<V> {
        self.inner.read_config_space(offset)
    }

    fn write_config_space<V: IntoBytes + Immutable>(
        &mut self,
        offset: usize,
        value: V,
    ) -> Result<()> {
        self.inner.write_config_space(offset, value)
    }
}
