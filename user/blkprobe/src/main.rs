//! `blkprobe`: proves that `blkdrv` moves real sectors and refuses bad requests (issue 16).
//! Through `blk` (found by function id) it asks `BLK_INFO`, reads sector 0 of the FAT image
//! xtask attached (the boot signature 55 aa must be there), writes a pattern to the disk's
//! last sector and reads it back, writes one with its ICA lent read-only (it comes back
//! writable) and has a read into a lent ICA refused, and checks that a request without its
//! ICA, of 0 or too many sectors, or beyond the disk's end is answered with the documented
//! error and the ICA back. Prints `blkprobe: ok`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use ulib::abi::blk::{self, BLK_INFO, BLK_READ, BLK_WRITE, MAX_SECTORS, SECTOR};
use ulib::abi::ipc::{Msg, MSG_ICA_READ_ONLY};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::Error;
use ulib::{fnid, ipc, println, res};

ulib::main!(main);

const AT: u64 = 0x0000_5300_0000_0000;

fn main(_args: &[&str]) -> i32 {
    match run() {
        Ok(()) => {
            println!("blkprobe: ok");
            0
        }
        Err(e) => {
            println!("blkprobe: FAIL {e}");
            1
        }
    }
}

/// The data ICA: where it is mapped now (it moves with every call), and whether it came
/// back read-only.
struct Ica {
    region: ResId,
    at: u64,
    back_read_only: bool,
}

impl Ica {
    /// One request with the ICA; it comes back (also on an error) at a new address.
    fn call(&mut self, drv: ResId, label: u64, first: u64, count: u64) -> Result<u64, String> {
        let msg = ipc::with_ica(
            Msg {
                label,
                words: [first, count, 0, 0, 0, 0],
            },
            self.region,
        );
        let (value, reply) = ipc::call(drv, &msg).map_err(|e| format!("call {label}: {e}"))?;
        self.at = ipc::ica_at(&reply)
            .map(|(_, a)| a)
            .ok_or(format!("request {label}: the reply came without the ICA"))?;
        self.back_read_only = ipc::ica_read_only(&reply);
        Ok(value)
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the region is attached writable at `self.at`, BLK_ICA_SIZE bytes, and
        // only this program maps it while it is here.
        unsafe { core::slice::from_raw_parts_mut(self.at as *mut u8, blk::BLK_ICA_SIZE as usize) }
    }
}

fn run() -> Result<(), String> {
    let drv = fnid::wait(blk::FN_BLK, 10_000_000_000)
        .map(|f| ResId(f.0))
        .map_err(|_| "blk never registered")?;
    let info = |drv| -> Result<[u64; 6], String> {
        let m = Msg {
            label: BLK_INFO,
            ..Msg::default()
        };
        let (v, reply) = ipc::call(drv, &m).map_err(|e| format!("BLK_INFO: {e}"))?;
        if v != 0 {
            return Err(format!("BLK_INFO: {}", Error::from_code(v)));
        }
        Ok(reply.words)
    };
    let w = info(drv)?;
    let sectors = w[0];
    if sectors < 64 || w[1] != SECTOR as u64 {
        return Err(format!("BLK_INFO: {sectors} sectors of {} bytes", w[1]));
    }
    println!("blkprobe: blk has {sectors} sectors");
    let region = res::open_vregion(
        "here/vregion/blkprobe",
        blk::BLK_ICA_SIZE,
        Rights::OWNER_ALL,
    )
    .map_err(|e| format!("vregion: {e}"))?;
    res::attach_here(region, AT, true).map_err(|e| format!("attach: {e}"))?;
    let mut ica = Ica {
        region,
        at: AT,
        back_read_only: false,
    };
    let r = probe(drv, sectors, &mut ica);
    let _ = res::detach_here(ica.at);
    let _ = res::close(region);
    r?;
    let after = info(drv)?;
    if after[4] == w[4] {
        return Err("no interrupt reached blkdrv while it served the reads and writes".into());
    }
    Ok(())
}

fn probe(drv: ResId, sectors: u64, ica: &mut Ica) -> Result<(), String> {
    let expect = |what: &str, got: u64, want: Error| -> Result<(), String> {
        if got == want as u64 {
            Ok(())
        } else {
            Err(format!("{what}: {} (want {want})", Error::from_code(got)))
        }
    };
    // Sector 0 of a FAT image: the boot signature.
    ica.bytes().fill(0);
    let v = ica.call(drv, BLK_READ, 0, 1)?;
    if v != 0 {
        return Err(format!("read sector 0: {}", Error::from_code(v)));
    }
    if ica.bytes()[510..512] != [0x55, 0xaa] {
        return Err(format!(
            "sector 0 ends with {:02x?}, not the boot signature 55 aa",
            &ica.bytes()[510..512]
        ));
    }
    // A pattern to the last sectors and back.
    let first = sectors - 2;
    for (i, b) in ica.bytes()[..2 * SECTOR].iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    let v = ica.call(drv, BLK_WRITE, first, 2)?;
    if v != 0 {
        return Err(format!("write: {}", Error::from_code(v)));
    }
    ica.bytes().fill(0);
    let v = ica.call(drv, BLK_READ, first, 2)?;
    if v != 0 {
        return Err(format!("read back: {}", Error::from_code(v)));
    }
    if let Some(i) = ica.bytes()[..2 * SECTOR]
        .iter()
        .enumerate()
        .position(|(i, b)| *b != (i * 7 + 3) as u8)
    {
        return Err(format!("read back differs at byte {i}"));
    }
    // Lent read-only (`MSG_ICA_READ_ONLY`): a write only reads it, and it comes back
    // writable; a read would write into it: refused, and blk serves on.
    for (i, b) in ica.bytes()[..SECTOR].iter_mut().enumerate() {
        *b = (i * 5 + 1) as u8;
    }
    let v = ica.call(drv, BLK_WRITE | MSG_ICA_READ_ONLY, first, 1)?;
    if v != 0 || ica.back_read_only {
        return Err(format!(
            "a write with a lent ICA: {} (back read-only: {})",
            Error::from_code(v),
            ica.back_read_only
        ));
    }
    expect(
        "a read into a lent ICA",
        ica.call(drv, BLK_READ | MSG_ICA_READ_ONLY, first, 1)?,
        Error::InvalidArgument,
    )?;
    ica.bytes().fill(0);
    let v = ica.call(drv, BLK_READ, first, 1)?;
    if v != 0 || (0..SECTOR).any(|i| ica.bytes()[i] != (i * 5 + 1) as u8) {
        return Err(format!(
            "reading back the lent write: {}",
            Error::from_code(v)
        ));
    }
    // Bad requests: clear errors, the ICA back, nothing at the device.
    expect(
        "0 sectors",
        ica.call(drv, BLK_READ, 0, 0)?,
        Error::InvalidArgument,
    )?;
    expect(
        "too many sectors",
        ica.call(drv, BLK_READ, 0, MAX_SECTORS + 1)?,
        Error::InvalidArgument,
    )?;
    expect(
        "past the end",
        ica.call(drv, BLK_READ, sectors, 1)?,
        Error::TooLong,
    )?;
    expect(
        "across the end",
        ica.call(drv, BLK_WRITE, sectors - 1, 2)?,
        Error::TooLong,
    )?;
    expect(
        "huge sector",
        ica.call(drv, BLK_READ, u64::MAX, 1)?,
        Error::TooLong,
    )?;
    let (v, _) = ipc::call(
        drv,
        &Msg {
            label: BLK_READ,
            words: [0, 1, 0, 0, 0, 0],
        },
    )
    .map_err(|e| format!("read without ICA: {e}"))?;
    expect("read without an ICA", v, Error::InvalidArgument)?;
    Ok(())
}
