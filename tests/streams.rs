//! Streams: replies compared byte for byte with redis-server 7.0 (explicit IDs), blocking
//! XREAD, persistence round trips (SAVE + restart, BGREWRITEAOF + restart, DUMP/RESTORE
//! both ways with redis-server, `--export-rdb` loaded by redis-server) and hostile
//! RESTORE payloads.

mod common;
use common::*;
use std::time::Duration;

const LIMITS: &[&str] = &[
    "--stream-node-max-entries",
    "4",
    "--stream-node-max-bytes",
    "200",
];

#[test]
fn scripted_commands_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(LIMITS);
    run_script(
        &mut rc,
        &mut rr,
        &[
            "XADD s 1-1 a 1 b 2",
            "XADD s 1-1 a 1",
            "XADD s 0-0 a 1",
            "XADD s 1-* a 3 b 4",
            "XADD s 1 c 5",
            "XADD s 2-5 a 1 b 2",
            "XADD s 3-0 123 456 a 7",
            "XADD s 3-1 f",
            "XADD s NOMKSTREAM 9-9 a b",
            "XADD nope NOMKSTREAM 1-1 a b",
            "XADD s 5 5-1 x",
            "XADD s MAXLEN",
            "XADD s MAXLEN -1 * a b",
            "XADD s MAXLEN 1 MINID 1 * a b",
            "XADD s LIMIT 10 9-0 a b",
            "XADD s MAXLEN 100 LIMIT 10 9-0 a b",
            "XADD s abc a b",
            "XADD s 18446744073709551616-0 a b",
            "XLEN s",
            "XRANGE s - +",
            "XRANGE s (1-1 +",
            "XRANGE s - (3-0",
            "XRANGE s 2 3",
            "XRANGE s - + COUNT 2",
            "XRANGE s - + COUNT 0",
            "XRANGE s - + COUNT -1",
            "XRANGE s - + COUNT",
            "XRANGE s - + FOO 1",
            "XRANGE s (+ +",
            "XRANGE s - (-",
            "XRANGE s ( +",
            "XRANGE s (- +",
            "XRANGE nope - +",
            "XRANGE nope - + COUNT 0",
            "XREVRANGE s + -",
            "XREVRANGE s + - COUNT 3",
            "XREVRANGE s (3-0 -",
            "XDEL s 1-2 2-5 7-7",
            "XDEL s 1-2",
            "XDEL s bad",
            "XDEL nope bad",
            "XLEN s",
            "XRANGE s - +",
            "XINFO STREAM s",
            "XINFO STREAM s FULL",
            "XINFO STREAM s FULL COUNT 1",
            "XINFO STREAM s FULL COUNT",
            "XINFO STREAM s PARTIAL",
            "XINFO STREAM nope",
            "XSETID s 1-0",
            "XSETID s 10-0 ENTRIESADDED 1",
            "XSETID s 10-0 ENTRIESADDED 100 MAXDELETEDID 11-0",
            "XSETID s 10-0 ENTRIESADDED 100 MAXDELETEDID 9-0",
            "XSETID s 10-0 ENTRIESADDED -1",
            "XSETID nope 1-0",
            "XINFO STREAM s",
            "XADD s 10-0 a b",
            "XADD s 10-* a b",
            "XTRIM s MAXLEN 2",
            "XTRIM s",
            "XTRIM s FOO",
            "XTRIM s MAXLEN ~ 1 LIMIT 5",
            "XTRIM s MAXLEN 1 LIMIT 5",
            "XTRIM s MINID 10-1",
            "XRANGE s - +",
            "XINFO STREAM s",
            "XTRIM nope MAXLEN 1",
            "SET str v",
            "XADD str 1-1 a b",
            "XLEN str",
            "XRANGE str - +",
            "XREAD STREAMS str 0",
            "TYPE s",
            "OBJECT ENCODING s",
            "XREAD STREAMS s",
            "XREAD COUNT 1 STREAMS s nope 0 0",
            "XREAD STREAMS s nope $ $",
            "XREAD STREAMS s >",
            "XREAD GROUP g c STREAMS s 0",
            "XREAD NOACK STREAMS s 0",
            "XREAD BLOCK -1 STREAMS s 0",
            "XREAD BLOCK x STREAMS s 0",
            "XREAD FOO STREAMS s 0",
            "XADD e MAXLEN 0 1-1 a b",
            "XLEN e",
            "XINFO STREAM e",
            "XINFO STREAM e FULL",
            "EXISTS e",
            "XADD big 18446744073709551615-18446744073709551615 a b",
            "XADD big * a b",
            "XADD big2 5-18446744073709551615 a b",
            "XADD big2 5-* a b",
        ],
    );
}

#[test]
fn trimming_and_nodes_match_redis() {
    let (_c, _r, mut rc, mut rr) = both(LIMITS);
    for i in 1..=40 {
        let id = format!("{i}-0");
        let v = "x".repeat(i % 7 * 9);
        if i % 3 == 0 {
            same_str(&mut rc, &mut rr, &["XADD", "t", &id, "other", &v]);
        } else {
            same_str(&mut rc, &mut rr, &["XADD", "t", &id, "f", &v, "g", "1"]);
        }
    }
    run_script(
        &mut rc,
        &mut rr,
        &[
            "XINFO STREAM t",
            "XDEL t 5-0 6-0 7-0 8-0",
            "XINFO STREAM t",
            "XTRIM t MAXLEN ~ 30",
            "XINFO STREAM t",
            "XTRIM t MINID ~ 20",
            "XINFO STREAM t",
            "XTRIM t MINID = 22-0",
            "XINFO STREAM t FULL COUNT 0",
            "XADD t MAXLEN ~ 5 41-0 f v",
            "XINFO STREAM t",
            "XADD t MINID 39 42-0 f v",
            "XRANGE t - +",
            "XREVRANGE t + - COUNT 2",
            "XINFO STREAM t",
            // The node limits apply from the next XADD on.
            "CONFIG SET stream-node-max-entries 2",
            "CONFIG SET stream-node-max-bytes 1kb",
            "CONFIG GET stream-node-max-bytes",
            "XADD t 50-0 f v",
            "XADD t 51-0 f v",
            "XADD t 52-0 f v",
            "XINFO STREAM t",
        ],
    );
}

#[test]
fn xread_blocks_until_xadd_times_out_and_unblocks() {
    let c = start_cairn(&[]);
    let mut waiter = Raw::connect(c.port);
    let mut w = Raw::connect(c.port);
    assert_eq!(w.call(&["XADD", "s", "1-1", "a", "b"]), b"$3\r\n1-1\r\n");
    // `$`: only what is added after the read blocked.
    waiter.cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
    wait_until(Duration::from_secs(10), "the reader blocks", || {
        w.info_u64("clients", "blocked_clients") == 1
    });
    assert_eq!(w.call(&["XADD", "s", "2-1", "c", "d"]), b"$3\r\n2-1\r\n");
    assert_eq!(
        show(&waiter.reply()),
        "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nc\r\n$1\r\nd\r\n"
    );
    // A missing key, then created by XADD.
    waiter.cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"new", b"$"]);
    wait_until(Duration::from_secs(10), "the reader blocks", || {
        w.info_u64("clients", "blocked_clients") == 1
    });
    w.call(&["XADD", "new", "7-7", "k", "v"]);
    assert_eq!(
        show(&waiter.reply()),
        "*1\r\n*2\r\n$3\r\nnew\r\n*1\r\n*2\r\n$3\r\n7-7\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    );
    // Timeout.
    waiter.cmd(&[b"XREAD", b"BLOCK", b"50", b"STREAMS", b"s", b"$"]);
    assert_eq!(waiter.reply(), b"*-1\r\n");
    // CLIENT UNBLOCK, as a timeout and as an error.
    let id = show(&waiter.call(&["CLIENT", "ID"]))
        .trim_start_matches(':')
        .trim()
        .to_string();
    for (how, want) in [
        ("TIMEOUT", "*-1\r\n"),
        (
            "ERROR",
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
        ),
    ] {
        waiter.cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
        wait_until(Duration::from_secs(10), "the reader blocks", || {
            w.info_u64("clients", "blocked_clients") == 1
        });
        assert_eq!(w.call(&["CLIENT", "UNBLOCK", &id, how]), b":1\r\n");
        assert_eq!(show(&waiter.reply()), want);
    }
    // Inside MULTI a blocking read answers at once.
    w.call(&["MULTI"]);
    w.call(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    assert_eq!(w.call(&["EXEC"]), b"*1\r\n*-1\r\n");
    // A blocked read without COUNT is served at most 1000 entries (Redis 7.0's
    // XREAD_BLOCKED_DEFAULT_COUNT).
    waiter.cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]);
    wait_until(Duration::from_secs(10), "the reader blocks", || {
        w.info_u64("clients", "blocked_clients") == 1
    });
    w.call(&["MULTI"]);
    for i in 0..1002 {
        w.call(&["XADD", "s", &format!("{}-0", 100 + i), "n", &i.to_string()]);
    }
    w.call(&["EXEC"]);
    let got = show(&waiter.reply());
    assert!(got.starts_with("*1\r\n*2\r\n$1\r\ns\r\n*1000\r\n"), "{got}");
}

#[test]
fn xadd_star_is_logged_with_its_id_and_survives_restarts() {
    let dir = temp_dir("streams-aof");
    let args = ["--appendonly", "yes", "--stream-node-max-entries", "3"];
    let want;
    {
        let s = start_on(&dir, &args, &[]);
        let mut c = Raw::connect(s.port);
        for i in 0..10 {
            c.call(&["XADD", "s", "*", "i", &i.to_string()]);
        }
        c.call(&["XADD", "s", "MAXLEN", "~", "4", "*", "i", "last"]);
        c.call(&["XDEL", "s", "0-1"]);
        c.call(&[
            "XSETID",
            "s",
            "99999999999999-0",
            "ENTRIESADDED",
            "50",
            "MAXDELETEDID",
            "5-0",
        ]);
        want = (
            c.call(&["XRANGE", "s", "-", "+"]),
            c.call(&["XINFO", "STREAM", "s"]),
        );
    }
    {
        let s = start_on(&dir, &args, &[]);
        let mut c = Raw::connect(s.port);
        assert_eq!(show(&c.call(&["XRANGE", "s", "-", "+"])), show(&want.0));
        assert_eq!(show(&c.call(&["XINFO", "STREAM", "s"])), show(&want.1));
        // BGREWRITEAOF: the base holds the stream as RDB.
        c.call(&["BGREWRITEAOF"]);
        wait_until(Duration::from_secs(20), "the rewrite ends", || {
            c.info_u64("persistence", "aof_rewrite_in_progress") == 0
                && c.info_u64("persistence", "aof_rewrite_scheduled") == 0
        });
        c.call(&["XADD", "s", "99999999999999-5", "after", "rewrite"]);
    }
    let s = start_on(&dir, &args, &[]);
    let mut c = Raw::connect(s.port);
    let got = show(&c.call(&["XRANGE", "s", "-", "+"]));
    // What was there before the rewrite, then the entry added after it.
    let before = show(&want.0);
    assert!(got.starts_with("*6\r\n"), "{got}");
    assert!(got.contains(&before[4..]), "{got}");
    assert!(got.ends_with("$5\r\nafter\r\n$7\r\nrewrite\r\n"), "{got}");
    assert_eq!(c.call(&["XLEN", "s"]), b":6\r\n");
}

#[test]
fn save_and_restart_keep_streams() {
    let dir = temp_dir("streams-save");
    let args = ["--stream-node-max-entries", "2"];
    let want;
    {
        let s = start_on(&dir, &args, &[]);
        let mut c = Raw::connect(s.port);
        for i in 1..=9 {
            c.call(&["XADD", "s", &format!("{i}-0"), "i", &i.to_string()]);
        }
        c.call(&["XDEL", "s", "4-0", "1-0"]);
        c.call(&["XADD", "e", "MAXLEN", "0", "3-3", "a", "b"]);
        want = (
            c.call(&["XRANGE", "s", "-", "+"]),
            c.call(&["XINFO", "STREAM", "s", "FULL"]),
            c.call(&["XINFO", "STREAM", "e"]),
        );
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    let s = start_on(&dir, &args, &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(show(&c.call(&["XRANGE", "s", "-", "+"])), show(&want.0));
    assert_eq!(
        show(&c.call(&["XINFO", "STREAM", "s", "FULL"])),
        show(&want.1)
    );
    assert_eq!(show(&c.call(&["XINFO", "STREAM", "e"])), show(&want.2));
}

fn fill(c: &mut Raw) {
    for i in 1..=25 {
        let f = if i % 4 == 0 { "odd" } else { "f" };
        c.call(&[
            "XADD",
            "s",
            &format!("{i}-{}", i % 3),
            f,
            &"v".repeat(i),
            "n",
            &i.to_string(),
        ]);
    }
    c.call(&["XDEL", "s", "2-2", "13-1"]);
    c.call(&["XTRIM", "s", "MINID", "3"]);
}

#[test]
fn dump_restore_both_ways_with_redis() {
    let (_c, _r, mut rc, mut rr) = both(&with(LIMITS, &["--enable-debug-command", "yes"]));
    fill(&mut rc);
    fill(&mut rr);
    let from_cairn = bulk_payload(&rc.call(&["DUMP", "s"]));
    let from_redis = bulk_payload(&rr.call(&["DUMP", "s"]));
    for (raw, payload) in [(&mut rr, &from_cairn), (&mut rc, &from_redis)] {
        raw.cmd(&[b"RESTORE", b"copy", b"0", payload]);
        assert_eq!(raw.reply(), b"+OK\r\n");
    }
    run_script(
        &mut rc,
        &mut rr,
        &[
            "XRANGE copy - +",
            "XINFO STREAM copy FULL",
            "XINFO STREAM copy",
            "XADD copy 100-0 a b",
            "XRANGE copy 20 +",
            "COPY copy c2",
            "XDEL copy 100-0",
            "XRANGE c2 (25 +",
            "DEBUG DIGEST-VALUE c2",
        ],
    );
}

#[test]
fn export_rdb_is_loaded_by_redis() {
    let dir = temp_dir("streams-export");
    {
        let s = start_on(&dir, LIMITS, &[]);
        let mut c = Raw::connect(s.port);
        fill(&mut c);
        assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    }
    let rdir = temp_dir("streams-export-redis");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--export-rdb")
        .arg(dir.join("dump.cimg"))
        .arg(rdir.join("dump.rdb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out.stderr));
    let r = start_redis(&[
        "--dir",
        rdir.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let c = start_cairn(&with(LIMITS, &["--enable-debug-command", "yes"]));
    let mut rr = Raw::connect(r.port);
    let mut rc = Raw::connect(c.port);
    fill(&mut rc);
    run_script(
        &mut rc,
        &mut rr,
        &[
            "XRANGE s - +",
            "XINFO STREAM s FULL",
            "XLEN s",
            "DEBUG DIGEST",
        ],
    );
}

#[test]
fn a_redis_dump_rdb_with_streams_loads() {
    let r = start_redis(LIMITS);
    let mut rr = Raw::connect(r.port);
    fill(&mut rr);
    rr.call(&["XADD", "e", "MAXLEN", "0", "5-5", "a", "b"]);
    assert_eq!(rr.call(&["SAVE"]), b"+OK\r\n");
    let dir = temp_dir("streams-from-redis");
    std::fs::copy(r.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let c = start_on(&dir, LIMITS, &[]);
    let mut rc = Raw::connect(c.port);
    run_script(
        &mut rc,
        &mut rr,
        &[
            "XRANGE s - +",
            "XINFO STREAM s FULL",
            "XINFO STREAM e",
            "TYPE s",
            "XADD s 30-0 new entry",
            "XREVRANGE s + - COUNT 3",
        ],
    );
}

#[test]
fn hostile_restore_payloads_are_refused() {
    let c = start_cairn(&[]);
    let mut rc = Raw::connect(c.port);
    rc.call(&["XADD", "s", "1-1", "f", "v"]);
    let good = bulk_payload(&rc.call(&["DUMP", "s"]));
    // Every truncation and every single-byte change of the body: an error or a stream
    // that reads back, never a crash.
    let body_len = good.len() - 10;
    for cut in 0..body_len {
        let mut p = good[..cut].to_vec();
        p.extend_from_slice(&good[body_len..]);
        let p = fix_crc(p);
        rc.cmd(&[b"RESTORE", b"t", b"0", &p, b"REPLACE"]);
        assert_eq!(
            show(&rc.reply()),
            "-ERR Bad data format\r\n",
            "cut at {cut}"
        );
    }
    // Type 21 is type 19 plus consumers' active times: with no groups, the same body.
    let mut as21 = good.clone();
    as21[0] = 21;
    rc.cmd(&[b"RESTORE", b"t21", b"0", &fix_crc(as21)]);
    assert_eq!(rc.reply(), b"+OK\r\n");
    assert_eq!(rc.call(&["XLEN", "t21"]), b":1\r\n");
    for (ty, at, delta) in (0..body_len)
        .flat_map(|at| [1u8, 0x80, 0xff].map(|d| (19u8, at, d)))
        .chain((1..body_len).map(|at| (15u8, at, 1u8)))
        .chain((1..body_len).map(|at| (21u8, at, 0x80u8)))
    {
        {
            let mut p = good.clone();
            p[0] = ty;
            p[at] = p[at].wrapping_add(delta);
            let p = fix_crc(p);
            rc.cmd(&[b"RESTORE", b"t", b"0", &p, b"REPLACE"]);
            let r = show(&rc.reply());
            assert!(
                r == "+OK\r\n" || r.starts_with("-ERR Bad data format"),
                "{at}: {r}"
            );
            if r == "+OK\r\n" {
                rc.call(&["XRANGE", "t", "-", "+"]);
                rc.call(&["XINFO", "STREAM", "t", "FULL"]);
                rc.call(&["XADD", "t", "*", "x", "y"]);
            }
        }
    }
    // Declared counts far beyond the payload, for each stream type.
    for t in [15u8, 19, 21] {
        let mut body = vec![t, 0x80, 0x7f, 0xff, 0xff, 0xff];
        body.extend_from_slice(&[0u8; 4]);
        let p = fix_crc(with_trailer(body));
        rc.cmd(&[b"RESTORE", b"h", b"0", &p]);
        assert_eq!(show(&rc.reply()), "-ERR Bad data format\r\n", "type {t}");
    }
    assert_eq!(rc.call(&["PING"]), b"+PONG\r\n");
}

fn with_trailer(mut body: Vec<u8>) -> Vec<u8> {
    body.extend_from_slice(&[10, 0]);
    body.extend_from_slice(&[0u8; 8]);
    body
}

/// Rewrites a DUMP payload's CRC-64 over its body and version.
fn fix_crc(mut p: Vec<u8>) -> Vec<u8> {
    let n = p.len() - 8;
    let crc = cairn::persistence::rdb_value::crc64(&p[..n]);
    p[n..].copy_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn big_streams_are_copied_and_freed_lazily() {
    let c = start_cairn(&["--stream-node-max-entries", "4"]);
    let mut rc = Raw::connect(c.port);
    let before = used_memory(&mut rc);
    // 500 nodes: more blocks than the lazy-free threshold.
    let mut pipeline = Vec::new();
    for i in 1..=2000 {
        let id = format!("{i}-0");
        pipeline.extend(encode(&[b"XADD", b"s", id.as_bytes(), b"f", b"value"]));
    }
    rc.send(&pipeline);
    for _ in 0..2000 {
        rc.reply();
    }
    assert_eq!(rc.call(&["COPY", "s", "c"]), b":1\r\n");
    let mem = show(&rc.call(&["MEMORY", "USAGE", "s"]));
    let mem: u64 = mem.trim_start_matches(':').trim().parse().unwrap();
    assert!(mem > 500 * 40, "{mem}");
    assert_eq!(rc.call(&["DEL", "s"]), b":1\r\n");
    wait_until(Duration::from_secs(10), "the stream is freed", || {
        rc.info_u64("memory", "lazyfree_pending_objects") == 0
            && rc.info_u64("memory", "lazyfreed_objects") >= 1
    });
    assert_eq!(rc.call(&["XLEN", "c"]), b":2000\r\n");
    assert_eq!(
        show(&rc.call(&["XRANGE", "c", "1999", "+"])),
        "*2\r\n*2\r\n$6\r\n1999-0\r\n*2\r\n$1\r\nf\r\n$5\r\nvalue\r\n*2\r\n$6\r\n2000-0\r\n*2\r\n$1\r\nf\r\n$5\r\nvalue\r\n"
    );
    assert_eq!(rc.call(&["FLUSHALL"]), b"+OK\r\n");
    wait_memory_back(&mut rc, before);
}

#[test]
fn xadd_inside_multi_is_logged_with_its_ids() {
    // What RQ does: results stored with XADD * inside MULTI.
    let dir = temp_dir("streams-multi");
    let args = ["--appendonly", "yes"];
    let want;
    {
        let s = start_on(&dir, &args, &[]);
        let mut c = Raw::connect(s.port);
        for _ in 0..3 {
            c.call(&["MULTI"]);
            c.call(&["XADD", "results", "MAXLEN", "~", "10", "*", "status", "ok"]);
            c.call(&["EXPIRE", "results", "100000"]);
            let r = show(&c.call(&["EXEC"]));
            assert!(r.starts_with("*2\r\n$"), "{r}");
        }
        want = c.call(&["XRANGE", "results", "-", "+"]);
    }
    let s = start_on(&dir, &args, &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(show(&c.call(&["XRANGE", "results", "-", "+"])), show(&want));
    assert_eq!(c.call(&["TYPE", "results"]), b"+stream\r\n");
}

#[test]
fn a_blocked_read_is_served_like_redis() {
    let (c, r, mut wc, mut wr) = both(&[]);
    let mut bc = Raw::connect(c.port);
    let mut br = Raw::connect(r.port);
    let steps: &[(&[&str], &[&[&str]])] = &[
        // Two keys written in one transaction: the reader gets the first one only.
        (
            &["XREAD", "BLOCK", "0", "STREAMS", "a", "b", "$", "$"],
            &[
                &["MULTI"],
                &["XADD", "b", "1-1", "x", "1"],
                &["XADD", "a", "1-1", "y", "2"],
                &["EXEC"],
            ],
        ),
        // An explicit ID below what is added: everything after it, at most COUNT.
        (
            &["XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", "c", "0-0"],
            &[
                &["MULTI"],
                &["XADD", "c", "1-1", "x", "1"],
                &["XADD", "c", "2-1", "x", "2"],
                &["XADD", "c", "3-1", "x", "3"],
                &["EXEC"],
            ],
        ),
        // Added and deleted in one transaction: the key, with no entries.
        (
            &["XREAD", "BLOCK", "0", "STREAMS", "d", "$"],
            &[
                &["MULTI"],
                &["XADD", "d", "2-1", "f", "v"],
                &["XDEL", "d", "2-1"],
                &["EXEC"],
            ],
        ),
        // RESP3: a map of one stream.
        (
            &["XREAD", "BLOCK", "0", "STREAMS", "a", "$"],
            &[&["XADD", "a", "5-5", "z", "3"]],
        ),
        // The key written again below the ID waited after: the read stays blocked and
        // times out once.
        (
            &["XREAD", "BLOCK", "300", "STREAMS", "e", "$"],
            &[
                &["MULTI"],
                &["DEL", "e"],
                &["XADD", "e", "1-1", "f", "v"],
                &["EXEC"],
            ],
        ),
    ];
    for w in [&mut wc, &mut wr] {
        w.call(&["XADD", "d", "1-1", "f", "v"]);
        w.call(&["XADD", "e", "5-1", "f", "v"]);
    }
    for (i, (read, writes)) in steps.iter().enumerate() {
        if i == 3 {
            bc.call(&["HELLO", "3"]);
            br.call(&["HELLO", "3"]);
        }
        for (b, w) in [(&mut bc, &mut wc), (&mut br, &mut wr)] {
            b.cmd(&read.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
            wait_until(Duration::from_secs(10), "the reader blocks", || {
                w.info_u64("clients", "blocked_clients") == 1
            });
            for cmd in writes.iter() {
                w.call(cmd);
            }
        }
        assert_eq!(show(&bc.reply()), show(&br.reply()), "step {i}");
    }
    // Nothing is left waiting, and the server serves on.
    assert_eq!(bc.call(&["PING"]), br.call(&["PING"]));
    assert_eq!(wc.info_u64("clients", "blocked_clients"), 0);
    assert_eq!(wc.info_u64("clients", "clients_in_timeout_table"), 0);
}
