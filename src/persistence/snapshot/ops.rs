//! The executor's snapshot operations: SAVE, BGSAVE, collecting a finished background
//! snapshot, `save` points, SHUTDOWN's save, and the startup load. Everything here runs on
//! the executor and is O(1) in the dataset except SAVE / SHUTDOWN, which block by
//! definition (as in Redis).

use super::{BgJob, SnapParams};
use crate::keyspace::Keyspace;
use crate::server::Server;
use crate::util::now_ms;
use crate::{notice, warning};
use std::path::PathBuf;

/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed BGSAVE, save points wait this long.
pub const BGSAVE_RETRY_DELAY_MS: i64 = 5000;

/// Redis's reply when writes are refused after a failed background save.
pub const MISCONF_ERR: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Where the image lives: `dir/dbfilename`.
pub fn image_path(srv: &Server) -> PathBuf {
    let s = srv.config.settings();
    let dir = if s.dir.is_empty() {
        "."
    } else {
        s.dir.as_str()
    };
    PathBuf::from(dir).join(&s.dbfilename)
}

fn params(srv: &Server) -> SnapParams {
    let s = srv.config.settings();
    let mut repl_id = [b'0'; 40];
    let id = srv.master_replid.as_bytes();
    let n = id.len().min(40);
    repl_id[..n].copy_from_slice(&id[..n]);
    SnapParams {
        path: image_path(srv),
        threads: s.snapshot_threads,
        pause_budget_us: s.snapshot_pause_budget_us,
        force_stw: s.snapshot_stop_the_world,
        repl_id,
        repl_offset: 0,
        databases: srv.ks.num_dbs() as u32,
    }
}

impl Server {
    /// Builds the server, restoring `dir/dbfilename` when it exists. Any problem with the
    /// image stops startup with a message saying what and where.
    pub fn open(config: crate::config::Config) -> Result<Server, String> {
        let mut srv = Server::new(config).map_err(|e| e.to_string())?;
        let path = image_path(&srv);
        let s = srv.config.settings().clone();
        let start = std::time::Instant::now();
        let loaded = super::load_image(&path, s.arena_reserve_bytes)?;
        let Some((arena, header)) = loaded else {
            return Ok(srv);
        };
        let mut ks = Keyspace::from_arena(arena, s.databases)
            .map_err(|e| format!("snapshot image {}: {e}", path.display()))?;
        ks.lfu = srv.ks.lfu;
        ks.lfu_log_factor = srv.ks.lfu_log_factor;
        ks.lfu_decay_time_min = srv.ks.lfu_decay_time_min;
        srv.ks = ks;
        srv.lastsave_s = header.created_ms / 1000;
        notice!(
            "DB loaded from disk: {:.3} seconds ({} keys, {} bytes of arena, image taken {})",
            start.elapsed().as_secs_f64(),
            srv.ks.total_keys(),
            header.arena_bytes,
            super::mode_name(header.mode)
        );
        Ok(srv)
    }

    /// The executor's check between commands (see `PauseGate`).
    #[inline]
    pub fn snapshot_checkpoint(&self) {
        self.snapshot
            .gate
            .checkpoint(self.dirty, || self.ks.total_keys());
    }
    /// The executor is about to wait for I/O.
    pub fn snapshot_idle_begin(&self) {
        self.snapshot
            .gate
            .idle_begin(self.dirty, || self.ks.total_keys());
    }
    /// The executor is back from waiting for I/O.
    pub fn snapshot_idle_end(&self) {
        self.snapshot
            .gate
            .idle_end(self.dirty, || self.ks.total_keys());
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
        if self.snapshot.in_progress() {
            return Err("Background save already in progress".into());
        }
        let p = params(self);
        let keys = self.ks.total_keys();
        match super::save_blocking(&self.ks.arena, keys, &p) {
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

    /// BGSAVE: starts the snapshot thread (O(1) here).
    pub fn bgsave_start(&mut self) -> Result<(), String> {
        if self.snapshot.in_progress() {
            return Err("Background save already in progress".into());
        }
        self.snapshot.stats.last_bgsave_try_ms = now_ms();
        let p = params(self);
        // Freed large blocks must keep their pages while tracking is armed (see Arena).
        self.ks.arena.set_keep_pages(true);
        match BgJob::start(&self.ks.arena, p, self.snapshot.gate.clone()) {
            Ok(job) => {
                notice!("Background saving started");
                self.snapshot.job = Some(job);
                Ok(())
            }
            Err(e) => {
                self.ks.arena.set_keep_pages(false);
                self.snapshot.stats.last_bgsave_ok = false;
                warning!("Can't start the snapshot thread: {e}");
                Err(e.to_string())
            }
        }
    }

    /// Collects a finished background snapshot (cron).
    pub fn bgsave_collect(&mut self) {
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
        self.bgsave_collect();
        if self.snapshot.in_progress() {
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
    pub fn shutdown_save(&mut self, req: crate::server::ShutdownRequest) -> Result<(), String> {
        use crate::server::ShutdownRequest::*;
        if let Some(job) = self.snapshot.job.take() {
            warning!("There is a background snapshot in progress: stopping it");
            job.cancel();
            self.ks.arena.set_keep_pages(false);
        }
        let save = match req {
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
