//! Part (r) of `ipccheck regs`: an answer by `REPLY_RECV_REGS` reaches the call it answers,
//! not another call its caller waits in. A client submits a call to S1 (`SUBMIT_CALL`,
//! ticket t1) and then waits in a `CALL_REGS` to S2 (t2); S1 answers t1 by
//! `REPLY_RECV_REGS` while the client waits, and only then (S2 knows it once S1 has
//! answered S2's own call) S2 answers t2. The `CALL_REGS` must return S2's answer and t1's
//! answer must wait for `COLLECT`. A regression: the direct handoff checked only that the
//! caller's thread waited in a register call, so t1's answer was written into the
//! `CALL_REGS` frame (the call returned another call's answer) and t1 was lost. All three
//! on one core, where the handoff is direct.
//!
//! Roles: `ipccheck xs1`, `ipccheck xs2`, `ipccheck xclient`.

use crate::{expect_exit, fail, find_endpoint, msg, Check};
use alloc::format;
use ulib::abi::ipc as api;
use ulib::abi::res::Rights;
use ulib::abi::Priority;
use ulib::{ipc, sys};

/// Labels: the client's call to S1, to S2, its last one-way message, S2's call to S1.
const TO_S1: u64 = 0x71;
const TO_S2: u64 = 0x72;
const DONE: u64 = 0x73;
const PING: u64 = 0x74;
/// Values and labels of the answers.
const FROM_S1: u64 = 111;
const FROM_S2: u64 = 222;

/// Part (r), from the parent: the three roles on this core, each must exit 0.
pub fn run() -> Check {
    let here = sys::core().map_err(|e| format!("(r) core: {e}"))?;
    let mut pids = [None; 3];
    let mut r = Ok(());
    // S2 below the others: its go makes S1 run at once, so that S1 answers t1 (and waits
    // again) before S2's own call reaches it (queued first, it would take S1 off the
    // direct path).
    let roles = [
        ("xs1", Priority::App),
        ("xs2", Priority::Background),
        ("xclient", Priority::App),
    ];
    for (i, (role, prio)) in roles.into_iter().enumerate() {
        match sys::spawn_on("ipccheck", &[role], prio, here) {
            Ok(p) => pids[i] = Some(p),
            Err(e) => {
                r = Err(format!("(r) spawn {role}: {e}"));
                break;
            }
        }
    }
    if r.is_err() {
        // None may wait for ever on the others.
        for p in pids.into_iter().flatten() {
            let _ = sys::kill(p);
            let _ = sys::wait(Some(p));
        }
        return r;
    }
    // Every role reaped, whatever the first one says.
    let mut first = Ok(());
    for (p, what) in pids.into_iter().zip(["(r) S1", "(r) S2", "(r) client"]) {
        if let Some(p) = p {
            let r = expect_exit(p, what);
            if first.is_ok() {
                first = r;
            }
        }
    }
    first
}

/// S1: takes t1, waits for S2's go, answers t1 by `REPLY_RECV_REGS`, then serves S2's call
/// and takes the client's `DONE`.
pub fn s1() -> Check {
    let e1 = ipc::open_endpoint("here/endpoint/xs1", Rights(0x2f)).map_err(|e| format!("{e}"))?;
    let go = ipc::open_endpoint("here/endpoint/xsgo", Rights(0x2f)).map_err(|e| format!("{e}"))?;
    let t1 = ipc::recv(e1, u64::MAX).map_err(|e| format!("S1: t1: {e}"))?;
    if t1.msg.label != TO_S1 {
        return fail("S1: t1", t1.msg);
    }
    ipc::recv(go, u64::MAX).map_err(|e| format!("S1: go: {e}"))?;
    // The client waits in its `CALL_REGS` to S2 now.
    let mut next = ipc::reply_recv_regs(t1.request, FROM_S1, &msg(FROM_S1, 1), e1)
        .map_err(|e| format!("S1: answer t1: {e}"))?;
    loop {
        match next.msg.label {
            PING => {
                ipc::reply(next.request, 0, &msg(0, 0)).map_err(|e| format!("S1: {e}"))?;
            }
            DONE => return Ok(()),
            _ => return fail("S1: a request", next.msg),
        }
        next = ipc::recv(e1, u64::MAX).map_err(|e| format!("S1: receive: {e}"))?;
    }
}

/// S2: takes t2 (the client now waits in `CALL_REGS`), lets S1 answer t1, and answers t2
/// once S1 has (S1 answers S2's call only after its answer to t1).
pub fn s2() -> Check {
    let here = sys::core().map_err(|e| format!("{e}"))?;
    let e2 = ipc::open_endpoint("here/endpoint/xs2", Rights(0x2f)).map_err(|e| format!("{e}"))?;
    let t2 = ipc::recv(e2, u64::MAX).map_err(|e| format!("S2: t2: {e}"))?;
    if t2.msg.label != TO_S2 {
        return fail("S2: t2", t2.msg);
    }
    let go = find_endpoint(here, "xsgo")?;
    ipc::send(go, &msg(0, 0)).map_err(|e| format!("S2: go: {e}"))?;
    let e1 = find_endpoint(here, "xs1")?;
    ipc::call(e1, &msg(PING, 0)).map_err(|e| format!("S2: call S1: {e}"))?;
    ipc::reply(t2.request, FROM_S2, &msg(FROM_S2, 2)).map_err(|e| format!("S2: answer t2: {e}"))
}

/// The client: t1 submitted to S1, then a `CALL_REGS` to S2 that must return S2's answer;
/// t1's answer is then collected; `DONE` lets S1 go.
pub fn client() -> Check {
    let here = sys::core().map_err(|e| format!("{e}"))?;
    let e1 = find_endpoint(here, "xs1")?;
    let e2 = find_endpoint(here, "xs2")?;
    let mut sub = ipc::op(api::SUBMIT_CALL, e1.0, [0; 4]);
    sub.msg = msg(TO_S1, 1);
    let t1 = ipc::submit(&sub).map_err(|e| format!("client: submit t1: {e}"))?;
    let got = ipc::call_regs(e2, &msg(TO_S2, 2));
    let first = ipc::collect(t1, 60_000_000_000);
    let _ = ipc::send(e1, &msg(DONE, 0));
    match got {
        Ok((FROM_S2, m)) if m.label == FROM_S2 => {}
        other => return fail("(r) the CALL_REGS to S2 answered with", other),
    }
    match first {
        Ok(c) if c.status == 0 && c.value == FROM_S1 && c.msg.label == FROM_S1 => Ok(()),
        other => fail("(r) t1, submitted to S1, answered with", other),
    }
}
