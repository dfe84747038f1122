//! Command line (clap derive). Scenario knobs are Options so each scenario applies its own
//! defaults (aof: SET:GET 1:3 with 1000 B values; noise: 1 KB GETs...).

use crate::keys::{KeyDist, ValueSize};
use crate::values::ValueEntropy;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "cairn-bench",
    version,
    about = "Load generator for RESP2 servers (cairn, Redis, Valkey)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
    /// Draw two result files on one plot: --compare a.json b.json
    #[arg(long, num_args = 2, value_names = ["A_JSON", "B_JSON"])]
    pub compare: Option<Vec<PathBuf>>,
    /// With --compare: the run to take from each file (default: the first).
    #[arg(long)]
    pub run: Option<String>,
    /// Directory for the results JSON and SVG plots.
    #[arg(long, short = 'o', default_value = "bench-out", global = true)]
    pub out: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Plain load with the given knobs; prints per-command throughput and latency.
    Run(RunArgs),
    /// Steady load, then BGSAVE (or --event) at --at: duration, extra memory, freeze, recovery.
    Snapshot(SnapshotArgs),
    /// Starts cairn-server and redis-server in turn and runs the snapshot comparison
    /// (fill, bounded SET load, PING probe, BGSAVE, restart time); one table side by side.
    SnapshotVs(SnapshotVsArgs),
    /// Starts a primary and an empty replica per configuration (cairn by image, cairn by
    /// RDB, Redis diskless, Redis disk-based): fill, bounded SET load, PING probe on the
    /// primary, REPLICAOF sent to the replica; time to online, the primary's extra memory
    /// and latency, bytes sent, the replica verified (DBSIZE, DEBUG DIGEST).
    ReplicaVs(ReplicaVsArgs),
    /// SET:GET 1:3, 1000 B values, key space scaled to the box: p50/p99 per command.
    Aof(RunArgs),
    /// Seed 001's AOF benchmark as the seed ran it: SET:GET 1:3, 1000 B values, keys
    /// preloaded, every connection driven on its own (event loop, one request in flight).
    AofSeed(AofSeedArgs),
    /// 1 KB GETs at a rate, without then with N/s 10 MB GETs on other connections.
    Noise(NoiseArgs),
    /// Zipf reads over a data set larger than maxmemory.
    Tiering(TieringArgs),
    /// Issue #19's tiering benchmark side by side: cairn with a tier file, cairn all in
    /// RAM and Redis with allkeys-lru, each started here and filled with the same keys;
    /// reads and 90/10 read/write per key distribution and connection count, every GET
    /// verified; fio's 4 KiB random reads at the same queue depths; cairn-tiered read back
    /// before and after a SAVE and restart.
    TieringVs(TieringVsArgs),
    /// No server: what one synchronous write-protect fault costs the writing thread with
    /// the fault handler and a streaming reader in this process or in a helper process.
    UffdProbe(UffdProbeArgs),
    /// The helper process of `uffd-probe` (started by it).
    #[command(hide = true)]
    UffdProbeChild(UffdProbeChildArgs),
}

#[derive(Args, Debug, Clone)]
pub struct UffdProbeArgs {
    /// Region size (MiB), populated before each run.
    #[arg(long, default_value_t = 1024)]
    pub mib: usize,
    /// Faulting stores per second (open loop).
    #[arg(long, default_value_t = 20000)]
    pub rate: u64,
    /// Seconds per run (fewer if half the region's pages would be written first).
    #[arg(long, default_value_t = 3.0)]
    pub secs: f64,
    /// Rounds; each runs every placement once, in the order given.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Comma-separated placements: a, a0, a1, n, b, c, c0, c1, u, us, ur, v, vs, vr (see the module's documentation or
    /// BENCHMARKS.md, "Where a write fault's time goes").
    #[arg(long, default_value = "a,a0,n,b,c,c0")]
    pub placements: String,
    /// The writer's CPU (the executor's, in cairn).
    #[arg(long, default_value_t = 0)]
    pub writer_cpu: usize,
    /// The handler lifts a protection without waking the writer, then wakes it with
    /// UFFDIO_WAKE, and reports the wake's time apart.
    #[arg(long)]
    pub split_wake: bool,
}

#[derive(Args, Debug, Clone)]
pub struct UffdProbeChildArgs {
    #[arg(long)]
    pub ctl_fd: i32,
    #[arg(long)]
    pub parent: u32,
    #[arg(long)]
    pub base: u64,
    #[arg(long)]
    pub len: u64,
    #[arg(long)]
    pub uffd_fd: Option<i32>,
    #[arg(long)]
    pub handler_cpu: Option<usize>,
    #[arg(long)]
    pub reader_away_from: usize,
    #[arg(long)]
    pub no_reader: bool,
    #[arg(long)]
    pub split_wake: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ConnArgs {
    /// Server host.
    #[arg(long = "host", short = 'H', default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, short = 'p', default_value_t = 6379)]
    pub port: u16,
    /// AUTH password.
    #[arg(long, short = 'a')]
    pub password: Option<String>,
    /// Timeout (seconds) for every connect, read and write.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Server pid for RSS/PSS sampling (default: found from the port if the server is local).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Recording interval in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub interval_ms: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No live progress line.
    #[arg(long)]
    pub quiet: bool,
    /// INFO fields to record every interval (comma separated).
    #[arg(long, value_delimiter = ',')]
    pub info: Vec<String>,
    /// Hard bound on one run (seconds), whatever happens.
    #[arg(long, default_value_t = 3600.0)]
    pub max_time: f64,
    /// Values' compressibility: random (incompressible), text (words) or repeat (one
    /// shared buffer for every key). Values other than repeat are derived from the key and
    /// --seed, so each key holds its own bytes.
    #[arg(long, default_value = "random")]
    pub value_entropy: ValueEntropy,
    /// Same as --value-entropy random (kept so older recorded commands still run).
    #[arg(long, hide = true)]
    pub distinct_values: bool,
}

#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Connections (total).
    #[arg(long, short = 'c')]
    pub connections: Option<usize>,
    /// Worker threads (each drives connections/threads connections).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
    /// Requests in flight per connection (pipelining).
    #[arg(long, short = 'P')]
    pub pipeline: Option<usize>,
    /// Key space size.
    #[arg(long, short = 'k')]
    pub keys: Option<u64>,
    /// Key distribution: uniform, zipf[:ALPHA] (default 0.99), sequential.
    #[arg(long)]
    pub dist: Option<KeyDist>,
    /// Value size in bytes, fixed ("100", "1k") or a range ("100-1000").
    #[arg(long, short = 'd')]
    pub value_size: Option<ValueSize>,
    /// SET:GET ratio, e.g. 1:10.
    #[arg(long)]
    pub ratio: Option<String>,
    /// Command mix instead of --ratio: "WEIGHT:CMD ARGS" with {key} and {value}, repeatable.
    /// e.g. --command "3:GET {key}" --command "1:INCR counter"
    #[arg(long = "command")]
    pub commands: Vec<String>,
    /// Seconds of load.
    #[arg(long, short = 'T')]
    pub duration: Option<f64>,
    /// Total requests (instead of a duration).
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Open loop at this many requests/s in total (latency from the intended send time).
    /// Without it: closed loop, as fast as the server answers.
    #[arg(long, short = 'r')]
    pub rate: Option<f64>,
    /// Load this many keys first (pipelined SETs); scenarios default to --keys.
    #[arg(long)]
    pub fill: Option<u64>,
    /// Skip the fill phase of a scenario (the data is already there).
    #[arg(long)]
    pub no_fill: bool,
    /// Pipeline depth of the fill phase.
    #[arg(long, default_value_t = 64)]
    pub fill_pipeline: usize,
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Args, Debug, Clone)]
pub struct AofSeedArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Connections (total), each with one request outstanding.
    #[arg(long, short = 'c', default_value_t = 50)]
    pub connections: usize,
    /// Worker threads (each owns connections/threads connections and one epoll set).
    #[arg(long, short = 't', default_value_t = 2)]
    pub threads: usize,
    /// Keys, all preloaded before the load so every GET hits.
    #[arg(long, short = 'k', default_value_t = 100_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(long, short = 'd', default_value_t = 1000)]
    pub value_size: usize,
    /// SET:GET ratio.
    #[arg(long, default_value = "1:3")]
    pub ratio: String,
    /// Seconds of load (default 10 unless --requests is given).
    #[arg(long, short = 'T')]
    pub duration: Option<f64>,
    /// Total requests instead of a duration.
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Seconds of load before the recorded --duration (not recorded: the connections' first
    /// burst drains).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Skip the preload (the keys are already there, written with the same --seed).
    #[arg(long)]
    pub no_fill: bool,
    /// Pipeline depth of the preload.
    #[arg(long, default_value_t = 64)]
    pub fill_pipeline: usize,
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
}

#[derive(Args, Debug, Clone)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Seconds of steady load before the snapshot command.
    #[arg(long, default_value_t = 3.0)]
    pub at: f64,
    /// The command to send (space separated).
    #[arg(long, default_value = "BGSAVE")]
    pub event: String,
    /// INFO field polled until it reads 0 to find the end.
    #[arg(long, default_value = "rdb_bgsave_in_progress")]
    pub wait_field: String,
    /// Seconds of load after the snapshot ended (to see recovery).
    #[arg(long, default_value_t = 3.0)]
    pub after: f64,
    /// Give up waiting for the snapshot after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub event_timeout: f64,
}

#[derive(Args, Debug, Clone)]
pub struct SnapshotVsArgs {
    /// cairn-server binary (default: next to this executable).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// redis-server binary (default: `redis-server` from PATH).
    #[arg(long)]
    pub redis: Option<PathBuf>,
    /// Extra arguments for cairn-server (repeatable), e.g. --cairn-arg=--snapshot-threads --cairn-arg=2
    #[arg(long = "cairn-arg", allow_hyphen_values = true)]
    pub cairn_args: Vec<String>,
    /// cairn's `snapshot-mode` (auto, async, sync, cow, stop-the-world).
    #[arg(long)]
    pub snapshot_mode: Option<String>,
    /// Keys filled before the load.
    #[arg(long, short = 'k', default_value_t = 1_000_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(long, short = 'd', default_value_t = 500)]
    pub value_size: u64,
    /// Background SET load, requests/s (open loop).
    #[arg(long, short = 'r', default_value_t = 20_000.0)]
    pub rate: f64,
    /// Connections of the background load.
    #[arg(long, short = 'c', default_value_t = 8)]
    pub connections: usize,
    /// Seconds of load before BGSAVE.
    #[arg(long, default_value_t = 3.0)]
    pub at: f64,
    /// Seconds of load after BGSAVE ended.
    #[arg(long, default_value_t = 2.0)]
    pub after: f64,
    /// Sampling interval (ms): memory, INFO polling for the end of BGSAVE.
    #[arg(long, default_value_t = 20)]
    pub interval_ms: u64,
    /// Run only cairn (for iterating on the engine; the redis column reads n/a).
    #[arg(long)]
    pub cairn_only: bool,
    /// Values' compressibility: random, text or repeat (see `run --help`).
    #[arg(long, default_value = "random")]
    pub value_entropy: ValueEntropy,
    /// Same as --value-entropy random (kept so older recorded commands still run).
    #[arg(long, hide = true)]
    pub distinct_values: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReplicaVsArgs {
    /// cairn-server binary (default: next to this executable).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// redis-server binary (default: `redis-server` from PATH).
    #[arg(long)]
    pub redis: Option<PathBuf>,
    /// Extra arguments for cairn-server, primary and replica (repeatable).
    #[arg(long = "cairn-arg", allow_hyphen_values = true)]
    pub cairn_args: Vec<String>,
    /// Configurations to run, in this order (comma separated): cairn, cairn-rdb,
    /// redis-diskless, redis-disk.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cairn,cairn-rdb,redis-diskless,redis-disk"
    )]
    pub configs: Vec<String>,
    /// Keys filled before the load.
    #[arg(long, short = 'k', default_value_t = 1_000_000)]
    pub keys: u64,
    /// Value size in bytes.
    #[arg(long, short = 'd', default_value_t = 500)]
    pub value_size: u64,
    /// Background SET load on the primary, requests/s (open loop).
    #[arg(long, short = 'r', default_value_t = 20_000.0)]
    pub rate: f64,
    /// Connections of the background load.
    #[arg(long, short = 'c', default_value_t = 8)]
    pub connections: usize,
    /// Seconds of load before REPLICAOF is sent to the replica.
    #[arg(long, default_value_t = 3.0)]
    pub at: f64,
    /// Seconds of load after the replica is online.
    #[arg(long, default_value_t = 2.0)]
    pub after: f64,
    /// Give up waiting for `master_link_status:up` after this many seconds.
    #[arg(long, default_value_t = 1800.0)]
    pub online_timeout: f64,
    /// `client-output-buffer-limit` of the replica class on the primaries (hard soft
    /// seconds): unlimited by default, so a slow full sync is measured, not cut off.
    #[arg(long, default_value = "0 0 0")]
    pub replica_output_limit: String,
    /// Nice value of the replica's threads (every configuration's), 0 to leave it. With
    /// primary and replica on one machine the replica's load competes with the primary's
    /// executor for the same CPUs; a niced replica stands in for one on its own machine.
    #[arg(long, default_value_t = 0)]
    pub replica_nice: i32,
    /// Sampling interval (ms): memory, INFO polling for the replica's link.
    #[arg(long, default_value_t = 20)]
    pub interval_ms: u64,
    /// Values' compressibility: random, text or repeat (see `run --help`).
    #[arg(long, default_value = "random")]
    pub value_entropy: ValueEntropy,
}

#[derive(Args, Debug, Clone)]
pub struct NoiseArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Large GETs per second during the noisy phase.
    #[arg(long, default_value_t = 10.0)]
    pub noise_rate: f64,
    /// Size of the large values.
    #[arg(long, default_value = "10MB")]
    pub noise_size: String,
    /// Connections that send the large GETs.
    #[arg(long, default_value_t = 4)]
    pub noise_connections: usize,
    /// Number of large keys.
    #[arg(long, default_value_t = 4)]
    pub noise_keys: u64,
    /// What the noise connections send: `get` (read the large values) or `set` (write
    /// them, e.g. to load the append-only log).
    #[arg(long, default_value = "get")]
    pub noise_command: String,
}

#[derive(Args, Debug, Clone)]
pub struct TieringArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Data set size as a multiple of maxmemory (when the server has one).
    #[arg(long, default_value_t = 2.0)]
    pub oversize: f64,
}

#[derive(Args, Debug, Clone)]
pub struct TieringVsArgs {
    /// cairn-server binary (default: next to this executable).
    #[arg(long)]
    pub cairn: Option<PathBuf>,
    /// redis-server binary (default: `redis-server` from PATH).
    #[arg(long)]
    pub redis: Option<PathBuf>,
    /// fio binary.
    #[arg(long, default_value = "fio")]
    pub fio: PathBuf,
    /// Extra arguments for both cairn configurations (repeatable).
    #[arg(long = "cairn-arg", allow_hyphen_values = true)]
    pub cairn_args: Vec<String>,
    /// Configurations, in this order (comma separated): cairn-tiered, cairn-ram,
    /// redis-lru, fio.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cairn-tiered,cairn-ram,redis-lru,fio"
    )]
    pub configs: Vec<String>,
    /// Keys filled (key:000000000000 up).
    #[arg(long, short = 'k', default_value_t = 4_000_000)]
    pub keys: u64,
    /// Value size in bytes (incompressible, derived from key and --seed).
    #[arg(long, short = 'd', default_value_t = 4000)]
    pub value_size: usize,
    /// `maxmemory` of cairn-tiered and redis-lru ("4gb", "200mb", bytes).
    #[arg(long, default_value = "4gb")]
    pub maxmemory: String,
    /// The tier file's size (`tiered-max-file-size`) and fio's file: this multiple of the
    /// records' bytes.
    #[arg(long, default_value_t = 1.5)]
    pub tier_file_factor: f64,
    /// Connection counts (comma separated); fio's iodepths are the same.
    #[arg(long, short = 'c', value_delimiter = ',', default_value = "8,32,128")]
    pub connections: Vec<usize>,
    /// Key distributions (comma separated): uniform, zipf:ALPHA.
    #[arg(long, value_delimiter = ',', default_value = "uniform,zipf:0.9")]
    pub dists: Vec<KeyDist>,
    /// Load mixes (comma separated): read, or READ/WRITE percentages such as 90/10.
    #[arg(long, value_delimiter = ',', default_value = "read,90/10")]
    pub mixes: Vec<String>,
    /// Seconds recorded per cell (and per fio run).
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Seconds of load before each cell's recorded span (not recorded).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Client threads of the load.
    #[arg(long, short = 't', default_value_t = 2)]
    pub threads: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Servers' directories, tier files and fio's file go under this directory.
    #[arg(long, default_value = "/tmp/cairn-bench-tiering")]
    pub scratch: PathBuf,
    /// Keep the servers' directories (logs, images) after the run.
    #[arg(long)]
    pub keep_scratch: bool,
    /// Bound (seconds) on each phase: fill, settling, read-back, SAVE, fio's layout.
    #[arg(long, default_value_t = 3600.0)]
    pub phase_timeout: f64,
}
