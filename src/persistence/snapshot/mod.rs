//! The snapshot engine (an in-process DollySave): SAVE, BGSAVE, restart from an image.
//!
//! **Live snapshot (BGSAVE).** A snapshot thread arms userfaultfd write-protect tracking
//! (WP_ASYNC) over the arena, `snapshot-threads` workers stream every arena page compressed
//! into the image while the executor keeps serving, then the pages written meanwhile are
//! harvested with PAGEMAP_SCAN (re-protected in the same walk) and re-sent, pass after pass
//! while the dirty set shrinks. Last, a pause at a command boundary: the snapshot thread
//! harvests the final dirty set and copies it raw into a buffer, then lets the executor go
//! and compresses the buffer afterwards. The image holds exactly the arena as it was at that
//! command boundary: every page is either unwritten since its last copy, or in the final
//! set. Nothing proportional to the dataset runs on the executor (it only sets a flag and
//! later collects the outcome); `fork()` is never used.
//!
//! **Freeze-free (`snapshot-mode sync`, and `auto` when the passes above do not converge
//! within `snapshot-pause-budget-us`):** synchronous write-protect faults copy a page out
//! before its first change after the cut; see [`sync`].
//!
//! **Copy-before-write (`snapshot-mode cow`, and `auto` where the passes above do not
//! converge, and a capture streamed to replicas):** freeze-free too, but the arena's own
//! write accessors copy a page out before its first change after the cut: no faults, no
//! protection, a pause of a flag flip; see [`cow`].
//!
//! **Stop-the-world** where userfaultfd is refused (or `snapshot-mode stop-the-world`, or
//! the environment variable `CAIRN_SNAPSHOT_NO_UFFD=1`) and the mode asked for one of its
//! variants (`async`, `sync`; `auto` takes copy-before-write there): the pause covers the
//! whole copy.
//! SAVE and SHUTDOWN block the executor by definition and use this path directly.
//!
//! **Restart.** The image's records are decompressed into a fresh region at their offsets,
//! the arena header is checked, and the keyspace handles are rebuilt from its roots
//! (`Keyspace::from_arena`): no per-key parsing.
//!
//! **Reading the arena.** Snapshot threads never load from the region themselves: every
//! copy out of it is made by the kernel through [`racy_copy::RegionView`] (the executor and
//! I/O threads may be writing those bytes meanwhile; see that module for why this is the
//! defined way to read them).
//!
//! File layout: [`format`] and `docs/formats/snapshot.md`.

pub mod cow;
mod direct;
pub mod format;
pub mod pause;
mod racy_copy;
mod raw_pool;
pub mod rdb_save;
pub mod sync;
pub mod uffd;

use crate::arena::{Arena, PAGE_BYTES};
use crate::{notice, warning};
use format::{CutMode, Extent, ImageHeader, ImageWriter, Record, CHUNK_BYTES, MAX_EXTENTS};
pub use pause::PauseGate;
use racy_copy::RegionView;
use raw_pool::{NewPages, RawPool};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Instant;

/// Live passes before the final pause, at most (each later pass is normally several times
/// shorter than the one before; past this the write rate is not converging). The late
/// ones are raw copies of a few ms each (see [`raw_pool`]).
pub const MAX_LIVE_PASSES: u32 = 12;
/// Assumed raw copy speed during the pause, bytes per µs (2 GB/s: what the kernel copies
/// of [`racy_copy`] reach for the pause's scattered pages; figures: BENCHMARKS.md,
/// "Reading the arena through the kernel"), used to turn
/// `snapshot-pause-budget-us` into a dirty-set size to converge to.
pub const PAUSE_COPY_BYTES_PER_US: u64 = 2000;
/// Threads of the final, read-only walk at normal priority. One: at normal priority a
/// second walker shares a CPU with the clients and two walk slower than one (figures:
/// BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "The final walk"). At
/// real-time priority (see `Realtime`) it is two.
const FINAL_WALK_THREADS: usize = 1;
/// Below this, the final copy runs on one thread (a second one costs its start-up).
pub(super) const PARALLEL_COPY_MIN_BYTES: usize = 1 << 20;
/// Environment switch that makes userfaultfd look refused (tests of the fallback path).
pub const ENV_NO_UFFD: &str = "CAIRN_SNAPSHOT_NO_UFFD";

#[derive(Debug, thiserror::Error)]
pub enum SnapError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("snapshot cancelled")]
    Cancelled,
}

/// What a finished snapshot reports to the executor.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub mode: CutMode,
    /// The executor's `dirty` counter at the cut.
    pub dirty_at_cut: u64,
    pub keys: u64,
    /// The replication offset at the cut (written in the header).
    pub repl_offset: u64,
    /// The AOF's last LSN at the cut (written in the header; 0 without a log).
    pub aof_lsn: u64,
    pub bytes_written: u64,
    pub passes: u32,
    pub pause_us: u64,
    /// Bytes held outside the arena for the final dirty set.
    pub extra_bytes: u64,
    /// Why userfaultfd was not used, when it was tried and refused.
    pub fallback_reason: Option<String>,
}

pub use crate::config::SnapMode;

/// Parameters of one snapshot.
#[derive(Clone)]
pub struct SnapParams {
    pub path: PathBuf,
    pub threads: usize,
    pub pause_budget_us: u64,
    pub mode: SnapMode,
    pub repl_id: [u8; 40],
    pub repl_offset: u64,
    /// The replication stream's db at `repl_offset`, plus 1 (0: unknown); SAVE and
    /// SHUTDOWN record it, a background snapshot takes the value published at its cut.
    pub repl_stream_db: u32,
    pub databases: u32,
    /// Called on the snapshot thread at the cut, while the executor is stopped, with the
    /// AOF's last LSN there (BGREWRITEAOF switches the log to a new file at that point).
    pub on_cut: Option<CutHook>,
    /// The CPU the executor is pinned to while the job runs (see [`OnCpu`]); live
    /// harvests run there.
    pub executor_cpu: Option<usize>,
    /// The snapshot thread's CPUs before it moved off the executor's (see
    /// [`OnCpu::away_from`]): the pause, where the executor's CPU is free, and the
    /// freeze-free variant's fault handler, which the executor waits on, run there.
    pub wide_cpus: Option<CpuSet>,
    /// Write the image back every few MiB as it is written (`rdb-save-incremental-fsync`,
    /// `aof-rewrite-incremental-fsync`; `persistence::write_behind`).
    pub write_behind: bool,
    /// The function libraries as the executor publishes them (RDB function records).
    pub functions: Functions,
    /// Tiering is on: the image's cold entries point into the tier file, whose pages go
    /// into a companion file written before the image is committed.
    pub tier: Option<TierCapture>,
    /// A reader streams the image while it is written (a cairn replica's full sync,
    /// [`format::Follow`]).
    pub follow: Option<Arc<format::Follow>>,
    /// A pause after each record written (µs): a replication capture under
    /// `rdb-key-save-delay`, for tests that need a slow capture.
    pub record_delay_us: u64,
    /// The arena's dirty map (set by [`BgJob::start`] while the executor has it armed):
    /// the harvests after the first walk only the regions it marked.
    pub dirty_map: Option<Arc<crate::arena::dirty::DirtyMap>>,
    /// `snapshot-verify-dirty-map`: the final pause also walks everything and fails the
    /// snapshot on a written page the map did not mark.
    pub verify_dirty_map: bool,
    /// The arena's copy-before-write capture (set by [`BgJob::start`] while the executor
    /// has it armed): `snapshot-mode cow` installs its cut there.
    pub capture: Option<Arc<crate::arena::cow::Capture>>,
    /// `snapshot-verify-cow`: a copy-before-write snapshot fails if a page was written
    /// after its cut without passing through the hook.
    pub verify_cow: bool,
}

/// Creates the image writer of `p`, followed by `p.follow`'s reader when there is one.
fn create_writer(p: &SnapParams) -> io::Result<ImageWriter> {
    let mut w = ImageWriter::create(&p.path, p.write_behind)?;
    if let Some(f) = &p.follow {
        w.follow(f.clone())?;
    }
    w.record_delay_us = p.record_delay_us;
    Ok(w)
}

/// What a snapshot needs to copy the tier file (see `persistence::tiered::companion`).
#[derive(Clone)]
pub struct TierCapture {
    pub file: PathBuf,
    /// The tier store's high-water page (read once the image is written: every record
    /// of the cut lies below it).
    pub high_water: Arc<std::sync::atomic::AtomicU32>,
    /// A pause after each 1 MiB copied (µs; `rdb-key-save-delay`, for tests that need
    /// a slow save).
    pub copy_delay_us: u64,
}

/// Writes the tier companion (when tiering is on), then the image's trailer and header,
/// and renames the image into place; older companions go after. The companion is synced
/// under its own name before the rename, so the image at the final name always has its
/// companion.
fn commit_image(
    w: ImageWriter,
    p: &SnapParams,
    mut h: ImageHeader,
    cancel: &AtomicBool,
) -> Result<u64, SnapError> {
    let Some(t) = &p.tier else {
        let bytes = w.commit(&h)?;
        crate::persistence::tiered::companion::remove_others(&p.path, None);
        return Ok(bytes);
    };
    let id = loop {
        let id = crate::util::Rng::from_time().next_u64();
        if id != 0 {
            break id;
        }
    };
    let pages = t.high_water.load(Ordering::Acquire);
    let cpath = crate::persistence::tiered::companion::path_for(&p.path, id);
    let copied = match crate::persistence::tiered::companion::write(
        &t.file,
        pages,
        &cpath,
        id,
        t.copy_delay_us,
        cancel,
    ) {
        Ok(n) => n,
        Err(_) if cancel.load(Ordering::SeqCst) => {
            w.abort();
            return Err(SnapError::Cancelled);
        }
        Err(e) => {
            w.abort();
            return Err(SnapError::Io(io::Error::new(
                e.kind(),
                format!("writing the tier companion {}: {e}", cpath.display()),
            )));
        }
    };
    h.companion_id = id;
    h.companion_pages = pages as u64;
    // A snapshot cancelled during the copy (FLUSHALL, SHUTDOWN) must not replace the
    // image.
    if cancel.load(Ordering::SeqCst) {
        w.abort();
        let _ = std::fs::remove_file(&cpath);
        return Err(SnapError::Cancelled);
    }
    match w.commit(&h) {
        Ok(bytes) => {
            crate::persistence::tiered::companion::remove_others(&p.path, Some(id));
            Ok(bytes + copied)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&cpath);
            Err(e.into())
        }
    }
}

/// The function libraries (RDB function records) as the executor last published them,
/// and the copy taken at the cut, when the executor is stopped, so the image holds the
/// libraries of the same instant as its arena.
#[derive(Clone, Default)]
pub struct Functions {
    pub live: Arc<std::sync::Mutex<Arc<Vec<u8>>>>,
    at_cut: Arc<std::sync::OnceLock<Arc<Vec<u8>>>>,
}

impl Functions {
    pub fn new(live: Arc<std::sync::Mutex<Arc<Vec<u8>>>>) -> Functions {
        Functions {
            live,
            at_cut: Arc::default(),
        }
    }
    fn current(&self) -> Arc<Vec<u8>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// At the cut (the executor stopped): fixes what the image carries.
    fn cut(&self) {
        let _ = self.at_cut.set(self.current());
    }
    /// The libraries for the header: those of the cut, else (a save on the executor
    /// itself) the current ones.
    fn for_image(&self) -> Vec<u8> {
        match self.at_cut.get() {
            Some(f) => f.as_ref().clone(),
            None => self.current().as_ref().clone(),
        }
    }
}

/// See [`SnapParams::on_cut`]. Must be quick: the executor is stopped while it runs.
pub type CutHook = Arc<dyn Fn(u64) + Send + Sync>;

/// At the cut, with the executor stopped: runs the cut hook, returns the AOF's LSN there.
pub(super) fn at_cut(p: &SnapParams, gate: &PauseGate) -> u64 {
    let lsn = gate.aof_lsn_at_park();
    p.functions.cut();
    if let Some(hook) = &p.on_cut {
        hook(lsn);
    }
    lsn
}

/// A unit of work for a compression worker: extents of the image, and where their bytes
/// are read from.
struct Job<'a> {
    extents: Vec<Extent>,
    from: Source<'a>,
}

/// Where a [`Job`]'s bytes are.
enum Source<'a> {
    /// In the region, at each extent's offset: copied by the kernel ([`racy_copy`]), since
    /// other threads may be writing them.
    Region,
    /// In copies of ours (the raw pool, the pause's overflow buffer), one slice per
    /// extent; nothing writes them while the jobs run.
    Copies(Vec<&'a [u8]>),
}

impl Job<'_> {
    fn raw_bytes(&self) -> usize {
        self.extents.iter().map(|e| e.len as usize).sum()
    }
}

/// Splits `[start, end)` of the region into whole-chunk jobs.
fn range_jobs(start: u64, end: u64, jobs: &mut Vec<Job<'_>>) {
    let mut off = start;
    while off < end {
        let len = (end - off).min(CHUNK_BYTES as u64);
        jobs.push(Job {
            extents: vec![Extent {
                offset: off,
                len: len as u32,
            }],
            from: Source::Region,
        });
        off += len;
    }
}

/// Packs runs of pages (arena offset, length, and where their bytes are) into jobs of at
/// most one chunk of raw bytes and [`MAX_EXTENTS`] extents. One packer makes jobs of one
/// kind: all from the region, or all from copies.
struct Packer<'a> {
    from_region: bool,
    jobs: Vec<Job<'a>>,
    cur: Job<'a>,
    cur_bytes: usize,
}

impl<'a> Packer<'a> {
    fn empty_job(from_region: bool) -> Job<'a> {
        Job {
            extents: Vec::new(),
            from: if from_region {
                Source::Region
            } else {
                Source::Copies(Vec::new())
            },
        }
    }
    /// Jobs whose bytes are read from the region.
    fn from_region() -> Packer<'a> {
        Packer {
            from_region: true,
            jobs: Vec::new(),
            cur: Packer::empty_job(true),
            cur_bytes: 0,
        }
    }
    /// Jobs whose bytes are in copies of ours.
    fn from_copies() -> Packer<'a> {
        Packer {
            from_region: false,
            cur: Packer::empty_job(false),
            ..Packer::from_region()
        }
    }
    /// The region's `[offset, offset + len)`.
    fn add_region(&mut self, offset: u64, len: u64) {
        debug_assert!(self.from_region);
        self.add(offset, len, None);
    }
    /// Bytes for `[offset, offset + bytes.len())` of the image, from a copy of ours.
    fn add_copy(&mut self, offset: u64, bytes: &'a [u8]) {
        debug_assert!(!self.from_region);
        self.add(offset, bytes.len() as u64, Some(bytes));
    }
    fn add(&mut self, mut offset: u64, mut len: u64, mut bytes: Option<&'a [u8]>) {
        while len > 0 {
            let room = (CHUNK_BYTES - self.cur_bytes) as u64;
            let take = len.min(room);
            self.cur.extents.push(Extent {
                offset,
                len: take as u32,
            });
            if let (Source::Copies(parts), Some(b)) = (&mut self.cur.from, bytes) {
                let (part, rest) = b.split_at(take as usize);
                parts.push(part);
                bytes = Some(rest);
            }
            self.cur_bytes += take as usize;
            offset += take;
            len -= take;
            if self.cur_bytes == CHUNK_BYTES || self.cur.extents.len() == MAX_EXTENTS {
                self.flush();
            }
        }
    }
    fn flush(&mut self) {
        if !self.cur.extents.is_empty() {
            let j = std::mem::replace(&mut self.cur, Packer::empty_job(self.from_region));
            self.jobs.push(j);
            self.cur_bytes = 0;
        }
    }
    fn finish(mut self) -> Vec<Job<'a>> {
        self.flush();
        self.jobs
    }
}

/// Nice value of the compression workers where they may share the executor's CPU (it is
/// not pinned for the job): the executor (and the sync variant's fault handler, whose
/// latency the executor waits on) win the CPU whenever they want it; the workers take what
/// is left, so a snapshot costs duration rather than client latency. Where the executor
/// is pinned and every snapshot thread kept off its CPU (`OnCpu::away_from`), the live
/// passes' workers run at nice 0 instead: there a nice value only hands their CPU to
/// other processes — on a busy 2-CPU machine the niced workers were runnable for a whole
/// pass and got ~2.5 % of a CPU each, and the passes fell behind the writes (BENCHMARKS.md,
/// "What bounds an 8M-key pass").
pub const WORKER_NICE: libc::c_int = 10;

/// Overrides the workers' nice value (0–19), for measuring what it costs a pass.
pub const ENV_WORKER_NICE: &str = "CAIRN_SNAPSHOT_WORKER_NICE";

fn nice_override() -> Option<libc::c_int> {
    static NICE: std::sync::OnceLock<Option<libc::c_int>> = std::sync::OnceLock::new();
    *NICE.get_or_init(|| {
        std::env::var(ENV_WORKER_NICE)
            .ok()
            .and_then(|v| v.parse::<libc::c_int>().ok())
            .filter(|n| (0..=19).contains(n))
    })
}

/// Lowers the calling thread's priority to [`WORKER_NICE`] (always permitted; per thread
/// on Linux, where `PRIO_PROCESS` with a thread id addresses one thread).
pub(crate) fn lower_priority() {
    set_nice(nice_override().unwrap_or(WORKER_NICE));
}

fn set_nice(nice: libc::c_int) {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

/// Compresses `jobs` on `threads` workers and writes the records in job order (order
/// matters: a record must land after every earlier record it overlaps). Returns raw bytes.
/// Each worker copies a job's bytes into its own buffer first (from the region through
/// [`racy_copy`]) and compresses from there: LZ4 never reads the region.
fn stream_jobs(
    view: &RegionView,
    jobs: &[Job<'_>],
    p: &SnapParams,
    w: &mut ImageWriter,
    cancel: &AtomicBool,
) -> Result<u64, SnapError> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let threads = p.threads.clamp(1, 64).min(jobs.len());
    // Off the executor's CPU (`wide_cpus` is what `OnCpu::away_from` changed): nice 0.
    let nice = nice_override().unwrap_or(if p.wide_cpus.is_some() {
        0
    } else {
        WORKER_NICE
    });
    let next = AtomicUsize::new(0);
    let mut raw_total = 0u64;
    // Chunk buffers go round: a worker copies a job into one, a raw record takes it as
    // its payload, and the writer hands it back once the record is in the file (copying
    // the raw bytes into a payload of its own cost a tenth of an incompressible pass's
    // CPU). At most the records in flight and one per worker exist.
    let spare: std::sync::Mutex<Vec<Vec<u8>>> = Default::default();
    std::thread::scope(|s| -> Result<(), SnapError> {
        // Bounded: workers run at most a few chunks ahead of the file.
        let (tx, rx) = mpsc::sync_channel::<(usize, io::Result<Record>)>(threads * 2);
        for _ in 0..threads {
            let tx = tx.clone();
            let next = &next;
            let spare = &spare;
            s.spawn(move || {
                set_nice(nice);
                let mut buf = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    if buf.capacity() < CHUNK_BYTES {
                        buf = spare
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .pop()
                            .unwrap_or_else(|| Vec::with_capacity(CHUNK_BYTES));
                    }
                    // Zero-filled only where this buffer was never as long (a `&mut [u8]`
                    // must not cover uninitialised bytes); the copy overwrites all of it.
                    buf.resize(job.raw_bytes(), 0);
                    let raw = &mut buf[..];
                    let copied = match &job.from {
                        Source::Region => {
                            let runs: Vec<(u64, u64)> = job
                                .extents
                                .iter()
                                .map(|e| (e.offset, e.len as u64))
                                .collect();
                            view.copy_runs(&runs, raw)
                        }
                        Source::Copies(parts) => {
                            let mut at = 0usize;
                            for part in parts {
                                raw[at..at + part.len()].copy_from_slice(part);
                                at += part.len();
                            }
                            Ok(())
                        }
                    };
                    let rec = copied.map(|()| {
                        let (rec, back) =
                            Record::encode_owned(job.extents.clone(), std::mem::take(&mut buf));
                        buf = back.unwrap_or_default();
                        rec
                    });
                    if tx.send((i, rec)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Reorder: workers finish out of order, the file needs job order.
        let mut pending: std::collections::BTreeMap<usize, Record> = Default::default();
        let mut want = 0usize;
        for (i, rec) in rx.iter() {
            let rec = match rec {
                Ok(rec) => rec,
                Err(e) => {
                    next.store(jobs.len(), Ordering::Relaxed);
                    return Err(e.into());
                }
            };
            pending.insert(i, rec);
            while let Some(rec) = pending.remove(&want) {
                if cancel.load(Ordering::Relaxed) {
                    next.store(jobs.len(), Ordering::Relaxed);
                    return Err(SnapError::Cancelled);
                }
                raw_total += rec.raw_bytes as u64;
                if let Err(e) = w.write_record(&rec) {
                    next.store(jobs.len(), Ordering::Relaxed);
                    return Err(e.into());
                }
                if rec.flags == 0 && rec.payload.capacity() >= CHUNK_BYTES {
                    spare
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(rec.payload);
                }
                want += 1;
            }
        }
        Ok(())
    })?;
    Ok(raw_total)
}

fn header(
    p: &SnapParams,
    arena_bytes: u64,
    keys: u64,
    (repl_offset, repl_stream_db): (u64, u32),
    aof_lsn: u64,
    mode: CutMode,
    passes: u32,
) -> ImageHeader {
    ImageHeader {
        fingerprint: format::Fingerprint::current(),
        arena_bytes,
        chunk_bytes: CHUNK_BYTES as u32,
        databases: p.databases,
        created_ms: crate::util::now_ms(),
        keys,
        repl_id: p.repl_id,
        repl_offset,
        repl_stream_db,
        aof_lsn,
        mode,
        passes,
        functions: p.functions.for_image(),
        functions_stated: (0, 0),
        companion_id: 0,
        companion_pages: 0,
    }
}

/// Stop-the-world save, run by a caller that guarantees the executor does not touch the
/// arena meanwhile (the executor itself in SAVE/SHUTDOWN, or the snapshot thread holding
/// a pause). The caller commits.
fn write_stw(
    view: &RegionView,
    p: &SnapParams,
    cancel: &AtomicBool,
) -> Result<(ImageWriter, u64), SnapError> {
    let mut w = create_writer(p)?;
    let end = view.end();
    let mut jobs = Vec::new();
    range_jobs(0, end, &mut jobs);
    match stream_jobs(view, &jobs, p, &mut w, cancel) {
        Ok(_) => Ok((w, end)),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// SAVE / SHUTDOWN: the executor blocks while workers compress the arena into the image.
pub fn save_blocking(arena: &Arena, keys: u64, p: &SnapParams) -> Result<Outcome, SnapError> {
    let never = AtomicBool::new(false);
    let view = RegionView::of(arena);
    let started = Instant::now();
    let (w, end) = write_stw(&view, p, &never)?;
    let bytes = commit_image(
        w,
        p,
        header(
            p,
            end,
            keys,
            (p.repl_offset, p.repl_stream_db),
            0,
            CutMode::StopTheWorld,
            1,
        ),
        &never,
    )?;
    Ok(Outcome {
        mode: CutMode::StopTheWorld,
        dirty_at_cut: 0,
        keys,
        repl_offset: p.repl_offset,
        aof_lsn: 0,
        bytes_written: bytes,
        passes: 1,
        pause_us: started.elapsed().as_micros() as u64,
        extra_bytes: 0,
        fallback_reason: None,
    })
}

/// Live progress of a background snapshot, for INFO.
#[derive(Default)]
pub struct Progress {
    pub passes: AtomicUsize,
}

/// The background snapshot, run on its own thread.
fn run_background(
    view: RegionView,
    p: SnapParams,
    gate: Arc<PauseGate>,
    cancel: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> Result<Outcome, SnapError> {
    // Off the executor's CPU for the whole job, and so every thread spawned from here
    // (affinity is inherited): see `OnCpu`.
    let mut p = p;
    let away = p.executor_cpu.map(OnCpu::away_from);
    p.wide_cpus = away.as_ref().and_then(OnCpu::previous);
    let mut fallback_reason = None;
    if p.mode != SnapMode::StopTheWorld {
        if std::env::var_os(ENV_NO_UFFD).is_some_and(|v| v == "1") {
            fallback_reason = Some(format!("{ENV_NO_UFFD}=1"));
        } else {
            let tried = match (p.mode, p.capture.clone()) {
                // `auto` is copy-before-write wherever the arena armed its capture (every
                // background job): at 4M and 8M keys of incompressible values it beat live
                // passes on duration, pause and tail latency (BENCHMARKS.md, "Snapshot
                // scaling"). Live passes stay available as `async`.
                (SnapMode::Cow | SnapMode::Auto, Some(c)) => {
                    return run_cow_image(&view, &p, &c, &gate, &cancel, &progress)
                }
                (SnapMode::Cow, None) => Err(io::Error::other(
                    "the arena has no copy-before-write capture armed",
                )),
                (SnapMode::Sync, _) => uffd::SyncWp::new(view.base_addr(), view.reserved_bytes())
                    .map(|t| run_sync_image(&view, &p, t, &gate, &cancel, &progress)),
                _ => uffd::WpTracker::reuse_or_new(view.base_addr(), view.reserved_bytes())
                    .map(|t| run_live(&view, &p, t, &gate, &cancel, &progress)),
            };
            match tried {
                Ok(r) => return r,
                Err(e) => fallback_reason = Some(e.to_string()),
            }
        }
    }
    // `auto` where userfaultfd is refused (some containers): the copy-before-write variant
    // needs none, so it replaces the stop-the-world copy. An explicit `async`/`sync` asked
    // for a userfaultfd variant and gets the plainly logged stop-the-world copy instead.
    if let (SnapMode::Auto, Some(reason), Some(c)) =
        (p.mode, fallback_reason.as_ref(), p.capture.clone())
    {
        crate::notice!(
            "Snapshot: userfaultfd unavailable ({reason}); copy-before-write instead (it needs none)"
        );
        if p.verify_cow {
            // The check itself is made with userfaultfd.
            crate::warning!(
                "snapshot-verify-cow: userfaultfd unavailable; this snapshot is not checked"
            );
            p.verify_cow = false;
        }
        return run_cow_image(&view, &p, &c, &gate, &cancel, &progress);
    }
    // Stop-the-world: the pause covers the copy; fsync and rename happen after it.
    let guard = gate.pause(&cancel).ok_or(SnapError::Cancelled)?;
    let dirty_at_cut = gate.dirty_at_park();
    let keys = gate.keys_at_park();
    let repl_offset = gate.repl_offset_at_park();
    let aof_lsn = at_cut(&p, &gate);
    // The executor is parked for the whole copy: its CPU works on it too.
    let wide = p.wide_cpus.as_ref().map(OnCpu::set);
    let (w, end) = write_stw(&view, &p, &cancel)?;
    drop(wide);
    let pause_us = guard.started.elapsed().as_micros() as u64;
    drop(guard);
    let bytes = commit_image(
        w,
        &p,
        header(
            &p,
            end,
            keys,
            (repl_offset, gate.repl_stream_db_at_park()),
            aof_lsn,
            CutMode::StopTheWorld,
            1,
        ),
        &cancel,
    )?;
    progress.passes.store(1, Ordering::Relaxed);
    Ok(Outcome {
        mode: CutMode::StopTheWorld,
        dirty_at_cut,
        keys,
        repl_offset,
        aof_lsn,
        bytes_written: bytes,
        passes: 1,
        pause_us,
        extra_bytes: 0,
        fallback_reason,
    })
}

/// A freeze-free snapshot into a fresh image file.
fn run_sync_image(
    view: &RegionView,
    p: &SnapParams,
    t: uffd::SyncWp,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
) -> Result<Outcome, SnapError> {
    let mut w = create_writer(p)?;
    match sync::run_sync(view, p, t, gate, cancel, progress, &mut w) {
        Ok((o, end)) => commit(w, p, o, end, gate.repl_stream_db_at_park(), cancel),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// A copy-before-write snapshot into a fresh image file.
fn run_cow_image(
    view: &RegionView,
    p: &SnapParams,
    c: &crate::arena::cow::Capture,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
) -> Result<Outcome, SnapError> {
    let mut w = create_writer(p)?;
    match cow::run_cow(view, p, c, gate, cancel, progress, &mut w) {
        Ok((o, end)) => commit(w, p, o, end, gate.repl_stream_db_at_park(), cancel),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// Commits the image of a finished background snapshot (`end` arena bytes); the outcome
/// gains the bytes written.
fn commit(
    w: ImageWriter,
    p: &SnapParams,
    o: Outcome,
    end: u64,
    repl_stream_db: u32,
    cancel: &AtomicBool,
) -> Result<Outcome, SnapError> {
    let h = header(
        p,
        end,
        o.keys,
        (o.repl_offset, repl_stream_db),
        o.aof_lsn,
        o.mode,
        o.passes,
    );
    let bytes = commit_image(w, p, h, cancel)?;
    Ok(Outcome {
        bytes_written: bytes,
        ..o
    })
}

fn run_live(
    view: &RegionView,
    p: &SnapParams,
    mut t: uffd::WpTracker,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
) -> Result<Outcome, SnapError> {
    let mut w = create_writer(p)?;
    let result = live_passes(view, p, &mut t, gate, cancel, progress, &mut w);
    // Ending the tracking lifts every protection: a kernel walk of the page tables
    // (≈ 10 ms a GiB), on a niced thread so that the clients sharing its CPU get in
    // between its slices. After a cut the registration is kept for the next snapshot
    // (see `WpTracker::retire`); after an error it is dropped.
    let ended = Instant::now();
    let keep = result.is_ok();
    std::thread::scope(|s| {
        s.spawn(move || {
            lower_priority();
            if keep {
                t.retire();
            } else {
                drop(t);
            }
        });
    });
    crate::verbose!(
        "Snapshot tracking ended ({}): {} us",
        if keep {
            "kept registered"
        } else {
            "unregistered"
        },
        ended.elapsed().as_micros()
    );
    match result {
        Ok((o, end)) => commit(w, p, o, end, gate.repl_stream_db_at_park(), cancel),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// Times the final pause's read-only walk of the tracked range `[0, end)` (µs): what the
/// walk in the pause will cost, measured outside it.
fn time_read_only_walk(t: &mut uffd::WpTracker, end: u64) -> std::io::Result<u64> {
    let walk = Instant::now();
    t.harvest_parallel(
        0,
        end,
        FINAL_WALK_THREADS,
        uffd::Reprotect::No,
        None,
        |_, _| {},
    )?;
    Ok(walk.elapsed().as_micros() as u64)
}

/// Estimated pause (µs) to finish with `dirty` bytes left: the final, read-only walk of
/// the page tables (`walk_us`: see [`marked_walk_estimate_us`]), then the copy.
fn pause_estimate_us(walk_us: u64, dirty: u64) -> u64 {
    walk_us + dirty / PAUSE_COPY_BYTES_PER_US
}

/// Unmarked gap (bytes) a walk of the dirty map's regions walks through rather than
/// start another PAGEMAP_SCAN call: 8 regions are 128 page-table entries, about what one
/// call's own cost (system call, mmap lock, VMA lookup) would walk.
const MARKED_MERGE_GAP: u64 = 8 * crate::arena::dirty::REGION_BYTES;
/// Assumed cost of one PAGEMAP_SCAN call apart from its walk (µs).
const SCAN_CALL_US: u64 = 1;

/// Estimated read-only walk (µs) of `marked` runs, from the full walk's measured cost
/// (`walk_ro_us` over `end` bytes) per byte, plus a call per run.
fn marked_walk_estimate_us(walk_ro_us: u64, end: u64, marked: &[(u64, u64)]) -> u64 {
    let bytes: u64 = marked.iter().map(|r| r.1).sum();
    let per_byte = walk_ro_us as f64 / end.max(1) as f64;
    marked.len() as u64 * SCAN_CALL_US + (bytes as f64 * per_byte) as u64
}

/// The parts of the runs `all` that no run of `cover` contains (both ascending and
/// disjoint): written pages the dirty map did not mark (`snapshot-verify-dirty-map`).
fn uncovered(all: &[(u64, u64)], cover: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut c = 0;
    for &(off, len) in all {
        let (mut at, end) = (off, off + len);
        while at < end {
            while c < cover.len() && cover[c].0 + cover[c].1 <= at {
                c += 1;
            }
            match cover.get(c) {
                Some(&(co, cl)) if co <= at => at = (co + cl).min(end),
                Some(&(co, _)) if co < end => {
                    out.push((at, co - at));
                    at = co;
                }
                _ => {
                    out.push((at, end - at));
                    at = end;
                }
            }
        }
    }
    out
}

/// Copies `runs` of the arena into `buf` (cleared first), on two threads when there is
/// enough to copy for the second thread to pay off. Through [`racy_copy`] even in the
/// pause: the executor is stopped then, but an I/O thread may be receiving a big argument
/// into its arena block.
fn copy_runs(view: &RegionView, runs: &[(u64, u64)], buf: &mut Vec<u8>) -> io::Result<()> {
    let total: usize = runs.iter().map(|r| r.1 as usize).sum();
    // Zeroed first (a `&mut [u8]` must not cover uninitialised bytes): this buffer only
    // takes what the raw pool has no slot for, which is rare.
    buf.clear();
    buf.resize(total, 0);
    // Split at the run where half the bytes are reached.
    let mut split = (runs.len(), total);
    let mut acc = 0usize;
    for (i, r) in runs.iter().enumerate() {
        if acc >= total / 2 {
            split = (i, acc);
            break;
        }
        acc += r.1 as usize;
    }
    if total >= PARALLEL_COPY_MIN_BYTES && split.0 < runs.len() {
        let (first, second) = buf.split_at_mut(split.1);
        std::thread::scope(|s| {
            let other = s.spawn(|| view.copy_runs(&runs[split.0..], second));
            let mine = view.copy_runs(&runs[..split.0], first);
            other
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("copy thread panicked")))
                .and(mine)
        })
    } else {
        view.copy_runs(runs, buf)
    }
}

/// The raw pool's size (or a quarter of the arena's, when smaller). It must hold the
/// distinct pages of the late passes and of the pause: the first set that fits and the
/// few-MB sets after it. With the workers' chunk buffers and the image writer's, it bounds
/// the snapshot's extra memory under 64 MiB whatever the write rate (figures:
/// BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "The raw pool").
const RAW_POOL_BYTES: usize = 44 << 20;

/// Environment override of the raw pool's size in bytes (tests: a pool too small for the
/// sets makes passes mix raw and compressed pages and the pause overflow).
pub const ENV_RAW_POOL_BYTES: &str = "CAIRN_SNAPSHOT_RAW_POOL_BYTES";

fn raw_pool_bytes(arena_end: u64) -> usize {
    if let Some(n) = std::env::var(ENV_RAW_POOL_BYTES)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n;
    }
    // A small arena needs no more than a quarter of itself (a larger set is compressed).
    RAW_POOL_BYTES.min(arena_end as usize / 4)
}

/// The raw pool, made resident by a helper thread while pass 1 streams.
enum PoolPrep {
    Ready(RawPool),
    Growing(JoinHandle<RawPool>),
}

impl PoolPrep {
    /// Starts the helper. Started with pass 1, it is done long before the late passes:
    /// started late, it ran beside their harvests, whose write-protect changes then cost
    /// an IPI to its CPU each (figures: BENCHMARKS.md, "The raw pool").
    fn start(bytes: usize) -> PoolPrep {
        let spawned = std::thread::Builder::new()
            .name("cairn-snap-buf".into())
            .spawn(move || {
                lower_priority();
                RawPool::new(bytes)
            });
        match spawned {
            Ok(h) => PoolPrep::Growing(h),
            Err(_) => PoolPrep::Ready(RawPool::empty()),
        }
    }

    /// The pool once the helper is done (never waits).
    fn ready(&mut self) -> Option<&mut RawPool> {
        if matches!(self, PoolPrep::Growing(h) if h.is_finished()) {
            if let PoolPrep::Growing(h) = std::mem::replace(self, PoolPrep::Ready(RawPool::empty()))
            {
                *self = PoolPrep::Ready(h.join().unwrap_or_else(|_| RawPool::empty()));
            }
        }
        match self {
            PoolPrep::Ready(p) => Some(p),
            PoolPrep::Growing(_) => None,
        }
    }

    /// The pool (waits for the helper if it is still at work).
    fn take(self) -> RawPool {
        match self {
            PoolPrep::Ready(p) => p,
            PoolPrep::Growing(h) => h.join().unwrap_or_else(|_| RawPool::empty()),
        }
    }
}

/// Jobs for arena runs whose bytes were copied, one after another, into `raw` (by
/// [`copy_runs`]).
fn raw_jobs<'a>(runs: &[(u64, u64)], raw: &'a [u8]) -> Vec<Job<'a>> {
    let mut packer = Packer::from_copies();
    let mut at = 0usize;
    for &(off, len) in runs {
        packer.add_copy(off, &raw[at..at + len as usize]);
        at += len as usize;
    }
    debug_assert_eq!(at, raw.len());
    packer.finish()
}

/// The live passes and the cut in the final pause: returns the outcome and the arena
/// bytes the image is complete up to.
#[allow(clippy::too_many_arguments)]
fn live_passes(
    view: &RegionView,
    p: &SnapParams,
    t: &mut uffd::WpTracker,
    gate: &PauseGate,
    cancel: &AtomicBool,
    progress: &Progress,
    w: &mut ImageWriter,
) -> Result<(Outcome, u64), SnapError> {
    // Pass 1: protect what is in use, then stream all of it.
    let mut end = view.end();
    let pass_started = Instant::now();
    t.protect(0, end)?;
    let protect_us = pass_started.elapsed().as_micros();
    // What the final walk will cost: the same read-only walk, now (nothing is written
    // yet, so it only reads the page tables; no pause needed).
    let mut walk_ro_us = time_read_only_walk(t, end)?;
    let walk_ro_end = end;
    // The dirty map (when the executor armed one): the first harvest walks everything
    // (it takes the map's marks first, so later writes are in the next take), later ones
    // and the pause only the regions it marked since the harvest before; the final walk
    // is then estimated from the last set of marked regions.
    let map = p.dirty_map.clone();
    let mut marked: Vec<(u64, u64)> = Vec::new();
    let mut final_walk_us;
    let budget = p.pause_budget_us;
    // The raw pool for the late passes and the pause, made resident meanwhile. The
    // pause keeps what its budget can copy free for itself; the first set that goes to
    // the pool leaves as much again for the (smaller) sets after it.
    let mut pool = PoolPrep::start(raw_pool_bytes(end));
    let pause_reserve_pages =
        (budget.saturating_mul(PAUSE_COPY_BYTES_PER_US) as usize).div_ceil(PAGE_BYTES);
    let mut jobs = Vec::new();
    range_jobs(0, end, &mut jobs);
    stream_jobs(view, &jobs, p, w, cancel)?;
    crate::verbose!(
        "Snapshot pass 1: {end} bytes in {} ms (protect {protect_us} us, read-only walk {walk_ro_us} us)",
        pass_started.elapsed().as_millis()
    );
    let mut passes = 1u32;
    progress.passes.store(1, Ordering::Relaxed);
    // Pass 1 sent everything up to `end`.
    let mut last = end;
    let mut last_all_raw = false;
    let mut dirty;
    // Later passes: what was written (or newly allocated past `end`) since, until the
    // final pause is predicted to fit the budget or the set stops shrinking. A pass whose
    // pages all fit the raw pool is copied there (a memcpy, compressed after the cut);
    // a larger one is compressed and written now, except the pages that already have a
    // slot, which must go to their slot (their older copy there would win otherwise).
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(SnapError::Cancelled);
        }
        let new_end = view.end();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        dirty = 0u64;
        let walk = Instant::now();
        // The harvest threads run on the executor's CPU (see `OnCpu`); this thread stays
        // off it: gathering a large pass's runs takes about a millisecond, and at its
        // normal priority on the executor's CPU the executor would wait for it.
        marked.clear();
        if let Some(m) = &map {
            m.take(end, MARKED_MERGE_GAP, &mut marked);
        }
        if map.is_none() || passes == 1 {
            t.harvest_parallel(
                0,
                end,
                p.threads,
                uffd::Reprotect::Yes,
                p.executor_cpu,
                |off, len| {
                    runs.push((off, len));
                    dirty += len;
                },
            )?;
        } else {
            t.harvest_runs(&marked, uffd::Reprotect::Yes, p.executor_cpu, |off, len| {
                runs.push((off, len));
                dirty += len;
            })?;
        }
        let walk_us = walk.elapsed().as_micros() as u64;
        if new_end > end {
            // Pages past the old end were never protected: protect them, then copy them.
            t.protect(end, new_end - end)?;
            runs.push((end, new_end - end));
            dirty += new_end - end;
            end = new_end;
        }
        passes += 1;
        progress.passes.store(passes as usize, Ordering::Relaxed);
        // The estimate of the final walk is the fastest one seen: a walk under load
        // (the executor and the workers on the same cores) can take several times longer
        // than in the pause, where the cores are free.
        if map.is_none() {
            if pause_estimate_us(walk_ro_us, dirty) > budget && walk_ro_us > budget / 2 {
                walk_ro_us = walk_ro_us.min(time_read_only_walk(t, end)?);
            }
            final_walk_us = walk_ro_us;
        } else {
            // The regions marked during this pass: what the final walk will cover if the
            // pause comes after a pass as long.
            final_walk_us = marked_walk_estimate_us(walk_ro_us, walk_ro_end, &marked);
        }
        // Into the raw pool when the whole set fits and leaves room for the sets after it
        // (mostly new pages: random writes seldom hit a page twice within a few ms) and
        // for the pause's; otherwise only the pages that already have a slot go there.
        let (raw_bytes, new_pages, rest) = match pool.ready() {
            Some(pool) => {
                let followers = if last_all_raw { 0 } else { pause_reserve_pages };
                let limit = pool
                    .free_pages()
                    .saturating_sub(pause_reserve_pages + followers);
                let placed = pool.place(&runs, NewPages::AllIfAtMost(limit));
                pool.copy(view, &placed.copies, false)?;
                let raw_bytes = (placed.copies.len() * PAGE_BYTES) as u64;
                (raw_bytes, placed.new_pages, placed.rest)
            }
            None => (0, 0, runs),
        };
        let pool_ready = pool.ready().is_some();
        let all_raw = pool_ready && raw_bytes == dirty;
        // Stop when the final pause is predicted to fit the budget, or when a pass no
        // longer shrinks the set by a quarter (the write rate has caught up with the
        // passes, and more of them only cost time). A set that was compressed while this
        // one goes to the pool does not count as stalled: the set after a raw copy is
        // only what was written during a few ms.
        let converged = pause_estimate_us(final_walk_us, dirty) <= budget;
        let stalled =
            (dirty * 4 > last * 3 && (last_all_raw || !all_raw)) || passes >= MAX_LIVE_PASSES;
        // The end, unless the pool is still being made resident: then one more pass
        // (waiting here would widen the final set by as long).
        let finishing = (converged || stalled) && (pool_ready || passes >= MAX_LIVE_PASSES);
        let written_before = w.bytes_written;
        if !rest.is_empty() {
            let mut packer = Packer::from_region();
            for &(off, len) in &rest {
                packer.add_region(off, len);
            }
            stream_jobs(view, &packer.finish(), p, w, cancel)?;
        }
        crate::verbose!(
            "Snapshot pass {passes}: {dirty} dirty bytes, harvest {walk_us} us ({} marked regions in {} runs; final walk estimate {final_walk_us} us), {raw_bytes} copied raw ({new_pages} pages new to the pool), {} written, {} us in all",
            marked.iter().map(|r| r.1).sum::<u64>() / crate::arena::dirty::REGION_BYTES,
            marked.len(),
            w.bytes_written - written_before,
            walk.elapsed().as_micros()
        );
        if finishing {
            break;
        }
        last = dirty;
        last_all_raw = all_raw;
    }
    let mut pool = pool.take();
    // The final pause: harvest and copy raw, then release the executor at once.
    let guard = gate.pause(cancel).ok_or(SnapError::Cancelled)?;
    // The executor is parked: its CPU is free for the pause's walkers and copy.
    let wide = p.wide_cpus.as_ref().map(OnCpu::set);
    let rt = Realtime::enter();
    let final_end = view.end();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    // The walk is O(page tables), read-only (tracking ends with this snapshot): on two
    // threads at real-time priority, else on this one (see FINAL_WALK_THREADS).
    let walkers = if rt.0 { 2 } else { FINAL_WALK_THREADS };
    // With the dirty map: only the regions marked since the last live harvest.
    let mut final_marked = Vec::new();
    let walked = match &map {
        Some(m) => {
            m.take(end, MARKED_MERGE_GAP, &mut final_marked);
            t.harvest_runs(&final_marked, uffd::Reprotect::No, None, |off, len| {
                runs.push((off, len))
            })
            .map(|_| ())
        }
        None => t.harvest_parallel(0, end, walkers, uffd::Reprotect::No, None, |off, len| {
            runs.push((off, len))
        }),
    };
    let marked_walk_us = guard.started.elapsed().as_micros() as u64;
    let mut verify = walked.map(|()| Vec::new());
    if map.is_some() && p.verify_dirty_map {
        // Every written page of [0, end) must lie in a walked region: anything else is a
        // write the map missed, and the image would miss it.
        verify = verify.and_then(|_| {
            let mut all = Vec::new();
            t.harvest_parallel(0, end, walkers, uffd::Reprotect::No, None, |off, len| {
                all.push((off, len))
            })
            .map(|()| uncovered(&all, &final_marked))
        });
    }
    match verify {
        Ok(missed) if missed.is_empty() => {}
        Ok(missed) => {
            drop(rt);
            drop(wide);
            drop(guard);
            let pages: u64 = missed.iter().map(|r| r.1).sum::<u64>() / PAGE_BYTES as u64;
            warning!(
                "Snapshot: {pages} written pages outside the dirty map's marked regions (first runs: {:?}); the snapshot fails",
                &missed[..missed.len().min(8)]
            );
            return Err(SnapError::Io(io::Error::other(format!(
                "snapshot-verify-dirty-map: {pages} written pages were not marked"
            ))));
        }
        Err(e) => {
            drop(rt);
            drop(wide);
            drop(guard);
            return Err(e.into());
        }
    }
    if final_end > end {
        runs.push((end, final_end - end));
    }
    let total: u64 = runs.iter().map(|r| r.1).sum();
    let spent_us = guard.started.elapsed().as_micros() as u64;
    let walk_end = Instant::now();
    // Into the pool (slotted pages in place, new ones while slots are free), the rest
    // into a buffer grown here: only when the set is far over what the budget copies.
    let placed = pool.place(&runs, NewPages::WhileFree);
    let mut overflow = Vec::new();
    let copied = pool
        .copy(view, &placed.copies, true)
        .and_then(|()| copy_runs(view, &placed.rest, &mut overflow));
    drop(rt);
    drop(wide);
    if let Err(e) = copied {
        // No cut: the executor goes on and the snapshot fails (the cut hook never ran).
        drop(guard);
        return Err(e.into());
    }
    let dirty_at_cut = gate.dirty_at_park();
    let keys = gate.keys_at_park();
    let repl_offset = gate.repl_offset_at_park();
    let aof_lsn = at_cut(p, gate);
    let pause_us = guard.started.elapsed().as_micros() as u64;
    drop(guard);
    crate::verbose!(
        "Snapshot cut: pause {pause_us} us (harvest {spent_us} us: walk {marked_walk_us} us over {} {}, copy of {total} bytes in {} runs {} us, {} bytes past the pool)",
        if map.is_some() { final_marked.iter().map(|r| r.1).sum::<u64>() } else { end },
        if map.is_some() { "marked bytes" } else { "bytes (whole range)" },
        runs.len(),
        walk_end.elapsed().as_micros(),
        overflow.len()
    );
    // The pool's pages and the overflow's are disjoint (a page with a slot always goes
    // to its slot), and both are newer than every record written before the cut.
    stream_jobs(view, &pool.jobs(), p, w, cancel)?;
    stream_jobs(view, &raw_jobs(&placed.rest, &overflow), p, w, cancel)?;
    crate::verbose!(
        "Snapshot raw copies written: {} us after the cut ({} bytes from the pool)",
        walk_end.elapsed().as_micros(),
        pool.used_bytes()
    );
    passes += 1;
    progress.passes.store(passes as usize, Ordering::Relaxed);
    Ok((
        Outcome {
            mode: CutMode::UffdLive,
            dirty_at_cut,
            keys,
            repl_offset,
            aof_lsn,
            bytes_written: 0,
            passes,
            pause_us,
            extra_bytes: pool.resident_bytes() + overflow.capacity() as u64,
            fallback_reason: None,
        },
        final_end,
    ))
}

/// A background snapshot in flight (owned by the executor).
pub struct BgJob {
    handle: JoinHandle<Result<Outcome, SnapError>>,
    cancel: Arc<AtomicBool>,
    pub started: Instant,
    pub progress: Arc<Progress>,
    /// The executor's pin for the job (see [`OnCpu`]); dropped (unpinned) on the
    /// executor when the job is collected. Boxed: it holds a 128-byte CPU set, and jobs
    /// sit in the executor's state enums.
    executor_pin: Option<Box<OnCpu>>,
    /// The CPU the executor is pinned to for the job.
    executor_cpu: Option<usize>,
}

/// Runs the calling thread on one CPU until dropped (then back on its previous set).
///
/// Why live harvests run on the executor's CPU: every write-protect change in a harvest is
/// a TLB shootdown, and its cost is the IPI to each other CPU running one of our threads.
/// The executor always runs, so a harvest on another CPU pays an IPI per page table it
/// changes, and the last dirty set — what the pause copies — is the writes of that long.
/// On the executor's CPU the shootdowns are local and the harvests several times shorter
/// (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "Harvests on the
/// executor's CPU"); the harvest threads walk in short stints
/// and yield between them (uffd.rs: `LIVE_SCAN_STINT`), so the executor waits at most one.
/// The executor is pinned for the job so that CPU stays its own.
pub(crate) struct OnCpu(Option<libc::cpu_set_t>);

/// A CPU set (Copy, for [`SnapParams`]).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: reads a bit of a valid cpu set.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) })
            .collect();
        write!(f, "CpuSet({cpus:?})")
    }
}

impl OnCpu {
    pub(crate) fn pin(cpu: usize) -> OnCpu {
        let mut one = empty_cpu_set();
        // SAFETY: sets a bit of a valid cpu set.
        unsafe { libc::CPU_SET(cpu, &mut one) };
        OnCpu::apply(&one)
    }

    /// Every CPU the thread may use now except `cpu` (no change where that leaves none).
    ///
    /// Why the snapshot's threads keep off the executor's CPU while it is pinned there:
    /// with the executor pinned, a snapshot thread on its CPU makes it wait until the
    /// scheduler preempts that thread, and neither nice 10 nor EEVDF's wake-up rules
    /// make that prompt: the snapshot thread's file writes (kernel time, not preemptible
    /// on a PREEMPT_NONE kernel) and the compression workers would hold the executor's
    /// CPU for milliseconds at a time (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M,
    /// 4M and 8M keys", "The rest of the snapshot off the executor's CPU").
    pub(crate) fn away_from(cpu: usize) -> OnCpu {
        let mut set = empty_cpu_set();
        // SAFETY: plain syscalls on the calling thread with a valid cpu set.
        unsafe {
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return OnCpu(None);
            }
            libc::CPU_CLR(cpu, &mut set);
            if libc::CPU_COUNT(&set) == 0 {
                return OnCpu(None);
            }
        }
        OnCpu::apply(&set)
    }

    /// Runs the calling thread on `set` until dropped.
    pub(crate) fn set(set: &CpuSet) -> OnCpu {
        OnCpu::apply(&set.0)
    }

    /// The set before this guard changed it (None: it changed nothing).
    pub(crate) fn previous(&self) -> Option<CpuSet> {
        self.0.map(CpuSet)
    }

    /// The set before this guard changed it, without `cpu` (None: it changed nothing, or
    /// `cpu` was all of it).
    pub(crate) fn previous_without(&self, cpu: usize) -> Option<CpuSet> {
        let mut set = self.0?;
        // SAFETY: clears a bit of, and counts, a valid cpu set.
        unsafe {
            libc::CPU_CLR(cpu, &mut set);
            (libc::CPU_COUNT(&set) > 0).then_some(CpuSet(set))
        }
    }

    fn apply(set: &libc::cpu_set_t) -> OnCpu {
        let mut old = empty_cpu_set();
        // SAFETY: plain syscalls on the calling thread with valid cpu sets.
        unsafe {
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return OnCpu(None);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return OnCpu(None);
            }
        }
        OnCpu(Some(old))
    }
}

fn empty_cpu_set() -> libc::cpu_set_t {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    unsafe { std::mem::zeroed() }
}

impl Drop for OnCpu {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            // SAFETY: sets the calling thread's affinity from a valid cpu set.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
            }
        }
    }
}

/// SCHED_FIFO for the calling thread (and the threads it starts) until dropped, where
/// permitted (CAP_SYS_NICE; `CAIRN_PAUSE_REALTIME=0` never tries).
///
/// Why: in the pause the executor's CPU is ours, but the other CPUs run clients, and a
/// second walker at normal priority only gets a share of one, while two at SCHED_FIFO
/// beat one (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "The
/// final walk"). The pause is short
/// and bounded (budget, then the switch to the freeze-free variant), so holding a CPU
/// that long is the point of it.
struct Realtime(bool);

impl Realtime {
    fn enter() -> Realtime {
        if std::env::var_os("CAIRN_PAUSE_REALTIME").is_some_and(|v| v == "0") {
            return Realtime(false);
        }
        let p = libc::sched_param { sched_priority: 1 };
        // SAFETY: changes the calling thread's policy.
        Realtime(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0)
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if self.0 {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: back to the default policy.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
        }
    }
}

/// The CPU the calling thread runs on.
fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

impl BgJob {
    /// Starts the snapshot thread. The caller must keep the arena's large-block pages
    /// (`Arena::set_keep_pages(true)`) until the job is collected.
    pub fn start(arena: &Arena, p: SnapParams, gate: Arc<PauseGate>) -> io::Result<BgJob> {
        let view = RegionView::of(arena);
        let cancel = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Progress::default());
        let (c, pr) = (cancel.clone(), progress.clone());
        let mut p = p;
        p.dirty_map = arena.dirty_map();
        p.capture = arena.capture();
        let colocate = std::env::var_os("CAIRN_SNAPSHOT_COLOCATE").is_none_or(|v| v != "0");
        p.executor_cpu = if colocate { current_cpu() } else { None };
        let cpu = p.executor_cpu;
        // Spawned before the executor is pinned: the snapshot thread and its workers run
        // anywhere; only its live harvests go to the executor's CPU.
        let handle = std::thread::Builder::new()
            .name("cairn-snapshot".into())
            .spawn(move || run_background(view, p, gate, c, pr))?;
        Ok(BgJob {
            handle,
            cancel,
            started: Instant::now(),
            progress,
            executor_pin: cpu.map(|c| Box::new(OnCpu::pin(c))),
            executor_cpu: cpu,
        })
    }
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
    /// Where a thread the executor spawns while this job runs should run: the executor's
    /// CPUs before the job pinned it, without the one it is pinned to. A thread spawned
    /// from the pinned executor inherits the pin and would compete with it for its CPU.
    /// None: the executor is not pinned (nothing to undo).
    pub fn spawned_thread_cpus(&self) -> Option<CpuSet> {
        let pin = self.executor_pin.as_ref()?;
        pin.previous_without(self.executor_cpu?)
    }
    /// Waits for the thread (immediate when `is_finished`).
    pub fn join(self) -> Result<Outcome, SnapError> {
        drop(self.executor_pin);
        self.handle.join().unwrap_or_else(|panic| {
            // The message goes to the log with the failure (stderr may be nowhere).
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            Err(SnapError::Io(io::Error::other(format!(
                "snapshot thread panicked: {why}"
            ))))
        })
    }
    /// Asks the snapshot to stop without waiting for it: collect it once `is_finished`
    /// (its outcome is then `SnapError::Cancelled` or, if it got to its end first, Ok).
    pub fn request_cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }
    /// Stops the snapshot (SHUTDOWN): the temp file is removed, the previous image stays.
    pub fn cancel(self) {
        self.cancel.store(true, Ordering::SeqCst);
        let _ = self.join();
    }
}

/// Counters behind INFO persistence.
#[derive(Debug, Clone)]
pub struct SnapStats {
    pub saves: u64,
    pub last_bgsave_ok: bool,
    pub last_bgsave_time_sec: i64,
    /// When the last BGSAVE was tried (ms), for the 5 s retry delay after a failure.
    pub last_bgsave_try_ms: i64,
    /// How the last snapshot was taken: "none", "uffd-wp-async", "uffd-wp-sync",
    /// "copy-before-write", "stop-the-world".
    pub mode: &'static str,
    pub rounds: u64,
    pub pause_us_max: u64,
    pub extra_bytes_peak: u64,
    pub bytes_written: u64,
}

impl Default for SnapStats {
    fn default() -> Self {
        SnapStats {
            saves: 0,
            last_bgsave_ok: true,
            last_bgsave_time_sec: -1,
            last_bgsave_try_ms: 0,
            mode: "none",
            rounds: 0,
            pause_us_max: 0,
            extra_bytes_peak: 0,
            bytes_written: 0,
        }
    }
}

pub fn mode_name(m: CutMode) -> &'static str {
    match m {
        CutMode::UffdLive => "uffd-wp-async",
        CutMode::UffdSync => "uffd-wp-sync",
        CutMode::Cow => "copy-before-write",
        CutMode::StopTheWorld => "stop-the-world",
    }
}

/// The executor's side of the engine.
pub struct SnapshotEngine {
    pub gate: Arc<PauseGate>,
    pub job: Option<BgJob>,
    /// `snapshot-format rdb`: set when `job` captures for an RDB: (the capture's image,
    /// the RDB file it becomes).
    pub rdb_target: Option<(PathBuf, PathBuf)>,
    /// `snapshot-format rdb`: the RDB being written from the finished capture.
    pub rdb_write: Option<rdb_save::RdbWrite>,
    /// The startup load, while it runs.
    pub loading: Option<LoadJob>,
    pub stats: SnapStats,
    /// The refusal of userfaultfd is logged once, not at every snapshot.
    fallback_logged: bool,
}

impl Default for SnapshotEngine {
    fn default() -> Self {
        SnapshotEngine {
            gate: Arc::new(PauseGate::new()),
            job: None,
            rdb_target: None,
            rdb_write: None,
            loading: None,
            stats: SnapStats::default(),
            fallback_logged: false,
        }
    }
}

impl SnapshotEngine {
    /// A BGSAVE runs: its capture, or the RDB written from it.
    pub fn in_progress(&self) -> bool {
        self.job.is_some() || self.rdb_write.is_some()
    }

    /// When the running BGSAVE started.
    pub fn started(&self) -> Option<Instant> {
        self.job
            .as_ref()
            .map(|j| j.started)
            .or(self.rdb_write.as_ref().map(|w| w.started))
    }

    /// Records a finished snapshot's outcome (counters, logs).
    pub fn record(&mut self, o: &Outcome, background: bool) {
        self.stats.saves += 1;
        self.stats.mode = mode_name(o.mode);
        self.stats.rounds = o.passes as u64;
        self.stats.pause_us_max = self.stats.pause_us_max.max(o.pause_us);
        self.stats.extra_bytes_peak = self.stats.extra_bytes_peak.max(o.extra_bytes);
        self.stats.bytes_written += o.bytes_written;
        if let Some(r) = &o.fallback_reason {
            if !self.fallback_logged {
                self.fallback_logged = true;
                warning!("userfaultfd write-protect tracking is not available ({r}): background snapshots stop the world while they copy the arena");
            }
        }
        if background {
            notice!(
                "Background saving terminated with success ({}, {} passes, pause {} us, {} bytes)",
                self.stats.mode,
                o.passes,
                o.pause_us,
                o.bytes_written
            );
        } else {
            notice!("DB saved on disk");
        }
    }
}

/// Loads the image at `path` into a new arena, checked record by record and then
/// structure by structure (`keyspace::validate`): only a consistent arena is returned.
/// The values of tiered (cold) entries are read from the image's companion file into
/// RAM ([`TierLoad::Warm`]). None when there is no image.
pub fn load_image(
    path: &Path,
    reserve_bytes: usize,
    progress: &format::LoadProgress,
) -> Result<Option<(Arena, ImageHeader)>, String> {
    Ok(load_image_tiered(path, reserve_bytes, progress, &TierLoad::Warm)?.map(|(a, h, _)| (a, h)))
}

/// How a load treats the image's tiered (cold) values.
#[derive(Clone, Debug)]
pub enum TierLoad {
    /// Tiering is off: every cold value is read from the companion into RAM.
    Warm,
    /// Tiering is on: the companion's pages are copied into the (fresh) tier file and
    /// the values stay cold; the tier file's bookkeeping is rebuilt from their stubs.
    Keep {
        tier_file: PathBuf,
        capacity_pages: u32,
    },
    /// Tiering is on and the image was just saved from the running server, which has
    /// not changed the tier file since (DEBUG RELOAD, on the blocked executor): the cold
    /// entries' stubs still point at their records in the live tier file, whose
    /// bookkeeping already owns them. Nothing is copied; no companion is needed.
    InPlace,
}

/// What a [`TierLoad::Keep`] or [`TierLoad::InPlace`] load leaves for the tier store.
pub struct TierRestored {
    /// The rebuilt bookkeeping ([`TierLoad::Keep`]; None: the live one stands).
    pub book: Option<crate::persistence::tiered::bookkeeper::Bookkeeper>,
    /// Cold entries of the live databases, and their values' bytes.
    pub cold_entries: u64,
    pub cold_bytes: u64,
}

/// A loaded image: its arena, header, and with [`TierLoad::Keep`] the tier file's state.
pub type Loaded = (Arena, ImageHeader, Option<TierRestored>);

/// [`load_image`], with the tiered values treated as `tier` says. A cold entry needs the
/// companion file the header names: a missing one, one of another snapshot, a truncated
/// one, or a record past its end fails the load naming the file; so does (with
/// [`TierLoad::Warm`]) a damaged page, naming the key. With [`TierLoad::Keep`] a damaged
/// page surfaces when its key is read, as a damaged tier file page does.
pub fn load_image_tiered(
    path: &Path,
    reserve_bytes: usize,
    progress: &format::LoadProgress,
    tier: &TierLoad,
) -> Result<Option<Loaded>, String> {
    if !path.exists() {
        return Ok(None);
    }
    let in_file = |e: String| format!("{e} (file {})", path.display());
    let (region, header) = format::load_with_progress(path, reserve_bytes, progress)
        .map_err(|e| in_file(e.to_string()))?;
    let started = Instant::now();
    let cpu_started = thread_cpu_seconds();
    let (arena, cold) = arena_of_region(region, &header).map_err(in_file)?;
    notice!(
        "Snapshot image structures checked in {:.3} seconds ({:.3} s of CPU)",
        started.elapsed().as_secs_f64(),
        thread_cpu_seconds() - cpu_started
    );
    if cold.stubs.is_empty() {
        return Ok(Some((arena, header, None)));
    }
    if let TierLoad::InPlace = tier {
        let r = TierRestored {
            book: None,
            cold_entries: cold.live_entries,
            cold_bytes: cold.live_bytes,
        };
        return Ok(Some((arena, header, Some(r))));
    }
    use crate::persistence::tiered::companion::Companion;
    if header.companion_id == 0 {
        return Err(in_file(format!(
            "the snapshot image holds {} tiered values but names no tier companion file",
            cold.stubs.len()
        )));
    }
    let comp = Companion::open(path, header.companion_id, header.companion_pages)?;
    if let Some(s) = cold.stubs.iter().find(|s| !comp.holds(**s)) {
        return Err(format!(
            "a tiered record of the snapshot image {} (page {}, {} pages) lies past the end of its companion {} ({} pages)",
            path.display(),
            s.page,
            s.pages(),
            comp.path.display(),
            comp.pages
        ));
    }
    let started = Instant::now();
    match tier {
        TierLoad::Warm => {
            let dbs = crate::keyspace::tiered::image_dbs(&arena);
            let mut ks = crate::collections::keyspace_from_arena(arena, dbs).map_err(in_file)?;
            let n = ks
                .warm_all(&mut |key, stub| comp.read_value(key, stub))
                .map_err(|e| format!("{e} (snapshot image {})", path.display()))?;
            notice!(
                "Read {n} tiered values from {} into memory in {:.3} seconds",
                comp.path.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(Some((ks.into_arena(), header, None)))
        }
        // Returned above, before the companion is opened.
        TierLoad::InPlace => Err("an in-place tier load reached the companion".into()),
        TierLoad::Keep {
            tier_file,
            capacity_pages,
        } => {
            let book = crate::persistence::tiered::bookkeeper::Bookkeeper::from_records(
                *capacity_pages,
                &cold.stubs,
            )
            .map_err(|e| format!("{e} (snapshot image {})", path.display()))?;
            comp.copy_into(tier_file, book.high_water() as u64)?;
            notice!(
                "Tier file {} restored from {} ({} tiered values, {} pages) in {:.3} seconds",
                tier_file.display(),
                comp.path.display(),
                cold.stubs.len(),
                book.high_water(),
                started.elapsed().as_secs_f64()
            );
            Ok(Some((
                arena,
                header,
                Some(TierRestored {
                    book: Some(book),
                    cold_entries: cold.live_entries,
                    cold_bytes: cold.live_bytes,
                }),
            )))
        }
    }
}

/// CPU time of the calling thread (the validation's cost without the machine's noise).
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Takes over a restored region as an arena once its header and every structure in it
/// check out (`keyspace::validate`).
fn arena_of_region(
    region: crate::arena::RawRegion,
    header: &ImageHeader,
) -> Result<(Arena, crate::keyspace::tiered::ColdScan), String> {
    let mut arena = Arena::from_region(region, header.arena_bytes).map_err(|e| e.to_string())?;
    let cold = crate::collections::validate_image(&mut arena)
        .map_err(|e| format!("snapshot image holds an inconsistent arena: {e}"))?;
    Ok((arena, cold))
}

/// An image without a file name (in memory, or a stream from a primary) has no
/// companion: tiered values in it are refused.
fn without_tiered(
    (arena, cold): (Arena, crate::keyspace::tiered::ColdScan),
) -> Result<Arena, String> {
    if cold.stubs.is_empty() {
        Ok(arena)
    } else {
        Err(format!(
            "the snapshot image holds {} tiered values, whose companion file is not here",
            cold.stubs.len()
        ))
    }
}

/// [`load_image`] from an image held in memory, into an arena of `reserve_bytes`
/// (crafted-image tests and the `snapshot_image` fuzz target).
pub fn load_image_bytes(
    image: &[u8],
    reserve_bytes: usize,
) -> Result<(Arena, ImageHeader), String> {
    let (region, header) =
        format::load_from_bytes(image, reserve_bytes).map_err(|e| e.to_string())?;
    let arena = without_tiered(arena_of_region(region, &header)?)?;
    Ok((arena, header))
}

/// [`load_image_bytes`] for an image in its streamed order (header last, length unknown:
/// [`format::load_streamed`]), as a primary sends a capture while it is taken.
pub fn load_image_streamed<R: std::io::Read>(
    image: R,
    reserve_bytes: usize,
) -> Result<(Arena, ImageHeader), String> {
    let (region, header) =
        format::load_streamed(image, reserve_bytes).map_err(|e| e.to_string())?;
    let arena = without_tiered(arena_of_region(region, &header)?)?;
    Ok((arena, header))
}

/// An image being loaded at startup on its own thread while the executor answers
/// `-LOADING` (and INFO shows `loading:1`).
pub struct LoadJob {
    handle: JoinHandle<Result<Option<Loaded>, String>>,
    /// The file being loaded.
    pub path: PathBuf,
    pub started: Instant,
    pub started_ms: i64,
    pub total_bytes: u64,
    pub progress: Arc<format::LoadProgress>,
}

impl LoadJob {
    pub fn start(
        path: PathBuf,
        reserve_bytes: usize,
        record_delay_us: u64,
        tier: TierLoad,
    ) -> io::Result<LoadJob> {
        let total_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let progress = Arc::new(format::LoadProgress::default());
        progress
            .record_delay_us
            .store(record_delay_us, Ordering::Relaxed);
        let p = progress.clone();
        let loaded = path.clone();
        let handle = std::thread::Builder::new()
            .name("cairn-load".into())
            .spawn(move || load_image_tiered(&loaded, reserve_bytes, &p, &tier))?;
        Ok(LoadJob {
            handle,
            path,
            started: Instant::now(),
            started_ms: crate::util::now_ms(),
            total_bytes,
            progress,
        })
    }
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
    pub fn join(self) -> Result<Option<Loaded>, String> {
        self.handle
            .join()
            .unwrap_or_else(|_| Err("the image loader thread panicked".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread spawned by the pinned executor gets its CPUs back without the pinned one.
    #[test]
    fn the_set_before_a_pin_without_the_pinned_cpu() {
        std::thread::spawn(|| {
            let cpu = current_cpu().unwrap();
            let mut before = empty_cpu_set();
            // SAFETY: reads the calling thread's affinity into a valid set.
            unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut before)
            };
            // SAFETY: counts a valid set.
            let n = unsafe { libc::CPU_COUNT(&before) };
            let pin = OnCpu::pin(cpu);
            let rest = pin.previous_without(cpu);
            if n < 2 {
                assert!(rest.is_none(), "one CPU: nothing to move to");
                return;
            }
            let rest = rest.expect("other CPUs");
            // SAFETY: reads bits of valid sets.
            unsafe {
                assert!(!libc::CPU_ISSET(cpu, &rest.0));
                assert_eq!(libc::CPU_COUNT(&rest.0), n - 1);
            }
            // Applied on a thread that inherited the pin, it moves the thread off it.
            let guard = OnCpu::set(&rest);
            let mut now = empty_cpu_set();
            // SAFETY: as above.
            unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut now);
                assert!(!libc::CPU_ISSET(cpu, &now));
            }
            drop(guard);
            drop(pin);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn packer_respects_chunk_and_extent_limits() {
        let mut p = Packer::from_region();
        for i in 0..600u64 {
            p.add_region(i * 8192, 4096);
        }
        p.add_region(10 << 20, 3 << 20);
        let jobs = p.finish();
        for j in &jobs {
            let bytes: u64 = j.extents.iter().map(|e| e.len as u64).sum();
            assert!(bytes <= CHUNK_BYTES as u64);
            assert!(j.extents.len() <= MAX_EXTENTS);
        }
        let total: u64 = jobs
            .iter()
            .flat_map(|j| j.extents.iter())
            .map(|e| e.len as u64)
            .sum();
        assert_eq!(total, 600 * 4096 + (3 << 20));
    }

    #[test]
    fn uncovered_finds_written_runs_outside_the_marked_ones() {
        let cover = [(100, 50), (200, 100), (400, 10)];
        assert_eq!(
            uncovered(&[(100, 50), (210, 20), (405, 5)], &cover),
            Vec::<(u64, u64)>::new()
        );
        assert_eq!(
            uncovered(&[(0, 10), (90, 70), (290, 120), (500, 1)], &cover),
            vec![(0, 10), (90, 10), (150, 10), (300, 100), (500, 1)]
        );
        assert_eq!(uncovered(&[(7, 3)], &[]), vec![(7, 3)]);
    }
}
