//! Keyspace notifications (`notify-keyspace-events`), compared with redis-server 7.0.
//!
//! The main test sends the same seeded random command stream (strings, lists, hashes,
//! sets, sorted sets, key commands, expiry with times in the past, MULTI/EXEC, scripts)
//! to redis-server and to cairn, with a subscriber on `__key*__:*` on each. After every
//! command a marker is published on a channel the subscriber also listens to; what the
//! subscriber got before the marker is that command's notifications, compared message by
//! message. Active expiry is off in that stream (`DEBUG SET-ACTIVE-EXPIRE 0`) so every
//! `expired` comes from a lookup and lands at the same place in both streams; active
//! expiry, eviction, class filtering and `new` have their own tests.
//!
//! Replay a failure: `CAIRN_NOTIFY_SEED=<seed> cargo test --test notifications`.

mod common;

use common::*;

const SEEDS: &[u64] = &[1, 2, 3, 0xC0FFEE, 20240601, 0xDEADBEEF];
const STEPS: usize = 3000;

/// One server with a command connection and a subscriber.
struct Side {
    _srv: ServerProc,
    cmd: Raw,
    sub: Raw,
    marks: u64,
}

impl Side {
    fn new(srv: ServerProc, flags: &str) -> Side {
        let mut cmd = Raw::connect(srv.port);
        assert_eq!(
            cmd.call(&["CONFIG", "SET", "notify-keyspace-events", flags]),
            b"+OK\r\n"
        );
        let mut sub = Raw::connect(srv.port);
        sub.call(&["PSUBSCRIBE", "__key*__:*"]);
        sub.call(&["SUBSCRIBE", "mark"]);
        Side {
            _srv: srv,
            cmd,
            sub,
            marks: 0,
        }
    }

    /// The notifications received since the last call, as `channel message` lines.
    fn take(&mut self) -> Vec<String> {
        self.marks += 1;
        let n = self.marks.to_string();
        self.cmd.call(&["PUBLISH", "mark", &n]);
        let mut got = Vec::new();
        loop {
            let frame = bulks(&self.sub.reply());
            match frame[0].as_str() {
                "message" if frame[1] == "mark" => {
                    assert_eq!(frame[2], n, "markers arrive in order");
                    return got;
                }
                "pmessage" => got.push(format!("{} {}", frame[2], frame[3])),
                other => panic!("unexpected frame {other}: {frame:?}"),
            }
        }
    }
}

/// The bulk strings of a RESP2 array of bulks (a pub/sub frame).
fn bulks(b: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(b).into_owned();
    let mut lines = text.split("\r\n");
    let head = lines.next().unwrap_or_default();
    assert!(head.starts_with('*'), "not an array: {text:?}");
    let mut out = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            out.push(lines.next().unwrap_or_default().to_string());
        } else if let Some(n) = l.strip_prefix(':') {
            out.push(n.to_string());
        }
    }
    out
}

fn pair(flags: &str, extra: &[&str]) -> (Side, Side) {
    let mut args = vec!["--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    let c = Side::new(start_cairn(&args), flags);
    let r = Side::new(start_redis(&args), flags);
    (c, r)
}

/// One command of the stream: its arguments, and whether its reply may differ between
/// the servers (an unspecified order).
struct Cmd {
    args: Vec<String>,
    unordered: bool,
}

fn c(args: &[&str]) -> Cmd {
    Cmd {
        args: args.iter().map(|s| s.to_string()).collect(),
        unordered: false,
    }
}

struct Gen(Lcg);

impl Gen {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.0.below(items.len() as u64) as usize]
    }
    /// Keys are shared by every type, so commands meet keys of other types too.
    fn key(&mut self) -> String {
        self.pick(&["a", "b", "c", "d", "e", "f"]).to_string()
    }
    fn member(&mut self) -> String {
        self.pick(&["m1", "m2", "m3", "m4", "5", "6"]).to_string()
    }
    fn num(&mut self, n: u64) -> String {
        self.0.below(n).to_string()
    }

    /// Mostly a key of the command's own family (`fam`), sometimes a shared one.
    fn fam_key(&mut self, fam: &str) -> String {
        if self.0.below(10) < 7 {
            format!("{fam}{}", 1 + self.0.below(2))
        } else {
            self.key()
        }
    }

    fn one(&mut self) -> Cmd {
        let what = self.0.below(62);
        let fam = match what {
            18..=29 => "l",
            30..=34 => "h",
            35..=41 => "s",
            42..=52 => "z",
            _ => "",
        };
        let (k, k2) = if fam.is_empty() {
            (self.key(), self.key())
        } else {
            (self.fam_key(fam), self.fam_key(fam))
        };
        let (m, m2) = (self.member(), self.member());
        let (k, k2, m, m2) = (k.as_str(), k2.as_str(), m.as_str(), m2.as_str());
        let n = self.num(5);
        let n = n.as_str();
        match what {
            // strings
            0 => c(&["SET", k, m]),
            1 => {
                let opt = self.pick(&["EX", "EXAT", "KEEPTTL", "NX", "XX", "GET", "PX"]);
                match opt {
                    "EX" => c(&["SET", k, m, "EX", "1000"]),
                    "PX" => c(&["SET", k, m, "PX", "1000000"]),
                    "EXAT" => c(&["SET", k, m, "EXAT", "1"]),
                    _ => c(&["SET", k, m, opt]),
                }
            }
            2 => c(&["SETNX", k, m]),
            3 => c(&["SETEX", k, "1000", m]),
            4 => c(&["MSET", k, m, k2, m2]),
            5 => c(&["MSETNX", k, m, k2, m2]),
            6 => c(&["GETSET", k, m]),
            7 => c(&["GETDEL", k]),
            8 => match self.0.below(3) {
                0 => c(&["GETEX", k, "EX", "1000"]),
                1 => c(&["GETEX", k, "EXAT", "1"]),
                _ => c(&["GETEX", k, "PERSIST"]),
            },
            9 => c(&["APPEND", k, m]),
            10 => c(&["INCR", k]),
            11 => c(&["INCRBY", k, n]),
            12 => c(&["INCRBYFLOAT", k, "1.5"]),
            13 => c(&["SETRANGE", k, n, m]),
            14 => c(&["SETBIT", k, n, "1"]),
            15 => c(&["BITOP", "OR", k, k2, "f"]),
            16 => c(&["BITFIELD", k, "SET", "u8", "0", n]),
            17 => c(&["GET", k]),
            // lists
            18 => c(&["LPUSH", k, m, m2]),
            19 => c(&["RPUSH", k, m]),
            20 => c(&["LPUSHX", k, m]),
            21 => c(&["RPOP", k]),
            22 => c(&["LPOP", k, n]),
            23 => c(&["LSET", k, "0", m]),
            24 => c(&["LTRIM", k, "1", n]),
            25 => c(&["LINSERT", k, "BEFORE", m, m2]),
            26 => c(&["LREM", k, "0", m]),
            27 => c(&["LMOVE", k, k2, "LEFT", "RIGHT"]),
            28 => c(&["RPOPLPUSH", k, k2]),
            29 => c(&["LMPOP", "2", k, k2, "LEFT", "COUNT", "2"]),
            // hashes
            30 => c(&["HSET", k, m, n, m2, "x"]),
            31 => c(&["HSETNX", k, m, n]),
            32 => c(&["HDEL", k, m, m2]),
            33 => c(&["HINCRBY", k, m, "2"]),
            34 => c(&["HINCRBYFLOAT", k, m, "1.5"]),
            // sets
            35 => c(&["SADD", k, m, m2]),
            36 => c(&["SREM", k, m]),
            37 => c(&["SMOVE", k, k2, m]),
            38 => Cmd {
                args: vec!["SPOP".into(), k.into(), "100".into()],
                unordered: true,
            },
            39 => c(&["SINTERSTORE", k, k2, "s1"]),
            40 => c(&["SUNIONSTORE", k, k2, "s2"]),
            41 => c(&["SDIFFSTORE", k, k2, "s1"]),
            // sorted sets
            42 => c(&["ZADD", k, n, m]),
            43 => {
                let opt = self.pick(&["NX", "XX", "GT", "CH", "INCR"]);
                c(&["ZADD", k, opt, n, m])
            }
            44 => c(&["ZINCRBY", k, "2", m]),
            45 => c(&["ZREM", k, m, m2]),
            46 => c(&["ZREMRANGEBYSCORE", k, "0", n]),
            47 => c(&["ZREMRANGEBYRANK", k, "0", "1"]),
            48 => c(&["ZPOPMIN", k]),
            49 => c(&["ZPOPMAX", k, "2"]),
            50 => c(&["ZUNIONSTORE", k, "2", k2, "z1"]),
            51 => c(&["ZINTERSTORE", k, "2", k2, "z2"]),
            52 => c(&["ZRANGESTORE", k, k2, "0", "-1"]),
            // keys
            53 => c(&["DEL", k, k2]),
            54 => match self.0.below(4) {
                0 => c(&["EXPIRE", k, "1000"]),
                1 => c(&["EXPIRE", k, "-1"]),
                2 => c(&["PEXPIREAT", k, "1"]),
                _ => c(&["PERSIST", k]),
            },
            55 => c(&["RENAME", k, k2]),
            56 => c(&["RENAMENX", k, k2]),
            57 => match self.0.below(3) {
                0 => c(&["COPY", k, k2]),
                1 => c(&["COPY", k, k2, "REPLACE"]),
                _ => c(&["COPY", k, k2, "DB", "1"]),
            },
            58 => c(&["MOVE", k, "1"]),
            59 => c(&["EXISTS", k, k2]),
            60 => c(&[
                "EVAL",
                "redis.call('set', KEYS[1], ARGV[1]); redis.call('lpush', KEYS[2], ARGV[1]); return redis.pcall('incr', KEYS[2])",
                "2",
                k,
                k2,
                m,
            ]),
            _ => c(&["UNLINK", k]),
        }
    }
}

impl Gen {
    /// A command of the stream, HyperLogLog, GEO and SORT ... STORE families, with the
    /// writes that feed them and expired keys for their destinations. Stream IDs are
    /// always given (`<ms>-*` at most), so both servers assign the same ones.
    fn newer(&mut self) -> Cmd {
        let what = self.0.below(34);
        let fam = match what {
            0..=9 => "x",
            10..=14 => "p",
            15..=20 => "g",
            21..=25 => "l",
            _ => "",
        };
        let (k, k2) = if fam.is_empty() {
            (self.key(), self.key())
        } else {
            (self.fam_key(fam), self.fam_key(fam))
        };
        let (m, m2) = (self.member(), self.member());
        let (k, k2, m, m2) = (k.as_str(), k2.as_str(), m.as_str(), m2.as_str());
        let n = self.num(5);
        let n = n.as_str();
        let ms = self.num(40);
        let ms2 = self.num(40);
        let auto = format!("{ms}-*");
        let (ms, ms2, auto) = (ms.as_str(), ms2.as_str(), auto.as_str());
        let lon = self.pick(&["0", "0.5", "1", "3", "10"]);
        let lat = self.pick(&["0", "0.5", "2", "4"]);
        let km = self.pick(&["10", "200", "600"]);
        match what {
            // streams
            0 | 1 => c(&["XADD", k, auto, m, n]),
            2 => c(&["XADD", k, "MAXLEN", n, auto, m, n]),
            3 => c(&["XADD", k, "NOMKSTREAM", auto, m, n]),
            4 => c(&["XADD", k, "MINID", ms2, auto, m, n]),
            5 => c(&["XADD", k, "MAXLEN", "~", n, auto, m, n]),
            6 => c(&["XTRIM", k, "MAXLEN", n]),
            7 => c(&["XTRIM", k, "MINID", ms]),
            8 => {
                let (a, b) = (format!("{ms}-0"), format!("{ms2}-1"));
                c(&["XDEL", k, &a, &b])
            }
            9 => {
                let id = format!("{}-0", 10 + self.0.below(60));
                c(&["XSETID", k, &id])
            }
            // HyperLogLog
            10 | 11 => c(&["PFADD", k, m, m2]),
            12 => c(&["PFADD", k]),
            13 => c(&["PFMERGE", k, k2, "p1"]),
            14 => match self.0.below(2) {
                0 => c(&["PFCOUNT", k]),
                _ => c(&["PFDEBUG", "TODENSE", k]),
            },
            // GEO: `k` the destination, `k2` the source
            15 | 16 => c(&["GEOADD", k, lon, lat, m]),
            17 => {
                let opt = self.pick(&["NX", "XX", "CH"]);
                c(&["GEOADD", k, opt, lon, lat, m])
            }
            18 => c(&[
                "GEOSEARCHSTORE",
                k,
                k2,
                "FROMLONLAT",
                lon,
                lat,
                "BYRADIUS",
                km,
                "km",
            ]),
            19 => c(&["GEORADIUS", k2, lon, lat, km, "km", "STORE", k]),
            20 => c(&[
                "GEORADIUSBYMEMBER",
                k2,
                m,
                km,
                "km",
                "ASC",
                "COUNT",
                "2",
                "STOREDIST",
                k,
            ]),
            // SORT ... STORE over lists (and sets, sorted sets of the shared keys)
            21 => c(&["RPUSH", k, n, m]),
            22 => c(&["LPUSH", k, n]),
            23 => c(&["SORT", k, "STORE", k2]),
            24 => c(&["SORT", k, "ALPHA", "DESC", "LIMIT", "0", "2", "STORE", k2]),
            25 => Cmd {
                // A set's order without sorting is its hash table's in Redis.
                args: ["SORT", k, "BY", "nosort", "GET", "#", "STORE", k2]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                unordered: true,
            },
            // shared keys: other types, expired destinations, deletions
            26 => c(&["SET", k, m, "EXAT", "1"]),
            27 => c(&["SADD", k, n, m]),
            28 => c(&["ZADD", k, n, m]),
            29 => c(&["DEL", k, k2]),
            30 => c(&["EXPIRE", k, "1000"]),
            31 => c(&["SET", k, n]),
            // Other stores whose empty result deletes a (possibly expired) destination.
            _ => match self.0.below(3) {
                0 => c(&["SINTERSTORE", k, k2, "nosuch"]),
                1 => c(&["ZUNIONSTORE", k, "1", k2]),
                _ => c(&["BITOP", "AND", k, k2]),
            },
        }
    }
}

/// Runs one seeded stream of `one`'s commands; returns the event names seen.
fn run_stream(seed: u64, one: fn(&mut Gen) -> Cmd) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    let (mut cs, mut rs) = pair("KEAnm", &[]);
    for s in [&mut cs, &mut rs] {
        s.cmd.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        s.take();
    }
    let mut g = Gen(Lcg(seed));
    let mut step = 0;
    while step < STEPS {
        // A transaction now and then: its commands' events, at EXEC.
        let batch: Vec<Cmd> = if g.0.below(20) == 0 {
            let n = 1 + g.0.below(3) as usize;
            let mut v = vec![c(&["MULTI"])];
            v.extend((0..n).map(|_| {
                let mut x = one(&mut g);
                x.unordered = true;
                x
            }));
            let mut exec = c(&["EXEC"]);
            exec.unordered = true;
            v.push(exec);
            v
        } else if g.0.below(25) == 0 {
            // DUMP and RESTORE a key: each server restores its own payload.
            let (k, k2) = (g.key(), g.key());
            for s in [&mut cs, &mut rs] {
                let dump = s.cmd.call(&["DUMP", &k]);
                if dump.starts_with(b"$-1") {
                    continue;
                }
                let payload = bulk_payload(&dump);
                let args: Vec<&[u8]> = vec![b"RESTORE", k2.as_bytes(), b"0", &payload, b"REPLACE"];
                s.cmd.cmd(&args);
                s.cmd.reply();
            }
            let (a, b) = (cs.take(), rs.take());
            assert_eq!(a, b, "seed {seed} step {step}: DUMP {k} / RESTORE {k2}");
            note_events(&mut seen, &a);
            step += 1;
            continue;
        } else {
            vec![one(&mut g)]
        };
        for cmd in &batch {
            let args: Vec<&str> = cmd.args.iter().map(|s| s.as_str()).collect();
            let rc = cs.cmd.call(&args);
            let rr = rs.cmd.call(&args);
            if !cmd.unordered {
                assert_eq!(
                    show(&rc),
                    show(&rr),
                    "seed {seed} step {step}: replies to {args:?}"
                );
            }
        }
        let (a, b) = (cs.take(), rs.take());
        let shown: Vec<&Vec<String>> = batch.iter().map(|c| &c.args).collect();
        assert_eq!(a, b, "seed {seed} step {step}: notifications of {shown:?}");
        note_events(&mut seen, &a);
        step += 1;
    }
    seen
}

/// Adds the event names of `__keyevent@<db>__:<event> <key>` lines.
fn note_events(seen: &mut std::collections::BTreeSet<String>, lines: &[String]) {
    for l in lines {
        if let Some(rest) = l.strip_prefix("__keyevent@") {
            if let Some((_, ev)) = rest.split_once("__:") {
                seen.insert(ev.split(' ').next().unwrap_or_default().to_string());
            }
        }
    }
}

#[test]
fn random_streams_notify_as_redis() {
    let seeds: Vec<u64> = match std::env::var("CAIRN_NOTIFY_SEED") {
        Ok(s) => vec![s.parse().expect("CAIRN_NOTIFY_SEED is a number")],
        Err(_) => SEEDS.to_vec(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for seed in seeds {
        seen.extend(run_stream(seed, Gen::one));
    }
    // The streams reached every event they can cause (a stream that caused none would
    // compare equal too).
    for ev in [
        "new",
        "set",
        "expire",
        "del",
        "expired",
        "persist",
        "incrby",
        "incrbyfloat",
        "append",
        "setrange",
        "setbit",
        "lpush",
        "rpush",
        "lpop",
        "rpop",
        "lset",
        "ltrim",
        "linsert",
        "lrem",
        "hset",
        "hdel",
        "hincrby",
        "hincrbyfloat",
        "sadd",
        "srem",
        "spop",
        "sinterstore",
        "sunionstore",
        "sdiffstore",
        "zadd",
        "zincr",
        "zrem",
        "zremrangebyscore",
        "zremrangebyrank",
        "zpopmin",
        "zpopmax",
        "zunionstore",
        "zinterstore",
        "zrangestore",
        "rename_from",
        "rename_to",
        "copy_to",
        "move_from",
        "move_to",
        "restore",
    ] {
        if std::env::var("CAIRN_NOTIFY_SEED").is_err() {
            assert!(
                seen.contains(ev),
                "no '{ev}' event in the streams: {seen:?}"
            );
        }
    }
}

/// The stream, HyperLogLog, GEO and SORT ... STORE families, compared as above.
#[test]
fn newer_families_notify_as_redis() {
    let seeds: Vec<u64> = match std::env::var("CAIRN_NOTIFY_SEED") {
        Ok(s) => vec![s.parse().expect("CAIRN_NOTIFY_SEED is a number")],
        Err(_) => SEEDS[..4].to_vec(),
    };
    let mut seen = std::collections::BTreeSet::new();
    for seed in seeds {
        seen.extend(run_stream(seed, Gen::newer));
    }
    for ev in [
        "new",
        "del",
        "expired",
        "xadd",
        "xtrim",
        "xdel",
        "xsetid",
        "pfadd",
        "zadd",
        "geosearchstore",
        "georadiusstore",
        "sortstore",
    ] {
        if std::env::var("CAIRN_NOTIFY_SEED").is_err() {
            assert!(
                seen.contains(ev),
                "no '{ev}' event in the streams: {seen:?}"
            );
        }
    }
}

/// A fixed script touching every class, for the filtering test.
const CLASS_SCRIPT: &[&[&str]] = &[
    &["SET", "s", "1"],
    &["INCRBY", "s", "2"],
    &["APPEND", "s", "x"],
    &["SETRANGE", "s", "0", "y"],
    &["SETBIT", "b", "3", "1"],
    &["EXPIRE", "s", "1000"],
    &["PERSIST", "s"],
    &["GET", "nosuch"],
    &["MGET", "nosuch", "s", "other"],
    &["EXISTS", "nosuch"],
    &["TYPE", "nosuch"],
    &["LPUSH", "l", "a", "b", "c"],
    &["RPOP", "l"],
    &["LSET", "l", "0", "z"],
    &["LTRIM", "l", "0", "0"],
    &["LMOVE", "l", "l2", "LEFT", "LEFT"],
    &["HSET", "h", "f", "1"],
    &["HINCRBY", "h", "f", "1"],
    &["HDEL", "h", "f"],
    &["SADD", "st", "a", "b"],
    &["SREM", "st", "a"],
    &["SINTERSTORE", "st2", "st"],
    &["ZADD", "z", "1", "a", "2", "b"],
    &["ZINCRBY", "z", "1", "a"],
    &["ZPOPMIN", "z"],
    &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
    &["SET", "gone", "1", "PXAT", "1"],
    &["GET", "gone"],
    &["RENAME", "s", "s2"],
    &["COPY", "s2", "s3"],
    &["MOVE", "s3", "1"],
    &["DEL", "s2", "b", "l2"],
    &["XADD", "x", "1-1", "f", "v"],
    &["XADD", "x", "MAXLEN", "1", "2-1", "f", "v"],
    &["XDEL", "x", "2-1"],
    &["XSETID", "x", "5-0"],
    &["PFADD", "hll", "a"],
    &["PFMERGE", "hll2", "hll"],
    &["GEOADD", "geo", "1", "1", "m"],
    &[
        "GEOSEARCHSTORE",
        "geo2",
        "geo",
        "FROMLONLAT",
        "1",
        "1",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["SORT", "st", "ALPHA", "STORE", "sorted"],
    &["SORT", "nosuch", "STORE", "sorted"],
    // An empty result deletes an expired destination: `del`, not `expired`.
    &["SET", "d1", "1", "PXAT", "1"],
    &["SINTERSTORE", "d1", "nosuch"],
    &["SET", "d2", "1", "PXAT", "1"],
    &["ZUNIONSTORE", "d2", "1", "nosuch"],
    &["SET", "d3", "1", "PXAT", "1"],
    &["BITOP", "AND", "d3", "nosuch"],
    &["SET", "d4", "1", "PXAT", "1"],
    &["SORT", "st", "LIMIT", "5", "1", "ALPHA", "STORE", "d4"],
    &["SET", "d5", "1", "PXAT", "1"],
    &[
        "GEOSEARCHSTORE",
        "d5",
        "nosuch",
        "FROMLONLAT",
        "1",
        "1",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["SET", "d6", "1", "PXAT", "1"],
    &["GEORADIUS", "geo", "50", "50", "1", "km", "STORE", "d6"],
];

/// Every class letter alone and in combinations: the same events as redis-server, and
/// none outside the classes asked for.
#[test]
fn each_class_letter_filters_as_redis() {
    for flags in [
        "KA",
        "EA",
        "K$",
        "Eg",
        "Kl",
        "Ks",
        "Kh",
        "Kz",
        "Kx",
        "Ke",
        "Kt",
        "Km",
        "Kd",
        "Kn",
        "KEA",
        "KEAm",
        "KEAn",
        "A",
        "g$lshz",
        "E$lshzxetdmn",
    ] {
        let (mut cs, mut rs) = pair(flags, &[]);
        for s in [&mut cs, &mut rs] {
            s.cmd.call(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
            s.take();
        }
        let mut total = 0;
        for cmd in CLASS_SCRIPT {
            let rc = cs.cmd.call(cmd);
            let rr = rs.cmd.call(cmd);
            assert_eq!(show(&rc), show(&rr), "{flags}: reply to {cmd:?}");
            let (a, b) = (cs.take(), rs.take());
            assert_eq!(a, b, "{flags}: notifications of {cmd:?}");
            total += a.len();
        }
        // Nothing in the script is evicted or a module type.
        let got_any = flags.contains(['K', 'E']) && !matches!(flags, "Kd" | "Ke");
        assert_eq!(total > 0, got_any, "{flags}: {total} notifications");
        // CONFIG GET shows Redis's canonical letters.
        let gc = cs.cmd.call(&["CONFIG", "GET", "notify-keyspace-events"]);
        let gr = rs.cmd.call(&["CONFIG", "GET", "notify-keyspace-events"]);
        assert_eq!(show(&gc), show(&gr), "{flags}: CONFIG GET");
    }
}

/// `new` (class n) when a key is created, by every way of creating one, and not when a
/// key is overwritten.
#[test]
fn new_key_events_as_redis() {
    let (mut cs, mut rs) = pair("KEn", &[]);
    let script: &[&[&str]] = &[
        &["SET", "a", "1"],
        &["SET", "a", "2"],
        &["INCR", "c"],
        &["INCR", "c"],
        &["LPUSH", "l", "x"],
        &["HSET", "h", "f", "v"],
        &["SADD", "s", "m"],
        &["ZADD", "z", "1", "m"],
        &["ZADD", "z", "XX", "1", "q"],
        &["COPY", "a", "a2"],
        &["COPY", "a", "a2", "REPLACE"],
        &["RENAME", "a2", "a3"],
        &["RENAME", "a3", "a"],
        &["MOVE", "a", "1"],
        &["SUNIONSTORE", "s2", "s"],
        &["SUNIONSTORE", "s2", "s"],
        &["LMOVE", "l", "l", "LEFT", "RIGHT"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["SETBIT", "bits", "1", "1"],
        &["MSET", "m1", "1", "m2", "2", "m1", "3"],
    ];
    let mut news = 0;
    for cmd in script {
        assert_eq!(
            show(&cs.cmd.call(cmd)),
            show(&rs.cmd.call(cmd)),
            "reply to {cmd:?}"
        );
        let (a, b) = (cs.take(), rs.take());
        assert_eq!(a, b, "notifications of {cmd:?}");
        news += a.len();
    }
    // RESTORE creates a key too (each server restores its own payload).
    for s in [&mut cs, &mut rs] {
        let payload = bulk_payload(&s.cmd.call(&["DUMP", "h"]));
        s.cmd.cmd(&[b"RESTORE", b"h2", b"0", &payload]);
        assert_eq!(s.cmd.reply(), b"+OK\r\n");
    }
    assert_eq!(cs.take(), rs.take(), "RESTORE");
    assert!(news >= 2 * 14, "{news} notifications");
}

/// Active expiry (nobody reads the keys) publishes one `expired` per key.
#[test]
fn active_expiry_publishes_expired() {
    let srv = start_cairn(&["--notify-keyspace-events", "Ex", "--hz", "100"]);
    let mut sub = Raw::connect(srv.port);
    sub.call(&["SUBSCRIBE", "__keyevent@0__:expired"]);
    let mut cmd = Raw::connect(srv.port);
    let n = 300;
    for i in 0..n {
        let k = format!("k{i}");
        cmd.call(&["SET", &k, "v", "PX", "50"]);
    }
    cmd.call(&["SET", "stays", "v"]);
    let mut got = std::collections::BTreeSet::new();
    while got.len() < n {
        let f = bulks(&sub.reply());
        assert_eq!(f[..2], ["message", "__keyevent@0__:expired"]);
        assert!(got.insert(f[2].clone()), "{} expired twice", f[2]);
    }
    let want: std::collections::BTreeSet<String> = (0..n).map(|i| format!("k{i}")).collect();
    assert_eq!(got, want);
    assert_eq!(cmd.call(&["DBSIZE"]), b":1\r\n");
    assert_eq!(cmd.info_u64("stats", "expired_keys"), n as u64);
}

/// Eviction publishes one `evicted` per evicted key, before the events of the command
/// that made room.
#[test]
fn eviction_publishes_evicted() {
    let srv = start_cairn(&[
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "allkeys-random",
        "--notify-keyspace-events",
        "Eg$e",
    ]);
    let mut sub = Raw::connect(srv.port);
    sub.call(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    let mut cmd = Raw::connect(srv.port);
    let value = "v".repeat(1000);
    let n = 12_000;
    for chunk in 0..n / 500 {
        let mut batch = Vec::new();
        for i in 0..500 {
            let k = format!("k{}", chunk * 500 + i);
            batch.extend_from_slice(&encode(&[b"SET", k.as_bytes(), value.as_bytes()]));
        }
        cmd.send(&batch);
        for _ in 0..500 {
            assert_eq!(cmd.reply(), b"+OK\r\n");
        }
    }
    let evicted = cmd.info_u64("stats", "evicted_keys");
    assert!(evicted > 1000, "only {evicted} evictions");
    // Every SET publishes `set`; the evictions it caused come before it.
    let mut sets = 0;
    let mut gone = std::collections::BTreeSet::new();
    let mut set_keys = std::collections::BTreeSet::new();
    while sets < n || (gone.len() as u64) < evicted {
        let f = bulks(&sub.reply());
        match f[2].as_str() {
            "__keyevent@0__:set" => {
                sets += 1;
                set_keys.insert(f[3].clone());
            }
            "__keyevent@0__:evicted" => {
                assert!(
                    set_keys.contains(&f[3]),
                    "{} evicted before it was set",
                    f[3]
                );
                assert!(gone.insert(f[3].clone()), "{} evicted twice", f[3]);
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(gone.len() as u64, evicted);
    for k in gone.iter().take(200) {
        assert_eq!(cmd.call(&["EXISTS", k]), b":0\r\n", "{k} was evicted");
    }
}

/// A RESP3 client subscribed to its own keys gets its notifications as push frames in
/// the same place around its replies as from redis-server (where Redis writes the push
/// before the reply), and after the reply when the reply is under way (EXEC, scripts).
#[test]
fn own_notifications_in_resp3_as_redis() {
    let args = ["--notify-keyspace-events", "KEA"];
    let (cp, rp) = (start_cairn(&args), start_redis(&args));
    let mut out = Vec::new();
    for port in [cp.port, rp.port] {
        let mut raw = Raw::connect(port);
        raw.call(&["HELLO", "3"]);
        raw.call(&["PSUBSCRIBE", "__keyspace@0__:*"]);
        let mut got = Vec::new();
        for cmd in [
            &["SET", "k", "1"][..],
            &["INCR", "k"],
            &["EXPIRE", "k", "100"],
            &["DEL", "k"],
            &["SET", "k", "v", "EXAT", "1"],
            &["GET", "k"],
            &["HSET", "h", "f", "v"],
            &["RENAME", "h", "h2"],
            &["HSET", "h2", "g", "1"],
            &["HSETNX", "h2", "x", "1"],
            &["HINCRBY", "h2", "g", "1"],
            &["HINCRBYFLOAT", "h2", "g", "1"],
            &["HDEL", "h2", "g", "x", "f"],
            &["LPUSH", "l", "a", "b"],
            &["LSET", "l", "0", "c"],
            &["LINSERT", "l", "BEFORE", "c", "d"],
            &["LTRIM", "l", "0", "1"],
            &["LREM", "l", "0", "d"],
            &["RPOP", "l"],
            &["SADD", "s", "a", "b"],
            &["SREM", "s", "a"],
            &["SMOVE", "s", "s2", "b"],
            &["SUNIONSTORE", "s3", "s2"],
            &["SDIFFSTORE", "s3", "nosuch"],
            &["ZADD", "z", "1", "a", "2", "b"],
            &["ZINCRBY", "z", "1", "a"],
            &["ZREM", "z", "a"],
            &["ZUNIONSTORE", "z2", "1", "z"],
            &["ZINTERSTORE", "z2", "1", "nosuch"],
            &["ZREMRANGEBYRANK", "z", "0", "0"],
            &["SETBIT", "bits", "1", "1"],
            &["BITOP", "NOT", "bits2", "bits"],
            &["APPEND", "str", "x"],
            &["SETRANGE", "str", "1", "y"],
            &["INCRBYFLOAT", "n", "1.5"],
            &["GETSET", "str", "z"],
            &["GETDEL", "str"],
            &["PERSIST", "n"],
            &["EXPIRE", "n", "-1"],
            &["COPY", "bits", "bits3"],
            &["MOVE", "bits3", "1"],
            &["MSET", "m1", "1", "m2", "2"],
            // A transaction, sent whole (PING would be queued).
            &["MULTI", "|", "SET", "a", "1", "|", "DEL", "a", "|", "EXEC"],
            &[
                "EVAL",
                "redis.call('set', KEYS[1], '1'); return 7",
                "1",
                "x",
            ],
        ] {
            for part in cmd.split(|a| *a == "|") {
                let a: Vec<&[u8]> = part.iter().map(|s| s.as_bytes()).collect();
                raw.cmd(&a);
            }
            raw.cmd(&[b"PING"]);
            let mut frames = Vec::new();
            loop {
                let f = raw.reply();
                if f == b"+PONG\r\n" {
                    break;
                }
                frames.push(show(&f));
            }
            got.push((cmd.join(" "), frames));
        }
        out.push(got);
    }
    // Redis 7.0 writes the pushes of EXEC's and EVAL's commands inside their replies
    // (in the middle of EXEC's array); cairn sends them after the reply, whole.
    let held = |c: &str| c.starts_with("MULTI") || c.starts_with("EVAL");
    for (c, r) in out[0].iter().zip(&out[1]) {
        if !held(&c.0) {
            assert_eq!(c, r);
        }
    }
    let push = |key: &str, ev: &str| {
        format!(
            ">4\r\n$8\r\npmessage\r\n$16\r\n__keyspace@0__:*\r\n${}\r\n__keyspace@0__:{key}\r\n${}\r\n{ev}\r\n",
            15 + key.len(),
            ev.len()
        )
    };
    let exec = out[0].iter().find(|c| c.0.starts_with("MULTI")).unwrap();
    assert_eq!(
        exec.1,
        [
            "+OK\r\n".to_string(),
            "+QUEUED\r\n".into(),
            "+QUEUED\r\n".into(),
            "*2\r\n+OK\r\n:1\r\n".into(),
            push("a", "set"),
            push("a", "del"),
        ]
    );
    let eval = out[0].iter().find(|c| c.0.starts_with("EVAL")).unwrap();
    assert_eq!(eval.1, [":7\r\n".to_string(), push("x", "set")]);
}

/// A client blocked on a list and served by another client's push: the push's event,
/// then the pop's (and `del`), as Redis.
#[test]
fn served_blocked_pop_notifies_as_redis() {
    let (mut cs, mut rs) = pair("KEA", &[]);
    for s in [&mut cs, &mut rs] {
        let port = s._srv.port;
        let mut blocked = Raw::connect(port);
        blocked.cmd(&[b"BLPOP", b"q", b"0"]);
        let mut blocked2 = Raw::connect(port);
        blocked2.cmd(&[b"BLMOVE", b"q2", b"d", b"LEFT", b"RIGHT", b"0"]);
        wait_until(DEADLINE, "clients blocked", || {
            let info = show(&s.cmd.call(&["INFO", "clients"]));
            info_int(&info, "blocked_clients") == 2
        });
        s.take();
        s.cmd.call(&["RPUSH", "q", "x"]);
        assert!(show(&blocked.reply()).contains('x'));
        s.cmd.call(&["LPUSH", "q2", "y", "z"]);
        assert!(show(&blocked2.reply()).contains('z'));
    }
    assert_eq!(cs.take(), rs.take());
}
