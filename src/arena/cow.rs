//! Copy-before-write capture: how a freeze-free snapshot keeps the arena's bytes as they
//! were at its cut without write faults. Every write to arena memory passes through a
//! hook *before* it changes a byte: the executor's through [`Capture::before_write`]
//! (called by the arena's mutable accessors), other threads' (an I/O thread receiving a
//! big argument into its arena block) through [`external_write`]. While a cut is
//! installed, the first write to a page below the cut's end that the snapshot has not
//! streamed yet copies the page (its cut contents) into a bounded side buffer; the
//! snapshot's workers write copied pages as records of their own.
//!
//! **No locks between writers and workers.** Each page below the cut's end has a two-bit
//! state in an atomic bitmap: *pending* (holds its cut bytes, nobody took it), *streamed*
//! (a worker read it in its chunk and claimed it: the image has it), *copying* (a writer
//! claimed it and is copying it out) and *copied*. Writer and worker race for a pending
//! page with one compare-and-swap each: a worker claims the pending pages of a chunk
//! *after* reading the chunk, so a page it wins was not written before its read (a writer
//! claims before it writes); the pages writers won are left out of the chunk and go to
//! the image from the side buffer. Side-buffer slots are taken from and given back to an
//! atomic bitmap, and a copy is published by setting its slot's bit in another. The
//! executor never waits for a worker that lost its CPU while holding something: the
//! only waits are for room in a full side buffer (backpressure) and, for a few hundred
//! nanoseconds, for another writer copying the same page.
//!
//! **The fast path** is one load when no cut is installed, and a load of one state word
//! per page written when one is: a streamed or copied page needs nothing more.
//!
//! **The copy itself** is made by a function the snapshot installs with the cut:
//! [`region_copy`], a plain memory copy, sound because no thread writes a page while a
//! writer that claimed it copies it (see there). The tests install copies of their own.
//!
//! **Backpressure.** The side buffer holds [`Cut::slots`] pages. A writer that finds it
//! full waits on a condvar until a worker drains a batch into the image (or the capture
//! ends): memory stays bounded whatever the write rate.
//!
//! **Other threads at the cut.** The executor is parked when the cut is installed, so its
//! next write sees it. An I/O thread may be between its check and its write then: every
//! [`external_write`] counts itself in [`IN_WRITE`] around check and write, and
//! [`Capture::install`] waits for writes already under way to end after it publishes the
//! cut (a Dekker pair: either the writer sees the cut, or the cut sees the writer and
//! waits until its write is complete — before the snapshot streams anything).

use super::PAGE_BYTES;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::Instant;

/// Copies `dst.len()` bytes of the region at `offset` into `dst`.
pub type CopyFn = Box<dyn Fn(u64, &mut [u8]) -> io::Result<()> + Send + Sync>;

/// The copy a cut over the region at `base` (of `len` bytes) uses in production: a plain
/// memory copy.
///
/// **Why a plain copy is defined here** when the snapshot's workers read the region only
/// through the kernel (`persistence::snapshot::racy_copy`): the copy runs only in
/// [`Cut::copy_out`], by the writer that moved the page from *pending* to *copying*.
/// Every writer to the region (the executor through [`Capture::before_write`], an I/O
/// thread through [`external_write`]) passes the hook for a page before it writes it, and
/// the hook returns only once the page is *streamed* or *copied*. So while a page is
/// *copying*, no thread is writing it, and the writer that comes next sees *copied*
/// (released after the copy) before it writes. The workers' concurrent kernel copies
/// only read. A kernel copy here cost 10–14 µs per page on this VM under load, on the
/// executor, on every first write.
pub fn region_copy(base: usize, len: usize) -> CopyFn {
    Box::new(move |off, dst: &mut [u8]| {
        let end = off
            .checked_add(dst.len() as u64)
            .filter(|&e| e <= len as u64)
            .ok_or_else(|| io::Error::other("copy-out past the region"))?;
        debug_assert!(end > off || dst.is_empty());
        // SAFETY: `[off, end)` lies inside the region's mapping (checked above, the region
        // outlives the capture); no thread writes these bytes during the copy (see above);
        // `dst` is a distinct buffer (a side-buffer slot).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (base + off as usize) as *const u8,
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    })
}

/// A page's state: two bits, [`PAGES_PER_WORD`] pages per word. The settled states
/// (nothing more to do for a writer) have the low bit set.
const PENDING: u64 = 0b00;
const STREAMED: u64 = 0b01;
const COPYING: u64 = 0b10;
const COPIED: u64 = 0b11;
const PAGES_PER_WORD: usize = 32;
/// The low bit of every page's pair in a state word.
const LOW_BITS: u64 = 0x5555_5555_5555_5555;

/// The capture of one snapshot over one arena. Made (empty) when the snapshot starts;
/// [`Capture::install`] puts the cut in at the pause.
pub struct Capture {
    base: usize,
    len: usize,
    cut: OnceLock<Cut>,
}

/// The copy-out state after the cut.
pub struct Cut {
    /// Pages below this (bytes) are the image's.
    pub end: u64,
    /// Two bits per page below `end` (`PENDING`, `STREAMED`, `COPYING`, `COPIED`).
    state: Box<[AtomicU64]>,
    /// One bit per page that passed through the hook (`verify` only).
    seen: Option<Box<[AtomicU64]>>,
    /// The capture is over (streamed, failed or cancelled): writers pass.
    finished: AtomicBool,
    copy: CopyFn,
    /// The side buffer: `slots` pages, owned (freed on drop). A slot is written only by
    /// the writer that took it off `free`, and read only by the worker that took it off
    /// `ready`.
    side: *mut u8,
    slots: usize,
    /// Per slot: the arena offset of the page it holds (valid while its `ready` bit is set).
    slot_page: Box<[AtomicU64]>,
    /// One bit per slot: free.
    free: Box<[AtomicU64]>,
    /// One bit per slot: holds a copied-out page for the stream.
    ready: Box<[AtomicU64]>,
    free_slots: AtomicUsize,
    ready_slots: AtomicUsize,
    /// Pages writers claimed that no worker has taken out of the side buffer yet. Counted
    /// before the claim, so it is never low (see [`Cut::pending`]).
    outstanding: AtomicUsize,
    /// A writer waiting for room sleeps here; a worker that frees slots wakes it.
    room: Mutex<()>,
    room_cv: Condvar,
    room_waiters: AtomicUsize,
    copies: AtomicU64,
    copy_ns: AtomicU64,
    used_peak: AtomicUsize,
    full_waits: AtomicU64,
    wait_ns_max: AtomicU64,
    waits_over_1ms: AtomicU64,
    /// A copy failed, or a worker failed: the snapshot fails with this.
    error: Mutex<Option<String>>,
}

// SAFETY: `side` is a heap buffer owned by the cut; who may touch which slot is decided
// by the `free` and `ready` bitmaps (see `Cut::slot_mut`), so sharing the cut between
// threads is sound.
unsafe impl Send for Cut {}
unsafe impl Sync for Cut {}

impl Drop for Cut {
    fn drop(&mut self) {
        let len = self.slots * PAGE_BYTES;
        // SAFETY: made by `Box::into_raw` of a boxed slice of exactly `len` bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.side, len)) });
    }
}

/// What the writers' side of a capture cost, for the log.
#[derive(Clone, Copy, Debug, Default)]
pub struct CutStats {
    /// Pages copied out, and the writers' time on them (ns, waits included).
    pub copies: u64,
    pub copy_ns: u64,
    /// Side-buffer slots in use at most.
    pub used_peak: usize,
    /// Times a writer found the side buffer full and waited for the stream.
    pub full_waits: u64,
    /// A writer's longest wait (for room, or for another writer's copy of the same page),
    /// and the waits over 1 ms.
    pub wait_ns_max: u64,
    pub waits_over_1ms: u64,
}

/// Zeroed words (a zeroed allocation: the kernel supplies the zeros as pages are touched,
/// so making the bitmap costs nothing proportional to the arena).
fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    let v: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    // SAFETY: AtomicU64 has the size and alignment of u64 (x86-64, aarch64), and every
    // bit pattern is a valid value of both.
    unsafe { Box::from_raw(Box::into_raw(v) as *mut [AtomicU64]) }
}

#[inline]
fn bit(words: &[AtomicU64], page: usize) -> bool {
    words
        .get(page / 64)
        .is_some_and(|w| w.load(Ordering::Acquire) & (1 << (page % 64)) != 0)
}

#[inline]
fn set_bit(words: &[AtomicU64], page: usize) {
    if let Some(w) = words.get(page / 64) {
        w.fetch_or(1 << (page % 64), Ordering::Release);
    }
}

impl Capture {
    pub fn new(base: usize, len: usize) -> Capture {
        Capture {
            base,
            len,
            cut: OnceLock::new(),
        }
    }

    /// The cut, once installed.
    pub fn cut(&self) -> Option<&Cut> {
        self.cut.get()
    }

    /// Installs the cut: from here on a first write to a page below `end` copies it out
    /// (through `copy`) into a side buffer of `side_bytes`. Call with the executor parked
    /// at a command boundary. `verify`: also record every page the hook sees (for
    /// [`Cut::unseen`]). Returns false if a cut was installed before.
    pub fn install(&self, end: u64, side_bytes: usize, copy: CopyFn, verify: bool) -> bool {
        let pages = (end as usize).div_ceil(PAGE_BYTES);
        let slots = (side_bytes / PAGE_BYTES).max(1);
        let slot_words = slots.div_ceil(64);
        let free: Box<[AtomicU64]> = (0..slot_words)
            .map(|w| {
                let here = (slots - w * 64).min(64);
                AtomicU64::new(if here == 64 {
                    u64::MAX
                } else {
                    (1 << here) - 1
                })
            })
            .collect();
        let cut = Cut {
            end,
            state: zeroed_words(pages.div_ceil(PAGES_PER_WORD).max(1)),
            seen: verify.then(|| zeroed_words(pages.div_ceil(64).max(1))),
            finished: AtomicBool::new(false),
            copy,
            // Zeroed lazily by the kernel: only slots actually used become resident.
            side: Box::into_raw(vec![0u8; slots * PAGE_BYTES].into_boxed_slice()) as *mut u8,
            slots,
            slot_page: zeroed_words(slots),
            free,
            ready: zeroed_words(slot_words),
            free_slots: AtomicUsize::new(slots),
            ready_slots: AtomicUsize::new(0),
            outstanding: AtomicUsize::new(0),
            room: Mutex::new(()),
            room_cv: Condvar::new(),
            room_waiters: AtomicUsize::new(0),
            copies: AtomicU64::new(0),
            copy_ns: AtomicU64::new(0),
            used_peak: AtomicUsize::new(0),
            full_waits: AtomicU64::new(0),
            wait_ns_max: AtomicU64::new(0),
            waits_over_1ms: AtomicU64::new(0),
            error: Mutex::new(None),
        };
        if self.cut.set(cut).is_err() {
            return false;
        }
        // The cut is published (OnceLock's release): wait out the other threads' writes
        // that checked before it (see the module's comment).
        std::sync::atomic::fence(Ordering::SeqCst);
        while IN_WRITE.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        true
    }

    /// The hook: `[off, off+len)` of the region is about to be written. Copies out the
    /// pages of it that the cut still needs first (waiting for room in the side buffer
    /// when it is full).
    #[inline(always)]
    pub fn before_write(&self, off: usize, len: usize) {
        if let Some(cut) = self.cut.get() {
            cut.before_write(off as u64, len as u64);
        }
    }
}

impl Cut {
    /// Pages the side buffer holds at most.
    pub fn slots(&self) -> usize {
        self.slots
    }

    #[inline(always)]
    fn page_state(&self, page: usize) -> u64 {
        (self.state[page / PAGES_PER_WORD].load(Ordering::Acquire) >> ((page % PAGES_PER_WORD) * 2))
            & 0b11
    }

    #[inline(always)]
    fn before_write(&self, off: u64, len: u64) {
        if off >= self.end || len == 0 {
            return;
        }
        let first = off as usize / PAGE_BYTES;
        let last = ((off + len - 1).min(self.end - 1)) as usize / PAGE_BYTES;
        if self.seen.is_none() && (first..=last).all(|p| self.page_state(p) & 1 != 0) {
            return;
        }
        self.copy_out(first, last);
    }

    #[cold]
    #[inline(never)]
    fn copy_out(&self, first: usize, last: usize) {
        if let Some(seen) = &self.seen {
            for p in first..=last {
                set_bit(seen, p);
            }
        }
        for p in first..=last {
            self.claim_and_copy(p);
        }
    }

    /// Returns once page `p` is settled (streamed or copied) or the capture is over;
    /// copies it out if this writer is the first to claim it.
    fn claim_and_copy(&self, p: usize) {
        let word = &self.state[p / PAGES_PER_WORD];
        let shift = (p % PAGES_PER_WORD) * 2;
        let mut waiting_since: Option<Instant> = None;
        let mut spins = 0u32;
        loop {
            if self.finished.load(Ordering::Acquire) {
                break;
            }
            let cur = word.load(Ordering::Acquire);
            match (cur >> shift) & 0b11 {
                STREAMED | COPIED => break,
                COPYING => {
                    // Another writer (an I/O thread receiving into the same page) is
                    // copying it: a memcpy away, unless it lost its CPU.
                    waiting_since.get_or_insert_with(Instant::now);
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                state => {
                    debug_assert_eq!(state, PENDING);
                    // Counted before the claim: a worker that sees every chunk claimed and
                    // nothing outstanding must not miss a copy about to be published.
                    self.outstanding.fetch_add(1, Ordering::SeqCst);
                    if word
                        .compare_exchange(
                            cur,
                            cur | (COPYING << shift),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_err()
                    {
                        self.outstanding.fetch_sub(1, Ordering::SeqCst);
                        continue;
                    }
                    self.copy_claimed(p, word, shift);
                    break;
                }
            }
        }
        if let Some(t) = waiting_since {
            self.note_wait(t);
        }
    }

    /// Copies out page `p`, which this writer moved to `COPYING`, and publishes it.
    fn copy_claimed(&self, p: usize, word: &AtomicU64, shift: usize) {
        let started = Instant::now();
        let Some(slot) = self.slot_for_copy() else {
            // The capture ended while we waited: nothing is streamed any more.
            self.outstanding.fetch_sub(1, Ordering::SeqCst);
            word.fetch_or(STREAMED << shift, Ordering::Release);
            return;
        };
        // SAFETY: the slot is ours: taken off the free bitmap, not yet in `ready`.
        let dst = unsafe { self.slot_mut(slot) };
        // The page holds the cut's bytes: every writer to it claims it first, and the
        // first one (us) has not written yet.
        match (self.copy)((p * PAGE_BYTES) as u64, dst) {
            Ok(()) => {
                self.slot_page[slot as usize].store((p * PAGE_BYTES) as u64, Ordering::Relaxed);
                self.ready[slot as usize / 64].fetch_or(1 << (slot % 64), Ordering::Release);
                self.ready_slots.fetch_add(1, Ordering::SeqCst);
                self.copies.fetch_add(1, Ordering::Relaxed);
                self.copy_ns
                    .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                self.give_back(&[slot]);
                self.outstanding.fetch_sub(1, Ordering::SeqCst);
                // The image cannot be right any more: let every writer pass.
                self.fail(e.to_string());
                self.finish();
            }
        }
        // COPYING → COPIED: writers waiting on this page go on.
        word.fetch_or(STREAMED << shift, Ordering::Release);
    }

    fn note_wait(&self, since: Instant) {
        let ns = since.elapsed().as_nanos() as u64;
        self.wait_ns_max.fetch_max(ns, Ordering::Relaxed);
        if ns > 1_000_000 {
            self.waits_over_1ms.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The lowest free slot, if there is one now. Lowest first so that the slots in use
    /// stay packed at the start of the side buffer: the kernel maps its pages as they are
    /// first touched, so the buffer's resident memory follows the peak in use, not the
    /// 32 MiB reserved (a search that went round the buffer touched all of it).
    fn take_free_slot(&self) -> Option<u32> {
        for (wi, w) in self.free.iter().enumerate() {
            let mut cur = w.load(Ordering::Acquire);
            while cur != 0 {
                let b = cur.trailing_zeros();
                match w.compare_exchange_weak(
                    cur,
                    cur & !(1 << b),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        let left = self.free_slots.fetch_sub(1, Ordering::SeqCst) - 1;
                        self.used_peak
                            .fetch_max(self.slots - left, Ordering::Relaxed);
                        return Some((wi * 64) as u32 + b);
                    }
                    Err(now) => cur = now,
                }
            }
        }
        None
    }

    /// A free slot, waiting for a worker to free one while the side buffer is full. None
    /// once the capture is over.
    fn slot_for_copy(&self) -> Option<u32> {
        if let Some(s) = self.take_free_slot() {
            return Some(s);
        }
        let asked = Instant::now();
        self.full_waits.fetch_add(1, Ordering::Relaxed);
        let mut g = self.room.lock().unwrap_or_else(|e| e.into_inner());
        // Counted, then checked again (a Dekker pair with `give_back`): either the worker
        // that frees a slot sees us waiting and wakes us, or we see its slot.
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        let got = loop {
            if self.finished.load(Ordering::Acquire) {
                break None;
            }
            if let Some(s) = self.take_free_slot() {
                break Some(s);
            }
            g = self
                .room_cv
                .wait_timeout(g, std::time::Duration::from_millis(10))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
        drop(g);
        self.note_wait(asked);
        got
    }

    /// Frees `slots` and wakes writers waiting for room.
    fn give_back(&self, slots: &[u32]) {
        // Counted before the bits are set: a writer that takes one of them at once
        // counts it down after.
        self.free_slots.fetch_add(slots.len(), Ordering::SeqCst);
        for &s in slots {
            self.free[s as usize / 64].fetch_or(1 << (s % 64), Ordering::Release);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.room_waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.room.lock().unwrap_or_else(|e| e.into_inner());
            self.room_cv.notify_all();
        }
    }

    /// # Safety
    /// The caller owns `slot` (took it off the free bitmap, or off the ready bitmap).
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot_mut(&self, slot: u32) -> &mut [u8] {
        assert!((slot as usize) < self.slots);
        // SAFETY: `slot < slots`, so the page lies inside `side`; the caller owns it.
        unsafe {
            std::slice::from_raw_parts_mut(self.side.add(slot as usize * PAGE_BYTES), PAGE_BYTES)
        }
    }

    /// A worker read `[off, off+len)` (a chunk of the image, page-aligned) from the region
    /// and claims its pending pages: `keep[k]` says whether the chunk's `k`-th page holds
    /// its cut bytes in that read (claimed here) or was claimed by a writer first (its
    /// copy goes out of the side buffer; the read may be torn). Call after the read.
    pub fn claim_for_stream(&self, off: u64, len: u64, keep: &mut [bool]) {
        keep.iter_mut().for_each(|k| *k = false);
        let first = off as usize / PAGE_BYTES;
        let stop = (off + len).min(self.end).div_ceil(PAGE_BYTES as u64) as usize;
        let mut p = first;
        while p < stop {
            let wi = p / PAGES_PER_WORD;
            let lo = p % PAGES_PER_WORD;
            let hi = (stop - wi * PAGES_PER_WORD).min(PAGES_PER_WORD);
            let span = ((hi - lo) * 2) as u32;
            let range_low = (if span == 64 {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << (lo * 2)
            }) & LOW_BITS;
            let word = &self.state[wi];
            let mut cur = word.load(Ordering::Acquire);
            let won = loop {
                let occupied = (cur | (cur >> 1)) & LOW_BITS;
                let pending = range_low & !occupied;
                if pending == 0 {
                    break 0;
                }
                // Release: the chunk's read, made before, happens before any writer that
                // finds these pages streamed goes on to write them.
                match word.compare_exchange_weak(
                    cur,
                    cur | pending,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break pending,
                    Err(now) => cur = now,
                }
            };
            for k in lo..hi {
                if won & (1 << (k * 2)) != 0 {
                    keep[wi * PAGES_PER_WORD + k - first] = true;
                }
            }
            p = wi * PAGES_PER_WORD + hi;
        }
    }

    /// Takes up to `buf.len() / PAGE_BYTES` copied-out pages out of the side buffer into
    /// `buf`, in page order, and frees their slots; returns their arena offsets. None
    /// while fewer than `min_pages` are waiting.
    pub fn drain_into(&self, buf: &mut [u8], min_pages: usize) -> Option<Vec<u64>> {
        let max = buf.len() / PAGE_BYTES;
        if max == 0 || self.ready_slots.load(Ordering::SeqCst) < min_pages.max(1) {
            return None;
        }
        let mut taken: Vec<(u64, u32)> = Vec::with_capacity(max);
        for (wi, w) in self.ready.iter().enumerate() {
            let room = max - taken.len();
            if room == 0 {
                break;
            }
            let cur = w.load(Ordering::Relaxed);
            if cur == 0 {
                continue;
            }
            // At most `room` of the word's slots, the lowest ones.
            let mut want = cur;
            while want.count_ones() as usize > room {
                want &= !(1u64 << (63 - want.leading_zeros()));
            }
            let mut got = w.fetch_and(!want, Ordering::AcqRel) & want;
            while got != 0 {
                let b = got.trailing_zeros();
                got &= got - 1;
                let slot = (wi * 64) as u32 + b;
                taken.push((self.slot_page[slot as usize].load(Ordering::Relaxed), slot));
            }
        }
        if taken.is_empty() {
            return None;
        }
        self.ready_slots.fetch_sub(taken.len(), Ordering::SeqCst);
        taken.sort_unstable();
        let mut slots = Vec::with_capacity(taken.len());
        for (i, &(_, slot)) in taken.iter().enumerate() {
            // SAFETY: taken off the ready bitmap by us: its writer is done with it and no
            // other worker has it.
            let src = unsafe { self.slot_mut(slot) };
            buf[i * PAGE_BYTES..(i + 1) * PAGE_BYTES].copy_from_slice(src);
            slots.push(slot);
        }
        self.give_back(&slots);
        self.outstanding.fetch_sub(taken.len(), Ordering::SeqCst);
        Some(taken.into_iter().map(|(pg, _)| pg).collect())
    }

    /// Copies writers claimed are still to be taken out of the side buffer (always false
    /// once the capture failed or ended). Once every chunk was claimed by a worker, no
    /// page can be claimed by a writer any more, so false then means the image is whole.
    pub fn pending(&self) -> bool {
        !self.finished.load(Ordering::Acquire)
            && self.outstanding.load(Ordering::SeqCst) != 0
            && self.error_is_none()
    }

    fn error_is_none(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Records an error (the first one wins): the snapshot fails with it.
    pub fn fail(&self, e: String) {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
    }

    pub fn take_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    pub fn stats(&self) -> CutStats {
        CutStats {
            copies: self.copies.load(Ordering::Relaxed),
            copy_ns: self.copy_ns.load(Ordering::Relaxed),
            used_peak: self.used_peak.load(Ordering::Relaxed),
            full_waits: self.full_waits.load(Ordering::Relaxed),
            wait_ns_max: self.wait_ns_max.load(Ordering::Relaxed),
            waits_over_1ms: self.waits_over_1ms.load(Ordering::Relaxed),
        }
    }

    /// The capture is over: writers pass from now on, and those waiting wake.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        let _g = self.room.lock().unwrap_or_else(|e| e.into_inner());
        self.room_cv.notify_all();
    }

    /// The copy of the page at `off` waiting in the side buffer, if any (tests).
    #[cfg(test)]
    pub(crate) fn side_page(&self, off: u64) -> Option<Vec<u8>> {
        (0..self.slots as u32)
            .filter(|&s| bit(&self.ready, s as usize))
            .find(|&s| self.slot_page[s as usize].load(Ordering::Relaxed) == off)
            // SAFETY: a ready slot is not written until a worker drains it (tests drain
            // on the same thread).
            .map(|s| unsafe { self.slot_mut(s) }.to_vec())
    }

    /// The slots holding copies that wait for the stream (tests).
    #[cfg(test)]
    pub(crate) fn ready_slot_indices(&self) -> Vec<usize> {
        (0..self.slots).filter(|&s| bit(&self.ready, s)).collect()
    }

    /// With `verify`: of the pages `runs` (offset, length) lists, those below the cut's end
    /// that never passed through the hook, as runs.
    pub fn unseen(&self, runs: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let Some(seen) = &self.seen else {
            return Vec::new();
        };
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(off, len) in runs {
            let stop = (off + len).min(self.end);
            let mut pg = off / PAGE_BYTES as u64 * PAGE_BYTES as u64;
            while pg < stop {
                if !bit(seen, pg as usize / PAGE_BYTES) {
                    match out.last_mut() {
                        Some(r) if r.0 + r.1 == pg => r.1 += PAGE_BYTES as u64,
                        _ => out.push((pg, PAGE_BYTES as u64)),
                    }
                }
                pg += PAGE_BYTES as u64;
            }
        }
        out
    }
}
/// Captures other threads' writes must reach ([`external_write`]).
static CAPTURES: RwLock<Vec<Arc<Capture>>> = RwLock::new(Vec::new());
/// `CAPTURES`' length: the fast path without a snapshot is one load.
static CAPTURE_COUNT: AtomicUsize = AtomicUsize::new(0);
/// [`external_write`]s between their check and the end of their write.
static IN_WRITE: AtomicUsize = AtomicUsize::new(0);

/// Makes [`external_write`] calls reach `c` (before its cut is installed).
pub fn arm(c: &Arc<Capture>) {
    let mut a = CAPTURES.write().unwrap_or_else(|e| e.into_inner());
    if !a.iter().any(|m| Arc::ptr_eq(m, c)) {
        a.push(c.clone());
        CAPTURE_COUNT.store(a.len(), Ordering::SeqCst);
    }
}

/// Stops [`external_write`] calls from reaching `c`.
pub fn disarm(c: &Arc<Capture>) {
    let mut a = CAPTURES.write().unwrap_or_else(|e| e.into_inner());
    a.retain(|m| !Arc::ptr_eq(m, c));
    CAPTURE_COUNT.store(a.len(), Ordering::SeqCst);
}

/// A thread other than the executor is about to write `[addr, addr+len)` of some arena
/// with `write`: copies out what a capture still needs of those pages first, then
/// writes. `len` may exceed what `write` writes (a `read(2)`'s room): the pages of the
/// room are copied.
#[inline]
pub fn external_write<R>(addr: usize, len: usize, write: impl FnOnce() -> R) -> R {
    IN_WRITE.fetch_add(1, Ordering::SeqCst);
    if CAPTURE_COUNT.load(Ordering::SeqCst) != 0 {
        external_slow(addr, len);
    }
    let r = write();
    IN_WRITE.fetch_sub(1, Ordering::SeqCst);
    r
}

#[cold]
fn external_slow(addr: usize, len: usize) {
    let a = CAPTURES.read().unwrap_or_else(|e| e.into_inner()).clone();
    for c in a.iter() {
        if addr >= c.base && addr < c.base + c.len {
            c.before_write(addr - c.base, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::mpsc;
    use std::time::Duration;

    const P: usize = PAGE_BYTES;

    /// A "region" of `pages` pages in a buffer, each page filled with its index, and a
    /// capture over it whose copy reads the buffer. The buffer is only written through
    /// the hook in these tests.
    struct Rig {
        mem: Arc<Mutex<Vec<u8>>>,
        cap: Arc<Capture>,
    }

    impl Rig {
        fn new(pages: usize, side_pages: usize) -> Rig {
            let mut v = vec![0u8; pages * P];
            for (i, page) in v.chunks_mut(P).enumerate() {
                page.fill(i as u8);
            }
            let mem = Arc::new(Mutex::new(v));
            let cap = Arc::new(Capture::new(0x1000_0000, pages * P));
            let m = mem.clone();
            let copy: CopyFn = Box::new(move |off, dst: &mut [u8]| {
                let m = m.lock().unwrap();
                dst.copy_from_slice(&m[off as usize..off as usize + dst.len()]);
                Ok(())
            });
            assert!(cap.install((pages * P) as u64, side_pages * P, copy, false));
            Rig { mem, cap }
        }
        fn cut(&self) -> &Cut {
            self.cap.cut().unwrap()
        }
        /// The hook, then the write (as the arena's accessors do).
        fn write(&self, off: usize, byte: u8) {
            self.cap.before_write(off, 1);
            self.mem.lock().unwrap()[off] = byte;
        }
        fn side_page(&self, off: u64) -> Option<Vec<u8>> {
            self.cut().side_page(off)
        }
        /// A worker's chunk: the read, then the claim.
        fn stream(&self, off: usize, len: usize) -> (Vec<u8>, Vec<bool>) {
            let bytes = self.mem.lock().unwrap()[off..off + len].to_vec();
            let mut keep = vec![false; len / P];
            self.cut()
                .claim_for_stream(off as u64, len as u64, &mut keep);
            (bytes, keep)
        }
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_first_write_copies_the_cut_bytes_and_later_ones_do_not() {
        let r = Rig::new(8, 4);
        r.write(3 * P + 10, 0xAA);
        r.write(3 * P + 11, 0xBB);
        assert_eq!(r.side_page(3 * P as u64), Some(vec![3u8; P]));
        assert_eq!(
            r.cut().stats().copies,
            1,
            "the second write found the page copied"
        );
        assert_eq!(r.mem.lock().unwrap()[3 * P + 10], 0xAA);
        // A write across two pages copies both.
        r.write(5 * P - 1, 1);
        r.cap.before_write(5 * P - 1, 2);
        assert_eq!(r.side_page(4 * P as u64), Some(vec![4u8; P]));
        assert_eq!(r.side_page(5 * P as u64), Some(vec![5u8; P]));
    }

    #[test]
    fn a_page_of_a_streamed_chunk_needs_no_copy() {
        let r = Rig::new(8, 4);
        let (_, keep) = r.stream(0, 4 * P);
        assert!(keep.iter().all(|&k| k));
        r.write(2 * P, 9);
        r.write(6 * P, 9);
        assert_eq!(r.side_page(2 * P as u64), None);
        assert_eq!(r.side_page(6 * P as u64), Some(vec![6u8; P]));
        assert_eq!(r.cut().stats().copies, 1);
    }

    #[test]
    fn a_chunk_leaves_out_the_pages_writers_claimed_first() {
        // 40 pages: the chunk spans two state words.
        let r = Rig::new(40, 8);
        r.write(3 * P, 0xF0);
        r.write(33 * P + 7, 0xF0);
        let cut = r.cut();
        assert!(cut.pending(), "two copies wait for the stream");
        let (_, keep) = r.stream(0, 40 * P);
        let left_out: Vec<usize> = (0..40).filter(|&k| !keep[k]).collect();
        assert_eq!(left_out, vec![3, 33]);
        // Claiming again wins nothing.
        let (_, again) = r.stream(0, 40 * P);
        assert!(again.iter().all(|&k| !k));
        let mut buf = vec![0u8; 8 * P];
        assert_eq!(cut.drain_into(&mut buf, 3), None, "only two are waiting");
        let pages = cut.drain_into(&mut buf, 1).unwrap();
        assert_eq!(pages, vec![3 * P as u64, 33 * P as u64]);
        assert_eq!(&buf[..P], &[3u8; P][..]);
        assert_eq!(&buf[P..2 * P], &[33u8; P][..]);
        assert!(!cut.pending(), "everything is in the image");
        // Every page is settled: later writes copy nothing.
        r.write(20 * P, 1);
        assert_eq!(cut.stats().copies, 2);
    }

    /// Freed slots are taken again lowest first, so the side buffer's touched (resident)
    /// part follows the peak in use.
    #[test]
    fn copies_reuse_the_lowest_free_slots() {
        let r = Rig::new(500, 128);
        let mut buf = vec![0u8; 128 * P];
        // A burst that reaches the second word of the free bitmap, drained.
        for page in 0..70 {
            r.write(page * P, 0xEE);
        }
        assert_eq!(r.cut().drain_into(&mut buf, 1).map(|p| p.len()), Some(70));
        for round in 0..100 {
            for k in 0..4 {
                r.write((100 + round * 4 + k) * P, 0xEE);
            }
            assert_eq!(
                r.cut().ready_slot_indices(),
                vec![0, 1, 2, 3],
                "round {round}"
            );
            assert_eq!(r.cut().drain_into(&mut buf, 1).map(|p| p.len()), Some(4));
        }
        assert_eq!(r.cut().stats().used_peak, 70);
    }

    #[test]
    fn writes_past_the_cut_end_copy_nothing() {
        let cap = Capture::new(0, 64 * P);
        assert!(cap.install((2 * P) as u64, P, Box::new(|_, _: &mut [u8]| Ok(())), false));
        cap.before_write(5 * P, 100);
        assert_eq!(cap.cut().unwrap().stats().copies, 0);
        assert!(!cap.install(0, P, Box::new(|_, _: &mut [u8]| Ok(())), false));
    }

    #[test]
    fn a_full_side_buffer_makes_the_writer_wait_until_a_slot_is_freed() {
        let r = Arc::new(Rig::new(8, 2));
        r.write(0, 1);
        r.write(P, 1);
        let (tx, rx) = mpsc::channel();
        let r2 = r.clone();
        let writer = std::thread::spawn(move || {
            r2.write(2 * P, 7);
            tx.send(()).unwrap();
        });
        // The writer is held: both slots are taken.
        wait_until("the writer never waited", || r.cut().stats().full_waits > 0);
        assert!(rx.try_recv().is_err(), "the write went ahead of its copy");
        assert_eq!(
            r.mem.lock().unwrap()[2 * P],
            2,
            "page 2 changed before its copy"
        );
        // A worker drains one page: the writer copies page 2 and proceeds.
        let mut one = vec![0u8; P];
        assert_eq!(r.cut().drain_into(&mut one, 1), Some(vec![0]));
        assert_eq!(one, vec![0u8; P]);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        writer.join().unwrap();
        assert_eq!(r.side_page(2 * P as u64), Some(vec![2u8; P]));
        assert_eq!(r.mem.lock().unwrap()[2 * P], 7);
    }

    #[test]
    fn a_finished_capture_lets_waiting_writers_pass() {
        let r = Arc::new(Rig::new(8, 1));
        r.write(0, 1);
        let r2 = r.clone();
        let writer = std::thread::spawn(move || r2.write(3 * P, 5));
        wait_until("the writer never waited", || r.cut().stats().full_waits > 0);
        r.cut().finish();
        writer.join().unwrap();
        assert_eq!(r.mem.lock().unwrap()[3 * P], 5);
        assert!(!r.cut().pending());
    }

    /// Writers on two threads race a worker that streams chunks and drains the side
    /// buffer (too small for all the copies): the image gets every page exactly once,
    /// with its cut bytes.
    #[test]
    fn writers_racing_the_stream_leave_every_page_in_the_image_once() {
        const PAGES: usize = 256;
        const CHUNK: usize = 16;
        let r = Arc::new(Rig::new(PAGES, 8));
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                    for _ in 0..3000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let page = (x >> 20) as usize % PAGES;
                        // Never the page's fill byte: a write that reached the image shows.
                        r.write(page * P + (x as usize % P), !(page as u8));
                    }
                })
            })
            .collect();
        let mut image: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut put = |page: usize, bytes: &[u8]| {
            assert!(
                image.insert(page, bytes.to_vec()).is_none(),
                "page {page} written twice"
            );
        };
        let cut = r.cut();
        let mut buf = vec![0u8; 4 * P];
        let mut drain = |put: &mut dyn FnMut(usize, &[u8])| {
            while let Some(pages) = cut.drain_into(&mut buf, 1) {
                for (i, pg) in pages.iter().enumerate() {
                    put(*pg as usize / P, &buf[i * P..(i + 1) * P]);
                }
            }
        };
        for c in 0..PAGES / CHUNK {
            drain(&mut put);
            let (bytes, keep) = r.stream(c * CHUNK * P, CHUNK * P);
            for (k, &kept) in keep.iter().enumerate() {
                if kept {
                    put(c * CHUNK + k, &bytes[k * P..(k + 1) * P]);
                }
            }
            std::thread::yield_now();
        }
        // Every chunk is claimed: only copies under way or waiting are left.
        let deadline = Instant::now() + Duration::from_secs(20);
        while cut.pending() {
            assert!(Instant::now() < deadline, "a claimed copy never arrived");
            drain(&mut put);
            std::thread::yield_now();
        }
        drain(&mut put);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(image.len(), PAGES);
        for (page, bytes) in &image {
            assert!(
                bytes.iter().all(|&b| b == *page as u8),
                "page {page} is not its cut bytes"
            );
        }
        assert!(cut.stats().copies > 0, "no writer raced the stream");
    }

    #[test]
    fn other_threads_writes_reach_armed_captures_only() {
        let mut v = vec![1u8; 4 * P];
        let base = v.as_mut_ptr() as usize;
        let cap = Arc::new(Capture::new(base, 4 * P));
        let copies = Arc::new(AtomicUsize::new(0));
        let c2 = copies.clone();
        assert!(cap.install(
            (4 * P) as u64,
            4 * P,
            Box::new(move |_, dst: &mut [u8]| {
                c2.fetch_add(1, Ordering::SeqCst);
                dst.fill(1);
                Ok(())
            }),
            false
        ));
        external_write(base + P, 10, || ());
        assert_eq!(copies.load(Ordering::SeqCst), 0, "not armed");
        arm(&cap);
        external_write(base + P, 10, || ());
        external_write(base + 2 * P - 1, 2, || ()); // pages 1 (copied) and 2
        external_write(base + 8 * P, 2, || ()); // outside the range
        disarm(&cap);
        assert_eq!(copies.load(Ordering::SeqCst), 2);
        drop(v);
    }

    #[test]
    fn unseen_lists_written_pages_that_skipped_the_hook() {
        let cap = Capture::new(0, 16 * P);
        assert!(cap.install(
            (8 * P) as u64,
            4 * P,
            Box::new(|_, _: &mut [u8]| Ok(())),
            true
        ));
        cap.before_write(2 * P + 5, 1);
        let cut = cap.cut().unwrap();
        let mut keep = vec![false; 4];
        cut.claim_for_stream(0, 4 * P as u64, &mut keep);
        // Streamed pages still go through the hook in verify mode.
        cap.before_write(3 * P, 1);
        assert_eq!(
            cut.unseen(&[(2 * P as u64, 4 * P as u64), (10 * P as u64, P as u64)]),
            vec![(4 * P as u64, 2 * P as u64)]
        );
    }
}
