//! `aof-seed`: seed 001's AOF benchmark as the seed ran it. Keys preloaded (every GET hits),
//! then SET:GET 1:3 with 1000 B incompressible values on `-c` connections, each driven on its
//! own by `evloop.rs` (one request outstanding, closed loop). Prints the per-command table and
//! one `aof-seed-json {...}` line for scripts (`bench/aof_seed.py`); the same numbers go into
//! `aof-seed.json`'s `metrics`.

use crate::cli::AofSeedArgs;
use crate::evloop::{self, EvSpec};
use crate::keys::{KeyDist, ValueSize};
use crate::report::{self, Report, Table};
use crate::resp::Reply;
use crate::scenario::{fill, Ctx};
use crate::stats::fmt_us;
use crate::values::{ValueEntropy, ValueGen};
use std::collections::BTreeMap;
use std::time::Duration;

/// INFO fields (cairn's persistence section) copied into the metrics when the server has them:
/// the fsync latency the sweep's model uses.
const FSYNC_FIELDS: [&str; 2] = ["aof_fsync_us_p50", "aof_fsync_us_p99"];

fn parse_ratio(r: &str) -> Result<(u32, u32), String> {
    let (s, g) = r
        .split_once(':')
        .ok_or_else(|| format!("ratio {r:?} is not SET:GET"))?;
    let p = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("bad ratio {r:?}"))
    };
    let (s, g) = (p(s)?, p(g)?);
    if s.checked_add(g).is_none_or(|t| t == 0) {
        return Err(format!("ratio {r:?} has no commands"));
    }
    Ok((s, g))
}

fn secs(s: f64, what: &str) -> Result<Duration, String> {
    if !(s.is_finite() && s > 0.0 && s < 1e7) {
        return Err(format!(
            "{what} must be a positive number of seconds, got {s}"
        ));
    }
    Ok(Duration::from_secs_f64(s))
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

fn info_u64(info: &BTreeMap<String, String>, field: &str) -> Option<u64> {
    info.get(field).and_then(|v| v.parse().ok())
}

pub fn run(a: &AofSeedArgs) -> Result<Report, String> {
    let (set_weight, get_weight) = parse_ratio(&a.ratio)?;
    if a.value_size == 0 || a.value_size > 512 * 1024 * 1024 {
        return Err(format!(
            "--value-size must be 1..=512MB, got {}",
            a.value_size
        ));
    }
    let duration = match (a.duration, a.requests) {
        (Some(d), _) => Some(secs(d, "--duration")?),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    };
    let ctx = Ctx::new(&a.conn)?;
    let entropy = if a.conn.distinct_values {
        ValueEntropy::Random
    } else {
        a.conn.value_entropy
    };
    let value = ValueSize {
        min: a.value_size,
        max: a.value_size,
    };
    if !a.no_fill {
        fill(&ctx, a.keys, &a.key_prefix, value, a.fill_pipeline)?;
    }
    let info_before = ctx.info().unwrap_or_default();
    let setup = match info_before.get("aof_enabled").map(String::as_str) {
        Some("1") => format!(
            "AOF ({})",
            config_get(&ctx, "appendfsync").unwrap_or_else(|| "?".into())
        ),
        Some(_) => "AOF disabled".into(),
        None => "server".into(),
    };
    eprintln!("values: {}", entropy.describe());
    let spec = EvSpec {
        addr: ctx.target.addr,
        password: ctx.target.password.clone(),
        timeout: ctx.target.timeout,
        connections: a.connections,
        threads: a.threads,
        keys: a.keys,
        dist: KeyDist::Uniform,
        nil_is_miss: false,
        set_after_miss: false,
        key_prefix: a.key_prefix.clone(),
        value_len: a.value_size,
        set_weight,
        get_weight,
        duration,
        requests: a.requests,
        warmup: match a.warmup {
            0.0 => Duration::ZERO,
            w => secs(w, "--warmup")?,
        },
        seed: a.conn.seed,
        values: ValueGen::new(entropy, a.conn.seed, a.value_size),
        max_time: secs(a.conn.max_time, "--max-time")?,
    };
    let r = evloop::run(&spec)?;
    let info_after = ctx.info().unwrap_or_default();

    let mut rep = Report {
        scenario: "aof-seed".into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        server: ctx.server.clone(),
        ..Default::default()
    };
    let mut t = Table {
        title: format!(
            "AOF seed workload: SET:GET {}, {} keys preloaded, {} B values, {} connections driven independently",
            a.ratio, a.keys, a.value_size, a.connections
        ),
        headers: [
            "Setup", "Op", "QPS", "p50", "p99", "p99.9", "max", "errors",
        ]
        .map(String::from)
        .to_vec(),
        rows: Vec::new(),
    };
    let m = &mut rep.metrics;
    for (op, s) in [
        ("GET", &r.ops["GET"]),
        ("SET", &r.ops["SET"]),
        ("all", &r.all),
    ] {
        t.rows.push(vec![
            setup.clone(),
            op.to_string(),
            format!("{:.0}", s.rate),
            fmt_us(s.p50),
            fmt_us(s.p99),
            fmt_us(s.p999),
            fmt_us(s.max),
            s.errors.to_string(),
        ]);
        let p = op.to_lowercase();
        m.insert(format!("{p}_qps"), s.rate);
        m.insert(format!("{p}_count"), s.count as f64);
        m.insert(format!("{p}_errors"), s.errors as f64);
        m.insert(format!("{p}_mean_us"), s.mean);
        m.insert(format!("{p}_p50_us"), s.p50 as f64);
        m.insert(format!("{p}_p99_us"), s.p99 as f64);
        m.insert(format!("{p}_p999_us"), s.p999 as f64);
    }
    m.insert("connections".into(), a.connections as f64);
    m.insert("elapsed_s".into(), r.elapsed_s);
    if let (Some(b), Some(e)) = (
        info_u64(&info_before, "aof_fsyncs"),
        info_u64(&info_after, "aof_fsyncs"),
    ) {
        m.insert("server_aof_fsyncs".into(), e.saturating_sub(b) as f64);
    }
    for f in FSYNC_FIELDS {
        if let Some(v) = info_u64(&info_after, f) {
            m.insert(format!("server_{f}"), v as f64);
        }
    }
    rep.tables.push(t);
    rep.problems = r.problems.clone();
    let json = serde_json::to_string(&rep.metrics).map_err(|e| e.to_string())?;
    report::out(&format!("aof-seed-json {json}"));
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios() {
        assert_eq!(parse_ratio("1:3"), Ok((1, 3)));
        assert_eq!(parse_ratio(" 0 : 1 "), Ok((0, 1)));
        for bad in ["0:0", "1", "a:1", "1:-1", "4294967295:1"] {
            assert!(parse_ratio(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert!(secs(0.5, "x").is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e8] {
            assert!(secs(bad, "x").is_err(), "{bad}");
        }
    }
}
