//! MULTI / EXEC / DISCARD / WATCH / UNWATCH, black box. Scenarios with several
//! connections run on cairn (io-threads 1 and 3) and on Debian's redis-server 7.0.15, and
//! every reply must be byte-identical: WATCH touched by another client or by itself,
//! by expiry, FLUSHALL/FLUSHDB/SWAPDB/RENAME/MOVE/DEL, RESP3 nulls, queue-time errors,
//! OOM inside MULTI and at EXEC. Plus the AOF (a transaction is one MULTI...EXEC block;
//! a block cut at the tail is dropped at replay), `appendfsync always` holding EXEC's
//! reply, and EXEC replies mixing large (sent by reference) and small values.

mod common;
use common::*;
use std::time::Duration;

type Transcript = Vec<String>;

/// Runs `f` on cairn (both socket paths) and on redis-server; the transcripts must match.
fn differential(extra: &[&str], f: fn(u16, &mut Transcript)) {
    let r = start_redis(extra);
    let mut want = Vec::new();
    f(r.port, &mut want);
    for io in ["1", "3"] {
        let mut args = vec!["--io-threads", io];
        args.extend_from_slice(extra);
        let c = start_cairn(&args);
        let mut got = Vec::new();
        f(c.port, &mut got);
        assert_eq!(got.len(), want.len(), "io-threads {io}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g, w,
                "io-threads {io}, reply {i}\ncairn: {got:#?}\nredis: {want:#?}"
            );
        }
    }
}

fn call(c: &mut Raw, t: &mut Transcript, cmd: &str) {
    let args: Vec<&str> = cmd.split(' ').collect();
    t.push(format!("{cmd} -> {}", show(&c.call(&args))));
}

#[test]
fn queueing_errors_and_nesting() {
    differential(&[], |port, t| {
        let mut c = Raw::connect(port);
        for cmd in [
            "EXEC",
            "DISCARD",
            "MULTI",
            "MULTI",
            "WATCH x",
            "SET a 1",
            "INCR a",
            "LPUSH a x",
            "GET a",
            "EXEC",
            "MULTI",
            "SET b 1",
            "NOSUCH x y",
            "GET",
            "EXEC",
            "GET b",
            "EXEC extra",
            "MULTI",
            "EXEC extra",
            "EXEC",
            "MULTI",
            "SAVE",
            "PING",
            "EXEC",
            "MULTI",
            "SET c 1",
            "DISCARD",
            "GET c",
            "MULTI",
            "UNWATCH",
            "BLPOP none 0",
            "BRPOPLPUSH none x 0",
            "BLMPOP 0 1 none LEFT",
            "EXEC",
            "MULTI",
            "EXEC",
            "HELLO 3",
            "MULTI",
            "GET nokey",
            "BLPOP none 0",
            "EXEC",
            "WATCH w",
            "SET w 1",
            "MULTI",
            "EXEC",
        ] {
            if cmd == "HELLO 3" {
                c.call(&["HELLO", "3"]);
                continue;
            }
            call(&mut c, t, cmd);
        }
    });
}

#[test]
fn watch_touched_by_other_clients_and_keyspace_events() {
    differential(&[], |port, t| {
        let mut a = Raw::connect(port);
        let mut b = Raw::connect(port);
        let steps: &[(&str, u8)] = &[
            // (command, connection 0 = a, 1 = b)
            ("SET k v", 1),
            ("WATCH k", 0),
            ("SET k v2", 1),
            ("MULTI", 0),
            ("SET k mine", 0),
            ("EXEC", 0),
            ("GET k", 0),
            // Not touched: EXEC runs.
            ("WATCH k", 0),
            ("GET k", 1),
            ("MULTI", 0),
            ("SET k mine", 0),
            ("EXEC", 0),
            // DEL of a missing key touches nothing; of the watched key, it does.
            ("WATCH k", 0),
            ("DEL nokey", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("WATCH k nokey", 0),
            ("DEL k nokey", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            // FLUSHALL touches watched keys that exist, not the others.
            ("WATCH missing", 0),
            ("FLUSHALL", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("SET k v", 1),
            ("WATCH k", 0),
            ("FLUSHDB", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            // SWAPDB brings another keyspace in.
            ("SELECT 1", 1),
            ("SET s v", 1),
            ("WATCH s", 0),
            ("SWAPDB 0 1", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("SWAPDB 0 0", 1),
            ("WATCH s", 0),
            ("SWAPDB 0 0", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("SELECT 0", 1),
            // RENAME touches both names; MOVE the source.
            ("SET r1 v", 1),
            ("WATCH r2", 0),
            ("RENAME r1 r2", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("WATCH r2", 0),
            ("MOVE r2 2", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            // A failed write (wrong type) or a no-op touches nothing.
            ("SET str v", 1),
            ("WATCH str", 0),
            ("LPUSH str x", 1),
            ("SET str v NX", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            // The client's own write touches too.
            ("WATCH self", 0),
            ("SET self 1", 0),
            ("MULTI", 0),
            ("INCR self", 0),
            ("EXEC", 0),
            // UNWATCH forgets.
            ("WATCH u", 0),
            ("SET u 1", 1),
            ("UNWATCH", 0),
            ("MULTI", 0),
            ("INCR u", 0),
            ("EXEC", 0),
            // Watching in another db.
            ("SELECT 3", 0),
            ("WATCH d3", 0),
            ("SET d3 x", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("SELECT 3", 1),
            ("SET d3 x", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("SELECT 0", 0),
            // A blocking pop that serves touches the key it popped, not the others.
            ("RPUSH l2 a", 1),
            ("WATCH l1 l2", 0),
            ("BLPOP l1 l2 0", 1),
            ("MULTI", 0),
            ("EXEC", 0),
            ("RPUSH l2 a", 1),
            ("WATCH l1", 0),
            ("BLPOP l1 l2 0", 1),
            ("MULTI", 0),
            ("EXEC", 0),
        ];
        for (cmd, who) in steps {
            let c = if *who == 0 { &mut a } else { &mut b };
            call(c, t, cmd);
        }
        // RESP3: an aborted EXEC is `_`.
        a.call(&["HELLO", "3"]);
        call(&mut a, t, "WATCH k");
        call(&mut b, t, "SET k v3");
        call(&mut a, t, "MULTI");
        call(&mut a, t, "EXEC");
    });
}

#[test]
fn watch_and_expiry() {
    differential(&["--enable-debug-command", "yes"], |port, t| {
        let mut a = Raw::connect(port);
        // SET key v PX ms, then WATCH key; again (UNWATCH first) until both ran well
        // within the TTL, as a busy machine may delay the WATCH past it. Only the attempt
        // that counts goes into the transcript.
        let set_watch = |a: &mut Raw, t: &mut Transcript, key: &str, ms: u64| loop {
            let mut attempt = Vec::new();
            let start = std::time::Instant::now();
            call(a, &mut attempt, &format!("SET {key} v PX {ms}"));
            call(a, &mut attempt, &format!("WATCH {key}"));
            if start.elapsed() < Duration::from_millis(ms / 2) {
                t.extend(attempt);
                return;
            }
            a.call(&["UNWATCH"]);
        };
        // Expires between WATCH and EXEC (not yet deleted): EXEC fails.
        set_watch(&mut a, t, "e", 150);
        std::thread::sleep(Duration::from_millis(300));
        call(&mut a, t, "MULTI");
        call(&mut a, t, "PING");
        call(&mut a, t, "EXEC");
        // Already expired when watched: EXEC runs.
        call(&mut a, t, "SET e2 v PX 50");
        std::thread::sleep(Duration::from_millis(150));
        call(&mut a, t, "WATCH e2");
        call(&mut a, t, "MULTI");
        call(&mut a, t, "PING");
        call(&mut a, t, "EXEC");
        // Deleted by active expiry meanwhile: EXEC fails.
        set_watch(&mut a, t, "e3", 100);
        std::thread::sleep(Duration::from_millis(1200));
        call(&mut a, t, "EXISTS e3");
        call(&mut a, t, "MULTI");
        call(&mut a, t, "PING");
        call(&mut a, t, "EXEC");
    });
}

#[test]
fn oom_inside_multi_and_at_exec() {
    differential(&[], |port, t| {
        let mut a = Raw::connect(port);
        let mut b = Raw::connect(port);
        call(&mut a, t, "MULTI");
        call(&mut a, t, "SET x 1");
        call(&mut a, t, "GET x");
        call(&mut b, t, "CONFIG SET maxmemory 1");
        // EXEC holding a denyoom command is refused as a whole.
        call(&mut a, t, "EXEC");
        call(&mut a, t, "GET x");
        // Queueing anything is refused while out of memory (the transaction is flagged).
        call(&mut a, t, "MULTI");
        call(&mut a, t, "GET x");
        call(&mut a, t, "DEL x");
        call(&mut a, t, "EXEC");
        // A read-only transaction queued before runs.
        call(&mut b, t, "CONFIG SET maxmemory 0");
        call(&mut a, t, "MULTI");
        call(&mut a, t, "GET x");
        call(&mut b, t, "CONFIG SET maxmemory 1");
        call(&mut a, t, "EXEC");
        call(&mut b, t, "CONFIG SET maxmemory 0");
        // Runtime errors do not roll back.
        call(&mut a, t, "SET s str");
        call(&mut a, t, "MULTI");
        call(&mut a, t, "INCR s");
        call(&mut a, t, "SET s2 ok");
        call(&mut a, t, "LPUSH s x");
        call(&mut a, t, "EXEC");
        call(&mut a, t, "GET s2");
    });
}

// ---- the AOF -------------------------------------------------------------------------

#[test]
fn aof_logs_a_transaction_as_one_block() {
    let dir = temp_dir("block");
    {
        let s = start_aof(&dir, &["--appendfsync", "always"]);
        let mut a = Raw::connect(s.port);
        a.call(&["SET", "before", "1"]);
        a.call(&["MULTI"]);
        a.call(&["SET", "t1", "a"]);
        a.call(&["INCR", "before"]);
        a.call(&["GET", "t1"]);
        a.call(&["SELECT", "2"]);
        a.call(&["SET", "t2", "b"]);
        // EXEC's reply is held until the block is durable, then arrives whole.
        assert_eq!(
            a.call(&["EXEC"]),
            b"*5\r\n+OK\r\n:2\r\n$1\r\na\r\n+OK\r\n+OK\r\n"
        );
        // A read-only transaction logs nothing.
        a.call(&["MULTI"]);
        a.call(&["GET", "t2"]);
        assert_eq!(a.call(&["EXEC"]), b"*1\r\n$1\r\nb\r\n");
    }
    let text = String::from_utf8_lossy(&std::fs::read(last_incr_file(&dir)).unwrap()).into_owned();
    assert_eq!(text.matches("$5\r\nMULTI\r\n").count(), 1, "{text}");
    assert_eq!(text.matches("$4\r\nEXEC\r\n").count(), 1, "{text}");
    let m = text.find("MULTI").unwrap();
    let e = text.find("EXEC").unwrap();
    let inside = &text[m..e];
    assert!(inside.contains("t1") && inside.contains("t2") && inside.contains("INCR"));
    assert!(!inside.contains("GET"));
    // Replay applies it.
    let s = start_aof(&dir, &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["GET", "before"]), b"$1\r\n2\r\n");
    assert_eq!(c.call(&["GET", "t1"]), b"$1\r\na\r\n");
    c.call(&["SELECT", "2"]);
    assert_eq!(c.call(&["GET", "t2"]), b"$1\r\nb\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn aof_block_cut_at_the_tail_is_dropped() {
    let dir = temp_dir("torn");
    {
        let s = start_aof(&dir, &["--appendfsync", "always"]);
        let mut a = Raw::connect(s.port);
        a.call(&["SET", "kept", "1"]);
        a.call(&["MULTI"]);
        a.call(&["SET", "lost1", "x"]);
        a.call(&["SET", "lost2", "y"]);
        a.call(&["EXEC"]);
    }
    // A crash after the block's commands were written but before its EXEC: cut the file
    // at the start of the last entry (EXEC's header).
    let path = last_incr_file(&dir);
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let exec_at = text.rfind("#HDR:").unwrap();
    assert!(text[exec_at..].contains("EXEC"), "{text}");
    std::fs::write(&path, &bytes[..exec_at]).unwrap();
    let multi_at = text.find("$5\r\nMULTI").unwrap();
    {
        let s = start_aof(&dir, &[]);
        let mut c = Raw::connect(s.port);
        assert_eq!(c.call(&["GET", "kept"]), b"$1\r\n1\r\n");
        assert_eq!(c.call(&["EXISTS", "lost1", "lost2"]), b":0\r\n");
        // The block was cut from the file: later writes replay outside any transaction.
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        assert!(
            len < multi_at,
            "file still holds the MULTI ({len} >= {multi_at})"
        );
        c.call(&["SET", "after", "2"]);
    }
    let s = start_aof(&dir, &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["GET", "after"]), b"$1\r\n2\r\n");
    assert_eq!(c.call(&["GET", "kept"]), b"$1\r\n1\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- large values in EXEC replies ------------------------------------------------------

fn read_n(c: &mut Raw, n: usize) -> Vec<u8> {
    use std::io::Read;
    let mut got = Vec::with_capacity(n);
    let mut tmp = vec![0u8; 1 << 16];
    while got.len() < n {
        let want = tmp.len().min(n - got.len());
        let r = c.s.read(&mut tmp[..want]).expect("read");
        assert!(r > 0, "closed");
        got.extend_from_slice(&tmp[..r]);
    }
    got
}

/// EXEC mixing GETs of out-of-line values (>= 16 KiB / 64 KiB with io-threads: sent by
/// reference) and small ones, with RESP2 and RESP3, pipelined with other commands, while
/// the big value is overwritten by the same transaction.
#[test]
fn exec_mixes_big_and_small_values() {
    let big1: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let big2: Vec<u8> = (0..100_000u32).map(|i| (i * 13 % 241) as u8).collect();
    for io in ["1", "3"] {
        let s = start_cairn(&["--io-threads", io]);
        let mut a = Raw::connect(s.port);
        a.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        a.cmd(&[b"SET", b"big1", &big1]);
        assert_eq!(a.reply(), b"+OK\r\n");
        a.cmd(&[b"SET", b"big2", &big2]);
        assert_eq!(a.reply(), b"+OK\r\n");
        a.call(&["SET", "small", "s"]);
        for resp3 in [false, true] {
            if resp3 {
                a.call(&["HELLO", "3"]);
            }
            let mut wire = encode(&[b"PING"]);
            wire.extend(encode(&[b"MULTI"]));
            wire.extend(encode(&[b"GET", b"big1"]));
            wire.extend(encode(&[b"GET", b"small"]));
            wire.extend(encode(&[b"GET", b"big2"]));
            wire.extend(encode(&[b"SET", b"big1", b"replaced"]));
            wire.extend(encode(&[b"GET", b"big1"]));
            wire.extend(encode(&[b"MGET", b"big2", b"nokey", b"small"]));
            wire.extend(encode(&[b"EXEC"]));
            wire.extend(encode(&[b"GET", b"big2"]));
            a.send(&wire);
            let mut want = b"+PONG\r\n+OK\r\n".to_vec();
            for _ in 0..6 {
                want.extend_from_slice(b"+QUEUED\r\n");
            }
            want.extend_from_slice(b"*6\r\n");
            want.extend(bulk(&big1));
            want.extend(bulk(b"s"));
            want.extend(bulk(&big2));
            want.extend_from_slice(b"+OK\r\n");
            want.extend(bulk(b"replaced"));
            want.extend_from_slice(b"*3\r\n");
            want.extend(bulk(&big2));
            want.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" });
            want.extend(bulk(b"s"));
            want.extend(bulk(&big2));
            let got = read_n(&mut a, want.len());
            assert!(got == want, "io-threads {io} resp3 {resp3}: reply differs");
            a.cmd(&[b"SET", b"big1", &big1]);
            assert_eq!(a.reply(), b"+OK\r\n");
        }
        let refd: u64 = a
            .info("stats", "reply_bytes_referenced")
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            refd >= 2 * (big1.len() + 2 * big2.len()) as u64,
            "referenced {refd}"
        );
    }
}

/// After a failed background save (stop-writes-on-bgsave-error): queueing a write is
/// refused with MISCONF and flags the transaction; an EXEC holding a write queued before
/// the failure is refused as a whole; read-only transactions run; PING is refused too
/// (texts checked against redis-server 7.0.15 by hand: its `dir` cannot be removed from a
/// test portably).
#[test]
fn misconf_inside_multi_and_at_exec() {
    let dir = temp_dir("misconf");
    let d = dir.to_str().unwrap();
    let s = start_cairn(&["--save", "3600 1", "--dir", d]);
    let mut a = Raw::connect(s.port);
    let mut b = Raw::connect(s.port);
    a.call(&["SET", "a", "1"]);
    assert_eq!(b.call(&["MULTI"]), b"+OK\r\n");
    assert_eq!(b.call(&["SET", "early", "1"]), b"+QUEUED\r\n");
    std::fs::remove_dir_all(&dir).unwrap();
    a.call(&["BGSAVE"]);
    wait_until(DEADLINE, "the BGSAVE failed", || {
        a.info("persistence", "rdb_last_bgsave_status").as_deref() == Some("err")
    });
    let misconf = cairn::commands::executor::snapshot_ops::MISCONF_ERR;
    assert_eq!(
        show(&b.call(&["EXEC"])),
        format!("-EXECABORT Transaction discarded because of: {misconf}\r\n")
    );
    assert_eq!(b.call(&["GET", "early"]), b"$-1\r\n");
    a.call(&["MULTI"]);
    assert_eq!(show(&a.call(&["SET", "c", "3"])), format!("-{misconf}\r\n"));
    assert_eq!(
        a.call(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    a.call(&["MULTI"]);
    assert_eq!(a.call(&["GET", "a"]), b"+QUEUED\r\n");
    assert_eq!(show(&a.call(&["SET", "z", "1"])), format!("-{misconf}\r\n"));
    assert_eq!(
        a.call(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    a.call(&["MULTI"]);
    a.call(&["GET", "a"]);
    assert_eq!(a.call(&["EXEC"]), b"*1\r\n$1\r\n1\r\n");
    a.call(&["MULTI"]);
    assert_eq!(show(&a.call(&["PING"])), format!("-{misconf}\r\n"));
    assert_eq!(
        a.call(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    drop(s);
}
