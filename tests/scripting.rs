//! Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT): replies compared byte for
//! byte with Debian's redis-server 7.0 where the behaviour is deterministic, and
//! cairn-only checks for what a differential run cannot see (the AOF holding a script's
//! effects, the script cache in INFO, the slow-script log, hostile scripts).

mod common;

use common::{
    both, same, server_log, show, start_cairn, start_on, start_redis, temp_dir, wait_until, Raw,
    ServerProc, DEADLINE,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn eval<'a>(script: &'a str, rest: &[&'a str]) -> Vec<&'a [u8]> {
    let mut v: Vec<&[u8]> = vec![b"EVAL", script.as_bytes()];
    v.extend(rest.iter().map(|s| s.as_bytes()));
    v
}

/// Each script runs on both servers (`EVAL script 0`); replies must be identical.
fn same_scripts(rc: &mut Raw, rr: &mut Raw, scripts: &[&str]) {
    for s in scripts {
        same(rc, rr, &eval(s, &["0"]));
    }
}

#[test]
fn values_convert_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same_scripts(
        &mut rc,
        &mut rr,
        &[
            "return 1",
            "return -7",
            "return 3.99",
            "return -3.7",
            "return 1e300",
            "return math.huge",
            "return 0/0",
            "return 'text'",
            "return true",
            "return false",
            "return nil",
            "return {1, 2, 3, nil, 4}",
            "return {1, 'a', {2, 3}, {err='x'}, 2.5}",
            "return {1, {2, {3, {4}}}}",
            "return {}",
            "return {err='My Error'}",
            "return {err='-WITHDASH msg'}",
            "return {ok='fine'}",
            "return {ok='two\\r\\nlines'}",
            "return {ok=1}",
            "return {err=1}",
            "return {double=1.5}",
            "return {map={a=1}}",
            "return {set={a=true}}",
            "return {big_number='123'}",
            "return {verbatim_string={format='txt', string='hi'}}",
            "return redis.status_reply('FINE')",
            "return redis.error_reply('MY bad')",
            "return redis.error_reply('bad')",
            "return redis.error_reply('-bad')",
            "return redis.error_reply()",
            "return redis.status_reply(1)",
            "local t = {} t[1] = t return t",
            "return setmetatable({}, {})",
        ],
    );
}

#[test]
fn redis_call_converts_replies_and_arguments() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same(&mut rc, &mut rr, &[b"RPUSH", b"l", b"a", b"b"]);
    same(&mut rc, &mut rr, &[b"HSET", b"h", b"f", b"v"]);
    same_scripts(
        &mut rc,
        &mut rr,
        &[
            "return redis.call('get', 'nokey')",
            "return type(redis.call('get', 'nokey'))",
            "return redis.call('ping')",
            "return redis.call('ping')['ok']",
            "return type(redis.call('ping'))",
            "return redis.call('set', 'k', 1.5)",
            "return redis.call('get', 'k')",
            "redis.call('set', 'k', 0.1) return redis.call('get', 'k')",
            "redis.call('set', 'k', 42) return redis.call('incr', 'k')",
            "return redis.call('lrange', 'l', 0, -1)",
            "return redis.call('hgetall', 'h')",
            "return redis.call('hgetall', 'nokey')",
            "return redis.call('mget', 'k', 'nokey', 'k')",
            "return #redis.call('mget', 'k', 'nokey', 'k')",
            "return redis.call('exists', 'k', 'l', 'nokey')",
            "return redis.call('command', 'count') > 0",
            "return redis.call('set', 'k', {})",
            "return redis.call('set', 'k', true)",
            "return redis.call()",
            "return redis.pcall()",
            "return redis.call(1)",
            "return redis.call('nosuch')",
            "return redis.pcall('nosuch')",
            "return redis.pcall('nosuch').err",
            "return redis.call('get')",
            "return redis.call('lpush', 'k', 'x')",
            "return redis.pcall('lpush', 'k', 'x')",
            "return redis.pcall('incr', 'l')",
            "local ok, e = pcall(redis.call, 'nosuch') return e",
            "local ok, e = pcall(function() return redis.call('lpush', 'k', 1) end) return e",
            "local ok, e = pcall(function() error({err='X y'}) end) return e",
            "return {pcall(redis.call, 'nosuch')}",
            "return redis.call('select', 20)",
            "redis.call('select', 1) redis.call('set', 'indb1', 'x') return redis.call('dbsize')",
            "return redis.call('dbsize')",
            "return redis.call('get', 'indb1')",
            "return redis.call('blmpop', '0', '1', 'nolist', 'left')",
            "return redis.call('bzpopmin', 'nozset', 0)",
        ],
    );
    // The script's SELECT did not change the caller's database.
    same(&mut rc, &mut rr, &[b"GET", b"indb1"]);
    same(&mut rc, &mut rr, &[b"DBSIZE"]);
}

#[test]
fn commands_refused_inside_scripts() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    for cmd in [
        "'eval', 'return 1', '0'",
        "'evalsha', 'a', '0'",
        "'script', 'flush'",
        "'multi'",
        "'exec'",
        "'watch', 'k'",
        "'subscribe', 'c'",
        "'blpop', 'nolist', 0",
        "'brpoplpush', 'a', 'b', 0",
        "'shutdown'",
        "'client', 'list'",
        "'client', 'id'",
        "'hello', '3'",
        "'auth', 'x'",
        "'config', 'get', 'maxmemory'",
        "'debug', 'sleep', '0'",
        "'save'",
        "'bgsave'",
        "'bgrewriteaof'",
        "'reset'",
    ] {
        same_scripts(
            &mut rc,
            &mut rr,
            &[
                &format!("return redis.call({cmd})"),
                &format!("return redis.pcall({cmd})"),
            ],
        );
    }
}

#[test]
fn errors_and_sandbox_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same_scripts(
        &mut rc,
        &mut rr,
        &[
            "return x",
            "x = 1",
            "_G.x = 5",
            "rawset(_G, 'x', 5) return x",
            "return rawset(_G, 'x', 5)",
            "redis.call = nil return 1",
            "string.foo = 1 return 1",
            "cjson.x = 1 return 1",
            "math.floor = nil",
            "getmetatable('').__index.rep = nil return 1",
            "getmetatable('').__index = {} return 1",
            "getmetatable('').__foo = 1 return 1",
            "return getmetatable('').__index == string",
            "return ('x'):upper() .. ('ab'):rep(2)",
            "return setmetatable(_G, nil)",
            "return (",
            "return 1 +",
            "error('boom')",
            "\n\nerror('on line three')",
            "error({err='MYERR boom'})",
            "error({err='no code'})",
            "return 'x' .. nil",
            "local t = nil return t.x",
            "local function f(n) return f(n + 1) + 1 end return f(1)",
            "return type(io)",
            "return type(require)",
            "return type(loadfile)",
            "return type(dofile)",
            "return type(print)",
            "return type(setfenv)",
            "return type(getfenv)",
            "return type(module)",
            "return type(debug)",
            "return type(newproxy)",
            "return type(loadstring)",
            "return type(gcinfo)",
            "return type(collectgarbage)",
            "return type(_G)",
            "return loadstring('return 1')()",
            "return loadstring(string.dump(function() return 1 end))",
            "return type(string.dump)",
            "\x1bLuaQ",
            "return #KEYS + #ARGV",
            "KEYS[1] = 'x' return KEYS[1]",
            "return redis.sha1hex('')",
            "return redis.sha1hex('abc')",
            "return redis.sha1hex()",
            "return redis.REDIS_VERSION",
            "return redis.REDIS_VERSION_NUM",
            "return redis.replicate_commands()",
            "return redis.setresp(3)",
            "return redis.setresp(4)",
            "return redis.setresp()",
            "return redis.set_repl(redis.REPL_ALL)",
            "return redis.set_repl(99)",
            "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
            "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
            "return redis.log(redis.LOG_DEBUG, 'hello', 1)",
            "return redis.log(99, 'hello')",
            "return redis.log(1)",
            "return math.randomseed(7)",
            "return string.format('%d-%s', 5, 'x')",
            "return table.concat({'a', 'b'}, ',')",
            "return tostring(3.5)",
            "return tonumber('0x10')",
            "return string.rep('x', 2^31)",
        ],
    );
}

#[test]
fn libraries_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same_scripts(
        &mut rc,
        &mut rr,
        &[
            "return cjson.encode({1,2,3})",
            "return cjson.encode({a=1})",
            "return cjson.encode({a={b={1,2}}})",
            "return cjson.encode({})",
            "return cjson.encode('a\"b/c\\n\\1')",
            "return cjson.encode(1.5)",
            "return cjson.encode(0.1)",
            "return cjson.encode(1e20)",
            "return cjson.encode(-0.000001)",
            "return cjson.encode(cjson.null)",
            "return cjson.encode({1,nil,3})",
            "return cjson.encode({[1]=1,[5]=2})",
            "return cjson.encode({[1]=1,[20]=2})",
            "return cjson.encode(function() end)",
            "return cjson.encode(0/0)",
            "local t = {} t[1] = t return cjson.encode(t)",
            "return cjson.decode('[1,2,{\"a\":null}]')[3].a == cjson.null",
            "return cjson.decode('{\"a\":[1,2.5,\"x\",true]}').a[3]",
            "return cjson.decode('{\"a\":[1,2.5,\"x\",true]}').a[2] * 2",
            "return cjson.decode('\"\\\\u00e9\\\\n\"')",
            "return cjson.decode('  [ ]  ')[1] == nil",
            "return type(cjson.decode('null'))",
            "return cjson.decode('bad')",
            "return cjson.decode('[1,2')",
            "return cjson.decode('{1:2}')",
            "return cjson.decode('{\"a\" 1}')",
            "return cjson.decode('[1] x')",
            "return cjson.decode(string.rep('[', 1100))",
            "return cmsgpack.pack({1,2,3})",
            "return cmsgpack.pack({a=1})",
            "return cmsgpack.pack(1.5)",
            "return cmsgpack.pack(0.1)",
            "return cmsgpack.pack(-1, 300, 70000, 'abc', true, false, nil)",
            "return cmsgpack.pack(-100, -1000, -100000, -10000000000, 10000000000)",
            "return cmsgpack.pack(string.rep('a', 40), string.rep('b', 300))",
            "return #cmsgpack.pack(string.rep('a', 70000))",
            "local t = {} t[1] = t return cmsgpack.pack(t)",
            "return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1, 2}))}",
            "return cmsgpack.unpack(cmsgpack.pack({x = 7})).x",
            "return cmsgpack.unpack('')",
            "return cmsgpack.unpack('\\145')",
            "return cmsgpack.unpack('\\255\\1')",
            "return cmsgpack.pack()",
            "return bit.band(0xff, 0x0f)",
            "return bit.bor(1, 2, 4)",
            "return bit.bxor(5, 3)",
            "return bit.tohex(255)",
            "return bit.tohex(-1, -4)",
            "return bit.tohex(-1)",
            "return bit.lshift(1, 31)",
            "return bit.rshift(-1, 28)",
            "return bit.arshift(-256, 4)",
            "return bit.bnot(0)",
            "return bit.rol(0x12345678, 8)",
            "return bit.ror(0x12345678, 8)",
            "return bit.bswap(0x12345678)",
            "return bit.tobit(2^32 + 5)",
            "return bit.band()",
            "return bit.band('x')",
            "return struct.pack('>I2', 258)",
            "return struct.pack('<i4', -2)",
            "return struct.pack('bs', 1, 'abc')",
            "return struct.pack('>d', 1.5)",
            "return struct.pack('x')",
            "return {struct.unpack('>I2', struct.pack('>I2', 258))}",
            "return {struct.unpack('<i4', 'abcd')}",
            "return {struct.unpack('<h', '\\255\\255')}",
            "return {struct.unpack('s', 'ab\\0cd')}",
            "return {struct.unpack('Bc0', '\\3abc')}",
            "return struct.size('>iI2d')",
            "return struct.pack('q')",
            "return struct.unpack('>I4', 'ab')",
            "return struct.size('s')",
            "return struct.pack('!3i')",
        ],
    );
}

#[test]
fn eval_arguments_evalsha_and_script_commands() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let t = |rc: &mut Raw, rr: &mut Raw, a: &[&str]| {
        let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
        same(rc, rr, &v);
    };
    for a in [
        &[
            "EVAL",
            "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}",
            "2",
            "k1",
            "k2",
            "a1",
            "a2",
        ][..],
        &["EVAL", "return 1", "-1"],
        &["EVAL", "return 1", "2", "a"],
        &["EVAL", "return 1", "x"],
        &["EVAL", "return 1"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &["EVALSHA", "abc", "0"],
        &["SCRIPT", "LOAD", "return 'loaded'"],
        &["EVALSHA", "3f8c1e0a2b2d3b6e5b2f1c2e0e1a5b7f6a2e4c1d", "0"],
        &[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "ffffffffffffffffffffffffffffffffffffffff",
        ],
        &["EVAL", "return 1", "0"],
        &[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB",
        ],
        &["EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
        &[
            "EVALSHA_RO",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            "0",
        ],
        &["SCRIPT", "FLUSH", "bogus"],
        &["SCRIPT", "FLUSH", "sync", "async"],
        &["SCRIPT", "FLUSH", "ASYNC"],
        &[
            "SCRIPT",
            "EXISTS",
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        ],
        &["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "KILL"],
        &["SCRIPT"],
        &["SCRIPT", "LOAD"],
        &["SCRIPT", "EXISTS"],
        &["SCRIPT", "NOSUCH"],
        &["SCRIPT", "LOAD", "return ("],
        &["SCRIPT", "LOAD", "#!lua flags=bogus\nreturn 1"],
    ] {
        t(&mut rc, &mut rr, a);
    }
    // SCRIPT LOAD answers the body's SHA-1 (the same as Redis's), which EVALSHA runs.
    let loaded = same(&mut rc, &mut rr, &[b"SCRIPT", b"LOAD", b"return ARGV[1]"]);
    let sha = show(&loaded).lines().nth(1).unwrap().to_string();
    assert_eq!(sha.len(), 40);
    t(&mut rc, &mut rr, &["EVALSHA", &sha, "0", "arg"]);
    t(&mut rc, &mut rr, &["EVALSHA_RO", &sha, "0", "arg"]);
}

#[test]
fn shebang_flags_and_read_only_scripts() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let t = |rc: &mut Raw, rr: &mut Raw, a: &[&str]| {
        let v: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
        same(rc, rr, &v);
    };
    for a in [
        &["EVAL_RO", "return redis.call('set', 'a', 'b')", "0"][..],
        &["EVAL_RO", "return redis.pcall('set', 'a', 'b')", "0"],
        &["EVAL_RO", "return redis.call('get', 'a')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "0"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"],
        &["EVAL", "#!lua flags=bogus\nreturn 1", "0"],
        &["EVAL", "#!lux\nreturn 1", "0"],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &["EVAL", "#!lua", "0"],
        &["EVAL", "#!lua x=1\nreturn 1", "0"],
        &["EVAL", "#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 1", "0"],
        &["EVAL", "#!lua\nreturn redis.call('set', 'a', 'b')", "0"],
        &["EVAL", "#!lua\n\nerror('line three')", "0"],
        &["EVAL_RO", "#!lua\nreturn 1", "0"],
        &["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"],
        // Keys not declared in KEYS still work.
        &["EVAL", "redis.call('set', 'undeclared', '1') return redis.call('get', 'undeclared')", "0"],
    ] {
        t(&mut rc, &mut rr, a);
    }
}

#[test]
fn resp3_replies_as_redis_7() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    rc.call(&["HELLO", "3"]);
    rr.call(&["HELLO", "3"]);
    same(&mut rc, &mut rr, &[b"HSET", b"h", b"f", b"v"]);
    same(&mut rc, &mut rr, &[b"SADD", b"s", b"m"]);
    same(&mut rc, &mut rr, &[b"ZADD", b"z", b"1.5", b"m"]);
    same_scripts(
        &mut rc,
        &mut rr,
        &[
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "redis.setresp(3) local r = redis.call('hgetall', 'h') return type(r.map)",
            "redis.setresp(3) return redis.call('smembers', 's')",
            "redis.setresp(3) return redis.call('zscore', 'z', 'm')",
            "redis.setresp(3) return redis.call('zscore', 'z', 'm')['double'] * 2",
            "redis.setresp(3) return redis.call('get', 'nokey')",
            "redis.setresp(3) return type(redis.call('get', 'nokey'))",
            "redis.setresp(3) return {redis.call('set', 'x', '1')}",
            "redis.setresp(3) return redis.call('exists', 'x')",
            "redis.setresp(3) return true",
            "redis.setresp(3) return false",
            "return redis.call('hgetall', 'h')",
            "return redis.call('zscore', 'z', 'm')",
            "return {map={a=1}}",
            "return {double=1.5}",
            "return true",
            "return false",
            "return nil",
            "return {set={a=true}}",
            "return {big_number='123'}",
            "return {verbatim_string={format='txt', string='hi'}}",
        ],
    );
}

#[test]
fn watch_and_transactions_see_script_writes() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    let mut other_c = Raw::connect(_c.port);
    let mut other_r = Raw::connect(_r.port);
    for (me, other) in [(&mut rc, &mut other_c), (&mut rr, &mut other_r)] {
        me.call(&["WATCH", "w"]);
        other.call(&["EVAL", "return redis.call('set', 'w', '1')", "0"]);
        me.call(&["MULTI"]);
        me.call(&["GET", "w"]);
    }
    same(&mut rc, &mut rr, &[b"EXEC"]);
    same(&mut rc, &mut rr, &[b"MULTI"]);
    same(
        &mut rc,
        &mut rr,
        &eval("return redis.call('incr', 'w')", &["0"]),
    );
    same(
        &mut rc,
        &mut rr,
        &eval("return redis.call('lpush', 'w', 'x')", &["0"]),
    );
    same(&mut rc, &mut rr, &[b"EXEC"]);
}

// ---- cairn only ---------------------------------------------------------------------

#[test]
fn script_cache_in_info_and_command_stats() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    assert_eq!(r.info_u64("memory", "number_of_cached_scripts"), 0);
    assert_eq!(show(&r.call(&["EVAL", "return 1", "0"])), ":1\r\n");
    r.call(&["SCRIPT", "LOAD", "return 2"]);
    assert_eq!(r.info_u64("memory", "number_of_cached_scripts"), 2);
    assert!(r.info_u64("memory", "used_memory_scripts_eval") >= "return 1return 2".len() as u64);
    assert!(r.info_u64("memory", "used_memory_lua") > 0);
    assert_eq!(
        r.info_u64("memory", "used_memory_scripts"),
        r.info_u64("memory", "used_memory_scripts_eval")
    );
    r.call(&[
        "EVAL",
        "redis.call('set', 'a', '1') redis.call('get', 'a') return 1",
        "0",
    ]);
    let stats = show(&r.call(&["INFO", "commandstats"]));
    assert!(stats.contains("cmdstat_eval:calls=2,"), "{stats}");
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_get:calls=1,"), "{stats}");
    assert_eq!(show(&r.call(&["SCRIPT", "FLUSH"])), "+OK\r\n");
    assert_eq!(r.info_u64("memory", "number_of_cached_scripts"), 0);
    assert_eq!(r.info_u64("memory", "used_memory_scripts_eval"), 0);
    // A flushed cache forgets what scripts left behind, and scripts work again.
    assert_eq!(show(&r.call(&["EVAL", "return 3", "0"])), ":3\r\n");
}

#[test]
fn hostile_scripts_get_errors_and_the_server_goes_on() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    let expect_err = |r: &mut Raw, script: &str, needle: &str| {
        let reply = show(&r.call(&["EVAL", script, "0"]));
        assert!(
            reply.starts_with('-') && reply.contains(needle),
            "{script}: {reply}"
        );
    };
    expect_err(
        &mut r,
        "local function f() return f() + 1 end return f()",
        "stack overflow",
    );
    expect_err(
        &mut r,
        "local s = string.rep('y', 2^20) while true do s = s .. s end",
        "not enough memory",
    );
    expect_err(
        &mut r,
        "return cjson.decode(string.rep('{\"a\":', 5000))",
        "nested",
    );
    expect_err(
        &mut r,
        "return cmsgpack.unpack(string.rep('\\145', 5000))",
        "",
    );
    expect_err(
        &mut r,
        "return cmsgpack.unpack('\\221\\255\\255\\255\\255')",
        "Missing bytes",
    );
    expect_err(&mut r, "return struct.unpack('c0', '')", "");
    expect_err(&mut r, "return struct.pack('i99', 1)", "larger than limit");
    expect_err(
        &mut r,
        "return redis.call('eval', 'return 1', 0)",
        "not allowed from script",
    );
    expect_err(
        &mut r,
        "return redis.call('blpop', 'l', 0)",
        "not allowed from script",
    );
    expect_err(&mut r, "return loadstring(string.rep('(', 1000))()", "");
    expect_err(&mut r, "local co = coroutine.create(function() error('in co') end) local ok, e = coroutine.resume(co) error(e)", "in co");
    // A huge return value is sent whole.
    let big = r.call(&[
        "EVAL",
        "local t = {} for i = 1, 200000 do t[i] = i end return t",
        "0",
    ]);
    assert!(show(&big[..12]).starts_with("*200000\r\n"));
    // The deep table is cut where Redis cuts it, with its error text.
    let deep = show(&r.call(&["EVAL", "local t = {} t[1] = t return t", "0"]));
    assert!(deep.contains("-ERR reached lua stack limit"));
    // A blocking pop that is allowed in scripts answers at once.
    assert_eq!(
        show(&r.call(&[
            "EVAL",
            "return redis.call('blmpop', '0', '1', 'nolist', 'left')",
            "0"
        ])),
        "$-1\r\n"
    );
    // Still serving, and the state still works after a memory error.
    assert_eq!(show(&r.call(&["PING"])), "+PONG\r\n");
    assert_eq!(show(&r.call(&["EVAL", "return #KEYS", "1", "k"])), ":1\r\n");
}

#[test]
fn blocked_clients_are_served_by_script_writes() {
    let c = start_cairn(&[]);
    let mut waiter = Raw::connect(c.port);
    let mut r = Raw::connect(c.port);
    waiter.cmd(&[b"BLPOP", b"q", b"5"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        show(&r.call(&[
            "EVAL",
            "return redis.call('rpush', KEYS[1], 'job')",
            "1",
            "q"
        ])),
        ":1\r\n"
    );
    assert_eq!(show(&waiter.reply()), "*2\r\n$1\r\nq\r\n$3\r\njob\r\n");
}

#[test]
fn slow_scripts_are_logged_after_the_threshold() {
    let dir = std::env::temp_dir().join(format!("cairn-scripting-slow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log.txt");
    let c = start_cairn(&["--lua-time-limit", "50", "--logfile", log.to_str().unwrap()]);
    let mut r = Raw::connect(c.port);
    assert_eq!(
        show(&r.call(&["CONFIG", "GET", "busy-reply-threshold"])),
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$2\r\n50\r\n"
    );
    let script = "local t = os.clock() while os.clock() - t < 0.3 do end return 'done'";
    assert_eq!(show(&r.call(&["EVAL", script, "0"])), "$4\r\ndone\r\n");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("Slow script detected: still in execution after"),
        "{text}"
    );
    // A quick script is not.
    r.call(&["CONFIG", "SET", "busy-reply-threshold", "100000"]);
    r.call(&["EVAL", "return 1", "0"]);
    let n = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .matches("Slow script")
        .count();
    assert_eq!(n, 1);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the AOF holds a script's effects ---------------------------------------------------

/// A cairn on `dir` (its log in `dir/cairn.log`), no save points.
fn start_in(dir: &Path, args: &[&str]) -> common::Srv {
    start_on(
        dir,
        &[&["--bind", "127.0.0.1", "--save", ""][..], args].concat(),
        &[],
    )
}

fn incr_text(dir: &Path) -> String {
    let d: PathBuf = dir.join("appendonlydir");
    let mut out = String::new();
    let mut names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    names.sort();
    for p in names {
        out.push_str(&String::from_utf8_lossy(&std::fs::read(p).unwrap()));
    }
    // The commands only (cairn's entry headers are comment lines).
    out.split("\r\n")
        .filter(|l| !l.starts_with('#') && !l.starts_with('*') && !l.starts_with('$'))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn aof_logs_script_effects_never_the_script() {
    let dir = std::env::temp_dir().join(format!("cairn-scripting-aof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    {
        let s = start_in(&dir, &args);
        let mut r = Raw::connect(s.port);
        let calls = [
            "redis.call('set', 'a', '1') redis.call('incr', 'a') redis.call('select', '2') redis.call('set', 'b', 'x') return 1",
            "return redis.call('set', 'c', '1', 'EX', '1000')",
            "return redis.call('get', 'a')",
            "redis.set_repl(redis.REPL_NONE) redis.call('set', 'norepl', '1') redis.set_repl(redis.REPL_ALL) return redis.call('set', 'yesrepl', '1')",
            "redis.call('set', 'half', '1') return redis.call('lpush', 'half', 'x')",
        ];
        for s in calls {
            let reply = r.call(&["EVAL", s, "0"]);
            assert!(!reply.is_empty());
        }
        r.call(&["MULTI"]);
        r.call(&[
            "EVAL",
            "redis.call('set', 'm1', '1') return redis.call('set', 'm2', '1')",
            "0",
        ]);
        r.call(&["SET", "m3", "1"]);
        r.call(&["EXEC"]);
        let text = incr_text(&dir);
        assert!(!text.to_lowercase().contains("eval"), "{text}");
        assert!(
            text.contains("SELECT 0 MULTI set a 1 incr a SELECT 2 set b x EXEC"),
            "{text}"
        );
        // One write alone is not wrapped; its relative TTL became absolute.
        assert!(text.contains("EXEC SELECT 0 SET c 1 PXAT "), "{text}");
        assert!(!text.contains("norepl"), "{text}");
        assert!(text.contains("set yesrepl 1"), "{text}");
        // A script that failed half way keeps (and logs) what it did.
        assert!(text.contains("set half 1"), "{text}");
        // Inside MULTI the transaction's own block wraps the script's writes.
        assert!(
            text.contains("MULTI set m1 1 set m2 1 SET m3 1 EXEC"),
            "{text}"
        );
    }
    // Restart: the log replays to the same data without running any script.
    let s = start_in(&dir, &args);
    let mut r = Raw::connect(s.port);
    assert_eq!(show(&r.call(&["GET", "a"])), "$1\r\n2\r\n");
    assert_eq!(
        show(&r.call(&["EXISTS", "c", "yesrepl", "half", "m1", "m2", "m3"])),
        ":6\r\n"
    );
    assert_eq!(show(&r.call(&["EXISTS", "norepl"])), ":0\r\n");
    r.call(&["SELECT", "2"]);
    assert_eq!(show(&r.call(&["GET", "b"])), "$1\r\nx\r\n");
    assert_eq!(r.info_u64("memory", "number_of_cached_scripts"), 0);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_of_memory_rules_for_scripts() {
    // maxmemory below what the server already uses: every denyoom write is refused.
    let c: ServerProc = start_cairn(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let mut r = Raw::connect(c.port);
    let reply = show(&r.call(&["EVAL", "return redis.call('set', 'k', 'v')", "0"]));
    assert!(
        reply.starts_with("-OOM command not allowed when used memory > 'maxmemory'. script: "),
        "{reply}"
    );
    // Reads and non-denyoom writes go on; allow-oom and no-writes scripts run.
    assert_eq!(
        show(&r.call(&["EVAL", "return redis.call('del', 'k')", "0"])),
        ":0\r\n"
    );
    assert_eq!(
        show(&r.call(&[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set', 'k', 'v')",
            "0"
        ])),
        "+OK\r\n"
    );
    assert_eq!(
        show(&r.call(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', 'k')",
            "0"
        ])),
        "$1\r\nv\r\n"
    );
    assert_eq!(
        show(&r.call(&["EVAL", "#!lua\nreturn 1", "0"])),
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
}

#[test]
fn script_kill_with_nothing_running() {
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    assert_eq!(
        show(&r.call(&["SCRIPT", "KILL"])),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn os_offers_only_clock() {
    // Redis 7.2 added os.clock (7.0 has no os at all); nothing else of os is reachable.
    let c = start_cairn(&[]);
    let mut r = Raw::connect(c.port);
    assert_eq!(
        show(&r.call(&["EVAL", "return type(os.clock())", "0"])),
        "$6\r\nnumber\r\n"
    );
    for f in [
        "time", "execute", "exit", "getenv", "remove", "rename", "tmpname", "date",
    ] {
        let reply = show(&r.call(&["EVAL", &format!("return os.{f}()"), "0"]));
        assert!(
            reply.starts_with("-ERR user_script:1: attempt to call field '"),
            "{f}: {reply}"
        );
    }
    let reply = show(&r.call(&["EVAL", "os.exit = function() end", "0"]));
    assert!(
        reply.contains("Attempt to modify a readonly table"),
        "{reply}"
    );
}

/// Waits for a reply on `r` for up to `secs` seconds.
fn reply_within(r: &mut Raw, secs: u64) -> String {
    r.s.set_read_timeout(Some(Duration::from_secs(secs)))
        .unwrap();
    show(&r.reply())
}

#[test]
fn busy_scripts_answer_others_and_obey_script_kill_with_io_threads() {
    let dir = temp_dir("script-busy");
    let c = start_on(
        &dir,
        &["--io-threads", "2", "--busy-reply-threshold", "100"],
        &[],
    );
    let mut a = Raw::connect(c.port);
    let mut b = Raw::connect(c.port);
    // The busy state starts with the slow-script line (the flag is raised before it is
    // logged): wait for the n-th one, whatever the machine's load, before asking anything
    // that would otherwise queue behind the script.
    let busy = |n: usize| {
        wait_until(DEADLINE, "a script to be busy", || {
            server_log(&dir).matches("Slow script detected").count() >= n
        })
    };
    // Nothing runs: SCRIPT KILL has nothing to stop.
    assert_eq!(
        show(&b.call(&["SCRIPT", "KILL"])),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    let spin = "local i = 0 while true do i = i + 1 end";
    a.cmd(&eval(spin, &["0"]));
    busy(1);
    assert_eq!(
        show(&b.call(&["PING"])),
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(show(&b.call(&["SCRIPT", "KILL"])), "+OK\r\n");
    let killed = reply_within(&mut a, 10);
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: ")
            && killed.ends_with(", on @user_script:1.\r\n"),
        "{killed}"
    );
    assert_eq!(show(&b.call(&["PING"])), "+PONG\r\n");

    // A script that wrote cannot be killed; it runs to its end.
    let wrote = "redis.call('set', 'x', '1') local t = os.clock() while os.clock() - t < 1.5 do end return 'done'";
    a.cmd(&eval(wrote, &["0"]));
    busy(2);
    let refused = show(&b.call(&["SCRIPT", "KILL"]));
    assert!(
        refused.starts_with("-UNKILLABLE Sorry the script already executed write commands"),
        "{refused}"
    );
    assert_eq!(reply_within(&mut a, 10), "$4\r\ndone\r\n");
    assert_eq!(show(&b.call(&["GET", "x"])), "$1\r\n1\r\n");

    // SHUTDOWN NOSAVE stops a busy script and the server.
    let mut c = c;
    a.cmd(&eval(
        "redis.call('set', 'y', '1') while true do end",
        &["0"],
    ));
    busy(3);
    b.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    let start = Instant::now();
    loop {
        if let Ok(Some(_)) = c.child.try_wait() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_script_under_the_threshold_is_not_busy() {
    let c = start_cairn(&["--io-threads", "2"]);
    let mut a = Raw::connect(c.port);
    let mut b = Raw::connect(c.port);
    a.cmd(&eval(
        "local t = os.clock() while os.clock() - t < 0.5 do end return 1",
        &["0"],
    ));
    std::thread::sleep(Duration::from_millis(100));
    // Waits for the script (below busy-reply-threshold) instead of getting -BUSY.
    b.cmd(&[b"PING"]);
    assert_eq!(reply_within(&mut a, 10), ":1\r\n");
    assert_eq!(reply_within(&mut b, 10), "+PONG\r\n");
}

// ---- busy scripts with io-threads 1 (the default): the script's hook serves clients ----

const BUSY_EVAL: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FCALL: &str =
    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";

/// Sends `cmd` (a slow script) on a new connection and returns it with a second one,
/// once that second one gets `-BUSY` (a PING read before the script started gets PONG:
/// it asks again).
fn start_busy(port: u16, cmd: &[&[u8]]) -> (Raw, Raw) {
    let mut a = Raw::connect(port);
    a.cmd(cmd);
    let mut b = Raw::connect(port);
    wait_until(DEADLINE, "the script to be busy", || {
        show(&b.call(&["PING"])).starts_with("-BUSY")
    });
    (a, b)
}

/// Sends `cmds` in one write and reads their replies in order.
fn pipelined(r: &mut Raw, cmds: &[&[&str]]) -> Vec<String> {
    let mut bytes = Vec::new();
    for c in cmds {
        let a: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
        bytes.extend_from_slice(&common::encode(&a));
    }
    r.send(&bytes);
    cmds.iter().map(|_| show(&r.reply())).collect()
}

/// What a client sees of a busy EVAL on the server at `port`: the pipeline's answers
/// while busy (errors checked before BUSY, allow-busy commands, MULTI), a connection
/// opened meanwhile, commands split across writes, SCRIPT KILL, the caller's error and
/// the commands it pipelined behind its EVAL.
fn busy_eval_transcript(port: u16) -> Vec<String> {
    let spin = "local i = 0 while true do i = i + 1 end";
    let mut a = Raw::connect(port);
    let mut first = common::encode(&eval(spin, &["0"]));
    first.extend_from_slice(&common::encode(&[b"PING"]));
    a.send(&first);
    let mut b = Raw::connect(port);
    wait_until(DEADLINE, "the script to be busy", || {
        show(&b.call(&["PING"])).starts_with("-BUSY")
    });
    // The running client's own later commands wait for its script.
    a.cmd(&[b"ECHO", b"after"]);
    let mut t = pipelined(
        &mut b,
        &[
            &["PING"],
            &["GET", "x"],
            &["FOO", "bar"],
            &["GET"],
            &["MULTI"],
            &["SET", "a", "1"],
            &["EXEC"],
            &["MULTI"],
            &["DISCARD"],
            &["WATCH", "x"],
            &["UNWATCH"],
            &["FUNCTION", "STATS"],
            &["SHUTDOWN"],
            &["FUNCTION", "KILL"],
            &["ECHO", "hi"],
        ],
    );
    // A connection opened while busy is accepted and answered.
    let mut c = Raw::connect(port);
    t.push(show(&c.call(&["PING"])));
    // A command split across writes: the first part waits, nothing is lost.
    b.send(b"*2\r\n$4\r\nECHO\r\n$2\r\nyo");
    b.send(b"\r\n*1\r\n$4\r\nPING\r\n");
    t.push(show(&b.reply()));
    t.push(show(&b.reply()));
    t.push(show(&b.call(&["SCRIPT", "KILL"])));
    t.push(reply_within(&mut a, 10));
    t.push(show(&a.reply()));
    t.push(show(&a.reply()));
    t.push(show(&b.call(&["PING"])));
    t.push(show(&c.call(&["SCRIPT", "KILL"])));
    t
}

#[test]
fn busy_eval_with_one_io_thread_answers_as_redis() {
    let args = ["--busy-reply-threshold", "100"];
    let c = start_cairn(&args);
    let r = start_redis(&args);
    let ours = busy_eval_transcript(c.port);
    let theirs = busy_eval_transcript(r.port);
    assert_eq!(ours, theirs);
    // Spot checks that the transcript is the interesting one.
    assert_eq!(ours[0], BUSY_EVAL);
    assert!(
        ours[2].starts_with("-ERR unknown command 'FOO'"),
        "{}",
        ours[2]
    );
    assert!(ours[6].starts_with("-EXECABORT Transaction discarded because of: BUSY"));
    assert_eq!(ours[15], BUSY_EVAL, "a new connection");
    assert_eq!(ours[18], "+OK\r\n", "SCRIPT KILL");
    assert!(ours[19].starts_with("-ERR Script killed by user with SCRIPT KILL..."));
    assert_eq!(ours[21], "$5\r\nafter\r\n");
    assert_eq!(ours[23], "-NOTBUSY No scripts in execution right now.\r\n");
}

/// The same for a function: FCALL, the FUNCTION KILL texts, FUNCTION STATS's running
/// script (its duration masked).
fn busy_fcall_transcript(port: u16) -> Vec<String> {
    let mut l = Raw::connect(port);
    let lib = "#!lua name=busylib\nredis.register_function('spin', function(keys, args) local i = 0 while true do i = i + 1 end end)";
    assert_eq!(
        show(&l.call(&["FUNCTION", "LOAD", lib])),
        "$7\r\nbusylib\r\n"
    );
    let (mut a, mut b) = start_busy(port, &[b"FCALL", b"spin", b"1", b"k", b"v"]);
    let mut t = pipelined(
        &mut b,
        &[
            &["PING"],
            &["SCRIPT", "KILL"],
            &["EVAL", "return 1", "0"],
            &["FUNCTION", "STATS"],
        ],
    );
    // duration_ms varies: keep its name, drop its value.
    let stats = &mut t[3];
    if let Some(at) = stats.find("duration_ms\r\n:") {
        let start = at + "duration_ms\r\n:".len();
        let end = stats[start..]
            .find("\r\n")
            .map_or(stats.len(), |e| start + e);
        stats.replace_range(start..end, "N");
    }
    t.push(show(&b.call(&["FUNCTION", "KILL"])));
    t.push(reply_within(&mut a, 10));
    t.push(show(&b.call(&["FUNCTION", "KILL"])));
    t
}

#[test]
fn busy_fcall_with_one_io_thread_answers_as_redis() {
    let args = ["--busy-reply-threshold", "100"];
    let c = start_cairn(&args);
    let r = start_redis(&args);
    let ours = busy_fcall_transcript(c.port);
    let theirs = busy_fcall_transcript(r.port);
    assert_eq!(ours, theirs);
    assert_eq!(ours[0], BUSY_FCALL);
    assert_eq!(ours[1], BUSY_FCALL, "SCRIPT KILL names FUNCTION KILL");
    assert!(ours[3].contains("$4\r\nspin\r\n") && ours[3].contains("$5\r\nFCALL\r\n"));
    assert_eq!(ours[4], "+OK\r\n");
    assert!(ours[5].starts_with("-ERR Script killed by user with SCRIPT KILL..."));
}

/// A busy script that wrote: UNKILLABLE, SHUTDOWN without NOSAVE refused, SHUTDOWN NOSAVE
/// ends the server (no reply to anyone). Returns the replies and whether the script's
/// caller and the SHUTDOWN client saw their connections closed.
fn busy_unkillable_transcript(srv: &mut ServerProc) -> (Vec<String>, bool, bool) {
    let script = "redis.call('set', 'x', '1') local i = 0 while true do i = i + 1 end";
    let (mut a, mut b) = start_busy(srv.port, &eval(script, &["0"]));
    let t = pipelined(&mut b, &[&["SCRIPT", "KILL"], &["SHUTDOWN"], &["GET", "x"]]);
    b.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    wait_until(DEADLINE, "the server to exit", || {
        matches!(srv.child.try_wait(), Ok(Some(_)))
    });
    (t, a.closed(), b.closed())
}

/// A script postponed by CLIENT PAUSE runs when the pause ends, outside any client's
/// turn: once busy, it still answers the others (`-BUSY`, SCRIPT KILL).
fn busy_after_pause_transcript(port: u16) -> Vec<String> {
    let mut pauser = Raw::connect(port);
    assert_eq!(
        show(&pauser.call(&["CLIENT", "PAUSE", "100000", "WRITE"])),
        "+OK\r\n"
    );
    let mut a = Raw::connect(port);
    a.cmd(&eval("local i = 0 while true do i = i + 1 end", &["0"]));
    // The EVAL is parked by the pause (its client shows it).
    wait_until(DEADLINE, "the EVAL to be postponed", || {
        let list = show(&pauser.call(&["CLIENT", "LIST"]));
        list.contains("cmd=eval") || list.contains("flags=b")
    });
    let unpaused = show(&pauser.call(&["CLIENT", "UNPAUSE"]));
    let mut b = Raw::connect(port);
    wait_until(DEADLINE, "the resumed script to be busy", || {
        show(&b.call(&["PING"])).starts_with("-BUSY")
    });
    let mut t = vec![unpaused, show(&b.call(&["GET", "x"]))];
    t.push(show(&b.call(&["SCRIPT", "KILL"])));
    let killed = show(&a.reply());
    t.push(killed.split(" script: ").next().unwrap_or("").to_string());
    t.push(show(&b.call(&["PING"])));
    t
}

#[test]
fn a_script_resumed_after_client_pause_answers_others_while_busy() {
    let args = ["--busy-reply-threshold", "100"];
    let c = start_cairn(&args);
    let r = start_redis(&args);
    let ours = busy_after_pause_transcript(c.port);
    let theirs = busy_after_pause_transcript(r.port);
    assert_eq!(ours, theirs);
    assert_eq!(ours[1], BUSY_EVAL);
    assert_eq!(ours[2], "+OK\r\n");
}

#[test]
fn busy_script_that_wrote_is_unkillable_and_shutdown_nosave_ends_the_server() {
    let args = ["--busy-reply-threshold", "100"];
    let mut c = start_cairn(&args);
    let mut r = start_redis(&args);
    let ours = busy_unkillable_transcript(&mut c);
    let theirs = busy_unkillable_transcript(&mut r);
    assert_eq!(ours, theirs);
    assert!(ours.0[0].starts_with("-UNKILLABLE Sorry the script already executed write commands"));
    assert_eq!(ours.0[1], BUSY_EVAL);
    assert!(ours.1 && ours.2, "connections closed");
}

#[test]
fn shutdown_nosave_during_a_busy_script_keeps_its_writes_out_of_the_log() {
    let dir = temp_dir("busy-shutdown-aof");
    let args = ["--appendonly", "yes", "--busy-reply-threshold", "100"];
    let mut c = start_on(&dir, &args, &[]);
    let mut r = Raw::connect(c.port);
    assert_eq!(show(&r.call(&["SET", "before", "1"])), "+OK\r\n");
    let script = "redis.call('set', 'x', '1') local i = 0 while true do i = i + 1 end";
    let (_a, mut b) = start_busy(c.port, &eval(script, &["0"]));
    b.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    wait_until(DEADLINE, "the server to exit", || {
        matches!(c.child.try_wait(), Ok(Some(_)))
    });
    drop(c);
    // The log has what was acknowledged before the script, nothing of the script.
    let c = start_on(&dir, &args, &[]);
    let mut r = Raw::connect(c.port);
    assert_eq!(show(&r.call(&["GET", "before"])), "$1\r\n1\r\n");
    assert_eq!(show(&r.call(&["EXISTS", "x"])), ":0\r\n");
}
