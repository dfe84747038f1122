//! Copy-before-write capture: how a freeze-free snapshot keeps the arena's bytes as they
//! were at its cut without write faults. Every write to arena memory passes through a
//! hook *before* it changes a byte: the executor's through [`Capture::before_write`]
//! (called by the arena's mutable accessors), other threads' (an I/O thread receiving a
//! big argument into its arena block) through [`external_write`]. While a cut is
//! installed, the first write to a page below the cut's end that the snapshot has not
//! streamed yet copies the page (its cut contents) into a bounded side buffer; the
//! snapshot's workers take copied pages from there instead of the region.
//!
//! **The fast path** is one load when no cut is installed, and a load of one word of the
//! `done` bitmap per page written when one is: a page is *done* once it was copied out
//! or its chunk was streamed, and a done page needs nothing more. Only the first write to
//! a page that is not done takes the lock.
//!
//! **The copy itself** is made by a function the snapshot installs with the cut:
//! [`region_copy`], a plain memory copy, sound because no thread writes a page that is
//! not done while the lock is held (see there). The tests install copies of their own.
//!
//! **Backpressure.** The side buffer holds [`Cut::slots`] pages. A writer that finds it
//! full waits on the condvar until a worker drains a batch into the image (or the
//! capture ends): memory stays bounded whatever the write rate.
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
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::Instant;

/// Copies `dst.len()` bytes of the region at `offset` into `dst`.
pub type CopyFn = Box<dyn Fn(u64, &mut [u8]) -> io::Result<()> + Send + Sync>;

/// The copy a cut over the region at `base` (of `len` bytes) uses in production: a plain
/// memory copy.
///
/// **Why a plain copy is defined here** when the snapshot's workers read the region only
/// through the kernel (`persistence::snapshot::racy_copy`): the copy runs only in
/// [`Cut::copy_out`], under the cut's lock, for a page that is not *done*. Every writer to
/// the region (the executor through [`Capture::before_write`], an I/O thread through
/// [`external_write`]) passes the hook for a page before it writes it, and the hook marks
/// the page done (under the same lock) before it returns. So while a page is not done and
/// the lock is held, no thread is writing it, and the writer that comes next takes the
/// lock after us (a happens-before through the mutex, or through the done bit's
/// release/acquire). The workers' concurrent kernel copies only read. A kernel copy here
/// cost 10–14 µs per page on this VM under load, on the executor, on every first write.
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
    /// One bit per page below `end`: copied out, or its chunk streamed (nothing to do).
    done: Box<[AtomicU64]>,
    /// One bit per page that passed through the hook (`verify` only).
    seen: Option<Box<[AtomicU64]>>,
    /// The capture is over (streamed, failed or cancelled): writers pass.
    finished: AtomicBool,
    copy: CopyFn,
    st: Mutex<SideState>,
    /// Signalled when slots are freed and when the capture ends.
    pub cv: Condvar,
    /// The side buffer: `slots` pages, owned (freed on drop); written only through the
    /// slot a writer took off the free list, read only under the lock.
    side: *mut u8,
    slots: usize,
}

// SAFETY: `side` is a heap buffer owned by the cut; who may touch which slot is decided
// under `st` (see `Cut::slot_mut`), so sharing the cut between threads is sound.
unsafe impl Send for Cut {}
unsafe impl Sync for Cut {}

impl Drop for Cut {
    fn drop(&mut self) {
        let len = self.slots * PAGE_BYTES;
        // SAFETY: made by `Box::into_raw` of a boxed slice of exactly `len` bytes.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.side, len)) });
    }
}

/// The side buffer's bookkeeping (under [`Cut::lock`]).
pub struct SideState {
    /// Copied-out page (arena offset) → slot.
    pub side: std::collections::HashMap<u64, u32>,
    free: Vec<u32>,
    pub used_peak: usize,
    /// Times a writer waited for a free slot.
    pub waits: u64,
    /// Pages copied out, and the writers' time on them (ns).
    pub copies: u64,
    pub copy_ns: u64,
    /// The writers' longest wait for the lock (ns), and waits over 1 ms: a worker holds
    /// it for µs, so a long wait is a lock holder that lost its CPU.
    pub lock_wait_ns_max: u64,
    pub lock_waits_over_1ms: u64,
    /// A copy failed: the snapshot fails with this.
    pub error: Option<String>,
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
        let words = pages.div_ceil(64).max(1);
        let slots = (side_bytes / PAGE_BYTES).max(1);
        let cut = Cut {
            end,
            done: zeroed_words(words),
            seen: verify.then(|| zeroed_words(words)),
            finished: AtomicBool::new(false),
            copy,
            st: Mutex::new(SideState {
                side: std::collections::HashMap::new(),
                free: (0..slots as u32).rev().collect(),
                used_peak: 0,
                waits: 0,
                copies: 0,
                copy_ns: 0,
                lock_wait_ns_max: 0,
                lock_waits_over_1ms: 0,
                error: None,
            }),
            cv: Condvar::new(),
            // Zeroed lazily by the kernel: only slots actually used become resident.
            side: Box::into_raw(vec![0u8; slots * PAGE_BYTES].into_boxed_slice()) as *mut u8,
            slots,
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
    pub fn lock(&self) -> MutexGuard<'_, SideState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pages the side buffer holds at most.
    pub fn slots(&self) -> usize {
        self.slots
    }

    #[inline(always)]
    fn before_write(&self, off: u64, len: u64) {
        if off >= self.end || len == 0 {
            return;
        }
        let first = off as usize / PAGE_BYTES;
        let last = ((off + len - 1).min(self.end - 1)) as usize / PAGE_BYTES;
        if self.seen.is_none() && (first..=last).all(|p| bit(&self.done, p)) {
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
        let asked = Instant::now();
        let mut st = self.lock();
        let waited_ns = asked.elapsed().as_nanos() as u64;
        st.lock_wait_ns_max = st.lock_wait_ns_max.max(waited_ns);
        if waited_ns > 1_000_000 {
            st.lock_waits_over_1ms += 1;
        }
        for p in first..=last {
            loop {
                // Re-checked after every wait: a finished capture wakes its writers, and
                // no worker would free a slot any more.
                if self.finished.load(Ordering::Acquire) || bit(&self.done, p) {
                    break;
                }
                if let Some(slot) = st.free.pop() {
                    let started = Instant::now();
                    // SAFETY: the slot lies inside the side buffer and is ours: taken off
                    // the free list under the lock, and only read again (under the lock)
                    // once it is in the side map.
                    let dst = unsafe { self.slot_mut(slot) };
                    // The page holds the cut's bytes: every writer to it passes here first,
                    // and the first one (us) has not written yet.
                    match (self.copy)((p * PAGE_BYTES) as u64, dst) {
                        Ok(()) => {
                            st.side.insert((p * PAGE_BYTES) as u64, slot);
                            set_bit(&self.done, p);
                            let used = self.slots - st.free.len();
                            st.used_peak = st.used_peak.max(used);
                            st.copies += 1;
                            st.copy_ns += started.elapsed().as_nanos() as u64;
                        }
                        Err(e) => {
                            st.free.push(slot);
                            st.error.get_or_insert_with(|| e.to_string());
                            // The image cannot be right any more: let every writer pass.
                            self.finished.store(true, Ordering::Release);
                            self.cv.notify_all();
                        }
                    }
                    break;
                }
                st.waits += 1;
                st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// # Safety
    /// The caller owns `slot` (took it off the free list, or holds the lock while it is
    /// in the side map).
    #[allow(clippy::mut_from_ref)]
    unsafe fn slot_mut(&self, slot: u32) -> &mut [u8] {
        debug_assert!((slot as usize) < self.slots);
        // SAFETY: `slot < slots`, so the page lies inside `side`; the caller owns it.
        unsafe {
            std::slice::from_raw_parts_mut(self.side.add(slot as usize * PAGE_BYTES), PAGE_BYTES)
        }
    }

    /// The bytes of the copied-out page in `slot` (call with the lock held, the slot in
    /// the side map).
    pub fn slot_bytes<'a>(&'a self, _st: &'a SideState, slot: u32) -> &'a [u8] {
        assert!((slot as usize) < self.slots);
        // SAFETY: inside `side`; a slot in the side map is written by nobody while the
        // lock (whose guard `_st` borrows) is held.
        unsafe { std::slice::from_raw_parts(self.side.add(slot as usize * PAGE_BYTES), PAGE_BYTES) }
    }

    /// Gives `slot` back (its page was written into the image).
    pub fn free_slot(&self, st: &mut SideState, slot: u32) {
        st.free.push(slot);
    }

    /// The pages of `[off, off+len)` are in the image now (their chunk was streamed):
    /// later writes to them need no copy. Call with the lock held, after the chunk's
    /// bytes were read and the side map's pages taken.
    pub fn mark_streamed(&self, _st: &mut SideState, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = off as usize / PAGE_BYTES;
        let last = (off + len - 1) as usize / PAGE_BYTES;
        for p in first..=last {
            set_bit(&self.done, p);
        }
    }

    /// The capture is over: writers pass from now on, and those waiting wake.
    pub fn finish(&self) {
        let _g = self.lock();
        self.finished.store(true, Ordering::Release);
        self.cv.notify_all();
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
    use std::sync::mpsc;
    use std::time::Duration;

    const P: usize = PAGE_BYTES;

    /// A "region" of `pages` pages in a buffer, each page filled with its index, and a
    /// capture over it whose copy reads the buffer. The buffer is only written through
    /// the hook in these tests, and on one thread at a time.
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
        /// The hook, then the write (as the arena's accessors do).
        fn write(&self, off: usize, byte: u8) {
            self.cap.before_write(off, 1);
            self.mem.lock().unwrap()[off] = byte;
        }
        fn side_page(&self, off: u64) -> Option<Vec<u8>> {
            let cut = self.cap.cut().unwrap();
            let st = cut.lock();
            st.side.get(&off).map(|&s| cut.slot_bytes(&st, s).to_vec())
        }
    }

    #[test]
    fn a_first_write_copies_the_cut_bytes_and_later_ones_do_not() {
        let r = Rig::new(8, 4);
        r.write(3 * P + 10, 0xAA);
        r.write(3 * P + 11, 0xBB);
        assert_eq!(r.side_page(3 * P as u64), Some(vec![3u8; P]));
        let cut = r.cap.cut().unwrap();
        assert_eq!(cut.lock().copies, 1, "the second write found the page done");
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
        let cut = r.cap.cut().unwrap();
        cut.mark_streamed(&mut cut.lock(), 0, 4 * P as u64);
        r.write(2 * P, 9);
        r.write(6 * P, 9);
        assert_eq!(r.side_page(2 * P as u64), None);
        assert_eq!(r.side_page(6 * P as u64), Some(vec![6u8; P]));
        assert_eq!(cut.lock().copies, 1);
    }

    #[test]
    fn writes_past_the_cut_end_copy_nothing() {
        let cap = Capture::new(0, 64 * P);
        assert!(cap.install((2 * P) as u64, P, Box::new(|_, _: &mut [u8]| Ok(())), false));
        cap.before_write(5 * P, 100);
        assert_eq!(cap.cut().unwrap().lock().copies, 0);
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
        let cut = r.cap.cut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cut.lock().waits == 0 {
            assert!(Instant::now() < deadline, "the writer never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(rx.try_recv().is_err(), "the write went ahead of its copy");
        assert_eq!(
            r.mem.lock().unwrap()[2 * P],
            2,
            "page 2 changed before its copy"
        );
        // A worker drains page 0: the writer copies page 2 and proceeds.
        {
            let mut st = cut.lock();
            let slot = st.side.remove(&0).unwrap();
            cut.free_slot(&mut st, slot);
        }
        cut.cv.notify_all();
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
        let cut = r.cap.cut().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cut.lock().waits == 0 {
            assert!(Instant::now() < deadline, "the writer never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        cut.finish();
        writer.join().unwrap();
        assert_eq!(r.mem.lock().unwrap()[3 * P], 5);
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
        external_write(base + 2 * P - 1, 2, || ()); // pages 1 (done) and 2
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
        cut.mark_streamed(&mut cut.lock(), 0, 4 * P as u64);
        // Streamed pages still go through the hook in verify mode.
        cap.before_write(3 * P, 1);
        assert_eq!(
            cut.unseen(&[(2 * P as u64, 4 * P as u64), (10 * P as u64, P as u64)]),
            vec![(4 * P as u64, 2 * P as u64)]
        );
    }
}
