//! GEO and SORT edge cases against Debian's redis-server 7.0.15 (raw replies
//! byte-identical, RESP2 and RESP3) where the random streams of `differential.rs` seldom
//! go: the poles and the antimeridian, radius 0 and infinite, COUNT and LIMIT at the i64
//! edges, scores that are no geohash of a valid point, SORT in MULTI and in scripts;
//! then WATCH on SORT/GEO destinations, and a restart from the AOF after SORT ... STORE
//! and the GEO store commands.
mod common;
use common::*;

const GEO_SCRIPT: &[&str] = &[
    "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD g 180 85.05112878 ne -180 -85.05112878 sw 179.99999 0 east -179.99999 0 west",
    "GEOADD g 0 0 origin -0 -0 negorigin 0.000001 0.000001 near",
    "GEOADD g 180.0000001 0 bad",
    "GEOADD g 0 85.05112879 bad",
    "GEOADD g inf 0 bad",
    "GEOADD g 0 -inf bad",
    "GEOADD g nan 0 bad",
    "GEOADD g 1e308 1 bad",
    "GEOADD g 1 2",
    "GEOADD g NX XX 1 2 m",
    "GEOADD g GT 1 2 m",
    "GEOADD g XX CH 13.361389 38.115557 Palermo 1 1 notthere",
    "GEOADD g NX CH 14 38 Palermo 14 38 newone",
    "GEOPOS g Palermo ne sw east west origin negorigin near nope",
    "GEOHASH g Palermo ne sw east west origin negorigin near nope",
    "GEODIST g east west",
    "GEODIST g east west km",
    "GEODIST g ne sw mi",
    "GEODIST g origin negorigin ft",
    "GEODIST g origin near",
    "GEODIST g origin near parsec",
    "GEODIST g origin near km extra",
    "GEODIST nokey a b",
    // Across the antimeridian, at the poles, radius 0 and infinite.
    "GEOSEARCH g FROMLONLAT 180 0 BYRADIUS 100 km WITHDIST WITHCOORD ASC",
    "GEOSEARCH g FROMLONLAT -180 0 BYBOX 200 200 km WITHDIST ASC",
    "GEOSEARCH g FROMMEMBER ne BYRADIUS 5000 km WITHDIST WITHHASH",
    "GEOSEARCH g FROMMEMBER sw BYBOX 40000 40000 km DESC COUNT 3",
    "GEOSEARCH g FROMMEMBER origin BYRADIUS 0 m WITHDIST",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX 0 0 m",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS inf km ASC WITHDIST",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX inf 1 km ASC",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 9223372036854775807 DESC",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 9223372036854775807 ANY",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 9223372036854775808",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 2 ANY WITHCOORD",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1e-300 m",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS -0 m",
    // Errors, in the order Redis checks them.
    "GEOSEARCH g FROMLONLAT 0 0",
    "GEOSEARCH g BYRADIUS 1 km",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km ANY",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km COUNT 0",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km COUNT -1",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km COUNT x",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS -1 km",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS x km",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX x 1 km",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX 1 x km",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX 1 -1 km",
    "GEOSEARCH g FROMLONLAT 0 0 BYBOX 1 1 ly",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km BYBOX 1 1 km",
    "GEOSEARCH g FROMLONLAT 0 0 FROMMEMBER origin BYRADIUS 1 km",
    "GEOSEARCH g FROMMEMBER nope BYRADIUS 1 km",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km STORE x",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km STOREDIST",
    "GEOSEARCH g FROMLONLAT 0 0 BYRADIUS 1 km COUNT",
    "GEOSEARCHSTORE d g FROMLONLAT 0 0 BYRADIUS 1 km WITHDIST",
    "GEOSEARCH nokey FROMMEMBER x BYRADIUS x km",
    "GEOSEARCH nokey FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEORADIUS g 0 0 100 km STORE d WITHCOORD",
    "GEORADIUS_RO g 0 0 100 km STORE d",
    "GEORADIUSBYMEMBER g nope 1 km",
    "GEORADIUSBYMEMBER nokey nope x km",
    "GEORADIUS g 200 0 1 km",
    "GEORADIUS g 0 0 1 lightyear",
    // Stores.
    "GEOSEARCHSTORE d g FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 3 STOREDIST",
    "ZRANGE d 0 -1 WITHSCORES",
    "GEOSEARCHSTORE d g FROMLONLAT 0 0 BYRADIUS 30000 km DESC COUNT 2",
    "ZRANGE d 0 -1 WITHSCORES",
    "OBJECT ENCODING d",
    "GEORADIUS g 0 0 1 m STORE d",
    "EXISTS d",
    "GEORADIUSBYMEMBER g Palermo 200 km STOREDIST d2 ASC",
    "ZRANGE d2 0 -1 WITHSCORES",
    "GEORADIUS g 15 37 200 km STORE d3 STOREDIST d4",
    "EXISTS d3 d4",
    "GEOSEARCHSTORE d2 nokey FROMMEMBER x BYRADIUS 1 km",
    "EXISTS d2",
    // Scores that are no geohash of a valid point.
    "ZADD g -1 negscore inf infscore 4503599627370496 toobig 1.5 frac",
    "GEOPOS g negscore infscore toobig frac",
    "GEOHASH g negscore infscore toobig frac",
    "GEODIST g negscore frac",
    "GEOSEARCH g FROMMEMBER negscore BYRADIUS 100 km WITHDIST",
    "GEOSEARCH g FROMMEMBER frac BYRADIUS 1000 km WITHDIST WITHHASH ASC",
    "SET s x",
    "GEOADD s 1 1 a",
    "GEOPOS s a",
    "GEOSEARCH s FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEORADIUS s 200 0 1 km",
];

const SORT_SCRIPT: &[&str] = &[
    "RPUSH l 3 1 2 10 -5 1.5 0x10 7 1e3",
    "SORT l",
    "SORT l DESC LIMIT -5 3",
    "SORT l LIMIT 2 -1",
    "SORT l LIMIT 9223372036854775807 9223372036854775807",
    "SORT l LIMIT -9223372036854775808 2",
    "SORT l LIMIT 0 0",
    "SORT l LIMIT 0 9223372036854775808",
    "SORT l LIMIT 1",
    "SORT l BY nosort LIMIT 2 3",
    "SORT l BY nosort DESC LIMIT 2 3",
    "SORT l BY nosort DESC LIMIT 100 3",
    "SORT l ALPHA DESC",
    "MSET w_1 5 w_2 5 w_3 5 w_10 1 w_-5 abc",
    "SORT l BY w_*",
    "SET w_-5 9",
    "SORT l BY w_*",
    "SORT l BY w_* LIMIT 0 1",
    "SORT l BY w_* LIMIT 1 4 GET # GET w_*",
    "SORT l BY w_* ALPHA DESC LIMIT 0 3",
    "HSET h_1 f 2 g a",
    "HSET h_2 f 1",
    "SORT l BY h_*->f GET h_*->g GET # GET h_*->missing",
    "SORT l BY h_*-> GET h_*->",
    "SORT l STORE dst",
    "LRANGE dst 0 -1",
    "SET other x EX 1000",
    "SORT l LIMIT 0 2 STORE other",
    "TYPE other",
    "TTL other",
    "SORT l LIMIT 100 2 STORE other",
    "EXISTS other",
    "SORT l GET nothing STORE dst",
    "LRANGE dst 0 -1",
    "ZADD z 3 c 1 a 2 b",
    "OBJECT ENCODING z",
    "SORT z BY nosort DESC LIMIT 1 5",
    "OBJECT ENCODING z",
    "SORT z ALPHA",
    "SADD s 9 2 5",
    "SORT s BY nosort STORE ds",
    "LRANGE ds 0 -1",
    "SET str x",
    "SORT str",
    "SORT l BY",
    "SORT l STORE",
    "SORT l FOO",
    "SORT l LIMIT x 1",
    "SORT_RO l STORE x",
    "SORT_RO l BY w_* GET #",
    "SORT nokey",
    "SORT nokey STORE dst",
    "EXISTS dst",
    "RPUSH bad 1 x",
    "SORT bad",
    "MULTI",
    "SORT l LIMIT 0 2",
    "SORT l STORE dst",
    "SORT bad",
    "EXEC",
    "SADD words pear apple fig",
    "EVAL \"return redis.call('SORT',KEYS[1],'BY','nosort')\" 1 words",
    "EVAL \"return redis.call('SORT',KEYS[1],'BY','nosort','GET','#')\" 1 s",
    // Last: after an overflow Redis 7.0 leaves errno at ERANGE, and its next SORTs on
    // this connection fail as well.
    "SET w_3 1e400",
    "SORT l BY w_*",
];

/// Each line split on spaces, except a double-quoted argument (EVAL's script).
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').expect("closing quote");
            out.push(r[..end].to_string());
            rest = &r[end + 1..];
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

fn script_matches(script: &[&str], resp3: bool) {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    if resp3 {
        rc.call(&["HELLO", "3"]);
        rr.call(&["HELLO", "3"]);
    }
    for line in script {
        let args = split(line);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        same_str(&mut rc, &mut rr, &refs);
    }
}

#[test]
fn geo_edges_match_redis_resp2() {
    script_matches(GEO_SCRIPT, false);
}

#[test]
fn geo_edges_match_redis_resp3() {
    script_matches(GEO_SCRIPT, true);
}

#[test]
fn sort_edges_match_redis_resp2() {
    script_matches(SORT_SCRIPT, false);
}

#[test]
fn sort_edges_match_redis_resp3() {
    script_matches(SORT_SCRIPT, true);
}

/// A store touches its destination for WATCH and not its source (Redis signals only the
/// stored key).
#[test]
fn watch_sees_the_destination_only() {
    let (c, r, _, _) = both(&[]);
    for port in [c.port, r.port] {
        let mut a = Raw::connect(port);
        let mut b = Raw::connect(port);
        a.call(&["RPUSH", "l", "2", "1"]);
        a.call(&["GEOADD", "g", "1", "1", "m"]);
        for (watched, cmd) in [
            ("dst", &["SORT", "l", "STORE", "dst"][..]),
            ("l", &["SORT", "l", "STORE", "dst2"][..]),
            (
                "dst3",
                &["GEORADIUS", "g", "1", "1", "10", "km", "STORE", "dst3"][..],
            ),
            (
                "g",
                &["GEORADIUS", "g", "1", "1", "10", "km", "STORE", "dst4"][..],
            ),
            (
                "g",
                &[
                    "GEOSEARCHSTORE",
                    "dst5",
                    "g",
                    "FROMMEMBER",
                    "m",
                    "BYRADIUS",
                    "1",
                    "m",
                ][..],
            ),
        ] {
            a.call(&["WATCH", watched]);
            b.call(cmd);
            a.call(&["MULTI"]);
            a.call(&["PING"]);
            let exec = a.call(&["EXEC"]);
            let expect_abort = watched.starts_with("dst");
            assert_eq!(
                exec == b"*-1\r\n",
                expect_abort,
                "port {port}: WATCH {watched} then {cmd:?}: {}",
                show(&exec)
            );
        }
    }
}

/// SORT ... STORE and the GEO stores are logged so a restart from the AOF holds the
/// same lists and sorted sets (BY and GET patterns read the keys as they were).
#[test]
fn aof_restart_keeps_sort_and_geo_stores() {
    let dir = temp_dir("geo-sort-aof");
    let start = || start_aof(&dir, &[]);
    let state = |raw: &mut Raw| {
        ["sorted", "byw", "alpha", "near", "dists", "radius"]
            .iter()
            .map(|k| {
                let t = show(&raw.call(&["TYPE", k]));
                let v = if t.contains("list") {
                    raw.call(&["LRANGE", k, "0", "-1"])
                } else {
                    raw.call(&["ZRANGE", k, "0", "-1", "WITHSCORES"])
                };
                format!("{t} {}", show(&v))
            })
            .collect::<Vec<_>>()
    };
    let want;
    {
        let s = start();
        let mut raw = Raw::connect(s.port);
        raw.call(&["SADD", "set", "pear", "apple", "fig", "kiwi", "12", "3"]);
        raw.call(&["MSET", "w_pear", "3", "w_apple", "1", "w_fig", "2"]);
        raw.call(&["SORT", "set", "ALPHA", "STORE", "sorted"]);
        raw.call(&[
            "SORT", "set", "BY", "w_*", "GET", "#", "GET", "w_*", "STORE", "byw",
        ]);
        raw.call(&["SORT", "set", "BY", "nosort", "STORE", "alpha"]);
        raw.call(&["SET", "w_pear", "0"]);
        raw.call(&[
            "GEOADD",
            "g",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ]);
        raw.call(&[
            "GEOSEARCHSTORE",
            "near",
            "g",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "ASC",
        ]);
        raw.call(&[
            "GEOSEARCHSTORE",
            "dists",
            "g",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "STOREDIST",
        ]);
        raw.call(&["GEORADIUS", "g", "15", "37", "100", "km", "STORE", "radius"]);
        want = state(&mut raw);
        assert!(want[1].contains("apple"), "{want:?}");
        drop(s); // SIGKILL
    }
    let s = start();
    let mut raw = Raw::connect(s.port);
    assert_eq!(state(&mut raw), want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
