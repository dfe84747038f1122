//! Large values sent by reference (issue #5): a reply referencing a stored value keeps
//! the old bytes while the key is overwritten, appended to, deleted or flushed; clients
//! that never read are dropped at their output limit and the value is then freed.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// 20 MB: large enough to sit in socket buffers and the server's queue for a while.
const BIG: usize = 20 << 20;

fn big_value(seed: u8) -> Vec<u8> {
    (0..BIG)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2654435761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut b = format!("${}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

fn read_exact_slowly(s: &mut TcpStream, n: usize, slow_prefix: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(n);
    let mut tmp = vec![0u8; 256 * 1024];
    while got.len() < n {
        let want = if got.len() < slow_prefix {
            // Slow start: small reads with pauses, so the rest waits in the server.
            std::thread::sleep(Duration::from_millis(2));
            4096
        } else {
            tmp.len()
        };
        let want = want.min(n - got.len());
        let r = s.read(&mut tmp[..want]).expect("read");
        assert!(r > 0, "closed after {} of {n} bytes", got.len());
        got.extend_from_slice(&tmp[..r]);
    }
    got
}

/// A raw connection with a long read timeout (20 MB transfers into a debug build on a
/// shared machine can take seconds).
fn conn(port: u16) -> Raw {
    let c = Raw::connect(port);
    c.s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c
}

fn info_field(c: &mut Raw, section: &str, field: &str) -> u64 {
    let r = c.call(&["INFO", section]);
    let text = String::from_utf8_lossy(&r).to_string();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// Each mutation runs while a slow client still has two pipelined GETs of the old value
/// (with a PING between them) queued; the slow client must get the old bytes intact.
fn slow_reader_sees_old_value(io_threads: &str, resp3: bool) {
    let srv = start_cairn(&["--io-threads", io_threads]);
    let mut w = conn(srv.port);
    let mutations: &[&[&str]] = &[
        &["SET", "k", "small"],
        &["APPEND", "k", "tail"],
        &["SETRANGE", "k", "5", "XYZ"],
        &["SETBIT", "k", "7", "1"],
        &["DEL", "k"],
        &["UNLINK", "k"],
        &["PEXPIRE", "k", "1"],
        &["FLUSHALL"],
        &["SWAPDB", "0", "1"],
    ];
    for (i, m) in mutations.iter().enumerate() {
        let v = big_value(i as u8 + if resp3 { 100 } else { 0 });
        w.cmd(&[b"SET", b"k", &v]);
        assert_eq!(w.reply(), b"+OK\r\n");
        let mut slow = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut prefix = Vec::new();
        if resp3 {
            slow.write_all(&encode(&[b"HELLO", b"3"])).unwrap();
            // HELLO's map reply: read it whole before the big ones (nothing else is
            // pending, so this cannot read past it).
            let mut hello = Vec::new();
            let mut tmp = [0u8; 4096];
            while reply_len(&hello).is_none() {
                let n = slow.read(&mut tmp).unwrap();
                assert!(n > 0);
                hello.extend_from_slice(&tmp[..n]);
            }
            assert!(
                hello.starts_with(b"%"),
                "{:?}",
                String::from_utf8_lossy(&hello)
            );
        }
        let mut pipe = encode(&[b"GET", b"k"]);
        pipe.extend_from_slice(&encode(&[b"PING"]));
        pipe.extend_from_slice(&encode(&[b"GET", b"k"]));
        pipe.extend_from_slice(&encode(&[b"STRLEN", b"k"]));
        slow.write_all(&pipe).unwrap();
        // Start reading slowly, so the replies are still queued when the key changes.
        prefix.extend(read_exact_slowly(&mut slow, 64 * 1024, 64 * 1024));
        let r = w.call(m);
        assert!(
            !r.starts_with(b"-"),
            "{m:?}: {:?}",
            String::from_utf8_lossy(&r)
        );
        let mut expect = bulk(&v);
        expect.extend_from_slice(b"+PONG\r\n");
        expect.extend_from_slice(&bulk(&v));
        expect.extend_from_slice(format!(":{}\r\n", v.len()).as_bytes());
        let rest = read_exact_slowly(&mut slow, expect.len() - prefix.len(), 256 * 1024);
        prefix.extend(rest);
        assert!(prefix == expect, "{m:?}: the slow client's bytes differ");
        // The key now holds what the mutation made of it (copy-on-write, not the old).
        match m[0] {
            "APPEND" => {
                let r = w.call(&["STRLEN", "k"]);
                assert_eq!(r, format!(":{}\r\n", BIG + 4).as_bytes());
                let r = w.call(&["GETRANGE", "k", "-4", "-1"]);
                assert_eq!(r, b"$4\r\ntail\r\n");
            }
            "SETRANGE" => {
                let r = w.call(&["GETRANGE", "k", "5", "7"]);
                assert_eq!(r, b"$3\r\nXYZ\r\n");
            }
            "SETBIT" => {
                let r = w.call(&["GETBIT", "k", "7"]);
                assert_eq!(r, b":1\r\n");
            }
            "SWAPDB" => {
                assert_eq!(w.call(&["EXISTS", "k"]), b":0\r\n");
                w.call(&["FLUSHALL"]);
            }
            _ => {}
        }
        drop(slow);
        w.call(&["FLUSHALL"]);
    }
    // Everything was released: no value block is left once the keyspace is empty.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let used = info_field(&mut w, "memory", "used_memory");
        if used < 4 << 20 {
            break;
        }
        assert!(Instant::now() < deadline, "used_memory stays at {used}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(info_field(&mut w, "stats", "reply_bytes_referenced") >= (BIG * 2 * 9) as u64);
    assert!(info_field(&mut w, "stats", "reply_bytes_copied") < 1 << 20);
}

#[test]
fn slow_reader_resp2_single_thread() {
    slow_reader_sees_old_value("1", false);
}

#[test]
fn slow_reader_resp3_single_thread() {
    slow_reader_sees_old_value("1", true);
}

#[test]
fn slow_reader_resp2_io_threads() {
    slow_reader_sees_old_value("3", false);
}

#[test]
fn slow_reader_resp3_io_threads() {
    slow_reader_sees_old_value("3", true);
}

/// Small values and a lowered threshold: below it replies are copied.
#[test]
fn threshold_is_configurable() {
    let srv = start_cairn(&["--min-string-size-avoid-copy-reply", "1mb"]);
    let mut c = conn(srv.port);
    let v = vec![b'x'; 100_000];
    c.cmd(&[b"SET", b"k", &v]);
    assert_eq!(c.reply(), b"+OK\r\n");
    c.cmd(&[b"GET", b"k"]);
    assert_eq!(c.reply(), bulk(&v));
    assert_eq!(info_field(&mut c, "stats", "reply_bytes_referenced"), 0);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "k"]), b"$3\r\nraw\r\n");
    c.call(&["CONFIG", "SET", "min-string-size-avoid-copy-reply", "16kb"]);
    c.cmd(&[b"GET", b"k"]);
    assert_eq!(c.reply(), bulk(&v));
    assert_eq!(
        info_field(&mut c, "stats", "reply_bytes_referenced"),
        100_000
    );
}

/// A client that never reads: dropped at its output limit, counting referenced bytes;
/// its reference is released, so once the key is deleted the memory is back.
fn never_reader_is_dropped(io_threads: &str) {
    let srv = start_cairn(&[
        "--io-threads",
        io_threads,
        "--client-output-buffer-limit",
        "normal 4mb 0 0",
    ]);
    let mut w = conn(srv.port);
    let base = info_field(&mut w, "memory", "used_memory");
    let v = big_value(7);
    w.cmd(&[b"SET", b"k", &v]);
    assert_eq!(w.reply(), b"+OK\r\n");
    let mut lazy = conn(srv.port);
    lazy.send(&encode(&[b"GET", b"k"]));
    // Over the limit at once (20 MB referenced > 4 MB): closed without the whole reply.
    assert!(lazy.closed());
    assert_eq!(w.call(&["DEL", "k"]), b":1\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let used = info_field(&mut w, "memory", "used_memory");
        if used <= base + (1 << 20) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "used_memory {used}, baseline {base}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // (I/O threads' counters reach INFO at the next cron tick.)
    while info_field(&mut w, "stats", "client_output_buffer_limit_disconnections") != 1 {
        assert!(
            Instant::now() < deadline,
            "no output-limit disconnection counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn never_reader_dropped_single_thread() {
    never_reader_is_dropped("1");
}

#[test]
fn never_reader_dropped_io_threads() {
    never_reader_is_dropped("3");
}

/// A client that goes away with a referenced reply queued releases it.
#[test]
fn disconnect_releases_references() {
    let srv = start_cairn(&[]);
    let mut w = conn(srv.port);
    let base = info_field(&mut w, "memory", "used_memory");
    let v = big_value(3);
    w.cmd(&[b"SET", b"k", &v]);
    assert_eq!(w.reply(), b"+OK\r\n");
    let mut gone = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    let mut p = Vec::new();
    for _ in 0..4 {
        p.extend_from_slice(&encode(&[b"GET", b"k"]));
    }
    gone.write_all(&p).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(w.call(&["DEL", "k"]), b":1\r\n");
    // Still referenced: the block is alive.
    assert!(info_field(&mut w, "memory", "used_memory") > base + (BIG as u64) / 2);
    drop(gone);
    let deadline = Instant::now() + Duration::from_secs(5);
    while info_field(&mut w, "memory", "used_memory") > base + (1 << 20) {
        assert!(Instant::now() < deadline, "the block was not freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}
