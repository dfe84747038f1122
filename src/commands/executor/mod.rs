//! The executor's state and the command pipeline: lookup, arity, auth, memory checks,
//! execution, statistics. The command families act on this state; the sockets, the event
//! loop and the I/O threads that feed it live in `server/`, a layer above.
//!
//! Architecture invariant: everything here runs on the executor thread, one command at a
//! time; nothing here blocks on a socket or a disk (threads it starts — the log rewrite,
//! the replica link, the full-sync converter — do their I/O on their own).

pub mod acl_ops;
pub mod aof_hooks;
pub mod aof_rewrite;
pub mod aof_startup;
pub mod blocking;
pub mod client;
pub mod client_memory;
pub mod repl_pending;
pub mod replica_link;
pub mod replication;
pub mod script_call;
pub mod snapshot_ops;
pub mod stats;
#[cfg(test)]
pub mod testing;
pub mod tiering;
pub mod tracking;

pub use client::Client;

use crate::arena::Arena;
use crate::commands::{self, Args, CmdError, CommandSpec, CommandTable, Ctx};
use crate::config::Config;
use crate::keyspace::evict::EvictionPool;
use crate::keyspace::Keyspace;
use crate::protocol::reply::Reply;
use crate::util::{now_ms, now_us};
use stats::{CommandStats, LatencyMonitor, SlowLog, Stats};
use std::time::Instant;

/// Fixed overhead counted in `used_memory` besides the arena (executor structures).
pub const BASE_OVERHEAD_BYTES: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownRequest {
    Save,
    NoSave,
    Default,
}

/// When a command's line reaches MONITOR clients (see `Server::monitor_feed`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum MonitorFeed {
    Before,
    After,
}

pub struct Server {
    pub ks: Keyspace,
    /// The last write found the arena without room (its warning is logged).
    arena_full_logged: bool,
    /// The command table's answer for a request name looked up ahead (the pipelined
    /// prefetch): `(address, length)` of the name bytes, unchanged while it is set, and
    /// the spec; taken by the next lookup of exactly those bytes.
    pub pre_resolved: Option<(usize, usize, &'static CommandSpec)>,
    pub config: Config,
    pub commands: CommandTable,
    /// Users, permissions and the ACL log (`commands::acl`).
    pub acl: commands::acl::Acl,
    pub cmdstats: CommandStats,
    pub stats: Stats,
    pub slowlog: SlowLog,
    pub latency: LatencyMonitor,
    pub eviction_pool: EvictionPool,
    pub run_id: String,
    pub start_ms: i64,
    pub start_instant: Instant,
    /// Changes since the last save (INFO rdb_changes_since_last_save).
    pub dirty: u64,
    pub lastsave_s: i64,
    /// BGSAVE SCHEDULE while an AOF rewrite ran: start it when that is done (Redis's
    /// rdb_bgsave_scheduled).
    pub bgsave_scheduled: bool,
    pub shutdown: Option<ShutdownRequest>,
    /// Microseconds since the epoch at the start of the command being run (see `execute`).
    pub clock_us: i64,
    pub active_expire_enabled: bool,
    pub next_client_id: u64,
    /// Clients by slot; the one executing is taken out for the duration of its command.
    pub clients: Vec<Option<Box<Client>>>,
    /// SSD tiering, when `tiered-prefix` is set (`tiering.rs`).
    pub tiering: Option<Box<tiering::TierState>>,
    /// Client ids to disconnect (CLIENT KILL), applied by the event loop.
    pub kill_queue: Vec<u64>,
    /// Bytes held by client query/output buffers (maintained by the event loop).
    pub client_buffer_bytes: u64,
    pub tcp_port: u16,
    /// What all clients' buffers hold (`maxmemory-clients`), shared with the socket side.
    pub client_memory: std::sync::Arc<client_memory::ClientMemory>,
    /// The listening sockets, replaced by CONFIG SET bind / port (None until a loop runs).
    pub listeners: Option<std::sync::Arc<dyn ListenerControl>>,
    pub executable: String,
    /// This primary's replication id (INFO replication, `+FULLRESYNC`, the log's headers).
    pub master_replid: String,
    /// The primary's side of replication: backlog, replicas, full syncs, WAIT.
    pub repl: replication::Replication,
    /// SAVE/BGSAVE state and counters (src/persistence/snapshot).
    pub snapshot: crate::persistence::snapshot::SnapshotEngine,
    /// The append-only log (executor side).
    pub aof: crate::persistence::aof::Aof,
    /// Replaying the AOF at startup: commands are not logged again.
    pub loading: bool,
    /// When the HTTP-guard warning was last logged (ms; Redis logs it once a minute).
    pub security_warning_logged_ms: i64,
    /// Pub/sub subscription tables and the queue of clients with pushed messages.
    pub pubsub: commands::pubsub::PubSub,
    /// Reply segments referencing stored values, appended by the command being run; only
    /// enabled (`reply_refs_min` < MAX) inside [`Server::execute_refs`], whose caller owns
    /// them (and must [`Keyspace::unpin`](crate::keyspace::Keyspace::unpin) each when sent).
    pub reply_refs: Vec<RefSeg>,
    pub reply_refs_min: u64,
    /// A loaded dataset waits to replace this one (a replica's full sync) until no block
    /// of the current arena is pinned: meanwhile replies copy values and big arguments go
    /// to query buffers, so the pins drain and no new ones appear.
    pub dataset_swap_pending: bool,
    /// Parked blocking commands and ready keys (src/commands/executor/blocking.rs).
    pub blocking: blocking::Blocking,
    /// EXEC is running its queued commands (the queue-time checks were done at EXEC).
    pub in_exec: bool,
    /// Set by a handler whose change must be logged in another form than its arguments
    /// (a served BLPOP logs LPOP); taken by the propagation hook.
    pub propagate_as: Option<Vec<Vec<u8>>>,
    /// A script's `redis.call` is running a command (MONITOR shows it as from `lua`).
    pub in_script_call: bool,
    /// The socket loop (`io-threads 1`) while it runs a connection's commands: a busy
    /// script serves the other clients through it (`serve_while_busy`).
    pub(crate) busy_loop: Option<BusyLoop>,
    /// MIGRATE's connections to its targets.
    pub migrate_sockets: crate::commands::migrate::SocketCache,
    /// A read-only command ran inside the running script: a tracking caller remembers
    /// the script's declared keys when it returns (Redis 7.0's script_caller rule).
    pub script_read_seen: bool,
    /// The Lua script cache and engine (src/commands/scripting).
    pub scripts: commands::scripting::Scripts,
    /// `notify-keyspace-events` class bits (0: off; the one check a write pays then).
    pub notify_flags: u32,
    /// Keyspace notifications for the running client itself, held until its reply is
    /// complete (see `commands::notify`).
    pub notify_self: Vec<u8>,
    /// Where the running command's reply starts in its buffer (`commands::notify`).
    pub notify_reply_start: usize,
    /// The running client's own protocol, kept while a script's commands run in the
    /// script's (`commands::notify`).
    pub notify_self_resp: crate::protocol::reply::Resp,
}

/// How the pipeline dealt with a command (see `execute_inner`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A pre-check refused it (unknown, arity, auth, OOM...): flags a MULTI.
    Rejected,
    Ran,
}

/// The single-thread socket loop while one of its connections runs commands (set by
/// `server::event_loop`): a busy script's VM hook serves the other clients through it
/// (Redis's processEventsWhileBlocked). The loop is opaque here: `serve` is the loop's
/// function and `state` the loop it runs on.
#[derive(Clone, Copy)]
pub struct BusyLoop {
    pub serve: fn(&mut Server, std::ptr::NonNull<()>),
    pub state: std::ptr::NonNull<()>,
}

// SAFETY: set and used only on the executor thread that runs the loop (`Server` moves to
// that thread before serving, never while a `BusyLoop` is set).
unsafe impl Send for BusyLoop {}

impl Drop for Server {
    /// The log's writer thread may still have to copy values logged by reference out of
    /// the arena: it finishes (writes and syncs what is queued) before the keyspace, the
    /// first field, unmaps the arena.
    fn drop(&mut self) {
        self.aof.flush();
        if let Some(mut w) = self.aof.writer.take() {
            w.shutdown();
        }
    }
}

impl Server {
    /// Called from a busy script's hook every few milliseconds (`io-threads 1`): the
    /// loop accepts, reads and answers other clients (`-BUSY` but for the `allow-busy`
    /// commands). Nothing to do without a loop (I/O threads answer by themselves) or
    /// inside a nested call.
    pub fn serve_while_busy(&mut self) {
        let Some(lp) = self.busy_loop.take() else {
            return;
        };
        (lp.serve)(self, lp.state);
        self.busy_loop = Some(lp);
    }
}

/// What the executor asks of the listening sockets, which the socket side owns
/// (`server::listeners`): CONFIG SET bind / port moves them.
pub trait ListenerControl: Send + Sync {
    /// Listens on `binds`:`port` instead; on failure listens on the old addresses again
    /// and returns the error. Connections already open are never affected.
    fn rebind(
        &self,
        binds: &[String],
        port: u16,
        old_binds: &[String],
        old_port: u16,
    ) -> std::io::Result<()>;
    /// TLS listens on `binds`:`tls_port` (0: nowhere) and new TLS connections use
    /// `config`; connections already open keep theirs. The sockets move only when the
    /// address changed.
    fn retls(
        &self,
        binds: &[String],
        tls_port: u16,
        config: Option<std::sync::Arc<rustls::ServerConfig>>,
    ) -> std::io::Result<()>;
}

/// A reply segment sent from a stored value instead of the reply buffer: the value's
/// block (pinned), inserted in the owned output bytes at `pos`.
///
/// `len` and `addr` are private: the socket writer (`server::outq`) reads the bytes through
/// [`RefSeg::bytes`], so only [`RefSeg::pinned`], whose caller vouches for them, makes one.
#[derive(Clone, Copy, Debug)]
pub struct RefSeg {
    pub pos: usize,
    pub block: crate::arena::Ref,
    len: usize,
    /// Address of the value's first byte (stable while pinned).
    addr: usize,
}

impl RefSeg {
    /// A reference to `len` bytes at `addr`, the value in `block`, spliced in at `pos`.
    ///
    /// # Safety
    /// `addr..addr + len` must be initialised bytes of `block` that stay valid and are
    /// written by no one until the segment has left every queue and the block is unpinned:
    /// the block must be pinned for this segment (`Keyspace::pin_value`), since a pinned
    /// block is neither written nor freed (ARCHITECTURE.md, "Large values").
    pub unsafe fn pinned(pos: usize, block: crate::arena::Ref, len: usize, addr: usize) -> RefSeg {
        RefSeg {
            pos,
            block,
            len,
            addr,
        }
    }

    /// The same segment, spliced in `by` bytes later (output moved behind other bytes).
    pub fn shifted(self, by: usize) -> RefSeg {
        RefSeg {
            pos: self.pos + by,
            ..self
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The referenced value bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `pinned`'s contract: `addr..addr + len` are initialised bytes of a pinned
        // block, neither written nor freed while this segment is queued.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }
}

impl Server {
    pub fn new(config: Config) -> Result<Server, crate::arena::ArenaError> {
        let s = config.settings().clone();
        let seed = {
            let mut r = crate::util::Rng::from_time();
            [r.next_u64(), r.next_u64()]
        };
        let arena = Arena::new(s.arena_reserve_bytes, seed)?;
        let mut ks = crate::collections::new_keyspace(arena, s.databases);
        ks.lfu = s.maxmemory_policy.is_lfu();
        ks.lfu_log_factor = s.lfu_log_factor;
        ks.lfu_decay_time_min = s.lfu_decay_time;
        let mut rng = crate::util::Rng::from_time();
        let run_id: String = (0..40)
            .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
            .collect();
        let master_replid: String = (0..40)
            .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
            .collect();
        ks.events.record = commands::notify::recorded_kinds(s.notify_keyspace_events);
        let commands = CommandTable::build();
        let mut acl = commands::acl::Acl::new(&commands);
        acl.pubsub_default_all = config.get_value("acl-pubsub-default") == Some("allchannels");
        acl.set_default_password(s.requirepass.as_deref());
        let mut srv = Server {
            ks,
            arena_full_logged: false,
            pre_resolved: None,
            cmdstats: CommandStats::default(),
            commands,
            acl,
            stats: Stats::default(),
            slowlog: SlowLog::default(),
            latency: LatencyMonitor::default(),
            eviction_pool: EvictionPool::default(),
            run_id,
            start_ms: now_ms(),
            start_instant: Instant::now(),
            dirty: 0,
            lastsave_s: now_ms() / 1000,
            bgsave_scheduled: false,
            shutdown: None,
            clock_us: now_us(),
            active_expire_enabled: true,
            next_client_id: 1,
            clients: Vec::new(),
            kill_queue: Vec::new(),
            client_buffer_bytes: 0,
            tcp_port: s.port,
            listeners: None,
            client_memory: Default::default(),
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            master_replid,
            repl: Default::default(),
            snapshot: Default::default(),
            security_warning_logged_ms: i64::MIN / 2,
            reply_refs: Vec::new(),
            reply_refs_min: u64::MAX,
            dataset_swap_pending: false,
            config,
            aof: Default::default(),
            loading: false,
            pubsub: Default::default(),
            blocking: Default::default(),
            in_exec: false,
            propagate_as: None,
            in_script_call: false,
            tiering: None,
            busy_loop: None,
            migrate_sockets: Default::default(),
            script_read_seen: false,
            scripts: Default::default(),
            notify_flags: 0,
            notify_self: Vec::new(),
            notify_reply_start: 0,
            notify_self_resp: crate::protocol::reply::Resp::V2,
        };
        srv.notify_flags = s.notify_keyspace_events;
        Ok(srv)
    }

    /// Refreshes the command clock; call before running a batch of commands.
    #[inline]
    pub fn begin_batch(&mut self) {
        self.clock_us = now_us();
    }

    /// Re-reads settings after CONFIG SET.
    pub fn apply_config(&mut self) {
        let s = self.config.settings();
        self.ks.lfu = s.maxmemory_policy.is_lfu();
        self.ks.lfu_log_factor = s.lfu_log_factor;
        self.ks.lfu_decay_time_min = s.lfu_decay_time;
        let max = s.slowlog_max_len;
        self.notify_flags = s.notify_keyspace_events;
        self.ks.events.record = commands::notify::recorded_kinds(s.notify_keyspace_events);
        if self.ks.events.record == 0 {
            self.ks.events.events.clear();
        }
        self.slowlog.trim(max);
        aof_hooks::apply_config(self);
    }

    /// Redis 7's client eviction: while the clients' buffers hold at least
    /// `maxmemory-clients`, the client holding the most is disconnected (never one with
    /// CLIENT NO-EVICT on); each counts `evicted_clients`. `current` is the client whose
    /// command is about to run (taken out of `clients`), if any. False when `current` was
    /// evicted: it gets no reply and runs nothing more.
    pub fn evict_clients(&mut self, current: Option<&mut Client>) -> bool {
        let s = self.config.settings();
        let limit = s.maxmemory_clients.bytes(s.maxmemory);
        if limit == 0 || self.client_memory.total() < limit {
            return true;
        }
        // The biggest first (Redis evicts from its biggest memory bucket down).
        let mut victims: Vec<(u64, Option<usize>)> = self
            .clients
            .iter()
            .enumerate()
            .filter_map(|(slot, c)| c.as_ref().map(|c| (slot, c)))
            .filter(|(_, c)| !c.no_evict && !c.evicted)
            .map(|(slot, c)| (c.memory.bytes(), Some(slot)))
            .collect();
        let mut current = current.filter(|c| !c.no_evict && !c.evicted);
        if let Some(c) = current.as_ref() {
            victims.push((c.memory.bytes(), None));
        }
        victims.sort_by_key(|v| std::cmp::Reverse(v.0));
        let mut current_evicted = false;
        for (_, slot) in victims {
            if self.client_memory.total() < limit {
                break;
            }
            let client = match slot {
                Some(slot) => self.clients[slot].as_deref_mut(),
                None => current.as_deref_mut(),
            };
            let Some(client) = client else {
                continue;
            };
            crate::notice!("Evicting client: {}", client.info_line(now_ms()));
            self.client_memory.forget(&client.memory);
            self.stats.evicted_clients += 1;
            client.evicted = true;
            client.close_after_reply = true;
            self.kill_queue.push(client.id);
            current_evicted |= slot.is_none();
        }
        if self.client_memory.total() >= limit {
            crate::warning!("Over client maxmemory after evicting all evictable clients");
        }
        !current_evicted
    }

    /// `used_memory`: the arena's real use plus client buffers and a fixed overhead.
    pub fn used_memory(&self) -> u64 {
        self.ks.arena.used_bytes() + self.client_buffer_bytes + BASE_OVERHEAD_BYTES
    }

    /// Memory counted against `maxmemory` (as Redis, client buffers count too).
    fn memory_for_maxmemory(&self) -> u64 {
        self.used_memory()
    }

    /// Evicts until under `maxmemory`. Err when the policy cannot free enough.
    pub fn perform_evictions(&mut self) -> Result<(), CmdError> {
        let s = self.config.settings();
        let max = s.maxmemory;
        if max == 0 {
            self.stats.eviction_exceeded(false);
            return Ok(());
        }
        if self.blocking.pause.is_some() {
            return Ok(());
        }
        let (policy, samples) = (s.maxmemory_policy, s.maxmemory_samples);
        // Values with a copy on disk give their memory back first, without I/O.
        if self.tiering.is_some() {
            self.tiering_offload();
        }
        let start = Instant::now();
        while self.memory_for_maxmemory() > max {
            // Memory already on its way back (deleted big collections, flushed dbs): free
            // a slice of it before evicting more keys, so a big lazily freed value does
            // not make eviction empty the dataset.
            if self.ks.lazyfree_pending > 0 && self.ks.lazyfree_step(LAZYFREE_ENTRIES_PER_STEP) {
                if start.elapsed().as_micros() > 500 {
                    break;
                }
                continue;
            }
            if !self
                .ks
                .evict_one(policy, samples, &mut self.eviction_pool, now_ms())
            {
                self.stats.eviction_exceeded(true);
                return Err(CmdError::Oom);
            }
            // Bounded effort per command, as Redis's eviction tenacity.
            if start.elapsed().as_micros() > 500 {
                break;
            }
        }
        let over = self.memory_for_maxmemory() > max;
        self.stats.eviction_exceeded(over);
        Ok(())
    }

    pub fn alloc_client(&mut self, addr: String, laddr: String) -> Box<Client> {
        let id = self.next_client_id;
        self.next_client_id += 1;
        let mut client = Box::new(Client::new(id, addr, laddr, now_ms()));
        // As Redis's clientSetDefaultAuth: a client that connects while the default user
        // has no password is authenticated, and stays so when a password is set later.
        client.authenticated = self.acl.default_needs_no_auth();
        client
    }

    /// Runs one command for `client`, appending its reply to `out`.
    ///
    /// The command's clock is `self.clock_us`, refreshed by [`Server::begin_batch`] before
    /// a run of commands and advanced to each command's end time, so a pipeline costs one
    /// clock read per command (the end of one is the start of the next).
    pub fn execute(&mut self, client: &mut Client, args: Args, out: &mut Vec<u8>) {
        // A command boundary: where a snapshot's final pause may stop the executor (not a
        // command served while a script is busy: the script is half done).
        if !self.scripts.busy.in_busy() && self.snapshot_checkpoint() {
            self.begin_batch();
        }
        let now = self.clock_us / 1000;
        client.last_interaction_ms = now;
        self.aof.hold_lsn = 0;
        self.ks.expiry_held = self.blocking.pause.is_some();
        self.tracking_before_command(client, out);
        let mark = out.len();
        // A replica's link gets the replication stream, never replies (its PSYNC's own
        // answer is the start of that stream).
        let was_replica = client.replica || client.master;
        self.execute_inner(client, args, out, now);
        self.ks.tier.cold_ok = false;
        self.ks.tier.cold_parts_ok = false;
        if was_replica {
            self.truncate_reply(out, mark);
        }
        client.woff = self.aof.reploff;
        // A reply that starts with '-' is an error reply (INFO errorstats counts them all,
        // whichever path wrote them).
        if out.get(mark) == Some(&b'-') {
            self.stats.record_error(&out[mark + 1..]);
        }
        // Pub/sub output (confirmations, messages to oneself) is sent even when replies
        // are off, as Redis 7.0 does.
        let keep = client
            .keep_output_to
            .take()
            .unwrap_or(mark)
            .clamp(mark, out.len());
        match client.reply_mode {
            client::ReplyMode::On => {}
            client::ReplyMode::Off => self.truncate_reply(out, keep),
            client::ReplyMode::SkipNext => client.reply_mode = client::ReplyMode::Skip,
            client::ReplyMode::Skip => {
                self.truncate_reply(out, keep);
                client.reply_mode = client::ReplyMode::On;
            }
        }
        // Invalidations go after the reply, and whatever the reply mode (pushes).
        if client.tracking.is_some() || self.ks.tracking.has_pending() {
            self.tracking_after_command(client, args, out);
        }
        self.ks.tracking.current = 0;
        let referenced: usize = self.reply_refs.iter().map(|r| r.len).sum();
        self.stats.reply_bytes_referenced += referenced as u64;
        self.stats.reply_bytes_copied += (out.len() - mark) as u64;
    }

    /// Runs one command like [`Server::execute`], letting large bulk replies be queued as
    /// references: they are appended to `refs` (positions in `out`); the caller sends
    /// them and unpins each block afterwards.
    pub fn execute_refs(
        &mut self,
        client: &mut Client,
        args: Args,
        out: &mut Vec<u8>,
        refs: &mut Vec<RefSeg>,
    ) {
        let s = self.config.settings();
        self.reply_refs_min = if s.io_threads > 1 {
            s.avoid_copy_reply_threaded_min
        } else {
            s.avoid_copy_reply_min
        };
        self.execute(client, args, out);
        self.reply_refs_min = u64::MAX;
        refs.append(&mut self.reply_refs);
        // Keys this command filled serve the clients blocked on them (Redis's
        // handleClientsBlockedOnKeys after each command; EXEC counts as one).
        self.serve_ready();
    }

    /// Drops the reply bytes from `mark` on, and the references among them.
    fn truncate_reply(&mut self, out: &mut Vec<u8>, mark: usize) {
        out.truncate(mark);
        let ks = &mut self.ks;
        self.reply_refs.retain(|r| {
            if r.pos >= mark {
                ks.unpin(r.block);
                false
            } else {
                true
            }
        });
    }

    /// Drops queued reply references (a connection closed, or output discarded).
    pub fn release_refs(&mut self, refs: impl IntoIterator<Item = RefSeg>) {
        for r in refs {
            self.ks.unpin(r.block);
        }
    }

    /// The pipeline for one command, with MULTI's rules around it: inside MULTI a
    /// refused command flags the transaction, and a refused EXEC discards it with
    /// `-EXECABORT Transaction discarded because of: <error>`.
    pub(crate) fn execute_inner(
        &mut self,
        client: &mut Client,
        args: Args,
        out: &mut Vec<u8>,
        now: i64,
    ) {
        let mark = out.len();
        // As Redis's rejectCommand: a refused EXEC answers EXECABORT (even outside MULTI).
        if self.execute_checked(client, args, out, now) == Outcome::Rejected {
            if args.get(0).eq_ignore_ascii_case(b"exec") {
                let end = out.len().saturating_sub(2).max(mark);
                let mut err = out.get(mark + 1..end).unwrap_or_default().to_vec();
                // Redis formats these rejections without the generic `ERR ` code (an
                // OOM / MISCONF / NOAUTH code stays).
                if err.starts_with(b"ERR ") {
                    err.drain(..4);
                }
                out.truncate(mark);
                out.extend_from_slice(b"-EXECABORT Transaction discarded because of: ");
                out.extend_from_slice(&err);
                out.extend_from_slice(b"\r\n");
                client.multi = None;
                commands::transactions::unwatch_all(self, client);
            } else if let Some(m) = client.multi.as_mut() {
                m.error = true;
            }
        }
    }

    fn execute_checked(
        &mut self,
        client: &mut Client,
        args: Args,
        out: &mut Vec<u8>,
        now: i64,
    ) -> Outcome {
        let mut reply = Reply::new(out, client.resp);
        if self.cross_protocol_guard(client, args.get(0), now) {
            return Outcome::Rejected;
        }
        let Some((spec, parent)) = self.resolve_command(client, args, &mut reply) else {
            return Outcome::Rejected;
        };
        let admission = Admission::of(self, client, spec, parent);
        if let Err(refusal) = self.admit(client, spec, parent, args, &admission) {
            // A write refused for memory while the tier's disk is behind waits for room
            // instead (`tiering.rs`, throttling).
            if refusal.maxmemory
                && self.tiering.is_some()
                && !admission.queueing
                && !self.in_exec
                && !self.loading
                && !self.blocking.is_serving()
                && !self.in_script_call
                && !self.scripts.busy.in_busy()
                && self.tiering_throttle(client, args, now)
            {
                return Outcome::Ran;
            }
            if refusal.counted {
                self.cmdstats.get_mut(spec, parent).rejected_calls += 1;
            }
            if let Some(msg) = refusal.reply {
                reply.error(&msg);
            }
            return Outcome::Rejected;
        }
        // CLIENT PAUSE: the command waits, before MULTI would queue it (Redis's order).
        if self.blocking.pause.is_some() && !self.in_exec && !self.loading {
            let may_write = admission.flags & (commands::WRITE | commands::MAY_REPLICATE) != 0;
            if self.blocking.holds_back(may_write) {
                self.postpone(client, args);
                return Outcome::Ran;
            }
        }
        if let Some(msg) = self.tiering_refusal(spec, parent, args) {
            reply.error(&msg);
            return Outcome::Rejected;
        }
        if admission.queueing {
            return self.queue_in_multi(client, spec, args, &mut reply);
        }
        // A cold value the command needs: the client waits for its read (`tiering.rs`).
        if self.tiering.is_some()
            && !self.in_exec
            && !self.loading
            && !self.blocking.is_serving()
            && !self.in_script_call
            && !self.scripts.busy.in_busy()
            && self.tiering_gate(client, spec, args, admission.is_exec, now)
        {
            return Outcome::Ran;
        }
        self.run_command(client, spec, parent, args, reply, now, admission.is_exec)
    }

    /// Redis's guard against cross-protocol scripting: an HTTP request line (`POST ...`)
    /// or header (`Host: ...`) sent to the port closes the connection at once, with no
    /// reply, before any lookup or authentication (and drops replies still queued; see
    /// `Client::http_guard_close`). True when the connection is being closed.
    fn cross_protocol_guard(&mut self, client: &mut Client, name: &[u8], now: i64) -> bool {
        if !(name.eq_ignore_ascii_case(b"post") || name.eq_ignore_ascii_case(b"host:")) {
            return false;
        }
        self.security_warning(now);
        client.close_after_reply = true;
        client.http_guard_close = true;
        true
    }

    /// Finds the command (and subcommand) the arguments name, or answers Redis's unknown
    /// command / subcommand error. Like Redis's c->lastcmd, CLIENT LIST's `cmd=` shows
    /// the command looked up last, whether or not it then runs (NULL when unknown).
    fn resolve_command(
        &mut self,
        client: &mut Client,
        args: Args,
        reply: &mut Reply,
    ) -> Option<(&'static CommandSpec, Option<&'static CommandSpec>)> {
        client.last_cmd = "NULL";
        client.last_cmd_parent = None;
        let name = args.get(0);
        let known = match self.pre_resolved.take() {
            Some((addr, len, spec)) if addr == name.as_ptr() as usize && len == name.len() => {
                Some(spec)
            }
            _ => self.commands.lookup(name),
        };
        let Some(spec) = known else {
            self.stats.unknown_commands += 1;
            let mut msg = b"ERR unknown command '".to_vec();
            msg.extend_from_slice(c_str(name, 128));
            msg.extend_from_slice(b"', with args beginning with: ");
            let mut rest: Vec<u8> = Vec::new();
            for i in 1..args.len() {
                if rest.len() >= 128 {
                    break;
                }
                let room = 128 - rest.len();
                rest.push(b'\'');
                rest.extend_from_slice(c_str(args.get(i), room));
                rest.extend_from_slice(b"' ");
            }
            msg.extend_from_slice(&rest);
            reply.error_bytes(&msg);
            return None;
        };
        let mut resolved = (spec, None);
        if !spec.subcommands.is_empty() && args.len() >= 2 {
            let sub = args.get(1);
            match spec
                .subcommands
                .iter()
                .find(|s| s.name.as_bytes().eq_ignore_ascii_case(sub))
            {
                Some(s) => resolved = (s, Some(spec)),
                None => {
                    let mut msg = b"ERR unknown subcommand '".to_vec();
                    msg.extend_from_slice(c_str(sub, 128));
                    msg.extend_from_slice(b"'. Try ");
                    msg.extend_from_slice(spec.name.to_uppercase().as_bytes());
                    msg.extend_from_slice(b" HELP.");
                    reply.error_bytes(&msg);
                    return None;
                }
            }
        }
        client.last_cmd = resolved.0.name;
        client.last_cmd_parent = resolved.1.map(|p| p.name);
        Some(resolved)
    }

    /// The checks a resolved command passes before it runs or is queued, in Redis 7.0's
    /// order: arity, the DEBUG gate, authentication (so an unauthenticated client learns
    /// about typos and wrong arity before NOAUTH), loading, the log's write refusal,
    /// client eviction, maxmemory, a failed background save, the RESP2 pub/sub context,
    /// the arena's room. Inside EXEC only the per-command checks run (EXEC itself was
    /// admitted with its queued commands' flags).
    fn admit(
        &mut self,
        client: &mut Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
        a: &Admission,
    ) -> Result<(), Refusal> {
        if !spec.arity_ok(args.len()) {
            return Err(Refusal::counted(format!(
                "ERR wrong number of arguments for '{}' command",
                full_name(spec, parent)
            )));
        }
        if spec.flags & commands::PROTECTED != 0 {
            let setting = self.config.settings().enable_debug_command.as_str();
            let allowed = setting == "yes" || (setting == "local" && client.is_local());
            if !allowed {
                return Err(Refusal::counted(format!(
                    "ERR {} command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
                    spec.name.to_uppercase()
                )));
            }
        }
        if !self.client_may_run(client, spec) {
            return Err(Refusal::counted("NOAUTH Authentication required."));
        }
        // ACL: the command, its keys and channels (Redis checks right after NOAUTH; inside
        // EXEC again, as rules may have changed since queueing).
        // The primary's link runs with every permission (Redis's master client).
        // The usual answers (a user allowed everything, `Acl::allowed_at_once`) inline;
        // the rest, the refusal and its log out of line.
        if !client.master
            && !self
                .acl
                .user(client.user)
                .is_some_and(|u| u.unrestricted || self.acl.allowed_at_once(u, spec, &args))
        {
            self.acl_check_toplevel(client, spec, parent, args)?;
        }
        // A replica whose link is down serves only `stale` commands (INFO, REPLICAOF...)
        // under `replica-serve-stale-data no`.
        if spec.flags & commands::STALE == 0 && !client.master && self.repl_serves_no_stale_data() {
            return Err(Refusal::counted(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            ));
        }
        // While the startup image loads, only commands flagged `loading` run (INFO...).
        if spec.flags & commands::LOADING == 0 && self.is_loading() {
            return Err(Refusal::counted(
                "LOADING Redis is loading the dataset in memory",
            ));
        }
        let writes = a.flags & commands::WRITE != 0;
        // As Redis: after an AOF write/fsync error (sticky) or under the disk-space
        // watermark, writes are refused and reads go on.
        if writes && self.aof.enabled && !self.loading && a.prechecks {
            if let Some(msg) = self.aof.refuse_writes() {
                return Err(Refusal::counted(msg));
            }
        }
        // Client eviction, where Redis's processCommand runs it: after the authentication
        // checks, before key eviction. A client evicted itself runs nothing more.
        if a.prechecks && !self.evict_clients(Some(client)) {
            return Err(Refusal::silent());
        }
        // Inside MULTI any queued command is checked for memory (queueing itself takes
        // memory), except the few that queue without it.
        let queued_needs_memory =
            a.queueing && spec.flags & commands::QUEUES_WITHOUT_OOM_CHECK == 0;
        if (a.flags & commands::DENYOOM != 0 || queued_needs_memory)
            && self.config.settings().maxmemory > 0
            && !self.loading
            && a.prechecks
            && !self.scripts.busy.in_busy()
        {
            // The primary's writes are never refused for memory (Redis: a replica obeys
            // its primary; eviction still runs).
            if let Err(e) = self.perform_evictions() {
                if !client.master {
                    let mut r = Refusal::counted(e.to_string());
                    r.maxmemory = true;
                    return Err(r);
                }
            }
        }
        // Redis 7.0 refuses writes (and PING, so clients notice) after a failed background
        // save while `stop-writes-on-bgsave-error` is on and save points exist.
        if (writes || spec.flags & commands::MISCONF_REFUSED != 0)
            && a.prechecks
            && self.writes_denied_by_disk_error()
        {
            return Err(Refusal::counted(snapshot_ops::MISCONF_ERR));
        }
        // A read-only replica takes writes from its primary only.
        if writes
            && a.prechecks
            && !client.master
            && self.repl.link.is_some()
            && self.config.get_value("replica-read-only") != Some("no")
        {
            return Err(Refusal::counted(
                "READONLY You can't write against a read only replica.",
            ));
        }
        // `min-replicas-to-write`: writes wait for enough replicas that keep up.
        if writes && a.prechecks && !self.enough_good_replicas() {
            return Err(Refusal::counted(
                "NOREPLICAS Not enough good replicas to write.",
            ));
        }
        // A RESP2 client with subscriptions may only run the pub/sub context commands.
        if client.resp == crate::protocol::reply::Resp::V2
            && client.is_pubsub()
            && spec.flags & commands::PUBSUB_OK == 0
        {
            return Err(Refusal::counted(commands::pubsub::context_error(
                &full_name(spec, parent),
            )));
        }
        // While a script is busy (its hook serves other clients) only the `allow-busy`
        // commands run, as Redis 7.0's processCommand (inside MULTI the refusal flags the
        // transaction, as any).
        if spec.flags & commands::ALLOW_BUSY == 0 && self.scripts.busy.in_busy() {
            return Err(Refusal::counted(self.scripts.busy.busy_error()));
        }
        if a.prechecks {
            self.admit_to_arena(client, args, a)?;
        }
        Ok(())
    }

    /// Leaves room in the arena's address space so a write can never exhaust it. A write
    /// that may grow the dataset (`denyoom`) needs the reserve plus what its arguments
    /// could become (for EXEC, every queued command's: it is checked once, so a
    /// transaction is never cut in half); other writes (DEL, FLUSHALL, EXPIRE: the ways
    /// out of a full arena) need an eighth of it, which growth never takes. Then sets what
    /// the admitted command may still need at the bump (the smaller of the two ways
    /// `arena_admits` admits): a dict's table growth must leave it.
    fn admit_to_arena(
        &mut self,
        client: &Client,
        args: Args,
        a: &Admission,
    ) -> Result<(), Refusal> {
        let needed = if a.flags & commands::DENYOOM != 0 {
            let arg_bytes = match client.multi.as_ref() {
                Some(m) if a.is_exec => m.bytes as u64,
                _ => (1..args.len()).map(|i| args.get(i).len() as u64).sum(),
            };
            Some((self.arena_reserve_bytes(), arg_bytes))
        } else if a.flags & commands::WRITE != 0 {
            Some((self.arena_reserve_bytes() / 8, 0))
        } else {
            None
        };
        if needed.is_some_and(|(reserve, args)| !self.arena_admits_logged(reserve, args)) {
            return Err(Refusal::counted(CmdError::Oom.to_string()));
        }
        let floor = match needed {
            Some((reserve, args)) => (reserve.saturating_add(args))
                .min((reserve / 4).saturating_add(args.saturating_mul(2))),
            None => self.arena_reserve_bytes(),
        };
        self.ks.arena.set_optional_floor(floor);
        // Under the write reserve, free blocks of larger classes serve empty ones (the
        // bump is kept for what no free block can hold).
        let reserve = self.arena_reserve_bytes();
        self.ks.arena.set_split_below(reserve);
        Ok(())
    }

    /// Inside MULTI: the command is queued (or refused, which makes EXEC abort).
    fn queue_in_multi(
        &mut self,
        client: &mut Client,
        spec: &'static CommandSpec,
        args: Args,
        reply: &mut Reply,
    ) -> Outcome {
        if spec.flags & commands::NO_MULTI != 0 {
            reply.error("ERR Command not allowed inside a transaction");
            return Outcome::Rejected;
        }
        let max = self.config.settings().client_query_buffer_limit as usize;
        if !commands::transactions::queue(client, args, spec.flags, max) {
            reply.error("ERR Transaction queue exceeds client-query-buffer-limit");
            return Outcome::Rejected;
        }
        reply.simple("QUEUED");
        Outcome::Ran
    }

    /// Runs an admitted command, then what follows every command: parking a client that
    /// blocked, waking watchers and waiters of the keys it wrote, the propagation hook,
    /// and the accounting (commandstats, slow log, latency monitor).
    #[allow(clippy::too_many_arguments)]
    fn run_command(
        &mut self,
        client: &mut Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
        reply: Reply,
        now: i64,
        is_exec: bool,
    ) -> Outcome {
        let dirty_before = self.dirty;
        let db_before = client.db;
        let start = self.clock_us;
        self.ks.access_clock_ms = now;
        let mut ctx = Ctx {
            srv: self,
            client,
            args,
            out: reply,
            now_ms: now,
            spec,
        };
        // MONITOR: a command's line after it ran, in the db it left the client in; a
        // MONITOR_FIRST one's (a script's) before the commands it runs.
        let feed = if ctx.srv.pubsub.monitors.is_empty() {
            None
        } else {
            ctx.srv.monitor_feed(spec)
        };
        if feed == Some(MonitorFeed::Before) {
            let from_script = ctx.srv.in_script_call;
            commands::pubsub::feed_monitors(ctx.srv, ctx.client, db_before, args, from_script);
        }
        let outer_reply_start = if ctx.srv.notify_flags != 0 {
            commands::notify::before_command(&mut ctx)
        } else {
            0
        };
        let result = (spec.handler)(&mut ctx);
        let failed = if let Err(e) = result {
            ctx.out.error(&e.to_string());
            true
        } else {
            false
        };
        if ctx.srv.notify_flags != 0 {
            commands::notify::after_command(&mut ctx, outer_reply_start);
        }
        // Client-side caching remembers what a tracking client read (EVAL_RO and friends
        // through the commands their script runs).
        if spec.flags & commands::READONLY != 0
            && client.tracking.is_some()
            && !commands::propagate::is_script(spec.name)
            && !matches!(spec.name, "fcall_ro")
        {
            self.tracking_remember(client, spec, args);
        }
        if self.script_read_seen && !self.in_script_call {
            self.tracking_remember_script(client, spec, args);
        }
        if let Some(req) = self.blocking.request.take() {
            if failed {
                self.blocking.request = None;
            } else {
                self.park_client(client, args, req);
            }
        }
        if self.dirty > dirty_before {
            self.signal_written(spec, parent.is_some(), args, db_before);
        }
        // Propagation hook (the AOF today, replication later): a command that counted a
        // change (`Ctx::dirty`) is logged in its deterministic form, after the expiry and
        // eviction deletions it caused. Also decides how long the reply is held under
        // `appendfsync always` (`aof.hold_lsn`). Not while replaying the log itself.
        if !self.loading && !is_exec {
            aof_hooks::after_command(
                self,
                spec,
                parent.is_some(),
                args,
                db_before,
                self.dirty > dirty_before,
                now,
            );
        }
        self.propagate_as = None;
        // Secrets (passwords, ACL rules) never reach MONITOR or the slow log.
        if feed == Some(MonitorFeed::After) {
            let from_script = self.in_script_call;
            let redacted = commands::acl::redacted(spec, parent, args);
            let shown = match &redacted {
                Some((data, ranges)) => Args::new(data, ranges),
                None => args,
            };
            commands::pubsub::feed_monitors(self, client, client.db, shown, from_script);
        }
        let end = now_us();
        self.clock_us = end;
        let dur_us = (end - start).max(0) as u64;
        self.stats.total_commands_processed += 1;
        let track = self.config.settings().latency_tracking && !client.blocked;
        let entry = self.cmdstats.entry(spec, parent);
        entry.stat.calls += 1;
        entry.stat.usec += dur_us;
        if failed {
            entry.stat.failed_calls += 1;
        }
        if track {
            entry.record_latency_ns(dur_us.saturating_mul(1000));
        }
        if spec.flags & commands::SKIP_SLOWLOG == 0 {
            let threshold = self.config.settings().slowlog_log_slower_than;
            if threshold >= 0 && dur_us as i64 >= threshold {
                let max = self.config.settings().slowlog_max_len;
                let redacted = commands::acl::redacted(spec, parent, args);
                let shown = match &redacted {
                    Some((data, ranges)) => Args::new(data, ranges),
                    None => args,
                };
                self.slowlog.push(shown, dur_us, client, max);
            }
        }
        let lat_threshold_ms = self.config.settings().latency_monitor_threshold;
        if lat_threshold_ms > 0 && dur_us / 1000 >= lat_threshold_ms as u64 {
            let event = if spec.flags & commands::FAST != 0 {
                "fast-command"
            } else {
                "command"
            };
            self.latency.add(event, dur_us / 1000, now / 1000);
        }
        Outcome::Ran
    }

    /// When MONITOR sees `spec` (None: not at all): admin and `skip_monitor` commands
    /// never, nor a parked command's re-run or the log's replay.
    fn monitor_feed(&self, spec: &CommandSpec) -> Option<MonitorFeed> {
        if self.loading || self.blocking.is_serving() || spec.flags & commands::ADMIN != 0 {
            return None;
        }
        if spec.flags & commands::MONITOR_FIRST != 0 {
            Some(MonitorFeed::Before)
        } else if spec.flags & commands::SKIP_MONITOR == 0 {
            Some(MonitorFeed::After)
        } else {
            None
        }
    }

    /// Redis's signalModifiedKey at the command level: a command that changed data touches
    /// the keys it names (WATCH) and may serve clients blocked on them. Costs nothing
    /// while nobody watches or waits.
    fn signal_written(&mut self, spec: &CommandSpec, is_sub: bool, args: Args, db: usize) {
        if self.ks.watch.is_empty() && self.blocking.no_waiters() && self.ks.tracking.is_off() {
            return;
        }
        use crate::commands::propagate;
        // A handler that says how its change is logged (a served BLPOP as LPOP of one
        // key) also says which keys it changed.
        if let Some(form) = self.propagate_as.take() {
            let argv: Vec<&[u8]> = form.iter().map(|a| a.as_slice()).collect();
            let mut data = Vec::new();
            let mut rs = Vec::new();
            for a in &argv {
                rs.push((data.len(), a.len()));
                data.extend_from_slice(a);
            }
            if let Some(s2) = self.commands.lookup(argv[0]) {
                let fa = Args::new(&data, &rs);
                for i in propagate::key_indices(s2, fa.len()) {
                    self.ks.watch.touch(db, fa.get(i));
                    self.ks.tracking.touch(fa.get(i));
                    self.blocking.signal(db, fa.get(i));
                }
            }
            self.propagate_as = Some(form);
            return;
        }
        // DEL / UNLINK touch only the keys that existed: the keyspace did it. Waiters are
        // told, so an XREADGROUP blocked on a deleted stream answers (Redis 7.0).
        if matches!(spec.name, "del" | "unlink") && !is_sub {
            for i in 1..args.len() {
                self.blocking.signal(db, args.get(i));
            }
            return;
        }
        // Keys a command only reads are not touched: COPY writes its destination (an
        // extra key below), BITOP and PFMERGE their first key.
        let named: Vec<usize> = match spec.name {
            "copy" if !is_sub => vec![],
            // Their source is read; the destination is an extra key below.
            "sort" | "georadius" | "georadiusbymember" if !is_sub => vec![],
            "geosearchstore" if !is_sub => vec![1],
            "bitop" if !is_sub => vec![2],
            "pfmerge" if !is_sub => vec![1],
            _ => propagate::key_indices(spec, args.len()).collect(),
        };
        for i in named.into_iter().filter(|&i| i < args.len()) {
            self.ks.watch.touch(db, args.get(i));
            self.ks.tracking.touch(args.get(i));
            self.blocking.signal(db, args.get(i));
        }
        if is_sub {
            return;
        }
        for (d, k) in propagate::extra_written_keys(spec.name, db, args) {
            self.ks.watch.touch(d, &k);
            self.ks.tracking.touch(&k);
            self.blocking.signal(d, &k);
        }
        // An emptied database answers the XREADGROUPs blocked on its streams (Redis's
        // scanDatabaseForDeletedStreams); other waiters stay parked.
        if spec.name == "flushdb" {
            self.blocking.signal_db(db);
        } else if spec.name == "flushall" {
            self.blocking.signal_all();
        }
        if spec.name == "swapdb" {
            for i in 1..3 {
                if let Some(d) = crate::util::parse_i64(args.get(i)).filter(|&d| d >= 0) {
                    self.blocking.signal_db(d as usize);
                }
            }
        }
    }

    /// Redis's log line for the HTTP guard, at most once a minute.
    fn security_warning(&mut self, now_ms: i64) {
        if (now_ms - self.security_warning_logged_ms).abs() > 60_000 {
            crate::warning!("Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted.");
            self.security_warning_logged_ms = now_ms;
        }
    }

    fn client_may_run(&self, client: &Client, spec: &CommandSpec) -> bool {
        client.authenticated
            || spec.flags & commands::NO_AUTH != 0
            || self.acl.default_needs_no_auth()
    }

    /// Periodic work (Redis's serverCron), run `hz` times a second by the event loop.
    /// Every step is bounded in time.
    pub fn cron(&mut self) {
        self.ks.access_clock_ms = now_ms();
        aof_hooks::release_log_pins(self);
        self.snapshot_cron();
        self.migrate_sockets.close_idle();
        self.stats.sample_instantaneous(now_ms());
        self.stats.peak_memory = self.stats.peak_memory.max(self.used_memory());
        let s = self.config.settings();
        let hz = s.hz.max(1);
        let effort = s.active_expire_effort;
        // A pause keeps the dataset still: no active expiry (nor eviction).
        // A replica's keys expire when its primary's DELs arrive (as Redis's replicas).
        if self.active_expire_enabled
            && self.blocking.pause.is_none()
            && self.repl.link.is_none()
            && self.repl.restored.is_none()
        {
            // Redis's slow cycle: at most 25 % of the time between two cron runs.
            let budget = std::time::Duration::from_micros(250_000 / hz as u64);
            let cycle_start = Instant::now();
            self.ks.active_expire_cycle(now_ms(), budget, effort);
            self.stats.expire_cycle_time_us += cycle_start.elapsed().as_micros() as u64;
        }
        if s.activerehashing {
            let start = Instant::now();
            while self.ks.rehash_step_all(100) && start.elapsed().as_micros() < 1000 {}
        }
        self.lazyfree_slice(std::time::Duration::from_millis(2));
        if self.config.settings().maxmemory > 0 {
            let _ = self.perform_evictions();
        } else {
            // No limit (any more): an eviction exceeded period ends.
            self.stats.eviction_exceeded(false);
        }
        // Active expiry and eviction deleted keys: log their DELs, publish their
        // notifications; advance a rewrite.
        aof_hooks::log_deletions(self, now_ms());
        commands::pubsub::publish_recorded_events(self);
        aof_rewrite::cron(self);
        self.repl_cron();
        self.tiering_cron();
    }

    /// Frees flushed databases for at most `budget`. Returns true if work remains.
    pub fn lazyfree_slice(&mut self, budget: std::time::Duration) -> bool {
        let start = Instant::now();
        while self.ks.lazyfree_step(LAZYFREE_ENTRIES_PER_STEP) {
            if start.elapsed() >= budget {
                return true;
            }
        }
        false
    }
}

/// An argument as C's `%.Ns` prints it: up to the first NUL byte, at most `max` bytes
/// (Redis formats its unknown-command errors from C strings).
fn c_str(b: &[u8], max: usize) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len()).min(max);
    &b[..end]
}

/// What the admission checks of one command go by.
struct Admission {
    /// EXEC: admitted with the flags of the commands it holds.
    is_exec: bool,
    /// The flags checked: the command's, or for EXEC its own with its queued commands'.
    flags: u32,
    /// Inside MULTI and not one of the commands that run there: it will be queued.
    queueing: bool,
    /// Not inside EXEC (whose commands were admitted with it).
    prechecks: bool,
}

impl Admission {
    fn of(
        srv: &Server,
        client: &Client,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
    ) -> Admission {
        let top = parent.unwrap_or(spec);
        let is_exec = parent.is_none() && spec.flags & commands::TAKES_QUEUED_FLAGS != 0;
        let flags = match client.multi.as_ref() {
            Some(m) if is_exec => spec.flags | m.flags,
            _ => spec.flags,
        };
        Admission {
            is_exec,
            flags,
            queueing: client.multi.is_some() && top.flags & commands::RUNS_IN_MULTI == 0,
            prechecks: !srv.in_exec,
        }
    }
}

/// Why a command does not run: the error reply (none for a client that was evicted),
/// and whether it counts in the command's `rejected_calls`.
struct Refusal {
    reply: Option<String>,
    counted: bool,
    /// Refused for `maxmemory` (a tiered server may make the write wait instead).
    maxmemory: bool,
}

impl Refusal {
    fn counted(msg: impl Into<String>) -> Refusal {
        Refusal {
            reply: Some(msg.into()),
            counted: true,
            maxmemory: false,
        }
    }
    fn silent() -> Refusal {
        Refusal {
            reply: None,
            counted: false,
            maxmemory: false,
        }
    }
}

/// `CONFIG|SET`-style name of a command or subcommand, for error texts.
fn full_name(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) -> String {
    match parent {
        Some(p) => commands::full_name(p, spec),
        None => spec.name.to_string(),
    }
}

/// Entries freed per lazy-free step (a step takes well under 100 µs).
pub const LAZYFREE_ENTRIES_PER_STEP: usize = 1024;
/// Writes are refused when the arena's reserved address space has less than this left
/// (or an eighth of a smaller arena), beyond what the write's arguments take: room for
/// the bookkeeping a write does besides storing its arguments (entries, collection
/// nodes, a grown string of up to `proto-max-bulk-len`).
pub const ARENA_HEADROOM_BYTES: u64 = 1 << 30;
/// Declared lengths of big request arguments read in place (into arena blocks) add up to
/// at most this (or an eighth of a smaller arena); past it, a big bulk is read into its
/// connection's query buffer, which grows only with the bytes that arrive.
pub const ARG_BLOCK_BUDGET_BYTES: u64 = 4 << 30;

impl Server {
    pub fn arena_reserve_bytes(&self) -> u64 {
        ARENA_HEADROOM_BYTES.min(self.ks.arena.reserved_bytes() as u64 / 8)
    }

    pub fn arg_block_budget_bytes(&self) -> u64 {
        ARG_BLOCK_BUDGET_BYTES.min(self.ks.arena.reserved_bytes() as u64 / 8)
    }

    /// A block for a big bulk a connection has announced, or None: the bulk is then read
    /// into the connection's query buffer, which grows with the bytes that arrive and
    /// closes the client past `client-query-buffer-limit` (as Redis's does). A declared
    /// length over that limit never gets a block; the others share the in-place budget.
    pub fn try_alloc_arg_block(&mut self, len: usize) -> Option<(crate::arena::Ref, *mut u8)> {
        if self.dataset_swap_pending {
            return None;
        }
        let query_limit = self.config.settings().client_query_buffer_limit;
        if len as u64 + 2 > query_limit {
            self.ks.stats.request_args_over_budget += 1;
            return None;
        }
        let (budget, reserve) = (self.arg_block_budget_bytes(), self.arena_reserve_bytes());
        self.ks.try_alloc_arg_block(len, budget, reserve)
    }

    /// Whether a write may run that needs `reserve_bytes` of room for its bookkeeping
    /// plus `arg_bytes` for what its arguments become. Room is the bump's headroom, or
    /// free-list space to reuse when the bump still keeps a quarter of the reserve plus
    /// twice the arguments (so allocations that fit no free block have somewhere to go:
    /// a full arena that was emptied by DEL or FLUSHALL takes writes again).
    pub fn arena_admits(&self, reserve_bytes: u64, arg_bytes: u64) -> bool {
        let headroom = self.ks.arena.headroom_bytes();
        let (free_small, free_large) = self.ks.arena.free_list_bytes();
        let need = reserve_bytes.saturating_add(arg_bytes);
        headroom >= need
            || (free_small + free_large >= need.saturating_mul(2)
                && headroom >= (reserve_bytes / 4).saturating_add(arg_bytes.saturating_mul(2)))
    }

    /// [`Server::arena_admits`], logging the first refusal after a stretch of room (a
    /// full arena is one warning, not one a write) and counting every refusal.
    fn arena_admits_logged(&mut self, reserve_bytes: u64, arg_bytes: u64) -> bool {
        let room = self.arena_admits(reserve_bytes, arg_bytes);
        if !room && !self.arena_full_logged {
            crate::warning!(
                "The arena's address space is nearly exhausted ({} of {} bytes reserved left at the bump, {:?} bytes on free lists): writes that grow the dataset are refused with -OOM until memory is freed; raise arena-reserve-bytes or set maxmemory",
                self.ks.arena.headroom_bytes(),
                self.ks.arena.reserved_bytes(),
                self.ks.arena.free_list_bytes(),
            );
        }
        if !room {
            self.arena_full_logged = true;
            self.stats.arena_oom_refusals += 1;
        } else if self.arena_full_logged && self.arena_admits(self.arena_reserve_bytes(), 0) {
            self.arena_full_logged = false; // room again: a later refusal is news
        }
        room
    }
}
