//! Event-driven closed loop: each connection is driven on its own, as memtier does.
//!
//! `engine.rs` reads its connections in lock step, so a connection whose reply is held (a
//! SET waiting for an fsync) delays the replies read after it and their latencies. Here each
//! worker thread owns some nonblocking connections and an epoll set; each connection has one
//! request outstanding and sends its next one the moment its reply is complete, so a
//! request's latency runs from its own send to its own reply's last byte and never includes
//! a neighbour's wait.
//!
//! Every GET's value is checked against `ValueGen` (keys are preloaded, so a nil is counted
//! as an error, or as a miss where the server may evict: `nil_is_miss`); every SET must
//! answer `+OK`. Errors are counted per command with the first text kept.

use crate::keys::{key_name, KeyDist, KeyGen, Rng};
use crate::stats::{self, Hist, Summary};
use crate::values::ValueGen;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest reply line accepted (a bound on what a broken peer can make us buffer).
const MAX_LINE_BYTES: usize = 64 * 1024;
/// Largest bulk reply accepted.
const MAX_BULK_BYTES: usize = 512 * 1024 * 1024;
/// How often each worker looks for a request older than the timeout.
const STALL_CHECK_NS: u64 = 100_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
}

impl Op {
    pub fn label(self) -> &'static str {
        match self {
            Op::Set => "SET",
            Op::Get => "GET",
        }
    }
    fn index(self) -> usize {
        match self {
            Op::Set => 0,
            Op::Get => 1,
        }
    }
}

/// One reply, located in the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    Simple(String),
    Error(String),
    Int(i64),
    /// Bulk payload at `buf[start..start + len]`.
    Bulk {
        start: usize,
        len: usize,
    },
    Nil,
}

/// Parses one reply at the start of `buf`: `Ok(None)` while it is incomplete, else the reply
/// and the bytes it took. Arrays are refused (this client never sends a command that
/// answers one).
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Parsed, usize)>, String> {
    let Some(nl) = buf.iter().take(MAX_LINE_BYTES).position(|&b| b == b'\n') else {
        if buf.len() >= MAX_LINE_BYTES {
            return Err("reply line longer than 64 KiB".into());
        }
        return Ok(None);
    };
    if nl == 0 || buf[nl - 1] != b'\r' {
        return Err("reply line without CRLF".into());
    }
    let line = &buf[1..nl - 1];
    let text = || String::from_utf8_lossy(line).into_owned();
    let head = nl + 1;
    match buf[0] {
        b'+' => Ok(Some((Parsed::Simple(text()), head))),
        b'-' => Ok(Some((Parsed::Error(text()), head))),
        b':' => {
            let n = text()
                .parse()
                .map_err(|_| format!("bad integer reply {:?}", text()))?;
            Ok(Some((Parsed::Int(n), head)))
        }
        b'$' => {
            let n: i64 = text()
                .parse()
                .map_err(|_| format!("bad bulk length {:?}", text()))?;
            if n == -1 {
                return Ok(Some((Parsed::Nil, head)));
            }
            if n < 0 || n as u64 > MAX_BULK_BYTES as u64 {
                return Err(format!("bulk length out of range: {n}"));
            }
            let len = n as usize;
            let end = head + len + 2;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err("bulk reply without CRLF".into());
            }
            Ok(Some((Parsed::Bulk { start: head, len }, end)))
        }
        other => Err(format!("unexpected reply type byte 0x{other:02x}")),
    }
}

/// Appends `SET key value` or `GET key` in RESP.
pub fn encode_request(op: Op, key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let bulk = |b: &[u8], out: &mut Vec<u8>| {
        out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
        out.extend_from_slice(b);
        out.extend_from_slice(b"\r\n");
    };
    match op {
        Op::Set => {
            out.extend_from_slice(b"*3\r\n");
            bulk(b"SET", out);
            bulk(key, out);
            bulk(value, out);
        }
        Op::Get => {
            out.extend_from_slice(b"*2\r\n");
            bulk(b"GET", out);
            bulk(key, out);
        }
    }
}

/// What a reply means for the request it answers: `Ok(())` or the error text to count.
pub fn judge(
    op: Op,
    reply: &Parsed,
    buf: &[u8],
    key: &[u8],
    value_len: usize,
    values: &ValueGen,
) -> Result<(), String> {
    match (op, reply) {
        (_, Parsed::Error(e)) => Err(e.clone()),
        (Op::Set, Parsed::Simple(s)) if s == "OK" => Ok(()),
        (Op::Get, Parsed::Nil) => Err(format!(
            "GET {} missed (keys are preloaded: every GET must hit)",
            String::from_utf8_lossy(key)
        )),
        (Op::Get, Parsed::Bulk { start, len }) => {
            if *len != value_len {
                return Err(format!(
                    "GET {} returned {len} bytes, expected {value_len}",
                    String::from_utf8_lossy(key)
                ));
            }
            if !values.verify(key, &buf[*start..*start + *len]) {
                return Err(format!(
                    "GET {} returned bytes other than the key's value",
                    String::from_utf8_lossy(key)
                ));
            }
            Ok(())
        }
        (op, r) => Err(format!("unexpected reply to {}: {r:?}", op.label())),
    }
}

/// The load: SET:GET by weight over `keys` preloaded keys.
#[derive(Clone, Debug)]
pub struct EvSpec {
    pub addr: SocketAddr,
    pub password: Option<String>,
    pub timeout: Duration,
    pub connections: usize,
    pub threads: usize,
    pub keys: u64,
    /// How keys are chosen in `0..keys` (each worker draws on its own).
    pub dist: KeyDist,
    /// A GET answered nil is counted as a miss (a cache that evicts), not an error.
    pub nil_is_miss: bool,
    /// With `nil_is_miss`: the connection's next request SETs the missed key's value, as
    /// a cache-aside client fills its cache after a miss.
    pub set_after_miss: bool,
    pub key_prefix: String,
    pub value_len: usize,
    pub set_weight: u32,
    pub get_weight: u32,
    /// Load for this long, or until `requests` completed (one of the two).
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    /// Duration mode: load this long first without recording (connections ramp up, the
    /// first burst of requests drains), then `duration` recorded.
    pub warmup: Duration,
    pub seed: u64,
    pub values: ValueGen,
    /// Hard bound on the run whatever happens.
    pub max_time: Duration,
}

#[derive(Clone, Debug, Default)]
pub struct EvResult {
    pub elapsed_s: f64,
    /// "GET", "SET": count, errors, rate, percentiles (µs).
    pub ops: BTreeMap<String, Summary>,
    pub all: Summary,
    /// GETs answered nil (counted here only with `nil_is_miss`; else they are errors).
    pub misses: u64,
    pub first_errors: BTreeMap<String, String>,
    pub problems: Vec<String>,
}

struct Conn {
    sock: TcpStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    /// The outstanding request (None when idle).
    op: Option<Op>,
    key: Vec<u8>,
    sent_ns: u64,
    want_write: bool,
    /// The next request SETs `key` (a miss to fill, `set_after_miss`).
    refill: bool,
}

struct WorkerOut {
    hists: [Hist; 2],
    errors: [u64; 2],
    misses: u64,
    first_errors: BTreeMap<String, String>,
    problems: Vec<String>,
    last_done_ns: u64,
}

/// Blocking connect (and AUTH), then nonblocking for the loop.
fn open(spec: &EvSpec) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect_timeout(&spec.addr, spec.timeout)
        .map_err(|e| format!("cannot connect to {}: {e}", spec.addr))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    if let Some(pw) = &spec.password {
        s.set_read_timeout(Some(spec.timeout))
            .map_err(|e| e.to_string())?;
        let mut req = Vec::new();
        crate::resp::encode(&mut req, &[b"AUTH", pw.as_bytes()]);
        s.write_all(&req).map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            let n = s.read(&mut chunk).map_err(|e| format!("AUTH: {e}"))?;
            if n == 0 {
                return Err("server closed the connection during AUTH".into());
            }
            buf.extend_from_slice(&chunk[..n]);
            match parse_reply(&buf)? {
                None => continue,
                Some((Parsed::Simple(_), _)) => break,
                Some((r, _)) => return Err(format!("AUTH failed: {r:?}")),
            }
        }
    }
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Raises the soft open-files limit toward the hard one so `connections` sockets fit.
pub fn raise_nofile(connections: usize) -> Result<(), String> {
    let want = connections as u64 + 64;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err("getrlimit(RLIMIT_NOFILE) failed".into());
    }
    if lim.rlim_cur >= want {
        return Ok(());
    }
    if lim.rlim_max < want {
        return Err(format!(
            "{connections} connections need {want} open files; the hard limit is {} (raise it: ulimit -n)",
            lim.rlim_max
        ));
    }
    lim.rlim_cur = want;
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err("setrlimit(RLIMIT_NOFILE) failed".into());
    }
    Ok(())
}

struct Epoll(i32);

impl Epoll {
    fn new() -> Result<Epoll, String> {
        // SAFETY: plain syscall; the fd is owned by the returned value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Epoll(fd))
    }
    fn ctl(&self, op: i32, fd: i32, idx: usize, write: bool) -> Result<(), String> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | if write { libc::EPOLLOUT } else { 0 }) as u32,
            u64: idx as u64,
        };
        // SAFETY: `ev` lives across the call; fd is an open socket we own.
        if unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) } != 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
    fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: the buffer is valid for `events.len()` entries.
        let n = unsafe {
            libc::epoll_wait(self.0, events.as_mut_ptr(), events.len() as i32, timeout_ms)
        };
        n.max(0) as usize
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

struct Worker {
    conns: Vec<Conn>,
    rng: Rng,
    keygen: KeyGen,
    /// Requests this worker may still start (u64::MAX in duration mode).
    budget: u64,
}

fn record_error(out: &mut WorkerOut, op: Op, msg: String) {
    out.errors[op.index()] += 1;
    out.first_errors.entry(op.label().into()).or_insert(msg);
}

impl Worker {
    /// Builds connection `ci`'s next request into its write buffer (the loop writes it).
    fn start(&mut self, ci: usize, spec: &EvSpec, now_ns: u64, value: &mut Vec<u8>) {
        let total = spec.set_weight + spec.get_weight;
        let refill = std::mem::take(&mut self.conns[ci].refill);
        let op = if refill || self.rng.below(total as u64) < spec.set_weight as u64 {
            Op::Set
        } else {
            Op::Get
        };
        if !refill {
            let k = self.keygen.next(&mut self.rng);
            key_name(&spec.key_prefix, k, &mut self.conns[ci].key);
        }
        let c = &mut self.conns[ci];
        value.clear();
        if op == Op::Set {
            spec.values.append(&c.key, spec.value_len, value);
        }
        c.wbuf.clear();
        c.wpos = 0;
        encode_request(op, &c.key, value, &mut c.wbuf);
        c.op = Some(op);
        c.sent_ns = now_ns;
        self.budget -= 1;
    }

    fn run(mut self, spec: &EvSpec, start: Instant, stop: &AtomicBool) -> WorkerOut {
        let mut out = WorkerOut {
            hists: [stats::total_hist(), stats::total_hist()],
            errors: [0, 0],
            misses: 0,
            first_errors: BTreeMap::new(),
            problems: Vec::new(),
            last_done_ns: 0,
        };
        let now_ns = || start.elapsed().as_nanos() as u64;
        let warmup_ns = spec.warmup.as_nanos() as u64;
        let deadline_ns = spec.duration.map(|d| warmup_ns + d.as_nanos() as u64);
        let max_ns = spec.max_time.as_nanos() as u64;
        let timeout_ns = spec.timeout.as_nanos() as u64;
        let ep = match Epoll::new() {
            Ok(e) => e,
            Err(e) => {
                out.problems.push(e);
                return out;
            }
        };
        for (i, c) in self.conns.iter().enumerate() {
            if let Err(e) = ep.ctl(libc::EPOLL_CTL_ADD, c.sock.as_raw_fd(), i, false) {
                out.problems.push(e);
                return out;
            }
        }
        let mut value = Vec::with_capacity(spec.value_len);
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut chunk = vec![0u8; 64 * 1024];
        // Kick every connection off.
        let mut dirty: Vec<usize> = Vec::new();
        for ci in 0..self.conns.len() {
            if self.budget == 0 {
                break;
            }
            self.start(ci, spec, now_ns(), &mut value);
            dirty.push(ci);
        }
        let mut stopping = false;
        let mut next_stall_check = STALL_CHECK_NS;
        'outer: loop {
            // Write what the starts and completions queued.
            for ci in dirty.drain(..) {
                let c = &mut self.conns[ci];
                while c.wpos < c.wbuf.len() {
                    match c.sock.write(&c.wbuf[c.wpos..]) {
                        Ok(0) => {
                            out.problems.push("server closed a connection".into());
                            break 'outer;
                        }
                        Ok(n) => c.wpos += n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => {
                            out.problems
                                .push(format!("write failed: {e} (server gone?)"));
                            break 'outer;
                        }
                    }
                }
                let want = c.wpos < c.wbuf.len();
                if want != c.want_write {
                    c.want_write = want;
                    if let Err(e) = ep.ctl(libc::EPOLL_CTL_MOD, c.sock.as_raw_fd(), ci, want) {
                        out.problems.push(e);
                        break 'outer;
                    }
                }
            }
            let now = now_ns();
            if !stopping && (stop.load(Ordering::Relaxed) || deadline_ns.is_some_and(|d| now >= d))
            {
                stopping = true;
            }
            if stopping || now >= max_ns {
                if now >= max_ns && deadline_ns.is_none_or(|d| d > max_ns) {
                    out.problems.push(format!(
                        "run stopped at its time bound ({:?})",
                        spec.max_time
                    ));
                }
                break;
            }
            if self.conns.iter().all(|c| c.op.is_none()) {
                break; // request count reached and every reply read
            }
            if now >= next_stall_check {
                next_stall_check = now + STALL_CHECK_NS;
                if let Some(c) = self
                    .conns
                    .iter()
                    .find(|c| c.op.is_some() && now.saturating_sub(c.sent_ns) > timeout_ns)
                {
                    out.problems.push(format!(
                        "no reply to a {} within the {:?} timeout at t={:.2}s: server stalled",
                        c.op.map_or("?", Op::label),
                        spec.timeout,
                        now as f64 / 1e9
                    ));
                    break;
                }
            }
            let n = ep.wait(&mut events, 10);
            for ev in events.iter().take(n) {
                let ci = ev.u64 as usize;
                let Some(c) = self.conns.get_mut(ci) else {
                    continue;
                };
                if ev.events & libc::EPOLLOUT as u32 != 0 && c.wpos < c.wbuf.len() {
                    dirty.push(ci);
                }
                if ev.events & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                    continue;
                }
                loop {
                    match c.sock.read(&mut chunk) {
                        Ok(0) => {
                            out.problems.push(format!(
                                "connection lost at t={:.2}s: server closed it",
                                now_ns() as f64 / 1e9
                            ));
                            break 'outer;
                        }
                        Ok(k) => c.rbuf.extend_from_slice(&chunk[..k]),
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => {
                            out.problems.push(format!(
                                "connection lost at t={:.2}s: {e}",
                                now_ns() as f64 / 1e9
                            ));
                            break 'outer;
                        }
                    }
                }
                let parsed = match parse_reply(&c.rbuf) {
                    Ok(p) => p,
                    Err(e) => {
                        out.problems.push(format!("protocol error: {e}"));
                        break 'outer;
                    }
                };
                let Some((reply, used)) = parsed else {
                    continue;
                };
                let done = now_ns();
                let Some(op) = c.op.take() else {
                    out.problems
                        .push("the server sent a reply nobody asked for".into());
                    break 'outer;
                };
                if used != c.rbuf.len() {
                    out.problems
                        .push("the server sent more than one reply to one request".into());
                    break 'outer;
                }
                // Errors count whenever they happen; latencies only once warmed up.
                let verdict = if spec.nil_is_miss && op == Op::Get && reply == Parsed::Nil {
                    if c.sent_ns >= warmup_ns {
                        out.misses += 1;
                    }
                    c.refill = spec.set_after_miss;
                    Ok(())
                } else {
                    judge(op, &reply, &c.rbuf, &c.key, spec.value_len, &spec.values)
                };
                match verdict {
                    Ok(()) if c.sent_ns >= warmup_ns => stats::record(
                        &mut out.hists[op.index()],
                        done.saturating_sub(c.sent_ns) / 1000,
                    ),
                    Ok(()) => {}
                    Err(msg) => record_error(&mut out, op, msg),
                }
                c.rbuf.clear();
                out.last_done_ns = done;
                if self.budget > 0 && deadline_ns.is_none_or(|d| done < d) {
                    self.start(ci, spec, done, &mut value);
                    dirty.push(ci);
                }
            }
        }
        out
    }
}

/// Connects everything, runs the workers, merges their histograms.
pub fn run(spec: &EvSpec) -> Result<EvResult, String> {
    if spec.connections == 0 || spec.threads == 0 {
        return Err("connections and threads must be at least 1".into());
    }
    if spec.keys == 0 {
        return Err("key space must have at least 1 key".into());
    }
    if spec.set_weight + spec.get_weight == 0 {
        return Err("ratio 0:0 has no commands".into());
    }
    if spec.duration.is_none() && spec.requests.is_none() {
        return Err("give a duration or a request count".into());
    }
    if spec.duration.is_none() && !spec.warmup.is_zero() {
        return Err("a warm-up needs a duration (not a request count)".into());
    }
    raise_nofile(spec.connections)?;
    let threads = spec.threads.min(spec.connections);
    let mut workers = Vec::with_capacity(threads);
    for t in 0..threads {
        let n = spec.connections / threads + usize::from(t < spec.connections % threads);
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(Conn {
                sock: open(spec)?,
                rbuf: Vec::with_capacity(spec.value_len + 64),
                wbuf: Vec::with_capacity(spec.value_len + 64),
                wpos: 0,
                op: None,
                key: Vec::with_capacity(spec.key_prefix.len() + 12),
                sent_ns: 0,
                want_write: false,
                refill: false,
            });
        }
        let budget = match spec.requests {
            Some(r) => r / threads as u64 + u64::from((t as u64) < r % threads as u64),
            None => u64::MAX,
        };
        workers.push(Worker {
            conns,
            rng: Rng::new(spec.seed ^ ((t as u64 + 1) << 40)),
            keygen: KeyGen::new(spec.keys, spec.dist.clone(), 0),
            budget,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let outs: Vec<std::thread::Result<WorkerOut>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|w| {
                let stop = stop.clone();
                s.spawn(move || {
                    let o = w.run(spec, start, &stop);
                    // One worker's failure ends the run for all: its numbers are partial.
                    if !o.problems.is_empty() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    o
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut res = EvResult::default();
    let mut hists = [stats::total_hist(), stats::total_hist()];
    let mut errors = [0u64; 2];
    let mut last_done_ns = 0;
    for o in outs {
        let Ok(o) = o else {
            res.problems.push("a worker thread panicked".into());
            continue;
        };
        for i in 0..2 {
            stats::merge(&mut hists[i], &o.hists[i]);
            errors[i] += o.errors[i];
        }
        res.misses += o.misses;
        for (k, v) in o.first_errors {
            res.first_errors.entry(k).or_insert(v);
        }
        for p in o.problems {
            if !res.problems.contains(&p) {
                res.problems.push(p);
            }
        }
        last_done_ns = last_done_ns.max(o.last_done_ns);
    }
    // Rates over the recorded span: the duration after the warm-up when one was given, else
    // until the last reply.
    res.elapsed_s = match spec.duration {
        Some(d) => d
            .as_secs_f64()
            .min(start.elapsed().as_secs_f64() - spec.warmup.as_secs_f64())
            .max(0.0),
        None => last_done_ns as f64 / 1e9,
    };
    let mut all = stats::total_hist();
    for op in [Op::Set, Op::Get] {
        let i = op.index();
        stats::merge(&mut all, &hists[i]);
        res.ops.insert(
            op.label().into(),
            stats::summarize(&hists[i], errors[i], res.elapsed_s),
        );
    }
    res.all = stats::summarize(&all, errors[0] + errors[1], res.elapsed_s);
    for (label, e) in &res.first_errors {
        let n = res.ops.get(label).map_or(0, |s| s.errors);
        res.problems
            .push(format!("{label}: {n} error replies, first: {e}"));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::ValueEntropy;

    #[test]
    fn parses_complete_and_incomplete_replies() {
        assert_eq!(
            parse_reply(b"+OK\r\n").unwrap(),
            Some((Parsed::Simple("OK".into()), 5))
        );
        assert_eq!(
            parse_reply(b"-ERR no\r\n").unwrap(),
            Some((Parsed::Error("ERR no".into()), 9))
        );
        assert_eq!(parse_reply(b":-3\r\n").unwrap(), Some((Parsed::Int(-3), 5)));
        assert_eq!(parse_reply(b"$-1\r\n").unwrap(), Some((Parsed::Nil, 5)));
        assert_eq!(
            parse_reply(b"$3\r\nabc\r\n").unwrap(),
            Some((Parsed::Bulk { start: 4, len: 3 }, 9))
        );
        // Every strict prefix of a reply is incomplete, never an error.
        let full = b"$5\r\nhello\r\n";
        for cut in 0..full.len() {
            assert_eq!(parse_reply(&full[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(parse_reply(b"+OK").unwrap(), None);
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            &b"*1\r\n$1\r\na\r\n"[..],
            b"?\r\n",
            b"+OK\n",
            b"$99999999999\r\n",
            b"$-2\r\n",
            b"$x\r\n",
            b"$3\r\nabcXY",
            b":1.5\r\n",
        ] {
            assert!(
                parse_reply(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(parse_reply(&vec![b'+'; MAX_LINE_BYTES]).is_err());
    }

    #[test]
    fn encodes_set_and_get() {
        let mut b = Vec::new();
        encode_request(Op::Set, b"k1", b"vv", &mut b);
        encode_request(Op::Get, b"k1", b"", &mut b);
        assert_eq!(
            &b[..],
            b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nvv\r\n*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n"
        );
    }

    #[test]
    fn judges_replies_against_the_generator() {
        let g = ValueGen::new(ValueEntropy::Random, 5, 100);
        let key = b"key:000000000001";
        let v = g.value(key, 100);
        let mut buf = format!("${}\r\n", v.len()).into_bytes();
        buf.extend_from_slice(&v);
        buf.extend_from_slice(b"\r\n");
        let (r, _) = parse_reply(&buf).unwrap().unwrap();
        assert_eq!(judge(Op::Get, &r, &buf, key, 100, &g), Ok(()));
        // Another key's value, a flipped byte, a short value, a miss: all errors.
        assert!(judge(Op::Get, &r, &buf, b"key:000000000002", 100, &g).is_err());
        let mut bad = buf.clone();
        bad[50] ^= 1;
        assert!(judge(Op::Get, &r, &bad, key, 100, &g).is_err());
        assert!(judge(Op::Get, &r, &buf, key, 99, &g).is_err());
        assert!(judge(Op::Get, &Parsed::Nil, b"", key, 100, &g)
            .unwrap_err()
            .contains("missed"));
        assert_eq!(
            judge(Op::Set, &Parsed::Simple("OK".into()), b"", key, 100, &g),
            Ok(())
        );
        assert_eq!(
            judge(Op::Set, &Parsed::Error("OOM x".into()), b"", key, 100, &g),
            Err("OOM x".into())
        );
        assert!(judge(Op::Set, &Parsed::Int(1), b"", key, 100, &g).is_err());
    }

    /// A server that answers every GET with nil and every SET with +OK, counting both.
    fn nil_server() -> (SocketAddr, std::thread::JoinHandle<(u64, u64)>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let (mut buf, mut chunk) = (Vec::new(), [0u8; 4096]);
            let (mut gets, mut sets) = (0, 0);
            loop {
                // One whole command: *N, then N bulks.
                let parsed = (|| {
                    let line = |at: usize| -> Option<(usize, usize)> {
                        let nl = buf[at..].iter().position(|&b| b == b'\n')? + at;
                        let n = std::str::from_utf8(&buf[at + 1..nl - 1])
                            .ok()?
                            .parse()
                            .ok()?;
                        Some((n, nl + 1))
                    };
                    let (n, mut at) = line(0)?;
                    let mut name = Vec::new();
                    for i in 0..n {
                        let (len, start) = line(at)?;
                        if buf.len() < start + len + 2 {
                            return None;
                        }
                        if i == 0 {
                            name = buf[start..start + len].to_vec();
                        }
                        at = start + len + 2;
                    }
                    Some((name, at))
                })();
                match parsed {
                    Some((name, used)) => {
                        buf.drain(..used);
                        let reply: &[u8] = if name == b"GET" {
                            gets += 1;
                            b"$-1\r\n"
                        } else {
                            sets += 1;
                            b"+OK\r\n"
                        };
                        s.write_all(reply).unwrap();
                    }
                    None => match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return (gets, sets),
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    },
                }
            }
        });
        (addr, h)
    }

    #[test]
    fn a_miss_is_counted_and_filled_when_asked() {
        let spec = |addr, set_after_miss| EvSpec {
            addr,
            password: None,
            timeout: Duration::from_secs(5),
            connections: 1,
            threads: 1,
            keys: 100,
            dist: KeyDist::Zipf(0.9),
            nil_is_miss: true,
            set_after_miss,
            key_prefix: "key:".into(),
            value_len: 10,
            set_weight: 0,
            get_weight: 1,
            duration: None,
            requests: Some(10),
            warmup: Duration::ZERO,
            seed: 1,
            values: ValueGen::new(ValueEntropy::Random, 1, 10),
            max_time: Duration::from_secs(10),
        };
        // Cache-aside: every missed GET is followed by a SET of that key.
        let (addr, server) = nil_server();
        let r = run(&spec(addr, true)).unwrap();
        assert_eq!(server.join().unwrap(), (5, 5));
        assert_eq!((r.misses, r.all.errors), (5, 0));
        assert_eq!((r.ops["GET"].count, r.ops["SET"].count), (5, 5));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        // Without the fill: GETs only, all misses, none an error.
        let (addr, server) = nil_server();
        let r = run(&spec(addr, false)).unwrap();
        assert_eq!(server.join().unwrap(), (10, 0));
        assert_eq!((r.misses, r.all.errors), (10, 0));
        // Where a nil is not a miss it is an error.
        let (addr, server) = nil_server();
        let r = run(&EvSpec {
            nil_is_miss: false,
            ..spec(addr, true)
        })
        .unwrap();
        assert_eq!(server.join().unwrap(), (10, 0));
        assert_eq!((r.misses, r.all.errors), (0, 10));
    }

    #[test]
    fn refuses_bad_knobs_before_connecting() {
        let spec = EvSpec {
            addr: "127.0.0.1:1".parse().unwrap(),
            password: None,
            timeout: Duration::from_secs(1),
            connections: 0,
            threads: 1,
            keys: 10,
            dist: KeyDist::Uniform,
            nil_is_miss: false,
            set_after_miss: false,
            key_prefix: "key:".into(),
            value_len: 10,
            set_weight: 1,
            get_weight: 3,
            duration: Some(Duration::from_secs(1)),
            requests: None,
            warmup: Duration::ZERO,
            seed: 1,
            values: ValueGen::new(ValueEntropy::Random, 1, 10),
            max_time: Duration::from_secs(5),
        };
        assert!(run(&spec).unwrap_err().contains("connections"));
        let s = EvSpec {
            connections: 1,
            duration: None,
            ..spec.clone()
        };
        assert!(run(&s).unwrap_err().contains("duration"));
        let s = EvSpec {
            connections: 1,
            duration: None,
            requests: Some(10),
            warmup: Duration::from_secs(1),
            ..spec.clone()
        };
        assert!(run(&s).unwrap_err().contains("warm-up"));
        let s = EvSpec {
            connections: 1,
            set_weight: 0,
            get_weight: 0,
            ..spec.clone()
        };
        assert!(run(&s).unwrap_err().contains("0:0"));
        // Nothing listens on port 1.
        let s = EvSpec {
            connections: 1,
            ..spec
        };
        assert!(run(&s).unwrap_err().contains("cannot connect"));
    }
}
