//! The arena's coarse dirty map: one bit per [`REGION_BYTES`] of the region, set by every
//! write to arena memory while a snapshot tracks it, so the snapshot's harvests walk the
//! page tables of the regions written since the previous harvest instead of the whole
//! arena (the final pause's walk is then proportional to what changed, not to the dataset).
//!
//! Two writers, one rule: a region is published *after* the write to it is complete, so a
//! harvest that takes (clears) the map and then walks the marked regions either sees a
//! write or finds its region marked again at the next harvest.
//! - The executor writes through `&mut Arena` and often only after the arena handed out
//!   the bytes (`bytes_mut`): it records regions in an executor-owned bitmap ([`ExecMarks`],
//!   plain stores) and publishes them with [`ExecMarks::publish`] at every command boundary
//!   and before it parks or waits for I/O — the only points where a snapshot may cut.
//! - Other threads (I/O threads receiving a big argument into its arena block) call
//!   [`mark_written`] right after their write.
//!
//! The shared map has a summary level (one bit per word of the map), so taking it costs
//! the words that were marked, not the arena's size.

use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// log2 of the map's grain. 64 KiB is 16 pages: walking one marked region's page-table
/// entries costs a fraction of a PAGEMAP_SCAN call's own overhead, while a random write
/// marks little more than the pages it wrote.
pub const REGION_SHIFT: u32 = 16;
pub const REGION_BYTES: u64 = 1 << REGION_SHIFT;

/// The shared map over `[base, base+len)`.
pub struct DirtyMap {
    base: usize,
    len: usize,
    words: Box<[AtomicU64]>,
    /// Bit `w` set: `words[w]` may be non-zero.
    summary: Box<[AtomicU64]>,
}

/// `n` zeroed atomic words (a zeroed allocation: pages the map never marks stay
/// untouched).
fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    let v: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    // SAFETY: AtomicU64 has the size and alignment of u64 (x86-64, aarch64), and every
    // bit pattern is a valid value of both.
    unsafe { Box::from_raw(Box::into_raw(v) as *mut [AtomicU64]) }
}

impl DirtyMap {
    pub fn new(base: usize, len: usize) -> DirtyMap {
        let regions = (len as u64).div_ceil(REGION_BYTES) as usize;
        let words = regions.div_ceil(64).max(1);
        DirtyMap {
            base,
            len,
            words: zeroed_words(words),
            summary: zeroed_words(words.div_ceil(64)),
        }
    }

    /// Marks the regions of `[off, off+len)` (offsets in the region). Any thread; call
    /// after the write is complete.
    #[inline]
    pub fn mark(&self, off: u64, len: u64) {
        if len == 0 || off >= self.len as u64 {
            return;
        }
        let last = (off + len - 1).min(self.len as u64 - 1) >> REGION_SHIFT;
        let mut r = off >> REGION_SHIFT;
        while r <= last {
            let w = (r / 64) as usize;
            let hi = (last / 64) as usize;
            let from = r % 64;
            let to = if w == hi { last % 64 } else { 63 };
            let bits = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.publish_word(w, bits);
            r = (w as u64 + 1) * 64;
        }
    }

    /// ORs `bits` into word `w`, then its summary bit (in that order: a harvest that sees
    /// the summary bit sees the word's bits).
    #[inline]
    fn publish_word(&self, w: usize, bits: u64) {
        self.words[w].fetch_or(bits, Ordering::Release);
        self.summary[w / 64].fetch_or(1 << (w % 64), Ordering::Release);
    }

    /// Takes (clears) every mark and appends the marked regions below `end` to `out` as
    /// ascending byte runs `(offset, len)`; runs closer than `merge_gap` bytes are merged
    /// (one walk over a short unmarked gap costs less than a second PAGEMAP_SCAN call).
    pub fn take(&self, end: u64, merge_gap: u64, out: &mut Vec<(u64, u64)>) {
        for (s, sw) in self.summary.iter().enumerate() {
            if sw.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut sbits = sw.swap(0, Ordering::Acquire);
            while sbits != 0 {
                let w = s * 64 + sbits.trailing_zeros() as usize;
                sbits &= sbits - 1;
                let mut bits = self.words[w].swap(0, Ordering::Acquire);
                while bits != 0 {
                    let b = bits.trailing_zeros() as u64;
                    let run_bits = (bits >> b).trailing_ones() as u64;
                    bits &= !((u64::MAX >> (64 - run_bits)) << b);
                    let start = (w as u64 * 64 + b) << REGION_SHIFT;
                    if start >= end {
                        continue;
                    }
                    let stop = (start + (run_bits << REGION_SHIFT)).min(end);
                    match out.last_mut() {
                        Some(last) if last.0 + last.1 + merge_gap >= start => {
                            last.1 = stop - last.0;
                        }
                        _ => out.push((start, stop - start)),
                    }
                }
            }
        }
    }

    /// Clears every mark.
    pub fn clear(&self) {
        let mut sink = Vec::new();
        self.take(u64::MAX, 0, &mut sink);
    }
}

/// The executor's side: regions it wrote since its last [`ExecMarks::publish`], in a
/// bitmap only it touches (a plain OR per write).
pub struct ExecMarks {
    map: Arc<DirtyMap>,
    words: Box<[u64]>,
    touched: Vec<u32>,
}

impl ExecMarks {
    pub fn new(map: Arc<DirtyMap>) -> ExecMarks {
        let n = map.words.len();
        ExecMarks {
            map,
            words: vec![0u64; n].into_boxed_slice(),
            touched: Vec::new(),
        }
    }

    pub fn map(&self) -> &Arc<DirtyMap> {
        &self.map
    }

    /// Records a write to `[off, off+len)` (offsets in the region; `len` > 0 and the
    /// range inside the region, as the arena's checked accessors guarantee).
    #[inline]
    pub fn mark(&mut self, off: u64, len: u64) {
        let first = off >> REGION_SHIFT;
        let last = (off + len.max(1) - 1) >> REGION_SHIFT;
        for r in first..=last {
            let w = (r / 64) as usize;
            let Some(word) = self.words.get_mut(w) else {
                return;
            };
            if *word == 0 {
                self.touched.push(w as u32);
            }
            *word |= 1 << (r % 64);
        }
    }

    /// Publishes the recorded regions to the shared map (the writes they cover are
    /// complete: this runs between commands).
    #[inline]
    pub fn publish(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        self.publish_slow();
    }

    #[cold]
    fn publish_slow(&mut self) {
        for w in self.touched.drain(..) {
            let w = w as usize;
            let bits = std::mem::take(&mut self.words[w]);
            self.map.publish_word(w, bits);
        }
    }
}

/// Maps armed for other threads' writes ([`mark_written`]).
static ARMED: RwLock<Vec<Arc<DirtyMap>>> = RwLock::new(Vec::new());
/// `ARMED`'s length: the unarmed fast path is one load.
static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Makes `map` receive [`mark_written`] calls for its range.
pub fn arm(map: &Arc<DirtyMap>) {
    let mut a = ARMED.write().unwrap_or_else(|e| e.into_inner());
    if !a.iter().any(|m| Arc::ptr_eq(m, map)) {
        a.push(map.clone());
        ARMED_COUNT.store(a.len(), Ordering::SeqCst);
    }
}

/// Stops [`mark_written`] calls from reaching `map`.
pub fn disarm(map: &Arc<DirtyMap>) {
    let mut a = ARMED.write().unwrap_or_else(|e| e.into_inner());
    a.retain(|m| !Arc::ptr_eq(m, map));
    ARMED_COUNT.store(a.len(), Ordering::SeqCst);
}

/// A thread other than the executor wrote `[addr, addr+len)` of some arena: marks it in
/// that arena's map if a snapshot tracks it. Call after the write. One load when no
/// snapshot runs.
#[inline]
pub fn mark_written(addr: usize, len: usize) {
    // The write above is ordered before the check: if the check misses an arming, the
    // write came before it, hence before the snapshot protected (and later streamed) the
    // region.
    fence(Ordering::SeqCst);
    if ARMED_COUNT.load(Ordering::SeqCst) == 0 {
        return;
    }
    mark_written_slow(addr, len);
}

#[cold]
fn mark_written_slow(addr: usize, len: usize) {
    let a = ARMED.read().unwrap_or_else(|e| e.into_inner());
    for m in a.iter() {
        if addr >= m.base && addr < m.base + m.len {
            m.mark((addr - m.base) as u64, len as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_come_back_as_merged_runs_once() {
        let m = Arc::new(DirtyMap::new(0x1000_0000, 1 << 30));
        m.mark(5, 1);
        m.mark(3 * REGION_BYTES + 7, REGION_BYTES); // regions 3 and 4
        m.mark(63 * REGION_BYTES, 2 * REGION_BYTES); // 63 and 64: across a word
        m.mark(500 * REGION_BYTES, 1);
        let mut out = Vec::new();
        m.take(u64::MAX, 0, &mut out);
        assert_eq!(
            out,
            vec![
                (0, REGION_BYTES),
                (3 * REGION_BYTES, 2 * REGION_BYTES),
                (63 * REGION_BYTES, 2 * REGION_BYTES),
                (500 * REGION_BYTES, REGION_BYTES)
            ]
        );
        out.clear();
        m.take(u64::MAX, 0, &mut out);
        assert!(out.is_empty(), "taken marks are cleared: {out:?}");
        // Gaps up to `merge_gap` are walked through; `end` clips.
        m.mark(0, 1);
        m.mark(2 * REGION_BYTES, 1);
        m.mark(10 * REGION_BYTES, 1);
        m.take(10 * REGION_BYTES + 100, REGION_BYTES, &mut out);
        assert_eq!(out, vec![(0, 3 * REGION_BYTES), (10 * REGION_BYTES, 100)]);
    }

    #[test]
    fn executor_marks_reach_the_map_only_when_published() {
        let m = Arc::new(DirtyMap::new(0, 1 << 30));
        let mut e = ExecMarks::new(m.clone());
        e.mark(70 * REGION_BYTES + 1, 2);
        e.mark(200 * REGION_BYTES - 1, 2); // regions 199 and 200
        let mut out = Vec::new();
        m.take(u64::MAX, 0, &mut out);
        assert!(out.is_empty());
        e.publish();
        m.take(u64::MAX, 0, &mut out);
        assert_eq!(
            out,
            vec![
                (70 * REGION_BYTES, REGION_BYTES),
                (199 * REGION_BYTES, 2 * REGION_BYTES)
            ]
        );
    }

    #[test]
    fn other_threads_mark_armed_maps_only() {
        let base = 0x7000_0000_0000usize;
        let m = Arc::new(DirtyMap::new(base, 1 << 30));
        mark_written(base + 5 * REGION_BYTES as usize, 10);
        let mut out = Vec::new();
        m.take(u64::MAX, 0, &mut out);
        assert!(out.is_empty());
        arm(&m);
        mark_written(base + 5 * REGION_BYTES as usize, 10);
        mark_written(base - 10, 5); // outside: ignored
        disarm(&m);
        mark_written(base + 9 * REGION_BYTES as usize, 10);
        m.take(u64::MAX, 0, &mut out);
        assert_eq!(out, vec![(5 * REGION_BYTES, REGION_BYTES)]);
    }
}
