//! Checking Chrome trace JSON read back: what `cargo xtask test` asks of a traced run.

use super::chrome::core_tid;
use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;

/// A send or receive instant read back from JSON.
struct Point {
    send: bool,
    core: u64,
    from: u64,
    to: u64,
    tag: u64,
    ts: f64,
}

/// Check Chrome JSON (as read back): well-formed events, every flow start ended, and at
/// least one RPCC request in order on both cores — the requester's send, the owner's
/// receive, the owner's reply send, the requester's receive, matched by cores and tag.
/// Returns a description of the first such request.
pub fn check(json: &Value) -> Result<String> {
    ensure!(
        json["displayTimeUnit"] == "ns",
        "displayTimeUnit is not \"ns\""
    );
    let events = json["traceEvents"]
        .as_array()
        .context("no traceEvents array")?;
    let mut points = Vec::new();
    let mut flows: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let ph = e["ph"]
            .as_str()
            .with_context(|| format!("event {i} has no ph"))?;
        let ids = (e["pid"].as_u64(), e["tid"].as_u64(), e["ts"].as_f64());
        let (Some(_), Some(tid), Some(ts)) = ids else {
            ensure!(ph == "M", "event {i} ({ph}) lacks pid, tid or ts: {e}");
            continue;
        };
        match ph {
            "X" => ensure!(
                e["dur"].as_f64().is_some_and(|d| d >= 0.0),
                "event {i}: dur"
            ),
            "s" | "f" => {
                let id = e["id"]
                    .as_u64()
                    .with_context(|| format!("flow {i} has no id"))?;
                let n = flows.entry(id).or_default();
                match ph {
                    "s" => n.0 += 1,
                    _ => n.1 += 1,
                }
            }
            "i" if e["cat"] == "rpcc"
                && e["name"].as_str().is_some_and(|n| n.starts_with("rpcc_")) =>
            {
                let arg = |k: &str| e["args"][k].as_u64();
                let (Some(from), Some(to), Some(tag)) = (arg("from"), arg("to"), arg("tag")) else {
                    bail!("event {i}: an RPCC instant without from/to/tag: {e}");
                };
                points.push(Point {
                    send: e["name"] == "rpcc_send",
                    core: tid.wrapping_sub(core_tid(0)),
                    from,
                    to,
                    tag,
                    ts,
                });
            }
            _ => {}
        }
    }
    ensure!(!flows.is_empty(), "no flow events");
    if let Some((id, n)) = flows.iter().find(|(_, &n)| n != (1, 1)) {
        bail!("flow {id} has {} starts and {} ends", n.0, n.1);
    }
    let find = |send: bool, on: u64, from: u64, to: u64, tag: u64, after: f64| {
        points
            .iter()
            .filter(|p| (p.send, p.core, p.from, p.to, p.tag) == (send, on, from, to, tag))
            .map(|p| p.ts)
            .filter(|&ts| ts >= after)
            .min_by(f64::total_cmp)
    };
    for q in points.iter().filter(|p| p.send && p.core == p.from) {
        let (a, b, tag) = (q.from, q.to, q.tag);
        let Some(received) = find(false, b, a, b, tag, q.ts) else {
            continue;
        };
        let Some(replied) = find(true, b, b, a, tag, received) else {
            continue;
        };
        let Some(back) = find(false, a, b, a, tag, replied) else {
            continue;
        };
        return Ok(format!(
            "core {a} -> core {b} tag {tag}: sent {:.3} us, received {:.3}, reply sent {:.3}, \
             reply received {:.3}; {} flows",
            q.ts,
            received,
            replied,
            back,
            flows.len()
        ));
    }
    bail!(
        "no RPCC request in order on both cores among {} sends and receives",
        points.len()
    )
}

#[cfg(test)]
mod tests {
    use super::super::chrome::convert;
    use super::super::sample::sample;
    use super::*;
    use serde_json::json;

    #[test]
    fn check_rejects_what_lacks_a_round_trip() {
        let empty = json!({ "traceEvents": [], "displayTimeUnit": "ns" });
        assert!(check(&empty).is_err());
        let mut c = convert(&sample()).json;
        c["traceEvents"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["name"] != "rpcc_receive" || e["tid"] != core_tid(1));
        let err = check(&c).unwrap_err().to_string();
        assert!(err.contains("no RPCC request in order"), "{err}");
        c["displayTimeUnit"] = "ms".into();
        assert!(check(&c).is_err());
    }
}
