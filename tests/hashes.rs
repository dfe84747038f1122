//! Black-box tests of the hash family: the same command sequences run on cairn and on
//! Debian's redis-server 7.0.15 and the raw replies must be byte-identical (RESP2 and
//! RESP3); hashtable-encoded hashes (unspecified order) are compared as sorted sets;
//! encoding conversion at the thresholds; DUMP/RESTORE across both servers; lazy DEL.
mod common;
use common::*;

const SCRIPT: &[&str] = &[
    "HSET h a 1 b 2 c hello",
    "HSET h a",
    "HSET h a 1 b",
    "HMSET h a",
    "HSET h a 10 d 4",
    "HMSET h e 5 f -7",
    "HSETNX h a x",
    "HSETNX h g 007",
    "HGET h a",
    "HGET h g",
    "HGET h nosuch",
    "HGET nokey a",
    "HMGET h a nosuch c",
    "HMGET nokey a b",
    "HGETALL h",
    "HKEYS h",
    "HVALS h",
    "HGETALL nokey",
    "HKEYS nokey",
    "HLEN h",
    "HLEN nokey",
    "HSTRLEN h c",
    "HSTRLEN h a",
    "HSTRLEN h f",
    "HSTRLEN h nosuch",
    "HEXISTS h a",
    "HEXISTS h nosuch",
    "HEXISTS nokey a",
    "HINCRBY h a 5",
    "HINCRBY h new -3",
    "HINCRBY h c 1",
    "HINCRBY h a x",
    "HSET h big 9223372036854775807",
    "HINCRBY h big 1",
    "HINCRBY h big -1",
    "HINCRBYFLOAT h a 1.5",
    "HINCRBYFLOAT h fl 0.1",
    "HINCRBYFLOAT h fl 0.2",
    "HINCRBYFLOAT h c 1",
    "HINCRBYFLOAT h a x",
    "HINCRBYFLOAT h a inf",
    "HINCRBYFLOAT nokey2 a nan",
    "HSET hf f 1e308",
    "HINCRBYFLOAT hf f 1e308",
    "OBJECT ENCODING hf",
    "HGETALL h",
    "HDEL h a nosuch b",
    "HDEL nokey a",
    "HGETALL h",
    "HRANDFIELD nokey",
    "HRANDFIELD nokey 5",
    "HRANDFIELD h x",
    "HRANDFIELD h 1 x",
    "HRANDFIELD h 1 WITHVALUES x",
    "HRANDFIELD h -9223372036854775808",
    "HRANDFIELD h 0",
    "HRANDFIELD h 100",
    "HRANDFIELD h 100 WITHVALUES",
    "HSCAN h 0",
    "HSCAN h 0 COUNT 100 MATCH *",
    "HSCAN h 0 MATCH f*",
    "HSCAN h x",
    "HSCAN h 0 COUNT 0",
    "HSCAN h 0 foo",
    "HSCAN h 0 COUNT x",
    "HSCAN nokey 0",
    "HSCAN nokey 0 foo",
    "OBJECT ENCODING h",
    "TYPE h",
    "SET s x",
    "HSET s a 1",
    "HGET s a",
    "HGETALL s",
    "HDEL s a",
    "HLEN s",
    "HINCRBY s a 1",
    "HINCRBYFLOAT s a 1",
    "HRANDFIELD s",
    "HSCAN s 0",
    "HSETNX s a b",
    "HMGET s a",
    "HSET one f v",
    "HDEL one f",
    "EXISTS one",
    "HSET one f v",
    "DUMP one",
    "DEL h h2 s",
];

#[test]
fn script_matches_redis_resp2() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    run_script(&mut rc, &mut rr, SCRIPT);
}

#[test]
fn script_matches_redis_resp3() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    rc.call(&["HELLO", "3"]);
    rr.call(&["HELLO", "3"]);
    run_script(&mut rc, &mut rr, SCRIPT);
}

#[test]
fn encoding_converts_at_thresholds() {
    let (_c, _r, mut rc, mut rr) = both(&["--hash-max-listpack-entries", "128"]);
    for i in 0..128 {
        let f = format!("f{i}");
        same(&mut rc, &mut rr, &[b"HSET", b"h", f.as_bytes(), b"v"]);
    }
    run_script(
        &mut rc,
        &mut rr,
        &["OBJECT ENCODING h", "HSET h f5 again", "OBJECT ENCODING h"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &["HSET h f128 v", "OBJECT ENCODING h", "HLEN h"],
    );
    // Deleting back below the threshold keeps the hashtable (as Redis 7.0).
    for i in 0..120 {
        let f = format!("f{i}");
        same(&mut rc, &mut rr, &[b"HDEL", b"h", f.as_bytes()]);
    }
    run_script(&mut rc, &mut rr, &["OBJECT ENCODING h", "HLEN h"]);
    same_unordered(&mut rc, &mut rr, &["HGETALL", "h"]);
    same_unordered(&mut rc, &mut rr, &["HKEYS", "h"]);
    // A value longer than hash-max-listpack-value converts at once.
    let v64 = "x".repeat(64);
    let v65 = "x".repeat(65);
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("HSET a f {v64}"), "OBJECT ENCODING a"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("HSET a g {v65}"), "OBJECT ENCODING a"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("HSET b {v65} 1"), "OBJECT ENCODING b"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[&format!("HSETNX c {v65} 1"), "OBJECT ENCODING c"],
    );
    run_script(
        &mut rc,
        &mut rr,
        &[
            "CONFIG SET hash-max-listpack-entries 2",
            "HSET d a 1 b 2",
            "OBJECT ENCODING d",
            "HSET d c 3",
            "OBJECT ENCODING d",
        ],
    );
    // Distinct fields when sampling a few out of many.
    for _ in 0..20 {
        let r = show(&rc.call(&["HRANDFIELD", "h", "3"]));
        let mut fields: Vec<&str> = r.split("\r\n").filter(|x| x.starts_with('f')).collect();
        assert_eq!(fields.len(), 3, "{r}");
        fields.sort();
        fields.dedup();
        assert_eq!(fields.len(), 3, "{r}");
    }
    // HRANDFIELD on a hashtable: counts and membership.
    for args in [
        ["HRANDFIELD", "h", "5"],
        ["HRANDFIELD", "h", "-20"],
        ["HRANDFIELD", "h", "100"],
    ] {
        let a = show(&rc.call(&args));
        let b = show(&rr.call(&args));
        assert_eq!(a.lines().next(), b.lines().next(), "{args:?}");
    }
}

/// DUMP payloads are interchangeable with redis-server both ways, for both encodings
/// of hashes and for lists.
#[test]
fn dump_restore_cross_server() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let big: Vec<String> = (0..300).map(|i| format!("field{i}")).collect();
    for srv in [&mut rc, &mut rr] {
        srv.call(&["HSET", "small", "a", "1", "b", "hello", "c", "-42"]);
        let mut args = vec!["HSET", "large"];
        for f in &big {
            args.push(f);
            args.push(f);
        }
        srv.call(&args);
        srv.call(&["CONFIG", "SET", "hash-max-listpack-entries", "128"]);
        let mut args = vec!["HSET", "large2"];
        for f in &big {
            args.push(f);
            args.push("v");
        }
        srv.call(&args);
        let mut args = vec!["RPUSH", "list"];
        let elems: Vec<String> = (0..3000)
            .map(|i| format!("{i}-{}", "y".repeat(i % 50)))
            .collect();
        for e in &elems {
            args.push(e);
        }
        srv.call(&args);
        srv.call(&["RPUSH", "slist", "a", "1", "-5", "b"]);
    }
    same(&mut rc, &mut rr, &[b"DUMP", b"small"]);
    same(&mut rc, &mut rr, &[b"DUMP", b"slist"]);
    for key in ["small", "large", "large2", "list", "slist"] {
        // cairn -> redis and redis -> cairn.
        let dc = bulk_payload(&rc.call(&["DUMP", key]));
        let dr = bulk_payload(&rr.call(&["DUMP", key]));
        let k2 = format!("{key}-copy");
        for (raw, payload) in [(&mut rr, &dc), (&mut rc, &dr)] {
            raw.cmd(&[b"RESTORE", k2.as_bytes(), b"0", payload]);
            assert_eq!(raw.reply(), b"+OK\r\n", "RESTORE {key}");
        }
        same(&mut rc, &mut rr, &[b"OBJECT", b"ENCODING", k2.as_bytes()]);
        if key.contains("list") {
            same(&mut rc, &mut rr, &[b"LRANGE", k2.as_bytes(), b"0", b"-1"]);
        } else {
            same_unordered(&mut rc, &mut rr, &["HGETALL", &k2]);
            same(&mut rc, &mut rr, &[b"HLEN", k2.as_bytes()]);
        }
    }
    // Corrupt payloads are refused.
    let mut dc = bulk_payload(&rc.call(&["DUMP", "small"]));
    dc[5] ^= 0xFF;
    rc.cmd(&[b"RESTORE", b"bad", b"0", &dc]);
    assert!(rc.reply().starts_with(b"-ERR"));
}

/// Random operations on listpack-sized hashes, compared byte for byte.
#[test]
fn random_ops_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let mut g = Lcg(7);
    let keys = ["h1", "h2"];
    for _ in 0..3000 {
        let k = keys[g.below(2) as usize].to_string();
        let f = format!("f{}", g.below(30));
        let v = match g.below(4) {
            0 => format!("{}", g.below(1000) as i64 - 500),
            1 => "v".repeat(g.below(60) as usize),
            2 => format!("{}.5", g.below(100)),
            _ => format!("s{}", g.below(9)),
        };
        let cmd: Vec<String> = match g.below(10) {
            0..=2 => vec![
                "HSET".into(),
                k,
                f,
                v,
                format!("f{}", g.below(30)),
                "x".into(),
            ],
            3 => vec!["HDEL".into(), k, f, format!("f{}", g.below(30))],
            4 => vec![
                "HINCRBY".into(),
                k,
                f,
                (g.below(100) as i64 - 50).to_string(),
            ],
            5 => vec!["HINCRBYFLOAT".into(), k, f, "1.25".into()],
            6 => vec!["HGETALL".into(), k],
            7 => vec!["HMGET".into(), k, f, "f1".into()],
            8 => vec!["HSETNX".into(), k, f, v],
            _ => vec!["HSTRLEN".into(), k, f],
        };
        let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        same(&mut rc, &mut rr, &args);
    }
}

#[test]
fn big_hash_del_is_lazy_and_memory_returns() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    let before = used_memory(&mut raw);
    for b in 0..200 {
        let fields: Vec<String> = (0..1000).map(|i| format!("f{b}-{i}")).collect();
        let mut args: Vec<&[u8]> = vec![b"HSET", b"big"];
        for f in &fields {
            args.push(f.as_bytes());
            args.push(b"value");
        }
        raw.cmd(&args);
        raw.reply();
    }
    assert_eq!(raw.call(&["HLEN", "big"]), b":200000\r\n");
    assert_eq!(
        raw.call(&["OBJECT", "ENCODING", "big"]),
        b"$9\r\nhashtable\r\n"
    );
    let usage = show(&raw.call(&["MEMORY", "USAGE", "big"]));
    let usage: u64 = usage.trim_start_matches(':').trim().parse().unwrap();
    assert!(usage > 5_000_000, "MEMORY USAGE {usage}");
    // DEL detaches the hash; the cron frees it in slices (a lazy free, counted).
    let lazyfreed_before = raw.info_u64("memory", "lazyfreed_objects");
    assert_eq!(raw.call(&["DEL", "big"]), b":1\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    wait_memory_back(&mut raw, before);
    assert!(raw.info_u64("memory", "lazyfreed_objects") > lazyfreed_before);
    // The other ways a big value goes: overwrite by SET, expiry, FLUSHALL.
    for round in 0..3 {
        for key in ["bh", "bl"] {
            for b in 0..50 {
                let items: Vec<String> = (0..1000).map(|i| format!("{b}-{i}")).collect();
                let mut args: Vec<&str> = if key == "bh" {
                    vec!["HSET", key]
                } else {
                    vec!["RPUSH", key]
                };
                for it in &items {
                    args.push(it);
                    if key == "bh" {
                        args.push("v");
                    }
                }
                raw.call(&args);
            }
        }
        assert!(used_memory(&mut raw) > before + 2_000_000);
        let lazyfreed_before = raw.info_u64("memory", "lazyfreed_objects");
        match round {
            0 => {
                raw.call(&["SET", "bh", "x"]);
                raw.call(&["SET", "bl", "x"]);
                raw.call(&["DEL", "bh", "bl"]);
            }
            1 => {
                raw.call(&["PEXPIRE", "bh", "1"]);
                raw.call(&["PEXPIRE", "bl", "1"]);
                wait_until(DEADLINE, "bh and bl expired", || {
                    raw.call(&["EXISTS", "bh", "bl"]) == b":0\r\n"
                });
            }
            _ => assert_eq!(raw.call(&["FLUSHALL"]), b"+OK\r\n"),
        }
        assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
        wait_memory_back(&mut raw, before);
        // Freed in slices by the cron (a lazy free, counted), not inline in the command.
        assert!(
            raw.info_u64("memory", "lazyfreed_objects") > lazyfreed_before,
            "round {round}: not freed lazily"
        );
    }
}

/// Collections live in the arena, so a snapshot image restores them without parsing:
/// SAVE, BGSAVE while writing, restart, same contents and encodings.
#[test]
fn snapshot_restart_keeps_collections() {
    let dir = temp_dir("colls-snap");
    let start = || start_on(&dir, &[], &[]);
    let state = |raw: &mut Raw| {
        let mut big = show(&raw.call(&["HGETALL", "bigh"]));
        let mut lines: Vec<&str> = big.split("\r\n").collect();
        lines.sort();
        let sorted = lines.join("|");
        big.clear();
        vec![
            show(&raw.call(&["LRANGE", "l", "0", "-1"])),
            show(&raw.call(&["LLEN", "bigl"])),
            show(&raw.call(&["LINDEX", "bigl", "77777"])),
            show(&raw.call(&["HGETALL", "h"])),
            sorted,
            show(&raw.call(&["OBJECT", "ENCODING", "h"])),
            show(&raw.call(&["OBJECT", "ENCODING", "bigh"])),
        ]
    };
    let want;
    {
        let s = start();
        let mut raw = Raw::connect(s.port);
        raw.call(&["RPUSH", "l", "a", "1", "-7", "b"]);
        raw.call(&["HSET", "h", "f", "v", "n", "12"]);
        for b in 0..100 {
            let items: Vec<String> = (0..1000).map(|i| format!("{b}:{i}")).collect();
            let mut args = vec!["RPUSH", "bigl"];
            args.extend(items.iter().map(|s| s.as_str()));
            raw.call(&args);
            let mut args = vec!["HSET", "bigh"];
            for it in items.iter().take(20) {
                args.push(it);
                args.push("x");
            }
            raw.call(&args);
        }
        // A big value waiting in the value graveyard is in the image too.
        for _ in 0..100 {
            let items: Vec<String> = (0..1000).map(|i| format!("gone-{i}")).collect();
            let mut args = vec!["RPUSH", "gone"];
            args.extend(items.iter().map(|s| s.as_str()));
            raw.call(&args);
        }
        assert_eq!(raw.call(&["DEL", "gone"]), b":1\r\n");
        assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
        want = state(&mut raw);
        drop(s); // SIGKILL
    }
    let s = start();
    let mut raw = Raw::connect(s.port);
    let got = state(&mut raw);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "item {i}: {:.200} vs {:.200}", g, w);
    }
    // Writable after the restart.
    raw.call(&["LPUSH", "bigl", "new"]);
    assert_eq!(raw.call(&["LLEN", "bigl"]), b":100001\r\n");
    assert_eq!(raw.call(&["DEL", "bigl", "bigh"]), b":2\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG DIGEST-VALUE / DEBUG DIGEST of lists and hashes equal Redis's (content-based,
/// whatever the encoding).
#[test]
fn debug_digest_matches_redis() {
    let (_c, _r, mut rc, mut rr) = both(&["--enable-debug-command", "yes"]);
    let fields: Vec<String> = (0..700).map(|i| format!("f{i}")).collect();
    let mut big = vec!["HSET", "bigh"];
    for f in &fields {
        big.push(f);
        big.push(f);
    }
    let mut bigl = vec!["RPUSH", "bigl"];
    bigl.extend(fields.iter().map(|s| s.as_str()));
    for raw in [&mut rc, &mut rr] {
        raw.call(&big);
        raw.call(&bigl);
        raw.call(&["HSET", "h", "a", "1", "b", "two"]);
        raw.call(&["RPUSH", "l", "x", "-3", "y"]);
        raw.call(&["EXPIRE", "l", "1000"]);
    }
    run_script(
        &mut rc,
        &mut rr,
        &["DEBUG DIGEST-VALUE h l bigh bigl", "DEBUG DIGEST"],
    );
}
