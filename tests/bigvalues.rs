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
    sized_value(seed, BIG)
}

fn sized_value(seed: u8, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2654435761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
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

/// Each mutation runs while a slow client still has two pipelined GETs of the old value
/// (with a PING between them) queued; the slow client must get the old bytes intact.
fn slow_reader_sees_old_value(io_threads: &str, resp3: bool, size: usize) {
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
        let v = sized_value(i as u8 + if resp3 { 100 } else { 0 }, size);
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
                assert_eq!(r, format!(":{}\r\n", size + 4).as_bytes());
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
    let deadline = Instant::now() + DEADLINE;
    loop {
        let used = w.info_u64("memory", "used_memory");
        if used < 4 << 20 {
            break;
        }
        assert!(Instant::now() < deadline, "used_memory stays at {used}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(w.info_u64("stats", "reply_bytes_referenced") >= (size * 2 * 9) as u64);
    assert!(w.info_u64("stats", "reply_bytes_copied") < 1 << 20);
}

#[test]
fn slow_reader_resp2_single_thread() {
    // The case: a 100 MB value read slowly while another client mutates it.
    slow_reader_sees_old_value("1", false, 100 << 20);
}

#[test]
fn slow_reader_resp3_single_thread() {
    slow_reader_sees_old_value("1", true, BIG);
}

#[test]
fn slow_reader_resp2_io_threads() {
    slow_reader_sees_old_value("3", false, BIG);
}

#[test]
fn slow_reader_resp3_io_threads() {
    slow_reader_sees_old_value("3", true, BIG);
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
    assert_eq!(c.info_u64("stats", "reply_bytes_referenced"), 0);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "k"]), b"$3\r\nraw\r\n");
    c.call(&["CONFIG", "SET", "min-string-size-avoid-copy-reply", "16kb"]);
    c.cmd(&[b"GET", b"k"]);
    assert_eq!(c.reply(), bulk(&v));
    assert_eq!(c.info_u64("stats", "reply_bytes_referenced"), 100_000);
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
    let base = w.info_u64("memory", "used_memory");
    let v = big_value(7);
    w.cmd(&[b"SET", b"k", &v]);
    assert_eq!(w.reply(), b"+OK\r\n");
    let mut lazy = conn(srv.port);
    lazy.send(&encode(&[b"GET", b"k"]));
    // Over the limit at once (20 MB referenced > 4 MB): closed without the whole reply.
    assert!(lazy.closed());
    assert_eq!(w.call(&["DEL", "k"]), b":1\r\n");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let used = w.info_u64("memory", "used_memory");
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
    while w.info_u64("stats", "client_output_buffer_limit_disconnections") != 1 {
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
    let base = w.info_u64("memory", "used_memory");
    let v = big_value(3);
    w.cmd(&[b"SET", b"k", &v]);
    assert_eq!(w.reply(), b"+OK\r\n");
    let referenced = w.info_u64("stats", "reply_bytes_referenced");
    let mut gone = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    let mut p = Vec::new();
    for _ in 0..4 {
        p.extend_from_slice(&encode(&[b"GET", b"k"]));
    }
    gone.write_all(&p).unwrap();
    // A GET ran: its reply holds the value's block (it cannot all be sent to a client
    // that never reads).
    wait_until(DEADLINE, "a GET's reply references the value", || {
        w.info_u64("stats", "reply_bytes_referenced") > referenced
    });
    assert_eq!(w.call(&["DEL", "k"]), b":1\r\n");
    // Still referenced: the block is alive.
    assert!(w.info_u64("memory", "used_memory") > base + (BIG as u64) / 2);
    drop(gone);
    let deadline = Instant::now() + DEADLINE;
    while w.info_u64("memory", "used_memory") > base + (1 << 20) {
        assert!(Instant::now() < deadline, "the block was not freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every other consumer of a value reads out-of-line values like in-line ones.
#[test]
fn other_consumers_see_big_values() {
    let srv = start_cairn(&["--enable-debug-command", "yes"]);
    let mut c = conn(srv.port);
    let v = big_value(11);
    c.cmd(&[b"SET", b"k", &v]);
    assert_eq!(c.reply(), b"+OK\r\n");
    assert_eq!(c.call(&["STRLEN", "k"]), format!(":{BIG}\r\n").as_bytes());
    let r = c.call(&["GETRANGE", "k", "1000", "1009"]);
    assert_eq!(r, bulk(&v[1000..1010]));
    assert_eq!(c.call(&["OBJECT", "ENCODING", "k"]), b"$3\r\nraw\r\n");
    let usage = c.call(&["MEMORY", "USAGE", "k"]);
    let usage: usize = std::str::from_utf8(&usage[1..usage.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (BIG..BIG + BIG / 8).contains(&usage),
        "MEMORY USAGE {usage}"
    );
    let digest = c.call(&["DEBUG", "DIGEST-VALUE", "k"]);
    c.cmd(&[b"DUMP", b"k"]);
    let dump = c.reply();
    let payload_start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
    let payload = &dump[payload_start..dump.len() - 2];
    c.cmd(&[b"RESTORE", b"k2", b"0", payload]);
    assert_eq!(c.reply(), b"+OK\r\n");
    assert_eq!(c.call(&["DEBUG", "DIGEST-VALUE", "k2"]), digest);
    c.cmd(&[b"GET", b"k2"]);
    assert_eq!(c.reply(), bulk(&v));
    assert_eq!(c.call(&["COPY", "k", "k3"]), b":1\r\n");
    assert_eq!(c.call(&["RENAME", "k3", "k4"]), b"+OK\r\n");
    c.cmd(&[b"GET", b"k4"]);
    assert_eq!(c.reply(), bulk(&v));
    // A small value grown past the threshold by APPEND moves out of line and reads back.
    c.cmd(&[b"SET", b"s", b"head"]);
    c.reply();
    c.cmd(&[b"APPEND", b"s", &v[..100_000]]);
    assert_eq!(c.reply(), b":100004\r\n");
    c.cmd(&[b"GET", b"s"]);
    let mut expect = b"head".to_vec();
    expect.extend_from_slice(&v[..100_000]);
    assert_eq!(c.reply(), bulk(&expect));
}

/// A snapshot image taken while a reply referenced a value the keyspace had dropped:
/// after restart that block is freed (the image records no client references), live
/// big values come back intact.
#[test]
fn snapshot_restart_frees_blocks_held_by_clients() {
    let dir = std::env::temp_dir().join(format!("cairn-bigval-snap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let v1 = big_value(21);
    let v2 = big_value(22);
    let base;
    {
        let srv = start_cairn(&["--dir", d]);
        let mut w = conn(srv.port);
        base = w.info_u64("memory", "used_memory");
        w.cmd(&[b"SET", b"k1", &v1]);
        assert_eq!(w.reply(), b"+OK\r\n");
        w.cmd(&[b"SET", b"k2", &v2]);
        assert_eq!(w.reply(), b"+OK\r\n");
        let referenced = w.info_u64("stats", "reply_bytes_referenced");
        let mut slow = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        slow.write_all(&encode(&[b"GET", b"k1"])).unwrap();
        wait_until(DEADLINE, "the GET's reply references k1's value", || {
            w.info_u64("stats", "reply_bytes_referenced") > referenced
        });
        assert_eq!(w.call(&["DEL", "k1"]), b":1\r\n");
        assert!(w.info_u64("memory", "used_memory") > base + 2 * BIG as u64 - (1 << 20));
        assert_eq!(w.call(&["SAVE"]), b"+OK\r\n");
    }
    let srv = start_cairn(&["--dir", d]);
    let mut w = conn(srv.port);
    let deadline = Instant::now() + DEADLINE;
    while w.call(&["EXISTS", "k2"]) != b":1\r\n" {
        assert!(Instant::now() < deadline, "the image was not loaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.call(&["EXISTS", "k1"]), b":0\r\n");
    w.cmd(&[b"GET", b"k2"]);
    assert_eq!(w.reply(), bulk(&v2));
    let used = w.info_u64("memory", "used_memory");
    assert!(
        // (one 20 MB block, with its size class's rounding; two would be twice that)
        used < base + BIG as u64 * 5 / 4 + (1 << 20),
        "used_memory {used}: the orphaned block survived the restart"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A big SET trickles in while another client is served: its bytes go straight into an
/// arena block that the stored value adopts (no copy on the executor), PINGs from another
/// connection are answered while the upload is half done, and the value is intact.
fn big_request_read_into_place(io_threads: &str) {
    let srv = start_cairn(&["--io-threads", io_threads]);
    let mut other = conn(srv.port);
    let adopted_before = other.info_u64("stats", "request_args_adopted");
    let v = big_value(31);
    let mut up = conn(srv.port);
    let mut req = encode(&[b"SET", b"big", &v]);
    // Pipelined behind it: a small command that must see the big value.
    req.extend_from_slice(&encode(&[b"STRLEN", b"big"]));
    let half = req.len() / 2;
    let chunk = 256 * 1024;
    let mut sent = 0;
    while sent < half {
        let n = chunk.min(half - sent);
        up.send(&req[sent..sent + n]);
        sent += n;
        std::thread::sleep(Duration::from_millis(2));
    }
    // Half of the value is in: the server serves others meanwhile.
    for _ in 0..5 {
        assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    }
    assert_eq!(other.call(&["EXISTS", "big"]), b":0\r\n");
    up.send(&req[sent..]);
    assert_eq!(up.reply(), b"+OK\r\n");
    assert_eq!(up.reply(), format!(":{}\r\n", v.len()).into_bytes());
    other.cmd(&[b"GET", b"big"]);
    assert_eq!(other.reply(), bulk(&v));
    assert!(other.info_u64("stats", "request_args_adopted") > adopted_before);

    // MSET with the same key twice: the first big value is adopted, then dropped while
    // the command still holds it; the second one wins, intact.
    let v2 = big_value(32);
    other.cmd(&[b"MSET", b"dup", &v, b"dup", &v2]);
    assert_eq!(other.reply(), b"+OK\r\n");
    other.cmd(&[b"GET", b"dup"]);
    assert_eq!(other.reply(), bulk(&v2));
    // A big argument that is not stored as a string (a hash field's value) is copied
    // where it belongs and its block freed.
    other.cmd(&[b"HSET", b"h", b"f", &v2[..300_000]]);
    assert_eq!(other.reply(), b":1\r\n");
    other.cmd(&[b"HGET", b"h", b"f"]);
    assert_eq!(other.reply(), bulk(&v2[..300_000]));

    // A client that goes away in the middle of a big argument leaves nothing behind.
    let used = other.info_u64("memory", "used_memory");
    let mut quitter = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    let partial = encode(&[b"SET", b"never", &big_value(33)]);
    quitter.write_all(&partial[..partial.len() / 3]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(quitter);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = other.info_u64("memory", "used_memory");
        if now < used + (1 << 20) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "used_memory {now} stayed above {used}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(other.call(&["EXISTS", "never"]), b":0\r\n");
}

#[test]
fn big_request_read_into_place_single_thread() {
    big_request_read_into_place("1");
}

#[test]
fn big_request_read_into_place_io_threads() {
    big_request_read_into_place("3");
}

/// The `r=slot:bytes,...` entries of every `turn` line of a latency trace.
fn trace_reads(path: &std::path::Path) -> Vec<(u32, u64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut reads = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("turn ")) {
        let r = line
            .split(' ')
            .find_map(|w| w.strip_prefix("r="))
            .unwrap_or_else(|| panic!("no r= in {line:?}"));
        for e in r
            .split(',')
            .filter(|e| !e.is_empty() && !e.starts_with('+'))
        {
            let (slot, bytes) = e.split_once(':').unwrap_or_else(|| panic!("{line:?}"));
            reads.push((slot.parse().unwrap(), bytes.parse().unwrap()));
        }
    }
    reads
}

/// A 20 MB SET sent as fast as the socket takes it, while another client keeps GETting a
/// small and a 200 KB value: every GET gets its exact bytes, the big value arrives
/// intact, and the executor's timeline (`latency-trace-file`, bytes read per connection
/// per turn) shows the upload was read a budget (256 KiB, plus the 16 KiB chunk that
/// follows a completed argument) per turn — never the socket's whole backlog in one turn,
/// nor the same connection twice in one turn.
#[test]
fn a_big_upload_is_read_a_budget_per_turn_between_other_clients() {
    const TURN_MAX: u64 = (256 + 16) << 10;
    let dir = temp_dir("upload-trace");
    let trace = dir.join("t.trace");
    let srv = start_cairn(&["--io-threads", "1"]);
    let mut other = conn(srv.port);
    let small = sized_value(5, 1024);
    let mid = sized_value(6, 200_000);
    other.cmd(&[b"SET", b"small", &small]);
    assert_eq!(other.reply(), b"+OK\r\n");
    other.cmd(&[b"SET", b"mid", &mid]);
    assert_eq!(other.reply(), b"+OK\r\n");
    let t = trace.to_str().unwrap();
    assert_eq!(
        other.call(&["CONFIG", "SET", "latency-trace-file", t]),
        b"+OK\r\n"
    );
    let v = big_value(41);
    let port = srv.port;
    let sent = v.clone();
    let uploader = std::thread::spawn(move || {
        let mut up = conn(port);
        up.send(&encode(&[b"SET", b"big", &sent]));
        assert_eq!(up.reply(), b"+OK\r\n");
    });
    let mut gets = 0u32;
    while !uploader.is_finished() || gets == 0 {
        other.cmd(&[b"GET", b"small"]);
        assert_eq!(other.reply(), bulk(&small));
        other.cmd(&[b"GET", b"mid"]);
        assert_eq!(other.reply(), bulk(&mid));
        gets += 1;
    }
    uploader.join().unwrap();
    other.cmd(&[b"GET", b"big"]);
    assert_eq!(other.reply(), bulk(&v));
    assert_eq!(
        other.call(&["CONFIG", "SET", "latency-trace-file", ""]),
        b"+OK\r\n"
    );
    // The trace holds the whole upload once its writer has caught up.
    let mut reads = Vec::new();
    wait_until(DEADLINE, "the trace records the upload", || {
        reads = trace_reads(&trace);
        reads.iter().map(|r| r.1).sum::<u64>() >= v.len() as u64
    });
    let most = reads.iter().map(|r| r.1).max().unwrap();
    assert!(
        most <= TURN_MAX,
        "one turn read {most} bytes from one connection (budget {TURN_MAX})"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
