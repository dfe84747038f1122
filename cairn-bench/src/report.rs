//! Results: the JSON document, the printed table, and the SVG plots drawn from it.

use crate::engine::RunResult;
use crate::plot::{self, Mark, Series};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A Markdown table (pastes into BENCHMARKS.md as is).
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, width) in w.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width - c.chars().count();
                s.push_str(&format!(" {c}{} |", " ".repeat(pad)));
            }
            s
        };
        let mut out = format!("{}\n\n", self.title);
        out.push_str(&line(&self.headers));
        out.push('\n');
        out.push('|');
        for width in &w {
            out.push_str(&format!("{}|", "-".repeat(width + 2)));
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamedRun {
    pub name: String,
    pub result: RunResult,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub scenario: String,
    pub command_line: String,
    /// A few INFO fields of the server (redis_version, maxmemory...).
    pub server: BTreeMap<String, String>,
    pub runs: Vec<NamedRun>,
    pub tables: Vec<Table>,
    /// The scenario's headline numbers, machine readable (seconds, bytes, µs).
    pub metrics: BTreeMap<String, f64>,
    pub notes: Vec<String>,
    pub problems: Vec<String>,
}

impl Report {
    pub fn print(&self) {
        for t in &self.tables {
            out(&t.render());
        }
        for n in &self.notes {
            out(&format!("note: {n}"));
        }
        for p in &self.problems {
            eprintln!("problem: {p}");
        }
    }

    /// Writes `<dir>/<scenario>.json` and the plots; returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let json = dir.join(format!("{}.json", self.scenario));
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
        let mut files = vec![json];
        for r in &self.runs {
            let stem = if self.runs.len() == 1 {
                self.scenario.clone()
            } else {
                format!("{}-{}", self.scenario, r.name)
            };
            files.extend(plot_run(dir, &stem, &[(String::new(), &r.result)])?);
        }
        Ok(files)
    }
}

/// A line on stdout; a closed pipe (`| head`) is not worth a panic.
pub fn out(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

pub fn load(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a cairn-bench result: {e}", path.display()))
}

fn marks(prefix: &str, r: &RunResult) -> Vec<Mark> {
    let mut m = Vec::new();
    for e in &r.events {
        let name = e.name.split_whitespace().next().unwrap_or("event");
        m.push((format!("{prefix}{name} start"), e.start));
        if let Some(end) = e.end {
            if end > e.start {
                m.push((format!("{prefix}{name} end"), end));
            }
        }
    }
    m
}

/// Latency, throughput and memory plots of one or more runs (several = comparison; each
/// series name gets the run's prefix).
pub fn plot_run(
    dir: &Path,
    stem: &str,
    runs: &[(String, &RunResult)],
) -> Result<Vec<PathBuf>, String> {
    let mut lat = Vec::new();
    let mut thr = Vec::new();
    let mut mem = Vec::new();
    let mut mk = Vec::new();
    let single = runs.len() == 1;
    for (prefix, r) in runs {
        let p = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix} ")
        };
        let pts = |f: &dyn Fn(&crate::stats::Summary) -> u64| -> Vec<(f64, f64)> {
            r.intervals
                .iter()
                .filter(|iv| iv.all.count > 0)
                .map(|iv| (iv.t, f(&iv.all) as f64))
                .collect()
        };
        lat.push(Series {
            name: format!("{p}p50"),
            points: pts(&|s| s.p50),
        });
        lat.push(Series {
            name: format!("{p}p99"),
            points: pts(&|s| s.p99),
        });
        if single {
            lat.push(Series {
                name: format!("{p}p99.9"),
                points: pts(&|s| s.p999),
            });
            lat.push(Series {
                name: format!("{p}max"),
                points: pts(&|s| s.max),
            });
        }
        // Throughput: per label when a single run, total otherwise.
        let labels: Vec<String> = r.totals.cmds.keys().cloned().collect();
        if single && labels.len() > 1 {
            for l in &labels {
                let points = r
                    .intervals
                    .iter()
                    .map(|iv| (iv.t, iv.cmds.get(l).map_or(0.0, |s| s.rate)))
                    .collect();
                thr.push(Series {
                    name: l.clone(),
                    points,
                });
            }
        }
        thr.push(Series {
            name: format!("{p}all"),
            points: r.intervals.iter().map(|iv| (iv.t, iv.all.rate)).collect(),
        });
        let rss: Vec<(f64, f64)> = r
            .samples
            .iter()
            .filter_map(|s| s.rss_kb.map(|k| (s.t, k as f64 / 1024.0)))
            .collect();
        let pss: Vec<(f64, f64)> = r
            .samples
            .iter()
            .filter_map(|s| s.pss_kb.map(|k| (s.t, k as f64 / 1024.0)))
            .collect();
        let tree: Vec<(f64, f64)> = r
            .samples
            .iter()
            .filter_map(|s| s.tree_pss_kb.map(|k| (s.t, k as f64 / 1024.0)))
            .collect();
        if tree.iter().zip(&pss).any(|(a, b)| a.1 != b.1) {
            mem.push(Series {
                name: format!("{p}PSS + children"),
                points: tree,
            });
        }
        if !rss.is_empty() {
            mem.push(Series {
                name: format!("{p}RSS"),
                points: rss,
            });
        }
        if !pss.is_empty() {
            mem.push(Series {
                name: format!("{p}PSS"),
                points: pss,
            });
        }
        mk.extend(marks(&p, r));
    }
    let mut files = Vec::new();
    let f = dir.join(format!("{stem}-latency.svg"));
    plot::lines(
        &f,
        &format!("{stem}: latency (µs, log)"),
        "µs",
        &lat,
        &mk,
        true,
    )?;
    files.push(f);
    let f = dir.join(format!("{stem}-throughput.svg"));
    plot::lines(
        &f,
        &format!("{stem}: throughput"),
        "requests/s",
        &thr,
        &mk,
        false,
    )?;
    files.push(f);
    if !mem.is_empty() {
        let f = dir.join(format!("{stem}-memory.svg"));
        plot::lines(
            &f,
            &format!("{stem}: server memory"),
            "MiB",
            &mem,
            &mk,
            false,
        )?;
        files.push(f);
    }
    Ok(files)
}

/// `--compare a.json b.json`: the first run of each (or the run named `run`) on one plot.
pub fn compare(a: &Path, b: &Path, run: Option<&str>, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let ra = load(a)?;
    let rb = load(b)?;
    let pick = |r: &Report, p: &Path| -> Result<RunResult, String> {
        let found = match run {
            Some(n) => r.runs.iter().find(|x| x.name == n),
            None => r.runs.first(),
        };
        found
            .map(|x| x.result.clone())
            .ok_or_else(|| format!("{} has no run {:?}", p.display(), run.unwrap_or("")))
    };
    let (xa, xb) = (pick(&ra, a)?, pick(&rb, b)?);
    let name = |p: &Path| {
        p.file_stem()
            .map_or("run".into(), |s| s.to_string_lossy().into_owned())
    };
    let (na, nb) = (name(a), name(b));
    let (na, nb) = if na == nb {
        (format!("a:{na}"), format!("b:{nb}"))
    } else {
        (na, nb)
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for t in merge_tables(&na, &ra.tables, &nb, &rb.tables) {
        out(&t.render());
    }
    plot_run(dir, "compare", &[(na, &xa), (nb, &xb)])
}

/// Side by side: two-column tables (metric | value, the snapshot table) become
/// metric | A | B, as in the seed; wider tables get B's rows under A's, their first cell
/// prefixed with the run's name.
pub fn merge_tables(na: &str, a: &[Table], nb: &str, b: &[Table]) -> Vec<Table> {
    let key = |c: &str| c.split(" (").next().unwrap_or(c).trim().to_string();
    let mut out = Vec::new();
    for (i, ta) in a.iter().enumerate() {
        let Some(tb) = b.get(i) else {
            out.push(ta.clone());
            continue;
        };
        if ta.headers.len() == 2 && tb.headers.len() == 2 {
            let mut t = Table {
                title: format!("{} vs {}", ta.title, tb.title),
                headers: vec![
                    String::new(),
                    format!("{} ({na})", ta.headers[1]),
                    format!("{} ({nb})", tb.headers[1]),
                ],
                rows: Vec::new(),
            };
            for ra in &ta.rows {
                // Same first cell, else the same before its "(...)" detail (the steady
                // values in "p50 back to steady (119µs)" differ between runs).
                let first = ra.first().cloned().unwrap_or_default();
                let other = tb
                    .rows
                    .iter()
                    .find(|rb| rb.first() == Some(&first))
                    .or_else(|| {
                        tb.rows
                            .iter()
                            .find(|rb| rb.first().map(|c| key(c)) == Some(key(&first)))
                    });
                t.rows.push(vec![
                    ra.first().cloned().unwrap_or_default(),
                    ra.get(1).cloned().unwrap_or_default(),
                    other.and_then(|r| r.get(1).cloned()).unwrap_or_default(),
                ]);
            }
            out.push(t);
        } else {
            let mut t = ta.clone();
            let tag = |n: &str, rows: &[Vec<String>]| -> Vec<Vec<String>> {
                rows.iter()
                    .map(|r| {
                        let mut r = r.clone();
                        if let Some(c) = r.first_mut() {
                            *c = format!("{n}: {c}");
                        }
                        r
                    })
                    .collect()
            };
            t.rows = tag(na, &ta.rows);
            t.rows.extend(tag(nb, &tb.rows));
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render_and_merge() {
        let a = Table {
            title: "T".into(),
            headers: vec!["".into(), "BGSAVE".into()],
            rows: vec![
                vec!["Duration".into(), "1 s".into()],
                vec!["p50 back (10µs)".into(), "2 s".into()],
                vec!["mem (RSS)".into(), "1".into()],
                vec!["mem (PSS)".into(), "2".into()],
            ],
        };
        let mut b = a.clone();
        b.rows[1] = vec!["p50 back (12µs)".into(), "3 s".into()];
        let m = merge_tables("x", std::slice::from_ref(&a), "y", &[b]);
        assert_eq!(m[0].headers, vec!["", "BGSAVE (x)", "BGSAVE (y)"]);
        assert_eq!(m[0].rows[1], vec!["p50 back (10µs)", "2 s", "3 s"]);
        assert_eq!(m[0].rows[3], vec!["mem (PSS)", "2", "2"]);
        let r = a.render();
        assert!(r.contains("| Duration        | 1 s    |"), "{r}");
        let wide = Table {
            title: "W".into(),
            headers: vec!["Op".into(), "QPS".into(), "p50".into()],
            rows: vec![vec!["GET".into(), "1".into(), "2".into()]],
        };
        let m = merge_tables(
            "x",
            std::slice::from_ref(&wide),
            "y",
            std::slice::from_ref(&wide),
        );
        assert_eq!(m[0].rows.len(), 2);
        assert_eq!(m[0].rows[1][0], "y: GET");
    }
}
