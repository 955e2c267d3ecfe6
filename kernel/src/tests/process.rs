//! Processes from the boot archive: running, faulting, preemption, FPU state, bad input.
//!
//! These tests run programs from `user/` (the boot archive xtask attaches), on the core
//! running the tests, and drive that core's scheduler until the programs end.

use crate::proc::{self, sched, TEST_PARENT};
use crate::{kassert, ktest, percore};
use abi::{Pid, Priority, WaitStatus};
use alloc::format;
use alloc::string::String;

/// Run `name` to its end on this core (120 s only catches a hang).
fn run(name: &str, args: &[&str], prio: Priority) -> Result<WaitStatus, String> {
    super::run_to_end(name, args, prio, 120)
}

fn exited_ok(s: &WaitStatus) -> bool {
    s.how == abi::ENDED_EXIT && s.code == 0
}

ktest! {
    /// `hello` runs in its own address space, prints, and exits with status 0.
    fn hello_runs_and_exits() -> TestResult {
        let s = run("hello", &["a", "b"], Priority::App)?;
        kassert!(exited_ok(&s), "hello ended with {s:?}");
        Ok(())
    }
}

ktest! {
    /// Each kind of user fault kills only the program; the parent sees the fault.
    fn user_faults_kill_only_the_program() -> TestResult {
        for (kind, vector) in [("page-fault", 14), ("general-protection", 13), ("invalid-opcode", 6), ("divide", 0), ("kernel-memory", 14), ("write-text", 14)] {
            let s = run("crash", &[kind], Priority::App)?;
            kassert!(s.how == abi::ENDED_FAULT && s.code == vector, "crash {kind} ended with {s:?}, expected fault vector {vector}");
        }
        // The kernel is fine: a normal program still runs.
        let s = run("hello", &[], Priority::App)?;
        kassert!(exited_ok(&s), "hello after the faults ended with {s:?}");
        Ok(())
    }
}

ktest! {
    /// Bad pointers and an unknown call number are error returns, not faults.
    fn bad_system_call_arguments_are_errors() -> TestResult {
        for kind in ["bad-pointer", "bad-syscall", "wait-timeout"] {
            let s = run("crash", &[kind], Priority::App)?;
            kassert!(exited_ok(&s), "crash {kind} ended with {s:?} (it exits 0 when the kernel refused cleanly)");
        }
        Ok(())
    }
}

ktest! {
    /// Two programs with different XMM contents, switching back and forth through system
    /// calls, timer interrupts and context switches on one core, each keep their own.
    fn sse_state_is_per_process() -> TestResult {
        let a = proc::spawn("ssecheck", &["1", "300"], Priority::App, TEST_PARENT).map_err(|e| format!("{e}"))?;
        let b = proc::spawn("ssecheck", &["2", "300"], Priority::App, TEST_PARENT).map_err(|e| format!("{e}"))?;
        let (sa, sb) = (super::finish(a, "ssecheck 1", 120)?, super::finish(b, "ssecheck 2", 120)?);
        kassert!(exited_ok(&sa) && exited_ok(&sb), "ssecheck ended with {sa:?} and {sb:?}");
        Ok(())
    }
}

ktest! {
    /// A program that loops forever cannot starve others: a higher-priority program runs to
    /// its end at once, one of equal priority shares the core, and the looper can be killed.
    fn runaway_program_cannot_starve_the_core() -> TestResult {
        let spin = proc::spawn("spin", &[], Priority::App, TEST_PARENT).map_err(|e| format!("{e}"))?;
        let s = run("hello", &["server"], Priority::Server)?;
        kassert!(exited_ok(&s), "server-priority hello ended with {s:?}");
        let s = run("hello", &["app"], Priority::App)?;
        kassert!(exited_ok(&s), "app-priority hello ended with {s:?}");
        kassert!(!proc::has_ended(spin), "spin ended by itself");
        kassert!(proc::kill(spin).is_ok(), "kill spin failed");
        let s = proc::take_status(spin).ok_or("no status after kill")?;
        kassert!(s.how == abi::ENDED_KILLED, "spin ended with {s:?}");
        Ok(())
    }
}

ktest! {
    /// Broken executables are refused with an error and nothing is left behind.
    fn broken_executables_are_refused() -> TestResult {
        let good = crate::archive::find("hello").ok_or("no hello in the boot archive")?;
        let mut cases: alloc::vec::Vec<(&str, alloc::vec::Vec<u8>)> = alloc::vec::Vec::new();
        cases.push(("empty", alloc::vec::Vec::new()));
        cases.push(("truncated header", good[..40].to_vec()));
        cases.push(("truncated segments", good[..good.len() / 3].to_vec()));
        let mut m = good.to_vec();
        m[18] = 0x28; // e_machine: ARM
        cases.push(("wrong machine", m));
        let mut e = good.to_vec();
        e[24..32].copy_from_slice(&0xffff_ffff_8020_0000u64.to_le_bytes()); // entry in the kernel
        cases.push(("entry in the kernel half", e));
        let mut seg = good.to_vec();
        let phoff = u64::from_le_bytes(seg[32..40].try_into().unwrap_or_default()) as usize;
        seg[phoff + 16..phoff + 24].copy_from_slice(&0xffff_8000_0000_0000u64.to_le_bytes()); // p_vaddr
        cases.push(("segment in the kernel half", seg));
        let before = super::free_frames_here(0);
        for (what, image) in &cases {
            let r = proc::spawn_image("broken", image, &[], Priority::App, TEST_PARENT);
            kassert!(r == Err(abi::Error::BadExecutable), "{what}: spawn gave {r:?}");
        }
        let after = super::free_frames_here(0);
        kassert!(before == after, "refused images leaked {} frames", before.abs_diff(after));
        Ok(())
    }
}

ktest! {
    /// A process's memory (address space, page tables, kernel stack) returns to the pool.
    fn process_memory_returns_to_the_pool() -> TestResult {
        // Warm up allocator caches.
        run("hello", &[], Priority::App)?;
        // Its memory is back already: freed at its end, its kernel stack when the idle
        // context took the core back (before `run` returned); frames freed on other cores
        // are taken back here.
        let before = super::free_frames_here(0);
        for _ in 0..5 {
            run("hello", &[], Priority::App)?;
        }
        // Freed frames come home when the core next idles: wait for that (30 s is a hang
        // guard), then compare.
        sched::run_until(30_000_000_000, || super::free_frames_here(0) == before);
        let after = super::free_frames_here(0);
        kassert!(before == after, "5 runs of hello leaked {} frames", before.abs_diff(after));
        Ok(())
    }
}

ktest! {
    /// The boot archive's directory lists the programs xtask packed.
    fn boot_archive_lists_programs() -> TestResult {
        let names: alloc::vec::Vec<&str> = crate::archive::names().collect();
        for want in ["shell", "hello", "crash", "nop"] {
            kassert!(names.contains(&want), "'{want}' missing from the boot archive ({names:?})");
        }
        kassert!(crate::archive::find("no-such-program").is_none(), "found a program that is not there");
        Ok(())
    }
}

ktest! {
    /// A program that takes all the memory it can is refused at its user's share of the
    /// core (`Limit`), another user's programs still start; when two users' hogs hold all
    /// that programs may have, a third user's program is refused with `NoMemory`, the
    /// kernel keeps its reserve and keeps working, and the memory comes back.
    fn memory_hog_is_refused_and_the_kernel_survives() -> TestResult {
        let core = percore::current_core();
        run("hello", &[], Priority::App)?;
        let before = super::free_frames_here(0);
        // What users held before the hogs: all of it is there again after them (not
        // nothing: a test before this one that failed may have left a resource held,
        // and this test would fail for it too, `[smp4-biglock]` once).
        let usage_before = crate::res::quota::usage();
        let s = run("crash", &["hog"], Priority::App)?;
        kassert!(exited_ok(&s), "crash hog ended with {s:?}");
        let s = run("hello", &["after", "hog"], Priority::App)?;
        kassert!(exited_ok(&s), "hello after the hog ended with {s:?}");
        let admin_hog = proc::spawn("crash", &["hog-hold"], Priority::App, TEST_PARENT).map_err(|e| format!("{e}"))?;
        let mut other_hog = Err(String::from("not started"));
        let checked = admin_hog_holds_its_share(admin_hog).and_then(|()| {
            other_hog = spawn_as(5000, "crash", &["hog-hold"]);
            other_hog.clone().and_then(|other| pool_is_full(core, other))
        });
        // The holders are ended whatever the checks said, so a failure here cannot leave
        // the core without memory for the tests after this one.
        super::end_and_reap(admin_hog);
        if let Ok(other) = other_hog {
            super::end_and_reap(other);
        }
        checked?;
        // Wait for the event, not for a time: under load another core may still be tearing
        // down a program whose charges are on this core when the frames are all back.
        sched::run_until(30_000_000_000, || {
            super::free_frames_here(0) == before && crate::res::quota::usage() == usage_before
        });
        let after = super::free_frames_here(0);
        kassert!(before == after, "the hogs' memory did not all come back ({} frames)", before.abs_diff(after));
        let usage = crate::res::quota::usage();
        kassert!(usage == usage_before, "users still hold memory: {usage:?} (before the hogs: {usage_before:?})");
        Ok(())
    }
}

/// Start `name` on this core as a process of `user` (not the administrator's).
fn spawn_as(user: u32, name: &str, args: &[&str]) -> Result<Pid, String> {
    crate::res::begin_flow(abi::res::UserId(user));
    let r = proc::spawn(name, args, Priority::App, TEST_PARENT);
    crate::res::end_flow();
    r.map_err(|e| format!("spawn {name} as user {user}: {e}"))
}

/// Wait until `holder` sleeps on the memory it took.
fn holds_memory(holder: Pid) -> crate::ktest::TestResult {
    super::until_asleep(holder, "crash hog-hold", 120)
}

/// Try to start `hello` as `user`; a started one is run to its end.
fn try_hello_as(user: u32) -> Result<(), abi::Error> {
    crate::res::begin_flow(abi::res::UserId(user));
    let r = proc::spawn("hello", &[], Priority::App, TEST_PARENT);
    crate::res::end_flow();
    let pid = r?;
    sched::run_until(60_000_000_000, || proc::has_ended(pid));
    super::end_and_reap(pid);
    Ok(())
}

/// With the administrator's hog holding its share: the administrator's next program is
/// refused with `Limit`, another user's runs.
fn admin_hog_holds_its_share(admin_hog: Pid) -> crate::ktest::TestResult {
    holds_memory(admin_hog)?;
    let r = try_hello_as(crate::proc::FIRST_USER.0);
    kassert!(
        r == Err(abi::Error::Limit),
        "the administrator's program beside its hog: {r:?}, expected Limit"
    );
    let r = try_hello_as(7000);
    kassert!(
        r.is_ok(),
        "another user's program beside the administrator's hog: {r:?}"
    );
    Ok(())
}

/// With a second user's hog holding the rest: the kernel's reserve is intact and a third
/// user's program is refused with `NoMemory`.
fn pool_is_full(core: usize, other_hog: Pid) -> crate::ktest::TestResult {
    holds_memory(other_hog)?;
    let free_now = crate::mm::frames::counts(core).0;
    kassert!(
        free_now >= crate::mm::frames::kernel_reserve(core),
        "user memory ate into the kernel reserve ({free_now} frames free)"
    );
    let r = try_hello_as(6000);
    kassert!(
        r == Err(abi::Error::NoMemory),
        "a third user's program beside two hogs: {r:?}, expected NoMemory"
    );
    Ok(())
}

ktest! {
    /// A program may not start a child that outranks it, nor kill a process that is not
    /// its descendant.
    fn priority_and_kill_limits() -> TestResult {
        let s = run("crash", &["outrank"], Priority::App)?;
        kassert!(exited_ok(&s), "crash outrank ended with {s:?}");
        let other = proc::spawn("spin", &[], Priority::App, TEST_PARENT).map_err(|e| format!("{e}"))?;
        let other_name = format!("{other}");
        let s = run("crash", &["kill-pid", &other_name], Priority::App)?;
        kassert!(exited_ok(&s), "crash kill-pid {other} ended with {s:?}");
        kassert!(!proc::has_ended(other), "a stranger's kill took effect");
        let _ = proc::kill(other);
        let _ = proc::take_status(other);
        Ok(())
    }
}

ktest! {
    /// Only the administrator's (or the kernel's) processes may change their user or power
    /// off: a program created as user 2000 may not become user 1000, the administrator or
    /// the kernel, nor power the machine off (regression: any program could).
    fn only_the_administrator_changes_users() -> TestResult {
        let s = run("crash", &["drop-user"], Priority::App)?;
        kassert!(exited_ok(&s), "crash drop-user ended with {s:?} (its console lines say which attempt was let through)");
        Ok(())
    }
}

ktest! {
    /// Children that outlive their parent are cleaned up when they end: no zombie stays.
    fn orphans_leave_no_zombies() -> TestResult {
        let count = || proc::infos().len();
        let before = count();
        let s = run("crash", &["orphan"], Priority::App)?;
        kassert!(exited_ok(&s), "crash orphan ended with {s:?}");
        // The orphan (hello) ends by itself: wait for that (60 s only catches a hang).
        sched::run_until(60_000_000_000, || count() == before);
        kassert!(count() == before, "{} processes left behind: {:?}", count() - before, proc::infos().iter().map(|p| p.pid).collect::<alloc::vec::Vec<_>>());
        Ok(())
    }
}

ktest! {
    /// The resource interface from user space (`user/rescheck`): rights between users,
    /// stale ids, process + compute, malformed names and bad pointers.
    fn resources_from_user_space() -> TestResult {
        let s = run("rescheck", &[], Priority::App)?;
        kassert!(exited_ok(&s), "rescheck ended with {s:?} (its console lines say which check failed)");
        Ok(())
    }
}

/// The frame mapped at `at` in process `pid` (of this core), and whether it is writable.
fn frame_at(pid: Pid, at: u64) -> Result<(u64, bool), String> {
    proc::with_vspace_of(pid, |vs| {
        crate::arch::x86_64::paging::translate(vs.root(), at).ok_or(abi::Error::BadAddress)
    })
    .map(|t| (t.paddr & !0xfff, t.writable))
    .map_err(|e| format!("nothing mapped at {at:#x} in {pid}: {e}"))
}

ktest! {
    /// Pure text (`proc/text.rs`): two processes of one archived program map the same
    /// frames, read-only, for its read-only segments and their own for its writable one;
    /// the same program passed as an image gets a copy of its own; the shared frames
    /// outlive the first process (the second still runs to a clean exit) and go back to
    /// the pool with the last.
    fn archived_programs_share_their_text() -> TestResult {
        run("hello", &[], Priority::App)?;
        let before = super::free_frames_here(0);
        let image = crate::archive::find("hello").ok_or("no hello in the boot archive")?;
        let plan = elfload::plan(image).map_err(|e| format!("hello's image: {e}"))?;
        let text = plan.segments.iter().find(|s| s.executable).ok_or("hello has no text")?.vaddr;
        let data = plan.segments.iter().find(|s| s.writable).ok_or("hello has no data")?.vaddr;
        let e = |r: Result<Pid, abi::Error>| r.map_err(|e| format!("{e}"));
        let a = e(proc::create_stopped("hello", &[], Priority::App, TEST_PARENT))?;
        let b = e(proc::create_stopped("hello", &["b"], Priority::App, TEST_PARENT));
        let c = e(proc::spawn_image("hello", image, &[], Priority::App, TEST_PARENT));
        let checked = (|| {
            let (b, c) = (b.clone()?, c.clone()?);
            let (ta, wa) = frame_at(a, text)?;
            let (tb, _) = frame_at(b, text)?;
            let (tc, _) = frame_at(c, text)?;
            kassert!(ta == tb, "two processes of hello: text at {ta:#x} and {tb:#x}, not shared");
            kassert!(!wa, "shared text is writable");
            kassert!(tc != ta, "hello passed as an image shares the archive's text frame");
            kassert!(frame_at(a, data)?.0 != frame_at(b, data)?.0, "the writable segment is shared");
            // The first goes; the second keeps the frames and runs on them.
            proc::remove(a).map_err(|e| format!("remove {a}: {e}"))?;
            kassert!(frame_at(b, text)?.0 == tb, "the text moved when its first user went");
            proc::start(b, 1).map_err(|e| format!("start {b}: {e}"))?;
            sched::run_until(60_000_000_000, || proc::has_ended(b));
            let s = proc::take_status(b).ok_or("hello (second) did not end")?;
            kassert!(exited_ok(&s), "hello on shared text ended with {s:?}");
            Ok(())
        })();
        // Ended and forgotten whatever the checks said (a stopped or running one is killed).
        for pid in [Ok(a), b, c].into_iter().flatten() {
            let _ = proc::remove(pid);
        }
        checked?;
        sched::run_until(30_000_000_000, || super::free_frames_here(0) == before);
        let after = super::free_frames_here(0);
        kassert!(before == after, "shared text leaked {} frames", before.abs_diff(after));
        Ok(())
    }
}

ktest! {
    /// A process that ends while one of its threads waits for a child to be made on
    /// another core leaves no zombie there: the child, once ended, is reaped (its parent
    /// is gone). A regression found by an audit: the answer nobody read was dropped, the
    /// parent had never followed the child, so its end told that core nothing, and the
    /// child stayed a zombie for good, counted against its user's processes. (A round
    /// whose spawn is answered before the parent ends, or never made, proves nothing
    /// alone; most rounds are not so.)
    fn a_parent_gone_during_a_remote_spawn_leaves_no_zombie() -> TestResult {
        let Some(other) = another_core() else {
            return Err(crate::ktest::skip("needs a second core"));
        };
        // Its child there (a `nop`, which ends by itself) is reaped: nothing of the dead
        // parent's stays.
        parent_gone_rounds("spawn-exit", false, other, 0..20)
    }
}

ktest! {
    /// The same for a child made by opening a process resource on another core (OPEN
    /// makes the opener its parent): an opener gone before the answer came leaves its
    /// child the kernel's, not a dead parent's. A regression found by an audit: the answer
    /// was dropped as for a spawn before its fix, and the child (stopped, living while its
    /// resource does) kept the dead parent, so once ended it stayed a zombie for good.
    fn a_parent_gone_during_a_remote_process_open_leaves_no_orphan() -> TestResult {
        let Some(other) = another_core() else {
            return Err(crate::ktest::skip("needs a second core"));
        };
        let result = parent_gone_rounds("open-exit", true, other, 0..20);
        // The resources the openers made, closed as the kernel (which ends their children).
        let made: alloc::vec::Vec<_> = crate::res::list(other)
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.kind == abi::res::ResType::Process as u8)
            .filter(|r| r.name().strip_prefix("oe").is_some_and(|n| n.parse::<usize>().is_ok()))
            .map(|r| r.id)
            .collect();
        crate::res::begin_flow(abi::res::UserId::KERNEL);
        for id in made {
            let _ = crate::res::close(id);
        }
        result
    }
}

ktest! {
    /// The same for a child made by `MIGRATE_IMPORT` on another core (the importer is its
    /// parent): an importer gone before the answer came leaves no zombie there, and no
    /// frame of its core lost. Two regressions: the kernel ended the move its gone mover
    /// left open by killing the imported copy (`migrate::mover_gone`), but the copy's core
    /// never heard its parent was gone, so the copy stayed a zombie for good; and the
    /// frames holding the image for the copy to read, the dead importer's to free, were
    /// never freed (a review of the first fix).
    fn an_importer_gone_during_an_import_leaves_no_zombie() -> TestResult {
        let Some(other) = another_core() else {
            return Err(crate::ktest::skip("needs a second core"));
        };
        parent_gone_rounds("import-exit", true, other, 0..1)?; // warm-up
        // The image's frames are this core's (the importer's); the other core's pool may
        // still be taking back the copies' memory meanwhile.
        let before = super::free_frames_here(0);
        parent_gone_rounds("import-exit", true, other, 1..21)?;
        sched::run_until(30_000_000_000, || super::free_frames_here(0) == before);
        let after = super::free_frames_here(0);
        kassert!(before == after, "free frames here before {before}, after {after}");
        Ok(())
    }
}

ktest! {
    /// A process's limit of children holds when its threads make children on another core
    /// at once (`crash children-race`: 16 places left, 32 threads each ask for one; each
    /// request waits there for its answer). A regression found by an audit: each thread's
    /// check counted only the children already made, not those on their way, so up to one
    /// more per thread was made past the limit.
    fn children_made_at_once_on_another_core_stay_within_the_limit() -> TestResult {
        let Some(other) = another_core() else {
            return Err(crate::ktest::skip("needs a second core"));
        };
        let s = super::run_to_end("crash", &["children-race", &format!("{other}")], Priority::App, 600)?;
        kassert!(
            s.how == abi::ENDED_EXIT && s.code == 0,
            "crash children-race ended with {s:?} (its console lines say why)"
        );
        Ok(())
    }
}

/// `rounds` of [`parent_gone_round`] for `crash CASE OTHER`, with the round's number after
/// them if `numbered` (for the cases that name what they make).
fn parent_gone_rounds(
    case: &str,
    numbered: bool,
    other: usize,
    rounds: core::ops::Range<usize>,
) -> Result<(), String> {
    let core_arg = format!("{other}");
    rounds.into_iter().try_for_each(|round| {
        let n = format!("{round}");
        let args = [case, core_arg.as_str(), n.as_str()];
        let args = if numbered { &args[..] } else { &args[..2] };
        parent_gone_round(args, other).map_err(|e| format!("round {round}: {e}"))
    })
}

/// One round of the parent-gone tests: `crash ARGS` (which starts a child on core `other`
/// and ends at once) exits 0, and none of its children stays there.
fn parent_gone_round(args: &[&str], other: usize) -> Result<(), String> {
    let pid = proc::spawn("crash", args, Priority::App, TEST_PARENT)
        .map_err(|e| format!("spawn: {e}"))?;
    let ended = sched::run_until(60_000_000_000, || proc::has_ended(pid));
    let status = proc::take_status(pid);
    kassert!(
        ended && status.is_some_and(|s| s.code == 0),
        "crash {}: {status:?}",
        args[0]
    );
    let left = children_left_of(pid, other);
    kassert!(
        left == Some(0),
        "{left:?} children of the ended {pid} kept on core {other}"
    );
    Ok(())
}

/// Children on core `other` whose parent is `pid`, looked at every 10 ms until there are
/// none, for 30 s at most (the list is an RPCC call); `None` if the list failed.
fn children_left_of(pid: Pid, other: usize) -> Option<usize> {
    use crate::rpcc::{self, Op, Out};
    let children_of = || match rpcc::call(other, Op::Processes) {
        Ok(Out::Procs(v)) => Some(v.iter().filter(|p| p.parent == pid).count()),
        _ => None,
    };
    let mut left = children_of();
    for _ in 0..3000 {
        if left == Some(0) {
            break;
        }
        sched::run_until(10_000_000, || false);
        left = children_of();
    }
    left
}

/// Another core than this one that RPCC reaches, if any.
fn another_core() -> Option<usize> {
    let here = percore::current_core();
    (0..crate::smp::cores_planned()).find(|&c| c != here && crate::rpcc::reachable(c))
}
