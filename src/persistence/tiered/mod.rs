//! The tier file and its bookkeeping, executor side: placing values in pages, handing
//! writes to the I/O thread (`io.rs`), submitting reads on the executor's own ring
//! (`reads.rs`; the I/O thread reads where that ring is unavailable), turning
//! completions into events,
//! the cooled queue (values in RAM that also have a current copy on disk), and what a
//! read in flight keeps from being reused.
//!
//! The executor (`commands/executor/tiering.rs`) decides what to stash, when to drop
//! RAM copies and which clients wait for which read; this module never touches the
//! keyspace.

pub mod bookkeeper;
pub mod companion;
pub mod io;
pub mod page;
pub mod reads;

use crate::keyspace::tiered::{ColdReader, ColdStub};
use crate::persistence::aof::uring::AlignedBuf;
use bookkeeper::Bookkeeper;
use page::{PAGE_BYTES, PAGE_HEADER_BYTES, PAYLOAD_BYTES};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

/// A value written (or being written) to the tier file: whose, where, and a hash of the
/// bytes written, which proves later that the entry still holds exactly those bytes.
#[derive(Clone, Debug)]
pub struct Placed {
    pub db: usize,
    pub key: Vec<u8>,
    pub stub: ColdStub,
    pub value_hash: u64,
    /// The file's generation when the copy was written or read back (see
    /// [`TierStore::generation`]): a copy from an older one may have been cut off.
    pub gen: u64,
}

/// What the I/O thread finished, for the executor.
pub enum Event {
    /// A write of these values ended (each is in RAM still; on success their disk copy
    /// is current unless the entry changed meanwhile).
    Stashed {
        items: Vec<Placed>,
        result: Result<(), String>,
    },
    /// A read ended: the value of `key` at `stub`, checked, or why not.
    Read {
        id: u64,
        db: usize,
        key: Vec<u8>,
        stub: ColdStub,
        result: Result<Vec<u8>, String>,
        times: ReadTimes,
    },
    /// The compactor's read of shared page `page` ended: its bytes (checksum checked),
    /// or why not.
    PageRead {
        page: u32,
        result: Result<Vec<u8>, String>,
    },
}

/// Why a value was not stashed.
#[derive(Debug, PartialEq, Eq)]
pub enum StashRefused {
    /// The tier file has no room (the value stays in RAM).
    NoSpace,
}

#[derive(Default, Debug, Clone)]
pub struct TierStats {
    pub stashes: u64,
    pub stash_bytes: u64,
    pub stash_errors: u64,
    pub stash_no_space: u64,
    pub reads: u64,
    pub reads_shared: u64,
    pub read_errors: u64,
    /// Pages written to the file (successful writes), for the write amplification.
    pub written_pages: u64,
    /// The compactor's page reads that ended, and those that failed.
    pub page_reads: u64,
    pub page_read_errors: u64,
    /// Shared pages written before they were full ([`TierStore::flush`]).
    pub partial_pages: u64,
}

/// The small-record page being filled.
struct OpenPage {
    page: u32,
    buf: AlignedBuf,
    fill: usize,
    items: Vec<Placed>,
}

struct PendingRead {
    db: usize,
    key: Vec<u8>,
    stub: ColdStub,
    started: Instant,
}

/// A cold read's timeline (CLOCK_MONOTONIC): the executor started it; it was handed to
/// the kernel (by the executor on its ring, after waiting for the in-flight bound or a
/// test's hold; or by the I/O thread); its completion was noticed (the event loop saw
/// the ring's eventfd fire, or the thread took it; a completion found without a wake-up
/// counts as noticed when taken); the executor took it in its loop turn.
#[derive(Clone, Copy, Debug)]
pub struct ReadTimes {
    pub started: Instant,
    pub submitted: Instant,
    pub completed: Instant,
    pub polled: Instant,
}

pub struct TierStore {
    pub book: Bookkeeper,
    pub path: std::path::PathBuf,
    tx: Option<mpsc::Sender<io::Req>>,
    efd: OwnedFd,
    shared: Arc<io::Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The executor's read ring (None: reads go to the I/O thread).
    ring: Option<reads::ReadRing>,
    next_id: u64,
    open: Option<OpenPage>,
    writes: HashMap<u64, Vec<Placed>>,
    reads: HashMap<u64, PendingRead>,
    /// The read in flight for a record, so concurrent readers share it.
    read_of: HashMap<(u32, u32), u64>,
    /// First pages of reads in flight: freeing a record there waits (its pages must not
    /// be rewritten under the read).
    pages_reading: HashMap<u32, u32>,
    deferred_frees: Vec<ColdStub>,
    /// Shared pages whose write is in flight (not the compactor's to read yet).
    writing_pages: std::collections::HashSet<u32>,
    /// The compactor's page reads in flight: id → page.
    page_reads: HashMap<u64, u32>,
    /// Shared pages whose bytes failed the compactor's checks (checksum, short read):
    /// not read again until the page is given back (their records' reads fail by key).
    damaged: std::collections::HashSet<u32>,
    /// Snapshots copying the file: while any runs, freed records keep their pages (a
    /// page live at the snapshot's cut must not be rewritten before it is copied).
    captures: u32,
    /// The bookkeeper's high-water page, for a snapshot's copy (another thread).
    high_water: Arc<std::sync::atomic::AtomicU32>,
    /// Values in RAM with a current disk copy, oldest first: memory is reclaimed from
    /// the front without a write.
    pub cooled: VecDeque<Placed>,
    pub stats: TierStats,
    pending_stash_pages: u64,
    /// The executor's descriptor of the file, for `fstat` only (see [`TierStore::check_file`]).
    probe: std::fs::File,
    /// The preallocated length, and the length last seen (a shorter one is a cut;
    /// writes past the end after a cut make it grow again).
    file_len: u64,
    seen_len: u64,
    /// Bumped each time the file is found shorter than before.
    gen: u64,
    pub file: FileHealth,
}

/// What [`TierStore::check_file`] found (INFO tiered).
#[derive(Default, Debug, Clone)]
pub struct FileHealth {
    /// The file's name was removed (st_nlink 0): reads and writes go on through the
    /// open descriptors.
    pub deleted: bool,
    /// Times the file was found shorter than before.
    pub truncations: u64,
    /// Its length at the last check.
    pub last_len: u64,
}

fn open_tier_file(path: &std::path::Path, direct: bool) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(true).create(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

/// Opens `path` for the tier, `O_DIRECT` where the filesystem allows it.
fn open_direct(path: &std::path::Path) -> std::io::Result<(std::fs::File, bool)> {
    match open_tier_file(path, true) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            Ok((open_tier_file(path, false)?, false))
        }
        Err(e) => Err(e),
    }
}

impl TierStore {
    /// Creates (or empties) the tier file `<prefix>-0000.ssd`, preallocates
    /// `capacity_bytes` (rounded down to pages) and starts the I/O thread. Nothing
    /// refers to an older file's content (no image or log is written with tiering on),
    /// so it starts empty.
    pub fn open(prefix: &str, capacity_bytes: u64) -> Result<TierStore, String> {
        let path = std::path::PathBuf::from(format!("{prefix}-0000.ssd"));
        let pages = (capacity_bytes / PAGE_BYTES as u64).min(u32::MAX as u64 - 1) as u32;
        if pages == 0 {
            return Err("tiered-max-file-size is smaller than a page".into());
        }
        let (file, direct) =
            open_direct(&path).map_err(|e| format!("can't open {}: {e}", path.display()))?;
        if !direct {
            crate::warning!(
                "Tiering: {} does not allow O_DIRECT; the tier file goes through the page cache",
                path.display()
            );
        }
        let len = pages as u64 * PAGE_BYTES as u64;
        file.set_len(0)
            .map_err(|e| format!("can't truncate {}: {e}", path.display()))?;
        // SAFETY: plain syscall on an owned descriptor.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                file.set_len(len)
                    .map_err(|e| format!("can't size {}: {e}", path.display()))?;
            } else {
                return Err(format!(
                    "can't preallocate {} ({len} bytes): {e}",
                    path.display()
                ));
            }
        }
        // SAFETY: eventfd(2) returns a new descriptor we own, or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor, owned once.
        let efd = unsafe { OwnedFd::from_raw_fd(efd) };
        let thread_efd = efd.try_clone().map_err(|e| format!("eventfd dup: {e}"))?;
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(io::Shared {
            done: Mutex::new(Vec::new()),
            wake: Mutex::new(None),
            hold_reads: std::sync::atomic::AtomicBool::new(false),
            hold_writes: std::sync::atomic::AtomicBool::new(false),
            write_delay_us: std::sync::atomic::AtomicU64::new(0),
            fail_reads: std::sync::atomic::AtomicU32::new(0),
            fail_writes: std::sync::atomic::AtomicU32::new(0),
            fail_page_reads: std::sync::atomic::AtomicU32::new(0),
        });
        let probe = file
            .try_clone()
            .map_err(|e| format!("can't dup {}: {e}", path.display()))?;
        let ring = match file.try_clone().and_then(reads::ReadRing::new) {
            Ok(r) => Some(r),
            Err(e) => {
                crate::warning!(
                    "Tiering: the executor's read ring is unavailable ({e}); the tier thread reads"
                );
                None
            }
        };
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-tier".into())
            .spawn(move || io::run(file, thread_efd, rx, s2))
            .map_err(|e| format!("can't start the tier thread: {e}"))?;
        Ok(TierStore {
            book: Bookkeeper::new(pages),
            path,
            tx: Some(tx),
            efd,
            shared,
            thread: Some(thread),
            ring,
            next_id: 1,
            open: None,
            writes: HashMap::new(),
            reads: HashMap::new(),
            read_of: HashMap::new(),
            pages_reading: HashMap::new(),
            deferred_frees: Vec::new(),
            writing_pages: std::collections::HashSet::new(),
            page_reads: HashMap::new(),
            damaged: std::collections::HashSet::new(),
            captures: 0,
            high_water: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            cooled: VecDeque::new(),
            stats: TierStats::default(),
            pending_stash_pages: 0,
            probe,
            file_len: len,
            seen_len: len,
            gen: 0,
            file: FileHealth {
                last_len: len,
                ..FileHealth::default()
            },
        })
    }

    /// The file's generation: it changes each time the file is found shorter than
    /// before, so copies placed in an older one ([`Placed::gen`]) are not trusted to be
    /// on disk any more.
    pub fn generation(&self) -> u64 {
        self.gen
    }

    /// Looks at the file through its open descriptor (one `fstat`, no I/O on the data):
    /// a file whose name was removed (st_nlink 0) goes on working through the open
    /// descriptors, so it is only reported, once; a file shorter than before was
    /// truncated under the server: reported, and the generation moves on so that RAM
    /// copies whose disk copies may be gone are kept (see the executor's offload).
    /// Records in the cut pages fail to read (a short read, or a checksum mismatch once
    /// later writes extend the file over a hole); writes past the end extend the file
    /// again. Returns true when the generation changed.
    pub fn check_file(&mut self) -> bool {
        let Ok(m) = self.probe.metadata() else {
            return false;
        };
        use std::os::unix::fs::MetadataExt;
        if m.nlink() == 0 && !self.file.deleted {
            self.file.deleted = true;
            crate::warning!(
                "Tiering: the tier file {} was deleted under the server; cairn goes on reading and writing it through its open descriptor (its space is released when the server exits)",
                self.path.display()
            );
        }
        let len = m.len();
        self.file.last_len = len;
        if len < self.seen_len && len < self.file_len {
            self.seen_len = len;
            self.gen += 1;
            self.file.truncations += 1;
            crate::warning!(
                "Tiering: the tier file {} was truncated to {len} bytes under the server (it had {} preallocated); values in the cut pages fail to read (the command gets an error naming the key), copies still in memory are kept",
                self.path.display(),
                self.file_len
            );
            return true;
        }
        self.seen_len = self.seen_len.max(len);
        false
    }

    /// How the I/O thread wakes the executor's loop.
    pub fn set_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        *self.shared.wake.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake);
    }

    /// Tests: holds reads not yet submitted (true) or lets them go (false).
    pub fn hold_reads(&mut self, hold: bool) {
        self.shared
            .hold_reads
            .store(hold, std::sync::atomic::Ordering::Release);
        if let Some(r) = self.ring.as_mut() {
            r.submit_queued(&self.shared);
        }
        self.wake_thread();
    }

    /// The eventfd the executor's read ring signals when a read completes (the event
    /// loop polls it), if reads go through that ring.
    pub fn read_completion_fd(&self) -> Option<std::os::fd::RawFd> {
        self.ring.as_ref().map(reads::ReadRing::completion_fd)
    }

    /// The event loop saw the read ring's eventfd fire.
    pub fn read_ring_signalled(&mut self) {
        if let Some(r) = self.ring.as_mut() {
            r.signalled();
        }
    }

    /// How reads reach the file (INFO tiered `tiered_read_path`).
    pub fn read_path(&self) -> &'static str {
        match self.ring.as_ref().map(reads::ReadRing::path) {
            Some(reads::ReadPath::Fixed) => "executor-ring-fixed",
            Some(reads::ReadPath::Plain) => "executor-ring",
            None => "tier-thread",
        }
    }

    /// Reads in the kernel, and reads waiting for the in-flight bound (or a test's
    /// hold), on the executor's ring.
    pub fn ring_reads(&self) -> (usize, usize) {
        self.ring
            .as_ref()
            .map_or((0, 0), |r| (r.in_flight(), r.queued()))
    }

    /// Tests: holds writes in the I/O thread (true) or lets them go (false).
    pub fn hold_writes(&mut self, hold: bool) {
        self.shared
            .hold_writes
            .store(hold, std::sync::atomic::Ordering::Release);
        self.wake_thread();
    }

    /// Tests: the I/O thread sleeps `us` microseconds before each write (a slow device).
    pub fn set_write_delay(&mut self, us: u64) {
        self.shared
            .write_delay_us
            .store(us, std::sync::atomic::Ordering::Release);
    }

    /// Whether a page is free for a new write (the file is not full).
    pub fn has_room(&self) -> bool {
        self.book.largest_free_extent() > 0 || self.open.is_some()
    }

    /// Tests: the next `reads` reads fail with EIO, `writes` writes with ENOSPC, and
    /// the compactor's next `page_reads` page reads with EIO.
    pub fn inject_failures(&mut self, reads: u32, writes: u32, page_reads: u32) {
        use std::sync::atomic::Ordering;
        self.shared.fail_reads.store(reads, Ordering::Release);
        self.shared.fail_writes.store(writes, Ordering::Release);
        self.shared
            .fail_page_reads
            .store(page_reads, Ordering::Release);
    }

    fn wake_thread(&self) {
        let one = 1u64;
        // SAFETY: an 8-byte write to our eventfd.
        unsafe {
            libc::write(
                self.efd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
    }

    /// A reader for the keyspace's synchronous fallback (its own descriptor).
    pub fn sync_reader(&self) -> Result<Box<dyn ColdReader>, String> {
        let (file, _) = open_direct(&self.path).map_err(|e| e.to_string())?;
        Ok(Box::new(SyncReader { file }))
    }

    fn send(&mut self, req: io::Req) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(req);
            self.wake_thread();
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Places `value` of `key` in the file and queues its write; returns where it goes.
    /// Small values go into the open shared page (written when full, or by
    /// [`TierStore::flush`]).
    pub fn stash(
        &mut self,
        db: usize,
        key: &[u8],
        value: &[u8],
        value_hash: u64,
    ) -> Result<ColdStub, StashRefused> {
        let rec = page::record_bytes(key.len(), value.len());
        if rec > u32::MAX as usize / 2 {
            return Err(StashRefused::NoSpace);
        }
        let rec32 = rec as u32;
        if bookkeeper::is_small(rec32) {
            // A record that does not fit beside the open page's only record but makes a
            // pair with it fills that page as a pair page (`page.rs`): two records over
            // half a payload each would otherwise take a page each.
            if let Some(o) = self.open.as_mut().filter(|o| {
                o.fill + rec > PAYLOAD_BYTES && o.items.len() == 1 && page::pair_fits(o.fill, rec)
            }) {
                page::make_pair_page(o.buf.as_mut_slice(), key, value);
                let stub = ColdStub {
                    page: o.page,
                    offset: 1,
                    record_bytes: rec32,
                    value_bytes: value.len() as u32,
                };
                o.fill = PAYLOAD_BYTES;
                o.items.push(Placed {
                    db,
                    key: key.to_vec(),
                    stub,
                    value_hash,
                    gen: self.gen,
                });
                self.book.add_small(stub.page, rec32);
                self.write_open();
                return Ok(stub);
            }
            if self
                .open
                .as_ref()
                .is_some_and(|o| o.fill + rec > PAYLOAD_BYTES)
            {
                self.write_open();
            }
            if self.open.is_none() {
                let Some(p) = self.book.alloc_small_page() else {
                    self.stats.stash_no_space += 1;
                    return Err(StashRefused::NoSpace);
                };
                self.publish_high_water();
                self.open = Some(OpenPage {
                    page: p,
                    buf: AlignedBuf::zeroed(PAGE_BYTES),
                    fill: 0,
                    items: Vec::new(),
                });
            }
            let o = self.open.as_mut().expect("open page");
            let at = PAGE_HEADER_BYTES + o.fill;
            page::encode_record(&mut o.buf.as_mut_slice()[at..at + rec], key, value);
            let stub = ColdStub {
                page: o.page,
                offset: o.fill as u32,
                record_bytes: rec32,
                value_bytes: value.len() as u32,
            };
            o.fill += rec;
            self.book.add_small(o.page, rec32);
            o.items.push(Placed {
                db,
                key: key.to_vec(),
                stub,
                value_hash,
                gen: self.gen,
            });
            return Ok(stub);
        }
        let Some(first) = self.book.alloc_big(rec32) else {
            self.stats.stash_no_space += 1;
            return Err(StashRefused::NoSpace);
        };
        self.publish_high_water();
        let pages = bookkeeper::pages_for(rec32) as usize;
        let mut buf = AlignedBuf::zeroed(pages * PAGE_BYTES);
        if page::is_whole_page(rec) {
            page::encode_whole_page(buf.as_mut_slice(), key, value);
        } else {
            // The record through the pages' payloads.
            let mut recbuf = vec![0u8; rec];
            page::encode_record(&mut recbuf, key, value);
            for (i, chunk) in recbuf.chunks(PAYLOAD_BYTES).enumerate() {
                let at = i * PAGE_BYTES + PAGE_HEADER_BYTES;
                buf.as_mut_slice()[at..at + chunk.len()].copy_from_slice(chunk);
            }
        }
        let stub = ColdStub {
            page: first,
            offset: 0,
            record_bytes: rec32,
            value_bytes: value.len() as u32,
        };
        let id = self.next_id();
        self.writes.insert(
            id,
            vec![Placed {
                db,
                key: key.to_vec(),
                stub,
                value_hash,
                gen: self.gen,
            }],
        );
        self.pending_stash_pages += pages as u64;
        self.send(io::Req::Write {
            id,
            first_page: first,
            buf,
        });
        Ok(stub)
    }

    /// Writes the open shared page, if it holds any record, before it is full — unless
    /// it is less than half full while another write is in flight: that write's end
    /// gives the offload copies to drop and brings the next call, and a page written
    /// under half full is one the compactor would soon rewrite (each such page was a
    /// write of its own: they made most of the write amplification when memory was
    /// short and every pass step wrote its page).
    pub fn flush(&mut self) {
        let Some(o) = self.open.as_ref() else { return };
        if !o.items.is_empty() {
            if o.fill < PAYLOAD_BYTES / 2 && self.pending_stash_pages > 0 {
                return;
            }
            self.stats.partial_pages += 1;
        }
        self.write_open();
    }

    /// Writes the open shared page (full, or flushed), if it holds any record.
    fn write_open(&mut self) {
        let Some(o) = self.open.take() else { return };
        if o.items.is_empty() {
            self.book.drop_empty_small_page(o.page);
            return;
        }
        let id = self.next_id();
        self.writes.insert(id, o.items);
        self.writing_pages.insert(o.page);
        self.pending_stash_pages += 1;
        self.send(io::Req::Write {
            id,
            first_page: o.page,
            buf: o.buf,
        });
    }

    /// Values whose write is queued or in flight.
    pub fn pending_stash_count(&self) -> usize {
        self.writes.values().map(Vec::len).sum::<usize>()
            + self.open.as_ref().map_or(0, |o| o.items.len())
    }
    /// Pages whose write is in flight.
    pub fn pending_stash_pages(&self) -> u64 {
        self.pending_stash_pages
    }
    pub fn pending_read_count(&self) -> usize {
        self.reads.len()
    }

    /// Starts (or joins) the read of `key`'s value at `stub`; the id its event carries.
    pub fn read(&mut self, db: usize, key: &[u8], stub: ColdStub) -> u64 {
        if let Some(&id) = self.read_of.get(&(stub.page, stub.offset)) {
            self.stats.reads_shared += 1;
            return id;
        }
        let id = self.next_id();
        self.stats.reads += 1;
        self.reads.insert(
            id,
            PendingRead {
                db,
                key: key.to_vec(),
                stub,
                started: Instant::now(),
            },
        );
        self.read_of.insert((stub.page, stub.offset), id);
        *self.pages_reading.entry(stub.page).or_default() += 1;
        if let Some(r) = self.ring.as_mut() {
            r.start(
                reads::ReadOp {
                    id,
                    first_page: stub.page,
                    pages: page::pages_of(stub) as usize,
                    kind: reads::ReadKind::Value {
                        stub,
                        key: key.to_vec(),
                    },
                },
                &self.shared,
            );
        } else {
            self.send(io::Req::Read {
                id,
                stub,
                key: key.to_vec(),
            });
        }
        id
    }

    /// Whether the compactor may read shared page `page` now: it is not the page being
    /// filled, its write is not in flight, and no compaction read of it is.
    pub fn page_settled(&self, page: u32) -> bool {
        self.open.as_ref().is_none_or(|o| o.page != page)
            && !self.writing_pages.contains(&page)
            && !self.page_reads.values().any(|&p| p == page)
    }

    /// The compactor's reads in flight.
    pub fn page_reads_in_flight(&self) -> usize {
        self.page_reads.len()
    }

    /// Whether a snapshot is copying the file (frees are held back meanwhile).
    pub fn capturing(&self) -> bool {
        self.captures > 0
    }

    /// Starts the compactor's read of shared page `page` (see [`Event::PageRead`]).
    /// While it is in flight the page's records are not freed for reuse (as under any
    /// read), so the bytes read are those of the records the stubs name.
    pub fn read_page(&mut self, page: u32) {
        let id = self.next_id();
        self.page_reads.insert(id, page);
        *self.pages_reading.entry(page).or_default() += 1;
        if let Some(r) = self.ring.as_mut() {
            r.start(
                reads::ReadOp {
                    id,
                    first_page: page,
                    pages: 1,
                    kind: reads::ReadKind::Page,
                },
                &self.shared,
            );
        } else {
            self.send(io::Req::ReadPage { id, page });
        }
    }

    fn reading_done(&mut self, page: u32) {
        if let Some(n) = self.pages_reading.get_mut(&page) {
            *n -= 1;
            if *n == 0 {
                self.pages_reading.remove(&page);
            }
        }
    }

    /// Gives a record's space back (later if a read of its pages is in flight, or a
    /// snapshot is copying the file).
    pub fn free(&mut self, stub: ColdStub) {
        if self.captures > 0 || self.pages_reading.contains_key(&stub.page) {
            self.deferred_frees.push(stub);
        } else if let Some((page, _)) = self.book.free_record(stub) {
            self.damaged.remove(&page);
        }
    }

    /// The compactor found shared page `page` damaged: it does not read it again until
    /// the page is given back.
    pub fn mark_damaged(&mut self, page: u32) -> bool {
        self.damaged.insert(page)
    }

    /// Whether the compactor found `page` damaged (see [`TierStore::mark_damaged`]).
    pub fn is_damaged(&self, page: u32) -> bool {
        self.damaged.contains(&page)
    }

    /// Shared pages the compactor found damaged and that still hold records (INFO).
    pub fn damaged_pages(&self) -> usize {
        self.damaged.len()
    }

    /// A snapshot starts: until [`TierStore::end_capture`], no page is reused, so every
    /// record live at its cut stays as it was until its copy (`companion::write`) is done.
    /// O(1).
    pub fn begin_capture(&mut self) {
        self.captures += 1;
    }

    /// The snapshot ended (done, failed or cancelled): the frees it held back go through.
    pub fn end_capture(&mut self) {
        self.captures = self.captures.saturating_sub(1);
        if self.captures == 0 {
            for stub in std::mem::take(&mut self.deferred_frees) {
                self.free(stub);
            }
        }
    }

    /// Frees held back (tests and INFO).
    pub fn deferred_free_count(&self) -> usize {
        self.deferred_frees.len()
    }

    /// What a snapshot needs to copy the file: its path and the high-water page, which
    /// the snapshot reads once its image is written (every record of its cut lies below).
    pub fn capture_source(&self) -> (std::path::PathBuf, Arc<std::sync::atomic::AtomicU32>) {
        (self.path.clone(), self.high_water.clone())
    }

    fn publish_high_water(&self) {
        self.high_water
            .store(self.book.high_water(), std::sync::atomic::Ordering::Release);
    }

    /// Installs the bookkeeping of a file restored from a snapshot (its records were
    /// copied in by the loader before anything was stashed).
    pub fn restore(&mut self, book: Bookkeeper) {
        self.book = book;
        self.publish_high_water();
    }

    /// Completions since the last call.
    pub fn poll(&mut self) -> Vec<Event> {
        let mut done =
            std::mem::take(&mut *self.shared.done.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(r) = self.ring.as_mut() {
            r.reap(&self.shared, &mut done);
        }
        let polled = Instant::now();
        let mut out = Vec::with_capacity(done.len());
        let mut read_ended = false;
        for d in done {
            match d {
                io::Done::Written { id, result } => {
                    let Some(items) = self.writes.remove(&id) else {
                        continue;
                    };
                    let pages = items
                        .first()
                        .map_or(1, |p| bookkeeper::pages_for(p.stub.record_bytes).max(1));
                    self.pending_stash_pages =
                        self.pending_stash_pages.saturating_sub(pages as u64);
                    if let Some(p) = items.first() {
                        if bookkeeper::is_small(p.stub.record_bytes) {
                            self.writing_pages.remove(&p.stub.page);
                        }
                    }
                    match &result {
                        Ok(()) => {
                            self.stats.written_pages += pages as u64;
                            self.stats.stashes += items.len() as u64;
                            self.stats.stash_bytes +=
                                items.iter().map(|p| p.stub.value_bytes as u64).sum::<u64>();
                        }
                        Err(e) => {
                            self.stats.stash_errors += 1;
                            crate::warning!(
                                "Tiering: writing {} value(s) to {} failed: {e}; they stay in memory",
                                items.len(),
                                self.path.display()
                            );
                        }
                    }
                    out.push(Event::Stashed { items, result });
                }
                io::Done::Read {
                    id,
                    result,
                    submitted,
                    completed,
                } => {
                    let Some(r) = self.reads.remove(&id) else {
                        continue;
                    };
                    self.read_of.remove(&(r.stub.page, r.stub.offset));
                    self.reading_done(r.stub.page);
                    read_ended = true;
                    if result.is_err() {
                        self.stats.read_errors += 1;
                    }
                    out.push(Event::Read {
                        id,
                        db: r.db,
                        key: r.key,
                        stub: r.stub,
                        result,
                        times: ReadTimes {
                            started: r.started,
                            submitted,
                            completed,
                            polled,
                        },
                    });
                }
                io::Done::PageRead { id, result } => {
                    let Some(page) = self.page_reads.remove(&id) else {
                        continue;
                    };
                    self.reading_done(page);
                    read_ended = true;
                    self.stats.page_reads += 1;
                    if result.is_err() {
                        self.stats.page_read_errors += 1;
                    }
                    out.push(Event::PageRead { page, result });
                }
            }
        }
        if read_ended && self.captures == 0 && !self.deferred_frees.is_empty() {
            for stub in std::mem::take(&mut self.deferred_frees) {
                self.free(stub);
            }
        }
        out
    }
}

impl Drop for TierStore {
    fn drop(&mut self) {
        self.tx = None;
        // Wakes the thread to see the close.
        self.shared
            .hold_reads
            .store(false, std::sync::atomic::Ordering::Release);
        self.wake_thread();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The keyspace's synchronous fallback: one `pread` of the record's pages.
struct SyncReader {
    file: std::fs::File,
}

impl ColdReader for SyncReader {
    fn read_now(&mut self, key: &[u8], stub: ColdStub) -> Result<Vec<u8>, String> {
        let len = page::pages_of(stub) as usize * PAGE_BYTES;
        let mut buf = AlignedBuf::zeroed(len);
        let off = stub.page as u64 * PAGE_BYTES as u64;
        // SAFETY: the buffer is valid for `len` bytes.
        let n = unsafe {
            libc::pread(
                self.file.as_raw_fd(),
                buf.as_mut_slice().as_mut_ptr() as *mut libc::c_void,
                len,
                off as libc::off_t,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        if (n as usize) < len {
            return Err(page::short_read(stub.page, n as i64, len as i64));
        }
        page::decode_value(buf.as_slice(), stub, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_events(t: &mut TierStore, n: usize) -> Vec<Event> {
        let mut got = Vec::new();
        let start = std::time::Instant::now();
        while got.len() < n && start.elapsed() < std::time::Duration::from_secs(10) {
            got.extend(t.poll());
            std::thread::yield_now();
        }
        got
    }

    /// A tier store of `bytes` in a fresh directory of its own (`tag` names it); the
    /// test removes the directory.
    fn scratch_store(tag: &str, bytes: u64) -> (std::path::PathBuf, TierStore) {
        let dir = std::env::temp_dir().join(format!("cairn-tier-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("t").display().to_string();
        let t = TierStore::open(&prefix, bytes).unwrap();
        (dir, t)
    }

    #[test]
    fn a_page_under_half_full_waits_while_another_write_is_in_flight() {
        let (dir, mut t) = scratch_store("flush", 1 << 20);
        t.hold_writes(true);
        t.stash(0, b"b", &vec![1u8; 10_000], 1).unwrap();
        t.stash(0, b"s", &[2u8; 100], 2).unwrap();
        t.flush();
        assert_eq!(t.stats.partial_pages, 0, "the big write is in flight");
        t.stash(0, b"m", &vec![3u8; PAYLOAD_BYTES / 2], 3).unwrap();
        t.flush();
        assert_eq!(t.stats.partial_pages, 1, "half full or more goes");
        t.hold_writes(false);
        assert_eq!(wait_events(&mut t, 2).len(), 2);
        t.stash(0, b"z", &[4u8; 100], 4).unwrap();
        t.flush();
        assert_eq!(t.stats.partial_pages, 2, "nothing else in flight");
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_cut_file_moves_the_generation_on_and_a_deleted_one_is_reported_once() {
        let (dir, mut t) = scratch_store("check", 1 << 20);
        assert!(!t.check_file());
        assert_eq!((t.generation(), t.file.truncations), (0, 0));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&t.path)
            .unwrap();
        f.set_len(8192).unwrap();
        assert!(t.check_file(), "a shorter file is a cut");
        assert_eq!(
            (t.generation(), t.file.truncations, t.file.last_len),
            (1, 1, 8192)
        );
        assert!(!t.check_file(), "the same length again is no new cut");
        // Writes past the end extend it; a later cut below that is a new one.
        f.set_len(1 << 20).unwrap();
        assert!(!t.check_file());
        f.set_len(0).unwrap();
        assert!(t.check_file());
        assert_eq!(t.generation(), 2);
        assert!(!t.file.deleted);
        std::fs::remove_file(&t.path).unwrap();
        assert!(!t.check_file());
        assert!(t.file.deleted);
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_past_the_rings_bound_wait_in_its_queue_and_come_back_exact() {
        let (dir, mut t) = scratch_store("ring", 8 << 20);
        assert_ne!(
            t.read_path(),
            "tier-thread",
            "the executor's ring is set up"
        );
        // Small records (shared pages), two-page records and records longer than a
        // slot of the ring's pool (own buffers).
        let values: Vec<Vec<u8>> = (0..150u32)
            .map(|i| {
                let len = match i % 3 {
                    0 => 300,
                    1 => 6000,
                    _ => 5 * PAGE_BYTES + 100 * i as usize,
                };
                (0..len as u32).map(|j| (j * 7 + i) as u8).collect()
            })
            .collect();
        for (i, v) in values.iter().enumerate() {
            t.stash(0, format!("k{i}").as_bytes(), v, i as u64).unwrap();
        }
        let mut stubs = HashMap::new();
        let start = std::time::Instant::now();
        while stubs.len() < values.len() && start.elapsed() < std::time::Duration::from_secs(10) {
            // The last shared page waits while other writes are in flight.
            t.flush();
            for e in t.poll() {
                let Event::Stashed { items, result } = e else {
                    panic!("a write")
                };
                result.unwrap();
                for p in items {
                    stubs.insert(p.key.clone(), p.stub);
                }
            }
            std::thread::yield_now();
        }
        assert_eq!(stubs.len(), values.len());
        let mut ids = HashMap::new();
        for i in 0..values.len() {
            let k = format!("k{i}").into_bytes();
            ids.insert(t.read(0, &k, stubs[&k]), i);
        }
        assert_eq!(
            t.ring_reads(),
            (reads::INFLIGHT_MAX, values.len() - reads::INFLIGHT_MAX),
            "the bound holds; the rest wait in order"
        );
        let mut back = 0;
        for e in wait_events(&mut t, values.len()) {
            let Event::Read { id, result, .. } = e else {
                panic!("a read")
            };
            assert!(result.unwrap() == values[ids[&id]], "k{} differs", ids[&id]);
            back += 1;
        }
        assert_eq!(back, values.len());
        assert_eq!(t.ring_reads(), (0, 0));
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Allocated bytes over live record bytes, for records of every size from the
    /// shortest a default `tiered-min-value-size` value makes (a 1-byte key, a 64-byte
    /// value) to three pages: each size on its own, placed by `stash`.
    #[test]
    fn space_amplification_is_at_most_two_for_every_record_size() {
        let (dir, mut t) = scratch_store("amp", 4 << 20);
        let mut worst = (0.0f64, 0usize);
        for rec in page::record_bytes(1, 64)..=3 * PAGE_BYTES {
            let value = vec![(rec % 251) as u8; rec - page::record_bytes(1, 0)];
            // Enough records to close at least two pages; the page still open (being
            // filled) is left out of the figure.
            let n = if bookkeeper::is_small(rec as u32) {
                2 * (PAYLOAD_BYTES / rec) + 2
            } else {
                2
            };
            let stubs: Vec<ColdStub> = (0..n)
                .map(|_| t.stash(0, b"k", &value, 0).unwrap())
                .collect();
            let (open_pages, open_bytes) = t.open.as_ref().map_or((0, 0), |o| (1, o.fill as u64));
            let amp = ((t.book.allocated_pages() - open_pages) * PAGE_BYTES as u64) as f64
                / (t.book.live_record_bytes() - open_bytes) as f64;
            if amp > worst.0 {
                worst = (amp, rec);
            }
            t.write_open();
            t.poll();
            for s in stubs {
                t.free(s);
            }
            assert_eq!(t.book.allocated_pages(), 0, "record of {rec} bytes");
        }
        assert!(
            worst.0 <= 2.0,
            "records of {} bytes: space amplification {}",
            worst.1,
            worst.0
        );
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn pair_page_and_whole_page_records_read_back_exactly() {
        let (dir, mut t) = scratch_store("whole", 1 << 20);
        // Two records of 2046 and 2047 bytes (one pair page), then 4089 to 4096 bytes.
        let values: Vec<Vec<u8>> = [2046, 2047]
            .into_iter()
            .chain(PAYLOAD_BYTES + 1..=PAGE_BYTES)
            .map(|rec| {
                let len = rec - page::record_bytes(2, 0);
                (0..len).map(|j| (j * 31 + rec) as u8).collect()
            })
            .collect();
        let stubs: Vec<ColdStub> = values
            .iter()
            .enumerate()
            .map(|(i, v)| t.stash(0, format!("k{i}").as_bytes(), v, 0).unwrap())
            .collect();
        // The pair: one page; 4089 to 4095 bytes: one page each; 4096 bytes: two,
        // exactly twice its bytes.
        assert_eq!(t.book.allocated_pages(), 1 + 7 + 2);
        assert_eq!((stubs[0].page, stubs[0].offset), (stubs[1].page, 0));
        assert_eq!(stubs[1].offset, 1, "the pair page's second slot");
        let writes = values.len() - 1; // the pair is one write
        assert_eq!(wait_events(&mut t, writes).len(), writes);
        let mut ids = HashMap::new();
        for (i, &s) in stubs.iter().enumerate() {
            ids.insert(t.read(0, format!("k{i}").as_bytes(), s), i);
        }
        let mut back = 0;
        for e in wait_events(&mut t, values.len()) {
            let Event::Read { id, result, .. } = e else {
                panic!("a read")
            };
            assert!(result.unwrap() == values[ids[&id]], "k{} differs", ids[&id]);
            back += 1;
        }
        assert_eq!(back, values.len());
        let mut r = t.sync_reader().unwrap();
        for (i, &s) in stubs.iter().enumerate() {
            assert!(r.read_now(format!("k{i}").as_bytes(), s).unwrap() == values[i]);
            assert!(r.read_now(b"kx", s).is_err(), "another key's record");
        }
        for s in stubs {
            t.free(s);
        }
        assert_eq!(t.book.allocated_pages(), 0);
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn values_written_read_back_exactly_and_shared_reads_are_one() {
        let (dir, mut t) = scratch_store("unit", 1 << 20);
        let small = vec![7u8; 100];
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        t.stash(0, b"s", &small, 1).unwrap();
        t.flush();
        t.stash(0, b"b", &big, 2).unwrap();
        let ev = wait_events(&mut t, 2);
        let mut stubs = HashMap::new();
        for e in ev {
            let Event::Stashed { items, result } = e else {
                panic!("a write")
            };
            result.unwrap();
            for p in items {
                stubs.insert(p.key.clone(), p.stub);
            }
        }
        let a = t.read(0, b"b", stubs[&b"b".to_vec()]);
        let b = t.read(0, b"b", stubs[&b"b".to_vec()]);
        assert_eq!(a, b, "one I/O for concurrent readers");
        let c = t.read(0, b"s", stubs[&b"s".to_vec()]);
        let mut ok = 0;
        for e in wait_events(&mut t, 2) {
            let Event::Read { id, result, .. } = e else {
                panic!("a read")
            };
            let v = result.unwrap();
            if id == a {
                assert_eq!(v, big);
            } else {
                assert_eq!(id, c);
                assert_eq!(v, small);
            }
            ok += 1;
        }
        assert_eq!(ok, 2);
        let mut r = t.sync_reader().unwrap();
        assert_eq!(r.read_now(b"s", stubs[&b"s".to_vec()]).unwrap(), small);
        t.free(stubs[&b"s".to_vec()]);
        t.free(stubs[&b"b".to_vec()]);
        assert_eq!(t.book.allocated_pages(), 0);
        drop(t);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
