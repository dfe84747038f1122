//! The writer thread's part of BGREWRITEAOF (`Job::Prepare`, `Job::Rotate`,
//! `Job::EndRewrite`, `Job::Commit`): making the next incremental file ready, switching
//! the log to it at the cut, and retiring (or recycling) the old files once the new base
//! is committed. The executor's part is `commands/executor/aof_rewrite.rs`; the rewrite's state and
//! the base conversion are `aof/rewrite.rs`.
//!
//! Must not touch: the log's appends and syncs (`write_batch`, `sync`), the lease.

use super::spare_name_for;
use super::{start_prealloc, strerror, Job, LogFile, Manifest, Prealloc, Thread};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Pre-allocation of a prepared file: its first chunk (the log reaches the rest later).
const FIRST_CHUNK_BYTES: u64 = 8 << 20;

/// A file a rotation retired: it keeps what followed its log (filler, a recycled file's
/// old bytes) until the rewrite commits (and deletes it) or ends without a commit
/// (`Job::EndRewrite` cuts it back). Its pre-allocation helper was told to stop and is
/// joined when this is dropped — before the file is cut, renamed or deleted — so a
/// rotation never waits for it.
pub(super) struct Retired {
    pub(super) file: Box<dyn LogFile>,
    pub(super) log_end: u64,
    pub(super) prealloc: Option<Prealloc>,
}

/// A prepared incremental file (see [`Job::Prepare`]).
pub(super) struct NextFile {
    pub(super) name: String,
    pub(super) file: Box<dyn LogFile>,
    pub(super) prealloc: Option<Prealloc>,
    pub(super) recycled: bool,
}

impl Thread {
    pub(super) fn control(&mut self, job: Job) {
        match job {
            Job::Append { .. } | Job::AppendRefs { .. } => {}
            Job::Prepare {
                new_incr,
                manifest,
                status,
            } => {
                let t = Instant::now();
                let ok = self.prepare(&new_incr, manifest.as_ref());
                status.set(ok);
                crate::verbose!(
                    "AOF: {new_incr} prepared in {} us (ok: {ok})",
                    t.elapsed().as_micros()
                );
            }
            Job::Rotate {
                new_incr,
                manifest,
                status,
            } => {
                let t = Instant::now();
                let ok = self.rotate(&new_incr, manifest);
                status.set(ok);
                crate::verbose!(
                    "AOF: switched to {new_incr} in {} us (ok: {ok})",
                    t.elapsed().as_micros()
                );
            }
            Job::EndRewrite { status } => {
                self.end_rewrite();
                status.set(true);
            }
            Job::Commit {
                manifest,
                obsolete,
                base_bytes,
                status,
            } => {
                let t = Instant::now();
                let ok = self.commit(manifest, obsolete, base_bytes);
                status.set(ok);
                crate::verbose!(
                    "AOF: rewrite committed in {} us (ok: {ok})",
                    t.elapsed().as_micros()
                );
            }
        }
    }

    /// Creates `name` empty (or renames the `aof-recycle` spare into it) and commits
    /// `manifest` (which lists it) when given. The current file stays the log until the
    /// manifest naming the new one is on disk, so a crash at any point leaves a loadable
    /// set.
    pub(super) fn create_next(
        &mut self,
        name: &str,
        manifest: Option<&Manifest>,
    ) -> std::io::Result<(Box<dyn LogFile>, bool)> {
        if self.incr_name.as_deref() == Some(name) {
            // A layout that missed a switch would name the live file: never truncate it.
            crate::warning!("Can't prepare {name}: it is the AOF's current incremental file");
            return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
        }
        let spare = self.opts.recycle.then(|| self.spare_name()).flatten();
        let mut recycled = false;
        let step = (|| -> std::io::Result<Box<dyn LogFile>> {
            let f = match spare.as_deref().map(|s| self.dir.recycle(s, name)) {
                Some(Ok(f)) => {
                    recycled = true;
                    f
                }
                _ => {
                    let mut f = self.dir.open_append(name)?;
                    f.set_len(0)?;
                    f.sync_data()?;
                    f
                }
            };
            if let Some(m) = manifest {
                self.dir.write_atomic(&m.name, &m.text)?;
            }
            Ok(f)
        })();
        match step {
            Ok(f) => Ok((f, recycled)),
            Err(e) => {
                crate::warning!(
                    "Can't switch the AOF to the new incremental file {name}: {}",
                    strerror(&e)
                );
                let _ = self.dir.remove(name);
                Err(e)
            }
        }
    }

    /// See [`Job::Prepare`].
    pub(super) fn prepare(&mut self, new_incr: &str, manifest: Option<&Manifest>) -> bool {
        if self.shared.failed.load(Ordering::SeqCst) {
            return false;
        }
        self.discard_next();
        let Ok((mut file, recycled)) = self.create_next(new_incr, manifest) else {
            return false;
        };
        // Only the first chunk now: the rest once the log is there (a rewrite's image is
        // being written meanwhile, and megabytes of filler would compete with it).
        // Pre-allocation goes with the io_uring engine on a real directory, as in
        // `setup_file`.
        let ahead = self.opts.preallocate_bytes;
        let prealloc = (ahead > 0 && self.engine.is_some() && self.dir.path_of(new_incr).is_some())
            .then(|| start_prealloc(file.as_mut(), ahead.min(FIRST_CHUNK_BYTES), ahead))
            .flatten();
        // Frozen until the rewrite commits: filler that extends the file changes its size,
        // and a log fdatasync issued meanwhile must then commit the filesystem journal,
        // which between the cut and the commit holds the image's and the retired files'
        // metadata.
        if let Some(p) = &prealloc {
            p.freeze();
        }
        if let Some(p) = &self.prealloc {
            p.freeze();
        }
        self.next = Some(NextFile {
            name: new_incr.to_string(),
            file,
            prealloc,
            recycled,
        });
        true
    }

    /// Drops a prepared file that no rotation took (shutdown, or a newer preparation): it
    /// may be listed by the manifest on disk, so it is cut to an empty log, not deleted.
    pub(super) fn discard_next(&mut self) {
        if let Some(mut n) = self.next.take() {
            n.prealloc = None;
            if !n.recycled {
                let _ = n.file.set_len(0).and_then(|_| n.file.sync_data());
            }
        }
    }

    /// See [`Job::EndRewrite`].
    pub(super) fn end_rewrite(&mut self) {
        if let Some(p) = &self.prealloc {
            p.unfreeze();
        }
        if let Some(Retired {
            mut file,
            log_end,
            prealloc,
        }) = self.retired.take()
        {
            drop(prealloc); // joins the helper before the cut
            if !self.shared.failed.load(Ordering::SeqCst)
                && file.file_len().is_ok_and(|l| l > log_end)
            {
                let _ = file.set_len(log_end).and_then(|_| file.sync_data());
            }
        }
    }

    /// See [`Job::Rotate`].
    pub(super) fn rotate(&mut self, new_incr: &str, manifest: Option<Manifest>) -> bool {
        if self.shared.failed.load(Ordering::SeqCst) {
            return false;
        }
        // Everything in the current file must be durable before the log moves on: the
        // replies it holds wait for it, and it stays part of the log (the new base is not
        // there yet).
        let written = self.shared.written_lsn.load(Ordering::SeqCst);
        if written > self.synced_lsn {
            self.sync(written);
            if self.shared.failed.load(Ordering::SeqCst) {
                return false;
            }
        }
        if let Some(n) = self.next.take_if(|n| n.name == new_incr) {
            // Prepared at the rewrite's start (manifest already committed). The old file
            // keeps its filler past the log: it is deleted (or recycled) when the rewrite
            // commits, and while it stays listed its `#FILL` lines load as the end of its
            // log here and as annotations in Redis 7. Its helper is not waited for.
            self.direct = None;
            let prealloc = self.prealloc.take();
            if let Some(p) = &prealloc {
                p.stop_nowait();
            }
            self.retired = Some(Retired {
                file: std::mem::replace(&mut self.incr, n.file),
                log_end: self.incr_off,
                prealloc,
            });
            self.switch_to(n.name, None, n.recycled, n.prealloc);
            return true;
        }
        self.discard_next();
        match self.create_next(new_incr, manifest.as_ref()) {
            Ok((f, recycled)) => {
                // The old file's filler past the log is cut off (Redis 7 reads it as part
                // of the log while it is listed).
                self.close_file();
                self.switch_to(new_incr.to_string(), Some(f), recycled, None);
                true
            }
            Err(_) => false,
        }
    }

    /// Makes `file` (None: already in `self.incr`) the log's current incremental file
    /// (empty, or a recycled one).
    pub(super) fn switch_to(
        &mut self,
        name: String,
        file: Option<Box<dyn LogFile>>,
        recycled: bool,
        prealloc: Option<Prealloc>,
    ) {
        if recycled {
            self.shared.recycled.fetch_add(1, Ordering::Relaxed);
        }
        self.incr_recycled = recycled;
        if let Some(f) = file {
            self.incr = f;
        }
        self.incr_name = Some(name);
        self.incr_off = 0;
        self.shared.incr_bytes.store(0, Ordering::Relaxed);
        self.setup_file(prealloc);
    }

    /// The recycled-file name: `<current incremental file>` with its sequence part
    /// replaced by `spare` (`appendonly.aof.spare.aof`), or None without a name.
    pub(super) fn spare_name(&self) -> Option<String> {
        self.incr_name.as_deref().map(spare_name_for)
    }

    /// See [`Job::Commit`].
    pub(super) fn commit(
        &mut self,
        manifest: Manifest,
        obsolete: Vec<String>,
        base_bytes: u64,
    ) -> bool {
        if self.shared.failed.load(Ordering::SeqCst) {
            return false;
        }
        if let Err(e) = self.dir.write_atomic(&manifest.name, &manifest.text) {
            crate::warning!("AOF rewrite could not be committed: {}", strerror(&e));
            return false;
        }
        self.shared.base_bytes.store(base_bytes, Ordering::Relaxed);
        // The retired file's helper is done before a file is renamed or deleted.
        self.retired = None;
        if let Some(p) = &self.prealloc {
            p.unfreeze();
        }
        let retired = obsolete.iter().rfind(|n| n.ends_with(".incr.aof"));
        let keep = retired.filter(|_| self.opts.recycle).and_then(|from| {
            let to = spare_name_for(from);
            // A leftover spare from an earlier rewrite is replaced by the newer one.
            let _ = self.dir.remove(&to);
            self.dir.recycle(from, &to).ok().map(|_| from.clone())
        });
        for name in obsolete {
            if Some(&name) != keep.as_ref() {
                let _ = self.dir.retire(&name);
            }
        }
        true
    }
}
