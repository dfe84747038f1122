//! `replica-vs`: a replica joins a loaded primary, cairn and Redis side by side (issue #18
//! point 8). Per configuration, each server started here on a free loopback port with its
//! own directory: the primary is filled with N keys × D bytes, an empty replica (same
//! binary) is started, a bounded open-loop SET load and a 1 ms PING probe run on the
//! primary, and at `--at` the replica is told `REPLICAOF` the primary; the time until its
//! `master_link_status:up`, the primary's extra memory and probe latency around the sync,
//! and the replication bytes are reported. Once the load stops and the replica caught up,
//! it is verified: same DBSIZE and DEBUG DIGEST as the primary.

use crate::cli::{ConnArgs, ReplicaVsArgs};
use crate::compare::{self, pct, ProbeSamples, Watch};
use crate::engine::{self, EventSpec, Group, RunResult, Target};
use crate::keys::{KeyDist, ValueSize};
use crate::report::{NamedRun, Report, Table};
use crate::resp::{self, Reply};
use crate::scenario::{self, Ctx};
use crate::stats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The configurations, in the order the table shows them.
const CONFIGS: [&str; 4] = ["cairn", "cairn-rdb", "redis-diskless", "redis-disk"];

/// How long the replica may take to apply the rest of the stream once the load stopped.
const CATCH_UP: Duration = Duration::from_secs(120);

/// The targets for cairn: time to online at most this share of the faster Redis
/// configuration's; the primary's extra memory at most this plus `repl-backlog-size`;
/// the probe's slowest PING in the sync window at most this.
const TARGET_ONLINE_RATIO: f64 = 1.0 / 3.0;
const TARGET_EXTRA_BYTES: f64 = 64.0 * 1024.0 * 1024.0;
const TARGET_PROBE_MAX_US: u64 = 5_000;

/// What one configuration measured.
#[derive(Default)]
struct Outcome {
    name: String,
    online_s: Option<f64>,
    extra_pss_bytes: Option<f64>,
    extra_rss_bytes: Option<f64>,
    probe: ProbeFigures,
    freeze_ms: Option<u64>,
    repl_output_bytes: Option<u64>,
    replica_input_bytes: Option<u64>,
    backlog_bytes: Option<u64>,
    primary_keys: Option<u64>,
    replica_keys: Option<u64>,
    digest_equal: Option<bool>,
    sync_full: Option<u64>,
    realtime_probe: bool,
    slowest: Vec<(String, u64)>,
    log: Vec<String>,
    problems: Vec<String>,
    run: Option<RunResult>,
    version: String,
}

#[derive(Default)]
struct ProbeFigures {
    sync_max_us: u64,
    sync_p99_us: u64,
    sync_p999_us: u64,
    before_max_us: u64,
    before_p99_us: u64,
    before_p999_us: u64,
    sync_samples: usize,
}

impl ProbeFigures {
    fn from(mut p: ProbeSamples) -> ProbeFigures {
        ProbeFigures {
            sync_max_us: p.during_save_us.iter().copied().max().unwrap_or(0),
            sync_p99_us: pct(&mut p.during_save_us, 0.99),
            sync_p999_us: pct(&mut p.during_save_us, 0.999),
            before_max_us: p.before_save_us.iter().copied().max().unwrap_or(0),
            before_p99_us: pct(&mut p.before_save_us, 0.99),
            before_p999_us: pct(&mut p.before_save_us, 0.999),
            sync_samples: p.during_save_us.len(),
        }
    }
}

/// The binary and the options of a configuration's primary (the replica gets the binary
/// and the common options only).
fn config_of(a: &ReplicaVsArgs, name: &str) -> Result<(PathBuf, Vec<String>, bool), String> {
    let cairn = match &a.cairn {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("cairn-server"),
    };
    let redis = a
        .redis
        .clone()
        .unwrap_or_else(|| PathBuf::from("redis-server"));
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Ok(match name {
        "cairn" => (cairn, v(&["--repl-image-sync", "yes"]), true),
        "cairn-rdb" => (cairn, v(&["--repl-image-sync", "no"]), true),
        "redis-diskless" => (
            redis,
            v(&[
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            ]),
            false,
        ),
        "redis-disk" => (redis, v(&["--repl-diskless-sync", "no"]), false),
        other => {
            return Err(format!(
                "unknown configuration {other:?} (known: {})",
                CONFIGS.join(", ")
            ))
        }
    })
}

fn fresh_dir(tag: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("cairn-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    Ok(dir)
}

fn call(port: u16, args: &[&str]) -> Result<Reply, String> {
    let mut c = compare::connect(port).ok_or_else(|| format!("cannot connect to port {port}"))?;
    c.call_str(args).map_err(|e| e.to_string())
}

/// [`call`] for a command whose reply takes minutes on a large dataset.
fn call_slow(port: u16, args: &[&str]) -> Result<Reply, String> {
    let mut c = compare::connect_with_timeout(port, Duration::from_secs(600))
        .ok_or_else(|| format!("cannot connect to port {port}"))?;
    c.call_str(args).map_err(|e| e.to_string())
}

fn int_of(port: u16, args: &[&str]) -> Option<u64> {
    match call(port, args).ok()? {
        Reply::Int(n) => u64::try_from(n).ok(),
        _ => None,
    }
}

fn field(m: &BTreeMap<String, String>, k: &str) -> Option<u64> {
    m.get(k).and_then(|v| v.parse().ok())
}

/// Log lines about the sync from a server's log, for the notes.
fn sync_log(path: &Path, who: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            (l.contains("sync") || l.contains("replica") || l.contains("snapshot"))
                && !l.contains("overcommit")
                && !l.contains("enabled (user request")
        })
        .take(12)
        .map(|l| format!("{who} log: {}", l.trim()))
        .collect()
}

fn run_config(a: &ReplicaVsArgs, name: &str) -> Result<Outcome, String> {
    let (bin, primary_opts, is_cairn) = config_of(a, name)?;
    let mut common: Vec<String> = [
        "--save",
        "",
        "--appendonly",
        "no",
        "--enable-debug-command",
        "yes",
    ]
    .map(String::from)
    .to_vec();
    if is_cairn {
        common.extend_from_slice(&a.cairn_args);
    }
    let pdir = fresh_dir(&format!("{name}-primary"))?;
    let rdir = fresh_dir(&format!("{name}-replica"))?;
    let mut out = Outcome {
        name: name.into(),
        ..Outcome::default()
    };
    let result = run_config_in(a, &bin, &common, &primary_opts, &pdir, &rdir, &mut out);
    out.log.extend(sync_log(
        &pdir.join("server.log"),
        &format!("{name} primary"),
    ));
    out.log.extend(sync_log(
        &rdir.join("server.log"),
        &format!("{name} replica"),
    ));
    let _ = std::fs::remove_dir_all(&pdir);
    let _ = std::fs::remove_dir_all(&rdir);
    result.map(|()| out)
}

fn run_config_in(
    a: &ReplicaVsArgs,
    bin: &Path,
    common: &[String],
    primary_opts: &[String],
    pdir: &Path,
    rdir: &Path,
    out: &mut Outcome,
) -> Result<(), String> {
    let name = out.name.clone();
    let mut pargs = common.to_vec();
    pargs.extend_from_slice(primary_opts);
    eprintln!("== {name}: starting the primary ({})", bin.display());
    let (primary, _) = compare::start(bin, &pargs, pdir, "server.log")?;
    let limit = format!("replica {}", a.replica_output_limit);
    match call(
        primary.port,
        &["CONFIG", "SET", "client-output-buffer-limit", &limit],
    )? {
        Reply::Simple(_) => {}
        r => {
            return Err(format!(
                "{name}: CONFIG SET client-output-buffer-limit: {r:?}"
            ))
        }
    }
    let conn = ConnArgs {
        host: "127.0.0.1".into(),
        port: primary.port,
        password: None,
        timeout: 30.0,
        pid: Some(primary.child.id()),
        interval_ms: a.interval_ms,
        seed: 1,
        quiet: true,
        info: Vec::new(),
        max_time: 7200.0,
        value_entropy: a.value_entropy,
        distinct_values: false,
    };
    let ctx = Ctx::new(&conn)?;
    let value = ValueSize {
        min: a.value_size as usize,
        max: a.value_size as usize,
    };
    scenario::fill(&ctx, a.keys, "key:", value, 64)?;
    eprintln!("== {name}: starting the replica");
    let (replica, _) = compare::start(bin, common, rdir, "server.log")?;
    if a.replica_nice != 0 {
        renice_threads(replica.child.id(), a.replica_nice)?;
    }
    let replica_target = Target {
        addr: resp::resolve("127.0.0.1", replica.port).map_err(|e| e.to_string())?,
        password: None,
        timeout: Duration::from_secs(30),
    };

    let mut g = Group::new(vec!["SET {key} {value}".parse()?]);
    g.connections = a.connections;
    g.threads = 2;
    g.pipeline = 1;
    g.keys = a.keys.max(1);
    g.dist = KeyDist::Uniform;
    g.value = value;
    g.rate = Some(a.rate);
    let at = Duration::from_secs_f64(a.at.max(0.0));
    let after = Duration::from_secs_f64(a.after.max(0.0));
    let mut spec = ctx.spec(vec![g], Some(at + after))?;
    spec.events.push(EventSpec {
        at,
        command: vec![
            "REPLICAOF".into(),
            "127.0.0.1".into(),
            primary.port.to_string(),
        ],
        wait_field: None,
        wait_equals: Some(("master_link_status".into(), "up".into())),
        target: Some(replica_target),
        timeout: Duration::from_secs_f64(a.online_timeout.max(1.0)),
    });
    spec.after_events = after;

    // The probe: PING every 1 ms on the primary; its window is while the replica says it
    // follows a primary whose link is not up yet (0.5 s before that is first seen, to 1 s
    // after it was last seen).
    let stop = Arc::new(AtomicBool::new(false));
    let probe = compare::probe(
        primary.port,
        Duration::from_millis(1),
        stop.clone(),
        Some(Watch {
            port: replica.port,
            section: "replication",
            busy: |t| t.contains("role:slave") && !t.contains("master_link_status:up"),
        }),
    );
    let r = engine::run(&spec);
    stop.store(true, Ordering::Relaxed);
    let probed = probe.join().unwrap_or_default();
    let r = r?;
    out.realtime_probe = probed.realtime;
    out.slowest = probed.slowest_in_save.clone();
    out.probe = ProbeFigures::from(probed);
    for p in &r.problems {
        out.problems.push(format!("load: {p}"));
    }

    match r.events.first() {
        None => out
            .problems
            .push("REPLICAOF was never sent (the run ended first)".into()),
        Some(ev) => {
            if !ev.reply.starts_with("OK") {
                out.problems
                    .push(format!("REPLICAOF answered {:?}", ev.reply));
            }
            match ev.end {
                Some(end) => out.online_s = Some(end - ev.start),
                None => out
                    .problems
                    .push("the replica never reported master_link_status:up".into()),
            }
            // Memory: baseline = median before REPLICAOF; peak = max until online (plus
            // one sample interval).
            let win_end = ev.end.unwrap_or(r.elapsed) + r.interval_ms as f64 / 1000.0;
            let extra = |get: &dyn Fn(&engine::Sample) -> Option<u64>| -> Option<f64> {
                let base = scenario::median(
                    r.samples
                        .iter()
                        .filter(|s| s.t < ev.start)
                        .filter_map(|s| get(s).map(|v| v as f64))
                        .collect(),
                )?;
                let peak = r
                    .samples
                    .iter()
                    .filter(|s| s.t >= ev.start && s.t <= win_end)
                    .filter_map(get)
                    .max()?;
                Some((peak as f64 - base).max(0.0) * 1024.0)
            };
            out.extra_rss_bytes = extra(&|s| s.rss_kb);
            out.extra_pss_bytes = extra(&|s| s.tree_pss_kb);
            let from_ms = (ev.start * 1000.0) as usize;
            let (freeze, _) = stats::longest_gap(&r.per_ms, from_ms, (r.elapsed * 1000.0) as usize);
            out.freeze_ms = Some(freeze);
        }
    }

    // The load stopped: wait for the replica to apply the rest, then compare.
    let t0 = Instant::now();
    let caught_up = loop {
        let p = compare::info(primary.port);
        let q = compare::info(replica.port);
        let up = q.get("master_link_status").map(String::as_str) == Some("up");
        let (po, ro) = (
            field(&p, "master_repl_offset"),
            field(&q, "master_repl_offset"),
        );
        if up && po.is_some() && po == ro {
            break true;
        }
        if t0.elapsed() > CATCH_UP || out.online_s.is_none() {
            out.problems.push(format!(
                "the replica did not catch up within {CATCH_UP:?}: link {:?}, offsets primary {po:?} / replica {ro:?}",
                q.get("master_link_status")
            ));
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let pinfo = compare::info(primary.port);
    let rinfo = compare::info(replica.port);
    out.repl_output_bytes = field(&pinfo, "total_net_repl_output_bytes");
    out.replica_input_bytes = field(&rinfo, "total_net_repl_input_bytes");
    out.backlog_bytes = field(&pinfo, "repl_backlog_size");
    out.sync_full = field(&pinfo, "sync_full");
    out.version = pinfo
        .get("cairn_version")
        .or_else(|| pinfo.get("redis_version"))
        .cloned()
        .unwrap_or_default();
    if caught_up {
        out.primary_keys = int_of(primary.port, &["DBSIZE"]);
        out.replica_keys = int_of(replica.port, &["DBSIZE"]);
        if out.primary_keys != out.replica_keys {
            out.problems.push(format!(
                "DBSIZE differs: primary {:?}, replica {:?}",
                out.primary_keys, out.replica_keys
            ));
        }
        // DEBUG DIGEST hashes every key and value: at 8M keys Redis takes longer than the
        // usual 30 s read timeout (the read then fails with EAGAIN).
        let digest = |port: u16| match call_slow(port, &["DEBUG", "DIGEST"]) {
            Ok(Reply::Simple(s)) => Ok(s),
            Ok(Reply::Bulk(Some(b))) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Ok(r) => Err(format!("DEBUG DIGEST answered {r:?}")),
            Err(e) => Err(e),
        };
        match (digest(primary.port), digest(replica.port)) {
            (Ok(x), Ok(y)) => {
                out.digest_equal = Some(x == y);
                if x != y {
                    out.problems
                        .push(format!("DEBUG DIGEST differs: primary {x}, replica {y}"));
                }
            }
            (Err(e), _) | (_, Err(e)) => out.problems.push(e),
        }
    }
    drop(replica);
    drop(primary);
    let mut run = r;
    run.problems.clear();
    out.run = Some(run);
    Ok(())
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

pub fn replica_vs(a: &ReplicaVsArgs) -> Result<Report, String> {
    if a.configs.is_empty() {
        return Err("--configs names no configuration".into());
    }
    for c in &a.configs {
        config_of(a, c)?;
    }
    if a.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    let mut outs = Vec::new();
    for c in &a.configs {
        outs.push(run_config(a, c)?);
    }
    let fastest_redis = outs
        .iter()
        .filter(|o| o.name.starts_with("redis"))
        .filter_map(|o| o.online_s)
        .min_by(|x, y| x.total_cmp(y));

    let mut headers = vec![String::new()];
    headers.extend(outs.iter().map(|o| o.name.clone()));
    let mut t = Table {
        title: format!(
            "A replica joins under {} SET/s: {} keys × {} B",
            a.rate, a.keys, a.value_size
        ),
        headers,
        rows: Vec::new(),
    };
    let mut row = |label: &str, f: &dyn Fn(&Outcome) -> String| {
        let mut r = vec![label.to_string()];
        r.extend(outs.iter().map(f));
        t.rows.push(r);
    };
    let na = || "n/a".to_string();
    row(
        "time to online (REPLICAOF → master_link_status:up)",
        &|o| o.online_s.map_or_else(na, |s| format!("{s:.2} s")),
    );
    row(
        "time to online / the faster Redis configuration's",
        &|o| match (o.name.starts_with("cairn"), o.online_s, fastest_redis) {
            (true, Some(x), Some(y)) if y > 0.0 => format!("{:.2}×", x / y),
            _ => String::new(),
        },
    );
    row(
        "primary extra memory (PSS server + children while a child exists, else RSS; peak − before)",
        &|o| o.extra_pss_bytes.map_or_else(na, mb),
    );
    row("primary extra memory (RSS of the server)", &|o| {
        o.extra_rss_bytes.map_or_else(na, mb)
    });
    row("probe PING max, sync window", &|o| ms(o.probe.sync_max_us));
    row("probe PING p99, sync window", &|o| ms(o.probe.sync_p99_us));
    row("probe PING p99.9, sync window", &|o| {
        ms(o.probe.sync_p999_us)
    });
    row("probe PING max before the window (same load)", &|o| {
        ms(o.probe.before_max_us)
    });
    row("probe PING p99 before the window", &|o| {
        ms(o.probe.before_p99_us)
    });
    row("probe PING p99.9 before the window", &|o| {
        ms(o.probe.before_p999_us)
    });
    row(
        "load freeze after REPLICAOF (longest span with no reply)",
        &|o| o.freeze_ms.map_or_else(na, |v| format!("{v} ms")),
    );
    row(
        "bytes sent to replicas (primary total_net_repl_output_bytes)",
        &|o| o.repl_output_bytes.map_or_else(na, |v| mb(v as f64)),
    );
    row(
        "bytes read from the primary (replica total_net_repl_input_bytes)",
        &|o| o.replica_input_bytes.map_or_else(na, |v| mb(v as f64)),
    );
    row("full syncs (primary sync_full)", &|o| {
        o.sync_full.map_or_else(na, |v| v.to_string())
    });
    row(
        "verified: DBSIZE primary / replica",
        &|o| match (o.primary_keys, o.replica_keys) {
            (Some(p), Some(r)) => format!("{p} / {r}"),
            _ => "not checked".into(),
        },
    );
    row("verified: DEBUG DIGEST", &|o| match o.digest_equal {
        Some(true) => "equal".into(),
        Some(false) => "DIFFERS".into(),
        None => "not checked".into(),
    });

    let mut rep = Report {
        scenario: "replica-vs".into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        ..Default::default()
    };
    rep.tables.push(t);
    rep.notes.push(format!(
        "targets (issue #18): time to online ≤ {TARGET_ONLINE_RATIO:.2}× the faster Redis \
         configuration's; primary extra memory ≤ 64 MiB + repl-backlog-size; probe max ≤ 5 ms"
    ));
    for o in outs.iter().filter(|o| o.name.starts_with("cairn")) {
        let mut verdict = Vec::new();
        if let (Some(x), Some(y)) = (o.online_s, fastest_redis) {
            let ok = y > 0.0 && x / y <= TARGET_ONLINE_RATIO;
            verdict.push(format!(
                "time ratio {:.2} {}",
                x / y.max(1e-9),
                if ok { "met" } else { "NOT met" }
            ));
        }
        if let Some(extra) = o.extra_pss_bytes {
            let bound = TARGET_EXTRA_BYTES + o.backlog_bytes.unwrap_or(0) as f64;
            verdict.push(format!(
                "extra memory {} vs {} {}",
                mb(extra),
                mb(bound),
                if extra <= bound { "met" } else { "NOT met" }
            ));
        }
        verdict.push(format!(
            "probe max {} {}",
            ms(o.probe.sync_max_us),
            if o.probe.sync_max_us <= TARGET_PROBE_MAX_US {
                "met"
            } else {
                "NOT met"
            }
        ));
        rep.notes.push(format!(
            "{} against the targets: {}",
            o.name,
            verdict.join("; ")
        ));
    }
    rep.notes.push(format!(
        "each configuration: a fresh primary (--save \"\" --appendonly no, client-output-buffer-limit \
         replica {}) filled with {} keys, an empty replica of the same binary, {} SET/s open loop on {} \
         connections and a PING every 1 ms on the primary; REPLICAOF sent to the replica at {:.1} s, \
         master_link_status polled every {} ms; the load runs {:.1} s more; then the replica must \
         reach the primary's master_repl_offset and match DBSIZE and DEBUG DIGEST",
        a.replica_output_limit, a.keys, a.rate, a.connections, a.at, a.interval_ms, a.after
    ));
    if a.replica_nice != 0 {
        rep.notes.push(format!(
            "every replica's threads run at nice {} (threads it starts later inherit it): \
             primary and replica share this machine's CPUs",
            a.replica_nice
        ));
    }
    rep.notes.push(
        "sync window = 0.5 s before the replica's INFO first shows role:slave with its link not \
         up, to 1 s after it last did (INFO replication of the replica polled every 20 ms)"
            .into(),
    );
    for o in &outs {
        if !o.slowest.is_empty() {
            let list: Vec<String> = o
                .slowest
                .iter()
                .map(|(at, us)| format!("{at} {}", ms(*us)))
                .collect();
            rep.notes.push(format!(
                "{} probe: slowest PINGs in the sync window (sent at, UTC): {}",
                o.name,
                list.join(", ")
            ));
        }
        if !o.realtime_probe {
            rep.notes.push(format!(
                "{} probe thread at normal priority (SCHED_FIFO refused)",
                o.name
            ));
        }
        if o.probe.sync_samples == 0 && o.online_s.is_some() {
            rep.notes.push(format!(
                "{}: the probe saw no sample in the sync window",
                o.name
            ));
        }
        rep.notes.extend(o.log.iter().cloned());
    }
    if let (Some(c), Some(y)) = (
        outs.iter()
            .find(|o| o.name == "cairn")
            .and_then(|o| o.online_s),
        fastest_redis,
    ) {
        if y > 0.0 {
            rep.metrics.insert("cairn_online_ratio".into(), c / y);
        }
    }
    for o in &mut outs {
        let n = &o.name;
        let mut put = |k: &str, v: Option<f64>| {
            if let Some(v) = v {
                rep.metrics.insert(format!("{n}_{k}"), v);
            }
        };
        put("time_to_online_s", o.online_s);
        put("extra_pss_bytes", o.extra_pss_bytes);
        put("extra_rss_bytes", o.extra_rss_bytes);
        put("probe_sync_max_us", Some(o.probe.sync_max_us as f64));
        put("probe_sync_p99_us", Some(o.probe.sync_p99_us as f64));
        put("probe_sync_p999_us", Some(o.probe.sync_p999_us as f64));
        put("probe_before_max_us", Some(o.probe.before_max_us as f64));
        put("probe_before_p99_us", Some(o.probe.before_p99_us as f64));
        put("probe_before_p999_us", Some(o.probe.before_p999_us as f64));
        put("freeze_ms", o.freeze_ms.map(|v| v as f64));
        put("repl_output_bytes", o.repl_output_bytes.map(|v| v as f64));
        put(
            "replica_input_bytes",
            o.replica_input_bytes.map(|v| v as f64),
        );
        put(
            "digest_equal",
            o.digest_equal.map(|b| f64::from(u8::from(b))),
        );
        for p in &o.problems {
            rep.problems.push(format!("{n}: {p}"));
        }
        rep.server.insert(format!("{n}_version"), o.version.clone());
        if let Some(run) = o.run.take() {
            rep.runs.push(NamedRun {
                name: format!("{n}-load"),
                result: run,
            });
        }
    }
    Ok(rep)
}

/// Sets the nice value of every thread of process `pid` (a thread it starts later inherits
/// its starter's).
fn renice_threads(pid: u32, nice: i32) -> Result<(), String> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
    for t in tasks.flatten() {
        let Ok(tid) = t.file_name().to_string_lossy().parse::<libc::id_t>() else {
            continue;
        };
        // SAFETY: a plain syscall on a thread id; no memory is passed.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
            return Err(format!(
                "setpriority({tid}, {nice}): {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
