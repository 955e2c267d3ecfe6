//! The function-id command: `fn ls` lists every registered function (`FN_LIST`, as this
//! core's copy of the kernel's registry has it): its id, name, the serving process and its
//! core, the server's generation, the requests served under the id, the state ICA, up or
//! down, and the user that registered it.

use alloc::format;
use alloc::string::String;
use ulib::abi::fnid::FN_UP;
use ulib::abi::res::ResId;
use ulib::{fnid, println};

/// `fn ARGS`.
pub(crate) fn command(args: &[&str]) -> Result<(), String> {
    match args {
        ["ls"] => ls(),
        _ => Err("fn: usage: fn ls".into()),
    }
}

/// `fn ls`.
fn ls() -> Result<(), String> {
    let infos = fnid::list().map_err(|e| format!("fn ls: {e}"))?;
    println!("FNID       NAME              SERVER   CORE  GEN  SERVED    STATE-ICA            STATE  USER");
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
            "{:<10} {:<17} {:<8} {:<5} {:<4} {:<9} {:<20} {:<6} {}",
            format!("{}", i.fnid),
            i.name(),
            server,
            core,
            i.generation,
            i.served,
            ica,
            if up { "up" } else { "down" },
            i.user
        );
    }
    if infos.is_empty() {
        println!("(no functions registered)");
    }
    Ok(())
}
