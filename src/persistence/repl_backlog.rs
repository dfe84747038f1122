//! The replication backlog: the last `repl-backlog-size` bytes of the replication stream,
//! so a replica that lost its link can continue from its offset (`PSYNC` → `+CONTINUE`)
//! instead of loading the whole dataset again.
//!
//! Offsets are Redis's: the stream's first byte has offset 1, and the primary's
//! `master_repl_offset` is the offset of the last byte written (the stream's length). A
//! replica that has applied everything up to offset `N` asks for `N + 1`.

use std::collections::VecDeque;

pub struct Backlog {
    /// The held bytes, oldest first (a ring: appends push at the back, trimming pops the
    /// front, so neither moves the rest).
    bytes: VecDeque<u8>,
    size_limit_bytes: usize,
    /// Offset of the last byte appended (`master_repl_offset`).
    end_offset: u64,
}

impl Backlog {
    /// An empty backlog whose next byte will have offset `end_offset + 1`.
    ///
    /// The whole ring is allocated here (its pages are touched only as bytes arrive) and
    /// appends trim before they add, so it never grows: a primary creates its backlog at
    /// a replica's first PSYNC, right before that replica's capture starts, and growing
    /// it by doubling then (an `mmap`, then `mremap`s, in the first 100 ms at 10 MB/s)
    /// made the executor wait for the memory-map lock the capture's page-table walks hold
    /// (BENCHMARKS.md, "Where the executor waited during a full sync").
    pub fn new(size_limit_bytes: usize, end_offset: u64) -> Backlog {
        let size_limit_bytes = size_limit_bytes.max(1);
        Backlog {
            bytes: VecDeque::with_capacity(size_limit_bytes),
            size_limit_bytes,
            end_offset,
        }
    }

    /// Appends stream bytes, dropping the oldest beyond the size limit.
    pub fn append(&mut self, data: &[u8]) {
        self.end_offset += data.len() as u64;
        let keep = data.len().min(self.size_limit_bytes);
        let over = (self.bytes.len() + keep).saturating_sub(self.size_limit_bytes);
        self.bytes.drain(..over);
        self.bytes.extend(&data[data.len() - keep..]);
    }

    /// `repl-backlog-size` changed: keeps the newest bytes that fit.
    pub fn resize(&mut self, size_limit_bytes: usize) {
        self.size_limit_bytes = size_limit_bytes.max(1);
        let over = self.bytes.len().saturating_sub(self.size_limit_bytes);
        self.bytes.drain(..over);
        self.bytes.shrink_to(self.size_limit_bytes);
    }

    pub fn end_offset(&self) -> u64 {
        self.end_offset
    }

    /// Offset of the oldest byte held (`repl_backlog_first_byte_offset`); `end + 1` when
    /// empty.
    pub fn first_offset(&self) -> u64 {
        self.end_offset + 1 - self.bytes.len() as u64
    }

    /// Bytes held (`repl_backlog_histlen`).
    pub fn histlen(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn size_limit_bytes(&self) -> usize {
        self.size_limit_bytes
    }

    /// The stream from offset `from` (the next byte a replica wants) to the end, if the
    /// backlog still holds it all; `from == end + 1` is an empty continuation.
    pub fn copy_from(&self, from: u64) -> Option<Vec<u8>> {
        if from < self.first_offset() || from > self.end_offset + 1 {
            return None;
        }
        let skip = (from - self.first_offset()) as usize;
        Some(self.bytes.range(skip..).copied().collect())
    }
}

/// Rebuilds the backlog from the log at startup, as the entries are replayed: each
/// entry's command is the stream's bytes ending at the entry's `reploff` (the log holds
/// every byte of a primary's stream, `docs/formats/aof.md`). The backlog keeps the newest
/// stretch of entries that follow each other exactly: it starts over (empty, at the
/// entry's offset) wherever that chain breaks — another replication id, or offsets that
/// do not join (a replica's log, whose entries carry its primary's offsets).
pub struct Rebuild {
    replid: Vec<u8>,
    backlog: Backlog,
}

impl Rebuild {
    /// An empty stream ending at `end_offset` (the base's position) under `replid`.
    pub fn new(size_limit_bytes: usize, replid: &[u8], end_offset: u64) -> Rebuild {
        Rebuild {
            replid: replid.to_vec(),
            backlog: Backlog::new(size_limit_bytes, end_offset),
        }
    }

    /// One replayed entry: its replication id, the offset after it, its command bytes.
    pub fn entry(&mut self, replid: &[u8], reploff: u64, command: &[u8]) {
        let end = self.backlog.end_offset();
        let start = reploff.checked_sub(command.len() as u64);
        let chained = replid == self.replid.as_slice() && start == Some(end);
        if chained {
            self.backlog.append(command);
        } else {
            self.replid = replid.to_vec();
            self.backlog = Backlog::new(self.backlog.size_limit_bytes(), reploff);
        }
    }

    /// The replication id the kept stretch was written under, and the backlog.
    pub fn finish(self) -> (Vec<u8>, Backlog) {
        (self.replid, self.backlog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rebuilt backlog holds exactly the stream: commands at their offsets; it starts
    /// over where the chain breaks (another id, an offset going back, a gap).
    /// The ring allocated at creation is never outgrown, whatever the append sizes.
    #[test]
    fn the_ring_allocated_at_creation_is_never_outgrown() {
        let mut b = Backlog::new(1000, 0);
        let cap = b.bytes.capacity();
        assert!(cap >= 1000);
        let mut all = Vec::new();
        for i in 0..300u32 {
            let piece: Vec<u8> = (0..(i * 7) % 1500).map(|j| (i + j) as u8).collect();
            b.append(&piece);
            all.extend_from_slice(&piece);
            assert_eq!(b.bytes.capacity(), cap);
            assert!(b.histlen() <= 1000);
        }
        let held: Vec<u8> = b.bytes.iter().copied().collect();
        assert_eq!(held, all[all.len() - 1000..]);
    }

    #[test]
    fn a_rebuilt_backlog_is_the_stream_or_starts_over() {
        let mut r = Rebuild::new(1024, b"A", 100);
        r.entry(b"A", 105, b"hello");
        r.entry(b"A", 108, b"abc");
        let (id, b) = r.finish();
        assert_eq!(id, b"A");
        assert_eq!(b.end_offset(), 108);
        assert_eq!(b.copy_from(101).unwrap(), b"helloabc");
        assert_eq!(b.copy_from(106).unwrap(), b"abc");
        // Another id: only what follows it is kept.
        let mut r = Rebuild::new(1024, b"A", 0);
        r.entry(b"A", 3, b"abc");
        r.entry(b"B", 6, b"def");
        r.entry(b"B", 9, b"ghi");
        let (id, b) = r.finish();
        assert_eq!((id.as_slice(), b.first_offset()), (&b"B"[..], 7));
        assert_eq!(b.copy_from(7).unwrap(), b"ghi");
        // Bytes the log does not hold: start over after them.
        let mut r = Rebuild::new(1024, b"A", 0);
        r.entry(b"A", 3, b"abc");
        r.entry(b"A", 11, b"def");
        let (_, b) = r.finish();
        assert_eq!((b.first_offset(), b.histlen()), (12, 0));
        // Offsets that go back (a replica's SELECT logged before its command).
        let mut r = Rebuild::new(1024, b"A", 10);
        r.entry(b"A", 12, b"abc");
        r.entry(b"A", 15, b"def");
        let (_, b) = r.finish();
        assert_eq!(b.copy_from(13).unwrap(), b"def");
        assert_eq!(b.copy_from(12), None);
    }

    /// Offsets follow Redis's (first byte 1); a continuation is served exactly from the
    /// wanted byte while it is held, and refused once it was trimmed or is in the future.
    #[test]
    fn continuations_start_at_the_wanted_byte_while_it_is_held() {
        let mut b = Backlog::new(8, 100);
        assert_eq!(b.first_offset(), 101);
        assert_eq!(b.copy_from(101), Some(vec![]));
        assert_eq!(b.copy_from(102), None);
        b.append(b"abcdef");
        assert_eq!(b.end_offset(), 106);
        assert_eq!(b.copy_from(101).unwrap(), b"abcdef");
        assert_eq!(b.copy_from(104).unwrap(), b"def");
        assert_eq!(b.copy_from(107).unwrap(), b"");
        b.append(b"ghij");
        assert_eq!((b.first_offset(), b.histlen()), (103, 8));
        assert_eq!(b.copy_from(102), None, "trimmed");
        assert_eq!(b.copy_from(103).unwrap(), b"cdefghij");
        // An append bigger than the whole backlog keeps its tail.
        b.append(b"0123456789");
        assert_eq!(b.copy_from(113).unwrap(), b"23456789");
        assert_eq!(b.end_offset(), 120);
        b.resize(3);
        assert_eq!(b.copy_from(118).unwrap(), b"789");
        assert_eq!(b.copy_from(117), None);
    }
}
