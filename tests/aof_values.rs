//! Large values in the append-only log: a SET (SETEX, PSETEX, GETSET, SET ... GET) of a
//! value of 64 KiB or more is logged by reference to the value's pinned arena block, and
//! the writer thread checksums it and writes it from the block. Acknowledged values survive kill -9 byte
//! for byte, a key changed or deleted while its entry is in flight does not change what
//! is logged, a damaged value is caught by its checksum at load, a rewrite during big
//! SETs loses nothing, and a replica receives the same bytes.

mod common;

use cairn::persistence::aof::format;
use common::{
    encode, last_incr_file as incr_file, server_log as log, start_aof as start, start_cairn,
    temp_dir, try_start_aof as try_start, wait_until, with, Lcg, Raw, DEADLINE,
};
use std::time::Duration;

/// `len` pseudo-random bytes from `seed` (no two values alike, nothing compresses).
fn value(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Lcg(seed);
    (0..len).map(|_| rng.below(256) as u8).collect()
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut b = format!("${}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

fn call(r: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    r.cmd(args);
    r.reply()
}

/// The commands of every entry in `file` (the scan must find no damage).
fn logged(file: &std::path::Path) -> Vec<Vec<Vec<u8>>> {
    let bytes = std::fs::read(file).unwrap();
    let mut cmds = Vec::new();
    let o = format::scan(&bytes, Some(1), |e| {
        cmds.push(e.args.iter().map(|a| a.to_vec()).collect());
        Ok(())
    });
    assert!(o.bad.is_none(), "{:?}", o.bad);
    cmds
}

fn wait_pins_released(r: &mut Raw) {
    wait_until(DEADLINE, "the log's pins are released", || {
        r.info_u64("persistence", "aof_pinned_values") == 0
    });
}

/// Every form that stores a big value, acknowledged under `appendfsync always`, then
/// kill -9: the restart has every value byte for byte and its expiry; the entries were
/// logged by reference (with and without I/O threads: the executor's lease and the
/// writer thread's queue).
#[test]
fn big_values_acknowledged_under_always_survive_kill_9() {
    let dir = temp_dir("aofv-kill9");
    for threads in ["1", "2"] {
        let _ = std::fs::remove_dir_all(dir.join("appendonlydir"));
        let exact = value(1, 64 << 10);
        let mb = value(2, 1 << 20);
        let (a, b, c, d, e) = (
            value(3, 300_000),
            value(4, 200_000),
            value(5, 100_000),
            value(6, 70_000),
            value(7, 65_535),
        );
        {
            let srv = start(&dir, &["--appendfsync", "always", "--io-threads", threads]);
            let mut r = Raw::connect(srv.port);
            assert_eq!(call(&mut r, &[b"SET", b"exact", &exact]), b"+OK\r\n");
            assert_eq!(call(&mut r, &[b"SET", b"small", b"v"]), b"+OK\r\n");
            assert_eq!(
                call(&mut r, &[b"SET", b"mb", &mb, b"EX", b"100000"]),
                b"+OK\r\n"
            );
            assert_eq!(call(&mut r, &[b"SETEX", b"sx", b"100000", &a]), b"+OK\r\n");
            assert_eq!(
                call(&mut r, &[b"PSETEX", b"psx", b"100000000", &b]),
                b"+OK\r\n"
            );
            assert_eq!(call(&mut r, &[b"GETSET", b"exact", &c]), bulk(&exact));
            assert_eq!(call(&mut r, &[b"SET", b"small", &d, b"GET"]), bulk(b"v"));
            // Below the threshold: copied as before.
            assert_eq!(call(&mut r, &[b"SET", b"under", &e]), b"+OK\r\n");
            // In a transaction, in another db.
            assert_eq!(call(&mut r, &[b"SELECT", b"2"]), b"+OK\r\n");
            assert_eq!(call(&mut r, &[b"MULTI"]), b"+OK\r\n");
            assert_eq!(call(&mut r, &[b"SET", b"tx", &a]), b"+QUEUED\r\n");
            assert_eq!(call(&mut r, &[b"SET", b"tx2", b"x"]), b"+QUEUED\r\n");
            assert_eq!(call(&mut r, &[b"EXEC"]), b"*2\r\n+OK\r\n+OK\r\n");
            let lsn = r.info_field("persistence", "aof_lsn");
            assert_eq!(r.info_field("persistence", "aof_durable_lsn"), lsn);
            assert_eq!(
                r.info_u64("persistence", "aof_values_by_reference"),
                7,
                "SET, SET EX, SETEX, PSETEX, GETSET, SET GET, SET in EXEC"
            );
            wait_pins_released(&mut r);
        } // SIGKILL
        let logged = logged(&incr_file(&dir));
        let pxat = logged
            .iter()
            .find(|c| c.len() == 5 && c[1] == b"mb")
            .expect("SET mb logged");
        assert_eq!(pxat[0], b"SET");
        assert_eq!(pxat[2], mb, "the logged value is the value");
        assert_eq!(pxat[3], b"PXAT");

        let srv = start(&dir, &["--io-threads", threads]);
        let mut r = Raw::connect(srv.port);
        assert_eq!(call(&mut r, &[b"GET", b"exact"]), bulk(&c));
        assert_eq!(call(&mut r, &[b"GET", b"mb"]), bulk(&mb));
        assert_eq!(call(&mut r, &[b"GET", b"sx"]), bulk(&a));
        assert_eq!(call(&mut r, &[b"GET", b"psx"]), bulk(&b));
        assert_eq!(call(&mut r, &[b"GET", b"small"]), bulk(&d));
        assert_eq!(call(&mut r, &[b"GET", b"under"]), bulk(&e));
        for k in ["mb", "sx", "psx"] {
            let ttl = String::from_utf8(r.call(&["TTL", k])).unwrap();
            let t: i64 = ttl[1..].trim().parse().unwrap();
            assert!(t > 99_000, "{k}: TTL {t}");
        }
        assert_eq!(call(&mut r, &[b"TTL", b"exact"]), b":-1\r\n");
        assert_eq!(call(&mut r, &[b"SELECT", b"2"]), b"+OK\r\n");
        assert_eq!(call(&mut r, &[b"GET", b"tx"]), bulk(&a));
        assert_eq!(call(&mut r, &[b"GET", b"tx2"]), bulk(b"x"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With the writer held before it reads the values (`DEBUG AOF-HOLD-VALUES 1`, a slow
/// writer), the key of a big SET is overwritten, deleted, and a value of the same size is
/// set elsewhere (it could take the freed block, kept resident): the log still holds each
/// value as it was set, because the block stays pinned until the writer wrote it. The
/// executor meanwhile answers other clients (it never waits for the writer).
#[test]
fn a_value_in_flight_keeps_its_bytes_when_its_key_changes() {
    let dir = temp_dir("aofv-inflight");
    let len = 1 << 20;
    let (v, w, x) = (value(11, len), value(12, len), value(13, len));
    {
        let srv = start(
            &dir,
            &["--appendfsync", "everysec", "--enable-debug-command", "yes"],
        );
        let mut ctl = Raw::connect(srv.port);
        let mut a = Raw::connect(srv.port);
        let mut b = Raw::connect(srv.port);
        assert_eq!(ctl.call(&["SET", "other", "small"]), b"+OK\r\n");
        assert_eq!(ctl.call(&["DEBUG", "AOF-HOLD-VALUES", "1"]), b"+OK\r\n");
        a.send(&encode(&[b"SET", b"k", &v]));
        wait_until(DEADLINE, "SET k is logged and pinned", || {
            ctl.info_u64("persistence", "aof_pinned_values") == 1
        });
        // The replies wait for their writes (everysec: released once written).
        let mut pipeline = encode(&[b"SET", b"k", &w]);
        pipeline.extend(encode(&[b"DEL", b"k"]));
        pipeline.extend(encode(&[b"SET", b"j", &x]));
        b.send(&pipeline);
        wait_until(DEADLINE, "the three big SETs are pinned", || {
            ctl.info_u64("persistence", "aof_pinned_values") == 3
        });
        assert_eq!(ctl.info_u64("persistence", "aof_values_by_reference"), 3);
        assert_eq!(ctl.call(&["PING"]), b"+PONG\r\n");
        assert_eq!(ctl.call(&["GET", "other"]), b"$5\r\nsmall\r\n");
        assert_eq!(ctl.call(&["DEBUG", "AOF-HOLD-VALUES", "0"]), b"+OK\r\n");
        assert_eq!(a.reply(), b"+OK\r\n");
        assert_eq!(b.reply(), b"+OK\r\n");
        assert_eq!(b.reply(), b":1\r\n");
        assert_eq!(b.reply(), b"+OK\r\n");
        wait_pins_released(&mut ctl);
    } // SIGKILL: everysec's entries were written, they are in the file.
    let sets: Vec<Vec<Vec<u8>>> = logged(&incr_file(&dir))
        .into_iter()
        .filter(|c| c[0] == b"SET" && c[1] != b"other")
        .collect();
    assert_eq!(sets.len(), 3);
    assert!(
        sets[0][1] == b"k" && sets[0][2] == v,
        "SET k v logged as set"
    );
    assert!(
        sets[1][1] == b"k" && sets[1][2] == w,
        "SET k w logged as set"
    );
    assert!(
        sets[2][1] == b"j" && sets[2][2] == x,
        "SET j x logged as set"
    );
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["EXISTS", "k"]), b":0\r\n");
    assert_eq!(call(&mut r, &[b"GET", b"j"]), bulk(&x));
    let _ = std::fs::remove_dir_all(&dir);
}

/// One flipped bit in the middle of a big value (with entries after it) fails its
/// entry's checksum at load: startup stops and says where.
#[test]
fn a_damaged_big_value_is_caught_by_its_checksum() {
    let dir = temp_dir("aofv-damage");
    let v = value(21, 500_000);
    {
        let srv = start(&dir, &["--appendfsync", "always"]);
        let mut r = Raw::connect(srv.port);
        assert_eq!(call(&mut r, &[b"SET", b"big", &v]), b"+OK\r\n");
        assert_eq!(r.call(&["SET", "after", "1"]), b"+OK\r\n");
        assert_eq!(r.info_u64("persistence", "aof_values_by_reference"), 1);
    }
    let f = incr_file(&dir);
    let mut bytes = std::fs::read(&f).unwrap();
    let at = bytes
        .windows(v.len().min(64))
        .position(|w| w == &v[..64])
        .expect("the value is in the file");
    bytes[at + v.len() / 2] ^= 0x10;
    std::fs::write(&f, &bytes).unwrap();
    assert!(try_start(&dir, &[]).is_err(), "startup must stop");
    let l = log(&dir);
    assert!(l.contains("checksum mismatch"), "{l}");
    assert!(l.contains("expected LSN 2"), "{l}"); // SELECT is LSN 1
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGREWRITEAOF (both base kinds) while a client keeps setting big values: after the
/// rewrites, a kill -9 and a restart, every acknowledged value is there byte for byte.
#[test]
fn rewrites_during_big_sets_lose_nothing() {
    for preamble in ["no", "yes"] {
        let dir = temp_dir("aofv-rewrite");
        let n = 60;
        let vals: Vec<Vec<u8>> = (0..n)
            .map(|i| value(100 + i as u64, 100_000 + i * 7_919))
            .collect();
        {
            let srv = start(
                &dir,
                &[
                    "--appendfsync",
                    "everysec",
                    "--aof-use-rdb-preamble",
                    preamble,
                ],
            );
            let port = srv.port;
            let writer = {
                let vals = vals.clone();
                std::thread::spawn(move || {
                    let mut r = Raw::connect(port);
                    for (i, v) in vals.iter().enumerate() {
                        let k = format!("big{i}");
                        assert_eq!(call(&mut r, &[b"SET", k.as_bytes(), v]), b"+OK\r\n");
                        if i % 3 == 0 {
                            // Overwritten right after (the first value stays in flight).
                            let o = format!("over{i}");
                            assert_eq!(call(&mut r, &[b"SET", o.as_bytes(), v]), b"+OK\r\n");
                            assert_eq!(call(&mut r, &[b"DEL", o.as_bytes()]), b":1\r\n");
                        }
                    }
                })
            };
            let mut r = Raw::connect(port);
            let mut done = 0;
            while !writer.is_finished() || done < 2 {
                let reply = r.call(&["BGREWRITEAOF"]);
                assert!(
                    reply.starts_with(b"+"),
                    "{}",
                    String::from_utf8_lossy(&reply)
                );
                done += 1;
                wait_until(Duration::from_secs(60), "the rewrite ends", || {
                    r.info_field("persistence", "aof_rewrite_in_progress") == "0"
                        && r.info_field("persistence", "aof_rewrite_scheduled") == "0"
                });
                assert_eq!(
                    r.info_field("persistence", "aof_last_bgrewrite_status"),
                    "ok"
                );
            }
            writer.join().unwrap();
            assert!(r.info_u64("persistence", "aof_values_by_reference") >= n as u64);
            wait_pins_released(&mut r);
        } // SIGKILL
        let srv = start(&dir, &[]);
        let mut r = Raw::connect(srv.port);
        for (i, v) in vals.iter().enumerate() {
            let k = format!("big{i}");
            assert!(
                call(&mut r, &[b"GET", k.as_bytes()]) == bulk(v),
                "{preamble}: {k} differs"
            );
        }
        assert_eq!(r.call(&["DBSIZE"]), format!(":{n}\r\n").into_bytes());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A replica of a primary with the log on receives the big values byte for byte (the
/// replication stream keeps its own copy while the log refers to the block).
#[test]
fn a_replica_receives_big_values_logged_by_reference() {
    let prim = start_cairn(&["--appendonly", "yes", "--enable-debug-command", "yes"]);
    let rep = start_cairn(&with(
        &["--enable-debug-command", "yes"],
        &["--replicaof", &format!("127.0.0.1 {}", prim.port)],
    ));
    let mut p = Raw::connect(prim.port);
    let mut r = Raw::connect(rep.port);
    wait_until(Duration::from_secs(30), "the replica is online", || {
        r.info("replication", "master_link_status").as_deref() == Some("up")
    });
    let vals: Vec<Vec<u8>> = (0..8)
        .map(|i| value(200 + i, 70_000 + 40_000 * i as usize))
        .collect();
    for (i, v) in vals.iter().enumerate() {
        let k = format!("v{i}");
        assert_eq!(
            call(&mut p, &[b"SET", k.as_bytes(), v, b"PX", b"100000000"]),
            b"+OK\r\n"
        );
        // Overwritten at once: the stream must still carry the first value.
        assert_eq!(
            call(
                &mut p,
                &[b"SETEX", k.as_bytes(), b"100000", &vals[(i + 1) % 8]]
            ),
            b"+OK\r\n"
        );
    }
    assert_eq!(p.info_u64("persistence", "aof_values_by_reference"), 16);
    wait_until(Duration::from_secs(30), "the replica catches up", || {
        r.info("replication", "slave_repl_offset") == p.info("replication", "master_repl_offset")
    });
    for i in 0..8 {
        let k = format!("v{i}");
        assert!(
            call(&mut r, &[b"GET", k.as_bytes()]) == bulk(&vals[(i + 1) % 8]),
            "{k} differs on the replica"
        );
    }
    assert_eq!(p.call(&["DEBUG", "DIGEST"]), r.call(&["DEBUG", "DIGEST"]));
}
