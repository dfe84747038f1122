//! Files named for what they hold: the snapshot image goes to `image-filename`
//! (`dump.cimg`), `dbfilename` (`dump.rdb`) only ever holds an RDB (written when
//! `snapshot-format rdb` asks for one, and loaded by redis-server 7), startup loads the
//! newer of the two, and a directory where `dump.rdb` holds an image (the older layout)
//! still loads.

mod common;

use common::{server_log, start_debug as start, start_redis, temp_dir, wait_until, Raw, DEADLINE};
use std::path::Path;
use std::time::{Duration, SystemTime};

fn cmd(r: &mut Raw, args: &[&str]) -> String {
    String::from_utf8_lossy(&r.call(args)).into_owned()
}

fn wait_bgsave(r: &mut Raw) {
    wait_until(2 * DEADLINE, "BGSAVE ended", || {
        r.info_field("persistence", "rdb_bgsave_in_progress") == "0"
    });
    assert_eq!(r.info_field("persistence", "rdb_last_bgsave_status"), "ok");
}

/// Keys of every type, with a TTL, in two databases.
fn fill(r: &mut Raw) {
    for i in 0..300 {
        cmd(r, &["SET", &format!("s{i}"), &format!("value-{i}")]);
        cmd(r, &["RPUSH", "list", &format!("e{i}")]);
        cmd(r, &["HSET", "hash", &format!("f{i}"), &format!("v{i}")]);
        cmd(r, &["SADD", "set", &format!("m{i}")]);
        cmd(r, &["SADD", "ints", &i.to_string()]);
        cmd(
            r,
            &["ZADD", "zset", &format!("{}.5", i % 17), &format!("z{i}")],
        );
    }
    cmd(r, &["XADD", "stream", "1-1", "a", "1"]);
    cmd(r, &["XADD", "stream", "2-1", "b", "2"]);
    cmd(r, &["SET", "big", &"x".repeat(100_000)]);
    cmd(r, &["SET", "ttl", "v", "EX", "100000"]);
    cmd(r, &["SELECT", "3"]);
    cmd(r, &["SET", "in3", "three"]);
    cmd(r, &["SELECT", "0"]);
}

fn digest(r: &mut Raw) -> String {
    cmd(r, &["DEBUG", "DIGEST"])
}

/// Every key of db 0 with its DEBUG DIGEST-VALUE, sorted.
fn values(r: &mut Raw) -> Vec<(String, String)> {
    let keys = cmd(r, &["KEYS", "*"]);
    let mut names: Vec<String> = keys
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|k| {
            let d = cmd(r, &["DEBUG", "DIGEST-VALUE", &k]);
            (k, d)
        })
        .collect()
}

fn is_rdb(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"REDIS"))
}

fn is_image(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.starts_with(b"CAIRNIMG"))
}

fn set_mtime(path: &Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// Names in `dir` other than the server's log, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != common::LOG_FILE)
        .collect();
    v.sort();
    v
}

#[test]
fn the_image_lands_in_dump_cimg_and_dump_rdb_is_untouched() {
    // A Redis dump.rdb in the directory: cairn loads it (the only file), then its own
    // snapshots go to dump.cimg and leave dump.rdb as it was.
    let redis = start_redis(&["--enable-debug-command", "yes"]);
    let mut rr = Raw::connect(redis.port);
    fill(&mut rr);
    assert_eq!(cmd(&mut rr, &["SAVE"]), "+OK\r\n");
    let dir = temp_dir("files-image");
    std::fs::copy(redis.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let rdb_before = std::fs::read(dir.join("dump.rdb")).unwrap();
    let old = SystemTime::now() - Duration::from_secs(60);
    set_mtime(&dir.join("dump.rdb"), old);

    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    let want = digest(&mut r);
    assert_eq!(want, digest(&mut rr));
    assert_eq!(
        cmd(&mut r, &["CONFIG", "GET", "image-filename"]),
        "*2\r\n$14\r\nimage-filename\r\n$9\r\ndump.cimg\r\n"
    );
    assert_eq!(
        cmd(&mut r, &["CONFIG", "GET", "snapshot-format"]),
        "*2\r\n$15\r\nsnapshot-format\r\n$5\r\nimage\r\n"
    );
    cmd(&mut r, &["SET", "after", "load"]);
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    assert!(is_image(&dir.join("dump.cimg")));
    cmd(&mut r, &["SET", "after", "bgsave"]);
    assert_eq!(cmd(&mut r, &["BGSAVE"]), "+Background saving started\r\n");
    wait_bgsave(&mut r);
    let want = digest(&mut r);
    assert_eq!(std::fs::read(dir.join("dump.rdb")).unwrap(), rdb_before);
    let mtime = std::fs::metadata(dir.join("dump.rdb"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, old);
    assert_eq!(files(&dir), ["dump.cimg", "dump.rdb"]);
    drop(s);

    // The image is newer: the restart loads it, and says so.
    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    wait_until(DEADLINE, "the image loaded", || {
        cmd(&mut r, &["PING"]) == "+PONG\r\n"
    });
    assert_eq!(digest(&mut r), want);
    assert_eq!(cmd(&mut r, &["GET", "after"]), "$6\r\nbgsave\r\n");
    let log = server_log(&dir);
    assert!(
        log.contains("loading") && log.contains("dump.cimg, the newer"),
        "{log}"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn snapshot_format_rdb_writes_an_rdb_that_redis_loads() {
    for (tag, save) in [("bgsave", "BGSAVE"), ("save", "SAVE"), ("reload", "DEBUG")] {
        let dir = temp_dir(&format!("files-rdb-{tag}"));
        let s = start(
            &dir,
            &["--snapshot-format", "rdb", "--rdbcompression", "yes"],
        );
        let mut r = Raw::connect(s.port);
        fill(&mut r);
        cmd(
            &mut r,
            &[
                "FUNCTION",
                "LOAD",
                "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
            ],
        );
        let want = digest(&mut r);
        let want_values = values(&mut r);
        match save {
            "BGSAVE" => {
                assert_eq!(cmd(&mut r, &["BGSAVE"]), "+Background saving started\r\n");
                wait_bgsave(&mut r);
            }
            "SAVE" => assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n"),
            _ => {
                // DEBUG RELOAD saves the RDB and loads it back.
                assert_eq!(cmd(&mut r, &["DEBUG", "RELOAD"]), "+OK\r\n");
                assert_eq!(digest(&mut r), want);
                assert_eq!(values(&mut r), want_values);
            }
        }
        assert!(is_rdb(&dir.join("dump.rdb")), "{tag}");
        assert_eq!(
            files(&dir),
            ["dump.rdb"],
            "{tag}: only the RDB, no image, no temp file"
        );
        assert_eq!(
            r.info_field("persistence", "rdb_changes_since_last_save"),
            "0"
        );
        drop(s);

        // redis-server 7 loads the file: the same keys and values.
        let rdir = temp_dir(&format!("files-rdb-redis-{tag}"));
        std::fs::copy(dir.join("dump.rdb"), rdir.join("dump.rdb")).unwrap();
        let redis = start_redis(&[
            "--dir",
            rdir.to_str().unwrap(),
            "--dbfilename",
            "dump.rdb",
            "--enable-debug-command",
            "yes",
        ]);
        let mut rr = Raw::connect(redis.port);
        assert_eq!(digest(&mut rr), want, "{tag}");
        assert_eq!(values(&mut rr), want_values, "{tag}");
        assert_eq!(cmd(&mut rr, &["FCALL", "f", "0"]), ":1\r\n");
        drop(redis);

        // cairn restarts from it too.
        let s = start(&dir, &["--snapshot-format", "rdb"]);
        let mut r = Raw::connect(s.port);
        assert_eq!(digest(&mut r), want, "{tag}");
        assert_eq!(cmd(&mut r, &["FCALL", "f", "0"]), ":1\r\n");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&rdir);
    }
}

#[test]
fn startup_loads_the_newer_of_the_two_files() {
    let dir = temp_dir("files-newer");
    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    cmd(&mut r, &["SET", "from", "image"]);
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut r, &["CONFIG", "SET", "snapshot-format", "rdb"]),
        "+OK\r\n"
    );
    cmd(&mut r, &["SET", "from", "rdb"]);
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    drop(s);
    assert!(is_image(&dir.join("dump.cimg")) && is_rdb(&dir.join("dump.rdb")));
    let now = SystemTime::now();
    let (older, newer) = (now - Duration::from_secs(20), now - Duration::from_secs(10));

    // The RDB is newer.
    set_mtime(&dir.join("dump.cimg"), older);
    set_mtime(&dir.join("dump.rdb"), newer);
    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    assert_eq!(cmd(&mut r, &["GET", "from"]), "$3\r\nrdb\r\n");
    assert!(server_log(&dir).contains("dump.rdb, the newer"));
    drop(s);

    // The image is newer.
    std::fs::write(dir.join(common::LOG_FILE), "").unwrap();
    set_mtime(&dir.join("dump.cimg"), newer);
    set_mtime(&dir.join("dump.rdb"), older);
    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    wait_until(DEADLINE, "the image loaded", || {
        cmd(&mut r, &["GET", "from"]) == "$5\r\nimage\r\n"
    });
    assert!(server_log(&dir).contains("dump.cimg, the newer"));
    drop(s);

    // `appendonly yes` still means the log alone (here empty), whatever the files hold.
    let s = start(&dir, &["--appendonly", "yes"]);
    let mut r = Raw::connect(s.port);
    assert_eq!(cmd(&mut r, &["DBSIZE"]), ":0\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_image_in_dump_rdb_from_the_older_layout_still_loads() {
    let dir = temp_dir("files-old-layout");
    let s = start(&dir, &[]);
    let mut r = Raw::connect(s.port);
    fill(&mut r);
    let want = digest(&mut r);
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    drop(s);
    std::fs::rename(dir.join("dump.cimg"), dir.join("dump.rdb")).unwrap();
    // (image-filename is protected, as Redis's dbfilename: CONFIG SET needs this.)
    let s = start(&dir, &["--enable-protected-configs", "yes"]);
    let mut r = Raw::connect(s.port);
    wait_until(DEADLINE, "the image loaded", || {
        cmd(&mut r, &["DBSIZE"]) != ":0\r\n"
    });
    assert_eq!(digest(&mut r), want);
    let log = server_log(&dir);
    assert!(
        log.contains("Loading the snapshot image") && log.contains("dump.rdb"),
        "{log}"
    );
    // The next snapshot goes to the image's own name.
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    assert!(is_image(&dir.join("dump.cimg")));
    // A renamed image file: CONFIG SET image-filename, refused as a path.
    assert_eq!(
        cmd(&mut r, &["CONFIG", "SET", "image-filename", "other.cimg"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
    assert!(is_image(&dir.join("other.cimg")));
    assert_eq!(
        cmd(&mut r, &["CONFIG", "SET", "image-filename", "../x.cimg"]),
        "-ERR CONFIG SET failed (possibly related to argument 'image-filename') - image-filename can't be a path, just a filename\r\n"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_stops_a_background_rdb_write_and_leaves_no_file() {
    let dir = temp_dir("files-rdb-cancel");
    // 50 ms per key: the RDB write outlasts the test unless SHUTDOWN stops it.
    let mut s = start(
        &dir,
        &["--snapshot-format", "rdb", "--rdb-key-save-delay", "50000"],
    );
    let mut r = Raw::connect(s.port);
    fill(&mut r);
    assert_eq!(cmd(&mut r, &["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(r.info_field("persistence", "rdb_bgsave_in_progress"), "1");
    assert_eq!(
        cmd(&mut r, &["SAVE"]),
        "-ERR Background save already in progress\r\n"
    );
    r.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(r.closed(), "SHUTDOWN did not close the connection");
    wait_until(DEADLINE, "the server exited", || {
        s.child.try_wait().unwrap().is_some()
    });
    // Neither the capture nor a partial RDB is left; dump.rdb never appeared.
    assert_eq!(files(&dir), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// FLUSHALL as Redis's: with save points set, the emptied dataset is saved at once, so a
/// kill -9 right after it restarts empty (with the function libraries, which FLUSHALL
/// keeps), in both snapshot formats; without save points nothing is written.
#[test]
fn flushall_saves_the_emptied_dataset_when_save_points_are_set() {
    let lib = "#!lua name=kept\nredis.register_function('one', function() return 1 end)";
    for format in ["image", "rdb"] {
        let dir = temp_dir(&format!("files-flushall-{format}"));
        let args = ["--save", "3600 1", "--snapshot-format", format];
        let s = start(&dir, &args);
        let mut r = Raw::connect(s.port);
        fill(&mut r);
        assert_eq!(cmd(&mut r, &["FUNCTION", "LOAD", lib]), "$4\r\nkept\r\n");
        assert_eq!(cmd(&mut r, &["SAVE"]), "+OK\r\n");
        cmd(&mut r, &["SET", "after-save", "1"]);
        assert_eq!(cmd(&mut r, &["FLUSHALL"]), "+OK\r\n");
        // The flush still counts as a change (Redis keeps the dirty count too).
        assert_ne!(
            r.info_field("persistence", "rdb_changes_since_last_save"),
            "0"
        );
        drop(s); // SIGKILL: no save at exit
        let s = start(&dir, &args);
        let mut r = Raw::connect(s.port);
        wait_until(DEADLINE, "the snapshot loaded", || {
            cmd(&mut r, &["PING"]) == "+PONG\r\n"
        });
        let keyspace = cmd(&mut r, &["INFO", "keyspace"]);
        assert!(!keyspace.contains("db"), "{format}: {keyspace}");
        assert_eq!(cmd(&mut r, &["FCALL", "one", "0"]), ":1\r\n", "{format}");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let dir = temp_dir("files-flushall-nosave");
    let s = start(&dir, &["--save", ""]);
    let mut r = Raw::connect(s.port);
    fill(&mut r);
    assert_eq!(cmd(&mut r, &["FLUSHALL"]), "+OK\r\n");
    assert!(files(&dir).is_empty(), "{:?}", files(&dir));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
