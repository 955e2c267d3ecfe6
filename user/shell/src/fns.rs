//! The function-id command: `fn ls` lists every registered function (`FN_LIST`, as this
//! core's copy of the kernel's registry has it): its id, name, the serving process and its
//! core, the server's generation, the requests served under the id, the state ICA, up,
//! down or restarting (after a crash, `FN_RESTART`), the restarts so far and the most
//! allowed in a window (`-`: restart off), and the user that registered it. `replace NAME PROG [ARGS] [-c CORE]` replaces a
//! function's server while it serves (`FN_TAKEOVER`, done by `PROG takeover ARGS`).
//! `fn kill NAME` ends NAME's server as a crash would and reports what the kernel did: the
//! server restarted (if it opted in, `FN_RESTART`) or the function down.

use alloc::format;
use alloc::string::String;
use ulib::abi::fnid::FnInfo;
use ulib::abi::fnid::{FN_RESTARTING, FN_UP};
use ulib::abi::res::ResId;
use ulib::abi::{Pid, Priority};
use ulib::{fnid, println, sys};

/// How long `replace` waits for the new server to take over (it then ends it).
const REPLACE_WAIT_NS: u64 = 10_000_000_000;
/// Between two looks at the registry while `replace` waits. The time it prints does not
/// depend on it (the registry says when the new server began: `FnInfo::since_ns`); the
/// shell runs at a server's priority, and looking every 50 us took 28% of core 0 during a
/// replacement in `bench net-replace`'s traces, beside the servers it was replacing.
const REPLACE_POLL_NS: u64 = 1_000_000;
/// Between two looks at the registry while `fn kill` waits for a restart.
const KILL_POLL_NS: u64 = 1_000_000;

/// How long `fn kill` waits for the kernel to restart the server or report it down.
const KILL_WAIT_NS: u64 = 30_000_000_000;

/// The record of function `name` (`cmd` names the command in errors).
pub(crate) fn info_for(cmd: &str, name: &str) -> Result<FnInfo, String> {
    let id = fnid::lookup(name).map_err(|e| format!("{cmd}: no function '{name}': {e}"))?;
    // This core's copy of the registry: `replace` looks every 50 us while a server is
    // replaced, and asking every other core for its `served` count each time kept the
    // cores (and on a busy host, the host's) busy with inter-core requests meanwhile.
    fnid::info(id).map_err(|e| match e {
        ulib::abi::Error::NoSuchResource => format!("{cmd}: '{name}' not listed"),
        e => format!("{cmd}: {e}"),
    })
}

fn info(name: &str) -> Result<FnInfo, String> {
    info_for("replace", name)
}

/// `fn kill NAME`: kill NAME's server (a crash, as far as the kernel's restart is
/// concerned), then wait until the function is up under another process (restarted) or
/// down (no restart, or none left in the window). Returns the killed server's pid, for the
/// shell to know its end was asked for.
pub(crate) fn kill(name: &str) -> Result<Pid, String> {
    let before = info_for("fn kill", name)?;
    if before.state != FN_UP {
        return Err(format!("fn kill: {name} has no server now (it is not up)"));
    }
    let old = before.server;
    sys::kill(old).map_err(|e| format!("fn kill: kill {old}: {e}"))?;
    await_restart("fn kill", name, old, "killed")?;
    Ok(old)
}

/// After `name`'s server `old` ended (`how`: "killed", "crashed"): wait until the
/// function is up under another process (restarted) or down, and say which.
pub(crate) fn await_restart(cmd: &str, name: &str, old: Pid, how: &str) -> Result<(), String> {
    let start = sys::clock_ns().unwrap_or(0);
    loop {
        let now = info_for(cmd, name)?;
        match now.state {
            FN_UP if now.server != old => {
                // (The restarted server opts in again itself: its record may not say
                // how many restarts are allowed yet.)
                println!(
                    "{cmd}: {name}'s server {old} {how}; restarted as {} (core {}), restart {}",
                    now.server,
                    now.server.core(),
                    now.restarts
                );
                return Ok(());
            }
            FN_UP | FN_RESTARTING => {}
            _ => {
                println!("{cmd}: {name}'s server {old} {how}; {name} is down (no restart)");
                return Ok(());
            }
        }
        if sys::clock_ns().unwrap_or(u64::MAX).saturating_sub(start) > KILL_WAIT_NS {
            return Err(format!(
                "{cmd}: {name}'s server {old} {how}, but {name} is neither restarted nor down after {} s",
                KILL_WAIT_NS / 1_000_000_000
            ));
        }
        let _ = sys::sleep_ns(KILL_POLL_NS);
    }
}

/// `replace NAME PROG [ARGS] [-c CORE]`: start `PROG takeover ARGS` (on CORE) and wait until
/// it serves `NAME` (its generation changes) or ends. Returns the new server, for the shell
/// to keep as a job; a new server that does not take over in time is ended (the old one
/// serves on). The `replaced ...` line ends with the replacement time, `in N us`: from
/// just before the spawn until the registry switched the function to the new server
/// (`FnInfo::since_ns`; this look at the registry may come up to [`REPLACE_POLL_NS`]
/// later), and, with `restart=N` among ARGS, its opt-in to restart.
pub(crate) fn replace(args: &[&str]) -> Result<Pid, String> {
    const USAGE: &str = "replace: usage: replace NAME PROG [ARGS] [-c CORE]";
    let mut args: alloc::vec::Vec<&str> = args.to_vec();
    let mut core = None;
    if let Some(at) = args.iter().position(|a| *a == "-c") {
        let value = args.get(at + 1).ok_or(USAGE)?;
        core = Some(
            crate::cores::parse_core(value)
                .ok_or_else(|| format!("replace: bad core '{value}' (a number, e.g. 1)"))?,
        );
        args.drain(at..at + 2);
    }
    let [name, prog, rest @ ..] = args.as_slice() else {
        return Err(USAGE.into());
    };
    let before = info(name)?;
    let mut prog_args = alloc::vec!["takeover"];
    prog_args.extend_from_slice(rest);
    let start = sys::clock_ns().unwrap_or(0);
    // In the background: the old server and its clients keep the core while the new one
    // loads and prepares; taking over gives it the old server's priority. A function that
    // is down has no server to take the priority of: its new server starts at a server's
    // (the kernel raises one taking over a function down only to an application's).
    let priority = if before.state == ulib::abi::fnid::FN_DOWN {
        Priority::Server
    } else {
        Priority::Background
    };
    let new = match core {
        None => sys::spawn(prog, &prog_args, priority),
        Some(c) => sys::spawn_on(prog, &prog_args, priority, c),
    }
    .map_err(|e| format!("replace: {e}: {prog}"))?;
    // A new server asked to restart after a crash (`restart=N`, N > 0) opts in once it
    // serves: the replacement is done once that shows too (else a crash right after the
    // `replaced` line would find no restart armed).
    let restarts = rest.iter().any(|a| {
        a.strip_prefix("restart=")
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    });
    loop {
        let now = info(name).ok();
        if let Some(i) = now.filter(|i| {
            i.generation != before.generation && i.server == new && (!restarts || i.restart_max > 0)
        }) {
            let took = i.since_ns.saturating_sub(start);
            let old = if before.state == FN_UP {
                format!("{}", before.server)
            } else {
                String::from("- (down)")
            };
            println!(
                "replaced {}: pid {old} -> pid {new} (core {}), server generation {} in {} us",
                i.fnid,
                new.core(),
                i.generation,
                took / 1000
            );
            return Ok(new);
        }
        // Ended without taking over (its start-up check failed, or FN_TAKEOVER did).
        if let Ok((_, status)) = sys::wait_timeout(Some(new), 0) {
            return Err(format!(
                "replace: {prog} ({new}) ended (how {}, code {}) without taking over {name}; the old server serves on",
                status.how, status.code
            ));
        }
        if sys::clock_ns().unwrap_or(u64::MAX).saturating_sub(start) > REPLACE_WAIT_NS {
            let _ = sys::kill(new);
            let _ = sys::wait_timeout(Some(new), REPLACE_WAIT_NS);
            return Err(format!(
                "replace: {prog} ({new}) did not take over {name} in time: ended; the old server serves on"
            ));
        }
        let _ = sys::sleep_ns(REPLACE_POLL_NS);
    }
}

/// `fn ARGS`.
pub(crate) fn command(args: &[&str]) -> Result<(), String> {
    match args {
        ["ls"] => ls(),
        ["wait", name] => wait(name),
        _ => Err("fn: usage: fn ls | fn wait NAME | fn kill NAME".into()),
    }
}

/// `fn wait NAME`: until a server registers NAME (a server started at boot may come up
/// after the shell's first prompt); gives up after 30 s as a hang guard.
fn wait(name: &str) -> Result<(), String> {
    fnid::wait(name, 30_000_000_000)
        .map(drop)
        .map_err(|_| format!("fn wait: nobody registered {name} (is its server running?)"))
}

/// `fn ls`.
fn ls() -> Result<(), String> {
    let infos = fnid::list().map_err(|e| format!("fn ls: {e}"))?;
    println!("FNID       NAME              SERVER   CORE  GEN  SERVED    STATE-ICA            STATE       RESTARTS  USER");
    for i in &infos {
        let up = i.state == FN_UP;
        let (server, core) = if up {
            (format!("{}", i.server), format!("{}", i.server.core()))
        } else {
            ("-".into(), "-".into())
        };
        let ica = match i.state_ica {
            0 => String::from("-"),
            id => format!("{}", ResId(id)),
        };
        println!(
            "{:<10} {:<17} {:<8} {:<5} {:<4} {:<9} {:<20} {:<11} {:<9} {}",
            format!("{}", i.fnid),
            i.name(),
            server,
            core,
            i.generation,
            i.served,
            ica,
            match i.state {
                FN_UP => "up",
                FN_RESTARTING => "restarting",
                _ => "down",
            },
            match i.restart_max {
                0 => String::from("-"),
                max => format!("{}/{max}", i.restarts),
            },
            i.user
        );
    }
    if infos.is_empty() {
        println!("(no functions registered)");
    }
    Ok(())
}
