//! I/O threads (`io-threads N`, N > 1): N threads own the sockets — accept, read, parse
//! RESP, write replies — and the executor thread only runs commands.
//!
//! Flow, per connection: an I/O thread parses every complete command it has into one
//! [`Batch`] and sends it to the executor; it reads no further commands of that connection
//! until the executor's [`Reply`] comes back (one batch in flight per connection keeps
//! commands in order and bounds every queue by the number of connections). The executor
//! answers through a per-thread inbox and wakes the thread with its mio `Waker`.

use super::connection::{Inbound, ReadStep};
use super::outq::OutRefs;
use super::stream::{Peer, Stream};
use crate::arena::Ref;
use crate::commands::executor::client_memory::{ClientMemory, ConnMemory};
use crate::commands::executor::stats::Stats;
use crate::commands::executor::{RefSeg, Server};
use crate::commands::Args;
use crate::protocol::parser::{ArgSource, BigArg, Parse, ParseLimits, RequestParser, BIG_ARG_FLAG};
use crate::util::now_ms;
use crate::{notice, verbose, warning};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::event_loop::{
    BIG_ARG_BYTES, READ_BUDGET_BYTES, READ_CHUNK_BYTES, SHUTDOWN_SIGNAL, WRITE_BUDGET_BYTES,
};
use super::latency_trace::LatencyTrace;
use super::listeners::{
    admission_refusal, bind_listeners, bind_tls, bind_unix, AdmissionRules, SharedListeners,
    LISTENER_SLOTS,
};
use super::tls_refusal::{TlsRefusals, REFUSAL_SLOTS};

/// Messages queued from all I/O threads to the executor. The queue is bounded; a thread
/// that finds it full keeps its batches locally (at most one per connection) and retries.
pub const EXECUTOR_QUEUE_LEN: usize = 4096;
const WAKER_TOKEN: Token = Token(usize::MAX - 1);
const LISTENER_TOKEN_BASE: usize = usize::MAX - 64;
const _: () = assert!(LISTENER_TOKEN_BASE + LISTENER_SLOTS < WAKER_TOKEN.0);
/// Refused TLS connections waiting for their handshake (`tls_refusal.rs`), just below
/// the listeners' tokens (connection slots stay far below).
const REFUSAL_TOKEN_BASE: usize = LISTENER_TOKEN_BASE - REFUSAL_SLOTS;

/// Connection id: thread index in the top 8 bits, a per-thread sequence below.
type ConnId = u64;

/// Complete commands of one connection, copied out of its query buffer.
pub struct Batch {
    conn: ConnId,
    data: Vec<u8>,
    args: Vec<(usize, usize)>,
    /// (first arg index, argc) per command.
    cmds: Vec<(usize, usize)>,
    /// A protocol error after the commands: reply with it and close.
    error: Option<String>,
    /// Arguments read into arena blocks (ranges flagged with `BIG_ARG_FLAG` index this);
    /// the executor releases them after running the batch.
    big: Vec<BigArg>,
}

enum ToExecutor {
    Connected {
        conn: ConnId,
        addr: String,
        laddr: String,
        /// Accepted on the Unix socket (CLIENT LIST flag `U`).
        unix: bool,
        fd: i32,
        /// Measured by the I/O thread, read by the executor's client eviction.
        memory: Arc<ConnMemory>,
    },
    Batch(Batch),
    Closed {
        conn: ConnId,
    },
    /// The AOF writer made more of the log durable: held replies may go.
    AofDurable,
    /// Value blocks whose referencing replies were written (or dropped): the executor
    /// unpins them (I/O threads never touch the arena's allocator).
    Release(Vec<Ref>),
    /// A connection parsed the header of a big bulk: the executor allocates its block.
    ArgBlock {
        conn: ConnId,
        len: usize,
    },
    /// Argument blocks of a connection that went away before its command ran.
    ReleaseArgs(Vec<Ref>),
}

struct ToIo {
    conn: ConnId,
    out: Vec<u8>,
    /// Large values spliced into `out` by reference (positions in `out`).
    refs: Vec<RefSeg>,
    close: bool,
    authenticated: bool,
    /// Pub/sub messages pushed to the connection, not the reply to its batch: the
    /// connection's in-flight batch (if any) is still in flight.
    push_only: bool,
    /// The client has subscriptions: its output is under the `pubsub` limit class.
    pubsub: bool,
    /// The client is a replica: its output limit (`replica` class) is the executor's to
    /// enforce, from the unsent bytes this thread publishes (its full sync is paced).
    replica: bool,
    /// The answer to `ToExecutor::ArgBlock` (nothing else in the message).
    arg_block: Option<ArgBlockAnswer>,
    /// Client eviction: close at once, dropping the unsent output (Redis frees the
    /// client), where CLIENT KILL's close lets the output go first.
    evicted: bool,
}

/// The executor's answer to a connection's request for a big bulk's block.
enum ArgBlockAnswer {
    Block(BigArg),
    /// Over the in-place budget or the arena's reserve: the bulk is read into the query
    /// buffer instead.
    Declined,
}

/// Settings the I/O threads read; the executor refreshes them every turn, before the
/// turn's replies leave (a client that saw CONFIG SET's OK finds it applied).
#[derive(Default)]
pub struct SharedLimits {
    pub proto_max_bulk_len: AtomicU64,
    pub client_query_buffer_limit: AtomicU64,
    pub obuf_hard_bytes: AtomicU64,
    pub obuf_soft_bytes: AtomicU64,
    pub obuf_soft_seconds: AtomicU64,
    pub pubsub_hard_bytes: AtomicU64,
    pub pubsub_soft_bytes: AtomicU64,
    pub pubsub_soft_seconds: AtomicU64,
    pub maxclients: AtomicUsize,
    /// The default user needs AUTH (a password, or disabled).
    pub requirepass_set: AtomicBool,
    /// The default user has `nopass` (protected mode applies).
    pub default_nopass: AtomicBool,
    pub protected_mode: AtomicBool,
    pub timeout_s: AtomicU64,
}

impl SharedLimits {
    fn refresh(&self, srv: &Server) {
        let s = srv.config.settings();
        // Protected mode and new connections' authentication follow the default user
        // (`requirepass` or its ACL rules).
        self.requirepass_set
            .store(!srv.acl.default_needs_no_auth(), Ordering::Relaxed);
        self.default_nopass
            .store(srv.acl.default_nopass(), Ordering::Relaxed);
        self.proto_max_bulk_len
            .store(s.proto_max_bulk_len as u64, Ordering::Relaxed);
        self.client_query_buffer_limit
            .store(s.client_query_buffer_limit, Ordering::Relaxed);
        self.obuf_hard_bytes
            .store(s.obuf_normal.hard_bytes, Ordering::Relaxed);
        self.obuf_soft_bytes
            .store(s.obuf_normal.soft_bytes, Ordering::Relaxed);
        self.obuf_soft_seconds
            .store(s.obuf_normal.soft_seconds, Ordering::Relaxed);
        self.pubsub_hard_bytes
            .store(s.obuf_pubsub.hard_bytes, Ordering::Relaxed);
        self.pubsub_soft_bytes
            .store(s.obuf_pubsub.soft_bytes, Ordering::Relaxed);
        self.pubsub_soft_seconds
            .store(s.obuf_pubsub.soft_seconds, Ordering::Relaxed);
        self.maxclients.store(s.maxclients, Ordering::Relaxed);
        self.protected_mode
            .store(s.protected_mode, Ordering::Relaxed);
        self.timeout_s.store(s.timeout_s, Ordering::Relaxed);
    }
}

/// Counters the I/O threads keep (summed into INFO by the executor).
#[derive(Default)]
pub struct IoCounters {
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub qbuf_limit_disconnections: AtomicU64,
    pub obuf_limit_disconnections: AtomicU64,
}

struct ThreadHandle {
    inbox: Arc<Mutex<Inbox>>,
    waker: Arc<Waker>,
}

#[derive(Default)]
struct Inbox {
    replies: Vec<ToIo>,
    new_conns: Vec<(Stream, Peer)>,
    shutdown: bool,
}

struct IoConn {
    stream: Stream,
    id: ConnId,
    parser: RequestParser,
    qbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    in_flight: bool,
    close_after_write: bool,
    authenticated: bool,
    last_activity_ms: i64,
    obuf_soft_since_ms: i64,
    /// Registered for writable events (only while output waits on the socket).
    want_writable: bool,
    /// Subscribed (as of the executor's last message): `pubsub` output limits apply.
    pubsub: bool,
    /// A replica (sticky: a connection never stops being one): no limit check here.
    replica: bool,
    /// Large values spliced into `out` by reference (src/server/outq.rs).
    refs: OutRefs,
    /// Big arguments of the command being read, in arena blocks; the last may be filling.
    big_args: Vec<BigArg>,
    /// A block for a big bulk was asked of the executor and has not come yet.
    awaiting_block: bool,
    /// The client's share of `maxmemory-clients` (src/commands/executor/client_memory.rs).
    memory: Arc<ConnMemory>,
    /// Bytes of the batch in flight (its arguments, big ones included): still the
    /// client's while the executor runs it, as Redis counts a command's argv.
    in_flight_bytes: usize,
}

struct IoThread {
    index: usize,
    poll: Poll,
    refusals: TlsRefusals,
    /// Thread 0 accepts every connection; the others have no listeners.
    listeners: Option<SharedListeners>,
    peers: Vec<ThreadHandle>,
    me: ThreadHandle,
    to_exec: SyncSender<ToExecutor>,
    /// Messages that did not fit the executor's channel. Bounded: at `EXECUTOR_QUEUE_LEN`
    /// the thread stops accepting connections and sending batches (their slots wait in
    /// `deferred`; reads go on into query buffers, under their limit) until it drains,
    /// and consecutive release lists merge — so what remains is at most one message per
    /// connection (its close) beyond the bound.
    backlog: VecDeque<ToExecutor>,
    deferred: Vec<usize>,
    accept_paused: bool,
    conns: Vec<Option<IoConn>>,
    free: Vec<usize>,
    by_id: HashMap<ConnId, usize>,
    next_seq: u64,
    next_peer: usize,
    limits: Arc<SharedLimits>,
    counters: Arc<IoCounters>,
    connected: Arc<AtomicUsize>,
    client_memory: Arc<ClientMemory>,
    /// A script's BUSY state: while set, complete commands are answered here
    /// (`ScriptBusy::answer`) instead of waiting for the executor.
    script_busy: Arc<crate::commands::scripting::ScriptBusy>,
    /// Connections whose read stopped at the read budget with data possibly left in the
    /// socket: edge-triggered polling will not report them again, so they are read
    /// again after this turn's events.
    more_to_read: Vec<usize>,
    /// Connections whose write stopped at the budget with the socket still writable
    /// (edge-triggered: no event will come for them).
    more_to_write: Vec<usize>,
    /// `unixsocket`, for the local name of connections accepted on it.
    unix_path: String,
}

impl IoThread {
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut last_cron = Instant::now();
        loop {
            let timeout = if self.backlog.is_empty() {
                Duration::from_millis(100)
            } else {
                Duration::from_millis(1)
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    warning!("I/O thread {} poll: {e}", self.index);
                    return;
                }
            }
            for ev in events.iter() {
                let t = ev.token().0;
                if t == WAKER_TOKEN.0 {
                    continue;
                }
                if t >= LISTENER_TOKEN_BASE {
                    self.accept(t - LISTENER_TOKEN_BASE);
                    continue;
                }
                if self.refusals.owns(t) {
                    self.refusals.on_event(self.poll.registry(), t);
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read(t);
                }
                if ev.is_writable() {
                    self.write(t);
                }
            }
            for slot in std::mem::take(&mut self.more_to_read) {
                self.read(slot);
            }
            for slot in std::mem::take(&mut self.more_to_write) {
                self.write(slot);
            }
            if self.drain_inbox() {
                // Shutdown: flush what we have and stop.
                for slot in 0..self.conns.len() {
                    self.write(slot);
                }
                return;
            }
            self.flush_backlog();
            if last_cron.elapsed() >= Duration::from_millis(100) {
                last_cron = Instant::now();
                self.cron();
            }
        }
    }

    fn accept(&mut self, li: usize) {
        loop {
            if self.backlog_full() {
                // Left in the listen queue; accepted when the backlog drains.
                self.accept_paused = true;
                return;
            }
            let Some(listeners) = self.listeners.as_ref() else {
                return;
            };
            let accepted = listeners.lock().accept(li);
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warning!("Accepting client connection: {e}");
                    return;
                }
            };
            let rules = AdmissionRules {
                protected_mode: self.limits.protected_mode.load(Ordering::Relaxed),
                password_set: !self.limits.default_nopass.load(Ordering::Relaxed),
                maxclients: self.limits.maxclients.load(Ordering::Relaxed),
            };
            let connected = self.connected.load(Ordering::Relaxed);
            if let Some(refusal) = admission_refusal(&rules, connected, peer.ip()) {
                self.counters
                    .rejected_connections
                    .fetch_add(1, Ordering::Relaxed);
                self.refusals.refuse(self.poll.registry(), stream, refusal);
                continue;
            }
            self.counters
                .connections_received
                .fetch_add(1, Ordering::Relaxed);
            self.connected.fetch_add(1, Ordering::Relaxed);
            // Spread connections over the threads round-robin.
            let target = self.next_peer % (self.peers.len() + 1);
            self.next_peer += 1;
            if target == self.index || target > self.peers.len() {
                self.adopt(stream, peer);
            } else {
                let h = &self.peers[if target < self.index {
                    target
                } else {
                    target - 1
                }];
                h.inbox
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .new_conns
                    .push((stream, peer));
                let _ = h.waker.wake();
            }
        }
    }

    fn adopt(&mut self, mut stream: Stream, peer: Peer) {
        stream.set_nodelay();
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if self
            .poll
            .registry()
            .register(&mut stream, Token(slot), Interest::READABLE)
            .is_err()
        {
            self.free.push(slot);
            self.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let id = ((self.index as u64) << 56) | self.next_seq;
        self.next_seq += 1;
        let laddr = stream.local_name(&self.unix_path);
        let unix = stream.is_unix();
        let fd = stream.as_raw_fd();
        let memory = Arc::new(ConnMemory::default());
        self.conns[slot] = Some(IoConn {
            stream,
            id,
            parser: RequestParser::with_big_args(BIG_ARG_BYTES),
            qbuf: Vec::new(),
            out: Vec::new(),
            refs: OutRefs::default(),
            out_pos: 0,
            in_flight: false,
            close_after_write: false,
            authenticated: !self.limits.requirepass_set.load(Ordering::Relaxed),
            last_activity_ms: now_ms(),
            obuf_soft_since_ms: 0,
            want_writable: false,
            pubsub: false,
            replica: false,
            big_args: Vec::new(),
            awaiting_block: false,
            memory: memory.clone(),
            in_flight_bytes: 0,
        });
        self.by_id.insert(id, slot);
        self.send(ToExecutor::Connected {
            conn: id,
            addr: peer.name(),
            laddr,
            unix,
            fd,
            memory,
        });
    }

    /// Measures a connection's buffers for client eviction ([`buffered_bytes`]).
    fn measure_memory(&self, slot: usize) {
        if let Some(conn) = self.conns.get(slot).and_then(|c| c.as_ref()) {
            conn.memory.set_unsent_output(unsent_output_bytes(conn));
            self.client_memory
                .update(&conn.memory, buffered_bytes(conn));
        }
    }

    fn send(&mut self, msg: ToExecutor) {
        if !self.backlog.is_empty() {
            match (self.backlog.back_mut(), msg) {
                (Some(ToExecutor::Release(v)), ToExecutor::Release(b))
                | (Some(ToExecutor::ReleaseArgs(v)), ToExecutor::ReleaseArgs(b)) => v.extend(b),
                (_, m) => self.backlog.push_back(m),
            }
            return;
        }
        match self.to_exec.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) => self.backlog.push_back(m),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn backlog_full(&self) -> bool {
        self.backlog.len() >= EXECUTOR_QUEUE_LEN
    }

    fn flush_backlog(&mut self) {
        while let Some(m) = self.backlog.pop_front() {
            match self.to_exec.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Full(m)) => {
                    self.backlog.push_front(m);
                    break;
                }
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        if self.backlog_full() {
            return;
        }
        // Below the bound again: what waited for it goes on.
        if self.accept_paused {
            self.accept_paused = false;
            // Every slot: an index with no socket accepts nothing.
            for li in 0..LISTENER_SLOTS {
                self.accept(li);
            }
        }
        for slot in std::mem::take(&mut self.deferred) {
            self.dispatch(slot);
        }
    }

    fn read(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        let limit = self
            .limits
            .client_query_buffer_limit
            .load(Ordering::Relaxed) as usize;
        let mut eof = false;
        let mut total = 0;
        loop {
            let want = READ_CHUNK_BYTES.max(
                conn.parser
                    .pending_bulk_bytes(conn.qbuf.len())
                    .min(READ_BUDGET_BYTES),
            );
            let mut inbound = Inbound {
                qbuf: &mut conn.qbuf,
                parser: &mut conn.parser,
                big_args: &mut conn.big_args,
            };
            match inbound.read_once(&mut conn.stream, want, READ_BUDGET_BYTES) {
                ReadStep::Bytes { n, .. } => {
                    total += n;
                    if query_bytes(conn) > limit || total >= READ_BUDGET_BYTES {
                        break;
                    }
                }
                ReadStep::Closed => {
                    eof = true;
                    break;
                }
                ReadStep::WouldBlock => break,
            }
        }
        conn.last_activity_ms = now_ms();
        self.counters
            .net_input_bytes
            .fetch_add(total as u64, Ordering::Relaxed);
        self.counters
            .reads_processed
            .fetch_add(1, Ordering::Relaxed);
        if query_bytes(conn) > limit {
            self.close_over_query_limit(slot);
            return;
        }
        self.dispatch(slot);
        self.measure_memory(slot);
        let backlog = self
            .conns
            .get(slot)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.stream.tls_backlog() && !c.want_writable);
        if eof {
            self.write(slot);
            self.close(slot);
        } else if backlog {
            // TLS handshake records the socket did not take: wait until it can.
            self.write(slot);
        }
        if !eof && total >= READ_BUDGET_BYTES {
            // Edge-triggered: come back for the rest after others had their turn.
            if !self.more_to_read.contains(&slot) {
                self.more_to_read.push(slot);
            }
            let _ = self.me.waker.wake();
        }
    }

    fn close_over_query_limit(&mut self, slot: usize) {
        warning!("Closing client that reached max query buffer length");
        self.counters
            .qbuf_limit_disconnections
            .fetch_add(1, Ordering::Relaxed);
        self.close(slot);
    }

    /// Sends the connection's complete commands to the executor (if none are in flight).
    fn dispatch(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        let filling = conn.big_args.last().is_some_and(|a| a.filled < a.len);
        if conn.in_flight || conn.close_after_write || conn.awaiting_block || filling {
            return;
        }
        if self.backlog.len() >= EXECUTOR_QUEUE_LEN {
            if !self.deferred.contains(&slot) {
                self.deferred.push(slot);
            }
            return;
        }
        let limits = ParseLimits {
            proto_max_bulk_len: self.limits.proto_max_bulk_len.load(Ordering::Relaxed) as i64,
            auth_required: !conn.authenticated,
        };
        let mut batch = Batch {
            conn: conn.id,
            data: Vec::new(),
            args: Vec::new(),
            cmds: Vec::new(),
            error: None,
            big: Vec::new(),
        };
        let mut ask_block = None;
        loop {
            match conn.parser.next(&conn.qbuf, &limits) {
                Parse::BigBulk { len } => {
                    conn.awaiting_block = true;
                    ask_block = Some(len);
                    break;
                }
                Parse::Command => {
                    let src: &[u8] = match conn.parser.source {
                        Some(ArgSource::InlineScratch) => &conn.parser.inline_scratch,
                        _ => &conn.qbuf,
                    };
                    let first = batch.args.len();
                    for &(s, l) in &conn.parser.args {
                        if s & BIG_ARG_FLAG != 0 {
                            batch.args.push((BIG_ARG_FLAG | batch.big.len(), l));
                            batch.big.push(conn.big_args[s & !BIG_ARG_FLAG]);
                            continue;
                        }
                        batch.args.push((batch.data.len(), l));
                        batch.data.extend_from_slice(&src[s..s + l]);
                    }
                    // The blocks now travel with the batch.
                    conn.big_args.clear();
                    batch.cmds.push((first, conn.parser.args.len()));
                    // Before AUTH the limits depend on the executor's answer: one at a time.
                    if !conn.authenticated {
                        break;
                    }
                }
                Parse::Incomplete => break,
                Parse::Error(e) => {
                    batch.error = Some(e);
                    conn.close_after_write = true;
                    break;
                }
            }
        }
        let consumed = conn.parser.consumed();
        if consumed == conn.qbuf.len() {
            conn.qbuf.clear();
        } else if consumed > 0 {
            conn.qbuf.drain(..consumed);
        }
        conn.parser.shift(consumed);
        if conn.qbuf.is_empty() && conn.qbuf.capacity() > 4 * READ_CHUNK_BYTES {
            conn.qbuf = Vec::new();
        }
        let id = conn.id;
        // A script is busy on the executor: this connection's commands are answered here,
        // after its earlier replies (it has no batch in flight), as Redis answers them.
        // Batches the executor must see (a protocol error, big arguments, a client not
        // authenticated yet) wait for it instead.
        let answered_here = !batch.cmds.is_empty()
            && batch.error.is_none()
            && batch.big.is_empty()
            && conn.authenticated
            && self.script_busy.in_busy();
        if answered_here {
            for &(first, argc) in &batch.cmds {
                let argv: Vec<&[u8]> = batch.args[first..first + argc]
                    .iter()
                    .map(|&(s, l)| &batch.data[s..s + l])
                    .collect();
                let reply = self.script_busy.answer(&argv);
                conn.out.extend_from_slice(&reply);
            }
        } else if !batch.cmds.is_empty() || batch.error.is_some() {
            conn.in_flight = true;
            conn.in_flight_bytes =
                batch.data.len() + batch.big.iter().map(|a| a.len).sum::<usize>();
        }
        // Measured before the executor can see the batch, whose commands check the total.
        self.measure_memory(slot);
        if answered_here {
            self.write(slot);
        } else if !batch.cmds.is_empty() || batch.error.is_some() {
            self.send(ToExecutor::Batch(batch));
        }
        if let Some(len) = ask_block {
            self.send(ToExecutor::ArgBlock { conn: id, len });
        }
    }

    /// The executor's block for the big bulk a connection is reading: the bytes already
    /// buffered move into it, the rest is read straight into it.
    fn got_arg_block(&mut self, slot: usize, mut a: BigArg) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        conn.awaiting_block = false;
        let start = conn.parser.data_start();
        let have = (conn.qbuf.len() - start).min(a.len);
        // A copy-before-write snapshot copies out the pages first (see `arena::cow`).
        // SAFETY: the block has `len` bytes; the source is initialised buffer bytes.
        crate::arena::cow::external_write(a.addr, have, || unsafe {
            std::ptr::copy_nonoverlapping(conn.qbuf.as_ptr().add(start), a.addr as *mut u8, have)
        });
        // An arena block written on this I/O thread: marked for a tracking snapshot.
        crate::arena::dirty::mark_written(a.addr, have);
        conn.qbuf.drain(start..start + have);
        a.filled = have;
        conn.big_args.push(a);
        if have == a.len {
            conn.parser.big_bulk_filled(conn.big_args.len() - 1, a.len);
        }
        // Bytes may wait in the socket with no new edge to report them.
        if !self.more_to_read.contains(&slot) {
            self.more_to_read.push(slot);
        }
        self.dispatch(slot);
    }

    fn write(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        // TLS records an earlier write left go before anything new.
        if conn.stream.tls_backlog() {
            match conn.stream.flush() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    self.close(slot);
                    return;
                }
            }
        }
        let mut written = 0;
        let mut done_refs = Vec::new();
        while conn.out_pos < conn.out.len() && written < WRITE_BUDGET_BYTES {
            let end = conn.out.len();
            match conn.refs.write_to(
                &mut conn.stream,
                &conn.out,
                &mut conn.out_pos,
                end,
                WRITE_BUDGET_BYTES - written,
                &mut done_refs,
            ) {
                Ok((0, _)) => break,
                Ok((n, asked)) => {
                    written += n;
                    if n < asked {
                        // The socket buffer is full: wait for a writable event.
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.release(done_refs);
                    self.close(slot);
                    return;
                }
            }
        }
        if !done_refs.is_empty() {
            self.release(done_refs);
        }
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        if written > 0 {
            self.counters
                .net_output_bytes
                .fetch_add(written as u64, Ordering::Relaxed);
            self.counters
                .writes_processed
                .fetch_add(1, Ordering::Relaxed);
        }
        conn.memory.set_unsent_output(unsent_output_bytes(conn));
        self.client_memory
            .update(&conn.memory, buffered_bytes(conn));
        // Writable events only while output is stuck on a full socket buffer.
        let stuck = conn.out_pos < conn.out.len() || conn.stream.tls_backlog();
        if stuck != conn.want_writable {
            let interest = if stuck {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, Token(slot), interest)
                .is_ok()
            {
                conn.want_writable = stuck;
            }
        }
        if conn.out_pos == conn.out.len() {
            conn.out.clear();
            conn.out_pos = 0;
            if conn.out.capacity() > 1 << 20 {
                conn.out = Vec::new();
            }
            if conn.close_after_write && !conn.in_flight {
                self.close(slot);
            }
        } else {
            super::outq::compact_sent(&mut conn.out, &mut conn.out_pos, &mut conn.refs);
            if written >= WRITE_BUDGET_BYTES {
                if !self.more_to_write.contains(&slot) {
                    self.more_to_write.push(slot);
                }
                let _ = self.me.waker.wake();
            }
        }
    }

    /// Hands blocks back to the executor for unpinning.
    fn release(&mut self, blocks: Vec<Ref>) {
        if !blocks.is_empty() {
            self.send(ToExecutor::Release(blocks));
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            // Unsent references go with the client.
            let blocks = conn.refs.take_all();
            self.release(blocks);
            let args: Vec<Ref> = conn.big_args.drain(..).map(|a| a.block).collect();
            if !args.is_empty() {
                self.send(ToExecutor::ReleaseArgs(args));
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.client_memory.forget(&conn.memory);
            self.by_id.remove(&conn.id);
            self.free.push(slot);
            self.connected.fetch_sub(1, Ordering::Relaxed);
            self.send(ToExecutor::Closed { conn: conn.id });
        }
    }

    /// Applies the executor's replies and new connections. True on shutdown.
    fn drain_inbox(&mut self) -> bool {
        let (replies, new_conns, shutdown) = {
            let mut inbox = self.me.inbox.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut inbox.replies),
                std::mem::take(&mut inbox.new_conns),
                inbox.shutdown,
            )
        };
        for (stream, peer) in new_conns {
            self.adopt(stream, peer);
        }
        for r in replies {
            let Some(conn) = self
                .by_id
                .get(&r.conn)
                .and_then(|&slot| self.conns[slot].as_mut())
            else {
                // The connection is gone: its references go back at once.
                self.release(r.refs.iter().map(|x| x.block).collect());
                if let Some(ArgBlockAnswer::Block(a)) = r.arg_block {
                    self.send(ToExecutor::ReleaseArgs(vec![a.block]));
                }
                continue;
            };
            let slot = self.by_id[&r.conn];
            match r.arg_block {
                Some(ArgBlockAnswer::Block(a)) => {
                    self.got_arg_block(slot, a);
                    continue;
                }
                Some(ArgBlockAnswer::Declined) => {
                    conn.awaiting_block = false;
                    conn.parser.decline_big_bulk();
                    // Bytes may wait in the socket with no new edge to report them.
                    if !self.more_to_read.contains(&slot) {
                        self.more_to_read.push(slot);
                    }
                    continue;
                }
                None => {}
            }
            if r.evicted {
                // Freed at once, as Redis frees an evicted client: unsent output goes too.
                self.close(slot);
                continue;
            }
            conn.pubsub = r.pubsub;
            conn.replica |= r.replica;
            if r.push_only && r.close {
                // The executor found the client over its pub/sub output limit.
                self.counters
                    .obuf_limit_disconnections
                    .fetch_add(1, Ordering::Relaxed);
                warning!(
                    "Client scheduled to be closed ASAP for overcoming of output buffer limits."
                );
                self.close(slot);
                continue;
            }
            if !r.push_only {
                conn.in_flight = false;
                conn.in_flight_bytes = 0;
                conn.authenticated = r.authenticated;
            }
            if conn.out.is_empty() {
                conn.out = r.out;
                conn.out_pos = 0;
                conn.refs.extend(r.refs);
            } else {
                let base = conn.out.len();
                conn.out.extend_from_slice(&r.out);
                conn.refs
                    .extend(r.refs.into_iter().map(|x| x.shifted(base)));
            }
            if r.close {
                conn.close_after_write = true;
            }
            if self.obuf_over_limit(slot) {
                self.close(slot);
                continue;
            }
            self.write(slot);
            // Commands that arrived meanwhile go next.
            if !r.push_only && self.conns[slot].is_some() {
                self.dispatch(slot);
            }
        }
        // Connections whose budgeted reads or writes left work behind.
        for slot in 0..self.conns.len() {
            if let Some(c) = self.conns[slot].as_ref() {
                if c.out_pos < c.out.len() {
                    self.write(slot);
                }
            }
        }
        shutdown
    }

    fn obuf_over_limit(&mut self, slot: usize) -> bool {
        let Some(conn) = self.conns[slot].as_mut() else {
            return false;
        };
        if conn.replica {
            return false;
        }
        let pending = unsent_output_bytes(conn);
        let l = &self.limits;
        let (hard, soft, secs) = if conn.pubsub {
            (
                l.pubsub_hard_bytes.load(Ordering::Relaxed),
                l.pubsub_soft_bytes.load(Ordering::Relaxed),
                l.pubsub_soft_seconds.load(Ordering::Relaxed) as i64,
            )
        } else {
            (
                l.obuf_hard_bytes.load(Ordering::Relaxed),
                l.obuf_soft_bytes.load(Ordering::Relaxed),
                l.obuf_soft_seconds.load(Ordering::Relaxed) as i64,
            )
        };
        let now = now_ms();
        let mut over = hard > 0 && pending >= hard;
        if soft > 0 && pending >= soft {
            if conn.obuf_soft_since_ms == 0 {
                conn.obuf_soft_since_ms = now;
            } else if now - conn.obuf_soft_since_ms >= secs * 1000 {
                over = true;
            }
        } else {
            conn.obuf_soft_since_ms = 0;
        }
        if over {
            self.counters
                .obuf_limit_disconnections
                .fetch_add(1, Ordering::Relaxed);
            warning!("Client scheduled to be closed ASAP for overcoming of output buffer limits.");
        }
        over
    }

    fn cron(&mut self) {
        self.refusals.expire(self.poll.registry());
        let timeout_ms = self.limits.timeout_s.load(Ordering::Relaxed) as i64 * 1000;
        let now = now_ms();
        for slot in 0..self.conns.len() {
            if self.conns[slot]
                .as_mut()
                .is_some_and(|c| c.stream.handshake_overdue())
            {
                self.close(slot);
                continue;
            }
            let idle = match self.conns[slot].as_ref() {
                // Subscribers are never closed for idleness, as in Redis.
                Some(c) => {
                    !c.in_flight
                        && !c.pubsub
                        && timeout_ms > 0
                        && now - c.last_activity_ms > timeout_ms
                }
                None => continue,
            };
            if idle || self.obuf_over_limit(slot) {
                verbose!("Closing client (timeout or output buffer limit)");
                self.close(slot);
            }
        }
    }
}

/// Runs the server with `n` I/O threads; this thread becomes the executor.
pub fn serve_threaded(mut srv: Server, n: usize) -> io::Result<()> {
    let s = srv.config.settings().clone();
    let mut listeners = Some(bind_listeners(&s.bind, s.port)?);
    let mut tls = bind_tls(&srv.config)?;
    let mut unix = bind_unix(&s.unixsocket, s.unixsocketperm)?.map(|l| (l, s.unixsocket.clone()));
    if let Some(a) = listeners
        .iter()
        .flatten()
        .next()
        .and_then(|l| l.local_addr().ok())
    {
        srv.tcp_port = a.port();
    }
    let limits = Arc::new(SharedLimits::default());
    limits.refresh(&srv);
    let counters = Arc::new(IoCounters::default());
    let connected = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::sync_channel::<ToExecutor>(EXECUTOR_QUEUE_LEN);
    let mut polls = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..n {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER_TOKEN)?);
        handles.push(ThreadHandle {
            inbox: Arc::new(Mutex::new(Inbox::default())),
            waker,
        });
        polls.push(poll);
    }
    let mut joins = Vec::new();
    for (i, poll) in polls.into_iter().enumerate() {
        let my_listeners = match listeners.take() {
            Some(sockets) => {
                let set = SharedListeners::new(
                    poll.registry(),
                    LISTENER_TOKEN_BASE,
                    sockets,
                    tls.take(),
                    unix.take(),
                )?;
                srv.listeners = Some(std::sync::Arc::new(set.clone()));
                Some(set)
            }
            None => None,
        };
        let peers = handles
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, h)| ThreadHandle {
                inbox: h.inbox.clone(),
                waker: h.waker.clone(),
            })
            .collect();
        let t = IoThread {
            index: i,
            poll,
            refusals: TlsRefusals::new(REFUSAL_TOKEN_BASE),
            listeners: my_listeners,
            peers,
            me: ThreadHandle {
                inbox: handles[i].inbox.clone(),
                waker: handles[i].waker.clone(),
            },
            to_exec: tx.clone(),
            backlog: VecDeque::new(),
            deferred: Vec::new(),
            accept_paused: false,
            conns: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            next_seq: 1,
            next_peer: 0,
            limits: limits.clone(),
            counters: counters.clone(),
            connected: connected.clone(),
            client_memory: srv.client_memory.clone(),
            script_busy: srv.scripts.busy.clone(),
            more_to_read: Vec::new(),
            more_to_write: Vec::new(),
            unix_path: s.unixsocket.clone(),
        };
        joins.push(
            std::thread::Builder::new()
                .name(format!("cairn-io-{i}"))
                .spawn(move || t.run())?,
        );
    }
    let wake_tx = tx.clone();
    srv.aof.set_waker(Arc::new(move || {
        let _ = wake_tx.try_send(ToExecutor::AofDurable);
    }));
    drop(tx);
    notice!("Server initialized with {n} I/O threads");
    notice!("Ready to accept connections tcp");
    if s.tls_port != 0 {
        notice!("Ready to accept connections tls");
    }
    if !s.unixsocket.is_empty() {
        notice!("Ready to accept connections unix");
    }
    executor_loop(&mut srv, &rx, &handles, &limits, &counters);
    for h in &handles {
        h.inbox.lock().unwrap_or_else(|e| e.into_inner()).shutdown = true;
        let _ = h.waker.wake();
    }
    for j in joins {
        let _ = j.join();
    }
    super::listeners::remove_unix_socket(&s.unixsocket);
    notice!("cairn is now ready to exit, bye bye...");
    Ok(())
}

fn executor_loop(
    srv: &mut Server,
    rx: &Receiver<ToExecutor>,
    threads: &[ThreadHandle],
    limits: &SharedLimits,
    counters: &IoCounters,
) {
    let mut slots: HashMap<ConnId, usize> = HashMap::new();
    let mut free: Vec<usize> = Vec::new();
    let mut outgoing: Vec<Vec<ToIo>> = (0..threads.len()).map(|_| Vec::new()).collect();
    // `appendfsync always`: a batch's replies wait here until the log is durable up to
    // the highest LSN its commands wrote or read (LSN, thread, reply).
    let mut held: Vec<(u64, usize, ToIo)> = Vec::new();
    // Batches stopped at a blocked command, by client slot: they stay in flight (the I/O
    // thread sends nothing more for the connection) until the command is served.
    let mut parked: HashMap<usize, InFlight> = HashMap::new();
    let mut next_cron = Instant::now();
    // `latency-trace-file`: this loop's turns (src/server/latency_trace.rs).
    let mut trace: Option<LatencyTrace> = None;
    loop {
        let hz = srv.config.settings().hz.max(1) as u64;
        if Instant::now() >= next_cron {
            srv.cron();
            if let Some(t) = trace.as_mut() {
                t.ship();
            }
            limits.refresh(srv);
            next_cron = Instant::now() + Duration::from_millis(1000 / hz);
        }
        if SHUTDOWN_SIGNAL.load(Ordering::SeqCst) {
            srv.shutdown
                .get_or_insert(crate::commands::executor::ShutdownRequest::Default);
        }
        if let Some(req) = srv.shutdown {
            if srv.shutdown_save(req).is_err() {
                warning!(
                    "Errors trying to shut down the server, check the logs for more information"
                );
                srv.shutdown = None;
                SHUTDOWN_SIGNAL.store(false, Ordering::SeqCst);
                continue;
            }
            return;
        }
        let wait = if srv.ks.lazyfree_pending > 0 {
            Duration::ZERO
        } else {
            let mut t = next_cron.saturating_duration_since(Instant::now());
            // Wake no later than the first blocked client's deadline.
            if let Some(d) = srv.blocking.next_deadline_ms() {
                t = t.min(Duration::from_millis((d - now_ms()).max(0) as u64));
            }
            t
        };
        // Waiting for a batch touches no arena memory: a snapshot's final pause may run.
        srv.snapshot_idle_begin();
        let wait_start = Instant::now();
        let received = rx.recv_timeout(wait);
        srv.snapshot_idle_end();
        let cmds_before = srv.stats.total_commands_processed;
        if let Some(t) = trace.as_mut() {
            t.begin(wait_start.elapsed().as_micros() as u64);
        }
        let first = match received {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut handled = 0;
        let mut msg = first;
        while let Some(m) = msg {
            handle_message(
                srv,
                m,
                &mut slots,
                &mut free,
                &mut outgoing,
                &mut held,
                &mut parked,
            );
            handled += 1;
            if handled >= EXECUTOR_QUEUE_LEN || srv.shutdown.is_some() {
                break;
            }
            msg = rx.try_recv().ok();
        }
        // Blocked clients served, timed out or unblocked: their batches go on.
        srv.expire_blocked(now_ms());
        while !srv.blocking.unblocked.is_empty() {
            for u in std::mem::take(&mut srv.blocking.unblocked) {
                let same = srv.clients[u.slot]
                    .as_ref()
                    .is_some_and(|c| c.id == u.client_id);
                let Some(mut st) = parked.remove(&u.slot).filter(|_| same) else {
                    srv.release_refs(u.refs);
                    continue;
                };
                let base = st.out.len();
                st.out.extend_from_slice(&u.out);
                st.refs.extend(u.refs.into_iter().map(|mut r| {
                    r.pos += base;
                    r
                }));
                st.hold = st.hold.max(u.hold_lsn);
                run_in_flight(srv, u.slot, st, &mut outgoing, &mut held, &mut parked);
            }
        }
        // Hand this turn's log entries to the AOF writer (group commit), then release the
        // replies the log now covers. After a sticky AOF error they never will be: those
        // connections are closed (their outcome is unknown, as after a crash).
        srv.aof.flush();
        crate::commands::executor::aof_hooks::release_log_pins(srv);
        if !held.is_empty() {
            let durable = srv.aof.release_lsn();
            let failed = srv.aof.failed();
            let mut i = 0;
            while i < held.len() {
                if held[i].0 <= durable {
                    let (_, t, r) = held.swap_remove(i);
                    outgoing[t].push(r);
                } else if failed {
                    let (_, t, mut r) = held.swap_remove(i);
                    r.out.clear();
                    srv.release_refs(r.refs.drain(..));
                    r.close = true;
                    outgoing[t].push(r);
                } else {
                    i += 1;
                }
            }
        }
        srv.tracking_end_of_turn();
        // The stream to replicas, a full sync's progress, the link to our primary: as the
        // single-threaded loop does at each turn's end (their bytes go out as pushes).
        srv.repl_end_of_turn();
        ship_pushes(srv, &mut outgoing, &mut held);
        // As Redis's beforeSleep: buffers that grew meanwhile may call for evictions.
        srv.evict_clients(None);
        // Kills requested by CLIENT KILL (and evictions) go to the owning threads as close
        // requests.
        for client_id in std::mem::take(&mut srv.kill_queue) {
            let Some((id, evicted)) = srv
                .clients
                .iter()
                .flatten()
                .find(|c| c.id == client_id)
                .map(|c| (c.conn_id, c.evicted))
            else {
                continue;
            };
            let t = (id >> 56) as usize;
            if t < outgoing.len() {
                outgoing[t].push(ToIo {
                    conn: id,
                    out: Vec::new(),
                    refs: Vec::new(),
                    close: true,
                    authenticated: true,
                    push_only: false,
                    pubsub: false,
                    replica: false,
                    arg_block: None,
                    evicted,
                });
            }
        }
        // Before the replies go: a client that saw CONFIG SET's OK finds the new limits
        // applied to its next connection.
        limits.refresh(srv);
        for (t, replies) in outgoing.iter_mut().enumerate() {
            if replies.is_empty() {
                continue;
            }
            if let Some(tr) = trace.as_mut() {
                tr.cur.replies_queued += replies.len() as u32;
                tr.cur.ref_replies_queued +=
                    replies.iter().filter(|r| !r.refs.is_empty()).count() as u32;
            }
            let h = &threads[t];
            let mut inbox = h.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.replies.append(replies);
            if let Some(tr) = trace.as_mut() {
                // Replies the I/O thread has not taken yet, this turn's included.
                tr.cur.io_queue_depth += inbox.replies.len() as u32;
            }
            drop(inbox);
            let _ = h.waker.wake();
        }
        if srv.ks.lazyfree_pending > 0 {
            srv.lazyfree_slice(Duration::from_micros(500));
        }
        // Every turn, so INFO after a connection's first reply already counts it.
        sync_counters(&mut srv.stats, counters);
        if let Some(t) = trace.as_mut() {
            t.cur.events = handled as u32;
            t.cur.commands = (srv.stats.total_commands_processed - cmds_before) as u32;
            t.end();
        }
        // Every turn (one comparison while off): see the single loop.
        let path = &srv.config.settings().latency_trace_file;
        if trace.as_ref().map_or("", |t| t.path()) != path {
            LatencyTrace::follow_config(&mut trace, path);
        }
    }
}

/// A batch being run: the commands left, and the reply so far.
struct InFlight {
    b: Batch,
    next: usize,
    out: Vec<u8>,
    refs: Vec<RefSeg>,
    hold: u64,
}

/// Runs a batch's remaining commands. A command that blocks parks the batch (the reply
/// so far stays with it); otherwise the whole reply goes to the I/O thread.
fn run_in_flight(
    srv: &mut Server,
    slot: usize,
    mut st: InFlight,
    outgoing: &mut [Vec<ToIo>],
    held: &mut Vec<(u64, usize, ToIo)>,
    parked: &mut HashMap<usize, InFlight>,
) {
    let Some(mut client) = srv.clients[slot].take() else {
        srv.release_refs(st.refs);
        for a in &st.b.big {
            srv.ks.release_arg_block(a.block);
        }
        return;
    };
    srv.begin_batch();
    while st.next < st.b.cmds.len() {
        if client.close_after_reply || srv.shutdown.is_some() {
            break;
        }
        let (first, argc) = st.b.cmds[st.next];
        st.next += 1;
        // SAFETY: `st.b.big` are arena blocks the executor gave this batch's connection
        // (`try_alloc_arg_block`: allocated and pinned until released after the batch),
        // sent here only once received whole; the I/O thread no longer writes them.
        let args =
            unsafe { Args::with_big(&st.b.data, &st.b.args[first..first + argc], &st.b.big) };
        srv.execute_refs(&mut client, args, &mut st.out, &mut st.refs);
        st.hold = st.hold.max(srv.aof.hold_lsn);
        if client.blocked {
            // The replies before the blocked command go out now (the batch stays in
            // flight: `push_only`). Under `appendfsync always` with a held LSN they wait
            // and leave with the rest, so the output keeps its order.
            let t = (st.b.conn >> 56) as usize;
            if !st.out.is_empty() && st.hold == 0 && t < outgoing.len() {
                outgoing[t].push(ToIo {
                    conn: st.b.conn,
                    out: std::mem::take(&mut st.out),
                    refs: std::mem::take(&mut st.refs),
                    close: false,
                    authenticated: client.authenticated || srv.acl.default_needs_no_auth(),
                    push_only: true,
                    pubsub: client.is_pubsub(),
                    replica: client.replica,
                    arg_block: None,
                    evicted: false,
                });
            }
            srv.clients[slot] = Some(client);
            parked.insert(slot, st);
            return;
        }
    }
    let InFlight {
        b,
        mut out,
        mut refs,
        hold,
        ..
    } = st;
    // Argument blocks go unless a value adopted them.
    for a in &b.big {
        srv.ks.release_arg_block(a.block);
    }
    if let Some(e) = &b.error {
        out.extend_from_slice(b"-ERR ");
        out.extend_from_slice(e.as_bytes());
        out.extend_from_slice(b"\r\n");
        client.close_after_reply = true;
    }
    if client.http_guard_close {
        // The HTTP guard: Redis sends nothing more to such a connection.
        out.clear();
        srv.release_refs(refs.drain(..));
    }
    let t = (b.conn >> 56) as usize;
    let reply = ToIo {
        conn: b.conn,
        out,
        refs,
        close: client.close_after_reply,
        authenticated: client.authenticated || srv.acl.default_needs_no_auth(),
        push_only: false,
        pubsub: client.is_pubsub(),
        replica: client.replica,
        arg_block: None,
        evicted: false,
    };
    if hold > 0 {
        held.push((hold, t, reply));
    } else if t < outgoing.len() {
        outgoing[t].push(reply);
    }
    srv.clients[slot] = Some(client);
}

fn handle_message(
    srv: &mut Server,
    m: ToExecutor,
    slots: &mut HashMap<ConnId, usize>,
    free: &mut Vec<usize>,
    outgoing: &mut [Vec<ToIo>],
    held: &mut Vec<(u64, usize, ToIo)>,
    parked: &mut HashMap<usize, InFlight>,
) {
    match m {
        ToExecutor::AofDurable => {}
        ToExecutor::Release(blocks) => {
            for b in blocks {
                srv.ks.unpin(b);
            }
        }
        ToExecutor::ReleaseArgs(blocks) => {
            for b in blocks {
                srv.ks.release_arg_block(b);
            }
        }
        ToExecutor::ArgBlock { conn, len } => {
            let answer = match srv.try_alloc_arg_block(len) {
                Some((block, addr)) => ArgBlockAnswer::Block(BigArg {
                    block,
                    addr: addr as usize,
                    len,
                    filled: 0,
                }),
                None => ArgBlockAnswer::Declined,
            };
            let pubsub = slots
                .get(&conn)
                .and_then(|&s| srv.clients[s].as_ref())
                .is_some_and(|c| c.is_pubsub());
            outgoing[(conn >> 56) as usize].push(ToIo {
                conn,
                out: Vec::new(),
                refs: Vec::new(),
                close: false,
                authenticated: true,
                push_only: true,
                pubsub,
                replica: false,
                arg_block: Some(answer),
                evicted: false,
            });
        }
        ToExecutor::Connected {
            conn,
            addr,
            laddr,
            unix,
            fd,
            memory,
        } => {
            let mut client = srv.alloc_client(addr, laddr);
            client.unix_socket = unix;
            client.conn_id = conn;
            client.fd = fd;
            client.memory = memory;
            let slot = free.pop().unwrap_or_else(|| {
                srv.clients.push(None);
                srv.clients.len() - 1
            });
            client.slot = slot;
            srv.clients[slot] = Some(client);
            slots.insert(conn, slot);
        }
        ToExecutor::Closed { conn } => {
            if let Some(slot) = slots.remove(&conn) {
                if let Some(st) = parked.remove(&slot) {
                    srv.release_refs(st.refs);
                    for a in &st.b.big {
                        srv.ks.release_arg_block(a.block);
                    }
                }
                if let Some(mut c) = srv.clients[slot].take() {
                    crate::commands::pubsub::unsubscribe_all(srv, &mut c);
                    srv.forget_client(&mut c);
                }
                free.push(slot);
            }
        }
        ToExecutor::Batch(b) => {
            let client = slots
                .get(&b.conn)
                .and_then(|&s| srv.clients[s].as_mut().map(|c| (s, c)));
            let Some((slot, client)) = client else {
                for a in &b.big {
                    srv.ks.release_arg_block(a.block);
                }
                return;
            };
            // Messages pushed to this client before these commands precede their replies.
            let out = std::mem::take(&mut client.pushed);
            let st = InFlight {
                b,
                next: 0,
                out,
                refs: Vec::new(),
                hold: 0,
            };
            run_in_flight(srv, slot, st, outgoing, held, parked);
        }
    }
}

/// Sends the pub/sub messages pushed this turn to the owning I/O threads. A client whose
/// batch reply is held for the AOF gets them appended to that reply (its output stays in
/// order; the batch is still in flight so nothing else can come between). A client that
/// went over its output limit is closed by its thread.
fn ship_pushes(srv: &mut Server, outgoing: &mut [Vec<ToIo>], held: &mut [(u64, usize, ToIo)]) {
    if srv.pubsub.pending.is_empty() {
        return;
    }
    for slot in std::mem::take(&mut srv.pubsub.pending) {
        let Some(c) = srv.clients.get_mut(slot).and_then(|c| c.as_mut()) else {
            continue;
        };
        c.in_pending = false;
        if c.pushed.is_empty() && !c.close_asap {
            continue;
        }
        let t = (c.conn_id >> 56) as usize;
        if t >= outgoing.len() {
            continue;
        }
        if c.replica {
            // The I/O thread does not know a replica from a client: the replication
            // stream and payload are counted here, as they leave the executor.
            srv.stats.net_repl_output_bytes += c.pushed.len() as u64;
        }
        if !c.close_asap {
            if let Some(h) = held.iter_mut().rev().find(|h| h.2.conn == c.conn_id) {
                h.2.out.extend_from_slice(&c.pushed);
                c.pushed.clear();
                continue;
            }
        }
        outgoing[t].push(ToIo {
            conn: c.conn_id,
            out: std::mem::take(&mut c.pushed),
            refs: Vec::new(),
            close: c.close_asap,
            authenticated: true,
            push_only: true,
            pubsub: c.is_pubsub(),
            replica: c.replica,
            arg_block: None,
            evicted: false,
        });
    }
}

fn sync_counters(stats: &mut Stats, c: &IoCounters) {
    stats.net_input_bytes = c.net_input_bytes.load(Ordering::Relaxed);
    stats.net_output_bytes = c.net_output_bytes.load(Ordering::Relaxed);
    stats.io_threaded_reads_processed = c.reads_processed.load(Ordering::Relaxed);
    stats.io_threaded_writes_processed = c.writes_processed.load(Ordering::Relaxed);
    stats.total_connections_received = c.connections_received.load(Ordering::Relaxed);
    stats.rejected_connections = c.rejected_connections.load(Ordering::Relaxed);
    stats.client_query_buffer_limit_disconnections =
        c.qbuf_limit_disconnections.load(Ordering::Relaxed);
    stats.client_output_buffer_limit_disconnections =
        c.obuf_limit_disconnections.load(Ordering::Relaxed);
}

/// Bytes a connection holds of requests not yet turned into complete arguments, plus its
/// big arguments (compared with `client-query-buffer-limit`).
fn query_bytes(conn: &IoConn) -> usize {
    conn.qbuf.len() + conn.big_args.iter().map(|a| a.filled).sum::<usize>()
}

/// What a connection's buffers hold, for client eviction: its query bytes, the batch the
/// executor has of it, and the output not yet written (referenced values included).
fn buffered_bytes(conn: &IoConn) -> u64 {
    (query_bytes(conn) + conn.in_flight_bytes) as u64 + unsent_output_bytes(conn)
}

/// The output not yet written, referenced values included.
fn unsent_output_bytes(conn: &IoConn) -> u64 {
    (conn.out.len() - conn.out_pos) as u64 + conn.refs.pending_bytes()
}
