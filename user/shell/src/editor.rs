//! Line editing on a raw console: the kernel does not echo, so the shell does.
//!
//! Bytes come from `CONSOLE_READ` in batches; the echo for a batch goes out in one write.
//! Bytes that follow an Enter in the same batch are kept for the next line, so a script
//! piped in as a whole works the same as typing.

use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::Error;
use ulib::io::Console;
use ulib::sys;

/// Longest line; further characters are refused with a bell.
const MAX_LINE: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Start,
    /// Inside `ESC [ ...` until its final byte.
    Csi,
    /// After `ESC O`: one more byte.
    Ss3,
}

pub struct Editor {
    input: Vec<u8>,
    at: usize,
    escape: Escape,
    /// The last byte was `\r`, so a `\n` right after it is the same Enter.
    after_cr: bool,
}

impl Editor {
    pub fn new() -> Self {
        Editor {
            input: Vec::new(),
            at: 0,
            escape: Escape::None,
            after_cr: false,
        }
    }

    /// Bytes typed before the prompt (while a program ran): read before the console.
    pub fn type_ahead(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.input.drain(..self.at);
        self.at = 0;
        self.input.extend_from_slice(bytes);
    }

    /// Bytes read from the console but not used yet (typed after the line just returned):
    /// the shell looks through them for Ctrl-C while a program runs, then gives them back
    /// with [`Editor::type_ahead`].
    pub fn take_unread(&mut self) -> Vec<u8> {
        let rest = self.input.split_off(self.at.min(self.input.len()));
        self.input.clear();
        self.at = 0;
        rest
    }

    fn next_byte(&mut self, echo: &mut Console) -> Result<u8, Error> {
        if self.at == self.input.len() {
            echo.flush();
            self.input.resize(64, 0);
            let n = loop {
                match sys::read(&mut self.input) {
                    Ok(0) => continue,
                    Ok(n) => break n,
                    Err(e) => return Err(e),
                }
            };
            self.input.truncate(n);
            self.at = 0;
        }
        self.at += 1;
        Ok(self.input[self.at - 1])
    }

    /// Read and echo one line; returns it without the line end.
    pub fn read_line(&mut self) -> Result<String, Error> {
        let mut line = String::new();
        let mut echo = Console::new();
        loop {
            let b = self.next_byte(&mut echo)?;
            let after_cr = core::mem::replace(&mut self.after_cr, b == b'\r');
            match self.escape {
                Escape::None => {}
                Escape::Start => {
                    self.escape = match b {
                        b'[' => Escape::Csi,
                        b'O' => Escape::Ss3,
                        _ => Escape::None,
                    };
                    continue;
                }
                Escape::Csi => {
                    if (0x40..=0x7e).contains(&b) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::Ss3 => {
                    self.escape = Escape::None;
                    continue;
                }
            }
            match b {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    echo.write_bytes(b"\n");
                    return Ok(line);
                }
                0x1b => self.escape = Escape::Start,
                // Backspace and DEL.
                0x08 | 0x7f if !line.is_empty() => {
                    line.pop();
                    echo.write_bytes(b"\x08 \x08");
                }
                // Ctrl-U: clear the line.
                0x15 => erase(&mut line, &mut echo, 0),
                // Ctrl-W: erase the last word.
                0x17 => {
                    let keep = line.trim_end().rfind(' ').map_or(0, |i| i + 1);
                    erase(&mut line, &mut echo, keep);
                }
                // Ctrl-C: abandon the line.
                0x03 => {
                    echo.write_bytes(b"^C\n");
                    return Ok(String::new());
                }
                b' '..=b'~' if line.len() < MAX_LINE => {
                    line.push(b as char);
                    echo.write_bytes(&[b]);
                }
                b' '..=b'~' => echo.write_bytes(b"\x07"),
                _ => {}
            }
        }
    }
}

/// Erase `line` back to `keep` bytes, on screen too.
fn erase(line: &mut String, echo: &mut Console, keep: usize) {
    for _ in keep..line.len() {
        echo.write_bytes(b"\x08 \x08");
    }
    line.truncate(keep);
}
