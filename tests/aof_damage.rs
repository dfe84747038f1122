//! Damage to the append-only log never costs an acknowledged write (issue #16, point 3):
//! one changed byte at each entry's first, middle and last byte — in a log cairn wrote
//! (writes spaced out and close together, buffered, pre-allocated and direct I/O), in one
//! redis-server 7 wrote, and in a Redis-style multi-part directory built here — either
//! loads every acknowledged write or stops startup with every file byte for byte as it was.
//! `--check-aof` on the manifest agrees with startup, and `--check-aof --fix` asks before
//! it cuts.

mod common;

use cairn::persistence::aof::format;
use common::{
    encode, free_port, redis_server_path, server_log as log, start_aof as start, temp_dir,
    try_start_aof as try_start, wait_serving, Raw, Srv,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

const AOF_DIR: &str = "appendonlydir";

/// An AOF directory's files: name → bytes.
type Files = BTreeMap<String, Vec<u8>>;
/// A dataset: (db, key) → value.
type Data = BTreeMap<(u32, String), String>;
const MANIFEST: &str = "appendonly.aof.manifest";

/// Every file of the AOF directory, by name.
fn aof_files(dir: &Path) -> Files {
    std::fs::read_dir(dir.join(AOF_DIR))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Makes the AOF directory exactly `files`.
fn put_aof_files(dir: &Path, files: &Files) {
    let _ = std::fs::remove_dir_all(dir.join(AOF_DIR));
    std::fs::create_dir_all(dir.join(AOF_DIR)).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(AOF_DIR).join(name), bytes).unwrap();
    }
    let _ = std::fs::remove_file(dir.join("cairn.log"));
}

/// The incremental files the manifest lists, in order.
fn listed_incrs(files: &Files) -> Vec<String> {
    String::from_utf8_lossy(&files[MANIFEST])
        .lines()
        .filter(|l| l.ends_with("type i"))
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .collect()
}

/// The byte ranges of a file's entries (header and command, or a Redis command).
fn entry_ranges(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut starts = Vec::new();
    let o = format::scan(bytes, None, |e| {
        starts.push(e.offset as usize);
        Ok(())
    });
    assert!(o.bad.is_none(), "the undamaged file is valid: {:?}", o.bad);
    starts
        .iter()
        .map(|&start| {
            let cmd = if bytes[start..].starts_with(format::HDR_PREFIX) {
                start
                    + bytes[start..]
                        .windows(2)
                        .position(|w| w == b"\r\n")
                        .unwrap()
                    + 2
            } else {
                start
            };
            let (_, used) = format::parse_command(&bytes[cmd..], false).unwrap();
            (start, cmd + used)
        })
        .collect()
}

/// The data an AOF directory's commands leave, as (db, key) → value (SET and SELECT
/// only: what these tests write). None if the files do not parse whole.
fn replayed(files: &Files) -> Option<Data> {
    let mut data = BTreeMap::new();
    let mut db = 0u32;
    let text_files = files
        .iter()
        .filter(|(n, _)| n.ends_with(".aof"))
        .map(|(n, b)| (n.contains(".base."), n.clone(), b));
    // Base first, then the incremental files in manifest order.
    let mut ordered: Vec<_> = text_files.filter(|(base, _, _)| *base).collect();
    for name in listed_incrs(files) {
        ordered.push((false, name.clone(), &files[&name]));
    }
    for (_, _, bytes) in ordered {
        let mut bad_command = false;
        let o = format::scan(bytes, None, |e| {
            let name = String::from_utf8_lossy(e.args[0]).to_ascii_uppercase();
            let arg = |i: usize| String::from_utf8_lossy(e.args[i]).into_owned();
            match (name.as_str(), e.args.len()) {
                ("SELECT", 2) => match arg(1).parse() {
                    Ok(n) => db = n,
                    Err(_) => bad_command = true,
                },
                ("SET", 3) => {
                    data.insert((db, arg(1)), arg(2));
                }
                _ => bad_command = true,
            }
            Ok(())
        });
        if o.bad.is_some() || bad_command {
            return None;
        }
    }
    Some(data)
}

/// Checks that a started server holds every `(db, key) → value`.
fn holds_all(port: u16, want: &Data) -> Result<(), String> {
    let mut r = Raw::connect(port);
    for ((db, key), value) in want {
        r.call(&["SELECT", &db.to_string()]);
        let got = r.call(&["GET", key]);
        let expect = format!("${}\r\n{value}\r\n", value.len());
        if got != expect.as_bytes() {
            return Err(format!(
                "db {db} key {key}: {:?}, wanted {value:?}",
                String::from_utf8_lossy(&got)
            ));
        }
    }
    Ok(())
}

/// `cairn-server --check-aof <manifest>`: true on exit status 0.
fn check_aof_accepts(dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--check-aof")
        .arg(dir.join(AOF_DIR).join(MANIFEST))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What the damage cases saw.
#[derive(Default, Debug)]
struct Outcomes {
    refused: usize,
    loaded: usize,
}

/// For each listed incremental file and each of its entries, changes one byte (the
/// entry's first, middle and last) and starts a server on the directory: it must either
/// hold every acknowledged write (`acked`; for a file without checksums, a change inside a
/// key or value loads as the file now says, as Redis loads it) or refuse to start and leave
/// every file as it was. With `check_agrees`, `--check-aof` on the manifest must accept
/// exactly the directories startup loads.
fn every_entry_damaged(
    dir: &Path,
    pristine: &Files,
    acked: &Data,
    args: &[&str],
    check_agrees: bool,
) -> Outcomes {
    let mut seen = Outcomes::default();
    for name in listed_incrs(pristine) {
        for (start, end) in entry_ranges(&pristine[&name]) {
            for at in [start, (start + end) / 2, end - 1] {
                let mut damaged = pristine.clone();
                damaged.get_mut(&name).unwrap()[at] ^= 0x01;
                put_aof_files(dir, &damaged);
                let case = format!("{name} byte {at} (entry at {start}..{end})");
                let (check_ok, report) = check_aof_accepts(dir);
                let started = match try_start(dir, args) {
                    Ok(srv) => {
                        // In a file without checksums a changed key or value byte parses
                        // whole and loads as the file now says.
                        let want = replayed(&damaged).unwrap_or_else(|| acked.clone());
                        if let Err(e) = holds_all(srv.port, &want) {
                            panic!(
                                "{case}: started without an acknowledged write: {e}\n{}",
                                log(dir)
                            );
                        }
                        drop(srv);
                        seen.loaded += 1;
                        true
                    }
                    Err(_) => {
                        let after = aof_files(dir);
                        assert!(
                            after == damaged,
                            "{case}: a refused startup changed the files: {:?}",
                            after
                                .iter()
                                .filter(|(n, b)| damaged.get(*n) != Some(b))
                                .map(|(n, b)| (n, b.len()))
                                .collect::<Vec<_>>()
                        );
                        let l = log(dir);
                        assert!(
                            l.contains(&name) && l.contains("offset"),
                            "{case}: the error names the file and offset: {l}"
                        );
                        seen.refused += 1;
                        false
                    }
                };
                if check_agrees {
                    assert_eq!(
                        check_ok,
                        started,
                        "{case}: --check-aof and startup disagree:\n{report}\n{}",
                        log(dir)
                    );
                }
            }
        }
    }
    put_aof_files(dir, pristine);
    seen
}

/// Writes `keys` SETs to a cairn server started with `args` (`pipelined`: all sent at
/// once, so several land in one write; else one at a time, each acknowledged before the
/// next), then kills it (SIGKILL). Returns the AOF files and the acknowledged writes.
fn cairn_written(dir: &Path, args: &[&str], keys: usize, pipelined: bool) -> (Files, Data) {
    let srv = start(dir, args);
    let mut r = Raw::connect(srv.port);
    let mut acked = BTreeMap::new();
    let kv: Vec<(String, String)> = (0..keys)
        .map(|i| {
            (
                format!("key:{i}"),
                format!("value-{i}-{}", "x".repeat(i * 7)),
            )
        })
        .collect();
    if pipelined {
        let mut all = Vec::new();
        for (k, v) in &kv {
            all.extend(encode(&[b"SET", k.as_bytes(), v.as_bytes()]));
        }
        r.send(&all);
        for _ in &kv {
            assert_eq!(r.reply(), b"+OK\r\n");
        }
    } else {
        for (k, v) in &kv {
            assert_eq!(r.call(&["SET", k, v]), b"+OK\r\n");
        }
    }
    for (k, v) in kv {
        acked.insert((0, k), v);
    }
    drop(srv);
    (aof_files(dir), acked)
}

fn cairn_case(tag: &str, args: &[&str], pipelined: bool) {
    let dir = temp_dir(tag);
    let (pristine, acked) = cairn_written(&dir, args, 7, pipelined);
    let seen = every_entry_damaged(&dir, &pristine, &acked, args, true);
    assert!(seen.refused > 0, "{tag}: {seen:?}");
    // Whatever aof-load-truncated says, damage in the middle stops startup.
    let mut damaged = pristine.clone();
    let name = listed_incrs(&pristine).pop().unwrap();
    let (start, _) = entry_ranges(&pristine[&name])[2];
    damaged.get_mut(&name).unwrap()[start] ^= 0x01;
    put_aof_files(&dir, &damaged);
    let mut no = args.to_vec();
    no.extend(["--aof-load-truncated", "no"]);
    assert!(try_start(&dir, &no).is_err());
    assert!(aof_files(&dir) == damaged);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cairn_written_writes_spaced_out() {
    // `always`, one write at a time: each batch's marker says the one before is durable.
    cairn_case(
        "spaced",
        &["--appendfsync", "always", "--aof-preallocate-bytes", "0"],
        false,
    );
}

#[test]
fn cairn_written_writes_close_together() {
    // `everysec`: no marker says anything is durable yet (the second has not passed).
    cairn_case(
        "everysec",
        &["--appendfsync", "everysec", "--aof-preallocate-bytes", "0"],
        false,
    );
    // Pipelined under `always`, several entries per write.
    cairn_case(
        "pipelined",
        &["--appendfsync", "always", "--aof-preallocate-bytes", "0"],
        true,
    );
}

#[test]
fn cairn_written_pre_allocated_and_direct_io() {
    // Filler after the log (the kill leaves it there).
    cairn_case(
        "prealloc",
        &["--appendfsync", "always", "--aof-preallocate-bytes", "1mb"],
        true,
    );
    // Direct I/O: every write padded to whole blocks, several in flight.
    cairn_case(
        "direct",
        &[
            "--appendfsync",
            "always",
            "--aof-direct-io",
            "yes",
            "--aof-inflight-syncs",
            "4",
            "--aof-preallocate-bytes",
            "0",
        ],
        true,
    );
}

/// redis-server 7 writes a multi-part AOF (RDB preamble base, RESP incremental file,
/// manifest); cairn loads it, and one changed byte anywhere in an entry either loads what
/// the file says or stops startup with the files unchanged.
#[test]
fn redis_written_log_damaged_at_every_entry() {
    let redis_dir = temp_dir("redis-src");
    let port = free_port();
    let mut child = Command::new(redis_server_path())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(&redis_dir)
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(&mut child, port).unwrap();
    let redis = Srv { child, port };
    let mut r = Raw::connect(redis.port);
    let mut acked = BTreeMap::new();
    for i in 0..6 {
        let (k, v) = (format!("rkey:{i}"), format!("rvalue-{i}"));
        assert_eq!(r.call(&["SET", &k, &v]), b"+OK\r\n");
        acked.insert((0, k), v);
    }
    // Several commands in one write.
    let mut all = Vec::new();
    for i in 6..10 {
        all.extend(encode(&[
            b"SET",
            format!("rkey:{i}").as_bytes(),
            format!("rvalue-{i}").as_bytes(),
        ]));
        acked.insert((0, format!("rkey:{i}")), format!("rvalue-{i}"));
    }
    r.send(&all);
    for _ in 6..10 {
        assert_eq!(r.reply(), b"+OK\r\n");
    }
    drop(redis);
    let dir = temp_dir("redis");
    std::fs::create_dir_all(dir.join(AOF_DIR)).unwrap();
    for e in std::fs::read_dir(redis_dir.join(AOF_DIR)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(AOF_DIR).join(e.file_name())).unwrap();
    }
    let pristine = aof_files(&dir);
    assert!(
        pristine.keys().any(|n| n.ends_with(".base.rdb")),
        "{:?}",
        pristine.keys()
    );
    // Undamaged, it loads whole.
    let srv = start(&dir, &[]);
    holds_all(srv.port, &acked).unwrap();
    drop(srv);
    put_aof_files(&dir, &pristine);
    let seen = every_entry_damaged(&dir, &pristine, &acked, &[], false);
    assert!(seen.refused > 0, "{seen:?}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&redis_dir);
}

/// A Redis 7 style multi-part directory built here: a RESP base and two RESP incremental
/// files (no LSN headers), damaged in each incremental file's entries.
#[test]
fn redis_style_multi_part_directory_damaged_at_every_entry() {
    let dir = temp_dir("redis-parts");
    let mut files = BTreeMap::new();
    let mut acked = BTreeMap::new();
    let mut file = |name: &str, keys: std::ops::Range<u32>| {
        let mut b = encode(&[b"SELECT", b"0"]);
        for i in keys {
            let (k, v) = (
                format!("part:{i}"),
                format!("{i}-{}", "v".repeat(i as usize)),
            );
            b.extend(encode(&[b"SET", k.as_bytes(), v.as_bytes()]));
            acked.insert((0, k), v);
        }
        files.insert(name.to_string(), b);
    };
    file("appendonly.aof.1.base.aof", 0..3);
    file("appendonly.aof.1.incr.aof", 3..7);
    file("appendonly.aof.2.incr.aof", 7..11);
    files.insert(
        MANIFEST.to_string(),
        b"file appendonly.aof.1.base.aof seq 1 type b\n\
          file appendonly.aof.1.incr.aof seq 1 type i\n\
          file appendonly.aof.2.incr.aof seq 2 type i\n"
            .to_vec(),
    );
    put_aof_files(&dir, &files);
    let srv = start(&dir, &[]);
    holds_all(srv.port, &acked).unwrap();
    drop(srv);
    let seen = every_entry_damaged(&dir, &files, &acked, &[], false);
    assert!(seen.refused > 0, "{seen:?}");
    // The last file cut inside its last command is a torn tail: cut, the rest loads.
    let mut torn = files.clone();
    let last = torn.get_mut("appendonly.aof.2.incr.aof").unwrap();
    last.truncate(last.len() - 4);
    put_aof_files(&dir, &torn);
    let srv = start(&dir, &[]);
    let mut want = acked.clone();
    want.remove(&(0, "part:10".to_string()));
    holds_all(srv.port, &want).unwrap();
    drop(srv);
    // The same cut in the file before the last stops startup (Redis's rule too).
    let mut torn = files.clone();
    let first = torn.get_mut("appendonly.aof.1.incr.aof").unwrap();
    first.truncate(first.len() - 4);
    put_aof_files(&dir, &torn);
    assert!(try_start(&dir, &[]).is_err());
    assert!(aof_files(&dir) == torn);
    // --check-aof agrees, and --fix will not cut a file before the last one (the files
    // after it would replay over the hole), even with -y.
    let (ok, report) = check_aof_accepts(&dir);
    assert!(!ok, "{report}");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .args(["--check-aof", "--fix", "-y"])
        .arg(dir.join(AOF_DIR).join(MANIFEST))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("only the last incremental file"), "{text}");
    assert!(aof_files(&dir) == torn);
    let _ = std::fs::remove_dir_all(&dir);
}
