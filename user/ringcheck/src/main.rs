//! `ringcheck [CORE]`: the submission and completion rings (`RING_SETUP`, `ENTER`) used well
//! and badly, with resources on core CORE (default: this core). Prints `ringcheck: ok` and
//! exits 0, or prints the first failure and exits 1.
//!
//! | part | what |
//! |---|---|
//! | (a) | `ENTER` without a ring is `NoSuchResource`; bad sizes, unaligned, kernel and already-mapped addresses are refused; a second ring is `Busy`, and so is migrating to CORE with a ring |
//! | (b) | 100 rounds of 8 no-ops: each completes once, in order, with its `user_data` (the indices wrap the rings many times) |
//! | (c) | a vregion on CORE opened, written, read back and closed through the ring, 8 in flight at once; a read's bytes arrive in the buffer |
//! | (d) | a 100 ms timer does not complete before 100 ms; a call to the process's own endpoint completes with the reply (its ticket is not `COLLECT`able meanwhile), a one-way send once queued |
//! | (e) | submissions that cannot start (unknown kind, stale target, bad buffers) complete with an error status |
//! | (f) | back-pressure: with 8 timers in flight and 8 completions unread, `ENTER` takes nothing more, and takes again once they are read |
//! | (g) | nonsense indices (`sq_tail` beyond the ring, `cq_head` past the tail) and waiting for more than the ring holds are `InvalidArgument`; the ring works again after |
//! | (i) | a thread waiting in `ENTER` wakes when another thread's `ENTER` writes a completion that arrived while it was taking submissions |
//! | (h) | 2,000 random submissions while another thread rewrites the waiting entries: every one taken completes exactly once |
//!
//! Role: `ringcheck hold` sets up a ring, starts timers of an hour and waits in `ENTER`
//! (the in-kernel test kills it there).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::{self as api, Msg, Submission};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::ring::RingSqe;
use ulib::abi::Error;
use ulib::ring::{self, Ring};
use ulib::{ipc, println, res, sys, thread};

ulib::main!(main);

type Check = Result<(), String>;

fn fail<T>(what: &str, got: impl core::fmt::Debug) -> Result<T, String> {
    Err(format!("{what}: got {got:?}"))
}

fn main(args: &[&str]) -> i32 {
    let r = match args.get(1).copied() {
        Some("hold") => hold(),
        other => {
            let here = sys::core().unwrap_or(0);
            let core = other.and_then(|c| c.parse().ok()).unwrap_or(here);
            checks(core)
        }
    };
    match r {
        Ok(()) => {
            println!("ringcheck: ok");
            0
        }
        Err(e) => {
            println!("ringcheck: FAIL {e}");
            1
        }
    }
}

const NOP: Submission = Submission {
    kind: api::SUBMIT_NOP,
    target: 0,
    args: [0; 4],
    msg: Msg {
        label: 0,
        words: [0; 6],
    },
};

/// Push `sub`, take it, wait for its completion and pop it: (status, value, reply).
fn one(r: &mut Ring, user_data: u64, sub: &Submission) -> Result<(u64, u64, Msg), String> {
    if !r.push(user_data, sub) {
        return fail("push into an empty ring", false);
    }
    let taken = r.enter(1, 1, u64::MAX).map_err(|e| format!("enter: {e}"))?;
    if taken != 1 {
        return fail("submissions taken", taken);
    }
    match r.pop() {
        Some(c) if c.user_data == user_data => Ok((c.status, c.value, c.msg)),
        other => fail("completion", other),
    }
}

fn checks(core: usize) -> Check {
    // (a)
    let e = ring::enter(1, 0, 0);
    if e != Err(Error::NoSuchResource) {
        return fail("(a) enter without a ring", e);
    }
    for entries in [0, 3, 512, u64::MAX] {
        let e = ring::setup_raw(ring::DEFAULT_ADDRESS, entries);
        if e != Err(Error::InvalidArgument) {
            return fail(&format!("(a) setup with {entries} entries"), e);
        }
    }
    for (what, at) in [
        ("unaligned", ring::DEFAULT_ADDRESS + 8),
        ("kernel", 0xffff_8000_0000_0000),
        ("non-canonical", 0x0000_8000_0000_0000),
        ("top of the user half", 0x0000_7fff_ffff_f000),
    ] {
        let e = ring::setup_raw(at, 8);
        if e != Err(Error::InvalidArgument) && e != Err(Error::Busy) {
            return fail(&format!("(a) setup at a {what} address"), e);
        }
    }
    let local = 0u64;
    let stack_page = (&raw const local as u64) & !0xfff;
    let e = ring::setup_raw(stack_page, 1);
    if e != Err(Error::Busy) {
        return fail("(a) setup over the stack", e);
    }
    let mut r = Ring::setup(ring::DEFAULT_ADDRESS, 8).map_err(|e| format!("(a) setup: {e}"))?;
    let h = r.header();
    if (h.sq_entries, h.cq_entries, h.sq_head, h.cq_tail) != (8, 16, 0, 0) {
        return fail("(a) header", h);
    }
    let e = ring::setup_raw(ring::DEFAULT_ADDRESS + 0x10_0000, 8);
    if e != Err(Error::Busy) {
        return fail("(a) a second ring", e);
    }
    // A process with a ring does not move (its memory is pinned on this core).
    if core != sys::core().unwrap_or(core) {
        let e = sys::migrate(None, core);
        if e != Err(Error::Busy) {
            return fail("(a) migrating with a ring", e);
        }
    }
    if r.enter(0, 0, 0) != Ok(0) {
        return fail("(a) an empty enter", r.enter(0, 0, 0));
    }

    // (b)
    for round in 0..100u64 {
        for i in 0..8 {
            if !r.push(round * 8 + i, &NOP) {
                return fail("(b) push", round * 8 + i);
            }
        }
        let taken = r
            .enter(8, 8, u64::MAX)
            .map_err(|e| format!("(b) enter: {e}"))?;
        if taken != 8 || r.ready() != 8 {
            return fail("(b) taken, ready", (taken, r.ready()));
        }
        for i in 0..8 {
            match r.pop() {
                Some(c) if c.user_data == round * 8 + i && c.status == 0 => {}
                other => return fail("(b) completion", other),
            }
        }
    }
    if r.pop().is_some() {
        return fail("(b) an extra completion", r.pop());
    }

    // (c)
    let size = 4096u64.to_le_bytes();
    let names: Vec<String> = (0..8).map(|i| format!("c{core}/vregion/ring{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let mut sub = ipc::op(
            api::SUBMIT_RES_OPEN,
            0,
            [
                name.as_ptr() as u64,
                name.len() as u64,
                size.as_ptr() as u64,
                8,
            ],
        );
        sub.msg.label = u64::from(Rights::OWNER_ALL.0);
        r.push(100 + i as u64, &sub);
    }
    let taken = r
        .enter(8, 8, u64::MAX)
        .map_err(|e| format!("(c) enter: {e}"))?;
    if taken != 8 {
        return fail("(c) opens taken", taken);
    }
    let mut ids = [ResId(0); 8];
    for _ in 0..8 {
        let c = r.pop().ok_or("(c) an open did not complete")?;
        if c.status != 0 || !(100..108).contains(&c.user_data) {
            return fail("(c) open", c);
        }
        let id = ResId(c.value);
        if id.core() != core {
            return fail("(c) region on the wrong core", id);
        }
        ids[(c.user_data - 100) as usize] = id;
    }
    let data: [u8; 16] = *b"through the ring";
    let (st, v, _) = one(
        &mut r,
        200,
        &ipc::op(
            api::SUBMIT_RES_WRITE,
            ids[3].0,
            [data.as_ptr() as u64, 16, 32, 0],
        ),
    )?;
    if st != 0 || v != 16 {
        return fail("(c) write", (st, v));
    }
    let mut back = [0u8; 16];
    let (st, v, _) = one(
        &mut r,
        201,
        &ipc::op(
            api::SUBMIT_RES_READ,
            ids[3].0,
            [back.as_mut_ptr() as u64, 16, 32, 0],
        ),
    )?;
    if st != 0 || v != 16 || back != data {
        return fail("(c) read back", (st, v, back));
    }
    for (i, id) in ids.iter().enumerate() {
        r.push(
            300 + i as u64,
            &ipc::op(api::SUBMIT_RES_CLOSE, id.0, [0; 4]),
        );
    }
    r.enter(8, 8, u64::MAX)
        .map_err(|e| format!("(c) enter closes: {e}"))?;
    for _ in 0..8 {
        match r.pop() {
            Some(c) if c.status == 0 && (300..308).contains(&c.user_data) => {}
            other => return fail("(c) close", other),
        }
    }

    // (d)
    let t0 = sys::clock_ns().unwrap_or(0);
    let (st, _, _) = one(&mut r, 400, &ipc::timer(100_000_000))?;
    let took = sys::clock_ns().unwrap_or(0) - t0;
    if st != 0 || took < 100_000_000 {
        return fail("(d) a 100 ms timer: status, ns", (st, took));
    }
    let ep = ipc::open_endpoint("here/endpoint/ringcheck", Rights(0x2f))
        .map_err(|e| format!("(d) endpoint: {e}"))?;
    let mut call = ipc::op(api::SUBMIT_CALL, ep.0, [0; 4]);
    call.msg = Msg {
        label: 5,
        words: [6, 0, 0, 0, 0, 0],
    };
    r.push(401, &call);
    if r.enter(1, 0, 0) != Ok(1) || r.ready() != 0 {
        return fail("(d) the call was answered before the server", r.ready());
    }
    // The call is in flight under some ticket of the kernel's; none of them is
    // COLLECTable (the completion goes to the ring).
    for t in 1..=64u64 {
        let e = ipc::collect((1 << 63) | t, 0);
        if e != Err(Error::NoSuchResource) {
            return fail("(d) collecting a ring request's ticket", e);
        }
    }
    let got = ipc::recv(ep, u64::MAX).map_err(|e| format!("(d) recv: {e}"))?;
    if got.msg != call.msg || got.kind != api::SUBMIT_CALL {
        return fail("(d) received", got);
    }
    let answer = Msg {
        label: 9,
        words: [7, 0, 0, 0, 0, 0],
    };
    ipc::reply(got.request, 77, &answer).map_err(|e| format!("(d) reply: {e}"))?;
    r.enter(0, 1, u64::MAX)
        .map_err(|e| format!("(d) wait: {e}"))?;
    match r.pop() {
        Some(c) if c.user_data == 401 && c.status == 0 && c.value == 77 && c.msg == answer => {}
        other => return fail("(d) the call's completion", other),
    }
    let mut send = ipc::op(api::SUBMIT_SEND, ep.0, [0; 4]);
    send.msg.label = 8;
    let (st, _, _) = one(&mut r, 402, &send)?;
    let got = ipc::recv(ep, 0).map_err(|e| format!("(d) recv the send: {e}"))?;
    if st != 0 || got.msg.label != 8 || got.request != 0 {
        return fail("(d) one-way send", (st, got));
    }

    // (e)
    let bad: [(&str, Submission, Error); 5] = [
        (
            "unknown kind",
            ipc::op(99, 0, [0; 4]),
            Error::InvalidArgument,
        ),
        (
            "closed target",
            ipc::op(api::SUBMIT_RES_CLOSE, ids[0].0, [0; 4]),
            Error::StaleResource,
        ),
        (
            "write from a kernel address",
            ipc::op(
                api::SUBMIT_RES_WRITE,
                ep.0,
                [0xffff_8000_0000_0000, 16, 0, 0],
            ),
            Error::BadAddress,
        ),
        (
            "read into a kernel address",
            ipc::op(
                api::SUBMIT_RES_READ,
                ep.0,
                [0xffff_8000_0000_0000, 16, 0, 0],
            ),
            Error::BadAddress,
        ),
        (
            "call to nothing",
            ipc::op(api::SUBMIT_CALL, 0x1234_5678, [0; 4]),
            Error::NoSuchResource,
        ),
    ];
    for (i, (what, sub, want)) in bad.iter().enumerate() {
        let (st, _, _) = one(&mut r, 500 + i as u64, sub)?;
        if st != *want as u64 {
            return fail(&format!("(e) {what}: status"), Error::from_code(st));
        }
    }
    res::close(ep).map_err(|e| format!("(e) close endpoint: {e}"))?;

    // (f)
    for i in 0..8 {
        r.push(600 + i, &ipc::timer(50_000_000));
    }
    if r.enter(8, 0, 0) != Ok(8) {
        return fail("(f) timers taken", r.header());
    }
    for i in 0..8 {
        r.push(610 + i, &NOP);
    }
    if r.enter(8, 0, 0) != Ok(8) {
        return fail("(f) no-ops taken", r.header());
    }
    for i in 0..8 {
        r.push(620 + i, &NOP);
    }
    let e = r.enter(8, 0, 0);
    if e != Ok(0) {
        return fail("(f) taken with the completion ring spoken for", e);
    }
    for _ in 0..8 {
        match r.pop() {
            // The timers may have finished meanwhile (a loaded host): any 8 of the 16.
            Some(c) if (600..618).contains(&c.user_data) && c.status == 0 => {}
            other => return fail("(f) completion", other),
        }
    }
    if r.enter(8, 0, 0) != Ok(8) {
        return fail("(f) taken once read", r.header());
    }
    r.enter(0, 16, u64::MAX)
        .map_err(|e| format!("(f) wait: {e}"))?;
    let mut seen = 0u32;
    while let Some(c) = r.pop() {
        if c.status != 0 || !(600..628).contains(&c.user_data) {
            return fail("(f) completion", c);
        }
        seen += 1;
    }
    if seen != 16 || r.header().overflow != 0 {
        return fail("(f) completions after the wait", (seen, r.header()));
    }

    // (g)
    let (tail, head) = (r.sq_tail(), r.header().cq_tail);
    for (what, sq_tail, cq_head) in [
        ("sq_tail beyond the ring", tail.wrapping_add(9), head),
        ("sq_tail behind sq_head", tail.wrapping_sub(1), head),
        ("cq_head past cq_tail", tail, head.wrapping_add(1)),
        ("cq_head far behind", tail, head.wrapping_sub(1000)),
    ] {
        r.force_indices(sq_tail, cq_head);
        let e = r.enter(8, 0, 0);
        if e != Err(Error::InvalidArgument) {
            r.restore_indices();
            return fail(&format!("(g) {what}"), e);
        }
    }
    r.restore_indices();
    let e = r.enter(0, 17, 0);
    if e != Err(Error::InvalidArgument) {
        return fail("(g) waiting for more than the ring holds", e);
    }
    let (st, _, _) = one(&mut r, 700, &NOP)?;
    if st != 0 {
        return fail("(g) a no-op after nonsense", st);
    }

    // (i)
    woken_by_another_enter(&mut r)?;

    // (h)
    fuzz(&mut r)
}

fn wait_one(_: u64) -> u64 {
    match ring::enter(0, 1, u64::MAX) {
        Ok(_) => 0,
        Err(e) => e as u64,
    }
}

/// (i): a thread waiting in ENTER wakes when another thread's ENTER writes the completion
/// (one that arrived while that ENTER was taking submissions). Without the wake-up the
/// waiter would sleep behind the hour-long timer, and the test's bound would catch it.
fn woken_by_another_enter(r: &mut Ring) -> Check {
    r.push(800, &ipc::timer(3_600_000_000_000));
    if r.enter(1, 0, 0) != Ok(1) {
        return fail("(i) the hour-long timer", r.header());
    }
    let waiter = thread::spawn(wait_one, 0).map_err(|e| format!("(i) thread: {e}"))?;
    let _ = sys::yield_now(); // the waiter goes to sleep in ENTER
    let ep = ipc::open_endpoint("here/endpoint/ringcheck-i", Rights(0x2f))
        .map_err(|e| format!("(i) endpoint: {e}"))?;
    r.push(801, &ipc::op(api::SUBMIT_SEND, ep.0, [0; 4]));
    if r.enter(1, 0, 0) != Ok(1) {
        return fail("(i) the send", r.header());
    }
    let v = waiter.join().map_err(|e| format!("(i) join: {e}"))?;
    if v != 0 {
        return fail("(i) the waiter's ENTER", Error::from_code(v));
    }
    match r.pop() {
        Some(c) if c.user_data == 801 && c.status == 0 => {}
        other => return fail("(i) the send's completion", other),
    }
    ipc::recv(ep, 0).map_err(|e| format!("(i) recv: {e}"))?;
    res::close(ep).map_err(|e| format!("(i) close: {e}"))
}

fn poker(address: u64) -> u64 {
    let Some(view) = Ring::view(address) else {
        return 1;
    };
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..400 {
        let h = view.header();
        // Rewrite whatever the kernel has not taken yet (keeping user_data, so the parent
        // can still count).
        let mut i = h.sq_head;
        while i != h.sq_tail && i.wrapping_sub(h.sq_head) <= 8 {
            let old = view.peek_sqe(i);
            x = xorshift(x);
            view.poke_sqe(
                i,
                &RingSqe {
                    user_data: old.user_data,
                    sub: random_sub(x),
                    _pad: [0; 2],
                },
            );
            i = i.wrapping_add(1);
        }
        let _ = sys::yield_now();
    }
    0
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// A random submission whose completion cannot take long (timers up to 1 ms).
fn random_sub(x: u64) -> Submission {
    let kind = (x >> 3) % 12;
    let target = match (x >> 8) % 4 {
        0 => 0,
        1 => x,
        2 => x & 0xffff_ffff,
        _ => x.rotate_left(17),
    };
    let p = |k: u32| x.rotate_left(k) & if (x >> k) & 1 == 0 { 0xffff } else { u64::MAX };
    let mut args = [p(5), p(11) & 0x1_ffff, p(23), p(29) & 0xff];
    if kind == api::SUBMIT_TIMER {
        args[0] %= 1_000_000;
    }
    Submission {
        kind,
        target,
        args,
        msg: Msg {
            label: x >> 32,
            words: [x; 6],
        },
    }
}

fn fuzz(r: &mut Ring) -> Check {
    let poke = thread::spawn(poker, r.address()).map_err(|e| format!("(h) thread: {e}"))?;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (mut taken_total, mut done) = (0u64, 0u64);
    let mut seen = Vec::new();
    let mut next = 1000u64;
    while taken_total < 2000 {
        while r.sq_space() > 0 {
            x = xorshift(x);
            r.push(next, &random_sub(x));
            next += 1;
        }
        let taken = r
            .enter(8, 1, 1_000_000_000)
            .map_err(|e| format!("(h) enter: {e}"))?;
        taken_total += taken;
        while let Some(c) = r.pop() {
            seen.push(c.user_data);
            done += 1;
        }
        let _ = sys::yield_now();
    }
    // Everything taken completes (timers are short).
    while done < taken_total {
        r.enter(0, 1, u64::MAX)
            .map_err(|e| format!("(h) wait: {e}"))?;
        while let Some(c) = r.pop() {
            seen.push(c.user_data);
            done += 1;
        }
    }
    poke.join().map_err(|e| format!("(h) join: {e}"))?;
    seen.sort_unstable();
    let before = seen.len();
    seen.dedup();
    if done != taken_total || seen.len() != before {
        return fail(
            "(h) taken, completed, distinct",
            (taken_total, done, seen.len()),
        );
    }
    Ok(())
}

/// `ringcheck hold`: timers of an hour in flight, waiting in ENTER.
fn hold() -> Check {
    let mut r = Ring::setup(ring::DEFAULT_ADDRESS, 8).map_err(|e| format!("setup: {e}"))?;
    for i in 0..8 {
        r.push(i, &ipc::timer(3_600_000_000_000));
    }
    r.enter(8, 8, u64::MAX).map_err(|e| format!("enter: {e}"))?;
    fail("hold: the wait ended", r.header())
}
