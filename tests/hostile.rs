//! Hostile clients, black box: real sockets against a real server, every load bounded.
//! After each case the server must answer PING and a SET/GET round trip, and its RSS
//! must stay within the bound the case states.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Resident set size of a process, from /proc.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// The server is alive and serving: PING, then a SET/GET round trip on a new connection.
fn assert_serving(port: u16) {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.call(&["SET", "alive-check", "yes"]), b"+OK\r\n");
    assert_eq!(c.call(&["GET", "alive-check"]), b"$3\r\nyes\r\n");
}

/// Clients that each declare a 512 MiB bulk and then send nothing: the declared lengths
/// are claims, held under the in-place budget; past it a bulk is read into the query
/// buffer, which costs only what arrived. The server keeps serving at a small RSS.
fn big_bulk_flood(io_threads: &str) {
    let srv = start_cairn(&["--io-threads", io_threads]);
    let rss_before = rss_bytes(srv.child.id());
    let mut idle = Vec::new();
    for _ in 0..80 {
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\n")
            .unwrap();
        idle.push(s);
    }
    let mut c = Raw::connect(srv.port);
    // Every header has been parsed once the server has seen all 80 claims one way or
    // the other (in place, or over the budget and buffered).
    assert!(
        poll_until(DEADLINE, || {
            c.info_u64("stats", "request_args_in_place")
                + c.info_u64("stats", "request_args_over_budget")
                >= 80
        }),
        "the server did not parse every big bulk header"
    );
    let claimed = c.info_u64("memory", "request_args_in_place_bytes");
    let budget = c.info_u64("memory", "request_args_in_place_budget_bytes");
    assert!(claimed <= budget, "claimed {claimed} > budget {budget}");
    assert!(c.info_u64("stats", "request_args_over_budget") > 0);
    assert_serving(srv.port);
    let rss = rss_bytes(srv.child.id());
    assert!(
        rss < rss_before + (64 << 20),
        "RSS grew from {rss_before} to {rss} with 80 idle uploaders"
    );
    // One uploader finishes its value: it is stored whole, read in place or buffered.
    let value = vec![b'v'; 1 << 20];
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).as_bytes())
        .unwrap();
    s.write_all(&value).unwrap();
    s.write_all(b"\r\n").unwrap();
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    assert_eq!(
        c.call(&["STRLEN", "big"]),
        format!(":{}\r\n", value.len()).into_bytes()
    );
    // Closing the idle uploaders gives their claims back.
    drop(idle);
    wait_until(
        DEADLINE,
        "the closed uploaders' claims are given back",
        || c.info_u64("memory", "request_args_in_place_bytes") == 0,
    );
    assert_serving(srv.port);
}

#[test]
fn idle_big_bulk_uploaders_cost_what_they_sent() {
    big_bulk_flood("1");
}

#[test]
fn idle_big_bulk_uploaders_cost_what_they_sent_with_io_threads() {
    big_bulk_flood("2");
}

/// A declared bulk longer than `client-query-buffer-limit` gets no block: its bytes go
/// to the query buffer, and the client is closed once they pass the limit (as Redis).
#[test]
fn a_declared_length_over_the_query_buffer_limit_reserves_nothing() {
    for io_threads in ["1", "2"] {
        let srv = start_cairn(&[
            "--io-threads",
            io_threads,
            "--client-query-buffer-limit",
            "1mb",
        ]);
        let mut c = Raw::connect(srv.port);
        let mut r = Raw::connect(srv.port);
        r.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000000\r\n");
        assert!(
            poll_until(DEADLINE, || c.info_u64("stats", "request_args_over_budget")
                == 1),
            "io-threads {io_threads}: the header was not declined"
        );
        assert_eq!(c.info_u64("stats", "request_args_in_place"), 0);
        r.send(&vec![b'a'; (1 << 20) + 1]);
        assert!(r.closed(), "io-threads {io_threads}: client not closed");
        // I/O threads' counters reach INFO on the executor's next cron tick.
        wait_until(DEADLINE, "the disconnection is counted", || {
            c.info_u64("stats", "client_query_buffer_limit_disconnections") >= 1
        });
        assert_serving(srv.port);
    }
}

/// One write of a family, the `i`th; returns the reply.
type WriteFn<'a> = dyn FnMut(&mut Raw, u64) -> Vec<u8> + 'a;

/// Fills a small arena with one family's writes until the server answers -OOM; then
/// reads, deletes and PING still work, and the refusal is counted.
/// Writes until -OOM; returns how many writes were taken.
fn fill_until_oom(
    c: &mut Raw,
    family: &str,
    mut write: impl FnMut(&mut Raw, u64) -> Vec<u8>,
) -> u64 {
    for i in 0..2_000_000u64 {
        let reply = write(c, i);
        if reply.starts_with(b"-OOM") {
            return i;
        }
        assert!(
            !reply.starts_with(b"-"),
            "{family}: unexpected error {}",
            String::from_utf8_lossy(&reply)
        );
    }
    panic!("{family}: a 64 MiB arena never filled");
}

#[test]
fn a_full_arena_refuses_writes_and_keeps_serving() {
    let srv = start_cairn(&["--arena-reserve-bytes", "64mb"]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.call(&["SET", "keep", "me"]), b"+OK\r\n");
    let chunk = "x".repeat(64 * 1024);
    let families: Vec<(&str, Box<WriteFn>)> = vec![
        (
            "SET",
            Box::new(|c, i| c.call(&["SET", &format!("s{i}"), &chunk])),
        ),
        (
            "APPEND",
            Box::new(|c, _| c.call(&["APPEND", "appended", &chunk])),
        ),
        (
            "RPUSH",
            Box::new(|c, i| c.call(&["RPUSH", &format!("l{}", i / 100), &chunk[..4000]])),
        ),
        (
            "HSET",
            Box::new(|c, i| c.call(&["HSET", "h", &format!("f{i}"), &chunk[..2000]])),
        ),
        (
            "SADD",
            Box::new(|c, i| c.call(&["SADD", "set", &format!("{i}{}", &chunk[..2000])])),
        ),
        (
            "ZADD",
            Box::new(|c, i| {
                c.call(&[
                    "ZADD",
                    "z",
                    &i.to_string(),
                    &format!("{i}{}", &chunk[..2000]),
                ])
            }),
        ),
    ];
    let mut keys_per_family = Vec::new();
    for (family, write) in families {
        let taken = fill_until_oom(&mut c, family, write);
        // The memory the previous family freed serves this one, whatever its size class
        // (APPEND grows one string past every free block: the bump serves it alone).
        if family != "APPEND" {
            assert!(taken >= 100, "{family}: only {taken} writes after a flush");
        }
        // Reads and PING go on; the oldest key is intact.
        assert_eq!(c.call(&["GET", "keep"]), b"$2\r\nme\r\n", "{family}");
        assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
        keys_per_family.push(family);
        // Make room for the next family: the ways out of a full arena are writes too.
        // A big flush is freed in the background: writes are taken again once its
        // blocks are back on the free lists.
        assert_eq!(c.call(&["FLUSHALL"]), b"+OK\r\n", "{family}");
        assert!(
            poll_until(DEADLINE, || c.call(&["SET", "keep", "me"]) == b"+OK\r\n"),
            "{family}: writes still refused after FLUSHALL"
        );
    }
    assert!(c.info_u64("stats", "arena_oom_refusals") >= keys_per_family.len() as u64);
    // Growth past the arguments is checked before anything changes: a string grown by
    // SETRANGE / SETBIT past the room left, a copy, a stored set operation.
    assert_eq!(&c.call(&["SETRANGE", "sr", "200000000", "x"])[..4], b"-OOM");
    assert_eq!(&c.call(&["SETBIT", "sb", "1600000000", "1"])[..4], b"-OOM");
    assert_eq!(c.call(&["EXISTS", "sr", "sb"]), b":0\r\n");
    assert_serving(srv.port);
}

/// Sources made while there is room, then the arena filled: commands that write more
/// than their arguments (copies, stored results, restores, BITOP) are refused before they
/// change anything, and so is a big bulk read in place.
#[test]
fn growth_beyond_the_arguments_is_refused_before_it_starts() {
    let srv = start_cairn(&["--arena-reserve-bytes", "64mb"]);
    let mut c = Raw::connect(srv.port);
    let chunk = "x".repeat(64 * 1024);
    let big = "b".repeat(12 << 20);
    assert_eq!(c.call(&["SET", "bigsrc", &big]), b"+OK\r\n");
    // Each source is larger than what is left once the arena is full (the write reserve
    // of a 64 MiB arena is 8 MiB).
    for i in 0..5000 {
        c.call(&["SADD", "set1", &format!("{i}{}", &chunk[..2000])]);
        c.call(&[
            "ZADD",
            "z1",
            &i.to_string(),
            &format!("{i}{}", &chunk[..2000]),
        ]);
    }
    let dump = {
        c.cmd(&[b"DUMP", b"bigsrc"]);
        let r = c.reply();
        let header_end = r.iter().position(|&b| b == b'\n').unwrap() + 1;
        r[header_end..r.len() - 2].to_vec()
    };
    fill_until_oom(&mut c, "SET", |c, i| {
        c.call(&["SET", &format!("f{i}"), &chunk])
    });
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("COPY", c.call(&["COPY", "bigsrc", "copy"])),
        ("SUNIONSTORE", c.call(&["SUNIONSTORE", "su", "set1"])),
        ("ZUNIONSTORE", c.call(&["ZUNIONSTORE", "zu", "1", "z1"])),
        ("BITOP", c.call(&["BITOP", "NOT", "bo", "bigsrc"])),
        ("RESTORE", {
            c.cmd(&[b"RESTORE", b"restored", b"0", &dump]);
            c.reply()
        }),
        ("SET big bulk", {
            c.cmd(&[b"SET", b"bulk", &vec![b'q'; 4 << 20]]);
            c.reply()
        }),
    ];
    for (what, reply) in refused {
        assert!(reply.starts_with(b"-OOM"), "{what}: {}", show(&reply));
    }
    assert_eq!(
        c.call(&["EXISTS", "copy", "su", "zu", "bo", "restored", "bulk"]),
        b":0\r\n"
    );
    assert_eq!(
        c.call(&["STRLEN", "bigsrc"]),
        format!(":{}\r\n", 12 << 20).into_bytes()
    );
    assert_serving_reads(srv.port);
}

/// A transaction is checked as a whole when EXEC runs (or refused while queueing): it
/// runs whole or not at all.
#[test]
fn a_transaction_on_a_full_arena_is_refused_whole() {
    let srv = start_cairn(&["--arena-reserve-bytes", "64mb"]);
    let mut c = Raw::connect(srv.port);
    let chunk = "x".repeat(64 * 1024);
    let mut i = 0;
    while !c
        .call(&["SET", &format!("s{i}"), &chunk])
        .starts_with(b"-OOM")
    {
        i += 1;
    }
    assert!(i > 100, "only {i} values fit a 64 MiB arena");
    assert_eq!(c.call(&["MULTI"]), b"+OK\r\n");
    let small = c.call(&["SET", "t1", "a"]);
    assert!(
        small == b"+QUEUED\r\n" || small.starts_with(b"-OOM"),
        "{}",
        show(&small)
    );
    let big = "y".repeat(8 << 20);
    let queued = c.call(&["SET", "t2", &big]);
    let exec = c.call(&["EXEC"]);
    if queued == b"+QUEUED\r\n" {
        assert!(exec.starts_with(b"-OOM"), "{}", show(&exec));
    } else {
        assert!(queued.starts_with(b"-OOM"), "{}", show(&queued));
        assert!(exec.starts_with(b"-EXECABORT"), "{}", show(&exec));
    }
    assert_eq!(c.call(&["EXISTS", "t1", "t2"]), b":0\r\n");
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.call(&["STRLEN", "s5"]), b":65536\r\n");
    // Deleting is a way out: after it, writes are taken again.
    assert_eq!(c.call(&["FLUSHALL"]), b"+OK\r\n");
    wait_until(DEADLINE, "writes are taken after FLUSHALL", || {
        c.call(&["SET", "after", "flush"]) == b"+OK\r\n"
    });
    assert_serving(srv.port);
}

/// PING and reads on a server whose arena is full (no SET round trip).
fn assert_serving_reads(port: u16) {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.call(&["STRLEN", "f1"]), b":65536\r\n");
}

/// A server's RSS must stay within this much of what it was before a socket case.
const RSS_SLACK_BYTES: u64 = 96 << 20;

/// Runs a socket case against a fresh server (both loops), then checks it still serves
/// and that its RSS stayed within [`RSS_SLACK_BYTES`] of where it started.
fn socket_case(name: &str, args: &[&str], case: impl Fn(u16)) {
    for io_threads in ["1", "2"] {
        let mut all = vec!["--io-threads", io_threads];
        all.extend_from_slice(args);
        let srv = start_cairn(&all);
        let before = rss_bytes(srv.child.id());
        case(srv.port);
        assert_serving(srv.port);
        let after = rss_bytes(srv.child.id());
        assert!(
            after < before + RSS_SLACK_BYTES,
            "{name} (io-threads {io_threads}): RSS {before} -> {after}"
        );
    }
}

#[test]
fn a_million_argument_multibulk_is_answered() {
    socket_case("million arguments", &[], |port| {
        let n = 1_000_000;
        let mut req = format!("*{n}\r\n$4\r\nMGET\r\n").into_bytes();
        for _ in 1..n {
            req.extend_from_slice(b"$1\r\nk\r\n");
        }
        let mut r = Raw::connect(port);
        r.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        r.send(&req);
        let reply = r.reply();
        assert!(reply.starts_with(format!("*{}\r\n", n - 1).as_bytes()));
    });
}

#[test]
fn malformed_resp_gets_protocol_errors() {
    let cases: &[&[u8]] = &[
        b"*abc\r\n",
        b"*-5\r\n*1\r\n$4\r\nPING\r\n",
        b"*2\r\n$3\r\nGET\r\n$-2\r\n",
        b"*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n",
        b"*2\r\n$3\r\nGET\r\n+k\r\n",
        b"*1\r\n$4\r\nPINGxx\r\n*1\r\n",
        b"\"unbalanced\r\n",
        b"*3000000000\r\n",
        b"$5\r\nhello\r\n",
        b"*1\r\n$\r\n",
        &[b'*'; 70_000],
        &[0u8; 70_000],
    ];
    socket_case("malformed RESP", &[], |port| {
        for case in cases {
            let mut r = Raw::connect(port);
            // A case the server waits on for more bytes ends at this timeout; nothing is
            // asserted on how long that is, so a short one costs no coverage.
            r.s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            r.send(case);
            // Either an error reply and a close, or a wait for more bytes: never a crash.
            let _ = r.closed();
        }
    });
}

#[test]
fn one_byte_writes_make_one_command() {
    socket_case("1-byte writes", &[], |port| {
        let mut r = Raw::connect(port);
        for b in encode(&[b"SET", b"slow", b"bytes"]) {
            r.send(&[b]);
        }
        assert_eq!(r.reply(), b"+OK\r\n");
        for b in encode(&[b"GET", b"slow"]) {
            r.send(&[b]);
        }
        assert_eq!(r.reply(), b"$5\r\nbytes\r\n");
    });
}

/// A client that asks for a large value many times and never reads: its output is
/// bounded by `client-output-buffer-limit` (it is closed), not by the server's memory.
#[test]
fn unread_replies_close_the_client_at_its_limit() {
    socket_case(
        "unread replies",
        &["--client-output-buffer-limit", "normal 32mb 16mb 60"],
        |port| {
            let mut c = Raw::connect(port);
            let value = vec![b'v'; 1 << 20];
            c.cmd(&[b"SET", b"v", &value]);
            assert_eq!(c.reply(), b"+OK\r\n");
            let mut greedy = Raw::connect(port);
            greedy.s.set_nonblocking(true).unwrap();
            let req = encode(&[b"GETRANGE", b"v", b"0", b"-1"]);
            let mut sent = 0;
            let start = Instant::now();
            while sent < 200 && start.elapsed() < Duration::from_secs(20) {
                match greedy.s.write(&req) {
                    Ok(n) if n == req.len() => sent += 1,
                    Ok(_) | Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            assert!(
                poll_until(DEADLINE, || c
                    .info_u64("stats", "client_output_buffer_limit_disconnections")
                    >= 1),
                "the unread client was not closed"
            );
        },
    );
}

/// Slow clients that each send part of a command fill `maxclients`; the next one is
/// refused with Redis's error; once they go, new clients are served.
#[test]
fn slowloris_up_to_maxclients() {
    socket_case("slowloris", &["--maxclients", "40"], |port| {
        let mut slow = Vec::new();
        for i in 0..39 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(format!("*3\r\n$3\r\nSET\r\n$2\r\n{:02}\r\n$1000", i % 100).as_bytes())
                .unwrap();
            slow.push(s);
        }
        let mut control = Raw::connect(port); // the 40th
        wait_until(DEADLINE, "40 clients are connected", || {
            control.info_u64("clients", "connected_clients") == 40
        });
        let mut refused = Raw::connect(port);
        assert_eq!(
            refused.reply(),
            b"-ERR max number of clients reached\r\n".to_vec()
        );
        drop(slow);
        wait_until(DEADLINE, "only the control client is left", || {
            control.info_u64("clients", "connected_clients") == 1
        });
    });
}

#[test]
fn bad_config_set_values_are_errors() {
    let bad: &[(&str, &str)] = &[
        ("maxmemory", "-1"),
        ("maxmemory", "12zb"),
        ("maxclients", "0"),
        ("hz", "abc"),
        ("appendfsync", "sometimes"),
        ("maxmemory-policy", "lru"),
        ("client-output-buffer-limit", "normal 1 2"),
        ("client-output-buffer-limit", "bogus 1 2 3"),
        ("save", "60"),
        ("proto-max-bulk-len", "1"),
        ("list-max-listpack-size", "99999999999999999999"),
        ("notify-keyspace-events", "Q"),
        ("no-such-option", "1"),
        ("port", "99999"),
        ("dir", "/nonexistent/dir/for/cairn"),
    ];
    socket_case("bad CONFIG SET", &[], |port| {
        let mut c = Raw::connect(port);
        for (name, value) in bad {
            let reply = c.call(&["CONFIG", "SET", name, value]);
            assert!(
                reply.starts_with(b"-ERR"),
                "CONFIG SET {name} {value}: {}",
                show(&reply)
            );
        }
    });
}

/// RESTORE of payloads redis-server made (one per type), mutated byte by byte with the
/// CRC recomputed so the decoder sees them: every one gets a reply, never a crash.
#[test]
fn mutated_restore_payloads_from_redis_get_replies() {
    let redis = start_redis(&[]);
    let mut rr = Raw::connect(redis.port);
    let setup: &[&[&str]] = &[
        &["SET", "str", "hello world"],
        &["SET", "int", "12345"],
        &["RPUSH", "list", "a", "bb", "ccc", "1", "2"],
        &["HSET", "hash", "f1", "v1", "f2", "22"],
        &["SADD", "intset", "1", "2", "300", "-4"],
        &["SADD", "set", "a", "b", "c"],
        &["ZADD", "zset", "1", "a", "2.5", "b", "-3", "c"],
    ];
    let mut payloads = Vec::new();
    for cmd in setup {
        rr.call(cmd);
        rr.cmd(&[b"DUMP", cmd[1].as_bytes()]);
        let r = rr.reply();
        let header_end = r.iter().position(|&b| b == b'\n').unwrap() + 1;
        payloads.push(r[header_end..r.len() - 2].to_vec());
    }
    drop(redis);
    socket_case("mutated RESTORE", &[], |port| {
        let mut c = Raw::connect(port);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for payload in &payloads {
            // Unmutated: restores.
            c.cmd(&[b"RESTORE", b"orig", b"0", payload, b"REPLACE"]);
            assert_eq!(c.reply(), b"+OK\r\n");
            let body = payload.len() - 8;
            for _ in 0..400 {
                let mut p = payload.clone();
                let at = (next() as usize) % body;
                p[at] = match next() % 3 {
                    0 => p[at] ^ (1 << (next() % 8)),
                    1 => next() as u8,
                    _ => 0xFF,
                };
                let crc = cairn::persistence::rdb_value::crc64(&p[..body]);
                p[body..].copy_from_slice(&crc.to_le_bytes());
                c.cmd(&[b"RESTORE", b"m", b"0", &p, b"REPLACE"]);
                let reply = c.reply();
                assert!(
                    reply == b"+OK\r\n" || reply.starts_with(b"-"),
                    "{}",
                    show(&reply)
                );
            }
        }
    });
}

/// Starts cairn on `dir` as it is; returns how it ended up: serving (PONG), or exited
/// (with its status and log). Waits out `-LOADING`.
enum Startup {
    Serving(ServerProc),
    Exited(std::process::ExitStatus, String),
}

fn start_on_dir(dir: &std::path::Path, args: &[&str]) -> Startup {
    let (mut cmd, port) = cairn_command(dir, args, &[]);
    let mut child = cmd
        .stderr(std::fs::File::create(dir.join("cairn.err")).unwrap())
        .spawn()
        .unwrap();
    match wait_serving(&mut child, port) {
        Ok(()) => Startup::Serving(ServerProc {
            child,
            port,
            dir: dir.to_path_buf(),
        }),
        Err(NotServing::Exited(status)) => Startup::Exited(
            status,
            server_log(dir) + &std::fs::read_to_string(dir.join("cairn.err")).unwrap_or_default(),
        ),
        Err(NotServing::Timeout) => {
            panic!("cairn neither served nor exited on {}", dir.display())
        }
    }
}

/// Damaged data files at startup: the server serves (what it could prove intact) or
/// stops with a message; it never panics.
fn assert_startup_is_clean(dir: &std::path::Path, args: &[&str], what: &str) {
    match start_on_dir(dir, args) {
        Startup::Serving(srv) => {
            eprintln!("{what}: serving");
            assert_serving(srv.port);
        }
        Startup::Exited(status, log) => {
            eprintln!(
                "{what}: exited {status}: {}",
                log.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
            );
            assert!(!log.contains("panicked"), "{what}: panicked:\n{log}");
            assert!(!status.success(), "{what}: exited 0 without serving");
            assert_ne!(status.code(), Some(101), "{what}: a Rust panic's exit code");
        }
    }
}

/// A file made by a server (`make` writes keys, then the server is stopped), read back.
fn made_by(server: ServerProc, file: &str, make: impl Fn(&mut Raw)) -> Vec<u8> {
    let mut c = Raw::connect(server.port);
    make(&mut c);
    assert_eq!(c.call(&["SAVE"]), b"+OK\r\n");
    std::fs::read(server.dir.join(file)).unwrap()
}

fn fill_every_type(c: &mut Raw) {
    for i in 0..200 {
        let i = i.to_string();
        c.call(&["SET", &format!("s{i}"), &format!("value-{i}")]);
        c.call(&["RPUSH", "list", &i]);
        c.call(&["HSET", "hash", &i, &i]);
        c.call(&["SADD", "set", &format!("m{i}")]);
        c.call(&["ZADD", "zset", &i, &i]);
    }
    c.call(&["SET", "big", &"b".repeat(100_000)]);
    c.call(&["EXPIRE", "s1", "1000"]);
}

#[test]
fn damaged_images_and_rdb_files_at_startup_never_panic() {
    let image = made_by(start_cairn(&[]), "dump.cimg", fill_every_type);
    let rdb = made_by(start_redis(&[]), "dump.rdb", fill_every_type);
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        (
            "random".into(),
            (0..4096).map(|_| rand(256) as u8).collect(),
        ),
    ];
    for (name, file) in [("image", &image), ("rdb", &rdb)] {
        for cut in [
            9,
            64,
            file.len() / 3,
            file.len() / 2,
            file.len() - 9,
            file.len() - 1,
        ] {
            cases.push((format!("{name} cut at {cut}"), file[..cut].to_vec()));
        }
        for _ in 0..6 {
            let mut f = file.clone();
            let at = rand(f.len());
            f[at] ^= 1 << rand(8);
            cases.push((format!("{name} bit flip at {at}"), f));
        }
    }
    // RDB files with bytes changed and the trailing CRC-64 recomputed, so the parser
    // meets the damage.
    for _ in 0..10 {
        let mut f = rdb.clone();
        let body = f.len() - 8;
        let at = 9 + rand(body - 9);
        f[at] = rand(256) as u8;
        let crc = cairn::persistence::rdb_value::crc64(&f[..body]);
        f[body..].copy_from_slice(&crc.to_le_bytes());
        cases.push((format!("rdb byte {at} changed, CRC fixed"), f));
    }
    for (what, bytes) in cases {
        let dir = temp_dir("startup");
        std::fs::write(dir.join("dump.rdb"), &bytes).unwrap();
        assert_startup_is_clean(&dir, &[], &what);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn damaged_aof_layouts_at_startup_never_panic() {
    let manifests: &[&[u8]] = &[
        b"",
        b"garbage\n",
        b"file appendonly.aof.1.incr.aof seq 1 type i\n",
        b"file appendonly.aof.1.incr.aof seq 99999999999999999999 type i\n",
        b"file ../../etc/passwd seq 1 type b\n",
        b"file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.base.rdb seq 1 type b\n",
        &[0xFF; 300],
    ];
    let incrs: &[&[u8]] = &[
        b"",
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n",
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1",
        b"*99999999999\r\n",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$999999999999\r\n",
        b"*1\r\n$7\r\nNOTACMD\r\n",
        &[0u8; 1000],
    ];
    for (m, manifest) in manifests.iter().enumerate() {
        for (i, incr) in incrs.iter().enumerate() {
            let dir = temp_dir("aof");
            let aof = dir.join("appendonlydir");
            std::fs::create_dir_all(&aof).unwrap();
            std::fs::write(aof.join("appendonly.aof.manifest"), manifest).unwrap();
            std::fs::write(aof.join("appendonly.aof.1.incr.aof"), incr).unwrap();
            assert_startup_is_clean(
                &dir,
                &["--appendonly", "yes"],
                &format!("manifest {m}, incr {i}"),
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
