//! `mfcheck share M`: the users' shares of the window to machine M (`machd`'s
//! `WINDOW_SHARES`, `libs/shares`). Before them, one user's requests that take long (here
//! remote waits; calls to a slow server alike) could fill the window and the held queue,
//! and every other user's request then ended `Busy`, or `TimedOut` while it was held.
//!
//! Run as the administrator. One thread acts in turn as two other users
//! (`THREAD_SETUSER`): each starts `mfcheck nap` on machine M (as itself), then submits
//! [`SUBMITS`] waits for it without waiting for their answers. The first user's
//! `per_user` (half of the window) are taken and the rest answered `Busy` at once; the
//! second user's only up to `users` (three quarters of the window, both users together).
//! `machd` then says that many remote waits are in flight and none held, and a ping of the
//! administrator's is answered. The naps are then killed and every answer collected.
//!
//! `mfcheck fsshare M`: machine M's open files are shared out by user also for programs of
//! other machines (`machd` opens them there and names their user, `abi::fs::FS_OPEN`).
//! A child acting as user 2000 opens files `mM:SF-K.TXT` until refused: `PER_USER` (8) are
//! opened, then `Limit` (before, `machd` opened them as itself, trusted with the whole
//! table: 16); all are closed and deleted, and the administrator then opens one.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use ulib::abi::ipc::{Msg, Submission, ANY, SUBMIT_CALL};
use ulib::abi::mach::{self, FN_MACH};
use ulib::abi::res::{ResId, UserId};
use ulib::abi::Error;
use ulib::mach as mach_client;
use ulib::{fnid, ipc, res, sys};

/// Waits each user submits: more than its share.
const SUBMITS: usize = 20;
/// The users, in the order they submit.
const USERS: [u32; 2] = [2000, 2001];
/// How long the naps would sleep (they are killed long before).
const NAP_MS: &str = "300000";
/// Bound of the waits for answers (a hang guard only).
const HANG_NS: u64 = 60_000_000_000;

/// `mfcheck share M`.
pub fn run(m: u8) -> Result<String, String> {
    let server = ResId(
        fnid::lookup(FN_MACH)
            .map_err(|e| format!("{FN_MACH}: {e}"))?
            .0,
    );
    let mut naps = Vec::new();
    let mut out = 0;
    let r = steps(m, server, &mut naps, &mut out);
    // As the administrator again: the naps ended (every wait then answered), the answers
    // collected.
    let _ = res::thread_setuser(None);
    for nap in &naps {
        let _ = mach_client::kill(nap);
    }
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HANG_NS);
    while out > 0 && sys::clock_ns().unwrap_or(u64::MAX) < end {
        if ipc::collect(ANY, 1_000_000_000).is_ok() {
            out -= 1;
        }
    }
    r
}

fn steps(
    m: u8,
    server: ResId,
    naps: &mut Vec<mach_client::Remote>,
    out: &mut usize,
) -> Result<String, String> {
    let shares = shares::Shares::of(mrpc::WINDOW as usize);
    let taken = [shares.per_user, shares.users - shares.per_user];
    for user in USERS {
        res::thread_setuser(Some(UserId(user))).map_err(|e| format!("act as {user}: {e}"))?;
        let nap = mach_client::spawn(m, mach::ANY_CORE, &["mfcheck", "nap", NAP_MS])
            .map_err(|e| format!("user {user}: spawn nap on machine {m}: {e}"))?;
        naps.push(nap);
        for i in 0..SUBMITS {
            let sub = Submission {
                kind: SUBMIT_CALL,
                target: server.0,
                args: [0; 4],
                msg: Msg {
                    label: mach::OP_WAIT,
                    words: nap.words(u64::MAX),
                },
            };
            ipc::submit(&sub).map_err(|e| format!("user {user}: submit wait {i}: {e}"))?;
            *out += 1;
        }
    }
    res::thread_setuser(None).map_err(|e| format!("act as the administrator: {e}"))?;
    // The refusals come at once; no other answer may come while the naps sleep.
    let busy = USERS.len() * SUBMITS - taken.iter().sum::<usize>();
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HANG_NS);
    let mut refused = 0;
    while refused < busy {
        let left = end.saturating_sub(sys::clock_ns().unwrap_or(u64::MAX));
        if left == 0 {
            return Err(format!(
                "{refused} of {SUBMITS} x {} waits refused Busy within {} s; expected {busy} \
                 ({} and {} taken)",
                USERS.len(),
                HANG_NS / 1_000_000_000,
                taken[0],
                taken[1]
            ));
        }
        let c = match ipc::collect(ANY, left) {
            Ok(c) => c,
            Err(Error::TimedOut) => continue,
            Err(e) => return Err(format!("collect: {e}")),
        };
        *out -= 1;
        let busy_code = Error::Busy as u64;
        match (c.status, c.value) {
            (0, v) | (v, _) if v == busy_code => refused += 1,
            other => return Err(format!("a wait answered {other:?} while its nap sleeps")),
        }
    }
    let (v, me) = ipc::call(
        server,
        &Msg {
            label: mach::OP_SELF,
            ..Msg::default()
        },
    )
    .map_err(|e| format!("OP_SELF: {e}"))?;
    let (waits, held) = (me.words[4], me.words[5]);
    let want = shares.users as u64;
    if v != 0 || waits != want || held != 0 {
        return Err(format!(
            "machd says {waits} remote waits in flight and {held} held (answer {v}); \
             expected {want} and 0"
        ));
    }
    match ipc::call(
        server,
        &Msg {
            label: mach::OP_PING,
            words: [u64::from(m), 0, 0, 0, 0, 0],
        },
    ) {
        Ok((0, _)) => {}
        other => {
            return Err(format!(
                "the administrator's ping beside the users' waits: {other:?}"
            ))
        }
    }
    Ok(format!(
        ": users {} and {} had {} and {} waits taken of {SUBMITS} each, {busy} refused Busy; \
         the administrator's ping answered",
        USERS[0], USERS[1], taken[0], taken[1]
    ))
}

/// `mfcheck fsshare M`: the check runs in a child acting as user 2000 (`fsshare-user`: a
/// thread acting as another user could not attach its request ICAs in this process's
/// address space, which is the administrator's).
pub fn files(m: u8) -> Result<String, String> {
    let arg = format!("{m}");
    let child = sys::spawn("mfcheck", &["fsshare-user", &arg], ulib::abi::Priority::App)
        .map_err(|e| format!("spawn fsshare-user: {e}"))?;
    match sys::wait(Some(child)) {
        Ok((_, st)) if st.how == ulib::abi::ENDED_EXIT && st.code == 0 => {}
        other => {
            return Err(format!(
                "user 2000's check ended {other:?} (its line says why)"
            ))
        }
    }
    // And the administrator may still open one there.
    let name = format!("m{m}:SF-ADM.TXT");
    let fd = ulib::fs::open(&name, ulib::fs::MODE_WRITE)
        .map_err(|e| format!("the administrator's open of {name}: {e}"))?;
    let _ = ulib::fs::close(fd);
    ulib::fs::unlink(&name).map_err(|e| format!("delete {name}: {e}"))?;
    Ok(format!(
        ": user 2000 opened {} files of machine {m}, then Limit",
        fsopen::PER_USER
    ))
}

/// `mfcheck fsshare-user M` (as user 2000): exit 0 if it opened `PER_USER` files of machine
/// M, then met `Limit`.
pub fn files_as_user(m: u8) -> i32 {
    let r = (|| {
        res::setuser(UserId(USERS[0])).map_err(|e| format!("setuser 2000: {e}"))?;
        let name = |k: usize| format!("m{m}:SF-{k}.TXT");
        let mut held = Vec::new();
        let mut refused = None;
        for k in 0..=fsopen::SLOTS {
            match ulib::fs::open(&name(k), ulib::fs::MODE_WRITE) {
                Ok(fd) => held.push(fd),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let n = held.len();
        for fd in held {
            let _ = ulib::fs::close(fd);
        }
        let mut left = Vec::new();
        for k in 0..=fsopen::SLOTS {
            match ulib::fs::unlink(&name(k)) {
                Ok(()) | Err(Error::NoSuchResource) => {}
                Err(e) => left.push(format!("{}: {e}", name(k))),
            }
        }
        if (n, refused) != (fsopen::PER_USER, Some(Error::Limit)) {
            return Err(format!(
                "user 2000 opened {n} files of machine {m}, then {refused:?}; expected {}, \
                 then Limit",
                fsopen::PER_USER
            ));
        }
        if !left.is_empty() {
            return Err(format!("files not deleted: {}", left.join(", ")));
        }
        Ok(())
    })();
    match r {
        Ok(()) => 0,
        Err(e) => {
            ulib::println!("mfcheck fsshare-user: FAILED: {e}");
            1
        }
    }
}

/// The function `mfcheck holder` serves (as user 2000, on the machine called).
const HOLDER: &str = "pub.mfhold";
/// `HOLDER`'s labels: keep the request unanswered until `RELEASE`; answer how many are
/// kept; answer every one kept (and every later `HOLD` at once); answer how many `HOLD`s
/// came after `RELEASE`, and end.
const HOLD: u64 = 1;
const COUNT: u64 = 2;
const RELEASE: u64 = 3;
const QUIT: u64 = 4;
/// Calls the user makes at once: as many as the machine has call workers (`machd`'s
/// `calls::CALL_WORKERS`, which this must equal).
const HELD_CALLS: u64 = 4;
/// The timeout of each call (at most `DEADLINE_MAX_NS`).
const CALL_NS: u64 = 20_000_000_000;
/// The machine the user's threads call (set once, before they start).
static HOLD_MACHINE: ulib::cell::Local<u8> = ulib::cell::Local::new(0);

/// `mfcheck holder`: serves [`HOLDER`] until `QUIT` or 60 s without a request.
pub fn holder() -> i32 {
    let r = (|| {
        let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
        let ep = ipc::open_endpoint(
            &format!("here/endpoint/mfhold-{}", me.serial()),
            ulib::abi::res::Rights(0x2f),
        )
        .map_err(|e| format!("endpoint: {e}"))?;
        fnid::register(HOLDER, ep).map_err(|e| format!("register {HOLDER}: {e}"))?;
        let mut held = Vec::new();
        let mut released = false;
        let mut after = 0u64;
        loop {
            let r = match ipc::recv(ep, HANG_NS) {
                Ok(r) => r,
                Err(e) => {
                    for h in held {
                        let _ = ipc::reply(h, 0, &Msg::default());
                    }
                    return Err(format!("receive: {e}"));
                }
            };
            let answer = |v: u64| {
                let _ = ipc::reply(
                    r.request,
                    0,
                    &Msg {
                        label: 0,
                        words: [v, 0, 0, 0, 0, 0],
                    },
                );
            };
            match r.msg.label & 0xff {
                HOLD if !released => held.push(r.request),
                HOLD => {
                    after += 1;
                    answer(0);
                }
                COUNT => answer(held.len() as u64),
                RELEASE => {
                    released = true;
                    for h in held.drain(..) {
                        let _ = ipc::reply(h, 0, &Msg::default());
                    }
                    answer(0);
                }
                QUIT => {
                    answer(after);
                    return Ok(());
                }
                _ => answer(0),
            }
        }
    })();
    match r {
        Ok(()) => 0,
        Err(e) => {
            ulib::println!("mfcheck holder: FAILED: {e}");
            1
        }
    }
}

/// One of `callshare-user`'s threads: a `HOLD` call, 0 if it was answered.
fn hold_call(_: u64) -> u64 {
    let m = HOLD_MACHINE.with(|m| *m);
    match mach_client::call(m, HOLDER, HOLD, [0; 6], None, CALL_NS) {
        Ok(a) if a.value == 0 => 0,
        Ok(a) => a.value,
        Err(e) => e as u64,
    }
}

/// `mfcheck callshare-user M` (as user 2000): [`HELD_CALLS`] `HOLD` calls at once, one
/// thread each; exit 0 if every one was answered.
pub fn calls_as_user(m: u8) -> i32 {
    if let Err(e) = res::setuser(UserId(USERS[0])) {
        ulib::println!("mfcheck callshare-user: setuser: {e}");
        return 1;
    }
    HOLD_MACHINE.with(|h| *h = m);
    let mut threads = Vec::new();
    for _ in 0..HELD_CALLS {
        match ulib::thread::spawn(hold_call, 0) {
            Ok(t) => threads.push(t),
            Err(e) => ulib::println!("mfcheck callshare-user: thread: {e}"),
        }
    }
    let all = threads.len() as u64 == HELD_CALLS;
    let answered = threads.into_iter().map(|t| t.join());
    let ok = answered.filter(|r| *r == Ok(0)).count() as u64;
    if all && ok == HELD_CALLS {
        0
    } else {
        ulib::println!("mfcheck callshare-user: {ok} of {HELD_CALLS} calls answered");
        1
    }
}

/// `mfcheck callshare M`: machine M's call workers are shared out by user. User 2000's
/// [`HOLDER`] there keeps every `HOLD` call unanswered; a child acting as user 2000 makes
/// [`HELD_CALLS`] of them at once (as many as M has call workers). The administrator's
/// `COUNT` calls to the same server must then be answered, and the count must come to
/// exactly half of the workers (the user's share): before, the user's calls took every
/// worker and the administrator's timed out. Then `RELEASE`: every call of the child is
/// answered, and it exits 0; the holder must have had the other half of them come after
/// `RELEASE` (they waited for a worker meanwhile). Taken in order, the count is four, or
/// (if the last two calls reached machine M only after the counts) none come after
/// `RELEASE`; only calls that reach machine M after `RELEASE` itself would go unseen.
pub fn calls(m: u8) -> Result<String, String> {
    res::thread_setuser(Some(UserId(USERS[0]))).map_err(|e| format!("act as 2000: {e}"))?;
    let held = mach_client::spawn(m, mach::ANY_CORE, &["mfcheck", "holder"]);
    res::thread_setuser(None).map_err(|e| format!("act as the administrator: {e}"))?;
    let held = held.map_err(|e| format!("spawn holder on machine {m}: {e}"))?;
    // The holder serves before the user's calls are made (else they would find no
    // function there and end at once): its first `COUNT` answered.
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HANG_NS);
    while !matches!(
        mach_client::call(m, HOLDER, COUNT, [0; 6], None, 0),
        Ok(a) if a.value == 0
    ) {
        if sys::clock_ns().unwrap_or(u64::MAX) > end {
            let _ = mach_client::kill(&held);
            return Err(format!("{HOLDER} not served on machine {m}"));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
    let arg = format!("{m}");
    let child = match sys::spawn(
        "mfcheck",
        &["callshare-user", &arg],
        ulib::abi::Priority::App,
    ) {
        Ok(c) => c,
        Err(e) => {
            let _ = mach_client::kill(&held);
            return Err(format!("spawn callshare-user: {e}"));
        }
    };
    let r = count_held(m);
    // Every held call answered, also on failure (the child then ends), and the holder ends.
    let released = mach_client::call(m, HOLDER, RELEASE, [0; 6], None, CALL_NS);
    let child_end = sys::wait(Some(child));
    let quit = mach_client::call(m, HOLDER, QUIT, [0; 6], None, CALL_NS);
    if mach_client::wait_timeout(&held, CALL_NS).is_err() {
        let _ = mach_client::kill(&held);
    }
    let count = r?;
    released.map_err(|e| format!("RELEASE: {e}"))?;
    match child_end {
        Ok((_, st)) if st.how == ulib::abi::ENDED_EXIT && st.code == 0 => {}
        other => return Err(format!("user 2000's calls ended {other:?}")),
    }
    let after = quit.map_err(|e| format!("QUIT: {e}"))?.words[0];
    if after != HELD_CALLS - count {
        return Err(format!(
            "{after} of user 2000's calls reached the holder after RELEASE; expected {}",
            HELD_CALLS - count
        ));
    }
    Ok(format!(
        ": user 2000 had {count} of its {HELD_CALLS} calls under way on machine {m}, the \
         administrator's answered meanwhile"
    ))
}

/// Ask the holder how many calls it keeps until that is the user's share of the call
/// workers (a hang guard bounds it); then once more, which must say the same.
fn count_held(m: u8) -> Result<u64, String> {
    let share = shares::Shares::of(HELD_CALLS as usize).per_user as u64;
    let end = sys::clock_ns().unwrap_or(0).saturating_add(HANG_NS);
    loop {
        let count = mach_client::call(m, HOLDER, COUNT, [0; 6], None, 0);
        let last = match count {
            Ok(a) if a.value == 0 && a.words[0] >= share => {
                let again = mach_client::call(m, HOLDER, COUNT, [0; 6], None, 0)
                    .map_err(|e| format!("COUNT again: {e}"))?;
                return if again.words[0] == share {
                    Ok(share)
                } else {
                    Err(format!(
                        "user 2000 had {} calls under way, more than its share {share}",
                        again.words[0]
                    ))
                };
            }
            other => other,
        };
        if sys::clock_ns().unwrap_or(u64::MAX) > end {
            return Err(format!(
                "the holder never kept {share} calls while the administrator's were \
                 answered (last: {:?})",
                last.map(|a| (a.value, a.words[0]))
            ));
        }
        let _ = sys::sleep_ns(10_000_000);
    }
}
