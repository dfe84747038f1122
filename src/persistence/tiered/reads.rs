//! The executor's own read ring: cold-value reads and the compactor's page reads,
//! submitted by the executor on an io_uring it owns, with no thread in between.
//!
//! The ring posts completions to an eventfd (`IORING_REGISTER_EVENTFD`) that the event
//! loop keeps in its poll set; the executor reaps them in its own loop turn
//! ([`ReadRing::reap`]), checks the pages' checksums and the record's key, and copies
//! the value into the arena. Every submitted read lands in a slot of one 4 KiB-aligned
//! pool registered with the ring (`IORING_REGISTER_BUFFERS`, read with
//! `IORING_OP_READ_FIXED`), so a read allocates no I/O buffer; a record longer than a
//! slot (more than [`SLOT_PAGES`] pages) is read into a buffer of its own. At most
//! [`INFLIGHT_MAX`] reads are in the kernel; the rest wait in a queue, in order, as do
//! reads while a test holds them (`DEBUG TIERED-HOLD-READS`).

use super::io::{take_fault, Done, Shared};
use super::page::{self, PAGE_BYTES};
use crate::keyspace::tiered::ColdStub;
use crate::persistence::aof::uring::AlignedBuf;
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Reads in the kernel at once (and slots in the registered pool).
pub const INFLIGHT_MAX: usize = 64;
/// Pages per pool slot: a record up to this long is read into the registered pool.
pub const SLOT_PAGES: usize = 4;
const SLOT_BYTES: usize = SLOT_PAGES * PAGE_BYTES;

/// What a read is for.
pub enum ReadKind {
    /// `key`'s value at `stub` (pages checked, record checked to be the key's).
    Value { stub: ColdStub, key: Vec<u8> },
    /// One shared page whole, checksum checked (the compactor's read).
    Page,
}

/// A read waiting for a slot or in flight.
pub struct ReadOp {
    pub id: u64,
    pub kind: ReadKind,
    pub first_page: u32,
    pub pages: usize,
}

/// Where a read in flight lands.
enum Target {
    Slot(usize),
    Own(AlignedBuf),
}

struct InFlight {
    op: ReadOp,
    target: Target,
    submitted: Instant,
}

/// How reads reach the file (INFO tiered `tiered_read_path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// The executor's ring, into registered buffers.
    Fixed,
    /// The executor's ring, into the same pool unregistered (registration refused,
    /// e.g. by `RLIMIT_MEMLOCK`).
    Plain,
}

pub struct ReadRing {
    // Declared first: dropped (closed) before the buffers below, and only after `Drop`
    // waited for every read in flight.
    ring: IoUring,
    /// The tier file (a duplicate of the I/O thread's descriptor, `O_DIRECT` alike).
    file: std::fs::File,
    /// The eventfd the ring signals; the event loop polls it.
    completion_fd: OwnedFd,
    pool: AlignedBuf,
    free_slots: Vec<usize>,
    /// Slot index → the read using it (by tag), for reaping.
    inflight: Vec<Option<InFlight>>,
    /// Reads in the kernel into buffers of their own (records longer than a slot).
    own: Vec<(u64, InFlight)>,
    next_own_tag: u64,
    queue: VecDeque<ReadOp>,
    path: ReadPath,
    /// When the event loop last saw the eventfd fire (the `wake` stage's start).
    signalled: Option<Instant>,
}

/// Tags of reads into buffers of their own start here (slots use their index).
const OWN_TAG_BASE: u64 = 1 << 32;

impl ReadRing {
    /// Sets up the ring, its eventfd and the registered pool. Fails where io_uring is
    /// unavailable: the I/O thread reads then.
    pub fn new(file: std::fs::File) -> std::io::Result<ReadRing> {
        let ring = IoUring::new((INFLIGHT_MAX * 2) as u32)?;
        let completion_fd = crate::persistence::aof::uring::eventfd()?;
        ring.submitter()
            .register_eventfd(completion_fd.as_raw_fd())?;
        let mut pool = AlignedBuf::zeroed(INFLIGHT_MAX * SLOT_BYTES);
        let iov = libc::iovec {
            iov_base: pool.as_mut_slice().as_mut_ptr() as *mut libc::c_void,
            iov_len: INFLIGHT_MAX * SLOT_BYTES,
        };
        // SAFETY: the pool lives as long as the ring (dropped after it, see `Drop`).
        let path = match unsafe { ring.submitter().register_buffers(&[iov]) } {
            Ok(()) => ReadPath::Fixed,
            Err(e) => {
                crate::warning!(
                    "Tiering: registering the read buffers failed ({e}); reads go into the same buffers unregistered"
                );
                ReadPath::Plain
            }
        };
        Ok(ReadRing {
            ring,
            file,
            completion_fd,
            pool,
            free_slots: (0..INFLIGHT_MAX).rev().collect(),
            inflight: (0..INFLIGHT_MAX).map(|_| None).collect(),
            own: Vec::new(),
            next_own_tag: OWN_TAG_BASE,
            queue: VecDeque::new(),
            path,
            signalled: None,
        })
    }

    pub fn completion_fd(&self) -> RawFd {
        self.completion_fd.as_raw_fd()
    }

    pub fn path(&self) -> ReadPath {
        self.path
    }

    /// Reads in the kernel now, and waiting in the queue.
    pub fn in_flight(&self) -> usize {
        (INFLIGHT_MAX - self.free_slots.len()) + self.own.len()
    }
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The event loop saw the eventfd fire: resets it and notes when.
    pub fn signalled(&mut self) {
        let mut v: u64 = 0;
        // SAFETY: an 8-byte read from our non-blocking eventfd into a local.
        unsafe {
            libc::read(
                self.completion_fd.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            );
        }
        self.signalled.get_or_insert_with(Instant::now);
    }

    /// Queues a read and submits what may go now.
    pub fn start(&mut self, op: ReadOp, shared: &Shared) {
        self.queue.push_back(op);
        self.submit_queued(shared);
    }

    /// Submits queued reads while the in-flight bound allows and no test holds them.
    pub fn submit_queued(&mut self, shared: &Shared) {
        if shared.hold_reads.load(Ordering::Acquire) {
            return;
        }
        let mut pushed = 0;
        while self.in_flight() < INFLIGHT_MAX {
            let Some(op) = self.queue.pop_front() else {
                break;
            };
            let fd = types::Fd(self.file.as_raw_fd());
            let len = op.pages * PAGE_BYTES;
            let offset = op.first_page as u64 * PAGE_BYTES as u64;
            let (sqe, target, tag) = if op.pages <= SLOT_PAGES {
                let slot = self.free_slots.pop().expect("a free slot under the bound");
                // SAFETY: the slot lies inside the pool.
                let ptr = unsafe { self.pool.as_mut_slice().as_mut_ptr().add(slot * SLOT_BYTES) };
                let sqe = match self.path {
                    ReadPath::Fixed => opcode::ReadFixed::new(fd, ptr, len as u32, 0)
                        .offset(offset)
                        .build(),
                    ReadPath::Plain => opcode::Read::new(fd, ptr, len as u32)
                        .offset(offset)
                        .build(),
                };
                (sqe, Target::Slot(slot), slot as u64)
            } else {
                let mut buf = AlignedBuf::zeroed(len);
                let sqe = opcode::Read::new(fd, buf.as_mut_slice().as_mut_ptr(), len as u32)
                    .offset(offset)
                    .build();
                let tag = self.next_own_tag;
                self.next_own_tag += 1;
                (sqe, Target::Own(buf), tag)
            };
            let sqe = sqe.user_data(tag);
            // SAFETY: the target buffer stays alive (pool slot or `own`) until the
            // completion is reaped, and `Drop` waits for every read in flight.
            if unsafe { self.ring.submission().push(&sqe) }.is_err() {
                let _ = self.ring.submit();
                // SAFETY: as above.
                if unsafe { self.ring.submission().push(&sqe) }.is_err() {
                    if let Target::Slot(s) = target {
                        self.free_slots.push(s);
                    }
                    self.queue.push_front(op);
                    break;
                }
            }
            let f = InFlight {
                op,
                target,
                submitted: Instant::now(),
            };
            match f.target {
                Target::Slot(s) => self.inflight[s] = Some(f),
                Target::Own(_) => self.own.push((tag, f)),
            }
            pushed += 1;
        }
        if pushed > 0 {
            if let Err(e) = self.ring.submit() {
                crate::warning!("Tiering: io_uring_enter (reads) failed: {e}");
            }
        }
    }

    /// Takes the completions posted so far, checks what they read, frees their slots and
    /// submits queued reads; the results go to `out`.
    pub fn reap(&mut self, shared: &Shared, out: &mut Vec<Done>) {
        let woke = self.signalled.take();
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        if cqes.is_empty() {
            // Queued reads may go now (a test released its hold, say).
            if !self.queue.is_empty() {
                self.submit_queued(shared);
            }
            return;
        }
        let reaped = Instant::now();
        for (tag, res) in cqes {
            let f = if tag < OWN_TAG_BASE {
                let Some(f) = self.inflight.get_mut(tag as usize).and_then(Option::take) else {
                    continue;
                };
                self.free_slots.push(tag as usize);
                f
            } else {
                let Some(i) = self.own.iter().position(|(t, _)| *t == tag) else {
                    continue;
                };
                self.own.swap_remove(i).1
            };
            // The loop noticed the eventfd after this read went in: the wake stage runs
            // from then; otherwise the completion was found on the way (no wake).
            let completed = woke.filter(|&w| w >= f.submitted).unwrap_or(reaped);
            let len = f.op.pages * PAGE_BYTES;
            let buf: &[u8] = match &f.target {
                Target::Slot(s) => &self.pool.as_slice()[s * SLOT_BYTES..s * SLOT_BYTES + len],
                Target::Own(b) => b.as_slice(),
            };
            out.push(finish(
                f.op,
                res as i64,
                buf,
                shared,
                f.submitted,
                completed,
            ));
        }
        self.submit_queued(shared);
    }
}

/// The result of a read whose kernel call answered `res` (bytes, or -errno).
fn finish(
    op: ReadOp,
    res: i64,
    buf: &[u8],
    shared: &Shared,
    submitted: Instant,
    completed: Instant,
) -> Done {
    let injected = match op.kind {
        ReadKind::Value { .. } if take_fault(&shared.fail_reads) => Some(-(libc::EIO as i64)),
        ReadKind::Page if take_fault(&shared.fail_page_reads) => Some(-(libc::EIO as i64)),
        _ => None,
    };
    let res = injected.unwrap_or(res);
    let want = buf.len() as i64;
    let err = if res < 0 {
        Some(std::io::Error::from_raw_os_error((-res) as i32).to_string())
    } else if res < want {
        Some(page::short_read(op.first_page, res, want))
    } else {
        None
    };
    match op.kind {
        ReadKind::Value { stub, key } => Done::Read {
            id: op.id,
            result: match err {
                Some(e) => Err(e),
                None => page::decode_value(buf, stub, &key),
            },
            submitted,
            completed,
        },
        ReadKind::Page => Done::PageRead {
            id: op.id,
            result: match err {
                Some(e) => Err(e),
                None => page::check_page(buf, op.first_page).map(|()| buf.to_vec()),
            },
        },
    }
}

impl Drop for ReadRing {
    fn drop(&mut self) {
        // The kernel may still write into the buffers of reads in flight: wait for
        // them before the buffers are freed. If waiting fails, the buffers are leaked
        // rather than freed under a read.
        while self.in_flight() > 0 {
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    let pool = std::mem::replace(&mut self.pool, AlignedBuf::zeroed(PAGE_BYTES));
                    std::mem::forget(pool);
                    for (_, f) in self.own.drain(..) {
                        std::mem::forget(f);
                    }
                    return;
                }
            }
            let tags: Vec<u64> = self.ring.completion().map(|c| c.user_data()).collect();
            for tag in tags {
                if tag < OWN_TAG_BASE {
                    if let Some(slot) = self.inflight.get_mut(tag as usize) {
                        if slot.take().is_some() {
                            self.free_slots.push(tag as usize);
                        }
                    }
                } else if let Some(i) = self.own.iter().position(|(t, _)| *t == tag) {
                    self.own.swap_remove(i);
                }
            }
        }
    }
}
