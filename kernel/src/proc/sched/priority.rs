//! A process's priority changed while it lives: raised (a background thread aged, a new
//! server taking the old one's priority in `FN_TAKEOVER`) and lowered again (a takeover
//! that did not happen gives its caller back the priority it had, `ipc::takeover`).
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
        self.move_threads(serial, p, |t| t > p);
    }

    /// Lower process `serial` and each of its threads above priority `p` to `p` (a thread
    /// already below keeps its own); a ready thread moves to its new level's queue, and a
    /// running one lowered gives the core up on its way back to user mode if a thread now
    /// above it is ready.
    pub fn lower_process(&mut self, serial: u32, p: Priority) {
        let Some(proc) = self.processes.get_mut(&serial) else {
            return;
        };
        proc.priority = proc.priority.max(p);
        if self.move_threads(serial, p, |t| t < p) && self.ready_above(p) {
            self.need_resched = true;
            percore::this()
                .sched_attention
                .store(true, Ordering::Relaxed);
        }
    }

    /// Move each thread of process `serial` whose priority `moves` to `p`; whether the
    /// running thread moved.
    fn move_threads(&mut self, serial: u32, p: Priority, moves: impl Fn(Priority) -> bool) -> bool {
        let mut running = false;
        let mut i = 0;
        while let Some(id) = self
            .processes
            .get(&serial)
            .and_then(|proc| proc.threads.get(i).copied())
        {
            i += 1;
            let Some(t) = self.threads.get_mut(&id).filter(|t| moves(t.priority)) else {
                continue;
            };
            let old = t.priority;
            t.priority = p;
            if t.state == ThreadState::Ready {
                self.ready[old as usize].retain(|&x| x != id);
                self.ready[p as usize].push_back(id);
            }
            if self.current == Some(id) {
                running = true;
                percore::this()
                    .running_priority
                    .store(p as u32, Ordering::Relaxed);
            }
        }
        running
    }
}
