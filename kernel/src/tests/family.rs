//! Parents and children across cores (`proc/family.rs`): `WAIT` follows a child through
//! any number of migrations, blocking, polling and for any child, in both kernel
//! structures, and leaves nothing behind (no zombie, no forward record, no memory); move
//! notices that overtake each other are joined into one entry per child.

use super::{frames_after, free_frames_per_core, run_program};
use crate::proc::{self, sched, Followed, TEST_PARENT};
use crate::{kassert, ktest, percore, smp};
use abi::{Pid, Priority};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

/// Moves each child makes: far more than the 16 a parent used to remember.
const HOPS: &str = "100";

/// Forward records each core keeps (counted on its own core).
fn forwards_per_core() -> Result<Vec<u64>, String> {
    (0..smp::cores_planned())
        .map(|c| {
            smp::call_on(c, |_| proc::forwards_here() as u64, 0, 10_000_000_000)
                .map_err(|e| format!("counting forwards on core {c}: {e:?}"))
        })
        .collect()
}

/// Processes each core lists.
fn processes_per_core() -> Vec<u64> {
    (0..smp::cores_planned())
        .map(|c| percore::of(c).stats.processes.load(Ordering::Relaxed))
        .collect()
}

/// `rloop hops HOPS HOW` (a parent whose children move HOPS times and which checks what
/// `WAIT` says of them) exits 0, and afterwards every core has the processes, forward
/// records and free frames it had.
fn parent_follows(how: &str) -> crate::ktest::TestResult {
    if smp::cores_planned() < 2 {
        crate::kskip!("needs 2 cores");
    }
    // Warm-up: RPCC agents (a kernel stack each) and heaps reach their working size.
    run_program("rloop", &["hops", "4", how], 300)?;
    let (frames, processes) = (free_frames_per_core()?, processes_per_core());
    run_program("rloop", &["hops", HOPS, how], 600)?;
    // The last moves' notices (the parent heard; the old core may forget) are still on
    // their way: wait for them (60 s only catches a hang).
    sched::run_until(60_000_000_000, || {
        forwards_per_core().is_ok_and(|f| f.iter().all(|&n| n == 0))
    });
    let forwards = forwards_per_core()?;
    kassert!(
        forwards.iter().all(|&n| n == 0),
        "forward records left per core: {forwards:?}"
    );
    let after = processes_per_core();
    kassert!(
        after == processes,
        "processes per core before {processes:?}, after {after:?}"
    );
    let after = frames_after(&frames)?;
    kassert!(
        after == frames,
        "free frames per core before {frames:?}, after {after:?}"
    );
    Ok(())
}

ktest! {
    /// A child on the parent's core moves itself 100 times round the cores; the parent's
    /// blocking WAIT(pid) returns its exit status under the pid it was created with.
    fn blocking_wait_follows_a_child_through_many_moves() -> TestResult {
        parent_follows("block")
    }
}

ktest! {
    /// A child started on another core moves itself 100 times; the parent polls with
    /// WAIT(pid, timeout 0), which answers "not yet" (never "no such process") until it
    /// returns the exit status (a poll often reaches a core the child just left).
    fn polling_wait_follows_a_child_through_many_moves() -> TestResult {
        parent_follows("poll")
    }
}

ktest! {
    /// Two children, one started here and one on another core, each move 100 times; WAIT
    /// for any child returns each once, under the pid it was created with, then says
    /// there is none.
    fn wait_for_any_child_follows_moving_children() -> TestResult {
        parent_follows("any")
    }
}

/// The entries process `parent` (of this core) keeps for its children elsewhere.
fn followed_of(parent: Pid) -> Vec<Followed> {
    sched::with(|s| {
        s.processes
            .get(&parent.serial())
            .map(|p| p.followed.clone())
            .unwrap_or_default()
    })
}

ktest! {
    /// Move notices from different cores may arrive in any order: however they come, the
    /// parent ends with one entry for the child, from the pid it was created with to the
    /// pid it has now. Here 40 moves are heard of last first, then in an interleaved order.
    fn overtaken_move_notices_are_joined() -> TestResult {
        let n = smp::cores_planned();
        if n < 2 {
            crate::kskip!("needs 2 cores");
        }
        let me = percore::current_core();
        // A parent that never runs; its children are pids of other cores that never ran
        // either (the notices only name them).
        let parent = proc::create_stopped("spin", &[], Priority::App, TEST_PARENT)
            .map_err(|e| format!("create spin: {e}"))?;
        let result = (|| {
            for (round, order) in [(0u32, "last first"), (1, "interleaved")] {
                // A chain of 41 pids, alternating between the other cores and this one.
                let chain: Vec<Pid> = (0..=40u32)
                    .map(|i| {
                        let core = if i % 2 == 0 { (me + 1 + i as usize % (n - 1)) % n } else { me };
                        Pid::new(core, 1_000_000 + round * 100 + i)
                    })
                    .collect();
                let first = chain[0];
                sched::with(|s| {
                    if let Some(p) = s.processes.get_mut(&parent.serial()) {
                        p.followed.clear();
                        p.followed.push(Followed { first, now: first, tentative: false });
                    }
                });
                let mut moves: Vec<usize> = (0..40).rev().collect();
                if round == 1 {
                    // Odd moves first (each overtakes its predecessor), then the even ones.
                    moves = (0..40).filter(|i| i % 2 == 1).chain((0..40).filter(|i| i % 2 == 0)).collect();
                }
                let mut most = 0;
                for i in moves {
                    proc::note_child_moved(parent, chain[i], chain[i + 1]);
                    most = most.max(followed_of(parent).len());
                }
                let f = followed_of(parent);
                let want = [Followed { first, now: chain[40], tentative: false }];
                kassert!(f == want, "{order}: entries {f:?}, want {want:?}");
                if round == 0 {
                    kassert!(most <= 2, "{order}: up to {most} entries for one child");
                }
            }
            Ok(())
        })();
        sched::with(|s| {
            if let Some(p) = s.processes.get_mut(&parent.serial()) {
                p.followed.clear();
            }
        });
        let _ = proc::remove(parent);
        result
    }
}
