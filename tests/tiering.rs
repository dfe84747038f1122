//! SSD tiering (`tiered-prefix`): datasets larger than `maxmemory` served byte-exact
//! from RAM and the tier file, clients parked while their values are read, cold values
//! deleted and overwritten without I/O, damaged pages reported by key, a full tier file,
//! and what tiering refuses because it does not cover tiered values yet.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

const MAXMEMORY: u64 = 4 << 20;
/// What `used_memory` may exceed `maxmemory` by: the values brought back in one loop
/// turn before the offload step drops them again (the tests read at most a few hundred
/// KiB per turn).
const OVERHEAD_BYTES: u64 = 1 << 20;

fn start_tiered(dir: &Path, extra: &[&str]) -> Srv {
    let prefix = dir.join("tier").display().to_string();
    let mut args = vec![
        "--save",
        "",
        "--maxmemory",
        "4mb",
        "--enable-debug-command",
        "yes",
        "--tiered-prefix",
    ];
    let prefix: &'static str = Box::leak(prefix.into_boxed_str());
    args.push(prefix);
    args.extend_from_slice(extra);
    start_on(dir, &args, &[])
}

/// Deterministic distinct values of varied lengths (small ones share pages, 6000+ byte
/// ones take pages of their own).
fn value_of(i: usize, rng: &mut Lcg) -> Vec<u8> {
    let len = match i % 10 {
        0 => 100 + rng.below(200) as usize,
        1 => 6000 + rng.below(3000) as usize,
        _ => 700 + rng.below(600) as usize,
    };
    let mut v: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

/// Loads `values` under `k<i>`, pipelined in batches; a write refused with -OOM (the
/// disk has not caught up) is sent again once memory went down.
fn load(raw: &mut Raw, values: &[Vec<u8>]) {
    let mut pending: Vec<usize> = (0..values.len()).collect();
    let mut rounds = 0;
    while !pending.is_empty() {
        rounds += 1;
        assert!(rounds < 2000, "the tier never made room");
        let mut refused = Vec::new();
        for chunk in pending.chunks(100) {
            let mut buf = Vec::new();
            for &i in chunk {
                let k = format!("k{i}");
                buf.extend_from_slice(&encode(&[b"SET", k.as_bytes(), &values[i]]));
            }
            raw.send(&buf);
            for &i in chunk {
                let r = raw.reply();
                if r.starts_with(b"-OOM") {
                    refused.push(i);
                } else {
                    assert_eq!(r, b"+OK\r\n", "SET k{i}: {}", show(&r));
                }
            }
            if !refused.is_empty() {
                break;
            }
        }
        let done = pending.len();
        if refused.is_empty() {
            break;
        }
        // Everything after the first refused batch goes again.
        let first = refused[0];
        let at = pending.iter().position(|&i| i == first).unwrap();
        pending = pending[at..].to_vec();
        assert!(pending.len() <= done);
        wait_until(DEADLINE, "memory goes below maxmemory again", || {
            used_memory(raw) + 64 * 1024 < MAXMEMORY
        });
    }
}

fn check_all(raw: &mut Raw, values: &[Vec<u8>]) {
    for (c, chunk) in values.chunks(200).enumerate() {
        let mut buf = Vec::new();
        for i in 0..chunk.len() {
            let k = format!("k{}", c * 200 + i);
            buf.extend_from_slice(&encode(&[b"GET", k.as_bytes()]));
        }
        raw.send(&buf);
        for (i, v) in chunk.iter().enumerate() {
            let r = raw.reply();
            assert_eq!(r, bulk(v), "k{} differs", c * 200 + i);
        }
        let used = used_memory(raw);
        assert!(
            used <= MAXMEMORY + OVERHEAD_BYTES,
            "used_memory {used} above maxmemory + {OVERHEAD_BYTES}"
        );
    }
}

fn call_b(raw: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    raw.cmd(args);
    raw.reply()
}

fn state(raw: &mut Raw, key: &str) -> String {
    String::from_utf8_lossy(&raw.call(&["DEBUG", "TIERED-STATE", key]))
        .trim()
        .trim_start_matches('+')
        .to_string()
}

/// Keys among `k0..k<n>` that are cold now.
fn cold_keys(raw: &mut Raw, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("k{i}"))
        .filter(|k| state(raw, k) == "cold")
        .collect()
}

fn dataset(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Lcg(seed);
    (0..n).map(|i| value_of(i, &mut rng)).collect()
}

#[test]
fn a_dataset_three_times_memory_reads_back_byte_exact() {
    let dir = temp_dir("tiering-big");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    // ~13 MiB of values for 4 MiB of maxmemory.
    let values = dataset(8000, 7);
    load(&mut raw, &values);
    assert_eq!(raw.call(&["DBSIZE"]), b":8000\r\n");
    assert!(raw.info_u64("tiered", "tiered_entries") > 4000);
    assert!(used_memory(&mut raw) <= MAXMEMORY + OVERHEAD_BYTES);
    check_all(&mut raw, &values);
    assert!(
        raw.info_u64("tiered", "tiered_misses") > 1000,
        "reads came from disk"
    );
    assert!(raw.info_u64("tiered", "tiered_uploads") > 1000);
    // And again, now that the first reading moved values around.
    check_all(&mut raw, &values);
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_waiting_client_keeps_its_reply_order_while_others_are_served() {
    let dir = temp_dir("tiering-wait");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(5000, 11);
    load(&mut raw, &values);
    let cold = cold_keys(&mut raw, 400);
    assert!(cold.len() >= 20, "only {} cold keys", cold.len());
    let idx = |k: &str| k[1..].parse::<usize>().unwrap();
    // Reads held in the I/O thread: the pipelined client must wait, with its replies
    // (and the commands after its cold GET) in order.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "1"]), b"+OK\r\n");
    let mut a = Raw::connect(srv.port);
    let mut pipe = Vec::new();
    let mut expected = Vec::new();
    for (n, k) in cold.iter().take(10).enumerate() {
        pipe.extend_from_slice(&encode(&[b"GET", k.as_bytes()]));
        expected.push(bulk(&values[idx(k)]));
        let mark = format!("m{n}");
        pipe.extend_from_slice(&encode(&[b"SET", b"marker", mark.as_bytes()]));
        expected.push(b"+OK\r\n".to_vec());
        pipe.extend_from_slice(&encode(&[b"GET", b"marker"]));
        expected.push(bulk(mark.as_bytes()));
    }
    a.send(&pipe);
    // The first GET waits: its SET marker has not run, while another client is served.
    let mut b = Raw::connect(srv.port);
    wait_until(DEADLINE, "the read is pending", || {
        b.info_u64("tiered", "tiered_pending_read_cnt") >= 1
    });
    assert_eq!(b.call(&["GET", "marker"]), b"$-1\r\n");
    assert_eq!(b.call(&["SET", "other", "x"]), b"+OK\r\n");
    assert_eq!(b.call(&["GET", "other"]), b"$1\r\nx\r\n");
    assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
    // A second reader of the same cold value shares the read.
    let shared_before = b.info_u64("tiered", "tiered_reads_shared");
    let mut c = Raw::connect(srv.port);
    c.cmd(&[b"GET", cold[0].as_bytes()]);
    wait_until(DEADLINE, "the second reader joins the read", || {
        b.info_u64("tiered", "tiered_reads_shared") > shared_before
    });
    assert_eq!(b.call(&["DEBUG", "TIERED-HOLD-READS", "0"]), b"+OK\r\n");
    for (n, e) in expected.iter().enumerate() {
        assert_eq!(&a.reply(), e, "reply {n}");
    }
    assert_eq!(c.reply(), bulk(&values[idx(&cold[0])]));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cold_values_are_deleted_and_overwritten_without_reading_them() {
    let dir = temp_dir("tiering-del");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(5000, 13);
    load(&mut raw, &values);
    let cold = cold_keys(&mut raw, 600);
    assert!(cold.len() >= 30, "only {} cold keys", cold.len());
    let reads = raw.info_u64("tiered", "tiered_reads");
    for k in &cold[..10] {
        assert_eq!(raw.call(&["EXISTS", k]), b":1\r\n");
        assert_eq!(raw.call(&["TYPE", k]), b"+string\r\n");
        assert_eq!(raw.call(&["TTL", k]), b":-1\r\n");
        assert_eq!(raw.call(&["DEL", k]), b":1\r\n");
    }
    for k in &cold[10..20] {
        assert_eq!(raw.call(&["SET", k, "new"]), b"+OK\r\n");
    }
    assert_eq!(raw.call(&["UNLINK", &cold[20], &cold[21]]), b":2\r\n");
    assert_eq!(
        raw.info_u64("tiered", "tiered_reads"),
        reads,
        "no read for DEL / UNLINK / EXISTS / TYPE / TTL / SET"
    );
    for k in &cold[..10] {
        assert_eq!(raw.call(&["GET", k]), b"$-1\r\n");
    }
    for k in &cold[10..20] {
        assert_eq!(raw.call(&["GET", k]), b"$3\r\nnew\r\n");
    }
    // A cold key deleted while a client waits for its value: the command runs on what
    // is there then.
    let k = &cold[25];
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "1"]), b"+OK\r\n");
    let mut a = Raw::connect(srv.port);
    a.cmd(&[b"GET", k.as_bytes()]);
    wait_until(DEADLINE, "the read is pending", || {
        raw.info_u64("tiered", "tiered_pending_read_cnt") >= 1
    });
    assert_eq!(raw.call(&["DEL", k]), b":1\r\n");
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "0"]), b"+OK\r\n");
    assert_eq!(a.reply(), b"$-1\r\n");
    // Expiry of cold values, lazy and active: gone without a read.
    let reads = raw.info_u64("tiered", "tiered_reads");
    let dbsize = |raw: &mut Raw| -> u64 {
        let r = show(&raw.call(&["DBSIZE"]));
        r.trim().trim_start_matches(':').parse().unwrap()
    };
    let before = dbsize(&mut raw);
    assert_eq!(raw.call(&["PEXPIRE", &cold[26], "1"]), b":1\r\n");
    assert_eq!(raw.call(&["PEXPIRE", &cold[27], "1"]), b":1\r\n");
    assert_eq!(raw.call(&["PEXPIRE", &cold[28], "100000"]), b":1\r\n");
    assert_eq!(raw.call(&["PERSIST", &cold[28]]), b":1\r\n");
    assert_eq!(state(&mut raw, &cold[28]), "cold");
    wait_until(DEADLINE, "active expiry removed both", || {
        dbsize(&mut raw) == before - 2
    });
    assert_eq!(
        raw.info_u64("tiered", "tiered_reads"),
        reads,
        "expiry read nothing"
    );
    // Every other value is intact.
    let gone: std::collections::HashSet<usize> =
        cold[..28].iter().map(|k| k[1..].parse().unwrap()).collect();
    for (i, v) in values.iter().enumerate().take(600) {
        if !gone.contains(&i) {
            assert_eq!(raw.call(&["GET", &format!("k{i}")]), bulk(v), "k{i}");
        }
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_page_fails_the_read_naming_the_key_and_the_server_goes_on() {
    let dir = temp_dir("tiering-crc");
    let srv = start_tiered(&dir, &["--tiered-max-file-size", "32mb"]);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(5000, 17);
    load(&mut raw, &values);
    let cold = cold_keys(&mut raw, 200);
    assert!(!cold.is_empty());
    // Flip a byte in every page written so far (a zero page was never written).
    let path = dir.join("tier-0000.ssd");
    let mut file = std::fs::read(&path).unwrap();
    for page in file.chunks_mut(4096) {
        if page.iter().any(|&b| b != 0) {
            page[4095] ^= 0x5a;
        }
    }
    std::fs::write(&path, &file).unwrap();
    let k = &cold[0];
    let r = String::from_utf8_lossy(&raw.call(&["GET", k])).into_owned();
    assert!(
        r.starts_with("-ERR tiered read of key '")
            && r.contains(k.as_str())
            && r.contains("checksum mismatch"),
        "{r}"
    );
    assert!(raw.info_u64("tiered", "tiered_read_errors") >= 1);
    assert!(server_log(&dir).contains(&format!("Tiered read of key '{k}' failed")));
    // Every other client and key is served; the key stays (its bytes are not lost from
    // the keyspace's view: a later read fails the same way).
    let mut b = Raw::connect(srv.port);
    assert_eq!(b.call(&["SET", "fresh", "v"]), b"+OK\r\n");
    assert_eq!(b.call(&["GET", "fresh"]), b"$1\r\nv\r\n");
    assert_eq!(b.call(&["EXISTS", k]), b":1\r\n");
    assert!(b.call(&["GET", k]).starts_with(b"-ERR tiered read"));
    // A MULTI whose EXEC needs the damaged value fails as a whole and ends.
    assert_eq!(b.call(&["MULTI"]), b"+OK\r\n");
    assert_eq!(b.call(&["GET", k]), b"+QUEUED\r\n");
    assert!(b.call(&["EXEC"]).starts_with(b"-ERR tiered read"));
    assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_tier_file_keeps_values_in_memory() {
    let dir = temp_dir("tiering-full");
    let srv = start_tiered(&dir, &["--tiered-max-file-size", "1mb"]);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(6000, 19);
    let mut stored = 0usize;
    // Writes stop with -OOM once memory and the file are both full; everything
    // acknowledged before reads back.
    for (i, v) in values.iter().enumerate() {
        let k = format!("k{i}");
        let r = call_b(&mut raw, &[b"SET", k.as_bytes(), v]);
        if r.starts_with(b"-OOM") {
            // The disk may catch up; if it does not within seconds, both are full.
            let took = poll_until(Duration::from_secs(5), || {
                call_b(&mut raw, &[b"SET", k.as_bytes(), v]) == b"+OK\r\n"
            });
            if !took {
                break;
            }
        } else {
            assert_eq!(r, b"+OK\r\n", "k{i}: {}", show(&r));
        }
        stored = i + 1;
    }
    assert!(stored < values.len(), "the file and memory never filled");
    assert!(raw.info_u64("tiered", "tiered_stash_no_space") > 0);
    let cap = raw.info_u64("tiered", "tiered_capacity_bytes");
    assert!(raw.info_u64("tiered", "tiered_allocated_bytes") <= cap);
    for (i, v) in values.iter().enumerate().take(stored) {
        assert_eq!(raw.call(&["GET", &format!("k{i}")]), bulk(v), "k{i}");
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_tiering_does_not_cover_is_refused() {
    let dir = temp_dir("tiering-refuse");
    let prefix = dir.join("tier").display().to_string();
    // Startup: save points, the AOF, maxmemory 0.
    for (args, what) in [
        (vec!["--maxmemory", "4mb"], "save points"),
        (
            vec!["--save", "", "--maxmemory", "4mb", "--appendonly", "yes"],
            "appendonly yes",
        ),
        (vec!["--save", ""], "maxmemory 0"),
    ] {
        let mut a = args.clone();
        a.extend_from_slice(&["--port", "0", "--tiered-prefix", &prefix]);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
            .args(&a)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{what}: started");
        assert!(
            e.contains(what) && e.contains("tiered-prefix"),
            "{what}: {e}"
        );
    }
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    for cmd in [
        vec!["BGSAVE"],
        vec!["SAVE"],
        vec!["BGREWRITEAOF"],
        vec!["DEBUG", "RELOAD"],
        vec!["DEBUG", "DIGEST"],
        vec!["REPLICAOF", "127.0.0.1", "1"],
        vec!["SHUTDOWN", "SAVE"],
    ] {
        let r = String::from_utf8_lossy(&raw.call(&cmd)).into_owned();
        assert!(
            r.contains("not supported while tiering is on"),
            "{cmd:?}: {r}"
        );
    }
    for (name, value) in [("appendonly", "yes"), ("save", "60 1"), ("maxmemory", "0")] {
        let r = String::from_utf8_lossy(&raw.call(&["CONFIG", "SET", name, value])).into_owned();
        assert!(r.contains("tiered-prefix is set"), "{name}: {r}");
    }
    let r = raw.call(&["CONFIG", "SET", "tiered-offload-threshold", "1.5"]);
    assert!(r.starts_with(b"-ERR"), "{}", show(&r));
    assert_eq!(
        raw.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.25"]),
        b"+OK\r\n"
    );
    assert_eq!(raw.call(&["PING"]), b"+PONG\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn string_commands_on_cold_values_answer_as_redis_does() {
    let dir = temp_dir("tiering-cmds");
    // Every string is tiered, small numbers included.
    let srv = start_tiered(&dir, &["--tiered-min-value-size", "1"]);
    let redis = start_redis(&[]);
    let mut rc = Raw::connect(srv.port);
    let mut rr = Raw::connect(redis.port);
    let mut nums = Vec::new();
    for i in 0..40 {
        let n = format!("{}", 1000 + i * 37);
        rr.cmd(&[b"SET", format!("n{i}").as_bytes(), n.as_bytes()]);
        assert_eq!(rr.reply(), b"+OK\r\n");
        nums.push(n.into_bytes());
    }
    let values = dataset(5000, 23);
    for (i, v) in values.iter().enumerate() {
        rr.cmd(&[b"SET", format!("k{i}").as_bytes(), v]);
        assert_eq!(rr.reply(), b"+OK\r\n");
    }
    // The numbers first (the oldest go cold first), under their own names.
    {
        let mut buf = Vec::new();
        for (i, n) in nums.iter().enumerate() {
            buf.extend_from_slice(&encode(&[b"SET", format!("n{i}").as_bytes(), n]));
        }
        rc.send(&buf);
        for _ in &nums {
            assert_eq!(rc.reply(), b"+OK\r\n");
        }
    }
    load(&mut rc, &values);
    let mut cold = cold_keys(&mut rc, 1500).into_iter();
    let cold_nums: Vec<String> = (0..40)
        .map(|i| format!("n{i}"))
        .filter(|k| state(&mut rc, k) == "cold")
        .collect();
    assert!(
        cold_nums.len() >= 5,
        "only {} cold numbers",
        cold_nums.len()
    );
    let mut cold_nums = cold_nums.into_iter();
    let mut next = |rc: &mut Raw| -> String {
        let k = cold.next().expect("enough cold keys");
        assert_eq!(state(rc, &k), "cold");
        k
    };
    // One fresh cold key per command (many of them change it), checked to be cold.
    let cmds: Vec<Vec<String>> = {
        let mut v: Vec<Vec<String>> = Vec::new();
        let mut add = |parts: &[&str]| v.push(parts.iter().map(|s| s.to_string()).collect());
        let templates: &[&[&str]] = &[
            &["GET", "@"],
            &["STRLEN", "@"],
            &["GETRANGE", "@", "5", "40"],
            &["APPEND", "@", "tail"],
            &["SETRANGE", "@", "3", "xyz"],
            &["GETSET", "@", "new"],
            &["SET", "@", "v", "GET"],
            &["GETDEL", "@"],
            &["GETEX", "@", "PERSIST"],
            &["MGET", "@", "@", "missing"],
            &["COPY", "@", "copied"],
            &["RENAME", "@", "renamed"],
            &["LCS", "@", "@", "LEN"],
            &["BITCOUNT", "@"],
            &["BITPOS", "@", "1"],
            &["GETBIT", "@", "100"],
            &["SETBIT", "@", "7", "1"],
            &["BITOP", "AND", "anded", "@", "@"],
            &["SETNX", "@", "x"],
            &["SET", "@", "x", "NX"],
            &["SET", "@", "x", "XX"],
            &["EXPIRE", "@", "1000"],
            &["OBJECT", "ENCODING", "@"],
            &["DUMP", "@"],
            &["PFCOUNT", "@"],
            &["EVAL", "return redis.call('GET', KEYS[1])", "1", "@"],
            &["EVAL", "return redis.call('GET', ARGV[1])", "0", "@"],
            &[
                "EVAL",
                "return redis.call('APPEND', ARGV[1], 'z')",
                "0",
                "@",
            ],
        ];
        for t in templates {
            let parts: Vec<String> = t
                .iter()
                .map(|p| {
                    if *p == "@" {
                        next(&mut rc)
                    } else {
                        p.to_string()
                    }
                })
                .collect();
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            add(&refs);
            // Then what the command left behind.
            for p in &parts {
                if p.starts_with('k') {
                    add(&["GET", p]);
                }
            }
        }
        for t in [
            &["INCR", "@"][..],
            &["INCRBY", "@", "5"],
            &["DECR", "@"],
            &["INCRBYFLOAT", "@", "1.5"],
        ] {
            let k = cold_nums.next().expect("cold number");
            let parts: Vec<String> = t
                .iter()
                .map(|p| if *p == "@" { k.clone() } else { p.to_string() })
                .collect();
            let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
            add(&refs);
            add(&["GET", &k]);
        }
        for k in ["copied", "renamed", "anded"] {
            add(&["GET", k]);
        }
        v
    };
    for c in &cmds {
        let refs: Vec<&str> = c.iter().map(String::as_str).collect();
        same_str(&mut rc, &mut rr, &refs);
    }
    // A transaction and SORT's GET patterns over cold values.
    let (a, b) = (next(&mut rc), next(&mut rc));
    same_str(&mut rc, &mut rr, &["MULTI"]);
    same_str(&mut rc, &mut rr, &["GET", &a]);
    same_str(&mut rc, &mut rr, &["APPEND", &b, "x"]);
    same_str(&mut rc, &mut rr, &["EXEC"]);
    let (x, y) = (next(&mut rc), next(&mut rc));
    same_str(&mut rc, &mut rr, &["RPUSH", "l", &x[1..], &y[1..]]);
    same_str(
        &mut rc,
        &mut rr,
        &["SORT", "l", "BY", "nosort", "GET", "k*"],
    );
    // Everything else still reads the same.
    for i in 0..1500 {
        same_str(&mut rc, &mut rr, &["GET", &format!("k{i}")]);
    }
    assert!(
        rc.info_u64("tiered", "tiered_sync_reads") > 0,
        "the fallback ran"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_errors_keep_values_and_name_the_key() {
    let dir = temp_dir("tiering-eio");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    // The first writes fail as a full device answers: those values stay in memory and
    // are written again later.
    assert_eq!(raw.call(&["DEBUG", "TIERED-FAIL", "0", "20"]), b"+OK\r\n");
    let values = dataset(5000, 29);
    load(&mut raw, &values);
    assert!(raw.info_u64("tiered", "tiered_stash_errors") >= 1);
    assert!(server_log(&dir).contains("No space left on device"));
    // A read the device fails (EIO): that command gets an error naming the key, the
    // value stays on disk and the next read returns it.
    let cold = cold_keys(&mut raw, 300);
    let k = &cold[0];
    assert_eq!(raw.call(&["DEBUG", "TIERED-FAIL", "1", "0"]), b"+OK\r\n");
    let r = show(&raw.call(&["GET", k]));
    assert!(
        r.starts_with(&format!("-ERR tiered read of key '{k}' failed: "))
            && r.contains("os error 5"),
        "{r}"
    );
    assert_eq!(state(&mut raw, k), "cold");
    let i: usize = k[1..].parse().unwrap();
    assert_eq!(raw.call(&["GET", k]), bulk(&values[i]));
    assert!(raw.info_u64("tiered", "tiered_read_errors") >= 1);
    check_all(&mut raw, &values);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flush_gives_the_whole_file_back() {
    let dir = temp_dir("tiering-flush");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(5000, 31);
    load(&mut raw, &values);
    assert!(raw.info_u64("tiered", "tiered_entries") > 1000);
    assert!(raw.info_u64("tiered", "tiered_allocated_bytes") > 0);
    assert_eq!(raw.call(&["FLUSHALL"]), b"+OK\r\n");
    // Cold values, cooled copies and writes in flight all give their pages back.
    wait_until(DEADLINE, "the tier file is empty again", || {
        raw.info_u64("tiered", "tiered_allocated_bytes") == 0
    });
    assert_eq!(raw.info_u64("tiered", "tiered_entries"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_entries_bytes"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_cooled_entries"), 0);
    // And it serves a new dataset.
    let values = dataset(3000, 37);
    load(&mut raw, &values);
    check_all(&mut raw, &values);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
