//! Black-box tests of the server family: INFO, CONFIG, TIME, LASTSAVE, COMMAND, MEMORY,
//! SLOWLOG, LATENCY and DEBUG, several of them differential against redis-server 7.0.
mod common;
use common::*;
use redis::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// `CONFIG GET *` as (name, value) pairs.
fn config_all(port: u16) -> Vec<(String, String)> {
    let mut c = client(port);
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*")
        .query(&mut c)
        .unwrap();
    v.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
}

/// INFO over a raw connection (the redis crate sends CLIENT SETINFO on connect, which
/// would count as error replies in the statistics under test).
fn info(port: u16, args: &[&str]) -> String {
    let mut raw = Raw::connect(port);
    let mut cmd = vec!["INFO"];
    cmd.extend_from_slice(args);
    let reply = show(&raw.call(&cmd));
    assert!(reply.starts_with('$'), "{reply}");
    let body = reply.split_once("\r\n").unwrap().1;
    body[..body.len() - 2].to_string()
}

fn headers(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("# "))
        .map(|l| l.trim_end().to_string())
        .collect()
}

#[test]
fn config_get_star_has_redis_names_and_defaults() {
    let redis = start_redis(&[]);
    let cairn = start_cairn(&["--save", ""]);
    let r = config_all(redis.port);
    let c = config_all(cairn.port);
    let rn: BTreeSet<&str> = r.iter().map(|(n, _)| n.as_str()).collect();
    let cn: BTreeSet<&str> = c.iter().map(|(n, _)| n.as_str()).collect();
    let missing: Vec<_> = rn.difference(&cn).collect();
    assert!(missing.is_empty(), "options missing in cairn: {missing:?}");
    // cairn's own options.
    let extra: Vec<_> = cn.difference(&rn).collect();
    assert_eq!(
        extra,
        vec![
            &"aof-direct-io",
            &"aof-disk-min-free",
            &"aof-group-commit-wait-us",
            &"aof-inflight-syncs",
            &"aof-preallocate-bytes",
            &"aof-recycle",
            &"arena-reserve-bytes",
            &"event-loop-spin-us",
            // The snapshot image's own file (issue #24).
            &"image-filename",
            // The executor's per-turn timeline (issue #25).
            &"latency-trace-file",
            // Valkey's names for the copy-avoiding reply thresholds (issue #5).
            &"min-string-size-avoid-copy-reply",
            &"min-string-size-avoid-copy-reply-threaded",
            // A full sync to a cairn replica sends the image (issue #18).
            &"repl-image-sync",
            &"snapshot-format",
            &"snapshot-mode",
            &"snapshot-pause-budget-us",
            &"snapshot-threads",
            // A check of the copy-before-write capture, for tests (issues #24, #18).
            &"snapshot-verify-cow",
            // A check of the snapshot's dirty map, for tests (issue #24).
            &"snapshot-verify-dirty-map",
            // Dragonfly's names for SSD tiering (issue #19).
            &"tiered-max-file-size",
            &"tiered-min-value-size",
            &"tiered-offload-threshold",
            &"tiered-prefix",
            &"tiered-upload-threshold"
        ],
        "unexpected options"
    );
    // Every default prints as Redis prints it, except what differs on purpose
    // (`aof-use-rdb-preamble`: cairn's rewrite base is its snapshot image by default).
    let on_purpose = ["bind", "dir", "port", "aof-use-rdb-preamble"];
    for (name, rv) in &r {
        if on_purpose.contains(&name.as_str()) {
            continue;
        }
        let cv = &c.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(cv, rv, "default of {name}");
    }
    let pairs = |port: u16| -> BTreeSet<String> {
        let mut c = client(port);
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("hash-max-*-entries")
            .arg("zset-max-listpack-value")
            .query(&mut c)
            .unwrap();
        v.chunks(2).map(|p| format!("{}={}", p[0], p[1])).collect()
    };
    assert_eq!(pairs(redis.port), pairs(cairn.port));
    // Hidden options answer only to their exact name (as Redis's).
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(cairn.port),
        &[
            &["CONFIG", "GET", "rdb-key-save-delay"],
            &["CONFIG", "GET", "rdb-key-*"],
            &["CONFIG", "GET", "MAXMEMORY"],
            &["CONFIG", "GET", "nosuch"],
            &["CONFIG", "GET", "set-max-listpack-entries"],
        ],
    );
}

#[test]
fn config_errors_match_redis() {
    let redis = start_redis(&[]);
    let cairn = start_cairn(&["--save", ""]);
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(cairn.port),
        &[
            &["CONFIG"],
            &["CONFIG", "GET"],
            &["CONFIG", "SET"],
            &["CONFIG", "SET", "maxmemory"],
            &["CONFIG", "SET", "maxmemory", "10", "port"],
            &["CONFIG", "SET", "nosuch", "1"],
            &["CONFIG", "SET", "maxmemory", "abc"],
            &["CONFIG", "SET", "port", "abc"],
            &["CONFIG", "SET", "port", "99999"],
            &["CONFIG", "SET", "timeout", "-1"],
            &["CONFIG", "SET", "maxclients", "0"],
            &["CONFIG", "SET", "databases", "4"],
            &["CONFIG", "SET", "enable-debug-command", "yes"],
            &["CONFIG", "SET", "dir", "/tmp"],
            &["CONFIG", "SET", "dbfilename", "x.rdb"],
            &["CONFIG", "SET", "maxmemory", "1mb", "maxmemory", "2mb"],
            &["CONFIG", "SET", "maxmemory", "1mb", "nosuch", "2"],
            &["CONFIG", "SET", "maxmemory-policy", "foo"],
            &["CONFIG", "SET", "appendonly", "maybe"],
            &["CONFIG", "SET", "save", "1 2 3"],
            &["CONFIG", "SET", "maxmemory-clients", "101%"],
            &["CONFIG", "SET", "maxmemory-clients", "-1"],
            &["CONFIG", "SET", "client-output-buffer-limit", "foo 1 2 3"],
            &["CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"],
            &["CONFIG", "SET", "notify-keyspace-events", "Z"],
            &["CONFIG", "SET", "lua-replicate-commands", "yes"],
            &[
                "CONFIG",
                "SET",
                "latency-tracking-info-percentiles",
                "50 101",
            ],
            &["CONFIG", "RESETSTAT", "x"],
            &["CONFIG", "REWRITE"],
            &["CONFIG", "BOGUS"],
            &["CONFIG", "HELP"],
            // Accepted values read back canonically.
            // (Options cairn does not act on are refused: see
            // `config_set_refuses_options_cairn_does_not_act_on`.)
            &["CONFIG", "SET", "maxmemory-policy", "ALLKEYS-LRU"],
            &["CONFIG", "GET", "maxmemory-policy"],
            &["CONFIG", "SET", "hz", "1000"],
            &["CONFIG", "GET", "hz"],
            &["CONFIG", "SET", "hz", "0"],
            &["CONFIG", "GET", "hz"],
            &["CONFIG", "SET", "maxmemory-clients", "10%"],
            &["CONFIG", "GET", "maxmemory-clients"],
            &["CONFIG", "SET", "maxmemory-clients", "0%"],
            &["CONFIG", "GET", "maxmemory-clients"],
            &["CONFIG", "SET", "loglevel", "WARNING", "maxmemory", "1gb"],
            &["CONFIG", "GET", "loglevel"],
            &["CONFIG", "GET", "maxmemory"],
            &["CONFIG", "SET", "slaveof", "no one"],
            &["CONFIG", "SET", "list-max-ziplist-size", "5"],
            &["CONFIG", "GET", "list-max-listpack-size"],
            &["CONFIG", "SET", "save", "100 1 200 2"],
            &["CONFIG", "GET", "save"],
        ],
    );
}

#[test]
fn config_set_is_atomic_and_applied() {
    let srv = start_cairn(&[]);
    let mut raw = Raw::connect(srv.port);
    // The second pair is invalid: nothing changes.
    let r = raw.call(&[
        "CONFIG",
        "SET",
        "maxmemory",
        "10mb",
        "maxmemory-policy",
        "bad",
    ]);
    assert!(r.starts_with(b"-ERR CONFIG SET failed"), "{}", show(&r));
    assert_eq!(
        raw.call(&["CONFIG", "GET", "maxmemory"]),
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        raw.call(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "10mb",
            "maxmemory-policy",
            "allkeys-lru"
        ]),
        b"+OK\r\n"
    );
    let mem = info(srv.port, &["memory"]);
    assert_eq!(info_field(&mem, "maxmemory").as_deref(), Some("10485760"));
    assert_eq!(
        info_field(&mem, "maxmemory_human").as_deref(),
        Some("10.00M")
    );
    assert_eq!(
        info_field(&mem, "maxmemory_policy").as_deref(),
        Some("allkeys-lru")
    );
    // hz is clamped and INFO reports the new value.
    raw.call(&["CONFIG", "SET", "hz", "100"]);
    assert_eq!(
        info_field(&info(srv.port, &["server"]), "hz").as_deref(),
        Some("100")
    );
    // slowlog-max-len applies at once.
    raw.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    for i in 0..5 {
        raw.call(&["SET", &format!("k{i}"), "v"]);
    }
    raw.call(&["CONFIG", "SET", "slowlog-max-len", "2"]);
    assert_eq!(raw.call(&["SLOWLOG", "LEN"]), b":2\r\n");
    // RESP3: CONFIG GET is a map.
    raw.call(&["HELLO", "3"]);
    assert_eq!(
        raw.call(&["CONFIG", "GET", "maxmemory"]),
        b"%1\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n"
    );
}

#[test]
fn config_rewrite_updates_the_file() {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("cairn-server-rw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("cairn.conf");
    std::fs::write(
        &conf,
        format!("# my settings\nport {port}\nmaxmemory 1mb\nsave \"\"\n"),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg(&conf)
        .arg("--dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(&mut child, port).unwrap();
    let mut raw = Raw::connect(port);
    assert_eq!(
        raw.call(&["CONFIG", "SET", "maxmemory", "2mb", "hz", "20"]),
        b"+OK\r\n"
    );
    assert_eq!(raw.call(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(text.contains("# my settings"), "{text}");
    assert!(text.contains("maxmemory 2097152"), "{text}");
    assert!(!text.contains("maxmemory 1mb"), "{text}");
    assert!(text.contains("hz 20"), "{text}");
}

#[test]
fn info_sections_and_format_match_redis() {
    let redis = start_redis(&[]);
    let cairn = start_cairn(&[]);
    for port in [redis.port, cairn.port] {
        let mut c = client(port);
        let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
        let _: () = redis::cmd("SET")
            .arg("b")
            .arg("2")
            .arg("EX")
            .arg("100")
            .query(&mut c)
            .unwrap();
        let _: Result<i64, _> = redis::cmd("INCR").arg("nosuch-type").arg("x").query(&mut c);
        let _: Result<i64, _> = redis::cmd("CONFIG").arg("GET").arg("x").query(&mut c);
    }
    // Same sections in the same order for INFO, INFO default and INFO all.
    for args in [&[][..], &["default"], &["all"], &["everything"]] {
        assert_eq!(
            headers(&info(redis.port, args)),
            headers(&info(cairn.port, args)),
            "INFO {args:?}"
        );
    }
    // Sections come in canonical order whatever the argument order; unknown ones are ignored.
    assert_eq!(
        headers(&info(cairn.port, &["keyspace", "SERVER", "nosuch"])),
        vec!["# Server", "# Keyspace"]
    );
    let mut raw_r = Raw::connect(redis.port);
    let mut raw_c = Raw::connect(cairn.port);
    assert_eq!(
        raw_c.call(&["INFO", "nosuch"]),
        raw_r.call(&["INFO", "nosuch"])
    );
    // RESP3: a verbatim string.
    raw_c.call(&["HELLO", "3"]);
    raw_r.call(&["HELLO", "3"]);
    assert_eq!(
        raw_c.call(&["INFO", "nosuch"]),
        raw_r.call(&["INFO", "nosuch"])
    );
    assert_eq!(
        raw_c.call(&["INFO", "errorstats"]),
        raw_r.call(&["INFO", "errorstats"])
    );

    // Every field Redis prints in these sections, cairn prints too.
    for sec in [
        "server",
        "clients",
        "memory",
        "persistence",
        "replication",
        "cpu",
    ] {
        let r = info(redis.port, &[sec]);
        let c = info(cairn.port, &[sec]);
        for line in r.lines().filter(|l| l.contains(':')) {
            let name = line.split(':').next().unwrap();
            assert!(
                info_field(&c, name).is_some(),
                "INFO {sec}: cairn lacks {name}"
            );
        }
    }
    let srv = info(cairn.port, &["server"]);
    assert_eq!(info_field(&srv, "redis_version").as_deref(), Some("7.0.15"));
    assert!(info_field(&srv, "cairn_version").is_some());
    assert_eq!(info_field(&srv, "tcp_port"), Some(cairn.port.to_string()));
    assert_eq!(info_field(&srv, "run_id").unwrap().len(), 40);
    let mem = info(cairn.port, &["memory"]);
    assert_eq!(
        info_field(&mem, "mem_allocator").as_deref(),
        Some("cairn-arena")
    );
    let used: u64 = info_field(&mem, "used_memory").unwrap().parse().unwrap();
    let rss: u64 = info_field(&mem, "used_memory_rss")
        .unwrap()
        .parse()
        .unwrap();
    let peak: u64 = info_field(&mem, "used_memory_peak")
        .unwrap()
        .parse()
        .unwrap();
    assert!(used > 0 && rss > 0 && peak >= used, "{mem}");
    let stats = info(cairn.port, &["stats"]);
    assert_eq!(info_field(&stats, "keyspace_misses").as_deref(), Some("0"));
    assert!(
        info_field(&stats, "total_commands_processed")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 4
    );
    // Both servers got the same commands, so the same error replies.
    assert_eq!(
        info_field(&stats, "total_error_replies"),
        info_field(&info(redis.port, &["stats"]), "total_error_replies")
    );
    let repl = info(cairn.port, &["replication"]);
    assert_eq!(info_field(&repl, "role").as_deref(), Some("master"));
    assert_eq!(info_field(&repl, "master_replid").unwrap().len(), 40);
    let cs = info(cairn.port, &["commandstats"]);
    assert!(cs.contains("cmdstat_set:calls=2,usec="), "{cs}");
    assert!(cs.contains("cmdstat_config|get:calls=1,"), "{cs}");
    assert!(cs.contains(",rejected_calls=0,failed_calls=0"), "{cs}");
    // INCR with a wrong arity is a rejected call.
    assert!(
        cs.contains(
            "cmdstat_incr:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0"
        ),
        "{cs}"
    );
    let ks = info(cairn.port, &["keyspace"]);
    assert_eq!(
        ks.lines()
            .nth(1)
            .map(|l| l.split(",avg_ttl").next().unwrap()),
        Some("db0:keys=2,expires=1")
    );
}

#[test]
fn info_counters_and_resetstat() {
    let srv = start_cairn(&[]);
    let mut raw = Raw::connect(srv.port);
    raw.call(&["SET", "k", "v"]);
    raw.call(&["GET", "k"]);
    raw.call(&["GET", "missing"]);
    raw.call(&["NOSUCHCOMMAND"]);
    let st = info(srv.port, &["stats"]);
    assert_eq!(info_field(&st, "keyspace_hits").as_deref(), Some("1"));
    assert_eq!(info_field(&st, "keyspace_misses").as_deref(), Some("1"));
    assert!(
        info_field(&st, "total_connections_received")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 2
    );
    let es = info(srv.port, &["errorstats"]);
    assert!(es.contains("errorstat_ERR:count=1"), "{es}");
    let p = info(srv.port, &["persistence"]);
    assert_eq!(
        info_field(&p, "rdb_changes_since_last_save").as_deref(),
        Some("1")
    );
    assert_eq!(info_field(&p, "loading").as_deref(), Some("0"));
    assert_eq!(info_field(&p, "aof_enabled").as_deref(), Some("0"));
    // Load until instantaneous_ops_per_sec (sampled by the cron) sees it.
    wait_until(
        DEADLINE,
        "instantaneous_ops_per_sec counts the PINGs",
        || {
            for _ in 0..200 {
                raw.call(&["PING"]);
            }
            let st = info(srv.port, &["stats"]);
            info_int(&st, "instantaneous_ops_per_sec") > 0
        },
    );
    assert_eq!(raw.call(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    let st = info(srv.port, &["stats"]);
    assert_eq!(info_field(&st, "keyspace_hits").as_deref(), Some("0"));
    assert_eq!(info_field(&st, "total_error_replies").as_deref(), Some("0"));
    let cs = info(srv.port, &["commandstats"]);
    // Only the RESETSTAT itself (counted once it returns, as Redis) and the INFO.
    let names: Vec<&str> = cs
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(names, vec!["config|resetstat", "info"], "{cs}");
    assert_eq!(info(srv.port, &["errorstats"]).trim_end(), "# Errorstats");
}

#[test]
fn time_and_lastsave() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    let mut c = client(srv.port);
    let (sec, usec): (i64, i64) = redis::cmd("TIME").query(&mut c).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((sec - now).abs() <= 2);
    assert!((0..1_000_000).contains(&usec));
    let last: i64 = redis::cmd("LASTSAVE").query(&mut c).unwrap();
    assert!(last <= now + 1 && last > now - 60);
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[&["TIME", "x"], &["LASTSAVE", "x"]],
    );
}

#[test]
fn command_introspection() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    let mut c = client(srv.port);
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c).unwrap();
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, count);
    assert!(count >= 20);
    // COMMAND INFO entry shape: same as Redis's for GET except for the key-spec flags.
    let mut rr = Raw::connect(redis.port);
    let mut rc = Raw::connect(srv.port);
    let want = show(&rr.call(&["COMMAND", "INFO", "get"]));
    let got = show(&rc.call(&["COMMAND", "INFO", "get"]));
    assert_eq!(got, want);
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("config")
        .arg("nosuch")
        .arg("config|get")
        .query(&mut c)
        .unwrap();
    assert_eq!(info.len(), 3);
    assert_eq!(info[1], Value::Nil);
    let Value::Array(cfg) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(cfg.len(), 10);
    assert_eq!(cfg[0], Value::BulkString(b"config".to_vec()));
    assert_eq!(cfg[1], Value::Int(-2));
    let Value::Array(subs) = &cfg[9] else {
        panic!("{cfg:?}")
    };
    assert_eq!(subs.len(), 5);
    let Value::Array(get) = &info[2] else {
        panic!("{info:?}")
    };
    assert_eq!(get[0], Value::BulkString(b"config|get".to_vec()));
    assert_eq!(get[1], Value::Int(-3));
    // COMMAND LIST and its filters.
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains(&"get".to_string()) && list.contains(&"config|set".to_string()));
    let mut r = client(redis.port);
    let conf: BTreeSet<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("conf*")
        .query(&mut c)
        .unwrap();
    let want: BTreeSet<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("PATTERN")
        .arg("conf*")
        .query(&mut r)
        .unwrap();
    assert_eq!(conf, want);
    let strings: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("ACLCAT")
        .arg("string")
        .query(&mut c)
        .unwrap();
    assert!(strings.contains(&"get".to_string()) && !strings.contains(&"del".to_string()));
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[
            &["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"],
            &["COMMAND", "LIST", "FILTERBY", "bogus", "x"],
            &["COMMAND", "LIST", "FILTERBY"],
            &["COMMAND", "LIST", "bogus"],
            &["COMMAND", "COUNT", "x"],
            &["COMMAND", "GETKEYS"],
            &["COMMAND", "GETKEYS", "get", "a", "b"],
            &["COMMAND", "GETKEYS", "ping", "x"],
            &["COMMAND", "GETKEYS", "nosuch", "a"],
            &["COMMAND", "GETKEYS", "set", "a", "b"],
            &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
            &["COMMAND", "GETKEYS", "config", "get", "x"],
            &["COMMAND", "GETKEYS", "del", "a", "b", "c"],
            &["COMMAND", "DOCS", "nosuch"],
            &["COMMAND", "INFO", "nosuch"],
            &["COMMAND", "BOGUS"],
            &["COMMAND", "HELP"],
        ],
    );
    // COMMAND DOCS: a map (RESP3) of name -> doc map, subcommands nested.
    rc.call(&["HELLO", "3"]);
    let docs = show(&rc.call(&["COMMAND", "DOCS", "get", "nosuch", "config"]));
    assert!(
        docs.starts_with("%2\r\n$3\r\nget\r\n%5\r\n$7\r\nsummary\r\n"),
        "{docs}"
    );
    assert!(docs.contains("$11\r\nsubcommands\r\n%5\r\n"), "{docs}");
    assert!(docs.contains("$10\r\nconfig|get\r\n"), "{docs}");
    // All docs, as redis-cli asks at startup, parse as a map.
    let mut c3 = client(srv.port);
    let all_docs: Value = redis::cmd("COMMAND").arg("DOCS").query(&mut c3).unwrap();
    let Value::Array(items) = all_docs else {
        panic!("RESP2 map is a flat array")
    };
    assert_eq!(items.len() as i64, 2 * count);
}

#[test]
fn redis_cli_talks_to_cairn() {
    let srv = start_cairn(&[]);
    let out = std::process::Command::new("redis-cli")
        .args([
            "-p",
            &srv.port.to_string(),
            "config",
            "get",
            "maxmemory-policy",
        ])
        .output()
        .expect("redis-cli");
    assert_eq!(show(&out.stdout), "maxmemory-policy\nnoeviction\n");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &srv.port.to_string(), "info", "server"])
        .output()
        .unwrap();
    assert!(show(&out.stdout).contains("redis_version:7.0.15"));
}

#[test]
fn memory_usage_and_help() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    let mut c = client(srv.port);
    let _: () = redis::cmd("SET")
        .arg("small")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(vec![b'x'; 10_000])
        .query(&mut c)
        .unwrap();
    let small: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("small")
        .query(&mut c)
        .unwrap();
    let big: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("big")
        .arg("SAMPLES")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert!(small > 24 && small < 200, "{small}");
    assert!((10_000..20_000).contains(&big), "{big}");
    for port in [redis.port, srv.port] {
        let mut c = client(port);
        let _: () = redis::cmd("SET")
            .arg("foo")
            .arg("bar")
            .query(&mut c)
            .unwrap();
    }
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[
            &["MEMORY", "USAGE", "nosuch"],
            &["MEMORY", "USAGE", "foo", "SAMPLES"],
            &["MEMORY", "USAGE", "foo", "SAMPLES", "x"],
            &["MEMORY", "USAGE", "foo", "SAMPLES", "-1"],
            &["MEMORY", "USAGE", "foo", "bogus", "1"],
            &["MEMORY", "USAGE"],
            &["MEMORY", "BOGUS"],
            &["MEMORY"],
        ],
    );
    let help: Vec<String> = redis::cmd("MEMORY").arg("HELP").query(&mut c).unwrap();
    assert!(help[0].starts_with("MEMORY <subcommand>"));
    let stats: Vec<Value> = redis::cmd("MEMORY").arg("STATS").query(&mut c).unwrap();
    assert!(stats.contains(&Value::BulkString(b"keys.count".to_vec())));
    let doctor: String = redis::cmd("MEMORY").arg("DOCTOR").query(&mut c).unwrap();
    assert!(!doctor.is_empty());
}

#[test]
fn slowlog_entries() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    let mut c = client(srv.port);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("me")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("key")
        .arg("value")
        .query(&mut c)
        .unwrap();
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg("1")
        .query(&mut c)
        .unwrap();
    assert_eq!(entries.len(), 1);
    let Value::Array(e) = &entries[0] else {
        panic!("{entries:?}")
    };
    assert_eq!(e.len(), 6);
    assert!(matches!(e[0], Value::Int(id) if id >= 1));
    assert!(matches!(e[1], Value::Int(t) if t > 1_600_000_000));
    assert!(matches!(e[2], Value::Int(us) if us >= 0));
    assert_eq!(
        e[3],
        Value::Array(vec![
            Value::BulkString(b"SET".to_vec()),
            Value::BulkString(b"key".to_vec()),
            Value::BulkString(b"value".to_vec()),
        ])
    );
    assert!(matches!(&e[4], Value::BulkString(p) if p.starts_with(b"127.0.0.1:")));
    assert_eq!(e[5], Value::BulkString(b"me".to_vec()));
    let all: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg("-1")
        .query(&mut c)
        .unwrap();
    assert!(all.len() >= 3);
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert!(len >= 3);
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let len: i64 = redis::cmd("SLOWLOG").arg("LEN").query(&mut c).unwrap();
    assert!(len <= 1, "only the LEN/RESET themselves may be logged");
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[
            &["SLOWLOG", "GET", "x"],
            &["SLOWLOG", "GET", "-2"],
            &["SLOWLOG", "GET", "1", "2"],
            &["SLOWLOG", "LEN", "x"],
            &["SLOWLOG", "BOGUS"],
            &["SLOWLOG", "HELP"],
        ],
    );
}

#[test]
fn latency_monitor() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&["--enable-debug-command", "yes"]);
    let mut raw = Raw::connect(srv.port);
    assert_eq!(raw.call(&["LATENCY", "LATEST"]), b"*0\r\n");
    raw.call(&["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    assert_eq!(raw.call(&["DEBUG", "SLEEP", "0.05"]), b"+OK\r\n");
    let mut c = client(srv.port);
    // The sleep is a "command" event of at least 50 ms. On a busy machine another
    // command may also pass the 10 ms threshold (more events, another second in the
    // history), so the sleep's event is looked for rather than counted alone.
    let latest: Vec<(String, i64, i64, i64)> =
        redis::cmd("LATENCY").arg("LATEST").query(&mut c).unwrap();
    let command = latest.iter().find(|e| e.0 == "command");
    assert!(
        command.is_some_and(|e| e.2 >= 50 && e.3 >= 50),
        "{latest:?}"
    );
    let hist: Vec<(i64, i64)> = redis::cmd("LATENCY")
        .arg("HISTORY")
        .arg("command")
        .query(&mut c)
        .unwrap();
    assert!(hist.iter().any(|h| h.1 >= 50), "{hist:?}");
    let doctor: String = redis::cmd("LATENCY").arg("DOCTOR").query(&mut c).unwrap();
    assert!(doctor.contains("command"), "{doctor}");
    assert_eq!(raw.call(&["LATENCY", "RESET", "nosuch"]), b":0\r\n");
    // One class at least (the sleep's; more if a busy machine made others slow).
    let reset = show(&raw.call(&["LATENCY", "RESET"]));
    assert!(
        reset
            .strip_prefix(':')
            .is_some_and(|n| n.trim().parse::<u32>().unwrap() >= 1),
        "{reset}"
    );
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[
            &["LATENCY", "HISTORY", "nosuch"],
            &["LATENCY", "HISTORY"],
            &["LATENCY", "BOGUS"],
            &["LATENCY", "LATEST", "x"],
        ],
    );
}

#[test]
fn debug_is_gated_by_enable_debug_command() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[&["DEBUG", "DIGEST"], &["DEBUG", "SLEEP", "0"], &["DEBUG"]],
    );
}

#[test]
fn debug_digest_matches_redis_for_strings() {
    let redis = start_redis(&["--enable-debug-command", "yes"]);
    let srv = start_cairn(&["--enable-debug-command", "yes"]);
    for port in [redis.port, srv.port] {
        let mut raw = Raw::connect(port);
        assert_eq!(
            raw.call(&["DEBUG", "DIGEST"]),
            b"+0000000000000000000000000000000000000000\r\n"
        );
    }
    let setup: &[&[&str]] = &[
        &["MSET", "a", "1", "b", "hello", "c", &"x".repeat(100)],
        &["SET", "ttl", "v", "EX", "1000"],
        &["SELECT", "5"],
        &["SET", "a", "other-db"],
        &["SELECT", "0"],
    ];
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        setup,
    );
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &[
            &["DEBUG", "DIGEST"],
            &["DEBUG", "DIGEST-VALUE", "a", "ttl", "nosuch"],
            &["DEBUG", "OBJECT", "nosuch"],
            &["DEBUG", "BOGUS"],
            &["DEBUG", "SLEEP", "x"],
            &["DEBUG", "SET-ACTIVE-EXPIRE", "1"],
            &["DEBUG", "DIGEST", "extra"],
        ],
    );
    // Order independence: the same data written in another order digests the same.
    let other = start_cairn(&["--enable-debug-command", "yes"]);
    let mut raw = Raw::connect(other.port);
    raw.call(&["SELECT", "5"]);
    raw.call(&["SET", "a", "other-db"]);
    raw.call(&["SELECT", "0"]);
    raw.call(&["SET", "ttl", "v", "EX", "500"]);
    raw.call(&["MSET", "c", &"x".repeat(100), "b", "hello", "a", "1"]);
    let mut r = Raw::connect(redis.port);
    assert_eq!(raw.call(&["DEBUG", "DIGEST"]), r.call(&["DEBUG", "DIGEST"]));
    // A change anywhere changes the digest.
    raw.call(&["SET", "b", "hellO"]);
    assert_ne!(raw.call(&["DEBUG", "DIGEST"]), r.call(&["DEBUG", "DIGEST"]));
}

#[test]
fn debug_object_sleep_and_active_expire() {
    let srv = start_cairn(&["--enable-debug-command", "yes"]);
    let mut raw = Raw::connect(srv.port);
    raw.call(&["SET", "n", "123"]);
    raw.call(&["SET", "s", "hello"]);
    let line = show(&raw.call(&["DEBUG", "OBJECT", "n"]));
    assert!(line.starts_with("+Value at:0x"), "{line}");
    assert!(
        line.contains(" encoding:int serializedlength:2 lru:"),
        "{line}"
    );
    assert!(line.contains(" lru_seconds_idle:"), "{line}");
    let line = show(&raw.call(&["DEBUG", "OBJECT", "s"]));
    assert!(
        line.contains(" refcount:1 encoding:embstr serializedlength:6 "),
        "{line}"
    );
    let start = Instant::now();
    assert_eq!(raw.call(&["DEBUG", "SLEEP", "0.2"]), b"+OK\r\n");
    assert!(start.elapsed() >= Duration::from_millis(200));
    let help = show(&raw.call(&["DEBUG", "HELP"]));
    assert!(help.contains("DEBUG <subcommand>") && help.contains("SET-ACTIVE-EXPIRE"));
    // With active expiry off, an expired key nobody touches stays in DBSIZE.
    assert_eq!(raw.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    raw.call(&["SET", "gone", "v", "PX", "20"]);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(raw.call(&["DBSIZE"]), b":3\r\n");
    assert_eq!(raw.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    wait_until(DEADLINE, "active expiry resumed", || {
        raw.call(&["DBSIZE"]) == b":2\r\n"
    });
}

/// A port something else listens on (the returned listener holds it).
fn busy_port() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind(("127.0.0.1", free_port())).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// Redis 7's runtime protections, replies byte for byte with both socket loops: file names
/// that are paths are refused; a bind or port that cannot be listened on is refused (and
/// the server keeps its old sockets); setting `requirepass` keeps the clients already
/// connected authenticated, while new ones must AUTH.
#[test]
fn runtime_protections_match_redis() {
    let (_holder, taken) = busy_port();
    let taken = taken.to_string();
    for io_threads in ["1", "2"] {
        let args = [
            "--enable-protected-configs",
            "yes",
            "--io-threads",
            io_threads,
        ];
        let redis = start_redis(&args);
        let cairn = start_cairn(&args);
        same_replies(
            &mut Raw::connect(redis.port),
            &mut Raw::connect(cairn.port),
            &[
                &["CONFIG", "SET", "dbfilename", "../escape.rdb"],
                &["CONFIG", "SET", "dbfilename", "/tmp/escape.rdb"],
                &["CONFIG", "SET", "dbfilename", "sub/x.rdb"],
                &["CONFIG", "SET", "dbfilename", "a\\b.rdb"],
                &["CONFIG", "SET", "dbfilename", "ok.rdb", "hz", "bad"],
                &["CONFIG", "GET", "dbfilename"],
                &["CONFIG", "SET", "dbfilename", "..x.rdb"],
                &["CONFIG", "GET", "dbfilename"],
                &["CONFIG", "SET", "appendfilename", "../x.aof"],
                &["CONFIG", "SET", "appenddirname", "../d"],
                // TEST-NET-3: no interface has it.
                &["CONFIG", "SET", "bind", "203.0.113.77"],
                &["CONFIG", "SET", "port", &taken],
                &["CONFIG", "SET", "port", &taken, "bind", "203.0.113.77"],
                &["CONFIG", "SET", "bind", "203.0.113.77", "port", &taken],
                &["CONFIG", "SET", "bind", "127.0.0.1 -203.0.113.77"],
                &["CONFIG", "GET", "bind"],
                &["PING"],
            ],
        );
        // The refused rebinds left the old sockets listening.
        assert_eq!(Raw::connect(cairn.port).call(&["PING"]), b"+PONG\r\n");
        let pass: &[(usize, &[&str])] = &[
            (0, &["CONFIG", "SET", "requirepass", "pw"]),
            (0, &["GET", "x"]),
            (1, &["GET", "x"]),
            (2, &["AUTH", "wrong"]),
            (1, &["AUTH", "wrong"]),
            (1, &["GET", "x"]),
            (1, &["RESET"]),
            (1, &["GET", "x"]),
            (1, &["AUTH", "pw"]),
            (1, &["CONFIG", "SET", "requirepass", ""]),
            (1, &["RESET"]),
            (0, &["CONFIG", "SET", "requirepass", "pw2"]),
            (0, &["GET", "x"]),
            (1, &["GET", "x"]),
            (0, &["CONFIG", "SET", "requirepass", ""]),
        ];
        // Connection 2 connects after the password is set: it must AUTH.
        let replies_with_late_client = |port: u16| {
            let mut early: Vec<Raw> = (0..2).map(|_| Raw::connect(port)).collect();
            let mut out = vec![show(&early[0].call(pass[0].1))];
            let mut late = Raw::connect(port);
            out.push(show(&late.call(&["GET", "x"])));
            for (c, cmd) in &pass[1..] {
                let conn = if *c == 2 { &mut late } else { &mut early[*c] };
                out.push(show(&conn.call(cmd)));
            }
            out
        };
        let (r, c) = (
            replies_with_late_client(redis.port),
            replies_with_late_client(cairn.port),
        );
        assert_eq!(c, r, "io-threads {io_threads}: cairn (left), redis (right)");
        assert_eq!(r[1], "-NOAUTH Authentication required.\r\n");
        assert_eq!(r[2], "$-1\r\n");
    }
}

/// CONFIG SET port / bind listen on the new address at once with either socket loop;
/// connections already open stay, and INFO reports the new port.
#[test]
fn config_set_port_and_bind_rebind_at_once() {
    for io_threads in ["1", "2"] {
        let srv = start_cairn(&["--io-threads", io_threads]);
        let mut raw = Raw::connect(srv.port);
        let new_port = free_port();
        assert_eq!(
            raw.call(&["CONFIG", "SET", "port", &new_port.to_string()]),
            b"+OK\r\n"
        );
        assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
        let mut moved = Raw::connect(new_port);
        assert_eq!(moved.call(&["PING"]), b"+PONG\r\n");
        assert!(std::net::TcpStream::connect(("127.0.0.1", srv.port)).is_err());
        assert_eq!(moved.info("server", "tcp_port"), Some(new_port.to_string()));
        // Narrowing the bind list to the address already served: close first, then bind.
        assert_eq!(
            raw.call(&["CONFIG", "SET", "bind", "127.0.0.1"]),
            b"+OK\r\n"
        );
        assert_eq!(Raw::connect(new_port).call(&["PING"]), b"+PONG\r\n");
        let (_holder, taken) = busy_port();
        assert!(
            show(&raw.call(&["CONFIG", "SET", "port", &taken.to_string()]))
                .starts_with("-ERR CONFIG SET failed (possibly related to argument 'port')")
        );
        assert_eq!(
            raw.call(&["CONFIG", "GET", "port"]),
            format!("*2\r\n$4\r\nport\r\n$5\r\n{new_port}\r\n").as_bytes()
        );
        assert_eq!(Raw::connect(new_port).call(&["PING"]), b"+PONG\r\n");
        // Port 0 listens nowhere; the connections already open still work.
        assert_eq!(raw.call(&["CONFIG", "SET", "port", "0"]), b"+OK\r\n");
        assert!(std::net::TcpStream::connect(("127.0.0.1", new_port)).is_err());
        assert_eq!(moved.call(&["PING"]), b"+PONG\r\n");
    }
}

/// A connection refused at accept (here by maxclients) counts in `rejected_connections`
/// and not in `total_connections_received`, as in Redis, with either socket loop: both
/// decide admission the same way.
#[test]
fn refused_connections_count_as_rejected_not_received() {
    let counters = |port: u16| {
        let mut a = Raw::connect(port);
        assert_eq!(a.call(&["PING"]), b"+PONG\r\n");
        let before = |a: &mut Raw, f: &str| -> u64 { a.info("stats", f).unwrap().parse().unwrap() };
        let (received, rejected) = (
            before(&mut a, "total_connections_received"),
            before(&mut a, "rejected_connections"),
        );
        assert_eq!(a.call(&["CONFIG", "SET", "maxclients", "1"]), b"+OK\r\n");
        let mut refused = Raw::connect(port);
        assert_eq!(refused.reply(), b"-ERR max number of clients reached\r\n");
        assert!(refused.closed());
        // The I/O threads' counters reach INFO on the executor's next cron.
        wait_until(DEADLINE, "the refusal is counted", || {
            before(&mut a, "rejected_connections") != rejected
        });
        let got = (
            before(&mut a, "total_connections_received") - received,
            before(&mut a, "rejected_connections") - rejected,
        );
        assert_eq!(a.call(&["CONFIG", "SET", "maxclients", "100"]), b"+OK\r\n");
        got
    };
    let redis = start_redis(&[]);
    assert_eq!(counters(redis.port), (0, 1), "redis-server");
    for io_threads in ["1", "2"] {
        let cairn = start_cairn(&["--io-threads", io_threads]);
        assert_eq!(counters(cairn.port), (0, 1), "io-threads {io_threads}");
    }
}

/// Protected mode with no password serves loopback clients, whichever socket loop accepts
/// them, and follows CONFIG SET protected-mode / requirepass at once (a non-loopback
/// peer's refusal is unit-tested in src/server/listeners.rs: tests have only loopback).
#[test]
fn protected_mode_serves_loopback_clients_in_both_socket_loops() {
    for io_threads in ["1", "2"] {
        let srv = start_cairn(&["--io-threads", io_threads, "--protected-mode", "yes"]);
        let mut admin = Raw::connect(srv.port);
        let served = &b"+PONG\r\n"[..];
        let must_auth = &b"-NOAUTH Authentication required.\r\n"[..];
        for (change, reply) in [
            (&["CONFIG", "SET", "protected-mode", "no"][..], served),
            (&["CONFIG", "SET", "protected-mode", "yes"], served),
            (&["CONFIG", "SET", "requirepass", "pw"], must_auth),
            (&["CONFIG", "SET", "requirepass", ""], served),
        ] {
            assert_eq!(admin.call(change), b"+OK\r\n", "{change:?}");
            assert_eq!(Raw::connect(srv.port).call(&["PING"]), reply, "{change:?}");
        }
        assert_eq!(
            admin.info("stats", "rejected_connections").as_deref(),
            Some("0")
        );
    }
}

/// A path as dbfilename (or appenddirname) stops startup with Redis's text.
#[test]
fn a_path_as_a_file_name_stops_startup() {
    for (option, value, text) in [
        (
            "--dbfilename",
            "../escape.rdb",
            "dbfilename can't be a path, just a filename",
        ),
        (
            "--appenddirname",
            "/tmp/aof",
            "appenddirname can't be a path, just a dirname",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
            .args(["--port", "0", option, value])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{option} {value}");
        let stderr = show(&out.stderr);
        assert!(stderr.contains(text), "{stderr}");
    }
}

/// README names every option cairn accepts without acting on it: the list between its
/// markers is the option table's.
#[test]
fn readme_lists_the_options_cairn_does_not_act_on() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let (start, end) = ("<!-- not-acted-options -->", "<!-- /not-acted-options -->");
    let from = readme.find(start).expect("start marker") + start.len();
    let to = readme.find(end).expect("end marker");
    let listed: BTreeSet<String> = readme[from..to]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    let table: BTreeSet<String> = cairn::config::not_acted_options()
        .into_iter()
        .map(str::to_string)
        .collect();
    let order: Vec<String> = cairn::config::not_acted_options()
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect();
    assert_eq!(listed, table, "README should list: {}", order.join(" "));
}

/// CONFIG SET of an option cairn accepts but does not act on is an error (OK would be a
/// silent no-op); the same option in a config file starts the server with a warning.
#[test]
fn config_set_refuses_options_cairn_does_not_act_on() {
    let s = start_cairn(&["--rdbcompression", "yes"]);
    let mut raw = Raw::connect(s.port);
    for (name, value) in [
        ("rdbcompression", "no"),
        ("jemalloc-bg-thread", "no"),
        ("repl-diskless-load", "swapdb"),
    ] {
        let got = String::from_utf8(raw.call(&["CONFIG", "SET", name, value])).unwrap();
        assert_eq!(
            got,
            format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - cairn accepts this option in a config file but does not act on it\r\n")
        );
    }
    // Nothing changed, and options cairn acts on still set.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "hz", "20"]),
        b"+OK\r\n".to_vec()
    );
    assert_eq!(
        String::from_utf8(raw.call(&["CONFIG", "GET", "rdbcompression"])).unwrap(),
        "*2\r\n$14\r\nrdbcompression\r\n$3\r\nyes\r\n"
    );
}

/// `rename-command` as Redis: the old name is unknown, the new one runs the command, an
/// empty name disables it, a name that is no command stops startup; CONFIG REWRITE keeps
/// the lines.
#[test]
fn rename_command_renames_and_disables_commands() {
    let dir = temp_dir("rename-command");
    let conf = dir.join("cairn.conf");
    std::fs::write(
        &conf,
        "rename-command CONFIG my-config\nrename-command FLUSHALL \"\"\nsave \"\"\n",
    )
    .unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"));
    let port = free_port();
    cmd.arg(&conf)
        .args(["--port", &port.to_string(), "--dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    wait_serving(&mut child, port).unwrap();
    let mut raw = Raw::connect(port);
    let unknown = |r: Vec<u8>| {
        String::from_utf8(r)
            .unwrap()
            .starts_with("-ERR unknown command")
    };
    assert!(unknown(raw.call(&["CONFIG", "GET", "hz"])));
    assert!(unknown(raw.call(&["FLUSHALL"])));
    assert_eq!(
        String::from_utf8(raw.call(&["MY-CONFIG", "GET", "hz"])).unwrap(),
        "*2\r\n$2\r\nhz\r\n$2\r\n10\r\n"
    );
    assert_eq!(raw.call(&["my-config", "REWRITE"]), b"+OK\r\n".to_vec());
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("rename-command CONFIG my-config\n"), "{text}");
    assert!(text.contains("rename-command FLUSHALL \"\"\n"), "{text}");
    // A command that does not exist: startup stops, saying which.
    std::fs::write(&conf, "rename-command NOSUCHCMD x\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg(&conf)
        .args(["--port", &free_port().to_string(), "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("rename-command: no such command 'nosuchcmd'"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `unixsocket` / `unixsocketperm`: clients connect through the socket file (on both
/// socket paths), CLIENT LIST names them as Redis does, the file has the mode asked for,
/// a stale socket file from an earlier run is replaced, and shutdown removes it.
#[test]
fn unix_socket_serves_clients_as_redis_names_them() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    for threads in ["1", "2"] {
        let dir = temp_dir("unixsock");
        let path = dir.join("cairn.sock");
        // A stale socket file, as a crash leaves it.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let p = path.to_str().unwrap();
        let mut srv = start_on(
            &dir,
            &[
                "--unixsocket",
                p,
                "--unixsocketperm",
                "700",
                "--io-threads",
                threads,
            ],
            &[],
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "io-threads {threads}");
        let mut u = std::os::unix::net::UnixStream::connect(&path).unwrap();
        u.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut call = |cmd: &[&[u8]]| -> String {
            u.write_all(&encode(cmd)).unwrap();
            let mut buf = Vec::new();
            loop {
                let mut tmp = [0u8; 4096];
                let n = u.read(&mut tmp).unwrap();
                assert!(n > 0, "socket closed");
                buf.extend_from_slice(&tmp[..n]);
                if reply_len(&buf).is_some() {
                    return show(&buf);
                }
            }
        };
        assert_eq!(call(&[b"SET", b"k", b"v"]), "+OK\r\n");
        assert_eq!(call(&[b"GET", b"k"]), "$1\r\nv\r\n");
        let info = call(&[b"CLIENT", b"INFO"]);
        assert!(
            info.contains(&format!(" addr={p}:0 laddr={p}:0 ")),
            "{info}"
        );
        assert!(info.contains(" flags=U "), "{info}");
        let mut tcp = Raw::connect(srv.port);
        assert_eq!(tcp.call(&["GET", "k"]), b"$1\r\nv\r\n");
        assert_eq!(
            show(&tcp.call(&["CONFIG", "GET", "unixsocketperm"])),
            "*2\r\n$14\r\nunixsocketperm\r\n$3\r\n700\r\n"
        );
        assert!(show(&tcp.call(&["CONFIG", "SET", "unixsocketperm", "600"]))
            .contains("can't set immutable config"));
        u.write_all(&encode(&[b"SHUTDOWN", b"NOSAVE"])).unwrap();
        let mut rest = Vec::new();
        let _ = u.read_to_end(&mut rest);
        let _ = srv.child.wait();
        assert!(!path.exists(), "the socket file outlived the server");
        assert!(server_log(&dir).contains("Removing the unix socket file."));
    }
}

/// `daemonize yes`: the command returns at once, the server goes on in a session of its
/// own (not the starter's child), writes its pid file, serves, and removes the pid file
/// when it shuts down.
#[test]
fn daemonize_detaches_and_writes_its_pid_file() {
    let dir = temp_dir("daemonize");
    let pidfile = dir.join("cairn.pid");
    let port = free_port();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--daemonize", "yes", "--pidfile"])
        .arg(&pidfile)
        .arg("--dir")
        .arg(&dir)
        .arg("--logfile")
        .arg(dir.join(LOG_FILE))
        .status()
        .unwrap();
    assert!(status.success(), "the starting process exits with 0");
    let mut pid = 0i32;
    wait_until(DEADLINE, "the pid file", || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        pid > 0
    });
    // Stop the daemon by its pid whatever happens below.
    struct Kill(i32);
    impl Drop for Kill {
        fn drop(&mut self) {
            // SAFETY: a signal to the daemon this test started.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let _guard = Kill(pid);
    let mut c = None;
    wait_until(DEADLINE, "the daemon serves", || {
        c = std::net::TcpStream::connect(("127.0.0.1", port)).ok();
        c.is_some()
    });
    let mut raw = Raw::connect(port);
    assert_eq!(raw.info_field("server", "process_id"), pid.to_string());
    // A session of its own: its session id is its pid.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let session: i32 = after.split(' ').nth(3).unwrap().parse().unwrap();
    assert_eq!(session, pid, "{stat}");
    raw.send(&encode(&[b"SHUTDOWN", b"NOSAVE"]));
    assert!(raw.closed());
    wait_until(DEADLINE, "the pid file removed", || !pidfile.exists());
}

/// Every command both servers have: COMMAND INFO's name, arity, flags, first / last key,
/// step and ACL categories are Redis 7.0.15's. (Key specs, tips and subcommand lists are
/// not compared yet: #21's command metadata.) Commands Redis has and cairn does not are
/// the cluster, module and `restore-asking` / `asking` / `readonly` / `readwrite` ones.
/// COMMAND GETKEYS / GETKEYSANDFLAGS find what Redis finds for every key-spec form
/// (index, keyword, range with limit, numkeys), Redis's fallbacks where a spec cannot tell
/// (numkeys read as C's `atoi`, SORT's STORE, MIGRATE's KEYS, SET's and BITFIELD's flags),
/// and its errors. One case per line; `''` is an empty argument.
#[test]
fn command_getkeys_matches_redis_for_every_key_spec_form() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    const CASES: &[&str] = &[
        "set k v",
        "set k v get",
        "set k v GeT px 1",
        "bitfield k get u8 0",
        "bitfield k set u8 0 1",
        "bitfield k get u8 0 bad",
        "bitfield k overflow wrap get u8 0",
        "bitfield_ro k get u8 0",
        "zunionstore out 2 a b",
        "zunionstore out 2abc a b",
        "zunionstore out 0 a b",
        "zunionstore out 5 a b",
        "zunionstore out -1 a",
        "zinterstore out 1 a weights 1",
        "zdiffstore out 2 a b",
        "zunion 2 a b withscores",
        "zinter 1 a",
        "zdiff 2 a b",
        "zdiff 2x a b",
        "zdiff 0 a",
        "zintercard 2 a b limit 1",
        "zintercard 2x a b",
        "sintercard 2 a b",
        "sintercard 2u a b",
        "sintercard 3 a b",
        "lmpop 2 a b left",
        "lmpop 2x a b left",
        "lmpop 1 ' 1' a",
        "lmpop 3000000000 a b",
        "lmpop 4294967297 a b",
        "blmpop 0 2 a b left",
        "blmpop 0 2y a b left",
        "zmpop 1 a min",
        "bzmpop 0 2 a b max count 2",
        "eval '' 0",
        "eval '' 2 a b",
        "eval '' 2x a b",
        "eval '' 3 a b",
        "eval '' -1 a",
        "evalsha abc 1 a",
        "eval_ro '' 1 a b",
        "evalsha_ro abc 0",
        "fcall f 1 a",
        "fcall f 1x a",
        "fcall_ro f 2 a b c",
        "xread count 2 streams a b 0 0",
        "xread streams a b 0",
        "xread streams a 0 streams",
        "xread block 0 streams a 0",
        "xread count 1 a b",
        "xreadgroup group g c streams a 0",
        "xreadgroup group g c count 1 noack streams a b > >",
        "xreadgroup group g c streams a",
        "georadius k 0 0 1 km store d storedist e",
        "georadius k 0 0 1 km",
        "georadius k 0 0 1 km store",
        "georadius_ro k 0 0 1 km",
        "georadiusbymember k m 1 km storedist d",
        "georadiusbymember k m 1 km store a store b",
        "geosearchstore d s frommember m byradius 1 km",
        "sort k store d by x get y",
        "sort k",
        "sort k store",
        "sort k limit 0 store x",
        "sort k limit 0 1 foo store x",
        "sort k store a store b",
        "sort k by nosort get # store a",
        "sort_ro k by x",
        "sort_ro k",
        "migrate h 1 '' 0 5 keys a b",
        "migrate h 1 k 0 5",
        "migrate h 1 k 0 5 keys a b",
        "migrate h 1 k 0 5 keys",
        "migrate h 1 '' 0 5 copy replace keys a",
        "migrate h 1 '' 0 5 auth p keys a b c",
        "get a b",
        "get a",
        "mset a 1 b",
        "mset a 1 b 2",
        "msetnx a 1 b 2",
        "del a b c",
        "object encoding k",
        "object foo",
        "config get x",
        "ping",
        "spublish ch m",
        "ssubscribe a b",
        "publish ch m",
        "blpop a b 0",
        "brpoplpush a b 0",
        "lmove a b left right",
        "bitop and d a b",
        "copy a b db 1",
        "rename a b",
        "pfcount a b",
        "pfmerge d a b",
        "memory usage k",
        "xinfo stream k",
        "xgroup create k g $",
        "xadd k * f v",
        "smove a b m",
        "touch a b",
        "watch a b",
        "exists a",
        "unlink a b",
        "dump k",
        "restore k 0 x",
    ];
    let lines: Vec<Vec<String>> = CASES
        .iter()
        .flat_map(|case| {
            let args: Vec<String> = case
                .split(' ')
                .map(|a| {
                    if a == "''" {
                        String::new()
                    } else {
                        a.to_string()
                    }
                })
                .collect();
            ["GETKEYS", "GETKEYSANDFLAGS"].map(|sub| {
                let mut line = vec!["COMMAND".to_string(), sub.to_string()];
                line.extend(args.iter().cloned());
                line
            })
        })
        .collect();
    let refs: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.iter().map(String::as_str).collect())
        .collect();
    let cmds: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
    same_replies(
        &mut Raw::connect(redis.port),
        &mut Raw::connect(srv.port),
        &cmds,
    );
}

/// Commands Redis 7.0.15 has and cairn does not, each with the reason; every other entry of
/// Redis's COMMAND reply and COMMAND DOCS must be cairn's, field for field.
const COMMANDS_CAIRN_LACKS: &[(&str, &str)] = &[
    (
        "cluster",
        "cairn runs standalone only: cluster mode is another issue's",
    ),
    ("asking", "a cluster-mode command"),
    (
        "readonly",
        "a cluster-mode command (replica reads in a cluster)",
    ),
    ("readwrite", "a cluster-mode command"),
    ("restore-asking", "a cluster-mode command (slot migration)"),
    ("module", "cairn loads no modules"),
];

/// Commands cairn has beyond Redis 7.0.15, each with the reason.
const COMMANDS_BEYOND_REDIS_7_0: &[(&str, &str)] =
    &[("waitaof", "Redis 7.2's WAITAOF: replication answers it")];

/// One COMMAND INFO entry with its subcommands (field 10) in name order: Redis lists them
/// in the order of a hash table seeded at random on each start.
fn command_entry(conn: &mut redis::Connection, name: &str) -> Value {
    fn sort_subcommands(v: Value) -> Value {
        let Value::Array(mut fields) = v else {
            return v;
        };
        if let Some(Value::Array(subs)) = fields.get_mut(9) {
            let mut sorted: Vec<Value> = std::mem::take(subs)
                .into_iter()
                .map(sort_subcommands)
                .collect();
            sorted.sort_by_key(|s| match s {
                Value::Array(f) => format!("{:?}", f.first()),
                other => format!("{other:?}"),
            });
            *subs = sorted;
        }
        Value::Array(fields)
    }
    let v: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(conn)
        .unwrap();
    let entry = v.into_iter().next().unwrap_or(Value::Nil);
    assert!(
        matches!(&entry, Value::Array(f) if f.len() == 10),
        "COMMAND INFO {name}: {entry:?}"
    );
    sort_subcommands(entry)
}

/// One COMMAND DOCS value (RESP2: a flat list of field, value) with its subcommands'
/// docs in name order (Redis's order is a randomly seeded hash table's).
fn command_doc(conn: &mut redis::Connection, name: &str) -> Value {
    fn sort_subcommands(v: Value) -> Value {
        let Value::Array(mut fields) = v else {
            return v;
        };
        let at = fields
            .iter()
            .position(|f| *f == Value::BulkString(b"subcommands".to_vec()));
        if let Some(Value::Array(subs)) = at.and_then(|i| fields.get_mut(i + 1)) {
            let mut pairs: Vec<(String, Value)> = std::mem::take(subs)
                .chunks(2)
                .map(|p| (format!("{:?}", p[0]), sort_subcommands(p[1].clone())))
                .collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            *subs = pairs.into_iter().map(|(_, v)| v).collect();
        }
        Value::Array(fields)
    }
    let v: Vec<Value> = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(name)
        .query(conn)
        .unwrap();
    assert_eq!(v.len(), 2, "COMMAND DOCS {name}: {v:?}");
    sort_subcommands(v.into_iter().nth(1).unwrap_or(Value::Nil))
}

#[test]
fn command_info_and_docs_match_redis_for_every_command() {
    let redis = start_redis(&[]);
    let srv = start_cairn(&[]);
    let mut r = client(redis.port);
    let mut c = client(srv.port);
    let top = |n: &String| n.split('|').next().unwrap_or("").to_string();
    let theirs: BTreeSet<String> = redis::cmd("COMMAND").arg("LIST").query(&mut r).unwrap();
    let ours: BTreeSet<String> = redis::cmd("COMMAND").arg("LIST").query(&mut c).unwrap();
    for m in theirs.difference(&ours) {
        assert!(
            COMMANDS_CAIRN_LACKS.iter().any(|(n, _)| *n == top(m)),
            "cairn lacks {m}"
        );
    }
    for m in ours.difference(&theirs) {
        assert!(
            COMMANDS_BEYOND_REDIS_7_0.iter().any(|(n, _)| *n == top(m)),
            "Redis 7.0 lacks {m}"
        );
    }
    // All ten fields, tips, key specs and subcommands' entries included.
    let mut compared = 0;
    for name in theirs.intersection(&ours) {
        assert_eq!(
            command_entry(&mut c, name),
            command_entry(&mut r, name),
            "COMMAND INFO {name}"
        );
        // COMMAND DOCS: summary, since, group, complexity, doc flags, deprecation,
        // history, the argument tree, subcommands' docs.
        assert_eq!(
            command_doc(&mut c, name),
            command_doc(&mut r, name),
            "COMMAND DOCS {name}"
        );
        compared += 1;
    }
    assert!(compared > 300, "{compared} commands compared");
    // COMMAND COUNT: Redis's, less what cairn lacks, plus what it has beyond.
    let count = |conn: &mut redis::Connection| -> i64 {
        redis::cmd("COMMAND").arg("COUNT").query(conn).unwrap()
    };
    let top_level = |names: &BTreeSet<String>, list: &[(&str, &str)]| {
        list.iter().filter(|(n, _)| names.contains(*n)).count() as i64
    };
    assert_eq!(
        count(&mut c),
        count(&mut r) - top_level(&theirs, COMMANDS_CAIRN_LACKS)
            + top_level(&ours, COMMANDS_BEYOND_REDIS_7_0)
    );
    // COMMAND (all) holds the same entries as COMMAND INFO of each.
    let all: Vec<Value> = redis::cmd("COMMAND").query(&mut c).unwrap();
    assert_eq!(all.len() as i64, count(&mut c));
    // COMMAND LIST FILTERBY: the same names as Redis's, but for what cairn lacks or adds.
    let filters: &[(&str, &str)] = &[
        ("ACLCAT", "read"),
        ("ACLCAT", "write"),
        ("ACLCAT", "dangerous"),
        ("ACLCAT", "scripting"),
        ("ACLCAT", "STREAM"),
        ("ACLCAT", "nosuchcategory"),
        ("PATTERN", "x*"),
        ("PATTERN", "*|help"),
        ("PATTERN", "config|*"),
        ("PATTERN", "g?o*"),
        ("MODULE", "nosuchmodule"),
    ];
    for (by, what) in filters {
        let list = |conn: &mut redis::Connection| -> BTreeSet<String> {
            let names: Vec<String> = redis::cmd("COMMAND")
                .arg("LIST")
                .arg("FILTERBY")
                .arg(by)
                .arg(what)
                .query(conn)
                .unwrap();
            names
                .into_iter()
                .filter(|n| {
                    let t = top(n);
                    !COMMANDS_CAIRN_LACKS
                        .iter()
                        .chain(COMMANDS_BEYOND_REDIS_7_0)
                        .any(|(x, _)| *x == t)
                })
                .collect()
        };
        assert_eq!(
            list(&mut c),
            list(&mut r),
            "COMMAND LIST FILTERBY {by} {what}"
        );
    }
    // RESP3: key specs are maps, tips, key specs and subcommands sets; the bytes of commands
    // without subcommands are equal.
    let mut rr = Raw::connect(redis.port);
    let mut cr = Raw::connect(srv.port);
    rr.call(&["HELLO", "3"]);
    cr.call(&["HELLO", "3"]);
    let probe = [
        "COMMAND",
        "INFO",
        "sort",
        "migrate",
        "eval",
        "xread",
        "georadius",
        "set",
        "get",
    ];
    assert_eq!(show(&cr.call(&probe)), show(&rr.call(&probe)));
    let probe = [
        "COMMAND",
        "DOCS",
        "georadius",
        "migrate",
        "set",
        "client|kill",
        "xadd",
        "bitfield",
    ];
    assert_eq!(show(&cr.call(&probe)), show(&rr.call(&probe)));
}
