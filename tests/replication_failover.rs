//! Failover and chained replication: a promoted replica keeps its primary's id as
//! `master_replid2` (PSYNC2), so its siblings and the demoted primary continue partially
//! (cairn and Debian's redis-server 7 as the followers); replicas of a replica get the top
//! primary's stream with its id and offsets, stay consistent and continue after a drop.

mod common;
use common::*;
use std::time::Duration;

const DEBUG: &[&str] = &["--enable-debug-command", "yes"];

fn digest(c: &mut Raw) -> String {
    show(&c.call(&["DEBUG", "DIGEST"]))
}

/// Waits until `r` (a replica, maybe of a replica) has applied everything `top` has
/// produced, then checks both hold the same data.
fn wait_synced(top: &mut Raw, r: &mut Raw) {
    wait_until(Duration::from_secs(30), "the replica catches up", || {
        r.info("replication", "master_link_status").as_deref() == Some("up")
            && r.info("replication", "slave_repl_offset")
                == top.info("replication", "master_repl_offset")
    });
    assert_eq!(
        digest(top),
        digest(r),
        "the replica holds the primary's data"
    );
}

fn replicaof(c: &mut Raw, port: u16) {
    assert_eq!(
        c.call(&["REPLICAOF", "127.0.0.1", &port.to_string()]),
        b"+OK\r\n"
    );
}

/// Writes of several kinds in two dbs, leaving the stream in db 5.
fn writes(p: &mut Raw, tag: &str) {
    for i in 0..50 {
        p.call(&["SET", &format!("{tag}{i}"), &format!("v{i}")]);
    }
    p.call(&["MULTI"]);
    p.call(&["INCR", &format!("{tag}ctr")]);
    p.call(&["RPUSH", &format!("{tag}l"), "a", "b"]);
    p.call(&["EXEC"]);
    p.call(&["SELECT", "5"]);
    p.call(&["HSET", &format!("{tag}h"), "f", "v"]);
}

/// `REPLICAOF NO ONE` on a cairn replica: the old id becomes replid2 up to offset + 1
/// under a new id; the sibling replica and the demoted old primary pointed at it get
/// `+CONTINUE <newid>` (partial syncs, no full one) and the same data.
#[test]
fn a_promoted_replica_continues_its_sibling_and_the_old_primary() {
    // No PING from a between the promotion and its demotion: its offset past b's would
    // (rightly) make it sync fully.
    let a = start_cairn(&with(DEBUG, &["--repl-ping-replica-period", "3600"]));
    let b = start_cairn(DEBUG);
    let c = start_cairn(DEBUG);
    let (mut pa, mut pb, mut pc) = (
        Raw::connect(a.port),
        Raw::connect(b.port),
        Raw::connect(c.port),
    );
    writes(&mut pa, "pre");
    replicaof(&mut pb, a.port);
    replicaof(&mut pc, a.port);
    writes(&mut pa, "x");
    wait_synced(&mut pa, &mut pb);
    wait_synced(&mut pa, &mut pc);
    let old_id = pa.info_field("replication", "master_replid");
    let off: u64 = pa.info_u64("replication", "master_repl_offset");
    assert_eq!(pb.info_field("replication", "master_replid"), old_id);
    assert_eq!(pb.info_field("replication", "repl_backlog_active"), "1");

    assert_eq!(pb.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let new_id = pb.info_field("replication", "master_replid");
    assert_ne!(new_id, old_id);
    assert_eq!(pb.info_field("replication", "master_replid2"), old_id);
    assert_eq!(
        pb.info_u64("replication", "second_repl_offset"),
        off + 1,
        "replid2 is valid up to the offset + 1"
    );
    assert_eq!(pb.info_u64("replication", "master_repl_offset"), off);
    // Writes on the new primary before anyone follows it: they come from its backlog.
    pb.call(&["SET", "after-promotion", "1"]);

    replicaof(&mut pc, b.port);
    wait_synced(&mut pb, &mut pc);
    assert_eq!(pc.info_field("replication", "master_replid"), new_id);
    assert_eq!(pc.info_field("replication", "master_replid2"), old_id);
    replicaof(&mut pa, b.port);
    wait_synced(&mut pb, &mut pa);
    assert_eq!(pa.info_field("replication", "master_replid"), new_id);
    assert_eq!(pb.info_u64("stats", "sync_partial_ok"), 2);
    assert_eq!(pb.info_u64("stats", "sync_full"), 0, "nobody synced fully");
    // The stream goes on to both.
    writes(&mut pb, "later");
    wait_synced(&mut pb, &mut pa);
    wait_synced(&mut pb, &mut pc);
    assert_eq!(pb.info_u64("replication", "connected_slaves"), 2);
}

/// A Redis 7 replica of a cairn primary, pointed at a promoted cairn replica of the same
/// primary, continues partially and follows the new primary's writes.
#[test]
fn a_redis_replica_continues_from_a_promoted_cairn_replica() {
    // No PING that the Redis replica could get and b miss before its promotion.
    let a = start_cairn(&with(DEBUG, &["--repl-ping-replica-period", "3600"]));
    let b = start_cairn(DEBUG);
    let r = start_redis(DEBUG);
    let (mut pa, mut pb, mut pr) = (
        Raw::connect(a.port),
        Raw::connect(b.port),
        Raw::connect(r.port),
    );
    writes(&mut pa, "pre");
    replicaof(&mut pb, a.port);
    replicaof(&mut pr, a.port);
    writes(&mut pa, "x");
    wait_synced(&mut pa, &mut pb);
    wait_synced(&mut pa, &mut pr);
    assert_eq!(pb.call(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    pb.call(&["SET", "after-promotion", "1"]);
    replicaof(&mut pr, b.port);
    wait_synced(&mut pb, &mut pr);
    assert_eq!(pb.info_u64("stats", "sync_partial_ok"), 1);
    assert_eq!(pb.info_u64("stats", "sync_full"), 0);
    assert_eq!(
        pr.info_field("replication", "master_replid"),
        pb.info_field("replication", "master_replid")
    );
    writes(&mut pb, "later");
    wait_synced(&mut pb, &mut pr);
}

/// Replicas of a cairn replica (a cairn one and a Redis 7 one) under a cairn or a Redis
/// top primary: they see the top primary's id and offsets, hold its data through
/// transactions and db changes (one joins while the stream is in db 5, so it must start
/// there), and continue partially from the middle replica when their links drop.
#[test]
fn replicas_of_a_replica_follow_the_top_primary() {
    for top_is_redis in [false, true] {
        let a = if top_is_redis {
            start_redis(DEBUG)
        } else {
            start_cairn(DEBUG)
        };
        let b = start_cairn(DEBUG);
        let (mut pa, mut pb) = (Raw::connect(a.port), Raw::connect(b.port));
        writes(&mut pa, "pre");
        replicaof(&mut pb, a.port);
        wait_synced(&mut pa, &mut pb);
        // The stream is in db 5 now: the sub-replicas' full syncs start there.
        let c = start_cairn(DEBUG);
        let r = start_redis(DEBUG);
        let (mut pc, mut pr) = (Raw::connect(c.port), Raw::connect(r.port));
        replicaof(&mut pc, b.port);
        replicaof(&mut pr, b.port);
        wait_synced(&mut pa, &mut pc);
        wait_synced(&mut pa, &mut pr);
        pa.call(&["SET", "in-db-5", "v"]);
        writes(&mut pa, "x");
        wait_synced(&mut pa, &mut pc);
        wait_synced(&mut pa, &mut pr);
        let top_id = pa.info_field("replication", "master_replid");
        assert_eq!(pc.info_field("replication", "master_replid"), top_id);
        assert_eq!(pr.info_field("replication", "master_replid"), top_id);
        assert_eq!(pb.info_u64("stats", "sync_full"), 2);
        assert_eq!(pb.info_u64("replication", "connected_slaves"), 2);
        // Their links drop; writes go on at the top; they continue from the middle.
        assert_eq!(pb.call(&["CLIENT", "KILL", "TYPE", "replica"]), b":2\r\n");
        writes(&mut pa, "while-down");
        wait_synced(&mut pa, &mut pc);
        wait_synced(&mut pa, &mut pr);
        assert_eq!(pb.info_u64("stats", "sync_partial_ok"), 2);
        assert_eq!(pb.info_u64("stats", "sync_full"), 2, "no new full sync");
        // The middle one refuses writes and WAIT as any replica.
        assert!(show(&pb.call(&["SET", "k", "v"])).starts_with("-READONLY"));
    }
}

/// A replica whose own link is down refuses syncs with Redis's error.
#[test]
fn a_replica_without_its_link_refuses_syncs() {
    let b = start_cairn(DEBUG);
    let mut pb = Raw::connect(b.port);
    // Nobody listens there.
    replicaof(&mut pb, free_port());
    let mut s = Raw::connect(b.port);
    assert_eq!(
        show(&s.call(&["PSYNC", "?", "-1"])),
        "-NOMASTERLINK Can't SYNC while not connected with my master\r\n"
    );
}

/// `repl-backlog-ttl`: a primary whose last replica left that long ago frees its backlog
/// (INFO `repl_backlog_active:0`) under a new id with no replid2, so the old position gets
/// a full sync; a replica keeps its backlog however long it has no replicas.
#[test]
fn a_primary_without_replicas_frees_its_backlog_after_the_ttl() {
    let ttl: &[&str] = &["--enable-debug-command", "yes", "--repl-backlog-ttl", "1"];
    let p = start_cairn(ttl);
    let q = start_cairn(DEBUG);
    let r = start_cairn(ttl);
    let (mut pp, mut pq, mut pr) = (
        Raw::connect(p.port),
        Raw::connect(q.port),
        Raw::connect(r.port),
    );
    // Set at runtime on q.
    assert_eq!(
        pq.call(&["CONFIG", "SET", "repl-backlog-ttl", "1"]),
        b"+OK\r\n"
    );
    writes(&mut pq, "q");
    replicaof(&mut pr, q.port);
    wait_synced(&mut pq, &mut pr);
    let old_id = pq.info_field("replication", "master_replid");
    let off = pq.info_u64("replication", "master_repl_offset");
    assert_eq!(pq.info_field("replication", "repl_backlog_active"), "1");
    // r leaves q for p: q has no replica from here on, r none of its own.
    replicaof(&mut pr, p.port);
    wait_synced(&mut pp, &mut pr);
    wait_until(Duration::from_secs(30), "q frees its backlog", || {
        pq.info_field("replication", "repl_backlog_active") == "0"
    });
    assert_ne!(pq.info_field("replication", "master_replid"), old_id);
    assert_eq!(
        pq.info_field("replication", "master_replid2"),
        "0000000000000000000000000000000000000000"
    );
    assert_eq!(pq.info_field("replication", "second_repl_offset"), "-1");
    // r had no replica for longer than q: still a backlog (replicas never free it).
    assert_eq!(pr.info_field("replication", "repl_backlog_active"), "1");
    // The old position is gone: a full sync.
    let mut s = Raw::connect(q.port);
    s.send(&encode(&[
        b"PSYNC",
        old_id.as_bytes(),
        (off + 1).to_string().as_bytes(),
    ]));
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    use std::io::Read;
    while !line.ends_with(b"\r\n") {
        s.s.read_exact(&mut byte).unwrap();
        if !(line.is_empty() && byte[0] == b'\n') {
            line.push(byte[0]);
        }
    }
    assert!(show(&line).starts_with("+FULLRESYNC "), "{}", show(&line));
    assert_eq!(pq.info_u64("stats", "sync_partial_err"), 1);
}

/// WAITAOF (Redis 7.2's semantics and error texts): argument errors, refusals on a
/// replica and without `appendonly`, the local count following the log's fsyncs (paused:
/// 0 at the timeout; resumed: 1), replicas counted once their log fsynced the write
/// (`REPLCONF ACK <off> FACK <aofoff>`), a replica without a log never, and no blocking
/// inside MULTI.
#[test]
fn waitaof_counts_the_logs_that_fsynced_the_write() {
    let aof: &[&str] = &[
        "--enable-debug-command",
        "yes",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
    ];
    let p = start_cairn(aof);
    let mut pp = Raw::connect(p.port);
    for (args, err) in [
        (
            &["WAITAOF", "x", "0", "0"][..],
            "value is not an integer or out of range",
        ),
        (
            &["WAITAOF", "2", "0", "0"],
            "value is out of range, value must between 0 and 1",
        ),
        (
            &["WAITAOF", "-1", "0", "0"],
            "value is out of range, value must between 0 and 1",
        ),
        (
            &["WAITAOF", "0", "-1", "0"],
            "value is out of range, must be positive",
        ),
        (
            &["WAITAOF", "0", "x", "0"],
            "value is out of range, must be positive",
        ),
        (&["WAITAOF", "0", "0", "-1"], "timeout is negative"),
        (
            &["WAITAOF", "0", "0", "x"],
            "timeout is not an integer or out of range",
        ),
        (
            &["WAITAOF", "0", "0"],
            "wrong number of arguments for 'waitaof' command",
        ),
    ] {
        assert_eq!(show(&pp.call(args)), format!("-ERR {err}\r\n"), "{args:?}");
    }
    assert_eq!(pp.call(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(pp.call(&["WAITAOF", "1", "0", "0"]), b"*2\r\n:1\r\n:0\r\n");
    // Syncs paused: the write is written, not fsynced.
    assert_eq!(pp.call(&["DEBUG", "AOF-PAUSE-SYNCS", "1"]), b"+OK\r\n");
    assert_eq!(pp.call(&["SET", "k", "v2"]), b"+OK\r\n");
    assert_eq!(
        pp.call(&["WAITAOF", "1", "0", "200"]),
        b"*2\r\n:0\r\n:0\r\n"
    );
    assert_eq!(pp.call(&["MULTI"]), b"+OK\r\n");
    pp.call(&["WAITAOF", "1", "0", "0"]);
    assert_eq!(
        pp.call(&["EXEC"]),
        b"*1\r\n*2\r\n:0\r\n:0\r\n",
        "no blocking in MULTI"
    );
    // Blocked until the syncs resume.
    pp.cmd(&[b"WAITAOF", b"1", b"0", b"0"]);
    let mut ctl = Raw::connect(p.port);
    wait_until(Duration::from_secs(10), "WAITAOF blocks", || {
        ctl.info_u64("clients", "blocked_clients") == 1
    });
    assert_eq!(ctl.call(&["DEBUG", "AOF-PAUSE-SYNCS", "0"]), b"+OK\r\n");
    assert_eq!(pp.reply(), b"*2\r\n:1\r\n:0\r\n");

    // A replica with a log counts once it fsynced; one without never does.
    let r1 = start_cairn(aof);
    let r2 = start_cairn(DEBUG);
    let (mut p1, mut p2) = (Raw::connect(r1.port), Raw::connect(r2.port));
    replicaof(&mut p1, p.port);
    replicaof(&mut p2, p.port);
    wait_synced(&mut pp, &mut p1);
    wait_synced(&mut pp, &mut p2);
    assert_eq!(pp.call(&["SET", "k", "v3"]), b"+OK\r\n");
    assert_eq!(pp.call(&["WAITAOF", "1", "1", "0"]), b"*2\r\n:1\r\n:1\r\n");
    assert_eq!(
        pp.call(&["WAITAOF", "0", "2", "300"]),
        b"*2\r\n:1\r\n:1\r\n"
    );
    assert_eq!(pp.call(&["WAIT", "2", "0"]), b":2\r\n");
    assert_eq!(
        show(&p1.call(&["WAITAOF", "0", "0", "0"])),
        "-ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.\r\n"
    );
    assert_eq!(show(&p2.call(&["REPLICAOF", "NO", "ONE"])), "+OK\r\n");
    assert_eq!(
        show(&p2.call(&["WAITAOF", "1", "0", "0"])),
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
    assert_eq!(p2.call(&["WAITAOF", "0", "0", "0"]), b"*2\r\n:0\r\n:0\r\n");
}

/// FAILOVER's argument and state errors, byte-compared with redis-server 7.0 on a
/// primary without replicas and on a replica.
#[test]
fn failover_errors_match_redis() {
    let (c, r) = (start_cairn(DEBUG), start_redis(DEBUG));
    let (mut pc, mut pr) = (Raw::connect(c.port), Raw::connect(r.port));
    let cases: &[&[&str]] = &[
        &["FAILOVER", "ABORT"],
        &["FAILOVER"],
        &["FAILOVER", "TIMEOUT", "0"],
        &["FAILOVER", "TIMEOUT", "-5"],
        &["FAILOVER", "TIMEOUT", "x"],
        &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "20"],
        &["FAILOVER", "TO", "127.0.0.1", "x"],
        &["FAILOVER", "TO", "127.0.0.1"],
        &["FAILOVER", "FORCE", "FORCE"],
        &["FAILOVER", "FORCE"],
        &["FAILOVER", "bogus"],
        &["FAILOVER", "TO", "127.0.0.1", "1", "TIMEOUT", "100"],
    ];
    for args in cases {
        assert_eq!(show(&pc.call(args)), show(&pr.call(args)), "{args:?}");
    }
    // As replicas.
    let (c2, r2) = (start_cairn(DEBUG), start_redis(DEBUG));
    replicaof(&mut pc, c2.port);
    replicaof(&mut pr, r2.port);
    for args in [&["FAILOVER"][..], &["FAILOVER", "ABORT"]] {
        assert_eq!(show(&pc.call(args)), show(&pr.call(args)), "{args:?}");
    }
}

/// A replica that never acknowledges: connects as a replica (full sync, no ACK ever),
/// listening port `port`.
fn silent_replica(primary: u16, port: u16) -> Raw {
    let mut s = Raw::connect(primary);
    assert_eq!(
        s.call(&["REPLCONF", "listening-port", &port.to_string()]),
        b"+OK\r\n"
    );
    s.cmd(&[b"PSYNC", b"?", b"-1"]);
    s
}

/// FAILOVER's waiting-for-sync state: writes wait (reads do not), INFO says
/// `waiting-for-sync`; a target that never catches up ends it at the timeout (writes go
/// on), FAILOVER ABORT ends it at once, and FORCE follows the target anyway at the
/// timeout (`failover-in-progress` while the target does not answer; ABORT: a primary
/// again).
#[test]
fn failover_waits_for_the_target_and_times_out_or_aborts() {
    let a = start_cairn(DEBUG);
    let mut pa = Raw::connect(a.port);
    let _silent = silent_replica(a.port, 7);
    wait_until(
        Duration::from_secs(30),
        "the silent replica is online",
        || {
            pa.info("replication", "slave0")
                .is_some_and(|l| l.contains("state=online"))
        },
    );
    // Past the offset it acknowledged (none).
    pa.call(&["SET", "k", "1"]);
    assert_eq!(
        show(&pa.call(&["FAILOVER", "TO", "127.0.0.1", "8", "TIMEOUT", "100"])),
        "-ERR FAILOVER target HOST and PORT is not a replica.\r\n"
    );
    assert_eq!(
        pa.call(&["FAILOVER", "TO", "127.0.0.1", "7", "TIMEOUT", "1500"]),
        b"+OK\r\n"
    );
    assert_eq!(
        pa.info_field("replication", "master_failover_state"),
        "waiting-for-sync"
    );
    assert_eq!(
        show(&pa.call(&["FAILOVER"])),
        "-ERR FAILOVER already in progress.\r\n"
    );
    assert_eq!(
        show(&pa.call(&["REPLICAOF", "NO", "ONE"])),
        "-ERR REPLICAOF not allowed while failing over.\r\n"
    );
    let mut w = Raw::connect(a.port);
    w.cmd(&[b"SET", b"k", b"2"]);
    assert_eq!(pa.call(&["GET", "k"]), b"$1\r\n1\r\n", "reads go on");
    // The timeout: the write goes through.
    assert_eq!(w.reply(), b"+OK\r\n");
    assert_eq!(
        pa.info_field("replication", "master_failover_state"),
        "no-failover"
    );
    assert_eq!(pa.call(&["GET", "k"]), b"$1\r\n2\r\n");

    // ABORT while waiting.
    assert_eq!(pa.call(&["FAILOVER", "TO", "127.0.0.1", "7"]), b"+OK\r\n");
    w.cmd(&[b"SET", b"k", b"3"]);
    let mut ctl = Raw::connect(a.port);
    wait_until(Duration::from_secs(10), "the write waits", || {
        ctl.info_u64("clients", "blocked_clients") == 1
    });
    assert_eq!(pa.call(&["FAILOVER", "ABORT"]), b"+OK\r\n");
    assert_eq!(w.reply(), b"+OK\r\n");

    // FORCE: at the timeout it follows the target, which does not answer.
    assert_eq!(
        pa.call(&[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            "7",
            "TIMEOUT",
            "100",
            "FORCE"
        ]),
        b"+OK\r\n"
    );
    wait_until(
        Duration::from_secs(10),
        "the forced failover starts",
        || pa.info_field("replication", "master_failover_state") == "failover-in-progress",
    );
    assert_eq!(pa.info_field("replication", "role"), "slave");
    assert_eq!(pa.info_field("replication", "master_port"), "7");
    assert_eq!(pa.call(&["FAILOVER", "ABORT"]), b"+OK\r\n");
    assert_eq!(pa.info_field("replication", "role"), "master");
    assert_eq!(pa.call(&["SET", "k", "4"]), b"+OK\r\n");
}

/// FAILOVER TO a cairn replica (and FAILOVER to any replica back): the target turns
/// into the primary on `PSYNC .. FAILOVER` and answers `+CONTINUE <newid>`; the old
/// primary follows it and its other replica continues through it; no full sync
/// anywhere, and the data is the same everywhere.
#[test]
fn failover_hands_over_to_a_replica_without_a_full_sync() {
    let a = start_cairn(DEBUG);
    let b = start_cairn(DEBUG);
    let c = start_cairn(DEBUG);
    let (mut pa, mut pb, mut pc) = (
        Raw::connect(a.port),
        Raw::connect(b.port),
        Raw::connect(c.port),
    );
    writes(&mut pa, "pre");
    replicaof(&mut pb, a.port);
    replicaof(&mut pc, a.port);
    wait_synced(&mut pa, &mut pb);
    wait_synced(&mut pa, &mut pc);
    wait_until(Duration::from_secs(30), "both replicas are online", || {
        let online = |l: Option<String>| l.is_some_and(|l| l.contains("state=online"));
        online(pa.info("replication", "slave0")) && online(pa.info("replication", "slave1"))
    });
    let a_full = pa.info_u64("stats", "sync_full");
    assert_eq!(
        pa.call(&["FAILOVER", "TO", "127.0.0.1", &b.port.to_string()]),
        b"+OK\r\n"
    );
    wait_until(Duration::from_secs(30), "a follows b", || {
        pa.info("replication", "master_port") == Some(b.port.to_string())
            && pa.info("replication", "master_link_status").as_deref() == Some("up")
            && pa.info_field("replication", "master_failover_state") == "no-failover"
    });
    assert_eq!(pb.info_field("replication", "role"), "master");
    assert_eq!(pb.info_u64("stats", "sync_full"), 0);
    assert_eq!(pb.info_u64("stats", "sync_partial_ok"), 1);
    writes(&mut pb, "after");
    wait_synced(&mut pb, &mut pa);
    wait_synced(&mut pb, &mut pc);
    assert_eq!(
        pa.info_u64("stats", "sync_full"),
        a_full,
        "c continued through a"
    );

    // Back to any replica: a is b's only replica.
    assert_eq!(pb.call(&["FAILOVER"]), b"+OK\r\n");
    wait_until(Duration::from_secs(30), "b follows a", || {
        pb.info("replication", "master_port") == Some(a.port.to_string())
            && pb.info("replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(pa.info_field("replication", "role"), "master");
    writes(&mut pa, "back");
    wait_synced(&mut pa, &mut pb);
    wait_synced(&mut pa, &mut pc);
    assert_eq!(pa.info_u64("stats", "sync_full"), a_full);
    assert_eq!(pb.info_u64("stats", "sync_full"), 0);
}

/// FAILOVER TO a Redis 7 replica of a cairn primary: Redis takes `PSYNC .. FAILOVER`
/// from cairn, turns into the primary and continues cairn partially.
#[test]
fn failover_hands_over_to_a_redis_replica() {
    let a = start_cairn(DEBUG);
    let r = start_redis(DEBUG);
    let (mut pa, mut pr) = (Raw::connect(a.port), Raw::connect(r.port));
    writes(&mut pa, "pre");
    replicaof(&mut pr, a.port);
    wait_synced(&mut pa, &mut pr);
    wait_until(Duration::from_secs(30), "the replica is online", || {
        pa.info("replication", "slave0")
            .is_some_and(|l| l.contains("state=online"))
    });
    let to = ["FAILOVER", "TO", "127.0.0.1", &r.port.to_string()];
    assert_eq!(pa.call(&to), b"+OK\r\n");
    wait_until(Duration::from_secs(30), "cairn follows redis", || {
        pa.info("replication", "master_link_status").as_deref() == Some("up")
            && pa.info_field("replication", "master_failover_state") == "no-failover"
    });
    assert_eq!(pr.info_field("replication", "role"), "master");
    assert_eq!(pr.info_u64("stats", "sync_full"), 0);
    assert_eq!(pr.info_u64("stats", "sync_partial_ok"), 1);
    writes(&mut pr, "after");
    wait_synced(&mut pr, &mut pa);
}
