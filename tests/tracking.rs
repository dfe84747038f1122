//! Client-side caching (CLIENT TRACKING): the same scenarios on Debian's redis-server
//! 7.0.15 and on cairn, every connection's whole output (replies, invalidation pushes,
//! `__redis__:invalidate` messages) compared byte for byte after every step.

mod common;

use common::*;

/// One scenario on one server: named connections, steps run in order.
struct Session {
    conns: Vec<Raw>,
    ids: Vec<String>,
    resp3: Vec<bool>,
    subscribed: Vec<bool>,
    closed: Vec<bool>,
    in_multi: Vec<bool>,
}

/// A reply that is a client id (CLIENT ID, CLIENT GETREDIR).
fn is_id_reply(args: &[String]) -> bool {
    args.len() == 2
        && args[0].eq_ignore_ascii_case("CLIENT")
        && (args[1].eq_ignore_ascii_case("ID") || args[1].eq_ignore_ascii_case("GETREDIR"))
}

impl Session {
    fn open(port: u16, n: usize) -> Session {
        let mut conns = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..n {
            let mut c = Raw::connect(port);
            let id = show(&c.call(&["CLIENT", "ID"]));
            ids.push(id.trim_start_matches(':').trim_end().to_string());
            conns.push(c);
        }
        Session {
            conns,
            ids,
            resp3: vec![false; n],
            subscribed: vec![false; n],
            closed: vec![false; n],
            in_multi: vec![false; n],
        }
    }

    /// Runs `args` on connection `c` (`$0`, `$1`... stand for connection ids) and
    /// returns, per connection, every frame it received up to a PING's answer.
    fn step(&mut self, c: usize, args: &[&str]) -> Vec<Vec<String>> {
        let args: Vec<String> = args
            .iter()
            .map(|a| match a.strip_prefix('$') {
                Some(n) if n.parse::<usize>().is_ok() => {
                    self.ids[n.parse::<usize>().unwrap()].clone()
                }
                _ => a.to_string(),
            })
            .collect();
        if args[0].eq_ignore_ascii_case("HELLO") && args.get(1).map(|s| s.as_str()) == Some("3") {
            self.resp3[c] = true;
        }
        if args[0].eq_ignore_ascii_case("SUBSCRIBE") {
            self.subscribed[c] = true;
        }
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.conns[c].cmd(&a);
        // The command's reply first: only then has it run, and the others' PINGs come
        // after it.
        let reply = if self.closed[c] {
            None
        } else {
            Some(show(&self.conns[c].reply()))
        };
        if args[0].eq_ignore_ascii_case("QUIT") {
            self.closed[c] = true;
        }
        // Inside MULTI a PING would be queued: that connection is read after EXEC.
        if args[0].eq_ignore_ascii_case("MULTI") {
            self.in_multi[c] = true;
        }
        if args[0].eq_ignore_ascii_case("EXEC") || args[0].eq_ignore_ascii_case("DISCARD") {
            self.in_multi[c] = false;
        }
        let mut seen = Vec::new();
        for i in 0..self.conns.len() {
            let mut frames: Vec<String> = Vec::new();
            if i == c {
                frames.extend(reply.clone());
            }
            if !self.closed[i] && !self.in_multi[i] {
                frames.extend(self.drain(i));
            }
            let whole = i == c && is_id_reply(&args);
            seen.push(
                frames
                    .into_iter()
                    .map(|f| self.mask_ids(f, whole))
                    .collect(),
            );
        }
        seen
    }

    /// Client ids differ between the servers (their own connections count): where a
    /// frame carries one (HELLO's `id`, a redirect), it is replaced by `$<connection>`.
    fn mask_ids(&self, f: String, whole: bool) -> String {
        let mut f = f;
        for (k, id) in self.ids.iter().enumerate() {
            for (before, after) in [
                (
                    format!("$2\r\nid\r\n:{id}\r\n"),
                    format!("$2\r\nid\r\n:${k}\r\n"),
                ),
                (
                    format!("redirect\r\n:{id}\r\n"),
                    format!("redirect\r\n:${k}\r\n"),
                ),
                (
                    format!("tracking-redir-broken\r\n:{id}\r\n"),
                    format!("tracking-redir-broken\r\n:${k}\r\n"),
                ),
            ] {
                f = f.replace(&before, &after);
            }
            if whole && f == format!(":{id}\r\n") {
                f = format!(":${k}\r\n");
            }
        }
        f
    }

    /// Frames on connection `i` until the answer to a PING sent now.
    fn drain(&mut self, i: usize) -> Vec<String> {
        let mut frames = Vec::new();
        self.conns[i].cmd(&[b"PING"]);
        loop {
            let f = show(&self.conns[i].reply());
            let pong = if self.subscribed[i] && !self.resp3[i] {
                f == "*2\r\n$4\r\npong\r\n$0\r\n\r\n"
            } else {
                f == "+PONG\r\n"
            };
            if pong {
                return frames;
            }
            frames.push(f);
        }
    }
}

/// Runs `steps` (connection, command) with `n` connections on both servers and compares
/// what every connection saw after every step.
fn same_on_both(n: usize, steps: &[(usize, &[&str])]) {
    same_on_both_with(&[], n, steps)
}

fn same_on_both_with(cairn_args: &[&str], n: usize, steps: &[(usize, &[&str])]) {
    let redis = start_redis(&[]);
    let cairn = start_cairn(cairn_args);
    let mut r = Session::open(redis.port, n);
    let mut c = Session::open(cairn.port, n);
    for (k, (conn, args)) in steps.iter().enumerate() {
        eprintln!("step {k}: connection {conn} runs {args:?}");
        let want = r.step(*conn, args);
        let got = c.step(*conn, args);
        assert_eq!(
            got, want,
            "step {k}: connection {conn} ran {args:?}: cairn (left) vs redis (right)"
        );
    }
}

#[test]
fn resp3_tracking_invalidates_as_redis() {
    same_on_both(
        3,
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "ON"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "GETREDIR"]),
            (1, &["CLIENT", "GETREDIR"]),
            (0, &["GET", "a"]),
            (0, &["MGET", "b", "c", "d"]),
            (1, &["SET", "a", "1"]),
            (1, &["SET", "a", "2"]),
            (1, &["MSET", "b", "1", "c", "2", "zz", "3"]),
            // Its own write: the invalidation comes after the reply.
            (0, &["GET", "a"]),
            (0, &["SET", "a", "3"]),
            (0, &["HGETALL", "h"]),
            (1, &["HSET", "h", "f", "v"]),
            (0, &["LRANGE", "l", "0", "-1"]),
            (0, &["LLEN", "l"]),
            (1, &["RPUSH", "l", "x", "y"]),
            (0, &["EXISTS", "a", "b"]),
            (1, &["DEL", "a", "b", "nothere"]),
            (0, &["GET", "r1"]),
            (1, &["SET", "r1", "v"]),
            (0, &["GET", "r1"]),
            (1, &["RENAME", "r1", "r2"]),
            (0, &["SINTERCARD", "2", "s1", "s2"]),
            (0, &["ZUNION", "2", "z1", "z2"]),
            (1, &["SADD", "s2", "m"]),
            (1, &["ZADD", "z1", "1", "m"]),
            (0, &["STRLEN", "n"]),
            (1, &["INCR", "n"]),
            (1, &["INCR", "n"]),
            // Inside MULTI: the invalidations after EXEC's reply.
            (0, &["GET", "t1"]),
            (0, &["GET", "t2"]),
            (0, &["MULTI"]),
            (0, &["SET", "t1", "x"]),
            (0, &["GET", "t2"]),
            (0, &["SET", "t2", "y"]),
            (0, &["EXEC"]),
            // A script's reads remember its declared keys.
            (0, &["EVAL", "return redis.call('get', KEYS[1])", "1", "sk"]),
            (1, &["SET", "sk", "1"]),
            (
                0,
                &["EVAL_RO", "return redis.call('exists', KEYS[1])", "1", "sr"],
            ),
            (1, &["SET", "sr", "1"]),
            // A flush: a null for every tracking client.
            (0, &["GET", "f"]),
            (1, &["FLUSHALL"]),
            (0, &["GET", "f"]),
            (0, &["FLUSHDB"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["GET", "g"]),
            (1, &["SET", "g", "1"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
        ],
    );
}

#[test]
fn optin_optout_and_noloop_as_redis() {
    same_on_both(
        2,
        &[
            (0, &["HELLO", "3"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTIN"]),
            (0, &["GET", "a"]),
            (1, &["SET", "a", "1"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "a"]),
            (0, &["GET", "b"]),
            (1, &["SET", "a", "2"]),
            (1, &["SET", "b", "2"]),
            (0, &["CLIENT", "CACHING", "NO"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTOUT"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "OPTOUT", "NOLOOP"]),
            (0, &["GET", "c"]),
            (0, &["CLIENT", "CACHING", "NO"]),
            (0, &["GET", "d"]),
            (1, &["SET", "d", "1"]),
            (0, &["SET", "c", "1"]),
            (0, &["GET", "c"]),
            (1, &["SET", "c", "2"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["CLIENT", "CACHING", "YES"]),
            (0, &["CLIENT", "CACHING", "maybe"]),
        ],
    );
}

#[test]
fn redirect_to_a_resp2_subscriber_and_broken_redirects_as_redis() {
    same_on_both(
        4,
        &[
            (1, &["SUBSCRIBE", "__redis__:invalidate"]),
            (0, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$1"]),
            (0, &["CLIENT", "GETREDIR"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["GET", "a"]),
            (2, &["SET", "a", "1"]),
            (0, &["GET", "a"]),
            (0, &["SET", "a", "2"]),
            (0, &["GET", "a"]),
            (2, &["FLUSHALL"]),
            // A RESP2 client without redirect tracks, but hears nothing.
            (2, &["CLIENT", "TRACKING", "ON"]),
            (2, &["GET", "q"]),
            (3, &["SET", "q", "1"]),
            // A RESP3 client redirecting to a client that then leaves.
            (3, &["HELLO", "3"]),
            (3, &["CLIENT", "TRACKING", "ON", "REDIRECT", "$2"]),
            (3, &["GET", "w"]),
            (2, &["QUIT"]),
            (0, &["SET", "w", "1"]),
            (3, &["CLIENT", "TRACKINGINFO"]),
            (3, &["CLIENT", "GETREDIR"]),
        ],
    );
}

#[test]
fn bcast_prefixes_as_redis() {
    bcast_prefixes_with(&[]);
}

/// With I/O threads the executor delivers through the threads' outboxes.
#[test]
fn bcast_prefixes_as_redis_with_io_threads() {
    bcast_prefixes_with(&["--io-threads", "2"]);
}

fn bcast_prefixes_with(cairn_args: &[&str]) {
    same_on_both_with(
        cairn_args,
        3,
        &[
            (0, &["HELLO", "3"]),
            (
                0,
                &[
                    "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "obj",
                ],
            ),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (1, &["SET", "user:1", "a"]),
            (1, &["SET", "other", "a"]),
            (1, &["MSET", "object", "1", "user:2", "2", "objection", "3"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "u"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "zed"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (1, &["SET", "zed1", "a"]),
            (0, &["SET", "user:9", "mine"]),
            (0, &["CLIENT", "TRACKING", "OFF"]),
            (0, &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
            (0, &["CLIENT", "TRACKINGINFO"]),
            (0, &["SET", "k1", "mine"]),
            (1, &["SET", "k2", "theirs"]),
            (1, &["DEL", "k1"]),
            (2, &["HELLO", "3"]),
            (
                2,
                &[
                    "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b",
                ],
            ),
            (1, &["SET", "a1", "x"]),
            (1, &["FLUSHALL"]),
        ],
    );
}

#[test]
fn tracking_errors_as_redis() {
    let (_c, _r, mut rc, mut rr) = both(&[]);
    same_replies(
        &mut rc,
        &mut rr,
        &[
            &["CLIENT", "TRACKING"],
            &["CLIENT", "TRACKING", "maybe"],
            &["CLIENT", "TRACKING", "ON", "BOGUS"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"],
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "0"],
            &["CLIENT", "TRACKING", "ON", "PREFIX", "a"],
            &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
            &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
            &[
                "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a",
            ],
            // (Not compared: Redis 7.0 answers an overlap found after the first prefix
            // with the error *and* +OK, turning tracking on; cairn answers the error.)
            &["CLIENT", "CACHING", "YES"],
            &["CLIENT", "CACHING"],
            &["CLIENT", "GETREDIR", "x"],
            &["CLIENT", "TRACKINGINFO", "x"],
            &["CLIENT", "TRACKING", "ON", "OPTIN"],
            &["CLIENT", "TRACKING", "ON", "OPTOUT"],
            &["CLIENT", "TRACKING", "ON", "BCAST"],
            &["CLIENT", "CACHING", "NO"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "TRACKING", "OFF"],
            &["CLIENT", "TRACKING", "ON", "BCAST"],
            &["CLIENT", "TRACKING", "ON"],
            &["CLIENT", "TRACKING", "OFF", "REDIRECT", "424242"],
            &["COMMAND", "GETKEYS", "ZUNIONSTORE", "out", "2", "a", "b"],
            &[
                "COMMAND", "GETKEYS", "ZUNION", "2", "a", "b", "WEIGHTS", "1", "2",
            ],
            &[
                "COMMAND",
                "GETKEYS",
                "SINTERCARD",
                "2",
                "a",
                "b",
                "LIMIT",
                "1",
            ],
            &["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"],
            &["COMMAND", "GETKEYS", "BLMPOP", "0", "2", "a", "b", "LEFT"],
            &["COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c"],
            &["COMMAND", "GETKEYS", "EVAL", "return 1", "0"],
            &["COMMAND", "GETKEYS", "ZDIFF", "3", "a", "b"],
            &[
                "COMMAND", "GETKEYS", "SORT", "k", "BY", "store", "LIMIT", "0", "1", "STORE", "dst",
            ],
            &["COMMAND", "GETKEYS", "GET", "k"],
            &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
            &["COMMAND", "GETKEYS", "PING"],
        ],
    );
}

/// `tracking-table-max-keys`: the table never stays above the limit, and the keys it
/// drops are invalidated as if they changed (so a client never keeps a stale copy).
#[test]
fn the_tracking_table_stays_within_its_limit() {
    let cairn = start_cairn(&["--tracking-table-max-keys", "10"]);
    let mut t = Raw::connect(cairn.port);
    assert!(show(&t.call(&["HELLO", "3"])).starts_with('%'));
    assert_eq!(t.call(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    let mut other = Raw::connect(cairn.port);
    let mut invalidated = 0usize;
    for i in 0..40 {
        let key = format!("k{i}");
        t.cmd(&[b"GET", key.as_bytes()]);
        // The reply, then any invalidations the limit caused before this command ran.
        loop {
            let f = t.reply();
            if f.starts_with(b">") {
                assert!(show(&f).contains("invalidate"), "{}", show(&f));
                invalidated += 1;
            } else {
                break;
            }
        }
        let keys = other.info_u64("stats", "tracking_total_keys");
        assert!(keys <= 11, "{keys} keys tracked with a limit of 10");
    }
    assert!(
        invalidated >= 29,
        "only {invalidated} invalidations for 40 keys, limit 10"
    );
    assert_eq!(other.info_u64("clients", "tracking_clients"), 1);
    assert_eq!(
        other.call(&["CONFIG", "SET", "tracking-table-max-keys", "0"]),
        b"+OK\r\n"
    );
    drop(t);
    wait_until(DEADLINE, "tracking_clients back to 0", || {
        other.info_u64("clients", "tracking_clients") == 0
    });
}

/// Keys deleted by expiry are invalidated (lazy expiry on access, active expiry in the
/// background).
#[test]
fn expired_keys_are_invalidated() {
    let cairn = start_cairn(&[]);
    let mut w = Raw::connect(cairn.port);
    let mut t = Raw::connect(cairn.port);
    t.call(&["HELLO", "3"]);
    assert_eq!(t.call(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    assert_eq!(w.call(&["SET", "e", "v", "PX", "50"]), b"+OK\r\n");
    assert_eq!(t.call(&["GET", "e"]), b"$1\r\nv\r\n");
    // Active expiry deletes it without any command naming it.
    let mut got = Vec::new();
    wait_until(DEADLINE, "an invalidation for the expired key", || {
        t.cmd(&[b"PING"]);
        loop {
            let f = t.reply();
            if f == b"+PONG\r\n" {
                break;
            }
            got.push(f);
        }
        !got.is_empty()
    });
    assert_eq!(
        show(&got[0]),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n"
    );
}
