//! `resbench ladder M N`: P4's resource operation (RCC) at three distances, for `cargo
//! xtask bench machines`: `RES_INFO` of a pipe on this core (the local path), on another
//! core of this machine (an inter-core RPCC request), and on machine M (`ulib::mach`'s
//! `OP_RES`: this machine's `machd`, an mrpc request over `net.udp`, machine M's `machd`
//! making it there as this program's user). N samples each after a warm-up, each the mean
//! over [`NEAR_OPS`] operations (the two on this machine) or [`FAR_OPS`] (the other
//! machine), in time-stamp ticks (`BENCH` lines; xtask turns them into ns).

use ulib::abi::res::Rights;
use ulib::abi::Error;
use ulib::bench::{self, rdtsc};
use ulib::mach::{res_close, res_info, res_open};
use ulib::{println, res, sys};

pub const SAME: &str = "resource op (RES_INFO of a pipe), same core";
pub const CROSS: &str = "resource op (RES_INFO of a pipe), other core";
pub const MACHINE: &str = "resource op (RES_INFO of a pipe), other machine";
/// Operations per sample on this machine.
const NEAR_OPS: u64 = 200;
/// Operations per sample on the other machine.
const FAR_OPS: u64 = 5;

/// `resbench ladder M N`: exit code 0, or 1 after a `BENCH error` line.
pub fn ladder(m: u8, samples: usize) -> i32 {
    let me = sys::core().unwrap_or(0);
    let mut infos = [ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let n = sys::cores(&mut infos).unwrap_or(0);
    let Some(other) = (0..n).find(|&c| c != me && infos[c].online != 0) else {
        println!("BENCH error {{\"case\":\"{CROSS}\",\"error\":\"one core\"}}");
        return 1;
    };
    let open = |core: usize| res::open(&format_name(core), &[], Rights::OWNER_ALL);
    let (near, far) = match (open(me), open(other)) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            for id in [a, b].into_iter().flatten() {
                let _ = res::close(id);
            }
            println!("BENCH error {{\"case\":\"{SAME}\",\"error\":\"open\"}}");
            return 1;
        }
    };
    let remote = res_open(m, "c0/pipe/rb-m", &[], Rights::OWNER_ALL);
    let r = (|| {
        let remote = remote.as_ref().map_err(|e| e.message())?;
        let time = |id| {
            move |n: u64| {
                let start = rdtsc();
                for _ in 0..n {
                    res::info(id).map_err(Error::message)?;
                }
                Ok(rdtsc() - start)
            }
        };
        bench::samples(SAME, samples, NEAR_OPS, time(near))?;
        bench::samples(CROSS, samples, NEAR_OPS, time(far))?;
        bench::samples(MACHINE, samples, FAR_OPS, |n| {
            let start = rdtsc();
            for _ in 0..n {
                res_info(remote).map_err(Error::message)?;
            }
            Ok(rdtsc() - start)
        })
    })();
    let _ = res::close(near);
    let _ = res::close(far);
    if let Ok(p) = &remote {
        let _ = res_close(p);
    }
    match r {
        Ok(()) => {
            bench::done();
            0
        }
        Err(e) => {
            println!("BENCH error {{\"case\":\"{MACHINE}\",\"error\":\"{e}\"}}");
            1
        }
    }
}

/// The name of the pipe of core `core`.
fn format_name(core: usize) -> alloc::string::String {
    alloc::format!("c{core}/pipe/rb-{core}")
}
