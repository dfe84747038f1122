//! The load engine: worker threads with blocking sockets, each owning some connections.
//!
//! Open loop (a target rate): request i of a worker has an intended send time
//! `start + phase + i / rate`; its latency is measured from that time, not from when it was
//! actually written, so a server stall that delays sending shows up in full (no coordinated
//! omission). Closed loop: each connection keeps `pipeline` requests in flight, latency from
//! the write.
//!
//! Recording: each worker keeps a histogram per label for the interval of its latest
//! completion and hands it to the shared table when it moves on; a side thread finalizes an
//! interval once every worker has moved past it. A per-millisecond completion count gives
//! the freeze (the longest span with no completed request).

use crate::keys::{key_name, KeyDist, KeyGen, Rng, ValueSize};
use crate::procmem;
use crate::resp::{self, Conn, Reply};
use crate::stats::{self, Hist, Summary};
use crate::values::{ValueEntropy, ValueGen};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the PSS (smaps_rollup) of the server and its children is sampled while it
/// has children (a fork-based snapshot in progress).
const PSS_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Clone, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    pub password: Option<String>,
    /// Bound on every connect, read and write.
    pub timeout: Duration,
}

impl Target {
    pub fn connect(&self) -> Result<Conn, String> {
        Conn::connect(self.addr, self.password.as_deref(), self.timeout).map_err(|e| e.to_string())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Lit(Vec<u8>),
    Key,
    Value,
}

/// One command of a mix: "3:GET {key}" = weight 3, `GET <key>`.
#[derive(Clone, Debug)]
pub struct CmdTemplate {
    pub weight: u32,
    pub name: String,
    pub args: Vec<Arg>,
}

impl std::str::FromStr for CmdTemplate {
    type Err = String;
    fn from_str(s: &str) -> Result<CmdTemplate, String> {
        let (weight, rest) = match s.split_once(':') {
            Some((w, r)) if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) => {
                (w.parse().map_err(|_| format!("bad weight in {s:?}"))?, r)
            }
            _ => (1, s),
        };
        let args: Vec<Arg> = rest
            .split_whitespace()
            .map(|w| match w {
                "{key}" => Arg::Key,
                "{value}" => Arg::Value,
                _ => Arg::Lit(w.as_bytes().to_vec()),
            })
            .collect();
        let name = match args.first() {
            Some(Arg::Lit(n)) => String::from_utf8_lossy(n).to_ascii_uppercase(),
            _ => return Err(format!("command {s:?} must start with a command name")),
        };
        if weight == 0 {
            return Err(format!("weight 0 in {s:?}"));
        }
        Ok(CmdTemplate { weight, name, args })
    }
}

/// SET:GET by ratio "1:3".
pub fn set_get_mix(ratio: &str) -> Result<Vec<CmdTemplate>, String> {
    let (s, g) = ratio
        .split_once(':')
        .ok_or_else(|| format!("ratio {ratio:?} is not SET:GET"))?;
    let s: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("bad ratio {ratio:?}"))?;
    let g: u32 = g
        .trim()
        .parse()
        .map_err(|_| format!("bad ratio {ratio:?}"))?;
    let mut v = Vec::new();
    if s > 0 {
        v.push(format!("{s}:SET {{key}} {{value}}").parse()?);
    }
    if g > 0 {
        v.push(format!("{g}:GET {{key}}").parse()?);
    }
    if v.is_empty() {
        return Err("ratio 0:0 has no commands".into());
    }
    Ok(v)
}

/// A set of connections with one workload.
#[derive(Clone, Debug)]
pub struct Group {
    /// Prefix for labels in the results ("" for the main load, e.g. "noise" otherwise).
    pub name: String,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    /// Requests per second for the whole group (open loop); None = closed loop.
    pub rate: Option<f64>,
    /// Total requests for the whole group; None = until the run stops.
    pub requests: Option<u64>,
    pub commands: Vec<CmdTemplate>,
    pub keys: u64,
    pub dist: KeyDist,
    pub key_prefix: String,
    pub value: ValueSize,
}

impl Group {
    pub fn new(commands: Vec<CmdTemplate>) -> Group {
        Group {
            name: String::new(),
            connections: 50,
            threads: 2,
            pipeline: 1,
            rate: None,
            requests: None,
            commands,
            keys: 100_000,
            dist: KeyDist::Uniform,
            key_prefix: "key:".into(),
            value: ValueSize { min: 100, max: 100 },
        }
    }
    fn label(&self, cmd: &CmdTemplate) -> String {
        if self.name.is_empty() {
            cmd.name.clone()
        } else {
            format!("{}:{}", self.name, cmd.name)
        }
    }
}

/// A command sent on the side connection at a given time, e.g. BGSAVE; optionally waited
/// for by polling an INFO field until it reads 0 (rdb_bgsave_in_progress), or until a
/// field reads a given value (`wait_equals`).
#[derive(Clone, Debug)]
pub struct EventSpec {
    pub at: Duration,
    pub command: Vec<String>,
    pub wait_field: Option<String>,
    /// Instead of `wait_field` returning to 0: wait until this INFO field reads this value
    /// (e.g. `master_link_status` = `up`).
    pub wait_equals: Option<(String, String)>,
    /// Another server to send the command to and to poll for the wait (e.g. a replica
    /// told REPLICAOF while the load runs on its primary); None: the run's target.
    pub target: Option<Target>,
    /// How long to wait for the field to return to 0 (or to read the value).
    pub timeout: Duration,
}

impl EventSpec {
    /// Whether the INFO fields `m` say the event is still in progress.
    fn busy(&self, m: &BTreeMap<String, String>) -> Option<bool> {
        if let Some((field, want)) = &self.wait_equals {
            return Some(m.get(field).is_none_or(|v| v != want));
        }
        let field = self.wait_field.as_deref()?;
        m.get(field).map(|v| v != "0")
    }

    fn waits(&self) -> bool {
        self.wait_field.is_some() || self.wait_equals.is_some()
    }

    fn wait_text(&self) -> String {
        match (&self.wait_equals, &self.wait_field) {
            (Some((f, v)), _) => format!("{f} != {v}"),
            (None, Some(f)) => format!("{f} != 0"),
            (None, None) => String::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunSpec {
    pub target: Target,
    pub groups: Vec<Group>,
    /// Stop after this long (and after every event finished); None = when all groups have
    /// sent their `requests`.
    pub duration: Option<Duration>,
    pub interval: Duration,
    pub seed: u64,
    /// Pid of a local server to sample RSS/PSS from.
    pub pid: Option<u32>,
    /// INFO fields to record per interval (polled on a side connection); empty = no INFO.
    pub info_fields: Vec<String>,
    pub events: Vec<EventSpec>,
    /// Live progress line on stderr... only when stdout is a terminal.
    pub progress: bool,
    /// Hard bound on the whole run, whatever else happens.
    pub max_time: Duration,
    /// Keep the load going at least this long after the last event ended (to see recovery).
    pub after_events: Duration,
    /// What the values hold (see `values.rs`): derived from key and seed unless `Repeat`.
    pub value_entropy: ValueEntropy,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct IntervalStat {
    /// Start of the interval, seconds since the run's start.
    pub t: f64,
    pub cmds: BTreeMap<String, Summary>,
    /// All labels together.
    pub all: Summary,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub rss_kb: Option<u64>,
    pub pss_kb: Option<u64>,
    /// PSS of the server and its children (a fork-based snapshot's copy-on-write pages).
    pub tree_pss_kb: Option<u64>,
    pub info: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Event {
    pub name: String,
    pub start: f64,
    pub end: Option<f64>,
    pub reply: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub cmds: BTreeMap<String, Summary>,
    pub all: Summary,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunResult {
    pub elapsed: f64,
    pub interval_ms: u64,
    pub intervals: Vec<IntervalStat>,
    pub totals: Totals,
    pub samples: Vec<Sample>,
    pub events: Vec<Event>,
    /// Completed requests per millisecond (for freeze detection); not serialized.
    #[serde(skip)]
    pub per_ms: Vec<u32>,
    /// Open loop: requests whose intended send time passed before the run stopped but that
    /// were never sent (the client or the server could not keep up).
    pub missed: u64,
    pub target_rate: Option<f64>,
    /// First error reply text per label.
    pub first_errors: BTreeMap<String, String>,
    /// Why the run stopped early, or warnings (unreachable rate...).
    pub problems: Vec<String>,
    pub complete: bool,
    /// The values' `--value-entropy` (empty in results recorded before it existed).
    #[serde(default)]
    pub value_entropy: String,
}

struct Shared {
    start: Instant,
    interval_ns: u64,
    labels: Vec<String>,
    stop: AtomicBool,
    /// Per worker: the interval it may still flush into (u64::MAX when done).
    marks: Vec<AtomicU64>,
    pending: Mutex<BTreeMap<u64, Vec<(Hist, u64)>>>,
    done: Mutex<Vec<IntervalStat>>,
    totals: Mutex<Vec<(Hist, u64)>>,
    per_ms: Mutex<Vec<u32>>,
    problems: Mutex<Vec<String>>,
    first_errors: Mutex<BTreeMap<String, String>>,
    missed: AtomicU64,
    workers_left: AtomicU64,
    /// When the last worker stopped (ns since start): the run's length for rates, not the
    /// controller's next tick.
    end_ns: AtomicU64,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn problem(&self, msg: String) {
        let mut p = self.problems.lock().unwrap();
        if !p.contains(&msg) {
            p.push(msg);
        }
    }
    fn flush(&self, idx: u64, hists: &mut [(Hist, u64)]) {
        let mut pend = self.pending.lock().unwrap();
        let slot = pend.entry(idx).or_insert_with(|| {
            self.labels
                .iter()
                .map(|_| (stats::interval_hist(), 0))
                .collect()
        });
        for (i, (h, e)) in hists.iter_mut().enumerate() {
            if h.is_empty() && *e == 0 {
                continue;
            }
            stats::merge(&mut slot[i].0, h);
            slot[i].1 += *e;
            h.reset();
            *e = 0;
        }
    }
    /// Turns every interval below every worker's mark into a summary.
    fn finalize(&self, all: bool) {
        let low = if all {
            u64::MAX
        } else {
            self.marks
                .iter()
                .map(|m| m.load(Ordering::Acquire))
                .min()
                .unwrap_or(u64::MAX)
        };
        let secs = self.interval_ns as f64 / 1e9;
        let mut pend = self.pending.lock().unwrap();
        let ready: Vec<u64> = pend.range(..low).map(|(k, _)| *k).collect();
        let mut done = self.done.lock().unwrap();
        for k in ready {
            let Some(slot) = pend.remove(&k) else {
                continue;
            };
            let mut all_h = stats::interval_hist();
            let mut all_e = 0;
            let mut st = IntervalStat {
                t: k as f64 * secs,
                ..Default::default()
            };
            for (i, (h, e)) in slot.iter().enumerate() {
                if h.is_empty() && *e == 0 {
                    continue;
                }
                st.cmds
                    .insert(self.labels[i].clone(), stats::summarize(h, *e, secs));
                stats::merge(&mut all_h, h);
                all_e += e;
            }
            st.all = stats::summarize(&all_h, all_e, secs);
            done.push(st);
        }
    }
}

struct ConnState {
    conn: Conn,
    wbuf: Vec<u8>,
    /// (label index, start ns) of requests written and not yet answered.
    inflight: Vec<(usize, u64)>,
    keygen: KeyGen,
    timeout: Duration,
}

struct Worker {
    group: Group,
    label_base: usize,
    conns: Vec<ConnState>,
    rate: Option<f64>,
    phase_ns: f64,
    requests: Option<u64>,
    rng: Rng,
    values: ValueGen,
    idx: usize,
}

fn pick_cmd(cmds: &[CmdTemplate], total_weight: u32, rng: &mut Rng) -> usize {
    let mut r = rng.below(total_weight as u64) as u32;
    for (i, c) in cmds.iter().enumerate() {
        if r < c.weight {
            return i;
        }
        r -= c.weight;
    }
    cmds.len() - 1
}

impl Worker {
    fn run(mut self, sh: &Shared) {
        let mut hists: Vec<(Hist, u64)> = (0..sh.labels.len())
            .map(|_| (stats::interval_hist(), 0))
            .collect();
        // Whole-run histograms at full precision (interval ones have 2 digits).
        let mut totals: Vec<(Hist, u64)> = (0..sh.labels.len())
            .map(|_| (stats::total_hist(), 0))
            .collect();
        let mut cur_iv = 0u64;
        let mut per_ms: Vec<u32> = Vec::new();
        let total_w: u32 = self.group.commands.iter().map(|c| c.weight).sum();
        let mut scheduled = 0u64; // open loop: requests issued so far
        let mut issued = 0u64;
        let mut key = Vec::with_capacity(64);
        let mut value = Vec::new();
        let period_ns = self.rate.map(|r| 1e9 / r);
        'outer: loop {
            if sh.stop.load(Ordering::Relaxed) {
                break;
            }
            // Nothing is in flight here (lock step), so an idle worker can hand over its
            // interval and move its mark: a slow open-loop worker does not hold back the
            // finalizing of intervals (and the progress line).
            let iv = sh.now_ns() / sh.interval_ns;
            if iv != cur_iv {
                sh.flush(cur_iv, &mut hists);
                cur_iv = iv;
                sh.marks[self.idx].store(iv, Ordering::Release);
            }
            if let Some(n) = self.requests {
                if issued >= n {
                    break;
                }
            }
            let now = sh.now_ns();
            let mut due = match period_ns {
                Some(p) => {
                    let d =
                        ((now as f64 - self.phase_ns) / p).floor() as i64 + 1 - scheduled as i64;
                    d.max(0) as u64
                }
                None => u64::MAX,
            };
            if due == 0 {
                // Sleep until the next intended send time (bounded so stop is noticed).
                let next = self.phase_ns + scheduled as f64 * period_ns.unwrap_or(0.0);
                let wait = (next - now as f64).clamp(0.0, 5e6) as u64;
                std::thread::sleep(Duration::from_nanos(wait));
                continue;
            }
            for c in self.conns.iter_mut() {
                let mut n = (self.group.pipeline as u64).min(due);
                if let Some(lim) = self.requests {
                    n = n.min(lim - issued);
                }
                for _ in 0..n {
                    let ci = pick_cmd(&self.group.commands, total_w, &mut self.rng);
                    let cmd = &self.group.commands[ci];
                    let k = c.keygen.next(&mut self.rng);
                    key_name(&self.group.key_prefix, k, &mut key);
                    let vlen = self.group.value.pick(&mut self.rng);
                    if cmd.args.iter().any(|a| matches!(a, Arg::Value)) {
                        value.clear();
                        self.values.append(&key, vlen, &mut value);
                    }
                    c.wbuf
                        .extend_from_slice(format!("*{}\r\n", cmd.args.len()).as_bytes());
                    for a in &cmd.args {
                        let b: &[u8] = match a {
                            Arg::Lit(l) => l,
                            Arg::Key => &key,
                            Arg::Value => &value,
                        };
                        c.wbuf
                            .extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                        c.wbuf.extend_from_slice(b);
                        c.wbuf.extend_from_slice(b"\r\n");
                    }
                    let start = match period_ns {
                        Some(p) => (self.phase_ns + scheduled as f64 * p) as u64,
                        None => 0, // set at write time below
                    };
                    c.inflight.push((self.label_base + ci, start));
                    scheduled += 1;
                    issued += 1;
                }
                if period_ns.is_some() {
                    due -= n;
                }
            }
            for c in self.conns.iter_mut() {
                if c.wbuf.is_empty() {
                    continue;
                }
                let sent_at = sh.now_ns();
                if period_ns.is_none() {
                    for r in c.inflight.iter_mut() {
                        r.1 = sent_at;
                    }
                }
                if let Err(e) = c.conn.write_all(&c.wbuf) {
                    sh.problem(format!(
                        "write failed at t={:.2}s: {e} (server gone?)",
                        sent_at as f64 / 1e9
                    ));
                    sh.stop.store(true, Ordering::Relaxed);
                    break 'outer;
                }
                c.wbuf.clear();
            }
            for c in self.conns.iter_mut() {
                for j in 0..c.inflight.len() {
                    let (label, start) = c.inflight[j];
                    let r = match c.conn.read_reply(false) {
                        Ok(r) => r,
                        Err(e) => {
                            let t = sh.now_ns() as f64 / 1e9;
                            let msg = if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) {
                                format!(
                                    "no reply within the {:?} timeout at t={t:.2}s: server stalled",
                                    c.timeout
                                )
                            } else {
                                format!("connection lost at t={t:.2}s: {e}")
                            };
                            sh.problem(msg);
                            sh.stop.store(true, Ordering::Relaxed);
                            break 'outer;
                        }
                    };
                    let done = sh.now_ns();
                    let iv = done / sh.interval_ns;
                    if iv != cur_iv {
                        sh.flush(cur_iv, &mut hists);
                        cur_iv = iv;
                        sh.marks[self.idx].store(iv, Ordering::Release);
                    }
                    if let Reply::Error(msg) = &r {
                        hists[label].1 += 1;
                        totals[label].1 += 1;
                        let mut fe = sh.first_errors.lock().unwrap();
                        fe.entry(sh.labels[label].clone())
                            .or_insert_with(|| msg.clone());
                    } else {
                        let us = done.saturating_sub(start) / 1000;
                        stats::record(&mut hists[label].0, us);
                        stats::record(&mut totals[label].0, us);
                    }
                    let ms = (done / 1_000_000) as usize;
                    if ms < 24 * 3600 * 1000 {
                        if per_ms.len() <= ms {
                            per_ms.resize(ms + 1, 0);
                        }
                        per_ms[ms] += 1;
                    }
                }
                c.inflight.clear();
            }
        }
        // Open loop: count what was due but never sent.
        if let Some(p) = period_ns {
            let now = sh.now_ns() as f64;
            let due_total = ((now - self.phase_ns) / p).floor().max(0.0) as u64 + 1;
            let mut due_total = due_total;
            if let Some(n) = self.requests {
                due_total = due_total.min(n);
            }
            sh.missed
                .fetch_add(due_total.saturating_sub(scheduled), Ordering::Relaxed);
        }
        sh.flush(cur_iv, &mut hists);
        {
            let mut tot = sh.totals.lock().unwrap();
            for (i, (h, e)) in totals.iter().enumerate() {
                stats::merge(&mut tot[i].0, h);
                tot[i].1 += e;
            }
        }
        {
            let mut g = sh.per_ms.lock().unwrap();
            if g.len() < per_ms.len() {
                g.resize(per_ms.len(), 0);
            }
            for (i, c) in per_ms.iter().enumerate() {
                g[i] += c;
            }
        }
        sh.marks[self.idx].store(u64::MAX, Ordering::Release);
        sh.end_ns.fetch_max(sh.now_ns(), Ordering::AcqRel);
        sh.workers_left.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Validates a group's knobs; the messages are what the user sees.
fn check_group(g: &Group) -> Result<(), String> {
    if g.connections == 0 || g.threads == 0 || g.pipeline == 0 {
        return Err("connections, threads and pipeline must be at least 1".into());
    }
    if g.commands.is_empty() {
        return Err("no commands to send".into());
    }
    if let Some(r) = g.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("rate must be a positive number, got {r}"));
        }
        if r > 50_000_000.0 {
            return Err(format!(
                "rate {r}/s is impossible for one load generator (max 50M/s)"
            ));
        }
    }
    if g.keys == 0 {
        return Err("key space must have at least 1 key".into());
    }
    Ok(())
}

fn info_map(conn: &mut Conn) -> Result<BTreeMap<String, String>, String> {
    match conn
        .call_str(&["INFO", "everything"])
        .map_err(|e| e.to_string())?
    {
        Reply::Bulk(Some(b)) => Ok(resp::parse_info(&String::from_utf8_lossy(&b))
            .into_iter()
            .collect()),
        Reply::Error(e) => Err(format!("INFO failed: {e}")),
        other => Err(format!("unexpected INFO reply {other:?}")),
    }
}

/// Runs the load. Returns an error only when nothing could run (bad knobs, unreachable
/// server); a run that breaks midway returns its partial result with `problems` filled.
pub fn run(spec: &RunSpec) -> Result<RunResult, String> {
    for g in &spec.groups {
        check_group(g)?;
    }
    if spec.duration.is_none() && spec.groups.iter().any(|g| g.requests.is_none()) {
        return Err("give a duration or a request count".into());
    }
    let max_value = spec.groups.iter().map(|g| g.value.max).max().unwrap_or(0);
    let values = ValueGen::new(spec.value_entropy, spec.seed, max_value);
    if spec.groups.iter().any(|g| {
        g.commands
            .iter()
            .any(|c| c.args.iter().any(|a| matches!(a, Arg::Value)))
    }) {
        eprintln!("values: {}", spec.value_entropy.describe());
    }

    // Connect everything first: an unreachable server fails here, before any thread starts.
    let mut labels = Vec::new();
    let mut workers = Vec::new();
    for g in &spec.groups {
        let base = labels.len();
        labels.extend(g.commands.iter().map(|c| g.label(c)));
        let threads = g.threads.min(g.connections);
        let mut seq_offset = 0u64;
        for t in 0..threads {
            let nconn = g.connections / threads + usize::from(t < g.connections % threads);
            let mut conns = Vec::new();
            let reqs = g
                .requests
                .map(|n| n / threads as u64 + u64::from((t as u64) < n % threads as u64));
            // Sequential walkers start where the previous worker's share ends, so a fill
            // with `requests = keys` writes every key once.
            // With one connection per worker and a request count, the walkers tile the key
            // space exactly (worker t starts where worker t-1's requests end).
            let share = g.keys / threads as u64;
            let worker_start = match reqs {
                Some(r) if nconn == 1 => {
                    let s = seq_offset;
                    seq_offset += r;
                    s
                }
                _ => t as u64 * share,
            };
            for ci in 0..nconn {
                let conn = spec.target.connect()?;
                let start = worker_start + ci as u64 * (share / nconn.max(1) as u64);
                conns.push(ConnState {
                    conn,
                    wbuf: Vec::new(),
                    inflight: Vec::new(),
                    keygen: KeyGen::new(g.keys, g.dist.clone(), start),
                    timeout: spec.target.timeout,
                });
            }
            let rate = g.rate.map(|r| r / threads as f64);
            workers.push(Worker {
                group: g.clone(),
                label_base: base,
                conns,
                rate,
                phase_ns: rate.map_or(0.0, |r| 1e9 / r * t as f64 / threads as f64),
                requests: reqs,
                rng: Rng::new(spec.seed ^ ((workers.len() as u64 + 1) << 32)),
                values: values.clone(),
                idx: workers.len(),
            });
        }
    }
    let mut side = if spec.info_fields.is_empty() && spec.events.is_empty() {
        None
    } else {
        Some(spec.target.connect()?)
    };
    let target_rate: Option<f64> = {
        let rates: Vec<f64> = spec.groups.iter().filter_map(|g| g.rate).collect();
        if rates.is_empty() {
            None
        } else {
            Some(rates.iter().sum())
        }
    };

    let nworkers = workers.len();
    let sh = Arc::new(Shared {
        start: Instant::now(),
        interval_ns: spec.interval.as_nanos().max(1_000_000) as u64,
        labels: labels.clone(),
        stop: AtomicBool::new(false),
        marks: (0..nworkers).map(|_| AtomicU64::new(0)).collect(),
        pending: Mutex::new(BTreeMap::new()),
        done: Mutex::new(Vec::new()),
        totals: Mutex::new(labels.iter().map(|_| (stats::total_hist(), 0)).collect()),
        per_ms: Mutex::new(Vec::new()),
        problems: Mutex::new(Vec::new()),
        first_errors: Mutex::new(BTreeMap::new()),
        missed: AtomicU64::new(0),
        workers_left: AtomicU64::new(nworkers as u64),
        end_ns: AtomicU64::new(0),
    });
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| {
            let sh = sh.clone();
            std::thread::spawn(move || w.run(&sh))
        })
        .collect();

    // The controller (this thread): samples memory and INFO, fires events, decides when
    // to stop, prints progress.
    let mut samples = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut next_event = 0usize;
    let mut waiting: Option<(usize, Instant)> = None; // event index, deadline
                                                      // The connection of an event aimed at another server (`EventSpec::target`).
    let mut event_side: Option<Conn> = None;
    let tty = spec.progress && std::io::stdout().is_terminal();
    let mut tick = 0u64;
    let mut next_pss = Duration::ZERO;
    loop {
        tick += 1;
        let next_tick = sh.start + spec.interval * tick as u32;
        let now = Instant::now();
        if next_tick > now {
            std::thread::sleep(next_tick - now);
        }
        let t = sh.start.elapsed();
        let ts = t.as_secs_f64();
        // Memory and INFO.
        let mut s = Sample {
            t: ts,
            ..Default::default()
        };
        if let Some(pid) = spec.pid {
            s.rss_kb = procmem::rss_kb(pid);
            // PSS is what counts a fork child's copy-on-write pages once, but reading it
            // walks every page table of the process (tens of ms for a multi-GB server,
            // with its mmap lock held): read every 20 ms it kept a core busy and stalled
            // the server under test, and even once a second it can stall a page fault of
            // the server behind the lock. So PSS is read (every PSS_INTERVAL) only while
            // the server has children (a fork-based snapshot); without children the
            // footprint of the single process is its RSS, a counter.
            let children = procmem::children(pid);
            if children.is_empty() {
                s.tree_pss_kb = s.rss_kb;
            } else if t >= next_pss {
                next_pss = t + PSS_INTERVAL;
                s.pss_kb = procmem::pss_kb(pid);
                s.tree_pss_kb = s.pss_kb.map(|own| {
                    own + children
                        .iter()
                        .filter_map(|&c| procmem::pss_kb(c))
                        .sum::<u64>()
                });
            }
        }
        let mut info = None;
        // An event on another server is polled on its own connection.
        let mut event_info = None;
        if let (Some((ei, _)), Some(c)) = (waiting, event_side.as_mut()) {
            match info_map(c) {
                Ok(m) => event_info = Some(m),
                Err(e) => {
                    sh.problem(format!(
                        "connection to {}: {e} at t={ts:.2}s",
                        spec.events[ei].command.join(" ")
                    ));
                    event_side = None;
                }
            }
        }
        if let Some(c) = side.as_mut() {
            let own_wait = waiting.is_some_and(|(ei, _)| spec.events[ei].target.is_none());
            if !spec.info_fields.is_empty() || own_wait {
                match info_map(c) {
                    Ok(m) => info = Some(m),
                    Err(e) => {
                        sh.problem(format!("side connection: {e} at t={ts:.2}s"));
                        side = None;
                    }
                }
            }
        }
        if let Some(m) = &info {
            for f in &spec.info_fields {
                if let Some(v) = m.get(f) {
                    s.info.insert(f.clone(), v.clone());
                }
            }
        }
        samples.push(s);
        // Events.
        if let Some((ei, deadline)) = waiting {
            let ev = &spec.events[ei];
            let (polled, conn_lost) = if ev.target.is_some() {
                (event_info.as_ref(), event_side.is_none())
            } else {
                (info.as_ref(), side.is_none())
            };
            let busy = polled.and_then(|m| ev.busy(m));
            match busy {
                Some(false) => {
                    events[ei].end = Some(ts);
                    waiting = None;
                    event_side = None;
                }
                _ if Instant::now() > deadline || conn_lost => {
                    sh.problem(format!(
                        "{} still in progress ({}) after {:?}: gave up waiting",
                        events[ei].name,
                        ev.wait_text(),
                        ev.timeout
                    ));
                    waiting = None;
                    event_side = None;
                }
                _ => {}
            }
        }
        if waiting.is_none() && next_event < spec.events.len() && t >= spec.events[next_event].at {
            let ev = &spec.events[next_event];
            let args: Vec<&str> = ev.command.iter().map(|s| s.as_str()).collect();
            if let Some(t) = &ev.target {
                match t.connect() {
                    Ok(c) => event_side = Some(c),
                    Err(e) => sh.problem(format!(
                        "{}: cannot connect to {}: {e}",
                        ev.command.join(" "),
                        t.addr
                    )),
                }
            }
            let start = sh.start.elapsed().as_secs_f64();
            let conn = if ev.target.is_some() {
                event_side.as_mut()
            } else {
                side.as_mut()
            };
            let mut lost = conn.is_none();
            let reply = match conn {
                Some(c) => match c.call_str(&args) {
                    Ok(Reply::Simple(s)) => s,
                    Ok(Reply::Error(e)) => {
                        sh.problem(format!("{} failed: {e}", ev.command.join(" ")));
                        format!("-{e}")
                    }
                    Ok(r) => format!("{r:?}"),
                    Err(e) => {
                        sh.problem(format!("{} failed: {e}", ev.command.join(" ")));
                        lost = true;
                        String::new()
                    }
                },
                None => String::new(),
            };
            if lost {
                if ev.target.is_some() {
                    event_side = None;
                } else {
                    side = None;
                }
            }
            let ok = !reply.starts_with('-') && !lost;
            events.push(Event {
                name: ev.command.join(" "),
                start,
                end: None,
                reply,
            });
            if ok && ev.waits() {
                waiting = Some((next_event, Instant::now() + ev.timeout));
            } else if ok {
                events.last_mut().unwrap().end = Some(start);
            }
            next_event += 1;
        }
        sh.finalize(false);
        if tty {
            let done = sh.done.lock().unwrap();
            if let Some(last) = done.last() {
                let a = &last.all;
                print!(
                    "\r\x1b[K{:6.1}s  {:>9.0} req/s  p50 {:>8}  p99 {:>8}  max {:>8}{}",
                    ts,
                    a.rate,
                    stats::fmt_us(a.p50),
                    stats::fmt_us(a.p99),
                    stats::fmt_us(a.max),
                    if waiting.is_some() {
                        "  [event running]"
                    } else {
                        ""
                    }
                );
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
        }
        let last_end = events.iter().filter_map(|e| e.end).fold(0.0f64, f64::max);
        let events_done = waiting.is_none()
            && next_event >= spec.events.len()
            && ts >= last_end + spec.after_events.as_secs_f64();
        let workers_done = sh.workers_left.load(Ordering::Acquire) == 0;
        let time_up = spec.duration.is_some_and(|d| t >= d);
        if workers_done || (time_up && events_done) || t >= spec.max_time {
            if t >= spec.max_time && !workers_done && !(time_up && events_done) {
                sh.problem(format!(
                    "run stopped at its time bound ({:?})",
                    spec.max_time
                ));
            }
            break;
        }
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    sh.stop.store(true, Ordering::Relaxed);
    for h in handles {
        if h.join().is_err() {
            sh.problem("a worker thread panicked".into());
        }
    }
    if tty {
        println!();
    }
    let elapsed = match sh.end_ns.load(Ordering::Acquire) {
        0 => sh.start.elapsed().as_secs_f64(),
        ns => ns as f64 / 1e9,
    };
    sh.finalize(true);
    let mut r = RunResult {
        elapsed,
        interval_ms: (sh.interval_ns / 1_000_000),
        intervals: std::mem::take(&mut *sh.done.lock().unwrap()),
        samples,
        events,
        per_ms: std::mem::take(&mut *sh.per_ms.lock().unwrap()),
        missed: sh.missed.load(Ordering::Relaxed),
        target_rate,
        first_errors: sh.first_errors.lock().unwrap().clone(),
        problems: sh.problems.lock().unwrap().clone(),
        value_entropy: spec.value_entropy.name().into(),
        ..Default::default()
    };
    r.intervals.sort_by(|a, b| a.t.total_cmp(&b.t));
    let tot = sh.totals.lock().unwrap();
    let mut all = stats::total_hist();
    let mut all_e = 0;
    for (i, (h, e)) in tot.iter().enumerate() {
        r.totals
            .cmds
            .insert(labels[i].clone(), stats::summarize(h, *e, elapsed));
        stats::merge(&mut all, h);
        all_e += e;
    }
    r.totals.all = stats::summarize(&all, all_e, elapsed);
    if let Some(tr) = target_rate {
        let achieved = (r.totals.all.count + r.totals.all.errors) as f64 / elapsed;
        if achieved < tr * 0.9 || r.missed as f64 > tr * 0.05 * elapsed {
            r.problems.push(format!(
                "target rate {tr:.0}/s not reached: achieved {achieved:.0}/s, {} requests never sent \
                 (raise connections/pipeline/threads, or the server cannot keep up)",
                r.missed
            ));
        }
    }
    for (label, e) in &r.first_errors {
        let n = r.totals.cmds.get(label).map_or(0, |s| s.errors);
        r.problems
            .push(format!("{label}: {n} error replies, first: {e}"));
    }
    r.complete = r.problems.is_empty();
    Ok(r)
}
