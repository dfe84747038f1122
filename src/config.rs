//! Configuration in redis.conf syntax: the option table (names, types, defaults as Redis 7),
//! loading from a file plus `--option value` arguments, CONFIG GET/SET/REWRITE.
//!
//! Every option Redis 7 knows is in [`OPTIONS`], so an existing redis.conf starts. Options
//! cairn does not act on yet are marked `acted_on: false`: setting one logs a warning once.
//! Values are kept as their canonical CONFIG GET text; [`Settings`] is the typed view the
//! server reads on hot paths, rebuilt after every change.

use crate::util::split_args;
use std::fmt;

#[derive(Clone, Copy, Debug)]
pub enum OptKind {
    Bool,
    /// Integer with inclusive bounds.
    Int(i64, i64),
    /// A size in bytes with Redis's unit suffixes (k, kb, m, mb, g, gb).
    Memory(i64, i64),
    /// A size in bytes or a percentage (`maxmemory-clients`).
    MemoryOrPercent,
    Str,
    Enum(&'static [&'static str]),
    /// Parsed by a dedicated function (save, bind, client-output-buffer-limit, ...).
    Special,
}

pub const F_IMMUTABLE: u32 = 1;
pub const F_SENSITIVE: u32 = 2;
/// Accepted and reported, but cairn does not act on it yet (a warning is logged).
pub const F_NOT_ACTED: u32 = 4;
/// May be given more than once in a config file (values accumulate).
pub const F_MULTI: u32 = 8;
/// Refused by CONFIG SET unless `enable-protected-configs` allows it (Redis's PROTECTED_CONFIG).
pub const F_PROTECTED: u32 = 16;
/// Accepted in a config file but never shown by CONFIG GET nor set by CONFIG SET
/// (directives such as `include`, options Redis 7.0 deprecated, and later Redis
/// versions' options kept so their files load).
pub const F_UNLISTED: u32 = 32;
/// Not listed by CONFIG GET patterns, only by its exact name (Redis's HIDDEN_CONFIG).
pub const F_HIDDEN: u32 = 64;
/// A feature cairn does not build: the default value is accepted (a Redis config file
/// naming it starts), any other is refused at startup and by CONFIG SET.
pub const F_UNBUILT: u32 = 128;

#[derive(Clone, Copy, Debug)]
pub struct OptSpec {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub kind: OptKind,
    pub default: &'static str,
    pub flags: u32,
}

const fn opt(name: &'static str, kind: OptKind, default: &'static str, flags: u32) -> OptSpec {
    OptSpec {
        name,
        alias: None,
        kind,
        default,
        flags,
    }
}
const fn aliased(
    name: &'static str,
    alias: &'static str,
    kind: OptKind,
    default: &'static str,
    flags: u32,
) -> OptSpec {
    OptSpec {
        name,
        alias: Some(alias),
        kind,
        default,
        flags,
    }
}

const I64MAX: i64 = i64::MAX;
const INTMAX: i64 = i32::MAX as i64;
const LONGMAX: i64 = i64::MAX;
const NA: u32 = F_NOT_ACTED;
const IMM: u32 = F_IMMUTABLE;
const HID: u32 = F_UNLISTED;
const UNB: u32 = F_UNBUILT;
const UINTMAX: i64 = u32::MAX as i64;
const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];
const YES_NO_ENABLE: &[&str] = &["no", "yes", "local"];
const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];
const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// Redis 7.0's options (config.c), with cairn's own at the end.
pub static OPTIONS: &[OptSpec] = &[
    // --- network and clients (acted on)
    opt("bind", OptKind::Special, "127.0.0.1 -::1", 0),
    opt("port", OptKind::Int(0, 65535), "6379", 0),
    opt("protected-mode", OptKind::Bool, "yes", 0),
    opt("timeout", OptKind::Int(0, INTMAX), "0", 0),
    opt("tcp-keepalive", OptKind::Int(0, INTMAX), "300", 0),
    opt("tcp-backlog", OptKind::Int(0, INTMAX), "511", IMM),
    opt("maxclients", OptKind::Int(1, UINTMAX), "10000", 0),
    opt("requirepass", OptKind::Str, "", F_SENSITIVE),
    opt("io-threads", OptKind::Int(1, 128), "1", IMM),
    opt("io-threads-do-reads", OptKind::Bool, "no", IMM),
    opt(
        "proto-max-bulk-len",
        OptKind::Memory(1024 * 1024, LONGMAX),
        "536870912",
        0,
    ),
    opt(
        "client-query-buffer-limit",
        OptKind::Memory(1024 * 1024, LONGMAX),
        "1073741824",
        0,
    ),
    opt("client-output-buffer-limit", OptKind::Special, "", 0),
    // Valkey's names: bulk replies this long or longer are sent by reference to the
    // stored value (writev from the arena) instead of being copied into the reply buffer.
    opt(
        "min-string-size-avoid-copy-reply",
        OptKind::Memory(0, LONGMAX),
        "16384",
        0,
    ),
    opt(
        "min-string-size-avoid-copy-reply-threaded",
        OptKind::Memory(0, LONGMAX),
        "65536",
        0,
    ),
    opt("databases", OptKind::Int(1, INTMAX), "16", IMM),
    // Out-of-range values are clamped to 1..=500 (as Redis), see `Config::canonical`.
    opt("hz", OptKind::Int(0, INTMAX), "10", 0),
    opt("dynamic-hz", OptKind::Bool, "yes", 0),
    opt(
        "enable-debug-command",
        OptKind::Enum(YES_NO_ENABLE),
        "no",
        IMM,
    ),
    opt(
        "enable-protected-configs",
        OptKind::Enum(YES_NO_ENABLE),
        "no",
        IMM,
    ),
    opt(
        "enable-module-command",
        OptKind::Enum(YES_NO_ENABLE),
        "no",
        IMM | NA,
    ),
    // --- logging and process
    opt("loglevel", OptKind::Enum(LOGLEVELS), "notice", 0),
    opt("logfile", OptKind::Str, "", IMM),
    opt("dir", OptKind::Special, "", F_PROTECTED),
    opt("pidfile", OptKind::Str, "", IMM),
    opt("daemonize", OptKind::Bool, "no", IMM),
    opt(
        "supervised",
        OptKind::Enum(&["no", "upstart", "systemd", "auto"]),
        "no",
        IMM | NA,
    ),
    opt("syslog-enabled", OptKind::Bool, "no", IMM | NA),
    opt("syslog-ident", OptKind::Str, "redis", IMM | NA),
    opt(
        "syslog-facility",
        OptKind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
        IMM | NA,
    ),
    opt("crash-log-enabled", OptKind::Bool, "yes", NA),
    opt("crash-memcheck-enabled", OptKind::Bool, "yes", NA),
    opt("always-show-logo", OptKind::Bool, "no", IMM | NA),
    opt("set-proc-title", OptKind::Bool, "yes", IMM | NA),
    opt(
        "proc-title-template",
        OptKind::Str,
        "{title} {listen-addr} {server-mode}",
        NA,
    ),
    opt("unixsocket", OptKind::Str, "", IMM),
    opt("unixsocketperm", OptKind::Int(0, 0o777), "0", IMM),
    opt("socket-mark-id", OptKind::Int(0, UINTMAX), "0", IMM | NA),
    opt("locale-collate", OptKind::Str, "", NA | HID),
    // --- memory and eviction (acted on)
    opt("maxmemory", OptKind::Memory(0, LONGMAX), "0", 0),
    opt("maxmemory-policy", OptKind::Enum(POLICIES), "noeviction", 0),
    opt("maxmemory-samples", OptKind::Int(1, INTMAX), "5", 0),
    opt("maxmemory-eviction-tenacity", OptKind::Int(0, 100), "10", 0),
    opt("maxmemory-clients", OptKind::MemoryOrPercent, "0", 0),
    opt("lfu-log-factor", OptKind::Int(0, INTMAX), "10", 0),
    opt("lfu-decay-time", OptKind::Int(0, INTMAX), "1", 0),
    opt("active-expire-effort", OptKind::Int(1, 10), "1", 0),
    opt("lazyfree-lazy-eviction", OptKind::Bool, "no", 0),
    opt("lazyfree-lazy-expire", OptKind::Bool, "no", 0),
    opt("lazyfree-lazy-server-del", OptKind::Bool, "no", 0),
    opt("lazyfree-lazy-user-del", OptKind::Bool, "no", 0),
    opt("lazyfree-lazy-user-flush", OptKind::Bool, "no", 0),
    aliased(
        "replica-lazy-flush",
        "slave-lazy-flush",
        OptKind::Bool,
        "no",
        NA,
    ),
    opt("activerehashing", OptKind::Bool, "yes", 0),
    opt("activedefrag", OptKind::Bool, "no", NA),
    opt(
        "active-defrag-ignore-bytes",
        OptKind::Memory(1, LONGMAX),
        "104857600",
        NA,
    ),
    opt(
        "active-defrag-threshold-lower",
        OptKind::Int(0, 1000),
        "10",
        NA,
    ),
    opt(
        "active-defrag-threshold-upper",
        OptKind::Int(0, 1000),
        "100",
        NA,
    ),
    opt("active-defrag-cycle-min", OptKind::Int(1, 99), "1", NA),
    opt("active-defrag-cycle-max", OptKind::Int(1, 99), "25", NA),
    opt(
        "active-defrag-max-scan-fields",
        OptKind::Int(1, LONGMAX),
        "1000",
        NA,
    ),
    opt("jemalloc-bg-thread", OptKind::Bool, "yes", NA),
    opt(
        "oom-score-adj",
        OptKind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
        NA,
    ),
    opt("oom-score-adj-values", OptKind::Str, "0 200 800", NA),
    opt("disable-thp", OptKind::Bool, "yes", IMM | NA),
    // --- slowlog, latency, tracking
    opt(
        "slowlog-log-slower-than",
        OptKind::Int(-1, I64MAX),
        "10000",
        0,
    ),
    opt("slowlog-max-len", OptKind::Int(0, LONGMAX), "128", 0),
    opt("latency-monitor-threshold", OptKind::Int(0, I64MAX), "0", 0),
    opt("latency-tracking", OptKind::Bool, "yes", 0),
    opt(
        "latency-tracking-info-percentiles",
        OptKind::Special,
        "50 99 99.9",
        0,
    ),
    aliased(
        "busy-reply-threshold",
        "lua-time-limit",
        OptKind::Int(0, I64MAX),
        "5000",
        0,
    ),
    opt(
        "tracking-table-max-keys",
        OptKind::Int(0, LONGMAX),
        "1000000",
        0,
    ),
    opt("notify-keyspace-events", OptKind::Special, "", 0),
    opt("lua-replicate-commands", OptKind::Bool, "yes", NA | HID),
    // --- encodings (used by collection types)
    aliased(
        "hash-max-listpack-entries",
        "hash-max-ziplist-entries",
        OptKind::Int(0, LONGMAX),
        "512",
        0,
    ),
    aliased(
        "hash-max-listpack-value",
        "hash-max-ziplist-value",
        OptKind::Memory(0, LONGMAX),
        "64",
        0,
    ),
    aliased(
        "list-max-listpack-size",
        "list-max-ziplist-size",
        OptKind::Int(i32::MIN as i64, INTMAX),
        "-2",
        0,
    ),
    opt("list-compress-depth", OptKind::Int(0, INTMAX), "0", NA),
    opt("set-max-intset-entries", OptKind::Int(0, LONGMAX), "512", 0),
    // Redis 7.2's set listpack options: read by the set type (which uses 7.2's encodings),
    // settable, hidden from CONFIG GET as Redis 7.0 has no such names.
    opt(
        "set-max-listpack-entries",
        OptKind::Int(0, LONGMAX),
        "128",
        HID,
    ),
    opt(
        "set-max-listpack-value",
        OptKind::Int(0, LONGMAX),
        "64",
        HID,
    ),
    aliased(
        "zset-max-listpack-entries",
        "zset-max-ziplist-entries",
        OptKind::Int(0, LONGMAX),
        "128",
        0,
    ),
    aliased(
        "zset-max-listpack-value",
        "zset-max-ziplist-value",
        OptKind::Memory(0, LONGMAX),
        "64",
        0,
    ),
    opt(
        "stream-node-max-bytes",
        OptKind::Memory(0, LONGMAX),
        "4096",
        0,
    ),
    opt(
        "stream-node-max-entries",
        OptKind::Int(0, LONGMAX),
        "100",
        0,
    ),
    opt(
        "hll-sparse-max-bytes",
        OptKind::Memory(0, LONGMAX),
        "3000",
        0,
    ),
    // --- persistence: RDB
    opt("save", OptKind::Special, "3600 1 300 100 60 10000", F_MULTI),
    opt("dbfilename", OptKind::Str, "dump.rdb", F_PROTECTED),
    // cairn's snapshot image (not an RDB): its own name, so `dbfilename` only ever holds
    // a real RDB file. Protected as `dbfilename` is (it names a file SAVE writes).
    opt("image-filename", OptKind::Str, "dump.cimg", F_PROTECTED),
    // What SAVE, BGSAVE, `save` points and SHUTDOWN write: the image, or an RDB to
    // `dbfilename` (made from a capture, as a replica's full sync is).
    opt(
        "snapshot-format",
        OptKind::Enum(&["image", "rdb"]),
        "image",
        0,
    ),
    opt("rdbcompression", OptKind::Bool, "yes", NA),
    opt("rdbchecksum", OptKind::Bool, "yes", IMM | NA),
    opt("rdb-del-sync-files", OptKind::Bool, "no", NA),
    opt(
        "rdb-key-save-delay",
        OptKind::Int(i32::MIN as i64, INTMAX),
        "0",
        F_HIDDEN,
    ),
    opt(
        "key-load-delay",
        OptKind::Int(i32::MIN as i64, INTMAX),
        "0",
        NA | F_HIDDEN,
    ),
    opt("rdb-save-incremental-fsync", OptKind::Bool, "yes", 0),
    opt("stop-writes-on-bgsave-error", OptKind::Bool, "yes", 0),
    opt(
        "sanitize-dump-payload",
        OptKind::Enum(&["no", "yes", "clients"]),
        "no",
        NA,
    ),
    // --- persistence: AOF
    opt("appendonly", OptKind::Bool, "no", 0),
    opt("appendfilename", OptKind::Str, "appendonly.aof", IMM),
    opt("appenddirname", OptKind::Str, "appendonlydir", IMM),
    opt(
        "appendfsync",
        OptKind::Enum(&["always", "everysec", "no"]),
        "everysec",
        0,
    ),
    opt("no-appendfsync-on-rewrite", OptKind::Bool, "no", NA),
    opt(
        "auto-aof-rewrite-percentage",
        OptKind::Int(0, INTMAX),
        "100",
        0,
    ),
    opt(
        "auto-aof-rewrite-min-size",
        OptKind::Memory(0, LONGMAX),
        "67108864",
        0,
    ),
    opt("aof-load-truncated", OptKind::Bool, "yes", 0),
    // cairn's default is `no`: the rewrite's base is the snapshot image itself. `yes`
    // (Redis's default) writes an RDB base that redis-server can load, converted from the
    // image in a private copy of the arena (memory: the dataset again, while it runs).
    opt("aof-use-rdb-preamble", OptKind::Bool, "no", 0),
    opt("aof-timestamp-enabled", OptKind::Bool, "no", 0),
    opt("aof-disable-auto-gc", OptKind::Bool, "no", NA),
    opt("aof-rewrite-incremental-fsync", OptKind::Bool, "yes", 0),
    // --- replication
    aliased("replicaof", "slaveof", OptKind::Special, "", IMM),
    aliased("masterauth", "masterauth", OptKind::Str, "", F_SENSITIVE),
    opt("masteruser", OptKind::Str, "", 0),
    aliased(
        "replica-serve-stale-data",
        "slave-serve-stale-data",
        OptKind::Bool,
        "yes",
        0,
    ),
    aliased(
        "replica-read-only",
        "slave-read-only",
        OptKind::Bool,
        "yes",
        0,
    ),
    aliased(
        "replica-priority",
        "slave-priority",
        OptKind::Int(0, INTMAX),
        "100",
        NA,
    ),
    opt("replica-announced", OptKind::Bool, "yes", NA),
    aliased(
        "replica-announce-ip",
        "slave-announce-ip",
        OptKind::Str,
        "",
        NA,
    ),
    aliased(
        "replica-announce-port",
        "slave-announce-port",
        OptKind::Int(0, 65535),
        "0",
        NA,
    ),
    aliased(
        "replica-ignore-maxmemory",
        "slave-ignore-maxmemory",
        OptKind::Bool,
        "yes",
        NA,
    ),
    opt("replica-ignore-disk-write-errors", OptKind::Bool, "no", NA),
    opt("repl-diskless-sync", OptKind::Bool, "yes", 0),
    opt("repl-image-sync", OptKind::Bool, "yes", 0),
    opt("repl-diskless-sync-delay", OptKind::Int(0, INTMAX), "5", NA),
    opt(
        "repl-diskless-sync-max-replicas",
        OptKind::Int(0, INTMAX),
        "0",
        NA,
    ),
    opt(
        "repl-diskless-load",
        OptKind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
        NA,
    ),
    aliased(
        "repl-ping-replica-period",
        "repl-ping-slave-period",
        OptKind::Int(1, INTMAX),
        "10",
        0,
    ),
    opt("repl-timeout", OptKind::Int(1, INTMAX), "60", 0),
    opt("repl-disable-tcp-nodelay", OptKind::Bool, "no", NA),
    opt(
        "repl-backlog-size",
        OptKind::Memory(1, LONGMAX),
        "1048576",
        0,
    ),
    opt("repl-backlog-ttl", OptKind::Int(0, INTMAX), "3600", 0),
    aliased(
        "min-replicas-to-write",
        "min-slaves-to-write",
        OptKind::Int(0, INTMAX),
        "0",
        0,
    ),
    aliased(
        "min-replicas-max-lag",
        "min-slaves-max-lag",
        OptKind::Int(0, INTMAX),
        "10",
        0,
    ),
    // --- cluster
    opt("cluster-enabled", OptKind::Bool, "no", IMM | NA),
    opt("cluster-config-file", OptKind::Str, "nodes.conf", IMM | NA),
    opt(
        "cluster-node-timeout",
        OptKind::Int(0, LONGMAX),
        "15000",
        NA,
    ),
    aliased(
        "cluster-replica-validity-factor",
        "cluster-slave-validity-factor",
        OptKind::Int(0, INTMAX),
        "10",
        NA,
    ),
    opt(
        "cluster-migration-barrier",
        OptKind::Int(0, INTMAX),
        "1",
        NA,
    ),
    opt("cluster-allow-replica-migration", OptKind::Bool, "yes", NA),
    opt("cluster-require-full-coverage", OptKind::Bool, "yes", NA),
    aliased(
        "cluster-replica-no-failover",
        "cluster-slave-no-failover",
        OptKind::Bool,
        "no",
        NA,
    ),
    opt("cluster-allow-reads-when-down", OptKind::Bool, "no", NA),
    opt(
        "cluster-allow-pubsubshard-when-down",
        OptKind::Bool,
        "yes",
        NA,
    ),
    opt("cluster-announce-ip", OptKind::Str, "", NA),
    opt("cluster-announce-hostname", OptKind::Str, "", NA),
    opt(
        "cluster-announce-human-nodename",
        OptKind::Str,
        "",
        NA | HID,
    ),
    opt("cluster-announce-port", OptKind::Int(0, 65535), "0", NA),
    opt("cluster-announce-bus-port", OptKind::Int(0, 65535), "0", NA),
    opt("cluster-announce-tls-port", OptKind::Int(0, 65535), "0", NA),
    opt("cluster-port", OptKind::Int(0, 65535), "0", IMM | NA),
    opt(
        "cluster-preferred-endpoint-type",
        OptKind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
        NA,
    ),
    opt(
        "cluster-link-sendbuf-limit",
        OptKind::Memory(0, LONGMAX),
        "0",
        NA,
    ),
    // --- scripting, modules, ACL, TLS
    opt("loadmodule", OptKind::Str, "", IMM | NA | F_MULTI | HID),
    opt("aclfile", OptKind::Str, "", IMM),
    opt("acllog-max-len", OptKind::Int(0, LONGMAX), "128", 0),
    opt(
        "acl-pubsub-default",
        OptKind::Enum(&["allchannels", "resetchannels"]),
        "resetchannels",
        0,
    ),
    opt("user", OptKind::Str, "", IMM | F_MULTI | HID),
    opt("rename-command", OptKind::Special, "", IMM | F_MULTI | HID),
    opt("ignore-warnings", OptKind::Str, "", NA),
    opt("include", OptKind::Str, "", IMM | F_MULTI | HID),
    // TLS (src/tls.rs): all acted on, and changeable at runtime as in Redis; options
    // for what is not built are refused when given a value other than their default.
    opt("tls-port", OptKind::Int(0, 65535), "0", 0),
    opt("tls-cluster", OptKind::Bool, "no", UNB),
    opt("tls-replication", OptKind::Bool, "no", 0),
    opt(
        "tls-auth-clients",
        OptKind::Enum(&["no", "yes", "optional"]),
        "yes",
        0,
    ),
    opt("tls-prefer-server-ciphers", OptKind::Bool, "no", 0),
    opt("tls-session-caching", OptKind::Bool, "yes", 0),
    opt(
        "tls-session-cache-size",
        OptKind::Int(0, INTMAX),
        "20480",
        0,
    ),
    opt(
        "tls-session-cache-timeout",
        OptKind::Int(0, INTMAX),
        "300",
        0,
    ),
    opt("tls-cert-file", OptKind::Str, "", 0),
    opt("tls-key-file", OptKind::Str, "", 0),
    // Encrypted PEM keys need a decryptor cairn does not have (see src/tls.rs).
    opt("tls-key-file-pass", OptKind::Str, "", F_SENSITIVE | UNB),
    opt("tls-client-cert-file", OptKind::Str, "", 0),
    opt("tls-client-key-file", OptKind::Str, "", 0),
    opt(
        "tls-client-key-file-pass",
        OptKind::Str,
        "",
        F_SENSITIVE | UNB,
    ),
    opt("tls-dh-params-file", OptKind::Str, "", UNB),
    opt("tls-ca-cert-file", OptKind::Str, "", 0),
    opt("tls-ca-cert-dir", OptKind::Str, "", 0),
    opt("tls-protocols", OptKind::Str, "", 0),
    opt("tls-ciphers", OptKind::Str, "", 0),
    opt("tls-ciphersuites", OptKind::Str, "", 0),
    // --- misc
    opt("shutdown-timeout", OptKind::Int(0, INTMAX), "10", NA),
    opt(
        "shutdown-on-sigint",
        OptKind::Enum(SHUTDOWN_FLAGS),
        "default",
        NA,
    ),
    opt(
        "shutdown-on-sigterm",
        OptKind::Enum(SHUTDOWN_FLAGS),
        "default",
        NA,
    ),
    opt(
        "propagation-error-behavior",
        OptKind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
        NA,
    ),
    opt("bind-source-addr", OptKind::Str, "", NA),
    // CPU affinity lists (Redis's names use underscores).
    opt("server_cpulist", OptKind::Str, "", IMM | NA),
    opt("bio_cpulist", OptKind::Str, "", IMM | NA),
    opt("aof_rewrite_cpulist", OptKind::Str, "", IMM | NA),
    opt("bgsave_cpulist", OptKind::Str, "", IMM | NA),
    // --- cairn's own
    // Writes get -MISCONF while the AOF's filesystem has less free space than this: a size
    // or a percentage of the filesystem (0: off).
    opt("aof-disk-min-free", OptKind::MemoryOrPercent, "67108864", 0),
    // Incremental AOF files are kept written with zeroes this far ahead of the log's end
    // under `appendfsync always` (appends overwrite, no metadata per fsync; 0: off).
    // (Read when the writer starts: immutable at runtime.)
    opt(
        "aof-preallocate-bytes",
        OptKind::Memory(0, LONGMAX),
        "67108864",
        IMM,
    ),
    // Reuse the retired incremental file after a rewrite (recovery then relies on CRC +
    // LSN to find the log's end; the file does not load in Redis).
    opt("aof-recycle", OptKind::Bool, "no", IMM),
    // Write the incremental file with O_DIRECT|O_DSYNC, 4 KiB aligned, padded with #PAD.
    opt("aof-direct-io", OptKind::Bool, "no", IMM),
    // Durable writes (fdatasyncs, or direct writes) in flight at once with io_uring. 1 is
    // best where the disk serializes flushes (figures: BENCHMARKS.md, "`aof-inflight-syncs`
    // × `aof-group-commit-wait-us`"); disks that overlap flushes (NVMe, many cloud
    // volumes) gain from 4-8.
    opt("aof-inflight-syncs", OptKind::Int(1, 64), "1", IMM),
    // `appendfsync always` group commit: a group of log entries may wait this long after
    // its first entry for the rest of its members (the clients the last sync answered)
    // before its sync starts. 0 starts a sync as soon as the disk is free.
    opt("aof-group-commit-wait-us", OptKind::Int(0, 100_000), "0", 0),
    // SSD tiering (see ARCHITECTURE.md, "Tiered store"): the tier file's path prefix (off
    // when empty; fixed at startup), its size, the fraction of `maxmemory` kept free by
    // dropping the RAM copies of values on disk, the fraction that must be free for a
    // read to bring a value back into RAM, and the smallest string value tiered.
    opt("tiered-prefix", OptKind::Str, "", IMM),
    opt(
        "tiered-max-file-size",
        OptKind::Memory(1 << 20, 1 << 44),
        "268435456",
        IMM,
    ),
    opt("tiered-offload-threshold", OptKind::Special, "0.5", 0),
    opt("tiered-upload-threshold", OptKind::Special, "0.1", 0),
    opt("tiered-min-value-size", OptKind::Int(1, 1 << 30), "64", 0),
    opt(
        "arena-reserve-bytes",
        OptKind::Memory(1 << 20, 32 << 30),
        "34359738368",
        IMM,
    ),
    // Snapshot engine: compression workers, the final pause's budget, and the mode
    // (`auto` and `cow`: copy-before-write in the arena's write hook; `async`: live passes
    // with WP_ASYNC tracking; `sync`: synchronous write-protect; `stop-the-world` always
    // stops the executor for the copy, as `async` and `sync` do where userfaultfd is
    // refused).
    // The executor loop (io-threads 1) keeps polling without sleeping for this long after
    // a turn that found many ready connections, so a client's next request under load
    // does not have to wake it (a wakeup costs the sender an IPI and the reply tens of
    // µs). 0: always sleep when idle, as Redis.
    opt("event-loop-spin-us", OptKind::Int(0, 10_000), "50", 0),
    // cairn's own: a file the executor's per-turn timeline is appended to ("": off). See
    // ARCHITECTURE.md "Large values", `src/server/latency_trace.rs`.
    opt("latency-trace-file", OptKind::Str, "", 0),
    opt("snapshot-threads", OptKind::Int(1, 64), "2", 0),
    opt(
        "snapshot-pause-budget-us",
        OptKind::Int(10, 60_000_000),
        "2000",
        0,
    ),
    opt(
        "snapshot-mode",
        OptKind::Enum(&["auto", "async", "sync", "cow", "stop-the-world"]),
        "auto",
        0,
    ),
    // cairn's own: the final pause of a live snapshot also walks the whole arena and fails
    // the snapshot if a page was written outside every region the dirty map marked
    // (ARCHITECTURE.md "Snapshots"). A check for tests; it puts the whole walk back
    // into the pause.
    opt("snapshot-verify-dirty-map", OptKind::Bool, "no", 0),
    // cairn's own: a copy-before-write snapshot (`snapshot-mode cow`) also tracks the
    // arena's written pages with userfaultfd from its cut and fails if a page was written
    // without passing through the arena's copy-before-write hook (ARCHITECTURE.md
    // "Snapshots"). A check for tests; it puts a write-protect walk into the pause.
    opt("snapshot-verify-cow", OptKind::Bool, "no", 0),
];

/// `maxmemory-clients`: a size, or a percentage of `maxmemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientMemoryLimit {
    Bytes(u64),
    PercentOfMaxmemory(u64),
}

impl ClientMemoryLimit {
    fn parse(canonical: &str) -> ClientMemoryLimit {
        match canonical.strip_suffix('%') {
            Some(p) => ClientMemoryLimit::PercentOfMaxmemory(p.parse().unwrap_or(0)),
            None => ClientMemoryLimit::Bytes(canonical.parse().unwrap_or(0)),
        }
    }

    /// The limit in bytes, 0 for none. As Redis's getClientEvictionLimit: a percentage
    /// applies only with a `maxmemory`, and a limit is at least 128 KiB (a smaller one
    /// could leave no client able to talk to the server).
    pub fn bytes(self, maxmemory: u64) -> u64 {
        let limit = match self {
            ClientMemoryLimit::Bytes(0) => return 0,
            ClientMemoryLimit::Bytes(b) => b,
            ClientMemoryLimit::PercentOfMaxmemory(p) if p > 0 && maxmemory > 0 => {
                (maxmemory as f64 * p as f64 / 100.0) as u64
            }
            ClientMemoryLimit::PercentOfMaxmemory(_) => return 0,
        };
        limit.max(MIN_CLIENT_MEMORY_LIMIT)
    }
}

/// The smallest effective `maxmemory-clients` (Redis's 128 KiB floor).
pub const MIN_CLIENT_MEMORY_LIMIT: u64 = 128 << 10;

/// Per-class output buffer limits (`client-output-buffer-limit <class> <hard> <soft> <secs>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OutputLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

/// The typed view of the options the server acts on.
#[derive(Clone, Debug)]
pub struct Settings {
    pub bind: Vec<String>,
    pub port: u16,
    /// `tls-port`: 0 when no TLS listener (the TLS settings are read by `crate::tls`).
    pub tls_port: u16,
    /// `tls-replication`: the link to a primary is TLS.
    pub tls_replication: bool,
    pub protected_mode: bool,
    /// Sorted sets convert to a skiplist past these (read on every ZADD, so typed here).
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    /// Lists' node fill and hashes' listpack limits (read on every push / HSET).
    pub list_max_listpack_size: i64,
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    /// A sparse HyperLogLog turns dense past this many bytes (read on every PFADD).
    pub hll_sparse_max_bytes: u64,
    /// Stream node limits (read on every XADD).
    pub stream_node_max_bytes: u64,
    pub stream_node_max_entries: u64,
    pub timeout_s: u64,
    pub tcp_keepalive_s: u64,
    pub maxclients: usize,
    pub requirepass: Option<Vec<u8>>,
    pub io_threads: usize,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: u64,
    /// `repl-backlog-size`: bytes of the replication stream kept for partial resyncs.
    pub repl_backlog_size: u64,
    /// A primary without replicas for this long frees its backlog (0: never).
    pub repl_backlog_ttl_s: u64,
    /// `repl-diskless-sync`: a full sync streams the RDB (`$EOF:` form) to replicas that
    /// accept it instead of writing it to a file first.
    pub repl_diskless_sync: bool,
    /// `repl-image-sync` (cairn's): a full sync sends the snapshot image itself, not an
    /// RDB, when every replica in it is a cairn that loads this binary's images.
    pub repl_image_sync: bool,
    /// `repl-ping-replica-period`, seconds between PINGs in the replication stream.
    pub repl_ping_replica_period_s: u64,
    /// `repl-timeout`: an online replica silent this long (no ACK) is disconnected.
    pub repl_timeout_s: u64,
    /// `min-replicas-to-write` / `min-replicas-max-lag`: writes are refused unless this
    /// many replicas acknowledged within the lag (either 0: no rule).
    pub min_replicas_to_write: u64,
    pub min_replicas_max_lag_s: u64,
    pub obuf_normal: OutputLimit,
    /// Bulk replies at least this long are sent by reference (io-threads 1).
    pub avoid_copy_reply_min: u64,
    /// The same with io-threads > 1.
    pub avoid_copy_reply_threaded_min: u64,
    pub obuf_replica: OutputLimit,
    pub obuf_pubsub: OutputLimit,
    pub databases: usize,
    pub hz: u32,
    pub enable_debug_command: String,
    pub loglevel: String,
    pub logfile: String,
    pub dir: String,
    pub pidfile: String,
    /// `unixsocket`: listen on this Unix socket too (empty: no).
    pub unixsocket: String,
    /// `daemonize yes`: detach and run in the background (see main.rs).
    pub daemonize: bool,
    /// `unixsocketperm`: the socket file's mode (0: the umask's).
    pub unixsocketperm: u32,
    pub maxmemory: u64,
    /// `maxmemory-clients`: the clients' buffers may not reach this (0: no limit).
    pub maxmemory_clients: ClientMemoryLimit,
    pub maxmemory_policy: EvictionPolicy,
    pub maxmemory_samples: usize,
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    pub active_expire_effort: u32,
    pub lazyfree_lazy_user_del: bool,
    /// `notify-keyspace-events` as class bits (`NOTIFY_*`; 0: no notifications).
    pub notify_keyspace_events: u32,
    pub lazyfree_lazy_user_flush: bool,
    /// Set encodings' thresholds (`src/collections/set.rs`).
    pub set_max_intset_entries: u64,
    pub set_max_listpack_entries: u64,
    pub set_max_listpack_value: u64,
    pub activerehashing: bool,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    /// `tracking-table-max-keys`: keys the client-side caching table holds (0: no limit).
    pub tracking_table_max_keys: u64,
    /// `busy-reply-threshold` (`lua-time-limit`), ms: a script running longer is slow.
    pub busy_reply_threshold: i64,
    pub latency_monitor_threshold: i64,
    /// `latency-tracking`: per-command latency histograms (LATENCY HISTOGRAM, INFO
    /// latencystats).
    pub latency_tracking: bool,
    pub arena_reserve_bytes: usize,
    /// `save` points: (seconds, changes).
    pub save_points: Vec<(u64, u64)>,
    pub dbfilename: String,
    /// `image-filename`: where the snapshot image goes (`dir/image_filename`).
    pub image_filename: String,
    /// `snapshot-format rdb`: snapshots write `dbfilename` as an RDB instead of the image.
    pub snapshot_rdb: bool,
    pub stop_writes_on_bgsave_error: bool,
    pub snapshot_threads: usize,
    pub snapshot_pause_budget_us: u64,
    pub event_loop_spin_us: u64,
    /// `latency-trace-file` ("": the trace is off).
    pub latency_trace_file: String,
    pub snapshot_mode: SnapMode,
    /// `snapshot-verify-dirty-map`.
    pub snapshot_verify_dirty_map: bool,
    /// `snapshot-verify-cow`.
    pub snapshot_verify_cow: bool,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: String,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    pub aof_load_truncated: bool,
    pub aof_timestamp_enabled: bool,
    /// BGREWRITEAOF's base: an RDB file (yes) or the snapshot image (no).
    pub aof_use_rdb_preamble: bool,
    /// Snapshot images and RDB files are written back every 4 MiB as they are written
    /// (`persistence::write_behind`), not all at their final fsync.
    pub rdb_save_incremental_fsync: bool,
    /// The same for BGREWRITEAOF's base.
    pub aof_rewrite_incremental_fsync: bool,
    pub aof_disk_min_free: u64,
    /// `aof-disk-min-free` given as a percentage of the filesystem (0: given as a size).
    pub aof_disk_min_free_pct: u64,
    pub aof_preallocate_bytes: u64,
    pub aof_recycle: bool,
    pub aof_direct_io: bool,
    pub aof_inflight_syncs: usize,
    pub aof_group_commit_wait_us: u64,
    /// `tiered-prefix`: the tier file is `<prefix>-0000.ssd`; empty: tiering off.
    pub tiered_prefix: String,
    pub tiered_max_file_bytes: u64,
    pub tiered_offload_threshold: f64,
    pub tiered_upload_threshold: f64,
    pub tiered_min_value_bytes: u64,
}

#[derive(Debug)]
pub struct ConfigError {
    pub line: Option<usize>,
    pub text: String,
    pub msg: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (cairn {}) ***",
            env!("CARGO_PKG_VERSION")
        )?;
        match self.line {
            Some(l) => writeln!(f, "Reading the configuration file, at line {l}")?,
            None => writeln!(f, "Reading the command line arguments")?,
        }
        writeln!(f, ">>> '{}'", self.text)?;
        write!(f, "{}", self.msg)
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    values: Vec<String>,
    /// Which options were set explicitly (for REWRITE and warnings).
    set_explicitly: Vec<bool>,
    pub config_file: Option<String>,
    settings: Settings,
    /// Warnings to log once at startup (options accepted but not acted on).
    pub warnings: Vec<String>,
    /// `rename-command old new` lines in order (`new` empty: the command is disabled).
    pub renamed_commands: Vec<(String, String)>,
    /// `user <name> <rule>...` lines in order (name and rules), loaded at startup.
    pub user_lines: Vec<Vec<String>>,
}

/// Options cairn accepts (a Redis config file starts it) but does not act on: a startup
/// warning names each one set, and CONFIG SET refuses them. README lists them.
pub fn not_acted_options() -> Vec<&'static str> {
    OPTIONS
        .iter()
        .filter(|o| o.flags & F_NOT_ACTED != 0)
        .map(|o| o.name)
        .collect()
}

fn find_spec(name: &str) -> Option<usize> {
    OPTIONS.iter().position(|o| {
        o.name.eq_ignore_ascii_case(name) || o.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
    })
}

/// Most addresses `bind` takes (Redis's CONFIG_BINDADDR_MAX).
const MAX_BIND_ADDRESSES: usize = 16;

// notify-keyspace-events classes (bit per letter, Redis's values).
pub const NOTIFY_KEYSPACE: u32 = 1 << 0; // K
pub const NOTIFY_KEYEVENT: u32 = 1 << 1; // E
pub const NOTIFY_GENERIC: u32 = 1 << 2; // g
pub const NOTIFY_STRING: u32 = 1 << 3; // $
pub const NOTIFY_LIST: u32 = 1 << 4; // l
pub const NOTIFY_SET: u32 = 1 << 5; // s
pub const NOTIFY_HASH: u32 = 1 << 6; // h
pub const NOTIFY_ZSET: u32 = 1 << 7; // z
pub const NOTIFY_EXPIRED: u32 = 1 << 8; // x
pub const NOTIFY_EVICTED: u32 = 1 << 9; // e
pub const NOTIFY_STREAM: u32 = 1 << 10; // t
pub const NOTIFY_KEY_MISS: u32 = 1 << 11; // m (not part of A)
pub const NOTIFY_LOADED: u32 = 1 << 12; // module key loaded (no letter)
pub const NOTIFY_MODULE: u32 = 1 << 13; // d
pub const NOTIFY_NEW: u32 = 1 << 14; // n (not part of A)
/// The classes `A` stands for, in the order CONFIG GET prints them.
const NOTIFY_CLASSES: &[(char, u32)] = &[
    ('g', NOTIFY_GENERIC),
    ('$', NOTIFY_STRING),
    ('l', NOTIFY_LIST),
    ('s', NOTIFY_SET),
    ('h', NOTIFY_HASH),
    ('z', NOTIFY_ZSET),
    ('x', NOTIFY_EXPIRED),
    ('e', NOTIFY_EVICTED),
    ('t', NOTIFY_STREAM),
    ('d', NOTIFY_MODULE),
];
pub const NOTIFY_ALL: u32 = NOTIFY_GENERIC
    | NOTIFY_STRING
    | NOTIFY_LIST
    | NOTIFY_SET
    | NOTIFY_HASH
    | NOTIFY_ZSET
    | NOTIFY_EXPIRED
    | NOTIFY_EVICTED
    | NOTIFY_STREAM
    | NOTIFY_MODULE;

/// Parses `notify-keyspace-events` letters into class bits.
pub fn parse_notify_flags(v: &str) -> Result<u32, String> {
    let mut flags = 0;
    for c in v.chars() {
        flags |= match c {
            'A' => NOTIFY_ALL,
            'K' => NOTIFY_KEYSPACE,
            'E' => NOTIFY_KEYEVENT,
            'm' => NOTIFY_KEY_MISS,
            'n' => NOTIFY_NEW,
            _ => match NOTIFY_CLASSES.iter().find(|(l, _)| *l == c) {
                Some((_, f)) => *f,
                None => return Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
            },
        };
    }
    Ok(flags)
}

/// The canonical text of notify flags, as Redis 7.0 prints them (`KEA` reads back as
/// `AKE`; `n` shows only without `A`, as in Redis, though it still acts).
pub fn notify_flags_text(flags: u32) -> String {
    let mut s = String::new();
    if flags & NOTIFY_ALL == NOTIFY_ALL {
        s.push('A');
    } else {
        for (c, f) in NOTIFY_CLASSES.iter().chain(&[('n', NOTIFY_NEW)]) {
            if flags & f != 0 {
                s.push(*c);
            }
        }
    }
    for (c, f) in [
        ('K', NOTIFY_KEYSPACE),
        ('E', NOTIFY_KEYEVENT),
        ('m', NOTIFY_KEY_MISS),
    ] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// How `notify-keyspace-events` is kept: Redis's text, plus the `n` that text leaves out
/// beside `A` (so the class still acts); CONFIG GET shows [`notify_flags_text`].
fn notify_flags_stored(flags: u32) -> String {
    let mut s = notify_flags_text(flags);
    if flags & NOTIFY_ALL == NOTIFY_ALL && flags & NOTIFY_NEW != 0 {
        s.push('n');
    }
    s
}

/// An option's value as CONFIG GET shows it.
fn shown_value<'a>(name: &str, stored: &'a str) -> std::borrow::Cow<'a, str> {
    if name == "notify-keyspace-events" {
        if let Ok(f) = parse_notify_flags(stored) {
            return notify_flags_text(f).into();
        }
    }
    stored.into()
}

/// Redis's `memtoull`: a byte count with an optional unit (k=1000, kb=1024, m, mb, g, gb).
pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul): (&str, i64) = if let Some(n) = lower.strip_suffix("gb") {
        (n, 1024 * 1024 * 1024)
    } else if let Some(n) = lower.strip_suffix("mb") {
        (n, 1024 * 1024)
    } else if let Some(n) = lower.strip_suffix("kb") {
        (n, 1024)
    } else if let Some(n) = lower.strip_suffix('g') {
        (n, 1000 * 1000 * 1000)
    } else if let Some(n) = lower.strip_suffix('m') {
        (n, 1000 * 1000)
    } else if let Some(n) = lower.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = lower.strip_suffix('b') {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    if num.is_empty() || !num.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: i64 = num.parse().ok()?;
    v.checked_mul(mul)
}

/// `dbfilename`, `appendfilename` and `appenddirname` name a file (or the AOF directory)
/// inside `dir`, never a path: with a `/` (or a `\`) in it, a SAVE could write anywhere
/// the process may. Redis 7's check (pathIsBaseName) and texts; the AOF names cannot be
/// empty either.
fn file_name_in_dir<'a>(option: &str, value: &'a str) -> Result<&'a str, String> {
    if value.contains(['/', '\\']) {
        let what = if option == "appenddirname" {
            "dirname"
        } else {
            "filename"
        };
        return Err(format!("{option} can't be a path, just a {what}"));
    }
    if value.is_empty() && option != "dbfilename" {
        return Err(format!("{option} can't be empty"));
    }
    Ok(value)
}

fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

impl Default for Config {
    fn default() -> Config {
        let mut c = Config {
            values: OPTIONS.iter().map(|o| o.default.to_string()).collect(),
            set_explicitly: vec![false; OPTIONS.len()],
            config_file: None,
            settings: placeholder_settings(),
            warnings: vec![],
            renamed_commands: vec![],
            user_lines: vec![],
        };
        let cobl = find_spec("client-output-buffer-limit").expect("in table");
        c.values[cobl] =
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60".into();
        let dir = find_spec("dir").expect("in table");
        c.values[dir] = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| ".".into());
        c.settings = c.build_settings();
        c
    }
}

fn placeholder_settings() -> Settings {
    Settings {
        bind: vec![],
        port: 0,
        tls_port: 0,
        tls_replication: false,
        protected_mode: true,
        zset_max_listpack_entries: 128,
        zset_max_listpack_value: 64,
        list_max_listpack_size: -2,
        hash_max_listpack_entries: 512,
        hash_max_listpack_value: 64,
        hll_sparse_max_bytes: 3000,
        stream_node_max_bytes: 4096,
        stream_node_max_entries: 100,
        timeout_s: 0,
        tcp_keepalive_s: 0,
        maxclients: 0,
        requirepass: None,
        io_threads: 1,
        proto_max_bulk_len: 0,
        client_query_buffer_limit: 0,
        repl_backlog_size: 1 << 20,
        repl_backlog_ttl_s: 3600,
        repl_diskless_sync: true,
        repl_image_sync: true,
        repl_ping_replica_period_s: 10,
        repl_timeout_s: 60,
        min_replicas_to_write: 0,
        min_replicas_max_lag_s: 10,
        obuf_normal: OutputLimit::default(),
        avoid_copy_reply_min: 16384,
        avoid_copy_reply_threaded_min: 65536,
        obuf_replica: OutputLimit::default(),
        obuf_pubsub: OutputLimit::default(),
        databases: 16,
        hz: 10,
        enable_debug_command: String::new(),
        loglevel: String::new(),
        logfile: String::new(),
        dir: String::new(),
        pidfile: String::new(),
        unixsocket: String::new(),
        daemonize: false,
        unixsocketperm: 0,
        maxmemory: 0,
        maxmemory_clients: ClientMemoryLimit::Bytes(0),
        maxmemory_policy: EvictionPolicy::NoEviction,
        maxmemory_samples: 5,
        lfu_log_factor: 10,
        lfu_decay_time: 1,
        active_expire_effort: 1,
        lazyfree_lazy_user_del: false,
        notify_keyspace_events: 0,
        lazyfree_lazy_user_flush: false,
        set_max_intset_entries: 512,
        set_max_listpack_entries: 128,
        set_max_listpack_value: 64,
        activerehashing: true,
        slowlog_log_slower_than: 10000,
        slowlog_max_len: 128,
        tracking_table_max_keys: 1_000_000,
        busy_reply_threshold: 5000,
        latency_monitor_threshold: 0,
        latency_tracking: true,
        arena_reserve_bytes: 0,
        save_points: Vec::new(),
        dbfilename: String::new(),
        image_filename: String::new(),
        snapshot_rdb: false,
        stop_writes_on_bgsave_error: true,
        snapshot_threads: 2,
        snapshot_pause_budget_us: 2000,
        event_loop_spin_us: 50,
        latency_trace_file: String::new(),
        snapshot_mode: SnapMode::Auto,
        snapshot_verify_dirty_map: false,
        snapshot_verify_cow: false,
        appendonly: false,
        appendfilename: String::new(),
        appenddirname: String::new(),
        appendfsync: String::new(),
        auto_aof_rewrite_percentage: 0,
        auto_aof_rewrite_min_size: 0,
        aof_load_truncated: true,
        aof_timestamp_enabled: false,
        aof_use_rdb_preamble: true,
        rdb_save_incremental_fsync: true,
        aof_rewrite_incremental_fsync: true,
        aof_disk_min_free: 0,
        aof_disk_min_free_pct: 0,
        aof_preallocate_bytes: 0,
        aof_recycle: false,
        aof_direct_io: false,
        aof_inflight_syncs: 1,
        aof_group_commit_wait_us: 0,
        tiered_prefix: String::new(),
        tiered_max_file_bytes: 256 << 20,
        tiered_offload_threshold: 0.5,
        tiered_upload_threshold: 0.1,
        tiered_min_value_bytes: 64,
    }
}

/// Parses `client-output-buffer-limit` (one or more `class hard soft seconds` groups).
fn parse_cobl(v: &str, current: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut classes: Vec<(String, [i64; 3])> = Vec::new();
    for group in current.split_whitespace().collect::<Vec<_>>().chunks(4) {
        let vals = [
            group[1].parse().unwrap_or(0),
            group[2].parse().unwrap_or(0),
            group[3].parse().unwrap_or(0),
        ];
        classes.push((group[0].to_string(), vals));
    }
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => "normal",
            "slave" | "replica" => "slave",
            "pubsub" => "pubsub",
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let secs = group[3].parse::<i64>().ok().filter(|s| *s >= 0);
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        match classes.iter_mut().find(|(c, _)| c == class) {
            Some(entry) => entry.1 = [hard, soft, secs],
            None => classes.push((class.to_string(), [hard, soft, secs])),
        }
    }
    Ok(classes
        .iter()
        .map(|(c, v)| format!("{c} {} {} {}", v[0], v[1], v[2]))
        .collect::<Vec<_>>()
        .join(" "))
}

fn parse_save(v: &str) -> Result<String, String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    if words.is_empty() {
        return Ok(String::new());
    }
    if !words.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    for w in &words {
        if w.parse::<i64>().map(|n| n < 0).unwrap_or(true) {
            return Err("Invalid save parameters".into());
        }
    }
    Ok(words.join(" "))
}

impl Config {
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn get_value(&self, name: &str) -> Option<&str> {
        find_spec(name).map(|i| self.values[i].as_str())
    }

    /// Validates `value` for option `idx`, returning its canonical text.
    fn canonical(&self, idx: usize, value: &str) -> Result<String, String> {
        let spec = &OPTIONS[idx];
        match spec.kind {
            OptKind::Bool => parse_bool(value)
                .map(|b| if b { "yes" } else { "no" }.to_string())
                .ok_or_else(|| "argument must be 'yes' or 'no'".into()),
            OptKind::Int(min, max) => {
                // `unixsocketperm` is octal, as Redis's OCTAL_CONFIG (read and shown).
                let octal = spec.name == "unixsocketperm";
                let parsed = if octal {
                    i64::from_str_radix(value, 8)
                } else {
                    value.parse()
                };
                let v: i64 = parsed
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                // Redis accepts any hz and clamps it to what the cron can do.
                if spec.name == "hz" {
                    return Ok(v.clamp(1, 500).to_string());
                }
                if octal {
                    return Ok(format!("{v:o}"));
                }
                Ok(v.to_string())
            }
            OptKind::Memory(min, max) => {
                let v = parse_memory(value)
                    .ok_or_else(|| "argument must be a memory value".to_string())?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                Ok(v.to_string())
            }
            OptKind::MemoryOrPercent => {
                if let Some(p) = value.strip_suffix('%') {
                    let v: i64 = p
                        .parse()
                        .map_err(|_| "argument must be a memory or percent value".to_string())?;
                    if v < 0 {
                        return Err("argument must be a memory or percent value".into());
                    }
                    if v > 100 {
                        return Err("percentage argument must be less or equal to 100".into());
                    }
                    // Redis keeps a percentage as a negative number: 0% reads back as 0.
                    Ok(if v == 0 { "0".into() } else { format!("{v}%") })
                } else {
                    parse_memory(value)
                        .map(|v| v.to_string())
                        .ok_or_else(|| "argument must be a memory or percent value".into())
                }
            }
            OptKind::Str if spec.name == "oom-score-adj-values" => {
                let w: Vec<&str> = value.split_whitespace().collect();
                if w.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                for x in &w {
                    match x.parse::<i64>() {
                        Ok(v) if (-2000..=2000).contains(&v) => {}
                        _ => return Err("Invalid oom-score-adj-values".into()),
                    }
                }
                Ok(w.join(" "))
            }
            OptKind::Str
                if matches!(
                    spec.name,
                    "dbfilename" | "image-filename" | "appendfilename" | "appenddirname"
                ) =>
            {
                file_name_in_dir(spec.name, value).map(str::to_string)
            }
            OptKind::Str if spec.name == "latency-trace-file" => {
                // Refused here, so CONFIG SET says why instead of the trace staying off.
                // Checked without creating the file: a relative path given at startup is
                // opened later, relative to `dir`.
                let p = std::path::Path::new(value);
                let refused = |why: &str| Err(format!("Can't open the latency trace file: {why}"));
                if value.is_empty() {
                } else if p.is_dir() {
                    return refused("Is a directory");
                } else if p.exists() {
                    if let Err(e) = std::fs::OpenOptions::new().append(true).open(p) {
                        return refused(&e.to_string());
                    }
                } else {
                    let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
                    if !parent.is_none_or(|d| d.is_dir()) {
                        return refused("No such file or directory");
                    }
                }
                Ok(value.to_string())
            }
            OptKind::Str => Ok(value.to_string()),
            OptKind::Enum(choices) => choices
                .iter()
                .find(|c| c.eq_ignore_ascii_case(value))
                .map(|c| c.to_string())
                .ok_or_else(|| {
                    format!(
                        "argument(s) must be one of the following: {}",
                        choices.join(", ")
                    )
                }),
            OptKind::Special => match spec.name {
                "client-output-buffer-limit" => parse_cobl(value, &self.values[idx]),
                "save" => parse_save(value),
                "bind" => {
                    let n = value.split_whitespace().count();
                    if n == 0 || n > MAX_BIND_ADDRESSES {
                        Err("Too many bind addresses specified.".into())
                    } else {
                        Ok(value.split_whitespace().collect::<Vec<_>>().join(" "))
                    }
                }
                "notify-keyspace-events" => parse_notify_flags(value).map(notify_flags_stored),
                "latency-tracking-info-percentiles" => {
                    let mut out = Vec::new();
                    for w in value.split_whitespace() {
                        let v: f64 =
                            w.parse()
                                .ok()
                                .filter(|v: &f64| v.is_finite())
                                .ok_or_else(|| {
                                    "Invalid latency-tracking-info-percentiles parameters"
                                        .to_string()
                                })?;
                        if !(0.0..=100.0).contains(&v) {
                            return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                        }
                        out.push(v.to_string());
                    }
                    Ok(out.join(" "))
                }
                "dir" => {
                    let p = std::path::Path::new(value);
                    if !p.is_dir() {
                        return Err("No such file or directory".to_string());
                    }
                    std::fs::canonicalize(p)
                        .map(|p| p.display().to_string())
                        .map_err(|e| e.to_string())
                }
                "tiered-offload-threshold" | "tiered-upload-threshold" => value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| (0.0..=1.0).contains(v))
                    .map(|v| v.to_string())
                    .ok_or_else(|| "argument must be a fraction between 0 and 1".to_string()),
                "replicaof" => {
                    let w: Vec<&str> = value.split_whitespace().collect();
                    if w.len() != 2 {
                        return Err("wrong number of arguments".into());
                    }
                    Ok(w.join(" "))
                }
                _ => Ok(value.to_string()),
            },
        }
    }

    /// Applies `name value` from a config file or the command line.
    fn apply_directive(
        &mut self,
        args: &[String],
        line: Option<usize>,
        text: &str,
    ) -> Result<(), ConfigError> {
        let err = |msg: String| ConfigError {
            line,
            text: text.to_string(),
            msg,
        };
        let name = args[0].to_ascii_lowercase();
        let Some(idx) = find_spec(&name) else {
            return Err(err("Bad directive or wrong number of arguments".into()));
        };
        let spec = OPTIONS[idx];
        if spec.name == "include" {
            if args.len() != 2 {
                return Err(err("Bad directive or wrong number of arguments".into()));
            }
            let content = std::fs::read_to_string(&args[1]).map_err(|e| {
                err(format!(
                    "Fatal error, can't open config file '{}': {e}",
                    args[1]
                ))
            })?;
            return self.load_text(&content);
        }
        if spec.name == "user" {
            // `user <name> <rule>...`: the rules are checked against the command table
            // when the server starts (`Server::acl_startup`).
            if args.len() < 2 {
                return Err(err("Bad directive or wrong number of arguments".into()));
            }
            self.user_lines.push(args[1..].to_vec());
            self.set_explicitly[idx] = true;
            return Ok(());
        }
        if spec.name == "rename-command" {
            // `rename-command <command> <new name>`; "" disables the command. Whether the
            // command exists is checked when the command table is built.
            let [_, old, new] = args else {
                return Err(err("wrong number of arguments".into()));
            };
            if new.chars().any(|c| c.is_ascii_whitespace()) {
                return Err(err(
                    "rename-command: the new name may not contain spaces".into()
                ));
            }
            self.renamed_commands
                .push((old.to_ascii_lowercase(), new.to_ascii_lowercase()));
            self.set_explicitly[idx] = true;
            return Ok(());
        }
        let value = match spec.kind {
            OptKind::Special | OptKind::Str if args.len() >= 2 => args[1..].join(" "),
            _ if args.len() == 2 => args[1].clone(),
            _ => return Err(err("wrong number of arguments".into())),
        };
        // A multi-valued option accumulates across lines (e.g. several `save` lines).
        let value = if spec.flags & F_MULTI != 0
            && self.set_explicitly[idx]
            && spec.name == "save"
            && !value.is_empty()
        {
            format!("{} {}", self.values[idx], value)
        } else {
            value
        };
        let canon = self.canonical(idx, &value).map_err(|m| {
            err(format!(
                "Invalid argument '{}' for CONFIG SET '{}' - {m}",
                value, spec.name
            ))
        })?;
        if spec.flags & F_UNBUILT != 0 && canon != spec.default {
            return Err(err(format!(
                "'{}' is not supported by cairn (only its default value is accepted)",
                spec.name
            )));
        }
        self.values[idx] = canon;
        if spec.flags & F_NOT_ACTED != 0 && !self.set_explicitly[idx] {
            self.warnings.push(format!(
                "WARNING: option '{}' is accepted for compatibility but not acted on by cairn yet",
                spec.name
            ));
        }
        self.set_explicitly[idx] = true;
        Ok(())
    }

    fn load_text(&mut self, content: &str) -> Result<(), ConfigError> {
        for (i, raw) in content.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut scratch = Vec::new();
            let mut ranges = Vec::new();
            if split_args(line.as_bytes(), &mut scratch, &mut ranges).is_err() {
                return Err(ConfigError {
                    line: Some(i + 1),
                    text: line.to_string(),
                    msg: "Unbalanced quotes in configuration line".into(),
                });
            }
            let args: Vec<String> = ranges
                .iter()
                .map(|&(s, l)| String::from_utf8_lossy(&scratch[s..s + l]).into_owned())
                .collect();
            if args.is_empty() {
                continue;
            }
            self.apply_directive(&args, Some(i + 1), line)?;
        }
        Ok(())
    }

    /// A configuration from redis.conf text alone (no file name, no command line): what
    /// the config-file fuzz target parses.
    pub fn from_text(content: &str) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        c.load_text(content)?;
        c.settings = c.build_settings();
        Ok(c)
    }

    /// `cairn-server [config-file] [--name value ...]`, as redis-server.
    pub fn from_args(argv: &[String]) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let mut rest = argv;
        if let Some(first) = argv.first() {
            if !first.starts_with("--") {
                let content = std::fs::read_to_string(first).map_err(|e| ConfigError {
                    line: None,
                    text: first.clone(),
                    msg: format!("Fatal error, can't open config file '{first}': {e}"),
                })?;
                c.config_file = Some(
                    std::fs::canonicalize(first)
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|_| first.clone()),
                );
                c.load_text(&content)?;
                rest = &argv[1..];
            }
        }
        // Options on the command line: `--name v1 v2 --other v`.
        let mut i = 0;
        while i < rest.len() {
            let Some(name) = rest[i].strip_prefix("--") else {
                return Err(ConfigError {
                    line: None,
                    text: rest[i].clone(),
                    msg: "Bad directive or wrong number of arguments".into(),
                });
            };
            let mut args = vec![name.to_string()];
            i += 1;
            while i < rest.len() && !rest[i].starts_with("--") {
                args.push(rest[i].clone());
                i += 1;
            }
            // `--save ""` means no save points.
            if args.len() == 1 {
                args.push(String::new());
            }
            let text = args.join(" ");
            c.apply_directive(&args, None, &text)?;
        }
        if let Some(msg) = c.tiering_conflict() {
            return Err(ConfigError {
                line: None,
                text: String::new(),
                msg,
            });
        }
        c.settings = c.build_settings();
        Ok(c)
    }

    /// CONFIG GET: (name, value) pairs for every option matching any pattern. A pattern
    /// without glob characters is a plain lookup (aliases and hidden options included) and
    /// echoes the name as given, as Redis does.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut push = |name: String, value: &str| {
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, value.to_string()));
            }
        };
        for p in patterns {
            if !p.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
                let name = String::from_utf8_lossy(p);
                if let Some(idx) = find_spec(&name) {
                    if OPTIONS[idx].flags & F_UNLISTED == 0 {
                        let v = shown_value(OPTIONS[idx].name, &self.values[idx]);
                        push(name.into_owned(), &v);
                    }
                }
                continue;
            }
            for (i, spec) in OPTIONS.iter().enumerate() {
                if spec.flags & (F_HIDDEN | F_UNLISTED) != 0 {
                    continue;
                }
                for name in std::iter::once(spec.name).chain(spec.alias) {
                    if crate::util::glob_match(p, name.as_bytes(), true) {
                        let v = shown_value(spec.name, &self.values[i]);
                        push(name.to_string(), &v);
                    }
                }
            }
        }
        out
    }

    /// CONFIG SET name value [name value ...]: all or nothing, with Redis's error texts
    /// and checks in Redis's order (names, mutability and duplicates first, then values).
    /// `allow_protected`: the client may change PROTECTED options (enable-protected-configs).
    pub fn set_many(
        &mut self,
        pairs: &[(&str, &str)],
        allow_protected: bool,
    ) -> Result<(), String> {
        let fail = |name: &str, m: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {m}")
        };
        let mut idxs = Vec::with_capacity(pairs.len());
        for (name, _) in pairs {
            let idx = match find_spec(name) {
                Some(idx) if OPTIONS[idx].flags & F_UNLISTED == 0 => idx,
                _ => {
                    return Err(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ))
                }
            };
            let spec = OPTIONS[idx];
            if spec.flags & F_IMMUTABLE != 0 {
                return Err(fail(name, "can't set immutable config"));
            }
            if spec.flags & F_PROTECTED != 0 && !allow_protected {
                return Err(fail(name, "can't set protected config"));
            }
            // Aliases name the same option: `maxmemory` twice or `slaveof`+`replicaof`.
            if idxs.contains(&idx) {
                return Err(fail(name, "duplicate parameter"));
            }
            idxs.push(idx);
        }
        let mut staged = self.clone();
        for ((name, value), &idx) in pairs.iter().zip(&idxs) {
            let canon = staged.canonical(idx, value).map_err(|m| fail(name, &m))?;
            // Accepted in a config file (so a Redis config starts cairn) but not acted on:
            // a runtime change would answer OK and do nothing. (A bad value gets Redis's
            // text first.)
            if OPTIONS[idx].flags & F_NOT_ACTED != 0 {
                return Err(fail(
                    name,
                    "cairn accepts this option in a config file but does not act on it",
                ));
            }
            if OPTIONS[idx].flags & F_UNBUILT != 0 && canon != OPTIONS[idx].default {
                return Err(fail(
                    name,
                    "cairn does not support this option (only its default value is accepted)",
                ));
            }
            staged.values[idx] = canon;
            staged.set_explicitly[idx] = true;
        }
        if let Some(m) = staged.tiering_conflict() {
            return Err(fail(pairs[0].0, &m));
        }
        staged.settings = staged.build_settings();
        *self = staged;
        Ok(())
    }

    /// CONFIG REWRITE: rewrites the config file keeping comments and unknown lines,
    /// replacing lines of options that changed and appending new ones.
    /// Rewrites the config file. `users`: the `user ...` lines that replace the file's
    /// (the ACL's users as ACL LIST shows them; empty with an `aclfile`, whose users stay
    /// in it, as Redis).
    pub fn rewrite(&self, users: &[Vec<u8>]) -> Result<(), String> {
        let Some(path) = &self.config_file else {
            return Err("ERR The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut written = vec![false; OPTIONS.len()];
        let mut out = String::new();
        let mut users_written = false;
        for raw in old.lines() {
            let line = raw.trim();
            let name = line.split_whitespace().next().unwrap_or("");
            if name.eq_ignore_ascii_case("user") {
                // The users are written once, where the first `user` line was.
                if !users_written {
                    for u in users {
                        out.push_str(&String::from_utf8_lossy(u));
                        out.push('\n');
                    }
                    users_written = true;
                }
                continue;
            }
            match (line.starts_with('#') || line.is_empty(), find_spec(name)) {
                // `include` and `rename-command` lines stay as written (each line is
                // one directive of a list, not a value to render).
                (false, Some(idx))
                    if !matches!(OPTIONS[idx].name, "include" | "rename-command") =>
                {
                    if !written[idx] {
                        out.push_str(&self.render_line(idx));
                        out.push('\n');
                        written[idx] = true;
                    }
                }
                _ => {
                    out.push_str(raw);
                    out.push('\n');
                }
            }
        }
        let mut header = false;
        for (idx, spec) in OPTIONS.iter().enumerate() {
            if written[idx] || spec.name == "include" || spec.name == "user" {
                continue;
            }
            if self.values[idx] != self.default_value(idx) && spec.flags & F_SENSITIVE == 0
                || (self.set_explicitly[idx] && self.values[idx] != self.default_value(idx))
            {
                if !header {
                    out.push_str("# Generated by CONFIG REWRITE\n");
                    header = true;
                }
                out.push_str(&self.render_line(idx));
                out.push('\n');
            }
        }
        // Redis writes every user, the default one included, when the file had none.
        if !users_written && !users.is_empty() {
            if !header {
                out.push_str("# Generated by CONFIG REWRITE\n");
            }
            for u in users {
                out.push_str(&String::from_utf8_lossy(u));
                out.push('\n');
            }
        }
        let tmp = format!("{path}.tmp-{}", std::process::id());
        std::fs::write(&tmp, out).map_err(|e| format!("ERR Rewriting config file: {e}"))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("ERR Rewriting config file: {e}"))?;
        Ok(())
    }

    fn default_value(&self, idx: usize) -> String {
        Config::default().values[idx].clone()
    }

    fn render_line(&self, idx: usize) -> String {
        let spec = OPTIONS[idx];
        let v = &self.values[idx];
        match spec.name {
            "save" if v.is_empty() => "save \"\"".to_string(),
            "save" => v
                .split_whitespace()
                .collect::<Vec<_>>()
                .chunks(2)
                .map(|c| format!("save {} {}", c[0], c[1]))
                .collect::<Vec<_>>()
                .join("\n"),
            "client-output-buffer-limit" => v
                .split_whitespace()
                .collect::<Vec<_>>()
                .chunks(4)
                .map(|c| format!("client-output-buffer-limit {}", c.join(" ")))
                .collect::<Vec<_>>()
                .join("\n"),
            _ if v.is_empty() || v.contains(' ') && matches!(spec.kind, OptKind::Str) => {
                format!("{} \"{}\"", spec.name, v.replace('"', "\\\""))
            }
            _ => format!("{} {}", spec.name, v),
        }
    }

    fn int(&self, name: &str) -> i64 {
        self.get_value(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("config {name} is not an integer"))
    }
    fn boolean(&self, name: &str) -> bool {
        self.get_value(name) == Some("yes")
    }

    fn obuf(&self, class: &str) -> OutputLimit {
        let v = self.get_value("client-output-buffer-limit").unwrap_or("");
        let words: Vec<&str> = v.split_whitespace().collect();
        for g in words.chunks(4) {
            if g[0] == class {
                return OutputLimit {
                    hard_bytes: g[1].parse().unwrap_or(0),
                    soft_bytes: g[2].parse().unwrap_or(0),
                    soft_seconds: g[3].parse().unwrap_or(0),
                };
            }
        }
        OutputLimit::default()
    }

    fn build_settings(&self) -> Settings {
        let pass = self.get_value("requirepass").unwrap_or("");
        Settings {
            bind: self
                .get_value("bind")
                .unwrap_or("")
                .split_whitespace()
                .map(String::from)
                .collect(),
            port: self.int("port") as u16,
            tls_port: self.int("tls-port") as u16,
            tls_replication: self.boolean("tls-replication"),
            zset_max_listpack_entries: self.int("zset-max-listpack-entries").max(0) as u64,
            zset_max_listpack_value: self.int("zset-max-listpack-value").max(0) as u64,
            list_max_listpack_size: self.int("list-max-listpack-size"),
            hash_max_listpack_entries: self.int("hash-max-listpack-entries").max(0) as u64,
            hash_max_listpack_value: self.int("hash-max-listpack-value").max(0) as u64,
            hll_sparse_max_bytes: self.int("hll-sparse-max-bytes").max(0) as u64,
            stream_node_max_bytes: self.int("stream-node-max-bytes").max(0) as u64,
            stream_node_max_entries: self.int("stream-node-max-entries").max(0) as u64,
            protected_mode: self.boolean("protected-mode"),
            timeout_s: self.int("timeout") as u64,
            tcp_keepalive_s: self.int("tcp-keepalive") as u64,
            maxclients: self.int("maxclients") as usize,
            requirepass: if pass.is_empty() {
                None
            } else {
                Some(pass.as_bytes().to_vec())
            },
            io_threads: self.int("io-threads") as usize,
            proto_max_bulk_len: self.int("proto-max-bulk-len"),
            client_query_buffer_limit: self.int("client-query-buffer-limit") as u64,
            repl_backlog_size: self.int("repl-backlog-size").max(1) as u64,
            repl_backlog_ttl_s: self.int("repl-backlog-ttl").max(0) as u64,
            repl_diskless_sync: self.boolean("repl-diskless-sync"),
            repl_image_sync: self.boolean("repl-image-sync"),
            repl_ping_replica_period_s: self.int("repl-ping-replica-period").max(1) as u64,
            repl_timeout_s: self.int("repl-timeout").max(1) as u64,
            min_replicas_to_write: self.int("min-replicas-to-write").max(0) as u64,
            min_replicas_max_lag_s: self.int("min-replicas-max-lag").max(0) as u64,
            obuf_normal: self.obuf("normal"),
            avoid_copy_reply_min: self.int("min-string-size-avoid-copy-reply") as u64,
            avoid_copy_reply_threaded_min: self.int("min-string-size-avoid-copy-reply-threaded")
                as u64,
            obuf_replica: self.obuf("slave"),
            obuf_pubsub: self.obuf("pubsub"),
            databases: self.int("databases") as usize,
            hz: self.int("hz") as u32,
            enable_debug_command: self
                .get_value("enable-debug-command")
                .unwrap_or("no")
                .into(),
            loglevel: self.get_value("loglevel").unwrap_or("notice").into(),
            logfile: self.get_value("logfile").unwrap_or("").into(),
            dir: self.get_value("dir").unwrap_or(".").into(),
            pidfile: self.get_value("pidfile").unwrap_or("").into(),
            unixsocket: self.get_value("unixsocket").unwrap_or("").into(),
            daemonize: self.boolean("daemonize"),
            unixsocketperm: u32::from_str_radix(self.get_value("unixsocketperm").unwrap_or("0"), 8)
                .unwrap_or(0),
            maxmemory: self.int("maxmemory") as u64,
            maxmemory_clients: ClientMemoryLimit::parse(
                self.get_value("maxmemory-clients").unwrap_or("0"),
            ),
            maxmemory_policy: EvictionPolicy::parse(
                self.get_value("maxmemory-policy").unwrap_or(""),
            )
            .unwrap_or(EvictionPolicy::NoEviction),
            maxmemory_samples: self.int("maxmemory-samples") as usize,
            lfu_log_factor: self.int("lfu-log-factor") as u32,
            lfu_decay_time: self.int("lfu-decay-time") as u32,
            active_expire_effort: self.int("active-expire-effort") as u32,
            lazyfree_lazy_user_del: self.boolean("lazyfree-lazy-user-del"),
            notify_keyspace_events: self
                .get_value("notify-keyspace-events")
                .and_then(|v| parse_notify_flags(v).ok())
                .unwrap_or(0),
            lazyfree_lazy_user_flush: self.boolean("lazyfree-lazy-user-flush"),
            set_max_intset_entries: self.int("set-max-intset-entries").max(0) as u64,
            set_max_listpack_entries: self.int("set-max-listpack-entries").max(0) as u64,
            set_max_listpack_value: self.int("set-max-listpack-value").max(0) as u64,
            activerehashing: self.boolean("activerehashing"),
            slowlog_log_slower_than: self.int("slowlog-log-slower-than"),
            slowlog_max_len: self.int("slowlog-max-len") as usize,
            tracking_table_max_keys: self.int("tracking-table-max-keys").max(0) as u64,
            busy_reply_threshold: self.int("busy-reply-threshold"),
            latency_monitor_threshold: self.int("latency-monitor-threshold"),
            latency_tracking: self.boolean("latency-tracking"),
            arena_reserve_bytes: self.int("arena-reserve-bytes") as usize,
            save_points: {
                let w: Vec<u64> = self
                    .get_value("save")
                    .unwrap_or("")
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                w.chunks_exact(2).map(|c| (c[0], c[1])).collect()
            },
            dbfilename: self.get_value("dbfilename").unwrap_or("dump.rdb").into(),
            image_filename: self
                .get_value("image-filename")
                .unwrap_or("dump.cimg")
                .into(),
            snapshot_rdb: self.get_value("snapshot-format") == Some("rdb"),
            stop_writes_on_bgsave_error: self.boolean("stop-writes-on-bgsave-error"),
            snapshot_threads: self.int("snapshot-threads") as usize,
            snapshot_pause_budget_us: self.int("snapshot-pause-budget-us") as u64,
            event_loop_spin_us: self.int("event-loop-spin-us") as u64,
            latency_trace_file: self.get_value("latency-trace-file").unwrap_or("").into(),
            snapshot_mode: self
                .get_value("snapshot-mode")
                .and_then(SnapMode::parse)
                .unwrap_or(SnapMode::Auto),
            snapshot_verify_dirty_map: self.boolean("snapshot-verify-dirty-map"),
            snapshot_verify_cow: self.boolean("snapshot-verify-cow"),
            appendonly: self.boolean("appendonly"),
            appendfilename: self.get_value("appendfilename").unwrap_or("").into(),
            appenddirname: self.get_value("appenddirname").unwrap_or("").into(),
            appendfsync: self.get_value("appendfsync").unwrap_or("everysec").into(),
            auto_aof_rewrite_percentage: self.int("auto-aof-rewrite-percentage") as u64,
            auto_aof_rewrite_min_size: self.int("auto-aof-rewrite-min-size") as u64,
            aof_load_truncated: self.boolean("aof-load-truncated"),
            aof_timestamp_enabled: self.boolean("aof-timestamp-enabled"),
            aof_use_rdb_preamble: self.boolean("aof-use-rdb-preamble"),
            rdb_save_incremental_fsync: self.boolean("rdb-save-incremental-fsync"),
            aof_rewrite_incremental_fsync: self.boolean("aof-rewrite-incremental-fsync"),
            aof_disk_min_free: self
                .get_value("aof-disk-min-free")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            aof_disk_min_free_pct: self
                .get_value("aof-disk-min-free")
                .and_then(|v| v.strip_suffix('%'))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            aof_preallocate_bytes: self.int("aof-preallocate-bytes") as u64,
            aof_recycle: self.boolean("aof-recycle"),
            aof_direct_io: self.boolean("aof-direct-io"),
            aof_inflight_syncs: self.int("aof-inflight-syncs") as usize,
            aof_group_commit_wait_us: self.int("aof-group-commit-wait-us") as u64,
            tiered_prefix: self.get_value("tiered-prefix").unwrap_or("").to_string(),
            tiered_max_file_bytes: self.int("tiered-max-file-size") as u64,
            tiered_offload_threshold: self.fraction("tiered-offload-threshold"),
            tiered_upload_threshold: self.fraction("tiered-upload-threshold"),
            tiered_min_value_bytes: self.int("tiered-min-value-size") as u64,
        }
    }

    fn fraction(&self, name: &str) -> f64 {
        self.get_value(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// What tiering cannot be combined with yet: being a replica (its keyspace replaced
    /// by a primary's, which it does not tier on load), a keyspace run from threads the
    /// tier does not serve, no memory limit. None when the combination is allowed
    /// (always, with tiering off). Save points write images with their tier companion,
    /// as BGSAVE does (an RDB is converted from one); the log's entries carry the
    /// commands' own bytes and its rewrite's base is such an image; a primary's full
    /// sync is an RDB converted with the capture's companion.
    pub fn tiering_conflict(&self) -> Option<String> {
        if self.get_value("tiered-prefix").unwrap_or("").is_empty() {
            return None;
        }
        let why = if !self.get_value("replicaof").unwrap_or("").is_empty() {
            "replicaof (a tiered server cannot be a replica yet)"
        } else if self.int("io-threads") > 1 {
            "io-threads > 1 (cold reads are served by the single-threaded loop only)"
        } else if self.int("maxmemory") == 0 {
            "maxmemory 0 (tiering offloads against maxmemory; set it)"
        } else {
            return None;
        };
        Some(format!(
            "tiered-prefix is set: cairn does not support {why}"
        ))
    }
}

/// `maxmemory-policy`: which keys eviction may pick, and by which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl EvictionPolicy {
    pub const ALL: [(&'static str, EvictionPolicy); 8] = [
        ("volatile-lru", EvictionPolicy::VolatileLru),
        ("volatile-lfu", EvictionPolicy::VolatileLfu),
        ("volatile-random", EvictionPolicy::VolatileRandom),
        ("volatile-ttl", EvictionPolicy::VolatileTtl),
        ("allkeys-lru", EvictionPolicy::AllKeysLru),
        ("allkeys-lfu", EvictionPolicy::AllKeysLfu),
        ("allkeys-random", EvictionPolicy::AllKeysRandom),
        ("noeviction", EvictionPolicy::NoEviction),
    ];
    pub fn parse(s: &str) -> Option<EvictionPolicy> {
        Self::ALL
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
            .map(|&(_, p)| p)
    }
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map(|(n, _)| *n)
            .unwrap_or("noeviction")
    }
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }
}

/// `snapshot-mode`: how a background snapshot is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapMode {
    /// Live passes with `WP_ASYNC` tracking; where they do not converge within the pause
    /// budget, switch to the freeze-free variant for the remainder. A capture streamed to
    /// replicas as it is taken cannot switch: it is freeze-free from the start.
    Auto,
    /// Live passes with `WP_ASYNC` tracking only; the final pause copies whatever is dirty
    /// then, even past the budget.
    Async,
    /// The freeze-free variant from the start (synchronous write-protect faults).
    Sync,
    /// Freeze-free by copy-before-write in the arena's write accessors (no faults).
    Cow,
    /// The executor stops for the whole copy.
    StopTheWorld,
}

impl SnapMode {
    pub fn parse(s: &str) -> Option<SnapMode> {
        Some(match s {
            "auto" => SnapMode::Auto,
            "async" => SnapMode::Async,
            "sync" => SnapMode::Sync,
            "cow" => SnapMode::Cow,
            "stop-the-world" => SnapMode::StopTheWorld,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn defaults_match_redis7() {
        let c = Config::default();
        let s = c.settings();
        assert_eq!(s.port, 6379);
        assert_eq!(s.databases, 16);
        assert_eq!(s.maxclients, 10000);
        assert_eq!(s.proto_max_bulk_len, 512 * 1024 * 1024);
        assert_eq!(s.client_query_buffer_limit, 1 << 30);
        assert_eq!(s.obuf_pubsub.hard_bytes, 32 << 20);
        assert_eq!(c.get_value("bind"), Some("127.0.0.1 -::1"));
        assert_eq!(c.get_value("loglevel"), Some("notice"));
    }

    #[test]
    fn command_line_and_errors() {
        let c = Config::from_args(&args(&[
            "--port",
            "7000",
            "--maxmemory",
            "1gb",
            "--save",
            "",
        ]))
        .unwrap();
        assert_eq!(c.settings().port, 7000);
        assert_eq!(c.settings().maxmemory, 1 << 30);
        assert_eq!(c.get_value("save"), Some(""));
        let e = Config::from_args(&args(&["--no-such-option", "1"])).unwrap_err();
        assert!(e.to_string().contains("no-such-option"), "{e}");
        let e = Config::from_args(&args(&["--port", "70000"])).unwrap_err();
        assert!(e.to_string().contains("port"), "{e}");
    }

    #[test]
    fn config_file_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("cairn-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.conf");
        std::fs::write(
            &path,
            "# comment\nport 7001\n\nmaxmemory-policy sometimes\n",
        )
        .unwrap();
        let e = Config::from_args(&args(&[path.to_str().unwrap()])).unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(e.to_string().contains("maxmemory-policy"));
        std::fs::write(
            &path,
            "port 7001\nsave 900 1\nsave 300 10\nappendonly no\nrepl-backlog-size 1mb\nsyslog-ident cairn\n",
        )
        .unwrap();
        let c = Config::from_args(&args(&[path.to_str().unwrap()])).unwrap();
        assert_eq!(c.get_value("save"), Some("900 1 300 10"));
        // `save`, `appendonly` and the backlog's size are acted on; `syslog-ident` is
        // not: one warning.
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("syslog-ident"));
    }

    #[test]
    fn config_set_is_atomic() {
        let mut c = Config::default();
        assert!(c
            .set_many(&[("maxmemory", "10mb"), ("port", "notanumber")], false)
            .is_err());
        assert_eq!(c.settings().maxmemory, 0);
        c.set_many(
            &[("maxmemory", "10mb"), ("maxmemory-policy", "ALLKEYS-LRU")],
            false,
        )
        .unwrap();
        assert_eq!(c.settings().maxmemory, 10 << 20);
        assert_eq!(c.settings().maxmemory_policy, EvictionPolicy::AllKeysLru);
        let err = c.set_many(&[("databases", "4")], false).unwrap_err();
        assert!(err.contains("immutable"), "{err}");
        c.set_many(&[("client-output-buffer-limit", "pubsub 1mb 0 0")], false)
            .unwrap();
        assert_eq!(c.settings().obuf_pubsub.hard_bytes, 1 << 20);
        assert_eq!(c.settings().obuf_replica.hard_bytes, 256 << 20);
        let got = c.get_matching(&[b"maxmemory*"]);
        assert!(got.iter().any(|(n, v)| n == "maxmemory" && v == "10485760"));
    }

    #[test]
    fn file_names_inside_dir_cannot_be_paths() {
        for (option, bad, msg) in [
            (
                "dbfilename",
                "../x.rdb",
                "dbfilename can't be a path, just a filename",
            ),
            (
                "dbfilename",
                "/tmp/x.rdb",
                "dbfilename can't be a path, just a filename",
            ),
            (
                "dbfilename",
                "sub/x.rdb",
                "dbfilename can't be a path, just a filename",
            ),
            (
                "dbfilename",
                "a\\b.rdb",
                "dbfilename can't be a path, just a filename",
            ),
            (
                "appendfilename",
                "../x.aof",
                "appendfilename can't be a path, just a filename",
            ),
            ("appendfilename", "", "appendfilename can't be empty"),
            (
                "appenddirname",
                "/abs",
                "appenddirname can't be a path, just a dirname",
            ),
            (
                "appenddirname",
                "a/b",
                "appenddirname can't be a path, just a dirname",
            ),
            ("appenddirname", "", "appenddirname can't be empty"),
            (
                "image-filename",
                "../x.cimg",
                "image-filename can't be a path, just a filename",
            ),
            ("image-filename", "", "image-filename can't be empty"),
            (
                "snapshot-format",
                "lzf",
                "argument(s) must be one of the following: image, rdb",
            ),
        ] {
            let e = Config::from_args(&args(&[&format!("--{option}"), bad])).unwrap_err();
            assert!(e.to_string().ends_with(msg), "{option} {bad:?}: {e}");
        }
        let c = Config::from_args(&args(&[
            "--dbfilename",
            "my dump.rdb",
            "--appendfilename",
            "..aof",
            "--appenddirname",
            "aofs",
        ]))
        .unwrap();
        assert_eq!(c.settings().dbfilename, "my dump.rdb");
        assert_eq!(c.settings().appenddirname, "aofs");
        let mut c = Config::default();
        let err = c
            .set_many(&[("dbfilename", "../escape.rdb")], true)
            .unwrap_err();
        assert_eq!(err, "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename");
        assert_eq!(c.settings().dbfilename, "dump.rdb");
        c.set_many(&[("dbfilename", "other.rdb")], true).unwrap();
        assert_eq!(c.settings().dbfilename, "other.rdb");
        assert_eq!(c.settings().image_filename, "dump.cimg");
        assert!(!c.settings().snapshot_rdb);
        c.set_many(
            &[("image-filename", "x.cimg"), ("snapshot-format", "rdb")],
            true,
        )
        .unwrap();
        assert_eq!(c.settings().image_filename, "x.cimg");
        assert!(c.settings().snapshot_rdb);
    }

    #[test]
    fn maxmemory_clients_in_bytes_or_percent_of_maxmemory() {
        let limit = |v: &str, maxmemory: &str| {
            let c = Config::from_args(&args(&["--maxmemory-clients", v, "--maxmemory", maxmemory]))
                .unwrap();
            let s = c.settings();
            s.maxmemory_clients.bytes(s.maxmemory)
        };
        assert_eq!(limit("0", "0"), 0);
        assert_eq!(limit("1mb", "0"), 1 << 20);
        assert_eq!(limit("10%", "10mb"), 1 << 20);
        // A percentage needs a maxmemory; a limit is at least 128 KiB.
        assert_eq!(limit("10%", "0"), 0);
        assert_eq!(limit("1k", "0"), MIN_CLIENT_MEMORY_LIMIT);
        assert_eq!(limit("1%", "1mb"), MIN_CLIENT_MEMORY_LIMIT);
        assert_eq!(limit("0%", "1mb"), 0);
    }
}
