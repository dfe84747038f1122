//! The tier file's space allocator ("bookkeeper"): which 4 KiB pages are free, and for
//! pages shared by small records, how many live records each still holds.
//!
//! Free space is a set of extents kept twice: by start (to coalesce neighbours when a
//! range is given back) and by (length, start) (best fit: the smallest extent that holds
//! a request, lowest start first, which keeps big holes for big values). Both are
//! `BTreeMap`/`BTreeSet`, so every operation is O(log extents).
//!
//! A record of at most [`PAYLOAD_BYTES`] lives in a shared page ("small page") together
//! with others; the page is given back when its last record is freed. A bigger record
//! takes whole pages of its own (an extent), given back when it is freed. Which of the
//! two a record is follows from its length alone, so freeing needs no lookup table for
//! big records.

use super::page::PAYLOAD_BYTES;
use crate::keyspace::tiered::ColdStub;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A shared page holding fewer live bytes than this is sparse: a compaction candidate.
/// With every shared page at least half full the small records' space amplification is
/// at most 4096 / 2048 = 2.
pub const SPARSE_LIVE_BYTES: u32 = (super::page::PAGE_BYTES / 2) as u32;

/// Live records of a shared page.
#[derive(Clone, Copy, Debug, Default)]
struct SmallPage {
    live_records: u32,
    live_bytes: u32,
}

pub struct Bookkeeper {
    capacity_pages: u32,
    free_by_start: BTreeMap<u32, u32>,
    free_by_len: BTreeSet<(u32, u32)>,
    allocated_pages: u64,
    small: HashMap<u32, SmallPage>,
    /// Bytes of live records (what the allocated pages are for).
    live_record_bytes: u64,
    /// One past the highest page ever handed out: no record lies beyond it (a snapshot's
    /// companion copies the file up to here).
    high_water: u32,
    /// Shared pages with live records but fewer than [`SPARSE_LIVE_BYTES`] of them, as
    /// (live bytes, page): the compactor's candidates, sparsest first, found without
    /// walking every page.
    sparse: BTreeSet<(u32, u32)>,
}

/// Pages a record of `record_bytes` takes when it is not packed (one for a whole-page
/// record, `page::is_whole_page`).
pub fn pages_for(record_bytes: u32) -> u32 {
    if super::page::is_whole_page(record_bytes as usize) {
        return 1;
    }
    (record_bytes as usize).div_ceil(PAYLOAD_BYTES).max(1) as u32
}

/// Whether a record of this size shares a page with others.
pub fn is_small(record_bytes: u32) -> bool {
    record_bytes as usize <= PAYLOAD_BYTES
}

impl Bookkeeper {
    pub fn new(capacity_pages: u32) -> Bookkeeper {
        let mut b = Bookkeeper {
            capacity_pages,
            free_by_start: BTreeMap::new(),
            free_by_len: BTreeSet::new(),
            allocated_pages: 0,
            small: HashMap::new(),
            live_record_bytes: 0,
            high_water: 0,
            sparse: BTreeSet::new(),
        };
        if capacity_pages > 0 {
            b.insert_free(0, capacity_pages);
        }
        b
    }

    fn insert_free(&mut self, start: u32, len: u32) {
        self.free_by_start.insert(start, len);
        self.free_by_len.insert((len, start));
    }
    fn remove_free(&mut self, start: u32, len: u32) {
        self.free_by_start.remove(&start);
        self.free_by_len.remove(&(len, start));
    }

    /// `n` contiguous pages (best fit), or None when no free extent is that long.
    pub fn alloc_pages(&mut self, n: u32) -> Option<u32> {
        if n == 0 {
            return None;
        }
        let &(len, start) = self.free_by_len.range((n, 0)..).next()?;
        self.remove_free(start, len);
        if len > n {
            self.insert_free(start + n, len - n);
        }
        self.allocated_pages += n as u64;
        self.high_water = self.high_water.max(start + n);
        Some(start)
    }

    /// Gives pages `start .. start + n` back, merging with free neighbours.
    pub fn free_pages(&mut self, start: u32, n: u32) {
        debug_assert!(n > 0 && start as u64 + n as u64 <= self.capacity_pages as u64);
        let (mut s, mut l) = (start, n);
        if let Some((&ps, &pl)) = self.free_by_start.range(..start).next_back() {
            debug_assert!(ps + pl <= start, "double free of page {start}");
            if ps + pl == start {
                self.remove_free(ps, pl);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.free_by_start.get(&(start + n)) {
            self.remove_free(start + n, nl);
            l += nl;
        }
        self.insert_free(s, l);
        self.allocated_pages -= n as u64;
    }

    /// A new shared page for small records.
    pub fn alloc_small_page(&mut self) -> Option<u32> {
        let p = self.alloc_pages(1)?;
        self.small.insert(p, SmallPage::default());
        Some(p)
    }

    /// A small record of `bytes` placed in shared page `page`.
    pub fn add_small(&mut self, page: u32, bytes: u32) {
        let s = self.small.entry(page).or_default();
        let old = s.live_bytes;
        s.live_records += 1;
        s.live_bytes += bytes;
        let new = s.live_bytes;
        self.live_record_bytes += bytes as u64;
        self.note_sparse(page, old, new);
    }

    /// Shared page `page` went from `old` to `new` live bytes (0: it holds none).
    fn note_sparse(&mut self, page: u32, old: u32, new: u32) {
        self.sparse.remove(&(old, page));
        if new > 0 && new < SPARSE_LIVE_BYTES {
            self.sparse.insert((new, page));
        }
    }

    /// A shared page that got no record after all (its write was never needed).
    pub fn drop_empty_small_page(&mut self, page: u32) {
        if self.small.get(&page).is_some_and(|s| s.live_records == 0) {
            self.small.remove(&page);
            self.free_pages(page, 1);
        }
    }

    /// Allocates an extent for a big record: its first page.
    pub fn alloc_big(&mut self, record_bytes: u32) -> Option<u32> {
        let p = self.alloc_pages(pages_for(record_bytes))?;
        self.live_record_bytes += record_bytes as u64;
        Some(p)
    }

    /// Frees a record (small or big, by its length). Returns the pages given back to
    /// the free space, if any (a shared page only when its last record goes).
    pub fn free_record(&mut self, stub: ColdStub) -> Option<(u32, u32)> {
        self.live_record_bytes = self
            .live_record_bytes
            .saturating_sub(stub.record_bytes as u64);
        if is_small(stub.record_bytes) {
            let s = self.small.get_mut(&stub.page)?;
            let old = s.live_bytes;
            s.live_records = s.live_records.saturating_sub(1);
            s.live_bytes = s.live_bytes.saturating_sub(stub.record_bytes);
            if s.live_records == 0 {
                self.small.remove(&stub.page);
                self.note_sparse(stub.page, old, 0);
                self.free_pages(stub.page, 1);
                return Some((stub.page, 1));
            }
            let new = s.live_bytes;
            self.note_sparse(stub.page, old, new);
            None
        } else {
            let n = pages_for(stub.record_bytes);
            self.free_pages(stub.page, n);
            Some((stub.page, n))
        }
    }

    /// Takes pages `start .. start + n` out of the free space; false when any of them is
    /// not free (or past the capacity).
    fn claim_pages(&mut self, start: u32, n: u32) -> bool {
        let end = start as u64 + n as u64;
        if n == 0 || end > self.capacity_pages as u64 {
            return false;
        }
        let Some((&fs, &fl)) = self.free_by_start.range(..=start).next_back() else {
            return false;
        };
        if (fs as u64 + fl as u64) < end {
            return false;
        }
        self.remove_free(fs, fl);
        if fs < start {
            self.insert_free(fs, start - fs);
        }
        let tail = (fs as u64 + fl as u64 - end) as u32;
        if tail > 0 {
            self.insert_free(end as u32, tail);
        }
        self.allocated_pages += n as u64;
        self.high_water = self.high_water.max(end as u32);
        true
    }

    /// The bookkeeping of a tier file restored from a snapshot: the records of `stubs`
    /// (every cold entry of the restored image) are live, everything else is free. Err
    /// when a record lies past the capacity or overlaps another one's pages (a big
    /// record shares its pages with nothing).
    pub fn from_records(capacity_pages: u32, stubs: &[ColdStub]) -> Result<Bookkeeper, String> {
        let mut b = Bookkeeper::new(capacity_pages);
        for &s in stubs {
            let taken = if is_small(s.record_bytes) {
                b.small.contains_key(&s.page) || b.claim_pages(s.page, 1)
            } else {
                b.claim_pages(s.page, pages_for(s.record_bytes))
            };
            if !taken {
                return Err(format!(
                    "a tiered record at page {} ({} bytes) overlaps another one or lies past the tier file's {} pages",
                    s.page, s.record_bytes, capacity_pages
                ));
            }
            if is_small(s.record_bytes) {
                b.add_small(s.page, s.record_bytes);
            } else {
                b.live_record_bytes += s.record_bytes as u64;
            }
        }
        Ok(b)
    }

    pub fn high_water(&self) -> u32 {
        self.high_water
    }
    pub fn capacity_pages(&self) -> u32 {
        self.capacity_pages
    }
    pub fn allocated_pages(&self) -> u64 {
        self.allocated_pages
    }
    pub fn live_record_bytes(&self) -> u64 {
        self.live_record_bytes
    }
    /// Shared pages in use.
    pub fn small_pages(&self) -> usize {
        self.small.len()
    }
    /// Sparse shared pages from `from` on in (live bytes, page) order, sparsest first,
    /// at most `n` (the compactor's candidates; O(log pages + n)).
    pub fn sparse_pages_from(&self, from: (u32, u32), n: usize) -> Vec<(u32, u32)> {
        self.sparse.range(from..).take(n).copied().collect()
    }
    /// Sparse shared pages (INFO).
    pub fn sparse_pages(&self) -> usize {
        self.sparse.len()
    }
    /// Live bytes of shared page `page` (0 when it holds no record).
    pub fn small_live_bytes(&self, page: u32) -> u32 {
        self.small.get(&page).map_or(0, |s| s.live_bytes)
    }
    /// Allocated bytes per live record byte (1 when nothing is live).
    pub fn space_amplification(&self) -> f64 {
        if self.live_record_bytes == 0 {
            return 1.0;
        }
        (self.allocated_pages * super::page::PAGE_BYTES as u64) as f64
            / self.live_record_bytes as f64
    }
    /// Free extents (how fragmented the free space is).
    pub fn free_extents(&self) -> usize {
        self.free_by_start.len()
    }
    /// The longest run of free pages.
    pub fn largest_free_extent(&self) -> u32 {
        self.free_by_len.iter().next_back().map_or(0, |&(l, _)| l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stub(page: u32, record_bytes: u32) -> ColdStub {
        ColdStub {
            page,
            offset: 0,
            record_bytes,
            value_bytes: 0,
        }
    }

    #[test]
    fn pages_are_handed_out_once_and_come_back_merged() {
        let mut b = Bookkeeper::new(10);
        let a = b.alloc_pages(3).unwrap();
        let c = b.alloc_pages(3).unwrap();
        let d = b.alloc_pages(4).unwrap();
        assert_eq!((a, c, d), (0, 3, 6));
        assert_eq!(b.alloc_pages(1), None, "full");
        assert_eq!(b.allocated_pages(), 10);
        b.free_pages(a, 3);
        b.free_pages(d, 4);
        assert_eq!(b.free_extents(), 2);
        b.free_pages(c, 3);
        assert_eq!(b.free_extents(), 1, "neighbours merge");
        assert_eq!(b.largest_free_extent(), 10);
        assert_eq!(b.allocated_pages(), 0);
    }

    #[test]
    fn best_fit_keeps_the_big_hole() {
        let mut b = Bookkeeper::new(20);
        let x = b.alloc_pages(2).unwrap();
        let _y = b.alloc_pages(1).unwrap();
        b.free_pages(x, 2); // holes: [0,2) and [3,20)
        assert_eq!(
            b.alloc_pages(1),
            Some(0),
            "the small hole serves a small request"
        );
        assert_eq!(b.largest_free_extent(), 17);
        assert_eq!(b.alloc_pages(17), Some(3));
    }

    #[test]
    fn a_shared_page_returns_with_its_last_record() {
        let mut b = Bookkeeper::new(4);
        let p = b.alloc_small_page().unwrap();
        b.add_small(p, 100);
        b.add_small(p, 200);
        assert_eq!(b.live_record_bytes(), 300);
        assert_eq!(b.free_record(stub(p, 100)), None);
        assert_eq!(b.allocated_pages(), 1);
        assert_eq!(b.free_record(stub(p, 200)), Some((p, 1)));
        assert_eq!(b.allocated_pages(), 0);
        assert_eq!(b.live_record_bytes(), 0);
        assert_eq!(b.small_pages(), 0);
    }

    #[test]
    fn a_big_record_takes_and_returns_whole_pages() {
        let mut b = Bookkeeper::new(8);
        let rec = (PAYLOAD_BYTES * 2 + 1) as u32;
        let p = b.alloc_big(rec).unwrap();
        assert_eq!(b.allocated_pages(), 3);
        assert_eq!(b.free_record(stub(p, rec)), Some((p, 3)));
        assert_eq!(b.allocated_pages(), 0);
    }

    #[test]
    fn an_unused_shared_page_is_dropped() {
        let mut b = Bookkeeper::new(2);
        let p = b.alloc_small_page().unwrap();
        b.drop_empty_small_page(p);
        assert_eq!(b.allocated_pages(), 0);
        assert_eq!(b.small_pages(), 0);
    }

    #[test]
    fn records_restored_are_taken_and_the_rest_is_free() {
        let big = (PAYLOAD_BYTES * 2 + 1) as u32;
        let b =
            Bookkeeper::from_records(16, &[stub(3, 100), stub(3, 50), stub(5, big), stub(9, 10)])
                .unwrap();
        assert_eq!(b.allocated_pages(), 1 + 3 + 1);
        assert_eq!(b.small_pages(), 2);
        assert_eq!(b.live_record_bytes(), 100 + 50 + big as u64 + 10);
        let mut b = b;
        assert_eq!(b.free_record(stub(3, 100)), None);
        assert_eq!(b.free_record(stub(3, 50)), Some((3, 1)));
        // A new big record never lands on the restored one's pages.
        let p = b.alloc_pages(3).unwrap();
        assert!(p + 3 <= 5 || p >= 8, "{p}");
        assert!(Bookkeeper::from_records(16, &[stub(5, big), stub(6, 10)]).is_err());
        assert!(Bookkeeper::from_records(16, &[stub(15, big)]).is_err());
        assert!(Bookkeeper::from_records(16, &[stub(16, 10)]).is_err());
    }

    #[test]
    fn sparse_pages_are_tracked_as_records_come_and_go() {
        let mut b = Bookkeeper::new(8);
        let p = b.alloc_small_page().unwrap();
        b.add_small(p, 1000);
        assert_eq!(
            b.sparse_pages_from((0, 0), 8),
            vec![(1000, p)],
            "under half full"
        );
        b.add_small(p, 1500);
        assert_eq!(b.sparse_pages(), 0, "half full or more");
        b.add_small(p, 1000);
        assert!((b.space_amplification() - 4096.0 / 3500.0).abs() < 1e-9);
        assert_eq!(b.free_record(stub(p, 1000)), None);
        assert_eq!(b.sparse_pages(), 0, "2500 live bytes: not sparse yet");
        assert_eq!(b.free_record(stub(p, 1500)), None);
        assert_eq!(b.sparse_pages_from((1000, p), 1), vec![(1000, p)]);
        assert_eq!(
            b.sparse_pages_from((1000, p + 1), 1),
            Vec::<(u32, u32)>::new()
        );
        assert_eq!(b.free_record(stub(p, 1000)), Some((p, 1)));
        assert_eq!(b.sparse_pages(), 0, "a freed page is no candidate");
        let r = Bookkeeper::from_records(8, &[stub(3, 100), stub(5, 3000)]).unwrap();
        assert_eq!(r.sparse_pages_from((0, 0), 8), vec![(100, 3)]);
    }

    #[test]
    fn sparse_pages_come_sparsest_first() {
        let mut b = Bookkeeper::new(8);
        let pages: Vec<u32> = (0..4).map(|_| b.alloc_small_page().unwrap()).collect();
        b.add_small(pages[0], 1000);
        for (&p, live) in pages.iter().zip([500u32, 300, 900, 300]) {
            b.add_small(p, live);
        }
        let order = |b: &Bookkeeper| -> Vec<u32> {
            b.sparse_pages_from((0, 0), 8)
                .iter()
                .map(|&(_, p)| p)
                .collect()
        };
        assert_eq!(order(&b), vec![pages[1], pages[3], pages[2], pages[0]]);
        // A record freed moves its page forward; one added moves it back.
        assert_eq!(b.free_record(stub(pages[0], 1000)), None);
        b.add_small(pages[1], 700);
        assert_eq!(order(&b), vec![pages[3], pages[0], pages[2], pages[1]]);
        assert_eq!(b.sparse_pages_from((300, pages[3] + 1), 8).len(), 3);
    }

    proptest! {
        /// Random allocations and frees: no two live extents overlap, the counters match
        /// the live set, and after freeing everything the file is one free extent again.
        #[test]
        fn no_overlap_and_exact_accounting(ops in proptest::collection::vec((1u32..9, any::<bool>(), any::<u8>()), 1..200)) {
            let cap = 64u32;
            let mut b = Bookkeeper::new(cap);
            let mut live: Vec<(u32, u32)> = Vec::new();
            for (n, free, pick) in ops {
                if free && !live.is_empty() {
                    let (s, l) = live.swap_remove(pick as usize % live.len());
                    b.free_pages(s, l);
                } else if let Some(s) = b.alloc_pages(n) {
                    prop_assert!(s + n <= cap);
                    for &(ls, ll) in &live {
                        prop_assert!(s + n <= ls || ls + ll <= s, "overlap");
                    }
                    live.push((s, n));
                } else {
                    // Refused only when no free extent is long enough.
                    prop_assert!(b.largest_free_extent() < n);
                }
                let used: u64 = live.iter().map(|&(_, l)| l as u64).sum();
                prop_assert_eq!(b.allocated_pages(), used);
            }
            for (s, l) in live.drain(..) {
                b.free_pages(s, l);
            }
            prop_assert_eq!(b.free_extents(), 1);
            prop_assert_eq!(b.largest_free_extent(), cap);
        }
    }
}
