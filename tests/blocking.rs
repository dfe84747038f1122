//! Blocking list commands with several real connections, on both socket paths
//! (io-threads 1: the executor's mio loop; io-threads 3: I/O threads that keep a blocked
//! connection's batch in flight): wake-up on push / move / MULTI-EXEC, FIFO fairness,
//! fractional timeouts, CLIENT UNBLOCK, disconnects, pipelining behind a blocked command,
//! RESP3 nulls, and the AOF logging the non-blocking form.

mod common;
use common::*;
use std::time::{Duration, Instant};

const MODES: &[&str] = &["1", "3"];

/// Waits until INFO says `n` clients are blocked (the BLPOP reached the server).
fn wait_blocked(c: &mut Raw, n: usize) {
    wait_until(DEADLINE, &format!("{n} clients are blocked"), || {
        c.info("clients", "blocked_clients").unwrap_or_default() == n.to_string()
    });
}

fn arr(items: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", items.len()).into_bytes();
    for i in items {
        v.extend_from_slice(format!("${}\r\n{i}\r\n", i.len()).as_bytes());
    }
    v
}

#[test]
fn push_wakes_waiters_first_come_first_served() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        let mut b = Raw::connect(s.port);
        let mut c = Raw::connect(s.port);
        a.cmd(&[b"BLPOP", b"q1", b"q2", b"0"]);
        wait_blocked(&mut admin, 1);
        b.cmd(&[b"BLPOP", b"q2", b"0"]);
        wait_blocked(&mut admin, 2);
        c.cmd(&[b"BRPOP", b"q2", b"0"]);
        wait_blocked(&mut admin, 3);
        // One push of three elements: a (first) gets the head, then b, then c (BRPOP: tail).
        assert_eq!(admin.call(&["RPUSH", "q2", "x", "y", "z"]), b":3\r\n");
        assert_eq!(a.reply(), arr(&["q2", "x"]), "io-threads {m}");
        assert_eq!(b.reply(), arr(&["q2", "y"]), "io-threads {m}");
        assert_eq!(c.reply(), arr(&["q2", "z"]), "io-threads {m}");
        assert_eq!(admin.call(&["EXISTS", "q2"]), b":0\r\n");
        wait_blocked(&mut admin, 0);
        // Served in arrival order when one element comes at a time.
        a.cmd(&[b"BLPOP", b"f", b"0"]);
        wait_blocked(&mut admin, 1);
        b.cmd(&[b"BLPOP", b"f", b"0"]);
        wait_blocked(&mut admin, 2);
        admin.call(&["LPUSH", "f", "1"]);
        assert_eq!(a.reply(), arr(&["f", "1"]));
        admin.call(&["LPUSH", "f", "2"]);
        assert_eq!(b.reply(), arr(&["f", "2"]));
        // A key of another type does not serve; a later list push does.
        a.cmd(&[b"BLPOP", b"t", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["SET", "t", "str"]);
        admin.call(&["DEL", "t"]);
        admin.call(&["RPUSH", "t", "v"]);
        assert_eq!(a.reply(), arr(&["t", "v"]));
    }
}

#[test]
fn timeouts_are_fractional_and_errors_match_redis() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut a = Raw::connect(s.port);
        let t = Instant::now();
        assert_eq!(a.call(&["BLPOP", "none", "0.25"]), b"*-1\r\n");
        let el = t.elapsed();
        // At least the timeout (no upper bound: a busy machine may answer late; a
        // timeout read as whole seconds or as "forever" would exceed Raw's read timeout).
        assert!(el >= Duration::from_millis(240), "{el:?}");
        // Every list command times out with a null array (Redis 7.0).
        assert_eq!(
            a.call(&["BLMOVE", "none", "d", "LEFT", "RIGHT", "0.01"]),
            b"*-1\r\n"
        );
        assert_eq!(a.call(&["BRPOPLPUSH", "none", "d", "0.01"]), b"*-1\r\n");
        assert_eq!(a.call(&["BLMPOP", "0.01", "1", "none", "LEFT"]), b"*-1\r\n");
        assert_eq!(a.call(&["HELLO", "3"])[0], b'%');
        assert_eq!(a.call(&["BRPOP", "none", "0.01"]), b"_\r\n");
        assert_eq!(
            a.call(&["BLMOVE", "none", "d", "LEFT", "RIGHT", "0.01"]),
            b"_\r\n"
        );
        assert_eq!(a.call(&["HELLO", "2"])[0], b'*');
        assert_eq!(
            a.call(&["BLPOP", "k", "-1"]),
            b"-ERR timeout is negative\r\n"
        );
        assert_eq!(
            a.call(&["BLPOP", "k", "abc"]),
            b"-ERR timeout is not a float or out of range\r\n"
        );
        assert_eq!(
            a.call(&["BLMPOP", "x", "1", "k", "LEFT", "COUNT", "0"]),
            b"-ERR count should be greater than 0\r\n"
        );
        let mut admin = Raw::connect(s.port);
        assert_eq!(admin.info("clients", "blocked_clients").unwrap(), "0");
        assert_eq!(
            admin.info("clients", "clients_in_timeout_table").unwrap(),
            "0"
        );
    }
}

#[test]
fn client_unblock_timeout_and_error() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        let id = String::from_utf8(a.call(&["CLIENT", "ID"])).unwrap();
        let id = id.trim_start_matches(':').trim().to_string();
        assert_eq!(admin.call(&["CLIENT", "UNBLOCK", &id]), b":0\r\n");
        a.cmd(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut admin, 1);
        assert!(String::from_utf8_lossy(&admin.call(&["CLIENT", "LIST"])).contains("flags=b"));
        assert_eq!(
            admin.call(&["CLIENT", "UNBLOCK", &id, "TIMEOUT"]),
            b":1\r\n"
        );
        assert_eq!(a.reply(), b"*-1\r\n");
        a.cmd(&[b"BLMOVE", b"q", b"d", b"LEFT", b"LEFT", b"0"]);
        wait_blocked(&mut admin, 1);
        assert_eq!(admin.call(&["CLIENT", "UNBLOCK", &id, "ERROR"]), b":1\r\n");
        assert_eq!(
            a.reply(),
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        );
        assert_eq!(
            admin.call(&["CLIENT", "UNBLOCK", &id, "FOO"]),
            b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
        );
        // The unblocked client goes on normally.
        assert_eq!(a.call(&["PING"]), b"+PONG\r\n");
        wait_blocked(&mut admin, 0);
    }
}

#[test]
fn disconnected_waiter_is_forgotten() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        {
            let mut a = Raw::connect(s.port);
            a.cmd(&[b"BLPOP", b"q", b"0"]);
            wait_blocked(&mut admin, 1);
        }
        wait_blocked(&mut admin, 0);
        let mut b = Raw::connect(s.port);
        b.cmd(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "q", "only"]);
        // The element goes to the live waiter, not the gone one.
        assert_eq!(b.reply(), arr(&["q", "only"]));
        admin.call(&["RPUSH", "q", "stays"]);
        assert_eq!(admin.call(&["LLEN", "q"]), b":1\r\n");
    }
}

#[test]
fn blmove_same_key_and_chained_moves() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        let mut b = Raw::connect(s.port);
        // Source == destination: a rotation.
        a.cmd(&[b"BLMOVE", b"s", b"s", b"RIGHT", b"LEFT", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "s", "x", "y"]);
        assert_eq!(a.reply(), b"$1\r\ny\r\n");
        assert_eq!(admin.call(&["LRANGE", "s", "0", "-1"]), arr(&["y", "x"]));
        // A served BLMOVE pushes to a key another client waits on: served in the same turn.
        b.cmd(&[b"BLPOP", b"dst", b"0"]);
        wait_blocked(&mut admin, 1);
        a.cmd(&[b"BRPOPLPUSH", b"src", b"dst", b"0"]);
        wait_blocked(&mut admin, 2);
        admin.call(&["LPUSH", "src", "hop"]);
        assert_eq!(a.reply(), b"$3\r\nhop\r\n");
        assert_eq!(b.reply(), arr(&["dst", "hop"]));
        assert_eq!(admin.call(&["EXISTS", "src", "dst"]), b":0\r\n");
        // BLMPOP with COUNT takes what is there, up to COUNT.
        a.cmd(&[
            b"BLMPOP", b"0", b"2", b"m1", b"m2", b"RIGHT", b"COUNT", b"5",
        ]);
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "m2", "1", "2", "3"]);
        assert_eq!(
            a.reply(),
            b"*2\r\n$2\r\nm2\r\n*3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n"
        );
    }
}

#[test]
fn pipelined_commands_wait_behind_a_blocked_one() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        let mut wire = encode(&[b"BLPOP", b"q", b"0"]);
        wire.extend(encode(&[b"SET", b"after", b"1"]));
        wire.extend(encode(&[b"INCR", b"after"]));
        wire.extend(encode(&[b"BLPOP", b"q", b"0"]));
        wire.extend(encode(&[b"GET", b"after"]));
        a.send(&wire);
        wait_blocked(&mut admin, 1);
        // Nothing behind the blocked command ran.
        assert_eq!(admin.call(&["GET", "after"]), b"$-1\r\n");
        admin.call(&["RPUSH", "q", "v1"]);
        assert_eq!(a.reply(), arr(&["q", "v1"]));
        assert_eq!(a.reply(), b"+OK\r\n");
        assert_eq!(a.reply(), b":2\r\n");
        // The second BLPOP blocks again, and the GET waits behind it.
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "q", "v2"]);
        assert_eq!(a.reply(), arr(&["q", "v2"]));
        assert_eq!(a.reply(), b"$1\r\n2\r\n");
        wait_blocked(&mut admin, 0);
    }
}

#[test]
fn multi_exec_wakes_after_the_whole_transaction() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        a.cmd(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut admin, 1);
        // Inside the transaction the list gets two elements and loses one: the waiter is
        // served after EXEC, from what is left.
        assert_eq!(admin.call(&["MULTI"]), b"+OK\r\n");
        assert_eq!(admin.call(&["RPUSH", "q", "a", "b"]), b"+QUEUED\r\n");
        assert_eq!(admin.call(&["LPOP", "q"]), b"+QUEUED\r\n");
        assert_eq!(admin.call(&["EXEC"]), b"*2\r\n:2\r\n$1\r\na\r\n");
        assert_eq!(a.reply(), arr(&["q", "b"]));
        // A push and pop in one transaction leave nothing: the waiter stays blocked.
        a.cmd(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["MULTI"]);
        admin.call(&["RPUSH", "q", "c"]);
        admin.call(&["RPOP", "q"]);
        assert_eq!(admin.call(&["EXEC"]), b"*2\r\n:1\r\n$1\r\nc\r\n");
        std::thread::sleep(Duration::from_millis(50));
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "q", "d"]);
        assert_eq!(a.reply(), arr(&["q", "d"]));
        // Blocking commands inside MULTI answer at once, as timed out.
        a.call(&["MULTI"]);
        a.call(&["BLPOP", "none", "0"]);
        a.call(&["BLMOVE", "none", "x", "LEFT", "LEFT", "0"]);
        assert_eq!(a.call(&["EXEC"]), b"*2\r\n*-1\r\n$-1\r\n");
    }
}

#[test]
fn served_pops_are_logged_in_their_non_blocking_form() {
    let dir = temp_dir("blocking-aof");
    {
        let s = start_aof(&dir, &["--appendfsync", "always"]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        a.cmd(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "q", "1", "2", "3"]);
        assert_eq!(a.reply(), arr(&["q", "1"]));
        a.cmd(&[b"BLMOVE", b"e", b"q", b"LEFT", b"RIGHT", b"0"]);
        wait_blocked(&mut admin, 1);
        admin.call(&["RPUSH", "e", "4"]);
        assert_eq!(a.reply(), b"$1\r\n4\r\n");
        assert_eq!(
            a.call(&["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "1"]),
            b"*2\r\n$1\r\nq\r\n*1\r\n$1\r\n2\r\n"
        );
        assert_eq!(admin.call(&["LRANGE", "q", "0", "-1"]), arr(&["3", "4"]));
    }
    let incr = std::fs::read(last_incr_file(&dir)).unwrap();
    let text = String::from_utf8_lossy(&incr);
    assert!(
        !text.contains("BLPOP") && !text.contains("BLMOVE") && !text.contains("BLMPOP"),
        "{text}"
    );
    assert!(text.contains("$4\r\nLPOP\r\n$1\r\nq\r\n"), "{text}");
    assert!(text.contains("$5\r\nLMOVE\r\n"), "{text}");
    // Replay reaches the same list.
    let s = start_aof(&dir, &[]);
    let mut c = Raw::connect(s.port);
    assert_eq!(c.call(&["LRANGE", "q", "0", "-1"]), arr(&["3", "4"]));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BZPOPMIN / BZPOPMAX / BZMPOP block like the list pops: FIFO among waiters, served by a
/// ZADD (and not by a push to a list of the same name), fractional timeouts, null array
/// on timeout, immediate service, the AOF gets ZPOPMIN/ZPOPMAX forms.
#[test]
fn sorted_set_pops_block_and_wake() {
    for &m in MODES {
        let s = start_cairn(&[
            "--io-threads",
            m,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]);
        let mut admin = Raw::connect(s.port);
        let mut a = Raw::connect(s.port);
        let mut b = Raw::connect(s.port);
        let mut c = Raw::connect(s.port);
        a.cmd(&[b"BZPOPMIN", b"z1", b"z2", b"0"]);
        wait_blocked(&mut admin, 1);
        b.cmd(&[b"BZPOPMAX", b"z2", b"0"]);
        wait_blocked(&mut admin, 2);
        c.cmd(&[b"BZMPOP", b"0", b"2", b"zz", b"z2", b"MIN", b"COUNT", b"5"]);
        wait_blocked(&mut admin, 3);
        // A list under a waited name does not serve a sorted-set pop.
        assert_eq!(admin.call(&["RPUSH", "zz", "x"]), b":1\r\n");
        assert_eq!(admin.call(&["DEL", "zz"]), b":1\r\n");
        assert_eq!(
            admin.call(&["ZADD", "z2", "1", "a", "2", "b", "3", "c", "4", "d"]),
            b":4\r\n"
        );
        assert_eq!(a.reply(), arr(&["z2", "a", "1"]), "io-threads {m}");
        assert_eq!(b.reply(), arr(&["z2", "d", "4"]), "io-threads {m}");
        assert_eq!(
            c.reply(),
            b"*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
            "io-threads {m}"
        );
        assert_eq!(admin.call(&["EXISTS", "z2"]), b":0\r\n");
        // Immediate service, timeouts, errors.
        admin.call(&["ZADD", "z3", "5", "e"]);
        assert_eq!(admin.call(&["BZPOPMIN", "z3", "0"]), arr(&["z3", "e", "5"]));
        let t = Instant::now();
        assert_eq!(admin.call(&["BZPOPMAX", "nokey", "0.1"]), b"*-1\r\n");
        // (the deadline counts from the command clock, read at most a few ms earlier)
        assert!(
            t.elapsed() >= Duration::from_millis(90),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(
            admin.call(&["BZPOPMIN", "z", "-1"]),
            b"-ERR timeout is negative\r\n"
        );
        assert_eq!(
            admin.call(&["BZPOPMIN", "z", "x"]),
            b"-ERR timeout is not a float or out of range\r\n"
        );
        // Inside MULTI they do not block.
        admin.call(&["MULTI"]);
        admin.call(&["BZPOPMIN", "nokey", "0"]);
        assert_eq!(admin.call(&["EXEC"]), b"*1\r\n*-1\r\n");
        // The log holds the non-blocking forms.
        let incr = s.dir.join("appendonlydir/appendonly.aof.1.incr.aof");
        let text = String::from_utf8_lossy(&std::fs::read(incr).unwrap()).into_owned();
        assert!(
            text.contains("$7\r\nZPOPMIN\r\n$2\r\nz2\r\n"),
            "io-threads {m}: {text}"
        );
        assert!(text.contains("$7\r\nZPOPMAX\r\n"), "io-threads {m}");
        assert!(!text.contains("BZPOP"), "io-threads {m}");
    }
}

/// What a connection received within a short look (nothing, if the server holds it).
fn nothing_yet(c: &mut Raw) -> bool {
    c.s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut b = [0u8; 64];
    let none = matches!(std::io::Read::read(&mut c.s, &mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut);
    c.s.set_read_timeout(Some(DEADLINE)).unwrap();
    none
}

/// CLIENT PAUSE WRITE: reads run, writes (and pipelined commands behind them) wait until
/// CLIENT UNPAUSE, in order; the same replies as Redis in the end.
#[test]
fn client_pause_write_holds_writes_until_unpause() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m]);
        let r = start_redis(&[]);
        for port in [s.port, r.port] {
            let mut admin = Raw::connect(port);
            let mut w = Raw::connect(port);
            assert_eq!(admin.call(&["SET", "k", "old"]), b"+OK\r\n");
            assert_eq!(
                admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]),
                b"+OK\r\n"
            );
            assert_eq!(w.call(&["GET", "k"]), b"$3\r\nold\r\n");
            assert_eq!(w.call(&["EVAL_RO", "return 1", "0"]), b":1\r\n");
            w.send(&[encode(&[b"SET", b"k", b"new"]), encode(&[b"GET", b"k"])].concat());
            wait_blocked(&mut admin, 1);
            assert!(
                nothing_yet(&mut w),
                "port {port}: a write ran during CLIENT PAUSE WRITE"
            );
            // PUBLISH may replicate: it waits too.
            let mut p = Raw::connect(port);
            p.cmd(&[b"PUBLISH", b"ch", b"m"]);
            wait_blocked(&mut admin, 2);
            assert_eq!(admin.call(&["GET", "k"]), b"$3\r\nold\r\n");
            assert_eq!(admin.call(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
            assert_eq!(w.reply(), b"+OK\r\n");
            assert_eq!(w.reply(), b"$3\r\nnew\r\n");
            assert_eq!(p.reply(), b":0\r\n");
            wait_blocked(&mut admin, 0);
        }
    }
}

/// CLIENT PAUSE ALL ends by itself at its timeout; expired keys stay (they read as
/// missing) until it ends; errors as Redis.
#[test]
fn client_pause_all_ends_at_its_timeout_and_keeps_expired_keys() {
    for &m in MODES {
        let s = start_cairn(&["--io-threads", m, "--enable-debug-command", "yes"]);
        let mut admin = Raw::connect(s.port);
        let mut c = Raw::connect(s.port);
        // Only a lookup deletes the key once its TTL passes.
        assert_eq!(admin.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
        assert_eq!(admin.call(&["SET", "e", "v", "PX", "1"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]),
            b"+OK\r\n"
        );
        assert_eq!(c.call(&["GET", "e"]), b"$-1\r\n");
        assert_eq!(
            c.call(&["DBSIZE"]),
            b":1\r\n",
            "a lookup deleted a key during a pause"
        );
        assert_eq!(admin.call(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
        assert_eq!(admin.call(&["CLIENT", "PAUSE", "600", "ALL"]), b"+OK\r\n");
        c.cmd(&[b"DBSIZE"]);
        assert_eq!(
            c.reply(),
            b":1\r\n",
            "the pause ends by itself and the key is still there"
        );
        wait_until(DEADLINE, "the expired key is gone after the pause", || {
            c.call(&["GET", "e"]) == b"$-1\r\n" && c.call(&["DBSIZE"]) == b":0\r\n"
        });
    }
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same_replies(
        &mut rc,
        &mut rr,
        &[
            &["CLIENT", "PAUSE"],
            &["CLIENT", "PAUSE", "x"],
            &["CLIENT", "PAUSE", "-1"],
            &["CLIENT", "PAUSE", "10", "BOGUS"],
            &["CLIENT", "PAUSE", "10", "WRITE", "extra"],
            &["CLIENT", "PAUSE", "9223372036854775807"],
            &["CLIENT", "PAUSE", "0", "write"],
            &["CLIENT", "UNPAUSE", "x"],
            &["CLIENT", "UNPAUSE"],
            &[
                "COMMAND",
                "INFO",
                "PUBLISH",
                "CLIENT|PAUSE",
                "CLIENT|UNPAUSE",
            ],
        ],
    );
}
