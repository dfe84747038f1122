//! `latency-trace-file`: the executor's per-turn timeline. Set, the file gets one `turn`
//! line per executor turn (with the bytes written per connection and large values sent by
//! reference); unset, nothing more is written; values that cannot be opened are refused.

mod common;
use common::*;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// The `key=value` field of a trace line, as a number.
fn field(line: &str, name: &str) -> u64 {
    let key = format!("{name}=");
    line.split(' ')
        .find_map(|w| w.strip_prefix(key.as_str()))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} not a number in {line:?}"))
}

fn turns(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("turn "))
        .map(str::to_string)
        .collect()
}

fn ok(raw: &mut Raw, args: &[&str]) {
    let r = raw.call(args);
    assert_eq!(r, b"+OK\r\n", "{args:?}: {}", show(&r));
}

/// Sends GETs of a 1 MB value (sent by reference) and small ones until the trace at
/// `path` shows a turn that wrote the large value from the arena.
fn traffic_until_traced(raw: &mut Raw, path: &Path, io_threads: bool) {
    wait_until(Duration::from_secs(20), "trace records", || {
        assert_eq!(raw.call(&["GET", "big"]).len(), (1 << 20) + 12);
        raw.call(&["GET", "small"]);
        turns(path).iter().any(|l| {
            if io_threads {
                field(l, "ref_queued") > 0 && field(l, "queued") > 0
            } else {
                field(l, "ref_bytes") > 0 && field(l, "writevs") > 0 && l.contains(" w=")
            }
        })
    });
}

fn trace_acts(io_threads: &str) {
    let dir = temp_dir("ltrace");
    let a = dir.join("a.trace");
    let b = dir.join("b.trace");
    let srv = start_on(&dir, &["--io-threads", io_threads], &[]);
    let mut raw = Raw::connect(srv.port);
    let threaded = io_threads != "1";
    let big = "x".repeat(1 << 20);
    ok(&mut raw, &["SET", "big", &big]);
    ok(&mut raw, &["SET", "small", "v"]);
    // Off by default: no file.
    assert_eq!(
        raw.call(&["CONFIG", "GET", "latency-trace-file"]),
        b"*2\r\n$18\r\nlatency-trace-file\r\n$0\r\n\r\n"
    );
    raw.call(&["GET", "big"]);
    assert!(!a.exists());

    ok(
        &mut raw,
        &["CONFIG", "SET", "latency-trace-file", a.to_str().unwrap()],
    );
    traffic_until_traced(&mut raw, &a, threaded);
    let got = raw.call(&["CONFIG", "GET", "latency-trace-file"]);
    assert!(show(&got).contains(a.to_str().unwrap()), "{}", show(&got));

    // Off: turns after the OK are not recorded, so none of the file's records starts
    // after the client saw it (the writer may still be appending older ones).
    ok(&mut raw, &["CONFIG", "SET", "latency-trace-file", ""]);
    let off_seen_us = now_us();
    for _ in 0..50 {
        raw.call(&["GET", "big"]);
    }
    // On again, elsewhere: the new file fills, the old one got nothing from the off time.
    ok(
        &mut raw,
        &["CONFIG", "SET", "latency-trace-file", b.to_str().unwrap()],
    );
    traffic_until_traced(&mut raw, &b, threaded);
    let a_turns = turns(&a);
    assert!(!a_turns.is_empty());
    for l in &a_turns {
        assert!(
            field(l, "start_us") < off_seen_us,
            "a turn traced after the trace was turned off: {l}"
        );
        assert!(field(l, "len_us") < 60_000_000, "{l}");
    }
    let b_turns = turns(&b);
    assert!(b_turns.iter().all(|l| field(l, "start_us") >= off_seen_us));
    ok(&mut raw, &["CONFIG", "SET", "latency-trace-file", ""]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_records_turns_only_while_set_single_loop() {
    trace_acts("1");
}

#[test]
fn trace_records_turns_only_while_set_io_threads() {
    trace_acts("2");
}

#[test]
fn bad_trace_file_is_refused() {
    let dir = temp_dir("ltrace-bad");
    let srv = start_on(&dir, &[], &[]);
    let mut raw = Raw::connect(srv.port);
    let missing = dir.join("no-such-dir").join("t.trace");
    let r = show(&raw.call(&[
        "CONFIG",
        "SET",
        "latency-trace-file",
        missing.to_str().unwrap(),
    ]));
    assert!(
        r.starts_with("-ERR CONFIG SET failed (possibly related to argument 'latency-trace-file') - Can't open the latency trace file"),
        "{r}"
    );
    // A directory is not a file either.
    let r = show(&raw.call(&["CONFIG", "SET", "latency-trace-file", dir.to_str().unwrap()]));
    assert!(r.starts_with("-ERR CONFIG SET failed"), "{r}");
    // The option kept its value.
    assert_eq!(
        raw.call(&["CONFIG", "GET", "latency-trace-file"]),
        b"*2\r\n$18\r\nlatency-trace-file\r\n$0\r\n\r\n"
    );
    assert!(!missing.exists());
    drop(srv);
    // At startup too: the server refuses to start.
    let dir2 = temp_dir("ltrace-bad2");
    let (mut cmd, _) = cairn_command(
        &dir2,
        &["--latency-trace-file", missing.to_str().unwrap()],
        &[],
    );
    let out = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run cairn-server");
    assert!(
        !out.status.success(),
        "started with an unopenable trace file"
    );
    let said = format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server_log(&dir2)
    );
    assert!(said.contains("latency trace file"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}
