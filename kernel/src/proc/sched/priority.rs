//! A process's priority changed while it lives: raised when a background thread aged, or
//! when a new server takes the old one's priority in `FN_TAKEOVER` (`ipc::takeover`).
#![deny(unsafe_code)]

use super::{Sched, ThreadState};
use crate::percore;
use abi::Priority;
use core::sync::atomic::Ordering;

/// Ticks a ready background thread may be passed over before its process is raised to
/// application priority: background work uses what the others leave, but a core kept busy
/// by applications does not starve it (a replacement server would never take over).
pub const BACKGROUND_AGING_TICKS: u32 = 10;

impl Sched {
    /// At a tick: a background thread passed over for [`BACKGROUND_AGING_TICKS`] ticks
    /// has its process raised to application priority.
    pub(super) fn age_background(&mut self) {
        let Some(&id) = self.ready[Priority::Background as usize].front() else {
            self.background_starved = 0;
            return;
        };
        self.background_starved += 1;
        if self.background_starved < BACKGROUND_AGING_TICKS {
            return;
        }
        self.background_starved = 0;
        if let Some(serial) = self.threads.get(&id).map(|t| t.process) {
            self.raise_process(serial, Priority::App);
        }
    }

    /// Raise process `serial` and each of its threads below priority `p` to `p` (a thread
    /// already above keeps its own); a ready thread moves to its new level's queue.
    pub fn raise_process(&mut self, serial: u32, p: Priority) {
        let Some(proc) = self.processes.get_mut(&serial) else {
            return;
        };
        proc.priority = proc.priority.min(p);
        let mut i = 0;
        while let Some(id) = self
            .processes
            .get(&serial)
            .and_then(|proc| proc.threads.get(i).copied())
        {
            i += 1;
            let Some(t) = self.threads.get_mut(&id).filter(|t| t.priority > p) else {
                continue;
            };
            let old = t.priority;
            t.priority = p;
            if t.state == ThreadState::Ready {
                self.ready[old as usize].retain(|&x| x != id);
                self.ready[p as usize].push_back(id);
            }
            if self.current == Some(id) {
                percore::this()
                    .running_priority
                    .store(p as u32, Ordering::Relaxed);
            }
        }
    }
}
