//! ICAs passed on requests and replies (P3's "peel off and paste", `ipc/ica.rs`), driven
//! from user space by `icacheck`: with the receiving servers on this core and on another,
//! the same physical frames on both sides (read from both address spaces' page tables),
//! bad input, a sender that touches what it passed, receivers that go away; afterwards
//! every core has the memory it had.

use super::{end_and_reap, finish, frames_after, free_frames_per_core, run_program};
use crate::arch::x86_64::paging::{self, PAGE_SIZE};
use crate::proc::{self, sched, TEST_PARENT};
use crate::{kassert, ktest, percore, smp};
use abi::ipc::{Msg, ICA_SLOT, ICA_SLOTS, ICA_WINDOW, SUBMIT_SEND};
use abi::res::{ResId, ResType};
use abi::Pid;
use alloc::format;
use alloc::string::String;

/// This core first, then another one if there is one.
fn cores() -> alloc::vec::Vec<usize> {
    let here = percore::current_core();
    let mut v = alloc::vec![here];
    if smp::cores_planned() >= 2 {
        v.push((here + 1) % smp::cores_planned());
    }
    v
}

ktest! {
    /// `icacheck` with its servers on this core (the rendezvous fast path) and on another
    /// (RPCC): round trips by CALL, SUBMIT and SEND; bad input refused with the sender
    /// keeping its mapping; a sender that touches the area after passing it ends at a page
    /// fault; a holder that exits, is killed or closes its endpoint gives it back. No memory
    /// is left behind.
    fn passed_on_requests_end_to_end() -> TestResult {
        let args: alloc::vec::Vec<String> = cores().iter().map(|c| format!("{c}")).collect();
        // Warm-up: RPCC agents (a kernel stack each) and heaps reach their working size.
        for a in &args {
            run_program("icacheck", &[a.as_str()], 300)?;
        }
        let before = free_frames_per_core()?;
        for a in &args {
            run_program("icacheck", &[a.as_str()], 300)?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}

/// A fold of `frames` in order (0 for none).
fn fold(frames: impl Iterator<Item = u64>) -> u64 {
    frames.fold(0, |h, f| {
        (h ^ f).wrapping_mul(0x0000_0100_0000_01b3).wrapping_add(1)
    })
}

/// On this core: the fold of the frames mapped at the attachment of vregion `region` (raw
/// id) in the ICA window of any process here (0 if none maps it there).
fn window_frames_here(region: u64) -> u64 {
    let region = ResId(region);
    sched::with(|s| {
        for p in s.processes.values() {
            let Some(vs) = p.vspace.as_ref() else {
                continue;
            };
            let window = ICA_WINDOW..ICA_WINDOW + ICA_SLOTS * ICA_SLOT;
            for &(at, pages, r) in vs.attachments() {
                if r == region && window.contains(&at) {
                    return fold((0..pages).map(|i| {
                        paging::translate(vs.root(), at + i * PAGE_SIZE).map_or(0, |t| t.paddr)
                    }));
                }
            }
        }
        0
    })
}

/// This core's resource of type `kind` called `name`.
pub(super) fn named(kind: ResType, name: &str) -> Option<ResId> {
    crate::res::local::list()
        .into_iter()
        .find(|r| r.kind == kind as u8 && r.name() == name)
        .map(|r| r.id)
}

/// Does process `pid` (of this core) map vregion `region` anywhere, or anything at `at`?
fn maps(pid: Pid, region: ResId, at: u64) -> bool {
    sched::with(|s| {
        s.processes
            .get(&pid.serial())
            .and_then(|p| p.vspace.as_ref())
            .is_some_and(|vs| {
                vs.attachments().iter().any(|a| a.2 == region)
                    || paging::translate(vs.root(), at).is_some()
            })
    })
}

/// `icacheck frames CORE`: while the server on `core` holds the vregion, the frames its
/// window maps are the vregion's own, and the sender maps nothing of it; then the sender is
/// woken and checks the way back.
fn frames_with_server_on(core: usize) -> crate::ktest::TestResult {
    let arg = format!("{core}");
    let pid = proc::spawn(
        "icacheck",
        &["frames", arg.as_str()],
        abi::Priority::App,
        TEST_PARENT,
    )
    .map_err(|e| format!("spawn icacheck frames: {e}"))?;
    // The event: the server maps the vregion in its window (60 s only catches a hang).
    let mut held = None;
    sched::run_until(60_000_000_000, || {
        held = named(ResType::VRegion, "icaframes").filter(|v| {
            smp::call_on(core, window_frames_here, v.0, 10_000_000_000).is_ok_and(|h| h != 0)
        });
        held.is_some() || proc::has_ended(pid)
    });
    let r = (|| {
        let v = held.ok_or("the server never mapped the vregion")?;
        let own = fold(
            crate::res::vregion::frames_of(v)
                .map_err(|e| format!("frames: {e}"))?
                .into_iter(),
        );
        let there = smp::call_on(core, window_frames_here, v.0, 10_000_000_000)
            .map_err(|e| format!("call_on: {e:?}"))?;
        kassert!(
            own == there,
            "frames: the vregion's {own:#x}, the server's window {there:#x}"
        );
        kassert!(
            !maps(pid, v, 0x0000_5100_0000_0000),
            "the sender still maps the area"
        );
        // Wake the sender (a one-way message, as the kernel).
        let ep = named(ResType::Endpoint, "icaframes").ok_or("no endpoint icaframes")?;
        crate::ipc::enqueue(crate::ipc::Incoming {
            endpoint: ep,
            kind: SUBMIT_SEND,
            sender: Pid(0),
            sender_thread: 0,
            sender_user: 0,
            caller: None,
            msg: Msg::default(),
            via: crate::fnid::Via::NONE,
            ica: None,
        })
        .map_err(|e| format!("wake: {e}"))?;
        Ok::<(), String>(())
    })();
    if r.is_err() {
        // Not woken: end it now rather than at its own timeout.
        end_and_reap(pid);
        return r;
    }
    let status = finish(pid, "icacheck frames", 300)?;
    kassert!(
        status.how == abi::ENDED_EXIT && status.code == 0,
        "icacheck frames {core} ended with {status:?} (its console lines say why)"
    );
    Ok(())
}

ktest! {
    /// The pages of a passed ICA are the same physical frames on both sides: the server's
    /// ICA window maps exactly the vregion's frames (of the sender's core's pool, also with
    /// the server on another core), the sender maps none of it, and the reply brings it
    /// back with what the server wrote. No memory is left behind.
    fn same_frames_on_both_sides() -> TestResult {
        for &core in &cores() {
            frames_with_server_on(core)?; // warm-up
        }
        let before = free_frames_per_core()?;
        for &core in &cores() {
            frames_with_server_on(core)?;
        }
        let after = frames_after(&before)?;
        kassert!(before == after, "free frames per core before {before:?}, after {after:?}");
        Ok(())
    }
}
