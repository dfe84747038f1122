//! MIGRATE, compared with redis-server 7.0.15: the same steps run on a cairn source with
//! a cairn target and on a Redis source with a Redis target, every reply compared; then
//! the keys cross between the two kinds of server both ways; bad targets and bad
//! arguments; the log of a source keeps the deletion across a restart.

mod common;
use common::*;
use std::io::Read;
use std::net::TcpListener;

/// A source and a target of one kind, the target with a password.
struct Pair {
    _src: ServerProc,
    _dst: ServerProc,
    src: Raw,
    dst: Raw,
    dst_port: u16,
}

fn pair(start: fn(&[&str]) -> ServerProc) -> Pair {
    let src_proc = start(&[]);
    let dst_proc = start(&["--requirepass", "sesame"]);
    let src = Raw::connect(src_proc.port);
    let mut dst = Raw::connect(dst_proc.port);
    assert_eq!(show(&dst.call(&["AUTH", "sesame"])), "+OK\r\n");
    let dst_port = dst_proc.port;
    Pair {
        _src: src_proc,
        _dst: dst_proc,
        src,
        dst,
        dst_port,
    }
}

/// The replies of one run of the steps (the target's port written as PORT).
fn transcript(p: &mut Pair) -> Vec<String> {
    let port = p.dst_port.to_string();
    let mut t = Vec::new();
    let on_src = |p: &mut Pair, args: &[&str]| {
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "PORT" { port.as_str() } else { a })
            .collect();
        show(&p.src.call(&args))
    };
    let setup: &[&[&str]] = &[
        &["SET", "s", "hello"],
        &["SET", "ttl", "v", "PX", "500000"],
        &["RPUSH", "l", "a", "b", "c"],
        &["HSET", "h", "f", "1", "g", "2"],
        &["SADD", "set", "x", "y", "3"],
        &["SADD", "ints", "1", "2", "3"],
        &["ZADD", "z", "1", "a", "2.5", "b"],
        &["XADD", "st", "1-1", "f", "v"],
        &["SET", "k1", "1"],
        &["SET", "k2", "2"],
        &["SET", "busy", "here"],
        &["SET", "c", "copied"],
    ];
    for s in setup {
        t.push(on_src(p, s));
    }
    assert_eq!(show(&p.dst.call(&["SET", "busy", "there"])), "+OK\r\n");
    // One command per line, split at spaces; '' is an empty argument.
    let steps: &[&str] = &[
        // Wrong password, then the right one; one key per call, db 0.
        "MIGRATE 127.0.0.1 PORT s 0 5000 AUTH wrong",
        "EXISTS s",
        "MIGRATE 127.0.0.1 PORT s 0 5000 AUTH sesame",
        "EXISTS s",
        "MIGRATE 127.0.0.1 PORT ttl 0 5000 AUTH2 default sesame",
        // Another db, several keys, every type.
        "MIGRATE 127.0.0.1 PORT '' 3 5000 AUTH sesame KEYS l h set ints z st missing",
        "EXISTS l h set ints z st",
        // COPY keeps the source key; a second one is refused without REPLACE.
        "MIGRATE 127.0.0.1 PORT c 0 5000 COPY AUTH sesame",
        "MIGRATE 127.0.0.1 PORT c 0 5000 COPY AUTH sesame",
        "MIGRATE 127.0.0.1 PORT c 0 5000 COPY REPLACE AUTH sesame",
        "EXISTS c",
        // One refused key among several: the others move.
        "MIGRATE 127.0.0.1 PORT '' 0 5000 AUTH sesame KEYS k1 busy k2",
        "EXISTS k1 busy k2",
        "MIGRATE 127.0.0.1 PORT nokey 0 5000 AUTH sesame",
        // Bad arguments.
        "MIGRATE 127.0.0.1 PORT x 0 5000 KEYS a",
        "MIGRATE 127.0.0.1 PORT c 0 5000 AUTH",
        "MIGRATE 127.0.0.1 PORT c 0 5000 AUTH2 u",
        "MIGRATE 127.0.0.1 PORT c 0 5000 BOGUS",
        "MIGRATE 127.0.0.1 PORT c zero 5000",
        "MIGRATE 127.0.0.1 PORT c 0 soon",
        "MIGRATE 127.0.0.1 PORT c 0",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 COPY KEYS a b",
        "COMMAND GETKEYS MIGRATE h 1 k 0 5 COPY",
    ];
    for s in steps {
        let args: Vec<&str> = s
            .split(' ')
            .map(|w| if w == "''" { "" } else { w })
            .collect();
        t.push(on_src(p, &args));
    }
    // What arrived, db by db.
    let checks: &[&[&str]] = &[
        &["GET", "s"],
        &["GET", "c"],
        &["GET", "busy"],
        &["GET", "k1"],
        &["GET", "k2"],
        &["SELECT", "3"],
        &["LRANGE", "l", "0", "-1"],
        &["HGETALL", "h"],
        &["SCARD", "set"],
        &["SMEMBERS", "ints"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["XRANGE", "st", "-", "+"],
        &["OBJECT", "ENCODING", "set"],
        &["DBSIZE"],
        &["SELECT", "0"],
    ];
    for c in checks {
        t.push(show(&p.dst.call(c)));
    }
    let pttl: i64 = show(&p.dst.call(&["PTTL", "ttl"]))
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(
        pttl > 400_000 && pttl <= 500_000,
        "ttl carried over: {pttl}"
    );
    t
}

#[test]
fn migrate_matches_redis() {
    let ours = transcript(&mut pair(start_cairn));
    let theirs = transcript(&mut pair(start_redis));
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "step {i}");
    }
    assert_eq!(ours.len(), theirs.len());
    assert!(ours.iter().any(|r| r.contains("BUSYKEY")));
    assert!(ours.iter().any(|r| r == "+NOKEY\r\n"));
}

/// Keys cross both ways between cairn and Redis, unchanged (DEBUG DIGEST).
#[test]
fn migrate_between_cairn_and_redis() {
    let args = ["--enable-debug-command", "yes"];
    let (c, r, mut rc, rr) = both(&args);
    let big: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    rc.call(&["SET", "str", "value"]);
    rc.call(&["RPUSH", "list", "1", "2", "three"]);
    let mut sadd = vec!["SADD", "bigset"];
    sadd.extend(big.iter().map(|s| s.as_str()));
    rc.call(&sadd);
    rc.call(&["SADD", "small", "a", "b"]);
    rc.call(&["HSET", "h", "f", "v"]);
    rc.call(&["ZADD", "zs", "1", "a"]);
    rc.call(&["XADD", "st", "5-1", "a", "b"]);
    let digest = show(&rc.call(&["DEBUG", "DIGEST"]));
    let keys = ["str", "list", "bigset", "small", "h", "zs", "st"];
    let mut servers = [rc, rr];
    for (from, to, port) in [(0, 1, r.port), (1, 0, c.port)] {
        let port = port.to_string();
        let mut m = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        m.extend(keys);
        assert_eq!(show(&servers[from].call(&m)), "+OK\r\n");
        assert_eq!(show(&servers[from].call(&["DBSIZE"])), ":0\r\n");
        assert_eq!(show(&servers[to].call(&["DEBUG", "DIGEST"])), digest);
    }
}

/// A target that never answers: the command fails after its timeout, the keys stay,
/// and the server keeps serving. A closed port fails at connecting.
#[test]
fn unreachable_and_silent_targets_fail_without_losing_keys() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    r.call(&["SET", "k", "v"]);
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port().to_string();
    let keeper = std::thread::spawn(move || {
        // Accept and read whatever comes, never answer; stop when the peer closes.
        if let Ok((mut s, _)) = silent.accept() {
            let mut buf = [0u8; 4096];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        }
    });
    let reply = show(&r.call(&["MIGRATE", "127.0.0.1", &silent_port, "k", "0", "300"]));
    assert_eq!(
        reply,
        "-IOERR error or timeout reading to target instance\r\n"
    );
    assert_eq!(show(&r.call(&["GET", "k"])), "$1\r\nv\r\n");
    let closed = free_port().to_string();
    let reply = show(&r.call(&["MIGRATE", "127.0.0.1", &closed, "k", "0", "300"]));
    assert_eq!(
        reply,
        "-IOERR error or timeout connecting to the client\r\n"
    );
    let reply = show(&r.call(&["MIGRATE", "no-such-host.invalid", "1", "k", "0", "300"]));
    assert_eq!(
        reply,
        "-IOERR error or timeout connecting to the client\r\n"
    );
    assert_eq!(show(&r.call(&["PING"])), "+PONG\r\n");
    let stats = show(&r.call(&["INFO", "errorstats"]));
    assert!(stats.contains("errorstat_IOERR:count=3"), "{stats}");
    drop(c);
    keeper.join().unwrap();
}

/// The source logs what MIGRATE removed: after a restart from the log the moved keys are
/// gone and the copied one is still there.
#[test]
fn the_log_keeps_the_deletion() {
    let dir = temp_dir("migrate-aof");
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let target = start_cairn(&[]);
    let port = target.port.to_string();
    {
        let src = start_on(&dir, &args, &[]);
        let mut r = Raw::connect(src.port);
        r.call(&["SET", "moved", "1"]);
        r.call(&["SET", "kept", "2"]);
        let reply = r.call(&["MIGRATE", "127.0.0.1", &port, "moved", "0", "5000"]);
        assert_eq!(show(&reply), "+OK\r\n");
        let reply = r.call(&["MIGRATE", "127.0.0.1", &port, "kept", "0", "5000", "COPY"]);
        assert_eq!(show(&reply), "+OK\r\n");
    }
    let src = start_on(&dir, &args, &[]);
    let mut r = Raw::connect(src.port);
    assert_eq!(show(&r.call(&["EXISTS", "moved", "kept"])), ":1\r\n");
    assert_eq!(show(&r.call(&["GET", "kept"])), "$1\r\n2\r\n");
    let mut t = Raw::connect(target.port);
    assert_eq!(
        show(&t.call(&["MGET", "moved", "kept"])),
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
}
