//! Several datagrams or frames in one page: what a request carries when it moves a batch
//! instead of one (issue 15's throughput: each request, page move and context switch is
//! paid once per batch, not once per datagram).
//!
//! A batch is a run of *records*, one after another from offset 0, each an 8-byte
//! [`Header`] (the payload's length, a port and an IPv4 address, little-endian) and the
//! payload, padded to a multiple of 8 bytes. The request says how many records there are
//! and how many bytes they use; a reader ([`Reader`]) checks every record against both
//! and against the page, so a forged or torn batch is refused record by record, never
//! read past its bytes.
//!
//! - Datagrams between a program and `netd` (`ulib::net`'s `OP_EXCHANGE`): `port` and
//!   `addr` are the peer's (the destination of a datagram sent, the source of one
//!   received), so a received batch sent back as it is answers every datagram in it.
//! - Frames between `netdrv` and `netd` ([`super::DRV_TX_BATCH`],
//!   [`super::UDP_FRAMES_IN`]): `port` and `addr` are 0.

/// A record's header size in bytes.
pub const HEADER: usize = 8;

/// One record's header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// The payload's length in bytes.
    pub len: u16,
    /// The peer's port (0 for a frame).
    pub port: u16,
    /// The peer's IPv4 address, network order in one word (0 for a frame).
    pub addr: u32,
}

impl Header {
    fn read(b: &[u8]) -> Header {
        Header {
            len: u16::from_le_bytes([b[0], b[1]]),
            port: u16::from_le_bytes([b[2], b[3]]),
            addr: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[..2].copy_from_slice(&self.len.to_le_bytes());
        b[2..4].copy_from_slice(&self.port.to_le_bytes());
        b[4..8].copy_from_slice(&self.addr.to_le_bytes());
    }
}

/// The bytes a record of `len` payload bytes takes.
pub const fn record_size(len: usize) -> usize {
    HEADER + len.next_multiple_of(8)
}

/// Why a batch was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The bytes said used do not fit the page.
    Used,
    /// Record number `.0` runs past the bytes used, or is longer than allowed.
    Record(usize),
    /// A record does not fit the room left (writing).
    Full,
}

/// Reads the `count` records in the first `used` bytes of a page, each at most `max` bytes
/// long. Yields `Err` once, at the first bad record, and nothing after it.
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    index: usize,
    count: usize,
    max: usize,
    failed: bool,
}

impl<'a> Reader<'a> {
    /// `Err(Bad::Used)` if `used` is more than the page.
    pub fn new(page: &'a [u8], count: usize, used: usize, max: usize) -> Result<Self, Bad> {
        let buf = page.get(..used).ok_or(Bad::Used)?;
        Ok(Reader {
            buf,
            at: 0,
            index: 0,
            count,
            max,
            failed: false,
        })
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<(Header, &'a [u8]), Bad>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index >= self.count {
            return None;
        }
        let i = self.index;
        let bad = || Some(Err(Bad::Record(i)));
        let Some(h) = self.buf.get(self.at..self.at + HEADER).map(Header::read) else {
            self.failed = true;
            return bad();
        };
        let len = usize::from(h.len);
        let start = self.at + HEADER;
        let Some(data) = self.buf.get(start..start + len).filter(|_| len <= self.max) else {
            self.failed = true;
            return bad();
        };
        // The padding may be cut off after the last record only.
        self.at = (self.at + record_size(len)).min(self.buf.len());
        self.index += 1;
        Some(Ok((h, data)))
    }
}

/// Writes records into a page from offset 0.
pub struct Writer<'a> {
    buf: &'a mut [u8],
    used: usize,
    count: usize,
}

impl<'a> Writer<'a> {
    pub fn new(page: &'a mut [u8]) -> Self {
        Writer {
            buf: page,
            used: 0,
            count: 0,
        }
    }

    /// Append a record with `data` as its payload.
    pub fn push(&mut self, port: u16, addr: u32, data: &[u8]) -> Result<(), Bad> {
        let room = self.room(data.len()).ok_or(Bad::Full)?;
        room[..data.len()].copy_from_slice(data);
        self.commit(data.len(), port, addr);
        Ok(())
    }

    /// Room for a payload of up to `len` bytes after the last record, or `None` if a
    /// record that long does not fit; [`Writer::commit`] then appends it.
    pub fn room(&mut self, len: usize) -> Option<&mut [u8]> {
        let start = self.used + HEADER;
        if u16::try_from(len).is_err() || self.used + record_size(len) > self.buf.len() {
            return None;
        }
        Some(&mut self.buf[start..start + len])
    }

    /// Append the record whose `len` payload bytes were written into [`Writer::room`].
    /// Panics if it does not fit (ask [`Writer::room`] first).
    pub fn commit(&mut self, len: usize, port: u16, addr: u32) {
        assert!(self.used + record_size(len) <= self.buf.len());
        let h = Header {
            len: len as u16,
            port,
            addr,
        };
        h.write(&mut self.buf[self.used..self.used + HEADER]);
        self.used += record_size(len);
        self.count += 1;
    }

    /// Records written.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes they use (padding included).
    pub fn used(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_written_read_back_in_order() {
        let mut page = [0u8; 256];
        let mut w = Writer::new(&mut page);
        w.push(7, 0x0a00_020f, b"hello").unwrap();
        w.push(9, 1, &[]).unwrap();
        w.push(65535, u32::MAX, &[0xab; 17]).unwrap();
        let (count, used) = (w.count(), w.used());
        assert_eq!((count, used), (3, 16 + 8 + 32));
        let got: Vec<_> = Reader::new(&page, count, used, 64)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            got[0].0,
            Header {
                len: 5,
                port: 7,
                addr: 0x0a00_020f
            }
        );
        assert_eq!(got[0].1, b"hello");
        assert_eq!(got[1].1.len(), 0);
        assert_eq!(
            (got[2].0.port, got[2].0.addr, got[2].1),
            (65535, u32::MAX, &[0xab; 17][..])
        );
    }

    #[test]
    fn a_writer_refuses_what_does_not_fit() {
        let mut page = [0u8; 40];
        let mut w = Writer::new(&mut page);
        w.push(1, 1, &[1; 16]).unwrap(); // 24 bytes
        assert_eq!(w.push(1, 1, &[1; 9]), Err(Bad::Full)); // 8 + 16 > 16 left
        w.push(1, 1, &[1; 8]).unwrap(); // exactly fills it
        assert_eq!(w.push(1, 1, &[]), Err(Bad::Full));
        assert_eq!((w.count(), w.used()), (2, 40));
        assert!(Writer::new(&mut [0u8; 1 << 17]).room(1 << 16).is_none());
    }

    #[test]
    fn bad_batches_are_refused_at_the_first_bad_record() {
        let mut page = [0u8; 64];
        let mut w = Writer::new(&mut page);
        w.push(1, 1, &[1; 8]).unwrap();
        w.push(2, 2, &[2; 20]).unwrap();
        let used = w.used();
        // More bytes said used than the page has.
        assert_eq!(Reader::new(&page, 2, 65, 64).err(), Some(Bad::Used));
        // More records said than there are: the third runs past the bytes used.
        let r: Vec<_> = Reader::new(&page, 5, used, 64).unwrap().collect();
        assert_eq!(r.len(), 3);
        assert_eq!(r[2], Err(Bad::Record(2)));
        // A record longer than allowed.
        let r: Vec<_> = Reader::new(&page, 2, used, 10).unwrap().collect();
        assert_eq!(r[1], Err(Bad::Record(1)));
        // A length running past the bytes used (a torn batch).
        page[16..18].copy_from_slice(&200u16.to_le_bytes());
        let r: Vec<_> = Reader::new(&page, 2, used, 1500).unwrap().collect();
        assert_eq!((r.len(), r[1]), (2, Err(Bad::Record(1))));
        // Fewer records than written: only those are read.
        assert_eq!(Reader::new(&page, 1, used, 64).unwrap().count(), 1);
        // Nothing at all.
        assert_eq!(Reader::new(&page, 0, 0, 64).unwrap().count(), 0);
        assert_eq!(
            Reader::new(&page, 1, 0, 64).unwrap().next(),
            Some(Err(Bad::Record(0)))
        );
    }

    #[test]
    fn the_last_records_padding_may_be_cut() {
        let mut page = [0u8; 64];
        let mut w = Writer::new(&mut page);
        w.push(1, 1, &[3; 5]).unwrap();
        let r: Vec<_> = Reader::new(&page, 1, HEADER + 5, 64).unwrap().collect();
        assert_eq!(r[0].unwrap().1, &[3; 5]);
    }
}
