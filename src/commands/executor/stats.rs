//! Counters for INFO stats/commandstats, the slow log and the latency monitor.
//! Every collection here is bounded (slowlog-max-len, LATENCY_HISTORY_LEN).

use super::Client;
use crate::commands::{Args, CommandSpec};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Debug, Clone)]
pub struct Stats {
    /// Writes refused because the arena's address space had no room (INFO stats
    /// `arena_oom_refusals`).
    pub arena_oom_refusals: u64,
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    /// Clients disconnected by `maxmemory-clients`.
    pub evicted_clients: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Bytes written to replicas' connections (kept out of `net_output_bytes`, as Redis
    /// 7 counts them). With io-threads > 1: the bytes handed to the I/O threads.
    pub net_repl_output_bytes: u64,
    pub unknown_commands: u64,
    pub client_query_buffer_limit_disconnections: u64,
    pub client_output_buffer_limit_disconnections: u64,
    pub total_error_replies: u64,
    /// Read / write handler runs on the executor's socket loop (io-threads 1); the I/O
    /// threads' own are `io_threaded_*` (INFO's totals add both, as Redis's do).
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    /// Time spent in active expiry cycles (INFO `expire_cycle_cpu_milliseconds`).
    pub expire_cycle_time_us: u64,
    /// Since when used memory has been over `maxmemory` with eviction unable to bring it
    /// back under (None: it is not), and the closed periods' total (Redis's eviction
    /// exceeded times).
    pub eviction_exceeded_since: Option<std::time::Instant>,
    pub eviction_exceeded_total_us: u64,
    pub io_threaded_reads_processed: u64,
    pub io_threaded_writes_processed: u64,
    /// Reply bytes written into reply buffers vs. sent by reference to stored values.
    pub reply_bytes_copied: u64,
    pub reply_bytes_referenced: u64,
    /// Error replies by their code (`ERR`, `WRONGTYPE`, ...) for INFO errorstats.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Highest `used_memory` seen (INFO used_memory_peak).
    pub peak_memory: u64,
    pub inst_ops: InstantaneousMetric,
    pub inst_net_input: InstantaneousMetric,
    pub inst_net_output: InstantaneousMetric,
}

/// Distinct error codes tracked before new ones are folded away (Redis caps its error
/// table at 128 codes, so a client inventing codes cannot grow it without bound).
pub const ERROR_STATS_MAX_CODES: usize = 128;

impl Stats {
    /// Counts one error reply; `msg` is the reply text after the `-`.
    pub fn record_error(&mut self, msg: &[u8]) {
        self.total_error_replies += 1;
        let code_end = msg
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(msg.len());
        let code = String::from_utf8_lossy(&msg[..code_end.min(64)]);
        if let Some(n) = self.errors_by_code.get_mut(code.as_ref()) {
            *n += 1;
        } else if self.errors_by_code.len() < ERROR_STATS_MAX_CODES {
            self.errors_by_code.insert(code.into_owned(), 1);
        }
    }

    /// Takes one sample of the instantaneous metrics (called from the cron, ~every 100 ms).
    pub fn sample_instantaneous(&mut self, now_ms: i64) {
        self.inst_ops.sample(now_ms, self.total_commands_processed);
        self.inst_net_input.sample(now_ms, self.net_input_bytes);
        self.inst_net_output.sample(now_ms, self.net_output_bytes);
    }

    /// Eviction ended over (`still_over`) or under `maxmemory`: opens or closes an
    /// exceeded period, as Redis's performEvictions does.
    pub fn eviction_exceeded(&mut self, still_over: bool) {
        match (still_over, self.eviction_exceeded_since) {
            (true, None) => self.eviction_exceeded_since = Some(std::time::Instant::now()),
            (false, Some(t)) => {
                self.eviction_exceeded_total_us += t.elapsed().as_micros() as u64;
                self.eviction_exceeded_since = None;
            }
            _ => {}
        }
    }
    /// (total, current) eviction exceeded time in ms, the current period included in
    /// the total (INFO's figures).
    pub fn eviction_exceeded_ms(&self) -> (u64, u64) {
        let current_us = self
            .eviction_exceeded_since
            .map_or(0, |t| t.elapsed().as_micros() as u64);
        (
            (self.eviction_exceeded_total_us + current_us) / 1000,
            current_us / 1000,
        )
    }

    /// CONFIG RESETSTAT: zeroes the counters (not the instantaneous rings' baselines).
    pub fn reset(&mut self) {
        let keep = (
            self.inst_ops.clone(),
            self.inst_net_input.clone(),
            self.inst_net_output.clone(),
        );
        *self = Stats::default();
        (self.inst_ops, self.inst_net_input, self.inst_net_output) = keep;
        // Re-base the samplers on the zeroed counters.
        self.inst_ops.last_value = 0;
        self.inst_net_input.last_value = 0;
        self.inst_net_output.last_value = 0;
    }
}

/// Samples kept per instantaneous metric (Redis's STATS_METRIC_SAMPLES).
pub const INST_METRIC_SAMPLES: usize = 16;
/// Minimum spacing between two samples (Redis samples every 100 ms).
pub const INST_METRIC_PERIOD_MS: i64 = 100;

/// A per-second rate averaged over the last [`INST_METRIC_SAMPLES`] samples, as Redis's
/// `instantaneous_ops_per_sec`.
#[derive(Default, Debug, Clone)]
pub struct InstantaneousMetric {
    samples: [u64; INST_METRIC_SAMPLES],
    idx: usize,
    last_ms: i64,
    last_value: u64,
}

impl InstantaneousMetric {
    pub fn sample(&mut self, now_ms: i64, value: u64) {
        if self.last_ms == 0 {
            self.last_ms = now_ms;
            self.last_value = value;
            return;
        }
        let dt = now_ms - self.last_ms;
        if dt < INST_METRIC_PERIOD_MS {
            return;
        }
        let delta = value.saturating_sub(self.last_value);
        self.samples[self.idx] = delta.saturating_mul(1000) / dt as u64;
        self.idx = (self.idx + 1) % INST_METRIC_SAMPLES;
        self.last_ms = now_ms;
        self.last_value = value;
    }
    /// Mean rate per second over the ring.
    pub fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / INST_METRIC_SAMPLES as u64
    }
}

#[derive(Default, Debug, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// Per-command counters. The dispatcher updates them on every command, so they are keyed
/// by the address of the command's static `CommandSpec` (unique per command and
/// subcommand) through an identity-style hasher: no string formatting, no tree walk.
/// The display name (`get`, `config|get`) is built once, when a command is first counted.
#[derive(Default)]
pub struct CommandStats {
    by_spec: HashMap<usize, CommandEntry, BuildHasherDefault<AddrHasher>>,
}

/// One command's counters and, once it ran with `latency-tracking yes`, its latency
/// histogram (nanoseconds, Redis's range and precision).
pub struct CommandEntry {
    pub name: String,
    pub stat: CommandStat,
    pub histogram: Option<Box<hdrhistogram::Histogram<u64>>>,
}

/// Redis's latency histogram bounds and precision: 1 ns to 1 s, 2 significant digits.
pub const LATENCY_HISTOGRAM_MIN_NS: u64 = 1;
pub const LATENCY_HISTOGRAM_MAX_NS: u64 = 1_000_000_000;
pub const LATENCY_HISTOGRAM_SIGFIGS: u8 = 2;

impl CommandEntry {
    /// Records one call's latency, clamped to the histogram's range as Redis does.
    #[inline]
    pub fn record_latency_ns(&mut self, ns: u64) {
        let ns = ns.clamp(LATENCY_HISTOGRAM_MIN_NS, LATENCY_HISTOGRAM_MAX_NS);
        let h = self.histogram.get_or_insert_with(|| {
            Box::new(
                hdrhistogram::Histogram::new_with_bounds(
                    LATENCY_HISTOGRAM_MIN_NS,
                    LATENCY_HISTOGRAM_MAX_NS,
                    LATENCY_HISTOGRAM_SIGFIGS,
                )
                .expect("constant bounds are valid"),
            )
        });
        // In range by the clamp above: recording cannot fail.
        let _ = h.record(ns);
    }
}

impl CommandStats {
    #[inline]
    pub fn get_mut(
        &mut self,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
    ) -> &mut CommandStat {
        &mut self.entry(spec, parent).stat
    }
    /// The command's entry, created when it is first counted.
    #[inline]
    pub fn entry(
        &mut self,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
    ) -> &mut CommandEntry {
        let key = spec as *const CommandSpec as usize;
        self.by_spec.entry(key).or_insert_with(|| {
            let name = match parent {
                Some(p) => crate::commands::full_name(p, spec),
                None => spec.name.to_string(),
            };
            CommandEntry {
                name,
                stat: CommandStat::default(),
                histogram: None,
            }
        })
    }
    /// The entries with a latency histogram, sorted by name.
    pub fn histograms(&self) -> Vec<(&str, &hdrhistogram::Histogram<u64>)> {
        let mut v: Vec<_> = self
            .by_spec
            .values()
            .filter_map(|e| e.histogram.as_deref().map(|h| (e.name.as_str(), h)))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }
    /// (name, stats) of every command run since the last reset, sorted by name.
    pub fn sorted(&self) -> Vec<(&str, CommandStat)> {
        let mut v: Vec<(&str, CommandStat)> = self
            .by_spec
            .values()
            .map(|e| (e.name.as_str(), e.stat))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }
    pub fn reset(&mut self) {
        self.by_spec.clear();
    }
}

/// Hashes a pointer-sized key with one multiply (Fibonacci hashing): spec addresses are
/// distinct and well spread, and hashbrown uses the top bits, which the multiply mixes.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Debug, Clone)]
pub struct SlowLogEntry {
    pub id: u64,
    pub time_s: i64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: String,
}

/// Arguments kept per slow log entry, and bytes kept per argument (as Redis).
pub const SLOWLOG_ENTRY_MAX_ARGS: usize = 32;
pub const SLOWLOG_ENTRY_MAX_STRING: usize = 128;

#[derive(Default)]
pub struct SlowLog {
    pub entries: VecDeque<SlowLogEntry>,
    pub next_id: u64,
}

impl SlowLog {
    pub fn push(&mut self, args: Args, duration_us: u64, client: &Client, max_len: usize) {
        let argc = args.len();
        let kept = argc.min(SLOWLOG_ENTRY_MAX_ARGS);
        let mut v = Vec::with_capacity(kept);
        for i in 0..kept {
            if kept != argc && i == kept - 1 {
                v.push(format!("... ({} more arguments)", argc - kept + 1).into_bytes());
                break;
            }
            let a = args.get(i);
            if a.len() > SLOWLOG_ENTRY_MAX_STRING {
                let mut s = a[..SLOWLOG_ENTRY_MAX_STRING].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOWLOG_ENTRY_MAX_STRING).as_bytes(),
                );
                v.push(s);
            } else {
                v.push(a.to_vec());
            }
        }
        self.entries.push_front(SlowLogEntry {
            id: self.next_id,
            time_s: crate::util::now_ms() / 1000,
            duration_us,
            args: v,
            peer: client.addr.clone(),
            name: client
                .name
                .as_ref()
                .map(|n| String::from_utf8_lossy(n).into_owned())
                .unwrap_or_default(),
        });
        self.next_id += 1;
        self.trim(max_len);
    }
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }
}

/// Samples kept per latency event (Redis's LATENCY_TS_LEN).
pub const LATENCY_HISTORY_LEN: usize = 160;

#[derive(Default, Debug, Clone)]
pub struct LatencyEvent {
    /// (unix seconds, ms) newest last.
    pub samples: VecDeque<(i64, u64)>,
    pub max_ms: u64,
}

#[derive(Default)]
pub struct LatencyMonitor {
    pub events: BTreeMap<String, LatencyEvent>,
}

impl LatencyMonitor {
    pub fn add(&mut self, event: &str, ms: u64, now_s: i64) {
        let e = self.events.entry(event.to_string()).or_default();
        e.max_ms = e.max_ms.max(ms);
        match e.samples.back_mut() {
            // One sample per second: keep the largest.
            Some(last) if last.0 == now_s => last.1 = last.1.max(ms),
            _ => {
                e.samples.push_back((now_s, ms));
                if e.samples.len() > LATENCY_HISTORY_LEN {
                    e.samples.pop_front();
                }
            }
        }
    }
    /// LATENCY RESET [event ...]: returns how many events were reset.
    pub fn reset(&mut self, names: &[String]) -> usize {
        if names.is_empty() {
            let n = self.events.len();
            self.events.clear();
            n
        } else {
            names
                .iter()
                .filter(|n| self.events.remove(n.as_str()).is_some())
                .count()
        }
    }
}
