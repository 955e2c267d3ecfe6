//! What each user holds on one core, against the limits that keep one user from taking the
//! core from everyone else (issue: 70,000 zombies, a table full of one user's resources).
//!
//! A [`Usage`] counts, per user, the things a user can pile up on a core that cost the
//! core memory: resources in its table, and frames of user memory (address spaces and
//! vregions). A charge that would pass the user's limit is refused whole and changes
//! nothing; an uncharge never goes below zero (a bug elsewhere must not wrap a counter
//! into a huge allowance). Users without charges take no room. Pure logic, tested on the
//! host; the kernel keeps one per core (`res/quota.rs`).

use alloc::collections::BTreeMap;

/// What is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Entries in the core's resource table created by the user.
    Resources = 0,
    /// 4 KiB frames of user memory: pages of its processes' address spaces and of its
    /// vregions.
    Frames = 1,
    /// 4 KiB frames of kernel heap its resources may fill with its data (pipe buffers),
    /// counted apart from (and besides) its frames, so that one user cannot take the core's
    /// whole bound for such heap.
    Heap = 2,
}

const KINDS: usize = 3;

/// Users holding nothing whose entries stay (see [`Usage::uncharge`]).
pub const KEPT_IDLE_USERS: usize = 16;

/// The most one user may hold of each [`Counted`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub resources: u64,
    pub frames: u64,
    pub heap: u64,
}

impl Limits {
    fn of(&self, what: Counted) -> u64 {
        match what {
            Counted::Resources => self.resources,
            Counted::Frames => self.frames,
            Counted::Heap => self.heap,
        }
    }
}

/// A charge was refused: the user holds `held` of `what` and asked for `asked` more, which
/// would pass `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exceeded {
    pub what: Counted,
    pub held: u64,
    pub asked: u64,
    pub limit: u64,
}

/// Per-user counts on one core.
#[derive(Debug)]
pub struct Usage {
    limits: Limits,
    held: BTreeMap<u32, [u64; KINDS]>,
}

impl Usage {
    pub const fn new(limits: Limits) -> Self {
        Usage {
            limits,
            held: BTreeMap::new(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Change the limits (e.g. once the core knows its memory); what users hold stays, and
    /// a user above a new limit only cannot take more.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Charge `user` `n` of `what`, unless that passes the limit (then nothing changes).
    pub fn charge(&mut self, user: u32, what: Counted, n: u64) -> Result<(), Exceeded> {
        let limit = self.limits.of(what);
        let held = self.held(user, what);
        match held.checked_add(n) {
            Some(total) if total <= limit => {
                self.held.entry(user).or_insert([0; KINDS])[what as usize] = total;
                Ok(())
            }
            _ => Err(Exceeded {
                what,
                held,
                asked: n,
                limit,
            }),
        }
    }

    /// Give back `n` of `what` that `user` was charged (never below zero). A user left
    /// holding nothing keeps its (zero) entry while there are few, so that a program that
    /// opens and closes one resource over and over does not make the map allocate and
    /// free a node each time; past [`KEPT_IDLE_USERS`] entries, such users go.
    pub fn uncharge(&mut self, user: u32, what: Counted, n: u64) {
        if let Some(counts) = self.held.get_mut(&user) {
            counts[what as usize] = counts[what as usize].saturating_sub(n);
            if counts.iter().all(|&c| c == 0) && self.held.len() > KEPT_IDLE_USERS {
                self.held.retain(|_, c| c.iter().any(|&x| x != 0));
            }
        }
    }

    /// How much of `what` `user` holds.
    pub fn held(&self, user: u32, what: Counted) -> u64 {
        self.held.get(&user).map_or(0, |c| c[what as usize])
    }

    /// Users that hold anything, with (resources, frames), lowest user first.
    pub fn users(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.held
            .iter()
            .filter(|(_, c)| c.iter().any(|&x| x != 0))
            .map(|(&u, c)| (u, c[0], c[1]))
    }

    /// Entries kept, users holding nothing included (bounded: see [`Usage::uncharge`]).
    pub fn entries(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        resources: 3,
        frames: 10,
        heap: 4,
    };

    #[test]
    fn charges_up_to_the_limit_and_refuses_beyond_without_change() {
        let mut u = Usage::new(LIMITS);
        assert_eq!(u.charge(7, Counted::Frames, 6), Ok(()));
        assert_eq!(u.charge(7, Counted::Frames, 4), Ok(()));
        assert_eq!(
            u.charge(7, Counted::Frames, 1),
            Err(Exceeded {
                what: Counted::Frames,
                held: 10,
                asked: 1,
                limit: 10
            })
        );
        assert_eq!(u.held(7, Counted::Frames), 10);
        // Another user is not affected.
        assert_eq!(u.charge(8, Counted::Frames, 10), Ok(()));
        // Nor another kind.
        assert_eq!(u.charge(7, Counted::Resources, 3), Ok(()));
        assert!(u.charge(7, Counted::Resources, 1).is_err());
    }

    #[test]
    fn a_huge_charge_cannot_wrap() {
        let mut u = Usage::new(LIMITS);
        u.charge(1, Counted::Frames, 5).unwrap();
        assert!(u.charge(1, Counted::Frames, u64::MAX).is_err());
        assert_eq!(u.held(1, Counted::Frames), 5);
    }

    #[test]
    fn uncharge_gives_room_back_and_never_goes_below_zero() {
        let mut u = Usage::new(LIMITS);
        u.charge(1, Counted::Resources, 3).unwrap();
        u.uncharge(1, Counted::Resources, 1);
        assert_eq!(u.charge(1, Counted::Resources, 1), Ok(()));
        u.uncharge(1, Counted::Resources, 100);
        assert_eq!(u.held(1, Counted::Resources), 0);
        // A user that holds nothing takes no room.
        assert_eq!(u.users().count(), 0);
        u.uncharge(2, Counted::Frames, 1);
        assert_eq!(u.users().count(), 0);
    }

    #[test]
    fn idle_users_stay_few() {
        let mut u = Usage::new(LIMITS);
        for user in 0..100 {
            u.charge(user, Counted::Resources, 1).unwrap();
            u.uncharge(user, Counted::Resources, 1);
            assert!(
                u.entries() <= KEPT_IDLE_USERS + 1,
                "{} entries",
                u.entries()
            );
        }
        assert_eq!(u.users().count(), 0);
        // A user holding something is never dropped.
        u.charge(500, Counted::Frames, 2).unwrap();
        for user in 0..100 {
            u.charge(user, Counted::Frames, 1).unwrap();
            u.uncharge(user, Counted::Frames, 1);
        }
        assert_eq!(u.held(500, Counted::Frames), 2);
        assert_eq!(u.users().collect::<Vec<_>>(), vec![(500, 0, 2)]);
    }

    #[test]
    fn lower_limits_stop_growth_but_take_nothing_away() {
        let mut u = Usage::new(LIMITS);
        u.charge(1, Counted::Frames, 8).unwrap();
        u.set_limits(Limits {
            resources: 3,
            frames: 4,
            heap: 4,
        });
        assert_eq!(u.held(1, Counted::Frames), 8);
        assert!(u.charge(1, Counted::Frames, 1).is_err());
        u.uncharge(1, Counted::Frames, 5);
        assert_eq!(u.charge(1, Counted::Frames, 1), Ok(()));
        assert_eq!(u.users().collect::<Vec<_>>(), vec![(1, 0, 4)]);
    }
}
