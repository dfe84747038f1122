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

/// Waits until `cond` holds or the deadline passes; returns whether it held.
fn wait_for(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

fn info_u64(c: &mut Raw, section: &str, field: &str) -> u64 {
    c.info(section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap()
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
        wait_for(Duration::from_secs(20), || {
            info_u64(&mut c, "stats", "request_args_in_place")
                + info_u64(&mut c, "stats", "request_args_over_budget")
                >= 80
        }),
        "the server did not parse every big bulk header"
    );
    let claimed = info_u64(&mut c, "memory", "request_args_in_place_bytes");
    let budget = info_u64(&mut c, "memory", "request_args_in_place_budget_bytes");
    assert!(claimed <= budget, "claimed {claimed} > budget {budget}");
    assert!(info_u64(&mut c, "stats", "request_args_over_budget") > 0);
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
    assert!(wait_for(Duration::from_secs(10), || info_u64(
        &mut c,
        "memory",
        "request_args_in_place_bytes"
    ) == 0));
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
            wait_for(Duration::from_secs(5), || info_u64(
                &mut c,
                "stats",
                "request_args_over_budget"
            ) == 1),
            "io-threads {io_threads}: the header was not declined"
        );
        assert_eq!(info_u64(&mut c, "stats", "request_args_in_place"), 0);
        r.send(&vec![b'a'; (1 << 20) + 1]);
        assert!(r.closed(), "io-threads {io_threads}: client not closed");
        // I/O threads' counters reach INFO on the executor's next cron tick.
        assert!(wait_for(Duration::from_secs(5), || info_u64(
            &mut c,
            "stats",
            "client_query_buffer_limit_disconnections"
        ) >= 1));
        assert_serving(srv.port);
    }
}

/// Fills a small arena with one family's writes until the server answers -OOM; then
/// reads, deletes and PING still work, and the refusal is counted.
fn fill_until_oom(c: &mut Raw, family: &str, mut write: impl FnMut(&mut Raw, u64) -> Vec<u8>) {
    for i in 0..2_000_000u64 {
        let reply = write(c, i);
        if reply.starts_with(b"-OOM") {
            return;
        }
        assert!(
            !reply.starts_with(b"-"),
            "{family}: unexpected error {}",
            String::from_utf8_lossy(&reply)
        );
    }
    panic!("{family}: a 64 MiB arena never filled");
}

/// A write family's command for its i-th key.
type WriteFamily<'a> = (&'a str, Box<dyn FnMut(&mut Raw, u64) -> Vec<u8> + 'a>);

#[test]
fn a_full_arena_refuses_writes_and_keeps_serving() {
    let srv = start_cairn(&["--arena-reserve-bytes", "64mb"]);
    let mut c = Raw::connect(srv.port);
    assert_eq!(c.call(&["SET", "keep", "me"]), b"+OK\r\n");
    let chunk = "x".repeat(64 * 1024);
    let families: Vec<WriteFamily> = vec![
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
        fill_until_oom(&mut c, family, write);
        // Reads and PING go on; the oldest key is intact.
        assert_eq!(c.call(&["GET", "keep"]), b"$2\r\nme\r\n", "{family}");
        assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
        keys_per_family.push(family);
        // Make room for the next family: the ways out of a full arena are writes too.
        // A big flush is freed in the background: writes are taken again once its
        // blocks are back on the free lists.
        assert_eq!(c.call(&["FLUSHALL"]), b"+OK\r\n", "{family}");
        assert!(
            wait_for(Duration::from_secs(20), || c.call(&["SET", "keep", "me"])
                == b"+OK\r\n"),
            "{family}: writes still refused after FLUSHALL"
        );
    }
    assert!(info_u64(&mut c, "stats", "arena_oom_refusals") >= keys_per_family.len() as u64);
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
    assert!(wait_for(Duration::from_secs(20), || c
        .call(&["SET", "after", "flush"])
        == b"+OK\r\n"));
    assert_serving(srv.port);
}

/// PING and reads on a server whose arena is full (no SET round trip).
fn assert_serving_reads(port: u16) {
    let mut c = Raw::connect(port);
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.call(&["STRLEN", "f1"]), b":65536\r\n");
}
