//! Benchmark reports: `docs/results/NAME.json`, `NAME.md` and `NAME.png`, in the format of
//! docs/design.md ("Results format"). Every row is a distribution (min, quartiles, max, n)
//! computed here from raw samples, and every check is computed from the rows. Reports go to
//! docs/results only from a clean, committed tree, so that each names the commit it
//! measured ([`choose_results_dir`]); `--out DIR` sends them elsewhere from any tree.

use anyhow::{Context, Result};
use plotters::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub case: String,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
    pub n: usize,
}

impl Row {
    /// Summarise raw samples (at least one).
    pub fn from_samples(case: &str, samples: &[f64]) -> Row {
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| {
            let pos = p * (s.len() - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
        };
        Row {
            case: case.into(),
            min: s[0],
            q1: q(0.25),
            median: q(0.5),
            q3: q(0.75),
            max: s[s.len() - 1],
            n: s.len(),
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct Check {
    pub name: String,
    pub value: f64,
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<f64>,
    pub holds: bool,
}

impl Check {
    /// A check with no paper figure, its value rounded to three decimals.
    pub fn computed(name: &str, value: f64, target: &str, holds: bool) -> Check {
        Check {
            name: name.into(),
            value: (value * 1000.0).round() / 1000.0,
            target: target.into(),
            paper: None,
            holds,
        }
    }
}

#[derive(Serialize, Debug)]
pub struct Report {
    pub bench: String,
    pub mode: String,
    pub qemu: String,
    pub musubi_commit: String,
    pub runs: usize,
    pub unit: String,
    pub rows: Vec<Row>,
    pub checks: Vec<Check>,
    /// Free text for the Markdown page: what was measured and how to read it.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// Where reports go unless `--out` says otherwise; only a clean, committed tree may write
/// there, so that every committed report names the commit it measured.
pub const RESULTS: &str = "docs/results";

/// The paths `git status --porcelain` lists as changed (tracked or untracked, not ignored),
/// leaving out the reports under [`RESULTS`]: they are the benchmarks' output, not their
/// input, so one benchmark's fresh report does not make the next one refuse. Untracked
/// files count: the workspace builds every `user/*` and `libs/*` directory, so an untracked
/// crate or source file can change what is measured.
pub fn changed_paths(porcelain: &str) -> Vec<&str> {
    porcelain
        .lines()
        .filter(|l| l.len() > 3)
        // "XY path" or "XY old -> new"; a path with spaces is quoted.
        .map(|l| l[3..].rsplit(" -> ").next().unwrap_or("").trim_matches('"'))
        .filter(|p| !p.is_empty() && !p.starts_with(&format!("{RESULTS}/")))
        .collect()
}

/// Decide where a benchmark writes its report: `out` when given (always allowed), else
/// `default` (docs/results) only if `porcelain` (the output of `git status --porcelain`, or
/// `None` when git could not be asked) shows no change outside the reports. The error says
/// what is uncommitted and names `--out DIR`.
pub fn choose_results_dir(
    out: Option<PathBuf>,
    porcelain: Option<&str>,
    default: PathBuf,
) -> Result<PathBuf, String> {
    if let Some(dir) = out {
        return Ok(dir);
    }
    let Some(porcelain) = porcelain else {
        return Err(format!(
            "cannot ask git whether the tree is clean, so the report cannot go to {RESULTS}/ \
             (it must name the commit it measured); write it elsewhere with `--out DIR`"
        ));
    };
    let changed = changed_paths(porcelain);
    if changed.is_empty() {
        return Ok(default);
    }
    let shown: Vec<&str> = changed.iter().take(8).copied().collect();
    Err(format!(
        "the tree has uncommitted changes ({}{}), so the report would not match any commit: \
         commit them before writing to {RESULTS}/, or write the report elsewhere with \
         `--out DIR`",
        shown.join(", "),
        if changed.len() > shown.len() {
            format!(" and {} more", changed.len() - shown.len())
        } else {
            String::new()
        }
    ))
}

/// `git status --porcelain` of the workspace (`None` if git could not be run).
fn git_status() -> Option<String> {
    let o = std::process::Command::new("git")
        .current_dir(crate::build::workspace_root())
        .args(["status", "--porcelain"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Short hash of HEAD, with `-dirty` if the tree has changes outside the reports
/// ([`changed_paths`]; only a run with `--out` can be dirty).
pub fn commit() -> String {
    let head = std::process::Command::new("git")
        .current_dir(crate::build::workspace_root())
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|h| !h.is_empty());
    let dirty = git_status().is_none_or(|s| !changed_paths(&s).is_empty());
    format!(
        "{}{}",
        head.unwrap_or_else(|| "unknown".into()),
        if dirty { "-dirty" } else { "" }
    )
}

static RESULTS_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Choose where this run's reports go (`--out DIR`, or docs/results from a clean tree; see
/// [`choose_results_dir`]); fails, before anything is measured, if neither is allowed.
pub fn set_results_dir(out: Option<PathBuf>) -> Result<()> {
    let default = crate::build::workspace_root().join(RESULTS);
    let dir =
        choose_results_dir(out, git_status().as_deref(), default).map_err(anyhow::Error::msg)?;
    let _ = RESULTS_DIR.set(dir);
    Ok(())
}

/// Where reports go: the directory [`set_results_dir`] chose. Writing to docs/results
/// checks again that the tree is still clean, since a benchmark runs for minutes while the
/// tree may change.
pub fn results_dir() -> Result<PathBuf> {
    let dir = RESULTS_DIR
        .get()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no results directory chosen (set_results_dir)"))?;
    if dir == crate::build::workspace_root().join(RESULTS) {
        choose_results_dir(None, git_status().as_deref(), dir.clone())
            .map_err(|e| anyhow::anyhow!("the tree changed while the benchmark ran: {e}"))?;
    }
    Ok(dir)
}

impl Report {
    /// Write the report ([`Report::write`]), then print its Markdown and where it went: how
    /// every benchmark ends.
    pub fn publish(&self) -> Result<()> {
        let md = self.write()?;
        println!("{}", self.markdown());
        println!("xtask: wrote {}", md.display());
        Ok(())
    }

    /// Write the JSON, Markdown and PNG files; returns the Markdown path.
    pub fn write(&self) -> Result<PathBuf> {
        let dir = results_dir()?;
        std::fs::create_dir_all(&dir)?;
        let json = dir.join(format!("{}.json", self.bench));
        std::fs::write(&json, serde_json::to_string_pretty(self)? + "\n")?;
        let md = dir.join(format!("{}.md", self.bench));
        std::fs::write(&md, self.markdown())?;
        let png = dir.join(format!("{}.png", self.bench));
        self.plot(&png)
            .with_context(|| format!("plotting {}", png.display()))?;
        Ok(md)
    }

    pub fn markdown(&self) -> String {
        let mut s = format!("# Benchmark `{}`\n\n", self.bench);
        s += &format!(
            "Mode: **{}** (see docs/design.md, \"Measuring\"). Unit: {}. Runs: {}. Musubi commit `{}`.\n\nQEMU: `{}`\n\n",
            self.mode, self.unit, self.runs, self.musubi_commit, self.qemu
        );
        for n in &self.notes {
            s += &format!("{n}\n\n");
        }
        s += &format!("![{}]({}.png)\n\n", self.bench, self.bench);
        s += "| case | min | q1 | median | q3 | max | n |\n|---|---:|---:|---:|---:|---:|---:|\n";
        for r in &self.rows {
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                r.case,
                fmt(r.min),
                fmt(r.q1),
                fmt(r.median),
                fmt(r.q3),
                fmt(r.max),
                r.n
            );
        }
        if !self.checks.is_empty() {
            s += "\n| check | ours | target | paper | holds |\n|---|---:|---|---:|---|\n";
            for c in &self.checks {
                let paper = c.paper.map_or("-".to_string(), fmt);
                s += &format!(
                    "| {} | {} | {} | {} | {} |\n",
                    c.name,
                    fmt(c.value),
                    c.target,
                    paper,
                    if c.holds { "yes" } else { "**no**" }
                );
            }
        }
        s
    }

    /// Horizontal bars at the median with whiskers from q1 to q3, one per row (case names
    /// on the left, where long names fit). When the medians span more than two orders of
    /// magnitude the axis is logarithmic (labelled in plain values), so small cases stay
    /// visible beside large ones.
    fn plot(&self, path: &Path) -> Result<()> {
        register_font()?;
        let n = self.rows.len();
        let height = (120 + 48 * n as u32).max(300);
        let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let positive = |v: f64| v.max(f64::MIN_POSITIVE);
        let lo = self
            .rows
            .iter()
            .map(|r| positive(r.q1.min(r.median)))
            .fold(f64::INFINITY, f64::min);
        let hi = self
            .rows
            .iter()
            .map(|r| r.max.max(r.q3))
            .fold(0.0, f64::max);
        let log = lo > 0.0 && hi / lo > 100.0;
        // Plot coordinates: the value itself, or its base-10 logarithm.
        let x = move |v: f64| if log { positive(v).log10() } else { v };
        let (x0, x1) = if log {
            (x(lo).floor(), x(hi).ceil() + 0.05)
        } else {
            (0.0, hi * 1.1 + f64::EPSILON)
        };
        let label_width =
            self.rows.iter().map(|r| r.case.len()).max().unwrap_or(10) as u32 * 8 + 20;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{} ({} mode)", self.bench, self.mode),
                ("sans-serif", 24),
            )
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(label_width.min(520))
            .build_cartesian_2d(x0..x1, (0..n).into_segmented())?;
        let labels: Vec<String> = self.rows.iter().map(|r| r.case.clone()).collect();
        let unit = if log {
            format!("{} (log scale)", self.unit)
        } else {
            self.unit.clone()
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .light_line_style(WHITE)
            .x_desc(unit)
            .x_label_formatter(&|v| if log { fmt(10f64.powf(*v)) } else { fmt(*v) })
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .label_style(("sans-serif", 14))
            .draw()?;
        chart.draw_series(self.rows.iter().enumerate().map(|(i, r)| {
            let mut bar = Rectangle::new(
                [
                    (x0, SegmentValue::Exact(i)),
                    (x(r.median), SegmentValue::Exact(i + 1)),
                ],
                BLUE.mix(0.35).filled(),
            );
            bar.set_margin(8, 8, 0, 0);
            bar
        }))?;
        chart.draw_series(self.rows.iter().enumerate().map(|(i, r)| {
            ErrorBar::new_horizontal(
                SegmentValue::CenterOf(i),
                x(r.q1),
                x(r.median),
                x(r.q3),
                BLACK.stroke_width(2),
                12,
            )
        }))?;
        root.present()?;
        Ok(())
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn register_font() -> Result<()> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let candidates = ["/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/TTF/DejaVuSans.ttf"];
        let path = candidates.iter().find(|p| Path::new(p).exists()).ok_or_else(|| {
            "no DejaVu Sans font for plot labels: install it with `apt-get install fonts-dejavu-core`".to_string()
        })?;
        let bytes: &'static [u8] = Box::leak(std::fs::read(path).map_err(|e| e.to_string())?.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).map_err(|_| format!("{path} is not a usable font"))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default() -> PathBuf {
        PathBuf::from("/ws/docs/results")
    }

    #[test]
    fn a_clean_tree_writes_to_docs_results() {
        assert_eq!(choose_results_dir(None, Some(""), default()), Ok(default()));
    }

    #[test]
    fn fresh_reports_do_not_make_the_tree_dirty() {
        let status =
            " M docs/results/basics.md\n M docs/results/basics.json\n?? docs/results/new.png\n";
        assert!(changed_paths(status).is_empty());
        assert_eq!(
            choose_results_dir(None, Some(status), default()),
            Ok(default())
        );
    }

    #[test]
    fn a_dirty_tree_is_refused_and_the_message_names_out() {
        let status = " M kernel/src/main.rs\n?? user/newprog/\nR  docs/a.md -> docs/b.md\n";
        assert_eq!(
            changed_paths(status),
            ["kernel/src/main.rs", "user/newprog/", "docs/b.md"]
        );
        let err = choose_results_dir(None, Some(status), default()).unwrap_err();
        assert!(err.contains("--out DIR"), "{err}");
        assert!(err.contains("kernel/src/main.rs"), "{err}");
        // A report next to docs/results is not a report in it.
        let near = "?? docs/results-old/x.md\n";
        assert!(choose_results_dir(None, Some(near), default()).is_err());
    }

    #[test]
    fn out_is_always_allowed() {
        let out = PathBuf::from("/tmp/r");
        let dirty = " M kernel/src/main.rs\n";
        assert_eq!(
            choose_results_dir(Some(out.clone()), Some(dirty), default()),
            Ok(out.clone())
        );
        assert_eq!(
            choose_results_dir(Some(out.clone()), None, default()),
            Ok(out)
        );
    }

    #[test]
    fn without_git_docs_results_is_refused() {
        let err = choose_results_dir(None, None, default()).unwrap_err();
        assert!(err.contains("--out DIR"), "{err}");
    }
}
