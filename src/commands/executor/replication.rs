//! The primary's side of replication (Redis's replication.c, primary half): the backlog,
//! the stream fanned out to replicas, full syncs from the snapshot engine, partial
//! resyncs, acknowledgements, WAIT / WAITAOF, `repl-backlog-ttl` and FAILOVER; and what a
//! replica does with them: it relays its primary's stream to replicas of its own and
//! keeps it in its backlog, so a promotion (PSYNC2's replid2) is continued partially.
//!
//! The stream is the propagation hook's output: every logged command's RESP form (the
//! bytes `Aof::reploff` counts, so log positions and replication offsets are one
//! counter), taken from `Aof::repl_stream` at the end of each event-loop turn and at every
//! PSYNC (so a replica's starting offset is exact).
//!
//! A full sync never forks: a background snapshot captures the arena (same pause and
//! memory bounds as BGSAVE) into a temporary image; its cut, where the executor stood
//! still between two commands, gives the offset the replica starts from, and the stream
//! after it is kept for each replica while the RDB goes out. A converter thread loads the
//! image into a private arena and streams an RDB from it in chunks through a bounded
//! channel; the executor moves chunks to replicas' outputs while those are under
//! [`RDB_OUTPUT_WINDOW_BYTES`]. Replicas that asked while the same capture had not cut yet
//! share it.

use super::repl_pending::PendingStream;
use super::Server;
use crate::persistence::repl_backlog::Backlog;
use crate::persistence::snapshot::format::{Follow, Followed, HEADER_BYTES};
use crate::persistence::snapshot::BgJob;
use crate::util::now_ms;
use crate::{notice, warning};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A replica's RDB output is topped up while less than this is unsent.
const RDB_OUTPUT_WINDOW_BYTES: u64 = 4 << 20;
/// Size of the RDB chunks the converter sends, and how many may wait in the channel:
/// memory for the transfer stays near 16 MiB whatever the dataset.
const RDB_CHUNK_BYTES: usize = 1 << 20;
const RDB_CHUNKS_QUEUED: usize = 12;
/// The image form reads a finished file, always ready: two chunks ahead keep the window
/// full, and the primary's extra memory for the transfer is 6 MiB, not 16.
const IMAGE_CHUNKS_QUEUED: usize = 2;

#[derive(Debug)]
pub enum ReplicaState {
    /// Waiting for a capture to cut: the stream from `from_offset + 1` on is kept in
    /// `pending` (bounded by the replica output limit).
    WaitCapture {
        from_offset: u64,
        pending: PendingStream,
    },
    /// `+FULLRESYNC` sent, the RDB going out; `pending` is the stream after the cut.
    SendingRdb {
        pending: PendingStream,
    },
    /// The RDB went out in the `$EOF:` form: the stream waits for the replica's first
    /// ACK (as Redis: a replica reading up to the end mark may read past it otherwise).
    AwaitFirstAck {
        pending: PendingStream,
        acked: bool,
    },
    Online,
}

#[derive(Debug)]
pub struct Replica {
    pub client_id: u64,
    pub slot: usize,
    pub state: ReplicaState,
    /// REPLCONF listening-port (0: not told).
    pub listening_port: u16,
    pub ip: String,
    pub capa_eof: bool,
    /// Loads our snapshot images: a full sync sends the capture itself, not an RDB.
    pub capa_image: bool,
    /// The offset the replica last acknowledged (REPLCONF ACK), and when (ms).
    pub ack_offset: u64,
    pub ack_ms: i64,
    /// The offset the replica's log fsynced (REPLCONF ACK .. FACK), for WAITAOF.
    pub aof_ack_offset: u64,
    /// Part of the running full sync's capture.
    pub in_sync: bool,
    /// Asked with PSYNC (SYNC gets the payload without a `+FULLRESYNC` line first).
    pub psync: bool,
    /// REPLCONF rdb-only 1 (`redis-cli --rdb`): the RDB, then the link closes.
    pub rdb_only: bool,
    /// Online, with the stream kept during its sync still going out (at most the full
    /// sync's window ahead of the socket each turn); new bytes queue behind it.
    pub draining: Option<PendingStream>,
}

enum Phase {
    Snapshot {
        job: BgJob,
        /// Image form: the sender already streams the capture as it is written.
        early: Option<Transfer>,
    },
    /// An image-form capture whose every member left, asked to stop: collected once its
    /// thread ends, then the next capture starts for whoever waits.
    Cancelled { job: BgJob },
    Send {
        chunks: Receiver<Vec<u8>>,
        /// The thread's outcome, published before it closes its files (see `Finished`).
        finished: Arc<Finished>,
        converter: JoinHandle<()>,
    },
}

/// The `cairn-repl-rdb` thread of an image-form sync, started with the capture.
struct Transfer {
    chunks: Receiver<Vec<u8>>,
    finished: Arc<Finished>,
    thread: JoinHandle<()>,
}

struct FullSync {
    phase: Phase,
    image: PathBuf,
    /// The stream position the capture cut at (known once the snapshot is done).
    cut_offset: u64,
    eof_form: bool,
}

/// The outcome of the `cairn-repl-rdb` thread, published before the thread closes its
/// (unlinked) files: the executor collects it without joining the thread, whose last
/// close may free gigabytes of file blocks.
#[derive(Default)]
struct Finished(std::sync::Mutex<Option<Result<(), String>>>);

impl Finished {
    fn publish(&self, r: Result<(), String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }

    fn take(&self) -> Option<Result<(), String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The thread's error, if it published one (left for `take`).
    fn failed(&self) -> Option<String> {
        match &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }
}

/// A client in WAIT: answered once `numreplicas` acknowledged `offset`; in WAITAOF
/// (`numlocal` given), once that many replicas fsynced it and the local log too if asked.
#[derive(Debug, Clone, Copy)]
pub struct WaitRequest {
    pub client_id: u64,
    pub offset: u64,
    pub numreplicas: u64,
    pub numlocal: Option<u64>,
}

#[derive(Default)]
pub struct Replication {
    /// A primary's: created when the first replica asks to sync (as Redis), freed after
    /// `repl-backlog-ttl` without replicas. A replica's: its primary's stream, from its
    /// first sync on, never freed.
    pub backlog: Option<Backlog>,
    pub replicas: Vec<Replica>,
    sync: Option<FullSync>,
    pub waits: Vec<WaitRequest>,
    /// A WAIT asked for acknowledgements this turn: one `REPLCONF GETACK *` at its end.
    pub getack_due: bool,
    last_ping_ms: i64,
    last_newline_ms: i64,
    /// Set by the capture's cut hook (snapshot thread, executor stopped): the next
    /// propagated command must say its db.
    cut_seen: Arc<AtomicBool>,
    /// Online replicas that acknowledged within `min-replicas-max-lag` (refreshed by cron
    /// and at every ACK, as Redis's repl_good_slaves_count).
    pub good_replicas: u64,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Bytes read from our primaries' connections (the link thread counts them), over
    /// every link this process had: INFO's `total_net_repl_input_bytes`.
    pub net_input_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// Following a primary (REPLICAOF host port).
    pub link: Option<MasterLink>,
    /// The `replicaof` of the config was acted on (at the first cron, once the listening
    /// port is known).
    pub config_followed: bool,
    /// The primary's client's db (the stream's db as applied), kept here while the client
    /// is out of the link for a batch: a snapshot's cut records it with the offset.
    pub applied_db: usize,
    /// What startup loaded, for [`Server::repl_restore`]: the stream's db at the loaded
    /// offset when the files say it, and the backlog rebuilt from the log's tail.
    pub loaded_stream_db: Option<usize>,
    pub loaded_backlog: Option<(Vec<u8>, Backlog)>,
    /// The replication position the data was loaded with, kept for the config's
    /// `replicaof` (a replica restarted from its files continues with PSYNC).
    pub restored: Option<Restored>,
    /// PSYNC2's previous id and the first offset it does not cover (Redis's replid2 and
    /// second_replid_offset): a primary restarted from its files answers continuations of
    /// the history its files hold under its new id.
    pub replid2: Option<(String, u64)>,
    /// A replica's relayed stream: its primary's commands, byte for byte as received,
    /// since the last drain (they go to its backlog and its own replicas, under its
    /// primary's id and offsets, as Redis's proxied stream).
    pub relay: Vec<u8>,
    /// Since when a primary has had no replica (ms; 0: not yet noted): with
    /// `repl-backlog-ttl` it frees its backlog after that long (Redis's
    /// repl_no_slaves_since).
    pub no_replicas_since_ms: i64,
    /// A FAILOVER in progress (None: Redis's no-failover).
    pub failover: Option<Failover>,
}

/// FAILOVER's state (Redis's failover_state and its parameters).
#[derive(Debug, Clone)]
pub struct Failover {
    /// false: waiting for a replica to acknowledge our whole stream (`waiting-for-sync`);
    /// true: following it, our PSYNC saying FAILOVER (`failover-in-progress`).
    pub in_progress: bool,
    /// The replica handed over to (ip, listening port); None: the first one in sync.
    pub target: Option<(String, u16)>,
    /// When waiting for sync gives up (ms; 0: never).
    pub end_ms: i64,
    /// At `end_ms`, fail over to the target even if it is behind.
    pub force: bool,
}

/// A replication position restored from the data files at startup.
#[derive(Debug, Clone)]
pub struct Restored {
    pub replid: String,
    pub offset: u64,
    /// The db the stream's next command runs in (None: the files do not say).
    pub stream_db: Option<usize>,
    /// `dirty` when it was restored: a write since makes it stale.
    pub dirty: u64,
}

/// The id of no history (Redis's "0000..."): log entries written under it are never
/// continued from.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// The largest replication offset taken from a data file (Redis's offsets are signed 64
/// bits; far below that, so offset arithmetic never overflows).
const MAX_RESTORED_OFFSET: u64 = 1 << 62;

/// A replication id the files may be trusted with: 40 hex digits, not all zeros.
fn usable_replid(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|c| c.is_ascii_hexdigit()) && id != NO_REPLID
}

impl Replication {
    pub fn online_replicas(&self) -> usize {
        self.replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Online))
            .count()
    }

    pub fn is_replica(&self, client_id: u64) -> bool {
        self.replicas.iter().any(|r| r.client_id == client_id)
    }

    /// Online replicas whose log fsynced `offset` (WAITAOF).
    pub fn aof_acked(&self, offset: u64) -> u64 {
        self.replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Online) && r.aof_ack_offset >= offset)
            .count() as u64
    }

    /// Replicas whose acknowledged offset reached `offset`.
    pub fn acked(&self, offset: u64) -> u64 {
        self.replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Online) && r.ack_offset >= offset)
            .count() as u64
    }

    pub fn sync_in_progress(&self) -> bool {
        self.sync.is_some()
    }

    /// A capture is running (it holds the snapshot engine's gate), or stopping.
    pub fn capture_running(&self) -> bool {
        matches!(
            self.sync,
            Some(FullSync {
                phase: Phase::Snapshot { .. } | Phase::Cancelled { .. },
                ..
            })
        )
    }
}

impl Server {
    /// The db the replication stream's next command runs in: a replica's, the primary's
    /// client's; a primary's, the db of its stream's last SELECT (any db when its next
    /// command states one).
    pub fn repl_stream_db(&self) -> Option<usize> {
        if self.repl.link.is_some() {
            Some(self.repl.applied_db)
        } else {
            Some(self.aof.selected_db.unwrap_or(0))
        }
    }

    /// Startup loaded the data at replication position (`replid`, `offset`) (from the
    /// log, or an image's header). A server configured as a replica keeps it and asks its
    /// primary to continue from there (Redis's cached master from the RDB's `rsi`); a
    /// primary takes a new id and answers continuations of the old one up to `offset`
    /// (PSYNC2's replid2), from the backlog the log's tail rebuilt.
    pub fn repl_restore(&mut self, replid: &str, offset: u64) {
        let stream_db = self.repl.loaded_stream_db.take();
        let rebuilt = self.repl.loaded_backlog.take();
        if replid == self.master_replid {
            return;
        }
        if !usable_replid(replid) || offset > MAX_RESTORED_OFFSET {
            // No history to continue (e.g. a log cut before its post-sync rewrite
            // committed): new entries go on under our own id. An offset no stream
            // reaches is a damaged file's: counting restarts at 0.
            if offset > MAX_RESTORED_OFFSET {
                warning!(
                    "Ignoring the replication offset {offset} of the loaded files: out of range"
                );
                self.aof.reploff = 0;
            }
            self.aof.replid = self.master_replid.clone();
            return;
        }
        self.aof.reploff = offset;
        let as_replica = self
            .config
            .get_value("replicaof")
            .is_some_and(|v| !v.trim().is_empty());
        if as_replica {
            self.master_replid = replid.to_string();
            self.aof.replid = replid.to_string();
            self.repl.restored = Some(Restored {
                replid: replid.to_string(),
                offset,
                stream_db,
                dirty: self.dirty,
            });
            return;
        }
        self.aof.replid = self.master_replid.clone();
        self.repl.replid2 = Some((replid.to_string(), offset + 1));
        // The backlog exists from now on (as Redis creates it when a primary loads its
        // data): writes before a replica comes back advance the offset it asks past.
        let rebuilt = rebuilt.filter(|(id, backlog)| {
            id == replid.as_bytes() && backlog.end_offset() == offset && backlog.histlen() > 0
        });
        let Some((_, backlog)) = rebuilt else {
            self.ensure_backlog();
            return;
        };
        notice!(
            "Replication backlog rebuilt from the AOF: {} bytes, offsets {} to {}",
            backlog.histlen(),
            backlog.first_offset(),
            offset
        );
        self.repl.backlog = Some(backlog);
        self.aof.repl_stream = Some(Vec::new());
        if self.ks.deletions.is_none() {
            self.ks.deletions = Some(Vec::new());
        }
    }

    /// The replication stream needs a backlog from now on: propagation produces the
    /// stream (and expiry DELs) even without `appendonly`.
    fn ensure_backlog(&mut self) {
        if self.repl.backlog.is_some() {
            return;
        }
        let size = self.config.settings().repl_backlog_size as usize;
        self.repl.backlog = Some(Backlog::new(size, self.aof.reploff));
        self.aof.repl_stream = Some(Vec::new());
        if self.ks.deletions.is_none() {
            self.ks.deletions = Some(Vec::new());
        }
        notice!("Replication backlog created, my new replication IDs are '{}' and '0000000000000000000000000000000000000000'", self.master_replid);
    }

    /// PSYNC / SYNC from `client` (Redis's syncCommand + masterTryPartialResynchronization).
    /// `want`: (replid, offset) of a PSYNC, None for SYNC. Returns the answer of a partial
    /// resync (`+CONTINUE <replid>` and the backlog from the wanted offset); None: a full
    /// sync was queued, and `+FULLRESYNC` follows when its capture cut.
    pub fn repl_psync(
        &mut self,
        client: &mut super::Client,
        want: Option<(&[u8], i64)>,
    ) -> Option<Vec<u8>> {
        if self.repl.link.is_none() {
            self.ensure_backlog();
        } else if self.repl.backlog.is_none() {
            // A replica keeps the backlog from its first sync on; a missing one starts at
            // the applied offset (the stream it relays, never its own propagation).
            let size = self.config.settings().repl_backlog_size as usize;
            self.repl.backlog = Some(Backlog::new(size, self.aof.reploff));
        }
        self.repl_drain();
        let replid = self.master_replid.clone();
        let partial = want.and_then(|(id, off)| {
            if id == b"?" || off < 0 {
                return None;
            }
            // Our history, or the one we continued from up to where we took a new id.
            let previous = self
                .repl
                .replid2
                .as_ref()
                .is_some_and(|(id2, upto)| id == id2.as_bytes() && off as u64 <= *upto);
            if id != replid.as_bytes() && !previous {
                notice!(
                    "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{}', my replication IDs are '{}' and '{}')",
                    String::from_utf8_lossy(id),
                    replid,
                    self.repl.replid2.as_ref().map_or(NO_REPLID, |(r, _)| r.as_str())
                );
                return None;
            }
            let bytes = self.repl.backlog.as_ref()?.copy_from(off as u64);
            if bytes.is_none() {
                notice!(
                    "Unable to partial resync with replica {}:{} for lack of backlog (Replica request was: {off}).",
                    client.addr.rsplit_once(':').map_or("", |(ip, _)| ip),
                    client.repl_listening_port
                );
            }
            bytes
        });
        client.replica = true;
        let ip = client.addr.rsplit_once(':').map_or("", |(ip, _)| ip);
        let mut r = Replica {
            client_id: client.id,
            slot: client.slot,
            state: ReplicaState::Online,
            listening_port: client.repl_listening_port,
            ip: ip.to_string(),
            capa_eof: client.repl_capa_eof,
            capa_image: client.repl_capa_image,
            ack_offset: 0,
            ack_ms: now_ms(),
            aof_ack_offset: 0,
            in_sync: false,
            psync: want.is_some(),
            rdb_only: client.repl_rdb_only,
            draining: None,
        };
        if let Some(bytes) = partial {
            self.repl.sync_partial_ok += 1;
            let mut out = format!("+CONTINUE {replid}\r\n").into_bytes();
            out.extend_from_slice(&bytes);
            notice!(
                "Partial resynchronization request from {} accepted. Sending {} bytes of backlog starting from offset {}.",
                replica_name(&r),
                bytes.len(),
                want.map_or(0, |w| w.1)
            );
            self.add_replica(r);
            return Some(out);
        }
        if want.is_some_and(|(id, _)| id != b"?") {
            self.repl.sync_partial_err += 1;
        }
        self.repl.sync_full += 1;
        notice!("Replica {} asks for synchronization", replica_name(&r));
        notice!("Full resync requested by replica {}", replica_name(&r));
        r.state = ReplicaState::WaitCapture {
            from_offset: self.aof.reploff,
            pending: self.new_pending_stream(r.client_id),
        };
        self.add_replica(r);
        None
    }

    /// The PING period counts from the first replica on (see `repl_cron`).
    fn add_replica(&mut self, r: Replica) {
        if self.repl.replicas.is_empty() {
            self.repl.last_ping_ms = now_ms();
        }
        self.repl.replicas.push(r);
    }

    /// INFO's `slaveN:` values: `ip=..,port=..,state=..,offset=..,lag=..` (Redis's states:
    /// wait_bgsave, send_bulk, online).
    pub fn repl_info_lines(&self, now_ms: i64) -> Vec<String> {
        self.repl
            .replicas
            .iter()
            .map(|r| {
                let state = match r.state {
                    ReplicaState::WaitCapture { .. } => "wait_bgsave",
                    ReplicaState::SendingRdb { .. } | ReplicaState::AwaitFirstAck { .. } => {
                        "send_bulk"
                    }
                    ReplicaState::Online => "online",
                };
                format!(
                    "ip={},port={},state={state},offset={},lag={}",
                    r.ip,
                    r.listening_port,
                    r.ack_offset,
                    (now_ms - r.ack_ms).max(0) / 1000
                )
            })
            .collect()
    }

    /// The online replicas as ROLE lists them: (ip, listening port, acknowledged offset).
    pub fn repl_online_replicas(&self) -> Vec<(String, u16, u64)> {
        self.repl
            .replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Online))
            .map(|r| (r.ip.clone(), r.listening_port, r.ack_offset))
            .collect()
    }

    /// WAIT blocks its client until `numreplicas` acknowledged `offset` or `deadline_ms`
    /// (0: never) passes, and asks the replicas for acknowledgements at the turn's end.
    pub fn repl_block_wait(
        &mut self,
        client_id: u64,
        offset: u64,
        numreplicas: u64,
        numlocal: Option<u64>,
        deadline_ms: i64,
    ) {
        self.repl.waits.push(WaitRequest {
            client_id,
            offset,
            numreplicas,
            numlocal,
        });
        self.repl.getack_due = true;
        let on_timeout = match numlocal {
            Some(_) => super::blocking::TimeoutReply::AofAcks { offset },
            None => super::blocking::TimeoutReply::ReplicaAcks { offset },
        };
        self.blocking.request = Some(super::blocking::BlockRequest {
            keys: Vec::new(),
            deadline_ms,
            kind: crate::keyspace::Kind::String,
            on_timeout,
            argv: None,
            gone_error: None,
        });
    }

    /// REPLCONF ACK from a replica: its offset (and its log's fsynced one, FACK); WAITs
    /// it satisfies are answered.
    pub fn repl_ack(&mut self, client_id: u64, offset: u64, fsynced: Option<u64>) {
        let Some(r) = self
            .repl
            .replicas
            .iter_mut()
            .find(|r| r.client_id == client_id)
        else {
            return;
        };
        r.ack_offset = r.ack_offset.max(offset);
        if let Some(f) = fsynced {
            r.aof_ack_offset = r.aof_ack_offset.max(f);
        }
        r.ack_ms = now_ms();
        if let ReplicaState::AwaitFirstAck { acked, .. } = &mut r.state {
            // Its stream goes out at the end of the turn, when its client is back in
            // its slot.
            *acked = true;
        }
        self.refresh_good_replicas();
        self.answer_waits();
    }

    /// Counts the replicas `min-replicas-to-write` accepts.
    pub fn refresh_good_replicas(&mut self) {
        let max_lag_ms = self.config.settings().min_replicas_max_lag_s as i64 * 1000;
        let now = now_ms();
        self.repl.good_replicas = self
            .repl
            .replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Online) && now - r.ack_ms <= max_lag_ms)
            .count() as u64;
    }

    /// The write refusal of `min-replicas-to-write` (Redis's checkGoodReplicasStatus).
    pub fn enough_good_replicas(&self) -> bool {
        let s = self.config.settings();
        // A replica takes its primary's writes whatever (Redis: not a primary, no rule).
        self.repl.link.is_some()
            || s.min_replicas_to_write == 0
            || s.min_replicas_max_lag_s == 0
            || self.repl.good_replicas >= s.min_replicas_to_write
    }

    /// Answers the WAITs (and WAITAOFs) whose counts are reached.
    pub fn answer_waits(&mut self) {
        if self.repl.waits.is_empty() {
            return;
        }
        let fsynced = self.aof.fsynced_reploff();
        let mut i = 0;
        while i < self.repl.waits.len() {
            let w = self.repl.waits[i];
            let (n, local) = match w.numlocal {
                None => (self.repl.acked(w.offset), None),
                Some(_) => (
                    self.repl.aof_acked(w.offset),
                    Some((fsynced >= Some(w.offset)) as u64),
                ),
            };
            if n >= w.numreplicas && local >= w.numlocal {
                self.repl.waits.swap_remove(i);
                self.blocking_answer(w.client_id, n, local);
            } else {
                i += 1;
            }
        }
    }

    /// A client left: it is no replica and waits for nothing any more.
    pub fn repl_forget(&mut self, client_id: u64) {
        if let Some(i) = self
            .repl
            .replicas
            .iter()
            .position(|r| r.client_id == client_id)
        {
            let r = self.repl.replicas.remove(i);
            notice!("Connection with replica {} lost.", replica_name(&r));
            if self.repl.replicas.is_empty() {
                self.repl.no_replicas_since_ms = now_ms();
            }
        }
        self.repl.waits.retain(|w| w.client_id != client_id);
    }

    /// Moves the stream produced since the last call into the backlog and to each
    /// replica (online: its output; syncing: its pending buffer). Called at every PSYNC
    /// and at the end of each event-loop turn.
    pub fn repl_drain(&mut self) {
        // A primary's own stream, or a replica's relay of its primary's (never both: a
        // replica propagates nothing of its own to replicas).
        let mut bytes = std::mem::take(&mut self.repl.relay);
        if let Some(stream) = self.aof.repl_stream.as_mut() {
            bytes.extend_from_slice(stream);
            stream.clear();
        }
        if bytes.is_empty() {
            return;
        }
        if let Some(b) = self.repl.backlog.as_mut() {
            b.append(&bytes);
        }
        let lim = self.config.settings().obuf_replica;
        let mut over: Vec<usize> = Vec::new();
        let mut online: Vec<(usize, u64)> = Vec::new();
        for r in &mut self.repl.replicas {
            let pending = match &mut r.state {
                ReplicaState::Online => match r.draining.as_mut() {
                    Some(d) => d,
                    None => {
                        online.push((r.slot, r.client_id));
                        continue;
                    }
                },
                ReplicaState::WaitCapture { pending, .. }
                | ReplicaState::SendingRdb { pending }
                | ReplicaState::AwaitFirstAck { pending, .. } => pending,
            };
            pending.append(&bytes);
            if lim.hard_bytes > 0 && pending.len() >= lim.hard_bytes {
                over.push(r.slot);
            }
        }
        for (slot, id) in online {
            crate::commands::pubsub::push_to_outbox(self, slot, id, lim, |o, _| {
                o.extend_from_slice(&bytes)
            });
        }
        for slot in over {
            self.close_replica_at(slot);
        }
    }

    /// Marks the replica at `slot` to be closed by the socket side (output limit).
    fn close_replica_at(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_mut()) {
            if !c.close_asap {
                warning!(
                    "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    c.info_line(now_ms())
                );
                self.stats.client_output_buffer_limit_disconnections += 1;
            }
        }
        self.close_soon(slot);
    }

    /// Marks the client at `slot` to be closed by the socket side at the turn's end.
    fn close_soon(&mut self, slot: usize) {
        if let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_mut()) {
            c.close_asap = true;
            if !c.in_pending {
                c.in_pending = true;
                self.pubsub.pending.push(slot);
            }
        }
    }

    /// Appends raw bytes to a replica's output, without the output limit (the RDB
    /// transfer bounds itself).
    fn push_raw(&mut self, slot: usize, client_id: u64, bytes: &[u8]) {
        let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        if c.id != client_id || c.close_asap {
            return;
        }
        c.pushed.extend_from_slice(bytes);
        if !c.in_pending {
            c.in_pending = true;
            self.pubsub.pending.push(slot);
        }
    }

    fn unsent_bytes(&self, slot: usize) -> u64 {
        self.clients
            .get(slot)
            .and_then(|c| c.as_ref())
            .map_or(0, |c| {
                c.obuf_bytes + c.pushed.len() as u64 + c.memory.unsent_output_bytes()
            })
    }

    /// End of an event-loop turn: the stream to replicas, the full sync's progress, the
    /// GETACK a WAIT asked for.
    pub fn repl_end_of_turn(&mut self) {
        if self.repl.link.is_some() {
            self.repl_poll_link();
            // What the link's next ACK reports as fsynced (FACK), -1: no log.
            let fsynced = self.aof.fsynced_reploff().map_or(-1, |o| o as i64);
            if let Some(link) = self.repl.link.as_ref() {
                link.shared.fsynced.store(fsynced, SeqCst);
            }
        }
        // WAITAOF's local count moves with the log's fsyncs.
        self.answer_waits();
        self.repl_failover_step();
        if self.repl.backlog.is_none() {
            return;
        }
        if std::mem::take(&mut self.repl.getack_due) && !self.repl.replicas.is_empty() {
            self.aof
                .feed_replicas_only(&[&b"REPLCONF"[..], b"GETACK", b"*"]);
        }
        self.repl_drain();
        self.full_sync_step();
        self.start_acked_streams();
    }

    /// `rdb-only` links that got their RDB close once it is written, and get no stream.
    fn close_rdb_only(&mut self) {
        let done: Vec<(usize, u64)> = self
            .repl
            .replicas
            .iter()
            .filter(|r| r.rdb_only && matches!(r.state, ReplicaState::AwaitFirstAck { .. }))
            .map(|r| (r.slot, r.client_id))
            .collect();
        for (slot, id) in done {
            self.repl.replicas.retain(|r| r.client_id != id);
            if let Some(c) = self.clients.get_mut(slot).and_then(|c| c.as_mut()) {
                c.close_after_reply = true;
                if !c.in_pending {
                    c.in_pending = true;
                    self.pubsub.pending.push(slot);
                }
            }
        }
    }

    /// Replicas whose first ACK after an `$EOF:` RDB arrived get their stream.
    fn start_acked_streams(&mut self) {
        let lim = self.config.settings().obuf_replica;
        for i in 0..self.repl.replicas.len() {
            let r = &mut self.repl.replicas[i];
            if !matches!(r.state, ReplicaState::AwaitFirstAck { acked: true, .. }) {
                continue;
            }
            let ReplicaState::AwaitFirstAck { mut pending, .. } =
                std::mem::replace(&mut r.state, ReplicaState::Online)
            else {
                continue;
            };
            // Small: at once, as it always was. Spilled to a file: in chunks, each turn
            // (`feed_draining`), with what arrives meanwhile queued behind.
            let Some(all) = pending.take_all_if_in_memory() else {
                r.draining = Some(pending);
                continue;
            };
            let (slot, id) = (r.slot, r.client_id);
            crate::commands::pubsub::push_to_outbox(self, slot, id, lim, |o, _| {
                o.extend_from_slice(&all)
            });
        }
        self.feed_draining();
    }

    /// Online replicas still sending the stream kept during their sync: topped up while
    /// less than the full sync's window is unsent, until it is all out.
    fn feed_draining(&mut self) {
        for i in 0..self.repl.replicas.len() {
            if self.repl.replicas[i].draining.is_none() {
                continue;
            }
            let (slot, id) = (self.repl.replicas[i].slot, self.repl.replicas[i].client_id);
            while self.unsent_bytes(slot) < RDB_OUTPUT_WINDOW_BYTES {
                let Some(d) = self.repl.replicas[i].draining.as_mut() else {
                    break;
                };
                if d.is_empty() {
                    self.repl.replicas[i].draining = None;
                    break;
                }
                match d.take(RDB_CHUNK_BYTES) {
                    // The spool's next chunk is on its way; its arrival wakes the loop.
                    Ok(chunk) if chunk.is_empty() => break,
                    Ok(chunk) => self.push_raw(slot, id, &chunk),
                    Err(e) => {
                        warning!("Replication: reading back the pending stream failed: {e}");
                        self.repl.replicas[i].draining = None;
                        self.close_soon(slot);
                        break;
                    }
                }
            }
        }
    }

    /// A syncing replica's buffer for the stream after its capture's cut.
    fn new_pending_stream(&self, client_id: u64) -> PendingStream {
        let dir = &self.config.settings().dir;
        let dir = if dir.is_empty() { "." } else { dir.as_str() };
        PendingStream::with_wake(PathBuf::from(dir), client_id, self.aof.waker())
    }

    /// Cron: PINGs in the stream, newlines to replicas waiting for their capture (Redis's
    /// keepalive before `+FULLRESYNC`), WAIT deadlines are the blocking layer's.
    pub fn repl_cron(&mut self) {
        // After an image finished loading: a replica continues from the loaded data.
        if !self.repl.config_followed && !self.is_loading() {
            self.repl.config_followed = true;
            let target = self.config.get_value("replicaof").unwrap_or("").to_string();
            if let Some((host, port)) = target.split_once(' ') {
                match port.parse::<u16>() {
                    Ok(port) => {
                        if let Err(e) = self.repl_follow(host, port) {
                            warning!("{e}");
                        }
                    }
                    Err(_) => warning!("Invalid master port in replicaof: {port}"),
                }
            }
        }
        if self.repl.link.is_some() {
            self.repl_poll_link();
        }
        self.repl_failover_step();
        if self.repl.backlog.is_none() {
            return;
        }
        self.free_idle_backlog();
        if self.repl.backlog.is_none() {
            return;
        }
        self.disconnect_timed_out_replicas();
        self.refresh_good_replicas();
        if let Some(b) = self.repl.backlog.as_mut() {
            let size = self.config.settings().repl_backlog_size as usize;
            if b.size_limit_bytes() != size {
                b.resize(size);
            }
        }
        let now = now_ms();
        let period_ms = self.config.settings().repl_ping_replica_period_s as i64 * 1000;
        // The period counts from the first replica on (`add_replica`): a primary's stream
        // gets its first PING one period after a replica attached, never at the next cron
        // (which raced with offsets read right after a sync).
        if !self.repl.replicas.is_empty() && now - self.repl.last_ping_ms >= period_ms {
            self.repl.last_ping_ms = now;
            self.aof.feed_replicas_only(&[&b"PING"[..]]);
        }
        if now - self.repl.last_newline_ms >= 1000 {
            self.repl.last_newline_ms = now;
            // Not to members of a capture streamed as it is taken: its bytes are going out.
            let streaming = matches!(
                self.repl.sync.as_ref().map(|s| &s.phase),
                Some(Phase::Snapshot { early: Some(_), .. })
            );
            let waiting: Vec<(usize, u64)> = self
                .repl
                .replicas
                .iter()
                .filter(|r| matches!(r.state, ReplicaState::WaitCapture { .. }))
                .filter(|r| !(streaming && r.in_sync))
                .map(|r| (r.slot, r.client_id))
                .collect();
            for (slot, id) in waiting {
                self.push_raw(slot, id, b"\n");
            }
        }
        self.repl_end_of_turn();
    }

    /// `repl-backlog-ttl`: a primary with no replica for that long frees its backlog and
    /// starts a new history (a new id, no replid2: nothing can continue the old one from
    /// here). A replica keeps its backlog whatever: it may be promoted.
    fn free_idle_backlog(&mut self) {
        let now = now_ms();
        if !self.repl.replicas.is_empty() || self.repl.link.is_some() {
            self.repl.no_replicas_since_ms = now;
            return;
        }
        if self.repl.no_replicas_since_ms == 0 {
            self.repl.no_replicas_since_ms = now;
        }
        let ttl_s = self.config.settings().repl_backlog_ttl_s;
        let idle_ms = now - self.repl.no_replicas_since_ms;
        if ttl_s == 0 || idle_ms <= ttl_s as i64 * 1000 {
            return;
        }
        self.repl_drain();
        self.master_replid = new_replid();
        if self.aof.replid != NO_REPLID {
            self.aof.replid = self.master_replid.clone();
        }
        self.repl.replid2 = None;
        self.repl.backlog = None;
        self.aof.repl_stream = None;
        if !self.aof.enabled {
            self.ks.deletions = None;
        }
        notice!("Replication backlog freed after {ttl_s} seconds without connected replicas.");
    }

    /// Online replicas that sent no ACK for `repl-timeout` are dropped (not SYNC links,
    /// which never acknowledge).
    fn disconnect_timed_out_replicas(&mut self) {
        let timeout_ms = self.config.settings().repl_timeout_s as i64 * 1000;
        let now = now_ms();
        let gone: Vec<usize> = self
            .repl
            .replicas
            .iter()
            .filter(|r| {
                r.psync && matches!(r.state, ReplicaState::Online) && now - r.ack_ms > timeout_ms
            })
            .map(|r| {
                warning!(
                    "Disconnecting timedout replica (streaming sync): {}",
                    replica_name(r)
                );
                r.slot
            })
            .collect();
        for slot in gone {
            self.close_soon(slot);
        }
    }

    /// After a snapshot stop: if the capture cut there, the next propagated command
    /// starts with its SELECT (a replica loading the RDB starts in db 0).
    pub(crate) fn repl_after_stop(&mut self) {
        if self.repl.cut_seen.swap(false, SeqCst) {
            self.aof.selected_db = None;
        }
    }

    /// Advances the full sync: starts a capture for waiting replicas, hands out
    /// `+FULLRESYNC` when it cut, moves RDB chunks to the replicas, puts them online.
    fn full_sync_step(&mut self) {
        match self.repl.sync.as_ref().map(|s| &s.phase) {
            None => self.start_capture(),
            Some(Phase::Snapshot { job, early }) => {
                let done = job.is_finished();
                if let Some(t) = early {
                    if !self.repl.replicas.iter().any(|r| r.in_sync) {
                        self.cancel_streamed_capture();
                        return;
                    }
                    if let Some(e) = t.finished.failed() {
                        // The sender gave up (a read error, the capture abandoned): the
                        // members cannot get this image, so they go now, not at the
                        // capture's end; the capture is cancelled once they left.
                        warning!("Streaming the image for replication failed: {e}");
                        let slots: Vec<usize> = self
                            .repl
                            .replicas
                            .iter_mut()
                            .filter(|r| r.in_sync)
                            .map(|r| {
                                r.in_sync = false;
                                r.slot
                            })
                            .collect();
                        for slot in slots {
                            self.close_soon(slot);
                        }
                        self.cancel_streamed_capture();
                        return;
                    }
                    self.stream_capture();
                }
                if done {
                    self.capture_done();
                }
            }
            Some(Phase::Cancelled { job }) => {
                if job.is_finished() {
                    self.capture_cancelled();
                }
            }
            Some(Phase::Send { .. }) => self.send_rdb(),
        }
    }

    /// Every member of an image-form capture left: its bytes can serve nobody (a
    /// replica that asked since waits for a capture of its own), so it stops now rather
    /// than at its end, and the next capture starts as soon as it is collected. The
    /// sender ends with it (the writer's abandon wakes it; its channel is gone).
    fn cancel_streamed_capture(&mut self) {
        let Some(sync) = self.repl.sync.take() else {
            return;
        };
        let Phase::Snapshot { job, early } = sync.phase else {
            self.repl.sync = Some(sync);
            return;
        };
        warning!("Diskless rdb transfer, last replica dropped, cancelling the capture.");
        drop(early);
        job.request_cancel();
        self.repl.sync = Some(FullSync {
            phase: Phase::Cancelled { job },
            ..sync
        });
        if self.repl.sync.as_ref().is_some_and(|s| match &s.phase {
            Phase::Cancelled { job } => job.is_finished(),
            _ => false,
        }) {
            self.capture_cancelled();
        }
    }

    /// The cancelled capture's thread ended: its file goes, the arena's pages are its
    /// own again, and whoever asked meanwhile gets a fresh capture.
    fn capture_cancelled(&mut self) {
        let Some(sync) = self.repl.sync.take() else {
            return;
        };
        let Phase::Cancelled { job } = sync.phase else {
            self.repl.sync = Some(sync);
            return;
        };
        // Cancelled, or done just before the request: either way nobody gets it.
        let _ = job.join();
        self.ks.arena.set_keep_pages(false);
        self.tier_capture(false);
        remove_capture(&sync.image);
        self.start_capture();
    }

    fn start_capture(&mut self) {
        let waiting = self
            .repl
            .replicas
            .iter()
            .any(|r| matches!(r.state, ReplicaState::WaitCapture { .. }));
        if !waiting || self.background_job_active() {
            return;
        }
        let s = self.config.settings();
        let dir = if s.dir.is_empty() {
            "."
        } else {
            s.dir.as_str()
        };
        let image = PathBuf::from(dir).join(format!("temp-repl-{}.cimg", std::process::id()));
        let waiting = || {
            self.repl
                .replicas
                .iter()
                .filter(|r| matches!(r.state, ReplicaState::WaitCapture { .. }))
        };
        // SYNC (no `+FULLRESYNC` line) and `redis-cli --rdb` expect an RDB. With tiering
        // the capture's cold values are in its companion file, which a replica does not
        // get: they go as an RDB, converted with the companion's values.
        let image_form = s.repl_image_sync
            && self.tiering.is_none()
            && waiting().all(|r| r.capa_image && r.psync && !r.rdb_only);
        let eof_form = !image_form && s.repl_diskless_sync && waiting().all(|r| r.capa_eof);
        let mut p = super::snapshot_ops::params(self);
        p.path = image.clone();
        let follow = image_form.then(|| Arc::new(Follow::default()));
        p.follow = follow.clone();
        // Under `auto` the capture is copy-before-write: each page leaves once, and no raw
        // pool adds to the primary's memory (BENCHMARKS.md, "Where the primary's extra
        // memory went during a streamed full sync").
        if image_form {
            // Redis's knob for slow saves, here on the records of the streamed capture.
            p.record_delay_us = self
                .config
                .get_value("rdb-key-save-delay")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
                .max(0) as u64;
        }
        let cut = self.repl.cut_seen.clone();
        p.on_cut = Some(Arc::new(move |_lsn| cut.store(true, SeqCst)));
        self.ks.arena.set_keep_pages(true);
        match BgJob::start(&self.ks.arena, p, self.snapshot.gate.clone()) {
            Ok(job) => {
                // Tier pages are not reused until the capture's companion is copied.
                self.tier_capture(true);
                notice!(
                    "Starting BGSAVE for SYNC with target: {}",
                    if image_form {
                        "disk (snapshot image)"
                    } else if eof_form {
                        "replicas sockets"
                    } else {
                        "disk"
                    }
                );
                let mut members = Vec::new();
                for r in &mut self.repl.replicas {
                    if matches!(r.state, ReplicaState::WaitCapture { .. }) {
                        r.in_sync = true;
                        members.push((r.slot, r.client_id));
                    }
                }
                let early = match follow {
                    Some(f) => {
                        match self.start_image_transfer(&image, f, job.spawned_thread_cpus()) {
                            Ok(t) => {
                                // The image's header, sent last, names the cut's offset.
                                let head = format!("+CAIRNIMAGE {}\r\n", self.master_replid);
                                for (slot, id) in members {
                                    self.push_raw(slot, id, head.as_bytes());
                                }
                                Some(t)
                            }
                            Err(e) => {
                                warning!("Can't start the image sender for replication: {e}");
                                job.cancel();
                                self.ks.arena.set_keep_pages(false);
                                self.tier_capture(false);
                                remove_capture(&image);
                                self.fail_sync_members();
                                return;
                            }
                        }
                    }
                    None => None,
                };
                self.repl.sync = Some(FullSync {
                    phase: Phase::Snapshot { job, early },
                    image,
                    cut_offset: 0,
                    eof_form,
                });
            }
            Err(e) => {
                self.ks.arena.set_keep_pages(false);
                warning!("Can't start the capture for replication: {e}");
                self.fail_sync_members();
            }
        }
    }

    /// Closes the replicas of the running sync (its capture or transfer failed).
    fn fail_sync_members(&mut self) {
        let slots: Vec<usize> = self
            .repl
            .replicas
            .iter()
            .filter(|r| r.in_sync || matches!(r.state, ReplicaState::WaitCapture { .. }))
            .map(|r| r.slot)
            .collect();
        for slot in slots {
            self.close_soon(slot);
        }
    }

    fn capture_done(&mut self) {
        let Some(mut sync) = self.repl.sync.take() else {
            return;
        };
        let Phase::Snapshot { job, early } = sync.phase else {
            return;
        };
        let result = job.join();
        self.ks.arena.set_keep_pages(false);
        self.tier_capture(false);
        let outcome = match result {
            Ok(o) => o,
            Err(e) => {
                warning!("Background capture for replication failed: {e}");
                remove_capture(&sync.image);
                self.fail_sync_members();
                return;
            }
        };
        notice!(
            "Background RDB transfer started by pid {}",
            std::process::id()
        );
        sync.cut_offset = outcome.repl_offset;
        let replid = self.master_replid.clone();
        let mut members: Vec<(usize, u64, bool)> = Vec::new();
        let mut late = Vec::new();
        for r in &mut self.repl.replicas {
            if !r.in_sync {
                continue;
            }
            let ReplicaState::WaitCapture {
                from_offset,
                pending,
            } = &mut r.state
            else {
                continue;
            };
            if *from_offset > sync.cut_offset {
                // Asked after the cut: the next capture serves it (an image streamed
                // from before: never, members are fixed when the capture starts).
                r.in_sync = false;
                if early.is_some() {
                    late.push(r.slot);
                }
                continue;
            }
            pending.skip(sync.cut_offset - *from_offset);
            let ReplicaState::WaitCapture { pending, .. } =
                std::mem::replace(&mut r.state, ReplicaState::Online)
            else {
                continue;
            };
            r.state = ReplicaState::SendingRdb { pending };
            members.push((r.slot, r.client_id, r.psync));
        }
        for slot in late {
            // Part of an image went to it already: it starts again.
            self.close_soon(slot);
        }
        if members.is_empty() {
            // Everyone who asked left (or asked after the cut): no RDB to write.
            remove_capture(&sync.image);
            self.start_capture();
            return;
        }
        if let Some(t) = early {
            // The sender goes on with the capture's end and its header.
            sync.phase = Phase::Send {
                chunks: t.chunks,
                finished: t.finished,
                converter: t.thread,
            };
            self.repl.sync = Some(sync);
            return;
        }
        let head = format!("+FULLRESYNC {replid} {}\r\n", sync.cut_offset);
        for &(slot, id, psync) in &members {
            if psync {
                self.push_raw(slot, id, head.as_bytes());
            }
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(RDB_CHUNKS_QUEUED);
        let s = self.config.settings();
        let reserve = s.arena_reserve_bytes;
        let dbs = self.ks.num_dbs();
        let image = sync.image.clone();
        let eof_form = sync.eof_form;
        let aux = vec![
            ("repl-id", replid),
            ("repl-offset", sync.cut_offset.to_string()),
        ];
        let tmp_rdb = image.with_extension("rdb");
        let wake = self.aof.waker();
        let finished = Arc::new(Finished::default());
        let done = finished.clone();
        let spawned = std::thread::Builder::new()
            .name("cairn-repl-rdb".into())
            .spawn(move || {
                let mut unlinked = Vec::new();
                let r = produce_rdb(
                    &image,
                    &tmp_rdb,
                    &aux,
                    reserve,
                    dbs,
                    eof_form,
                    tx,
                    wake.clone(),
                    &mut unlinked,
                );
                // Left behind by a failure before they were unlinked (a no-op otherwise).
                remove_capture(&image);
                let _ = std::fs::remove_file(&tmp_rdb);
                done.publish(r);
                if let Some(w) = &wake {
                    w();
                }
                // Closing the last descriptor of an unlinked multi-GB file frees its
                // blocks, synchronously (ext4 with `discard` waits for the device): a
                // second or more, here, after the executor has the outcome.
                drop(unlinked);
            });
        match spawned {
            Ok(h) => {
                sync.phase = Phase::Send {
                    chunks: rx,
                    finished,
                    converter: h,
                };
                self.repl.sync = Some(sync);
            }
            Err(e) => {
                warning!("Can't start the RDB writer for replication: {e}");
                remove_capture(&sync.image);
                self.fail_sync_members();
            }
        }
    }

    /// Starts the `cairn-repl-rdb` thread that streams the capture to image-form
    /// replicas while it is written ([`stream_image`]).
    fn start_image_transfer(
        &self,
        image: &std::path::Path,
        follow: Arc<Follow>,
        cpus: Option<crate::persistence::snapshot::CpuSet>,
    ) -> std::io::Result<Transfer> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(IMAGE_CHUNKS_QUEUED);
        let wake = self.aof.waker();
        let finished = Arc::new(Finished::default());
        let done = finished.clone();
        let image = image.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("cairn-repl-rdb".into())
            .spawn(move || {
                // Off the CPU the capture pinned the executor to (we inherited the pin).
                let _cpus = cpus.as_ref().map(crate::persistence::snapshot::OnCpu::set);
                let mut unlinked = Vec::new();
                let r = stream_image(&image, &follow, &tx, wake.as_ref(), &mut unlinked);
                drop(tx);
                remove_capture(&image);
                done.publish(r);
                if let Some(w) = &wake {
                    w();
                }
                // As for the RDB form: the last close of the unlinked capture frees its
                // blocks, after the executor has the outcome.
                drop(unlinked);
            })?;
        Ok(Transfer {
            chunks: rx,
            finished,
            thread,
        })
    }

    /// While an image-form capture runs: its final bytes to the members, as the RDB form
    /// does after the capture ([`Server::send_rdb`]), within the same window.
    fn stream_capture(&mut self) {
        let members: Vec<(usize, u64)> = self
            .repl
            .replicas
            .iter()
            .filter(|r| r.in_sync && matches!(r.state, ReplicaState::WaitCapture { .. }))
            .map(|r| (r.slot, r.client_id))
            .collect();
        loop {
            if members
                .iter()
                .any(|&(slot, _)| self.unsent_bytes(slot) >= RDB_OUTPUT_WINDOW_BYTES)
            {
                return;
            }
            let Some(FullSync {
                phase: Phase::Snapshot { early: Some(t), .. },
                ..
            }) = self.repl.sync.as_ref()
            else {
                return;
            };
            // A disconnected channel is the thread's end: its outcome is taken once the
            // capture is done (`send_rdb`).
            let Ok(chunk) = t.chunks.try_recv() else {
                return;
            };
            for &(slot, id) in &members {
                self.push_raw(slot, id, &chunk);
            }
        }
    }

    fn send_rdb(&mut self) {
        let members: Vec<(usize, u64)> = self
            .repl
            .replicas
            .iter()
            .filter(|r| r.in_sync && matches!(r.state, ReplicaState::SendingRdb { .. }))
            .map(|r| (r.slot, r.client_id))
            .collect();
        let mut finished = false;
        loop {
            // Every member keeps up within the window (a slow one holds the rest back; one
            // over its output limit is closed by the socket side).
            if members
                .iter()
                .any(|&(slot, _)| self.unsent_bytes(slot) >= RDB_OUTPUT_WINDOW_BYTES)
            {
                break;
            }
            let Some(FullSync {
                phase: Phase::Send { chunks, .. },
                ..
            }) = self.repl.sync.as_ref()
            else {
                return;
            };
            match chunks.try_recv() {
                Ok(chunk) => {
                    for &(slot, id) in &members {
                        self.push_raw(slot, id, &chunk);
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    finished = true;
                    break;
                }
            }
        }
        if !finished {
            return;
        }
        // The thread's outcome; never a join (it may still be closing its files, which
        // can take seconds, see `Finished`): it comes with a wake, or with the thread's
        // end when it stopped abnormally.
        let outcome = match self.repl.sync.as_ref().map(|s| &s.phase) {
            Some(Phase::Send {
                finished,
                converter,
                ..
            }) => match finished.take() {
                Some(r) => Some(r),
                None if converter.is_finished() => None,
                None => return,
            },
            _ => return,
        };
        let Some(sync) = self.repl.sync.take() else {
            return;
        };
        let Phase::Send { converter, .. } = sync.phase else {
            return;
        };
        if outcome.is_none() {
            let _ = converter.join();
        }
        match outcome {
            Some(Ok(())) => {
                for r in &mut self.repl.replicas {
                    if !r.in_sync {
                        continue;
                    }
                    r.in_sync = false;
                    let ReplicaState::SendingRdb { pending } =
                        std::mem::replace(&mut r.state, ReplicaState::Online)
                    else {
                        continue;
                    };
                    r.state = ReplicaState::AwaitFirstAck {
                        pending,
                        acked: !sync.eof_form,
                    };
                    r.ack_ms = now_ms();
                    notice!("Synchronization with replica {} succeeded", replica_name(r));
                }
                self.close_rdb_only();
                self.start_acked_streams();
            }
            Some(Err(e)) => {
                warning!("Writing the RDB for replication failed: {e}");
                self.fail_sync_members();
            }
            None => {
                warning!("The RDB writer for replication stopped abnormally");
                self.fail_sync_members();
            }
        }
        // Replicas that asked after the cut start the next capture.
        self.start_capture();
    }

    /// The running capture or transfer is abandoned (shutdown): its temporary files go.
    pub fn repl_cancel_sync(&mut self) {
        if let Some(sync) = self.repl.sync.take() {
            match sync.phase {
                Phase::Snapshot { job, early } => {
                    // The writer's abandon ends the sender (its outcome is not needed).
                    drop(early);
                    job.cancel();
                    self.ks.arena.set_keep_pages(false);
                    self.tier_capture(false);
                }
                Phase::Cancelled { job } => {
                    job.cancel();
                    self.ks.arena.set_keep_pages(false);
                    self.tier_capture(false);
                }
                Phase::Send {
                    chunks, converter, ..
                } => {
                    drop(chunks);
                    let _ = converter.join();
                }
            }
            remove_capture(&sync.image);
        }
    }
}

/// Removes a sync's capture and its tier companion (tiering on).
fn remove_capture(image: &std::path::Path) {
    let _ = std::fs::remove_file(image);
    crate::persistence::tiered::companion::remove_others(image, None);
}

/// A fresh random replication id (40 hex digits).
fn new_replid() -> String {
    let mut rng = crate::util::Rng::from_time();
    (0..40)
        .map(|_| char::from_digit(rng.below(16) as u32, 16).unwrap_or('0'))
        .collect()
}

/// `ip:port` as Redis names a replica in its log lines.
fn replica_name(r: &Replica) -> String {
    format!("{}:{}", r.ip, r.listening_port)
}

/// Sender thread for replicas that load our images, started with the capture: the image
/// in its streamed order (`docs/formats/snapshot.md`, "Streamed form"): every byte after
/// the header as soon as the writer made it final, then, once the image is complete, the
/// header (which names the cut's offset). The replica loads it as it arrives. When the
/// replicas are slower than the capture the file is the buffer: at most
/// [`IMAGE_CHUNKS_QUEUED`] chunks wait in memory. `unlinked`: the capture, open and
/// unlinked once complete, for the caller to close after the executor has the outcome.
fn stream_image(
    image: &std::path::Path,
    follow: &Follow,
    tx: &SyncSender<Vec<u8>>,
    wake: Option<&Arc<dyn Fn() + Send + Sync>>,
    unlinked: &mut Vec<std::fs::File>,
) -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    crate::persistence::snapshot::lower_priority();
    let f = follow.file()?;
    let send = |from: u64, to: u64| -> Result<(), String> {
        let mut at = from;
        while at < to {
            let n = (to - at).min(RDB_CHUNK_BYTES as u64) as usize;
            let mut chunk = vec![0u8; n];
            f.read_exact_at(&mut chunk, at)
                .map_err(|e| format!("{}: {e}", image.display()))?;
            tx.send(chunk)
                .map_err(|_| "the replication sync was abandoned".to_string())?;
            if let Some(w) = wake {
                w();
            }
            at += n as u64;
        }
        Ok(())
    };
    let mut sent = HEADER_BYTES as u64;
    loop {
        match follow.wait_past(sent)? {
            Followed::More(mark) => {
                send(sent, mark)?;
                sent = mark;
            }
            Followed::Complete(len) => {
                // Complete and renamed into `image`: the name is free for the next
                // capture, the blocks go at the close.
                let _ = std::fs::remove_file(image);
                if len < sent {
                    return Err(format!("{} shrank while it was sent", image.display()));
                }
                send(sent, len)?;
                send(0, HEADER_BYTES as u64)?;
                unlinked.push(f);
                return Ok(());
            }
        }
    }
}

/// Converter thread: loads the capture into a private arena and sends the RDB in chunks.
/// `eof_form`: `$EOF:<mark>\r\n<rdb><mark>` as it is written; otherwise the RDB is written
/// to `tmp_rdb` first, then sent as `$<len>\r\n<rdb>`.
#[allow(clippy::too_many_arguments)]
fn produce_rdb(
    image: &std::path::Path,
    tmp_rdb: &std::path::Path,
    aux: &[(&str, String)],
    reserve_bytes: usize,
    databases: usize,
    eof_form: bool,
    tx: SyncSender<Vec<u8>>,
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
    unlinked: &mut Vec<std::fs::File>,
) -> Result<(), String> {
    crate::persistence::snapshot::lower_priority();
    let progress = crate::persistence::snapshot::format::LoadProgress::default();
    let (arena, header) =
        crate::persistence::snapshot::load_image(image, reserve_bytes, &progress)?
            .ok_or_else(|| format!("the capture {} vanished", image.display()))?;
    // The cold values (tiering on) were read from the companion into the arena.
    remove_capture(image);
    // The db the stream after the cut runs in: a primary states it again with a SELECT
    // before its next command, a replica relays its primary's stream as it is, so its
    // replicas must start their primary's client there (Redis's rsi.repl_stream_db).
    let stream_db = header.repl_stream_db.saturating_sub(1).to_string();
    let aux: Vec<(&str, String)> = std::iter::once(("repl-stream-db", stream_db))
        .chain(aux.iter().cloned())
        .collect();
    let aux = aux.as_slice();
    let mut ks = crate::collections::keyspace_from_arena(arena, databases)?;
    let mut sink = ChunkSink {
        tx,
        buf: Vec::with_capacity(RDB_CHUNK_BYTES),
        wake,
    };
    use std::io::Write;
    if eof_form {
        let mark: String = {
            let mut rng = crate::util::Rng::from_time();
            (0..40)
                .map(|_| b"0123456789abcdef"[(rng.next_u64() % 16) as usize] as char)
                .collect()
        };
        sink.write_all(format!("$EOF:{mark}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        crate::persistence::rdb_file::write_rdb_with_functions(
            &mut ks,
            &mut sink,
            aux,
            &header.functions,
            0,
        )?;
        sink.write_all(mark.as_bytes()).map_err(|e| e.to_string())?;
    } else {
        let io = |e: std::io::Error| format!("{}: {e}", tmp_rdb.display());
        {
            let f = std::fs::File::create(tmp_rdb).map_err(io)?;
            let mut w = std::io::BufWriter::with_capacity(RDB_CHUNK_BYTES, f);
            crate::persistence::rdb_file::write_rdb_with_functions(
                &mut ks,
                &mut w,
                aux,
                &header.functions,
                0,
            )?;
            w.flush().map_err(io)?;
        }
        drop(ks);
        let f = std::fs::File::open(tmp_rdb).map_err(io)?;
        let _ = std::fs::remove_file(tmp_rdb);
        unlinked.push(f);
        let f = unlinked.last_mut().ok_or("no file")?;
        let len = f.metadata().map_err(io)?.len();
        sink.write_all(format!("${len}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        std::io::copy(f, &mut sink).map_err(io)?;
    }
    sink.flush().map_err(|e| e.to_string())
}

/// The converter's output: chunks of [`RDB_CHUNK_BYTES`] into the bounded channel (a full
/// channel makes the converter wait for the executor; a dropped receiver ends it).
struct ChunkSink {
    tx: SyncSender<Vec<u8>>,
    buf: Vec<u8>,
    wake: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl ChunkSink {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(RDB_CHUNK_BYTES));
        self.tx
            .send(chunk)
            .map_err(|_| std::io::Error::other("the replication sync was abandoned"))?;
        if let Some(w) = &self.wake {
            w();
        }
        Ok(())
    }
}

impl std::io::Write for ChunkSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = RDB_CHUNK_BYTES - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= RDB_CHUNK_BYTES {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Server {
    /// After a CONFIG SET of `tls-*` options: the link to the primary connects with
    /// them from its next attempt on.
    pub fn repl_link_config_changed(&self) {
        if let Some(link) = &self.repl.link {
            *link
                .shared
                .new_config
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(self.config.clone());
        }
    }
}

/// cairn as a replica: the link thread's handle and what the executor tracks of it.
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    events: Receiver<super::replica_link::LinkEvent>,
    shared: Arc<super::replica_link::LinkShared>,
    thread: Option<JoinHandle<()>>,
    /// ROLE's word: connect, connecting, handshake, sync, connected.
    pub state: &'static str,
    /// The primary's client: runs the stream (its replies are dropped).
    client: Box<super::Client>,
    pub last_io_ms: i64,
    pub down_since_ms: i64,
    /// A full sync's dataset taken from the channel, waiting for the current arena's
    /// pins to drain (`repl_poll_link`); the events behind it stay in the channel.
    held_full_sync: Option<super::replica_link::LinkEvent>,
}

impl MasterLink {
    pub fn link_up(&self) -> bool {
        self.state == "connected"
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            // The thread waits on its channel or a 100 ms read: drain so it sees `stop`.
            while !t.is_finished() {
                while self.events.try_recv().is_ok() {}
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let _ = t.join();
        }
    }
}

/// Events taken from the link per turn (each up to 1024 commands).
const LINK_EVENTS_PER_TURN: usize = 16;

impl Server {
    /// Disconnects our own replicas (they PSYNC again and learn the new id or history)
    /// and abandons a full sync in progress for them.
    fn disconnect_replicas(&mut self) {
        let slots: Vec<usize> = self.repl.replicas.iter().map(|r| r.slot).collect();
        for slot in slots {
            self.close_soon(slot);
        }
        self.repl_cancel_sync();
    }

    /// Stops the link thread, keeping the replication position (Redis caches its
    /// primary: a new primary may continue it).
    fn repl_stop_link(&mut self) {
        self.repl_drain();
        let Some(mut link) = self.repl.link.take() else {
            return;
        };
        link.stop();
        // A full sync still waiting for pins to drain is dropped with the link.
        self.dataset_swap_pending = false;
    }

    /// REPLICAOF host port: follow that primary (Redis's replicationSetMaster). Our own
    /// replicas are disconnected (they resync from us, partially when they can); the
    /// backlog stays, so the position we offer the new primary is one we can serve from
    /// too (the replicas of a replica get its primary's stream as it is).
    pub fn repl_follow(&mut self, host: &str, port: u16) -> Result<(), String> {
        self.repl_stop_link();
        self.disconnect_replicas();
        self.repl_drain();
        let had_backlog = self.repl.backlog.is_some();
        self.aof.repl_stream = None;
        if !self.aof.enabled {
            self.ks.deletions = None;
        }
        let s = self.config.settings();
        let params = super::replica_link::LinkParams {
            host: host.to_string(),
            port,
            listening_port: self.tcp_port,
            masterauth: self
                .config
                .get_value("masterauth")
                .filter(|v| !v.is_empty())
                .map(String::from),
            masteruser: self
                .config
                .get_value("masteruser")
                .filter(|v| !v.is_empty())
                .map(String::from),
            timeout: std::time::Duration::from_secs(s.repl_timeout_s),
            config: self.config.clone(),
            dir: PathBuf::from(if s.dir.is_empty() {
                "."
            } else {
                s.dir.as_str()
            }),
        };
        let shared = Arc::new(super::replica_link::LinkShared {
            net_input_bytes: self.repl.net_input_bytes.clone(),
            ..Default::default()
        });
        // A primary that had replicas offers its own history (PSYNC2: the new primary may
        // be one of those replicas); otherwise the first sync is a full one.
        if had_backlog {
            if let Ok(mut g) = shared.cached.lock() {
                *g = Some((self.master_replid.clone(), self.aof.reploff));
            }
        }
        // Restarted from our files as a replica: the loaded data is the stream up to the
        // restored offset (nothing written since), in a db the files name.
        let mut stream_db = 0;
        if let Some(r) = self.repl.restored.take() {
            match r.stream_db {
                Some(db) if r.dirty == self.dirty && r.offset == self.aof.reploff => {
                    notice!("Before turning into a replica, using my own master parameters to synthesize a cached master: I may be able to synchronize with the new master with just a partial transfer.");
                    stream_db = db;
                    if let Ok(mut g) = shared.cached.lock() {
                        *g = Some((r.replid, r.offset));
                    }
                }
                Some(_) => notice!("The data changed since it was loaded: no partial resynchronization from the loaded replication offset"),
                None => notice!("The loaded files do not say which db the replication stream was in: no partial resynchronization from them"),
            }
        }
        self.repl.applied_db = stream_db;
        shared.applied.store(self.aof.reploff, SeqCst);
        let fsynced = self.aof.fsynced_reploff().map_or(-1, |o| o as i64);
        shared.fsynced.store(fsynced, SeqCst);
        let handing_over = self.repl.failover.as_ref().is_some_and(|f| f.in_progress);
        shared.failover.store(handing_over, SeqCst);
        let (tx, rx) = std::sync::mpsc::sync_channel(super::replica_link::LINK_EVENTS_QUEUED);
        let wake = self.aof.waker();
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-repl-link".into())
            .spawn(move || super::replica_link::run(params, sh, tx, wake))
            .map_err(|e| format!("can't start the replication link: {e}"))?;
        let mut client = Box::new(super::Client::new(
            0,
            format!("{host}:{port}"),
            String::new(),
            now_ms(),
        ));
        client.authenticated = true;
        client.master = true;
        client.db = stream_db;
        notice!("Connecting to MASTER {host}:{port}");
        self.repl.link = Some(MasterLink {
            host: host.to_string(),
            port,
            events: rx,
            shared,
            thread: Some(thread),
            state: "connect",
            client,
            last_io_ms: now_ms(),
            down_since_ms: now_ms(),
            held_full_sync: None,
        });
        Ok(())
    }

    /// REPLICAOF NO ONE: stop following; the data stays and this server is a primary
    /// under a new replication id, answering continuations of its primary's history up
    /// to where it stopped (Redis's shiftReplicationId: PSYNC2 lets the other replicas
    /// and the old primary continue from the promoted one).
    pub fn repl_unfollow(&mut self, why: &str) {
        if self.repl.link.is_none() {
            return;
        }
        self.repl_stop_link();
        let old = std::mem::replace(&mut self.master_replid, new_replid());
        self.repl.replid2 = Some((old, self.aof.reploff + 1));
        if self.aof.replid != NO_REPLID {
            self.aof.replid = self.master_replid.clone();
        }
        notice!(
            "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
            self.repl.replid2.as_ref().map_or("", |(id, _)| id.as_str()),
            self.aof.reploff + 1,
            self.master_replid
        );
        // Our replicas learn the new id by reconnecting (they continue partially).
        self.disconnect_replicas();
        // From now on the stream is our own: the next command says its db.
        self.aof.selected_db = None;
        if self.repl.backlog.is_some() {
            self.aof.repl_stream = Some(Vec::new());
            if self.ks.deletions.is_none() {
                self.ks.deletions = Some(Vec::new());
            }
        }
        notice!("MASTER MODE enabled ({why})");
    }

    /// Applies what the link thread delivered (end of each turn and cron).
    pub fn repl_poll_link(&mut self) {
        for _ in 0..LINK_EVENTS_PER_TURN {
            let Some(link) = self.repl.link.as_mut() else {
                return;
            };
            use super::replica_link::LinkEvent;
            let ev = match link.held_full_sync.take() {
                Some(ev) => ev,
                None => match link.events.try_recv() {
                    Ok(ev) => ev,
                    Err(_) => return,
                },
            };
            link.last_io_ms = now_ms();
            // Queued replies (or a connection filling a big argument) still reference
            // blocks of the current arena: it cannot be freed yet. The swap waits, new
            // pins stop, and the stream behind it stays queued in order.
            if matches!(ev, LinkEvent::FullSync { .. }) && self.ks.pinned_blocks() > 0 {
                link.held_full_sync = Some(ev);
                self.dataset_swap_pending = true;
                return;
            }
            match ev {
                LinkEvent::State(s) => link.state = s,
                LinkEvent::Lost(why) => {
                    if link.state == "connected" {
                        link.down_since_ms = now_ms();
                    }
                    link.state = "connect";
                    warning!("Connection with master lost: {why}");
                }
                LinkEvent::PsyncFailed(why) => {
                    if self.repl.failover.as_ref().is_some_and(|f| f.in_progress) {
                        warning!("PSYNC to the failover target failed: {why}");
                        self.repl_failover_abort("Failover target rejected psync request");
                    }
                }
                LinkEvent::Continue { replid } => {
                    let changed = replid.filter(|id| *id != self.master_replid);
                    if let Some(id) = changed {
                        // PSYNC2: the primary goes on under a new id; a later
                        // reconnection asks with it.
                        if let Ok(mut g) = link.shared.cached.lock() {
                            if let Some((cached, _)) = g.as_mut() {
                                *cached = id.clone();
                            }
                        }
                        let old = std::mem::replace(&mut self.master_replid, id.clone());
                        self.repl.replid2 = Some((old, self.aof.reploff + 1));
                        if self.aof.replid != NO_REPLID {
                            self.aof.replid = id;
                        }
                        notice!("Master replication ID changed to {}", self.master_replid);
                        // Our replicas learn the new id by reconnecting.
                        self.disconnect_replicas();
                    }
                    let end = self.repl.backlog.as_ref().map(|b| b.end_offset());
                    if end != Some(self.aof.reploff) {
                        let size = self.config.settings().repl_backlog_size as usize;
                        self.repl.backlog = Some(Backlog::new(size, self.aof.reploff));
                    }
                    self.repl_failover_done();
                }
                LinkEvent::FullSync {
                    ks,
                    functions,
                    replid,
                    offset,
                    stream_db,
                } => {
                    self.dataset_swap_pending = false;
                    self.repl_failover_done();
                    self.repl_install_full_sync(*ks, functions, replid, offset, stream_db)
                }
                LinkEvent::Commands(cmds) => self.repl_apply(cmds),
            }
        }
    }

    fn repl_install_full_sync(
        &mut self,
        ks: crate::keyspace::Keyspace,
        functions: Vec<Vec<u8>>,
        replid: String,
        offset: u64,
        stream_db: usize,
    ) {
        // Our replicas had another history: they sync again, from the new one.
        self.disconnect_replicas();
        // Background work reading the old arena stops first (Redis kills its RDB child
        // before loading): a capture of a region about to be unmapped is worth nothing.
        self.bgsave_cancel("Stopping the background save: the dataset is being replaced");
        super::aof_rewrite::cancel(self);
        notice!("MASTER <-> REPLICA sync: Flushing old data");
        // As a flush: watchers of every key see the change, tracking clients get their
        // null invalidation; then the loaded keyspace replaces the old one (freed on its
        // own thread: dropping it is proportional to the dataset).
        for db in 0..self.ks.num_dbs() {
            self.ks.flush_db(db);
        }
        let mut ks = ks;
        ks.watch = std::mem::take(&mut self.ks.watch);
        ks.tracking = std::mem::take(&mut self.ks.tracking);
        let old = self.install_keyspace(ks);
        let _ = std::thread::Builder::new()
            .name("cairn-free-old".into())
            .spawn(move || drop(old));
        if let Err(e) = self.install_functions(&functions) {
            warning!("{e}");
        }
        self.master_replid = replid.clone();
        // Until the rewrite below commits a base of the new dataset, the log still starts
        // from the old one: entries written meanwhile carry no id, so a restart before
        // then never continues from them (aof_rewrite puts the id back at its commit).
        self.aof.replid = if self.aof.enabled {
            NO_REPLID.to_string()
        } else {
            replid.clone()
        };
        self.aof.reploff = offset;
        self.aof.selected_db = None;
        self.aof.fsync_awaits_base = self.aof.enabled;
        self.repl.applied_db = stream_db;
        self.repl.replid2 = None;
        // The backlog holds the primary's stream from here on (a replica keeps one, as
        // Redis, for its own replicas and for when it is promoted).
        self.repl.relay.clear();
        let size = self.config.settings().repl_backlog_size as usize;
        self.repl.backlog = Some(Backlog::new(size, offset));
        if let Some(link) = self.repl.link.as_mut() {
            link.shared.applied.store(offset, SeqCst);
            if let Ok(mut g) = link.shared.cached.lock() {
                *g = Some((replid, offset));
            }
            link.client.db = stream_db;
        }
        // The log must restart from the new dataset (Redis restarts its AOF).
        if self.aof.enabled {
            let _ = super::aof_rewrite::request(self);
        }
    }

    /// Runs the primary's commands as its client; the offset follows each one.
    fn repl_apply(&mut self, cmds: Vec<super::replica_link::StreamCommand>) {
        let Some(link) = self.repl.link.as_mut() else {
            return;
        };
        let mut client = std::mem::replace(
            &mut link.client,
            Box::new(super::Client::new(0, String::new(), String::new(), 0)),
        );
        let mut out = Vec::new();
        let mut offset = self.aof.reploff;
        self.begin_batch();
        for c in &cmds {
            let args = crate::commands::Args::new(&c.data, &c.ranges);
            let is_select = c
                .ranges
                .first()
                .and_then(|&(at, len)| c.data.get(at..at + len))
                .is_some_and(|n| n.eq_ignore_ascii_case(b"SELECT"));
            // The log's entries carry the primary's offsets (see docs/formats/aof.md).
            self.repl.applied_db = client.db;
            self.aof.stream_command_begin(offset, offset + c.wire_bytes);
            self.execute(&mut client, args, &mut out);
            if is_select {
                self.aof.stream_select(client.db);
            }
            self.aof.stream_command_end();
            if self.repl.backlog.is_some() {
                self.repl.relay.extend_from_slice(&c.data);
            }
            out.clear();
            offset += c.wire_bytes;
        }
        self.repl.applied_db = client.db;
        self.serve_ready();
        if let Some(link) = self.repl.link.as_mut() {
            link.client = client;
            link.shared.applied.store(offset, SeqCst);
            if let Ok(mut g) = link.shared.cached.lock() {
                if let Some((_, o)) = g.as_mut() {
                    *o = offset;
                }
            }
        }
    }

    /// REPLCONF GETACK from the primary: the link acknowledges at once.
    pub fn repl_ack_requested(&mut self) {
        if let Some(link) = self.repl.link.as_ref() {
            link.shared.ack_now.store(true, SeqCst);
        }
    }

    /// A replica whose link is down and that must not serve its stale data
    /// (`replica-serve-stale-data no`).
    pub fn repl_serves_no_stale_data(&self) -> bool {
        self.repl.link.as_ref().is_some_and(|l| !l.link_up())
            && self.config.get_value("replica-serve-stale-data") == Some("no")
    }

    /// Following a primary (REPLICAOF host port).
    pub fn is_replica_of_someone(&self) -> bool {
        self.repl.link.is_some()
    }

    /// INFO replication's replica fields, in Redis 7.0's order.
    pub fn repl_link_info(&self) -> Option<Vec<(&'static str, String)>> {
        let link = self.repl.link.as_ref()?;
        let now = now_ms();
        let mut v = vec![
            ("master_host", link.host.clone()),
            ("master_port", link.port.to_string()),
            (
                "master_link_status",
                (if link.link_up() { "up" } else { "down" }).to_string(),
            ),
            (
                "master_last_io_seconds_ago",
                if link.link_up() {
                    ((now - link.last_io_ms).max(0) / 1000).to_string()
                } else {
                    "-1".to_string()
                },
            ),
            (
                "master_sync_in_progress",
                ((link.state == "sync") as u8).to_string(),
            ),
            ("slave_read_repl_offset", self.aof.reploff.to_string()),
            ("slave_repl_offset", self.aof.reploff.to_string()),
        ];
        if !link.link_up() {
            v.push((
                "master_link_down_since_seconds",
                ((now - link.down_since_ms).max(0) / 1000).to_string(),
            ));
        }
        Some(v)
    }

    /// ROLE as a replica: host, port, link state, applied offset.
    pub fn repl_link_role(&self) -> Option<(String, u16, &'static str, i64)> {
        let link = self.repl.link.as_ref()?;
        let offset = if link.link_up() {
            self.aof.reploff as i64
        } else {
            -1
        };
        Some((link.host.clone(), link.port, link.state, offset))
    }
}

impl Server {
    /// INFO's `master_failover_state`.
    pub fn repl_failover_state(&self) -> &'static str {
        match &self.repl.failover {
            None => "no-failover",
            Some(f) if f.in_progress => "failover-in-progress",
            Some(_) => "waiting-for-sync",
        }
    }

    /// The replica at `host`:`port` (its address and REPLCONF listening-port), and
    /// whether it is online (Redis's findReplica).
    pub fn repl_find_replica(&self, host: &str, port: u16) -> Option<bool> {
        self.repl
            .replicas
            .iter()
            .find(|r| r.ip.eq_ignore_ascii_case(host) && r.listening_port == port)
            .map(|r| matches!(r.state, ReplicaState::Online))
    }

    /// FAILOVER accepted: writes wait while a replica catches up.
    pub fn repl_failover_start(&mut self, target: Option<(String, u16)>, end_ms: i64, force: bool) {
        match &target {
            Some((h, p)) => notice!("FAILOVER requested to {h}:{p}."),
            None => notice!("FAILOVER requested to any replica."),
        }
        self.repl.failover = Some(Failover {
            in_progress: false,
            target,
            end_ms,
            force,
        });
        self.blocking.set_failover_pause(true);
    }

    /// The handover is done (our PSYNC to the target was answered): writes go on, as
    /// the target's replica's (Redis's clearFailoverState).
    fn repl_failover_done(&mut self) {
        if self.repl.failover.as_ref().is_some_and(|f| f.in_progress) {
            self.repl.failover = None;
            self.blocking.set_failover_pause(false);
            if let Some(l) = self.repl.link.as_ref() {
                l.shared.failover.store(false, SeqCst);
            }
        }
    }

    /// Ends a FAILOVER without handing over (Redis's abortFailover): a primary again if
    /// it was already following the target.
    pub fn repl_failover_abort(&mut self, why: &str) {
        let Some(f) = self.repl.failover.take() else {
            return;
        };
        match &f.target {
            Some((h, p)) => notice!("FAILOVER to {h}:{p} aborted: {why}"),
            None => notice!("FAILOVER to any replica aborted: {why}"),
        }
        if f.in_progress {
            self.repl_unfollow(&format!("failover aborted: {why}"));
        }
        self.blocking.set_failover_pause(false);
    }

    /// Waiting for sync: gives up (or forces) at the deadline; hands over to the target
    /// (or the first replica) once it acknowledged our whole stream (Redis's
    /// updateFailoverStatus, each turn and in cron).
    fn repl_failover_step(&mut self) {
        let Some(f) = self.repl.failover.clone() else {
            return;
        };
        if f.in_progress {
            return;
        }
        let now = now_ms();
        if f.end_ms != 0 && f.end_ms <= now {
            match (f.force, f.target) {
                (true, Some((h, p))) => {
                    notice!("FAILOVER to {h}:{p} time out exceeded, failing over.");
                    self.repl_failover_hand_over(&h, p);
                }
                _ => self.repl_failover_abort("Replica never caught up before timeout"),
            }
            return;
        }
        self.repl_drain();
        let offset = self.aof.reploff;
        let synced =
            |r: &Replica| matches!(r.state, ReplicaState::Online) && r.ack_offset == offset;
        let target = match &f.target {
            Some((h, p)) => self
                .repl
                .replicas
                .iter()
                .find(|r| r.ip.eq_ignore_ascii_case(h) && r.listening_port == *p)
                .filter(|r| synced(r))
                .map(|_| (h.clone(), *p)),
            None => self
                .repl
                .replicas
                .iter()
                .find(|r| synced(r))
                .map(|r| (r.ip.clone(), r.listening_port)),
        };
        if let Some((h, p)) = target {
            notice!("Failover target {h}:{p} is synced, failing over.");
            self.repl_failover_hand_over(&h, p);
        }
    }

    /// Follows the target with `PSYNC .. FAILOVER` (it turns into the primary first).
    fn repl_failover_hand_over(&mut self, host: &str, port: u16) {
        if let Some(f) = self.repl.failover.as_mut() {
            f.in_progress = true;
            f.target = Some((host.to_string(), port));
        }
        if let Err(e) = self.repl_follow(host, port) {
            warning!("{e}");
            self.repl_failover_abort("Failover target rejected psync request");
        }
    }
}
