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
            let r = self.wait(Duration::from_millis(100));
            if r.durable.is_some() {
                all.durable = r.durable;
            }
            if all.error.is_none() {
                all.error = r.error;
            }
            all.latencies_us.extend(r.latencies_us);
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
