//! SVG plots (plotters, SVG backend only): latency percentiles over time on a log axis,
//! throughput and memory over time, with events (BGSAVE start/end...) marked.

use plotters::prelude::*;
use std::path::Path;

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A vertical marker: (label, x).
pub type Mark = (String, f64);

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn bounds(series: &[Series]) -> (f64, f64, f64, f64) {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return (0.0, 1.0, 1.0, 10.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    (x0, x1, y0, y1)
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("plot: {e}")
}

/// Draws `series` into an SVG at `path`. `log_y` for latencies (values must be > 0).
pub fn lines(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[Series],
    marks: &[Mark],
    log_y: bool,
) -> Result<(), String> {
    let root = SVGBackend::new(path, (1000, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (x0, x1, y0, y1) = bounds(series);
    macro_rules! draw {
        ($chart:expr, $ylo:expr, $yhi:expr, $ylab:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc("seconds")
                .y_desc(y_label)
                .draw()
                .map_err(err)?;
            for (i, s) in series.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(err)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
            }
            for (i, (label, x)) in marks.iter().enumerate() {
                chart
                    .draw_series(LineSeries::new(
                        vec![(*x, $ylo), (*x, $yhi)],
                        BLACK.mix(0.6),
                    ))
                    .map_err(err)?;
                chart
                    // Staggered so that a start and an end close together stay readable.
                    .draw_series(std::iter::once(Text::new(
                        format!(" {label}"),
                        (*x, $ylab(i)),
                        ("sans-serif", 14).into_font(),
                    )))
                    .map_err(err)?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    if log_y {
        let lo = (y0.max(1.0) / 2.0).max(1.0);
        let hi = (y1.max(lo * 10.0)) * 2.0;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, (lo..hi).log_scale())
            .map_err(err)?;
        draw!(chart, lo, hi, |i: usize| hi
            / 1.4f64.powi((i % 4) as i32 + 1));
    } else {
        let hi = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, 0.0..hi)
            .map_err(err)?;
        draw!(chart, 0.0, hi, |i: usize| hi
            * (0.97 - 0.05 * (i % 4) as f64));
    }
    root.present().map_err(err)?;
    Ok(())
}
