//! A remote background program's output on this machine's console (`abi::mach::OP_FOLLOW`,
//! P0's `remote` command: the job runs there, its output comes here).
//!
//! A program spawned on another machine with `SPAWN_RELAY` writes to a pipe its `machd`
//! holds; in the foreground the shell itself asks for what the pipe holds (`OP_OUTPUT`)
//! until it ends. In the background nobody at the shell asks, so this `machd` does: the
//! network thread sends an `R_OUTPUT` request for each followed program whose previous one
//! ended and whose pause is over ([`tick`]) and whose user has room in its share of that
//! machine's window (`WINDOW_SHARES`; one look per user and machine goes regardless, so a
//! user whose waits fill the share still sees the output of the program it waits for),
//! prints what the answer carries ([`done`]),
//! asks again at once while there is output, after [`POLL_NS`] when there was none, and
//! forgets the program when its output has ended, or when the request failed (its machine
//! gone: the reason is printed). One request per program is in flight at a time, so its
//! output is printed in order.
//!
//! `OP_UNFOLLOW` (the shell's `wait` for such a job, which then reads the rest itself) is
//! answered once no request for the program is in flight ([`unfollow`]). A user other than
//! the administrator and the kernel follows at most 8 programs at once, all such users 12
//! (`FOLLOW_SHARES`, `Limit`).

use crate::State;
use alloc::vec::Vec;
use mrpc::client::{Done, Ticket};
use ulib::abi::ipc::{Msg, Received};
use ulib::abi::mach::{self, FOLLOW_MAX};
use ulib::abi::{Error, Pid};
use ulib::{ipc, println};

/// How the follow slots are shared out among the local users (`libs/shares`).
const FOLLOW_SHARES: shares::Shares = shares::Shares::of(FOLLOW_MAX);

/// Pause before looking again at a program's output when the last look found nothing.
const POLL_NS: u64 = 20_000_000;

/// A followed program.
pub struct Followed {
    machine: u8,
    epoch: u32,
    pid: Pid,
    /// The user it was spawned for (its `R_OUTPUT`s act as that user).
    user: u32,
    /// The request under way.
    asking: Option<Ticket>,
    /// When to ask next.
    next: u64,
    /// A local `OP_UNFOLLOW` waiting for the request under way to end.
    unfollow: Option<u64>,
    /// Looks in a row that ended `TimedOut` (a slow machine: asked again, up to
    /// [`LATE_MAX`]; a dead one ends them `Gone` once it is known down).
    late: u32,
}

/// Looks in a row that may end `TimedOut` before the program is forgotten (a hang guard).
const LATE_MAX: u32 = 30;

fn target(s: &State, r: &Received) -> Result<(u8, u32, Pid), Error> {
    let w = r.msg.words;
    let m = u8::try_from(w[0])
        .ok()
        .filter(|&m| m < s.n && m != s.me)
        .ok_or(Error::InvalidArgument)?;
    let epoch = u32::try_from(w[1]).map_err(|_| Error::InvalidArgument)?;
    Ok((m, epoch, Pid(w[2])))
}

/// `OP_FOLLOW` from a local program acting as `user`.
pub fn follow(s: &mut State, r: &Received, user: u32) -> Result<(), Error> {
    let (machine, epoch, pid) = target(s, r)?;
    if !s
        .followed
        .iter()
        .any(|f| f.machine == machine && f.epoch == epoch && f.pid == pid && f.user == user)
    {
        // Within the user's share of the slots (`shares`: half for one user other than the
        // administrator, three quarters for all of them).
        if s.followed.len() >= FOLLOW_MAX
            || !FOLLOW_SHARES.allows(user, s.followed.iter().map(|f| f.user))
        {
            return Err(Error::Limit);
        }
        s.followed.push(Followed {
            machine,
            epoch,
            pid,
            user,
            asking: None,
            next: 0,
            unfollow: None,
            late: 0,
        });
    }
    ipc::reply(r.request, 0, &Msg::default())
}

/// `OP_UNFOLLOW` for `user`: answered now, or once the request under way ends.
pub fn unfollow(s: &mut State, r: &Received, user: u32) -> Result<(), Error> {
    let (machine, epoch, pid) = target(s, r)?;
    let i = s
        .followed
        .iter()
        .position(|f| {
            f.machine == machine
                && f.epoch == epoch
                && f.pid == pid
                && f.user == user
                && f.unfollow.is_none()
        })
        .ok_or(Error::NoSuchProcess)?;
    if s.followed[i].asking.is_some() {
        s.followed[i].unfollow = Some(r.request);
        return Ok(());
    }
    s.followed.swap_remove(i);
    ipc::reply(r.request, 0, &Msg::default())
}

/// Start the looks that are due (and forget the programs of machines known down).
pub fn tick(s: &mut State, now: u64) {
    let down: Vec<usize> = (0..s.followed.len())
        .filter(|&i| {
            let f = &s.followed[i];
            f.asking.is_none()
                && f.unfollow.is_none()
                && s.members.state(f.machine, now) == Some(mrpc::members::State::Down)
        })
        .collect();
    for &i in down.iter().rev() {
        let f = s.followed.swap_remove(i);
        println!(
            "machd: the output of {} is lost: {}",
            ulib::mach::spell_pid(f.machine, f.pid),
            Error::Gone
        );
    }
    for i in 0..s.followed.len() {
        let f = &s.followed[i];
        if f.asking.is_some() || f.unfollow.is_some() || now < f.next {
            continue;
        }
        // A look counts in its user's share of the machine's window, as a request does;
        // past it, one look per user and machine still goes (only mrpc's window bounds
        // it): a user whose waits fill its share may be waiting for the very program
        // whose output this look takes, which blocks on its full pipe until it is taken
        // (found by a review). Another look waits for a later tick.
        let (to, user) = (f.machine, f.user);
        let looking = asking_to(&s.followed, to).any(|u| u == user);
        if looking && !crate::WINDOW_SHARES.allows(user, s.window_users(to)) {
            s.followed[i].next = now.saturating_add(POLL_NS);
            continue;
        }
        let f = &s.followed[i];
        let epoch = f.epoch;
        let payload = f.pid.0.to_le_bytes();
        let deadline = now.saturating_add(mach::DEFAULT_DEADLINE_NS);
        match s.client.start_in(
            now,
            to,
            crate::ops::R_OUTPUT,
            user,
            &payload,
            deadline,
            Some(epoch),
        ) {
            Ok((ticket, bytes)) => {
                s.followed[i].asking = Some(ticket);
                s.send(to, &bytes);
            }
            // Too many requests in flight to that machine: the next tick tries again.
            Err(_) => s.followed[i].next = now.saturating_add(POLL_NS),
        }
    }
}

/// When the next look is due (`u64::MAX`: none).
pub fn next_wake(s: &State) -> u64 {
    s.followed
        .iter()
        .filter(|f| f.asking.is_none() && f.unfollow.is_none())
        .map(|f| f.next)
        .min()
        .unwrap_or(u64::MAX)
}

/// A request that ended: a look at a followed program's output (printed; `None`), or
/// another's (given back).
pub fn done(s: &mut State, d: Done, now: u64) -> Option<Done> {
    let Some(i) = s.followed.iter().position(|f| f.asking == Some(d.ticket)) else {
        return Some(d);
    };
    let f = &mut s.followed[i];
    f.asking = None;
    let spelled = |f: &Followed| ulib::mach::spell_pid(f.machine, f.pid);
    let ended = match &d.result {
        Ok(p) => match p.split_first() {
            Some((&ended, bytes)) => {
                if !bytes.is_empty() {
                    ulib::print!("{}", alloc::string::String::from_utf8_lossy(bytes));
                    f.next = now;
                } else {
                    f.next = now.saturating_add(POLL_NS);
                }
                ended != 0
            }
            None => true,
        },
        Err(Error::TimedOut) if f.late < LATE_MAX && f.unfollow.is_none() => {
            f.late += 1;
            f.next = now;
            return None;
        }
        Err(e) => {
            println!("machd: the output of {} is lost: {e}", spelled(f));
            true
        }
    };
    f.late = 0;
    if let Some(request) = f.unfollow {
        let _ = ipc::reply(request, 0, &Msg::default());
        s.followed.swap_remove(i);
    } else if ended {
        s.followed.swap_remove(i);
    }
    None
}

/// The followed programs (for `Vec` in [`State`]).
pub type List = Vec<Followed>;

/// The users of the looks at machine `to` under way (each counts in its user's share of
/// that machine's window).
pub fn asking_to(list: &List, to: u8) -> impl Iterator<Item = u32> + Clone + '_ {
    list.iter()
        .filter(move |f| f.machine == to && f.asking.is_some())
        .map(|f| f.user)
}
