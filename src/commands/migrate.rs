//! MIGRATE: moves keys to another server (cairn or Redis) as Redis 7.0 does.
//!
//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key ...]`: the keys are serialized as DUMP payloads,
//! sent as one pipeline (`AUTH`, `SELECT` when the cached connection is on another db,
//! then one `RESTORE key ttl payload [REPLACE]` per key), and each key whose RESTORE was
//! acknowledged is deleted here (not with COPY) and logged as one `DEL` of those keys.
//!
//! Like Redis, the transfer is synchronous: the command holds the executor for the
//! network round trip, each step bounded by `timeout` (ms), which is what a MIGRATE
//! caller expects (the keys must not change between the DUMP and the DEL). Connections
//! are cached per `host:port` (at most [`CACHE_MAX`], closed after [`CACHE_IDLE_S`] idle
//! seconds by the cron); a cached connection that turns out closed is reopened once.

use super::acl::{DANGEROUS, KEYSPACE};
use super::notify::{notify, NOTIFY_GENERIC};
use super::{CmdError, CmdResult, CommandSpec, Ctx, WRITE};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new("migrate", -6, WRITE, "generic", migrate)
    .acl(KEYSPACE | DANGEROUS)
    .keys(3, 3, 1)
    .doc(
        "Atomically transfers a key from one Redis instance to another.",
        "2.6.0",
    )];

/// Redis's MIGRATE_SOCKET_CACHE_ITEMS and MIGRATE_SOCKET_CACHE_TTL.
const CACHE_MAX: usize = 64;
const CACHE_IDLE_S: u64 = 10;
/// A reply line longer than this is cut (Redis reads them into 1024-byte buffers).
const LINE_MAX_BYTES: usize = 1024;
/// The pipeline goes out in writes of at most this many bytes, each within the timeout.
const WRITE_CHUNK_BYTES: usize = 64 << 10;

/// One cached connection to a target.
struct Cached {
    stream: TcpStream,
    /// The db the last successful MIGRATE selected (-1: unknown, SELECT again).
    last_db: i64,
    last_use: Instant,
    /// Bytes read past the last reply line.
    pending: Vec<u8>,
}

/// The connections MIGRATE keeps open, by `host:port`.
#[derive(Default)]
pub struct SocketCache {
    conns: HashMap<String, Cached>,
}

impl SocketCache {
    /// Closes the connections idle for longer than [`CACHE_IDLE_S`] (the cron).
    pub fn close_idle(&mut self) {
        self.conns
            .retain(|_, c| c.last_use.elapsed() <= Duration::from_secs(CACHE_IDLE_S));
    }

    /// The cached connection to `name`, or a new one (None: connecting failed).
    fn get(&mut self, name: &str, host: &str, port: u16, timeout: Duration) -> Option<&mut Cached> {
        if !self.conns.contains_key(name) {
            if self.conns.len() >= CACHE_MAX {
                // As Redis: too many targets, drop one (any) of them.
                if let Some(k) = self.conns.keys().next().cloned() {
                    self.conns.remove(&k);
                }
            }
            let stream = connect(host, port, timeout)?;
            let _ = stream.set_nodelay(true);
            self.conns.insert(
                name.to_string(),
                Cached {
                    stream,
                    last_db: -1,
                    last_use: Instant::now(),
                    pending: Vec::new(),
                },
            );
        }
        let c = self.conns.get_mut(name)?;
        c.last_use = Instant::now();
        Some(c)
    }

    fn close(&mut self, name: &str) {
        self.conns.remove(name);
    }
}

fn connect(host: &str, port: u16, timeout: Duration) -> Option<TcpStream> {
    let addrs = (host, port).to_socket_addrs().ok()?;
    for addr in addrs {
        if let Ok(s) = TcpStream::connect_timeout(&addr, timeout) {
            return Some(s);
        }
    }
    None
}

/// Why a transfer stopped on the socket.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SocketError {
    Write { timed_out: bool },
    Read { timed_out: bool },
}

impl SocketError {
    fn timed_out(self) -> bool {
        match self {
            SocketError::Write { timed_out } | SocketError::Read { timed_out } => timed_out,
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

impl Cached {
    fn write_all(&mut self, buf: &[u8], timeout: Duration) -> Result<(), SocketError> {
        let _ = self.stream.set_write_timeout(Some(timeout));
        for chunk in buf.chunks(WRITE_CHUNK_BYTES) {
            self.stream
                .write_all(chunk)
                .map_err(|e| SocketError::Write {
                    timed_out: is_timeout(&e),
                })?;
        }
        Ok(())
    }

    /// The next reply line (without CRLF, cut at [`LINE_MAX_BYTES`]), read within
    /// `timeout`.
    fn read_line(&mut self, timeout: Duration) -> Result<Vec<u8>, SocketError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=nl).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                line.truncate(LINE_MAX_BYTES - 1);
                return Ok(line);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SocketError::Read { timed_out: true });
            }
            let _ = self.stream.set_read_timeout(Some(left));
            let mut buf = [0u8; 4096];
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(SocketError::Read { timed_out: false }),
                Ok(n) => {
                    // A line never needs more than its cap: past it, only the end of the
                    // line is looked for (the bytes are dropped, as Redis's cut line).
                    if self.pending.len() < LINE_MAX_BYTES * 4 {
                        self.pending.extend_from_slice(&buf[..n]);
                    } else if let Some(nl) = buf[..n].iter().position(|&b| b == b'\n') {
                        self.pending.extend_from_slice(&buf[nl..n]);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(SocketError::Read {
                        timed_out: is_timeout(&e),
                    })
                }
            }
        }
    }
}

fn push_bulk(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(b.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

fn push_array_head(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// What the target answered to one pipeline (lines read in order until one could not be).
struct Answers {
    auth: Option<Vec<u8>>,
    select: Option<Vec<u8>>,
    restores: Vec<Vec<u8>>,
    /// Reading the RESTORE replies stopped here.
    read_error: Option<SocketError>,
}

/// Sends the pipeline and reads the replies. Err: the write, or the AUTH / SELECT reply,
/// failed (nothing is known to have been applied).
fn exchange(
    conn: &mut Cached,
    cmd: &[u8],
    auth: bool,
    select: bool,
    restores: usize,
    timeout: Duration,
) -> Result<Answers, SocketError> {
    conn.write_all(cmd, timeout)?;
    let auth = if auth {
        Some(conn.read_line(timeout)?)
    } else {
        None
    };
    let select = if select {
        Some(conn.read_line(timeout)?)
    } else {
        None
    };
    let mut answers = Answers {
        auth,
        select,
        restores: Vec::with_capacity(restores),
        read_error: None,
    };
    for _ in 0..restores {
        match conn.read_line(timeout) {
            Ok(line) => answers.restores.push(line),
            Err(e) => {
                answers.read_error = Some(e);
                break;
            }
        }
    }
    Ok(answers)
}

/// An AUTH or SELECT reply that is an error.
fn refused(line: &Option<Vec<u8>>) -> Option<&Vec<u8>> {
    line.as_ref().filter(|l| l.first() == Some(&b'-'))
}

fn io_error(e: SocketError) -> CmdError {
    let what = match e {
        SocketError::Write { .. } => "writing",
        SocketError::Read { .. } => "reading",
    };
    CmdError::raw(format!("IOERR error or timeout {what} to target instance"))
}

fn migrate(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let mut copy = false;
    let mut replace = false;
    let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
    let mut first_key = 3;
    let mut num_keys = 1;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if args.is(j, "COPY") {
            copy = true;
        } else if args.is(j, "REPLACE") {
            replace = true;
        } else if args.is(j, "AUTH") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            auth = Some((None, args.get(j)));
        } else if args.is(j, "AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((Some(args.get(j + 1)), args.get(j + 2)));
            j += 2;
        } else if args.is(j, "KEYS") {
            if !args.get(3).is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            first_key = j + 1;
            num_keys = args.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout_ms = args.i64(5)?;
    let db = args.i64(4)?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });
    let src_db = ctx.db();
    let keys: Vec<&[u8]> = (first_key..first_key + num_keys)
        .map(|i| args.get(i))
        .filter(|k| ctx.srv.ks.lookup_read(src_db, k, ctx.now_ms).is_some())
        .collect();
    if keys.is_empty() {
        ctx.out.simple("NOKEY");
        return Ok(());
    }
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    let port_text = String::from_utf8_lossy(args.get(2)).into_owned();
    // As Redis's atoi: a port that is not a number is port 0, where connecting fails.
    let port: u16 = port_text.parse().unwrap_or(0);
    let name = format!("{host}:{port_text}");
    const CONNECT_ERR: &str = "IOERR error or timeout connecting to the client";

    let mut may_retry = true;
    loop {
        let Some(conn) = ctx.srv.migrate_sockets.get(&name, &host, port, timeout) else {
            return Err(CmdError::raw(CONNECT_ERR));
        };
        let select = conn.last_db != db;
        // The pipeline: AUTH, SELECT, one RESTORE per key still there (one that expired
        // since the lookup above is skipped, as Redis does).
        let mut cmd = Vec::new();
        if let Some((user, pass)) = auth {
            push_array_head(&mut cmd, if user.is_some() { 3 } else { 2 });
            push_bulk(&mut cmd, b"AUTH");
            if let Some(u) = user {
                push_bulk(&mut cmd, u);
            }
            push_bulk(&mut cmd, pass);
        }
        if select {
            push_array_head(&mut cmd, 2);
            push_bulk(&mut cmd, b"SELECT");
            push_bulk(&mut cmd, db.to_string().as_bytes());
        }
        let mut sent: Vec<&[u8]> = Vec::with_capacity(keys.len());
        for &key in &keys {
            let Some(e) = ctx.srv.ks.find(src_db, key, ctx.now_ms) else {
                continue;
            };
            let ttl = match ctx.srv.ks.expire_at(e) {
                Some(at) if at - ctx.now_ms < 0 => continue,
                Some(at) => (at - ctx.now_ms).max(1),
                None => 0,
            };
            let payload = super::keys::dump_payload(&ctx.srv.ks, e)
                .ok_or_else(|| CmdError::err("DUMP of this value type is not supported yet"))?;
            push_array_head(&mut cmd, if replace { 5 } else { 4 });
            push_bulk(&mut cmd, b"RESTORE");
            push_bulk(&mut cmd, key);
            push_bulk(&mut cmd, ttl.to_string().as_bytes());
            push_bulk(&mut cmd, &payload);
            if replace {
                push_bulk(&mut cmd, b"REPLACE");
            }
            sent.push(key);
        }
        let Some(conn) = ctx.srv.migrate_sockets.get(&name, &host, port, timeout) else {
            return Err(CmdError::raw(CONNECT_ERR));
        };
        let answers = match exchange(conn, &cmd, auth.is_some(), select, sent.len(), timeout) {
            Ok(a) => a,
            Err(e) => {
                // A cached connection the target closed: reopened once, unless it timed out.
                ctx.srv.migrate_sockets.close(&name);
                if may_retry && !e.timed_out() {
                    may_retry = false;
                    continue;
                }
                return Err(io_error(e));
            }
        };
        // The first error the target answered (AUTH's, SELECT's, then a RESTORE's):
        // while AUTH or SELECT failed, no RESTORE counts as done.
        let early_error = refused(&answers.auth).or(refused(&answers.select)).cloned();
        let mut target_error = early_error.clone();
        let mut moved: Vec<&[u8]> = Vec::new();
        for (line, &key) in answers.restores.iter().zip(&sent) {
            if early_error.is_some() || line.first() == Some(&b'-') {
                if target_error.is_none() {
                    target_error = Some(line.clone());
                }
            } else if !copy {
                moved.push(key);
            }
        }
        if let Some(e) = answers.read_error {
            if target_error.is_none() && answers.restores.is_empty() && may_retry && !e.timed_out()
            {
                ctx.srv.migrate_sockets.close(&name);
                may_retry = false;
                continue;
            }
            ctx.srv.migrate_sockets.close(&name);
        } else if let Some(c) = ctx.srv.migrate_sockets.conns.get_mut(&name) {
            c.last_db = if target_error.is_some() { -1 } else { db };
        }
        if !moved.is_empty() {
            let mut form = Vec::with_capacity(moved.len() + 1);
            form.push(b"DEL".to_vec());
            for &k in &moved {
                if ctx.srv.ks.delete(src_db, k, ctx.now_ms) {
                    notify(ctx, NOTIFY_GENERIC, "del", k);
                }
                form.push(k.to_vec());
            }
            ctx.dirty(moved.len() as u64);
            ctx.srv.propagate_as = Some(form);
        }
        if let Some(err) = target_error {
            let text = err.get(1..).unwrap_or_default();
            return Err(CmdError::err(format!(
                "Target instance replied with error: {}",
                String::from_utf8_lossy(text)
            )));
        }
        if let Some(e) = answers.read_error {
            return Err(io_error(e));
        }
        ctx.out.ok();
        return Ok(());
    }
}
