//! Users' shares of a small table that serves every user: the file service's open files
//! (`libs/fsopen`); `machd`'s places in another machine's window, its places for requests
//! with an ICA, its followed programs, and its call workers ([`pick`]).
//!
//! Why: such a table is first come, first served, so one user's programs could take every
//! entry and every other user's requests would fail (`Limit`, `Busy`) until they let go.
//! The kernel's function registry divides its names the same way (`abi::fnid`):
//! each user other than the administrator and the kernel holds at most half of the table
//! ([`Shares::per_user`]), all such users together three quarters ([`Shares::users`]), and
//! the rest stays for the administrator, who runs the system's services and the shell. The
//! administrator and the kernel are trusted with the whole table.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

use abi::res::UserId;

/// Is `user` trusted with a whole table (the administrator, the kernel)?
pub fn trusted(user: u32) -> bool {
    user == UserId::KERNEL.0 || user == UserId::ADMIN.0
}

/// How a table is shared out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    /// Entries one untrusted user may hold.
    pub per_user: usize,
    /// Entries all untrusted users together may hold.
    pub users: usize,
}

impl Shares {
    /// The shares of a table of `entries`: half for one user, three quarters for all.
    pub const fn of(entries: usize) -> Shares {
        Shares {
            per_user: entries / 2,
            users: entries * 3 / 4,
        }
    }

    /// May `user` take one more entry, `held` being the users of the entries taken now
    /// (one item per entry)? Whether the table has a free entry at all is the caller's to
    /// know: a trusted user is always allowed here.
    pub fn allows(&self, user: u32, held: impl Iterator<Item = u32> + Clone) -> bool {
        if trusted(user) {
            return true;
        }
        let mine = held.clone().filter(|&u| u == user).count();
        let users = held.filter(|&u| !trusted(u)).count();
        mine < self.per_user && users < self.users
    }
}

/// Which of the waiting jobs a free worker takes, among `workers` that serve every user
/// (`machd`'s call workers): the oldest one whose user may have one more job under way
/// ([`Shares::of`]`(workers)`), `making` being the users of the jobs under way. `None`:
/// every waiting job's user has its share under way (the worker waits for one to end).
/// So a user whose jobs take long holds at most half of the workers, all such users three
/// quarters, and the administrator's jobs always find one not held by other users.
pub fn pick(
    workers: usize,
    waiting: impl Iterator<Item = u32>,
    making: impl Iterator<Item = u32> + Clone,
) -> Option<usize> {
    let shares = Shares::of(workers);
    waiting
        .enumerate()
        .find(|&(_, u)| shares.allows(u, making.clone()))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: u32 = UserId::KERNEL.0;
    const ADMIN: u32 = UserId::ADMIN.0;

    #[test]
    fn halves_and_three_quarters() {
        assert_eq!(
            Shares::of(16),
            Shares {
                per_user: 8,
                users: 12
            }
        );
        assert_eq!(
            Shares::of(32),
            Shares {
                per_user: 16,
                users: 24
            }
        );
    }

    #[test]
    fn one_user_cannot_take_all() {
        let s = Shares::of(16);
        let mut held = Vec::new();
        for _ in 0..8 {
            assert!(s.allows(7, held.iter().copied()));
            held.push(7);
        }
        assert!(!s.allows(7, held.iter().copied()), "user 7 past its half");
        for _ in 0..4 {
            assert!(s.allows(8, held.iter().copied()));
            held.push(8);
        }
        assert!(
            !s.allows(8, held.iter().copied()),
            "past the users' three quarters"
        );
        assert!(
            !s.allows(9, held.iter().copied()),
            "past the users' three quarters"
        );
        assert!(s.allows(ADMIN, held.iter().copied()));
        assert!(s.allows(KERNEL, held.iter().copied()));
        // The administrator's and the kernel's entries count in no user's share.
        let held = [[ADMIN; 12].as_slice(), &[KERNEL; 3]].concat();
        assert!(s.allows(7, held.iter().copied()));
    }

    #[test]
    fn workers_are_picked_so_no_user_holds_them_all() {
        // Four workers: one user at most two at once, all such users three.
        assert_eq!(pick(4, [7, 7, 8].into_iter(), [].into_iter()), Some(0));
        assert_eq!(pick(4, [7, 8].into_iter(), [7, 7].into_iter()), Some(1));
        assert_eq!(pick(4, [7, 7].into_iter(), [7, 7].into_iter()), None);
        assert_eq!(
            pick(4, [9, ADMIN].into_iter(), [7, 7, 8].into_iter()),
            Some(1)
        );
        assert_eq!(
            pick(4, [ADMIN].into_iter(), [ADMIN, ADMIN, ADMIN].into_iter()),
            Some(0)
        );
        assert_eq!(pick(4, [].into_iter(), [].into_iter()), None);
    }
}
