//! The log-writer thread: owns the AOF files, writes what the executor queues, syncs, and
//! publishes how far the log is durable.
//!
//! Architecture invariant: the executor never waits on the disk. It appends framed entries
//! to a queue and goes on; this thread takes *everything* queued at once, writes it with
//! one `pwrite` and (with `appendfsync always`) one `fdatasync` — group commit — then
//! raises `durable_lsn` and wakes the executor, which releases the replies it held. The
//! only wait on the executor is back-pressure when the queue exceeds
//! [`QUEUE_MAX_BYTES`] (the disk is slower than the write rate), as Redis blocks when an
//! fsync lags by more than two seconds.
//!
//! After a failed write or sync nothing more is written nor acknowledged (sticky error,
//! as fsync errors leave the page cache in an unknown state); the executor refuses writes
//! with `-MISCONF` from then on.

use super::storage::{LogDir, LogFile};
use std::collections::VecDeque;
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

pub enum Job {
    /// Framed entries for the current incremental file, ending with entry `last_lsn`.
    Append {
        data: Vec<u8>,
        last_lsn: u64,
    },
    /// Starts a new base file (AOF rewrite).
    BaseBegin {
        name: String,
    },
    BaseData(Vec<u8>),
    /// Ends a rewrite: sync the base, open `new_incr`, commit `manifest`, delete `obsolete`.
    /// Appends queued after this go to the new incremental file.
    Switch {
        new_incr: String,
        manifest_name: String,
        manifest: Vec<u8>,
        obsolete: Vec<String>,
    },
    /// Abandons the base being written.
    BaseAbort,
}

struct Queue {
    jobs: VecDeque<Job>,
    bytes: usize,
    shutdown: bool,
    mode: FsyncMode,
    disk_min_free: u64,
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
    /// Completed rewrites (Switch jobs committed) and failed ones.
    pub switches: AtomicU64,
    pub rewrite_failures: AtomicU64,
    pub fsyncs: AtomicU64,
    fsync_us: Mutex<VecDeque<u64>>,
    notifier: Mutex<Option<Box<dyn Fn() + Send>>>,
}

fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

impl Shared {
    /// The sticky error text (strerror), if a write or sync failed.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn set_notifier(&self, f: Box<dyn Fn() + Send>) {
        *self.notifier.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }
    pub fn fsync_p99_us(&self) -> u64 {
        let s = self.fsync_us.lock().unwrap_or_else(|e| e.into_inner());
        if s.is_empty() {
            return 0;
        }
        let mut v: Vec<u64> = s.iter().copied().collect();
        v.sort_unstable();
        v[(v.len() * 99 / 100).min(v.len() - 1)]
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
}

impl Writer {
    /// Starts the thread. `incr` is open with `incr_len` valid bytes; new data goes there.
    pub fn start(
        dir: Box<dyn LogDir>,
        incr: Box<dyn LogFile>,
        incr_len: u64,
        last_lsn: u64,
        mode: FsyncMode,
        disk_min_free: u64,
    ) -> std::io::Result<Writer> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue {
                jobs: VecDeque::new(),
                bytes: 0,
                shutdown: false,
                mode,
                disk_min_free,
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
            switches: AtomicU64::new(0),
            rewrite_failures: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            fsync_us: Mutex::new(VecDeque::new()),
            notifier: Mutex::new(None),
        });
        let mut t = Thread {
            shared: shared.clone(),
            dir,
            incr,
            incr_off: incr_len,
            base: None,
            synced_lsn: last_lsn,
            last_sync: Instant::now(),
            last_disk_check: None,
        };
        t.check_disk(disk_min_free);
        let join = std::thread::Builder::new()
            .name("cairn-aof".into())
            .spawn(move || t.run())?;
        Ok(Writer {
            shared,
            join: Some(join),
        })
    }

    /// Queues a job. Waits only when the queue is over [`QUEUE_MAX_BYTES`].
    pub fn submit(&self, job: Job) {
        let n = match &job {
            Job::Append { data, .. } | Job::BaseData(data) => data.len(),
            _ => 0,
        };
        let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
        while q.bytes > QUEUE_MAX_BYTES && !self.shared.failed.load(Ordering::SeqCst) {
            q = self
                .shared
                .space
                .wait_timeout(q, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        q.bytes += n;
        self.shared
            .queued_bytes
            .store(q.bytes as u64, Ordering::Relaxed);
        q.jobs.push_back(job);
        drop(q);
        self.shared.work.notify_one();
    }

    pub fn set_params(&self, mode: FsyncMode, disk_min_free: u64) {
        let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
        q.mode = mode;
        q.disk_min_free = disk_min_free;
    }

    /// Writes and syncs everything queued, then stops the thread.
    pub fn shutdown(&mut self) {
        {
            let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
            q.shutdown = true;
        }
        self.shared.work.notify_one();
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

struct Thread {
    shared: Arc<Shared>,
    dir: Box<dyn LogDir>,
    incr: Box<dyn LogFile>,
    incr_off: u64,
    base: Option<(String, Box<dyn LogFile>, u64)>,
    synced_lsn: u64,
    last_sync: Instant,
    last_disk_check: Option<Instant>,
}

impl Thread {
    fn run(mut self) {
        let mut batch: Vec<u8> = Vec::new();
        loop {
            let (jobs, mode, min_free, shutdown) = {
                let mut q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
                if q.jobs.is_empty() && !q.shutdown {
                    q = self
                        .shared
                        .work
                        .wait_timeout(q, TICK)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                let jobs = std::mem::take(&mut q.jobs);
                q.bytes = 0;
                self.shared.queued_bytes.store(0, Ordering::Relaxed);
                (jobs, q.mode, q.disk_min_free, q.shutdown)
            };
            self.shared.space.notify_all();
            let mut last_lsn = None;
            for job in jobs {
                match job {
                    Job::Append { data, last_lsn: l } => {
                        batch.extend_from_slice(&data);
                        last_lsn = Some(l);
                    }
                    other => {
                        // Keep order: what was appended before goes to the old file.
                        self.write_batch(&mut batch, last_lsn.take());
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
                FsyncMode::Always => true,
                FsyncMode::EverySec => self.last_sync.elapsed() >= Duration::from_secs(1),
                FsyncMode::No => shutdown,
            };
            if (due || shutdown) && written > self.synced_lsn {
                self.sync(written);
            }
            if self.last_disk_check.is_none_or(|t| t.elapsed() >= TICK) {
                self.check_disk(min_free);
            }
            if shutdown {
                let q = self.shared.q.lock().unwrap_or_else(|e| e.into_inner());
                if q.jobs.is_empty() {
                    return;
                }
            }
        }
    }

    fn write_batch(&mut self, batch: &mut Vec<u8>, last_lsn: Option<u64>) {
        let Some(l) = last_lsn else {
            return;
        };
        if self.shared.failed.load(Ordering::SeqCst) {
            batch.clear();
            return;
        }
        match self.incr.write_all_at(self.incr_off, batch) {
            Ok(()) => {
                self.incr_off += batch.len() as u64;
                self.shared
                    .incr_bytes
                    .store(self.incr_off, Ordering::Relaxed);
                self.shared.written_lsn.store(l, Ordering::SeqCst);
            }
            Err(e) => {
                // Cut what reached the file so the log ends on an entry boundary.
                let _ = self.incr.set_len(self.incr_off);
                self.shared.fail("write", &e);
            }
        }
        batch.clear();
    }

    fn sync(&mut self, written: u64) {
        if self.shared.failed.load(Ordering::SeqCst) {
            return;
        }
        let t = Instant::now();
        match self.incr.sync_data() {
            Ok(()) => {
                let us = t.elapsed().as_micros() as u64;
                {
                    let mut s = self
                        .shared
                        .fsync_us
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if s.len() >= FSYNC_SAMPLES {
                        s.pop_front();
                    }
                    s.push_back(us);
                }
                self.shared.fsyncs.fetch_add(1, Ordering::Relaxed);
                self.synced_lsn = written;
                self.last_sync = Instant::now();
                self.shared.durable_lsn.store(written, Ordering::SeqCst);
                self.shared.notify();
            }
            Err(e) => self.shared.fail("fsync", &e),
        }
    }

    fn check_disk(&mut self, min_free: u64) {
        self.last_disk_check = Some(Instant::now());
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

    fn control(&mut self, job: Job) {
        match job {
            Job::Append { .. } => {}
            Job::BaseBegin { name } => match self.dir.open_append(&name) {
                Ok(mut f) => {
                    let _ = f.set_len(0);
                    self.base = Some((name, f, 0));
                }
                Err(e) => {
                    crate::warning!("Can't open the AOF base file {name}: {}", strerror(&e));
                    self.shared.rewrite_failures.fetch_add(1, Ordering::SeqCst);
                }
            },
            Job::BaseData(data) => {
                if let Some((name, f, off)) = self.base.as_mut() {
                    if let Err(e) = f.write_all_at(*off, &data) {
                        crate::warning!("Writing the AOF base file {name}: {}", strerror(&e));
                        let name = name.clone();
                        self.abort_base(&name);
                        return;
                    }
                    *off += data.len() as u64;
                }
            }
            Job::BaseAbort => {
                if let Some((name, _, _)) = self.base.take() {
                    let _ = self.dir.remove(&name);
                }
            }
            Job::Switch {
                new_incr,
                manifest_name,
                manifest,
                obsolete,
            } => self.switch(new_incr, manifest_name, manifest, obsolete),
        }
    }

    fn abort_base(&mut self, name: &str) {
        self.base = None;
        let _ = self.dir.remove(name);
        self.shared.rewrite_failures.fetch_add(1, Ordering::SeqCst);
    }

    /// Commits a rewrite. The old files stay valid until the manifest's rename, so a crash
    /// at any point leaves a loadable set.
    fn switch(&mut self, new_incr: String, mname: String, manifest: Vec<u8>, old: Vec<String>) {
        let Some((base_name, mut base, base_len)) = self.base.take() else {
            self.shared.rewrite_failures.fetch_add(1, Ordering::SeqCst);
            return;
        };
        if self.shared.failed.load(Ordering::SeqCst) {
            let _ = self.dir.remove(&base_name);
            self.shared.rewrite_failures.fetch_add(1, Ordering::SeqCst);
            return;
        }
        // Everything written to the old incremental file must be durable first: the
        // replies it holds wait for it, and the new base already includes it.
        let written = self.shared.written_lsn.load(Ordering::SeqCst);
        if written > self.synced_lsn {
            self.sync(written);
        }
        let step = (|| -> std::io::Result<Box<dyn LogFile>> {
            base.sync_data()?;
            let mut f = self.dir.open_append(&new_incr)?;
            f.set_len(0)?;
            f.sync_data()?;
            self.dir.write_atomic(&mname, &manifest)?;
            Ok(f)
        })();
        match step {
            Ok(f) => {
                self.incr = f;
                self.incr_off = 0;
                self.shared.incr_bytes.store(0, Ordering::Relaxed);
                self.shared.base_bytes.store(base_len, Ordering::Relaxed);
                for name in old {
                    let _ = self.dir.remove(&name);
                }
                self.shared.switches.fetch_add(1, Ordering::SeqCst);
                self.shared.notify();
            }
            Err(e) => {
                crate::warning!("AOF rewrite could not be committed: {}", strerror(&e));
                let _ = self.dir.remove(&base_name);
                let _ = self.dir.remove(&new_incr);
                self.shared.rewrite_failures.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
