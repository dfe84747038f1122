//! Every protocol and connection limit tested at N and N+1 over a real socket. Each case
//! runs against Debian's redis-server 7.0.15 and cairn-server with the same options, and
//! both must behave the same (reply bytes, connection closed or not); the expected Redis
//! behaviour is also spelled out, so a change in either is caught.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const MB: usize = 1024 * 1024;

/// What a connection got back after sending some bytes.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Outcome {
    reply: Vec<u8>,
    closed: bool,
}

impl Outcome {
    fn open(reply: &[u8]) -> Outcome {
        Outcome {
            reply: reply.to_vec(),
            closed: false,
        }
    }
    fn closed(reply: &[u8]) -> Outcome {
        Outcome {
            reply: reply.to_vec(),
            closed: true,
        }
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// What `collect`'s quiet periods are multiplied by. `same` raises it (for the rest of
/// the run) when the two servers' outcomes differ, and runs the case again: on a busy
/// machine a reply can come later than a quiet period, which is then no quiet period.
static IDLE_SCALE: AtomicU32 = AtomicU32::new(1);

fn scaled(idle: Duration) -> Duration {
    idle * IDLE_SCALE.load(Ordering::Relaxed)
}

/// Reads until the peer closes or nothing arrives for `idle` (scaled).
fn collect(s: &mut TcpStream, idle: Duration) -> Outcome {
    s.set_read_timeout(Some(scaled(idle))).unwrap();
    let mut reply = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => {
                return Outcome {
                    reply,
                    closed: true,
                }
            }
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return Outcome {
                    reply,
                    closed: false,
                }
            }
            Err(_) => {
                return Outcome {
                    reply,
                    closed: true,
                }
            }
        }
    }
}

/// Sends `data` on a new connection (a write error means the server closed it early) and
/// collects what comes back.
fn exchange(port: u16, data: &[u8]) -> Outcome {
    let mut s = connect(port);
    let _ = s.write_all(data);
    collect(&mut s, Duration::from_millis(300))
}

/// The server still answers a new client (PONG, or NOAUTH under requirepass).
fn assert_alive(port: u16, what: &str) {
    let mut s = connect(port);
    s.write_all(b"PING\r\n").unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 256];
    while !reply.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(n) if n > 0 => reply.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let o = Outcome::open(&reply);
    assert!(
        o.reply == b"+PONG\r\n" || o.reply == b"-NOAUTH Authentication required.\r\n",
        "server on {port} not answering after {what}: {o:?}"
    );
}

/// Waits until the server has dropped every connection but one new one (the ready check
/// and earlier cases close asynchronously), so connection counts are exact.
fn wait_idle(port: u16) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let mut s = connect(port);
        s.write_all(&encode(&[b"CLIENT", b"LIST"])).unwrap();
        let o = collect(&mut s, Duration::from_millis(500));
        let lines = o.reply.iter().filter(|&&b| b == b'\n').count();
        // "$len\r\n" + one line per client + "\r\n": one client means 3 newlines.
        if lines == 3 {
            return;
        }
        assert!(Instant::now() < deadline, "connections linger on {port}");
        drop(s);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `case` against redis-server and cairn-server started with `args`, asserts both
/// give the same result and returns it.
/// On a difference the case runs again on fresh servers with longer quiet periods (see
/// `IDLE_SCALE`); only a difference that persists fails.
fn same<T: PartialEq + std::fmt::Debug>(args: &[&str], case: impl Fn(u16) -> T) -> T {
    let mut attempt = 0;
    loop {
        let redis = start_redis(args);
        let cairn = start_cairn(args);
        let r = case(redis.port);
        let c = case(cairn.port);
        assert_alive(redis.port, "the case");
        assert_alive(cairn.port, "the case");
        attempt += 1;
        if c == r || attempt == 3 {
            assert_eq!(c, r, "cairn (left) differs from redis-server (right)");
            return r;
        }
        eprintln!("outcomes differ, again with longer quiet periods: {c:?} vs {r:?}");
        IDLE_SCALE.fetch_max(4u32.pow(attempt), Ordering::Relaxed);
    }
}

fn bulk_cmd(args: &[&[u8]]) -> Vec<u8> {
    encode(args)
}

#[test]
fn proto_max_bulk_len_at_and_past_the_limit() {
    let got = same(&["--proto-max-bulk-len", "1mb"], |port| {
        let at = exchange(port, &bulk_cmd(&[b"SET", b"k", &vec![b'a'; MB]]));
        let strlen = exchange(port, &bulk_cmd(&[b"STRLEN", b"k"]));
        // Writes that would make a string longer than the limit are refused too.
        let append = exchange(port, &bulk_cmd(&[b"APPEND", b"k", b"x"]));
        let setrange = exchange(port, &bulk_cmd(&[b"SETRANGE", b"k2", b"1048576", b"x"]));
        let past = exchange(port, &bulk_cmd(&[b"SET", b"k", &vec![b'a'; MB + 1]]));
        (at, strlen, append, setrange, past)
    });
    assert_eq!(got.0, Outcome::open(b"+OK\r\n"));
    assert_eq!(got.1, Outcome::open(b":1048576\r\n"));
    assert_eq!(
        got.2,
        Outcome::open(b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n")
    );
    assert_eq!(got.3, got.2);
    assert_eq!(
        got.4,
        Outcome::closed(b"-ERR Protocol error: invalid bulk length\r\n")
    );
}

/// Redis 7.0 compares the bytes of its query buffer not yet turned into arguments with
/// the limit after every read: for a big bulk that is the bulk plus its CRLF. So with a
/// 1 MB limit a 1 MB - 2 bulk passes and a 1 MB - 1 bulk closes the connection without a
/// reply; a half-sent bulk may hold exactly 1 MB, not one byte more.
#[test]
fn client_query_buffer_limit_at_and_past_the_limit() {
    let got = same(&["--client-query-buffer-limit", "1mb"], |port| {
        let set = |n: usize| exchange(port, &bulk_cmd(&[b"SET", b"k", &vec![b'a'; n]]));
        let partial = |n: usize| {
            let mut v = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2097152\r\n".to_vec();
            v.extend(std::iter::repeat_n(b'a', n));
            exchange(port, &v)
        };
        (set(MB - 2), set(MB - 1), partial(MB), partial(MB + 1))
    });
    assert_eq!(got.0, Outcome::open(b"+OK\r\n"));
    assert_eq!(got.1, Outcome::closed(b""));
    assert_eq!(got.2, Outcome::open(b""));
    assert_eq!(got.3, Outcome::closed(b""));
}

/// The multibulk count may be up to INT_MAX (the server then waits for the arguments);
/// one more is a protocol error.
#[test]
fn multibulk_count_limit() {
    let got = same(&[], |port| {
        (
            exchange(port, b"*2147483647\r\n"),
            exchange(port, b"*2147483648\r\n"),
            exchange(port, b"*1024\r\n$4\r\nPING\r\n"),
        )
    });
    assert_eq!(got.0, Outcome::open(b""));
    assert_eq!(
        got.1,
        Outcome::closed(b"-ERR Protocol error: invalid multibulk length\r\n")
    );
    assert_eq!(got.2, Outcome::open(b""));
}

/// Before AUTH: at most 10 arguments and 16384 bytes per argument; past that the
/// connection is closed with a protocol error. After AUTH the limits are gone.
#[test]
fn unauthenticated_limits() {
    let noauth = b"-NOAUTH Authentication required.\r\n";
    let got = same(&["--requirepass", "secret"], |port| {
        let mget = |n: usize| {
            let mut a: Vec<&[u8]> = vec![b"MGET"];
            a.extend(std::iter::repeat_n(&b"k"[..], n - 1));
            exchange(port, &bulk_cmd(&a))
        };
        let echo = |n: usize| exchange(port, &bulk_cmd(&[b"ECHO", &vec![b'e'; n]]));
        let authed = {
            let mut v = bulk_cmd(&[b"AUTH", b"secret"]);
            let mut a: Vec<&[u8]> = vec![b"MGET"];
            a.extend(std::iter::repeat_n(&b"k"[..], 11));
            v.extend(bulk_cmd(&a));
            v.extend(bulk_cmd(&[b"STRLEN", &vec![b'e'; 16385]]));
            exchange(port, &v)
        };
        (mget(10), mget(11), echo(16384), echo(16385), authed)
    });
    assert_eq!(got.0, Outcome::open(noauth));
    assert_eq!(
        got.1,
        Outcome::closed(b"-ERR Protocol error: unauthenticated multibulk length\r\n")
    );
    assert_eq!(got.2, Outcome::open(noauth));
    assert_eq!(
        got.3,
        Outcome::closed(b"-ERR Protocol error: unauthenticated bulk length\r\n")
    );
    let mut expect = b"+OK\r\n*11\r\n".to_vec();
    for _ in 0..11 {
        expect.extend_from_slice(b"$-1\r\n");
    }
    expect.extend_from_slice(b":0\r\n");
    assert_eq!(got.4, Outcome::open(&expect));
}

/// An inline request, a multibulk count line and a bulk length line may each hold 64 KiB
/// without their line end; one byte more is a protocol error.
#[test]
fn inline_and_header_lines_at_64k() {
    const K64: usize = 64 * 1024;
    let got = same(&[], |port| {
        // Exactly 64 KiB of inline request, then its newline: served.
        let mut s = connect(port);
        let mut line = b"ECHO ".to_vec();
        line.extend(std::iter::repeat_n(b'a', K64 - 5));
        s.write_all(&line).unwrap();
        let waiting = collect(&mut s, Duration::from_millis(300));
        s.write_all(b"\n").unwrap();
        let served = collect(&mut s, Duration::from_millis(300));
        let served = (
            served.reply.len(),
            served.reply[..8].to_vec(),
            served.closed,
        );
        let long = |prefix: &[u8], n: usize| {
            let mut v = prefix.to_vec();
            v.extend(std::iter::repeat_n(b'1', n - prefix.len()));
            exchange(port, &v)
        };
        (
            waiting,
            served,
            long(b"E", K64 + 1),
            long(b"*", K64),
            long(b"*", K64 + 1),
            long(b"*1\r\n$", K64 + 4),
            long(b"*1\r\n$", K64 + 5),
        )
    });
    assert_eq!(got.0, Outcome::open(b""));
    assert_eq!(
        got.1,
        (K64 - 5 + 10, b"$65531\r\na".to_vec()[..8].to_vec(), false)
    );
    assert_eq!(
        got.2,
        Outcome::closed(b"-ERR Protocol error: too big inline request\r\n")
    );
    assert_eq!(got.3, Outcome::open(b""));
    assert_eq!(
        got.4,
        Outcome::closed(b"-ERR Protocol error: too big mbulk count string\r\n")
    );
    assert_eq!(got.5, Outcome::open(b""));
    assert_eq!(
        got.6,
        Outcome::closed(b"-ERR Protocol error: too big bulk count string\r\n")
    );
}

/// With maxclients N, N clients are served and the next one gets an error and is closed;
/// once a client leaves, a new one is served again.
#[test]
fn maxclients_at_and_past_the_limit() {
    const N: usize = 4;
    let got = same(&["--maxclients", "4"], |port| {
        wait_idle(port);
        let mut conns: Vec<TcpStream> = (0..N).map(|_| connect(port)).collect();
        let mut served = Vec::new();
        for c in &mut conns {
            c.write_all(b"PING\r\n").unwrap();
            served.push(collect(c, Duration::from_millis(300)));
        }
        let mut extra = connect(port);
        let refused = collect(&mut extra, Duration::from_millis(1000));
        drop(conns.pop());
        // The server notices the close asynchronously; retry.
        let deadline = Instant::now() + DEADLINE;
        let again = loop {
            let mut s = connect(port);
            let _ = s.write_all(b"PING\r\n");
            let o = collect(&mut s, Duration::from_millis(300));
            if o.reply == b"+PONG\r\n" || Instant::now() > deadline {
                break o;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (served, refused, again)
    });
    assert_eq!(got.0, vec![Outcome::open(b"+PONG\r\n"); N]);
    assert_eq!(
        got.1,
        Outcome::closed(b"-ERR max number of clients reached\r\n")
    );
    assert_eq!(got.2, Outcome::open(b"+PONG\r\n"));
}

/// A normal client that pipelines GETs of a large value without reading is disconnected
/// once its pending output passes the hard limit; another client keeps being served.
#[test]
fn client_output_buffer_limit_for_normal_clients() {
    let got = same(
        &["--client-output-buffer-limit", "normal 1mb 0 0"],
        |port| {
            let value = vec![b'v'; 256 * 1024];
            let mut other = connect(port);
            other
                .write_all(&bulk_cmd(&[b"SET", b"big", &value]))
                .unwrap();
            let set = collect(&mut other, Duration::from_millis(300));
            // 400 replies of 256 KiB = 100 MiB, far more than socket buffers plus 1 MiB.
            let mut greedy = connect(port);
            greedy
                .set_write_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut pipeline = Vec::new();
            for _ in 0..400 {
                pipeline.extend(bulk_cmd(&[b"GET", b"big"]));
            }
            let _ = greedy.write_all(&pipeline);
            std::thread::sleep(Duration::from_millis(500));
            other.write_all(b"PING\r\n").unwrap();
            let still_served = collect(&mut other, Duration::from_millis(1000));
            // The greedy client gets part of its replies, then EOF.
            let deadline = Instant::now() + DEADLINE;
            let mut total = 0usize;
            let mut buf = vec![0u8; 1 << 16];
            greedy
                .set_read_timeout(Some(scaled(Duration::from_secs(2))))
                .unwrap();
            let closed = loop {
                match greedy.read(&mut buf) {
                    Ok(0) => break true,
                    Ok(n) => total += n,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                    Err(_) => break false,
                }
                if Instant::now() > deadline {
                    break false;
                }
            };
            let got_all = total >= 400 * (value.len() + 10);
            (set, still_served, closed, got_all)
        },
    );
    assert_eq!(got.0, Outcome::open(b"+OK\r\n"));
    assert_eq!(got.1, Outcome::open(b"+PONG\r\n"));
    assert!(got.2, "the greedy client was not disconnected");
    assert!(!got.3, "the greedy client got every reply");
}

/// Malformed input gets Redis's reply (or silence) and Redis's close-or-not, and never
/// takes the server down: a second client is served after each case. The cases run
/// concurrently (each on its own connection) to keep the test fast.
#[test]
fn malformed_input_never_kills_the_server() {
    let cases: &[(&str, &[u8])] = &[
        ("negative multibulk count", b"*-5\r\nPING\r\n"),
        ("null multibulk", b"*-1\r\nPING\r\n"),
        ("empty multibulk", b"*0\r\nPING\r\n"),
        ("bulk length not a number", b"*1\r\n$abc\r\n"),
        ("negative bulk length", b"*1\r\n$-1\r\n"),
        ("huge bulk length", b"*1\r\n$99999999999999999999\r\n"),
        ("huge multibulk count", b"*99999999999999999999\r\n"),
        ("multibulk count with plus", b"*+1\r\n$4\r\nPING\r\n"),
        ("multibulk count with space", b"* 1\r\n$4\r\nPING\r\n"),
        ("multibulk count leading zero", b"*01\r\n$4\r\nPING\r\n"),
        ("empty multibulk count", b"*\r\n"),
        ("empty bulk length", b"*1\r\n$\r\n"),
        ("not a bulk", b"*1\r\n:5\r\n"),
        (
            "bulk without CRLF after it",
            b"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
        ),
        ("empty command name", b"*1\r\n$0\r\n\r\n"),
        ("unbalanced quotes", b"SET \"a b\r\n"),
        ("quote followed by text", b"SET \"a\"b c\r\n"),
        ("bare CRs", b"\r\r\r\rPING\r\n"),
        ("empty lines", b"\r\n\n\r\nPING\r\n"),
        ("NUL in inline request", b"PI\x00NG\r\nPING\r\n"),
        ("NUL in multibulk count", b"*1\x00\r\n$4\r\nPING\r\n"),
        ("NUL in bulk length", b"*1\r\n$4\x00\r\nPING\r\n"),
        ("NUL bytes only", b"\x00\x00\x00\x00\r\n"),
        ("all byte values", &ALL_BYTES),
        ("RESP3 map as request", b"%1\r\n+a\r\n+b\r\n"),
        ("half a command then close", b"*3\r\n$3\r\nSET\r\n$1\r\nk"),
        ("ASCII control bytes", b"\x01\x02\x03 \x7f\r\n"),
    ];
    let run = |port: u16, cases: &[(&str, &[u8])]| -> Vec<(String, Outcome)> {
        std::thread::scope(|sc| {
            let handles: Vec<_> = cases
                .iter()
                .map(|(name, data)| {
                    sc.spawn(move || {
                        let o = exchange(port, data);
                        assert_alive(port, name);
                        (name.to_string(), o)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let got = same(&[], |port| run(port, cases));
    // A few Redis behaviours worth stating outright.
    let find = |n: &str| got.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(
        find("negative multibulk count"),
        Outcome::open(b"+PONG\r\n")
    );
    assert_eq!(
        find("not a bulk"),
        Outcome::closed(b"-ERR Protocol error: expected '$', got ':'\r\n")
    );
    assert_eq!(find("NUL in inline request"), Outcome::open(b""));

    // Known cairn differences (reported), so these only have to leave the server alive:
    // unknown-command errors carry non-UTF-8 bytes as U+FFFD (Redis: raw bytes) and do not
    // stop at a NUL (Redis: they do), and Redis drops a connection that sends "Host:" or
    // "POST" (its cross-protocol scripting guard) where cairn answers "unknown command".
    let survive: &[(&str, &[u8])] = &[
        ("binary after valid command", b"PING\r\n\xff\xfe\xfd\r\n"),
        ("invalid UTF-8 inline", b"\xc3\x28 \xa0\xa1\r\n"),
        ("telnet-style control bytes", b"\xff\xf4\xff\xfd\x06\r\n"),
        ("NUL in command name", b"*1\r\n$5\r\nPI\x00NG\r\n"),
        ("HTTP request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("HTTP POST", b"POST / HTTP/1.1\r\n\r\n"),
    ];
    let cairn = start_cairn(&[]);
    run(cairn.port, survive);
    assert_alive(cairn.port, "the survival cases");
}

/// Seeded random protocol-looking garbage: the server must survive every round.
#[test]
fn random_garbage_never_kills_the_server() {
    let srv = start_cairn(&[]);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..200 {
        let len = (next() % 2048) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Bias towards protocol-looking bytes so the parser goes deep.
        for b in data.iter_mut() {
            match next() % 8 {
                0 => *b = b'*',
                1 => *b = b'$',
                2 => *b = b'\r',
                3 => *b = b'\n',
                4 => *b = b'0' + (next() % 10) as u8,
                _ => {}
            }
        }
        let mut s = connect(srv.port);
        let _ = s.write_all(&data);
        let _ = collect(&mut s, Duration::from_millis(5));
        if round % 20 == 0 {
            assert_alive(srv.port, &format!("garbage round {round}"));
        }
    }
    assert_alive(srv.port, "random garbage");
}

static ALL_BYTES: [u8; 256] = {
    let mut a = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        a[i] = i as u8;
        i += 1;
    }
    a
};

/// Opens a connection that sends `SET key <bulk of total bytes>` but only `sent` bytes of
/// the bulk: the server holds them for the client (its query buffer).
fn partial_set(port: u16, key: &str, sent: usize, total: usize) -> TcpStream {
    let mut s = connect(port);
    let head = format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${total}\r\n", key.len());
    // A write error means the server closed the connection meanwhile (evicted it).
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(&vec![b'x'; sent]);
    s
}

/// The next reply line, or the close (evicted clients get no reply).
fn reply_line_or_close(s: &mut TcpStream) -> Outcome {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => reply.push(byte[0]),
            Ok(_) => return Outcome::closed(&reply),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("no reply and no close within {DEADLINE:?} (got {reply:?})")
            }
            Err(_) => return Outcome::closed(&reply),
        }
    }
    Outcome::open(&reply)
}

/// Sends the rest of a [`partial_set`] bulk: +OK, or the close if it was evicted.
fn finish_set(s: &mut TcpStream, rest: usize) -> Outcome {
    let _ = s.write_all(&vec![b'x'; rest]);
    let _ = s.write_all(b"\r\n");
    reply_line_or_close(s)
}

/// A connection that client eviction never picks, for checks and settings.
fn unevictable(port: u16) -> Raw {
    let mut admin = Raw::connect(port);
    assert_eq!(admin.call(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    admin
}

fn evicted_clients(admin: &mut Raw) -> u64 {
    admin
        .info("stats", "evicted_clients")
        .unwrap()
        .parse()
        .unwrap()
}

/// `maxmemory-clients`: once the clients' buffers reach the limit, the client holding the
/// most is disconnected (without a reply; its half-sent SET never runs) and the others
/// stay. The limit given at startup in bytes, or set at runtime as a percentage of
/// maxmemory, with either socket loop.
#[test]
fn client_eviction_disconnects_the_biggest_client() {
    let runtime_percent: &[&str] = &["CONFIG", "SET", "maxmemory-clients", "10%"];
    for (args, set_at_runtime) in [
        (&["--maxmemory-clients", "1mb"][..], None),
        (&["--maxmemory", "10mb"][..], Some(runtime_percent)),
    ] {
        let case = |port: u16| {
            let mut admin = unevictable(port);
            let mut small = partial_set(port, "small", 300_000, 400_000);
            let mut big = partial_set(port, "big", 3_000_000, 4_000_000);
            if let Some(set) = set_at_runtime {
                assert_eq!(admin.call(set), b"+OK\r\n");
            }
            let big_outcome = finish_set(&mut big, 1_000_000);
            let small_outcome = finish_set(&mut small, 100_000);
            let stored = admin.call(&["EXISTS", "small", "big"]);
            (
                big_outcome,
                small_outcome,
                stored,
                evicted_clients(&mut admin),
            )
        };
        let redis = start_redis(args);
        let want = case(redis.port);
        assert_eq!(
            want,
            (
                Outcome::closed(b""),
                Outcome::open(b"+OK\r\n"),
                b":1\r\n".to_vec(),
                1
            ),
            "redis-server with {args:?}"
        );
        for io_threads in ["1", "2"] {
            let cairn = start_cairn(&[args, &["--io-threads", io_threads]].concat());
            assert_eq!(case(cairn.port), want, "{args:?} io-threads {io_threads}");
        }
    }
}

/// A client with CLIENT NO-EVICT on is never evicted, even as the biggest: while it holds
/// more than the limit, every other client goes instead.
#[test]
fn client_eviction_spares_no_evict_clients() {
    let case = |port: u16| {
        let mut admin = unevictable(port);
        let mut exempt = connect(port);
        exempt
            .write_all(&encode(&[b"CLIENT", b"NO-EVICT", b"on"]))
            .unwrap();
        assert_eq!(reply_line_or_close(&mut exempt), Outcome::open(b"+OK\r\n"));
        let _ = exempt.write_all(b"*3\r\n$3\r\nSET\r\n$6\r\nexempt\r\n$3100000\r\n");
        let _ = exempt.write_all(&vec![b'x'; 3_000_000]);
        // Another client is served until the exempt one's bytes are in, then evicted.
        let mut other = connect(port);
        let deadline = Instant::now() + DEADLINE;
        let other_outcome = loop {
            let _ = other.write_all(b"PING\r\n");
            let o = reply_line_or_close(&mut other);
            if o.closed || Instant::now() > deadline {
                break o;
            }
        };
        let exempt_outcome = finish_set(&mut exempt, 100_000);
        let stored = admin.call(&["EXISTS", "exempt"]);
        let evicted = evicted_clients(&mut admin) >= 1;
        (other_outcome, exempt_outcome, stored, evicted)
    };
    let want = (
        Outcome::closed(b""),
        Outcome::open(b"+OK\r\n"),
        b":1\r\n".to_vec(),
        true,
    );
    let args = ["--maxmemory-clients", "1mb"];
    let redis = start_redis(&args);
    assert_eq!(case(redis.port), want, "redis-server");
    for io_threads in ["1", "2"] {
        let cairn = start_cairn(&[&args[..], &["--io-threads", io_threads]].concat());
        assert_eq!(case(cairn.port), want, "io-threads {io_threads}");
    }
}

/// Output counts too: a client that pipelines reads of a large value without reading the
/// replies is evicted once its unsent output reaches the limit; a client with little
/// buffered is served meanwhile.
#[test]
fn client_eviction_counts_unsent_output() {
    let case = |port: u16| {
        let mut admin = unevictable(port);
        let value = "v".repeat(1 << 20);
        assert_eq!(admin.call(&["SET", "value", &value]), b"+OK\r\n");
        let mut greedy = connect(port);
        let gets: Vec<u8> = (0..64).flat_map(|_| encode(&[b"GET", b"value"])).collect();
        let _ = greedy.write_all(&gets);
        // Reads everything the server sends before closing it.
        greedy
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut received = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        let closed = loop {
            match greedy.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => received += n,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break false
                }
                Err(_) => break true,
            }
        };
        let all_replies = 64 * ((1 << 20) + "$1048576\r\n\r\n".len());
        let mut modest = Raw::connect(port);
        let served = modest.call(&["PING"]);
        (
            closed,
            received < all_replies,
            served,
            evicted_clients(&mut admin),
        )
    };
    let want = (true, true, b"+PONG\r\n".to_vec(), 1);
    let args = ["--maxmemory-clients", "4mb"];
    let redis = start_redis(&args);
    assert_eq!(case(redis.port), want, "redis-server");
    for io_threads in ["1", "2"] {
        let cairn = start_cairn(&[&args[..], &["--io-threads", io_threads]].concat());
        assert_eq!(case(cairn.port), want, "io-threads {io_threads}");
    }
}
