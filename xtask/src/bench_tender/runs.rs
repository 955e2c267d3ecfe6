//! The boots of `cargo xtask bench tender` and what they print: one QEMU run per
//! configuration, checked to have finished and to have taken its boot options (as
//! `user/tender` reports them), and the parsers of its `BENCH {json}` lines. Also the text
//! size of each Fig. 8 child, read from its ELF file.

use super::{ChildRun, OpsRun};
use crate::bench::{finished_run, options_taken};
use crate::qemu::Guest;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::Duration;

/// Boot `g`, check that it finished and that the kernel took the options `want` (rcc,
/// notify, agents, wait) as `tender` reports them; the console lines.
pub(super) fn boot(g: &Guest, what: &str, want: (&str, &str, &str, &str)) -> Result<Vec<String>> {
    eprintln!("xtask: bench tender: {what} ({} mode)", g.mode.name());
    let c = finished_run(g, what, Duration::from_secs(900))?;
    options_taken(&c, what)?;
    let header = c
        .lines
        .iter()
        .find(|l| l.contains("tender: user="))
        .context("tender printed no configuration line")?;
    let field = |k: &str| {
        header
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or("?")
    };
    let seen = (
        field("rcc"),
        field("notify"),
        field("agents"),
        field("wait"),
    );
    if seen != want {
        bail!("the run '{what}' asked for rcc/notify/agents/wait {want:?} but tender saw {seen:?}: {header}");
    }
    eprintln!("xtask: bench tender: {what}: {:.1} s", c.wall.as_secs_f64());
    Ok(c.lines)
}

pub(super) fn parse_ops(lines: &[String]) -> Result<OpsRun> {
    let mut r = OpsRun::default();
    for v in crate::bench::bench_json(lines)? {
        match v["fig"].as_str() {
            Some("ops") => {
                let samples: Vec<f64> = v["samples"]
                    .as_array()
                    .context("ops line without samples")?
                    .iter()
                    .filter_map(|x| x.as_f64())
                    .collect();
                let dst = match (v["op"].as_str(), v["loc"].as_str()) {
                    (Some("create"), Some("local")) => &mut r.create_local,
                    (Some("create"), Some("remote")) => &mut r.create_remote,
                    (Some("delete"), Some("local")) => &mut r.delete_local,
                    (Some("delete"), Some("remote")) => &mut r.delete_remote,
                    _ => bail!("unknown ops line {v}"),
                };
                dst.extend(samples);
            }
            Some("agents") => {
                r.agents_created += v["created"].as_u64().unwrap_or(0);
                r.served += v["served"].as_u64().unwrap_or(0);
                r.inline_served += v["inline"].as_u64().unwrap_or(0);
                r.halted_waits += v["halted"].as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    if [
        &r.create_local,
        &r.create_remote,
        &r.delete_local,
        &r.delete_remote,
    ]
    .iter()
    .any(|s| s.is_empty())
    {
        bail!("tender ops printed no samples for some case");
    }
    Ok(r)
}

pub(super) fn parse_spread(lines: &[String]) -> Result<Vec<ChildRun>> {
    let mut out = Vec::new();
    for v in crate::bench::bench_json(lines)? {
        if v["fig"] != "spread" {
            continue;
        }
        let s = |k: &str| {
            v[k].as_str()
                .map(str::to_string)
                .with_context(|| format!("spread line without {k}: {v}"))
        };
        let u = |k: &str| {
            v[k].as_u64()
                .with_context(|| format!("spread line without {k}: {v}"))
        };
        out.push(ChildRun {
            case: s("case")?,
            child: s("child")?,
            n: u("n")?,
            ticks: u("ticks")? as f64,
            messages: u("messages")?,
            requests: u("requests")?,
        });
    }
    if out.is_empty() {
        bail!("tender spread printed no samples");
    }
    Ok(out)
}

pub(super) fn parse_rtt(lines: &[String]) -> Result<(Vec<f64>, Vec<f64>)> {
    let (mut remote, mut local) = (Vec::new(), Vec::new());
    for v in crate::bench::bench_json(lines)? {
        if v["fig"] != "rtt" {
            continue;
        }
        let x = v["per_op_ns"]
            .as_f64()
            .context("rtt line without per_op_ns")?;
        match v["loc"].as_str() {
            Some("remote") => remote.push(x),
            Some("local") => local.push(x),
            _ => bail!("unknown rtt line {v}"),
        }
    }
    if remote.is_empty() || local.is_empty() {
        bail!("tender rtt printed no samples");
    }
    Ok((remote, local))
}

/// Bytes of the executable PT_LOAD segment(s) of an ELF file (its text).
pub(super) fn text_size(path: &Path) -> Result<u64> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let u = |o: usize, n: usize| -> Result<u64> {
        let s = b.get(o..o + n).context("truncated ELF")?;
        Ok(s.iter().rev().fold(0u64, |a, &x| a << 8 | u64::from(x)))
    };
    let (phoff, phentsize, phnum) = (u(32, 8)? as usize, u(54, 2)? as usize, u(56, 2)?);
    let mut text = 0;
    for i in 0..phnum as usize {
        let at = phoff + i * phentsize;
        if u(at, 4)? == 1 && u(at + 4, 4)? & 1 != 0 {
            text += u(at + 40, 8)?;
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_sizes_are_read_from_program_headers() {
        // A minimal ELF64 header with one executable PT_LOAD of 0x1234 bytes.
        let mut b = vec![0u8; 64 + 56];
        b[32] = 64; // phoff
        b[54] = 56; // phentsize
        b[56] = 1; // phnum
        b[64] = 1; // PT_LOAD
        b[68] = 5; // R X
        b[64 + 40] = 0x34;
        b[64 + 41] = 0x12;
        let p = std::env::temp_dir().join(format!("tender-elf-{}", std::process::id()));
        std::fs::write(&p, &b).unwrap();
        assert_eq!(text_size(&p).unwrap(), 0x1234);
        let _ = std::fs::remove_file(&p);
    }
}
