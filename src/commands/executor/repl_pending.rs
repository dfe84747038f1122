//! The replication stream a replica has not been sent yet while its full sync runs (the
//! commands written after the capture's cut, which must follow the payload), and while
//! that backlog of commands drains once it is online.
//!
//! Why a file: at 20k SET/s of 500-byte values the stream grows ~10 MB per second of
//! sync, for the whole capture, transfer and load. Redis holds it in the replica's output
//! buffer (memory); here it stays in memory only up to [`PENDING_MEMORY_BYTES`] and then
//! goes to a temporary file in `dir`, so the primary's extra memory during a sync does not
//! grow with the sync's length. The writes are appends of what the log writes anyway
//! (the page cache absorbs them); the reads are bounded chunks, one per turn per replica.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Pending bytes kept in memory before the rest goes to a file.
pub const PENDING_MEMORY_BYTES: usize = 4 << 20;

/// A replica's unsent stream: `file[read_at..file_len]` (once spilled) and then `mem`.
#[derive(Debug)]
pub struct PendingStream {
    mem: Vec<u8>,
    spill: Option<Spill>,
    /// Where a spill file goes (`dir/temp-repl-pending-<pid>-<tag>.stream`).
    dir: PathBuf,
    tag: u64,
    /// The spill file could not be written (disk full, no permission): memory only.
    spill_failed: bool,
}

#[derive(Debug)]
struct Spill {
    file: File,
    path: PathBuf,
    read_at: u64,
    file_len: u64,
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl PendingStream {
    pub fn new(dir: PathBuf, tag: u64) -> PendingStream {
        PendingStream {
            mem: Vec::new(),
            spill: None,
            dir,
            tag,
            spill_failed: false,
        }
    }

    /// Bytes not sent yet (in memory and in the file).
    pub fn len(&self) -> u64 {
        self.mem.len() as u64 + self.spill.as_ref().map_or(0, |s| s.file_len - s.read_at)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held in memory (the rest is in the file).
    pub fn memory_bytes(&self) -> usize {
        self.mem.capacity()
    }

    /// Appends stream bytes, in order.
    pub fn append(&mut self, bytes: &[u8]) {
        // After a failed write the file is only read from: newer bytes go to memory,
        // which `take` reads after the file, so the order holds.
        if let Some(s) = self.spill.as_mut().filter(|_| !self.spill_failed) {
            match s.file.write_all(bytes) {
                Ok(()) => {
                    s.file_len += bytes.len() as u64;
                    return;
                }
                Err(e) => {
                    crate::warning!(
                        "Replication: cannot write the pending stream to {}: {e}; keeping it in memory",
                        s.path.display()
                    );
                    self.spill_failed = true;
                    self.mem.extend_from_slice(bytes);
                    return;
                }
            }
        }
        self.mem.extend_from_slice(bytes);
        if self.mem.len() > PENDING_MEMORY_BYTES && !self.spill_failed {
            self.spill_to_file();
        }
    }

    /// Moves what memory holds to a new spill file (memory then holds nothing).
    fn spill_to_file(&mut self) {
        let path = self.dir.join(format!(
            "temp-repl-pending-{}-{}.stream",
            std::process::id(),
            self.tag
        ));
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .truncate(false)
            .open(&path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => {
                crate::warning!(
                    "Replication: cannot create {}: {e}; the pending stream stays in memory",
                    path.display()
                );
                self.spill_failed = true;
                return;
            }
        };
        // A file left by an earlier replica with the same tag would be read first.
        if file.set_len(0).is_err() || file.write_all(&self.mem).is_err() {
            let _ = std::fs::remove_file(&path);
            self.spill_failed = true;
            return;
        }
        self.spill = Some(Spill {
            file,
            path,
            read_at: 0,
            file_len: self.mem.len() as u64,
        });
        self.mem = Vec::new();
    }

    /// Drops the first `n` bytes (the part of the stream before a capture's cut).
    pub fn skip(&mut self, n: u64) {
        let mut n = n.min(self.len());
        if let Some(s) = self.spill.as_mut() {
            let from_file = n.min(s.file_len - s.read_at);
            s.read_at += from_file;
            n -= from_file;
        }
        self.mem.drain(..n as usize);
    }

    /// Takes up to `max` bytes from the front, in order (file first). Err: the spill file
    /// could not be read back (the replica must resync).
    pub fn take(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        if let Some(s) = self.spill.as_mut() {
            let left = s.file_len - s.read_at;
            if left > 0 {
                let want = (left.min(max as u64)) as usize;
                let mut buf = vec![0u8; want];
                s.file.read_exact_at(&mut buf, s.read_at)?;
                s.read_at += want as u64;
                return Ok(buf);
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
        if self.spill.as_ref().is_some_and(|s| s.file_len > s.read_at) {
            return None;
        }
        Some(std::mem::take(&mut self.mem))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cairn-pending-{tag}-{}-{}",
            std::process::id(),
            crate::util::now_us()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn drain(p: &mut PendingStream, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while !p.is_empty() {
            let c = p.take(chunk).unwrap();
            assert!(!c.is_empty() && c.len() <= chunk);
            out.extend_from_slice(&c);
        }
        out
    }

    #[test]
    fn bytes_come_back_in_order_through_memory_and_file() {
        let d = dir("order");
        let mut p = PendingStream::new(d.clone(), 7);
        let mut want = Vec::new();
        let mut i = 0u32;
        while want.len() < 3 * PENDING_MEMORY_BYTES {
            let piece: Vec<u8> = (0..1000 + i % 5000).map(|j| (i ^ j) as u8).collect();
            p.append(&piece);
            want.extend_from_slice(&piece);
            i += 1;
        }
        assert_eq!(p.len(), want.len() as u64);
        assert!(
            p.memory_bytes() < PENDING_MEMORY_BYTES,
            "spilled to the file"
        );
        let files = std::fs::read_dir(&d).unwrap().count();
        assert_eq!(files, 1);
        p.skip(12345);
        assert_eq!(drain(&mut p, 1 << 20), want[12345..]);
        drop(p);
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            0,
            "the file is removed"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_small_stream_stays_in_memory_and_skips_across_the_boundary() {
        let d = dir("small");
        let mut p = PendingStream::new(d.clone(), 1);
        p.append(b"hello ");
        p.append(b"world");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        p.skip(3);
        assert_eq!(p.take_all_if_in_memory().unwrap(), b"lo world");
        assert!(p.is_empty());
        // Spilled: the skip crosses from the file into memory.
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
    fn an_unwritable_directory_keeps_the_stream_in_memory() {
        let mut p = PendingStream::new(PathBuf::from("/nonexistent/cairn/dir"), 3);
        let big = vec![9u8; PENDING_MEMORY_BYTES + 10];
        p.append(&big);
        p.append(b"more");
        assert_eq!(p.len(), big.len() as u64 + 4);
        assert_eq!(drain(&mut p, 1 << 20), [&big[..], b"more"].concat());
    }
}
