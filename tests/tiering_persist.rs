//! Snapshots of a tiered server (`tiered-prefix`): BGSAVE, SAVE and SHUTDOWN SAVE write
//! the image and its tier companion file; a restart with tiering serves the cold values
//! from the restored tier file, one without tiering reads them all into memory; every
//! value is the one it had at the cut. A companion that is missing, truncated, from
//! another snapshot, damaged, or shorter than the image's records is refused by name.

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

/// Each key's value as a reply: GET for strings (`k<i>`, `n<i>`, `seq`), DUMP (the
/// serialized bytes) for collections; `$-1` for a missing key. Pipelined.
fn values(raw: &mut Raw, keys: &[Vec<u8>]) -> HashMap<Vec<u8>, Vec<u8>> {
    let mut out = HashMap::new();
    for chunk in keys.chunks(200) {
        let mut buf = Vec::new();
        for k in chunk {
            let cmd: &[u8] = if matches!(k[0], b'k' | b'n') || k == b"seq" {
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
    let cold: Vec<Vec<u8>> = (0..8000)
        .rev()
        .map(|i| format!("k{i}").into_bytes())
        .filter(|k| state(&mut raw, k) == "cold")
        .take(600)
        .collect();
    assert!(cold.len() >= 400, "only {} cold strings", cold.len());
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

    let srv = start_tiered(&dir);
    let mut raw = Raw::connect(srv.port);
    assert!(raw.info_u64("tiered", "tiered_entries") > 1000);
    check(&mut raw, &want);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);
    let srv = start_plain(&dir);
    let mut raw = Raw::connect(srv.port);
    check(&mut raw, &want);
    drop(srv);
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
