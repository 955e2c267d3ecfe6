//! Limits per user and per process (`res/quota.rs`): children not waited for, processes,
//! resources and memory per user and core. At a limit a clear `Limit`, nothing of the
//! refused call left behind, and every other user unaffected.

use crate::proc::{self, sched, TEST_PARENT};
use crate::res::{self, quota};
use crate::{kassert, ktest, percore};
use abi::res::{ResId, Rights, UserId};
use abi::{Error, Pid, Priority};
use alloc::format;
use alloc::vec::Vec;

/// A user no other test uses.
const USER: u32 = 4100;

/// Processes of `user` on this core, running or not yet reaped.
fn processes_of(user: u32) -> usize {
    sched::with(|s| {
        s.processes
            .values()
            .filter(|p| p.user == UserId(user))
            .count()
    })
}

ktest! {
    /// A process that never waits for its children is refused its 1,025th with `Limit`
    /// (it was 70,000 zombies, each spawn slower than the last); a second process of the
    /// same user then meets the user's limit of processes on the core; a program of
    /// another user still runs; killing the first parent takes its zombies with it.
    fn zombies_stop_at_the_limit_and_the_rest_runs() -> TestResult {
        let holder = proc::spawn("crash", &["zombies", "4100", "hold"], Priority::App, TEST_PARENT)
            .map_err(|e| format!("{e}"))?;
        let checked = zombies_checked(holder);
        super::end_and_reap(holder);
        checked?;
        // Its zombies went with it (orphans that had ended are not kept).
        let gone = sched::run_until(60_000_000_000, || processes_of(USER) == 0);
        kassert!(gone, "user {USER} still has {} processes after its parent was killed", processes_of(USER));
        Ok(())
    }
}

ktest! {
    /// Pipes filled to 64 KiB each are refused with `Limit` once their buffers (kernel
    /// heap) reach the user's share of the core's memory, and their frames are given back
    /// when they close (a regression: the buffers were counted nowhere, and a user's
    /// pipes could take the heap from the kernel, which then panicked).
    fn pipe_buffers_count_as_their_creators_memory() -> TestResult {
        const PIPES_USER: u32 = 4101;
        let held = || {
            quota::usage()
                .into_iter()
                .find(|(u, _, _)| *u == PIPES_USER)
                .map_or((0, 0), |(_, r, f)| (r, f))
        };
        let s = super::run_to_end("crash", &["pipes", "4101"], Priority::App, 600)?;
        // Refused at the user's share of the core's bound for heap (16 frames a pipe),
        // well before its resources (4,096) ran out.
        let bound = quota::limits().heap / 16;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code <= bound && s.code + 1 >= bound,
            "crash pipes ended with {s:?}, expected about {bound} pipes filled, then Limit"
        );
        kassert!(held() == (0, 0), "user {PIPES_USER} still holds {:?} (resources, frames)", held());
        let s = super::run_to_end("hello", &["after", "the", "pipes"], Priority::App, 60)?;
        kassert!(s.how == abi::ENDED_EXIT && s.code == 0, "hello after the pipes ended with {s:?}");
        Ok(())
    }
}

ktest! {
    /// Threads that end without anyone joining them leave at most
    /// `threads::MAX_EXITED` values behind: the oldest go (a regression: every value was
    /// kept until joined, and a program could grow the kernel's heap without bound).
    fn ended_threads_nobody_joins_are_bounded() -> TestResult {
        let s = super::run_to_end("crash", &["threads"], Priority::App, 600)?;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code == 0,
            "crash threads ended with {s:?} (exit 1: the first value was still kept)"
        );
        Ok(())
    }
}

fn zombies_checked(holder: Pid) -> crate::ktest::TestResult {
    // The holder sleeps once refused.
    super::until_asleep(holder, "crash zombies hold", 600)?;
    let held = processes_of(USER);
    kassert!(
        held == quota::CHILDREN_PER_PROCESS + 1,
        "user {USER} has {held} processes, expected the holder and {} zombies",
        quota::CHILDREN_PER_PROCESS
    );
    // A process started after the zombies is in the list of live processes a program
    // gets, or the list says it was cut short (`Limit`): with the zombies first, a list of
    // 1,024 records (as `ulib::sys::live_processes` asked for) left it out, and `machd`
    // took such a program for ended (its remote files closed, its output dropped).
    let spin = proc::spawn("spin", &[], Priority::Background, TEST_PARENT)
        .map_err(|e| format!("spawn spin: {e}"))?;
    let listed = super::run_to_end(
        "crash",
        &["live-list", &format!("{spin}")],
        Priority::App,
        600,
    );
    super::end_and_reap(spin);
    let listed = listed?;
    kassert!(
        listed.how == abi::ENDED_EXIT && listed.code == 0,
        "crash live-list {spin} ended with {listed:?}: a live process was missing from the list"
    );
    // A second parent of the same user: refused when the user has its most processes here.
    let s = super::run_to_end("crash", &["zombies", "4100", "reap"], Priority::App, 600)?;
    let expect = quota::PROCESSES_PER_USER - held - 1;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == expect as u64,
        "the second parent made {s:?} zombies, expected exit {expect}"
    );
    // Everyone else is unaffected.
    super::run_program("hello", &["beside", "zombies"], 120)
}

ktest! {
    /// Children on another core count too: a parent on this core whose 1,024 children
    /// ended on the next core without being waited for is refused the next one there.
    fn zombies_on_another_core_count_for_their_parent() -> TestResult {
        let here = percore::current_core();
        let cores = crate::smp::cores_planned();
        if cores < 2 {
            crate::kskip!("needs 2 cores");
        }
        let other = (here + 1) % cores;
        let other_arg = format!("{other}");
        let holder = proc::spawn("crash", &["zombies", "4103", "hold", &other_arg], Priority::App, TEST_PARENT)
            .map_err(|e| format!("{e}"))?;
        // It blocks in each remote spawn too: the event is "all its children made, and
        // asleep", after which it makes no more (the next is refused on this core).
        let children = || sched::with(|s| s.processes.get(&holder.serial()).map_or(0, |p| p.followed.len()));
        let hung = !sched::run_until(600_000_000_000, || {
            (children() >= quota::CHILDREN_PER_PROCESS && super::is_asleep(holder)) || proc::has_ended(holder)
        });
        let children = children();
        super::end_and_reap(holder);
        kassert!(!hung && children == quota::CHILDREN_PER_PROCESS, "the holder has {children} children on core {other}, expected {} (hung: {hung})", quota::CHILDREN_PER_PROCESS);
        Ok(())
    }
}

/// Close every resource in `ids` as the kernel.
fn close_all(ids: &[ResId]) {
    res::begin_flow(UserId::KERNEL);
    for &id in ids {
        let _ = res::close(id);
    }
}

ktest! {
    /// A user may hold a quarter of a core's resource table: the next open is `Limit`
    /// and leaves nothing behind; another user can still open; closing gives room back.
    fn resources_per_user_stop_at_the_limit() -> TestResult {
        let mut ids = Vec::new();
        let r = fill_resources(&mut ids);
        close_all(&ids);
        r?;
        kassert!(quota::usage().iter().all(|u| u.0 != USER), "user {USER} still holds {:?}", quota::usage());
        Ok(())
    }
}

fn fill_resources(ids: &mut Vec<ResId>) -> crate::ktest::TestResult {
    res::begin_flow(UserId(USER));
    let refused = loop {
        let name = format!("here/sem/lim{}", ids.len());
        match res::open(&name, &0u64.to_le_bytes(), Rights::OWNER_ALL) {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
        if ids.len() as u64 > quota::RESOURCES_PER_USER {
            break Error::Unknown;
        }
    };
    kassert!(
        refused == Error::Limit && ids.len() as u64 == quota::RESOURCES_PER_USER,
        "user {USER} opened {} resources, then {refused:?}",
        ids.len()
    );
    let name = format!("here/sem/lim{}", ids.len());
    kassert!(
        res::open(&name, &0u64.to_le_bytes(), Rights::OWNER_ALL) == Err(Error::Limit),
        "a second try was not refused"
    );
    // The refused name was not taken: another user opens it.
    res::begin_flow(UserId(USER + 1));
    let other = res::open(&name, &0u64.to_le_bytes(), Rights::OWNER_ALL);
    kassert!(
        other.is_ok(),
        "another user's open beside the full user: {other:?}"
    );
    ids.extend(other);
    // Room comes back with a close.
    res::begin_flow(UserId(USER));
    let last = ids.remove(0);
    res::close(last).map_err(|e| format!("close: {e}"))?;
    let again = res::open("here/sem/limagain", &0u64.to_le_bytes(), Rights::OWNER_ALL);
    kassert!(again.is_ok(), "open after a close gave {again:?}");
    ids.extend(again);
    Ok(())
}

ktest! {
    /// A user's vregions may take half of what the core gives programs: the next is
    /// `Limit` (not `NoMemory`), another user still gets memory, and every frame comes
    /// back when they are closed.
    fn vregion_memory_per_user_stops_at_the_limit() -> TestResult {
        let before = super::free_frames_here(0);
        let mut ids = Vec::new();
        let r = fill_memory(&mut ids);
        close_all(&ids);
        r?;
        let after = super::free_frames_here(0);
        kassert!(before == after, "{} frames did not come back", before.abs_diff(after));
        kassert!(quota::usage().iter().all(|u| u.0 != USER), "user {USER} still holds {:?}", quota::usage());
        Ok(())
    }
}

fn fill_memory(ids: &mut Vec<ResId>) -> crate::ktest::TestResult {
    const MIB: u64 = 1 << 20;
    res::begin_flow(UserId(USER));
    let limit = quota::frames_limit();
    let refused = loop {
        let name = format!("here/vregion/mem{}", ids.len());
        match res::open(&name, &MIB.to_le_bytes(), Rights::OWNER_ALL) {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
        if ids.len() as u64 * 256 > limit {
            break Error::Unknown;
        }
    };
    let held = ids.len() as u64 * 256;
    kassert!(
        refused == Error::Limit && held <= limit && held + 256 > limit,
        "user {USER} got {} MiB of a {limit}-frame share, then {refused:?}",
        ids.len()
    );
    // A smaller request that fits is still granted: the limit is on frames, not calls.
    if held < limit {
        let small = res::open(
            "here/vregion/memsmall",
            &4096u64.to_le_bytes(),
            Rights::OWNER_ALL,
        );
        kassert!(small.is_ok(), "one page under the limit gave {small:?}");
        ids.extend(small);
    }
    res::begin_flow(UserId(USER + 1));
    let other = res::open(
        "here/vregion/memother",
        &MIB.to_le_bytes(),
        Rights::OWNER_ALL,
    );
    kassert!(
        other.is_ok(),
        "another user's vregion beside the full user: {other:?}"
    );
    ids.extend(other);
    Ok(())
}

ktest! {
    /// A core that has handed out its last process serial or thread id refuses the next
    /// process with `Limit` rather than reuse an id: serials and thread ids are never
    /// reused. A regression found by a review: the counters wrapped (silently, in a
    /// release build) and a new thread replaced a live one in the table.
    fn ids_run_out_with_an_error_not_a_reuse() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        // One serial and one thread id left, then serials left but no thread id; the
        // counters are put back afterwards (no id at or above the old ones is in use but
        // the test's own).
        let last = sched::LAST_SERIAL;
        let old = sched::with(|s| s.set_next_ids(last - 1, u32::MAX - 1));
        let first = proc::spawn("spin", &[], Priority::Background, TEST_PARENT);
        let no_serial = proc::spawn("spin", &[], Priority::Background, TEST_PARENT);
        sched::with(|s| s.set_next_ids(old.0, u32::MAX));
        let no_thread = proc::spawn("spin", &[], Priority::Background, TEST_PARENT);
        sched::with(|s| s.set_next_ids(old.0, old.1));
        let mut r = Ok(());
        if first.is_err() || first.is_ok_and(|p| p.serial() != last - 1) {
            r = Err(format!("the last serial: {first:?}"));
        } else if no_serial != Err(Error::Limit) {
            r = Err(format!("a process with no serial left: {no_serial:?}, want Limit"));
        } else if no_thread != Err(Error::Limit) {
            r = Err(format!("a process with no thread id left: {no_thread:?}, want Limit"));
        }
        for p in [first, no_serial, no_thread].into_iter().flatten() {
            let _ = proc::end_by_kill(p);
            sched::run_until(60_000_000_000, || proc::has_ended(p));
            let _ = proc::take_status(p);
        }
        r
    }
}

ktest! {
    /// Waiters of a semaphore killed while their P waits are not kept: its queue holds at
    /// most the last one (forgotten at the next P). A regression found by a review: each
    /// stayed queued until a V, so a semaphore never V'd grew by one entry of kernel
    /// memory, charged to nobody, per killed waiter.
    fn killed_semaphore_waiters_are_not_kept() -> TestResult {
        crate::res::begin_flow(UserId::KERNEL);
        let gate = res::open("here/sem/killed-waiters", &0u64.to_le_bytes(), Rights(0xff))
            .map_err(|e| format!("open: {e:?}"))?;
        let r = kill_waiters(gate);
        let _ = res::close(gate);
        r
    }
}

/// Waiters killed on semaphore `gate`, one after another.
fn kill_waiters(gate: ResId) -> crate::ktest::TestResult {
    let arg = format!("{:#x}", gate.0);
    for round in 0..8 {
        let child = proc::spawn("lwpcheck", &["waiter", &arg], Priority::App, TEST_PARENT)
            .map_err(|e| format!("spawn: {e:?}"))?;
        // The event: its P waits (60 s only catches a hang).
        let waits = || res::info(gate).is_ok_and(|i| i.detail == 1);
        sched::run_until(60_000_000_000, || waits() || proc::has_ended(child));
        let waited = waits();
        let _ = proc::end_by_kill(child);
        sched::run_until(60_000_000_000, || proc::has_ended(child));
        let _ = proc::take_status(child);
        kassert!(waited, "waiter {round} never waited in the semaphore");
    }
    let queued = res::sem::queued(gate);
    kassert!(
        queued.is_ok_and(|n| n <= 1),
        "8 waiters killed, the semaphore queues {queued:?} entries"
    );
    Ok(())
}

ktest! {
    /// The page tables an address space grows for its attachments are its user's memory:
    /// charged like its pages (the user's share ends the growth with `Limit`), and given
    /// back with the address space. A regression found by an audit: attaching and
    /// detaching one page at ever new 2 MiB-aligned addresses took an uncharged page table
    /// each time, until the core's whole pool was gone.
    fn attach_tables_are_charged() -> TestResult {
        let before = super::free_frames_here(0);
        let frame = crate::mm::frames::alloc_user().ok_or("no frame to attach")?;
        let r = attach_until_refused(frame);
        let _ = crate::mm::frames::free(frame);
        r?;
        let after = super::free_frames_here(0);
        kassert!(before == after, "{} frames did not come back", before.abs_diff(after));
        kassert!(quota::usage().iter().all(|u| u.0 != USER), "user {USER} still holds {:?}", quota::usage());
        Ok(())
    }
}

/// Attach `frame` at a new 2 MiB-aligned address and detach it again until the address
/// space is refused (each time needs a new page table), at most a share's worth of times.
fn attach_until_refused(frame: u64) -> crate::ktest::TestResult {
    const STEP: u64 = 2 << 20;
    const BASE: u64 = 0x1000_0000_0000;
    let limit = quota::frames_limit();
    let mut vs = proc::vspace::VSpace::new(UserId(USER)).map_err(|e| format!("vspace: {e:?}"))?;
    let mut n = 0;
    let refused = loop {
        let at = BASE + n * STEP;
        if let Err(e) = vs.attach(at, &[frame], true, ResId(1)) {
            break e;
        }
        kassert!(
            vs.detach(at).is_some(),
            "attachment {n} not there to detach"
        );
        n += 1;
        if n > limit {
            break Error::Unknown;
        }
    };
    let charged = quota::usage()
        .iter()
        .find(|u| u.0 == USER)
        .map_or(0, |u| u.2);
    drop(vs);
    kassert!(
        refused == Error::Limit && charged <= limit && charged + 3 >= limit,
        "{n} attachments, then {refused:?}, with {charged} frames charged of a {limit}-frame share"
    );
    Ok(())
}
