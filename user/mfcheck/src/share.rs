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
    // The administrator's open beside the users' is not held to their shares.
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
