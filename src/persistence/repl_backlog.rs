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
    pub fn new(size_limit_bytes: usize, end_offset: u64) -> Backlog {
        Backlog {
            bytes: VecDeque::new(),
            size_limit_bytes: size_limit_bytes.max(1),
            end_offset,
        }
    }

    /// Appends stream bytes, dropping the oldest beyond the size limit.
    pub fn append(&mut self, data: &[u8]) {
        self.end_offset += data.len() as u64;
        let keep = data.len().min(self.size_limit_bytes);
        self.bytes.extend(&data[data.len() - keep..]);
        let over = self.bytes.len().saturating_sub(self.size_limit_bytes);
        self.bytes.drain(..over);
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

#[cfg(test)]
mod tests {
    use super::*;

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
