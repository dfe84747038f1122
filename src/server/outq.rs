//! A connection's output as a sequence of segments: its owned reply bytes (`out`) with
//! references to stored values spliced in at recorded positions ([`RefSeg`]). The writer
//! sends them with one `writev` per turn, straight from the arena for the references.
//!
//! Lifetime: each queued reference pins its value block in the keyspace
//! ([`Keyspace::pin_value`](crate::keyspace::Keyspace::pin_value)); a pinned block is
//! never written or freed, so its bytes can be read here (on the executor or an I/O
//! thread) while the executor keeps running. A reference leaves the queue when fully
//! written or when the connection goes; its block is then unpinned **on the executor**
//! (I/O threads send the blocks back, they never touch the arena's allocator).

use super::RefSeg;
use crate::arena::Ref;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};

/// At most this many iovecs per write (well under IOV_MAX).
const MAX_IOV: usize = 64;

#[derive(Default)]
pub struct OutRefs {
    q: VecDeque<RefSeg>,
    /// Bytes of the front reference already written.
    sent: usize,
    /// Unsent bytes in all queued references.
    bytes: u64,
}

impl OutRefs {
    pub fn push(&mut self, r: RefSeg) {
        self.bytes += r.len as u64;
        self.q.push_back(r);
    }

    pub fn extend(&mut self, refs: impl IntoIterator<Item = RefSeg>) {
        for r in refs {
            self.push(r);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Unsent referenced bytes (they count against `client-output-buffer-limit`).
    pub fn pending_bytes(&self) -> u64 {
        self.bytes
    }

    /// Shifts positions after the owned buffer dropped its first `n` (sent) bytes.
    pub fn rebase(&mut self, n: usize) {
        for r in self.q.iter_mut() {
            r.pos -= n;
        }
    }

    /// Removes the references at or after `mark` (their reply bytes were discarded).
    pub fn truncate(&mut self, mark: usize) -> Vec<RefSeg> {
        let mut gone = Vec::new();
        while self.q.back().is_some_and(|r| r.pos >= mark) {
            let r = self.q.pop_back().expect("checked");
            self.bytes -= r.len as u64;
            if self.q.is_empty() {
                self.bytes = 0;
                self.sent = 0;
            }
            gone.push(r);
        }
        gone
    }

    /// Takes every reference (the connection is gone).
    pub fn take_all(&mut self) -> Vec<Ref> {
        self.sent = 0;
        self.bytes = 0;
        self.q.drain(..).map(|r| r.block).collect()
    }

    /// One `writev` of `out[*pos..end]` with the references spliced in (those positioned
    /// before `end`), offering at most `max_bytes`. Advances `*pos`; fully written
    /// references' blocks go to `done`. Returns (bytes written, bytes offered).
    pub fn write_to<W: Write>(
        &mut self,
        w: &mut W,
        out: &[u8],
        pos: &mut usize,
        end: usize,
        max_bytes: usize,
        done: &mut Vec<Ref>,
    ) -> io::Result<(usize, usize)> {
        let mut iov: Vec<IoSlice> = Vec::with_capacity(8);
        let mut offered = 0usize;
        // Adds a slice, cut to what is left of `max`; false once the cap is reached.
        fn add<'a>(
            iov: &mut Vec<IoSlice<'a>>,
            s: &'a [u8],
            offered: &mut usize,
            max: usize,
        ) -> bool {
            let take = s.len().min(max - *offered);
            if take > 0 {
                iov.push(IoSlice::new(&s[..take]));
                *offered += take;
            }
            *offered < max
        }
        let mut p = *pos;
        let mut room = true;
        for (i, r) in self.q.iter().enumerate() {
            if r.pos >= end {
                break;
            }
            if iov.len() + 2 > MAX_IOV {
                room = false;
                break;
            }
            if p < r.pos {
                room = add(&mut iov, &out[p..r.pos], &mut offered, max_bytes);
                p = r.pos;
                if !room {
                    break;
                }
            }
            let skip = if i == 0 { self.sent } else { 0 };
            // SAFETY: the block is pinned while queued here (module docs): `addr` points
            // at `len` bytes that are neither written nor freed until it is unpinned.
            let bytes = unsafe { std::slice::from_raw_parts(r.addr as *const u8, r.len) };
            room = add(&mut iov, &bytes[skip..], &mut offered, max_bytes);
            if !room {
                break;
            }
        }
        if room && p < end {
            add(&mut iov, &out[p..end], &mut offered, max_bytes);
        }
        if offered == 0 {
            return Ok((0, 0));
        }
        let n = w.write_vectored(&iov)?;
        drop(iov);
        let mut left = n;
        while left > 0 {
            match self.q.front() {
                Some(r) if r.pos == *pos => {
                    let rem = r.len - self.sent;
                    if left >= rem {
                        left -= rem;
                        self.bytes -= rem as u64;
                        self.sent = 0;
                        done.push(r.block);
                        self.q.pop_front();
                    } else {
                        self.sent += left;
                        self.bytes -= left as u64;
                        left = 0;
                    }
                }
                front => {
                    let stop = front.map_or(end, |r| r.pos.min(end));
                    let take = left.min(stop - *pos);
                    *pos += take;
                    left -= take;
                }
            }
        }
        Ok((n, offered))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts at most `cap` bytes per call.
    struct Trickle {
        got: Vec<u8>,
        cap: usize,
    }
    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = b.len().min(self.cap);
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn splices_references_in_order_across_partial_writes() {
        let v1 = vec![b'a'; 1000];
        let v2 = vec![b'b'; 777];
        let mut out = b"$1000\r\n".to_vec();
        let mut q = OutRefs::default();
        q.push(RefSeg {
            pos: out.len(),
            block: 1,
            len: v1.len(),
            addr: v1.as_ptr() as usize,
        });
        out.extend_from_slice(b"\r\n+OK\r\n$777\r\n");
        q.push(RefSeg {
            pos: out.len(),
            block: 2,
            len: v2.len(),
            addr: v2.as_ptr() as usize,
        });
        out.extend_from_slice(b"\r\n");
        let mut expect = b"$1000\r\n".to_vec();
        expect.extend_from_slice(&v1);
        expect.extend_from_slice(b"\r\n+OK\r\n$777\r\n");
        expect.extend_from_slice(&v2);
        expect.extend_from_slice(b"\r\n");
        assert_eq!(q.pending_bytes(), 1777);
        for cap in [1, 3, 7, 100, 5000] {
            let mut q2 = OutRefs::default();
            q2.extend(q.q.iter().copied());
            let mut w = Trickle {
                got: Vec::new(),
                cap,
            };
            let (mut pos, mut done) = (0, Vec::new());
            while pos < out.len() || !q2.is_empty() {
                q2.write_to(
                    &mut w,
                    &out,
                    &mut pos,
                    out.len(),
                    cap.max(5) / 2 + 1,
                    &mut done,
                )
                .unwrap();
            }
            assert_eq!(w.got, expect, "cap {cap}");
            assert_eq!(done, vec![1, 2]);
            assert_eq!(q2.pending_bytes(), 0);
        }
        // A truncated reply drops its references.
        let gone = q.truncate(20);
        assert_eq!(gone.len(), 1);
        assert_eq!(q.pending_bytes(), 1000);
    }
}
