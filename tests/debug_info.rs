//! DEBUG's subcommands, LATENCY HISTOGRAM / GRAPH, and INFO / CLIENT LIST fields,
//! against Debian's redis-server 7.0.15 where the output is deterministic.
mod common;
use common::*;

fn status(reply: &[u8]) -> String {
    show(reply).trim_end().to_string()
}

#[test]
fn debug_protocol_matches_redis_in_resp2_and_resp3() {
    let (_c, _r, mut rc, mut rr) = both(DEBUG_ON);
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "nope", "TRUE",
    ];
    for resp3 in [false, true] {
        if resp3 {
            rc.call(&["HELLO", "3"]);
            rr.call(&["HELLO", "3"]);
        }
        for t in types {
            same_str(&mut rc, &mut rr, &["DEBUG", "PROTOCOL", t]);
            // attrib and push send a second reply after the first frame.
            if matches!(t, "push" | "attrib") && resp3 {
                assert_eq!(show(&rc.reply()), show(&rr.reply()), "{t}");
            }
        }
    }
}

#[test]
fn debug_argument_errors_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(DEBUG_ON);
    same_replies(
        &mut rc,
        &mut rr,
        &[
            &["RPUSH", "l", "a", "b"],
            &["HSET", "h", "f", "v"],
            &["SET", "s", "x"],
            &["DEBUG", "RELOAD", "BOGUS"],
            &["DEBUG", "PROTOCOL"],
            &["DEBUG", "NOSUCH"],
            &["DEBUG", "LISTPACK", "missing"],
            &["DEBUG", "LISTPACK", "l"],
            &["DEBUG", "LISTPACK", "s"],
            &["DEBUG", "LISTPACK", "h"],
            &["DEBUG", "QUICKLIST", "h"],
            &["DEBUG", "QUICKLIST", "missing"],
            &["DEBUG", "QUICKLIST", "l"],
            &["DEBUG", "QUICKLIST", "l", "1"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "x"],
            &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            &["DEBUG", "SLEEP", "0"],
            &["DEBUG", "SLEEP", "-1"],
            &["DEBUG", "SLEEP", "junk"],
            &["DEBUG", "STRINGMATCH-TEST"],
            &["DEBUG", "CHANGE-REPL-ID"],
            &["DEBUG", "REPLYBUFFER", "nope", "1"],
            &["DEBUG", "REPLYBUFFER", "peak-reset-time", "x"],
            &["DEBUG", "DIGEST-VALUE", "l", "missing"],
        ],
    );
}

#[test]
fn debug_help_lists_every_subcommand_it_answers() {
    let c = start_cairn(DEBUG_ON);
    let mut rc = Raw::connect(c.port);
    let help = show(&rc.call(&["DEBUG", "HELP"]));
    rc.call(&["RPUSH", "l", "a"]);
    rc.call(&["HSET", "h", "f", "v"]);
    for (sub, args) in [
        ("AOF-PAUSE-SYNCS", &["0"][..]),
        ("AOF-HOLD-VALUES", &["0"]),
        ("CHANGE-REPL-ID", &[]),
        ("DIGEST", &[]),
        ("DIGEST-VALUE", &["l"]),
        ("LISTPACK", &["h"]),
        ("OBJECT", &["l"]),
        ("PROTOCOL", &["map"]),
        ("QUICKLIST", &["l"]),
        ("QUICKLIST-PACKED-THRESHOLD", &["0"]),
        ("RELOAD", &[]),
        ("SET-ACTIVE-EXPIRE", &["1"]),
        ("SLEEP", &["0"]),
        ("STRINGMATCH-TEST", &[]),
    ] {
        assert!(help.contains(&format!("+{sub}")), "{sub} missing from HELP");
        let mut cmd = vec!["DEBUG", sub];
        cmd.extend_from_slice(args);
        let r = show(&rc.call(&cmd));
        // AOF-PAUSE-SYNCS and AOF-HOLD-VALUES need the log: their error names it, not an
        // unknown subcommand.
        assert!(!r.contains("unknown subcommand"), "{sub}: {r}");
    }
}

#[test]
fn debug_sleep_blocks_the_server_for_the_time_asked() {
    let c = start_cairn(DEBUG_ON);
    let mut a = Raw::connect(c.port);
    let mut b = Raw::connect(c.port);
    let start = std::time::Instant::now();
    a.send(&encode(&[b"DEBUG", b"SLEEP", b"0.3"]));
    // The reply cannot come before the sleep ends (a lower bound, whatever the load).
    assert_eq!(show(&a.reply()), "+OK\r\n");
    assert!(start.elapsed() >= std::time::Duration::from_millis(300));
    // The executor itself spent the time in the command, and serves again afterwards.
    let usec: u64 = b
        .info("commandstats", "cmdstat_debug")
        .and_then(|l| l.split("usec=").nth(1)?.split(',').next()?.parse().ok())
        .expect("cmdstat_debug");
    assert!(usec >= 300_000, "DEBUG SLEEP 0.3 ran {usec} us");
    assert_eq!(show(&b.call(&["PING"])), "+PONG\r\n");
}

/// A keyspace of every kind, with TTLs, in two databases.
fn fill(r: &mut Raw) {
    for cmd in [
        &["SET", "str", "hello"][..],
        &["SET", "num", "12345"],
        &["SET", "ttl", "v", "EX", "1000"],
        &["RPUSH", "list", "a", "b", "c", "1", "2"],
        &["HSET", "hash", "f1", "v1", "f2", "v2"],
        &["SADD", "set", "x", "y", "z"],
        &["SADD", "iset", "1", "2", "3"],
        &["ZADD", "zset", "1", "a", "2.5", "b"],
        &["XADD", "stream", "1-1", "f", "v"],
        &["PFADD", "hll", "a", "b", "c"],
        &["SELECT", "3"],
        &["SET", "other", "db3"],
        &["SELECT", "0"],
    ] {
        let r = show(&r.call(cmd));
        assert!(!r.starts_with('-'), "{cmd:?}: {r}");
    }
    for i in 0..300 {
        r.call(&["RPUSH", "biglist", &format!("element-{i}")]);
        r.call(&["HSET", "bighash", &format!("f{i}"), &format!("{i}")]);
    }
}

#[test]
fn debug_reload_keeps_the_dataset_digest() {
    let dir = temp_dir("debug-reload");
    let s = start_debug(&dir, &[]);
    let mut r = Raw::connect(s.port);
    fill(&mut r);
    r.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    ]);
    let before = status(&r.call(&["DEBUG", "DIGEST"]));
    assert_ne!(before, "+0000000000000000000000000000000000000000");
    assert_eq!(show(&r.call(&["DEBUG", "RELOAD"])), "+OK\r\n");
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), before);
    assert_eq!(show(&r.call(&["DBSIZE"])), ":12\r\n");
    assert_eq!(show(&r.call(&["FCALL", "f", "0"])), ":1\r\n");
    assert_eq!(
        show(&r.call(&["LRANGE", "list", "0", "-1"]))
            .matches('$')
            .count(),
        5
    );

    // NOSAVE: back to the image just written, whatever changed since.
    r.call(&["SET", "later", "1"]);
    r.call(&["DEL", "str"]);
    assert_eq!(show(&r.call(&["DEBUG", "RELOAD", "NOSAVE"])), "+OK\r\n");
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), before);

    // NOFLUSH without MERGE refuses a key present on both sides and changes nothing.
    r.call(&["SET", "later", "1"]);
    r.call(&["SET", "str", "changed"]);
    let mid = status(&r.call(&["DEBUG", "DIGEST"]));
    assert_eq!(
        show(&r.call(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"])),
        "-ERR Error trying to load the RDB dump\r\n"
    );
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), mid);
    // MERGE: the image's keys win, keys only in memory stay.
    assert_eq!(
        show(&r.call(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"])),
        "+OK\r\n"
    );
    assert_eq!(show(&r.call(&["GET", "str"])), "$5\r\nhello\r\n");
    assert_eq!(show(&r.call(&["GET", "later"])), "$1\r\n1\r\n");
    assert_eq!(show(&r.call(&["DBSIZE"])), ":13\r\n");
    r.call(&["DEL", "later"]);
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), before);
}

#[test]
fn debug_reload_digest_equals_redis_for_the_same_writes() {
    let (_c, _r, mut rc, mut rr) = both(DEBUG_ON);
    // Only the kinds whose DEBUG DIGEST cairn computes as Redis does (strings, lists,
    // hashes, sets, sorted sets).
    for cmd in [
        &["SET", "str", "hello"][..],
        &["RPUSH", "list", "a", "b", "c"],
        &["HSET", "hash", "f1", "v1", "f2", "v2"],
        &["SADD", "set", "x", "y", "z"],
        &["ZADD", "zset", "1", "a", "2.5", "b"],
    ] {
        same_str(&mut rc, &mut rr, cmd);
    }
    let before = same_str(&mut rc, &mut rr, &["DEBUG", "DIGEST"]);
    same_str(&mut rc, &mut rr, &["DEBUG", "RELOAD"]);
    assert_eq!(same_str(&mut rc, &mut rr, &["DEBUG", "DIGEST"]), before);
}

#[test]
fn debug_loadaof_replays_the_log_into_the_same_dataset() {
    let dir = temp_dir("debug-loadaof");
    let s = start_on(&dir, &with(DEBUG_ON, AOF_ON), &[]);
    let mut r = Raw::connect(s.port);
    fill(&mut r);
    r.call(&["INCR", "num"]);
    r.call(&["LPOP", "list"]);
    let before = status(&r.call(&["DEBUG", "DIGEST"]));
    assert_eq!(show(&r.call(&["DEBUG", "LOADAOF"])), "+OK\r\n");
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), before);
    // The log goes on after the replay, and a restart sees the same dataset.
    r.call(&["SET", "after", "1"]);
    let after = status(&r.call(&["DEBUG", "DIGEST"]));
    assert_eq!(show(&r.call(&["DEBUG", "LOADAOF"])), "+OK\r\n");
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), after);
    drop(r);
    drop(s);
    let s = start_on(&dir, &with(DEBUG_ON, AOF_ON), &[]);
    let mut r = Raw::connect(s.port);
    assert_eq!(status(&r.call(&["DEBUG", "DIGEST"])), after);
}

#[test]
fn debug_loadaof_without_the_log_is_an_error() {
    let c = start_cairn(DEBUG_ON);
    let mut r = Raw::connect(c.port);
    assert!(show(&r.call(&["DEBUG", "LOADAOF"])).starts_with("-ERR"));
}

/// INFO fields cairn has and Redis 7.0 does not: its own figures (the arena, snapshots,
/// the log's writer, reply and request buffers), named apart from Redis's.
const INFO_CAIRN_ONLY: &[&str] = &[
    "cairn_version",
    "arena_headroom_bytes",
    "arena_reserved_bytes",
    "arena_write_reserve_bytes",
    "arena_oom_refusals",
    "client_query_buffer_limit_disconnections",
    "client_output_buffer_limit_disconnections",
    "reply_bytes_copied",
    "reply_bytes_referenced",
    "request_args_adopted",
    "request_args_in_place",
    "request_args_in_place_budget_bytes",
    "request_args_in_place_bytes",
    "request_args_over_budget",
    "snapshot_bytes_written",
    "snapshot_extra_bytes_peak",
    "snapshot_mode",
    "snapshot_pause_us_max",
    "snapshot_rounds",
    "aof_disk_free_bytes",
    "aof_durable_lsn",
    "aof_executor_batches",
    "aof_fsync_us_p50",
    "aof_fsync_us_p99",
    "aof_fsyncs",
    "aof_io_engine",
    "aof_lsn",
    "aof_pending_bytes",
    "aof_pinned_values",
    "aof_recycled_files",
    "aof_values_by_reference",
];

/// INFO's sections as (title, field names in order), per-command / per-code / per-db
/// field names folded to one.
fn info_layout(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.split("\r\n") {
        if let Some(title) = line.strip_prefix("# ") {
            out.push((title.to_string(), Vec::new()));
        } else if let Some((k, _)) = line.split_once(':') {
            let k = if k.starts_with("cmdstat_") {
                "cmdstat_*".to_string()
            } else if k.starts_with("errorstat_") {
                "errorstat_*".to_string()
            } else if k.starts_with("latency_percentiles_usec_") {
                "latency_percentiles_usec_*".to_string()
            } else if k.starts_with("db") && k[2..].bytes().all(|b| b.is_ascii_digit()) {
                "db*".to_string()
            } else {
                k.to_string()
            };
            let fields = &mut out.last_mut().expect("a field before any section").1;
            if !fields.contains(&k) {
                fields.push(k);
            }
        }
    }
    out
}

#[test]
fn info_has_every_redis_field_section_by_section() {
    for aof in [false, true] {
        let args: &[&str] = if aof { &["--appendonly", "yes"] } else { &[] };
        let (_c, _r, mut rc, mut rr) = both(args);
        for r in [&mut rc, &mut rr] {
            r.call(&["SET", "k", "v"]);
            r.call(&["GET", "k"]);
            r.call(&["NOSUCHCOMMAND"]);
            r.call(&["CONFIG", "GET", "maxmemory"]);
        }
        let redis = info_layout(&show(&bulk_payload(&rr.call(&["INFO", "everything"]))));
        let cairn = info_layout(&show(&bulk_payload(&rc.call(&["INFO", "everything"]))));
        let titles =
            |l: &[(String, Vec<String>)]| l.iter().map(|s| s.0.clone()).collect::<Vec<_>>();
        assert_eq!(titles(&cairn), titles(&redis), "sections (aof {aof})");
        for ((title, theirs), (_, ours)) in redis.iter().zip(&cairn) {
            let ours: Vec<&String> = ours
                .iter()
                .filter(|f| !INFO_CAIRN_ONLY.contains(&f.as_str()))
                .collect();
            let theirs: Vec<&String> = theirs.iter().collect();
            assert_eq!(ours, theirs, "fields of # {title} (aof {aof})");
        }
        // The default INFO and single sections list the same sections as Redis's.
        let d_redis = info_layout(&show(&bulk_payload(&rr.call(&["INFO"]))));
        let d_cairn = info_layout(&show(&bulk_payload(&rc.call(&["INFO"]))));
        assert_eq!(titles(&d_cairn), titles(&d_redis));
        for sec in ["latencystats", "stats", "LATENCYSTATS"] {
            let a = info_layout(&show(&bulk_payload(&rc.call(&["INFO", sec]))));
            let b = info_layout(&show(&bulk_payload(&rr.call(&["INFO", sec]))));
            assert_eq!(titles(&a), titles(&b), "INFO {sec}");
        }
    }
}

#[test]
fn info_stats_new_fields_have_real_values() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    let reads = r.info_u64("stats", "total_reads_processed");
    let writes = r.info_u64("stats", "total_writes_processed");
    for _ in 0..5 {
        r.call(&["PING"]);
    }
    assert!(r.info_u64("stats", "total_reads_processed") >= reads + 5);
    assert!(r.info_u64("stats", "total_writes_processed") >= writes + 5);
    // Over maxmemory with nothing evictable: an exceeded period opens and stays open.
    r.call(&["SET", "big", &"x".repeat(100_000)]);
    r.call(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    r.call(&["CONFIG", "SET", "maxmemory", "1"]);
    assert!(show(&r.call(&["SET", "more", "1"])).starts_with("-OOM"));
    wait_until(std::time::Duration::from_secs(10), "exceeded time", || {
        r.info_u64("stats", "current_eviction_exceeded_time") >= 5
    });
    r.call(&["CONFIG", "SET", "maxmemory", "0"]);
    r.call(&["SET", "more", "1"]);
    wait_until(
        std::time::Duration::from_secs(10),
        "the period to end",
        || r.info_u64("stats", "current_eviction_exceeded_time") == 0,
    );
    assert!(r.info_u64("stats", "total_eviction_exceeded_time") >= 5);
    // No defragmentation: refused rather than accepted and ignored.
    assert!(show(&r.call(&["CONFIG", "SET", "activedefrag", "yes"])).starts_with("-ERR"));
}

#[test]
fn info_expire_cycle_time_counts_active_expiry() {
    let c = start_cairn(&["--hz", "100"]);
    let mut r = Raw::connect(c.port);
    assert_eq!(r.info_u64("stats", "expire_cycle_cpu_milliseconds"), 0);
    const KEYS: usize = 100_000;
    for chunk in 0..KEYS / 1000 {
        for i in 0..1000 {
            let k = format!("k{}", chunk * 1000 + i);
            r.send(&encode(&[b"SET", k.as_bytes(), b"v", b"PX", b"1"]));
        }
        for _ in 0..1000 {
            r.reply();
        }
    }
    wait_until(std::time::Duration::from_secs(60), "active expiry", || {
        r.info_u64("stats", "expired_keys") >= KEYS as u64
    });
    // Deleting 100,000 keys in expiry cycles takes more than a millisecond in all.
    assert!(r.info_u64("stats", "expire_cycle_cpu_milliseconds") >= 1);
}

/// CLIENT LIST / INFO fields by name, in order.
fn client_fields(line: &str) -> Vec<(String, String)> {
    line.trim()
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], k: &str) -> &'a str {
    &fields.iter().find(|f| f.0 == k).unwrap().1
}

#[test]
fn client_list_fields_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let mine = |r: &mut Raw, cmd: &[&str]| {
        let t = show(&bulk_payload(&r.call(cmd)));
        client_fields(t.lines().next().unwrap())
    };
    let a = mine(&mut rc, &["CLIENT", "INFO"]);
    let b = mine(&mut rr, &["CLIENT", "INFO"]);
    let names = |f: &[(String, String)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b));
    // The caller's own query bytes and arguments, as Redis counts them.
    for k in [
        "qbuf",
        "argv-mem",
        "multi-mem",
        "obl",
        "oll",
        "omem",
        "multi",
    ] {
        assert_eq!(field(&a, k), field(&b, k), "{k}");
    }
    let a = mine(&mut rc, &["CLIENT", "LIST", "ID", field(&a, "id")]);
    let b = mine(&mut rr, &["CLIENT", "LIST", "ID", field(&b, "id")]);
    for k in ["qbuf", "argv-mem", "multi-mem"] {
        assert_eq!(field(&a, k), field(&b, k), "{k}");
    }
    // Inside MULTI: the queued commands' memory, as another client sees it.
    for r in [&mut rc, &mut rr] {
        r.call(&["MULTI"]);
        r.call(&["SET", "key", "value"]);
        r.call(&["GET", "key"]);
    }
    let in_multi = |port: u16| {
        let mut o = Raw::connect(port);
        let t = show(&bulk_payload(&o.call(&["CLIENT", "LIST"])));
        t.lines()
            .map(client_fields)
            .find(|f| field(f, "multi") != "-1")
            .unwrap()
    };
    let a = in_multi(_c.port);
    let b = in_multi(_r.port);
    for k in ["multi", "multi-mem", "argv-mem", "qbuf"] {
        assert_eq!(field(&a, k), field(&b, k), "in MULTI: {k}");
    }
    rc.call(&["DISCARD"]);
    rr.call(&["DISCARD"]);
    // Another client's unparsed bytes are its qbuf.
    let mut pc = Raw::connect(_c.port);
    let mut pr = Raw::connect(_r.port);
    let partial = b"*2\r\n$3\r\nGET\r\n$5\r\nab";
    pc.send(partial);
    pr.send(partial);
    // The other connection may not be accepted, or its bytes not read, yet: wait for both
    // servers to show them.
    let other = |r: &mut Raw| {
        let t = show(&bulk_payload(&r.call(&["CLIENT", "LIST"])));
        t.lines()
            .map(client_fields)
            .find(|f| field(f, "cmd") == "NULL")
    };
    let partial_read = |r: &mut Raw| {
        let mut seen = Vec::new();
        wait_until(
            std::time::Duration::from_secs(10),
            "partial read",
            || match other(r) {
                Some(f) if field(&f, "qbuf") != "0" => {
                    seen = f;
                    true
                }
                _ => false,
            },
        );
        seen
    };
    let a = partial_read(&mut rc);
    let b = partial_read(&mut rr);
    for k in ["qbuf", "argv-mem", "multi-mem", "obl", "oll", "omem"] {
        assert_eq!(field(&a, k), field(&b, k), "partial: {k}");
    }
    let qbuf: u64 = field(&a, "qbuf").parse().unwrap();
    let free: u64 = field(&a, "qbuf-free").parse().unwrap();
    let tot: u64 = field(&a, "tot-mem").parse().unwrap();
    assert!(tot >= qbuf + free, "tot-mem {tot} holds the query buffer");
}

#[test]
fn client_list_output_figures_follow_pending_output() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    r.call(&["SET", "big", &"x".repeat(200_000)]);
    // A client that asks for a big value and does not read: its output waits.
    let mut slow = Raw::connect(c.port);
    for _ in 0..50 {
        slow.send(&encode(&[b"GET", b"big"]));
    }
    let mut f = Vec::new();
    wait_until(std::time::Duration::from_secs(10), "pending output", || {
        let t = show(&bulk_payload(&r.call(&["CLIENT", "LIST"])));
        f = t
            .lines()
            .map(client_fields)
            .find(|f| field(f, "cmd") == "get")
            .unwrap_or_default();
        !f.is_empty()
            && field(&f, "omem").parse::<u64>().unwrap() + field(&f, "obl").parse::<u64>().unwrap()
                > 1_000_000
    });
    let tot: u64 = field(&f, "tot-mem").parse().unwrap();
    let omem: u64 = field(&f, "omem").parse().unwrap();
    let rbs: u64 = field(&f, "rbs").parse().unwrap();
    let rbp: u64 = field(&f, "rbp").parse().unwrap();
    let obl: u64 = field(&f, "obl").parse().unwrap();
    assert!(tot >= omem + rbs, "{f:?}");
    assert!(rbp >= obl && rbs >= obl, "{f:?}");
}

/// One command's LATENCY HISTOGRAM entry: name, calls, (µs, cumulative calls) levels.
type CommandHistogram = (String, i64, Vec<(i64, i64)>);

/// A LATENCY HISTOGRAM reply (RESP2), sorted by command.
fn histograms(reply: &[u8]) -> Vec<CommandHistogram> {
    let text = show(reply);
    let mut it = text.split("\r\n").filter(|l| !l.is_empty());
    let n: usize = it.next().unwrap()[1..].parse::<usize>().unwrap() / 2;
    let mut out = Vec::new();
    for _ in 0..n {
        it.next();
        let name = it.next().unwrap().to_string();
        it.next(); // *4
        it.next();
        it.next(); // calls
        let calls: i64 = it.next().unwrap()[1..].parse().unwrap();
        it.next();
        it.next(); // histogram_usec
        let levels: usize = it.next().unwrap()[1..].parse::<usize>().unwrap() / 2;
        let mut l = Vec::new();
        for _ in 0..levels {
            let us: i64 = it.next().unwrap()[1..].parse().unwrap();
            let cum: i64 = it.next().unwrap()[1..].parse().unwrap();
            l.push((us, cum));
        }
        out.push((name, calls, l));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn latency_histogram_matches_redis_by_shape() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for r in [&mut rc, &mut rr] {
        for i in 0..5 {
            r.call(&["SET", &format!("k{i}"), "v"]);
        }
        for _ in 0..3 {
            r.call(&["GET", "k1"]);
        }
        r.call(&["CONFIG", "GET", "maxmemory"]);
        r.call(&["CONFIG", "GET", "hz"]);
    }
    same_replies(
        &mut rc,
        &mut rr,
        &[
            &["LATENCY", "HISTOGRAM", "nosuchcommand"],
            &["LATENCY", "HISTOGRAM", "del"],
            &["LATENCY", "GRAPH", "command"],
            &["LATENCY", "GRAPH"],
        ],
    );
    for args in [
        &["LATENCY", "HISTOGRAM", "set", "GET"][..],
        &["LATENCY", "HISTOGRAM", "config"],
        &["LATENCY", "HISTOGRAM", "config|get", "nosuch", "set"],
    ] {
        let a = histograms(&rc.call(args));
        let b = histograms(&rr.call(args));
        let key = |v: &[CommandHistogram]| v.iter().map(|x| (x.0.clone(), x.1)).collect::<Vec<_>>();
        assert_eq!(key(&a), key(&b), "{args:?}");
        for (name, calls, levels) in &a {
            assert!(!levels.is_empty(), "{name}");
            assert!(levels
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
            assert_eq!(levels.last().unwrap().1, *calls, "{name}");
        }
    }
    // Every histogram: the same commands as Redis has (LATENCY itself included).
    let all = histograms(&rc.call(&["LATENCY", "HISTOGRAM"]));
    assert!(all.iter().any(|h| h.0 == "latency|histogram"));
    // latency-tracking no: nothing new is recorded.
    rc.call(&["CONFIG", "SET", "latency-tracking", "no"]);
    rc.call(&["INCR", "counter"]);
    assert_eq!(show(&rc.call(&["LATENCY", "HISTOGRAM", "incr"])), "*0\r\n");
    rc.call(&["CONFIG", "SET", "latency-tracking", "yes"]);
    // RESETSTAT forgets them, as Redis.
    rc.call(&["CONFIG", "RESETSTAT"]);
    rr.call(&["CONFIG", "RESETSTAT"]);
    same_str(&mut rc, &mut rr, &["LATENCY", "HISTOGRAM", "set"]);
}

#[test]
fn info_latencystats_lines_follow_the_percentiles_config() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for r in [&mut rc, &mut rr] {
        same_str_each(
            r,
            &[
                "CONFIG",
                "SET",
                "latency-tracking-info-percentiles",
                "0 50 99.9 100",
            ],
        );
        r.call(&["SET", "k", "v"]);
    }
    let line = |r: &mut Raw| {
        let t = show(&bulk_payload(&r.call(&["INFO", "latencystats"])));
        let l = t
            .lines()
            .find(|l| l.starts_with("latency_percentiles_usec_set:"))
            .unwrap()
            .to_string();
        // Labels kept, values' digits folded.
        l.split(',')
            .map(|p| {
                p.split_once('=')
                    .map_or(p.to_string(), |(k, _)| k.to_string())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(line(&mut rc), line(&mut rr));
}

fn same_str_each(r: &mut Raw, args: &[&str]) {
    assert_eq!(show(&r.call(args)), "+OK\r\n", "{args:?}");
}

#[test]
fn latency_graph_draws_the_monitor_samples_as_redis() {
    let (_c, _r, mut rc, mut rr) = both(DEBUG_ON);
    for r in [&mut rc, &mut rr] {
        same_str_each(r, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
        same_str_each(r, &["DEBUG", "SLEEP", "0.05"]);
    }
    let fold = |b: Vec<u8>| -> String {
        show(&bulk_payload(&b))
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect()
    };
    let a = fold(rc.call(&["LATENCY", "GRAPH", "command"]));
    let b = fold(rr.call(&["LATENCY", "GRAPH", "command"]));
    // Digits folded: the sleep's measured ms and the sample's age may differ by one.
    let norm = |s: &str| s.replace("99", "9").replace("99", "9");
    assert_eq!(norm(&a), norm(&b));
    assert!(a.starts_with("command - high "));
}

#[test]
fn debug_reload_keeps_the_servers_counters_and_watchers_see_it() {
    let dir = temp_dir("debug-reload-stats");
    let s = start_debug(&dir, &[]);
    let mut r = Raw::connect(s.port);
    r.call(&["SET", "k", "v"]);
    r.call(&["GET", "k"]);
    r.call(&["GET", "missing"]);
    let hits = r.info_u64("stats", "keyspace_hits");
    let misses = r.info_u64("stats", "keyspace_misses");
    // A WATCH across the reload: the flush touches the key, as Redis's emptyData.
    let mut w = Raw::connect(s.port);
    w.call(&["WATCH", "k"]);
    assert_eq!(show(&r.call(&["DEBUG", "RELOAD"])), "+OK\r\n");
    assert_eq!(r.info_u64("stats", "keyspace_hits"), hits);
    assert_eq!(r.info_u64("stats", "keyspace_misses"), misses);
    w.call(&["MULTI"]);
    w.call(&["SET", "k", "w"]);
    assert_eq!(show(&w.call(&["EXEC"])), "*-1\r\n");
    assert_eq!(show(&r.call(&["GET", "k"])), "$1\r\nv\r\n");
}

/// DEBUG RELOAD in the middle of a pipeline: the commands after it find the reloaded keys
/// (the RDB form loads into a fresh arena with a new hash seed, so nothing computed for the
/// batch before the reload may be used after it), in both snapshot formats.
#[test]
fn commands_pipelined_after_debug_reload_see_the_reloaded_keys() {
    for format in ["image", "rdb"] {
        let dir = temp_dir(&format!("debug-reload-pipe-{format}"));
        let s = start_debug(&dir, &["--snapshot-format", format]);
        let mut r = Raw::connect(s.port);
        let mut batch = Vec::new();
        for i in 0..50 {
            batch.extend_from_slice(&encode(&[b"SET", format!("k{i}").as_bytes(), b"v"]));
        }
        batch.extend_from_slice(&encode(&[b"DEBUG", b"RELOAD"]));
        for i in 0..50 {
            batch.extend_from_slice(&encode(&[b"GET", format!("k{i}").as_bytes()]));
        }
        batch.extend_from_slice(&encode(&[b"SET", b"k0", b"w"]));
        batch.extend_from_slice(&encode(&[b"DBSIZE"]));
        r.send(&batch);
        for _ in 0..50 {
            assert_eq!(r.reply(), b"+OK\r\n");
        }
        assert_eq!(r.reply(), b"+OK\r\n", "{format}: DEBUG RELOAD");
        for i in 0..50 {
            assert_eq!(show(&r.reply()), "$1\r\nv\r\n", "{format}: GET k{i}");
        }
        assert_eq!(r.reply(), b"+OK\r\n");
        assert_eq!(show(&r.reply()), ":50\r\n", "{format}");
        assert_eq!(show(&r.call(&["GET", "k0"])), "$1\r\nw\r\n");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
