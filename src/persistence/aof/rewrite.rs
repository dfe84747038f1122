//! BGREWRITEAOF without fork: the new base is a snapshot of the arena taken by the
//! snapshot engine (`src/persistence/snapshot`), so nothing proportional to the dataset
//! runs on the executor. This module holds the rewrite's state and the base conversion;
//! the executor drives the steps below from `src/commands/executor/aof_rewrite.rs`.
//!
//! 1. **Start** (executor, O(1)): a background snapshot is started into
//!    `<prefix>.<seq>.base.cimg` with a cut hook, and the writer prepares the next
//!    incremental file ([`Job::Prepare`]: created, pre-allocation begun, manifest
//!    "old base + old incrementals + new incremental" committed, as Redis 7 lists a new
//!    incremental file at a rewrite's start; nothing is written into it yet).
//! 2. **Cut** (snapshot thread, executor stopped at a command boundary): the executor queued
//!    every framed entry to the writer before stopping and published the log's last LSN N
//!    (`PauseGate::aof_lsn_at_park`). The hook queues [`Job::Rotate`]: entries ≤ N are
//!    ahead of it in the queue (old incremental file), entries > N behind it (new file).
//!    The writer syncs the old file and switches to the prepared one.
//! 3. **Image done**: with `aof-use-rdb-preamble yes` (Redis's default; cairn's is `no`) a converter thread
//!    loads the image into a private arena and streams it as an RDB
//!    `<prefix>.<seq>.base.rdb` (AUX `cairn-aof-lsn` = N, `repl-id`, `repl-offset`), then
//!    deletes the image; with `no` the image itself is the base (its header carries N).
//! 4. **Commit** ([`Job::Commit`], writer thread): manifest "new base + new incremental";
//!    the old base and incrementals are deleted (or the last incremental kept as the
//!    `aof-recycle` spare).
//!
//! Failure anywhere leaves a loadable directory: from step 1 the manifest lists the new
//! file after the old ones, and every acknowledged entry is in one of them (the loader
//! takes a torn or recycled tail of the second-to-last file as its end when the next file
//! continues the LSNs or is empty). Without a cut the log moves to the prepared file when
//! the rewrite fails or is cancelled; after it, the old base stays with every incremental
//! listed ([`Job::EndRewrite`] cuts the retired file back to its log). The next rewrite
//! retires them all. A crash before step 4's rename leaves the previous manifest in force;
//! an unlisted new base is just an unused file.

use super::manifest::{FileInfo, Layout};
use super::writer::{JobStatus, Manifest};
use crate::persistence::snapshot::{BgJob, Outcome};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The new base's form (`aof-use-rdb-preamble`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BaseKind {
    /// An RDB file Redis 7 loads too (`<prefix>.<seq>.base.rdb`).
    Rdb,
    /// The snapshot image itself (`<prefix>.<seq>.base.cimg`): restart maps it back like
    /// a normal image restart, no per-key parsing.
    Image,
}

/// What the cut hook (snapshot thread) tells the executor.
#[derive(Default)]
pub(crate) struct Cut {
    pub(crate) happened: AtomicBool,
    /// The log's last LSN at the cut (valid once `happened`).
    pub(crate) lsn: AtomicU64,
    /// Set at the cut, cleared by the executor when it resumes: the next entry goes to a
    /// new file and must say which db it is in.
    pub(crate) unseen_by_executor: AtomicBool,
    /// The writer's answer to the [`Job::Rotate`] the hook queued.
    pub(crate) rotate: Arc<JobStatus>,
}

pub(crate) enum Phase {
    Snapshot(BgJob),
    /// The image is complete: waiting for the writer to have switched files at its cut.
    AwaitSwitch,
    /// Writing the RDB base from the image (its own thread).
    Convert(JoinHandle<Result<u64, String>>),
    /// Waiting for the writer to commit the manifest.
    Commit(Arc<JobStatus>),
    /// The rewrite failed; waiting only to learn whether the log switched files.
    Failed(String),
}

pub struct Rewrite {
    pub started: Instant,
    pub(crate) base: FileInfo,
    pub(crate) kind: BaseKind,
    pub(crate) image_path: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) new_incr: FileInfo,
    /// The layout once the log has switched files at the cut.
    pub(crate) rotated: Layout,
    /// The manifest that lists `new_incr` (None for a log turned on at runtime).
    pub(crate) switch_manifest: Option<Manifest>,
    pub(crate) cut: Arc<Cut>,
    pub(crate) phase: Phase,
    pub(crate) keys: u64,
    /// Set once the image is complete.
    pub(crate) outcome: Option<Outcome>,
}

impl Rewrite {
    pub(crate) fn base_path(&self) -> PathBuf {
        self.dir.join(&self.base.name)
    }
}

impl super::Aof {
    /// The executor resumes after a snapshot stop: if that stop was a rewrite's cut, the
    /// next entry goes to the new incremental file and must start with its SELECT.
    pub fn after_stop(&mut self) {
        if let Some(rw) = &self.rewrite {
            if rw.cut.unseen_by_executor.swap(false, SeqCst) {
                self.selected_db = None;
            }
        }
    }
}

/// Writes the RDB base from the image at `image` (on the converter thread): loads it into
/// a private arena, streams the RDB to a temp file, syncs it and renames it to `out`.
/// Returns the base's size.
pub(crate) fn convert(
    image: &Path,
    out: &Path,
    aux: &[(&str, String)],
    reserve_bytes: usize,
    databases: usize,
    key_delay_us: u64,
    write_behind: bool,
) -> Result<u64, String> {
    crate::persistence::snapshot::lower_priority();
    let progress = crate::persistence::snapshot::format::LoadProgress::default();
    let (arena, header) =
        crate::persistence::snapshot::load_image(image, reserve_bytes, &progress)?
            .ok_or_else(|| format!("the image {} vanished", image.display()))?;
    let mut ks = crate::collections::keyspace_from_arena(arena, databases)?;
    // The replication stream's db at the cut, when the capture knew it: a replica
    // restarted from this base alone continues its primary's stream there.
    let mut aux = aux.to_vec();
    if let Some(db) = header.repl_stream_db.checked_sub(1) {
        aux.push(("repl-stream-db", db.to_string()));
    }
    let aux = aux.as_slice();
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = out.with_file_name(format!("temp-{}-{name}", std::process::id()));
    let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
    let written = (|| -> Result<u64, String> {
        let f = std::fs::File::create(&tmp).map_err(io)?;
        let mut f = crate::persistence::write_behind::WriteBehind::new(f, 0, write_behind);
        crate::persistence::rdb_file::write_rdb_with_functions(
            &mut ks,
            &mut f,
            aux,
            &header.functions,
            key_delay_us,
        )?;
        let f = f.into_inner();
        f.sync_all().map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        std::fs::rename(&tmp, out).map_err(io)?;
        sync_dir(out)?;
        Ok(len)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

pub(crate) fn sync_dir(file: &Path) -> Result<(), String> {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::Arena;
    use crate::keyspace::{Keyspace, StrEnc, Ttl, BIG_VALUE_BYTES};
    use crate::persistence::aof::testing::temp_dir;
    use crate::persistence::rdb_file::{base_aof_lsn, load_rdb, AUX_AOF_LSN};
    use crate::persistence::snapshot::{save_blocking, SnapParams};

    #[test]
    fn sync_dir_uses_the_current_dir_for_a_bare_name() {
        assert!(sync_dir(Path::new("file-in-cwd")).is_ok());
        let e = sync_dir(Path::new("/nonexistent-cairn-dir/f")).unwrap_err();
        assert!(e.starts_with("/nonexistent-cairn-dir"), "{e}");
    }

    /// An image of a keyspace (small and out-of-line values, two databases, a TTL)
    /// becomes an RDB base that loads back to the same data with the log position in its
    /// aux fields; nothing is left behind but the two files. A missing image is an error
    /// that writes nothing.
    #[test]
    fn an_image_converts_to_an_rdb_base_with_its_log_position() {
        let dir = temp_dir("convert");
        let config = crate::config::Config::default();
        let s = config.settings();
        let mut ks = crate::collections::new_keyspace(Arena::new(256 << 20, [1, 2]).unwrap(), 16);
        let big: Vec<u8> = (0..BIG_VALUE_BYTES * 3)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        ks.set_string(0, b"s", b"v", StrEnc::for_value(b"v"), Ttl::Clear);
        ks.set_string(0, b"big", &big, StrEnc::for_value(&big), Ttl::Clear);
        ks.set_string(
            3,
            b"t",
            b"later",
            StrEnc::for_value(b"later"),
            Ttl::At(i64::MAX / 2),
        );
        let image = dir.join("p.2.base.cimg");
        let p = SnapParams {
            path: image.clone(),
            threads: s.snapshot_threads,
            pause_budget_us: s.snapshot_pause_budget_us,
            mode: s.snapshot_mode,
            repl_id: [b'0'; 40],
            repl_offset: 7,
            repl_stream_db: 0,
            databases: 16,
            on_cut: None,
            executor_cpu: None,
            wide_cpus: None,
            write_behind: false,
            functions: Default::default(),
            tier: None,
            follow: None,
            record_delay_us: 0,
            dirty_map: None,
            verify_dirty_map: false,
            capture: None,
            verify_cow: false,
        };
        save_blocking(&ks.arena, ks.total_keys(), &p).unwrap();
        let out = dir.join("p.2.base.rdb");
        let aux = vec![
            ("aof-base", "1".to_string()),
            (AUX_AOF_LSN, "42".to_string()),
            ("repl-offset", "7".to_string()),
        ];
        let (img, o, reserve) = (image.clone(), out.clone(), s.arena_reserve_bytes);
        // (convert lowers its thread's priority: give it its own.)
        let written = std::thread::spawn(move || convert(&img, &o, &aux, reserve, 16, 0, false))
            .join()
            .unwrap()
            .unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(written, bytes.len() as u64);
        assert_eq!(base_aof_lsn(&bytes), Some(42));
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["p.2.base.cimg", "p.2.base.rdb"],
            "no temp file left"
        );
        let mut back = crate::collections::new_keyspace(Arena::new(256 << 20, [3, 4]).unwrap(), 16);
        let st = load_rdb(&bytes, &mut back, &config, i64::MIN).unwrap();
        assert_eq!(st.keys_loaded, 3);
        assert_eq!(st.aof_lsn, Some(42));
        let value =
            |ks: &Keyspace, db: usize, k: &[u8]| ks.find_raw(db, k).map(|e| ks.value(e).to_vec());
        assert_eq!(value(&back, 0, b"s").as_deref(), Some(&b"v"[..]));
        assert_eq!(value(&back, 0, b"big"), Some(big));
        assert_eq!(value(&back, 3, b"t").as_deref(), Some(&b"later"[..]));
        let t = back.find_raw(3, b"t").unwrap();
        assert_eq!(back.expire_at(t), Some(i64::MAX / 2));
        // A missing image: an error, and no output or temp file.
        let (img, o) = (dir.join("missing.cimg"), dir.join("p.3.base.rdb"));
        let o2 = o.clone();
        let e = std::thread::spawn(move || convert(&img, &o2, &[], reserve, 16, 0, false))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(e.contains("missing.cimg"), "{e}");
        assert!(!o.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
