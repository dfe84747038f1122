//! The log-writer thread: owns the AOF files, writes what the executor queues, syncs, and
//! publishes how far the log is durable.
//!
//! Architecture invariant: the executor never waits on the disk. It appends framed entries
//! to a queue and goes on; this thread takes *everything* queued at once (group commit),
//! starts it with a `#BATCH:` marker and writes it, then raises `durable_lsn` and wakes the
//! executor, which releases the replies it held. The only wait on the executor is
//! back-pressure when the queue exceeds [`QUEUE_MAX_BYTES`] (the disk is slower than the
//! write rate), as Redis blocks when an fsync lags by more than two seconds.
//!
//! Two engines: with io_uring (`uring.rs`, the default where the kernel allows it) up to
//! `aof-inflight-syncs` batches are being made durable at once; without it (setup
//! refused, or a backend without a real file such as the fault injector) one `pwrite` +
//! one `fdatasync` at a time on this thread. Incremental files may be pre-allocated and
//! pre-zeroed ahead of the write position (`prealloc.rs`), written with O_DIRECT|O_DSYNC
//! (`aof-direct-io`), and retired ones recycled (`aof-recycle`).
//!
//! After a failed write or sync nothing more is written nor acknowledged (sticky error,
//! as fsync errors leave the page cache in an unknown state); the executor refuses writes
//! with `-MISCONF` from then on.

use super::format::FILL_LINE;
use super::prealloc::Prealloc;
use super::storage::{pwritev_all, LogDir, LogFile};
use super::uring::{self, Engine, BLOCK};
use rewrite_steps::{NextFile, Retired};

mod rewrite_steps;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Queued bytes above which the executor waits for the writer (back-pressure).
pub const QUEUE_MAX_BYTES: usize = 64 << 20;
/// How often the writer wakes when idle (everysec fsync, disk-space check).
const TICK: Duration = Duration::from_millis(100);
/// fsync latency samples kept for the p99.
const FSYNC_SAMPLES: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncMode {
    Always,
    EverySec,
    No,
}

impl FsyncMode {
    pub fn parse(s: &str) -> FsyncMode {
        match s {
            "always" => FsyncMode::Always,
            "no" => FsyncMode::No,
            _ => FsyncMode::EverySec,
        }
    }
}

/// How the writer does its I/O (config: `aof-preallocate-bytes`, `aof-recycle`,
/// `aof-direct-io`; io_uring unless `CAIRN_AOF_NO_URING=1`).
#[derive(Clone, Debug, Default)]
pub struct IoOpts {
    /// Keep the incremental file written with zeroes this far ahead (0: off).
    pub preallocate_bytes: u64,
    /// Reuse the retired incremental file after a rewrite instead of deleting it.
    pub recycle: bool,
    /// Write with O_DIRECT|O_DSYNC (needs io_uring).
    pub direct_io: bool,
    /// Try io_uring.
    pub uring: bool,
    /// Durable writes in flight at most (`aof-inflight-syncs`; 0 means 1).
    pub inflight: usize,
}

pub enum Job {
    /// Framed entries for the current incremental file, ending with entry `last_lsn`.
    Append { data: Vec<u8>, last_lsn: u64 },
    /// Like [`Job::Append`], with entries whose large values are referred to, not copied
    /// (`format::encode_entry_ref`): this thread checksums them where they are
    /// (`format::fill_ref_checksums`) and writes them from there with the rest of its batch
    /// (one `pwritev`), then raises [`Shared::values_done_lsn`] to `last_lsn` so the
    /// executor can unpin their blocks.
    AppendRefs {
        data: Vec<u8>,
        refs: Vec<super::format::ValueRef>,
        last_lsn: u64,
    },
    /// BGREWRITEAOF's start: create `new_incr` (or rename the spare into it, with
    /// `aof-recycle`), start pre-allocating it, and commit `manifest` (the current layout
    /// plus `new_incr`, as Redis 7 does when it opens a new incremental file at a
    /// rewrite's start) when given. Nothing is written to it until the [`Job::Rotate`]
    /// that names it: an empty (or filler-only) last incremental file is a valid log
    /// end, so a crash in between loads the same dataset. Done ahead of the cut so the cut
    /// itself creates nothing: replies held for durability then wait only for the old
    /// file's last sync, not for a file creation, a manifest and a pre-allocation
    /// catching up (figures: BENCHMARKS.md, "AOF rewrite stall").
    Prepare {
        new_incr: String,
        manifest: Option<Manifest>,
        status: Arc<JobStatus>,
    },
    /// BGREWRITEAOF's cut (queued while the executor is stopped there, so every entry
    /// before it is at most the cut's LSN and every entry after it is later): make the
    /// current file durable and append to `new_incr` from now on — the file a
    /// [`Job::Prepare`] made ready, or else created here (and `manifest` committed) as
    /// that job would. On failure the log goes on in the current file.
    Rotate {
        new_incr: String,
        manifest: Option<Manifest>,
        status: Arc<JobStatus>,
    },
    /// A rewrite ended without a commit (failed or cancelled): the current file's
    /// pre-allocation goes back to keeping `aof-preallocate-bytes` ready, and a file retired
    /// at the cut (still listed) is cut back to its log, so every listed file but the last
    /// is exactly its entries again.
    EndRewrite { status: Arc<JobStatus> },
    /// BGREWRITEAOF's end (the new base is complete and durable): commit `manifest`, then
    /// delete the files it no longer lists (with `aof-recycle`, the last incremental
    /// file among them becomes the spare instead, for the next rotation).
    Commit {
        manifest: Manifest,
        obsolete: Vec<String>,
        base_bytes: u64,
        status: Arc<JobStatus>,
    },
}

/// A manifest to write atomically: its file name and contents.
#[derive(Clone)]
pub struct Manifest {
    pub name: String,
    pub text: Vec<u8>,
}

/// How a control job ended, for the executor to poll.
#[derive(Default)]
pub struct JobStatus(std::sync::atomic::AtomicU8);

impl JobStatus {
    const PENDING: u8 = 0;
    const DONE: u8 = 1;
    const FAILED: u8 = 2;
    /// None while the writer has not run the job yet; then whether it succeeded.
    pub fn outcome(&self) -> Option<bool> {
        match self.0.load(Ordering::SeqCst) {
            Self::PENDING => None,
            v => Some(v == Self::DONE),
        }
    }
    fn set(&self, ok: bool) {
        let v = if ok { Self::DONE } else { Self::FAILED };
        self.0.store(v, Ordering::SeqCst);
    }
}

/// Who appends to the incremental file (see [`Lease`]).
enum LeaseSlot {
    /// The writer thread: appends come as [`Job::Append`].
    Writer,
    /// The writer offers the file; the executor takes it at its next flush.
    Offered(Lease),
    /// The executor appends (pwrite) and syncs (its own ring).
    Executor,
    /// A rotation waits: the executor gives the file back at its next flush.
    Revoked,
    /// Given back: the log's end in the file and the highest LSN an fsync was issued for.
    Returned { off: u64, sync_submitted: u64 },
}

/// The incremental file lent to the executor: where the log ends and the pre-allocation
/// helper to ask for room.
///
/// Why: a batch through the writer thread costs cross-thread wake-ups (executor → writer
/// → io_uring worker → writer → executor), and every reply waits for the thread's
/// hand-over, under `everysec` and `no` too (figures: BENCHMARKS.md, "AOF: `appendfsync
/// always`, `everysec` and `no`", "Why `always` is where it is"). With the lease the
/// executor `pwrite`s the batch into the page cache at the end of its turn (as Redis's
/// beforeSleep does; the file is pre-allocated, so no block allocation and no journal) and
/// submits the `fdatasync` to its own io_uring, whose completion rings an eventfd in the
/// executor's poll set: one kernel worker does the sync, one wake-up comes back, and the
/// executor never waits for the disk. The writer thread keeps everything else: rotation,
/// pre-allocation, `everysec` syncs, the disk-space watermark, direct I/O.
pub struct Lease {
    file: std::fs::File,
    off: u64,
    /// The file is recycled: every write ends with a filler line (see [`Thread::write_batch`]).
    terminate: bool,
    prealloc: Option<super::prealloc::PreallocHandle>,
    /// A test backend's injected faults (`storage::FaultHook`), applied by the executor.
    fault_hook: Option<Arc<dyn super::storage::FaultHook>>,
}

struct Queue {
    jobs: VecDeque<Job>,
    bytes: usize,
    shutdown: bool,
    lease: LeaseSlot,
    mode: FsyncMode,
    disk_min_free: u64,
    /// `aof-disk-min-free` as a percentage of the filesystem (0: use the size).
    disk_min_free_pct: u64,
}

/// State shared by the executor and the writer thread.
pub struct Shared {
    q: Mutex<Queue>,
    work: Condvar,
    space: Condvar,
    /// Highest LSN known to be on stable storage.
    pub durable_lsn: AtomicU64,
    /// Highest LSN handed to the kernel.
    pub written_lsn: AtomicU64,
    pub failed: AtomicBool,
    error: Mutex<Option<String>>,
    /// Free space is under `aof-disk-min-free`.
    pub disk_low: AtomicBool,
    pub free_bytes: AtomicU64,
    pub incr_bytes: AtomicU64,
    pub base_bytes: AtomicU64,
    pub queued_bytes: AtomicU64,
    pub fsyncs: AtomicU64,
    fsync_us: Mutex<VecDeque<u64>>,
    notifier: Mutex<Option<Box<dyn Fn() + Send>>>,
    /// The io_uring engine's eventfd (-1: the thread engine, woken by `work`); owned by
    /// `wake_owned`, so it stays open as long as anyone can write to it.
    wake_fd: std::sync::atomic::AtomicI32,
    wake_owned: Mutex<Option<std::os::fd::OwnedFd>>,
    /// The io_uring writer is about to wait and could take new work: the executor writes
    /// the eventfd only then (a wake-up while every slot is in flight would be a wasted
    /// context switch per executor turn on a 2-core machine).
    want_wake: AtomicBool,
    /// "uring", "uring-direct" or "thread" (INFO `aof_io_engine`).
    pub engine: Mutex<&'static str>,
    /// Retired incremental files reused (INFO `aof_recycled_files`).
    pub recycled: AtomicU64,
    /// The executor has a ring of its own: the writer may lend it the file.
    exec_ready: AtomicBool,
    /// Batches the executor appended itself (INFO `aof_executor_batches`).
    pub exec_batches: AtomicU64,
    /// `aof-inflight-syncs`: the executor's ring has the writer's depth.
    inflight: usize,
    /// A rotation called the lease back (the executor answers at its next flush, even
    /// with nothing to append).
    called_back: AtomicBool,
    /// `DEBUG AOF-PAUSE-SYNCS 1`: no group fsync is issued (writes still reach the file),
    /// so nothing more becomes durable — tests hold `always` replies and dirty-key reads
    /// this way for as long as they need to look. A rotation (BGREWRITEAOF's cut) and
    /// shutdown still sync: they must.
    syncs_paused: AtomicBool,
    /// Highest `last_lsn` of a [`Job::AppendRefs`] whose values this thread has written
    /// (or dropped, the log having failed): the executor unpins the blocks of entries up to
    /// it (`Aof::released_pins`).
    pub values_done_lsn: AtomicU64,
    /// `DEBUG AOF-HOLD-VALUES 1`: this thread waits before reading referenced values (a
    /// slow writer for tests: the executor goes on, overwriting or deleting their keys).
    hold_values: AtomicBool,
}

fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

impl Shared {
    /// Queues a job. An append waits only when the queue is over [`QUEUE_MAX_BYTES`]; a
    /// control job never waits (BGREWRITEAOF's cut queues one while the executor is
    /// stopped).
    pub fn submit(&self, job: Job) {
        let n = match &job {
            Job::Append { data, .. } => data.len(),
            Job::AppendRefs { data, refs, .. } => {
                data.len() + refs.iter().map(|r| r.len).sum::<usize>()
            }
            _ => 0,
        };
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        // A rotation needs the file's end: an offer is withdrawn, a lease called back.
        let mut call_back = false;
        if matches!(job, Job::Rotate { .. }) {
            match q.lease {
                LeaseSlot::Offered(_) => q.lease = LeaseSlot::Writer,
                LeaseSlot::Executor => {
                    q.lease = LeaseSlot::Revoked;
                    self.called_back.store(true, Ordering::SeqCst);
                    call_back = true;
                }
                _ => {}
            }
        }
        while n > 0 && q.bytes > QUEUE_MAX_BYTES && !self.failed.load(Ordering::SeqCst) {
            q = self
                .space
                .wait_timeout(q, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if matches!(job, Job::Append { .. } | Job::AppendRefs { .. }) {
            // The executor queues an append only when it holds no lease (it gave the file
            // back, or was never offered it). The writer may have taken the file back and
            // offered it again between that and this push: the offer is withdrawn with the
            // push, or the executor's next batch would take it and write at the offset
            // this one is about to be written at.
            debug_assert!(!matches!(q.lease, LeaseSlot::Executor | LeaseSlot::Revoked));
            if matches!(q.lease, LeaseSlot::Offered(_)) {
                q.lease = LeaseSlot::Writer;
            }
        }
        q.bytes += n;
        self.queued_bytes.store(q.bytes as u64, Ordering::Relaxed);
        q.jobs.push_back(job);
        drop(q);
        self.work.notify_one();
        let fd = self.wake_fd.load(Ordering::SeqCst);
        if fd >= 0 && self.want_wake.swap(false, Ordering::SeqCst) {
            uring::wake(fd);
        }
        if call_back {
            // The executor gives the file back at its next flush: wake it for one.
            self.notify();
        }
    }

    /// The writer thread waits for work (or a returned lease) at most one [`TICK`].
    fn wait_work<'a>(
        &self,
        q: std::sync::MutexGuard<'a, Queue>,
    ) -> std::sync::MutexGuard<'a, Queue> {
        self.work
            .wait_timeout(q, TICK)
            .unwrap_or_else(|e| e.into_inner())
            .0
    }

    /// Wakes the writer thread whatever it waits in (a returned lease).
    fn wake_writer(&self) {
        self.work.notify_all();
        let fd = self.wake_fd.load(Ordering::SeqCst);
        if fd >= 0 {
            uring::wake(fd);
        }
    }

    /// The sticky error text (strerror), if a write or sync failed.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn set_notifier(&self, f: Box<dyn Fn() + Send>) {
        *self.notifier.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }
    pub fn fsync_p99_us(&self) -> u64 {
        self.fsync_percentile_us(99)
    }
    /// Percentile `p` (0..=100) of the last [`FSYNC_SAMPLES`] durable operations' latency
    /// (issue to completion seen), µs.
    pub fn fsync_percentile_us(&self, p: usize) -> u64 {
        let s = self.fsync_us.lock().unwrap_or_else(|e| e.into_inner());
        if s.is_empty() {
            return 0;
        }
        let mut v: Vec<u64> = s.iter().copied().collect();
        v.sort_unstable();
        v[(v.len() * p.min(100) / 100).min(v.len() - 1)]
    }
    fn notify(&self) {
        if let Some(f) = self
            .notifier
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            f();
        }
    }
    fn record_sync_us(&self, us: u64) {
        let mut s = self.fsync_us.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() >= FSYNC_SAMPLES {
            s.pop_front();
        }
        s.push_back(us);
    }
    fn fail(&self, what: &str, e: &std::io::Error) {
        let text = strerror(e);
        crate::warning!("AOF {what} failed: {text}. Refusing writes until restart.");
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
        self.failed.store(true, Ordering::SeqCst);
        self.notify();
    }
}

/// The executor's handle on the writer thread.
pub struct Writer {
    pub shared: Arc<Shared>,
    join: Option<std::thread::JoinHandle<()>>,
    /// The executor's own appends (see [`Lease`]); None until the event loop gives it an
    /// eventfd for completions ([`Writer::enable_executor_appends`]).
    exec: Option<ExecAppends>,
}

/// The executor's side of a lease: the file while it holds it, and its fsync ring.
struct ExecAppends {
    engine: Engine,
    lease: Option<Lease>,
    /// Highest LSN the executor wrote to the file.
    written: u64,
    /// Highest LSN an fsync on `engine` was issued for.
    sync_submitted: u64,
    /// Files of given-back leases, kept open until the fsyncs issued on them complete
    /// (the ring looks the descriptor up when it runs the operation, not when queued).
    retired: Vec<std::fs::File>,
}

impl ExecAppends {
    /// Gives the file back: (log end, highest LSN an fsync was issued for).
    fn give_back(&mut self) -> Option<(u64, u64)> {
        let l = self.lease.take()?;
        if self.engine.inflight() > 0 {
            self.retired.push(l.file);
        }
        Some((l.off, self.sync_submitted))
    }
}

/// Why the executor could not append a batch itself.
enum LeasedWrite {
    Done,
    /// The pre-allocation helper is behind: the writer thread (which may wait) takes it.
    NotPrepared,
    Failed,
}

impl Writer {
    /// Starts the thread engine without pre-allocation. `incr` is open with `incr_len`
    /// valid bytes; new data goes there.
    pub fn start(
        dir: Box<dyn LogDir>,
        incr: Box<dyn LogFile>,
        incr_len: u64,
        last_lsn: u64,
        mode: FsyncMode,
        disk_min_free: u64,
    ) -> std::io::Result<Writer> {
        Self::start_opts(
            dir,
            incr,
            None,
            incr_len,
            last_lsn,
            mode,
            disk_min_free,
            IoOpts::default(),
        )
    }

    /// Starts the thread. `incr` (named `incr_name` in `dir`) has `incr_len` valid bytes;
    /// new data goes there, after them.
    #[allow(clippy::too_many_arguments)]
    pub fn start_opts(
        dir: Box<dyn LogDir>,
        incr: Box<dyn LogFile>,
        incr_name: Option<&str>,
        incr_len: u64,
        last_lsn: u64,
        mode: FsyncMode,
        disk_min_free: u64,
        opts: IoOpts,
    ) -> std::io::Result<Writer> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue {
                jobs: VecDeque::new(),
                bytes: 0,
                shutdown: false,
                mode,
                disk_min_free,
                disk_min_free_pct: 0,
                lease: LeaseSlot::Writer,
            }),
            work: Condvar::new(),
            space: Condvar::new(),
            durable_lsn: AtomicU64::new(last_lsn),
            written_lsn: AtomicU64::new(last_lsn),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            disk_low: AtomicBool::new(false),
            free_bytes: AtomicU64::new(u64::MAX),
            incr_bytes: AtomicU64::new(incr_len),
            base_bytes: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            fsync_us: Mutex::new(VecDeque::new()),
            notifier: Mutex::new(None),
            wake_fd: std::sync::atomic::AtomicI32::new(-1),
            wake_owned: Mutex::new(None),
            want_wake: AtomicBool::new(false),
            engine: Mutex::new("thread"),
            recycled: AtomicU64::new(0),
            exec_ready: AtomicBool::new(false),
            exec_batches: AtomicU64::new(0),
            inflight: opts.inflight,
            called_back: AtomicBool::new(false),
            syncs_paused: AtomicBool::new(false),
            values_done_lsn: AtomicU64::new(last_lsn),
            hold_values: AtomicBool::new(false),
        });
        let mut t = Thread {
            shared: shared.clone(),
            dir,
            incr,
            incr_name: incr_name.map(str::to_string),
            incr_off: incr_len,
            incr_recycled: false,
            synced_lsn: last_lsn,
            sync_submitted: last_lsn,
            last_sync: Instant::now(),
            last_disk_check: None,
            engine: None,
            prealloc: None,
            direct: None,
            opts,
            next: None,
            retired: None,
            splices: Vec::new(),
            values_lsn: None,
        };
        if t.opts.uring && t.incr.real_file().is_some() {
            match uring::eventfd().and_then(|efd| {
                let e = Engine::new(efd.as_raw_fd(), t.opts.inflight)?;
                Ok((efd, e))
            }) {
                Ok((efd, e)) => {
                    shared.wake_fd.store(efd.as_raw_fd(), Ordering::SeqCst);
                    *shared.wake_owned.lock().unwrap_or_else(|e| e.into_inner()) = Some(efd);
                    t.engine = Some(e);
                }
                Err(e) => crate::notice!(
                    "io_uring unavailable for the AOF ({e}): using the thread writer (one fsync at a time)"
                ),
            }
        }
        t.setup_file(None);
        t.check_disk((disk_min_free, 0));
        let join = std::thread::Builder::new()
            .name("cairn-aof".into())
            .spawn(move || t.run())?;
        Ok(Writer {
            shared,
            join: Some(join),
            exec: None,
        })
    }

    /// Queues a job. Waits only when the queue is over [`QUEUE_MAX_BYTES`].
    pub fn submit(&self, job: Job) {
        self.shared.submit(job)
    }

    /// Lets the executor append and sync itself while the writer lends it the file (see
    /// [`Lease`]): `completion_fd` is an eventfd in the executor's poll set, rung when one
    /// of its fsyncs completes. Only with the io_uring engine (not the thread engine, nor
    /// a backend without a real file such as the fault injector).
    pub fn enable_executor_appends(&mut self, completion_fd: std::os::fd::RawFd) {
        if self.exec.is_some() || self.shared.wake_fd.load(Ordering::SeqCst) < 0 {
            return;
        }
        match Engine::with_completion_eventfd(completion_fd, self.shared.inflight) {
            Ok(engine) => {
                self.exec = Some(ExecAppends {
                    engine,
                    lease: None,
                    written: 0,
                    sync_submitted: 0,
                    retired: Vec::new(),
                });
                self.shared.exec_ready.store(true, Ordering::SeqCst);
                self.shared.wake_writer();
            }
            Err(e) => crate::notice!(
                "AOF: no io_uring for the executor's fsyncs ({e}): the writer thread appends"
            ),
        }
    }

    /// Appends a batch of framed entries ending with `last_lsn`: written by the executor
    /// itself while it holds the file (then synced on its ring when `sync`), else queued
    /// for the writer thread.
    ///
    /// `buf` is left empty with its capacity when the executor wrote it (no allocation
    /// per batch); handed over whole to the writer thread otherwise.
    pub fn append(&mut self, buf: &mut Vec<u8>, last_lsn: u64, sync: bool) {
        if !self.try_append_leased(buf, last_lsn, sync) {
            let data = std::mem::take(buf);
            self.shared.submit(Job::Append { data, last_lsn });
        }
    }

    /// Appends a batch with entries whose values are referred to (`refs`, see
    /// [`Job::AppendRefs`]): always through this thread, which copies and checksums the
    /// values off the executor. A file lent to the executor is given back first (the
    /// thread offers it again once its queue is empty).
    pub fn append_refs(
        &mut self,
        buf: &mut Vec<u8>,
        refs: Vec<super::format::ValueRef>,
        last_lsn: u64,
    ) {
        if let Some(x) = self.exec.as_mut() {
            let mut q = lock_queue(&self.shared);
            if matches!(q.lease, LeaseSlot::Executor | LeaseSlot::Revoked) {
                hand_back(&mut q, x, &self.shared);
                drop(q);
                self.shared.wake_writer();
            }
        }
        let data = std::mem::take(buf);
        self.shared.submit(Job::AppendRefs {
            data,
            refs,
            last_lsn,
        });
    }

    /// `DEBUG AOF-HOLD-VALUES`: while held, the writer thread waits before reading the
    /// values of entries logged by reference (and so before everything queued after them).
    pub fn hold_values(&self, held: bool) {
        self.shared.hold_values.store(held, Ordering::SeqCst);
        if !held {
            self.shared.wake_writer();
        }
    }

    /// The executor's own append; false when the batch must go to the writer thread.
    fn try_append_leased(&mut self, data: &mut Vec<u8>, last_lsn: u64, sync: bool) -> bool {
        if let Some(x) = self.exec.as_mut() {
            let mut q = lock_queue(&self.shared);
            match std::mem::replace(&mut q.lease, LeaseSlot::Writer) {
                LeaseSlot::Offered(l) => {
                    x.engine.set_fault_hook(l.fault_hook.clone());
                    x.lease = Some(l);
                    q.lease = LeaseSlot::Executor;
                }
                LeaseSlot::Revoked => {
                    hand_back(&mut q, x, &self.shared);
                    drop(q);
                    self.shared.wake_writer();
                    return false;
                }
                other => q.lease = other,
            }
            if matches!(q.lease, LeaseSlot::Executor) {
                // Written under the queue's lock: a rotation cannot call the file back
                // between the check and the write.
                match write_leased(&self.shared, x, data, last_lsn) {
                    LeasedWrite::Done => {
                        drop(q);
                        data.clear();
                        if sync {
                            x.start_sync(&self.shared);
                        }
                        return true;
                    }
                    LeasedWrite::Failed => {
                        data.clear();
                        return true;
                    }
                    LeasedWrite::NotPrepared => hand_back(&mut q, x, &self.shared),
                }
            }
        }
        false
    }

    /// Collects the executor's completed fsyncs: raises `durable_lsn` (or fails the log),
    /// and issues the next fsync when written entries wait for one. Cheap (no system call
    /// unless an fsync is issued); returns true if the durable LSN moved.
    pub fn reap_executor_syncs(&mut self) -> bool {
        let Some(x) = self.exec.as_mut() else {
            return false;
        };
        if x.engine.inflight() == 0 {
            return false;
        }
        let r = x.engine.reap();
        if x.engine.inflight() == 0 {
            x.retired.clear();
        }
        let sh = &self.shared;
        for us in &r.latencies_us {
            sh.record_sync_us(*us);
        }
        sh.fsyncs
            .fetch_add(r.latencies_us.len() as u64, Ordering::Relaxed);
        if let Some((what, e)) = r.error {
            if !sh.failed.load(Ordering::SeqCst) {
                sh.fail(what, &e);
            }
            return true;
        }
        let mut moved = false;
        if let Some(d) = r.durable {
            if !sh.failed.load(Ordering::SeqCst) {
                moved = sh.durable_lsn.fetch_max(d, Ordering::SeqCst) < d;
            }
        }
        x.start_sync(sh);
        moved
    }

    /// Gives the file back if a rotation called it back (the executor's flush with
    /// nothing to append).
    pub fn answer_call_back(&mut self) {
        if !self.shared.called_back.load(Ordering::SeqCst) {
            return;
        }
        let Some(x) = self.exec.as_mut() else {
            return;
        };
        let mut q = lock_queue(&self.shared);
        if !matches!(q.lease, LeaseSlot::Revoked) {
            return;
        }
        hand_back(&mut q, x, &self.shared);
        drop(q);
        self.shared.wake_writer();
    }

    /// `DEBUG AOF-PAUSE-SYNCS`: while paused no group fsync is issued; on resume the executor
    /// (if it holds the file) and the writer sync what was written meanwhile.
    pub fn pause_syncs(&mut self, paused: bool) {
        self.shared.syncs_paused.store(paused, Ordering::SeqCst);
        if !paused {
            if let Some(x) = self.exec.as_mut() {
                x.start_sync(&self.shared);
            }
            self.shared.wake_writer();
        }
    }

    /// The executor appends itself now (it holds the file).
    pub fn holds_lease(&self) -> bool {
        self.exec.as_ref().is_some_and(|x| x.lease.is_some())
    }

    /// The log would start on new entries at once: the executor holds the file and its
    /// ring has room, or the io_uring writer waits for work (the thread engine: never
    /// reported, it takes work whenever it is queued).
    pub fn wants_work(&self) -> bool {
        match &self.exec {
            Some(x) if x.lease.is_some() => x.engine.can_submit(),
            _ => self.shared.want_wake.load(Ordering::Relaxed),
        }
    }

    /// `disk_min_free_pct` > 0 overrides `disk_min_free` (a share of the filesystem).
    pub fn set_params(&self, mode: FsyncMode, disk_min_free: u64, disk_min_free_pct: u64) {
        let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
        q.mode = mode;
        q.disk_min_free = disk_min_free;
        q.disk_min_free_pct = disk_min_free_pct;
    }

    /// Writes and syncs everything queued, then stops the thread.
    pub fn shutdown(&mut self) {
        {
            let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
            // The file goes back to the writer first (it syncs and closes it).
            let lent = self.exec.as_mut().and_then(ExecAppends::give_back);
            match (&q.lease, lent) {
                (_, Some((off, sync_submitted))) => {
                    q.lease = LeaseSlot::Returned {
                        off,
                        sync_submitted,
                    }
                }
                (LeaseSlot::Offered(_), None) => q.lease = LeaseSlot::Writer,
                _ => {}
            }
            q.shutdown = true;
        }
        self.shared.work.notify_one();
        let fd = self.shared.wake_fd.load(Ordering::SeqCst);
        if fd >= 0 {
            uring::wake(fd);
        }
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A torn write for fault injection: the first `prefix` bytes of `parts` at `offset`.
fn write_prefix(
    file: &std::fs::File,
    parts: &[&[u8]],
    offset: u64,
    prefix: usize,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(&parts.concat()[..prefix], offset)
}

/// A returned lease's (log end, fsync LSN issued); the slot goes back to the writer.
fn returned(q: &mut Queue) -> Option<(u64, u64)> {
    if let LeaseSlot::Returned {
        off,
        sync_submitted,
    } = q.lease
    {
        q.lease = LeaseSlot::Writer;
        return Some((off, sync_submitted));
    }
    None
}

/// Puts the executor's file back into the slot (`Returned`, or `Writer` if it held none)
/// and answers any call-back.
fn hand_back(q: &mut Queue, x: &mut ExecAppends, sh: &Shared) {
    sh.called_back.store(false, Ordering::SeqCst);
    q.lease = match x.give_back() {
        Some((off, sync_submitted)) => LeaseSlot::Returned {
            off,
            sync_submitted,
        },
        None => LeaseSlot::Writer,
    };
}

fn lock_queue(sh: &Shared) -> std::sync::MutexGuard<'_, Queue> {
    sh.q.lock().unwrap_or_else(|e| e.into_inner())
}

impl ExecAppends {
    /// Issues an fdatasync for what was written and not yet covered, if the ring has room
    /// (else the next reap does it).
    fn start_sync(&mut self, sh: &Shared) {
        if self.written <= self.sync_submitted
            || !self.engine.can_submit()
            || sh.failed.load(Ordering::SeqCst)
            || sh.syncs_paused.load(Ordering::SeqCst)
        {
            return;
        }
        let Some(l) = &self.lease else {
            return;
        };
        match self.engine.submit_fsync(l.file.as_raw_fd(), self.written) {
            Ok(()) => self.sync_submitted = self.written,
            Err(e) => sh.fail("fsync", &e),
        }
    }
}

/// The executor's append of one batch into the lent file (the writer thread's
/// `write_batch`, buffered case).
fn write_leased(sh: &Shared, x: &mut ExecAppends, data: &[u8], last_lsn: u64) -> LeasedWrite {
    use std::os::unix::fs::FileExt;
    if sh.failed.load(Ordering::SeqCst) {
        return LeasedWrite::Failed;
    }
    let Some(l) = x.lease.as_mut() else {
        return LeasedWrite::NotPrepared;
    };
    // marker, entries, alignment: one pwritev from the executor's buffers (no copy).
    let mut marker = Vec::with_capacity(64);
    super::format::encode_batch_marker(&mut marker, sh.durable_lsn.load(Ordering::SeqCst));
    let mut align = Vec::new();
    let mut len = (marker.len() + data.len()) as u64;
    let terminator: &[u8] = if l.terminate { FILL_LINE } else { &[] };
    if let Some(p) = &l.prealloc {
        let gap = super::format::align_gap(l.off + len);
        if gap > 0 {
            super::format::encode_align(&mut align, gap);
        }
        len += align.len() as u64;
        if !p.ready(l.off + len + terminator.len() as u64) {
            return LeasedWrite::NotPrepared;
        }
    }
    let written = match l
        .fault_hook
        .as_ref()
        .and_then(|h| h.before_write(len as usize))
    {
        Some((errno, prefix)) => write_prefix(&l.file, &[&marker, data, &align], l.off, prefix)
            .and(Err(std::io::Error::from_raw_os_error(errno))),
        None => pwritev_all(&l.file, &[&marker, data, &align, terminator], l.off),
    };
    match written {
        Ok(()) => {
            l.off += len;
            sh.incr_bytes.store(l.off, Ordering::Relaxed);
            sh.written_lsn.store(last_lsn, Ordering::SeqCst);
            sh.exec_batches.fetch_add(1, Ordering::Relaxed);
            x.written = last_lsn;
            LeasedWrite::Done
        }
        Err(e) => {
            // The log must end on an entry boundary: zero what reached a pre-allocated
            // file (keeping its blocks), cut it off otherwise.
            if l.prealloc.is_some() {
                let _ = l.file.write_all_at(&vec![0u8; len as usize], l.off);
            } else {
                let _ = l.file.set_len(l.off);
            }
            sh.fail("write", &e);
            LeasedWrite::Failed
        }
    }
}

struct Thread {
    shared: Arc<Shared>,
    dir: Box<dyn LogDir>,
    incr: Box<dyn LogFile>,
    incr_name: Option<String>,
    /// End of the log's content in the incremental file (where the next batch goes).
    incr_off: u64,
    /// The incremental file is a recycled one, its old bytes past the log.
    incr_recycled: bool,
    synced_lsn: u64,
    /// Highest LSN an fsync in flight (or done) covers (io_uring buffered mode).
    sync_submitted: u64,
    last_sync: Instant,
    last_disk_check: Option<Instant>,
    engine: Option<Engine>,
    prealloc: Option<Prealloc>,
    direct: Option<Direct>,
    opts: IoOpts,
    /// The incremental file a [`Job::Prepare`] made ready for the next rotation.
    next: Option<NextFile>,
    /// The file a rotation to a prepared file retired (see [`Retired`]).
    retired: Option<Retired>,
    /// The batch's values logged by reference, in order: (position in the batch's bytes,
    /// the value's address, its length). Written from where they are (pinned arena
    /// blocks) by the batch's `pwritev`.
    splices: Vec<(usize, usize, usize)>,
    /// The highest `last_lsn` of the batch's [`Job::AppendRefs`]: raised into
    /// [`Shared::values_done_lsn`] once the batch is written.
    values_lsn: Option<u64>,
}

/// Direct-I/O state of the incremental file.
struct Direct {
    file: std::fs::File,
    /// The bytes of the log's partial last block (from its start to `incr_off`).
    tail: Vec<u8>,
    /// End of the last write (block aligned): where a write goes when it cannot rewrite
    /// the partial block because an earlier write may still be in flight.
    write_end: u64,
}

impl Thread {
    /// Sets up pre-allocation (`prealloc`: a helper already working on this file) and
    /// direct I/O for the current incremental file.
    fn setup_file(&mut self, prealloc: Option<Prealloc>) {
        self.prealloc = None;
        self.direct = None;
        if let Some(engine) = self.engine.as_mut() {
            engine.set_fault_hook(self.incr.fault_hook());
        }
        let name = self.incr_name.clone();
        let path = name.as_deref().and_then(|n| self.dir.path_of(n));
        let (Some(engine), Some(path)) = (self.engine.as_mut(), path) else {
            *self.shared.engine.lock().unwrap_or_else(|e| e.into_inner()) = "thread";
            return;
        };
        engine.set_ordered(false);
        let mut label = "uring";
        if self.opts.direct_io {
            match open_direct(&path, self.incr_off) {
                Ok(d) => {
                    engine.set_ordered(true);
                    self.direct = Some(d);
                    label = "uring-direct";
                }
                Err(e) => crate::warning!(
                    "aof-direct-io: can't open {} with O_DIRECT ({e}): using buffered writes",
                    path.display()
                ),
            }
        }
        *self.shared.engine.lock().unwrap_or_else(|e| e.into_inner()) = label;
        if prealloc.is_some() {
            self.prealloc = prealloc;
        } else if self.opts.preallocate_bytes > 0 {
            let ahead = self.opts.preallocate_bytes;
            self.prealloc = start_prealloc(self.incr.as_mut(), self.incr_off + ahead, ahead);
        }
    }

    fn run(mut self) {
        let mut batch: Vec<u8> = Vec::new();
        loop {
            // With io_uring, new work is taken only when it can be submitted: what waits
            // stays in the queue, where it counts for the executor's back-pressure.
            let can_take = self.engine.as_ref().is_none_or(|e| e.can_submit());
            let (jobs, mode, min_free, shutdown, back) = {
                let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
                if self.engine.is_none() && q.jobs.is_empty() && !q.shutdown {
                    q = self.shared.wait_work(q);
                }
                let jobs = if can_take {
                    q.bytes = 0;
                    self.shared.queued_bytes.store(0, Ordering::Relaxed);
                    std::mem::take(&mut q.jobs)
                } else {
                    VecDeque::new()
                };
                (
                    jobs,
                    q.mode,
                    (q.disk_min_free, q.disk_min_free_pct),
                    q.shutdown,
                    returned(&mut q),
                )
            };
            self.take_back(back);
            let took = !jobs.is_empty();
            if took {
                self.shared.space.notify_all();
            }
            let mut last_lsn = None;
            for job in jobs {
                match job {
                    Job::Append { data, last_lsn: l } => {
                        batch.extend_from_slice(&data);
                        last_lsn = Some(l);
                    }
                    Job::AppendRefs {
                        data,
                        refs,
                        last_lsn: l,
                    } => {
                        self.wait_while_values_held();
                        // SAFETY: the executor pinned each value's block before framing
                        // its entry and unpins it only once `values_done_lsn` covers
                        // `l`, raised after the batch holding it is written
                        // (`release_values`): until then the block is neither written
                        // nor freed, and the arena's reservation never moves (the same
                        // contract as a reply's `RefSeg`).
                        let values: Vec<&[u8]> = refs
                            .iter()
                            .map(|r| unsafe {
                                std::slice::from_raw_parts(r.addr as *const u8, r.len)
                            })
                            .collect();
                        let mut data = data;
                        super::format::fill_ref_checksums(&mut data, &refs, &values);
                        drop(values);
                        let mut from = 0;
                        for r in &refs {
                            batch.extend_from_slice(&data[from..r.at]);
                            self.splices.push((batch.len(), r.addr, r.len));
                            from = r.at;
                        }
                        batch.extend_from_slice(&data[from..]);
                        self.values_lsn = Some(self.values_lsn.unwrap_or(0).max(l));
                        last_lsn = Some(l);
                    }
                    Job::Prepare { .. } => {
                        // Touches only the next file: the current one (maybe lent to the
                        // executor) goes on as it is.
                        self.write_batch(&mut batch, last_lsn.take());
                        self.control(job);
                    }
                    other => {
                        // A rotation needs the file's end: the executor gives it back.
                        if matches!(other, Job::Rotate { .. }) {
                            self.reclaim_lease();
                        }
                        // Keep order: what was appended before goes to the old file.
                        self.write_batch(&mut batch, last_lsn.take());
                        self.drain();
                        self.control(other);
                    }
                }
            }
            let written_before = self.shared.written_lsn.load(Ordering::SeqCst);
            self.write_batch(&mut batch, last_lsn);
            let written = self.shared.written_lsn.load(Ordering::SeqCst);
            // everysec/no release replies once written (Redis's guarantee there).
            if mode != FsyncMode::Always && written > written_before {
                self.shared.notify();
            }
            let due = match mode {
                _ if self.shared.syncs_paused.load(Ordering::SeqCst) => false,
                FsyncMode::Always => true,
                FsyncMode::EverySec => self.last_sync.elapsed() >= Duration::from_secs(1),
                FsyncMode::No => shutdown,
            };
            if shutdown {
                self.drain();
                if written > self.synced_lsn {
                    self.sync(written);
                }
            } else if due && written > self.sync_submitted && !self.lent_for_always(mode) {
                self.start_sync(written);
            }
            self.offer_lease();
            if self.engine.is_some() {
                let can = self.engine.as_ref().is_some_and(Engine::can_submit);
                // Ask for a wake-up on new work only when it could be taken, then look at
                // the queue again (work queued before the flag was seen is not missed).
                self.shared.want_wake.store(can, Ordering::SeqCst);
                let queued = can
                    && !self
                        .shared
                        .q
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .jobs
                        .is_empty();
                let r = if took || queued || shutdown {
                    self.engine.as_mut().map(Engine::reap)
                } else {
                    self.engine.as_mut().map(|e| e.wait(TICK))
                };
                if let Some(r) = r {
                    self.handle(r);
                }
            }
            if self.last_disk_check.is_none_or(|t| t.elapsed() >= TICK) {
                self.check_disk(min_free);
            }
            if shutdown {
                let q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
                if q.jobs.is_empty() {
                    drop(q);
                    self.close_file();
                    self.discard_next();
                    return;
                }
            }
        }
    }

    /// `DEBUG AOF-HOLD-VALUES 1` (tests): waits until it is lifted or the log shuts down.
    fn wait_while_values_held(&self) {
        let mut q = lock_queue(&self.shared);
        while self.shared.hold_values.load(Ordering::SeqCst) && !q.shutdown {
            q = self.shared.wait_work(q);
        }
    }

    /// Takes a returned lease back: the log's end is where the executor left it.
    fn take_back(&mut self, returned: Option<(u64, u64)>) {
        if let Some((off, sync_submitted)) = returned {
            self.incr_off = off;
            self.shared.incr_bytes.store(off, Ordering::Relaxed);
            self.sync_submitted = self.sync_submitted.max(sync_submitted);
        }
    }

    /// With `always`, the executor syncs what it appends while it holds the file.
    fn lent_for_always(&self, mode: FsyncMode) -> bool {
        mode == FsyncMode::Always
            && matches!(
                lock_queue(&self.shared).lease,
                LeaseSlot::Executor | LeaseSlot::Revoked
            )
    }

    /// Before a rotation: waits until the executor gave the file back (it does at its next
    /// flush, which the call-back in `Shared::submit` woke it for).
    fn reclaim_lease(&mut self) {
        let mut q = lock_queue(&self.shared);
        loop {
            match q.lease {
                LeaseSlot::Writer => return,
                LeaseSlot::Offered(_) => {
                    q.lease = LeaseSlot::Writer;
                    return;
                }
                LeaseSlot::Returned { .. } => {
                    let r = returned(&mut q);
                    drop(q);
                    self.take_back(r);
                    return;
                }
                LeaseSlot::Executor => {
                    q.lease = LeaseSlot::Revoked;
                    self.shared.called_back.store(true, Ordering::SeqCst);
                    drop(q);
                    self.shared.notify();
                    q = lock_queue(&self.shared);
                }
                LeaseSlot::Revoked => {
                    if q.shutdown {
                        return;
                    }
                    q = self.shared.wait_work(q);
                }
            }
        }
    }

    /// Offers the file to the executor when it can append itself: io_uring buffered
    /// writes to a real file, no error, nothing queued (see [`Lease`]).
    fn offer_lease(&mut self) {
        if !self.shared.exec_ready.load(Ordering::SeqCst)
            || self.engine.is_none()
            || self.direct.is_some()
            || self.shared.failed.load(Ordering::SeqCst)
        {
            return;
        }
        let mut q = lock_queue(&self.shared);
        if !matches!(q.lease, LeaseSlot::Writer) || !q.jobs.is_empty() || q.shutdown {
            return;
        }
        let Some(file) = self.incr.real_file().and_then(|f| f.try_clone().ok()) else {
            return;
        };
        q.lease = LeaseSlot::Offered(Lease {
            file,
            off: self.incr_off,
            terminate: self.incr_recycled,
            prealloc: self.prealloc.as_ref().map(Prealloc::handle),
            fault_hook: self.incr.fault_hook(),
        });
    }

    /// Applies what the engine reaped: durable LSN, latencies, a sticky error.
    fn handle(&mut self, r: uring::Reaped) {
        for us in &r.latencies_us {
            self.shared.record_sync_us(*us);
        }
        self.shared
            .fsyncs
            .fetch_add(r.latencies_us.len() as u64, Ordering::Relaxed);
        if let Some((what, e)) = r.error {
            if !self.shared.failed.load(Ordering::SeqCst) {
                self.shared.fail(what, &e);
            }
            return;
        }
        if let Some(d) = r.durable {
            if d > self.synced_lsn && !self.shared.failed.load(Ordering::SeqCst) {
                self.synced_lsn = d;
                self.last_sync = Instant::now();
                if self.direct.is_some() {
                    self.shared.written_lsn.fetch_max(d, Ordering::SeqCst);
                }
                self.shared.durable_lsn.fetch_max(d, Ordering::SeqCst);
                self.shared.notify();
            }
        }
    }

    /// Waits for everything in flight (before a control job, at shutdown).
    fn drain(&mut self) {
        if let Some(r) = self.engine.as_mut().map(Engine::drain) {
            self.handle(r);
        }
    }

    /// Clean close: the pre-allocated or padded part past the log's end is cut off, so a
    /// cleanly closed file is exactly its entries (and loads in Redis 7).
    fn close_file(&mut self) {
        self.prealloc = None;
        self.direct = None;
        if self.shared.failed.load(Ordering::SeqCst) {
            return;
        }
        if self.incr.file_len().is_ok_and(|l| l > self.incr_off) {
            let _ = self
                .incr
                .set_len(self.incr_off)
                .and_then(|_| self.incr.sync_data());
        }
    }

    fn write_batch(&mut self, batch: &mut Vec<u8>, last_lsn: Option<u64>) {
        let Some(l) = last_lsn else {
            return;
        };
        if self.shared.failed.load(Ordering::SeqCst) {
            batch.clear();
            self.release_values();
            return;
        }
        // The marker states what was durable when this write was issued (recovery tells a
        // hole left by writes in flight at a crash from corruption with it).
        let mut marker = Vec::with_capacity(64);
        super::format::encode_batch_marker(
            &mut marker,
            self.shared.durable_lsn.load(Ordering::SeqCst),
        );
        // SAFETY: each splice is a value pinned for the log until `release_values` below
        // (see the `Job::AppendRefs` arm in `run`): its bytes neither change nor go away.
        let values: Vec<&[u8]> = self
            .splices
            .iter()
            .map(|&(_, addr, len)| unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
            .collect();
        let mut parts: Vec<&[u8]> = vec![&marker];
        parts.extend(super::format::spliced(
            batch,
            self.splices.iter().map(|s| s.0).zip(values.iter().copied()),
        ));
        let content_len: usize = parts.iter().map(|p| p.len()).sum();
        if self.direct.is_some() {
            // Whole aligned blocks from one buffer: the values are copied here.
            let framed = parts.concat();
            drop(parts);
            drop(values);
            batch.clear();
            self.write_direct(&framed, l);
            self.release_values();
            return;
        }
        let mut tail = Vec::new();
        if self.prealloc.is_some() {
            let gap = super::format::align_gap(self.incr_off + content_len as u64);
            if gap > 0 {
                super::format::encode_align(&mut tail, gap);
            }
        }
        // In a recycled file the log stops inside the old life's bytes, often inside an
        // old command: a filler line after every write (overwritten by the next) tells
        // recovery where the log ends (`format::judge`). Not part of the log's length.
        let log_len = (content_len + tail.len()) as u64;
        if self.incr_recycled {
            tail.extend_from_slice(FILL_LINE);
        }
        parts.push(&tail);
        let total = content_len + tail.len();
        if let Some(p) = &self.prealloc {
            p.ensure(self.incr_off + total as u64);
        }
        // The values go from their arena blocks to the page cache in this one call:
        // joining them into a buffer first cost the thread a 10 MB allocation (page
        // faults, then an munmap whose TLB shootdown interrupts the executor's CPU) and
        // a copy per value.
        let wrote = self.incr.write_all_vectored_at(self.incr_off, &parts);
        drop(parts);
        drop(values);
        batch.clear();
        match wrote {
            Ok(()) => {
                self.incr_off += log_len;
                self.shared
                    .incr_bytes
                    .store(self.incr_off, Ordering::Relaxed);
                self.shared.written_lsn.store(l, Ordering::SeqCst);
            }
            Err(e) => {
                // Cut what reached the file so the log ends on an entry boundary (a
                // pre-allocated file: zero it instead, keeping its blocks).
                if self.prealloc.is_some() {
                    let _ = self.incr.write_all_at(self.incr_off, &vec![0u8; total]);
                } else {
                    let _ = self.incr.set_len(self.incr_off);
                }
                self.shared.fail("write", &e);
            }
        }
        self.release_values();
    }

    /// The batch's values logged by reference are written (or the log failed): the
    /// executor may unpin their blocks.
    fn release_values(&mut self) {
        self.splices.clear();
        if let Some(l) = self.values_lsn.take() {
            self.shared.values_done_lsn.fetch_max(l, Ordering::SeqCst);
            self.shared.notify();
        }
    }

    /// One O_DIRECT|O_DSYNC write: whole blocks, padded with `#PAD:`. With nothing in
    /// flight, the partial last block is rewritten with its bytes unchanged followed by
    /// the new ones (a torn rewrite leaves every old byte intact: each sector holds either
    /// the old or the new bytes, and the old ones are the same in both). With writes in
    /// flight, the new write starts at the next block so no two in-flight writes share one.
    fn write_direct(&mut self, content: &[u8], lsn: u64) {
        let inflight = self.engine.as_ref().map_or(0, Engine::inflight);
        let Some(d) = self.direct.as_mut() else {
            return;
        };
        let (start, tail): (u64, &[u8]) = if inflight == 0 && d.write_end > self.incr_off {
            (self.incr_off - d.tail.len() as u64, &d.tail)
        } else {
            (d.write_end.max(self.incr_off), &[])
        };
        let buf = uring::direct_buffer(tail, content);
        let content_end = start + (tail.len() + content.len()) as u64;
        let new_tail_start = content_end / BLOCK as u64 * BLOCK as u64;
        let new_tail = buf.as_slice()
            [(new_tail_start - start) as usize..(content_end - start) as usize]
            .to_vec();
        let end = start + buf.as_slice().len() as u64;
        if let Some(p) = &self.prealloc {
            p.ensure(end);
        }
        let fd = d.file.as_raw_fd();
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        match engine.submit_write(fd, start, buf, lsn) {
            Ok(()) => {
                d.tail = new_tail;
                d.write_end = end;
                self.incr_off = content_end;
                self.shared
                    .incr_bytes
                    .store(self.incr_off, Ordering::Relaxed);
            }
            Err(e) => self.shared.fail("write", &e),
        }
    }

    /// Makes `written` durable: an fsync in flight (io_uring; direct writes need none) or
    /// a synchronous one (thread engine).
    fn start_sync(&mut self, written: u64) {
        if self.shared.failed.load(Ordering::SeqCst) || self.direct.is_some() {
            return;
        }
        let fd = self.incr.real_file().map(|f| f.as_raw_fd());
        if let (Some(engine), Some(fd)) = (self.engine.as_mut(), fd) {
            match engine.submit_fsync(fd, written) {
                Ok(()) => self.sync_submitted = written,
                Err(e) => self.shared.fail("fsync", &e),
            }
            return;
        }
        self.sync(written);
    }

    fn sync(&mut self, written: u64) {
        if self.shared.failed.load(Ordering::SeqCst) {
            return;
        }
        let t = Instant::now();
        match self.incr.sync_data() {
            Ok(()) => {
                self.shared.record_sync_us(t.elapsed().as_micros() as u64);
                self.shared.fsyncs.fetch_add(1, Ordering::Relaxed);
                self.synced_lsn = written;
                self.sync_submitted = self.sync_submitted.max(written);
                self.last_sync = Instant::now();
                self.shared.written_lsn.fetch_max(written, Ordering::SeqCst);
                self.shared.durable_lsn.store(written, Ordering::SeqCst);
                self.shared.notify();
            }
            Err(e) => self.shared.fail("fsync", &e),
        }
    }

    fn check_disk(&mut self, (min_bytes, min_pct): (u64, u64)) {
        self.last_disk_check = Some(Instant::now());
        let min_free = if min_pct > 0 {
            match self.dir.total_bytes() {
                Ok(t) => t / 100 * min_pct,
                Err(_) => min_bytes,
            }
        } else {
            min_bytes
        };
        if let Ok(free) = self.dir.free_bytes() {
            self.shared.free_bytes.store(free, Ordering::Relaxed);
            let low = min_free > 0 && free < min_free;
            let was = self.shared.disk_low.swap(low, Ordering::SeqCst);
            if low && !was {
                crate::warning!(
                    "AOF disk free space {free} bytes is under aof-disk-min-free {min_free}: refusing writes"
                );
            } else if !low && was {
                crate::notice!(
                    "AOF disk free space is back over aof-disk-min-free: accepting writes"
                );
            }
        }
    }
}

/// Starts pre-allocating `file` up to `target` (then `ahead` beyond the log's end): None
/// without a real file or when the helper can't start (appends then grow the file).
fn start_prealloc(file: &mut dyn LogFile, target: u64, ahead: u64) -> Option<Prealloc> {
    let size = file.file_len().ok()?;
    let f = file.real_file().and_then(|f| f.try_clone().ok())?;
    match Prealloc::start(f, size, target, ahead) {
        Ok(p) => Some(p),
        Err(e) => {
            crate::warning!("Can't start the AOF pre-allocation thread: {e}");
            None
        }
    }
}

/// The spare (recycled) file of the log whose files are named like `incr_name`:
/// `<appendfilename>.spare.aof`.
pub fn spare_name_for(incr_name: &str) -> String {
    // `<prefix>.<seq>.incr.aof` → `<prefix>`.
    let prefix = incr_name
        .strip_suffix(".incr.aof")
        .and_then(|p| p.rsplit_once('.'))
        .map_or(incr_name, |(p, _)| p);
    format!("{prefix}.spare.aof")
}

/// Opens the incremental file for direct I/O and reads the partial last block of its log
/// (rewritten, unchanged, by the next write).
fn open_direct(path: &std::path::Path, log_end: u64) -> std::io::Result<Direct> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
        .open(path)?;
    let block_start = log_end / BLOCK as u64 * BLOCK as u64;
    let mut tail = vec![0u8; (log_end - block_start) as usize];
    if !tail.is_empty() {
        // A buffered handle: O_DIRECT reads would need an aligned buffer.
        std::fs::File::open(path)?.read_exact_at(&mut tail, block_start)?;
    }
    Ok(Direct {
        file,
        tail,
        write_end: log_end.div_ceil(BLOCK as u64) * BLOCK as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::super::storage::{FsDir, LogDir};
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-writer-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(lsn: u64) -> Vec<u8> {
        let mut cmd = Vec::new();
        super::super::format::encode_command(&mut cmd, &[&b"SET"[..], b"k", b"v"]);
        let mut out = Vec::new();
        super::super::format::encode_entry(&mut out, lsn, &"a".repeat(40), lsn * 10, &cmd);
        out
    }

    fn wait(st: &JobStatus) -> bool {
        let t = Instant::now();
        loop {
            if let Some(ok) = st.outcome() {
                return ok;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "job never ran");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Entries queued before a Rotate go to the old file, after it to the new one; the
    /// rotate's manifest is written first; Commit writes its manifest and deletes the
    /// obsolete files.
    #[test]
    fn rotate_splits_the_log_in_queue_order_and_commit_retires_files() {
        let dir = temp_dir("rotate");
        let mut d = FsDir::new(&dir);
        let f = d.open_append("p.1.incr.aof").unwrap();
        let w = Writer::start_opts(
            Box::new(FsDir::new(&dir)),
            f,
            Some("p.1.incr.aof"),
            0,
            0,
            FsyncMode::Always,
            0,
            IoOpts::default(),
        )
        .unwrap();
        w.submit(Job::Append {
            data: [entry(1), entry(2)].concat(),
            last_lsn: 2,
        });
        let rotated = Arc::new(JobStatus::default());
        w.submit(Job::Rotate {
            new_incr: "p.2.incr.aof".into(),
            manifest: Some(Manifest {
                name: "p.manifest".into(),
                text: b"rotated".to_vec(),
            }),
            status: rotated.clone(),
        });
        w.submit(Job::Append {
            data: entry(3),
            last_lsn: 3,
        });
        assert!(wait(&rotated));
        let t = Instant::now();
        while w.shared.durable_lsn.load(Ordering::SeqCst) < 3 {
            assert!(t.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(2));
        }
        let scan = |name: &str| {
            let b = std::fs::read(dir.join(name)).unwrap();
            let o = super::super::format::scan(&b, None, |_| Ok(()));
            assert!(o.bad.is_none(), "{name}: {:?}", o.bad);
            (o.entries, o.last_lsn)
        };
        assert_eq!(scan("p.1.incr.aof"), (2, Some(2)));
        assert_eq!(scan("p.2.incr.aof"), (1, Some(3)));
        assert_eq!(std::fs::read(dir.join("p.manifest")).unwrap(), b"rotated");
        let committed = Arc::new(JobStatus::default());
        std::fs::write(dir.join("p.1.base.aof"), b"old base").unwrap();
        w.submit(Job::Commit {
            manifest: Manifest {
                name: "p.manifest".into(),
                text: b"committed".to_vec(),
            },
            obsolete: vec!["p.1.base.aof".into(), "p.1.incr.aof".into()],
            base_bytes: 77,
            status: committed.clone(),
        });
        assert!(wait(&committed));
        assert_eq!(std::fs::read(dir.join("p.manifest")).unwrap(), b"committed");
        assert!(!dir.join("p.1.incr.aof").exists());
        assert!(!dir.join("p.1.base.aof").exists());
        assert_eq!(w.shared.base_bytes.load(Ordering::Relaxed), 77);
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// BGREWRITEAOF's start prepares the next file and commits the manifest listing it;
    /// entries keep going to the current file until the rotation, which takes the prepared
    /// file without writing the manifest again; the retired file keeps its filler (and
    /// still scans to its last entry) until the rewrite ends without a commit, which cuts
    /// it back to its log. A prepared file no rotation took is cut to an empty log at
    /// shutdown (the manifest may list it).
    #[test]
    fn prepared_file_is_listed_at_the_start_and_taken_at_the_rotation() {
        let dir = temp_dir("prepare");
        let mut d = FsDir::new(&dir);
        let f = d.open_append("p.1.incr.aof").unwrap();
        let opts = IoOpts {
            preallocate_bytes: 1 << 20,
            uring: true,
            ..IoOpts::default()
        };
        let w = Writer::start_opts(
            Box::new(FsDir::new(&dir)),
            f,
            Some("p.1.incr.aof"),
            0,
            0,
            FsyncMode::Always,
            0,
            opts,
        )
        .unwrap();
        let manifest = |text: &[u8]| {
            Some(Manifest {
                name: "p.manifest".into(),
                text: text.to_vec(),
            })
        };
        w.submit(Job::Append {
            data: [entry(1), entry(2)].concat(),
            last_lsn: 2,
        });
        let prepared = Arc::new(JobStatus::default());
        w.submit(Job::Prepare {
            new_incr: "p.2.incr.aof".into(),
            manifest: manifest(b"listed"),
            status: prepared.clone(),
        });
        w.submit(Job::Append {
            data: entry(3),
            last_lsn: 3,
        });
        assert!(wait(&prepared));
        assert_eq!(std::fs::read(dir.join("p.manifest")).unwrap(), b"listed");
        assert!(dir.join("p.2.incr.aof").exists());
        let rotated = Arc::new(JobStatus::default());
        w.submit(Job::Rotate {
            new_incr: "p.2.incr.aof".into(),
            manifest: manifest(b"written again"),
            status: rotated.clone(),
        });
        w.submit(Job::Append {
            data: entry(4),
            last_lsn: 4,
        });
        assert!(wait(&rotated));
        let t = Instant::now();
        while w.shared.durable_lsn.load(Ordering::SeqCst) < 4 {
            assert!(t.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(std::fs::read(dir.join("p.manifest")).unwrap(), b"listed");
        let scan = |name: &str| {
            let b = std::fs::read(dir.join(name)).unwrap();
            let o = super::super::format::scan(&b, None, |_| Ok(()));
            assert!(o.bad.is_none(), "{name}: {:?}", o.bad);
            (o.entries, o.last_lsn, b.len())
        };
        let (n, last, len) = scan("p.1.incr.aof");
        assert_eq!((n, last), (3, Some(3)));
        assert!(
            len > 3 * entry(1).len(),
            "the retired file keeps its filler"
        );
        assert_eq!(scan("p.2.incr.aof").0, 1);
        assert_eq!(scan("p.2.incr.aof").1, Some(4));
        // The rewrite ends without a commit: the retired file is cut back to its log.
        let ended = Arc::new(JobStatus::default());
        w.submit(Job::EndRewrite {
            status: ended.clone(),
        });
        assert!(wait(&ended));
        let b = std::fs::read(dir.join("p.1.incr.aof")).unwrap();
        let o = super::super::format::scan(&b, None, |_| Ok(()));
        assert_eq!((o.entries, o.valid_len), (3, b.len() as u64));
        assert!(!o.zero_tail, "no filler left");
        // Prepared, never taken: empty at shutdown.
        let again = Arc::new(JobStatus::default());
        w.submit(Job::Prepare {
            new_incr: "p.3.incr.aof".into(),
            manifest: manifest(b"listed 3"),
            status: again.clone(),
        });
        assert!(wait(&again));
        drop(w);
        assert_eq!(
            std::fs::metadata(dir.join("p.3.incr.aof")).unwrap().len(),
            0
        );
        assert_eq!(scan("p.2.incr.aof").1, Some(4));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An `always` writer on `dir/p.1.incr.aof` whose executor side appends itself
    /// (completions ring `efd`); None where io_uring is refused (the lease path is then
    /// not testable here).
    fn leased_writer(
        dir: &std::path::Path,
        opts: IoOpts,
        efd: &std::os::fd::OwnedFd,
    ) -> Option<Writer> {
        let f = FsDir::new(dir).open_append("p.1.incr.aof").unwrap();
        let mut w = Writer::start_opts(
            Box::new(FsDir::new(dir)),
            f,
            Some("p.1.incr.aof"),
            0,
            0,
            FsyncMode::Always,
            0,
            opts,
        )
        .unwrap();
        w.enable_executor_appends(efd.as_raw_fd());
        if w.exec.is_none() {
            eprintln!("io_uring refused here: the lease path is not testable");
            return None;
        }
        Some(w)
    }

    /// The executor's path: the writer lends the file, the executor appends and syncs on
    /// its own ring; a pre-allocation helper that cannot keep up (tiny `ahead`) makes it
    /// give the file back and the writer take those batches; a rotation calls the lease
    /// back. Every entry ends up in order in the right file, durable, and the executor
    /// wrote some of them itself.
    #[test]
    fn executor_appends_through_the_lease_with_fallbacks_and_a_rotation() {
        let dir = temp_dir("lease");
        let opts = IoOpts {
            preallocate_bytes: 8 << 10,
            uring: true,
            inflight: 1,
            ..IoOpts::default()
        };
        let efd = uring::eventfd().unwrap();
        let Some(mut w) = leased_writer(&dir, opts, &efd) else {
            return;
        };
        let mut lsn = 0;
        let mut buf = Vec::new();
        let wait_durable = |w: &mut Writer, lsn: u64| {
            let t = Instant::now();
            while w.shared.durable_lsn.load(Ordering::SeqCst) < lsn {
                w.reap_executor_syncs();
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "never durable: {lsn}"
                );
                std::thread::sleep(Duration::from_micros(200));
            }
        };
        // Wait for the first offer, then append batches of 1-4 entries.
        let t = Instant::now();
        while !matches!(lock_queue(&w.shared).lease, LeaseSlot::Offered(_)) {
            assert!(t.elapsed() < Duration::from_secs(5), "no lease offered");
            std::thread::sleep(Duration::from_millis(1));
        }
        let wait_offer = |w: &Writer| {
            let t = Instant::now();
            while !w.holds_lease() && !matches!(lock_queue(&w.shared).lease, LeaseSlot::Offered(_))
            {
                assert!(t.elapsed() < Duration::from_secs(5), "no lease offered");
                std::thread::sleep(Duration::from_millis(1));
            }
            // Let the pre-allocation helper get ahead again, so the next appends are ours.
            std::thread::sleep(Duration::from_millis(5));
        };
        for i in 0..300u64 {
            if i % 50 == 25 {
                wait_offer(&w);
            }
            for _ in 0..(i % 4 + 1) {
                lsn += 1;
                buf.extend_from_slice(&entry(lsn));
            }
            w.append(&mut buf, lsn, true);
            assert!(buf.is_empty());
            w.reap_executor_syncs();
            if i == 150 {
                wait_durable(&mut w, lsn);
                let rotated = Arc::new(JobStatus::default());
                w.submit(Job::Rotate {
                    new_incr: "p.2.incr.aof".into(),
                    manifest: None,
                    status: rotated.clone(),
                });
                // The executor answers the call-back at its next flush.
                let t = Instant::now();
                while rotated.outcome().is_none() {
                    w.answer_call_back();
                    assert!(t.elapsed() < Duration::from_secs(5), "rotation stuck");
                    std::thread::sleep(Duration::from_millis(1));
                }
                assert_eq!(rotated.outcome(), Some(true));
            }
        }
        wait_durable(&mut w, lsn);
        let own = w.shared.exec_batches.load(Ordering::Relaxed);
        assert!(own > 0, "the executor never appended itself");
        assert!(own < 300, "the writer never took a batch ({own})");
        drop(w);
        let scan = |name: &str| {
            let b = std::fs::read(dir.join(name)).unwrap();
            let o = super::super::format::scan(&b, None, |_| Ok(()));
            assert!(o.bad.is_none(), "{name}: {:?}", o.bad);
            (o.entries, o.last_lsn)
        };
        let (n1, last1) = scan("p.1.incr.aof");
        let (n2, last2) = scan("p.2.incr.aof");
        assert_eq!(n1 + n2, lsn, "entries lost or repeated");
        assert_eq!(last2, Some(lsn));
        assert_eq!(last1, Some(n1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Rotations while the executor appends as fast as it can, through the lease and its
    /// fallbacks (a pre-allocation helper kept short of room), recycling every retired
    /// file: each file holds exactly the entries from the previous cut to its own, in
    /// order, and scans clean.
    #[test]
    fn rotations_under_executor_appends_keep_every_file_exactly_its_entries() {
        let dir = temp_dir("lease-rotations");
        let opts = IoOpts {
            preallocate_bytes: 16 << 10,
            uring: true,
            recycle: true,
            inflight: 2,
            ..IoOpts::default()
        };
        let efd = uring::eventfd().unwrap();
        let Some(mut w) = leased_writer(&dir, opts, &efd) else {
            return;
        };
        let scan_file = |name: &str| {
            let b = std::fs::read(dir.join(name)).unwrap();
            let mut lsns = Vec::new();
            let o = super::super::format::scan(&b, None, |e| {
                lsns.push(e.lsn.unwrap());
                Ok(())
            });
            (lsns, o)
        };
        let mut lsn = 0u64;
        let mut buf = Vec::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut first_of_file = 1u64;
        for seq in 2..=25u32 {
            let name = format!("p.{seq}.incr.aof");
            let prepared = Arc::new(JobStatus::default());
            w.submit(Job::Prepare {
                new_incr: name.clone(),
                manifest: None,
                status: prepared.clone(),
            });
            // Appends, then the cut (as the executor is stopped there: its entries so far
            // are queued or written), then more appends while the writer switches.
            let mut rotated = None;
            for i in 0..(40 + next(80)) {
                for _ in 0..(1 + next(4)) {
                    lsn += 1;
                    buf.extend_from_slice(&entry(lsn));
                }
                w.append(&mut buf, lsn, true);
                w.reap_executor_syncs();
                w.answer_call_back();
                if i == 20 {
                    let st = Arc::new(JobStatus::default());
                    w.submit(Job::Rotate {
                        new_incr: name.clone(),
                        manifest: None,
                        status: st.clone(),
                    });
                    rotated = Some((st, lsn));
                }
                if next(3) == 0 {
                    std::thread::sleep(Duration::from_micros(next(300)));
                }
            }
            let (st, cut) = rotated.unwrap();
            let t = Instant::now();
            while st.outcome().is_none() {
                w.reap_executor_syncs();
                w.answer_call_back();
                assert!(t.elapsed() < Duration::from_secs(10), "rotation stuck");
                std::thread::sleep(Duration::from_micros(200));
            }
            assert_eq!(st.outcome(), Some(true));
            let old = format!("p.{}.incr.aof", seq - 1);
            let (lsns, o) = scan_file(&old);
            let want: Vec<u64> = (first_of_file..=cut).collect();
            assert_eq!(lsns, want, "{old}: {:?}", o.bad);
            // What follows the log (filler, or a recycled file's old life) is its end.
            assert!(
                o.bad
                    .as_ref()
                    .is_none_or(|b| b.damage != super::super::format::Damage::Corruption),
                "{old}: {:?}",
                o.bad
            );
            first_of_file = cut + 1;
            let committed = Arc::new(JobStatus::default());
            w.submit(Job::Commit {
                manifest: Manifest {
                    name: "p.manifest".into(),
                    text: format!("up to {seq}").into_bytes(),
                },
                obsolete: vec![old],
                base_bytes: 0,
                status: committed.clone(),
            });
            assert!(wait(&committed));
        }
        let t = Instant::now();
        while w.shared.durable_lsn.load(Ordering::SeqCst) < lsn {
            w.reap_executor_syncs();
            assert!(t.elapsed() < Duration::from_secs(10), "never durable");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(w.shared.exec_batches.load(Ordering::Relaxed) > 0);
        drop(w);
        let (lsns, o) = scan_file("p.25.incr.aof");
        let want: Vec<u64> = (first_of_file..=lsn).collect();
        assert_eq!(lsns, want, "last file: {:?}", o.bad);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn spare_name_keeps_the_prefix() {
        assert_eq!(
            spare_name_for("appendonly.aof.3.incr.aof"),
            "appendonly.aof.spare.aof"
        );
        assert_eq!(spare_name_for("my log.12.incr.aof"), "my log.spare.aof");
    }
}
