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
        // AOF-PAUSE-SYNCS needs the log: its error names it, not an unknown subcommand.
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
    // Give the sleep a head start, then the other client waits behind it.
    wait_until(
        std::time::Duration::from_secs(5),
        "the sleep to start",
        || start.elapsed() >= std::time::Duration::from_millis(50),
    );
    assert_eq!(show(&b.call(&["PING"])), "+PONG\r\n");
    assert!(start.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(show(&a.reply()), "+OK\r\n");
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
