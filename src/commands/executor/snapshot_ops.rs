//! The executor's snapshot operations: SAVE, BGSAVE, collecting a finished background
//! snapshot, `save` points, SHUTDOWN's save, and the startup load. Everything here runs on
//! the executor and is O(1) in the dataset except SAVE / SHUTDOWN, which block by
//! definition (as in Redis).

use super::Server;
use crate::keyspace::Keyspace;
use crate::persistence::snapshot::{BgJob, SnapParams};
use crate::util::now_ms;
use crate::{notice, warning};
use std::path::PathBuf;

/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed BGSAVE, save points wait this long.
pub const BGSAVE_RETRY_DELAY_MS: i64 = 5000;

/// Redis's reply when writes are refused after a failed background save.
pub const MISCONF_ERR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// True if the file at `path` starts with Redis's RDB signature.
fn file_looks_like_rdb(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 9];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && crate::persistence::rdb_file::looks_like_rdb(&head)
}

fn in_dir(srv: &Server, name: &str) -> PathBuf {
    let s = srv.config.settings();
    let dir = if s.dir.is_empty() {
        "."
    } else {
        s.dir.as_str()
    };
    PathBuf::from(dir).join(name)
}

/// Where the image lives: `dir/image-filename`.
pub fn image_path(srv: &Server) -> PathBuf {
    in_dir(srv, &srv.config.settings().image_filename)
}

/// Where RDB files live: `dir/dbfilename`.
pub fn rdb_path(srv: &Server) -> PathBuf {
    in_dir(srv, &srv.config.settings().dbfilename)
}

/// What startup loads: the newer (by modification time) of `dir/image-filename` and
/// `dir/dbfilename`, the image on a tie. Either file is loaded by what it holds, not by
/// its name: a `dump.rdb` holding an image (the layout before `image-filename`) loads as
/// an image.
fn startup_file(srv: &Server) -> Option<PathBuf> {
    // Regular files only: an empty `dbfilename` names `dir` itself.
    let mtime = |p: &PathBuf| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
    };
    let (image, rdb) = (image_path(srv), rdb_path(srv));
    let with_time = |p: PathBuf| mtime(&p).map(|t| (p, t));
    match (with_time(image), with_time(rdb)) {
        (None, None) => None,
        (Some((p, _)), None) | (None, Some((p, _))) => Some(p),
        (Some((i, ti)), Some((r, tr))) if i == r => Some(if ti >= tr { i } else { r }),
        (Some((i, ti)), Some((r, tr))) => {
            let (newer, older) = if tr > ti { (r, i) } else { (i, r) };
            notice!(
                "Both {} and {} exist: loading {}, the newer",
                newer.display(),
                older.display(),
                newer.display()
            );
            Some(newer)
        }
    }
}

/// The AUX fields of an RDB that SAVE / BGSAVE write (Redis's, where cairn has them).
fn rdb_aux(srv: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("ctime", (now_ms() / 1000).to_string()),
        ("repl-id", srv.master_replid.clone()),
        ("aof-base", "0".to_string()),
    ]
}

/// The snapshot parameters from the config (BGREWRITEAOF changes the path and the cut hook).
pub(crate) fn params(srv: &Server) -> SnapParams {
    let s = srv.config.settings();
    let mut repl_id = [b'0'; 40];
    let id = srv.master_replid.as_bytes();
    let n = id.len().min(40);
    repl_id[..n].copy_from_slice(&id[..n]);
    SnapParams {
        path: image_path(srv),
        threads: s.snapshot_threads,
        pause_budget_us: s.snapshot_pause_budget_us,
        mode: s.snapshot_mode,
        repl_id,
        repl_offset: srv.aof.reploff,
        repl_stream_db: srv.repl_stream_db().map_or(0, |db| db as u32 + 1),
        databases: srv.ks.num_dbs() as u32,
        on_cut: None,
        executor_cpu: None,
        wide_cpus: None,
        write_behind: s.rdb_save_incremental_fsync,
        functions: crate::persistence::snapshot::Functions::new(
            srv.scripts.functions.published.clone(),
        ),
        tier: srv.tiering.as_ref().map(|t| {
            let (file, high_water) = t.store.capture_source();
            crate::persistence::snapshot::TierCapture {
                file,
                high_water,
                copy_delay_us: srv
                    .config
                    .get_value("rdb-key-save-delay")
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or(0)
                    .max(0) as u64,
            }
        }),
        follow: None,
        record_delay_us: 0,
        dirty_map: None,
        verify_dirty_map: s.snapshot_verify_dirty_map,
        capture: None,
        verify_cow: s.snapshot_verify_cow,
    }
}

impl Server {
    /// Where SAVE writes the image and startup loads it (`dir/dbfilename`).
    pub fn image_path(&self) -> PathBuf {
        image_path(self)
    }

    /// Builds the server; when `dir/dbfilename` exists, a loader thread restores it while
    /// the server answers `-LOADING` (see [`Server::loading_poll`]).
    pub fn open(config: crate::config::Config) -> Result<Server, String> {
        let renames = config.renamed_commands.clone();
        let user_lines = config.user_lines.clone();
        let mut srv = Server::new(config).map_err(|e| e.to_string())?;
        for (old, new) in &renames {
            srv.commands.rename(old, new)?;
        }
        srv.acl_startup(&user_lines)?;
        // The tier file is created (empty) before an image (a snapshot, or the log's
        // image base) loads: the loader copies the image's tiered records into it.
        super::tiering::start(&mut srv)?;
        // As Redis: with `appendonly yes` the log alone is the source of truth at startup.
        if srv.config.settings().appendonly {
            return Ok(srv);
        }
        let Some(path) = startup_file(&srv) else {
            return Ok(srv);
        };
        // A `dump.rdb` written by Redis/Valkey: load it (strings today; other types stop
        // startup with a message naming the key), so swapping servers keeps the data.
        if file_looks_like_rdb(&path) {
            let start = std::time::Instant::now();
            let data =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            // Loading is no keyspace event (Redis's dbAddRDBLoad notifies nothing).
            let record = std::mem::take(&mut srv.ks.events.record);
            let stats = crate::persistence::rdb_file::load_rdb(
                &data,
                &mut srv.ks,
                &srv.config,
                crate::util::now_ms(),
            )
            .map_err(|e| format!("{} ({})", e, path.display()))?;
            srv.install_functions(&stats.functions)
                .map_err(|e| format!("{e} ({})", path.display()))?;
            srv.ks.events.record = record;
            crate::notice!(
                "DB loaded from disk ({}: RDB version {}, {} keys, {} expired skipped): {:.3} seconds",
                path.display(),
                stats.version,
                stats.keys_loaded,
                stats.keys_expired_skipped,
                start.elapsed().as_secs_f64()
            );
            return Ok(srv);
        }
        let s = srv.config.settings();
        let delay = srv
            .config
            .get_value("key-load-delay")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
            .max(0) as u64;
        notice!("Loading the snapshot image {}", path.display());
        let tier = match &srv.tiering {
            Some(t) => crate::persistence::snapshot::TierLoad::Keep {
                tier_file: t.store.path.clone(),
                capacity_pages: t.store.book.capacity_pages(),
            },
            None => crate::persistence::snapshot::TierLoad::Warm,
        };
        let job =
            crate::persistence::snapshot::LoadJob::start(path, s.arena_reserve_bytes, delay, tier)
                .map_err(|e| format!("cannot start the image loader: {e}"))?;
        srv.snapshot.loading = Some(job);
        Ok(srv)
    }

    /// Replaces the (empty) keyspace with one restored from an image, keeping the
    /// settings the config gave the current one.
    /// Returns the keyspace it replaced.
    pub fn install_keyspace(&mut self, mut ks: Keyspace) -> Keyspace {
        ks.lfu = self.ks.lfu;
        ks.lfu_log_factor = self.ks.lfu_log_factor;
        ks.lfu_decay_time_min = self.ks.lfu_decay_time_min;
        ks.deletions = self.ks.deletions.take();
        ks.events.record = self.ks.events.record;
        // The tier file's fallback reader is the server's, not the dataset's.
        ks.tier.reader = self.ks.tier.reader.take();
        std::mem::replace(&mut self.ks, ks)
    }

    /// Loads the function libraries a data file carries (RDB function records, an
    /// image's section), replacing whatever is loaded. Err: why a library failed.
    pub fn install_functions(&mut self, libs: &[Vec<u8>]) -> Result<(), String> {
        if libs.is_empty() {
            return Ok(());
        }
        crate::commands::scripting::functions::install(&mut self.scripts.functions, libs)
            .map_err(|e| format!("Failed loading the function libraries: {e}"))
    }

    pub fn is_loading(&self) -> bool {
        self.snapshot.loading.is_some()
    }

    /// Cron: installs the loaded keyspace once the loader is done. A bad image stops the
    /// server with the loader's message (which check failed, and where).
    pub fn loading_poll(&mut self) {
        if !self
            .snapshot
            .loading
            .as_ref()
            .is_some_and(|j| j.is_finished())
        {
            return;
        }
        // Pending replies reference blocks of the current arena: swap it out only once
        // they are written (never in practice: nothing is served from the empty keyspace).
        if self.ks.pinned_blocks() > 0 {
            return;
        }
        let Some(job) = self.snapshot.loading.take() else {
            return;
        };
        let started = job.started;
        let path = job.path.clone();
        let loaded = job.join().and_then(|l| {
            let (arena, header, tier) =
                l.ok_or_else(|| "the image vanished while loading".to_string())?;
            let mut ks =
                crate::collections::keyspace_from_arena(arena, self.config.settings().databases)
                    .map_err(|e| format!("snapshot image {}: {e}", path.display()))?;
            if let Some(r) = tier {
                let Some(t) = self.tiering.as_mut() else {
                    return Err("tiered values restored without tiering".to_string());
                };
                // O(1): the bookkeeping was rebuilt on the loader thread.
                if let Some(book) = r.book {
                    t.store.restore(book);
                }
                ks.tier.cold_entries = r.cold_entries;
                ks.tier.cold_bytes = r.cold_bytes;
            }
            Ok((ks, header))
        });
        let loaded = loaded.and_then(|(ks, header)| {
            let libs = crate::persistence::rdb_value::read_function_libraries(&header.functions)
                .map_err(|e| {
                    format!("snapshot image {}: function libraries: {e}", path.display())
                })?;
            self.install_functions(&libs)
                .map_err(|e| format!("snapshot image {}: {e}", path.display()))?;
            Ok((ks, header))
        });
        match loaded {
            Ok((ks, header)) => {
                let _ = self.install_keyspace(ks);
                self.lastsave_s = header.created_ms / 1000;
                self.dirty = 0;
                // The image's replication position is the loaded data's.
                self.repl.loaded_stream_db = (header.repl_stream_db as usize)
                    .checked_sub(1)
                    .filter(|&db| db < self.ks.num_dbs());
                let replid = String::from_utf8_lossy(&header.repl_id).into_owned();
                self.repl_restore(&replid, header.repl_offset);
                notice!(
                    "DB loaded from disk ({}): {:.3} seconds ({} keys, {} bytes of arena, image taken {})",
                    path.display(),
                    started.elapsed().as_secs_f64(),
                    self.ks.total_keys(),
                    header.arena_bytes,
                    crate::persistence::snapshot::mode_name(header.mode)
                );
            }
            Err(e) => {
                warning!("Fatal error loading the DB: {e}. Exiting.");
                let _ = std::io::Write::flush(&mut std::io::stdout());
                std::process::exit(1);
            }
        }
    }

    /// The executor's check between commands (see `PauseGate`). Before stopping, the
    /// AOF entries framed so far go to the writer's queue, so at any stop the queue ends
    /// exactly at the LSN published with it (BGREWRITEAOF switches files there).
    /// Returns true if the executor was parked for a snapshot's final pause.
    #[inline]
    pub fn snapshot_checkpoint(&mut self) -> bool {
        // The previous command's writes are complete: a tracking snapshot's harvests may
        // see their regions now (and must, before any stop).
        self.ks.arena.publish_marks();
        if !self.snapshot.gate.requested() {
            return false;
        }
        self.aof.flush();
        let parked = self
            .snapshot
            .gate
            .checkpoint(self.dirty, || self.cut_keys());
        if parked {
            self.aof.after_stop();
            self.repl_after_stop();
        }
        parked
    }
    /// The key count at a stop, publishing the replication offset and the AOF's LSN with
    /// it (the cut's values; only run when the executor actually stops or goes idle).
    fn cut_keys(&self) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        let gate = &self.snapshot.gate;
        gate.repl_offset.store(self.aof.reploff, SeqCst);
        gate.repl_stream_db
            .store(self.repl_stream_db().map_or(0, |db| db as u64 + 1), SeqCst);
        gate.aof_lsn.store(self.aof.last_lsn, SeqCst);
        self.ks.total_keys()
    }
    /// The executor is about to wait for I/O (its framed AOF entries are queued first:
    /// see `snapshot_checkpoint`).
    pub fn snapshot_idle_begin(&mut self) {
        self.ks.arena.publish_marks();
        // Only a running snapshot can cut while the executor waits: then the log's queue
        // must end at the published LSN. Otherwise entries may wait for the next fsync
        // (see `Aof::flush_turn`).
        if self.background_job_active() {
            self.aof.flush();
        } else {
            self.aof.flush_turn();
        }
        self.snapshot
            .gate
            .idle_begin(self.dirty, || self.cut_keys());
    }
    /// The executor is back from waiting for I/O.
    pub fn snapshot_idle_end(&mut self) {
        self.snapshot.gate.idle_end(self.dirty, || self.cut_keys());
        self.aof.after_stop();
        self.repl_after_stop();
    }

    /// True when writes must be refused with MISCONF (Redis's writeCommandsDeniedByDiskError).
    pub fn writes_denied_by_disk_error(&self) -> bool {
        let s = self.config.settings();
        s.stop_writes_on_bgsave_error
            && !s.save_points.is_empty()
            && !self.snapshot.stats.last_bgsave_ok
    }

    /// SAVE: a blocking stop-the-world save on the executor.
    pub fn save_now(&mut self) -> Result<(), String> {
        if self.snapshot.in_progress() || self.repl.capture_running() {
            return Err("Background save already in progress".into());
        }
        if self.config.settings().snapshot_rdb {
            if self.tiering.is_some() {
                return self.save_rdb_tiered();
            }
            return self.save_rdb_now();
        }
        let p = params(self);
        let keys = self.ks.total_keys();
        let saved = crate::persistence::snapshot::save_blocking(&self.ks.arena, keys, &p);
        self.image_saved(saved)
    }

    /// What a blocking image save leaves: the outcome recorded, the dirty count and
    /// LASTSAVE reset, or the failure logged.
    fn image_saved(
        &mut self,
        saved: Result<
            crate::persistence::snapshot::Outcome,
            crate::persistence::snapshot::SnapError,
        >,
    ) -> Result<(), String> {
        match saved {
            Ok(o) => {
                self.snapshot.record(&o, false);
                self.dirty = 0;
                self.lastsave_s = now_ms() / 1000;
                self.snapshot.stats.last_bgsave_ok = true;
                Ok(())
            }
            Err(e) => {
                warning!("Failed saving the DB: {e}");
                Err(e.to_string())
            }
        }
    }

    /// FLUSHALL's save, as Redis's: a background save of the old data is stopped (its
    /// image, finishing later, would bring the flushed keys back at the next start), and
    /// with save points configured the emptied dataset is saved at once. The dirty count
    /// is kept, as Redis keeps it, so the flush still counts as a change.
    pub fn save_after_flushall(&mut self) {
        self.bgsave_cancel("Background saving terminated: FLUSHALL emptied the dataset");
        let s = self.config.settings();
        if s.save_points.is_empty() || self.is_loading() {
            return;
        }
        let dirty = self.dirty;
        let _ = if s.snapshot_rdb {
            self.save_rdb_now()
        } else {
            self.save_empty_image()
        };
        self.dirty = dirty;
    }

    /// The image of an empty dataset, from a fresh arena: the flushed arena still spans its
    /// old high-water mark, and copying it would cost the old dataset's size on the
    /// executor for the same content (no keys; the function libraries are in the header).
    fn save_empty_image(&mut self) -> Result<(), String> {
        let s = self.config.settings();
        let seed = {
            let mut r = crate::util::Rng::from_time();
            [r.next_u64(), r.next_u64()]
        };
        let arena =
            crate::arena::Arena::new(s.arena_reserve_bytes, seed).map_err(|e| e.to_string())?;
        let empty = crate::collections::new_keyspace(arena, self.ks.num_dbs());
        let mut p = params(self);
        // No cold entry: no companion.
        p.tier = None;
        let saved = crate::persistence::snapshot::save_blocking(&empty.arena, 0, &p);
        self.image_saved(saved)
            .inspect(|_| notice!("DB saved on disk"))
    }

    /// SAVE with `snapshot-format rdb`: the live keyspace written as an RDB to
    /// `dir/dbfilename` on the executor (SAVE blocks by definition, as Redis's does).
    fn save_rdb_now(&mut self) -> Result<(), String> {
        if self.config.settings().dbfilename.is_empty() {
            warning!("Failed saving the DB: snapshot-format rdb with an empty dbfilename");
            return Err("dbfilename is empty".into());
        }
        let out = rdb_path(self);
        let aux = self.save_rdb_aux();
        let functions = self
            .scripts
            .functions
            .published
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let write_behind = self.config.settings().rdb_save_incremental_fsync;
        let never = std::sync::atomic::AtomicBool::new(false);
        let written = crate::persistence::snapshot::rdb_save::write_rdb_file(
            &mut self.ks,
            &out,
            &aux,
            &functions,
            0,
            write_behind,
            &never,
        );
        self.rdb_saved(written)
    }

    /// The AUX fields of an RDB that SAVE writes: the server's, and the replication
    /// position the data stands for.
    fn save_rdb_aux(&self) -> Vec<(&'static str, String)> {
        let mut aux = rdb_aux(self);
        if let Some(db) = self.repl_stream_db() {
            aux.push(("repl-stream-db", db.to_string()));
        }
        aux.push(("repl-offset", self.aof.reploff.to_string()));
        aux
    }

    /// What a blocking RDB save leaves: the outcome counted, the dirty count and
    /// LASTSAVE reset, or the failure logged.
    fn rdb_saved(&mut self, written: Result<u64, String>) -> Result<(), String> {
        match written {
            Ok(bytes) => {
                self.snapshot.stats.saves += 1;
                self.snapshot.stats.bytes_written += bytes;
                self.dirty = 0;
                self.lastsave_s = now_ms() / 1000;
                self.snapshot.stats.last_bgsave_ok = true;
                notice!("DB saved on disk");
                Ok(())
            }
            Err(e) => {
                warning!("Failed saving the DB: {e}");
                Err(e)
            }
        }
    }

    /// SAVE with `snapshot-format rdb` while tiering is on: cold values live only in the
    /// tier file, so the keyspace is saved as an image with its tier companion (on the
    /// executor: SAVE blocks by definition, as Redis's does, and this reads every cold
    /// value's pages synchronously there), then converted into the RDB as BGSAVE's
    /// capture is, the cold values read from the companion. Memory: a second arena for
    /// the conversion, as BGSAVE's.
    fn save_rdb_tiered(&mut self) -> Result<(), String> {
        let s = self.config.settings();
        if s.dbfilename.is_empty() {
            warning!("Failed saving the DB: snapshot-format rdb with an empty dbfilename");
            return Err("dbfilename is empty".into());
        }
        let (reserve, dbs, write_behind) = (
            s.arena_reserve_bytes,
            s.databases,
            s.rdb_save_incremental_fsync,
        );
        let mut p = params(self);
        p.path = in_dir(self, &format!("temp-save-{}.cimg", std::process::id()));
        let keys = self.ks.total_keys();
        let never = std::sync::atomic::AtomicBool::new(false);
        // `image_to_rdb` adds the position the image's header holds.
        let aux = rdb_aux(self);
        let out = rdb_path(self);
        let written = crate::persistence::snapshot::save_blocking(&self.ks.arena, keys, &p)
            .map_err(|e| e.to_string())
            .and_then(|_| {
                crate::persistence::snapshot::rdb_save::image_to_rdb(
                    &p.path,
                    &out,
                    &aux,
                    reserve,
                    dbs,
                    0,
                    write_behind,
                    &never,
                )
            });
        let _ = std::fs::remove_file(&p.path);
        crate::persistence::tiered::companion::remove_others(&p.path, None);
        self.rdb_saved(written)
    }

    /// BGSAVE: starts the snapshot thread (O(1) here).
    pub fn bgsave_start(&mut self) -> Result<(), String> {
        if self.snapshot.in_progress() {
            return Err("Background save already in progress".into());
        }
        if self.aof.rewrite.is_some() {
            return Err("an AOF rewrite is taking its snapshot".into());
        }
        if self.repl.capture_running() {
            return Err("a replica's full sync is taking its snapshot".into());
        }
        let s = self.config.settings();
        if s.snapshot_rdb && s.dbfilename.is_empty() {
            return Err("snapshot-format rdb needs a dbfilename".into());
        }
        self.bgsave_scheduled = false;
        self.snapshot.stats.last_bgsave_try_ms = now_ms();
        let mut p = params(self);
        // `snapshot-format rdb`: the engine captures into a temporary image (the executor's
        // cost is the capture's either way), which a thread then writes as the RDB.
        let rdb_target = self.config.settings().snapshot_rdb.then(|| {
            p.path = in_dir(self, &format!("temp-bgsave-{}.cimg", std::process::id()));
            (p.path.clone(), rdb_path(self))
        });
        // Freed large blocks must keep their pages while tracking is armed (see Arena).
        self.ks.arena.set_keep_pages(true);
        // Tier file pages too, until the companion is copied.
        self.tier_capture(true);
        match BgJob::start(&self.ks.arena, p, self.snapshot.gate.clone()) {
            Ok(job) => {
                notice!("Background saving started");
                self.snapshot.job = Some(job);
                self.snapshot.rdb_target = rdb_target;
                Ok(())
            }
            Err(e) => {
                self.ks.arena.set_keep_pages(false);
                self.tier_capture(false);
                self.snapshot.stats.last_bgsave_ok = false;
                warning!("Can't start the snapshot thread: {e}");
                Err(e.to_string())
            }
        }
    }

    /// Collects a finished background snapshot (cron).
    pub fn bgsave_collect(&mut self) {
        self.rdb_write_collect();
        let done = self.snapshot.job.as_ref().is_some_and(|j| j.is_finished());
        if !done {
            return;
        }
        let Some(job) = self.snapshot.job.take() else {
            return;
        };
        let started = job.started;
        let result = job.join();
        self.ks.arena.set_keep_pages(false);
        self.tier_capture(false);
        if let Some((capture, out)) = self.snapshot.rdb_target.take() {
            let Ok(o) = result else {
                self.snapshot.stats.last_bgsave_time_sec = started.elapsed().as_secs() as i64;
                if let Err(e) = result {
                    warning!("Background saving error: {e}");
                }
                self.snapshot.stats.last_bgsave_ok = false;
                let _ = std::fs::remove_file(&capture);
                crate::persistence::tiered::companion::remove_others(&capture, None);
                return;
            };
            self.rdb_write_start(capture, out, o, started);
            return;
        }
        self.bgsave_done(started, result);
    }

    /// Stops a running BGSAVE (its capture, or the RDB being written from it), logging
    /// `why`; the files it would have replaced stay as they were.
    pub(crate) fn bgsave_cancel(&mut self, why: &str) {
        if let Some(job) = self.snapshot.job.take() {
            warning!("{why}");
            job.cancel();
            self.ks.arena.set_keep_pages(false);
            self.tier_capture(false);
        }
        if let Some((capture, _)) = self.snapshot.rdb_target.take() {
            let _ = std::fs::remove_file(&capture);
            crate::persistence::tiered::companion::remove_others(&capture, None);
        }
        if let Some(w) = self.snapshot.rdb_write.take() {
            warning!("{why}");
            w.cancel();
        }
    }

    /// `snapshot-format rdb`: starts writing the RDB from the finished capture.
    fn rdb_write_start(
        &mut self,
        capture: PathBuf,
        out: PathBuf,
        o: crate::persistence::snapshot::Outcome,
        started: std::time::Instant,
    ) {
        let s = self.config.settings();
        let (reserve, dbs, write_behind) = (
            s.arena_reserve_bytes,
            s.databases,
            s.rdb_save_incremental_fsync,
        );
        let key_delay_us = self
            .config
            .get_value("rdb-key-save-delay")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0)
            .max(0) as u64;
        let aux = rdb_aux(self);
        match crate::persistence::snapshot::rdb_save::RdbWrite::start(
            capture.clone(),
            out,
            aux,
            reserve,
            dbs,
            key_delay_us,
            write_behind,
            o,
            started,
        ) {
            Ok(w) => self.snapshot.rdb_write = Some(w),
            Err(e) => {
                warning!("Background saving error: can't start the RDB writer: {e}");
                self.snapshot.stats.last_bgsave_ok = false;
                self.snapshot.stats.last_bgsave_time_sec = started.elapsed().as_secs() as i64;
                let _ = std::fs::remove_file(&capture);
                crate::persistence::tiered::companion::remove_others(&capture, None);
            }
        }
    }

    /// `snapshot-format rdb`: collects the finished RDB write (cron).
    fn rdb_write_collect(&mut self) {
        if !self
            .snapshot
            .rdb_write
            .as_ref()
            .is_some_and(|w| w.is_finished())
        {
            return;
        }
        let Some(w) = self.snapshot.rdb_write.take() else {
            return;
        };
        let started = w.started;
        let mut o = w.outcome.clone();
        let result = w.join().map(|bytes| {
            o.bytes_written = bytes;
            o
        });
        self.bgsave_done(started, result);
    }

    /// A background save's end, image or RDB: its time, its outcome in INFO, and the
    /// writes it did not cover left in `dirty`.
    fn bgsave_done(
        &mut self,
        started: std::time::Instant,
        result: Result<crate::persistence::snapshot::Outcome, impl std::fmt::Display>,
    ) {
        self.snapshot.stats.last_bgsave_time_sec = started.elapsed().as_secs() as i64;
        match result {
            Ok(o) => {
                self.snapshot.record(&o, true);
                self.dirty = self.dirty.saturating_sub(o.dirty_at_cut);
                self.lastsave_s = now_ms() / 1000;
                self.snapshot.stats.last_bgsave_ok = true;
            }
            Err(e) => {
                warning!("Background saving error: {e}");
                self.snapshot.stats.last_bgsave_ok = false;
            }
        }
    }

    /// Cron: collect a finished snapshot, then start one when a `save` point is due
    /// (Redis's rule: enough changes, enough seconds since the last save, and not within
    /// the retry delay after a failure).
    pub fn snapshot_cron(&mut self) {
        self.loading_poll();
        self.bgsave_collect();
        if self.background_job_active() || self.is_loading() {
            return;
        }
        if self.bgsave_scheduled {
            let _ = self.bgsave_start();
            return;
        }
        let now = now_ms();
        let now_s = now / 1000;
        let ok = self.snapshot.stats.last_bgsave_ok;
        let retry_ok = now - self.snapshot.stats.last_bgsave_try_ms > BGSAVE_RETRY_DELAY_MS;
        let due = self
            .config
            .settings()
            .save_points
            .iter()
            .find(|&&(secs, changes)| {
                self.dirty >= changes && now_s - self.lastsave_s > secs as i64 && (ok || retry_ok)
            })
            .copied();
        if let Some((secs, changes)) = due {
            notice!("{changes} changes in {secs} seconds. Saving...");
            let _ = self.bgsave_start();
        }
    }

    /// Before exiting: cancel a background snapshot, and save when asked to (SHUTDOWN SAVE)
    /// or by default when save points exist. Err means: do not exit.
    pub fn shutdown_save(
        &mut self,
        req: crate::commands::executor::ShutdownRequest,
    ) -> Result<(), String> {
        use crate::commands::executor::ShutdownRequest::*;
        self.bgsave_cancel("There is a background snapshot in progress: stopping it");
        crate::commands::executor::aof_rewrite::cancel(self);
        self.repl_cancel_sync();
        // As Redis: never save while loading (it would replace the image with a partial,
        // here empty, dataset).
        let save = match req {
            _ if self.is_loading() => false,
            Save => true,
            NoSave => false,
            Default => !self.config.settings().save_points.is_empty(),
        };
        if !save {
            return Ok(());
        }
        notice!("Saving the final snapshot before exiting.");
        self.save_now().inspect_err(|_| {
            warning!("Error trying to save the DB, can't exit.");
        })
    }
}
