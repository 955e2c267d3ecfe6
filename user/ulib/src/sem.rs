//! Counting semaphores: the `sem` resource (`here/sem/NAME`, docs/resources.md), P1's
//! parent-to-child synchronisation. [`open_sem`] creates one with an initial count, [`p`]
//! takes a unit (waiting until there is one), [`v`] gives one back and wakes one waiter.
//! Like every resource, a semaphore is reached by its id from any thread of the program,
//! and from other programs as its rights allow.

use crate::res;
use abi::res::{ResId, Rights};
use abi::syscall::control as cmd;
use abi::Error;

/// Open (create) semaphore `name` (e.g. `here/sem/work`) holding `count` units.
pub fn open_sem(name: &str, count: u64, rights: Rights) -> Result<ResId, Error> {
    res::open(name, &count.to_le_bytes(), rights)
}

/// P: take one unit, waiting until there is one.
pub fn p(sem: ResId) -> Result<(), Error> {
    res::control(sem, cmd::SEM_P, 0, 0).map(drop)
}

/// V: give one unit back (a waiter, if any, takes it and wakes).
pub fn v(sem: ResId) -> Result<(), Error> {
    res::control(sem, cmd::SEM_V, 0, 0).map(drop)
}
