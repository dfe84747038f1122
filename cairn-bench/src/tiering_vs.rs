//! `tiering-vs`: issue #19's tiering benchmark, side by side in one run. Per configuration
//! a server is started here on a free loopback port in a fresh directory under `--scratch`:
//! `cairn-tiered` (cairn with `maxmemory` and a tier file), `cairn-ram` (cairn without
//! `maxmemory`: every value in RAM), `redis-lru` (Redis with the same `maxmemory` and
//! `allkeys-lru`: a cache without tiering). Each is filled with N incompressible per-key
//! values (`values.rs`), left to settle (cairn-tiered: no stash in flight, `used_memory`
//! under `maxmemory`), then every (distribution, mix, connections) cell runs the closed
//! loop of `evloop.rs` for S seconds with every GET's bytes verified, the server's RSS
//! sampled every 100 ms. `fio` gives the disk's own 4 KiB random-read rate at the same
//! queue depths. cairn-tiered is then read back key by key, saved, restarted on the same
//! directory and read back again.

use crate::cli::TieringVsArgs;
use crate::compare::{self, Server};
use crate::evloop::{self, EvSpec};
use crate::keys::{key_name, parse_size, KeyDist};
use crate::procmem;
use crate::report::{Report, Table};
use crate::resp::{self, Conn, Reply};
use crate::stats::{fmt_us, Summary};
use crate::values::{ValueEntropy, ValueGen};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The configurations this scenario knows, in the order its tables show them.
pub const CONFIGS: [&str; 4] = ["cairn-tiered", "cairn-ram", "redis-lru", "fio"];

/// Issue #19's targets: Zipf 0.9 reads at 32 connections at least this share of cairn
/// all-in-RAM's rate with p99 at most `TARGET_ZIPF_P99_US`; uniform reads at 128
/// connections at least this share of the disk's 4 KiB random-read IOPS at that depth.
pub const TARGET_ZIPF_RATIO: f64 = 0.6;
pub const TARGET_ZIPF_P99_US: u64 = 2_000;
pub const TARGET_ZIPF_CONNS: usize = 32;
pub const TARGET_ZIPF_ALPHA: f64 = 0.9;
pub const TARGET_DISK_RATIO: f64 = 0.8;
pub const TARGET_DISK_CONNS: usize = 128;

/// Key names (`key:` + 12 digits, as every cairn-bench load writes them).
const KEY_PREFIX: &str = "key:";
const KEY_LEN: u64 = 16;
/// Commands per pipelined batch of the fill and the read-back.
const BATCH: usize = 64;
/// Outside `used_memory`, ARCHITECTURE.md "Tiered store", "Memory": per value in RAM that
/// is also on disk (cooled), its key plus about 64 bytes; the values uploaded in one loop
/// turn (1 MiB).
const COOLED_EXTRA_BYTES: u64 = 64;
const UPLOAD_TURN_BYTES: u64 = 1 << 20;

/// A load mix: the weights of GET and SET.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    pub get: u32,
    pub set: u32,
}

impl Mix {
    pub fn label(&self) -> String {
        if self.set == 0 {
            "read".into()
        } else {
            format!("{}/{}", self.get, self.set)
        }
    }
}

/// `read` (GETs only) or `R/W`, the percentages of GETs and SETs (`90/10`).
pub fn parse_mix(s: &str) -> Result<Mix, String> {
    let l = s.trim().to_ascii_lowercase();
    if l == "read" {
        return Ok(Mix { get: 1, set: 0 });
    }
    let (r, w) = l
        .split_once('/')
        .ok_or_else(|| format!("mix {s:?} is neither `read` nor READ/WRITE (90/10)"))?;
    let p = |x: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("bad mix {s:?}: {x:?} is not a percentage"))
    };
    let (r, w) = (p(r)?, p(w)?);
    if r + w != 100 || r == 0 {
        return Err(format!(
            "mix {s:?}: the read and write percentages must add up to 100, with some reads"
        ));
    }
    Ok(Mix { get: r, set: w })
}

fn dist_label(d: &KeyDist) -> String {
    match d {
        KeyDist::Uniform => "uniform".into(),
        KeyDist::Zipf(a) => format!("zipf:{a}"),
        KeyDist::Sequential => "sequential".into(),
    }
}

/// The tier file's size: `factor` × the records (key, value, 8-byte header) rounded up
/// to whole MiB, at least 1 MiB (cairn's smallest `tiered-max-file-size`).
pub fn tier_file_bytes(keys: u64, value_len: u64, factor: f64) -> u64 {
    let records = keys.saturating_mul(value_len + KEY_LEN + 8) as f64 * factor.max(1.0);
    let mib = 1u64 << 20;
    ((records as u64).div_ceil(mib) * mib).max(mib)
}

/// The RSS cairn-tiered may reach: `maxmemory`, plus its RSS with no data, plus what
/// ARCHITECTURE.md states lives outside `used_memory` (per value in RAM that is also on
/// disk its key and 64 bytes: at most `maxmemory / value_len` of them; one loop turn's
/// uploads).
pub fn rss_bound(maxmemory: u64, empty_rss: u64, value_len: u64) -> u64 {
    let in_ram = maxmemory / value_len.max(1);
    maxmemory + empty_rss + in_ram * (KEY_LEN + COOLED_EXTRA_BYTES) + UPLOAD_TURN_BYTES
}

/// The share (%) of lookups of tierable values served from RAM, from `INFO tiered`'s
/// counters over a span. A command that finds its value on disk counts a miss, waits for
/// the read, and counts a hit when it runs again, so `tiered_hits` holds one hit per miss
/// besides the first-look hits: those are `hits − misses` of `hits` commands.
pub fn ram_share_pct(hits: Option<u64>, misses: Option<u64>) -> Option<f64> {
    match (hits, misses) {
        (Some(h), Some(m)) if h > 0 => Some(h.saturating_sub(m) as f64 * 100.0 / h as f64),
        _ => None,
    }
}

/// One ratio target: `Some(met)` when both figures exist.
pub fn ratio_met(num: Option<f64>, den: Option<f64>, at_least: f64) -> Option<(f64, bool)> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 => Some((n / d, n / d >= at_least)),
        _ => None,
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// What `fio` measured at one queue depth.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FioRow {
    pub depth: usize,
    pub iops: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// Reads fio's `--output-format=json` for the first job's reads (latency from submission:
/// `lat_ns`, with `--lat_percentiles=1`).
pub fn parse_fio(json: &str, depth: usize) -> Result<FioRow, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON: {e}"))?;
    let read = &v["jobs"][0]["read"];
    let iops = read["iops"]
        .as_f64()
        .ok_or("fio's JSON has no jobs[0].read.iops")?;
    let lat = &read["lat_ns"];
    let pct = |k: &str| {
        lat["percentile"][k]
            .as_u64()
            .map(|ns| ns / 1000)
            .ok_or_else(|| format!("fio's JSON has no read lat_ns percentile {k}"))
    };
    Ok(FioRow {
        depth,
        iops,
        p50_us: pct("50.000000")?,
        p99_us: pct("99.000000")?,
        p999_us: pct("99.900000")?,
        max_us: lat["max"].as_f64().map_or(0, |ns| (ns / 1000.0) as u64),
    })
}

/// One load cell's figures.
#[derive(Clone, Debug, Default)]
struct Cell {
    config: String,
    dist: String,
    mix: String,
    conns: usize,
    all: Summary,
    get: Summary,
    errors: u64,
    misses: u64,
    hit_pct: Option<f64>,
    tier_ram_hit_pct: Option<f64>,
    tier_reads: Option<u64>,
    rss_max: Option<u64>,
}

/// The read-back of every key.
#[derive(Clone, Debug, Default)]
struct Verified {
    exact: u64,
    missing: u64,
    wrong: u64,
    errors: u64,
    first: Option<String>,
}

impl Verified {
    fn describe(&self, keys: u64) -> String {
        let mut s = format!(
            "{} of {keys} byte-exact, {} missing, {} wrong bytes, {} errors",
            self.exact, self.missing, self.wrong, self.errors
        );
        if let Some(f) = &self.first {
            s.push_str(&format!(" (first: {f})"));
        }
        s
    }
    fn all_exact(&self, keys: u64) -> bool {
        self.exact == keys
    }
}

/// What one server configuration gave.
#[derive(Default)]
struct Outcome {
    name: String,
    version: String,
    cells: Vec<Cell>,
    fill_s: f64,
    fill_oom_retries: u64,
    settle_s: f64,
    empty_rss: Option<u64>,
    rss_fill_max: Option<u64>,
    after_run: Option<Verified>,
    after_restart: Option<Verified>,
    restart_s: Option<f64>,
    notes: Vec<String>,
    problems: Vec<String>,
}

fn deadline_after(d: Duration) -> Instant {
    Instant::now() + d
}

fn connect(port: u16, timeout: Duration) -> Result<Conn, String> {
    let addr = resp::resolve("127.0.0.1", port).map_err(|e| e.to_string())?;
    Conn::connect(addr, None, timeout).map_err(|e| e.to_string())
}

/// `INFO <section>` as a map (cairn shows `tiered` only when it is named).
fn info(port: u16, section: &str) -> BTreeMap<String, String> {
    let Ok(mut c) = connect(port, Duration::from_secs(30)) else {
        return BTreeMap::new();
    };
    match c.call_str(&["INFO", section]) {
        Ok(Reply::Bulk(Some(b))) => resp::parse_info(&String::from_utf8_lossy(&b))
            .into_iter()
            .collect(),
        _ => BTreeMap::new(),
    }
}

fn num(m: &BTreeMap<String, String>, k: &str) -> Option<u64> {
    m.get(k).and_then(|v| v.parse().ok())
}

/// Samples a process's RSS every 100 ms until stopped; the maximum in bytes.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max_kb: Arc<AtomicU64>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let max_kb = Arc::new(AtomicU64::new(0));
        let (s, m) = (stop.clone(), max_kb.clone());
        let handle = std::thread::spawn(move || loop {
            if let Some(kb) = procmem::rss_kb(pid) {
                m.fetch_max(kb, Ordering::Relaxed);
            }
            if s.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        });
        RssSampler {
            stop,
            max_kb,
            handle: Some(handle),
        }
    }
    fn finish(mut self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        match self.max_kb.load(Ordering::Relaxed) {
            0 => None,
            kb => Some(kb * 1024),
        }
    }
}

/// Writes keys `0..n` (pipelined SETs on `threads` connections, each a slice of the key
/// space). A SET refused with `-OOM` (cairn-tiered while the pass has not yet written
/// enough to disk) is sent again after a pause; the count of those is returned.
fn fill(
    port: u16,
    n: u64,
    value_len: usize,
    values: &ValueGen,
    threads: u64,
    deadline: Instant,
) -> Result<u64, String> {
    let retries = AtomicU64::new(0);
    let threads = threads.clamp(1, n.max(1));
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (lo, hi) = (n * t / threads, n * (t + 1) / threads);
                let retries = &retries;
                s.spawn(move || -> Result<(), String> {
                    let mut c = connect(port, Duration::from_secs(60))?;
                    let (mut key, mut value, mut buf) = (Vec::new(), Vec::new(), Vec::new());
                    let mut next = lo;
                    let mut pending: Vec<u64> = Vec::new();
                    while next < hi || !pending.is_empty() {
                        if Instant::now() > deadline {
                            return Err(format!(
                                "fill not done by its deadline (at key {next} of {hi})"
                            ));
                        }
                        let mut batch = std::mem::take(&mut pending);
                        if !batch.is_empty() {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        while batch.len() < BATCH && next < hi {
                            batch.push(next);
                            next += 1;
                        }
                        buf.clear();
                        for &k in &batch {
                            key_name(KEY_PREFIX, k, &mut key);
                            value.clear();
                            values.append(&key, value_len, &mut value);
                            resp::encode(&mut buf, &[b"SET", &key, &value]);
                        }
                        c.write_all(&buf).map_err(|e| format!("fill: {e}"))?;
                        for &k in &batch {
                            match c.read_reply(false).map_err(|e| format!("fill: {e}"))? {
                                Reply::Simple(s) if s == "OK" => {}
                                Reply::Error(e) if e.starts_with("OOM") => {
                                    retries.fetch_add(1, Ordering::Relaxed);
                                    pending.push(k);
                                }
                                r => return Err(format!("fill: SET of key {k} answered {r:?}")),
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a fill thread panicked".into()))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(retries.load(Ordering::Relaxed))
}

/// Reads every key once (pipelined GETs) and checks its bytes.
fn verify_all(
    port: u16,
    n: u64,
    value_len: usize,
    values: &ValueGen,
    threads: u64,
    deadline: Instant,
) -> Result<Verified, String> {
    let threads = threads.clamp(1, n.max(1));
    let results: Vec<Result<Verified, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (lo, hi) = (n * t / threads, n * (t + 1) / threads);
                s.spawn(move || -> Result<Verified, String> {
                    let mut c = connect(port, Duration::from_secs(60))?;
                    let mut v = Verified::default();
                    let (mut key, mut buf) = (Vec::new(), Vec::new());
                    let mut k = lo;
                    while k < hi {
                        if Instant::now() > deadline {
                            return Err(format!(
                                "read-back not done by its deadline (at key {k} of {hi})"
                            ));
                        }
                        let end = (k + BATCH as u64).min(hi);
                        buf.clear();
                        for i in k..end {
                            key_name(KEY_PREFIX, i, &mut key);
                            resp::encode(&mut buf, &[b"GET", &key]);
                        }
                        c.write_all(&buf).map_err(|e| format!("read-back: {e}"))?;
                        for i in k..end {
                            key_name(KEY_PREFIX, i, &mut key);
                            let r = c.read_reply(true).map_err(|e| format!("read-back: {e}"))?;
                            let why = match r {
                                Reply::Bulk(Some(b))
                                    if b.len() == value_len && values.verify(&key, &b) =>
                                {
                                    v.exact += 1;
                                    continue;
                                }
                                Reply::Bulk(Some(b)) => {
                                    v.wrong += 1;
                                    format!(
                                        "{} bytes other than its value ({} long)",
                                        String::from_utf8_lossy(&key),
                                        b.len()
                                    )
                                }
                                Reply::Bulk(None) => {
                                    v.missing += 1;
                                    format!("{} missing", String::from_utf8_lossy(&key))
                                }
                                r => {
                                    v.errors += 1;
                                    format!("GET {} answered {r:?}", String::from_utf8_lossy(&key))
                                }
                            };
                            v.first.get_or_insert(why);
                        }
                        k = end;
                    }
                    Ok(v)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a read-back thread panicked".into()))
            })
            .collect()
    });
    let mut total = Verified::default();
    for r in results {
        let v = r?;
        total.exact += v.exact;
        total.missing += v.missing;
        total.wrong += v.wrong;
        total.errors += v.errors;
        if total.first.is_none() {
            total.first = v.first;
        }
    }
    Ok(total)
}

/// Waits until cairn-tiered has no stash in flight and `used_memory` is at most
/// `maxmemory`, three polls in a row.
fn settle(port: u16, maxmemory: u64, deadline: Instant) -> Result<(), String> {
    let mut good = 0;
    loop {
        let t = info(port, "tiered");
        let m = info(port, "memory");
        let (pending, used) = (num(&t, "tiered_pending_stash_cnt"), num(&m, "used_memory"));
        if pending == Some(0) && used.is_some_and(|u| u <= maxmemory) {
            good += 1;
            if good >= 3 {
                return Ok(());
            }
        } else {
            good = 0;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "tiering did not settle by its deadline: tiered_pending_stash_cnt {pending:?}, used_memory {used:?}, maxmemory {maxmemory}"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The binary and options of a configuration.
fn config_of(
    a: &TieringVsArgs,
    name: &str,
    dir: &Path,
    maxmemory: u64,
    tier_bytes: u64,
) -> Result<(PathBuf, Vec<String>), String> {
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
    let mm = maxmemory.to_string();
    let mut opts = match name {
        "cairn-tiered" => {
            let prefix = dir.join("tier");
            v(&[
                "--save",
                "",
                "--appendonly",
                "no",
                "--maxmemory",
                &mm,
                "--tiered-prefix",
                &prefix.to_string_lossy(),
                "--tiered-max-file-size",
                &tier_bytes.to_string(),
            ])
        }
        "cairn-ram" => v(&["--save", "", "--appendonly", "no"]),
        "redis-lru" => v(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            &mm,
            "--maxmemory-policy",
            "allkeys-lru",
        ]),
        other => {
            return Err(format!(
                "unknown configuration {other:?} (known: {})",
                CONFIGS.join(", ")
            ))
        }
    };
    if name.starts_with("cairn") {
        opts.extend_from_slice(&a.cairn_args);
        Ok((cairn, opts))
    } else {
        Ok((redis, opts))
    }
}

fn fresh_dir(scratch: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = scratch.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The checked knobs.
struct Plan {
    maxmemory: u64,
    tier_bytes: u64,
    mixes: Vec<Mix>,
    seconds: Duration,
    warmup: Duration,
    phase: Duration,
    values: ValueGen,
}

fn plan(a: &TieringVsArgs) -> Result<Plan, String> {
    if a.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    if a.value_size == 0 || a.value_size > 16 << 20 {
        return Err("--value-size must be 1..=16MB (cairn tiers values up to 16 MiB)".into());
    }
    if a.configs.is_empty() {
        return Err("--configs names no configuration".into());
    }
    for c in &a.configs {
        if !CONFIGS.contains(&c.as_str()) {
            return Err(format!(
                "unknown configuration {c:?} (known: {})",
                CONFIGS.join(", ")
            ));
        }
    }
    if a.connections.is_empty() || a.connections.contains(&0) {
        return Err("--connections needs counts of at least 1".into());
    }
    if a.dists.is_empty() || a.mixes.is_empty() {
        return Err("--dists and --mixes each need at least one entry".into());
    }
    let maxmemory = parse_size(&a.maxmemory)
        .ok_or_else(|| format!("bad --maxmemory {:?}", a.maxmemory))? as u64;
    if maxmemory == 0 {
        return Err("--maxmemory must be more than 0".into());
    }
    let secs = |s: f64, what: &str| {
        if s.is_finite() && s > 0.0 && s < 1e6 {
            Ok(Duration::from_secs_f64(s))
        } else {
            Err(format!(
                "{what} must be a positive number of seconds, got {s}"
            ))
        }
    };
    let warmup = if a.warmup == 0.0 {
        Duration::ZERO
    } else {
        secs(a.warmup, "--warmup")?
    };
    Ok(Plan {
        maxmemory,
        tier_bytes: tier_file_bytes(a.keys, a.value_size as u64, a.tier_file_factor),
        mixes: a
            .mixes
            .iter()
            .map(|m| parse_mix(m))
            .collect::<Result<_, _>>()?,
        seconds: secs(a.seconds, "--seconds")?,
        warmup,
        phase: secs(a.phase_timeout, "--phase-timeout")?,
        values: ValueGen::new(ValueEntropy::Random, a.seed, a.value_size),
    })
}

fn run_config(a: &TieringVsArgs, p: &Plan, name: &str) -> Result<Outcome, String> {
    let dir = fresh_dir(&a.scratch, name)?;
    let (bin, opts) = config_of(a, name, &dir, p.maxmemory, p.tier_bytes)?;
    let mut out = Outcome {
        name: name.into(),
        ..Outcome::default()
    };
    eprintln!("== {name}: starting {} in {}", bin.display(), dir.display());
    let (server, _) = compare::start(&bin, &opts, &dir, "server.log")?;
    let r = run_config_in(a, p, name, &bin, &opts, &dir, server, &mut out);
    if let Err(e) = r {
        out.problems.push(e);
    }
    if !a.keep_scratch {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn run_config_in(
    a: &TieringVsArgs,
    p: &Plan,
    name: &str,
    bin: &Path,
    opts: &[String],
    dir: &Path,
    mut server: Server,
    out: &mut Outcome,
) -> Result<(), String> {
    let tiered = name == "cairn-tiered";
    let pid = server.child.id();
    let port = server.port;
    out.empty_rss = procmem::rss_kb(pid).map(|kb| kb * 1024);
    let first = info(port, "server");
    out.version = first
        .get("cairn_version")
        .or_else(|| first.get("redis_version"))
        .cloned()
        .unwrap_or_default();

    let sampler = RssSampler::start(pid);
    let t0 = Instant::now();
    let filled = fill(
        port,
        a.keys,
        a.value_size,
        &p.values,
        4,
        deadline_after(p.phase),
    );
    out.fill_s = t0.elapsed().as_secs_f64();
    eprintln!("== {name}: filled {} keys in {:.1} s", a.keys, out.fill_s);
    let settled = match filled {
        Ok(retries) => {
            out.fill_oom_retries = retries;
            let t1 = Instant::now();
            let r = if tiered {
                settle(port, p.maxmemory, deadline_after(p.phase))
            } else {
                Ok(())
            };
            out.settle_s = t1.elapsed().as_secs_f64();
            r
        }
        Err(e) => Err(e),
    };
    out.rss_fill_max = sampler.finish();
    settled?;

    for dist in &a.dists {
        for mix in &p.mixes {
            for &conns in &a.connections {
                let c = run_cell(a, p, name, port, pid, dist, *mix, conns)?;
                eprintln!(
                    "== {name} {} {} c={conns}: {:.0} req/s, p99 {}",
                    c.dist,
                    c.mix,
                    c.all.rate,
                    fmt_us(c.all.p99)
                );
                out.cells.push(c);
            }
        }
    }

    if tiered {
        let threads = 4;
        eprintln!("== {name}: reading every key back");
        out.after_run = Some(verify_all(
            port,
            a.keys,
            a.value_size,
            &p.values,
            threads,
            deadline_after(p.phase),
        )?);
        eprintln!("== {name}: SAVE and restart");
        let mut c = connect(port, p.phase)?;
        match c.call_str(&["SAVE"]).map_err(|e| format!("SAVE: {e}"))? {
            Reply::Simple(s) if s == "OK" => {}
            r => return Err(format!("SAVE answered {r:?}")),
        }
        drop(c);
        drop(server);
        let (again, secs) = compare::start(bin, opts, dir, "server-restart.log")?;
        server = again;
        out.restart_s = Some(secs);
        out.after_restart = Some(verify_all(
            server.port,
            a.keys,
            a.value_size,
            &p.values,
            threads,
            deadline_after(p.phase),
        )?);
    }
    drop(server);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_cell(
    a: &TieringVsArgs,
    p: &Plan,
    name: &str,
    port: u16,
    pid: u32,
    dist: &KeyDist,
    mix: Mix,
    conns: usize,
) -> Result<Cell, String> {
    let tiered = name == "cairn-tiered";
    let stats_before = info(port, "stats");
    let tier_before = if tiered {
        info(port, "tiered")
    } else {
        BTreeMap::new()
    };
    let spec = EvSpec {
        addr: resp::resolve("127.0.0.1", port).map_err(|e| e.to_string())?,
        password: None,
        timeout: Duration::from_secs(30),
        connections: conns,
        threads: a.threads.max(1),
        keys: a.keys,
        dist: dist.clone(),
        // Redis evicts: a nil is the miss a cache without tiering has, and the client
        // fills it (cache-aside: SET the key's value next), so the cache holds what is
        // read rather than what was written last. cairn keeps every key, so a nil there
        // is an error.
        nil_is_miss: name == "redis-lru",
        set_after_miss: name == "redis-lru",
        key_prefix: KEY_PREFIX.into(),
        value_len: a.value_size,
        set_weight: mix.set,
        get_weight: mix.get,
        duration: Some(p.seconds),
        requests: None,
        warmup: p.warmup,
        seed: a.seed,
        values: p.values.clone(),
        max_time: p.warmup + p.seconds + Duration::from_secs(60),
    };
    let sampler = RssSampler::start(pid);
    let r = evloop::run(&spec);
    let rss_max = sampler.finish();
    let r = r?;
    if !r.problems.is_empty() {
        return Err(format!(
            "{name} {} {} c={conns}: {}",
            dist_label(dist),
            mix.label(),
            r.problems.join("; ")
        ));
    }
    let stats_after = info(port, "stats");
    let delta = |b: &BTreeMap<String, String>, a: &BTreeMap<String, String>, k: &str| {
        Some(num(a, k)?.saturating_sub(num(b, k)?))
    };
    let pct = |h: Option<u64>, m: Option<u64>| match (h, m) {
        (Some(h), Some(m)) if h + m > 0 => Some(h as f64 * 100.0 / (h + m) as f64),
        _ => None,
    };
    let hit_pct = pct(
        delta(&stats_before, &stats_after, "keyspace_hits"),
        delta(&stats_before, &stats_after, "keyspace_misses"),
    );
    let (tier_ram_hit_pct, tier_reads) = if tiered {
        let t = info(port, "tiered");
        (
            ram_share_pct(
                delta(&tier_before, &t, "tiered_hits"),
                delta(&tier_before, &t, "tiered_misses"),
            ),
            delta(&tier_before, &t, "tiered_reads"),
        )
    } else {
        (None, None)
    };
    Ok(Cell {
        config: name.into(),
        dist: dist_label(dist),
        mix: mix.label(),
        conns,
        get: r.ops.get("GET").cloned().unwrap_or_default(),
        errors: r.all.errors,
        misses: r.misses,
        all: r.all,
        hit_pct,
        tier_ram_hit_pct,
        tier_reads,
        rss_max,
    })
}

/// fio: 4 KiB random reads with O_DIRECT through io_uring at each queue depth, on a file
/// the size of the tier file in the scratch directory.
fn run_fio(a: &TieringVsArgs, p: &Plan) -> Result<Vec<FioRow>, String> {
    let dir = fresh_dir(&a.scratch, "fio")?;
    let file = dir.join("fio.dat");
    let mut rows = Vec::new();
    let result = (|| {
        for &depth in &a.connections {
            let json = dir.join(format!("fio-{depth}.json"));
            eprintln!("== fio: iodepth {depth} on {} bytes", p.tier_bytes);
            let mut child = Command::new(&a.fio)
                .args([
                    "--name=tier-randread",
                    "--rw=randread",
                    "--bs=4k",
                    "--direct=1",
                    "--ioengine=io_uring",
                    "--lat_percentiles=1",
                    "--percentile_list=50:99:99.9",
                    "--time_based",
                    "--output-format=json",
                ])
                .arg(format!("--filename={}", file.display()))
                .arg(format!("--size={}", p.tier_bytes))
                .arg(format!("--iodepth={depth}"))
                .arg(format!(
                    "--runtime={}",
                    p.seconds.as_secs_f64().ceil() as u64
                ))
                .arg(format!("--output={}", json.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", a.fio.display()))?;
            // Laying the file out (first run) plus the run itself.
            let deadline = deadline_after(p.phase + p.seconds);
            let status = loop {
                if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
                    break st;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "fio at iodepth {depth} did not end by its deadline"
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            if !status.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!(
                    "fio at iodepth {depth} failed ({status}): {}",
                    err.trim()
                ));
            }
            let text = std::fs::read_to_string(&json).map_err(|e| e.to_string())?;
            // fio may print notes before the JSON document.
            let start = text.find('{').unwrap_or(0);
            rows.push(parse_fio(&text[start..], depth)?);
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| rows)
}

fn mb(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}

fn signed_mb(x: i128) -> String {
    format!("{:+.0} MB", x as f64 / 1e6)
}

pub fn tiering_vs(a: &TieringVsArgs) -> Result<Report, String> {
    let p = plan(a)?;
    std::fs::create_dir_all(&a.scratch)
        .map_err(|e| format!("cannot create {}: {e}", a.scratch.display()))?;
    let mut outs: Vec<Outcome> = Vec::new();
    let mut fio: Vec<FioRow> = Vec::new();
    let mut problems = Vec::new();
    for c in &a.configs {
        if c == "fio" {
            match run_fio(a, &p) {
                Ok(rows) => fio = rows,
                Err(e) => problems.push(format!("fio: {e}")),
            }
        } else {
            outs.push(run_config(a, &p, c)?);
        }
    }

    let mut rep = Report {
        scenario: "tiering-vs".into(),
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        ..Default::default()
    };
    let cell = |config: &str, dist: &str, mix: &str, conns: usize| {
        outs.iter()
            .flat_map(|o| o.cells.iter())
            .find(|c| c.config == config && c.dist == dist && c.mix == mix && c.conns == conns)
    };
    for dist in &a.dists {
        for mix in &p.mixes {
            let (d, m) = (dist_label(dist), mix.label());
            let mut t = Table {
                title: format!(
                    "{d} keys, {m}: {} keys × {} B, maxmemory {}",
                    a.keys,
                    a.value_size,
                    mb(p.maxmemory)
                ),
                headers: [
                    "config",
                    "conns",
                    "QPS",
                    "p50",
                    "p99",
                    "p99.9",
                    "max",
                    "errors",
                    "hit %",
                    "tier: RAM hit % / disk reads",
                    "RSS max",
                    "RSS − maxmemory",
                ]
                .map(String::from)
                .to_vec(),
                rows: Vec::new(),
            };
            for o in &outs {
                for &conns in &a.connections {
                    let Some(c) = cell(&o.name, &d, &m, conns) else {
                        continue;
                    };
                    t.rows.push(vec![
                        o.name.clone(),
                        conns.to_string(),
                        format!("{:.0}", c.all.rate),
                        fmt_us(c.all.p50),
                        fmt_us(c.all.p99),
                        fmt_us(c.all.p999),
                        fmt_us(c.all.max),
                        c.errors.to_string(),
                        c.hit_pct
                            .map_or_else(|| "n/a".into(), |h| format!("{h:.1}")),
                        match (c.tier_ram_hit_pct, c.tier_reads) {
                            (Some(h), Some(r)) => format!("{h:.1} / {r}"),
                            (None, Some(r)) => format!("– / {r}"),
                            _ => String::new(),
                        },
                        c.rss_max.map_or_else(|| "n/a".into(), mb),
                        c.rss_max.map_or_else(
                            || "n/a".into(),
                            |r| signed_mb(r as i128 - p.maxmemory as i128),
                        ),
                    ]);
                    let key = format!("{}_{d}_{m}_c{conns}", o.name);
                    rep.metrics.insert(format!("{key}_qps"), c.all.rate);
                    rep.metrics
                        .insert(format!("{key}_p99_us"), c.all.p99 as f64);
                    if let Some(h) = c.hit_pct {
                        rep.metrics.insert(format!("{key}_hit_pct"), h);
                    }
                    if let Some(r) = c.rss_max {
                        rep.metrics.insert(format!("{key}_rss_max_bytes"), r as f64);
                    }
                }
            }
            if m == "read" {
                for f in &fio {
                    t.rows.push(vec![
                        "fio 4 KiB randread".into(),
                        format!("iodepth {}", f.depth),
                        format!("{:.0} IOPS", f.iops),
                        fmt_us(f.p50_us),
                        fmt_us(f.p99_us),
                        fmt_us(f.p999_us),
                        fmt_us(f.max_us),
                        String::new(),
                        String::new(),
                        String::new(),
                        String::new(),
                        String::new(),
                    ]);
                }
            }
            rep.tables.push(t);
        }
    }
    for f in &fio {
        rep.metrics
            .insert(format!("fio_iodepth{}_iops", f.depth), f.iops);
        rep.metrics
            .insert(format!("fio_iodepth{}_p99_us", f.depth), f.p99_us as f64);
    }

    // The targets.
    let zipf = dist_label(&KeyDist::Zipf(TARGET_ZIPF_ALPHA));
    let qps = |config: &str, dist: &str, conns: usize| cell(config, dist, "read", conns);
    let mut targets = Vec::new();
    let zt = qps("cairn-tiered", &zipf, TARGET_ZIPF_CONNS);
    match ratio_met(
        zt.map(|c| c.all.rate),
        qps("cairn-ram", &zipf, TARGET_ZIPF_CONNS).map(|c| c.all.rate),
        TARGET_ZIPF_RATIO,
    ) {
        Some((r, ok)) => {
            let p99 = zt.map_or(0, |c| c.all.p99);
            let p99_ok = p99 <= TARGET_ZIPF_P99_US;
            rep.metrics.insert("zipf_tiered_over_ram".into(), r);
            targets.push(format!(
                "{zipf} reads at {TARGET_ZIPF_CONNS} connections: cairn-tiered / cairn-ram = {r:.2} (target ≥ {TARGET_ZIPF_RATIO}) {}; p99 {} (target ≤ 2 ms) {}",
                verdict(ok),
                fmt_us(p99),
                verdict(p99_ok)
            ));
        }
        None => targets.push(format!(
            "{zipf} reads at {TARGET_ZIPF_CONNS} connections vs cairn-ram: not measured in this run"
        )),
    }
    let fio_at = |depth: usize| fio.iter().find(|f| f.depth == depth).map(|f| f.iops);
    match ratio_met(
        qps("cairn-tiered", "uniform", TARGET_DISK_CONNS).map(|c| c.all.rate),
        fio_at(TARGET_DISK_CONNS),
        TARGET_DISK_RATIO,
    ) {
        Some((r, ok)) => {
            rep.metrics.insert("uniform_tiered_over_fio".into(), r);
            targets.push(format!(
                "uniform reads at {TARGET_DISK_CONNS} connections: cairn-tiered QPS / fio IOPS at iodepth {TARGET_DISK_CONNS} = {r:.2} (target ≥ {TARGET_DISK_RATIO}) {}",
                verdict(ok)
            ));
        }
        None => targets.push(format!(
            "uniform reads at {TARGET_DISK_CONNS} connections vs fio: not measured in this run"
        )),
    }
    // The same ratios at every connection count measured (not targets; for reading).
    for &conns in &a.connections {
        if let Some((r, _)) = ratio_met(
            qps("cairn-tiered", &zipf, conns).map(|c| c.all.rate),
            qps("cairn-ram", &zipf, conns).map(|c| c.all.rate),
            0.0,
        ) {
            rep.notes.push(format!(
                "{zipf} reads at {conns} connections: cairn-tiered / cairn-ram = {r:.2}"
            ));
        }
        if let Some((r, _)) = ratio_met(
            qps("cairn-tiered", "uniform", conns).map(|c| c.all.rate),
            fio_at(conns),
            0.0,
        ) {
            rep.notes.push(format!(
                "uniform reads at {conns} connections: cairn-tiered QPS / fio IOPS = {r:.2}"
            ));
        }
    }
    if let Some(o) = outs.iter().find(|o| o.name == "cairn-tiered") {
        let max_cells = o.cells.iter().filter_map(|c| c.rss_max).max();
        let max_all = max_cells.max(o.rss_fill_max);
        if let (Some(r), Some(empty)) = (max_all, o.empty_rss) {
            let bound = rss_bound(p.maxmemory, empty, a.value_size as u64);
            rep.metrics.insert("tiered_rss_max_bytes".into(), r as f64);
            targets.push(format!(
                "cairn-tiered RSS max (fill, settling and every cell) {} ≤ maxmemory + stated overhead {} (RSS with no data {}, (key + 64 B) per value that fits in maxmemory, 1 MiB of uploads) {}",
                mb(r),
                mb(bound),
                mb(empty),
                verdict(r <= bound)
            ));
        }
        let v = |x: &Option<Verified>| {
            x.as_ref().map_or((false, "not checked".to_string()), |v| {
                (v.all_exact(a.keys), v.describe(a.keys))
            })
        };
        let (ok1, d1) = v(&o.after_run);
        let (ok2, d2) = v(&o.after_restart);
        targets.push(format!(
            "cairn-tiered every key byte-exact after the run: {d1} {}",
            verdict(ok1)
        ));
        targets.push(format!(
            "cairn-tiered every key byte-exact after SAVE and a restart{}: {d2} {}",
            o.restart_s
                .map_or(String::new(), |s| format!(" (ready in {s:.1} s)")),
            verdict(ok2)
        ));
        if !(ok1 && ok2) {
            problems.push("cairn-tiered: not every key read back byte-exact".into());
        }
    }
    for t in targets {
        rep.notes.push(format!("target (issue #19): {t}"));
    }
    for o in &outs {
        rep.server
            .insert(format!("{}_version", o.name), o.version.clone());
        rep.notes.push(format!(
            "{}: fill {:.1} s ({} SETs sent again after -OOM), settled in {:.1} s, RSS with no data {}, RSS max during fill and settling {}",
            o.name,
            o.fill_s,
            o.fill_oom_retries,
            o.settle_s,
            o.empty_rss.map_or_else(|| "n/a".into(), mb),
            o.rss_fill_max.map_or_else(|| "n/a".into(), mb)
        ));
        for c in &o.cells {
            if c.misses > 0 {
                rep.notes.push(format!(
                    "{} {} {} c={}: {} GETs missed ({:.1} % of GETs)",
                    o.name,
                    c.dist,
                    c.mix,
                    c.conns,
                    c.misses,
                    c.misses as f64 * 100.0 / (c.get.count.max(1)) as f64
                ));
            }
            if c.errors > 0 {
                problems.push(format!(
                    "{} {} {} c={}: {} error replies (a nil from cairn counts as one)",
                    o.name, c.dist, c.mix, c.conns, c.errors
                ));
            }
        }
        rep.notes.extend(o.notes.iter().cloned());
        for e in &o.problems {
            problems.push(format!("{}: {e}", o.name));
        }
    }
    rep.notes.push(format!(
        "values: {} ({} B, derived from key and seed {}; every GET reply checked byte for byte); \
         keys key:000000000000…; load: evloop closed loop, {} client threads, one request in \
         flight per connection, {:.1} s warm-up then {:.1} s recorded per cell; 90/10 writes SET \
         the key's own value; hit % = keyspace_hits / (hits + misses) over the cell; tier RAM \
         hit % = (tiered_hits − tiered_misses) / tiered_hits (a command that finds its value \
         on disk counts a miss, then a hit when it runs again after the read), disk reads = \
         tiered_reads; RSS \
         sampled every 100 ms (max over the cell); cairn-tiered: maxmemory {}, tier file {} \
         (tiered-max-file-size); fio: --rw=randread --bs=4k --direct=1 --ioengine=io_uring \
         --iodepth=<connections> on a {} file, {:.0} s",
        ValueEntropy::Random.describe(),
        a.value_size,
        a.seed,
        a.threads,
        p.warmup.as_secs_f64(),
        p.seconds.as_secs_f64(),
        mb(p.maxmemory),
        mb(p.tier_bytes),
        mb(p.tier_bytes),
        p.seconds.as_secs_f64()
    ));
    rep.problems = problems;
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Cmd};
    use clap::Parser;

    fn args(extra: &[&str]) -> Result<TieringVsArgs, String> {
        let mut v = vec!["cairn-bench", "tiering-vs"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v).map_err(|e| e.to_string())?.cmd {
            Some(Cmd::TieringVs(a)) => Ok(a),
            other => Err(format!("parsed as {other:?}")),
        }
    }

    #[test]
    fn options_parse_into_a_plan() {
        let a = args(&[
            "--keys",
            "200000",
            "--value-size",
            "4000",
            "--maxmemory",
            "200mb",
            "--connections",
            "8,32",
            "--dists",
            "uniform,zipf:0.9",
            "--mixes",
            "read,90/10",
            "--seconds",
            "5",
            "--configs",
            "cairn-tiered,cairn-ram,redis-lru,fio",
            "--cairn",
            "/x/cairn-server",
            "--scratch",
            "/tmp/s",
        ])
        .unwrap();
        assert_eq!(a.connections, vec![8, 32]);
        assert_eq!(a.configs, CONFIGS.to_vec());
        assert!(matches!(a.dists[1], KeyDist::Zipf(x) if x == 0.9));
        let p = plan(&a).unwrap();
        assert_eq!(p.maxmemory, 200 << 20);
        assert_eq!(
            p.mixes,
            vec![Mix { get: 1, set: 0 }, Mix { get: 90, set: 10 }]
        );
        assert_eq!(p.seconds, Duration::from_secs(5));
        assert_eq!(p.tier_bytes, tier_file_bytes(200_000, 4000, 1.5));
        // The defaults are the issue's full-scale run.
        let d = args(&[]).unwrap();
        assert_eq!((d.keys, d.value_size), (4_000_000, 4000));
        assert_eq!(plan(&d).unwrap().maxmemory, 4 << 30);
        assert_eq!(d.connections, vec![8, 32, 128]);
        assert_eq!(d.mixes, vec!["read", "90/10"]);
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            &["--configs", "cairn,redis"][..],
            &["--mixes", "50/60"],
            &["--maxmemory", "lots"],
            &["--maxmemory", "0"],
            &["--keys", "0"],
            &["--value-size", "0"],
            &["--seconds", "0"],
            &["--connections", "0,8"],
        ] {
            let r = args(bad).and_then(|a| plan(&a).map(|_| ()));
            assert!(r.is_err(), "{bad:?} accepted");
        }
        assert!(args(&["--dists", "pareto"]).is_err());
    }

    #[test]
    fn mixes_parse_and_refuse() {
        assert_eq!(parse_mix("read"), Ok(Mix { get: 1, set: 0 }));
        assert_eq!(parse_mix("90/10"), Ok(Mix { get: 90, set: 10 }));
        assert_eq!(parse_mix("90/10").unwrap().label(), "90/10");
        assert_eq!(parse_mix("READ").unwrap().label(), "read");
        for bad in ["90/20", "0/100", "write", "90:10", "x/10", ""] {
            assert!(parse_mix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tier_file_is_the_data_times_the_factor_in_whole_mib() {
        // 1000 records of 4000 + 16 + 8 bytes = 4,024,000 B; × 1.5 = 6,036,000 → 6 MiB.
        assert_eq!(tier_file_bytes(1000, 4000, 1.5), 6 << 20);
        // Never under 1 MiB, never under the data itself.
        assert_eq!(tier_file_bytes(1, 10, 1.5), 1 << 20);
        assert_eq!(tier_file_bytes(1000, 4000, 0.5), 4 << 20);
        // The full-scale run: 4M × 4000 B at 1.5× is about 22.5 GiB.
        let full = tier_file_bytes(4_000_000, 4000, 1.5);
        assert!(full >= 4_000_000 * 4024 * 3 / 2 && full.is_multiple_of(1 << 20));
    }

    #[test]
    fn targets_compare_ratios_at_their_threshold() {
        assert_eq!(ratio_met(Some(60.0), Some(100.0), 0.6), Some((0.6, true)));
        assert_eq!(ratio_met(Some(59.0), Some(100.0), 0.6), Some((0.59, false)));
        assert_eq!(ratio_met(Some(80.0), Some(100.0), 0.8), Some((0.8, true)));
        assert_eq!(ratio_met(None, Some(100.0), 0.8), None);
        assert_eq!(ratio_met(Some(1.0), Some(0.0), 0.8), None);
        // The RSS bound: maxmemory + empty RSS + 80 B per value that fits + 1 MiB.
        let mm = 200 << 20;
        assert_eq!(
            rss_bound(mm, 10 << 20, 4000),
            mm + (10 << 20) + (mm / 4000) * 80 + (1 << 20)
        );
    }

    #[test]
    fn ram_share_takes_the_re_runs_out_of_the_hits() {
        // 100 commands: 30 found their value on disk (30 misses, then 30 hits on the re-run)
        // and 70 in RAM: 100 hits, 30 misses, 70 % from RAM.
        assert_eq!(ram_share_pct(Some(100), Some(30)), Some(70.0));
        assert_eq!(ram_share_pct(Some(50), Some(50)), Some(0.0));
        assert_eq!(ram_share_pct(Some(0), Some(0)), None);
        assert_eq!(ram_share_pct(None, Some(1)), None);
    }

    #[test]
    fn reads_fio_json() {
        let json = r#"{"fio version":"fio-3.33","jobs":[{"jobname":"t","read":{"iops":12345.6,
            "lat_ns":{"min":1000,"max":9000000.0,"mean":5.0,
            "percentile":{"50.000000":250000,"99.000000":1200000,"99.900000":3000000}}}}]}"#;
        assert_eq!(
            parse_fio(json, 32).unwrap(),
            FioRow {
                depth: 32,
                iops: 12345.6,
                p50_us: 250,
                p99_us: 1200,
                p999_us: 3000,
                max_us: 9000,
            }
        );
        assert!(parse_fio(r#"{"jobs":[{"read":{"iops":1.0}}]}"#, 8).is_err());
        assert!(parse_fio("not json", 8).is_err());
    }
}
