//! Scenarios: each builds its runs from the CLI knobs, runs them and fills a Report with the
//! table of the seed it reproduces.

use crate::cli::{ConnArgs, LoadArgs, NoiseArgs, RunArgs, SnapshotArgs, TieringArgs};
use crate::engine::{self, set_get_mix, CmdTemplate, EventSpec, Group, RunResult, RunSpec, Target};
use crate::keys::{parse_size, KeyDist, ValueSize};
use crate::procmem;
use crate::report::{NamedRun, Report, Table};
use crate::resp::{self, Reply};
use crate::stats::{self, fmt_us, Summary};
use crate::values::ValueEntropy;
use std::collections::BTreeMap;
use std::time::Duration;

/// Defaults a scenario applies where the user gave nothing.
#[derive(Clone)]
pub struct Defaults {
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub keys: u64,
    pub dist: KeyDist,
    pub value: ValueSize,
    pub ratio: &'static str,
    pub duration: f64,
}

impl Default for Defaults {
    fn default() -> Defaults {
        Defaults {
            connections: 50,
            threads: 2,
            pipeline: 1,
            keys: 100_000,
            dist: KeyDist::Uniform,
            value: ValueSize { min: 100, max: 100 },
            ratio: "1:10",
            duration: 10.0,
        }
    }
}

pub struct Ctx {
    pub conn: ConnArgs,
    pub target: Target,
    pub pid: Option<u32>,
    pub server: BTreeMap<String, String>,
}

fn secs(s: f64, what: &str) -> Result<Duration, String> {
    if !(s.is_finite() && (0.0..1e7).contains(&s)) {
        return Err(format!("{what} must be a number of seconds, got {s}"));
    }
    Ok(Duration::from_secs_f64(s))
}

impl Ctx {
    /// Resolves the server, checks it answers PING (a clear message if not), finds its pid
    /// when it is local.
    pub fn new(conn: &ConnArgs) -> Result<Ctx, String> {
        let addr = resp::resolve(&conn.host, conn.port).map_err(|e| e.to_string())?;
        let timeout = secs(conn.timeout, "--timeout")?.max(Duration::from_millis(10));
        let target = Target {
            addr,
            password: conn.password.clone(),
            timeout,
        };
        let mut c = target.connect()?;
        match c.call_str(&["PING"]) {
            Ok(Reply::Simple(_)) => {}
            Ok(Reply::Error(e)) => return Err(format!("server at {addr} refuses PING: {e}")),
            Ok(r) => return Err(format!("server at {addr} answered PING with {r:?}")),
            Err(e) => return Err(format!("server at {addr} does not answer PING: {e}")),
        }
        let mut server = BTreeMap::new();
        if let Ok(Reply::Bulk(Some(b))) = c.call_str(&["INFO"]) {
            for (k, v) in resp::parse_info(&String::from_utf8_lossy(&b)) {
                if matches!(
                    k.as_str(),
                    "redis_version"
                        | "valkey_version"
                        | "cairn_version"
                        | "maxmemory"
                        | "maxmemory_policy"
                        | "os"
                        | "process_id"
                        | "io_threads_active"
                        | "aof_enabled"
                        | "used_memory"
                ) {
                    server.insert(k, v);
                }
            }
        }
        let pid = conn.pid.or_else(|| {
            if addr.ip().is_loopback() {
                procmem::find_pid_by_port(conn.port)
            } else {
                None
            }
        });
        Ok(Ctx {
            conn: conn.clone(),
            target,
            pid,
            server,
        })
    }

    pub(crate) fn spec(
        &self,
        groups: Vec<Group>,
        duration: Option<Duration>,
    ) -> Result<RunSpec, String> {
        Ok(RunSpec {
            target: self.target.clone(),
            groups,
            duration,
            interval: Duration::from_millis(self.conn.interval_ms.clamp(1, 60_000)),
            seed: self.conn.seed,
            pid: self.pid,
            info_fields: self.conn.info.clone(),
            events: Vec::new(),
            progress: !self.conn.quiet,
            max_time: secs(self.conn.max_time, "--max-time")?,
            after_events: Duration::ZERO,
            value_entropy: if self.conn.distinct_values {
                ValueEntropy::Random
            } else {
                self.conn.value_entropy
            },
        })
    }

    pub fn info(&self) -> Result<BTreeMap<String, String>, String> {
        let mut c = self.target.connect()?;
        match c
            .call_str(&["INFO", "everything"])
            .map_err(|e| e.to_string())?
        {
            Reply::Bulk(Some(b)) => Ok(resp::parse_info(&String::from_utf8_lossy(&b))
                .into_iter()
                .collect()),
            r => Err(format!("INFO answered {r:?}")),
        }
    }
}

/// The load group from the knobs, with the scenario's defaults.
pub fn group(load: &LoadArgs, d: &Defaults) -> Result<Group, String> {
    let commands: Vec<CmdTemplate> = if load.commands.is_empty() {
        set_get_mix(load.ratio.as_deref().unwrap_or(d.ratio))?
    } else {
        if load.ratio.is_some() {
            return Err("give either --ratio or --command, not both".into());
        }
        load.commands
            .iter()
            .map(|c| c.parse())
            .collect::<Result<_, _>>()?
    };
    let mut g = Group::new(commands);
    g.connections = load.connections.unwrap_or(d.connections);
    g.threads = load.threads.unwrap_or(d.threads);
    g.pipeline = load.pipeline.unwrap_or(d.pipeline);
    g.keys = load.keys.unwrap_or(d.keys);
    g.dist = load.dist.clone().unwrap_or(d.dist.clone());
    g.value = load.value_size.unwrap_or(d.value);
    g.rate = load.rate;
    g.requests = load.requests;
    g.key_prefix = load.key_prefix.clone();
    Ok(g)
}

fn duration(load: &LoadArgs, d: &Defaults) -> Result<Option<Duration>, String> {
    match (load.duration, load.requests) {
        (Some(s), _) => Ok(Some(secs(s, "--duration")?)),
        (None, Some(_)) => Ok(None),
        (None, None) => Ok(Some(secs(d.duration, "duration")?)),
    }
}

/// Loads keys 0..n with pipelined SETs, one connection per worker so the sequential walkers
/// tile the key space exactly.
pub fn fill(
    ctx: &Ctx,
    n: u64,
    prefix: &str,
    value: ValueSize,
    pipeline: usize,
) -> Result<NamedRun, String> {
    let mut g = Group::new(vec!["SET {key} {value}".parse()?]);
    g.connections = 4.min(n.max(1) as usize);
    g.threads = g.connections;
    g.pipeline = pipeline.max(1);
    g.keys = n.max(1);
    g.dist = KeyDist::Sequential;
    g.requests = Some(n);
    g.value = value;
    g.key_prefix = prefix.to_string();
    let mut spec = ctx.spec(vec![g], None)?;
    spec.info_fields.clear();
    if !spec.progress || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        spec.progress = false;
    }
    let r = engine::run(&spec)?;
    if !r.problems.is_empty() {
        return Err(format!(
            "fill of {n} keys failed: {}",
            r.problems.join("; ")
        ));
    }
    eprintln!(
        "fill: {} keys × {} B in {:.2}s ({:.0} SET/s)",
        n,
        value.max,
        r.elapsed,
        r.totals.all.count as f64 / r.elapsed.max(1e-9)
    );
    Ok(NamedRun {
        name: "fill".into(),
        result: r,
    })
}

fn maybe_fill(
    ctx: &Ctx,
    load: &LoadArgs,
    g: &Group,
    default_n: u64,
) -> Result<Option<NamedRun>, String> {
    if load.no_fill {
        return Ok(None);
    }
    let n = load.fill.unwrap_or(default_n);
    if n == 0 {
        return Ok(None);
    }
    fill(ctx, n, &g.key_prefix, g.value, load.fill_pipeline).map(Some)
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

fn cmd_table(title: &str, r: &RunResult) -> Table {
    let mut t = Table {
        title: title.into(),
        headers: ["Op", "QPS", "p50", "p99", "p99.9", "max", "errors"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    let row = |name: &str, s: &Summary| {
        vec![
            name.to_string(),
            format!("{:.0}", s.rate),
            fmt_us(s.p50),
            fmt_us(s.p99),
            fmt_us(s.p999),
            fmt_us(s.max),
            s.errors.to_string(),
        ]
    };
    for (k, s) in &r.totals.cmds {
        t.rows.push(row(k, s));
    }
    if r.totals.cmds.len() > 1 {
        t.rows.push(row("all", &r.totals.all));
    }
    t
}

pub(crate) fn finish(mut rep: Report) -> Report {
    for r in &rep.runs {
        for p in &r.result.problems {
            rep.problems.push(format!("{}: {p}", r.name));
        }
    }
    rep
}

fn new_report(name: &str, ctx: &Ctx) -> Report {
    Report {
        scenario: name.into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        server: ctx.server.clone(),
        ..Default::default()
    }
}

/// `run`: the knobs as given.
pub fn run(a: &RunArgs) -> Result<Report, String> {
    let ctx = Ctx::new(&a.conn)?;
    let d = Defaults::default();
    let g = group(&a.load, &d)?;
    let mut rep = new_report("run", &ctx);
    if let Some(f) = maybe_fill(&ctx, &a.load, &g, 0)? {
        rep.runs.push(f);
    }
    let r = engine::run(&ctx.spec(vec![g], duration(&a.load, &d)?)?)?;
    rep.tables.push(cmd_table("Load", &r));
    rep.metrics.insert("qps".into(), r.totals.all.rate);
    rep.runs.push(NamedRun {
        name: "load".into(),
        result: r,
    });
    Ok(finish(rep))
}

/// Key count for ~5 % of the box's available memory at `per_key` bytes, within bounds.
pub fn keys_for_box(per_key: u64) -> u64 {
    let avail_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(1 << 20);
    (avail_kb * 1024 / 20 / per_key.max(1)).clamp(10_000, 5_000_000)
}

/// `aof`: seed 001's workload. Run it once per server setting (appendonly no / everysec /
/// always) and compare the tables.
pub fn aof(a: &RunArgs) -> Result<Report, String> {
    let ctx = Ctx::new(&a.conn)?;
    let d = Defaults {
        ratio: "1:3",
        value: ValueSize {
            min: 1000,
            max: 1000,
        },
        keys: keys_for_box(1000 + 100),
        ..Defaults::default()
    };
    let g = group(&a.load, &d)?;
    let mut rep = new_report("aof", &ctx);
    let keys = g.keys;
    if let Some(f) = maybe_fill(&ctx, &a.load, &g, keys)? {
        rep.runs.push(f);
    }
    let info = ctx.info().unwrap_or_default();
    let setup = match info.get("aof_enabled").map(String::as_str) {
        Some("1") => format!(
            "AOF ({})",
            config_get(&ctx, "appendfsync").unwrap_or_else(|| "?".into())
        ),
        Some(_) => "AOF disabled".into(),
        None => "server".into(),
    };
    let r = engine::run(&ctx.spec(vec![g], duration(&a.load, &d)?)?)?;
    let mut t = Table {
        title: format!(
            "AOF workload: SET:GET, {} keys, {} B values",
            keys, d.value.max
        ),
        headers: ["Setup", "Op", "QPS", "P50 Latency (ms)", "P99 Latency (ms)"]
            .map(String::from)
            .to_vec(),
        rows: Vec::new(),
    };
    for op in ["GET", "SET"] {
        if let Some(s) = r.totals.cmds.get(op) {
            t.rows.push(vec![
                setup.clone(),
                title_case(op),
                format!("{:.0}", s.rate),
                ms(s.p50),
                ms(s.p99),
            ]);
            rep.metrics
                .insert(format!("{}_qps", op.to_lowercase()), s.rate);
            rep.metrics
                .insert(format!("{}_p50_us", op.to_lowercase()), s.p50 as f64);
            rep.metrics
                .insert(format!("{}_p99_us", op.to_lowercase()), s.p99 as f64);
        }
    }
    rep.tables.push(t);
    rep.runs.push(NamedRun {
        name: "load".into(),
        result: r,
    });
    Ok(finish(rep))
}

/// "GET" -> "Get", as the seed's table spells operations.
fn title_case(op: &str) -> String {
    let mut c = op.chars();
    match c.next() {
        Some(f) => f.to_string() + &c.as_str().to_lowercase(),
        None => String::new(),
    }
}

fn config_get(ctx: &Ctx, name: &str) -> Option<String> {
    let mut c = ctx.target.connect().ok()?;
    match c.call_str(&["CONFIG", "GET", name]).ok()? {
        Reply::Array(Some(v)) => match v.get(1) {
            Some(Reply::Bulk(Some(b))) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// Median of a non-empty list.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

/// Seconds from `from` until the percentile `f` returns to steady state: the start of the
/// first window of `window` consecutive intervals (all with completions) whose value stays
/// at or under `threshold`. None if it never does before the run ended.
pub fn recovery(
    r: &RunResult,
    from: f64,
    threshold: u64,
    window: usize,
    f: impl Fn(&Summary) -> u64,
) -> Option<f64> {
    let iv = r.interval_ms.max(1) as f64 / 1000.0;
    let first = (from / iv).floor() as i64;
    let by_idx: BTreeMap<i64, &Summary> = r
        .intervals
        .iter()
        .map(|x| ((x.t / iv).round() as i64, &x.all))
        .filter(|(i, s)| *i >= first && s.count > 0)
        .collect();
    let last = *by_idx.keys().last()?;
    let mut run_start = None;
    let mut run_len = 0;
    for i in first..=last {
        let ok = by_idx.get(&i).is_some_and(|s| f(s) <= threshold);
        if ok {
            if run_len == 0 {
                run_start = Some(i);
            }
            run_len += 1;
            if run_len >= window {
                return run_start.map(|s| (s as f64 * iv - from).max(0.0));
            }
        } else {
            run_len = 0;
        }
    }
    None
}

/// The steady-state value of a percentile before `until`: the median over intervals after
/// a short warm-up.
fn steady(r: &RunResult, until: f64, f: impl Fn(&Summary) -> u64) -> Option<u64> {
    let warm = (until * 0.3).min(3.0);
    median(
        r.intervals
            .iter()
            .filter(|x| {
                x.t >= warm && x.t + r.interval_ms as f64 / 1000.0 <= until && x.all.count > 0
            })
            .map(|x| f(&x.all) as f64)
            .collect(),
    )
    .map(|v| v as u64)
}

/// `snapshot`: seed 000's table.
pub fn snapshot(a: &SnapshotArgs) -> Result<Report, String> {
    let ctx = Ctx::new(&a.conn)?;
    let d = Defaults {
        value: ValueSize { min: 512, max: 512 },
        ..Defaults::default()
    };
    let g = group(&a.load, &d)?;
    let mut rep = new_report("snapshot", &ctx);
    if let Some(f) = maybe_fill(&ctx, &a.load, &g, g.keys)? {
        rep.runs.push(f);
    }
    let command: Vec<String> = a.event.split_whitespace().map(String::from).collect();
    if command.is_empty() {
        return Err("--event is empty".into());
    }
    let at = secs(a.at, "--at")?;
    let mut spec = ctx.spec(vec![g], Some(at + secs(a.after, "--after")?))?;
    if a.load.duration.is_some() {
        spec.duration = duration(&a.load, &d)?;
    }
    let wait = (!a.wait_field.is_empty()).then(|| a.wait_field.clone());
    for f in [&a.wait_field] {
        if !f.is_empty() && !spec.info_fields.contains(f) {
            spec.info_fields.push(f.clone());
        }
    }
    spec.events.push(EventSpec {
        at,
        command,
        wait_field: wait,
        wait_equals: None,
        target: None,
        timeout: secs(a.event_timeout, "--event-timeout")?,
    });
    spec.after_events = secs(a.after, "--after")?;
    let r = engine::run(&spec)?;

    let name = a
        .event
        .split_whitespace()
        .next()
        .unwrap_or("event")
        .to_uppercase();
    let mut t = Table {
        title: format!("{name} under load ({} keys)", spec.groups[0].keys),
        headers: vec!["".into(), name.clone()],
        rows: Vec::new(),
    };
    let Some(ev) = r.events.first().cloned() else {
        rep.problems
            .push("the snapshot command was never sent (the run ended first)".into());
        rep.runs.push(NamedRun {
            name: "load".into(),
            result: r,
        });
        return Ok(finish(rep));
    };
    let end = ev.end;
    let dur = end.map(|e| e - ev.start);
    t.rows.push(vec![
        "Duration".into(),
        dur.map_or("did not finish".into(), |d| format!("{d:.2} s")),
    ]);
    // Memory: baseline = median RSS before the event; peak = max RSS while it ran.
    let win_end = end.unwrap_or(r.elapsed);
    let mem = |get: &dyn Fn(&engine::Sample) -> Option<u64>| -> Option<(u64, u64)> {
        let base = median(
            r.samples
                .iter()
                .filter(|s| s.t < ev.start)
                .filter_map(|s| get(s).map(|v| v as f64))
                .collect(),
        )? as u64;
        let peak = r
            .samples
            .iter()
            .filter(|s| s.t >= ev.start && s.t <= win_end + r.interval_ms as f64 / 1000.0)
            .filter_map(get)
            .max()?;
        Some((base, peak))
    };
    match mem(&|s| s.rss_kb) {
        Some((base, peak)) => {
            let extra = peak.saturating_sub(base);
            t.rows.push(vec![
                "Extra memory during SAVE (RSS)".into(),
                format!("{:.1} MB", extra as f64 / 1024.0),
            ]);
            rep.metrics
                .insert("extra_rss_bytes".into(), extra as f64 * 1024.0);
            rep.metrics
                .insert("baseline_rss_bytes".into(), base as f64 * 1024.0);
        }
        None => t.rows.push(vec![
            "Extra memory during SAVE (RSS)".into(),
            "n/a (server not local; give --pid)".into(),
        ]),
    }
    if let Some((base, peak)) = mem(&|s| s.tree_pss_kb) {
        let extra = peak.saturating_sub(base);
        t.rows.push(vec![
            "Extra memory during SAVE (PSS, server + children)".into(),
            format!("{:.1} MB", extra as f64 / 1024.0),
        ]);
        rep.metrics
            .insert("extra_pss_bytes".into(), extra as f64 * 1024.0);
    }
    // Freeze: the longest span with no completed request from the command to the end.
    let from_ms = (ev.start * 1000.0) as usize;
    let (freeze, freeze_at) = stats::longest_gap(&r.per_ms, from_ms, (r.elapsed * 1000.0) as usize);
    t.rows
        .push(vec!["Process freeze time".into(), format!("{freeze} ms")]);
    rep.metrics.insert("freeze_ms".into(), freeze as f64);
    rep.metrics
        .insert("freeze_at_s".into(), freeze_at as f64 / 1000.0);
    if let Some(d) = dur {
        rep.metrics.insert("duration_s".into(), d);
    }
    // Recovery of p50/p99: back under max(1.5 × steady, steady + 50 µs) for 1 s.
    let window = (1000 / r.interval_ms.max(1)).max(1) as usize;
    for (label, f) in [
        ("p50", (|s: &Summary| s.p50) as fn(&Summary) -> u64),
        ("p99", |s: &Summary| s.p99),
    ] {
        let Some(st) = steady(&r, ev.start, f) else {
            t.rows.push(vec![
                format!("{label} recovery"),
                "n/a (no steady state before the event)".into(),
            ]);
            continue;
        };
        let thr = (st * 3 / 2).max(st + 50);
        let peak = r
            .intervals
            .iter()
            .filter(|x| x.t >= ev.start && x.all.count > 0)
            .map(|x| f(&x.all))
            .max()
            .unwrap_or(0);
        let rec = recovery(&r, ev.start, thr, window, f);
        t.rows.push(vec![
            format!("{label} back to steady ({})", fmt_us(st)),
            match rec {
                Some(s) => format!("{s:.1} s (peak {})", fmt_us(peak)),
                None => format!("not by the end of the run (peak {})", fmt_us(peak)),
            },
        ]);
        rep.metrics.insert(format!("{label}_steady_us"), st as f64);
        rep.metrics.insert(format!("{label}_peak_us"), peak as f64);
        if let Some(s) = rec {
            rep.metrics.insert(format!("{label}_recovery_s"), s);
        }
    }
    rep.tables.push(t);
    rep.tables.push(cmd_table("Whole run", &r));
    rep.notes.push(
        "freeze = longest span with no completed request after the command; recovery = time from the \
         command until p50/p99 stay under max(1.5 × steady, steady + 50 µs) for 1 s"
            .into(),
    );
    rep.runs.push(NamedRun {
        name: "load".into(),
        result: r,
    });
    Ok(finish(rep))
}

/// Waits until the server runs no background save or log rewrite and has none scheduled
/// (INFO persistence), at most `limit`; returns how long it waited. With the log on, the
/// fills (hundreds of MB of large values) trigger the automatic log rewrite, whose work
/// would otherwise land in the baseline phase and inflate its tail for every server.
fn settle_persistence(target: &Target, limit: Duration) -> Result<Duration, String> {
    const BUSY: [&str; 4] = [
        "aof_rewrite_in_progress",
        "aof_rewrite_scheduled",
        "rdb_bgsave_in_progress",
        "async_loading",
    ];
    let start = std::time::Instant::now();
    let mut conn = target.connect()?;
    let mut idle_since: Option<std::time::Instant> = None;
    loop {
        let reply = conn
            .call_str(&["INFO", "persistence"])
            .map_err(|e| format!("INFO persistence: {e}"))?;
        let info = match reply {
            Reply::Bulk(Some(b)) => resp::parse_info(&String::from_utf8_lossy(&b)),
            other => return Err(format!("unexpected INFO reply {other:?}")),
        };
        let busy = info
            .iter()
            .any(|(k, v)| BUSY.contains(&k.as_str()) && v.as_str() != "0");
        // Idle for a whole second: an automatic rewrite starts from the server's cron,
        // some time after the fill's last write.
        match (busy, idle_since) {
            (true, _) => idle_since = None,
            (false, None) => idle_since = Some(std::time::Instant::now()),
            (false, Some(t)) if t.elapsed() >= Duration::from_secs(1) => {
                return Ok(t.duration_since(start));
            }
            (false, Some(_)) => {}
        }
        if start.elapsed() > limit {
            return Err(format!(
                "the server's background persistence did not end within {} s",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `noise`: seed 003. Small GETs at a rate; then the same with large GETs on other
/// connections.
pub fn noise(a: &NoiseArgs) -> Result<Report, String> {
    let ctx = Ctx::new(&a.conn)?;
    let d = Defaults {
        connections: 32,
        pipeline: 1,
        ratio: "0:1",
        value: ValueSize {
            min: 1024,
            max: 1024,
        },
        keys: 10_000,
        duration: 5.0,
        ..Defaults::default()
    };
    let mut small = group(&a.load, &d)?;
    if small.rate.is_none() {
        small.rate = Some(10_000.0);
    }
    let big_size =
        parse_size(&a.noise_size).ok_or_else(|| format!("bad --noise-size {:?}", a.noise_size))?;
    if big_size > 512 << 20 {
        return Err("--noise-size is at most 512MB".into());
    }
    let noise_cmd = match a.noise_command.to_ascii_lowercase().as_str() {
        "get" => "GET {key}",
        "set" => "SET {key} {value}",
        other => return Err(format!("bad --noise-command {other:?} (get or set)")),
    };
    let mut big = Group::new(vec![noise_cmd.parse()?]);
    big.name = "noise".into();
    big.connections = a.noise_connections.max(1);
    big.threads = big.connections;
    big.keys = a.noise_keys.max(1);
    big.key_prefix = "bigkey:".into();
    big.value = ValueSize {
        min: big_size,
        max: big_size,
    };
    big.rate = Some(a.noise_rate);
    let mut rep = new_report("noise", &ctx);
    if let Some(f) = maybe_fill(&ctx, &a.load, &small, small.keys)? {
        rep.runs.push(f);
    }
    if !a.load.no_fill {
        let f = fill(&ctx, big.keys, &big.key_prefix, big.value, 1)?;
        rep.runs.push(NamedRun {
            name: "fill-noise".into(),
            result: f.result,
        });
    }
    let dur = duration(&a.load, &d)?;
    let settled = settle_persistence(&ctx.target, Duration::from_secs(300))?;
    // The fill's bytes still on their way to the disk (the log's, with `appendonly yes`):
    // their writeback takes CPU and device time from whatever runs next. Flushed here so
    // that the baseline does not pay for the fill (a local server; harmless otherwise).
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    if settled > Duration::from_millis(100) {
        eprintln!(
            "noise: waited {:.1} s for the fill's background persistence (a log rewrite or save) to end",
            settled.as_secs_f64()
        );
    }
    let base = engine::run(&ctx.spec(vec![small.clone()], dur)?)?;
    let noisy = engine::run(&ctx.spec(vec![small.clone(), big.clone()], dur)?)?;
    let label = small
        .commands
        .first()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let mut t = Table {
        title: format!(
            "{} B {label} latency at {:.0}/s, {} connections × pipeline {}; noise: {:.0}/s {} of {} B on {} connections",
            small.value.max,
            small.rate.unwrap_or(0.0),
            small.connections,
            small.pipeline,
            a.noise_rate,
            a.noise_command.to_ascii_uppercase(),
            big_size,
            big.connections
        ),
        headers: ["", "p50", "p90", "p99", "p99.9", "p99.99", "Max"].map(String::from).to_vec(),
        rows: Vec::new(),
    };
    for (name, r) in [("baseline", &base), ("+ noise", &noisy)] {
        // Only the small requests: every label of the main group.
        let s = small_summary(r);
        t.rows.push(vec![
            name.into(),
            fmt_us(s.p50),
            fmt_us(s.p90),
            fmt_us(s.p99),
            fmt_us(s.p999),
            fmt_us(s.p9999),
            fmt_us(s.max),
        ]);
        let key = if name == "baseline" {
            "baseline"
        } else {
            "noise"
        };
        rep.metrics.insert(format!("{key}_p99_us"), s.p99 as f64);
        rep.metrics.insert(format!("{key}_p999_us"), s.p999 as f64);
        rep.metrics.insert(format!("{key}_max_us"), s.max as f64);
    }
    let noise_label = format!("noise:{}", a.noise_command.to_ascii_uppercase());
    if let Some(s) = noisy.totals.cmds.get(&noise_label) {
        rep.notes.push(format!(
            "noise requests: {} done, p50 {}, max {}",
            s.count,
            fmt_us(s.p50),
            fmt_us(s.max)
        ));
    }
    rep.tables.push(t);
    rep.runs.push(NamedRun {
        name: "baseline".into(),
        result: base,
    });
    rep.runs.push(NamedRun {
        name: "noise".into(),
        result: noisy,
    });
    Ok(finish(rep))
}

/// The small requests' whole-run summary (the main group has the unprefixed labels).
fn small_summary(r: &RunResult) -> Summary {
    let labels: Vec<&String> = r.totals.cmds.keys().filter(|k| !k.contains(':')).collect();
    if labels.len() == 1 {
        return r.totals.cmds[labels[0]].clone();
    }
    // Several commands in the main group: the worst of each percentile (a conservative view).
    let mut s = Summary::default();
    for l in labels {
        let x = &r.totals.cmds[l];
        s.count += x.count;
        s.p50 = s.p50.max(x.p50);
        s.p90 = s.p90.max(x.p90);
        s.p99 = s.p99.max(x.p99);
        s.p999 = s.p999.max(x.p999);
        s.p9999 = s.p9999.max(x.p9999);
        s.max = s.max.max(x.max);
    }
    s
}

/// `tiering`: Zipf GETs over a data set `oversize` × maxmemory (or --keys on a server
/// without maxmemory).
pub fn tiering(a: &TieringArgs) -> Result<Report, String> {
    let ctx = Ctx::new(&a.conn)?;
    let maxmem: u64 = config_get(&ctx, "maxmemory")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let value = a.load.value_size.unwrap_or(ValueSize {
        min: 1000,
        max: 1000,
    });
    let mut rep = new_report("tiering", &ctx);
    let default_keys = if maxmem > 0 {
        ((maxmem as f64 * a.oversize.max(0.0)) / (value.max as f64 + 80.0)) as u64
    } else {
        rep.notes.push(
            "server has no maxmemory: the data set is not larger than memory (plain server run)"
                .into(),
        );
        100_000
    };
    let d = Defaults {
        ratio: "0:1",
        dist: KeyDist::Zipf(0.99),
        value,
        keys: default_keys.max(1),
        ..Defaults::default()
    };
    let g = group(&a.load, &d)?;
    if let Some(f) = maybe_fill(&ctx, &a.load, &g, g.keys)? {
        rep.runs.push(f);
    }
    let before = ctx.info().unwrap_or_default();
    let mut spec = ctx.spec(vec![g.clone()], duration(&a.load, &d)?)?;
    for f in [
        "used_memory",
        "evicted_keys",
        "keyspace_hits",
        "keyspace_misses",
    ] {
        if !spec.info_fields.iter().any(|x| x == f) {
            spec.info_fields.push(f.into());
        }
    }
    let r = engine::run(&spec)?;
    let after = ctx.info().unwrap_or_default();
    let delta = |f: &str| -> f64 {
        let g = |m: &BTreeMap<String, String>| {
            m.get(f).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        };
        g(&after) - g(&before)
    };
    let (hits, misses) = (delta("keyspace_hits"), delta("keyspace_misses"));
    let hit = if hits + misses > 0.0 {
        hits / (hits + misses) * 100.0
    } else {
        0.0
    };
    let s = &r.totals.all;
    let mut t = Table {
        title: format!(
            "Zipf({}) reads over {} keys × {} B, maxmemory {}",
            match g.dist {
                KeyDist::Zipf(a) => a,
                _ => 0.0,
            },
            g.keys,
            value.max,
            maxmem
        ),
        headers: [
            "QPS",
            "p50",
            "p99",
            "p99.9",
            "max",
            "hit rate",
            "used_memory",
            "evicted_keys",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    t.rows.push(vec![
        format!("{:.0}", s.rate),
        fmt_us(s.p50),
        fmt_us(s.p99),
        fmt_us(s.p999),
        fmt_us(s.max),
        format!("{hit:.1} %"),
        after.get("used_memory").cloned().unwrap_or_default(),
        after.get("evicted_keys").cloned().unwrap_or_default(),
    ]);
    rep.metrics.insert("qps".into(), s.rate);
    rep.metrics.insert("hit_rate".into(), hit / 100.0);
    rep.tables.push(t);
    rep.runs.push(NamedRun {
        name: "load".into(),
        result: r,
    });
    Ok(finish(rep))
}
