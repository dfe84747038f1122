//! The raw pool: a bounded, resident buffer of page slots that the late live passes and
//! the final pause copy dirty pages into, uncompressed; compressed and written after the
//! cut.
//!
//! Why: at high write rates a compressed pass over a few tens of MB takes tens of ms on
//! the one CPU the snapshot gets, so the next set is nearly as large and the passes stall
//! well above what the pause can copy within its budget. A raw pass costs its memcpy on
//! top of the harvest, so the next set is only what was written during those few ms, and
//! the passes converge to that floor (figures: BENCHMARKS.md, "Snapshot vs Redis at 1M,
//! 4M and 8M keys", "The raw pool").
//!
//! A page keeps its slot for the rest of the snapshot: copied again (dirtied again since),
//! it overwrites its slot, so the pool holds each page's newest copy and its size is the
//! number of distinct pages copied, not the sum of the passes. The records are written
//! after every live record, so a slot's copy supersedes what a compressed pass sent
//! before (see [`RawPool::jobs`]).

use super::{Job, Packer, RegionView, PARALLEL_COPY_MIN_BYTES};
use crate::arena::PAGE_BYTES;
use std::collections::HashMap;
use std::io;

const PAGE: u64 = PAGE_BYTES as u64;

pub(super) struct RawPool {
    /// Resident memory, `cap_pages` slots of one page each (written once when made, so
    /// copies into it take no page faults).
    buf: Vec<u8>,
    /// Arena page index → slot.
    slots: HashMap<u64, u32>,
    cap_pages: usize,
}

/// Which pages without a slot [`RawPool::place`] gives one.
#[derive(Clone, Copy, Debug)]
pub(super) enum NewPages {
    /// All of them if there are at most this many (and that many slots are free), else
    /// none: a live pass.
    AllIfAtMost(usize),
    /// As many as there are free slots, in offset order: the pause.
    WhileFree,
}

/// What [`RawPool::place`] decided for a set of runs.
pub(super) struct Placement {
    /// (arena offset of a page, slot) to copy.
    pub copies: Vec<(u64, u32)>,
    /// Runs that got no slot (the caller sends them another way).
    pub rest: Vec<(u64, u64)>,
    /// Pages that got a new slot.
    pub new_pages: usize,
}

impl RawPool {
    /// A pool of `bytes` (rounded down to whole pages), made resident now: call it off the
    /// executor and before the passes that need it (faulting in fresh memory costs
    /// microseconds a page).
    pub fn new(bytes: usize) -> RawPool {
        let cap_pages = bytes / PAGE_BYTES;
        RawPool {
            // Written with a non-zero byte: a zeroed allocation of this size would be a
            // lazily mapped fresh mmap, faulting on every first copy.
            buf: vec![0x5a; cap_pages * PAGE_BYTES],
            slots: HashMap::with_capacity(cap_pages),
            cap_pages,
        }
    }

    pub fn empty() -> RawPool {
        RawPool {
            buf: Vec::new(),
            slots: HashMap::new(),
            cap_pages: 0,
        }
    }

    pub fn free_pages(&self) -> usize {
        self.cap_pages - self.slots.len()
    }

    /// Bytes the pool keeps resident.
    pub fn resident_bytes(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Bytes of the pool holding copies.
    pub fn used_bytes(&self) -> u64 {
        self.slots.len() as u64 * PAGE
    }

    /// Assigns slots to the pages of `runs` (page-aligned arena ranges). A page that has a
    /// slot keeps it (it must: its older copy would otherwise be written after, and over,
    /// the newer one). New pages get slots as `new` says; the others are returned in
    /// `rest`.
    pub fn place(&mut self, runs: &[(u64, u64)], new: NewPages) -> Placement {
        let total_pages: u64 = runs.iter().map(|r| r.1 / PAGE).sum();
        let mut copies = Vec::with_capacity(total_pages as usize);
        let take_new = match new {
            NewPages::AllIfAtMost(limit) => {
                let new = runs
                    .iter()
                    .flat_map(|&(off, len)| off / PAGE..(off + len) / PAGE)
                    .filter(|p| !self.slots.contains_key(p))
                    .count();
                new <= limit.min(self.free_pages())
            }
            NewPages::WhileFree => true,
        };
        let mut rest: Vec<(u64, u64)> = Vec::new();
        let mut new_pages = 0usize;
        for &(off, len) in runs {
            debug_assert!(off % PAGE == 0 && len % PAGE == 0, "runs are whole pages");
            for page in off / PAGE..(off + len) / PAGE {
                let next = self.slots.len() as u32;
                let slot = match self.slots.get(&page) {
                    Some(&s) => Some(s),
                    None if take_new && (next as usize) < self.cap_pages => {
                        self.slots.insert(page, next);
                        new_pages += 1;
                        Some(next)
                    }
                    None => None,
                };
                match slot {
                    Some(s) => copies.push((page * PAGE, s)),
                    None => match rest.last_mut() {
                        Some(r) if r.0 + r.1 == page * PAGE => r.1 += PAGE,
                        _ => rest.push((page * PAGE, PAGE)),
                    },
                }
            }
        }
        Placement {
            copies,
            rest,
            new_pages,
        }
    }

    /// Copies the pages of `copies` from the arena into their slots (through
    /// [`super::racy_copy`]: other threads may be writing them), on two threads when
    /// `parallel` and there is enough to copy for the second one to pay off.
    ///
    /// A page listed twice is copied once. Panics if two different pages share a slot or
    /// a slot lies outside the pool (neither can come from [`RawPool::place`]).
    pub fn copy(
        &mut self,
        view: &RegionView,
        copies: &[(u64, u32)],
        parallel: bool,
    ) -> io::Result<()> {
        // Each slot's page of the buffer as its own `&mut`, taken in slot order.
        let mut by_slot: Vec<(u32, u64)> = copies.iter().map(|&(off, slot)| (slot, off)).collect();
        by_slot.sort_unstable();
        let mut parts: Vec<(u64, &mut [u8])> = Vec::with_capacity(by_slot.len());
        let mut rest: &mut [u8] = &mut self.buf;
        let mut rest_starts_at = 0usize; // slot index of `rest`'s first page
        by_slot.dedup();
        for &(slot, off) in &by_slot {
            let slot = slot as usize;
            assert!(
                slot >= rest_starts_at && slot < self.cap_pages,
                "slot {slot} given to two pages, or outside the pool"
            );
            let skip = (slot - rest_starts_at) * PAGE_BYTES;
            let (page, tail) = std::mem::take(&mut rest)[skip..].split_at_mut(PAGE_BYTES);
            parts.push((off, page));
            rest = tail;
            rest_starts_at = slot + 1;
        }
        if parallel && parts.len() * PAGE_BYTES >= PARALLEL_COPY_MIN_BYTES {
            let half = parts.len() / 2;
            let (first, second) = parts.split_at_mut(half);
            std::thread::scope(|s| {
                let other = s.spawn(|| view.copy_scattered(second));
                let mine = view.copy_scattered(first);
                other
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("copy thread panicked")))
                    .and(mine)
            })
        } else {
            view.copy_scattered(&mut parts)
        }
    }

    /// Jobs that write every slot's page at its arena offset, in offset order; pages that
    /// are neighbours in both the arena and the pool share an extent.
    pub fn jobs(&self) -> Vec<Job<'_>> {
        let mut pages: Vec<(u64, u32)> = self.slots.iter().map(|(&p, &s)| (p, s)).collect();
        pages.sort_unstable();
        let mut packer = Packer::from_copies();
        let mut run: Option<(u64, u64, usize)> = None; // (offset, len, first byte in buf)
        fn add<'a>(packer: &mut Packer<'a>, buf: &'a [u8], (o, l, at): (u64, u64, usize)) {
            packer.add_copy(o, &buf[at..at + l as usize]);
        }
        for (page, slot) in pages {
            let (off, at) = (page * PAGE, slot as usize * PAGE_BYTES);
            match &mut run {
                Some(r) if r.0 + r.1 == off && r.2 + r.1 as usize == at => r.1 += PAGE,
                _ => {
                    if let Some(r) = run.take() {
                        add(&mut packer, &self.buf, r);
                    }
                    run = Some((off, PAGE, at));
                }
            }
        }
        if let Some(r) = run {
            add(&mut packer, &self.buf, r);
        }
        packer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: NewPages = NewPages::AllIfAtMost(usize::MAX);

    fn view_of(mem: &[u8]) -> RegionView {
        RegionView::over_buffer(mem)
    }

    /// The bytes a job list would write, applied in order onto a zeroed image.
    fn apply(jobs: &[Job<'_>], len: usize) -> Vec<u8> {
        let mut img = vec![0u8; len];
        for j in jobs {
            let super::super::Source::Copies(parts) = &j.from else {
                panic!("pool jobs read the pool, not the region")
            };
            for (e, bytes) in j.extents.iter().zip(parts) {
                let n = e.len as usize;
                assert_eq!(bytes.len(), n);
                img[e.offset as usize..e.offset as usize + n].copy_from_slice(bytes);
            }
        }
        img
    }

    #[test]
    fn a_page_copied_again_keeps_its_slot_and_the_newest_bytes() {
        let mut arena = vec![0u8; 16 * PAGE_BYTES];
        arena[..PAGE_BYTES].fill(1);
        arena[3 * PAGE_BYTES..5 * PAGE_BYTES].fill(3);
        let mut pool = RawPool::new(8 * PAGE_BYTES);
        let p = pool.place(&[(0, PAGE), (3 * PAGE, 2 * PAGE)], ALL);
        assert_eq!((p.new_pages, p.rest.len()), (3, 0));
        pool.copy(&view_of(&arena), &p.copies, false).unwrap();
        // Page 3 written again, page 9 for the first time.
        arena[3 * PAGE_BYTES..4 * PAGE_BYTES].fill(7);
        arena[9 * PAGE_BYTES..10 * PAGE_BYTES].fill(9);
        let p = pool.place(&[(3 * PAGE, PAGE), (9 * PAGE, PAGE)], ALL);
        assert_eq!(p.new_pages, 1, "page 3 reuses its slot");
        pool.copy(&view_of(&arena), &p.copies, true).unwrap();
        assert_eq!(pool.used_bytes(), 4 * PAGE);
        let img = apply(&pool.jobs(), arena.len());
        for page in [0usize, 3, 4, 9] {
            let r = page * PAGE_BYTES..(page + 1) * PAGE_BYTES;
            assert_eq!(img[r.clone()], arena[r], "page {page}");
        }
        assert!(img[PAGE_BYTES..3 * PAGE_BYTES].iter().all(|&b| b == 0));
    }

    #[test]
    fn new_pages_that_do_not_fit_are_left_to_the_caller() {
        let arena = vec![4u8; 16 * PAGE_BYTES];
        let mut pool = RawPool::new(3 * PAGE_BYTES);
        let p = pool.place(&[(0, 2 * PAGE)], ALL);
        pool.copy(&view_of(&arena), &p.copies, false).unwrap();
        // All or nothing: 3 new pages for 1 free slot: none placed; page 1 (slotted) is.
        let p = pool.place(&[(PAGE, 4 * PAGE)], ALL);
        assert_eq!(p.new_pages, 0);
        assert_eq!(p.copies, vec![(PAGE, 1)]);
        assert_eq!(p.rest, vec![(2 * PAGE, 3 * PAGE)]);
        // Partial (the pause): the free slot is taken, the rest is left, merged into runs.
        let p = pool.place(&[(PAGE, 4 * PAGE), (8 * PAGE, PAGE)], NewPages::WhileFree);
        assert_eq!(p.new_pages, 1);
        assert_eq!(p.copies, vec![(PAGE, 1), (2 * PAGE, 2)]);
        assert_eq!(p.rest, vec![(3 * PAGE, 2 * PAGE), (8 * PAGE, PAGE)]);
        assert_eq!(pool.free_pages(), 0);
    }

    #[test]
    fn a_live_pass_over_its_limit_gets_no_new_slots() {
        let arena = vec![4u8; 16 * PAGE_BYTES];
        let mut pool = RawPool::new(16 * PAGE_BYTES);
        let p = pool.place(&[(0, 4 * PAGE)], NewPages::AllIfAtMost(3));
        assert_eq!((p.new_pages, p.copies.len()), (0, 0));
        assert_eq!(p.rest, vec![(0, 4 * PAGE)]);
        let p = pool.place(&[(0, 4 * PAGE)], NewPages::AllIfAtMost(4));
        assert_eq!(p.new_pages, 4);
        pool.copy(&view_of(&arena), &p.copies, false).unwrap();
        assert_eq!(pool.free_pages(), 12);
    }

    #[test]
    fn neighbouring_slots_share_an_extent() {
        let arena = vec![1u8; 300 * PAGE_BYTES];
        let mut pool = RawPool::new(300 * PAGE_BYTES);
        let p = pool.place(&[(0, 290 * PAGE)], ALL);
        pool.copy(&view_of(&arena), &p.copies, true).unwrap();
        let jobs = pool.jobs();
        // 290 contiguous pages: one 256-page chunk and one of 34, one extent each.
        assert_eq!(jobs.len(), 2);
        assert!(jobs.iter().all(|j| j.extents.len() == 1));
        assert_eq!(
            apply(&jobs, arena.len())[..290 * PAGE_BYTES],
            arena[..290 * PAGE_BYTES]
        );
    }
}
