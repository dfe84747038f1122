//! Redis 7 functions (FUNCTION *, FCALL, FCALL_RO): replies compared byte for byte with
//! Debian's redis-server 7.0 (load errors, calls, LIST, DUMP/RESTORE across both servers,
//! hostile RESTORE payloads), and the libraries through every restart path: SAVE (the
//! image), a Redis `dump.rdb`, `--export-rdb`, a plain AOF replay and BGREWRITEAOF.
//! FUNCTION KILL of a busy function with I/O threads.

mod common;

use cairn::persistence::rdb_value::crc64;
use common::{
    both, bulk_payload, same, same_str, same_unordered, server_log, show, start_on, temp_dir,
    wait_until, Raw, DEADLINE,
};
use std::path::Path;
use std::time::{Duration, Instant};

const LIB1: &str = "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('incr', keys[1]) end)";

/// A command with binary arguments, and its reply.
fn call_bytes(r: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    r.cmd(args);
    r.reply()
}

/// FUNCTION LOAD of `code` on both servers: identical replies.
fn load(rc: &mut Raw, rr: &mut Raw, code: &str) -> String {
    show(&same_str(rc, rr, &["FUNCTION", "LOAD", code]))
}

#[test]
fn load_errors_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    assert_eq!(load(&mut rc, &mut rr, LIB1), "$4\r\nlib1\r\n");
    let bad = [
        LIB1,
        "return 1",
        "#!lua",
        "#!lua name=ab",
        "#!lua name=a name=b\n",
        "#!lua foo=bar\n",
        "#!lua name=a-b\n",
        "#!lux name=ab\n",
        "#!lua name=ab\n",
        "#!lua name=ab\nredis.call('ping')",
        "#!lua name=ab\nreturn math.random()",
        "#!lua name=ab\na = 1",
        "#!lua name=ab\nredis.x = 1",
        "#!lua name=ab\nredis.register_function()",
        "#!lua name=ab\nredis.register_function('x')",
        "#!lua name=ab\nredis.register_function('x', 1)",
        "#!lua name=ab\nredis.register_function(1, 2, 3)",
        "#!lua name=ab\nredis.register_function({})",
        "#!lua name=ab\nredis.register_function({function_name='x'})",
        "#!lua name=ab\nredis.register_function({function_name='x', callback=1})",
        "#!lua name=ab\nredis.register_function({function_name={}, callback=function() end})",
        "#!lua name=ab\nredis.register_function({function_name='x', callback=function() end, flags='no-writes'})",
        "#!lua name=ab\nredis.register_function({function_name='x', callback=function() end, flags={'bad'}})",
        "#!lua name=ab\nredis.register_function({function_name='x', callback=function() end, foo=1})",
        "#!lua name=ab\nredis.register_function('a-b', function() end)",
        "#!lua name=ab\nredis.register_function('f1', function() end)",
        "#!lua name=ab\nredis.register_function('F1', function() end)",
        "#!lua name=ab\nredis.register_function('x', function() end) redis.register_function('x', function() end)",
        "#!lua name=ab\nerror('boom')",
        "#!lua name=ab\n\n\nlocal t = string.rep('x', 3)",
        "#!lua name=ab\nreturn (",
        "#!lua name=ab\nlocal x = redis.setresp",
        "#!lua name=ab\nlocal a = 1 while 1 do a = a + 1 end",
    ];
    for code in bad {
        let reply = load(&mut rc, &mut rr, code);
        assert!(reply.starts_with("-ERR "), "{code}: {reply}");
    }
    let cmds: &[&[&str]] = &[
        &["FUNCTION", "LOAD", "REPLACE", "REPLACE", LIB1],
        &["FUNCTION", "LOAD", "foo", LIB1],
        &["FUNCTION", "LOAD"],
        &["FUNCTION", "LIST", "LIBRARYNAME"],
        &["FUNCTION", "LIST", "foo"],
        &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
        &["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"],
        &["FUNCTION", "DELETE", "nope"],
        &["FUNCTION", "DELETE"],
        &["FUNCTION", "DELETE", "a", "b"],
        &["FUNCTION", "FLUSH", "foo"],
        &["FUNCTION", "FLUSH", "a", "b"],
        &["FUNCTION", "RESTORE", "a", "b", "c"],
        &["FUNCTION", "RESTORE", "bad"],
        &["FUNCTION", "RESTORE", "bad", "bad"],
        &["FUNCTION", "KILL"],
        &["FUNCTION", "DUMP", "x"],
        &["FUNCTION", "foo"],
        &["FUNCTION", "HELP"],
        &["FUNCTION", "STATS"],
        &["FUNCTION", "LIST"],
        &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "LIB*"],
        &["FUNCTION", "LIST", "LIBRARYNAME", "nomatch"],
    ];
    for cmd in cmds {
        same_str(&mut rc, &mut rr, cmd);
    }
    // The library survives the failed loads unchanged; a REPLACE swaps its code.
    assert_eq!(
        show(&same_str(&mut rc, &mut rr, &["FCALL", "f1", "1", "k"])),
        ":1\r\n"
    );
    let v2 = "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return 'v2' end)";
    same_str(&mut rc, &mut rr, &["FUNCTION", "LOAD", "REPLACE", v2]);
    same_str(&mut rc, &mut rr, &["FCALL", "F1", "1", "k"]);
    same_str(&mut rc, &mut rr, &["FUNCTION", "DELETE", "lib1"]);
    same_str(&mut rc, &mut rr, &["FCALL", "f1", "1", "k"]);
    same_str(&mut rc, &mut rr, &["FUNCTION", "STATS"]);
    // The engine and the `name=` key are read without case.
    for code in [
        "#!LUA name=upx\nredis.register_function('upx', function() return 1 end)",
        "#!lua NAME=upy\nredis.register_function('upy', function() return 1 end)",
    ] {
        load(&mut rc, &mut rr, code);
    }
    same_str(
        &mut rc,
        &mut rr,
        &["FUNCTION", "LIST", "LIBRARYNAME", "upx", "WITHCODE"],
    );
    same_str(&mut rc, &mut rr, &["FUNCTION", "DELETE", "upx"]);
    same_str(&mut rc, &mut rr, &["FUNCTION", "DELETE", "upy"]);
    // RESP3: maps, a set of flags, a null description.
    let one = "#!lua name=one\nredis.register_function{function_name='only', callback=function() return 1 end, flags={'no-writes', 'allow-oom'}}";
    load(&mut rc, &mut rr, one);
    // (HELLO's reply carries the client id, which differs.)
    rc.call(&["HELLO", "3"]);
    rr.call(&["HELLO", "3"]);
    same_str(&mut rc, &mut rr, &["FUNCTION", "LIST", "WITHCODE"]);
    same_str(&mut rc, &mut rr, &["FUNCTION", "STATS"]);
    same_str(&mut rc, &mut rr, &["FCALL_RO", "only", "0"]);
}

#[test]
fn fcall_runs_functions_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let lib = "#!lua name=lib2
redis.register_function{function_name='ro_set', callback=function(keys, args) return redis.call('set', keys[1], args[1]) end, flags={'no-writes'}, description='tries to write'}
redis.register_function{function_name='get', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes', 'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys'}}
redis.register_function('boom', function(keys, args) error('boom') end)
redis.register_function('errt', function(keys, args) return redis.error_reply('MY err') end)
redis.register_function('set', function(keys, args) return redis.call('set', keys[1], 'v') end)
redis.register_function('echo', function(keys, args) return {keys, args} end)
redis.register_function('noglobal', function(keys, args) return KEYS end)
redis.register_function('assign', function(keys, args) x = 1 end)
redis.register_function('reg', function(keys, args) return redis.register_function('a', function() end) end)
redis.register_function('resp3', function(keys, args) redis.setresp(3) return redis.call('hgetall', keys[1]) end)
redis.register_function('pcall', function(keys, args) return redis.pcall('incr', keys[1]) end)
redis.register_function('lib', function(keys, args) return {cjson.encode({1}), string.format('%d', 7), math.floor(2.5)} end)";
    assert_eq!(load(&mut rc, &mut rr, lib), "$4\r\nlib2\r\n");
    let cmds: &[&[&str]] = &[
        &["FCALL", "ro_set", "1", "k", "v"],
        &["FCALL", "set", "1", "k"],
        &["FCALL", "get", "1", "k"],
        &["FCALL_RO", "get", "1", "k"],
        &["FCALL_RO", "set", "1", "k"],
        &["FCALL", "boom", "0"],
        &["FCALL", "errt", "0"],
        &["FCALL", "echo", "2", "a", "b", "c", "d"],
        &["FCALL", "noglobal", "0"],
        &["FCALL", "assign", "0"],
        &["FCALL", "reg", "0"],
        &["HSET", "h", "f", "v"],
        &["FCALL", "resp3", "1", "h"],
        &["FCALL", "pcall", "1", "h"],
        &["FCALL", "lib", "0"],
        &["FCALL", "nope", "0"],
        &["FCALL", "nope", "x"],
        &["FCALL_RO", "nope", "0"],
        &["FCALL", "set", "2", "k"],
        &["FCALL", "set", "-1", "k"],
        &["FCALL", "set", "x", "k"],
        &["FCALL", "set"],
        &["FCALL", "SET", "1", "k2"],
        &["EVAL", "return redis.call('fcall', 'get', 1, 'k')", "0"],
        &["EVAL", "return redis.call('function', 'list')", "0"],
        &["MULTI"],
        &["FCALL", "set", "1", "m"],
        &["FCALL", "get", "1", "m"],
        &["EXEC"],
        &["FUNCTION", "LIST", "LIBRARYNAME", "lib2", "WITHCODE"],
    ];
    for field in ["number_of_functions", "number_of_libraries"] {
        assert_eq!(
            rc.info_u64("memory", field),
            rr.info_u64("memory", field),
            "{field}"
        );
    }
    assert!(rc.info_u64("memory", "used_memory_vm_functions") > 0);
    assert!(rc.info_u64("memory", "used_memory_functions") > lib.len() as u64);
    for cmd in cmds {
        if cmd.len() > 2 && cmd[..2] == ["FUNCTION", "LIST"] {
            // Functions within a library come in hash order in Redis.
            same_unordered(&mut rc, &mut rr, cmd);
        } else {
            same_str(&mut rc, &mut rr, cmd);
        }
    }
}

/// `body` framed as a DUMP payload: RDB version 10 and a correct CRC.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut v = body.to_vec();
    v.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

#[test]
fn dump_and_restore_cross_both_servers() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let lib3 = "#!lua name=lib3\nredis.register_function{function_name='g', callback=function(keys, args) return 'lib3' end, flags={'no-writes'}, description='d'}";
    // Redis's dump (its strings LZF-compressed) restores into cairn, and cairn's into Redis.
    rr.call(&["FUNCTION", "LOAD", LIB1]);
    rr.call(&["FUNCTION", "LOAD", lib3]);
    let from_redis = bulk_payload(&rr.call(&["FUNCTION", "DUMP"]));
    assert_eq!(
        show(&call_bytes(
            &mut rc,
            &[b"FUNCTION", b"RESTORE", &from_redis]
        )),
        "+OK\r\n"
    );
    same_unordered(&mut rc, &mut rr, &["FUNCTION", "LIST", "WITHCODE"]);
    same_str(&mut rc, &mut rr, &["FCALL", "g", "0"]);
    let from_cairn = bulk_payload(&rc.call(&["FUNCTION", "DUMP"]));
    same_str(&mut rc, &mut rr, &["FUNCTION", "FLUSH"]);
    for (policy, expect) in [
        ("APPEND", "+OK\r\n"),
        ("APPEND", "-ERR Library lib1 already exists\r\n"),
        ("REPLACE", "+OK\r\n"),
        ("FLUSH", "+OK\r\n"),
    ] {
        let cmd: [&[u8]; 4] = [b"FUNCTION", b"RESTORE", &from_cairn, policy.as_bytes()];
        // Which of the two libraries is found first is hash order in Redis.
        let a = show(&call_bytes(&mut rc, &cmd)).replace("lib3", "lib1");
        let b = show(&call_bytes(&mut rr, &cmd)).replace("lib3", "lib1");
        assert_eq!(a, expect, "{policy}");
        assert_eq!(b, expect, "{policy}");
    }
    same_unordered(&mut rc, &mut rr, &["FUNCTION", "LIST", "WITHCODE"]);
    // A function name owned by another library fails the whole restore, on both.
    same_str(&mut rc, &mut rr, &["FUNCTION", "DELETE", "lib3"]);
    let clash = "#!lua name=other\nredis.register_function('g', function() return 1 end)";
    same_str(&mut rc, &mut rr, &["FUNCTION", "LOAD", clash]);
    same(&mut rc, &mut rr, &[b"FUNCTION", b"RESTORE", &from_cairn]);
    same(
        &mut rc,
        &mut rr,
        &[b"FUNCTION", b"RESTORE", &from_cairn, b"REPLACE"],
    );
    same_unordered(&mut rc, &mut rr, &["FUNCTION", "LIST"]);
    // The release candidates' record (246) loads as the GA form.
    let mut rc_rec = vec![246u8];
    for s in [&b"oldlib"[..], b"LUA"] {
        rc_rec.push(s.len() as u8);
        rc_rec.extend_from_slice(s);
    }
    rc_rec.push(0);
    let blob = b"redis.register_function('old', function() return 'old' end)";
    rc_rec.push(blob.len() as u8);
    rc_rec.extend_from_slice(blob);
    same(
        &mut rc,
        &mut rr,
        &[b"FUNCTION", b"RESTORE", &framed(&rc_rec)],
    );
    same_str(&mut rc, &mut rr, &["FCALL", "old", "0"]);
    same_str(
        &mut rc,
        &mut rr,
        &["FUNCTION", "LIST", "LIBRARYNAME", "oldlib", "WITHCODE"],
    );
}

#[test]
fn hostile_restore_payloads_get_redis_errors() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    rr.call(&["FUNCTION", "LOAD", LIB1]);
    let good = bulk_payload(&rr.call(&["FUNCTION", "DUMP"]));
    rr.call(&["FUNCTION", "FLUSH"]);
    let body = &good[..good.len() - 10];
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 0xFF;
    let mut newer = body.to_vec();
    newer.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    let mut payloads: Vec<Vec<u8>> = vec![
        bad_crc,
        newer,
        good[..9].to_vec(),
        good[..good.len() - 1].to_vec(),
        framed(&body[..body.len() / 2]),
        framed(&body[..1]),
        framed(&[0u8, 1, b'a']),
        framed(&[9u8]),
        framed(&[245u8, 0xC3, 0x10, 0x7F]),
        framed(&[245u8, 0xBF]),
        framed(&[245u8, 0x80, 0xFF, 0xFF, 0xFF, 0xFF]),
        framed(&[246u8, 2, b'a', b'b']),
        framed(b"\xf5\x05#!lua"),
        framed(b"\xf5\x0f#!lua name=x\nx("),
        framed(b""),
    ];
    // Every single-byte truncation of the body.
    for cut in 1..body.len() {
        payloads.push(framed(&body[..cut]));
    }
    for p in &payloads {
        same(&mut rc, &mut rr, &[b"FUNCTION", b"RESTORE", p]);
    }
    // Nothing was half-restored.
    same_str(&mut rc, &mut rr, &["FUNCTION", "LIST"]);
    // A library whose code never returns is stopped (Redis would run it forever).
    let mut spin = vec![245u8];
    let code = b"#!lua name=spin\nwhile true do end";
    spin.push(code.len() as u8);
    spin.extend_from_slice(code);
    assert_eq!(
        show(&call_bytes(
            &mut rc,
            &[b"FUNCTION", b"RESTORE", &framed(&spin)]
        )),
        "-ERR Error registering functions: ERR FUNCTION LOAD timeout\r\n"
    );
    assert_eq!(show(&rc.call(&["FUNCTION", "LIST"])), "*0\r\n");
    assert_eq!(show(&rc.call(&["PING"])), "+PONG\r\n");
}

/// A cairn on `dir` with no save points (its log in `dir/cairn.log`).
fn start_in(dir: &Path, args: &[&str]) -> common::Srv {
    start_on(
        dir,
        &[&["--bind", "127.0.0.1", "--save", ""][..], args].concat(),
        &[],
    )
}

fn libs(r: &mut Raw) -> String {
    show(&r.call(&["FUNCTION", "LIST", "WITHCODE"]))
}

#[test]
fn libraries_survive_save_and_restart_and_export_to_redis() {
    let dir = temp_dir("functions-save");
    let lib3 = "#!lua name=lib3\nredis.register_function{function_name='g', callback=function(keys, args) return 'lib3' end, flags={'no-writes'}, description='d'}";
    let before;
    {
        let s = start_in(&dir, &[]);
        let mut r = Raw::connect(s.port);
        r.call(&["FUNCTION", "LOAD", LIB1]);
        r.call(&["FUNCTION", "LOAD", lib3]);
        assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":1\r\n");
        before = libs(&mut r);
        assert_eq!(show(&r.call(&["SAVE"])), "+OK\r\n");
    }
    {
        let s = start_in(&dir, &[]);
        let mut r = Raw::connect(s.port);
        assert_eq!(libs(&mut r), before);
        assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":2\r\n");
        // An empty library set saves as none (and BGSAVE takes them too).
        r.call(&["FUNCTION", "DELETE", "lib3"]);
        r.call(&["BGSAVE"]);
        wait_until(DEADLINE, "BGSAVE done", || {
            r.info_field("persistence", "rdb_bgsave_in_progress") == "0"
                && r.info_field("persistence", "rdb_changes_since_last_save") == "0"
        });
    }
    let s = start_in(&dir, &[]);
    let mut r = Raw::connect(s.port);
    assert_eq!(
        show(&r.call(&["FUNCTION", "LIST", "LIBRARYNAME", "lib3"])),
        "*0\r\n"
    );
    assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":3\r\n");
    r.call(&["SAVE"]);
    drop(s);
    // The image exports to an RDB file that redis-server loads, functions included.
    let rdir = temp_dir("functions-export");
    let out = rdir.join("dump.rdb");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_cairn-server"))
        .arg("--export-rdb")
        .arg(dir.join("dump.cimg"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", show(&st.stderr));
    let redis = start_redis_in(&rdir);
    let mut rr = Raw::connect(redis.port);
    assert_eq!(show(&rr.call(&["FCALL", "f1", "1", "k"])), ":4\r\n");
    assert!(show(&rr.call(&["FUNCTION", "LIST"])).contains("lib1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// redis-server on `dir` (it loads `dir/dump.rdb`), saving there on SAVE.
fn start_redis_in(dir: &Path) -> common::ServerProc {
    let port = common::free_port();
    let mut cmd = std::process::Command::new(common::redis_server_path());
    cmd.args([
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
    ])
    .arg("--dir")
    .arg(dir)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            if common::try_call_line(&mut s, &["PING"]).is_ok_and(|l| l.starts_with("+PONG")) {
                break;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "redis-server exited");
        assert!(start.elapsed() < DEADLINE, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    common::ServerProc {
        child,
        port,
        dir: dir.to_path_buf(),
    }
}

#[test]
fn a_redis_dump_with_functions_loads() {
    let rdir = temp_dir("functions-redis-rdb");
    let dir = temp_dir("functions-from-redis");
    {
        // (Dropping the server removes its directory: the dump is copied out first.)
        let redis = start_redis_in(&rdir);
        let mut rr = Raw::connect(redis.port);
        rr.call(&["FUNCTION", "LOAD", LIB1]);
        rr.call(&["SET", "k", "41"]);
        assert_eq!(show(&rr.call(&["SAVE"])), "+OK\r\n");
        std::fs::copy(rdir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    }
    let s = start_in(&dir, &[]);
    let mut r = Raw::connect(s.port);
    assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":42\r\n");
    assert!(libs(&mut r).contains("library_code"));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

fn aof_text(dir: &Path) -> String {
    let d = dir.join("appendonlydir");
    let mut names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    names.sort();
    let mut out = String::new();
    for p in names {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(p).unwrap()));
    }
    out.split("\r\n")
        .filter(|l| !l.starts_with('#') && !l.starts_with('*') && !l.starts_with('$'))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn aof_replay_and_rewrite_keep_libraries() {
    let dir = temp_dir("functions-aof");
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let lib2 = "#!lua name=lib2\nredis.register_function('f2', function() return 'two' end)";
    let lib3 = "#!lua name=lib3\nredis.register_function('f3', function() return 'three' end)";
    let expected;
    {
        let s = start_in(&dir, &args);
        let mut r = Raw::connect(s.port);
        r.call(&["FUNCTION", "LOAD", lib2]);
        let dump = bulk_payload(&r.call(&["FUNCTION", "DUMP"]));
        r.call(&["FUNCTION", "FLUSH"]);
        r.call(&["FUNCTION", "LOAD", LIB1]);
        assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":1\r\n");
        assert_eq!(
            show(&call_bytes(&mut r, &[b"FUNCTION", b"RESTORE", &dump])),
            "+OK\r\n"
        );
        r.call(&["FUNCTION", "LOAD", lib3]);
        r.call(&["FUNCTION", "DELETE", "lib3"]);
        // A failed load changes nothing and is not logged.
        r.call(&["FUNCTION", "LOAD", LIB1]);
        let text = aof_text(&dir);
        assert!(!text.contains("fcall"), "{text}");
        assert!(text.contains("incr k"), "{text}");
        let text = text.to_lowercase();
        assert_eq!(text.matches("function load").count(), 3, "{text}");
        assert!(text.contains("function flush"), "{text}");
        assert!(text.contains("function restore"), "{text}");
        assert!(text.contains("function delete lib3"), "{text}");
        expected = libs(&mut r);
    }
    // A plain replay of the log: FUNCTION LOAD, FLUSH, RESTORE, DELETE as logged.
    {
        let s = start_in(&dir, &args);
        let mut r = Raw::connect(s.port);
        assert_eq!(libs(&mut r), expected);
        assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":2\r\n");
        assert_eq!(show(&r.call(&["FCALL", "f2", "0"])), "$3\r\ntwo\r\n");
        // The rewrite's base carries the libraries.
        r.call(&["BGREWRITEAOF"]);
        wait_until(DEADLINE, "the rewrite finished", || {
            r.info_field("persistence", "aof_rewrites") == "1"
                && r.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
        assert!(!aof_text(&dir).contains("function"));
    }
    // Restart on the image base; then a rewrite into an RDB base (RDB function records).
    let rdb_args = [&args[..], &["--aof-use-rdb-preamble", "yes"]].concat();
    {
        let s = start_in(&dir, &rdb_args);
        let mut r = Raw::connect(s.port);
        assert_eq!(libs(&mut r), expected);
        assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":3\r\n");
        r.call(&["BGREWRITEAOF"]);
        wait_until(DEADLINE, "the RDB-base rewrite finished", || {
            r.info_field("persistence", "aof_rewrites") == "1"
                && r.info_field("persistence", "aof_rewrite_in_progress") == "0"
        });
    }
    let names: Vec<String> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".base.rdb")), "{names:?}");
    let s = start_in(&dir, &rdb_args);
    let mut r = Raw::connect(s.port);
    assert_eq!(libs(&mut r), expected);
    assert_eq!(show(&r.call(&["FCALL", "f1", "1", "k"])), ":4\r\n");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits for a reply on `r` for up to `secs` seconds.
fn reply_within(r: &mut Raw, secs: u64) -> String {
    r.s.set_read_timeout(Some(Duration::from_secs(secs)))
        .unwrap();
    show(&r.reply())
}

#[test]
fn function_kill_stops_a_busy_function_with_io_threads() {
    let dir = temp_dir("function-busy");
    let c = start_on(
        &dir,
        &["--io-threads", "2", "--busy-reply-threshold", "100"],
        &[],
    );
    let mut a = Raw::connect(c.port);
    let mut b = Raw::connect(c.port);
    let busy = |n: usize| {
        wait_until(DEADLINE, "a function to be busy", || {
            server_log(&dir).matches("Slow script detected").count() >= n
        })
    };
    let lib = "#!lua name=busy
redis.register_function('spin', function() local a = 0 while true do a = a + 1 end end)
redis.register_function('wspin', function(keys) redis.call('set', keys[1], '1') local t = os.clock() while os.clock() - t < 1.5 do end return 'done' end)";
    assert_eq!(show(&b.call(&["FUNCTION", "LOAD", lib])), "$4\r\nbusy\r\n");
    assert_eq!(
        show(&b.call(&["FUNCTION", "KILL"])),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    a.cmd(&[b"FCALL", b"spin", b"0"]);
    busy(1);
    let busy_text =
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
    assert_eq!(show(&b.call(&["PING"])), busy_text);
    // SCRIPT KILL does not stop a function.
    assert_eq!(show(&b.call(&["SCRIPT", "KILL"])), busy_text);
    assert_eq!(show(&b.call(&["FUNCTION", "KILL"])), "+OK\r\n");
    assert_eq!(
        reply_within(&mut a, 10),
        "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n"
    );
    assert_eq!(show(&b.call(&["PING"])), "+PONG\r\n");
    // A function that wrote cannot be killed; it runs to its end.
    a.cmd(&[b"FCALL", b"wspin", b"1", b"x"]);
    busy(2);
    let refused = show(&b.call(&["FUNCTION", "KILL"]));
    assert!(
        refused.starts_with("-UNKILLABLE Sorry the script already executed write commands"),
        "{refused}"
    );
    assert_eq!(reply_within(&mut a, 10), "$4\r\ndone\r\n");
    assert_eq!(show(&b.call(&["GET", "x"])), "$1\r\n1\r\n");
    // FUNCTION KILL does not stop an EVAL script.
    a.cmd(&[b"EVAL", b"while true do end", b"0"]);
    busy(3);
    assert_eq!(
        show(&b.call(&["FUNCTION", "KILL"])),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(show(&b.call(&["SCRIPT", "KILL"])), "+OK\r\n");
    assert!(reply_within(&mut a, 10).starts_with("-ERR Script killed"));
}
