//! In-kernel tests: registered with [`crate::ktest!`], selected by `ktest=PATTERNS` on the
//! command line, run on the bootstrap core after boot, reported on the console in the line
//! protocol of `abi::protocol` that `cargo xtask test` reads.
//!
//! A test is a function returning [`TestResult`]; it may use [`crate::smp::call_on`] to act
//! on other cores. An *expected-fault* test is a function that must bring the kernel down
//! with a report containing a given text (W^X, exception reports, panics). It runs only when
//! selected by its exact name, in a boot of its own: xtask boots once per such test and
//! checks the exit status and the report.
//!
//! Tests are collected in the `.ktests` link section (like Asterinas' `ktest` or the
//! `linkme` crate), so a test is registered where it is written, with no central list.

use crate::time;
use abi::protocol;
use alloc::string::String;

/// What a test returns: `Err` carries the failure message, or [`skip`]'s marker.
pub type TestResult = Result<(), String>;

/// Starts the message of a test that skipped itself (see [`crate::kskip!`]): a byte no
/// failure message contains, so a skip cannot be confused with a failure.
const SKIP_MARK: &str = "\u{1}skip: ";

/// The `Err` a test returns to say it cannot run in this boot (too few cores, the other
/// kernel structure). It is reported and counted as skipped, never as passed.
pub fn skip(reason: &str) -> String {
    let mut s = String::from(SKIP_MARK);
    s.push_str(reason);
    s
}

/// How a test runs.
pub enum Body {
    Normal(fn() -> TestResult),
    /// Must stop the machine with a report containing `expect`.
    Fault {
        expect: &'static str,
        run: fn(),
    },
}

/// One registered test.
pub struct KTest {
    pub module: &'static str,
    pub name: &'static str,
    pub body: Body,
}

impl KTest {
    /// `module::name`, without the crate and `tests` prefixes.
    pub fn full_name(&self) -> heapless::String<128> {
        let m = self
            .module
            .trim_start_matches("musubi::")
            .trim_start_matches("tests::");
        let mut s = heapless::String::new();
        let _ = core::fmt::write(&mut s, format_args!("{m}::{}", self.name));
        s
    }
}

/// Register a test: `ktest! { fn name() -> TestResult { ... } }`, or an expected-fault test:
/// `ktest! { #[expect_fault = "text"] fn name() { ... } }`.
#[macro_export]
macro_rules! ktest {
    ($(#[doc = $doc:literal])* fn $name:ident() -> TestResult $body:block) => {
        $(#[doc = $doc])*
        fn $name() -> $crate::ktest::TestResult $body
        const _: () = {
            #[link_section = ".ktests"]
            #[used]
            static REGISTRATION: $crate::ktest::KTest = $crate::ktest::KTest {
                module: module_path!(),
                name: stringify!($name),
                body: $crate::ktest::Body::Normal($name),
            };
        };
    };
    ($(#[doc = $doc:literal])* #[expect_fault = $expect:literal] fn $name:ident() $body:block) => {
        $(#[doc = $doc])*
        fn $name() $body
        const _: () = {
            #[link_section = ".ktests"]
            #[used]
            static REGISTRATION: $crate::ktest::KTest = $crate::ktest::KTest {
                module: module_path!(),
                name: stringify!($name),
                body: $crate::ktest::Body::Fault { expect: $expect, run: $name },
            };
        };
    };
}

/// Skip the test (return from it) with a formatted reason: `kskip!("needs {} cores", 2)`.
#[macro_export]
macro_rules! kskip {
    ($($fmt:tt)+) => {
        return Err($crate::ktest::skip(&alloc::format!($($fmt)+)))
    };
}

/// Fail the test with a formatted message unless `cond` holds.
#[macro_export]
macro_rules! kassert {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(alloc::format!("{} (at {}:{})", format_args!($($fmt)+), file!(), line!()));
        }
    };
}

extern "C" {
    static __ktests_start: u8;
    static __ktests_end: u8;
}

/// Every registered test.
pub fn all() -> &'static [KTest] {
    // SAFETY: the linker script places every `.ktests` entry, each a `KTest` static of the
    // same size and alignment, contiguously between these two symbols.
    unsafe {
        let start = core::ptr::addr_of!(__ktests_start).cast::<KTest>();
        let end = core::ptr::addr_of!(__ktests_end).cast::<KTest>();
        let n = (end as usize - start as usize) / core::mem::size_of::<KTest>();
        core::slice::from_raw_parts(start, n)
    }
}

/// Counts of one run.
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

/// Run the tests matching `patterns`, in name order, those named after `after` only (if
/// given). Expected-fault tests are listed (for xtask) and run only when `patterns` names
/// one exactly; such a run does not return.
pub fn run(patterns: &str, after: Option<&str>) -> Summary {
    let mut s = Summary {
        passed: 0,
        failed: 0,
        skipped: 0,
    };
    let exact = bootargs::is_exact(patterns);
    // Link order is arbitrary; run in name order so runs are comparable.
    let mut tests: alloc::vec::Vec<&KTest> = all().iter().collect();
    tests.sort_by_key(|t| t.full_name());
    for t in tests {
        let name = t.full_name();
        // `ktest.after=NAME`: the harness booted again after the kernel stopped in NAME.
        if after.is_some_and(|after| name.as_str() <= after) {
            continue;
        }
        match t.body {
            Body::Fault { expect, run } => {
                if exact && name.as_str() == patterns {
                    crate::kprint!("{}{name}\n", protocol::KTEST_RUN);
                    run();
                    crate::kprint!(
                        "{}{name}: expected a fault, but the test returned\n",
                        protocol::KTEST_FAIL
                    );
                    crate::fatal::exit_failure();
                }
                crate::kprint!(
                    "{}{name} expects \"{expect}\"\n",
                    protocol::KTEST_FAULT_TEST
                );
            }
            Body::Normal(f) => {
                if !bootargs::matches_any(patterns, &name) {
                    continue;
                }
                crate::kprint!("{}{name}\n", protocol::KTEST_RUN);
                let t0 = time::now_ns();
                match f() {
                    Ok(()) => {
                        s.passed += 1;
                        let us = (time::now_ns() - t0) / 1000;
                        crate::kprint!("{}{name} ({us} us)\n", protocol::KTEST_OK);
                    }
                    Err(msg) if msg.starts_with(SKIP_MARK) => {
                        s.skipped += 1;
                        let why = &msg[SKIP_MARK.len()..];
                        crate::kprint!("{}{name}: {why}\n", protocol::KTEST_SKIP);
                    }
                    Err(msg) => {
                        s.failed += 1;
                        crate::kprint!("{}{name}: {msg}\n", protocol::KTEST_FAIL);
                    }
                }
            }
        }
    }
    crate::kprint!(
        "{}{} passed, {} failed, {} skipped\n",
        protocol::KTEST_DONE,
        s.passed,
        s.failed,
        s.skipped
    );
    s
}
