//! Black-box tests of the list family: the same command sequences run on cairn and on
//! Debian's redis-server 7.0.15 and the raw replies must be byte-identical (RESP2 and
//! RESP3), plus lazy freeing of a big list (DEL must not stall PING) and memory coming back.
mod common;
use common::*;
use std::time::{Duration, Instant};

const SCRIPT: &[&str] = &[
    "RPUSH l a b c 1 2 -5 007 1000000 99999999999 a",
    "LRANGE l 0 -1",
    "LRANGE l -3 100",
    "LRANGE l 5 2",
    "LRANGE l 100 200",
    "LRANGE l x 1",
    "LRANGE nokey 0 -1",
    "LLEN l",
    "LLEN nokey",
    "LINDEX l 0",
    "LINDEX l -1",
    "LINDEX l 100",
    "LINDEX l x",
    "LINDEX nokey x",
    "LPUSH l z y",
    "LPUSHX l w",
    "RPUSHX l v",
    "LPUSHX nokey w",
    "RPUSHX nokey w",
    "LPOP l",
    "RPOP l",
    "LPOP l 2",
    "RPOP l 0",
    "LPOP l -1",
    "LPOP l x",
    "LPOP l 1 2",
    "LPOP nokey",
    "LPOP nokey 0",
    "LPOP nokey 3",
    "LSET l 0 first",
    "LSET l -1 last",
    "LSET l 100 x",
    "LSET l x x",
    "LSET nokey 0 x",
    "LRANGE l 0 -1",
    "LINSERT l BEFORE 1 before1",
    "LINSERT l after 1 after1",
    "LINSERT l after nothere x",
    "LINSERT l middle 1 x",
    "LINSERT nokey before a x",
    "LRANGE l 0 -1",
    "RPUSH l a a a",
    "LPOS l a",
    "LPOS l a RANK 2",
    "LPOS l a RANK -1",
    "LPOS l a COUNT 0",
    "LPOS l a COUNT 2 RANK -2",
    "LPOS l a COUNT 0 MAXLEN 3",
    "LPOS l 1",
    "LPOS l 001",
    "LPOS l zz",
    "LPOS l zz COUNT 0",
    "LPOS l a RANK 0",
    "LPOS l a COUNT -1",
    "LPOS l a MAXLEN -1",
    "LPOS l a RANK x",
    "LPOS l a foo",
    "LPOS l a RANK -9223372036854775808",
    "LPOS l a RANK -9223372036854775808 COUNT 2",
    "LPOS l a RANK",
    "LPOS nokey a",
    "LPOS nokey a COUNT 0",
    "LREM l 1 a",
    "LREM l -1 a",
    "LREM l 0 a",
    "LREM l 0 a",
    "LREM l x a",
    "LREM nokey 0 a",
    "LRANGE l 0 -1",
    "LTRIM l 1 -2",
    "LRANGE l 0 -1",
    "LTRIM l x 1",
    "LTRIM nokey 0 1",
    "RPUSH src 1 2 3",
    "LMOVE src dst LEFT RIGHT",
    "LMOVE src dst RIGHT LEFT",
    "LMOVE src dst up LEFT",
    "LMOVE src src LEFT RIGHT",
    "RPOPLPUSH src dst",
    "RPOPLPUSH src dst",
    "EXISTS src",
    "LRANGE dst 0 -1",
    "LMOVE nokey dst LEFT LEFT",
    "LMPOP 2 nokey dst LEFT",
    "LMPOP 2 nokey dst RIGHT COUNT 10",
    "LMPOP 1 nokey LEFT",
    "LMPOP 0 l LEFT",
    "LMPOP -1 l LEFT",
    "LMPOP x l LEFT",
    "LMPOP 1 l middle",
    "LMPOP 1 l LEFT COUNT 0",
    "LMPOP 1 l LEFT COUNT 1 COUNT 2",
    "LMPOP 2 l LEFT",
    "LMPOP 1 l LEFT COUNT",
    "EXISTS dst",
    "SET s x",
    "LPUSH s x",
    "RPUSH s x",
    "LPUSHX s x",
    "LRANGE s 0 1",
    "LLEN s",
    "LINDEX s 0",
    "LSET s 0 x",
    "LPOP s",
    "LREM s 0 x",
    "LTRIM s 0 1",
    "LINSERT s before a b",
    "LPOS s a",
    "LMOVE s dst LEFT LEFT",
    "RPUSH l2 a",
    "LMOVE l2 s LEFT LEFT",
    "LRANGE l2 0 -1",
    "LMPOP 1 s LEFT",
    "TYPE l2",
    "OBJECT ENCODING l2",
    "LPUSH",
    "LRANGE l 0",
    "RPOPLPUSH a",
    "DEL l l2",
    "RPUSH l 1 2 3",
    "LTRIM l 5 10",
    "EXISTS l",
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

fn elem(g: &mut Lcg) -> String {
    match g.below(6) {
        0 => format!("{}", g.below(300) as i64 - 150),
        1 => format!("{}", g.next() as i64 * 1_000_003),
        2 => "x".repeat(g.below(900) as usize + 60),
        3 => "big".repeat(g.below(4000) as usize),
        _ => format!("e{}", g.below(40)),
    }
}

/// Random list operations across the inline/quicklist boundary, compared reply by reply.
#[test]
fn random_ops_match_redis() {
    random_ops(&[], 12345, 3000);
}

/// The same under other `list-max-listpack-size` fills (count-based, 0, 4 KiB, 64 KiB).
#[test]
fn random_ops_match_redis_other_fills() {
    for fill in ["4", "0", "-1", "-5"] {
        random_ops(&["--list-max-listpack-size", fill], 99, 800);
    }
}

fn random_ops(args: &[&str], seed: u64, steps: usize) {
    let (_c, _r, mut rc, mut rr) = both(args);
    let mut g = Lcg(seed);
    let keys = ["k1", "k2", "k3"];
    for step in 0..steps {
        let k = keys[g.below(3) as usize];
        let k2 = keys[g.below(3) as usize];
        let i = (g.below(40) as i64 - 20).to_string();
        let j = (g.below(400) as i64 - 100).to_string();
        let cmd: Vec<String> = match g.below(16) {
            0..=3 => {
                let n = g.below(20) + 1;
                let mut v = vec![
                    if g.below(2) == 0 { "RPUSH" } else { "LPUSH" }.to_string(),
                    k.into(),
                ];
                for _ in 0..n {
                    v.push(elem(&mut g));
                }
                v
            }
            4 => vec!["LPOP".into(), k.into(), g.below(5).to_string()],
            5 => vec!["RPOP".into(), k.into()],
            6 => vec!["LRANGE".into(), k.into(), i.clone(), j.clone()],
            7 => vec!["LINDEX".into(), k.into(), j.clone()],
            8 => vec!["LSET".into(), k.into(), i.clone(), elem(&mut g)],
            9 => vec!["LREM".into(), k.into(), i.clone(), elem(&mut g)],
            10 => vec!["LTRIM".into(), k.into(), i.clone(), j.clone()],
            11 => vec![
                "LINSERT".into(),
                k.into(),
                if g.below(2) == 0 { "BEFORE" } else { "AFTER" }.into(),
                elem(&mut g),
                elem(&mut g),
            ],
            12 => vec![
                "LPOS".into(),
                k.into(),
                elem(&mut g),
                "RANK".into(),
                if g.below(2) == 0 { "-1" } else { "2" }.into(),
                "COUNT".into(),
                g.below(4).to_string(),
            ],
            13 => vec![
                "LMOVE".into(),
                k.into(),
                k2.into(),
                "LEFT".into(),
                "RIGHT".into(),
            ],
            14 => vec![
                "LMPOP".into(),
                "2".into(),
                k.into(),
                k2.into(),
                "RIGHT".into(),
                "COUNT".into(),
                (g.below(30) + 1).to_string(),
            ],
            _ => vec!["LLEN".into(), k.into()],
        };
        let args: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        same(&mut rc, &mut rr, &args);
        if step % 500 == 0 {
            for k in keys {
                same(&mut rc, &mut rr, &[b"LRANGE", k.as_bytes(), b"0", b"-1"]);
            }
        }
    }
    for k in keys {
        same(&mut rc, &mut rr, &[b"LRANGE", k.as_bytes(), b"0", b"-1"]);
        same(&mut rc, &mut rr, &[b"OBJECT", b"ENCODING", k.as_bytes()]);
    }
}

/// DEL of a 1M-element list is O(1) on the executor (the nodes are freed in slices by
/// the cron: a lazy free, counted in INFO), and the memory comes back.
#[test]
fn big_list_del_is_lazy_and_memory_returns() {
    let c = start_cairn(&[]);
    let mut raw = Raw::connect(c.port);
    let before = used_memory(&mut raw);
    let batch: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"RPUSH", b"big"];
    args.extend(batch.iter().map(|s| s.as_bytes()));
    for _ in 0..1000 {
        raw.cmd(&args);
        raw.reply();
    }
    assert_eq!(raw.call(&["LLEN", "big"]), b":1000000\r\n");
    assert_eq!(
        raw.call(&["OBJECT", "ENCODING", "big"]),
        b"$9\r\nquicklist\r\n"
    );
    // COPY deep-copies: deleting the source leaves the copy intact.
    assert_eq!(raw.call(&["COPY", "big", "big2"]), b":1\r\n");
    let grown = used_memory(&mut raw);
    assert!(grown > before + 10_000_000, "{before} -> {grown}");
    let lazyfreed_before = raw.info_u64("memory", "lazyfreed_objects");
    assert_eq!(raw.call(&["DEL", "big"]), b":1\r\n");
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        raw.call(&["LINDEX", "big2", "999999"]),
        b"$9\r\nvalue-999\r\n"
    );
    // RENAME and MOVE hand the nodes over (no copy, nothing freed): memory stays put.
    let used_before_handover = used_memory(&mut raw);
    assert_eq!(raw.call(&["RENAME", "big2", "big3"]), b"+OK\r\n");
    assert_eq!(raw.call(&["MOVE", "big3", "1"]), b":1\r\n");
    let used_after_handover = used_memory(&mut raw);
    assert!(
        used_after_handover < used_before_handover + 1_000_000,
        "{used_before_handover} -> {used_after_handover}"
    );
    assert_eq!(raw.call(&["SELECT", "1"]), b"+OK\r\n");
    assert_eq!(raw.call(&["LLEN", "big3"]), b":1000000\r\n");
    assert_eq!(raw.call(&["LINDEX", "big3", "-1"]), b"$9\r\nvalue-999\r\n");
    assert_eq!(raw.call(&["UNLINK", "big3"]), b":1\r\n");
    // The cron frees both lists in slices; the memory comes back.
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
        let now = used_memory(&mut raw);
        if now < before + 200_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "memory not returned: {before} -> {now}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(raw.info_u64("memory", "lazyfreed_objects") >= lazyfreed_before + 2);
}

/// List and hash writes are logged, survive BGREWRITEAOF (which dumps lists and hashes)
/// and a restart; HINCRBYFLOAT replays its logged result.
#[test]
fn aof_logs_and_rewrites_collections() {
    let dir = temp_dir("colls-aof");
    let opts = ["--appendfsync", "always"];
    let script = |raw: &mut Raw| {
        let elems: Vec<String> = (0..500).map(|i| format!("e{i}")).collect();
        let mut args = vec!["RPUSH", "l"];
        args.extend(elems.iter().map(|s| s.as_str()));
        raw.call(&args);
        raw.call(&["LPUSH", "l", "head"]);
        raw.call(&["LSET", "l", "3", "three"]);
        raw.call(&["LREM", "l", "1", "e10"]);
        raw.call(&["LMOVE", "l", "l2", "LEFT", "RIGHT"]);
        raw.call(&["LTRIM", "l", "0", "300"]);
        raw.call(&["HSET", "h", "a", "1", "b", "2"]);
        raw.call(&["HINCRBYFLOAT", "h", "f", "0.1"]);
        raw.call(&["HINCRBYFLOAT", "h", "f", "0.2"]);
        raw.call(&["HDEL", "h", "b"]);
        raw.call(&["PEXPIRE", "h", "100000000"]);
        let fields: Vec<String> = (0..600).map(|i| format!("f{i}")).collect();
        let mut args = vec!["HSET", "big"];
        for f in &fields {
            args.push(f);
            args.push(f);
        }
        raw.call(&args);
    };
    let snapshot = |raw: &mut Raw| {
        let mut hk = String::from_utf8(raw.call(&["HGETALL", "big"])).unwrap();
        let mut lines: Vec<&str> = hk.split("\r\n").collect();
        lines.sort();
        let sorted = lines.join("|");
        hk.clear();
        vec![
            raw.call(&["LRANGE", "l", "0", "-1"]),
            raw.call(&["LRANGE", "l2", "0", "-1"]),
            raw.call(&["HGETALL", "h"]),
            sorted.into_bytes(),
            raw.call(&["OBJECT", "ENCODING", "big"]),
            raw.call(&["EXISTS", "h"]),
        ]
    };
    let want;
    {
        let s = start_aof(&dir, &opts);
        let mut raw = Raw::connect(s.port);
        script(&mut raw);
        want = snapshot(&mut raw);
        assert_eq!(raw.call(&["HGET", "h", "f"]), b"$3\r\n0.3\r\n");
        drop(s); // SIGKILL
    }
    {
        let s = start_aof(&dir, &opts);
        let mut raw = Raw::connect(s.port);
        assert_eq!(snapshot(&mut raw), want);
        raw.call(&["BGREWRITEAOF"]);
        wait_until(DEADLINE, "the rewrite finished", || {
            raw.info_field("persistence", "aof_rewrites") == "1"
                && raw.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        drop(s); // SIGKILL
    }
    let s = start_aof(&dir, &opts);
    let mut raw = Raw::connect(s.port);
    assert_eq!(snapshot(&mut raw), want);
    let ttl = String::from_utf8(raw.call(&["PTTL", "h"])).unwrap();
    assert!(ttl.starts_with(":9"), "{ttl}");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pushes split nodes where Redis does (its size estimate), visible in DEBUG OBJECT's
/// quicklist fields.
#[test]
fn node_layout_matches_redis() {
    for fill in ["-2", "-1", "5"] {
        let args = [
            "--enable-debug-command",
            "yes",
            "--list-max-listpack-size",
            fill,
        ];
        let (_c, _r, mut rc, mut rr) = both(&args);
        let mut g = Lcg(5);
        for _ in 0..400 {
            let n = g.below(8) + 1;
            let mut v: Vec<String> = vec![
                if g.below(2) == 0 { "RPUSH" } else { "LPUSH" }.into(),
                "l".into(),
            ];
            for _ in 0..n {
                v.push(match g.below(3) {
                    0 => format!("{}", g.below(100000)),
                    1 => "z".repeat(g.below(300) as usize + 1),
                    _ => format!("item-{}", g.below(1000)),
                });
            }
            let args: Vec<&[u8]> = v.iter().map(|s| s.as_bytes()).collect();
            same(&mut rc, &mut rr, &args);
        }
        let fields = |r: Vec<u8>| -> String {
            let s = String::from_utf8(r).unwrap();
            s[s.find("ql_nodes").unwrap()..].trim().to_string()
        };
        let a = fields(rc.call(&["DEBUG", "OBJECT", "l"]));
        let b = fields(rr.call(&["DEBUG", "OBJECT", "l"]));
        assert_eq!(a, b, "fill {fill}");
    }
}
