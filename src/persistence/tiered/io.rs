//! The tier file's I/O thread (`cairn-tier`): page writes (and reads, where the
//! executor has no read ring of its own, `reads.rs`) submitted through io_uring on the
//! file opened `O_DIRECT`, into 4 KiB-aligned buffers. The executor hands requests over
//! a channel and rings an eventfd that the thread keeps armed in the ring, so one
//! `io_uring_enter` waits for a completion or for new work alike. Completions go back
//! through a shared list and a wake-up of the executor's loop.
//!
//! The thread also seals written pages (their checksums) and checks read pages and the
//! record's key, so the executor only copies the value into the arena. Where io_uring
//! is unavailable the thread does the same work with `pwrite`/`pread`.

use super::page::{self, PAGE_BYTES};
use crate::keyspace::tiered::ColdStub;
use crate::persistence::aof::uring::AlignedBuf;
use io_uring::{opcode, types, IoUring};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Most operations in flight at once.
const INFLIGHT_MAX: usize = 64;
const EFD_TAG: u64 = u64::MAX;

pub enum Req {
    /// Write whole pages (payloads filled; the thread seals them) at `first_page`.
    Write {
        id: u64,
        first_page: u32,
        buf: AlignedBuf,
    },
    /// Read the pages of `stub`'s record and decode `key`'s value.
    Read {
        id: u64,
        stub: ColdStub,
        key: Vec<u8>,
    },
    /// Read shared page `page` whole and check its checksum (the compactor's read).
    ReadPage { id: u64, page: u32 },
}

pub enum Done {
    Written {
        id: u64,
        result: Result<(), String>,
    },
    Read {
        id: u64,
        result: Result<Vec<u8>, String>,
        /// When the read was handed to the kernel, and when its completion was taken
        /// (for `INFO tiered`'s cold-read timeline).
        submitted: Instant,
        completed: Instant,
    },
    /// A shared page's bytes (checksum checked), or why not.
    PageRead {
        id: u64,
        result: Result<Vec<u8>, String>,
    },
}

/// What the thread and the executor share.
pub struct Shared {
    pub done: Mutex<Vec<Done>>,
    /// Wakes the executor's loop (its mio waker), set before the first request.
    pub wake: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Tests (`DEBUG TIERED-HOLD-READS`): reads wait in the thread until this is cleared.
    pub hold_reads: std::sync::atomic::AtomicBool,
    /// Tests (`DEBUG TIERED-HOLD-WRITES`): writes wait in the thread until this is cleared.
    pub hold_writes: std::sync::atomic::AtomicBool,
    /// Tests (`DEBUG TIERED-WRITE-DELAY`): microseconds the thread sleeps before each
    /// write, as a slow device would take.
    pub write_delay_us: std::sync::atomic::AtomicU64,
    /// Tests (`DEBUG TIERED-FAIL`): the next this many reads fail with EIO, writes with
    /// ENOSPC, as a failing device would answer.
    pub fail_reads: std::sync::atomic::AtomicU32,
    pub fail_writes: std::sync::atomic::AtomicU32,
    /// Tests (`DEBUG TIERED-FAIL N M P`): the compactor's next this many page reads fail
    /// with EIO (kept apart from `fail_reads`, whose failures are for clients' reads).
    pub fail_page_reads: std::sync::atomic::AtomicU32,
}

/// Takes one injected failure from `n`, if any is left.
pub(super) fn take_fault(n: &std::sync::atomic::AtomicU32) -> bool {
    use std::sync::atomic::Ordering;
    n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1))
        .is_ok()
}

impl Shared {
    fn complete(&self, d: Vec<Done>) {
        if d.is_empty() {
            return;
        }
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(d);
        if let Some(w) = self.wake.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            w();
        }
    }
}

enum What {
    Write {
        id: u64,
    },
    Read {
        id: u64,
        stub: ColdStub,
        key: Vec<u8>,
    },
    ReadPage {
        id: u64,
    },
}

struct Op {
    what: What,
    first_page: u32,
    buf: AlignedBuf,
    /// When it was prepared, just before it is handed to the kernel.
    submitted: Instant,
}

fn byte_offset(page: u32) -> u64 {
    page as u64 * PAGE_BYTES as u64
}

/// The result of an operation whose kernel call answered `res` (bytes, or -errno).
fn finish(op: Op, res: i64, shared: &Shared) -> Done {
    let completed = Instant::now();
    let injected = match op.what {
        What::Write { .. } if take_fault(&shared.fail_writes) => Some(-(libc::ENOSPC as i64)),
        What::Read { .. } if take_fault(&shared.fail_reads) => Some(-(libc::EIO as i64)),
        What::ReadPage { .. } if take_fault(&shared.fail_page_reads) => Some(-(libc::EIO as i64)),
        _ => None,
    };
    let res = injected.unwrap_or(res);
    let want = op.buf.as_slice().len() as i64;
    let err = if res < 0 {
        Some(std::io::Error::from_raw_os_error((-res) as i32).to_string())
    } else if res < want {
        Some(match op.what {
            What::Read { .. } | What::ReadPage { .. } => page::short_read(op.first_page, res, want),
            What::Write { .. } => format!("short write ({res} of {want} bytes)"),
        })
    } else {
        None
    };
    match op.what {
        What::Write { id } => Done::Written {
            id,
            result: err.map_or(Ok(()), Err),
        },
        What::Read { id, stub, key } => Done::Read {
            id,
            result: match err {
                Some(e) => Err(e),
                None => page::decode_value(op.buf.as_slice(), stub, &key),
            },
            submitted: op.submitted,
            completed,
        },
        What::ReadPage { id } => Done::PageRead {
            id,
            result: match err {
                Some(e) => Err(e),
                None => page::check_page(op.buf.as_slice(), op.first_page)
                    .map(|()| op.buf.as_slice().to_vec()),
            },
        },
    }
}

/// A test's write delay, slept before a write is issued.
fn write_delay(req: &Req, shared: &Shared) {
    if matches!(req, Req::Write { .. }) {
        let us = shared
            .write_delay_us
            .load(std::sync::atomic::Ordering::Acquire);
        if us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(us));
        }
    }
}

/// Turns a request into an operation with its buffer (a write's pages are sealed now).
fn prepare(req: Req) -> Op {
    match req {
        Req::Write {
            id,
            first_page,
            mut buf,
        } => {
            page::seal_pages(buf.as_mut_slice());
            Op {
                what: What::Write { id },
                first_page,
                buf,
                submitted: Instant::now(),
            }
        }
        Req::Read { id, stub, key } => Op {
            buf: AlignedBuf::zeroed(page::pages_of(stub) as usize * PAGE_BYTES),
            first_page: stub.page,
            what: What::Read { id, stub, key },
            submitted: Instant::now(),
        },
        Req::ReadPage { id, page } => Op {
            buf: AlignedBuf::zeroed(PAGE_BYTES),
            first_page: page,
            what: What::ReadPage { id },
            submitted: Instant::now(),
        },
    }
}

/// Runs the thread until the channel closes and nothing is in flight.
pub fn run(file: std::fs::File, efd: OwnedFd, rx: Receiver<Req>, shared: Arc<Shared>) {
    let fd = file.as_raw_fd();
    match IoUring::new(INFLIGHT_MAX as u32 * 2) {
        Ok(ring) => run_ring(ring, fd, efd.as_raw_fd(), rx, &shared),
        Err(e) => {
            crate::warning!(
                "Tiering: io_uring unavailable ({e}); the tier thread uses pread/pwrite"
            );
            run_blocking(fd, rx, &shared)
        }
    }
    drop(file);
}

/// Whether a test holds requests of `req`'s kind in the thread now.
fn is_held(req: &Req, shared: &Shared) -> bool {
    let flag = match req {
        Req::Write { .. } => &shared.hold_writes,
        Req::Read { .. } | Req::ReadPage { .. } => &shared.hold_reads,
    };
    flag.load(std::sync::atomic::Ordering::Acquire)
}

fn run_blocking(fd: RawFd, rx: Receiver<Req>, shared: &Shared) {
    let mut held: VecDeque<Req> = VecDeque::new();
    loop {
        let free = held.iter().position(|r| !is_held(r, shared));
        let req = if let Some(i) = free {
            held.remove(i).expect("held")
        } else {
            match rx.recv_timeout(std::time::Duration::from_millis(10)) {
                Ok(r) => r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            }
        };
        if is_held(&req, shared) {
            held.push_back(req);
            continue;
        }
        write_delay(&req, shared);
        let mut op = prepare(req);
        let off = byte_offset(op.first_page) as libc::off_t;
        let len = op.buf.as_slice().len();
        // SAFETY: the buffer is valid for `len` bytes and owned by this thread.
        let res = unsafe {
            match op.what {
                What::Write { .. } => {
                    libc::pwrite(fd, op.buf.as_slice().as_ptr() as *const _, len, off) as i64
                }
                What::Read { .. } | What::ReadPage { .. } => {
                    libc::pread(fd, op.buf.as_mut_slice().as_mut_ptr() as *mut _, len, off) as i64
                }
            }
        };
        let res = if res < 0 {
            -(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO) as i64)
        } else {
            res
        };
        shared.complete(vec![finish(op, res, shared)]);
    }
}

fn run_ring(mut ring: IoUring, fd: RawFd, efd: RawFd, rx: Receiver<Req>, shared: &Shared) {
    // The eventfd read's target outlives the ring (the kernel may still own it while
    // the ring is torn down): 8 bytes, leaked once per server.
    let efd_buf: &'static mut u64 = Box::leak(Box::new(0u64));
    let mut efd_armed = false;
    let mut queue: VecDeque<Req> = VecDeque::new();
    let mut inflight: HashMap<u64, Op> = HashMap::new();
    let mut next_tag = 0u64;
    let mut closed = false;
    let mut held: VecDeque<Req> = VecDeque::new();
    loop {
        // Requests no longer held go first, in their order.
        if held.iter().any(|r| !is_held(r, shared)) {
            let (go, stay): (VecDeque<Req>, VecDeque<Req>) =
                held.drain(..).partition(|r| !is_held(r, shared));
            held = stay;
            for r in go.into_iter().rev() {
                queue.push_front(r);
            }
        }
        loop {
            match rx.try_recv() {
                Ok(r) => queue.push_back(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        if closed && queue.is_empty() && inflight.is_empty() {
            return;
        }
        if inflight.is_empty() && queue.is_empty() && held.iter().any(|r| !is_held(r, shared)) {
            continue;
        }
        while inflight.len() < INFLIGHT_MAX {
            let Some(req) = queue.pop_front() else { break };
            if is_held(&req, shared) {
                held.push_back(req);
                continue;
            }
            write_delay(&req, shared);
            let mut op = prepare(req);
            let off = byte_offset(op.first_page);
            let len = op.buf.as_slice().len() as u32;
            let tag = next_tag;
            next_tag += 1;
            let sqe = match op.what {
                What::Write { .. } => {
                    opcode::Write::new(types::Fd(fd), op.buf.as_slice().as_ptr(), len)
                        .offset(off)
                        .build()
                }
                What::Read { .. } | What::ReadPage { .. } => {
                    opcode::Read::new(types::Fd(fd), op.buf.as_mut_slice().as_mut_ptr(), len)
                        .offset(off)
                        .build()
                }
            }
            .user_data(tag);
            // SAFETY: the buffer lives in `inflight` until its completion is reaped.
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                let _ = ring.submit();
                // SAFETY: as above.
                if unsafe { ring.submission().push(&sqe) }.is_err() {
                    shared.complete(vec![finish(op, -(libc::EAGAIN as i64), shared)]);
                    continue;
                }
            }
            inflight.insert(tag, op);
        }
        if !efd_armed && !closed {
            let sqe = opcode::Read::new(types::Fd(efd), efd_buf as *mut u64 as *mut u8, 8)
                .build()
                .user_data(EFD_TAG);
            // SAFETY: the target is 'static.
            if unsafe { ring.submission().push(&sqe) }.is_ok() {
                efd_armed = true;
            }
        }
        if let Err(e) = ring.submit_and_wait(1) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                crate::warning!("Tiering: io_uring_enter failed: {e}");
            }
        }
        let cqes: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        let mut done = Vec::new();
        for (tag, res) in cqes {
            if tag == EFD_TAG {
                efd_armed = false;
                continue;
            }
            if let Some(op) = inflight.remove(&tag) {
                done.push(finish(op, res as i64, shared));
            }
        }
        shared.complete(done);
        if closed && inflight.is_empty() && queue.is_empty() && efd_armed {
            // Only the eventfd read is left: nothing more will come.
            return;
        }
    }
}
