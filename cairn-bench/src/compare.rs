//! `snapshot-vs`: the whole snapshot comparison of issue #6 in one run. For cairn-server
//! and redis-server in turn (each started here on a free loopback port with its own
//! directory): fill N keys × 500 B, a bounded background SET load (open loop) plus a probe
//! connection sending PING every millisecond, BGSAVE at `--at`, polling until it ends;
//! then the server is killed and restarted on the same directory and the time until it
//! answers PING (not `-LOADING`) is measured. One table puts both side by side.

use crate::cli::{ConnArgs, LoadArgs, SnapshotArgs, SnapshotVsArgs};
use crate::keys::{KeyDist, ValueSize};
use crate::report::{NamedRun, Report, Table};
use crate::resp::{self, Conn, Reply};
use crate::scenario;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server process this run started (killed on drop).
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

pub(crate) fn connect(port: u16) -> Option<Conn> {
    connect_with_timeout(port, Duration::from_secs(30))
}

/// [`connect`] with `timeout` on every read and write (a reply that takes minutes).
pub(crate) fn connect_with_timeout(port: u16, timeout: Duration) -> Option<Conn> {
    let addr = resp::resolve("127.0.0.1", port).ok()?;
    Conn::connect(addr, None, timeout).ok()
}

/// Starts `bin` with `args` on a free port in `dir`; returns once it answers PING with
/// PONG (so a restart's time includes loading the image), and how long that took.
pub(crate) fn start(
    bin: &Path,
    args: &[String],
    dir: &Path,
    log: &str,
) -> Result<(Server, f64), String> {
    let port = free_port()?;
    let t0 = Instant::now();
    let logf = std::fs::File::create(dir.join(log)).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(logf.try_clone().map_err(|e| e.to_string())?)
        .stderr(logf)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let mut srv = Server { child, port };
    loop {
        if let Some(mut c) = connect(port) {
            if let Ok(Reply::Simple(s)) = c.call_str(&["PING"]) {
                if s == "PONG" {
                    return Ok((srv, t0.elapsed().as_secs_f64()));
                }
            }
        }
        if let Ok(Some(st)) = srv.child.try_wait() {
            return Err(format!(
                "{} exited at startup ({st}); see {}",
                bin.display(),
                dir.join(log).display()
            ));
        }
        if t0.elapsed() > Duration::from_secs(3600) {
            return Err(format!("{} never became ready", bin.display()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub(crate) fn info(port: u16) -> BTreeMap<String, String> {
    let Some(mut c) = connect(port) else {
        return BTreeMap::new();
    };
    match c.call_str(&["INFO", "everything"]) {
        Ok(Reply::Bulk(Some(b))) => resp::parse_info(&String::from_utf8_lossy(&b))
            .into_iter()
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Probe samples: every PING round trip, and those taken while a BGSAVE ran, told apart
/// by polling `rdb_bgsave_in_progress` (the window opens [`BEFORE_SAVE`] before the first
/// poll that saw it, so a fork's stall at the start counts, and closes [`AFTER_SAVE`] after
/// the last).
#[derive(Default)]
pub(crate) struct ProbeSamples {
    pub(crate) all_us: Vec<u64>,
    pub(crate) during_save_us: Vec<u64>,
    /// Samples before the first BGSAVE window opened: the same load without a snapshot,
    /// i.e. the latency floor of the machine and the server under this load.
    pub(crate) before_save_us: Vec<u64>,
    /// The slowest samples in a BGSAVE window with their wall-clock time (UTC
    /// `HH:MM:SS.mmm`, as in the server's log), to set against its snapshot passes.
    pub(crate) slowest_in_save: Vec<(String, u64)>,
    /// Whether the probe thread ran at real-time priority (see [`probe_realtime`]).
    pub(crate) realtime: bool,
}

/// Puts the calling (probe) thread at `SCHED_FIFO` priority 1 where permitted.
///
/// Why: the probe measures the server, but on a small machine its own thread shares the
/// CPUs with the load's client threads, and at normal priority it waited 1–4 ms for a CPU
/// after its reply had arrived (`perf sched timehist`: the probe's "sch delay"), with or
/// without a snapshot, for either server. At real-time priority it runs as soon as its
/// reply is in; it sends one PING a millisecond, so it takes nothing from the others.
fn probe_realtime() -> bool {
    let p = libc::sched_param { sched_priority: 1 };
    // SAFETY: changes the calling thread's scheduling policy only.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

/// How many of the slowest in-window samples the notes list.
const SLOWEST_LISTED: usize = 8;

/// `HH:MM:SS.mmm` (UTC) of a wall-clock time.
fn clock_ms(t: std::time::SystemTime) -> String {
    let ms = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        ms % 1000
    )
}

/// How long before the first poll that saw a BGSAVE its window opens (polls are 20 ms
/// apart, and a fork returns only after its stall).
pub(crate) const BEFORE_SAVE: Duration = Duration::from_millis(500);
/// How long after a BGSAVE ends its probe samples still count as "during" it.
pub(crate) const AFTER_SAVE: Duration = Duration::from_secs(1);

/// What tells the probe its window: every 20 ms `INFO <section>` of the server at `port`,
/// and whether that text says the event (a BGSAVE, a replica's sync) is in progress.
pub(crate) struct Watch {
    pub(crate) port: u16,
    pub(crate) section: &'static str,
    pub(crate) busy: fn(&str) -> bool,
}

/// A connection sending PING every `period`, recording each round trip; stops with `stop`.
/// A second connection polls INFO every 20 ms (`watch`: by default INFO persistence, to
/// know when a BGSAVE runs).
pub(crate) fn probe(
    port: u16,
    period: Duration,
    stop: Arc<AtomicBool>,
    watch: Option<Watch>,
) -> std::thread::JoinHandle<ProbeSamples> {
    let watch = watch.unwrap_or(Watch {
        port,
        section: "persistence",
        busy: |t| t.contains("rdb_bgsave_in_progress:1"),
    });
    std::thread::spawn(move || {
        let mut out = ProbeSamples {
            realtime: probe_realtime(),
            ..ProbeSamples::default()
        };
        let (Some(mut c), Some(mut side)) = (connect(port), connect(watch.port)) else {
            return out;
        };
        // (sent at, round trip µs) and the windows where a BGSAVE was seen.
        let mut samples: Vec<(Instant, std::time::SystemTime, u64)> = Vec::new();
        let mut windows: Vec<(Instant, Instant)> = Vec::new();
        let mut next_poll = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + Duration::from_millis(20);
                if let Ok(Reply::Bulk(Some(b))) = side.call_str(&["INFO", watch.section]) {
                    if (watch.busy)(&String::from_utf8_lossy(&b)) {
                        let now = Instant::now();
                        match windows.last_mut() {
                            Some(w) if now <= w.1 => w.1 = now + AFTER_SAVE,
                            _ => windows.push((
                                now.checked_sub(BEFORE_SAVE).unwrap_or(now),
                                now + AFTER_SAVE,
                            )),
                        }
                    }
                }
            }
            let (t, wall) = (Instant::now(), std::time::SystemTime::now());
            if c.call_str(&["PING"]).is_err() {
                break;
            }
            samples.push((t, wall, t.elapsed().as_micros() as u64));
            std::thread::sleep(period.saturating_sub(t.elapsed()));
        }
        let mut slow: Vec<(std::time::SystemTime, u64)> = Vec::new();
        for (t, wall, us) in samples {
            out.all_us.push(us);
            if windows.iter().any(|w| t >= w.0 && t <= w.1) {
                out.during_save_us.push(us);
                slow.push((wall, us));
            } else if windows.first().is_none_or(|w| t < w.0) {
                out.before_save_us.push(us);
            }
        }
        slow.sort_by_key(|&(_, us)| std::cmp::Reverse(us));
        slow.truncate(SLOWEST_LISTED);
        slow.sort_by_key(|&(wall, _)| wall);
        out.slowest_in_save = slow.into_iter().map(|(w, us)| (clock_ms(w), us)).collect();
        out
    })
}

struct Side {
    name: String,
    report: Report,
    probe_max_us: u64,
    probe_p99_us: u64,
    /// The same, over the samples taken during the BGSAVE (and 1 s after).
    probe_save_max_us: u64,
    /// Max over the samples before the BGSAVE window (the floor without a snapshot).
    probe_before_max_us: u64,
    probe_save_p99_us: u64,
    restart_s: f64,
    file_bytes: u64,
    info: BTreeMap<String, String>,
}

pub(crate) fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn run_side(a: &SnapshotVsArgs, name: &str, bin: &Path, extra: &[String]) -> Result<Side, String> {
    let dir = std::env::temp_dir().join(format!("cairn-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut args: Vec<String> = [
        "--save",
        "",
        "--dbfilename",
        "dump.rdb",
        "--appendonly",
        "no",
    ]
    .map(String::from)
    .to_vec();
    args.extend_from_slice(extra);
    eprintln!("== {name}: starting {}", bin.display());
    let (srv, _) = start(bin, &args, &dir, "server.log")?;
    let pid = srv.child.id();
    let conn = ConnArgs {
        host: "127.0.0.1".into(),
        port: srv.port,
        password: None,
        timeout: 30.0,
        pid: Some(pid),
        interval_ms: a.interval_ms,
        seed: 1,
        quiet: true,
        info: Vec::new(),
        max_time: 7200.0,
        value_entropy: a.value_entropy,
        distinct_values: a.distinct_values,
    };
    let load = LoadArgs {
        connections: Some(a.connections),
        threads: Some(2),
        pipeline: Some(1),
        keys: Some(a.keys),
        dist: Some(KeyDist::Uniform),
        value_size: Some(ValueSize {
            min: a.value_size as usize,
            max: a.value_size as usize,
        }),
        ratio: None,
        commands: vec!["1:SET {key} {value}".into()],
        duration: None,
        requests: None,
        rate: Some(a.rate),
        fill: None,
        no_fill: false,
        fill_pipeline: 64,
        key_prefix: "key:".into(),
    };
    let sa = SnapshotArgs {
        conn,
        load,
        at: a.at,
        event: "BGSAVE".into(),
        wait_field: "rdb_bgsave_in_progress".into(),
        after: a.after,
        event_timeout: 3600.0,
    };
    // The probe starts once the fill is done: it runs alongside the load phase only.
    let stop = Arc::new(AtomicBool::new(false));
    let (report, mut probed) = {
        let port = srv.port;
        let stop2 = stop.clone();
        let keys = a.keys;
        // Start the probe when the key count is reached (the scenario fills first).
        let starter = std::thread::spawn(move || {
            loop {
                if stop2.load(Ordering::Relaxed) {
                    return ProbeSamples::default();
                }
                let n = connect(port)
                    .and_then(|mut c| match c.call_str(&["DBSIZE"]) {
                        Ok(Reply::Int(n)) => Some(n as u64),
                        _ => None,
                    })
                    .unwrap_or(0);
                if n >= keys {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            probe(port, Duration::from_millis(1), stop2, None)
                .join()
                .unwrap_or_default()
        });
        let r = scenario::snapshot(&sa);
        stop.store(true, Ordering::Relaxed);
        let probed = starter.join().unwrap_or_default();
        (r?, probed)
    };
    let info = info(srv.port);
    // cairn's image is `dump.cimg` (its `image-filename`); Redis's is the RDB.
    let file_bytes = ["dump.cimg", "dump.rdb"]
        .iter()
        .find_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map_or(0, |m| m.len());
    // Restart: kill -9 (the image from BGSAVE is on disk), then time until PONG.
    drop(srv);
    let log_lines: Vec<String> = std::fs::read_to_string(dir.join("server.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.contains("Background saving") || l.contains("Snapshot") || l.contains("snapshot")
        })
        .map(|l| format!("{name} log: {}", l.trim()))
        .collect();
    eprintln!("== {name}: restarting on the image ({file_bytes} bytes)");
    let (srv, restart_s) = start(bin, &args, &dir, "restart.log")?;
    let keys_after = connect(srv.port)
        .and_then(|mut c| match c.call_str(&["DBSIZE"]) {
            Ok(Reply::Int(n)) => Some(n as u64),
            _ => None,
        })
        .unwrap_or(0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
    let mut report = report;
    report.notes.extend(log_lines);
    if !probed.slowest_in_save.is_empty() {
        let list: Vec<String> = probed
            .slowest_in_save
            .iter()
            .map(|(at, us)| format!("{at} {:.2} ms", *us as f64 / 1000.0))
            .collect();
        report.notes.push(format!(
            "{name} probe: slowest PINGs in the BGSAVE window (sent at, UTC): {}",
            list.join(", ")
        ));
    }
    report.notes.push(format!(
        "{name} probe thread: {}",
        if probed.realtime {
            "SCHED_FIFO 1"
        } else {
            "normal priority (SCHED_FIFO refused)"
        }
    ));
    if keys_after < a.keys {
        report.problems.push(format!(
            "{name}: {keys_after} keys after the restart, {} expected",
            a.keys
        ));
    }
    Ok(Side {
        name: name.into(),
        probe_max_us: probed.all_us.iter().copied().max().unwrap_or(0),
        probe_p99_us: pct(&mut probed.all_us, 0.99),
        probe_save_max_us: probed.during_save_us.iter().copied().max().unwrap_or(0),
        probe_before_max_us: probed.before_save_us.iter().copied().max().unwrap_or(0),
        probe_save_p99_us: pct(&mut probed.during_save_us, 0.99),
        restart_s,
        file_bytes,
        info,
        report,
    })
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

pub fn snapshot_vs(a: &SnapshotVsArgs) -> Result<Report, String> {
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
    let mut cairn_args = a.cairn_args.clone();
    if let Some(m) = &a.snapshot_mode {
        cairn_args.extend(["--snapshot-mode".to_string(), m.clone()]);
    }
    let mut sides = vec![run_side(a, "cairn", &cairn, &cairn_args)?];
    if !a.cairn_only {
        sides.push(run_side(a, "redis", &redis, &[])?);
    }
    let metric = |s: &Side, k: &str| s.report.metrics.get(k).copied();
    let mut t = Table {
        title: format!(
            "BGSAVE under {} SET/s: {} keys × {} B",
            a.rate, a.keys, a.value_size
        ),
        headers: vec![
            "".into(),
            "cairn".into(),
            "redis".into(),
            "cairn / redis".into(),
        ],
        rows: Vec::new(),
    };
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
        _ => "".into(),
    };
    let mut row = |label: &str, f: &dyn Fn(&Side) -> Option<f64>, fmt: &dyn Fn(f64) -> String| {
        let mut v: Vec<Option<f64>> = sides.iter().map(f).collect();
        v.resize(2, None);
        t.rows.push(vec![
            label.into(),
            v[0].map_or("n/a".into(), fmt),
            v[1].map_or("n/a".into(), fmt),
            ratio(v[0], v[1]),
        ]);
    };
    row("BGSAVE duration", &|s| metric(s, "duration_s"), &|v| {
        format!("{v:.2} s")
    });
    row(
        "extra memory (server + children: PSS while a child exists, else RSS; peak − before)",
        &|s| metric(s, "extra_pss_bytes"),
        &|v| mb(v),
    );
    row(
        "extra memory (RSS of the server)",
        &|s| metric(s, "extra_rss_bytes"),
        &|v| mb(v),
    );
    row(
        "extra memory reported by the server (cairn: snapshot_extra_bytes_peak)",
        &|s| {
            s.info
                .get("snapshot_extra_bytes_peak")
                .and_then(|v| v.parse().ok())
        },
        &|v| mb(v),
    );
    row(
        "longest executor pause (cairn: snapshot_pause_us_max; redis: latest_fork_usec)",
        &|s| {
            s.info
                .get("snapshot_pause_us_max")
                .or_else(|| s.info.get("latest_fork_usec"))
                .and_then(|v| v.parse::<f64>().ok())
                .map(|us| us / 1000.0)
        },
        &|v| format!("{v:.2} ms"),
    );
    row(
        "probe PING latency, max (whole load phase)",
        &|s| Some(s.probe_max_us as f64 / 1000.0),
        &|v| format!("{v:.2} ms"),
    );
    row(
        "probe PING latency, p99 (whole load phase)",
        &|s| Some(s.probe_p99_us as f64 / 1000.0),
        &|v| format!("{v:.2} ms"),
    );
    row(
        "probe PING latency, max (BGSAVE window: 0.5 s before it is seen to 1 s after)",
        &|s| Some(s.probe_save_max_us as f64 / 1000.0),
        &|v| format!("{v:.2} ms"),
    );
    row(
        "probe PING latency, max before the BGSAVE window (same load, no snapshot)",
        &|s| Some(s.probe_before_max_us as f64 / 1000.0),
        &|v| format!("{v:.2} ms"),
    );
    row(
        "probe PING latency, p99 (BGSAVE window)",
        &|s| Some(s.probe_save_p99_us as f64 / 1000.0),
        &|v| format!("{v:.2} ms"),
    );
    row(
        "load freeze (longest span with no reply)",
        &|s| metric(s, "freeze_ms"),
        &|v| format!("{v:.0} ms"),
    );
    row("image / RDB file", &|s| Some(s.file_bytes as f64), &|v| {
        mb(v)
    });
    row(
        "restart to serving (spawn → PONG)",
        &|s| Some(s.restart_s),
        &|v| format!("{v:.2} s"),
    );
    let mut rep = Report {
        scenario: "snapshot-vs".into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        ..Default::default()
    };
    for s in &sides {
        for (k, v) in &s.report.metrics {
            rep.metrics.insert(format!("{}_{k}", s.name), *v);
        }
        rep.metrics
            .insert(format!("{}_probe_max_us", s.name), s.probe_max_us as f64);
        rep.metrics.insert(
            format!("{}_probe_save_max_us", s.name),
            s.probe_save_max_us as f64,
        );
        rep.metrics.insert(
            format!("{}_probe_before_max_us", s.name),
            s.probe_before_max_us as f64,
        );
        rep.metrics
            .insert(format!("{}_restart_s", s.name), s.restart_s);
        for p in &s.report.problems {
            rep.problems.push(format!("{}: {p}", s.name));
        }
        for n in &s.report.notes {
            if n.contains(" log: ") || n.contains(" probe: ") {
                rep.notes.push(n.clone());
            }
        }
    }
    if let Some(m) = sides[0].info.get("snapshot_mode") {
        rep.notes.push(format!(
            "cairn snapshot_mode {m}, snapshot_rounds {}",
            sides[0]
                .info
                .get("snapshot_rounds")
                .map_or("?", |v| v.as_str())
        ));
    }
    rep.notes.push(
        "duration = BGSAVE sent → rdb_bgsave_in_progress:0 (polled every --interval-ms); the probe \
         is one extra connection sending PING every 1 ms during the load phase"
            .into(),
    );
    rep.tables.push(t);
    for s in sides {
        for mut tb in s.report.tables {
            tb.title = format!("{}: {}", s.name, tb.title);
            rep.tables.push(tb);
        }
        for r in s.report.runs {
            rep.runs.push(NamedRun {
                name: format!("{}-{}", s.name, r.name),
                result: r.result,
            });
        }
        rep.server.insert(
            format!("{}_version", s.name),
            s.info
                .get("cairn_version")
                .or_else(|| s.info.get("redis_version"))
                .cloned()
                .unwrap_or_default(),
        );
    }
    Ok(rep)
}
