//! Snapshots of a tiered server (`tiered-prefix`): BGSAVE, SAVE and SHUTDOWN SAVE write
//! the image and its tier companion file; a restart with tiering serves the cold values
//! from the restored tier file, one without tiering reads them all into memory; every
//! value is the one it had at the cut. A companion that is missing, truncated, from
//! another snapshot, damaged, or shorter than the image's records is refused by name.
//! `snapshot-format rdb` writes RDBs holding the cold values (redis-server 7 loads
//! them); the AOF and its rewrites (image and RDB bases) restore them, with and without
//! tiering, and redis-server 7 loads an RDB-preamble directory.

mod common;
use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const MAXMEMORY: u64 = 4 << 20;

fn tiered_args(dir: &Path) -> Vec<String> {
    let prefix = dir.join("tier").display().to_string();
    [
        "--save",
        "",
        "--maxmemory",
        "4mb",
        "--enable-debug-command",
        "yes",
        "--tiered-prefix",
        &prefix,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn start_tiered(dir: &Path) -> Srv {
    let a = tiered_args(dir);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    start_on(dir, &a, &[])
}

/// Without tiering and without a memory limit: every value in RAM.
fn start_plain(dir: &Path) -> Srv {
    start_on(dir, &["--save", "", "--enable-debug-command", "yes"], &[])
}

/// Startup on `dir` with `args` fails: the log.
fn refused_start(dir: &Path, args: &[String]) -> String {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match try_start_on(dir, &a, &[]) {
        Ok(_) => panic!("the server started: {}", server_log(dir)),
        Err(e) => e,
    }
}

/// Strings `k<i>` (~3× maxmemory with the collections) and single-block collections
/// `h<i>`, `s<i>`, `z<i>`, `l<i>`: the commands that make them.
fn dataset_cmds(strings: usize, colls: usize) -> Vec<Vec<Vec<u8>>> {
    let mut rng = Lcg(77);
    let mut cmds = Vec::new();
    for i in 0..colls {
        let mut h = vec![b"HSET".to_vec(), format!("h{i}").into_bytes()];
        let mut s = vec![b"SADD".to_vec(), format!("s{i}").into_bytes()];
        let mut z = vec![b"ZADD".to_vec(), format!("z{i}").into_bytes()];
        let mut l = vec![b"RPUSH".to_vec(), format!("l{i}").into_bytes()];
        for j in 0..20 {
            let w = format!("{i}-{j}-{}", rng.below(1 << 40)).into_bytes();
            h.push(format!("f{j}").into_bytes());
            h.push(w.clone());
            s.push(w.clone());
            z.push(format!("{}.{}", rng.below(100), rng.below(1000)).into_bytes());
            z.push(w.clone());
            l.push(w);
        }
        cmds.extend([h, s, z, l]);
    }
    for i in 0..strings {
        cmds.push(vec![
            b"SET".to_vec(),
            format!("k{i}").into_bytes(),
            tier_value_of(i, &mut rng),
        ]);
    }
    cmds
}

fn keys_of(cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    cmds.iter().map(|c| c[1].clone()).collect()
}

/// Each key's value as a reply: GET for strings (`k<i>`, `n<i>`, `m<i>`, `seq`), DUMP (the
/// serialized bytes) for collections; `$-1` for a missing key. Pipelined.
fn values(raw: &mut Raw, keys: &[Vec<u8>]) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut out = HashMap::new();
    for chunk in keys.chunks(200) {
        let mut buf = Vec::new();
        for k in chunk {
            let cmd: &[u8] = if matches!(k[0], b'k' | b'n' | b'm') || k == b"seq" {
                b"GET"
            } else {
                b"DUMP"
            };
            buf.extend_from_slice(&encode(&[cmd, k]));
        }
        raw.send(&buf);
        for k in chunk {
            let r = raw.reply();
            assert!(!r.starts_with(b"-"), "{}: {}", show(k), show(&r));
            out.insert(k.clone(), r);
        }
    }
    out
}

/// Every key of `want` holds what it says.
fn check(raw: &mut Raw, want: &HashMap<Vec<u8>, Vec<u8>>) {
    let keys: Vec<Vec<u8>> = want.keys().cloned().collect();
    let got = values(raw, &keys);
    let mut bad: Vec<String> = keys
        .iter()
        .filter(|k| got[*k] != want[*k])
        .map(|k| show(k))
        .collect();
    bad.sort();
    assert!(
        bad.is_empty(),
        "{} keys differ from the cut: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

/// Restarts on `dir`'s snapshot with tiering (values stay cold, none fails to read) and
/// then without it (everything loaded into memory): both serve `want` exactly.
fn restart_tiered_then_plain_and_check(dir: &Path, want: &HashMap<Vec<u8>, Vec<u8>>) {
    let srv = start_tiered(dir);
    let mut raw = Raw::connect(srv.port);
    assert!(raw.info_u64("tiered", "tiered_entries") > 1000);
    check(&mut raw, want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);
    let srv = start_plain(dir);
    let mut raw = Raw::connect(srv.port);
    check(&mut raw, want);
    drop(srv);
}

/// Up to `take` of the keys `k7999` down to `k0` whose values are cold (the last written
/// first: their pages are the file's last), at least `min` of them.
fn cold_strings(raw: &mut Raw, take: usize, min: usize) -> Vec<Vec<u8>> {
    let cold: Vec<Vec<u8>> = (0..8000)
        .rev()
        .map(|i| format!("k{i}").into_bytes())
        .filter(|k| state(raw, k) == "cold")
        .take(take)
        .collect();
    assert!(cold.len() >= min, "only {} cold strings", cold.len());
    cold
}

fn state(raw: &mut Raw, key: &[u8]) -> String {
    raw.cmd(&[b"DEBUG", b"TIERED-STATE", key]);
    show(&raw.reply())
        .trim()
        .trim_start_matches('+')
        .to_string()
}

fn companions(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("dump.cimg.tier-")
        })
        .collect();
    v.sort();
    v
}

/// Loads the dataset and waits until many values are cold; the keys.
fn fill(raw: &mut Raw, strings: usize, colls: usize) -> Vec<Vec<u8>> {
    let cmds = dataset_cmds(strings, colls);
    run_all_making_room(raw, &cmds, b"", MAXMEMORY);
    wait_until(DEADLINE, "many values are cold", || {
        raw.info_u64("tiered", "tiered_entries") > strings as u64 / 2
    });
    keys_of(&cmds)
}

fn bgsave_done(raw: &mut Raw) {
    wait_until(DEADLINE, "the BGSAVE ends", || {
        raw.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(
        raw.info_field("persistence", "rdb_last_bgsave_status"),
        "ok"
    );
}

/// One change made after BGSAVE, atomically with `INCR seq`: the image holds exactly
/// the changes numbered up to its `seq`.
enum Change {
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

#[test]
fn a_bgsave_holds_the_cut_and_restarts_with_and_without_tiering_serve_it() {
    let dir = temp_dir("tpersist-bgsave");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 150);
    raw.call(&["SET", "seq", "0"]);
    let before = values(&mut raw, &keys);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    // The changes hit cold keys (overwritten, deleted: their pages are freed) and add
    // new values that the pass stashes (into the freed pages, were they reused).
    // The last written are in the file's last pages, which the copy reaches last.
    let cold = cold_strings(&mut raw, 600, 400);
    let mut rng = Lcg(5);
    let mut changes = Vec::new();
    for (n, k) in cold.iter().enumerate() {
        changes.push(if n % 2 == 0 {
            Change::Del(k.clone())
        } else {
            Change::Set(k.clone(), tier_value_of(n, &mut rng))
        });
        let big = format!("n{n}").into_bytes();
        changes.push(Change::Set(big, tier_value_of(n * 10 + 1, &mut rng)));
    }
    // A slow copy of the tier file (400 ms a MiB), so the changes land, and the new
    // values are stashed, while it runs.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "400000"]),
        b"+OK\r\n"
    );
    // The cut at once (the live modes cut when their passes converge, which may be
    // after every change below).
    assert_eq!(
        raw.call(&["CONFIG", "SET", "snapshot-mode", "stop-the-world"]),
        b"+OK\r\n"
    );
    let stashes = raw.info_u64("tiered", "tiered_stashes");
    assert_eq!(raw.call(&["BGSAVE"]), b"+Background saving started\r\n");
    let mut applied = Vec::new();
    for c in &changes {
        let mut buf = encode(&[b"MULTI"]);
        match c {
            Change::Set(k, v) => buf.extend(encode(&[b"SET", k, v])),
            Change::Del(k) => buf.extend(encode(&[b"DEL", k])),
        }
        buf.extend(encode(&[b"INCR", b"seq"]));
        buf.extend(encode(&[b"EXEC"]));
        raw.send(&buf);
        let replies: Vec<Vec<u8>> = (0..4).map(|_| raw.reply()).collect();
        let ok = replies[3].starts_with(b"*2");
        applied.push(ok);
        if !ok {
            wait_until(DEADLINE, "memory goes below maxmemory again", || {
                used_memory(&mut raw) + 64 * 1024 < MAXMEMORY
            });
        }
    }
    wait_until(DEADLINE, "the new values are stashed", || {
        raw.info_u64("tiered", "tiered_stashes") > stashes + 300
    });
    let copying = raw.info_field("persistence", "rdb_bgsave_in_progress") == "1";
    println!("the changes were made while the capture ran: {copying}");
    bgsave_done(&mut raw);
    assert_eq!(companions(&dir).len(), 1, "one companion beside the image");
    drop(srv);

    // Restart with tiering: served without reading every value first. The image holds
    // the state before the changes plus the first `seq` applied ones.
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    assert!(
        raw.info_u64("tiered", "tiered_entries") > 1000,
        "values stay on disk after the restart"
    );
    let seq: usize = String::from_utf8_lossy(&bulk_payload(&raw.call(&["GET", "seq"])))
        .parse()
        .unwrap();
    let mut want = before.clone();
    want.insert(b"seq".to_vec(), bulk(seq.to_string().as_bytes()));
    for c in &changes {
        if let Change::Set(k, _) = c {
            want.entry(k.clone()).or_insert_with(|| b"$-1\r\n".to_vec());
        }
    }
    let mut done = 0;
    for (c, _) in changes.iter().zip(&applied).filter(|(_, ok)| **ok) {
        if done == seq {
            break;
        }
        done += 1;
        match c {
            Change::Set(k, v) => want.insert(k.clone(), bulk(v)),
            Change::Del(k) => want.insert(k.clone(), b"$-1\r\n".to_vec()),
        };
    }
    assert_eq!(done, seq, "seq counts applied changes");
    println!(
        "the image holds {seq} of {} applied changes",
        applied.iter().filter(|a| **a).count()
    );
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    // New values are stashed into free pages, never over the restored ones.
    let stashes_now = raw.info_u64("tiered", "tiered_stashes");
    let more: Vec<Vec<Vec<u8>>> = (0..3000)
        .map(|i| {
            vec![
                b"SET".to_vec(),
                format!("m{i}").into_bytes(),
                tier_value_of(i + 100_000, &mut rng),
            ]
        })
        .collect();
    run_all_making_room(&mut raw, &more, b"+OK", MAXMEMORY);
    wait_until(DEADLINE, "the new values are stashed", || {
        raw.info_u64("tiered", "tiered_stashes") > stashes_now + 1000
    });
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);

    // Restart without tiering: every value read into memory.
    let srv = start_plain(&dir);
    let mut raw = Raw::connect(srv.port);
    assert_eq!(raw.info("tiered", "tiered_entries"), None);
    check(&mut raw, &want);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_save_keeps_one_companion_and_the_restart_serves_every_value() {
    let dir = temp_dir("tpersist-shutdown");
    let mut srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 100);
    let want = values(&mut raw, &keys);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    // A save point takes a BGSAVE with its companion.
    assert_eq!(raw.call(&["CONFIG", "SET", "save", "1 1"]), b"+OK\r\n");
    wait_until(DEADLINE, "a save point saves", || {
        raw.info_u64("persistence", "rdb_changes_since_last_save") == 0
            && raw.info_field("persistence", "rdb_bgsave_in_progress") == "0"
            && companions(&dir).len() == 1
    });
    assert_eq!(raw.call(&["CONFIG", "SET", "save", ""]), b"+OK\r\n");
    let by_save_point = companions(&dir);
    assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
    let first = companions(&dir);
    assert_eq!(first.len(), 1);
    assert_ne!(first, by_save_point);
    raw.cmd(&[b"SHUTDOWN", b"SAVE"]);
    assert!(raw.closed(), "SHUTDOWN SAVE closes the connection");
    let st = srv.child.wait().unwrap();
    assert!(st.success(), "{}", server_log(&dir));
    let second = companions(&dir);
    assert_eq!(second.len(), 1, "the older companion is removed");
    assert_ne!(first, second, "each snapshot has its own companion");

    restart_tiered_then_plain_and_check(&dir, &want);
    // The RDB export reads the tiered values from the companion too.
    let rdb = dir.join("out.rdb");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--export-rdb")
        .arg(dir.join("dump.cimg"))
        .arg(&rdb)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("Exported {} keys", want.len())),
        "{said}"
    );
    let srv = start_on(
        &dir,
        &[
            "--save",
            "",
            "--image-filename",
            "none.cimg",
            "--dbfilename",
            "out.rdb",
        ],
        &[],
    );
    let mut raw = Raw::connect(srv.port);
    // Strings compare by GET (a collection's DUMP may differ after an RDB's encoding
    // choices).
    let strings: HashMap<Vec<u8>, Vec<u8>> = want
        .iter()
        .filter(|(k, _)| k[0] == b'k')
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    check(&mut raw, &strings);
    assert_eq!(
        raw.call(&["DBSIZE"]),
        format!(":{}\r\n", want.len()).into_bytes()
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pair_page_and_whole_page_records_restart_byte_exact() {
    let dir = temp_dir("tpersist-edge");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    // Records (8 + key + value bytes) of 2045 to 2047 bytes (two share a pair page) and
    // of 4089 to 4095 bytes (whole-page records), about 3× maxmemory.
    let sizes = [2045usize, 2046, 2047, 4089, 4091, 4093, 4095];
    let mut rng = Lcg(83);
    let cmds: Vec<Vec<Vec<u8>>> = (0..3000usize)
        .map(|i| {
            let key = format!("k{i}").into_bytes();
            let len = sizes[i % sizes.len()] - 8 - key.len();
            let mut v: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            vec![b"SET".to_vec(), key, v]
        })
        .collect();
    run_all_making_room(&mut raw, &cmds, b"+OK", MAXMEMORY);
    wait_until(DEADLINE, "many values are cold", || {
        raw.info_u64("tiered", "tiered_entries") > 1000
    });
    let want: HashMap<Vec<u8>, Vec<u8>> =
        cmds.iter().map(|c| (c[1].clone(), bulk(&c[2]))).collect();
    check(&mut raw, &want);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 1000
    });
    assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
    drop(srv);
    restart_tiered_then_plain_and_check(&dir, &want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The record `[key_len][value_len][key][value]` of `key`, a record of pages of its own
/// in `file` (so it starts at a page's payload, 8 bytes in): the offset of its value.
fn value_offset(file: &[u8], key: &[u8]) -> Option<usize> {
    (4096..file.len() - 4096)
        .step_by(4096)
        .map(|p| p + 8)
        .find(|&i| {
            file[i..i + 4] == (key.len() as u32).to_le_bytes()
                && file[i + 8..i + 8 + key.len()] == *key
        })
        .map(|i| i + 8 + key.len())
}

fn put_crc(b: &mut [u8], covered: usize) {
    let c = crc32c::crc32c(&b[..covered]);
    b[covered..covered + 4].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn a_companion_missing_cut_foreign_damaged_or_short_is_refused_by_name() {
    let dir = temp_dir("tpersist-bad");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    fill(&mut raw, 8000, 0);
    assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
    let older = std::fs::read(&companions(&dir)[0]).unwrap();
    assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
    // A cold key with pages of its own (6000+ bytes) to damage.
    let victim = (0..8000)
        .filter(|i| i % 10 == 1)
        .map(|i| format!("k{i}"))
        .find(|k| state(&mut raw, k.as_bytes()) == "cold")
        .expect("a cold key");
    drop(srv);
    let image = dir.join("dump.cimg");
    let comp = companions(&dir)[0].clone();
    let name = comp.file_name().unwrap().to_string_lossy().into_owned();
    let good = std::fs::read(&comp).unwrap();
    let tiered = tiered_args(&dir);
    let plain: Vec<String> = ["--save", ""].iter().map(|s| s.to_string()).collect();
    let both = |why: &str, expect: &str| {
        for args in [&tiered, &plain] {
            let log = refused_start(&dir, args);
            assert!(log.contains(&name) && log.contains(expect), "{why}: {log}");
        }
    };

    std::fs::remove_file(&comp).unwrap();
    both("missing", "No such file");

    std::fs::write(&comp, &good[..good.len() - 4096]).unwrap();
    both("truncated", "truncated");

    // The previous snapshot's companion under this one's name.
    std::fs::write(&comp, &older).unwrap();
    both("another snapshot's", "another snapshot");

    // A record past the companion's end: image and companion agree on 1 page.
    let img = std::fs::read(&image).unwrap();
    let mut short_img = img.clone();
    short_img[184..192].copy_from_slice(&1u64.to_le_bytes());
    put_crc(&mut short_img, 252);
    std::fs::write(&image, &short_img).unwrap();
    let mut short = good[..2 * 4096].to_vec();
    short[24..32].copy_from_slice(&1u64.to_le_bytes());
    put_crc(&mut short, 32);
    std::fs::write(&comp, &short).unwrap();
    both("a record past the end", "lies past the end");
    std::fs::write(&image, &img).unwrap();

    // A damaged page: without tiering the load fails naming the key; with tiering that
    // key's read fails naming it, and every other key is served.
    let mut damaged = good.clone();
    let at = value_offset(&damaged, victim.as_bytes()).expect("the victim's record");
    damaged[at + 3] ^= 0x40;
    std::fs::write(&comp, &damaged).unwrap();
    let log = refused_start(&dir, &plain);
    assert!(
        log.contains(&format!("key '{victim}'")) && log.contains("checksum mismatch"),
        "{log}"
    );
    let t: Vec<&str> = tiered.iter().map(String::as_str).collect();
    let srv = start_on(&dir, &t, &[]);
    let mut raw = Raw::connect(srv.port);
    let r = show(&raw.call(&["GET", &victim]));
    assert!(
        r.starts_with(&format!("-ERR tiered read of key '{victim}' failed")),
        "{r}"
    );
    assert_eq!(raw.call(&["DBSIZE"]), b":8000\r\n");
    let others: Vec<Vec<u8>> = (0..8000)
        .map(|i| format!("k{i}").into_bytes())
        .filter(|k| *k != victim.as_bytes())
        .collect();
    // `values` refuses error replies: every other key is served.
    assert_eq!(values(&mut raw, &others).len(), 7999);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The AOF directory's files whose name contains `part`.
fn aof_files(dir: &Path, part: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(part))
        .collect();
    v.sort();
    v
}

fn wait_rewrites(raw: &mut Raw, n: u64) {
    wait_until(DEADLINE, &format!("rewrite {n} ends"), || {
        raw.info_field("persistence", "aof_rewrite_in_progress") == "0"
            && raw.info_u64("persistence", "aof_rewrites") >= n
    });
    assert_eq!(
        raw.info_field("persistence", "aof_last_bgrewrite_status"),
        "ok",
        "{}",
        raw.info_field("persistence", "aof_last_bgrewrite_status")
    );
}

/// `appendonly yes` with tiering: the log alone restores values that went cold after
/// they were logged; BGREWRITEAOF (with cold values, changed while its capture copies
/// the tier file) writes a base that holds them, and restarts with tiering, without it,
/// and (RDB base) redis-server 7 serve every key byte-exact.
fn the_log_and_its_rewrite_cover_cold_values(preamble: bool) {
    let tag = if preamble { "rdb" } else { "image" };
    let dir = temp_dir(&format!("tpersist-aof-{tag}"));
    let mut args = tiered_args(&dir);
    args.extend(
        [
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            if preamble { "yes" } else { "no" },
            "--snapshot-mode",
            "stop-the-world",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = start_on(&dir, &a, &[]);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 150);
    let mut want = values(&mut raw, &keys);
    drop(srv);

    // The log alone (no rewrite yet): values logged hot, cold by the kill, come back.
    let srv = start_on(&dir, &a, &[]);
    let mut raw = Raw::connect(srv.port);
    check(&mut raw, &want);
    wait_until(DEADLINE, "values go cold again", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });

    // The rewrite: its capture copies the tier file slowly while cold values are
    // deleted and overwritten (their pages freed) and new values stashed.
    let cold = cold_strings(&mut raw, 400, 300);
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "200000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        raw.call(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n"
    );
    let mut rng = Lcg(9);
    let mut changes: Vec<Vec<Vec<u8>>> = Vec::new();
    for (n, k) in cold.iter().enumerate() {
        if n % 2 == 0 {
            changes.push(vec![b"DEL".to_vec(), k.clone()]);
            want.insert(k.clone(), b"$-1\r\n".to_vec());
        } else {
            let v = tier_value_of(n + 50_000, &mut rng);
            want.insert(k.clone(), bulk(&v));
            changes.push(vec![b"SET".to_vec(), k.clone(), v]);
        }
        let nk = format!("n{n}").into_bytes();
        let v = tier_value_of(n * 10 + 1, &mut rng);
        want.insert(nk.clone(), bulk(&v));
        changes.push(vec![b"SET".to_vec(), nk, v]);
    }
    run_all_making_room(&mut raw, &changes, b"", MAXMEMORY);
    // The RDB base's conversion reads the same setting as a per-key delay.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    wait_rewrites(&mut raw, 1);
    let comps = aof_files(&dir, ".tier-");
    if preamble {
        assert!(
            comps.is_empty(),
            "the RDB base needs no companion: {comps:?}"
        );
        assert_eq!(aof_files(&dir, ".base.").len(), 1);
        assert!(aof_files(&dir, ".base.")[0].ends_with(".base.rdb"));
    } else {
        assert_eq!(comps.len(), 1, "{comps:?}");
        assert!(comps[0].starts_with(&aof_files(&dir, ".base.cimg")[0]));
    }
    // More writes after the rewrite (the new incremental file).
    let more: Vec<Vec<Vec<u8>>> = (0..1500)
        .map(|i| {
            let k = format!("m{i}").into_bytes();
            let v = tier_value_of(i + 90_000, &mut rng);
            want.insert(k.clone(), bulk(&v));
            vec![b"SET".to_vec(), k, v]
        })
        .collect();
    run_all_making_room(&mut raw, &more, b"+OK", MAXMEMORY);
    check(&mut raw, &want);
    drop(srv);

    // Restart with tiering: an image base's cold values stay on disk.
    let srv = start_on(&dir, &a, &[]);
    let mut raw = Raw::connect(srv.port);
    if !preamble {
        assert!(
            raw.info_u64("tiered", "tiered_entries") > 1000,
            "values stay on disk after the restart"
        );
    }
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    if !preamble {
        // A second rewrite retires the first base and its companion.
        wait_until(DEADLINE, "values go cold again", || {
            raw.info_u64("tiered", "tiered_entries") > 4000
        });
        let before = aof_files(&dir, ".tier-");
        assert_eq!(
            raw.call(&["BGREWRITEAOF"]),
            b"+Background append only file rewriting started\r\n"
        );
        wait_rewrites(&mut raw, 1);
        let after = aof_files(&dir, ".tier-");
        assert_eq!(after.len(), 1, "{after:?}");
        assert_ne!(after, before);
        check(&mut raw, &want);
    }
    drop(srv);

    // Restart without tiering and without a memory limit: everything in RAM.
    let plain = [
        "--save",
        "",
        "--enable-debug-command",
        "yes",
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        if preamble { "yes" } else { "no" },
    ];
    let srv = start_on(&dir, &plain, &[]);
    let mut raw = Raw::connect(srv.port);
    assert_eq!(raw.info("tiered", "tiered_entries"), None);
    check(&mut raw, &want);
    assert_eq!(
        raw.call(&["DBSIZE"]),
        format!(
            ":{}\r\n",
            want.values().filter(|v| v.as_slice() != b"$-1\r\n").count()
        )
        .into_bytes()
    );
    let digest = raw.call(&["DEBUG", "DIGEST"]);
    drop(srv);

    if preamble {
        // redis-server 7 loads the directory (RDB base + incremental files).
        let port = free_port();
        let mut child = std::process::Command::new(redis_server_path())
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "yes", "--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_serving(&mut child, port).unwrap();
        let srv = Srv { child, port };
        let mut raw = Raw::connect(srv.port);
        wait_until(DEADLINE, "redis loads", || {
            !raw.call(&["PING"]).starts_with(b"-LOADING")
        });
        let strings: HashMap<Vec<u8>, Vec<u8>> = want
            .iter()
            .filter(|(k, _)| matches!(k[0], b'k' | b'n' | b'm'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        check(&mut raw, &strings);
        assert_eq!(show(&raw.call(&["DEBUG", "DIGEST"])), show(&digest));
        drop(srv);
    } else {
        // A missing companion of the image base stops startup naming it.
        let comp = aof_files(&dir, ".tier-")[0].clone();
        std::fs::remove_file(dir.join("appendonlydir").join(&comp)).unwrap();
        for args in [args.clone(), plain.iter().map(|s| s.to_string()).collect()] {
            let log = refused_start(&dir, &args);
            assert!(log.contains(&comp) && log.contains("No such file"), "{log}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_log_and_an_image_base_rewrite_cover_cold_values() {
    the_log_and_its_rewrite_cover_cold_values(false);
}

#[test]
fn the_log_and_an_rdb_base_rewrite_cover_cold_values() {
    the_log_and_its_rewrite_cover_cold_values(true);
}

/// Each key's contents, comparable across servers and encodings: GET for strings,
/// HGETALL / SMEMBERS (sorted), ZRANGE WITHSCORES, LRANGE for collections.
fn contents(raw: &mut Raw, keys: &[Vec<u8>]) -> HashMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut out = HashMap::new();
    for k in keys {
        let cmd: Vec<&[u8]> = match k[0] {
            b'h' => vec![b"HGETALL", k],
            b's' if k != b"seq" => vec![b"SMEMBERS", k],
            b'z' => vec![b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"],
            b'l' => vec![b"LRANGE", k, b"0", b"-1"],
            _ => vec![b"GET", k],
        };
        raw.cmd(&cmd);
        let r = raw.reply();
        assert!(!r.starts_with(b"-"), "{}: {}", show(k), show(&r));
        let mut items = split_reply(&r);
        match k[0] {
            b'h' => {
                let mut pairs: Vec<Vec<u8>> = items.chunks(2).map(|c| c.concat()).collect();
                pairs.sort();
                items = pairs;
            }
            b's' if k != b"seq" => items.sort(),
            _ => {}
        }
        out.insert(k.clone(), items);
    }
    out
}

/// A bulk reply as one item, an array of bulks as its items (the raw bytes of each).
fn split_reply(r: &[u8]) -> Vec<Vec<u8>> {
    if r[0] != b'*' {
        return vec![r.to_vec()];
    }
    let mut items = Vec::new();
    let mut at = r.iter().position(|&c| c == b'\n').unwrap() + 1;
    while at < r.len() {
        let n = reply_len(&r[at..]).expect("a whole item");
        items.push(r[at..at + n].to_vec());
        at += n;
    }
    items
}

fn same_contents(raw: &mut Raw, want: &HashMap<Vec<u8>, Vec<Vec<u8>>>, who: &str) {
    let keys: Vec<Vec<u8>> = want.keys().cloned().collect();
    let got = contents(raw, &keys);
    let mut bad: Vec<String> = keys
        .iter()
        .filter(|k| got[*k] != want[*k])
        .map(|k| show(k))
        .collect();
    bad.sort();
    assert!(
        bad.is_empty(),
        "{who}: {} keys differ: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

/// redis-server 7 on `dir` loading `dump.rdb`: every key of `want` as it says (or, with
/// `or`, as either says: a change made while a live capture ran may be on either side
/// of its cut; a key missing from one means absent).
fn redis_loads_rdb(
    dir: &Path,
    want: &HashMap<Vec<u8>, Vec<Vec<u8>>>,
    or: Option<&HashMap<Vec<u8>, Vec<Vec<u8>>>>,
    who: &str,
) {
    let port = free_port();
    let mut child = std::process::Command::new(redis_server_path())
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--dbfilename", "dump.rdb"])
        .arg("--dir")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(&mut child, port).unwrap();
    let srv = Srv { child, port };
    let mut raw = Raw::connect(srv.port);
    wait_until(DEADLINE, "redis loads", || {
        !raw.call(&["PING"]).starts_with(b"-LOADING")
    });
    let Some(or) = or else {
        same_contents(&mut raw, want, who);
        assert_eq!(
            raw.call(&["DBSIZE"]),
            format!(":{}\r\n", want.len()).into_bytes(),
            "{who}"
        );
        drop(srv);
        return;
    };
    let mut keys: Vec<Vec<u8>> = want.keys().chain(or.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let got = contents(&mut raw, &keys);
    let absent = vec![b"$-1\r\n".to_vec()];
    let bad: Vec<String> = keys
        .iter()
        .filter(|k| {
            let g = &got[*k];
            g != want.get(*k).unwrap_or(&absent) && g != or.get(*k).unwrap_or(&absent)
        })
        .map(|k| show(k))
        .collect();
    assert!(
        bad.is_empty(),
        "{who}: {} keys differ: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
    drop(srv);
}

/// `snapshot-format rdb` with tiering: SAVE, BGSAVE (cold values deleted and
/// overwritten while its capture copies the tier file) and SHUTDOWN SAVE write an RDB
/// holding every value, cold ones included, that redis-server 7 loads; no capture or
/// companion is left behind.
#[test]
fn rdb_snapshots_of_a_tiered_server_hold_every_value() {
    let dir = temp_dir("tpersist-rdb");
    let mut args = tiered_args(&dir);
    args.extend(["--snapshot-format", "rdb"].iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut srv = start_on(&dir, &a, &[]);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 150);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let mut want = contents(&mut raw, &keys);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    assert_eq!(raw.call(&["SAVE"]), b"+OK\r\n");
    let leftovers = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tier-") || n.starts_with("temp-") || n.ends_with(".cimg"))
            .collect()
    };
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    redis_loads_rdb(&dir, &want, None, "SAVE");

    // BGSAVE: changes to cold keys while the capture copies the tier file slowly.
    let cold = cold_strings(&mut raw, 200, 100);
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "200000"]),
        b"+OK\r\n"
    );
    assert_eq!(raw.call(&["BGSAVE"]), b"+Background saving started\r\n");
    let at_cut = want.clone();
    let mut rng = Lcg(3);
    let mut changes = Vec::new();
    for (n, k) in cold.iter().enumerate() {
        if n % 2 == 0 {
            changes.push(vec![b"DEL".to_vec(), k.clone()]);
            want.remove(k);
        } else {
            let v = tier_value_of(n + 70_000, &mut rng);
            want.insert(k.clone(), vec![bulk(&v)]);
            changes.push(vec![b"SET".to_vec(), k.clone(), v]);
        }
    }
    run_all_making_room(&mut raw, &changes, b"", MAXMEMORY);
    // The conversion reads the same setting as a per-key delay.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    bgsave_done(&mut raw);
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    redis_loads_rdb(&dir, &at_cut, Some(&want), "BGSAVE");

    raw.cmd(&[b"SHUTDOWN", b"SAVE"]);
    assert!(raw.closed(), "SHUTDOWN SAVE closes the connection");
    let st = srv.child.wait().unwrap();
    assert!(st.success(), "{}", server_log(&dir));
    assert_eq!(leftovers(&dir), Vec::<String>::new());
    redis_loads_rdb(&dir, &want, None, "SHUTDOWN SAVE");
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG DIGEST and DIGEST-VALUE of a tiered server read the cold values (leaving them
/// cold) and equal redis-server 7's for the same data, TTLs included.
#[test]
fn digests_of_a_tiered_server_equal_redis_for_the_same_data() {
    let dir = temp_dir("tpersist-digest");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let redis = start_redis(&["--enable-debug-command", "yes"]);
    let mut rr = Raw::connect(redis.port);
    let mut cmds = dataset_cmds(8000, 150);
    // TTLs on some keys of each kind (on cold ones too: EXPIRE does not read them),
    // once every value is written (a write refused with -OOM is sent again later).
    let mut ttls = Vec::new();
    for i in (0..150).step_by(7) {
        for p in ["h", "s", "z", "l"] {
            ttls.push(vec![
                b"PEXPIREAT".to_vec(),
                format!("{p}{i}").into_bytes(),
                b"99999999999999".to_vec(),
            ]);
        }
    }
    for i in (0..8000).step_by(13) {
        ttls.push(vec![
            b"PEXPIREAT".to_vec(),
            format!("k{i}").into_bytes(),
            b"99999999999999".to_vec(),
        ]);
    }
    run_all_making_room(&mut raw, &cmds, b"", MAXMEMORY);
    run_all_making_room(&mut raw, &ttls, b":1", MAXMEMORY);
    cmds.extend(ttls);
    for chunk in cmds.chunks(200) {
        let mut buf = Vec::new();
        for c in chunk {
            let parts: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            buf.extend_from_slice(&encode(&parts));
        }
        rr.send(&buf);
        for _ in chunk {
            let r = rr.reply();
            assert!(!r.starts_with(b"-"), "{}", show(&r));
        }
    }
    wait_until(DEADLINE, "many values are cold", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let cold_colls: Vec<String> = (0..150)
        .flat_map(|i| ["h", "s", "z", "l"].map(|p| format!("{p}{i}")))
        .filter(|k| state(&mut raw, k.as_bytes()) == "cold")
        .take(20)
        .collect();
    let cold_strings: Vec<String> = (0..8000)
        .map(|i| format!("k{i}"))
        .filter(|k| state(&mut raw, k.as_bytes()) == "cold")
        .take(20)
        .collect();
    assert!(
        cold_colls.len() >= 5 && cold_strings.len() >= 5,
        "{} cold collections, {} cold strings",
        cold_colls.len(),
        cold_strings.len()
    );
    let cold_before = raw.info_u64("tiered", "tiered_entries");
    let digest = raw.call(&["DEBUG", "DIGEST"]);
    assert!(digest.starts_with(b"+"), "{}", show(&digest));
    assert_ne!(digest, b"+0000000000000000000000000000000000000000\r\n");
    assert_eq!(show(&digest), show(&rr.call(&["DEBUG", "DIGEST"])));
    let mut args = vec!["DEBUG", "DIGEST-VALUE"];
    args.extend(cold_colls.iter().chain(&cold_strings).map(String::as_str));
    args.push("missing");
    let values = raw.call(&args);
    assert!(values.starts_with(b"*"), "{}", show(&values));
    assert_eq!(show(&values), show(&rr.call(&args)));
    // The values read for the digests stay on disk.
    for k in cold_colls.iter().chain(&cold_strings) {
        assert_eq!(state(&mut raw, k.as_bytes()), "cold", "{k}");
    }
    assert!(raw.info_u64("tiered", "tiered_entries") + 100 >= cold_before);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// DEBUG RELOAD with tiering: the image saved and loaded back, cold values still cold
/// (their records where they were) and byte-exact, the digest unchanged; the tier file
/// goes on working (deletes free pages, new values are stashed and read back). The
/// forms that would break that are refused.
#[test]
fn debug_reload_keeps_cold_values_cold_and_byte_exact() {
    let dir = temp_dir("tpersist-reload");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 150);
    let mut want = values(&mut raw, &keys);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let digest = raw.call(&["DEBUG", "DIGEST"]);
    let cold = raw.info_u64("tiered", "tiered_entries");
    let victims: Vec<String> = (0..8000)
        .map(|i| format!("k{i}"))
        .filter(|k| state(&mut raw, k.as_bytes()) == "cold")
        .take(300)
        .collect();
    for bad in [
        &["DEBUG", "RELOAD", "NOSAVE"][..],
        &["DEBUG", "RELOAD", "NOFLUSH"][..],
    ] {
        let r = show(&raw.call(bad));
        assert!(
            r.contains("not supported while tiering is on"),
            "{bad:?}: {r}"
        );
    }
    assert_eq!(raw.call(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    // Every cold value is still cold (none was read to reload). At least as many as
    // before: the offload pass goes on meanwhile and may have sent more to the file.
    assert!(raw.info_u64("tiered", "tiered_entries") >= cold);
    for k in &victims {
        assert_eq!(state(&mut raw, k.as_bytes()), "cold", "{k}");
    }
    assert_eq!(show(&raw.call(&["DEBUG", "DIGEST"])), show(&digest));
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    // The tier file keeps working: cold values deleted and overwritten, new ones
    // stashed into the freed pages, all read back.
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let mut rng = Lcg(21);
    let mut cmds = Vec::new();
    for (n, k) in victims.iter().enumerate() {
        let k = k.as_bytes().to_vec();
        if n % 2 == 0 {
            cmds.push(vec![b"DEL".to_vec(), k.clone()]);
            want.insert(k, b"$-1\r\n".to_vec());
        } else {
            let v = tier_value_of(n + 30_000, &mut rng);
            want.insert(k.clone(), bulk(&v));
            cmds.push(vec![b"SET".to_vec(), k, v]);
        }
    }
    for i in 0..2000 {
        let k = format!("m{i}").into_bytes();
        let v = tier_value_of(i + 40_000, &mut rng);
        want.insert(k.clone(), bulk(&v));
        cmds.push(vec![b"SET".to_vec(), k, v]);
    }
    let stashes = raw.info_u64("tiered", "tiered_stashes");
    run_all_making_room(&mut raw, &cmds, b"", MAXMEMORY);
    wait_until(DEADLINE, "the new values are stashed", || {
        raw.info_u64("tiered", "tiered_stashes") > stashes + 1000
    });
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    // And a second reload after all that.
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let digest = raw.call(&["DEBUG", "DIGEST"]);
    assert_eq!(raw.call(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(show(&raw.call(&["DEBUG", "DIGEST"])), show(&digest));
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    assert_eq!(
        raw.call(&["CONFIG", "SET", "snapshot-format", "rdb"]),
        b"+OK\r\n"
    );
    let r = show(&raw.call(&["DEBUG", "RELOAD"]));
    assert!(r.contains("not supported while tiering is on"), "{r}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits until the replica on `r` has applied the whole stream of the primary on `p`.
fn wait_replica(p: &mut Raw, r: &mut Raw, who: &str) {
    wait_until(DEADLINE, &format!("{who} catches up"), || {
        r.info("replication", "master_link_status").as_deref() == Some("up")
            && r.info("replication", "slave_repl_offset")
                == p.info("replication", "master_repl_offset")
    });
}

/// A tiered primary's full sync holds its cold values (an RDB converted with the
/// capture's companion; cold values changed while the capture copies the tier file):
/// a redis-server 7 replica and a cairn replica end with the primary's digest and every
/// key byte-exact, the stream after the cut included.
#[test]
fn replicas_of_a_tiered_primary_get_every_cold_value() {
    let dir = temp_dir("tpersist-repl");
    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    let keys = fill(&mut raw, 8000, 150);
    let mut want = contents(&mut raw, &keys);
    wait_until(DEADLINE, "values go cold again after being read", || {
        raw.info_u64("tiered", "tiered_entries") > 4000
    });
    let cold = cold_strings(&mut raw, 200, 100);
    // A slow copy of the tier file (0.5 s a MiB), so the changes below (cold values
    // deleted and overwritten, new values stashed into the freed pages, were they
    // reused) land while the first sync's capture copies it.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "500000"]),
        b"+OK\r\n"
    );
    let port = srv.port.to_string();
    let redis = start_redis(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--enable-debug-command",
        "yes",
    ]);
    wait_until(DEADLINE, "the redis replica asks for a sync", || {
        raw.info_u64("replication", "connected_slaves") >= 1
    });
    let mut rng = Lcg(17);
    let mut changes = Vec::new();
    for (n, k) in cold.iter().enumerate() {
        if n % 2 == 0 {
            changes.push(vec![b"DEL".to_vec(), k.clone()]);
            want.remove(k);
        } else {
            let v = tier_value_of(n + 80_000, &mut rng);
            want.insert(k.clone(), vec![bulk(&v)]);
            changes.push(vec![b"SET".to_vec(), k.clone(), v]);
        }
    }
    for i in 0..1500 {
        let k = format!("n{i}").into_bytes();
        let v = tier_value_of(i * 10 + 1, &mut rng);
        want.insert(k.clone(), vec![bulk(&v)]);
        changes.push(vec![b"SET".to_vec(), k, v]);
    }
    let stashes = raw.info_u64("tiered", "tiered_stashes");
    run_all_making_room(&mut raw, &changes, b"", MAXMEMORY);
    wait_until(DEADLINE, "the new values are stashed", || {
        raw.info_u64("tiered", "tiered_stashes") > stashes + 300
    });
    assert_eq!(
        raw.call(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    // A cairn replica (its own capture, after the changes).
    let rdir = temp_dir("tpersist-repl-cairn");
    let replica = start_on(
        &rdir,
        &[
            "--save",
            "",
            "--enable-debug-command",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
        &[],
    );
    let mut rr = Raw::connect(redis.port);
    let mut rc = Raw::connect(replica.port);
    wait_replica(&mut raw, &mut rr, "the redis replica");
    wait_replica(&mut raw, &mut rc, "the cairn replica");
    // One full sync each: none failed and was retried.
    assert_eq!(
        raw.info_u64("stats", "sync_full"),
        2,
        "{}",
        server_log(&dir)
    );
    let digest = show(&raw.call(&["DEBUG", "DIGEST"]));
    assert_eq!(
        show(&rr.call(&["DEBUG", "DIGEST"])),
        digest,
        "redis replica"
    );
    assert_eq!(
        show(&rc.call(&["DEBUG", "DIGEST"])),
        digest,
        "cairn replica"
    );
    same_contents(&mut rr, &want, "redis replica");
    same_contents(&mut rc, &want, "cairn replica");
    assert_eq!(
        rr.call(&["DBSIZE"]),
        format!(":{}\r\n", want.len()).into_bytes()
    );
    // No capture or companion left in the primary's directory.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("temp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    drop(replica);
    drop(redis);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&rdir);
}
