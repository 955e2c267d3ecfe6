//! `kvcli antfig figs|gap REPS`, `kvcli load pu|wait NS` and `kvcli gapc N PACE LABEL`: P3
//! Figures 3-5 and the Figure 8 analogue on our platform, the guest side of
//! `cargo xtask bench ant` (`xtask/src/bench_ant.rs` reads the `BENCH` lines).
//!
//! A *replacement* here is what the shell's `replace kv kv` does: start `kv takeover` (the
//! same knobs as the server it replaces) on a core, which loads, checks, takes `kv` over
//! (`FN_TAKEOVER`: the old server finishes its request step, the queued requests move, the
//! old server ends) and then attaches the state ICA and serves. Its *replacement time* runs
//! from just before the spawn (the replace request) until a `STATS` sent after the old server
//! ended has been answered (the new server serves): the old server's end is waited for
//! (`WAIT` on it, this program started it), nothing polls.
//!
//! `figs REPS`: for each point of each figure, a fresh `kv 64K cpu=.. wait=..` on this core,
//! CLIENTS `kvcli load` processes beside it, 2 ms to settle, then [`PER_REP`] x REPS
//! replacements on this core, one `BENCH` sample each, each requested after a pause drawn
//! from 0..[`PHASE_NS`] (a fixed seed): a replacement's time depends on where in the
//! server's and the clients' cycle it is requested (P3 says so too), and in deterministic
//! mode back-to-back replacements would all fall at the same phase; then the clients are told to stop (a key they look for)
//! and the server ends and its function id and state ICA go. The baseline follows P3's
//! (0.5 ms CPU + 5 ms wait in the driver per request, clients waiting 5 ms between requests,
//! one client), scaled down by ten: `cpu=50000 wait=500000`, clients waiting 500 µs.
//!
//! `gap REPS`: one `kv` on this core; REPS times for 100 requests (paced 100 µs apart, as
//! P3's 100 datagrams took 15.6 ms) and for 10,000 (back to back), and for the new server on
//! the same core as the old one and on the other core: `kvcli gapc` makes N `PUT`s timed one
//! by one (the baseline) and N more while the server is replaced once (started after a tenth
//! of them, and a pause drawn from 0..200 µs), and prints the service gap (the longest request beyond the baseline's median),
//! the requests lost (an error answer), answered twice (the server's `PUT` count grew by
//! more than the answers) and wrong (a key's value at the end is not its last `PUT`). Then
//! REPS idle replacements per core placement. A replacement that ends after the client's last
//! request did not happen *during* the requests: it is counted (`BENCH` case "... outside").

use crate::{wait, with_client, Client, Fail};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use kvstate::proto::Status;
use ulib::abi::{Pid, Priority};
use ulib::bench::rdtsc;
use ulib::{bench, fnid, println, res, sys};
use xorshift::Rng;

/// The key that tells `load` clients to stop.
const STOP: &[u8] = b"antfig-stop";
/// Hang guard for anything this program waits for (virtual time).
const HANG_NS: u64 = 20_000_000_000;
/// P3's baseline, scaled by 1/10: the server's CPU and wait per request, the clients' wait.
const CPU_NS: u64 = 50_000;
const WAIT_NS: u64 = 500_000;
const CLIENT_WAIT_NS: u64 = 500_000;
/// Settling time after the clients start.
const SETTLE_NS: u64 = 2_000_000;
/// Replacements per point and REPS (Figures 3-5).
const PER_REP: usize = 4;
/// The pauses before them are drawn from 0..PHASE_NS: longer than the server's longest
/// cycle (8 clients served once each, 8 x 550 µs).
const PHASE_NS: u64 = 5_000_000;
/// Figure 8: the pace of the 100-request run.
const PACE_NS: u64 = 100_000;
/// Keys a `gapc` cycles through.
const GAP_KEYS: usize = 16;

/// One `BENCH` sample in virtual ns (or a count).
fn sample(case: &str, v: u64) {
    println!(
        "BENCH {{\"peer\":\"musubi\",\"case\":\"{case}\",\"unit\":\"virtual ns\",\"per_op\":{v}}}"
    );
}

/// A figure point: the server's knobs and the clients.
struct Point {
    case: String,
    cpu: u64,
    wait: u64,
    clients: usize,
    /// The clients' work between requests: spinning (`pu`) or asleep (`wait`), ns.
    work: (&'static str, u64),
}

fn point(
    fig: &str,
    what: String,
    cpu: u64,
    wait: u64,
    clients: usize,
    work: (&'static str, u64),
) -> Point {
    Point {
        case: format!("{fig}: {what}"),
        cpu,
        wait,
        clients,
        work,
    }
}

/// Every point of Figures 3-5 (P3's axes; see the module docs for the baseline).
fn points() -> Vec<Point> {
    let mut v = Vec::new();
    let us = |ns: u64| ns / 1000;
    for cpu in [0, 25_000, 50_000, 100_000, 150_000] {
        let what = format!("server CPU {} us/request", us(cpu));
        v.push(point(
            "fig3a",
            what,
            cpu,
            WAIT_NS,
            1,
            ("wait", CLIENT_WAIT_NS),
        ));
    }
    for wait in [0, 250_000, 500_000, 1_000_000, 1_500_000] {
        let what = format!("server wait {} us/request", us(wait));
        v.push(point(
            "fig3b",
            what,
            CPU_NS,
            wait,
            1,
            ("wait", CLIENT_WAIT_NS),
        ));
    }
    for work in [0, 50_000, 100_000, 150_000] {
        let what = format!("client CPU {} us/request", us(work));
        v.push(point("fig4a", what, CPU_NS, WAIT_NS, 1, ("pu", work)));
    }
    for work in [250_000, 500_000, 1_000_000, 1_500_000] {
        let what = format!("client wait {} us/request", us(work));
        v.push(point("fig4b", what, CPU_NS, WAIT_NS, 1, ("wait", work)));
    }
    for n in 1..=8 {
        let what = format!("{n} clients");
        v.push(point(
            "fig5",
            what,
            CPU_NS,
            WAIT_NS,
            n,
            ("wait", CLIENT_WAIT_NS),
        ));
    }
    v
}

/// `antfig figs|gap REPS`.
pub fn run(what: &str, reps: &str) -> Result<i32, String> {
    let reps: usize = reps.parse().map_err(|_| "antfig figs|gap REPS")?;
    match what {
        "figs" => {
            for p in points() {
                figure_point(&p, reps.max(1))?;
            }
        }
        "gap" => gap(reps.max(1))?,
        _ => return Err("antfig figs|gap REPS".into()),
    }
    bench::done();
    Ok(0)
}

/// The knobs of a `kv` (and of its replacements).
fn knobs(cpu: u64, wait: u64) -> [String; 2] {
    [format!("cpu={cpu}"), format!("wait={wait}")]
}

/// Start `kv 64K KNOBS` on this core and wait until it answers.
fn start_kv(knobs: &[String; 2]) -> Result<Pid, String> {
    let args = ["64K", &knobs[0], &knobs[1]];
    let pid = sys::spawn("kv", &args, Priority::App).map_err(|e| format!("spawn kv: {e}"))?;
    if let Err(e) = wait(120) {
        let _ = sys::kill(pid);
        let _ = sys::wait(Some(pid));
        return Err(e);
    }
    Ok(pid)
}

/// End the serving `kv`, withdraw its function id and close its state ICA (as `table2`).
fn stop_kv(server: Pid) -> Result<(), String> {
    let id = fnid::lookup("kv");
    let state = id.ok().and_then(|id| fnid::state(id, None).ok().flatten());
    let _ = sys::kill(server);
    let _ = sys::wait(Some(server));
    if let Ok(id) = id {
        fnid::unregister(id).map_err(|e| format!("unregister kv: {e}"))?;
    }
    if let Some(s) = state {
        res::close(s).map_err(|e| format!("close the state ICA: {e}"))?;
    }
    Ok(())
}

/// Replace `*server` by `kv takeover KNOBS` on `core`: the replacement time (module docs).
fn replace(c: &Client, server: &mut Pid, knobs: &[String; 2], core: usize) -> Result<u64, String> {
    let args = ["takeover", &knobs[0], &knobs[1]];
    let t0 = rdtsc();
    let new = sys::spawn_on("kv", &args, Priority::App, core)
        .map_err(|e| format!("spawn kv takeover: {e}"))?;
    if let Err(e) = sys::wait_timeout(Some(*server), HANG_NS) {
        // The new server did not take over (it says why on the console): end it.
        let _ = sys::kill(new);
        let _ = sys::wait(Some(new));
        return Err(format!(
            "replace: the old server {} did not end: {e}",
            *server
        ));
    }
    *server = new;
    c.stats()
        .map_err(|e| format!("STATS after the replacement: {e}"))?;
    Ok(rdtsc().wrapping_sub(t0))
}

/// One point of Figures 3-5.
fn figure_point(p: &Point, reps: usize) -> Result<(), String> {
    let knobs = knobs(p.cpu, p.wait);
    let mut server = start_kv(&knobs)?;
    let core = sys::core().map_err(|e| format!("core: {e}"))?;
    let r = with_client(|c| {
        let mut kids = Vec::new();
        let work = format!("{}", p.work.1);
        for _ in 0..p.clients {
            match sys::spawn("kvcli", &["load", p.work.0, &work], Priority::App) {
                Ok(pid) => kids.push(pid),
                Err(e) => {
                    stop_clients(c, &kids)?;
                    return Err(format!("spawn kvcli load: {e}"));
                }
            }
        }
        let _ = sys::sleep_ns(SETTLE_NS);
        let mut r = Ok(0);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..reps * PER_REP {
            let _ = sys::sleep_ns(rng.below(PHASE_NS));
            match replace(c, &mut server, &knobs, core) {
                Ok(ns) => sample(&p.case, ns),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        stop_clients(c, &kids)?;
        r
    });
    stop_kv(server)?;
    r.map(drop)
}

/// Tell the `load` clients to stop and reap them; an error if one failed.
fn stop_clients(c: &Client, kids: &[Pid]) -> Result<(), String> {
    c.put(STOP, b"1")
        .map_err(|e| format!("put the stop key: {e}"))?;
    let mut failed = 0;
    for &pid in kids {
        match sys::wait_timeout(Some(pid), HANG_NS) {
            Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => {}
            r => {
                println!("kvcli: antfig: load client {pid} ended {r:?}");
                let _ = sys::kill(pid);
                let _ = sys::wait(Some(pid));
                failed += 1;
            }
        }
    }
    let _ = c.del(STOP);
    match failed {
        0 => Ok(()),
        n => Err(format!("{n} load clients failed")),
    }
}

/// `load pu|wait NS`: `GET`s of the stop key, with NS ns of work (spinning or asleep)
/// between them, until the key is there.
pub fn load(c: &mut Client, kind: &str, ns: &str) -> Result<i32, String> {
    let ns: u64 = ns.parse().map_err(|_| "load pu|wait NS")?;
    let spin = match kind {
        "pu" => true,
        "wait" => false,
        _ => return Err("load pu|wait NS".into()),
    };
    let mut n = 0u64;
    loop {
        match c.get(STOP) {
            Ok(_) => return Ok(0),
            Err(Fail::Status(Status::NotFound)) => n += 1,
            Err(e) => return Err(format!("load: request {n}: {e}")),
        }
        if spin {
            let t0 = rdtsc();
            while rdtsc().wrapping_sub(t0) < ns {
                core::hint::spin_loop();
            }
        } else if ns > 0 {
            let _ = sys::sleep_ns(ns);
        }
    }
}

/// The Figure 8 analogue (module docs).
fn gap(reps: usize) -> Result<(), String> {
    let knobs = knobs(0, 0);
    let mut server = start_kv(&knobs)?;
    let mut infos = alloc::vec![ulib::abi::CoreInfo::default(); ulib::abi::MAX_CORES];
    let cores = sys::cores(&mut infos).map_err(|e| format!("cores: {e}"))?;
    let online: Vec<usize> = infos[..cores]
        .iter()
        .filter(|i| i.online != 0)
        .map(|i| i.core as usize)
        .collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let r = with_client(|c| {
        for (place, other) in [("same core", false), ("other core", true)] {
            if other && online.len() < 2 {
                println!("kvcli: antfig: one core: no other-core replacement");
                continue;
            }
            for (n, pace) in [(100u64, PACE_NS), (10_000, 0)] {
                for _ in 0..reps {
                    let label = format!("fig8 {n} requests, {place}");
                    let core = target(server, other, &online);
                    gap_run(c, &mut server, &knobs, core, (n, pace, &label), &mut rng)?;
                }
            }
            for _ in 0..reps {
                let core = target(server, other, &online);
                let ns = replace(c, &mut server, &knobs, core)?;
                sample(&format!("fig8 idle replacement, {place}"), ns);
            }
        }
        Ok(0)
    });
    stop_kv(server)?;
    r.map(drop)
}

/// Where the new server goes: the old one's core, or another online one.
fn target(server: Pid, other: bool, online: &[usize]) -> usize {
    let here = server.core();
    if !other {
        return here;
    }
    online.iter().copied().find(|&c| c != here).unwrap_or(here)
}

/// One `gapc` run with a replacement in its second half.
fn gap_run(
    c: &Client,
    server: &mut Pid,
    knobs: &[String; 2],
    core: usize,
    (n, pace, label): (u64, u64, &str),
    rng: &mut Rng,
) -> Result<(), String> {
    let id = fnid::lookup("kv").map_err(|e| format!("lookup kv: {e}"))?;
    let served = || -> u64 {
        fnid::list()
            .ok()
            .and_then(|l| l.into_iter().find(|f| f.fnid.slot() == id.slot()))
            .map_or(0, |f| f.served)
    };
    let from = served();
    let (ns, pace_s) = (n.to_string(), pace.to_string());
    let client = sys::spawn("kvcli", &["gapc", &ns, &pace_s, label], Priority::App)
        .map_err(|e| format!("spawn kvcli gapc: {e}"))?;
    // Into the second run: its baseline's N requests and a tenth of the measured ones.
    let t0 = rdtsc();
    while served() < from + n + n / 10 {
        if sys::wait_timeout(Some(client), 0).is_ok() || rdtsc().wrapping_sub(t0) > HANG_NS {
            return Err(format!("{label}: the client ended before the replacement"));
        }
        let _ = sys::sleep_ns(20_000);
    }
    // At a phase drawn from two pace periods (module docs of `figs`).
    let _ = sys::sleep_ns(rng.below(2 * PACE_NS));
    let r = replace(c, server, knobs, core);
    let outside = sys::wait_timeout(Some(client), 0).is_ok();
    let status = if outside {
        // Ended already: reaped by this look.
        Ok(())
    } else {
        match sys::wait_timeout(Some(client), HANG_NS) {
            Ok((_, s)) if s.how == ulib::abi::ENDED_EXIT && s.code == 0 => Ok(()),
            other => Err(format!("{label}: kvcli gapc ended {other:?}")),
        }
    };
    sample(
        &format!("{label}: replacements outside the requests"),
        u64::from(outside),
    );
    let ns = r?;
    sample(&format!("{label}: replacement time"), ns);
    status
}

/// `gapc N PACE LABEL`: N timed `PUT`s (the baseline), then N more (a replacement happens
/// meanwhile); prints LABEL's samples: the gap, lost, answered twice, wrong values.
pub fn gapc(c: &mut Client, n: &str, pace: &str, label: &str) -> Result<i32, String> {
    const USAGE: &str = "gapc N PACE LABEL";
    let n: usize = n.parse().map_err(|_| USAGE)?;
    let pace: u64 = pace.parse().map_err(|_| USAGE)?;
    let me = sys::getpid().map_err(|e| format!("getpid: {e}"))?;
    let key = |i: usize| format!("g{}.{}.{}", me.core(), me.serial(), i % GAP_KEYS);
    let mut runs = [Vec::with_capacity(n), Vec::with_capacity(n)];
    let (mut lost, mut ok) = (0u64, 0u64);
    let before = c.stats().map_err(|e| e.to_string())?.puts;
    for (run, times) in runs.iter_mut().enumerate() {
        for i in 0..n {
            if pace > 0 {
                let _ = sys::sleep_ns(pace);
            }
            let value = format!("{run}.{i}");
            let t0 = rdtsc();
            let r = c.put(key(i).as_bytes(), value.as_bytes());
            times.push(rdtsc().wrapping_sub(t0));
            match r {
                Ok(_) => ok += 1,
                Err(e) => {
                    lost += 1;
                    println!("kvcli: gapc: request {run}.{i} lost: {e}");
                }
            }
        }
    }
    let executed = c.stats().map_err(|e| e.to_string())?.puts - before;
    let mut wrong = 0u64;
    for k in 0..GAP_KEYS.min(n) {
        let last = (k..n).step_by(GAP_KEYS).next_back().unwrap_or(k);
        let want = format!("1.{last}");
        match c.get(key(k).as_bytes()) {
            Ok(v) if v == want.as_bytes() => {}
            r => {
                wrong += 1;
                println!("kvcli: gapc: {} is {r:?}, want {want}", key(k));
            }
        }
        let _ = c.del(key(k).as_bytes());
    }
    let [base, with] = &mut runs;
    base.sort_unstable();
    let median = base.get(n / 2).copied().unwrap_or(0);
    let max = with.iter().copied().max().unwrap_or(0);
    sample(&format!("{label}: service gap"), max.saturating_sub(median));
    sample(
        &format!("{label}: median latency without replacement"),
        median,
    );
    sample(&format!("{label}: requests lost"), lost);
    sample(
        &format!("{label}: requests answered twice"),
        executed.saturating_sub(ok),
    );
    sample(&format!("{label}: wrong values"), wrong);
    Ok(0)
}
