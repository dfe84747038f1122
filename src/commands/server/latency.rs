//! LATENCY HISTOGRAM (per-command latency distributions), LATENCY GRAPH (the latency
//! monitor's samples as Redis's ASCII sparkline), and INFO latencystats' percentile lines.
//! The histograms are recorded by the dispatcher (`CommandEntry::record_latency_ns`).

use super::*;
use hdrhistogram::Histogram;

/// LATENCY HISTOGRAM's first reporting level (ns) and the factor between levels: Redis
/// walks its histogram logarithmically from 1024 ns, doubling.
const HISTOGRAM_FIRST_LEVEL_NS: u64 = 1024;

/// LATENCY GRAPH's width in columns and height in rows (Redis's).
const GRAPH_COLS: usize = 80;
const GRAPH_ROWS: usize = 4;

/// The cumulative distribution LATENCY HISTOGRAM shows for one command: (µs, calls at or
/// below it) at each doubling level from 1024 ns where the count grew, up to the level
/// that holds every call.
pub fn cumulative_levels(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let total = h.len();
    let mut out = Vec::new();
    let mut prev = 0;
    let mut level = HISTOGRAM_FIRST_LEVEL_NS;
    while prev < total {
        let at = level.min(h.high());
        let cum = h.count_between(0, at);
        if cum > prev {
            out.push((h.highest_equivalent(at) / 1000, cum));
            prev = cum;
        }
        if at == h.high() {
            break;
        }
        level = level.saturating_mul(2);
    }
    out
}

/// The latency (ns) at percentile `p` (0 to 100) as Redis's hdr_value_at_percentile: the
/// first bucket where the count reaches `p` of the calls (rounded to nearest), its
/// highest equivalent value (its lowest for percentile 0).
pub fn value_at_percentile(h: &Histogram<u64>, p: f64) -> u64 {
    let p = p.min(100.0);
    let want = ((p / 100.0) * h.len() as f64 + 0.5) as u64;
    let want = want.max(1);
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        if seen >= want {
            let value = v.value_iterated_to();
            return if p == 0.0 {
                h.lowest_equivalent(value)
            } else {
                h.highest_equivalent(value)
            };
        }
    }
    0
}

/// A percentile as Redis prints it in `latency_percentiles_usec_*` (C's `%f` with its
/// trailing zeros and point trimmed: `50`, `99.9`).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// INFO latencystats: one `latency_percentiles_usec_<command>` line per command with a
/// histogram, at the `latency-tracking-info-percentiles` percentiles.
pub fn info_latencystats(srv: &Server, s: &mut String) {
    let percentiles: Vec<f64> = srv
        .config
        .get_value("latency-tracking-info-percentiles")
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    for (name, h) in srv.cmdstats.histograms() {
        let _ = write!(s, "latency_percentiles_usec_{name}:");
        for (i, &p) in percentiles.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let us = value_at_percentile(h, p) as f64 / 1000.0;
            let _ = write!(s, "p{}={us:.3}", percentile_label(p));
        }
        s.push_str("\r\n");
    }
}

fn reply_histogram(out: &mut Reply, name: &str, h: &Histogram<u64>) {
    out.bulk_str(name);
    out.map(2);
    out.bulk_str("calls");
    out.int(h.len() as i64);
    out.bulk_str("histogram_usec");
    let levels = cumulative_levels(h);
    out.map(levels.len());
    for (us, n) in levels {
        out.int(us as i64);
        out.int(n as i64);
    }
}

/// LATENCY HISTOGRAM [command ...]: every command's distribution, or those named (a
/// container names itself and its subcommands; unknown names are skipped). Commands in
/// name order (Redis's follow its command dict's order, which is unspecified).
pub(super) fn latency_histogram(ctx: &mut Ctx) -> CmdResult {
    let all = ctx.srv.cmdstats.histograms();
    let mut chosen: Vec<(&str, &Histogram<u64>)> = Vec::new();
    if ctx.args.len() == 2 {
        chosen = all;
    } else {
        for i in 2..ctx.args.len() {
            let want = ctx.args.str(i).to_ascii_lowercase();
            for &(name, h) in &all {
                let sub_of = name
                    .split_once('|')
                    .is_some_and(|(parent, _)| parent == want);
                if name == want || sub_of {
                    chosen.push((name, h));
                }
            }
        }
    }
    ctx.out.map(chosen.len());
    for (name, h) in chosen {
        reply_histogram(&mut ctx.out, name, h);
    }
    Ok(())
}

/// LATENCY GRAPH <event>: the event's samples as Redis draws them — a title line, a rule,
/// then a filled sparkline of 4 rows per 80 samples with each sample's age below it.
pub(super) fn latency_graph(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.args.str(2);
    let Some(ev) = ctx.srv.latency.events.get(&name) else {
        return Err(CmdError::err(format!(
            "No samples available for event '{name}'"
        )));
    };
    let now_s = crate::util::now_ms() / 1000;
    let graph = render_graph(&name, &ev.samples, ev.max_ms, now_s);
    ctx.out.verbatim(graph.as_bytes());
    Ok(())
}

/// Redis's LATENCY GRAPH text for `samples` ((unix seconds, ms), oldest first).
pub fn render_graph(
    event: &str,
    samples: &std::collections::VecDeque<(i64, u64)>,
    all_time_max_ms: u64,
    now_s: i64,
) -> String {
    let values: Vec<u64> = samples.iter().map(|s| s.1).collect();
    let labels: Vec<String> = samples
        .iter()
        .map(|&(t, _)| {
            let ago = now_s - t;
            match ago {
                _ if ago < 60 => format!("{ago}s"),
                _ if ago < 3600 => format!("{}m", ago / 60),
                _ if ago < 86400 => format!("{}h", ago / 3600),
                _ => format!("{}d", ago / 86400),
            }
        })
        .collect();
    let max = values.iter().copied().max().unwrap_or(0);
    let min = values.iter().copied().min().unwrap_or(0);
    let mut g =
        format!("{event} - high {max} ms, low {min} ms (all time high {all_time_max_ms} ms)\n");
    g.push_str(&"-".repeat(GRAPH_COLS));
    g.push('\n');
    let mut start = 0;
    while start < values.len() {
        let end = (start + GRAPH_COLS).min(values.len());
        if start != 0 {
            g.push('\n');
        }
        sparkline(
            &mut g,
            &values[start..end],
            &labels[start..end],
            min as f64,
            max as f64,
        );
        start = end;
    }
    g
}

/// One filled sparkline block: `GRAPH_ROWS` rows of `_o#` (and `|` below the top), a
/// blank row, then the labels written downwards one character a row.
fn sparkline(g: &mut String, values: &[u64], labels: &[String], min: f64, max: f64) {
    const FILL: [u8; 3] = [b'_', b'o', b'#'];
    let steps = (FILL.len() * GRAPH_ROWS) as i64;
    let range = if max - min == 0.0 { 1.0 } else { max - min };
    let step_of = |v: u64| -> i64 {
        // As C: the scaled value truncated, then divided and truncated again.
        let scaled = ((v as f64 - min) * steps as f64) as i64;
        ((scaled as f64 / range) as i64).clamp(0, steps - 1)
    };
    for row in 0..GRAPH_ROWS {
        let line: String = values
            .iter()
            .map(|&v| {
                let idx = step_of(v) - ((GRAPH_ROWS - row - 1) * FILL.len()) as i64;
                if (0..FILL.len() as i64).contains(&idx) {
                    FILL[idx as usize] as char
                } else if idx >= FILL.len() as i64 {
                    '|'
                } else {
                    ' '
                }
            })
            .collect();
        g.push_str(&line);
        g.push('\n');
    }
    // A spacing row, then one row per label character.
    g.push_str(&" ".repeat(values.len()));
    g.push('\n');
    let longest = labels.iter().map(|l| l.len()).max().unwrap_or(0);
    for i in 0..longest {
        let line: String = labels
            .iter()
            .map(|l| l.as_bytes().get(i).map_or(' ', |&b| b as char))
            .collect();
        g.push_str(&line);
        g.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values_ns: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 1_000_000_000, 2).unwrap();
        for &v in values_ns {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn percentiles_and_levels_as_redis_reports_them() {
        // Redis 7.0.15 for one call of 7 µs: p0=6.976, p50=7.007, histogram {8: 1}.
        let h = hist(&[7000]);
        assert_eq!(value_at_percentile(&h, 0.0), 6976);
        assert_eq!(value_at_percentile(&h, 50.0), 7007);
        assert_eq!(value_at_percentile(&h, 100.0), 7007);
        assert_eq!(cumulative_levels(&h), vec![(8, 1)]);
        let h = hist(&[30_000, 132_000, 132_000, 250_000, 1_000_000_000]);
        let levels = cumulative_levels(&h);
        assert_eq!(levels.last().unwrap().1, 5);
        assert!(levels
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(0.0), "0");
    }

    #[test]
    fn graph_draws_redis_sparkline() {
        let samples: std::collections::VecDeque<(i64, u64)> =
            [(100, 10), (130, 20), (1000, 40)].into_iter().collect();
        let g = render_graph("command", &samples, 55, 1000 + 7200);
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(
            lines[0],
            "command - high 40 ms, low 10 ms (all time high 55 ms)"
        );
        assert_eq!(lines[1], "-".repeat(80));
        // Steps: 0, (10*12)/30 = 4, 11 (clamped to 11): rows from the top.
        assert_eq!(lines[2], "  #");
        assert_eq!(lines[3], "  |");
        assert_eq!(lines[4], " o|");
        assert_eq!(lines[5], "_||");
        assert_eq!(lines[6], "   ");
        assert_eq!(lines[7], "222");
        assert_eq!(lines[8], "hhh");
    }
}
