//! The privilege matrix (issue 12): every operation x owner / other user / administrator x
//! target on the actor's core / on another core, escalation attempts included, driven from
//! user space by `user/privcheck` (its `//!` doc and docs/resources.md, "Who may do what").
//! Each refused cell must change nothing and each allowed one must take effect; privcheck
//! prints the whole matrix as a table and one `MISMATCH` line per cell that did not hold.

use crate::{kassert, ktest, percore, smp};
use abi::res::UserId;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Run privcheck as the kernel's (and so an administrator's) process, with its targets on
/// each of `cores` in turn (600 s only catches a hang).
fn privcheck(cores: &[usize]) -> crate::ktest::TestResult {
    crate::res::begin_flow(UserId::KERNEL);
    let args: Vec<String> = cores.iter().map(|c| format!("{c}")).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = super::run_to_end("privcheck", &args, abi::Priority::App, 600)?;
    kassert!(
        s.how == abi::ENDED_EXIT && s.code == 0,
        "privcheck {args:?} ended with {s:?}: its MISMATCH lines on the console list every cell that did not hold"
    );
    Ok(())
}

ktest! {
    /// The matrix with the targets on the testing core and on the next one.
    fn privilege_matrix_on_two_cores() -> TestResult {
        let n = smp::cores_planned();
        if n < 2 {
            crate::kskip!("needs 2 cores");
        }
        let me = percore::current_core();
        privcheck(&[me, (me + 1) % n])
    }
}

ktest! {
    /// The matrix with the targets on the two cores farthest from the testing core (other
    /// pairs of rings and agents than the two-core run's).
    fn privilege_matrix_on_four_cores() -> TestResult {
        let n = smp::cores_planned();
        if n < 4 {
            crate::kskip!("needs 4 cores");
        }
        let me = percore::current_core();
        privcheck(&[(me + 2) % n, (me + 3) % n])
    }
}
