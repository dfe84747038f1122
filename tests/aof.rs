//! The append-only log: restart replay (kill -9 with `appendfsync always`), Redis 7
//! loading a cairn AOF, torn tails and corruption, `--check-aof`, fault injection in the
//! writer (torn writes, EIO, ENOSPC), the disk-space watermark, BGREWRITEAOF, and replies
//! released only once durable.

mod common;

use cairn::persistence::aof::format;
use cairn::persistence::aof::load::{check_file, FileRole, Fix};
use cairn::persistence::aof::storage::{Faults, FaultyDir, FsDir, LogDir};
use cairn::persistence::aof::writer::{FsyncMode, Writer};
use common::{
    encode, free_port, last_incr_file as incr_file, redis_server_path, server_log as log, show,
    start_aof as start, start_on, temp_dir, try_call_line, try_start_aof as try_start,
    wait_serving, wait_until, Raw, Srv, DEADLINE,
};
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RID: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn write_sample(r: &mut Raw) {
    assert_eq!(r.call(&["SET", "a", "1"]), b"+OK\r\n");
    assert_eq!(r.call(&["SET", "b", "2", "EX", "1000"]), b"+OK\r\n");
    assert_eq!(r.call(&["INCRBYFLOAT", "f", "1.5"]), b"$3\r\n1.5\r\n");
    assert_eq!(r.call(&["APPEND", "a", "x"]), b":2\r\n");
    assert_eq!(r.call(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(r.call(&["SET", "c", "3"]), b"+OK\r\n");
    assert_eq!(r.call(&["PEXPIRE", "c", "500000"]), b":1\r\n");
    assert_eq!(r.call(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(r.call(&["SET", "gone", "x", "PX", "1"]), b"+OK\r\n");
}

fn check_sample(r: &mut Raw) {
    assert_eq!(r.call(&["GET", "a"]), b"$2\r\n1x\r\n");
    assert_eq!(r.call(&["GET", "f"]), b"$3\r\n1.5\r\n");
    let ttl = show(&r.call(&["TTL", "b"]));
    assert!(ttl.starts_with(":99") || ttl.starts_with(":100"), "{ttl}");
    assert_eq!(r.call(&["EXISTS", "gone"]), b":0\r\n");
    assert_eq!(r.call(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(r.call(&["GET", "c"]), b"$1\r\n3\r\n");
    let pttl: i64 = show(&r.call(&["PTTL", "c"]))[1..].trim().parse().unwrap();
    assert!(pttl > 400_000 && pttl <= 500_000, "{pttl}");
}

#[test]
fn kill_9_with_always_then_restart_replays_everything() {
    let dir = temp_dir("kill9");
    for threads in ["1", "2"] {
        let _ = std::fs::remove_dir_all(dir.join("appendonlydir"));
        {
            let srv = start(&dir, &["--appendfsync", "always", "--io-threads", threads]);
            let mut r = Raw::connect(srv.port);
            write_sample(&mut r);
            // "gone" (PX 1) expires; its DEL is logged before the INFO below, not by a
            // later expiry cycle racing it.
            wait_until(DEADLINE, "\"gone\" expired", || {
                r.call(&["EXISTS", "gone"]) == b":0\r\n"
            });
            // A reply is released only once its write is durable: the durable LSN seen
            // right after it covers every entry so far.
            assert_eq!(r.call(&["SET", "last", "v"]), b"+OK\r\n");
            let lsn = r.info_field("persistence", "aof_lsn");
            assert_eq!(r.info_field("persistence", "aof_durable_lsn"), lsn);
            // One event loop: the executor appends and syncs itself (the writer lends it
            // the file); with I/O threads the writer thread does.
            let own: u64 = r
                .info_field("persistence", "aof_executor_batches")
                .parse()
                .unwrap();
            assert_eq!(own > 0, threads == "1", "aof_executor_batches {own}");
        } // SIGKILL
        let srv = start(&dir, &["--io-threads", threads]);
        let mut r = Raw::connect(srv.port);
        check_sample(&mut r);
        assert_eq!(r.call(&["SELECT", "0"]), b"+OK\r\n");
        assert_eq!(r.call(&["GET", "last"]), b"$1\r\nv\r\n");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn entries_are_framed_and_deterministic() {
    let dir = temp_dir("frame");
    {
        let srv = start(&dir, &["--appendfsync", "always"]);
        let mut r = Raw::connect(srv.port);
        write_sample(&mut r);
        assert_eq!(r.call(&["GETDEL", "f"]), b"$3\r\n1.5\r\n");
    }
    let bytes = std::fs::read(incr_file(&dir)).unwrap();
    let mut cmds = Vec::new();
    let o = format::scan(&bytes, Some(1), |e| {
        cmds.push(
            e.args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" "),
        );
        Ok(())
    });
    assert!(o.bad.is_none(), "{:?}", o.bad);
    assert_eq!(cmds[0], "SELECT 0");
    assert!(
        cmds.iter().any(|c| c.starts_with("SET b 2 PXAT ")),
        "{cmds:?}"
    );
    assert!(cmds.contains(&"SET f 1.5 KEEPTTL".to_string()), "{cmds:?}");
    assert!(
        cmds.iter().any(|c| c.starts_with("PEXPIREAT c ")),
        "{cmds:?}"
    );
    assert!(cmds.contains(&"SELECT 3".to_string()));
    assert!(
        cmds.contains(&"DEL f".to_string()),
        "GETDEL logs DEL: {cmds:?}"
    );
    // LSNs rise by one and reploff is the running total of the RESP payloads.
    assert_eq!(o.last_lsn, Some(cmds.len() as u64));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lists, hashes, sets (intset and listpack and hashtable) and sorted sets named `<p>:*`.
fn typed_sample(r: &mut Raw, p: &str) {
    for i in 10..80 {
        let v = i.to_string();
        r.call(&["RPUSH", &format!("{p}:l"), &v]);
        r.call(&["HSET", &format!("{p}:h"), &format!("f{}", i % 40), &v]);
        r.call(&["SADD", &format!("{p}:si"), &v]);
        r.call(&["SADD", &format!("{p}:sl"), &format!("m{}", i % 9)]);
        r.call(&[
            "SADD",
            &format!("{p}:sh"),
            &format!("member-{i}"),
            &format!("x{i}"),
        ]);
        r.call(&[
            "ZADD",
            &format!("{p}:z"),
            &format!("{}.5", i % 13),
            &format!("z{i}"),
        ]);
    }
    for i in 0..200 {
        r.call(&[
            "ZADD",
            &format!("{p}:zbig"),
            &i.to_string(),
            &format!("member-{i}"),
        ]);
    }
    r.call(&["PEXPIRE", &format!("{p}:h"), "90000000"]);
}

#[test]
fn redis_server_7_loads_a_cairn_aof() {
    let dir = temp_dir("redis");
    let digest;
    {
        // `aof-use-rdb-preamble yes`: a base redis-server can read (cairn's default base
        // is its snapshot image).
        let srv = start(
            &dir,
            &[
                "--appendfsync",
                "always",
                "--enable-debug-command",
                "yes",
                "--aof-use-rdb-preamble",
                "yes",
            ],
        );
        let mut r = Raw::connect(srv.port);
        write_sample(&mut r);
        typed_sample(&mut r, "pre");
        // A rewrite too, so Redis reads an RDB base and an incremental file.
        assert_eq!(
            r.call(&["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        wait_rewrite(&mut r, 1);
        let m = manifest(&dir);
        assert!(
            m.starts_with("file appendonly.aof.2.base.rdb seq 2 type b\n"),
            "{m}"
        );
        assert_eq!(r.call(&["SET", "after", "rewrite"]), b"+OK\r\n");
        typed_sample(&mut r, "post");
        assert_eq!(r.call(&["LPOP", "pre:l"]), b"$2\r\n10\r\n");
        assert_eq!(r.call(&["HDEL", "pre:h", "f3"]), b":1\r\n");
        // "gone" (PX 1) must be deleted before the digest, as check_sample's EXISTS deletes
        // it on the Redis side: on a loaded machine the expiry cycle may not have run yet.
        wait_until(DEADLINE, "\"gone\" expired", || {
            r.call(&["EXISTS", "gone"]) == b":0\r\n"
        });
        digest = r.call(&["DEBUG", "DIGEST"]);
    }
    let port = free_port();
    let mut child = Command::new(redis_server_path())
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--enable-debug-command",
            "yes",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(&mut child, port).unwrap();
    let srv = Srv { child, port };
    let mut r = Raw::connect(srv.port);
    // Redis skips the pre-allocated segment's filler lines one by one: it may still load.
    let t = Instant::now();
    while r.call(&["PING"]).starts_with(b"-LOADING") {
        assert!(t.elapsed() < Duration::from_secs(30), "redis never loaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    check_sample(&mut r);
    assert_eq!(r.call(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(r.call(&["GET", "after"]), b"$7\r\nrewrite\r\n");
    // Every key, type and TTL as cairn had them.
    assert_eq!(show(&r.call(&["DEBUG", "DIGEST"])), show(&digest));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_rewrite(r: &mut Raw, n: u64) {
    wait_until(DEADLINE, &format!("rewrite {n} finished"), || {
        let done: u64 = r.info_field("persistence", "aof_rewrites").parse().unwrap();
        done >= n && r.info_field("persistence", "aof_rewrite_in_progress") == "0"
    });
}

/// Waits for the rewrite in progress to end, and checks it failed, the `failures`-th time
/// in a row.
fn wait_rewrite_failed(r: &mut Raw, failures: u64) {
    wait_until(DEADLINE, "the rewrite ended", || {
        r.info_field("persistence", "aof_rewrite_in_progress") == "0"
    });
    assert_eq!(
        r.info_field("persistence", "aof_last_bgrewrite_status"),
        "err"
    );
    assert_eq!(
        r.info_field("persistence", "aof_rewrites_consecutive_failures"),
        failures.to_string()
    );
}

/// Restarts on `dir` with `args`, checks DEBUG DIGEST is `digest`, then removes `dir`.
fn restart_with_digest(dir: &Path, args: &[&str], digest: &[u8]) {
    let srv = start(dir, args);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["DEBUG", "DIGEST"]), digest);
    drop(srv);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bgrewriteaof_compacts_and_survives_restart() {
    compacts_and_survives_restart("yes", "appendonly.aof.2.base.rdb");
}

#[test]
fn bgrewriteaof_with_an_image_base_survives_restart() {
    compacts_and_survives_restart("no", "appendonly.aof.2.base.cimg");
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn manifest(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap()
}

fn compacts_and_survives_restart(preamble: &str, base: &str) {
    let dir = temp_dir("rewrite");
    {
        let srv = start(
            &dir,
            &[
                "--appendfsync",
                "everysec",
                "--aof-use-rdb-preamble",
                preamble,
            ],
        );
        let mut r = Raw::connect(srv.port);
        for i in 0..2000 {
            let k = format!("k{}", i % 100);
            r.call(&["INCR", &k]);
        }
        write_sample(&mut r);
        let before: u64 = r
            .info_field("persistence", "aof_current_size")
            .parse()
            .unwrap();
        r.call(&["BGREWRITEAOF"]);
        // Writes during the rewrite land in the new incremental file.
        for i in 0..50 {
            r.call(&["INCR", &format!("k{i}")]);
        }
        wait_rewrite(&mut r, 1);
        let after: u64 = r
            .info_field("persistence", "aof_current_size")
            .parse()
            .unwrap();
        assert!(after < before / 4, "{after} vs {before}");
        let m = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
        assert_eq!(
            m,
            format!("file {base} seq 2 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\n")
        );
        // The old base and incremental file are gone, and so is the rewrite's image.
        assert_eq!(
            dir_names(&dir),
            vec![
                base.to_string(),
                "appendonly.aof.2.incr.aof".to_string(),
                "appendonly.aof.manifest".to_string()
            ]
        );
        assert_eq!(
            r.info_field("persistence", "aof_base_size"),
            std::fs::metadata(dir.join("appendonlydir").join(base))
                .unwrap()
                .len()
                .to_string()
        );
        assert_eq!(
            r.info_field("persistence", "aof_last_bgrewrite_status"),
            "ok"
        );
        assert_eq!(r.call(&["INCR", "k0"]), b":22\r\n");
    }
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    check_sample(&mut r);
    assert_eq!(r.call(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(r.call(&["GET", "k0"]), b"$2\r\n22\r\n");
    assert_eq!(r.call(&["GET", "k49"]), b"$2\r\n21\r\n");
    assert_eq!(r.call(&["GET", "k50"]), b"$2\r\n20\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `n` SETs with `appendfsync always` and stops the server; returns the incr file.
fn make_log(dir: &Path, n: usize) -> PathBuf {
    // Not pre-allocated: these tests cut the file's last bytes, which must be the log's.
    let srv = start(
        dir,
        &["--appendfsync", "always", "--aof-preallocate-bytes", "0"],
    );
    let mut r = Raw::connect(srv.port);
    for i in 0..n {
        assert_eq!(
            r.call(&["SET", &format!("key{i}"), &format!("v{i}")]),
            b"+OK\r\n"
        );
    }
    drop(srv);
    incr_file(dir)
}

/// A log of `make_log(dir, 5)` cut inside its last entry loads up to key3, says it was
/// truncated, and goes on with the next LSN (a new key4).
fn loads_cut_before_key4_then_writes_it(dir: &Path) {
    let srv = start(dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["GET", "key3"]), b"$2\r\nv3\r\n");
    assert_eq!(r.call(&["EXISTS", "key4"]), b":0\r\n");
    assert!(log(dir).contains("truncated"), "{}", log(dir));
    assert_eq!(r.call(&["SET", "key4", "again"]), b"+OK\r\n");
}

#[test]
fn torn_tail_is_cut_and_reported_then_startup_continues() {
    let dir = temp_dir("torn");
    let f = make_log(&dir, 5);
    let full = std::fs::read(&f).unwrap();
    std::fs::write(&f, &full[..full.len() - 7]).unwrap();
    loads_cut_before_key4_then_writes_it(&dir);
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(
        r.call(&["GET", "key4"]),
        b"$5\r\nagain\r\n",
        "{}",
        log(&dir)
    );
    drop(srv);
    // With aof-load-truncated no, a torn tail stops startup.
    let full = std::fs::read(&f).unwrap();
    std::fs::write(&f, &full[..full.len() - 3]).unwrap();
    assert!(try_start(&dir, &["--aof-load-truncated", "no"]).is_err());
    assert!(
        log(&dir).contains("Unexpected end of file"),
        "{}",
        log(&dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Since a rewrite's start lists the next incremental file (empty until the cut), a crash
/// in between leaves the file being written *before* the last one listed: its torn tail
/// is cut as the last file's would be, and the log goes on in the empty file. A tail cut
/// where a later file's entries do not continue the LSNs is still an error (entries were
/// lost).
#[test]
fn a_torn_file_before_an_empty_listed_one_loads_and_a_gap_after_it_does_not() {
    let dir = temp_dir("tornmid");
    let f = make_log(&dir, 5); // SELECT is LSN 1, key0..key4 LSN 2..6
    let full = std::fs::read(&f).unwrap();
    std::fs::write(&f, &full[..full.len() - 7]).unwrap();
    let aofdir = dir.join("appendonlydir");
    let listed = format!(
        "{}file appendonly.aof.2.incr.aof seq 2 type i\n",
        manifest(&dir)
    );
    std::fs::write(aofdir.join("appendonly.aof.manifest"), &listed).unwrap();
    std::fs::write(aofdir.join("appendonly.aof.2.incr.aof"), b"").unwrap();
    // --check-aof says what startup does: the torn tail is cut, the directory loads.
    let manifest_path = aofdir.join("appendonly.aof.manifest");
    let (ok, text) = check_aof(&manifest_path);
    assert!(ok, "{text}");
    assert!(
        text.contains("Torn tail") && text.contains("loads"),
        "{text}"
    );
    loads_cut_before_key4_then_writes_it(&dir);
    assert!(
        std::fs::metadata(aofdir.join("appendonly.aof.2.incr.aof"))
            .unwrap()
            .len()
            > 0
    );
    restart_with_digest_of(&dir, &[("key3", "v3"), ("key4", "again")]);
    // A gap: the second file starts two LSNs after where the first one now ends.
    let mut gap = Vec::new();
    let mut cmd = Vec::new();
    format::encode_command(&mut cmd, &["SET", "late", "x"]);
    format::encode_entry(&mut gap, 9, &"0".repeat(40), 0, &cmd);
    let full = std::fs::read(&f).unwrap();
    std::fs::write(&f, &full[..full.len() - 7]).unwrap();
    std::fs::write(aofdir.join("appendonly.aof.2.incr.aof"), &gap).unwrap();
    let torn_len = std::fs::metadata(&f).unwrap().len();
    let (ok, text) = check_aof(&manifest_path);
    assert!(!ok, "{text}");
    assert!(text.contains("where 6 was expected"), "{text}");
    assert!(try_start(&dir, &[]).is_err());
    assert!(log(&dir).contains("where 6 was expected"), "{}", log(&dir));
    // A failed load cut nothing: the torn bytes are still there for --check-aof.
    assert_eq!(std::fs::metadata(&f).unwrap().len(), torn_len);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cairn-server --check-aof FILE` with no answer on stdin: (exit status 0, stdout).
fn check_aof(file: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--check-aof")
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.success(), show(&out.stdout))
}

/// In files written by Redis (no LSN headers) nothing can show that a cut lost entries,
/// so, as in Redis, only the last file may end early: damage in the middle of an earlier
/// one stops startup instead of being cut while the later files replay on top.
#[test]
fn a_damaged_redis_written_file_before_the_last_stops_startup() {
    let dir = temp_dir("redismid");
    make_log(&dir, 0);
    let aofdir = dir.join("appendonlydir");
    let mut first = Vec::new();
    first.extend_from_slice(&encode(&[b"SET", b"a", b"1"]));
    first.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n");
    first.extend_from_slice(&encode(&[b"SET", b"c", b"3"]));
    std::fs::write(aofdir.join("appendonly.aof.1.incr.aof"), &first).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.2.incr.aof"),
        encode(&[b"SET", b"d", b"4"]),
    )
    .unwrap();
    let listed = format!(
        "{}file appendonly.aof.2.incr.aof seq 2 type i\n",
        manifest(&dir)
    );
    std::fs::write(aofdir.join("appendonly.aof.manifest"), &listed).unwrap();
    assert!(try_start(&dir, &[]).is_err(), "{}", log(&dir));
    assert!(
        log(&dir).contains("appendonly.aof.1.incr.aof"),
        "{}",
        log(&dir)
    );
    // The same damage in the last file stops startup too: a command that ends wrong with
    // more commands after it is bad format, not a cut (Redis refuses it as well).
    std::fs::write(aofdir.join("appendonly.aof.2.incr.aof"), &first).unwrap();
    std::fs::write(
        aofdir.join("appendonly.aof.1.incr.aof"),
        encode(&[b"SET", b"d", b"4"]),
    )
    .unwrap();
    assert!(try_start(&dir, &[]).is_err(), "{}", log(&dir));
    assert_eq!(
        std::fs::read(aofdir.join("appendonly.aof.2.incr.aof")).unwrap(),
        first
    );
    // A last file that ends inside its last command is a torn tail: cut, the rest loads.
    let torn = &first[..first.len() - 3];
    std::fs::write(aofdir.join("appendonly.aof.2.incr.aof"), torn).unwrap();
    assert!(
        try_start(&dir, &[]).is_err(),
        "b's command is still damaged"
    );
    let mut whole_then_cut = encode(&[b"SET", b"a", b"1"]);
    whole_then_cut.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n");
    std::fs::write(aofdir.join("appendonly.aof.2.incr.aof"), &whole_then_cut).unwrap();
    restart_with_digest_of(&dir, &[("a", "1"), ("d", "4")]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts a server on `dir` and checks the given keys' values.
fn restart_with_digest_of(dir: &Path, want: &[(&str, &str)]) {
    let srv = start(dir, &[]);
    let mut r = Raw::connect(srv.port);
    for (k, v) in want {
        assert_eq!(
            r.call(&["GET", k]),
            format!("${}\r\n{v}\r\n", v.len()).as_bytes(),
            "{k}: {}",
            log(dir)
        );
    }
}

#[test]
fn corruption_in_the_middle_stops_startup_naming_file_offset_lsn() {
    let dir = temp_dir("corrupt");
    let f = make_log(&dir, 6);
    let mut bytes = std::fs::read(&f).unwrap();
    // Flip one bit inside the third entry's value.
    let o = format::scan(&bytes, None, |_| Ok(()));
    assert!(o.bad.is_none());
    let third = bytes.windows(5).position(|w| w == b"key2\r").unwrap();
    bytes[third + 8] ^= 0x01;
    std::fs::write(&f, &bytes).unwrap();
    assert!(try_start(&dir, &[]).is_err());
    let l = log(&dir);
    assert!(l.contains("checksum mismatch"), "{l}");
    assert!(l.contains("appendonly.aof.1.incr.aof"), "{l}");
    assert!(l.contains("at offset "), "{l}");
    assert!(l.contains("expected LSN 4"), "{l}"); // SELECT is LSN 1, key0 LSN 2...
                                                  // --check-aof names it; --fix asks first (anything but y leaves the file as it is),
                                                  // then cuts there and the server starts with the prefix.
    let exe = env!("CARGO_BIN_EXE_cairn-server");
    let out = Command::new(exe)
        .arg("--check-aof")
        .arg(&f)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = show(&out.stdout);
    assert!(text.contains("Corruption in the middle"), "{text}");
    assert!(text.contains("is not valid"), "{text}");
    let fix = |answer: Option<&str>, extra: &[&str]| {
        let mut child = Command::new(exe)
            .args(["--check-aof", "--fix"])
            .args(extra)
            .arg(&f)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        if let Some(a) = answer {
            stdin.write_all(a.as_bytes()).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        (out.status.success(), show(&out.stdout))
    };
    for answer in [Some("n\n"), Some("\n"), Some("yy\n"), None] {
        let (ok, text) = fix(answer, &[]);
        assert!(!ok, "{answer:?}: {text}");
        assert!(text.contains("Continue? [y/N]: "), "{text}");
        assert!(text.contains("unchanged"), "{text}");
        assert_eq!(std::fs::read(&f).unwrap(), bytes, "{answer:?}");
    }
    let (ok, text) = fix(Some("Y\n"), &[]);
    assert!(ok, "{text}");
    assert!(text.contains("Successfully truncated"), "{text}");
    assert!(
        text.contains("including valid entries after the damage"),
        "{text}"
    );
    assert!(std::fs::read(&f).unwrap().len() < bytes.len());
    // `-y` cuts without asking.
    std::fs::write(&f, &bytes).unwrap();
    let (ok, text) = fix(None, &["-y"]);
    assert!(ok, "{text}");
    assert!(!text.contains("Continue?"), "{text}");
    assert!(text.contains("Successfully truncated"), "{text}");
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["GET", "key1"]), b"$2\r\nv1\r\n");
    assert_eq!(r.call(&["EXISTS", "key2"]), b":0\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_aof_on_every_truncation_of_the_last_entries() {
    let dir = temp_dir("cuts");
    let f = make_log(&dir, 4);
    let full = std::fs::read(&f).unwrap();
    // Entry boundaries, from the scanner.
    let mut acc = Vec::new();
    format::scan(&full, Some(1), |e| {
        acc.push(e.offset);
        Ok(())
    });
    let from = acc[acc.len() - 2] as usize;
    // Where each entry ends: its header line, then `len` bytes.
    let entry_ends: Vec<usize> = acc
        .iter()
        .map(|&off| {
            let off = off as usize;
            let eol = off + full[off..].windows(2).position(|w| w == b"\r\n").unwrap();
            let line = std::str::from_utf8(&full[off..eol]).unwrap();
            let len: usize = line["#HDR:len:".len()..]
                .split(';')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            eol + 2 + len
        })
        .collect();
    let tmp = dir.join("cut.aof");
    for cut in from..full.len() {
        std::fs::write(&tmp, &full[..cut]).unwrap();
        let mut report = Vec::new();
        let c = check_file(
            &tmp,
            Some(1),
            FileRole::Incr { last: true },
            Fix::Yes,
            &mut report,
        )
        .unwrap();
        assert!(c.loadable, "cut at {cut}: {}", show(&report));
        // The fixed file is the longest valid prefix: exactly the entries that were whole.
        let fixed = std::fs::read(&tmp).unwrap();
        let o = format::scan(&fixed, Some(1), |_| Ok(()));
        assert!(o.bad.is_none(), "cut at {cut}: {:?}", o.bad);
        let complete = entry_ends.iter().filter(|&&e| e <= cut).count() as u64;
        assert_eq!(o.entries, complete, "cut at {cut}");
        assert!(fixed.len() >= *entry_ends.iter().filter(|&&e| e <= cut).max().unwrap_or(&0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn entries(from_lsn: u64, n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for lsn in from_lsn..from_lsn + n {
        let mut p = Vec::new();
        format::encode_command(&mut p, &[&b"SET"[..], format!("k{lsn}").as_bytes(), b"v"]);
        format::encode_entry(&mut out, lsn, RID, lsn * 10, &p);
    }
    out
}

/// The writer against a fault-injecting backend: after a torn write (ENOSPC/EIO) or a
/// failed fsync nothing more is acknowledged, and the file holds exactly a valid prefix.
/// Each fault runs through the four paths a write can take: the thread engine (every
/// call through the storage trait), the io_uring engine (its fsyncs on the ring), the
/// executor's lease (the executor's own pwritev and ring) and direct I/O (O_DIRECT|O_DSYNC
/// writes on the ring: a torn write keeps the prefix's whole blocks, a failed sync is the
/// write's).
#[test]
fn writer_faults_are_sticky_and_leave_a_valid_prefix() {
    use cairn::persistence::aof::uring;
    use cairn::persistence::aof::writer::IoOpts;
    use std::os::fd::AsRawFd;
    for path in ["thread", "uring", "lease", "direct"] {
        for (label, fault) in [
            ("torn ENOSPC", (Some((libc::ENOSPC, 37usize)), None)),
            ("torn EIO", (Some((libc::EIO, 5usize)), None)),
            ("fsync EIO", (None, Some(libc::EIO))),
        ] {
            let label = format!("{path}, {label}");
            let dir = temp_dir("faults");
            let faults = Arc::new(Mutex::new(Faults {
                through_uring: path != "thread",
                ..Faults::default()
            }));
            let mut d = FaultyDir {
                inner: FsDir::new(&dir),
                faults: faults.clone(),
            };
            let f = d.open_append("log.aof").unwrap();
            let opts = IoOpts {
                uring: path != "thread",
                direct_io: path == "direct",
                ..IoOpts::default()
            };
            let mut w = Writer::start_opts(
                Box::new(d),
                f,
                Some("log.aof"),
                0,
                0,
                FsyncMode::Always,
                0,
                opts,
            )
            .unwrap();
            let efd = uring::eventfd().unwrap();
            if path == "lease" {
                w.enable_executor_appends(efd.as_raw_fd());
            }
            let engine = *w.shared.engine.lock().unwrap();
            let want = match path {
                "thread" => "thread",
                "direct" => "uring-direct",
                _ => "uring",
            };
            if engine != want {
                // io_uring refused, or O_DIRECT on this filesystem.
                eprintln!("{label}: the engine is {engine} here, not {want}: not testable");
                continue;
            }
            // Appends a batch as the executor does and waits until `done` holds, reaping
            // the executor's ring meanwhile.
            let mut lsn = 0;
            let mut append = |w: &mut Writer, n: u64| {
                let mut buf = entries(lsn + 1, n);
                lsn += n;
                w.append(&mut buf, lsn, true);
                lsn
            };
            let settle = |w: &mut Writer, done: &dyn Fn(&Writer) -> bool| {
                wait_until(DEADLINE, "the writer settled", || {
                    w.reap_executor_syncs();
                    done(w)
                });
            };
            // Durable batches first; on the lease path, until the executor holds the file
            // (so the faulty batch is the executor's own).
            loop {
                let last = append(&mut w, 3);
                settle(&mut w, &|w| {
                    w.shared.durable_lsn.load(Ordering::SeqCst) == last
                });
                if path != "lease" || w.holds_lease() || last > 300 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            assert!(path != "lease" || w.holds_lease(), "{label}: never leased");
            let durable = w.shared.durable_lsn.load(Ordering::SeqCst);
            let own_before = w.shared.exec_batches.load(Ordering::Relaxed);
            {
                let mut fl = faults.lock().unwrap();
                fl.fail_write = fault.0;
                fl.fail_sync = fault.1;
            }
            append(&mut w, 2);
            settle(&mut w, &|w| w.shared.failed.load(Ordering::SeqCst));
            assert_eq!(faults.lock().unwrap().injected, 1, "{label}: fault not met");
            if path == "lease" && fault.0.is_none() {
                assert!(
                    w.shared.exec_batches.load(Ordering::Relaxed) > own_before,
                    "{label}: the executor did not write the batch"
                );
            }
            let err = w.shared.error().unwrap();
            assert!(
                err.contains("No space left") || err.contains("Input/output error"),
                "{label}: {err}"
            );
            // Sticky: later writes are not written nor acknowledged.
            append(&mut w, 1);
            for _ in 0..50 {
                w.reap_executor_syncs();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                w.shared.durable_lsn.load(Ordering::SeqCst),
                durable,
                "{label}"
            );
            drop(w);
            let bytes = std::fs::read(dir.join("log.aof")).unwrap();
            let o = format::scan(&bytes, Some(1), |_| Ok(()));
            assert!(
                o.bad.is_none(),
                "{label}: file must end on an entry: {:?}",
                o.bad
            );
            assert!(o.last_lsn >= Some(durable), "{label}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

#[test]
fn disk_watermark_refuses_writes_and_serves_reads() {
    let dir = temp_dir("disk");
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(
        r.call(&["CONFIG", "SET", "aof-disk-min-free", "1000000gb"]),
        b"+OK\r\n"
    );
    // The watermark is checked periodically: a write to another key shows when it applies.
    wait_until(DEADLINE, "writes are refused", || {
        r.call(&["SET", "probe", "x"]).starts_with(b"-MISCONF")
    });
    assert_eq!(
        show(&r.call(&["SET", "k", "w"])),
        "-MISCONF Errors writing to the AOF file: No space left on device\r\n"
    );
    assert_eq!(r.call(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(
        r.call(&["CONFIG", "SET", "aof-disk-min-free", "0"]),
        b"+OK\r\n"
    );
    wait_until(DEADLINE, "writes are accepted again", || {
        r.call(&["SET", "probe", "x"]) == b"+OK\r\n"
    });
    assert_eq!(r.call(&["SET", "k", "w"]), b"+OK\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn appendonly_can_be_turned_on_at_runtime() {
    let dir = temp_dir("runtime");
    let srv = start_on(&dir, &[], &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["SET", "before", "1"]), b"+OK\r\n");
    assert_eq!(r.call(&["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
    assert_eq!(r.call(&["SET", "after", "2"]), b"+OK\r\n");
    wait_rewrite(&mut r, 1);
    assert_eq!(r.info_field("persistence", "aof_enabled"), "1");
    assert_eq!(r.call(&["SET", "later", "3"]), b"+OK\r\n");
    drop(srv);
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(
        r.call(&["MGET", "before", "after", "later"]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sets in the log: SPOP is logged as the SREM of the members it popped (or a DEL when it
/// took them all), so replay reaches the same state; BGREWRITEAOF's RDB base keeps them.
#[test]
fn set_writes_replay_with_spop_logged_as_srem() {
    let dir = temp_dir("sets");
    let sorted = |r: &mut Raw, k: &str| {
        let mut v: Vec<String> = show(&r.call(&["SMEMBERS", k]))
            .split("\r\n")
            .skip(1)
            .filter(|l| !l.starts_with('$') && !l.is_empty())
            .map(String::from)
            .collect();
        v.sort();
        v
    };
    let keys = ["si", "sl", "sh", "inter", "moved", "whole"];
    let state = |r: &mut Raw| {
        keys.iter()
            .map(|k| (sorted(r, k), show(&r.call(&["OBJECT", "ENCODING", k]))))
            .collect::<Vec<_>>()
    };
    let want;
    {
        let srv = start(&dir, &["--appendfsync", "always"]);
        let mut r = Raw::connect(srv.port);
        r.call(&["SADD", "si", "1", "2", "3", "4", "5", "6"]);
        r.call(&["SADD", "sl", "a", "b", "c", "d", "1"]);
        for i in 0..300 {
            r.call(&["SADD", "sh", &format!("m{i}")]);
        }
        r.call(&["SADD", "whole", "x", "y"]);
        assert!(r.call(&["SPOP", "si"]).starts_with(b"$"));
        assert!(r.call(&["SPOP", "sl", "2"]).starts_with(b"*2"));
        assert!(r.call(&["SPOP", "sh", "100"]).starts_with(b"*100"));
        assert!(r.call(&["SPOP", "whole", "10"]).starts_with(b"*2"));
        r.call(&["SINTERSTORE", "inter", "sh", "sh"]);
        r.call(&["SMOVE", "sl", "moved", "a"]);
        r.call(&["SMOVE", "sl", "moved", "b"]);
        r.call(&["SREM", "sh", "m1", "m2"]);
        want = state(&mut r);
        let log = std::fs::read(incr_file(&dir)).unwrap();
        let text = String::from_utf8_lossy(&log);
        assert!(
            !text.contains("SPOP") && !text.contains("spop"),
            "SPOP logged"
        );
        assert!(text.contains("SREM"), "no SREM logged");
    }
    {
        let srv = start(&dir, &["--aof-use-rdb-preamble", "yes"]);
        let mut r = Raw::connect(srv.port);
        assert_eq!(state(&mut r), want);
        assert_eq!(r.call(&["EXISTS", "whole"]), b":0\r\n");
        r.call(&["BGREWRITEAOF"]);
        wait_rewrite(&mut r, 1);
        let m = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
        let base = m
            .lines()
            .find(|l| l.ends_with("type b"))
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .to_string();
        // The base is an RDB file (`aof-use-rdb-preamble yes`).
        assert!(base.ends_with(".base.rdb"), "{m}");
        let bytes = std::fs::read(dir.join("appendonlydir").join(base)).unwrap();
        assert!(bytes.starts_with(b"REDIS0010"));
    }
    let srv = start(&dir, &[]);
    let mut r = Raw::connect(srv.port);
    // After a rewrite a set is rebuilt from its members, so its encoding may change (as in
    // Redis: a listpack set whose non-integers were all popped comes back as an intset).
    let members = |st: Vec<(Vec<String>, String)>| st.into_iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(members(state(&mut r)), members(want));
    let _ = std::fs::remove_dir_all(&dir);
}

/// INCR/RPUSH-style command whose integer reply is returned; None once the server is gone
/// (a writer racing a SIGKILL must not panic).
fn try_int(s: &mut TcpStream, args: &[&str]) -> Option<i64> {
    try_call_line(s, args).ok()?.get(1..)?.parse().ok()
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// `threads` clients writing every type until `stop` (at most `max` commands each).
/// Returns each client's acknowledged count of INCRs on its own counter `ctr:<t>`.
fn spawn_writers(
    port: u16,
    threads: usize,
    max: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..threads)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = connect(port);
                let mut acked = 0u64;
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) && n < max {
                    let ns = n.to_string();
                    let ok = match n % 7 {
                        0 => {
                            try_int(&mut c, &["INCR", &format!("ctr:{t}")]).inspect(|_| acked += 1)
                        }
                        1 => try_int(&mut c, &["RPUSH", &format!("list:{t}"), &ns]),
                        2 => try_int(
                            &mut c,
                            &["HSET", &format!("h:{}", n % 5), &format!("f{t}:{n}"), &ns],
                        ),
                        3 => try_int(&mut c, &["SADD", &format!("s:{t}"), &ns, &format!("m{n}")]),
                        4 => try_int(&mut c, &["ZADD", "z", &ns, &format!("m{t}:{}", n % 200)]),
                        5 => try_int(&mut c, &["DEL", &format!("pre:{}", n % 500)]),
                        _ => try_int(&mut c, &["LPUSH", "shared", &ns]),
                    };
                    if ok.is_none() {
                        break;
                    }
                    n += 1;
                }
                acked
            })
        })
        .collect()
}

fn preload(r: &mut Raw) {
    for i in 0..500 {
        assert_eq!(
            r.call(&["SET", &format!("pre:{i}"), &i.to_string()]),
            b"+OK\r\n"
        );
    }
    assert_eq!(r.call(&["SET", "ttl", "x", "EX", "100000"]), b"+OK\r\n");
    assert_eq!(r.call(&["SELECT", "5"]), b"+OK\r\n");
    assert_eq!(r.call(&["RPUSH", "db5", "a", "b"]), b":2\r\n");
    assert_eq!(r.call(&["SELECT", "0"]), b"+OK\r\n");
}

/// Several clients write while BGREWRITEAOF runs (twice); after SIGKILL the restart holds
/// exactly the dataset (DEBUG DIGEST), for both base kinds.
fn rewrite_under_concurrent_writes(preamble: &str, base_ext: &str) {
    let dir = temp_dir(&format!("rwload-{preamble}"));
    let args = [
        "--appendfsync",
        "everysec",
        "--aof-use-rdb-preamble",
        preamble,
        "--enable-debug-command",
        "yes",
    ];
    let digest;
    let dbsize;
    {
        let srv = start(&dir, &args);
        let mut r = Raw::connect(srv.port);
        preload(&mut r);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = spawn_writers(srv.port, 4, 200_000, stop.clone());
        for round in 1..=2u64 {
            std::thread::sleep(Duration::from_millis(150));
            assert_eq!(
                r.call(&["BGREWRITEAOF"]),
                b"+Background append only file rewriting started\r\n"
            );
            assert_eq!(r.info_field("persistence", "aof_rewrite_in_progress"), "1");
            wait_rewrite(&mut r, round);
        }
        // Each writer's INCRs on ctr:<t> are answered one at a time: its counter is what it
        // will have acknowledged once it stops.
        wait_until(DEADLINE, "every writer made progress", || {
            (0..4).all(|t| {
                let v = show(&r.call(&["GET", &format!("ctr:{t}")]));
                v.lines()
                    .nth(1)
                    .is_some_and(|v| v.parse::<u64>().unwrap() > 10)
            })
        });
        stop.store(true, Ordering::SeqCst);
        let acked: Vec<u64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(
            acked.iter().all(|&a| a > 10),
            "writers made progress: {acked:?}"
        );
        digest = r.call(&["DEBUG", "DIGEST"]);
        dbsize = r.call(&["DBSIZE"]);
        let m = manifest(&dir);
        assert_eq!(
            m,
            format!(
                "file appendonly.aof.3.base.{base_ext} seq 3 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
            )
        );
        assert_eq!(dir_names(&dir).len(), 3, "{:?}", dir_names(&dir));
        assert_eq!(r.info_field("persistence", "aof_rewrites"), "2");
    } // SIGKILL: everysec releases replies once written, so nothing acknowledged is lost.
    let srv = start(&dir, &["--enable-debug-command", "yes"]);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(r.call(&["DBSIZE"]), dbsize);
    assert_eq!(r.call(&["SELECT", "5"]), b"+OK\r\n");
    assert_eq!(r.call(&["LLEN", "db5"]), b":2\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rewrite_under_concurrent_writes_rdb_base() {
    rewrite_under_concurrent_writes("yes", "rdb");
}

#[test]
fn rewrite_under_concurrent_writes_image_base() {
    rewrite_under_concurrent_writes("no", "cimg");
}

/// SIGKILL at several points of a rewrite (before, at and after the cut; during the RDB
/// base's writing, slowed by `rdb-key-save-delay`) with `appendfsync always`: every
/// restart loads, and no acknowledged INCR is lost (nor applied twice).
#[test]
fn kill_during_rewrite_loses_no_acknowledged_write() {
    let dir = temp_dir("rwkill");
    let args = [
        "--appendfsync",
        "always",
        "--rdb-key-save-delay",
        "20",
        "--enable-debug-command",
        "yes",
    ];
    let mut total: Vec<u64> = vec![0; 3];
    for (round, delay_ms) in [0u64, 5, 40, 150, 400].into_iter().enumerate() {
        let srv = start(&dir, &args);
        let mut r = Raw::connect(srv.port);
        if round == 0 {
            preload(&mut r);
        }
        // What the previous rounds acknowledged survived the kills.
        for (t, slot) in total.iter_mut().enumerate() {
            let want = *slot;
            let got: u64 = show(&r.call(&["GET", &format!("ctr:{t}")]))
                .lines()
                .nth(1)
                .map_or(0, |v| v.parse().unwrap());
            assert!(
                got == want || got == want + 1,
                "round {round}: ctr:{t} is {got}, acknowledged {want}"
            );
            *slot = got;
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers = spawn_writers(srv.port, 3, 1_000_000, stop.clone());
        std::thread::sleep(Duration::from_millis(30));
        let reply = r.call(&["BGREWRITEAOF"]);
        assert!(reply.starts_with(b"+Background"), "{}", show(&reply));
        std::thread::sleep(Duration::from_millis(delay_ms));
        drop(srv); // SIGKILL
        stop.store(true, Ordering::SeqCst);
        for (t, w) in writers.into_iter().enumerate() {
            total[t] += w.join().unwrap();
        }
    }
    let srv = start(&dir, &args);
    let mut r = Raw::connect(srv.port);
    for (t, want) in total.iter().enumerate() {
        let got: u64 = show(&r.call(&["GET", &format!("ctr:{t}")]))
            .lines()
            .nth(1)
            .map_or(0, |v| v.parse().unwrap());
        assert!(
            got == *want || got == want + 1,
            "ctr:{t} is {got}, acknowledged {want}"
        );
    }
    // And a rewrite still completes over whatever the kills left.
    r.call(&["BGREWRITEAOF"]);
    wait_rewrite(&mut r, 1);
    let digest = r.call(&["DEBUG", "DIGEST"]);
    drop(srv);
    restart_with_digest(&dir, &args, &digest);
}

/// A rewrite that fails before its cut (the image cannot be created) leaves the old base
/// and the incremental file opened at its start listed (the log moved there), as Redis 7
/// does; one that fails after it (the RDB base cannot be renamed into place) leaves the
/// old base with both incremental files listed. No write is lost either way, and the
/// next rewrite retires everything.
#[test]
fn failed_rewrites_keep_every_write_and_a_loadable_manifest() {
    let dir = temp_dir("rwfail");
    let args = [
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
        "--aof-use-rdb-preamble",
        "yes",
    ];
    let srv = start(&dir, &args);
    let pid = srv.child.id();
    let mut r = Raw::connect(srv.port);
    preload(&mut r);
    let aofdir = dir.join("appendonlydir");
    let before = manifest(&dir);
    // 1. Before the cut: a directory where the temp image goes.
    let blocker = aofdir.join(format!("temp-{pid}-appendonly.aof.2.base.cimg"));
    std::fs::create_dir(&blocker).unwrap();
    assert!(r.call(&["BGREWRITEAOF"]).starts_with(b"+"));
    wait_rewrite_failed(&mut r, 1);
    // As Redis 7: the incremental file opened at the rewrite's start stays listed, and
    // with no cut the log moved there when the rewrite failed.
    assert_eq!(
        manifest(&dir),
        format!("{before}file appendonly.aof.2.incr.aof seq 2 type i\n")
    );
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(r.call(&["SET", "after-fail-1", "x"]), b"+OK\r\n");
    // 2. After the cut: a directory where the RDB base goes.
    let blocker = aofdir.join("appendonly.aof.2.base.rdb");
    std::fs::create_dir(&blocker).unwrap();
    assert!(r.call(&["BGREWRITEAOF"]).starts_with(b"+"));
    for i in 0..50 {
        r.call(&["INCR", "during"]);
        if i == 25 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    wait_rewrite_failed(&mut r, 2);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
    );
    assert_eq!(r.call(&["SET", "after-fail-2", "y"]), b"+OK\r\n");
    let digest = r.call(&["DEBUG", "DIGEST"]);
    drop(srv);
    std::fs::remove_dir(&blocker).unwrap();
    let srv = start(&dir, &args);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["DEBUG", "DIGEST"]), digest);
    assert_eq!(r.call(&["GET", "during"]), b"$2\r\n50\r\n");
    // 3. The next rewrite retires every incremental file.
    assert!(r.call(&["BGREWRITEAOF"]).starts_with(b"+"));
    wait_rewrite(&mut r, 1);
    assert_eq!(
        manifest(&dir),
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.4.incr.aof seq 4 type i\n"
    );
    assert_eq!(
        dir_names(&dir),
        [
            "appendonly.aof.2.base.rdb",
            "appendonly.aof.4.incr.aof",
            "appendonly.aof.manifest"
        ]
    );
    drop(srv);
    restart_with_digest(&dir, &args, &digest);
}

/// One snapshot at a time, with Redis 7's replies: BGREWRITEAOF during a BGSAVE is
/// scheduled and runs after it; BGSAVE during a rewrite is refused, or with SCHEDULE runs
/// after it. (Pipelined: the second command runs before any cron can collect the first.)
#[test]
fn bgsave_and_bgrewriteaof_take_turns() {
    let dir = temp_dir("turns");
    let srv = start(&dir, &["--rdb-key-save-delay", "100"]);
    let mut r = Raw::connect(srv.port);
    preload(&mut r);
    r.send(b"BGSAVE\r\nBGREWRITEAOF\r\nINFO persistence\r\n");
    assert_eq!(r.reply(), b"+Background saving started\r\n");
    assert_eq!(
        r.reply(),
        b"+Background append only file rewriting scheduled\r\n"
    );
    let info = show(&r.reply());
    assert!(info.contains("aof_rewrite_scheduled:1"), "{info}");
    wait_rewrite(&mut r, 1);
    assert!(dir.join("dump.cimg").exists());
    assert_eq!(r.info_field("persistence", "aof_rewrite_scheduled"), "0");
    // The RDB base is written slowly (rdb-key-save-delay): the rewrite is still running.
    r.send(b"BGREWRITEAOF\r\nBGSAVE\r\nBGSAVE SCHEDULE\r\nBGREWRITEAOF\r\n");
    assert_eq!(
        r.reply(),
        b"+Background append only file rewriting started\r\n"
    );
    assert_eq!(
        show(&r.reply()),
        "-ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.\r\n"
    );
    assert_eq!(r.reply(), b"+Background saving scheduled\r\n");
    assert_eq!(
        show(&r.reply()),
        "-ERR Background append only file rewriting already in progress\r\n"
    );
    let saves: u64 = r.info_field("persistence", "rdb_saves").parse().unwrap();
    wait_rewrite(&mut r, 2);
    wait_until(DEADLINE, "the scheduled BGSAVE ran", || {
        r.info_field("persistence", "rdb_saves")
            .parse::<u64>()
            .unwrap()
            > saves
    });
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// True if no byte arrives on `r` for `ms` milliseconds (the reply is being held).
fn silent_for(r: &mut Raw, ms: u64) -> bool {
    r.s.set_read_timeout(Some(Duration::from_millis(ms)))
        .unwrap();
    let mut b = [0u8; 1];
    let silent = match r.s.peek(&mut b) {
        Ok(_) => false, // a byte, or the connection closed
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    r.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    silent
}

/// Dirty-key tracking under `appendfsync always`, with the log's fsyncs paused (`DEBUG
/// AOF-PAUSE-SYNCS 1`) so that nothing written meanwhile becomes durable: a write's reply
/// waits, and so does every read of a key such a write touched — plain writes, MULTI/EXEC,
/// RENAME, an expiry's deletion, a blocking pop served by a push, and FLUSHALL / SWAPDB
/// (which every read waits behind) — while reads of clean keys are answered at once. When
/// the syncs resume, the held replies go out in order.
#[test]
fn reads_of_keys_with_writes_not_yet_durable_wait_and_clean_reads_do_not() {
    dirty_key_holds("1");
}

/// The same with I/O threads (replies travel back through them; the writer thread
/// appends instead of the executor).
#[test]
fn dirty_key_holds_with_io_threads() {
    dirty_key_holds("2");
}

fn dirty_key_holds(io_threads: &str) {
    let dir = temp_dir(&format!("dirty-io{io_threads}"));
    let srv = start(
        &dir,
        &[
            "--appendfsync",
            "always",
            "--enable-debug-command",
            "yes",
            "--io-threads",
            io_threads,
        ],
    );
    let mut ctl = Raw::connect(srv.port);
    let mut w = Raw::connect(srv.port);
    let mut r = Raw::connect(srv.port);
    assert_eq!(ctl.call(&["SET", "clean", "c"]), b"+OK\r\n");
    assert_eq!(ctl.call(&["SET", "src", "s"]), b"+OK\r\n");
    // Active expiry off first: "gone" must still be there, expired, for the GET below
    // however long this machine takes to get there.
    assert_eq!(ctl.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    assert_eq!(ctl.call(&["SET", "gone", "g", "PX", "150"]), b"+OK\r\n");
    let pause = |ctl: &mut Raw, on: &str| {
        assert_eq!(ctl.call(&["DEBUG", "AOF-PAUSE-SYNCS", on]), b"+OK\r\n");
    };
    let send = |c: &mut Raw, args: &[&str]| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        c.cmd(&a);
    };
    // A clean read is answered while writes wait (never behind them).
    let clean_read_is_prompt = |r: &mut Raw| {
        assert_eq!(r.call(&["GET", "clean"]), b"$1\r\nc\r\n");
    };

    // Plain write; MULTI/EXEC; RENAME — each on its own connection (with I/O threads a
    // connection's next batch waits for the held replies of the one before), then wait
    // until all of them ran: 1 + 4 (MULTI, SET, SET, EXEC) + 1 entries.
    pause(&mut ctl, "1");
    let lsn = |c: &mut Raw| -> u64 { c.info("persistence", "aof_lsn").unwrap().parse().unwrap() };
    let lsn0 = lsn(&mut ctl);
    let mut w1 = Raw::connect(srv.port);
    let mut w2 = Raw::connect(srv.port);
    send(&mut w1, &["SET", "k", "v"]);
    w2.send(
        &[
            encode(&[b"MULTI"]),
            encode(&[b"SET", b"m1", b"a"]),
            encode(&[b"SET", b"m2", b"b"]),
            encode(&[b"EXEC"]),
        ]
        .concat(),
    );
    send(&mut w, &["RENAME", "src", "dst"]);
    // Waits until the log holds `n` entries more than `from` (the writes ran).
    let ran = |ctl: &mut Raw, from: u64, n: u64| {
        wait_until(DEADLINE, "the writes ran", || lsn(ctl) >= from + n);
        assert_eq!(lsn(ctl), from + n);
    };
    ran(&mut ctl, lsn0, 6);
    for c in [&mut w1, &mut w] {
        assert!(
            silent_for(c, 100),
            "a write was acknowledged before it was durable"
        );
    }
    clean_read_is_prompt(&mut r);
    let mut readers: Vec<(&str, Raw)> = ["k", "m2", "dst", "src"]
        .into_iter()
        .map(|key| (key, Raw::connect(srv.port)))
        .collect();
    for (key, rk) in readers.iter_mut() {
        send(rk, &["GET", key]);
        assert!(
            silent_for(rk, 200),
            "GET {key} answered before its write was durable"
        );
        clean_read_is_prompt(&mut r);
    }
    pause(&mut ctl, "0");
    for (key, rk) in readers.iter_mut() {
        let want: &[u8] = match *key {
            "k" => b"$1\r\nv\r\n",
            "m2" => b"$1\r\nb\r\n",
            "dst" => b"$1\r\ns\r\n",
            _ => b"$-1\r\n",
        };
        assert_eq!(rk.reply(), want, "GET {key}");
    }
    assert_eq!(w1.reply(), b"+OK\r\n");
    assert_eq!(w2.reply(), b"+OK\r\n");
    assert_eq!(w2.reply(), b"+QUEUED\r\n");
    assert_eq!(w2.reply(), b"+QUEUED\r\n");
    assert_eq!(w2.reply(), b"*2\r\n+OK\r\n+OK\r\n");
    assert_eq!(w.reply(), b"+OK\r\n");

    // An expiry's deletion is a write: the read that found the key expired waits for it.
    std::thread::sleep(Duration::from_millis(200));
    pause(&mut ctl, "1");
    send(&mut r, &["GET", "gone"]);
    assert!(
        silent_for(&mut r, 200),
        "the expired key's GET did not wait for its DEL"
    );
    pause(&mut ctl, "0");
    assert_eq!(r.reply(), b"$-1\r\n");
    pause(&mut ctl, "1");

    // A blocking pop served by a push: both replies wait for the pop's entry.
    let mut b = Raw::connect(srv.port);
    let blocked = |c: &mut Raw, n: &str| {
        wait_until(DEADLINE, &format!("blocked_clients is {n}"), || {
            c.info("clients", "blocked_clients").as_deref() == Some(n)
        });
    };
    send(&mut b, &["BLPOP", "q", "0"]);
    blocked(&mut ctl, "1");
    send(&mut w, &["RPUSH", "q", "x"]);
    blocked(&mut ctl, "0");
    assert!(
        silent_for(&mut b, 300),
        "BLPOP answered before its pop was durable"
    );
    assert!(
        silent_for(&mut w, 10),
        "RPUSH answered before it was durable"
    );
    clean_read_is_prompt(&mut r);
    pause(&mut ctl, "0");
    assert_eq!(b.reply(), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    assert_eq!(w.reply(), b":1\r\n");

    // FLUSHALL and SWAPDB change every key: every read waits behind them.
    for barrier in [&["SWAPDB", "0", "1"][..], &["FLUSHALL"][..]] {
        pause(&mut ctl, "1");
        // Every reply waits behind a barrier (INFO too): see it in the file instead.
        let logged = |name: &str| {
            let text = String::from_utf8_lossy(&std::fs::read(incr_file(&dir)).unwrap())
                .to_ascii_uppercase();
            text.matches(name).count()
        };
        let before = logged(barrier[0]);
        send(&mut w, barrier);
        wait_until(DEADLINE, &format!("{barrier:?} ran"), || {
            logged(barrier[0]) != before
        });
        send(&mut r, &["GET", "clean"]);
        assert!(
            silent_for(&mut r, 200),
            "a read did not wait behind {barrier:?}"
        );
        pause(&mut ctl, "0");
        assert_eq!(w.reply(), b"+OK\r\n");
        r.reply();
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Automatic rewrites (`auto-aof-rewrite-percentage` / `-min-size`): with an image base
/// the log's growth is measured against the dataset the image holds, not the compressed
/// file (here ~40× smaller): half the dataset's worth of log starts no rewrite, more than
/// all of it does.
#[test]
fn automatic_rewrite_measures_growth_against_the_dataset_an_image_base_holds() {
    let dir = temp_dir("autorw");
    let srv = start(
        &dir,
        &[
            "--appendfsync",
            "no",
            "--auto-aof-rewrite-min-size",
            "1mb",
            "--auto-aof-rewrite-percentage",
            "100",
        ],
    );
    let mut r = Raw::connect(srv.port);
    let value = "x".repeat(1000);
    let overwrite = |r: &mut Raw, keys: std::ops::Range<u32>| {
        for i in keys.clone() {
            r.cmd(&[b"SET", format!("k{i}").as_bytes(), value.as_bytes()]);
        }
        for _ in keys {
            assert_eq!(r.reply(), b"+OK\r\n");
        }
    };
    // 4 MB of values; the rewrites this starts on the way (growth from an empty base)
    // settle, then one more sets the basis on the whole dataset.
    overwrite(&mut r, 0..4000);
    // Until no automatic rewrite runs nor is due (cron checks every 100 ms).
    let t = Instant::now();
    let before = loop {
        let n: u64 = r.info_field("persistence", "aof_rewrites").parse().unwrap();
        wait_rewrite(&mut r, n);
        std::thread::sleep(Duration::from_millis(300));
        if r.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && r.info_field("persistence", "aof_rewrites") == n.to_string()
        {
            break n;
        }
        assert!(t.elapsed() < DEADLINE, "rewrites never settled");
    };
    assert!(r.call(&["BGREWRITEAOF"]).starts_with(b"+"));
    wait_rewrite(&mut r, before + 1);
    let base: u64 = r
        .info_field("persistence", "aof_base_size")
        .parse()
        .unwrap();
    assert!(
        base < 1 << 20,
        "the image base compresses the values: {base} bytes"
    );
    // ~2 MB of log over a ~4.5 MB dataset: no automatic rewrite (measured against the
    // image file it would be a 2000 % growth, past the 1 MB minimum).
    overwrite(&mut r, 0..2000);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        r.info_field("persistence", "aof_rewrites"),
        (before + 1).to_string(),
        "a rewrite started on half the dataset's worth of log"
    );
    assert_eq!(r.info_field("persistence", "aof_rewrite_in_progress"), "0");
    // ~4 MB more (the log now outgrows the dataset): an automatic rewrite runs.
    overwrite(&mut r, 0..4000);
    wait_rewrite(&mut r, before + 2);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
