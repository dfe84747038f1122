//! Differential tests: the same seeded pseudo-random command streams go to Debian's
//! redis-server 7.0.15 and to cairn-server over raw RESP, and every reply must be identical
//! byte for byte (after the few documented normalisations in `harness::Cmp`).
//!
//! Each family has a table of generators, one line per command; a generator makes valid
//! and invalid forms (wrong arity is added by the harness; wrong types, bad integers,
//! unknown options, huge and negative numbers by the generators) over a small key space
//! so commands interact. To cover a new command, add one `Spec::new(...)` line.
//!
//! Replay a failure: `CAIRN_DIFF_SEED=<seed> cargo test --test differential <family>`.
//!
//! Normalisation rules (where replies legitimately differ):
//! - CLIENT ID and HELLO's `id`: client ids depend on connection history; replaced by 0.
//! - CLIENT LIST / CLIENT INFO: values of address, fd, timing, id and memory fields are
//!   blanked (see `harness::VOLATILE_CLIENT_FIELDS`); everything else must match.
//! - No relative TTL shorter than 1000 s is generated, so no key expires mid-run (an expiry
//!   observed at slightly different times would race); past absolute times (EXAT 1) are
//!   used to test immediate expiry deterministically, except in families that check DBSIZE:
//!   DBSIZE counts expired keys not yet reclaimed, and reclaiming is timing-dependent.
//! - Commands not yet in cairn's tree (TTL, EXPIRE, KEYS, SCAN, lists, ...) are not
//!   generated. When they land: KEYS/SCAN replies must be compared as sets, and TTL/PTTL
//!   replies within a tolerance (add a `Cmp` rule for each).

mod common;
#[path = "differential/harness.rs"]
mod harness;

use harness::{a, one, run_family, run_family_with, Arg, Cmp, Expect, Spec, Step, G};

/// Fixed seeds so a failure replays; each family runs all of them.
const SEEDS: &[u64] = &[1, 2, 3, 4, 0xC0FFEE, 20240601, 987654321, 0xDEADBEEF];
const STEPS: usize = 4000;

// ---------------------------------------------------------------------------------------
// Strings.

fn cmd(name: &str, g: &mut G, rest: Vec<Arg>) -> Step {
    let mut v = vec![g.word(name)];
    v.extend(rest);
    one(v)
}

/// Known cairn difference (reported, outside this branch's files): Redis parses all of
/// SET's / GETEX's options before it parses the expire value, so a syntax error anywhere
/// wins over a bad expire value; cairn reports whichever comes first. Until that is fixed,
/// an option list with a bad expire value (not an integer, <= 0, or so large that it
/// overflows) holds only that option.
/// An expire option without its value takes the next option as its value, so it goes last.
/// For the same reason SET and GETEX get no arity mutation (an appended junk argument is a
/// syntax error after the expire value).
fn sole_bad_expire(mut opts: Vec<Vec<Arg>>) -> Vec<Arg> {
    if let Some(o) = opts.iter().find(|o| bad_expire(o)) {
        return o.clone();
    }
    if let Some(i) = opts.iter().position(|o| o.len() == 1 && is_expire(o)) {
        let o = opts.remove(i);
        opts.push(o);
    }
    opts.concat()
}

fn is_expire(o: &[Arg]) -> bool {
    matches!(
        &o[0].to_ascii_uppercase()[..],
        b"EX" | b"PX" | b"EXAT" | b"PXAT"
    )
}

/// An EX/PX/EXAT/PXAT option whose value Redis rejects (or, if huge, may overflow).
fn bad_expire(o: &[Arg]) -> bool {
    is_expire(o)
        && o.len() == 2
        && !(s_is_canonical(&o[1])
            && std::str::from_utf8(&o[1])
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .is_some_and(|n| (1..=10_000_000_000_000).contains(&n)))
}

/// Rust's parse accepts "+1"; Redis does not: only canonical decimal counts as valid here.
fn s_is_canonical(b: &[u8]) -> bool {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .is_some_and(|n| n.to_string().as_bytes() == b)
}

/// Known cairn difference (reported): Redis accepts a repeated option (`NX NX`,
/// `GET GET`, `EX 1 EX 2`: the last one wins, only conflicting options are a syntax error);
/// cairn answers a syntax error. Until fixed, each option kind appears at most once.
fn dedupe(mut opts: Vec<Vec<Arg>>) -> Vec<Vec<Arg>> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    opts.retain(|o| {
        // At most one expire option of any unit: two (`EX 1 PX 2`) are a syntax error in
        // both servers, but with a value missing the order difference above shows again.
        let k = if is_expire(o) {
            b"EX".to_vec()
        } else {
            o[0].to_ascii_uppercase()
        };
        if seen.contains(&k) {
            false
        } else {
            seen.push(k);
            true
        }
    });
    opts
}

fn set_opts(g: &mut G) -> Vec<Arg> {
    let mut v = Vec::new();
    for _ in 0..g.rng.below(4) {
        match g.rng.below(8) {
            0 => v.push(vec![g.word("NX")]),
            1 => v.push(vec![g.word("XX")]),
            2 => v.push(vec![g.word("GET")]),
            3 => v.push(vec![g.word("KEEPTTL")]),
            4 | 5 => v.push(g.expire_opt()),
            6 => v.push(vec![a(g.rng.pick(&["FOO", "EXX", "PERSIST", ""]))]),
            _ => v.push(vec![g.int()]),
        }
    }
    sole_bad_expire(dedupe(v))
}

/// Known cairn difference (reported): GETEX on a missing key replies nil (and on a wrong
/// type WRONGTYPE) before Redis validates the expire value; cairn validates first. So
/// GETEX gets no bad expire values until that is fixed.
fn getex_opts(g: &mut G) -> Vec<Arg> {
    let mut v = Vec::new();
    for _ in 0..g.rng.below(3) {
        match g.rng.below(5) {
            0 => v.push(vec![g.word("PERSIST")]),
            1..=3 => v.push(g.expire_opt()),
            _ => v.push(vec![a(g.rng.pick(&["KEEPTTL", "NX", "BAR"]))]),
        }
    }
    v.retain(|o| !bad_expire(o));
    sole_bad_expire(dedupe(v))
}

/// Key/value pairs, sometimes with the last value missing.
fn pairs(g: &mut G) -> Vec<Arg> {
    let mut v = Vec::new();
    for _ in 0..1 + g.rng.below(3) {
        v.push(g.key());
        v.push(g.val());
    }
    if g.rng.chance(10) {
        v.pop();
    }
    v
}

/// SETRANGE offsets: small, or so large that offset + any non-empty value exceeds 512 MB
/// (the error path; a successful huge offset would allocate 512 MB in both servers).
fn setrange_offset(g: &mut G) -> Arg {
    match g.rng.below(10) {
        0..=6 => g.rng.range(0, 400).to_string().into_bytes(),
        7 => a(g.rng.pick(&["536870912", "536870913", "4294967296", "-1"])),
        8 => a(g.rng.pick(INT_EDGES_SAFE)),
        _ => a(g.rng.pick(&["abc", "", "1.5", " 1", "+1", "01"])),
    }
}

/// Integer edges that are all either negative or beyond 512 MB.
const INT_EDGES_SAFE: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967296",
];

fn small_or_edge(g: &mut G) -> Arg {
    if g.rng.chance(80) {
        g.rng.range(-40, 40).to_string().into_bytes()
    } else {
        g.int()
    }
}

fn switch_protocol(g: &mut G) -> Step {
    let v = a(g.rng.pick(&["2", "3"]));
    one(vec![a("HELLO"), v])
}

#[rustfmt::skip]
static STRINGS: &[Spec] = &[
    Spec::new("get", 10, |g| { let k = g.key(); cmd("GET", g, vec![k]) }),
    Spec::new("set", 12, |g| { let (k, v) = (g.key(), g.val()); let o = set_opts(g); cmd("SET", g, [vec![k, v], o].concat()) }).no_mutate(),
    Spec::new("setnx", 3, |g| { let (k, v) = (g.key(), g.val()); cmd("SETNX", g, vec![k, v]) }),
    Spec::new("setex", 3, |g| { let (k, t, v) = (g.key(), g.rel_ttl(false), g.val()); cmd("SETEX", g, vec![k, t, v]) }),
    Spec::new("psetex", 3, |g| { let (k, t, v) = (g.key(), g.rel_ttl(true), g.val()); cmd("PSETEX", g, vec![k, t, v]) }),
    Spec::new("mget", 4, |g| { let k = g.keys(1, 5); cmd("MGET", g, k) }),
    Spec::new("mset", 4, |g| { let p = pairs(g); cmd("MSET", g, p) }),
    Spec::new("msetnx", 3, |g| { let p = pairs(g); cmd("MSETNX", g, p) }),
    Spec::new("getset", 3, |g| { let (k, v) = (g.key(), g.val()); cmd("GETSET", g, vec![k, v]) }),
    Spec::new("getdel", 3, |g| { let k = g.key(); cmd("GETDEL", g, vec![k]) }),
    Spec::new("getex", 5, |g| { let k = g.key(); let o = getex_opts(g); cmd("GETEX", g, [vec![k], o].concat()) }).no_mutate(),
    Spec::new("append", 5, |g| { let (k, v) = (g.key(), g.val()); cmd("APPEND", g, vec![k, v]) }),
    Spec::new("strlen", 3, |g| { let k = g.key(); cmd("STRLEN", g, vec![k]) }),
    Spec::new("incr", 6, |g| { let k = g.key(); cmd("INCR", g, vec![k]) }),
    Spec::new("decr", 4, |g| { let k = g.key(); cmd("DECR", g, vec![k]) }),
    Spec::new("incrby", 5, |g| { let (k, n) = (g.key(), g.int()); cmd("INCRBY", g, vec![k, n]) }),
    Spec::new("decrby", 4, |g| { let (k, n) = (g.key(), g.int()); cmd("DECRBY", g, vec![k, n]) }),
    Spec::new("getrange", 5, |g| { let (k, s, e) = (g.key(), small_or_edge(g), small_or_edge(g)); cmd("GETRANGE", g, vec![k, s, e]) }),
    Spec::new("substr", 2, |g| { let (k, s, e) = (g.key(), small_or_edge(g), small_or_edge(g)); cmd("SUBSTR", g, vec![k, s, e]) }),
    Spec::new("setrange", 5, |g| { let (k, o, v) = (g.key(), setrange_offset(g), g.val()); cmd("SETRANGE", g, vec![k, o, v]) }),
    Spec::new("del", 3, |g| { let k = g.keys(1, 3); cmd("DEL", g, k) }),
    Spec::new("exists", 2, |g| { let k = g.keys(1, 3); cmd("EXISTS", g, k) }),
    Spec::new("type", 2, |g| { let k = g.key(); cmd("TYPE", g, vec![k]) }),
    // Switches between RESP2 and RESP3 so every reply above is compared in both.
    Spec::new("hello", 1, switch_protocol).cmp(Cmp::ClientId).no_mutate(),
];

#[test]
fn strings() {
    run_family("strings", STRINGS, SEEDS, STEPS, &[], None);
}

// ---------------------------------------------------------------------------------------
// Lists and hashes. Only commands whose replies have a defined order are generated
// (HGETALL/HKEYS/HVALS/HSCAN/HRANDFIELD on hashtable-encoded hashes are compared as sets
// in tests/hashes.rs instead); values from `g.val()` include long ones, so hashes do cross
// into the hashtable encoding here.

fn side(g: &mut G) -> Arg {
    a(g.rng.pick(&["LEFT", "RIGHT", "left", "UP"]))
}

fn lpos_opts(g: &mut G) -> Vec<Arg> {
    let mut o = vec![];
    if g.rng.chance(40) {
        o.push(a("RANK"));
        o.push(a(g.rng.pick(&["1", "2", "-1", "-2", "0", "x"])));
    }
    if g.rng.chance(40) {
        o.push(a("COUNT"));
        o.push(a(g.rng.pick(&["0", "1", "3", "-1"])));
    }
    if g.rng.chance(30) {
        o.push(a("MAXLEN"));
        o.push(a(g.rng.pick(&["0", "2", "-1"])));
    }
    o
}

#[rustfmt::skip]
static LISTS: &[Spec] = &[
    Spec::new("lpush", 8, |g| { let k = g.key(); let mut v = vec![k]; for _ in 0..g.rng.range(1, 4) { v.push(g.val()); } cmd("LPUSH", g, v) }),
    Spec::new("rpush", 8, |g| { let k = g.key(); let mut v = vec![k]; for _ in 0..g.rng.range(1, 4) { v.push(g.val()); } cmd("RPUSH", g, v) }),
    Spec::new("lpushx", 2, |g| { let (k, v) = (g.key(), g.val()); cmd("LPUSHX", g, vec![k, v]) }),
    Spec::new("rpushx", 2, |g| { let (k, v) = (g.key(), g.val()); cmd("RPUSHX", g, vec![k, v]) }),
    Spec::new("lpop", 4, |g| { let k = g.key(); let c = if g.rng.chance(50) { vec![small_or_edge(g)] } else { vec![] }; cmd("LPOP", g, [vec![k], c].concat()) }),
    Spec::new("rpop", 4, |g| { let k = g.key(); let c = if g.rng.chance(50) { vec![small_or_edge(g)] } else { vec![] }; cmd("RPOP", g, [vec![k], c].concat()) }),
    Spec::new("lrange", 6, |g| { let (k, s, e) = (g.key(), small_or_edge(g), small_or_edge(g)); cmd("LRANGE", g, vec![k, s, e]) }),
    Spec::new("llen", 3, |g| { let k = g.key(); cmd("LLEN", g, vec![k]) }),
    Spec::new("lindex", 4, |g| { let (k, i) = (g.key(), small_or_edge(g)); cmd("LINDEX", g, vec![k, i]) }),
    Spec::new("lset", 3, |g| { let (k, i, v) = (g.key(), small_or_edge(g), g.val()); cmd("LSET", g, vec![k, i, v]) }),
    Spec::new("lrem", 3, |g| { let (k, i, v) = (g.key(), small_or_edge(g), g.val()); cmd("LREM", g, vec![k, i, v]) }),
    Spec::new("ltrim", 2, |g| { let (k, s, e) = (g.key(), small_or_edge(g), small_or_edge(g)); cmd("LTRIM", g, vec![k, s, e]) }),
    Spec::new("linsert", 3, |g| { let (k, w, p, v) = (g.key(), a(g.rng.pick(&["BEFORE", "after", "x"])), g.val(), g.val()); cmd("LINSERT", g, vec![k, w, p, v]) }),
    Spec::new("lpos", 4, |g| { let (k, v) = (g.key(), g.val()); let o = lpos_opts(g); cmd("LPOS", g, [vec![k, v], o].concat()) }),
    Spec::new("lmove", 3, |g| { let (s1, d, f, t) = (g.key(), g.key(), side(g), side(g)); cmd("LMOVE", g, vec![s1, d, f, t]) }),
    Spec::new("rpoplpush", 2, |g| { let (s1, d) = (g.key(), g.key()); cmd("RPOPLPUSH", g, vec![s1, d]) }),
    Spec::new("lmpop", 3, |g| { let k = g.keys(1, 3); let mut o = vec![a(&k.len().to_string())]; o.extend(k); o.push(side(g)); if g.rng.chance(50) { o.push(a("COUNT")); o.push(a(g.rng.pick(&["1", "5", "0", "-1"]))); } cmd("LMPOP", g, o) }),
    Spec::new("set", 2, |g| { let (k, v) = (g.key(), g.val()); cmd("SET", g, vec![k, v]) }).no_mutate(),
    Spec::new("del", 2, |g| { let k = g.keys(1, 3); cmd("DEL", g, k) }),
    Spec::new("type", 1, |g| { let k = g.key(); cmd("TYPE", g, vec![k]) }),
    Spec::new("hello", 1, switch_protocol).cmp(Cmp::ClientId).no_mutate(),
];

#[test]
fn lists() {
    run_family("lists", LISTS, SEEDS, STEPS, &[], None);
}

#[rustfmt::skip]
static HASHES: &[Spec] = &[
    Spec::new("hset", 10, |g| { let k = g.key(); let mut v = vec![k]; for _ in 0..g.rng.range(1, 3) { v.push(g.val()); v.push(g.val()); } cmd("HSET", g, v) }),
    Spec::new("hmset", 2, |g| { let (k, f, v) = (g.key(), g.val(), g.val()); cmd("HMSET", g, vec![k, f, v]) }),
    Spec::new("hsetnx", 3, |g| { let (k, f, v) = (g.key(), g.val(), g.val()); cmd("HSETNX", g, vec![k, f, v]) }),
    Spec::new("hget", 6, |g| { let (k, f) = (g.key(), g.val()); cmd("HGET", g, vec![k, f]) }),
    Spec::new("hmget", 3, |g| { let (k, f, f2) = (g.key(), g.val(), g.val()); cmd("HMGET", g, vec![k, f, f2]) }),
    Spec::new("hdel", 4, |g| { let (k, f) = (g.key(), g.val()); cmd("HDEL", g, vec![k, f]) }),
    Spec::new("hlen", 3, |g| { let k = g.key(); cmd("HLEN", g, vec![k]) }),
    Spec::new("hstrlen", 3, |g| { let (k, f) = (g.key(), g.val()); cmd("HSTRLEN", g, vec![k, f]) }),
    Spec::new("hexists", 3, |g| { let (k, f) = (g.key(), g.val()); cmd("HEXISTS", g, vec![k, f]) }),
    Spec::new("hincrby", 4, |g| { let (k, f, n) = (g.key(), g.val(), g.int()); cmd("HINCRBY", g, vec![k, f, n]) }),
    Spec::new("set", 2, |g| { let (k, v) = (g.key(), g.val()); cmd("SET", g, vec![k, v]) }).no_mutate(),
    Spec::new("del", 2, |g| { let k = g.keys(1, 3); cmd("DEL", g, k) }),
    Spec::new("type", 1, |g| { let k = g.key(); cmd("TYPE", g, vec![k]) }),
    Spec::new("hello", 1, switch_protocol).cmp(Cmp::ClientId).no_mutate(),
];

#[test]
fn hashes() {
    run_family("hashes", HASHES, SEEDS, STEPS, &[], None);
}

// ---------------------------------------------------------------------------------------
// Keys: the generic commands over several databases.

/// Known cairn difference (reported): for an index outside i32 Redis answers "value is out
/// of range, value must between -2147483648 and 2147483647"; cairn answers "value is not
/// an integer or out of range". Until fixed, indexes stay inside i32.
fn db_index(g: &mut G) -> Arg {
    match g.rng.below(10) {
        0..=6 => g.rng.range(0, 2).to_string().into_bytes(),
        7 => a(g.rng.pick(&["15", "16", "-1", "2147483647", "-2147483648"])),
        _ => a(g.rng.pick(&["abc", "", "1.5", " 1", "+1", "01"])),
    }
}

/// DBSIZE counts keys that are logically expired but not yet reclaimed, and when a key set
/// with a past EXAT/PXAT is reclaimed depends on each server's active expire cycle
/// (Redis 7.0's SET keeps such a key until then). So this family, which checks DBSIZE,
/// sets no key with an expire time in the past (GETEX, which deletes at once, still may).
fn future_expire_opt(g: &mut G) -> Vec<Arg> {
    let unit = g.rng.pick(&["EX", "PX", "EXAT", "PXAT"]);
    let v = match unit {
        "EX" => g.rng.range(1000, 100_000),
        "PX" => g.rng.range(1_000_000, 100_000_000),
        "EXAT" => g.rng.range(4_000_000_000, 4_000_001_000),
        _ => g.rng.range(4_000_000_000_000, 4_000_001_000_000),
    };
    vec![a(unit), v.to_string().into_bytes()]
}

#[rustfmt::skip]
static KEYS: &[Spec] = &[
    Spec::new("set", 10, |g| { let (k, v) = (g.key(), g.val()); let o = if g.rng.chance(30) { future_expire_opt(g) } else { vec![] }; cmd("SET", g, [vec![k, v], o].concat()) }).no_mutate(),
    Spec::new("mset", 3, |g| { let p = pairs(g); cmd("MSET", g, p) }),
    Spec::new("get", 4, |g| { let k = g.key(); cmd("GET", g, vec![k]) }),
    Spec::new("del", 8, |g| { let k = g.keys(1, 4); cmd("DEL", g, k) }),
    Spec::new("unlink", 5, |g| { let k = g.keys(1, 4); cmd("UNLINK", g, k) }),
    Spec::new("exists", 8, |g| { let k = g.keys(1, 5); cmd("EXISTS", g, k) }),
    Spec::new("type", 6, |g| { let k = g.key(); cmd("TYPE", g, vec![k]) }),
    Spec::new("getex", 3, |g| { let k = g.key(); let o = getex_opts(g); cmd("GETEX", g, [vec![k], o].concat()) }).no_mutate(),
    Spec::new("dbsize", 4, |g| cmd("DBSIZE", g, vec![])),
    Spec::new("select", 4, |g| { let d = db_index(g); cmd("SELECT", g, vec![d]) }),
    Spec::new("flushdb", 1, |g| { let o = if g.rng.chance(50) { vec![a(g.rng.pick(&["ASYNC", "SYNC", "sync", "LAZY"]))] } else { vec![] }; cmd("FLUSHDB", g, o) }),
    Spec::new("hello", 1, switch_protocol).cmp(Cmp::ClientId).no_mutate(),
];

#[test]
fn keys() {
    run_family("keys", KEYS, SEEDS, STEPS, &[], None);
}

// ---------------------------------------------------------------------------------------
// Connection and server basics.

fn client_sub(g: &mut G, sub: &str, rest: Vec<Arg>) -> Step {
    let mut v = vec![g.word("CLIENT"), g.word(sub)];
    v.extend(rest);
    one(v)
}

fn client_name(g: &mut G) -> Arg {
    a(g.rng.pick(&[
        "",
        "app",
        "my-conn_1",
        "has space",
        "new\nline",
        "caf\u{e9}",
        "x=y",
        "~!@#",
    ]))
}

/// Known cairn difference (reported): Redis applies HELLO's options one by one (an AUTH
/// that fails stops before later options; a SETNAME or AUTH before a bad option stays
/// applied); cairn validates all options first. Until fixed, HELLO gets one option at most.
fn hello(g: &mut G) -> Step {
    let mut v = Vec::new();
    if g.rng.chance(85) {
        let versions = ["2", "3", "3", "1", "4", "abc", "-1", "99999999999999999999"];
        v.push(a(g.rng.pick(&versions)));
    }
    if g.rng.chance(60) {
        match g.rng.below(6) {
            0 | 1 => {
                v.push(g.word("SETNAME"));
                v.push(client_name(g));
            }
            2 => {
                v.push(g.word("AUTH"));
                v.push(a(g.rng.pick(&["default", "nobody"])));
                v.push(a(g.rng.pick(&["secret", "wrong", ""])));
            }
            3 => v.push(g.word("AUTH")),
            4 => v.push(g.word("SETNAME")),
            _ => v.push(a("BOGUS")),
        }
    }
    cmd("HELLO", g, v)
}

/// HELLO with credentials, good or bad.
fn hello_auth(g: &mut G) -> Step {
    let mut v = vec![a(g.rng.pick(&["2", "3"]))];
    v.push(g.word("AUTH"));
    v.push(a(g.rng.pick(&["default", "default", "nobody"])));
    v.push(a(g.rng.pick(&["secret", "secret", "wrong"])));
    cmd("HELLO", g, v)
}

fn client_kill(g: &mut G) -> Step {
    // Only filters that match no other connection, and never the caller itself (SKIPME
    // stays yes): killing would desynchronise the stream.
    let v = match g.rng.below(9) {
        0 => vec![a("ID"), a(g.rng.pick(&["999999", "0", "-1", "abc"]))],
        1 => vec![a("ADDR"), a("1.2.3.4:5")],
        2 => vec![a("LADDR"), a("1.2.3.4:5")],
        3 => vec![
            a("TYPE"),
            a(g.rng.pick(&["pubsub", "master", "replica", "bogus"])),
        ],
        // Known cairn difference (reported): for an unknown user Redis answers "ERR No
        // such user 'nobody'", cairn 0; only the existing user is generated.
        4 => vec![a("USER"), a("default")],
        5 => vec![
            a("SKIPME"),
            a(g.rng.pick(&["yes", "maybe"])),
            a("ID"),
            a("999999"),
        ],
        6 => vec![a("1.2.3.4:5")],
        7 => vec![a("ID")],
        _ => vec![a("BOGUS"), a("x")],
    };
    client_sub(g, "KILL", v)
}

/// CLIENT REPLY OFF/SKIP suppress replies, so they run in a batch that ends with ON and an
/// ECHO marker; the whole reply stream up to the marker is compared.
fn client_reply(g: &mut G) -> Step {
    // Known cairn difference (reported): SKIP while OFF is ignored by Redis (replies stay
    // off); cairn switches to skip-next. Until fixed, no SKIP follows an OFF in a batch.
    let mut off = false;
    let mut cmds = Vec::new();
    for _ in 0..1 + g.rng.below(4) {
        match g.rng.below(6) {
            0 if !off => cmds.push(vec![a("CLIENT"), a("REPLY"), a("SKIP")]),
            0 | 1 => {
                off = true;
                cmds.push(vec![a("CLIENT"), a("REPLY"), a("OFF")])
            }
            2 => cmds.push(vec![a("CLIENT"), a("REPLY"), a(g.rng.pick(&["BAD", "on"]))]),
            3 => cmds.push(vec![a("CLIENT"), a("REPLY")]),
            _ => {
                let k = g.key();
                cmds.push(vec![a("INCR"), k]);
            }
        }
    }
    cmds.push(vec![a("CLIENT"), a("REPLY"), a("ON")]);
    Step {
        cmds,
        expect: Expect::UntilMarker,
    }
}

/// Unknown commands: Redis echoes the name and the first arguments (128 bytes at most),
/// CR/LF mapped to spaces. Known cairn differences (reported): cairn converts the name and
/// arguments to UTF-8 lossily (non-UTF-8 bytes come back as U+FFFD), and Redis's C string
/// formatting stops each at a NUL byte while cairn keeps it. Arguments here are ASCII
/// without NUL until that is fixed.
fn unknown(g: &mut G) -> Step {
    let names = ["FOO", "getx", "", "CLIENTS", "x y", "a\r\nb"];
    let mut v = vec![a(g.rng.pick(&names))];
    for _ in 0..g.rng.below(5) {
        let mut x = g.val();
        x.iter_mut().for_each(|c| *c = (*c & 0x7f).max(1));
        if g.rng.chance(10) {
            x.extend_from_slice(b"\r\n");
        }
        v.push(x);
    }
    one(v)
}

#[rustfmt::skip]
static CONNECTION: &[Spec] = &[
    Spec::new("ping", 6, |g| { let n = g.rng.below(3); let v = (0..n).map(|_| g.val()).collect(); cmd("PING", g, v) }),
    Spec::new("echo", 4, |g| { let v = g.val(); cmd("ECHO", g, vec![v]) }),
    Spec::new("select", 4, |g| { let d = db_index(g); cmd("SELECT", g, vec![d]) }),
    Spec::new("hello", 5, hello).cmp(Cmp::ClientId).no_mutate(),
    Spec::new("hello auth", 2, hello_auth).cmp(Cmp::ClientId).no_mutate(),
    Spec::new("auth", 3, |g| { let n = 1 + g.rng.below(3); let v = (0..n).map(|_| a(g.rng.pick(&["default", "secret", "x"]))).collect(); cmd("AUTH", g, v) }),
    Spec::new("reset", 2, |g| cmd("RESET", g, vec![])),
    Spec::new("quit", 1, |_| Step { cmds: vec![vec![a("QUIT")]], expect: Expect::Closes }).no_mutate(),
    Spec::new("client id", 2, |g| client_sub(g, "ID", vec![])).cmp(Cmp::ClientId),
    Spec::new("client setname", 4, |g| { let n = client_name(g); client_sub(g, "SETNAME", vec![n]) }),
    Spec::new("client getname", 4, |g| client_sub(g, "GETNAME", vec![])),
    Spec::new("client info", 2, |g| client_sub(g, "INFO", vec![])).cmp(Cmp::ClientFields),
    // Known cairn difference (reported): Redis takes TYPE only as the sole filter
    // (`CLIENT LIST TYPE x extra` is a syntax error; cairn validates the type first). Until
    // fixed, no arity mutation here.
    Spec::new("client list", 2, |g| {
        let v = match g.rng.below(5) {
            0 => vec![],
            1 => vec![a("TYPE"), a(g.rng.pick(&["normal", "pubsub", "bogus"]))],
            // Known cairn difference (reported): `ID 0` (or negative) matches nothing in
            // Redis (empty reply); cairn answers "Invalid client ID". Not generated.
            2 => vec![a("ID"), a(g.rng.pick(&["999999", "abc", "1x"]))],
            3 => vec![a("ID")],
            _ => vec![a("FOO")],
        };
        client_sub(g, "LIST", v)
    }).cmp(Cmp::ClientFields).no_mutate(),
    // Known cairn difference (reported): Redis parses CLIENT KILL's filters pair by pair
    // (a bad ID is reported before a dangling last argument); cairn rejects an odd count
    // first. Until fixed, no arity mutation here.
    Spec::new("client kill", 2, client_kill).no_mutate(),
    // Known cairn difference (reported): RESET clears no-evict, Redis 7.0 keeps it (flags=e
    // in CLIENT INFO). Until fixed, no-evict is never switched on.
    Spec::new("client no-evict", 2, |g| { let v = a(g.rng.pick(&["off", "OFF", "maybe"])); client_sub(g, "NO-EVICT", vec![v]) }),
    Spec::new("client reply", 2, client_reply).no_mutate(),
    // Not generated, known cairn difference (reported): CLIENT HELP lists 22 of Redis's 48
    // lines (no CACHING, GETREDIR, TRACKING, PAUSE, UNPAUSE, ...).
    // Spec::new("client help", 1, |g| client_sub(g, "HELP", vec![])),
    Spec::new("client unknown", 1, |g| { let s = a(g.rng.pick(&["NOPE", "", "idx"])); one(vec![a("CLIENT"), s]) }),
    Spec::new("client", 1, |_| one(vec![a("CLIENT")])).no_mutate(),
    Spec::new("dbsize", 3, |g| cmd("DBSIZE", g, vec![])),
    Spec::new("set", 5, |g| { let (k, v) = (g.key(), g.val()); cmd("SET", g, vec![k, v]) }),
    Spec::new("get", 3, |g| { let k = g.key(); cmd("GET", g, vec![k]) }),
    Spec::new("flushdb", 1, |g| { let o = if g.rng.chance(50) { vec![a(g.rng.pick(&["ASYNC", "SYNC", "x"]))] } else { vec![] }; cmd("FLUSHDB", g, o) }),
    Spec::new("flushall", 1, |g| { let o = if g.rng.chance(50) { vec![a(g.rng.pick(&["async", "SYNC", "x"]))] } else { vec![] }; cmd("FLUSHALL", g, o) }),
    // Only forms that must fail: a SHUTDOWN that succeeds would end the run.
    Spec::new("shutdown", 1, |g| { let v = vec![a(g.rng.pick(&["ABORT", "BOGUS"]))]; cmd("SHUTDOWN", g, v) }).no_mutate(),
    Spec::new("unknown", 2, unknown),
];

#[test]
fn connection_and_server() {
    run_family("connection", CONNECTION, SEEDS, STEPS, &[], None);
}

/// The same family with `requirepass`: NOAUTH errors, AUTH/HELLO AUTH, RESET dropping
/// authentication. Each stream starts unauthenticated.
///
/// Known cairn difference (reported): Redis checks a command's existence (unknown
/// subcommand) and its arity before authentication; cairn answers NOAUTH first. Until
/// fixed, this run has no arity mutations, no unknown subcommands and no bare CLIENT.
/// Known cairn difference (reported): the NOAUTH text of HELLO without AUTH says
/// "HELLO <proto> AUTH <user> <pass>" where Redis 7.0 says "HELLO AUTH <user> <pass>";
/// until fixed this run only sends HELLO with AUTH.
#[test]
fn connection_with_requirepass() {
    run_family_with(
        "requirepass",
        CONNECTION,
        SEEDS,
        STEPS / 2,
        &["--requirepass", "secret"],
        Some("secret"),
        // CLIENT REPLY's batch ends with an ECHO marker, which NOAUTH would swallow.
        &["client unknown", "client", "client reply", "hello"],
        false,
    );
}
