//! Pub/sub over real sockets: several connections, RESP2 and RESP3, compared byte for byte
//! with redis-server 7.0.15 where the order is specified, with io-threads 1 and 3; output
//! buffer limits of the `pubsub` class.

mod common;

use common::{start_cairn, start_redis, wait_until, Raw, DEADLINE};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// One scripted step: on connection `conn`, send `args` and read `replies` frames (0:
/// send only). `Read(conn, n)` reads n frames pushed to `conn` without sending.
enum Step {
    Cmd(usize, &'static [&'static str], usize),
    Read(usize, usize),
    /// Send and read one reply without comparing it (HELLO's map holds the client id).
    Quiet(usize, &'static [&'static str]),
}
use Step::{Cmd, Quiet, Read as Pushed};

fn frames(r: &mut Raw, n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.extend(r.reply());
    }
    out
}

/// Runs `steps` on a server and returns every step's bytes.
fn run(port: u16, conns: usize, steps: &[Step]) -> Vec<(String, String)> {
    let mut c: Vec<Raw> = (0..conns).map(|_| Raw::connect(port)).collect();
    let mut log = Vec::new();
    for s in steps {
        match s {
            Cmd(i, args, n) => {
                let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
                c[*i].cmd(&a);
                let got = frames(&mut c[*i], *n);
                log.push((
                    format!("{i}: {args:?}"),
                    String::from_utf8_lossy(&got).into_owned(),
                ));
            }
            Quiet(i, args) => {
                let a: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
                c[*i].cmd(&a);
                c[*i].reply();
            }
            Pushed(i, n) => {
                let got = frames(&mut c[*i], *n);
                log.push((
                    format!("{i}: pushed {n}"),
                    String::from_utf8_lossy(&got).into_owned(),
                ));
            }
        }
    }
    log
}

fn differential(conns: usize, steps: &[Step]) {
    let redis = start_redis(&[]);
    let want = run(redis.port, conns, steps);
    for threads in ["1", "3"] {
        let cairn = start_cairn(&["--io-threads", threads]);
        let got = run(cairn.port, conns, steps);
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(w, g, "io-threads {threads}");
        }
    }
}

#[test]
fn resp2_subscribed_context_matches_redis() {
    differential(
        2,
        &[
            Cmd(0, &["SUBSCRIBE", "c1", "c2", "c1"], 3),
            Cmd(0, &["PSUBSCRIBE", "p*", "p*"], 2),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["PING"], 1),
            Cmd(0, &["PING", "hi"], 1),
            Cmd(0, &["ping", "a", "b"], 1),
            Cmd(0, &["subscribe"], 1),
            Cmd(0, &["echo", "x"], 1),
            Cmd(0, &["client", "id"], 1),
            Cmd(0, &["hello", "3"], 1),
            Cmd(0, &["nosuchcommand"], 1),
            Cmd(1, &["PUBLISH", "c1", "hello"], 1),
            Pushed(0, 1),
            Cmd(1, &["PUBLISH", "pq", ""], 1),
            Pushed(0, 1),
            Cmd(1, &["PUBLISH", "c1x", "hello"], 1),
            Cmd(1, &["PUBSUB", "CHANNELS", "c1"], 1),
            Cmd(1, &["PUBSUB", "CHANNELS", "C*"], 1),
            Cmd(1, &["PUBSUB", "NUMSUB", "c1", "zz"], 1),
            Cmd(1, &["PUBSUB", "NUMSUB"], 1),
            Cmd(1, &["PUBSUB", "NUMPAT"], 1),
            Cmd(1, &["PUBSUB", "NUMPAT", "x"], 1),
            Cmd(1, &["PUBSUB", "Channels", "a", "b"], 1),
            Cmd(1, &["PUBSUB", "HELP"], 1),
            Cmd(1, &["PUBSUB", "foo"], 1),
            Cmd(1, &["PUBSUB"], 1),
            Cmd(0, &["UNSUBSCRIBE", "c1", "zz"], 2),
            Cmd(0, &["PUNSUBSCRIBE"], 1),
            Cmd(0, &["UNSUBSCRIBE"], 1),
            // Nothing left: one frame with a null name and count 0.
            Cmd(0, &["UNSUBSCRIBE"], 1),
            Cmd(0, &["PUNSUBSCRIBE"], 1),
            Cmd(0, &["PUNSUBSCRIBE", "x"], 1),
            Cmd(0, &["PING"], 1),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["PSUBSCRIBE", "x*", "y*", "z*"], 3),
            // Patterns are unsubscribed in subscription order.
            Cmd(0, &["PUNSUBSCRIBE"], 3),
            Cmd(0, &["SUBSCRIBE", "z"], 1),
            Cmd(0, &["RESET"], 1),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["SUBSCRIBE", "z"], 1),
            Cmd(0, &["QUIT"], 1),
            Cmd(1, &["unsubscribe"], 1),
            Cmd(1, &["unsubscribe", "q"], 1),
            Cmd(1, &["punsubscribe"], 1),
            Cmd(1, &["GET", "x"], 1),
        ],
    );
}

#[test]
fn resp3_push_frames_match_redis() {
    differential(
        3,
        &[
            Quiet(0, &["HELLO", "3"]),
            Cmd(0, &["SUBSCRIBE", "c1"], 1),
            Cmd(0, &["PSUBSCRIBE", "c*"], 1),
            // RESP3: any command runs, PING is a plain PONG.
            Cmd(0, &["PING"], 1),
            Cmd(0, &["PING", "x"], 1),
            Cmd(0, &["GET", "x"], 1),
            // Channel subscribers first, then patterns: two receivers, two frames.
            Cmd(1, &["PUBLISH", "c1", "m"], 1),
            Pushed(0, 2),
            // A message to oneself precedes the PUBLISH reply.
            Cmd(0, &["PUBLISH", "c1", "self"], 3),
            Cmd(0, &["UNSUBSCRIBE"], 1),
            Cmd(0, &["PUNSUBSCRIBE"], 1),
            Cmd(0, &["UNSUBSCRIBE"], 1),
            Cmd(0, &["SUBSCRIBE", "me", "me"], 2),
            Cmd(0, &["UNSUBSCRIBE", "me", "me"], 2),
            // A RESP2 subscriber and a RESP3 one get their own frame shapes.
            Cmd(2, &["SUBSCRIBE", "both"], 1),
            Cmd(0, &["SUBSCRIBE", "both"], 1),
            Cmd(1, &["PUBLISH", "both", "hey"], 1),
            Pushed(2, 1),
            Pushed(0, 1),
            Cmd(1, &["PUBSUB", "NUMSUB", "both"], 1),
            // RESP3 introspection replies keep Redis 7.0's flat arrays.
            Cmd(0, &["PUBSUB", "NUMSUB", "both", "none"], 1),
            Cmd(0, &["PUBSUB", "SHARDNUMSUB", "both"], 1),
            Cmd(0, &["PUBSUB", "CHANNELS", "bo*"], 1),
            Cmd(0, &["PUBSUB", "NUMPAT"], 1),
            Cmd(0, &["PUBSUB", "HELP"], 1),
            // HELLO 2 while subscribed: back to the RESP2 context rules.
            Quiet(0, &["HELLO", "2"]),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["PING"], 1),
        ],
    );
}

#[test]
fn reply_off_still_delivers_pubsub_output_like_redis() {
    differential(
        3,
        &[
            Cmd(0, &["CLIENT", "REPLY", "OFF"], 0),
            Cmd(0, &["SUBSCRIBE", "r"], 1),
            Cmd(2, &["PUBLISH", "r", "m"], 1),
            Pushed(0, 1),
            Quiet(1, &["HELLO", "3"]),
            Cmd(1, &["CLIENT", "REPLY", "OFF"], 0),
            Cmd(1, &["SUBSCRIBE", "r2"], 1),
            Cmd(1, &["PUBLISH", "r2", "self"], 1),
            Cmd(2, &["PUBLISH", "r2", "m"], 1),
            Pushed(1, 1),
            Cmd(1, &["CLIENT", "REPLY", "ON"], 1),
        ],
    );
}

#[test]
fn channels_introspection_client_list_info_and_disconnect() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&["--io-threads", threads]);
        let mut a = Raw::connect(srv.port);
        let mut b = Raw::connect(srv.port);
        let mut q = Raw::connect(srv.port);
        a.cmd(&[b"SUBSCRIBE", b"news.1", b"news.2", b"other"]);
        frames(&mut a, 3);
        a.cmd(&[b"PSUBSCRIBE", b"news.*"]);
        frames(&mut a, 1);
        b.cmd(&[b"PSUBSCRIBE", b"news.*", b"x"]);
        frames(&mut b, 2);
        // CHANNELS: order unspecified, compare as sets.
        let list = String::from_utf8_lossy(&q.call(&["PUBSUB", "CHANNELS"])).into_owned();
        let set: BTreeSet<&str> = list
            .lines()
            .filter(|l| !l.starts_with(['*', '$']))
            .collect();
        assert_eq!(set, BTreeSet::from(["news.1", "news.2", "other"]));
        let list = String::from_utf8_lossy(&q.call(&["PUBSUB", "CHANNELS", "news.*"])).into_owned();
        assert!(list.starts_with("*2\r\n"), "{list}");
        assert_eq!(q.call(&["PUBSUB", "NUMPAT"]), b":2\r\n");
        assert_eq!(q.info_field("stats", "pubsub_channels"), "3");
        assert_eq!(q.info_field("stats", "pubsub_patterns"), "2");
        // One channel subscriber plus two pattern subscribers.
        assert_eq!(q.call(&["PUBLISH", "news.1", "m"]), b":3\r\n");
        let clients = String::from_utf8_lossy(&q.call(&["CLIENT", "LIST"])).into_owned();
        assert!(clients.contains("flags=P db=0 sub=3 psub=1 "), "{clients}");
        assert!(clients.contains("flags=P db=0 sub=0 psub=2 "), "{clients}");
        assert!(clients.contains("flags=N db=0 sub=0 psub=0 "), "{clients}");
        // TYPE pubsub / normal select by subscription state (any protocol).
        let subs =
            String::from_utf8_lossy(&q.call(&["CLIENT", "LIST", "TYPE", "pubsub"])).into_owned();
        assert_eq!(subs.matches("flags=P").count(), 2, "{subs}");
        assert_eq!(subs.matches("id=").count(), 2, "{subs}");
        let normal =
            String::from_utf8_lossy(&q.call(&["CLIENT", "LIST", "TYPE", "normal"])).into_owned();
        assert_eq!(normal.matches("id=").count(), 1, "{normal}");
        assert!(normal.contains("flags=N"), "{normal}");
        // A disconnect drops every subscription.
        drop(a);
        wait_until(
            DEADLINE,
            "the disconnect dropped news.1's subscriber",
            || q.call(&["PUBSUB", "NUMSUB", "news.1"]) == b"*2\r\n$6\r\nnews.1\r\n:0\r\n",
        );
        assert_eq!(q.call(&["PUBSUB", "NUMPAT"]), b":2\r\n");
        assert_eq!(q.call(&["PUBLISH", "news.1", "m"]), b":1\r\n");
        // RESET drops them too (and replies +RESET even in the subscribed context).
        assert_eq!(
            b.reply(),
            b"*4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$6\r\nnews.1\r\n$1\r\nm\r\n"
        );
        assert_eq!(
            b.reply(),
            b"*4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$6\r\nnews.1\r\n$1\r\nm\r\n"
        );
        assert_eq!(b.call(&["RESET"]), b"+RESET\r\n");
        assert_eq!(q.call(&["PUBSUB", "NUMPAT"]), b":0\r\n");
        assert_eq!(q.info_field("stats", "pubsub_channels"), "0");
        assert_eq!(q.call(&["PUBLISH", "news.1", "m"]), b":0\r\n");
        // CLIENT KILL TYPE pubsub takes only subscribers.
        let mut s1 = Raw::connect(srv.port);
        s1.cmd(&[b"SUBSCRIBE", b"k"]);
        s1.reply();
        assert_eq!(q.call(&["CLIENT", "KILL", "TYPE", "pubsub"]), b":1\r\n");
        assert!(s1.closed());
        wait_until(DEADLINE, "the killed client's subscription is gone", || {
            q.call(&["PUBSUB", "NUMSUB", "k"]) == b"*2\r\n$1\r\nk\r\n:0\r\n"
        });
        assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
    }
}

/// A subscriber that never reads: a small receive buffer so the server's output backs up.
fn stalled_subscriber(port: u16, channel: &str) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&s);
    let size: libc::c_int = 4096;
    // SAFETY: setsockopt on a socket we own with a correctly sized int.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let mut s = s;
    s.write_all(&common::encode(&[b"SUBSCRIBE", channel.as_bytes()]))
        .unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0);
    s
}

#[test]
fn pubsub_hard_limit_drops_stalled_subscriber_only() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&[
            "--io-threads",
            threads,
            "--client-output-buffer-limit",
            "pubsub 1mb 0 0",
        ]);
        let _stalled = stalled_subscriber(srv.port, "c");
        // A subscriber that reads everything, on its own thread.
        let mut good = Raw::connect(srv.port);
        good.cmd(&[b"SUBSCRIBE", b"c"]);
        good.reply();
        let reader = std::thread::spawn(move || {
            let mut n = 0u64;
            loop {
                let f = good.reply();
                if f.ends_with(b"$3\r\nend\r\n") {
                    return n;
                }
                n += 1;
            }
        });
        let mut p = Raw::connect(srv.port);
        let msg = "x".repeat(10_000);
        let mut sent = 0u64;
        let mut dropped = false;
        for _ in 0..5000 {
            let r = p.call(&["PUBLISH", "c", &msg]);
            sent += 1;
            if r == b":1\r\n" {
                dropped = true;
                break;
            }
            assert_eq!(r, b":2\r\n");
        }
        assert!(
            dropped,
            "io-threads {threads}: stalled subscriber never dropped"
        );
        // Well above the kernel's buffers, well below "never limited".
        assert!(sent > 100, "dropped after {sent} messages");
        wait_until(DEADLINE, "the disconnection is counted", || {
            p.info_field("stats", "client_output_buffer_limit_disconnections") == "1"
        });
        assert_eq!(
            p.call(&["PUBSUB", "NUMSUB", "c"]),
            b"*2\r\n$1\r\nc\r\n:1\r\n"
        );
        let clients = String::from_utf8_lossy(&p.call(&["CLIENT", "LIST"])).into_owned();
        assert_eq!(clients.matches("sub=1").count(), 1, "{clients}");
        // The reading subscriber got every message.
        assert_eq!(p.call(&["PUBLISH", "c", "end"]), b":1\r\n");
        assert_eq!(reader.join().unwrap(), sent);
    }
}

#[test]
fn pubsub_soft_limit_waits_its_seconds() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&[
            "--io-threads",
            threads,
            "--client-output-buffer-limit",
            "pubsub 0 256kb 2",
        ]);
        let _stalled = stalled_subscriber(srv.port, "c");
        let mut p = Raw::connect(srv.port);
        let msg = vec![b'y'; 10_000];
        // 20 MB in one pipeline: far more than the kernel buffers absorb.
        let mut pipe = Vec::new();
        for _ in 0..2000 {
            pipe.extend(common::encode(&[b"PUBLISH", b"c", &msg]));
        }
        let start = Instant::now();
        p.send(&pipe);
        for _ in 0..2000 {
            p.reply();
        }
        if start.elapsed() < Duration::from_millis(1500) {
            // Over the soft limit, but not for 2 seconds yet: still subscribed.
            assert_eq!(
                p.call(&["PUBSUB", "NUMSUB", "c"]),
                b"*2\r\n$1\r\nc\r\n:1\r\n"
            );
        }
        wait_until(DEADLINE, "the stalled subscriber was dropped", || {
            p.call(&["PUBSUB", "NUMSUB", "c"]) == b"*2\r\n$1\r\nc\r\n:0\r\n"
        });
        assert!(start.elapsed() >= Duration::from_secs(2));
        wait_until(DEADLINE, "the disconnection is counted", || {
            p.info_field("stats", "client_output_buffer_limit_disconnections") == "1"
        });
    }
}

#[test]
fn normal_clients_keep_the_normal_class() {
    let srv = start_cairn(&["--client-output-buffer-limit", "pubsub 64kb 0 0"]);
    let mut c = Raw::connect(srv.port);
    let big = "z".repeat(512 * 1024);
    assert_eq!(c.call(&["SET", "big", &big]), b"+OK\r\n");
    // 32 big replies (16 MB, more than the kernel buffers take) pipelined without
    // reading: far over the pubsub limit, fine for a normal client.
    let mut pipe = Vec::new();
    for _ in 0..32 {
        pipe.extend(common::encode(&[b"GET", b"big"]));
    }
    c.send(&pipe);
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..32 {
        assert_eq!(c.reply().len(), big.len() + 11);
    }
}

#[test]
fn many_subscribers_pipelined_publishes_arrive_in_order() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&["--io-threads", threads]);
        let mut subs: Vec<Raw> = (0..20).map(|_| Raw::connect(srv.port)).collect();
        for (i, s) in subs.iter_mut().enumerate() {
            if i % 2 == 0 {
                s.cmd(&[b"SUBSCRIBE", b"ch"]);
            } else {
                s.cmd(&[b"PSUBSCRIBE", b"c?"]);
            }
            s.reply();
        }
        let mut p = Raw::connect(srv.port);
        let mut pipe = Vec::new();
        for i in 0..200 {
            pipe.extend(common::encode(&[
                b"PUBLISH",
                b"ch",
                i.to_string().as_bytes(),
            ]));
        }
        p.send(&pipe);
        for _ in 0..200 {
            assert_eq!(p.reply(), b":20\r\n");
        }
        for (i, s) in subs.iter_mut().enumerate() {
            for n in 0..200 {
                let f = s.reply();
                let want = if i % 2 == 0 {
                    common::encode(&[b"message", b"ch", n.to_string().as_bytes()])
                } else {
                    common::encode(&[b"pmessage", b"c?", b"ch", n.to_string().as_bytes()])
                };
                assert_eq!(f, want);
            }
        }
    }
}

#[test]
fn pushes_wait_behind_held_replies_under_appendfsync_always() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&[
            "--io-threads",
            threads,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]);
        let mut a = Raw::connect(srv.port);
        a.cmd(&[b"HELLO", b"3"]);
        a.reply();
        a.cmd(&[b"SUBSCRIBE", b"c"]);
        a.reply();
        let mut p = Raw::connect(srv.port);
        let msg: &[u8] = b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n";
        for i in 0..50 {
            // a's write reply (held until durable) and a message another client publishes
            // meanwhile: both arrive, whole, whichever ran first.
            a.cmd(&[b"SET", b"k", i.to_string().as_bytes()]);
            assert_eq!(p.call(&["PUBLISH", "c", "m"]), b":1\r\n");
            let (x, y) = (a.reply(), a.reply());
            assert!(
                (x == b"+OK\r\n" && y == msg) || (x == msg && y == b"+OK\r\n"),
                "{:?} {:?}",
                String::from_utf8_lossy(&x),
                String::from_utf8_lossy(&y)
            );
            // Published by a itself after its held write: strictly after the reply.
            a.cmd(&[b"SET", b"k", b"v"]);
            a.cmd(&[b"PUBLISH", b"c", b"m"]);
            assert_eq!(a.reply(), b"+OK\r\n");
            assert_eq!(a.reply(), msg);
            assert_eq!(a.reply(), b":1\r\n");
        }
    }
}

#[test]
fn sharded_pubsub_matches_redis() {
    differential(
        3,
        &[
            Cmd(0, &["SSUBSCRIBE", "s1", "s2", "s1"], 3),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["PING"], 1),
            // Plain confirmations count channels and patterns, not shard channels.
            Cmd(0, &["SUBSCRIBE", "c1"], 1),
            Cmd(0, &["PSUBSCRIBE", "p*"], 1),
            Cmd(1, &["SPUBLISH", "s1", "m"], 1),
            Pushed(0, 1),
            Cmd(1, &["PUBLISH", "s1", "m"], 1),
            Cmd(1, &["SPUBLISH", "c1", "m"], 1),
            Cmd(1, &["SPUBLISH", "p1", "m"], 1),
            Cmd(1, &["PUBSUB", "SHARDCHANNELS", "s1"], 1),
            Cmd(1, &["PUBSUB", "SHARDCHANNELS", "x*"], 1),
            Cmd(1, &["PUBSUB", "SHARDNUMSUB", "s1", "x"], 1),
            Cmd(1, &["PUBSUB", "SHARDCHANNELS", "a", "b"], 1),
            Cmd(0, &["SUNSUBSCRIBE", "s1", "zz"], 2),
            Cmd(0, &["UNSUBSCRIBE"], 1),
            Cmd(0, &["PUNSUBSCRIBE"], 1),
            // Still in the subscribed context: a shard channel is left.
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["SUNSUBSCRIBE"], 1),
            Cmd(0, &["GET", "x"], 1),
            Cmd(0, &["SUNSUBSCRIBE"], 1),
            Cmd(0, &["SSUBSCRIBE", "k"], 1),
            Cmd(0, &["RESET"], 1),
            Cmd(1, &["PUBSUB", "SHARDNUMSUB", "k"], 1),
            Quiet(2, &["HELLO", "3"]),
            Cmd(2, &["SSUBSCRIBE", "x"], 1),
            Cmd(2, &["SPUBLISH", "x", "m"], 2),
            Cmd(2, &["SUNSUBSCRIBE"], 1),
            Cmd(2, &["SUNSUBSCRIBE"], 1),
            Cmd(2, &["spublish", "a"], 1),
        ],
    );
}

#[test]
fn idle_timeout_spares_subscribers() {
    for threads in ["1", "3"] {
        let srv = start_cairn(&["--io-threads", threads, "--timeout", "1"]);
        let mut sub = Raw::connect(srv.port);
        sub.cmd(&[b"SUBSCRIBE", b"c"]);
        sub.reply();
        let mut idle = Raw::connect(srv.port);
        assert_eq!(idle.call(&["PING"]), b"+PONG\r\n");
        // The idle client is closed after its second of silence, once a cron sees it; the
        // subscriber, silent for longer, is then checked to be still served.
        idle.s.set_read_timeout(Some(DEADLINE)).unwrap();
        assert!(
            idle.closed(),
            "io-threads {threads}: idle normal client kept"
        );
        let mut p = Raw::connect(srv.port);
        assert_eq!(p.call(&["PUBLISH", "c", "still"]), b":1\r\n");
        assert_eq!(sub.reply(), common::encode(&[b"message", b"c", b"still"]));
    }
}

#[test]
fn redis_crate_pubsub_client_works() {
    let srv = start_cairn(&[]);
    let mut sub_conn = common::client(srv.port);
    let mut ps = sub_conn.as_pubsub();
    ps.subscribe("news").unwrap();
    ps.psubscribe("n*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut p = common::client(srv.port);
    let n: i64 = redis::cmd("PUBLISH")
        .arg("news")
        .arg("hello")
        .query(&mut p)
        .unwrap();
    assert_eq!(n, 2);
    let m1 = ps.get_message().unwrap();
    assert_eq!(m1.get_channel_name(), "news");
    assert!(!m1.from_pattern());
    assert_eq!(m1.get_payload::<String>().unwrap(), "hello");
    let m2 = ps.get_message().unwrap();
    assert!(m2.from_pattern());
    assert_eq!(m2.get_pattern::<String>().unwrap(), "n*");
    assert_eq!(m2.get_payload::<String>().unwrap(), "hello");
    ps.unsubscribe("news").unwrap();
    ps.punsubscribe("n*").unwrap();
    drop(ps);
    // Back to a normal connection.
    let pong: String = redis::cmd("PING").query(&mut sub_conn).unwrap();
    assert_eq!(pong, "PONG");
}

/// Concurrent publishers and subscribers that also run commands (RESP3 may): every
/// subscriber sees every message once, each publisher's in order, and its own replies.
#[test]
fn concurrent_publishers_and_busy_subscribers() {
    const PUBS: usize = 3;
    const MSGS: usize = 300;
    for threads in ["1", "3"] {
        let srv = start_cairn(&["--io-threads", threads]);
        let port = srv.port;
        let mut subs = Vec::new();
        for i in 0..4 {
            let mut s = Raw::connect(port);
            let resp3 = i % 2 == 1;
            if resp3 {
                s.cmd(&[b"HELLO", b"3"]);
                s.reply();
            }
            s.cmd(&[b"SUBSCRIBE", b"ch"]);
            s.reply();
            subs.push(std::thread::spawn(move || {
                let mut next = [0usize; PUBS];
                let mut pings_sent = 0;
                let mut pongs = 0;
                let mut got = 0;
                while got < PUBS * MSGS || pongs < pings_sent {
                    if resp3 && pings_sent < 50 && got % 10 == 0 && pongs == pings_sent {
                        s.cmd(&[b"PING"]);
                        pings_sent += 1;
                    }
                    let f = s.reply();
                    if f == b"+PONG\r\n" {
                        pongs += 1;
                        continue;
                    }
                    let text = String::from_utf8_lossy(&f).into_owned();
                    let payload = text.rsplit("\r\n").nth(1).unwrap().to_string();
                    let (p, n) = payload.split_once(':').unwrap();
                    let (p, n): (usize, usize) = (p.parse().unwrap(), n.parse().unwrap());
                    assert_eq!(n, next[p], "publisher {p} out of order");
                    next[p] += 1;
                    got += 1;
                }
                pongs
            }));
        }
        let pubs: Vec<_> = (0..PUBS)
            .map(|p| {
                std::thread::spawn(move || {
                    let mut c = Raw::connect(port);
                    for n in 0..MSGS {
                        let m = format!("{p}:{n}");
                        assert_eq!(c.call(&["PUBLISH", "ch", &m]), b":4\r\n");
                    }
                })
            })
            .collect();
        for p in pubs {
            p.join().unwrap();
        }
        for (i, s) in subs.into_iter().enumerate() {
            let pongs = s.join().unwrap();
            if i % 2 == 1 {
                assert!(pongs > 0);
            }
        }
    }
}

/// MONITOR as Redis 7, compared line by line with Debian's redis-server (timestamps and
/// client ports masked): what clients run, commands a script runs (from `lua`), quoting
/// of odd bytes, the db; admin commands (CONFIG, ...) and the monitor's own commands are
/// not shown; inside MULTI it is refused.
#[test]
fn monitor_streams_commands_as_redis() {
    fn mask(line: &[u8]) -> String {
        let s = String::from_utf8_lossy(line).into_owned();
        // "+<s>.<us> [<db> <addr>] ..." -> "[<db> ADDR] ..."
        let Some(open) = s.find(" [") else {
            return s;
        };
        let close = s[open..].find(']').map_or(s.len(), |c| open + c);
        let inner = &s[open + 2..close];
        let (db, addr) = inner.split_once(' ').unwrap_or((inner, ""));
        let addr = if addr == "lua" { "lua" } else { "ADDR" };
        format!("[{db} {addr}]{}", &s[close + 1..])
    }
    let redis = start_redis(&[]);
    let cairn = start_cairn(&[]);
    let mut seen: Vec<Vec<String>> = Vec::new();
    for port in [redis.port, cairn.port] {
        let mut m = Raw::connect(port);
        assert_eq!(m.call(&["MONITOR"]), b"+OK\r\n");
        let mut c = Raw::connect(port);
        let list = String::from_utf8(c.call(&["CLIENT", "LIST"])).unwrap();
        assert!(list.contains(" flags=O "), "{list}");
        let sent: &[&[&str]] = &[
            &["SET", "k", "a b\"\\\n\r\t\x07\x08\x01\u{7f}"],
            &["get", "k"],
            &["CONFIG", "GET", "hz"],
            &["SELECT", "1"],
            &["DEL", "k"],
            &[
                "EVAL",
                "return redis.call('set', KEYS[1], ARGV[1])",
                "1",
                "x",
                "1",
            ],
            &["MULTI"],
            &["INCR", "n"],
            &["EXEC"],
            &["PING"],
        ];
        for cmd in sent {
            c.call(cmd);
        }
        // The monitor's own commands are not shown to it.
        let mut lines = Vec::new();
        while !lines
            .last()
            .is_some_and(|l: &String| l.ends_with("\"PING\"\r\n"))
        {
            assert!(lines.len() < 20, "{lines:?}");
            lines.push(mask(&m.reply()));
        }
        seen.push(lines);
        // Inside MULTI: refused at EXEC.
        c.call(&["MULTI"]);
        c.call(&["MONITOR"]);
        let exec = String::from_utf8(c.call(&["EXEC"])).unwrap();
        assert!(
            exec.contains("-ERR MONITOR isn't allowed for DENY BLOCKING client"),
            "{exec}"
        );
    }
    assert_eq!(seen[1], seen[0], "cairn vs redis");
    assert!(
        seen[1]
            .iter()
            .any(|l| l.starts_with("[1 lua] \"set\" \"x\" \"1\"")),
        "{:?}",
        seen[1]
    );
    assert!(
        !seen[1].iter().any(|l| l.contains("CONFIG")),
        "{:?}",
        seen[1]
    );
}
