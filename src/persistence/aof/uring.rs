//! The writer thread's io_uring engine: several durable writes in flight at once.
//!
//! With one `fdatasync` at a time, every client waits behind the sync in progress *and*
//! the one after it. Here each group-commit batch gets its own durability operation and
//! up to `aof-inflight-syncs` of them (at most [`INFLIGHT_MAX`]) run concurrently:
//!
//! - **buffered** (default): the writer `pwrite`s the batch into the page cache itself (in
//!   order, so a killed process never leaves a hole), then submits an
//!   `IORING_OP_FSYNC` with `DATASYNC`. An fdatasync covers everything written before it
//!   was issued, so its completion makes every LSN written before it durable, whatever the
//!   order in which the syncs complete.
//! - **direct** (`aof-direct-io yes`): the batch, padded to whole 4 KiB blocks with
//!   `#PAD:`, is one `IORING_OP_WRITE` on a file opened `O_DIRECT|O_DSYNC` (the write *is*
//!   the sync). Writes may complete in any order: the durable LSN advances only over the
//!   contiguous prefix of completed writes.
//!
//! The thread waits in one place, `io_uring_enter`, for a completion, a wake-up from the
//! executor (an eventfd read kept armed in the ring) or a tick (timeout).

use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Most durability operations (fsyncs or direct writes) in flight `aof-inflight-syncs`
/// may ask for.
pub const INFLIGHT_MAX: usize = 64;
/// Direct I/O block (alignment of offsets, lengths and buffers).
pub const BLOCK: usize = 4096;
const EFD_TAG: u64 = u64::MAX;
const RING_ENTRIES: u32 = 32;

/// A heap buffer aligned to [`BLOCK`] (O_DIRECT needs aligned memory).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    cap: usize,
}

// SAFETY: the buffer is plain owned memory; only one thread uses it at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (`len` a multiple of BLOCK, > 0).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let cap = len.max(BLOCK).div_ceil(BLOCK) * BLOCK;
        let layout = std::alloc::Layout::from_size_align(cap, BLOCK).expect("layout");
        // SAFETY: non-zero size, valid alignment.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, len, cap }
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for cap ≥ len bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(self.cap, BLOCK).expect("layout");
        // SAFETY: allocated in zeroed() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, layout) }
    }
}

struct Op {
    id: u64,
    /// LSN durable once this op completes.
    lsn: u64,
    /// Kept alive until the kernel is done with it (direct writes).
    buf: Option<AlignedBuf>,
    done: bool,
    started: std::time::Instant,
    /// A test backend's torn write: this errno replaces the completion's result.
    injected_errno: Option<i32>,
}

/// What a reap found.
#[derive(Default)]
pub struct Reaped {
    /// Highest LSN now durable (None: no change).
    pub durable: Option<u64>,
    pub error: Option<(&'static str, io::Error)>,
    /// Latencies of completed operations, µs.
    pub latencies_us: Vec<u64>,
}

impl Reaped {
    /// Adds what a later reap found: buffered fsyncs complete in any order, so the
    /// durable LSN is the highest seen (not the last); the first error stays.
    fn absorb(&mut self, r: Reaped) {
        self.durable = self.durable.max(r.durable);
        if self.error.is_none() {
            self.error = r.error;
        }
        self.latencies_us.extend(r.latencies_us);
    }
}

pub struct Engine {
    ring: IoUring,
    /// The eventfd the executor writes to wake this thread (owned by `writer::Shared`,
    /// which outlives the thread, so the executor never writes to a closed descriptor).
    efd: RawFd,
    efd_buf: Box<u64>,
    efd_armed: bool,
    inflight: VecDeque<Op>,
    next_id: u64,
    /// Direct mode: LSNs become durable in submission order only.
    ordered: bool,
    /// Operations in flight at most (`aof-inflight-syncs`, 1..=[`INFLIGHT_MAX`]).
    depth: usize,
    /// A test backend's injected fsync failures (`storage::FaultHook`).
    fault_hook: Option<std::sync::Arc<dyn super::storage::FaultHook>>,
}

impl Engine {
    /// Sets up a ring. Fails where io_uring is unavailable (old kernel, seccomp, sysctl).
    /// `efd`: an eventfd (see [`eventfd`]) that stays open longer than the engine.
    pub fn new(efd: RawFd, depth: usize) -> io::Result<Engine> {
        let ring = IoUring::new(RING_ENTRIES)?;
        Ok(Engine {
            ring,
            efd,
            efd_buf: Box::new(0),
            efd_armed: false,
            inflight: VecDeque::new(),
            next_id: 1,
            ordered: false,
            depth: depth.clamp(1, INFLIGHT_MAX),
            fault_hook: None,
        })
    }

    /// A ring that signals `completion_fd` (an eventfd in the executor's poll set) when it
    /// posts a completion: the executor's own fsyncs (see `writer::Lease`). Its owner never
    /// sleeps in it; it reaps when the eventfd fires or between connections.
    pub fn with_completion_eventfd(completion_fd: RawFd, depth: usize) -> io::Result<Engine> {
        let e = Engine::new(-1, depth)?;
        e.ring.submitter().register_eventfd(completion_fd)?;
        Ok(e)
    }

    /// Faults a test backend injects into this engine's fsyncs (None: none).
    pub fn set_fault_hook(&mut self, hook: Option<std::sync::Arc<dyn super::storage::FaultHook>>) {
        self.fault_hook = hook;
    }

    pub fn set_ordered(&mut self, ordered: bool) {
        self.ordered = ordered;
    }

    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    pub fn can_submit(&self) -> bool {
        self.inflight.len() < self.depth
    }

    fn push(&mut self, sqe: &io_uring::squeue::Entry) -> io::Result<()> {
        // SAFETY: every buffer an SQE points to (the eventfd counter, direct write buffers)
        // is owned by self and kept until its completion is reaped.
        unsafe {
            if self.ring.submission().push(sqe).is_err() {
                self.ring.submit()?;
                self.ring
                    .submission()
                    .push(sqe)
                    .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
        }
        Ok(())
    }

    /// Buffered mode: an fdatasync of `fd` that makes `lsn` durable.
    pub fn submit_fsync(&mut self, fd: RawFd, lsn: u64) -> io::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        let sqe = opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(id);
        self.push(&sqe)?;
        self.ring.submit()?;
        self.inflight.push_back(Op {
            id,
            lsn,
            buf: None,
            done: false,
            started: std::time::Instant::now(),
            injected_errno: None,
        });
        Ok(())
    }

    /// Direct mode: writes `buf` (aligned) at `offset` of an O_DIRECT|O_DSYNC `fd`.
    pub fn submit_write(
        &mut self,
        fd: RawFd,
        offset: u64,
        mut buf: AlignedBuf,
        lsn: u64,
    ) -> io::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        // A torn write injected by a test backend: the whole blocks of the prefix reach
        // the file (O_DIRECT writes whole blocks), then the completion reports the errno.
        let injected = self
            .fault_hook
            .as_ref()
            .and_then(|h| h.before_write(buf.len));
        let injected_errno = injected.map(|(errno, prefix)| {
            buf.len = prefix / BLOCK * BLOCK;
            errno
        });
        let sqe = opcode::Write::new(types::Fd(fd), buf.ptr as *const u8, buf.len as u32)
            .offset(offset)
            .build()
            .user_data(id);
        self.push(&sqe)?;
        self.ring.submit()?;
        self.inflight.push_back(Op {
            id,
            lsn,
            buf: Some(buf),
            done: false,
            started: std::time::Instant::now(),
            injected_errno,
        });
        Ok(())
    }

    /// Waits up to `timeout` for a completion or a wake-up (returns at once if one is
    /// there), then collects completions.
    pub fn wait(&mut self, timeout: Duration) -> Reaped {
        if !self.efd_armed && self.efd >= 0 {
            let sqe = opcode::Read::new(
                types::Fd(self.efd),
                &mut *self.efd_buf as *mut u64 as *mut u8,
                8,
            )
            .build()
            .user_data(EFD_TAG);
            if self.push(&sqe).is_ok() {
                self.efd_armed = true;
            }
        }
        if self.ring.completion().is_empty() {
            let ts = types::Timespec::from(timeout);
            let args = types::SubmitArgs::new().timespec(&ts);
            // ETIME (timeout) and EINTR are normal wake-ups.
            let _ = self.ring.submitter().submit_with_args(1, &args);
        }
        self.reap()
    }

    /// Collects completions without waiting.
    pub fn reap(&mut self) -> Reaped {
        let mut r = Reaped::default();
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (ud, res) in cqes {
            if ud == EFD_TAG {
                self.efd_armed = false;
                continue;
            }
            let Some(op) = self.inflight.iter_mut().find(|o| o.id == ud) else {
                continue;
            };
            op.done = true;
            r.latencies_us.push(op.started.elapsed().as_micros() as u64);
            // Injected failures (tests): a torn write's errno; else a failed sync — of an
            // fsync, or of an O_DSYNC direct write's flush.
            let injected = match (op.injected_errno, &self.fault_hook) {
                (Some(errno), _) => Some(-errno),
                (None, Some(h)) if res >= 0 => h.after_sync().map(|errno| -errno),
                _ => None,
            };
            let res = injected.unwrap_or(res);
            if res < 0 {
                let what = if op.buf.is_some() { "write" } else { "fsync" };
                r.error
                    .get_or_insert((what, io::Error::from_raw_os_error(-res)));
            } else if let Some(b) = &op.buf {
                if (res as usize) < b.len {
                    // A short direct write: the device is out of space.
                    r.error
                        .get_or_insert(("write", io::Error::from_raw_os_error(libc::ENOSPC)));
                }
            }
            if !self.ordered {
                r.durable = Some(r.durable.unwrap_or(0).max(op.lsn));
            }
        }
        if self.ordered {
            while self.inflight.front().is_some_and(|o| o.done) {
                let op = self.inflight.pop_front().expect("front");
                r.durable = Some(op.lsn);
            }
        } else {
            self.inflight.retain(|o| !o.done);
        }
        r
    }

    /// Waits for every operation in flight (rewrite switch, shutdown, after an error).
    pub fn drain(&mut self) -> Reaped {
        let mut all = Reaped::default();
        while !self.inflight.is_empty() {
            all.absorb(self.wait(Duration::from_millis(100)));
        }
        all
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // The kernel may still write from our buffers: wait for them before freeing.
        let _ = self.drain();
    }
}

/// A non-blocking eventfd for waking the writer.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Wakes the writer's ring (called by the executor after queueing work).
pub fn wake(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writing 8 bytes to an eventfd; errors (counter overflow) are harmless.
    unsafe {
        libc::write(fd, &one as *const u64 as *const libc::c_void, 8);
    }
}

/// Lays out one direct-I/O write: the partial last block's bytes already on disk
/// (`tail`, rewritten unchanged), then `content`, then a `#PAD:` to the next block
/// boundary. Returns the buffer; its length is a multiple of [`BLOCK`].
pub fn direct_buffer(tail: &[u8], content: &[u8]) -> AlignedBuf {
    let used = tail.len() + content.len();
    let mut total = used.div_ceil(BLOCK) * BLOCK;
    if total - used != 0 && total - used < super::format::PAD_MIN_BYTES {
        total += BLOCK;
    }
    let mut buf = AlignedBuf::zeroed(total);
    let s = buf.as_mut_slice();
    s[..tail.len()].copy_from_slice(tail);
    s[tail.len()..used].copy_from_slice(content);
    if total > used {
        let mut pad = Vec::with_capacity(total - used);
        super::format::encode_pad(&mut pad, total - used);
        s[used..].copy_from_slice(&pad);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::super::format;
    use super::super::storage::{FsDir, LogDir};
    use super::super::writer::{FsyncMode, IoOpts, Writer};
    use super::*;
    use std::os::fd::AsRawFd;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cairn-uring-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn aligned_buffer_is_zeroed_block_aligned_and_keeps_its_length() {
        for len in [0, 1, 100, BLOCK - 1, BLOCK, 3 * BLOCK, 3 * BLOCK + 1] {
            let mut b = AlignedBuf::zeroed(len);
            assert_eq!(b.as_slice().len(), len);
            assert_eq!(b.as_slice().as_ptr() as usize % BLOCK, 0, "len {len}");
            assert_eq!(b.cap, len.max(1).div_ceil(BLOCK) * BLOCK, "len {len}");
            assert!(b.as_slice().iter().all(|&x| x == 0));
            for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
                *x = (i % 251) as u8;
            }
            assert!(b
                .as_slice()
                .iter()
                .enumerate()
                .all(|(i, &x)| x == (i % 251) as u8));
        }
    }

    #[test]
    fn direct_buffers_are_whole_blocks_with_a_pad_of_at_least_the_minimum() {
        let src: Vec<u8> = (0..4 * BLOCK).map(|i| (i % 200) as u8 + b' ').collect();
        for tail_len in [0, 1, 7, 100, BLOCK - 1] {
            for content_len in 0..=2 * BLOCK + 10 {
                let (tail, content) = (&src[..tail_len], &src[tail_len..tail_len + content_len]);
                let b = direct_buffer(tail, content);
                let s = b.as_slice();
                let used = tail_len + content_len;
                assert_eq!(s.len() % BLOCK, 0, "{tail_len}+{content_len}");
                assert_eq!(&s[..used], &src[..used]);
                let gap = s.len() - used;
                // No pad when the bytes fill the last block; otherwise a whole `#PAD:`
                // (a gap too small for one takes another block), never a spare block.
                assert!(
                    gap == 0 || gap >= format::PAD_MIN_BYTES,
                    "{tail_len}+{content_len}"
                );
                assert!(
                    gap < BLOCK + format::PAD_MIN_BYTES,
                    "{tail_len}+{content_len}"
                );
                if gap > 0 {
                    assert!(s[used..].starts_with(format::PAD_PREFIX));
                }
            }
        }
    }

    #[test]
    fn a_direct_buffer_of_log_entries_scans_as_the_log() {
        const RID: &str = "0123456789012345678901234567890123456789";
        // One entry whose value makes the batch end anywhere around a block boundary
        // (the gap passes through 0, 1..PAD_MIN_BYTES and beyond).
        for v in BLOCK - 220..BLOCK + 20 {
            let mut log = Vec::new();
            format::encode_batch_marker(&mut log, 0);
            for lsn in 1..=2u64 {
                let mut c = Vec::new();
                let value = vec![b'v'; if lsn == 2 { v } else { 10 }];
                format::encode_command(&mut c, &[&b"SET"[..], b"k", &value[..]]);
                format::encode_entry(&mut log, lsn, RID, lsn * 100, &c);
            }
            for split in [0, 1, 90] {
                let b = direct_buffer(&log[..split], &log[split..]);
                let o = format::scan(b.as_slice(), Some(1), |_| Ok(()));
                assert!(o.bad.is_none(), "value {v} split {split}: {:?}", o.bad);
                assert_eq!(o.last_lsn, Some(2));
            }
        }
    }

    #[test]
    fn wake_adds_to_a_nonblocking_cloexec_eventfd() {
        let efd = eventfd().unwrap();
        let fd = efd.as_raw_fd();
        // SAFETY (both): fcntl on a descriptor we own.
        let fd_flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        let fl_flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert_ne!(fd_flags & libc::FD_CLOEXEC, 0);
        assert_ne!(fl_flags & libc::O_NONBLOCK, 0);
        let read = || {
            let mut v = 0u64;
            // SAFETY: reading 8 bytes into a u64.
            let n = unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
            (n, v, io::Error::last_os_error().raw_os_error())
        };
        assert_eq!(read().2, Some(libc::EAGAIN), "nothing yet, and no blocking");
        wake(fd);
        wake(fd);
        assert_eq!(read().0, 8);
        wake(fd);
        let (n, v, _) = read();
        assert_eq!((n, v), (8, 1));
        assert_eq!(read().0, -1);
    }

    /// The engine label of a writer started with `uring` on.
    fn writer_engine(tag: &str) -> &'static str {
        let dir = temp_dir(tag);
        let f = FsDir::new(&dir).open_append("p.1.incr.aof").unwrap();
        let opts = IoOpts {
            uring: true,
            inflight: 2,
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
        let label = *w.shared.engine.lock().unwrap();
        drop(w);
        label
    }

    /// A ring, or None where the kernel refuses io_uring (old kernel, seccomp, sysctl):
    /// then the writer must have fallen back to its thread engine, which is checked here.
    fn ring(depth: usize) -> Option<(OwnedFd, Engine)> {
        let efd = eventfd().unwrap();
        match Engine::new(efd.as_raw_fd(), depth) {
            Ok(e) => Some((efd, e)),
            Err(e) => {
                eprintln!("io_uring refused here ({e}): checking the thread writer instead");
                assert_eq!(writer_engine(&format!("fallback-{depth}")), "thread");
                None
            }
        }
    }

    #[test]
    fn the_writer_uses_a_ring_where_the_kernel_has_one_and_its_thread_otherwise() {
        let efd = eventfd().unwrap();
        let supported = Engine::new(efd.as_raw_fd(), 1).is_ok();
        let want = if supported { "uring" } else { "thread" };
        assert_eq!(writer_engine("label"), want);
    }

    #[test]
    fn depth_is_clamped_between_one_and_the_maximum() {
        let Some((_efd, mut e)) = ring(0) else {
            return;
        };
        assert_eq!(e.depth, 1);
        let dir = temp_dir("depth");
        let f = std::fs::File::create(dir.join("f")).unwrap();
        assert!(e.can_submit());
        e.submit_fsync(f.as_raw_fd(), 1).unwrap();
        assert!(!e.can_submit());
        assert_eq!(e.drain().durable, Some(1));
        assert!(e.can_submit());
        let Some((_efd2, e2)) = ring(INFLIGHT_MAX + 100) else {
            return;
        };
        assert_eq!(e2.depth, INFLIGHT_MAX);
    }

    #[test]
    fn reaps_combine_to_the_highest_durable_lsn_and_the_first_error() {
        let reap = |durable: Option<u64>, errno: Option<i32>, lat: &[u64]| Reaped {
            durable,
            error: errno.map(|e| ("fsync", io::Error::from_raw_os_error(e))),
            latencies_us: lat.to_vec(),
        };
        let mut all = Reaped::default();
        // The fsync of LSN 7 completed before the one of LSN 5.
        all.absorb(reap(Some(7), None, &[3]));
        all.absorb(reap(Some(5), Some(libc::EIO), &[4]));
        all.absorb(reap(None, Some(libc::ENOSPC), &[]));
        all.absorb(reap(Some(6), None, &[5, 6]));
        assert_eq!(all.durable, Some(7));
        assert_eq!(all.error.unwrap().1.raw_os_error(), Some(libc::EIO));
        assert_eq!(all.latencies_us, [3, 4, 5, 6]);
    }

    #[test]
    fn fsyncs_in_flight_make_the_highest_lsn_durable() {
        let Some((_efd, mut e)) = ring(2) else {
            return;
        };
        let dir = temp_dir("fsync");
        let f = std::fs::File::create(dir.join("f")).unwrap();
        use std::io::Write as _;
        (&f).write_all(b"some log bytes").unwrap();
        e.submit_fsync(f.as_raw_fd(), 5).unwrap();
        e.submit_fsync(f.as_raw_fd(), 7).unwrap();
        assert_eq!(e.inflight(), 2);
        assert!(!e.can_submit());
        let r = e.drain();
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.durable, Some(7));
        assert_eq!(r.latencies_us.len(), 2);
        assert_eq!(e.inflight(), 0);
    }

    #[test]
    fn a_failed_fsync_is_reported_with_its_errno() {
        let Some((_efd, mut e)) = ring(1) else {
            return;
        };
        e.submit_fsync(-1, 3).unwrap();
        let r = e.drain();
        let (what, err) = r.error.expect("an error");
        assert_eq!(what, "fsync");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        assert_eq!(e.inflight(), 0);
    }

    #[test]
    fn ordered_writes_land_at_their_offsets() {
        let Some((_efd, mut e)) = ring(4) else {
            return;
        };
        e.set_ordered(true);
        let dir = temp_dir("writes");
        let path = dir.join("f");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let a = direct_buffer(b"", b"first");
        let b = direct_buffer(b"", &[b'x'; BLOCK]);
        let want = [a.as_slice(), b.as_slice()].concat();
        e.submit_write(f.as_raw_fd(), 0, a, 1).unwrap();
        e.submit_write(f.as_raw_fd(), BLOCK as u64, b, 2).unwrap();
        let r = e.drain();
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.durable, Some(2));
        assert_eq!(std::fs::read(&path).unwrap(), want);
    }

    #[test]
    fn ordered_mode_advances_only_over_the_completed_prefix() {
        let Some((_efd, mut e)) = ring(4) else {
            return;
        };
        e.set_ordered(true);
        let op = |id: u64, done: bool| Op {
            id,
            lsn: id * 10,
            buf: None,
            done,
            started: std::time::Instant::now(),
            injected_errno: None,
        };
        // The second and third finished before the first.
        e.inflight
            .extend([op(1, false), op(2, true), op(3, true), op(4, false)]);
        let first = e.reap();
        let left_first = e.inflight();
        e.inflight[0].done = true;
        let second = e.reap();
        let left_second = e.inflight();
        // (Nothing of these is really in flight: the engine must not wait for them.)
        e.inflight.clear();
        assert_eq!(first.durable, None);
        assert_eq!(left_first, 4);
        assert_eq!(second.durable, Some(30));
        assert_eq!(left_second, 1);
    }

    #[test]
    fn a_wake_completes_the_rings_eventfd_read() {
        let Some((efd, mut e)) = ring(1) else {
            return;
        };
        // Arms the read of the eventfd without waiting.
        e.wait(Duration::ZERO);
        assert!(e.efd_armed);
        wake(efd.as_raw_fd());
        for _ in 0..50 {
            if !e.efd_armed {
                break;
            }
            e.wait(Duration::from_millis(100));
        }
        assert!(!e.efd_armed, "the wake-up never reached the ring");
        assert_eq!(*e.efd_buf, 1);
        // The ring consumed the counter.
        let mut v = 0u64;
        // SAFETY: reading 8 bytes into a u64.
        let n = unsafe { libc::read(efd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        assert_eq!(n, -1);
    }
}
