//! The replication stream a replica has not been sent yet while its full sync runs (the
//! commands written after the capture's cut, which must follow the payload), and while
//! that backlog of commands drains once it is online.
//!
//! Why a file: at 20k SET/s of 500-byte values the stream grows ~10 MB per second of
//! sync, for the whole capture, transfer and load. Redis holds it in the replica's output
//! buffer (memory); here it stays in memory only up to [`PENDING_MEMORY_BYTES`] and then
//! goes to a temporary file in `dir`, so the primary's extra memory during a sync does not
//! grow with the sync's length.
//!
//! Why a thread (`cairn-repl-spool`, one per spilled stream): the executor never touches
//! the file. A `write` to a file can wait on the disk — the kernel throttles writers once
//! too much of the page cache is dirty (`balance_dirty_pages`), ext4 waits for its journal
//! — and reading back a page the cache dropped is a disk read. The executor hands the
//! spool 1 MiB pieces ([`HAND_OVER_BYTES`]) and asks it for chunks to send, at most
//! [`READ_AHEAD_CHUNKS`] ahead; the answers wake the event loop. The file is unnamed
//! (`O_TMPFILE`, or unlinked as soon as it is made): it goes with its descriptor, also
//! after a crash.
//!
//! Memory: at most [`PENDING_MEMORY_BYTES`] before the spill; after it, under one
//! hand-over piece plus a turn's stream on the executor, at most [`SPOOL_QUEUE_MAX_BYTES`]
//! handed over and not written yet, and [`READ_AHEAD_CHUNKS`] chunks read back. Only a
//! disk slower than the stream fills the queue; then `append` waits for the spool (the
//! back-pressure the log's writer applies too, `QUEUE_MAX_BYTES`): memory stays bounded.
//! If the file cannot be made or written, the spool keeps the rest in its memory (as
//! before there was a file), bounded by `client-output-buffer-limit replica`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};

/// Pending bytes kept in memory before the rest goes to a file.
pub const PENDING_MEMORY_BYTES: usize = 4 << 20;
/// Once spilled, the executor hands its bytes to the spool in pieces of this size.
pub const HAND_OVER_BYTES: usize = 1 << 20;
/// Bytes handed to the spool and not yet written, at most (then `append` waits).
pub const SPOOL_QUEUE_MAX_BYTES: u64 = 16 << 20;
/// Size of a chunk read back from the file.
pub const READ_CHUNK_BYTES: usize = 1 << 20;
/// Chunks asked of the spool and not yet taken, at most.
pub const READ_AHEAD_CHUNKS: usize = 2;
/// Written pieces kept for reuse, at most.
const SPARE_PIECES: usize = 2;

type Wake = Option<Arc<dyn Fn() + Send + Sync>>;

/// A replica's unsent stream: the spool's bytes `[taken, handed)` and then `mem`.
pub struct PendingStream {
    mem: Vec<u8>,
    spool: Option<Spool>,
    /// The stream outgrew memory: every byte goes through the spool from then on.
    spilled: bool,
}

impl std::fmt::Debug for PendingStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingStream")
            .field("len", &self.len())
            .field("in_memory", &self.mem.len())
            .field("spilled", &self.spilled)
            .finish()
    }
}

enum Job {
    Write(Vec<u8>),
    /// Read `len` bytes from stream offset `from` (never past what was written).
    Read {
        from: u64,
        len: usize,
    },
}

/// What the executor and the spool share: bytes handed over and not written yet, and
/// whether either side left.
#[derive(Default)]
struct QueueState {
    bytes: u64,
    /// The stream was dropped: queued pieces need not be written.
    cancelled: bool,
    /// The spool thread ended: nothing more will be written or read.
    gone: bool,
}

#[derive(Default)]
struct Queue {
    st: Mutex<QueueState>,
    cv: Condvar,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Spool {
    jobs: Sender<Job>,
    chunks: Receiver<std::io::Result<Vec<u8>>>,
    /// Pieces the spool wrote, emptied, for the next hand-overs: the executor reuses
    /// them instead of allocating (a fresh 1 MiB buffer is an `mmap`, and its growth an
    /// `mremap`: both wait for the process's memory-map lock, which a running snapshot's
    /// page-table walks hold for long stretches).
    spares: Receiver<Vec<u8>>,
    queue: Arc<Queue>,
    /// Stream bytes handed over (the spool's stream is `[0, handed)`).
    handed: u64,
    /// The next byte `take` returns.
    taken: u64,
    /// Reads were asked up to this offset: `[taken - discard, asked)` is in `ready` (from
    /// `front_at` on) or on its way.
    asked: u64,
    /// Bytes at the front of what was read that a skip passed over.
    discard: u64,
    /// Chunks asked and not yet arrived.
    in_flight: usize,
    /// Chunks arrived, not yet taken (the first from `front_at` on).
    ready: VecDeque<Vec<u8>>,
    front_at: usize,
}

impl Drop for Spool {
    fn drop(&mut self) {
        // Dropping `jobs` ends the thread after the jobs queued; those writes are moot.
        self.queue.lock().cancelled = true;
    }
}

impl PendingStream {
    pub fn new(dir: PathBuf, tag: u64) -> PendingStream {
        PendingStream::with_wake(dir, tag, None)
    }

    /// `wake`: called by the spool when a chunk read back is ready (the event loop's
    /// waker, so the executor sends it without waiting for other work). The spool thread
    /// starts here, when a replica asks for a full sync (before the capture pins the
    /// executor to its CPU, so the thread is not pinned with it); its file is made when
    /// the stream first outgrows memory.
    pub fn with_wake(dir: PathBuf, tag: u64, wake: Wake) -> PendingStream {
        let spool = match Spool::start(&dir, tag, wake) {
            Ok(s) => Some(s),
            Err(e) => {
                crate::warning!(
                    "Replication: cannot start the pending stream's spool thread: {e}; keeping the stream in memory"
                );
                None
            }
        };
        PendingStream {
            // Allocated now, before a capture starts, and never grown: see `Spool::spares`.
            mem: Vec::with_capacity(PENDING_MEMORY_BYTES),
            spool,
            spilled: false,
        }
    }

    /// Bytes not sent yet (in memory and in the spool).
    pub fn len(&self) -> u64 {
        self.mem.len() as u64 + self.spool.as_ref().map_or(0, |s| s.handed - s.taken)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes this side holds in memory: its own buffer, the pieces handed over and not
    /// yet written, the chunks read back (the spool's memory when the file failed is not
    /// counted).
    pub fn memory_bytes(&self) -> usize {
        self.mem.capacity()
            + self.spool.as_ref().map_or(0, |s| {
                s.queue.lock().bytes as usize + s.ready.iter().map(|c| c.len()).sum::<usize>()
            })
    }

    /// The stream outgrew memory and went to the spool (its file, unless that failed).
    pub fn spilled(&self) -> bool {
        self.spilled
    }

    /// Appends stream bytes, in order.
    pub fn append(&mut self, bytes: &[u8]) {
        if self.spool.is_some() {
            let room = if self.spilled {
                self.mem.capacity()
            } else {
                PENDING_MEMORY_BYTES
            };
            if !self.mem.is_empty() && self.mem.len() + bytes.len() > room {
                self.spilled = true;
                self.hand_over(bytes.len());
            }
        }
        self.mem.extend_from_slice(bytes);
        if self.spilled && self.mem.len() >= HAND_OVER_BYTES {
            self.hand_over(0);
        }
    }

    /// Hands what memory holds to the spool; `next`: bytes about to be appended (the new
    /// buffer holds them without growing).
    fn hand_over(&mut self, next: usize) {
        let Some(s) = self.spool.as_mut() else {
            return;
        };
        let want = HAND_OVER_BYTES.max(next);
        let fresh = match s.spares.try_recv() {
            Ok(v) if v.capacity() >= want => v,
            _ => Vec::with_capacity(want),
        };
        let piece = std::mem::replace(&mut self.mem, fresh);
        let n = piece.len() as u64;
        {
            let mut q = s.queue.lock();
            // Back-pressure: only a disk slower than the stream gets here.
            while !q.gone && q.bytes > 0 && q.bytes + n > SPOOL_QUEUE_MAX_BYTES {
                q = s.queue.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.bytes += n;
        }
        if s.jobs.send(Job::Write(piece)).is_err() {
            // The spool ended (it only does when told to, or by a bug): reads report it.
            s.queue.lock().bytes -= n;
        }
        s.handed += n;
    }

    /// Drops the first `n` bytes (the part of the stream before a capture's cut).
    pub fn skip(&mut self, n: u64) {
        let mut n = n.min(self.len());
        if let Some(s) = self.spool.as_mut() {
            let from_spool = n.min(s.handed - s.taken);
            let before = s.taken;
            s.taken += from_spool;
            // What was asked for already is dropped as it comes; reads go on after it.
            s.discard += s.asked.min(s.taken).saturating_sub(before);
            s.asked = s.asked.max(s.taken);
            n -= from_spool;
        }
        self.mem.drain(..n as usize);
    }

    /// Takes up to `max` bytes from the front, in order (the spool's first). Empty while
    /// the spool's next chunk is not back yet (the wake says when it is). Err: the spool
    /// could not read its file back (the replica must resync).
    pub fn take(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        if let Some(s) = self.spool.as_mut() {
            if s.taken < s.handed {
                return s.take(max);
            }
        }
        let n = self.mem.len().min(max);
        let out: Vec<u8> = self.mem.drain(..n).collect();
        if self.mem.is_empty() && self.mem.capacity() > PENDING_MEMORY_BYTES {
            self.mem = Vec::new();
        }
        Ok(out)
    }

    /// Everything, in order, when it is small enough to go at once (`None`: take it in
    /// chunks).
    pub fn take_all_if_in_memory(&mut self) -> Option<Vec<u8>> {
        if self.spool.as_ref().is_some_and(|s| s.handed > s.taken) {
            return None;
        }
        Some(std::mem::take(&mut self.mem))
    }
}

impl Spool {
    fn start(dir: &Path, tag: u64, wake: Wake) -> std::io::Result<Spool> {
        let (jobs, job_rx) = std::sync::mpsc::channel::<Job>();
        let (chunk_tx, chunks) = std::sync::mpsc::channel();
        let (spare_tx, spares) = std::sync::mpsc::sync_channel(SPARE_PIECES);
        let queue = Arc::new(Queue::default());
        let q = queue.clone();
        let dir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("cairn-repl-spool".into())
            .spawn(move || spool_loop(&dir, tag, job_rx, chunk_tx, spare_tx, &q, wake))?;
        Ok(Spool {
            jobs,
            chunks,
            spares,
            queue,
            handed: 0,
            taken: 0,
            asked: 0,
            discard: 0,
            in_flight: 0,
            ready: VecDeque::new(),
            front_at: 0,
        })
    }

    fn take(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        let stopped = || std::io::Error::other("the pending stream's spool stopped");
        loop {
            match self.chunks.try_recv() {
                Ok(r) => {
                    self.in_flight -= 1;
                    self.ready.push_back(r?);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if self.in_flight > 0 => return Err(stopped()),
                Err(TryRecvError::Disconnected) => break,
            }
        }
        while self.discard > 0 {
            let Some(front) = self.ready.front() else {
                break;
            };
            let n = ((front.len() - self.front_at) as u64).min(self.discard) as usize;
            self.discard -= n as u64;
            self.advance_front(n);
        }
        // Ask for more, in order, never past what was handed over.
        while self.in_flight + self.ready.len() < READ_AHEAD_CHUNKS && self.asked < self.handed {
            let len = (self.handed - self.asked).min(READ_CHUNK_BYTES as u64) as usize;
            let from = self.asked;
            self.jobs
                .send(Job::Read { from, len })
                .map_err(|_| stopped())?;
            self.asked += len as u64;
            self.in_flight += 1;
        }
        if self.discard > 0 {
            return Ok(Vec::new());
        }
        let Some(front) = self.ready.front() else {
            return Ok(Vec::new());
        };
        let start = self.front_at;
        let n = (front.len() - start).min(max);
        let out = if start == 0 && n == front.len() {
            self.ready.pop_front().unwrap_or_default()
        } else {
            let out = front[start..start + n].to_vec();
            self.advance_front(n);
            out
        };
        self.taken += n as u64;
        Ok(out)
    }

    fn advance_front(&mut self, n: usize) {
        self.front_at += n;
        if self.ready.front().is_some_and(|f| self.front_at >= f.len()) {
            self.ready.pop_front();
            self.front_at = 0;
        }
    }
}

/// Where the spool keeps its bytes: `[0, file_len)` in the file, the rest (after the file
/// failed, or could not be made) in memory from `mem_at` on.
struct Store {
    file: Option<File>,
    file_len: u64,
    /// A write to the file failed: it is only read from now on.
    file_failed: bool,
    /// `mem[mem_head..]` is the stream from `mem_at` on.
    mem: Vec<u8>,
    mem_head: usize,
    mem_at: u64,
}

impl Store {
    fn write(&mut self, piece: &[u8], what: &str) {
        if let Some(f) = self.file.as_mut().filter(|_| !self.file_failed) {
            match f.write_all(piece) {
                Ok(()) => {
                    self.file_len += piece.len() as u64;
                    return;
                }
                Err(e) => {
                    // Bytes of a short write past `file_len` are never read: the file's
                    // part of the stream ends at `file_len`, memory holds what follows.
                    crate::warning!(
                        "Replication: cannot write the pending stream to {what}: {e}; keeping the rest in memory"
                    );
                    self.file_failed = true;
                    self.mem_at = self.file_len;
                    self.mem_head = 0;
                }
            }
        }
        self.mem.extend_from_slice(piece);
    }

    fn read(&mut self, from: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let mut at = 0usize;
        let mut pos = from;
        if pos < self.file_len {
            let n = ((self.file_len - pos) as usize).min(len);
            let f = self
                .file
                .as_ref()
                .ok_or_else(|| std::io::Error::other("the pending stream's file is gone"))?;
            f.read_exact_at(&mut out[..n], pos)?;
            at = n;
            pos += n as u64;
        }
        if at < len {
            // Reads come in order: memory before `pos` is never read again (dropped in
            // halves, so each byte moves at most once on average).
            let passed =
                (pos.saturating_sub(self.mem_at) as usize).min(self.mem.len() - self.mem_head);
            self.mem_head += passed;
            self.mem_at = pos;
            let n = len - at;
            if n > self.mem.len() - self.mem_head {
                return Err(std::io::Error::other(
                    "the pending stream's spool lost bytes",
                ));
            }
            out[at..].copy_from_slice(&self.mem[self.mem_head..self.mem_head + n]);
            self.mem_head += n;
            self.mem_at += n as u64;
            if self.mem_head >= HAND_OVER_BYTES && 2 * self.mem_head >= self.mem.len() {
                self.mem.drain(..self.mem_head);
                self.mem_head = 0;
            }
        }
        Ok(out)
    }
}

/// Marks the spool gone however its thread ends, so a waiting `append` never waits on it.
struct Gone<'a>(&'a Queue);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        self.0.lock().gone = true;
        self.0.cv.notify_all();
    }
}

fn spool_loop(
    dir: &Path,
    tag: u64,
    jobs: Receiver<Job>,
    chunks: Sender<std::io::Result<Vec<u8>>>,
    spares: SyncSender<Vec<u8>>,
    queue: &Queue,
    wake: Wake,
) {
    let _gone = Gone(queue);
    let what = format!("an unnamed file in {} (replica {tag})", dir.display());
    let mut store = Store {
        file: None,
        file_len: 0,
        file_failed: false,
        mem: Vec::new(),
        mem_head: 0,
        mem_at: 0,
    };
    let mut opened = false;
    for job in jobs.iter() {
        match job {
            Job::Write(piece) => {
                if !opened {
                    opened = true;
                    match open_unnamed(dir) {
                        Ok(f) => store.file = Some(f),
                        Err(e) => crate::warning!(
                            "Replication: cannot create {what}: {e}; the pending stream stays in memory"
                        ),
                    }
                }
                if !queue.lock().cancelled {
                    store.write(&piece, &what);
                }
                queue.lock().bytes -= piece.len() as u64;
                queue.cv.notify_all();
                // Back for reuse, unless enough are waiting (then it is freed here).
                let mut piece = piece;
                piece.clear();
                let _ = spares.try_send(piece);
            }
            Job::Read { from, len } => {
                if chunks.send(store.read(from, len)).is_err() {
                    return;
                }
                if let Some(w) = &wake {
                    w();
                }
            }
        }
    }
}

/// A file in `dir` with no name: `O_TMPFILE` where the filesystem has it, else a new
/// file unlinked at once.
fn open_unnamed(dir: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir);
    if let Ok(f) = tmp {
        return Ok(f);
    }
    let path = dir.join(format!(
        "temp-repl-pending-{}-{}.stream",
        std::process::id(),
        crate::util::now_us()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cairn-pending-{tag}-{}-{}",
            std::process::id(),
            crate::util::now_us()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Takes everything in chunks of at most `chunk`; an empty answer means the spool's
    /// next chunk is not back yet.
    fn drain(p: &mut PendingStream, chunk: usize) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut out = Vec::new();
        while !p.is_empty() {
            let c = p.take(chunk).unwrap();
            assert!(c.len() <= chunk);
            if c.is_empty() {
                assert!(Instant::now() < deadline, "the spool never answered");
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            out.extend_from_slice(&c);
        }
        out
    }

    fn pieces(total: usize) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let (mut n, mut i) = (0, 0u32);
        while n < total {
            let piece: Vec<u8> = (0..1000 + i % 5000).map(|j| (i ^ j) as u8).collect();
            n += piece.len();
            v.push(piece);
            i += 1;
        }
        v
    }

    #[test]
    fn bytes_come_back_in_order_through_memory_and_file() {
        let d = dir("order");
        let mut p = PendingStream::new(d.clone(), 7);
        let mut want = Vec::new();
        for piece in pieces(3 * PENDING_MEMORY_BYTES) {
            p.append(&piece);
            want.extend_from_slice(&piece);
        }
        assert_eq!(p.len(), want.len() as u64);
        assert!(p.spilled());
        assert!(p.take_all_if_in_memory().is_none());
        // The file has no name: nothing is left behind, whatever happens to the process.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        p.skip(12345);
        assert_eq!(drain(&mut p, 1 << 20), want[12345..]);
        // Appends after the spill go through the spool too, behind what was there.
        p.append(b"later");
        assert_eq!(drain(&mut p, 3), b"later");
        drop(p);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_small_stream_stays_in_memory_and_skips_across_the_boundary() {
        let d = dir("small");
        let mut p = PendingStream::new(d.clone(), 1);
        p.append(b"hello ");
        p.append(b"world");
        assert!(!p.spilled());
        p.skip(3);
        assert_eq!(p.take_all_if_in_memory().unwrap(), b"lo world");
        assert!(p.is_empty());
        // Spilled: the skip crosses from the spool into memory.
        let mut q = PendingStream::new(d.clone(), 2);
        q.append(&vec![1u8; PENDING_MEMORY_BYTES + 1]);
        q.append(b"tail");
        assert!(q.take_all_if_in_memory().is_none());
        q.skip(PENDING_MEMORY_BYTES as u64);
        assert_eq!(drain(&mut q, 3), [&[1u8][..], b"tail"].concat());
        q.append(b"x");
        q.skip(100);
        assert!(q.is_empty());
        drop((p, q));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_skip_after_reads_began_drops_what_was_read_ahead() {
        let d = dir("skip-late");
        let mut p = PendingStream::new(d.clone(), 4);
        let want: Vec<u8> = pieces(3 * PENDING_MEMORY_BYTES).concat();
        p.append(&want);
        let mut got = Vec::new();
        while got.is_empty() {
            got = p.take(1000).unwrap();
        }
        // Chunks are asked ahead now; skip past them and into the next ones.
        p.skip(READ_CHUNK_BYTES as u64 * 3 + 17);
        let at = got.len() + READ_CHUNK_BYTES * 3 + 17;
        assert_eq!(drain(&mut p, 1 << 20), want[at..]);
        drop(p);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The bound: whatever is appended, this side holds at most one hand-over piece, the
    /// spool's queue and the read-ahead (plus the last append).
    #[test]
    fn memory_stays_bounded_however_much_is_appended() {
        let d = dir("bound");
        let mut p = PendingStream::new(d.clone(), 5);
        let piece = vec![3u8; 64 << 10];
        // The executor's buffer may have twice the capacity it needs (it grows by doubling).
        let bound = 2 * (PENDING_MEMORY_BYTES + piece.len())
            + SPOOL_QUEUE_MAX_BYTES as usize
            + READ_AHEAD_CHUNKS * READ_CHUNK_BYTES;
        let mut peak = 0;
        for _ in 0..(96 << 20) / piece.len() {
            p.append(&piece);
            peak = peak.max(p.memory_bytes());
        }
        assert!(peak <= bound, "held {peak} bytes, bound {bound}");
        assert_eq!(p.len(), 96 << 20);
        let got = drain(&mut p, 1 << 20);
        assert!(got.len() == 96 << 20 && got.iter().all(|&b| b == 3));
        drop(p);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unwritable_directory_keeps_the_stream_in_memory() {
        let mut p = PendingStream::new(PathBuf::from("/nonexistent/cairn/dir"), 3);
        let big = vec![9u8; PENDING_MEMORY_BYTES + 10];
        p.append(&big);
        p.append(b"more");
        assert_eq!(p.len(), big.len() as u64 + 4);
        assert_eq!(drain(&mut p, 1 << 20), [&big[..], b"more"].concat());
    }
}
