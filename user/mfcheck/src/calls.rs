//! `mfcheck callee` and `mfcheck call M`: calls to a function on another machine by name
//! (`abi::mach::OP_CALL`, `ulib::mach::call`).
//!
//! `callee` serves the function [`CALLEE`] on its machine: [`ECHO`] answers the user the
//! request came from and its first four words, and gives its ICA back with the letters
//! made capitals; [`ADMIN_ONLY`] is `Denied` to every user but the administrator (a server
//! checking the user the call came from); [`SLOW`] answers after `words[0]` ns; [`QUIT`]
//! ends it. It ends by itself after [`IDLE_NS`] without a request (a hang guard).
//!
//! `call M` (with `callee` running on machine M) checks: words there and back, the user
//! carried (also after `SETUSER` to another), data both ways in an ICA (up to
//! `CALL_REMOTE_MAX` bytes), a server slower than the call's timeout (`TimedOut`, and the
//! next call still answered), and every refusal: no such function, servers that did not
//! say they may be called so (`fs`, `mach`, `net.udp`, `blk`: no `pub.` name), a name too
//! long or not UTF-8, more data than fits, no ICA or a read-only one, a machine that is
//! this one or none, a timeout too long.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::Msg;
use ulib::abi::mach::{self, call_word, CALL_NAME_AT, CALL_REMOTE_MAX, FN_MACH};
use ulib::abi::res::{Rights, UserId};
use ulib::abi::Error;
use ulib::mach::{call, Answer};
use ulib::{fnid, ipc, println, res, sys};

/// The function `callee` serves.
pub const CALLEE: &str = "pub.mfcheck";
pub const ECHO: u64 = 1;
pub const ADMIN_ONLY: u64 = 2;
pub const SLOW: u64 = 3;
pub const QUIT: u64 = 4;
/// How long `callee` waits for a request before it ends.
const IDLE_NS: u64 = 120_000_000_000;
/// The administrator.
const ADMIN: u64 = 1;

/// `mfcheck callee`.
pub fn callee() -> Result<String, String> {
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let ep = ipc::open_endpoint(
        &format!("here/endpoint/mfcheck-{}", me.serial()),
        Rights(0x2f),
    )
    .map_err(|e| format!("endpoint: {e}"))?;
    fnid::register(CALLEE, ep).map_err(|e| format!("register {CALLEE}: {e}"))?;
    println!("mfcheck callee: serving {CALLEE}");
    let mut served = 0u64;
    loop {
        let r = match ipc::recv(ep, IDLE_NS) {
            Ok(r) => r,
            Err(e) => return Err(format!("receive: {e} after {served} requests")),
        };
        served += 1;
        let w = r.msg.words;
        let ica = ipc::ica_at(&r.msg);
        let mut reply = Msg {
            label: 0,
            words: [r.sender_user, w[0], w[1], w[2], w[3], 0],
        };
        let value = match ipc::label(&r.msg) {
            ECHO => {
                if let Some((_, at)) = ica.filter(|_| !ipc::ica_read_only(&r.msg)) {
                    // SAFETY: the request's ICA, attached writable at `at`, a page at least.
                    let page = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, 4096) };
                    page.make_ascii_uppercase();
                }
                0
            }
            ADMIN_ONLY if r.sender_user == ADMIN => 0,
            ADMIN_ONLY => Error::Denied as u64,
            SLOW => {
                let _ = sys::sleep_ns(w[0]);
                0
            }
            QUIT => 0,
            _ => Error::NoSuchCall as u64,
        };
        if let Some((region, _)) = ica {
            reply = ipc::with_ica(reply, region);
        }
        if r.request != 0 {
            let _ = ipc::reply(r.request, value, &reply);
        }
        if ipc::label(&r.msg) == QUIT {
            return Ok(format!("{served} requests served"));
        }
    }
}

/// [`call`] to the callee on machine `m`, words only.
fn to_callee(m: u8, label: u64, words: [u64; 6]) -> Result<Answer, Error> {
    call(m, CALLEE, label, words, None, 0)
}

/// `mfcheck call M` (the callee goes on serving: `machines.script` stops it with `mcall`).
pub fn caller(m: u8) -> Result<String, String> {
    let me = ulib::res::getuser().map_err(|e| format!("getuser: {e}"))?;
    // The callee was started on machine M just before: wait until it serves (a hang guard
    // bounds the looks).
    let mut looks = 0;
    let first = loop {
        match to_callee(m, ECHO, [11, 22, 33, 44, 55, 66]) {
            Err(Error::NoSuchResource) if looks < crate::POLLS => {
                looks += 1;
                let _ = sys::sleep_ns(crate::POLL_NS);
            }
            r => break r.map_err(|e| format!("echo: {e}"))?,
        }
    };
    if first.value != 0 || first.words[..5] != [u64::from(me.0), 11, 22, 33, 44] {
        return Err(format!("echo answered {first:?}"));
    }
    // Data both ways: made capitals there.
    let text = b"hello from another machine";
    let a = call(m, CALLEE, ECHO, [0; 6], Some((text, text.len())), 0)
        .map_err(|e| format!("echo with data: {e}"))?;
    if a.bytes != text.to_ascii_uppercase() {
        return Err(format!("echo with data answered {:?}", a.bytes));
    }
    let full: Vec<u8> = (0..CALL_REMOTE_MAX)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let a = call(m, CALLEE, ECHO, [0; 6], Some((&full, CALL_REMOTE_MAX)), 0)
        .map_err(|e| format!("echo with {CALL_REMOTE_MAX} bytes: {e}"))?;
    if a.bytes != full.to_ascii_uppercase() {
        return Err(format!(
            "echo with {CALL_REMOTE_MAX} bytes came back different"
        ));
    }
    // The user travels: another one here is that one there, and the server's own check
    // of the user refuses it.
    let other = UserId(2000);
    res::setuser(other).map_err(|e| format!("setuser: {e}"))?;
    let as_other = to_callee(m, ECHO, [0; 6]);
    let denied = to_callee(m, ADMIN_ONLY, [0; 6]);
    res::setuser(me).map_err(|e| format!("setuser back: {e}"))?;
    match (&as_other, &denied) {
        (Ok(a), Ok(d)) if a.words[0] == 2000 && d.value == Error::Denied as u64 => {}
        _ => {
            return Err(format!(
                "as user 2000: echo {as_other:?}, admin-only {denied:?}"
            ))
        }
    }
    let allowed = to_callee(m, ADMIN_ONLY, [0; 6]);
    if !matches!(&allowed, Ok(a) if a.value == 0) {
        return Err(format!("admin-only as {}: {allowed:?}", me.0));
    }
    // A server slower than the call's timeout: `TimedOut`, then the next call answered.
    let slow = call(
        m,
        CALLEE,
        SLOW,
        [500_000_000, 0, 0, 0, 0, 0],
        None,
        50_000_000,
    );
    if slow != Err(Error::TimedOut) {
        return Err(format!("a call slower than its timeout: {slow:?}"));
    }
    let after = to_callee(m, ECHO, [7, 0, 0, 0, 0, 0]);
    if !matches!(&after, Ok(a) if a.words[1] == 7) {
        return Err(format!("the call after a timeout: {after:?}"));
    }
    refusals(m)?;
    Ok(format!(
        "words, user, data ({CALL_REMOTE_MAX} bytes), timeout and refusals \
         (callee found after {looks} looks)"
    ))
}

/// Every refusal, by `ulib::mach::call` where it checks, else by `machd` itself.
fn refusals(m: u8) -> Result<(), String> {
    let long = "x".repeat(mach::CALL_NAME_MAX + 1);
    let too_much = [0u8; CALL_REMOTE_MAX + 1];
    let cases: [(&str, Result<Answer, Error>, Error); 9] = [
        (
            "no such function",
            call(m, "pub.nosuch", ECHO, [0; 6], None, 0),
            Error::NoSuchResource,
        ),
        // Servers that tell their callers apart by process are not reached.
        ("fs", call(m, "fs", 1, [0; 6], None, 0), Error::NotSupported),
        (
            "net.udp",
            call(m, ulib::net::FN_UDP, ulib::net::OP_INFO, [0; 6], None, 0),
            Error::NotSupported,
        ),
        (
            "blk",
            call(m, "blk", 1, [0; 6], None, 0),
            Error::NotSupported,
        ),
        (
            "mach",
            call(m, FN_MACH, 1, [0; 6], None, 0),
            Error::NotSupported,
        ),
        (
            "a name too long",
            call(m, &long, ECHO, [0; 6], None, 0),
            Error::TooLong,
        ),
        (
            "too much data",
            call(m, CALLEE, ECHO, [0; 6], Some((&too_much, 0)), 0),
            Error::TooLong,
        ),
        (
            "this machine",
            call(me_machine()?, CALLEE, ECHO, [0; 6], None, 0),
            Error::InvalidArgument,
        ),
        (
            "no machine",
            call(9, CALLEE, ECHO, [0; 6], None, 0),
            Error::InvalidArgument,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, got, want) in cases {
        if got.as_ref().err() != Some(&want) {
            wrong.push(format!("{what}: {got:?}, not {want:?}"));
        }
    }
    // Straight to machd, past the library's checks.
    let name = CALLEE.len() as u64;
    let raw_cases: [(&str, Result<(), Error>, Error); 6] = [
        (
            "a name of 33 bytes",
            raw(m, call_word(33, 0, 0, false), 0, CALLEE, true, true),
            Error::TooLong,
        ),
        (
            "data without an ICA there",
            raw(m, call_word(name, 4, 0, false), 0, CALLEE, true, true),
            Error::InvalidArgument,
        ),
        (
            "a name not UTF-8",
            raw(m, call_word(2, 0, 0, false), 0, "\u{ff}", true, true),
            Error::InvalidArgument,
        ),
        (
            "no ICA",
            raw(m, call_word(name, 0, 0, false), 0, CALLEE, false, true),
            Error::InvalidArgument,
        ),
        (
            "a read-only ICA",
            raw(m, call_word(name, 0, 0, false), 0, CALLEE, true, false),
            Error::InvalidArgument,
        ),
        (
            "a timeout too long",
            raw(
                m,
                call_word(name, 0, 0, false),
                u64::MAX,
                CALLEE,
                true,
                true,
            ),
            Error::InvalidArgument,
        ),
    ];
    for (what, got, want) in raw_cases {
        if got != Err(want) {
            wrong.push(format!("{what} (raw): {got:?}, not {want:?}"));
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// This machine's id (`OP_SELF`).
pub(crate) fn me_machine() -> Result<u8, String> {
    Ok(crate::machd_self()?[0] as u8)
}

/// An `OP_CALL` made by hand: `cw` as `words[2]`, `timeout` as `words[3]`, `name` (its
/// UTF-8 bytes, "\u{ff}" as the bytes 0xff 0xfe) at the name's place of an ICA (or none),
/// writable or not. The call's value as an error (the server's value is not looked at).
fn raw(
    m: u8,
    cw: u64,
    timeout: u64,
    name: &str,
    with_ica: bool,
    writable: bool,
) -> Result<(), Error> {
    let words = [u64::from(m), crate::calls::ECHO, cw, timeout, 0, 0];
    let bytes: &[u8] = if name == "\u{ff}" {
        &[0xff, 0xfe]
    } else {
        name.as_bytes()
    };
    let ica = with_ica.then_some((bytes, CALL_NAME_AT as u64, writable));
    crate::raw_with(FN_MACH, mach::OP_CALL, words, ica)
}
