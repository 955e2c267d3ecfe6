//! `ipccheck regs [CORE]`: the register calls (`CALL_REGS`, `REPLY_RECV_REGS`: messages in
//! registers, answered by direct handoff on one core), with the callers on CORE (the kernel
//! test `ipc::register_calls` counts the direct switches around it):
//!
//! | part | what |
//! |---|---|
//! | (m) | two register callers and one memory caller (`CALL`), 50 calls each, served by one `REPLY_RECV_REGS` per request: every answer, all seven message words, goes to the caller that asked, in its order, and the sender, its thread and its user are the kernel's; one-way sends arrive with handle 0 |
//! | (n) | register callers served the memory way (`REPLY_RECV`), and a memory reply (`REPLY`) to a register call |
//! | (o) | errors: a register call to no endpoint, a closed one, or a process id is the error `CALL` gives, with the message registers untouched; an unknown handle is `NoSuchResource`, and nothing is received (a queued message stays for the next call) |
//! | (p) | a server that ends holding a register call: the caller gets `Gone` |
//! | (q) | a caller killed while the server holds its register call: the answer goes nowhere, the server waits on for the next request |
//! | (r) | a `REPLY_RECV_REGS` answer to a call its caller submitted earlier, while that caller waits in another `CALL_REGS`: each call gets its own answer (`cross`) |
//!
//! Roles (the child side): `ipccheck rtagged EP N TAG [memory]`, `ipccheck rholder`.

use crate::{endpoint_arg, expect_exit, fail, find_endpoint, msg, Check};
use alloc::format;
use ulib::abi::ipc::{self as api, Msg};
use ulib::abi::res::{ResId, Rights};
use ulib::abi::{Error, Pid, Priority};
use ulib::{ipc, res, sys};

/// Calls each caller of (m) and (n) makes.
const CALLS: u64 = 50;
/// Label of the one-way message that ends a caller's part.
const DONE: u64 = 7;
/// Label of a call the holder of (p) keeps unanswered.
const HOLD: u64 = 5;

/// A request of caller `tag`, its `i`th: every word says who and which.
fn request(tag: u64, i: u64) -> Msg {
    Msg {
        label: 0x100 + tag,
        words: [i, tag, i * 3, i ^ 0x5a5a, tag << 40, u64::MAX - i],
    }
}

/// The answer to `request(tag, i)`: every word changed, so a word lost on the way shows.
fn answer_of(m: &Msg) -> Msg {
    Msg {
        label: m.label + 1,
        words: m.words.map(|w| w.wrapping_mul(7).wrapping_add(1)),
    }
}

/// The value answered with `request(tag, i)`.
fn value_of(tag: u64, i: u64) -> u64 {
    2 * i + tag
}

/// `ipccheck regs [CORE]`: parts (m) to (r).
pub fn regs(core: usize) -> Check {
    let ep = ipc::open_endpoint("here/endpoint/regs", Rights(0x2f))
        .map_err(|e| format!("(m) endpoint: {e}"))?;
    let ep_arg = format!("{:#x}", ep.0);
    let n_arg = format!("{CALLS}");
    let me = res::getuser().map_err(|e| format!("getuser: {e}"))?;
    // (m): two register callers, one memory caller (tag 3).
    let mut callers = [Pid(0); 3];
    for (i, c) in callers.iter_mut().enumerate() {
        let tag = format!("{}", i + 1);
        let how = if i < 2 { "registers" } else { "memory" };
        *c = sys::spawn_on(
            "ipccheck",
            &["rtagged", &ep_arg, &n_arg, &tag, how],
            Priority::App,
            core,
        )
        .map_err(|e| format!("(m) spawn: {e}"))?;
    }
    serve(ep, &callers, me.0, true)?;
    for c in callers {
        expect_exit(c, "(m) caller")?;
    }
    // (n): register callers served by `REPLY_RECV`; the last call answered by `REPLY`.
    for (i, c) in callers.iter_mut().take(2).enumerate() {
        let tag = format!("{}", i + 1);
        *c = sys::spawn_on(
            "ipccheck",
            &["rtagged", &ep_arg, &n_arg, &tag],
            Priority::App,
            core,
        )
        .map_err(|e| format!("(n) spawn: {e}"))?;
    }
    serve(ep, &callers[..2], me.0, false)?;
    for c in &callers[..2] {
        expect_exit(*c, "(n) caller")?;
    }
    errors(ep)?;
    held(ep, &ep_arg, core)?;
    res::close(ep).map_err(|e| format!("close endpoint: {e}"))?;
    crate::cross::run()?;
    Ok(())
}

/// Serve `callers` (tags 1, 2, ...) until each has sent `DONE`, checking every request;
/// with `regs` by `REPLY_RECV_REGS`, else by `REPLY_RECV` with each caller's last call
/// answered by `REPLY`.
fn serve(ep: ResId, callers: &[Pid], user: u32, regs: bool) -> Check {
    let part = if regs { "(m)" } else { "(n)" };
    let mut answer = (0u64, 0u64, Msg::default());
    let mut served = [0u64; 3];
    let mut done = 0;
    while done < callers.len() {
        let r = if regs {
            ipc::reply_recv_regs(answer.0, answer.1, &answer.2, ep)
        } else {
            ipc::reply_recv(answer.0, answer.1, &answer.2, ep, 5_000_000_000)
        }
        .map_err(|e| format!("{part} receive after {served:?}: {e}"))?;
        answer = (0, 0, Msg::default());
        let tag = r.msg.words[1];
        let Some(&sender) = callers.get((tag as usize).wrapping_sub(1)) else {
            return fail(&format!("{part} tag"), r);
        };
        if r.sender != sender || r.sender_user != u64::from(user) || r.sender_thread == 0 {
            return fail(
                &format!("{part} sender, its thread and user"),
                (r, sender, user),
            );
        }
        let i = tag as usize - 1;
        if r.msg.label == DONE {
            if r.request != 0 || r.kind != api::SUBMIT_SEND || served[i] != CALLS {
                return fail(&format!("{part} one-way message"), (r, served));
            }
            done += 1;
            continue;
        }
        served[i] += 1;
        if r.request == 0 || r.kind != api::SUBMIT_CALL || r.msg != request(tag, served[i]) {
            return fail(&format!("{part} request"), (r, served));
        }
        if r.endpoint != ep.0 {
            return fail(&format!("{part} endpoint"), (r.endpoint, ep));
        }
        let reply = answer_of(&r.msg);
        if !regs && served[i] == CALLS {
            ipc::reply(r.request, value_of(tag, served[i]), &reply)
                .map_err(|e| format!("{part} reply: {e}"))?;
            continue;
        }
        answer = (r.request, value_of(tag, served[i]), reply);
    }
    Ok(())
}

/// (o): errors of the register calls, as their memory twins give them.
fn errors(ep: ResId) -> Check {
    let m = request(9, 9);
    let closed = ipc::open_endpoint("here/endpoint/regs-closed", Rights(0x2f))
        .map_err(|e| format!("(o) endpoint: {e}"))?;
    res::close(closed).map_err(|e| format!("(o) close: {e}"))?;
    let me = sys::getpid().map_err(|e| format!("(o) getpid: {e}"))?;
    for (what, target) in [
        ("no endpoint", ResId(0)),
        ("a closed endpoint", closed),
        ("a process id", ResId(me.0)),
        ("garbage", ResId(u64::MAX)),
    ] {
        let by_regs = ipc::call_regs(target, &m);
        let by_memory = ipc::call(target, &m);
        match (by_regs, by_memory) {
            (Err(a), Err(b)) if a == b => {}
            other => return fail(&format!("(o) a register call to {what}"), other),
        }
    }
    // The message registers stay as they were on an error: checked by the wrapper's
    // contract only through the error itself, so look at them directly.
    let kept = raw_call_regs_error(ResId(0), &m);
    if kept != Some(m) {
        return fail("(o) message registers after an error", kept);
    }
    // A one-way message of our own waits; an unknown handle receives nothing.
    let mut s = ipc::op(api::SUBMIT_SEND, ep.0, [0; 4]);
    s.msg = msg(DONE, 0);
    let t = ipc::submit(&s).map_err(|e| format!("(o) send to self: {e}"))?;
    ipc::collect(t, u64::MAX).map_err(|e| format!("(o) collect the send: {e}"))?;
    let r = ipc::reply_recv_regs(999_999, 1, &m, ep);
    if r != Err(Error::NoSuchResource) {
        return fail("(o) an unknown handle", r);
    }
    let r =
        ipc::reply_recv_regs(0, 0, &m, ep).map_err(|e| format!("(o) the queued message: {e}"))?;
    if r.msg.label != DONE || r.request != 0 || r.sender != me {
        return fail("(o) the queued message", r);
    }
    Ok(())
}

/// A `CALL_REGS` expected to fail: the message registers as the kernel left them.
fn raw_call_regs_error(target: ResId, m: &Msg) -> Option<Msg> {
    let mut out = *m;
    let rax: u64;
    // SAFETY: no memory is passed; the registers named are declared as outputs.
    unsafe {
        core::arch::asm!("syscall",
            inlateout("rax") ulib::abi::syscall::CALL_REGS => rax, in("rdi") target.0,
            lateout("rdx") _, inout("rsi") out.label, inout("r10") out.words[0],
            inout("r8") out.words[1], inout("r9") out.words[2], inout("r12") out.words[3],
            inout("r13") out.words[4], inout("r14") out.words[5], out("rcx") _,
            out("r11") _, options(nostack));
    }
    (rax != 0).then_some(out)
}

/// (p) and (q): a server that ends holding a register call; a caller killed while its
/// register call is held.
fn held(ep: ResId, ep_arg: &str, core: usize) -> Check {
    // (p)
    let holder = sys::spawn_on("ipccheck", &["rholder"], Priority::App, core)
        .map_err(|e| format!("(p) spawn: {e}"))?;
    let hep = find_endpoint(core, "rholder")?;
    let r = ipc::call_regs(hep, &msg(HOLD, 1));
    if r.map(|_| ()) != Err(Error::Gone) {
        return fail("(p) a register call its server ended holding", r);
    }
    expect_exit(holder, "(p) holder")?;
    // (q)
    let victim = sys::spawn_on(
        "ipccheck",
        &["rtagged", ep_arg, "1", "1"],
        Priority::App,
        core,
    )
    .map_err(|e| format!("(q) spawn: {e}"))?;
    let r =
        ipc::reply_recv_regs(0, 0, &Msg::default(), ep).map_err(|e| format!("(q) receive: {e}"))?;
    if r.sender != victim || r.request == 0 {
        return fail("(q) the victim's call", r);
    }
    sys::kill(victim).map_err(|e| format!("(q) kill: {e}"))?;
    let _ = sys::wait(Some(victim));
    // Answer into nothing, then wait for the next request: a caller of ours, tag 2.
    let next = sys::spawn_on(
        "ipccheck",
        &["rtagged", ep_arg, "1", "2"],
        Priority::App,
        core,
    )
    .map_err(|e| format!("(q) spawn: {e}"))?;
    let r2 = ipc::reply_recv_regs(r.request, 1, &Msg::default(), ep)
        .map_err(|e| format!("(q) answer the killed caller: {e}"))?;
    if r2.sender != next || r2.msg != request(2, 1) {
        return fail("(q) the request after", r2);
    }
    let r3 = ipc::reply_recv_regs(r2.request, value_of(2, 1), &answer_of(&r2.msg), ep)
        .map_err(|e| format!("(q) answer: {e}"))?;
    if r3.msg.label != DONE || r3.sender != next {
        return fail("(q) the caller's one-way message", r3);
    }
    expect_exit(next, "(q) caller")?;
    let again = ipc::reply_recv_regs(r.request, 1, &Msg::default(), ep);
    if again != Err(Error::NoSuchResource) {
        return fail("(q) the killed caller's handle after its answer", again);
    }
    Ok(())
}

/// Child: N register calls (`memory`: `CALL`s) tagged TAG, each answer checked word by
/// word; then `DONE`.
pub fn rtagged(args: &[&str]) -> Check {
    let ep = endpoint_arg(args)?;
    let n: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let tag: u64 = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1);
    let memory = args.get(5) == Some(&"memory");
    for i in 1..=n {
        let m = request(tag, i);
        let (v, reply) = if memory {
            ipc::call(ep, &m)
        } else {
            ipc::call_regs(ep, &m)
        }
        .map_err(|e| format!("call {i}: {e}"))?;
        if v != value_of(tag, i) || reply != answer_of(&m) {
            return fail("the register answer", (tag, i, v, reply));
        }
    }
    let mut m = msg(DONE, 0);
    m.words[1] = tag;
    ipc::send(ep, &m).map_err(|e| format!("send: {e}"))
}

/// Child of (p): receive one request by register and end without answering it.
pub fn rholder() -> Check {
    let ep = ipc::open_endpoint("here/endpoint/rholder", Rights(0x2f))
        .map_err(|e| format!("endpoint: {e}"))?;
    let r = ipc::reply_recv_regs(0, 0, &Msg::default(), ep).map_err(|e| format!("{e}"))?;
    if r.msg.label != HOLD || r.request == 0 {
        return fail("(p) the held call", r);
    }
    Ok(())
}
