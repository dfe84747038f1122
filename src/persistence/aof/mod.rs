//! The append-only log (Redis 7's multi-part AOF, with per-entry headers).
//!
//! Layout (as Redis 7): `<dir>/<appenddirname>/` holds a manifest
//! (`<appendfilename>.manifest`), one base file (BGREWRITEAOF's snapshot of the data:
//! `<appendfilename>.<seq>.base.rdb`, an RDB file, or `.base.cimg`, a snapshot image;
//! `.base.aof` command bases of older directories still load) and incremental files
//! (`<appendfilename>.<seq>.incr.aof`) with every write since. Each entry carries a
//! `#HDR:` line (LSN, replication id/offset, CRC-64) that Redis 7 skips: see
//! `docs/formats/aof.md` and [`format`].
//!
//! Who does what:
//! - the executor ([`Aof`]): after a write command, [`Aof::feed`] frames its (deterministic)
//!   form into an in-memory buffer; once per event-loop iteration [`Aof::flush`] hands the
//!   buffer to the writer thread; with `appendfsync always` the event loop holds the
//!   command's reply (and replies that read keys it dirtied) until `durable_lsn` covers it.
//! - the writer thread ([`writer`]): writes, syncs (group commit), publishes `durable_lsn`.
//! - startup ([`load`]): replays the base and incremental files through
//!   `Server::execute`, verifying CRCs and LSNs; a torn tail is cut.
//! - BGREWRITEAOF ([`rewrite`]): a new base from a snapshot of the arena taken by the
//!   snapshot engine (no fork, nothing proportional to the dataset on the executor).

pub mod format;
pub mod load;
pub mod manifest;
pub mod prealloc;
pub mod rewrite;
pub mod storage;
#[cfg(test)]
pub(crate) mod testing;
pub mod uring;
pub mod writer;

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use writer::{FsyncMode, Writer};

pub use load::check_aof_cli;

/// Hand-overs to the writer remembered for [`Aof::fsynced_reploff`].
const MAX_FSYNC_MARKS: usize = 4096;

/// Values at least this long are logged by reference ([`Aof::feed_ref`]): the executor
/// frames the entry around the value's pinned arena block and the writer thread
/// checksums it and writes it from the block. Below it a copy (and CRC) on the executor costs less than what a
/// reference adds: a pin and its release, and a batch that must go through the writer
/// thread (the file lent to the executor is given back for it). 64 KiB is also where
/// request arguments start to be read straight into arena blocks (`BIG_ARG_BYTES`), so a
/// big SET value reaches the log without the executor copying it at all.
pub const LOG_BY_REFERENCE_MIN_BYTES: usize = 64 << 10;

/// How long a write framed while the executor's sync ring is idle may wait for the end of
/// its turn before a sync starts between connections (see [`Aof::flush_if_writer_idle`]):
/// at most one such sync per 500 µs of a long turn, where a sync on tmpfs takes ~10 µs and
/// on this machine's disk ~150–300 µs, so the wait stays within one or two syncs' time.
/// A constant, not the syncs' measured time: that is issue-to-reap, which grows with the
/// executor's turns when the machine is short of CPU, and would make turns hold their
/// writes longer still.
pub const MIDTURN_HOLD: std::time::Duration = std::time::Duration::from_micros(500);

/// The executor's side of the log. Disabled (all calls cheap no-ops) when `appendonly no`.
pub struct Aof {
    pub enabled: bool,
    pub mode: FsyncMode,
    pub timestamps: bool,
    /// Framed entries not yet handed to the writer.
    buf: Vec<u8>,
    /// Entries in `buf` whose values are referred to, not copied (positions in `buf`).
    buf_refs: Vec<format::ValueRef>,
    /// (LSN, block) of every value logged by reference whose block is still pinned for
    /// the log: unpinned once the writer has written it ([`Aof::released_pins`]).
    value_pins: VecDeque<(u64, crate::arena::Ref)>,
    /// Entries logged by reference since startup (INFO `aof_values_by_reference`).
    pub values_by_reference: u64,
    scratch: Vec<u8>,
    /// LSN of the last entry framed (0: none yet).
    pub last_lsn: u64,
    pub replid: String,
    /// Replication offset after the last entry (sum of the logged commands' RESP bytes).
    pub reploff: u64,
    /// The db the log's last SELECT chose (None: the next entry needs a SELECT).
    pub(crate) selected_db: Option<usize>,
    /// While the server has a replication backlog: the replication stream's bytes framed
    /// since the server last took them (every logged command's RESP form, including what
    /// only replicas get — PING, REPLCONF GETACK —: the bytes `reploff` counts). Entries
    /// are then produced whether or not `appendonly` is on.
    pub repl_stream: Option<Vec<u8>>,
    /// (LSN, replication offset) at each hand-over to the writer not yet known durable,
    /// and the offset the durable LSN covers (WAITAOF's local count, a replica's FACK).
    fsync_marks: VecDeque<(u64, u64)>,
    fsynced_reploff: u64,
    /// The dataset was replaced (a replica's full sync): the log holds none of it until
    /// the rewrite after it commits, so nothing counts as fsynced meanwhile.
    pub fsync_awaits_base: bool,
    last_ts_s: i64,
    pub writer: Option<Writer>,
    pub layout: Option<manifest::Layout>,
    /// Reads of a key wait for its last write's LSN (`always` only): hash(db,key) → LSN.
    dirty_keys: HashMap<u64, u64>,
    dirty_order: VecDeque<(u64, u64)>,
    /// LSN of the last command that changed keys it does not name (FLUSHALL, SWAPDB,
    /// MOVE...): every reply waits for it.
    barrier_lsn: u64,
    /// Set by the propagation hook: the LSN the current command's reply waits for.
    pub hold_lsn: u64,
    /// Commands to log instead of the one that ran, set by a command whose effect its
    /// arguments do not determine (SPOP logs the SREM of the members it popped). Taken
    /// (and cleared) by the propagation hook after every command.
    pub command_forms: Vec<Vec<Vec<u8>>>,
    /// While a script runs: the entries its commands would log, collected instead of
    /// framed (see [`ScriptCapture`]).
    pub script_capture: Option<ScriptCapture>,
    /// A script's collected entries, logged by the propagation hook after EVAL.
    pub script_effects: Option<ScriptCapture>,
    pub rewrite: Option<rewrite::Rewrite>,
    pub rewrite_scheduled: bool,
    pub rewrites: u64,
    pub last_rewrite_ok: bool,
    pub last_rewrite_time_s: i64,
    /// Total size (base + incr) after the last rewrite or load, for auto-rewrite
    /// (plus `base_logical_extra`, see there).
    pub rewrite_base_size: u64,
    /// What a snapshot-image base holds beyond its file's size: the arena it maps back
    /// (uncompressed) minus the file (0 for an RDB or command base). The automatic-rewrite
    /// rule adds it to both sides, so "grew by `auto-aof-rewrite-percentage`" is measured
    /// against the dataset the base holds: an LZ4 image of compressible values can be many
    /// times smaller than its data, and measured against the file the log would "double"
    /// at every `auto-aof-rewrite-min-size` while each rewrite costs a snapshot of the whole
    /// arena. An RDB base (Redis's rule, Redis's sizes) stays as Redis measures it.
    pub base_logical_extra: u64,
    pub loaded_truncated: bool,
    /// Failed rewrites since the last success (INFO; backs automatic rewrites off).
    pub rewrites_consecutive_failures: u64,
    /// When the last rewrite ended (for the back-off).
    pub last_rewrite_end: Option<std::time::Instant>,
    /// The manifest on disk describes `layout` (false while a log turned on at runtime
    /// waits for its first rewrite: nothing before it was logged).
    pub layout_committed: bool,
    /// Wakes the event loop when the log became durable (set by the event loop).
    waker: Option<std::sync::Arc<dyn Fn() + Send + Sync>>,
    /// Inside EXEC: (MULTI already logged?). The first change logs `MULTI`, EXEC's end
    /// logs `EXEC`, so a transaction is one block in the log (Redis's wrapping).
    exec_block: Option<bool>,
    /// The event loop's eventfd for the executor's own fsyncs (None: the writer thread
    /// does every append, e.g. with I/O threads).
    completion_fd: Option<std::os::fd::RawFd>,
    /// Group commit under `always` (see [`Aof::group_ready`]): entries in `buf`, when the
    /// oldest of them was framed, the size of the last group handed over, and how long a
    /// group may wait for its members (`aof-group-commit-wait-us`).
    pending_entries: u64,
    pending_since: Option<std::time::Instant>,
    last_group_entries: u64,
    /// Entries framed while the last group's sync was in flight.
    arrived_in_flight: u64,
    group_wait: std::time::Duration,
    /// How long entries framed while the executor's ring is idle may wait for the end of
    /// their turn ([`MIDTURN_HOLD`]; tests change it).
    midturn_hold: std::time::Duration,
    /// A replica applying one command of its primary's stream: (offset before it, offset
    /// after it). Its entries carry those offsets instead of counting their own bytes
    /// (see [`Aof::stream_command_begin`]).
    stream_pin: Option<(u64, u64)>,
}

impl Default for Aof {
    fn default() -> Aof {
        Aof {
            enabled: false,
            mode: FsyncMode::EverySec,
            timestamps: false,
            buf: Vec::new(),
            buf_refs: Vec::new(),
            value_pins: VecDeque::new(),
            values_by_reference: 0,
            scratch: Vec::new(),
            last_lsn: 0,
            replid: String::new(),
            reploff: 0,
            selected_db: None,
            repl_stream: None,
            fsync_marks: VecDeque::new(),
            fsynced_reploff: 0,
            fsync_awaits_base: false,
            last_ts_s: 0,
            writer: None,
            layout: None,
            dirty_keys: HashMap::new(),
            dirty_order: VecDeque::new(),
            barrier_lsn: 0,
            hold_lsn: 0,
            command_forms: Vec::new(),
            script_capture: None,
            script_effects: None,
            rewrite: None,
            rewrite_scheduled: false,
            rewrites: 0,
            last_rewrite_ok: true,
            last_rewrite_time_s: -1,
            rewrite_base_size: 0,
            base_logical_extra: 0,
            loaded_truncated: false,
            rewrites_consecutive_failures: 0,
            last_rewrite_end: None,
            layout_committed: true,
            waker: None,
            exec_block: None,
            completion_fd: None,
            pending_entries: 0,
            pending_since: None,
            last_group_entries: 0,
            arrived_in_flight: 0,
            group_wait: std::time::Duration::ZERO,
            midturn_hold: MIDTURN_HOLD,
            stream_pin: None,
        }
    }
}

/// Hash of (db, key) for the dirty-key map: a collision only makes a read wait a little
/// longer, never less, so 64 bits without the key itself are enough.
pub fn key_hash(db: usize, key: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x6361_6972_6e00, db as u64);
    key.hash(&mut h);
    h.finish()
}

/// What a script's commands changed, logged as the script's effects when it ends (one
/// entry alone, several wrapped in MULTI/EXEC), so replay never runs the script itself.
#[derive(Default, Debug)]
pub struct ScriptCapture {
    /// (db, command) in the order they ran.
    pub entries: Vec<(usize, Vec<Vec<u8>>)>,
    /// Keys the entries wrote (their reads wait for the block under `always`).
    pub keys: Vec<(usize, Vec<u8>)>,
    /// An entry changed keys it does not name (FLUSHALL, MOVE...).
    pub barrier: bool,
}

impl Aof {
    /// Appends a command (already in its deterministic form) run in `db`, preceded by a
    /// SELECT when the log's db differs. Returns the command's LSN.
    pub fn feed<A: AsRef<[u8]>>(&mut self, db: usize, argv: &[A], now_ms: i64) -> u64 {
        if let Some(c) = self.script_capture.as_mut() {
            c.entries
                .push((db, argv.iter().map(|a| a.as_ref().to_vec()).collect()));
            return 0;
        }
        self.before_entry(db, now_ms);
        self.frame(argv)
    }

    /// Whether [`Aof::feed_ref`] may log a value of `len` bytes by reference now: the log
    /// is on, the value is big enough, and no script is collecting entries.
    pub fn logs_by_reference(&self, len: usize) -> bool {
        self.enabled && self.script_capture.is_none() && len >= LOG_BY_REFERENCE_MIN_BYTES
    }

    /// Appends a command whose argument `value_at` is a value in the arena's `block`,
    /// which the caller has pinned for the log (see [`Aof::logs_by_reference`]): the
    /// entry refers to the bytes instead of copying them; the writer thread checksums
    /// and writes them from the block, and [`Aof::released_pins`] hands it back after. The
    /// replication stream, when one is attached, gets its own copy (the backlog must keep
    /// the bytes whatever happens to the key). Returns the command's LSN.
    pub fn feed_ref<A: AsRef<[u8]>>(
        &mut self,
        db: usize,
        argv: &[A],
        value_at: usize,
        block: crate::arena::Ref,
        now_ms: i64,
    ) -> u64 {
        debug_assert!(self.enabled && self.script_capture.is_none());
        self.before_entry(db, now_ms);
        let len = format::command_len(argv);
        let name = argv.first().map_or(&b""[..], |a| a.as_ref());
        let entry_reploff = self.entry_reploff(name, len);
        if let Some(s) = self.repl_stream.as_mut() {
            format::encode_command(s, argv);
        }
        self.count_pending();
        self.last_lsn += 1;
        let r = format::encode_entry_ref(
            &mut self.buf,
            self.last_lsn,
            &self.replid,
            entry_reploff,
            argv,
            value_at,
        );
        self.buf_refs.push(r);
        self.value_pins.push_back((self.last_lsn, block));
        self.values_by_reference += 1;
        self.last_lsn
    }

    /// Blocks pinned for values logged by reference that the log no longer needs (the
    /// writer wrote them, or there is no writer any more): the caller unpins each.
    pub fn released_pins(&mut self) -> Vec<crate::arena::Ref> {
        if self.value_pins.is_empty() {
            return Vec::new();
        }
        let done = match &self.writer {
            Some(w) => w
                .shared
                .values_done_lsn
                .load(std::sync::atomic::Ordering::SeqCst),
            None => {
                self.buf.clear();
                self.buf_refs.clear();
                u64::MAX
            }
        };
        let mut out = Vec::new();
        while let Some(&(lsn, b)) = self.value_pins.front() {
            if lsn > done {
                break;
            }
            out.push(b);
            self.value_pins.pop_front();
        }
        out
    }

    /// Values logged by reference still pinned for the log (INFO `aof_pinned_values`).
    pub fn pinned_values(&self) -> usize {
        self.value_pins.len()
    }

    /// `DEBUG AOF-HOLD-VALUES`: the writer waits (or not) before copying values logged by
    /// reference; false when no log is open.
    pub fn hold_values(&mut self, held: bool) -> bool {
        match self.writer.as_ref() {
            Some(w) => {
                w.hold_values(held);
                true
            }
            None => false,
        }
    }

    /// The annotations an entry needs before it: a timestamp, a SELECT of `db`.
    fn before_entry(&mut self, db: usize, now_ms: i64) {
        if self.timestamps && self.enabled {
            let s = now_ms / 1000;
            if s != self.last_ts_s {
                self.last_ts_s = s;
                self.buf
                    .extend_from_slice(format!("#TS:{s}\r\n").as_bytes());
            }
        }
        if self.selected_db != Some(db) {
            let d = db.to_string();
            self.frame(&[&b"SELECT"[..], d.as_bytes()]);
            self.selected_db = Some(db);
        }
    }

    /// The replication offset an entry of `len` RESP bytes (command `name`) carries; the
    /// stream's offset moves past it.
    fn entry_reploff(&mut self, name: &[u8], len: usize) -> u64 {
        match self.stream_pin {
            // A SELECT or MULTI is logged before the command's own entry: it says the
            // offset before the command, so a log cut right after it never claims the
            // command (both are harmless to receive again).
            Some((before, after)) => {
                if name.eq_ignore_ascii_case(b"SELECT") || name.eq_ignore_ascii_case(b"MULTI") {
                    before
                } else {
                    after
                }
            }
            None => {
                self.reploff += len as u64;
                self.reploff
            }
        }
    }

    /// Group commit's count of the entries waiting in `buf`.
    fn count_pending(&mut self) {
        if self.pending_entries == 0 {
            self.pending_since = Some(std::time::Instant::now());
        }
        self.pending_entries += 1;
    }

    fn frame<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> u64 {
        self.scratch.clear();
        format::encode_command(&mut self.scratch, argv);
        let name = argv.first().map_or(&b""[..], |a| a.as_ref());
        let entry_reploff = self.entry_reploff(name, self.scratch.len());
        if let Some(s) = self.repl_stream.as_mut() {
            s.extend_from_slice(&self.scratch);
        }
        if !self.enabled {
            return self.last_lsn;
        }
        self.count_pending();
        self.last_lsn += 1;
        format::encode_entry(
            &mut self.buf,
            self.last_lsn,
            &self.replid,
            entry_reploff,
            &self.scratch,
        );
        self.last_lsn
    }

    /// A replica is about to apply one command of its primary's stream, which takes the
    /// offset from `before` to `after`. Until [`Aof::stream_command_end`] the entries it
    /// logs carry the primary's offsets rather than their own sizes (the replica's forms
    /// and SELECTs need not match the primary's bytes): the command's entry says `after`,
    /// a SELECT or MULTI logged ahead of it says `before`. So the log's last entry always
    /// gives the stream offset of exactly the data it holds (`docs/formats/aof.md`).
    pub fn stream_command_begin(&mut self, before: u64, after: u64) {
        self.reploff = before;
        self.stream_pin = Some((before, after));
    }

    /// The stream command is applied: the offset is the one after it.
    pub fn stream_command_end(&mut self) {
        if let Some((_, after)) = self.stream_pin.take() {
            self.reploff = after;
        }
    }

    /// Logs `SELECT <db>` under the current offset, counted neither in the offset nor in
    /// a stream (a replica has none): the log's last entry then says the current replid
    /// and offset, and the stream's db, without waiting for the next write.
    pub fn log_position(&mut self, db: usize) {
        if !self.enabled || self.repl_stream.is_some() || self.script_capture.is_some() {
            return;
        }
        let d = db.to_string();
        let saved = self.stream_pin.replace((self.reploff, self.reploff));
        self.frame(&[&b"SELECT"[..], d.as_bytes()]);
        self.stream_pin = saved;
        self.selected_db = Some(db);
    }

    /// A replica ran its primary's SELECT: the log records the db (under the offset after
    /// it) when it differs from the log's, so a restart knows which db the stream's next
    /// command runs in even when no logged command followed the SELECT.
    pub fn stream_select(&mut self, db: usize) {
        if self.enabled && self.selected_db != Some(db) && self.script_capture.is_none() {
            let d = db.to_string();
            let pin = self.stream_pin.map(|(_, after)| (after, after));
            let saved = std::mem::replace(&mut self.stream_pin, pin);
            self.frame(&[&b"SELECT"[..], d.as_bytes()]);
            self.stream_pin = saved;
            self.selected_db = Some(db);
        }
    }

    /// Commands are propagated: to the log, to the replication stream, or both.
    pub fn propagating(&self) -> bool {
        self.enabled || self.repl_stream.is_some()
    }

    /// A command only replicas get (PING, REPLCONF GETACK): counted in the replication
    /// offset, and logged too, so the log holds every byte of the stream (a restarted
    /// primary's position and rebuilt backlog are exact; replayed, both do nothing). A
    /// replica runs it in whatever db it is in, so it needs no SELECT.
    pub fn feed_replicas_only<A: AsRef<[u8]>>(&mut self, argv: &[A]) {
        if self.repl_stream.is_none() || self.script_capture.is_some() {
            return;
        }
        self.frame(argv);
    }

    /// EXEC starts running its queued commands.
    pub fn exec_begin(&mut self) {
        self.exec_block = Some(false);
    }

    /// Logs `MULTI` before the transaction's first logged entry.
    pub(crate) fn exec_open(&mut self, db: usize, now_ms: i64) {
        if self.exec_block == Some(false) && self.script_capture.is_none() {
            self.exec_block = Some(true);
            self.feed(db, &[&b"MULTI"[..]], now_ms);
        }
    }

    /// Inside EXEC (its MULTI may not be logged yet).
    pub fn in_exec_block(&self) -> bool {
        self.exec_block.is_some()
    }

    /// EXEC is done: logs `EXEC` if the block was opened. Returns its LSN.
    pub fn exec_end(&mut self, now_ms: i64) -> Option<u64> {
        if self.exec_block.take() != Some(true) || !self.propagating() {
            return None;
        }
        let db = self.selected_db.unwrap_or(0);
        Some(self.feed(db, &[&b"EXEC"[..]], now_ms))
    }

    /// `DEBUG AOF-PAUSE-SYNCS`: stop (or resume) making the log durable; false when no
    /// log is open.
    pub fn pause_syncs(&mut self, paused: bool) -> bool {
        if !paused {
            self.flush();
        }
        match self.writer.as_mut() {
            Some(w) => {
                w.pause_syncs(paused);
                true
            }
            None => false,
        }
    }

    /// Hands buffered entries to the writer (Redis's flushAppendOnlyFile in beforeSleep).
    pub fn flush(&mut self) {
        if self.buf.is_empty() {
            if let Some(w) = self.writer.as_mut() {
                w.answer_call_back();
            }
            return;
        }
        let sync = self.mode == FsyncMode::Always;
        self.last_group_entries = self.pending_entries;
        self.arrived_in_flight = 0;
        self.pending_entries = 0;
        self.pending_since = None;
        let Some(w) = self.writer.as_mut() else {
            self.buf.clear();
            self.buf_refs.clear();
            return;
        };
        // Bounded: past the limit the newest mark moves forward, so the durable offset
        // is only ever reported late, never early.
        let mark = (self.last_lsn, self.reploff);
        if self.fsync_marks.len() >= MAX_FSYNC_MARKS {
            if let Some(last) = self.fsync_marks.back_mut() {
                *last = mark;
            }
        } else {
            self.fsync_marks.push_back(mark);
        }
        if self.buf_refs.is_empty() {
            w.append(&mut self.buf, self.last_lsn, sync);
        } else {
            let refs = std::mem::take(&mut self.buf_refs);
            w.append_refs(&mut self.buf, refs, self.last_lsn);
        }
        self.prune_dirty();
    }

    /// The end of an event-loop turn: like [`Aof::flush`], except that under `always`,
    /// while the executor holds the file and its fsync ring is full, the entries wait in
    /// the buffer: the completion that frees the ring wakes the executor, which writes them
    /// then with their fsync. Writing them now would cost a `pwrite` per turn for bytes
    /// the next fsync covers anyway (a few entries per `pwrite` instead of a whole group).
    pub fn flush_turn(&mut self) {
        let defer = self.mode == FsyncMode::Always
            && self.buf_refs.is_empty()
            && self
                .writer
                .as_ref()
                .is_some_and(|w| w.holds_lease() && !w.wants_work());
        if !defer && self.group_ready() {
            self.flush();
        }
    }

    /// `appendfsync always` with a writer: every acknowledged write waits for a sync.
    pub fn syncs_every_write(&self) -> bool {
        self.mode == FsyncMode::Always && self.writer.is_some()
    }

    /// Hands the buffered entries over now if the writer is waiting for work (so the disk
    /// starts on them while the executor goes on with the turn), else leaves them for
    /// [`Aof::flush`] at the end of the turn.
    ///
    /// While the executor holds the file, between connections a sync starts only for
    /// entries that waited behind one (framed before the completion the last reap
    /// collected) or that have waited [`MIDTURN_HOLD`]; the others wait for the end
    /// of the turn, so one sync covers the turn's writes. Where a sync is slower than a
    /// turn, the ring is busy when writes arrive and each completion starts the next sync
    /// on everything that waited, keeping the disk busy. Where it is quicker (tmpfs, a
    /// write cache), a sync started on a turn's first write completes before the next
    /// connection, and each sync covered a write or two, every one an io_uring worker's
    /// wake-up and a completion on the vCPUs the clients need (figures: BENCHMARKS.md,
    /// "Seed 001's shape, connections swept"). The bound keeps a long turn (hundreds of
    /// connections) from holding its first writes for all of it; a few clients never
    /// wait on it, their turns end first.
    pub fn flush_if_writer_idle(&mut self) {
        if self.buf.is_empty() || !self.group_ready() {
            return;
        }
        let Some(w) = self.writer.as_ref() else {
            return;
        };
        let waited = !w.holds_lease()
            || self.arrived_in_flight > 0
            || self
                .pending_since
                .is_some_and(|t| t.elapsed() >= self.midturn_hold);
        if waited && w.wants_work() {
            self.flush();
        }
    }

    /// Under `always`, whether the entries waiting in `buf` should start their sync now
    /// (group commit, `aof-group-commit-wait-us` > 0). A sync's replies go out when it
    /// completes, and clients that wait for their reply before the next write come back a
    /// round trip later; starting the next sync on the first of them leaves the rest to
    /// wait a whole sync more, and the clients settle in two halves taking turns. So a
    /// group waits until it holds as many entries as the last group plus those that
    /// arrived while its sync was in flight (everyone who was writing), for at most
    /// `group_wait` after its first entry: fuller syncs, more SET/s for closed-loop
    /// clients (figures: BENCHMARKS.md, "`aof-inflight-syncs` × `aof-group-commit-wait-us`").
    /// A lone client never waits (its last group was itself).
    fn group_ready(&self) -> bool {
        if self.group_wait.is_zero() || self.mode != FsyncMode::Always {
            return true;
        }
        if self.pending_entries >= self.last_group_entries + self.arrived_in_flight {
            return true;
        }
        self.pending_since
            .is_none_or(|t| t.elapsed() >= self.group_wait)
    }

    /// How long the event loop may sleep before a waiting group must start its sync.
    pub fn group_deadline(&self) -> Option<std::time::Duration> {
        if self.buf.is_empty() || self.group_ready() {
            return None;
        }
        let t = self.pending_since?;
        Some(self.group_wait.saturating_sub(t.elapsed()))
    }

    /// Collects the executor's completed fsyncs (see `writer::Lease`); true if the durable
    /// LSN moved. Cheap enough to call between connections.
    pub fn reap_syncs(&mut self) -> bool {
        let moved = self
            .writer
            .as_mut()
            .is_some_and(|w| w.reap_executor_syncs());
        if moved {
            self.arrived_in_flight = self.pending_entries;
        }
        moved
    }

    /// The event loop's eventfd for the executor's fsync completions: from now on the
    /// executor appends and syncs itself while the writer lends it the file (this writer
    /// and later ones).
    /// `CAIRN_AOF_EXECUTOR_APPENDS=0` keeps every append on the writer thread (for
    /// comparison).
    pub fn set_completion_fd(&mut self, fd: std::os::fd::RawFd) {
        if std::env::var_os("CAIRN_AOF_EXECUTOR_APPENDS").is_some_and(|v| v == "0") {
            return;
        }
        self.completion_fd = Some(fd);
        self.install_waker();
    }

    /// Installs the event loop's wake-up; applied to the writer now and to later ones.
    pub fn set_waker(&mut self, f: std::sync::Arc<dyn Fn() + Send + Sync>) {
        self.waker = Some(f);
        self.install_waker();
    }

    /// The event loop's waker (other threads that produce work for the executor call it).
    pub fn waker(&self) -> Option<std::sync::Arc<dyn Fn() + Send + Sync>> {
        self.waker.clone()
    }

    pub(crate) fn install_waker(&mut self) {
        if let (Some(w), Some(f)) = (&self.writer, &self.waker) {
            let f = f.clone();
            w.shared.set_notifier(Box::new(move || f()));
        }
        if let (Some(w), Some(fd)) = (&mut self.writer, self.completion_fd) {
            w.enable_executor_appends(fd);
        }
    }

    /// The replication offset up to which the log is fsynced (Redis's fsynced_reploff);
    /// None without `appendonly`.
    pub fn fsynced_reploff(&mut self) -> Option<u64> {
        if !self.enabled || self.writer.is_none() {
            return None;
        }
        if self.fsync_awaits_base {
            self.fsync_marks.clear();
            self.fsynced_reploff = 0;
            return Some(0);
        }
        let durable = self.durable_lsn();
        while let Some(&(lsn, off)) = self.fsync_marks.front() {
            if lsn > durable {
                break;
            }
            self.fsynced_reploff = self.fsynced_reploff.max(off);
            self.fsync_marks.pop_front();
        }
        // Everything framed is handed over and durable: the offset as it stands (a
        // server that loaded its log and wrote nothing since).
        if self.fsync_marks.is_empty() && self.buf.is_empty() && durable >= self.last_lsn {
            self.fsynced_reploff = self.fsynced_reploff.max(self.reploff);
        }
        Some(self.fsynced_reploff)
    }

    pub fn durable_lsn(&self) -> u64 {
        match &self.writer {
            Some(w) => w
                .shared
                .durable_lsn
                .load(std::sync::atomic::Ordering::SeqCst),
            None => self.last_lsn,
        }
    }

    /// Replies of writes (and reads of keys they dirtied) are held until
    /// [`Aof::release_lsn`] covers them, in every mode: see `release_lsn`.
    pub fn holds_replies(&self) -> bool {
        self.enabled && self.writer.is_some()
    }

    /// How far replies may be released. `always`: the durable LSN (on stable storage).
    /// `everysec`/`no`: the written LSN (in the kernel), which is Redis's guarantee for
    /// these modes — Redis write()s in beforeSleep before sending replies, so a killed
    /// process never loses an acknowledged write; only a power loss can (up to 1 s).
    pub fn release_lsn(&self) -> u64 {
        let Some(w) = &self.writer else {
            return self.last_lsn;
        };
        let sh = &w.shared;
        match self.mode {
            FsyncMode::Always => sh.durable_lsn.load(std::sync::atomic::Ordering::SeqCst),
            _ => sh.written_lsn.load(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// The sticky write/fsync error or the disk-space watermark: writes get -MISCONF.
    pub fn refuse_writes(&self) -> Option<String> {
        let w = self.writer.as_ref()?;
        if let Some(e) = w.shared.error() {
            return Some(format!("MISCONF Errors writing to the AOF file: {e}"));
        }
        if w.shared.disk_low.load(std::sync::atomic::Ordering::SeqCst) {
            return Some(
                "MISCONF Errors writing to the AOF file: No space left on device".to_string(),
            );
        }
        None
    }

    pub fn failed(&self) -> bool {
        self.writer
            .as_ref()
            .is_some_and(|w| w.shared.failed.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Records that `lsn` wrote (db, key): later reads of it wait for that LSN.
    pub fn mark_dirty(&mut self, db: usize, key: &[u8], lsn: u64) {
        let h = key_hash(db, key);
        self.dirty_keys.insert(h, lsn);
        self.dirty_order.push_back((lsn, h));
    }

    pub fn mark_barrier(&mut self, lsn: u64) {
        self.barrier_lsn = self.barrier_lsn.max(lsn);
    }

    /// The LSN a read of (db, key) must wait for (0: none).
    pub fn key_wait_lsn(&self, db: usize, key: &[u8]) -> u64 {
        if self.dirty_keys.is_empty() {
            return 0;
        }
        self.dirty_keys
            .get(&key_hash(db, key))
            .copied()
            .unwrap_or(0)
    }

    pub fn barrier_wait_lsn(&self) -> u64 {
        self.barrier_lsn
    }

    /// Forgets dirty keys whose writes are durable (keeps the map as small as the
    /// not-yet-durable window).
    pub fn prune_dirty(&mut self) {
        let durable = self.release_lsn();
        while let Some(&(lsn, h)) = self.dirty_order.front() {
            if lsn > durable {
                break;
            }
            self.dirty_order.pop_front();
            if self.dirty_keys.get(&h) == Some(&lsn) {
                self.dirty_keys.remove(&h);
            }
        }
    }

    /// Applies `appendfsync`, `aof-disk-min-free`, `aof-timestamp-enabled` after CONFIG SET.
    pub fn apply_settings(&mut self, s: &crate::config::Settings) {
        self.mode = FsyncMode::parse(&s.appendfsync);
        self.timestamps = s.aof_timestamp_enabled;
        self.group_wait = std::time::Duration::from_micros(s.aof_group_commit_wait_us);
        if let Some(w) = &self.writer {
            w.set_params(self.mode, s.aof_disk_min_free, s.aof_disk_min_free_pct);
        }
    }

    /// The size the automatic-rewrite rule compares: the files plus what an image base
    /// holds beyond its file (`base_logical_extra`).
    pub fn growth_size(&self) -> u64 {
        self.current_size() + self.base_logical_extra
    }

    /// After a rewrite or a load: `image_base` says the base is a snapshot image, and the
    /// arena holds `arena_bytes`; the growth rule starts over from here.
    pub fn reset_growth_basis(&mut self, image_base: bool, arena_bytes: u64) {
        let base_file = self.writer.as_ref().map_or(0, |w| {
            w.shared
                .base_bytes
                .load(std::sync::atomic::Ordering::Relaxed)
        });
        self.base_logical_extra = if image_base {
            arena_bytes.saturating_sub(base_file)
        } else {
            0
        };
        self.rewrite_base_size = self.growth_size();
    }

    pub fn current_size(&self) -> u64 {
        match &self.writer {
            Some(w) => {
                w.shared
                    .incr_bytes
                    .load(std::sync::atomic::Ordering::Relaxed)
                    + w.shared
                        .base_bytes
                        .load(std::sync::atomic::Ordering::Relaxed)
            }
            None => 0,
        }
    }

    /// INFO persistence's AOF fields (Redis's names, then cairn's log positions).
    pub fn info_fields(&self) -> Vec<(&'static str, String)> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut v: Vec<(&'static str, String)> = vec![
            ("aof_enabled", (self.enabled as u8).to_string()),
            (
                "aof_rewrite_in_progress",
                (self.rewrite.is_some() as u8).to_string(),
            ),
            (
                "aof_rewrite_scheduled",
                (self.rewrite_scheduled as u8).to_string(),
            ),
            (
                "aof_last_rewrite_time_sec",
                self.last_rewrite_time_s.to_string(),
            ),
            (
                "aof_current_rewrite_time_sec",
                match &self.rewrite {
                    Some(r) => r.started.elapsed().as_secs().to_string(),
                    None => "-1".into(),
                },
            ),
            (
                "aof_last_bgrewrite_status",
                if self.last_rewrite_ok { "ok" } else { "err" }.into(),
            ),
            ("aof_rewrites", self.rewrites.to_string()),
            (
                "aof_rewrites_consecutive_failures",
                self.rewrites_consecutive_failures.to_string(),
            ),
            (
                "aof_last_write_status",
                if self.failed() { "err" } else { "ok" }.into(),
            ),
            ("aof_last_cow_size", "0".into()),
            ("module_fork_in_progress", "0".into()),
            ("module_fork_last_cow_size", "0".into()),
        ];
        if self.enabled {
            if let Some(w) = &self.writer {
                let sh = &w.shared;
                v.extend([
                    ("aof_current_size", self.current_size().to_string()),
                    ("aof_base_size", sh.base_bytes.load(Relaxed).to_string()),
                    ("aof_pending_rewrite", "0".into()),
                    ("aof_buffer_length", self.buf.len().to_string()),
                    ("aof_pending_bio_fsync", "0".into()),
                    ("aof_delayed_fsync", "0".into()),
                    ("aof_lsn", self.last_lsn.to_string()),
                    ("aof_durable_lsn", self.durable_lsn().to_string()),
                    (
                        "aof_pending_bytes",
                        (self.buf.len() as u64 + sh.queued_bytes.load(Relaxed)).to_string(),
                    ),
                    ("aof_fsync_us_p50", sh.fsync_percentile_us(50).to_string()),
                    ("aof_fsync_us_p99", sh.fsync_p99_us().to_string()),
                    ("aof_fsyncs", sh.fsyncs.load(Relaxed).to_string()),
                    (
                        "aof_io_engine",
                        sh.engine
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .to_string(),
                    ),
                    ("aof_recycled_files", sh.recycled.load(Relaxed).to_string()),
                    ("aof_pinned_values", self.value_pins.len().to_string()),
                    (
                        "aof_values_by_reference",
                        self.values_by_reference.to_string(),
                    ),
                    (
                        "aof_executor_batches",
                        sh.exec_batches.load(Relaxed).to_string(),
                    ),
                    (
                        "aof_disk_free_bytes",
                        sh.free_bytes.load(Relaxed).to_string(),
                    ),
                ]);
            }
        }
        v
    }
}

impl Drop for Aof {
    fn drop(&mut self) {
        // Whatever was framed goes to the writer before it syncs and stops.
        self.flush();
        if let Some(mut w) = self.writer.take() {
            w.shutdown();
        }
    }
}

/// The writer's I/O options from the config. Pre-allocation and direct I/O serve
/// `appendfsync always` (where every batch is synced); io_uring unless
/// `CAIRN_AOF_NO_URING=1` (which forces the thread engine, for comparison and tests).
pub fn io_opts(s: &crate::config::Settings) -> writer::IoOpts {
    let always = FsyncMode::parse(&s.appendfsync) == FsyncMode::Always;
    writer::IoOpts {
        preallocate_bytes: if always { s.aof_preallocate_bytes } else { 0 },
        recycle: s.aof_recycle,
        direct_io: always && s.aof_direct_io,
        uring: std::env::var_os("CAIRN_AOF_NO_URING").is_none_or(|v| v != "1"),
        inflight: s.aof_inflight_syncs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    fn set(a: &mut Aof, k: &str) {
        a.feed(0, &["SET", k, "v"], 0);
    }

    /// Group commit: a group waits for as many entries as the last group plus those that
    /// arrived while its sync was in flight, or for `group_wait`; never without a wait
    /// configured, outside `always`, or for a lone client.
    #[test]
    fn a_group_waits_for_everyone_who_was_writing() {
        let mut a = Aof::default();
        a.enabled = true;
        a.mode = FsyncMode::Always;
        a.group_wait = Duration::from_secs(3600);
        set(&mut a, "a");
        set(&mut a, "b");
        assert!(a.group_ready(), "the first group has nobody to wait for");
        a.flush(); // SELECT + 2 SETs handed over (no writer: dropped)
        assert_eq!(a.last_group_entries, 3);
        set(&mut a, "c"); // arrives while that group's sync is in flight...
        a.arrived_in_flight = a.pending_entries; // ...which then completes (reap_syncs)
        set(&mut a, "d");
        set(&mut a, "e");
        assert!(!a.group_ready(), "3 of 3 + 1 entries");
        let left = a
            .group_deadline()
            .expect("the loop must wake for the deadline");
        assert!(left > Duration::from_secs(3500) && left <= Duration::from_secs(3600));
        set(&mut a, "g");
        assert!(a.group_ready());
        assert_eq!(a.group_deadline(), None);
        a.flush();
        assert_eq!((a.last_group_entries, a.arrived_in_flight), (4, 0));

        // The wait is bounded.
        a.group_wait = Duration::from_millis(2);
        set(&mut a, "h");
        assert!(!a.group_ready());
        std::thread::sleep(Duration::from_millis(3));
        assert!(a.group_ready());
        a.flush();

        // A lone client: its last group was its own single entry.
        a.group_wait = Duration::from_secs(3600);
        set(&mut a, "i");
        assert!(a.group_ready());
        a.flush();

        // Off: no wait configured, or not `always`.
        set(&mut a, "j");
        a.flush();
        a.last_group_entries = 10;
        set(&mut a, "k");
        assert!(!a.group_ready());
        a.mode = FsyncMode::EverySec;
        assert!(a.group_ready());
        a.mode = FsyncMode::Always;
        a.group_wait = Duration::ZERO;
        assert!(a.group_ready());
    }

    /// Between connections the executor's own ring starts a sync only for entries framed
    /// before a completion it collected (they waited behind a sync); an entry framed while
    /// the ring was idle waits for the end of the turn, whose sync covers the whole turn.
    #[test]
    fn between_connections_only_entries_that_waited_behind_a_sync_start_one() {
        use std::os::fd::AsRawFd;
        use storage::LogDir;
        let dir = testing::temp_dir("midturn");
        let efd = uring::eventfd().unwrap();
        let f = storage::FsDir::new(&dir)
            .open_append("p.1.incr.aof")
            .unwrap();
        let opts = writer::IoOpts {
            uring: true,
            inflight: 1,
            ..writer::IoOpts::default()
        };
        let w = Writer::start_opts(
            Box::new(storage::FsDir::new(&dir)),
            f,
            Some("p.1.incr.aof"),
            0,
            0,
            FsyncMode::Always,
            0,
            opts,
        )
        .unwrap();
        let mut a = Aof::default();
        a.enabled = true;
        a.mode = FsyncMode::Always;
        a.writer = Some(w);
        a.completion_fd = Some(efd.as_raw_fd());
        // The age bound is looked at last (a slow test machine must not reach it).
        a.midturn_hold = Duration::from_secs(3600);
        a.install_waker();
        let wait_durable = |a: &mut Aof| {
            let t = std::time::Instant::now();
            while a.durable_lsn() < a.last_lsn {
                a.reap_syncs();
                assert!(t.elapsed() < Duration::from_secs(10), "never durable");
                std::thread::sleep(Duration::from_micros(200));
            }
            a.reap_syncs();
        };
        // Until the writer lends the file, batches go through its thread.
        let t = std::time::Instant::now();
        while !a.writer.as_ref().unwrap().holds_lease() {
            if t.elapsed() > Duration::from_secs(5) {
                eprintln!("io_uring refused here (no lease): not testable");
                return;
            }
            set(&mut a, "warm");
            a.flush();
            wait_durable(&mut a);
            std::thread::sleep(Duration::from_millis(1));
        }
        wait_durable(&mut a);
        let before = a
            .writer
            .as_ref()
            .unwrap()
            .shared
            .fsyncs
            .load(Ordering::Relaxed);

        // The ring is idle: the turn's writes wait for its end...
        set(&mut a, "a");
        a.flush_if_writer_idle();
        set(&mut a, "b");
        a.flush_if_writer_idle();
        assert!(!a.buf.is_empty(), "a sync started between connections");
        // ...where one sync covers both.
        a.flush_turn();
        assert!(a.buf.is_empty());
        let lsn_ab = a.last_lsn;

        // A write framed while that sync is in flight starts the next one between
        // connections once the completion is collected.
        set(&mut a, "c");
        a.flush_if_writer_idle();
        let t = std::time::Instant::now();
        while !a.reap_syncs() {
            assert!(t.elapsed() < Duration::from_secs(10), "never durable");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(a.durable_lsn() >= lsn_ab);
        a.flush_if_writer_idle();
        assert!(
            a.buf.is_empty(),
            "a write that waited behind a sync still waits"
        );
        wait_durable(&mut a);

        // The completion collected before the next write: that write waits again.
        set(&mut a, "d");
        a.flush_if_writer_idle();
        assert!(!a.buf.is_empty());
        a.flush_turn();
        wait_durable(&mut a);
        let syncs = a
            .writer
            .as_ref()
            .unwrap()
            .shared
            .fsyncs
            .load(Ordering::Relaxed)
            - before;
        assert_eq!(syncs, 3, "one sync for a+b, one for c, one for d");

        // A long turn: a write that has waited the bound starts a sync.
        a.midturn_hold = Duration::from_millis(2);
        set(&mut a, "e");
        std::thread::sleep(Duration::from_millis(3));
        a.flush_if_writer_idle();
        assert!(a.buf.is_empty(), "a write waited past the bound");
        wait_durable(&mut a);
        drop(a);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
