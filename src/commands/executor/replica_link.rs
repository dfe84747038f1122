//! cairn as a replica: the link to the primary runs on its own thread (`cairn-repl-link`),
//! so nothing the primary sends — the handshake, an RDB of the whole dataset, the stream —
//! is read or parsed on the executor.
//!
//! The thread connects, does Redis's handshake (PING, AUTH with `masterauth`, REPLCONF
//! listening-port and `capa eof psync2 cairn-image-<fingerprint>`, PSYNC with the cached
//! id and offset), then:
//! - `+FULLRESYNC`: receives the RDB (`$<len>` or `$EOF:<mark>`), loads it into a fresh
//!   arena and hands the whole keyspace to the executor ([`LinkEvent::FullSync`]);
//! - `+CAIRNIMAGE`: a cairn primary's snapshot image, streamed while it is captured and
//!   loaded as it arrives; its header, last, names the offset the stream continues at;
//! - `+CONTINUE`: goes on from the offset it asked for.
//!
//! The stream is then cut into whole commands here ([`LinkEvent::Commands`], bounded
//! channel); the executor runs them as the primary's client and publishes the offset it
//! applied, which the thread reports with `REPLCONF ACK` every second and on GETACK. A
//! broken link is retried every second with the cached id and offset.

use crate::config::Config;
use crate::keyspace::Keyspace;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Stream events queued toward the executor (each at most [`COMMANDS_PER_EVENT`]
/// commands): the thread waits when the executor falls behind.
pub const LINK_EVENTS_QUEUED: usize = 64;
const COMMANDS_PER_EVENT: usize = 1024;
/// The longest command line or bulk header the primary may send.
const MAX_HEADER_BYTES: usize = 64;
/// The most arguments one command of the stream may have.
const MAX_ARGS: i64 = 1 << 20;

/// A command of the stream: its arguments (ranges into `data`) and its size on the wire
/// (what it adds to the replication offset).
#[derive(Debug)]
pub struct StreamCommand {
    pub data: Vec<u8>,
    pub ranges: Vec<(usize, usize)>,
    pub wire_bytes: u64,
}

pub enum LinkEvent {
    /// The handshake reached this state (ROLE's and INFO's words).
    State(&'static str),
    /// A full sync's dataset, loaded off the executor, with the primary's id and offset.
    FullSync {
        ks: Box<Keyspace>,
        functions: Vec<Vec<u8>>,
        replid: String,
        offset: u64,
        /// The db the stream after `offset` runs in (the RDB's `repl-stream-db`).
        stream_db: usize,
    },
    /// PSYNC got neither `+FULLRESYNC` nor `+CONTINUE` (an error, no reply): a FAILOVER
    /// handing over to this primary is aborted. `Lost` follows.
    PsyncFailed(String),
    /// `+CONTINUE [newid]`: the stream goes on from the offset asked for.
    Continue {
        replid: Option<String>,
    },
    Commands(Vec<StreamCommand>),
    /// The link broke (the reason is logged); the thread connects again.
    Lost(String),
}

/// What the executor and the link thread share.
#[derive(Default)]
pub struct LinkShared {
    pub stop: AtomicBool,
    /// The offset the executor applied (what `REPLCONF ACK` reports).
    pub applied: AtomicU64,
    /// The offset the executor's log fsynced (-1: no log), reported as `FACK`.
    pub fsynced: AtomicI64,
    /// The primary sent `REPLCONF GETACK`: acknowledge now.
    pub ack_now: AtomicBool,
    /// A FAILOVER hands over to this primary: PSYNC says `FAILOVER` (the target turns
    /// into a primary first).
    pub failover: AtomicBool,
    /// (replid, offset) a reconnection asks PSYNC with (None: `PSYNC ? -1`).
    pub cached: Mutex<Option<(String, u64)>>,
    /// The configuration after a CONFIG SET of `tls-*` options: the next connection
    /// attempt uses it (certificates, `tls-replication`), as Redis's does.
    pub new_config: Mutex<Option<Config>>,
    /// Bytes read from the primary (INFO's `total_net_repl_input_bytes`; the executor
    /// holds the same counter across links).
    pub net_input_bytes: Arc<AtomicU64>,
}

/// What the link thread needs to know.
pub struct LinkParams {
    pub host: String,
    pub port: u16,
    pub listening_port: u16,
    pub masterauth: Option<String>,
    pub masteruser: Option<String>,
    pub timeout: Duration,
    pub config: Config,
    pub dir: std::path::PathBuf,
}

/// The link thread's body: sessions until `stop`.
pub fn run(
    mut p: LinkParams,
    shared: Arc<LinkShared>,
    tx: SyncSender<LinkEvent>,
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
) {
    let send = |ev: LinkEvent| -> bool {
        let ok = tx.send(ev).is_ok();
        if let Some(w) = &wake {
            w();
        }
        ok
    };
    while !shared.stop.load(SeqCst) {
        if !send(LinkEvent::State("connecting")) {
            return;
        }
        if let Some(c) = shared
            .new_config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            p.config = c;
        }
        let result = session(&p, &shared, &send);
        if shared.stop.load(SeqCst) {
            return;
        }
        let why = match result {
            Ok(()) => "the primary closed the connection".to_string(),
            Err(e) => e,
        };
        if !send(LinkEvent::Lost(why)) {
            return;
        }
        // Retry every second, as Redis's replicationCron.
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until && !shared.stop.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The socket to the primary: TCP, or TLS over it (`tls-replication`).
trait LinkSocket: Read + Write + Send {}
impl<T: Read + Write + Send> LinkSocket for T {}

/// Reads from the primary with a deadline, a line or bytes at a time.
struct Conn {
    s: Box<dyn LinkSocket>,
    buf: Vec<u8>,
    pos: usize,
    timeout: Duration,
    last_io: Instant,
    /// [`LinkShared::net_input_bytes`].
    read_bytes: Arc<AtomicU64>,
}

impl Conn {
    fn fill(&mut self, stop: &AtomicBool) -> Result<(), String> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let mut tmp = [0u8; 64 * 1024];
        loop {
            if stop.load(SeqCst) {
                return Err("stopped".into());
            }
            match self.s.read(&mut tmp) {
                Ok(0) => return Err("the primary closed the connection".into()),
                Ok(n) => {
                    self.read_bytes.fetch_add(n as u64, SeqCst);
                    self.buf.extend_from_slice(&tmp[..n]);
                    self.last_io = Instant::now();
                    return Ok(());
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    if self.last_io.elapsed() > self.timeout {
                        return Err("timeout: no data nor PING received".into());
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading from the primary: {e}")),
            }
        }
    }

    /// A line without its CRLF (at most [`MAX_HEADER_BYTES`]).
    fn line(&mut self, stop: &AtomicBool) -> Result<String, String> {
        loop {
            if let Some(i) = self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                let raw = &self.buf[self.pos..self.pos + i];
                let text =
                    String::from_utf8_lossy(raw.strip_suffix(b"\r").unwrap_or(raw)).into_owned();
                self.pos += i + 1;
                return Ok(text);
            }
            if self.buf.len() - self.pos > 1024 {
                return Err("the primary sent a line too long".into());
            }
            self.fill(stop)?;
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.s
            .write_all(bytes)
            .map_err(|e| format!("writing to the primary: {e}"))
    }

    /// Sends a command and reads its one-line reply.
    fn call(&mut self, args: &[&str], stop: &AtomicBool) -> Result<String, String> {
        let mut b = Vec::new();
        crate::persistence::aof::format::encode_command(&mut b, args);
        self.send(&b)?;
        self.line(stop)
    }
}

fn session(
    p: &LinkParams,
    shared: &LinkShared,
    send: &dyn Fn(LinkEvent) -> bool,
) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addr = (p.host.as_str(), p.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", p.host))?
        .next()
        .ok_or_else(|| format!("no address for {}", p.host))?;
    let s = TcpStream::connect_timeout(&addr, p.timeout)
        .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let s: Box<dyn LinkSocket> = if p.config.settings().tls_replication {
        let cfg = crate::tls::client_config(&p.config)?;
        Box::new(crate::tls::ClientStream::new(s, cfg, &p.host)?)
    } else {
        Box::new(s)
    };
    let mut c = Conn {
        s,
        buf: Vec::new(),
        pos: 0,
        timeout: p.timeout,
        last_io: Instant::now(),
        read_bytes: shared.net_input_bytes.clone(),
    };
    let stop = &shared.stop;
    crate::notice!("MASTER <-> REPLICA sync started");
    send(LinkEvent::State("handshake"));
    let pong = c.call(&["PING"], stop)?;
    // As Redis: an authentication error to PING is fine (AUTH follows).
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    crate::notice!("Master replied to PING, replication can continue...");
    if let Some(pass) = &p.masterauth {
        let r = match &p.masteruser {
            Some(u) => c.call(&["AUTH", u, pass], stop)?,
            None => c.call(&["AUTH", pass], stop)?,
        };
        if r.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {r}"));
        }
    }
    let port = p.listening_port.to_string();
    let r = c.call(&["REPLCONF", "listening-port", &port], stop)?;
    if r.starts_with('-') {
        crate::notice!("(Non critical) Master does not understand REPLCONF listening-port: {r}");
    }
    let image_capa =
        crate::persistence::snapshot::format::Fingerprint::current().replication_capa();
    let r = c.call(
        &[
            "REPLCONF",
            "capa",
            "eof",
            "capa",
            "psync2",
            "capa",
            &image_capa,
        ],
        stop,
    )?;
    if r.starts_with('-') {
        crate::notice!("(Non critical) Master does not understand REPLCONF capa: {r}");
    }
    let cached = shared.cached.lock().map(|g| g.clone()).unwrap_or(None);
    let (id, off) = match &cached {
        Some((id, off)) => (id.clone(), (off + 1).to_string()),
        None => ("?".to_string(), "-1".to_string()),
    };
    if cached.is_some() {
        crate::notice!("Trying a partial resynchronization (request {id}:{off}).");
    } else {
        crate::notice!("Partial resynchronization not possible (no cached master)");
    }
    let mut args = vec!["PSYNC", id.as_str(), off.as_str()];
    if shared.failover.load(SeqCst) {
        args.push("FAILOVER");
    }
    let mut b = Vec::new();
    crate::persistence::aof::format::encode_command(&mut b, &args);
    let psync_failed = |e: String| {
        send(LinkEvent::PsyncFailed(e.clone()));
        e
    };
    c.send(&b).map_err(psync_failed)?;
    let reply = loop {
        let l = c.line(stop).map_err(psync_failed)?;
        if !l.is_empty() {
            break l;
        }
    };
    // A loaded dataset handed to the executor, whichever form it came in.
    let full_sync = |(ks, functions, stream_db): Dataset, replid: &str, offset: u64| {
        let ev = LinkEvent::FullSync {
            ks: Box::new(ks),
            functions,
            replid: replid.to_string(),
            offset,
            stream_db,
        };
        if send(ev) {
            Ok(())
        } else {
            Err("stopped".to_string())
        }
    };
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut w = rest.split_whitespace();
        let (Some(replid), Some(offset)) = (w.next(), w.next().and_then(|o| o.parse::<u64>().ok()))
        else {
            return Err(format!("unexpected reply to PSYNC: '{reply}'"));
        };
        crate::notice!("Full resync from master: {replid}:{offset}");
        send(LinkEvent::State("sync"));
        full_sync(receive_dataset(&mut c, stop, p)?, replid, offset)?;
    } else if let Some(replid) = reply.strip_prefix("+CAIRNIMAGE ") {
        // A cairn primary that matched our image capability streams its capture while it
        // is taken; the image's header, last, names the offset the stream continues at.
        let replid = replid.trim();
        crate::notice!("Full resync from master by streamed image: {replid}");
        send(LinkEvent::State("sync"));
        let (dataset, offset) = load_streamed_image(&mut c, stop, p, replid)?;
        full_sync(dataset, replid, offset)?;
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        crate::notice!("Successful partial resynchronization with master.");
        if !send(LinkEvent::Continue {
            replid: (!id.is_empty()).then(|| id.to_string()),
        }) {
            return Err("stopped".into());
        }
    } else {
        return Err(psync_failed(format!(
            "Unexpected reply to PSYNC from master: {reply}"
        )));
    }
    send(LinkEvent::State("connected"));
    crate::notice!("MASTER <-> REPLICA sync: Finished with success");
    stream(&mut c, shared, send)
}

/// A loaded full sync: the keyspace, its function libraries, the db the stream runs in.
type Dataset = (Keyspace, Vec<Vec<u8>>, usize);

/// The payload after `+FULLRESYNC`, loaded: an RDB (`$<len>` or `$EOF:<mark>`, received
/// into memory, then parsed key by key). A cairn primary that matched our image
/// capability answers `+CAIRNIMAGE` instead ([`load_streamed_image`]).
fn receive_dataset(c: &mut Conn, stop: &AtomicBool, p: &LinkParams) -> Result<Dataset, String> {
    let head = payload_head(c, stop)?;
    let data = receive_rdb(c, stop, &head)?;
    load_dataset(&data, p)
}

/// The payload's first line (`$<len>` or `$EOF:<mark>`); newlines before it are keepalives.
fn payload_head(c: &mut Conn, stop: &AtomicBool) -> Result<String, String> {
    let head = loop {
        let l = c.line(stop)?;
        if !l.is_empty() {
            break l;
        }
    };
    if let Some(err) = head.strip_prefix('-') {
        return Err(format!("MASTER aborted replication with an error: {err}"));
    }
    Ok(head)
}

/// The RDB payload after its head: `$<len>` and that many bytes, or `$EOF:<40-byte mark>`
/// and bytes up to the mark.
fn receive_rdb(c: &mut Conn, stop: &AtomicBool, head: &str) -> Result<Vec<u8>, String> {
    let Some(spec) = head.strip_prefix('$') else {
        return Err(format!(
            "Bad protocol from MASTER, the first byte is not '$': {head}"
        ));
    };
    let mut data = Vec::new();
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err(format!("bad EOF mark from MASTER: {head}"));
        }
        crate::notice!(
            "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to memory"
        );
        loop {
            data.extend_from_slice(&c.buf[c.pos..]);
            c.pos = c.buf.len();
            if data.ends_with(&mark) {
                data.truncate(data.len() - mark.len());
                return Ok(data);
            }
            c.fill(stop)?;
        }
    }
    let len: u64 = spec
        .parse()
        .map_err(|_| format!("bad payload length from MASTER: {head}"))?;
    crate::notice!("MASTER <-> REPLICA sync: receiving {len} bytes from master to memory");
    // The declared size is not an allocation: the buffer grows with what arrives.
    while (data.len() as u64) < len {
        if c.pos == c.buf.len() {
            c.fill(stop)?;
        }
        let want = (len - data.len() as u64) as usize;
        let take = want.min(c.buf.len() - c.pos);
        data.extend_from_slice(&c.buf[c.pos..c.pos + take]);
        c.pos += take;
    }
    Ok(data)
}

/// The payload as a reader, at most `left` bytes (the image loader reads exactly the
/// image, which its trailer and header end; the stream follows).
struct Payload<'a> {
    c: &'a mut Conn,
    stop: &'a AtomicBool,
    left: u64,
}

impl Read for Payload<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 || out.is_empty() {
            return Ok(0);
        }
        while self.c.pos == self.c.buf.len() {
            self.c.fill(self.stop).map_err(std::io::Error::other)?;
        }
        let n = out
            .len()
            .min(self.c.buf.len() - self.c.pos)
            .min(self.left.min(usize::MAX as u64) as usize);
        out[..n].copy_from_slice(&self.c.buf[self.c.pos..self.c.pos + n]);
        self.c.pos += n;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Loads a snapshot image sent in its streamed order (the header last) from the socket
/// into a fresh arena as it arrives (this thread; the executor only swaps it in). Returns
/// the dataset and the cut's offset, which the header names; its replid must be the one
/// the primary announced.
fn load_streamed_image(
    c: &mut Conn,
    stop: &AtomicBool,
    p: &LinkParams,
    replid: &str,
) -> Result<(Dataset, u64), String> {
    crate::notice!(
        "MASTER <-> REPLICA sync: receiving the snapshot image from master as it is taken, loading it as it arrives"
    );
    let s = p.config.settings();
    let fail = |e: String| format!("Failed trying to load the MASTER synchronization image: {e}");
    let mut payload = Payload {
        c,
        stop,
        left: u64::MAX,
    };
    let (arena, header) =
        crate::persistence::snapshot::load_image_streamed(&mut payload, s.arena_reserve_bytes)
            .map_err(fail)?;
    if header.repl_id[..] != *replid.as_bytes() {
        return Err(fail(format!(
            "the image is of replication id {}, the primary announced {replid}",
            String::from_utf8_lossy(&header.repl_id)
        )));
    }
    let ks = crate::collections::keyspace_from_arena(arena, s.databases).map_err(fail)?;
    let functions =
        crate::persistence::rdb_value::read_function_libraries(&header.functions).map_err(fail)?;
    crate::notice!("Done loading the image, keys loaded: {}.", header.keys);
    let stream_db = (header.repl_stream_db as usize)
        .checked_sub(1)
        .filter(|&db| db < s.databases)
        .unwrap_or(0);
    Ok(((ks, functions, stream_db), header.repl_offset))
}

/// Loads the RDB into a fresh arena (this thread; the executor only swaps it in), with
/// its functions and the db its `repl-stream-db` names (0 when absent or out of range: a
/// primary sends a SELECT before its first command anyway).
fn load_dataset(data: &[u8], p: &LinkParams) -> Result<(Keyspace, Vec<Vec<u8>>, usize), String> {
    crate::notice!("MASTER <-> REPLICA sync: Loading DB in memory");
    let s = p.config.settings();
    let seed = {
        let mut r = crate::util::Rng::from_time();
        [r.next_u64(), r.next_u64()]
    };
    let arena = crate::arena::Arena::new(s.arena_reserve_bytes, seed).map_err(|e| e.to_string())?;
    let mut ks = crate::collections::new_keyspace(arena, s.databases);
    let st =
        crate::persistence::rdb_file::load_rdb(data, &mut ks, &p.config, crate::util::now_ms())
            .map_err(|e| {
                format!("Failed trying to load the MASTER synchronization DB from socket: {e}")
            })?;
    crate::notice!(
        "Done loading RDB, keys loaded: {}, keys expired: {}.",
        st.keys_loaded,
        st.keys_expired_skipped
    );
    let stream_db = st
        .repl_stream_db
        .filter(|&db| db < s.databases as u64)
        .unwrap_or(0) as usize;
    Ok((ks, st.functions, stream_db))
}

/// The stream: whole commands to the executor, ACKs every second and on GETACK.
fn stream(
    c: &mut Conn,
    shared: &LinkShared,
    send: &dyn Fn(LinkEvent) -> bool,
) -> Result<(), String> {
    let mut last_ack = Instant::now() - Duration::from_secs(2);
    let mut last_fack = -1;
    loop {
        let mut batch = Vec::new();
        while batch.len() < COMMANDS_PER_EVENT {
            match parse_command(&c.buf[c.pos..])? {
                Some(cmd) => {
                    c.pos += cmd.wire_bytes as usize;
                    batch.push(cmd);
                }
                None => break,
            }
        }
        if !batch.is_empty() && !send(LinkEvent::Commands(batch)) {
            return Err("stopped".into());
        }
        // Acknowledged every second, on GETACK, and when the log fsynced more (a
        // WAITAOF on the primary waits for it).
        let fsynced = shared.fsynced.load(SeqCst);
        if shared.ack_now.swap(false, SeqCst)
            || last_ack.elapsed() >= Duration::from_secs(1)
            || fsynced > last_fack
        {
            last_ack = Instant::now();
            last_fack = fsynced;
            let off = shared.applied.load(SeqCst).to_string();
            let fack = fsynced.to_string();
            let mut args = vec!["REPLCONF", "ACK", off.as_str()];
            if fsynced >= 0 {
                args.extend_from_slice(&["FACK", fack.as_str()]);
            }
            let mut b = Vec::new();
            crate::persistence::aof::format::encode_command(&mut b, &args);
            c.send(&b)?;
        }
        if c.pos < c.buf.len() && parse_command(&c.buf[c.pos..])?.is_some() {
            continue;
        }
        // Keep the unparsed tail at the front of the buffer.
        if c.pos > 0 {
            c.buf.drain(..c.pos);
            c.pos = 0;
        }
        c.fill(&shared.stop)?;
    }
}

/// One RESP multibulk command at the front of `buf`: None when incomplete. The primary
/// sends only multibulk commands; anything else breaks the link.
pub fn parse_command(buf: &[u8]) -> Result<Option<StreamCommand>, String> {
    fn header(buf: &[u8], at: usize, kind: u8) -> Result<Option<(i64, usize)>, String> {
        let Some(&first) = buf.get(at) else {
            return Ok(None);
        };
        if first != kind {
            return Err(format!(
                "Protocol error from MASTER: expected '{}', got byte {first}",
                kind as char
            ));
        }
        let end = buf[at..]
            .iter()
            .take(MAX_HEADER_BYTES)
            .position(|&b| b == b'\r');
        let Some(end) = end else {
            if buf.len() - at >= MAX_HEADER_BYTES {
                return Err("Protocol error from MASTER: header too long".into());
            }
            return Ok(None);
        };
        if buf.len() < at + end + 2 {
            return Ok(None);
        }
        let n = crate::util::parse_i64(&buf[at + 1..at + end])
            .ok_or_else(|| "Protocol error from MASTER: bad length".to_string())?;
        Ok(Some((n, at + end + 2)))
    }
    let Some((argc, mut at)) = header(buf, 0, b'*')? else {
        return Ok(None);
    };
    if !(1..=MAX_ARGS).contains(&argc) {
        return Err(format!("Protocol error from MASTER: {argc} arguments"));
    }
    let mut ranges = Vec::new();
    for _ in 0..argc {
        let Some((len, start)) = header(buf, at, b'$')? else {
            return Ok(None);
        };
        if !(0..=(512 << 20)).contains(&len) {
            return Err(format!("Protocol error from MASTER: bulk of {len} bytes"));
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        ranges.push((start, len as usize));
        at = end + 2;
    }
    let data = buf[..at].to_vec();
    Ok(Some(StreamCommand {
        data,
        ranges,
        wire_bytes: at as u64,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole commands come out with their wire size; a partial one waits; anything but a
    /// multibulk (or absurd sizes) is an error, never a panic.
    #[test]
    fn the_stream_is_cut_into_whole_commands() {
        let mut b = Vec::new();
        crate::persistence::aof::format::encode_command(&mut b, &["SET", "k", "v"]);
        let one = b.len();
        crate::persistence::aof::format::encode_command(&mut b, &["PING"]);
        let c = parse_command(&b).unwrap().unwrap();
        assert_eq!(c.wire_bytes as usize, one);
        let args: Vec<&[u8]> = c.ranges.iter().map(|&(s, l)| &c.data[s..s + l]).collect();
        assert_eq!(args, [&b"SET"[..], b"k", b"v"]);
        for cut in 0..one {
            assert!(parse_command(&b[..cut]).unwrap().is_none(), "cut {cut}");
        }
        for bad in [
            &b"+OK\r\n"[..],
            b"*0\r\n",
            b"*-1\r\n",
            b"*1\r\n:1\r\n",
            b"*1\r\n$-5\r\n",
            b"*1\r\n$99999999999\r\n",
            b"*x\r\n",
        ] {
            assert!(
                parse_command(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
