//! The AOF writer's I/O paths (issue 7): io_uring with several syncs in flight,
//! pre-allocated and pre-zeroed segments, O_DIRECT|O_DSYNC writes padded with `#PAD`,
//! recycled segments, and a filesystem that really fills up. The central property: with
//! `appendfsync always`, no acknowledged write is lost when the process is killed at a
//! random moment under concurrent writers.

mod common;

use cairn::persistence::aof::format;
use common::{
    last_incr_file as incr_path, server_log as log, start_aof as start, start_aof_env as start_env,
    temp_dir, try_call_line, wait_until, Raw, DEADLINE,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// SET over a plain socket; Err once the server is gone (the test kills it).
fn set(s: &mut TcpStream, key: &str, val: &str) -> std::io::Result<()> {
    let cmd = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{val}\r\n",
        key.len(),
        val.len()
    );
    s.write_all(cmd.as_bytes())?;
    let mut b = [0u8; 5];
    s.read_exact(&mut b)?;
    if &b != b"+OK\r\n" {
        return Err(std::io::Error::other(format!("reply {b:?}")));
    }
    Ok(())
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Kills the server (SIGKILL) at a random moment while `writers` clients write, restarts
/// it, and checks that every acknowledged SET is there.
fn kill9_trials(tag: &str, args: &[&str], env: &[(&str, &str)], trials: u32) {
    kill9_trials_rewriting(tag, args, env, trials, false);
}

/// [`kill9_trials`]; with `rewrites`, another client sends BGREWRITEAOF every 10–60 ms
/// meanwhile, so kills land in every phase of a rewrite too.
fn kill9_trials_rewriting(
    tag: &str,
    args: &[&str],
    env: &[(&str, &str)],
    trials: u32,
    rewrites: bool,
) {
    let writers = 6;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    for trial in 0..trials {
        let dir = temp_dir(tag);
        let srv = start_env(&dir, args, env);
        let port = srv.port;
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Vec<Arc<AtomicU64>> =
            (0..writers).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (stop, acked) = (stop.clone(), acked[w].clone());
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let val = format!("{:0>200}", w);
                    let mut i = 1u64;
                    // Bounded: stops at the kill, or after 200k writes.
                    while !stop.load(Ordering::SeqCst) && i < 200_000 {
                        if set(&mut s, &format!("w{w}:{i}"), &val).is_err() {
                            return;
                        }
                        acked.store(i, Ordering::SeqCst);
                        i += 1;
                    }
                })
            })
            .collect();
        let rewriter = rewrites.then(|| {
            let stop = stop.clone();
            let mut rng = Rng(rng.next() | 1);
            std::thread::spawn(move || {
                let Ok(mut r) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                let _ = r.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = [0u8; 512];
                // Bounded: stops at the kill, or after 1000 requests.
                for _ in 0..1000 {
                    if stop.load(Ordering::SeqCst)
                        || r.write_all(b"*1\r\n$12\r\nBGREWRITEAOF\r\n").is_err()
                        || matches!(r.read(&mut buf), Ok(0) | Err(_))
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10 + rng.next() % 50));
                }
            })
        });
        // Writes under way first (a loaded machine may take a while to connect).
        wait_until(DEADLINE, &format!("{tag}: a write acknowledged"), || {
            acked.iter().any(|a| a.load(Ordering::SeqCst) > 0)
        });
        // With rewrites, late enough for a few of them (the spare of `aof-recycle` comes
        // from the first, and is written into from the second on).
        let kill_after_ms = if rewrites {
            200 + rng.next() % 1300
        } else {
            50 + rng.next() % 400
        };
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        let mut srv = srv;
        let _ = srv.child.kill();
        let _ = srv.child.wait();
        stop.store(true, Ordering::SeqCst);
        for h in handles.into_iter().chain(rewriter) {
            h.join().unwrap();
        }
        drop(srv);
        let srv = start_env(&dir, args, env);
        let mut r = Raw::connect(srv.port);
        let mut total = 0;
        for (w, a) in acked.iter().enumerate() {
            let last = a.load(Ordering::SeqCst);
            total += last;
            let keys: Vec<String> = (1..=last).map(|i| format!("w{w}:{i}")).collect();
            for chunk in keys.chunks(500) {
                let mut argv = vec!["EXISTS"];
                argv.extend(chunk.iter().map(String::as_str));
                let got = String::from_utf8(r.call(&argv)).unwrap();
                assert_eq!(
                    got,
                    format!(":{}\r\n", chunk.len()),
                    "{tag} trial {trial}: writer {w} lost acknowledged writes (acked up to {last}): {}",
                    log(&dir)
                );
            }
        }
        assert!(total > 0, "{tag} trial {trial}: nothing was written");
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn kill9_at_random_moments_loses_no_acknowledged_write_uring() {
    // Default depth (1) and 8 fdatasyncs in flight.
    kill9_trials("k9uring", &["--appendfsync", "always"], &[], 3);
    kill9_trials(
        "k9uring8",
        &["--appendfsync", "always", "--aof-inflight-syncs", "8"],
        &[],
        5,
    );
    // Group commit: entries held back for their group are still never acknowledged
    // before they are durable.
    kill9_trials(
        "k9group",
        &[
            "--appendfsync",
            "always",
            "--aof-group-commit-wait-us",
            "2000",
        ],
        &[],
        3,
    );
}

/// `always` with recycled segments and small pre-allocation chunks.
const RECYCLED_1MB: [&str; 6] = [
    "--appendfsync",
    "always",
    "--aof-recycle",
    "yes",
    "--aof-preallocate-bytes",
    "1mb",
];

/// Kills during rewrites: from a rewrite's start the manifest lists the next incremental
/// file while the current one is still written, so a kill there leaves a torn (or, with
/// `aof-recycle`, a recycled) tail in the file before the last one listed.
#[test]
fn kill9_during_rewrites_loses_no_acknowledged_write() {
    kill9_trials_rewriting("k9rw", &["--appendfsync", "always"], &[], 4, true);
    kill9_trials_rewriting("k9rwrecycle", &RECYCLED_1MB, &[], 12, true);
}

#[test]
fn kill9_at_random_moments_loses_no_acknowledged_write_direct_io() {
    kill9_trials(
        "k9direct",
        &[
            "--appendfsync",
            "always",
            "--aof-direct-io",
            "yes",
            "--aof-inflight-syncs",
            "8",
        ],
        &[],
        6,
    );
}

#[test]
fn kill9_at_random_moments_loses_no_acknowledged_write_thread_engine() {
    kill9_trials(
        "k9thread",
        &["--appendfsync", "always"],
        &[("CAIRN_AOF_NO_URING", "1")],
        4,
    );
}

/// A pre-allocated segment is longer than its log (zeroes after it); restart after a
/// kill finds the log's end at the zeroes without calling it a torn tail, and a clean
/// shutdown cuts the zeroes off (the file is then exactly its entries).
#[test]
fn preallocated_segment_restarts_cleanly_and_is_cut_at_shutdown() {
    let dir = temp_dir("prealloc");
    let args = ["--appendfsync", "always", "--aof-preallocate-bytes", "4mb"];
    {
        let srv = start(&dir, &args);
        let mut r = Raw::connect(srv.port);
        assert_eq!(
            r.info("persistence", "aof_io_engine").as_deref(),
            Some("uring")
        );
        for i in 0..200 {
            assert_eq!(r.call(&["SET", &format!("k{i}"), "v"]), b"+OK\r\n");
        }
        wait_until(DEADLINE, "the segment is pre-allocated", || {
            std::fs::metadata(incr_path(&dir)).unwrap().len() >= 4 << 20
        });
    } // SIGKILL
    let bytes = std::fs::read(incr_path(&dir)).unwrap();
    let o = format::scan(&bytes, None, |_| Ok(()));
    assert!(o.bad.is_none() && o.zero_tail, "{:?}", o.bad);
    let srv = start(&dir, &args);
    assert!(!log(&dir).contains("short read"), "{}", log(&dir));
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["GET", "k199"]), b"$1\r\nv\r\n");
    assert_eq!(r.call(&["SET", "after", "1"]), b"+OK\r\n");
    r.send(b"SHUTDOWN NOSAVE\r\n");
    let mut srv = srv;
    let _ = srv.child.wait();
    let bytes = std::fs::read(incr_path(&dir)).unwrap();
    let o = format::scan(&bytes, None, |_| Ok(()));
    assert!(o.bad.is_none() && !o.zero_tail, "{:?}", o.bad);
    assert_eq!(
        o.valid_len,
        bytes.len() as u64,
        "clean shutdown cuts the zeroes"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Direct I/O: every write is whole 4 KiB blocks padded with `#PAD:`; the log reads back
/// entry by entry after a kill, and a restart continues it.
#[test]
fn direct_io_writes_padded_blocks_that_recover() {
    let dir = temp_dir("direct");
    let args = ["--appendfsync", "always", "--aof-direct-io", "yes"];
    {
        let srv = start(&dir, &args);
        let mut r = Raw::connect(srv.port);
        assert_eq!(
            r.info("persistence", "aof_io_engine").as_deref(),
            Some("uring-direct")
        );
        for i in 0..300 {
            assert_eq!(
                r.call(&["SET", &format!("k{i}"), &"x".repeat(i)]),
                b"+OK\r\n"
            );
        }
    } // SIGKILL
    let bytes = std::fs::read(incr_path(&dir)).unwrap();
    assert!(
        bytes.windows(5).any(|w| w == b"#PAD:"),
        "a direct write pads to its block"
    );
    let o = format::scan(&bytes, None, |_| Ok(()));
    assert!(o.bad.is_none(), "{:?}", o.bad);
    let srv = start(&dir, &args);
    let mut r = Raw::connect(srv.port);
    for i in [0usize, 1, 150, 299] {
        let want = format!("${i}\r\n{}\r\n", "x".repeat(i));
        assert_eq!(r.call(&["GET", &format!("k{i}")]), want.as_bytes(), "k{i}");
    }
    assert_eq!(r.call(&["SET", "more", "1"]), b"+OK\r\n");
    drop(srv);
    let srv = start(&dir, &args);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["GET", "more"]), b"$1\r\n1\r\n");
    assert_eq!(r.call(&["GET", "k299"]).len(), 299 + 8);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_rewrites(r: &mut Raw, n: u64) {
    wait_until(DEADLINE, &format!("rewrite {n} finished"), || {
        r.info_u64("persistence", "aof_rewrites") >= n
            && r.info_field("persistence", "aof_rewrite_in_progress") == "0"
    });
}

/// `aof-recycle yes`: a rewrite keeps the incremental file it retires as the spare, and
/// the next rewrite's cut switches the log into it (renamed), old entries and all; after a
/// kill, recovery stops at the first old entry.
#[test]
fn recycled_segment_recovery_stops_at_the_right_entry() {
    let dir = temp_dir("recycle");
    let args = RECYCLED_1MB;
    {
        let srv = start(&dir, &args);
        let mut r = Raw::connect(srv.port);
        for i in 0..500 {
            assert_eq!(r.call(&["SET", &format!("old{i}"), "v"]), b"+OK\r\n");
        }
        assert!(String::from_utf8(r.call(&["BGREWRITEAOF"]))
            .unwrap()
            .starts_with('+'));
        wait_rewrites(&mut r, 1);
        assert!(dir.join("appendonlydir/appendonly.aof.spare.aof").exists());
        assert!(String::from_utf8(r.call(&["BGREWRITEAOF"]))
            .unwrap()
            .starts_with('+'));
        wait_rewrites(&mut r, 2);
        assert_eq!(
            r.info("persistence", "aof_recycled_files").as_deref(),
            Some("1")
        );
        for i in 0..20 {
            assert_eq!(r.call(&["SET", &format!("new{i}"), "w"]), b"+OK\r\n");
        }
        assert_eq!(r.call(&["DEL", "old7"]), b":1\r\n");
    } // SIGKILL: the new incremental file holds 21 entries, then the old ones
    let bytes = std::fs::read(incr_path(&dir)).unwrap();
    assert!(bytes.len() > 20_000, "the retired file was reused");
    let srv = start(&dir, &args);
    assert!(
        log(&dir).contains("recycled file's old content"),
        "{}",
        log(&dir)
    );
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["DBSIZE"]), b":519\r\n");
    assert_eq!(r.call(&["EXISTS", "old7"]), b":0\r\n");
    assert_eq!(r.call(&["GET", "new19"]), b"$1\r\nw\r\n");
    assert_eq!(r.call(&["SET", "later", "1"]), b"+OK\r\n");
    drop(srv);
    let srv = start(&dir, &args);
    let mut r = Raw::connect(srv.port);
    assert_eq!(r.call(&["DBSIZE"]), b":520\r\n");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tmpfs mounted with `size=`: the disk really fills. Without a watermark the write
/// that fails is sticky (-MISCONF, reads served, server up); with one, writes are refused
/// before the disk is full and accepted again by themselves when space returns.
#[test]
fn disk_full_on_a_small_tmpfs_keeps_the_server_up() {
    let mnt = temp_dir("tmpfs");
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&mnt)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "this test mounts a tmpfs (needs root)");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _guard = Unmount(mnt.clone());
    let val = "v".repeat(4000);
    {
        let dir = mnt.join("hard");
        std::fs::create_dir_all(&dir).unwrap();
        let srv = start(
            &dir,
            &[
                "--appendfsync",
                "always",
                "--aof-disk-min-free",
                "0",
                "--aof-preallocate-bytes",
                "1mb",
            ],
        );
        let mut misconf = None;
        let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for i in 0..5000 {
            match try_call_line(&mut s, &["SET", &format!("k{i}"), &val]) {
                Ok(rep) if rep.starts_with("-MISCONF") => {
                    misconf = Some(rep);
                    break;
                }
                Ok(rep) => assert_eq!(rep, "+OK", "k{i}"),
                // The connection whose write could not be made durable is closed (its
                // outcome is unknown, as after a crash).
                Err(_) => {
                    s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                }
            }
        }
        let m = misconf.expect("the disk never filled");
        assert!(m.contains("No space left on device"), "{m}");
        let mut r = Raw::connect(srv.port);
        assert_eq!(r.call(&["PING"]), b"+PONG\r\n");
        assert_eq!(r.call(&["GET", "k0"]).len(), 4000 + 9);
        assert!(String::from_utf8(r.call(&["SET", "x", "1"]))
            .unwrap()
            .starts_with("-MISCONF"));
        drop(srv);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    {
        let dir = mnt.join("watermark");
        std::fs::create_dir_all(&dir).unwrap();
        let srv = start(
            &dir,
            &[
                "--appendfsync",
                "always",
                "--aof-disk-min-free",
                "25%",
                "--aof-preallocate-bytes",
                "0",
            ],
        );
        let mut r = Raw::connect(srv.port);
        assert_eq!(r.call(&["SET", "a", "1"]), b"+OK\r\n");
        // Another tenant fills the filesystem to under 25 % free.
        let filler = mnt.join("filler");
        std::fs::write(&filler, vec![1u8; 6 << 20]).unwrap();
        wait_until(DEADLINE, "writes are refused", || {
            String::from_utf8(r.call(&["SET", "b", "2"]))
                .unwrap()
                .starts_with("-MISCONF Errors writing to the AOF file: No space left")
        });
        assert_eq!(r.call(&["GET", "a"]), b"$1\r\n1\r\n");
        std::fs::remove_file(&filler).unwrap();
        wait_until(DEADLINE, "writes are accepted again", || {
            r.call(&["SET", "c", "3"]) == b"+OK\r\n"
        });
        drop(srv);
        let srv = start(&dir, &["--aof-disk-min-free", "25%"]);
        let mut r = Raw::connect(srv.port);
        assert_eq!(r.call(&["MGET", "a", "c"]), b"*2\r\n$1\r\n1\r\n$1\r\n3\r\n");
        drop(srv);
    }
}
