//! The picture of `cargo xtask bench symmetry` (docs/results/symmetry.png), replacing the
//! generic chart `Report::write` draws: P2's Figure 3 (speed-up by cores, per workload and
//! kernel structure, from the report's rows, with the ideal line and P2's formula) and
//! Figure 4 (the five CPU modes' shares stacked, the mean of the runs' shares, so a bar
//! adds up to 100%; Lock at the bottom against P2's 10% and one half).

use super::report::{cores_label, shares, speedup_row, CHECKED_CORES};
use super::{Data, CORES, KERNELS, WORKLOADS};
use crate::results::{Report, Row};
use abi::{MODE_COUNT, MODE_IDLE, MODE_INTERRUPT, MODE_KERNEL, MODE_LOCK, MODE_NAMES, MODE_USER};
use anyhow::Result;
use plotters::prelude::*;
use std::path::Path;

const WORKLOAD_COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
];
/// user, kernel, lock, idle, interrupt.
const MODE_COLORS: [RGBColor; MODE_COUNT] = [
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(200, 200, 200),
    RGBColor(255, 127, 14),
];

/// The order the modes are stacked in, bottom first.
const STACK: [usize; MODE_COUNT] = [MODE_LOCK, MODE_KERNEL, MODE_INTERRUPT, MODE_USER, MODE_IDLE];

pub(super) fn plot(d: &Data, r: &Report, path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (1700, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(720);
    fig3(d, r, &left)?;
    fig4(d, &right)?;
    root.present()?;
    Ok(())
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn fig3(d: &Data, r: &Report, area: &Area) -> Result<()> {
    let label = |c: usize| cores_label(c, d.host_cores);
    let max_c = CORES[CORES.len() - 1] as f64;
    let ymax = r
        .rows
        .iter()
        .filter(|x| x.case.starts_with("speed-up"))
        .map(|x| x.max)
        .fold(max_c.min(d.host_cores as f64), f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "Fig. 3: speed-up T1/TN (median, q1..q3)",
            ("sans-serif", 22),
        )
        .margin(14)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(0.7..max_c + 0.3, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc(format!(
            "cores (vCPUs; {} host cores, more are oversubscribed)",
            d.host_cores
        ))
        .y_desc("speed-up over 1 core")
        .x_labels(CORES.len() + 1)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .label_style(("sans-serif", 14))
        .draw()?;
    let ideal = [(1.0, 1.0), (max_c, max_c)];
    chart
        .draw_series(DashedLineSeries::new(
            ideal,
            4,
            6,
            BLACK.mix(0.5).stroke_width(1),
        ))?
        .label("ideal (N)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    // P2's formula for the big lock, from the checks' target.
    if let Some(f) = r
        .checks
        .iter()
        .find(|c| {
            c.name
                .starts_with("Fig. 3: sysbound speed-up, kernel=biglock")
        })
        .and_then(|c| {
            c.target
                .split("= ")
                .last()?
                .split(',')
                .next()?
                .trim()
                .parse::<f64>()
                .ok()
        })
    {
        let c = WORKLOAD_COLORS[1];
        chart
            .draw_series(DashedLineSeries::new(
                [(1.0, f), (max_c, f)],
                8,
                5,
                c.mix(0.6).stroke_width(2),
            ))?
            .label(format!("P2: 1 + user/system = {f:.2}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.mix(0.6)));
    }
    for (wi, w) in WORKLOADS.iter().enumerate() {
        for k in KERNELS {
            let color = WORKLOAD_COLORS[wi];
            let pts: Vec<(f64, f64, f64, f64)> = CORES
                .iter()
                .map(|&c| {
                    if c == 1 {
                        return (1.0, 1.0, 1.0, 1.0);
                    }
                    let row: Option<&Row> = r
                        .rows
                        .iter()
                        .find(|x| x.case == speedup_row(k, w, &label(c)));
                    row.map_or((c as f64, f64::NAN, f64::NAN, f64::NAN), |x| {
                        (c as f64, x.median, x.q1, x.q3)
                    })
                })
                .collect();
            let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
            let big = k == "biglock";
            let style = if big {
                color.mix(0.9).stroke_width(2)
            } else {
                color.stroke_width(3)
            };
            let s = if big {
                chart.draw_series(DashedLineSeries::new(line.clone(), 10, 4, style))?
            } else {
                chart.draw_series(LineSeries::new(line.clone(), style))?
            };
            s.label(format!("{w}, {k}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            for p in &pts {
                chart.draw_series([PathElement::new(
                    vec![(p.0, p.2), (p.0, p.3)],
                    color.stroke_width(2),
                )])?;
                if big {
                    chart.draw_series([TriangleMarker::new((p.0, p.1), 7, color.filled())])?;
                } else {
                    chart.draw_series([Circle::new((p.0, p.1), 5, color.filled())])?;
                }
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

fn fig4(d: &Data, area: &Area) -> Result<()> {
    let sizes: Vec<usize> = CORES.into_iter().filter(|&c| c >= CHECKED_CORES).collect();
    let mut bars: Vec<(String, [f64; MODE_COUNT])> = Vec::new();
    for &c in &sizes {
        for w in WORKLOADS {
            for k in KERNELS {
                // Means over the runs, so a bar adds up to 100%.
                let runs: Vec<[f64; MODE_COUNT]> = d
                    .samples
                    .iter()
                    .filter(|s| s.kernel == k && s.workload == w && s.cores == c)
                    .map(shares)
                    .collect();
                let n = runs.len().max(1) as f64;
                let mean = std::array::from_fn(|m| runs.iter().map(|x| x[m]).sum::<f64>() / n);
                let short = match w {
                    "sysbound" => "sys",
                    "pmake" => "make",
                    w => w,
                };
                let kk = if k == "biglock" { "bl" } else { "pc" };
                bars.push((format!("{short} {kk} {c}"), mean));
            }
        }
    }
    let n = bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Fig. 4: CPU time per mode, mean of runs (pc = percore, bl = biglock; {} vCPUs)",
                sizes
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            ("sans-serif", 20),
        )
        .margin(14)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..1.18)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("share of all cores' time")
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style(("sans-serif", 12))
        .draw()?;
    // Lock at the bottom, so it reads against P2's lines.
    for (at, &m) in STACK.iter().enumerate() {
        let (name, color) = (MODE_NAMES[m], MODE_COLORS[m]);
        let rects: Vec<Rectangle<(SegmentValue<usize>, f64)>> = bars
            .iter()
            .enumerate()
            .map(|(i, (_, s))| {
                let y0: f64 = STACK[..at].iter().map(|&j| s[j]).sum();
                let mut b = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), y0),
                        (SegmentValue::Exact(i + 1), y0 + s[m]),
                    ],
                    color.filled(),
                );
                b.set_margin(0, 0, 6, 6);
                b
            })
            .collect();
        chart
            .draw_series(rects)?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    // P2's Lock figures: 10% and half.
    for (y, what) in [(0.10, "P2 lock < 10%"), (0.5, "P2 syscall lock ~ half")] {
        chart.draw_series([PathElement::new(
            vec![(SegmentValue::Exact(0), y), (SegmentValue::Exact(n), y)],
            BLACK.mix(0.25).stroke_width(1),
        )])?;
        chart.draw_series([Text::new(
            what.to_string(),
            (SegmentValue::Exact(n - 2), y + 0.01),
            ("sans-serif", 12).into_font(),
        )])?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}
