//! Dirty-page tracking for the live snapshot: userfaultfd in asynchronous write-protect
//! mode (`UFFD_FEATURE_WP_ASYNC`: the kernel resolves the write fault itself and only
//! records that the page was written — no user-space handler, no copy) plus the
//! `PAGEMAP_SCAN` ioctl, which lists written pages and write-protects them again in the
//! same walk. `UFFD_FEATURE_WP_UNPOPULATED` makes pages that were never touched (or were
//! zapped) trackable too.
//!
//! Neither `libc` nor `rustix` wraps these; the structs below mirror
//! `include/uapi/linux/userfaultfd.h` and `include/uapi/linux/fs.h` (x86-64 and aarch64
//! share the ioctl numbers).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_AA01;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;

const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}
#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}
#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}
#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}
/// One run of pages `[start, end)` reported by PAGEMAP_SCAN.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct PageRegion {
    pub start: u64,
    pub end: u64,
    pub categories: u64,
}

/// Regions fetched per PAGEMAP_SCAN call.
const SCAN_VEC_LEN: usize = 4096;

/// Write-protect tracking over one registered range (the arena's reservation).
pub struct WpTracker {
    uffd: OwnedFd,
    /// The end of the highest range ever protected.
    hot: u64,
    pagemap: std::fs::File,
    /// More pagemap descriptors for [`WpTracker::harvest_parallel`].
    extra: Vec<std::fs::File>,
    base: u64,
    len: u64,
    regions: Vec<PageRegion>,
    /// False once the range's mapping is gone (nothing to unregister on drop).
    registered: bool,
}

/// The asynchronous tracker the last snapshot kept registered (see [`WpTracker::retire`]).
static KEPT: std::sync::Mutex<Option<WpTracker>> = std::sync::Mutex::new(None);

fn kept() -> std::sync::MutexGuard<'static, Option<WpTracker>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// Unregisters the kept tracker, if any: a freeze-free snapshot registers the range with
/// a descriptor of its own, and a range is registered with one descriptor at a time.
pub fn release_kept() {
    let t = kept().take();
    drop(t);
}

/// The arena at `[base, base+len)` was unmapped: a tracker kept for it is closed without
/// unregistering (its registration went with the mapping, and the addresses may be
/// mapped again, by another arena, before the next snapshot).
pub fn range_unmapped(base: usize, len: usize) {
    let mut k = kept();
    if k.as_ref()
        .is_some_and(|t| t.base == base as u64 && t.len == len as u64)
    {
        if let Some(mut t) = k.take() {
            t.registered = false;
        }
    }
}

/// `UFFDIO_WRITEPROTECT` of `[start, start+len)` with `mode` (`UFFDIO_WRITEPROTECT_MODE_WP`
/// protects, 0 lifts the protection and wakes blocked writers).
fn writeprotect(uffd: &OwnedFd, start: u64, len: u64, mode: u64) -> io::Result<()> {
    let mut wp = UffdioWriteprotect {
        range: UffdioRange { start, len },
        mode,
    };
    // SAFETY: a correctly laid out struct over a range registered with `uffd`.
    check(
        unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp) },
        "UFFDIO_WRITEPROTECT",
    )
}

/// [`writeprotect`] over `[start, start+len)` in calls of at most `slice` bytes: one call
/// over the whole arena holds the mmap lock and the CPU (this kernel does not preempt in
/// system calls) for tens of ms; between slices both are let go.
fn writeprotect_sliced(
    uffd: &OwnedFd,
    start: u64,
    len: u64,
    mode: u64,
    slice: u64,
) -> io::Result<()> {
    let mut at = 0;
    while at < len {
        let n = (len - at).min(slice);
        writeprotect(uffd, start + at, n, mode)?;
        at += n;
    }
    Ok(())
}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

impl WpTracker {
    /// Opens a userfaultfd with WP_ASYNC + WP_UNPOPULATED and registers `[base, base+len)`
    /// for write-protect tracking. Nothing is protected yet. Fails where the kernel or a
    /// sandbox refuses (then the caller falls back to a stop-the-world copy).
    pub fn new(base: usize, len: usize) -> io::Result<WpTracker> {
        // Kernel-mode faults never touch the arena (sockets read into client buffers), so
        // user-mode-only tracking is enough where full userfaultfd is not permitted.
        let uffd = open_registered(
            base,
            len,
            UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED,
            "WP_ASYNC | WP_UNPOPULATED",
        )?;
        let pagemap = match std::fs::File::open("/proc/self/pagemap") {
            Ok(f) => f,
            Err(e) => {
                let mut range = UffdioRange {
                    start: base as u64,
                    len: len as u64,
                };
                // SAFETY: undo the registration above.
                unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_UNREGISTER, &mut range) };
                return Err(e);
            }
        };
        Ok(WpTracker {
            uffd,
            hot: 0,
            pagemap,
            extra: Vec::new(),
            base: base as u64,
            len: len as u64,
            regions: vec![PageRegion::default(); SCAN_VEC_LEN],
            registered: true,
        })
    }

    /// The tracker the last snapshot kept for this range (registered again, which is
    /// cheap and idempotent: the arena's mapping may have been replaced since), else a
    /// new one.
    pub fn reuse_or_new(base: usize, len: usize) -> io::Result<WpTracker> {
        let k = kept().take();
        if let Some(t) = k {
            if t.base == base as u64 && t.len == len as u64 && register(&t.uffd, base, len).is_ok()
            {
                return Ok(t);
            }
            drop(t);
        }
        WpTracker::new(base, len)
    }

    /// Ends a snapshot's tracking without unregistering: lifts every protection, in
    /// slices, and keeps the registration for the next snapshot ([`reuse_or_new`]).
    ///
    /// Why not unregister: `UFFDIO_UNREGISTER` walks every page table under the mmap
    /// *write* lock and splits the arena's VMA as it goes, which stalls clients however it
    /// is sliced (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys"), while
    /// `UFFDIO_WRITEPROTECT` takes the mmap lock for reading only, so the executor's page
    /// faults run alongside. A registration with nothing protected costs nothing.
    ///
    /// [`reuse_or_new`]: WpTracker::reuse_or_new
    pub fn retire(self) {
        let lifted =
            writeprotect_sliced(&self.uffd, self.base, self.hot, 0, UNREGISTER_SLICE_BYTES);
        if lifted.is_err() {
            // Unregistering (on drop) lifts whatever is left.
            return;
        }
        // The arena tells us when its mapping goes (the kept registration goes with it).
        crate::arena::on_unmap(range_unmapped);
        let old = kept().replace(self);
        drop(old);
    }

    /// Write-protects `[off, off+len)` of the range: a later write marks a page written.
    pub fn protect(&mut self, off: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.hot = self.hot.max(off + len);
        writeprotect_sliced(
            &self.uffd,
            self.base + off,
            len,
            UFFDIO_WRITEPROTECT_MODE_WP,
            PROTECT_SLICE_BYTES,
        )
    }

    /// Calls `f(offset, len)` for every run of pages in `[off, off+len)` written since it
    /// was last protected, and write-protects those pages again in the same walk (so a
    /// write that lands after the walk passed a page shows up in the next harvest).
    pub fn harvest(&mut self, off: u64, len: u64, mut f: impl FnMut(u64, u64)) -> io::Result<()> {
        scan_written(
            &self.pagemap,
            &mut self.regions,
            self.base,
            off,
            len,
            Reprotect::Yes,
            &mut f,
        )
    }

    /// [`WpTracker::harvest`] with the range split over `threads` threads (each its own
    /// pagemap descriptor): the walk is O(page tables), so the final pause's harvest
    /// shortens with the cores that are idle while the executor is stopped. Runs come back
    /// in ascending order. A live harvest (`Reprotect::Yes`) walks on spawned, niced
    /// threads, pinned to `on_cpu` if given; the caller only gathers their runs.
    pub fn harvest_parallel(
        &mut self,
        off: u64,
        len: u64,
        threads: usize,
        reprotect: Reprotect,
        on_cpu: Option<usize>,
        mut f: impl FnMut(u64, u64),
    ) -> io::Result<()> {
        let threads = threads.clamp(1, 8);
        let page = crate::arena::PAGE_BYTES as u64;
        let part = (len / threads as u64).next_multiple_of(page).max(page);
        let live = reprotect == Reprotect::Yes;
        if (threads == 1 || len <= part) && !(live && on_cpu.is_some()) {
            return scan_written(
                &self.pagemap,
                &mut self.regions,
                self.base,
                off,
                len,
                reprotect,
                &mut f,
            );
        }
        while self.extra.len() < threads - 1 {
            self.extra.push(std::fs::File::open("/proc/self/pagemap")?);
        }
        let base = self.base;
        let mut parts: Vec<io::Result<Vec<(u64, u64)>>> = Vec::new();
        let walk_part = |pm: &std::fs::File, i: usize| -> io::Result<Vec<(u64, u64)>> {
            let start = off + i as u64 * part;
            let end = (start + part).min(off + len);
            let mut runs = Vec::new();
            if start >= end {
                return Ok(runs);
            }
            let mut regions = vec![PageRegion::default(); SCAN_VEC_LEN];
            scan_written(
                pm,
                &mut regions,
                base,
                start,
                end - start,
                reprotect,
                &mut |o, l| runs.push((o, l)),
            )
            .map(|_| runs)
        };
        // Live harvests run on spawned threads at normal priority that walk in short
        // stints and yield between them (see LIVE_SCAN_STINT): the executor never waits
        // more than one stint, and the walk still gets its share of the CPU. Niced or
        // SCHED_IDLE walks get too little of it and the final set and the pause grow; a
        // niced walk without stints, once picked, holds the CPU up to a tick (figures:
        // BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M keys", "Stints"). The final
        // harvest runs in the pause, with part 0 on this thread (one thread start less).
        std::thread::scope(|s| {
            let first_spawned = usize::from(!live);
            let handles: Vec<_> = std::iter::once(&self.pagemap)
                .chain(self.extra.iter())
                .take(threads)
                .enumerate()
                .skip(first_spawned)
                .map(|(i, pm)| {
                    s.spawn(move || {
                        let _pin = on_cpu.map(super::OnCpu::pin);
                        walk_part(pm, i)
                    })
                })
                .collect();
            if !live {
                parts.push(walk_part(&self.pagemap, 0));
            }
            for h in handles {
                parts.push(
                    h.join()
                        .unwrap_or_else(|_| Err(io::Error::other("harvest thread panicked"))),
                );
            }
        });
        for p in parts {
            for (o, l) in p? {
                f(o, l);
            }
        }
        Ok(())
    }
}

impl WpTracker {
    /// [`WpTracker::harvest`] over each of `runs` (ascending, disjoint `(offset, len)`
    /// of the range): the regions the dirty map marked. A live harvest
    /// (`Reprotect::Yes`) with `on_cpu` walks on a spawned thread pinned there (see
    /// [`WpTracker::harvest_parallel`]); otherwise on this thread. Returns the number of
    /// PAGEMAP_SCAN calls made.
    pub fn harvest_runs(
        &mut self,
        runs: &[(u64, u64)],
        reprotect: Reprotect,
        on_cpu: Option<usize>,
        mut f: impl FnMut(u64, u64),
    ) -> io::Result<u64> {
        if runs.is_empty() {
            return Ok(0);
        }
        let base = self.base;
        let walk = |pm: &std::fs::File,
                    regions: &mut [PageRegion],
                    f: &mut dyn FnMut(u64, u64)|
         -> io::Result<u64> {
            let mut calls = 0;
            let mut stint = std::time::Instant::now();
            for &(off, len) in runs {
                if reprotect == Reprotect::Yes && stint.elapsed() >= LIVE_SCAN_STINT {
                    // SAFETY: no arguments.
                    unsafe { libc::sched_yield() };
                    stint = std::time::Instant::now();
                }
                calls += len.div_ceil(match reprotect {
                    Reprotect::Yes => LIVE_SCAN_SLICE_BYTES,
                    Reprotect::No => SCAN_SLICE_BYTES,
                });
                scan_written(pm, regions, base, off, len, reprotect, f)?;
            }
            Ok(calls)
        };
        match on_cpu {
            Some(cpu) if reprotect == Reprotect::Yes => {
                let pm = &self.pagemap;
                let (calls, found) = std::thread::scope(|s| {
                    s.spawn(move || {
                        let _pin = super::OnCpu::pin(cpu);
                        let mut regions = vec![PageRegion::default(); SCAN_VEC_LEN];
                        let mut found = Vec::new();
                        walk(pm, &mut regions, &mut |o, l| found.push((o, l)))
                            .map(|calls| (calls, found))
                    })
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("harvest thread panicked")))
                })?;
                for (o, l) in found {
                    f(o, l);
                }
                Ok(calls)
            }
            _ => walk(&self.pagemap, &mut self.regions, &mut f),
        }
    }
}

/// Whether a harvest write-protects the written pages it reports again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reprotect {
    /// Live passes: a later write must show up in the next harvest.
    Yes,
    /// The final harvest of a snapshot (tracking ends right after): a read-only walk.
    /// Re-protecting changes PTEs, and every page table with a change costs a TLB
    /// shootdown, an IPI to each other CPU running one of our threads — far costlier than
    /// a local one (BENCHMARKS.md, "auto's 8× switch factor") — all inside the pause.
    No,
}

/// Longest range one PAGEMAP_SCAN call walks: the kernel holds the mmap lock for the
/// whole call, and a thread that wants it for writing (an mmap or munmap anywhere in the
/// process) queues behind it and blocks every page fault after it — the executor's too.
/// 64 MiB is 16k page-table entries, well under a millisecond.
const SCAN_SLICE_BYTES: u64 = 64 << 20;
/// Longest range one PAGEMAP_SCAN call of a live harvest walks, and between two calls the
/// harvest thread yields its CPU.
///
/// Why: a live harvest runs on the executor's CPU (see `OnCpu`), and this kernel neither
/// preempts system calls (PREEMPT_NONE) nor ends a slice before its 4 ms tick (HZ=250,
/// no HRTICK): a harvest thread, once picked, holds that CPU up to a tick while the
/// executor is runnable (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M, 4M and 8M
/// keys", "Stints"). 8 MiB is 2k page-table entries: a fraction of a millisecond even
/// when most are re-protected, and `sched_yield` hands the CPU to the executor if it
/// waits (a no-op system call otherwise).
const LIVE_SCAN_SLICE_BYTES: u64 = 8 << 20;
/// How long a live harvest thread walks before it yields (checked between calls).
/// Yielding after every call makes the late, small harvests several times longer (the
/// CPU is busy with the executor and the clients), and the final dirty set with them.
const LIVE_SCAN_STINT: std::time::Duration = std::time::Duration::from_micros(300);
/// Bytes write-protected per `UFFDIO_WRITEPROTECT` call by [`WpTracker::protect`].
const PROTECT_SLICE_BYTES: u64 = 64 << 20;

/// One PAGEMAP_SCAN walk over `[off, off+len)` of the range at `base`: reports written
/// runs and, with [`Reprotect::Yes`], re-protects them.
fn scan_written(
    pagemap: &std::fs::File,
    regions: &mut [PageRegion],
    base: u64,
    off: u64,
    len: u64,
    reprotect: Reprotect,
    f: &mut dyn FnMut(u64, u64),
) -> io::Result<()> {
    let end = base + off + len;
    let mut start = base + off;
    let flags = match reprotect {
        Reprotect::Yes => PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
        Reprotect::No => 0,
    };
    let slice = match reprotect {
        Reprotect::Yes => LIVE_SCAN_SLICE_BYTES,
        Reprotect::No => SCAN_SLICE_BYTES,
    };
    let mut stint = std::time::Instant::now();
    while start < end {
        if reprotect == Reprotect::Yes && stint.elapsed() >= LIVE_SCAN_STINT {
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
            stint = std::time::Instant::now();
        }
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags,
            start,
            end: end.min(start + slice),
            walk_end: 0,
            vec: regions.as_mut_ptr() as u64,
            vec_len: regions.len() as u64,
            max_pages: 0,
            category_inverted: 0,
            category_mask: PAGE_IS_WRITTEN,
            category_anyof_mask: 0,
            return_mask: PAGE_IS_WRITTEN,
        };
        // SAFETY: `vec` points at `vec_len` writable PageRegion slots we own.
        let n = unsafe { libc::ioctl(pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
        check(n, "PAGEMAP_SCAN")?;
        for r in &regions[..n as usize] {
            f(r.start - base, r.end - r.start);
        }
        if arg.walk_end <= start {
            break;
        }
        start = arg.walk_end;
    }
    Ok(())
}

/// `struct uffd_msg` is 32 bytes: event (u8) at 0; for a page fault, flags (u64) at 8 and
/// the faulting address (u64) at 16.
const UFFD_MSG_BYTES: usize = 32;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;

/// Synchronous write-protect faults (no `WP_ASYNC`): a write to a protected page stops the
/// writing thread and queues a message on the descriptor; the page stays unchanged until a
/// handler calls [`SyncWp::unprotect`] on it, which also wakes the writer. This is the
/// freeze-free variant's mechanism: the handler copies the page out before unprotecting.
pub struct SyncWp {
    uffd: OwnedFd,
    base: u64,
    len: u64,
    /// The end of the highest range ever protected (the slice walk stops there).
    hot: std::sync::atomic::AtomicU64,
    registered: std::sync::atomic::AtomicBool,
}

impl SyncWp {
    /// Opens a userfaultfd with WP_UNPOPULATED only and registers `[base, base+len)` for
    /// write-protect faults. Nothing is protected yet.
    pub fn new(base: usize, len: usize) -> io::Result<SyncWp> {
        release_kept();
        let uffd = open_registered(base, len, UFFD_FEATURE_WP_UNPOPULATED, "WP_UNPOPULATED")?;
        Ok(SyncWp {
            uffd,
            base: base as u64,
            len: len as u64,
            hot: std::sync::atomic::AtomicU64::new(0),
            registered: std::sync::atomic::AtomicBool::new(true),
        })
    }

    fn writeprotect(&self, off: u64, len: u64, mode: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        writeprotect(&self.uffd, self.base + off, len, mode)
    }

    /// Write-protects `[off, off+len)`: the next write to any of its pages faults.
    pub fn protect(&self, off: u64, len: u64) -> io::Result<()> {
        self.hot
            .fetch_max(off + len, std::sync::atomic::Ordering::Relaxed);
        self.writeprotect(off, len, UFFDIO_WRITEPROTECT_MODE_WP)
    }

    /// Lifts the protection of `[off, off+len)` and wakes the threads blocked on it.
    pub fn unprotect(&self, off: u64, len: u64) -> io::Result<()> {
        self.writeprotect(off, len, 0)
    }

    /// Waits up to `timeout_ms` for write faults and appends the page offsets (relative to
    /// the range) of those that arrived. Returns without any when the wait times out.
    pub fn read_faults(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        let mut pfd = libc::pollfd {
            fd: self.uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n <= 0 {
            return Ok(());
        }
        let mut buf = [0u8; UFFD_MSG_BYTES * 64];
        loop {
            // SAFETY: reading into a buffer we own; the descriptor is non-blocking.
            let got = unsafe {
                libc::read(
                    self.uffd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                )
            };
            if got <= 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(()),
                    _ if got == 0 => Ok(()),
                    _ => Err(e),
                };
            }
            for m in buf[..got as usize].chunks_exact(UFFD_MSG_BYTES) {
                if m[0] != UFFD_EVENT_PAGEFAULT {
                    continue;
                }
                let addr = u64::from_le_bytes(m[16..24].try_into().expect("8 bytes"));
                if addr >= self.base && addr < self.base + self.len {
                    out.push((addr - self.base) & !(crate::arena::PAGE_BYTES as u64 - 1));
                }
            }
            if (got as usize) < buf.len() {
                return Ok(());
            }
        }
    }
}

impl SyncWp {
    /// Unregisters the range (once): clears every protection and wakes any thread still
    /// blocked on one.
    pub fn unregister(&self) {
        if !self
            .registered
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let hot = self.hot.load(std::sync::atomic::Ordering::Relaxed);
        unregister_sliced(&self.uffd, self.base, self.len, hot);
    }
}

impl Drop for SyncWp {
    fn drop(&mut self) {
        self.unregister();
    }
}

/// Bytes unregistered per `UFFDIO_UNREGISTER` call below the protected high-water mark.
/// Unregistering clears the protection bit of every page in a kernel walk under the
/// process's mmap write lock, which blocks the executor's page faults (a fresh arena page,
/// a large malloc), and is kernel time that a kernel without preemption interrupts only
/// where the walk offers to reschedule: in slices, each hold is bounded and the executor's
/// faults and the other threads on that CPU get in between (larger slices hold a CPU for
/// milliseconds, which clients sharing that CPU see as latency; figures: BENCHMARKS.md,
/// "Kernel costs of write-protect tracking").
const UNREGISTER_SLICE_BYTES: u64 = 16 << 20;

/// Unregisters `[base, base+len)` from `uffd`: slices up to `hot` (the part that may hold
/// protected pages), then the rest (never touched, cheap) in one call.
fn unregister_sliced(uffd: &OwnedFd, base: u64, len: u64, hot: u64) {
    let hot = hot.min(len);
    let mut off = 0;
    while off < len {
        let n = if off < hot {
            (hot - off).min(UNREGISTER_SLICE_BYTES)
        } else {
            len - off
        };
        let mut range = UffdioRange {
            start: base + off,
            len: n,
        };
        // SAFETY: unregistering part of our own registered range (the VMAs split and
        // merge back as their flags are cleared).
        unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_UNREGISTER, &mut range) };
        off += n;
    }
}

/// A userfaultfd descriptor: full mode first, user-mode-only where that is all a sandbox
/// permits (kernel-mode accesses never write the arena).
/// A userfaultfd with `features` (named `what` in errors) whose `[base, base+len)` is
/// registered for write-protect faults; nothing is protected yet.
fn open_registered(base: usize, len: usize, features: u64, what: &str) -> io::Result<OwnedFd> {
    let uffd = open_uffd()?;
    let mut api = UffdioApi {
        api: UFFD_API,
        features,
        ioctls: 0,
    };
    // SAFETY: UFFDIO_API with a correctly laid out struct.
    check(
        unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api) },
        &format!("UFFDIO_API ({what})"),
    )?;
    if api.features & features != features {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("userfaultfd lacks {what}"),
        ));
    }
    register(&uffd, base, len)?;
    Ok(uffd)
}

/// Registers `[base, base+len)` with `uffd` for write-protect faults (again: a no-op for
/// the parts already registered with it).
fn register(uffd: &OwnedFd, base: usize, len: usize) -> io::Result<()> {
    let mut reg = UffdioRegister {
        range: UffdioRange {
            start: base as u64,
            len: len as u64,
        },
        mode: UFFDIO_REGISTER_MODE_WP,
        ioctls: 0,
    };
    // SAFETY: a correctly laid out struct; the range is our own private anonymous mapping.
    check(
        unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg) },
        "UFFDIO_REGISTER (WP)",
    )
}

fn open_uffd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscalls; the result is checked.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) }
        as libc::c_int;
    if fd < 0 {
        fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        } as libc::c_int;
    }
    check(fd, "userfaultfd")?;
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Drop for WpTracker {
    fn drop(&mut self) {
        // This also drops the write protection, so the executor's writes stop faulting.
        if self.registered {
            unregister_sliced(&self.uffd, self.base, self.len, self.hot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private anonymous read-write mapping of `len` bytes (left mapped).
    fn test_mapping(len: usize) -> *mut u8 {
        // SAFETY: a fresh private anonymous mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        assert_ne!(base as *mut libc::c_void, libc::MAP_FAILED);
        base
    }

    #[test]
    fn tracks_writes_after_protect() {
        let len = 64 * 4096;
        let base = test_mapping(len);
        unsafe { *base.add(3 * 4096) = 1 };
        let mut t = match WpTracker::new(base as usize, len) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("userfaultfd unavailable here, skipping: {e}");
                return;
            }
        };
        t.protect(0, len as u64).unwrap();
        let mut seen = Vec::new();
        t.harvest(0, len as u64, |o, l| seen.push((o, l))).unwrap();
        assert!(seen.is_empty(), "nothing written yet: {seen:?}");
        unsafe {
            *base.add(5 * 4096 + 9) = 2; // populated? no: unpopulated page, tracked too
            *base.add(3 * 4096) = 3;
            *base.add(4 * 4096) = 3;
        }
        t.harvest(0, len as u64, |o, l| seen.push((o, l))).unwrap();
        assert_eq!(seen, vec![(3 * 4096, 3 * 4096)]);
        seen.clear();
        t.harvest(0, len as u64, |o, l| seen.push((o, l))).unwrap();
        assert!(seen.is_empty(), "re-protected by the scan: {seen:?}");
        unsafe { *base.add(40 * 4096) = 2 };
        t.harvest(0, len as u64, |o, l| seen.push((o, l))).unwrap();
        assert_eq!(seen, vec![(40 * 4096, 4096)]);
        // The parallel walk: runs in order across the parts, re-protected as well.
        seen.clear();
        for pg in [1usize, 17, 18, 33, 63] {
            unsafe { *base.add(pg * 4096) = 4 };
        }
        t.harvest_parallel(0, len as u64, 3, Reprotect::Yes, None, |o, l| {
            seen.push((o, l))
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (4096, 4096),
                (17 * 4096, 2 * 4096),
                (33 * 4096, 4096),
                (63 * 4096, 4096)
            ]
        );
        seen.clear();
        t.harvest_parallel(0, len as u64, 3, Reprotect::Yes, None, |o, l| {
            seen.push((o, l))
        })
        .unwrap();
        assert!(
            seen.is_empty(),
            "re-protected by the parallel scan: {seen:?}"
        );
        // The final, read-only walk reports written pages and leaves them unprotected, so
        // a second one reports them again.
        unsafe { *base.add(20 * 4096) = 5 };
        for _ in 0..2 {
            seen.clear();
            t.harvest_parallel(0, len as u64, 3, Reprotect::No, None, |o, l| {
                seen.push((o, l))
            })
            .unwrap();
            assert_eq!(seen, vec![(20 * 4096, 4096)]);
        }
        drop(t);
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }

    /// A retired tracker lifts its protection and keeps the registration: the next
    /// tracker over the same range tracks again, a freeze-free tracker can register the
    /// range after it (the kept one is released first), and an unmapped range's kept
    /// tracker is forgotten. (Other tests may take or replace the kept tracker meanwhile:
    /// each step holds either way.)
    #[test]
    fn a_retired_tracker_is_kept_registered_and_reused() {
        let len = 256 * 4096;
        let base = test_mapping(len);
        for pg in 0..256 {
            unsafe { *base.add(pg * 4096) = 1 };
        }
        let mut t = match WpTracker::reuse_or_new(base as usize, len) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("userfaultfd unavailable here, skipping: {e}");
                return;
            }
        };
        t.protect(0, len as u64).unwrap();
        unsafe { *base.add(10 * 4096) = 2 };
        t.retire();
        // Registered, nothing protected: a second uffd cannot register the range (checked
        // while it is still the kept one: the lock keeps other tests from releasing it)...
        {
            let k = kept();
            if k.as_ref().is_some_and(|k| k.base == base as u64) {
                assert!(
                    open_registered(base as usize, len, 0, "plain").is_err(),
                    "the retired tracker's registration is gone"
                );
            }
        }
        // ...and writes no longer mark pages: a reused tracker sees only what is written
        // after its own protect.
        unsafe { *base.add(20 * 4096) = 2 };
        let mut t = WpTracker::reuse_or_new(base as usize, len).unwrap();
        t.protect(0, len as u64).unwrap();
        unsafe { *base.add(30 * 4096) = 2 };
        let mut seen = Vec::new();
        t.harvest(0, len as u64, |o, l| seen.push((o, l))).unwrap();
        assert_eq!(seen, vec![(30 * 4096, 4096)]);
        t.retire();
        // A freeze-free tracker releases the kept one before it registers.
        let sync = SyncWp::new(base as usize, len).expect("registers after release_kept");
        sync.unregister();
        drop(sync);
        // Kept again, then the mapping goes: forgotten, not unregistered over a range
        // that another mapping may own by now.
        let t = WpTracker::reuse_or_new(base as usize, len).unwrap();
        t.retire();
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
        range_unmapped(base as usize, len);
        assert!(kept()
            .as_ref()
            .is_none_or(|k| k.base != base as u64 || k.len != len as u64));
    }

    /// A write to a page protected with [`SyncWp`] waits until the handler unprotects it,
    /// and the handler sees the page's old bytes first (the freeze-free variant's
    /// guarantee). Also prints what protecting and unregistering a populated range cost
    /// (`CAIRN_WP_MEASURE_MB`, default 64).
    #[test]
    fn sync_wp_holds_the_writer_until_unprotected() {
        let mb: usize = std::env::var("CAIRN_WP_MEASURE_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64);
        let len = mb << 20;
        let base = test_mapping(len);
        for off in (0..len).step_by(4096) {
            unsafe { *base.add(off) = 1 };
        }
        let t = match SyncWp::new(base as usize, len) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("userfaultfd unavailable here, skipping: {e}");
                return;
            }
        };
        let started = std::time::Instant::now();
        t.protect(0, len as u64).unwrap();
        let protect_us = started.elapsed().as_micros();
        let addr = base as usize + 7 * 4096;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d2 = done.clone();
        let writer = std::thread::spawn(move || {
            // SAFETY: inside the mapping; blocks until the page is unprotected.
            unsafe { *((addr + 5) as *mut u8) = 9 };
            d2.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let mut faults = Vec::new();
        let t0 = std::time::Instant::now();
        while faults.is_empty() {
            t.read_faults(&mut faults, 100).unwrap();
            assert!(t0.elapsed().as_secs() < 10, "no fault reported");
        }
        assert_eq!(faults, vec![7 * 4096]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            !done.load(std::sync::atomic::Ordering::SeqCst),
            "the write went through"
        );
        // The page is protected and its writer blocked: the old bytes are there. Read by
        // the kernel (racy_copy), as the handler does: the blocked store has no
        // happens-before with this read, so a load of ours would be a data race
        // (ThreadSanitizer reports it).
        let view = super::super::racy_copy::RegionView::over_range(base as usize, len);
        let mut byte = [0xffu8];
        view.copy(7 * 4096 + 5, &mut byte).unwrap();
        assert_eq!(byte[0], 0);
        let u0 = std::time::Instant::now();
        t.unprotect(7 * 4096, 4096).unwrap();
        let unprotect_us = u0.elapsed().as_micros();
        writer.join().unwrap();
        // SAFETY: inside the mapping; the writer was joined (happens-before this read).
        assert_eq!(unsafe { *((addr + 5) as *const u8) }, 9);
        let r0 = std::time::Instant::now();
        t.unregister();
        let unregister_us = r0.elapsed().as_micros();
        eprintln!(
            "{mb} MiB populated: UFFDIO_WRITEPROTECT {protect_us} us, one page unprotect {unprotect_us} us, unregister {unregister_us} us"
        );
        unsafe { *base.add(9 * 4096) = 3 };
        drop(t);
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }
}
