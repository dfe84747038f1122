//! Counters for INFO stats/commandstats, the slow log and the latency monitor.
//! Every collection here is bounded (slowlog-max-len, LATENCY_HISTORY_LEN).

use super::Client;
use crate::commands::{Args, CommandSpec};
use std::collections::{BTreeMap, VecDeque};

#[derive(Default, Debug, Clone)]
pub struct Stats {
    pub total_connections_received: u64,
    pub total_commands_processed: u64,
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub unknown_commands: u64,
    pub client_query_buffer_limit_disconnections: u64,
    pub client_output_buffer_limit_disconnections: u64,
    pub total_error_replies: u64,
    pub io_threaded_reads_processed: u64,
    pub io_threaded_writes_processed: u64,
}

#[derive(Default, Debug, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// Per-command counters, keyed by Redis's `cmdstat_<name>` / `<parent>|<sub>` names.
#[derive(Default)]
pub struct CommandStats {
    pub by_name: BTreeMap<String, CommandStat>,
}

impl CommandStats {
    pub fn get_mut(
        &mut self,
        spec: &CommandSpec,
        parent: Option<&CommandSpec>,
    ) -> &mut CommandStat {
        let key = match parent {
            Some(p) => format!("{}|{}", p.name, spec.name),
            None => spec.name.to_string(),
        };
        self.by_name.entry(key).or_default()
    }
    pub fn reset(&mut self) {
        self.by_name.clear();
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
