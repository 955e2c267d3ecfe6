//! `mfcheck pipe M`: resources of another machine used from here (`abi::mach::OP_RES`,
//! `ulib::mach::res_*`), a pipe between two machines among them.
//!
//! - A pipe opened on machine M, its writing end held here (by M's `machd` for this
//!   program), read on M by `mfcheck pread` (spawned there, holding the reading end
//!   itself): [`BYTES`] bytes written from here in pieces (`Again` while the pipe is
//!   full), then the end dropped; the reader must get every byte in order, then EOF.
//! - A second pipe with both ends held from here: a read of it empty is `Again`, not a
//!   wait; the bytes, the record (`ResInfo`: bytes buffered, ends held), EOF once the
//!   writing end is dropped, a drop of an end not held, and `StaleResource` once closed.
//! - A semaphore: `SEM_P` at 0 is `Again`, after a `SEM_V` it takes the unit.
//! - Rights, checked by M's kernel: a vregion opened owner-only is read back by its user and
//!   refused (`Denied`) to user 2000.
//! - Refusals: an earlier life of M (`StaleResource`), this machine or none, too many
//!   bytes, a name too long, a forged id, an endpoint opened there, a hold for that
//!   `machd` itself.
//! - A program here that ends holding an end there (`mfcheck phold`): M's `machd` lets it
//!   go, as the user it held it for (2000, whose owner-only pipe it is), so a read of the
//!   pipe there reaches EOF.
//!
//! `mfcheck pread NAME` (on M): opens pipe NAME there, holds its reading end, reads to EOF
//! and exits 0 only if it read the [`BYTES`] bytes [`pattern`] makes. `mfcheck phold M ID
//! EPOCH`: holds the writing end of pipe ID of machine M (life EPOCH) and ends.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::mach;
use ulib::abi::net::{DRV_TX, FN_DRV, UDP_FRAME_IN};
use ulib::abi::res::{ResId, Rights, UserId};
use ulib::abi::syscall::control::{
    PIPE_DROP, PIPE_HOLD, PIPE_READ_END, PIPE_WRITE_END, SEM_P, SEM_V,
};
use ulib::abi::{Error, Priority};
use ulib::mach::{self as m_, RemoteRes};
use ulib::{println, res, sys};

/// Bytes sent through the pipe between the machines.
pub const BYTES: usize = 20_000;
/// The pipe `pread` reads (its name fits a remote spawn's 32 bytes beside the words).
const PIPE: &str = "c0/pipe/mfp";

/// Byte `i` of what goes through the pipe.
pub fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// `e` as a message about `what`.
fn e<T>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|err| format!("{what}: {err}"))
}

/// `mfcheck pipe M`.
pub fn pipe(m: u8) -> Result<String, String> {
    across(m)?;
    both_ends(m)?;
    semaphore(m)?;
    rights(m)?;
    refusals(m)?;
    ended_holder(m)?;
    Ok(format!(
        ", {BYTES} bytes through a pipe of machine {m} in order, EOF; Again, not a wait; \
         rights; refusals; an ended holder let go"
    ))
}

/// The pipe between the machines: written here, read there.
fn across(m: u8) -> Result<(), String> {
    let p = e(
        m_::res_open(m, PIPE, &[], Rights::OWNER_ALL),
        "open the pipe",
    )?;
    let r = (|| {
        e(
            m_::res_control(&p, PIPE_HOLD, PIPE_WRITE_END, 0),
            "hold the writing end",
        )?;
        let reader = e(
            m_::spawn(m, mach::ANY_CORE, &["mfcheck", "pread", PIPE]),
            "spawn pread",
        )?;
        // Written only once the reader holds its end (before, a write is `Gone`).
        let mut looks = 0;
        while e(m_::res_info(&p), "info")?.detail >> 32 == 0 {
            looks += 1;
            if looks > crate::POLLS {
                return Err(String::from("pread never held the reading end"));
            }
            let _ = sys::sleep_ns(crate::POLL_NS / 10);
        }
        let bytes: Vec<u8> = (0..BYTES).map(pattern).collect();
        let (mut sent, mut full) = (0, 0u32);
        while sent < BYTES {
            let end = (sent + mach::RES_REMOTE_MAX).min(BYTES);
            match m_::res_write(&p, &bytes[sent..end], 0) {
                Ok(n) => sent += n,
                Err(Error::Again) if full < 100 * crate::POLLS => {
                    full += 1;
                    let _ = sys::sleep_ns(2_000_000);
                }
                Err(err) => return Err(format!("write at byte {sent}: {err}")),
            }
        }
        e(
            m_::res_control(&p, PIPE_DROP, PIPE_WRITE_END, 0),
            "drop the writing end",
        )?;
        let st = e(m_::wait(&reader), "wait for pread")?;
        if st.how != ulib::abi::ENDED_EXIT || st.code != 0 {
            return Err(format!("pread ended {st:?}"));
        }
        Ok(())
    })();
    let _ = m_::res_close(&p);
    r
}

/// Read `len` bytes of `p` there: `Ok(bytes)`, or the error.
fn read(p: &RemoteRes, len: usize) -> Result<Vec<u8>, Error> {
    let mut buf = alloc::vec![0u8; len];
    let n = m_::res_read(p, &mut buf, 0)?;
    buf.truncate(n);
    Ok(buf)
}

/// A pipe of machine M with both ends held from here.
fn both_ends(m: u8) -> Result<(), String> {
    let p = e(
        m_::res_open(m, "c0/pipe/mfq", &64u64.to_le_bytes(), Rights::OWNER_ALL),
        "open",
    )?;
    let r = (|| {
        for end in [PIPE_READ_END, PIPE_WRITE_END] {
            e(m_::res_control(&p, PIPE_HOLD, end, 0), "hold")?;
        }
        let checks: [(&str, bool); 5] = [
            ("an empty pipe read", read(&p, 10) == Err(Error::Again)),
            ("a write", m_::res_write(&p, b"abc", 0) == Ok(3)),
            (
                "its record",
                m_::res_info(&p).is_ok_and(|i| i.size == 3 && i.detail == (1 << 32) | 1),
            ),
            ("the bytes", read(&p, 10).as_deref() == Ok(&b"abc"[..])),
            (
                "a read arg",
                m_::res_read(&p, &mut [0; 4], 5) == Err(Error::InvalidArgument),
            ),
        ];
        if let Some((what, _)) = checks.iter().find(|(_, ok)| !ok) {
            return Err(format!("pipe with both ends here: {what} went wrong"));
        }
        e(m_::res_control(&p, PIPE_DROP, PIPE_WRITE_END, 0), "drop")?;
        let eof = read(&p, 10);
        let again = m_::res_control(&p, PIPE_DROP, PIPE_WRITE_END, 0);
        if eof != Ok(Vec::new()) || again != Err(Error::NoSuchProcess) {
            return Err(format!(
                "after the drop: read {eof:?}, a second drop {again:?}"
            ));
        }
        e(m_::res_close(&p), "close")?;
        let closed = read(&p, 10);
        if closed != Err(Error::StaleResource) {
            return Err(format!("read after close: {closed:?}"));
        }
        Ok(())
    })();
    let _ = m_::res_close(&p);
    r
}

/// A semaphore of machine M: never waited for there.
fn semaphore(m: u8) -> Result<(), String> {
    let s = e(
        m_::res_open(m, "c0/sem/mfs", &0u64.to_le_bytes(), Rights::OWNER_ALL),
        "open sem",
    )?;
    let p0 = m_::res_control(&s, SEM_P, 0, 0);
    let v = m_::res_control(&s, SEM_V, 0, 0);
    let p1 = m_::res_control(&s, SEM_P, 0, 0);
    let _ = m_::res_close(&s);
    if p0 != Err(Error::Again) || v.is_err() || p1 != Ok(0) {
        return Err(format!("semaphore: P at 0 {p0:?}, V {v:?}, P {p1:?}"));
    }
    Ok(())
}

/// Rights are checked by M's kernel, for the user the request came from.
fn rights(m: u8) -> Result<(), String> {
    let v = e(
        m_::res_open(
            m,
            "c0/vregion/mfv",
            &4096u64.to_le_bytes(),
            Rights::OWNER_ALL,
        ),
        "open vregion",
    )?;
    let r = (|| {
        e(m_::res_write(&v, b"hi", 0), "write")?;
        let back = read(&v, 2);
        let me = e(res::getuser(), "getuser")?;
        e(res::setuser(UserId(2000)), "setuser")?;
        let other = read(&v, 2);
        let close = m_::res_close(&v);
        e(res::setuser(me), "setuser back")?;
        if back.as_deref() != Ok(&b"hi"[..])
            || other != Err(Error::Denied)
            || close != Err(Error::Denied)
        {
            return Err(format!(
                "rights: read back {back:?}; as user 2000 read {other:?}, close {close:?}"
            ));
        }
        Ok(())
    })();
    let _ = m_::res_close(&v);
    r
}

/// Requests refused.
fn refusals(m: u8) -> Result<(), String> {
    let p = e(
        m_::res_open(m, "c0/pipe/mfz", &[], Rights::OWNER_ALL),
        "open",
    )?;
    let stale = RemoteRes {
        epoch: p.epoch.wrapping_add(1),
        ..p
    };
    let me = crate::calls::me_machine()?;
    let machd = crate::own::machd_pid(m)?.0;
    let cases = [
        (
            "an earlier life",
            m_::res_info(&stale).err(),
            Error::StaleResource,
        ),
        (
            "an endpoint opened there (it would be machd's own)",
            m_::res_open(m, "c0/endpoint/mfx", b"", Rights::OWNER_ALL).err(),
            Error::NotSupported,
        ),
        (
            "a hold for machd itself",
            m_::res_control(&p, PIPE_HOLD, PIPE_READ_END, machd).err(),
            Error::Denied,
        ),
        (
            "this machine",
            m_::res_info(&RemoteRes { machine: me, ..p }).err(),
            Error::InvalidArgument,
        ),
        (
            "no machine",
            m_::res_info(&RemoteRes { machine: 9, ..p }).err(),
            Error::InvalidArgument,
        ),
        (
            "too many bytes",
            m_::res_write(&p, &[0; mach::RES_REMOTE_MAX + 1], 0).err(),
            Error::TooLong,
        ),
        (
            "a name too long",
            m_::res_open(m, &"x".repeat(65), &[], Rights::OWNER_ALL).err(),
            Error::TooLong,
        ),
    ];
    let forged = m_::res_info(&RemoteRes {
        id: ResId(12345),
        ..p
    });
    let _ = m_::res_close(&p);
    if forged.is_ok() {
        return Err(format!("a forged id answered {forged:?}"));
    }
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(_, got, want)| *got != Some(*want))
        .map(|(what, got, want)| format!("{what}: {got:?}, not {want:?}"))
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// A program here that ends holding the writing end of a pipe there: the end is let go.
/// All as user 2000, whose pipe it is (owner-only: `machd`'s own user may not drop it).
fn ended_holder(m: u8) -> Result<(), String> {
    let me = e(res::getuser(), "getuser")?;
    e(res::setuser(UserId(2000)), "setuser")?;
    let r = ended_holder_as_other(m);
    e(res::setuser(me), "setuser back")?;
    r
}

fn ended_holder_as_other(m: u8) -> Result<(), String> {
    let p = e(
        m_::res_open(m, "c0/pipe/mfr", &[], Rights::OWNER_ALL),
        "open",
    )?;
    let r = (|| {
        e(m_::res_control(&p, PIPE_HOLD, PIPE_READ_END, 0), "hold")?;
        let (id, epoch) = (format!("{}", p.id.0), format!("{}", p.epoch));
        let words = ["phold", &format!("{m}"), id.as_str(), epoch.as_str()];
        let child = e(sys::spawn("mfcheck", &words, Priority::App), "spawn phold")?;
        let (_, st) = e(sys::wait(Some(child)), "wait for phold")?;
        if st.how != ulib::abi::ENDED_EXIT || st.code != 0 {
            return Err(format!("phold ended {st:?}"));
        }
        // Held for it there until its end is noticed here (at a heartbeat) and told there.
        for _ in 0..crate::POLLS {
            match read(&p, 10) {
                Ok(b) if b.is_empty() => return Ok(()),
                Err(Error::Again) => {
                    let _ = sys::sleep_ns(crate::POLL_NS);
                }
                other => return Err(format!("read after phold ended: {other:?}")),
            }
        }
        Err(String::from("the end phold held was never let go"))
    })();
    let _ = m_::res_close(&p);
    r
}

/// `mfcheck forgepeer M`: a program here speaks for this machine to machine M (a heartbeat
/// and a request in a made-up epoch, from a port of its own): M must not take this machine
/// for restarted, which would let go of the pipe ends it holds for this program.
pub fn forge_peer(m: u8) -> Result<String, String> {
    let p = e(
        m_::res_open(m, "c0/pipe/mff", &[], Rights::OWNER_ALL),
        "open",
    )?;
    let r = (|| {
        for end in [PIPE_READ_END, PIPE_WRITE_END] {
            e(m_::res_control(&p, PIPE_HOLD, end, 0), "hold")?;
        }
        let me = crate::machd_self()?;
        let (here, epoch) = (me[0] as u8, me[2] as u32);
        let fake = epoch ^ 0x5a5a_0001;
        let mut sock = e(ulib::net::UdpSocket::bind(0), "bind")?;
        let to = ulib::net::Ipv4(mach::addr(usize::from(m)));
        let request = mrpc::encode(
            &mrpc::Header {
                kind: mrpc::Kind::Request as u8,
                from: here,
                to: m,
                op: 1,
                epoch: fake,
                seq: 1,
                user: 2000,
                ..mrpc::Header::default()
            },
            &[],
        );
        for bytes in [mrpc::heartbeat(here, fake, m, 0, 1), request] {
            e(sock.send_to(to, mach::PORT, &bytes), "send")?;
        }
        // The same heartbeat in a frame of machd's own type, handed to the driver: refused
        // (only machd may send those).
        let hb = mrpc::heartbeat(here, fake, m, 0, 2);
        match forge_frame(FN_DRV, DRV_TX, here, m, &hb) {
            Err(Error::Denied) => {}
            other => {
                return Err(format!(
                    "net.drv's DRV_TX of a frame of machd's type for another program: {other:?} \
                     (not Denied)"
                ))
            }
        }
        // A frame as if from machine M in a made-up epoch, straight to this machine's
        // machd: refused (it takes frames from the driver only). Over UDP nobody serves
        // `mach.link`.
        let hb = mrpc::heartbeat(m, fake, here, epoch, 3);
        match forge_frame(mach::FN_LINK, UDP_FRAME_IN, m, here, &hb) {
            Err(Error::Denied | Error::NoSuchResource) => {}
            other => {
                return Err(format!(
                    "a frame handed to this machd's mach.link by a program: {other:?} (not Denied)"
                ))
            }
        }
        // Over UDP, sent before this request through the same netd and link, so seen
        // there first; on machd's own link refused or heard by nobody. Either way the ends
        // are still held (nothing buffered, a writer held: `Again`, not EOF), and this
        // machine still knows machine M's life (else the request would fail).
        let after = read(&p, 4);
        if after != Err(Error::Again) {
            return Err(format!(
                "after a forged heartbeat, a read of a pipe whose ends machine {m} holds for \
                 this program: {after:?} (the ends were let go: this machine taken for restarted)"
            ));
        }
        Ok(String::from(
            ", a forged heartbeat and request ignored, a forged frame refused by the driver",
        ))
    })();
    let _ = m_::res_close(&p);
    r
}

/// One-way messages each carrying a page, sent to each of `machd`'s functions.
const ONE_WAY: usize = 70;
/// Where `one_way` attaches its pages.
const ONE_WAY_AT: u64 = 0x0000_5400_0000_0000;

/// `mfcheck oneway M`: [`ONE_WAY`] one-way messages with a page each (more than an address
/// space's 64 attachments) to `mach.link` (if this machine's `machd` serves it) and to
/// `mach`; after each batch a null round trip to machine M must still work. `machd` must
/// let go of each page (nothing answers a one-way message): kept, they would fill its ICA
/// window, and the frames from the driver, which come with a page each, could no longer
/// reach it.
pub fn one_way(m: u8) -> Result<String, String> {
    let mut batches = 0;
    for name in [mach::FN_LINK, mach::FN_MACH] {
        let Ok(target) = ulib::fnid::lookup(name) else {
            continue;
        };
        let mut sent = 0;
        for i in 0..ONE_WAY {
            let page = e(
                res::open_vregion(&format!("here/vregion/mfow-{i}"), 4096, Rights::OWNER_ALL),
                "open a page",
            )?;
            let at = ONE_WAY_AT + (i as u64) * 4096;
            let msg = ulib::abi::ipc::Msg {
                label: 0x7777,
                words: [0; 6],
            };
            // Marked while attached here: the kernel closes it once machd lets go of it.
            if res::attach_here(page, at, true).is_ok()
                && res::close_when_detached(page).is_ok()
                && ulib::ipc::send(target.as_target(), &ulib::ipc::with_ica(msg, page)).is_ok()
            {
                sent += 1;
            } else {
                let _ = res::detach_here(at);
                let _ = res::close(page);
            }
        }
        if sent < ONE_WAY {
            return Err(format!(
                "{name}: {sent} of {ONE_WAY} one-way messages with a page were taken (the \
                 pages of earlier ones still held)"
            ));
        }
        let server = e(ulib::fnid::lookup(mach::FN_MACH), "mach")?.as_target();
        let ping = ulib::abi::ipc::Msg {
            label: mach::OP_PING,
            words: [u64::from(m), 0, 0, 0, 0, 0],
        };
        match ulib::ipc::call(server, &ping) {
            Ok((0, _)) => {}
            other => {
                return Err(format!(
                    "after {ONE_WAY} one-way messages with a page to {name}, a round trip to \
                     machine {m}: {other:?}"
                ))
            }
        }
        batches += 1;
    }
    Ok(format!(
        ", {batches} x {ONE_WAY} one-way messages with a page let go, round trips after each"
    ))
}

/// Hand the function `name` (with `label`) a frame of `machd`'s own type carrying `bytes`
/// to machine `to`, as if from machine `from`'s `machd`: its answer.
fn forge_frame(name: &str, label: u64, from: u8, to: u8, bytes: &[u8]) -> Result<(), Error> {
    use ulib::abi::ipc::Msg;
    let target = ulib::fnid::lookup(name)?;
    let mut page = ulib::net::LentPage::open("mfcheck-frame")?;
    let at = page.map()?;
    let len = mach::frame_len(bytes.len());
    let mut frame = alloc::vec![0u8; len];
    mach::write_frame(&mut frame, usize::from(from), usize::from(to), bytes);
    // SAFETY: the page (one page, writable) is mapped at `at` and `len` < 4096.
    unsafe { core::ptr::copy_nonoverlapping(frame.as_ptr(), at as *mut u8, len) };
    let msg = Msg {
        label,
        words: [len as u64, 0, 0, 0, 0, 0],
    };
    match page.call(target.as_target(), msg)? {
        (0, _) => Ok(()),
        (v, _) => Err(Error::from_code(v)),
    }
}

/// `mfcheck pread NAME`: exit code 0 only if every byte came, in order, then EOF.
pub fn pread(name: &str) -> i32 {
    let r = (|| {
        let p = e(res::find(name), "find")?.id;
        e(res::control(p, PIPE_HOLD, PIPE_READ_END, 0), "hold")?;
        let mut got = 0;
        let mut buf = [0u8; 1024];
        loop {
            let n = e(res::read(p, &mut buf, 0), "read")?;
            if n == 0 {
                break;
            }
            if let Some(i) = (0..n).find(|&i| buf[i] != pattern(got + i)) {
                return Err(format!("byte {} is {}", got + i, buf[i]));
            }
            got += n;
        }
        if got != BYTES {
            return Err(format!("{got} bytes, not {BYTES}"));
        }
        Ok(())
    })();
    match r {
        Ok(()) => {
            println!("mfcheck pread: ok, {BYTES} bytes in order, then EOF");
            0
        }
        Err(err) => {
            println!("mfcheck pread: FAILED: {err}");
            1
        }
    }
}

/// `mfcheck phold M ID EPOCH`: hold the writing end of that pipe, and end.
pub fn phold(args: &[&str]) -> i32 {
    let parsed = match args {
        [m, id, epoch] => m.parse().ok().zip(id.parse().ok()).zip(epoch.parse().ok()),
        _ => None,
    };
    let Some(((machine, id), epoch)) = parsed else {
        println!("mfcheck phold: usage: mfcheck phold M ID EPOCH");
        return 2;
    };
    let p = RemoteRes {
        machine,
        epoch,
        id: ResId(id),
    };
    match m_::res_control(&p, PIPE_HOLD, PIPE_WRITE_END, 0) {
        Ok(_) => 0,
        Err(err) => {
            println!("mfcheck phold: FAILED: hold: {err}");
            1
        }
    }
}

/// `semcount`: a semaphore on machine `m` at 0, `n` `SEM_V`s from here, then its count
/// (`INFO`) must be `n`; closed either way.
pub fn sem_count(m: u8, n: u64) -> Result<(), String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let name = format!("c0/sem/mfc{}", me.0 & 0xffff_ffff);
    let s = e(
        m_::res_open(m, &name, &0u64.to_le_bytes(), Rights::OWNER_ALL),
        "open",
    )?;
    let r = (|| {
        for i in 0..n {
            m_::res_control(&s, SEM_V, 0, 0).map_err(|e| format!("SEM_V {i}: {e}"))?;
        }
        let count = e(
            m_::res_control(&s, ulib::abi::syscall::control::INFO, 0, 0),
            "INFO",
        )?;
        if count != n {
            return Err(format!("{n} SEM_V made its count {count}"));
        }
        Ok(())
    })();
    let _ = m_::res_close(&s);
    r
}
