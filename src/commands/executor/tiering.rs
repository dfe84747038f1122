//! SSD tiering on the executor: which values go to the tier file and when, which
//! clients wait for which read, and what the tier cannot cover yet (refused).
//!
//! - **Gate** (`tiering_gate`, in the pipeline before a top-level command runs): when a
//!   key the command names holds a cold value, the reads of all its cold keys start
//!   (one I/O per value, shared by concurrent readers) and the client is parked as a
//!   blocked client is: its reply and its later commands wait, every other client is
//!   served. When its last read ends the command runs again from the start, on values
//!   back in RAM. EXEC waits for the keys of every queued command. Commands that never
//!   read a value (DEL, UNLINK, EXISTS, TYPE, TTL, EXPIRE..., OBJECT ENCODING, a SET
//!   without GET) run at once and leave cold values cold: a deleted or overwritten cold
//!   value only frees its place in the bookkeeper.
//! - **Pass** (`tiering_step`, bounded: a fixed number of hash buckets per call, from
//!   cron and from each loop turn that wrote): walks the databases marking entries of at least
//!   `tiered-min-value-size` bytes whose value is one block (strings; listpack hashes,
//!   sets, sorted sets and lists; intsets); any access clears the mark; an entry still
//!   marked when the pass comes round is written to disk ("stashed") while memory is
//!   above [`STASH_START`] of the offload line, and keeps its RAM copy ("cooled").
//! - **Offload**: above the offload line (`maxmemory` × (1 − `tiered-offload-threshold`))
//!   the RAM copies of cooled values are dropped, oldest first, without I/O.
//! - **Throttling** (`tiering_throttle`): a write refused for `maxmemory` while the
//!   tier can still make room (the file has a free page, and values are being written
//!   or have RAM copies to drop) is parked instead, and run again when memory is under
//!   `maxmemory` — or answered `-OOM` once it has waited [`THROTTLE_MAX_MS`].
//! - **Compaction** (`tiering_compact`, from each turn, bounded by reads in flight):
//!   while the file's space amplification is above [`COMPACT_ABOVE_AMP`], shared pages
//!   less than half full are read on the tier thread, sparsest first (the fewest moves
//!   per page freed keeps the write amplification down); each record whose owner is a cold
//!   entry still naming that place (found by the key the record carries) is written
//!   again into the page being filled, and when that write ends the entry's stub is
//!   swapped in place if it still names the old place (else the copy is freed). The old
//!   page returns to the allocator with its last record.

use super::{Client, Server};
use crate::commands::{self, Args, CommandSpec};
use crate::keyspace::tiered::{ColdStub, FLAG_COOLED, FLAG_STASHING, FLAG_TMARK};
use crate::keyspace::Kind;
use crate::persistence::tiered::{Event, Placed, StashRefused, TierStore};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// Stashing starts at this fraction of the offload line, so cooled copies are ready to
/// be dropped when the line is crossed.
pub const STASH_START: f64 = 0.75;
/// Values above this stay in RAM (one stash copies the value once on the executor).
pub const MAX_TIERED_VALUE_BYTES: usize = 16 << 20;
/// Buckets the pass visits per call from cron, and per loop turn that wrote.
const CRON_SCAN_BUCKETS: usize = 4096;
const TURN_SCAN_BUCKETS: usize = 64;
/// Writes in flight beyond which the pass stops stashing (pages).
const MAX_PENDING_STASH_PAGES: u64 = 2048;
/// RAM copies dropped per call at most.
const DROP_BUDGET: usize = 512;
/// Cooled-queue items checked for staleness per pass step.
const SWEEP_ITEMS: usize = 64;
/// A partly filled shared page is written after this many pass steps.
const OPEN_PAGE_MAX_STEPS: u32 = 8;
/// The longest a write waits for the tier to make room before it is answered `-OOM`:
/// long enough for the writes the pass allows in flight ([`MAX_PENDING_STASH_PAGES`],
/// 8 MiB) to finish on a device doing a few MB/s, short enough that a stalled device
/// turns into errors before common client timeouts (seconds) turn into hangs.
pub const THROTTLE_MAX_MS: i64 = 2000;
/// Throttled writes run again per loop turn at most (each that still finds no room is
/// parked again, at the back).
const THROTTLE_RERUNS_PER_TURN: usize = 64;

/// Compaction runs while the file's space amplification (allocated bytes per live
/// record byte) is above this, and stops below it: some room under the bound of 2 the
/// sparse-page threshold guarantees, so it does not run all the time near the bound.
pub const COMPACT_ABOVE_AMP: f64 = 1.5;
/// Compaction does not bother with this many sparse pages or fewer (at most 16 KiB):
/// a page partly filled when it was written is sparse, and moving its records would
/// only make another.
const COMPACT_MIN_SPARSE_PAGES: usize = 4;
/// The compactor's page reads in flight at most (its moves are writes like the pass's,
/// bounded by [`MAX_PENDING_STASH_PAGES`]).
const COMPACT_READS_MAX: usize = 16;
/// A round over the sparse pages that moved nothing (their records belong to cooled
/// copies above the stash line, or the amplification is in big records' pages) is
/// followed by this long without reads, rather than reading the same pages again.
const COMPACT_REST_MS: i64 = 1000;

/// A parked client's reads.
struct Waiting {
    reads_left: usize,
    error: Option<Vec<u8>>,
    /// Its keys: their values are not dropped again before it runs.
    keys: Vec<(usize, Vec<u8>)>,
}

#[derive(Default, Debug, Clone)]
pub struct TierCounters {
    /// Tierable values (strings, single-block collections) a command found in RAM / had
    /// to read from disk.
    pub hits: u64,
    pub misses: u64,
    /// Values read back into RAM, and RAM copies dropped.
    pub uploads: u64,
    pub offloads: u64,
    /// Shared pages the compactor read and moved records out of; records moved (the
    /// stub swapped), and the value bytes written for moves (for the write amplification).
    pub compactions: u64,
    pub moved_records: u64,
    pub moved_bytes: u64,
    /// Cooled entries the compactor made hot again to free their records.
    pub uncooled: u64,
    /// Writes that waited for the tier to make room (each counted once), and those that
    /// got -OOM after all (the wait's bound passed, or the tier could no longer help).
    pub throttled_writes: u64,
    pub throttled_ooms: u64,
    /// Pass steps run from loop turns (the cron's are not counted).
    pub turn_steps: u64,
    /// Cold reads' timeline (`INFO tiered`, `tiered_read_wait_us_*`): reads that ended,
    /// and their cumulative microseconds from the executor's request to the read's
    /// submission to the kernel (`queue`: waiting for the read ring's in-flight bound,
    /// or for the I/O thread where there is no ring), from there to the completion
    /// being noticed (`device`: the event loop saw the ring's eventfd fire), and from
    /// there to the executor taking it at the end of that loop turn (`wake`: the rest of
    /// the turn's work); clients run again after their reads, and the microseconds from
    /// taking the completion to their command having run (`run`).
    pub read_timed: u64,
    pub read_wait_us_queue: u64,
    pub read_wait_us_device: u64,
    pub read_wait_us_wake: u64,
    pub read_resumed: u64,
    pub read_wait_us_run: u64,
}

pub struct TierState {
    pub store: TierStore,
    waiters: HashMap<u64, Vec<u64>>,
    waiting: HashMap<u64, Waiting>,
    held: HashMap<(usize, Vec<u8>), u32>,
    scan_db: usize,
    scan_cursor: u64,
    open_page_steps: u32,
    /// Where the sweep of the cooled queue goes on.
    sweep_pos: usize,
    /// `Server::dirty` at the end of the last loop turn: a turn that changed it wrote.
    dirty_seen: u64,
    /// When the offload last looked at the file (ms).
    file_checked_ms: i64,
    /// The compactor's moves whose write is in flight: new place → old place.
    moves: HashMap<ColdStub, ColdStub>,
    /// Where the compactor's walk of the sparse pages goes on: (live bytes, page), the
    /// walk goes sparsest first.
    compact_cursor: (u32, u32),
    /// Records moved or uncooled since the walk last started over, and until when it
    /// rests after a round that did nothing.
    compact_progress: u64,
    compact_rest_until_ms: i64,
    /// Tests (`DEBUG TIERED-COMPACT 0`): no compaction read starts.
    pub compact_paused: bool,
    /// Writes waiting for room, oldest first: (client id, when it gets -OOM).
    throttled: std::collections::VecDeque<(u64, i64)>,
    /// The throttled write being run again: its deadline carries over if it waits again.
    rerunning: Option<(u64, i64)>,
    pub counters: TierCounters,
}

/// Commands that never read a value: they run on cold entries as they are.
fn needs_no_value(spec: &CommandSpec, args: Args) -> bool {
    // OBJECT ENCODING answers from the entry's encoding byte, which a cold entry keeps.
    if args.len() == 3 && args.is(0, "object") && args.is(1, "encoding") {
        return true;
    }
    match spec.name {
        "del" | "unlink" | "exists" | "type" | "ttl" | "pttl" | "expiretime" | "pexpiretime"
        | "expire" | "pexpire" | "expireat" | "pexpireat" | "persist" | "touch" | "dbsize" => true,
        // A SET without GET replaces the value without looking at it.
        "set" => !(3..args.len()).any(|i| args.get(i).eq_ignore_ascii_case(b"get")),
        _ => false,
    }
}

/// Whether a value is tiered: a string or a single-block collection (one blob each, see
/// `collections::single_block`) of `min` to [`MAX_TIERED_VALUE_BYTES`] bytes. A
/// collection that converted to a multi-block encoding stays in RAM.
fn tierable(kind: Kind, value: &[u8], min: usize) -> bool {
    (min..=MAX_TIERED_VALUE_BYTES).contains(&value.len())
        && crate::collections::single_block(kind, value)
}

/// Commands refused while tiering is on: each would write a log, a stream or an RDB
/// without the values that are only in the tier file, or replace the keyspace under it.
/// SAVE, BGSAVE, SHUTDOWN SAVE and BGREWRITEAOF write an image and its tier companion
/// (an RDB is converted from such an image, reading the cold values from the companion).
fn refused(spec: &CommandSpec, parent: Option<&CommandSpec>, args: Args) -> bool {
    match parent.map_or(spec.name, |p| p.name) {
        // A replica's full sync is an RDB converted with the capture's companion; a
        // tiered server does not become a replica (its keyspace would be replaced by a
        // stream it cannot tier yet).
        "replicaof" | "slaveof" => true,
        "debug" => ["loadaof"]
            .iter()
            .any(|s| args.len() > 1 && args.get(1).eq_ignore_ascii_case(s.as_bytes())),
        _ => false,
    }
}

/// Starts tiering when `tiered-prefix` is set: the tier file, its thread, the fallback
/// reader. Called once at startup, after loading.
pub fn start(srv: &mut Server) -> Result<(), String> {
    let s = srv.config.settings().clone();
    if s.tiered_prefix.is_empty() || srv.tiering.is_some() {
        return Ok(());
    }
    let store = TierStore::open(&s.tiered_prefix, s.tiered_max_file_bytes)?;
    srv.ks.tier.reader = Some(store.sync_reader()?);
    crate::notice!(
        "Tiering on: {} ({} bytes), values of {} bytes or more",
        store.path.display(),
        s.tiered_max_file_bytes,
        s.tiered_min_value_bytes
    );
    srv.tiering = Some(Box::new(TierState {
        store,
        waiters: HashMap::new(),
        waiting: HashMap::new(),
        held: HashMap::new(),
        scan_db: 0,
        scan_cursor: 0,
        open_page_steps: 0,
        sweep_pos: 0,
        dirty_seen: 0,
        file_checked_ms: 0,
        moves: HashMap::new(),
        compact_cursor: (0, 0),
        compact_progress: 0,
        compact_rest_until_ms: 0,
        compact_paused: false,
        throttled: std::collections::VecDeque::new(),
        rerunning: None,
        counters: TierCounters::default(),
    }));
    Ok(())
}

impl Server {
    /// How the tier thread wakes the loop (the event loop's waker).
    pub fn tiering_set_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        if let Some(t) = &self.tiering {
            t.store.set_waker(wake);
        }
    }

    /// The eventfd the executor's tier read ring signals (the event loop polls it), if
    /// tiering is on and reads go through that ring.
    pub fn tiering_read_completion_fd(&self) -> Option<std::os::fd::RawFd> {
        self.tiering.as_ref()?.store.read_completion_fd()
    }

    /// The event loop saw the tier read ring's eventfd fire (its completions are taken
    /// at the end of the turn, `tiering_end_of_turn`).
    pub fn tiering_read_signalled(&mut self) {
        if let Some(t) = self.tiering.as_mut() {
            t.store.read_ring_signalled();
        }
    }

    /// A background snapshot starts (true) or ends (false): while one runs, the tier
    /// store reuses no page (see `TierStore::begin_capture`).
    pub(crate) fn tier_capture(&mut self, on: bool) {
        if let Some(t) = self.tiering.as_mut() {
            if on {
                t.store.begin_capture();
            } else {
                t.store.end_capture();
            }
        }
    }

    /// The offload line: memory above it is reclaimed by dropping cooled copies.
    fn offload_line(&self) -> u64 {
        let s = self.config.settings();
        (s.maxmemory as f64 * (1.0 - s.tiered_offload_threshold)) as u64
    }

    /// Refusal text for commands tiering does not cover yet (None: allowed).
    pub(crate) fn tiering_refusal(
        &self,
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        args: Args,
    ) -> Option<String> {
        if self.tiering.is_none() || !refused(spec, parent, args) {
            return None;
        }
        Some(format!(
            "ERR {} is not supported while tiering is on (tiered-prefix is set): it would miss the values stored in the tier file",
            super::full_name(spec, parent).to_uppercase()
        ))
    }

    /// The pipeline's gate (see the module comment). True when the client was parked.
    pub(crate) fn tiering_gate(
        &mut self,
        client: &mut Client,
        spec: &'static CommandSpec,
        args: Args,
        is_exec: bool,
        now_ms: i64,
    ) -> bool {
        if self.tiering.is_none() {
            return false;
        }
        if needs_no_value(spec, args) {
            self.ks.tier.cold_ok = true;
            return false;
        }
        let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut add = |spec: &CommandSpec, a: Args| {
            for i in commands::propagate::keys_of(spec, a).unwrap_or_default() {
                keys.push((client.db, a.get(i).to_vec()));
            }
        };
        if is_exec {
            if let Some(m) = client.multi.as_ref() {
                for c in &m.cmds {
                    let a = Args::new(&c.data, &c.ranges);
                    let Some(mut s) = self.commands.lookup(a.get(0)) else {
                        continue;
                    };
                    if !s.subcommands.is_empty() && a.len() >= 2 {
                        if let Some(sub) = s
                            .subcommands
                            .iter()
                            .find(|x| x.name.as_bytes().eq_ignore_ascii_case(a.get(1)))
                        {
                            s = sub;
                        }
                    }
                    add(s, a);
                }
            }
        } else if spec.name == "debug" && args.len() == 3 && args.is(1, "object") {
            // DEBUG OBJECT reads the value (its serialized length) of a key it does not
            // declare.
            keys.push((client.db, args.get(2).to_vec()));
        } else {
            add(spec, args);
        }
        let Some(t) = self.tiering.as_mut() else {
            return false;
        };
        let min = self.config.settings().tiered_min_value_bytes as usize;
        let mut reads = Vec::new();
        let mut cold_keys = Vec::new();
        for (db, key) in keys {
            let Some(e) = self.ks.find_raw(db, &key) else {
                continue;
            };
            if self.ks.is_expired(e, now_ms) {
                continue;
            }
            match self.ks.cold_stub(e) {
                Some(stub) => {
                    t.counters.misses += 1;
                    let id = t.store.read(db, &key, stub);
                    if !reads.contains(&id) {
                        reads.push(id);
                    }
                    cold_keys.push((db, key));
                }
                None if tierable(self.ks.kind(e), self.ks.value(e), min) => t.counters.hits += 1,
                None => {}
            }
        }
        if reads.is_empty() {
            return false;
        }
        for &id in &reads {
            t.waiters.entry(id).or_default().push(client.id);
        }
        for k in &cold_keys {
            *t.held.entry(k.clone()).or_default() += 1;
        }
        t.waiting.insert(
            client.id,
            Waiting {
                reads_left: reads.len(),
                error: None,
                keys: cold_keys,
            },
        );
        self.park_for_io(client, args);
        true
    }

    /// Each turn of the loop (and from cron): frees the places of deleted cold values,
    /// takes the I/O thread's completions (stashed values become cooled, read values
    /// come back into RAM and their clients run), then keeps memory under the offload
    /// line.
    pub fn tiering_turn(&mut self) {
        let Some(mut t) = self.tiering.take() else {
            return;
        };
        for stub in std::mem::take(&mut self.ks.tier.freed) {
            t.store.free(stub);
        }
        for r in std::mem::take(&mut self.ks.tier.rewarmed) {
            t.counters.uploads += 1;
            let gen = t.store.generation();
            t.store.cooled.push_front(Placed {
                db: r.db,
                key: r.key,
                stub: r.stub,
                value_hash: r.value_hash,
                gen,
            });
        }
        let upload_line = {
            let s = self.config.settings();
            (s.maxmemory as f64 * (1.0 - s.tiered_upload_threshold)) as u64
        };
        let mut resume: Vec<(u64, Option<Vec<u8>>, std::time::Instant)> = Vec::new();
        for ev in t.store.poll() {
            match ev {
                Event::Stashed { items, result } => {
                    for p in items {
                        self.stash_done(&mut t, p, result.is_ok());
                    }
                }
                Event::PageRead { page, result } => self.compact_page(&mut t, page, result),
                Event::Read {
                    id,
                    db,
                    key,
                    stub,
                    result,
                    times,
                } => {
                    let us = |a: std::time::Instant, b: std::time::Instant| {
                        b.saturating_duration_since(a).as_micros() as u64
                    };
                    let c = &mut t.counters;
                    c.read_timed += 1;
                    c.read_wait_us_queue += us(times.started, times.submitted);
                    c.read_wait_us_device += us(times.submitted, times.completed);
                    c.read_wait_us_wake += us(times.completed, times.polled);
                    let e = self
                        .ks
                        .find_raw(db, &key)
                        .filter(|&e| self.ks.cold_stub(e) == Some(stub));
                    let mut error = None;
                    // Good checksums say the bytes are the ones written, not that they
                    // are a value the collection code may trust.
                    let result = match (e, result) {
                        (Some(e), Ok(v))
                            if !crate::collections::single_block_is_valid(self.ks.kind(e), &v) =>
                        {
                            Err(crate::keyspace::tiered::BAD_BLOB.to_string())
                        }
                        (_, r) => r,
                    };
                    match (e, result) {
                        (Some(e), Ok(v)) => {
                            let value_hash = self.ks.arena.hash(&v);
                            let fits = self.used_memory() + v.len() as u64 <= upload_line;
                            self.ks.make_warm(db, e, &v);
                            t.counters.uploads += 1;
                            let p = Placed {
                                db,
                                key,
                                stub,
                                value_hash,
                                gen: t.store.generation(),
                            };
                            // Memory short: this copy is the first to go again.
                            if fits {
                                t.store.cooled.push_back(p);
                            } else {
                                t.store.cooled.push_front(p);
                            }
                        }
                        (Some(_), Err(msg)) => {
                            let k = String::from_utf8_lossy(&key).into_owned();
                            crate::warning!("Tiered read of key '{k}' failed: {msg}");
                            error = Some(
                                format!("-ERR tiered read of key '{k}' failed: {msg}\r\n")
                                    .into_bytes(),
                            );
                        }
                        // Deleted or replaced meanwhile: the command runs on what is there.
                        (None, _) => {}
                    }
                    for cid in t.waiters.remove(&id).unwrap_or_default() {
                        let Some(w) = t.waiting.get_mut(&cid) else {
                            continue;
                        };
                        w.reads_left -= 1;
                        if w.error.is_none() {
                            w.error = error.clone();
                        }
                        if w.reads_left == 0 {
                            let w = t.waiting.remove(&cid).expect("waiting");
                            for k in w.keys {
                                if let Some(n) = t.held.get_mut(&k) {
                                    *n -= 1;
                                    if *n == 0 {
                                        t.held.remove(&k);
                                    }
                                }
                            }
                            resume.push((cid, w.error, times.polled));
                        }
                    }
                }
            }
        }
        self.tiering_compact(&mut t);
        self.tiering = Some(t);
        for (cid, error, polled) in resume {
            match error {
                Some(reply) => self.answer_parked(cid, reply),
                None => self.rerun_after_io(cid),
            }
            if let Some(t) = self.tiering.as_mut() {
                t.counters.read_resumed += 1;
                t.counters.read_wait_us_run += polled.elapsed().as_micros() as u64;
            }
        }
        self.tiering_offload();
        self.tiering_wake_throttled();
    }

    /// Whether the tier can still make room: the file has a free page, and values are
    /// on their way to disk or have RAM copies the offload can drop.
    fn tier_can_make_room(t: &TierState) -> bool {
        t.store.has_room() && (t.store.pending_stash_count() > 0 || !t.store.cooled.is_empty())
    }

    /// A write was refused for `maxmemory`: parks it (true) while the tier can make
    /// room and it has waited less than [`THROTTLE_MAX_MS`]; false answers `-OOM`.
    pub(crate) fn tiering_throttle(&mut self, client: &mut Client, args: Args, now: i64) -> bool {
        let Some(t) = self.tiering.as_mut() else {
            return false;
        };
        let (deadline, first) = match t.rerunning.take() {
            Some((id, d)) if id == client.id => (d, false),
            other => {
                t.rerunning = other;
                (now + THROTTLE_MAX_MS, true)
            }
        };
        if now >= deadline || !Self::tier_can_make_room(t) {
            if !first {
                t.counters.throttled_ooms += 1;
            }
            return false;
        }
        if first {
            t.counters.throttled_writes += 1;
        }
        t.throttled.push_back((client.id, deadline));
        self.park_for_io(client, args);
        true
    }

    /// Runs throttled writes again, oldest first, once memory is under `maxmemory` (or
    /// their wait's bound passed: they get -OOM); bounded per turn.
    fn tiering_wake_throttled(&mut self) {
        if self.tiering.as_ref().is_none_or(|t| t.throttled.is_empty()) {
            return;
        }
        let now = crate::util::now_ms();
        let max = self.config.settings().maxmemory;
        for _ in 0..THROTTLE_RERUNS_PER_TURN {
            let room = self.memory_for_maxmemory() < max;
            let Some(t) = self.tiering.as_mut() else {
                return;
            };
            let Some(&(id, deadline)) = t.throttled.front() else {
                return;
            };
            if !room && now < deadline {
                return;
            }
            t.throttled.pop_front();
            t.rerunning = Some((id, deadline));
            self.rerun_after_io(id);
            if let Some(t) = self.tiering.as_mut() {
                t.rerunning = None;
            }
        }
    }

    /// A value's write ended: it becomes cooled if the entry still holds exactly the
    /// bytes written and the file was not cut since the write was placed; otherwise its
    /// place is freed (the value stays in RAM, to be written again).
    fn stash_done(&mut self, t: &mut TierState, p: Placed, ok: bool) {
        let ok = ok && p.gen == t.store.generation();
        if let Some(old) = t.moves.remove(&p.stub) {
            return self.move_done(t, p, old, ok);
        }
        let e = self.ks.find_raw(p.db, &p.key);
        if let Some(e) = e {
            self.ks.set_tier_bits(e, FLAG_STASHING, false);
        }
        let current = e.filter(|&e| {
            !self.ks.is_cold(e)
                && self.ks.tier_bits(e) & FLAG_COOLED == 0
                && self.ks.value(e).len() == p.stub.value_bytes as usize
                && self.ks.value_hash(e) == p.value_hash
        });
        match current {
            Some(e) if ok => {
                self.ks.set_tier_bits(e, FLAG_COOLED, true);
                t.store.cooled.push_back(p);
            }
            _ => t.store.free(p.stub),
        }
    }

    /// Starts the compactor's page reads (see the module comment) while the file's space
    /// amplification is above [`COMPACT_ABOVE_AMP`]: sparse pages sparsest first, from
    /// the (live bytes, page) where the last call stopped, at most [`COMPACT_READS_MAX`]
    /// in flight, none the compactor found damaged. Not while
    /// a snapshot copies the file (its frees are held back, so moving would only grow
    /// the file) nor while the disk is behind with writes. O(log pages) per page started.
    fn tiering_compact(&mut self, t: &mut TierState) {
        let b = &t.store.book;
        if t.store.capturing()
            || t.compact_paused
            || b.sparse_pages() <= COMPACT_MIN_SPARSE_PAGES
            || b.space_amplification() <= COMPACT_ABOVE_AMP
            || t.store.pending_stash_pages() > MAX_PENDING_STASH_PAGES
            || t.store.page_reads_in_flight() >= COMPACT_READS_MAX
        {
            return;
        }
        let now = crate::util::now_ms();
        if now < t.compact_rest_until_ms {
            return;
        }
        let mut wrapped = false;
        while t.store.page_reads_in_flight() < COMPACT_READS_MAX {
            let want = COMPACT_READS_MAX - t.store.page_reads_in_flight();
            let pages = t.store.book.sparse_pages_from(t.compact_cursor, want);
            if pages.is_empty() {
                if wrapped || t.compact_cursor == (0, 0) {
                    break;
                }
                t.compact_cursor = (0, 0);
                wrapped = true;
                if t.compact_progress == 0 {
                    t.compact_rest_until_ms = now + COMPACT_REST_MS;
                    break;
                }
                t.compact_progress = 0;
                continue;
            }
            for (live, p) in pages {
                t.compact_cursor = (live, p.saturating_add(1));
                if t.store.page_settled(p) && !t.store.is_damaged(p) {
                    t.store.read_page(p);
                }
            }
        }
    }

    /// The compactor's read of shared page `page` ended: each record whose owner is a
    /// cold entry naming exactly this place is placed anew (its write is queued; the
    /// stub changes when it ends, [`Server::move_done`]). The owner is found by the
    /// record's key in each database (a place has one owner, so at most one matches).
    /// A record owned by a cooled-queue item (the entry is cooled, its RAM bytes are the
    /// record's) cannot be moved without finding the item in the queue (O(queue)), so
    /// while memory is below the stash line the entry stops being cooled instead: the
    /// item is then stale and the sweep frees the record (the value stays in RAM, as a
    /// value never stashed would; above that line the offload soon makes the entry cold
    /// and a later round moves it). Records of writes in flight are never met: their
    /// pages are not read ([`TierStore::page_settled`]). Bounded by a page's records.
    fn compact_page(&mut self, t: &mut TierState, page: u32, result: Result<Vec<u8>, String>) {
        let buf = match result {
            Ok(b) => b,
            // Its records stay where they are: each key's own read checks the pages it
            // covers and fails naming the key if they are damaged. A page whose bytes
            // are wrong (checksum, cut file) is not read again while it holds records;
            // an I/O error may pass, so the page is read again in a later round.
            Err(e) => {
                let bad_bytes = e.starts_with("checksum mismatch") || e.starts_with("short read");
                if !bad_bytes || t.store.mark_damaged(page) {
                    crate::warning!(
                        "Tiering: the compactor's read of page {page} failed: {e}; its records stay in place"
                    );
                }
                return;
            }
        };
        let now = crate::util::now_ms();
        let uncool = (self.used_memory() as f64) < self.offload_line() as f64 * STASH_START;
        let mut moved = false;
        for r in crate::persistence::tiered::page::page_records(&buf) {
            let stub = ColdStub {
                page,
                offset: r.offset,
                record_bytes: crate::persistence::tiered::page::record_bytes(
                    r.key.len(),
                    r.value.len(),
                ) as u32,
                value_bytes: r.value.len() as u32,
            };
            let owner = (0..self.ks.num_dbs()).find(|&db| {
                self.ks.find_raw(db, r.key).is_some_and(|e| {
                    self.ks.cold_stub(e) == Some(stub) && !self.ks.is_expired(e, now)
                })
            });
            let Some(db) = owner else {
                if uncool && self.uncool_owner(t, r.key, r.value) {
                    t.compact_progress += 1;
                }
                continue;
            };
            match t.store.stash(db, r.key, r.value, 0) {
                Ok(new) => {
                    t.moves.insert(new, stub);
                    t.compact_progress += 1;
                    moved = true;
                }
                Err(StashRefused::NoSpace) => break,
            }
        }
        if moved {
            t.counters.compactions += 1;
        }
    }

    /// The compactor met a record whose key's entry is cooled with exactly the record's
    /// bytes (in any database): the entry stops being cooled (see [`Server::compact_page`]).
    fn uncool_owner(&mut self, t: &mut TierState, key: &[u8], value: &[u8]) -> bool {
        let mut any = false;
        for db in 0..self.ks.num_dbs() {
            let Some(e) = self.ks.find_raw(db, key) else {
                continue;
            };
            if !self.ks.is_cold(e)
                && self.ks.tier_bits(e) & FLAG_COOLED != 0
                && self.ks.value(e) == value
                && !t.held.contains_key(&(db, key.to_vec()))
            {
                self.ks.set_tier_bits(e, FLAG_COOLED, false);
                t.counters.uncooled += 1;
                any = true;
            }
        }
        any
    }

    /// A compaction move's write ended: the entry takes the new place if it is still
    /// cold at the old one (a delete, overwrite or read in between wins: the copy is
    /// freed), and the old place is freed. O(1).
    fn move_done(&mut self, t: &mut TierState, p: Placed, old: ColdStub, ok: bool) {
        if ok {
            t.counters.moved_bytes += p.stub.value_bytes as u64;
        }
        let e = self
            .ks
            .find_raw(p.db, &p.key)
            .filter(|&e| self.ks.cold_stub(e) == Some(old));
        match e {
            Some(e) if ok => {
                self.ks.move_cold_stub(e, p.stub);
                t.store.free(old);
                t.counters.moved_records += 1;
            }
            _ => t.store.free(p.stub),
        }
    }

    /// Whether cooled-queue item `p` still describes its entry's value (a stale one's
    /// place can be freed).
    fn cooled_current(&self, p: &Placed) -> Option<crate::arena::Ref> {
        self.ks.find_raw(p.db, &p.key).filter(|&e| {
            !self.ks.is_cold(e)
                && self.ks.tier_bits(e) & FLAG_COOLED != 0
                && self.ks.value(e).len() == p.stub.value_bytes as usize
                && self.ks.value_hash(e) == p.value_hash
        })
    }

    /// Whether cooled-queue item `p` may still describe its entry's value, by the checks
    /// that hash nothing: the entry exists, is cooled and has the copy's length. Every
    /// write to a value clears its cooled flag (`Keyspace::value_mut`, `resize_value`),
    /// so an item this keeps by mistake is one the hash alone would catch: the offload
    /// checks it fully ([`Server::cooled_current`]) before dropping the RAM copy, and
    /// frees its place then. Hashing the sweep's 64 values (4 KiB each in the tiering
    /// benchmark) per step was most of a cold read's executor time.
    fn cooled_maybe_current(&self, p: &Placed) -> bool {
        self.ks.find_raw(p.db, &p.key).is_some_and(|e| {
            !self.ks.is_cold(e)
                && self.ks.tier_bits(e) & FLAG_COOLED != 0
                && self.ks.value(e).len() == p.stub.value_bytes as usize
        })
    }

    /// A bounded sweep of the cooled queue: items whose entry was deleted, flushed or
    /// changed give their place in the file back without waiting for memory pressure
    /// to reach them (the newest item moves into a freed slot, so the queue's order is
    /// approximate).
    fn tiering_sweep(&mut self, t: &mut TierState) {
        for _ in 0..SWEEP_ITEMS {
            if t.sweep_pos >= t.store.cooled.len() {
                t.sweep_pos = 0;
                return;
            }
            let p = &t.store.cooled[t.sweep_pos];
            if self.cooled_maybe_current(p) || t.held.contains_key(&(p.db, p.key.clone())) {
                t.sweep_pos += 1;
                continue;
            }
            // O(1): the newest item takes the stale one's slot.
            if let Some(p) = t.store.cooled.swap_remove_back(t.sweep_pos) {
                t.store.free(p.stub);
            }
        }
    }

    /// Drops cooled RAM copies, oldest first, while memory is above the offload line
    /// (bounded per call). A copy whose entry changed since is stale: its place is freed.
    /// A copy placed before the file was last found cut is not dropped: the entry stays
    /// in RAM as a hot value (written again by the pass) and the place is freed. The
    /// file is looked at (one `fstat`, at most once a millisecond) before copies are
    /// dropped, so a truncation is seen before the copies it cut are relied on.
    pub(crate) fn tiering_offload(&mut self) {
        let line = self.offload_line();
        let Some(mut t) = self.tiering.take() else {
            return;
        };
        if !t.store.cooled.is_empty() && self.used_memory() > line {
            // At most once a millisecond: a loop turn under pressure would otherwise pay
            // a system call each.
            let now = crate::util::now_ms();
            if now != t.file_checked_ms {
                t.file_checked_ms = now;
                t.store.check_file();
            }
        }
        let gen = t.store.generation();
        let mut budget = DROP_BUDGET;
        let mut skipped = 0;
        while budget > 0 && self.used_memory() > line {
            let Some(p) = t.store.cooled.pop_front() else {
                break;
            };
            budget -= 1;
            // A parked client waits to run on this value: not now.
            if t.held.contains_key(&(p.db, p.key.clone())) {
                t.store.cooled.push_back(p);
                skipped += 1;
                if skipped > t.store.cooled.len() {
                    break;
                }
                continue;
            }
            match self.cooled_current(&p) {
                Some(e) if p.gen == gen => {
                    self.ks.make_cold(p.db, e, p.stub);
                    t.counters.offloads += 1;
                }
                Some(e) => {
                    self.ks.set_tier_bits(e, FLAG_COOLED, false);
                    t.store.free(p.stub);
                }
                None => t.store.free(p.stub),
            }
        }
        self.tiering = Some(t);
    }

    /// One bounded step of the marking pass (see the module comment): `buckets` hash
    /// buckets at most. Stashes only while memory is above [`STASH_START`] of the
    /// offload line and the disk keeps up.
    pub fn tiering_step(&mut self, buckets: usize) {
        let Some(mut t) = self.tiering.take() else {
            return;
        };
        let s = self.config.settings();
        let min = (s.tiered_min_value_bytes as usize).max(1);
        let line = self.offload_line();
        let used = self.used_memory();
        let stash_on = used as f64 > line as f64 * STASH_START;
        let mut entries = Vec::new();
        let num_dbs = self.ks.num_dbs();
        let mut room = true;
        for _ in 0..buckets {
            if t.scan_db >= num_dbs {
                t.scan_db = 0;
            }
            let db = t.scan_db;
            entries.clear();
            t.scan_cursor = self.ks.scan(db, t.scan_cursor, |e| entries.push(e));
            if t.scan_cursor == 0 {
                t.scan_db += 1;
            }
            for &e in &entries {
                let bits = self.ks.tier_bits(e);
                if bits & !FLAG_TMARK != 0 {
                    continue; // cold, cooled or being written
                }
                if !tierable(self.ks.kind(e), self.ks.value(e), min) {
                    continue;
                }
                if bits & FLAG_TMARK == 0 {
                    self.ks.set_tier_bits(e, FLAG_TMARK, true);
                    continue;
                }
                if !stash_on || !room || t.store.pending_stash_pages() > MAX_PENDING_STASH_PAGES {
                    continue;
                }
                let value = self.ks.value(e);
                let hash = self.ks.arena.hash(value);
                match t.store.stash(db, self.ks.key(e), value, hash) {
                    Ok(_) => {
                        self.ks.set_tier_bits(e, FLAG_STASHING, true);
                        self.ks.set_tier_bits(e, FLAG_TMARK, false);
                    }
                    Err(StashRefused::NoSpace) => room = false,
                }
            }
        }
        self.tiering_sweep(&mut t);
        // A partly filled shared page is written when memory is needed or it has waited.
        t.open_page_steps += 1;
        if used > line || t.open_page_steps >= OPEN_PAGE_MAX_STEPS {
            t.store.flush();
            t.open_page_steps = 0;
        }
        self.tiering = Some(t);
    }

    /// From cron: a bigger pass step (its completions are taken at the end of the
    /// loop's turn, where the replies of resumed clients are delivered).
    pub fn tiering_cron(&mut self) {
        let Some(t) = self.tiering.as_mut() else {
            return;
        };
        t.store.check_file();
        self.tiering_step(CRON_SCAN_BUCKETS);
    }

    /// Whether `client_id` waits for a tier read (CLIENT UNBLOCK leaves it alone: it is
    /// not blocked by a command of its own choosing).
    pub fn tiering_parks(&self, client_id: u64) -> bool {
        self.tiering.as_ref().is_some_and(|t| {
            t.waiting.contains_key(&client_id) || t.throttled.iter().any(|&(id, _)| id == client_id)
        })
    }

    /// From each loop turn: completions, and a small pass step while memory is high and
    /// the turn wrote (or writes wait for room). Only writes make values the pass has to
    /// stash or queue items the sweep has to free; a value a read brings back is cooled
    /// already. A turn that only read skips the step: at one request per turn its 64
    /// bucket scans and 64 lookups were most of a cold read's executor time.
    pub fn tiering_end_of_turn(&mut self) {
        let dirty = self.dirty;
        let Some(t) = self.tiering.as_mut() else {
            return;
        };
        // `dirty` restarts from 0 at each save: any change from the last value seen is a
        // write.
        let wrote = dirty != t.dirty_seen;
        t.dirty_seen = dirty;
        let throttled = !t.throttled.is_empty();
        if (wrote || throttled)
            && self.used_memory() as f64 > self.offload_line() as f64 * STASH_START
        {
            if let Some(t) = self.tiering.as_mut() {
                t.counters.turn_steps += 1;
            }
            self.tiering_step(TURN_SCAN_BUCKETS);
        }
        self.tiering_turn();
    }

    /// `DEBUG TIERED-STATE key`: where a key's value is (`hot`, `stashing`, `cooled`,
    /// `cold`), without reading it.
    pub fn tiering_state_of(&self, db: usize, key: &[u8]) -> Option<&'static str> {
        let e = self.ks.find_raw(db, key)?;
        let bits = self.ks.tier_bits(e);
        Some(if self.ks.is_cold(e) {
            "cold"
        } else if bits & FLAG_COOLED != 0 {
            "cooled"
        } else if bits & FLAG_STASHING != 0 {
            "stashing"
        } else {
            "hot"
        })
    }

    /// `INFO tiered`.
    pub fn info_tiered(&self, out: &mut String) {
        let mut line = |k: &str, v: &dyn std::fmt::Display| {
            let _ = write!(out, "{k}:{v}\r\n");
        };
        let Some(t) = &self.tiering else {
            line("tiered_enabled", &0);
            return;
        };
        let b = &t.store.book;
        let st = &t.store.stats;
        let c = &t.counters;
        line("tiered_enabled", &1);
        line("tiered_entries", &self.ks.tier.cold_entries);
        line("tiered_entries_bytes", &self.ks.tier.cold_bytes);
        line("tiered_pending_read_cnt", &t.store.pending_read_count());
        line("tiered_pending_stash_cnt", &t.store.pending_stash_count());
        line("tiered_allocated_bytes", &(b.allocated_pages() * 4096));
        line("tiered_capacity_bytes", &(b.capacity_pages() as u64 * 4096));
        line("tiered_live_record_bytes", &b.live_record_bytes());
        line("tiered_cooled_entries", &t.store.cooled.len());
        line("tiered_hits", &c.hits);
        line("tiered_misses", &c.misses);
        line("tiered_uploads", &c.uploads);
        line("tiered_offloads", &c.offloads);
        line("tiered_stashes", &st.stashes);
        line("tiered_stash_bytes", &st.stash_bytes);
        line("tiered_stash_errors", &st.stash_errors);
        line("tiered_stash_no_space", &st.stash_no_space);
        line("tiered_reads", &st.reads);
        line("tiered_reads_shared", &st.reads_shared);
        line("tiered_read_errors", &st.read_errors);
        line("tiered_sync_reads", &self.ks.tier.sync_reads);
        line("tiered_sync_read_errors", &self.ks.tier.sync_read_errors);
        line("tiered_file_bytes", &t.store.file.last_len);
        line("tiered_file_deleted", &(t.store.file.deleted as u8));
        line("tiered_file_truncations", &t.store.file.truncations);
        line("tiered_small_pages", &b.small_pages());
        line("tiered_free_extents", &b.free_extents());
        line("tiered_sparse_pages", &b.sparse_pages());
        line("tiered_compactions", &c.compactions);
        line("tiered_compaction_moved_records", &c.moved_records);
        line("tiered_compaction_moves_pending", &t.moves.len());
        line("tiered_compaction_uncooled", &c.uncooled);
        line("tiered_compaction_moved_bytes", &c.moved_bytes);
        line("tiered_compaction_reads", &st.page_reads);
        line("tiered_compaction_read_errors", &st.page_read_errors);
        line("tiered_compaction_damaged_pages", &t.store.damaged_pages());
        line("tiered_partial_page_writes", &st.partial_pages);
        line("tiered_throttled_writes", &c.throttled_writes);
        line("tiered_throttled_ooms", &c.throttled_ooms);
        line("tiered_throttled_clients", &t.throttled.len());
        line("tiered_pass_turn_steps", &c.turn_steps);
        line("tiered_read_path", &t.store.read_path());
        let (ring_in_flight, ring_queued) = t.store.ring_reads();
        line("tiered_read_ring_in_flight", &ring_in_flight);
        line("tiered_read_ring_queued", &ring_queued);
        line("tiered_read_timed", &c.read_timed);
        line("tiered_read_wait_us_queue", &c.read_wait_us_queue);
        line("tiered_read_wait_us_device", &c.read_wait_us_device);
        line("tiered_read_wait_us_wake", &c.read_wait_us_wake);
        line("tiered_read_resumed", &c.read_resumed);
        line("tiered_read_wait_us_run", &c.read_wait_us_run);
        line(
            "tiered_space_amplification",
            &format_args!("{:.2}", b.space_amplification()),
        );
        // Bytes written to the file per byte of value the pass stashed (moves and page
        // headers and unfilled page ends are the excess).
        let stashed = st.stash_bytes.saturating_sub(c.moved_bytes);
        let wa = if stashed == 0 {
            1.0
        } else {
            (st.written_pages * 4096) as f64 / stashed as f64
        };
        line("tiered_write_amplification", &format_args!("{wa:.2}"));
        line("tiered_written_bytes", &(st.written_pages * 4096));
    }
}
