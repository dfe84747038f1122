//! Startup with `appendonly yes`: open (or create) the AOF directory, load the base,
//! replay the incremental files through `Server::execute` (each command as a client would
//! send it), cut a torn tail where the log's rules allow, start the writer thread. The
//! rules for how a file may end are `src/persistence/aof/load.rs`.

use crate::commands::executor::{Client, Server};
use crate::persistence::aof::format::{self, ScanOutcome};
use crate::persistence::aof::load::{
    create_fresh, describe, end_of_log, truncate, BaseKind, LogEnd, Mapped,
};
use crate::persistence::aof::manifest::Layout;
use crate::persistence::aof::storage::{FsDir, LogDir};
use crate::persistence::aof::writer::{FsyncMode, Writer};
use crate::persistence::repl_backlog::Rebuild;
use crate::protocol::request::Args;
use crate::{notice, warning};
use std::path::{Path, PathBuf};

/// Where an unfinished `MULTI` block starts: the entry's offset, and the log position
/// (LSN, replication offset) just before it.
#[derive(Clone, Copy, Debug)]
struct OpenMulti {
    offset: u64,
    /// None in a file without LSN headers (written by Redis).
    prev_lsn: Option<u64>,
    prev_reploff: u64,
}

/// Replays one file. Returns the scan outcome (the caller decides about a bad tail) and,
/// when the file ends inside a transaction, where its `MULTI` starts: the queued
/// commands were not applied (a transaction replays all or nothing).
/// `rebuild`: the backlog being rebuilt from the entries (incremental files only).
fn replay(
    srv: &mut Server,
    client: &mut Client,
    bytes: &[u8],
    first: Option<u64>,
    mut rebuild: Option<&mut Rebuild>,
    selects: &mut u64,
) -> (ScanOutcome, Option<OpenMulti>) {
    let base = bytes.as_ptr() as usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    let mut open: Option<OpenMulti> = None;
    let mut prev_reploff: Option<u64> = None;
    // The log position before this file's first entry (the base's, or the previous
    // file's last entry's).
    let start_reploff = srv.aof.reploff;
    let mut command = Vec::new();
    let o = format::scan(bytes, first, |e| {
        if let (Some(r), Some(_)) = (rebuild.as_deref_mut(), e.lsn) {
            command.clear();
            format::encode_command(&mut command, &e.args);
            r.entry(e.replid, e.reploff, &command);
        }
        ranges.clear();
        ranges.extend(e.args.iter().map(|a| (a.as_ptr() as usize - base, a.len())));
        let name = e.args[0];
        if name.eq_ignore_ascii_case(b"SELECT") {
            *selects += 1;
        }
        if srv.commands.lookup(name).is_none() {
            return Err(format!(
                "Unknown command '{}' reading the append only file",
                String::from_utf8_lossy(name)
            ));
        }
        out.clear();
        let was_open = client.multi.is_some();
        let oom_before = srv.stats.arena_oom_refusals;
        srv.execute(client, Args::new(bytes, &ranges), &mut out);
        if srv.stats.arena_oom_refusals != oom_before {
            // Replay must reach the state the log recorded: a write the arena has no room
            // for stops the load rather than being skipped.
            return Err(format!(
                "The dataset does not fit the arena's address space ({} bytes reserved) at '{}' reading the append only file; raise arena-reserve-bytes",
                srv.ks.arena.reserved_bytes(),
                String::from_utf8_lossy(name)
            ));
        }
        if client.multi.is_none() {
            open = None;
        } else if !was_open {
            // The position before the block: the previous entry's. For a file's first
            // entry, where the file started; in a file without headers (Redis's),
            // `*1\r\n$5\r\nMULTI\r\n` is 15 bytes of replication offset.
            let before = match e.lsn {
                Some(_) => start_reploff,
                None => e.reploff.saturating_sub(15),
            };
            open = Some(OpenMulti {
                offset: e.offset,
                prev_lsn: e.lsn.map(|l| l.saturating_sub(1)),
                prev_reploff: prev_reploff.unwrap_or(before),
            });
        }
        prev_reploff = Some(e.reploff);
        Ok(())
    });
    (o, open)
}

/// Opens the log at startup when `appendonly yes`: loads it into `srv` and starts the writer.
pub fn startup(srv: &mut Server) -> Result<(), String> {
    let s = srv.config.settings().clone();
    srv.aof.apply_settings(&s);
    srv.aof.replid = srv.master_replid.clone();
    if !s.appendonly {
        return Ok(());
    }
    if s.appendfilename.contains('/') || s.appenddirname.contains('/') {
        return Err("appendfilename and appenddirname can't be paths, just names".into());
    }
    let dir = PathBuf::from(&s.appenddirname);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let prefix = s.appendfilename.clone();
    let mname = format!("{prefix}.manifest");
    let mpath = dir.join(&mname);
    let layout = if mpath.exists() {
        let len = std::fs::metadata(&mpath).map(|m| m.len()).unwrap_or(0);
        if len > crate::persistence::aof::manifest::MANIFEST_MAX_BYTES {
            return Err(format!("The AOF manifest file {mname} is too large"));
        }
        let text = std::fs::read(&mpath).map_err(|e| format!("Can't read {mname}: {e}"))?;
        Layout::parse(&prefix, &text).map_err(|e| format!("{e} ({})", mpath.display()))?
    } else {
        create_fresh(&dir, &prefix, &srv.master_replid)?
    };
    let log_end = load_layout(srv, &dir, &layout, s.aof_load_truncated)?;
    // The log's position is the replication position of the data it loaded.
    let (replid, reploff) = (srv.aof.replid.clone(), srv.aof.reploff);
    srv.repl_restore(&replid, reploff);
    let mut fsdir = FsDir::new(&dir);
    let Some(last) = layout.incrs.last().cloned() else {
        return Err("The AOF manifest lists no incremental file".into());
    };
    let incr = fsdir
        .open_append(&last.name)
        .map_err(|e| format!("Can't open the append-only file {}: {e}", last.name))?;
    // The log's end: a pre-allocated file is longer (zeroes after it).
    let incr_len = match log_end {
        Some(n) => n,
        None => fsdir.size_of(&last.name).unwrap_or(0),
    };
    let base_len = layout
        .base
        .as_ref()
        .and_then(|b| fsdir.size_of(&b.name).ok())
        .unwrap_or(0);
    let w = Writer::start_opts(
        Box::new(fsdir),
        incr,
        Some(&last.name),
        incr_len,
        srv.aof.last_lsn,
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        crate::persistence::aof::io_opts(&s),
    )
    .map_err(|e| format!("Can't start the AOF writer thread: {e}"))?;
    w.set_params(
        FsyncMode::parse(&s.appendfsync),
        s.aof_disk_min_free,
        s.aof_disk_min_free_pct,
    );
    w.shared
        .base_bytes
        .store(base_len, std::sync::atomic::Ordering::Relaxed);
    srv.aof.writer = Some(w);
    srv.aof.enabled = true;
    srv.ks.deletions = Some(Vec::new());
    let image_base = layout
        .base
        .as_ref()
        .is_some_and(|b| BaseKind::of(&dir.join(&b.name)).is_ok_and(|k| k == BaseKind::Image));
    let arena_bytes = srv.ks.arena.used_bytes();
    srv.aof.reset_growth_basis(image_base, arena_bytes);
    srv.aof.layout = Some(layout);
    notice!(
        "Opening AOF incr file {} on server start (LSN {})",
        last.name,
        srv.aof.last_lsn
    );
    Ok(())
}

impl Server {
    /// Replays the log's files as startup does (DEBUG LOADAOF), into the keyspace as it
    /// is (the caller empties it first).
    pub fn replay_log(&mut self, layout: &Layout, load_truncated: bool) -> Result<(), String> {
        let dir = PathBuf::from(&self.config.settings().appenddirname);
        load_layout(self, &dir, layout, load_truncated).map(|_| ())
    }
}

/// Replays base then incremental files, checking that LSNs continue across files.
/// Returns where the log ends in the last incremental file (None: it does not exist).
pub fn load_layout(
    srv: &mut Server,
    dir: &Path,
    layout: &Layout,
    load_truncated: bool,
) -> Result<Option<u64>, String> {
    let start = std::time::Instant::now();
    let mut client = Client::new(0, "aof".into(), String::new(), crate::util::now_ms());
    client.authenticated = true;
    srv.loading = true;
    srv.ks.loading = true;
    let result = (|| -> Result<Option<u64>, String> {
        let mut next_lsn: Option<u64> = None;
        let mut log_end = None;
        // Files to cut at their log's end: applied only once the whole layout has loaded,
        // so a load that fails on a later file leaves every byte as it found it.
        let mut cuts: Vec<(std::path::PathBuf, u64)> = Vec::new();
        if let Some(b) = &layout.base {
            let path = dir.join(&b.name);
            let kind = BaseKind::of(&path).map_err(|e| format!("Can't open {}: {e}", b.name))?;
            if let Some(lsn) = load_base(srv, &mut client, &path, kind)? {
                next_lsn = Some(lsn + 1);
                srv.aof.last_lsn = lsn;
            }
        }
        // The stream's db at the base (an image's header says it), for the entries after.
        if let Some(db) = srv.repl.loaded_stream_db {
            client.db = db;
        }
        let backlog_bytes = srv.config.settings().repl_backlog_size as usize;
        let mut rebuild = Rebuild::new(backlog_bytes, srv.aof.replid.as_bytes(), srv.aof.reploff);
        for (i, f) in layout.incrs.iter().enumerate() {
            let last = i + 1 == layout.incrs.len();
            let path = dir.join(&f.name);
            let m = match Mapped::open(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && last => {
                    // Created by the manifest commit but never written: empty.
                    continue;
                }
                Err(e) => return Err(format!("Can't open {}: {e}", f.name)),
            };
            let mut selects = 0;
            let (o, open) = replay(
                srv,
                &mut client,
                m.bytes(),
                next_lsn,
                Some(&mut rebuild),
                &mut selects,
            );
            if selects > 0 || srv.repl.loaded_stream_db.is_some() {
                // The db of the log's last SELECT (or the base's, when none followed it)
                // is where the replication stream goes on.
                srv.repl.loaded_stream_db = Some(client.db);
            }
            if let Some(l) = o.last_lsn {
                srv.aof.last_lsn = l;
                next_lsn = Some(l + 1);
            }
            if let Some(r) = &o.last_replid {
                srv.aof.replid = r.clone();
            }
            if let Some(r) = o.last_reploff {
                srv.aof.reploff = r;
            }
            if last {
                log_end = Some(o.valid_len);
            }
            match (end_of_log(&o, last), &o.bad) {
                (LogEnd::Whole, _) | (_, None) => {}
                (LogEnd::Recycled, Some(_)) => {
                    // A recycled file's old content after the new log: its normal end. It
                    // is cut all the same: later bytes may hold entries of writes that
                    // were in flight, whose LSNs the next entries will reuse.
                    notice!(
                        "AOF {} ends at offset {} (LSN {}): the rest is a recycled file's old content",
                        f.name,
                        o.valid_len,
                        srv.aof.last_lsn
                    );
                    cuts.push((path.clone(), o.valid_len));
                }
                (LogEnd::TornTail, Some(bad)) if load_truncated => {
                    warning!(
                        "!!! Warning: short read while loading the AOF file {}!!! {}",
                        f.name,
                        describe(&path, bad)
                    );
                    warning!(
                        "AOF {} loaded anyway because aof-load-truncated is enabled: truncated to {} bytes ({} bytes dropped, last LSN {})",
                        f.name,
                        o.valid_len,
                        m.bytes().len() as u64 - o.valid_len,
                        srv.aof.last_lsn
                    );
                    cuts.push((path.clone(), o.valid_len));
                    srv.aof.loaded_truncated = true;
                }
                (LogEnd::TornTail, Some(bad)) => {
                    return Err(format!(
                        "Unexpected end of file reading the append only file {}: {}. You can: 1) Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                        f.name,
                        describe(&path, bad)
                    ));
                }
                (LogEnd::Refused, Some(bad)) => {
                    return Err(format!(
                        "Bad file format reading the append only file {}: {}. The file was left unchanged. Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>",
                        f.name,
                        describe(&path, bad)
                    ));
                }
            }
            // An unfinished MULTI ends a file as a tail does (same condition).
            let open = open.filter(|om| last || om.prev_lsn.is_some());
            if let Some(om) = open {
                // The log ends inside MULTI (a crash while the block was being written):
                // none of it was applied; cut it so later appends do not land inside it.
                // In any file, as a torn tail above: a later file must continue from the
                // LSN before the block.
                if !load_truncated {
                    return Err(format!(
                        "Unexpected end of file reading the append only file {}: a MULTI block at offset {} has no EXEC. You can: 1) Make a backup of your AOF file, then use ./cairn-server --check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                        f.name, om.offset
                    ));
                }
                warning!(
                    "Revert incomplete MULTI/EXEC transaction in AOF file {} (cut at offset {}, last LSN {})",
                    f.name,
                    om.offset,
                    om.prev_lsn.map_or("-".to_string(), |l| l.to_string())
                );
                cuts.push((path.clone(), om.offset));
                // The writer appends where the kept log now ends.
                if last {
                    log_end = Some(om.offset);
                }
                if let Some(prev) = om.prev_lsn {
                    next_lsn = Some(prev + 1);
                    srv.aof.last_lsn = prev;
                }
                srv.aof.reploff = om.prev_reploff;
                srv.aof.loaded_truncated = true;
                client.multi = None;
            }
            notice!("DB loaded from incr file {}: {} entries", f.name, o.entries);
        }
        for (path, len) in cuts {
            truncate(&path, len)?;
        }
        srv.repl.loaded_backlog = Some(rebuild.finish());
        Ok(log_end)
    })();
    srv.loading = false;
    srv.ks.loading = false;
    // Whatever db the last entry selected, the next entry states its own.
    notice!(
        "DB loaded from append only file: {:.3} seconds",
        start.elapsed().as_secs_f64()
    );
    result
}

/// Loads the base file into `srv` and sets the log position it stands for (replication
/// id and offset). Returns its LSN when the file says it (None: a base Redis wrote).
fn load_base(
    srv: &mut Server,
    client: &mut Client,
    path: &Path,
    kind: BaseKind,
) -> Result<Option<u64>, String> {
    let name = path.display();
    match kind {
        BaseKind::Commands => {
            let m = Mapped::open(path).map_err(|e| format!("Can't open {name}: {e}"))?;
            // The base's entries are numbered 1.. by themselves; its trailer gives the log
            // position it stands for.
            let (o, _) = replay(srv, client, m.bytes(), Some(1), None, &mut 0);
            if let Some(bad) = &o.bad {
                return Err(format!("Bad base file: {}", describe(path, bad)));
            }
            notice!("DB loaded from base file {name}: {} entries", o.entries);
            Ok(o.base_end.map(|be| {
                srv.aof.replid = be.replid.clone();
                srv.aof.reploff = be.reploff;
                be.lsn
            }))
        }
        BaseKind::Rdb => {
            let m = Mapped::open(path).map_err(|e| format!("Can't open {name}: {e}"))?;
            // Expired keys are kept: the log after the base may still name them (Redis
            // loads a preamble the same way).
            // Loading is no keyspace event (Redis's dbAddRDBLoad notifies nothing).
            let record = std::mem::take(&mut srv.ks.events.record);
            let st = crate::persistence::rdb_file::load_rdb(
                m.bytes(),
                &mut srv.ks,
                &srv.config,
                i64::MIN,
            );
            srv.ks.events.record = record;
            let st = st.map_err(|e| format!("Bad RDB base file {name}: {e}"))?;
            srv.install_functions(&st.functions)
                .map_err(|e| format!("Bad RDB base file {name}: {e}"))?;
            notice!(
                "DB loaded from base file {name} (RDB version {}): {} keys",
                st.version,
                st.keys_loaded
            );
            if let Some(r) = st.repl_id.filter(|r| r.len() == 40) {
                srv.aof.replid = r;
            }
            if let Some(o) = st.repl_offset {
                srv.aof.reploff = o;
            }
            srv.repl.loaded_stream_db = st
                .repl_stream_db
                .and_then(|db| usize::try_from(db).ok())
                .filter(|&db| db < srv.ks.num_dbs());
            Ok(st.aof_lsn)
        }
        BaseKind::Image => {
            let reserve = srv.config.settings().arena_reserve_bytes;
            let progress = crate::persistence::snapshot::format::LoadProgress::default();
            // An image base taken with tiering on carries a companion with its cold
            // values: with tiering on they go into the tier file and stay cold; without
            // it they are read into RAM (either way a bad companion stops startup).
            let tier = match &srv.tiering {
                Some(t) => crate::persistence::snapshot::TierLoad::Keep {
                    tier_file: t.store.path.clone(),
                    capacity_pages: t.store.book.capacity_pages(),
                },
                None => crate::persistence::snapshot::TierLoad::Warm,
            };
            let (arena, header, restored) =
                crate::persistence::snapshot::load_image_tiered(path, reserve, &progress, &tier)?
                    .ok_or_else(|| format!("Can't open {name}: no such file"))?;
            let databases = srv.config.settings().databases;
            let mut ks = crate::collections::keyspace_from_arena(arena, databases)
                .map_err(|e| format!("snapshot image {name}: {e}"))?;
            if let Some(r) = restored {
                let Some(t) = srv.tiering.as_mut() else {
                    return Err(format!("{name}: tiered values restored without tiering"));
                };
                if let Some(book) = r.book {
                    t.store.restore(book);
                }
                ks.tier.cold_entries = r.cold_entries;
                ks.tier.cold_bytes = r.cold_bytes;
            }
            let libs = crate::persistence::rdb_value::read_function_libraries(&header.functions)
                .map_err(|e| format!("snapshot image {name}: function libraries: {e}"))?;
            srv.install_functions(&libs)
                .map_err(|e| format!("snapshot image {name}: {e}"))?;
            let _ = srv.install_keyspace(ks);
            srv.ks.loading = true;
            notice!(
                "DB loaded from base file {name} (snapshot image): {} keys, {} bytes of arena",
                srv.ks.total_keys(),
                header.arena_bytes
            );
            let id = String::from_utf8_lossy(&header.repl_id).into_owned();
            if id.bytes().all(|c| c.is_ascii_hexdigit()) {
                srv.aof.replid = id;
            }
            srv.aof.reploff = header.repl_offset;
            srv.repl.loaded_stream_db = (header.repl_stream_db as usize)
                .checked_sub(1)
                .filter(|&db| db < srv.ks.num_dbs());
            Ok(Some(header.aof_lsn))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::persistence::aof::format::{encode_command, encode_entry};
    use crate::persistence::aof::load::*;
    use crate::persistence::aof::manifest::FileInfo;

    use crate::persistence::aof::testing::{temp_dir, Log, RID};

    fn layout(names: &[&str]) -> Layout {
        Layout {
            prefix: "t".into(),
            base: None,
            history: vec![],
            incrs: names
                .iter()
                .enumerate()
                .map(|(i, n)| FileInfo {
                    name: n.to_string(),
                    seq: i as u64 + 1,
                })
                .collect(),
        }
    }

    fn server() -> Server {
        Server::new(Config::default()).unwrap()
    }

    /// Runs one command as a new client.
    fn run(srv: &mut Server, args: &[&str]) -> String {
        let mut c = srv.alloc_client("127.0.0.1:1".into(), "127.0.0.1:2".into());
        crate::commands::executor::testing::run(srv, &mut c, args)
    }

    fn len_of(p: &Path) -> u64 {
        std::fs::metadata(p).unwrap().len()
    }

    #[test]
    fn files_replay_in_order_with_lsns_continuing_across_them() {
        let dir = temp_dir("order");
        let a = Log::from(1).cmd(&["SET", "a", "1"]).cmd(&["SET", "b", "2"]);
        let b = Log::from(3).cmd(&["SET", "a", "3"]).cmd(&["DEL", "b"]);
        std::fs::write(dir.join("t.1.incr.aof"), &a.bytes).unwrap();
        std::fs::write(dir.join("t.2.incr.aof"), &b.bytes).unwrap();
        let mut srv = server();
        let end = load_layout(
            &mut srv,
            &dir,
            &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
            false,
        );
        assert_eq!(end, Ok(Some(b.bytes.len() as u64)));
        assert!(!srv.loading && !srv.ks.loading);
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n3\r\n");
        assert_eq!(run(&mut srv, &["EXISTS", "b"]), ":0\r\n");
        assert_eq!(srv.aof.last_lsn, 4);
        assert_eq!(srv.aof.reploff, b.reploff);
        assert_eq!(srv.aof.replid, RID);
        assert!(!srv.aof.loaded_truncated);
    }

    /// The loaded position restores as Redis does with an RDB's `rsi`: a primary keeps
    /// the old id as replid2 (up to the offset + 1) with the backlog rebuilt from the log;
    /// a server configured as a replica keeps it as its cached primary, with the db of the
    /// log's last SELECT; an offset no stream reaches is refused, never continued.
    #[test]
    fn the_loaded_position_is_restored_for_both_roles() {
        let dir = temp_dir("restore");
        let log = Log::from(1).cmd(&["SELECT", "2"]).sets(3);
        std::fs::write(dir.join("t.1.incr.aof"), &log.bytes).unwrap();
        let l = layout(&["t.1.incr.aof"]);
        let mut srv = server();
        load_layout(&mut srv, &dir, &l, false).unwrap();
        srv.repl_restore(RID, log.reploff);
        assert_eq!(srv.repl.replid2, Some((RID.to_string(), log.reploff + 1)));
        assert_ne!(srv.master_replid, RID);
        assert_eq!(srv.aof.replid, srv.master_replid);
        let b = srv.repl.backlog.as_ref().unwrap();
        // (Without a base naming the log's id, the chain starts after the first entry.)
        assert_eq!(
            (b.end_offset(), b.first_offset()),
            (log.reploff, log.entries[0].1 + 1)
        );
        assert!(b.histlen() > 0);
        assert!(srv.repl.restored.is_none());

        let conf = Config::from_text("replicaof 127.0.0.1 1").unwrap();
        let mut srv = Server::new(conf).unwrap();
        load_layout(&mut srv, &dir, &l, false).unwrap();
        srv.repl_restore(RID, log.reploff);
        let r = srv.repl.restored.clone().unwrap();
        assert_eq!(
            (r.replid.as_str(), r.offset, r.stream_db),
            (RID, log.reploff, Some(2))
        );
        assert_eq!(srv.master_replid, RID);
        assert!(srv.repl.replid2.is_none() && srv.repl.backlog.is_none());

        let mut bad = Vec::new();
        let mut cmd = Vec::new();
        encode_command(&mut cmd, &["SET", "a", "1"]);
        encode_entry(&mut bad, 1, RID, u64::MAX - 1, &cmd);
        std::fs::write(dir.join("t.1.incr.aof"), &bad).unwrap();
        let mut srv = server();
        load_layout(&mut srv, &dir, &l, false).unwrap();
        let off = srv.aof.reploff;
        srv.repl_restore(RID, off);
        assert_eq!(srv.aof.reploff, 0);
        assert!(srv.repl.replid2.is_none() && srv.repl.backlog.is_none());
    }

    #[test]
    fn a_gap_in_lsns_between_files_refuses_the_load() {
        let dir = temp_dir("gap");
        std::fs::write(dir.join("t.1.incr.aof"), Log::from(1).sets(2).bytes).unwrap();
        let later = Log::from(4).sets(2).bytes;
        std::fs::write(dir.join("t.2.incr.aof"), &later).unwrap();
        let mut srv = server();
        let e = load_layout(
            &mut srv,
            &dir,
            &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
            true,
        )
        .unwrap_err();
        assert!(
            e.contains("Bad file format") && e.contains("LSN 4 where 3"),
            "{e}"
        );
        assert_eq!(len_of(&dir.join("t.2.incr.aof")), later.len() as u64);
        assert!(!srv.loading);
    }

    #[test]
    fn a_torn_tail_of_the_last_file_is_cut_only_with_aof_load_truncated() {
        let dir = temp_dir("torn");
        let log = Log::from(1).sets(3);
        let whole = log.entries[2].0; // the third entry is torn
        let torn = &log.bytes[..log.bytes.len() - 5];
        let p = dir.join("t.1.incr.aof");
        std::fs::write(&p, torn).unwrap();
        let l = layout(&["t.1.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, false).unwrap_err();
        assert!(e.starts_with("Unexpected end of file"), "{e}");
        assert_eq!(
            len_of(&p),
            torn.len() as u64,
            "refused: the file is left as it is"
        );
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, true),
            Ok(Some(whole as u64))
        );
        assert_eq!(len_of(&p), whole as u64);
        assert!(srv.aof.loaded_truncated);
        assert_eq!(srv.aof.last_lsn, 2);
        assert_eq!(run(&mut srv, &["EXISTS", "k1", "k2", "k3"]), ":2\r\n");
    }

    #[test]
    fn cuts_wait_until_every_file_loaded() {
        // File 1 ends with a torn write (a cut for later); file 2 is corrupt in the
        // middle: the load fails and file 1 keeps every byte.
        let dir = temp_dir("cuts");
        let a = Log::from(1).sets(2);
        let mut a_bytes = a.bytes.clone();
        let mut half = Vec::new();
        encode_command(&mut half, &["SET", "x", "y"]);
        encode_entry(&mut a_bytes, 3, RID, 999, &half);
        a_bytes.truncate(a_bytes.len() - 3);
        let mut b = Log::from(3).sets(3).bytes;
        b[40] ^= 0x01;
        std::fs::write(dir.join("t.1.incr.aof"), &a_bytes).unwrap();
        std::fs::write(dir.join("t.2.incr.aof"), &b).unwrap();
        let l = layout(&["t.1.incr.aof", "t.2.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, true).unwrap_err();
        assert!(e.starts_with("Bad file format"), "{e}");
        assert_eq!(len_of(&dir.join("t.1.incr.aof")), a_bytes.len() as u64);
        // With file 2 intact, file 1's torn tail is its end (file 2 continues its LSNs).
        std::fs::write(dir.join("t.2.incr.aof"), Log::from(3).sets(3).bytes).unwrap();
        let mut srv = server();
        assert!(load_layout(&mut srv, &dir, &l, true).is_ok());
        assert_eq!(len_of(&dir.join("t.1.incr.aof")), a.bytes.len() as u64);
        assert_eq!(srv.aof.last_lsn, 5);
        assert_eq!(run(&mut srv, &["EXISTS", "x"]), ":0\r\n");
    }

    #[test]
    fn an_unfinished_multi_is_reverted_and_cut_at_its_start() {
        let dir = temp_dir("multi");
        let log = Log::from(1)
            .cmd(&["SET", "a", "1"])
            .cmd(&["MULTI"])
            .cmd(&["SET", "a", "2"])
            .cmd(&["SET", "b", "2"]);
        let (multi_at, _) = log.entries[1];
        let p = dir.join("t.1.incr.aof");
        std::fs::write(&p, &log.bytes).unwrap();
        let l = layout(&["t.1.incr.aof"]);
        let e = load_layout(&mut server(), &dir, &l, false).unwrap_err();
        assert!(
            e.contains("MULTI block at offset") && e.contains("has no EXEC"),
            "{e}"
        );
        assert_eq!(len_of(&p), log.bytes.len() as u64);
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, true),
            Ok(Some(multi_at as u64))
        );
        assert_eq!(len_of(&p), multi_at as u64);
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n1\r\n");
        assert_eq!(run(&mut srv, &["EXISTS", "b"]), ":0\r\n");
        // The log position is the one before MULTI.
        assert_eq!(srv.aof.last_lsn, 1);
        assert_eq!(srv.aof.reploff, log.entries[0].1);
        assert!(srv.aof.loaded_truncated);
        // A finished transaction is applied whole.
        let done = Log::from(1)
            .cmd(&["MULTI"])
            .cmd(&["SET", "a", "9"])
            .cmd(&["EXEC"]);
        std::fs::write(&p, &done.bytes).unwrap();
        let mut srv = server();
        assert_eq!(
            load_layout(&mut srv, &dir, &l, false),
            Ok(Some(done.bytes.len() as u64))
        );
        assert_eq!(run(&mut srv, &["GET", "a"]), "$1\r\n9\r\n");
    }

    #[test]
    fn a_missing_last_file_is_empty_and_a_missing_earlier_one_an_error() {
        let dir = temp_dir("missing");
        std::fs::write(dir.join("t.1.incr.aof"), Log::from(1).sets(1).bytes).unwrap();
        let mut srv = server();
        assert_eq!(
            load_layout(
                &mut srv,
                &dir,
                &layout(&["t.1.incr.aof", "t.2.incr.aof"]),
                false
            ),
            Ok(None)
        );
        assert_eq!(srv.aof.last_lsn, 1);
        let e = load_layout(
            &mut server(),
            &dir,
            &layout(&["t.0.incr.aof", "t.1.incr.aof"]),
            false,
        )
        .unwrap_err();
        assert!(e.starts_with("Can't open t.0.incr.aof"), "{e}");
    }

    #[test]
    fn an_unknown_command_stops_the_load() {
        let dir = temp_dir("unknown");
        let log = Log::from(1)
            .cmd(&["SET", "a", "1"])
            .cmd(&["NOSUCHCMD", "x"])
            .sets(1);
        std::fs::write(dir.join("t.1.incr.aof"), &log.bytes).unwrap();
        let e = load_layout(&mut server(), &dir, &layout(&["t.1.incr.aof"]), true).unwrap_err();
        assert!(
            e.contains("Unknown command 'NOSUCHCMD' reading the append only file"),
            "{e}"
        );
    }

    #[test]
    fn a_fresh_directory_is_a_loadable_empty_log() {
        let dir = temp_dir("fresh");
        let l = create_fresh(&dir, "appendonly.aof", RID).unwrap();
        assert_eq!(l, Layout::fresh("appendonly.aof"));
        let manifest = std::fs::read(dir.join(l.manifest_name())).unwrap();
        assert_eq!(Layout::parse("appendonly.aof", &manifest).unwrap(), l);
        let base = dir.join(&l.base.as_ref().unwrap().name);
        assert_eq!(BaseKind::of(&base).unwrap(), BaseKind::Commands);
        assert_eq!(len_of(&dir.join(&l.incrs[0].name)), 0);
        let mut srv = server();
        srv.aof.replid = "other".into();
        assert_eq!(load_layout(&mut srv, &dir, &l, false), Ok(Some(0)));
        assert_eq!(srv.aof.last_lsn, 0);
        assert_eq!(
            srv.aof.replid, RID,
            "the base's trailer states the position"
        );
        // A base with entries then its trailer: the next file continues after its LSN.
        let mut b = Log::from(1).cmd(&["SET", "fromb", "1"]).bytes;
        crate::persistence::aof::format::encode_base_end(&mut b, 7, RID, 70, 1);
        std::fs::write(&base, &b).unwrap();
        std::fs::write(dir.join(&l.incrs[0].name), Log::from(8).sets(1).bytes).unwrap();
        let mut srv = server();
        assert!(load_layout(&mut srv, &dir, &l, false).is_ok());
        assert_eq!(srv.aof.last_lsn, 8);
        assert_eq!(run(&mut srv, &["EXISTS", "fromb", "k8"]), ":2\r\n");
    }
}
