//! SSD tiering (`tiered-prefix`): datasets larger than `maxmemory` served byte-exact
//! from RAM and the tier file, clients parked while their values are read, cold values
//! deleted and overwritten without I/O, damaged pages reported by key, a full tier file,
//! and what tiering refuses because it does not cover tiered values yet (snapshots, RDB
//! snapshots and the AOF: tests/tiering_persist.rs).

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

/// Loads `values` under `k<i>`, pipelined in batches; a write refused with -OOM (the
/// disk has not caught up) is sent again once memory went down.
fn load(raw: &mut Raw, values: &[Vec<u8>]) {
    let cmds: Vec<Vec<Vec<u8>>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| vec![b"SET".to_vec(), format!("k{i}").into_bytes(), v.clone()])
        .collect();
    run_all_making_room(raw, &cmds, b"+OK", MAXMEMORY);
}

/// A tiered server in `temp_dir(name)` (with `extra` options) loaded with
/// `dataset(n, seed)` under `k<i>`.
fn loaded(
    name: &str,
    extra: &[&str],
    n: usize,
    seed: u64,
) -> (std::path::PathBuf, Srv, Raw, Vec<Vec<u8>>) {
    let dir = temp_dir(name);
    let srv = start_tiered(&dir, extra);
    let mut raw = Raw::connect(srv.port);
    let values = dataset(n, seed);
    load(&mut raw, &values);
    (dir, srv, raw, values)
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
    (0..n).map(|i| tier_value_of(i, &mut rng)).collect()
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

/// The pass and the sweep run from a loop turn only when it wrote: a read (even one
/// that brings a cold value back) leaves no value for the pass to stash, and a server
/// serving one GET per turn would otherwise scan buckets on every GET. Writes still
/// step the pass and memory stays under the limit. Each cold read's timeline is counted.
#[test]
fn only_turns_that_write_step_the_pass_and_cold_reads_are_timed() {
    let (dir, srv, mut raw, values) = loaded("tiering-turn-steps", &[], 8000, 11);
    // The offload line at the default `tiered-offload-threshold` (0.5).
    let line = MAXMEMORY as f64 * 0.5;
    assert!(
        used_memory(&mut raw) as f64 > line * 0.75,
        "memory above the stash line after the load"
    );
    let steps = raw.info_u64("tiered", "tiered_pass_turn_steps");
    assert!(steps > 0, "the load's turns stepped the pass");
    let misses = raw.info_u64("tiered", "tiered_misses");
    // One GET per loop turn, hot and cold ones alike.
    for i in (0..values.len()).step_by(20) {
        let k = format!("k{i}");
        assert_eq!(call_b(&mut raw, &[b"GET", k.as_bytes()]), bulk(&values[i]));
    }
    assert!(
        raw.info_u64("tiered", "tiered_misses") > misses + 100,
        "most of the GETs read from disk"
    );
    assert_eq!(
        raw.info_u64("tiered", "tiered_pass_turn_steps"),
        steps,
        "a turn that only read stepped the pass"
    );
    assert!(used_memory(&mut raw) <= MAXMEMORY + OVERHEAD_BYTES);
    // Every read that ended has its timeline, and each parked client ran again.
    let timed = raw.info_u64("tiered", "tiered_read_timed");
    assert_eq!(timed, raw.info_u64("tiered", "tiered_reads"));
    assert!(raw.info_u64("tiered", "tiered_read_resumed") >= timed);
    let waited: u64 = ["queue", "device", "wake", "run"]
        .iter()
        .map(|s| raw.info_u64("tiered", &format!("tiered_read_wait_us_{s}")))
        .sum();
    assert!(waited > 0, "{timed} reads took no time at all");
    // Writes, one per turn, step it again.
    let more = dataset(50, 12);
    for (i, v) in more.iter().enumerate() {
        let k = format!("w{i}");
        assert_eq!(call_b(&mut raw, &[b"SET", k.as_bytes(), v]), b"+OK\r\n");
    }
    assert!(raw.info_u64("tiered", "tiered_pass_turn_steps") >= steps + 50);
    assert!(used_memory(&mut raw) <= MAXMEMORY + OVERHEAD_BYTES);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_waiting_client_keeps_its_reply_order_while_others_are_served() {
    let (dir, srv, mut raw, values) = loaded("tiering-wait", &[], 5000, 11);
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
    let (dir, srv, mut raw, values) = loaded("tiering-del", &[], 5000, 13);
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
    let (dir, srv, mut raw, _) =
        loaded("tiering-crc", &["--tiered-max-file-size", "32mb"], 5000, 17);
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
    // Startup: maxmemory 0, replicaof, I/O threads (the AOF and RDB snapshots are
    // covered: tests/tiering_persist.rs).
    for (args, what) in [
        (vec!["--save", ""], "maxmemory 0"),
        (
            vec!["--maxmemory", "4mb", "--replicaof", "127.0.0.1", "1"],
            "replicaof",
        ),
        (
            vec!["--maxmemory", "4mb", "--io-threads", "2"],
            "io-threads",
        ),
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
    // SAVE, BGSAVE and SHUTDOWN SAVE write the image and its tier companion;
    // BGREWRITEAOF rewrites from such an image; DEBUG RELOAD and DIGEST work
    // (tests/tiering_persist.rs).
    for cmd in [
        vec!["DEBUG", "LOADAOF"],
        vec!["REPLICAOF", "127.0.0.1", "1"],
    ] {
        let r = String::from_utf8_lossy(&raw.call(&cmd)).into_owned();
        assert!(
            r.contains("not supported while tiering is on"),
            "{cmd:?}: {r}"
        );
    }
    // Save points are allowed (they write the image and its tier companion, or an RDB
    // converted from it).
    assert_eq!(raw.call(&["CONFIG", "SET", "save", "3600 1"]), b"+OK\r\n");
    assert_eq!(
        raw.call(&["CONFIG", "SET", "snapshot-format", "rdb"]),
        b"+OK\r\n"
    );
    assert_eq!(raw.call(&["CONFIG", "SET", "save", ""]), b"+OK\r\n");
    let r = show(&raw.call(&["CONFIG", "SET", "maxmemory", "0"]));
    assert!(r.contains("tiered-prefix is set"), "maxmemory 0: {r}");
    // The log is covered: it can be turned on at runtime.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "appendonly", "yes"]),
        b"+OK\r\n"
    );
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
    let (dir, srv, mut raw, _) = loaded("tiering-flush", &[], 5000, 31);
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

/// The DEBUG TIERED-STATE of each key, pipelined.
fn states(raw: &mut Raw, keys: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(500) {
        let mut buf = Vec::new();
        for k in chunk {
            buf.extend_from_slice(&encode(&[b"DEBUG", b"TIERED-STATE", k.as_bytes()]));
        }
        raw.send(&buf);
        for _ in chunk {
            out.push(
                show(&raw.reply())
                    .trim()
                    .trim_start_matches('+')
                    .to_string(),
            );
        }
    }
    out
}

/// Collections in single-block encodings, each command creating one key whole: `h<i>`
/// listpack hashes, `s<i>` listpack sets, `i<i>` intsets, `z<i>` listpack sorted sets
/// and `l<i>` inline lists, `n` of each, 600 to 1000 bytes apiece.
fn collection_cmds(n: usize, seed: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = Lcg(seed);
    let word = |rng: &mut Lcg, i: usize, j: usize| -> Vec<u8> {
        let len = 20 + rng.below(20) as usize;
        let mut w = format!("{i}-{j}-").into_bytes();
        w.extend((w.len()..len).map(|_| b'a' + rng.below(26) as u8));
        w
    };
    let mut cmds = Vec::new();
    for i in 0..n {
        let fields = 16 + rng.below(8) as usize;
        let mut h = vec![b"HSET".to_vec(), format!("h{i}").into_bytes()];
        let mut s = vec![b"SADD".to_vec(), format!("s{i}").into_bytes()];
        let mut is = vec![b"SADD".to_vec(), format!("i{i}").into_bytes()];
        let mut z = vec![b"ZADD".to_vec(), format!("z{i}").into_bytes()];
        let mut l = vec![b"RPUSH".to_vec(), format!("l{i}").into_bytes()];
        for j in 0..fields {
            h.push(format!("f{j}").into_bytes());
            h.push(word(&mut rng, i, j));
            s.push(word(&mut rng, i, j));
            // Beyond 32 bits: 8-byte intset entries.
            is.push(format!("{}", 5_000_000_000u64 + rng.below(1 << 40)).into_bytes());
            // Integral and fractional scores, some equal.
            let score = if j % 3 == 0 {
                format!("{}", rng.below(100))
            } else {
                format!("{}.{}", rng.below(100), rng.below(1000))
            };
            z.push(score.into_bytes());
            z.push(word(&mut rng, i, j));
            l.push(word(&mut rng, i, j));
        }
        cmds.extend([h, s, is, z, l]);
    }
    cmds
}

/// Starts a tiered server holding `n` collections of each single-block kind (plus
/// strings `k<i>` for pressure), and a plain cairn (no tiering, no maxmemory) holding the
/// same collections, for comparison.
fn tiered_collections(dir: &Path, n: usize) -> (Srv, ServerProc, Raw, Raw) {
    let srv = start_tiered(dir, &[]);
    let plain = start_cairn(&["--save", ""]);
    let mut rc = Raw::connect(srv.port);
    let mut rp = Raw::connect(plain.port);
    let cmds = collection_cmds(n, 41);
    run_all_making_room(&mut rc, &cmds, b":", MAXMEMORY);
    run_all_making_room(&mut rp, &cmds, b":", MAXMEMORY);
    // Strings after them: the collections, older, go cold first.
    load(&mut rc, &dataset(3000, 43));
    (srv, plain, rc, rp)
}

/// Keys of prefix `p` (among `p0..p<n>`) that are cold now.
fn cold_of(raw: &mut Raw, p: &str, n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("{p}{i}")).collect();
    let st = states(raw, &keys);
    keys.into_iter()
        .zip(st)
        .filter(|(_, s)| s == "cold")
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn collections_go_cold_and_every_command_answers_as_without_tiering() {
    let dir = temp_dir("tiering-coll");
    let n = 600;
    let (srv, _plain, mut rc, mut rp) = tiered_collections(&dir, n);
    // "@" is a fresh cold key of the prefix's kind (checked cold just before), "%" the
    // same key again, "#" a second fresh cold key.
    let families: &[(&str, &[&[&str]])] = &[
        (
            "h",
            &[
                &["HGETALL", "@"],
                &["HGET", "@", "f3"],
                &["HMGET", "@", "f1", "nope", "f7"],
                &["HKEYS", "@"],
                &["HVALS", "@"],
                &["HLEN", "@"],
                &["HEXISTS", "@", "f2"],
                &["HSTRLEN", "@", "f5"],
                &["HSCAN", "@", "0", "COUNT", "100"],
                &["DUMP", "@"],
                &["TYPE", "@"],
                &["OBJECT", "ENCODING", "@"],
                &["HSET", "@", "f1", "changed", "new", "field"],
                &["HDEL", "@", "f2", "f3"],
                &["HINCRBY", "@", "ctr", "7"],
                &["HINCRBYFLOAT", "@", "flt", "1.5"],
                &["HSETNX", "@", "f4", "x"],
                &["COPY", "@", "hcopy"],
                &["RENAME", "@", "hrenamed"],
                &["SORT", "@", "ALPHA"],
            ],
        ),
        (
            "s",
            &[
                &["SMEMBERS", "@"],
                &["SCARD", "@"],
                &["SISMEMBER", "@", "nope"],
                &["SMISMEMBER", "@", "a", "b"],
                &["SINTER", "@", "#"],
                &["SUNION", "@", "#"],
                &["SDIFF", "@", "#"],
                &["SINTERCARD", "2", "@", "#"],
                &["SSCAN", "@", "0", "COUNT", "100"],
                &["DUMP", "@"],
                &["TYPE", "@"],
                &["OBJECT", "ENCODING", "@"],
                &["SADD", "@", "new", "member"],
                &["SREM", "@", "new"],
                &["SMOVE", "@", "#", "member"],
                &["SUNIONSTORE", "sdest", "@", "#"],
                &["SORT", "@", "ALPHA"],
            ],
        ),
        (
            "i",
            &[
                &["SMEMBERS", "@"],
                &["SCARD", "@"],
                &["SISMEMBER", "@", "5"],
                &["SINTER", "@", "#"],
                &["DUMP", "@"],
                &["OBJECT", "ENCODING", "@"],
                &["SADD", "@", "12"],
                &["SADD", "@", "text"],
                &["SREM", "@", "12"],
                &["SORT", "@"],
            ],
        ),
        (
            "z",
            &[
                &["ZRANGE", "@", "0", "-1", "WITHSCORES"],
                &["ZREVRANGE", "@", "0", "5", "WITHSCORES"],
                &["ZRANGEBYSCORE", "@", "10", "60", "WITHSCORES"],
                &["ZRANGE", "@", "(20", "+inf", "BYSCORE", "LIMIT", "1", "3"],
                &["ZCARD", "@"],
                &["ZCOUNT", "@", "10", "50"],
                &["ZSCORE", "@", "nope"],
                &["ZRANK", "@", "nope"],
                &["ZSCAN", "@", "0", "COUNT", "100"],
                &["DUMP", "@"],
                &["TYPE", "@"],
                &["OBJECT", "ENCODING", "@"],
                &["ZADD", "@", "5", "new"],
                &["ZINCRBY", "@", "2.5", "new"],
                &["ZREM", "@", "new"],
                &["ZPOPMIN", "@", "2"],
                &["ZPOPMAX", "@"],
                &["ZREMRANGEBYRANK", "@", "0", "1"],
                &["ZUNIONSTORE", "zdest", "2", "@", "#"],
            ],
        ),
        (
            "l",
            &[
                &["LRANGE", "@", "0", "-1"],
                &["LLEN", "@"],
                &["LINDEX", "@", "3"],
                &["LINDEX", "@", "-1"],
                &["LPOS", "@", "nope"],
                &["DUMP", "@"],
                &["TYPE", "@"],
                &["OBJECT", "ENCODING", "@"],
                &["LPUSH", "@", "head"],
                &["RPUSH", "@", "tail"],
                &["LPOP", "@"],
                &["RPOP", "@", "2"],
                &["LSET", "@", "1", "set"],
                &["LINSERT", "@", "BEFORE", "nope", "x"],
                &["LREM", "@", "0", "nope"],
                &["LTRIM", "@", "1", "-2"],
                &["LMOVE", "@", "#", "LEFT", "RIGHT"],
                &["SORT", "@", "ALPHA"],
            ],
        ),
    ];
    let reads_of = |rc: &mut Raw| rc.info_u64("tiered", "tiered_reads");
    for (prefix, cmds) in families {
        let mut cold = cold_of(&mut rc, prefix, n).into_iter();
        assert!(
            cold.len() >= 2 * cmds.len(),
            "{prefix}: {} cold",
            cold.len()
        );
        for c in cmds.iter() {
            let a = cold.next().unwrap();
            let b = cold.next().unwrap();
            assert_eq!(state(&mut rc, &a), "cold", "{a}");
            assert_eq!(state(&mut rc, &b), "cold", "{b}");
            let parts: Vec<&str> = c
                .iter()
                .map(|p| match *p {
                    "@" => a.as_str(),
                    "#" => b.as_str(),
                    p => p,
                })
                .collect();
            let reads = reads_of(&mut rc);
            let misses = rc.info_u64("tiered", "tiered_misses");
            same_str(&mut rc, &mut rp, &parts);
            let read = reads_of(&mut rc) > reads;
            if matches!(parts[0], "TYPE" | "OBJECT") {
                assert!(!read, "{parts:?} read the value");
                assert_eq!(state(&mut rc, &a), "cold", "{parts:?}");
            } else {
                assert!(read, "{parts:?} read nothing");
                assert!(rc.info_u64("tiered", "tiered_misses") > misses);
            }
            // What the command left, byte for byte (DUMP is the value's encoding).
            for k in [
                a.as_str(),
                b.as_str(),
                "hcopy",
                "hrenamed",
                "sdest",
                "zdest",
            ] {
                same_str(&mut rc, &mut rp, &["DUMP", k]);
                same_str(&mut rc, &mut rp, &["OBJECT", "ENCODING", k]);
            }
        }
    }
    // A transaction over cold collections, and MEMORY USAGE / DEBUG OBJECT on one.
    let h = cold_of(&mut rc, "h", n);
    let z = cold_of(&mut rc, "z", n);
    assert!(h.len() >= 2 && !z.is_empty());
    same_str(&mut rc, &mut rp, &["MULTI"]);
    same_str(&mut rc, &mut rp, &["HGETALL", &h[0]]);
    same_str(&mut rc, &mut rp, &["ZADD", &z[0], "3", "tx"]);
    same_str(
        &mut rc,
        &mut rp,
        &["ZRANGE", &z[0], "0", "-1", "WITHSCORES"],
    );
    same_str(&mut rc, &mut rp, &["EXEC"]);
    // Keys a command does not declare (a script's, SORT's BY / GET patterns) are read
    // on the spot by the fallback, collections as strings.
    let sync = rc.info_u64("tiered", "tiered_sync_reads");
    let (s, l) = (cold_of(&mut rc, "s", n), cold_of(&mut rc, "l", n));
    assert!(h.len() >= 4 && !s.is_empty() && !l.is_empty());
    let scripts = [
        ("return redis.call('HGETALL', ARGV[1])", &h[2]),
        ("return redis.call('SMEMBERS', ARGV[1])", &s[0]),
        ("return redis.call('RPUSH', ARGV[1], 'x')", &l[0]),
    ];
    for (script, k) in scripts {
        same_str(&mut rc, &mut rp, &["EVAL", script, "0", k]);
        same_str(&mut rc, &mut rp, &["DUMP", k]);
    }
    // SORT ... BY <hash>->field: the pattern's hashes are cold.
    same_str(&mut rc, &mut rp, &["RPUSH", "ids", &h[3][1..], &h[1][1..]]);
    same_str(
        &mut rc,
        &mut rp,
        &["SORT", "ids", "BY", "h*->f0", "ALPHA", "GET", "h*->f1"],
    );
    assert!(rc.info_u64("tiered", "tiered_sync_reads") >= sync + 4);
    let usage = show(&rc.call(&["MEMORY", "USAGE", &h[1]]));
    let usage: u64 = usage.trim().trim_start_matches(':').parse().unwrap();
    assert!(usage > 600, "MEMORY USAGE {usage}");
    assert!(show(&rc.call(&["DEBUG", "OBJECT", &h[1]])).contains("encoding:listpack"));
    // Every collection of every kind still reads the same as without tiering.
    for p in ["h", "s", "i", "z", "l"] {
        for i in 0..n {
            same_str(&mut rc, &mut rp, &["DUMP", &format!("{p}{i}")]);
        }
    }
    assert_eq!(rc.info_u64("tiered", "tiered_read_errors"), 0);
    assert!(rc.info_u64("tiered", "tiered_hits") > 0);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cold_collections_are_typed_deleted_and_expired_without_reading_them() {
    let dir = temp_dir("tiering-coll-del");
    let n = 600;
    let (srv, _plain, mut rc, mut rp) = tiered_collections(&dir, n);
    let kinds = [
        ("h", "hash", "listpack"),
        ("s", "set", "hashtable"),
        ("i", "set", "intset"),
        ("z", "zset", "listpack"),
        ("l", "list", "quicklist"),
    ];
    let mut cold: Vec<Vec<String>> = kinds.iter().map(|(p, ..)| cold_of(&mut rc, p, n)).collect();
    for (c, (p, ..)) in cold.iter().zip(&kinds) {
        assert!(c.len() >= 40, "{p}: only {} cold", c.len());
    }
    assert!(rc.info_u64("tiered", "tiered_entries") >= 200);
    let reads = rc.info_u64("tiered", "tiered_reads");
    for (c, (p, ty, enc)) in cold.iter_mut().zip(&kinds) {
        for k in c.drain(..10) {
            assert_eq!(rc.call(&["EXISTS", &k]), b":1\r\n");
            assert_eq!(show(&rc.call(&["TYPE", &k])), format!("+{ty}\r\n"), "{k}");
            assert_eq!(
                show(&rc.call(&["OBJECT", "ENCODING", &k])),
                format!("${}\r\n{enc}\r\n", enc.len()),
                "{k}"
            );
            assert_eq!(rc.call(&["TTL", &k]), b":-1\r\n");
            assert_eq!(rc.call(&["EXPIRE", &k, "1000"]), b":1\r\n");
            assert_eq!(rc.call(&["PERSIST", &k]), b":1\r\n");
            assert_eq!(state(&mut rc, &k), "cold");
            assert_eq!(rc.call(&["DEL", &k]), b":1\r\n", "{p}");
            assert_eq!(rp.call(&["DEL", &k]), b":1\r\n");
        }
        let (a, b) = (c.remove(0), c.remove(0));
        assert_eq!(rc.call(&["UNLINK", &a]), b":1\r\n");
        assert_eq!(rp.call(&["UNLINK", &a]), b":1\r\n");
        // A plain SET replaces it without reading it.
        assert_eq!(rc.call(&["SET", &b, "now a string"]), b"+OK\r\n");
        assert_eq!(rp.call(&["SET", &b, "now a string"]), b"+OK\r\n");
    }
    assert_eq!(
        rc.info_u64("tiered", "tiered_reads"),
        reads,
        "no read for EXISTS / TYPE / OBJECT ENCODING / TTL / EXPIRE / PERSIST / DEL / UNLINK / SET"
    );
    // Keys for the expiry and conversion checks below.
    let (e1, e2) = (cold[1].remove(0), cold[3].remove(0));
    let (hz, zz) = (cold[0].remove(0), cold[3].remove(0));
    // Their places go back to the bookkeeper. Small records share pages (a page is free
    // with its last record), so every cold collection goes, with the pass held from
    // writing more (the offload line raised above memory use) and no write in flight.
    assert_eq!(
        rc.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.05"]),
        b"+OK\r\n"
    );
    wait_until(DEADLINE, "no write in flight", || {
        rc.info_u64("tiered", "tiered_pending_stash_cnt") == 0
    });
    let allocated = rc.info_u64("tiered", "tiered_allocated_bytes");
    for c in cold.iter_mut() {
        for k in c.drain(..) {
            assert_eq!(rc.call(&["DEL", &k]), b":1\r\n");
            assert_eq!(rp.call(&["DEL", &k]), b":1\r\n");
        }
    }
    wait_until(DEADLINE, "the deleted collections' pages are free", || {
        rc.info_u64("tiered", "tiered_allocated_bytes") < allocated
    });
    assert_eq!(
        rc.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.5"]),
        b"+OK\r\n"
    );
    // Expiry of cold collections, lazy and active: gone without a read.
    let reads = rc.info_u64("tiered", "tiered_reads");
    assert_eq!(state(&mut rc, &e1), "cold");
    assert_eq!(state(&mut rc, &e2), "cold");
    assert_eq!(rc.call(&["PEXPIRE", &e1, "1"]), b":1\r\n");
    assert_eq!(rc.call(&["PEXPIRE", &e2, "1"]), b":1\r\n");
    wait_until(DEADLINE, "both expired", || {
        rc.call(&["EXISTS", &e1, &e2]) == b":0\r\n"
    });
    assert_eq!(rp.call(&["DEL", &e1, &e2]), b":2\r\n");
    assert_eq!(
        rc.info_u64("tiered", "tiered_reads"),
        reads,
        "expiry read nothing"
    );
    // A collection that converts to a multi-block encoding is read back first and then
    // never tiered again.
    let long = "v".repeat(100);
    same_str(&mut rc, &mut rp, &["HSET", &hz, "long", &long]);
    same_str(&mut rc, &mut rp, &["ZADD", &zz, "1", &long]);
    same_str(&mut rc, &mut rp, &["OBJECT", "ENCODING", &hz]);
    same_str(&mut rc, &mut rp, &["OBJECT", "ENCODING", &zz]);
    // The offload line brought down under memory use: the pass writes every value it
    // may tier and their RAM copies go, until all that is left in RAM is what is not
    // tiered.
    assert_eq!(
        rc.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.9"]),
        b"+OK\r\n"
    );
    let remaining: Vec<String> = ["h", "z"]
        .iter()
        .flat_map(|p| (0..n).map(move |i| format!("{p}{i}")))
        .filter(|k| *k != hz && *k != zz)
        // Not the ones replaced by short strings above.
        .filter(|k| !rc.call(&["TYPE", k]).starts_with(b"+string"))
        .collect();
    let went_cold = poll_until(DEADLINE, || {
        states(&mut rc, &remaining)
            .iter()
            .all(|s| s == "cold" || s.starts_with("-ERR"))
    });
    if !went_cold {
        let mut st = states(&mut rc, &remaining);
        st.sort();
        st.dedup();
        panic!("single-block collections left in RAM: {st:?}");
    }
    assert_eq!(state(&mut rc, &zz), "hot", "a skiplist is not tiered");
    assert_eq!(state(&mut rc, &hz), "hot", "a hashtable is not tiered");
    same_str(&mut rc, &mut rp, &["ZRANGE", &zz, "0", "-1", "WITHSCORES"]);
    assert_eq!(
        rc.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.5"]),
        b"+OK\r\n"
    );
    // Everything left reads the same as without tiering.
    for (p, ..) in &kinds {
        for i in 0..n {
            let k = format!("{p}{i}");
            if k == hz {
                same_unordered(&mut rc, &mut rp, &["HGETALL", &k]);
            } else {
                same_str(&mut rc, &mut rp, &["DUMP", &k]);
            }
        }
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_page_of_a_cold_collection_names_the_key_and_the_rest_is_served() {
    let dir = temp_dir("tiering-coll-crc");
    let n = 400;
    let (srv, _plain, mut rc, mut rp) = tiered_collections(&dir, n);
    let h = cold_of(&mut rc, "h", n);
    let z = cold_of(&mut rc, "z", n);
    assert!(h.len() >= 2 && !z.is_empty());
    // A device error on one read: that command fails naming the key, the value stays
    // cold and the next read returns it.
    assert_eq!(rc.call(&["DEBUG", "TIERED-FAIL", "1", "0"]), b"+OK\r\n");
    let r = show(&rc.call(&["HGETALL", &h[0]]));
    assert!(
        r.starts_with(&format!("-ERR tiered read of key '{}' failed: ", h[0])),
        "{r}"
    );
    assert_eq!(state(&mut rc, &h[0]), "cold");
    same_str(&mut rc, &mut rp, &["HGETALL", &h[0]]);
    // Hot values to check against afterwards, then every written page damaged.
    // (the strings `tiered_collections` loaded last), kept in RAM from now on (the
    // offload line raised above memory use).
    assert_eq!(
        rc.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.05"]),
        b"+OK\r\n"
    );
    let strings = dataset(3000, 43);
    let hot: Vec<usize> = (0..strings.len())
        .rev()
        .filter(|i| state(&mut rc, &format!("k{i}")) != "cold")
        .take(20)
        .collect();
    assert!(!hot.is_empty());
    let path = dir.join("tier-0000.ssd");
    let mut file = std::fs::read(&path).unwrap();
    for page in file.chunks_mut(4096) {
        if page.iter().any(|&b| b != 0) {
            page[4000] ^= 0x5a;
        }
    }
    std::fs::write(&path, &file).unwrap();
    for (k, cmd) in [(&h[1], "HGETALL"), (&z[0], "ZCARD")] {
        let r = show(&rc.call(&[cmd, k]));
        assert!(
            r.starts_with(&format!("-ERR tiered read of key '{k}' failed: "))
                && r.contains("checksum mismatch"),
            "{r}"
        );
        wait_until(DEADLINE, "the failed read is logged", || {
            server_log(&dir).contains(&format!("Tiered read of key '{k}' failed"))
        });
        assert_eq!(state(&mut rc, k), "cold");
        assert_eq!(rc.call(&["TYPE", k]), rp.call(&["TYPE", k]));
    }
    // Every value that was in RAM is served, and new writes are taken.
    let mut b = Raw::connect(srv.port);
    for &i in &hot {
        assert_eq!(
            b.call(&["GET", &format!("k{i}")]),
            bulk(&strings[i]),
            "k{i}"
        );
    }
    assert_eq!(b.call(&["HSET", "fresh", "f", "v"]), b":1\r\n");
    assert_eq!(
        b.call(&["HGETALL", "fresh"]),
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// GETs `k<i>` for every value, pipelined: each reply is the value or the named-key read
/// error (never other bytes). Returns the keys that failed.
fn exact_or_error(raw: &mut Raw, values: &[Vec<u8>]) -> Vec<usize> {
    let mut failed = Vec::new();
    for (c, chunk) in values.chunks(200).enumerate() {
        let mut buf = Vec::new();
        for i in 0..chunk.len() {
            buf.extend_from_slice(&encode(&[b"GET", format!("k{}", c * 200 + i).as_bytes()]));
        }
        raw.send(&buf);
        for (i, v) in chunk.iter().enumerate() {
            let i = c * 200 + i;
            let r = raw.reply();
            if r != bulk(v) {
                let prefix = format!("-ERR tiered read of key 'k{i}' failed: ");
                assert!(show(&r).starts_with(&prefix), "k{i}: {}", show(&r));
                failed.push(i);
            }
        }
    }
    failed
}

#[test]
fn a_truncated_tier_file_fails_reads_by_key_and_never_serves_zeros() {
    let (dir, srv, mut raw, values) = loaded("tiering-trunc", &[], 5000, 53);
    // Quiet: the offload line raised above memory use (no copy is dropped, no value is
    // written) and no write in flight, so the states read now are those at the cut and
    // nothing extends the file after it.
    wait_until(DEADLINE, "memory under the offload line", || {
        used_memory(&mut raw) < MAXMEMORY / 2
    });
    assert_eq!(
        raw.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.05"]),
        b"+OK\r\n"
    );
    wait_until(DEADLINE, "no write in flight", || {
        raw.info_u64("tiered", "tiered_pending_stash_cnt") == 0
    });
    let keys: Vec<String> = (0..values.len()).map(|i| format!("k{i}")).collect();
    let before = states(&mut raw, &keys);
    let cold: Vec<usize> = (0..keys.len()).filter(|&i| before[i] == "cold").collect();
    assert!(cold.len() > 1000, "only {} cold", cold.len());
    // Cut the file to nothing under the running server.
    let path = dir.join("tier-0000.ssd");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    wait_until(DEADLINE, "the server saw the truncation", || {
        raw.info_u64("tiered", "tiered_file_truncations") >= 1
    });
    wait_until(DEADLINE, "the truncation is logged", || {
        server_log(&dir).contains("was truncated to ")
    });
    // Reads past the end: short reads, each naming its key; the value stays cold.
    for &i in &cold[..50] {
        let k = &keys[i];
        let r = show(&raw.call(&["GET", k]));
        assert!(
            r.starts_with(&format!("-ERR tiered read of key '{k}' failed: short read"))
                && r.contains("the tier file ends before the record (truncated)"),
            "{r}"
        );
    }
    let k = &keys[cold[0]];
    wait_until(DEADLINE, "the failed read is logged", || {
        server_log(&dir).contains(&format!("Tiered read of key '{k}' failed"))
    });
    assert_eq!(state(&mut raw, k), "cold");
    // Hot keys and new writes are served meanwhile.
    let mut b = Raw::connect(srv.port);
    assert_eq!(b.call(&["SET", "fresh", "v"]), b"+OK\r\n");
    assert_eq!(b.call(&["GET", "fresh"]), b"$1\r\nv\r\n");
    // New values stashed after the cut extend the file again, past the old records'
    // pages: those now read as a hole of zeros, which the page checksums refuse.
    assert_eq!(
        raw.call(&["CONFIG", "SET", "tiered-offload-threshold", "0.5"]),
        b"+OK\r\n"
    );
    let more = dataset(3000, 59);
    let more_cmds: Vec<Vec<Vec<u8>>> = more
        .iter()
        .enumerate()
        .map(|(i, v)| vec![b"SET".to_vec(), format!("m{i}").into_bytes(), v.clone()])
        .collect();
    run_all_making_room(&mut raw, &more_cmds, b"+OK", MAXMEMORY);
    let mkeys: Vec<String> = (0..more.len()).map(|i| format!("m{i}")).collect();
    assert!(
        states(&mut raw, &mkeys)
            .iter()
            .filter(|s| *s == "cold")
            .count()
            > 300,
        "values went cold after the cut"
    );
    assert!(raw.info_u64("tiered", "tiered_file_bytes") > 0);
    // Every old key: its exact bytes, or the named-key error, never zeros. Those in RAM
    // when the file was cut (hot, cooled or being written) read back exactly: a copy
    // whose disk copy was cut is kept in memory.
    let failed = exact_or_error(&mut raw, &values);
    assert!(failed.len() >= cold.len() / 2, "{} failed", failed.len());
    for &i in &failed {
        assert_eq!(before[i], "cold", "k{i} was {} and is lost", before[i]);
    }
    let log = server_log(&dir);
    assert!(
        log.contains("checksum mismatch") || failed.len() == cold.len(),
        "no read of a hole"
    );
    // The values written after the cut read back exactly.
    for (i, v) in more.iter().enumerate() {
        assert_eq!(raw.call(&["GET", &format!("m{i}")]), bulk(v), "m{i}");
    }
    assert_eq!(b.call(&["PING"]), b"+PONG\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_deleted_tier_file_keeps_serving_through_its_open_descriptor() {
    let (dir, srv, mut raw, values) = loaded("tiering-unlink", &[], 5000, 61);
    assert!(raw.info_u64("tiered", "tiered_entries") > 1000);
    assert_eq!(raw.info_u64("tiered", "tiered_file_deleted"), 0);
    std::fs::remove_file(dir.join("tier-0000.ssd")).unwrap();
    wait_until(DEADLINE, "the server saw the deletion", || {
        raw.info_u64("tiered", "tiered_file_deleted") == 1
    });
    wait_until(DEADLINE, "the deletion is logged", || {
        server_log(&dir).contains("was deleted under the server")
    });
    // Every value reads back exactly (cold ones through the open descriptor), twice,
    // and new values are stashed and read back too.
    check_all(&mut raw, &values);
    let more = dataset(3000, 67);
    let more_cmds: Vec<Vec<Vec<u8>>> = more
        .iter()
        .enumerate()
        .map(|(i, v)| vec![b"SET".to_vec(), format!("m{i}").into_bytes(), v.clone()])
        .collect();
    run_all_making_room(&mut raw, &more_cmds, b"+OK", MAXMEMORY);
    check_all(&mut raw, &values);
    for (i, v) in more.iter().enumerate() {
        assert_eq!(raw.call(&["GET", &format!("m{i}")]), bulk(v), "m{i}");
    }
    assert_eq!(raw.info_u64("tiered", "tiered_read_errors"), 0);
    // Warned once.
    assert_eq!(
        server_log(&dir)
            .matches("was deleted under the server")
            .count(),
        1
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finds `key`'s record in the tier file image `file`, lying whole inside one page's
/// payload: (offset of the value, value length).
fn record_in_one_page(file: &[u8], key: &str) -> Option<(usize, usize)> {
    let k = key.as_bytes();
    let mut head = (k.len() as u32).to_le_bytes().to_vec();
    head.extend_from_slice(&[0; 4]);
    (0..file.len().saturating_sub(8 + k.len())).find_map(|p| {
        if file[p..p + 4] != head[..4] || &file[p + 8..p + 8 + k.len()] != k {
            return None;
        }
        let vlen = u32::from_le_bytes(file[p + 4..p + 8].try_into().unwrap()) as usize;
        let in_page = p % 4096;
        (in_page >= 8 && in_page + 8 + k.len() + vlen <= 4096).then_some((p + 8 + k.len(), vlen))
    })
}

#[test]
fn a_cold_collection_whose_bytes_are_not_a_value_is_refused_though_its_checksums_hold() {
    let dir = temp_dir("tiering-coll-forged");
    let n = 400;
    let (_srv, _plain, mut rc, mut rp) = tiered_collections(&dir, n);
    let h = cold_of(&mut rc, "h", n);
    let path = dir.join("tier-0000.ssd");
    let mut file = std::fs::read(&path).unwrap();
    // A cold hash whose record sits in one page; its listpack's total-bytes field made
    // impossible, and the page's checksum recomputed so only the value check can see it.
    let (key, at) = h
        .iter()
        .find_map(|k| record_in_one_page(&file, k).map(|(at, _)| (k.clone(), at)))
        .expect("a cold hash in one page");
    assert_eq!(file[at], 0, "an inline listpack hash starts with tag 0");
    file[at + 1..at + 5].copy_from_slice(&u32::MAX.to_le_bytes());
    let page = at / 4096 * 4096;
    let crc = crc32c::crc32c(&file[page + 4..page + 4096]);
    file[page..page + 4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &file).unwrap();
    // Through the gate's read, and through the fallback (a script's undeclared key).
    for cmd in [
        vec!["HGETALL", key.as_str()],
        vec![
            "EVAL",
            "return redis.call('HLEN', ARGV[1])",
            "0",
            key.as_str(),
        ],
    ] {
        let r = show(&rc.call(&cmd));
        if cmd[0] == "HGETALL" {
            assert!(
                r.starts_with(&format!("-ERR tiered read of key '{key}' failed: "))
                    && r.contains("not a well-formed value"),
                "{r}"
            );
        } else {
            // The fallback answers as if the key were absent for that command.
            assert_eq!(r, ":0\r\n");
        }
        assert_eq!(state(&mut rc, &key), "cold");
        assert_eq!(rc.call(&["TYPE", &key]), b"+hash\r\n");
    }
    wait_until(DEADLINE, "the refused read is logged", || {
        server_log(&dir).contains(&format!("Tiered read of key '{key}' failed"))
    });
    // Every other cold hash is still read byte-exact.
    for k in h.iter().filter(|k| **k != key).take(5) {
        same_str(&mut rc, &mut rp, &["HGETALL", k]);
    }
}

#[test]
fn a_writer_faster_than_the_disk_waits_instead_of_getting_oom() {
    let dir = temp_dir("tiering-throttle");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    // Each page write takes 3 ms: ~1.3 MB/s, far slower than a pipelined writer.
    assert_eq!(
        raw.call(&["DEBUG", "TIERED-WRITE-DELAY", "3000"]),
        b"+OK\r\n"
    );
    let mut rng = Lcg(41);
    let values: Vec<Vec<u8>> = (0..12_000)
        .map(|i| {
            let mut v: Vec<u8> = (0..700 + rng.below(600) as usize)
                .map(|_| rng.below(256) as u8)
                .collect();
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            v
        })
        .collect();
    for (c, chunk) in values.chunks(100).enumerate() {
        let mut buf = Vec::new();
        for (i, v) in chunk.iter().enumerate() {
            let k = format!("k{}", c * 100 + i);
            buf.extend_from_slice(&encode(&[b"SET", k.as_bytes(), v]));
        }
        raw.send(&buf);
        for i in 0..chunk.len() {
            let r = raw.reply();
            assert_eq!(r, b"+OK\r\n", "SET k{}: {}", c * 100 + i, show(&r));
        }
        let used = used_memory(&mut raw);
        assert!(
            used <= MAXMEMORY + OVERHEAD_BYTES,
            "used_memory {used} above maxmemory + {OVERHEAD_BYTES}"
        );
    }
    assert!(
        raw.info_u64("tiered", "tiered_throttled_writes") > 0,
        "the writer had to wait"
    );
    assert_eq!(raw.info_u64("tiered", "tiered_throttled_ooms"), 0);
    assert_eq!(raw.call(&["DEBUG", "TIERED-WRITE-DELAY", "0"]), b"+OK\r\n");
    check_all(&mut raw, &values);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stalled_disk_turns_waiting_writes_into_oom_after_the_bound() {
    let dir = temp_dir("tiering-stall");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    // No write reaches the disk: the tier cannot make room, however long one waits.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-WRITES", "1"]), b"+OK\r\n");
    let mut rng = Lcg(43);
    let mut oom_at = None;
    for i in 0..20_000usize {
        let v: Vec<u8> = (0..1000).map(|_| rng.below(256) as u8).collect();
        let r = call_b(&mut raw, &[b"SET", format!("k{i}").as_bytes(), &v]);
        if r.starts_with(b"-OOM") {
            oom_at = Some(i);
            break;
        }
        assert_eq!(r, b"+OK\r\n", "SET k{i}");
    }
    let i = oom_at.expect("a write got -OOM once the wait's bound passed");
    assert!(raw.info_u64("tiered", "tiered_throttled_writes") >= 1);
    assert!(raw.info_u64("tiered", "tiered_throttled_ooms") >= 1);
    // Once the disk moves again, so do the writes.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-WRITES", "0"]), b"+OK\r\n");
    let v = vec![b'x'; 1000];
    assert_eq!(
        call_b(&mut raw, &[b"SET", format!("k{i}").as_bytes(), &v]),
        b"+OK\r\n"
    );
    assert_eq!(
        call_b(&mut raw, &[b"GET", format!("k{i}").as_bytes()]),
        bulk(&v)
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Cold reads go through the executor's own read ring (registered buffers where the
/// kernel allows). More reads than its in-flight bound at once (one MGET of every cold
/// key, big records longer than a buffer slot among them) queue and all come back
/// byte-exact; reads the device fails name their own key while the other clients,
/// waiting alongside, get their values.
#[test]
fn reads_beyond_the_rings_bound_come_back_exact_and_a_failed_one_names_its_key() {
    let dir = temp_dir("tiering-ring");
    let srv = start_tiered(&dir, &[]);
    let mut raw = Raw::connect(srv.port);
    // Written first, so among the first to go cold: records of 5 to 12 pages, longer
    // than a slot of the ring's pool.
    let mut rng = Lcg(41);
    let bigs: Vec<Vec<u8>> = (0..6)
        .map(|i| {
            (0..20_000 + i * 5_000)
                .map(|_| rng.below(256) as u8)
                .collect()
        })
        .collect();
    for (i, v) in bigs.iter().enumerate() {
        assert_eq!(
            call_b(&mut raw, &[b"SET", format!("big{i}").as_bytes(), v]),
            b"+OK\r\n"
        );
    }
    let values = dataset(5000, 43);
    load(&mut raw, &values);
    let path = raw.info_field("tiered", "tiered_read_path");
    assert!(path.starts_with("executor-ring"), "reads go through {path}");
    let cold_bigs: Vec<usize> = (0..bigs.len())
        .filter(|i| state(&mut raw, &format!("big{i}")) == "cold")
        .collect();
    assert!(!cold_bigs.is_empty(), "no big value went cold");
    let cold = cold_keys(&mut raw, 1000);
    assert!(cold.len() > 200, "only {} cold keys", cold.len());
    let idx = |k: &str| k[1..].parse::<usize>().unwrap();
    // Held: every read of the MGET waits in the ring's queue, none in the kernel.
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "1"]), b"+OK\r\n");
    let mut names: Vec<String> = cold.iter().take(200).cloned().collect();
    names.extend(cold_bigs.iter().map(|i| format!("big{i}")));
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(names.iter().map(|k| k.as_bytes()));
    let mut a = Raw::connect(srv.port);
    a.cmd(&mget);
    wait_until(DEADLINE, "the MGET's reads are queued", || {
        raw.info_u64("tiered", "tiered_read_ring_queued") == names.len() as u64
    });
    assert_eq!(raw.info_u64("tiered", "tiered_read_ring_in_flight"), 0);
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "0"]), b"+OK\r\n");
    let mut want = format!("*{}\r\n", names.len()).into_bytes();
    for k in &names {
        match k.strip_prefix("big") {
            Some(i) => want.extend(bulk(&bigs[i.parse::<usize>().unwrap()])),
            None => want.extend(bulk(&values[idx(k)])),
        }
    }
    assert!(a.reply() == want, "the MGET's values differ");
    assert_eq!(raw.info_u64("tiered", "tiered_read_ring_queued"), 0);
    assert_eq!(raw.info_u64("tiered", "tiered_read_ring_in_flight"), 0);
    // Twelve clients wait for a cold key each; the device fails three of the reads.
    let cold = cold_keys(&mut raw, 1000);
    assert!(cold.len() >= 12, "only {} cold keys", cold.len());
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "1"]), b"+OK\r\n");
    let mut clients: Vec<(String, Raw)> = Vec::new();
    for k in cold.iter().take(12) {
        let mut c = Raw::connect(srv.port);
        c.cmd(&[b"GET", k.as_bytes()]);
        clients.push((k.clone(), c));
    }
    wait_until(DEADLINE, "the twelve reads are queued", || {
        raw.info_u64("tiered", "tiered_read_ring_queued") == 12
    });
    let errors_before = raw.info_u64("tiered", "tiered_read_errors");
    assert_eq!(raw.call(&["DEBUG", "TIERED-FAIL", "3", "0"]), b"+OK\r\n");
    assert_eq!(raw.call(&["DEBUG", "TIERED-HOLD-READS", "0"]), b"+OK\r\n");
    let mut failed = Vec::new();
    for (k, c) in clients.iter_mut() {
        let r = c.reply();
        if r.starts_with(b"-") {
            let r = show(&r);
            assert!(
                r.starts_with(&format!("-ERR tiered read of key '{k}' failed: "))
                    && r.contains("os error 5"),
                "{k}: {r}"
            );
            failed.push(k.clone());
        } else {
            assert!(r == bulk(&values[idx(k)]), "{k} differs");
        }
    }
    assert_eq!(failed.len(), 3, "three reads failed: {failed:?}");
    assert_eq!(
        raw.info_u64("tiered", "tiered_read_errors"),
        errors_before + 3
    );
    // The failed values stay on disk and read back whole.
    for k in &failed {
        assert_eq!(state(&mut raw, k), "cold");
        assert!(
            raw.call(&["GET", k]) == bulk(&values[idx(k)]),
            "{k} differs"
        );
    }
    check_all(&mut raw, &values);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
