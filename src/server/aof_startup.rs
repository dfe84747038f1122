//! Startup with `appendonly yes`: open (or create) the AOF directory, load the base,
//! replay the incremental files through `Server::execute` (each command as a client would
//! send it), cut a torn tail where the log's rules allow, start the writer thread. The
//! rules for how a file may end are `src/persistence/aof/load.rs`.

use super::{Client, Server};
use crate::persistence::aof::format::{self, ScanOutcome};
use crate::persistence::aof::load::{
    create_fresh, describe, end_of_log, truncate, BaseKind, LogEnd, Mapped,
};
use crate::persistence::aof::manifest::Layout;
use crate::persistence::aof::storage::{FsDir, LogDir};
use crate::persistence::aof::writer::{FsyncMode, Writer};
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
fn replay(
    srv: &mut Server,
    client: &mut Client,
    bytes: &[u8],
    first: Option<u64>,
) -> (ScanOutcome, Option<OpenMulti>) {
    let base = bytes.as_ptr() as usize;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut out = Vec::new();
    let mut open: Option<OpenMulti> = None;
    let mut prev_reploff: Option<u64> = None;
    let o = format::scan(bytes, first, |e| {
        ranges.clear();
        ranges.extend(e.args.iter().map(|a| (a.as_ptr() as usize - base, a.len())));
        let name = e.args[0];
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
            // `*1\r\n$5\r\nMULTI\r\n` is 15 bytes of replication offset.
            open = Some(OpenMulti {
                offset: e.offset,
                prev_lsn: e.lsn.map(|l| l.saturating_sub(1)),
                prev_reploff: prev_reploff.unwrap_or(e.reploff.saturating_sub(15)),
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
            let (o, open) = replay(srv, &mut client, m.bytes(), next_lsn);
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
            let (o, _) = replay(srv, client, m.bytes(), Some(1));
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
            let st = crate::persistence::rdb_file::load_rdb(
                m.bytes(),
                &mut srv.ks,
                &srv.config,
                i64::MIN,
            )
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
            Ok(st.aof_lsn)
        }
        BaseKind::Image => {
            let reserve = srv.config.settings().arena_reserve_bytes;
            let progress = crate::persistence::snapshot::format::LoadProgress::default();
            let (arena, header) =
                crate::persistence::snapshot::load_image(path, reserve, &progress)?
                    .ok_or_else(|| format!("Can't open {name}: no such file"))?;
            let databases = srv.config.settings().databases;
            let ks = crate::keyspace::Keyspace::from_arena(arena, databases)
                .map_err(|e| format!("snapshot image {name}: {e}"))?;
            srv.install_keyspace(ks);
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
            Ok(Some(header.aof_lsn))
        }
    }
}
