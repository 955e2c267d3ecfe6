//! The kernel console: `kprint!`/`kprintln!`, the `log` facade, and serial input.
//!
//! Every line says when and on which core it was written: `[   0.012345 c1] text`. The
//! console is one device shared by all cores, so a line is written under a small lock (the
//! only cross-core lock in the per-core kernel, and it guards a device, not kernel state). A
//! core that faults while it holds the lock may write through it, and the fatal-stop path
//! takes it over from cores it has stopped, so a report is never lost to a dead lock holder.
//!
//! Input arrives by interrupt on the bootstrap core ([`on_serial_interrupt`]) into a small
//! ring that [`read_byte`] empties.

#![deny(unsafe_code)]

use crate::arch::x86_64::serial;
use crate::percore::current_core;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

const UNLOCKED: usize = usize::MAX;
static LOCK_OWNER: AtomicUsize = AtomicUsize::new(UNLOCKED);

struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                serial::write_byte(b'\r');
            }
            serial::write_byte(b);
        }
        Ok(())
    }
}

/// Hold the console for one line. Re-entry on the same core passes through.
struct LineGuard {
    took: bool,
}

impl LineGuard {
    fn take() -> Self {
        let me = current_core();
        if LOCK_OWNER.load(Ordering::Relaxed) == me {
            return LineGuard { took: false };
        }
        while LOCK_OWNER
            .compare_exchange_weak(UNLOCKED, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        LineGuard { took: true }
    }
}

impl Drop for LineGuard {
    fn drop(&mut self) {
        if self.took {
            LOCK_OWNER.store(UNLOCKED, Ordering::Release);
        }
    }
}

/// Take the console from whichever core holds it. Only for the fatal-stop path, after
/// every other core has been stopped.
pub fn seize() {
    LOCK_OWNER.store(current_core(), Ordering::Release);
}

/// Write formatted text with no line prefix (used by `kprint!`).
pub fn write_fmt(args: fmt::Arguments) {
    let _g = LineGuard::take();
    let _ = Serial.write_fmt(args);
}

/// Write raw bytes (a program's output): no prefix, `\n` becomes `\r\n`.
pub fn write_bytes(bytes: &[u8]) {
    let _g = LineGuard::take();
    for &b in bytes {
        if b == b'\n' {
            serial::write_byte(b'\r');
        }
        serial::write_byte(b);
    }
}

/// Write one line with the time and core prefix.
pub fn write_line(level: Option<log::Level>, args: fmt::Arguments) {
    let ns = crate::time::now_ns();
    let _g = LineGuard::take();
    let (s, us) = (ns / 1_000_000_000, (ns / 1_000) % 1_000_000);
    let _ = write!(Serial, "[{s:4}.{us:06} c{}] ", current_core());
    match level {
        Some(log::Level::Error) => {
            let _ = Serial.write_str("ERROR ");
        }
        Some(log::Level::Warn) => {
            let _ = Serial.write_str("WARN ");
        }
        Some(log::Level::Debug) => {
            let _ = Serial.write_str("debug ");
        }
        _ => {}
    }
    let _ = Serial.write_fmt(args);
    let _ = Serial.write_str("\n");
}

/// `print!` for the kernel: raw text, no prefix.
#[macro_export]
macro_rules! kprint {
    ($($arg:tt)*) => { $crate::console::write_fmt(format_args!($($arg)*)) };
}

/// `println!` for the kernel: one line with the time and core prefix.
#[macro_export]
macro_rules! kprintln {
    ($($arg:tt)*) => { $crate::console::write_line(None, format_args!($($arg)*)) };
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::max_level()
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            write_line(Some(record.level()), *record.args());
        }
    }
    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Bring up the UART and the `log` facade.
pub fn init(level: log::LevelFilter) {
    serial::init();
    // set_logger fails only if called twice; the second call changes nothing.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

// ---- input -------------------------------------------------------------------------------

/// Bytes of console input held for readers: enough for a screenful typed (or pasted)
/// while the shell waits for a program.
const INPUT_CAP: usize = 4096;

/// Bytes received by interrupt and not yet read. Single producer (the serial interrupt on
/// the bootstrap core) and single consumer (a reader on the same core): the indices are
/// atomics only so the type is `Sync`.
struct InputRing {
    buf: [AtomicU8; INPUT_CAP],
    head: AtomicUsize,
    tail: AtomicUsize,
}

static INPUT: InputRing = InputRing {
    buf: [const { AtomicU8::new(0) }; INPUT_CAP],
    head: AtomicUsize::new(0),
    tail: AtomicUsize::new(0),
};

/// Serial interrupt: move the UART's bytes into the ring (dropping them if it is full).
pub fn on_serial_interrupt() {
    serial::drain_input(|b| {
        let head = INPUT.head.load(Ordering::Relaxed);
        let tail = INPUT.tail.load(Ordering::Acquire);
        if head.wrapping_sub(tail) < INPUT_CAP {
            INPUT.buf[head % INPUT_CAP].store(b, Ordering::Relaxed);
            INPUT.head.store(head.wrapping_add(1), Ordering::Release);
        }
    });
}

/// Next received byte, if any.
pub fn read_byte() -> Option<u8> {
    let tail = INPUT.tail.load(Ordering::Relaxed);
    if tail == INPUT.head.load(Ordering::Acquire) {
        return None;
    }
    let b = INPUT.buf[tail % INPUT_CAP].load(Ordering::Relaxed);
    INPUT.tail.store(tail.wrapping_add(1), Ordering::Release);
    Some(b)
}
