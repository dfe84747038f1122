//! The executor's side of BGREWRITEAOF: starting a rewrite, advancing it from the cron
//! (every step a poll, O(1) on the executor), cancelling it. The steps and the rewrite's
//! state are described in `src/persistence/aof/rewrite.rs`.

use super::Server;
use crate::persistence::aof::manifest::{FileInfo, Layout};
use crate::persistence::aof::rewrite::{convert, BaseKind, Cut, Phase, Rewrite};
use crate::persistence::aof::writer::{Job, JobStatus, Manifest};
use crate::persistence::snapshot::BgJob;
use crate::{notice, warning};
use std::path::PathBuf;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Instant;

enum Step {
    Phase(Phase),
    /// The rewrite ended (committed or failed) and was accounted for.
    Done,
}

/// Failed rewrites in a row before automatic rewrites back off.
pub const AUTO_REWRITE_FREE_FAILURES: u64 = 3;

impl Server {
    /// A background snapshot or AOF rewrite is running (Redis's hasActiveChildProcess):
    /// the engine takes one snapshot at a time.
    pub fn background_job_active(&self) -> bool {
        self.snapshot.in_progress() || self.aof.rewrite.is_some() || self.repl.capture_running()
    }
}

/// BGREWRITEAOF. Ok(true): started; Ok(false): scheduled behind a running BGSAVE (Redis's
/// "+Background append only file rewriting scheduled"). Err: Redis's error text.
pub fn request(srv: &mut Server) -> Result<bool, String> {
    if srv.aof.rewrite.is_some() {
        return Err("ERR Background append only file rewriting already in progress".into());
    }
    if !srv.aof.enabled || srv.aof.writer.is_none() {
        // Redis rewrites even with appendonly no (to a file it then leaves); cairn keeps
        // no log then, so there is nothing to compact.
        return Err("ERR Background AOF rewriting is not possible: appendonly is off".into());
    }
    if srv.snapshot.in_progress() {
        srv.aof.rewrite_scheduled = true;
        return Ok(false);
    }
    start(srv).map(|_| true).map_err(|e| {
        warning!("Can't rewrite the append only file in background: {e}");
        "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.".to_string()
    })
}

/// Starts a rewrite now (O(1) on the executor). Err: why not.
pub fn start(srv: &mut Server) -> Result<(), String> {
    if srv.background_job_active() {
        return Err("another background job is running".into());
    }
    if srv.aof.failed() {
        return Err("the AOF has a write error".into());
    }
    let (Some(layout), Some(w)) = (srv.aof.layout.as_ref(), srv.aof.writer.as_ref()) else {
        return Err("appendonly is off".into());
    };
    let s = srv.config.settings();
    let kind = if s.aof_use_rdb_preamble {
        BaseKind::Rdb
    } else {
        BaseKind::Image
    };
    let dir = PathBuf::from(&s.appenddirname);
    let seq = layout.next_base_seq();
    let base = FileInfo {
        name: match kind {
            BaseKind::Rdb => Layout::base_rdb_name(&layout.prefix, seq),
            BaseKind::Image => Layout::base_image_name(&layout.prefix, seq),
        },
        seq,
    };
    let image_path = dir.join(Layout::base_image_name(&layout.prefix, seq));
    let new_incr = FileInfo {
        name: Layout::incr_name(&layout.prefix, layout.next_incr_seq()),
        seq: layout.next_incr_seq(),
    };
    let mut rotated = layout.clone();
    rotated.incrs.push(new_incr.clone());
    // A log turned on at runtime has no valid manifest until its first rewrite commits:
    // the switch must not publish one.
    let manifest = srv.aof.layout_committed.then(|| Manifest {
        name: rotated.manifest_name(),
        text: rotated.render(),
    });
    let cut = Arc::new(Cut::default());
    let hook = {
        let (cut, shared, name) = (cut.clone(), w.shared.clone(), new_incr.name.clone());
        let manifest = manifest.clone();
        move |lsn: u64| {
            if cut.happened.swap(true, SeqCst) {
                return;
            }
            cut.lsn.store(lsn, SeqCst);
            cut.unseen_by_executor.store(true, SeqCst);
            shared.submit(Job::Rotate {
                new_incr: name.clone(),
                manifest: manifest.clone(),
                status: cut.rotate.clone(),
            });
        }
    };
    let mut p = super::snapshot_ops::params(srv);
    p.path = image_path.clone();
    p.on_cut = Some(Arc::new(hook));
    p.write_behind = s.aof_rewrite_incremental_fsync;
    // Freed large blocks must keep their pages while tracking is armed (see Arena).
    srv.ks.arena.set_keep_pages(true);
    let job = match BgJob::start(&srv.ks.arena, p, srv.snapshot.gate.clone()) {
        Ok(j) => j,
        Err(e) => {
            srv.ks.arena.set_keep_pages(false);
            return Err(format!("can't start the snapshot thread: {e}"));
        }
    };
    // The new incremental file is made ready (and listed, as Redis 7 lists it at a
    // rewrite's start) now, so the cut only switches to it (see `Job::Prepare`).
    w.submit(Job::Prepare {
        new_incr: new_incr.name.clone(),
        manifest: manifest.clone(),
        status: Arc::new(JobStatus::default()),
    });
    // With tiering the capture copies the tier pages of its cold entries into the
    // image's companion (as BGSAVE's does): no page is reused until that copy is done.
    // The cut is at a later command boundary of this thread, so this is before it.
    srv.tier_capture(true);
    notice!(
        "Background append only file rewriting started (base {})",
        base.name
    );
    srv.aof.rewrite = Some(Rewrite {
        switch_manifest: manifest,
        started: Instant::now(),
        base,
        kind,
        image_path,
        dir,
        new_incr,
        rotated,
        cut,
        phase: Phase::Snapshot(job),
        keys: 0,
        outcome: None,
    });
    srv.aof.rewrite_scheduled = false;
    Ok(())
}

/// Stops a running rewrite (SHUTDOWN, `appendonly no`): the snapshot is cancelled, a
/// converter thread is left to finish on its own (its output is never listed). The
/// manifest on disk stays valid whatever point was reached.
pub fn cancel(srv: &mut Server) {
    let Some(mut rw) = srv.aof.rewrite.take() else {
        return;
    };
    let phase = std::mem::replace(&mut rw.phase, Phase::Failed(String::new()));
    match phase {
        Phase::Snapshot(job) => {
            warning!("There is an AOF rewrite in progress: stopping it");
            job.cancel();
            srv.ks.arena.set_keep_pages(false);
            srv.tier_capture(false);
        }
        Phase::Commit(st) => {
            // The commit is queued: its outcome decides the layout (SHUTDOWN may fail
            // its save and leave the server running). The writer runs it shortly.
            let t = Instant::now();
            while st.outcome().is_none() && t.elapsed() < std::time::Duration::from_secs(10) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            if st.outcome() == Some(true) {
                succeeded(srv, &rw);
                return;
            }
        }
        _ => {}
    }
    // The manifest on disk lists the new file since the start: with no cut the log moves
    // there now, as when a rewrite fails; the layout names it either way (a later rewrite
    // must not pick its name again).
    rotate_without_cut(srv, &rw);
    srv.aof.layout = Some(rw.rotated.clone());
    end_without_commit(srv);
}

/// The rewrite ends with no cut (failed or cancelled before it): the log moves to the
/// file prepared at the start, which the manifest on disk already lists — any point is a
/// valid switch when no new base depends on it, and Redis 7 keeps the incremental file it
/// opened too.
fn rotate_without_cut(srv: &mut Server, rw: &Rewrite) {
    if rw.cut.happened.swap(true, SeqCst) {
        return;
    }
    // What the executor buffered goes to the old file, before the switch; the next entry
    // starts the new file with its SELECT.
    srv.aof.flush();
    srv.aof.selected_db = None;
    if let Some(w) = srv.aof.writer.as_ref() {
        w.submit(Job::Rotate {
            new_incr: rw.new_incr.name.clone(),
            manifest: rw.switch_manifest.clone(),
            status: rw.cut.rotate.clone(),
        });
    }
}

/// Tells the writer the rewrite ended without a commit (see `Job::EndRewrite`).
fn end_without_commit(srv: &mut Server) {
    if let Some(w) = srv.aof.writer.as_ref() {
        w.submit(Job::EndRewrite {
            status: Arc::new(JobStatus::default()),
        });
    }
}

/// Advances a running rewrite (cron): every step is a poll, O(1) on the executor.
fn advance(srv: &mut Server) {
    let Some(mut rw) = srv.aof.rewrite.take() else {
        return;
    };
    loop {
        let (next, progressed) = step(srv, &mut rw);
        rw.phase = match next {
            Step::Phase(p) => p,
            Step::Done => return,
        };
        if !progressed {
            break;
        }
    }
    srv.aof.rewrite = Some(rw);
}

/// One transition; `bool`: whether it moved (try the next at once).
fn step(srv: &mut Server, rw: &mut Rewrite) -> (Step, bool) {
    let phase = std::mem::replace(&mut rw.phase, Phase::Failed(String::new()));
    let next = match phase {
        Phase::Snapshot(job) if job.is_finished() => {
            let r = job.join();
            srv.ks.arena.set_keep_pages(false);
            // The image's companion holds the cut's tier pages: the base no longer
            // needs the live tier file.
            srv.tier_capture(false);
            match r {
                Ok(o) if rw.cut.happened.load(SeqCst) => {
                    rw.keys = o.keys;
                    rw.outcome = Some(o);
                    Phase::AwaitSwitch
                }
                Ok(_) => Phase::Failed("the snapshot had no cut".into()),
                Err(e) => Phase::Failed(format!("snapshot failed: {e}")),
            }
        }
        Phase::AwaitSwitch => match rw.cut.rotate.outcome() {
            None => return (Step::Phase(Phase::AwaitSwitch), false),
            Some(false) => Phase::Failed("the log could not switch files at the cut".into()),
            Some(true) => {
                srv.aof.layout = Some(rw.rotated.clone());
                after_image(srv, rw)
            }
        },
        Phase::Convert(h) if h.is_finished() => match h.join() {
            Ok(Ok(bytes)) => {
                let _ = std::fs::remove_file(&rw.image_path);
                crate::persistence::tiered::companion::remove_others(&rw.image_path, None);
                commit(srv, rw, bytes)
            }
            Ok(Err(e)) => Phase::Failed(format!("writing the RDB base: {e}")),
            Err(_) => Phase::Failed("the RDB base writer panicked".into()),
        },
        Phase::Commit(st) => match st.outcome() {
            None => return (Step::Phase(Phase::Commit(st)), false),
            Some(true) => {
                succeeded(srv, rw);
                return (Step::Done, true);
            }
            Some(false) => Phase::Failed("the manifest could not be committed".into()),
        },
        Phase::Failed(why) => {
            // The manifest on disk lists the new file since the start (`Job::Prepare`):
            // with no cut, the log moves there now (any point is a valid switch when no
            // base depends on it), as Redis 7 keeps the incremental file it opened.
            rotate_without_cut(srv, rw);
            // Entries after the cut went to the new file only if the switch succeeded:
            // the layout follows the writer, so wait for its answer.
            if rw.cut.happened.load(SeqCst) && srv.aof.writer.is_some() {
                match rw.cut.rotate.outcome() {
                    None => return (Step::Phase(Phase::Failed(why)), false),
                    Some(true) => srv.aof.layout = Some(rw.rotated.clone()),
                    Some(false) => {}
                }
            }
            failed(srv, rw, &why);
            return (Step::Done, true);
        }
        other => return (Step::Phase(other), false),
    };
    (Step::Phase(next), true)
}

/// The image is complete and durable and the log switched files at its cut: commit it as
/// the base, or start writing the RDB base from it.
fn after_image(srv: &mut Server, rw: &Rewrite) -> Phase {
    let cut_lsn = rw.cut.lsn.load(SeqCst);
    let Some(o) = &rw.outcome else {
        return Phase::Failed("no snapshot outcome".into());
    };
    if o.aof_lsn != cut_lsn {
        return Phase::Failed(format!(
            "the image's LSN {} is not the cut's {cut_lsn}",
            o.aof_lsn
        ));
    }
    match rw.kind {
        BaseKind::Image => {
            let bytes = std::fs::metadata(&rw.image_path).map_or(0, |m| m.len());
            commit(srv, rw, bytes)
        }
        BaseKind::Rdb => {
            let s = srv.config.settings();
            let (reserve, dbs) = (s.arena_reserve_bytes, s.databases);
            let write_behind = s.aof_rewrite_incremental_fsync;
            let key_delay_us = srv
                .config
                .get_value("rdb-key-save-delay")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0)
                .max(0) as u64;
            let aux = vec![
                ("aof-base", "1".to_string()),
                (
                    crate::persistence::rdb_file::AUX_AOF_LSN,
                    cut_lsn.to_string(),
                ),
                ("repl-id", srv.aof.replid.clone()),
                ("repl-offset", o.repl_offset.to_string()),
            ];
            let (image, out) = (rw.image_path.clone(), rw.base_path());
            let spawned = std::thread::Builder::new()
                .name("cairn-aof-base".into())
                .spawn(move || {
                    convert(&image, &out, &aux, reserve, dbs, key_delay_us, write_behind)
                });
            match spawned {
                Ok(h) => Phase::Convert(h),
                Err(e) => Phase::Failed(format!("can't start the RDB base writer: {e}")),
            }
        }
    }
}

/// Queues the manifest commit: new base + the incremental file opened at the cut; every
/// other file of the switched layout becomes obsolete (incrementals last, newest last:
/// the writer keeps that one as the `aof-recycle` spare).
fn commit(srv: &mut Server, rw: &Rewrite, base_bytes: u64) -> Phase {
    let Some(w) = srv.aof.writer.as_ref() else {
        return Phase::Failed("the log was closed".into());
    };
    let new_layout = Layout {
        prefix: rw.rotated.prefix.clone(),
        base: Some(rw.base.clone()),
        history: vec![],
        incrs: vec![rw.new_incr.clone()],
    };
    let mut obsolete: Vec<String> = rw.rotated.history.iter().map(|f| f.name.clone()).collect();
    obsolete.extend(rw.rotated.base.iter().map(|f| f.name.clone()));
    // An image base's tier companions go with it (never listed in a manifest).
    let retired = rw.rotated.history.iter().chain(rw.rotated.base.iter());
    for f in retired {
        obsolete.extend(crate::persistence::tiered::companion::names_for(
            &rw.dir.join(&f.name),
        ));
    }
    obsolete.extend(
        rw.rotated
            .incrs
            .iter()
            .filter(|f| f.name != rw.new_incr.name)
            .map(|f| f.name.clone()),
    );
    let status = Arc::new(JobStatus::default());
    w.submit(Job::Commit {
        manifest: Manifest {
            name: new_layout.manifest_name(),
            text: new_layout.render(),
        },
        obsolete,
        base_bytes,
        status: status.clone(),
    });
    Phase::Commit(status)
}

fn succeeded(srv: &mut Server, rw: &Rewrite) {
    srv.aof.layout = Some(Layout {
        prefix: rw.rotated.prefix.clone(),
        base: Some(rw.base.clone()),
        history: vec![],
        incrs: vec![rw.new_incr.clone()],
    });
    srv.aof.layout_committed = true;
    // A replica's log after a full sync: the new base holds the synced dataset, so the
    // entries from here on may carry the primary's id again (see repl_install_full_sync).
    srv.aof.fsync_awaits_base = false;
    if srv.aof.replid == super::replication::NO_REPLID {
        srv.aof.replid = srv.master_replid.clone();
        if srv.is_replica_of_someone() {
            let db = srv.repl.applied_db;
            srv.aof.log_position(db);
        }
    }
    srv.aof.rewrites += 1;
    srv.aof.rewrites_consecutive_failures = 0;
    srv.aof.last_rewrite_ok = true;
    srv.aof.last_rewrite_time_s = rw.started.elapsed().as_secs() as i64;
    srv.aof.last_rewrite_end = Some(Instant::now());
    let arena_bytes = srv.ks.arena.used_bytes();
    srv.aof
        .reset_growth_basis(rw.kind == BaseKind::Image, arena_bytes);
    notice!(
        "Background AOF rewrite finished successfully (base {}, {} keys, cut at LSN {})",
        rw.base.name,
        rw.keys,
        rw.cut.lsn.load(SeqCst)
    );
}

fn failed(srv: &mut Server, rw: &Rewrite, why: &str) {
    end_without_commit(srv);
    // Unlisted leftovers of this rewrite (never named by a manifest).
    let _ = std::fs::remove_file(&rw.image_path);
    crate::persistence::tiered::companion::remove_others(&rw.image_path, None);
    if rw.kind == BaseKind::Rdb {
        let _ = std::fs::remove_file(rw.base_path());
    }
    srv.aof.last_rewrite_ok = false;
    srv.aof.rewrites_consecutive_failures += 1;
    srv.aof.last_rewrite_time_s = rw.started.elapsed().as_secs() as i64;
    srv.aof.last_rewrite_end = Some(Instant::now());
    warning!("Background AOF rewrite failed: {why}");
}

/// Called from cron: advances a running rewrite; starts a scheduled one once no other
/// background job runs; starts an automatic rewrite when the log grew past
/// `auto-aof-rewrite-percentage` of its size after the last rewrite (and over
/// `auto-aof-rewrite-min-size`), as Redis — an image base counted at the size of the
/// dataset it holds (`Aof::base_logical_extra`).
pub fn cron(srv: &mut Server) {
    if srv.aof.rewrite.is_some() {
        advance(srv);
        return;
    }
    if !srv.aof.enabled || srv.background_job_active() {
        return;
    }
    if srv.aof.rewrite_scheduled {
        if let Err(e) = start(srv) {
            warning!("Can't start the scheduled AOF rewrite: {e}");
            srv.aof.rewrite_scheduled = false;
        }
        return;
    }
    let s = srv.config.settings();
    let (pct, min) = (s.auto_aof_rewrite_percentage, s.auto_aof_rewrite_min_size);
    let size = srv.aof.growth_size();
    if pct > 0 && srv.aof.current_size() > min && !auto_rewrite_backing_off(srv) {
        let base = srv.aof.rewrite_base_size.max(1);
        let growth = (size.saturating_sub(base)) * 100 / base;
        if growth >= pct {
            notice!("Starting automatic rewriting of AOF on {growth}% growth");
            if let Err(e) = start(srv) {
                warning!("Can't start the automatic AOF rewrite: {e}");
                srv.aof.rewrites_consecutive_failures += 1;
                srv.aof.last_rewrite_end = Some(Instant::now());
            }
        }
    }
}

/// After [`AUTO_REWRITE_FREE_FAILURES`] failures in a row, automatic rewrites wait a minute,
/// doubling per further failure up to an hour (Redis's aofRewriteLimited), so a full or
/// read-only disk does not get a snapshot every cron tick.
fn auto_rewrite_backing_off(srv: &Server) -> bool {
    let failures = srv.aof.rewrites_consecutive_failures;
    if failures < AUTO_REWRITE_FREE_FAILURES {
        return false;
    }
    let shift = (failures - AUTO_REWRITE_FREE_FAILURES).min(6) as u32;
    let delay_s = (60u64 << shift).min(3600);
    srv.aof
        .last_rewrite_end
        .is_some_and(|t| t.elapsed().as_secs() < delay_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::persistence::aof::rewrite::*;
    use crate::persistence::snapshot::format::CutMode;
    use crate::persistence::snapshot::Outcome;
    #[allow(unused_imports)]
    use std::path::Path;
    #[allow(unused_imports)]
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::Duration;

    fn server() -> Server {
        Server::new(Config::default()).unwrap()
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-rewrite-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn ago(secs: u64) -> Option<Instant> {
        Instant::now().checked_sub(Duration::from_secs(secs))
    }

    fn old_layout() -> Layout {
        Layout {
            prefix: "p".into(),
            base: Some(FileInfo {
                name: Layout::base_name("p", 1),
                seq: 1,
            }),
            history: vec![],
            incrs: vec![FileInfo {
                name: Layout::incr_name("p", 1),
                seq: 1,
            }],
        }
    }

    /// A rewrite of `old_layout()` into `dir` at `phase` (as `start` would set it up,
    /// without a snapshot thread or a writer).
    fn rewrite(dir: &Path, kind: BaseKind, phase: Phase) -> Rewrite {
        let layout = old_layout();
        let seq = layout.next_base_seq();
        let new_incr = FileInfo {
            name: Layout::incr_name("p", layout.next_incr_seq()),
            seq: layout.next_incr_seq(),
        };
        let mut rotated = layout.clone();
        rotated.incrs.push(new_incr.clone());
        Rewrite {
            started: Instant::now(),
            base: FileInfo {
                name: match kind {
                    BaseKind::Rdb => Layout::base_rdb_name("p", seq),
                    BaseKind::Image => Layout::base_image_name("p", seq),
                },
                seq,
            },
            kind,
            image_path: dir.join(Layout::base_image_name("p", seq)),
            dir: dir.to_path_buf(),
            new_incr,
            rotated,
            switch_manifest: None,
            cut: Arc::new(Cut::default()),
            phase,
            keys: 0,
            outcome: None,
        }
    }

    fn failure(p: Phase) -> String {
        match p {
            Phase::Failed(why) => why,
            _ => panic!("the rewrite did not fail"),
        }
    }

    #[test]
    fn automatic_rewrites_back_off_after_three_failures_doubling_to_an_hour() {
        let mut srv = server();
        let mut backing_off = |failures: u64, end: Option<Instant>| {
            srv.aof.rewrites_consecutive_failures = failures;
            srv.aof.last_rewrite_end = end;
            auto_rewrite_backing_off(&srv)
        };
        assert!(!backing_off(0, ago(0)));
        assert!(!backing_off(2, ago(0)));
        assert!(!backing_off(3, None), "no failed rewrite ended yet");
        // 3 failures: a minute.
        assert!(backing_off(3, ago(0)));
        assert!(backing_off(3, ago(50)));
        assert!(!backing_off(3, ago(61)));
        // 4: two minutes; 8: 32 minutes.
        assert!(backing_off(4, ago(61)));
        assert!(!backing_off(4, ago(121)));
        assert!(backing_off(8, ago(1900)));
        assert!(!backing_off(8, ago(1921)));
        // From 9 on: at most an hour.
        if let Some(t) = ago(3601) {
            assert!(!backing_off(9, Some(t)));
            assert!(!backing_off(1000, Some(t)));
        }
        assert!(backing_off(1000, ago(3500)));
    }

    #[test]
    fn rewrite_requests_need_a_running_log() {
        let mut srv = server();
        let off = "ERR Background AOF rewriting is not possible: appendonly is off";
        assert_eq!(request(&mut srv), Err(off.to_string()));
        srv.aof.enabled = true;
        assert_eq!(request(&mut srv), Err(off.to_string()), "no writer");
        assert_eq!(start(&mut srv), Err("appendonly is off".to_string()));
        assert!(!srv.background_job_active());
    }

    #[test]
    fn a_scheduled_rewrite_that_cannot_start_is_dropped_without_counting_a_failure() {
        let mut srv = server();
        srv.aof.rewrite_scheduled = true;
        // Log off: cron leaves it alone.
        cron(&mut srv);
        assert!(srv.aof.rewrite_scheduled);
        srv.aof.enabled = true;
        cron(&mut srv);
        assert!(!srv.aof.rewrite_scheduled);
        assert!(srv.aof.rewrite.is_none());
        assert_eq!(srv.aof.rewrites_consecutive_failures, 0);
        assert!(srv.aof.last_rewrite_end.is_none());
    }

    #[test]
    fn a_failed_rewrite_removes_only_its_own_files_and_counts_the_failure() {
        for kind in [BaseKind::Rdb, BaseKind::Image] {
            let dir = temp_dir(&format!("failed-{kind:?}"));
            let rw = rewrite(&dir, kind, Phase::Failed("boom".into()));
            let cut = rw.cut.clone();
            let (image, base) = (rw.image_path.clone(), rw.base_path());
            let old_base = dir.join(Layout::base_name("p", 1));
            for f in [&image, &base, &old_base] {
                std::fs::write(f, b"x").unwrap();
            }
            let mut srv = server();
            srv.aof.enabled = true;
            srv.aof.layout = Some(old_layout());
            srv.aof.selected_db = Some(3);
            srv.aof.rewrite = Some(rw);
            cron(&mut srv);
            assert!(srv.aof.rewrite.is_none(), "{kind:?}");
            assert!(
                !image.exists() && !base.exists(),
                "{kind:?}: leftovers stay"
            );
            assert!(old_base.exists(), "{kind:?}: a listed file was removed");
            assert!(!srv.aof.last_rewrite_ok);
            assert_eq!(srv.aof.rewrites_consecutive_failures, 1);
            assert!(srv.aof.last_rewrite_end.is_some());
            // No cut: the log moves to the prepared file (here: nobody writes) and the
            // next entry must say its db.
            assert!(cut.happened.load(SeqCst));
            assert_eq!(srv.aof.selected_db, None);
            assert_eq!(
                srv.aof.layout,
                Some(old_layout()),
                "no writer switched files"
            );
        }
    }

    #[test]
    fn cancel_keeps_the_layout_that_lists_the_prepared_file() {
        let dir = temp_dir("cancel");
        let mut srv = server();
        srv.aof.layout = Some(old_layout());
        srv.aof.rewrite = Some(rewrite(&dir, BaseKind::Image, Phase::AwaitSwitch));
        cancel(&mut srv);
        assert!(srv.aof.rewrite.is_none());
        let l = srv.aof.layout.clone().unwrap();
        assert_eq!(
            l.incrs.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["p.1.incr.aof", "p.2.incr.aof"]
        );
        // A later rewrite never picks that name again.
        assert_eq!(l.next_incr_seq(), 3);
        // Cancelling is not a failure.
        assert_eq!(srv.aof.rewrites_consecutive_failures, 0);
        cancel(&mut srv); // nothing running: nothing happens
        assert_eq!(srv.aof.layout, Some(l));
    }

    #[test]
    fn a_rewrite_waits_for_the_writers_answer_at_the_switch() {
        let dir = temp_dir("await");
        let mut srv = server();
        srv.aof.enabled = true;
        srv.aof.rewrite = Some(rewrite(&dir, BaseKind::Image, Phase::AwaitSwitch));
        cron(&mut srv);
        cron(&mut srv);
        let rw = srv.aof.rewrite.as_ref().expect("still running");
        assert!(matches!(rw.phase, Phase::AwaitSwitch));
        assert_eq!(srv.aof.rewrites_consecutive_failures, 0);
    }

    #[test]
    fn after_stop_resets_the_selected_db_once_per_cut() {
        let dir = temp_dir("after-stop");
        let mut srv = server();
        srv.aof.selected_db = Some(2);
        srv.aof.after_stop();
        assert_eq!(srv.aof.selected_db, Some(2), "no rewrite: no switch");
        let rw = rewrite(&dir, BaseKind::Image, Phase::AwaitSwitch);
        rw.cut.unseen_by_executor.store(true, SeqCst);
        srv.aof.rewrite = Some(rw);
        srv.aof.after_stop();
        assert_eq!(srv.aof.selected_db, None);
        srv.aof.selected_db = Some(2);
        srv.aof.after_stop();
        assert_eq!(srv.aof.selected_db, Some(2), "the same cut seen twice");
    }

    fn outcome(aof_lsn: u64) -> Outcome {
        Outcome {
            mode: CutMode::StopTheWorld,
            dirty_at_cut: 0,
            keys: 0,
            repl_offset: 0,
            aof_lsn,
            bytes_written: 0,
            passes: 1,
            pause_us: 0,
            extra_bytes: 0,
            fallback_reason: None,
        }
    }

    #[test]
    fn the_image_must_stand_for_the_cut_lsn_and_commit_needs_the_writer() {
        let dir = temp_dir("after-image");
        let mut srv = server();
        let mut rw = rewrite(&dir, BaseKind::Image, Phase::AwaitSwitch);
        assert_eq!(failure(after_image(&mut srv, &rw)), "no snapshot outcome");
        rw.cut.lsn.store(9, SeqCst);
        rw.outcome = Some(outcome(8));
        assert_eq!(
            failure(after_image(&mut srv, &rw)),
            "the image's LSN 8 is not the cut's 9"
        );
        rw.outcome = Some(outcome(9));
        assert_eq!(failure(after_image(&mut srv, &rw)), "the log was closed");
        assert_eq!(failure(commit(&mut srv, &rw, 0)), "the log was closed");
    }
}
