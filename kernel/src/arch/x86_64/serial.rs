//! The 16550 UART on COM1: the kernel's console.
//!
//! Output polls the transmit-holding-register-empty bit, so it works from any context
//! (early boot, fault reports). Input is interrupt driven: [`enable_receive_interrupt`] turns
//! on the UART's receive interrupt, the IOAPIC routes IRQ 4 to the bootstrap core, and
//! [`drain_input`] moves the waiting bytes out of the UART.

use super::cpu::{inb, outb};

const COM1: u16 = 0x3f8;
const DATA: u16 = COM1;
const IER: u16 = COM1 + 1;
const FCR: u16 = COM1 + 2;
const LCR: u16 = COM1 + 3;
const MCR: u16 = COM1 + 4;
const LSR: u16 = COM1 + 5;

const LSR_DATA_READY: u8 = 1 << 0;
const LSR_THR_EMPTY: u8 = 1 << 5;

/// The ISA interrupt line of COM1.
pub const IRQ: u8 = 4;

/// Program 115200 baud, 8N1, FIFOs on, receive interrupt off.
pub fn init() {
    // SAFETY: COM1 belongs to the console; this is the standard 16550 programming sequence.
    unsafe {
        outb(IER, 0x00);
        outb(LCR, 0x80); // DLAB: next two writes set the divisor
        outb(DATA, 0x01); // divisor 1 = 115200 baud
        outb(IER, 0x00);
        outb(LCR, 0x03); // 8 bits, no parity, one stop bit
        outb(FCR, 0xc7); // enable and clear FIFOs, 14-byte threshold
        outb(MCR, 0x0b); // DTR, RTS, OUT2 (OUT2 gates the IRQ line)
    }
}

/// Ask the UART to interrupt when a byte arrives.
pub fn enable_receive_interrupt() {
    // SAFETY: COM1 belongs to the console; IER bit 0 is "received data available".
    unsafe { outb(IER, 0x01) };
}

/// Send one byte, waiting for room in the transmitter.
pub fn write_byte(b: u8) {
    // SAFETY: COM1 belongs to the console; LSR is read-only status.
    unsafe {
        while inb(LSR) & LSR_THR_EMPTY == 0 {
            core::hint::spin_loop();
        }
        outb(DATA, b);
    }
}

/// Hand every byte the UART holds to `sink`; returns how many there were.
pub fn drain_input(mut sink: impl FnMut(u8)) -> usize {
    let mut n = 0;
    // SAFETY: COM1 belongs to the console; reading DATA pops the receive FIFO.
    unsafe {
        while inb(LSR) & LSR_DATA_READY != 0 {
            sink(inb(DATA));
            n += 1;
        }
    }
    n
}
