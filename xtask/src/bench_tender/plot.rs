//! The picture of `cargo xtask bench tender` (docs/results/tender.png): six panels drawn
//! from the samples and the report's rows, replacing the generic chart `Report::write`
//! draws for every benchmark.

use super::figures::child_median;
use super::{Data, CASES, CHILDREN, FIG7_N, FIG8_N, LIMITS, NOTIFY};
use crate::results::{Report, Row};
use anyhow::Result;
use plotters::prelude::*;
use std::path::Path;

/// Six panels: Fig. 4, Fig. 5 (box plots by agent limit), Table 5, Fig. 7, Fig. 8, and the
/// parallel-mode notification modes. Overwrites the generic chart `Report::write` drew.
pub(super) fn plot(d: &Data, r: &Report, path: &Path) -> Result<()> {
    let root = BitMapBackend::new(path, (1500, 1500)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((3, 2));
    let find = |prefix: &str| -> Vec<Row> {
        r.rows
            .iter()
            .filter(|x| x.case.starts_with(prefix))
            .cloned()
            .collect()
    };
    let short = |rows: Vec<Row>| -> Vec<(String, Row)> {
        rows.into_iter()
            .map(|x| {
                let label = x
                    .case
                    .rsplit_once("agents=")
                    .map(|(_, l)| format!("remote, {l}"))
                    .unwrap_or_else(|| "local".into());
                (label, x)
            })
            .collect()
    };
    boxes(
        &panels[0],
        "Fig. 4: create 4 KiB vregion (by agent limit)",
        "instructions",
        &short(find("Fig. 4")),
    )?;
    boxes(
        &panels[1],
        "Fig. 5: delete 4 KiB vregion (by agent limit)",
        "instructions",
        &short(find("Fig. 5")),
    )?;
    let unlimited = &d.ops[LIMITS.len() - 1];
    let t5: Vec<(String, Row)> = [
        ("open c0 off", &d.rcc_off.create_local),
        ("open c0 on", &unlimited.create_local),
        ("open c1 off", &d.rcc_off.create_remote),
        ("open c1 on", &unlimited.create_remote),
        ("close c0 off", &d.rcc_off.delete_local),
        ("close c0 on", &unlimited.delete_local),
        ("close c1 off", &d.rcc_off.delete_remote),
        ("close c1 on", &unlimited.delete_remote),
    ]
    .into_iter()
    .map(|(l, s)| (l.to_string(), Row::from_samples(l, s)))
    .collect();
    boxes(
        &panels[2],
        "Table 5: RCC off / on (agents unlimited)",
        "instructions",
        &t5,
    )?;
    let base = CHILDREN[0].0;
    let series = |child_of: &dyn Fn(u64) -> (&'static str, u64),
                  xs: &[u64]|
     -> Vec<(String, Vec<(f64, f64)>)> {
        CASES
            .iter()
            .map(|case| {
                let pts = xs
                    .iter()
                    .map(|&x| {
                        let (child, n) = child_of(x);
                        (x as f64, child_median(d, case, child, n))
                    })
                    .collect();
                (case.to_string(), pts)
            })
            .collect()
    };
    let ns: Vec<u64> = FIG7_N.to_vec();
    lines(
        &panels[3],
        "Fig. 7: child creates+deletes n times",
        "n (create+delete pairs)",
        &series(&|n| (base, n), &ns),
    )?;
    let kibs: Vec<u64> = CHILDREN.iter().map(|c| u64::from(c.1)).collect();
    let child_of = |kib: u64| {
        let c = CHILDREN
            .iter()
            .find(|c| u64::from(c.1) == kib)
            .map_or(base, |c| c.0);
        (c, FIG8_N)
    };
    // Fig. 8 as the growth over the 4 KiB child, which is what the figure is about.
    let growth: Vec<(String, Vec<(f64, f64)>)> = series(&child_of, &kibs)
        .into_iter()
        .map(|(name, pts)| {
            let first = pts.first().map_or(0.0, |p| p.1);
            (name, pts.into_iter().map(|(x, y)| (x, y - first)).collect())
        })
        .collect();
    lines(
        &panels[4],
        &format!("Fig. 8: cost over the 4 KiB child, by text size (n = {FIG8_N})"),
        "text (KiB)",
        &growth,
    )?;
    let par: Vec<(String, Row)> = NOTIFY
        .iter()
        .zip(&d.rtt)
        .map(|(n, (remote, _))| (format!("remote, {n}"), Row::from_samples(n, remote)))
        .collect();
    boxes(
        &panels[5],
        "parallel mode: remote create+delete by rpcc.notify",
        "wall ns",
        &par,
    )?;
    root.present()?;
    Ok(())
}

/// Box plots (min, q1, median, q3, max) of labelled rows. When the values span more than
/// a factor of 50 the axis is logarithmic (labelled in plain values).
fn boxes(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    rows: &[(String, Row)],
) -> Result<()> {
    let n = rows.len();
    let hi = rows.iter().map(|(_, r)| r.max).fold(0.0, f64::max);
    let lo = rows
        .iter()
        .map(|(_, r)| r.min)
        .fold(f64::INFINITY, f64::min);
    let log = lo > 0.0 && hi / lo > 50.0;
    let y = move |v: f64| if log { v.max(1.0).log10() } else { v };
    let (y0, y1) = if log {
        (y(lo).floor(), y(hi).ceil())
    } else {
        (0.0, hi * 1.08 + f64::EPSILON)
    };
    let labels: Vec<String> = rows.iter().map(|(l, _)| l.clone()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n - 1).into_segmented(), y0..y1)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(if log {
            format!("{unit} (log scale)")
        } else {
            unit.to_string()
        })
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| {
            if log {
                format!("{:.0}", 10f64.powf(*v))
            } else {
                format!("{v:.0}")
            }
        })
        .label_style(("sans-serif", 12))
        .draw()?;
    for (i, (_, r)) in rows.iter().enumerate() {
        let mut b = Rectangle::new(
            [
                (SegmentValue::Exact(i), y(r.q3)),
                (SegmentValue::Exact(i + 1), y(r.q1)),
            ],
            BLUE.mix(0.3).filled(),
        );
        b.set_margin(0, 0, 14, 14);
        chart.draw_series([b])?;
        let mut m = Rectangle::new(
            [
                (SegmentValue::Exact(i), y(r.median)),
                (SegmentValue::Exact(i + 1), y(r.median)),
            ],
            BLACK.stroke_width(2),
        );
        m.set_margin(0, 0, 14, 14);
        chart.draw_series([m])?;
        for (a, b) in [(r.min, r.q1), (r.q3, r.max)] {
            chart.draw_series([PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), y(a)),
                    (SegmentValue::CenterOf(i), y(b)),
                ],
                BLACK,
            )])?;
        }
    }
    Ok(())
}

/// Median lines, one per case.
fn lines(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    title: &str,
    xdesc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let pts = series.iter().flat_map(|s| s.1.iter());
    let xmax = pts.clone().map(|p| p.0).fold(0.0, f64::max) * 1.05 + 1.0;
    let ymax = pts.map(|p| p.1).fold(0.0, f64::max) * 1.1 + 1.0;
    let ylabel = if title.starts_with("Fig. 8") {
        "instructions over the 4 KiB child (median)"
    } else {
        "instructions (median)"
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc(xdesc)
        .y_desc(ylabel)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 12))
        .draw()?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}
