//! The socket side: accept, read, parse, execute, write, on mio (epoll, edge-triggered).
//!
//! With `io-threads 1` (the default) the executor thread runs this loop itself, as Redis
//! does. Limits enforced here: `maxclients` and protected mode (through
//! [`admission_refusal`], as the I/O threads do), `client-query-buffer-limit`,
//! `proto-max-bulk-len` (through the parser), `client-output-buffer-limit`, `timeout`;
//! the buffers `maxmemory-clients` limits are measured here.

use super::connection::{Inbound, ReadStep};
use super::latency_trace::{us_since, LatencyTrace};
use super::listeners::{
    admission_refusal, bind_listeners, bind_tls, bind_unix, AdmissionRules, SharedListeners,
    TlsListen, LISTENER_SLOTS,
};
use super::outq::OutRefs;
use super::stream::Stream;
use super::tls_refusal::{TlsRefusals, REFUSAL_SLOTS};
use crate::commands::executor::client_memory::ConnMemory;
use crate::commands::executor::{BusyLoop, Server};
use crate::commands::Args;
use crate::protocol::parser::{ArgSource, BigArg, Parse, ParseLimits, RequestParser};
use crate::util::now_ms;
use crate::{notice, verbose, warning};
use mio::net::{TcpListener, TcpStream, UnixListener};
use mio::{Events, Interest, Poll, Token};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes an I/O thread reads from one connection before its others get a turn, while a
/// big argument is being received.
pub const READ_BUDGET_BYTES: usize = 1 << 20;
/// The same on the single event loop (`io-threads 1`), where every byte read is a
/// `copy_to_user` on the executor: 256 KiB, as the write budget, so a 10 MB argument
/// arrives over ~40 turns of ~50 µs with every other connection's commands run between
/// them, rather than over ~10 turns of 1 MiB (ARCHITECTURE.md "Event loop: spinning and
/// budgets").
pub const BIG_ARG_READ_TURN_BYTES: usize = 256 << 10;
/// The same for ordinary commands: one chunk, as Redis reads one PROTO_IOBUF_LEN per
/// event. A client with a backlog (an open-loop load that fell behind, a deep pipeline)
/// then gets its commands run a chunk per turn, interleaved with everyone else's, instead
/// of holding the executor for all of them while every other client waits (figures:
/// BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "Read budget").
pub const READ_TURN_BYTES: usize = READ_CHUNK_BYTES;
/// Smallest read into the query buffer (Redis's PROTO_IOBUF_LEN).
pub const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Request arguments at least this long that are not yet buffered are read straight into
/// an arena block (the value a SET stores adopts it: no copy on the executor).
pub const BIG_ARG_BYTES: usize = 64 * 1024;
/// Bytes written to one connection per loop iteration before others get a turn.
pub const WRITE_BUDGET_BYTES: usize = 256 << 10;
/// Poll tokens below this are listening sockets'; a connection's is its slot + this.
const LISTENER_TOKENS: usize = LISTENER_SLOTS;
/// The AOF writer wakes the loop through this token when the log became durable.
const WAKER_TOKEN: Token = Token(usize::MAX - 1);
/// The eventfd the executor's AOF ring rings when one of its fsyncs completes.
const AOF_SYNC_TOKEN: Token = Token(usize::MAX - 2);
/// The eventfd the executor's tier read ring rings when one of its reads completes.
const TIER_READ_TOKEN: Token = Token(usize::MAX - 3);
/// Refused TLS connections waiting for their handshake (`tls_refusal.rs`): the tokens
/// just below the tier ring's.
const REFUSAL_TOKEN_BASE: usize = TIER_READ_TOKEN.0 - REFUSAL_SLOTS;
const EVENTS_CAPACITY: usize = 1024;

pub static SHUTDOWN_SIGNAL: AtomicBool = AtomicBool::new(false);
pub static SIGNAL_NUMBER: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL_NUMBER.store(sig as u32, Ordering::SeqCst);
    SHUTDOWN_SIGNAL.store(true, Ordering::SeqCst);
}

/// SIGTERM/SIGINT request a clean shutdown; SIGPIPE is ignored (errors come back as EPIPE).
pub fn install_signal_handlers() {
    // SAFETY: the handler only stores to atomics, which is async-signal-safe.
    unsafe {
        let handler: extern "C" fn(libc::c_int) = on_signal;
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

pub struct Conn {
    stream: Stream,
    parser: RequestParser,
    qbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    /// Read budget ran out with data possibly left in the socket.
    more_to_read: bool,
    closing: bool,
    /// Registered for writable events (only while output is waiting on the socket).
    want_writable: bool,
    /// `appendfsync always`: (offset in `out`, LSN) — bytes from that offset on wait
    /// until the log is durable up to that LSN. LSNs rise along the queue.
    holds: VecDeque<(usize, u64)>,
    in_held_list: bool,
    /// Large values spliced into `out` by reference (src/server/outq.rs).
    refs: OutRefs,
    /// Big arguments of the command being read, each in its own arena block; the last
    /// one may still be filling (see [`Parse::BigBulk`]).
    big_args: Vec<BigArg>,
    /// The client's share of `maxmemory-clients` (src/commands/executor/client_memory.rs).
    memory: Arc<ConnMemory>,
    /// The most output bytes waiting in `out` since `out_peak_since_ms` (CLIENT LIST
    /// `rbp`; restarted every `OUT_PEAK_RESET_MS`, as Redis's reply buffer peak).
    out_peak_bytes: usize,
    out_peak_since_ms: i64,
}

/// How long an output peak is remembered (Redis's reply buffer peak reset time).
const OUT_PEAK_RESET_MS: i64 = 5000;

impl Conn {
    /// What the buffers hold, for client eviction: the query bytes not yet run (big
    /// arguments included) and the output not yet sent (referenced values included).
    fn buffered_bytes(&self) -> u64 {
        let query = self.qbuf.len() + self.big_args.iter().map(|a| a.filled).sum::<usize>();
        (query + self.out.len() - self.out_pos) as u64 + self.refs.pending_bytes()
    }

    /// Hands the buffers' figures to the executor's client (CLIENT LIST, INFO clients).
    /// `running`: the client's commands are about to run (its query buffer shows them
    /// whole, as Redis's does while they run); otherwise only the bytes not yet parsed
    /// into arguments count, as Redis's trimmed query buffer.
    fn figures(
        &mut self,
        client: &mut crate::commands::executor::Client,
        now_ms: i64,
        running: bool,
    ) {
        let owned = self.out.len() - self.out_pos;
        if now_ms - self.out_peak_since_ms >= OUT_PEAK_RESET_MS {
            self.out_peak_bytes = owned;
            self.out_peak_since_ms = now_ms;
        }
        self.out_peak_bytes = self.out_peak_bytes.max(owned);
        client.qbuf_bytes = if running {
            self.qbuf.len()
        } else {
            self.parser.unparsed_bytes(self.qbuf.len())
        } as u64;
        client.obuf_bytes = owned as u64 + self.refs.pending_bytes();
        client.bufs = crate::commands::executor::client::BufFigures {
            qbuf_capacity_bytes: self.qbuf.capacity() as u64,
            out_capacity_bytes: self.out.capacity() as u64,
            out_peak_bytes: self.out_peak_bytes as u64,
            out_owned_bytes: owned as u64,
            out_refs: self.refs.len() as u64,
            // A half-read command's arguments parsed so far (Redis's argv of a client
            // waiting for the rest of its command).
            parsed_arg_bytes: if running || !self.parser.in_command() {
                0
            } else {
                self.parser.args.iter().map(|a| a.1 as u64).sum::<u64>()
                    + self
                        .big_args
                        .iter()
                        .filter(|a| a.filled == a.len)
                        .map(|a| a.len as u64)
                        .sum::<u64>()
            },
        };
    }

    fn measure_memory(&self, srv: &Server) {
        srv.client_memory
            .update(&self.memory, self.buffered_bytes());
    }

    /// End of the bytes that may be sent now (drops satisfied holds).
    fn sendable_end(&mut self, durable_lsn: u64) -> usize {
        while self.holds.front().is_some_and(|h| h.1 <= durable_lsn) {
            self.holds.pop_front();
        }
        self.holds.front().map_or(self.out.len(), |h| h.0)
    }
}

/// Redis's processEventsWhileBlocked for a busy script (`io-threads 1`), called from
/// the script's VM hook every few milliseconds: accepts new connections, reads what
/// clients sent and runs it through the pipeline, which refuses it with `-BUSY`
/// (except the `allow-busy` commands: SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE,
/// MULTI...), then sends the replies. The client running the script is not read;
/// what it sends waits. With I/O threads there is no loop here: they answer.
fn serve_while_busy(srv: &mut Server, state: std::ptr::NonNull<()>) {
    // What the script's command has under way and the served commands would change.
    let saved_hold = srv.aof.hold_lsn;
    let saved_tracking = srv.ks.tracking.current;
    let saved_expiry_held = srv.ks.expiry_held;
    let saved_deny = std::mem::replace(&mut srv.blocking.deny, false);
    // Keys the script made ready are served after it, not in the middle of it.
    let saved_serving = std::mem::replace(&mut srv.blocking.serving, true);
    // SAFETY: `state` was made from the loop's `&mut self` by `EventLoop::process` (after
    // it took the running connection and the batch out) or by the turn around
    // `expire_blocked`; neither touches the loop until the commands have run and it has
    // put `busy_loop` back: nothing else borrows the loop now, on this thread (the only
    // one that runs it).
    let el = unsafe { &mut *state.cast::<EventLoop>().as_ptr() };
    el.serve_busy(srv);
    srv.aof.hold_lsn = saved_hold;
    srv.ks.tracking.current = saved_tracking;
    srv.ks.expiry_held = saved_expiry_held;
    srv.blocking.deny = saved_deny;
    srv.blocking.serving = saved_serving;
}

pub struct EventLoop {
    poll: Poll,
    refusals: TlsRefusals,
    listeners: SharedListeners,
    /// Boxed: a connection is taken out of its slot for every batch it runs, and moving
    /// the pointer costs nothing where moving the struct is a copy of hundreds of bytes.
    conns: Vec<Option<Box<Conn>>>,
    free_slots: Vec<usize>,
    connected: usize,
    /// Connections with unsent output to flush before the next poll.
    pending_write: Vec<usize>,
    pending_read: Vec<usize>,
    /// Parsed-but-not-run commands of the connection being processed (reused).
    batch: Batch,
    /// Connections with output held for the AOF (`appendfsync always`).
    held: Vec<usize>,
    /// The release LSN the held list was last checked against (mid-turn releases).
    released_lsn: u64,
    /// A reply was held since the last [`EventLoop::release_held`] (which then has work
    /// even if the release LSN has not moved).
    held_since_release: bool,
    waker: Arc<mio::Waker>,
    /// The event buffer of `serve_busy` (allocated at the first busy script).
    busy_events: Events,
    /// The tokens the current turn is handling (its events, then its budget-cut
    /// connections), and whether a busy script has served them already (`serve_busy`).
    turn_tokens: Vec<usize>,
    turn_swept: bool,
    /// The per-turn timeline while `latency-trace-file` is set (src/server/latency_trace.rs).
    trace: Option<LatencyTrace>,
    /// Rung by the kernel when an fsync the executor issued completes (see
    /// `aof::writer::Lease`).
    aof_sync_efd: std::os::fd::OwnedFd,
}

/// Commands parsed ahead before running them, so their keys' cache misses overlap.
pub const BATCH_MAX_COMMANDS: usize = 64;
/// How often the loop decides whether it is under sustained load (`event-loop-spin-us`).
const SPIN_WINDOW: Duration = Duration::from_millis(10);

/// Commands of one connection whose arguments are ranges into its query buffer.
#[derive(Default)]
struct Batch {
    args: Vec<(usize, usize)>,
    /// (first index in `args`, argc) per command.
    cmds: Vec<(usize, usize)>,
    hashes: Vec<u64>,
    /// Each command's spec, as the prefetch pass looked it up (None: unknown).
    specs: Vec<Option<&'static crate::commands::CommandSpec>>,
}

impl Batch {
    fn push(&mut self, args: &[(usize, usize)]) {
        self.cmds.push((self.args.len(), args.len()));
        self.args.extend_from_slice(args);
    }
}

/// A big bulk's header was parsed: gives it an arena block and moves the bytes already
/// buffered into it. True if that completed it or if no block could be had (parsing goes
/// on; the bulk is then read into the query buffer), false if the rest is to be read
/// into the block (by the read loop).
fn read_big_bulk_start(srv: &mut Server, conn: &mut Conn, len: usize) -> bool {
    let Some((block, addr)) = srv.try_alloc_arg_block(len) else {
        conn.parser.decline_big_bulk();
        return true;
    };
    let start = conn.parser.data_start();
    let have = (conn.qbuf.len() - start).min(len);
    // A copy-before-write snapshot copies out the pages first (see `arena::cow`).
    // SAFETY: the block has `len` bytes; the source is initialised buffer bytes.
    crate::arena::cow::external_write(addr as usize, have, || unsafe {
        std::ptr::copy_nonoverlapping(conn.qbuf.as_ptr().add(start), addr, have)
    });
    crate::arena::dirty::mark_written(addr as usize, have);
    conn.qbuf.drain(start..start + have);
    conn.big_args.push(BigArg {
        block,
        addr: addr as usize,
        len,
        filled: have,
    });
    if have == len {
        conn.parser.big_bulk_filled(conn.big_args.len() - 1, len);
        return true;
    }
    false
}

/// Runs the batched commands: first prefetches each command's key bucket, then the
/// bucket's first entry, then executes them in order. With pipelining this turns a
/// chain of dependent cache misses per command into misses that overlap.
/// Returns true if a reply was held for the AOF (see [`exec_holding`]).
fn run_batch(
    srv: &mut Server,
    client: &mut crate::commands::executor::Client,
    qbuf: &[u8],
    batch: &mut Batch,
    out: &mut Vec<u8>,
    holds: &mut VecDeque<(usize, u64)>,
    refs: &mut OutRefs,
) -> bool {
    let mut held = false;
    if batch.cmds.is_empty() {
        return held;
    }
    batch.hashes.clear();
    batch.specs.clear();
    // The hashes below are the arena's as it is now: a command of the batch that installs
    // another keyspace (DEBUG RELOAD of an RDB: a fresh seed) makes them stale for the
    // commands after it.
    let hash_seed = srv.ks.arena.hash_seed();
    if batch.cmds.len() > 1 {
        for &(first, argc) in &batch.cmds {
            let args = Args::new(qbuf, &batch.args[first..first + argc]);
            let spec = srv.commands.lookup(args.get(0));
            batch.specs.push(spec);
            let key_first = spec.is_some_and(|s| s.first_key == 1);
            let h = if key_first && argc >= 2 {
                srv.ks.prefetch_bucket(client.db, args.get(1))
            } else {
                0
            };
            batch.hashes.push(h);
        }
        for (i, &h) in batch.hashes.iter().enumerate() {
            if h != 0 || batch.cmds[i].1 >= 2 {
                srv.ks.prefetch_entry(client.db, h);
            }
        }
    }
    for (i, &(first, argc)) in batch.cmds.iter().enumerate() {
        if client.close_after_reply || srv.shutdown.is_some() {
            break;
        }
        let args = Args::new(qbuf, &batch.args[first..first + argc]);
        // What the prefetch pass found is reused: the name and key bytes are in `qbuf`,
        // borrowed unchanged for this whole call.
        if let Some(&Some(spec)) = batch.specs.get(i) {
            let name = args.get(0);
            srv.pre_resolved = Some((name.as_ptr() as usize, name.len(), spec));
        }
        if let Some(&h) = batch.hashes.get(i) {
            if h != 0 && srv.ks.arena.hash_seed() == hash_seed {
                srv.ks.set_key_hash_hint(args.get(1), h);
            }
        }
        held |= exec_holding(srv, client, args, out, holds, refs);
        srv.pre_resolved = None;
        srv.ks.clear_key_hash_hint();
        if client.blocked {
            // The commands parsed behind a blocked one wait, in order, until it is
            // served (copied: the query buffer moves on).
            for &(f, a) in &batch.cmds[i + 1..] {
                let args = Args::new(qbuf, &batch.args[f..f + a]);
                client.deferred.push_back(
                    crate::commands::executor::client::OwnedCommand::from_args(args),
                );
            }
            break;
        }
    }
    batch.args.clear();
    batch.cmds.clear();
    held
}

/// Runs one command. Under `appendfsync always` its reply (and all after it) waits until
/// the log is durable up to the LSN the command wrote or read: records that hold and
/// returns true.
fn exec_holding(
    srv: &mut Server,
    client: &mut crate::commands::executor::Client,
    args: Args,
    out: &mut Vec<u8>,
    holds: &mut VecDeque<(usize, u64)>,
    refs: &mut OutRefs,
) -> bool {
    let mark = out.len();
    let mut new_refs = Vec::new();
    srv.execute_refs(client, args, out, &mut new_refs);
    refs.extend(new_refs);
    let h = srv.aof.hold_lsn;
    if h > 0 && holds.back().is_none_or(|b| b.1 < h) {
        holds.push_back((mark, h));
        return true;
    }
    false
}

impl EventLoop {
    pub fn new(
        listeners: Vec<TcpListener>,
        tls: Option<TlsListen>,
        unix: Option<(UnixListener, String)>,
    ) -> io::Result<EventLoop> {
        let poll = Poll::new()?;
        let listeners = SharedListeners::new(poll.registry(), 0, listeners, tls, unix)?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER_TOKEN)?);
        let aof_sync_efd = crate::persistence::aof::uring::eventfd()?;
        {
            use std::os::fd::AsRawFd;
            poll.registry().register(
                &mut mio::unix::SourceFd(&aof_sync_efd.as_raw_fd()),
                AOF_SYNC_TOKEN,
                Interest::READABLE,
            )?;
        }
        Ok(EventLoop {
            aof_sync_efd,
            held: Vec::new(),
            released_lsn: 0,
            held_since_release: false,
            waker,
            poll,
            refusals: TlsRefusals::new(REFUSAL_TOKEN_BASE),
            listeners,
            conns: Vec::new(),
            free_slots: Vec::new(),
            connected: 0,
            pending_write: Vec::new(),
            pending_read: Vec::new(),
            batch: Batch::default(),
            busy_events: Events::with_capacity(0),
            turn_tokens: Vec::new(),
            turn_swept: true,
            trace: None,
        })
    }

    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.lock().local_addrs()
    }

    /// Runs until SHUTDOWN or a signal. Returns the shutdown request.
    pub fn run(&mut self, srv: &mut Server) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        let mut next_cron = Instant::now();
        let mut spin_until = Instant::now();
        let (mut window_start, mut slept, mut hot) = (Instant::now(), Duration::ZERO, false);
        // When the previous iteration ended: an idle spin iteration counts from there.
        let mut iteration_end = Instant::now();
        loop {
            let hz = srv.config.settings().hz.max(1) as u64;
            let now = Instant::now();
            if now >= next_cron {
                self.cron(srv);
                next_cron = now + Duration::from_millis(1000 / hz);
            }
            if SHUTDOWN_SIGNAL.load(Ordering::SeqCst) {
                let sig = SIGNAL_NUMBER.load(Ordering::SeqCst);
                let name = if sig == libc::SIGINT as u32 {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                warning!("Received {name} scheduling shutdown...");
                srv.shutdown
                    .get_or_insert(crate::commands::executor::ShutdownRequest::Default);
            }
            if let Some(req) = srv.shutdown {
                // A signal (or a SHUTDOWN that did not save itself) saves here; when the
                // save fails the server keeps running, as Redis.
                if srv.shutdown_save(req).is_err() {
                    warning!("Errors trying to shut down the server, check the logs for more information");
                    srv.shutdown = None;
                    SHUTDOWN_SIGNAL.store(false, Ordering::SeqCst);
                    continue;
                }
                self.flush_all(srv);
                return Ok(());
            }
            // Connections cut short by a read or write budget go on next turn without
            // waiting for an event (edge-triggered: none would come for a ready socket).
            let busy = !self.pending_read.is_empty()
                || !self.pending_write.is_empty()
                || srv.ks.lazyfree_pending > 0;
            let timeout = if busy || Instant::now() < spin_until {
                Duration::ZERO
            } else {
                let mut t = next_cron.saturating_duration_since(Instant::now());
                // Sleep no longer than the first blocked client's deadline.
                if let Some(d) = srv.blocking.next_deadline_ms() {
                    let ms = (d - now_ms()).max(0) as u64;
                    t = t.min(Duration::from_millis(ms));
                }
                // A log group waiting for its members (`aof-group-commit-wait-us`).
                if let Some(d) = srv.aof.group_deadline() {
                    t = t.min(d);
                }
                t
            };
            // While blocked in poll the executor touches no arena memory: a snapshot's
            // final pause may run meanwhile (and holds us back when poll returns).
            srv.snapshot_idle_begin();
            let poll_start = Instant::now();
            let polled = self.poll.poll(&mut events, Some(timeout));
            srv.snapshot_idle_end();
            match polled {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // Under load (many connections ready at once) keep polling for a while
            // instead of sleeping: see `event-loop-spin-us`. Light traffic (a few ready
            // connections per turn) never spins, so an idle-ish server costs no CPU.
            // Under sustained load (the loop slept less than half of the last window)
            // keep polling for `event-loop-spin-us` after each turn that found work,
            // instead of sleeping: see the option. A lightly loaded server never spins.
            let now = Instant::now();
            // A spin that found nothing is idle time as much as a sleep is. Counted as
            // work, it kept the loop "hot" for good once a burst (a 10 MB reply's ~40
            // budget-cut turns) set it: at 20k small requests/s a request arrives within
            // every 50 µs spin, so the loop never slept again and held a CPU the clients
            // needed (the executor's timeline, `latency-trace-file`: 27% of the time
            // spinning with 10 MB noise vs 5% without; ARCHITECTURE.md "Large values").
            let idle_spin = timeout.is_zero() && !busy && events.is_empty();
            if idle_spin {
                slept += now - iteration_end;
                if let Some(t) = self.trace.as_mut() {
                    t.spun((now - iteration_end).as_micros() as u64);
                }
            } else if !timeout.is_zero() {
                slept += now - poll_start;
            }
            let cmds_before = srv.stats.total_commands_processed;
            if let Some(t) = self.trace.as_mut() {
                t.begin((now - poll_start).as_micros() as u64);
                t.cur.events = events.iter().count() as u32;
            }
            let window = now - window_start;
            if window >= SPIN_WINDOW {
                hot = slept < window / 2;
                slept = Duration::ZERO;
                window_start = now;
            }
            // Not while a background snapshot runs: the executor is pinned to its CPU
            // then, with the snapshot's harvests and whatever else the machine runs
            // there, and polling starves them (figures: BENCHMARKS.md, "Snapshot vs Redis
            // at 1M, 4M and 8M keys", "No busy polling during a snapshot").
            let spin_us = srv.config.settings().event_loop_spin_us;
            if hot && spin_us > 0 && !events.is_empty() && !srv.background_job_active() {
                spin_until = now + Duration::from_micros(spin_us);
            }
            // Connections a read budget cut short last turn: read once more below, after
            // the events. Taken now, so a connection cut short during this turn's events
            // waits for the next turn, and one both pending and ready is read once: a turn
            // reads at most one budget from each connection.
            let again = std::mem::take(&mut self.pending_read);
            // What this turn has yet to handle, for a script that turns busy meanwhile
            // (edge-triggered: these events will not be reported again).
            self.turn_tokens.clear();
            self.turn_tokens.extend(events.iter().map(|e| e.token().0));
            self.turn_tokens
                .extend(again.iter().map(|&slot| slot + LISTENER_TOKENS));
            self.turn_swept = false;
            for ev in events.iter() {
                let t = ev.token().0;
                if ev.token() == WAKER_TOKEN {
                    continue; // The log advanced: release_held below.
                }
                if ev.token() == AOF_SYNC_TOKEN {
                    drain_eventfd(&self.aof_sync_efd);
                    self.log_midturn(srv);
                    continue;
                }
                if ev.token() == TIER_READ_TOKEN {
                    // Taken at the end of this turn (`tiering_end_of_turn`).
                    srv.tiering_read_signalled();
                    continue;
                }
                if t < LISTENER_TOKENS {
                    self.accept(srv, t);
                    continue;
                }
                if self.refusals.owns(t) {
                    self.refusals.on_event(self.poll.registry(), t);
                    continue;
                }
                let slot = t - LISTENER_TOKENS;
                let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                // A pending connection is read below (draining, so a close is seen).
                if readable && !again.contains(&slot) {
                    self.read_and_process(srv, slot, ev.is_read_closed() || ev.is_error());
                    self.log_midturn(srv);
                }
                if ev.is_writable() {
                    self.write(srv, slot);
                }
            }
            self.turn_tokens.clear();
            self.turn_tokens
                .extend(again.iter().map(|&slot| slot + LISTENER_TOKENS));
            self.turn_swept = false;
            for slot in again {
                self.read_and_process(srv, slot, true);
            }
            // Commands postponed by a pause run again here, outside any connection's
            // turn: a script among them that turns busy serves the others as in
            // `process` (its own client is out of its slot while it runs, so its
            // connection is read but not run).
            let saved_loop = srv.busy_loop.replace(BusyLoop {
                serve: serve_while_busy,
                state: std::ptr::NonNull::from(&mut *self).cast(),
            });
            srv.expire_blocked(now_ms());
            // Commands that waited for a tier read run again here too.
            srv.tiering_end_of_turn();
            srv.busy_loop = saved_loop;
            self.deliver_unblocked(srv);
            srv.tracking_end_of_turn();
            srv.repl_end_of_turn();
            self.deliver_pushes(srv);
            // Hand this turn's log entries to the AOF writer (group commit), then send
            // what may be sent.
            srv.aof.reap_syncs();
            srv.aof.flush_turn();
            crate::commands::executor::aof_hooks::release_log_pins(srv);
            self.release_held(srv);
            self.flush_all(srv);
            // As Redis's beforeSleep: buffers that grew this turn may call for evictions.
            srv.evict_clients(None);
            self.apply_kills(srv);
            if srv.ks.lazyfree_pending > 0 {
                srv.lazyfree_slice(Duration::from_micros(500));
            }
            if let Some(t) = self.trace.as_mut() {
                t.cur.commands = (srv.stats.total_commands_processed - cmds_before) as u32;
                t.end();
            }
            iteration_end = Instant::now();
            // Every turn (one comparison while off), so a client that saw CONFIG SET's OK
            // has its next commands traced or not as it asked.
            let path = &srv.config.settings().latency_trace_file;
            if self.trace.as_ref().map_or("", |t| t.path()) != path {
                LatencyTrace::follow_config(&mut self.trace, path);
            }
        }
    }

    /// One non-blocking turn while a script is busy (see `Server::serve_while_busy`).
    /// Connections absent from `conns` are the one running the script (or closed): what
    /// is ready on them is read after the script, through `pending_read`.
    fn serve_busy(&mut self, srv: &mut Server) {
        let mut events = std::mem::replace(&mut self.busy_events, Events::with_capacity(0));
        if events.capacity() == 0 {
            events = Events::with_capacity(EVENTS_CAPACITY);
        }
        // First, once per turn, what the turn had not handled yet when the script started:
        // events already taken from epoll and connections cut short by a read budget.
        if !self.turn_swept {
            self.turn_swept = true;
            let tokens = std::mem::take(&mut self.turn_tokens);
            for &t in &tokens {
                if t < LISTENER_TOKENS {
                    self.accept(srv, t);
                } else if self.refusals.owns(t) {
                    self.refusals.on_event(self.poll.registry(), t);
                } else if t < REFUSAL_TOKEN_BASE {
                    let slot = t - LISTENER_TOKENS;
                    if self.conns.get(slot).is_some_and(|c| c.is_some()) {
                        self.read_and_process(srv, slot, true);
                    }
                }
            }
            self.turn_tokens = tokens;
        }
        if self.poll.poll(&mut events, Some(Duration::ZERO)).is_ok() {
            for ev in events.iter() {
                let t = ev.token().0;
                if ev.token() == WAKER_TOKEN {
                    continue; // held replies are released after the script
                }
                if ev.token() == AOF_SYNC_TOKEN {
                    // The turn after the script reaps the log's syncs.
                    drain_eventfd(&self.aof_sync_efd);
                    continue;
                }
                if ev.token() == TIER_READ_TOKEN {
                    // The turn after the script takes the tier reads' completions.
                    srv.tiering_read_signalled();
                    continue;
                }
                if t < LISTENER_TOKENS {
                    self.accept(srv, t);
                    continue;
                }
                if self.refusals.owns(t) {
                    self.refusals.on_event(self.poll.registry(), t);
                    continue;
                }
                let slot = t - LISTENER_TOKENS;
                if self.conns.get(slot).is_none_or(|c| c.is_none()) {
                    if !self.pending_read.contains(&slot) {
                        self.pending_read.push(slot);
                    }
                    continue;
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read_and_process(srv, slot, ev.is_read_closed() || ev.is_error());
                }
                if ev.is_writable() {
                    self.write(srv, slot);
                }
            }
        }
        self.busy_events = events;
        // Connections a read budget cut short go on; the running one waits.
        let again = std::mem::take(&mut self.pending_read);
        for slot in again {
            if self.conns.get(slot).is_some_and(|c| c.is_some()) {
                self.read_and_process(srv, slot, true);
            } else if !self.pending_read.contains(&slot) {
                self.pending_read.push(slot);
            }
        }
        let pending = std::mem::take(&mut self.pending_write);
        for slot in pending {
            if self.conns.get(slot).is_some_and(|c| c.is_some()) {
                self.write(srv, slot);
            } else if !self.pending_write.contains(&slot) {
                self.pending_write.push(slot);
            }
        }
    }

    fn accept(&mut self, srv: &mut Server, listener: usize) {
        loop {
            let accepted = self.listeners.lock().accept(listener);
            let (mut stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    warning!("Accepting client connection: {e}");
                    return;
                }
            };
            let rules =
                AdmissionRules::from_settings(srv.config.settings(), srv.acl.default_nopass());
            if let Some(refusal) = admission_refusal(&rules, self.connected, peer.ip()) {
                srv.stats.rejected_connections += 1;
                self.refusals.refuse(self.poll.registry(), stream, refusal);
                continue;
            }
            srv.stats.total_connections_received += 1;
            stream.set_nodelay();
            if let Some(tcp) = stream.tcp() {
                set_keepalive(tcp, srv.config.settings().tcp_keepalive_s);
            }
            let laddr = stream.local_name(&srv.config.settings().unixsocket);
            let mut client = srv.alloc_client(peer.name(), laddr);
            client.unix_socket = stream.is_unix();
            client.fd = stream.as_raw_fd();
            let slot = match self.free_slots.pop() {
                Some(s) => s,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            if let Err(e) = self.poll.registry().register(
                &mut stream,
                Token(slot + LISTENER_TOKENS),
                Interest::READABLE,
            ) {
                warning!("Registering client connection: {e}");
                self.free_slots.push(slot);
                continue;
            }
            if srv.clients.len() <= slot {
                srv.clients.resize_with(slot + 1, || None);
            }
            client.slot = slot;
            let memory = client.memory.clone();
            srv.clients[slot] = Some(client);
            self.conns[slot] = Some(Box::new(Conn {
                stream,
                parser: RequestParser::with_big_args(BIG_ARG_BYTES),
                qbuf: Vec::new(),
                out: Vec::new(),
                out_pos: 0,
                more_to_read: false,
                closing: false,
                want_writable: false,
                holds: VecDeque::new(),
                refs: OutRefs::default(),
                in_held_list: false,
                big_args: Vec::new(),
                memory,
                out_peak_bytes: 0,
                out_peak_since_ms: 0,
            }));
            self.connected += 1;
        }
    }

    /// Reads what the socket has and runs the complete commands, one read at a time as
    /// Redis does, so `client-query-buffer-limit` is checked against the same measure at
    /// the same moments: after each read, before parsing, the bytes not yet parsed into
    /// arguments (for a big bulk, the bulk bytes received so far and its CRLF) must not
    /// exceed the limit, or the client is closed without a reply. `drain` keeps reading
    /// after a short read until EOF or EAGAIN (the peer may have closed).
    fn read_and_process(&mut self, srv: &mut Server, slot: usize, drain: bool) {
        // One read handler run, as Redis's readQueryFromClient counts them.
        srv.stats.total_reads_processed += 1;
        if let Some(t) = self.trace.as_mut() {
            t.cur.read(slot, 0);
        }
        let limit = srv.config.settings().client_query_buffer_limit as usize;
        let mut read_total = 0usize;
        let mut eof = false;
        let mut over_limit = false;
        loop {
            let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                return;
            };
            if conn.closing {
                return;
            }
            let filling = conn.big_args.last().is_some_and(|a| a.filled < a.len);
            let pending = conn.parser.pending_bulk_bytes(conn.qbuf.len());
            let in_bulk = !filling && pending > 0;
            let budget = if !filling && !in_bulk {
                READ_TURN_BYTES
            } else {
                BIG_ARG_READ_TURN_BYTES
            };
            // The budget bounds the bytes, not the reads: a drained socket that refilled
            // meanwhile (`drain`) or a short read is read again only within what is left.
            if read_total >= budget {
                conn.more_to_read = true;
                if !self.pending_read.contains(&slot) {
                    self.pending_read.push(slot);
                }
                break;
            }
            let left = budget - read_total;
            // Inside a big bulk, read exactly its remaining bytes (at most the budget) so
            // the limit check never counts the next command's start.
            let want = if pending > 0 {
                pending.min(left)
            } else {
                READ_CHUNK_BYTES.min(left)
            };
            let mut inbound = Inbound {
                qbuf: &mut conn.qbuf,
                parser: &mut conn.parser,
                big_args: &mut conn.big_args,
            };
            let (n, len, block_pending) = match inbound.read_once(&mut conn.stream, want, left) {
                ReadStep::Bytes {
                    n,
                    asked,
                    block_pending,
                } => (n, asked, block_pending),
                ReadStep::Closed => {
                    eof = true;
                    break;
                }
                ReadStep::WouldBlock => break,
            };
            read_total += n;
            srv.stats.net_input_bytes += n as u64;
            if let Some(t) = self.trace.as_mut() {
                t.cur.read(slot, n);
            }
            conn.measure_memory(srv);
            let big_bytes: usize = conn.big_args.iter().map(|a| a.filled).sum();
            if conn.parser.unparsed_bytes(conn.qbuf.len()) + big_bytes > limit {
                over_limit = true;
                break;
            }
            if !block_pending {
                self.process(srv, slot);
            }
            // A short read drained the socket: with edge-triggered epoll, bytes that
            // arrive later raise a new event, so no second read (EAGAIN) is needed.
            if n < len && !drain {
                break;
            }
        }
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if over_limit {
            let client = srv.clients[slot]
                .as_ref()
                .map(|c| c.info_line(now_ms()))
                .unwrap_or_default();
            warning!("Closing client that reached max query buffer length: {client} (qbuf initial bytes: {:?})", String::from_utf8_lossy(&conn.qbuf[..conn.qbuf.len().min(64)]));
            srv.stats.client_query_buffer_limit_disconnections += 1;
            self.close(srv, slot);
            return;
        }
        if eof {
            // Send what was produced for the last commands, then close.
            self.write(srv, slot);
            self.close(srv, slot);
        } else if conn.stream.tls_backlog() && !conn.want_writable {
            // TLS handshake records the socket did not take: wait until it can.
            self.write(srv, slot);
        }
    }

    /// Parses and runs every complete command in the query buffer.
    ///
    /// The connection and the batch are taken out of the loop while its commands run, so
    /// that a busy script can hand the loop to [`Server::serve_while_busy`] (through
    /// `srv.busy_loop`) to answer the other connections: this one is then absent from
    /// `conns`, as Redis protects the client running the script.
    fn process(&mut self, srv: &mut Server, slot: usize) {
        let Some(mut conn_owned) = self.conns[slot].take() else {
            return;
        };
        let Some(mut client) = srv.clients[slot].take() else {
            self.conns[slot] = Some(conn_owned);
            return;
        };
        let mut batch_owned = std::mem::take(&mut self.batch);
        // From here until the loop is used again below, the loop is reached only through
        // this pointer (see `Server::serve_while_busy`).
        let saved_loop = srv.busy_loop.replace(BusyLoop {
            serve: serve_while_busy,
            state: std::ptr::NonNull::from(&mut *self).cast(),
        });
        let conn = &mut *conn_owned;
        let batch = &mut batch_owned;
        // Messages pushed to this client before these commands go out before their replies.
        if !client.pushed.is_empty() {
            conn.out.extend_from_slice(&client.pushed);
            client.pushed.clear();
        }
        let out_before = conn.out.len();
        // The running commands see their own bytes in the query buffer (CLIENT LIST).
        conn.figures(&mut client, srv.clock_us / 1000, true);
        // The connection's batch and output, as every call below passes them.
        macro_rules! run_batch {
            () => {
                run_batch(
                    srv,
                    &mut client,
                    &conn.qbuf,
                    batch,
                    &mut conn.out,
                    &mut conn.holds,
                    &mut conn.refs,
                )
            };
        }
        macro_rules! exec_holding {
            ($args:expr) => {
                exec_holding(
                    srv,
                    &mut client,
                    $args,
                    &mut conn.out,
                    &mut conn.holds,
                    &mut conn.refs,
                )
            };
        }
        let mut held = false;
        srv.begin_batch();
        // Commands read behind a command that blocked run first, in order.
        while !client.blocked && !client.close_after_reply {
            let Some(cmd) = client.deferred.pop_front() else {
                break;
            };
            held |= exec_holding!(cmd.args());
        }
        loop {
            if client.close_after_reply
                || client.http_guard_close
                || client.close_asap
                || client.blocked
            {
                break;
            }
            if conn.big_args.last().is_some_and(|a| a.filled < a.len) {
                break; // a big argument is still being read into its block
            }
            let limits = ParseLimits {
                proto_max_bulk_len: srv.config.settings().proto_max_bulk_len,
                auth_required: !srv.acl.default_needs_no_auth() && !client.authenticated,
            };
            // Before AUTH the parser's limits depend on each command's outcome: no batching.
            let can_batch = !limits.auth_required;
            match conn.parser.next(&conn.qbuf, &limits) {
                Parse::BigBulk { len } => {
                    if !read_big_bulk_start(srv, conn, len) {
                        break; // the rest of the bulk is read into its block
                    }
                }
                Parse::Command if !conn.big_args.is_empty() => {
                    // Runs alone, after what was batched before it; then its argument
                    // blocks go (unless a value adopted one).
                    held |= run_batch!();
                    // SAFETY: each of `big_args` is an arena block this connection got from
                    // `try_alloc_arg_block` (allocated and pinned until released below,
                    // after the command) and filled whole (the loop breaks above while the
                    // last one is filling); only this thread writes it, and not meanwhile.
                    let args =
                        unsafe { Args::with_big(&conn.qbuf, &conn.parser.args, &conn.big_args) };
                    if client.blocked {
                        // Behind a command that blocked: waits its turn (copied).
                        client.deferred.push_back(
                            crate::commands::executor::client::OwnedCommand::from_args(args),
                        );
                    } else {
                        held |= exec_holding!(args);
                    }
                    for a in conn.big_args.drain(..) {
                        srv.ks.release_arg_block(a.block);
                    }
                    if srv.shutdown.is_some() {
                        break;
                    }
                }
                Parse::Command => {
                    // Inline arguments live in a scratch buffer the next parse overwrites:
                    // those commands run at once, after the ones batched before them.
                    let inline = conn.parser.source == Some(ArgSource::InlineScratch);
                    let batched = !inline && can_batch;
                    if batched {
                        batch.push(&conn.parser.args);
                    }
                    if !batched || batch.cmds.len() >= BATCH_MAX_COMMANDS {
                        held |= run_batch!();
                    }
                    if !batched {
                        let buf: &[u8] = if inline {
                            &conn.parser.inline_scratch
                        } else {
                            &conn.qbuf
                        };
                        let args = Args::new(buf, &conn.parser.args);
                        if client.blocked {
                            // Behind a command of the batch that blocked: waits its turn.
                            client.deferred.push_back(
                                crate::commands::executor::client::OwnedCommand::from_args(args),
                            );
                        } else {
                            held |= exec_holding!(args);
                        }
                    }
                    if srv.shutdown.is_some() {
                        break;
                    }
                }
                Parse::Incomplete => break,
                Parse::Error(msg) => {
                    held |= run_batch!();
                    verbose!(
                        "Protocol error ({msg}) from client: {}",
                        client.info_line(now_ms())
                    );
                    conn.out.extend_from_slice(b"-ERR ");
                    conn.out.extend_from_slice(msg.as_bytes());
                    conn.out.extend_from_slice(b"\r\n");
                    client.close_after_reply = true;
                    break;
                }
            }
        }
        held |= run_batch!();
        srv.busy_loop = saved_loop;
        self.batch = batch_owned;
        self.conns[slot] = Some(conn_owned);
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if client.http_guard_close {
            // The HTTP guard: Redis sends nothing more to such a connection.
            conn.out.truncate(out_before);
            conn.holds.clear();
            let gone = conn.refs.truncate(out_before);
            srv.release_refs(gone);
        }
        self.held_since_release |= held;
        if held && !conn.in_held_list && !conn.holds.is_empty() {
            conn.in_held_list = true;
            self.held.push(slot);
        }
        let consumed = conn.parser.consumed();
        if consumed == conn.qbuf.len() {
            conn.qbuf.clear();
            conn.parser.shift(consumed);
        } else if consumed > 0 {
            conn.qbuf.drain(..consumed);
            conn.parser.shift(consumed);
        }
        // Give back memory of a query buffer that held a big argument.
        if conn.qbuf.is_empty() && conn.qbuf.capacity() > 4 * READ_CHUNK_BYTES {
            conn.qbuf = Vec::new();
        }
        conn.figures(&mut client, srv.clock_us / 1000, false);
        conn.measure_memory(srv);
        let close = client.close_after_reply;
        let over = output_over_limit(srv, &mut client);
        srv.clients[slot] = Some(client);
        if (conn.out.len() > out_before || close) && !self.pending_write.contains(&slot) {
            self.pending_write.push(slot);
        }
        if over {
            self.close(srv, slot);
        }
    }

    fn write(&mut self, srv: &mut Server, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        // One write handler run, as Redis's writeToClient counts them.
        srv.stats.total_writes_processed += 1;
        // TLS records an earlier write left go before anything new.
        if conn.stream.tls_backlog() {
            match conn.stream.flush() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => {
                    self.close(srv, slot);
                    return;
                }
            }
        }
        let mut written = 0usize;
        // Bytes to a replica count as replication output (INFO's total_net_repl_output_bytes).
        let to_replica = srv
            .clients
            .get(slot)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.replica);
        let end = if conn.holds.is_empty() {
            conn.out.len()
        } else {
            conn.sendable_end(srv.aof.release_lsn())
        };
        let mut done_refs = Vec::new();
        let refs_before = conn.refs.pending_bytes();
        while conn.out_pos < end && written < WRITE_BUDGET_BYTES {
            let started = self.trace.as_ref().map(|_| Instant::now());
            let res = conn.refs.write_to(
                &mut conn.stream,
                &conn.out,
                &mut conn.out_pos,
                end,
                WRITE_BUDGET_BYTES - written,
                &mut done_refs,
            );
            if let (Some(t), Some(started)) = (self.trace.as_mut(), started) {
                t.cur.writev_took(us_since(started));
            }
            for b in done_refs.drain(..) {
                srv.ks.unpin(b);
            }
            match res {
                Ok((0, _)) => break,
                Ok((n, asked)) => {
                    written += n;
                    if to_replica {
                        srv.stats.net_repl_output_bytes += n as u64;
                    } else {
                        srv.stats.net_output_bytes += n as u64;
                    }
                    if n < asked {
                        // The socket buffer is full: wait for a writable event.
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(srv, slot);
                    return;
                }
            }
        }
        if conn.out_pos == conn.out.len() {
            // Holds may point at the very end (a held command with no reply).
            for h in conn.holds.iter_mut() {
                h.0 = 0;
            }
            conn.out.clear();
            conn.out_pos = 0;
            if conn.out.capacity() > 1 << 20 {
                conn.out = Vec::new();
            }
        } else {
            // Every hold lies at or after what was sent (`end` stops at the first).
            let dropped =
                super::outq::compact_sent(&mut conn.out, &mut conn.out_pos, &mut conn.refs);
            for h in conn.holds.iter_mut() {
                h.0 = h.0.saturating_sub(dropped);
            }
            if written >= WRITE_BUDGET_BYTES && !self.pending_write.contains(&slot) {
                self.pending_write.push(slot);
            }
        }
        if let Some(t) = self.trace.as_mut() {
            let ref_bytes = refs_before.saturating_sub(conn.refs.pending_bytes());
            t.cur.wrote(slot, written, ref_bytes);
            if written >= WRITE_BUDGET_BYTES {
                t.cur.budget_cut += 1;
            }
        }
        // Writable events only while output is stuck: otherwise every reply the client
        // reads would wake the loop for nothing (Redis installs its write handler the same way).
        // (Output held for the AOF is not stuck on the socket: it waits for the log.)
        let sendable = if conn.holds.is_empty() {
            conn.out.len()
        } else {
            end.min(conn.out.len())
        };
        let stuck = conn.out_pos < sendable || conn.stream.tls_backlog();
        if stuck != conn.want_writable {
            let interest = if stuck {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, Token(slot + LISTENER_TOKENS), interest)
                .is_ok()
            {
                conn.want_writable = stuck;
            }
        }
        let done = conn.out_pos == conn.out.len();
        conn.measure_memory(srv);
        if let Some(c) = srv.clients[slot].as_mut() {
            conn.figures(c, srv.clock_us / 1000, false);
            if done && c.close_after_reply {
                self.close(srv, slot);
            }
        }
    }

    /// Queues for writing the connections whose held output the log now covers. After a
    /// sticky AOF error those writes will never be durable: their clients are closed
    /// (the outcome is unknown to them, as after a crash) instead of hanging.
    /// `appendfsync always`, between connections of a turn: hands the entries logged so far
    /// to the writer when it waits for work, and sends the replies that became durable
    /// meanwhile. Doing both only at the end of the turn would serialise the disk behind
    /// the CPU: a turn over many busy connections (read, execute, then their replies) can
    /// last longer than a flush, so each flush would wait for a whole turn and each turn
    /// for a whole flush.
    fn log_midturn(&mut self, srv: &mut Server) {
        if !srv.aof.syncs_every_write() {
            return;
        }
        srv.aof.reap_syncs();
        srv.aof.flush_if_writer_idle();
        if !self.held.is_empty() && srv.aof.release_lsn() > self.released_lsn {
            self.release_held(srv);
            self.flush_all(srv);
        }
    }

    fn release_held(&mut self, srv: &mut Server) {
        if self.held.is_empty() {
            return;
        }
        let durable = srv.aof.release_lsn();
        let failed = srv.aof.failed();
        // Called every turn: with nothing newly durable and nothing newly held, the walk
        // over the held connections would release nothing.
        if durable == self.released_lsn && !self.held_since_release && !failed {
            return;
        }
        self.released_lsn = durable;
        self.held_since_release = false;
        let list = std::mem::take(&mut self.held);
        for slot in list {
            let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                continue;
            };
            let before = conn.holds.len();
            let _ = conn.sendable_end(durable);
            if conn.holds.is_empty() {
                conn.in_held_list = false;
            } else if failed {
                conn.in_held_list = false;
                self.close(srv, slot);
                continue;
            } else {
                self.held.push(slot);
            }
            if conn_released(before, self.conns[slot].as_deref())
                && !self.pending_write.contains(&slot)
            {
                self.pending_write.push(slot);
            }
        }
    }

    /// Moves pub/sub messages from clients' outboxes into their connections' output and
    /// queues the writes; closes clients that went over their output limit meanwhile.
    /// Pushed bytes go after any reply held for the AOF, so a connection's output stays
    /// in the order it was produced.
    fn deliver_pushes(&mut self, srv: &mut Server) {
        if srv.pubsub.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut srv.pubsub.pending);
        for slot in pending {
            let Some(mut client) = srv.clients.get_mut(slot).and_then(|c| c.take()) else {
                continue;
            };
            client.in_pending = false;
            let Some(conn) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                srv.clients[slot] = Some(client);
                continue;
            };
            if client.close_asap {
                srv.clients[slot] = Some(client);
                self.close(srv, slot);
                continue;
            }
            if client.pushed.is_empty() {
                srv.clients[slot] = Some(client);
                continue;
            }
            conn.out.extend_from_slice(&client.pushed);
            client.pushed.clear();
            if client.pushed.capacity() > 64 * 1024 {
                client.pushed = Vec::new();
            }
            conn.figures(&mut client, srv.clock_us / 1000, false);
            let over = output_over_limit(srv, &mut client);
            srv.clients[slot] = Some(client);
            if over {
                self.close(srv, slot);
            } else {
                self.pending_write.push(slot);
            }
        }
        // One fan-out may touch many connections: dedup once instead of a scan per push.
        self.pending_write.sort_unstable();
        self.pending_write.dedup();
    }

    /// Appends the replies of served / timed-out / unblocked commands to their
    /// connections, then runs what those clients had pipelined behind (which may serve
    /// or block further clients: repeated until nothing is left).
    fn deliver_unblocked(&mut self, srv: &mut Server) {
        while !srv.blocking.unblocked.is_empty() {
            for u in std::mem::take(&mut srv.blocking.unblocked) {
                let same = srv.clients[u.slot]
                    .as_ref()
                    .is_some_and(|c| c.id == u.client_id);
                let Some(conn) = self.conns.get_mut(u.slot).and_then(|c| c.as_mut()) else {
                    srv.release_refs(u.refs);
                    continue;
                };
                if !same {
                    srv.release_refs(u.refs);
                    continue;
                }
                let base = conn.out.len();
                conn.out.extend_from_slice(&u.out);
                conn.refs.extend(u.refs.into_iter().map(|mut r| {
                    r.pos += base;
                    r
                }));
                if u.hold_lsn > 0 && conn.holds.back().is_none_or(|b| b.1 < u.hold_lsn) {
                    conn.holds.push_back((base, u.hold_lsn));
                    self.held_since_release = true;
                    if !conn.in_held_list {
                        conn.in_held_list = true;
                        self.held.push(u.slot);
                    }
                }
                if !self.pending_write.contains(&u.slot) {
                    self.pending_write.push(u.slot);
                }
                self.process(srv, u.slot);
            }
        }
    }

    fn flush_all(&mut self, srv: &mut Server) {
        let pending = std::mem::take(&mut self.pending_write);
        for slot in pending {
            self.write(srv, slot);
        }
    }

    fn close(&mut self, srv: &mut Server, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            // Unsent references go with the client: their blocks are unpinned (and freed
            // if the keyspace dropped them meanwhile).
            for b in conn.refs.take_all() {
                srv.ks.unpin(b);
            }
            for a in conn.big_args.drain(..) {
                srv.ks.release_arg_block(a.block);
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            srv.client_memory.forget(&conn.memory);
            self.connected -= 1;
            self.free_slots.push(slot);
            if let Some(mut c) = srv.clients[slot].take() {
                crate::commands::pubsub::unsubscribe_all(srv, &mut c);
                srv.forget_client(&mut c);
            }
            self.pending_read.retain(|&s| s != slot);
        }
    }

    fn apply_kills(&mut self, srv: &mut Server) {
        if srv.kill_queue.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut srv.kill_queue);
        for slot in 0..self.conns.len() {
            let Some(client) = srv.clients[slot].as_ref() else {
                continue;
            };
            if ids.contains(&client.id) {
                // An evicted client is freed at once, as Redis does: unsent output goes
                // too. CLIENT KILL's victim gets one more write first.
                if !client.evicted {
                    self.write(srv, slot);
                }
                self.close(srv, slot);
            }
        }
    }

    fn cron(&mut self, srv: &mut Server) {
        srv.cron();
        if let Some(t) = self.trace.as_mut() {
            t.ship();
        }
        self.refusals.expire(self.poll.registry());
        let now = now_ms();
        let timeout_ms = srv.config.settings().timeout_s as i64 * 1000;
        let mut buffers = 0u64;
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if conn.stream.handshake_overdue() {
                self.close(srv, slot);
                continue;
            }
            buffers += (conn.qbuf.capacity() + conn.out.capacity()) as u64;
            let Some(client) = srv.clients[slot].as_mut() else {
                continue;
            };
            buffers += client.pushed.capacity() as u64;
            let idle = now - client.last_interaction_ms;
            // As Redis, subscribers are never closed for idleness: waiting is their job.
            if timeout_ms > 0 && idle > timeout_ms && !client.is_pubsub() && !client.blocked {
                verbose!("Closing idle client");
                self.close(srv, slot);
                continue;
            }
            let lim = output_limit_for(srv.config.settings(), client);
            if output_over(lim, &mut srv.stats, client) {
                self.close(srv, slot);
            }
        }
        srv.client_buffer_bytes = buffers;
        let _ = io::stdout().flush();
    }

    pub fn connected(&self) -> usize {
        self.connected
    }
}

fn conn_released(holds_before: usize, conn: Option<&Conn>) -> bool {
    conn.is_some_and(|c| c.holds.len() < holds_before)
}

/// The `client-output-buffer-limit` class of a client ([`crate::commands::executor::Client::class`]).
pub fn output_limit_for(
    s: &crate::config::Settings,
    client: &crate::commands::executor::Client,
) -> crate::config::OutputLimit {
    match client.class() {
        "replica" => s.obuf_replica,
        "pubsub" => s.obuf_pubsub,
        _ => s.obuf_normal,
    }
}

/// Checks `client-output-buffer-limit` for a client. True when it must be closed.
fn output_over_limit(srv: &mut Server, client: &mut crate::commands::executor::Client) -> bool {
    let lim = output_limit_for(srv.config.settings(), client);
    output_over(lim, &mut srv.stats, client)
}

fn output_over(
    lim: crate::config::OutputLimit,
    stats: &mut crate::commands::executor::stats::Stats,
    client: &mut crate::commands::executor::Client,
) -> bool {
    let pending = client.obuf_bytes;
    crate::commands::executor::client::output_over_bytes(lim, stats, client, pending)
}

fn set_keepalive(stream: &TcpStream, secs: u64) {
    if secs == 0 {
        return;
    }
    let fd = stream.as_raw_fd();
    let on: libc::c_int = 1;
    let idle = secs as libc::c_int;
    let intvl = (secs / 3).max(1) as libc::c_int;
    let cnt: libc::c_int = 3;
    // SAFETY: plain setsockopt calls on a socket we own, with correctly sized ints.
    unsafe {
        let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_KEEPALIVE,
            &on as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            &idle as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            &intvl as *const _ as *const libc::c_void,
            sz,
        );
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPCNT,
            &cnt as *const _ as *const libc::c_void,
            sz,
        );
    }
}

/// Resets an eventfd's counter (non-blocking; nothing to read is fine).
fn drain_eventfd(fd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a local u64 from a non-blocking eventfd.
    unsafe {
        libc::read(fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8);
    }
}

/// Starts the server: binds, logs, serves until shutdown.
pub fn serve(mut srv: Server) -> io::Result<()> {
    let s = srv.config.settings().clone();
    let listeners = bind_listeners(&s.bind, s.port)?;
    let tls = bind_tls(&srv.config)?;
    let unix = bind_unix(&s.unixsocket, s.unixsocketperm)?.map(|l| (l, s.unixsocket.clone()));
    let mut el = EventLoop::new(listeners, tls, unix)?;
    srv.listeners = Some(std::sync::Arc::new(el.listeners.clone()));
    let waker = el.waker.clone();
    srv.aof.set_waker(Arc::new(move || {
        let _ = waker.wake();
    }));
    let waker = el.waker.clone();
    srv.tiering_set_waker(Arc::new(move || {
        let _ = waker.wake();
    }));
    {
        use std::os::fd::AsRawFd;
        srv.aof.set_completion_fd(el.aof_sync_efd.as_raw_fd());
        if let Some(fd) = srv.tiering_read_completion_fd() {
            el.poll.registry().register(
                &mut mio::unix::SourceFd(&fd),
                TIER_READ_TOKEN,
                Interest::READABLE,
            )?;
        }
    }
    let addrs = el.local_addrs();
    if let Some(a) = addrs.first() {
        srv.tcp_port = a.port();
    }
    notice!("Server initialized");
    notice!("Ready to accept connections tcp");
    if s.tls_port != 0 {
        notice!("Ready to accept connections tls");
    }
    if !s.unixsocket.is_empty() {
        notice!("Ready to accept connections unix");
    }
    let result = el.run(&mut srv);
    super::listeners::remove_unix_socket(&s.unixsocket);
    notice!("User requested shutdown...");
    notice!("cairn is now ready to exit, bye bye...");
    let _ = el.connected();
    result
}
