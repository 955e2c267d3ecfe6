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
//!
//! Programs' output (`CONSOLE_WRITE`, [`write_bytes`]) is queued, not written: each byte
//! to the UART is a port write, which under TCG takes QEMU's global lock, and with network
//! traffic running a 60-byte line held its core, interrupts off, for 0.2 to 0.9 ms
//! (`bench net-replace`'s traces: the shell's `replaced` line and `netd`'s `serving` line
//! were on the path of the datagrams waiting for the new server). The queue is written by
//! a core with nothing to run, a few bytes at a time with interrupts let in between
//! ([`write_queued`], from the idle loop), so a request that arrives meanwhile waits for
//! at most one chunk. Nothing is reordered or lost: the kernel's own lines (and the fatal
//! path) write what is queued before them, a write that does not fit writes the queue and
//! itself at once, and on a core that never idles each tick writes what has waited longer
//! than [`STALE_NS`] ([`write_if_stale`]).

#![deny(unsafe_code)]

use crate::arch::x86_64::serial;
use crate::percore::current_core;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

const UNLOCKED: usize = usize::MAX;
static LOCK_OWNER: AtomicUsize = AtomicUsize::new(UNLOCKED);

struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crlf(s.as_bytes()).for_each(serial::write_byte);
        Ok(())
    }
}

/// `bytes` as the terminal wants them: `\n` becomes `\r\n`.
fn crlf(bytes: &[u8]) -> impl Iterator<Item = u8> + '_ {
    bytes.iter().flat_map(|&b| {
        let cr = (b == b'\n').then_some(b'\r');
        cr.into_iter().chain(core::iter::once(b))
    })
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
    OUT.write_all();
    let _ = Serial.write_fmt(args);
}

/// A program's output (raw bytes: no prefix, `\n` becomes `\r\n`): queued for the idle
/// loop if it fits, else written at once behind what is queued.
pub fn write_bytes(bytes: &[u8]) {
    let _g = LineGuard::take();
    if OUT.room() >= crlf(bytes).count() {
        crlf(bytes).for_each(|b| OUT.push(b));
        return;
    }
    OUT.write_all();
    crlf(bytes).for_each(serial::write_byte);
}

/// Is program output waiting to be written?
pub fn queued() -> bool {
    OUT.len() > 0
}

/// Write at most [`CHUNK`] bytes of the queued output; whether more waits.
pub fn write_queued() -> bool {
    let _g = LineGuard::take();
    OUT.write(CHUNK);
    OUT.len() > 0
}

/// On a tick: if the oldest queued byte has waited [`STALE_NS`] (this core, or every core,
/// has not idled since), write up to [`STALE_CHUNK`] bytes.
pub fn write_if_stale(now: u64) {
    if !queued() || now.saturating_sub(OUT.since.load(Ordering::Relaxed)) < STALE_NS {
        return;
    }
    let _g = LineGuard::take();
    OUT.write(STALE_CHUNK);
}

/// The fatal-stop path, holding the console ([`seize`]): write everything queued.
pub fn write_all_seized() {
    OUT.write_all();
}

/// Write one line with the time and core prefix.
pub fn write_line(level: Option<log::Level>, args: fmt::Arguments) {
    let ns = crate::time::now_ns();
    let _g = LineGuard::take();
    OUT.write_all();
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

// ---- queued output -----------------------------------------------------------------------

/// Bytes of program output the queue holds (with `\r` added): a few screenfuls.
const OUT_CAP: usize = 16 * 1024;
/// Bytes written per turn of the idle loop: under TCG with traffic, at most about 0.2 ms.
const CHUNK: usize = 16;
/// Output older than this is written on a tick even if no core idles (two ticks).
pub const STALE_NS: u64 = 2 * crate::time::TICK_NS;
/// Bytes a tick writes then.
const STALE_CHUNK: usize = 256;

/// A ring of bytes for one producer and one consumer at a time (the indices and bytes are
/// atomics only so the type is `Sync`): console input (the serial interrupt fills it, a
/// reader on the same core empties it) and queued output (both under the console lock).
struct ByteRing<const CAP: usize> {
    buf: [AtomicU8; CAP],
    head: AtomicUsize,
    tail: AtomicUsize,
}

impl<const CAP: usize> ByteRing<CAP> {
    const fn new() -> Self {
        ByteRing {
            buf: [const { AtomicU8::new(0) }; CAP],
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
        }
    }

    fn len(&self) -> usize {
        self.head
            .load(Ordering::Acquire)
            .wrapping_sub(self.tail.load(Ordering::Acquire))
    }

    /// Add `b`; false (dropped) if the ring is full.
    fn push(&self, b: u8) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head.wrapping_sub(self.tail.load(Ordering::Acquire)) >= CAP {
            return false;
        }
        self.buf[head % CAP].store(b, Ordering::Relaxed);
        self.head.store(head.wrapping_add(1), Ordering::Release);
        true
    }

    /// The oldest byte, left in the ring until [`pop`](Self::pop).
    fn peek(&self) -> Option<u8> {
        let tail = self.tail.load(Ordering::Relaxed);
        (tail != self.head.load(Ordering::Acquire))
            .then(|| self.buf[tail % CAP].load(Ordering::Relaxed))
    }

    fn pop(&self) -> Option<u8> {
        let b = self.peek()?;
        let tail = self.tail.load(Ordering::Relaxed);
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(b)
    }
}

/// Queued program output, changed only under the console lock.
struct OutRing {
    bytes: ByteRing<OUT_CAP>,
    /// When the oldest byte now queued was queued (ns since reset).
    since: AtomicU64,
}

static OUT: OutRing = OutRing {
    bytes: ByteRing::new(),
    since: AtomicU64::new(0),
};

impl OutRing {
    fn len(&self) -> usize {
        self.bytes.len()
    }

    fn room(&self) -> usize {
        OUT_CAP - self.len()
    }

    /// Queue `b` (the caller holds the console and checked the room).
    fn push(&self, b: u8) {
        if self.len() == 0 {
            self.since.store(crate::time::now_ns(), Ordering::Relaxed);
        }
        self.bytes.push(b);
    }

    /// Write up to `n` queued bytes (the caller holds the console). Each byte leaves the
    /// queue once it is written, so a core stopped in the middle leaves none twice.
    fn write(&self, n: usize) {
        for _ in 0..n {
            let Some(b) = self.bytes.peek() else {
                return;
            };
            serial::write_byte(b);
            self.bytes.pop();
        }
        if self.len() > 0 {
            // What is left has waited since now, as far as staleness goes: a tick writes
            // its share and the next one waits its turn.
            self.since.store(crate::time::now_ns(), Ordering::Relaxed);
        }
    }

    fn write_all(&self) {
        self.write(usize::MAX);
    }
}

// ---- input -------------------------------------------------------------------------------

/// Bytes of console input held for readers: enough for a screenful typed (or pasted)
/// while the shell waits for a program.
const INPUT_CAP: usize = 4096;

/// Bytes received by interrupt and not yet read: the serial interrupt on the bootstrap
/// core fills it, a reader on the same core empties it.
static INPUT: ByteRing<INPUT_CAP> = ByteRing::new();

/// Serial interrupt: move the UART's bytes into the ring (dropping them if it is full).
pub fn on_serial_interrupt() {
    serial::drain_input(|b| {
        INPUT.push(b);
    });
}

/// Next received byte, if any.
pub fn read_byte() -> Option<u8> {
    INPUT.pop()
}
