//! Black-box tests of the sorted-set family against Debian's redis-server 7.0.15 (raw
//! replies byte-identical, RESP2 and RESP3): encoding conversion at the thresholds, big
//! skiplists (ranks, ranges, pops), ZSCAN, DUMP/RESTORE both ways, DEBUG DIGEST, lazy DEL,
//! snapshot restart, AOF rewrite, and ZRANK WITHSCORE (Redis 7.2 syntax, checked alone).
mod common;
use common::*;

/// Replies compared as multisets of lines (ZSCAN of a skiplist: dict order).
fn lines_sorted(b: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = show(b).split("\r\n").map(String::from).collect();
    v.sort();
    v
}

const SCRIPT: &[&str] = &[
    "ZADD z 1 a 2 b 3 c 1.5 x -inf lo +inf hi 0.1 t -0 nz 1e20 e20 4503599627370497 big",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZSCORE z t",
    "ZSCORE z nz",
    "ZMSCORE z a nope hi lo",
    "ZRANGEBYSCORE z (1 3 WITHSCORES LIMIT 1 2",
    "ZREVRANGEBYSCORE z +inf -inf WITHSCORES",
    "ZRANGE z (1 +inf BYSCORE REV LIMIT 0 2 WITHSCORES",
    "ZCOUNT z -inf (1.5",
    "ZRANK z x",
    "ZREVRANK z x",
    "ZINCRBY z 2.5 a",
    "ZINCRBY z 1 new",
    "ZADD z INCR -inf hi",
    "ZADD z XX CH GT 0 b 10 c",
    "ZADD z NX LT 0 b",
    "ZADD z GT CH 5 b",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZMPOP 2 nokey z MIN COUNT 2",
    "ZRANGESTORE dst z 0 2",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZADD l 0 a 0 b 0 c 0 d 0 e",
    "ZRANGEBYLEX l [b (e",
    "ZREVRANGEBYLEX l + - LIMIT 1 2",
    "ZLEXCOUNT l (a +",
    "ZREMRANGEBYLEX l - [b",
    "ZRANGE l 0 -1",
    "ZADD u 1 a 2 b",
    "ZADD v 10 b 20 c",
    "ZUNION 2 u v WITHSCORES",
    "ZINTER 2 u v WEIGHTS 2 3 AGGREGATE MAX WITHSCORES",
    "ZDIFF 2 u v WITHSCORES",
    "ZUNIONSTORE w 2 u v AGGREGATE MIN",
    "ZRANGE w 0 -1 WITHSCORES",
    "ZINTERCARD 2 u v LIMIT 0",
    "ZDIFFSTORE w 1 nokey",
    "EXISTS w",
    "ZREMRANGEBYRANK z 0 1",
    "ZREMRANGEBYSCORE z -inf 2",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZSCAN z 0",
    "ZRANDMEMBER nokey",
    "ZRANDMEMBER z 0",
    "SET s x",
    "ZADD s 1 a",
    "ZRANGE s 0 -1",
    "ZUNION 2 u s",
    "SADD ps a b c 7",
    "ZADD pz 2 a 5 d 0.5 7",
    "ZUNION 2 ps pz WITHSCORES",
    "ZINTER 2 ps pz WEIGHTS 3 1 WITHSCORES",
    "ZINTER 2 ps pz AGGREGATE MAX WITHSCORES",
    "ZDIFF 2 ps pz WITHSCORES",
    "ZINTERCARD 2 ps pz",
    "ZUNIONSTORE pd 2 pz ps WEIGHTS 1 2",
    "ZRANGE pd 0 -1 WITHSCORES",
    "ZDIFFSTORE pd2 1 ps",
    "ZRANGE pd2 0 -1 WITHSCORES",
    "TYPE z",
    "OBJECT ENCODING z",
    "ZADD hx 0x1.8p1 a -0X.8 c",
    "ZADD hx 0x1p-2000 b",
    "ZADD hx 0x1p5000 b",
    "ZADD hx 0x d",
    "ZRANGE hx 0 -1 WITHSCORES",
    "ZRANGEBYSCORE hx 0x1 0x10",
];

fn script_matches(resp3: bool) {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    if resp3 {
        // Client ids differ; the rest of the script is compared.
        rc.call(&["HELLO", "3"]);
        rr.call(&["HELLO", "3"]);
    }
    run_script(&mut rc, &mut rr, SCRIPT);
}

#[test]
fn script_matches_redis_resp2() {
    script_matches(false);
}

#[test]
fn script_matches_redis_resp3() {
    script_matches(true);
}

#[test]
fn encoding_converts_at_thresholds() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for i in 0..128 {
        let m = format!("m{i}");
        same_str(&mut rc, &mut rr, &["ZADD", "z", &i.to_string(), &m]);
    }
    run_script(
        &mut rc,
        &mut rr,
        &["OBJECT ENCODING z", "ZADD z 5 m5", "OBJECT ENCODING z"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &["ZADD z 1 new", "OBJECT ENCODING z", "ZCARD z"],
    );
    // Removing members keeps the skiplist (Redis 7.0 never converts back).
    run_script(
        &mut rc,
        &mut rr,
        &[
            "ZREMRANGEBYRANK z 0 120",
            "OBJECT ENCODING z",
            "ZRANGE z 0 -1 WITHSCORES",
        ],
    );
    let m64 = "x".repeat(64);
    let m65 = "x".repeat(65);
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("ZADD a 1 {m64}"), "OBJECT ENCODING a"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("ZADD a 2 {m65}"), "OBJECT ENCODING a"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("ZADD b 1 {m65}"), "OBJECT ENCODING b"],
    );
    // Store commands pick the encoding for their result; a small result is a listpack.
    run_script(
        &mut rc,
        &mut rr,
        &[
            "ZUNIONSTORE c 1 z",
            "OBJECT ENCODING c",
            "ZRANGESTORE d z 0 2",
            "OBJECT ENCODING d",
            "CONFIG SET zset-max-listpack-entries 2",
            "ZADD e 1 a 2 b",
            "OBJECT ENCODING e",
            "ZADD e 3 c",
            "OBJECT ENCODING e",
            // -0 survives only where no listpack was on the way.
            "ZADD m0 -0 a -0 b -0 c -0 d",
            "ZRANGE m0 0 -1 WITHSCORES",
            "ZRANGESTORE m1 m0 0 -1",
            "ZRANGE m1 0 -1 WITHSCORES",
            "ZRANGESTORE m2 m0 -inf +inf BYSCORE REV",
            "ZRANGE m2 0 -1 WITHSCORES",
            "ZRANGESTORE m3 m0 0 1",
            "ZRANGE m3 0 -1 WITHSCORES",
            "ZUNIONSTORE m4 1 m0",
            "ZRANGE m4 0 -1 WITHSCORES",
            "CONFIG SET zset-max-listpack-entries 0",
            "ZADD f 1 a",
            "OBJECT ENCODING f",
        ],
    );
}

/// A big skiplist: every rank, range and pop form agrees with Redis.
#[test]
fn big_skiplist_matches_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..20 {
        let mut args = vec!["ZADD".to_string(), "big".to_string()];
        for _ in 0..500 {
            let score = (next() % 2000) as f64 / 8.0 - 100.0;
            args.push(score.to_string());
            args.push(format!("m{}", next() % 5000));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        same_str(&mut rc, &mut rr, &a);
    }
    run_script(
        &mut rc,
        &mut rr,
        &[
            "ZCARD big",
            "OBJECT ENCODING big",
            "ZRANGE big 0 20 WITHSCORES",
            "ZRANGE big -30 -1 WITHSCORES",
            "ZREVRANGE big 100 140 WITHSCORES",
            "ZRANGEBYSCORE big (10 20 WITHSCORES",
            "ZREVRANGEBYSCORE big 50 (-50 LIMIT 10 20",
            "ZCOUNT big -50 50",
            "ZRANK big m17",
            "ZREVRANK big m17",
            "ZRANK big m4000",
            "ZSCORE big m4000",
            "ZINCRBY big 1000 m1",
            "ZRANK big m1",
            "ZPOPMIN big 5",
            "ZPOPMAX big 5",
            "ZREMRANGEBYSCORE big 0 10",
            "ZREMRANGEBYRANK big 100 200",
            "ZCARD big",
            "ZRANGE big 0 -1 WITHSCORES",
            "ZUNIONSTORE u2 2 big big WEIGHTS 1 0.5",
            "ZRANGE u2 0 -1 WITHSCORES",
            "ZINTER 2 big u2 AGGREGATE MIN WITHSCORES",
        ],
    );
    // ZSCAN walks the dict: every member exactly once, with its score.
    let mut cursor = "0".to_string();
    let mut seen = vec![];
    loop {
        let r = rc.call(&["ZSCAN", "big", &cursor, "COUNT", "50"]);
        let s = show(&r);
        let parts: Vec<&str> = s.split("\r\n").collect();
        cursor = parts[2].to_string();
        let body: Vec<&str> = parts[4..]
            .iter()
            .copied()
            .filter(|x| !x.starts_with('$') && !x.is_empty())
            .collect();
        for p in body.chunks(2) {
            seen.push(format!("{} {}", p[0], p[1]));
        }
        if cursor == "0" {
            break;
        }
    }
    seen.sort();
    let all = show(&rc.call(&["ZRANGE", "big", "0", "-1", "WITHSCORES"]));
    let parts: Vec<&str> = all
        .split("\r\n")
        .filter(|x| !x.starts_with('$') && !x.starts_with('*') && !x.is_empty())
        .collect();
    let mut want: Vec<String> = parts
        .chunks(2)
        .map(|p| format!("{} {}", p[0], p[1]))
        .collect();
    want.sort();
    assert_eq!(seen, want);
    assert_eq!(
        lines_sorted(&rc.call(&["ZSCAN", "big", "0", "MATCH", "m1*", "COUNT", "100000"]))[2..]
            .len(),
        lines_sorted(&rr.call(&["ZSCAN", "big", "0", "MATCH", "m1*", "COUNT", "100000"]))[2..]
            .len()
    );
}

/// ZRANK/ZREVRANK take 7.0's arguments: 7.2's WITHSCORE is refused as 7.0.15 refuses it.
#[test]
fn zrank_takes_7_0_arguments() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    run_script(
        &mut rc,
        &mut rr,
        &[
            "ZADD z 1 a 2.5 b",
            "ZRANK z b",
            "ZREVRANK z b",
            "ZRANK z c",
            "ZRANK nokey c",
            "ZRANK z b WITHSCORE",
            "ZREVRANK z b withscore",
            "ZRANK z a FOO",
        ],
    );
}

/// DUMP payloads cross both ways with redis-server (listpack: type 17, byte for byte;
/// skiplist: type 5).
#[test]
fn dump_restore_cross_server() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for srv in [&mut rc, &mut rr] {
        srv.call(&[
            "ZADD", "small", "1", "a", "2.5", "b", "-inf", "c", "1e20", "d", "-0", "e",
        ]);
        let mut args = vec!["ZADD".to_string(), "large".to_string()];
        for i in 0..300 {
            args.push(format!("{}.25", i % 17));
            args.push(format!("member{i}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        srv.call(&a);
    }
    same_str(&mut rc, &mut rr, &["DUMP", "small"]);
    same_str(&mut rc, &mut rr, &["DUMP", "large"]);
    for key in ["small", "large"] {
        let dc = bulk_payload(&rc.call(&["DUMP", key]));
        let dr = bulk_payload(&rr.call(&["DUMP", key]));
        let k2 = format!("{key}-copy");
        for (raw, payload) in [(&mut rr, &dc), (&mut rc, &dr)] {
            raw.cmd(&[b"RESTORE", k2.as_bytes(), b"0", payload]);
            assert_eq!(raw.reply(), b"+OK\r\n", "RESTORE {key}");
        }
        same_str(&mut rc, &mut rr, &["OBJECT", "ENCODING", &k2]);
        same_str(&mut rc, &mut rr, &["ZRANGE", &k2, "0", "-1", "WITHSCORES"]);
    }
    // A large payload restored under small limits stays a skiplist; a small one under
    // limits of 0 becomes one.
    same_str(
        &mut rc,
        &mut rr,
        &["CONFIG", "SET", "zset-max-listpack-entries", "0"],
    );
    let dr = bulk_payload(&rr.call(&["DUMP", "small"]));
    for raw in [&mut rc, &mut rr] {
        raw.cmd(&[b"RESTORE", b"s2", b"0", &dr]);
        assert_eq!(raw.reply(), b"+OK\r\n");
    }
    same_str(&mut rc, &mut rr, &["OBJECT", "ENCODING", "s2"]);
    // Corrupt payloads are refused.
    let mut dc = bulk_payload(&rc.call(&["DUMP", "small"]));
    dc[8] ^= 0xFF;
    rc.cmd(&[b"RESTORE", b"bad", b"0", &dc]);
    assert!(rc.reply().starts_with(b"-ERR"));
}

#[test]
fn debug_digest_matches_redis() {
    let (_c, _r, mut rc, mut rr) = both(&["--enable-debug-command", "yes"]);
    let mut args = vec!["ZADD".to_string(), "bigz".to_string()];
    for i in 0..500 {
        args.push(format!("{}.5", i % 13));
        args.push(format!("m{i}"));
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    for raw in [&mut rc, &mut rr] {
        raw.call(&a);
        raw.call(&["ZADD", "z", "1", "a", "0.1", "b", "inf", "c", "-0", "d"]);
        raw.call(&["EXPIRE", "z", "1000"]);
    }
    run_script(
        &mut rc,
        &mut rr,
        &["DEBUG DIGEST-VALUE z bigz", "DEBUG DIGEST"],
    );
}

fn fill_big(raw: &mut Raw, key: &str, batches: usize) {
    for b in 0..batches {
        let mut args: Vec<String> = vec!["ZADD".into(), key.into()];
        for i in 0..1000 {
            args.push(format!("{}", (b * 1000 + i) % 977));
            args.push(format!("m{b}-{i}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        raw.call(&a);
    }
}

/// Deleting, overwriting or expiring a big zset goes to the value graveyard: the command
/// answers at once and memory comes back over the next cron ticks.
#[test]
fn big_zset_del_is_lazy_and_memory_returns() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    let before = used_memory(&mut raw);
    fill_big(&mut raw, "big", 300);
    assert_eq!(raw.call(&["ZCARD", "big"]), b":300000\r\n");
    assert_eq!(
        raw.call(&["OBJECT", "ENCODING", "big"]),
        b"$8\r\nskiplist\r\n"
    );
    let usage = show(&raw.call(&["MEMORY", "USAGE", "big"]));
    let usage: u64 = usage.trim_start_matches(':').trim().parse().unwrap();
    assert!(usage > 10_000_000, "MEMORY USAGE {usage}");
    // O(log n) rank queries on the big set.
    assert_eq!(raw.call(&["ZRANK", "big", "m0-0"]), b":0\r\n");
    let lazyfreed_before = raw.info_u64("memory", "lazyfreed_objects");
    assert_eq!(raw.call(&["DEL", "big"]), b":1\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    wait_memory_back(&mut raw, before);
    // Freed in slices by the cron (a lazy free, counted), not inline in DEL.
    assert!(raw.info_u64("memory", "lazyfreed_objects") > lazyfreed_before);
    for round in 0..2 {
        fill_big(&mut raw, "bz", 50);
        let lazyfreed_before = raw.info_u64("memory", "lazyfreed_objects");
        if round == 0 {
            raw.call(&["SET", "bz", "x"]);
            raw.call(&["DEL", "bz"]);
        } else {
            raw.call(&["PEXPIRE", "bz", "1"]);
            wait_until(DEADLINE, "bz expired", || {
                raw.call(&["EXISTS", "bz"]) == b":0\r\n"
            });
        }
        assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
        wait_memory_back(&mut raw, before);
        // Freed in slices by the cron (a lazy free, counted), not inline in the command.
        assert!(
            raw.info_u64("memory", "lazyfreed_objects") > lazyfreed_before,
            "round {round}: not freed lazily"
        );
    }
    // COPY deep-copies, RENAME moves; both keep the content.
    fill_big(&mut raw, "src", 5);
    assert_eq!(raw.call(&["COPY", "src", "cp"]), b":1\r\n");
    assert_eq!(raw.call(&["RENAME", "src", "mv"]), b"+OK\r\n");
    assert_eq!(raw.call(&["ZCARD", "cp"]), b":5000\r\n");
    assert_eq!(
        raw.call(&["ZRANGE", "cp", "0", "3"]),
        raw.call(&["ZRANGE", "mv", "0", "3"])
    );
    assert_eq!(raw.call(&["DEL", "cp", "mv"]), b":2\r\n");
    wait_memory_back(&mut raw, before);
}

/// A snapshot image restores zsets as raw pages: same contents, encodings, and ranks.
#[test]
fn snapshot_restart_keeps_zsets() {
    let dir = temp_dir("zsets-snap");
    let start = || start_on(&dir, &[], &[]);
    let state = |raw: &mut Raw| {
        vec![
            show(&raw.call(&["ZRANGE", "small", "0", "-1", "WITHSCORES"])),
            show(&raw.call(&["ZRANGE", "big", "1000", "1100", "WITHSCORES"])),
            show(&raw.call(&["ZRANK", "big", "m3-77"])),
            show(&raw.call(&["OBJECT", "ENCODING", "big"])),
            show(&raw.call(&["OBJECT", "ENCODING", "small"])),
        ]
    };
    let want;
    {
        let s = start();
        let mut raw = Raw::connect(s.port);
        raw.call(&["ZADD", "small", "1", "a", "2.5", "b"]);
        fill_big(&mut raw, "big", 10);
        assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
        want = state(&mut raw);
        drop(s); // SIGKILL
    }
    let s = start();
    let mut raw = Raw::connect(s.port);
    assert_eq!(state(&mut raw), want);
    raw.call(&["ZADD", "big", "-1", "first"]);
    assert_eq!(raw.call(&["ZRANK", "big", "first"]), b":0\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF writes zsets as ZADD batches; a restart from the rewritten log has the
/// same zsets (scores exact, TTL kept).
#[test]
fn aof_rewrite_and_replay_keep_zsets() {
    let dir = temp_dir("zsets-aof");
    let start = || start_aof(&dir, &[]);
    let state = |raw: &mut Raw| {
        vec![
            show(&raw.call(&["ZRANGE", "z", "0", "-1", "WITHSCORES"])),
            show(&raw.call(&["ZRANGE", "big", "0", "-1", "WITHSCORES"])),
            show(&raw.call(&["ZRANGE", "popped", "0", "-1", "WITHSCORES"])),
            show(&raw.call(&["OBJECT", "ENCODING", "big"])),
            (raw.call(&["TTL", "z"]) != b":-1\r\n").to_string(),
        ]
    };
    let want;
    {
        let s = start();
        let mut raw = Raw::connect(s.port);
        raw.call(&["ZADD", "z", "0.1", "a", "1e20", "b", "-inf", "c", "3", "d"]);
        raw.call(&["EXPIRE", "z", "10000"]);
        fill_big(&mut raw, "big", 2);
        raw.call(&["ZADD", "popped", "1", "a", "2", "b", "3", "c"]);
        raw.call(&["ZPOPMIN", "popped"]);
        raw.call(&["ZMPOP", "1", "popped", "MAX"]);
        raw.call(&["ZINCRBY", "z", "0.2", "a"]);
        assert_eq!(
            raw.call(&["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        wait_until(DEADLINE, "the rewrite finished", || {
            raw.info("persistence", "aof_rewrite_in_progress")
                .as_deref()
                == Some("0")
        });
        // Writes after the rewrite go to the new incremental file.
        raw.call(&["ZADD", "z", "7", "after"]);
        raw.call(&["ZREM", "big", "m0-1"]);
        want = state(&mut raw);
        drop(s); // SIGKILL
    }
    let s = start();
    let mut raw = Raw::connect(s.port);
    assert_eq!(state(&mut raw), want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// TYPE, SCAN TYPE, WRONGTYPE both ways, OBJECT ENCODING of every kind of write.
#[test]
fn type_scan_and_wrongtype() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    run_script(
        &mut rc,
        &mut rr,
        &[
            "ZADD z 1 a",
            "SET s x",
            "RPUSH l a",
            "TYPE z",
            "SCAN 0 TYPE zset",
            "SCAN 0 TYPE ZSET COUNT 100",
            "ZCARD s",
            "ZRANGE l 0 -1",
            "ZUNIONSTORE z2 2 z l",
            "GET z",
            "LPUSH z x",
            "HSET z f v",
            "ZINTERCARD 1 s",
            "ZMPOP 2 nokey s MIN",
            "ZRANGESTORE dst s 0 -1",
            "ZRANGESTORE s z 0 -1",
            "TYPE s",
            "OBJECT ENCODING s",
            "ZADD s XX 5 a",
            "ZRANGE s 0 -1 WITHSCORES",
            "ZREM s a",
            "EXISTS s",
            "ZPOPMAX z",
            "EXISTS z",
        ],
    );
}

/// ZRANDMEMBER: distinct members for a positive count, repeats allowed for a negative one,
/// the whole set in order when the count covers it, and scores that belong to the members
/// (the differential test compares only shapes).
#[test]
fn zrandmember_picks_real_members() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    for (key, n) in [("small", 20), ("big", 1000)] {
        let mut args = vec!["ZADD".to_string(), key.to_string()];
        for i in 0..n {
            args.push(format!("{i}.5"));
            args.push(format!("m{i}"));
        }
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        raw.call(&a);
        let items = |r: &[u8]| -> Vec<String> {
            show(r)
                .split("\r\n")
                .filter(|x| !x.is_empty() && !x.starts_with('*') && !x.starts_with('$'))
                .map(String::from)
                .collect()
        };
        for count in ["5", "15", "-30"] {
            for _ in 0..20 {
                let got = items(&raw.call(&["ZRANDMEMBER", key, count, "WITHSCORES"]));
                let want = count.trim_start_matches('-').parse::<usize>().unwrap();
                assert_eq!(got.len(), want * 2, "{key} {count}");
                let mut members = vec![];
                for p in got.chunks(2) {
                    let i: usize = p[0][1..].parse().unwrap();
                    assert_eq!(p[1], format!("{i}.5"));
                    members.push(i);
                }
                if !count.starts_with('-') {
                    members.sort();
                    members.dedup();
                    assert_eq!(members.len(), want, "{key} {count}: repeated");
                }
            }
        }
        let all = raw.call(&["ZRANDMEMBER", key, "100000"]);
        assert_eq!(all, raw.call(&["ZRANGE", key, "0", "-1"]));
        let one = items(&raw.call(&["ZRANDMEMBER", key]));
        assert!(one[0].starts_with('m'));
    }
}
