//! The IOAPIC: routes device interrupt lines to a core's vector, and the legacy 8259 PIC,
//! which is remapped out of the way and masked.
//!
//! Only the bootstrap core programs these shared devices, once, during boot.

use super::cpu::outb;
use super::paging::phys_to_virt;

const IOREGSEL: u64 = 0x00;
const IOWIN: u64 = 0x10;
const REG_VERSION: u32 = 0x01;
const REDIRECTION_BASE: u32 = 0x10;
const MASKED: u32 = 1 << 16;

/// One IOAPIC, by its physical MMIO address and first global system interrupt.
#[derive(Clone, Copy, Debug)]
pub struct IoApic {
    pub phys: u64,
    pub gsi_base: u32,
}

impl IoApic {
    fn read(&self, reg: u32) -> u32 {
        let base = phys_to_virt(self.phys);
        // SAFETY: the IOAPIC window is mapped uncached in the direct map; select then read.
        unsafe {
            core::ptr::write_volatile((base + IOREGSEL) as *mut u32, reg);
            core::ptr::read_volatile((base + IOWIN) as *const u32)
        }
    }

    fn write(&self, reg: u32, value: u32) {
        let base = phys_to_virt(self.phys);
        // SAFETY: as in `read`.
        unsafe {
            core::ptr::write_volatile((base + IOREGSEL) as *mut u32, reg);
            core::ptr::write_volatile((base + IOWIN) as *mut u32, value);
        }
    }

    /// Number of interrupt inputs.
    pub fn inputs(&self) -> u32 {
        ((self.read(REG_VERSION) >> 16) & 0xff) + 1
    }

    /// Mask every input.
    pub fn mask_all(&self) {
        for i in 0..self.inputs() {
            self.write(REDIRECTION_BASE + 2 * i, MASKED);
        }
    }

    /// Does this IOAPIC serve `gsi`?
    pub fn serves(&self, gsi: u32) -> bool {
        gsi >= self.gsi_base && gsi < self.gsi_base + self.inputs()
    }

    /// Deliver `gsi` as `vector` to the core with APIC id `dest` (fixed, physical mode).
    pub fn route(&self, gsi: u32, vector: u8, dest: u32, active_low: bool, level: bool) {
        self.route_masked(gsi, vector, dest, active_low, level, false);
    }

    /// As [`route`](Self::route), with the input masked or not.
    pub fn route_masked(
        &self,
        gsi: u32,
        vector: u8,
        dest: u32,
        active_low: bool,
        level: bool,
        masked: bool,
    ) {
        let pin = gsi - self.gsi_base;
        let mut low = u32::from(vector);
        if active_low {
            low |= 1 << 13;
        }
        if level {
            low |= 1 << 15;
        }
        if masked {
            low |= MASKED;
        }
        self.write(REDIRECTION_BASE + 2 * pin + 1, dest << 24);
        self.write(REDIRECTION_BASE + 2 * pin, low);
    }
}

/// Remap the 8259 PICs to `base..base+16` and mask every line, so they stay silent and
/// any spurious interrupt they raise is recognisable.
pub fn disable_pic(base: u8) {
    // SAFETY: the standard ICW1-ICW4 initialisation of both PICs, then a full mask; the
    // PICs are ours and unused afterwards.
    unsafe {
        outb(0x20, 0x11);
        outb(0xa0, 0x11);
        outb(0x21, base);
        outb(0xa1, base + 8);
        outb(0x21, 4);
        outb(0xa1, 2);
        outb(0x21, 1);
        outb(0xa1, 1);
        outb(0x21, 0xff);
        outb(0xa1, 0xff);
    }
}
