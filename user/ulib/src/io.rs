//! Output: [`print!`](crate::print) and [`println!`](crate::println) to the standard output
//! (the console unless a parent gave a pipe: [`stdio`](crate::stdio)), and
//! [`eprintln!`](crate::eprintln) always to the console (errors, the panic handler).
//!
//! Text is formatted into a buffer on the stack and written with as few `CONSOLE_WRITE`
//! calls as possible (one per `print!` of up to [`BUF`] bytes), so a line is not split
//! between processes sharing the console and printing never allocates (the panic handler
//! relies on that).

use core::fmt;

/// Bytes formatted before a write is issued.
pub const BUF: usize = 512;

/// Most bytes passed to one `CONSOLE_WRITE` (well under the kernel's limit per call).
const MAX_WRITE: usize = 16 * 1024;

/// Write all of `bytes` to the standard output. Errors are ignored: a program has nowhere
/// else to report them (a pipe with no reader left ends the program: `stdio::write`).
pub fn write_all(bytes: &[u8]) {
    write_all_to(bytes, false);
}

/// Write all of `bytes` to the standard output, or to the console if `console`.
fn write_all_to(mut bytes: &[u8], console: bool) {
    while !bytes.is_empty() {
        let chunk = &bytes[..bytes.len().min(MAX_WRITE)];
        let r = match console {
            true => crate::sys::write(chunk),
            false => crate::stdio::write(chunk),
        };
        match r {
            Ok(0) | Err(_) => return,
            Ok(n) => bytes = &bytes[n.min(bytes.len())..],
        }
    }
}

/// A `fmt::Write` to the console that buffers up to [`BUF`] bytes; flushed on drop.
pub struct Console {
    buf: [u8; BUF],
    len: usize,
    console: bool,
}

impl Console {
    /// A writer to the standard output.
    pub const fn new() -> Self {
        Console {
            buf: [0; BUF],
            len: 0,
            console: false,
        }
    }

    /// A writer to the console, whatever the standard output is.
    pub const fn to_console() -> Self {
        Console {
            buf: [0; BUF],
            len: 0,
            console: true,
        }
    }

    /// Write what is buffered.
    pub fn flush(&mut self) {
        write_all_to(&self.buf[..self.len], self.console);
        self.len = 0;
    }

    /// Add raw bytes.
    pub fn write_bytes(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.len == BUF {
                self.flush();
            }
            let n = (BUF - self.len).min(bytes.len());
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
        }
    }
}

impl Default for Console {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        self.flush();
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let mut c = Console::new();
    let _ = fmt::Write::write_fmt(&mut c, args);
}

#[doc(hidden)]
pub fn _eprint(args: fmt::Arguments) {
    let mut c = Console::to_console();
    let _ = fmt::Write::write_fmt(&mut c, args);
}

/// Print to the console (not the standard output), with a newline.
#[macro_export]
macro_rules! eprintln {
    ($($arg:tt)*) => { $crate::io::_eprint(format_args!("{}\n", format_args!($($arg)*))) };
}

/// Print to the standard output.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::io::_print(format_args!($($arg)*)) };
}

/// Print to the standard output, with a newline.
#[macro_export]
macro_rules! println {
    () => { $crate::io::_print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::io::_print(format_args!("{}\n", format_args!($($arg)*))) };
}
