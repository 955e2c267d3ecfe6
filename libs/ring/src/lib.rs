//! The index logic of the submission and completion rings a process shares with the kernel
//! (`abi::ring` has the layout and the contract), kept apart so it is tested on the host.
//!
//! Indices are free-running `u32`s that wrap; the number of entries between a head and a
//! tail is `tail - head` (wrapping), which must never exceed the ring's size. The program
//! owns one index of each ring (`sq_tail`, `cq_head`) and may write anything there, so
//! every function that reads one answers [`Nonsense`] instead of trusting it. The kernel's
//! own indices (`sq_head`, `cq_tail`) come from its private copy, never from shared memory.
//!
//! [`admit`] is the back-pressure rule: one `ENTER` takes no more submissions than the
//! completion ring has room for, counting requests still in flight, so a completion always
//! has a slot. (The "copy once, then validate" rule for entries the program can change
//! while the kernel reads them is the kernel's `RingMem::take_sqe`: one volatile copy.)
#![forbid(unsafe_code)]
#![no_std]

/// The program's index makes no sense (more entries between head and tail than the ring
/// has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nonsense;

/// Entries from `head` to `tail` (free-running, wrapping) in a ring of `entries`.
pub fn span(head: u32, tail: u32, entries: u32) -> Result<u32, Nonsense> {
    let n = tail.wrapping_sub(head);
    if n > entries {
        Err(Nonsense)
    } else {
        Ok(n)
    }
}

/// Free completion slots: the kernel's tail, the program's head.
pub fn cq_room(cq_head: u32, cq_tail: u32, cq_entries: u32) -> Result<u32, Nonsense> {
    Ok(cq_entries - span(cq_head, cq_tail, cq_entries)?)
}

/// The ring state one `ENTER` starts from.
#[derive(Clone, Copy, Debug)]
pub struct Entering {
    /// The kernel's copy of `sq_head` and the program's `sq_tail`.
    pub sq_head: u32,
    pub sq_tail: u32,
    pub sq_entries: u32,
    /// The program's `cq_head` and the kernel's copy of `cq_tail`.
    pub cq_head: u32,
    pub cq_tail: u32,
    pub cq_entries: u32,
    /// Requests taken earlier whose completions are not in the ring yet.
    pub outstanding: u32,
}

/// How many submissions to take when the program asks for `wanted`: no more than it wrote,
/// nor than the completion ring has room for once the outstanding requests have theirs.
pub fn admit(e: &Entering, wanted: u64) -> Result<u32, Nonsense> {
    let written = span(e.sq_head, e.sq_tail, e.sq_entries)?;
    let room = cq_room(e.cq_head, e.cq_tail, e.cq_entries)?.saturating_sub(e.outstanding);
    Ok(written
        .min(room)
        .min(u32::try_from(wanted).unwrap_or(u32::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_wrap_around() {
        assert_eq!(span(0, 0, 8), Ok(0));
        assert_eq!(span(3, 11, 8), Ok(8));
        assert_eq!(span(u32::MAX - 2, 3, 8), Ok(6));
        assert_eq!(span(u32::MAX, u32::MAX, 8), Ok(0));
    }

    #[test]
    fn nonsense_is_refused() {
        // Tail more than a ring ahead, or behind the head.
        assert_eq!(span(0, 9, 8), Err(Nonsense));
        assert_eq!(span(5, 4, 8), Err(Nonsense));
        assert_eq!(span(0, u32::MAX, 256), Err(Nonsense));
        assert_eq!(cq_room(10, 3, 16), Err(Nonsense));
    }

    fn entering() -> Entering {
        Entering {
            sq_head: 0,
            sq_tail: 0,
            sq_entries: 8,
            cq_head: 0,
            cq_tail: 0,
            cq_entries: 16,
            outstanding: 0,
        }
    }

    #[test]
    fn admit_takes_what_was_written_and_asked_for() {
        let e = Entering {
            sq_tail: 5,
            ..entering()
        };
        assert_eq!(admit(&e, 64), Ok(5));
        assert_eq!(admit(&e, 3), Ok(3));
        assert_eq!(admit(&e, 0), Ok(0));
        assert_eq!(admit(&e, u64::MAX), Ok(5));
    }

    #[test]
    fn admit_leaves_a_slot_for_every_completion() {
        // 14 completions unread and 1 request in flight: room for one more.
        let e = Entering {
            sq_head: u32::MAX - 1,
            sq_tail: 6,
            cq_head: u32::MAX - 3,
            cq_tail: 10,
            outstanding: 1,
            ..entering()
        };
        assert_eq!(admit(&e, 64), Ok(1));
        // More in flight than room (the program moved cq_head back): nothing, no underflow.
        let full = Entering {
            outstanding: 20,
            ..e
        };
        assert_eq!(admit(&full, 64), Ok(0));
    }

    #[test]
    fn admit_refuses_nonsense() {
        let bad_tail = Entering {
            sq_tail: 9,
            ..entering()
        };
        assert_eq!(admit(&bad_tail, 1), Err(Nonsense));
        let bad_head = Entering {
            cq_head: 1,
            ..entering()
        };
        assert_eq!(admit(&bad_head, 1), Err(Nonsense));
    }
}
