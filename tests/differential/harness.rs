//! The differential harness: a seeded PRNG, argument generators, a RESP reader that never
//! hangs, reply normalisation, and the loop that sends one stream to redis-server and
//! cairn-server and compares the replies byte for byte.
//!
//! Replay: `CAIRN_DIFF_SEED=<seed>` runs only that seed, `CAIRN_DIFF_STEPS=<n>` changes
//! the number of commands per seed. A mismatch prints the seed, the step, the command and
//! the commands before it.

use crate::common::{encode, start_cairn, start_redis, ServerProc, DEADLINE};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// SplitMix64: tiny, fast, and the same stream on every platform, so a seed replays.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// True with probability pct/100.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

/// Argument generators shared by the families. A small key space makes commands interact.
pub struct G {
    pub rng: Rng,
}

pub type Arg = Vec<u8>;

pub fn a(s: &str) -> Arg {
    s.as_bytes().to_vec()
}

/// Integers that are valid, at the i64 edges, just past them, or not integers at all
/// (Redis's string2ll is strict: no spaces, no '+', no leading zeros, no decimals).
const INT_EDGES: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "4294967296",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "99999999999999999999999",
];
const NOT_INTS: &[&str] = &[
    "", "abc", "1.5", " 1", "1 ", "+1", "0x10", "-0", "01", "1e3", "--1", "-", "1\x00",
];

impl G {
    /// A key from a small space so commands hit the same keys; rarely an odd one.
    pub fn key(&mut self) -> Arg {
        if self.rng.chance(3) {
            return self
                .rng
                .pick(&[&b""[..], b"\x00\r\n", b"k 0", b"\xff"])
                .to_vec();
        }
        format!("k{}", self.rng.below(6)).into_bytes()
    }

    pub fn keys(&mut self, min: u64, max: u64) -> Vec<Arg> {
        let n = min + self.rng.below(max - min + 1);
        (0..n).map(|_| self.key()).collect()
    }

    /// A value: integers (so INCR and friends work), edge integers, text, binary.
    pub fn val(&mut self) -> Arg {
        match self.rng.below(10) {
            0..=2 => self.rng.range(-20, 20).to_string().into_bytes(),
            3 => a(self.rng.pick(INT_EDGES)),
            4 => a(self.rng.pick(NOT_INTS)),
            5 => {
                let n = self.rng.below(300) as usize;
                (0..n).map(|_| b'a' + self.rng.below(26) as u8).collect()
            }
            6 => {
                let n = self.rng.below(16) as usize;
                (0..n).map(|_| self.rng.below(256) as u8).collect()
            }
            _ => {
                let n = 1 + self.rng.below(8) as usize;
                (0..n).map(|_| b'a' + self.rng.below(4) as u8).collect()
            }
        }
    }

    /// An integer argument: mostly small and valid, sometimes an edge or not a number.
    pub fn int(&mut self) -> Arg {
        match self.rng.below(10) {
            0..=6 => self.rng.range(-12, 12).to_string().into_bytes(),
            7 | 8 => a(self.rng.pick(INT_EDGES)),
            _ => a(self.rng.pick(NOT_INTS)),
        }
    }

    /// A relative expire in seconds (or ms when `ms`). Valid ones are long (>= 1000 s) so no
    /// key expires during a run: observing an expiry would race between the two servers.
    pub fn rel_ttl(&mut self, ms: bool) -> Arg {
        match self.rng.below(10) {
            0..=5 => {
                let s = self.rng.range(1000, 100_000);
                (if ms { s * 1000 } else { s }).to_string().into_bytes()
            }
            6 => a(self.rng.pick(&["0", "-1", "-100"])),
            7 => a(self.rng.pick(INT_EDGES)),
            8 => a(self.rng.pick(&[
                "9223372036854775",
                "9223372036854776",
                "9223372036854775806",
            ])),
            _ => a(self.rng.pick(NOT_INTS)),
        }
    }

    /// An absolute unix time: long past (deterministically expired), far future, or bad.
    pub fn abs_ttl(&mut self, ms: bool) -> Arg {
        match self.rng.below(6) {
            0 | 1 => a(self.rng.pick(&["1", "2", "1000"])),
            2 | 3 => {
                let s = 4_000_000_000i64 + self.rng.range(0, 1000);
                (if ms { s * 1000 } else { s }).to_string().into_bytes()
            }
            4 => a(self.rng.pick(&["0", "-5"])),
            _ => self.int(),
        }
    }

    /// One expire option: EX/PX/EXAT/PXAT with an argument (sometimes missing).
    pub fn expire_opt(&mut self) -> Vec<Arg> {
        let unit = self.rng.pick(&["EX", "PX", "EXAT", "PXAT", "ex", "pXaT"]);
        let upper = unit.to_ascii_uppercase();
        let v = match upper.as_str() {
            "EX" => self.rel_ttl(false),
            "PX" => self.rel_ttl(true),
            "EXAT" => self.abs_ttl(false),
            _ => self.abs_ttl(true),
        };
        if self.rng.chance(5) {
            vec![a(unit)]
        } else {
            vec![a(unit), v]
        }
    }

    /// Random letter case, to check names and options are case-insensitive.
    pub fn word(&mut self, w: &str) -> Arg {
        if self.rng.chance(15) {
            w.bytes()
                .map(|c| {
                    if self.rng.chance(50) {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect()
        } else {
            a(w)
        }
    }
}

/// How a reply is compared. Each rule besides `Exact` is a documented difference.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cmp {
    /// Byte for byte.
    Exact,
    /// Client ids depend on how many connections each server has seen: every integer reply
    /// (CLIENT ID) and the value after "id" (HELLO's map) is replaced by 0.
    ClientId,
    /// CLIENT LIST/INFO lines: fields whose values depend on addresses, timing, ids or
    /// memory accounting (id addr laddr fd age idle qbuf qbuf-free argv-mem multi-mem rbs
    /// rbp obl oll omem tot-mem events) are blanked; field names, their order, and the other values
    /// (name db sub psub multi flags cmd user redir resp) must match.
    ClientFields,
    /// TTL-like integers (TTL, PTTL, EXPIRETIME, OBJECT IDLETIME): the two servers run a
    /// command a few ms apart, so non-negative integers may differ by the given tolerance;
    /// negative ones (-1 no expire, -2 no key) must be equal.
    Ttl(i64),
    /// Unordered arrays (KEYS): elements compared as sorted lists.
    Set,
    /// Unordered pairs (CONFIG GET): a flat array or map of name/value pairs, compared as
    /// a sorted list of pairs.
    PairSet,
    /// RANDOMKEY: only whether a key came back (both servers hold the same keys).
    NilOrNot,
    /// Random picks (ZRANDMEMBER): only the reply's shape — types and array lengths — must
    /// match; strings and doubles are blanked, errors compared exactly.
    Shape,
    /// SPOP / SRANDMEMBER: random members, so only the shape is compared: nil or a bulk,
    /// an array's type and length; errors and integers exactly.
    Count,
    /// SSCAN that covers the whole set in one call: the cursor exactly, the members as
    /// a sorted list (hashtable order is unspecified).
    ScanSet,
}

/// What a step expects back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Expect {
    /// One reply per command.
    OneEach,
    /// The commands may suppress replies (CLIENT REPLY OFF/SKIP): an `ECHO <marker>` is sent
    /// after them and everything up to the marker's reply is compared.
    UntilMarker,
    /// The last command closes the connection (QUIT): its reply is compared, then both
    /// connections must be closed, and new ones are opened.
    Closes,
    /// `cmds[0]` is `SCAN <cursor> [options]`: each server is scanned to the end (the
    /// cursor is replaced by the one returned), and the sets of keys are compared; cursors
    /// are not (they depend on each server's table). Errors are compared exactly.
    ScanAll,
    /// `cmds[0]` is `DUMP <key>`, `cmds[1]` a RESTORE whose argument 3 (the payload) is
    /// filled in: if both servers dump a value, each restores the OTHER server's payload
    /// (cairn must read Redis's encodings, e.g. LZF; Redis must accept cairn's, which are
    /// legitimately uncompressed, so DUMP bytes are not compared) and the RESTORE replies
    /// are compared. Otherwise the DUMP replies are compared exactly.
    DumpRestore,
    /// The last command closes the connection without a reply (Redis's HTTP guard), and
    /// the replies of the commands sent with it are dropped: nothing may come back.
    ClosesSilently,
}

pub struct Step {
    pub cmds: Vec<Vec<Arg>>,
    pub expect: Expect,
}

/// One command in a family's table: adding a command is one line.
pub struct Spec {
    pub name: &'static str,
    /// Relative frequency in the stream.
    pub weight: u32,
    /// Whether the harness may add or drop an argument to produce arity errors.
    pub mutate: bool,
    pub cmp: Cmp,
    pub gen: fn(&mut G) -> Step,
}

impl Spec {
    pub const fn new(name: &'static str, weight: u32, gen: fn(&mut G) -> Step) -> Spec {
        Spec {
            name,
            weight,
            mutate: true,
            cmp: Cmp::Exact,
            gen,
        }
    }
    /// For commands whose arity mutations could change server state in ways the stream
    /// cannot follow (SHUTDOWN, QUIT, CLIENT REPLY).
    pub const fn no_mutate(mut self) -> Spec {
        self.mutate = false;
        self
    }
    pub const fn cmp(mut self, c: Cmp) -> Spec {
        self.cmp = c;
        self
    }
}

/// A single command step.
pub fn one(args: Vec<Arg>) -> Step {
    Step {
        cmds: vec![args],
        expect: Expect::OneEach,
    }
}

// ---------------------------------------------------------------------------------------
// RESP values: framing (never hangs: incomplete input is reported, not waited on forever)
// and normalisation.

#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// `+ - : , # ( _` lines and `$ = !` bulks, kept as (type byte, payload).
    Line(u8, Vec<u8>),
    Bulk(u8, Option<Vec<u8>>),
    /// `* ~ > % |` aggregates (maps and attributes hold 2n items), None for `*-1`.
    Agg(u8, Option<Vec<Val>>),
}

/// Parses one value from `b`; Ok(None) if incomplete; Err if not RESP.
pub fn parse(b: &[u8]) -> Result<Option<(Val, usize)>, String> {
    parse_at(b, 0)
}

fn parse_at(b: &[u8], at: usize) -> Result<Option<(Val, usize)>, String> {
    if at >= b.len() {
        return Ok(None);
    }
    let Some(e) = b[at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| at + p)
    else {
        return Ok(None);
    };
    let t = b[at];
    let head = &b[at + 1..e];
    let num = || -> Result<i64, String> {
        std::str::from_utf8(head)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad length {:?}", String::from_utf8_lossy(head)))
    };
    match t {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => {
            Ok(Some((Val::Line(t, head.to_vec()), e + 2)))
        }
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                return Ok(Some((Val::Bulk(t, None), e + 2)));
            }
            let end = e + 2 + n as usize;
            if end + 2 > b.len() {
                return Ok(None);
            }
            if &b[end..end + 2] != b"\r\n" {
                return Err("bulk not followed by CRLF".into());
            }
            Ok(Some((Val::Bulk(t, Some(b[e + 2..end].to_vec())), end + 2)))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            let mut pos = e + 2;
            if n < 0 {
                return Ok(Some((Val::Agg(t, None), pos)));
            }
            let items = if matches!(t, b'%' | b'|') { 2 * n } else { n };
            let mut v = Vec::new();
            for _ in 0..items {
                match parse_at(b, pos)? {
                    Some((x, p)) => {
                        v.push(x);
                        pos = p;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Val::Agg(t, Some(v)), pos)))
        }
        _ => Err(format!(
            "not RESP: {:?}",
            String::from_utf8_lossy(&b[at..b.len().min(at + 80)])
        )),
    }
}

const VOLATILE_CLIENT_FIELDS: &[&str] = &[
    "id",
    "addr",
    "laddr",
    "fd",
    "age",
    "idle",
    "qbuf",
    "qbuf-free",
    "argv-mem",
    "multi-mem",
    "obl",
    "oll",
    "omem",
    "tot-mem",
    "events",
    "rbs",
    "rbp",
];

fn normalise_client_text(t: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(t);
    let mut out = String::new();
    for line in text.split('\n') {
        let fields: Vec<String> = line
            .split(' ')
            .map(|f| match f.split_once('=') {
                Some((k, _)) if VOLATILE_CLIENT_FIELDS.contains(&k) => format!("{k}=*"),
                _ => f.to_string(),
            })
            .collect();
        out.push_str(&fields.join(" "));
        out.push('\n');
    }
    out.into_bytes()
}

/// Whether two replies match under `cmp` (after `normalise`).
pub fn equivalent(cmp: Cmp, r: &Val, c: &Val) -> bool {
    match (cmp, r, c) {
        (Cmp::Ttl(tol), Val::Line(b':', x), Val::Line(b':', y)) => {
            let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<i64>().ok();
            match (num(x), num(y)) {
                (Some(x), Some(y)) if x >= 0 && y >= 0 => (x - y).abs() <= tol,
                _ => x == y,
            }
        }
        (Cmp::Ttl(_), Val::Agg(t, Some(xs)), Val::Agg(u, Some(ys))) => {
            t == u && xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| equivalent(cmp, x, y))
        }
        _ => r == c,
    }
}

pub fn normalise(v: Val, cmp: Cmp) -> Val {
    match (cmp, v) {
        (Cmp::Set, Val::Agg(t, Some(mut items))) => {
            items.sort_by_key(|x| format!("{x:?}"));
            Val::Agg(t, Some(items))
        }
        (Cmp::PairSet, Val::Agg(t, Some(items))) => {
            let mut pairs: Vec<Vec<Val>> = items.chunks(2).map(|p| p.to_vec()).collect();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Val::Agg(t, Some(pairs.concat()))
        }
        (Cmp::NilOrNot, Val::Bulk(t, Some(_))) => Val::Bulk(t, Some(b"<a key>".to_vec())),
        (Cmp::Shape, Val::Bulk(t, Some(_))) => Val::Bulk(t, Some(b"<str>".to_vec())),
        (Cmp::Shape, Val::Line(b',', _)) => Val::Line(b',', b"<double>".to_vec()),
        (Cmp::Shape, Val::Agg(t, Some(items))) => Val::Agg(
            t,
            Some(
                items
                    .into_iter()
                    .map(|x| normalise(x, Cmp::Shape))
                    .collect(),
            ),
        ),
        (Cmp::Count, Val::Bulk(t, Some(_))) => Val::Bulk(t, Some(b"<a member>".to_vec())),
        (Cmp::Count, Val::Agg(t, Some(items))) => {
            let n = items.len();
            Val::Agg(t, Some(vec![Val::Bulk(b'$', None); n]))
        }
        (Cmp::ScanSet, Val::Agg(t, Some(mut items))) if items.len() == 2 => {
            items[1] = normalise(items[1].clone(), Cmp::Set);
            Val::Agg(t, Some(items))
        }
        (Cmp::Exact, v) => v,
        (Cmp::ClientId, Val::Line(b':', _)) => Val::Line(b':', b"0".to_vec()),
        (Cmp::ClientId, Val::Agg(t, Some(items))) => {
            let mut out = Vec::with_capacity(items.len());
            let mut after_id = false;
            for x in items {
                if after_id {
                    out.push(Val::Line(b':', b"0".to_vec()));
                    after_id = false;
                    continue;
                }
                after_id = matches!(&x, Val::Bulk(_, Some(s)) if s == b"id");
                out.push(x);
            }
            Val::Agg(t, Some(out))
        }
        (Cmp::ClientFields, Val::Bulk(t, Some(s))) => {
            // RESP3 verbatim strings start with "txt:"; keep it as is.
            if t == b'=' && s.len() >= 4 {
                let mut v = s[..4].to_vec();
                v.extend(normalise_client_text(&s[4..]));
                Val::Bulk(t, Some(v))
            } else {
                Val::Bulk(t, Some(normalise_client_text(&s)))
            }
        }
        (_, v) => v,
    }
}

// ---------------------------------------------------------------------------------------
// Connections.

pub struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Conn { s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s.write_all(bytes).map_err(|e| format!("write: {e}"))
    }

    /// Reads one reply: its raw bytes and parsed value, or an error (timeout after
    /// `DEADLINE`, connection closed, not RESP).
    pub fn reply(&mut self) -> Result<(Vec<u8>, Val), String> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some((v, n)) = parse(&self.buf)? {
                let raw: Vec<u8> = self.buf.drain(..n).collect();
                return Ok((raw, v));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no complete reply within {DEADLINE:?}; have {} bytes: \"{}\"",
                    self.buf.len(),
                    self.buf[..self.buf.len().min(200)].escape_ascii()
                ));
            }
            let mut tmp = [0u8; 65536];
            match self.s.read(&mut tmp) {
                Ok(0) => {
                    return Err(format!(
                        "connection closed; have \"{}\"",
                        self.buf[..self.buf.len().min(200)].escape_ascii()
                    ))
                }
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// True if the peer closes the connection within `DEADLINE` with nothing more to read
    /// (only asked where a close is expected: waiting long costs time only on failure).
    pub fn closes(&mut self) -> bool {
        let deadline = Instant::now() + DEADLINE;
        let mut tmp = [0u8; 4096];
        while Instant::now() < deadline {
            match self.s.read(&mut tmp) {
                Ok(0) => return self.buf.is_empty(),
                Ok(_) => return false,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => {}
            }
        }
        false
    }
}

fn show(args: &[Arg]) -> String {
    args.iter()
        .map(|x| format!("\"{}\"", x.escape_ascii()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn show_reply(r: &[u8]) -> String {
    if r.len() > 600 {
        format!("\"{}\"... ({} bytes)", r[..600].escape_ascii(), r.len())
    } else {
        format!("\"{}\"", r.escape_ascii())
    }
}

/// Both servers, started with the same extra arguments.
pub struct Pair {
    pub redis: ServerProc,
    pub cairn: ServerProc,
}

impl Pair {
    pub fn start(args: &[&str]) -> Pair {
        Pair {
            redis: start_redis(args),
            cairn: start_cairn(args),
        }
    }
}

/// Keys whose state differs between the servers (databases 0-2, the generators' key space),
/// read over fresh connections: helps tell a wrong reply from an earlier wrong write.
fn state_diff(pair: &Pair, password: Option<&str>) -> String {
    let mut keys: Vec<Vec<u8>> = (0..6).map(|i| format!("k{i}").into_bytes()).collect();
    keys.extend([
        b"".to_vec(),
        b"\x00\r\n".to_vec(),
        b"k 0".to_vec(),
        b"\xff".to_vec(),
    ]);
    let probe = |port: u16| -> Result<Vec<Vec<u8>>, String> {
        // A server that crashed is reported, not a second panic hiding the first.
        std::net::TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("port {port} unreachable: {e}"))?;
        let mut c = Conn::connect(port);
        if let Some(p) = password {
            c.send(&encode(&[b"AUTH", p.as_bytes()]))?;
            c.reply()?;
        }
        let mut out = Vec::new();
        for db in 0..3 {
            c.send(&encode(&[b"SELECT", db.to_string().as_bytes()]))?;
            c.reply()?;
            for k in &keys {
                // The value and its encoding.
                let mut r = Vec::new();
                for probe in [&[&b"GET"[..]][..], &[b"OBJECT", b"ENCODING"]] {
                    let mut cmd: Vec<&[u8]> = probe.to_vec();
                    cmd.push(k);
                    c.send(&encode(&cmd))?;
                    r.extend(c.reply()?.0);
                }
                out.push(r);
            }
        }
        Ok(out)
    };
    let (r, c) = match (probe(pair.redis.port), probe(pair.cairn.port)) {
        (Ok(r), Ok(c)) => (r, c),
        (r, c) => return format!("(probe failed: {:?} {:?})", r.err(), c.err()),
    };
    let mut diffs = Vec::new();
    for (i, (rv, cv)) in r.iter().zip(&c).enumerate() {
        if rv != cv {
            diffs.push(format!(
                "db {} key \"{}\": redis {} cairn {}",
                i / keys.len(),
                keys[i % keys.len()].escape_ascii(),
                show_reply(rv),
                show_reply(cv)
            ));
        }
    }
    if diffs.is_empty() {
        "none".into()
    } else {
        diffs.join("; ")
    }
}

type StepError = (String, Vec<u8>, Vec<u8>);

fn roundtrip(conn: &mut Conn, cmd: &[Arg]) -> Result<(Vec<u8>, Val), String> {
    let refs: Vec<&[u8]> = cmd.iter().map(|x| x.as_slice()).collect();
    conn.send(&encode(&refs))?;
    conn.reply()
}

/// All keys a full SCAN returns (sorted, without repeats), or the error reply's bytes.
fn scan_keys(conn: &mut Conn, cmd: &[Arg]) -> Result<Result<Vec<Vec<u8>>, Vec<u8>>, String> {
    let mut cmd = cmd.to_vec();
    let mut keys = Vec::new();
    for _ in 0..100_000 {
        let (raw, v) = roundtrip(conn, &cmd)?;
        let Val::Agg(_, Some(items)) = v else {
            return Ok(Err(raw));
        };
        match &items[..] {
            [Val::Bulk(_, Some(cursor)), Val::Agg(_, Some(ks))] => {
                for k in ks {
                    match k {
                        Val::Bulk(_, Some(k)) => keys.push(k.clone()),
                        _ => return Err(format!("bad SCAN reply {}", show_reply(&raw))),
                    }
                }
                if cursor == b"0" {
                    keys.sort();
                    keys.dedup();
                    return Ok(Ok(keys));
                }
                cmd[1] = cursor.clone();
            }
            _ => return Err(format!("bad SCAN reply {}", show_reply(&raw))),
        }
    }
    Err("SCAN not finished after 100000 calls".into())
}

fn scan_all(r: &mut Conn, c: &mut Conn, cmd: &[Arg]) -> Result<usize, StepError> {
    let e = |what: String| (what, Vec::new(), Vec::new());
    let rk = scan_keys(r, cmd).map_err(|m| e(format!("redis: {m}")))?;
    let ck = scan_keys(c, cmd).map_err(|m| e(format!("cairn: {m}")))?;
    match (rk, ck) {
        (Ok(x), Ok(y)) if x == y => Ok(1),
        (Err(x), Err(y)) if x == y => Ok(1),
        (x, y) => {
            let show = |v: Result<Vec<Vec<u8>>, Vec<u8>>| match v {
                Ok(keys) => keys
                    .iter()
                    .map(|k| format!("\"{}\"", k.escape_ascii()))
                    .collect::<Vec<_>>()
                    .join(" ")
                    .into_bytes(),
                Err(raw) => raw,
            };
            Err(("full SCAN differs".into(), show(x), show(y)))
        }
    }
}

fn dump_restore(
    r: &mut Conn,
    c: &mut Conn,
    dump: &[Arg],
    restore: &[Arg],
) -> Result<usize, StepError> {
    let e = |what: String| (what, Vec::new(), Vec::new());
    let (rraw, rv) = roundtrip(r, dump).map_err(|m| e(format!("redis: {m}")))?;
    let (craw, cv) = roundtrip(c, dump).map_err(|m| e(format!("cairn: {m}")))?;
    let (Val::Bulk(b'$', Some(rp)), Val::Bulk(b'$', Some(cp))) = (&rv, &cv) else {
        if rraw != craw {
            return Err(("DUMP replies differ".into(), rraw, craw));
        }
        return Ok(1);
    };
    let (mut to_redis, mut to_cairn) = (restore.to_vec(), restore.to_vec());
    to_redis[3] = cp.clone();
    to_cairn[3] = rp.clone();
    let (rraw, _) = roundtrip(r, &to_redis).map_err(|m| e(format!("redis: {m}")))?;
    let (craw, _) = roundtrip(c, &to_cairn).map_err(|m| e(format!("cairn: {m}")))?;
    if rraw != craw {
        return Err((
            "RESTORE of the other server's DUMP payload: replies differ".into(),
            rraw,
            craw,
        ));
    }
    Ok(2)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `steps` generated steps per seed against both servers and panics on the first
/// difference. Each seed starts from empty databases (FLUSHALL over a separate connection,
/// authenticated with `password` if given) and fresh, unauthenticated connections.
pub fn run_family(
    family: &str,
    table: &[Spec],
    seeds: &[u64],
    steps: usize,
    server_args: &[&str],
    password: Option<&str>,
) {
    run_family_with(
        family,
        table,
        seeds,
        steps,
        server_args,
        password,
        &[],
        true,
    )
}

/// `run_family` leaving out the specs named in `exclude`, and with or without the
/// harness's arity mutations.
#[allow(clippy::too_many_arguments)]
pub fn run_family_with(
    family: &str,
    table: &[Spec],
    seeds: &[u64],
    steps: usize,
    server_args: &[&str],
    password: Option<&str>,
    exclude: &[&str],
    mutate_arity: bool,
) {
    let table: Vec<&Spec> = table
        .iter()
        .filter(|s| !exclude.contains(&s.name))
        .collect();
    let pair = Pair::start(server_args);
    let seeds: Vec<u64> = match env_u64("CAIRN_DIFF_SEED") {
        Some(s) => vec![s],
        None => seeds.to_vec(),
    };
    let steps = env_u64("CAIRN_DIFF_STEPS").map_or(steps, |s| s as usize);
    let total_weight: u64 = table.iter().map(|s| s.weight as u64).sum();
    let start = Instant::now();
    let mut compared = 0usize;
    for &seed in &seeds {
        // The admin connections stay open for the whole seed: CLIENT LIST must see the same
        // set of connections on both servers, and a connection closed by the test is
        // removed by the server asynchronously. So each seed waits until its admin
        // connection is the only one, then opens the stream connection; CLIENT LIST then
        // shows exactly these two everywhere.
        let mut admins = Vec::new();
        for port in [pair.redis.port, pair.cairn.port] {
            let mut admin = Conn::connect(port);
            if let Some(p) = password {
                admin.send(&encode(&[b"AUTH", p.as_bytes()])).unwrap();
                assert_eq!(admin.reply().unwrap().0, b"+OK\r\n");
            }
            admin.send(&encode(&[b"FLUSHALL"])).unwrap();
            assert_eq!(admin.reply().unwrap().0, b"+OK\r\n");
            let deadline = Instant::now() + DEADLINE;
            loop {
                admin.send(&encode(&[b"CLIENT", b"LIST"])).unwrap();
                let (_, v) = admin.reply().unwrap();
                let lines = match v {
                    Val::Bulk(_, Some(t)) => t.iter().filter(|&&b| b == b'\n').count(),
                    other => panic!("CLIENT LIST: {other:?}"),
                };
                if lines == 1 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "[{family}] port {port}: old connections not closed after {DEADLINE:?}"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            admins.push(admin);
        }
        let connect = Conn::connect;
        let mut r = connect(pair.redis.port);
        let mut c = connect(pair.cairn.port);
        let mut g = G {
            rng: Rng::new(seed),
        };
        let mut history: Vec<String> = Vec::new();
        for step_no in 0..steps {
            let mut pickv = g.rng.below(total_weight);
            let spec = table
                .iter()
                .find(|s| {
                    if pickv < s.weight as u64 {
                        true
                    } else {
                        pickv -= s.weight as u64;
                        false
                    }
                })
                .unwrap();
            let mut step = (spec.gen)(&mut g);
            if mutate_arity && spec.mutate && step.cmds.len() == 1 && g.rng.chance(4) {
                // Wrong arity: drop the last argument or add a junk one.
                let cmd = &mut step.cmds[0];
                if cmd.len() > 1 && g.rng.chance(50) {
                    cmd.pop();
                } else {
                    cmd.push(a("extra"));
                }
            }
            let mut marker = None;
            let mut wire = Vec::new();
            for cmd in &step.cmds {
                let refs: Vec<&[u8]> = cmd.iter().map(|x| x.as_slice()).collect();
                wire.extend(encode(&refs));
                history.push(show(cmd));
            }
            if step.expect == Expect::UntilMarker {
                let m = format!("marker-{seed}-{step_no}");
                wire.extend(encode(&[b"ECHO", m.as_bytes()]));
                marker = Some(m);
            }
            if history.len() > 16 {
                history.drain(..history.len() - 16);
            }
            let fail = |what: &str, rr: &[u8], cr: &[u8]| -> ! {
                panic!(
                    "\n[{family}] MISMATCH (seed {seed}, step {step_no}, command '{}'): {what}\n  \
                     redis: {}\n  cairn: {}\n  last commands:\n    {}\n  \
                     key space differences: {}\n  \
                     replay: CAIRN_DIFF_SEED={seed} cargo test --test differential {family}\n",
                    spec.name,
                    show_reply(rr),
                    show_reply(cr),
                    history.join("\n    "),
                    state_diff(&pair, password),
                )
            };
            match step.expect {
                Expect::ScanAll => {
                    match scan_all(&mut r, &mut c, &step.cmds[0]) {
                        Ok(n) => compared += n,
                        Err((what, rr, cr)) => fail(&what, &rr, &cr),
                    }
                    continue;
                }
                Expect::DumpRestore => {
                    match dump_restore(&mut r, &mut c, &step.cmds[0], &step.cmds[1]) {
                        Ok(n) => compared += n,
                        Err((what, rr, cr)) => fail(&what, &rr, &cr),
                    }
                    continue;
                }
                _ => {}
            }
            r.send(&wire)
                .unwrap_or_else(|e| fail(&format!("redis {e}"), b"", b""));
            c.send(&wire)
                .unwrap_or_else(|e| fail(&format!("cairn {e}"), b"", b""));
            let n_replies = match step.expect {
                Expect::OneEach | Expect::Closes => step.cmds.len(),
                Expect::UntilMarker => usize::MAX,
                Expect::ClosesSilently | Expect::ScanAll | Expect::DumpRestore => 0,
            };
            let mut got = 0;
            let (mut rall, mut call) = (Vec::new(), Vec::new());
            while got < n_replies {
                let (rraw, rv) = r
                    .reply()
                    .unwrap_or_else(|e| fail(&format!("redis: {e}"), &rall, &call));
                let (craw, cv) = c
                    .reply()
                    .unwrap_or_else(|e| fail(&format!("cairn: {e}"), &rraw, &call));
                rall.extend_from_slice(&rraw);
                call.extend_from_slice(&craw);
                let (rn, cn) = (normalise(rv.clone(), spec.cmp), normalise(cv, spec.cmp));
                if !equivalent(spec.cmp, &rn, &cn) {
                    fail("replies differ", &rall, &call);
                }
                if spec.cmp == Cmp::Exact && rraw != craw {
                    fail("reply bytes differ", &rall, &call);
                }
                compared += 1;
                got += 1;
                if let Some(m) = &marker {
                    if rv == Val::Bulk(b'$', Some(m.as_bytes().to_vec())) {
                        break;
                    }
                }
            }
            if matches!(step.expect, Expect::Closes | Expect::ClosesSilently) {
                let (rc, cc) = (r.closes(), c.closes());
                if rc != cc {
                    fail(
                        &format!("redis closed: {rc}, cairn closed: {cc}"),
                        &rall,
                        &call,
                    );
                }
                r = connect(pair.redis.port);
                c = connect(pair.cairn.port);
            }
        }
    }
    eprintln!(
        "[{family}] {} seeds x {steps} steps: {compared} replies identical in {:?}",
        seeds.len(),
        start.elapsed()
    );
}
