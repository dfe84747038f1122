//! BGREWRITEAOF without fork: the executor writes a new base file from the keyspace in
//! time-boxed slices (cron and event-loop turns), then switches to a new incremental file.
//!
//! Consistency without a snapshot: the base is built while writes go on, so a key may be
//! dumped and then changed. Every key written during the rewrite is remembered
//! (`dirty`); once the scan has visited all databases those keys are dumped again (their
//! value now, or a DEL), repeatedly until the set is empty. At that moment, on the
//! executor, the base holds exactly the keyspace as of LSN N = the log's last LSN; the
//! base gets a trailer naming N and the writer thread is told to switch (in queue order:
//! entries up to N went to the old incremental file, entries from N+1 go to the new one).
//! FLUSHALL/FLUSHDB/SWAPDB during a rewrite restart it (they change keys they do not name).
//! The snapshot engine, when it lands, can replace this with an RDB base.

use super::format;
use super::manifest::{FileInfo, Layout};
use super::writer::Job;
use crate::keyspace::Kind;
use crate::server::Server;
use crate::{notice, warning};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Base bytes buffered on the executor before they are queued to the writer.
const BASE_CHUNK_BYTES: usize = 1 << 20;
/// Time one rewrite slice may take on the executor.
pub const SLICE_BUDGET: Duration = Duration::from_millis(2);

/// A rewrite whose switch is queued to the writer but not yet committed.
pub struct PendingSwitch {
    switches_before: u64,
    started: Instant,
    keys: u64,
    old_layout: Layout,
}

pub struct Rewrite {
    pub started: Instant,
    base: FileInfo,
    db: usize,
    cursor: u64,
    scanning: bool,
    dirty: HashSet<(usize, Vec<u8>)>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    selected: Option<usize>,
    lsn: u64,
    off: u64,
    keys: u64,
    pub restart: bool,
}

impl Rewrite {
    pub fn note_key(&mut self, db: usize, key: &[u8]) {
        self.dirty.insert((db, key.to_vec()));
    }

    fn frame(&mut self, db: usize, argv: &[&[u8]], replid: &str) {
        if self.selected != Some(db) {
            self.selected = Some(db);
            let d = db.to_string();
            self.frame_raw(&[&b"SELECT"[..], d.as_bytes()], replid);
        }
        self.frame_raw(argv, replid);
    }
    fn frame_raw(&mut self, argv: &[&[u8]], replid: &str) {
        self.scratch.clear();
        format::encode_command(&mut self.scratch, argv);
        self.lsn += 1;
        self.off += self.scratch.len() as u64;
        format::encode_entry(&mut self.out, self.lsn, replid, self.off, &self.scratch);
    }

    /// Dumps `key`'s current state (or a DEL when it is gone).
    fn dump_key(&mut self, srv: &Server, db: usize, key: &[u8], now_ms: i64) {
        let replid = srv.aof.replid.clone();
        let ks = &srv.ks;
        match ks.find_raw(db, key) {
            Some(e) if !ks.is_expired(e, now_ms) => match ks.kind(e) {
                Kind::String => {
                    let v = ks.value(e).to_vec();
                    match ks.expire_at(e) {
                        Some(t) => {
                            let t = t.to_string();
                            self.frame(db, &[b"SET", key, &v, b"PXAT", t.as_bytes()], &replid)
                        }
                        None => self.frame(db, &[b"SET", key, &v], &replid),
                    }
                    self.keys += 1;
                }
                Kind::List | Kind::Hash => {
                    // Redis's rewriteListObject / rewriteHashObject: one command per
                    // AOF_REWRITE_ITEMS_PER_CMD (64) items, then the TTL.
                    let mut items: Vec<Vec<u8>> = vec![];
                    let name: &[u8] = if ks.kind(e) == Kind::List {
                        crate::collections::list::walk(ks, e, 0, false, |v| {
                            items.push(v.to_vec());
                            true
                        });
                        b"RPUSH"
                    } else {
                        crate::collections::hash::for_each(ks, e, |f, v| {
                            items.push(f.to_vec());
                            items.push(v.to_vec());
                        });
                        b"HSET"
                    };
                    let per = if name == b"RPUSH" { 64 } else { 128 };
                    for chunk in items.chunks(per) {
                        let mut argv: Vec<&[u8]> = vec![name, key];
                        argv.extend(chunk.iter().map(|x| x.as_slice()));
                        self.frame(db, &argv, &replid);
                    }
                    if let Some(t) = ks.expire_at(e) {
                        let t = t.to_string();
                        self.frame(db, &[b"PEXPIREAT", key, t.as_bytes()], &replid);
                    }
                    self.keys += 1;
                }
                Kind::ZSet => {
                    // Redis's rewriteSortedSetObject: ZADD with 64 score/member pairs per
                    // command, scores as `%.17g` (exact round trip), then the TTL.
                    let items = crate::collections::zset::all(ks, e);
                    for chunk in items.chunks(64) {
                        let scores: Vec<Vec<u8>> = chunk
                            .iter()
                            .map(|(_, s)| crate::protocol::reply::format_double(*s).into_bytes())
                            .collect();
                        let mut argv: Vec<&[u8]> = vec![b"ZADD", key];
                        for ((m, _), s) in chunk.iter().zip(&scores) {
                            argv.push(s);
                            argv.push(m);
                        }
                        self.frame(db, &argv, &replid);
                    }
                    if let Some(t) = ks.expire_at(e) {
                        let t = t.to_string();
                        self.frame(db, &[b"PEXPIREAT", key, t.as_bytes()], &replid);
                    }
                    self.keys += 1;
                }
                Kind::Set => {
                    // Redis's rewriteSetObject: SADD with 64 members per command.
                    let members = crate::collections::set::members(ks, e);
                    for chunk in members.chunks(64) {
                        let mut argv: Vec<&[u8]> = vec![b"SADD", key];
                        argv.extend(chunk.iter().map(|x| x.as_slice()));
                        self.frame(db, &argv, &replid);
                    }
                    if let Some(t) = ks.expire_at(e) {
                        let t = t.to_string();
                        self.frame(db, &[b"PEXPIREAT", key, t.as_bytes()], &replid);
                    }
                    self.keys += 1;
                }
            },
            _ => self.frame(db, &[b"DEL", key], &replid),
        }
    }
}

/// BGREWRITEAOF: starts a rewrite. Err: Redis's error text.
pub fn start(srv: &mut Server) -> Result<(), String> {
    if !srv.aof.enabled || srv.aof.writer.is_none() {
        // Redis rewrites even with appendonly no (to a file it then leaves); cairn keeps
        // no log then, so there is nothing to compact.
        return Err("ERR Background AOF rewriting is not possible: appendonly is off".into());
    }
    if srv.aof.rewrite.is_some() {
        return Err("ERR Background append only file rewriting already in progress".into());
    }
    if srv.aof.failed() {
        return Err(
            "ERR Background AOF rewriting is not possible: the AOF has a write error".into(),
        );
    }
    let Some(layout) = srv.aof.layout.as_ref() else {
        return Err("ERR no AOF layout".into());
    };
    let seq = layout.next_base_seq();
    let base = FileInfo {
        name: Layout::base_name(&layout.prefix, seq),
        seq,
    };
    if let Some(w) = &srv.aof.writer {
        w.submit(Job::BaseBegin {
            name: base.name.clone(),
        });
    }
    notice!("Background append only file rewriting started");
    srv.aof.rewrite = Some(Rewrite {
        started: Instant::now(),
        base,
        db: 0,
        cursor: 0,
        scanning: true,
        dirty: HashSet::new(),
        out: Vec::new(),
        scratch: Vec::new(),
        selected: None,
        lsn: 0,
        off: 0,
        keys: 0,
        restart: false,
    });
    srv.aof.rewrite_scheduled = false;
    Ok(())
}

/// Runs the rewrite for at most `budget`. Called from cron and the event loops.
pub fn step(srv: &mut Server, budget: Duration) {
    let Some(mut rw) = srv.aof.rewrite.take() else {
        return;
    };
    let now = crate::util::now_ms();
    let t0 = Instant::now();
    if rw.restart {
        notice!("AOF rewrite restarted: a FLUSHALL/FLUSHDB/SWAPDB changed whole databases");
        if let Some(w) = &srv.aof.writer {
            w.submit(Job::BaseAbort);
            w.submit(Job::BaseBegin {
                name: rw.base.name.clone(),
            });
        }
        rw = Rewrite {
            started: rw.started,
            base: rw.base,
            db: 0,
            cursor: 0,
            scanning: true,
            dirty: HashSet::new(),
            out: Vec::new(),
            scratch: Vec::new(),
            selected: None,
            lsn: 0,
            off: 0,
            keys: 0,
            restart: false,
        };
    }
    let mut keys: Vec<Vec<u8>> = Vec::new();
    while t0.elapsed() < budget {
        if rw.scanning {
            if rw.db >= srv.ks.num_dbs() {
                rw.scanning = false;
                continue;
            }
            keys.clear();
            let ks = &srv.ks;
            rw.cursor = ks.scan(rw.db, rw.cursor, |e| keys.push(ks.key(e).to_vec()));
            let db = rw.db;
            for k in &keys {
                rw.dump_key(srv, db, k, now);
            }
            if rw.cursor == 0 {
                rw.db += 1;
            }
        } else {
            // Keys changed since they were dumped: dump them again, until none is left.
            let batch: Vec<(usize, Vec<u8>)> = rw.dirty.iter().take(256).cloned().collect();
            if batch.is_empty() {
                finish(srv, rw);
                return;
            }
            for (db, k) in batch {
                rw.dirty.remove(&(db, k.clone()));
                rw.dump_key(srv, db, &k, now);
            }
        }
        if rw.out.len() >= BASE_CHUNK_BYTES {
            if let Some(w) = &srv.aof.writer {
                w.submit(Job::BaseData(std::mem::take(&mut rw.out)));
            }
        }
    }
    srv.aof.rewrite = Some(rw);
}

fn finish(srv: &mut Server, mut rw: Rewrite) {
    let aof = &mut srv.aof;
    format::encode_base_end(&mut rw.out, aof.last_lsn, &aof.replid, aof.reploff, rw.keys);
    // Entries framed so far belong to the old incremental file.
    aof.flush();
    let Some(layout) = aof.layout.as_mut() else {
        return;
    };
    let incr = FileInfo {
        name: Layout::incr_name(&layout.prefix, layout.next_incr_seq()),
        seq: layout.next_incr_seq(),
    };
    let mut obsolete: Vec<String> = layout.incrs.iter().map(|f| f.name.clone()).collect();
    obsolete.extend(layout.history.iter().map(|f| f.name.clone()));
    if let Some(b) = &layout.base {
        obsolete.push(b.name.clone());
    }
    let new_layout = Layout {
        prefix: layout.prefix.clone(),
        base: Some(rw.base.clone()),
        history: vec![],
        incrs: vec![incr.clone()],
    };
    let Some(w) = aof.writer.as_ref() else {
        return;
    };
    let before = w.shared.switches.load(std::sync::atomic::Ordering::SeqCst);
    w.submit(Job::BaseData(std::mem::take(&mut rw.out)));
    w.submit(Job::Switch {
        new_incr: incr.name.clone(),
        manifest_name: new_layout.manifest_name(),
        manifest: new_layout.render(),
        obsolete,
    });
    // The next entry starts the new file: it must say which db it is in.
    aof.selected_db = None;
    let old = std::mem::replace(layout, new_layout);
    aof.pending_switch = Some(PendingSwitch {
        switches_before: before,
        started: rw.started,
        keys: rw.keys,
        old_layout: old,
    });
}

/// Called from cron: notices a committed (or failed) switch, and starts an automatic
/// rewrite when the log grew past `auto-aof-rewrite-percentage` of its size after the
/// last rewrite (and over `auto-aof-rewrite-min-size`), as Redis.
pub fn cron(srv: &mut Server) {
    use std::sync::atomic::Ordering::SeqCst;
    if let (Some(p), Some(w)) = (srv.aof.pending_switch.as_ref(), &srv.aof.writer) {
        let (started, keys) = (p.started, p.keys);
        let done = w.shared.switches.load(SeqCst) > p.switches_before;
        let failed = w.shared.rewrite_failures.load(SeqCst) > srv.aof.rewrite_failures_seen;
        if done || failed {
            let p = srv.aof.pending_switch.take();
            srv.aof.rewrite_failures_seen = w.shared.rewrite_failures.load(SeqCst);
            srv.aof.last_rewrite_time_s = started.elapsed().as_secs() as i64;
            if done {
                srv.aof.rewrites += 1;
                srv.aof.last_rewrite_ok = true;
                srv.aof.rewrite_base_size = srv.aof.current_size();
                notice!("Background AOF rewrite finished successfully ({keys} keys)");
            } else {
                // The writer kept appending to the old files, which the old manifest
                // still lists: go back to that layout.
                if let Some(p) = p {
                    srv.aof.layout = Some(p.old_layout);
                }
                srv.aof.last_rewrite_ok = false;
                warning!("Background AOF rewrite failed");
            }
        }
    }
    if srv.aof.rewrite.is_some() {
        step(srv, SLICE_BUDGET);
        return;
    }
    if !srv.aof.enabled || srv.aof.pending_switch.is_some() {
        return;
    }
    if srv.aof.rewrite_scheduled {
        let _ = start(srv);
        return;
    }
    let s = srv.config.settings();
    let (pct, min) = (s.auto_aof_rewrite_percentage, s.auto_aof_rewrite_min_size);
    let size = srv.aof.current_size();
    if pct > 0 && size > min {
        let base = srv.aof.rewrite_base_size.max(1);
        let growth = (size.saturating_sub(base)) * 100 / base;
        if growth >= pct {
            notice!("Starting automatic rewriting of AOF on {growth}% growth");
            let _ = start(srv);
        }
    }
}
