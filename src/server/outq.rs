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

use crate::arena::Ref;
use crate::commands::executor::RefSeg;
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
        self.bytes += r.len() as u64;
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

    /// Queued references (CLIENT LIST `oll`).
    pub fn len(&self) -> usize {
        self.q.len()
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
            self.bytes -= r.len() as u64;
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
        // No reference before `end` (every small reply): one plain `write`. It saves the
        // iovec vector's allocation here and the iovec import in the kernel, per reply at
        // pipeline depth 1.
        if self.q.front().is_none_or(|r| r.pos >= end) {
            let stop = end.min(pos.saturating_add(max_bytes));
            if stop <= *pos {
                return Ok((0, 0));
            }
            let offered = stop - *pos;
            let n = w.write(&out[*pos..stop])?;
            *pos += n;
            return Ok((n, offered));
        }
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
            let bytes = r.bytes();
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
                    let rem = r.len() - self.sent;
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

/// A sent prefix of an owned output buffer is dropped once it is at least this long.
pub const COMPACT_MIN_BYTES: usize = 1 << 20;

/// Drops the sent prefix `out[..*pos]` when it is at least [`COMPACT_MIN_BYTES`] and at
/// least as long as what is left, shifting the references; returns the bytes dropped
/// (the caller shifts its own offsets into `out` by as much).
///
/// Why: a buffer is otherwise emptied only when everything in it was sent, and a
/// connection topped up while its socket is behind (a replica during a full sync, fed
/// whenever less than a window is unsent) never gets there, so the buffer kept every byte
/// ever sent through it. Compacting when the prefix outweighs the rest moves each byte at
/// most once on average, and the buffer stays within about twice what is unsent plus one
/// write budget.
pub fn compact_sent(out: &mut Vec<u8>, pos: &mut usize, refs: &mut OutRefs) -> usize {
    let n = *pos;
    if n < COMPACT_MIN_BYTES || n < out.len() - n {
        return 0;
    }
    out.drain(..n);
    refs.rebase(n);
    *pos = 0;
    n
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
    fn bytes_without_references_respect_the_cap_and_partial_writes() {
        let out: Vec<u8> = (0..100u8).collect();
        let mut q = OutRefs::default();
        let mut w = Trickle {
            got: Vec::new(),
            cap: 30,
        };
        let (mut pos, mut done) = (0usize, Vec::new());
        assert_eq!(
            q.write_to(&mut w, &out, &mut pos, 90, 50, &mut done)
                .unwrap(),
            (30, 50)
        );
        assert_eq!(pos, 30);
        assert_eq!(
            q.write_to(&mut w, &out, &mut pos, 90, 20, &mut done)
                .unwrap(),
            (20, 20)
        );
        assert_eq!(
            q.write_to(&mut w, &out, &mut pos, 90, 0, &mut done)
                .unwrap(),
            (0, 0)
        );
        while pos < 90 {
            q.write_to(&mut w, &out, &mut pos, 90, usize::MAX, &mut done)
                .unwrap();
        }
        assert_eq!(pos, 90);
        assert_eq!(w.got, out[..90]);
        assert!(done.is_empty());
    }

    #[test]
    fn splices_references_in_order_across_partial_writes() {
        let v1 = vec![b'a'; 1000];
        let v2 = vec![b'b'; 777];
        let mut out = b"$1000\r\n".to_vec();
        let mut q = OutRefs::default();
        q.push(
            // SAFETY: the vector outlives the queue and is not written meanwhile.
            unsafe { RefSeg::pinned(out.len(), 1, v1.len(), v1.as_ptr() as usize) },
        );
        out.extend_from_slice(b"\r\n+OK\r\n$777\r\n");
        q.push(
            // SAFETY: the vector outlives the queue and is not written meanwhile.
            unsafe { RefSeg::pinned(out.len(), 2, v2.len(), v2.as_ptr() as usize) },
        );
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

    /// Owned reply bytes with values spliced in, built like the executor does.
    struct Reply {
        out: Vec<u8>,
        refs: Vec<RefSeg>,
        /// What the peer must receive.
        want: Vec<u8>,
        /// The values (kept alive: the refs point at them).
        _vals: Vec<Vec<u8>>,
    }

    impl Reply {
        /// `parts`: Ok(owned bytes) or Err(value bytes, referenced).
        fn build(parts: &[Result<&[u8], Vec<u8>>]) -> Reply {
            let mut r = Reply {
                out: Vec::new(),
                refs: Vec::new(),
                want: Vec::new(),
                _vals: Vec::new(),
            };
            for (i, p) in parts.iter().enumerate() {
                match p {
                    Ok(b) => r.out.extend_from_slice(b),
                    Err(v) => {
                        r._vals.push(v.clone());
                        // Moving the outer vector later moves no value bytes.
                        let kept = r._vals.last().unwrap();
                        r.refs.push(
                            // SAFETY: the vector outlives the queue and is not written meanwhile.
                            unsafe {
                                RefSeg::pinned(
                                    r.out.len(),
                                    i as Ref,
                                    kept.len(),
                                    kept.as_ptr() as usize,
                                )
                            },
                        );
                    }
                }
                match p {
                    Ok(b) => r.want.extend_from_slice(b),
                    Err(v) => r.want.extend_from_slice(v),
                }
            }
            r
        }
        fn queue(&self) -> OutRefs {
            let mut q = OutRefs::default();
            q.extend(self.refs.iter().copied());
            q
        }
    }

    /// A writer that takes at most `cap` bytes per call and counts its calls.
    struct Capped {
        got: Vec<u8>,
        cap: usize,
        calls: usize,
        max_iov: usize,
    }
    impl Write for Capped {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            self.max_iov = self.max_iov.max(bufs.len());
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.cap - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.cap {
                    break;
                }
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn capped(cap: usize) -> Capped {
        Capped {
            got: Vec::new(),
            cap,
            calls: 0,
            max_iov: 0,
        }
    }

    /// Writes everything in turns of at most `max` bytes; checks the invariants after
    /// each turn. Returns the finished blocks in order.
    fn drain_all(q: &mut OutRefs, r: &Reply, w: &mut Capped, max: usize) -> Vec<Ref> {
        let (mut pos, mut done) = (0, Vec::new());
        let total = r.want.len();
        let mut turns = 0;
        while pos < r.out.len() || !q.is_empty() {
            let before = w.got.len();
            let (n, offered) = q
                .write_to(w, &r.out, &mut pos, r.out.len(), max, &mut done)
                .unwrap();
            assert!(offered <= max, "offered {offered} over the cap {max}");
            assert!(n <= offered);
            assert_eq!(w.got.len() - before, n);
            // What is left to send: the unsent owned bytes plus the unsent references.
            let sent_refs: usize =
                r.refs.iter().map(|x| x.len()).sum::<usize>() - q.pending_bytes() as usize;
            assert_eq!(w.got.len(), pos + sent_refs, "pos and pending_bytes agree");
            turns += 1;
            assert!(turns <= total + 2, "no progress");
        }
        done
    }

    #[test]
    fn references_at_the_start_and_back_to_back_keep_their_order_across_any_split() {
        let r = Reply::build(&[
            Err(b"first".to_vec()),
            Err(b"second".to_vec()),
            Ok(b"-mid-"),
            Err(b"third".to_vec()),
            Err(b"fourth".to_vec()),
            // (A reference is always followed by owned bytes: a bulk's CRLF.)
            Ok(b"\r\n"),
        ]);
        for cap in 1..=r.want.len() + 1 {
            for max in [1, 2, 4, 9, 1000] {
                let mut q = r.queue();
                assert_eq!(q.pending_bytes(), 22);
                let mut w = capped(cap);
                let done = drain_all(&mut q, &r, &mut w, max);
                assert_eq!(w.got, r.want, "cap {cap} max {max}");
                assert_eq!(done, vec![0, 1, 3, 4]);
                assert_eq!(q.pending_bytes(), 0);
            }
        }
    }

    #[test]
    fn partial_write_inside_a_reference_counts_down_pending_bytes() {
        let r = Reply::build(&[Ok(b"$10\r\n"), Err(b"0123456789".to_vec()), Ok(b"\r\n")]);
        let mut q = r.queue();
        let mut w = capped(8);
        let (mut pos, mut done) = (0, Vec::new());
        let (n, _) = q
            .write_to(&mut w, &r.out, &mut pos, r.out.len(), usize::MAX, &mut done)
            .unwrap();
        // 5 owned bytes, then 3 of the value.
        assert_eq!(n, 8);
        assert_eq!(pos, 5);
        assert_eq!(q.pending_bytes(), 7);
        assert!(done.is_empty());
        w.cap = usize::MAX;
        q.write_to(&mut w, &r.out, &mut pos, r.out.len(), usize::MAX, &mut done)
            .unwrap();
        // The rest of the value and the CRLF.
        assert_eq!(q.pending_bytes(), 0);
        assert_eq!(done, vec![1]);
        assert!(q.is_empty());
        assert_eq!(pos, r.out.len());
        assert_eq!(w.got, r.want);
    }

    #[test]
    fn end_limits_the_write_to_the_finished_replies() {
        // Three replies; only the first two are finished (`end`).
        let r = Reply::build(&[
            Ok(b"+A\r\n$2\r\n"),
            Err(b"vv".to_vec()),
            Ok(b"\r\n$2\r\n"),
            Err(b"ww".to_vec()),
            Ok(b"\r\n"),
        ]);
        let end = r.refs[1].pos - 4; // the third reply starts there
        let mut q = r.queue();
        let mut w = capped(usize::MAX);
        let (mut pos, mut done) = (0, Vec::new());
        let (n, _) = q
            .write_to(&mut w, &r.out, &mut pos, end, usize::MAX, &mut done)
            .unwrap();
        assert_eq!(n, 8 + 2 + 2);
        assert_eq!(pos, end);
        assert_eq!(done, vec![1]);
        assert_eq!(q.pending_bytes(), 2);
        // Nothing more before `end`: nothing offered.
        assert_eq!(
            q.write_to(&mut w, &r.out, &mut pos, end, usize::MAX, &mut done)
                .unwrap(),
            (0, 0)
        );
        q.write_to(&mut w, &r.out, &mut pos, r.out.len(), usize::MAX, &mut done)
            .unwrap();
        assert_eq!(w.got, r.want);
        assert_eq!(done, vec![1, 3]);
    }

    #[test]
    fn many_references_are_sent_in_several_writevs_of_bounded_iovecs() {
        let mut parts: Vec<Result<&[u8], Vec<u8>>> = Vec::new();
        for i in 0..200u32 {
            parts.push(Ok(b"|"));
            parts.push(Err(format!("v{i}").into_bytes()));
        }
        parts.push(Ok(b"|"));
        let r = Reply::build(&parts);
        let mut q = r.queue();
        let mut w = capped(usize::MAX);
        let done = drain_all(&mut q, &r, &mut w, usize::MAX);
        assert_eq!(w.got, r.want);
        assert_eq!(done.len(), 200);
        assert!(w.max_iov <= MAX_IOV, "{} iovecs in one call", w.max_iov);
        assert!(w.calls >= 400 / MAX_IOV, "only {} calls", w.calls);
    }

    #[test]
    fn rebase_after_the_owned_buffer_drops_its_sent_prefix() {
        let r = Reply::build(&[Ok(b"+OK\r\n$3\r\n"), Err(b"abc".to_vec()), Ok(b"\r\n")]);
        let mut q = r.queue();
        let mut w = capped(3);
        let (mut pos, mut done) = (0, Vec::new());
        q.write_to(&mut w, &r.out, &mut pos, r.out.len(), usize::MAX, &mut done)
            .unwrap();
        assert_eq!(pos, 3);
        // The connection drops the 3 sent bytes from its buffer.
        let out = r.out[3..].to_vec();
        q.rebase(3);
        pos = 0;
        while pos < out.len() || !q.is_empty() {
            q.write_to(&mut w, &out, &mut pos, out.len(), usize::MAX, &mut done)
                .unwrap();
        }
        assert_eq!(w.got, r.want);
        assert_eq!(done, vec![1]);
    }

    #[test]
    fn compacting_the_sent_prefix_keeps_what_is_sent_next() {
        let big = vec![7u8; COMPACT_MIN_BYTES + 10];
        let r = Reply::build(&[Ok(&big[..]), Err(b"abc".to_vec()), Ok(b"\r\ntail")]);
        let mut q = r.queue();
        let mut out = r.out.clone();
        let mut w = capped(COMPACT_MIN_BYTES / 2);
        let (mut pos, mut done) = (0, Vec::new());
        // Less than the minimum sent: nothing moves.
        q.write_to(&mut w, &out, &mut pos, out.len(), usize::MAX, &mut done)
            .unwrap();
        assert_eq!(compact_sent(&mut out, &mut pos, &mut q), 0);
        assert_eq!(pos, COMPACT_MIN_BYTES / 2);
        while pos < COMPACT_MIN_BYTES {
            q.write_to(&mut w, &out, &mut pos, out.len(), usize::MAX, &mut done)
                .unwrap();
        }
        let sent = pos;
        assert_eq!(compact_sent(&mut out, &mut pos, &mut q), sent);
        assert_eq!((pos, out.len()), (0, r.out.len() - sent));
        while pos < out.len() || !q.is_empty() {
            q.write_to(&mut w, &out, &mut pos, out.len(), usize::MAX, &mut done)
                .unwrap();
        }
        assert_eq!(w.got, r.want);
        assert_eq!(done, vec![1]);
        // A prefix shorter than what is left stays.
        let mut out = vec![1u8; 4 * COMPACT_MIN_BYTES];
        let mut pos = COMPACT_MIN_BYTES + 1;
        let mut q = OutRefs::default();
        assert_eq!(compact_sent(&mut out, &mut pos, &mut q), 0);
    }

    #[test]
    fn truncate_drops_only_the_references_of_discarded_bytes() {
        let r = Reply::build(&[
            Ok(b"$1\r\n"),
            Err(b"a".to_vec()),
            Ok(b"\r\n$2\r\n"),
            Err(b"bb".to_vec()),
            Ok(b"\r\n$3\r\n"),
            Err(b"ccc".to_vec()),
        ]);
        let mut q = r.queue();
        assert_eq!(q.pending_bytes(), 6);
        // A mark exactly at a reference's position drops it.
        let gone = q.truncate(r.refs[1].pos);
        assert_eq!(
            gone.iter().map(|g| g.block).collect::<Vec<_>>(),
            vec![5, 3],
            "newest first"
        );
        assert_eq!(q.pending_bytes(), 1);
        assert!(q.truncate(r.refs[0].pos + 1).is_empty());
        assert_eq!(q.pending_bytes(), 1);
        assert_eq!(q.take_all(), vec![1]);
        assert_eq!(q.pending_bytes(), 0);
        assert!(q.is_empty());
    }

    #[test]
    fn take_all_after_a_partial_reference_resets_the_queue() {
        let r = Reply::build(&[
            Err(b"0123456789".to_vec()),
            Ok(b"\r\n"),
            Err(b"xyz".to_vec()),
            Ok(b"\r\n"),
        ]);
        let mut q = r.queue();
        let mut w = capped(4);
        let (mut pos, mut done) = (0, Vec::new());
        // A reference at the end of the finished bytes is not sent yet.
        assert_eq!(
            q.write_to(&mut w, &r.out, &mut pos, 0, usize::MAX, &mut done)
                .unwrap(),
            (0, 0)
        );
        q.write_to(&mut w, &r.out, &mut pos, r.out.len(), usize::MAX, &mut done)
            .unwrap();
        assert_eq!(q.pending_bytes(), 9);
        assert_eq!(q.take_all(), vec![0, 2]);
        assert_eq!(q.pending_bytes(), 0);
        // A new reference on the reset queue is sent whole, from its first byte.
        let r2 = Reply::build(&[Err(b"new".to_vec()), Ok(b".")]);
        q.extend(r2.refs.iter().copied());
        let mut w = capped(usize::MAX);
        let (mut pos, mut done) = (0, Vec::new());
        q.write_to(&mut w, &r2.out, &mut pos, 1, usize::MAX, &mut done)
            .unwrap();
        assert_eq!(w.got, b"new.");
        assert_eq!(done, vec![0]);
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::WouldBlock.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let r = Reply::build(&[Ok(b"$2\r\n"), Err(b"ab".to_vec()), Ok(b"\r\n")]);
        let mut q = r.queue();
        let (mut pos, mut done) = (0, Vec::new());
        let e = q
            .write_to(&mut Broken, &r.out, &mut pos, r.out.len(), 100, &mut done)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!((pos, q.pending_bytes(), done.len()), (0, 2, 0));
        let mut w = capped(usize::MAX);
        drain_all(&mut q, &r, &mut w, 100);
        assert_eq!(w.got, r.want);
    }
}
