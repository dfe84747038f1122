//! Replication with cairn as the primary: Debian's redis-server 7 and cairn as the
//! replica (full sync by image and in both RDB forms, the stream with expiries,
//! transactions, scripts and blocking pops, partial resync after a dropped link, writes
//! during the capture), `redis-cli --rdb`, WAIT, ROLE, INFO replication; bad input on the
//! replication commands, damaged images and RDBs from a primary, a replica past its
//! output limit.

mod common;
use common::*;
use std::io::Read;
use std::time::Duration;

const DEBUG: &[&str] = &["--enable-debug-command", "yes"];

fn digest(c: &mut Raw) -> String {
    show(&c.call(&["DEBUG", "DIGEST"]))
}

/// Waits until the replica has applied everything the primary has produced, then
/// checks that both hold the same data.
fn wait_synced(p: &mut Raw, r: &mut Raw) {
    wait_until(Duration::from_secs(30), "the replica catches up", || {
        r.info("replication", "master_link_status").as_deref() == Some("up")
            && r.info("replication", "slave_repl_offset")
                == p.info("replication", "master_repl_offset")
    });
    assert_eq!(digest(p), digest(r), "the replica holds the primary's data");
}

/// `n` keys `k<i>` of `value_bytes` distinct pseudo-random letters, written in pipelined
/// batches (cairn has no DEBUG POPULATE).
fn populate(port: u16, n: usize, value_bytes: usize) {
    let mut c = Raw::connect(port);
    let mut rng = Lcg(n as u64);
    let mut i = 0;
    while i < n {
        let batch = (n - i).min(1000);
        let mut bytes = Vec::new();
        for j in i..i + batch {
            let v: Vec<u8> = (0..value_bytes)
                .map(|_| b'a' + rng.below(26) as u8)
                .collect();
            bytes.extend_from_slice(&encode(&[b"SET", format!("k{j}").as_bytes(), &v]));
        }
        c.send(&bytes);
        for _ in 0..batch {
            assert_eq!(c.reply(), b"+OK\r\n");
        }
        i += batch;
    }
}

fn start_replica_of(port: u16, extra: &[&str]) -> ServerProc {
    let p = port.to_string();
    let mut args = vec![
        "--replicaof",
        "127.0.0.1",
        p.as_str(),
        "--enable-debug-command",
        "yes",
    ];
    args.extend_from_slice(extra);
    start_redis(&args)
}

/// Keys of every kind, in two databases, with a TTL, and values past the out-of-line
/// size: distinct bytes (nothing compresses them).
fn fill(c: &mut Raw, n: usize) {
    let mut rng = Lcg(7);
    for i in 0..n {
        let v: String = (0..(16 + i % 300))
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        c.call(&["SET", &format!("s{i}"), &v]);
    }
    c.call(&["HSET", "h", "f", "v", "g", "w"]);
    c.call(&["RPUSH", "l", "1", "2", "3"]);
    c.call(&["ZADD", "z", "1", "a", "2.5", "b"]);
    c.call(&["SADD", "set", "x", "y"]);
    c.call(&["XADD", "st", "1-1", "f", "v"]);
    c.call(&["PFADD", "hll", "a", "b", "c"]);
    c.call(&["SET", "ttl", "v", "EX", "1000"]);
    let big: String = (0..200_000)
        .map(|_| (b'a' + rng.below(26) as u8) as char)
        .collect();
    c.call(&["SET", "big", &big]);
    c.call(&["SELECT", "3"]);
    c.call(&["SET", "in3", "x"]);
    c.call(&["SELECT", "0"]);
}

#[test]
fn a_redis_replica_follows_a_cairn_primary() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    fill(&mut p, 500);
    let rep = start_replica_of(prim.port, &[]);
    let mut r = Raw::connect(rep.port);
    wait_synced(&mut p, &mut r);
    assert_eq!(r.call(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(r.call(&["GET", "in3"]), b"$1\r\nx\r\n");
    r.call(&["SELECT", "0"]);
    // The stream: writes in several dbs, a transaction, a script's effects, a served
    // blocking pop, an expiry (sent as DEL), a random command (SPOP) as its effect.
    let mut b = Raw::connect(prim.port);
    b.cmd(&[b"BLPOP", b"q", b"0"]);
    wait_until(Duration::from_secs(10), "the pop blocks", || {
        p.info_u64("clients", "blocked_clients") == 1
    });
    p.call(&["LPUSH", "q", "a", "b"]);
    assert_eq!(show(&b.reply()), "*2\r\n$1\r\nq\r\n$1\r\nb\r\n");
    p.call(&["SELECT", "5"]);
    p.call(&["INCRBY", "c5", "7"]);
    p.call(&["SELECT", "0"]);
    p.call(&["MULTI"]);
    p.call(&["INCR", "ctr"]);
    p.call(&["SADD", "set", "z"]);
    assert_eq!(show(&p.call(&["EXEC"])), "*2\r\n:1\r\n:1\r\n");
    p.call(&[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])",
        "2",
        "from-script",
        "n",
        "v",
    ]);
    p.call(&["SPOP", "set"]);
    p.call(&["SET", "short", "v", "PX", "50"]);
    wait_until(Duration::from_secs(10), "the key expires", || {
        p.call(&["EXISTS", "short"]) == b":0\r\n"
    });
    wait_synced(&mut p, &mut r);
    assert_eq!(r.call(&["EXISTS", "short"]), b":0\r\n");
    // ROLE and INFO name the replica; CLIENT LIST shows its link as `S`.
    let role = show(&p.call(&["ROLE"]));
    assert!(role.starts_with("*3\r\n$6\r\nmaster\r\n:"), "{role}");
    assert!(
        role.contains(&format!(
            "$9\r\n127.0.0.1\r\n${}\r\n{}\r\n",
            rep.port.to_string().len(),
            rep.port
        )),
        "{role}"
    );
    assert_eq!(p.info_u64("replication", "connected_slaves"), 1);
    let slave0 = p.info_field("replication", "slave0");
    assert!(
        slave0.starts_with(&format!(
            "ip=127.0.0.1,port={},state=online,offset=",
            rep.port
        )),
        "{slave0}"
    );
    assert_eq!(p.info_u64("replication", "repl_backlog_active"), 1);
    assert_eq!(p.info_u64("stats", "sync_full"), 1);
    let list = show(&p.call(&["CLIENT", "LIST", "TYPE", "replica"]));
    assert_eq!(list.matches("flags=S").count(), 1, "{list}");
    // WAIT: the replica acknowledges this client's last write.
    p.call(&["SET", "w", "1"]);
    assert_eq!(p.call(&["WAIT", "1", "5000"]), b":1\r\n");
    // Two replicas asked for, one exists: the timeout answers the count.
    assert_eq!(p.call(&["WAIT", "2", "200"]), b":1\r\n");
    assert_eq!(p.info_u64("clients", "clients_in_timeout_table"), 0);
}

/// A dropped link continues from the backlog (`+CONTINUE`), with what was written while
/// it was down; a replica that asks after the backlog moved on syncs fully.
#[test]
fn a_dropped_link_resyncs_partially_from_the_backlog() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    fill(&mut p, 50);
    let rep = start_replica_of(prim.port, &[]);
    let mut r = Raw::connect(rep.port);
    wait_synced(&mut p, &mut r);
    for round in 0..3 {
        assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
        for i in 0..20 {
            p.call(&["SET", &format!("while-down-{round}-{i}"), "v"]);
        }
        wait_synced(&mut p, &mut r);
    }
    assert_eq!(p.info_u64("stats", "sync_partial_ok"), 3);
    assert_eq!(p.info_u64("stats", "sync_full"), 1);
    // An offset the backlog no longer holds, or another id: a full sync.
    p.call(&["CONFIG", "SET", "repl-backlog-size", "100"]);
    for i in 0..50 {
        p.call(&["SET", &format!("later-{i}"), "0123456789"]);
    }
    wait_until(Duration::from_secs(10), "the backlog shrinks", || {
        p.info_u64("replication", "repl_backlog_histlen") == 100
    });
    let replid = p.info_field("replication", "master_replid");
    // (Redis counts both as failed partial resyncs.)
    for id in [replid.as_str(), "0123456789012345678901234567890123456789"] {
        let before = p.info_u64("stats", "sync_partial_err");
        let mut s = Raw::connect(prim.port);
        s.send(format!("PSYNC {id} 20\r\n").as_bytes());
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            s.s.read_exact(&mut byte).unwrap();
            if byte[0] != b'\n' || !line.is_empty() {
                line.push(byte[0]);
            }
        }
        assert!(
            show(&line).starts_with(&format!("+FULLRESYNC {replid} ")),
            "{}",
            show(&line)
        );
        assert_eq!(p.info_u64("stats", "sync_partial_err"), before + 1);
    }
    wait_synced(&mut p, &mut r);
}

/// Writes that arrive while the capture runs land exactly once on the replica: the
/// stream it gets starts at the capture's cut, in every payload form: the snapshot image
/// (to a cairn replica, which loads this binary's images, under `repl-image-sync yes`),
/// and both RDB forms (`$EOF:` when the replica takes it and `repl-diskless-sync` is on,
/// `$<len>` otherwise), to cairn and Redis replicas.
#[test]
fn writes_during_the_capture_reach_the_replica_once() {
    for (replica, image, diskless) in [
        ("cairn", "yes", "no"),
        ("cairn", "no", "yes"),
        ("redis", "yes", "yes"),
        ("redis", "yes", "no"),
    ] {
        let prim = start_cairn(&with(
            DEBUG,
            &["--repl-image-sync", image, "--repl-diskless-sync", diskless],
        ));
        let mut p = Raw::connect(prim.port);
        // Enough data that the capture takes a while next to the writer.
        populate(prim.port, 200_000, 100);
        let port = prim.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let writer = std::thread::spawn(move || {
            let mut w = Raw::connect(port);
            let mut i = 0u64;
            while !s2.load(std::sync::atomic::Ordering::SeqCst) && i < 200_000 {
                w.call(&["INCR", "counter"]);
                w.call(&["RPUSH", "log", &i.to_string()]);
                i += 1;
            }
            i
        });
        let rep = if replica == "cairn" {
            start_cairn(&with(
                DEBUG,
                &["--replicaof", &format!("127.0.0.1 {}", prim.port)],
            ))
        } else {
            start_replica_of(prim.port, &[])
        };
        let mut r = Raw::connect(rep.port);
        wait_until(Duration::from_secs(60), "the replica is online", || {
            r.info("replication", "master_link_status").as_deref() == Some("up")
        });
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let n = writer.join().unwrap();
        wait_synced(&mut p, &mut r);
        assert_eq!(
            show(&r.call(&["GET", "counter"])),
            show(&bulk(n.to_string().as_bytes()))
        );
        assert_eq!(r.call(&["LLEN", "log"]), format!(":{n}\r\n").into_bytes());
        // The form the payload took, as each side logged it.
        let (sent, received) = match (replica, image, diskless) {
            ("cairn", "yes", _) => ("target: disk (snapshot image)", "as it is taken"),
            (_, _, "yes") => ("target: replicas sockets", "streamed RDB"),
            _ => ("target: disk\n", "bytes from master to"),
        };
        assert!(prim.log().contains(sent), "{}", prim.log());
        assert!(rep.log().contains(received), "{}", rep.log());
        drop(rep);
        drop(prim);
    }
}

/// `redis-cli --rdb` (SYNC with `rdb-only`) writes an RDB that redis-server loads, and
/// its link closes after the RDB (no stream follows).
#[test]
fn redis_cli_rdb_gets_a_loadable_dump() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    fill(&mut p, 100);
    let want = digest(&mut p);
    let dir = temp_dir("cli-rdb");
    let out = dir.join("dump.rdb");
    let status = std::process::Command::new("redis-cli")
        .args(["-p", &prim.port.to_string(), "--rdb"])
        .arg(&out)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("redis-cli");
    assert!(status.status.success(), "{}", show(&status.stderr));
    let loaded = start_redis(&[
        "--dbfilename",
        "dump.rdb",
        "--dir",
        dir.to_str().unwrap(),
        "--enable-debug-command",
        "yes",
    ]);
    let mut l = Raw::connect(loaded.port);
    assert_eq!(digest(&mut l), want);
    assert_eq!(p.info_u64("replication", "connected_slaves"), 0);
}

/// SYNC without `capa eof`: the payload is `$<len>\r\n` and exactly that many RDB bytes,
/// with no `+FULLRESYNC` line, then the stream.
#[test]
fn sync_sends_a_sized_rdb_then_the_stream() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    p.call(&["SET", "a", "1"]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", prim.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    use std::io::Write;
    s.write_all(b"SYNC\r\n").unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    // Newlines may come first (keepalive while the capture runs).
    loop {
        s.read_exact(&mut byte).unwrap();
        if byte[0] == b'\n' && got.is_empty() {
            continue;
        }
        got.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    let head = show(&got);
    assert!(head.starts_with('$') && head.ends_with("\r\n"), "{head:?}");
    let len: usize = head[1..head.len() - 2].parse().expect("a length");
    let mut rdb = vec![0u8; len];
    s.read_exact(&mut rdb).unwrap();
    assert!(rdb.starts_with(b"REDIS0010"), "{:?}", &rdb[..9]);
    p.call(&["SET", "after", "x"]);
    let want = encode(&[b"SET", b"after", b"x"]);
    let mut stream = Vec::new();
    let mut buf = [0u8; 4096];
    while !stream.windows(want.len()).any(|w| w == want.as_slice()) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the link closed; got {:?}", show(&stream));
        stream.extend_from_slice(&buf[..n]);
    }
    // PINGs may come first; the first command of the stream says its db.
    let ping = encode(&[b"PING"]);
    let mut rest: &[u8] = &stream;
    while rest.starts_with(&ping) {
        rest = &rest[ping.len()..];
    }
    assert!(
        rest.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"),
        "{:?}",
        show(&stream)
    );
}

/// Replication commands with bad arguments answer Redis's errors; a link that closes in
/// the middle of its RDB leaves the server serving and able to sync the next replica.
#[test]
fn bad_replication_input_gets_errors_and_the_server_serves_on() {
    let prim = start_cairn(&with(DEBUG, &["--repl-diskless-sync", "no"]));
    let mut p = Raw::connect(prim.port);
    assert_eq!(
        show(&p.call(&["REPLCONF", "listening-port"])),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        show(&p.call(&["REPLCONF", "nonsense", "1"])),
        "-ERR Unrecognized REPLCONF option: nonsense\r\n"
    );
    assert_eq!(
        show(&p.call(&["REPLCONF", "listening-port", "x"])),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        show(&p.call(&["REPLCONF", "rdb-only", "2"])),
        "-ERR value is out of range, value must between 0 and 1\r\n"
    );
    assert_eq!(show(&p.call(&["REPLCONF", "capa", "whatever"])), "+OK\r\n");
    // ACK never answers (from a client that is no replica it changes nothing either).
    p.cmd(&[b"REPLCONF", b"ack", b"10"]);
    assert_eq!(p.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        show(&p.call(&["WAIT", "x", "0"])),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        show(&p.call(&["WAIT", "1", "-1"])),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(p.call(&["WAIT", "0", "0"]), b":0\r\n");
    assert_eq!(show(&p.call(&["REPLICAOF", "NO", "ONE"])), "+OK\r\n");
    assert_eq!(
        show(&p.call(&["REPLICAOF", "127.0.0.1", "x"])),
        "-ERR Invalid master port\r\n"
    );
    // A primary nobody answers for: the link stays down, the server serves (reads), and
    // NO ONE makes it a primary again.
    let nobody = free_port().to_string();
    assert_eq!(p.call(&["REPLICAOF", "127.0.0.1", &nobody]), b"+OK\r\n");
    assert_eq!(p.info_field("replication", "master_link_status"), "down");
    assert_eq!(p.call(&["PING"]), b"+PONG\r\n");
    // With `replica-serve-stale-data no` only `stale` commands run while the link is down.
    assert_eq!(
        p.call(&["SET", "stale", "1"]),
        b"-READONLY You can't write against a read only replica.\r\n".to_vec()
    );
    assert_eq!(
        p.call(&["CONFIG", "SET", "replica-serve-stale-data", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(
        show(&p.call(&["GET", "stale"])),
        "-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.\r\n"
    );
    assert_eq!(p.info_field("replication", "master_link_status"), "down");
    assert_eq!(
        p.call(&["CONFIG", "SET", "replica-serve-stale-data", "yes"]),
        b"+OK\r\n"
    );
    assert_eq!(p.call(&["GET", "stale"]), b"$-1\r\n");
    assert_eq!(p.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(p.info_field("replication", "role"), "master");
    assert_eq!(show(&p.call(&["MULTI"])), "+OK\r\n");
    assert_eq!(
        show(&p.call(&["PSYNC", "?", "-1"])),
        "-ERR Command not allowed inside a transaction\r\n"
    );
    p.call(&["DISCARD"]);
    // A replica that goes away halfway through a big RDB.
    populate(prim.port, 100_000, 200);
    for _ in 0..3 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", prim.port)).unwrap();
        use std::io::Write;
        s.write_all(b"PSYNC garbage notanumber\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut some = [0u8; 4096];
        let mut total = 0;
        while total < 100_000 {
            let n = s.read(&mut some).unwrap();
            assert!(n > 0);
            total += n;
        }
        drop(s);
    }
    assert_eq!(p.call(&["PING"]), b"+PONG\r\n");
    let rep = start_replica_of(prim.port, &[]);
    let mut r = Raw::connect(rep.port);
    wait_synced(&mut p, &mut r);
    assert_eq!(p.info_u64("replication", "connected_slaves"), 1);
}

/// `min-replicas-to-write`: writes (and scripts' writes) are refused until enough
/// replicas acknowledge within `min-replicas-max-lag`, and again once they stop.
#[test]
fn writes_wait_for_enough_good_replicas() {
    let prim = start_cairn(&with(
        DEBUG,
        &[
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "2",
        ],
    ));
    let mut p = Raw::connect(prim.port);
    let refused = "-NOREPLICAS Not enough good replicas to write.\r\n";
    assert_eq!(show(&p.call(&["SET", "a", "1"])), refused);
    let script = show(&p.call(&["EVAL", "return redis.call('set', 'a', '1')", "0"]));
    assert!(
        script.starts_with("-NOREPLICAS Not enough good replicas to write."),
        "{script}"
    );
    assert_eq!(p.call(&["GET", "a"]), b"$-1\r\n", "reads go on");
    let rep = start_replica_of(prim.port, &[]);
    wait_until(Duration::from_secs(30), "a good replica", || {
        p.info("replication", "min_slaves_good_slaves").as_deref() == Some("1")
    });
    assert_eq!(p.call(&["SET", "a", "1"]), b"+OK\r\n");
    // The replica stops acknowledging: after the lag, writes are refused again.
    let mut r = Raw::connect(rep.port);
    r.cmd(&[b"DEBUG", b"SLEEP", b"4"]);
    wait_until(
        Duration::from_secs(30),
        "the replica is no longer good",
        || p.info("replication", "min_slaves_good_slaves").as_deref() == Some("0"),
    );
    assert_eq!(show(&p.call(&["SET", "b", "1"])), refused);
}

/// A replica that stops acknowledging for `repl-timeout` is disconnected.
#[test]
fn a_silent_replica_is_disconnected_after_repl_timeout() {
    let prim = start_cairn(&with(DEBUG, &["--repl-timeout", "1"]));
    let mut p = Raw::connect(prim.port);
    p.call(&["SET", "a", "1"]);
    let mut s = Raw::connect(prim.port);
    s.send(b"PSYNC ? -1\r\n");
    wait_until(Duration::from_secs(10), "the replica is online", || {
        p.info("replication", "slave0")
            .is_some_and(|l| l.contains("state=online"))
    });
    assert!(s.closed(), "the silent replica's link is closed");
    assert_eq!(p.info_u64("replication", "connected_slaves"), 0);
}

/// The stream's usual traffic on `p`: several dbs, a transaction, a script, a served
/// blocking pop, an expiry.
fn traffic(p: &mut Raw, port: u16) {
    let mut b = Raw::connect(port);
    b.cmd(&[b"BLPOP", b"q", b"0"]);
    wait_until(Duration::from_secs(10), "the pop blocks", || {
        p.info_u64("clients", "blocked_clients") == 1
    });
    p.call(&["LPUSH", "q", "a", "b"]);
    b.reply();
    p.call(&["SELECT", "5"]);
    p.call(&["INCRBY", "c5", "7"]);
    p.call(&["SELECT", "0"]);
    p.call(&["MULTI"]);
    p.call(&["INCR", "ctr"]);
    p.call(&["SADD", "set", "z"]);
    p.call(&["EXEC"]);
    p.call(&[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])",
        "2",
        "from-script",
        "n",
        "v",
    ]);
    p.call(&["SET", "short", "v", "PX", "50"]);
    wait_until(Duration::from_secs(10), "the key expires", || {
        p.call(&["EXISTS", "short"]) == b":0\r\n"
    });
}

/// cairn as the replica of Debian's redis-server 7, in both RDB forms: the full sync,
/// the stream, READONLY, ROLE/INFO, a partial resync after the link drops, and
/// REPLICAOF NO ONE keeping the data.
#[test]
fn cairn_follows_a_redis_primary() {
    for diskless in ["yes", "no"] {
        let prim = start_redis(&[
            "--enable-debug-command",
            "yes",
            "--repl-diskless-sync",
            diskless,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let mut p = Raw::connect(prim.port);
        fill(&mut p, 300);
        let port = prim.port.to_string();
        let rep = start_cairn(&with(DEBUG, &["--replicaof", &format!("127.0.0.1 {port}")]));
        let mut r = Raw::connect(rep.port);
        wait_synced(&mut p, &mut r);
        traffic(&mut p, prim.port);
        wait_synced(&mut p, &mut r);
        assert_eq!(
            show(&r.call(&["SET", "x", "1"])),
            "-READONLY You can't write against a read only replica.\r\n"
        );
        assert_eq!(
            show(&r.call(&["ROLE"])),
            format!(
                "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$9\r\nconnected\r\n:{}\r\n",
                r.info_field("replication", "slave_repl_offset")
            )
        );
        assert_eq!(r.info_field("replication", "role"), "slave");
        assert_eq!(
            p.call(&["WAIT", "1", "5000"]),
            b":1\r\n",
            "the replica acknowledges"
        );
        // The link drops: the replica continues from its offset.
        assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
        p.call(&["SET", "while-down", "1"]);
        wait_synced(&mut p, &mut r);
        assert_eq!(p.info_u64("stats", "sync_partial_ok"), 1);
        assert_eq!(p.info_u64("stats", "sync_full"), 1);
        // Promoted: writable, same data.
        let before = digest(&mut r);
        assert_eq!(r.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
        assert_eq!(digest(&mut r), before);
        assert_eq!(r.call(&["SET", "x", "1"]), b"+OK\r\n");
        assert_eq!(r.info_field("replication", "role"), "master");
    }
}

/// cairn replicating cairn: full sync, stream, partial resync, and a second replica
/// joining later.
#[test]
fn cairn_follows_a_cairn_primary() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    fill(&mut p, 300);
    let rep = start_cairn(DEBUG);
    let mut r = Raw::connect(rep.port);
    assert_eq!(
        r.call(&["REPLICAOF", "127.0.0.1", &prim.port.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(
        show(&r.call(&["REPLICAOF", "127.0.0.1", &prim.port.to_string()])),
        "+OK Already connected to specified master\r\n"
    );
    wait_synced(&mut p, &mut r);
    traffic(&mut p, prim.port);
    wait_synced(&mut p, &mut r);
    assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    p.call(&["SET", "while-down", "1"]);
    wait_synced(&mut p, &mut r);
    assert_eq!(p.info_u64("stats", "sync_partial_ok"), 1);
    let rep2 = start_cairn(&with(
        DEBUG,
        &["--replicaof", &format!("127.0.0.1 {}", prim.port)],
    ));
    let mut r2 = Raw::connect(rep2.port);
    wait_synced(&mut p, &mut r2);
    assert_eq!(p.info_u64("replication", "connected_slaves"), 2);
}

/// INFO's replication byte counters: the primary counts what it wrote to its replica (the
/// image and the stream) apart from its other output; the replica counts what it read from
/// its primary, which is that plus the handshake's replies.
#[test]
fn replication_bytes_are_counted_on_both_sides() {
    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    populate(prim.port, 2000, 200);
    assert_eq!(p.info_u64("stats", "total_net_repl_output_bytes"), 0);
    let rep = start_cairn(DEBUG);
    let mut r = Raw::connect(rep.port);
    assert_eq!(r.info_u64("stats", "total_net_repl_input_bytes"), 0);
    r.call(&["REPLICAOF", "127.0.0.1", &prim.port.to_string()]);
    wait_synced(&mut p, &mut r);
    p.call(&["SET", "after", "x"]);
    wait_synced(&mut p, &mut r);
    // 2000 × 200 B of distinct letters went out at least once (image, then stream).
    let out = p.info_u64("stats", "total_net_repl_output_bytes");
    assert!(out >= 400_000, "primary's replication output {out}");
    wait_until(Duration::from_secs(10), "the replica read it all", || {
        let input = r.info_u64("stats", "total_net_repl_input_bytes");
        let out = p.info_u64("stats", "total_net_repl_output_bytes");
        input >= out && input < out + 4096
    });
    // The replica's own clients' traffic is not replication input.
    assert_eq!(r.info_u64("stats", "total_net_repl_output_bytes"), 0);
}

/// A primary of 100k keys whose capture is slowed (`rdb-key-save-delay`: a pause after
/// each record) and a cairn replica told to follow it, returned once the replica has read
/// `min_bytes` of the image.
fn replica_reading_a_slowed_capture(min_bytes: u64) -> (ServerProc, Raw, ServerProc, Raw) {
    let prim = start_cairn(&with(DEBUG, &["--rdb-key-save-delay", "100000"]));
    let p = Raw::connect(prim.port);
    populate(prim.port, 100_000, 200);
    let rep = start_cairn(DEBUG);
    let mut r = Raw::connect(rep.port);
    r.call(&["REPLICAOF", "127.0.0.1", &prim.port.to_string()]);
    wait_until(
        Duration::from_secs(60),
        "image bytes reach the replica",
        || r.info_u64("stats", "total_net_repl_input_bytes") >= min_bytes,
    );
    (prim, p, rep, r)
}

/// A cairn replica gets the image while the primary still captures it: the sender
/// follows the capture file as it is written. With the capture slowed
/// (`rdb-key-save-delay`, a pause after each record), the replica has read megabytes of
/// it before the primary logs the capture's end ("Background RDB transfer started");
/// then it loads the whole image and holds the primary's data.
#[test]
fn the_image_reaches_the_replica_while_it_is_captured() {
    let (prim, mut p, rep, mut r) = replica_reading_a_slowed_capture(2 << 20);
    assert!(
        !prim.log().contains("Background RDB transfer started"),
        "the capture ended before its bytes went out: {}",
        prim.log()
    );
    wait_synced(&mut p, &mut r);
    assert!(prim.log().contains("Background RDB transfer started"));
    assert!(rep.log().contains("as it is taken"), "{}", rep.log());
    // Under the default `snapshot-mode auto` a streamed capture is freeze-free
    // (copy-before-write) from the start: a switch from live passes midway would drop what
    // was already sent.
    assert!(
        prim.log().contains("Snapshot (copy-before-write)") && !prim.log().contains("switching to"),
        "{}",
        prim.log()
    );
}

/// The link drops while the image streams: the primary closes the replica and the
/// replica's retry gets the next capture; it ends with the primary's data, writes made
/// meanwhile included.
#[test]
fn a_link_dropped_mid_image_is_retried_with_a_new_capture() {
    let (prim, mut p, rep, mut r) = replica_reading_a_slowed_capture(1 << 20);
    assert!(!prim.log().contains("Background RDB transfer started"));
    p.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    for i in 0..100 {
        p.call(&["SET", &format!("during{i}"), "x"]);
    }
    wait_until(Duration::from_secs(60), "the replica retried", || {
        rep.log()
            .contains("Failed trying to load the MASTER synchronization image")
    });
    wait_synced(&mut p, &mut r);
    assert_eq!(show(&r.call(&["GET", "during99"])), "$1\r\nx\r\n");
}

/// Every member of a streamed capture left: the primary cancels it then (Redis's "last
/// replica dropped" line) instead of running it to its end for nobody, and the replica's
/// retry gets a fresh capture at once (unslowed: the delay is read when a capture
/// starts). The first capture never reached its end, and the replica ends with the
/// primary's data.
#[test]
fn a_capture_whose_last_replica_dropped_is_cancelled_and_the_retry_gets_a_new_one() {
    let (prim, mut p, _rep, mut r) = replica_reading_a_slowed_capture(1 << 20);
    assert!(!prim.log().contains("Background RDB transfer started"));
    p.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    wait_until(
        Duration::from_secs(20),
        "the primary cancels the capture",
        || {
            prim.log()
                .contains("Diskless rdb transfer, last replica dropped, cancelling the capture.")
        },
    );
    for i in 0..100 {
        p.call(&["SET", &format!("during{i}"), "x"]);
    }
    wait_synced(&mut p, &mut r);
    assert_eq!(show(&r.call(&["GET", "during99"])), "$1\r\nx\r\n");
    let log = prim.log();
    let cancelled = log.find("last replica dropped").expect("the cancel line");
    assert!(
        !log[..cancelled].contains("Background RDB transfer started"),
        "the first capture ran to its end: {log}"
    );
    assert_eq!(log.matches("Starting BGSAVE for SYNC").count(), 2, "{log}");
    assert_eq!(
        log.matches("Background RDB transfer started").count(),
        1,
        "{log}"
    );
}

/// `masterauth`: the replica authenticates to a primary with a password; a wrong one
/// leaves the link down (retried) while the replica serves on.
#[test]
fn the_replica_authenticates_with_masterauth() {
    let prim = start_redis(&[
        "--requirepass",
        "s3cret",
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let mut p = Raw::connect(prim.port);
    assert_eq!(p.call(&["AUTH", "s3cret"]), b"+OK\r\n");
    p.call(&["SET", "a", "1"]);
    let target = format!("127.0.0.1 {}", prim.port);
    let bad = start_cairn(&with(
        DEBUG,
        &["--replicaof", &target, "--masterauth", "wrong"],
    ));
    let good = start_cairn(&with(
        DEBUG,
        &["--replicaof", &target, "--masterauth", "s3cret"],
    ));
    let mut g = Raw::connect(good.port);
    wait_synced(&mut p, &mut g);
    let mut b = Raw::connect(bad.port);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.info_field("replication", "master_link_status"), "down");
    assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(b.call(&["DBSIZE"]), b":0\r\n");
}

/// A full sync replaces the replica's dataset only once no queued reply references the
/// old one: a client that has not read its big replies holds the swap back (the stream
/// waits behind it, in order), gets every byte of the value intact, and then the replica
/// installs the primary's data.
#[test]
fn a_full_sync_waits_for_replies_that_reference_the_old_dataset() {
    let rep = start_cairn(DEBUG);
    let mut r = Raw::connect(rep.port);
    let mut rng = Lcg(99);
    let big: Vec<u8> = (0..4 << 20).map(|_| b'a' + rng.below(26) as u8).collect();
    assert_eq!(call_b(&mut r, &[b"SET", b"big", &big]), b"+OK\r\n");
    // 16 replies of 4 MiB, unread: far more than the socket buffers hold, so the rest
    // stay queued as references into the replica's arena.
    let mut slow = Raw::connect(rep.port);
    let mut pipeline = Vec::new();
    for _ in 0..16 {
        pipeline.extend_from_slice(&encode(&[b"GET", b"big"]));
    }
    slow.send(&pipeline);
    wait_until(
        Duration::from_secs(30),
        "the big replies are queued",
        || {
            r.call(&["CLIENT", "LIST"])
                .split(|&b| b == b'\n')
                .any(|l| show(l).contains("cmd=get"))
        },
    );

    let prim = start_cairn(DEBUG);
    let mut p = Raw::connect(prim.port);
    fill(&mut p, 50);
    assert_eq!(
        r.call(&["REPLICAOF", "127.0.0.1", &prim.port.to_string()]),
        b"+OK\r\n"
    );
    wait_until(
        Duration::from_secs(30),
        "the primary sent the dataset",
        || {
            p.info("replication", "slave0")
                .is_some_and(|l| l.contains("state=online"))
        },
    );
    assert_eq!(p.call(&["SET", "after-sync", "1"]), b"+OK\r\n");
    // Held back: the old dataset still serves (copies, not references), the stream waits.
    assert!(
        call_b(&mut r, &[b"GET", b"big"]) == bulk(&big),
        "the old value still serves"
    );
    assert_eq!(r.call(&["GET", "after-sync"]), b"$-1\r\n");

    for i in 0..16 {
        assert!(slow.reply() == bulk(&big), "reply {i} is the value, intact");
    }
    wait_synced(&mut p, &mut r);
    assert_eq!(r.call(&["GET", "after-sync"]), b"$1\r\n1\r\n");
    assert_eq!(r.call(&["EXISTS", "big"]), b":1\r\n");
    assert_eq!(p.info_u64("stats", "sync_full"), 1);
}

fn call_b(c: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    c.send(&encode(args));
    c.reply()
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut b = format!("${}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

/// A primary played by the test: answers the handshake, `+FULLRESYNC <id> <offset>`, then
/// `payload` (head and bytes as given; a payload that starts with `+` brings its own
/// reply line instead); the connection stays open until `hold` passes.
/// Serves every connection the replica makes (it retries after a failed sync).
fn fake_primary(
    payload: Vec<u8>,
    offset: u64,
    hold: Duration,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            // Commands arrive as RESP arrays of bulk strings.
            let mut read_cmd = || -> Option<String> {
                let mut line = String::new();
                r.read_line(&mut line).ok()?;
                let n: usize = line.trim().strip_prefix('*')?.parse().ok()?;
                let mut first = String::new();
                for i in 0..n {
                    let mut len = String::new();
                    r.read_line(&mut len).ok()?;
                    let len: usize = len.trim().strip_prefix('$')?.parse().ok()?;
                    let mut arg = vec![0u8; len + 2];
                    r.read_exact(&mut arg).ok()?;
                    if i == 0 {
                        first = String::from_utf8_lossy(&arg[..len]).to_uppercase();
                    }
                }
                Some(first)
            };
            loop {
                match read_cmd().as_deref() {
                    Some("PSYNC") => break,
                    Some("PING") => w.write_all(b"+PONG\r\n").unwrap(),
                    Some(_) => w.write_all(b"+OK\r\n").unwrap(),
                    None => return,
                }
            }
            if !payload.starts_with(b"+") {
                let head = format!("+FULLRESYNC {} {offset}\r\n", "a".repeat(40));
                let _ = w.write_all(head.as_bytes());
            }
            let _ = w.write_all(&payload);
            std::thread::sleep(hold);
        }
    });
    (port, stop)
}

/// A snapshot image from a cairn primary that the replica cannot trust — a changed byte, a
/// transfer cut short, a damaged header (sent last in the streamed form), an image of
/// another replication id than `+CAIRNIMAGE` announced — is refused with a log line: the
/// replica keeps its own data (never a half-loaded dataset), keeps serving and keeps its
/// link down. The intact image from the same fake primary loads (the control: the fake is
/// good enough to sync).
#[test]
fn a_damaged_image_from_the_primary_is_refused_and_the_replica_serves_on() {
    // The image: a cairn with distinct values saves one (its cut is at offset 0).
    let src = start_cairn(DEBUG);
    let mut s = Raw::connect(src.port);
    fill(&mut s, 2000);
    assert_eq!(s.call(&["SAVE"]), b"+OK\r\n");
    let want = digest(&mut s);
    let replid = s.info("replication", "master_replid").unwrap();
    let image = std::fs::read(src.dir.join("dump.cimg")).unwrap();
    // The streamed order: the bytes after the 256-byte header, then the header.
    let mut streamed = image[256..].to_vec();
    streamed.extend_from_slice(&image[..256]);
    let framed = |id: &str, body: &[u8]| {
        let mut p = format!("+CAIRNIMAGE {id}\r\n").into_bytes();
        p.extend_from_slice(body);
        p
    };
    let mut flipped = streamed.clone();
    let mid = streamed.len() / 2;
    flipped[mid] ^= 0x20;
    let mut bad_header = streamed.clone();
    let at = streamed.len() - 100;
    bad_header[at] ^= 0x01;
    let other = "b".repeat(40);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a changed byte", framed(&replid, &flipped)),
        ("a truncated transfer", framed(&replid, &streamed[..mid])),
        ("a damaged header", framed(&replid, &bad_header)),
        ("another replication id", framed(&other, &streamed)),
    ];
    for (what, payload) in cases {
        let (port, stop) = fake_primary(payload, 0, Duration::from_millis(300));
        let rep = start_cairn(DEBUG);
        let mut r = Raw::connect(rep.port);
        assert_eq!(r.call(&["SET", "mine", "kept"]), b"+OK\r\n");
        assert_eq!(
            r.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]),
            b"+OK\r\n"
        );
        wait_until(Duration::from_secs(30), "the refusal is logged", || {
            rep.log()
                .contains("Failed trying to load the MASTER synchronization image")
        });
        assert_eq!(show(&r.call(&["GET", "mine"])), "$4\r\nkept\r\n", "{what}");
        assert_eq!(
            r.info("replication", "master_link_status").as_deref(),
            Some("down"),
            "{what}"
        );
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let (port, stop) = fake_primary(framed(&replid, &streamed), 0, Duration::from_secs(30));
    let rep = start_cairn(DEBUG);
    let mut r = Raw::connect(rep.port);
    r.call(&["SET", "mine", "replaced"]);
    r.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
    wait_until(Duration::from_secs(30), "the image is loaded", || {
        r.info("replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(digest(&mut r), want);
    assert!(rep.log().contains("as it is taken"), "{}", rep.log());
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The same for an RDB payload from the primary, in both forms: a changed byte (the RDB's
/// CRC-64), a transfer cut short, an `$EOF:` stream whose mark never comes. The replica
/// keeps its data and serves; the intact RDB loads (the control).
#[test]
fn a_damaged_rdb_from_the_primary_is_refused_and_the_replica_serves_on() {
    let src = start_cairn(DEBUG);
    let mut s = Raw::connect(src.port);
    fill(&mut s, 2000);
    assert_eq!(
        s.call(&["CONFIG", "SET", "snapshot-format", "rdb"]),
        b"+OK\r\n"
    );
    assert_eq!(s.call(&["SAVE"]), b"+OK\r\n");
    let want = digest(&mut s);
    let rdb = std::fs::read(src.dir.join("dump.rdb")).unwrap();
    assert!(rdb.starts_with(b"REDIS"));
    let sized = |body: &[u8], len: usize| {
        let mut p = format!("${len}\r\n").into_bytes();
        p.extend_from_slice(body);
        p
    };
    let mark = "m".repeat(40);
    let eof = |body: &[u8], with_mark: bool| {
        let mut p = format!("$EOF:{mark}\r\n").into_bytes();
        p.extend_from_slice(body);
        if with_mark {
            p.extend_from_slice(mark.as_bytes());
        }
        p
    };
    let mut flipped = rdb.clone();
    let mid = rdb.len() / 2;
    flipped[mid] ^= 0x20;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a changed byte", sized(&flipped, rdb.len())),
        ("a changed byte, EOF form", eof(&flipped, true)),
        ("a truncated transfer", sized(&rdb[..mid], rdb.len())),
        ("an EOF stream without its mark", eof(&rdb[..mid], false)),
    ];
    for (what, payload) in cases {
        let (port, stop) = fake_primary(payload, 0, Duration::from_millis(300));
        let rep = start_cairn(DEBUG);
        let mut r = Raw::connect(rep.port);
        assert_eq!(r.call(&["SET", "mine", "kept"]), b"+OK\r\n");
        r.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
        wait_until(Duration::from_secs(30), "the link is lost", || {
            rep.log().contains("Connection with master lost")
        });
        assert_eq!(show(&r.call(&["GET", "mine"])), "$4\r\nkept\r\n", "{what}");
        assert_eq!(
            r.info("replication", "master_link_status").as_deref(),
            Some("down"),
            "{what}"
        );
        assert!(
            !rep.log().contains("Done loading RDB"),
            "{what}: {}",
            rep.log()
        );
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    for payload in [sized(&rdb, rdb.len()), eof(&rdb, true)] {
        let (port, stop) = fake_primary(payload, 0, Duration::from_secs(30));
        let rep = start_cairn(DEBUG);
        let mut r = Raw::connect(rep.port);
        r.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]);
        wait_until(Duration::from_secs(30), "the RDB is loaded", || {
            r.info("replication", "master_link_status").as_deref() == Some("up")
        });
        assert_eq!(digest(&mut r), want);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A replica that asks for a full sync and then reads nothing, beside `others` replicas
/// that read: 64 MiB of distinct writes (far past a 4 MiB `replica` limit and the socket
/// buffers) get it dropped. Returns its socket (open until the caller drops it).
fn stuck_replica_dropped(p: &mut Raw, port: u16, others: u64) -> std::net::TcpStream {
    use std::io::Write;
    let mut stuck = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stuck
        .write_all(&encode(&[b"REPLCONF", b"listening-port", b"1"]))
        .unwrap();
    stuck.write_all(&encode(&[b"PSYNC", b"?", b"-1"])).unwrap();
    wait_until(
        Duration::from_secs(30),
        "the stuck replica attached",
        || p.info_u64("replication", "connected_slaves") == others + 1,
    );
    let value: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    for i in 0..64 {
        let key = format!("big{i}");
        p.cmd(&[b"SET", key.as_bytes(), &value]);
        assert_eq!(p.reply(), b"+OK\r\n");
        if p.info_u64("replication", "connected_slaves") == others {
            break;
        }
    }
    wait_until(
        Duration::from_secs(30),
        "the stuck replica is dropped",
        || p.info_u64("replication", "connected_slaves") == others,
    );
    stuck
}

/// A replica that stops reading falls behind past `client-output-buffer-limit replica`:
/// the primary drops it with Redis's log line and serves on; a replica that reads is
/// unaffected.
#[test]
fn a_replica_past_its_output_limit_is_dropped_and_the_primary_serves_on() {
    let prim = start_cairn(&with(
        DEBUG,
        &[
            "--client-output-buffer-limit",
            "replica 4mb 0 0",
            "--repl-diskless-sync",
            "no",
        ],
    ));
    let mut p = Raw::connect(prim.port);
    p.call(&["SET", "seed", "1"]);
    let good = start_cairn(&with(
        DEBUG,
        &["--replicaof", &format!("127.0.0.1 {}", prim.port)],
    ));
    let mut g = Raw::connect(good.port);
    wait_synced(&mut p, &mut g);
    let stuck = stuck_replica_dropped(&mut p, prim.port, 1);
    assert!(
        prim.log()
            .contains("for overcoming of output buffer limits"),
        "{}",
        prim.log()
    );
    assert_eq!(p.call(&["PING"]), b"+PONG\r\n");
    wait_synced(&mut p, &mut g);
    drop(stuck);
}

/// A primary with I/O threads serves replicas as the single-threaded one does: a cairn
/// replica (the image; I/O threads of its own) and a Redis replica (an RDB) sync fully
/// while writes go on, follow
/// the stream (blocking pops, transactions, scripts, expiries), continue partially after
/// their links drop, and a replica that stops reading is dropped at its output limit.
#[test]
fn a_primary_with_io_threads_serves_replicas() {
    let prim = start_cairn(&with(
        DEBUG,
        &[
            "--io-threads",
            "2",
            "--client-output-buffer-limit",
            "replica 4mb 0 0",
        ],
    ));
    let mut p = Raw::connect(prim.port);
    populate(prim.port, 50_000, 100);
    let port = prim.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut w = Raw::connect(port);
        let mut i = 0u64;
        while !s2.load(std::sync::atomic::Ordering::SeqCst) && i < 100_000 {
            w.call(&["INCR", "counter"]);
            i += 1;
        }
    });
    // The cairn replica runs I/O threads too.
    let crep = start_cairn(&with(
        DEBUG,
        &[
            "--io-threads",
            "2",
            "--replicaof",
            &format!("127.0.0.1 {}", prim.port),
        ],
    ));
    let rrep = start_replica_of(prim.port, &[]);
    let (mut c, mut r) = (Raw::connect(crep.port), Raw::connect(rrep.port));
    wait_until(Duration::from_secs(60), "both replicas online", || {
        c.info("replication", "master_link_status").as_deref() == Some("up")
            && r.info("replication", "master_link_status").as_deref() == Some("up")
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    wait_synced(&mut p, &mut c);
    wait_synced(&mut p, &mut r);
    assert!(crep.log().contains("as it is taken"), "{}", crep.log());
    traffic(&mut p, prim.port);
    wait_synced(&mut p, &mut c);
    wait_synced(&mut p, &mut r);
    assert_eq!(p.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":2\r\n");
    p.call(&["SET", "while-down", "1"]);
    wait_synced(&mut p, &mut c);
    wait_synced(&mut p, &mut r);
    assert_eq!(p.info_u64("stats", "sync_partial_ok"), 2);
    let stuck = stuck_replica_dropped(&mut p, prim.port, 2);
    wait_synced(&mut p, &mut c);
    wait_synced(&mut p, &mut r);
    drop(stuck);
}

/// The stream written while a replica's full sync is held up goes to a temporary file once
/// it passes 4 MiB (not the primary's memory), and reaches the replica afterwards whole and
/// in order; the file has no name (nothing is left in `dir`, whatever happens to the
/// process) and is closed once it is sent. The replica here is a raw socket that asks for
/// a full sync and reads nothing until the writes are done.
#[test]
fn the_stream_kept_during_a_long_sync_spills_to_a_file_and_arrives_in_order() {
    use std::io::{BufRead, BufReader, Write};
    let prim = start_cairn(&with(DEBUG, &["--repl-diskless-sync", "no"]));
    let mut p = Raw::connect(prim.port);
    // More payload than the socket buffers take, so the transfer stalls.
    populate(prim.port, 20_000, 1000);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", prim.port)).unwrap();
    s.write_all(&encode(&[b"REPLCONF", b"listening-port", b"1"]))
        .unwrap();
    s.write_all(&encode(&[b"PSYNC", b"?", b"-1"])).unwrap();
    wait_until(Duration::from_secs(30), "the transfer started", || {
        p.info("replication", "slave0")
            .is_some_and(|v| v.contains("state=send_bulk") || v.contains("state=online"))
    });
    // The spool's file: open in the server, unlinked, in its `dir`.
    let dir = std::fs::canonicalize(&prim.dir).unwrap();
    let fds = format!("/proc/{}/fd", prim.child.id());
    let spilled = || {
        std::fs::read_dir(&fds)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .any(|t| t.starts_with(&dir) && t.to_string_lossy().ends_with(" (deleted)"))
    };
    let named = || {
        std::fs::read_dir(&prim.dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains("pending"))
    };
    let values: Vec<Vec<u8>> = (0..12u32)
        .map(|k| {
            (0..1u32 << 20)
                .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8 ^ k as u8)
                .collect()
        })
        .collect();
    for (k, v) in values.iter().enumerate() {
        p.cmd(&[b"SET", format!("spill{k}").as_bytes(), v]);
        assert_eq!(p.reply(), b"+OK\r\n");
    }
    wait_until(
        Duration::from_secs(30),
        "the pending stream went to a file",
        spilled,
    );
    assert!(!named(), "the pending stream's file has no name");
    // Now read: the header, the RDB, then the stream, which must hold the 12 SETs in order.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::with_capacity(1 << 20, s);
    let mut line = String::new();
    let mut next_line = |r: &mut BufReader<std::net::TcpStream>| loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end().to_string();
        if !l.is_empty() {
            return l;
        }
    };
    assert_eq!(next_line(&mut r), "+OK", "REPLCONF's reply");
    assert!(next_line(&mut r).starts_with("+FULLRESYNC "));
    let len: usize = next_line(&mut r)[1..].parse().unwrap();
    let mut rdb = vec![0u8; len];
    r.read_exact(&mut rdb).unwrap();
    assert!(rdb.starts_with(b"REDIS"));
    let mut seen = 0;
    while seen < values.len() {
        let head = next_line(&mut r);
        let n: usize = head.strip_prefix('*').expect("a command").parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            let l = next_line(&mut r);
            let len: usize = l.strip_prefix('$').unwrap().parse().unwrap();
            let mut a = vec![0u8; len + 2];
            r.read_exact(&mut a).unwrap();
            a.truncate(len);
            args.push(a);
        }
        if args[0].eq_ignore_ascii_case(b"SET") {
            assert_eq!(args[1], format!("spill{seen}").as_bytes());
            assert!(
                args[2] == values[seen],
                "SET spill{seen}'s value arrived whole"
            );
            seen += 1;
        }
    }
    wait_until(Duration::from_secs(30), "the spill file is closed", || {
        !spilled()
    });
    assert_eq!(p.call(&["PING"]), b"+PONG\r\n");
}

/// A replica that reads slower than the primary sends: the primary tops its output up
/// whenever less than the window is unsent, so the buffer never empties during the
/// transfer; its allocation (CLIENT LIST `rbs`) must stay near the window, not grow with
/// what was sent through it (it kept every byte sent before).
#[test]
fn a_slow_replica_s_output_buffer_stays_near_the_window() {
    use std::io::{BufRead, BufReader, Read, Write};
    let prim = start_cairn(&with(DEBUG, &["--repl-diskless-sync", "no"]));
    let mut p = Raw::connect(prim.port);
    // A payload many times the window (4 MiB) and the socket buffers.
    populate(prim.port, 60_000, 1000);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", prim.port)).unwrap();
    s.write_all(&encode(&[b"PSYNC", b"?", b"-1"])).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::with_capacity(64 << 10, s);
    let mut line = String::new();
    let len: usize = loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if let Some(n) = line.trim_end().strip_prefix('$') {
            break n.parse().unwrap();
        }
    };
    assert!(len > 40 << 20, "payload {len} bytes");
    let rbs = |p: &mut Raw| -> u64 {
        let list =
            String::from_utf8_lossy(&p.call(&["CLIENT", "LIST", "TYPE", "replica"])).into_owned();
        list.split_whitespace()
            .find_map(|f| f.strip_prefix("rbs="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (mut got, mut peak, mut buf) = (0usize, 0u64, vec![0u8; 64 << 10]);
    while got < len {
        let n = r.read(&mut buf[..(len - got).min(64 << 10)]).unwrap();
        assert!(n > 0, "the primary closed the link");
        got += n;
        // Slower than the primary: it always has more waiting for this socket.
        std::thread::sleep(Duration::from_micros(500));
        if got % (1 << 20) < n {
            peak = peak.max(rbs(&mut p));
        }
    }
    assert!(peak > 0, "CLIENT LIST showed the replica's buffer");
    assert!(
        peak <= 16 << 20,
        "the replica's output buffer reached {peak} bytes for a {len}-byte payload"
    );
}

/// `repl-ping-replica-period` counts from the replica's arrival: a primary whose period is
/// an hour sends no PING in the seconds after a sync (one sent at the next cron moved the
/// offset under a promotion racing with it), and one with a 1 s period does send them.
#[test]
fn the_first_ping_comes_one_period_after_the_replica_attached() {
    for (period, pings) in [("3600", false), ("1", true)] {
        let prim = start_cairn(&with(DEBUG, &["--repl-ping-replica-period", period]));
        let mut p = Raw::connect(prim.port);
        p.call(&["SET", "k", "v"]);
        let rep = start_cairn(&with(
            DEBUG,
            &["--replicaof", &format!("127.0.0.1 {}", prim.port)],
        ));
        let mut r = Raw::connect(rep.port);
        wait_synced(&mut p, &mut r);
        let synced = p.info_u64("replication", "master_repl_offset");
        // An hour's period: 2.5 s without a PING. A second's: waited for up to 20 s (a
        // loaded machine may delay a cron, never skip the PING).
        let window = Duration::from_millis(if pings { 20_000 } else { 2500 });
        let moved = poll_until(window, || {
            p.info_u64("replication", "master_repl_offset") != synced
        });
        assert_eq!(moved, pings, "period {period}");
    }
}
