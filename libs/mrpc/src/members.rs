//! Membership: which machines are up, in which epoch, and when each was last heard from.
//!
//! The set of machines is static (`machines=N`); every machine sends a heartbeat to every
//! other one each heartbeat period, and any message from a machine counts as hearing from
//! it. A machine not heard from within the *down bound* (several periods, so one or two
//! lost heartbeats do not count) is down. A machine heard from in a new epoch rebooted.

use crate::MAX_MACHINES;

/// What is known of one machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Member {
    /// Its epoch as last heard (0: never heard from).
    pub epoch: u32,
    /// When it was last heard from (ns).
    pub last_heard: u64,
    /// How many times it was seen in a new epoch after the first (reboots seen).
    pub reboots: u32,
    /// Its last [`RETIRED_KEPT`] epochs before this one (0: none): a message of one of
    /// them is late, not news.
    pub retired: [u32; RETIRED_KEPT],
}

/// Earlier epochs of a machine kept, so that a late message of one is known as such.
pub const RETIRED_KEPT: usize = 4;

/// A machine's state as `machines` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Up,
    Down,
    Never,
}

/// What hearing from a machine changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Heard from for the first time.
    First,
    /// Nothing new.
    Same,
    /// A new epoch: it rebooted (the old epoch is given).
    Rebooted(u32),
    /// A message of an epoch it has left (a datagram that came late, or one sent again
    /// from before its reboot): nothing changed; it is to be dropped. Before, such a
    /// message counted as one more reboot, and the machine's live epoch was retired with
    /// it, so that everything it asked afterwards was dropped (found by a review).
    Stale,
}

/// The membership list of one machine.
pub struct Members {
    pub me: u8,
    pub count: u8,
    pub down_after_ns: u64,
    members: [Member; MAX_MACHINES],
}

impl Members {
    /// Machine `me` of `count`, calling a machine down after `down_after_ns` of silence.
    pub fn new(me: u8, count: u8, down_after_ns: u64) -> Members {
        Members {
            me,
            count: count.min(MAX_MACHINES as u8),
            down_after_ns,
            members: [Member::default(); MAX_MACHINES],
        }
    }

    /// A message from machine `m` in `epoch` at `now`.
    pub fn heard(&mut self, m: u8, epoch: u32, now: u64) -> Heard {
        if m >= self.count || m == self.me || epoch == 0 {
            return Heard::Same;
        }
        let e = &mut self.members[usize::from(m)];
        if e.retired.contains(&epoch) {
            return Heard::Stale;
        }
        let was = e.epoch;
        e.last_heard = now;
        e.epoch = epoch;
        match was {
            0 => Heard::First,
            w if w == epoch => Heard::Same,
            w => {
                e.reboots += 1;
                e.retired.rotate_right(1);
                e.retired[0] = w;
                Heard::Rebooted(w)
            }
        }
    }

    pub fn get(&self, m: u8) -> Option<Member> {
        (m < self.count).then(|| self.members[usize::from(m)])
    }

    /// Machine `m`'s state at `now` (this machine is always up).
    pub fn state(&self, m: u8, now: u64) -> Option<State> {
        let e = self.get(m)?;
        Some(if m == self.me {
            State::Up
        } else if e.epoch == 0 {
            State::Never
        } else if now.saturating_sub(e.last_heard) > self.down_after_ns {
            State::Down
        } else {
            State::Up
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_down_never_and_reboots() {
        let mut m = Members::new(0, 3, 100);
        assert_eq!(m.state(1, 0), Some(State::Never));
        assert_eq!(m.state(0, 0), Some(State::Up));
        assert_eq!(m.state(3, 0), None);
        assert_eq!(m.heard(1, 7, 10), Heard::First);
        assert_eq!(m.heard(1, 7, 20), Heard::Same);
        assert_eq!(m.state(1, 120), Some(State::Up));
        assert_eq!(m.state(1, 121), Some(State::Down));
        assert_eq!(m.heard(1, 8, 200), Heard::Rebooted(7));
        assert_eq!(m.state(1, 200), Some(State::Up));
        assert_eq!(m.get(1).unwrap().reboots, 1);
        // Not a member, myself, or epoch 0: ignored.
        assert_eq!(m.heard(5, 1, 0), Heard::Same);
        assert_eq!(m.heard(0, 1, 0), Heard::Same);
        assert_eq!(m.state(2, 1000), Some(State::Never));
    }

    /// A message of an epoch the machine has left is stale: it neither counts as a reboot
    /// nor moves the machine's epoch back (a regression: it did both, and the live epoch
    /// was then retired).
    #[test]
    fn a_late_message_of_an_earlier_life_is_stale() {
        let mut m = Members::new(0, 2, 100);
        assert_eq!(m.heard(1, 7, 10), Heard::First);
        assert_eq!(m.heard(1, 8, 20), Heard::Rebooted(7));
        assert_eq!(m.heard(1, 7, 30), Heard::Stale);
        assert_eq!(m.get(1).unwrap().epoch, 8);
        assert_eq!(m.get(1).unwrap().last_heard, 20);
        assert_eq!(m.heard(1, 8, 40), Heard::Same);
        // Lives further back are remembered too, up to RETIRED_KEPT of them.
        for (i, e) in (9..9 + RETIRED_KEPT as u32).enumerate() {
            assert!(matches!(m.heard(1, e, 50 + i as u64), Heard::Rebooted(_)));
        }
        assert_eq!(m.heard(1, 8, 100), Heard::Stale);
        assert_eq!(m.get(1).unwrap().reboots, 1 + RETIRED_KEPT as u32);
    }
}
